// Broadcasting binary ops (arithmetic, comparisons, logic), where, and casts. The inner
// dimension's loop is written for the compiler to vectorize; each ISA variant is the same
// C built with that ISA's target attribute.
#include "kiln_kernels.h"

#include <math.h>
#include <string.h>

// One inner row: y[i] = x[i * xi] (op) z[i * zi], with the contiguous and broadcast cases
// spelled out so they vectorize.
// Rows may run in place (y == x or y == z, as shape plans arrange): each iteration touches only
// its own element, so the vectorizer is told to skip its overlap check.
#if defined(__clang__)
// Loops over library calls (powf, fmodf) stay scalar; that is expected, not worth a warning.
#pragma clang diagnostic ignored "-Wpass-failed"
#define KILN_ROW_LOOP _Pragma("clang loop vectorize(assume_safety)")
#else
#define KILN_ROW_LOOP
#endif
#define KILN_ROW(T, OUT, expr) \
    do { \
        const T *xr = (const T *)xp; const T *zr = (const T *)zp; OUT *yr = (OUT *)yp; \
        if (xi == 1 && zi == 1) { KILN_ROW_LOOP for (size_t i = 0; i < n; i++) { const T a = xr[i], b = zr[i]; yr[i] = (OUT)(expr); } } \
        else if (xi == 1 && zi == 0) { const T b = zr[0]; KILN_ROW_LOOP for (size_t i = 0; i < n; i++) { const T a = xr[i]; yr[i] = (OUT)(expr); } } \
        else if (xi == 0 && zi == 1) { const T a = xr[0]; KILN_ROW_LOOP for (size_t i = 0; i < n; i++) { const T b = zr[i]; yr[i] = (OUT)(expr); } } \
        else { for (ptrdiff_t i = 0; i < (ptrdiff_t)n; i++) { const T a = xr[i * xi], b = zr[i * zi]; yr[i] = (OUT)(expr); } } \
    } while (0)

/* Integer division truncates toward zero (the op set's rule, as in C); INT64_MIN / -1 wraps. */
static inline __attribute__((always_inline)) int64_t kiln_trunc_div_i64(int64_t a, int64_t b) {
    if (b == 0) return 0;
    if (b == -1) return (int64_t)(0ULL - (uint64_t)a);
    return a / b;
}

static inline __attribute__((always_inline)) int64_t kiln_mod_i64(int64_t a, int64_t b) {
    if (b == 0) return 0;
    int64_t r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}

