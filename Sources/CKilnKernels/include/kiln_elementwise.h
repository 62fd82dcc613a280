// Elementwise maps, binary ops, casts, normalization, pooling, resize and movement: C the compiler
// vectorizes, built once per ISA. Part of kiln_kernels.h, the kernel library's umbrella header.
#ifndef KILN_ELEMENTWISE_H
#define KILN_ELEMENTWISE_H

#include <stddef.h>
#include <stdint.h>
#include "kiln_gemm.h"

#ifdef __cplusplus
extern "C" {
#endif

// MARK: Elementwise, normalization, pooling (C the compiler vectorizes, built once per ISA)

// The vector families' entry points (unary, binary, normalization, pooling, depthwise) are
// declared from their rows in kiln_vector.inc (kiln_vector.h).

/// Binary ops (kiln_binary.inc): arithmetic (float32 and int64/int32), comparisons (bool out), logic (bool).
#define KILN_BINARY(NAME, name, code) KILN_BINARY_##NAME = code,
enum {
#include "kiln_binary.inc"
};
#undef KILN_BINARY
/// The code of the binary op named `name` in kiln_binary.inc, or 0.
int kiln_binary_code(const char *name);
/// The name of row `i` of kiln_binary.inc, or NULL past the last.
const char *kiln_binary_name_at(size_t i);

/// Element types of the dtype-generic kernels.
enum { KILN_DT_F32 = 1, KILN_DT_I64 = 2, KILN_DT_I32 = 3, KILN_DT_BOOL = 4, KILN_DT_F16 = 5, KILN_DT_F64 = 6, KILN_DT_U8 = 7, KILN_DT_I8 = 8 };

/// Up to this many dims in the strided kernels (callers merge dims first).
#define KILN_MAX_RANK 8

/// y[o, i] = x[o, i] (op) z[o, i], with strides 0 for broadcast operands: x advances by
/// (xo, xi) per (outer, inner) step, z by (zo, zi).
void kiln_f32_binary__scalar(int op, size_t outer, size_t inner, const float *x, size_t xo, size_t xi,
                             const float *z, size_t zo, size_t zi, float *y);


/// y = cond ? x : z with broadcasting (strides in elements), elements of `size` bytes.
void kiln_where_nd__scalar(size_t size, size_t rank, const size_t *shape, const uint8_t *c, const ptrdiff_t *cs,
                           const void *x, const ptrdiff_t *xs, const void *z, const ptrdiff_t *zs, void *y);

/// Elementwise maps of kiln_map.inc: predicates (float → bool) and integer or boolean maps.
#define KILN_MAP(NAME, name, code) KILN_MAP_##NAME = code,
enum {
#include "kiln_map.inc"
    /// Flags or-ed into KILN_MAP_IS_INF: which infinities it detects.
    KILN_MAP_POSITIVE = 0x100, KILN_MAP_NEGATIVE = 0x200
};
#undef KILN_MAP
/// The code of the map named `name` in kiln_map.inc, or 0.
int kiln_map_code(const char *name);
/// The name of row `i` of kiln_map.inc, or NULL past the last.
const char *kiln_map_name_at(size_t i);
/// y[i] = op(x[i]) for n elements of dtype `dtype` (KILN_DT_*; the result is bool for the
/// predicates, else `dtype`); returns 0, touching nothing, when the map does not take `dtype`.
/// Called with n = 0 it only answers whether it does.
int kiln_map__scalar(int op, int dtype, size_t n, const void *x, void *y);

/// Converts n elements between dtypes (KILN_DT_*); returns 0 when the pair is not supported.
int kiln_cast__scalar(int from, int to, size_t n, const void *x, void *y);

/// Copies a strided n-d block of `size`-byte elements (strides in bytes) into a strided one.
void kiln_copy_nd__scalar(size_t size, size_t rank, const size_t *shape, const void *x, const ptrdiff_t *xs,
                          void *y, const ptrdiff_t *ys);
/// Fills n elements of `size` bytes with the value at `value`.
void kiln_fill__scalar(size_t size, size_t n, const void *value, void *y);

/// Reductions over the middle axis of [outer, n, inner]: y[outer, inner] (kiln_reduce.inc).
#define KILN_REDUCE(NAME, name, code) KILN_REDUCE_##NAME = code,
enum {
#include "kiln_reduce.inc"
};
#undef KILN_REDUCE
/// The code of the reduction op named `name` in kiln_reduce.inc, or 0.
int kiln_reduce_code(const char *name);
/// Softmax-like maps over the middle axis of [outer, n, inner].
enum { KILN_SOFTMAX = 1, KILN_LOG_SOFTMAX = 2 };
/// argmax/argmin over the middle axis of [outer, n, inner] (first or last index of the extreme).
void kiln_f32_arg_reduce__scalar(int largest, int select_last, size_t outer, size_t n, size_t inner, const float *x, int64_t *y);

/// Gathers along the middle axis of [outer, n, inner] (elements of `size` bytes): y[outer, count, inner].
/// Returns the first out-of-range index position + 1, or 0 when all indices are in range (negative ones wrap).
size_t kiln_gather__scalar(size_t size, size_t outer, size_t n, size_t inner, const void *x, const int64_t *indices,
                           size_t count, void *y);
/// gather_nd: `tuples` index tuples of k coordinates (int64, or int32 when indices32) into dims
/// with byte strides, the tuples of batch b (per_batch each) offset by b × batch_stride bytes;
/// copies one `slice` of bytes per tuple. Returns the first out-of-range coordinate's position + 1, or 0.
size_t kiln_gather_nd__scalar(size_t slice, size_t tuples, size_t per_batch, size_t batch_stride, size_t k, const int64_t *dims,
                              const int64_t *strides, const void *x, const void *indices, int indices32, void *y);
/// non_zero: the flat positions (into `flat`, room for `count`) of the elements of `size` bytes
/// with any bit of `mask` set; returns how many. Then their coordinates as [rank, found].
size_t kiln_non_zero_flat__scalar(const void *x, size_t size, uint64_t mask, size_t count, int64_t *flat);
void kiln_non_zero_coords__scalar(const int64_t *flat, size_t found, size_t rank, const int64_t *shape, int64_t *y);
/// Each of `pixels` rows of c channels repeated channel by channel m times: y[p, k·m + j] = x[p, k].
void kiln_f32_repeat_channels__scalar(size_t pixels, size_t c, size_t m, const float *x, float *y);

/// Dynamic uint8 quantization (onnxruntime's, for the matrix products of its quantized LSTM):
/// range [min(x, 0), max(x, 0)], scale = range / 255 (1 for an empty range), zero point =
/// round(−min / scale) clamped to [0, 255], q = clamp(round(x / scale) + zero point, 0, 255), all
/// rounding half to even. Writes each q − zero point as a float into `out`; returns the scale.
float kiln_f32_quantize_u8_centered__scalar(size_t n, const float *x, float *out);
/// dynamic_quantize_linear: the scale (range [min(x, 0), max(x, 0)] / 255) and zero point
/// (round(−min / scale) clamped to [0, 255]; 0 for an all-zero x, whose q are then all 0), and
/// q = clamp(round(x / scale) + zero point, 0, 255), rounding half to even; NaN quantizes to 0.
void kiln_f32_dynamic_quantize_u8__scalar(size_t n, const float *x, uint8_t *y, float *scale, uint8_t *zero);
/// c[i, j] = c[i, j] · (s · scale[j]) (+ bias[j] when given) over an m x n row-major block: a
/// product of centered integers scaled back (the multiplier rounded to float first, then applied).
void kiln_f32_scale_columns__scalar(size_t m, size_t n, float *c, float s, const float *scale, const float *bias);


void kiln_f32_global_average_pool__scalar(size_t channels, size_t n, const float *x, float *y);
void kiln_f32_global_max_pool__scalar(size_t channels, size_t n, const float *x, float *y);
#if defined(__x86_64__)
/// AVX2's depthwise convolution of wide planes (kiln_vector.h, DWCONV2D) pads them first.
void kiln_f32_dwconv2d_padded__avx2(size_t channels, size_t h, size_t w, const float *x,
                                    size_t kh, size_t kw, const float *weight,
                                    size_t sh, size_t sw, size_t dh, size_t dw, size_t pt, size_t pl,
                                    size_t oh, size_t ow, float *y, const kiln_epilogue *e, float *scratch);
#endif

#ifdef __cplusplus
}
#endif
#endif
