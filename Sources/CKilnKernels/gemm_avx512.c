// AVX-512 GEMM microkernel: 8 rows x 32 columns (two ZMM registers per row, 16 accumulators; a panel
// with at most 16 live columns runs one register per row),
// so each step of k issues 16 FMAs for 2 panel loads and 8 broadcasts. Bias and the common
// activations are applied to the accumulators before the only store.
#if defined(__x86_64__)
#include "kiln_kernels.h"
#include "kiln_simd_activate.h"
#include "kiln_gemm_store.h"
#include "kiln_tile_rows.h"
#include "kiln_unary.h"

#include <immintrin.h>

// Loops over the accumulators run to compile-time constants (the body's MR in the k loop, this in
// the epilogue, rows past `mr` skipped), so the accumulators stay in registers through the k loop.

KILN_TARGET_AVX512 static inline __attribute__((always_inline)) void kiln_gemm_8x32_body(const int MR, const int NV, size_t mr, size_t nc, size_t k,
                                                                                     const float *a, size_t lda, const float *b,
                                                                                     size_t ldb, float *c, size_t ldc,
                                                                                     const kiln_tile_args *t, const int packed,
                                                                                     const float *const *rows, const int32_t *offsets, const size_t run) {
    // The k loop accumulates in arrays indexed only by constants (registers); the epilogue then
    // reads lo/hi, which it may index by row.
    __m512 l[8], h[8];
    for (int i = 0; i < 8; i++) l[i] = h[i] = _mm512_setzero_ps();
    if (packed == 2) {
        // Indirect A: element (i, q·run + j) at rows[i][offsets[q] + j] (an implicit im2col); each run
        // is the strided-A loop over row pointers moved to the run's offset.
        for (size_t q = 0; q < k / run; q++) {
            const float *r[8];
            for (int i = 0; i < MR; i++) r[i] = rows[i] + offsets[q];
            const float *bq = b + q * run * ldb;
            for (size_t j = 0; j < run; j++) {
                const __m512 b0 = _mm512_loadu_ps(bq + j * ldb), b1 = NV == 2 ? _mm512_loadu_ps(bq + j * ldb + 16) : b0;
                for (int i = 0; i < MR; i++) {
                    const __m512 v = _mm512_set1_ps(r[i][j]);
                    l[i] = _mm512_fmadd_ps(v, b0, l[i]);
                    if (NV == 2) h[i] = _mm512_fmadd_ps(v, b1, h[i]);
                }
            }
        }
    } else if (packed) {
        // Eight rows interleaved per step of k: one stream of broadcasts.
        for (size_t p = 0; p < k; p++) {
            const __m512 b0 = _mm512_loadu_ps(b + p * ldb), b1 = NV == 2 ? _mm512_loadu_ps(b + p * ldb + 16) : b0;
            const float *ap = a + p * 8;
            for (int i = 0; i < MR; i++) {
                const __m512 v = _mm512_set1_ps(ap[i]);
                l[i] = _mm512_fmadd_ps(v, b0, l[i]);
                if (NV == 2) h[i] = _mm512_fmadd_ps(v, b1, h[i]);
            }
        }
    } else {
        // Row pointers for the MR rows the body was built for (MR = mr).
        const float *r[8];
        r[0] = a;
        for (int i = 1; i < MR; i++) r[i] = r[i - 1] + lda;
        for (size_t p = 0; p < k; p++) {
            const __m512 b0 = _mm512_loadu_ps(b + p * ldb), b1 = NV == 2 ? _mm512_loadu_ps(b + p * ldb + 16) : b0;
            for (int i = 0; i < MR; i++) {
                const __m512 v = _mm512_set1_ps(r[i][p]);
                l[i] = _mm512_fmadd_ps(v, b0, l[i]);
                if (NV == 2) h[i] = _mm512_fmadd_ps(v, b1, h[i]);
            }
        }
    }
    __m512 lo[8], hi[8];
    for (int i = 0; i < 8; i++) { lo[i] = l[i]; hi[i] = h[i]; }
    kiln_store_tile512_nv(NV, lo, hi, mr, nc, c, ldc, t);
}

KILN_TARGET_AVX512 void kiln_f32_gemm_8x32__avx512(KILN_UKERNEL_PARAMS) {
    if (mr == 0) return;
#define KILN_PACKED(R) kiln_gemm_8x32_body(R, 2, mr, nc, k, a, lda, b, ldb, c, ldc, t, 1, NULL, NULL, 1)
#define KILN_STRIDED(R) kiln_gemm_8x32_body(R, 2, mr, nc, k, a, lda, b, ldb, c, ldc, t, 0, NULL, NULL, 1)
#define KILN_STRIDED_NARROW(R) kiln_gemm_8x32_body(R, 1, mr, nc, k, a, lda, b, ldb, c, ldc, t, 0, NULL, NULL, 1)
    // A panel of at most 16 live columns (a narrow layer, or the last panel of N) computes only those.
    if (lda == 0) { KILN_ROWS_DISPATCH(8, KILN_PACKED) }
    else if (nc <= 16) { KILN_ROWS_DISPATCH(8, KILN_STRIDED_NARROW) }
    else { KILN_ROWS_DISPATCH(8, KILN_STRIDED) }
#undef KILN_PACKED
#undef KILN_STRIDED
#undef KILN_STRIDED_NARROW
}

KILN_TARGET_AVX512 void kiln_f32_igemm_8x32__avx512(KILN_IGEMM_PARAMS) {
    if (mr == 0) return;
#define KILN_INDIRECT(R) kiln_gemm_8x32_body(R, 2, mr, nc, k, NULL, 0, b, 32, c, ldc, t, 2, rows, offsets, run)
#define KILN_INDIRECT_NARROW(R) kiln_gemm_8x32_body(R, 1, mr, nc, k, NULL, 0, b, 32, c, ldc, t, 2, rows, offsets, run)
    if (nc <= 16) { KILN_ROWS_DISPATCH(8, KILN_INDIRECT_NARROW) }
    else { KILN_ROWS_DISPATCH(8, KILN_INDIRECT) }
#undef KILN_INDIRECT
#undef KILN_INDIRECT_NARROW
}
#endif
