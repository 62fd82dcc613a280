// Checks the ISA microkernels of CKilnKernels against a plain C reference, on whatever CPU runs it:
// natively (x86-64: the AVX2 and AVX-512 kernels, each skipped with a message when the CPU lacks
// it) and under qemu-aarch64 (the NEON kernels), plus the HWCAP feature rule with faked values.
// Every tile size up to the kernel's, several depths, packed and strided A, and every epilogue
// (column and row bias, residual accumulate, activations). `make kernels-check` runs it.
#include "kiln_kernels.h"
#include "../../Sources/CKilnKernels/kiln_unary.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures, cases;

static float value(unsigned *state) {
    *state = *state * 1664525u + 1013904223u;
    return (float)((*state >> 8) & 0xFFFF) / 32768.0f - 1.0f;
}

static void check_hwcap(void) {
    const unsigned long asimd = 1ul << 1, fphp = 1ul << 9, asimdhp = 1ul << 10, dot = 1ul << 20;
    const struct { unsigned long hw; uint32_t want; } table[] = {
        {0, 0},
        {asimd, KILN_CPU_NEON},
        {asimd | dot, KILN_CPU_NEON},
        {asimd | dot | fphp, KILN_CPU_NEON},
        {asimd | dot | fphp | asimdhp, KILN_CPU_NEON | KILN_CPU_ARM_DOTPROD},
        {dot | fphp | asimdhp, 0},
        {~0ul, KILN_CPU_NEON | KILN_CPU_ARM_DOTPROD},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        cases++;
        const uint32_t got = kiln_cpu_from_hwcap(table[i].hw);
        if (got != table[i].want) {
            failures++;
            printf("hwcap %#lx: features %#x, want %#x\n", table[i].hw, got, table[i].want);
        }
    }
}

// C[i][j] = act((accumulate ? C : 0) + sum_p A[i][p] B[p][j] + col_bias[j] + row_bias[i]).
static void reference(size_t mr, size_t nc, size_t k, const float *a, size_t lda, size_t kmr, const float *b, size_t ldb,
                      float *c, size_t ldc, const kiln_tile_args *t) {
    for (size_t i = 0; i < mr; i++) {
        for (size_t j = 0; j < nc; j++) {
            double s = 0;
            for (size_t p = 0; p < k; p++) s += (double)(lda ? a[i * lda + p] : a[p * kmr + i]) * b[p * ldb + j];
            if (t && t->accumulate) s += c[i * ldc + j];
            if (t && t->col_bias) s += t->col_bias[j];
            if (t && t->row_bias) s += t->row_bias[i];
            c[i * ldc + j] = (float)s;
        }
        if (t && t->activation) kiln_unary_apply(t->activation, nc, c + i * ldc, c + i * ldc, t->alpha, t->beta, 1);
    }
}

