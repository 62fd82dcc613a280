// What the compressed-weight microkernels share: which layouts need values dequantized as they
// are decoded, whether a table lookup fits a register, and the fallback that decodes a block of
// k at a time and runs a float32 microkernel on it. Internal to CKilnKernels.
#ifndef KILN_GEMM_Q_H
#define KILN_GEMM_Q_H
#include "kiln_kernels.h"

#include <string.h>

/// Rows of k the fallback decodes at a time (with 32 columns, 8 KiB of stack).
#define KILN_Q_CHUNK 64

/// Whether integers are dequantized as they are decoded ((q - zero) · scale per K block) rather
/// than scaled once per column after the k loop: with a zero point or more than one K block.
static inline int kiln_q_needs_dequantize(const kiln_packed_b *b) {
    if (b->kind != KILN_B_INT8 && b->kind != KILN_B_UINT8 && b->kind != KILN_B_INT4) return 0;
    return b->zero != NULL || b->k_block < b->k;
}

/// Whether every run of `lanes` columns of a K-packed table layout reads one table, of at most
/// 16 entries (or 64 for 6-bit indices).
static inline int kiln_q_lut_in_registers(const kiln_packed_b *b, size_t lanes) {
    if (b->kind != KILN_B_LUT_K || b->group_size == 0) return 0;
    if (!(b->entries <= 16 || (b->nbits == 6 && lanes == 16))) return 0;
    return b->group_size % lanes == 0 || b->group_size >= b->n;
}

/// C = epilogue(A · B) for one panel by blocks of KILN_Q_CHUNK rows of k: each block decoded
/// (kiln_unpack_b_rows) into a stack buffer and multiplied by `f32` (whose tile has MR rows and
/// the panel's width), the blocks after the first added to C, the epilogue with the last.
static inline __attribute__((always_inline)) void kiln_q_gemm_chunked(kiln_f32_gemm_ukernel f32, size_t MR, size_t mr, size_t nc,
                                                                     size_t k, const float *a, size_t lda, const kiln_packed_b *b,
                                                                     size_t panel, float *c, size_t ldc, const kiln_tile_args *t) {
    float buf[KILN_Q_CHUNK * 32];
    const size_t nr = b->nr, chunk = KILN_Q_CHUNK * 32 / nr;
    size_t k0 = 0;
    do {
        const size_t kc = k - k0 < chunk ? k - k0 : chunk;
        kiln_unpack_b_rows(b, panel, k0, kc, buf);
        const int last = k0 + kc >= k;
        kiln_tile_args ct = {NULL, NULL, KILN_UNARY_NONE, 0, 0, 0};
        if (t && last) ct = *t;
        ct.accumulate = (t && t->accumulate) || k0 > 0;
        const int plain = !ct.accumulate && !ct.col_bias && !ct.row_bias && ct.activation == KILN_UNARY_NONE;
        f32(mr, nc, kc, lda ? a + k0 : a + k0 * MR, lda, buf, nr, c, ldc, plain ? NULL : &ct);
        k0 += kc;
    } while (k0 < k);
}

#endif
