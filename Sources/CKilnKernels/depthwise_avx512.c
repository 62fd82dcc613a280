// AVX-512 depthwise convolution over CHW planes, read where they lie: masked loads stand in for
// the zero padding (a masked-off lane is neither read nor faults), so no padded copy is made.
// Each block keeps R output rows x V vectors of 16 columns in registers over every tap; stride 2
// loads 32 input columns and keeps the even ones. Bias starts the accumulators and the common
// activations are applied before the only store.
#if defined(__x86_64__)
#include "kiln_kernels.h"
#include "kiln_unary.h"

#include <immintrin.h>

#define KILN_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))

// Lanes [lo, hi) of 16, clamped.
KILN_TARGET_AVX512 static inline __mmask16 kiln_lanes(long lo, long hi) {
    if (lo < 0) lo = 0;
    if (hi > 16) hi = 16;
    if (hi <= lo) return 0;
    return (__mmask16)(((1u << (hi - lo)) - 1u) << lo);
}

KILN_TARGET_AVX512 static inline __attribute__((always_inline)) __m512 kiln_activate16(__m512 v, const kiln_tile_args *t) {
    const __m512 zero = _mm512_setzero_ps();
    switch (t->activation) {
    case KILN_UNARY_RELU: return _mm512_max_ps(zero, v);
    case KILN_UNARY_HARD_SWISH: {
        const __m512 t6 = _mm512_fmadd_ps(v, _mm512_set1_ps(1.0f / 6.0f), _mm512_set1_ps(0.5f));
        return _mm512_mul_ps(v, _mm512_max_ps(_mm512_min_ps(t6, _mm512_set1_ps(1.0f)), zero));
    }
    case KILN_UNARY_HARD_SIGMOID: {
        const __m512 ax = _mm512_fmadd_ps(_mm512_set1_ps(t->alpha), v, _mm512_set1_ps(t->beta));
        return _mm512_max_ps(_mm512_min_ps(ax, _mm512_set1_ps(1.0f)), zero);
    }
    case KILN_UNARY_CLIP: return _mm512_min_ps(_mm512_set1_ps(t->beta), _mm512_max_ps(_mm512_set1_ps(t->alpha), v));
    case KILN_UNARY_LEAKY_RELU:
        return _mm512_mask_mul_ps(v, _mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ), v, _mm512_set1_ps(t->alpha));
    default: return v;
    }
}

// Stands in for rows outside the image (planes up to this wide; wider ones take the AVX2 path).
#define KILN_ZERO_ROW 4096
static const float kiln_zero_row[KILN_ZERO_ROW];

typedef struct {
    const float *x; // the channel's input plane
    long h, w;
    const float *weight;
    long kh, kw, sh, sw, dh, dw, pt, pl;
    long oh, ow;
    float *y;
    float bias;
    const kiln_tile_args *t; // activation in registers, or NULL
} kiln_dw_plane;

// Output rows [oy, oy + R) x columns [ox, ox + 16 V) (the last vector may be partial).
// KW: the taps per row when known at compile time (then column dilation is 1 and every load of a
// row is one pointer plus an immediate offset), 0 for the plane's own kw and dilation.
KILN_TARGET_AVX512 static inline __attribute__((always_inline)) void kiln_dw_block16(const kiln_dw_plane *p, long oy, long ox,
                                                                                  const int R, const int V, const int S,
                                                                                  const int KW) {
    __m512 acc[8][4];
    const __m512 b = _mm512_set1_ps(p->bias);
    for (int r = 0; r < R; r++) for (int v = 0; v < V; v++) acc[r][v] = b;
    const __m512i evens = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const long kw = KW ? KW : p->kw, dw = KW ? 1 : p->dw;
    // Input column of lane 0 of the first vector at tap column 0; per tap column and vector, the
    // lanes inside the row (the same for every row).
    const long c0 = ox * S - p->pl;
    __mmask16 m0[7][4], m1[7][4];
    for (long kx = 0; kx < kw; kx++) {
#pragma clang loop unroll(full)
        for (int v = 0; v < V; v++) {
            const long col = c0 + 16 * S * v + kx * dw;
            m0[kx][v] = kiln_lanes(-col, p->w - col);
            m1[kx][v] = kiln_lanes(-col - 16, p->w - col - 16);
        }
    }
    for (long ky = 0; ky < p->kh; ky++) {
        // Rows above or below the image read a row of zeros instead of branching, so the block
        // stays one straight run of FMAs on register accumulators; one pointer per row.
        const float *base[8];
#pragma clang loop unroll(full)
        for (int r = 0; r < R; r++) {
            const long iy = (oy + r) * p->sh + ky * p->dh - p->pt;
            base[r] = (iy >= 0 && iy < p->h ? p->x + iy * p->w : kiln_zero_row) + c0;
        }
        const float *wk = p->weight + ky * kw;
#pragma clang loop unroll(full)
        for (long kx = 0; kx < kw; kx++) {
            const __m512 wv = _mm512_set1_ps(wk[kx]);
#pragma clang loop unroll(full)
            for (int r = 0; r < R; r++) {
#pragma clang loop unroll(full)
                for (int v = 0; v < V; v++) {
                    const float *src = base[r] + 16 * S * v + kx * dw;
                    __m512 in;
                    if (S == 1) {
                        in = _mm512_maskz_loadu_ps(m0[kx][v], src);
                    } else {
                        in = _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(m0[kx][v], src), evens,
                                                    _mm512_maskz_loadu_ps(m1[kx][v], src + 16));
                    }
                    acc[r][v] = _mm512_fmadd_ps(wv, in, acc[r][v]);
                }
            }
        }
    }
    for (int r = 0; r < R; r++) {
        float *out = p->y + (oy + r) * p->ow;
        for (int v = 0; v < V; v++) {
            const __m512 value = p->t ? kiln_activate16(acc[r][v], p->t) : acc[r][v];
            _mm512_mask_storeu_ps(out + ox + 16 * v, kiln_lanes(0, p->ow - ox - 16 * v), value);
        }
    }
}

