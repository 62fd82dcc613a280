// Kiln compute kernels: CPU feature detection, float32 GEMM with packed (and possibly
// compressed) weights, elementwise maps, softmax, layer norm and pooling.
//
// Kernel names follow `<dtype>_<op>_<tile>__<isa>`. Every kernel has a `__scalar`
// reference; ISA variants are compiled with `__attribute__((target(...)))` and only
// called when `kiln_cpu_features()` reports the ISA (including OS-enabled register state).
#ifndef KILN_KERNELS_H
#define KILN_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// MARK: CPU features

enum {
    KILN_CPU_SSE2 = 1u << 0,
    KILN_CPU_X86_V2 = 1u << 1,   // SSE3, SSSE3, SSE4.1, SSE4.2, POPCNT, CX16, LAHF-SAHF
    KILN_CPU_X86_V3 = 1u << 2,   // v2 + AVX, AVX2, BMI1, BMI2, F16C, FMA, LZCNT, MOVBE, OS saves YMM
    KILN_CPU_X86_V4 = 1u << 3,   // v3 + AVX-512 F, BW, CD, DQ, VL, OS saves opmask and ZMM
    KILN_CPU_NEON = 1u << 8,     // arm64 Advanced SIMD
    KILN_CPU_ARM_DOTPROD = 1u << 9, // NEON + dot product + half-precision arithmetic
};

/// The instruction sets kernels are built for, each with the CPU features (KILN_CPU_*) a host
/// needs to run its kernels: the one list (Kiln's `ISA` maps its cases to these codes).
#define KILN_ISAS(X) X(SCALAR, scalar, 0u) X(AVX2, avx2, KILN_CPU_X86_V3) X(AVX512, avx512, KILN_CPU_X86_V4) X(NEON, neon, KILN_CPU_NEON)
#define KILN_DECLARE_ISA(NAME, name, features) KILN_ISA_##NAME,
enum { KILN_ISAS(KILN_DECLARE_ISA) KILN_ISA_COUNT };
#undef KILN_DECLARE_ISA
/// The CPU features ISA `isa` needs, or all bits for an unknown code.
uint32_t kiln_isa_features(int isa);
/// The name of ISA `isa` (`avx2`), or NULL.
const char *kiln_isa_name(int isa);

/// The host's feature bits (detected once; thread-safe).
uint32_t kiln_cpu_features(void);

/// The arm64 feature bits for an `AT_HWCAP` value (ASIMD → NEON; ASIMD with ASIMDDP, FPHP and
/// ASIMDHP → DOTPROD). On every platform, so faked values can be tested anywhere.
uint32_t kiln_cpu_from_hwcap(unsigned long hwcap);

/// One CPU feature as the host reports it, for `kiln host`.
typedef struct {
    const char *name; // e.g. "avx2", "os-ymm" (XCR0 saves YMM state), "asimddp"
    int present;
} kiln_cpu_flag;

/// The individual features behind `kiln_cpu_features()`: CPUID leaves 1, 7 and 0x80000001 and
/// the OS-enabled register state in XCR0 on x86-64, HWCAP on arm64. Returns how many entries
/// `kiln_cpu_flags` holds (at most 64).
int kiln_cpu_flag_list(kiln_cpu_flag *flags, int capacity);

/// Detects the feature bits again (for tests); does not touch the cached record.
uint32_t kiln_cpu_detect(void);

// MARK: Threads

typedef void (*kiln_task_fn)(void *ctx, size_t index);

/// Runs fn(ctx, i) for i in [0, count) on the calling thread and the pool's workers (one per
/// further core, started on first use). One loop at a time; a busy pool runs the loop inline.
void kiln_parallel_for(size_t count, kiln_task_fn fn, void *ctx);
/// As `kiln_parallel_for` on at most `threads` threads (the caller and workers 1 … threads - 1).
void kiln_parallel_for_threads(size_t count, size_t threads, kiln_task_fn fn, void *ctx);


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
    // KILN_B_INT8 / KILN_B_UINT8: scale and zero point, [k_blocks][n_padded], block size k_block.
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

