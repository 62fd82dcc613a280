// Non-max suppression of one class: the candidates ordered by score with a radix sort of
// 64-bit keys (score in the high half, index in the low), then the greedy pass against the boxes
// kept so far. Kept boxes live in a one-dimensional grid over their left edge: a box can only
// overlap kept boxes whose left edge lies within the widest box's width to its left, so a query
// reads a few cells, and appending to a cell is O(1). Each cell is a chain of 16-lane chunks
// whose unused lanes hold NaN, so the overlap test runs over whole chunks without branches.
#include "kiln_kernels.h"

#include <math.h>
#include <string.h>

#define KILN_NMS_LANES 16
#define KILN_NMS_MAX_CELLS 4096

typedef struct {
    float y1[KILN_NMS_LANES], x1[KILN_NMS_LANES], y2[KILN_NMS_LANES], x2[KILN_NMS_LANES], area[KILN_NMS_LANES];
    int32_t used, next;
} kiln_nms_chunk;

static size_t kiln_nms_cells(size_t n) {
    size_t cells = n / 4;
    return cells < 1 ? 1 : (cells > KILN_NMS_MAX_CELLS ? KILN_NMS_MAX_CELLS : cells);
}

size_t kiln_nms_scratch_bytes(size_t n) {
    size_t cells = kiln_nms_cells(n);
    size_t chunks = n / KILN_NMS_LANES + cells + 1;
    return 2 * n * sizeof(uint64_t) + 2 * cells * sizeof(int32_t) + chunks * sizeof(kiln_nms_chunk) + 64;
}

// Scores map to keys that sort ascending in descending score order (NaN first), ties by index.
static inline uint64_t kiln_nms_key(float score, size_t index) {
    uint32_t u;
    memcpy(&u, &score, sizeof u);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ((uint64_t)~u << 32) | (uint64_t)index;
}

// LSD radix sort by bytes; passes whose byte is the same in every key are skipped.
static uint64_t *kiln_radix_sort64(uint64_t *keys, uint64_t *spare, size_t n) {
    uint64_t all_or = 0, all_and = ~(uint64_t)0;
    for (size_t i = 0; i < n; i++) { all_or |= keys[i]; all_and &= keys[i]; }
    for (int shift = 0; shift < 64; shift += 8) {
        if ((((all_or ^ all_and) >> shift) & 0xff) == 0) continue;
        size_t count[257] = {0};
        for (size_t i = 0; i < n; i++) count[((keys[i] >> shift) & 0xff) + 1]++;
        for (int d = 0; d < 256; d++) count[d + 1] += count[d];
        for (size_t i = 0; i < n; i++) spare[count[(keys[i] >> shift) & 0xff]++] = keys[i];
        uint64_t *t = keys; keys = spare; spare = t;
    }
    return keys;
}

static inline int kiln_nms_chunk_overlaps(const kiln_nms_chunk *c, float y1, float x1, float y2, float x2, float area, float iou) {
    int hit = 0;
    for (int j = 0; j < KILN_NMS_LANES; j++) {
        float ix = (c->x2[j] < x2 ? c->x2[j] : x2) - (c->x1[j] > x1 ? c->x1[j] : x1);
        float iy = (c->y2[j] < y2 ? c->y2[j] : y2) - (c->y1[j] > y1 ? c->y1[j] : y1);
        float inter = ix * iy, uni = area + c->area[j] - inter;
        hit |= (ix > 0.0f) & (iy > 0.0f) & (area > 0.0f) & (c->area[j] > 0.0f) & (uni > 0.0f) & (inter / uni > iou);
    }
    return hit;
}

