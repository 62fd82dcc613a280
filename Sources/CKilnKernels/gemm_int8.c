// 8-bit integer GEMM with int32 accumulation (`matmul_integer`): C = (A − a_zero) · (B − b_zero),
// A uint8 (or int8, read with its sign bit flipped: a + 128 against a_zero + 128, the same
// differences), B int8 packed at compile time in panels of KILN_I8_NR columns with four k per
// column entry (the operand order of x86's `vpdpbusd` and arm64's `sdot`). Sums wrap modulo 2^32
// as int32 accumulation does, so every ISA's result is the same integers, bit for bit.
//
// The zero points are applied after the products: Σ(a − az)(b − bz) = Σab − az·Σb − bz·Σa + K·az·bz,
// with Σb per column stored with the panels and Σa per row computed once per call.
#include "kiln_kernels.h"

#include <string.h>

void kiln_s8_pack_b(size_t k, size_t n, const void *b, size_t ldb, int b_unsigned, const void *zero, size_t zero_count,
                    int8_t *packed, int32_t *sums) {
    const size_t k4 = (k + 3) / 4, panels = (n + KILN_I8_NR - 1) / KILN_I8_NR;
    const int shift = b_unsigned ? 128 : 0;
    memset(packed, 0, panels * k4 * KILN_I8_NR * 4);
    for (size_t j = 0; j < n; j++) {
        int32_t sum = 0;
        int8_t *panel = packed + (j / KILN_I8_NR) * k4 * KILN_I8_NR * 4 + (j % KILN_I8_NR) * 4;
        for (size_t p = 0; p < k; p++) {
            const int v = b_unsigned ? (int)((const uint8_t *)b)[p * ldb + j] : (int)((const int8_t *)b)[p * ldb + j];
            const int8_t q = (int8_t)(v - shift);
            panel[(p / 4) * KILN_I8_NR * 4 + p % 4] = q;
            sum += q;
        }
        sums[j] = sum;
        int z = 0;
        if (zero && zero_count) {
            const size_t zi = zero_count == 1 ? 0 : j;
            z = b_unsigned ? (int)((const uint8_t *)zero)[zi] : (int)((const int8_t *)zero)[zi];
        }
        sums[n + j] = z - shift;
    }
}

// Four bytes of row `a` from k = 4·g, past k's end zero, with the sign bits flipped by `flip`.
static inline uint32_t kiln_i8_quad(const uint8_t *a, size_t g, size_t k, uint32_t flip) {
    uint32_t v = 0;
    if (4 * g + 4 <= k) {
        memcpy(&v, a + 4 * g, 4);
        return v ^ flip;
    }
    uint8_t bytes[4] = {0, 0, 0, 0};
    for (size_t t = 0; 4 * g + t < k; t++) bytes[t] = (uint8_t)(a[4 * g + t] ^ (uint8_t)flip);
    memcpy(&v, bytes, 4);
    return v;
}

// Σ a' over row `a` (a' = a ^ 0x80 per byte when flipped).
static inline uint32_t kiln_i8_row_sum(const uint8_t *a, size_t k, int flip) {
    uint32_t s = 0;
    for (size_t p = 0; p < k; p++) s += (uint32_t)(uint8_t)(a[p] ^ (flip ? 0x80 : 0));
    return s;
}

// C[i][j] of column j (absolute) from its wrapped product sum: the zero points applied.
static inline int32_t kiln_i8_finish(uint32_t acc, uint32_t row_sum, size_t j, size_t n, size_t k, uint32_t az, const int32_t *sums) {
    const uint32_t colsum = (uint32_t)sums[j], bz = (uint32_t)sums[n + j];
    return (int32_t)(acc - az * colsum - bz * row_sum + (uint32_t)k * az * bz);
}

#define KILN_I8_GEMM_PARAMS size_t m_begin, size_t m_end, size_t n, size_t k, const uint8_t *a, size_t lda, int a_signed, \
    int32_t a_zero, const int8_t *b, const int32_t *sums, size_t p_begin, size_t p_end, int32_t *c, size_t ldc