// Rows in blocks of R, the last rows in one smaller block; columns in vectors of 16, V at a time.
#define KILN_DW_ROWS(R, V) \
    for (long ox = 0; ox < p->ow; ox += 16 * (V)) kiln_dw_block16(p, oy, ox, (R), (V), S, KW)

KILN_TARGET_AVX512 static inline __attribute__((always_inline)) void kiln_dw_plane16_body(const kiln_dw_plane *p, const int S,
                                                                                       const int KW) {
    const long vectors = (p->ow + 15) / 16;
    long oy = 0;
    // About eight accumulators: enough independent FMA chains to hide their latency.
    if (vectors >= 3) {
        const int v4 = vectors >= 4;
        for (; oy + 2 <= p->oh; oy += 2) { if (v4) KILN_DW_ROWS(2, 4); else KILN_DW_ROWS(2, 3); }
        if (oy < p->oh) { if (v4) KILN_DW_ROWS(1, 4); else KILN_DW_ROWS(1, 3); }
    } else if (vectors == 2) {
        for (; oy + 4 <= p->oh; oy += 4) KILN_DW_ROWS(4, 2);
        switch (p->oh - oy) {
        case 3: KILN_DW_ROWS(3, 2); break;
        case 2: KILN_DW_ROWS(2, 2); break;
        case 1: KILN_DW_ROWS(1, 2); break;
        default: break;
        }
    } else {
        for (; oy + 8 <= p->oh; oy += 8) KILN_DW_ROWS(8, 1);
        switch (p->oh - oy) {
        case 7: KILN_DW_ROWS(7, 1); break;
        case 6: KILN_DW_ROWS(6, 1); break;
        case 5: KILN_DW_ROWS(5, 1); break;
        case 4: KILN_DW_ROWS(4, 1); break;
        case 3: KILN_DW_ROWS(3, 1); break;
        case 2: KILN_DW_ROWS(2, 1); break;
        case 1: KILN_DW_ROWS(1, 1); break;
        default: break;
        }
    }
}
#undef KILN_DW_ROWS

// Built per stride, and per tap width for the common 3 and 5 without column dilation.
KILN_TARGET_AVX512 static void kiln_dw_plane16_s1(const kiln_dw_plane *p) {
    if (p->dw == 1 && p->kw == 3) kiln_dw_plane16_body(p, 1, 3);
    else if (p->dw == 1 && p->kw == 5) kiln_dw_plane16_body(p, 1, 5);
    else kiln_dw_plane16_body(p, 1, 0);
}
KILN_TARGET_AVX512 static void kiln_dw_plane16_s2(const kiln_dw_plane *p) {
    if (p->kw == 3) kiln_dw_plane16_body(p, 2, 3);
    else if (p->kw == 5) kiln_dw_plane16_body(p, 2, 5);
    else kiln_dw_plane16_body(p, 2, 0);
}

KILN_TARGET_AVX512 void kiln_f32_dwconv2d__avx512(size_t channels, size_t h, size_t w, const float *x, size_t kh, size_t kw,
                                                  const float *weight, size_t sh, size_t sw, size_t dh, size_t dw, size_t pt, size_t pl,
                                                  size_t oh, size_t ow, float *y, const kiln_epilogue *e, float *scratch) {
    // Stride 1 (any dilation) and stride 2 without column dilation, up to 7 taps wide, read whole
    // vectors; others (and planes wider than the zero row) take the AVX2 path.
    if (!(sw == 1 || (sw == 2 && dw == 1)) || kw > 7 || w > KILN_ZERO_ROW) {
        kiln_f32_dwconv2d__avx2(channels, h, w, x, kh, kw, weight, sh, sw, dh, dw, pt, pl, oh, ow, y, e, scratch);
        return;
    }
    kiln_tile_args t = {NULL, NULL, e ? e->activation : 0, e ? e->alpha : 0, e ? e->beta : 0};
    const int registers = kiln_unary_in_registers(&t);
    for (size_t c = 0; c < channels; c++) {
        const kiln_dw_plane p = {x + c * h * w, (long)h, (long)w, weight + c * kh * kw, (long)kh, (long)kw, (long)sh, (long)sw,
                                 (long)dh, (long)dw, (long)pt, (long)pl, (long)oh, (long)ow, y + c * oh * ow,
                                 e && e->bias ? e->bias[c] : 0.0f, registers && t.activation ? &t : NULL};
        if (sw == 1) kiln_dw_plane16_s1(&p);
        else kiln_dw_plane16_s2(&p);
        if (!registers) kiln_unary_body(t.activation, oh * ow, p.y, p.y, t.alpha, t.beta);
    }
}
#endif
