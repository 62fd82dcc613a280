// SHA-256 compression with the x86-64 SHA extensions (SHA256RNDS2, SHA256MSG1, SHA256MSG2):
// the state lives as ABEF/CDGH halves, each instruction pair does four rounds, and the message
// schedule is extended four words at a time. FIPS 180-4 defines the function; the Swift code in
// KilnFormat is the portable path and the tests compare the two.
#include "kiln_hash.h"

// FIPS 180-4 §4.2.2: the first 32 bits of the fractional parts of the cube roots of the first 64 primes.
const uint32_t kiln_sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};


#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>


int kiln_sha256_hardware(void) {
    static int cached = -1;
    int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (v < 0) {
        unsigned a, b, c, d;
        v = __get_cpuid(1, &a, &b, &c, &d) && ((c >> 19) & 1u) && ((c >> 9) & 1u); // SSE4.1, SSSE3
        if (v) {
            v = __get_cpuid_max(0, 0) >= 7;
            if (v) {
                __cpuid_count(7, 0, a, b, c, d);
                v = (b >> 29) & 1u; // SHA
            }
        }
        __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
    }
    return v;
}

__attribute__((target("sha,sse4.1,ssse3"))) static void kiln_sha256_ni(uint32_t state[8], const uint8_t *p, size_t blocks) {
    const __m128i swap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    __m128i t = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)state), 0xB1);       // C D A B
    __m128i s1 = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)(state + 4)), 0x1B); // E F G H
    __m128i s0 = _mm_alignr_epi8(t, s1, 8);                                              // A B E F
    s1 = _mm_blend_epi16(s1, t, 0xF0);                                                   // C D G H
    for (; blocks > 0; blocks--, p += 64) {
        const __m128i save0 = s0, save1 = s1;
        __m128i w[4];
#pragma clang loop unroll(full)
        for (int g = 0; g < 16; g++) {
            if (g < 4) w[g] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * g)), swap);
            __m128i m = _mm_add_epi32(w[g & 3], _mm_loadu_si128((const __m128i *)(kiln_sha256_k + 4 * g)));
            s1 = _mm_sha256rnds2_epu32(s1, s0, m);
            if (g >= 3 && g < 15) {
                // The next four schedule words, from the last sixteen.
                const int n = (g + 1) & 3;
                w[n] = _mm_sha256msg2_epu32(_mm_add_epi32(w[n], _mm_alignr_epi8(w[g & 3], w[(g + 3) & 3], 4)), w[g & 3]);
            }
            s0 = _mm_sha256rnds2_epu32(s0, s1, _mm_shuffle_epi32(m, 0x0E));
            if (g >= 1 && g <= 12) w[(g + 3) & 3] = _mm_sha256msg1_epu32(w[(g + 3) & 3], w[g & 3]);
        }
        s0 = _mm_add_epi32(s0, save0);
        s1 = _mm_add_epi32(s1, save1);
    }
    t = _mm_shuffle_epi32(s0, 0x1B);             // F E B A
    s1 = _mm_shuffle_epi32(s1, 0xB1);            // D C H G
    s0 = _mm_blend_epi16(t, s1, 0xF0);           // D C B A
    s1 = _mm_alignr_epi8(s1, t, 8);              // H G F E
    _mm_storeu_si128((__m128i *)state, s0);
    _mm_storeu_si128((__m128i *)(state + 4), s1);
}

int kiln_sha256_blocks(uint32_t state[8], const uint8_t *p, size_t blocks) {
    if (!kiln_sha256_hardware()) return 0;
    kiln_sha256_ni(state, p, blocks);
    return 1;
}

#else
int kiln_sha256_hardware(void) { return 0; }
int kiln_sha256_blocks(uint32_t state[8], const uint8_t *p, size_t blocks) {
    (void)state; (void)p; (void)blocks;
    return 0;
}
#endif
