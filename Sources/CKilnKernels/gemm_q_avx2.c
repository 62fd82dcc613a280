// AVX2 + FMA GEMM microkernel over a compressed weight panel (6 rows x 16 columns, the tile of
// kiln_f32_gemm_6x16__avx2): each step of k decodes the panel's 16 values into two YMM registers
// and issues 12 FMAs.
//   int8 / uint8: one widening load and a conversion per 8 values;
//   int4: one 32-bit word per column holds 8 steps of k, taken out by two shifts;
//   table indices of 1-3 bits: a shift gives the index and one permute looks it up in a YMM holding
//   the group's table (repeated to 8 entries); 4 bits: two permutes and a blend on bit 3.
// Scales as in the AVX-512 kernel; anything else (6- and 8-bit tables, tables whose groups split a
// register, packed A) is decoded a block of k at a time on the stack for the float32 kernel.
#if defined(__x86_64__)
#include "kiln_gemm_q.h"
#include "kiln_gemm_store.h"
#include "kiln_tile_rows.h"

#include <immintrin.h>

enum { Q256_I8, Q256_U8, Q256_I4, Q256_U4, Q256_LUT, Q256_LUT16 };

#define Q256_SETS(MR) ((MR) <= 2 ? 2 : 1)

KILN_TARGET_AVX2 static inline __attribute__((always_inline)) __m256 kiln_q256_lut(const int MODE, __m256i idx, __m256i bit3,
                                                                                 const __m256 *L) {
    if (MODE == Q256_LUT) return _mm256_permutevar8x32_ps(L[0], idx);
    // Entries 0-7 and 8-15, chosen by bit 3 of the index (moved to the sign bit in `bit3`).
    return _mm256_blendv_ps(_mm256_permutevar8x32_ps(L[0], idx), _mm256_permutevar8x32_ps(L[1], idx), _mm256_castsi256_ps(bit3));
}

#define Q256_FMA(s, p) \
    for (int i = 0; i < MR; i++) { \
        const __m256 v = _mm256_broadcast_ss(r[i] + (p)); \
        l[s][i] = _mm256_fmadd_ps(v, b0, l[s][i]); \
        h[s][i] = _mm256_fmadd_ps(v, b1, h[s][i]); \
    }


