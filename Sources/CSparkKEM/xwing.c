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

int spark_xwing_keygen_derand(uint8_t pk[SPARK_XWING_PK_BYTES], uint8_t dk_m[SPARK_MLKEM768_DK_BYTES],
                              uint8_t sk_x[32], const uint8_t seed[SPARK_XWING_SK_BYTES]) {
    uint8_t expanded[96], ek[SPARK_MLKEM768_EK_BYTES], dk[SPARK_MLKEM768_DK_BYTES], pk_x[32];
    int status = spark_kem_shake256(expanded, sizeof expanded, seed, SPARK_XWING_SK_BYTES, NULL, 0);
    if (status == 0) status = spark_mlkem768_keygen_derand(ek, dk, expanded, expanded + 32);
    if (status == 0 && crypto_scalarmult_curve25519_base(pk_x, expanded + 64) != 0) status = SPARK_KEM_FAILED;
    if (status == 0) {
        SPARK_KEM_DECLASSIFY(pk_x, sizeof pk_x);
        if (pk != NULL) {
            memcpy(pk, ek, SPARK_MLKEM768_EK_BYTES);
            memcpy(pk + SPARK_MLKEM768_EK_BYTES, pk_x, 32);
        }
        if (dk_m != NULL) memcpy(dk_m, dk, sizeof dk);
        if (sk_x != NULL) memcpy(sk_x, expanded + 64, 32);
    }
    spark_kem_wipe(expanded, sizeof expanded);
    spark_kem_wipe(dk, sizeof dk);
    return status;
}

int spark_xwing_encaps_derand(uint8_t ct[SPARK_XWING_CT_BYTES], uint8_t ss[SPARK_XWING_SS_BYTES],
                              const uint8_t pk[SPARK_XWING_PK_BYTES], const uint8_t eseed[SPARK_XWING_ESEED_BYTES]) {
    const uint8_t *pk_m = pk, *pk_x = pk + SPARK_MLKEM768_EK_BYTES, *ek_x = eseed + 32;
    uint8_t ss_m[32], ss_x[32], ct_x[32];
    int status = spark_mlkem768_encaps_derand(ct, ss_m, pk_m, eseed);
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

int spark_xwing_decaps_expanded(uint8_t ss[SPARK_XWING_SS_BYTES], const uint8_t ct[SPARK_XWING_CT_BYTES],
                                const uint8_t dk_m[SPARK_MLKEM768_DK_BYTES], const uint8_t sk_x[32],
                                const uint8_t pk[SPARK_XWING_PK_BYTES]) {
    const uint8_t *ct_x = ct + SPARK_MLKEM768_CT_BYTES, *pk_x = pk + SPARK_MLKEM768_EK_BYTES;
    uint8_t ss_m[32], ss_x[32];
    int status = spark_mlkem768_decaps(ss_m, ct, dk_m);
    if (status == 0) {
        int low_order = crypto_scalarmult_curve25519(ss_x, sk_x, ct_x);
        (void)low_order;
        status = combine(ss, ss_m, ss_x, ct_x, pk_x);
    }
    spark_kem_wipe(ss_m, sizeof ss_m);
    spark_kem_wipe(ss_x, sizeof ss_x);
    return status;
}

int spark_xwing_decaps(uint8_t ss[SPARK_XWING_SS_BYTES], const uint8_t ct[SPARK_XWING_CT_BYTES],
                       const uint8_t sk[SPARK_XWING_SK_BYTES]) {
    uint8_t pk[SPARK_XWING_PK_BYTES], dk_m[SPARK_MLKEM768_DK_BYTES], sk_x[32];
    int status = spark_xwing_keygen_derand(pk, dk_m, sk_x, sk);
    if (status == 0) status = spark_xwing_decaps_expanded(ss, ct, dk_m, sk_x, pk);
    spark_kem_wipe(dk_m, sizeof dk_m);
    spark_kem_wipe(sk_x, sizeof sk_x);
    return status;
}
