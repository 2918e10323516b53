/* kipp serve: option parsing, model opening and signal handling around
 * the event loop in src/server/loop.c. The artifact's header is checked
 * before the port opens (a missing or malformed file fails at once); the
 * model itself is opened by serve_load on the loop's loader thread, while
 * the server already answers /healthz and reports "loading" on /health. */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/commands.h"
#include "cli/cli_args.h"
#include "cli/cli_spec.h"
#include "kipp.h"
#include "server/loop.h"

/* The first signal starts a drain; a second one stops at once. The loop
 * reads stop_requested (the handler runs on its thread: the loader thread
 * blocks the signals); the loader reads stop_seen, an atomic, because it
 * is another thread. */
static volatile sig_atomic_t stop_requested;
static atomic_int stop_seen;
static void on_signal(int sig) {
    (void)sig;
    if (stop_requested < 2) stop_requested = stop_requested + 1;
    atomic_store(&stop_seen, 1);
}

/* What serve_load needs, and what it opened (closed by cmd_serve after
 * server_run, which joins the loader thread first). */
typedef struct serve_load_state {
    const char *path;
    kipp_model_options mo;
    cli_spec spec;
    uint32_t context, max_sequences;
    kipp_kv_quant kv_quant;
    long long delay_ms; /* --debug-load-delay-ms: see usage() */
    kipp_model *model;
} serve_load_state;