// MARK: Elementwise, normalization, pooling (C the compiler vectorizes, built once per ISA)

/// The ISAs the vectorized families are built for; every family has `__scalar`.
#if defined(__x86_64__)
#define KILN_VECTOR_ISAS(X) X(scalar) X(avx2)
#else
#define KILN_VECTOR_ISAS(X) X(scalar)
#endif

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

void kiln_f32_unary__scalar(int op, size_t n, const float *x, float *y, float alpha, float beta);
#if defined(__x86_64__)
void kiln_f32_unary__avx2(int op, size_t n, const float *x, float *y, float alpha, float beta);
#endif
/// y[o, i] = x[o, i] (op) z[o, i], with strides 0 for broadcast operands: x advances by
/// (xo, xi) per (outer, inner) step, z by (zo, zi).
void kiln_f32_binary__scalar(int op, size_t outer, size_t inner, const float *x, size_t xo, size_t xi,
                             const float *z, size_t zo, size_t zi, float *y);

/// Broadcasting binary op over `rank` dims (strides in elements, 0 where broadcast; y contiguous).
/// `dtype` is the operands' type; comparisons and logic write bool (one byte).
#define KILN_DECLARE_BINARY_ND(isa) \
    void kiln_binary_nd__##isa(int op, int dtype, size_t rank, const size_t *shape, const void *x, const ptrdiff_t *xs, \
                               const void *z, const ptrdiff_t *zs, void *y);
KILN_VECTOR_ISAS(KILN_DECLARE_BINARY_ND)
#undef KILN_DECLARE_BINARY_ND

/// y = cond ? x : z with broadcasting (strides in elements), elements of `size` bytes.
void kiln_where_nd__scalar(size_t size, size_t rank, const size_t *shape, const uint8_t *c, const ptrdiff_t *cs,
                           const void *x, const ptrdiff_t *xs, const void *z, const ptrdiff_t *zs, void *y);

/// Converts n elements between dtypes (KILN_DT_*); returns 0 when the pair is not supported.
int kiln_cast__scalar(int from, int to, size_t n, const void *x, void *y);

/// Copies a strided n-d block of `size`-byte elements (strides in bytes) into a strided one.
void kiln_copy_nd__scalar(size_t size, size_t rank, const size_t *shape, const void *x, const ptrdiff_t *xs,
                          void *y, const ptrdiff_t *ys);
/// Fills n elements of `size` bytes with the value at `value`.
void kiln_fill__scalar(size_t size, size_t n, const void *value, void *y);

/// Reductions over the middle axis of [outer, n, inner]: y[outer, inner].
enum { KILN_REDUCE_SUM = 1, KILN_REDUCE_MEAN, KILN_REDUCE_MAX, KILN_REDUCE_MIN, KILN_REDUCE_PROD, KILN_REDUCE_L2, KILN_REDUCE_SUM_SQUARE };
/// Softmax-like maps over the middle axis of [outer, n, inner].
enum { KILN_SOFTMAX = 1, KILN_LOG_SOFTMAX = 2 };
#define KILN_DECLARE_NORM(isa) \
    void kiln_f32_reduce__##isa(int op, size_t outer, size_t n, size_t inner, const float *x, float *y); \
    void kiln_f32_softmax_nd__##isa(int op, size_t outer, size_t n, size_t inner, const float *x, float *y); \
    void kiln_f32_layer_norm__##isa(size_t rows, size_t n, const float *x, const float *gamma, const float *beta, \
                                    float epsilon, float *y); \
    void kiln_f32_attention__##isa(size_t sq, size_t skv, size_t d, size_t dv, size_t h_begin, size_t h_end, const float *q, \
                                   size_t q_row, const float *k, size_t kv_row, const float *v, size_t v_row, const float *mask, \
                                   size_t mask_h, size_t mask_i, float scale, float *y, size_t y_row, float *scratch);
