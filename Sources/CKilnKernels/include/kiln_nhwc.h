// Channels-last (NHWC) convolution, Winograd and pooling, and the recurrent gates. Part of
// kiln_kernels.h, the kernel library's umbrella header.
#ifndef KILN_NHWC_H
#define KILN_NHWC_H

#include <stddef.h>
#include <stdint.h>
#include "kiln_gemm.h"

#ifdef __cplusplus
extern "C" {
#endif

// MARK: Channels-last (NHWC) convolution and pooling

/// im2col of one NHWC image as GEMM rows: row r (output pixel r = oy · ow + ox) of `a` (rows from
/// `row_begin`, K = kh · kw · c floats each) holds the window's pixels in (ky, kx, c) order, zeros
/// outside the image.
void kiln_f32_im2col_nhwc__scalar(size_t h, size_t w, size_t c, const float *x, size_t kh, size_t kw, size_t sh, size_t sw,
                                  size_t dh, size_t dw, size_t pt, size_t pl, size_t ow, size_t row_begin, size_t row_end,
                                  float *a);

/// Copies `planes` images of h × w cells of `inner` floats into hp × wp cells with pt rows and pl
/// cells of zeros before them and zeros after (hp ≥ pt + h, wp ≥ pl + w): the padded input of an
/// indirect convolution (NHWC: one plane of C-float cells; NCHW: C planes of single floats).
void kiln_f32_pad_planes(size_t planes, size_t h, size_t w, size_t inner, const float *x, size_t pt, size_t pl, size_t hp,
                         size_t wp, float *out);
/// Padded rows [row_begin, row_end) of c planes of h × w floats gathered into hp × wp cells of c
/// channels (channels-last), pt rows and pl cells of zeros before the image and zeros after.
void kiln_f32_pad_planes_to_cells(size_t c, size_t h, size_t w, const float *x, size_t pt, size_t pl, size_t hp, size_t wp,
                                  float *out, size_t row_begin, size_t row_end);
/// Padded rows [row_begin, row_end) of kiln_f32_pad_planes (rows numbered over all planes, planes ·
/// hp of them), so threads can each pad a part.
void kiln_f32_pad_rows(size_t planes, size_t h, size_t w, size_t inner, const float *x, size_t pt, size_t pl, size_t hp,
                       size_t wp, float *out, size_t row_begin, size_t row_end);

/// im2col of one NCHW image as GEMM rows (channels-last output): row r (output pixel r) of `a`
/// holds the window in (c, ky, kx) order, zeros outside the image; rows [row_begin, row_end).
void kiln_f32_im2col_nchw_rows__scalar(size_t c, size_t h, size_t w, const float *x, size_t kh, size_t kw, size_t sh, size_t sw,
                                       size_t dh, size_t dw, size_t pt, size_t pl, size_t ow, size_t row_begin, size_t row_end,
                                       float *a);

/// Depthwise convolution of one NHWC image: output rows [row_begin, row_end), channels
/// [c_begin, c_end) of y [oh, ow, c]; weight [kh, kw, c]; bias per channel (absolute index) and
/// activation from `e` (may be NULL). Vectors run along channels.
/// 2-D max or average pooling of one NHWC image, output rows [row_begin, row_end); pads (top, left,
/// bottom, right) as `kiln_f32_pool2d`.
#define KILN_DECLARE_NHWC(isa) \
    void kiln_f32_dwconv2d_nhwc__##isa(size_t h, size_t w, size_t c, const float *x, size_t kh, size_t kw, const float *weight, \
                                       size_t sh, size_t sw, size_t dh, size_t dw, size_t pt, size_t pl, size_t oh, size_t ow, \
                                       size_t row_begin, size_t row_end, size_t c_begin, size_t c_end, float *y, \
                                       const kiln_epilogue *e); \
    void kiln_f32_pool2d_nhwc__##isa(int max, int count_pad, size_t h, size_t w, size_t c, const float *x, size_t kh, size_t kw, \
                                     size_t sh, size_t sw, size_t dh, size_t dw, size_t pt, size_t pl, size_t pb, size_t pr, \
                                     size_t oh, size_t ow, size_t row_begin, size_t row_end, float *y);
KILN_DECLARE_NHWC(scalar)
#if defined(__x86_64__)
KILN_DECLARE_NHWC(avx2)
KILN_DECLARE_NHWC(avx512)
#endif
#undef KILN_DECLARE_NHWC

/// A 3×3, stride-1, undilated channels-last convolution of one image by Winograd F(2×2, 3×3)
/// (winograd.c): x [h, w, c] with pads pt (top) and pl (left) → y [oh, ow, m] (pixels ldc floats
/// apart), output tiles (2×2 pixel blocks, row-major over ceil(oh/2) × ceil(ow/2))
/// [tile_begin, tile_end) in blocks of `block` tiles, output channels of B panels [p_begin, p_end). `u` holds the 16 packed B operands
/// (U[ξ] = (G g Gᵀ)[ξ], K = c, N = m) for `ukernel` (tile rows `mr`); `e` gives bias, activation
/// and `accumulate` (y holds a residual). `scratch`: kiln_f32_winograd_scratch_floats(c, m, block)
/// floats. isa: a KILN_ISA_* code, the transforms' vector width (AVX2, AVX-512; others scalar).
void kiln_f32_conv3x3_winograd(int isa, kiln_f32_gemm_ukernel ukernel, size_t mr, const kiln_packed_b *u, size_t h, size_t w,
                               size_t c, const float *x, size_t pt, size_t pl, size_t oh, size_t ow, float *y, size_t ldc,
                               size_t tile_begin, size_t tile_end, size_t p_begin, size_t p_end, size_t block,
                               const kiln_epilogue *e, float *scratch);
