// The inner scan of exact 1-D k-means dynamic programming: for row i, the split j in
// [lo, hi] minimizing prev[j] + cost(j, i), where cost(j, i) = max(0, Q - S*S / W) over the
// prefix-sum differences W, S, Q of points j..<i. Ties keep the lowest j. Every variant does the
// same IEEE operations in the same order (no contraction), so results are identical.
#include "kiln_kernels.h"

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