/// kiln_f32_attention: heads [h_begin, h_end) of one batch entry over 3-D inputs (rows q_row, kv_row,
/// v_row, y_row floats apart; head h at column h·d, or h·dv for values and output):
/// softmax_j(scale · q_i·k_j + mask[h·mask_h + i·mask_i + j]) · v, mask NULL for none; a row whose
/// best score is −∞ gives zeros. `scratch` holds w · (d + 1) floats, w = skv rounded up to 16 (a row of
/// scores, the head's keys transposed).
KILN_VECTOR_ISAS(KILN_DECLARE_NORM)
#undef KILN_DECLARE_NORM
/// argmax/argmin over the middle axis of [outer, n, inner] (first or last index of the extreme).
void kiln_f32_arg_reduce__scalar(int largest, int select_last, size_t outer, size_t n, size_t inner, const float *x, int64_t *y);

/// Gathers along the middle axis of [outer, n, inner] (elements of `size` bytes): y[outer, count, inner].
/// Returns the first out-of-range index position + 1, or 0 when all indices are in range (negative ones wrap).
size_t kiln_gather__scalar(size_t size, size_t outer, size_t n, size_t inner, const void *x, const int64_t *indices,
                           size_t count, void *y);

/// 2-D max or average pooling of [channels, h, w] images with padding (top, left, bottom, right), strides, dilations.
/// `count_pad`: averages divide by the full window (padding counted), else by the cells inside.
#define KILN_DECLARE_POOL(isa) \
    void kiln_f32_pool2d__##isa(int max, int count_pad, size_t channels, size_t h, size_t w, const float *x, size_t kh, \
                                size_t kw, size_t sh, size_t sw, size_t dh, size_t dw, size_t pt, size_t pl, size_t pb, \
                                size_t pr, size_t oh, size_t ow, float *y);
KILN_VECTOR_ISAS(KILN_DECLARE_POOL)
#undef KILN_DECLARE_POOL

void kiln_f32_global_average_pool__scalar(size_t channels, size_t n, const float *x, float *y);
void kiln_f32_global_max_pool__scalar(size_t channels, size_t n, const float *x, float *y);
/// Depthwise 2-D convolution over one image in CHW layout, with the epilogue. `scratch` holds
/// `kiln_f32_dwconv2d_scratch_floats` floats (NULL takes a slower path that needs none).
void kiln_f32_dwconv2d__scalar(size_t channels, size_t h, size_t w, const float *x,
                               size_t kh, size_t kw, const float *weight,
                               size_t sh, size_t sw, size_t dh, size_t dw, size_t pt, size_t pl,
                               size_t oh, size_t ow, float *y, const kiln_epilogue *e, float *scratch);
#if defined(__x86_64__)
/// AVX2 reads narrow planes in place like AVX-512 (outputs up to 16 wide, or 32 at stride 2; up to
/// 7 taps wide) and takes the padded-plane path, `kiln_f32_dwconv2d_padded__avx2`, otherwise.
void kiln_f32_dwconv2d_padded__avx2(size_t channels, size_t h, size_t w, const float *x,
                                    size_t kh, size_t kw, const float *weight,
                                    size_t sh, size_t sw, size_t dh, size_t dw, size_t pt, size_t pl,
                                    size_t oh, size_t ow, float *y, const kiln_epilogue *e, float *scratch);
void kiln_f32_dwconv2d__avx2(size_t channels, size_t h, size_t w, const float *x,
                             size_t kh, size_t kw, const float *weight,
                             size_t sh, size_t sw, size_t dh, size_t dw, size_t pt, size_t pl,
                             size_t oh, size_t ow, float *y, const kiln_epilogue *e, float *scratch);
