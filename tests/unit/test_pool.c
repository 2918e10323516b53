/* Thread-pool stress: many short regions of varying size, every unit must
 * run exactly once per region. This reproduced a real race (a late worker
 * winning a stale claim after the next region's unit count was published,
 * running a phantom unit and hanging the caller); tests/run.sh's timeout
 * turns a hang into a failure. */
#include <stdatomic.h>

#include "cpu/pool.h"
#include "test_util.h"

static _Atomic uint32_t hits[16];

static void count_unit(void *ctx, uint32_t unit, uint32_t n_units, int tid) {
    (void)ctx;
    (void)n_units;
    (void)tid;
    atomic_fetch_add(&hits[unit], 1);
}

static void stress(int threads, long regions) {
    kipp_pool *p = NULL;
    kipp_error err = {0};
    CHECK(kipp_pool_create(threads, &p, &err) == KIPP_OK);
    if (!p) return;
    long bad = 0;
    for (long r = 0; r < regions && bad < 5; r++) {
        uint32_t n = 1 + (uint32_t)(r % 9); /* sizes 1..9 cycle, up and down */
        for (uint32_t u = 0; u < n; u++) atomic_store(&hits[u], 0);
        kipp_pool_run(p, count_unit, NULL, n);
        for (uint32_t u = 0; u < n; u++) {
            uint32_t h = atomic_load(&hits[u]);
            if (h != 1) {
                bad++;
                CHECKF(h == 1, "threads %d region %ld unit %u ran %u times", threads, r, u, h);
            }
        }
    }
    kipp_pool_destroy(p);
}

int main(void) {
    stress(2, 300000);
    stress(3, 100000);
    stress(4, 50000);
    return test_finish("test_pool");
}
