// Channels-last (NHWC) depthwise convolution and 2-D pooling for one vector ISA: included by
// nhwc.c once per ISA after it defines
//   KILN_NHWC_TARGET, KILN_NHWC_NAME(x) (the ISA's suffix), KILN_NHWC_LANES, KILN_NHWC_VEC,
//   KILN_NHWC_LOAD(p), KILN_NHWC_STORE(p, v), KILN_NHWC_SET1(f), KILN_NHWC_FMA(a, b, c) (a·b + c),
//   KILN_NHWC_ADD(a, b), KILN_NHWC_MUL(a, b), KILN_NHWC_MAX(a, b) (NaN in either operand wins),
//   KILN_NHWC_ACTIVATE(v, count, t), KILN_NHWC_HAS_ACTIVATE (0 when the ISA applies activations after the store).
// Vectors run along channels, which are contiguous: every lane is busy whatever the plane's size.
// Channels past the last whole vector run the scalar form of the same arithmetic.

// P output pixels × CB vectors of channels (P·CB ≤ 8 independent accumulators, enough to hide the
// FMA latency), over kernel rows [ky0, ky1) and taps [kx0, kx1) of each: acc[p·CB + cb] += Σ x·w.
// `xr` points at the first pixel's window origin, channel ch; KW > 0 fixes the tap count at
// compile time (every tap inside the row), 0 takes [kx0, kx1).
KILN_NHWC_TARGET static inline __attribute__((always_inline)) void KILN_NHWC_NAME(dw_tile)(
    const size_t P, const size_t CB, const size_t KW, size_t kx0, size_t kx1, size_t sw, size_t dw, size_t c, const float *xr,
    const float *wr, size_t ky0, size_t ky1, size_t row_step, size_t weight_row, KILN_NHWC_VEC *acc) {
    const size_t L = KILN_NHWC_LANES;
    // One pointer per pixel and kernel row: the taps are then constant offsets of it (in the
    // compile-time form), which the loads take as addressing modes.
    const size_t pixel_step = sw * c, tap_step = KW ? c : dw * c;
    if (KW) { kx0 = 0; kx1 = KW; }
    for (size_t ky = ky0; ky < ky1; ky++) {
        const float *xk = xr + (ky - ky0) * row_step + kx0 * tap_step, *wk = wr + ky * weight_row + kx0 * c;
        // Keep one base pointer per kernel row: without this barrier the compiler strength-reduces
        // every (pixel, tap) address into its own induction variable and spills them.
        __asm__("" : "+r"(xk), "+r"(wk));
        const float *px[4];
        for (size_t p = 0; p < P; p++) px[p] = xk + p * pixel_step;
        for (size_t kx = 0; kx < kx1 - kx0; kx++) {
            KILN_NHWC_VEC wv[8];
            for (size_t cb = 0; cb < CB; cb++) wv[cb] = KILN_NHWC_LOAD(wk + kx * c + cb * L);
            for (size_t p = 0; p < P; p++)
                for (size_t cb = 0; cb < CB; cb++)
                    acc[p * CB + cb] = KILN_NHWC_FMA(KILN_NHWC_LOAD(px[p] + kx * tap_step + cb * L), wv[cb], acc[p * CB + cb]);
        }
    }
}

// Channels [ch, ch + CB·L) of P pixels: bias, the taps (dw_tile), activation, store.
KILN_NHWC_TARGET static inline __attribute__((always_inline)) void KILN_NHWC_NAME(dw_block)(
    const size_t P, const size_t CB, const size_t KW, size_t kx0, size_t kx1, size_t sw, size_t dw, size_t c, const float *xr,
    const float *weight, size_t ky0, size_t ky1, size_t row_step, size_t weight_row, size_t ch, float *out, const kiln_epilogue *e,
    const kiln_tile_args *t, const int in_registers) {
    const size_t L = KILN_NHWC_LANES;
    KILN_NHWC_VEC acc[8];
    for (size_t cb = 0; cb < CB; cb++) {
        const KILN_NHWC_VEC b = e && e->bias ? KILN_NHWC_LOAD(e->bias + ch + cb * L) : KILN_NHWC_SET1(0.0f);
        for (size_t p = 0; p < P; p++) acc[p * CB + cb] = b;
    }
    KILN_NHWC_NAME(dw_tile)(P, CB, KW, kx0, kx1, sw, dw, c, xr + ch, weight + ch, ky0, ky1, row_step, weight_row, acc);
    if (in_registers) KILN_NHWC_ACTIVATE(acc, (int)(P * CB), t);
    for (size_t p = 0; p < P; p++)
        for (size_t cb = 0; cb < CB; cb++) KILN_NHWC_STORE(out + p * c + ch + cb * L, acc[p * CB + cb]);
}

