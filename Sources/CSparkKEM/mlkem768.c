// ML-KEM-768, written from FIPS 203 (August 2024). Section and algorithm numbers are FIPS 203's.
//
// Coefficients are int16_t in [0, q) between the steps, in the normal and the NTT domain alike;
// inside the NTTs and products they grow lazily within stated bounds. Every reduction is
// arithmetic: Montgomery's (R = 2^16) for products, Barrett's by multiplication and shift, and a
// conditional subtraction done with the sign bit as a mask. The compressions divide by q with a
// multiplication by ceil(2^29 / q) and a shift (exact for every input, checked exhaustively when
// the constant was chosen), never with `/` (KyberSlash; scripts/check-kem-ct.sh refuses one).
// Rejection sampling (SampleNTT) reads only the public seed ρ. Keys are expanded once (the
// matrix, t̂ and ŝ in Montgomery form, H(ek)): `struct spark_mlkem768_public` and `_private`.

#include "kem_internal.h"

#include <string.h>

#define N 256
#define Q 3329
#define K 3
#define ETA1 2
#define ETA2 2
#define DU 10
#define DV 4

#define POLY_BYTES 384
#define EK_PKE_BYTES (K * POLY_BYTES + 32)
#define C1_BYTES (32 * DU * K)
#define C2_BYTES (32 * DV)

typedef struct {
    int16_t c[N];
} poly;

typedef struct {
    poly p[K];
} polyvec;

// Montgomery arithmetic with R = 2^16: mont(a) = a·R⁻¹ mod q for |a| < q·2^15, in (−q, q).
// Polynomials are kept in [0, q) between the steps below; inside the NTTs and products values
// grow lazily (their bounds are in the comments) and are reduced at the end.
#define QINV (-3327)  // q⁻¹ mod 2^16
#define R2 1353       // R² mod q

// ζ^BitRev7(i)·R mod q, i = 0..127 (§4.3's ζ in Montgomery form, centred).
static const int16_t zetas[128] = {
    -1044, -758,  -359,  -1517, 1493,  1422,  287,   202,   -171,  622,   1577,  182,   962,   -1202, -1474, 1468,
    573,   -1325, 264,   383,   -829,  1458,  -1602, -130,  -681,  1017,  732,   608,   -1542, 411,   -205,  -1571,
    1223,  652,   -552,  1015,  -1293, 1491,  -282,  -1544, 516,   -8,    -320,  -666,  -1618, -1162, 126,   1469,
    -853,  -90,   -271,  830,   107,   -1421, -247,  -951,  -398,  961,   -1508, -725,  448,   -1065, 677,   -1275,
    -1103, 430,   555,   843,   -1251, 871,   1550,  105,   422,   587,   177,   -235,  -291,  -460,  1574,  1653,
    -246,  778,   1159,  -147,  -777,  1483,  -602,  1119,  -1590, 644,   -872,  349,   418,   329,   -156,  -75,
    817,   1097,  603,   610,   1322,  -1285, -1465, 384,   -1215, -136,  1218,  -1335, -874,  220,   -1187, -1659,
    -1185, -1530, -1278, 794,   -1510, -854,  -870,  478,   -108,  -308,  996,   991,   958,   -1460, 1522,  1628,
};

// ζ^(2·BitRev7(i)+1)·R mod q, i = 0..127 (the γ of Algorithm 11, in Montgomery form).
static const int16_t gammas[128] = {
    -1103, 1103,  430,   -430,  555,   -555,  843,   -843,  -1251, 1251,  871,   -871,  1550,  -1550, 105,   -105,
    422,   -422,  587,   -587,  177,   -177,  -235,  235,   -291,  291,   -460,  460,   1574,  -1574, 1653,  -1653,
    -246,  246,   778,   -778,  1159,  -1159, -147,  147,   -777,  777,   1483,  -1483, -602,  602,   1119,  -1119,
    -1590, 1590,  644,   -644,  -872,  872,   349,   -349,  418,   -418,  329,   -329,  -156,  156,   -75,   75,
    817,   -817,  1097,  -1097, 603,   -603,  610,   -610,  1322,  -1322, -1285, 1285,  -1465, 1465,  384,   -384,
    -1215, 1215,  -136,  136,   1218,  -1218, -1335, 1335,  -874,  874,   220,   -220,  -1187, 1187,  -1659, 1659,
    -1185, 1185,  -1530, 1530,  -1278, 1278,  794,   -794,  -1510, 1510,  -854,  854,   -870,  870,   478,   -478,
    -108,  108,   -308,  308,   996,   -996,  991,   -991,  958,   -958,  -1460, 1460,  1522,  -1522, 1628,  -1628,
};

