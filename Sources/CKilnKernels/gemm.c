// Float32 GEMM: the scalar reference microkernels, weight packing and decoding, the
// driver that walks panels and row blocks, and the epilogue.
#include "kiln_gemm_q.h"
#include "kiln_kernels.h"
#include "kiln_unary.h"

#include <math.h>
#include <string.h>

#define KILN_MAX_MR 8
#define KILN_MAX_NR 16

static inline void kiln_ukernel_scalar(size_t MR, size_t NR, size_t mr, size_t nc, size_t k, const float *a,
                                       size_t lda, const float *b, size_t ldb, float *c, size_t ldc, const kiln_tile_args *t) {
    float acc[KILN_MAX_MR][KILN_MAX_NR] = {{0}};
    // Packed A (lda == 0): element (i, p) at a[p * MR + i].
    const size_t rs = lda ? lda : 1, cs = lda ? 1 : MR;
    for (size_t p = 0; p < k; p++) {
        const float *row = b + p * ldb;
        for (size_t i = 0; i < mr; i++) {
            const float av = a[i * rs + p * cs];
            for (size_t j = 0; j < NR; j++) acc[i][j] += av * row[j];
        }
    }
    for (size_t i = 0; i < mr; i++) {
        if (t && t->accumulate) for (size_t j = 0; j < nc; j++) c[i * ldc + j] += acc[i][j];
        else memcpy(c + i * ldc, acc[i], nc * sizeof(float));
    }
    if (t) kiln_tile_args_apply(mr, nc, c, ldc, t);
}

void kiln_f32_gemm_4x8__scalar(KILN_UKERNEL_PARAMS) { kiln_ukernel_scalar(4, 8, mr, nc, k, a, lda, b, ldb, c, ldc, t); }

void kiln_f32_igemm_4x8__scalar(KILN_IGEMM_PARAMS) {
    float acc[4][8] = {{0}};
    for (size_t p = 0; p < k; p++) {
        const float *row = b + p * 8;
        for (size_t i = 0; i < mr; i++) {
            const float av = rows[i][offsets[p / run] + p % run];
            for (size_t j = 0; j < 8; j++) acc[i][j] += av * row[j];
        }
    }
    for (size_t i = 0; i < mr; i++) {
        if (t && t->accumulate) for (size_t j = 0; j < nc; j++) c[i * ldc + j] += acc[i][j];
        else memcpy(c + i * ldc, acc[i], nc * sizeof(float));
    }
    if (t) kiln_tile_args_apply(mr, nc, c, ldc, t);
}

void kiln_f32_gemm_4x16__scalar(KILN_UKERNEL_PARAMS) { kiln_ukernel_scalar(4, 16, mr, nc, k, a, lda, b, ldb, c, ldc, t); }

// The scalar (and NEON) tiles decode compressed panels a block of k at a time for their float32 kernel.
void kiln_q_gemm_4x8__scalar(KILN_Q_UKERNEL_PARAMS) { kiln_q_gemm_chunked(kiln_f32_gemm_4x8__scalar, 4, mr, nc, k, a, lda, b, panel, c, ldc, t); }
void kiln_q_gemm_4x16__scalar(KILN_Q_UKERNEL_PARAMS) { kiln_q_gemm_chunked(kiln_f32_gemm_4x16__scalar, 4, mr, nc, k, a, lda, b, panel, c, ldc, t); }

// Where a row of kiln_gemm.inc is built, its entry points; elsewhere NULL.
#define KILN_BUILT_ANY(f) f
#if defined(__x86_64__)
#define KILN_BUILT_X86(f) f
#else
#define KILN_BUILT_X86(f) NULL
#endif
#if defined(__aarch64__)
#define KILN_BUILT_ARM(f) f
#else
#define KILN_BUILT_ARM(f) NULL
#endif
#define KILN_IGEMM_1(f) f
#define KILN_IGEMM_0(f) NULL

