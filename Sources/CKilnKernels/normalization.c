// Reductions, softmax / log-softmax over any axis, layer normalization, arg-reductions and
// global pooling. Layout: [outer, n, inner] with the reduced axis in the middle; the inner
// loops are written for the compiler to vectorize, built once per ISA.
#include "kiln_kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kiln_math.h"

// A row's sum (or sum of squares) in float64 over 16 independent partial sums, added pairwise at
// the end: the loop vectorizes and no add waits on the one before (one running float64 sum is a
// chain of dependent adds, four cycles each). Each product and sum of floats is exact in float64
// up to the partial sums' own rounding, so the order changes the result far below float32's ulp.
static inline __attribute__((always_inline)) double kiln_row_sum_f64(size_t n, const float *x, int squares) {
    double lanes[16] = {0};
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (size_t l = 0; l < 16; l++) lanes[l] += squares ? (double)x[i + l] * (double)x[i + l] : (double)x[i + l];
    double tail = 0;
    for (; i < n; i++) tail += squares ? (double)x[i] * (double)x[i] : (double)x[i];
    for (size_t half = 8; half > 0; half /= 2)
        for (size_t l = 0; l < half; l++) lanes[l] += lanes[l + half];
    return lanes[0] + tail;
}

// Columns a sum over the middle axis keeps in registers at a time.
#define KILN_REDUCE_BLOCK 32

static inline __attribute__((always_inline)) void kiln_reduce_body(int op, size_t outer, size_t n, size_t inner,
                                                                   const float *x, float *y) {
    for (size_t o = 0; o < outer; o++) {
        const float *xo = x + o * n * inner;
        float *yo = y + o * inner;
        if (inner == 1) {
            // Contiguous rows: several partial accumulators so the loop vectorizes.
            float acc;
            switch (op) {
            case KILN_REDUCE_MAX: case KILN_REDUCE_MIN: {
                acc = n ? xo[0] : (op == KILN_REDUCE_MAX ? -INFINITY : INFINITY);
                for (size_t i = 1; i < n; i++) {
                    const float v = xo[i];
                    if (v != v) { acc = v; break; }
                    acc = op == KILN_REDUCE_MAX ? (v > acc ? v : acc) : (v < acc ? v : acc);
                }
                break;
            }
            case KILN_REDUCE_PROD: acc = 1; for (size_t i = 0; i < n; i++) acc *= xo[i]; break;
            case KILN_REDUCE_L2: case KILN_REDUCE_SUM_SQUARE: {
                const double s = kiln_row_sum_f64(n, xo, 1);
                acc = op == KILN_REDUCE_L2 ? (float)sqrt(s) : (float)s;
                break;
            }
            default: {
                const double s = kiln_row_sum_f64(n, xo, 0);
                acc = op == KILN_REDUCE_MEAN ? (float)(s / (double)n) : (float)s;
                break;
            }
            }
            yo[0] = acc;
            continue;
        }
        switch (op) {
        case KILN_REDUCE_MAX: case KILN_REDUCE_MIN:
            if (n == 0) { for (size_t i = 0; i < inner; i++) yo[i] = op == KILN_REDUCE_MAX ? -INFINITY : INFINITY; break; }
            memcpy(yo, xo, inner * sizeof(float));
            for (size_t r = 1; r < n; r++) {
                const float *xr = xo + r * inner;
                if (op == KILN_REDUCE_MAX)
                    for (size_t i = 0; i < inner; i++) yo[i] = (xr[i] > yo[i] || xr[i] != xr[i]) ? xr[i] : yo[i];
                else
                    for (size_t i = 0; i < inner; i++) yo[i] = (xr[i] < yo[i] || xr[i] != xr[i]) ? xr[i] : yo[i];
            }
            break;
        case KILN_REDUCE_PROD:
            for (size_t i = 0; i < inner; i++) yo[i] = 1;
            for (size_t r = 0; r < n; r++) for (size_t i = 0; i < inner; i++) yo[i] *= xo[r * inner + i];
            break;
        case KILN_REDUCE_L2: case KILN_REDUCE_SUM_SQUARE:
            for (size_t i = 0; i < inner; i++) yo[i] = 0;
            for (size_t r = 0; r < n; r++) for (size_t i = 0; i < inner; i++) { const float v = xo[r * inner + i]; yo[i] += v * v; }
            if (op == KILN_REDUCE_L2) for (size_t i = 0; i < inner; i++) yo[i] = sqrtf(yo[i]);
            break;
        default: {
            // Blocks of columns summed in a local array over every row: the sums stay in
            // registers (y may alias x as far as the compiler knows, so summing into y would
            // load and store it each row). Each column's sum still runs row by row, in order.
            for (size_t i0 = 0; i0 < inner; i0 += KILN_REDUCE_BLOCK) {
                const size_t w = inner - i0 < KILN_REDUCE_BLOCK ? inner - i0 : KILN_REDUCE_BLOCK;
                float acc[KILN_REDUCE_BLOCK] = {0};
                if (w == KILN_REDUCE_BLOCK) {
                    for (size_t r = 0; r < n; r++) {
                        const float *xr = xo + r * inner + i0;
                        for (size_t i = 0; i < KILN_REDUCE_BLOCK; i++) acc[i] += xr[i];
                    }
                } else {
                    for (size_t r = 0; r < n; r++) for (size_t i = 0; i < w; i++) acc[i] += xo[r * inner + i0 + i];
                }
                const float inv = op == KILN_REDUCE_MEAN ? 1.0f / (float)n : 1.0f;
                for (size_t i = 0; i < w; i++) yo[i0 + i] = op == KILN_REDUCE_MEAN ? acc[i] * inv : acc[i];
            }
            break;
        }
        }
    }
}

