/* A persistent thread pool: n - 1 worker threads created once, at model
 * creation; the calling thread takes part too. kipp_pool_run(fn, n_units)
 * runs fn(ctx, unit, n_units, tid) once for every unit in [0, n_units) and
 * returns when all are done -- one fork/join per parallel region, no thread
 * creation per token.
 *
 * Units are claimed dynamically (an atomic counter), so a thread the OS has
 * descheduled -- more threads than free cores, other processes -- delays
 * nothing it has not started: the others take its units. What a unit
 * computes depends only on its index, never on which thread runs it, so
 * results are the same for any thread count (the cpu backend's units are
 * output-column ranges or (row, head) tasks, never parts of a reduction).
 *
 * Workers spin briefly between regions (decode issues a few hundred per
 * token), then sleep on a condition variable. tid (0 = the caller) is only
 * for per-thread scratch. */
#ifndef KIPP_CPU_POOL_H
#define KIPP_CPU_POOL_H

#include <stdint.h>

#include "kipp.h"

typedef struct kipp_pool kipp_pool;
typedef void (*kipp_pool_fn)(void *ctx, uint32_t unit, uint32_t n_units, int tid);

int kipp_pool_create(int n_threads, kipp_pool **out, kipp_error *err);
void kipp_pool_destroy(kipp_pool *pool);
int kipp_pool_threads(const kipp_pool *pool);
/* Not reentrant: one region at a time per pool. */
void kipp_pool_run(kipp_pool *pool, kipp_pool_fn fn, void *ctx, uint32_t n_units);

/* [begin, end) of `total` items for unit u of n, in multiples of `grain`
 * (units spread evenly; the end is clamped to total). */
void kipp_pool_split(uint32_t total, uint32_t grain, uint32_t u, uint32_t n, uint32_t *begin,
                     uint32_t *end);

/* Guided units for a region whose work is proportional to its items
 * (output columns): each unit takes 1 / (2 threads) of what the units
 * before it left, rounded up to whole grains and at least min_grains, so
 * the first units are long (weight streams stay unbroken) and the last
 * ones short (a thread that finishes early waits at most a short unit for
 * the other). Writes the boundaries to bounds (unit u is [bounds[u],
 * bounds[u + 1]); room for KIPP_POOL_GUIDED_MAX(total, grain) entries) and
 * returns the number of units. Deterministic in (total, grain, min_grains,
 * threads) alone, so a caller plans once, at load time. */
#define KIPP_POOL_GUIDED_MAX(total, grain) (((total) + (grain) - 1) / (grain) + 1)
uint32_t kipp_pool_guided_plan(uint32_t total, uint32_t grain, uint32_t min_grains, int threads,
                               uint32_t *bounds);

#endif
