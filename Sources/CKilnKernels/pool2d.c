// 2-D max and average pooling over [channels, h, w] images, built once per ISA. Each output
// row is split into the columns whose window lies inside the image (a straight loop the
// compiler vectorizes) and the border columns (bounds-checked).
#include "kiln_kernels.h"

#include <math.h>

static inline __attribute__((always_inline)) void kiln_pool2d_body(int max, int count_pad, size_t channels, size_t h, size_t w,
                                                                   const float *x, size_t kh, size_t kw, size_t sh, size_t sw,
                                                                   size_t dh, size_t dw, size_t pt, size_t pl, size_t pb,
                                                                   size_t pr, size_t oh, size_t ow, float *y) {
    for (size_t c = 0; c < channels; c++) {
        const float *xc = x + c * h * w;
        float *yc = y + c * oh * ow;
        for (size_t oy = 0; oy < oh; oy++) {
            float *yr = yc + oy * ow;
            const long y0 = (long)(oy * sh) - (long)pt;
            size_t rows_inside = 0;
            for (size_t ky = 0; ky < kh; ky++) { const long iy = y0 + (long)(ky * dh); rows_inside += iy >= 0 && iy < (long)h; }
            for (size_t ox = 0; ox < ow; ox++) yr[ox] = max ? -INFINITY : 0.0f;
            for (size_t ky = 0; ky < kh; ky++) {
                const long iy = y0 + (long)(ky * dh);
                if (iy < 0 || iy >= (long)h) continue;
                const float *xr = xc + (size_t)iy * w;
                for (size_t kx = 0; kx < kw; kx++) {
                    const long off = (long)(kx * dw) - (long)pl;
                    size_t lo = 0, hi = ow;
                    if (off < 0) lo = ((size_t)(-off) + sw - 1) / sw;
                    const long last = (long)w - 1 - off;
                    if (last < 0) continue;
                    const size_t bound = (size_t)last / sw + 1;
                    if (bound < hi) hi = bound;
                    if (max) {
                        if (sw == 1) { const float *xs = xr + off; for (size_t ox = lo; ox < hi; ox++) yr[ox] = (xs[ox] > yr[ox] || xs[ox] != xs[ox]) ? xs[ox] : yr[ox]; }
                        else for (size_t ox = lo; ox < hi; ox++) { const float v = xr[(long)(ox * sw) + off]; yr[ox] = (v > yr[ox] || v != v) ? v : yr[ox]; }
                    } else {
                        if (sw == 1) { const float *xs = xr + off; for (size_t ox = lo; ox < hi; ox++) yr[ox] += xs[ox]; }
                        else for (size_t ox = lo; ox < hi; ox++) yr[ox] += xr[(long)(ox * sw) + off];
                    }
                }
            }
            if (max) continue;
            for (size_t ox = 0; ox < ow; ox++) {
                size_t cols_inside;
                if (count_pad) {
                    // Padding counts, but not the part of the window past the padded input's end.
                    const long x0 = (long)(ox * sw) - (long)pl;
                    size_t cy = 0, cx = 0;
                    for (size_t ky = 0; ky < kh; ky++) { const long iy = y0 + (long)(ky * dh); cy += iy < (long)(h + pb); }
                    for (size_t kx = 0; kx < kw; kx++) { const long ix = x0 + (long)(kx * dw); cx += ix < (long)(w + pr); }
                    cols_inside = cy * cx;
                } else {
                    const long x0 = (long)(ox * sw) - (long)pl;
                    size_t cx = 0;
                    for (size_t kx = 0; kx < kw; kx++) { const long ix = x0 + (long)(kx * dw); cx += ix >= 0 && ix < (long)w; }
                    cols_inside = cx * rows_inside;
                }
                yr[ox] = cols_inside ? yr[ox] / (float)cols_inside : 0.0f;
            }
        }
    }
}

void kiln_f32_pool2d__scalar(int max, int count_pad, size_t channels, size_t h, size_t w, const float *x, size_t kh, size_t kw,
                             size_t sh, size_t sw, size_t dh, size_t dw, size_t pt, size_t pl, size_t pb, size_t pr, size_t oh, size_t ow, float *y) {
    kiln_pool2d_body(max, count_pad, channels, h, w, x, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, oh, ow, y);
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma")))
void kiln_f32_pool2d__avx2(int max, int count_pad, size_t channels, size_t h, size_t w, const float *x, size_t kh, size_t kw,
                           size_t sh, size_t sw, size_t dh, size_t dw, size_t pt, size_t pl, size_t pb, size_t pr, size_t oh, size_t ow, float *y) {
    kiln_pool2d_body(max, count_pad, channels, h, w, x, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, oh, ow, y);
}
#endif