// Row reductions keep 16 independent partial results (one vector's worth, or two on AVX2), so the
// loops vectorize without reassociating a single running sum, and no add waits on the one before.
#define KILN_LANES 16

static inline __attribute__((always_inline)) float kiln_row_max(size_t n, const float *x) {
    float lanes[KILN_LANES];
    for (size_t l = 0; l < KILN_LANES; l++) lanes[l] = -INFINITY;
    size_t i = 0;
    for (; i + KILN_LANES <= n; i += KILN_LANES)
        for (size_t l = 0; l < KILN_LANES; l++) lanes[l] = x[i + l] > lanes[l] ? x[i + l] : lanes[l];
    float m = -INFINITY;
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    // Pairwise, so the steps do not wait on each other.
    for (size_t half = KILN_LANES / 2; half > 0; half /= 2)
        for (size_t l = 0; l < half; l++) lanes[l] = lanes[l + half] > lanes[l] ? lanes[l + half] : lanes[l];
    return lanes[0] > m ? lanes[0] : m;
}

/// The sum of the lanes (pairwise) and the tail.
static inline __attribute__((always_inline)) float kiln_lanes_total(const float *lanes, float tail) {
    float t[KILN_LANES];
    for (size_t l = 0; l < KILN_LANES; l++) t[l] = lanes[l];
    for (size_t half = KILN_LANES / 2; half > 0; half /= 2)
        for (size_t l = 0; l < half; l++) t[l] += t[l + half];
    return t[0] + tail;
}