/// The AVX-512 variant reads the planes in place (masked loads for the padding) and needs no scratch
/// for strides 1 and 2.
void kiln_f32_dwconv2d__avx512(size_t channels, size_t h, size_t w, const float *x,
                               size_t kh, size_t kw, const float *weight,
                               size_t sh, size_t sw, size_t dh, size_t dw, size_t pt, size_t pl,
                               size_t oh, size_t ow, float *y, const kiln_epilogue *e, float *scratch);
#endif
// MARK: Channels-last (NHWC) convolution and pooling

/// im2col of one NHWC image as GEMM rows: row r (output pixel r = oy · ow + ox) of `a` (rows from
/// `row_begin`, K = kh · kw · c floats each) holds the window's pixels in (ky, kx, c) order, zeros
/// outside the image.
void kiln_f32_im2col_nhwc__scalar(size_t h, size_t w, size_t c, const float *x, size_t kh, size_t kw, size_t sh, size_t sw,
                                  size_t dh, size_t dw, size_t pt, size_t pl, size_t ow, size_t row_begin, size_t row_end,
                                  float *a);

/// Copies `planes` images of h × w cells of `inner` floats into hp × wp cells with pt rows and pl
/// cells of zeros before them and zeros after (hp ≥ pt + h, wp ≥ pl + w): the padded input of an
/// indirect convolution (NHWC: one plane of C-float cells; NCHW: C planes of single floats).
void kiln_f32_pad_planes(size_t planes, size_t h, size_t w, size_t inner, const float *x, size_t pt, size_t pl, size_t hp,
                         size_t wp, float *out);
/// Padded rows [row_begin, row_end) of c planes of h × w floats gathered into hp × wp cells of c
/// channels (channels-last), pt rows and pl cells of zeros before the image and zeros after.
void kiln_f32_pad_planes_to_cells(size_t c, size_t h, size_t w, const float *x, size_t pt, size_t pl, size_t hp, size_t wp,
                                  float *out, size_t row_begin, size_t row_end);
/// Padded rows [row_begin, row_end) of kiln_f32_pad_planes (rows numbered over all planes, planes ·
/// hp of them), so threads can each pad a part.
void kiln_f32_pad_rows(size_t planes, size_t h, size_t w, size_t inner, const float *x, size_t pt, size_t pl, size_t hp,
                       size_t wp, float *out, size_t row_begin, size_t row_end);

/// im2col of one NCHW image as GEMM rows (channels-last output): row r (output pixel r) of `a`
/// holds the window in (c, ky, kx) order, zeros outside the image; rows [row_begin, row_end).
void kiln_f32_im2col_nchw_rows__scalar(size_t c, size_t h, size_t w, const float *x, size_t kh, size_t kw, size_t sh, size_t sw,
                                       size_t dh, size_t dw, size_t pt, size_t pl, size_t ow, size_t row_begin, size_t row_end,
                                       float *a);

/// Depthwise convolution of one NHWC image: output rows [row_begin, row_end), channels
/// [c_begin, c_end) of y [oh, ow, c]; weight [kh, kw, c]; bias per channel (absolute index) and
/// activation from `e` (may be NULL). Vectors run along channels.
/// 2-D max or average pooling of one NHWC image, output rows [row_begin, row_end); pads (top, left,
/// bottom, right) as `kiln_f32_pool2d`.
#define KILN_DECLARE_NHWC(isa) \
    void kiln_f32_dwconv2d_nhwc__##isa(size_t h, size_t w, size_t c, const float *x, size_t kh, size_t kw, const float *weight, \
                                       size_t sh, size_t sw, size_t dh, size_t dw, size_t pt, size_t pl, size_t oh, size_t ow, \
                                       size_t row_begin, size_t row_end, size_t c_begin, size_t c_end, float *y, \
                                       const kiln_epilogue *e); \
    void kiln_f32_pool2d_nhwc__##isa(int max, int count_pad, size_t h, size_t w, size_t c, const float *x, size_t kh, size_t kw, \
                                     size_t sh, size_t sw, size_t dh, size_t dw, size_t pt, size_t pl, size_t pb, size_t pr, \
                                     size_t oh, size_t ow, size_t row_begin, size_t row_end, float *y);