// Output pixels [ox0, ox1) of one row whose taps all lie inside the image's columns, channels
// [ch, ch + L): the KH·KW weight vectors stay in registers across the row, P pixels share each
// weight (P independent FMA chains), and the activation — ACT, a compile-time constant unless it
// is KILN_DW_ANY_ACT — is applied before the only store. rows[ky] is the input row of tap row ky
// (a row of zeros above or below the image), S the stride along the row.
#ifndef KILN_DW_ANY_ACT
#define KILN_DW_ANY_ACT (-1)
#endif
KILN_NHWC_TARGET static inline __attribute__((always_inline)) void KILN_NHWC_NAME(dw_span)(
    const int P, const int KH, const int KW, const int S, const int ACT, size_t ox0, size_t ox1, size_t ow, size_t w, size_t c,
    size_t pl, const float *const *rows, const float *weight, const float *bias, size_t ch, float *yrow, const kiln_tile_args *t) {
    const size_t L = KILN_NHWC_LANES;
    KILN_NHWC_VEC wv[25];
    for (int i = 0; i < KH * KW; i++) wv[i] = KILN_NHWC_LOAD(weight + (size_t)i * c + ch);
    const KILN_NHWC_VEC b = bias ? KILN_NHWC_LOAD(bias + ch) : KILN_NHWC_SET1(0.0f);
    kiln_tile_args a = *t;
    if (ACT != KILN_DW_ANY_ACT) a.activation = ACT;
    const float *r[5];
    for (int ky = 0; ky < KH; ky++) r[ky] = rows[ky] + ch;
    // Pixels at the row's ends, one at a time: only taps [kx0, kx1) lie inside the row.
#define KILN_DW_SPAN_EDGE(OX) \
    do { \
        const long ix = (long)((OX) * S) - (long)pl; \
        const long kx0 = ix < 0 ? -ix : 0, kx1 = ix + KW > (long)w ? (long)w - ix : KW; \
        KILN_NHWC_VEC acc[1] = {b}; \
        for (int ky = 0; ky < KH; ky++) \
            for (long kx = kx0; kx < kx1; kx++) \
                acc[0] = KILN_NHWC_FMA(KILN_NHWC_LOAD(r[ky] + (ix + kx) * (long)c), \
                                       KILN_NHWC_LOAD(weight + (size_t)(ky * KW + kx) * c + ch), acc[0]); \
        if (ACT != KILN_UNARY_NONE) KILN_NHWC_ACTIVATE(acc, 1, &a); \
        KILN_NHWC_STORE(yrow + (OX) * c + ch, acc[0]); \
    } while (0)
    for (size_t ox = 0; ox < ox0; ox++) KILN_DW_SPAN_EDGE(ox);
    size_t ox = ox0;
#define KILN_DW_SPAN_BLOCK(PP) \
    do { \
        KILN_NHWC_VEC acc[8]; \
        for (int p = 0; p < (PP); p++) acc[p] = b; \
        const size_t at = (ox * S - pl) * c; \
        for (int ky = 0; ky < KH; ky++) { \
            const float *src = r[ky] + at; \
            for (int kx = 0; kx < KW; kx++) \
                for (int p = 0; p < (PP); p++) \
                    acc[p] = KILN_NHWC_FMA(KILN_NHWC_LOAD(src + (size_t)(p * S + kx) * c), wv[ky * KW + kx], acc[p]); \
        } \
        if (ACT != KILN_UNARY_NONE) KILN_NHWC_ACTIVATE(acc, (PP), &a); \
        float *out = yrow + ox * c + ch; \
        for (int p = 0; p < (PP); p++) KILN_NHWC_STORE(out + (size_t)p * c, acc[p]); \
        ox += (PP); \
    } while (0)
    while (ox + P <= ox1) KILN_DW_SPAN_BLOCK(P);
    while (ox < ox1) KILN_DW_SPAN_BLOCK(1);
    for (ox = ox1; ox < ow; ox++) KILN_DW_SPAN_EDGE(ox);
#undef KILN_DW_SPAN_BLOCK
#undef KILN_DW_SPAN_EDGE
    (void)L;
}