static void check_ukernel(const char *name) {
    size_t kmr = 0, knr = 0;
    kiln_f32_gemm_ukernel fn = kiln_f32_gemm_ukernel_named(name, &kmr, &knr);
    if (!fn) {
        printf("skipped %s: this CPU lacks its features\n", name);
        return;
    }
    const size_t depths[] = {1, 2, 3, 8, 17, 64};
    const int activations[][3] = {{KILN_UNARY_NONE}, {KILN_UNARY_RELU}, {KILN_UNARY_CLIP}, {KILN_UNARY_SILU},
                                  {KILN_UNARY_SIGMOID}, {KILN_UNARY_GELU}, {KILN_UNARY_HARD_SWISH}, {KILN_UNARY_TANH},
                                  {KILN_UNARY_GELU_TANH}};
    unsigned state = 12345;
    const size_t kmax = 64, ldc = knr + 5;
    float *a = malloc(sizeof(float) * kmax * (kmax + 3)), *b = malloc(sizeof(float) * kmax * knr);
    float *col = malloc(sizeof(float) * knr), *row = malloc(sizeof(float) * kmr);
    float *got = malloc(sizeof(float) * kmr * ldc), *want = malloc(sizeof(float) * kmr * ldc);
    const int before = failures;
    for (size_t mr = 1; mr <= kmr; mr++)
        for (size_t nc = 1; nc <= knr; nc++)
            for (size_t d = 0; d < sizeof depths / sizeof depths[0]; d++)
                for (int packed = 0; packed < 2; packed++)
                    for (int variant = 0; variant < 12; variant++) {
                        const size_t k = depths[d], lda = packed ? 0 : k + 3;
                        for (size_t i = 0; i < kmax * (kmax + 3); i++) a[i] = value(&state);
                        if (packed) // rows past mr are zero in a packed A
                            for (size_t p = 0; p < k; p++)
                                for (size_t i = mr; i < kmr; i++) a[p * kmr + i] = 0;
                        for (size_t i = 0; i < k * knr; i++) b[i] = value(&state);
                        for (size_t j = 0; j < knr; j++) col[j] = value(&state);
                        for (size_t i = 0; i < kmr; i++) row[i] = value(&state);
                        for (size_t i = 0; i < kmr * ldc; i++) got[i] = want[i] = value(&state);
                        kiln_tile_args args = {0};
                        const kiln_tile_args *t = NULL;
                        if (variant > 0) {
                            args.activation = activations[(variant - 1) % 9][0];
                            args.alpha = -0.5f;
                            args.beta = 0.5f;
                            args.col_bias = variant % 2 ? col : NULL;
                            args.row_bias = variant % 3 == 0 ? row : NULL;
                            args.accumulate = variant >= 10;
                            t = &args;
                        }
                        fn(mr, nc, k, a, lda, b, knr, got, ldc, t);
                        reference(mr, nc, k, a, lda, kmr, b, knr, want, ldc, t);
                        cases++;
                        for (size_t i = 0; i < kmr; i++)
                            for (size_t j = 0; j < ldc; j++) {
                                const float g = got[i * ldc + j], w = want[i * ldc + j];
                                // Outside the tile nothing may change; inside, FMA order and vector
                                // transcendentals allow a small relative difference.
                                const int inside = i < mr && j < nc;
                                const int ok = inside ? fabsf(g - w) <= 2e-5f * (1.0f + fabsf(w)) : g == w;
                                if (!ok) {
                                    if (failures - before < 5)
                                        printf("%s mr=%zu nc=%zu k=%zu %s variant %d: C[%zu][%zu] = %.7g, want %.7g\n", name, mr, nc, k,
                                               packed ? "packed" : "strided", variant, i, j, g, w);
                                    failures++;
                                    i = kmr;
                                    break;
                                }
                            }
                    }
    printf("%s: %s\n", name, failures == before ? "matches the reference" : "MISMATCH");
    free(a); free(b); free(col); free(row); free(got); free(want);
}

// Activations applied in registers at accumulators far outside the ranges the random cases reach
// (±200, where exp overflows without its clamp and a refined reciprocal of infinity is NaN): each
// must be finite and agree with the scalar form.
static void check_extremes(const char *name) {
    size_t kmr = 0, knr = 0;
    kiln_f32_gemm_ukernel fn = kiln_f32_gemm_ukernel_named(name, &kmr, &knr);
    if (!fn) return;
    const int activations[] = {KILN_UNARY_SILU, KILN_UNARY_SIGMOID, KILN_UNARY_GELU, KILN_UNARY_TANH, KILN_UNARY_GELU_TANH};
    float a[1] = {1}, b[64], got[64], want[64];
    const int before = failures;
    for (size_t act = 0; act < sizeof activations / sizeof activations[0]; act++)
        for (int start = -200; start < 200; start += (int)knr) {
            for (size_t j = 0; j < knr; j++) b[j] = (float)start + 0.37f * (float)j * (start % 3 == 0 ? 1.0f : 2.5f);
            kiln_tile_args t = {0};
            t.activation = activations[act];
            fn(1, knr, 1, a, 1, b, knr, got, knr, &t);
            reference(1, knr, 1, a, 1, kmr, b, knr, want, knr, &t);
            cases++;
            for (size_t j = 0; j < knr; j++)
                if (!isfinite(got[j]) || fabsf(got[j] - want[j]) > 2e-5f * (1.0f + fabsf(want[j]))) {
                    if (failures - before < 5) printf("%s activation %d at %g: %.7g, want %.7g\n", name, activations[act], b[j], got[j], want[j]);
                    failures++;
                    break;
                }
        }
    printf("%s at extreme accumulators: %s\n", name, failures == before ? "finite and matching" : "MISMATCH");
}

// A compressed panel layout to check: kind, bits, signedness, zero point, K block (0: all of K),
// table group size (0: one table) and per-column table scale.
typedef struct { const char *label; int kind; size_t bits; int is_signed, zero; size_t k_block, group; int column_scale; } q_layout;

