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
static _Atomic uint64_t kiln_pool_generation;
static _Atomic size_t kiln_pool_next, kiln_pool_done;
static kiln_task_fn _Atomic kiln_pool_fn;
static void *_Atomic kiln_pool_ctx;
static _Atomic size_t kiln_pool_count;
static size_t kiln_pool_workers;

static inline void kiln_pause(void) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

static void kiln_pool_drain(void) {
    for (;;) {
        const size_t i = atomic_fetch_add(&kiln_pool_next, 1);
        const size_t n = atomic_load(&kiln_pool_count);
        if (i >= n) return;
        atomic_load(&kiln_pool_fn)(atomic_load(&kiln_pool_ctx), i);
        atomic_fetch_add(&kiln_pool_done, 1);
    }
}

static void *kiln_pool_worker(void *unused) {
    (void)unused;
    uint64_t seen = atomic_load(&kiln_pool_generation);
    for (;;) {
        uint64_t g;
        int spins = 0;
        while ((g = atomic_load(&kiln_pool_generation)) == seen) {
            if (++spins < 1 << 16) {
                kiln_pause();
                continue;
            }
            pthread_mutex_lock(&kiln_pool_wake);
            while ((g = atomic_load(&kiln_pool_generation)) == seen) pthread_cond_wait(&kiln_pool_cond, &kiln_pool_wake);
            pthread_mutex_unlock(&kiln_pool_wake);
            break;
        }
        seen = g;
        kiln_pool_drain();
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
    if (count <= 1 || kiln_pool_workers == 0 || pthread_mutex_trylock(&kiln_pool_job) != 0) {
        for (size_t i = 0; i < count; i++) fn(ctx, i);
        return;
    }
    atomic_store(&kiln_pool_fn, fn);
    atomic_store(&kiln_pool_ctx, ctx);
    atomic_store(&kiln_pool_count, count);
    atomic_store(&kiln_pool_done, 0);
    atomic_store(&kiln_pool_next, 0);
    pthread_mutex_lock(&kiln_pool_wake);
    atomic_fetch_add(&kiln_pool_generation, 1);
    pthread_cond_broadcast(&kiln_pool_cond);
    pthread_mutex_unlock(&kiln_pool_wake);
    kiln_pool_drain();
    while (atomic_load(&kiln_pool_done) < count) kiln_pause();
    // Park the counter past the end so a late worker finds nothing to do.
    atomic_store(&kiln_pool_count, 0);
    pthread_mutex_unlock(&kiln_pool_job);
}
