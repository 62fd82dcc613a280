// 3×3 stride-1 channels-last convolution by Winograd's minimal filtering F(2×2, 3×3) (Lavin and
// Gray, "Fast Algorithms for Convolutional Neural Networks", 2016): each 2×2 block of output pixels
// (a tile) is Aᵀ [(G g Gᵀ) ⊙ (Bᵀ d B)] A over the tile's 4×4 input patch d, so its 36 products per
// channel pair become 16. Per block of tiles: the patches are transformed (V, 16 matrices of
// [tiles, C]), the 16 products V[ξ] · U[ξ] run on the GEMM microkernel with U = G g Gᵀ packed at
// compile time ([16, panels, C, nr]), and the output transform adds bias and residual, applies the
// activation and stores the pixels. The transforms use only additions and subtractions (Bᵀ and Aᵀ
// hold 0 and ±1; G's ½ is in the compiled weight), so the products carry no further rounding
// beyond a float32 sum's.
#include "kiln_kernels.h"
#include "kiln_unary.h"

#include <string.h>

// Floats between the 16 matrices of a block: a whole number of rows plus one cache line, so the 16
// streams a transform writes or reads at once fall in different cache sets (a power-of-two
// distance would put all 16 in one set and thrash it).
static inline size_t kiln_wino_stride(size_t count, size_t row) { return count * row + 16; }

// The input transform of the tiles [t0, t0 + count) into v: V[ξ][t][c] at v + ξ · stride + t · c
// (stride = kiln_wino_stride(count, c)). Taps outside the image read `zeros` (c floats).
static inline __attribute__((always_inline)) void kiln_wino_input(size_t h, size_t w, size_t c, const float *x, size_t pt,
                                                                  size_t pl, size_t tiles_w, size_t t0, size_t count,
                                                                  const float *zeros, float *v) {
    for (size_t t = 0; t < count; t++) {
        const size_t ty = (t0 + t) / tiles_w, tx = (t0 + t) % tiles_w;
        const float *d[16];
        for (int i = 0; i < 4; i++) {
            const long iy = (long)(2 * ty + (size_t)i) - (long)pt;
            for (int j = 0; j < 4; j++) {
                const long ix = (long)(2 * tx + (size_t)j) - (long)pl;
                d[i * 4 + j] = iy >= 0 && iy < (long)h && ix >= 0 && ix < (long)w ? x + ((size_t)iy * w + (size_t)ix) * c : zeros;
            }
        }
        float *o = v + t * c;
        const size_t stride = kiln_wino_stride(count, c);
#pragma clang loop vectorize(assume_safety)
        for (size_t ch = 0; ch < c; ch++) {
            float r[4][4];
            // Bᵀ d (rows), then · B (columns).
            for (int j = 0; j < 4; j++) {
                const float d0 = d[j][ch], d1 = d[4 + j][ch], d2 = d[8 + j][ch], d3 = d[12 + j][ch];
                r[0][j] = d0 - d2;
                r[1][j] = d1 + d2;
                r[2][j] = d2 - d1;
                r[3][j] = d1 - d3;
            }
            for (int i = 0; i < 4; i++) {
                o[(size_t)(i * 4 + 0) * stride + ch] = r[i][0] - r[i][2];
                o[(size_t)(i * 4 + 1) * stride + ch] = r[i][1] + r[i][2];
                o[(size_t)(i * 4 + 2) * stride + ch] = r[i][2] - r[i][1];
                o[(size_t)(i * 4 + 3) * stride + ch] = r[i][1] - r[i][3];
            }
        }
    }
}

// Aᵀ applied to the rows of channel n's 4×4 product: s[0][j] = m0 + m1 + m2, s[1][j] = m1 − m2 − m3
// of column j (m_i = P[4i + j][n]).
static inline __attribute__((always_inline)) void kiln_wino_rows(const float *q, size_t stride, size_t n, float s[2][4]) {
    for (int j = 0; j < 4; j++) {
        const float m0 = q[(size_t)j * stride + n], m1 = q[(size_t)(4 + j) * stride + n];
        const float m2 = q[(size_t)(8 + j) * stride + n], m3 = q[(size_t)(12 + j) * stride + n];
        s[0][j] = m0 + m1 + m2;
        s[1][j] = m1 - m2 - m3;
    }
}

