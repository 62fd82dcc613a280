// Gate updates of LSTM and GRU cells (default activations: sigmoid for gates, tanh for the
// candidate and output). The matrix products come from the GEMM; these fuse the rest.
#include "kiln_kernels.h"

#include "kiln_math.h"

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
