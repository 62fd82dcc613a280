// Elementwise maps, softmax, layer norm, pooling, depthwise convolution and layout
// helpers: scalar C written so the compiler vectorizes the inner loops.
#include "kiln_kernels.h"

#include <math.h>
#include <string.h>

// Vectorizable approximations (inlined into each ISA variant): exp with range reduction
// and a degree-6 polynomial (relative error ~2e-7), erf after Abramowitz & Stegun 7.1.26
// (absolute error <= 1.5e-7), tanh and sigmoid from exp.
static inline __attribute__((always_inline)) float kiln_exp(float x) {
    x = x < -87.3f ? -87.3f : (x > 88.7f ? 88.7f : x);
    const float n = __builtin_floorf(x * 1.44269504088896341f + 0.5f);
    const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    __builtin_memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

static inline __attribute__((always_inline)) float kiln_erf(float x) {
    const float ax = __builtin_fabsf(x);
    const float t = 1.0f / (1.0f + 0.3275911f * ax);
    const float poly = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
    const float y = 1.0f - poly * kiln_exp(-ax * ax);
    return x < 0 ? -y : y;
}

static inline __attribute__((always_inline)) float kiln_tanh(float x) {
    const float e = kiln_exp(-2.0f * __builtin_fabsf(x));
    const float y = (1.0f - e) / (1.0f + e);
    return x < 0 ? -y : y;
}

static inline __attribute__((always_inline)) float kiln_sigmoid(float x) { return 1.0f / (1.0f + kiln_exp(-x)); }

static inline __attribute__((always_inline)) float kiln_gelu(float x) {
    return 0.5f * x * (1.0f + kiln_erf(x * 0.70710678118654752f));
}

static inline __attribute__((always_inline)) void kiln_unary_body(int op, size_t n, const float *x, float *y, float alpha,
                                                                  float beta) {
    switch (op) {
    case KILN_UNARY_RELU: for (size_t i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : (x[i] != x[i] ? x[i] : 0.0f); return;
    case KILN_UNARY_HARD_SWISH:
        for (size_t i = 0; i < n; i++) y[i] = x[i] * __builtin_fmaxf(0.0f, __builtin_fminf(1.0f, x[i] / 6.0f + 0.5f));
        return;
    case KILN_UNARY_HARD_SIGMOID:
        for (size_t i = 0; i < n; i++) y[i] = __builtin_fmaxf(0.0f, __builtin_fminf(1.0f, alpha * x[i] + beta));
        return;
    case KILN_UNARY_GELU: for (size_t i = 0; i < n; i++) y[i] = kiln_gelu(x[i]); return;
    case KILN_UNARY_GELU_TANH:
        for (size_t i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + kiln_tanh(0.7978845608028654f * (x[i] + 0.044715f * x[i] * x[i] * x[i])));
        return;
    case KILN_UNARY_CLIP: for (size_t i = 0; i < n; i++) y[i] = x[i] < alpha ? alpha : (x[i] > beta ? beta : x[i]); return;
    case KILN_UNARY_SIGMOID: for (size_t i = 0; i < n; i++) y[i] = kiln_sigmoid(x[i]); return;
    case KILN_UNARY_TANH: for (size_t i = 0; i < n; i++) y[i] = kiln_tanh(x[i]); return;
    case KILN_UNARY_EXP: for (size_t i = 0; i < n; i++) y[i] = x[i] > 88.7f ? expf(x[i]) : kiln_exp(x[i]); return;
    case KILN_UNARY_LOG: for (size_t i = 0; i < n; i++) y[i] = logf(x[i]); return;
    case KILN_UNARY_ERF: for (size_t i = 0; i < n; i++) y[i] = kiln_erf(x[i]); return;
    case KILN_UNARY_SQRT: for (size_t i = 0; i < n; i++) y[i] = __builtin_sqrtf(x[i]); return;
    case KILN_UNARY_RECIPROCAL: for (size_t i = 0; i < n; i++) y[i] = 1.0f / x[i]; return;
    case KILN_UNARY_NEG: for (size_t i = 0; i < n; i++) y[i] = -x[i]; return;
    case KILN_UNARY_ABS: for (size_t i = 0; i < n; i++) y[i] = __builtin_fabsf(x[i]); return;
    default: for (size_t i = 0; i < n; i++) y[i] = x[i]; return;
    }
}

void kiln_f32_unary__scalar(int op, size_t n, const float *x, float *y, float alpha, float beta) {
    kiln_unary_body(op, n, x, y, alpha, beta);
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma")))
void kiln_f32_unary__avx2(int op, size_t n, const float *x, float *y, float alpha, float beta) {
    kiln_unary_body(op, n, x, y, alpha, beta);
}
#endif

/// Maps an epilogue activation to the unary op with the same formula.
static inline int kiln_epilogue_unary(int activation) {
    switch (activation) {
    case KILN_ACT_RELU: return KILN_UNARY_RELU;
    case KILN_ACT_HARD_SWISH: return KILN_UNARY_HARD_SWISH;
    case KILN_ACT_HARD_SIGMOID: return KILN_UNARY_HARD_SIGMOID;
    case KILN_ACT_GELU: return KILN_UNARY_GELU;
    case KILN_ACT_CLIP: return KILN_UNARY_CLIP;
    case KILN_ACT_SIGMOID: return KILN_UNARY_SIGMOID;
    case KILN_ACT_TANH: return KILN_UNARY_TANH;
    default: return 0;
    }
}

void kiln_f32_epilogue(size_t m, size_t n, float *c, size_t ldc, const float *bias, const kiln_epilogue *e) {
    if (!e) return;
    const int op = kiln_epilogue_unary(e->activation);
#if defined(__x86_64__)
    const int avx2 = (kiln_cpu_features() & KILN_CPU_X86_V3) != 0;
#endif
    for (size_t i = 0; i < m; i++) {
        float *row = c + i * ldc;
        if (bias)
            for (size_t j = 0; j < n; j++) row[j] += bias[j];
        if (!op) continue;
#if defined(__x86_64__)
        if (avx2) {
            kiln_f32_unary__avx2(op, n, row, row, e->alpha, e->beta);
            continue;
        }
#endif
        kiln_unary_body(op, n, row, row, e->alpha, e->beta);
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

static inline __attribute__((always_inline)) void kiln_dwconv_body(
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
        if (e && e->activation != KILN_ACT_NONE) kiln_f32_epilogue(1, oh * ow, yc, oh * ow, NULL, e);
    }
}

void kiln_f32_dwconv2d__scalar(size_t channels, size_t h, size_t w, const float *x, size_t kh, size_t kw,
                               const float *weight, size_t sh, size_t sw, size_t dh, size_t dw, size_t pt, size_t pl,
                               size_t oh, size_t ow, float *y, const kiln_epilogue *e) {
    kiln_dwconv_body(channels, h, w, x, kh, kw, weight, sh, sw, dh, dw, pt, pl, oh, ow, y, e);
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma")))
void kiln_f32_dwconv2d__avx2(size_t channels, size_t h, size_t w, const float *x, size_t kh, size_t kw,
                             const float *weight, size_t sh, size_t sw, size_t dh, size_t dw, size_t pt, size_t pl,
                             size_t oh, size_t ow, float *y, const kiln_epilogue *e) {
    kiln_dwconv_body(channels, h, w, x, kh, kw, weight, sh, sw, dh, dw, pt, pl, oh, ow, y, e);
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