// Fills one panel (N = nc columns of a K x nr panel, panel 0) of `layout` with random values
// into the buffers, and points `b` at them.
static void q_fill(const q_layout *L, size_t k, size_t n, size_t nr, unsigned *state, kiln_packed_b *b, void *data, float *scale,
                   float *zero, float *lut, float *cscale) {
    memset(b, 0, sizeof *b);
    b->kind = L->kind;
    b->k = k;
    b->n = n;
    b->nr = nr;
    b->data = data;
    const size_t kb = L->k_block && L->k_block < k ? L->k_block : k, blocks = (k + kb - 1) / kb;
    const unsigned r = (unsigned)(value(state) * 1000.0f + 1000.0f);
    if (L->kind == KILN_B_INT8 || L->kind == KILN_B_UINT8) {
        uint8_t *q = data;
        for (size_t i = 0; i < k * nr; i++) q[i] = (uint8_t)((r + i * 2654435761u) >> 7);
    } else {
        const size_t bits = L->kind == KILN_B_INT4 ? 4 : L->bits, g = 32 / bits, rows = (k + g - 1) / g;
        uint32_t *w = data;
        memset(w, 0, rows * nr * 4);
        for (size_t kk = 0; kk < k; kk++)
            for (size_t j = 0; j < n; j++) {
                const uint32_t v = ((r + kk * 40503u + j * 2654435761u) >> 9) & ((1u << bits) - 1u);
                w[(kk / g) * nr + j] |= v << (bits * (kk % g));
            }
    }
    if (L->kind == KILN_B_LUT_K) {
        const size_t entries = (size_t)1 << L->bits, group = L->group ? L->group : n, groups = (n + group - 1) / group;
        for (size_t i = 0; i < groups * entries; i++) lut[i] = value(state);
        b->lut = lut;
        b->entries = entries;
        b->group_size = group;
        b->nbits = L->bits;
        if (L->column_scale) {
            for (size_t j = 0; j < n; j++) cscale[j] = value(state);
            b->column_scale = cscale;
        }
        return;
    }
    for (size_t i = 0; i < blocks * nr; i++) scale[i] = 0.01f + 0.02f * fabsf(value(state));
    b->scale = scale;
    b->k_block = kb;
    b->is_signed = L->is_signed;
    if (L->zero) {
        for (size_t i = 0; i < blocks * nr; i++) zero[i] = (float)(int)(value(state) * 7.0f);
        b->zero = zero;
    }
}

// Every compressed layout through the compressed-B microkernel of `name`, against the float32
// reference on the panel decoded by kiln_unpack_b_rows.
static void check_q_ukernel(const char *name) {
    size_t kmr = 0, knr = 0;
    if (!kiln_f32_gemm_ukernel_named(name, &kmr, &knr)) {
        printf("skipped compressed %s: this CPU lacks its features\n", name);
        return;
    }
    const kiln_packed_b_ukernel *q = kiln_q_gemm_ukernel_named(name);
    const q_layout layouts[] = {
        {"int8 per channel", KILN_B_INT8, 8, 1, 0, 0, 0, 0},
        {"int8 per block", KILN_B_INT8, 8, 1, 0, 16, 0, 0},
        {"uint8 zero point", KILN_B_UINT8, 8, 0, 1, 0, 0, 0},
        {"uint8 per block, zero point", KILN_B_UINT8, 8, 0, 1, 8, 0, 0},
        {"int4 per channel", KILN_B_INT4, 4, 1, 0, 0, 0, 0},
        {"int4 per block", KILN_B_INT4, 4, 1, 0, 16, 0, 0},
        {"uint4 zero point", KILN_B_INT4, 4, 0, 1, 0, 0, 0},
        {"int4 zero point, block of 4", KILN_B_INT4, 4, 1, 1, 4, 0, 0},
        {"1-bit table", KILN_B_LUT_K, 1, 0, 0, 0, 0, 0},
        {"2-bit table", KILN_B_LUT_K, 2, 0, 0, 0, 0, 1},
        {"3-bit table", KILN_B_LUT_K, 3, 0, 0, 0, 0, 0},
        {"4-bit table", KILN_B_LUT_K, 4, 0, 0, 0, 0, 0},
        {"4-bit tables per 16", KILN_B_LUT_K, 4, 0, 0, 0, 16, 1},
        {"4-bit tables per 8", KILN_B_LUT_K, 4, 0, 0, 0, 8, 0},
        {"4-bit tables per 4", KILN_B_LUT_K, 4, 0, 0, 0, 4, 0},
        {"6-bit table", KILN_B_LUT_K, 6, 0, 0, 0, 0, 1},
        {"6-bit tables per 16", KILN_B_LUT_K, 6, 0, 0, 0, 16, 0},
        {"8-bit table", KILN_B_LUT_K, 8, 0, 0, 0, 0, 0},
    };
    const size_t depths[] = {1, 5, 8, 13, 32, 70, 161};
    unsigned state = 777;
    const size_t kmax = 161, ldc = knr + 3;
    float *a = malloc(sizeof(float) * kmr * (kmax + 2)), *dec = malloc(sizeof(float) * kmax * knr);
    void *data = malloc(kmax * knr * 4 + 64);
    float *scale = malloc(sizeof(float) * kmax * knr), *zero = malloc(sizeof(float) * kmax * knr);
    float *lut = malloc(sizeof(float) * knr * 256), *cscale = malloc(sizeof(float) * knr), *col = malloc(sizeof(float) * knr);
    float *got = malloc(sizeof(float) * kmr * ldc), *want = malloc(sizeof(float) * kmr * ldc);
    const int before = failures;
    for (size_t li = 0; li < sizeof layouts / sizeof layouts[0]; li++)
        for (size_t d = 0; d < sizeof depths / sizeof depths[0]; d++)
            for (size_t mr = 1; mr <= kmr; mr++)
                for (size_t nc = 1; nc <= knr; nc += (nc < 3 || nc + 3 > knr) ? 1 : 5)
                    for (int variant = 0; variant < 3; variant++) {
                        const size_t k = depths[d], lda = k + 2;
                        kiln_packed_b b;
                        q_fill(&layouts[li], k, nc, knr, &state, &b, data, scale, zero, lut, cscale);
                        b.q_ukernel = q;
                        for (size_t i = 0; i < kmr * lda; i++) a[i] = value(&state);
                        for (size_t j = 0; j < knr; j++) col[j] = value(&state);
                        for (size_t i = 0; i < kmr * ldc; i++) got[i] = want[i] = value(&state);
                        kiln_tile_args args = {0};
                        const kiln_tile_args *t = NULL;
                        if (variant) {
                            args.col_bias = col;
                            args.activation = variant == 1 ? KILN_UNARY_RELU : KILN_UNARY_GELU;
                            args.accumulate = variant == 2;
                            t = &args;
                        }
                        kiln_unpack_b_rows(&b, 0, 0, k, dec);
                        q->fn(mr, nc, k, a, lda, &b, 0, got, ldc, t);
                        reference(mr, nc, k, a, lda, kmr, dec, knr, want, ldc, t);
                        double mag = 0;
                        for (size_t i = 0; i < k * knr; i++) mag = fmax(mag, fabs(dec[i]));
                        cases++;
                        for (size_t i = 0; i < kmr; i++)
                            for (size_t j = 0; j < ldc; j++) {
                                const float g = got[i * ldc + j], w = want[i * ldc + j];
                                const int inside = i < mr && j < nc;
                                // Scale applied after the sum: float32 rounding of a k-term sum.
                                const float tol = 2e-6f * (float)k * (float)mag + 2e-5f * (1.0f + fabsf(w));
                                const int ok = inside ? fabsf(g - w) <= tol : g == w;
                                if (!ok) {
                                    if (failures - before < 5)
                                        printf("%s %s mr=%zu nc=%zu k=%zu variant %d: C[%zu][%zu] = %.7g, want %.7g\n", name,
                                               layouts[li].label, mr, nc, k, variant, i, j, g, w);
                                    failures++;
                                    i = kmr;
                                    break;
                                }
                            }
                    }
    printf("compressed %s: %s\n", name, failures == before ? "matches the reference" : "MISMATCH");
    free(a); free(dec); free(data); free(scale); free(zero); free(lut); free(cscale); free(col); free(got); free(want);
}

