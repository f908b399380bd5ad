// ML-KEM-768, written from FIPS 203 (August 2024). Section and algorithm numbers are FIPS 203's.
//
// Coefficients are int16_t in [0, q) everywhere, in the normal and the NTT domain alike. Every
// reduction is arithmetic: a Barrett reduction by multiplication and shift, and a conditional
// subtraction done with the sign bit as a mask. The compressions divide by q with a multiplication
// by ceil(2^29 / q) and a shift (exact for every input, checked exhaustively in the tests), never
// with `/` (KyberSlash). Rejection sampling (SampleNTT) reads only the public seed ρ.

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

// ζ^BitRev7(i) mod q, i = 0..127 (§4.3).
static const int16_t zetas[128] = {
    1,    1729, 2580, 3289, 2642, 630,  1897, 848,  1062, 1919, 193,  797,  2786, 3260, 569,  1746, 296,  2447, 1339,
    1476, 3046, 56,   2240, 1333, 1426, 2094, 535,  2882, 2393, 2879, 1974, 821,  289,  331,  3253, 1756, 1197, 2304,
    2277, 2055, 650,  1977, 2513, 632,  2865, 33,   1320, 1915, 2319, 1435, 807,  452,  1438, 2868, 1534, 2402, 2647,
    2617, 1481, 648,  2474, 3110, 1227, 910,  17,   2761, 583,  2649, 1637, 723,  2288, 1100, 1409, 2662, 3281, 233,
    756,  2156, 3015, 3050, 1703, 1651, 2789, 1789, 1847, 952,  1461, 2687, 939,  2308, 2437, 2388, 733,  2337, 268,
    641,  1584, 2298, 2037, 3220, 375,  2549, 2090, 1645, 1063, 319,  2773, 757,  2099, 561,  2466, 2594, 2804, 1092,
    403,  1026, 1143, 2150, 2775, 886,  1722, 1212, 1874, 1029, 2110, 2935, 885,  2154,
};

// ζ^(2·BitRev7(i)+1) mod q, i = 0..127 (the γ of Algorithm 11).
static const int16_t gammas[128] = {
    17,   3312, 2761, 568,  583,  2746, 2649, 680,  1637, 1692, 723,  2606, 2288, 1041, 1100, 2229, 1409, 1920, 2662,
    667,  3281, 48,   233,  3096, 756,  2573, 2156, 1173, 3015, 314,  3050, 279,  1703, 1626, 1651, 1678, 2789, 540,
    1789, 1540, 1847, 1482, 952,  2377, 1461, 1868, 2687, 642,  939,  2390, 2308, 1021, 2437, 892,  2388, 941,  733,
    2596, 2337, 992,  268,  3061, 641,  2688, 1584, 1745, 2298, 1031, 2037, 1292, 3220, 109,  375,  2954, 2549, 780,
    2090, 1239, 1645, 1684, 1063, 2266, 319,  3010, 2773, 556,  757,  2572, 2099, 1230, 561,  2768, 2466, 863,  2594,
    735,  2804, 525,  1092, 2237, 403,  2926, 1026, 2303, 1143, 2186, 2150, 1179, 2775, 554,  886,  2443, 1722, 1607,
    1212, 2117, 1874, 1455, 1029, 2300, 2110, 1219, 2935, 394,  885,  2444, 2154, 1175,
};

// MARK: Arithmetic modulo q

// x mod q for x < 2^27: Barrett with m = floor(2^36 / q) leaves [0, 2q), then one masked subtraction.
static inline int16_t reduce(uint32_t x) {
    uint32_t quotient = (uint32_t)(((uint64_t)x * 20642678u) >> 36);
    int32_t r = (int32_t)(x - quotient * Q) - Q;
    r += (r >> 31) & Q;
    return (int16_t)r;
}

static inline int16_t mul(int16_t a, int16_t b) { return reduce((uint32_t)a * (uint32_t)b); }

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

static void ntt(poly *f) {
    size_t i = 1;
    for (size_t len = 128; len >= 2; len >>= 1) {
        for (size_t start = 0; start < N; start += 2 * len) {
            int16_t zeta = zetas[i++];
            for (size_t j = start; j < start + len; j++) {
                int16_t t = mul(zeta, f->c[j + len]);
                f->c[j + len] = sub(f->c[j], t);
                f->c[j] = add(f->c[j], t);
            }
        }
    }
}

