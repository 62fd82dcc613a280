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
#include "kiln_simd_activate_body.h"
#endif
#endif
