// X-Wing (draft-connolly-cfrg-xwing-kem): ML-KEM-768 and X25519, combined by SHA3-256 with the
// label "\.//^\". The decapsulation key is a 32-byte seed, expanded with SHAKE256 to ML-KEM's
// (d, z) and X25519's scalar.
//
// X25519 is libsodium's. Its variable-base function refuses (returns -1 for) an all-zero result,
// which only a low-order public point gives; X-Wing takes the result as it is (the combiner
// hashes it with ML-KEM's secret), so the output is used and the refusal ignored.

#include "kem_internal.h"

#include <sodium.h>
#include <string.h>

static const uint8_t label[6] = {0x5c, 0x2e, 0x2f, 0x2f, 0x5e, 0x5c};

// SHA3-256(ss_M ‖ ss_X ‖ ct_X ‖ pk_X ‖ label).
static int combine(uint8_t ss[32], const uint8_t ss_m[32], const uint8_t ss_x[32], const uint8_t ct_x[32],
                   const uint8_t pk_x[32]) {
    uint8_t input[32 * 4 + sizeof label];
    memcpy(input, ss_m, 32);
    memcpy(input + 32, ss_x, 32);
    memcpy(input + 64, ct_x, 32);
    memcpy(input + 96, pk_x, 32);
    memcpy(input + 128, label, sizeof label);
    int status = spark_kem_sha3_256(ss, input, sizeof input, NULL, 0);
    spark_kem_wipe(input, sizeof input);
    return status;
}

int spark_xwing_private_from_seed(struct spark_mlkem768_private *mlkem, uint8_t sk_x[32],
                                  uint8_t pk[SPARK_XWING_PK_BYTES], const uint8_t seed[SPARK_XWING_SK_BYTES]) {
    uint8_t expanded[96];
    int status = spark_kem_shake256(expanded, sizeof expanded, seed, SPARK_XWING_SK_BYTES, NULL, 0);
    if (status == 0) status = spark_mlkem768_private_from_seed(mlkem, expanded, expanded + 32);
    if (status == 0 && crypto_scalarmult_curve25519_base(pk + SPARK_MLKEM768_EK_BYTES, expanded + 64) != 0) {
        status = SPARK_KEM_FAILED;
    }
    if (status == 0) {
        SPARK_KEM_DECLASSIFY(pk + SPARK_MLKEM768_EK_BYTES, 32);
        memcpy(pk, spark_mlkem768_public_bytes(spark_mlkem768_private_public(mlkem)), SPARK_MLKEM768_EK_BYTES);
        memcpy(sk_x, expanded + 64, 32);
    }
    spark_kem_wipe(expanded, sizeof expanded);
    return status;
}

int spark_xwing_encaps_expanded(uint8_t ct[SPARK_XWING_CT_BYTES], uint8_t ss[SPARK_XWING_SS_BYTES],
                                const struct spark_mlkem768_public *mlkem, const uint8_t pk_x[32],
                                const uint8_t eseed[SPARK_XWING_ESEED_BYTES]) {
    const uint8_t *ek_x = eseed + 32;
    uint8_t ss_m[32], ss_x[32], ct_x[32];
    int status = spark_mlkem768_encaps_expanded(ct, ss_m, mlkem, eseed);
    if (status == 0 && crypto_scalarmult_curve25519_base(ct_x, ek_x) != 0) status = SPARK_KEM_FAILED;
    if (status == 0) {
        int low_order = crypto_scalarmult_curve25519(ss_x, ek_x, pk_x);
        (void)low_order;
        status = combine(ss, ss_m, ss_x, ct_x, pk_x);
        memcpy(ct + SPARK_MLKEM768_CT_BYTES, ct_x, 32);
    }
    spark_kem_wipe(ss_m, sizeof ss_m);
    spark_kem_wipe(ss_x, sizeof ss_x);
    return status;
}

int spark_xwing_decaps_state(uint8_t ss[SPARK_XWING_SS_BYTES], const uint8_t ct[SPARK_XWING_CT_BYTES],
                             const struct spark_mlkem768_private *mlkem, const uint8_t sk_x[32], const uint8_t pk_x[32]) {
    const uint8_t *ct_x = ct + SPARK_MLKEM768_CT_BYTES;
    uint8_t ss_m[32], ss_x[32];
    int status = spark_mlkem768_decaps_expanded(ss_m, ct, mlkem);
    if (status == 0) {
        int low_order = crypto_scalarmult_curve25519(ss_x, sk_x, ct_x);
        (void)low_order;
        status = combine(ss, ss_m, ss_x, ct_x, pk_x);
    }
    spark_kem_wipe(ss_m, sizeof ss_m);
    spark_kem_wipe(ss_x, sizeof ss_x);
    return status;
}

