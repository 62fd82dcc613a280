// AVX-512 GEMM microkernel: 8 rows x 16 columns (one ZMM register per row).
#if defined(__x86_64__)
#include "kiln_kernels.h"

#include <immintrin.h>

__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))
void kiln_f32_gemm_8x16__avx512(size_t mr, size_t nc, size_t k, const float *a, size_t lda, const float *b,
                                size_t ldb, float *c, size_t ldc) {
    const float *rows[8];
    for (size_t i = 0; i < 8; i++) rows[i] = a + (i < mr ? i : mr - 1) * lda;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps(), acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();
    __m512 acc4 = _mm512_setzero_ps(), acc5 = _mm512_setzero_ps(), acc6 = _mm512_setzero_ps(), acc7 = _mm512_setzero_ps();
    const float *r0 = rows[0], *r1 = rows[1], *r2 = rows[2], *r3 = rows[3];
    const float *r4 = rows[4], *r5 = rows[5], *r6 = rows[6], *r7 = rows[7];
    for (size_t p = 0; p < k; p++) {
        const __m512 bv = _mm512_loadu_ps(b + p * ldb);
        acc0 = _mm512_fmadd_ps(_mm512_set1_ps(r0[p]), bv, acc0);
        acc1 = _mm512_fmadd_ps(_mm512_set1_ps(r1[p]), bv, acc1);
        acc2 = _mm512_fmadd_ps(_mm512_set1_ps(r2[p]), bv, acc2);
        acc3 = _mm512_fmadd_ps(_mm512_set1_ps(r3[p]), bv, acc3);
        acc4 = _mm512_fmadd_ps(_mm512_set1_ps(r4[p]), bv, acc4);
        acc5 = _mm512_fmadd_ps(_mm512_set1_ps(r5[p]), bv, acc5);
        acc6 = _mm512_fmadd_ps(_mm512_set1_ps(r6[p]), bv, acc6);
        acc7 = _mm512_fmadd_ps(_mm512_set1_ps(r7[p]), bv, acc7);
    }
    const __mmask16 mask = (__mmask16)((1u << nc) - 1u);
    const __m512 accs[8] = {acc0, acc1, acc2, acc3, acc4, acc5, acc6, acc7};
    for (size_t i = 0; i < mr; i++) _mm512_mask_storeu_ps(c + i * ldc, mask, accs[i]);
}
#endif
