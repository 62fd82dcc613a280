// AVX-512 GEMM microkernel over a compressed weight panel (8 rows x 32 columns, the tile of
// kiln_f32_gemm_8x32__avx512): each step of k decodes the panel's 32 values into two ZMM
// registers and issues 16 FMAs.
//   int8 / uint8: one widening load and a conversion per 16 values;
//   int4: one 32-bit word per column holds 8 steps of k; a shift and a permute of the 16 nibble values;
//   table indices of 1-4 bits: a word holds 32 / bits steps, a shift gives the index and one
//   permute looks it up in a ZMM holding the group's table (repeated to 16 entries, so the bits
//   above the index need no mask); 6 bits: two two-table permutes and a blend on bit 5.
// A per-column scale (one K block, no zero point; or a table's per-column scale) multiplies the
// accumulators once; per-block scales and zero points are applied as each value is decoded.
// Anything else (8-bit tables, tables whose groups split a register, packed A) is decoded a block
// of k at a time on the stack and multiplied by the float32 kernel.
#if defined(__x86_64__)
#include "kiln_gemm_q.h"
#include "kiln_gemm_store.h"
#include "kiln_tile_rows.h"

#include <immintrin.h>

enum { Q512_I8, Q512_U8, Q512_I4, Q512_U4, Q512_LUT, Q512_LUT64 };

// Two accumulator sets for one or two rows: consecutive steps of k alternate between them, so
// the FMAs of a matrix-vector product do not wait on each other's latency.
#define Q512_SETS(MR) ((MR) <= 2 ? 2 : 1)

KILN_TARGET_AVX512 static inline __attribute__((always_inline)) __m512 kiln_q512_lut(const int MODE, __m512i idx, const __m512 *L) {
    if (MODE == Q512_LUT) return _mm512_permutexvar_ps(idx, L[0]);
    const __m512 lo = _mm512_permutex2var_ps(L[0], idx, L[1]), hi = _mm512_permutex2var_ps(L[2], idx, L[3]);
    return _mm512_mask_blend_ps(_mm512_test_epi32_mask(idx, _mm512_set1_epi32(32)), lo, hi);
}

// One step of k: the FMAs of rows 0..MR-1 with decoded b0/b1, into set `s`.
#define Q512_FMA(s, p) \
    for (int i = 0; i < MR; i++) { \
        const __m512 v = _mm512_set1_ps(r[i][p]); \
        l[s][i] = _mm512_fmadd_ps(v, b0, l[s][i]); \
        h[s][i] = _mm512_fmadd_ps(v, b1, h[s][i]); \
    }