// The thread pool: callers on several threads at once (all but one find it busy and run inline),
// jobs of every size; each index must run exactly once, and a job must be complete when
// kiln_parallel_for returns.
struct pool_job { _Atomic int hits[64]; };

static void pool_task(void *ctx, size_t i) {
    struct pool_job *job = ctx;
    volatile unsigned spin = 0;
    for (unsigned k = 0; k < (unsigned)(i % 7) * 50; k++) spin += k;
    atomic_fetch_add(&job->hits[i], 1);
}

static _Atomic int pool_failures;

static void *pool_caller(void *arg) {
    unsigned state = (unsigned)(uintptr_t)arg;
    for (int j = 0; j < 3000; j++) {
        struct pool_job job;
        const size_t n = 1 + (size_t)(value(&state) * 31.5f + 32.0f) % 64;
        for (size_t i = 0; i < 64; i++) atomic_init(&job.hits[i], 0);
        // Every thread count from one to all (SIZE_MAX): the pool's limit changes from job to job.
        if (j % 4 == 3) kiln_parallel_for(n, pool_task, &job);
        else kiln_parallel_for_threads(n, (size_t)(j % 4) + 1, pool_task, &job);
        for (size_t i = 0; i < 64; i++)
            if (atomic_load(&job.hits[i]) != (i < n ? 1 : 0)) { atomic_fetch_add(&pool_failures, 1); break; }
    }
    return NULL;
}

static void check_pool(void) {
    pthread_t t[4];
    for (uintptr_t i = 0; i < 4; i++) pthread_create(&t[i], NULL, pool_caller, (void *)(i * 977 + 1));
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    cases += 4 * 3000;
    failures += atomic_load(&pool_failures);
    printf("thread pool: %s\n", atomic_load(&pool_failures) ? "MISMATCH (an index ran twice, or not at all)" : "every index once");
}

