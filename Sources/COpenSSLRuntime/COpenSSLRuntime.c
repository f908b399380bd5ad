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

// HMAC, the key schedules' and hash ratchets' most frequent call (MLS derives each message's key
// and nonce through it). The one-shot HMAC() fetches the MAC and the digest by name and makes a
// context on every call (about three times the cost of the MAC itself for a 64-byte input,
// measured here); this fetches them once per process and keeps one context per digest and
// thread. A context keeps its key's state after a call, so each call ends by initialising it
// again with an all-zero key: no key of ours stays in it.
#include <openssl/core_names.h>
#include <string.h>

enum { SPARK_HMAC_DIGESTS = 3 };
static const char *const spark_hmac_names[SPARK_HMAC_DIGESTS] = {"SHA256", "SHA384", "SHA512"};
static pthread_once_t spark_hmac_once = PTHREAD_ONCE_INIT;
static pthread_key_t spark_hmac_key;
static EVP_MAC *spark_hmac_mac = NULL;

typedef struct {
    EVP_MAC_CTX *contexts[SPARK_HMAC_DIGESTS];
} spark_hmac_contexts;

static void spark_hmac_free_contexts(void *pointer) {
    spark_hmac_contexts *contexts = pointer;
    for (int index = 0; index < SPARK_HMAC_DIGESTS; index++) EVP_MAC_CTX_free(contexts->contexts[index]);
    OPENSSL_free(contexts);
}

static void spark_hmac_setup(void) {
    spark_hmac_mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    if (spark_hmac_mac != NULL && pthread_key_create(&spark_hmac_key, spark_hmac_free_contexts) != 0) {
        EVP_MAC_free(spark_hmac_mac);
        spark_hmac_mac = NULL;
    }
}

/// This thread's context for `digest`, made on first use; NULL when it cannot be made.
static EVP_MAC_CTX *spark_hmac_context(int digest) {
    pthread_once(&spark_hmac_once, spark_hmac_setup);
    if (spark_hmac_mac == NULL) return NULL;
    spark_hmac_contexts *contexts = pthread_getspecific(spark_hmac_key);
    if (contexts == NULL) {
        contexts = OPENSSL_zalloc(sizeof(*contexts));
        if (contexts == NULL) return NULL;
        if (pthread_setspecific(spark_hmac_key, contexts) != 0) {
            OPENSSL_free(contexts);
            return NULL;
        }
    }
    if (contexts->contexts[digest] == NULL) {
        EVP_MAC_CTX *context = EVP_MAC_CTX_new(spark_hmac_mac);
        OSSL_PARAM parameters[2] = {
            OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)spark_hmac_names[digest], 0),
            OSSL_PARAM_construct_end(),
        };
        if (context == NULL || EVP_MAC_CTX_set_params(context, parameters) != 1) {
            EVP_MAC_CTX_free(context);
            return NULL;
        }
        contexts->contexts[digest] = context;
    }
    return contexts->contexts[digest];
}

int spark_hmac(
    int digest, const void *key, size_t keyCount, const void *data, size_t count, unsigned char *mac, size_t macCapacity,
    size_t *macCount) {
    if (digest < 0 || digest >= SPARK_HMAC_DIGESTS) return 0;
    EVP_MAC_CTX *context = spark_hmac_context(digest);
    if (context == NULL) return -1;
    // HMAC with an empty key is defined (the key is zero-padded); OpenSSL wants a pointer.
    static const unsigned char empty[1] = {0};
    static const unsigned char zeros[64] = {0};
    int ok = EVP_MAC_init(context, keyCount == 0 ? empty : key, keyCount, NULL) == 1
        && EVP_MAC_update(context, data, count) == 1 && EVP_MAC_final(context, mac, macCount, macCapacity) == 1;
    // The key's state out of the context (a wrong state here is caught by the next init).
    (void)EVP_MAC_init(context, zeros, sizeof(zeros), NULL);
    return ok ? 1 : 0;
}