static inline __attribute__((always_inline)) void kiln_binary_row(int op, int dtype, size_t n, const void *xp, ptrdiff_t xi,
                                                                  const void *zp, ptrdiff_t zi, void *yp) {
    switch (dtype) {
    case KILN_DT_F32:
        switch (op) {
        case KILN_BINARY_ADD: KILN_ROW(float, float, a + b); return;
        case KILN_BINARY_SUB: KILN_ROW(float, float, a - b); return;
        case KILN_BINARY_MUL: KILN_ROW(float, float, a * b); return;
        case KILN_BINARY_DIV: KILN_ROW(float, float, a / b); return;
        case KILN_BINARY_MAX: KILN_ROW(float, float, (a != a || b != b) ? a + b : (a > b ? a : b)); return;
        case KILN_BINARY_MIN: KILN_ROW(float, float, (a != a || b != b) ? a + b : (a < b ? a : b)); return;
        case KILN_BINARY_POW: KILN_ROW(float, float, b == 2.0f ? a * a : (b == 0.5f ? sqrtf(a) : powf(a, b))); return;
        case KILN_BINARY_MOD: KILN_ROW(float, float, fmodf(a, b)); return;
        case KILN_BINARY_EQUAL: KILN_ROW(float, uint8_t, a == b); return;
        case KILN_BINARY_LESS: KILN_ROW(float, uint8_t, a < b); return;
        case KILN_BINARY_LESS_OR_EQUAL: KILN_ROW(float, uint8_t, a <= b); return;
        case KILN_BINARY_GREATER: KILN_ROW(float, uint8_t, a > b); return;
        case KILN_BINARY_GREATER_OR_EQUAL: KILN_ROW(float, uint8_t, a >= b); return;
        default: return;
        }
    case KILN_DT_I64:
        switch (op) {
        case KILN_BINARY_ADD: KILN_ROW(int64_t, int64_t, (int64_t)((uint64_t)a + (uint64_t)b)); return;
        case KILN_BINARY_SUB: KILN_ROW(int64_t, int64_t, (int64_t)((uint64_t)a - (uint64_t)b)); return;
        case KILN_BINARY_MUL: KILN_ROW(int64_t, int64_t, (int64_t)((uint64_t)a * (uint64_t)b)); return;
        case KILN_BINARY_DIV: KILN_ROW(int64_t, int64_t, kiln_trunc_div_i64(a, b)); return;
        case KILN_BINARY_MAX: KILN_ROW(int64_t, int64_t, a > b ? a : b); return;
        case KILN_BINARY_MIN: KILN_ROW(int64_t, int64_t, a < b ? a : b); return;
        case KILN_BINARY_MOD: KILN_ROW(int64_t, int64_t, kiln_mod_i64(a, b)); return;
        case KILN_BINARY_EQUAL: KILN_ROW(int64_t, uint8_t, a == b); return;
        case KILN_BINARY_LESS: KILN_ROW(int64_t, uint8_t, a < b); return;
        case KILN_BINARY_LESS_OR_EQUAL: KILN_ROW(int64_t, uint8_t, a <= b); return;
        case KILN_BINARY_GREATER: KILN_ROW(int64_t, uint8_t, a > b); return;
        case KILN_BINARY_GREATER_OR_EQUAL: KILN_ROW(int64_t, uint8_t, a >= b); return;
        default: return;
        }
    case KILN_DT_I32:
        switch (op) {
        case KILN_BINARY_ADD: KILN_ROW(int32_t, int32_t, (int32_t)((uint32_t)a + (uint32_t)b)); return;
        case KILN_BINARY_SUB: KILN_ROW(int32_t, int32_t, (int32_t)((uint32_t)a - (uint32_t)b)); return;
        case KILN_BINARY_MUL: KILN_ROW(int32_t, int32_t, (int32_t)((uint32_t)a * (uint32_t)b)); return;
        case KILN_BINARY_DIV: KILN_ROW(int32_t, int32_t, (int32_t)kiln_trunc_div_i64(a, b)); return;
        case KILN_BINARY_MAX: KILN_ROW(int32_t, int32_t, a > b ? a : b); return;
        case KILN_BINARY_MIN: KILN_ROW(int32_t, int32_t, a < b ? a : b); return;
        case KILN_BINARY_MOD: KILN_ROW(int32_t, int32_t, (int32_t)kiln_mod_i64(a, b)); return;
        case KILN_BINARY_EQUAL: KILN_ROW(int32_t, uint8_t, a == b); return;
        case KILN_BINARY_LESS: KILN_ROW(int32_t, uint8_t, a < b); return;
        case KILN_BINARY_LESS_OR_EQUAL: KILN_ROW(int32_t, uint8_t, a <= b); return;
        case KILN_BINARY_GREATER: KILN_ROW(int32_t, uint8_t, a > b); return;
        case KILN_BINARY_GREATER_OR_EQUAL: KILN_ROW(int32_t, uint8_t, a >= b); return;
        default: return;
        }
    case KILN_DT_BOOL:
        switch (op) {
        case KILN_BINARY_AND: KILN_ROW(uint8_t, uint8_t, (a != 0) & (b != 0)); return;
        case KILN_BINARY_OR: KILN_ROW(uint8_t, uint8_t, (a != 0) | (b != 0)); return;
        case KILN_BINARY_XOR: KILN_ROW(uint8_t, uint8_t, (a != 0) ^ (b != 0)); return;
        case KILN_BINARY_EQUAL: KILN_ROW(uint8_t, uint8_t, (a != 0) == (b != 0)); return;
        default: return;
        }
    default: return;
    }
}

static size_t kiln_dtype_size(int dtype) {
    switch (dtype) {
    case KILN_DT_F32: case KILN_DT_I32: return 4;
    case KILN_DT_I64: case KILN_DT_F64: return 8;
    case KILN_DT_F16: return 2;
    default: return 1;
    }
}

static inline int kiln_is_predicate(int op) { return op >= KILN_BINARY_EQUAL; }