#define KILN_GEMM(MR, NR, ISA, isa, BUILT, igemm) \
    {"f32_gemm_" #MR "x" #NR "__" #isa, MR, NR, KILN_ISA_##ISA, KILN_BUILT_##BUILT(kiln_f32_gemm_##MR##x##NR##__##isa), \
     {KILN_BUILT_##BUILT(kiln_q_gemm_##MR##x##NR##__##isa)}, KILN_BUILT_##BUILT(KILN_IGEMM_##igemm(kiln_f32_igemm_##MR##x##NR##__##isa)), igemm},
static const kiln_gemm_config kiln_gemm_configs[] = {
#include "kiln_gemm.inc"
};
#undef KILN_GEMM

size_t kiln_gemm_config_count(void) { return sizeof kiln_gemm_configs / sizeof kiln_gemm_configs[0]; }

const kiln_gemm_config *kiln_gemm_config_at(size_t i) { return i < kiln_gemm_config_count() ? &kiln_gemm_configs[i] : NULL; }

// The row of this name that this build has and this host can run.
static const kiln_gemm_config *kiln_gemm_config_named(const char *name) {
    const uint32_t have = kiln_cpu_features();
    for (size_t i = 0; i < kiln_gemm_config_count(); i++) {
        const kiln_gemm_config *e = &kiln_gemm_configs[i];
        if (strcmp(e->name, name) != 0) continue;
        const uint32_t need = kiln_isa_features(e->isa);
        return e->f32 && (have & need) == need ? e : NULL;
    }
    return NULL;
}

const kiln_packed_b_ukernel *kiln_q_gemm_ukernel_named(const char *name) {
    const kiln_gemm_config *e = kiln_gemm_config_named(name);
    return e ? &e->q : NULL;
}

kiln_f32_gemm_ukernel kiln_f32_gemm_ukernel_named(const char *name, size_t *mr, size_t *nr) {
    const kiln_gemm_config *e = kiln_gemm_config_named(name);
    if (!e) return NULL;
    *mr = e->mr;
    *nr = e->nr;
    return e->f32;
}

void kiln_f32_pack_b(size_t k, size_t n, size_t nr, const float *b, size_t ldb, size_t cs, float *packed) {
    const size_t panels = (n + nr - 1) / nr;
    for (size_t p = 0; p < panels; p++) {
        if (cs == 1 && (p + 1) * nr <= n) {
            // A full panel of contiguous columns: whole rows, no per-column bounds.
            for (size_t kk = 0; kk < k; kk++) {
                const float *src = b + kk * ldb + p * nr;
                float *out = packed + (p * k + kk) * nr;
                for (size_t j = 0; j < nr; j++) out[j] = src[j];
            }
            continue;
        }
        for (size_t kk = 0; kk < k; kk++) {
            float *out = packed + (p * k + kk) * nr;
            for (size_t j = 0; j < nr; j++) {
                const size_t col = p * nr + j;
                out[j] = col < n ? b[kk * ldb + col * cs] : 0.0f;
            }
        }
    }
}

void kiln_unpack_b_rows(const kiln_packed_b *b, size_t p, size_t k0, size_t kc, float *out) {
    const size_t k = b->k, nr = b->nr, n0 = p * nr;
    switch (b->kind) {
    case KILN_B_F32:
        memcpy(out, (const float *)b->data + (p * k + k0) * nr, kc * nr * sizeof(float));
        return;
    case KILN_B_INT8:
    case KILN_B_UINT8:
    case KILN_B_INT4: {
        const int8_t *s8 = (const int8_t *)b->data + p * k * nr;
        const uint8_t *u8 = (const uint8_t *)b->data + p * k * nr;
        const uint32_t *w4 = (const uint32_t *)b->data + p * ((k + 7) / 8) * nr;
        for (size_t r = 0; r < kc; r++) {
            const size_t kk = k0 + r;
            const float *scale = kiln_panel_block(b->scale, b, p, kk / b->k_block);
            const float *zero = b->zero ? kiln_panel_block(b->zero, b, p, kk / b->k_block) : NULL;
            for (size_t j = 0; j < nr; j++) {
                float q;
                if (b->kind == KILN_B_INT8) q = (float)s8[kk * nr + j];
                else if (b->kind == KILN_B_UINT8) q = (float)u8[kk * nr + j];
                else {
                    const uint32_t nib = (w4[(kk / 8) * nr + j] >> (4 * (kk % 8))) & 15u;
                    q = b->is_signed ? (float)((int32_t)(nib ^ 8u) - 8) : (float)nib;
                }
                out[r * nr + j] = (zero ? q - zero[j] : q) * scale[j];
            }
        }
        return;
    }
    case KILN_B_LUT:
    case KILN_B_LUT_K: {
        const size_t bits = b->nbits, row_bytes = nr * bits / 8, g = kiln_k_pack_group(bits);
        const uint8_t *base = (const uint8_t *)b->data + p * k * row_bytes;
        const uint32_t *words = (const uint32_t *)b->data + p * ((k + g - 1) / g) * nr;
        const uint32_t mask = (1u << bits) - 1u;
        for (size_t r = 0; r < kc; r++) {
            const size_t kk = k0 + r;
            const uint8_t *bytes = base + kk * row_bytes;
            for (size_t j = 0; j < nr; j++) {
                uint32_t index;
                if (b->kind == KILN_B_LUT_K) {
                    index = (words[(kk / g) * nr + j] >> (bits * (kk % g))) & mask;
                } else {
                    const size_t bit = j * bits;
                    uint32_t word = bytes[bit >> 3];
                    if ((bit & 7) + bits > 8) word |= (uint32_t)bytes[(bit >> 3) + 1] << 8;
                    index = (word >> (bit & 7)) & mask;
                }
                const size_t col = n0 + j;
                if (col >= b->n) {
                    out[r * nr + j] = 0.0f;
                    continue;
                }
                const float v = b->lut[(col / b->group_size) * b->entries + index];
                out[r * nr + j] = b->column_scale ? v * b->column_scale[col] : v;
            }
        }
        return;
    }
    }
}

void kiln_unpack_b_panel(const kiln_packed_b *b, size_t p, float *out) { kiln_unpack_b_rows(b, p, 0, b->k, out); }

size_t kiln_f32_gemm_scratch_bytes(const kiln_packed_b *b) {
    // (A compressed B with a microkernel of its own still gets a panel: the indirect GEMM decodes into it.)
    return b->kind == KILN_B_F32 && b->ldb == 0 ? 0 : b->k * b->nr * sizeof(float);
}

typedef float kiln_v8r __attribute__((vector_size(32)));
typedef float kiln_v8ru __attribute__((vector_size(32), aligned(4)));

// One row of C over a full panel of 16 or 32 columns: c[j] = Σ_p a[p] · b[p][j].
static inline __attribute__((always_inline)) void kiln_gemm_row(size_t nr, size_t k, const float *a, const float *b, size_t ldb,
                                                                float *c) {
    kiln_v8r c0 = {0}, c1 = {0}, c2 = {0}, c3 = {0};
    for (size_t p = 0; p < k; p++) {
        const float av = a[p];
        const kiln_v8r v = {av, av, av, av, av, av, av, av};
        const float *br = b + p * ldb;
        c0 += v * *(const kiln_v8ru *)br;
        c1 += v * *(const kiln_v8ru *)(br + 8);
        if (nr == 32) {
            c2 += v * *(const kiln_v8ru *)(br + 16);
            c3 += v * *(const kiln_v8ru *)(br + 24);
        }
    }
    *(kiln_v8ru *)c = c0;
    *(kiln_v8ru *)(c + 8) = c1;
    if (nr == 32) {
        *(kiln_v8ru *)(c + 16) = c2;
        *(kiln_v8ru *)(c + 24) = c3;
    }
}

// Floats of one K block of a B panel (256 KiB): a panel up to this size stays in L2 while every
// row tile of the call streams past it, and the prefetchers keep the microkernel fed from there;
// blocks sized for L1 (32 KiB) measured slower at 2 threads (Magika's K = 1280: the re-read of C
// per block costs more than the L1 hits gain). Longer K (large language models) is blocked.
#define KILN_KC_FLOATS 65536

// Bytes of packed panels below which a call walks row tiles outer (see the driver).
#define KILN_ROWS_OUTER_BYTES (512u << 10)

// The tile arguments of the tile at row m, column n0: the epilogue's when it applies to this call
// (`last` K block), and whether to add to the tile already in C.
static inline __attribute__((always_inline)) kiln_tile_args kiln_tile_args_at(const kiln_epilogue *epilogue, int apply, size_t m,
                                                                              size_t n0, int accumulate) {
    kiln_tile_args t = {NULL, NULL, KILN_UNARY_NONE, 0, 0, accumulate};
    if (apply) {
        t.col_bias = epilogue->bias ? epilogue->bias + n0 : NULL;
        t.row_bias = epilogue->row_bias ? epilogue->row_bias + m : NULL;
        t.activation = epilogue->activation;
        t.alpha = epilogue->alpha;
        t.beta = epilogue->beta;
    }
    return t;
}

// The driver. Without K blocking: panels outer, row tiles inner. With a K longer than one block
// (float32 B only): K blocks outer, then panels, then row tiles, each block after the first
// accumulating into C; the epilogue, applied by the microkernel before it stores, comes with the
// last block. Built once per ISA so the single-row path and the panel copy use that instruction set.
static inline __attribute__((always_inline)) void kiln_gemm_body(kiln_f32_gemm_ukernel ukernel, size_t mr, const kiln_packed_b *b,
                                                                 const float *a, size_t lda, float *c, size_t ldc, size_t m_begin,
                                                                 size_t m_end, size_t p_begin, size_t p_end,
                                                                 const kiln_epilogue *epilogue, float *scratch) {
    const size_t k = b->k, nr = b->nr;
    const int apply = epilogue && (epilogue->bias || epilogue->row_bias || epilogue->activation != KILN_UNARY_NONE);
    const int residual = epilogue && epilogue->accumulate;
    // An unpacked B is read in place when few row tiles reuse each panel; otherwise each panel
    // block is first copied into scratch (contiguous, so it stays in L1 across the row tiles).
    const int copy_panels = scratch && (m_end - m_begin + mr - 1) / mr >= 4;
    const size_t kc_max = KILN_KC_FLOATS / nr;
    const size_t blocks = b->kind == KILN_B_F32 && k > kc_max ? (k + kc_max - 1) / kc_max : 1;
    const size_t kc_even = (k + blocks - 1) / blocks;
    if (b->kind == KILN_B_F32 && !b->ldb && blocks == 1 && (p_end - p_begin) * k * nr * sizeof(float) <= KILN_ROWS_OUTER_BYTES &&
        (m_end - m_begin) * k * sizeof(float) > KILN_ROWS_OUTER_BYTES / 2) {
        // Packed panels that fit in L2 together and an A too large to stay there: row tiles outer,
        // so each tile of A streams from memory once (not once per panel) while the panels stay in
        // cache. A small A (a few tokens) keeps panels outer: each panel then serves every tile from L1.
        for (size_t m = m_begin; m < m_end; m += mr) {
            const size_t rows = m_end - m < mr ? m_end - m : mr;
            const float *at = lda ? a + m * lda : a + m * k;
            for (size_t p = p_begin; p < p_end; p++) {
                const size_t n0 = p * nr, nc = b->n - n0 < nr ? b->n - n0 : nr;
                const kiln_tile_args t = kiln_tile_args_at(epilogue, apply, m, n0, residual);
                ukernel(rows, nc, k, at, lda, (const float *)b->data + p * k * nr, nr, c + m * ldc + n0, ldc, apply || residual ? &t : NULL);
            }
        }
        return;
    }
    for (size_t kb = 0; kb < blocks; kb++) {
        const size_t k0 = kb * kc_even, kc = k - k0 < kc_even ? k - k0 : kc_even;
        const int last = kb + 1 == blocks;
        for (size_t p = p_begin; p < p_end; p++) {
            const float *panel;
            size_t ldb = nr;
            if (b->kind == KILN_B_F32 && b->ldb) {
                const float *src = (const float *)b->data + k0 * b->ldb + p * nr;
                if ((p + 1) * nr <= b->n && !copy_panels) {
                    panel = src;
                    ldb = b->ldb;
                } else {
                    kiln_f32_pack_b(kc, b->n - p * nr < nr ? b->n - p * nr : nr, nr, src, b->ldb, 1, scratch);
                    panel = scratch;
                }
            } else if (b->kind == KILN_B_F32) {
                panel = (const float *)b->data + (p * k + k0) * nr;
            } else if (b->q_ukernel) {
                // Decoded inside the microkernel, row tile by row tile.
                const size_t n0 = p * nr, nc = b->n - n0 < nr ? b->n - n0 : nr;
                for (size_t m = m_begin; m < m_end; m += mr) {
                    const size_t rows = m_end - m < mr ? m_end - m : mr;
                    const kiln_tile_args t = kiln_tile_args_at(epilogue, apply, m, n0, residual);
                    b->q_ukernel->fn(rows, nc, k, lda ? a + m * lda : a + m * k, lda, b, p, c + m * ldc + n0, ldc,
                                     apply || residual ? &t : NULL);
                }
                continue;
            } else {
                kiln_unpack_b_panel(b, p, scratch);
                panel = scratch;
            }
            const size_t n0 = p * nr;
            const size_t nc = b->n - n0 < nr ? b->n - n0 : nr;
            for (size_t m = m_begin; m < m_end; m += mr) {
                const size_t rows = m_end - m < mr ? m_end - m : mr;
                float *tile = c + m * ldc + n0;
                const float *at = lda ? a + m * lda + k0 : a + m * k + k0 * mr;
                const kiln_tile_args t = kiln_tile_args_at(epilogue, apply && last, m, n0, kb > 0 || residual);
                const int plain = !t.accumulate && !(apply && last);
                if (rows == 1 && lda && blocks == 1 && !residual && nc == nr && (nr == 16 || nr == 32)) {
                    kiln_gemm_row(nr, kc, at, panel, ldb, tile); // a microkernel would compute mr copies of the row
                    if (!plain) kiln_tile_args_apply(1, nc, tile, ldc, &t);
                } else {
                    ukernel(rows, nc, kc, at, lda, panel, ldb, tile, ldc, plain ? NULL : &t);
                }
            }
        }
    }
}

// The window origins of output pixels m, m + 1, … (rows of them, in row-major pixel order).
static inline void kiln_igemm_bases(const float *x, size_t row_step, size_t pixel_step, size_t ow, size_t m, size_t rows,
                                    const float **base) {
    size_t oy = m / ow, ox = m % ow;
    for (size_t i = 0; i < rows; i++) {
        base[i] = x + oy * row_step + ox * pixel_step;
        if (++ox == ow) { ox = 0; oy++; }
    }
}

void kiln_f32_igemm(kiln_f32_igemm_ukernel ukernel, size_t mr, const kiln_packed_b *b, const float *x, size_t row_step,
                    size_t pixel_step, size_t ow, const int32_t *offsets, size_t run, float *c, size_t ldc, size_t m_begin,
                    size_t m_end, size_t p_begin, size_t p_end, const kiln_epilogue *epilogue, float *scratch) {
    const size_t k = b->k, nr = b->nr;
    const int apply = epilogue && (epilogue->bias || epilogue->row_bias || epilogue->activation != KILN_UNARY_NONE);
    const int residual = epilogue && epilogue->accumulate;
    if (mr > KILN_MAX_MR || run == 0 || k % run) return; // no microkernel has such a tile; runs must cover K
    if (b->kind == KILN_B_F32 && (p_end - p_begin) * k * nr * sizeof(float) <= KILN_ROWS_OUTER_BYTES) {
        // The call's panels fit in L2 together: pixel tiles outer, so each tile's windows are
        // read from memory once and from L1 for every panel.
        for (size_t m = m_begin; m < m_end; m += mr) {
            const size_t rows = m_end - m < mr ? m_end - m : mr;
            const float *base[KILN_MAX_MR];
            kiln_igemm_bases(x, row_step, pixel_step, ow, m, rows, base);
            for (size_t p = p_begin; p < p_end; p++) {
                const size_t n0 = p * nr, nc = b->n - n0 < nr ? b->n - n0 : nr;
                const kiln_tile_args t = kiln_tile_args_at(epilogue, apply, m, n0, residual);
                ukernel(rows, nc, k, base, offsets, run, (const float *)b->data + p * k * nr, c + m * ldc + n0, ldc,
                        apply || residual ? &t : NULL);
            }
        }
        return;
    }
    for (size_t p = p_begin; p < p_end; p++) {
        const float *panel;
        if (b->kind == KILN_B_F32) {
            panel = (const float *)b->data + p * k * nr;
        } else {
            kiln_unpack_b_panel(b, p, scratch);
            panel = scratch;
        }
        const size_t n0 = p * nr, nc = b->n - n0 < nr ? b->n - n0 : nr;
        for (size_t m = m_begin; m < m_end; m += mr) {
            const size_t rows = m_end - m < mr ? m_end - m : mr;
            const float *base[KILN_MAX_MR];
            kiln_igemm_bases(x, row_step, pixel_step, ow, m, rows, base);
            const kiln_tile_args t = kiln_tile_args_at(epilogue, apply, m, n0, residual);
            ukernel(rows, nc, k, base, offsets, run, panel, c + m * ldc + n0, ldc, apply || residual ? &t : NULL);
        }
    }
}

#define KILN_GEMM_DRIVER_ARGS kiln_f32_gemm_ukernel ukernel, size_t mr, const kiln_packed_b *b, const float *a, size_t lda, \
    float *c, size_t ldc, size_t m_begin, size_t m_end, size_t p_begin, size_t p_end, const kiln_epilogue *epilogue, float *scratch
#define KILN_GEMM_DRIVER_CALL ukernel, mr, b, a, lda, c, ldc, m_begin, m_end, p_begin, p_end, epilogue, scratch

static void kiln_gemm_driver_scalar(KILN_GEMM_DRIVER_ARGS) { kiln_gemm_body(KILN_GEMM_DRIVER_CALL); }
#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) static void kiln_gemm_driver_avx2(KILN_GEMM_DRIVER_ARGS) { kiln_gemm_body(KILN_GEMM_DRIVER_CALL); }
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))
static void kiln_gemm_driver_avx512(KILN_GEMM_DRIVER_ARGS) { kiln_gemm_body(KILN_GEMM_DRIVER_CALL); }
#endif

