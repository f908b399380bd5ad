// OpenSSL registers OPENSSL_cleanup with atexit() the first time it initialises. A process
// that exits while another thread is still inside libcrypto (an SDK poll loop, a token check
// in flight) then has that thread use freed tables: about one exit in two crashed in our test.
// Initialising once before main with OPENSSL_INIT_NO_ATEXIT leaves libcrypto's state alone at
// exit; the operating system reclaims it with the process. The first initialisation decides,
// which is why this runs as a constructor rather than from Swift.
#include "COpenSSLRuntime.h"

#include <openssl/crypto.h>

static int spark_openssl_status = 0;

__attribute__((constructor)) static void spark_openssl_runtime_init(void) {
    spark_openssl_status = OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, NULL) == 1 ? 1 : 0;
}

int spark_openssl_runtime_status(void) { return spark_openssl_status; }

// SHA-256 of short inputs, the hash trees' and MLS's most frequent call. EVP_Digest makes a
// context and resolves the provider's implementation on every call (about three times the cost
// of the hash itself for a 65-byte input, measured here); this keeps the fetched digest for
// the process and one context per thread, freed when the thread ends.
#include <openssl/evp.h>
#include <pthread.h>

static pthread_once_t spark_sha256_once = PTHREAD_ONCE_INIT;
static pthread_key_t spark_sha256_key;
static EVP_MD *spark_sha256_md = NULL;

static void spark_sha256_free_context(void *context) { EVP_MD_CTX_free((EVP_MD_CTX *)context); }

static void spark_sha256_setup(void) {
    spark_sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
    if (pthread_key_create(&spark_sha256_key, spark_sha256_free_context) != 0) {
        EVP_MD_free(spark_sha256_md);
        spark_sha256_md = NULL;
    }
}

int spark_sha256(const void *data, size_t count, unsigned char *digest) {
    pthread_once(&spark_sha256_once, spark_sha256_setup);
    if (spark_sha256_md == NULL) return EVP_Digest(data, count, digest, NULL, EVP_sha256(), NULL);
    EVP_MD_CTX *context = pthread_getspecific(spark_sha256_key);
    if (context == NULL) {
        context = EVP_MD_CTX_new();
        if (context == NULL || pthread_setspecific(spark_sha256_key, context) != 0) {
            EVP_MD_CTX_free(context);
            return EVP_Digest(data, count, digest, NULL, EVP_sha256(), NULL);
        }
    }
    return EVP_DigestInit_ex(context, spark_sha256_md, NULL) == 1 && EVP_DigestUpdate(context, data, count) == 1
        && EVP_DigestFinal_ex(context, digest, NULL) == 1;
}