typedef void (*dw_nhwc_fn)(size_t, size_t, size_t, const float *, size_t, size_t, const float *, size_t, size_t, size_t, size_t,
                           size_t, size_t, size_t, size_t, size_t, size_t, size_t, size_t, float *, const kiln_epilogue *);

// The channels-last depthwise convolution against a plain loop, on windows that cross every edge:
// 3×3 and 5×5 (the register spans), 1×1, 7×1 and dilated ones (the general path), strides 1 and 2,
// channel counts with and without a partial vector, rows split in two calls, every in-register
// activation and one applied after the store (tanh).
static void check_dwconv_nhwc(const char *name, dw_nhwc_fn fn, uint32_t needs) {
    if ((kiln_cpu_features() & needs) != needs) {
        printf("skipped %s: this CPU lacks its features\n", name);
        return;
    }
    const size_t shapes[][7] = {
        // h, w, c, kh, kw, stride, dilation
        {9, 11, 16, 3, 3, 1, 1}, {9, 11, 16, 3, 3, 2, 1}, {14, 14, 48, 5, 5, 1, 1}, {7, 7, 32, 5, 5, 2, 1},
        {6, 13, 21, 3, 3, 1, 1}, {5, 5, 7, 5, 5, 1, 1}, {3, 2, 16, 5, 5, 1, 1}, {8, 9, 24, 3, 3, 1, 2},
        {5, 6, 17, 1, 1, 1, 1}, {10, 4, 40, 7, 1, 2, 1}, {1, 17, 64, 3, 3, 2, 1},
    };
    const int activations[] = {KILN_UNARY_NONE, KILN_UNARY_RELU, KILN_UNARY_HARD_SWISH, KILN_UNARY_CLIP, KILN_UNARY_SILU,
                               KILN_UNARY_SIGMOID, KILN_UNARY_TANH};
    unsigned state = 99;
    int bad = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const size_t h = shapes[s][0], w = shapes[s][1], c = shapes[s][2], kh = shapes[s][3], kw = shapes[s][4];
        const size_t st = shapes[s][5], dil = shapes[s][6];
        const size_t pt = (kh - 1) * dil / 2, pl = (kw - 1) * dil / 2;
        const size_t oh = (h + 2 * pt - (kh - 1) * dil - 1) / st + 1, ow = (w + 2 * pl - (kw - 1) * dil - 1) / st + 1;
        float *x = malloc(h * w * c * sizeof(float)), *wt = malloc(kh * kw * c * sizeof(float)), *bias = malloc(c * sizeof(float));
        float *y = malloc(oh * ow * c * sizeof(float)), *want = malloc(oh * ow * c * sizeof(float));
        for (size_t i = 0; i < h * w * c; i++) x[i] = value(&state) * 3;
        for (size_t i = 0; i < kh * kw * c; i++) wt[i] = value(&state);
        for (size_t i = 0; i < c; i++) bias[i] = value(&state);
        for (size_t a = 0; a < sizeof activations / sizeof activations[0]; a++) {
            const kiln_epilogue e = {a % 2 ? NULL : bias, activations[a], 0.0f, 6.0f, NULL, 0};
            for (size_t oy = 0; oy < oh; oy++) {
                for (size_t ox = 0; ox < ow; ox++) {
                    for (size_t ch = 0; ch < c; ch++) {
                        double sum = e.bias ? e.bias[ch] : 0;
                        for (size_t ky = 0; ky < kh; ky++) {
                            for (size_t kx = 0; kx < kw; kx++) {
                                const long iy = (long)(oy * st + ky * dil) - (long)pt, ix = (long)(ox * st + kx * dil) - (long)pl;
                                if (iy < 0 || ix < 0 || iy >= (long)h || ix >= (long)w) continue;
                                sum += (double)x[((size_t)iy * w + (size_t)ix) * c + ch] * wt[(ky * kw + kx) * c + ch];
                            }
                        }
                        want[(oy * ow + ox) * c + ch] = (float)sum;
                    }
                }
            }
            kiln_unary_apply(e.activation, oh * ow * c, want, want, e.alpha, e.beta, 1);
            for (size_t i = 0; i < oh * ow * c; i++) y[i] = NAN;
            const size_t mid = oh / 2;
            fn(h, w, c, x, kh, kw, wt, st, st, dil, dil, pt, pl, oh, ow, 0, mid, 0, c, y, &e);
            fn(h, w, c, x, kh, kw, wt, st, st, dil, dil, pt, pl, oh, ow, mid, oh, 0, c, y, &e);
            cases++;
            for (size_t i = 0; i < oh * ow * c; i++) {
                if (!(fabsf(y[i] - want[i]) <= 1e-5f + 1e-5f * fabsf(want[i]))) {
                    failures++;
                    if (bad++ < 5)
                        printf("%s %zux%zux%zu %zux%zu s%zu d%zu act %d: y[%zu] = %g, want %g\n", name, h, w, c, kh, kw, st, dil,
                               e.activation, i, y[i], want[i]);
                    break;
                }
            }
        }
        free(x), free(wt), free(bias), free(y), free(want);
    }
    printf("%s: %s\n", name, bad ? "MISMATCH" : "matches the reference");
}

