// The inner scan of exact 1-D k-means dynamic programming: for row i, the split j in
// [lo, hi] minimizing prev[j] + cost(j, i), where cost(j, i) = max(0, Q - S*S / W) over the
// prefix-sum differences W, S, Q of points j..<i. Ties keep the lowest j. Every variant does the
// same IEEE operations in the same order (no contraction), so results are identical.
#include "kiln_kmeans.h"

#pragma STDC FP_CONTRACT OFF

static inline double kiln_kmeans_cost(const double *w, const double *s, const double *q, size_t j, size_t i) {
    const double n = w[i] - w[j];
    const double t = s[i] - s[j];
    const double c = (q[i] - q[j]) - (t * t) / n;
    return c > 0 ? c : 0;
}

size_t kiln_kmeans_argmin__scalar(const double *prev, const double *w, const double *s, const double *q, size_t lo,
                                  size_t hi, size_t i, double *best_cost) {
    double best = __builtin_inf();
    size_t at = lo;
    for (size_t j = lo; j <= hi; j++) {
        const double c = prev[j] + kiln_kmeans_cost(w, s, q, j, i);
        if (c < best) {
            best = c;
            at = j;
        }
    }
    *best_cost = best;
    return at;
}

#if defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("avx2")))
size_t kiln_kmeans_argmin__avx2(const double *prev, const double *w, const double *s, const double *q, size_t lo,
                                size_t hi, size_t i, double *best_cost) {
    if (hi < lo + 8) return kiln_kmeans_argmin__scalar(prev, w, s, q, lo, hi, i, best_cost);
    const __m256d wi = _mm256_set1_pd(w[i]), si = _mm256_set1_pd(s[i]), qi = _mm256_set1_pd(q[i]);
    const __m256d zero = _mm256_setzero_pd();
    __m256d best = _mm256_set1_pd(__builtin_inf());
    __m256d bestj = _mm256_setzero_pd();
    __m256d jv = _mm256_set_pd((double)(lo + 3), (double)(lo + 2), (double)(lo + 1), (double)lo);
    const __m256d four = _mm256_set1_pd(4.0);
    size_t j = lo;
    for (; j + 3 <= hi; j += 4) {
        const __m256d n = _mm256_sub_pd(wi, _mm256_loadu_pd(w + j));
        const __m256d t = _mm256_sub_pd(si, _mm256_loadu_pd(s + j));
        const __m256d dq = _mm256_sub_pd(qi, _mm256_loadu_pd(q + j));
        __m256d c = _mm256_sub_pd(dq, _mm256_div_pd(_mm256_mul_pd(t, t), n));
        c = _mm256_max_pd(c, zero); // max(c, 0): NaN never arises (n > 0)
        c = _mm256_add_pd(_mm256_loadu_pd(prev + j), c);
        const __m256d better = _mm256_cmp_pd(c, best, _CMP_LT_OQ);
        best = _mm256_blendv_pd(best, c, better);
        bestj = _mm256_blendv_pd(bestj, jv, better);
        jv = _mm256_add_pd(jv, four);
    }
    double costs[4], js[4];
    _mm256_storeu_pd(costs, best);
    _mm256_storeu_pd(js, bestj);
    double b = __builtin_inf();
    size_t at = lo;
    for (int k = 0; k < 4; k++) {
        const size_t jk = (size_t)js[k];
        if (costs[k] < b || (costs[k] == b && jk < at)) {
            b = costs[k];
            at = jk;
        }
    }
    for (; j <= hi; j++) {
        const double c = prev[j] + kiln_kmeans_cost(w, s, q, j, i);
        if (c < b) {
            b = c;
            at = j;
        }
    }
    *best_cost = b;
    return at;
}
#endif

