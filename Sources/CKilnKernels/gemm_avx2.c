// AVX2 + FMA GEMM microkernel: 6 rows x 16 columns (two YMM registers per row).
#if defined(__x86_64__)
#include "kiln_kernels.h"

#include <immintrin.h>
#include <string.h>

__attribute__((target("avx2,fma")))
void kiln_f32_gemm_6x16__avx2(size_t mr, size_t nc, size_t k, const float *a, size_t lda, const float *b, size_t ldb,
                              float *c, size_t ldc) {
    // Rows past `mr` read the last valid row and are never stored.
    const float *a0 = a;
    const float *a1 = mr > 1 ? a0 + lda : a0;
    const float *a2 = mr > 2 ? a1 + lda : a1;
    const float *a3 = mr > 3 ? a2 + lda : a2;
    const float *a4 = mr > 4 ? a3 + lda : a3;
    const float *a5 = mr > 5 ? a4 + lda : a4;
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
    __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
    __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
    __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
    __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
    __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
    for (size_t p = 0; p < k; p++) {
        const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
        b += ldb;
        __m256 v = _mm256_broadcast_ss(a0 + p);
        c00 = _mm256_fmadd_ps(v, b0, c00); c01 = _mm256_fmadd_ps(v, b1, c01);
        v = _mm256_broadcast_ss(a1 + p);
        c10 = _mm256_fmadd_ps(v, b0, c10); c11 = _mm256_fmadd_ps(v, b1, c11);
        v = _mm256_broadcast_ss(a2 + p);
        c20 = _mm256_fmadd_ps(v, b0, c20); c21 = _mm256_fmadd_ps(v, b1, c21);
        v = _mm256_broadcast_ss(a3 + p);
        c30 = _mm256_fmadd_ps(v, b0, c30); c31 = _mm256_fmadd_ps(v, b1, c31);
        v = _mm256_broadcast_ss(a4 + p);
        c40 = _mm256_fmadd_ps(v, b0, c40); c41 = _mm256_fmadd_ps(v, b1, c41);
        v = _mm256_broadcast_ss(a5 + p);
        c50 = _mm256_fmadd_ps(v, b0, c50); c51 = _mm256_fmadd_ps(v, b1, c51);
    }
    if (nc == 16) {
        // Full panels store straight to C (a later epilogue reads them back through store forwarding).
        const __m256 lo[6] = {c00, c10, c20, c30, c40, c50}, hi[6] = {c01, c11, c21, c31, c41, c51};
        for (size_t i = 0; i < mr; i++) {
            _mm256_storeu_ps(c + i * ldc, lo[i]);
            _mm256_storeu_ps(c + i * ldc + 8, hi[i]);
        }
        return;
    }
    float tile[6][16];
    _mm256_storeu_ps(tile[0], c00); _mm256_storeu_ps(tile[0] + 8, c01);
    _mm256_storeu_ps(tile[1], c10); _mm256_storeu_ps(tile[1] + 8, c11);
    _mm256_storeu_ps(tile[2], c20); _mm256_storeu_ps(tile[2] + 8, c21);
    _mm256_storeu_ps(tile[3], c30); _mm256_storeu_ps(tile[3] + 8, c31);
    _mm256_storeu_ps(tile[4], c40); _mm256_storeu_ps(tile[4] + 8, c41);
    _mm256_storeu_ps(tile[5], c50); _mm256_storeu_ps(tile[5] + 8, c51);
    for (size_t i = 0; i < mr; i++) memcpy(c + i * ldc, tile[i], nc * sizeof(float));
}
#endif
