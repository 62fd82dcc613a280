// The unary functions of `KILN_UNARY_OPS` as one inlinable body, so every ISA variant (and
// the GEMM drivers' epilogues) compiles it with its own instruction set. Internal to CKilnKernels.
#ifndef KILN_UNARY_H
#define KILN_UNARY_H

#include <math.h>

#include "kiln_kernels.h"
#include "kiln_math.h"

// Tile epilogues run over one tile row (16 or 32 floats): those loops vectorize without
// interleaving so such short rows run as whole vectors instead of falling to the scalar remainder.
// Elementwise loops may run in place (y == x, as shape plans arrange): the vectorizer is told
// each iteration touches only its own element, instead of falling back to scalar on overlap.
#if defined(__clang__)
// Loops over library calls (logf, powf, fmodf) stay scalar; that is expected, not worth a warning.
#pragma clang diagnostic ignored "-Wpass-failed"
#define KILN_SHORT_LOOP _Pragma("clang loop vectorize(assume_safety) interleave_count(1)")
#define KILN_ELEMENTWISE_LOOP _Pragma("clang loop vectorize(assume_safety)")
#else
#define KILN_SHORT_LOOP
#define KILN_ELEMENTWISE_LOOP
#endif

static inline __attribute__((always_inline)) void kiln_unary_body(int op, size_t n, const float *x, float *y, float alpha,
                                                                  float beta) {
    switch (op) {
    case KILN_UNARY_RELU: KILN_ELEMENTWISE_LOOP for (size_t i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : (x[i] != x[i] ? x[i] : 0.0f); return;
    case KILN_UNARY_HARD_SWISH:
        KILN_ELEMENTWISE_LOOP for (size_t i = 0; i < n; i++) y[i] = x[i] * __builtin_fmaxf(0.0f, __builtin_fminf(1.0f, x[i] * (1.0f / 6.0f) + 0.5f));
        return;
    case KILN_UNARY_HARD_SIGMOID:
        KILN_ELEMENTWISE_LOOP for (size_t i = 0; i < n; i++) y[i] = __builtin_fmaxf(0.0f, __builtin_fminf(1.0f, alpha * x[i] + beta));
        return;
    case KILN_UNARY_GELU: KILN_ELEMENTWISE_LOOP for (size_t i = 0; i < n; i++) y[i] = kiln_gelu(x[i]); return;
    case KILN_UNARY_GELU_TANH:
        KILN_ELEMENTWISE_LOOP for (size_t i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + kiln_tanh(0.7978845608028654f * (x[i] + 0.044715f * x[i] * x[i] * x[i])));
        return;
    case KILN_UNARY_CLIP: KILN_ELEMENTWISE_LOOP for (size_t i = 0; i < n; i++) y[i] = x[i] < alpha ? alpha : (x[i] > beta ? beta : x[i]); return;
    case KILN_UNARY_SIGMOID: KILN_ELEMENTWISE_LOOP for (size_t i = 0; i < n; i++) y[i] = kiln_sigmoid(x[i]); return;
    case KILN_UNARY_TANH: KILN_ELEMENTWISE_LOOP for (size_t i = 0; i < n; i++) y[i] = kiln_tanh(x[i]); return;
    case KILN_UNARY_EXP: KILN_ELEMENTWISE_LOOP for (size_t i = 0; i < n; i++) y[i] = x[i] > 88.7f ? expf(x[i]) : kiln_exp(x[i]); return;
    case KILN_UNARY_LOG: KILN_ELEMENTWISE_LOOP for (size_t i = 0; i < n; i++) y[i] = logf(x[i]); return;
    case KILN_UNARY_ERF: KILN_ELEMENTWISE_LOOP for (size_t i = 0; i < n; i++) y[i] = kiln_erf(x[i]); return;
    case KILN_UNARY_SQRT: KILN_ELEMENTWISE_LOOP for (size_t i = 0; i < n; i++) y[i] = __builtin_sqrtf(x[i]); return;
    case KILN_UNARY_RECIPROCAL: KILN_ELEMENTWISE_LOOP for (size_t i = 0; i < n; i++) y[i] = 1.0f / x[i]; return;
    case KILN_UNARY_NEG: KILN_ELEMENTWISE_LOOP for (size_t i = 0; i < n; i++) y[i] = -x[i]; return;
    case KILN_UNARY_ABS: KILN_ELEMENTWISE_LOOP for (size_t i = 0; i < n; i++) y[i] = __builtin_fabsf(x[i]); return;
    case KILN_UNARY_LEAKY_RELU: KILN_ELEMENTWISE_LOOP for (size_t i = 0; i < n; i++) y[i] = x[i] < 0 ? alpha * x[i] : x[i]; return;
    case KILN_UNARY_FLOOR: KILN_ELEMENTWISE_LOOP for (size_t i = 0; i < n; i++) y[i] = __builtin_floorf(x[i]); return;
    case KILN_UNARY_CEIL: KILN_ELEMENTWISE_LOOP for (size_t i = 0; i < n; i++) y[i] = __builtin_ceilf(x[i]); return;
    case KILN_UNARY_ROUND: KILN_ELEMENTWISE_LOOP for (size_t i = 0; i < n; i++) y[i] = __builtin_rintf(x[i]); return;
    case KILN_UNARY_SOFTPLUS:
        KILN_ELEMENTWISE_LOOP for (size_t i = 0; i < n; i++) y[i] = x[i] > 20.0f ? x[i] : log1pf(kiln_exp(x[i]));
        return;
    default: KILN_ELEMENTWISE_LOOP for (size_t i = 0; i < n; i++) y[i] = x[i]; return;
    }
}


/// The same for one tile row (16 or 32 floats): no interleaving, so the row runs as whole vectors.
static inline __attribute__((always_inline)) void kiln_unary_body_short(int op, size_t n, const float *x, float *y, float alpha,
                                                                  float beta) {
    switch (op) {
    case KILN_UNARY_RELU: KILN_SHORT_LOOP for (size_t i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : (x[i] != x[i] ? x[i] : 0.0f); return;
    case KILN_UNARY_HARD_SWISH:
        KILN_SHORT_LOOP for (size_t i = 0; i < n; i++) y[i] = x[i] * __builtin_fmaxf(0.0f, __builtin_fminf(1.0f, x[i] * (1.0f / 6.0f) + 0.5f));
        return;
    case KILN_UNARY_HARD_SIGMOID:
        KILN_SHORT_LOOP for (size_t i = 0; i < n; i++) y[i] = __builtin_fmaxf(0.0f, __builtin_fminf(1.0f, alpha * x[i] + beta));
        return;
    case KILN_UNARY_GELU: KILN_SHORT_LOOP for (size_t i = 0; i < n; i++) y[i] = kiln_gelu(x[i]); return;
    case KILN_UNARY_GELU_TANH:
        KILN_SHORT_LOOP for (size_t i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + kiln_tanh(0.7978845608028654f * (x[i] + 0.044715f * x[i] * x[i] * x[i])));
        return;
    case KILN_UNARY_CLIP: KILN_SHORT_LOOP for (size_t i = 0; i < n; i++) y[i] = x[i] < alpha ? alpha : (x[i] > beta ? beta : x[i]); return;
    case KILN_UNARY_SIGMOID: KILN_SHORT_LOOP for (size_t i = 0; i < n; i++) y[i] = kiln_sigmoid(x[i]); return;
    case KILN_UNARY_TANH: KILN_SHORT_LOOP for (size_t i = 0; i < n; i++) y[i] = kiln_tanh(x[i]); return;
    case KILN_UNARY_EXP: KILN_SHORT_LOOP for (size_t i = 0; i < n; i++) y[i] = x[i] > 88.7f ? expf(x[i]) : kiln_exp(x[i]); return;
    case KILN_UNARY_LOG: KILN_SHORT_LOOP for (size_t i = 0; i < n; i++) y[i] = logf(x[i]); return;
    case KILN_UNARY_ERF: KILN_SHORT_LOOP for (size_t i = 0; i < n; i++) y[i] = kiln_erf(x[i]); return;
    case KILN_UNARY_SQRT: KILN_SHORT_LOOP for (size_t i = 0; i < n; i++) y[i] = __builtin_sqrtf(x[i]); return;
    case KILN_UNARY_RECIPROCAL: KILN_SHORT_LOOP for (size_t i = 0; i < n; i++) y[i] = 1.0f / x[i]; return;
    case KILN_UNARY_NEG: KILN_SHORT_LOOP for (size_t i = 0; i < n; i++) y[i] = -x[i]; return;
    case KILN_UNARY_ABS: KILN_SHORT_LOOP for (size_t i = 0; i < n; i++) y[i] = __builtin_fabsf(x[i]); return;
    case KILN_UNARY_LEAKY_RELU: KILN_SHORT_LOOP for (size_t i = 0; i < n; i++) y[i] = x[i] < 0 ? alpha * x[i] : x[i]; return;
    case KILN_UNARY_FLOOR: KILN_SHORT_LOOP for (size_t i = 0; i < n; i++) y[i] = __builtin_floorf(x[i]); return;
    case KILN_UNARY_CEIL: KILN_SHORT_LOOP for (size_t i = 0; i < n; i++) y[i] = __builtin_ceilf(x[i]); return;
    case KILN_UNARY_ROUND: KILN_SHORT_LOOP for (size_t i = 0; i < n; i++) y[i] = __builtin_rintf(x[i]); return;
    case KILN_UNARY_SOFTPLUS:
        KILN_SHORT_LOOP for (size_t i = 0; i < n; i++) y[i] = x[i] > 20.0f ? x[i] : log1pf(kiln_exp(x[i]));
        return;
    default: KILN_SHORT_LOOP for (size_t i = 0; i < n; i++) y[i] = x[i]; return;
    }
}

/// Bias (per column and/or per row) and activation over a tile, inlined into the caller's ISA.
static inline __attribute__((always_inline)) void kiln_tile_epilogue(size_t rows, size_t cols, float *c, size_t ldc,
                                                                     const float *bias, const float *row_bias,
                                                                     const kiln_epilogue *e) {
    for (size_t i = 0; i < rows; i++) {
        float *row = c + i * ldc;
        if (bias) KILN_SHORT_LOOP for (size_t j = 0; j < cols; j++) row[j] += bias[j];
        if (row_bias) { const float b = row_bias[i]; KILN_SHORT_LOOP for (size_t j = 0; j < cols; j++) row[j] += b; }
        if (e->activation) kiln_unary_body_short(e->activation, cols, row, row, e->alpha, e->beta);
    }
}

#endif
