// Spatial kernels besides convolution: separable resize along one axis and col2im (the
// scatter half of a transposed convolution).
#include "kiln_kernels.h"

#include <string.h>

void kiln_f32_resize_axis__scalar(size_t outer, size_t n, size_t inner, const float *x, size_t m, size_t taps,
                                  const int32_t *index, const float *weight, float *y, size_t row_begin, size_t row_end) {
    if (row_end > outer * m) row_end = outer * m;
    // Row r is output position i of line o; both advance with r (no division per row).
    size_t o = row_begin / m, i = row_begin % m;
    for (size_t r = row_begin; r < row_end; r++, i = i + 1 == m ? 0 : i + 1, o += i == 0) {
        const float *xo = x + o * n * inner;
        float *dst = y + r * inner;
        if (taps == 1 && weight[i] == 1.0f) {
            if (inner == 1) dst[0] = xo[index[i]];
            else memcpy(dst, xo + (size_t)index[i] * inner, inner * sizeof(float));
            continue;
        }
        if (inner == 1) {
            // The last axis: one sum per output, in the taps' order as below.
            float s = 0.0f;
            for (size_t t = 0; t < taps; t++) {
                const float w = weight[i * taps + t];
                if (w != 0.0f) s += w * xo[index[i * taps + t]];
            }
            dst[0] = s;
            continue;
        }
        for (size_t k = 0; k < inner; k++) dst[k] = 0.0f;
        for (size_t t = 0; t < taps; t++) {
            const float w = weight[i * taps + t];
            if (w == 0.0f) continue;
            const float *src = xo + (size_t)index[i * taps + t] * inner;
            for (size_t k = 0; k < inner; k++) dst[k] += w * src[k];
        }
    }
}

void kiln_f32_col2im__scalar(size_t channels, size_t h, size_t w, size_t kh, size_t kw, size_t sh, size_t sw, size_t dh,
                             size_t dw, size_t pt, size_t pl, size_t oh, size_t ow, const float *cols, float *y) {
    // cols: rows (c, ky, kx), one column per input pixel (h × w); y: [channels, oh, ow], accumulated.
    for (size_t c = 0; c < channels; c++) {
        float *yc = y + c * oh * ow;
        for (size_t ky = 0; ky < kh; ky++) {
            for (size_t kx = 0; kx < kw; kx++) {
                const float *row = cols + ((c * kh + ky) * kw + kx) * h * w;
                for (size_t iy = 0; iy < h; iy++) {
                    const long oy = (long)(iy * sh + ky * dh) - (long)pt;
                    if (oy < 0 || oy >= (long)oh) continue;
                    float *yr = yc + (size_t)oy * ow;
                    const float *src = row + iy * w;
                    // The pixels whose ox = ix·sw + off falls inside the row, then no test per pixel.
                    const long off = (long)(kx * dw) - (long)pl, step = (long)sw;
                    const long lo = off >= 0 ? 0 : (-off + step - 1) / step;
                    long hi = (long)ow - off <= 0 ? 0 : ((long)ow - off + step - 1) / step;
                    if (hi > (long)w) hi = (long)w;
                    if (step == 1) {
                        for (long ix = lo; ix < hi; ix++) yr[ix + off] += src[ix];
                    } else {
                        for (long ix = lo; ix < hi; ix++) yr[ix * step + off] += src[ix];
                    }
                }
            }
        }
    }
}
