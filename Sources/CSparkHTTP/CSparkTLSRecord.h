// TLS 1.3's record layer (RFC 8446, section 5) for connections whose handshake OpenSSL has
// finished: private to the HTTP server (CSparkHTTP.c).
//
// An OpenSSL connection holds about 15 KB for as long as it is open (its `SSL` object, two cipher
// contexts, the session, the handshake's buffer), which for a device holding a long-poll is most
// of what it costs. What a TLS 1.3 connection needs once the handshake is over is far less: the
// two application traffic secrets, the keys and IVs derived from them, and two sequence numbers.
// So after OpenSSL's handshake the server takes those over (OpenSSL hands the secrets to the
// keylog callback, as it does for QUIC stacks built on it) and frees the `SSL`; records are then
// sealed and opened here with OpenSSL's AEADs. What this layer does is what the kernel's TLS
// offload does with the same secrets: the record framing, the nonces, the inner content type and
// KeyUpdate. A connection that negotiated TLS 1.2, or a suite not listed here, stays with
// OpenSSL.
#ifndef C_SPARK_TLS_RECORD_H
#define C_SPARK_TLS_RECORD_H

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <stddef.h>
#include <stdint.h>

enum {
    /// A record's header, and the largest ciphertext a record may carry (2^14 + 256).
    TLS_RECORD_HEADER = 5,
    TLS_RECORD_CIPHERTEXT_MAXIMUM = 16384 + 256,
    TLS_SECRET_MAXIMUM = 48,
};

/// The two application traffic secrets as the keylog callback gave them.
struct tls13_secrets {
    uint8_t client[TLS_SECRET_MAXIMUM], server[TLS_SECRET_MAXIMUM];
    size_t client_length, server_length;
};

struct tls13;

/// Remembers a secret from an OpenSSL keylog line ("LABEL <client random> <secret>"): the
/// application traffic secrets only. 0 when the line is not one of them or is malformed.
int tls13_capture(struct tls13_secrets *secrets, const char *line);

/// The record layer of a connection whose handshake `ssl` has just finished, or NULL when it
/// cannot be taken over (not TLS 1.3, a suite not supported, secrets missing, bytes OpenSSL
/// holds unread). Wipes `secrets`. The caller frees `ssl` after a success.
struct tls13 *tls13_take_over(SSL *ssl, struct tls13_secrets *secrets);

/// Opens the whole records at the start of `raw`, appending what they carry for the application
/// to `plain` (which has room for `raw_length` more bytes). Returns how many bytes of `raw` were
/// used (a record cut short stays for later), or -1 when the connection must close: a record
/// that does not authenticate, too long, an alert (close_notify included), a handshake message
/// other than KeyUpdate.
long tls13_open(struct tls13 *tls, EVP_CIPHER_CTX *context, const uint8_t *raw, size_t raw_length, uint8_t *plain,
    size_t *plain_length);

/// Seals `length` bytes of application data into records (preceded by a KeyUpdate when the peer
/// asked for one): a malloc'd buffer, NULL when out of memory or out of sequence numbers.
uint8_t *tls13_seal(struct tls13 *tls, EVP_CIPHER_CTX *context, const uint8_t *data, size_t length, size_t *sealed_length);

/// A close_notify alert, sealed (malloc'd; NULL when it cannot be).
uint8_t *tls13_close_notify(struct tls13 *tls, EVP_CIPHER_CTX *context, size_t *sealed_length);

/// Wipes and frees the record layer.
void tls13_free(struct tls13 *tls);

#endif
