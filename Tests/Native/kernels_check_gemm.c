// The GEMM microkernels against a plain C reference: every tile size up to the kernel's, several
// depths, packed and strided A, and every epilogue (column and row bias, residual accumulate,
// activations); activations at extreme accumulators; every compressed-B layout.
#include "kernels_check.h"

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

void check_ukernel(const char *name) {
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
void check_extremes(const char *name) {
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
void check_q_ukernel(const char *name) {
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