static inline __attribute__((always_inline)) void kiln_binary_nd_body(int op, int dtype, size_t rank, const size_t *shape,
                                                                      const void *x, const ptrdiff_t *xs, const void *z,
                                                                      const ptrdiff_t *zs, void *y) {
    const size_t es = kiln_dtype_size(dtype), ys = kiln_is_predicate(op) ? 1 : es;
    if (rank == 0) { kiln_binary_row(op, dtype, 1, x, 0, z, 0, y); return; }
    // An empty output reads nothing (a broadcast row would otherwise load its one operand).
    for (size_t d = 0; d < rank; d++) if (shape[d] == 0) return;
    const size_t n = shape[rank - 1];
    const ptrdiff_t xi = xs[rank - 1], zi = zs[rank - 1];
    size_t rows = 1;
    for (size_t d = 0; d + 1 < rank; d++) rows *= shape[d];
    size_t index[KILN_MAX_RANK] = {0};
    const char *xp = (const char *)x, *zp = (const char *)z;
    char *yp = (char *)y;
    for (size_t r = 0; r < rows; r++) {
        kiln_binary_row(op, dtype, n, xp, xi, zp, zi, yp + r * n * ys);
        // Odometer over the outer dims.
        for (size_t d = rank - 1; d-- > 0;) {
            xp += xs[d] * (ptrdiff_t)es;
            zp += zs[d] * (ptrdiff_t)es;
            if (++index[d] < shape[d]) break;
            xp -= xs[d] * (ptrdiff_t)es * (ptrdiff_t)shape[d];
            zp -= zs[d] * (ptrdiff_t)es * (ptrdiff_t)shape[d];
            index[d] = 0;
        }
    }
}

void kiln_binary_nd__scalar(int op, int dtype, size_t rank, const size_t *shape, const void *x, const ptrdiff_t *xs,
                            const void *z, const ptrdiff_t *zs, void *y) {
    kiln_binary_nd_body(op, dtype, rank, shape, x, xs, z, zs, y);
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma")))
void kiln_binary_nd__avx2(int op, int dtype, size_t rank, const size_t *shape, const void *x, const ptrdiff_t *xs,
                          const void *z, const ptrdiff_t *zs, void *y) {
    kiln_binary_nd_body(op, dtype, rank, shape, x, xs, z, zs, y);
}
#endif

// One row of `where`: element strides ci, xi, zi (0 where broadcast, else 1 after merging, or
// any stride). Both operands are read unconditionally and blended by a mask built from the
// condition, so the contiguous cases vectorize.
#define KILN_WHERE_ROW(T)                                                                                          \
    static void kiln_where_row_##T(size_t n, const uint8_t *c, ptrdiff_t ci, const T *x, ptrdiff_t xi, const T *z, \
                                   ptrdiff_t zi, T *y) {                                                          \
        if (ci == 0) {                                                                                             \
            const T *s = c[0] ? x : z;                                                                             \
            const ptrdiff_t si = c[0] ? xi : zi;                                                                   \
            if (si == 0) {                                                                                         \
                const T v = s[0];                                                                                  \
                for (size_t i = 0; i < n; i++) y[i] = v;                                                           \
            } else if (si == 1) {                                                                                  \
                memcpy(y, s, n * sizeof(T));                                                                       \
            } else {                                                                                               \
                for (size_t i = 0; i < n; i++) y[i] = s[(ptrdiff_t)i * si];                                        \
            }                                                                                                      \
        } else if (ci == 1 && xi == 1 && zi == 1) {                                                                \
            for (size_t i = 0; i < n; i++) {                                                                       \
                const T m = (T)0 - (T)(c[i] != 0);                                                                 \
                y[i] = (T)((x[i] & m) | (z[i] & (T)~m));                                                           \
            }                                                                                                      \
        } else if (ci == 1 && xi == 0 && zi == 1) {                                                                \
            const T a = x[0];                                                                                      \
            for (size_t i = 0; i < n; i++) {                                                                       \
                const T m = (T)0 - (T)(c[i] != 0);                                                                 \
                y[i] = (T)((a & m) | (z[i] & (T)~m));                                                              \
            }                                                                                                      \
        } else if (ci == 1 && xi == 1 && zi == 0) {                                                                \
            const T b = z[0];                                                                                      \
            for (size_t i = 0; i < n; i++) {                                                                       \
                const T m = (T)0 - (T)(c[i] != 0);                                                                 \
                y[i] = (T)((x[i] & m) | (b & (T)~m));                                                              \
            }                                                                                                      \
        } else if (ci == 1 && xi == 0 && zi == 0) {                                                                \
            const T a = x[0], b = z[0];                                                                            \
            for (size_t i = 0; i < n; i++) {                                                                       \
                const T m = (T)0 - (T)(c[i] != 0);                                                                 \
                y[i] = (T)((a & m) | (b & (T)~m));                                                                 \
            }                                                                                                      \
        } else {                                                                                                   \
            for (size_t i = 0; i < n; i++)                                                                         \
                y[i] = c[(ptrdiff_t)i * ci] ? x[(ptrdiff_t)i * xi] : z[(ptrdiff_t)i * zi];                         \
        }                                                                                                          \
    }
