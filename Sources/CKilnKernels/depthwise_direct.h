// Depthwise convolution over CHW planes, read where they lie, for one vector ISA: included by
// depthwise_avx512.c and depthwise_avx2.c after they define
//   KILN_DW_TARGET, KILN_DW_NAME(x) (a name per ISA), KILN_DW_LANES, KILN_DW_VEC, KILN_DW_MASK,
//   KILN_DW_SET1(f), KILN_DW_FMA(a, b, c), KILN_DW_LOAD(mask, p) (masked-off lanes read as zero and
//   never fault), KILN_DW_LOADU(p) (a plain load), KILN_DW_EVENS(lo, hi) (the even lanes of two
//   vectors), KILN_DW_STORE(p, mask, v), KILN_DW_ACTIVATE(v, count, t) (kiln_simd_activate.h) and
//   the lane mask KILN_DW_NAME(lanes)(lo, hi).
// Masked loads stand in for the zero padding, so no padded copy is made. Each block keeps R output
// rows x V vectors in registers over every tap; stride 2 loads twice the columns and keeps the even
// ones. Bias starts the accumulators and the common activations are applied before the only store.
#ifndef KILN_DW_DIRECT_SHARED
#define KILN_DW_DIRECT_SHARED
// Stands in for rows outside the image (planes up to this wide; wider ones take the padded-plane path).
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
#endif


// Output rows [oy, oy + R) x columns [ox, ox + LANES·V) (the last vector may be partial).
// KW: the taps per row when known at compile time (then column dilation is 1 and every load of a
// row is one pointer plus an immediate offset), 0 for the plane's own kw and dilation. EDGE: some
// load of the block crosses the row's ends (masked loads); otherwise plain loads.
KILN_DW_TARGET static inline __attribute__((always_inline)) void KILN_DW_NAME(block)(const kiln_dw_plane *p, long oy, long ox,
                                                                                  const int R, const int V, const int S,
                                                                                  const int KW, const int EDGE) {
    KILN_DW_VEC acc[8][4];
    const KILN_DW_VEC b = KILN_DW_SET1(p->bias);
    for (int r = 0; r < R; r++) for (int v = 0; v < V; v++) acc[r][v] = b;
    const long kw = KW ? KW : p->kw, dw = KW ? 1 : p->dw;
    // Input column of lane 0 of the first vector at tap column 0; per tap column and vector, the
    // lanes inside the row (the same for every row).
    const long c0 = ox * S - p->pl;
    KILN_DW_MASK m0[7][4], m1[7][4];
    for (long kx = 0; kx < kw && EDGE; kx++) {
#pragma clang loop unroll(full)
        for (int v = 0; v < V; v++) {
            const long col = c0 + KILN_DW_LANES * S * v + kx * dw;
            m0[kx][v] = KILN_DW_NAME(lanes)(-col, p->w - col);
            m1[kx][v] = KILN_DW_NAME(lanes)(-col - KILN_DW_LANES, p->w - col - KILN_DW_LANES);
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
            const KILN_DW_VEC wv = KILN_DW_SET1(wk[kx]);
#pragma clang loop unroll(full)
            for (int r = 0; r < R; r++) {
#pragma clang loop unroll(full)
                for (int v = 0; v < V; v++) {
                    const float *src = base[r] + KILN_DW_LANES * S * v + kx * dw;
                    KILN_DW_VEC in;
                    if (!EDGE && S == 1) in = KILN_DW_LOADU(src);
                    else if (!EDGE) in = KILN_DW_EVENS(KILN_DW_LOADU(src), KILN_DW_LOADU(src + KILN_DW_LANES));
                    else if (S == 1) in = KILN_DW_LOAD(m0[kx][v], src);
                    else in = KILN_DW_EVENS(KILN_DW_LOAD(m0[kx][v], src), KILN_DW_LOAD(m1[kx][v], src + KILN_DW_LANES));
                    acc[r][v] = KILN_DW_FMA(wv, in, acc[r][v]);
                }
            }
        }
    }
    for (int r = 0; r < R; r++) {
        float *out = p->y + (oy + r) * p->ow;
        if (p->t) KILN_DW_ACTIVATE(acc[r], V, p->t);
        for (int v = 0; v < V; v++) KILN_DW_STORE(out + ox + KILN_DW_LANES * v, KILN_DW_NAME(lanes)(0, p->ow - ox - KILN_DW_LANES * v), acc[r][v]);
    }
}

