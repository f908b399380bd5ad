// SHA3 and SHAKE for ML-KEM and X-Wing: OpenSSL's Keccak through EVP, each algorithm fetched
// once (an implicit fetch at every call costs more than a short hash).

#include "kem_internal.h"

#include <openssl/evp.h>
#include <pthread.h>

static EVP_MD *sha3_256, *sha3_512, *shake128, *shake256;
static pthread_once_t fetched = PTHREAD_ONCE_INIT;

static void fetch(void) {
    sha3_256 = EVP_MD_fetch(NULL, "SHA3-256", NULL);
    sha3_512 = EVP_MD_fetch(NULL, "SHA3-512", NULL);
    shake128 = EVP_MD_fetch(NULL, "SHAKE128", NULL);
    shake256 = EVP_MD_fetch(NULL, "SHAKE256", NULL);
}

static int digest(const EVP_MD *md, uint8_t *out, size_t length, int xof, const uint8_t *a, size_t a_length,
                  const uint8_t *b, size_t b_length) {
    if (md == NULL) return SPARK_KEM_FAILED;
    EVP_MD_CTX *context = EVP_MD_CTX_new();
    if (context == NULL) return SPARK_KEM_FAILED;
    int ok = EVP_DigestInit_ex2(context, md, NULL) == 1 && EVP_DigestUpdate(context, a, a_length) == 1 &&
             (b == NULL || EVP_DigestUpdate(context, b, b_length) == 1) &&
             (xof ? EVP_DigestFinalXOF(context, out, length) == 1 : EVP_DigestFinal_ex(context, out, NULL) == 1);
    EVP_MD_CTX_free(context);
    return ok ? 0 : SPARK_KEM_FAILED;
}

int spark_kem_sha3_256(uint8_t out[32], const uint8_t *a, size_t a_length, const uint8_t *b, size_t b_length) {
    pthread_once(&fetched, fetch);
    return digest(sha3_256, out, 32, 0, a, a_length, b, b_length);
}

int spark_kem_sha3_512(uint8_t out[64], const uint8_t *a, size_t a_length, const uint8_t *b, size_t b_length) {
    pthread_once(&fetched, fetch);
    return digest(sha3_512, out, 64, 0, a, a_length, b, b_length);
}

int spark_kem_shake128(uint8_t *out, size_t length, const uint8_t *input, size_t input_length) {
    pthread_once(&fetched, fetch);
    return digest(shake128, out, length, 1, input, input_length, NULL, 0);
}

int spark_kem_shake256(uint8_t *out, size_t length, const uint8_t *a, size_t a_length, const uint8_t *b,
                       size_t b_length) {
    pthread_once(&fetched, fetch);
    return digest(shake256, out, length, 1, a, a_length, b, b_length);
}
