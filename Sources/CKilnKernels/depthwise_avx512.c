// AVX-512 depthwise convolution over CHW planes read in place (depthwise_direct.h): 16 lanes,
// opmask loads and stores, stride 2 through a two-vector permute.
#if defined(__x86_64__)
#include "kiln_kernels.h"
#include "kiln_simd_activate.h"
#include "kiln_unary.h"

#include <immintrin.h>

// Lanes [lo, hi) of 16, clamped.
KILN_TARGET_AVX512 static inline __mmask16 kiln_dw512_lanes(long lo, long hi) {
    if (lo < 0) lo = 0;
    if (hi > 16) hi = 16;
    if (hi <= lo) return 0;
    return (__mmask16)(((1u << (hi - lo)) - 1u) << lo);
}

#define KILN_DW_TARGET KILN_TARGET_AVX512
#define KILN_DW_NAME(x) kiln_dw512_##x
#define KILN_DW_LANES 16
#define KILN_DW_VEC __m512
#define KILN_DW_MASK __mmask16
#define KILN_DW_SET1(f) _mm512_set1_ps(f)
#define KILN_DW_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define KILN_DW_LOAD(mask, p) _mm512_maskz_loadu_ps(mask, p)
#define KILN_DW_LOADU(p) _mm512_loadu_ps(p)
#define KILN_DW_EVENS(lo, hi) \
    _mm512_permutex2var_ps(lo, _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0), hi)
#define KILN_DW_STORE(p, mask, v) _mm512_mask_storeu_ps(p, mask, v)
#define KILN_DW_ACTIVATE(v, count, t) kiln_activate512(v, count, t)
#include "depthwise_direct.h"

KILN_TARGET_AVX512 void kiln_f32_dwconv2d__avx512(size_t channels, size_t h, size_t w, const float *x, size_t kh, size_t kw,
                                                  const float *weight, size_t sh, size_t sw, size_t dh, size_t dw, size_t pt, size_t pl,
                                                  size_t oh, size_t ow, float *y, const kiln_epilogue *e, float *scratch) {
    // Outputs at most 8 wide fill half a ZMM register per row: the 8-lane (AVX2) sweep runs them
    // faster (measured 30–35% on 7×7 planes).
    if (ow <= 8 || !kiln_dw512_planes(channels, h, w, x, kh, kw, weight, sh, sw, dh, dw, pt, pl, oh, ow, y, e))
        kiln_f32_dwconv2d__avx2(channels, h, w, x, kh, kw, weight, sh, sw, dh, dw, pt, pl, oh, ow, y, e, scratch);
}
#endif
