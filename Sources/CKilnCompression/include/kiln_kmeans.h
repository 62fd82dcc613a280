// Exact 1-D k-means and palettization, for the compression passes (KilnCompression): a C target
// of its own, apart from the inference kernel library (CKilnKernels).
#ifndef KILN_KMEANS_H
#define KILN_KMEANS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
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
