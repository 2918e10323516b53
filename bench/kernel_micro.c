/* Kernel microbenchmarks: one tier's kernel alone, one thread, best of 7
 * timed passes, one JSON object on stdout. A measuring tool, not engine
 * code; it reads the tier tables through the library's internal header.
 *
 *   make build/kernel_micro     (part of make all), or by hand:
 *   cc -O2 -std=c11 -D_DEFAULT_SOURCE -Isrc -Iinclude bench/kernel_micro.c \
 *      build/libkipp.a -lm -pthread -o build/kernel_micro
 *
 *   build/kernel_micro att TIER bf16|q8_0 CTX KV_HEADS [N_Q]
 *       decode attention (one query row, 2 query heads per KV head, as
 *       Qwen3-0.6B) at position CTX - 1, over KV_HEADS separate stores of
 *       CTX positions each (28 x 4,096 BF16 positions = 56 MiB: out of
 *       cache; 1 head: the cache-resident compute rate); with N_Q, a
 *       prefill chunk's N_Q query rows at positions CTX - N_Q .. CTX - 1
 *       (reported as GFLOPS too: 4 flops per head dimension, position
 *       and query head)
 *   build/kernel_micro matvec TIER bf16|q8_0|q4_0|q4_1 ROWS
 *       a decode matrix-vector product, K = 1,024, ROWS weight rows
 *       (256 rows of Q4_0 = 144 KiB: in L2, the decoder's compute rate)
 *   (TIER avx2i8-plain: the avx2i8 tier's vpmaddubsw table, which dispatch
 *   does not hand out on a processor with AVX512_VNNI; avx512-plain: the
 *   avx512 tier's table without the AVX512_VBMI Q8_0 decoder)
 *   build/kernel_micro matmul TIER bf16|q8_0|q4_0|q4_1 ROWS M [K]
 *       the same weights against M activation rows (K = 1,024 unless
 *       given, a multiple of 32): the matrix-matrix paths (a few rows,
 *       blocked), reported as GFLOPS too (64 BF16 rows: one L2 block, the
 *       tiles' compute rate; 16,384 rows: 32 MiB streamed from memory)
 *
 *   build/kernel_micro sample peaked|flat T TOP_P [TOP_K]
 *       one kipp_sampler_sample call over the 151,936 logits (the
 *       library's sampler, the same on every tier): temperature T > 0,
 *       top-p TOP_P, top-k TOP_K (0, the default: off); peaked logits are
 *       a bell of width ~3.5 with 50 tokens 8-14 above it, flat ones
 *       uniform over [-20, 20). The record's pick_sum adds the picks of
 *       the timed calls (the same for two builds whose sampling agrees).
 *
 * TIER is a kernel tier name (avx512, avx2, ...; the record names it as
 * given); the table is the tier's
 * PF_ROWS one unless KIPP_CPU_DECODE_PREFETCH=seq. KERNEL_MICRO_QUICK=1
 * times one call once (tests/scripts/test_kernel_micro.sh: the tool runs
 * and its record is well formed, on every tier, in a second).
 * KERNEL_MICRO_SCALE_CODES=N (1 to 16,384; default 1) draws each
 * quantized block's FP16 scale from N consecutive codes from 2^-7 up
 * instead of one (the record's scale_codes): the decoders look scales up
 * in 256-512 KiB tables (kernels.h), and a real matrix's or KV cache's
 * scales spread over many codes (a synthetic-0.6b matrix's over ~200), so
 * the table lines a block touches can miss L1 (stop 66: 4,096 or more
 * codes). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/common.h"
#include "cpu/kernels.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* "model name (family F model M)" from /proc/cpuinfo: the name alone is
 * "AMD EPYC" on Zen 4 and Zen 5 alike. */
