// CRC-32 (reflected polynomial 0xEDB88320, as zlib) by folding.
//
// x86-64: four 128-bit accumulators are folded forward 64 bytes at a time with carry-less
// multiplications by x^(512±32) mod P, then folded into one, reduced 128 → 64 → 32 bits, and the
// last 32 bits found by Barrett reduction (Gopal et al., "Fast CRC Computation for Generic
// Polynomials Using PCLMULQDQ Instruction", Intel, 2009). The constants below are those powers of
// x modulo P in the bit-reflected domain; Tests/KilnFormatTests check every length against zlib.
// arm64: the CRC32X instruction, eight bytes a step.
#include "kiln_hash.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>

static int kiln_has_pclmul(void) {
    static int cached = -1;
    int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (v < 0) {
        unsigned a, b, c, d;
        v = __get_cpuid(1, &a, &b, &c, &d) && ((c >> 1) & 1u) && ((c >> 19) & 1u); // PCLMULQDQ, SSE4.1
        __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
    }
    return v;
}

int kiln_crc32_hardware(void) { return kiln_has_pclmul(); }

__attribute__((target("pclmul,sse4.1"))) static uint32_t kiln_crc32_fold(uint32_t reg, const uint8_t *p, size_t n) {
    const __m128i k1k2 = _mm_set_epi64x(0x1c6e41596LL, 0x154442bd4LL);
    const __m128i k3k4 = _mm_set_epi64x(0x0ccaa009eLL, 0x1751997d0LL);
    const __m128i k5 = _mm_set_epi64x(0, 0x163cd6124LL);
    const __m128i poly = _mm_set_epi64x(0x1f7011641LL, 0x1db710641LL); // mu, P'
    const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);
    __m128i x0 = _mm_loadu_si128((const __m128i *)p), x1 = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i x2 = _mm_loadu_si128((const __m128i *)(p + 32)), x3 = _mm_loadu_si128((const __m128i *)(p + 48));
    x0 = _mm_xor_si128(x0, _mm_cvtsi32_si128((int)reg));
    p += 64;
    n -= 64;
#define KILN_FOLD(x, k, next) \
    _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11)), next)
    while (n >= 64) {
        x0 = KILN_FOLD(x0, k1k2, _mm_loadu_si128((const __m128i *)p));
        x1 = KILN_FOLD(x1, k1k2, _mm_loadu_si128((const __m128i *)(p + 16)));
        x2 = KILN_FOLD(x2, k1k2, _mm_loadu_si128((const __m128i *)(p + 32)));
        x3 = KILN_FOLD(x3, k1k2, _mm_loadu_si128((const __m128i *)(p + 48)));
        p += 64;
        n -= 64;
    }
    __m128i x = KILN_FOLD(x0, k3k4, x1);
    x = KILN_FOLD(x, k3k4, x2);
    x = KILN_FOLD(x, k3k4, x3);
    while (n >= 16) {
        x = KILN_FOLD(x, k3k4, _mm_loadu_si128((const __m128i *)p));
        p += 16;
        n -= 16;
    }
#undef KILN_FOLD
    // 128 → 64 bits.
    __m128i t = _mm_xor_si128(_mm_clmulepi64_si128(x, k3k4, 0x10), _mm_srli_si128(x, 8));
    // 64 → 32 bits.
    t = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(t, mask32), k5, 0x00), _mm_srli_si128(t, 4));
    // Barrett reduction.
    __m128i u = _mm_clmulepi64_si128(_mm_and_si128(t, mask32), poly, 0x10);
    u = _mm_clmulepi64_si128(_mm_and_si128(u, mask32), poly, 0x00);
    return (uint32_t)_mm_extract_epi32(_mm_xor_si128(u, t), 1);
}

size_t kiln_crc32_bulk(uint32_t *crc, const uint8_t *p, size_t n) {
    if (n < 64 || !kiln_has_pclmul()) return 0;
    const size_t used = n & ~(size_t)15;
    *crc = ~kiln_crc32_fold(~*crc, p, used);
    return used;
}

#elif defined(__aarch64__)
#include <sys/auxv.h>

int kiln_crc32_hardware(void) { return (getauxval(AT_HWCAP) >> 7) & 1ul; } // HWCAP_CRC32

__attribute__((target("+crc"))) static uint32_t kiln_crc32_arm(uint32_t reg, const uint8_t *p, size_t n) {
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t v;
        __builtin_memcpy(&v, p, 8);
        reg = __builtin_arm_crc32d(reg, v);
    }
    return reg;
}

size_t kiln_crc32_bulk(uint32_t *crc, const uint8_t *p, size_t n) {
    if (n < 64 || !kiln_crc32_hardware()) return 0;
    const size_t used = n & ~(size_t)15;
    *crc = ~kiln_crc32_arm(~*crc, p, used);
    return used;
}

#else
int kiln_crc32_hardware(void) { return 0; }
size_t kiln_crc32_bulk(uint32_t *crc, const uint8_t *p, size_t n) {
    (void)crc; (void)p; (void)n;
    return 0;
}
#endif