// One layer of the windowed k-means dynamic programming (KilnCompression's BoundedKMeans). A
// column c is a place of the previous cut: the next cluster holds items from ca[c] on, plus what
// the column adds (a point mass of a cut item); (aw, as, aq)[c] are the prefix sums of count,
// sum and square sum at ca[c] minus that mass. A row r is a place of this cut: the cluster holds
// items before rb[r], plus what the row adds; (bw, bs, bq)[r] are the prefix sums at rb[r] plus
// that mass. A cluster's cost is then (bq - aq) - (bs - as)^2 / (bw - aw), and 0 when it is empty
// or when ca[c] > rb[r] (both cuts inside one item). Column c is feasible for row r when c <= last[r].
// out[r] = min over feasible c of cf[c] + cost; arg[r] the lowest minimizing c (-1: none feasible).
// The argmin is monotone in r (the cost is Monge), so rows are solved by divide and conquer.
static inline double kiln_kmeans_cluster_cost(const double *aw, const double *as, const double *aq, const uint32_t *ca,
                                              size_t c, double bw, double bs, double bq, uint32_t b) {
    if (ca[c] > b) return 0;
    const double n = bw - aw[c];
    if (!(n > 0)) return 0;
    const double t = bs - as[c];
    const double v = (bq - aq[c]) - (t * t) / n;
    return v > 0 ? v : 0;
}

void kiln_kmeans_window_layer(const double *aw, const double *as, const double *aq, const uint32_t *ca,
                              const double *cf, size_t ncols, const double *bw, const double *bs, const double *bq,
                              const uint32_t *rb, const int64_t *last, size_t nrows, double *out, int32_t *arg) {
    if (nrows == 0) return;
    // An explicit stack of (row lo, row hi, column lo, column hi); its depth is O(log rows).
    int64_t stack[4 * 66];
    int top = 1;
    stack[0] = 0; stack[1] = (int64_t)nrows - 1; stack[2] = 0; stack[3] = (int64_t)ncols - 1;
    while (top > 0) {
        top--;
        const int64_t rlo = stack[4 * top], rhi = stack[4 * top + 1], clo = stack[4 * top + 2], chi = stack[4 * top + 3];
        if (rlo > rhi) continue;
        const int64_t mid = rlo + (rhi - rlo) / 2;
        const int64_t end = last[mid] < chi ? last[mid] : chi;
        double best = __builtin_inf();
        int64_t at = clo;
        for (int64_t c = clo; c <= end; c++) {
            const double v = cf[c] + kiln_kmeans_cluster_cost(aw, as, aq, ca, (size_t)c, bw[mid], bs[mid], bq[mid], rb[mid]);
            if (v < best) {
                best = v;
                at = c;
            }
        }
        out[mid] = best;
        arg[mid] = (int32_t)(end >= clo ? at : -1);
        stack[4 * top] = rlo; stack[4 * top + 1] = mid - 1; stack[4 * top + 2] = clo; stack[4 * top + 3] = at;
        top++;
        stack[4 * top] = mid + 1; stack[4 * top + 1] = rhi; stack[4 * top + 2] = at; stack[4 * top + 3] = chi;
        top++;
    }
}

// Passes of BoundedKMeans over a group's values (contiguous float32 blocks) and the palettizer's
// assignment. Keys order floats as numbers (-0 as +0); within a 16-bit bin of keys the values are
// evenly spaced, so bins keep exact integer sums of r = key - (bin's first key).
#include <string.h>

static inline uint32_t kiln_kmeans_key(float v) {
    uint32_t b;
    memcpy(&b, &v, 4);
    if (v == 0) b = 0;
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

static inline void kiln_kmeans_bin_add(kiln_kmeans_bin *s, uint32_t key, uint64_t r) {
    s->n += 1;
    s->r += r;
    s->r2 += r * r;
    if (key < s->min_key) s->min_key = key;
    if (key > s->max_key) s->max_key = key;
}

int kiln_kmeans_histogram16(const float *x, size_t n, kiln_kmeans_bin *bins) {
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, &x[i], 4);
        bad |= (b & 0x7F800000u) == 0x7F800000u;
        const uint32_t key = kiln_kmeans_key(x[i]);
        kiln_kmeans_bin_add(&bins[key >> 16], key, key & 0xFFFFu);
    }
    return bad != 0;
}