// C[m x n] = A · B for n ≤ 4 columns with A packed in row tiles of MR (as `kiln_f32_gemm` with
// lda == 0): each tile streams its K x MR block once for all columns, two steps of k at a time
// into separate accumulators so the adds do not wait on each other.
static inline __attribute__((always_inline)) void kiln_narrow_packed_tiles(const size_t MR, size_t m, size_t n, size_t k,
                                                                           const float *a, const float *bt, float *c, size_t ldc) {
    for (size_t t = 0; t * MR < m; t++) {
        const float *at = a + t * k * MR;
        float acc[2][4][KILN_MAX_MR] = {{{0}}};
        size_t p = 0;
        for (; p + 2 <= k; p += 2) {
            for (size_t j = 0; j < n; j++) {
                const float b0 = bt[j * k + p], b1 = bt[j * k + p + 1];
                for (size_t i = 0; i < MR; i++) {
                    acc[0][j][i] += at[p * MR + i] * b0;
                    acc[1][j][i] += at[(p + 1) * MR + i] * b1;
                }
            }
        }
        for (; p < k; p++)
            for (size_t j = 0; j < n; j++)
                for (size_t i = 0; i < MR; i++) acc[0][j][i] += at[p * MR + i] * bt[j * k + p];
        const size_t rows = m - t * MR < MR ? m - t * MR : MR;
        for (size_t i = 0; i < rows; i++)
            for (size_t j = 0; j < n; j++) c[(t * MR + i) * ldc + j] = acc[0][j][i] + acc[1][j][i];
    }
}