static inline __attribute__((always_inline)) void kiln_softmax_row(int op, size_t n, const float *x, float *y) {
    const float m = kiln_row_max(n, x);
    float lanes[KILN_LANES] = {0}, tail = 0;
    size_t i = 0;
    if (op == KILN_LOG_SOFTMAX) {
        for (; i + KILN_LANES <= n; i += KILN_LANES)
            for (size_t l = 0; l < KILN_LANES; l++) lanes[l] += kiln_exp(x[i + l] - m);
        for (; i < n; i++) tail += kiln_exp(x[i] - m);
        const float lse = m + logf(kiln_lanes_total(lanes, tail));
        for (size_t j = 0; j < n; j++) y[j] = x[j] - lse;
        return;
    }
    for (; i + KILN_LANES <= n; i += KILN_LANES)
        for (size_t l = 0; l < KILN_LANES; l++) {
            const float e = kiln_exp(x[i + l] - m);
            y[i + l] = e;
            lanes[l] += e;
        }
    for (; i < n; i++) {
        const float e = kiln_exp(x[i] - m);
        y[i] = e;
        tail += e;
    }
    const float inv = 1.0f / kiln_lanes_total(lanes, tail);
    for (size_t j = 0; j < n; j++) y[j] *= inv;
}

static inline __attribute__((always_inline)) void kiln_softmax_body(int op, size_t outer, size_t n, size_t inner,
                                                                    const float *x, float *y) {
    if (inner == 1) {
        for (size_t o = 0; o < outer; o++) kiln_softmax_row(op, n, x + o * n, y + o * n);
        return;
    }
    // Strided axis: columns of [n, inner] handled together so the inner loop vectorizes.
    for (size_t o = 0; o < outer; o++) {
        const float *xo = x + o * n * inner;
        float *yo = y + o * n * inner;
        float mx[256], sum[256];
        for (size_t i0 = 0; i0 < inner; i0 += 256) {
            const size_t w = inner - i0 < 256 ? inner - i0 : 256;
            for (size_t i = 0; i < w; i++) { mx[i] = -INFINITY; sum[i] = 0; }
            for (size_t r = 0; r < n; r++) for (size_t i = 0; i < w; i++) { const float v = xo[r * inner + i0 + i]; mx[i] = v > mx[i] ? v : mx[i]; }
            for (size_t r = 0; r < n; r++) for (size_t i = 0; i < w; i++) sum[i] += kiln_exp(xo[r * inner + i0 + i] - mx[i]);
            if (op == KILN_LOG_SOFTMAX) {
                for (size_t i = 0; i < w; i++) mx[i] += logf(sum[i]);
                for (size_t r = 0; r < n; r++) for (size_t i = 0; i < w; i++) yo[r * inner + i0 + i] = xo[r * inner + i0 + i] - mx[i];
            } else {
                for (size_t i = 0; i < w; i++) sum[i] = 1.0f / sum[i];
                for (size_t r = 0; r < n; r++) for (size_t i = 0; i < w; i++)
                    yo[r * inner + i0 + i] = kiln_exp(xo[r * inner + i0 + i] - mx[i]) * sum[i];
            }
        }
    }
}

static inline __attribute__((always_inline)) void kiln_layer_norm_body(size_t rows, size_t n, const float *x, const float *gamma,
                                                                       const float *beta, float epsilon, float *y) {
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        float lanes[KILN_LANES] = {0}, tail = 0;
        size_t i = 0;
        for (; i + KILN_LANES <= n; i += KILN_LANES)
            for (size_t l = 0; l < KILN_LANES; l++) lanes[l] += xr[i + l];
        for (; i < n; i++) tail += xr[i];
        const float mean = kiln_lanes_total(lanes, tail) / (float)n;
        for (size_t l = 0; l < KILN_LANES; l++) lanes[l] = 0;
        tail = 0;
        for (i = 0; i + KILN_LANES <= n; i += KILN_LANES)
            for (size_t l = 0; l < KILN_LANES; l++) { const float d = xr[i + l] - mean; lanes[l] += d * d; }
        for (; i < n; i++) { const float d = xr[i] - mean; tail += d * d; }
        const float inv = 1.0f / sqrtf(kiln_lanes_total(lanes, tail) / (float)n + epsilon);
        if (beta) for (size_t j = 0; j < n; j++) yr[j] = (xr[j] - mean) * inv * gamma[j] + beta[j];
        else for (size_t j = 0; j < n; j++) yr[j] = (xr[j] - mean) * inv * gamma[j];
    }
}