// The target holding key, or `trash` when none does: starts[b] .. starts[b + 1] are the targets
// inside 16-bit bin b, sorted by their first key los[], each holding keys los[t] ... his[t]; los and
// his have one more entry past the targets (a sentinel). `probe` is the largest power of two not
// above the most targets in one bin. The search within a bin is branch-free.
static inline int64_t kiln_kmeans_find(uint32_t key, const int32_t *starts, const uint32_t *los, const uint32_t *his,
                                       int64_t probe, int64_t trash) {
    const uint32_t b = key >> 16;
    int64_t lo = starts[b];
    const int64_t end = starts[b + 1];
    if (lo == end) return trash;
    for (int64_t step = probe; step > 0; step >>= 1) {
        const int64_t next = lo + step;
        lo = (next < end && los[next] <= key) ? next : lo;
    }
    const int hit = (lo < end) & (los[lo] <= key) & (key <= his[lo]);
    return hit ? lo : trash;
}

void kiln_kmeans_refine(const float *x, size_t n, const int32_t *starts, const uint32_t *los, const uint32_t *his,
                        const uint8_t *shifts, unsigned fan_bits, int64_t probe, int64_t targets, kiln_kmeans_bin *slots) {
    for (size_t i = 0; i < n; i++) {
        const uint32_t key = kiln_kmeans_key(x[i]);
        const int64_t t = kiln_kmeans_find(key, starts, los, his, probe, -1);
        if (t < 0) continue;
        const uint32_t offset = key - los[t], shift = shifts[t];
        kiln_kmeans_bin_add(&slots[((size_t)t << fan_bits) + (offset >> shift)], key, offset & ((1u << shift) - 1u));
    }
    (void)targets;
}

void kiln_kmeans_refine_exact(const float *x, size_t n, const int32_t *starts, const uint32_t *los, const uint32_t *his,
                              unsigned fan_bits, int64_t probe, int64_t targets, uint32_t *counts) {
    for (size_t i = 0; i < n; i++) {
        const uint32_t key = kiln_kmeans_key(x[i]);
        const int64_t t = kiln_kmeans_find(key, starts, los, his, probe, -1);
        if (t < 0) continue;
        counts[((size_t)t << fan_bits) + (key - los[t])] += 1;
    }
    (void)targets;
}

void kiln_palettize_assign(const float *raw, size_t n, float scale, int has_scale, const double *mids, size_t span,
                           const float *table, const int16_t *bin_index, uint8_t *indices, double *signal, double *noise) {
    double sig = *signal, noi = *noise;
    for (size_t i = 0; i < n; i++) {
        const float r = raw[i];
        const float v = has_scale ? r / scale : r;
        size_t at;
        const int16_t known = bin_index ? bin_index[kiln_kmeans_key(v) >> 16] : -1;
        if (known >= 0) {
            at = (size_t)known;
        } else {
            const double x = (double)v;
            at = 0;
            for (size_t step = span >> 1; step > 0; step >>= 1) at += x > mids[at + step - 1] ? step : 0;
        }
        const float decoded = has_scale ? table[at] * scale : table[at];
        const double d = (double)r - (double)decoded;
        sig += (double)r * (double)r;
        noi += d * d;
        indices[i] = (uint8_t)at;
    }
    *signal = sig;
    *noise = noi;
}

void kiln_pack_bits(const uint8_t *indices, size_t n, unsigned bits, uint8_t *dst) {
    if (bits == 8) {
        memcpy(dst, indices, n);
        return;
    }
    uint64_t acc = 0;
    unsigned pending = 0;
    size_t out = 0;
    for (size_t i = 0; i < n; i++) {
        acc |= (uint64_t)indices[i] << pending;
        pending += bits;
        while (pending >= 8) {
            dst[out++] = (uint8_t)acc;
            acc >>= 8;
            pending -= 8;
        }
    }
    if (pending > 0) dst[out] = (uint8_t)acc;
}

void kiln_kmeans_histogram_half(const uint16_t *x, size_t n, uint32_t *counts) {
    for (size_t i = 0; i < n; i++) counts[x[i]] += 1;
}

void kiln_palettize_assign_half(const uint16_t *raw, size_t n, const float *value_of, const uint8_t *index_of,
                                const float *table, uint8_t *indices, double *signal, double *noise) {
    double sig = *signal, noi = *noise;
    for (size_t i = 0; i < n; i++) {
        const uint16_t h = raw[i];
        const float r = value_of[h];
        const uint8_t at = index_of[h];
        const double d = (double)r - (double)table[at];
        sig += (double)r * (double)r;
        noi += d * d;
        indices[i] = at;
    }
    *signal = sig;
    *noise = noi;
}
