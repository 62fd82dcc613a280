// What the kernel checks (`make kernels-check`) share: the case and failure counts, the
// deterministic values every check draws, and the checks main runs, by family.
#ifndef KILN_KERNELS_CHECK_H
#define KILN_KERNELS_CHECK_H

#include "kiln_kernels.h"
#include "../../Sources/CKilnKernels/kiln_unary.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Cases run and cases failed, over every check (kernels_check.c prints them at the end).
extern int failures, cases;

// The next of a sequence of values in [-1, 1) from `state`, the same on every CPU.
static inline float value(unsigned *state) {
    *state = *state * 1664525u + 1013904223u;
    return (float)((*state >> 8) & 0xFFFF) / 32768.0f - 1.0f;
}

// GEMM microkernels (kernels_check_gemm.c): float32 tiles at every edge and epilogue, activations
// at extreme accumulators, and every compressed-B layout.
void check_ukernel(const char *name);
void check_extremes(const char *name);
void check_q_ukernel(const char *name);

// Convolution and recurrent kernels (kernels_check_conv.c), each skipped when the CPU lacks `needs`.
typedef void (*dw_nhwc_fn)(size_t, size_t, size_t, const float *, size_t, size_t, const float *, size_t, size_t, size_t, size_t,
                           size_t, size_t, size_t, size_t, size_t, size_t, size_t, size_t, float *, const kiln_epilogue *);
void check_dwconv_nhwc(const char *name, dw_nhwc_fn fn, uint32_t needs);
void check_winograd(const char *ukernel, int isa);
typedef void (*lstm_gates_fn)(size_t, const float *, const float *, const float *, float *, float *);
void check_lstm_gates(const char *name, lstm_gates_fn fn, uint32_t needs);
typedef void (*gru_gates_fn)(size_t, int, const float *, const float *, float *);
typedef void (*gru_reset_fn)(size_t, const float *, const float *, const float *, float *);
void check_gru_gates(const char *name, gru_gates_fn gates, gru_reset_fn reset, uint32_t needs);

// The 8-bit integer GEMM (kernels_check_integer.c), exact against an int64 reference.
void check_u8s8_gemm(const char *name, kiln_u8s8_gemm_fn fn, uint32_t needs);

// Fused attention (kernels_check_attention.c) against a double-precision softmax.
void check_attention(const char *name, kiln_f32_attention_fn fn, uint32_t needs);

#endif