// Attention heads [h_begin, h_end) of one batch entry, inputs in the 3-D layout: query i of head h
// at q[i·q_row + h·d], key j at k[j·kv_row + h·d], value j at v[j·v_row + h·dv]; output
// y[i·y_row + h·dv]. scores_j = scale · (q·k_j) + mask[h·mask_h + i·mask_i + j] (no mask: 0), a
// softmax over j (a row whose best score is −∞ attends to nothing: zeros), then Σ_j p_j v_j.
// Both products run on the ISA's GEMM microkernel (`ukernel`, an MR x NR tile): per head the
// keys are copied transposed into scratch ([d][w], w = skv rounded up to 16, zero padded) and the
// values into panels [skv][dvp] (dvp = dv rounded up to NR); then for each block of MR queries
// the scores [MR][w] = Q·Kᵀ, the softmax in place, and Y = P·V straight into y. Nothing else is
// transposed or materialized. `scratch` holds kiln_attention_scratch_floats(skv, d, dv) floats.
static inline __attribute__((always_inline)) void
kiln_attention_body(size_t sq, size_t skv, size_t d, size_t dv, size_t h_begin, size_t h_end, const float *q, size_t q_row,
                    const float *k, size_t kv_row, const float *v, size_t v_row, const float *mask, size_t mask_h, size_t mask_i,
                    float scale, float *y, size_t y_row, float *scratch, kiln_f32_gemm_ukernel ukernel, size_t mr_max, size_t nr) {
    const size_t w = kiln_attention_keys_padded(skv), dvp = (dv + KILN_ATTENTION_MAX_NR - 1) / KILN_ATTENTION_MAX_NR * KILN_ATTENTION_MAX_NR;
    float *kt = scratch, *scores = kt + d * w, *vp = scores + KILN_ATTENTION_MAX_MR * w;
    for (size_t h = h_begin; h < h_end; h++) {
        for (size_t e = 0; e < d; e++) {
            float *row = kt + e * w;
            for (size_t j = 0; j < skv; j++) row[j] = k[j * kv_row + h * d + e];
            for (size_t j = skv; j < w; j++) row[j] = 0;
        }
        for (size_t j = 0; j < skv; j++) {
            float *row = vp + j * dvp;
            memcpy(row, v + j * v_row + h * dv, dv * sizeof(float));
            for (size_t e = dv; e < dvp; e++) row[e] = 0;
        }
        for (size_t i0 = 0; i0 < sq; i0 += mr_max) {
            const size_t mr = sq - i0 < mr_max ? sq - i0 : mr_max;
            if (d == 0) memset(scores, 0, mr * w * sizeof(float));
            else
                for (size_t j0 = 0; j0 < w; j0 += nr)
                    ukernel(mr, nr, d, q + i0 * q_row + h * d, q_row, kt + j0, w, scores + j0, w, NULL);
            for (size_t r = 0; r < mr; r++) {
                float *s = scores + r * w;
                const size_t i = i0 + r;
                if (mask) {
                    const float *mi = mask + h * mask_h + i * mask_i;
                    for (size_t j = 0; j < skv; j++) s[j] = s[j] * scale + mi[j];
                } else {
                    for (size_t j = 0; j < skv; j++) s[j] *= scale;
                }
                const float top = kiln_row_max(skv, s);
                if (top == -INFINITY) {
                    for (size_t j = 0; j < skv; j++) s[j] = 0;
                    continue;
                }
                float lanes[KILN_LANES] = {0}, tail = 0;
                size_t j = 0;
                for (; j + KILN_LANES <= skv; j += KILN_LANES)
                    for (size_t l = 0; l < KILN_LANES; l++) {
                        s[j + l] = kiln_exp(s[j + l] - top);
                        lanes[l] += s[j + l];
                    }
                for (; j < skv; j++) {
                    s[j] = kiln_exp(s[j] - top);
                    tail += s[j];
                }
                const float inv = 1.0f / kiln_lanes_total(lanes, tail);
                for (size_t jj = 0; jj < skv; jj++) s[jj] *= inv;
            }
            float *yi = y + i0 * y_row + h * dv;
            if (skv == 0) {
                for (size_t r = 0; r < mr; r++) memset(yi + r * y_row, 0, dv * sizeof(float));
                continue;
            }
            for (size_t e0 = 0; e0 < dv; e0 += nr)
                ukernel(mr, dv - e0 < nr ? dv - e0 : nr, skv, scores, w, vp + e0, dvp, yi + e0, y_row, NULL);
        }
    }
}

