/* Read bandwidth of this machine, the decode roofline's denominator: T
 * threads each read their slice of a 1 GiB buffer (far beyond the caches),
 * best of 5 passes, in two patterns, and the faster one is the reading:
 *   seq     one sequential stream per thread (what earlier records used);
 *   rows8   eight interleaved streams per thread, one 64-byte line of each
 *           in turn, each prefetched two lines ahead: the shape of a decode
 *           matrix-vector tile. On Zen 5 (stop 36) it read 74-78 GB/s where
 *           seq read 56-58, so seq alone put both engines' BF16 decode above
 *           "100 %" of a roofline that was not the limit.
 * With --file PATH the passes read that file's bytes where the page cache
 * holds them, mapped as the engine maps a model (read-only, private, 2 MiB
 * pages advised): the rate at which a decode can read those very pages.
 * On a VM the two differ: on the Intel Xeon of stop 56 the BF16
 * synthetic-0.6b file's pages read ~10-20 % slower than a fresh buffer, and
 * a copy of the same file (other pages) as fast as the buffer.
 * A measuring tool, not engine code.
 *   cc -O3 -march=native -pthread bench/membw.c -o build/membw
 *   build/membw 2                      (a fresh 1 GiB buffer)
 *   build/membw 2 --file MODEL.gguf    (the file's own pages) */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BYTES (1ull << 30)
#define MAX_THREADS 64
#define PASSES 5
#define STREAMS 8        /* rows of one decode tile */
#define LINE_WORDS 8     /* uint64 words in a 64-byte line */
#define PREFETCH_LINES 2 /* how far ahead rows8 prefetches each stream */

enum pattern { SEQ, ROWS8 };

typedef struct slice {
    const uint64_t *p;
    size_t n; /* words */
    enum pattern pattern;
    uint64_t sum;
} slice;

static uint64_t read_seq(const uint64_t *p, size_t n) {
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    for (size_t i = 0; i + 4 <= n; i += 4) {
        a0 += p[i];
        a1 += p[i + 1];
        a2 += p[i + 2];
        a3 += p[i + 3];
    }
    return a0 ^ a1 ^ a2 ^ a3;
}

static uint64_t read_rows8(const uint64_t *p, size_t n) {
    size_t len = n / STREAMS / LINE_WORDS * LINE_WORDS; /* words per stream */
    size_t ahead = PREFETCH_LINES * LINE_WORDS;
    uint64_t acc[STREAMS] = {0}, sum = 0;
    for (size_t i = 0; i < len; i += LINE_WORDS) {
        for (int k = 0; k < STREAMS; k++) {
            const uint64_t *line = p + k * len + i;
            if (i + ahead < len) __builtin_prefetch(line + ahead, 0, 3);
            acc[k] += line[0] + line[1] + line[2] + line[3] + line[4] + line[5] + line[6] +
                      line[7];
        }
    }
    for (int k = 0; k < STREAMS; k++) sum ^= acc[k];
    return sum;
}

static void *reader(void *arg) {
    slice *s = arg;
    s->sum = s->pattern == SEQ ? read_seq(s->p, s->n) : read_rows8(s->p, s->n);
    return NULL;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Best of PASSES passes of T threads over their slices, in GB/s. */
static double measure(const uint64_t *buf, size_t bytes, int t, enum pattern pattern,
                      uint64_t *check) {
    size_t per = bytes / 8 / (size_t)t / LINE_WORDS * LINE_WORDS;
    double best = 0;
    for (int pass = 0; pass < PASSES; pass++) {
        pthread_t th[MAX_THREADS];
        slice s[MAX_THREADS];
        double t0 = now();
        for (int i = 0; i < t; i++) {
            s[i] = (slice){buf + i * per, per, pattern, 0};
            pthread_create(&th[i], NULL, reader, &s[i]);
        }
        for (int i = 0; i < t; i++) {
            pthread_join(th[i], NULL);
            *check ^= s[i].sum;
        }
        double gbs = (double)per * t * 8 / (now() - t0) / 1e9;
        if (gbs > best) best = gbs;
    }
    return best;
}

/* The file's bytes, mapped as src/core/artifact.c maps a model, and read
 * once so that every page is resident and mapped before the passes. */
static const uint64_t *map_file(const char *path, size_t *bytes, uint64_t *check) {
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size < (off_t)(64 * 1024)) {
        fprintf(stderr, "membw: cannot read %s, or it is under 64 KiB\n", path);
        exit(1);
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        fprintf(stderr, "membw: cannot map %s\n", path);
        exit(1);
    }
#ifdef MADV_HUGEPAGE
    (void)madvise(map, (size_t)st.st_size, MADV_HUGEPAGE);
#endif
    *bytes = (size_t)st.st_size;
    *check ^= read_seq(map, *bytes / 8);
    return map;
}

int main(int argc, char **argv) {
    int t = 2;
    const char *file = NULL;
    for (int i = 1; i < argc; i++) {
        char *end;
        long v;
        if (!strcmp(argv[i], "--file") && i + 1 < argc) {
            file = argv[++i];
        } else if ((v = strtol(argv[i], &end, 10)) >= 1 && v <= MAX_THREADS && *end == 0 &&
                   end != argv[i]) {
            t = (int)v;
        } else {
            fprintf(stderr, "membw: bad argument '%s'\nusage: membw [THREADS 1..%d] [--file PATH]\n",
                    argv[i], MAX_THREADS);
            return 2;
        }
    }
    uint64_t check = 0;
    size_t bytes = BYTES;
    const uint64_t *buf;
    if (file) {
        buf = map_file(file, &bytes, &check);
    } else {
        uint64_t *fresh = malloc(BYTES);
        if (!fresh) return 1;
        memset(fresh, 1, BYTES);
        buf = fresh;
    }
    double seq = measure(buf, bytes, t, SEQ, &check);
    double rows8 = measure(buf, bytes, t, ROWS8, &check);
    printf("{\"threads\":%d,\"read_gb_per_s\":%.2f,\"seq_gb_per_s\":%.2f,"
           "\"rows8_gb_per_s\":%.2f,\"bytes\":%zu,\"check\":%llu}\n",
           t, seq > rows8 ? seq : rows8, seq, rows8, bytes, (unsigned long long)(check & 1));
    if (file)
        munmap((void *)buf, bytes);
    else
        free((void *)buf);
    return 0;
}
