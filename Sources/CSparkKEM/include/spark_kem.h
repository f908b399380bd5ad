#ifndef SPARK_KEM_H
#define SPARK_KEM_H

#include <stddef.h>
#include <stdint.h>

/// ML-KEM-768 (FIPS 203) and X-Wing (draft-connolly-cfrg-xwing-kem), written from the
/// standards. SHA3-256, SHA3-512, SHAKE128 and SHAKE256 are OpenSSL's (EVP), X25519 is
/// libsodium's. Randomness comes from the caller (the `_derand` functions take the seeds the
/// standards name), so every function is deterministic and testable against outside vectors.
///
/// Constant time: no branch, division or table index depends on a secret (the compressions
/// multiply and shift; implicit rejection selects with a mask behind a value barrier). Built
/// with `SPARK_KEM_CTGRIND`, the values that stop being secret (the public seed ρ, a key's own
/// encapsulation key, the result of a public check) are declared defined to valgrind, which
/// `scripts/check-kem-ct.sh` runs with every secret marked undefined.
///
/// Every function returns 0 on success, `SPARK_KEM_INVALID` for an input the standard's checks
/// refuse (an encapsulation key with a coefficient not below q, a decapsulation key whose hash
/// does not match), and `SPARK_KEM_FAILED` when OpenSSL fails.

#define SPARK_KEM_INVALID (-1)
#define SPARK_KEM_FAILED (-2)

#define SPARK_MLKEM768_EK_BYTES 1184
#define SPARK_MLKEM768_DK_BYTES 2400
#define SPARK_MLKEM768_CT_BYTES 1088
#define SPARK_MLKEM_SS_BYTES 32
#define SPARK_MLKEM_SEED_BYTES 32

#define SPARK_XWING_PK_BYTES 1216
#define SPARK_XWING_SK_BYTES 32
#define SPARK_XWING_CT_BYTES 1120
#define SPARK_XWING_SS_BYTES 32
#define SPARK_XWING_ESEED_BYTES 64

/// The bytes of the expanded key states below (the structures are opaque: allocate this many
/// bytes, 2-byte aligned).
#define SPARK_MLKEM768_PUBLIC_STATE_BYTES 7360
#define SPARK_MLKEM768_PRIVATE_STATE_BYTES 8928

/// An encapsulation key with what every encapsulation would otherwise compute again: the matrix
/// Â sampled from ρ, t̂ decoded, H(ek) (as OpenSSL's key objects keep them). Public.
struct spark_mlkem768_public;
/// A decapsulation key: its public part, ŝ decoded, and z. Secret: keep it in wiped memory.
struct spark_mlkem768_private;

/// The key of the seed (d, z) (Algorithm 16), expanded.
int spark_mlkem768_private_from_seed(struct spark_mlkem768_private *key, const uint8_t d[32], const uint8_t z[32]);
/// The key of FIPS 203's 2,400-byte form, after the hash check (§7.3).
int spark_mlkem768_private_from_bytes(struct spark_mlkem768_private *key, const uint8_t dk[SPARK_MLKEM768_DK_BYTES]);
/// FIPS 203's 2,400-byte form of a key.
void spark_mlkem768_private_to_bytes(uint8_t dk[SPARK_MLKEM768_DK_BYTES], const struct spark_mlkem768_private *key);
/// A private key's public part.
const struct spark_mlkem768_public *spark_mlkem768_private_public(const struct spark_mlkem768_private *key);
/// An encapsulation key after the modulus check (§7.2), expanded.
int spark_mlkem768_public_from_bytes(struct spark_mlkem768_public *key, const uint8_t ek[SPARK_MLKEM768_EK_BYTES]);
/// The 1,184 bytes of an expanded encapsulation key.
const uint8_t *spark_mlkem768_public_bytes(const struct spark_mlkem768_public *key);
/// ML-KEM.Encaps_internal (Algorithm 17) to an expanded key.
int spark_mlkem768_encaps_expanded(
    uint8_t ct[SPARK_MLKEM768_CT_BYTES], uint8_t ss[SPARK_MLKEM_SS_BYTES], const struct spark_mlkem768_public *key,
    const uint8_t m[32]);
/// ML-KEM.Decaps_internal (Algorithm 18) with an expanded key, implicit rejection included.
int spark_mlkem768_decaps_expanded(
    uint8_t ss[SPARK_MLKEM_SS_BYTES], const uint8_t ct[SPARK_MLKEM768_CT_BYTES], const struct spark_mlkem768_private *key);

/// ML-KEM.KeyGen_internal(d, z) (FIPS 203 Algorithm 16).
int spark_mlkem768_keygen_derand(
    uint8_t ek[SPARK_MLKEM768_EK_BYTES], uint8_t dk[SPARK_MLKEM768_DK_BYTES], const uint8_t d[32], const uint8_t z[32]);

