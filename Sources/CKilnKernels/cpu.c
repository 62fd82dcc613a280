// CPU feature detection: CPUID and the OS-enabled state in XCR0 on x86-64, HWCAP on arm64.
#include "kiln_kernels.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>

static uint64_t kiln_xgetbv0(void) {
    uint32_t eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((uint64_t)edx << 32) | eax;
}

uint32_t kiln_cpu_detect(void) {
    uint32_t a, b, c, d;
    uint32_t features = KILN_CPU_SSE2; // every x86-64 CPU
    if (!__get_cpuid(1, &a, &b, &c, &d)) return features;
    const uint32_t c1 = c;
    uint32_t b7 = 0, c7 = 0;
    if (__get_cpuid_max(0, 0) >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        b7 = b;
        c7 = c;
    }
    uint32_t cx = 0;
    if (__get_cpuid_max(0x80000000u, 0) >= 0x80000001u) {
        __cpuid(0x80000001u, a, b, c, d);
        cx = c;
    }
#define BIT(r, n) (((r) >> (n)) & 1u)
    const int v2 = BIT(c1, 0) && BIT(c1, 9) && BIT(c1, 13) && BIT(c1, 19) && BIT(c1, 20) && BIT(c1, 23) && BIT(cx, 0);
    if (!v2) return features;
    features |= KILN_CPU_X86_V2;
    // AVX state needs OSXSAVE and XCR0 bits 1 (SSE) and 2 (AVX): a CPU with AVX whose OS
    // does not save YMM registers cannot run AVX code.
    if (!BIT(c1, 27)) return features;
    const uint64_t xcr0 = kiln_xgetbv0();
    const int os_ymm = (xcr0 & 0x6) == 0x6;
    const int v3 = os_ymm && BIT(c1, 28) && BIT(c1, 12) && BIT(c1, 29) && BIT(c1, 22) && BIT(b7, 5) && BIT(b7, 3)
        && BIT(b7, 8) && BIT(cx, 5);
    if (!v3) return features;
    features |= KILN_CPU_X86_V3;
    // AVX-512 also needs XCR0 bits 5, 6, 7 (opmask, upper ZMM0-15, ZMM16-31).
    const int os_zmm = (xcr0 & 0xE6) == 0xE6;
    const int v4 = os_zmm && BIT(b7, 16) && BIT(b7, 17) && BIT(b7, 28) && BIT(b7, 30) && BIT(b7, 31);
    if (v4) features |= KILN_CPU_X86_V4;
    if (v4 && BIT(c7, 11)) features |= KILN_CPU_X86_VNNI;
#undef BIT
    return features;
}

int kiln_cpu_flag_list(kiln_cpu_flag *flags, int capacity) {
    uint32_t a, b, c, d, c1 = 0, d1 = 0, b7 = 0, c7 = 0, cx = 0;
    if (__get_cpuid(1, &a, &b, &c, &d)) { c1 = c; d1 = d; }
    if (__get_cpuid_max(0, 0) >= 7) { __cpuid_count(7, 0, a, b, c, d); b7 = b; c7 = c; }
    if (__get_cpuid_max(0x80000000u, 0) >= 0x80000001u) { __cpuid(0x80000001u, a, b, c, d); cx = c; }
    const uint64_t xcr0 = ((c1 >> 27) & 1u) ? kiln_xgetbv0() : 0;
#define B(r, n) (int)(((r) >> (n)) & 1u)
    const kiln_cpu_flag all[] = {
        {"sse2", B(d1, 26)}, {"sse3", B(c1, 0)}, {"ssse3", B(c1, 9)}, {"sse4.1", B(c1, 19)}, {"sse4.2", B(c1, 20)},
        {"popcnt", B(c1, 23)}, {"cx16", B(c1, 13)}, {"lahf-sahf", B(cx, 0)}, {"pclmulqdq", B(c1, 1)}, {"aes", B(c1, 25)},
        {"avx", B(c1, 28)}, {"fma", B(c1, 12)}, {"f16c", B(c1, 29)}, {"movbe", B(c1, 22)}, {"avx2", B(b7, 5)},
        {"bmi1", B(b7, 3)}, {"bmi2", B(b7, 8)}, {"lzcnt", B(cx, 5)}, {"sha", B(b7, 29)}, {"vpclmulqdq", B(c7, 10)},
        {"avx512f", B(b7, 16)}, {"avx512dq", B(b7, 17)}, {"avx512cd", B(b7, 28)}, {"avx512bw", B(b7, 30)},
        {"avx512vl", B(b7, 31)}, {"avx512vnni", B(c7, 11)}, {"osxsave", B(c1, 27)},
        {"os-ymm", (xcr0 & 0x6) == 0x6}, {"os-zmm", (xcr0 & 0xE6) == 0xE6},
    };
#undef B
    int n = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0] && n < capacity; i++) flags[n++] = all[i];
    return n;
}