// Every vector of channels in [c0, cv) over output pixels [ox0, ox1) (see dw_span), with the
// activation made a compile-time constant for the common ones.
KILN_NHWC_TARGET static inline __attribute__((always_inline)) void KILN_NHWC_NAME(dw_spans)(
    const int KH, const int KW, const int S, size_t ox0, size_t ox1, size_t ow, size_t w, size_t c, size_t pl, const float *const *rows,
    const float *weight, const float *bias, size_t c0, size_t cv, float *yrow, const kiln_tile_args *t) {
    // Independent accumulators: 8 with AVX-512 (5×5 weights then spill a few registers, still faster than
    // fewer chains), 4 with AVX2's 16 registers.
    const int P = KILN_NHWC_LANES == 16 ? 8 : 4;
#define KILN_DW_SPANS(ACT) \
    for (size_t ch = c0; ch < cv; ch += KILN_NHWC_LANES) \
        KILN_NHWC_NAME(dw_span)(P, KH, KW, S, (ACT), ox0, ox1, ow, w, c, pl, rows, weight, bias, ch, yrow, t)
    switch (t->activation) {
    case KILN_UNARY_NONE: KILN_DW_SPANS(KILN_UNARY_NONE); break;
    case KILN_UNARY_RELU: KILN_DW_SPANS(KILN_UNARY_RELU); break;
    case KILN_UNARY_HARD_SWISH: KILN_DW_SPANS(KILN_UNARY_HARD_SWISH); break;
    case KILN_UNARY_CLIP: KILN_DW_SPANS(KILN_UNARY_CLIP); break;
    case KILN_UNARY_SILU: KILN_DW_SPANS(KILN_UNARY_SILU); break;
    default: KILN_DW_SPANS(KILN_DW_ANY_ACT); break;
    }
#undef KILN_DW_SPANS
}

