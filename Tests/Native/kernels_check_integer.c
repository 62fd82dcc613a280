// The 8-bit integer GEMM (gemm_int8.c) against a plain int64 reference wrapped to int32: every
// ISA row, with and without VNNI where the CPU has it, at row, K and column edges, for uint8 and
// int8 inputs and weights, zero points none, one or per column, and sums that wrap.
#include "kernels_check.h"

static uint8_t byte_at(unsigned *state) {
    *state = *state * 1664525u + 1013904223u;
    return (uint8_t)(*state >> 24);
}

static int check_case(const char *name, kiln_u8s8_gemm_fn fn, size_t m, size_t k, size_t n, int a_signed, int b_unsigned,
                      int zeros, int extreme, unsigned seed) {
    uint8_t *a = malloc(m * k + 1), *b = malloc(k * n + 1), z[64];
    int8_t *packed = malloc(kiln_s8_packed_bytes(k, n) + 1);
    int32_t *sums = malloc(2 * n * sizeof(int32_t) + 4), *c = malloc(m * n * sizeof(int32_t) + 4);
    unsigned s = seed;
    for (size_t i = 0; i < m * k; i++) a[i] = extreme ? (a_signed ? 0x80 : 0xFF) : byte_at(&s);
    for (size_t i = 0; i < k * n; i++) b[i] = extreme ? (b_unsigned ? 0x00 : 0x80) : byte_at(&s);
    for (size_t i = 0; i < 64; i++) z[i] = byte_at(&s);
    const size_t zero_count = zeros == 2 ? n : (size_t)zeros;
    const int a_zero = a_signed ? (int)(int8_t)z[63] : (int)z[63];
    kiln_s8_pack_b(k, n, b, n, b_unsigned, zero_count ? z : NULL, zero_count, packed, sums);
    const size_t panels = (n + KILN_I8_NR - 1) / KILN_I8_NR;
    // Two calls split at a panel and at a row, as threads split the work.
    const size_t half = panels / 2, mid = m / 2;
    fn(0, mid, n, k, a, k, a_signed, a_zero, packed, sums, 0, panels, c, n);
    fn(mid, m, n, k, a, k, a_signed, a_zero, packed, sums, 0, half, c, n);
    fn(mid, m, n, k, a, k, a_signed, a_zero, packed, sums, half, panels, c, n);
    int bad = 0;
    for (size_t i = 0; i < m && !bad; i++)
        for (size_t j = 0; j < n && !bad; j++) {
            int64_t sum = 0;
            const int bz = zero_count ? (b_unsigned ? (int)z[zero_count == 1 ? 0 : j] : (int)(int8_t)z[zero_count == 1 ? 0 : j]) : 0;
            for (size_t p = 0; p < k; p++) {
                const int av = a_signed ? (int)(int8_t)a[i * k + p] : (int)a[i * k + p];
                const int bv = b_unsigned ? (int)b[p * n + j] : (int)(int8_t)b[p * n + j];
                sum += (int64_t)(av - a_zero) * (bv - bz);
            }
            const int32_t want = (int32_t)(uint32_t)(uint64_t)sum;
            if (c[i * n + j] != want) {
                printf("%s: MISMATCH m=%zu k=%zu n=%zu a_signed=%d b_unsigned=%d zeros=%d at (%zu, %zu): %d, want %d\n", name, m, k, n,
                       a_signed, b_unsigned, zeros, i, j, c[i * n + j], want);
                bad = 1;
            }
        }
    free(a), free(b), free(packed), free(sums), free(c);
    return bad;
}

void check_u8s8_gemm(const char *name, kiln_u8s8_gemm_fn fn, uint32_t needs) {
    if ((kiln_cpu_features() & needs) != needs) {
        printf("%s: skipped (this CPU lacks its ISA)\n", name);
        return;
    }
    static const size_t ms[] = {1, 2, 3, 7, 8, 9, 17}, ks[] = {1, 2, 3, 4, 5, 8, 63, 64, 65, 130}, ns[] = {1, 15, 16, 17, 31, 32, 33, 70};
    int bad = 0, count = 0;
    unsigned seed = 1;
    for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
            for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++, seed++) {
                bad += check_case(name, fn, ms[mi], ks[ki], ns[ni], (int)(seed % 2), (int)(seed / 2 % 2), (int)(seed % 3), 0, seed);
                count++;
            }
    // 255 · 128 · 66000 passes 2^31: the sums wrap as int32 accumulation does.
    bad += check_case(name, fn, 9, 66000, 3, 0, 0, 0, 1, 7);
    bad += check_case(name, fn, 3, 66001, 33, 1, 1, 1, 1, 8);
    count += 2;
    cases += count;
    failures += bad;
    printf("%s%s: %d cases, %s\n", name, (kiln_cpu_features() & KILN_CPU_X86_VNNI) && strstr(name, "avx512") ? " (VNNI)" : "", count,
           bad ? "MISMATCH" : "exact");
}
