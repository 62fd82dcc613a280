// CPU feature detection, the ISA list and the thread pool. Part of kiln_kernels.h, the kernel
// library's umbrella header.
#ifndef KILN_CPU_H
#define KILN_CPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// MARK: CPU features

enum {
    KILN_CPU_SSE2 = 1u << 0,
    KILN_CPU_X86_V2 = 1u << 1,   // SSE3, SSSE3, SSE4.1, SSE4.2, POPCNT, CX16, LAHF-SAHF
    KILN_CPU_X86_V3 = 1u << 2,   // v2 + AVX, AVX2, BMI1, BMI2, F16C, FMA, LZCNT, MOVBE, OS saves YMM
    KILN_CPU_X86_V4 = 1u << 3,   // v3 + AVX-512 F, BW, CD, DQ, VL, OS saves opmask and ZMM
    KILN_CPU_X86_VNNI = 1u << 4, // v4 + AVX512-VNNI (vpdpbusd): the 8-bit GEMM's products (not an ISA of its own)
    KILN_CPU_NEON = 1u << 8,     // arm64 Advanced SIMD
    KILN_CPU_ARM_DOTPROD = 1u << 9, // NEON + dot product + half-precision arithmetic
};

/// The instruction sets kernels are built for, each with the CPU features (KILN_CPU_*) a host
/// needs to run its kernels: the one list (Kiln's `ISA` maps its cases to these codes).
#define KILN_ISAS(X) X(SCALAR, scalar, 0u) X(AVX2, avx2, KILN_CPU_X86_V3) X(AVX512, avx512, KILN_CPU_X86_V4) X(NEON, neon, KILN_CPU_NEON)
#define KILN_DECLARE_ISA(NAME, name, features) KILN_ISA_##NAME,
enum { KILN_ISAS(KILN_DECLARE_ISA) KILN_ISA_COUNT };
#undef KILN_DECLARE_ISA
/// The CPU features ISA `isa` needs, or all bits for an unknown code.
uint32_t kiln_isa_features(int isa);
/// The name of ISA `isa` (`avx2`), or NULL.
const char *kiln_isa_name(int isa);

/// The host's feature bits (detected once; thread-safe).
uint32_t kiln_cpu_features(void);

/// The arm64 feature bits for an `AT_HWCAP` value (ASIMD → NEON; ASIMD with ASIMDDP, FPHP and
/// ASIMDHP → DOTPROD). On every platform, so faked values can be tested anywhere.
uint32_t kiln_cpu_from_hwcap(unsigned long hwcap);

/// One CPU feature as the host reports it, for `kiln host`.
typedef struct {
    const char *name; // e.g. "avx2", "os-ymm" (XCR0 saves YMM state), "asimddp"
    int present;
} kiln_cpu_flag;

/// The individual features behind `kiln_cpu_features()`: CPUID leaves 1, 7 and 0x80000001 and
/// the OS-enabled register state in XCR0 on x86-64, HWCAP on arm64. Returns how many entries
/// `kiln_cpu_flags` holds (at most 64).
int kiln_cpu_flag_list(kiln_cpu_flag *flags, int capacity);

/// Detects the feature bits again (for tests); does not touch the cached record.
uint32_t kiln_cpu_detect(void);

// MARK: Threads

typedef void (*kiln_task_fn)(void *ctx, size_t index);

/// Runs fn(ctx, i) for i in [0, count) on the calling thread and the pool's workers (one per
/// further core, started on first use). One loop at a time; a busy pool runs the loop inline.
void kiln_parallel_for(size_t count, kiln_task_fn fn, void *ctx);
/// As `kiln_parallel_for` on at most `threads` threads (the caller and workers 1 … threads - 1).
void kiln_parallel_for_threads(size_t count, size_t threads, kiln_task_fn fn, void *ctx);

#ifdef __cplusplus
}
#endif
#endif