// MARK: Arithmetic modulo q

static inline int16_t mont(int32_t a) {
    int16_t t = (int16_t)((int16_t)a * QINV);
    return (int16_t)((a - (int32_t)t * Q) >> 16);
}

// A centred representative of a (any int16_t), in [−(q−1)/2, (q−1)/2]: Barrett with ⌊(2^26+q/2)/q⌋.
static inline int16_t barrett(int16_t a) {
    int16_t t = (int16_t)(((int32_t)20159 * a + (1 << 25)) >> 26);
    return (int16_t)(a - t * Q);
}

// a mod q in [0, q), for any int16_t a (the sign bit as a mask).
static inline int16_t canonical(int16_t a) {
    int16_t r = barrett(a);
    return (int16_t)(r + ((r >> 15) & Q));
}

static inline int16_t add(int16_t a, int16_t b) {
    int32_t r = (int32_t)a + b - Q;
    r += (r >> 31) & Q;
    return (int16_t)r;
}

static inline int16_t sub(int16_t a, int16_t b) {
    int32_t r = (int32_t)a - b;
    r += (r >> 31) & Q;
    return (int16_t)r;
}

// MARK: NTT (Algorithms 9 to 12)

// NTT of f in [0, q) (or |f| < q): after layer k every |value| < (k+1)q (8q < 2^15 after the
// seventh), then reduced to [0, q).
static void ntt(poly *f) {
    size_t i = 1;
    for (size_t len = 128; len >= 2; len >>= 1) {
        for (size_t start = 0; start < N; start += 2 * len) {
            int32_t zeta = zetas[i++];
            for (size_t j = start; j < start + len; j++) {
                int16_t t = mont(zeta * f->c[j + len]);
                f->c[j + len] = (int16_t)(f->c[j] - t);
                f->c[j] = (int16_t)(f->c[j] + t);
            }
        }
    }
    for (size_t j = 0; j < N; j++) f->c[j] = canonical(f->c[j]);
}

// The inverse NTT of f (any |value| ≤ 6q), times 128⁻¹, in [0, q).
static void ntt_inverse(poly *f) {
    for (size_t j = 0; j < N; j++) f->c[j] = barrett(f->c[j]);
    size_t i = 127;
    for (size_t len = 2; len <= 128; len <<= 1) {
        for (size_t start = 0; start < N; start += 2 * len) {
            int32_t zeta = zetas[i--];
            for (size_t j = start; j < start + len; j++) {
                int16_t t = f->c[j];
                f->c[j] = barrett((int16_t)(t + f->c[j + len]));
                f->c[j + len] = mont(zeta * (int16_t)(f->c[j + len] - t));
            }
        }
    }
    // 128⁻¹ = 3303, as 3303·R mod q = 512 in Montgomery form.
    for (size_t j = 0; j < N; j++) f->c[j] = canonical(mont((int32_t)512 * f->c[j]));
}

// h += f̂ × ĝ in the NTT domain (Algorithms 11 and 12), f̂ in Montgomery form (f·R), ĝ plain
// (both |value| < q): each product term is below 2q, so three accumulated stay below 6q.
static void multiply_add(poly *h, const poly *f, const poly *g) {
    for (size_t i = 0; i < 128; i++) {
        int32_t a0 = f->c[2 * i], a1 = f->c[2 * i + 1], b0 = g->c[2 * i], b1 = g->c[2 * i + 1];
        int16_t c0 = (int16_t)(mont(a0 * b0) + mont((int32_t)mont(a1 * b1) * gammas[i]));
        int16_t c1 = mont(a0 * b1 + a1 * b0);
        h->c[2 * i] = (int16_t)(h->c[2 * i] + c0);
        h->c[2 * i + 1] = (int16_t)(h->c[2 * i + 1] + c1);
    }
}

