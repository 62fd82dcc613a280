// NEON GEMM microkernels: 4 rows x 8 columns (two Q registers per row), float32 and compressed B. arm64 only.
#if defined(__aarch64__)
#include "kiln_gemm_q.h"
#include "kiln_kernels.h"
#include "kiln_unary.h"

#include <arm_neon.h>
#include <string.h>

// Stores the 4 x 8 accumulators (row i's halves at acc[2i], acc[2i + 1]) into C[0..mr, 0..nc],
// adding the tile already there with `accumulate`, then the epilogue over the stored tile.
static inline __attribute__((always_inline)) void kiln_neon_store(const float32x4_t *acc, size_t mr, size_t nc, float *c, size_t ldc,
                                                                  const kiln_tile_args *t) {
    float tile[4][8];
    for (int i = 0; i < 4; i++) { vst1q_f32(tile[i], acc[2 * i]); vst1q_f32(tile[i] + 4, acc[2 * i + 1]); }
    for (size_t i = 0; i < mr; i++) {
        if (t && t->accumulate) for (size_t j = 0; j < nc; j++) c[i * ldc + j] += tile[i][j];
        else memcpy(c + i * ldc, tile[i], nc * sizeof(float));
    }
    if (t) kiln_tile_args_apply(mr, nc, c, ldc, t);
}

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
    const float32x4_t acc[8] = {c00, c01, c10, c11, c20, c21, c30, c31};
    kiln_neon_store(acc, mr, nc, c, ldc, t);
}

// Compressed panels (4 rows x 8 columns): int8/uint8 rows widened in registers (two widening
// moves and a conversion per 4 values), 4-bit integers taken from K-packed words by two shifts;
// per-column scales applied to the accumulators, per-block scales and zero points as values are
// decoded. Tables and packed A are decoded a block of k at a time for the float32 kernel.
static inline __attribute__((always_inline)) void kiln_q_neon_body(const int MODE, const int DEQ, size_t mr, size_t nc, size_t k,
                                                                   const float *a, size_t lda, const kiln_packed_b *b, size_t panel,
                                                                   float *c, size_t ldc, const kiln_tile_args *t) {
    const float *r0 = a, *r1 = mr > 1 ? r0 + lda : r0, *r2 = mr > 2 ? r1 + lda : r1, *r3 = mr > 3 ? r2 + lda : r2;
    float32x4_t c00 = vdupq_n_f32(0), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
    const size_t n0 = panel * 8, kb = DEQ ? b->k_block : k;
    float32x4_t s0 = vdupq_n_f32(1), s1 = s0, z0 = vdupq_n_f32(0), z1 = z0;
    const int8_t *s8 = (const int8_t *)b->data + panel * k * 8;
    const uint32_t *w4 = (const uint32_t *)b->data + panel * ((k + 7) / 8) * 8;
    uint32x4_t wa = vdupq_n_u32(0), wb = wa;
    for (size_t p = 0; p < k; p++) {
        if (DEQ && p % kb == 0) {
            const float *sp = kiln_panel_block(b->scale, b, panel, p / kb);
            s0 = vld1q_f32(sp);
            s1 = vld1q_f32(sp + 4);
            if (b->zero) { z0 = vld1q_f32(b->zero + (sp - b->scale)); z1 = vld1q_f32(b->zero + (sp - b->scale) + 4); }
        }
        float32x4_t b0, b1;
        if (MODE == 0) { // int8
            const int16x8_t w = vmovl_s8(vld1_s8(s8 + p * 8));
            b0 = vcvtq_f32_s32(vmovl_s16(vget_low_s16(w)));
            b1 = vcvtq_f32_s32(vmovl_s16(vget_high_s16(w)));
        } else if (MODE == 1) { // uint8
            const uint16x8_t w = vmovl_u8(vld1_u8((const uint8_t *)s8 + p * 8));
            b0 = vcvtq_f32_u32(vmovl_u16(vget_low_u16(w)));
            b1 = vcvtq_f32_u32(vmovl_u16(vget_high_u16(w)));
        } else { // 4-bit words: step p % 8 of word row p / 8
            if (p % 8 == 0) { wa = vld1q_u32(w4 + (p / 8) * 8); wb = vld1q_u32(w4 + (p / 8) * 8 + 4); }
            const int32x4_t up = vdupq_n_s32((int32_t)(28 - 4 * (p % 8)));
            const int32x4_t ia = vreinterpretq_s32_u32(vshlq_u32(wa, up)), ib = vreinterpretq_s32_u32(vshlq_u32(wb, up));
            if (MODE == 2) { // signed: shift the nibble to the top, then arithmetically back
                b0 = vcvtq_f32_s32(vshrq_n_s32(ia, 28));
                b1 = vcvtq_f32_s32(vshrq_n_s32(ib, 28));
            } else {
                b0 = vcvtq_f32_u32(vshrq_n_u32(vreinterpretq_u32_s32(ia), 28));
                b1 = vcvtq_f32_u32(vshrq_n_u32(vreinterpretq_u32_s32(ib), 28));
            }
        }
        if (DEQ) { b0 = vmulq_f32(vsubq_f32(b0, z0), s0); b1 = vmulq_f32(vsubq_f32(b1, z1), s1); }
        c00 = vfmaq_n_f32(c00, b0, r0[p]); c01 = vfmaq_n_f32(c01, b1, r0[p]);
        c10 = vfmaq_n_f32(c10, b0, r1[p]); c11 = vfmaq_n_f32(c11, b1, r1[p]);
        c20 = vfmaq_n_f32(c20, b0, r2[p]); c21 = vfmaq_n_f32(c21, b1, r2[p]);
        c30 = vfmaq_n_f32(c30, b0, r3[p]); c31 = vfmaq_n_f32(c31, b1, r3[p]);
    }
    if (!DEQ) {
        float cs[8] = {0};
        memcpy(cs, b->scale + n0, (nc < 8 ? nc : 8) * sizeof(float));
        const float32x4_t q0 = vld1q_f32(cs), q1 = vld1q_f32(cs + 4);
        c00 = vmulq_f32(c00, q0); c01 = vmulq_f32(c01, q1); c10 = vmulq_f32(c10, q0); c11 = vmulq_f32(c11, q1);
        c20 = vmulq_f32(c20, q0); c21 = vmulq_f32(c21, q1); c30 = vmulq_f32(c30, q0); c31 = vmulq_f32(c31, q1);
    }
    const float32x4_t acc[8] = {c00, c01, c10, c11, c20, c21, c30, c31};
    kiln_neon_store(acc, mr, nc, c, ldc, t);
}

