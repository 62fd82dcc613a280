// Gate updates of LSTM and GRU cells (default activations: sigmoid for gates, tanh for the
// candidate and output). The matrix products come from the GEMM; these fuse the rest.
#include "kiln_kernels.h"

#include <math.h>

#include "kiln_math.h"

// Dynamic uint8 quantization, written so the compiler vectorizes it for any target (no libm
// calls in the loops): the range in eight running lanes, and rounding by the 1.5 · 2^23 trick.

// The range of x widened to hold 0; NaN is skipped.
static inline void kiln_quant_range(size_t n, const float *x, float *lo_out, float *hi_out) {
    float lo[8] = {0}, hi[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        for (int j = 0; j < 8; j++) {
            const float v = x[i + j];
            lo[j] = v < lo[j] ? v : lo[j];
            hi[j] = v > hi[j] ? v : hi[j];
        }
    }
    for (; i < n; i++) {
        lo[0] = x[i] < lo[0] ? x[i] : lo[0];
        hi[0] = x[i] > hi[0] ? x[i] : hi[0];
    }
    float l = 0.0f, h = 0.0f;
    for (int j = 0; j < 8; j++) {
        l = lo[j] < l ? lo[j] : l;
        h = hi[j] > h ? hi[j] : h;
    }
    *lo_out = l;
    *hi_out = h;
}

// clamp(round(x / s) + z, 0, 255), rounding half to even; NaN gives 0. x / s is a division, not a
// multiplication by the reciprocal: its rounding is the contract. It is limited to ±512 first
// (the result is clamped to [0, 255] anyway, z ≤ 255), where adding and taking away 1.5 · 2^23
// rounds it exactly.
static inline float kiln_quantize_one(float x, float s, float z) {
    float t = x / s;
    t = t > -512.0f ? t : -512.0f;
    t = t < 512.0f ? t : 512.0f;
    t = (t + 12582912.0f) - 12582912.0f;
    t += z;
    t = t > 0.0f ? t : 0.0f;
    return t < 255.0f ? t : 255.0f;
}

float kiln_f32_quantize_u8_centered__scalar(size_t n, const float *x, float *out) {
    float lo, hi;
    kiln_quant_range(n, x, &lo, &hi);
    const float scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
    const float zero = nearbyintf(fmaxf(0.0f, fminf(255.0f, 0.0f - lo / scale)));
    for (size_t i = 0; i < n; i++) out[i] = kiln_quantize_one(x[i], scale, zero) - zero;
    return scale;
}

void kiln_f32_dynamic_quantize_u8__scalar(size_t n, const float *x, uint8_t *y, float *scale, uint8_t *zero) {
    float lo, hi;
    kiln_quant_range(n, x, &lo, &hi);
    const float s = (hi - lo) / 255.0f;
    const float z = s == 0.0f ? 0.0f : nearbyintf(fmaxf(0.0f, fminf(255.0f, 0.0f - lo / s)));
    *scale = s;
    *zero = (uint8_t)z;
    if (s == 0.0f) {
        for (size_t i = 0; i < n; i++) y[i] = 0;
        return;
    }
    for (size_t i = 0; i < n; i++) y[i] = (uint8_t)kiln_quantize_one(x[i], s, z);
}

void kiln_f32_scale_columns__scalar(size_t m, size_t n, float *c, float s, const float *scale, const float *bias) {
    for (size_t i = 0; i < m; i++) {
        float *row = c + i * n;
        if (bias) {
            for (size_t j = 0; j < n; j++) row[j] = row[j] * (s * scale[j]) + bias[j];
        } else {
            for (size_t j = 0; j < n; j++) row[j] *= s * scale[j];
        }
    }
}

static inline __attribute__((always_inline)) float kiln_tanh_exact(float x) { return kiln_tanh(x); }