#define KILN_DEFINE_NORM(isa, target, ukernel, mr, nr) \
    target void kiln_f32_attention__##isa(size_t sq, size_t skv, size_t d, size_t dv, size_t h_begin, size_t h_end, const float *q, \
                                          size_t q_row, const float *k, size_t kv_row, const float *v, size_t v_row, \
                                          const float *mask, size_t mask_h, size_t mask_i, float scale, float *y, size_t y_row, \
                                          float *scratch) { \
        kiln_attention_body(sq, skv, d, dv, h_begin, h_end, q, q_row, k, kv_row, v, v_row, mask, mask_h, mask_i, scale, y, y_row, \
                            scratch, ukernel, mr, nr); \
    } \
    target void kiln_f32_reduce__##isa(int op, size_t outer, size_t n, size_t inner, const float *x, float *y) { \
        kiln_reduce_body(op, outer, n, inner, x, y); \
    } \
    target void kiln_f32_softmax_nd__##isa(int op, size_t outer, size_t n, size_t inner, const float *x, float *y) { \
        kiln_softmax_body(op, outer, n, inner, x, y); \
    } \
    target void kiln_f32_layer_norm__##isa(size_t rows, size_t n, const float *x, const float *gamma, const float *beta, \
                                           float epsilon, float *y) { \
        kiln_layer_norm_body(rows, n, x, gamma, beta, epsilon, y); \
    }

KILN_DEFINE_NORM(scalar, , kiln_f32_gemm_4x8__scalar, 4, 8)
#if defined(__x86_64__)
KILN_DEFINE_NORM(avx2, __attribute__((target("avx2,fma"))), kiln_f32_gemm_6x16__avx2, 6, 16)
#endif

void kiln_f32_arg_reduce__scalar(int largest, int select_last, size_t outer, size_t n, size_t inner, const float *x, int64_t *y) {
    for (size_t o = 0; o < outer; o++) {
        for (size_t i = 0; i < inner; i++) {
            const float *xp = x + o * n * inner + i;
            size_t best = 0;
            float bv = n ? xp[0] : 0;
            for (size_t r = 1; r < n; r++) {
                const float v = xp[r * inner];
                const int better = largest ? (select_last ? v >= bv : v > bv) : (select_last ? v <= bv : v < bv);
                if (better) { best = r; bv = v; }
            }
            y[o * inner + i] = (int64_t)best;
        }
    }
}

typedef float kiln_gp8 __attribute__((vector_size(32)));
typedef float kiln_gp8u __attribute__((vector_size(32), aligned(4)));

// Eight lanes at a time into two accumulators, then across lanes and the tail.
void kiln_f32_global_average_pool__scalar(size_t channels, size_t n, const float *x, float *y) {
    for (size_t c = 0; c < channels; c++) {
        const float *xc = x + c * n;
        kiln_gp8 s0 = {0}, s1 = {0};
        size_t i = 0;
        for (; i + 16 <= n; i += 16) {
            s0 += *(const kiln_gp8u *)(xc + i);
            s1 += *(const kiln_gp8u *)(xc + i + 8);
        }
        for (; i + 8 <= n; i += 8) s0 += *(const kiln_gp8u *)(xc + i);
        s0 += s1;
        float sum = ((s0[0] + s0[1]) + (s0[2] + s0[3])) + ((s0[4] + s0[5]) + (s0[6] + s0[7]));
        for (; i < n; i++) sum += xc[i];
        y[c] = sum / (float)n;
    }
}

