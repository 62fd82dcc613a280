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

/// The host's feature bits (detected once; thread-safe).
uint32_t kiln_cpu_features(void);

/// Detects the feature bits again (for tests); does not touch the cached record.
uint32_t kiln_cpu_detect(void);

// MARK: Threads

typedef void (*kiln_task_fn)(void *ctx, size_t index);

/// Runs fn(ctx, i) for i in [0, count) on the calling thread and the pool's workers (one per
/// further core, started on first use). One loop at a time; a busy pool runs the loop inline.
void kiln_parallel_for(size_t count, kiln_task_fn fn, void *ctx);

/// Keeps freed heap memory for reuse (glibc: large blocks stay in the heap instead of being
/// unmapped), so per-run buffers do not fault fresh pages on every run. Process-wide; idempotent.
void kiln_memory_keep_freed(void);

// MARK: GEMM

/// Epilogue activations applied to each output element after bias.
enum {
    KILN_ACT_NONE = 0,
    KILN_ACT_RELU = 1,
    KILN_ACT_HARD_SWISH = 2,
    KILN_ACT_HARD_SIGMOID = 3,  // clamp(alpha * x + beta, 0, 1)
    KILN_ACT_GELU = 4,          // exact (erf)
    KILN_ACT_CLIP = 5,          // clamp(x, alpha, beta)
    KILN_ACT_SIGMOID = 6,
    KILN_ACT_TANH = 7,
};

/// How the weight operand B (K x N) is stored: in panels of `nr` columns, each panel
/// K rows of `nr` entries (the last panel zero-padded).
enum {
    KILN_B_F32 = 0,        // float32 entries
    KILN_B_INT8 = 1,       // int8 entries q: (q - zero[kb][n]) * scale[kb][n]
    KILN_B_UINT8 = 2,      // uint8 entries, same formula
    KILN_B_LUT = 3,        // nbits-wide indices packed LSB-first per panel row: lut[group(n)][i] * scale[n]
};

typedef struct kiln_packed_b {
    int kind;
    size_t k, n, nr;
    const void *data;          // panels
    // KILN_B_INT8 / KILN_B_UINT8: scale and zero point, [k_blocks][n_padded], block size k_block.
    const float *scale;
    const float *zero;
    size_t k_block;
    // KILN_B_LUT: lut[groups][entries] float32, group of column n = n / group_size; optional per-column scale.
    const float *lut;
    size_t entries, group_size, nbits;
    const float *column_scale;
} kiln_packed_b;

typedef struct kiln_epilogue {
    const float *bias;   // per column, or NULL
    int activation;
    float alpha, beta;
} kiln_epilogue;

/// A microkernel: C[0..mr, 0..nc] = A[0..mr, 0..k] * B[0..k, 0..NR], B's rows `ldb` floats
/// apart (NR for a packed panel); nc <= NR columns stored.
typedef void (*kiln_f32_gemm_ukernel)(size_t mr, size_t nc, size_t k, const float *a, size_t lda,
                                      const float *b, size_t ldb, float *c, size_t ldc);

/// The GEMM microkernels: name, rows, panel width, required feature bit.
#define KILN_F32_GEMM_UKERNELS_X86(X) \
    X(f32_gemm_6x16__avx2, 6, 16, KILN_CPU_X86_V3) \
    X(f32_gemm_8x16__avx512, 8, 16, KILN_CPU_X86_V4)
#define KILN_F32_GEMM_UKERNELS_ARM(X) \
    X(f32_gemm_4x8__neon, 4, 8, KILN_CPU_NEON)

void kiln_f32_gemm_4x8__scalar(size_t mr, size_t nc, size_t k, const float *a, size_t lda, const float *b, size_t ldb, float *c, size_t ldc);
void kiln_f32_gemm_4x16__scalar(size_t mr, size_t nc, size_t k, const float *a, size_t lda, const float *b, size_t ldb, float *c, size_t ldc);
#if defined(__x86_64__)
#define KILN_DECLARE_UKERNEL(name, mr, nr, feature) \
    void kiln_##name(size_t m, size_t nc, size_t k, const float *a, size_t lda, const float *b, size_t ldb, float *c, size_t ldc);
KILN_F32_GEMM_UKERNELS_X86(KILN_DECLARE_UKERNEL)
#undef KILN_DECLARE_UKERNEL
#endif
#if defined(__aarch64__)
#define KILN_DECLARE_UKERNEL(name, mr, nr, feature) \
    void kiln_##name(size_t m, size_t nc, size_t k, const float *a, size_t lda, const float *b, size_t ldb, float *c, size_t ldc);
KILN_F32_GEMM_UKERNELS_ARM(KILN_DECLARE_UKERNEL)
#undef KILN_DECLARE_UKERNEL
#endif

/// A microkernel by name (e.g. "f32_gemm_6x16__avx2") with its tile, or NULL when this
/// build has no such kernel or the host cannot run it.
kiln_f32_gemm_ukernel kiln_f32_gemm_ukernel_named(const char *name, size_t *mr, size_t *nr);

/// Bytes of scratch one `kiln_f32_gemm` call needs (decoded panel for compressed B).
size_t kiln_f32_gemm_scratch_bytes(const kiln_packed_b *b);

