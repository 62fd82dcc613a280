// The machine's ceilings, for reading kernel numbers as fractions of them: float32 FMA peak
// (AVX-512 and AVX2+FMA where the CPU has them, one and all threads) and read bandwidth of a
// buffer far larger than the last-level cache. Prints JSON. Built and run by bench/runtime/run.py;
// x86-64 only; not part of the library.
//
//     clang -O2 -pthread bench/probe/peak.c -o peak && ./peak [threads]
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

// Twelve independent accumulator chains hide the FMA latency (4 cycles) on two ports.
#define CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

__attribute__((target("avx512f"))) static double fma512(long iterations) {
#define DECL(i) __m512 a##i = _mm512_set1_ps(1.0f + (float)i * 1e-7f);
    CHAINS(DECL)
#undef DECL
    const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    for (long n = 0; n < iterations; n++) {
#define STEP(i) a##i = _mm512_fmadd_ps(a##i, m, c);
        CHAINS(STEP)
#undef STEP
        __asm__ volatile("" ::: "memory");
    }
    __m512 s = _mm512_setzero_ps();
#define SUM(i) s = _mm512_add_ps(s, a##i);
    CHAINS(SUM)
#undef SUM
    return (double)_mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"))) static double fma256(long iterations) {
#define DECL(i) __m256 a##i = _mm256_set1_ps(1.0f + (float)i * 1e-7f);
    CHAINS(DECL)
#undef DECL
    const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    for (long n = 0; n < iterations; n++) {
#define STEP(i) a##i = _mm256_fmadd_ps(a##i, m, c);
        CHAINS(STEP)
#undef STEP
        __asm__ volatile("" ::: "memory");
    }
    __m256 s = _mm256_setzero_ps();
#define SUM(i) s = _mm256_add_ps(s, a##i);
    CHAINS(SUM)
#undef SUM
    float lanes[8];
    _mm256_storeu_ps(lanes, s);
    return (double)(lanes[0] + lanes[7]);
}

typedef struct {
    int kind; // 512, 256, or 0 for the read-bandwidth pass
    long iterations;
    const float *buffer;
    size_t floats;
    double seconds, sink;
    pthread_barrier_t *barrier;
} job;

__attribute__((target("avx2"))) static double read_sum(const float *p, size_t n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (size_t i = 0; i + 32 <= n; i += 32) {
        s0 = _mm256_add_ps(s0, _mm256_load_ps(p + i));
        s1 = _mm256_add_ps(s1, _mm256_load_ps(p + i + 8));
        s2 = _mm256_add_ps(s2, _mm256_load_ps(p + i + 16));
        s3 = _mm256_add_ps(s3, _mm256_load_ps(p + i + 24));
    }
    float lanes[8];
    _mm256_storeu_ps(lanes, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    return (double)lanes[0];
}

static void *worker(void *arg) {
    job *j = arg;
    pthread_barrier_wait(j->barrier);
    const double t = now();
    if (j->kind == 512) j->sink = fma512(j->iterations);
    else if (j->kind == 256) j->sink = fma256(j->iterations);
    else for (long r = 0; r < j->iterations; r++) j->sink += read_sum(j->buffer, j->floats);
    j->seconds = now() - t;
    return NULL;
}

// Best of five runs on `threads` threads; returns operations (FLOPs or bytes) per second.
static double measure(int kind, int threads, long iterations, const float *buffer, size_t floats) {
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        pthread_t tid[64];
        job jobs[64];
        pthread_barrier_t barrier;
        pthread_barrier_init(&barrier, NULL, (unsigned)threads);
        const size_t share = floats / (size_t)threads / 32 * 32;
        for (int i = 0; i < threads; i++) {
            jobs[i] = (job){kind, iterations, buffer ? buffer + (size_t)i * share : NULL, share, 0, 0, &barrier};
            pthread_create(&tid[i], NULL, worker, &jobs[i]);
        }
        double slowest = 0;
        for (int i = 0; i < threads; i++) {
            pthread_join(tid[i], NULL);
            if (jobs[i].seconds > slowest) slowest = jobs[i].seconds;
        }
        pthread_barrier_destroy(&barrier);
        const double work = kind ? (double)threads * (double)iterations * 12.0 * (kind / 32) * 2.0
                                 : (double)threads * (double)iterations * (double)share * 4.0;
        if (work / slowest > best) best = work / slowest;
    }
    return best;
}

int main(int argc, char **argv) {
    const int threads = argc > 1 ? atoi(argv[1]) : 2;
    if (threads < 1 || threads > 64) {
        fprintf(stderr, "peak: threads must be 1...64\n");
        return 1;
    }
    __builtin_cpu_init();
    const int has512 = __builtin_cpu_supports("avx512f"), has256 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    const long iterations = 20000000;
    printf("{\"threads\": %d", threads);
    if (has512)
        printf(", \"fma_avx512_gflops_1t\": %.1f, \"fma_avx512_gflops\": %.1f", measure(512, 1, iterations, NULL, 0) / 1e9,
               measure(512, threads, iterations, NULL, 0) / 1e9);
    if (has256)
        printf(", \"fma_avx2_gflops_1t\": %.1f, \"fma_avx2_gflops\": %.1f", measure(256, 1, iterations, NULL, 0) / 1e9,
               measure(256, threads, iterations, NULL, 0) / 1e9);
    if (has256) {
        const size_t floats = (size_t)256 << 20 >> 2; // 256 MiB
        float *buffer = aligned_alloc(64, floats * sizeof(float));
        if (!buffer) return 1;
        for (size_t i = 0; i < floats; i++) buffer[i] = (float)(i & 1023);
        printf(", \"read_gbs_1t\": %.1f, \"read_gbs\": %.1f", measure(0, 1, 4, buffer, floats) / 1e9,
               measure(0, threads, 4, buffer, floats) / 1e9);
        free(buffer);
    }
    printf("}\n");
    return 0;
}
