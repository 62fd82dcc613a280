// Elementwise unary maps, GEMM epilogues, depthwise convolution and layout helpers: scalar C
// written so the compiler vectorizes the inner loops, built once per ISA.
#include "kiln_kernels.h"

#include <math.h>
#include <string.h>

#include "kiln_unary.h"

void kiln_f32_unary__scalar(int op, size_t n, const float *x, float *y, float alpha, float beta) {
    kiln_unary_body(op, n, x, y, alpha, beta);
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma")))
void kiln_f32_unary__avx2(int op, size_t n, const float *x, float *y, float alpha, float beta) {
    kiln_unary_body(op, n, x, y, alpha, beta);
}
#endif

// The names of kiln_unary.inc, indexed by code.
#define KILN_UNARY(NAME, name, code, scalar, in_registers) [code] = #name,
static const char *const kiln_unary_names[] = {
#include "kiln_unary.inc"
};
#undef KILN_UNARY

int kiln_unary_count(void) { return (int)(sizeof kiln_unary_names / sizeof kiln_unary_names[0]) - 1; }

const char *kiln_unary_name(int code) {
    return code > 0 && code <= kiln_unary_count() ? kiln_unary_names[code] : NULL;
}

int kiln_unary_code(const char *name) {
    for (int code = 1; code <= kiln_unary_count(); code++)
        if (kiln_unary_names[code] && strcmp(kiln_unary_names[code], name) == 0) return code;
    return KILN_UNARY_NONE;
}

void kiln_f32_epilogue(size_t m, size_t n, float *c, size_t ldc, const float *bias, const kiln_epilogue *e) {
    if (e) kiln_tile_epilogue(m, n, c, ldc, bias, NULL, e);
}

static inline __attribute__((always_inline)) void kiln_dwconv_generic(
    size_t channels, size_t h, size_t w, const float *x, size_t kh, size_t kw, const float *weight, size_t sh, size_t sw,
    size_t dh, size_t dw, size_t pt, size_t pl, size_t oh, size_t ow, float *y, const kiln_epilogue *e) {
    for (size_t c = 0; c < channels; c++) {
        const float *xc = x + c * h * w;
        const float *wc = weight + c * kh * kw;
        float *yc = y + c * oh * ow;
        const float b = e && e->bias ? e->bias[c] : 0.0f;
        for (size_t oy = 0; oy < oh; oy++) {
            float *yr = yc + oy * ow;
            for (size_t ox = 0; ox < ow; ox++) yr[ox] = b;
            for (size_t ky = 0; ky < kh; ky++) {
                const long iy = (long)(oy * sh + ky * dh) - (long)pt;
                if (iy < 0 || iy >= (long)h) continue;
                const float *xr = xc + (size_t)iy * w;
                for (size_t kx = 0; kx < kw; kx++) {
                    const float wv = wc[ky * kw + kx];
                    const long off = (long)(kx * dw) - (long)pl;
                    // Output columns whose input column lies inside the row.
                    size_t lo = 0, hi = ow;
                    if (off < 0) lo = ((size_t)(-off) + sw - 1) / sw;
                    const long last = (long)w - 1 - off; // ox * sw <= last
                    if (last < 0) continue;
                    const size_t bound = (size_t)last / sw + 1;
                    if (bound < hi) hi = bound;
                    if (sw == 1) {
                        const float *xs = xr + off;
                        for (size_t ox = lo; ox < hi; ox++) yr[ox] += wv * xs[ox];
                    } else {
                        for (size_t ox = lo; ox < hi; ox++) yr[ox] += wv * xr[(long)(ox * sw) + off];
                    }
                }
            }
        }
        if (e && e->activation != KILN_UNARY_NONE) kiln_unary_body(e->activation, oh * ow, yc, yc, e->alpha, e->beta);
    }
}

typedef float kiln_v8 __attribute__((vector_size(32)));
typedef float kiln_v8u __attribute__((vector_size(32), aligned(4)));

/// Scratch floats one channel of the padded-plane path needs (0: the geometry takes the general path).
static size_t kiln_dwconv_plane_floats(size_t kh, size_t kw, size_t sh, size_t sw, size_t dh, size_t dw, size_t oh, size_t ow,
                                       size_t *rows, size_t *stride) {
    if (!(sw == 1 || (sw == 2 && dw == 1))) return 0;
    const size_t chunk = ow <= 8 ? 8 : ow <= 16 ? 16 : 32;
    const size_t owp = (ow + chunk - 1) / chunk * chunk;
    *rows = (oh - 1) * sh + (kh - 1) * dh + 1;
    const size_t cols = sw == 1 ? (kw - 1) * dw + owp : (kw - 1) / 2 + owp;
    *stride = (cols + 8 + 7) & ~(size_t)7;
    return (sw == 1 ? 1 : 2) * *rows * *stride + 32;
}

size_t kiln_f32_dwconv2d_scratch_floats(size_t kh, size_t kw, size_t sh, size_t sw, size_t dh, size_t dw, size_t oh, size_t ow) {
    size_t rows, stride;
    return kiln_dwconv_plane_floats(kh, kw, sh, sw, dh, dw, oh, ow, &rows, &stride);
}

// R output rows from oy, all column chunks, V vectors of 8 columns per chunk (R, V constants
// after inlining, so the accumulators live in registers).
static inline __attribute__((always_inline)) void kiln_dw_block(const float *even, const float *odd, size_t rs, const float *wc,
                                                                size_t kh, size_t kw, size_t sh, size_t sw, size_t dh, size_t dw,
                                                                size_t oy, const size_t R, const size_t V, size_t chunk, size_t ow,
                                                                float b, float *acc, float *yc) {
    const kiln_v8 bv = {b, b, b, b, b, b, b, b};
    for (size_t j0 = 0; j0 < ow; j0 += chunk) {
        kiln_v8 a[4][4];
        for (size_t r = 0; r < R; r++) for (size_t v = 0; v < V; v++) a[r][v] = bv;
        for (size_t ky = 0; ky < kh; ky++) {
            for (size_t kx = 0; kx < kw; kx++) {
                const float wv = wc[ky * kw + kx];
                const kiln_v8 wvv = {wv, wv, wv, wv, wv, wv, wv, wv};
                const float *base = (sw == 1 ? even + kx * dw : ((kx & 1) ? odd : even) + (kx >> 1)) + j0 + ky * dh * rs;
                for (size_t r = 0; r < R; r++) {
                    const float *src = base + (oy + r) * sh * rs;
                    for (size_t v = 0; v < V; v++) a[r][v] += wvv * *(const kiln_v8u *)(src + 8 * v);
                }
            }
        }
        const size_t n = ow - j0 < chunk ? ow - j0 : chunk;
        for (size_t r = 0; r < R; r++) {
            for (size_t v = 0; v < V; v++) *(kiln_v8u *)(acc + 8 * v) = a[r][v];
            memcpy(yc + (oy + r) * ow + j0, acc, n * sizeof(float));
        }
    }
}

// Each channel is copied into a zero-padded plane (for stride 2, split into even and odd
// columns), so every tap is a straight multiply-add over a row of 8-wide vectors.
static inline __attribute__((always_inline)) void kiln_dwconv_body(
    size_t channels, size_t h, size_t w, const float *x, size_t kh, size_t kw, const float *weight, size_t sh, size_t sw,
    size_t dh, size_t dw, size_t pt, size_t pl, size_t oh, size_t ow, float *y, const kiln_epilogue *e, float *scratch) {
    size_t rows, rs;
    if (!scratch || oh == 0 || ow == 0 || !kiln_dwconv_plane_floats(kh, kw, sh, sw, dh, dw, oh, ow, &rows, &rs)) {
        kiln_dwconv_generic(channels, h, w, x, kh, kw, weight, sh, sw, dh, dw, pt, pl, oh, ow, y, e);
        return;
    }
    const size_t chunk = ow <= 8 ? 8 : ow <= 16 ? 16 : 32;
    const size_t planes = sw == 1 ? 1 : 2;
    float *even = scratch, *odd = scratch + rows * rs, *acc = scratch + planes * rows * rs;
    for (size_t c = 0; c < channels; c++) {
        const float *xc = x + c * h * w;
        const float *wc = weight + c * kh * kw;
        float *yc = y + c * oh * ow;
        for (size_t r = 0; r < rows; r++) {
            const long iy = (long)r - (long)pt;
            float *er = even + r * rs, *orow = odd + r * rs;
            if (iy < 0 || iy >= (long)h) {
                memset(er, 0, rs * sizeof(float));
                if (sw != 1) memset(orow, 0, rs * sizeof(float));
                continue;
            }
            const float *xr = xc + (size_t)iy * w;
            if (sw == 1) {
                // [0, pl) zeros, the row, zeros to the stride.
                const size_t n = w + pl <= rs ? w : (rs > pl ? rs - pl : 0);
                memset(er, 0, pl < rs ? pl * sizeof(float) : rs * sizeof(float));
                if (n) memcpy(er + pl, xr, n * sizeof(float));
                if (pl + n < rs) memset(er + pl + n, 0, (rs - pl - n) * sizeof(float));
            } else {
                memset(er, 0, rs * sizeof(float));
                memset(orow, 0, rs * sizeof(float));
                // Padded column col = ix + pl goes to (col even ? even : odd)[col / 2]: input columns
                // 2t and 2t + 1 land at fixed offsets of the two planes.
                float *to_even_ix = (pl & 1) ? orow : er, *to_odd_ix = (pl & 1) ? er : orow;
                const size_t off_even_ix = pl >> 1, off_odd_ix = (pl + 1) >> 1;
                const size_t pairs_even = (w + 1) / 2, pairs_odd = w / 2;
                const size_t ne = off_even_ix < rs ? (pairs_even < rs - off_even_ix ? pairs_even : rs - off_even_ix) : 0;
                const size_t no = off_odd_ix < rs ? (pairs_odd < rs - off_odd_ix ? pairs_odd : rs - off_odd_ix) : 0;
                for (size_t t = 0; t < ne; t++) to_even_ix[off_even_ix + t] = xr[2 * t];
                for (size_t t = 0; t < no; t++) to_odd_ix[off_odd_ix + t] = xr[2 * t + 1];
            }
        }
        const float b = e && e->bias ? e->bias[c] : 0.0f;
        // Blocks of R output rows × V vectors of 8 columns keep R·V independent accumulators in
        // registers over all taps (one chain per accumulator would wait on FMA latency).
        size_t oy = 0;
#define KILN_DW_ROWS(R, V) for (; oy + R <= oh; oy += R) kiln_dw_block(even, odd, rs, wc, kh, kw, sh, sw, dh, dw, oy, R, V, chunk, ow, b, acc, yc)
        if (chunk == 32) { KILN_DW_ROWS(2, 4); KILN_DW_ROWS(1, 4); }
        else if (chunk == 16) { KILN_DW_ROWS(4, 2); KILN_DW_ROWS(1, 2); }
        else { KILN_DW_ROWS(4, 1); KILN_DW_ROWS(1, 1); }
#undef KILN_DW_ROWS
        if (e && e->activation != KILN_UNARY_NONE) kiln_unary_body(e->activation, oh * ow, yc, yc, e->alpha, e->beta);
    }
}

void kiln_f32_dwconv2d__scalar(size_t channels, size_t h, size_t w, const float *x, size_t kh, size_t kw,
                               const float *weight, size_t sh, size_t sw, size_t dh, size_t dw, size_t pt, size_t pl,
                               size_t oh, size_t ow, float *y, const kiln_epilogue *e, float *scratch) {
    kiln_dwconv_body(channels, h, w, x, kh, kw, weight, sh, sw, dh, dw, pt, pl, oh, ow, y, e, scratch);
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma")))
void kiln_f32_dwconv2d_padded__avx2(size_t channels, size_t h, size_t w, const float *x, size_t kh, size_t kw,
                             const float *weight, size_t sh, size_t sw, size_t dh, size_t dw, size_t pt, size_t pl,
                             size_t oh, size_t ow, float *y, const kiln_epilogue *e, float *scratch) {
    kiln_dwconv_body(channels, h, w, x, kh, kw, weight, sh, sw, dh, dw, pt, pl, oh, ow, y, e, scratch);
}
#endif

void kiln_f32_im2col__scalar(size_t channels, size_t h, size_t w, const float *x, size_t kh, size_t kw, size_t sh,
                             size_t sw, size_t dh, size_t dw, size_t pt, size_t pl, size_t oh, size_t ow,
                             float *cols) {
    const size_t k = channels * kh * kw;
    for (size_t oy = 0; oy < oh; oy++) {
        for (size_t ox = 0; ox < ow; ox++) {
            float *row = cols + (oy * ow + ox) * k;
            for (size_t c = 0; c < channels; c++) {
                for (size_t ky = 0; ky < kh; ky++) {
                    const long iy = (long)(oy * sh + ky * dh) - (long)pt;
                    for (size_t kx = 0; kx < kw; kx++) {
                        const long ix = (long)(ox * sw + kx * dw) - (long)pl;
                        const int inside = iy >= 0 && iy < (long)h && ix >= 0 && ix < (long)w;
                        *row++ = inside ? x[(c * h + (size_t)iy) * w + (size_t)ix] : 0.0f;
                    }
                }
            }
        }
    }
}

// Copies n values of `row` from column ix at stride sw into o, zero where a column falls outside [0, w).
typedef void (*kiln_im2col_run_fn)(float *o, const float *row, long ix, size_t n, size_t sw, size_t w);

static inline __attribute__((always_inline)) void kiln_im2col_run_scalar(float *o, const float *row, long ix, size_t n, size_t sw,
                                                                         size_t w) {
    if (ix >= 0 && ix + (long)((n - 1) * sw) < (long)w) {
        // The whole run inside the row: a plain strided read.
        const float *src = row + ix;
        if (sw == 1) memcpy(o, src, n * sizeof(float));
        else for (size_t j = 0; j < n; j++) o[j] = src[j * sw];
    } else {
        for (size_t j = 0; j < n; j++) {
            const long xx = ix + (long)(j * sw);
            o[j] = xx >= 0 && xx < (long)w ? row[xx] : 0.0f;
        }
    }
}

static inline __attribute__((always_inline)) void kiln_im2col_pack_body(
    size_t channels, size_t h, size_t w, const float *x, size_t kh, size_t kw, size_t sh, size_t sw, size_t dh, size_t dw,
    size_t pt, size_t pl, size_t oh, size_t ow, size_t nr, size_t p_begin, size_t p_end, float *packed, kiln_im2col_run_fn copy_run) {
    const size_t pixels = oh * ow, k = channels * kh * kw;
    // A panel's pixels split into runs along one output row: (first lane, lanes, input row and column of lane 0).
    size_t run_lane[64], run_count[64], runs;
    long run_iy[64], run_ix[64];
    if (nr > 64) return;
    for (size_t p = p_begin; p < p_end; p++) {
        float *out = packed + (p - p_begin) * k * nr;
        const size_t first = p * nr;
        runs = 0;
        size_t lane = 0;
        while (lane < nr && first + lane < pixels) {
            const size_t pix = first + lane, oy = pix / ow, ox = pix % ow;
            const size_t n = ow - ox < nr - lane ? ow - ox : nr - lane;
            const size_t left = pixels - pix < n ? pixels - pix : n;
            run_lane[runs] = lane;
            run_count[runs] = left;
            run_iy[runs] = (long)(oy * sh) - (long)pt;
            run_ix[runs] = (long)(ox * sw) - (long)pl;
            runs++;
            lane += left;
        }
        const size_t used = lane;
        if (ow < 8) {
            // Narrow outputs make runs of a lane or two: gather lane by lane instead.
            long iy0[64], ix0[64];
            for (size_t j = 0; j < nr; j++) {
                const size_t pix = first + j;
                iy0[j] = j < used ? (long)(pix / ow * sh) - (long)pt : -(1L << 40);
                ix0[j] = j < used ? (long)(pix % ow * sw) - (long)pl : 0;
            }
            for (size_t c = 0; c < channels; c++) {
                const float *xc = x + c * h * w;
                for (size_t ky = 0; ky < kh; ky++) {
                    for (size_t kx = 0; kx < kw; kx++) {
                        const long dy = (long)(ky * dh), dx = (long)(kx * dw);
                        for (size_t j = 0; j < nr; j++) {
                            const long iy = iy0[j] + dy, ix = ix0[j] + dx;
                            out[j] = (iy >= 0 && iy < (long)h && ix >= 0 && ix < (long)w) ? xc[(size_t)iy * w + (size_t)ix] : 0.0f;
                        }
                        out += nr;
                    }
                }
            }
            continue;
        }
        for (size_t c = 0; c < channels; c++) {
            const float *xc = x + c * h * w;
            for (size_t ky = 0; ky < kh; ky++) {
                for (size_t kx = 0; kx < kw; kx++) {
                    for (size_t r = 0; r < runs; r++) {
                        float *o = out + run_lane[r];
                        const size_t n = run_count[r];
                        const long iy = run_iy[r] + (long)(ky * dh), ix = run_ix[r] + (long)(kx * dw);
                        if (iy < 0 || iy >= (long)h) {
                            for (size_t j = 0; j < n; j++) o[j] = 0.0f;
                            continue;
                        }
                        copy_run(o, xc + (size_t)iy * w, ix, n, sw, w);
                    }
                    for (size_t j = used; j < nr; j++) out[j] = 0.0f;
                    out += nr;
                }
            }
        }
    }
}

void kiln_f32_im2col_pack__scalar(size_t channels, size_t h, size_t w, const float *x, size_t kh, size_t kw, size_t sh,
                                  size_t sw, size_t dh, size_t dw, size_t pt, size_t pl, size_t oh, size_t ow, size_t nr,
                                  size_t p_begin, size_t p_end, float *packed) {
    kiln_im2col_pack_body(channels, h, w, x, kh, kw, sh, sw, dh, dw, pt, pl, oh, ow, nr, p_begin, p_end, packed,
                          kiln_im2col_run_scalar);
}

#if defined(__x86_64__)
#include <immintrin.h>

// Sixteen lanes at a time: masked loads cover the row's ends, stride 2 keeps the even lanes of 32.
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma"))) static inline __attribute__((always_inline)) void
kiln_im2col_run_avx512(float *o, const float *row, long ix, size_t n, size_t sw, size_t w) {
    if (sw > 2) {
        kiln_im2col_run_scalar(o, row, ix, n, sw, w);
        return;
    }
    const __m512i evens = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    for (size_t j = 0; j < n; j += 16) {
        const long col = ix + (long)(j * sw);
        const long left = (long)(n - j) < 16 ? (long)(n - j) : 16;
        // Input lanes [lo, hi) of the 16 loaded from col: inside the row and, for stride 1, before the run's end.
        long lo = -col, hi = (long)w - col;
        if (lo < 0) lo = 0;
        const long end1 = sw == 1 ? left : 16;
        const long h0 = hi < end1 ? hi : end1;
        const __mmask16 m0 = h0 > lo ? (__mmask16)((((1u << (h0 - lo)) - 1u) << lo) & 0xffffu) : 0;
        __m512 v;
        if (sw == 1) {
            v = _mm512_maskz_loadu_ps(m0, row + col);
        } else {
            long lo1 = -col - 16, hi1 = (long)w - col - 16;
            if (lo1 < 0) lo1 = 0;
            if (hi1 > 16) hi1 = 16;
            const __mmask16 m1 = hi1 > lo1 ? (__mmask16)((((1u << (hi1 - lo1)) - 1u) << lo1) & 0xffffu) : 0;
            v = _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(m0, row + col), evens, _mm512_maskz_loadu_ps(m1, row + col + 16));
        }
        _mm512_mask_storeu_ps(o + j, (__mmask16)((1u << left) - 1u), v);
    }
}

__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))
void kiln_f32_im2col_pack__avx512(size_t channels, size_t h, size_t w, const float *x, size_t kh, size_t kw, size_t sh,
                                  size_t sw, size_t dh, size_t dw, size_t pt, size_t pl, size_t oh, size_t ow, size_t nr,
                                  size_t p_begin, size_t p_end, float *packed) {
    kiln_im2col_pack_body(channels, h, w, x, kh, kw, sh, sw, dh, dw, pt, pl, oh, ow, nr, p_begin, p_end, packed,
                          kiln_im2col_run_avx512);
}
// Eight lanes at a time for a stride-2 run inside the row (two loads, the even lanes kept); runs
// at the row's ends and other strides go element by element.
__attribute__((target("avx2,fma"))) static inline __attribute__((always_inline)) void
kiln_im2col_run_avx2(float *o, const float *row, long ix, size_t n, size_t sw, size_t w) {
    if (sw != 2 || ix < 0 || ix + (long)((n - 1) * sw) >= (long)w) {
        kiln_im2col_run_scalar(o, row, ix, n, sw, w);
        return;
    }
    const float *src = row + ix;
    size_t j = 0;
    // Lane 2j + 15 must lie inside the row for a full pair of loads.
    for (; j + 8 <= n && ix + (long)(2 * j + 15) < (long)w; j += 8) {
        const __m256 lo = _mm256_loadu_ps(src + 2 * j), hi = _mm256_loadu_ps(src + 2 * j + 8);
        const __m256 even = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)); // lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6
        _mm256_storeu_ps(o + j, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(even), 0xD8)));
    }
    for (; j < n; j++) o[j] = src[2 * j];
}

