// TLS 1.3's record layer after OpenSSL's handshake (see CSparkTLSRecord.h).
#include "CSparkTLSRecord.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum {
    CONTENT_ALERT = 21,
    CONTENT_HANDSHAKE = 22,
    CONTENT_APPLICATION_DATA = 23,
    HANDSHAKE_KEY_UPDATE = 24,
    TAG_LENGTH = 16,
    IV_LENGTH = 12,
    KEY_MAXIMUM = 32,
    /// Application data a record carries at most.
    PLAINTEXT_MAXIMUM = 16384,
};

/// AES-GCM's records under one key are limited (RFC 8446, 5.5: 2^24.5); the connection closes
/// at 2^24 in either direction rather than updating its keys.
static const uint64_t RECORDS_MAXIMUM = (uint64_t)1 << 24;

struct suite {
    const char *name;
    const char *cipher_name;
    const char *digest_name;
    size_t key_length;
    size_t hash_length;
};

static const struct suite suites[] = {
    {"TLS_AES_128_GCM_SHA256", "AES-128-GCM", "SHA256", 16, 32},
    {"TLS_AES_256_GCM_SHA384", "AES-256-GCM", "SHA384", 32, 48},
    {"TLS_CHACHA20_POLY1305_SHA256", "ChaCha20-Poly1305", "SHA256", 32, 32},
};
enum { SUITE_COUNT = sizeof suites / sizeof suites[0] };

/// The ciphers, fetched once (an implicit fetch per record would look them up every time).
static EVP_CIPHER *ciphers[SUITE_COUNT];
static pthread_once_t fetched = PTHREAD_ONCE_INIT;

static void fetch_ciphers(void) {
    for (size_t i = 0; i < SUITE_COUNT; i++) ciphers[i] = EVP_CIPHER_fetch(NULL, suites[i].cipher_name, NULL);
}

struct tls13 {
    size_t suite;
    uint8_t read_secret[TLS_SECRET_MAXIMUM], write_secret[TLS_SECRET_MAXIMUM];
    uint8_t read_key[KEY_MAXIMUM], write_key[KEY_MAXIMUM];
    uint8_t read_iv[IV_LENGTH], write_iv[IV_LENGTH];
    uint64_t read_sequence, write_sequence;
    /// The peer asked for a KeyUpdate: one goes before the next application data.
    int key_update_due;
};

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

int tls13_capture(struct tls13_secrets *secrets, const char *line) {
    static const char client[] = "CLIENT_TRAFFIC_SECRET_0 ", server[] = "SERVER_TRAFFIC_SECRET_0 ";
    uint8_t *into;
    size_t *length;
    if (strncmp(line, client, sizeof client - 1) == 0) {
        into = secrets->client;
        length = &secrets->client_length;
    } else if (strncmp(line, server, sizeof server - 1) == 0) {
        into = secrets->server;
        length = &secrets->server_length;
    } else {
        return 0;
    }
    // The client random (64 hex digits), a space, then the secret.
    const char *random = line + sizeof client - 1;
    const char *space = strchr(random, ' ');
    if (!space || space - random != 64) return 0;
    const char *hex = space + 1;
    size_t digits = strlen(hex);
    if (digits % 2 || digits / 2 > TLS_SECRET_MAXIMUM || digits == 0) return 0;
    for (size_t i = 0; i < digits / 2; i++) {
        int high = hex_digit(hex[2 * i]), low = hex_digit(hex[2 * i + 1]);
        if (high < 0 || low < 0) return 0;
        into[i] = (uint8_t)(high << 4 | low);
    }
    *length = digits / 2;
    return 1;
}

/// HKDF-Expand-Label(secret, label, "", length) with the suite's hash (RFC 8446, 7.1); `length`
/// is at most the hash's, so HKDF-Expand is one HMAC.
static int expand_label(const struct suite *suite, const uint8_t *secret, const char *label, uint8_t *out, size_t length) {
    uint8_t info[2 + 1 + 6 + 32 + 1 + 1];
    size_t label_length = strlen(label);
    if (label_length > 32 || length > suite->hash_length) return 0;
    size_t at = 0;
    info[at++] = (uint8_t)(length >> 8);
    info[at++] = (uint8_t)length;
    info[at++] = (uint8_t)(6 + label_length);
    memcpy(info + at, "tls13 ", 6);
    at += 6;
    memcpy(info + at, label, label_length);
    at += label_length;
    info[at++] = 0;  // the context: empty
    info[at++] = 1;  // HKDF-Expand's first block counter
    uint8_t block[EVP_MAX_MD_SIZE];
    size_t block_length = 0;
    if (!EVP_Q_mac(NULL, "HMAC", NULL, suite->digest_name, NULL, secret, suite->hash_length, info, at, block, sizeof block,
            &block_length)
        || block_length < length) {
        OPENSSL_cleanse(block, sizeof block);
        return 0;
    }
    memcpy(out, block, length);
    OPENSSL_cleanse(block, sizeof block);
    return 1;
}

