#include "cli/cli_args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool cli_parse_backend(const char *command, const char *value, kipp_backend_kind *out) {
    if (!strcmp(value, "ref")) *out = KIPP_BACKEND_REF;
    else if (!strcmp(value, "cpu")) *out = KIPP_BACKEND_CPU;
    else {
        fprintf(stderr, "kipp %s: unknown backend '%s' (ref, cpu)\n", command, value);
        return false;
    }
    return true;
}

bool cli_parse_kv_quant(const char *command, const char *value, kipp_kv_quant *out) {
    if (!strcmp(value, "bf16")) *out = KIPP_KV_BF16;
    else if (!strcmp(value, "q8_0")) *out = KIPP_KV_Q8_0;
    else {
        fprintf(stderr, "kipp %s: unknown --kv-quant '%s' (bf16, q8_0)\n", command, value);
        return false;
    }
    return true;
}

const char *cli_kv_quant_name(kipp_kv_quant q) { return q == KIPP_KV_Q8_0 ? "q8_0" : "bf16"; }

bool cli_parse_head(const char *command, const char *value, kipp_head_quant *out) {
    kipp_error err = {0};
    if (kipp_head_quant_parse(value, out, &err)) {
        fprintf(stderr, "kipp %s: --head: %s\n", command, err.message);
        return false;
    }
    return true;
}

bool cli_cpu_isa_from_env(const char *command, kipp_model_options *options) {
    const char *v = getenv("KIPP_CPU_ISA");
    kipp_error err = {0};
    if (v && *v && kipp_cpu_isa_parse(v, &options->cpu_isa, &err)) {
        fprintf(stderr, "kipp %s: KIPP_CPU_ISA: %s\n", command, err.message);
        return false;
    }
    v = getenv("KIPP_CPU_DECODE_PREFETCH");
    if (!v || !*v) return true;
    static const kipp_cpu_decode_prefetch all[] = {KIPP_CPU_DECODE_PREFETCH_AUTO,
                                                   KIPP_CPU_DECODE_PREFETCH_ROWS,
                                                   KIPP_CPU_DECODE_PREFETCH_SEQ};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (!strcmp(v, kipp_cpu_decode_prefetch_name(all[i]))) {
            options->cpu_decode_prefetch = all[i];
            return true;
        }
    fprintf(stderr, "kipp %s: KIPP_CPU_DECODE_PREFETCH: unknown value '%s' (auto, rows, seq)\n",
            command, v);
    return false;
}

bool cli_is_threads_flag(const char *arg) {
    return !strcmp(arg, "--threads") || !strcmp(arg, "-t");
}

bool cli_parse_threads(const char *command, const char *value, int *out) {
    long v = 0;
    const char *p = value;
    for (; *p >= '0' && *p <= '9' && v <= CLI_MAX_THREADS; p++) v = v * 10 + (*p - '0');
    if (p == value || *p || v > CLI_MAX_THREADS) {
        fprintf(stderr,
                "kipp %s: --threads wants a thread count 0..%d (0 = one per online core), "
                "got '%s'\n",
                command, CLI_MAX_THREADS, value);
        return false;
    }
    *out = (int)v;
    return true;
}