size_t kiln_f32_winograd_scratch_floats(size_t c, size_t m, size_t block);

/// Scratch floats the depthwise kernels need for one call.
size_t kiln_f32_dwconv2d_scratch_floats(size_t kh, size_t kw, size_t sh, size_t sw, size_t dh, size_t dw, size_t oh, size_t ow);
/// im2col for one image in CHW layout: rows = output pixels, columns = (c, ky, kx).
void kiln_f32_im2col__scalar(size_t channels, size_t h, size_t w, const float *x,
                             size_t kh, size_t kw, size_t sh, size_t sw, size_t dh, size_t dw, size_t pt, size_t pl,
                             size_t oh, size_t ow, float *cols);
/// y[c, r] = x[r, c] for rows [r_begin, r_end) of a rows × cols matrix x (y is cols × rows).
#define KILN_DECLARE_TRANSPOSE(isa) \
    void kiln_f32_transpose_rows__##isa(size_t rows, size_t cols, const float *x, float *y, size_t r_begin, size_t r_end);
KILN_VECTOR_ISAS(KILN_DECLARE_TRANSPOSE)
#undef KILN_DECLARE_TRANSPOSE
/// `kiln_f32_transpose_rows__*` in the widest variant the host runs.
void kiln_f32_transpose_rows(size_t rows, size_t cols, const float *x, float *y, size_t r_begin, size_t r_end);
/// y[c, r] = x[r, c] for a rows x cols block.
void kiln_f32_transpose__scalar(size_t rows, size_t cols, const float *x, float *y);

/// Per-channel y = x · a[c] + b[c] over [batch, channels, inner] (unfolded batch_norm).
void kiln_f32_channel_affine__scalar(size_t batch, size_t channels, size_t inner, const float *x, const float *a, const float *b,
                                     float *y);
/// instance_norm over [batch, channels, inner].
void kiln_f32_instance_norm__scalar(size_t batch, size_t channels, size_t inner, const float *x, const float *scale,
                                    const float *bias, float epsilon, float *y);
/// top_k along the middle axis of [outer, n, inner]; `scratch` holds n × 16 bytes.
void kiln_f32_top_k__scalar(int largest, size_t outer, size_t n, size_t inner, size_t k, const float *x, float *values,
                            int64_t *indices, void *scratch);

/// Resize along the middle axis of [outer, n, inner] to m: y[o, i] = Σ_t weight[i, t] · x[o, index[i, t]]
/// (taps with weight 0 skipped), for the output rows (o, i) with o · m + i in [row_begin, row_end). A
/// row of one tap of weight 1 (nearest) is copied.
void kiln_f32_resize_axis__scalar(size_t outer, size_t n, size_t inner, const float *x, size_t m, size_t taps,
                                  const int32_t *index, const float *weight, float *y, size_t row_begin, size_t row_end);
/// Adds columns (rows (c, ky, kx), one column per input pixel of h × w) into y [channels, oh, ow]:
/// the scatter half of a transposed convolution.
void kiln_f32_col2im__scalar(size_t channels, size_t h, size_t w, size_t kh, size_t kw, size_t sh, size_t sw, size_t dh,
                             size_t dw, size_t pt, size_t pl, size_t oh, size_t ow, const float *cols, float *y);

/// One LSTM step for one sequence: gate pre-activations xw (input projection + both biases) and
/// hr (recurrent projection), order i, o, f, c; optional peepholes [3 × hidden] (i, o, f); c and h
/// updated (c, h, xw and hr must not overlap). The AVX2 and AVX-512 forms vectorize the same steps.
void kiln_f32_lstm_gates__scalar(size_t hidden, const float *xw, const float *hr, const float *peep, float *c, float *h);
#if defined(__x86_64__)
void kiln_f32_lstm_gates__avx2(size_t hidden, const float *xw, const float *hr, const float *peep, float *c, float *h);
void kiln_f32_lstm_gates__avx512(size_t hidden, const float *xw, const float *hr, const float *peep, float *c, float *h);
#endif
/// GRU reset gate applied to the state: rh = sigmoid(xw_r + hr_r) ⊙ h (for linear_before_reset = 0).
void kiln_f32_gru_reset__scalar(size_t hidden, const float *xw, const float *hr, const float *h, float *rh);
/// One GRU step for one sequence: xw and hr in gate order z, r, h; hr's h part is R_h·h + Rb_h when
/// linear_before_reset, else R_h·(r ⊙ h) + Rb_h; h updated.
void kiln_f32_gru_gates__scalar(size_t hidden, int linear_before_reset, const float *xw, const float *hr, float *h);
#if defined(__x86_64__)
/// The same GRU steps vectorized for AVX2 and AVX-512 (xw, hr, h and rh must not overlap).
void kiln_f32_gru_reset__avx2(size_t hidden, const float *xw, const float *hr, const float *h, float *rh);
void kiln_f32_gru_gates__avx2(size_t hidden, int linear_before_reset, const float *xw, const float *hr, float *h);
void kiln_f32_gru_reset__avx512(size_t hidden, const float *xw, const float *hr, const float *h, float *rh);
void kiln_f32_gru_gates__avx512(size_t hidden, int linear_before_reset, const float *xw, const float *hr, float *h);
#endif

#ifdef __cplusplus
}
#endif
#endif