/// The key and IV of a traffic secret.
static int derive(const struct suite *suite, const uint8_t *secret, uint8_t *key, uint8_t *iv) {
    return expand_label(suite, secret, "key", key, suite->key_length) && expand_label(suite, secret, "iv", iv, IV_LENGTH);
}

/// The next generation of a traffic secret, and its key and IV (RFC 8446, 7.2).
static int update(const struct suite *suite, uint8_t *secret, uint8_t *key, uint8_t *iv) {
    uint8_t next[TLS_SECRET_MAXIMUM];
    if (!expand_label(suite, secret, "traffic upd", next, suite->hash_length)) return 0;
    memcpy(secret, next, suite->hash_length);
    OPENSSL_cleanse(next, sizeof next);
    return derive(suite, secret, key, iv);
}

struct tls13 *tls13_take_over(SSL *ssl, struct tls13_secrets *secrets) {
    pthread_once(&fetched, fetch_ciphers);
    struct tls13 *tls = NULL;
    const SSL_CIPHER *cipher = SSL_get_current_cipher(ssl);
    const char *name = cipher ? SSL_CIPHER_get_name(cipher) : "";
    size_t suite = 0;
    while (suite < SUITE_COUNT && strcmp(suites[suite].name, name) != 0) suite++;
    size_t hash_length = suite < SUITE_COUNT ? suites[suite].hash_length : 0;
    // Bytes OpenSSL has read but not handed out would be lost: such a connection stays with it.
    if (SSL_version(ssl) == TLS1_3_VERSION && suite < SUITE_COUNT && ciphers[suite] && secrets->client_length == hash_length
        && secrets->server_length == hash_length && !SSL_has_pending(ssl)) {
        tls = calloc(1, sizeof *tls);
    }
    if (tls) {
        tls->suite = suite;
        memcpy(tls->read_secret, secrets->client, hash_length);
        memcpy(tls->write_secret, secrets->server, hash_length);
        if (!derive(&suites[suite], tls->read_secret, tls->read_key, tls->read_iv)
            || !derive(&suites[suite], tls->write_secret, tls->write_key, tls->write_iv)) {
            tls13_free(tls);
            tls = NULL;
        }
    }
    OPENSSL_cleanse(secrets, sizeof *secrets);
    return tls;
}

void tls13_free(struct tls13 *tls) {
    if (!tls) return;
    OPENSSL_cleanse(tls, sizeof *tls);
    free(tls);
}

/// The nonce of record `sequence`: the IV with the sequence number XORed into its last 8 bytes.
static void nonce(const uint8_t *iv, uint64_t sequence, uint8_t *out) {
    memcpy(out, iv, IV_LENGTH);
    for (int i = 0; i < 8; i++) out[IV_LENGTH - 1 - i] ^= (uint8_t)(sequence >> (8 * i));
}

/// Seals one record of `type` carrying `length` bytes into `out` (room for length + 22).
static int seal_record(
    struct tls13 *tls, EVP_CIPHER_CTX *context, int type, const uint8_t *data, size_t length, uint8_t *out) {
    if (tls->write_sequence >= RECORDS_MAXIMUM) return 0;
    size_t inner = length + 1, ciphertext = inner + TAG_LENGTH;
    out[0] = CONTENT_APPLICATION_DATA;
    out[1] = 0x03;
    out[2] = 0x03;
    out[3] = (uint8_t)(ciphertext >> 8);
    out[4] = (uint8_t)ciphertext;
    uint8_t *body = out + TLS_RECORD_HEADER;
    memmove(body, data, length);
    body[length] = (uint8_t)type;
    uint8_t iv[IV_LENGTH];
    nonce(tls->write_iv, tls->write_sequence, iv);
    int written = 0, ok = EVP_CipherInit_ex2(context, ciphers[tls->suite], tls->write_key, iv, 1, NULL)
        && EVP_CipherUpdate(context, NULL, &written, out, TLS_RECORD_HEADER)
        && EVP_CipherUpdate(context, body, &written, body, (int)inner) && (size_t)written == inner
        && EVP_CipherFinal_ex(context, body + inner, &written)
        && EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_GET_TAG, TAG_LENGTH, body + inner) == 1;
    tls->write_sequence++;
    return ok;
}

