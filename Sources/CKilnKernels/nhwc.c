// Channels-last (NHWC) kernels: im2col rows for the GEMM, depthwise convolution and 2-D pooling
// (the last two per ISA from nhwc_body.h: scalar, AVX2, AVX-512).
#include "kiln_kernels.h"
#include "kiln_simd_activate.h"
#include "kiln_unary.h"

#include <math.h>
#include <string.h>

void kiln_f32_im2col_nhwc__scalar(size_t h, size_t w, size_t c, const float *x, size_t kh, size_t kw, size_t sh, size_t sw,
                                  size_t dh, size_t dw, size_t pt, size_t pl, size_t ow, size_t row_begin, size_t row_end,
                                  float *a) {
    const size_t k = kh * kw * c;
    for (size_t r = row_begin; r < row_end; r++) {
        const size_t oy = r / ow, ox = r % ow;
        float *row = a + (r - row_begin) * k;
        for (size_t ky = 0; ky < kh; ky++) {
            const long iy = (long)(oy * sh) - (long)pt + (long)(ky * dh);
            float *seg = row + ky * kw * c;
            if (iy < 0 || iy >= (long)h) {
                memset(seg, 0, kw * c * sizeof(float));
                continue;
            }
            const float *xr = x + (size_t)iy * w * c;
            const long ix0 = (long)(ox * sw) - (long)pl;
            if (dw == 1 && ix0 >= 0 && ix0 + (long)kw <= (long)w) {
                // The whole window row is one contiguous run of kw pixels.
                memcpy(seg, xr + (size_t)ix0 * c, kw * c * sizeof(float));
                continue;
            }
            for (size_t kx = 0; kx < kw; kx++) {
                const long ix = ix0 + (long)(kx * dw);
                if (ix < 0 || ix >= (long)w) memset(seg + kx * c, 0, c * sizeof(float));
                else memcpy(seg + kx * c, xr + (size_t)ix * c, c * sizeof(float));
            }
        }
    }
}

void kiln_f32_pad_rows(size_t planes, size_t h, size_t w, size_t inner, const float *x, size_t pt, size_t pl, size_t hp,
                       size_t wp, float *out, size_t row_begin, size_t row_end) {
    const size_t row = w * inner, padded_row = wp * inner;
    if (row_end > planes * hp) row_end = planes * hp;
    for (size_t pr = row_begin; pr < row_end; pr++) {
        const size_t q = pr / hp, r = pr % hp;
        float *o = out + pr * padded_row;
        if (r < pt || r >= pt + h) {
            memset(o, 0, padded_row * sizeof(float));
            continue;
        }
        memset(o, 0, pl * inner * sizeof(float));
        memcpy(o + pl * inner, x + q * h * row + (r - pt) * row, row * sizeof(float));
        memset(o + (pl + w) * inner, 0, (wp - pl - w) * inner * sizeof(float));
    }
}

void kiln_f32_pad_planes_to_cells(size_t c, size_t h, size_t w, const float *x, size_t pt, size_t pl, size_t hp, size_t wp,
                                  float *out, size_t row_begin, size_t row_end) {
    const size_t padded_row = wp * c;
    if (row_end > hp) row_end = hp;
    for (size_t r = row_begin; r < row_end; r++) {
        float *o = out + r * padded_row;
        if (r < pt || r >= pt + h) {
            memset(o, 0, padded_row * sizeof(float));
            continue;
        }
        memset(o, 0, pl * c * sizeof(float));
        const float *src = x + (r - pt) * w;
        float *cells = o + pl * c;
        // A compile-time channel count (an image's 1 to 4) lets the interleave vectorize.
#define KILN_CELLS(C) \
    for (size_t ix = 0; ix < w; ix++) \
        for (size_t ch = 0; ch < (C); ch++) cells[ix * (C) + ch] = src[ch * h * w + ix]
        switch (c) {
        case 1: KILN_CELLS(1); break;
        case 2: KILN_CELLS(2); break;
        case 3: KILN_CELLS(3); break;
        case 4: KILN_CELLS(4); break;
        default: KILN_CELLS(c); break;
        }
#undef KILN_CELLS
        memset(o + (pl + w) * c, 0, (wp - pl - w) * c * sizeof(float));
    }
}

void kiln_f32_pad_planes(size_t planes, size_t h, size_t w, size_t inner, const float *x, size_t pt, size_t pl, size_t hp,
                         size_t wp, float *out) {
    kiln_f32_pad_rows(planes, h, w, inner, x, pt, pl, hp, wp, out, 0, planes * hp);
}