// One output row oy of a depthwise convolution over channels [c0, c1), bias and activation applied.
// Pixels whose taps all lie inside the row go in tiles of 4 pixels × 2 vectors (then 2 × 4, 1 × 8);
// those at the row's ends one at a time over their taps inside, 8 vectors at a time.
KILN_NHWC_TARGET static inline __attribute__((always_inline)) void KILN_NHWC_NAME(dw_row)(
    const size_t KW, size_t h, size_t w, size_t c, const float *x, size_t kh, size_t kw, const float *weight, size_t sh, size_t sw,
    size_t dh, size_t dw, size_t pt, size_t pl, size_t ow, size_t oy, size_t c0, size_t c1, float *y, const kiln_epilogue *e,
    const kiln_tile_args *t, const int in_registers) {
    const long iy0 = (long)(oy * sh) - (long)pt;
    size_t ky0 = 0, ky1 = kh;
    while (ky0 < kh && iy0 + (long)(ky0 * dh) < 0) ky0++;
    while (ky1 > ky0 && iy0 + (long)((ky1 - 1) * dh) >= (long)h) ky1--;
    // Output columns whose every tap lies inside the row: [ox_lo, ox_hi).
    size_t ox_lo = 0, ox_hi = 0;
    while (ox_lo < ow && (long)(ox_lo * sw) - (long)pl < 0) ox_lo++;
    for (size_t ox = ow; ox > ox_lo; ox--) {
        if ((long)((ox - 1) * sw) - (long)pl + (long)((kw - 1) * dw) < (long)w) { ox_hi = ox; break; }
    }
    if (ox_hi < ox_lo) ox_hi = ox_lo;
    float *yrow = y + oy * ow * c;
    const size_t L = KILN_NHWC_LANES;
    const size_t cv = c0 + (c1 - c0) / L * L;
    // Row ky0 of the window; the window's rows are dh input rows apart.
    const float *xbase = ky1 > ky0 ? x + (size_t)(iy0 + (long)(ky0 * dh)) * w * c : x;
    const size_t row_step = dh * w * c, weight_row = kw * c;
    const size_t s0 = c0, s1 = cv;
    // The interior's whole vectors of channels by spans with weights in registers (3×3 and 5×5
    // windows undilated along the row, stride 1 or 2, activations in registers, rows no wider than
    // the zero row); the loop below then does only their remaining channels and the row's ends.
    int spanned = 0;
    if (KILN_NHWC_HAS_ACTIVATE && in_registers && dw == 1 && (sw == 1 || sw == 2) && w * c <= KILN_NHWC_ZERO_ROW &&
        ((kh == 3 && kw == 3) || (kh == 5 && kw == 5)) && cv > c0) {
        const float *rows[5];
        for (size_t ky = 0; ky < kh; ky++) {
            const long iy = iy0 + (long)(ky * dh);
            rows[ky] = iy >= 0 && iy < (long)h ? x + (size_t)iy * w * c : kiln_nhwc_zero_row;
        }
        if (kh == 3 && sw == 1) KILN_NHWC_NAME(dw_spans)(3, 3, 1, ox_lo, ox_hi, ow, w, c, pl, rows, weight, e ? e->bias : NULL, c0, cv, yrow, t);
        else if (kh == 3) KILN_NHWC_NAME(dw_spans)(3, 3, 2, ox_lo, ox_hi, ow, w, c, pl, rows, weight, e ? e->bias : NULL, c0, cv, yrow, t);
        else if (sw == 1) KILN_NHWC_NAME(dw_spans)(5, 5, 1, ox_lo, ox_hi, ow, w, c, pl, rows, weight, e ? e->bias : NULL, c0, cv, yrow, t);
        else KILN_NHWC_NAME(dw_spans)(5, 5, 2, ox_lo, ox_hi, ow, w, c, pl, rows, weight, e ? e->bias : NULL, c0, cv, yrow, t);
        spanned = 1;
    }
    size_t ox = 0;
    while (ox < ow) {
        if (spanned && cv == c1) break;
        const int interior = ox >= ox_lo && ox < ox_hi;
        const size_t n = !interior ? 1 : ox + 4 <= ox_hi ? 4 : ox + 2 <= ox_hi ? 2 : 1;
        size_t kx0 = 0, kx1 = kw;
        const long ix0 = (long)(ox * sw) - (long)pl;
        if (!interior) {
            while (kx0 < kw && ix0 + (long)(kx0 * dw) < 0) kx0++;
            while (kx1 > kx0 && ix0 + (long)((kx1 - 1) * dw) >= (long)w) kx1--;
        }
        // The window's first column (a tap left of the row is never read: kx starts at kx0).
        const float *xr = xbase + (long)c * ix0;
        float *out = yrow + ox * c;
        size_t ch = spanned ? s1 : s0;
        if (interior && n == 4) {
            for (; ch + 2 * L <= s1; ch += 2 * L)
                KILN_NHWC_NAME(dw_block)(4, 2, KW, 0, kw, sw, dw, c, xr, weight, ky0, ky1, row_step, weight_row, ch, out, e, t, in_registers);
            for (; ch < s1; ch += L)
                KILN_NHWC_NAME(dw_block)(4, 1, KW, 0, kw, sw, dw, c, xr, weight, ky0, ky1, row_step, weight_row, ch, out, e, t, in_registers);
        } else if (interior && n == 2) {
            for (; ch + 4 * L <= s1; ch += 4 * L)
                KILN_NHWC_NAME(dw_block)(2, 4, KW, 0, kw, sw, dw, c, xr, weight, ky0, ky1, row_step, weight_row, ch, out, e, t, in_registers);
            for (; ch < s1; ch += L)
                KILN_NHWC_NAME(dw_block)(2, 1, KW, 0, kw, sw, dw, c, xr, weight, ky0, ky1, row_step, weight_row, ch, out, e, t, in_registers);
        } else {
            for (; ch + 8 * L <= s1; ch += 8 * L)
                KILN_NHWC_NAME(dw_block)(1, 8, 0, kx0, kx1, sw, dw, c, xr, weight, ky0, ky1, row_step, weight_row, ch, out, e, t, in_registers);
            for (; ch + 2 * L <= s1; ch += 2 * L)
                KILN_NHWC_NAME(dw_block)(1, 2, 0, kx0, kx1, sw, dw, c, xr, weight, ky0, ky1, row_step, weight_row, ch, out, e, t, in_registers);
            for (; ch < s1; ch += L)
                KILN_NHWC_NAME(dw_block)(1, 1, 0, kx0, kx1, sw, dw, c, xr, weight, ky0, ky1, row_step, weight_row, ch, out, e, t, in_registers);
        }
        for (size_t p = 0; p < n; p++) {
            const long px0 = (long)((ox + p) * sw) - (long)pl;
            size_t tx0 = 0, tx1 = kw;
            while (tx0 < kw && px0 + (long)(tx0 * dw) < 0) tx0++;
            while (tx1 > tx0 && px0 + (long)((tx1 - 1) * dw) >= (long)w) tx1--;
            float *o = yrow + (ox + p) * c;
            for (size_t ch2 = cv; ch2 < c1; ch2++) {
                float s = e && e->bias ? e->bias[ch2] : 0.0f;
                for (size_t ky = ky0; ky < ky1; ky++) {
                    const float *xk = x + (size_t)(iy0 + (long)(ky * dh)) * w * c + ch2;
                    for (size_t kx = tx0; kx < tx1; kx++)
                        s += xk[(size_t)(px0 + (long)(kx * dw)) * c] * weight[(ky * kw + kx) * c + ch2];
                }
                o[ch2] = s;
            }
            if (e && e->activation && (!in_registers || cv < c1)) {
                const size_t from = in_registers ? cv : c0;
                kiln_unary_apply(e->activation, c1 - from, o + from, o + from, e->alpha, e->beta, 1);
            }
        }
        ox += n;
    }
}