static inline __attribute__((always_inline)) void kiln_narrow_packed_body(size_t mr, size_t m, size_t n, size_t k, const float *a,
                                                                          const float *bt, float *c, size_t ldc,
                                                                          const kiln_epilogue *e) {
    switch (mr) {
    case 8: kiln_narrow_packed_tiles(8, m, n, k, a, bt, c, ldc); break;
    case 6: kiln_narrow_packed_tiles(6, m, n, k, a, bt, c, ldc); break;
    case 4: kiln_narrow_packed_tiles(4, m, n, k, a, bt, c, ldc); break;
    default: kiln_narrow_packed_tiles(mr, m, n, k, a, bt, c, ldc); break;
    }
    if (e) kiln_tile_epilogue(m, n, c, ldc, e->bias, e->row_bias, e);
}

static void kiln_narrow_packed_scalar(size_t mr, size_t m, size_t n, size_t k, const float *a, const float *bt, float *c, size_t ldc,
                                      const kiln_epilogue *e) { kiln_narrow_packed_body(mr, m, n, k, a, bt, c, ldc, e); }
#if defined(__x86_64__)
__attribute__((target("avx2,fma")))
static void kiln_narrow_packed_avx2(size_t mr, size_t m, size_t n, size_t k, const float *a, const float *bt, float *c, size_t ldc,
                                    const kiln_epilogue *e) { kiln_narrow_packed_body(mr, m, n, k, a, bt, c, ldc, e); }
