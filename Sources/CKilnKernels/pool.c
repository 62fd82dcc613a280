// A small persistent thread pool for the executor's parallel loops: workers spin briefly
// for the next job (a job every few microseconds is common during inference), then sleep.
// One job runs at a time; a caller that finds the pool busy runs its loop itself.
#include "kiln_kernels.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

static pthread_mutex_t kiln_pool_job = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t kiln_pool_wake = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t kiln_pool_cond = PTHREAD_COND_INITIALIZER;
static pthread_once_t kiln_pool_once = PTHREAD_ONCE_INIT;
// The job in one word: its generation (high 24 bits), its index count (20 bits) and its next
// unclaimed index (low 20 bits). A thread claims index i of job g only by a compare-and-swap from
// (g, n, i) to (g, n, i + 1) with i < n, so a thread still draining an earlier job can never take
// an index of the next one, and the job's function and context cannot change under a claimed
// index (the caller waits for every claimed index before it publishes another job).
#define KILN_POOL_INDEX_BITS 20
#define KILN_POOL_MAX_COUNT (((uint64_t)1 << KILN_POOL_INDEX_BITS) - 1)
static _Atomic uint64_t kiln_pool_ticket;
static _Atomic size_t kiln_pool_done;
static kiln_task_fn _Atomic kiln_pool_fn;
static void *_Atomic kiln_pool_ctx;
static size_t kiln_pool_workers;

static inline void kiln_pause(void) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

static inline uint32_t kiln_pool_generation(void) {
    return (uint32_t)(atomic_load(&kiln_pool_ticket) >> (2 * KILN_POOL_INDEX_BITS));
}

static void kiln_pool_drain(uint32_t generation) {
    uint64_t t = atomic_load(&kiln_pool_ticket);
    for (;;) {
        if ((uint32_t)(t >> (2 * KILN_POOL_INDEX_BITS)) != generation) return;
        const size_t i = (size_t)(t & KILN_POOL_MAX_COUNT), n = (size_t)((t >> KILN_POOL_INDEX_BITS) & KILN_POOL_MAX_COUNT);
        if (i >= n) return;
        if (!atomic_compare_exchange_weak(&kiln_pool_ticket, &t, t + 1)) continue;
        atomic_load(&kiln_pool_fn)(atomic_load(&kiln_pool_ctx), i);
        atomic_fetch_add(&kiln_pool_done, 1);
        t = atomic_load(&kiln_pool_ticket);
    }
}

static void *kiln_pool_worker(void *unused) {
    (void)unused;
    uint32_t seen = kiln_pool_generation();
    for (;;) {
        uint32_t g;
        int spins = 0;
        while ((g = kiln_pool_generation()) == seen) {
            if (++spins < 1 << 16) {
                kiln_pause();
                continue;
            }
            pthread_mutex_lock(&kiln_pool_wake);
            while ((g = kiln_pool_generation()) == seen) pthread_cond_wait(&kiln_pool_cond, &kiln_pool_wake);
            pthread_mutex_unlock(&kiln_pool_wake);
            break;
        }
        seen = g;
        kiln_pool_drain(g);
    }
    return NULL;
}

static void kiln_pool_start(void) {
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    const size_t wanted = cores > 1 ? (size_t)cores - 1 : 0;
    for (size_t i = 0; i < wanted; i++) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &attr, kiln_pool_worker, NULL) == 0) kiln_pool_workers++;
        pthread_attr_destroy(&attr);
    }
}

void kiln_parallel_for(size_t count, kiln_task_fn fn, void *ctx) {
    pthread_once(&kiln_pool_once, kiln_pool_start);
    if (count <= 1 || count > KILN_POOL_MAX_COUNT || kiln_pool_workers == 0 || pthread_mutex_trylock(&kiln_pool_job) != 0) {
        for (size_t i = 0; i < count; i++) fn(ctx, i);
        return;
    }
    // Only the holder of kiln_pool_job publishes jobs, so the generation moves only here.
    const uint32_t generation = (kiln_pool_generation() + 1) & 0xFFFFFF;
    atomic_store(&kiln_pool_fn, fn);
    atomic_store(&kiln_pool_ctx, ctx);
    atomic_store(&kiln_pool_done, 0);
    pthread_mutex_lock(&kiln_pool_wake);
    atomic_store(&kiln_pool_ticket, (uint64_t)generation << (2 * KILN_POOL_INDEX_BITS) | (uint64_t)count << KILN_POOL_INDEX_BITS);
    pthread_cond_broadcast(&kiln_pool_cond);
    pthread_mutex_unlock(&kiln_pool_wake);
    kiln_pool_drain(generation);
    while (atomic_load(&kiln_pool_done) < count) kiln_pause();
    pthread_mutex_unlock(&kiln_pool_job);
}