KILN_WHERE_ROW(uint8_t)
KILN_WHERE_ROW(uint16_t)
KILN_WHERE_ROW(uint32_t)
KILN_WHERE_ROW(uint64_t)
#undef KILN_WHERE_ROW

void kiln_where_nd__scalar(size_t size, size_t rank, const size_t *shape, const uint8_t *c, const ptrdiff_t *cs,
                           const void *x, const ptrdiff_t *xs, const void *z, const ptrdiff_t *zs, void *y) {
    for (size_t d = 0; d < rank; d++) if (shape[d] == 0) return;
    const size_t n = rank ? shape[rank - 1] : 1;
    const ptrdiff_t ci = rank ? cs[rank - 1] : 0, xi = rank ? xs[rank - 1] : 0, zi = rank ? zs[rank - 1] : 0;
    size_t rows = 1;
    for (size_t d = 0; d + 1 < rank; d++) rows *= shape[d];
    size_t index[KILN_MAX_RANK] = {0};
    ptrdiff_t co = 0, xo = 0, zo = 0;
    char *yp = (char *)y;
    const char *xp = (const char *)x, *zp = (const char *)z;
    const ptrdiff_t es = (ptrdiff_t)size;
    for (size_t r = 0; r < rows; r++) {
        char *yr = yp + r * n * size;
        switch (size) {
        case 1: kiln_where_row_uint8_t(n, c + co, ci, (const uint8_t *)(xp + xo * es), xi, (const uint8_t *)(zp + zo * es), zi, (uint8_t *)yr); break;
        case 2: kiln_where_row_uint16_t(n, c + co, ci, (const uint16_t *)(xp + xo * es), xi, (const uint16_t *)(zp + zo * es), zi, (uint16_t *)yr); break;
        case 4: kiln_where_row_uint32_t(n, c + co, ci, (const uint32_t *)(xp + xo * es), xi, (const uint32_t *)(zp + zo * es), zi, (uint32_t *)yr); break;
        case 8: kiln_where_row_uint64_t(n, c + co, ci, (const uint64_t *)(xp + xo * es), xi, (const uint64_t *)(zp + zo * es), zi, (uint64_t *)yr); break;
        default:
            for (size_t i = 0; i < n; i++) {
                const ptrdiff_t k = (ptrdiff_t)i;
                memcpy(yr + i * size, c[co + k * ci] ? xp + (xo + k * xi) * es : zp + (zo + k * zi) * es, size);
            }
        }
        // Odometer over the outer dims.
        for (size_t d = rank > 0 ? rank - 1 : 0; d-- > 0;) {
            co += cs[d]; xo += xs[d]; zo += zs[d];
            if (++index[d] < shape[d]) break;
            co -= cs[d] * (ptrdiff_t)shape[d]; xo -= xs[d] * (ptrdiff_t)shape[d]; zo -= zs[d] * (ptrdiff_t)shape[d];
            index[d] = 0;
        }
    }
}