// f·R mod q in (−q, q): a polynomial's Montgomery form, for the left operand of multiply_add.
static void to_montgomery(poly *f) {
    for (size_t j = 0; j < N; j++) f->c[j] = mont((int32_t)R2 * f->c[j]);
}

// f from its Montgomery form, in [0, q).
static void from_montgomery(poly *f) {
    for (size_t j = 0; j < N; j++) f->c[j] = canonical(mont(f->c[j]));
}

// Every coefficient to [0, q).
static void poly_canonical(poly *f) {
    for (size_t j = 0; j < N; j++) f->c[j] = canonical(f->c[j]);
}

static void poly_add(poly *r, const poly *a) {
    for (size_t i = 0; i < N; i++) r->c[i] = add(r->c[i], a->c[i]);
}

static void poly_sub(poly *r, const poly *a) {
    for (size_t i = 0; i < N; i++) r->c[i] = sub(r->c[i], a->c[i]);
}

// MARK: Encoding (§4.2.1)

// ByteEncode_d: d bits a coefficient, least significant bit first.
static void encode(uint8_t *out, const poly *a, unsigned d) {
    uint32_t acc = 0;
    unsigned bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < N; i++) {
        acc |= (uint32_t)(uint16_t)a->c[i] << bits;
        bits += d;
        while (bits >= 8) {
            out[o++] = (uint8_t)acc;
            acc >>= 8;
            bits -= 8;
        }
    }
}

// ByteDecode_d for d < 12: d-bit integers.
static void decode(poly *a, const uint8_t *in, unsigned d) {
    uint32_t acc = 0;
    unsigned bits = 0;
    size_t o = 0;
    uint32_t mask = (1u << d) - 1;
    for (size_t i = 0; i < N; i++) {
        while (bits < d) {
            acc |= (uint32_t)in[o++] << bits;
            bits += 8;
        }
        a->c[i] = (int16_t)(acc & mask);
        acc >>= d;
        bits -= d;
    }
}

// ByteDecode_12: each 12-bit value reduced modulo q (one masked subtraction: 4095 < 2q), with
// no branch, for secret polynomials as for public ones.
static void decode12(poly *a, const uint8_t *in) {
    for (size_t i = 0; i < N / 2; i++) {
        uint32_t b0 = in[3 * i], b1 = in[3 * i + 1], b2 = in[3 * i + 2];
        int32_t r0 = (int32_t)(b0 | ((b1 & 0x0f) << 8)) - Q;
        int32_t r1 = (int32_t)((b1 >> 4) | (b2 << 4)) - Q;
        r0 += (r0 >> 31) & Q;
        r1 += (r1 >> 31) & Q;
        a->c[2 * i] = (int16_t)r0;
        a->c[2 * i + 1] = (int16_t)r1;
    }
}

// MARK: Compression (§4.2.1)

// round(2^d / q · x) mod 2^d for x in [0, q): floor((x·2^d + 1664) / q) by ceil(2^29 / q).
static inline uint16_t compress(int16_t x, unsigned d) {
    uint64_t t = ((uint64_t)(uint16_t)x << d) + 1664;
    return (uint16_t)(((t * 161271u) >> 29) & ((1u << d) - 1));
}

// round(q / 2^d · y).
static inline int16_t decompress(uint16_t y, unsigned d) {
    return (int16_t)(((uint32_t)y * Q + (1u << (d - 1))) >> d);
}

static void poly_compress(uint8_t *out, const poly *a, unsigned d) {
    poly t;
    for (size_t i = 0; i < N; i++) t.c[i] = (int16_t)compress(a->c[i], d);
    encode(out, &t, d);
}

static void poly_decompress(poly *a, const uint8_t *in, unsigned d) {
    decode(a, in, d);
    for (size_t i = 0; i < N; i++) a->c[i] = decompress((uint16_t)a->c[i], d);
}

// MARK: Sampling (§4.2.2)

