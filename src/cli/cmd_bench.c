/* `kipp bench`: prefill and decode throughput of one backend on one file.
 *
 * Each repetition makes a fresh session, prefills a P-token prompt in one
 * kipp_eval call (logits for the last position only), then decodes D tokens
 * one kipp_eval call each, feeding back the argmax (included in the time,
 * as a real greedy loop pays it). Decode therefore runs at P..P+D tokens of
 * context: `--prompt-tokens 4096 --decode 32` measures decode at 4K context.
 * One warm-up repetition of the full prompt and every decode step
 * precedes the timed ones; the medians are reported. The warm-up faults in
 * the mapped weights, wakes the threads, and first-touches the KV pool
 * pages the timed sessions then reuse (the pool hands the freed blocks
 * back out). That is llama-bench's protocol too: it zero-fills its KV
 * buffer (prompt and generated tokens) when the context is created and
 * warms up with the full prompt, so a 32-token warm-up here left kipp
 * alone paying ~28 page faults per prompt token inside the timed prefill
 * (-8 % at 2,048 tokens on Zen 5), and a warm-up of 4 decode steps left it
 * the first touch of the later steps' pages: a new 4 KiB page in each of
 * the 448 (layer, head) K and V planes every 16 positions, ~7 us each on
 * this VM, -2 % on a 64-token decode with --reps 1 (stop 46). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/cli_args.h"
#include "kipp.h"
#include "core/common.h"

/* How much of the model file's mapping the kernel maps with 2 MiB pages
 * (FilePmdMapped in /proc/self/smaps), in KiB, and the mapping's size;
 * -1 where smaps is not there (not Linux). It depends on how the page
 * cache holds the file (artifact.c's MADV_HUGEPAGE), which moves prefill by
 * 10-25 % for kipp and llama.cpp alike, so every record carries it. */
static void weights_huge_kib(const char *path, long *pmd_kib, long *size_kib) {
    *pmd_kib = *size_kib = -1;
    char *real = realpath(path, NULL);
    FILE *f = real ? fopen("/proc/self/smaps", "r") : NULL;
    if (!f) {
        free(real);
        return;
    }
    char line[4352];
    int in = 0;
    while (fgets(line, sizeof line, f)) {
        long v;
        unsigned long start, end;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &start, &end, perms) == 3) {
            /* a mapping header: "start-end perms offset dev inode   path" */
            char *slash = strchr(line, '/');
            size_t n = slash ? strcspn(slash, "\n") : 0;
            in = slash && n == strlen(real) && strncmp(slash, real, n) == 0;
            if (in && *size_kib < 0) *size_kib = *pmd_kib = 0;
        } else if (in && sscanf(line, "Size: %ld kB", &v) == 1) {
            *size_kib += v;
        } else if (in && sscanf(line, "FilePmdMapped: %ld kB", &v) == 1) {
            *pmd_kib += v;
        }
    }
    fclose(f);
    free(real);
}

/* The largest --prompt-tokens or --decode count (a bound on the buffers the
 * run allocates; the context limit checks the sum later). */
#define BENCH_MAX_TOKENS (1 << 20)

static void usage(FILE *out) {
    fprintf(out,
            "usage: kipp bench -m FILE [--backend cpu|ref] [-t|--threads N] [--prompt-tokens P]\n"
            "                  [--decode D] [--reps R] [--kv-quant bf16|q8_0]\n"
            "                  [--head bf16|q8_0] [--profile] [--json]\n"
            "Prefill tokens/s for a P-token prompt (one eval call) and decode tokens/s over D\n"
            "tokens after it (so decode runs at P..P+D tokens of context); medians of R\n"
            "repetitions after a warm-up. Defaults: cpu, threads 0 = one per online core,\n"
            "P 512, D 64, R 3, KV cache bf16, output head as stored (bf16; q8_0: a Q8_0 copy\n"
            "made at load). --json prints one JSON object. --profile (cpu backend) adds where\n"
            "the timed repetitions' time went, per step of the forward pass: calls, seconds,\n"
            "share of the timed time and GFLOPS (docs/BENCHMARKS.md, \"Stop 63\").\n");
}

