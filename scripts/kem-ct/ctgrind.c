// The constant-time check of CSparkKEM (the ctgrind method): every secret input is marked
// undefined to valgrind's memcheck, which then reports any conditional jump, and any memory
// address, that depends on it. Values the algorithms make public (an encapsulation key, a
// ciphertext) are marked defined where a caller would publish them; inside the library only ρ,
// a key's own encapsulation key and the results of public checks are (SPARK_KEM_DECLASSIFY).
// Built and run by scripts/check-kem-ct.sh.

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <valgrind/memcheck.h>

#include "spark_kem.h"

#define SECRET(pointer, length) VALGRIND_MAKE_MEM_UNDEFINED((pointer), (length))
#define PUBLIC(pointer, length) VALGRIND_MAKE_MEM_DEFINED((pointer), (length))

static void fill(uint8_t *buffer, size_t length) {
    FILE *random = fopen("/dev/urandom", "rb");
    if (random == NULL || fread(buffer, 1, length, random) != length) {
        fprintf(stderr, "ctgrind: no randomness\n");
        exit(2);
    }
    fclose(random);
}

static void must(int status, const char *what) {
    if (status != 0) {
        fprintf(stderr, "ctgrind: %s failed (%d)\n", what, status);
        exit(2);
    }
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 4;
    for (int round = 0; round < rounds; round++) {
        uint8_t d[32], z[32], m[32], ek[SPARK_MLKEM768_EK_BYTES], dk[SPARK_MLKEM768_DK_BYTES];
        uint8_t ct[SPARK_MLKEM768_CT_BYTES], ss[32], ss2[32];
        fill(d, 32);
        fill(z, 32);
        fill(m, 32);
        SECRET(d, 32);
        SECRET(z, 32);
        SECRET(m, 32);
        must(spark_mlkem768_keygen_derand(ek, dk, d, z), "ML-KEM key generation");
        PUBLIC(ek, sizeof ek);  // published
        must(spark_mlkem768_encaps_derand(ct, ss, ek, m), "ML-KEM encapsulation");
        PUBLIC(ct, sizeof ct);  // sent
        must(spark_mlkem768_decaps(ss2, ct, dk), "ML-KEM decapsulation");
        // An attacker's ciphertext: the implicit rejection's path.
        ct[round % sizeof ct] ^= 1;
        must(spark_mlkem768_decaps(ss2, ct, dk), "ML-KEM decapsulation of a changed ciphertext");
        PUBLIC(ss, 32);
        PUBLIC(ss2, 32);
        if (memcmp(ss, ss2, 32) == 0) {
            fprintf(stderr, "ctgrind: a changed ciphertext gave the same secret\n");
            return 1;
        }

        uint8_t seed[32], eseed[64], pk[SPARK_XWING_PK_BYTES], dk_m[SPARK_MLKEM768_DK_BYTES], sk_x[32];
        uint8_t xct[SPARK_XWING_CT_BYTES], xss[32], xss2[32];
        fill(seed, 32);
        fill(eseed, 64);
        SECRET(seed, 32);
        SECRET(eseed, 64);
        must(spark_xwing_keygen_derand(pk, dk_m, sk_x, seed), "X-Wing key generation");
        PUBLIC(pk, sizeof pk);
        must(spark_xwing_encaps_derand(xct, xss, pk, eseed), "X-Wing encapsulation");
        PUBLIC(xct, sizeof xct);
        must(spark_xwing_decaps_expanded(xss2, xct, dk_m, sk_x, pk), "X-Wing decapsulation");
        PUBLIC(xss, 32);
        PUBLIC(xss2, 32);
        if (memcmp(xss, xss2, 32) != 0) {
            fprintf(stderr, "ctgrind: X-Wing's two secrets differ\n");
            return 1;
        }
    }
    printf("ctgrind: %d rounds, no secret-dependent branch or address\n", rounds);
    return 0;
}