// Winograd F(2×2, 3×3) against a direct convolution in double: odd map sizes (partial tiles at the
// bottom and right), pads 1 and 0, channel counts off the panel width, blocks smaller than the tile
// count, a panel range split in two calls, bias, a residual already in the output, an activation,
// and pixels written into a wider row (a concat's slice).
static void check_winograd(const char *ukernel, int isa) {
    size_t kmr = 0, knr = 0;
    kiln_f32_gemm_ukernel fn = kiln_f32_gemm_ukernel_named(ukernel, &kmr, &knr);
    if (!fn) {
        printf("skipped Winograd on %s: this CPU lacks its features\n", ukernel);
        return;
    }
    const size_t shapes[][6] = {
        // h, w, c, m, pad, block
        {9, 11, 16, 40, 1, 8}, {6, 7, 24, 33, 0, 5}, {5, 5, 64, 64, 1, 16}, {1, 4, 17, 9, 1, 3}, {12, 3, 8, 70, 1, 64},
        {11, 13, 40, 17, 0, 30},
    };
    const double g[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
    unsigned state = 7;
    int bad = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const size_t h = shapes[s][0], w = shapes[s][1], c = shapes[s][2], m = shapes[s][3], pad = shapes[s][4], block = shapes[s][5];
        const size_t oh = h + 2 * pad - 2, ow = w + 2 * pad - 2, ldc = m + 3, panels = (m + knr - 1) / knr;
        const size_t tiles = (oh + 1) / 2 * ((ow + 1) / 2);
        float *x = malloc(h * w * c * sizeof(float)), *wt = malloc(m * c * 9 * sizeof(float)), *bias = malloc(m * sizeof(float));
        float *y = malloc(oh * ow * ldc * sizeof(float)), *want = malloc(oh * ow * ldc * sizeof(float));
        float *u = malloc(16 * panels * c * knr * sizeof(float)), *dense = malloc(c * m * sizeof(float));
        float *scratch = malloc(kiln_f32_winograd_scratch_floats(c, m, block > tiles ? block : tiles) * sizeof(float));
        for (size_t i = 0; i < h * w * c; i++) x[i] = value(&state) * 2;
        for (size_t i = 0; i < m * c * 9; i++) wt[i] = value(&state);
        for (size_t i = 0; i < m; i++) bias[i] = value(&state);
        kiln_packed_b b[16];
        for (int xi = 0; xi < 16; xi++) {
            const int i = xi / 4, j = xi % 4;
            for (size_t ch = 0; ch < c; ch++)
                for (size_t n = 0; n < m; n++) {
                    double sum = 0;
                    for (int a = 0; a < 3; a++)
                        for (int q = 0; q < 3; q++) sum += g[i][a] * wt[((n * c + ch) * 3 + (size_t)a) * 3 + (size_t)q] * g[j][q];
                    dense[ch * m + n] = (float)sum;
                }
            kiln_f32_pack_b(c, m, knr, dense, m, 1, u + (size_t)xi * panels * c * knr);
            b[xi] = (kiln_packed_b){0};
            b[xi].kind = KILN_B_F32, b[xi].k = c, b[xi].n = m, b[xi].nr = knr, b[xi].data = u + (size_t)xi * panels * c * knr;
        }
        for (int variant = 0; variant < 3; variant++) {
            // 0: bias and relu; 1: bias, residual and hard swish; 2: as 1, one call per panel.
            const kiln_epilogue e = {bias, variant ? KILN_UNARY_HARD_SWISH : KILN_UNARY_RELU, 0, 0, NULL, variant > 0};
            for (size_t i = 0; i < oh * ow * ldc; i++) y[i] = want[i] = variant ? value(&state) : NAN;
            for (size_t oy = 0; oy < oh; oy++)
                for (size_t ox = 0; ox < ow; ox++) {
                    float *o = want + (oy * ow + ox) * ldc;
                    for (size_t n = 0; n < m; n++) {
                        double sum = bias[n] + (variant ? o[n] : 0);
                        for (size_t ky = 0; ky < 3; ky++)
                            for (size_t kx = 0; kx < 3; kx++) {
                                const long iy = (long)(oy + ky) - (long)pad, ix = (long)(ox + kx) - (long)pad;
                                if (iy < 0 || ix < 0 || iy >= (long)h || ix >= (long)w) continue;
                                for (size_t ch = 0; ch < c; ch++)
                                    sum += (double)x[((size_t)iy * w + (size_t)ix) * c + ch] * wt[((n * c + ch) * 3 + ky) * 3 + kx];
                            }
                        o[n] = (float)sum;
                    }
                    kiln_unary_apply(e.activation, m, o, o, 0, 0, 1);
                }
            const size_t half = panels / 2;
            if (variant == 2) {
                for (size_t p = 0; p < panels; p++)
                    kiln_f32_conv3x3_winograd(isa, fn, kmr, b, h, w, c, x, pad, pad, oh, ow, y, ldc, 0, tiles, p, p + 1, tiles, &e, scratch);
            } else {
                kiln_f32_conv3x3_winograd(isa, fn, kmr, b, h, w, c, x, pad, pad, oh, ow, y, ldc, 0, tiles, 0, half, block, &e, scratch);
                kiln_f32_conv3x3_winograd(isa, fn, kmr, b, h, w, c, x, pad, pad, oh, ow, y, ldc, 0, tiles / 2, half, panels, block, &e, scratch);
                kiln_f32_conv3x3_winograd(isa, fn, kmr, b, h, w, c, x, pad, pad, oh, ow, y, ldc, tiles / 2, tiles, half, panels, block, &e,
                                          scratch);
            }
            cases++;
            for (size_t i = 0; i < oh * ow * ldc; i++) {
                const int gap = i % ldc >= m;
                if (gap ? !(isnan(y[i]) == isnan(want[i]) && (isnan(y[i]) || y[i] == want[i]))
                        : !(fabsf(y[i] - want[i]) <= 2e-5f * (1 + fabsf(want[i])))) {
                    failures++;
                    if (bad++ < 5) printf("Winograd on %s, %zux%zux%zu→%zu pad %zu variant %d: y[%zu] = %g, want %g\n", ukernel, h, w, c, m, pad,
                                          variant, i, y[i], want[i]);
                    break;
                }
            }
        }
        free(x), free(wt), free(bias), free(y), free(want), free(u), free(dense), free(scratch);
    }
    printf("Winograd on %s: %s\n", ukernel, bad ? "MISMATCH" : "matches the reference");
}

