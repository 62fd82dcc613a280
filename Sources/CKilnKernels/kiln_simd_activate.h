// In-register activations for the x86 vector kernels: kiln_activate512 (AVX-512) and
// kiln_activate256 (AVX2), each `(vectors, count, tile args)`, from one body
// (kiln_simd_activate_body.h). Internal to CKilnKernels.
#ifndef KILN_SIMD_ACTIVATE_H
#define KILN_SIMD_ACTIVATE_H
#if defined(__x86_64__)
#include <immintrin.h>

#include "kiln_unary.h"

#define KILN_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))
#define KILN_TARGET_AVX2 __attribute__((target("avx2,fma")))

// exp in vector lanes, the same steps as the scalar kiln_exp (kiln_math.h): clamp, n = round(x / ln 2),
// r = x − n·ln 2 in two parts, a degree-6 polynomial, times 2^n built in the exponent bits. The clamp
// keeps n ≤ 127, so the result is finite (about 2.2e38 at most): a sigmoid's refined reciprocal of
// an infinite denominator would be NaN.
#define KILN_DEFINE_VEXP(name, target, vec, ivec, set1, max, min, fmadd, mul, add, floor, cvt, add_epi32, slli, cast) \
    target static inline __attribute__((always_inline)) vec name(vec x) { \
        x = min(set1(88.3f), max(set1(-87.3f), x)); /* a NaN in x stays (min/max return their second operand) */ \
        const vec n = floor(fmadd(x, set1(1.44269504088896341f), set1(0.5f))); \
        const vec r = fmadd(n, set1(2.12194440e-4f), fmadd(n, set1(-0.693359375f), x)); \
        vec p = set1(1.9875691500e-4f); \
        p = fmadd(p, r, set1(1.3981999507e-3f)); \
        p = fmadd(p, r, set1(8.3334519073e-3f)); \
        p = fmadd(p, r, set1(4.1665795894e-2f)); \
        p = fmadd(p, r, set1(1.6666665459e-1f)); \
        p = fmadd(p, r, set1(5.0000001201e-1f)); \
        p = add(fmadd(mul(p, r), r, r), set1(1.0f)); \
        const ivec bits = slli(add_epi32(cvt(n), set1_epi32_##name(127)), 23); \
        return mul(p, cast(bits)); \
    }
#define set1_epi32_kiln_exp512(v) _mm512_set1_epi32(v)
#define set1_epi32_kiln_exp256(v) _mm256_set1_epi32(v)
#define KILN_FLOOR512(v) _mm512_roundscale_ps(v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)
#define KILN_FLOOR256(v) _mm256_round_ps(v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)
KILN_DEFINE_VEXP(kiln_exp512, KILN_TARGET_AVX512, __m512, __m512i, _mm512_set1_ps, _mm512_max_ps, _mm512_min_ps, _mm512_fmadd_ps,
                 _mm512_mul_ps, _mm512_add_ps, KILN_FLOOR512, _mm512_cvtps_epi32, _mm512_add_epi32, _mm512_slli_epi32,
                 _mm512_castsi512_ps)
KILN_DEFINE_VEXP(kiln_exp256, KILN_TARGET_AVX2, __m256, __m256i, _mm256_set1_ps, _mm256_max_ps, _mm256_min_ps, _mm256_fmadd_ps,
                 _mm256_mul_ps, _mm256_add_ps, KILN_FLOOR256, _mm256_cvtps_epi32, _mm256_add_epi32, _mm256_slli_epi32,
                 _mm256_castsi256_ps)
#undef KILN_DEFINE_VEXP

// 1 / d for d ≥ 1 (the sigmoid's denominator): the hardware estimate refined by one Newton step
// (relative error about 1e-7 for AVX2's 12-bit estimate, far below for AVX-512's 14-bit one).
KILN_TARGET_AVX512 static inline __attribute__((always_inline)) __m512 kiln_recip512(__m512 d) {
    const __m512 y = _mm512_rcp14_ps(d);
    return _mm512_mul_ps(y, _mm512_fnmadd_ps(d, y, _mm512_set1_ps(2.0f)));
}
KILN_TARGET_AVX2 static inline __attribute__((always_inline)) __m256 kiln_recip256(__m256 d) {
    const __m256 y = _mm256_rcp_ps(d);
    return _mm256_mul_ps(y, _mm256_fnmadd_ps(d, y, _mm256_set1_ps(2.0f)));
}

#define KILN_ACT_TARGET KILN_TARGET_AVX512
#define KILN_ACT_NAME kiln_activate512
#define KILN_ACT_VEC __m512
#define KILN_ACT_SET1(f) _mm512_set1_ps(f)
#define KILN_ACT_ZERO() _mm512_setzero_ps()
#define KILN_ACT_MAX(a, b) _mm512_max_ps(a, b)
#define KILN_ACT_MIN(a, b) _mm512_min_ps(a, b)
#define KILN_ACT_MUL(a, b) _mm512_mul_ps(a, b)
#define KILN_ACT_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define KILN_ACT_LEAKY(v, a) _mm512_mask_mul_ps(v, _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ), v, a)
#define KILN_ACT_EXP(v) kiln_exp512(v)
#define KILN_ACT_DIV(a, b) _mm512_mul_ps(a, kiln_recip512(b))
#define KILN_ACT_ADD(a, b) _mm512_add_ps(a, b)
#define KILN_ACT_NEG(v) _mm512_sub_ps(_mm512_setzero_ps(), v)
#define KILN_ACT_ABS(v) _mm512_abs_ps(v)
#define KILN_ACT_COPYSIGN(m, s) _mm512_castsi512_ps(_mm512_ternarylogic_epi32(_mm512_castps_si512(m), _mm512_castps_si512(s), \
                                                                          _mm512_set1_epi32(INT32_MIN), 0xd8))
#include "kiln_simd_activate_body.h"

#define KILN_ACT_TARGET KILN_TARGET_AVX2
#define KILN_ACT_NAME kiln_activate256
#define KILN_ACT_VEC __m256
#define KILN_ACT_SET1(f) _mm256_set1_ps(f)
#define KILN_ACT_ZERO() _mm256_setzero_ps()
#define KILN_ACT_MAX(a, b) _mm256_max_ps(a, b)
#define KILN_ACT_MIN(a, b) _mm256_min_ps(a, b)
#define KILN_ACT_MUL(a, b) _mm256_mul_ps(a, b)
#define KILN_ACT_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define KILN_ACT_LEAKY(v, a) _mm256_blendv_ps(v, _mm256_mul_ps(v, a), _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_LT_OQ))
#define KILN_ACT_EXP(v) kiln_exp256(v)
#define KILN_ACT_DIV(a, b) _mm256_mul_ps(a, kiln_recip256(b))
#define KILN_ACT_ADD(a, b) _mm256_add_ps(a, b)
#define KILN_ACT_NEG(v) _mm256_sub_ps(_mm256_setzero_ps(), v)
#define KILN_ACT_ABS(v) _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v)
#define KILN_ACT_COPYSIGN(m, s) _mm256_or_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), m), _mm256_and_ps(_mm256_set1_ps(-0.0f), s))
#include "kiln_simd_activate_body.h"
#endif
#endif