__attribute__((target("avx2,fma")))
void kiln_f32_im2col_pack__avx2(size_t channels, size_t h, size_t w, const float *x, size_t kh, size_t kw, size_t sh,
                                size_t sw, size_t dh, size_t dw, size_t pt, size_t pl, size_t oh, size_t ow, size_t nr,
                                size_t p_begin, size_t p_end, float *packed) {
    kiln_im2col_pack_body(channels, h, w, x, kh, kw, sh, sw, dh, dw, pt, pl, oh, ow, nr, p_begin, p_end, packed,
                          kiln_im2col_run_avx2);
}
#endif

void kiln_f32_im2col_pack(size_t channels, size_t h, size_t w, const float *x, size_t kh, size_t kw, size_t sh, size_t sw,
                          size_t dh, size_t dw, size_t pt, size_t pl, size_t oh, size_t ow, size_t nr, size_t p_begin,
                          size_t p_end, float *packed) {
#if defined(__x86_64__)
    if (kiln_cpu_features() & KILN_CPU_X86_V4) {
        kiln_f32_im2col_pack__avx512(channels, h, w, x, kh, kw, sh, sw, dh, dw, pt, pl, oh, ow, nr, p_begin, p_end, packed);
        return;
    }
    if (kiln_cpu_features() & KILN_CPU_X86_V3) {
        kiln_f32_im2col_pack__avx2(channels, h, w, x, kh, kw, sh, sw, dh, dw, pt, pl, oh, ow, nr, p_begin, p_end, packed);
        return;
    }
#endif
    kiln_f32_im2col_pack__scalar(channels, h, w, x, kh, kw, sh, sw, dh, dw, pt, pl, oh, ow, nr, p_begin, p_end, packed);
}