/// C[m_begin..m_end, panels p_begin..p_end] = epilogue(A * B). A is M x K row-major (lda),
/// C row-major (ldc). `scratch` holds `kiln_f32_gemm_scratch_bytes` bytes (may be NULL for f32 B).
void kiln_f32_gemm(kiln_f32_gemm_ukernel ukernel, size_t mr, const kiln_packed_b *b,
                   const float *a, size_t lda, float *c, size_t ldc,
                   size_t m_begin, size_t m_end, size_t p_begin, size_t p_end,
                   const kiln_epilogue *epilogue, float *scratch);

/// im2col for one image in CHW layout as rows: row (c, ky, kx), one column per output pixel.
void kiln_f32_im2col_rows__scalar(size_t channels, size_t h, size_t w, const float *x,
                                  size_t kh, size_t kw, size_t sh, size_t sw, size_t dh, size_t dw, size_t pt, size_t pl,
                                  size_t oh, size_t ow, float *rows);

/// Packs a row-major K x N float matrix (row stride ldb, column stride cs) into panels of nr.
void kiln_f32_pack_b(size_t k, size_t n, size_t nr, const float *b, size_t ldb, size_t cs, float *packed);

/// Decodes panel `p` of a packed B into `out` (K x nr float32).
void kiln_unpack_b_panel(const kiln_packed_b *b, size_t p, float *out);

/// Applies an epilogue to a row-major m x n block (bias per column).
void kiln_f32_epilogue(size_t m, size_t n, float *c, size_t ldc, const float *bias, const kiln_epilogue *e);

// MARK: Elementwise, normalization, pooling (scalar; the compiler vectorizes them)

enum {
    KILN_UNARY_RELU = 1, KILN_UNARY_HARD_SWISH, KILN_UNARY_HARD_SIGMOID, KILN_UNARY_GELU, KILN_UNARY_CLIP,
    KILN_UNARY_SIGMOID, KILN_UNARY_TANH, KILN_UNARY_EXP, KILN_UNARY_ERF, KILN_UNARY_SQRT, KILN_UNARY_RECIPROCAL,
    KILN_UNARY_NEG, KILN_UNARY_ABS, KILN_UNARY_GELU_TANH, KILN_UNARY_LOG,
};
enum { KILN_BINARY_ADD = 1, KILN_BINARY_SUB, KILN_BINARY_MUL, KILN_BINARY_DIV, KILN_BINARY_MAX, KILN_BINARY_MIN, KILN_BINARY_POW };

void kiln_f32_unary__scalar(int op, size_t n, const float *x, float *y, float alpha, float beta);
#if defined(__x86_64__)
void kiln_f32_unary__avx2(int op, size_t n, const float *x, float *y, float alpha, float beta);
#endif
/// y[o, i] = x[o, i] (op) z[o, i], with strides 0 for broadcast operands: x advances by
/// (xo, xi) per (outer, inner) step, z by (zo, zi).
void kiln_f32_binary__scalar(int op, size_t outer, size_t inner, const float *x, size_t xo, size_t xi,
                             const float *z, size_t zo, size_t zi, float *y);
void kiln_f32_softmax__scalar(size_t rows, size_t n, const float *x, float *y);
void kiln_f32_layer_norm__scalar(size_t rows, size_t n, const float *x, const float *gamma, const float *beta,
                                 float epsilon, float *y);
void kiln_f32_global_average_pool__scalar(size_t channels, size_t n, const float *x, float *y);
/// Depthwise 2-D convolution over one image in CHW layout, with the epilogue.
void kiln_f32_dwconv2d__scalar(size_t channels, size_t h, size_t w, const float *x,
                               size_t kh, size_t kw, const float *weight,
                               size_t sh, size_t sw, size_t dh, size_t dw, size_t pt, size_t pl,
                               size_t oh, size_t ow, float *y, const kiln_epilogue *e);
#if defined(__x86_64__)
void kiln_f32_dwconv2d__avx2(size_t channels, size_t h, size_t w, const float *x,
                             size_t kh, size_t kw, const float *weight,
                             size_t sh, size_t sw, size_t dh, size_t dw, size_t pt, size_t pl,
                             size_t oh, size_t ow, float *y, const kiln_epilogue *e);
#endif
/// im2col for one image in CHW layout: rows = output pixels, columns = (c, ky, kx).
void kiln_f32_im2col__scalar(size_t channels, size_t h, size_t w, const float *x,
                             size_t kh, size_t kw, size_t sh, size_t sw, size_t dh, size_t dw, size_t pt, size_t pl,
                             size_t oh, size_t ow, float *cols);
/// y[c, r] = x[r, c] for a rows x cols block.
void kiln_f32_transpose__scalar(size_t rows, size_t cols, const float *x, float *y);

// MARK: Exact 1-D k-means

/// The j in [lo, hi] minimizing prev[j] + max(0, (q[i]-q[j]) - (s[i]-s[j])^2 / (w[i]-w[j]));
/// ties keep the lowest j. Its cost goes to *best_cost. Variants give identical results.
size_t kiln_kmeans_argmin__scalar(const double *prev, const double *w, const double *s, const double *q, size_t lo,
                                  size_t hi, size_t i, double *best_cost);
#if defined(__x86_64__)
size_t kiln_kmeans_argmin__avx2(const double *prev, const double *w, const double *s, const double *q, size_t lo,
                                size_t hi, size_t i, double *best_cost);
#endif

#ifdef __cplusplus
}
#endif
#endif