void kiln_f32_im2col_nchw_rows__scalar(size_t c, size_t h, size_t w, const float *x, size_t kh, size_t kw, size_t sh, size_t sw,
                                       size_t dh, size_t dw, size_t pt, size_t pl, size_t ow, size_t row_begin, size_t row_end,
                                       float *a) {
    const size_t k = c * kh * kw;
    for (size_t r = row_begin; r < row_end; r++) {
        const size_t oy = r / ow, ox = r % ow;
        float *row = a + (r - row_begin) * k;
        const long ix0 = (long)(ox * sw) - (long)pl;
        const int inner_x = ix0 >= 0 && ix0 + (long)((kw - 1) * dw) < (long)w;
        for (size_t ch = 0; ch < c; ch++) {
            const float *plane = x + ch * h * w;
            for (size_t ky = 0; ky < kh; ky++) {
                const long iy = (long)(oy * sh) - (long)pt + (long)(ky * dh);
                float *seg = row + (ch * kh + ky) * kw;
                if (iy < 0 || iy >= (long)h) {
                    for (size_t kx = 0; kx < kw; kx++) seg[kx] = 0.0f;
                    continue;
                }
                const float *xr = plane + (size_t)iy * w;
                if (inner_x) {
                    for (size_t kx = 0; kx < kw; kx++) seg[kx] = xr[(size_t)ix0 + kx * dw];
                } else {
                    for (size_t kx = 0; kx < kw; kx++) {
                        const long ix = ix0 + (long)(kx * dw);
                        seg[kx] = ix >= 0 && ix < (long)w ? xr[ix] : 0.0f;
                    }
                }
            }
        }
    }
}

// Stands in for input rows above or below the image in the depthwise spans (rows up to this many floats).
#define KILN_NHWC_ZERO_ROW 16384
static const float kiln_nhwc_zero_row[KILN_NHWC_ZERO_ROW];

#define KILN_NHWC_TARGET
#define KILN_NHWC_NAME(x) x##__scalar
#define KILN_NHWC_LANES 1
#define KILN_NHWC_VEC float
#define KILN_NHWC_LOAD(p) (*(p))
#define KILN_NHWC_STORE(p, v) (*(p) = (v))
#define KILN_NHWC_SET1(f) (f)
#define KILN_NHWC_FMA(a, b, c) ((a) * (b) + (c))
#define KILN_NHWC_ADD(a, b) ((a) + (b))
#define KILN_NHWC_MUL(a, b) ((a) * (b))
#define KILN_NHWC_MAX(a, b) ((a) != (a) ? (a) : ((b) > (a) || (b) != (b) ? (b) : (a)))
#define KILN_NHWC_ACTIVATE(v, count, t)
#define KILN_NHWC_HAS_ACTIVATE 0
#include "nhwc_body.h"

#if defined(__x86_64__)
// max(a, b) with a NaN in either operand winning (vmaxps alone returns its second operand).
KILN_TARGET_AVX2 static inline __m256 kiln_nhwc_max256(__m256 a, __m256 b) {
    return _mm256_blendv_ps(_mm256_max_ps(b, a), b, _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
}
KILN_TARGET_AVX512 static inline __m512 kiln_nhwc_max512(__m512 a, __m512 b) {
    return _mm512_mask_mov_ps(_mm512_max_ps(b, a), _mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q), b);
}

#define KILN_NHWC_TARGET KILN_TARGET_AVX2
#define KILN_NHWC_NAME(x) x##__avx2
#define KILN_NHWC_LANES 8
#define KILN_NHWC_VEC __m256
#define KILN_NHWC_LOAD(p) _mm256_loadu_ps(p)
#define KILN_NHWC_STORE(p, v) _mm256_storeu_ps(p, v)
#define KILN_NHWC_SET1(f) _mm256_set1_ps(f)
#define KILN_NHWC_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define KILN_NHWC_ADD(a, b) _mm256_add_ps(a, b)
#define KILN_NHWC_MUL(a, b) _mm256_mul_ps(a, b)
#define KILN_NHWC_MAX(a, b) kiln_nhwc_max256(a, b)
#define KILN_NHWC_ACTIVATE(v, count, t) kiln_activate256(v, count, t)
#define KILN_NHWC_HAS_ACTIVATE 1
#include "nhwc_body.h"

#define KILN_NHWC_TARGET KILN_TARGET_AVX512
#define KILN_NHWC_NAME(x) x##__avx512
#define KILN_NHWC_LANES 16
#define KILN_NHWC_VEC __m512
#define KILN_NHWC_LOAD(p) _mm512_loadu_ps(p)
#define KILN_NHWC_STORE(p, v) _mm512_storeu_ps(p, v)
#define KILN_NHWC_SET1(f) _mm512_set1_ps(f)
#define KILN_NHWC_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define KILN_NHWC_ADD(a, b) _mm512_add_ps(a, b)
#define KILN_NHWC_MUL(a, b) _mm512_mul_ps(a, b)
#define KILN_NHWC_MAX(a, b) kiln_nhwc_max512(a, b)
#define KILN_NHWC_ACTIVATE(v, count, t) kiln_activate512(v, count, t)
#define KILN_NHWC_HAS_ACTIVATE 1
#include "nhwc_body.h"
#endif
