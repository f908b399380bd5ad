// OpenSSL 3 for Swift. Only what Swift cannot import directly gets a wrapper here, each with
// its reason; everything else is used straight from the headers below.
#ifndef SPARK_COPENSSL_SHIM_H
#define SPARK_COPENSSL_SHIM_H

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>
#include <openssl/ecdsa.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/obj_mac.h>
#include <openssl/x509.h>
#include <openssl/opensslv.h>

// OPENSSL_free is a function-like macro (it passes __FILE__/__LINE__ to CRYPTO_free).
static inline void spark_OPENSSL_free(void *pointer) { OPENSSL_free(pointer); }

// EVP_PKEY_X25519 aliases an NID macro; a function keeps it typed as int.
static inline int spark_EVP_PKEY_X25519(void) { return EVP_PKEY_X25519; }

#endif
