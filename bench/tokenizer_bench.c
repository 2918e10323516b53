/* Kipp's side of the tokenizer benchmark (driven by bench/tokenizer_bench.mjs).
 *
 *   tokenizer_bench MODEL CORPUS REPEATS IDS_OUT CHUNKS
 *
 * Opens MODEL without a backend, encodes the whole CORPUS file REPEATS times
 * (one kipp_tokenize call each, timed), writes the ids of the last run to
 * IDS_OUT (one JSON array) for the cross-check, then encodes the corpus as
 * the consecutive chunks whose byte lengths CHUNKS lists (one per line;
 * request-sized pieces) REPEATS times, then times pathological inputs at
 * three sizes each so growth can be read off. Prints one JSON object. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kipp.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* Fills buf[0..n) with a pathological pattern. */
static void fill(char *buf, size_t n, const char *kind) {
    if (strcmp(kind, "one_letter") == 0) {
        memset(buf, 'a', n);
    } else if (strcmp(kind, "spaces") == 0) {
        memset(buf, ' ', n);
    } else if (strcmp(kind, "no_spaces") == 0) {
        /* letters, digits, punctuation, never a space */
        for (size_t i = 0; i < n; i++) buf[i] = "abcXYZ019.,;-_()"[(i * 7 + i / 13) % 16];
    } else if (strcmp(kind, "one_cjk") == 0) {
        size_t i = 0;
        for (; i + 3 <= n; i += 3) memcpy(buf + i, "\xE5\xAD\x97", 3);
        for (; i < n; i++) buf[i] = 'x';
    } else { /* newlines */
        memset(buf, '\n', n);
    }
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: tokenizer_bench MODEL CORPUS REPEATS IDS_OUT CHUNKS\n");
        return 2;
    }
    kipp_error err = {0};
    kipp_model *m;
    kipp_model_options opt = {.backend = KIPP_BACKEND_NONE};
    double t0 = now();
    if (kipp_model_open(argv[1], &opt, &m, &err)) {
        fprintf(stderr, "tokenizer_bench: %s\n", err.message);
        return 1;
    }
    double load_s = now() - t0;
    size_t len;
    char *corpus = read_all(argv[2], &len);
    if (!corpus) {
        fprintf(stderr, "tokenizer_bench: cannot read %s\n", argv[2]);
        return 1;
    }
    int repeats = atoi(argv[3]);
    printf("{\"load_s\": %.6f, \"corpus_bytes\": %zu, \"runs_s\": [", load_s, len);
    int32_t *ids = NULL;
    size_t n_ids = 0;
    for (int r = 0; r < repeats; r++) {
        free(ids);
        t0 = now();
        if (kipp_tokenize(m, corpus, len, &ids, &n_ids, &err)) {
            fprintf(stderr, "tokenizer_bench: %s\n", err.message);
            return 1;
        }
        printf("%s%.6f", r ? ", " : "", now() - t0);
    }
    printf("], \"tokens\": %zu, ", n_ids);
    /* request-sized chunks */
    size_t n_chunks = 0, cap_chunks = 1024, total = 0;
    size_t *chunk = malloc(cap_chunks * sizeof *chunk);
    FILE *cf = fopen(argv[5], "r");
    unsigned long long cl;
    while (cf && fscanf(cf, "%llu", &cl) == 1) {
        if (n_chunks == cap_chunks) chunk = realloc(chunk, (cap_chunks *= 2) * sizeof *chunk);
        chunk[n_chunks++] = (size_t)cl;
        total += (size_t)cl;
    }
    if (cf) fclose(cf);
    if (total != len) {
        fprintf(stderr, "tokenizer_bench: chunks cover %zu of %zu bytes\n", total, len);
        return 1;
    }
    printf("\"chunks\": %zu, \"chunked_runs_s\": [", n_chunks);
    size_t chunk_tokens = 0;
    for (int r = 0; r < repeats; r++) {
        t0 = now();
        size_t off = 0;
        chunk_tokens = 0;
        for (size_t c = 0; c < n_chunks; c++) {
            int32_t *cids;
            size_t n_cids;
            if (kipp_tokenize(m, corpus + off, chunk[c], &cids, &n_cids, &err)) return 1;
            chunk_tokens += n_cids;
            free(cids);
            off += chunk[c];
        }
        printf("%s%.6f", r ? ", " : "", now() - t0);
    }
    free(chunk);
    printf("], \"chunked_tokens\": %zu, \"pathological\": [", chunk_tokens);
    FILE *f = fopen(argv[4], "wb");
    if (f) {
        fputc('[', f);
        for (size_t i = 0; i < n_ids; i++) fprintf(f, i ? ",%d" : "%d", ids[i]);
        fputs("]\n", f);
        fclose(f);
    }
    free(ids);
    const char *kinds[] = {"one_letter", "no_spaces", "spaces", "one_cjk", "newlines"};
    const size_t sizes[] = {1 << 18, 1 << 19, 1 << 20};
    char *buf = malloc(sizes[2]);
    bool first = true;
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        for (size_t s = 0; s < 3; s++) {
            fill(buf, sizes[s], kinds[k]);
            t0 = now();
            if (kipp_tokenize(m, buf, sizes[s], &ids, &n_ids, &err)) return 1;
            double dt = now() - t0;
            free(ids);
            printf("%s{\"kind\": \"%s\", \"bytes\": %zu, \"tokens\": %zu, \"seconds\": %.6f}",
                   first ? "" : ", ", kinds[k], sizes[s], n_ids, dt);
            first = false;
        }
    }
    printf("]}\n");
    free(buf);
    free(corpus);
    kipp_model_close(m);
    return 0;
}