static void ntt_inverse(poly *f) {
    size_t i = 127;
    for (size_t len = 2; len <= 128; len <<= 1) {
        for (size_t start = 0; start < N; start += 2 * len) {
            int16_t zeta = zetas[i--];
            for (size_t j = start; j < start + len; j++) {
                int16_t t = f->c[j];
                f->c[j] = add(t, f->c[j + len]);
                f->c[j + len] = mul(zeta, sub(f->c[j + len], t));
            }
        }
    }
    for (size_t j = 0; j < N; j++) f->c[j] = mul(f->c[j], 3303);  // 128^-1 mod q
}

// h += f × g in the NTT domain (Algorithms 11 and 12).
static void multiply_add(poly *h, const poly *f, const poly *g) {
    for (size_t i = 0; i < 128; i++) {
        int16_t a0 = f->c[2 * i], a1 = f->c[2 * i + 1], b0 = g->c[2 * i], b1 = g->c[2 * i + 1];
        int16_t c0 = reduce((uint32_t)a0 * (uint32_t)b0 + (uint32_t)mul(mul(a1, b1), gammas[i]));
        int16_t c1 = reduce((uint32_t)a0 * (uint32_t)b1 + (uint32_t)a1 * (uint32_t)b0);
        h->c[2 * i] = add(h->c[2 * i], c0);
        h->c[2 * i + 1] = add(h->c[2 * i + 1], c1);
    }
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
// squeezes a XOF once, so the stream is read whole, five blocks first (enough but for about
// 2^-38 of seeds), then twice as much until it suffices; a longer read repeats the shorter
// one's bytes, so the result is the algorithm's.
static int sample_ntt(poly *a, const uint8_t rho[32], uint8_t j, uint8_t i) {
    uint8_t seed[34];
    memcpy(seed, rho, 32);
    seed[32] = j;
    seed[33] = i;
    uint8_t stack[168 * 5];
    for (size_t length = sizeof stack; length <= 168 * 80; length *= 2) {
        uint8_t *stream = length == sizeof stack ? stack : OPENSSL_malloc(length);
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

// Â[i][j] = SampleNTT(ρ ‖ j ‖ i), or its transpose.
static int sample_matrix(polyvec a[K], const uint8_t rho[32], int transposed) {
    for (uint8_t i = 0; i < K; i++) {
        for (uint8_t j = 0; j < K; j++) {
            int status = transposed ? sample_ntt(&a[i].p[j], rho, i, j) : sample_ntt(&a[i].p[j], rho, j, i);
            if (status != 0) return status;
        }
    }
    return 0;
}

// MARK: K-PKE (§5)

// K-PKE.KeyGen (Algorithm 13): (ρ, σ) = G(d ‖ k); without `separated`, G(d) as FIPS 203's
// draft had it (for vectors made before the final standard only).
static int pke_keygen(uint8_t ek[EK_PKE_BYTES], uint8_t dk[K * POLY_BYTES], const uint8_t d[32], int separated) {
    uint8_t input[33], expanded[64];
    memcpy(input, d, 32);
    input[32] = K;
    int status = spark_kem_sha3_512(expanded, input, separated ? sizeof input : 32, NULL, 0);
    const uint8_t *rho = expanded, *sigma = expanded + 32;
    // ρ is the encapsulation key's: public from here on.
    SPARK_KEM_DECLASSIFY(rho, 32);
    polyvec a[K], s, e;
    memset(&s, 0, sizeof s);
    memset(&e, 0, sizeof e);
    if (status == 0) status = sample_matrix(a, rho, 0);
    uint8_t nonce = 0;
    for (size_t i = 0; status == 0 && i < K; i++) status = sample_cbd2(&s.p[i], sigma, nonce++);
    for (size_t i = 0; status == 0 && i < K; i++) status = sample_cbd2(&e.p[i], sigma, nonce++);
    if (status == 0) {
        for (size_t i = 0; i < K; i++) {
            ntt(&s.p[i]);
            ntt(&e.p[i]);
        }
        for (size_t i = 0; i < K; i++) {
            poly t = e.p[i];
            for (size_t j = 0; j < K; j++) multiply_add(&t, &a[i].p[j], &s.p[j]);
            encode(ek + i * POLY_BYTES, &t, 12);
            encode(dk + i * POLY_BYTES, &s.p[i], 12);
        }
        memcpy(ek + K * POLY_BYTES, rho, 32);
    }
    spark_kem_wipe(input, sizeof input);
    spark_kem_wipe(expanded, sizeof expanded);
    spark_kem_wipe(&s, sizeof s);
    spark_kem_wipe(&e, sizeof e);
    return status;
}

// K-PKE.Encrypt (Algorithm 14), with t̂ decoded and checked by the caller.
static int pke_encrypt(uint8_t c[SPARK_MLKEM768_CT_BYTES], const polyvec *t, const uint8_t rho[32], const uint8_t m[32],
                       const uint8_t r[32]) {
    polyvec at[K], y, e1;
    poly e2, v, mu;
    int status = sample_matrix(at, rho, 1);
    uint8_t nonce = 0;
    for (size_t i = 0; status == 0 && i < K; i++) status = sample_cbd2(&y.p[i], r, nonce++);
    for (size_t i = 0; status == 0 && i < K; i++) status = sample_cbd2(&e1.p[i], r, nonce++);
    if (status == 0) status = sample_cbd2(&e2, r, nonce++);
    if (status == 0) {
        for (size_t i = 0; i < K; i++) ntt(&y.p[i]);
        for (size_t i = 0; i < K; i++) {
            poly u;
            memset(&u, 0, sizeof u);
            for (size_t j = 0; j < K; j++) multiply_add(&u, &at[i].p[j], &y.p[j]);
            ntt_inverse(&u);
            poly_add(&u, &e1.p[i]);
            poly_compress(c + i * (32 * DU), &u, DU);
            spark_kem_wipe(&u, sizeof u);
        }
        memset(&v, 0, sizeof v);
        for (size_t j = 0; j < K; j++) multiply_add(&v, &t->p[j], &y.p[j]);
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

// K-PKE.Decrypt (Algorithm 15).
static void pke_decrypt(uint8_t m[32], const uint8_t dk[K * POLY_BYTES], const uint8_t c[SPARK_MLKEM768_CT_BYTES]) {
    polyvec u, s;
    poly v, w;
    for (size_t i = 0; i < K; i++) {
        poly_decompress(&u.p[i], c + i * (32 * DU), DU);
        ntt(&u.p[i]);
        decode12(&s.p[i], dk + i * POLY_BYTES);
    }
    poly_decompress(&v, c + C1_BYTES, DV);
    memset(&w, 0, sizeof w);
    for (size_t i = 0; i < K; i++) multiply_add(&w, &s.p[i], &u.p[i]);
    ntt_inverse(&w);
    poly_sub(&v, &w);
    memset(m, 0, 32);
    for (size_t i = 0; i < N; i++) m[i / 8] |= (uint8_t)(compress(v.c[i], 1) << (i % 8));
    spark_kem_wipe(&s, sizeof s);
    spark_kem_wipe(&v, sizeof v);
    spark_kem_wipe(&w, sizeof w);
}

// MARK: ML-KEM (§6, §7)

static int keygen(uint8_t ek[SPARK_MLKEM768_EK_BYTES], uint8_t dk[SPARK_MLKEM768_DK_BYTES], const uint8_t d[32],
                  const uint8_t z[32], int separated) {
    int status = pke_keygen(ek, dk, d, separated);
    if (status != 0) return status;
    memcpy(dk + K * POLY_BYTES, ek, SPARK_MLKEM768_EK_BYTES);
    status = spark_kem_sha3_256(dk + K * POLY_BYTES + SPARK_MLKEM768_EK_BYTES, ek, SPARK_MLKEM768_EK_BYTES, NULL, 0);
    memcpy(dk + K * POLY_BYTES + SPARK_MLKEM768_EK_BYTES + 32, z, 32);
    return status;
}

int spark_mlkem768_keygen_derand(uint8_t ek[SPARK_MLKEM768_EK_BYTES], uint8_t dk[SPARK_MLKEM768_DK_BYTES],
                                 const uint8_t d[32], const uint8_t z[32]) {
    return keygen(ek, dk, d, z, 1);
}

int spark_mlkem768_keygen_derand_draft(uint8_t ek[SPARK_MLKEM768_EK_BYTES], uint8_t dk[SPARK_MLKEM768_DK_BYTES],
                                       const uint8_t d[32], const uint8_t z[32]) {
    return keygen(ek, dk, d, z, 0);
}

// t̂ = ByteDecode_12 of the encapsulation key (public).
static void decode_ek(polyvec *t, const uint8_t ek[SPARK_MLKEM768_EK_BYTES]) {
    for (size_t i = 0; i < K; i++) decode12(&t->p[i], ek + i * POLY_BYTES);
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

int spark_mlkem768_encaps_derand(uint8_t ct[SPARK_MLKEM768_CT_BYTES], uint8_t ss[SPARK_MLKEM_SS_BYTES],
                                 const uint8_t ek[SPARK_MLKEM768_EK_BYTES], const uint8_t m[32]) {
    int status = spark_mlkem768_check_ek(ek);
    if (status != 0) return status;
    polyvec t;
    decode_ek(&t, ek);
    uint8_t input[64], kr[64];
    memcpy(input, m, 32);
    status = spark_kem_sha3_256(input + 32, ek, SPARK_MLKEM768_EK_BYTES, NULL, 0);
    if (status == 0) status = spark_kem_sha3_512(kr, input, sizeof input, NULL, 0);
    if (status == 0) status = pke_encrypt(ct, &t, ek + K * POLY_BYTES, m, kr + 32);
    if (status == 0) memcpy(ss, kr, 32);
    spark_kem_wipe(input, sizeof input);
    spark_kem_wipe(kr, sizeof kr);
    return status;
}

int spark_mlkem768_decaps(uint8_t ss[SPARK_MLKEM_SS_BYTES], const uint8_t ct[SPARK_MLKEM768_CT_BYTES],
                          const uint8_t dk[SPARK_MLKEM768_DK_BYTES]) {
    const uint8_t *dk_pke = dk, *ek = dk + K * POLY_BYTES, *h = ek + SPARK_MLKEM768_EK_BYTES, *z = h + 32;
    // The key's encapsulation key and its hash are public (they are the public key's).
    SPARK_KEM_DECLASSIFY(ek, SPARK_MLKEM768_EK_BYTES + 32);
    int status = spark_mlkem768_check_dk(dk);
    if (status != 0) return status;
    polyvec t;
    decode_ek(&t, ek);
    uint8_t input[64], kr[64], rejected[32], again[SPARK_MLKEM768_CT_BYTES];
    pke_decrypt(input, dk_pke, ct);
    memcpy(input + 32, h, 32);
    status = spark_kem_sha3_512(kr, input, sizeof input, NULL, 0);
    if (status == 0) status = spark_kem_shake256(rejected, sizeof rejected, z, 32, ct, SPARK_MLKEM768_CT_BYTES);
    if (status == 0) status = pke_encrypt(again, &t, ek + K * POLY_BYTES, input, kr + 32);
    if (status == 0) {
        // Implicit rejection: K' when c re-encrypts to itself, J(z ‖ c) otherwise, chosen by a
        // mask that the compiler cannot see through (no branch, no early exit, no strcmp).
        uint8_t difference = 0;
        for (size_t i = 0; i < SPARK_MLKEM768_CT_BYTES; i++) difference |= ct[i] ^ again[i];
        uint8_t keep = spark_kem_barrier_u8((uint8_t)(((uint32_t)difference + 0xff) >> 8) - 1);
        for (size_t i = 0; i < 32; i++) ss[i] = (uint8_t)((kr[i] & keep) | (rejected[i] & (uint8_t)~keep));
    }
    spark_kem_wipe(input, sizeof input);
    spark_kem_wipe(kr, sizeof kr);
    spark_kem_wipe(rejected, sizeof rejected);
    spark_kem_wipe(again, sizeof again);
    return status;
}