// MARK: On encoded keys (the draft's interfaces, for vectors and one-off use)

int spark_xwing_keygen_derand(uint8_t pk[SPARK_XWING_PK_BYTES], uint8_t dk_m[SPARK_MLKEM768_DK_BYTES],
                              uint8_t sk_x[32], const uint8_t seed[SPARK_XWING_SK_BYTES]) {
    struct spark_mlkem768_private *mlkem = OPENSSL_malloc(SPARK_MLKEM768_PRIVATE_STATE_BYTES);
    if (mlkem == NULL) return SPARK_KEM_FAILED;
    uint8_t public_key[SPARK_XWING_PK_BYTES], scalar[32];
    int status = spark_xwing_private_from_seed(mlkem, scalar, public_key, seed);
    if (status == 0) {
        if (pk != NULL) memcpy(pk, public_key, sizeof public_key);
        if (dk_m != NULL) spark_mlkem768_private_to_bytes(dk_m, mlkem);
        if (sk_x != NULL) memcpy(sk_x, scalar, 32);
    }
    spark_kem_wipe(scalar, sizeof scalar);
    OPENSSL_clear_free(mlkem, SPARK_MLKEM768_PRIVATE_STATE_BYTES);
    return status;
}

int spark_xwing_encaps_derand(uint8_t ct[SPARK_XWING_CT_BYTES], uint8_t ss[SPARK_XWING_SS_BYTES],
                              const uint8_t pk[SPARK_XWING_PK_BYTES], const uint8_t eseed[SPARK_XWING_ESEED_BYTES]) {
    struct spark_mlkem768_public *mlkem = OPENSSL_malloc(SPARK_MLKEM768_PUBLIC_STATE_BYTES);
    if (mlkem == NULL) return SPARK_KEM_FAILED;
    int status = spark_mlkem768_public_from_bytes(mlkem, pk);
    if (status == 0) status = spark_xwing_encaps_expanded(ct, ss, mlkem, pk + SPARK_MLKEM768_EK_BYTES, eseed);
    OPENSSL_free(mlkem);
    return status;
}

int spark_xwing_decaps_expanded(uint8_t ss[SPARK_XWING_SS_BYTES], const uint8_t ct[SPARK_XWING_CT_BYTES],
                                const uint8_t dk_m[SPARK_MLKEM768_DK_BYTES], const uint8_t sk_x[32],
                                const uint8_t pk[SPARK_XWING_PK_BYTES]) {
    struct spark_mlkem768_private *mlkem = OPENSSL_malloc(SPARK_MLKEM768_PRIVATE_STATE_BYTES);
    if (mlkem == NULL) return SPARK_KEM_FAILED;
    int status = spark_mlkem768_private_from_bytes(mlkem, dk_m);
    if (status == 0) status = spark_xwing_decaps_state(ss, ct, mlkem, sk_x, pk + SPARK_MLKEM768_EK_BYTES);
    OPENSSL_clear_free(mlkem, SPARK_MLKEM768_PRIVATE_STATE_BYTES);
    return status;
}

int spark_xwing_decaps(uint8_t ss[SPARK_XWING_SS_BYTES], const uint8_t ct[SPARK_XWING_CT_BYTES],
                       const uint8_t sk[SPARK_XWING_SK_BYTES]) {
    struct spark_mlkem768_private *mlkem = OPENSSL_malloc(SPARK_MLKEM768_PRIVATE_STATE_BYTES);
    if (mlkem == NULL) return SPARK_KEM_FAILED;
    uint8_t pk[SPARK_XWING_PK_BYTES], sk_x[32];
    int status = spark_xwing_private_from_seed(mlkem, sk_x, pk, sk);
    if (status == 0) status = spark_xwing_decaps_state(ss, ct, mlkem, sk_x, pk + SPARK_MLKEM768_EK_BYTES);
    spark_kem_wipe(sk_x, sizeof sk_x);
    OPENSSL_clear_free(mlkem, SPARK_MLKEM768_PRIVATE_STATE_BYTES);
    return status;
}