KILN_DECLARE_NHWC(scalar)
#if defined(__x86_64__)
KILN_DECLARE_NHWC(avx2)
KILN_DECLARE_NHWC(avx512)
#endif
#undef KILN_DECLARE_NHWC

/// A 3×3, stride-1, undilated channels-last convolution of one image by Winograd F(2×2, 3×3)
/// (winograd.c): x [h, w, c] with pads pt (top) and pl (left) → y [oh, ow, m] (pixels ldc floats
/// apart), output tiles (2×2 pixel blocks, row-major over ceil(oh/2) × ceil(ow/2))
/// [tile_begin, tile_end) in blocks of `block` tiles, output channels of B panels [p_begin, p_end). `u` holds the 16 packed B operands
/// (U[ξ] = (G g Gᵀ)[ξ], K = c, N = m) for `ukernel` (tile rows `mr`); `e` gives bias, activation
/// and `accumulate` (y holds a residual). `scratch`: kiln_f32_winograd_scratch_floats(c, m, block)
/// floats. isa: a KILN_ISA_* code, the transforms' vector width (AVX2, AVX-512; others scalar).
void kiln_f32_conv3x3_winograd(int isa, kiln_f32_gemm_ukernel ukernel, size_t mr, const kiln_packed_b *u, size_t h, size_t w,
                               size_t c, const float *x, size_t pt, size_t pl, size_t oh, size_t ow, float *y, size_t ldc,
                               size_t tile_begin, size_t tile_end, size_t p_begin, size_t p_end, size_t block,
                               const kiln_epilogue *e, float *scratch);
size_t kiln_f32_winograd_scratch_floats(size_t c, size_t m, size_t block);

/// Scratch floats the depthwise kernels need for one call.
size_t kiln_f32_dwconv2d_scratch_floats(size_t kh, size_t kw, size_t sh, size_t sw, size_t dh, size_t dw, size_t oh, size_t ow);
/// im2col for one image in CHW layout: rows = output pixels, columns = (c, ky, kx).
void kiln_f32_im2col__scalar(size_t channels, size_t h, size_t w, const float *x,
                             size_t kh, size_t kw, size_t sh, size_t sw, size_t dh, size_t dw, size_t pt, size_t pl,
                             size_t oh, size_t ow, float *cols);
/// y[c, r] = x[r, c] for rows [r_begin, r_end) of a rows × cols matrix x (y is cols × rows).
#define KILN_DECLARE_TRANSPOSE(isa) \
    void kiln_f32_transpose_rows__##isa(size_t rows, size_t cols, const float *x, float *y, size_t r_begin, size_t r_end);
KILN_VECTOR_ISAS(KILN_DECLARE_TRANSPOSE)
#undef KILN_DECLARE_TRANSPOSE
/// `kiln_f32_transpose_rows__*` in the widest variant the host runs.
void kiln_f32_transpose_rows(size_t rows, size_t cols, const float *x, float *y, size_t r_begin, size_t r_end);
/// y[c, r] = x[r, c] for a rows x cols block.
void kiln_f32_transpose__scalar(size_t rows, size_t cols, const float *x, float *y);

/// Per-channel y = x · a[c] + b[c] over [batch, channels, inner] (unfolded batch_norm).
void kiln_f32_channel_affine__scalar(size_t batch, size_t channels, size_t inner, const float *x, const float *a, const float *b,
                                     float *y);
/// instance_norm over [batch, channels, inner].
void kiln_f32_instance_norm__scalar(size_t batch, size_t channels, size_t inner, const float *x, const float *scale,
                                    const float *bias, float epsilon, float *y);