#endif

void kiln_f32_gemm_narrow_packed(size_t mr, size_t m, size_t n, size_t k, const float *a, const float *bt, float *c, size_t ldc,
                                 const kiln_epilogue *e) {
    if (mr > KILN_MAX_MR || mr == 0) return; // no microkernel has such a tile
    // Four columns at a time (the accumulators the body keeps), each group with its bias.
    for (size_t j0 = 0; j0 < n; j0 += 4) {
        const size_t nj = n - j0 < 4 ? n - j0 : 4;
        kiln_epilogue part;
        if (e) {
            part = *e;
            part.bias = e->bias ? e->bias + j0 : NULL;
        }
#if defined(__x86_64__)
        if (kiln_cpu_features() & KILN_CPU_X86_V3) {
            kiln_narrow_packed_avx2(mr, m, nj, k, a, bt + j0 * k, c + j0, ldc, e ? &part : NULL);
            continue;
        }
#endif
        kiln_narrow_packed_scalar(mr, m, nj, k, a, bt + j0 * k, c + j0, ldc, e ? &part : NULL);
    }
}

void kiln_f32_gemm(KILN_GEMM_DRIVER_ARGS) {
#if defined(__x86_64__)
    const uint32_t have = kiln_cpu_features();
    if (have & KILN_CPU_X86_V4) { kiln_gemm_driver_avx512(KILN_GEMM_DRIVER_CALL); return; }
    if (have & KILN_CPU_X86_V3) { kiln_gemm_driver_avx2(KILN_GEMM_DRIVER_CALL); return; }
#endif
    kiln_gemm_driver_scalar(KILN_GEMM_DRIVER_CALL);
}
