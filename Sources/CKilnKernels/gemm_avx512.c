// AVX-512 GEMM microkernel: 8 rows x 32 columns (two ZMM registers per row, 16 accumulators),
// so each step of k issues 16 FMAs for 2 panel loads and 8 broadcasts.
#if defined(__x86_64__)
#include "kiln_kernels.h"

#include <immintrin.h>

__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))
void kiln_f32_gemm_8x32__avx512(size_t mr, size_t nc, size_t k, const float *a, size_t lda, const float *b,
                                size_t ldb, float *c, size_t ldc) {
    // Rows past `mr` read the last valid row and are never stored.
    const float *r0 = a;
    const float *r1 = mr > 1 ? r0 + lda : r0;
    const float *r2 = mr > 2 ? r1 + lda : r1;
    const float *r3 = mr > 3 ? r2 + lda : r2;
    const float *r4 = mr > 4 ? r3 + lda : r3;
    const float *r5 = mr > 5 ? r4 + lda : r4;
    const float *r6 = mr > 6 ? r5 + lda : r5;
    const float *r7 = mr > 7 ? r6 + lda : r6;
    __m512 c00 = _mm512_setzero_ps(), c01 = _mm512_setzero_ps(), c10 = _mm512_setzero_ps(), c11 = _mm512_setzero_ps();
    __m512 c20 = _mm512_setzero_ps(), c21 = _mm512_setzero_ps(), c30 = _mm512_setzero_ps(), c31 = _mm512_setzero_ps();
    __m512 c40 = _mm512_setzero_ps(), c41 = _mm512_setzero_ps(), c50 = _mm512_setzero_ps(), c51 = _mm512_setzero_ps();
    __m512 c60 = _mm512_setzero_ps(), c61 = _mm512_setzero_ps(), c70 = _mm512_setzero_ps(), c71 = _mm512_setzero_ps();
    for (size_t p = 0; p < k; p++) {
        const __m512 b0 = _mm512_loadu_ps(b + p * ldb), b1 = _mm512_loadu_ps(b + p * ldb + 16);
        __m512 v = _mm512_set1_ps(r0[p]);
        c00 = _mm512_fmadd_ps(v, b0, c00); c01 = _mm512_fmadd_ps(v, b1, c01);
        v = _mm512_set1_ps(r1[p]);
        c10 = _mm512_fmadd_ps(v, b0, c10); c11 = _mm512_fmadd_ps(v, b1, c11);
        v = _mm512_set1_ps(r2[p]);
        c20 = _mm512_fmadd_ps(v, b0, c20); c21 = _mm512_fmadd_ps(v, b1, c21);
        v = _mm512_set1_ps(r3[p]);
        c30 = _mm512_fmadd_ps(v, b0, c30); c31 = _mm512_fmadd_ps(v, b1, c31);
        v = _mm512_set1_ps(r4[p]);
        c40 = _mm512_fmadd_ps(v, b0, c40); c41 = _mm512_fmadd_ps(v, b1, c41);
        v = _mm512_set1_ps(r5[p]);
        c50 = _mm512_fmadd_ps(v, b0, c50); c51 = _mm512_fmadd_ps(v, b1, c51);
        v = _mm512_set1_ps(r6[p]);
        c60 = _mm512_fmadd_ps(v, b0, c60); c61 = _mm512_fmadd_ps(v, b1, c61);
        v = _mm512_set1_ps(r7[p]);
        c70 = _mm512_fmadd_ps(v, b0, c70); c71 = _mm512_fmadd_ps(v, b1, c71);
    }
    const __mmask16 m0 = (__mmask16)(nc >= 16 ? 0xffffu : (1u << nc) - 1u);
    const __mmask16 m1 = (__mmask16)(nc >= 32 ? 0xffffu : nc > 16 ? (1u << (nc - 16)) - 1u : 0u);
    const __m512 lo[8] = {c00, c10, c20, c30, c40, c50, c60, c70};
    const __m512 hi[8] = {c01, c11, c21, c31, c41, c51, c61, c71};
    if (nc == 32) {
        // Full panels use plain stores: a masked store cannot forward to the epilogue's loads.
        for (size_t i = 0; i < mr; i++) {
            _mm512_storeu_ps(c + i * ldc, lo[i]);
            _mm512_storeu_ps(c + i * ldc + 16, hi[i]);
        }
        return;
    }
    for (size_t i = 0; i < mr; i++) {
        _mm512_mask_storeu_ps(c + i * ldc, m0, lo[i]);
        _mm512_mask_storeu_ps(c + i * ldc + 16, m1, hi[i]);
    }
}
#endif