static void cpu_name(char *out, size_t size) {
    char name[96] = "unknown", family[16] = "?", model[16] = "?", line[256];
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f)) {
        char *c = strchr(line, ':');
        if (!c) continue;
        c += c[1] == ' ' ? 2 : 1;
        c[strcspn(c, "\n\"\\")] = 0;
        if (!strncmp(line, "model name", 10)) snprintf(name, sizeof name, "%s", c);
        else if (!strncmp(line, "cpu family", 10)) snprintf(family, sizeof family, "%s", c);
        else if (!strncmp(line, "model\t", 6)) snprintf(model, sizeof model, "%s", c);
        if (!strncmp(line, "processor", 9) && strcmp(name, "unknown")) break; /* the first CPU's */
    }
    if (f) fclose(f);
    snprintf(out, size, "%s (family %s model %s)", name, family, model);
}

static int scale_codes = 1; /* KERNEL_MICRO_SCALE_CODES */

/* Fills n bytes with values that are finite under every scheme: small
 * BF16 numbers, or blocks whose FP16 scales are 2^-7 (or one of the
 * scale_codes codes from it: at most 0x5fff, below 2^9). On 2 MiB pages
 * where n is 1 MiB or more (the engine's own kipp_calloc_huge), as the engine
 * maps a model's weights: on 4 KiB pages a matrix-vector stream out of
 * cache read ~7 % slower (Zen 4, BF16: 22.4 against 24.0 GB/s), a cost
 * the engine does not pay. */
static void *weights(size_t n, size_t block, int bf16) {
    uint8_t *p = kipp_calloc_huge(1, (n + 63) / 64 * 64, NULL);
    if (!p) exit(1);
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)rand();
    if (bf16)
        for (size_t i = 0; i < n / 2; i++) ((uint16_t *)p)[i] = (uint16_t)(0x3c00 + (rand() & 0x7f));
    else /* the scale leads each block; Q4_1's minimum follows it */
        for (size_t b = 0; b < n / block; b++) {
            uint16_t *h = (uint16_t *)(p + b * block);
            /* no rand() call at one code: the default data stay as they were */
            int code = scale_codes > 1 ? rand() % scale_codes : 0;
            h[0] = (uint16_t)(0x2000 + code);
            if (block == sizeof(kipp_block_q4_1)) h[1] = 0xa000;
        }
    return p;
}

static int usage(void) {
    fprintf(stderr, "usage: kernel_micro att TIER bf16|q8_0 CTX KV_HEADS [N_Q]\n"
                    "       kernel_micro matvec TIER bf16|q8_0|q4_0|q4_1 ROWS\n"
                    "       kernel_micro matmul TIER bf16|q8_0|q4_0|q4_1 ROWS M [K]\n"
                    "       kernel_micro sample peaked|flat T TOP_P [TOP_K]\n");
    return 2;
}