typedef void (*lstm_gates_fn)(size_t, const float *, const float *, const float *, float *, float *);

// The LSTM cell update against the formula in double, with and without peepholes, on pre-activations
// up to ±40 (saturated gates) and a hidden size off every vector width.
static void check_lstm_gates(const char *name, lstm_gates_fn fn, uint32_t needs) {
    if ((kiln_cpu_features() & needs) != needs) {
        printf("skipped %s: this CPU lacks its features\n", name);
        return;
    }
    enum { H = 37 };
    unsigned state = 11;
    int bad = 0;
    for (int peeped = 0; peeped < 2; peeped++) {
        float xw[4 * H], hr[4 * H], peep[3 * H], c[H], h[H];
        double wc[H], wh[H];
        for (int j = 0; j < 4 * H; j++) xw[j] = value(&state) * 20, hr[j] = value(&state) * 20;
        for (int j = 0; j < 3 * H; j++) peep[j] = value(&state);
        for (int j = 0; j < H; j++) c[j] = value(&state) * 2;
        for (int j = 0; j < H; j++) {
            const double pi = peeped ? peep[j] : 0, po = peeped ? peep[H + j] : 0, pf = peeped ? peep[2 * H + j] : 0;
            const double i = 1 / (1 + exp(-((double)xw[j] + hr[j] + pi * c[j])));
            const double f = 1 / (1 + exp(-((double)xw[2 * H + j] + hr[2 * H + j] + pf * c[j])));
            const double g = tanh((double)xw[3 * H + j] + hr[3 * H + j]);
            wc[j] = f * c[j] + i * g;
            wh[j] = 1 / (1 + exp(-((double)xw[H + j] + hr[H + j] + po * wc[j]))) * tanh(wc[j]);
        }
        fn(H, xw, hr, peeped ? peep : NULL, c, h);
        cases++;
        for (int j = 0; j < H; j++) {
            if (!(fabs(c[j] - wc[j]) <= 1e-5 * (1 + fabs(wc[j])) && fabs(h[j] - wh[j]) <= 1e-5)) {
                failures++;
                if (bad++ < 3) printf("%s peepholes %d: c[%d] = %g (want %g), h = %g (want %g)\n", name, peeped, j, c[j], wc[j], h[j], wh[j]);
            }
        }
    }
    printf("%s: %s\n", name, bad ? "MISMATCH" : "matches the reference");
}