/// Key generation as FIPS 203's draft (ipd, with the XOF's i and j in the final order) had it:
/// (ρ, σ) = G(d) without the final standard's parameter byte. Only for C2SP's vectors, which
/// were made before the final standard (encapsulation and decapsulation did not change); never
/// for a key.
int spark_mlkem768_keygen_derand_draft(
    uint8_t ek[SPARK_MLKEM768_EK_BYTES], uint8_t dk[SPARK_MLKEM768_DK_BYTES], const uint8_t d[32], const uint8_t z[32]);

/// The encapsulation key check (FIPS 203 §7.2): every coefficient below q.
int spark_mlkem768_check_ek(const uint8_t ek[SPARK_MLKEM768_EK_BYTES]);

/// The decapsulation key check (FIPS 203 §7.3): the hash it holds is its encapsulation key's.
int spark_mlkem768_check_dk(const uint8_t dk[SPARK_MLKEM768_DK_BYTES]);

/// ML-KEM.Encaps_internal(ek, m) (Algorithm 17), after the encapsulation key check.
int spark_mlkem768_encaps_derand(
    uint8_t ct[SPARK_MLKEM768_CT_BYTES], uint8_t ss[SPARK_MLKEM_SS_BYTES], const uint8_t ek[SPARK_MLKEM768_EK_BYTES],
    const uint8_t m[32]);

/// ML-KEM.Decaps_internal(dk, c) (Algorithm 18) with implicit rejection, after the decapsulation
/// key check: a ciphertext that does not re-encrypt to itself gives J(z ‖ c), never an error.
int spark_mlkem768_decaps(
    uint8_t ss[SPARK_MLKEM_SS_BYTES], const uint8_t ct[SPARK_MLKEM768_CT_BYTES], const uint8_t dk[SPARK_MLKEM768_DK_BYTES]);

/// X-Wing's key pair from its 32-byte seed (the decapsulation key): the public key
/// `pk_M ‖ pk_X`, and the expanded parts decapsulation uses (`dk_M`, `sk_X`); any output may be
/// NULL.
int spark_xwing_keygen_derand(
    uint8_t pk[SPARK_XWING_PK_BYTES], uint8_t dk_m[SPARK_MLKEM768_DK_BYTES], uint8_t sk_x[32],
    const uint8_t seed[SPARK_XWING_SK_BYTES]);

/// X-Wing's Encapsulate with its 64 bytes of randomness (`eseed`: ML-KEM's m, then the X25519
/// ephemeral scalar), after the ML-KEM key check.
int spark_xwing_encaps_derand(
    uint8_t ct[SPARK_XWING_CT_BYTES], uint8_t ss[SPARK_XWING_SS_BYTES], const uint8_t pk[SPARK_XWING_PK_BYTES],
    const uint8_t eseed[SPARK_XWING_ESEED_BYTES]);

/// X-Wing's Decapsulate with the parts `spark_xwing_keygen_derand` expanded (and the public key,
/// whose X25519 half the combiner takes).
int spark_xwing_decaps_expanded(
    uint8_t ss[SPARK_XWING_SS_BYTES], const uint8_t ct[SPARK_XWING_CT_BYTES], const uint8_t dk_m[SPARK_MLKEM768_DK_BYTES],
    const uint8_t sk_x[32], const uint8_t pk[SPARK_XWING_PK_BYTES]);

/// X-Wing's key of `seed`, expanded: ML-KEM's part, X25519's scalar and the public key.
int spark_xwing_private_from_seed(
    struct spark_mlkem768_private *mlkem, uint8_t sk_x[32], uint8_t pk[SPARK_XWING_PK_BYTES],
    const uint8_t seed[SPARK_XWING_SK_BYTES]);

/// X-Wing's Encapsulate to an expanded ML-KEM key and X25519's public key.
int spark_xwing_encaps_expanded(
    uint8_t ct[SPARK_XWING_CT_BYTES], uint8_t ss[SPARK_XWING_SS_BYTES], const struct spark_mlkem768_public *mlkem,
    const uint8_t pk_x[32], const uint8_t eseed[SPARK_XWING_ESEED_BYTES]);

/// X-Wing's Decapsulate with an expanded key.
int spark_xwing_decaps_state(
    uint8_t ss[SPARK_XWING_SS_BYTES], const uint8_t ct[SPARK_XWING_CT_BYTES], const struct spark_mlkem768_private *mlkem,
    const uint8_t sk_x[32], const uint8_t pk_x[32]);

/// X-Wing's Decapsulate from the 32-byte seed (expands it first).
int spark_xwing_decaps(
    uint8_t ss[SPARK_XWING_SS_BYTES], const uint8_t ct[SPARK_XWING_CT_BYTES], const uint8_t sk[SPARK_XWING_SK_BYTES]);

#endif