/* The sample mode (see the top): best of 30 calls (1 when quick). */
static int sample_micro(int argc, char **argv, const char *cpu, int quick) {
    if (argc < 5 || argc > 6) return usage();
    const char *shape = argv[2];
    char *end;
    kipp_sampling sp = kipp_sampling_default();
    sp.temperature = strtof(argv[3], &end);
    if (*end || end == argv[3] || !(sp.temperature > 0.0f)) return usage();
    sp.top_p = strtof(argv[4], &end);
    if (*end || end == argv[4]) return usage();
    long top_k = argc == 6 ? strtol(argv[5], &end, 10) : 0;
    if ((argc == 6 && (*end || end == argv[5])) || top_k < 0 || top_k > KIPP_VOCAB_SIZE)
        return usage();
    sp.top_k = (int32_t)top_k;
    sp.seed = 1;
    int peaked = !strcmp(shape, "peaked");
    if (!peaked && strcmp(shape, "flat")) return usage();
    kipp_sampler *smp;
    kipp_error err = {0};
    if (kipp_sampler_create(&sp, &smp, &err)) {
        fprintf(stderr, "kernel_micro: %s\n", err.message);
        return 2;
    }
    float *base = malloc(KIPP_VOCAB_SIZE * sizeof *base), *work = malloc(KIPP_VOCAB_SIZE * sizeof *work);
    if (!base || !work) {
        fprintf(stderr, "kernel_micro: out of memory\n");
        return 1;
    }
    /* splitmix64: an LCG's draws a few steps apart are correlated, and the
     * ordered runs they leave let the branch predictor through a
     * selection's comparisons (quickselect read 4x faster on such logits) */
    uint64_t r = 1;
    for (int i = 0; i < KIPP_VOCAB_SIZE; i++) {
        float u[4];
        for (int j = 0; j < 4; j++) {
            uint64_t z = (r += 0x9E3779B97F4A7C15ull);
            z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
            z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
            u[j] = (float)((z ^ (z >> 31)) >> 40) / (float)(1u << 24);
        }
        base[i] = peaked ? (u[0] + u[1] + u[2] + u[3] - 2.0f) * 3.5f : u[0] * 40.0f - 20.0f;
    }
    for (int h = 0; peaked && h < 50; h++) base[(h * 7919) % KIPP_VOCAB_SIZE] = 8.0f + 0.12f * (float)h;
    double best = 1e30;
    long pick_sum = 0;
    for (int t = 0; t < (quick ? 1 : 30); t++) {
        memcpy(work, base, KIPP_VOCAB_SIZE * sizeof *work);
        double t0 = now();
        pick_sum += kipp_sampler_sample(smp, work);
        double dt = now() - t0;
        if (dt < best) best = dt;
    }
    printf("{\"cpu\":\"%s\",\"kernel\":\"sample\",\"logits\":\"%s\",\"temperature\":%g,"
           "\"top_p\":%g,\"top_k\":%ld,\"ms_per_sample\":%.4f,\"pick_sum\":%ld}\n",
           cpu, shape, (double)sp.temperature, (double)sp.top_p, top_k, best * 1e3, pick_sum);
    kipp_sampler_destroy(smp);
    free(base);
    free(work);
    return 0;
}