static inline float kiln_half_to_float(uint16_t h) {
    const uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    uint32_t bits;
    if (exp == 0) {
        if (mant == 0) { bits = sign; }
        else { // subnormal
            float v = (float)mant / 16777216.0f; // 2^-24
            memcpy(&bits, &v, 4);
            bits |= sign;
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 112) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

// Reads element i of type `from` as double (exact for every supported integer below 2^53
// and every float), or as int64 for integer targets.
static inline double kiln_read_f(int from, const void *x, size_t i) {
    switch (from) {
    case KILN_DT_F32: return ((const float *)x)[i];
    case KILN_DT_F64: return ((const double *)x)[i];
    case KILN_DT_F16: return kiln_half_to_float(((const uint16_t *)x)[i]);
    case KILN_DT_I64: return (double)((const int64_t *)x)[i];
    case KILN_DT_I32: return ((const int32_t *)x)[i];
    case KILN_DT_U8: case KILN_DT_BOOL: return ((const uint8_t *)x)[i];
    case KILN_DT_I8: return ((const int8_t *)x)[i];
    default: return 0;
    }
}

static inline int64_t kiln_read_i(int from, const void *x, size_t i) {
    switch (from) {
    case KILN_DT_I64: return ((const int64_t *)x)[i];
    case KILN_DT_I32: return ((const int32_t *)x)[i];
    case KILN_DT_U8: case KILN_DT_BOOL: return ((const uint8_t *)x)[i];
    case KILN_DT_I8: return ((const int8_t *)x)[i];
    default: {
        const double v = kiln_read_f(from, x, i);
        // Float to integer truncates toward zero; out-of-range and NaN give INT64_MIN (as x86 does).
        if (!(v > -9223372036854775808.0 && v < 9223372036854775808.0)) return INT64_MIN;
        return (int64_t)v;
    }
    }
}

// Tight loops for the common pairs (the general path reads through a switch per element).
#define KILN_CAST_LOOP(FROM_T, TO_T) \
    do { const FROM_T *xs = (const FROM_T *)x; TO_T *ys = (TO_T *)y; for (size_t i = 0; i < n; i++) ys[i] = (TO_T)xs[i]; return 1; } while (0)

int kiln_cast__scalar(int from, int to, size_t n, const void *x, void *y) {
    if (to == KILN_DT_F32) {
        switch (from) {
        case KILN_DT_BOOL: case KILN_DT_U8: KILN_CAST_LOOP(uint8_t, float);
        case KILN_DT_I8: KILN_CAST_LOOP(int8_t, float);
        case KILN_DT_I32: KILN_CAST_LOOP(int32_t, float);
        case KILN_DT_I64: KILN_CAST_LOOP(int64_t, float);
        case KILN_DT_F64: KILN_CAST_LOOP(double, float);
        default: break;
        }
    }
    if (to == KILN_DT_I64) {
        switch (from) {
        case KILN_DT_BOOL: case KILN_DT_U8: KILN_CAST_LOOP(uint8_t, int64_t);
        case KILN_DT_I32: KILN_CAST_LOOP(int32_t, int64_t);
        default: break;
        }
    }
    if (to == KILN_DT_I32 && from == KILN_DT_I64) KILN_CAST_LOOP(int64_t, int32_t);
    if (from == KILN_DT_F16 && to != KILN_DT_F32) return 0;
    if (to == KILN_DT_F16) return 0;
    switch (to) {
    case KILN_DT_F32:
        if (from == KILN_DT_F32) { memcpy(y, x, n * 4); return 1; }
        if (from == KILN_DT_I64) { for (size_t i = 0; i < n; i++) ((float *)y)[i] = (float)((const int64_t *)x)[i]; return 1; }
        for (size_t i = 0; i < n; i++) ((float *)y)[i] = (float)kiln_read_f(from, x, i);
        return 1;
    case KILN_DT_F64: for (size_t i = 0; i < n; i++) ((double *)y)[i] = kiln_read_f(from, x, i); return 1;
    case KILN_DT_I64: for (size_t i = 0; i < n; i++) ((int64_t *)y)[i] = kiln_read_i(from, x, i); return 1;
    case KILN_DT_I32: for (size_t i = 0; i < n; i++) ((int32_t *)y)[i] = (int32_t)kiln_read_i(from, x, i); return 1;
    case KILN_DT_I8: for (size_t i = 0; i < n; i++) ((int8_t *)y)[i] = (int8_t)kiln_read_i(from, x, i); return 1;
    case KILN_DT_U8: for (size_t i = 0; i < n; i++) ((uint8_t *)y)[i] = (uint8_t)kiln_read_i(from, x, i); return 1;
    case KILN_DT_BOOL: for (size_t i = 0; i < n; i++) ((uint8_t *)y)[i] = kiln_read_f(from, x, i) != 0; return 1;
    default: return 0;
    }
}

// The names of kiln_binary.inc, in order.
#define KILN_BINARY(NAME, n, code) #n,
static const char *const kiln_binary_names[] = {
#include "kiln_binary.inc"
};
#undef KILN_BINARY
#define KILN_BINARY(NAME, n, code) code,
static const int kiln_binary_codes[] = {
#include "kiln_binary.inc"
};
#undef KILN_BINARY

const char *kiln_binary_name_at(size_t i) {
    return i < sizeof kiln_binary_names / sizeof kiln_binary_names[0] ? kiln_binary_names[i] : NULL;
}

int kiln_binary_code(const char *name) {
    for (size_t i = 0; kiln_binary_name_at(i); i++)
        if (strcmp(kiln_binary_names[i], name) == 0) return kiln_binary_codes[i];
    return 0;
}