// SampleNTT (Algorithm 7) from ρ ‖ j ‖ i: SHAKE128 read three bytes at a time. OpenSSL 3.0
// squeezes a XOF once, so the stream is read whole: three blocks first (enough for about 99% of
// polynomials), then twice as much until it suffices (five blocks are short for about 2^-38 of
// seeds: C2SP's unlucky vectors); a longer read repeats the shorter one's bytes, so the result
// is the algorithm's. The seed is public, so the retries reveal nothing.
static int sample_ntt(poly *a, const uint8_t rho[32], uint8_t j, uint8_t i) {
    uint8_t seed[34];
    memcpy(seed, rho, 32);
    seed[32] = j;
    seed[33] = i;
    uint8_t stack[168 * 6];
    for (size_t length = 168 * 3; length <= 168 * 96; length *= 2) {
        uint8_t *stream = length <= sizeof stack ? stack : OPENSSL_malloc(length);
        if (stream == NULL) return SPARK_KEM_FAILED;
        int status = spark_kem_shake128(stream, length, seed, sizeof seed);
        size_t count = 0;
        for (size_t at = 0; status == 0 && count < N && at + 3 <= length; at += 3) {
            uint16_t d1 = (uint16_t)(stream[at] | ((stream[at + 1] & 0x0f) << 8));
            uint16_t d2 = (uint16_t)((stream[at + 1] >> 4) | (stream[at + 2] << 4));
            if (d1 < Q) a->c[count++] = (int16_t)d1;
            if (d2 < Q && count < N) a->c[count++] = (int16_t)d2;
        }
        if (stream != stack) OPENSSL_free(stream);
        if (status != 0) return status;
        if (count == N) return 0;
    }
    return SPARK_KEM_FAILED;
}

// SamplePolyCBD_2 (Algorithm 8) from PRF_2(s, b) = SHAKE256(s ‖ b, 128).
static int sample_cbd2(poly *a, const uint8_t seed[32], uint8_t nonce) {
    uint8_t input[33], bytes[128];
    memcpy(input, seed, 32);
    input[32] = nonce;
    int status = spark_kem_shake256(bytes, sizeof bytes, input, sizeof input, NULL, 0);
    for (size_t i = 0; i < 128; i++) {
        for (unsigned half = 0; half < 2; half++) {
            unsigned bits = (unsigned)(bytes[i] >> (4 * half));
            int16_t x = (int16_t)((bits & 1) + ((bits >> 1) & 1));
            int16_t y = (int16_t)(((bits >> 2) & 1) + ((bits >> 3) & 1));
            a->c[2 * i + half] = sub(x, y);
        }
    }
    spark_kem_wipe(input, sizeof input);
    spark_kem_wipe(bytes, sizeof bytes);
    return status;
}

// Â[i][j] = SampleNTT(ρ ‖ j ‖ i), in Montgomery form.
static int sample_matrix(polyvec a[K], const uint8_t rho[32]) {
    for (uint8_t i = 0; i < K; i++) {
        for (uint8_t j = 0; j < K; j++) {
            int status = sample_ntt(&a[i].p[j], rho, j, i);
            if (status != 0) return status;
            to_montgomery(&a[i].p[j]);
        }
    }
    return 0;
}

// MARK: Expanded keys

// An encapsulation key with what every encapsulation to it would compute again: Â (sampled
// from ρ), t̂ decoded (both in Montgomery form, the left operands of their products), and
// H(ek). Public.
struct spark_mlkem768_public {
    polyvec a[K];  // a[i].p[j] = Â[i][j]·R
    polyvec t;     // t̂·R
    uint8_t ek[SPARK_MLKEM768_EK_BYTES];
    uint8_t h[32];
};

// A decapsulation key: its public part, ŝ decoded (in Montgomery form), and z.
struct spark_mlkem768_private {
    struct spark_mlkem768_public public_key;
    polyvec s;  // ŝ·R
    uint8_t z[32];
};

_Static_assert(sizeof(struct spark_mlkem768_public) == SPARK_MLKEM768_PUBLIC_STATE_BYTES, "public state size");
_Static_assert(sizeof(struct spark_mlkem768_private) == SPARK_MLKEM768_PRIVATE_STATE_BYTES, "private state size");

