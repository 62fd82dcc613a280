// The unary functions of kiln_unary.inc as one inlinable body, so every ISA variant (and
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
        if (short_rows) { KILN_SHORT_LOOP for (size_t i = 0; i < n; i++) { const float v = x[i]; y[i] = (expr); } } \
        else { KILN_ELEMENTWISE_LOOP for (size_t i = 0; i < n; i++) { const float v = x[i]; y[i] = (expr); } } \
        return; \
    } while (0)

// Every row of kiln_unary.inc as one case of its scalar form.
static inline __attribute__((always_inline)) void kiln_unary_apply(int op, size_t n, const float *x, float *y, float alpha,
                                                                   float beta, const int short_rows) {
    (void)alpha;
    (void)beta;
    switch (op) {
#define KILN_UNARY(NAME, name, code, scalar, in_registers) case KILN_UNARY_##NAME: KILN_MAP(scalar);
#include "kiln_unary.inc"
#undef KILN_UNARY
    default: KILN_MAP(v);
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

/// Whether the GEMM microkernels apply the tile's activation to their accumulators (the
/// "in registers" column of kiln_unary.inc); others run over the stored tile.
static inline int kiln_unary_in_registers(const kiln_tile_args *t) {
    const float alpha = t->alpha, beta = t->beta;
    (void)alpha;
    (void)beta;
    switch (t->activation) {
    case KILN_UNARY_NONE: return 1;
#define KILN_UNARY(NAME, name, code, scalar, in_registers) case KILN_UNARY_##NAME: return in_registers;
#include "kiln_unary.inc"
#undef KILN_UNARY
    default: return 0;
    }
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
