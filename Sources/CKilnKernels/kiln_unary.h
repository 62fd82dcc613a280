// The unary functions of `KILN_UNARY_OPS` as one inlinable body, so every ISA variant (and
// the GEMM drivers' epilogues) compiles it with its own instruction set. Internal to CKilnKernels.
#ifndef KILN_UNARY_H
#define KILN_UNARY_H

#include <math.h>

#include "kiln_kernels.h"
#include "kiln_math.h"

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

// `short_rows` (a constant at each call site) picks the loop form: no interleaving for one tile
// row (16 or 32 floats), so such rows run as whole vectors instead of the scalar remainder.
#define KILN_MAP(expr) \
    do { \
        if (short_rows) { KILN_SHORT_LOOP for (size_t i = 0; i < n; i++) y[i] = (expr); } \
        else { KILN_ELEMENTWISE_LOOP for (size_t i = 0; i < n; i++) y[i] = (expr); } \
        return; \
    } while (0)

static inline __attribute__((always_inline)) void kiln_unary_apply(int op, size_t n, const float *x, float *y, float alpha,
                                                                   float beta, const int short_rows) {
    switch (op) {
    case KILN_UNARY_RELU: KILN_MAP(x[i] > 0 ? x[i] : (x[i] != x[i] ? x[i] : 0.0f));
    case KILN_UNARY_HARD_SWISH:
        KILN_MAP(x[i] * __builtin_fmaxf(0.0f, __builtin_fminf(1.0f, x[i] * (1.0f / 6.0f) + 0.5f)));
    case KILN_UNARY_HARD_SIGMOID:
        KILN_MAP(__builtin_fmaxf(0.0f, __builtin_fminf(1.0f, alpha * x[i] + beta)));
    case KILN_UNARY_GELU: KILN_MAP(kiln_gelu(x[i]));
    case KILN_UNARY_GELU_TANH:
        KILN_MAP(0.5f * x[i] * (1.0f + kiln_tanh(0.7978845608028654f * (x[i] + 0.044715f * x[i] * x[i] * x[i]))));
    /* min(max(x, lo), hi): bounds that cross give hi, as NumPy's clip; NaN stays NaN. */
    case KILN_UNARY_CLIP: KILN_MAP((x[i] < alpha ? alpha : x[i]) > beta ? beta : (x[i] < alpha ? alpha : x[i]));
    case KILN_UNARY_SIGMOID: KILN_MAP(kiln_sigmoid(x[i]));
    case KILN_UNARY_SILU: KILN_MAP(x[i] * kiln_sigmoid(x[i]));
    case KILN_UNARY_TANH: KILN_MAP(kiln_tanh(x[i]));
    case KILN_UNARY_EXP: KILN_MAP(x[i] > 88.3f ? expf(x[i]) : kiln_exp(x[i]));
    case KILN_UNARY_LOG: KILN_MAP(logf(x[i]));
    case KILN_UNARY_ERF: KILN_MAP(kiln_erf(x[i]));
    case KILN_UNARY_SQRT: KILN_MAP(__builtin_sqrtf(x[i]));
    case KILN_UNARY_RECIPROCAL: KILN_MAP(1.0f / x[i]);
    case KILN_UNARY_NEG: KILN_MAP(-x[i]);
    case KILN_UNARY_ABS: KILN_MAP(__builtin_fabsf(x[i]));
    case KILN_UNARY_LEAKY_RELU: KILN_MAP(x[i] < 0 ? alpha * x[i] : x[i]);
    case KILN_UNARY_FLOOR: KILN_MAP(__builtin_floorf(x[i]));
    case KILN_UNARY_CEIL: KILN_MAP(__builtin_ceilf(x[i]));
    case KILN_UNARY_ROUND: KILN_MAP(__builtin_rintf(x[i]));
    case KILN_UNARY_SOFTPLUS:
        KILN_MAP(x[i] > 20.0f ? x[i] : log1pf(kiln_exp(x[i])));
    default: KILN_MAP(x[i]);
    }
}
#undef KILN_MAP

static inline __attribute__((always_inline)) void kiln_unary_body(int op, size_t n, const float *x, float *y, float alpha,
                                                                  float beta) {
    kiln_unary_apply(op, n, x, y, alpha, beta, 0);
}

/// Bias (per column and/or per row) and activation over a tile, inlined into the caller's ISA.
static inline __attribute__((always_inline)) void kiln_tile_epilogue(size_t rows, size_t cols, float *c, size_t ldc,
                                                                     const float *bias, const float *row_bias,
                                                                     const kiln_epilogue *e) {
    for (size_t i = 0; i < rows; i++) {
        float *row = c + i * ldc;
        if (bias) KILN_SHORT_LOOP for (size_t j = 0; j < cols; j++) row[j] += bias[j];
        if (row_bias) { const float b = row_bias[i]; KILN_SHORT_LOOP for (size_t j = 0; j < cols; j++) row[j] += b; }
        if (e->activation) kiln_unary_apply(e->activation, cols, row, row, e->alpha, e->beta, 1);
    }
}

/// Whether the GEMM microkernels apply `op` to their accumulators (piecewise-linear functions of a
/// few min/max/multiply steps, and sigmoid, SiLU and both GELU forms through a vector exp); others
/// run over the stored tile.
/// (A clip whose bounds cross takes the stored path, which keeps the scalar form's order.)
static inline int kiln_unary_in_registers(const kiln_tile_args *t) {
    const int op = t->activation;
    return op == KILN_UNARY_NONE || op == KILN_UNARY_IDENTITY || op == KILN_UNARY_RELU || op == KILN_UNARY_HARD_SWISH ||
           op == KILN_UNARY_HARD_SIGMOID || (op == KILN_UNARY_CLIP && t->alpha <= t->beta) || op == KILN_UNARY_LEAKY_RELU ||
           op == KILN_UNARY_SIGMOID || op == KILN_UNARY_SILU || op == KILN_UNARY_GELU || op == KILN_UNARY_GELU_TANH;
}

/// A microkernel's epilogue over its stored tile (biases and activation; `accumulate` is the
/// kernel's own), for activations it does not apply in registers.
static inline __attribute__((always_inline)) void kiln_tile_args_apply(size_t rows, size_t cols, float *c, size_t ldc,
                                                                       const kiln_tile_args *t) {
    if (!t->col_bias && !t->row_bias && t->activation == KILN_UNARY_NONE) return;
    const kiln_epilogue e = {NULL, t->activation, t->alpha, t->beta, NULL};
    kiln_tile_epilogue(rows, cols, c, ldc, t->col_bias, t->row_bias, &e);
}

#endif
