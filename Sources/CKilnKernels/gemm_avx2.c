// AVX2 + FMA GEMM microkernel: 6 rows x 16 columns (two YMM registers per row, 12 accumulators).
// Bias and the common activations are applied to the accumulators before the only store.
#if defined(__x86_64__)
#include "kiln_kernels.h"
#include "kiln_unary.h"

#include <immintrin.h>
#include <string.h>

#define KILN_TARGET_AVX2 __attribute__((target("avx2,fma")))

// The activation of `op` on 6 rows of two vectors, NaN handled as in the scalar forms (max/min
// return their second operand when either is NaN: relu and clip keep a NaN, the clamp of the
// hard sigmoid maps it to 1 as fminf/fmaxf do).
KILN_TARGET_AVX2 static inline __attribute__((always_inline)) void kiln_activate_6x16(__m256 lo[6], __m256 hi[6],
                                                                                  const kiln_tile_args *t) {
    const __m256 zero = _mm256_setzero_ps();
    switch (t->activation) {
    case KILN_UNARY_RELU:
        for (int i = 0; i < 6; i++) { lo[i] = _mm256_max_ps(zero, lo[i]); hi[i] = _mm256_max_ps(zero, hi[i]); }
        return;
    case KILN_UNARY_HARD_SWISH: {
        const __m256 one = _mm256_set1_ps(1.0f), sixth = _mm256_set1_ps(1.0f / 6.0f), half = _mm256_set1_ps(0.5f);
        for (int i = 0; i < 6; i++) {
            __m256 g = _mm256_max_ps(_mm256_min_ps(_mm256_fmadd_ps(lo[i], sixth, half), one), zero);
            lo[i] = _mm256_mul_ps(lo[i], g);
            g = _mm256_max_ps(_mm256_min_ps(_mm256_fmadd_ps(hi[i], sixth, half), one), zero);
            hi[i] = _mm256_mul_ps(hi[i], g);
        }
        return;
    }
    case KILN_UNARY_HARD_SIGMOID: {
        const __m256 one = _mm256_set1_ps(1.0f), a = _mm256_set1_ps(t->alpha), b = _mm256_set1_ps(t->beta);
        for (int i = 0; i < 6; i++) {
            lo[i] = _mm256_max_ps(_mm256_min_ps(_mm256_fmadd_ps(a, lo[i], b), one), zero);
            hi[i] = _mm256_max_ps(_mm256_min_ps(_mm256_fmadd_ps(a, hi[i], b), one), zero);
        }
        return;
    }
    case KILN_UNARY_CLIP: {
        const __m256 a = _mm256_set1_ps(t->alpha), b = _mm256_set1_ps(t->beta);
        for (int i = 0; i < 6; i++) {
            lo[i] = _mm256_min_ps(b, _mm256_max_ps(a, lo[i]));
            hi[i] = _mm256_min_ps(b, _mm256_max_ps(a, hi[i]));
        }
        return;
    }
    case KILN_UNARY_LEAKY_RELU: {
        const __m256 a = _mm256_set1_ps(t->alpha);
        for (int i = 0; i < 6; i++) {
            lo[i] = _mm256_blendv_ps(lo[i], _mm256_mul_ps(lo[i], a), _mm256_cmp_ps(lo[i], zero, _CMP_LT_OQ));
            hi[i] = _mm256_blendv_ps(hi[i], _mm256_mul_ps(hi[i], a), _mm256_cmp_ps(hi[i], zero, _CMP_LT_OQ));
        }
        return;
    }
    default:
        return;
    }
}

