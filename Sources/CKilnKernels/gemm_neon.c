// NEON GEMM microkernel: 4 rows x 8 columns (two Q registers per row). arm64 only.
#if defined(__aarch64__)
#include "kiln_gemm_q.h"
#include "kiln_kernels.h"
#include "kiln_unary.h"

#include <arm_neon.h>
#include <string.h>

void kiln_f32_gemm_4x8__neon(KILN_UKERNEL_PARAMS) {
    // Packed A (lda == 0): row i of step p at a[p * 4 + i]; otherwise rows lda apart, rows past
    // `mr` reading the last valid row.
    const size_t rs = lda ? lda : 1, cs = lda ? 1 : 4;
    const float *a0 = a;
    const float *a1 = mr > 1 || !lda ? a0 + rs : a0;
    const float *a2 = mr > 2 || !lda ? a1 + rs : a1;
    const float *a3 = mr > 3 || !lda ? a2 + rs : a2;
    float32x4_t c00 = vdupq_n_f32(0), c01 = vdupq_n_f32(0), c10 = vdupq_n_f32(0), c11 = vdupq_n_f32(0);
    float32x4_t c20 = vdupq_n_f32(0), c21 = vdupq_n_f32(0), c30 = vdupq_n_f32(0), c31 = vdupq_n_f32(0);
    for (size_t p = 0; p < k; p++) {
        const float32x4_t b0 = vld1q_f32(b + p * ldb), b1 = vld1q_f32(b + p * ldb + 4);
        const size_t q = p * cs;
        c00 = vfmaq_n_f32(c00, b0, a0[q]); c01 = vfmaq_n_f32(c01, b1, a0[q]);
        c10 = vfmaq_n_f32(c10, b0, a1[q]); c11 = vfmaq_n_f32(c11, b1, a1[q]);
        c20 = vfmaq_n_f32(c20, b0, a2[q]); c21 = vfmaq_n_f32(c21, b1, a2[q]);
        c30 = vfmaq_n_f32(c30, b0, a3[q]); c31 = vfmaq_n_f32(c31, b1, a3[q]);
    }
    float tile[4][8];
    vst1q_f32(tile[0], c00); vst1q_f32(tile[0] + 4, c01);
    vst1q_f32(tile[1], c10); vst1q_f32(tile[1] + 4, c11);
    vst1q_f32(tile[2], c20); vst1q_f32(tile[2] + 4, c21);
    vst1q_f32(tile[3], c30); vst1q_f32(tile[3] + 4, c31);
    for (size_t i = 0; i < mr; i++) {
        if (t && t->accumulate) for (size_t j = 0; j < nc; j++) c[i * ldc + j] += tile[i][j];
        else memcpy(c + i * ldc, tile[i], nc * sizeof(float));
    }
    if (t) kiln_tile_args_apply(mr, nc, c, ldc, t);
}

// Compressed panels: decoded a block of k at a time into a stack buffer for the float32 kernel.
void kiln_q_gemm_4x8__neon(KILN_Q_UKERNEL_PARAMS) {
    kiln_q_gemm_chunked(kiln_f32_gemm_4x8__neon, 4, mr, nc, k, a, lda, b, panel, c, ldc, t);
}
#endif