/// top_k along the middle axis of [outer, n, inner]; `scratch` holds n × 16 bytes.
void kiln_f32_top_k__scalar(int largest, size_t outer, size_t n, size_t inner, size_t k, const float *x, float *values,
                            int64_t *indices, void *scratch);

/// Resize along the middle axis of [outer, n, inner] to m: y[o, i] = Σ_t weight[i, t] · x[o, index[i, t]]
/// (taps with weight 0 skipped), for the output rows (o, i) with o · m + i in [row_begin, row_end). A
/// row of one tap of weight 1 (nearest) is copied.
void kiln_f32_resize_axis__scalar(size_t outer, size_t n, size_t inner, const float *x, size_t m, size_t taps,
                                  const int32_t *index, const float *weight, float *y, size_t row_begin, size_t row_end);
/// Adds columns (rows (c, ky, kx), one column per input pixel of h × w) into y [channels, oh, ow]:
/// the scatter half of a transposed convolution.
void kiln_f32_col2im__scalar(size_t channels, size_t h, size_t w, size_t kh, size_t kw, size_t sh, size_t sw, size_t dh,
                             size_t dw, size_t pt, size_t pl, size_t oh, size_t ow, const float *cols, float *y);

/// One LSTM step for one sequence: gate pre-activations xw (input projection + both biases) and
/// hr (recurrent projection), order i, o, f, c; optional peepholes [3 × hidden] (i, o, f); c and h
/// updated (c, h, xw and hr must not overlap). The AVX2 and AVX-512 forms vectorize the same steps.
void kiln_f32_lstm_gates__scalar(size_t hidden, const float *xw, const float *hr, const float *peep, float *c, float *h);
#if defined(__x86_64__)
void kiln_f32_lstm_gates__avx2(size_t hidden, const float *xw, const float *hr, const float *peep, float *c, float *h);
void kiln_f32_lstm_gates__avx512(size_t hidden, const float *xw, const float *hr, const float *peep, float *c, float *h);
#endif
/// GRU reset gate applied to the state: rh = sigmoid(xw_r + hr_r) ⊙ h (for linear_before_reset = 0).
void kiln_f32_gru_reset__scalar(size_t hidden, const float *xw, const float *hr, const float *h, float *rh);
/// One GRU step for one sequence: xw and hr in gate order z, r, h; hr's h part is R_h·h + Rb_h when
/// linear_before_reset, else R_h·(r ⊙ h) + Rb_h; h updated.
void kiln_f32_gru_gates__scalar(size_t hidden, int linear_before_reset, const float *xw, const float *hr, float *h);
#if defined(__x86_64__)
/// The same GRU steps vectorized for AVX2 and AVX-512 (xw, hr, h and rh must not overlap).
void kiln_f32_gru_reset__avx2(size_t hidden, const float *xw, const float *hr, const float *h, float *rh);
void kiln_f32_gru_gates__avx2(size_t hidden, int linear_before_reset, const float *xw, const float *hr, float *h);
void kiln_f32_gru_reset__avx512(size_t hidden, const float *xw, const float *hr, const float *h, float *rh);
void kiln_f32_gru_gates__avx512(size_t hidden, int linear_before_reset, const float *xw, const float *hr, float *h);
#endif

// MARK: Exact 1-D k-means

/// The j in [lo, hi] minimizing prev[j] + max(0, (q[i]-q[j]) - (s[i]-s[j])^2 / (w[i]-w[j]));
/// ties keep the lowest j. Its cost goes to *best_cost. Variants give identical results.
size_t kiln_kmeans_argmin__scalar(const double *prev, const double *w, const double *s, const double *q, size_t lo,
                                  size_t hi, size_t i, double *best_cost);
#if defined(__x86_64__)
size_t kiln_kmeans_argmin__avx2(const double *prev, const double *w, const double *s, const double *q, size_t lo,
                                size_t hi, size_t i, double *best_cost);