KILN_NHWC_TARGET void KILN_NHWC_NAME(kiln_f32_dwconv2d_nhwc)(size_t h, size_t w, size_t c, const float *x, size_t kh, size_t kw,
                                                              const float *weight, size_t sh, size_t sw, size_t dh, size_t dw,
                                                              size_t pt, size_t pl, size_t oh, size_t ow, size_t row_begin,
                                                              size_t row_end, size_t c_begin, size_t c_end, float *y,
                                                              const kiln_epilogue *e) {
    (void)oh;
    kiln_tile_args t = {NULL, NULL, e ? e->activation : 0, e ? e->alpha : 0, e ? e->beta : 0, 0};
    const int in_registers = KILN_NHWC_HAS_ACTIVATE && kiln_unary_in_registers(&t);
    // Tap widths 3 and 5 (no dilation along the row) unrolled at compile time.
#define KILN_DW_ROWS(KW) \
    for (size_t oy = row_begin; oy < row_end; oy++) \
        KILN_NHWC_NAME(dw_row)(KW, h, w, c, x, kh, kw, weight, sh, sw, dh, dw, pt, pl, ow, oy, c_begin, c_end, y, e, &t, in_registers)
    if (dw == 1 && kw == 3) KILN_DW_ROWS(3);
    else if (dw == 1 && kw == 5) KILN_DW_ROWS(5);
    else KILN_DW_ROWS(0);
#undef KILN_DW_ROWS
}

