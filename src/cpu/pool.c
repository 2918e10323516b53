/* Persistent thread pool with dynamically claimed units (see pool.h).
 *
 * Protocol. The caller stores the job (fn, ctx, n_units), resets `done`,
 * then publishes `claim` = (job number << 32 | 0) with release order and
 * bumps `generation` to wake workers. Any thread claims unit u by a CAS of
 * claim from (job, u) to (job, u + 1); a CAS that succeeds proves the job
 * is still current (the caller cannot start another before every claimed
 * unit is done), so the job fields read after it are the right ones. Each
 * finished unit increments `done`; the caller returns when done == n_units.
 * A worker that finds nothing to claim goes back to waiting. */
#include "cpu/pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"

#define SPIN_LIMIT 4000

typedef struct worker {
    kipp_pool *pool;
    int tid;
    pthread_t thread;
} worker;

/* The shared words sit on three cache lines by who writes them when:
 * `generation`, `stop` and the wake-up (written once a job, read by
 * waiting workers); `claim` with the job it claims from (written once a
 * unit by whichever thread claims it; fn, ctx and n_units are read right
 * after it, so they share its line); `done` (written once a unit when it
 * finishes, read by the spinning caller). On one line, every claim and
 * every finished unit also pulled the line from a core that was only
 * waiting. A claim still moves claim's line between the claiming cores,
 * so the cpu backend gives its regions of many tiny tasks a few tasks a
 * unit (cpu_forward.c task_units; docs/CPU-JOURNAL.md "Stop 51"). */
#define POOL_LINE 64
struct kipp_pool {
    int n;
    worker *workers; /* [n - 1], tid 1..n-1 */
    int started;
    uint32_t job;    /* caller's job counter (caller-only) */
    _Alignas(POOL_LINE) _Atomic uint64_t generation;
    _Atomic int stop;
    pthread_mutex_t mutex; /* the caller's, once a job; a worker's when it sleeps */
    pthread_cond_t wake;
    _Alignas(POOL_LINE) _Atomic uint64_t claim; /* job << 32 | next unit */
    /* The current job: written by the caller before claim is published. */
    _Atomic(kipp_pool_fn) fn;
    _Atomic(void *) ctx;
    _Atomic uint32_t n_units;
    _Alignas(POOL_LINE) _Atomic uint32_t done;
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Claims and runs units of job `job` until none is left (or the job is
 * over). */
static void work(kipp_pool *p, uint32_t job, int tid) {
    for (;;) {
        uint64_t c = atomic_load_explicit(&p->claim, memory_order_acquire);
        if ((uint32_t)(c >> 32) != job) return;
        uint32_t u = (uint32_t)c;
        /* acquire: a worker that sees the next job's n_units also sees the
         * caller's invalidated claim, so its CAS below fails. */
        uint32_t n = atomic_load_explicit(&p->n_units, memory_order_acquire);
        if (u >= n) return; /* n may be stale only if the CAS below would fail */
        if (!atomic_compare_exchange_weak_explicit(&p->claim, &c, c + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        kipp_pool_fn fn = atomic_load_explicit(&p->fn, memory_order_relaxed);
        void *ctx = atomic_load_explicit(&p->ctx, memory_order_relaxed);
        fn(ctx, u, atomic_load_explicit(&p->n_units, memory_order_relaxed), tid);
        atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
    }
}

static void *worker_main(void *arg) {
    worker *w = arg;
    kipp_pool *p = w->pool;
    uint64_t seen = 0;
    for (;;) {
        uint64_t g;
        int spins = 0;
        while ((g = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen &&
               !atomic_load_explicit(&p->stop, memory_order_acquire)) {
            if (++spins < SPIN_LIMIT) {
                cpu_relax();
                continue;
            }
            pthread_mutex_lock(&p->mutex);
            while (atomic_load_explicit(&p->generation, memory_order_acquire) == seen &&
                   !atomic_load_explicit(&p->stop, memory_order_acquire))
                pthread_cond_wait(&p->wake, &p->mutex);
            pthread_mutex_unlock(&p->mutex);
        }
        if (atomic_load_explicit(&p->stop, memory_order_acquire)) return NULL;
        seen = g;
        work(p, (uint32_t)g, w->tid); /* generation == job number */
    }
}

int kipp_pool_create(int n_threads, kipp_pool **out, kipp_error *err) {
    *out = NULL;
    if (n_threads < 1 || n_threads > 1024)
        return kipp_fail(err, KIPP_E_ARGUMENT, "thread count %d out of range 1..1024", n_threads);
    /* aligned as its lines are (sizeof is a multiple of POOL_LINE) */
    kipp_pool *p = aligned_alloc(POOL_LINE, sizeof *p);
    if (!p) return kipp_fail(err, KIPP_E_MEMORY, "out of memory for the thread pool");
    memset(p, 0, sizeof *p);
    p->n = n_threads;
    pthread_mutex_init(&p->mutex, NULL);
    pthread_cond_init(&p->wake, NULL);
    if (n_threads > 1) {
        p->workers = kipp_calloc((size_t)n_threads - 1, sizeof *p->workers, err);
        if (!p->workers) {
            kipp_pool_destroy(p);
            return KIPP_E_MEMORY;
        }
    }
    for (int i = 1; i < n_threads; i++) {
        worker *w = &p->workers[i - 1];
        w->pool = p;
        w->tid = i;
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
            kipp_pool_destroy(p);
            return kipp_fail(err, KIPP_E_BACKEND, "could not start worker thread %d of %d", i,
                             n_threads);
        }
        p->started++;
    }
    *out = p;
    return KIPP_OK;
}

void kipp_pool_destroy(kipp_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mutex);
    atomic_store_explicit(&p->stop, 1, memory_order_release);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mutex);
    for (int i = 0; i < p->started; i++) pthread_join(p->workers[i].thread, NULL);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->mutex);
    free(p->workers);
    free(p);
}

