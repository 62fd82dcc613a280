// AVX2 + FMA GEMM microkernel: 6 rows x 16 columns (two YMM registers per row, 12 accumulators).
// Bias and the common activations are applied to the accumulators before the only store.
#if defined(__x86_64__)
#include "kiln_kernels.h"
#include "kiln_simd_activate.h"
#include "kiln_gemm_store.h"
#include "kiln_tile_rows.h"
#include "kiln_unary.h"

#include <immintrin.h>

// Loops over the accumulators run to compile-time constants (the body's MR in the k loop, this in
// the epilogue, rows past `mr` skipped), so the accumulators stay in registers through the k loop.

KILN_TARGET_AVX2 static inline __attribute__((always_inline)) void kiln_gemm_6x16_body(const int MR, size_t mr, size_t nc, size_t k,
                                                                                   const float *a, size_t lda, const float *b,
                                                                                   size_t ldb, float *c, size_t ldc,
                                                                                   const kiln_tile_args *t, const int packed,
                                                                                   const float *const *rows, const int32_t *offsets, const size_t run) {
    // The k loop accumulates in arrays indexed only by constants (registers); the epilogue then
    // reads lo/hi, which it may index by row.
    __m256 l[6], h[6];
    for (int i = 0; i < 6; i++) l[i] = h[i] = _mm256_setzero_ps();
    if (packed == 2) {
        // Indirect A: element (i, q·run + j) at rows[i][offsets[q] + j] (an implicit im2col); each run
        // is the strided-A loop over row pointers moved to the run's offset.
        for (size_t q = 0; q < k / run; q++) {
            const float *r[6];
            for (int i = 0; i < MR; i++) r[i] = rows[i] + offsets[q];
            const float *bq = b + q * run * ldb;
            for (size_t j = 0; j < run; j++) {
                const __m256 b0 = _mm256_loadu_ps(bq + j * ldb), b1 = _mm256_loadu_ps(bq + j * ldb + 8);
                for (int i = 0; i < MR; i++) {
                    const __m256 v = _mm256_broadcast_ss(r[i] + j);
                    l[i] = _mm256_fmadd_ps(v, b0, l[i]);
                    h[i] = _mm256_fmadd_ps(v, b1, h[i]);
                }
            }
        }
    } else if (packed) {
        for (size_t p = 0; p < k; p++) {
            const __m256 b0 = _mm256_loadu_ps(b + p * ldb), b1 = _mm256_loadu_ps(b + p * ldb + 8);
            const float *ap = a + p * 6;
            for (int i = 0; i < MR; i++) {
                const __m256 v = _mm256_broadcast_ss(ap + i);
                l[i] = _mm256_fmadd_ps(v, b0, l[i]);
                h[i] = _mm256_fmadd_ps(v, b1, h[i]);
            }
        }
    } else {
        // Row pointers for the MR rows the body was built for (MR = mr).
        const float *r[6];
        r[0] = a;
        for (int i = 1; i < MR; i++) r[i] = r[i - 1] + lda;
        for (size_t p = 0; p < k; p++) {
            const __m256 b0 = _mm256_loadu_ps(b + p * ldb), b1 = _mm256_loadu_ps(b + p * ldb + 8);
            for (int i = 0; i < MR; i++) {
                const __m256 v = _mm256_broadcast_ss(r[i] + p);
                l[i] = _mm256_fmadd_ps(v, b0, l[i]);
                h[i] = _mm256_fmadd_ps(v, b1, h[i]);
            }
        }
    }
    __m256 lo[6], hi[6];
    for (int i = 0; i < 6; i++) { lo[i] = l[i]; hi[i] = h[i]; }
    kiln_store_tile256(lo, hi, mr, nc, c, ldc, t);
}

KILN_TARGET_AVX2 void kiln_f32_gemm_6x16__avx2(KILN_UKERNEL_PARAMS) {
    if (mr == 0) return;
#define KILN_PACKED(R) kiln_gemm_6x16_body(R, mr, nc, k, a, lda, b, ldb, c, ldc, t, 1, NULL, NULL, 1)
#define KILN_STRIDED(R) kiln_gemm_6x16_body(R, mr, nc, k, a, lda, b, ldb, c, ldc, t, 0, NULL, NULL, 1)
    if (lda == 0) { KILN_ROWS_DISPATCH(6, KILN_PACKED) }
    else { KILN_ROWS_DISPATCH(6, KILN_STRIDED) }
#undef KILN_PACKED
#undef KILN_STRIDED
}

KILN_TARGET_AVX2 void kiln_f32_igemm_6x16__avx2(KILN_IGEMM_PARAMS) {
    if (mr == 0) return;
#define KILN_INDIRECT(R) kiln_gemm_6x16_body(R, mr, nc, k, NULL, 0, b, 16, c, ldc, t, 2, rows, offsets, run)
    KILN_ROWS_DISPATCH(6, KILN_INDIRECT)
#undef KILN_INDIRECT
}
#endif
