// The fused attention kernel (kiln_f32_attention) against a plain double-precision softmax(scale ·
// q·kᵀ + mask) · v, on every ISA row this CPU runs: decode (one query over a cache of 1 to 97
// keys), prefill with a causal mask, padding masks broadcast over heads and rows, rows masked
// whole (zeros), grouped key/value heads read in place (several query heads over one key head, as
// a decoder with GQA calls it), a long sequence (1,500 keys) and odd head sizes.
#include "kernels_check.h"

/// One call's geometry: heads [h0, h1) of a [sq, heads·d] query block (3-D rows) or, with
/// `planar`, one head plane per call whose key/value plane is shared by `group` query heads.
typedef struct {
    size_t sq, skv, d, dv, heads, group;
    int planar;
    int mask; // 0 none, 1 causal (query i sees keys ≤ i + skv − sq), 2 padding (last `pad` keys), 3 a row masked whole
    size_t pad;
} attention_case;

static float mask_value(const attention_case *c, size_t h, size_t i, size_t j) {
    (void)h;
    switch (c->mask) {
    case 1: return j > i + c->skv - c->sq ? -INFINITY : 0.0f;
    case 2: return j >= c->skv - c->pad ? -INFINITY : 0.0f;
    case 3: return i == c->sq / 2 ? -INFINITY : (j % 3 == 0 ? -2.5f : 0.5f);
    default: return 0.0f;
    }
}

static double run_case(const char *name, kiln_f32_attention_fn fn, const attention_case *c, unsigned seed) {
    const size_t hkv = c->planar ? c->heads / c->group : c->heads;
    const size_t nq = c->heads * c->sq * c->d, nk = hkv * c->skv * c->d, nv = hkv * c->skv * c->dv, ny = c->heads * c->sq * c->dv;
    float *q = malloc(nq * sizeof(float)), *k = malloc(nk * sizeof(float)), *v = malloc(nv * sizeof(float));
    float *y = malloc(ny * sizeof(float)), *mask = malloc(c->heads * c->sq * c->skv * sizeof(float));
    float *scratch = malloc(kiln_attention_scratch_floats(c->skv, c->d, c->dv) * sizeof(float));
    unsigned s = seed;
    for (size_t i = 0; i < nq; i++) q[i] = value(&s);
    for (size_t i = 0; i < nk; i++) k[i] = value(&s);
    for (size_t i = 0; i < nv; i++) v[i] = value(&s);
    for (size_t i = 0; i < ny; i++) y[i] = NAN;
    // The mask as [heads, sq, skv]; padding is passed broadcast over heads and rows (strides 0).
    for (size_t h = 0; h < c->heads; h++)
        for (size_t i = 0; i < c->sq; i++)
            for (size_t j = 0; j < c->skv; j++) mask[(h * c->sq + i) * c->skv + j] = mask_value(c, h, i, j);
    const float scale = 1.0f / sqrtf((float)c->d);
    const size_t mask_h = c->mask == 2 ? 0 : c->sq * c->skv, mask_i = c->mask == 2 ? 0 : c->skv;
    const float *m = c->mask ? mask : NULL;
    // Where head h's rows are, and the stride between a head's rows.
    size_t q_row, kv_row, v_row, y_row;
    if (c->planar) {
        q_row = kv_row = c->d, v_row = y_row = c->dv;
        for (size_t h = 0; h < c->heads; h++) {
            const size_t g = h / c->group;
            fn(c->sq, c->skv, c->d, c->dv, 0, 1, q + h * c->sq * c->d, q_row, k + g * c->skv * c->d, kv_row, v + g * c->skv * c->dv,
               v_row, m ? m + h * mask_h : NULL, mask_h, mask_i, scale, y + h * c->sq * c->dv, y_row, scratch);
        }
    } else {
        q_row = kv_row = c->heads * c->d, v_row = y_row = c->heads * c->dv;
        // Two calls split at a head, as threads split the work.
        const size_t split = c->heads / 2;
        if (split) fn(c->sq, c->skv, c->d, c->dv, 0, split, q, q_row, k, kv_row, v, v_row, m, mask_h, mask_i, scale, y, y_row, scratch);
        fn(c->sq, c->skv, c->d, c->dv, split, c->heads, q, q_row, k, kv_row, v, v_row, m, mask_h, mask_i, scale, y, y_row, scratch);
    }
    double worst = 0;
    double *p = malloc(c->skv * sizeof(double));
    for (size_t h = 0; h < c->heads; h++) {
        const size_t g = c->planar ? h / c->group : h;
        for (size_t i = 0; i < c->sq; i++) {
            const float *qi = c->planar ? q + (h * c->sq + i) * c->d : q + i * q_row + h * c->d;
            double best = -INFINITY, total = 0;
            for (size_t j = 0; j < c->skv; j++) {
                const float *kj = c->planar ? k + (g * c->skv + j) * c->d : k + j * kv_row + h * c->d;
                double dot = 0;
                for (size_t t = 0; t < c->d; t++) dot += (double)qi[t] * kj[t];
                p[j] = scale * dot + (c->mask ? mask_value(c, h, i, j) : 0.0);
                if (p[j] > best) best = p[j];
            }
            for (size_t j = 0; j < c->skv; j++) total += p[j] = best == -INFINITY ? 0 : exp(p[j] - best);
            for (size_t e = 0; e < c->dv; e++) {
                double want = 0;
                for (size_t j = 0; j < c->skv; j++) {
                    const float *vj = c->planar ? v + (g * c->skv + j) * c->dv : v + j * v_row + h * c->dv;
                    want += total > 0 ? p[j] / total * vj[e] : 0;
                }
                const float got = c->planar ? y[(h * c->sq + i) * c->dv + e] : y[i * y_row + h * c->dv + e];
                const double err = isnan(got) ? INFINITY : fabs(got - want);
                if (err > worst) worst = err;
            }
        }
    }
    free(p), free(q), free(k), free(v), free(y), free(mask), free(scratch);
    if (worst > 2e-5)
        printf("%s: MISMATCH sq=%zu skv=%zu d=%zu dv=%zu heads=%zu group=%zu planar=%d mask=%d: max error %.3g\n", name, c->sq, c->skv,
               c->d, c->dv, c->heads, c->group, c->planar, c->mask, worst);
    return worst;
}

