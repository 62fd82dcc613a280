// The `map` kernels (kiln_map.inc): predicates on floats and maps on integers and booleans.
#include <math.h>
#include <string.h>
#include "kiln_kernels.h"

#define KILN_MAP(NAME, name, code) #name,
static const char *const kiln_map_names[] = {
#include "kiln_map.inc"
};
#undef KILN_MAP
#define KILN_MAP(NAME, name, code) code,
static const int kiln_map_codes[] = {
#include "kiln_map.inc"
};
#undef KILN_MAP

const char *kiln_map_name_at(size_t i) {
    return i < sizeof kiln_map_names / sizeof kiln_map_names[0] ? kiln_map_names[i] : NULL;
}

int kiln_map_code(const char *name) {
    for (size_t i = 0; kiln_map_name_at(i); i++)
        if (strcmp(kiln_map_names[i], name) == 0) return kiln_map_codes[i];
    return 0;
}

// Integer negation wraps (two's complement) as onnxruntime's does: computed in the unsigned type.
static int64_t neg64(int64_t v) { return (int64_t)(0 - (uint64_t)v); }
static int32_t neg32(int32_t v) { return (int32_t)(0 - (uint32_t)v); }

int kiln_map__scalar(int op, int dtype, size_t n, const void *x, void *y) {
    int base = op & 0xff;
    if (base == KILN_MAP_IS_NAN || base == KILN_MAP_IS_INF) {
        if (dtype != KILN_DT_F32 && dtype != KILN_DT_F64) return 0;
        int pos = (op & KILN_MAP_POSITIVE) != 0, negative = (op & KILN_MAP_NEGATIVE) != 0;
        uint8_t *out = y;
        for (size_t i = 0; i < n; i++) {
            double v = dtype == KILN_DT_F32 ? (double)((const float *)x)[i] : ((const double *)x)[i];
            out[i] = base == KILN_MAP_IS_NAN ? (uint8_t)isnan(v) : (uint8_t)(isinf(v) && (v > 0 ? pos : negative));
        }
        return 1;
    }
    if (base == KILN_MAP_NOT) {
        if (dtype != KILN_DT_BOOL) return 0;
        for (size_t i = 0; i < n; i++) ((uint8_t *)y)[i] = !((const uint8_t *)x)[i];
        return 1;
    }
    switch (dtype) {
    case KILN_DT_I64:
        if (base == KILN_MAP_ABS) {
            for (size_t i = 0; i < n; i++) { int64_t v = ((const int64_t *)x)[i]; ((int64_t *)y)[i] = v < 0 ? neg64(v) : v; }
            return 1;
        }
        if (base == KILN_MAP_NEG) {
            for (size_t i = 0; i < n; i++) ((int64_t *)y)[i] = neg64(((const int64_t *)x)[i]);
            return 1;
        }
        if (base == KILN_MAP_SIGN) {
            for (size_t i = 0; i < n; i++) { int64_t v = ((const int64_t *)x)[i]; ((int64_t *)y)[i] = (v > 0) - (v < 0); }
            return 1;
        }
        return 0;
    case KILN_DT_I32:
        if (base == KILN_MAP_ABS) {
            for (size_t i = 0; i < n; i++) { int32_t v = ((const int32_t *)x)[i]; ((int32_t *)y)[i] = v < 0 ? neg32(v) : v; }
            return 1;
        }
        if (base == KILN_MAP_NEG) {
            for (size_t i = 0; i < n; i++) ((int32_t *)y)[i] = neg32(((const int32_t *)x)[i]);
            return 1;
        }
        if (base == KILN_MAP_SIGN) {
            for (size_t i = 0; i < n; i++) { int32_t v = ((const int32_t *)x)[i]; ((int32_t *)y)[i] = (v > 0) - (v < 0); }
            return 1;
        }
        return 0;
    default:
        return 0;
    }
}
