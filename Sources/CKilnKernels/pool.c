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
// A job's indices are split into one contiguous home range per participant (the caller is 0, the
// workers 1…): each takes its own range from the front, in order, then steals from the back of
// the others'. Consecutive steps split their work alike (pixel rows, panels), so a thread mostly
// reads what it wrote in the previous step, from its own L2, while a thread that loses its core
// for a while still leaves its remaining indices to the others.
//
// A range in one word: the job's generation (high 24 bits), its next unclaimed index (front, 20
// bits) and its end (back, 20 bits). An index is claimed only by a compare-and-swap of the word
// that still holds the claimer's generation, so a thread still draining an earlier job can never
// take an index of the next one, and the job's function and context cannot change under a
// claimed index (the caller waits for every claimed index before it publishes another job).
#define KILN_POOL_INDEX_BITS 20
#define KILN_POOL_MAX_COUNT (((uint64_t)1 << KILN_POOL_INDEX_BITS) - 1)
#define KILN_POOL_MAX_THREADS 64
static _Atomic uint32_t kiln_pool_generation_now;
static _Atomic uint64_t kiln_pool_range[KILN_POOL_MAX_THREADS];
static _Atomic size_t kiln_pool_done;
// Participants of the current job (the caller and workers 1 … limit - 1); the other workers sit it out.
static _Atomic size_t kiln_pool_limit;
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

static inline uint32_t kiln_pool_generation(void) { return atomic_load(&kiln_pool_generation_now); }

static inline uint64_t kiln_pool_word(uint32_t generation, size_t front, size_t back) {
    return (uint64_t)generation << (2 * KILN_POOL_INDEX_BITS) | (uint64_t)front << KILN_POOL_INDEX_BITS | (uint64_t)back;
}

// Claims the next index of range r for `generation` (from the front, or with `steal` from the
// back); returns its index, or -1 when the range is empty or belongs to another job.
static inline long kiln_pool_claim(size_t r, uint32_t generation, int steal) {
    uint64_t t = atomic_load(&kiln_pool_range[r]);
    for (;;) {
        if ((uint32_t)(t >> (2 * KILN_POOL_INDEX_BITS)) != generation) return -1;
        const size_t front = (size_t)((t >> KILN_POOL_INDEX_BITS) & KILN_POOL_MAX_COUNT), back = (size_t)(t & KILN_POOL_MAX_COUNT);
        if (front >= back) return -1;
        const uint64_t next = steal ? kiln_pool_word(generation, front, back - 1) : kiln_pool_word(generation, front + 1, back);
        if (atomic_compare_exchange_weak(&kiln_pool_range[r], &t, next)) return (long)(steal ? back - 1 : front);
    }
}

static void kiln_pool_drain(uint32_t generation, size_t self, size_t participants) {
    long i;
    while ((i = kiln_pool_claim(self, generation, 0)) >= 0) {
        atomic_load(&kiln_pool_fn)(atomic_load(&kiln_pool_ctx), (size_t)i);
        atomic_fetch_add(&kiln_pool_done, 1);
    }
    for (size_t step = 1; step < participants; step++) {
        const size_t r = (self + step) % participants;
        while ((i = kiln_pool_claim(r, generation, 1)) >= 0) {
            atomic_load(&kiln_pool_fn)(atomic_load(&kiln_pool_ctx), (size_t)i);
            atomic_fetch_add(&kiln_pool_done, 1);
        }
    }
}

static void *kiln_pool_worker(void *arg) {
    const size_t self = (size_t)(uintptr_t)arg;
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
        // The limit was stored before the generation was published, so it is this job's (or a
        // later one's, whose ranges this generation cannot claim).
        const size_t limit = atomic_load(&kiln_pool_limit);
        if (self < limit) kiln_pool_drain(g, self, limit);
    }
    return NULL;
}

static void kiln_pool_start(void) {
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    size_t wanted = cores > 1 ? (size_t)cores - 1 : 0;
    if (wanted > KILN_POOL_MAX_THREADS - 1) wanted = KILN_POOL_MAX_THREADS - 1;
    for (size_t i = 0; i < wanted; i++) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &attr, kiln_pool_worker, (void *)(uintptr_t)(kiln_pool_workers + 1)) == 0) kiln_pool_workers++;
        pthread_attr_destroy(&attr);
    }
}

void kiln_parallel_for(size_t count, kiln_task_fn fn, void *ctx) { kiln_parallel_for_threads(count, SIZE_MAX, fn, ctx); }

void kiln_parallel_for_threads(size_t count, size_t threads, kiln_task_fn fn, void *ctx) {
    pthread_once(&kiln_pool_once, kiln_pool_start);
    if (count <= 1 || threads <= 1 || count > KILN_POOL_MAX_COUNT || kiln_pool_workers == 0 || pthread_mutex_trylock(&kiln_pool_job) != 0) {
        for (size_t i = 0; i < count; i++) fn(ctx, i);
        return;
    }
    // Only the holder of kiln_pool_job publishes jobs, so the generation moves only here.
    const uint32_t generation = (kiln_pool_generation() + 1) & 0xFFFFFF;
    const size_t participants = threads < kiln_pool_workers + 1 ? threads : kiln_pool_workers + 1;
    atomic_store(&kiln_pool_fn, fn);
    atomic_store(&kiln_pool_ctx, ctx);
    atomic_store(&kiln_pool_done, 0);
    // With more participants than indices, the first `count` own one each and the rest only steal.
    const size_t owners = count < participants ? count : participants;
    for (size_t r = 0; r < participants; r++) {
        const size_t front = r < owners ? count * r / owners : 0, back = r < owners ? count * (r + 1) / owners : 0;
        atomic_store(&kiln_pool_range[r], kiln_pool_word(generation, front, back));
    }
    atomic_store(&kiln_pool_limit, participants);
    pthread_mutex_lock(&kiln_pool_wake);
    atomic_store(&kiln_pool_generation_now, generation);
    pthread_cond_broadcast(&kiln_pool_cond);
    pthread_mutex_unlock(&kiln_pool_wake);
    kiln_pool_drain(generation, 0, participants);
    while (atomic_load(&kiln_pool_done) < count) kiln_pause();
    pthread_mutex_unlock(&kiln_pool_job);
}
