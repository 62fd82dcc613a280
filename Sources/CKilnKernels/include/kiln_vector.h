// The vector kernel families' per-ISA configs (kiln_vector.inc), as XNNPACK keeps one config
// per operator: a step asks once for its ISA's config and calls its entry points; no call site
// chooses a variant. Part of kiln_kernels.h, the kernel library's umbrella header.
#ifndef KILN_VECTOR_H
#define KILN_VECTOR_H

#include <stddef.h>
#include <stdint.h>

#include "kiln_gemm.h"

#ifdef __cplusplus
extern "C" {
#endif

/// The vector families: each names a group of entry points of kiln_vector_config.
#define KILN_VECTOR_FAMILIES(X) X(UNARY) X(BINARY) X(NORMALIZATION) X(POOL2D) X(POOL2D_NHWC) X(DWCONV2D) \
    X(DWCONV2D_NHWC) X(RECURRENT) X(WINOGRAD) X(INTEGER)
#define KILN_DECLARE_VECTOR_FAMILY(NAME) KILN_VECTOR_##NAME,
enum { KILN_VECTOR_FAMILIES(KILN_DECLARE_VECTOR_FAMILY) KILN_VECTOR_FAMILY_COUNT };
#undef KILN_DECLARE_VECTOR_FAMILY

// Each entry point's function type (`…_t`) and pointer type (`…_fn`).

/// Attention's scratch (see kiln_f32_attention): keys transposed [d][w], a block of scores
/// [KILN_ATTENTION_MAX_MR][w] and values in panels [skv][dv rounded up to KILN_ATTENTION_MAX_NR],
/// w = skv rounded up to 16. MR and NR bound the tiles of the GEMM microkernels it runs on.
#define KILN_ATTENTION_MAX_MR 8
#define KILN_ATTENTION_MAX_NR 16
static inline size_t kiln_attention_keys_padded(size_t skv) { return (skv + 15) / 16 * 16; }
static inline size_t kiln_attention_scratch_floats(size_t skv, size_t d, size_t dv) {
    const size_t w = kiln_attention_keys_padded(skv);
    return w * (d + KILN_ATTENTION_MAX_MR) + skv * ((dv + KILN_ATTENTION_MAX_NR - 1) / KILN_ATTENTION_MAX_NR * KILN_ATTENTION_MAX_NR);
}

/// y = f(x) for the kiln_unary.inc function `op` with parameters alpha and beta.
typedef void kiln_f32_unary_t(int op, size_t n, const float *x, float *y, float alpha, float beta);
/// Broadcasting binary op over `rank` dims (strides in elements, 0 where broadcast; y contiguous).
/// `dtype` is the operands' type; comparisons and logic write bool (one byte).
typedef void kiln_binary_nd_t(int op, int dtype, size_t rank, const size_t *shape, const void *x, const ptrdiff_t *xs,
                              const void *z, const ptrdiff_t *zs, void *y);
/// A reduction (kiln_reduce.inc code) or softmax-like map (KILN_SOFTMAX, KILN_LOG_SOFTMAX) over the
/// middle axis of [outer, n, inner].
typedef void kiln_f32_map_nd_t(int op, size_t outer, size_t n, size_t inner, const float *x, float *y);
/// Layer normalization of `rows` rows of n over the last axis, gamma and beta per column (NULL: 1, 0).
typedef void kiln_f32_layer_norm_t(size_t rows, size_t n, const float *x, const float *gamma, const float *beta, float epsilon,
                                   float *y);
/// Heads [h_begin, h_end) of one batch entry over 3-D inputs (rows q_row, kv_row, v_row, y_row
/// floats apart; head h at column h·d, or h·dv for values and output):
/// softmax_j(scale · q_i·k_j + mask[h·mask_h + i·mask_i + j]) · v, mask NULL for none; a row whose
/// best score is −∞ gives zeros. `scratch` holds kiln_attention_scratch_floats(skv, d, dv) floats.
typedef void kiln_f32_attention_t(size_t sq, size_t skv, size_t d, size_t dv, size_t h_begin, size_t h_end, const float *q,
                                  size_t q_row, const float *k, size_t kv_row, const float *v, size_t v_row, const float *mask,
                                  size_t mask_h, size_t mask_i, float scale, float *y, size_t y_row, float *scratch);
/// 2-D max or average pooling of [channels, h, w] images with padding (top, left, bottom, right),
/// strides, dilations. `count_pad`: averages divide by the full window (padding counted), else by
/// the cells inside.
typedef void kiln_f32_pool2d_t(int max, int count_pad, size_t channels, size_t h, size_t w, const float *x, size_t kh, size_t kw,
                               size_t sh, size_t sw, size_t dh, size_t dw, size_t pt, size_t pl, size_t pb, size_t pr, size_t oh,
                               size_t ow, float *y);
/// 2-D max or average pooling of one NHWC image, output rows [row_begin, row_end); pads as
/// kiln_f32_pool2d_t. Vectors run along channels.
typedef void kiln_f32_pool2d_nhwc_t(int max, int count_pad, size_t h, size_t w, size_t c, const float *x, size_t kh, size_t kw,
                                    size_t sh, size_t sw, size_t dh, size_t dw, size_t pt, size_t pl, size_t pb, size_t pr,
                                    size_t oh, size_t ow, size_t row_begin, size_t row_end, float *y);
/// Depthwise 2-D convolution over one image in CHW layout, with the epilogue. `scratch` holds
/// `kiln_f32_dwconv2d_scratch_floats` floats (NULL takes a slower path that needs none; AVX-512
/// reads the planes in place and needs none for strides 1 and 2).
typedef void kiln_f32_dwconv2d_t(size_t channels, size_t h, size_t w, const float *x, size_t kh, size_t kw, const float *weight,
                                 size_t sh, size_t sw, size_t dh, size_t dw, size_t pt, size_t pl, size_t oh, size_t ow, float *y,
                                 const kiln_epilogue *e, float *scratch);
/// Depthwise convolution of one NHWC image: output rows [row_begin, row_end), channels
/// [c_begin, c_end) of y [oh, ow, c]; weight [kh, kw, c]; bias per channel (absolute index) and
/// activation from `e` (may be NULL). Vectors run along channels.
typedef void kiln_f32_dwconv2d_nhwc_t(size_t h, size_t w, size_t c, const float *x, size_t kh, size_t kw, const float *weight,
                                      size_t sh, size_t sw, size_t dh, size_t dw, size_t pt, size_t pl, size_t oh, size_t ow,
                                      size_t row_begin, size_t row_end, size_t c_begin, size_t c_end, float *y,
                                      const kiln_epilogue *e);
/// One LSTM step for one sequence: gate pre-activations xw (input projection + both biases) and
/// hr (recurrent projection), order i, o, f, c; optional peepholes [3 × hidden] (i, o, f); c and h
/// updated (c, h, xw and hr must not overlap).
typedef void kiln_f32_lstm_gates_t(size_t hidden, const float *xw, const float *hr, const float *peep, float *c, float *h);
/// GRU reset gate applied to the state: rh = sigmoid(xw_r + hr_r) ⊙ h (for linear_before_reset = 0).
typedef void kiln_f32_gru_reset_t(size_t hidden, const float *xw, const float *hr, const float *h, float *rh);
/// One GRU step for one sequence: xw and hr in gate order z, r, h; hr's h part is R_h·h + Rb_h when
/// linear_before_reset, else R_h·(r ⊙ h) + Rb_h; h updated (xw, hr, h and rh must not overlap).
typedef void kiln_f32_gru_gates_t(size_t hidden, int linear_before_reset, const float *xw, const float *hr, float *h);
/// A 3×3, stride-1, undilated channels-last convolution of one image by Winograd F(2×2, 3×3)
/// (winograd.c): x [h, w, c] with pads pt (top) and pl (left) → y [oh, ow, m] (pixels ldc floats
/// apart), output tiles (2×2 pixel blocks, row-major over ceil(oh/2) × ceil(ow/2))
/// [tile_begin, tile_end) in blocks of `block` tiles, output channels of B panels [p_begin, p_end).
/// `u` holds the 16 packed B operands (U[ξ] = (G g Gᵀ)[ξ], K = c, N = m) for `ukernel` (tile rows
/// `mr`); `e` gives bias, activation and `accumulate` (y holds a residual). `scratch`:
/// kiln_f32_winograd_scratch_floats(c, m, block) floats. The ISA is the transforms' vector width.
typedef void kiln_f32_winograd_t(kiln_f32_gemm_ukernel ukernel, size_t mr, const kiln_packed_b *u, size_t h, size_t w, size_t c,
                                 const float *x, size_t pt, size_t pl, size_t oh, size_t ow, float *y, size_t ldc,
                                 size_t tile_begin, size_t tile_end, size_t p_begin, size_t p_end, size_t block,
                                 const kiln_epilogue *e, float *scratch);

/// Columns per panel of an 8-bit integer B (kiln_s8_pack_b), the same on every ISA.
#define KILN_I8_NR 32
/// C[m_begin..m_end, panels p_begin..p_end] (int32, row-major ldc) = Σ_k (A[i][k] − a_zero) · (B[k][j] − b_zero[j]),
/// wrapping modulo 2^32 (int32 accumulation, bit-exact on every ISA). A is m × k bytes, row-major
/// (lda), uint8, or int8 when `a_signed`; B is packed by kiln_s8_pack_b with `sums` (2·n int32).
typedef void kiln_u8s8_gemm_t(size_t m_begin, size_t m_end, size_t n, size_t k, const uint8_t *a, size_t lda, int a_signed,
                              int32_t a_zero, const int8_t *b, const int32_t *sums, size_t p_begin, size_t p_end, int32_t *c,
                              size_t ldc);
/// Packs a k × n 8-bit matrix (row-major, row stride ldb; uint8 when `b_unsigned`, else int8) for
/// kiln_u8s8_gemm_t: ceil(n / KILN_I8_NR) panels of ceil(k / 4) rows of KILN_I8_NR columns × 4
/// consecutive k, int8 (uint8 values less 128), zero-padded: packed holds
/// kiln_s8_packed_bytes(k, n) bytes. `sums` (2·n int32) gets each column's sum of packed values,
/// then its zero point (zero[0] for all when zero_count is 1, none when 0) less the same 128.
void kiln_s8_pack_b(size_t k, size_t n, const void *b, size_t ldb, int b_unsigned, const void *zero, size_t zero_count,
                    int8_t *packed, int32_t *sums);
static inline size_t kiln_s8_packed_bytes(size_t k, size_t n) {
    return (n + KILN_I8_NR - 1) / KILN_I8_NR * ((k + 3) / 4) * KILN_I8_NR * 4;
}
typedef kiln_f32_unary_t *kiln_f32_unary_fn;
typedef kiln_binary_nd_t *kiln_binary_nd_fn;
typedef kiln_f32_map_nd_t *kiln_f32_map_nd_fn;
typedef kiln_f32_layer_norm_t *kiln_f32_layer_norm_fn;
typedef kiln_f32_attention_t *kiln_f32_attention_fn;
typedef kiln_f32_pool2d_t *kiln_f32_pool2d_fn;
typedef kiln_f32_pool2d_nhwc_t *kiln_f32_pool2d_nhwc_fn;
typedef kiln_f32_dwconv2d_t *kiln_f32_dwconv2d_fn;
typedef kiln_f32_dwconv2d_nhwc_t *kiln_f32_dwconv2d_nhwc_fn;
typedef kiln_f32_lstm_gates_t *kiln_f32_lstm_gates_fn;
typedef kiln_f32_gru_reset_t *kiln_f32_gru_reset_fn;
typedef kiln_f32_gru_gates_t *kiln_f32_gru_gates_fn;
typedef kiln_f32_winograd_t *kiln_f32_winograd_fn;
typedef kiln_u8s8_gemm_t *kiln_u8s8_gemm_fn;

// Each family's entry points for one ISA, declared from the rows of kiln_vector.inc (a row not
// built on this platform is declared and never referenced).
#define KILN_VECTOR_DECLARE_UNARY(isa) kiln_f32_unary_t kiln_f32_unary__##isa;
#define KILN_VECTOR_DECLARE_BINARY(isa) kiln_binary_nd_t kiln_binary_nd__##isa;
#define KILN_VECTOR_DECLARE_NORMALIZATION(isa) \
    kiln_f32_map_nd_t kiln_f32_reduce__##isa, kiln_f32_softmax_nd__##isa; \
    kiln_f32_layer_norm_t kiln_f32_layer_norm__##isa; \
    kiln_f32_attention_t kiln_f32_attention__##isa;
#define KILN_VECTOR_DECLARE_POOL2D(isa) kiln_f32_pool2d_t kiln_f32_pool2d__##isa;
#define KILN_VECTOR_DECLARE_POOL2D_NHWC(isa) kiln_f32_pool2d_nhwc_t kiln_f32_pool2d_nhwc__##isa;
#define KILN_VECTOR_DECLARE_DWCONV2D(isa) kiln_f32_dwconv2d_t kiln_f32_dwconv2d__##isa;
#define KILN_VECTOR_DECLARE_DWCONV2D_NHWC(isa) kiln_f32_dwconv2d_nhwc_t kiln_f32_dwconv2d_nhwc__##isa;
#define KILN_VECTOR_DECLARE_RECURRENT(isa) \
    kiln_f32_lstm_gates_t kiln_f32_lstm_gates__##isa; \
    kiln_f32_gru_reset_t kiln_f32_gru_reset__##isa; \
    kiln_f32_gru_gates_t kiln_f32_gru_gates__##isa;
#define KILN_VECTOR_DECLARE_WINOGRAD(isa) kiln_f32_winograd_t kiln_f32_winograd__##isa;
#define KILN_VECTOR_DECLARE_INTEGER(isa) kiln_u8s8_gemm_t kiln_u8s8_gemm__##isa;
#define KILN_VECTOR(FAMILY, ISA, isa, BUILT) KILN_VECTOR_DECLARE_##FAMILY(isa)
#include "kiln_vector.inc"
#undef KILN_VECTOR

/// One ISA's entry points of every vector family (each the family's row for the ISA, else its scalar row).
typedef struct kiln_vector_config {
    kiln_f32_unary_fn unary;                 // UNARY
    kiln_binary_nd_fn binary_nd;             // BINARY
    kiln_f32_map_nd_fn reduce;               // NORMALIZATION
    kiln_f32_map_nd_fn softmax;              // NORMALIZATION
    kiln_f32_layer_norm_fn layer_norm;       // NORMALIZATION
    kiln_f32_attention_fn attention;         // NORMALIZATION
    kiln_f32_pool2d_fn pool2d;               // POOL2D
    kiln_f32_pool2d_nhwc_fn pool2d_nhwc;     // POOL2D_NHWC
    kiln_f32_dwconv2d_fn dwconv2d;           // DWCONV2D
    kiln_f32_dwconv2d_nhwc_fn dwconv2d_nhwc; // DWCONV2D_NHWC
    kiln_f32_lstm_gates_fn lstm_gates;       // RECURRENT
    kiln_f32_gru_reset_fn gru_reset;         // RECURRENT
    kiln_f32_gru_gates_fn gru_gates;         // RECURRENT
    kiln_f32_winograd_fn winograd;           // WINOGRAD
    kiln_u8s8_gemm_fn u8s8_gemm;             // INTEGER
} kiln_vector_config;

/// The config of ISA `isa` (a KILN_ISA_*) in this build: every entry point set; an ISA this build
/// lacks, or an unknown code, gives the scalar config. Built once; thread-safe.
const kiln_vector_config *kiln_vector_config_of(int isa);

/// The ISAs (bit `1 << KILN_ISA_*`) kiln_vector.inc lists for family `family` (KILN_VECTOR_*),
/// on any host: the catalog's kernels of the family. 0 for an unknown family.
uint32_t kiln_vector_isas(int family);

/// Whether this build has family `family`'s own row for ISA `isa` (not the scalar fallback).
int kiln_vector_built(int family, int isa);

#ifdef __cplusplus
}
#endif

#endif