#endif

/// One layer of windowed k-means dynamic programming: for each row r, out[r] = min over columns
/// c <= last[r] of cf[c] + cost(c, r), the cost of the cluster between them from prefix sums with
/// point masses folded in ((aw, as, aq) per column, (bw, bs, bq) per row; 0 when empty or when
/// ca[c] > rb[r]); arg[r] the lowest such c, or -1 when none is feasible (out[r] = inf). Rows are
/// solved by divide and conquer on the monotone argmin.
void kiln_kmeans_window_layer(const double *aw, const double *as, const double *aq, const uint32_t *ca,
                              const double *cf, size_t ncols, const double *bw, const double *bs, const double *bq,
                              const uint32_t *rb, const int64_t *last, size_t nrows, double *out, int32_t *arg);

/// Integer sums of the values in one bin of keys: count, sum and square sum of r = key - the
/// bin's first key, and the least and greatest key seen (a zeroed bin has min_key = UINT32_MAX).
typedef struct {
    uint64_t n, r, r2;
    uint32_t min_key, max_key;
} kiln_kmeans_bin;

/// Adds every value of x[0..n) to its 16-bit bin of keys (65536 bins). Returns 1 when a value is
/// NaN or infinite (those are still binned; the caller refuses them).
int kiln_kmeans_histogram16(const float *x, size_t n, kiln_kmeans_bin *bins);
/// Adds every value whose key some target holds to that target's sub-bin: target t holds keys
/// los[t] ... his[t] in sub-bins of 2^shifts[t] keys at slots[t << fan_bits ...]; targets of
/// 16-bit bin b are starts[b] .. starts[b + 1], sorted; los and his hold a sentinel entry past
/// the `targets` ones (lo UINT32_MAX, hi 0). `probe` is the largest power of two not above the
/// most targets of one bin (0 for one). Other values go to 8 spare slots after the targets'.
void kiln_kmeans_refine(const float *x, size_t n, const int32_t *starts, const uint32_t *los, const uint32_t *his,
                        const uint8_t *shifts, unsigned fan_bits, int64_t probe, int64_t targets, kiln_kmeans_bin *slots);
/// As kiln_kmeans_refine with sub-bins of one key: counts[(t << fan_bits) + key - los[t]].
void kiln_kmeans_refine_exact(const float *x, size_t n, const int32_t *starts, const uint32_t *los, const uint32_t *his,
                              unsigned fan_bits, int64_t probe, int64_t targets, uint32_t *counts);
/// Palettization of one stretch of a channel: each raw value (divided by scale when has_scale)
/// takes the index of its nearest table entry, the number of the span - 1 ascending midpoints
/// below it (ties to the lower), or bin_index[its 16-bit key bin] when that is not negative (a
/// bin all of whose values take one entry; bin_index may be NULL); adds raw^2 to *signal and
/// (raw - table[index] * scale)^2 to *noise.
void kiln_palettize_assign(const float *raw, size_t n, float scale, int has_scale, const double *mids, size_t span,
                           const float *table, const int16_t *bin_index, uint8_t *indices, double *signal, double *noise);
/// Packs n indices of `bits` bits (1-8) LSB-first into dst.
void kiln_pack_bits(const uint8_t *indices, size_t n, unsigned bits, uint8_t *dst);

/// Counts each float16 bit pattern of x[0..n) (65536 counters).
void kiln_kmeans_histogram_half(const uint16_t *x, size_t n, uint32_t *counts);
/// Palettization of float16 values by table: value_of[h] is pattern h as a float, index_of[h]
/// its entry; sums as kiln_palettize_assign (no scale).
void kiln_palettize_assign_half(const uint16_t *raw, size_t n, const float *value_of, const uint8_t *index_of,
                                const float *table, uint8_t *indices, double *signal, double *noise);

#ifdef __cplusplus
}
#endif
#endif