/* --profile: the steps' totals over the timed repetitions (the profile
 * after them less the one after the warm-up), printed as a table or as
 * the JSON record's "profile" array; `timed` is the repetitions' time, and
 * "other" is what no step holds (sessions, sampling, the API's checks). */
static void print_profile(const kipp_profile_step *before, const kipp_profile_step *after,
                          size_t n, double timed, int json) {
    double in_steps = 0;
    if (json) printf(",\"profile\":[");
    else printf("profile    %-14s %8s %10s %7s %9s\n", "step", "calls", "seconds", "share", "GFLOPS");
    for (size_t i = 0; i < n; i++) {
        double sec = after[i].seconds - before[i].seconds, fl = after[i].flops - before[i].flops;
        unsigned long long calls = (unsigned long long)(after[i].calls - before[i].calls);
        double gflops = sec > 0 ? fl / sec * 1e-9 : 0;
        in_steps += sec;
        if (json)
            printf("%s{\"step\":\"%s\",\"calls\":%llu,\"seconds\":%.6f,\"flops\":%.0f,"
                   "\"gflops\":%.3f}", i ? "," : "", after[i].name, calls, sec, fl, gflops);
        else
            printf("           %-14s %8llu %10.4f %6.1f%% %9.1f\n", after[i].name, calls, sec,
                   100 * sec / timed, gflops);
    }
    if (json)
        printf("],\"profile_timed_seconds\":%.6f,\"profile_other_seconds\":%.6f", timed,
               timed - in_steps);
    else
        printf("           %-14s %8s %10.4f %6.1f%%\n", "other", "", timed - in_steps,
               100 * (timed - in_steps) / timed);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, int n) {
    double s[64];
    memcpy(s, v, (size_t)n * sizeof *v);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

/* The greedy pick between steps (lowest id wins a tie), timed as part of
 * decode, as in any greedy generation. Logits are finite here. */
static int32_t argmax(const float *x) {
    int32_t b = kipp_argmax_above(x, KIPP_VOCAB_SIZE, -INFINITY);
    return b < 0 ? 0 : b;
}

static int parse_int(const char *s, int lo, int hi, int *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi) return 1;
    *out = (int)v;
    return 0;
}

/* One repetition: prefill n_prompt tokens, decode n_decode. Times in s. */
static int run_once(kipp_model *m, kipp_kv_quant kvq, const int32_t *prompt, int n_prompt,
                    int n_decode, float *logits, double *t_prefill, double *t_decode,
                    kipp_error *err) {
    kipp_session *s = NULL;
    kipp_session_options so = {.capacity = (uint32_t)(n_prompt + n_decode + 1), .kv_quant = kvq};
    int rc = kipp_session_create(m, &so, &s, err);
    if (rc) return rc;
    double t0 = kipp_now_seconds();
    kipp_eval_item it = {s, prompt, (uint32_t)n_prompt, 1, logits};
    rc = kipp_eval(m, &it, 1, err);
    double t1 = kipp_now_seconds();
    for (int d = 0; d < n_decode && !rc; d++) {
        int32_t tok = argmax(logits);
        kipp_eval_item step = {s, &tok, 1, 1, logits};
        rc = kipp_eval(m, &step, 1, err);
    }
    double t2 = kipp_now_seconds();
    kipp_session_destroy(s);
    *t_prefill = t1 - t0;
    *t_decode = t2 - t1;
    return rc;
}