int main(int argc, char **argv) {
    char cpu[160]; /* cpu_name writes at most 143 bytes */
    cpu_name(cpu, sizeof cpu);
    const char *quick_env = getenv("KERNEL_MICRO_QUICK");
    const int quick = quick_env && !strcmp(quick_env, "1"), passes = quick ? 1 : 7;
    if (argc >= 2 && !strcmp(argv[1], "sample")) return sample_micro(argc, argv, cpu, quick);
    if (argc < 5 || argc > 7) return usage();
    const char *mode = argv[1], *tier = argv[2], *scheme = argv[3];
    long a4 = atol(argv[4]), a5 = argc >= 6 ? atol(argv[5]) : -1;
    long a6 = argc == 7 ? atol(argv[6]) : 1024; /* matmul's K */
    int want = !strcmp(mode, "att") ? 6 : !strcmp(mode, "matvec") ? 5 : 0;
    if (!strcmp(mode, "matmul") || !strcmp(mode, "att") ? argc < 6 : argc != want) return usage();
    /* avx2i8-plain: that tier's vpmaddubsw table where dispatch would hand
     * out its vpdpbusd one (the plain table runs on any AVX2 processor);
     * avx512-plain: the avx512 table without AVX512_VBMI's Q8_0 decoder */
    const kipp_cpu_kernels *kt =
        !strcmp(tier, "avx2i8-plain")
            ? (kipp_cpu_kernels_by_name("avx2i8") ? &kipp_cpu_kernels_avx2i8 : NULL)
        : !strcmp(tier, "avx512-plain")
            ? (kipp_cpu_kernels_by_name("avx512") ? &kipp_cpu_kernels_avx512 : NULL)
            : kipp_cpu_kernels_by_name(tier);
    if (!kt) {
        fprintf(stderr, "kernel_micro: tier %s: unknown or not on this processor\n", tier);
        return 2;
    }
    const char *codes = getenv("KERNEL_MICRO_SCALE_CODES");
    if (codes) {
        char *end;
        long c = strtol(codes, &end, 10);
        if (end == codes || *end || c < 1 || c > 16384) {
            fprintf(stderr, "kernel_micro: KERNEL_MICRO_SCALE_CODES=%s: want 1 to 16384\n", codes);
            return 2;
        }
        scale_codes = (int)c;
    }
    const char *pf = getenv("KIPP_CPU_DECODE_PREFETCH");
    if (pf && !strcmp(pf, "seq") && kt->seq_twin) kt = kt->seq_twin;
    srand(1);
    double best = 1e30;
    if (!strcmp(mode, "att")) {
        int q8 = !strcmp(scheme, "q8_0");
        long nq_arg = argc == 7 ? a6 : 1; /* query rows */
        if ((!q8 && strcmp(scheme, "bf16")) || a4 < 1 || a4 > (1 << 20) || a5 < 1 || a5 > 64 ||
            nq_arg < 1 || nq_arg > 4096 || nq_arg > a4)
            return usage();
        enum { G = 2, B = KIPP_CPU_ATT_BLOCK };
        uint32_t ctx = (uint32_t)a4, heads = (uint32_t)a5, nb = (ctx + B - 1) / B;
        uint32_t n_q = (uint32_t)nq_arg, pos0 = ctx - n_q;
        const size_t q_stride = (size_t)G * KIPP_HEAD_DIM; /* floats per query row */
        size_t row = q8 ? 4 * sizeof(kipp_block_q8_0) : KIPP_HEAD_DIM * sizeof(uint16_t);
        size_t store = (size_t)nb * B * row;
        uint8_t **k = malloc(heads * sizeof *k), **v = malloc(heads * sizeof *v);
        const void **kb = malloc(nb * sizeof *kb), **vb = malloc(nb * sizeof *vb);
        float *scratch = aligned_alloc(64, (KIPP_CPU_ATT_SCRATCH(n_q, G) * 4 + 63) / 64 * 64);
        float *q = malloc(n_q * q_stride * sizeof *q), *out = malloc(n_q * q_stride * sizeof *out);
        if (!k || !v || !kb || !vb || !scratch || !q || !out) return 1;
        for (uint32_t h = 0; h < heads; h++) {
            k[h] = weights(store, sizeof(kipp_block_q8_0), !q8);
            v[h] = weights(store, sizeof(kipp_block_q8_0), !q8);
        }
        for (size_t i = 0; i < n_q * q_stride; i++) q[i] = (float)(rand() % 100) / 100.0f;
        /* flops: each row i sees pos0 + i + 1 positions */
        double flops = 4.0 * G * KIPP_HEAD_DIM * ((double)n_q * (pos0 + 1) + (double)n_q * (n_q - 1) / 2);
        int reps = quick ? 1 : (int)(2e8 / ((double)store * 2 * heads) / n_q) + 1;
        for (int t = 0; t < passes; t++) {
            double t0 = now();
            for (int r = 0; r < reps; r++)
                for (uint32_t h = 0; h < heads; h++) {
                    for (uint32_t b = 0; b < nb; b++) {
                        kb[b] = k[h] + (size_t)b * B * row;
                        vb[b] = v[h] + (size_t)b * B * row;
                    }
                    if (q8) {
                        kipp_cpu_kv_head_q8 kv = {(const kipp_block_q8_0 *const *)kb,
                                                  (const kipp_block_q8_0 *const *)vb, 4};
                        kt->attention_q8_0(q, q_stride, n_q, G, pos0, &kv, 0.088f, out, q_stride,
                                           scratch);
                    } else {
                        kipp_cpu_kv_head kv = {(const uint16_t *const *)kb,
                                               (const uint16_t *const *)vb, KIPP_HEAD_DIM};
                        kt->attention(q, q_stride, n_q, G, pos0, &kv, 0.088f, out, q_stride, scratch);
                    }
                }
            double dt = (now() - t0) / reps / heads;
            if (dt < best) best = dt;
        }
        double bytes = (double)ctx * row * 2; /* K and V rows read per KV head */
        printf("{\"cpu\":\"%s\",\"tier\":\"%s\",\"kernel\":\"%s attention\",\"cache\":\"%s\","
               "\"positions\":%u,\"query_rows\":%u,\"kv_heads\":%u,\"query_heads_per_kv\":%d,"
               "\"scale_codes\":%d,\"us_per_kv_head\":%.2f,\"gb_per_s\":%.2f,\"gflops\":%.2f,"
               "\"out0\":%.6g}\n",
               cpu, tier, n_q > 1 ? "prefill" : "decode", scheme, ctx, n_q, heads, G,
               scale_codes, best * 1e6, bytes / best / 1e9, flops / best / 1e9, out[0]);
        for (uint32_t h = 0; h < heads; h++) {
            free(k[h]);
            free(v[h]);
        }
        free(k);
        free(v);
        free(kb);
        free(vb);
        free(scratch);
        free(q);
        free(out);
    } else if (!strcmp(mode, "matvec") || !strcmp(mode, "matmul")) {
        const int K = (int)a6;
        static const char *names[] = {"bf16", "q8_0", "q4_0", "q4_1"};
        static const size_t block[] = {64, sizeof(kipp_block_q8_0), sizeof(kipp_block_q4_0),
                                       sizeof(kipp_block_q4_1)};
        int s = 0;
        while (s < 4 && strcmp(scheme, names[s])) s++;
        uint32_t m = a5 < 0 ? 1 : (uint32_t)a5; /* activation rows */
        if (s == 4 || a4 < 1 || a4 > (1 << 20) || (a5 >= 0 && (a5 < 1 || a5 > 4096)) ||
            a6 < 32 || a6 > 16384 || a6 % 32)
            return usage();
        uint32_t rows = (uint32_t)a4;
        size_t wbytes = (size_t)rows * (K / 32) * block[s];
        void *w = weights(wbytes, block[s], s == 0);
        size_t x_stride = (kt->act_bytes(K) + 63) / 64 * 64;
        float *xf = malloc(K * sizeof *xf), *y = malloc((size_t)m * rows * sizeof *y);
        void *x = aligned_alloc(64, x_stride * m);
        float **yp = malloc(m * sizeof *yp);
        if (!xf || !y || !x || !yp) return 1;
        for (uint32_t r = 0; r < m; r++) {
            for (int i = 0; i < K; i++) xf[i] = (float)(rand() % 1000) / 1000.0f;
            kt->pack_act(xf, K, (char *)x + r * x_stride);
            yp[r] = y + (size_t)r * rows;
        }
        /* the same bytes streamed per pass; a matmul does m times the work */
        int reps = quick ? 1 : (int)(4e8 / (double)wbytes / (m > 16 ? m / 16.0 : 1)) + 1;
        for (int t = 0; t < passes; t++) {
            double t0 = now();
            for (int r = 0; r < reps; r++) switch (s) {
                case 0: kt->matmul_bf16(w, K, 0, rows, x, x_stride, m, yp); break;
                case 1: kt->matmul_q8_0(w, K, 0, rows, x, x_stride, m, yp); break;
                case 2: kt->matmul_q4_0(w, K, 0, rows, x, x_stride, m, yp); break;
                default: kt->matmul_q4_1(w, K, 0, rows, x, x_stride, m, yp); break;
                }
            double dt = (now() - t0) / reps;
            if (dt < best) best = dt;
        }
        printf("{\"cpu\":\"%s\",\"tier\":\"%s\",\"kernel\":\"%s\",\"scheme\":\"%s\","
               "\"k\":%d,\"rows\":%u,\"m\":%u,\"scale_codes\":%d,\"ns_per_row_block\":%.3f,"
               "\"gb_per_s\":%.2f,\"gflops\":%.2f,\"y0\":%.6g}\n",
               cpu, tier, m == 1 && a5 < 0 ? "decode matvec" : "matmul", scheme, K, rows, m,
               scale_codes, best / ((double)rows * (K / 32)) * 1e9, (double)wbytes / best / 1e9,
               2.0 * K * rows * m / best / 1e9, y[0]);
        free(w);
        free(xf);
        free(y);
        free(x);
        free(yp);
    } else {
        return usage();
    }
    return 0;
}