// The output transform of tiles [t0, t0 + count) from the products p (P[ξ][t][n] at
// p + ξ · stride + t · m), output channels [n0, n1): pixels inside the output only, plus bias, plus
// what y holds with `accumulate` (a residual), then the activation.
static inline __attribute__((always_inline)) void kiln_wino_output(size_t m, size_t n0, size_t n1, size_t oh, size_t ow,
                                                                   size_t tiles_w, size_t t0, size_t count, const float *p, float *y,
                                                                   size_t ldc, const kiln_epilogue *e) {
    const float *bias = e ? e->bias : NULL;
    const int accumulate = e && e->accumulate;
    const size_t stride = kiln_wino_stride(count, m);
    for (size_t t = 0; t < count; t++) {
        const size_t ty = (t0 + t) / tiles_w, tx = (t0 + t) % tiles_w;
        const size_t oy = 2 * ty, ox = 2 * tx;
        const int rows = oy + 1 < oh ? 2 : 1, cols = ox + 1 < ow ? 2 : 1;
        float *out[2][2];
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) out[i][j] = y + ((oy + (size_t)(i < rows ? i : 0)) * ow + ox + (size_t)(j < cols ? j : 0)) * ldc;
        const float *q = p + t * m;
        if (rows == 2 && cols == 2) {
#pragma clang loop vectorize(assume_safety)
            for (size_t n = n0; n < n1; n++) {
                float s[2][4];
                kiln_wino_rows(q, stride, n, s);
                const float b = bias ? bias[n] : 0.0f;
                for (int i = 0; i < 2; i++) {
                    float y0 = s[i][0] + s[i][1] + s[i][2] + b, y1 = s[i][1] - s[i][2] - s[i][3] + b;
                    if (accumulate) { y0 += out[i][0][n]; y1 += out[i][1][n]; }
                    out[i][0][n] = y0;
                    out[i][1][n] = y1;
                }
            }
        } else {
            // A tile over the output's last row or column: only its pixels inside are written.
            for (size_t n = n0; n < n1; n++) {
                float s[2][4];
                kiln_wino_rows(q, stride, n, s);
                const float b = bias ? bias[n] : 0.0f;
                for (int i = 0; i < rows; i++) {
                    const float yy[2] = {s[i][0] + s[i][1] + s[i][2] + b, s[i][1] - s[i][2] - s[i][3] + b};
                    for (int j = 0; j < cols; j++) out[i][j][n] = accumulate ? yy[j] + out[i][j][n] : yy[j];
                }
            }
        }
        if (e && e->activation)
            for (int i = 0; i < rows; i++)
                for (int j = 0; j < cols; j++) kiln_unary_apply(e->activation, n1 - n0, out[i][j] + n0, out[i][j] + n0, e->alpha, e->beta, 1);
    }
}

static inline __attribute__((always_inline)) void kiln_wino_body(kiln_f32_gemm_ukernel ukernel, size_t mr, const kiln_packed_b *u,
                                                                 size_t h, size_t w, size_t c, const float *x, size_t pt, size_t pl,
                                                                 size_t oh, size_t ow, float *y, size_t ldc, size_t tile_begin,
                                                                 size_t tile_end, size_t p_begin, size_t p_end, size_t block,
                                                                 const kiln_epilogue *e, float *scratch) {
    const size_t m = u[0].n, nr = u[0].nr, tiles_w = (ow + 1) / 2;
    const size_t n0 = p_begin * nr, n1 = p_end * nr < m ? p_end * nr : m;
    if (n0 >= n1) return;
    float *zeros = scratch, *v = zeros + (c + 15) / 16 * 16, *p = v + 16 * kiln_wino_stride(block, c);
    memset(zeros, 0, c * sizeof(float));
    for (size_t t0 = tile_begin; t0 < tile_end; t0 += block) {
        const size_t count = tile_end - t0 < block ? tile_end - t0 : block;
        kiln_wino_input(h, w, c, x, pt, pl, tiles_w, t0, count, zeros, v);
        const size_t vs = kiln_wino_stride(count, c), ps = kiln_wino_stride(count, m);
        for (int xi = 0; xi < 16; xi++)
            kiln_f32_gemm(ukernel, mr, &u[xi], v + (size_t)xi * vs, c, p + (size_t)xi * ps, m, 0, count, p_begin, p_end, NULL, NULL);
        kiln_wino_output(m, n0, n1, oh, ow, tiles_w, t0, count, p, y, ldc, e);
    }
}

size_t kiln_f32_winograd_scratch_floats(size_t c, size_t m, size_t block) {
    return (c + 15) / 16 * 16 + 16 * (kiln_wino_stride(block, c) + kiln_wino_stride(block, m));
}

#define KILN_WINO_PARAMS kiln_f32_gemm_ukernel ukernel, size_t mr, const kiln_packed_b *u, size_t h, size_t w, size_t c, \
    const float *x, size_t pt, size_t pl, size_t oh, size_t ow, float *y, size_t ldc, size_t tile_begin, size_t tile_end, \
    size_t p_begin, size_t p_end, size_t block, const kiln_epilogue *e, float *scratch
#define KILN_WINO_ARGS ukernel, mr, u, h, w, c, x, pt, pl, oh, ow, y, ldc, tile_begin, tile_end, p_begin, p_end, block, e, scratch

void kiln_f32_winograd__scalar(KILN_WINO_PARAMS) { kiln_wino_body(KILN_WINO_ARGS); }
#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) void kiln_f32_winograd__avx2(KILN_WINO_PARAMS) { kiln_wino_body(KILN_WINO_ARGS); }
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma"))) void kiln_f32_winograd__avx512(KILN_WINO_PARAMS) {
    kiln_wino_body(KILN_WINO_ARGS);
}
#endif