/* The server's load callback (a thread of its own). */
static int serve_load(void *arg, server_model *out) {
    serve_load_state *ls = arg;
    /* The test-only delay sleeps in slices so that SIGTERM during it ends
     * the server at once, as it would between two real load steps. */
    for (long long left = ls->delay_ms; left > 0 && !atomic_load(&stop_seen); left -= 10) {
        struct timespec ts = {0, (left < 10 ? left : 10) * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (atomic_load(&stop_seen)) return 1;
    kipp_error err = {0};
    if (kipp_model_open(ls->path, &ls->mo, &ls->model, &err)) {
        fprintf(stderr, "kipp serve: cannot open %s with the %s backend: %s\n", ls->path,
                kipp_backend_name(ls->mo.backend), err.message);
        return 1;
    }
    if (cli_spec_open("serve", &ls->spec, ls->model, &ls->mo)) return 1;
    kipp_pool_stats ps;
    kipp_pool_stats_get(ls->model, ls->kv_quant, &ps, &err);
    uint64_t pool_positions = (uint64_t)ps.blocks_total * ps.block_positions;
    if (pool_positions < ls->context)
        fprintf(stderr, "kipp serve: note: the KV pool (%llu positions) is below --ctx %u; "
                "requests that need more positions than the pool are refused\n",
                (unsigned long long)pool_positions, ls->context);
    fprintf(stderr, "kipp serve: backend %s, ctx %u, max sessions %u, KV pool %u MiB = %u blocks "
            "of 32 = %llu positions\n", kipp_backend_name(ls->mo.backend), ls->context,
            ls->max_sequences, ls->mo.kv_pool_mib, ps.blocks_total,
            (unsigned long long)pool_positions);
    if (ls->spec.mode != KIPP_SPEC_OFF)
        fprintf(stderr, "kipp serve: speculation %s%s%s\n", kipp_spec_mode_name(ls->spec.mode),
                ls->spec.draft_path ? ", draft " : "", ls->spec.draft_path ? ls->spec.draft_path : "");
    *out = (server_model){.model = ls->model, .context = ls->context,
                          .spec = cli_spec_options(&ls->spec, 0)};
    return 0;
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
        "  --max-sessions N       active sequences at once, one per choice (default 32)\n"
        "  --ctx N                positions per sequence, prompt + max_tokens (default:\n"
        "                         the checkpoint's context, at most 4096)\n"
        "  --kv-pool-mib N        size of the shared KV pool in MiB; sequences take 32-position\n"
        "                         blocks as they grow and share published prefixes\n"
        "                         (default: room for 4 x ctx positions)\n"
        "  --kv-budget N          the same, given in positions (rounded up to whole MiB)\n"
        "  --kv-quant bf16|q8_0   KV cache format (default bf16)\n"
        "  --head bf16|q8_0       output head: as stored (default) or a Q8_0 copy made at\n"
        "                         load (faster decode; docs/ARCHITECTURE.md)\n"
        "  --max-body BYTES       largest request body (default 1048576)\n"
        "  --header-timeout S     a request head must arrive within S seconds (default 10)\n"
        "  --body-timeout S       its body within S seconds after the head (default 30)\n"
        "  --send-timeout S       a client must take queued output within S (default 30)\n"
        "  --idle-timeout S       idle keep-alive connections close after S (default 60)\n"
        "  --shutdown-timeout S   on SIGTERM/SIGINT, requests in flight may finish within S\n"
        "                         seconds, then are cancelled with a final event (default 10);\n"
        "                         a second signal stops at once\n"
        "\n"
        "The port opens before the model is loaded: until it is, GET /health and every\n"
        "/v1 endpoint answer 503 (Retry-After: 1) and /metrics has kipp_model_loaded 0;\n"
        "GET /healthz is 200 whenever the server runs.\n"
        "\n" CLI_SPEC_USAGE
        "  (server-wide: every sequence drafts; drafts of all sequences are verified in\n"
        "  the same batched step)\n");
}

static int parse_seconds(const char *opt, const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= 0 && v <= 86400)) {
        fprintf(stderr, "kipp serve: %s expects seconds in [0, 86400], got '%s'\n", opt, s);
        return 1;
    }
    *out = v;
    return 0;
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
    /* 32 sessions: the design serves 32 concurrent choices. KV memory is
     * bounded by --kv-budget (positions over all sessions), not by this. */
    server_config cfg = {.host = "127.0.0.1", .port = 8080, .max_sequences = 32,
                         .max_body_bytes = 1 << 20, .header_timeout_s = 10,
                         .body_timeout_s = 30, .send_timeout_s = 30, .idle_timeout_s = 60,
                         .shutdown_timeout_s = 10, .stop = &stop_requested};
    serve_load_state ls = {.mo = {.backend = KIPP_BACKEND_CPU}};
    kipp_model_options *mo = &ls.mo;
    cli_spec *spec = &ls.spec;
    long long ctx = 0, budget = 0, pool_mib = 0, v;
    cli_spec_init(spec);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        int spec_arg = cli_spec_parse("serve", spec, argc, argv, &i);
        if (spec_arg < 0) return 2;
        if (spec_arg) continue;
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
            if (!cli_parse_backend("serve", val, &mo->backend)) return 2;
        } else if (cli_is_threads_flag(a)) {
            if (!cli_parse_threads("serve", val, &mo->threads)) return 2;
        } else if (!strcmp(a, "--max-sessions")) {
            rc = parse_num(a, val, 1, 256, &v);
            cfg.max_sequences = (uint32_t)v;
        } else if (!strcmp(a, "--ctx")) rc = parse_num(a, val, 2, 1 << 24, &ctx);
        else if (!strcmp(a, "--kv-budget")) rc = parse_num(a, val, 2, 1LL << 40, &budget);
        else if (!strcmp(a, "--kv-pool-mib")) rc = parse_num(a, val, 1, 1LL << 24, &pool_mib);
        else if (!strcmp(a, "--kv-quant")) {
            if (!cli_parse_kv_quant("serve", val, &cfg.kv_quant)) return 2;
        } else if (!strcmp(a, "--head")) {
            if (!cli_parse_head("serve", val, &mo->head_quant)) return 2;
        } else if (!strcmp(a, "--max-body")) {
            rc = parse_num(a, val, 1024, 1LL << 30, &v);
            cfg.max_body_bytes = (size_t)v;
        } else if (!strcmp(a, "--header-timeout")) rc = parse_seconds(a, val, &cfg.header_timeout_s);
        else if (!strcmp(a, "--body-timeout")) rc = parse_seconds(a, val, &cfg.body_timeout_s);
        else if (!strcmp(a, "--send-timeout")) rc = parse_seconds(a, val, &cfg.send_timeout_s);
        else if (!strcmp(a, "--idle-timeout")) rc = parse_seconds(a, val, &cfg.idle_timeout_s);
        else if (!strcmp(a, "--shutdown-timeout"))
            rc = parse_seconds(a, val, &cfg.shutdown_timeout_s);
        /* Hidden, for tests only (not in --help's option list): wait this
         * long before opening the model, so that the not-yet-loaded state
         * is observable (tests/scripts/test_server_load.sh). */
        else if (!strcmp(a, "--debug-load-delay-ms"))
            rc = parse_num(a, val, 0, 3600000, &ls.delay_ms);
        else {
            fprintf(stderr, "kipp serve: unknown option '%s' (see --help)\n", a);
            return 2;
        }
        if (rc) return 2;
    }
    if (!model_path) {
        fprintf(stderr, "kipp serve: -m FILE is required (see --help)\n");
        return 2;
    }
    if (!cli_cpu_isa_from_env("serve", mo)) return 2;
    kipp_error err = {0};
    /* The header is read here, before the port opens: the pool is sized
     * from the checkpoint's shape, and a missing or malformed file fails
     * at once (the same strict checks as kipp_model_open, no backend). */
    kipp_inspect *ins = NULL;
    if (kipp_inspect_open(model_path, &ins, &err)) {
        fprintf(stderr, "kipp serve: cannot open %s: %s\n", model_path, err.message);
        return 1;
    }
    const kipp_checkpoint *ick = kipp_inspect_checkpoint(ins);
    if (ctx > (long long)ick->context) {
        fprintf(stderr, "kipp serve: --ctx %lld exceeds %s's context length %u\n", ctx, ick->id,
                ick->context);
        kipp_inspect_close(ins);
        return 2;
    }
    uint32_t dctx = ctx ? (uint32_t)ctx : (ick->context < 4096 ? ick->context : 4096);
    uint64_t per_pos = (uint64_t)ick->layers * 2 * (cfg.kv_quant == KIPP_KV_Q8_0 ? 32 * 34 : 2048);
    uint64_t positions = budget ? (uint64_t)budget : 4ull * dctx;
    char model_id[128], variant[64];
    snprintf(model_id, sizeof model_id, "%s", ick->id);
    snprintf(variant, sizeof variant, "%s", kipp_variant_name(ick->variant));
    cfg.model_id = model_id;
    cfg.variant = variant;
    cfg.synthetic = ick->synthetic;
    kipp_inspect_close(ins);
    mo->kv_pool_mib = pool_mib ? (uint32_t)pool_mib
                               : (uint32_t)((positions * per_pos + (1u << 20) - 1) >> 20);
    ls.path = model_path;
    ls.context = dctx;
    ls.max_sequences = cfg.max_sequences;
    ls.kv_quant = cfg.kv_quant;
    cfg.load = serve_load;
    cfg.load_arg = &ls;

    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    int rc = server_run(&cfg);
    /* server_run joined the loader: what it opened is ours to close. */
    cli_spec_close(spec);
    kipp_model_close(ls.model);
    return rc;
}
