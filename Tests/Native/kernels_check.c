// Checks the ISA microkernels of CKilnKernels against a plain C reference, on whatever CPU runs it:
// natively (x86-64: the AVX2 and AVX-512 kernels, each skipped with a message when the CPU lacks
// it) and under qemu-aarch64 (the NEON kernels), plus the HWCAP feature rule with faked values and
// the thread pool. The GEMM checks are in kernels_check_gemm.c, the convolution and recurrent ones
// in kernels_check_conv.c. `make kernels-check` runs them.
#include "kernels_check.h"

int failures, cases;

static void check_hwcap(void) {
    const unsigned long asimd = 1ul << 1, fphp = 1ul << 9, asimdhp = 1ul << 10, dot = 1ul << 20;
    const struct { unsigned long hw; uint32_t want; } table[] = {
        {0, 0},
        {asimd, KILN_CPU_NEON},
        {asimd | dot, KILN_CPU_NEON},
        {asimd | dot | fphp, KILN_CPU_NEON},
        {asimd | dot | fphp | asimdhp, KILN_CPU_NEON | KILN_CPU_ARM_DOTPROD},
        {dot | fphp | asimdhp, 0},
        {~0ul, KILN_CPU_NEON | KILN_CPU_ARM_DOTPROD},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        cases++;
        const uint32_t got = kiln_cpu_from_hwcap(table[i].hw);
        if (got != table[i].want) {
            failures++;
            printf("hwcap %#lx: features %#x, want %#x\n", table[i].hw, got, table[i].want);
        }
    }
}

// The thread pool: callers on several threads at once (all but one find it busy and run inline),
// jobs of every size; each index must run exactly once, and a job must be complete when
// kiln_parallel_for returns.
struct pool_job { _Atomic int hits[64]; };

static void pool_task(void *ctx, size_t i) {
    struct pool_job *job = ctx;
    volatile unsigned spin = 0;
    for (unsigned k = 0; k < (unsigned)(i % 7) * 50; k++) spin += k;
    atomic_fetch_add(&job->hits[i], 1);
}

static _Atomic int pool_failures;

static void *pool_caller(void *arg) {
    unsigned state = (unsigned)(uintptr_t)arg;
    for (int j = 0; j < 3000; j++) {
        struct pool_job job;
        const size_t n = 1 + (size_t)(value(&state) * 31.5f + 32.0f) % 64;
        for (size_t i = 0; i < 64; i++) atomic_init(&job.hits[i], 0);
        // Every thread count from one to all (SIZE_MAX): the pool's limit changes from job to job.
        if (j % 4 == 3) kiln_parallel_for(n, pool_task, &job);
        else kiln_parallel_for_threads(n, (size_t)(j % 4) + 1, pool_task, &job);
        for (size_t i = 0; i < 64; i++)
            if (atomic_load(&job.hits[i]) != (i < n ? 1 : 0)) { atomic_fetch_add(&pool_failures, 1); break; }
    }
    return NULL;
}

static void check_pool(void) {
    pthread_t t[4];
    for (uintptr_t i = 0; i < 4; i++) pthread_create(&t[i], NULL, pool_caller, (void *)(i * 977 + 1));
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    cases += 4 * 3000;
    failures += atomic_load(&pool_failures);
    printf("thread pool: %s\n", atomic_load(&pool_failures) ? "MISMATCH (an index ran twice, or not at all)" : "every index once");
}

int main(void) {
    check_hwcap();
    check_pool();
    printf("features of this CPU: %#x\n", kiln_cpu_features());
    // Every GEMM microkernel of kiln_gemm.inc built for this CPU family (a host without its ISA is skipped).
    for (size_t i = 0; i < kiln_gemm_config_count(); i++) {
        const kiln_gemm_config *g = kiln_gemm_config_at(i);
        if (!g->f32) continue;
        check_ukernel(g->name);
        check_extremes(g->name);
        check_q_ukernel(g->name);
    }
    // Every vector row of kiln_vector.inc built here, through its ISA's config (a host without
    // the ISA is skipped by each check); Winograd's transforms with each GEMM tile of their ISA.
    for (int isa = 0; isa < KILN_ISA_COUNT; isa++) {
        const kiln_vector_config *v = kiln_vector_config_of(isa);
        const uint32_t needs = kiln_isa_features(isa);
        char name[64];
        if (kiln_vector_built(KILN_VECTOR_DWCONV2D_NHWC, isa)) {
            snprintf(name, sizeof name, "f32_dwconv2d_nhwc__%s", kiln_isa_name(isa));
            check_dwconv_nhwc(name, v->dwconv2d_nhwc, needs);
        }
        if (kiln_vector_built(KILN_VECTOR_INTEGER, isa)) {
            snprintf(name, sizeof name, "u8s8_gemm__%s", kiln_isa_name(isa));
            check_u8s8_gemm(name, v->u8s8_gemm, needs);
        }
        if (kiln_vector_built(KILN_VECTOR_NORMALIZATION, isa)) {
            snprintf(name, sizeof name, "f32_attention__%s", kiln_isa_name(isa));
            check_attention(name, v->attention, needs);
        }
        if (kiln_vector_built(KILN_VECTOR_RECURRENT, isa)) {
            snprintf(name, sizeof name, "f32_lstm_gates__%s", kiln_isa_name(isa));
            check_lstm_gates(name, v->lstm_gates, needs);
            snprintf(name, sizeof name, "f32_gru_gates__%s", kiln_isa_name(isa));
            check_gru_gates(name, v->gru_gates, v->gru_reset, needs);
        }
    }
    for (size_t i = 0; i < kiln_gemm_config_count(); i++) {
        const kiln_gemm_config *g = kiln_gemm_config_at(i);
        if (g->f32) check_winograd(g->name, g->isa);
    }
#if defined(__aarch64__)
    if (!(kiln_cpu_features() & KILN_CPU_NEON)) printf("error: an arm64 CPU without NEON\n"), failures++;
#endif
    printf("%d cases, %d failures\n", cases, failures);
    return failures ? 1 : 0;
}
