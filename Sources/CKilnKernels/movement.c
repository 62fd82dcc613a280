// Data movement: strided n-d copies (transpose, slice, concat, split, pad, expand and tile
// are all one of these), fills and gathers. Byte-generic over element sizes.
#include "kiln_kernels.h"

#include <string.h>

// Strides may be negative (reversed slices), so every offset is a signed product: a size_t index
// times a negative stride would wrap, which C leaves undefined for pointer arithmetic.
static inline void kiln_copy_elements(size_t size, size_t count, const char *x, ptrdiff_t xs, char *y, ptrdiff_t ys) {
    if (xs == (ptrdiff_t)size && ys == (ptrdiff_t)size) { memcpy(y, x, count * size); return; }
    const ptrdiff_t n = (ptrdiff_t)count;
    switch (size) {
    case 4: for (ptrdiff_t i = 0; i < n; i++) *(uint32_t *)(y + i * ys) = *(const uint32_t *)(x + i * xs); return;
    case 8: for (ptrdiff_t i = 0; i < n; i++) *(uint64_t *)(y + i * ys) = *(const uint64_t *)(x + i * xs); return;
    case 2: for (ptrdiff_t i = 0; i < n; i++) *(uint16_t *)(y + i * ys) = *(const uint16_t *)(x + i * xs); return;
    case 1: for (ptrdiff_t i = 0; i < n; i++) y[i * ys] = x[i * xs]; return;
    default: for (ptrdiff_t i = 0; i < n; i++) memcpy(y + i * ys, x + i * xs, size); return;
    }
}

// A 2-D transposing copy in 16x16 blocks (both strides non-unit in one operand each).
static void kiln_copy_2d_blocked(size_t size, size_t rows, size_t cols, const char *x, ptrdiff_t xr, ptrdiff_t xc, char *y,
                                 ptrdiff_t yr, ptrdiff_t yc) {
    const ptrdiff_t t = 16, nr = (ptrdiff_t)rows, nc = (ptrdiff_t)cols;
    for (ptrdiff_t r0 = 0; r0 < nr; r0 += t) {
        const ptrdiff_t r1 = r0 + t < nr ? r0 + t : nr;
        for (ptrdiff_t c0 = 0; c0 < nc; c0 += t) {
            const ptrdiff_t c1 = c0 + t < nc ? c0 + t : nc;
            for (ptrdiff_t r = r0; r < r1; r++)
                kiln_copy_elements(size, (size_t)(c1 - c0), x + r * xr + c0 * xc, xc, y + r * yr + c0 * yc, yc);
        }
    }
}

void kiln_copy_nd__scalar(size_t size, size_t rank, const size_t *shape, const void *x, const ptrdiff_t *xs, void *y,
                          const ptrdiff_t *ys) {
    for (size_t d = 0; d < rank; d++) if (shape[d] == 0) return;
    if (rank == 0) { memcpy(y, x, size); return; }
    const char *xp = (const char *)x;
    char *yp = (char *)y;
    // The last two dims go to the inner kernel (blocked when it transposes), the rest odometer.
    const size_t inner_dims = rank >= 2 ? 2 : 1;
    size_t rows = 1;
    for (size_t d = 0; d + inner_dims < rank; d++) rows *= shape[d];
    size_t index[KILN_MAX_RANK] = {0};
    for (size_t r = 0; r < rows; r++) {
        if (inner_dims == 2) {
            const size_t a = rank - 2, b = rank - 1;
            const int transposing = xs[b] != (ptrdiff_t)size && ys[b] == (ptrdiff_t)size && shape[a] > 1;
            if (transposing) kiln_copy_2d_blocked(size, shape[a], shape[b], xp, xs[a], xs[b], yp, ys[a], ys[b]);
            else for (ptrdiff_t i = 0; i < (ptrdiff_t)shape[a]; i++) kiln_copy_elements(size, shape[b], xp + i * xs[a], xs[b], yp + i * ys[a], ys[b]);
        } else {
            kiln_copy_elements(size, shape[rank - 1], xp, xs[rank - 1], yp, ys[rank - 1]);
        }
        for (size_t d = rank - inner_dims; d-- > 0;) {
            xp += xs[d];
            yp += ys[d];
            if (++index[d] < shape[d]) break;
            xp -= xs[d] * (ptrdiff_t)shape[d];
            yp -= ys[d] * (ptrdiff_t)shape[d];
            index[d] = 0;
        }
    }
}