// Fills `key` from a checked `ek` (ρ is the key's last 32 bytes, public); `h` is H(ek) when the
// caller has it already (a private key's, checked against its ek), else NULL.
static int expand_public(struct spark_mlkem768_public *key, const uint8_t ek[SPARK_MLKEM768_EK_BYTES], const uint8_t *h) {
    memcpy(key->ek, ek, SPARK_MLKEM768_EK_BYTES);
    for (size_t i = 0; i < K; i++) {
        decode12(&key->t.p[i], ek + i * POLY_BYTES);
        to_montgomery(&key->t.p[i]);
    }
    int status = sample_matrix(key->a, ek + K * POLY_BYTES);
    if (status == 0 && h != NULL) memcpy(key->h, h, 32);
    if (status == 0 && h == NULL) status = spark_kem_sha3_256(key->h, ek, SPARK_MLKEM768_EK_BYTES, NULL, 0);
    return status;
}

// MARK: K-PKE (§5)

// K-PKE.KeyGen (Algorithm 13) into `key` (its public part, ŝ), with ek and the encoded ŝ:
// (ρ, σ) = G(d ‖ k); without `separated`, G(d) as FIPS 203's draft had it (for vectors made
// before the final standard only).
static int pke_keygen(struct spark_mlkem768_private *key, const uint8_t d[32], int separated) {
    uint8_t input[33], expanded[64];
    memcpy(input, d, 32);
    input[32] = K;
    int status = spark_kem_sha3_512(expanded, input, separated ? sizeof input : 32, NULL, 0);
    const uint8_t *rho = expanded, *sigma = expanded + 32;
    // ρ is the encapsulation key's: public from here on.
    SPARK_KEM_DECLASSIFY(rho, 32);
    struct spark_mlkem768_public *pub = &key->public_key;
    polyvec e;
    memset(&e, 0, sizeof e);
    if (status == 0) status = sample_matrix(pub->a, rho);
    uint8_t nonce = 0;
    for (size_t i = 0; status == 0 && i < K; i++) status = sample_cbd2(&key->s.p[i], sigma, nonce++);
    for (size_t i = 0; status == 0 && i < K; i++) status = sample_cbd2(&e.p[i], sigma, nonce++);
    if (status == 0) {
        for (size_t i = 0; i < K; i++) {
            ntt(&key->s.p[i]);
            ntt(&e.p[i]);
        }
        for (size_t i = 0; i < K; i++) {
            // t̂ = ê + Â ŝ: below 7q before its reduction.
            pub->t.p[i] = e.p[i];
            for (size_t j = 0; j < K; j++) multiply_add(&pub->t.p[i], &pub->a[i].p[j], &key->s.p[j]);
            poly_canonical(&pub->t.p[i]);
            encode(pub->ek + i * POLY_BYTES, &pub->t.p[i], 12);
        }
        for (size_t i = 0; i < K; i++) {
            to_montgomery(&pub->t.p[i]);
            to_montgomery(&key->s.p[i]);
        }
        memcpy(pub->ek + K * POLY_BYTES, rho, 32);
        // The encapsulation key is published.
        SPARK_KEM_DECLASSIFY(pub->ek, SPARK_MLKEM768_EK_BYTES);
        status = spark_kem_sha3_256(pub->h, pub->ek, SPARK_MLKEM768_EK_BYTES, NULL, 0);
    }
    spark_kem_wipe(input, sizeof input);
    spark_kem_wipe(expanded, sizeof expanded);
    spark_kem_wipe(&e, sizeof e);
    return status;
}

