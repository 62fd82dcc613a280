// Gate updates of LSTM and GRU cells (default activations: sigmoid for gates, tanh for the
// candidate and output). The matrix products come from the GEMM; these fuse the rest.
#include "kiln_kernels.h"

#include "kiln_math.h"

static inline __attribute__((always_inline)) float kiln_tanh_exact(float x) { return kiln_tanh(x); }

void kiln_f32_lstm_gates__scalar(size_t hidden, const float *xw, const float *hr, const float *peep, float *c, float *h) {
    // xw, hr: [4 * hidden] pre-activations in gate order i, o, f, c (biases already added to xw).
    for (size_t j = 0; j < hidden; j++) {
        const float pi = peep ? peep[j] : 0.0f, po = peep ? peep[hidden + j] : 0.0f, pf = peep ? peep[2 * hidden + j] : 0.0f;
        const float i = kiln_sigmoid(xw[j] + hr[j] + pi * c[j]);
        const float f = kiln_sigmoid(xw[2 * hidden + j] + hr[2 * hidden + j] + pf * c[j]);
        const float g = kiln_tanh_exact(xw[3 * hidden + j] + hr[3 * hidden + j]);
        c[j] = f * c[j] + i * g;
        const float o = kiln_sigmoid(xw[hidden + j] + hr[hidden + j] + po * c[j]);
        h[j] = o * kiln_tanh_exact(c[j]);
    }
}

void kiln_f32_gru_reset__scalar(size_t hidden, const float *xw, const float *hr, const float *h, float *rh) {
    for (size_t j = 0; j < hidden; j++) rh[j] = kiln_sigmoid(xw[hidden + j] + hr[hidden + j]) * h[j];
}

void kiln_f32_gru_gates__scalar(size_t hidden, int linear_before_reset, const float *xw, const float *hr, float *h) {
    for (size_t j = 0; j < hidden; j++) {
        const float z = kiln_sigmoid(xw[j] + hr[j]);
        float pre = xw[2 * hidden + j];
        if (linear_before_reset) pre += kiln_sigmoid(xw[hidden + j] + hr[hidden + j]) * hr[2 * hidden + j];
        else pre += hr[2 * hidden + j];
        const float cand = kiln_tanh_exact(pre);
        h[j] = (1.0f - z) * cand + z * h[j];
    }
}
