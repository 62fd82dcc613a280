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

/// Floats of scratch a Winograd block of `block` tiles needs for c input and m output channels.
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
#if defined(__x86_64__)
KILN_DECLARE_TRANSPOSE(scalar)
KILN_DECLARE_TRANSPOSE(avx2)
#else
KILN_DECLARE_TRANSPOSE(scalar)
#endif
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

/// Whether the box (y1, x1, y2, x2) of `area` has an IoU above `iou` with any of the n kept boxes
/// (corners and areas as arrays), as non_max_suppression decides: boxes that do not intersect and
/// boxes of zero area never suppress.
// Non-max suppression of one class (nms.c): the candidates above the threshold (all when
// has_threshold is 0) in descending score order, ties by index, each kept unless its IoU with a
// box kept before it is above `iou`; writes the kept indices in that order and returns their count
// (at most `limit`). Scratch: kiln_nms_scratch_bytes(n).
size_t kiln_nms_scratch_bytes(size_t n);
size_t kiln_f32_nms_class(const float *scores, size_t n, int has_threshold, float threshold, const float *y1, const float *x1,
                          const float *y2, const float *x2, const float *area, float iou, size_t limit, int32_t *kept, void *scratch);


#ifdef __cplusplus
}
#endif
#endif