void kiln_fill__scalar(size_t size, size_t n, const void *value, void *y) {
    char *yp = (char *)y;
    switch (size) {
    case 4: { uint32_t v; memcpy(&v, value, 4); for (size_t i = 0; i < n; i++) ((uint32_t *)y)[i] = v; return; }
    case 8: { uint64_t v; memcpy(&v, value, 8); for (size_t i = 0; i < n; i++) ((uint64_t *)y)[i] = v; return; }
    case 1: memset(y, *(const uint8_t *)value, n); return;
    default: for (size_t i = 0; i < n; i++) memcpy(yp + i * size, value, size); return;
    }
}

size_t kiln_gather__scalar(size_t size, size_t outer, size_t n, size_t inner, const void *x, const int64_t *indices,
                           size_t count, void *y) {
    const size_t row = inner * size;
    for (size_t j = 0; j < count; j++) {
        const int64_t i = indices[j];
        if (i < -(int64_t)n || i >= (int64_t)n) return j + 1;
    }
    const char *xp = (const char *)x;
    char *yp = (char *)y;
    for (size_t o = 0; o < outer; o++) {
        const char *xo = xp + o * n * row;
        char *yo = yp + o * count * row;
        // Rows of 4, 8 and 16 bytes (scalars, int64s, boxes) copy as fixed-size moves.
#define KILN_GATHER_ROWS(BYTES)                                                                  \
        for (size_t j = 0; j < count; j++) {                                                     \
            int64_t i = indices[j];                                                              \
            if (i < 0) i += (int64_t)n;                                                          \
            memcpy(yo + j * (BYTES), xo + (size_t)i * (BYTES), (BYTES));                         \
        }
        if (row == 4) { KILN_GATHER_ROWS(4) }
        else if (row == 8) { KILN_GATHER_ROWS(8) }
        else if (row == 16) { KILN_GATHER_ROWS(16) }
        else { KILN_GATHER_ROWS(row) }
#undef KILN_GATHER_ROWS
    }
    return 0;
}

size_t kiln_gather_nd__scalar(size_t slice, size_t tuples, size_t per_batch, size_t batch_stride, size_t k, const int64_t *dims,
                              const int64_t *strides, const void *x, const void *indices, int indices32, void *y) {
    const char *xp = (const char *)x;
    char *yp = (char *)y;
    const int64_t *i64 = (const int64_t *)indices;
    const int32_t *i32 = (const int32_t *)indices;
    for (size_t t = 0; t < tuples; t++) {
        size_t base = (per_batch ? t / per_batch : 0) * batch_stride;
        for (size_t j = 0; j < k; j++) {
            int64_t i = indices32 ? (int64_t)i32[t * k + j] : i64[t * k + j];
            if (i < 0) i += dims[j];
            if (i < 0 || i >= dims[j]) return t * k + j + 1;
            base += (size_t)i * (size_t)strides[j];
        }
        if (slice == 4) memcpy(yp + t * 4, xp + base, 4);
        else if (slice == 8) memcpy(yp + t * 8, xp + base, 8);
        else if (slice == 16) memcpy(yp + t * 16, xp + base, 16);
        else memcpy(yp + t * slice, xp + base, slice);
    }
    return 0;
}

size_t kiln_non_zero_flat__scalar(const void *x, size_t size, uint64_t mask, size_t count, int64_t *flat) {
    size_t found = 0;
    // Branch-free: every position is written, the count advances only on a hit.
#define KILN_NON_ZERO(T)                                                                         \
    for (size_t i = 0; i < count; i++) {                                                         \
        flat[found] = (int64_t)i;                                                                \
        found += (((const T *)x)[i] & (T)mask) != 0;                                            \
    }
    switch (size) {
    case 8: KILN_NON_ZERO(uint64_t) break;
    case 4: KILN_NON_ZERO(uint32_t) break;
    case 2: KILN_NON_ZERO(uint16_t) break;
    default: KILN_NON_ZERO(uint8_t) break;
    }
#undef KILN_NON_ZERO
    return found;
}

void kiln_non_zero_coords__scalar(const int64_t *flat, size_t found, size_t rank, const int64_t *shape, int64_t *y) {
    if (rank == 1) { memcpy(y, flat, found * sizeof *y); return; }
    for (size_t k = 0; k < found; k++) {
        int64_t rest = flat[k];
        for (size_t d = rank; d-- > 0;) {
            y[d * found + k] = rest % shape[d];
            rest /= shape[d];
        }
    }
}