KILN_TARGET_AVX512 static inline __attribute__((always_inline)) void kiln_q512_body(const int MR, const int MODE, const int BITS,
                                                                                  const int DEQ, size_t mr, size_t nc, size_t k,
                                                                                  const float *a, size_t lda, const kiln_packed_b *b,
                                                                                  size_t panel, float *c, size_t ldc,
                                                                                  const kiln_tile_args *t) {
    __m512 l[2][8], h[2][8];
    for (int s = 0; s < 2; s++) for (int i = 0; i < 8; i++) l[s][i] = h[s][i] = _mm512_setzero_ps();
    const float *r[8];
    r[0] = a;
    for (int i = 1; i < MR; i++) r[i] = r[i - 1] + lda;
    const size_t n0 = panel * 32;
    // DEQ 2 (per-block scales, no zero point): for one or two rows, each block's sums are scaled
    // once into the totals tl/th instead of every decoded value (a matrix-vector product then
    // issues a shift, a permute and an FMA per 16 values); more rows scale the values.
    const int BSUM = DEQ == 2 && MR <= 2, PERVAL = DEQ && !BSUM;
    __m512 tl[2], th[2];
    for (int i = 0; i < 2; i++) tl[i] = th[i] = _mm512_setzero_ps();
#define Q512_FLUSH(s0, s1) \
    for (int i = 0; i < MR; i++) { \
        tl[i] = _mm512_fmadd_ps(_mm512_add_ps(l[0][i], l[1][i]), s0, tl[i]); \
        th[i] = _mm512_fmadd_ps(_mm512_add_ps(h[0][i], h[1][i]), s1, th[i]); \
        l[0][i] = l[1][i] = h[0][i] = h[1][i] = _mm512_setzero_ps(); \
    }
    if (MODE == Q512_I8 || MODE == Q512_U8) {
        const uint8_t *src = (const uint8_t *)b->data + panel * k * 32;
        const size_t kb = DEQ ? b->k_block : k;
        for (size_t k0 = 0; k0 < k; k0 += kb) {
            __m512 s0 = _mm512_set1_ps(1), s1 = s0, z0 = _mm512_setzero_ps(), z1 = z0;
            if (DEQ) {
                const float *sp = kiln_panel_block(b->scale, b, panel, k0 / kb);
                s0 = _mm512_loadu_ps(sp);
                s1 = _mm512_loadu_ps(sp + 16);
                if (b->zero) { z0 = _mm512_loadu_ps(b->zero + (sp - b->scale)); z1 = _mm512_loadu_ps(b->zero + (sp - b->scale) + 16); }
            }
            const size_t end = k0 + kb < k ? k0 + kb : k;
            if (BSUM && k0 > 0) {
                // The previous block's sums, with its scales (loaded again: they were replaced above).
                const float *pp = kiln_panel_block(b->scale, b, panel, k0 / kb - 1);
                const __m512 p0 = _mm512_loadu_ps(pp), p1 = _mm512_loadu_ps(pp + 16);
                Q512_FLUSH(p0, p1)
            }
            for (size_t p = k0; p < end; p++) {
                // The panel streams from memory for a few rows of A: fetch ahead of the hardware prefetcher.
                if ((p & 1) == 0) _mm_prefetch((const char *)(src + (p + 128) * 32), _MM_HINT_T0);
                const __m128i w0 = _mm_loadu_si128((const __m128i *)(src + p * 32)), w1 = _mm_loadu_si128((const __m128i *)(src + p * 32 + 16));
                __m512 b0 = _mm512_cvtepi32_ps(MODE == Q512_I8 ? _mm512_cvtepi8_epi32(w0) : _mm512_cvtepu8_epi32(w0));
                __m512 b1 = _mm512_cvtepi32_ps(MODE == Q512_I8 ? _mm512_cvtepi8_epi32(w1) : _mm512_cvtepu8_epi32(w1));
                if (PERVAL) { b0 = _mm512_mul_ps(_mm512_sub_ps(b0, z0), s0); b1 = _mm512_mul_ps(_mm512_sub_ps(b1, z1), s1); }
                if (Q512_SETS(MR) == 2 && (p & 1)) { Q512_FMA(1, p) } else { Q512_FMA(0, p) }
            }
            if (BSUM && end == k) { Q512_FLUSH(s0, s1) }
        }
    } else {
        // K-packed words: G steps of k per row of 32 words.
        const int G = 32 / BITS;
        const size_t rows = (k + G - 1) / G;
        const uint32_t *src = (const uint32_t *)b->data + panel * rows * 32;
        __m512 L0[4], L1[4];
        __m512 s0 = _mm512_set1_ps(1), s1 = s0, z0 = _mm512_setzero_ps(), z1 = z0;
        const size_t kb = DEQ ? b->k_block : k;
        // The 16 nibble values as floats: 0-15, or two's complement 0-7, -8 to -1.
        const __m512 nibbles = MODE == Q512_I4 ? _mm512_set_ps(-1, -2, -3, -4, -5, -6, -7, -8, 7, 6, 5, 4, 3, 2, 1, 0)
                                               : _mm512_set_ps(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
        if (MODE == Q512_LUT || MODE == Q512_LUT64) {
            const size_t parts = MODE == Q512_LUT ? 1 : 4, entries = b->entries;
            const float *t0 = b->lut + (n0 / b->group_size) * entries, *t1 = b->lut + ((n0 + 16) / b->group_size) * entries;
            if (n0 + 16 >= b->n) t1 = t0; // the padded half of the last panel: any table
            for (size_t q = 0; q < parts; q++) {
                if (MODE == Q512_LUT) {
                    // Repeat the table to 16 entries: index bits above `BITS` then select the same value.
                    const __m512i rep = _mm512_and_si512(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                                         _mm512_set1_epi32((int)entries - 1));
                    L0[q] = _mm512_permutexvar_ps(rep, _mm512_maskz_loadu_ps((__mmask16)((1u << entries) - 1u), t0));
                    L1[q] = _mm512_permutexvar_ps(rep, _mm512_maskz_loadu_ps((__mmask16)((1u << entries) - 1u), t1));
                } else {
                    L0[q] = _mm512_loadu_ps(t0 + 16 * q);
                    L1[q] = _mm512_loadu_ps(t1 + 16 * q);
                }
            }
        }
        for (size_t g = 0; g < rows; g++) {
            _mm_prefetch((const char *)(src + (g + 32) * 32), _MM_HINT_T0);
            _mm_prefetch((const char *)(src + (g + 32) * 32 + 16), _MM_HINT_T0);
            const __m512i w0 = _mm512_loadu_si512(src + g * 32), w1 = _mm512_loadu_si512(src + g * 32 + 16);
            const size_t p0 = g * G;
            if (DEQ && p0 % kb == 0) {
                if (BSUM && p0 > 0) { Q512_FLUSH(s0, s1) }
                const float *sp = kiln_panel_block(b->scale, b, panel, p0 / kb);
                s0 = _mm512_loadu_ps(sp);
                s1 = _mm512_loadu_ps(sp + 16);
                if (b->zero) { z0 = _mm512_loadu_ps(b->zero + (sp - b->scale)); z1 = _mm512_loadu_ps(b->zero + (sp - b->scale) + 16); }
            }
            const int steps = k - p0 < (size_t)G ? (int)(k - p0) : G;
#define Q512_STEP(tt) \
            if ((tt) < steps) { \
                __m512 b0, b1; \
                if (MODE == Q512_I4 || MODE == Q512_U4) { \
                    /* A nibble's value looked up like a table index: a shift and a permute. */ \
                    b0 = _mm512_permutexvar_ps(_mm512_srli_epi32(w0, 4 * (tt)), nibbles); \
                    b1 = _mm512_permutexvar_ps(_mm512_srli_epi32(w1, 4 * (tt)), nibbles); \
                } else { \
                    b0 = kiln_q512_lut(MODE, _mm512_srli_epi32(w0, BITS * (tt)), L0); \
                    b1 = kiln_q512_lut(MODE, _mm512_srli_epi32(w1, BITS * (tt)), L1); \
                } \
                if (PERVAL) { b0 = _mm512_mul_ps(_mm512_sub_ps(b0, z0), s0); b1 = _mm512_mul_ps(_mm512_sub_ps(b1, z1), s1); } \
                if (Q512_SETS(MR) == 2 && ((tt) & 1)) { Q512_FMA(1, p0 + (tt)) } else { Q512_FMA(0, p0 + (tt)) } \
            }
            Q512_STEP(0) Q512_STEP(1) Q512_STEP(2) Q512_STEP(3) Q512_STEP(4)
            if (G > 5) { Q512_STEP(5) Q512_STEP(6) Q512_STEP(7) }
            if (G > 8) { Q512_STEP(8) Q512_STEP(9) }
            if (G > 10) { Q512_STEP(10) Q512_STEP(11) Q512_STEP(12) Q512_STEP(13) Q512_STEP(14) Q512_STEP(15) }
            if (G > 16) {
                Q512_STEP(16) Q512_STEP(17) Q512_STEP(18) Q512_STEP(19) Q512_STEP(20) Q512_STEP(21) Q512_STEP(22) Q512_STEP(23)
                Q512_STEP(24) Q512_STEP(25) Q512_STEP(26) Q512_STEP(27) Q512_STEP(28) Q512_STEP(29) Q512_STEP(30) Q512_STEP(31)
            }
#undef Q512_STEP
        }
        if (BSUM) { Q512_FLUSH(s0, s1) }
    }
    if (BSUM)
        for (int i = 0; i < MR; i++) { l[0][i] = tl[i]; h[0][i] = th[i]; }
#undef Q512_FLUSH
    if (Q512_SETS(MR) == 2)
        for (int i = 0; i < MR; i++) { l[0][i] = _mm512_add_ps(l[0][i], l[1][i]); h[0][i] = _mm512_add_ps(h[0][i], h[1][i]); }
    // One scale per column: of the whole K (integers without a zero point), or a table's.
    const float *cs = (MODE == Q512_LUT || MODE == Q512_LUT64) ? (b->column_scale ? b->column_scale + n0 : NULL)
                      : (DEQ ? NULL : b->scale + n0);
    if (cs) {
        const __mmask16 m0 = (__mmask16)(nc >= 16 ? 0xffffu : (1u << nc) - 1u);
        const __mmask16 m1 = (__mmask16)(nc >= 32 ? 0xffffu : nc > 16 ? (1u << (nc - 16)) - 1u : 0u);
        const __m512 c0 = _mm512_maskz_loadu_ps(m0, cs), c1 = _mm512_maskz_loadu_ps(m1, cs + 16);
        for (int i = 0; i < MR; i++) { l[0][i] = _mm512_mul_ps(l[0][i], c0); h[0][i] = _mm512_mul_ps(h[0][i], c1); }
    }
    // Copied out of the k loop's arrays, which are indexed only by constants and so stay in registers.
    __m512 lo[8], hi[8];
    for (int i = 0; i < 8; i++) { lo[i] = l[0][i]; hi[i] = h[0][i]; }
    kiln_store_tile512(lo, hi, mr, nc, c, ldc, t);
}
#undef Q512_FMA

#define Q512_BODY(R) kiln_q512_body(R, mode, bits, deq, mr, nc, k, a, lda, b, panel, c, ldc, t)

// Each (mode, bits, deq) combination gets its own function, so every body is built with its
// constants and the row dispatch stays small.
#define Q512_VARIANT(name, MODE, BITS, DEQ) \
    KILN_TARGET_AVX512 static void name(size_t mr, size_t nc, size_t k, const float *a, size_t lda, const kiln_packed_b *b, \
                                        size_t panel, float *c, size_t ldc, const kiln_tile_args *t) { \
        const int mode = MODE, bits = BITS, deq = DEQ; \
        KILN_ROWS_DISPATCH(8, Q512_BODY) \
    }
Q512_VARIANT(kiln_q512_i8, Q512_I8, 8, 0)
Q512_VARIANT(kiln_q512_i8_deq, Q512_I8, 8, 1)
Q512_VARIANT(kiln_q512_i8_bsum, Q512_I8, 8, 2)
Q512_VARIANT(kiln_q512_u8_deq, Q512_U8, 8, 1)
Q512_VARIANT(kiln_q512_u8, Q512_U8, 8, 0)
Q512_VARIANT(kiln_q512_i4, Q512_I4, 4, 0)
Q512_VARIANT(kiln_q512_i4_deq, Q512_I4, 4, 1)
Q512_VARIANT(kiln_q512_i4_bsum, Q512_I4, 4, 2)
Q512_VARIANT(kiln_q512_u4_deq, Q512_U4, 4, 1)
Q512_VARIANT(kiln_q512_lut1, Q512_LUT, 1, 0)
Q512_VARIANT(kiln_q512_lut2, Q512_LUT, 2, 0)
Q512_VARIANT(kiln_q512_lut3, Q512_LUT, 3, 0)
Q512_VARIANT(kiln_q512_lut4, Q512_LUT, 4, 0)
Q512_VARIANT(kiln_q512_lut6, Q512_LUT64, 6, 0)
#undef Q512_VARIANT
#undef Q512_BODY

KILN_TARGET_AVX512 void kiln_q_gemm_8x32__avx512(size_t mr, size_t nc, size_t k, const float *a, size_t lda, const kiln_packed_b *b,
                                                 size_t panel, float *c, size_t ldc, const kiln_tile_args *t) {
    if (mr == 0) return;
    const int deq = kiln_q_needs_dequantize(b);
    kiln_q_gemm_fn fn = NULL;
    if (lda != 0 && b->nr == 32 && k > 0) {
        switch (b->kind) {
        case KILN_B_INT8: fn = !deq ? kiln_q512_i8 : b->zero ? kiln_q512_i8_deq : kiln_q512_i8_bsum; break;
        case KILN_B_UINT8: fn = deq ? kiln_q512_u8_deq : kiln_q512_u8; break;
        case KILN_B_INT4:
            if (deq && b->k_block % 8) break;
            fn = b->is_signed ? (!deq ? kiln_q512_i4 : b->zero ? kiln_q512_i4_deq : kiln_q512_i4_bsum) : (deq ? kiln_q512_u4_deq : NULL);
            break;
        case KILN_B_LUT_K:
            if (!kiln_q_lut_in_registers(b, 16)) break;
            switch (b->nbits) {
            case 1: fn = kiln_q512_lut1; break;
            case 2: fn = kiln_q512_lut2; break;
            case 3: fn = kiln_q512_lut3; break;
            case 4: fn = kiln_q512_lut4; break;
            case 6: fn = kiln_q512_lut6; break;
            default: break;
            }
            break;
        default: break;
        }
    }
    if (fn) fn(mr, nc, k, a, lda, b, panel, c, ldc, t);
    else kiln_q_gemm_chunked(kiln_f32_gemm_8x32__avx512, 8, mr, nc, k, a, lda, b, panel, c, ldc, t);
}
#endif