KILN_NHWC_TARGET void KILN_NHWC_NAME(kiln_f32_pool2d_nhwc)(int max, int count_pad, size_t h, size_t w, size_t c, const float *x,
                                                            size_t kh, size_t kw, size_t sh, size_t sw, size_t dh, size_t dw,
                                                            size_t pt, size_t pl, size_t pb, size_t pr, size_t oh, size_t ow,
                                                            size_t row_begin, size_t row_end, float *y) {
    (void)oh;
    const size_t L = KILN_NHWC_LANES;
    const size_t cv = c / L * L;
    for (size_t oy = row_begin; oy < row_end; oy++) {
        const long iy0 = (long)(oy * sh) - (long)pt;
        size_t ky0 = 0, ky1 = kh;
        while (ky0 < kh && iy0 + (long)(ky0 * dh) < 0) ky0++;
        while (ky1 > ky0 && iy0 + (long)((ky1 - 1) * dh) >= (long)h) ky1--;
        // The window's rows inside the padded extent (for count_include_pad).
        const long pad_rows_end = (long)(h + pb);
        long span_y = 0;
        for (size_t ky = 0; ky < kh; ky++) if (iy0 + (long)(ky * dh) < pad_rows_end) span_y++;
        for (size_t ox = 0; ox < ow; ox++) {
            const long ix0 = (long)(ox * sw) - (long)pl;
            size_t kx0 = 0, kx1 = kw;
            while (kx0 < kw && ix0 + (long)(kx0 * dw) < 0) kx0++;
            while (kx1 > kx0 && ix0 + (long)((kx1 - 1) * dw) >= (long)w) kx1--;
            long span_x = 0;
            for (size_t kx = 0; kx < kw; kx++) if (ix0 + (long)(kx * dw) < (long)(w + pr)) span_x++;
            const size_t inside = (ky1 - ky0) * (kx1 - kx0);
            const float divisor = (float)(count_pad ? (size_t)(span_y * span_x) : inside);
            const float scale = 1.0f / (divisor > 0 ? divisor : 1.0f);
            float *out = y + (oy * ow + ox) * c;
            size_t ch = 0;
            // Four vectors of channels at a time: four independent chains of max/add over the taps.
            for (; ch + 4 * L <= cv; ch += 4 * L) {
                KILN_NHWC_VEC a0 = KILN_NHWC_SET1(max ? -INFINITY : 0.0f), a1 = a0, a2 = a0, a3 = a0;
                for (size_t ky = ky0; ky < ky1; ky++) {
                    const float *xr = x + (size_t)(iy0 + (long)(ky * dh)) * w * c + ch;
                    for (size_t kx = kx0; kx < kx1; kx++) {
                        const float *p = xr + (size_t)(ix0 + (long)(kx * dw)) * c;
                        if (max) {
                            a0 = KILN_NHWC_MAX(a0, KILN_NHWC_LOAD(p));
                            a1 = KILN_NHWC_MAX(a1, KILN_NHWC_LOAD(p + L));
                            a2 = KILN_NHWC_MAX(a2, KILN_NHWC_LOAD(p + 2 * L));
                            a3 = KILN_NHWC_MAX(a3, KILN_NHWC_LOAD(p + 3 * L));
                        } else {
                            a0 = KILN_NHWC_ADD(a0, KILN_NHWC_LOAD(p));
                            a1 = KILN_NHWC_ADD(a1, KILN_NHWC_LOAD(p + L));
                            a2 = KILN_NHWC_ADD(a2, KILN_NHWC_LOAD(p + 2 * L));
                            a3 = KILN_NHWC_ADD(a3, KILN_NHWC_LOAD(p + 3 * L));
                        }
                    }
                }
                if (!max) {
                    const KILN_NHWC_VEC m = KILN_NHWC_SET1(inside ? scale : 0.0f);
                    a0 = KILN_NHWC_MUL(a0, m); a1 = KILN_NHWC_MUL(a1, m); a2 = KILN_NHWC_MUL(a2, m); a3 = KILN_NHWC_MUL(a3, m);
                }
                KILN_NHWC_STORE(out + ch, a0);
                KILN_NHWC_STORE(out + ch + L, a1);
                KILN_NHWC_STORE(out + ch + 2 * L, a2);
                KILN_NHWC_STORE(out + ch + 3 * L, a3);
            }
            for (; ch < cv; ch += L) {
                KILN_NHWC_VEC acc = KILN_NHWC_SET1(max ? -INFINITY : 0.0f);
                for (size_t ky = ky0; ky < ky1; ky++) {
                    const float *xr = x + (size_t)(iy0 + (long)(ky * dh)) * w * c + ch;
                    for (size_t kx = kx0; kx < kx1; kx++) {
                        const KILN_NHWC_VEC v = KILN_NHWC_LOAD(xr + (size_t)(ix0 + (long)(kx * dw)) * c);
                        acc = max ? KILN_NHWC_MAX(acc, v) : KILN_NHWC_ADD(acc, v);
                    }
                }
                if (!max) acc = KILN_NHWC_MUL(acc, KILN_NHWC_SET1(inside ? scale : 0.0f));
                KILN_NHWC_STORE(out + ch, acc);
            }
            for (size_t ch = cv; ch < c; ch++) {
                float acc = max ? -INFINITY : 0.0f;
                for (size_t ky = ky0; ky < ky1; ky++) {
                    const float *xr = x + (size_t)(iy0 + (long)(ky * dh)) * w * c + ch;
                    for (size_t kx = kx0; kx < kx1; kx++) {
                        const float v = xr[(size_t)(ix0 + (long)(kx * dw)) * c];
                        if (max) { if (v > acc || v != v) acc = v; } else acc += v;
                    }
                }
                out[ch] = max ? acc : (inside ? acc * scale : 0.0f);
            }
        }
    }
}

#undef KILN_NHWC_TARGET
#undef KILN_NHWC_NAME
#undef KILN_NHWC_LANES
#undef KILN_NHWC_VEC
#undef KILN_NHWC_LOAD
#undef KILN_NHWC_STORE
#undef KILN_NHWC_SET1
#undef KILN_NHWC_FMA
#undef KILN_NHWC_ADD
#undef KILN_NHWC_MUL
#undef KILN_NHWC_MAX
#undef KILN_NHWC_ACTIVATE
#undef KILN_NHWC_HAS_ACTIVATE