void kiln_u8s8_gemm__scalar(KILN_I8_GEMM_PARAMS) {
    const size_t k4 = (k + 3) / 4;
    const uint32_t flip = a_signed ? 0x80808080u : 0, az = (uint32_t)(a_zero + (a_signed ? 128 : 0));
    for (size_t i = m_begin; i < m_end; i++) {
        const uint8_t *row = a + i * lda;
        const uint32_t rs = kiln_i8_row_sum(row, k, a_signed);
        for (size_t p = p_begin; p < p_end; p++) {
            const int8_t *panel = b + p * k4 * KILN_I8_NR * 4;
            uint32_t acc[KILN_I8_NR] = {0};
            for (size_t g = 0; g < k4; g++) {
                const uint32_t q = kiln_i8_quad(row, g, k, flip);
                const int8_t *bg = panel + g * KILN_I8_NR * 4;
                for (size_t j = 0; j < KILN_I8_NR; j++)
                    for (int t = 0; t < 4; t++) acc[j] += (uint32_t)((int32_t)((q >> (8 * t)) & 0xFF) * (int32_t)bg[j * 4 + t]);
            }
            for (size_t j = 0; j < KILN_I8_NR && p * KILN_I8_NR + j < n; j++)
                c[i * ldc + p * KILN_I8_NR + j] = kiln_i8_finish(acc[j], rs, p * KILN_I8_NR + j, n, k, az, sums);
        }
    }
}

#if defined(__x86_64__)
#include <immintrin.h>

// AVX2: pairs of k multiplied as int16 (`vpmaddwd`, exact: no saturating byte products), two
// lanes per column summed at the end; 16 columns (half a panel) by 2 rows at a time.
#define KILN_I8_AVX2 __attribute__((target("avx2,fma")))

KILN_I8_AVX2 static inline __m256i kiln_i8_quad_i16(uint32_t q) {
    return _mm256_broadcastq_epi64(_mm_cvtepu8_epi16(_mm_cvtsi32_si128((int)q)));
}

// Eight columns' int32 sums from two pair-form accumulators (columns 0–3 and 4–7, two lanes each).
KILN_I8_AVX2 static inline __m256i kiln_i8_fold(__m256i lo, __m256i hi) {
    return _mm256_permute4x64_epi64(_mm256_hadd_epi32(lo, hi), 0xD8);
}

KILN_I8_AVX2 static inline void kiln_i8_store8(__m256i v, size_t i, size_t j0, size_t n, size_t k, uint32_t az, uint32_t rs,
                                                const int32_t *sums, int32_t *c, size_t ldc) {
    int32_t lane[8];
    _mm256_storeu_si256((__m256i *)lane, v);
    for (size_t j = 0; j < 8 && j0 + j < n; j++) c[i * ldc + j0 + j] = kiln_i8_finish((uint32_t)lane[j], rs, j0 + j, n, k, az, sums);
}