// K-PKE.Encrypt (Algorithm 14) to an expanded key: u = NTT⁻¹(Âᵀ ŷ) + e₁, v = NTT⁻¹(t̂ᵀ ŷ) + e₂ + μ.
static int pke_encrypt(uint8_t c[SPARK_MLKEM768_CT_BYTES], const struct spark_mlkem768_public *key, const uint8_t m[32],
                       const uint8_t r[32]) {
    polyvec y, e1;
    poly e2, v, mu;
    int status = 0;
    uint8_t nonce = 0;
    for (size_t i = 0; status == 0 && i < K; i++) status = sample_cbd2(&y.p[i], r, nonce++);
    for (size_t i = 0; status == 0 && i < K; i++) status = sample_cbd2(&e1.p[i], r, nonce++);
    if (status == 0) status = sample_cbd2(&e2, r, nonce++);
    if (status == 0) {
        for (size_t i = 0; i < K; i++) ntt(&y.p[i]);
        for (size_t i = 0; i < K; i++) {
            poly u;
            memset(&u, 0, sizeof u);
            for (size_t j = 0; j < K; j++) multiply_add(&u, &key->a[j].p[i], &y.p[j]);
            ntt_inverse(&u);
            poly_add(&u, &e1.p[i]);
            poly_compress(c + i * (32 * DU), &u, DU);
            spark_kem_wipe(&u, sizeof u);
        }
        memset(&v, 0, sizeof v);
        for (size_t j = 0; j < K; j++) multiply_add(&v, &key->t.p[j], &y.p[j]);
        ntt_inverse(&v);
        poly_add(&v, &e2);
        // μ = Decompress_1(ByteDecode_1(m)): each bit times round(q/2) = 1665, by a mask.
        for (size_t i = 0; i < N; i++) {
            uint16_t bit = (m[i / 8] >> (i % 8)) & 1;
            mu.c[i] = (int16_t)(-(int16_t)bit & 1665);
        }
        poly_add(&v, &mu);
        poly_compress(c + C1_BYTES, &v, DV);
    }
    spark_kem_wipe(&y, sizeof y);
    spark_kem_wipe(&e1, sizeof e1);
    spark_kem_wipe(&e2, sizeof e2);
    spark_kem_wipe(&v, sizeof v);
    spark_kem_wipe(&mu, sizeof mu);
    return status;
}

// K-PKE.Decrypt (Algorithm 15): w = v − NTT⁻¹(ŝᵀ NTT(u)), m = ByteEncode_1(Compress_1(w)).
static void pke_decrypt(uint8_t m[32], const polyvec *s, const uint8_t c[SPARK_MLKEM768_CT_BYTES]) {
    polyvec u;
    poly v, w;
    for (size_t i = 0; i < K; i++) {
        poly_decompress(&u.p[i], c + i * (32 * DU), DU);
        ntt(&u.p[i]);
    }
    poly_decompress(&v, c + C1_BYTES, DV);
    memset(&w, 0, sizeof w);
    for (size_t i = 0; i < K; i++) multiply_add(&w, &s->p[i], &u.p[i]);
    ntt_inverse(&w);
    poly_sub(&v, &w);
    memset(m, 0, 32);
    for (size_t i = 0; i < N; i++) m[i / 8] |= (uint8_t)(compress(v.c[i], 1) << (i % 8));
    spark_kem_wipe(&v, sizeof v);
    spark_kem_wipe(&w, sizeof w);
}

// MARK: ML-KEM (§6, §7) on expanded keys

static int keygen(struct spark_mlkem768_private *key, const uint8_t d[32], const uint8_t z[32], int separated) {
    int status = pke_keygen(key, d, separated);
    memcpy(key->z, z, 32);
    return status;
}

int spark_mlkem768_private_from_seed(struct spark_mlkem768_private *key, const uint8_t d[32], const uint8_t z[32]) {
    return keygen(key, d, z, 1);
}

// The modulus check (§7.2): ByteEncode_12(ByteDecode_12(ek)) = ek, i.e. every 12-bit value is
// below q. The key is public; the answer is computed over all of it all the same.
int spark_mlkem768_check_ek(const uint8_t ek[SPARK_MLKEM768_EK_BYTES]) {
    uint32_t over = 0;
    for (size_t i = 0; i < K * POLY_BYTES / 3; i++) {
        uint32_t b0 = ek[3 * i], b1 = ek[3 * i + 1], b2 = ek[3 * i + 2];
        uint32_t v0 = b0 | ((b1 & 0x0f) << 8), v1 = (b1 >> 4) | (b2 << 4);
        over |= ((Q - 1 - v0) | (Q - 1 - v1)) >> 31;  // 1 when a value is q or more
    }
    return over ? SPARK_KEM_INVALID : 0;
}

