// Elementwise maps, softmax, layer norm, pooling, depthwise convolution and layout
// helpers: scalar C written so the compiler vectorizes the inner loops.
#include "kiln_kernels.h"

#include <math.h>
#include <string.h>

static inline float kiln_unary(int op, float x, float alpha, float beta) {
    switch (op) {
    case KILN_UNARY_RELU: return x > 0 ? x : (x != x ? x : 0.0f);
    case KILN_UNARY_HARD_SWISH: return x * fmaxf(0.0f, fminf(1.0f, x / 6.0f + 0.5f));
    case KILN_UNARY_HARD_SIGMOID: return fmaxf(0.0f, fminf(1.0f, alpha * x + beta));
    case KILN_UNARY_GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case KILN_UNARY_GELU_TANH:
        return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    case KILN_UNARY_CLIP: return x < alpha ? alpha : (x > beta ? beta : x);
    case KILN_UNARY_SIGMOID: return x >= 0 ? 1.0f / (1.0f + expf(-x)) : expf(x) / (1.0f + expf(x));
    case KILN_UNARY_TANH: return tanhf(x);
    case KILN_UNARY_EXP: return expf(x);
    case KILN_UNARY_LOG: return logf(x);
    case KILN_UNARY_ERF: return erff(x);
    case KILN_UNARY_SQRT: return sqrtf(x);
    case KILN_UNARY_RECIPROCAL: return 1.0f / x;
    case KILN_UNARY_NEG: return -x;
    case KILN_UNARY_ABS: return fabsf(x);
    default: return x;
    }
}

void kiln_f32_unary__scalar(int op, size_t n, const float *x, float *y, float alpha, float beta) {
    switch (op) {
    case KILN_UNARY_RELU:
        for (size_t i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : (x[i] != x[i] ? x[i] : 0.0f);
        return;
    case KILN_UNARY_HARD_SWISH:
        for (size_t i = 0; i < n; i++) y[i] = x[i] * fmaxf(0.0f, fminf(1.0f, x[i] / 6.0f + 0.5f));
        return;
    default:
        for (size_t i = 0; i < n; i++) y[i] = kiln_unary(op, x[i], alpha, beta);
    }
}

#define KILN_BINARY_LOOP(expr) \
    for (size_t o = 0; o < outer; o++) { \
        const float *xr = x + o * xo, *zr = z + o * zo; \
        float *yr = y + o * inner; \
        if (xi == 1 && zi == 1) { for (size_t i = 0; i < inner; i++) { const float a = xr[i], b = zr[i]; yr[i] = (expr); } } \
        else if (xi == 1 && zi == 0) { const float b = zr[0]; for (size_t i = 0; i < inner; i++) { const float a = xr[i]; yr[i] = (expr); } } \
        else if (xi == 0 && zi == 1) { const float a = xr[0]; for (size_t i = 0; i < inner; i++) { const float b = zr[i]; yr[i] = (expr); } } \
        else { for (size_t i = 0; i < inner; i++) { const float a = xr[i * xi], b = zr[i * zi]; yr[i] = (expr); } } \
    }

void kiln_f32_binary__scalar(int op, size_t outer, size_t inner, const float *x, size_t xo, size_t xi,
                             const float *z, size_t zo, size_t zi, float *y) {
    switch (op) {
    case KILN_BINARY_ADD: KILN_BINARY_LOOP(a + b) return;
    case KILN_BINARY_SUB: KILN_BINARY_LOOP(a - b) return;
    case KILN_BINARY_MUL: KILN_BINARY_LOOP(a * b) return;
    case KILN_BINARY_DIV: KILN_BINARY_LOOP(a / b) return;
    case KILN_BINARY_POW: KILN_BINARY_LOOP(powf(a, b)) return;
    default: return;
    }
}

void kiln_f32_softmax__scalar(size_t rows, size_t n, const float *x, float *y) {
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        float m = -INFINITY;
        for (size_t i = 0; i < n; i++) m = xr[i] > m ? xr[i] : m;
        float sum = 0;
        for (size_t i = 0; i < n; i++) {
            yr[i] = expf(xr[i] - m);
            sum += yr[i];
        }
        const float inv = 1.0f / sum;
        for (size_t i = 0; i < n; i++) yr[i] *= inv;
    }
}

void kiln_f32_layer_norm__scalar(size_t rows, size_t n, const float *x, const float *gamma, const float *beta,
                                 float epsilon, float *y) {
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        double sum = 0;
        for (size_t i = 0; i < n; i++) sum += xr[i];
        const float mean = (float)(sum / (double)n);
        double var = 0;
        for (size_t i = 0; i < n; i++) {
            const float d = xr[i] - mean;
            var += (double)d * d;
        }
        const float inv = 1.0f / sqrtf((float)(var / (double)n) + epsilon);
        for (size_t i = 0; i < n; i++) {
            const float v = (xr[i] - mean) * inv * gamma[i];
            yr[i] = beta ? v + beta[i] : v;
        }
    }
}

void kiln_f32_global_average_pool__scalar(size_t channels, size_t n, const float *x, float *y) {
    for (size_t c = 0; c < channels; c++) {
        double sum = 0;
        for (size_t i = 0; i < n; i++) sum += x[c * n + i];
        y[c] = (float)(sum / (double)n);
    }
}

void kiln_f32_dwconv2d__scalar(size_t channels, size_t h, size_t w, const float *x, size_t kh, size_t kw,
                               const float *weight, size_t sh, size_t sw, size_t dh, size_t dw, size_t pt, size_t pl,
                               size_t oh, size_t ow, float *y, const kiln_epilogue *e) {
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
        if (e && e->activation != KILN_ACT_NONE) kiln_f32_epilogue(1, oh * ow, yc, oh * ow, NULL, e);
    }
}

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