// The LSTM cell update, one body for every ISA (the vector forms by the compiler's vectorizer under
// each target; the steps are the scalar ones, so only FMA contraction may differ in the last bit).
static inline __attribute__((always_inline)) void kiln_lstm_gates_body(size_t hidden, const float *xw, const float *hr,
                                                                       const float *peep, float *c, float *h) {
    // xw, hr: [4 * hidden] pre-activations in gate order i, o, f, c (biases already added to xw).
    if (peep) {
        for (size_t j = 0; j < hidden; j++) {
            const float pi = peep[j], po = peep[hidden + j], pf = peep[2 * hidden + j];
            const float i = kiln_sigmoid(xw[j] + hr[j] + pi * c[j]);
            const float f = kiln_sigmoid(xw[2 * hidden + j] + hr[2 * hidden + j] + pf * c[j]);
            const float g = kiln_tanh_exact(xw[3 * hidden + j] + hr[3 * hidden + j]);
            c[j] = f * c[j] + i * g;
            const float o = kiln_sigmoid(xw[hidden + j] + hr[hidden + j] + po * c[j]);
            h[j] = o * kiln_tanh_exact(c[j]);
        }
        return;
    }
#pragma clang loop vectorize(assume_safety)
    for (size_t j = 0; j < hidden; j++) {
        const float i = kiln_sigmoid(xw[j] + hr[j]);
        const float f = kiln_sigmoid(xw[2 * hidden + j] + hr[2 * hidden + j]);
        const float g = kiln_tanh_exact(xw[3 * hidden + j] + hr[3 * hidden + j]);
        const float cj = f * c[j] + i * g;
        c[j] = cj;
        h[j] = kiln_sigmoid(xw[hidden + j] + hr[hidden + j]) * kiln_tanh_exact(cj);
    }
}

void kiln_f32_lstm_gates__scalar(size_t hidden, const float *xw, const float *hr, const float *peep, float *c, float *h) {
    kiln_lstm_gates_body(hidden, xw, hr, peep, c, h);
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) void kiln_f32_lstm_gates__avx2(size_t hidden, const float *xw, const float *hr, const float *peep,
                                                                   float *c, float *h) {
    kiln_lstm_gates_body(hidden, xw, hr, peep, c, h);
}
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma"))) void kiln_f32_lstm_gates__avx512(size_t hidden, const float *xw,
                                                                                                 const float *hr, const float *peep,
                                                                                                 float *c, float *h) {
    kiln_lstm_gates_body(hidden, xw, hr, peep, c, h);
}
#endif

// The GRU reset product and cell update, one body for every ISA as the LSTM's.
static inline __attribute__((always_inline)) void kiln_gru_reset_body(size_t hidden, const float *xw, const float *hr, const float *h,
                                                                      float *rh) {
#pragma clang loop vectorize(assume_safety)
    for (size_t j = 0; j < hidden; j++) rh[j] = kiln_sigmoid(xw[hidden + j] + hr[hidden + j]) * h[j];
}

static inline __attribute__((always_inline)) void kiln_gru_gates_body(size_t hidden, int linear_before_reset, const float *xw,
                                                                      const float *hr, float *h) {
    // xw, hr: [3 * hidden] pre-activations in gate order z, r, h (biases already added).
    if (linear_before_reset) {
#pragma clang loop vectorize(assume_safety)
        for (size_t j = 0; j < hidden; j++) {
            const float z = kiln_sigmoid(xw[j] + hr[j]);
            const float cand = kiln_tanh_exact(xw[2 * hidden + j] + kiln_sigmoid(xw[hidden + j] + hr[hidden + j]) * hr[2 * hidden + j]);
            h[j] = (1.0f - z) * cand + z * h[j];
        }
        return;
    }
#pragma clang loop vectorize(assume_safety)
    for (size_t j = 0; j < hidden; j++) {
        const float z = kiln_sigmoid(xw[j] + hr[j]);
        const float cand = kiln_tanh_exact(xw[2 * hidden + j] + hr[2 * hidden + j]);
        h[j] = (1.0f - z) * cand + z * h[j];
    }
}

void kiln_f32_gru_reset__scalar(size_t hidden, const float *xw, const float *hr, const float *h, float *rh) {
    kiln_gru_reset_body(hidden, xw, hr, h, rh);
}

void kiln_f32_gru_gates__scalar(size_t hidden, int linear_before_reset, const float *xw, const float *hr, float *h) {
    kiln_gru_gates_body(hidden, linear_before_reset, xw, hr, h);
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) void kiln_f32_gru_reset__avx2(size_t hidden, const float *xw, const float *hr, const float *h,
                                                                  float *rh) {
    kiln_gru_reset_body(hidden, xw, hr, h, rh);
}
__attribute__((target("avx2,fma"))) void kiln_f32_gru_gates__avx2(size_t hidden, int linear_before_reset, const float *xw,
                                                                  const float *hr, float *h) {
    kiln_gru_gates_body(hidden, linear_before_reset, xw, hr, h);
}
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma"))) void kiln_f32_gru_reset__avx512(size_t hidden, const float *xw,
                                                                                                const float *hr, const float *h,
                                                                                                float *rh) {
    kiln_gru_reset_body(hidden, xw, hr, h, rh);
}
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma"))) void kiln_f32_gru_gates__avx512(size_t hidden, int linear_before_reset,
                                                                                                const float *xw, const float *hr,
                                                                                                float *h) {
    kiln_gru_gates_body(hidden, linear_before_reset, xw, hr, h);
}
#endif