KILN_I8_AVX2 void kiln_u8s8_gemm__avx2(KILN_I8_GEMM_PARAMS) {
    const size_t k4 = (k + 3) / 4;
    const uint32_t flip = a_signed ? 0x80808080u : 0, az = (uint32_t)(a_zero + (a_signed ? 128 : 0));
    for (size_t i = m_begin; i < m_end; i += 2) {
        const int two = i + 1 < m_end;
        const uint8_t *r0 = a + i * lda, *r1 = two ? r0 + lda : r0;
        const uint32_t rs0 = kiln_i8_row_sum(r0, k, a_signed), rs1 = two ? kiln_i8_row_sum(r1, k, a_signed) : 0;
        for (size_t p = p_begin; p < p_end; p++) {
            for (size_t half = 0; half < 2; half++) {
                const size_t j0 = p * KILN_I8_NR + half * 16;
                if (j0 >= n) break;
                const int8_t *bp = b + p * k4 * KILN_I8_NR * 4 + half * 64;
                __m256i x0 = _mm256_setzero_si256(), x1 = x0, x2 = x0, x3 = x0, y0 = x0, y1 = x0, y2 = x0, y3 = x0;
                for (size_t g = 0; g < k4; g++, bp += KILN_I8_NR * 4) {
                    const __m256i b0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)bp));
                    const __m256i b1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(bp + 16)));
                    const __m256i b2 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(bp + 32)));
                    const __m256i b3 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(bp + 48)));
                    const __m256i a0 = kiln_i8_quad_i16(kiln_i8_quad(r0, g, k, flip));
                    x0 = _mm256_add_epi32(x0, _mm256_madd_epi16(a0, b0));
                    x1 = _mm256_add_epi32(x1, _mm256_madd_epi16(a0, b1));
                    x2 = _mm256_add_epi32(x2, _mm256_madd_epi16(a0, b2));
                    x3 = _mm256_add_epi32(x3, _mm256_madd_epi16(a0, b3));
                    if (two) {
                        const __m256i a1 = kiln_i8_quad_i16(kiln_i8_quad(r1, g, k, flip));
                        y0 = _mm256_add_epi32(y0, _mm256_madd_epi16(a1, b0));
                        y1 = _mm256_add_epi32(y1, _mm256_madd_epi16(a1, b1));
                        y2 = _mm256_add_epi32(y2, _mm256_madd_epi16(a1, b2));
                        y3 = _mm256_add_epi32(y3, _mm256_madd_epi16(a1, b3));
                    }
                }
                kiln_i8_store8(kiln_i8_fold(x0, x1), i, j0, n, k, az, rs0, sums, c, ldc);
                kiln_i8_store8(kiln_i8_fold(x2, x3), i, j0 + 8, n, k, az, rs0, sums, c, ldc);
                if (two) {
                    kiln_i8_store8(kiln_i8_fold(y0, y1), i + 1, j0, n, k, az, rs1, sums, c, ldc);
                    kiln_i8_store8(kiln_i8_fold(y2, y3), i + 1, j0 + 8, n, k, az, rs1, sums, c, ldc);
                }
            }
        }
    }
}

// AVX-512 with VNNI: `vpdpbusd` multiplies four unsigned bytes of A by four signed bytes of B
// per int32 lane and adds them to it (wrapping); a panel row is two registers, up to 8 rows at
// a time. Without VNNI (an AVX-512 CPU before Cascade Lake), the AVX2 kernel runs.
#define KILN_I8_VNNI __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")))

KILN_I8_VNNI static inline void kiln_i8_finish16(__m512i acc, size_t i, size_t j0, size_t n, size_t k, uint32_t az, uint32_t rs,
                                                  const int32_t *sums, int32_t *c, size_t ldc) {
    if (j0 >= n) return;
    const size_t cols = n - j0 < 16 ? n - j0 : 16;
    const __mmask16 m = (__mmask16)((1u << cols) - 1u);
    const __m512i colsum = _mm512_maskz_loadu_epi32(m, sums + j0), bz = _mm512_maskz_loadu_epi32(m, sums + n + j0);
    const __m512i vaz = _mm512_set1_epi32((int)az), vrs = _mm512_set1_epi32((int)rs);
    __m512i r = _mm512_sub_epi32(acc, _mm512_mullo_epi32(vaz, colsum));
    r = _mm512_sub_epi32(r, _mm512_mullo_epi32(bz, vrs));
    r = _mm512_add_epi32(r, _mm512_mullo_epi32(_mm512_set1_epi32((int)((uint32_t)k * az)), bz));
    _mm512_mask_storeu_epi32(c + i * ldc + j0, m, r);
}