int spark_mlkem768_public_from_bytes(struct spark_mlkem768_public *key, const uint8_t ek[SPARK_MLKEM768_EK_BYTES]) {
    int status = spark_mlkem768_check_ek(ek);
    return status != 0 ? status : expand_public(key, ek, NULL);
}

int spark_mlkem768_check_dk(const uint8_t dk[SPARK_MLKEM768_DK_BYTES]) {
    const uint8_t *ek = dk + K * POLY_BYTES;
    uint8_t hash[32];
    int status = spark_kem_sha3_256(hash, ek, SPARK_MLKEM768_EK_BYTES, NULL, 0);
    if (status != 0) return status;
    uint8_t difference = 0;
    for (size_t i = 0; i < 32; i++) difference |= hash[i] ^ ek[SPARK_MLKEM768_EK_BYTES + i];
    // Whether the key is well formed is public.
    SPARK_KEM_DECLASSIFY(&difference, 1);
    return difference == 0 ? 0 : SPARK_KEM_INVALID;
}

int spark_mlkem768_private_from_bytes(struct spark_mlkem768_private *key, const uint8_t dk[SPARK_MLKEM768_DK_BYTES]) {
    const uint8_t *ek = dk + K * POLY_BYTES;
    // The key's encapsulation key and its hash are public (they are the public key's).
    SPARK_KEM_DECLASSIFY(ek, SPARK_MLKEM768_EK_BYTES + 32);
    int status = spark_mlkem768_check_dk(dk);
    // The hash check just compared H(ek) with the hash the key holds: that one is used.
    if (status == 0) status = expand_public(&key->public_key, ek, ek + SPARK_MLKEM768_EK_BYTES);
    for (size_t i = 0; status == 0 && i < K; i++) {
        decode12(&key->s.p[i], dk + i * POLY_BYTES);
        to_montgomery(&key->s.p[i]);
    }
    memcpy(key->z, ek + SPARK_MLKEM768_EK_BYTES + 32, 32);
    return status;
}

void spark_mlkem768_private_to_bytes(uint8_t dk[SPARK_MLKEM768_DK_BYTES], const struct spark_mlkem768_private *key) {
    for (size_t i = 0; i < K; i++) {
        poly s = key->s.p[i];
        from_montgomery(&s);
        encode(dk + i * POLY_BYTES, &s, 12);
        spark_kem_wipe(&s, sizeof s);
    }
    memcpy(dk + K * POLY_BYTES, key->public_key.ek, SPARK_MLKEM768_EK_BYTES);
    memcpy(dk + K * POLY_BYTES + SPARK_MLKEM768_EK_BYTES, key->public_key.h, 32);
    memcpy(dk + K * POLY_BYTES + SPARK_MLKEM768_EK_BYTES + 32, key->z, 32);
}

const uint8_t *spark_mlkem768_public_bytes(const struct spark_mlkem768_public *key) { return key->ek; }

const struct spark_mlkem768_public *spark_mlkem768_private_public(const struct spark_mlkem768_private *key) {
    return &key->public_key;
}

// ML-KEM.Encaps_internal (Algorithm 17): (K, r) = G(m ‖ H(ek)), c = K-PKE.Encrypt(ek, m, r).
int spark_mlkem768_encaps_expanded(uint8_t ct[SPARK_MLKEM768_CT_BYTES], uint8_t ss[SPARK_MLKEM_SS_BYTES],
                                   const struct spark_mlkem768_public *key, const uint8_t m[32]) {
    uint8_t kr[64];
    int status = spark_kem_sha3_512(kr, m, 32, key->h, 32);
    if (status == 0) status = pke_encrypt(ct, key, m, kr + 32);
    if (status == 0) memcpy(ss, kr, 32);
    spark_kem_wipe(kr, sizeof kr);
    return status;
}