// NaN never wins (as `v > m ? v : m` from -inf): maxnum per lane, then across lanes.
void kiln_f32_global_max_pool__scalar(size_t channels, size_t n, const float *x, float *y) {
    for (size_t c = 0; c < channels; c++) {
        const float *xc = x + c * n;
        const kiln_gp8 lowest = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
        kiln_gp8 m0 = lowest, m1 = lowest;
        size_t i = 0;
        for (; i + 16 <= n; i += 16) {
            m0 = __builtin_elementwise_max(m0, *(const kiln_gp8u *)(xc + i));
            m1 = __builtin_elementwise_max(m1, *(const kiln_gp8u *)(xc + i + 8));
        }
        for (; i + 8 <= n; i += 8) m0 = __builtin_elementwise_max(m0, *(const kiln_gp8u *)(xc + i));
        m0 = __builtin_elementwise_max(m0, m1);
        float m = -INFINITY;
        for (int l = 0; l < 8; l++) m = m0[l] > m ? m0[l] : m;
        for (; i < n; i++) m = xc[i] > m ? xc[i] : m;
        y[c] = m;
    }
}

void kiln_f32_channel_affine__scalar(size_t batch, size_t channels, size_t inner, const float *x, const float *a, const float *b,
                                     float *y) {
    for (size_t n = 0; n < batch; n++)
        for (size_t c = 0; c < channels; c++) {
            const float *xc = x + (n * channels + c) * inner;
            float *yc = y + (n * channels + c) * inner;
            const float av = a[c], bv = b[c];
            for (size_t i = 0; i < inner; i++) yc[i] = xc[i] * av + bv;
        }
}

void kiln_f32_instance_norm__scalar(size_t batch, size_t channels, size_t inner, const float *x, const float *scale,
                                    const float *bias, float epsilon, float *y) {
    for (size_t n = 0; n < batch; n++)
        for (size_t c = 0; c < channels; c++) {
            const float *xc = x + (n * channels + c) * inner;
            float *yc = y + (n * channels + c) * inner;
            // Sums in double, eight independent lanes so the loops vectorize.
            double lanes[8] = {0}, sum = 0, var = 0;
            size_t i0 = 0;
            for (; i0 + 8 <= inner; i0 += 8)
                for (size_t l = 0; l < 8; l++) lanes[l] += xc[i0 + l];
            for (size_t i = i0; i < inner; i++) sum += xc[i];
            for (size_t l = 0; l < 8; l++) { sum += lanes[l]; lanes[l] = 0; }
            const float mean = (float)(sum / (double)inner);
            for (i0 = 0; i0 + 8 <= inner; i0 += 8)
                for (size_t l = 0; l < 8; l++) { const double d = xc[i0 + l] - mean; lanes[l] += d * d; }
            for (size_t i = i0; i < inner; i++) { const double d = xc[i] - mean; var += d * d; }
            for (size_t l = 0; l < 8; l++) var += lanes[l];
            const float inv = 1.0f / sqrtf((float)(var / (double)inner) + epsilon);
            const float s = scale[c] * inv, b = bias[c];
            for (size_t i = 0; i < inner; i++) yc[i] = (xc[i] - mean) * s + b;
        }
}

// top_k: per row of [outer, n, inner], the k largest (or smallest) values and their indices,
// ties broken by the lower index. Indices are unique, so "ranks before" is a strict total order
// and any correct selection gives the same result as a stable full sort: the row is partitioned
// around median-of-three pivots until its first k entries are the k best (quickselect, O(n)),
// then only those k are sorted. NaN ranks first when largest, last when smallest.
typedef struct { float v; int64_t i; } kiln_ranked;