int kipp_pool_threads(const kipp_pool *p) { return p->n; }

void kipp_pool_run(kipp_pool *p, kipp_pool_fn fn, void *ctx, uint32_t n_units) {
    if (n_units == 0) return;
    if (p->n == 1 || n_units == 1) {
        for (uint32_t u = 0; u < n_units; u++) fn(ctx, u, n_units, 0);
        return;
    }
    uint32_t job = ++p->job;
    if (job == 0) job = ++p->job; /* 0 is "never published" */
    /* Retire the previous job's claim word before n_units changes: a late
     * worker holding the old word (old job, unit = old n_units) and then
     * reading the new, larger n_units would otherwise win its CAS, run a
     * phantom unit and add to the new job's `done` -- done could then pass
     * n_units and this caller spin forever (seen as a rare test hang). */
    atomic_store_explicit(&p->claim, UINT64_MAX, memory_order_relaxed);
    atomic_store_explicit(&p->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&p->ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&p->n_units, n_units, memory_order_release);
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    atomic_store_explicit(&p->claim, (uint64_t)job << 32, memory_order_release);
    pthread_mutex_lock(&p->mutex);
    atomic_store_explicit(&p->generation, job, memory_order_release);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mutex);
    work(p, job, 0);
    int spins = 0;
    while (atomic_load_explicit(&p->done, memory_order_acquire) != n_units) {
        if (++spins < SPIN_LIMIT)
            cpu_relax();
        else
            sched_yield();
    }
}

void kipp_pool_split(uint32_t total, uint32_t grain, uint32_t u, uint32_t n, uint32_t *begin,
                     uint32_t *end) {
    uint32_t units = (total + grain - 1) / grain;
    uint32_t per = units / n, extra = units % n;
    uint32_t ub = u * per + (u < extra ? u : extra);
    uint32_t ue = ub + per + (u < extra ? 1 : 0);
    uint64_t b = (uint64_t)ub * grain, e = (uint64_t)ue * grain;
    *begin = b < total ? (uint32_t)b : total;
    *end = e < total ? (uint32_t)e : total;
}

uint32_t kipp_pool_guided_plan(uint32_t total, uint32_t grain, uint32_t min_grains, int threads,
                               uint32_t *bounds) {
    uint64_t grains = ((uint64_t)total + grain - 1) / grain, at = 0;
    uint64_t div = 2 * (uint64_t)(threads > 0 ? threads : 1);
    if (min_grains == 0) min_grains = 1;
    uint32_t n = 0;
    bounds[0] = 0;
    while (at < grains) {
        uint64_t take = (grains - at + div - 1) / div;
        if (take < min_grains) take = min_grains;
        if (take > grains - at) take = grains - at;
        at += take;
        uint64_t e = at * grain;
        bounds[++n] = e < total ? (uint32_t)e : total;
    }
    return n;
}
