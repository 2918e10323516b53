/* kipp serve: option parsing, model opening and signal handling around
 * the event loop in src/server/loop.c. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/cli_args.h"
#include "kipp.h"
#include "server/loop.h"

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

static void usage(FILE *out) {
    fprintf(out,
        "usage: kipp serve -m FILE [options]\n"
        "\n"
        "OpenAI-compatible HTTP server (single-threaded event loop, FIFO scheduler,\n"
        "one batched eval per step). Endpoints: GET /healthz, GET /metrics,\n"
        "GET /v1/models, POST /v1/completions, POST /v1/chat/completions (instruct\n"
        "entries only). Binds loopback unless --host says otherwise.\n"
        "\n"
        "  -m, --model FILE       a Kipp GGUF artifact\n"
        "  --host ADDR            address to bind (default 127.0.0.1)\n"
        "  --port N               TCP port (default 8080; 0 = any free port, printed on stderr)\n"
        "  --backend ref|cpu      compute backend (default cpu); no fallback if it fails\n"
        "  -t, --threads N        cpu backend threads (default 0 = one per online core)\n"
        "  --max-sessions N       active sequences at once, one per choice (default 8)\n"
        "  --ctx N                positions per sequence, prompt + max_tokens (default:\n"
        "                         the checkpoint's context, at most 4096)\n"
        "  --kv-budget N          KV positions over all active sequences (default 4 x ctx)\n"
        "  --kv-quant bf16|q8_0   KV cache format (default bf16)\n"
        "  --max-body BYTES       largest request body (default 1048576)\n");
}

static int parse_num(const char *opt, const char *s, long long lo, long long hi, long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "kipp serve: %s expects an integer in [%lld, %lld], got '%s'\n", opt, lo,
                hi, s);
        return 1;
    }
    *out = v;
    return 0;
}

int cmd_serve(int argc, char **argv) {
    const char *model_path = NULL;
    server_config cfg = {.host = "127.0.0.1", .port = 8080, .max_sequences = 8,
                         .max_body_bytes = 1 << 20, .stop = &stop_requested};
    kipp_model_options mo = {.backend = KIPP_BACKEND_CPU};
    long long ctx = 0, budget = 0, v;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "kipp serve: %s needs a value (or unknown option; see --help)\n", a);
            return 2;
        }
        const char *val = argv[++i];
        int rc = 0;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) model_path = val;
        else if (!strcmp(a, "--host")) cfg.host = val;
        else if (!strcmp(a, "--port")) {
            rc = parse_num(a, val, 0, 65535, &v);
            cfg.port = (int)v;
        } else if (!strcmp(a, "--backend")) {
            if (!cli_parse_backend("serve", val, &mo.backend)) return 2;
        } else if (cli_is_threads_flag(a)) {
            if (!cli_parse_threads("serve", val, &mo.threads)) return 2;
        } else if (!strcmp(a, "--max-sessions")) {
            rc = parse_num(a, val, 1, 256, &v);
            cfg.max_sequences = (uint32_t)v;
        } else if (!strcmp(a, "--ctx")) rc = parse_num(a, val, 2, 1 << 24, &ctx);
        else if (!strcmp(a, "--kv-budget")) rc = parse_num(a, val, 2, 1LL << 40, &budget);
        else if (!strcmp(a, "--kv-quant")) {
            if (!cli_parse_kv_quant("serve", val, &cfg.kv_quant)) return 2;
        } else if (!strcmp(a, "--max-body")) {
            rc = parse_num(a, val, 1024, 1LL << 30, &v);
            cfg.max_body_bytes = (size_t)v;
        } else {
            fprintf(stderr, "kipp serve: unknown option '%s' (see --help)\n", a);
            return 2;
        }
        if (rc) return 2;
    }
    if (!model_path) {
        fprintf(stderr, "kipp serve: -m FILE is required (see --help)\n");
        return 2;
    }
    kipp_error err = {0};
    kipp_model *model = NULL;
    if (kipp_model_open(model_path, &mo, &model, &err)) {
        fprintf(stderr, "kipp serve: cannot open %s with the %s backend: %s\n", model_path,
                kipp_backend_name(mo.backend), err.message);
        return 1;
    }
    const kipp_checkpoint *ck = kipp_model_checkpoint(model);
    if (ctx > (long long)ck->context) {
        fprintf(stderr, "kipp serve: --ctx %lld exceeds %s's context length %u\n", ctx, ck->id,
                ck->context);
        kipp_model_close(model);
        return 2;
    }
    cfg.context = ctx ? (uint32_t)ctx : (ck->context < 4096 ? ck->context : 4096);
    cfg.kv_budget = budget ? (uint64_t)budget : 4ull * cfg.context;
    if (cfg.kv_budget < cfg.context)
        fprintf(stderr, "kipp serve: note: --kv-budget %llu is below --ctx %u; requests that "
                "need more positions than the budget are refused\n",
                (unsigned long long)cfg.kv_budget, cfg.context);
    cfg.model = model;
    fprintf(stderr, "kipp serve: backend %s, ctx %u, max sessions %u, KV budget %llu positions\n",
            kipp_backend_name(mo.backend), cfg.context, cfg.max_sequences,
            (unsigned long long)cfg.kv_budget);

    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    int rc = server_run(&cfg);
    kipp_model_close(model);
    return rc;
}
