/* Read bandwidth of this machine, the decode roofline's denominator: T
 * threads each sum their slice of a 1 GiB buffer (far beyond the caches),
 * best of 5 passes. A measuring tool, not engine code.
 *   cc -O2 -pthread bench/membw.c -o build/membw && build/membw 2 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BYTES (1ull << 30)

typedef struct slice {
    const uint64_t *p;
    size_t n;
    uint64_t sum;
} slice;

static void *reader(void *arg) {
    slice *s = arg;
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    for (size_t i = 0; i + 4 <= s->n; i += 4) {
        a0 += s->p[i];
        a1 += s->p[i + 1];
        a2 += s->p[i + 2];
        a3 += s->p[i + 3];
    }
    s->sum = a0 ^ a1 ^ a2 ^ a3;
    return NULL;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    int t = argc > 1 ? atoi(argv[1]) : 2;
    if (t < 1 || t > 64) t = 2;
    uint64_t *buf = malloc(BYTES);
    if (!buf) return 1;
    memset(buf, 1, BYTES);
    size_t words = BYTES / 8, per = words / t;
    double best = 0;
    uint64_t check = 0;
    for (int pass = 0; pass < 5; pass++) {
        pthread_t th[64];
        slice s[64];
        double t0 = now();
        for (int i = 0; i < t; i++) {
            s[i] = (slice){buf + i * per, per, 0};
            pthread_create(&th[i], NULL, reader, &s[i]);
        }
        for (int i = 0; i < t; i++) {
            pthread_join(th[i], NULL);
            check ^= s[i].sum;
        }
        double gbs = (double)per * t * 8 / (now() - t0) / 1e9;
        if (gbs > best) best = gbs;
    }
    printf("{\"threads\":%d,\"read_gb_per_s\":%.2f,\"check\":%llu}\n", t, best,
           (unsigned long long)(check & 1));
    free(buf);
    return 0;
}