void kiln_f32_im2col_rows__scalar(size_t channels, size_t h, size_t w, const float *x, size_t kh, size_t kw, size_t sh,
                                  size_t sw, size_t dh, size_t dw, size_t pt, size_t pl, size_t oh, size_t ow, float *rows) {
    float *out = rows;
    for (size_t c = 0; c < channels; c++) {
        for (size_t ky = 0; ky < kh; ky++) {
            for (size_t kx = 0; kx < kw; kx++) {
                for (size_t oy = 0; oy < oh; oy++) {
                    const long iy = (long)(oy * sh + ky * dh) - (long)pt;
                    if (iy < 0 || iy >= (long)h) {
                        for (size_t ox = 0; ox < ow; ox++) *out++ = 0.0f;
                        continue;
                    }
                    const float *xr = x + (c * h + (size_t)iy) * w;
                    for (size_t ox = 0; ox < ow; ox++) {
                        const long ix = (long)(ox * sw + kx * dw) - (long)pl;
                        *out++ = ix >= 0 && ix < (long)w ? xr[ix] : 0.0f;
                    }
                }
            }
        }
    }
}

void kiln_f32_transpose__scalar(size_t rows, size_t cols, const float *x, float *y) {
    const size_t t = 32;
    for (size_t r0 = 0; r0 < rows; r0 += t) {
        for (size_t c0 = 0; c0 < cols; c0 += t) {
            const size_t r1 = r0 + t < rows ? r0 + t : rows, c1 = c0 + t < cols ? c0 + t : cols;
            for (size_t r = r0; r < r1; r++)
                for (size_t c = c0; c < c1; c++) y[c * rows + r] = x[r * cols + c];
        }
    }
}