// ML-KEM.Decaps_internal (Algorithm 18) with implicit rejection.
int spark_mlkem768_decaps_expanded(uint8_t ss[SPARK_MLKEM_SS_BYTES], const uint8_t ct[SPARK_MLKEM768_CT_BYTES],
                                   const struct spark_mlkem768_private *key) {
    uint8_t message[32], kr[64], rejected[32], again[SPARK_MLKEM768_CT_BYTES];
    pke_decrypt(message, &key->s, ct);
    int status = spark_kem_sha3_512(kr, message, 32, key->public_key.h, 32);
    if (status == 0) status = spark_kem_shake256(rejected, sizeof rejected, key->z, 32, ct, SPARK_MLKEM768_CT_BYTES);
    if (status == 0) status = pke_encrypt(again, &key->public_key, message, kr + 32);
    if (status == 0) {
        // Implicit rejection: K' when c re-encrypts to itself, J(z ‖ c) otherwise, chosen by a
        // mask that the compiler cannot see through (no branch, no early exit, no strcmp).
        uint8_t difference = 0;
        for (size_t i = 0; i < SPARK_MLKEM768_CT_BYTES; i++) difference |= ct[i] ^ again[i];
        uint8_t keep = spark_kem_barrier_u8((uint8_t)(((uint32_t)difference + 0xff) >> 8) - 1);
        for (size_t i = 0; i < 32; i++) ss[i] = (uint8_t)((kr[i] & keep) | (rejected[i] & (uint8_t)~keep));
    }
    spark_kem_wipe(message, sizeof message);
    spark_kem_wipe(kr, sizeof kr);
    spark_kem_wipe(rejected, sizeof rejected);
    spark_kem_wipe(again, sizeof again);
    return status;
}

// MARK: ML-KEM on encoded keys (FIPS 203's interfaces, for vectors and one-off use)

static int keygen_bytes(uint8_t ek[SPARK_MLKEM768_EK_BYTES], uint8_t dk[SPARK_MLKEM768_DK_BYTES], const uint8_t d[32],
                        const uint8_t z[32], int separated) {
    struct spark_mlkem768_private *key = OPENSSL_malloc(sizeof *key);
    if (key == NULL) return SPARK_KEM_FAILED;
    int status = keygen(key, d, z, separated);
    if (status == 0) {
        memcpy(ek, key->public_key.ek, SPARK_MLKEM768_EK_BYTES);
        spark_mlkem768_private_to_bytes(dk, key);
    }
    OPENSSL_clear_free(key, sizeof *key);
    return status;
}

int spark_mlkem768_keygen_derand(uint8_t ek[SPARK_MLKEM768_EK_BYTES], uint8_t dk[SPARK_MLKEM768_DK_BYTES],
                                 const uint8_t d[32], const uint8_t z[32]) {
    return keygen_bytes(ek, dk, d, z, 1);
}

int spark_mlkem768_keygen_derand_draft(uint8_t ek[SPARK_MLKEM768_EK_BYTES], uint8_t dk[SPARK_MLKEM768_DK_BYTES],
                                       const uint8_t d[32], const uint8_t z[32]) {
    return keygen_bytes(ek, dk, d, z, 0);
}

int spark_mlkem768_encaps_derand(uint8_t ct[SPARK_MLKEM768_CT_BYTES], uint8_t ss[SPARK_MLKEM_SS_BYTES],
                                 const uint8_t ek[SPARK_MLKEM768_EK_BYTES], const uint8_t m[32]) {
    struct spark_mlkem768_public *key = OPENSSL_malloc(sizeof *key);
    if (key == NULL) return SPARK_KEM_FAILED;
    int status = spark_mlkem768_public_from_bytes(key, ek);
    if (status == 0) status = spark_mlkem768_encaps_expanded(ct, ss, key, m);
    OPENSSL_free(key);
    return status;
}

int spark_mlkem768_decaps(uint8_t ss[SPARK_MLKEM_SS_BYTES], const uint8_t ct[SPARK_MLKEM768_CT_BYTES],
                          const uint8_t dk[SPARK_MLKEM768_DK_BYTES]) {
    struct spark_mlkem768_private *key = OPENSSL_malloc(sizeof *key);
    if (key == NULL) return SPARK_KEM_FAILED;
    int status = spark_mlkem768_private_from_bytes(key, dk);
    if (status == 0) status = spark_mlkem768_decaps_expanded(ss, ct, key);
    OPENSSL_clear_free(key, sizeof *key);
    return status;
}