// Rows in blocks of R, the last rows in one smaller block; columns in vectors of LANES, V at a time.
#define KILN_DW_ROWS(R, V) \
    do { \
        for (long ox = 0; ox < p->ow; ox += KILN_DW_LANES * (V)) { \
            const long first = ox * S - p->pl, last = first + (kw_ - 1) * p->dw + KILN_DW_LANES * S * (V); \
            if (first >= 0 && last <= p->w) KILN_DW_NAME(block)(p, oy, ox, (R), (V), S, KW, 0); \
            else KILN_DW_NAME(block)(p, oy, ox, (R), (V), S, KW, 1); \
        } \
    } while (0)

KILN_DW_TARGET static inline __attribute__((always_inline)) void KILN_DW_NAME(plane_body)(const kiln_dw_plane *p, const int S,
                                                                                       const int KW) {
    const long kw_ = KW ? KW : p->kw;
    const long vectors = (p->ow + KILN_DW_LANES - 1) / KILN_DW_LANES;
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
KILN_DW_TARGET static void KILN_DW_NAME(plane_s1)(const kiln_dw_plane *p) {
    if (p->dw == 1 && p->kw == 3) KILN_DW_NAME(plane_body)(p, 1, 3);
    else if (p->dw == 1 && p->kw == 5) KILN_DW_NAME(plane_body)(p, 1, 5);
    else KILN_DW_NAME(plane_body)(p, 1, 0);
}
KILN_DW_TARGET static void KILN_DW_NAME(plane_s2)(const kiln_dw_plane *p) {
    if (p->kw == 3) KILN_DW_NAME(plane_body)(p, 2, 3);
    else if (p->kw == 5) KILN_DW_NAME(plane_body)(p, 2, 5);
    else KILN_DW_NAME(plane_body)(p, 2, 0);
}


// Every channel: the plane swept by the stride's kernel, then any activation that is not applied
// in registers. Stride 1 (any dilation) and stride 2 without column dilation, up to 7 taps wide;
// `fits` says whether the geometry is one of those.
KILN_DW_TARGET static int KILN_DW_NAME(planes)(size_t channels, size_t h, size_t w, const float *x, size_t kh, size_t kw,
                                               const float *weight, size_t sh, size_t sw, size_t dh, size_t dw, size_t pt,
                                               size_t pl, size_t oh, size_t ow, float *y, const kiln_epilogue *e) {
    if (!(sw == 1 || (sw == 2 && dw == 1)) || kw > 7 || w > KILN_ZERO_ROW) return 0;
    kiln_tile_args t = {NULL, NULL, e ? e->activation : 0, e ? e->alpha : 0, e ? e->beta : 0, 0};
    const int registers = kiln_unary_in_registers(&t);
    for (size_t c = 0; c < channels; c++) {
        const kiln_dw_plane p = {x + c * h * w, (long)h, (long)w, weight + c * kh * kw, (long)kh, (long)kw, (long)sh, (long)sw,
                                 (long)dh, (long)dw, (long)pt, (long)pl, (long)oh, (long)ow, y + c * oh * ow,
                                 e && e->bias ? e->bias[c] : 0.0f, registers && t.activation ? &t : NULL};
        if (sw == 1) KILN_DW_NAME(plane_s1)(&p);
        else KILN_DW_NAME(plane_s2)(&p);
        if (!registers) kiln_unary_body(t.activation, oh * ow, p.y, p.y, t.alpha, t.beta);
    }
    return 1;
}