static inline int kiln_ranks_before(int largest, kiln_ranked a, kiln_ranked b) {
    if (a.v != b.v) {
        if (a.v != a.v) return largest;
        if (b.v != b.v) return !largest;
        return largest ? a.v > b.v : a.v < b.v;
    }
    return a.i < b.i;
}

static inline void kiln_ranked_swap(kiln_ranked *a, kiln_ranked *b) { kiln_ranked t = *a; *a = *b; *b = t; }

// Partitions row[lo..hi] (inclusive) around a median-of-three pivot; returns the pivot's final place.
static size_t kiln_rank_partition(int largest, kiln_ranked *row, size_t lo, size_t hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (kiln_ranks_before(largest, row[mid], row[lo])) kiln_ranked_swap(&row[mid], &row[lo]);
    if (kiln_ranks_before(largest, row[hi], row[lo])) kiln_ranked_swap(&row[hi], &row[lo]);
    if (kiln_ranks_before(largest, row[hi], row[mid])) kiln_ranked_swap(&row[hi], &row[mid]);
    kiln_ranked_swap(&row[mid], &row[hi]);
    kiln_ranked pivot = row[hi];
    size_t store = lo;
    for (size_t r = lo; r < hi; r++)
        if (kiln_ranks_before(largest, row[r], pivot)) kiln_ranked_swap(&row[r], &row[store++]);
    kiln_ranked_swap(&row[store], &row[hi]);
    return store;
}

static void kiln_rank_sort(int largest, kiln_ranked *row, size_t n) {
    while (n > 16) {
        size_t p = kiln_rank_partition(largest, row, 0, n - 1);
        // Recurse into the smaller side, loop on the larger: the stack stays O(log n).
        if (p < n - 1 - p) { kiln_rank_sort(largest, row, p); row += p + 1; n -= p + 1; }
        else { kiln_rank_sort(largest, row + p + 1, n - 1 - p); n = p; }
    }
    for (size_t r = 1; r < n; r++) {
        kiln_ranked x = row[r];
        size_t j = r;
        for (; j > 0 && kiln_ranks_before(largest, x, row[j - 1]); j--) row[j] = row[j - 1];
        row[j] = x;
    }
}

// Moves the k best entries of row[0..n) to its front (in any order).
static void kiln_rank_select(int largest, kiln_ranked *row, size_t n, size_t k) {
    size_t lo = 0, hi = n - 1;
    while (k > lo && k <= hi && hi - lo > 16) {
        size_t p = kiln_rank_partition(largest, row, lo, hi);
        if (p == k || p + 1 == k) return;
        if (p > k) hi = p - 1; else lo = p + 1;
    }
    if (k > lo && k <= hi) kiln_rank_sort(largest, row + lo, hi - lo + 1);
}

void kiln_f32_top_k__scalar(int largest, size_t outer, size_t n, size_t inner, size_t k, const float *x, float *values,
                            int64_t *indices, void *scratch) {
    kiln_ranked *row = (kiln_ranked *)scratch;
    if (n == 0 || k == 0) return;
    for (size_t o = 0; o < outer; o++)
        for (size_t i = 0; i < inner; i++) {
            for (size_t r = 0; r < n; r++) { row[r].v = x[(o * n + r) * inner + i]; row[r].i = (int64_t)r; }
            if (k < n) kiln_rank_select(largest, row, n, k);
            kiln_rank_sort(largest, row, k);
            for (size_t r = 0; r < k; r++) {
                values[(o * k + r) * inner + i] = row[r].v;
                indices[(o * k + r) * inner + i] = row[r].i;
            }
        }
}

int kiln_reduce_code(const char *name) {
#define KILN_REDUCE(NAME, n, code) if (strcmp(name, #n) == 0) return code;
#include "kiln_reduce.inc"
#undef KILN_REDUCE
    return 0;
}
