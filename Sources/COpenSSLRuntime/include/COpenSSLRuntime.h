#ifndef C_OPENSSL_RUNTIME_H
#define C_OPENSSL_RUNTIME_H

/// 1 when OpenSSL was initialised, before `main`, without its exit-time cleanup; 0 when that
/// initialisation failed (OpenSSL then cleans up at exit as it does by default).
int spark_openssl_runtime_status(void);

#include <stddef.h>

/// SHA-256 of `count` bytes at `data` into the 32 bytes at `digest`, with the digest fetched
/// once per process and a context kept per thread; 1 on success.
int spark_sha256(const void *data, size_t count, unsigned char *digest);

#endif