typedef void (*gru_gates_fn)(size_t, int, const float *, const float *, float *);
typedef void (*gru_reset_fn)(size_t, const float *, const float *, const float *, float *);

// The GRU reset product and cell update (both linear_before_reset forms) against the formulas in
// double, with gate pre-activations large enough to saturate.
static void check_gru_gates(const char *name, gru_gates_fn gates, gru_reset_fn reset, uint32_t needs) {
    if ((kiln_cpu_features() & needs) != needs) {
        printf("skipped %s: this CPU lacks its features\n", name);
        return;
    }
    enum { H = 37 };
    unsigned state = 13;
    int bad = 0;
    for (int lbr = 0; lbr < 2; lbr++) {
        float xw[3 * H], hr[3 * H], h[H], rh[H];
        double want[H], wantRh[H];
        for (int j = 0; j < 3 * H; j++) xw[j] = value(&state) * 20, hr[j] = value(&state) * 20;
        for (int j = 0; j < H; j++) h[j] = value(&state) * 2;
        for (int j = 0; j < H; j++) {
            const double z = 1 / (1 + exp(-((double)xw[j] + hr[j])));
            const double r = 1 / (1 + exp(-((double)xw[H + j] + hr[H + j])));
            wantRh[j] = r * h[j];
            const double pre = lbr ? (double)xw[2 * H + j] + r * hr[2 * H + j] : (double)xw[2 * H + j] + hr[2 * H + j];
            want[j] = (1 - z) * tanh(pre) + z * h[j];
        }
        reset(H, xw, hr, h, rh);
        gates(H, lbr, xw, hr, h);
        cases += 2;
        for (int j = 0; j < H; j++) {
            if (!(fabs(h[j] - want[j]) <= 1e-5 && fabs(rh[j] - wantRh[j]) <= 1e-5 * (1 + fabs(wantRh[j])))) {
                failures++;
                if (bad++ < 3) printf("%s linear_before_reset %d: h[%d] = %g (want %g), r*h = %g (want %g)\n", name, lbr, j, h[j], want[j], rh[j], wantRh[j]);
            }
        }
    }
    printf("%s: %s\n", name, bad ? "MISMATCH" : "matches the reference");
}

int main(void) {
    check_hwcap();
    check_pool();
    printf("features of this CPU: %#x\n", kiln_cpu_features());
    // Every GEMM microkernel of kiln_gemm.inc built for this CPU family (a host without its ISA is skipped).
    for (size_t i = 0; i < kiln_gemm_config_count(); i++) {
        const kiln_gemm_config *g = kiln_gemm_config_at(i);
        if (!g->f32) continue;
        check_ukernel(g->name);
        check_extremes(g->name);
        check_q_ukernel(g->name);
    }
    check_dwconv_nhwc("f32_dwconv2d_nhwc__scalar", kiln_f32_dwconv2d_nhwc__scalar, 0);
    check_winograd("f32_gemm_4x8__scalar", KILN_ISA_SCALAR);
    check_lstm_gates("f32_lstm_gates__scalar", kiln_f32_lstm_gates__scalar, 0);
    check_gru_gates("f32_gru_gates__scalar", kiln_f32_gru_gates__scalar, kiln_f32_gru_reset__scalar, 0);
#if defined(__x86_64__)
    check_dwconv_nhwc("f32_dwconv2d_nhwc__avx2", kiln_f32_dwconv2d_nhwc__avx2, KILN_CPU_X86_V3);
    check_dwconv_nhwc("f32_dwconv2d_nhwc__avx512", kiln_f32_dwconv2d_nhwc__avx512, KILN_CPU_X86_V4);
    check_winograd("f32_gemm_6x16__avx2", KILN_ISA_AVX2);
    check_winograd("f32_gemm_8x32__avx512", KILN_ISA_AVX512);
    check_lstm_gates("f32_lstm_gates__avx2", kiln_f32_lstm_gates__avx2, KILN_CPU_X86_V3);
    check_lstm_gates("f32_lstm_gates__avx512", kiln_f32_lstm_gates__avx512, KILN_CPU_X86_V4);
    check_gru_gates("f32_gru_gates__avx2", kiln_f32_gru_gates__avx2, kiln_f32_gru_reset__avx2, KILN_CPU_X86_V3);
    check_gru_gates("f32_gru_gates__avx512", kiln_f32_gru_gates__avx512, kiln_f32_gru_reset__avx512, KILN_CPU_X86_V4);
#elif defined(__aarch64__)
    check_winograd("f32_gemm_4x8__neon", KILN_ISA_SCALAR);
    if (!(kiln_cpu_features() & KILN_CPU_NEON)) printf("error: an arm64 CPU without NEON\n"), failures++;
#endif
    printf("%d cases, %d failures\n", cases, failures);
    return failures ? 1 : 0;
}