uint8_t *tls13_seal(struct tls13 *tls, EVP_CIPHER_CTX *context, const uint8_t *data, size_t length, size_t *sealed_length) {
    size_t records = length / PLAINTEXT_MAXIMUM + 1;
    size_t capacity = length + records * (TLS_RECORD_HEADER + 1 + TAG_LENGTH) + 64;
    uint8_t *sealed = malloc(capacity);
    if (!sealed) return NULL;
    size_t at = 0;
    if (tls->key_update_due) {
        // KeyUpdate(update_not_requested) under the current keys, then the next generation.
        const uint8_t message[5] = {HANDSHAKE_KEY_UPDATE, 0, 0, 1, 0};
        if (!seal_record(tls, context, CONTENT_HANDSHAKE, message, sizeof message, sealed)
            || !update(&suites[tls->suite], tls->write_secret, tls->write_key, tls->write_iv)) {
            free(sealed);
            return NULL;
        }
        at += TLS_RECORD_HEADER + sizeof message + 1 + TAG_LENGTH;
        tls->write_sequence = 0;
        tls->key_update_due = 0;
    }
    size_t taken = 0;
    do {
        size_t chunk = length - taken < PLAINTEXT_MAXIMUM ? length - taken : PLAINTEXT_MAXIMUM;
        if (!seal_record(tls, context, CONTENT_APPLICATION_DATA, data + taken, chunk, sealed + at)) {
            free(sealed);
            return NULL;
        }
        at += TLS_RECORD_HEADER + chunk + 1 + TAG_LENGTH;
        taken += chunk;
    } while (taken < length);
    *sealed_length = at;
    return sealed;
}

uint8_t *tls13_close_notify(struct tls13 *tls, EVP_CIPHER_CTX *context, size_t *sealed_length) {
    const uint8_t alert[2] = {1, 0};  // warning, close_notify
    uint8_t *sealed = malloc(TLS_RECORD_HEADER + sizeof alert + 1 + TAG_LENGTH);
    if (!sealed) return NULL;
    if (!seal_record(tls, context, CONTENT_ALERT, alert, sizeof alert, sealed)) {
        free(sealed);
        return NULL;
    }
    *sealed_length = TLS_RECORD_HEADER + sizeof alert + 1 + TAG_LENGTH;
    return sealed;
}

/// Acts on the handshake messages a record carried: KeyUpdate only, and last.
static int handshake(struct tls13 *tls, const uint8_t *messages, size_t length) {
    if (length != 5 || messages[0] != HANDSHAKE_KEY_UPDATE || messages[1] || messages[2] || messages[3] != 1) return 0;
    if (messages[4] > 1) return 0;
    if (!update(&suites[tls->suite], tls->read_secret, tls->read_key, tls->read_iv)) return 0;
    tls->read_sequence = 0;
    if (messages[4] == 1) tls->key_update_due = 1;
    return 1;
}

long tls13_open(struct tls13 *tls, EVP_CIPHER_CTX *context, const uint8_t *raw, size_t raw_length, uint8_t *plain,
    size_t *plain_length) {
    size_t used = 0;
    *plain_length = 0;
    while (raw_length - used >= TLS_RECORD_HEADER) {
        const uint8_t *header = raw + used;
        size_t ciphertext = (size_t)header[3] << 8 | header[4];
        if (header[0] != CONTENT_APPLICATION_DATA || header[1] != 0x03 || header[2] != 0x03
            || ciphertext > TLS_RECORD_CIPHERTEXT_MAXIMUM || ciphertext < 1 + TAG_LENGTH)
            return -1;
        if (raw_length - used < TLS_RECORD_HEADER + ciphertext) break;
        if (tls->read_sequence >= RECORDS_MAXIMUM) return -1;
        size_t inner = ciphertext - TAG_LENGTH;
        uint8_t *out = plain + *plain_length;
        uint8_t iv[IV_LENGTH];
        nonce(tls->read_iv, tls->read_sequence, iv);
        int written = 0, ok = EVP_CipherInit_ex2(context, ciphers[tls->suite], tls->read_key, iv, 0, NULL)
            && EVP_CipherUpdate(context, NULL, &written, header, TLS_RECORD_HEADER)
            && EVP_CipherUpdate(context, out, &written, header + TLS_RECORD_HEADER, (int)inner) && (size_t)written == inner
            && EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_SET_TAG, TAG_LENGTH, (void *)(header + TLS_RECORD_HEADER + inner))
                == 1
            && EVP_CipherFinal_ex(context, out + inner, &written) == 1;
        if (!ok) return -1;
        tls->read_sequence++;
        used += TLS_RECORD_HEADER + ciphertext;
        // The inner plaintext: the content, its type, then zeros (padding).
        size_t end = inner;
        while (end > 0 && out[end - 1] == 0) end--;
        if (end == 0) return -1;
        uint8_t type = out[end - 1];
        size_t content = end - 1;
        if (type == CONTENT_APPLICATION_DATA) {
            if (content > PLAINTEXT_MAXIMUM) return -1;
            *plain_length += content;
        } else if (type == CONTENT_HANDSHAKE) {
            if (!handshake(tls, out, content)) return -1;
        } else {
            // An alert (close_notify or an error) ends the connection; anything else is not TLS.
            return -1;
        }
    }
    return (long)used;
}
