// How a connection's bytes travel (struct spark_http_transport): in the clear on the socket, or
// through OpenSSL, which does the handshake, seals and opens every record, sends the alerts and
// answers KeyUpdate. The server's TLS context is made here too.
#include "CSparkHTTPInternal.h"

// MARK: - In the clear

static int plain_handshake(struct connection *connection, enum step *wait) {
    (void)connection;
    (void)wait;
    return 1;
}

static long plain_receive(struct connection *connection, uint8_t *to, size_t room, enum step *wait) {
    for (;;) {
        ssize_t received = recv(connection->fd, to, room, 0);
        if (received < 0 && errno == EINTR) continue;
        if (received < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return *wait = WAIT_READ, 0;
        return received <= 0 ? -1 : (long)received;
    }
}

static long plain_send(struct connection *connection, const uint8_t *from, size_t length, enum step *wait) {
    for (;;) {
        ssize_t sent = send(connection->fd, from, length, MSG_NOSIGNAL);
        if (sent < 0 && errno == EINTR) continue;
        if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return *wait = WAIT_WRITE, 0;
        return sent < 0 ? -1 : (long)sent;
    }
}

static void plain_nothing(struct connection *connection) { (void)connection; }

const struct spark_http_transport spark_http_plain_transport = {
    .handshake = plain_handshake,
    .receive = plain_receive,
    .send = plain_send,
    .close_notify = plain_nothing,
    .park = plain_nothing,
    .release = plain_nothing,
    .secure = 0,
};

// MARK: - Through OpenSSL

/// What an OpenSSL call (read, write, handshake) that returned `result` (≤ 0) waits for: 0 with `*wait` set,
/// -2 when the peer sent close_notify, or -1 when the connection is over (OpenSSL has sent the alert
/// a fatal error calls for).
static int tls_wait(SSL *tls, int result, enum step *wait) {
    int error = SSL_get_error(tls, result);
    if (error == SSL_ERROR_WANT_READ) return *wait = WAIT_READ, 0;
    if (error == SSL_ERROR_WANT_WRITE) return *wait = WAIT_WRITE, 0;
    if (error == SSL_ERROR_ZERO_RETURN) return -2;
    return -1;
}

static int tls_handshake(struct connection *connection, enum step *wait) {
    ERR_clear_error();
    int done = SSL_do_handshake(connection->tls);
    if (done == 1) return 1;
    return tls_wait(connection->tls, done, wait) == 0 ? 0 : -1;
}

static long tls_receive(struct connection *connection, uint8_t *to, size_t room, enum step *wait) {
    ERR_clear_error();
    int n = SSL_read(connection->tls, to, room > INT32_MAX ? INT32_MAX : (int)room);
    return n > 0 ? n : tls_wait(connection->tls, n, wait);
}

static long tls_send(struct connection *connection, const uint8_t *from, size_t length, enum step *wait) {
    ERR_clear_error();
    int n = SSL_write(connection->tls, from, length > INT32_MAX ? INT32_MAX : (int)length);
    if (n > 0) return n;
    // A close_notify in answer to a write is the end of the connection too.
    int waiting = tls_wait(connection->tls, n, wait);
    return waiting == 0 ? 0 : -1;
}

static void tls_close_notify(struct connection *connection) {
    ERR_clear_error();
    SSL_shutdown(connection->tls);
}

/// Waiting, the connection keeps no buffer: OpenSSL's go too when it holds nothing unread.
static void tls_park(struct connection *connection) { SSL_free_buffers(connection->tls); }

static void tls_release(struct connection *connection) {
    SSL_free(connection->tls);
    connection->tls = NULL;
}

const struct spark_http_transport spark_http_tls_transport = {
    .handshake = tls_handshake,
    .receive = tls_receive,
    .send = tls_send,
    .close_notify = tls_close_notify,
    .park = tls_park,
    .release = tls_release,
    .secure = 1,
};

int spark_http_attach_tls(struct connection *connection, SSL_CTX *context) {
    connection->tls = SSL_new(context);
    if (!connection->tls) return 0;
    SSL_set_fd(connection->tls, connection->fd);
    SSL_set_accept_state(connection->tls);
    SSL_set_app_data(connection->tls, connection);
    connection->transport = &spark_http_tls_transport;
    return 1;
}

// MARK: - The server's context

/// The TLS 1.2 suites offered, strongest first (Mozilla's "intermediate" list).
#define TLS12_CIPHERS                                                                                              \
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"                  \
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"

static int choose_http11(
    SSL *tls, const unsigned char **out, unsigned char *out_length, const unsigned char *in, unsigned int in_length,
    void *argument) {
    (void)tls;
    (void)argument;
    for (unsigned i = 0; i < in_length;) {
        unsigned length = in[i];
        if (i + 1 + length > in_length) break;
        if (length == 8 && memcmp(in + i + 1, "http/1.1", 8) == 0) {
            *out = in + i + 1;
            *out_length = 8;
            return SSL_TLSEXT_ERR_OK;
        }
        i += 1 + length;
    }
    return SSL_TLSEXT_ERR_NOACK;
}

SSL_CTX *spark_http_make_tls(const char *certificate_pem, const char *key_pem) {
    SSL_CTX *context = SSL_CTX_new(TLS_server_method());
    if (!context) return NULL;
    SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION);
    SSL_CTX_set_options(context, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_TICKET);
    // TLS 1.2: forward-secret key exchange and AEAD suites only (no CBC, so no Lucky13; no RSA
    // key transport; no SHA-1 MACs), for ECDSA and RSA certificates alike. TLS 1.3's suites are
    // all AEADs; OpenSSL's defaults stand.
    if (SSL_CTX_set_cipher_list(context, TLS12_CIPHERS) != 1) {
        SSL_CTX_free(context);
        return NULL;
    }
    // An idle connection keeps no record buffers (and a parked one is told to free them:
    // SSL_free_buffers in hand_out); no session is kept here, and none resumed.
    SSL_CTX_set_mode(
        context, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_session_cache_mode(context, SSL_SESS_CACHE_OFF);
    // No TLS 1.3 tickets either: nothing would resume with them (a device that reconnects makes a
    // full handshake), and each is a record written after the handshake.
    SSL_CTX_set_num_tickets(context, 0);
    SSL_CTX_set_alpn_select_cb(context, choose_http11, NULL);
    BIO *certificates = BIO_new_mem_buf(certificate_pem, -1);
    BIO *keys = BIO_new_mem_buf(key_pem, -1);
    X509 *leaf = certificates ? PEM_read_bio_X509(certificates, NULL, NULL, NULL) : NULL;
    EVP_PKEY *key = keys ? PEM_read_bio_PrivateKey(keys, NULL, NULL, NULL) : NULL;
    int ok = leaf && key && SSL_CTX_use_certificate(context, leaf) == 1 && SSL_CTX_use_PrivateKey(context, key) == 1
        && SSL_CTX_check_private_key(context) == 1;
    // The rest of the chain, in order.
    for (X509 *next; ok && (next = PEM_read_bio_X509(certificates, NULL, NULL, NULL));) {
        if (SSL_CTX_add0_chain_cert(context, next) != 1) {
            X509_free(next);
            ok = 0;
        }
    }
    ERR_clear_error();
    X509_free(leaf);
    EVP_PKEY_free(key);
    BIO_free(certificates);
    BIO_free(keys);
    if (!ok) {
        SSL_CTX_free(context);
        return NULL;
    }
    return context;
}