#define KILN_Q_NEON(name, MODE, DEQ) \
    static void name(KILN_Q_UKERNEL_PARAMS) { kiln_q_neon_body(MODE, DEQ, mr, nc, k, a, lda, b, panel, c, ldc, t); }
KILN_Q_NEON(kiln_q_neon_i8, 0, 0)
KILN_Q_NEON(kiln_q_neon_i8_deq, 0, 1)
KILN_Q_NEON(kiln_q_neon_u8, 1, 0)
KILN_Q_NEON(kiln_q_neon_u8_deq, 1, 1)
KILN_Q_NEON(kiln_q_neon_i4, 2, 0)
KILN_Q_NEON(kiln_q_neon_i4_deq, 2, 1)
KILN_Q_NEON(kiln_q_neon_u4_deq, 3, 1)
#undef KILN_Q_NEON

void kiln_q_gemm_4x8__neon(KILN_Q_UKERNEL_PARAMS) {
    if (mr == 0) return;
    const int deq = kiln_q_needs_dequantize(b);
    void (*fn)(KILN_Q_UKERNEL_PARAMS) = NULL;
    if (lda != 0 && b->nr == 8 && k > 0) {
        switch (b->kind) {
        case KILN_B_INT8: fn = deq ? kiln_q_neon_i8_deq : kiln_q_neon_i8; break;
        case KILN_B_UINT8: fn = deq ? kiln_q_neon_u8_deq : kiln_q_neon_u8; break;
        case KILN_B_INT4:
            if (deq && b->k_block % 8) break;
            fn = b->is_signed ? (deq ? kiln_q_neon_i4_deq : kiln_q_neon_i4) : (deq ? kiln_q_neon_u4_deq : NULL);
            break;
        default: break;
        }
    }
    if (fn) fn(mr, nc, k, a, lda, b, panel, c, ldc, t);
    else kiln_q_gemm_chunked(kiln_f32_gemm_4x8__neon, 4, mr, nc, k, a, lda, b, panel, c, ldc, t);
}
#endif