KILN_I8_VNNI static inline __attribute__((always_inline)) void kiln_i8_vnni_rows(size_t MR, size_t i, size_t k, const uint8_t *a,
                                                                                  size_t lda, uint32_t flip, const int8_t *panel,
                                                                                  __m512i *acc) {
    const size_t k4 = (k + 3) / 4, full = k / 4;
    for (size_t r = 0; r < 2 * MR; r++) acc[r] = _mm512_setzero_si512();
    const __m512i vflip = _mm512_set1_epi32((int)flip);
    size_t g = 0;
    for (; g < full; g++) {
        const __m512i b0 = _mm512_loadu_si512(panel + g * KILN_I8_NR * 4), b1 = _mm512_loadu_si512(panel + g * KILN_I8_NR * 4 + 64);
        for (size_t r = 0; r < MR; r++) {
            uint32_t q;
            memcpy(&q, a + (i + r) * lda + 4 * g, 4);
            const __m512i av = _mm512_xor_si512(_mm512_set1_epi32((int)q), vflip);
            acc[2 * r] = _mm512_dpbusd_epi32(acc[2 * r], av, b0);
            acc[2 * r + 1] = _mm512_dpbusd_epi32(acc[2 * r + 1], av, b1);
        }
    }
    for (; g < k4; g++) {
        const __m512i b0 = _mm512_loadu_si512(panel + g * KILN_I8_NR * 4), b1 = _mm512_loadu_si512(panel + g * KILN_I8_NR * 4 + 64);
        for (size_t r = 0; r < MR; r++) {
            const __m512i av = _mm512_set1_epi32((int)kiln_i8_quad(a + (i + r) * lda, g, k, flip));
            acc[2 * r] = _mm512_dpbusd_epi32(acc[2 * r], av, b0);
            acc[2 * r + 1] = _mm512_dpbusd_epi32(acc[2 * r + 1], av, b1);
        }
    }
}

KILN_I8_VNNI static void kiln_u8s8_gemm_vnni(KILN_I8_GEMM_PARAMS) {
    const size_t k4 = (k + 3) / 4;
    const uint32_t flip = a_signed ? 0x80808080u : 0, az = (uint32_t)(a_zero + (a_signed ? 128 : 0));
    for (size_t i = m_begin; i < m_end; i += 8) {
        const size_t mr = m_end - i < 8 ? m_end - i : 8;
        uint32_t rs[8];
        for (size_t r = 0; r < mr; r++) rs[r] = kiln_i8_row_sum(a + (i + r) * lda, k, a_signed);
        for (size_t p = p_begin; p < p_end; p++) {
            const int8_t *panel = b + p * k4 * KILN_I8_NR * 4;
            __m512i acc[16];
            if (mr == 8) kiln_i8_vnni_rows(8, i, k, a, lda, flip, panel, acc);
            else if (mr >= 4) {
                kiln_i8_vnni_rows(4, i, k, a, lda, flip, panel, acc);
                for (size_t r = 4; r < mr; r++) kiln_i8_vnni_rows(1, i + r, k, a, lda, flip, panel, acc + 2 * r);
            } else {
                for (size_t r = 0; r < mr; r++) kiln_i8_vnni_rows(1, i + r, k, a, lda, flip, panel, acc + 2 * r);
            }
            for (size_t r = 0; r < mr; r++) {
                kiln_i8_finish16(acc[2 * r], i + r, p * KILN_I8_NR, n, k, az, rs[r], sums, c, ldc);
                kiln_i8_finish16(acc[2 * r + 1], i + r, p * KILN_I8_NR + 16, n, k, az, rs[r], sums, c, ldc);
            }
        }
    }
}

void kiln_u8s8_gemm__avx512(KILN_I8_GEMM_PARAMS) {
    if (kiln_cpu_features() & KILN_CPU_X86_VNNI)
        kiln_u8s8_gemm_vnni(m_begin, m_end, n, k, a, lda, a_signed, a_zero, b, sums, p_begin, p_end, c, ldc);
    else
        kiln_u8s8_gemm__avx2(m_begin, m_end, n, k, a, lda, a_signed, a_zero, b, sums, p_begin, p_end, c, ldc);
}
#endif