KILN_TARGET_AVX2 static inline __attribute__((always_inline)) void kiln_q256_body(const int MR, const int MODE, const int BITS,
                                                                                const int DEQ, size_t mr, size_t nc, size_t k,
                                                                                const float *a, size_t lda, const kiln_packed_b *b,
                                                                                size_t panel, float *c, size_t ldc,
                                                                                const kiln_tile_args *t) {
    __m256 l[2][6], h[2][6];
    for (int s = 0; s < 2; s++) for (int i = 0; i < 6; i++) l[s][i] = h[s][i] = _mm256_setzero_ps();
    const float *r[6];
    r[0] = a;
    for (int i = 1; i < MR; i++) r[i] = r[i - 1] + lda;
    const size_t n0 = panel * 16;
    if (MODE == Q256_I8 || MODE == Q256_U8) {
        const uint8_t *src = (const uint8_t *)b->data + panel * k * 16;
        const size_t kb = DEQ ? b->k_block : k;
        for (size_t k0 = 0; k0 < k; k0 += kb) {
            __m256 s0 = _mm256_set1_ps(1), s1 = s0, z0 = _mm256_setzero_ps(), z1 = z0;
            if (DEQ) {
                const float *sp = kiln_panel_block(b->scale, b, panel, k0 / kb);
                s0 = _mm256_loadu_ps(sp);
                s1 = _mm256_loadu_ps(sp + 8);
                if (b->zero) { z0 = _mm256_loadu_ps(b->zero + (sp - b->scale)); z1 = _mm256_loadu_ps(b->zero + (sp - b->scale) + 8); }
            }
            const size_t end = k0 + kb < k ? k0 + kb : k;
            for (size_t p = k0; p < end; p++) {
                const __m128i w0 = _mm_loadl_epi64((const __m128i *)(src + p * 16)), w1 = _mm_loadl_epi64((const __m128i *)(src + p * 16 + 8));
                __m256 b0 = _mm256_cvtepi32_ps(MODE == Q256_I8 ? _mm256_cvtepi8_epi32(w0) : _mm256_cvtepu8_epi32(w0));
                __m256 b1 = _mm256_cvtepi32_ps(MODE == Q256_I8 ? _mm256_cvtepi8_epi32(w1) : _mm256_cvtepu8_epi32(w1));
                if (DEQ) { b0 = _mm256_mul_ps(_mm256_sub_ps(b0, z0), s0); b1 = _mm256_mul_ps(_mm256_sub_ps(b1, z1), s1); }
                if (Q256_SETS(MR) == 2 && (p & 1)) { Q256_FMA(1, p) } else { Q256_FMA(0, p) }
            }
        }
    } else {
        const int G = 32 / BITS;
        const size_t rows = (k + G - 1) / G;
        const uint32_t *src = (const uint32_t *)b->data + panel * rows * 16;
        __m256 L0[2], L1[2];
        __m256 s0 = _mm256_set1_ps(1), s1 = s0, z0 = _mm256_setzero_ps(), z1 = z0;
        const size_t kb = DEQ ? b->k_block : k;
        if (MODE == Q256_LUT || MODE == Q256_LUT16) {
            const size_t entries = b->entries;
            const float *t0 = b->lut + (n0 / b->group_size) * entries, *t1 = b->lut + ((n0 + 8) / b->group_size) * entries;
            if (n0 + 8 >= b->n) t1 = t0;
            if (MODE == Q256_LUT) {
                float r0[8], r1[8];
                for (int i = 0; i < 8; i++) { r0[i] = t0[(size_t)i % entries]; r1[i] = t1[(size_t)i % entries]; }
                L0[0] = _mm256_loadu_ps(r0);
                L1[0] = _mm256_loadu_ps(r1);
            } else {
                L0[0] = _mm256_loadu_ps(t0); L0[1] = _mm256_loadu_ps(t0 + 8);
                L1[0] = _mm256_loadu_ps(t1); L1[1] = _mm256_loadu_ps(t1 + 8);
            }
        }
        for (size_t g = 0; g < rows; g++) {
            const __m256i w0 = _mm256_loadu_si256((const __m256i *)(src + g * 16)), w1 = _mm256_loadu_si256((const __m256i *)(src + g * 16 + 8));
            const size_t p0 = g * G;
            if (DEQ && p0 % kb == 0) {
                const float *sp = kiln_panel_block(b->scale, b, panel, p0 / kb);
                s0 = _mm256_loadu_ps(sp);
                s1 = _mm256_loadu_ps(sp + 8);
                if (b->zero) { z0 = _mm256_loadu_ps(b->zero + (sp - b->scale)); z1 = _mm256_loadu_ps(b->zero + (sp - b->scale) + 8); }
            }
            const int steps = k - p0 < (size_t)G ? (int)(k - p0) : G;
#define Q256_STEP(tt) \
            if ((tt) < steps) { \
                __m256 b0, b1; \
                if (MODE == Q256_I4) { \
                    b0 = _mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(w0, 28 - 4 * (tt)), 28)); \
                    b1 = _mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(w1, 28 - 4 * (tt)), 28)); \
                } else if (MODE == Q256_U4) { \
                    const __m256i m = _mm256_set1_epi32(15); \
                    b0 = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(w0, 4 * (tt)), m)); \
                    b1 = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(w1, 4 * (tt)), m)); \
                } else { \
                    const __m256i i0 = _mm256_srli_epi32(w0, BITS * (tt)), i1 = _mm256_srli_epi32(w1, BITS * (tt)); \
                    const __m256i h0 = MODE == Q256_LUT16 ? _mm256_slli_epi32(w0, 28 - 4 * (tt)) : i0; \
                    const __m256i h1 = MODE == Q256_LUT16 ? _mm256_slli_epi32(w1, 28 - 4 * (tt)) : i1; \
                    b0 = kiln_q256_lut(MODE, i0, h0, L0); \
                    b1 = kiln_q256_lut(MODE, i1, h1, L1); \
                } \
                if (DEQ) { b0 = _mm256_mul_ps(_mm256_sub_ps(b0, z0), s0); b1 = _mm256_mul_ps(_mm256_sub_ps(b1, z1), s1); } \
                if (Q256_SETS(MR) == 2 && ((tt) & 1)) { Q256_FMA(1, p0 + (tt)) } else { Q256_FMA(0, p0 + (tt)) } \
            }
            Q256_STEP(0) Q256_STEP(1) Q256_STEP(2) Q256_STEP(3) Q256_STEP(4)
            if (G > 5) { Q256_STEP(5) Q256_STEP(6) Q256_STEP(7) }
            if (G > 8) { Q256_STEP(8) Q256_STEP(9) }
            if (G > 10) { Q256_STEP(10) Q256_STEP(11) Q256_STEP(12) Q256_STEP(13) Q256_STEP(14) Q256_STEP(15) }
            if (G > 16) {
                Q256_STEP(16) Q256_STEP(17) Q256_STEP(18) Q256_STEP(19) Q256_STEP(20) Q256_STEP(21) Q256_STEP(22) Q256_STEP(23)
                Q256_STEP(24) Q256_STEP(25) Q256_STEP(26) Q256_STEP(27) Q256_STEP(28) Q256_STEP(29) Q256_STEP(30) Q256_STEP(31)
            }