KILN_TARGET_AVX2 static inline __attribute__((always_inline)) void kiln_gemm_6x16_body(size_t mr, size_t nc, size_t k,
                                                                                   const float *a, size_t lda, const float *b,
                                                                                   size_t ldb, float *c, size_t ldc,
                                                                                   const kiln_tile_args *t, const int packed) {
    __m256 lo[6], hi[6];
    for (int i = 0; i < 6; i++) lo[i] = hi[i] = _mm256_setzero_ps();
    if (packed) {
        for (size_t p = 0; p < k; p++) {
            const __m256 b0 = _mm256_loadu_ps(b + p * ldb), b1 = _mm256_loadu_ps(b + p * ldb + 8);
            const float *ap = a + p * 6;
            for (int i = 0; i < 6; i++) {
                const __m256 v = _mm256_broadcast_ss(ap + i);
                lo[i] = _mm256_fmadd_ps(v, b0, lo[i]);
                hi[i] = _mm256_fmadd_ps(v, b1, hi[i]);
            }
        }
    } else {
        // Rows past `mr` read the last valid row and are never stored.
        const float *r[6];
        r[0] = a;
        for (int i = 1; i < 6; i++) r[i] = (size_t)i < mr ? r[i - 1] + lda : r[i - 1];
        for (size_t p = 0; p < k; p++) {
            const __m256 b0 = _mm256_loadu_ps(b + p * ldb), b1 = _mm256_loadu_ps(b + p * ldb + 8);
            for (int i = 0; i < 6; i++) {
                const __m256 v = _mm256_broadcast_ss(r[i] + p);
                lo[i] = _mm256_fmadd_ps(v, b0, lo[i]);
                hi[i] = _mm256_fmadd_ps(v, b1, hi[i]);
            }
        }
    }
    if (t && t->accumulate) {
        float tile[16] = {0};
        for (size_t i = 0; i < mr; i++) {
            const float *row = c + i * ldc;
            if (nc == 16) {
                lo[i] = _mm256_add_ps(lo[i], _mm256_loadu_ps(row));
                hi[i] = _mm256_add_ps(hi[i], _mm256_loadu_ps(row + 8));
            } else {
                memcpy(tile, row, nc * sizeof(float));
                lo[i] = _mm256_add_ps(lo[i], _mm256_loadu_ps(tile));
                hi[i] = _mm256_add_ps(hi[i], _mm256_loadu_ps(tile + 8));
            }
        }
    }
    const int registers = t && kiln_unary_in_registers(t);
    if (registers) {
        if (t->col_bias) {
            float cb[16] = {0};
            memcpy(cb, t->col_bias, (nc < 16 ? nc : 16) * sizeof(float));
            const __m256 cb0 = _mm256_loadu_ps(cb), cb1 = _mm256_loadu_ps(cb + 8);
            for (int i = 0; i < 6; i++) { lo[i] = _mm256_add_ps(lo[i], cb0); hi[i] = _mm256_add_ps(hi[i], cb1); }
        }
        if (t->row_bias) {
            for (int i = 0; i < 6; i++) {
                const __m256 rb = _mm256_set1_ps(t->row_bias[(size_t)i < mr ? i : 0]);
                lo[i] = _mm256_add_ps(lo[i], rb);
                hi[i] = _mm256_add_ps(hi[i], rb);
            }
        }
        kiln_activate_6x16(lo, hi, t);
    }
    if (nc == 16) {
        for (size_t i = 0; i < mr; i++) {
            _mm256_storeu_ps(c + i * ldc, lo[i]);
            _mm256_storeu_ps(c + i * ldc + 8, hi[i]);
        }
    } else {
        float tile[16];
        for (size_t i = 0; i < mr; i++) {
            _mm256_storeu_ps(tile, lo[i]);
            _mm256_storeu_ps(tile + 8, hi[i]);
            memcpy(c + i * ldc, tile, nc * sizeof(float));
        }
    }
    if (t && !registers) kiln_tile_args_apply(mr, nc, c, ldc, t);
}

KILN_TARGET_AVX2 void kiln_f32_gemm_6x16__avx2(KILN_UKERNEL_PARAMS) {
    if (lda == 0) kiln_gemm_6x16_body(mr, nc, k, a, lda, b, ldb, c, ldc, t, 1);
    else kiln_gemm_6x16_body(mr, nc, k, a, lda, b, ldb, c, ldc, t, 0);
}
#endif