void check_attention(const char *name, kiln_f32_attention_fn fn, uint32_t needs) {
    if ((kiln_cpu_features() & needs) != needs) {
        printf("%s: skipped (this CPU lacks its ISA)\n", name);
        return;
    }
    attention_case list[64];
    size_t n = 0;
    // Decode: one query over a growing cache, GQA planes (4 query heads per key head) and 3-D heads.
    for (size_t skv = 1; skv <= 97; skv += 12) {
        list[n++] = (attention_case){1, skv, 64, 64, 8, 4, 1, 2, skv / 5};
        list[n++] = (attention_case){1, skv, 32, 32, 4, 1, 0, 0, 0};
    }
    // Prefill with a causal mask (square, and over a past of 16 keys), planar and 3-D.
    list[n++] = (attention_case){32, 32, 64, 64, 4, 2, 1, 1, 0};
    list[n++] = (attention_case){17, 33, 64, 64, 2, 1, 1, 1, 0};
    list[n++] = (attention_case){9, 25, 16, 16, 3, 1, 0, 1, 0};
    // A row masked whole gives zeros; odd head sizes; values narrower than keys.
    list[n++] = (attention_case){7, 19, 3, 5, 3, 1, 0, 3, 0};
    list[n++] = (attention_case){5, 17, 24, 40, 2, 2, 1, 3, 0};
    list[n++] = (attention_case){3, 16, 80, 8, 4, 1, 0, 0, 0};
    // A long sequence: a few queries over 1,500 keys (an encoder's window), padded.
    list[n++] = (attention_case){4, 1500, 64, 64, 2, 1, 0, 2, 37};
    list[n++] = (attention_case){1, 1500, 64, 64, 4, 4, 1, 0, 0};
    double worst = 0;
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        const double e = run_case(name, fn, &list[i], (unsigned)(i * 7919 + 3));
        if (e > 2e-5) bad++;
        if (e > worst) worst = e;
    }
    cases += (int)n;
    failures += bad;
    printf("%s: %zu cases, max error %.2g%s\n", name, n, worst, bad ? " MISMATCH" : "");
}
