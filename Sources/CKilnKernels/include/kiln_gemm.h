// The unary functions, packed weights, epilogues and the float32 GEMM microkernels and drivers.
// Part of kiln_kernels.h, the kernel library's umbrella header.
#ifndef KILN_GEMM_H
#define KILN_GEMM_H

#include <stddef.h>
#include <stdint.h>
#include "kiln_cpu.h"

#ifdef __cplusplus
extern "C" {
#endif

// MARK: GEMM

/// The unary functions (kiln_unary.inc): elementwise `f32_unary` kernels and GEMM/convolution
/// epilogues use the same codes (an epilogue's activation 0 means none).
#define KILN_UNARY(NAME, name, code, scalar, in_registers) KILN_UNARY_##NAME = code,
enum { KILN_UNARY_NONE = 0,
#include "kiln_unary.inc"
};
#undef KILN_UNARY

/// The code of the unary function named `name` in kiln_unary.inc, or 0 (KILN_UNARY_NONE).
int kiln_unary_code(const char *name);
/// The name of unary function `code`, or NULL. Codes run from 1 to `kiln_unary_count()`.
const char *kiln_unary_name(int code);
/// The largest unary function code.
int kiln_unary_count(void);

/// How the weight operand B (K x N) is stored: in panels of `nr` columns, each panel
/// K rows of `nr` entries (the last panel zero-padded).
enum {
    KILN_B_F32 = 0,        // float32 entries
    KILN_B_INT8 = 1,       // int8 entries q: (q - zero[kb][n]) * scale[kb][n]
    KILN_B_UINT8 = 2,      // uint8 entries, same formula
    KILN_B_LUT = 3,        // nbits-wide indices packed LSB-first per panel row: lut[group(n)][i] * scale[n]
    // The layouts below pack along K: each panel is ceil(K / G) rows of nr uint32 words, word
    // (g, j) holding column j's values for k = g·G + t at bits [t·w, t·w + w) (w bits a value,
    // G = 32 / w of them a word, unused high bits and rows past K zero). A microkernel loads one
    // row of words and gets G steps of k from it by shifts alone.
    KILN_B_INT4 = 4,       // 4-bit integers (w = 4, G = 8), two's complement when is_signed; scale and zero as KILN_B_INT8
    KILN_B_LUT_K = 5,      // nbits-wide table indices (w = nbits, G = 32 / nbits): lut[group(n)][i] * scale[n]
};

/// Values a uint32 word of a K-packed layout (KILN_B_INT4, KILN_B_LUT_K) holds: 32 / bits.
static inline size_t kiln_k_pack_group(size_t bits) { return bits ? 32 / bits : 0; }

typedef struct kiln_packed_b {
    int kind;
    size_t k, n, nr;
    const void *data;          // panels; or, for KILN_B_F32 with ldb != 0, a row-major K x N matrix
    size_t ldb;                // KILN_B_F32 only: row stride of an unpacked B (0 = packed panels)
    // KILN_B_INT8 / KILN_B_UINT8 / KILN_B_INT4: scale and zero point per (K block, column), block
    // size k_block, panel by panel: [panels][k / k_block][nr] (kiln_panel_block), so that a panel's
    // scales stream beside its values.
    const float *scale;
    const float *zero;
    size_t k_block;
    // KILN_B_LUT: lut[groups][entries] float32, group of column n = n / group_size; optional per-column scale.
    const float *lut;
    size_t entries, group_size, nbits;
    const float *column_scale;
    int is_signed;             // KILN_B_INT4: two's complement nibbles
    // The microkernel for a compressed B (decoding in registers), or NULL: each panel is then
    // decoded into scratch and the float32 microkernel runs on it.
    const struct kiln_packed_b_ukernel *q_ukernel;
} kiln_packed_b;

/// The nr scales (or zero points, from `base`) of K block `blk` of panel `p`.
static inline const float *kiln_panel_block(const float *base, const kiln_packed_b *b, size_t p, size_t blk) {
    return base + (p * (b->k / b->k_block) + blk) * b->nr;
}

typedef struct kiln_epilogue {
    const float *bias;   // per column, or NULL
    int activation;
    float alpha, beta;
    const float *row_bias; // per row (indexed by the absolute row of C), or NULL
    int accumulate;        // GEMM only: C already holds a residual; the product is added to it (before bias and activation)
} kiln_epilogue;

/// What a microkernel does with its accumulators before it stores them: with `accumulate`, add
/// the tile already in C (a later block of K); then bias per column (`col_bias`, from the tile's
/// first column) and per row (`row_bias`, from its first row), in that order, then the activation
/// (`KILN_UNARY_*`, 0 none; alpha and beta as in `kiln_epilogue`).
typedef struct kiln_tile_args {
    const float *col_bias;
    const float *row_bias;
    int activation;
    float alpha, beta;
    int accumulate;
} kiln_tile_args;

/// A microkernel: C[0..mr, 0..nc] = epilogue(A[0..mr, 0..k] * B[0..k, 0..NR]), B's rows `ldb`
/// floats apart (NR for a packed panel); nc <= NR columns stored. A is row-major with row stride
/// `lda`, or, when lda == 0, packed: element (i, p) at a[p * MR + i] for the kernel's MR rows (rows
/// past mr zero). `t` is NULL for no epilogue.
typedef void (*kiln_f32_gemm_ukernel)(size_t mr, size_t nc, size_t k, const float *a, size_t lda,
                                      const float *b, size_t ldb, float *c, size_t ldc, const kiln_tile_args *t);

/// A microkernel over a compressed B (KILN_B_INT8 … KILN_B_LUT_K): as `kiln_f32_gemm_ukernel`
/// with B panel `panel` of `b` decoded inside the k loop (integers widened, table indices
/// looked up in registers), the per-column scale applied to the accumulators and per-block
/// scales at decode. Layouts a kernel has no register path for are decoded a block of k at a
/// time into a buffer on the stack and multiplied by the float32 microkernel of the same tile.
typedef void (*kiln_q_gemm_fn)(size_t mr, size_t nc, size_t k, const float *a, size_t lda, const struct kiln_packed_b *b,
                               size_t panel, float *c, size_t ldc, const kiln_tile_args *t);
typedef struct kiln_packed_b_ukernel {
    kiln_q_gemm_fn fn;
} kiln_packed_b_ukernel;

#define KILN_Q_UKERNEL_PARAMS size_t mr, size_t nc, size_t k, const float *a, size_t lda, const struct kiln_packed_b *b, \
    size_t panel, float *c, size_t ldc, const kiln_tile_args *t

/// The compressed-B microkernel of the float32 microkernel `name` (same tile), or NULL.
const kiln_packed_b_ukernel *kiln_q_gemm_ukernel_named(const char *name);

/// Decodes rows [k0, k0 + kc) of panel `p` of a packed B into `out` (kc x nr float32), each
/// value dequantized as the layout says.
void kiln_unpack_b_rows(const struct kiln_packed_b *b, size_t p, size_t k0, size_t kc, float *out);

#define KILN_UKERNEL_PARAMS size_t mr, size_t nc, size_t k, const float *a, size_t lda, const float *b, size_t ldb, float *c, \
    size_t ldc, const kiln_tile_args *t
/// An indirect microkernel: C[0..mr, 0..nc] = epilogue(A · B) with A's element (i, q·run + j) at
/// rows[i][offsets[q] + j] (an implicit im2col: one base pointer per output pixel; K in runs of
/// `run` contiguous elements, one offset per run: a window tap's channels, or a row of taps), B a
/// packed panel of the kernel's NR columns (K rows, K a multiple of `run`). `t` as for
/// `kiln_f32_gemm_ukernel`.
typedef void (*kiln_f32_igemm_ukernel)(size_t mr, size_t nc, size_t k, const float *const *rows, const int32_t *offsets, size_t run,
                                       const float *b, float *c, size_t ldc, const kiln_tile_args *t);
#define KILN_IGEMM_PARAMS size_t mr, size_t nc, size_t k, const float *const *rows, const int32_t *offsets, size_t run, \
    const float *b, float *c, size_t ldc, const kiln_tile_args *t

// The microkernels of kiln_gemm.inc (a row's entry points are defined only where it is built).
#define KILN_GEMM(MR, NR, ISA, isa, BUILT, igemm) \
    void kiln_f32_gemm_##MR##x##NR##__##isa(KILN_UKERNEL_PARAMS); \
    void kiln_q_gemm_##MR##x##NR##__##isa(KILN_Q_UKERNEL_PARAMS); \
    void kiln_f32_igemm_##MR##x##NR##__##isa(KILN_IGEMM_PARAMS);
#include "kiln_gemm.inc"
#undef KILN_GEMM

/// One microkernel of kiln_gemm.inc as this build has it: its tile, ISA and entry points (NULL
/// where the row is not built for this CPU family, or has no indirect kernel).
typedef struct kiln_gemm_config {
    const char *name; // f32_gemm_6x16__avx2
    size_t mr, nr;
    int isa;          // KILN_ISA_*
    kiln_f32_gemm_ukernel f32;
    kiln_packed_b_ukernel q;
    kiln_f32_igemm_ukernel igemm;
    int has_igemm;    // the row has an indirect kernel (on the CPU family it is built for)
} kiln_gemm_config;

/// The rows of kiln_gemm.inc, in order.
size_t kiln_gemm_config_count(void);
/// Row `i` of kiln_gemm.inc, or NULL.
const kiln_gemm_config *kiln_gemm_config_at(size_t i);

/// Indirect GEMM over output pixels [m_begin, m_end) and panels [p_begin, p_end) of B: pixel r
/// (oy = r / ow, ox = r % ow) reads its window at x + oy · row_step + ox · pixel_step plus
/// offsets[q] + j for step q · run + j of K (x a padded image, so every offset is inside it). C
/// row-major (ldc), epilogue as `kiln_f32_gemm`; `scratch` holds a decoded panel for a compressed B.
void kiln_f32_igemm(kiln_f32_igemm_ukernel ukernel, size_t mr, const kiln_packed_b *b, const float *x, size_t row_step,
                    size_t pixel_step, size_t ow, const int32_t *offsets, size_t run, float *c, size_t ldc, size_t m_begin,
                    size_t m_end, size_t p_begin, size_t p_end, const kiln_epilogue *epilogue, float *scratch);

/// A microkernel by name (e.g. "f32_gemm_6x16__avx2") with its tile, or NULL when this
/// build has no such kernel or the host cannot run it.
kiln_f32_gemm_ukernel kiln_f32_gemm_ukernel_named(const char *name, size_t *mr, size_t *nr);

/// Bytes of scratch one `kiln_f32_gemm` call needs (decoded panel for compressed B).
size_t kiln_f32_gemm_scratch_bytes(const kiln_packed_b *b);

/// C[m_begin..m_end, panels p_begin..p_end] = epilogue(A * B). A is M x K row-major (lda), or,
/// when lda == 0, packed in tiles of mr rows (tile t at a + t * K * mr, element (i, p) of it at
/// [p * mr + i], the last tile zero-padded; m_begin a multiple of mr). C row-major (ldc). `scratch` holds `kiln_f32_gemm_scratch_bytes` bytes (may be NULL for f32 B).
void kiln_f32_gemm(kiln_f32_gemm_ukernel ukernel, size_t mr, const kiln_packed_b *b,
                   const float *a, size_t lda, float *c, size_t ldc,
                   size_t m_begin, size_t m_end, size_t p_begin, size_t p_end,
                   const kiln_epilogue *epilogue, float *scratch);

/// C[m x n] = epilogue(A[m x k] · B) for narrow B (a few columns, given transposed: `bt`, n rows
/// of k floats) with A packed in row tiles of `mr` ≤ 8 (the layout of `kiln_f32_gemm` with
/// lda == 0): dot products along k. The epilogue's bias is per column, `row_bias` per row from row 0.
void kiln_f32_gemm_narrow_packed(size_t mr, size_t m, size_t n, size_t k, const float *a, const float *bt, float *c, size_t ldc,
                                 const kiln_epilogue *e);

/// im2col for one image in CHW layout as rows: row (c, ky, kx), one column per output pixel.
void kiln_f32_im2col_rows__scalar(size_t channels, size_t h, size_t w, const float *x,
                                  size_t kh, size_t kw, size_t sh, size_t sw, size_t dh, size_t dw, size_t pt, size_t pl,
                                  size_t oh, size_t ow, float *rows);

/// im2col straight into GEMM panels: panels [p_begin, p_end) of nr output pixels, each K = (c, ky, kx)
/// rows of nr values (zero outside the image and past the last pixel), panel p at
/// packed + (p - p_begin) * K * nr; nr ≤ 64.
void kiln_f32_im2col_pack__scalar(size_t channels, size_t h, size_t w, const float *x, size_t kh, size_t kw, size_t sh,
                                  size_t sw, size_t dh, size_t dw, size_t pt, size_t pl, size_t oh, size_t ow, size_t nr,
                                  size_t p_begin, size_t p_end, float *packed);

#if defined(__x86_64__)
void kiln_f32_im2col_pack__avx2(size_t channels, size_t h, size_t w, const float *x, size_t kh, size_t kw, size_t sh,
                                size_t sw, size_t dh, size_t dw, size_t pt, size_t pl, size_t oh, size_t ow, size_t nr,
                                size_t p_begin, size_t p_end, float *packed);
void kiln_f32_im2col_pack__avx512(size_t channels, size_t h, size_t w, const float *x, size_t kh, size_t kw, size_t sh,
                                  size_t sw, size_t dh, size_t dw, size_t pt, size_t pl, size_t oh, size_t ow, size_t nr,
                                  size_t p_begin, size_t p_end, float *packed);
#endif
/// `kiln_f32_im2col_pack__scalar` in the widest variant the host runs (AVX-512: vector runs for strides 1 and
/// 2; AVX2: stride-2 runs inside the row).
void kiln_f32_im2col_pack(size_t channels, size_t h, size_t w, const float *x, size_t kh, size_t kw, size_t sh, size_t sw,
                          size_t dh, size_t dw, size_t pt, size_t pl, size_t oh, size_t ow, size_t nr, size_t p_begin,
                          size_t p_end, float *packed);

/// Packs a row-major K x N float matrix (row stride ldb, column stride cs) into panels of nr.
void kiln_f32_pack_b(size_t k, size_t n, size_t nr, const float *b, size_t ldb, size_t cs, float *packed);

/// Decodes panel `p` of a packed B into `out` (K x nr float32).
void kiln_unpack_b_panel(const kiln_packed_b *b, size_t p, float *out);

/// Applies an epilogue to a row-major m x n block (bias per column).
void kiln_f32_epilogue(size_t m, size_t n, float *c, size_t ldc, const float *bias, const kiln_epilogue *e);

#ifdef __cplusplus
}
#endif
#endif