void kiln_f32_transpose_rows__scalar(size_t rows, size_t cols, const float *x, float *y, size_t r_begin, size_t r_end) {
    const size_t t = 32;
    for (size_t r0 = r_begin; r0 < r_end; r0 += t) {
        const size_t r1 = r0 + t < r_end ? r0 + t : r_end;
        for (size_t c0 = 0; c0 < cols; c0 += t) {
            const size_t c1 = c0 + t < cols ? c0 + t : cols;
            for (size_t r = r0; r < r1; r++)
                for (size_t c = c0; c < c1; c++) y[c * rows + r] = x[r * cols + c];
        }
    }
}

#if defined(__x86_64__)
#include <immintrin.h>

// 8 × 8 blocks transposed in registers (unpack, shuffle, then swap the 128-bit halves).
__attribute__((target("avx2,fma"))) void kiln_f32_transpose_rows__avx2(size_t rows, size_t cols, const float *x, float *y,
                                                                      size_t r_begin, size_t r_end) {
    size_t r = r_begin;
    for (; r + 8 <= r_end; r += 8) {
        size_t c = 0;
        for (; c + 8 <= cols; c += 8) {
            const float *s = x + r * cols + c;
            const __m256 a0 = _mm256_loadu_ps(s), a1 = _mm256_loadu_ps(s + cols), a2 = _mm256_loadu_ps(s + 2 * cols),
                         a3 = _mm256_loadu_ps(s + 3 * cols), a4 = _mm256_loadu_ps(s + 4 * cols), a5 = _mm256_loadu_ps(s + 5 * cols),
                         a6 = _mm256_loadu_ps(s + 6 * cols), a7 = _mm256_loadu_ps(s + 7 * cols);
            const __m256 t0 = _mm256_unpacklo_ps(a0, a1), t1 = _mm256_unpackhi_ps(a0, a1), t2 = _mm256_unpacklo_ps(a2, a3),
                         t3 = _mm256_unpackhi_ps(a2, a3), t4 = _mm256_unpacklo_ps(a4, a5), t5 = _mm256_unpackhi_ps(a4, a5),
                         t6 = _mm256_unpacklo_ps(a6, a7), t7 = _mm256_unpackhi_ps(a6, a7);
            const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE), u2 = _mm256_shuffle_ps(t1, t3, 0x44),
                         u3 = _mm256_shuffle_ps(t1, t3, 0xEE), u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
                         u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
            float *d = y + c * rows + r;
            _mm256_storeu_ps(d, _mm256_permute2f128_ps(u0, u4, 0x20));
            _mm256_storeu_ps(d + rows, _mm256_permute2f128_ps(u1, u5, 0x20));
            _mm256_storeu_ps(d + 2 * rows, _mm256_permute2f128_ps(u2, u6, 0x20));
            _mm256_storeu_ps(d + 3 * rows, _mm256_permute2f128_ps(u3, u7, 0x20));
            _mm256_storeu_ps(d + 4 * rows, _mm256_permute2f128_ps(u0, u4, 0x31));
            _mm256_storeu_ps(d + 5 * rows, _mm256_permute2f128_ps(u1, u5, 0x31));
            _mm256_storeu_ps(d + 6 * rows, _mm256_permute2f128_ps(u2, u6, 0x31));
            _mm256_storeu_ps(d + 7 * rows, _mm256_permute2f128_ps(u3, u7, 0x31));
        }
        for (; c < cols; c++)
            for (size_t i = 0; i < 8; i++) y[c * rows + r + i] = x[(r + i) * cols + c];
    }
    if (r < r_end) kiln_f32_transpose_rows__scalar(rows, cols, x, y, r, r_end);
}
#endif

void kiln_f32_transpose_rows(size_t rows, size_t cols, const float *x, float *y, size_t r_begin, size_t r_end) {
#if defined(__x86_64__)
    if (kiln_cpu_features() & KILN_CPU_X86_V3) {
        kiln_f32_transpose_rows__avx2(rows, cols, x, y, r_begin, r_end);
        return;
    }
#endif
    kiln_f32_transpose_rows__scalar(rows, cols, x, y, r_begin, r_end);
}

void kiln_f32_repeat_channels__scalar(size_t pixels, size_t c, size_t m, const float *x, float *y) {
    if (m == 2) {
        for (size_t p = 0; p < pixels; p++)
            for (size_t k = 0; k < c; k++) y[(p * c + k) * 2] = y[(p * c + k) * 2 + 1] = x[p * c + k];
        return;
    }
    for (size_t p = 0; p < pixels; p++)
        for (size_t k = 0; k < c; k++) {
            const float v = x[p * c + k];
            float *d = y + (p * c + k) * m;
            for (size_t j = 0; j < m; j++) d[j] = v;
        }
}