size_t kiln_f32_nms_class(const float *scores, size_t n, int has_threshold, float threshold, const float *y1, const float *x1,
                          const float *y2, const float *x2, const float *area, float iou, size_t limit, int32_t *kept, void *scratch) {
    if (n == 0 || limit == 0) return 0;
    uint64_t *keys = (uint64_t *)scratch, *spare = keys + n;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (!has_threshold || scores[i] > threshold) keys[m++] = kiln_nms_key(scores[i], i);
    if (m == 0) return 0;
    keys = kiln_radix_sort64(keys, spare, m);

    // The grid: cells of width `cell` over the candidates' finite left edges, wide enough that a
    // query spans the widest box (with a margin for rounding in x2 − x1) and few enough to be cheap.
    // A box with an infinite edge may reach any other: then one cell holds every kept box.
    float lo = INFINITY, hi = -INFINITY, widest = 0.0f;
    int unbounded = 0;
    for (size_t r = 0; r < m; r++) {
        size_t i = (size_t)(keys[r] & 0xffffffffu);
        if (x1[i] != x1[i] || x2[i] != x2[i]) continue;
        if (isinf(x1[i]) || isinf(x2[i])) { unbounded = 1; continue; }
        if (x1[i] < lo) lo = x1[i];
        if (x1[i] > hi) hi = x1[i];
        if (x2[i] - x1[i] > widest) widest = x2[i] - x1[i];
    }
    size_t max_cells = kiln_nms_cells(m), cells = 1;
    float cell = 1.0f;
    if (lo <= hi && !unbounded) {
        float span = hi - lo, reach = widest + (fabsf(lo) + fabsf(hi) + widest) * 1e-5f;
        cell = reach > span / (float)max_cells ? reach : span / (float)max_cells;
        if (cell > 0.0f && isfinite(cell) && isfinite(span / cell)) cells = (size_t)(span / cell) + 1;
        if (cells > max_cells) cells = max_cells;
    }
    int32_t *head = (int32_t *)((uint64_t *)scratch + 2 * n);
    int32_t *tail = head + max_cells;
    kiln_nms_chunk *pool = (kiln_nms_chunk *)(((uintptr_t)(tail + max_cells) + 63) & ~(uintptr_t)63);
    for (size_t c = 0; c < cells; c++) head[c] = tail[c] = -1;
    int32_t chunks = 0;
    size_t count = 0;
    float base = lo <= hi ? lo : 0.0f;

    for (size_t r = 0; r < m && count < limit; r++) {
        size_t i = (size_t)(keys[r] & 0xffffffffu);
        float by1 = y1[i], bx1 = x1[i], by2 = y2[i], bx2 = x2[i], ba = area[i];
        int has_nan = by1 != by1 || bx1 != bx1 || by2 != by2 || bx2 != bx2 || ba != ba;
        // A box with a NaN corner intersects nothing: it is kept and never suppresses.
        if (!has_nan) {
            size_t first = 0, last = cells - 1;
            if (cells > 1) {
                float reach = widest + (fabsf(bx1) + widest) * 1e-5f;
                float a = (bx1 - reach - base) / cell, b = (bx2 - base) / cell;
                first = a <= 0.0f ? 0 : (a >= (float)(cells - 1) ? cells - 1 : (size_t)a);
                last = b <= 0.0f ? 0 : (b >= (float)(cells - 1) ? cells - 1 : (size_t)b);
            }
            int suppressed = 0;
            for (size_t c = first; c <= last && !suppressed; c++)
                for (int32_t k = head[c]; k >= 0 && !suppressed; k = pool[k].next)
                    suppressed = kiln_nms_chunk_overlaps(&pool[k], by1, bx1, by2, bx2, ba, iou);
            if (suppressed) continue;
            float a = (bx1 - base) / cell;
            size_t c = cells == 1 || a <= 0.0f ? 0 : (a >= (float)(cells - 1) ? cells - 1 : (size_t)a);
            int32_t t = tail[c];
            if (t < 0 || pool[t].used == KILN_NMS_LANES) {
                kiln_nms_chunk *fresh = &pool[chunks];
                for (int j = 0; j < KILN_NMS_LANES; j++)
                    fresh->y1[j] = fresh->x1[j] = fresh->y2[j] = fresh->x2[j] = fresh->area[j] = NAN;
                fresh->used = 0;
                fresh->next = -1;
                if (t < 0) head[c] = chunks; else pool[t].next = chunks;
                tail[c] = t = chunks++;
            }
            kiln_nms_chunk *k = &pool[t];
            k->y1[k->used] = by1; k->x1[k->used] = bx1; k->y2[k->used] = by2; k->x2[k->used] = bx2; k->area[k->used] = ba;
            k->used++;
        }
        kept[count++] = (int32_t)i;
    }
    return count;
}
