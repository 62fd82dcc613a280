// The store of a GEMM microkernel's accumulators, shared by the float32 and compressed-weight
// kernels of each x86 tile: add the tile already in C (`accumulate`), column and row bias and the
// activation in registers where the activation allows, then one store per row (masked or through
// a small buffer for a partial tile); other activations run over the stored tile. Loops over rows
// run to the tile's height with rows past `mr` skipped, so the arrays stay in registers.
// Internal to CKilnKernels.
#ifndef KILN_GEMM_STORE_H
#define KILN_GEMM_STORE_H
#if defined(__x86_64__)
#include "kiln_kernels.h"
#include "kiln_simd_activate.h"
#include "kiln_unary.h"

#include <immintrin.h>
#include <string.h>

/// Stores lo/hi (columns 0-7 and 8-15 of 6 rows) into C[0..mr, 0..nc] with the tile's epilogue.
KILN_TARGET_AVX2 static inline __attribute__((always_inline)) void kiln_store_tile256(__m256 *lo, __m256 *hi, size_t mr, size_t nc,
                                                                                   float *c, size_t ldc, const kiln_tile_args *t) {
    if (t && t->accumulate) {
        float tile[16] = {0};
        for (int i = 0; i < 6; i++) if ((size_t)i < mr) {
            const float *row = c + i * ldc;
            if (nc == 16) {
                lo[i] = _mm256_add_ps(lo[i], _mm256_loadu_ps(row));
                hi[i] = _mm256_add_ps(hi[i], _mm256_loadu_ps(row + 8));
            } else {
                memcpy(tile, row, nc * sizeof(float));
                lo[i] = _mm256_add_ps(lo[i], _mm256_loadu_ps(tile));
                hi[i] = _mm256_add_ps(hi[i], _mm256_loadu_ps(tile + 8));
            }
        }
    }
    const int registers = t && kiln_unary_in_registers(t);
    if (registers) {
        if (t->col_bias) {
            float cb[16] = {0};
            memcpy(cb, t->col_bias, (nc < 16 ? nc : 16) * sizeof(float));
            const __m256 cb0 = _mm256_loadu_ps(cb), cb1 = _mm256_loadu_ps(cb + 8);
            for (int i = 0; i < 6; i++) { lo[i] = _mm256_add_ps(lo[i], cb0); hi[i] = _mm256_add_ps(hi[i], cb1); }
        }
        if (t->row_bias) {
            for (int i = 0; i < 6; i++) {
                const __m256 rb = _mm256_set1_ps(t->row_bias[(size_t)i < mr ? i : 0]);
                lo[i] = _mm256_add_ps(lo[i], rb);
                hi[i] = _mm256_add_ps(hi[i], rb);
            }
        }
        kiln_activate256(lo, 6, t);
        kiln_activate256(hi, 6, t);
    }
    if (nc == 16) {
        for (int i = 0; i < 6; i++) if ((size_t)i < mr) {
            _mm256_storeu_ps(c + i * ldc, lo[i]);
            _mm256_storeu_ps(c + i * ldc + 8, hi[i]);
        }
    } else {
        float tile[16];
        for (int i = 0; i < 6; i++) if ((size_t)i < mr) {
            _mm256_storeu_ps(tile, lo[i]);
            _mm256_storeu_ps(tile + 8, hi[i]);
            memcpy(c + i * ldc, tile, nc * sizeof(float));
        }
    }
    if (t && !registers) kiln_tile_args_apply(mr, nc, c, ldc, t);
}

/// Stores lo/hi (columns 0-15 and 16-31 of 8 rows) into C[0..mr, 0..nc] with the tile's epilogue.
/// NV (a compile-time 1 or 2): the vectors per row the tile computed (with 1, `hi` is never read and nc ≤ 16).
KILN_TARGET_AVX512 static inline __attribute__((always_inline)) void kiln_store_tile512_nv(const int NV, __m512 *lo, __m512 *hi,
                                                                                        size_t mr, size_t nc, float *c, size_t ldc,
                                                                                        const kiln_tile_args *t) {
    const __mmask16 m0 = (__mmask16)(nc >= 16 ? 0xffffu : (1u << nc) - 1u);
    const __mmask16 m1 = (__mmask16)(nc >= 32 ? 0xffffu : nc > 16 ? (1u << (nc - 16)) - 1u : 0u);
    if (t && t->accumulate) {
        for (int i = 0; i < 8; i++) if ((size_t)i < mr) {
            lo[i] = _mm512_add_ps(lo[i], _mm512_maskz_loadu_ps(m0, c + i * ldc));
            if (NV == 2) hi[i] = _mm512_add_ps(hi[i], _mm512_maskz_loadu_ps(m1, c + i * ldc + 16));
        }
    }
    const int registers = t && kiln_unary_in_registers(t);
    if (registers) {
        if (t->col_bias) {
            const __m512 cb0 = _mm512_maskz_loadu_ps(m0, t->col_bias);
            for (int i = 0; i < 8; i++) lo[i] = _mm512_add_ps(lo[i], cb0);
            if (NV == 2) {
                const __m512 cb1 = _mm512_maskz_loadu_ps(m1, t->col_bias + 16);
                for (int i = 0; i < 8; i++) hi[i] = _mm512_add_ps(hi[i], cb1);
            }
        }
        if (t->row_bias) {
            for (int i = 0; i < 8; i++) {
                const __m512 rb = _mm512_set1_ps(t->row_bias[(size_t)i < mr ? i : 0]);
                lo[i] = _mm512_add_ps(lo[i], rb);
                if (NV == 2) hi[i] = _mm512_add_ps(hi[i], rb);
            }
        }
        kiln_activate512(lo, 8, t);
        if (NV == 2) kiln_activate512(hi, 8, t);
    }
    if (NV == 1) {
        for (int i = 0; i < 8; i++) if ((size_t)i < mr) _mm512_mask_storeu_ps(c + i * ldc, m0, lo[i]);
    } else if (nc == 32) {
        for (int i = 0; i < 8; i++) if ((size_t)i < mr) {
            _mm512_storeu_ps(c + i * ldc, lo[i]);
            _mm512_storeu_ps(c + i * ldc + 16, hi[i]);
        }
    } else {
        for (int i = 0; i < 8; i++) if ((size_t)i < mr) {
            _mm512_mask_storeu_ps(c + i * ldc, m0, lo[i]);
            _mm512_mask_storeu_ps(c + i * ldc + 16, m1, hi[i]);
        }
    }
    if (t && !registers) kiln_tile_args_apply(mr, nc, c, ldc, t);
}

/// Stores lo/hi (columns 0-15 and 16-31 of 8 rows) into C[0..mr, 0..nc] with the tile's epilogue.
KILN_TARGET_AVX512 static inline __attribute__((always_inline)) void kiln_store_tile512(__m512 *lo, __m512 *hi, size_t mr, size_t nc,
                                                                                     float *c, size_t ldc, const kiln_tile_args *t) {
    kiln_store_tile512_nv(2, lo, hi, mr, nc, c, ldc, t);
}

#endif
#endif
