// AVX2 depthwise convolution over narrow CHW planes read in place (depthwise_direct.h): 8 lanes,
// masks as lane vectors for vmaskmov loads and stores, stride 2 through a shuffle of two vectors.
// Wide planes and other geometries take the padded-plane path (elementwise.c).
#if defined(__x86_64__)
#include "kiln_kernels.h"
#include "kiln_simd_activate.h"
#include "kiln_unary.h"

#include <immintrin.h>

// Lanes [lo, hi) of 8, as a vector of all-ones lanes.
KILN_TARGET_AVX2 static inline __m256i kiln_dw256_lanes(long lo, long hi) {
    if (lo < 0) lo = 0;
    if (hi > 8) hi = 8;
    const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_and_si256(_mm256_cmpgt_epi32(index, _mm256_set1_epi32((int)lo - 1)), _mm256_cmpgt_epi32(_mm256_set1_epi32((int)hi), index));
}

#define KILN_DW_TARGET KILN_TARGET_AVX2
#define KILN_DW_NAME(x) kiln_dw256_##x
#define KILN_DW_LANES 8
#define KILN_DW_VEC __m256
#define KILN_DW_MASK __m256i
#define KILN_DW_SET1(f) _mm256_set1_ps(f)
#define KILN_DW_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define KILN_DW_LOAD(mask, p) _mm256_maskload_ps(p, mask)
// lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6, then the 64-bit pairs reordered to lo0 lo2 lo4 lo6 hi0 hi2 hi4 hi6.
#define KILN_DW_LOADU(p) _mm256_loadu_ps(p)
#define KILN_DW_EVENS(lo, hi) \
    _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0))), 0xD8))
#define KILN_DW_STORE(p, mask, v) _mm256_maskstore_ps(p, mask, v)
#define KILN_DW_ACTIVATE(v, count, t) kiln_activate256(v, count, t)
#include "depthwise_direct.h"

KILN_TARGET_AVX2 void kiln_f32_dwconv2d__avx2(size_t channels, size_t h, size_t w, const float *x, size_t kh, size_t kw,
                                              const float *weight, size_t sh, size_t sw, size_t dh, size_t dw, size_t pt, size_t pl,
                                              size_t oh, size_t ow, float *y, const kiln_epilogue *e, float *scratch) {
    // Masked loads (vmaskmov) cost more than the padded copy on wide planes, where most vectors
    // are interior; they win on narrow outputs and stride 2 (measured: direct for outputs up to 16
    // wide, or 32 at stride 2).
    const int narrow = ow <= 16 || (sw == 2 && ow <= 32);
    if (!narrow || !kiln_dw256_planes(channels, h, w, x, kh, kw, weight, sh, sw, dh, dw, pt, pl, oh, ow, y, e))
        kiln_f32_dwconv2d_padded__avx2(channels, h, w, x, kh, kw, weight, sh, sw, dh, dw, pt, pl, oh, ow, y, e, scratch);
}
#endif