#undef Q256_STEP
        }
    }
    if (Q256_SETS(MR) == 2)
        for (int i = 0; i < MR; i++) { l[0][i] = _mm256_add_ps(l[0][i], l[1][i]); h[0][i] = _mm256_add_ps(h[0][i], h[1][i]); }
    const float *cs = (MODE == Q256_LUT || MODE == Q256_LUT16) ? (b->column_scale ? b->column_scale + n0 : NULL)
                      : (DEQ ? NULL : b->scale + n0);
    if (cs) {
        float s[16] = {0};
        memcpy(s, cs, (nc < 16 ? nc : 16) * sizeof(float));
        const __m256 c0 = _mm256_loadu_ps(s), c1 = _mm256_loadu_ps(s + 8);
        for (int i = 0; i < MR; i++) { l[0][i] = _mm256_mul_ps(l[0][i], c0); h[0][i] = _mm256_mul_ps(h[0][i], c1); }
    }
    // Copied out of the k loop's arrays, which are indexed only by constants and so stay in registers.
    __m256 lo[6], hi[6];
    for (int i = 0; i < 6; i++) { lo[i] = l[0][i]; hi[i] = h[0][i]; }
    kiln_store_tile256(lo, hi, mr, nc, c, ldc, t);
}
#undef Q256_FMA

#define Q256_BODY(R) kiln_q256_body(R, mode, bits, deq, mr, nc, k, a, lda, b, panel, c, ldc, t)
#define Q256_VARIANT(name, MODE, BITS, DEQ) \
    KILN_TARGET_AVX2 static void name(size_t mr, size_t nc, size_t k, const float *a, size_t lda, const kiln_packed_b *b, \
                                      size_t panel, float *c, size_t ldc, const kiln_tile_args *t) { \
        const int mode = MODE, bits = BITS, deq = DEQ; \
        KILN_ROWS_DISPATCH(6, Q256_BODY) \
    }
Q256_VARIANT(kiln_q256_i8, Q256_I8, 8, 0)
Q256_VARIANT(kiln_q256_i8_deq, Q256_I8, 8, 1)
Q256_VARIANT(kiln_q256_u8, Q256_U8, 8, 0)
Q256_VARIANT(kiln_q256_u8_deq, Q256_U8, 8, 1)
Q256_VARIANT(kiln_q256_i4, Q256_I4, 4, 0)
Q256_VARIANT(kiln_q256_i4_deq, Q256_I4, 4, 1)
Q256_VARIANT(kiln_q256_u4_deq, Q256_U4, 4, 1)
Q256_VARIANT(kiln_q256_lut1, Q256_LUT, 1, 0)
Q256_VARIANT(kiln_q256_lut2, Q256_LUT, 2, 0)
Q256_VARIANT(kiln_q256_lut3, Q256_LUT, 3, 0)
Q256_VARIANT(kiln_q256_lut4, Q256_LUT16, 4, 0)
#undef Q256_VARIANT
#undef Q256_BODY

KILN_TARGET_AVX2 void kiln_q_gemm_6x16__avx2(size_t mr, size_t nc, size_t k, const float *a, size_t lda, const kiln_packed_b *b,
                                             size_t panel, float *c, size_t ldc, const kiln_tile_args *t) {
    if (mr == 0) return;
    const int deq = kiln_q_needs_dequantize(b);
    kiln_q_gemm_fn fn = NULL;
    if (lda != 0 && b->nr == 16 && k > 0) {
        switch (b->kind) {
        case KILN_B_INT8: fn = deq ? kiln_q256_i8_deq : kiln_q256_i8; break;
        case KILN_B_UINT8: fn = deq ? kiln_q256_u8_deq : kiln_q256_u8; break;
        case KILN_B_INT4:
            if (deq && b->k_block % 8) break;
            fn = b->is_signed ? (deq ? kiln_q256_i4_deq : kiln_q256_i4) : (deq ? kiln_q256_u4_deq : NULL);
            break;
        case KILN_B_LUT_K:
            if (!kiln_q_lut_in_registers(b, 8)) break;
            switch (b->nbits) {
            case 1: fn = kiln_q256_lut1; break;
            case 2: fn = kiln_q256_lut2; break;
            case 3: fn = kiln_q256_lut3; break;
            case 4: fn = kiln_q256_lut4; break;
            default: break;
            }
            break;
        default: break;
        }
    }
    if (fn) fn(mr, nc, k, a, lda, b, panel, c, ldc, t);
    else kiln_q_gemm_chunked(kiln_f32_gemm_6x16__avx2, 6, mr, nc, k, a, lda, b, panel, c, ldc, t);
}
#endif
