#ifndef C_OPENSSL_RUNTIME_H
#define C_OPENSSL_RUNTIME_H

/// 1 when OpenSSL was initialised, before `main`, without its exit-time cleanup; 0 when that
/// initialisation failed (OpenSSL then cleans up at exit as it does by default).
int spark_openssl_runtime_status(void);

#include <stddef.h>

/// SHA-256 of `count` bytes at `data` into the 32 bytes at `digest`, with the digest fetched
/// once per process and a context kept per thread; 1 on success.
int spark_sha256(const void *data, size_t count, unsigned char *digest);


/// HMAC of `count` bytes at `data` under the `keyCount` bytes at `key` with digest `digest`
/// (0: SHA-256, 1: SHA-384, 2: SHA-512), into `mac` (room for `macCapacity` bytes; its length
/// in `*macCount`), with the MAC fetched once per process and a context kept per digest and
/// thread (left holding an all-zero key). 1 on success, 0 on failure, -1 when no context could
/// be made (the caller then uses the one-shot `HMAC()`).
int spark_hmac(
    int digest, const void *key, size_t keyCount, const void *data, size_t count, unsigned char *mac, size_t macCapacity,
    size_t *macCount);
#endif