#elif defined(__aarch64__)
#include <sys/auxv.h>

int kiln_cpu_flag_list(kiln_cpu_flag *flags, int capacity) {
    const unsigned long hw = getauxval(AT_HWCAP);
    const kiln_cpu_flag all[] = {
        {"fp", (int)(hw & 1ul)}, {"asimd", (int)((hw >> 1) & 1ul)}, {"aes", (int)((hw >> 3) & 1ul)},
        {"pmull", (int)((hw >> 4) & 1ul)}, {"sha2", (int)((hw >> 6) & 1ul)}, {"crc32", (int)((hw >> 7) & 1ul)},
        {"fphp", (int)((hw >> 9) & 1ul)}, {"asimdhp", (int)((hw >> 10) & 1ul)}, {"asimddp", (int)((hw >> 20) & 1ul)},
        {"sve", (int)((hw >> 22) & 1ul)},
    };
    int n = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0] && n < capacity; i++) flags[n++] = all[i];
    return n;
}

uint32_t kiln_cpu_detect(void) { return kiln_cpu_from_hwcap(getauxval(AT_HWCAP)); }

#else
uint32_t kiln_cpu_detect(void) { return 0; }
int kiln_cpu_flag_list(kiln_cpu_flag *flags, int capacity) {
    (void)flags;
    (void)capacity;
    return 0;
}
#endif

// On every platform, so the rule is tested on any host.
uint32_t kiln_cpu_from_hwcap(unsigned long hw) {
    uint32_t features = 0;
    if (hw & (1ul << 1)) features |= KILN_CPU_NEON; // HWCAP_ASIMD
    const int dot = (hw >> 20) & 1ul, fphp = (hw >> 9) & 1ul, asimdhp = (hw >> 10) & 1ul;
    if ((features & KILN_CPU_NEON) && dot && fphp && asimdhp) features |= KILN_CPU_ARM_DOTPROD;
    return features;
}

static uint32_t kiln_cpu_cached;
static int kiln_cpu_ready;

// KILN_MAX_ISA=<isa name> (scalar, avx2, avx512, neon) hides the features above that ISA, so
// one machine runs the kernels and the artifact choice of a smaller one (tests, fuzzing,
// reproducing a report from another host). It can only lower what the CPU has; an unknown name
// leaves the features as detected.
static uint32_t kiln_cpu_limit(uint32_t features) {
    const char *name = getenv("KILN_MAX_ISA");
    if (!name) return features;
    for (int isa = 0; isa < KILN_ISA_COUNT; isa++) {
        if (strcmp(name, kiln_isa_name(isa)) != 0) continue;
        const uint32_t need = kiln_isa_features(isa);
        // Every bit up to the ISA's highest one stays (the x86 levels and NEON nest that way);
        // scalar keeps only what needs no vector unit beyond SSE2.
        uint32_t keep = KILN_CPU_SSE2 | KILN_CPU_X86_V2;
        for (uint32_t bit = 1; bit != 0 && bit <= need; bit <<= 1) keep |= bit;
        return features & keep;
    }
    return features;
}

uint32_t kiln_cpu_features(void) {
    // Detection is idempotent, so a race only repeats it; the record is written once per value.
    if (!__atomic_load_n(&kiln_cpu_ready, __ATOMIC_ACQUIRE)) {
        __atomic_store_n(&kiln_cpu_cached, kiln_cpu_limit(kiln_cpu_detect()), __ATOMIC_RELAXED);
        __atomic_store_n(&kiln_cpu_ready, 1, __ATOMIC_RELEASE);
    }
    return __atomic_load_n(&kiln_cpu_cached, __ATOMIC_RELAXED);
}

#define KILN_ISA_FEATURES(NAME, name, features) features,
static const uint32_t kiln_isa_feature_bits[] = {KILN_ISAS(KILN_ISA_FEATURES)};
#undef KILN_ISA_FEATURES
#define KILN_ISA_NAME(NAME, name, features) #name,
static const char *const kiln_isa_names[] = {KILN_ISAS(KILN_ISA_NAME)};
#undef KILN_ISA_NAME

uint32_t kiln_isa_features(int isa) { return isa >= 0 && isa < KILN_ISA_COUNT ? kiln_isa_feature_bits[isa] : ~0u; }

const char *kiln_isa_name(int isa) { return isa >= 0 && isa < KILN_ISA_COUNT ? kiln_isa_names[isa] : NULL; }