int cmd_bench(int argc, char **argv) {
    const char *path = NULL;
    kipp_backend_kind backend = KIPP_BACKEND_CPU;
    int threads = 0, n_prompt = 512, n_decode = 64, reps = 3, json = 0, profile = 0;
    kipp_kv_quant kvq = KIPP_KV_BF16;
    kipp_head_quant head = KIPP_HEAD_AS_STORED;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--profile")) {
            profile = 1;
        } else if (!v) {
            fprintf(stderr, "kipp bench: %s needs a value (or is unknown)\n", a);
            return 2;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            path = v, i++;
        } else if (!strcmp(a, "--backend")) {
            if (!cli_parse_backend("bench", v, &backend)) return 2;
            i++;
        } else if (cli_is_threads_flag(a)) {
            if (!cli_parse_threads("bench", v, &threads)) return 2;
            i++;
        } else if (!strcmp(a, "--prompt-tokens") || !strcmp(a, "-p")) {
            if (parse_int(v, 1, BENCH_MAX_TOKENS, &n_prompt)) {
                fprintf(stderr, "kipp bench: --prompt-tokens wants a count 1..%d, got '%s'\n", BENCH_MAX_TOKENS, v);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--decode") || !strcmp(a, "-d")) {
            if (parse_int(v, 0, BENCH_MAX_TOKENS, &n_decode)) {
                fprintf(stderr, "kipp bench: --decode wants a count 0..%d, got '%s'\n", BENCH_MAX_TOKENS, v);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--kv-quant")) {
            if (!cli_parse_kv_quant("bench", v, &kvq)) return 2;
            i++;
        } else if (!strcmp(a, "--head")) {
            if (!cli_parse_head("bench", v, &head)) return 2;
            i++;
        } else if (!strcmp(a, "--reps") || !strcmp(a, "-r")) {
            if (parse_int(v, 1, 64, &reps)) {
                fprintf(stderr, "kipp bench: --reps wants 1..64, got '%s'\n", v);
                return 2;
            }
            i++;
        } else {
            fprintf(stderr, "kipp bench: unknown argument '%s' (see --help)\n", a);
            return 2;
        }
    }
    if (!path) {
        fprintf(stderr, "kipp bench: -m FILE is required\n");
        usage(stderr);
        return 2;
    }
    threads = kipp_resolve_threads(threads);

    kipp_error err = {0};
    kipp_model *m = NULL;
    kipp_model_options mo = {.backend = backend, .threads = threads, .head_quant = head,
                             .profile = profile};
    if (!cli_cpu_isa_from_env("bench", &mo)) return 2;
    if (kipp_model_open(path, &mo, &m, &err)) {
        fprintf(stderr, "kipp bench: %s\n", err.message);
        return 1;
    }
    const kipp_checkpoint *c = kipp_model_checkpoint(m);
    if ((uint64_t)n_prompt + n_decode + 1 > c->context) {
        fprintf(stderr, "kipp bench: %d + %d tokens exceed the context length %u of %s\n",
                n_prompt, n_decode, c->context, c->id);
        kipp_model_close(m);
        return 2;
    }
    if (profile && !kipp_model_profile(m, NULL, 0)) { /* said before the warm-up runs */
        fprintf(stderr, "kipp bench: --profile: the %s backend keeps no profile\n",
                kipp_backend_name(backend));
        kipp_model_close(m);
        return 2;
    }
    int32_t *prompt = malloc((size_t)n_prompt * sizeof *prompt);
    float *logits = malloc((size_t)KIPP_VOCAB_SIZE * sizeof *logits);
    if (!prompt || !logits) {
        fprintf(stderr, "kipp bench: out of memory\n");
        free(prompt);
        free(logits);
        kipp_model_close(m);
        return 1;
    }
    /* Deterministic ordinary token ids (the content does not change the
     * work; the same ids every run keep runs comparable). */
    uint64_t x = 0x243f6a8885a308d3ull;
    for (int i = 0; i < n_prompt; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        prompt[i] = (int32_t)(x % 151000);
    }

    double tp[64], td[64], pre_tps[64], dec_tps[64];
    /* warm-up: the whole prompt and every decode step, so that the KV
     * pages the timed repetitions write are first touched here (above) */
    int rc = run_once(m, kvq, prompt, n_prompt, n_decode, logits, &tp[0], &td[0], &err);
    kipp_profile_step prof0[KIPP_PROFILE_STEPS], prof1[KIPP_PROFILE_STEPS];
    size_t n_prof = kipp_model_profile(m, prof0, KIPP_PROFILE_STEPS);
    for (int r = 0; r < reps && !rc; r++) {
        rc = run_once(m, kvq, prompt, n_prompt, n_decode, logits, &tp[r], &td[r], &err);
        pre_tps[r] = n_prompt / tp[r];
        dec_tps[r] = n_decode ? n_decode / td[r] : 0.0;
        if (!json)
            fprintf(stderr, "  rep %d: prefill %.2f tok/s, decode %.2f tok/s\n", r + 1,
                    pre_tps[r], dec_tps[r]);
    }
    if (rc) {
        fprintf(stderr, "kipp bench: %s\n", err.message);
        free(prompt);
        free(logits);
        kipp_model_close(m);
        return 1;
    }
    double timed = 0;
    for (int r = 0; r < reps; r++) timed += tp[r] + td[r];
    kipp_model_profile(m, prof1, KIPP_PROFILE_STEPS);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double rss_mib = (double)ru.ru_maxrss / 1024.0; /* Linux: KiB */
    double p_med = median(pre_tps, reps), d_med = n_decode ? median(dec_tps, reps) : 0.0;
    const char *isa = kipp_cpu_isa_name(mo.cpu_isa); /* "auto" unless forced */
    long pmd_kib, map_kib;
    weights_huge_kib(path, &pmd_kib, &map_kib);
    /* what decode's weight prefetch resolved to on this processor */
    const char *pf = kipp_cpu_decode_prefetch_name(
        kipp_cpu_decode_prefetch_resolve(mo.cpu_decode_prefetch));
    if (json) {
        printf("{\"backend\":\"%s\",\"model\":\"%s\",\"checkpoint\":\"%s\",\"quant\":\"%s\","
               "\"isa\":\"%s\",\"decode_prefetch\":\"%s\",\"kv_quant\":\"%s\",\"head\":\"%s\",\"threads\":%d,\"prompt_tokens\":%d,\"decode_tokens\":%d,"
               "\"decode_context\":%d,\"reps\":%d,\"prefill_tps\":%.3f,\"decode_tps\":%.3f,"
               "\"peak_rss_mib\":%.1f,\"weights_map_kib\":%ld,\"weights_pmd_mapped_kib\":%ld,"
               "\"prefill_tps_runs\":[",
               kipp_backend_name(backend), path, c->id, kipp_model_quant_scheme(m),
               isa, pf, cli_kv_quant_name(kvq), kipp_model_head_quant(m), threads, n_prompt, n_decode, n_prompt, reps, p_med,
               d_med, rss_mib, map_kib, pmd_kib);
        for (int r = 0; r < reps; r++) printf("%s%.3f", r ? "," : "", pre_tps[r]);
        printf("],\"decode_tps_runs\":[");
        for (int r = 0; r < reps; r++) printf("%s%.3f", r ? "," : "", dec_tps[r]);
        printf("]");
        if (n_prof) print_profile(prof0, prof1, n_prof, timed, 1);
        printf("}\n");
    } else {
        printf("model      %s (%s, %s)%s\n", path, c->id, kipp_model_quant_scheme(m),
               c->synthetic ? "  [synthetic: random weights]" : "");
        printf("backend    %s, %d threads, kernels %s, decode prefetch %s, KV cache %s, "
               "head %s\n",
               kipp_backend_name(backend), threads, isa, pf, cli_kv_quant_name(kvq),
               kipp_model_head_quant(m));
        printf("prefill    %d tokens: %.2f tok/s (median of %d)\n", n_prompt, p_med, reps);
        if (n_decode)
            printf("decode     %d tokens at %d..%d context: %.2f tok/s (median of %d)\n",
                   n_decode, n_prompt, n_prompt + n_decode, d_med, reps);
        printf("peak RSS   %.1f MiB\n", rss_mib);
        if (map_kib > 0)
            printf("weights    %.0f of %.0f MiB mapped with 2 MiB pages\n", pmd_kib / 1024.0,
                   map_kib / 1024.0);
        if (n_prof) print_profile(prof0, prof1, n_prof, timed, 0);
    }
    free(prompt);
    free(logits);
    kipp_model_close(m);
    return 0;
}
