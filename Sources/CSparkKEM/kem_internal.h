#ifndef SPARK_KEM_INTERNAL_H
#define SPARK_KEM_INTERNAL_H

#include "spark_kem.h"

#include <openssl/crypto.h>

#ifdef SPARK_KEM_CTGRIND
#include <valgrind/memcheck.h>
/// A value that stops being secret (public by the algorithm): defined to valgrind from here on.
#define SPARK_KEM_DECLASSIFY(pointer, length) VALGRIND_MAKE_MEM_DEFINED((pointer), (length))
#else
#define SPARK_KEM_DECLASSIFY(pointer, length) ((void)0)
#endif

/// SHA3-256 of `a ‖ b` (b may be NULL), through OpenSSL's EVP.
int spark_kem_sha3_256(uint8_t out[32], const uint8_t *a, size_t a_length, const uint8_t *b, size_t b_length);
/// SHA3-512 of `a ‖ b`.
int spark_kem_sha3_512(uint8_t out[64], const uint8_t *a, size_t a_length, const uint8_t *b, size_t b_length);
/// `length` bytes of SHAKE128(`input`).
int spark_kem_shake128(uint8_t *out, size_t length, const uint8_t *input, size_t input_length);
/// `length` bytes of SHAKE256(`a ‖ b`).
int spark_kem_shake256(uint8_t *out, size_t length, const uint8_t *a, size_t a_length, const uint8_t *b, size_t b_length);

/// Wipes `length` bytes (OpenSSL's cleanse, which the compiler does not remove).
static inline void spark_kem_wipe(void *pointer, size_t length) { OPENSSL_cleanse(pointer, length); }

/// `value` as the compiler must take it: it cannot know the value, so a mask made from it stays
/// a mask (not a branch).
static inline uint8_t spark_kem_barrier_u8(uint8_t value) {
    __asm__ volatile("" : "+r"(value));
    return value;
}

#endif
