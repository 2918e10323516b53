/* kipp chat: an interactive REPL over stdin/stdout for instruct entries.
 *
 * Each turn re-renders the whole conversation with kipp_chat_render (the
 * same renderer the server uses), tokenizes it, keeps the longest prefix
 * the session already holds (the Qwen3 template drops the thinking of
 * earlier turns, so history can change) and evaluates only the rest. The
 * reply streams to stdout; prompts and notes go to stderr, so piped use
 * (`printf 'Hi\n/exit\n' | kipp chat -m M`) prints replies only, one per
 * line. Like `kipp generate`, the prompt tokens enter the penalty window
 * (the server counts generated tokens only, as OpenAI does); the final
 * sampled token is never evaluated. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/cli_args.h"
#include "cli/cli_spec.h"
#include "kipp.h"

#define CHUNK 64 /* prompt positions per eval call */

static void usage(FILE *out) {
    fprintf(out,
        "usage: kipp chat -m FILE [options]\n"
        "\n"
        "Interactive chat with an instruct checkpoint. Type a message and press Enter;\n"
        "the reply streams back. /exit (or end of input) quits, /reset starts over.\n"
        "Works with piped stdin: replies go to stdout, one per line.\n"
        "\n"
        "  -m, --model FILE       a Kipp GGUF artifact (instruct or thinking-2507 entry)\n"
        "  --backend ref|cpu      compute backend (default cpu); no fallback\n"
        "  -t, --threads N        cpu backend threads (default 0 = one per online core)\n"
        "  --head bf16|q8_0       output head: as stored (default) or a Q8_0 copy made at\n"
        "                         load (faster decode; docs/ARCHITECTURE.md)\n"
        "  --ctx N                conversation capacity in positions (default: the\n"
        "                         checkpoint's context, at most 4096)\n"
        "  -n, --max-tokens N     tokens per reply at most (default 512)\n"
        "  --system TEXT          a system message\n"
        "  --no-think             render with enable_thinking=false (no effect on\n"
        "                         thinking-2507, whose template always thinks)\n"
        "  --temperature T        default 0.7 (0 = greedy)\n"
        "  --top-k K / --top-p P / --min-p M   filters (default off)\n"
        "  --seed S               random seed (default 0)\n"
        "\n" CLI_SPEC_USAGE);
}

typedef struct msg {
    char role[16];
    char *content;
    size_t length;
} msg;

typedef struct chat {
    kipp_model *model;
    kipp_session *session;
    int32_t *held; /* tokens the session holds, [capacity] */
    uint32_t n_held;
    msg *msgs;
    size_t n_msgs, cap_msgs;
    float *logits; /* [CHUNK][VOCAB] */
    kipp_sampling sampling;
    long max_tokens;
    bool think;
    cli_spec spec;
    kipp_spec *sp; /* NULL: --spec off */
    kipp_error err;
} chat;

static int add_msg(chat *c, const char *role, const char *text, size_t n) {
    if (c->n_msgs == c->cap_msgs) {
        size_t cap = c->cap_msgs ? c->cap_msgs * 2 : 8;
        msg *p = realloc(c->msgs, cap * sizeof *p);
        if (!p) return 1;
        c->msgs = p;
        c->cap_msgs = cap;
    }
    msg *m = &c->msgs[c->n_msgs];
    snprintf(m->role, sizeof m->role, "%s", role);
    m->content = malloc(n + 1);
    if (!m->content) return 1;
    memcpy(m->content, text, n);
    m->content[n] = '\0';
    m->length = n;
    c->n_msgs++;
    return 0;
}

static void clear(chat *c, size_t keep) {
    while (c->n_msgs > keep) free(c->msgs[--c->n_msgs].content);
}

/* Renders, tokenizes and evaluates the conversation; logits row 0 then holds
 * the next-token distribution. Returns the prompt ids in *ids (malloc'd). */
static int prepare(chat *c, int32_t **ids, size_t *n_ids) {
    kipp_chat_message *cm = calloc(c->n_msgs, sizeof *cm);
    if (!cm) return 1;
    for (size_t i = 0; i < c->n_msgs; i++)
        cm[i] = (kipp_chat_message){c->msgs[i].role, c->msgs[i].content, c->msgs[i].length,
                                    NULL, 0, NULL, 0};
    char *text = NULL;
    size_t len = 0;
    int rc = kipp_chat_render(c->model, cm, c->n_msgs, true, c->think, &text, &len, &c->err);
    free(cm);
    if (rc || kipp_tokenize(c->model, text, len, ids, n_ids, &c->err)) {
        free(text);
        fprintf(stderr, "kipp chat: %s\n", c->err.message);
        return 1;
    }
    free(text);
    uint32_t cap = kipp_session_capacity(c->session);
    if (*n_ids + 1 > cap) {
        fprintf(stderr, "kipp chat: the conversation (%zu tokens) no longer fits the context of "
                "%u positions; use /reset or a larger --ctx\n", *n_ids, cap);
        return 1;
    }
    /* Keep the common prefix (at least one token must be evaluated for logits). */
    uint32_t keep = 0;
    while (keep < c->n_held && keep + 1 < *n_ids && c->held[keep] == (*ids)[keep]) keep++;
    if (kipp_session_truncate(c->session, keep, &c->err)) {
        fprintf(stderr, "kipp chat: %s\n", c->err.message);
        return 1;
    }
    c->n_held = keep;
    for (size_t at = keep; at < *n_ids; at += CHUNK) {
        uint32_t n = (uint32_t)(*n_ids - at < CHUNK ? *n_ids - at : CHUNK);
        kipp_eval_item it = {c->session, *ids + at, n, at + n == *n_ids ? 1u : 0u, c->logits};
        if (kipp_eval(c->model, &it, 1, &c->err)) {
            fprintf(stderr, "kipp chat: %s\n", c->err.message);
            return 1;
        }
        memcpy(c->held + at, *ids + at, n * sizeof(int32_t));
        c->n_held = (uint32_t)(at + n);
    }
    return 0;
}

/* The next reply token. Plain: evaluate the previous token, sample. With
 * --spec: tokens come from a queue that one draft + verify step refills
 * (src/core/spec.c); a step evaluates the previous token and the drafts,
 * and everything it kept is in the session, hence in held. */
typedef struct reply_state {
    int32_t queue[1 + KIPP_SPEC_MAX_DRAFT];
    uint32_t n, at;
} reply_state;

static int next_spec(chat *c, kipp_sampler *sampler, reply_state *rs, int32_t prev, long left,
                     int32_t *id) {
    if (rs->at < rs->n) {
        *id = rs->queue[rs->at++];
        return 0;
    }
    uint32_t cap = kipp_session_capacity(c->session);
    uint32_t room = cap - c->n_held - 1; /* the caller left room for prev */
    uint32_t max = (uint32_t)(left - 1 < (long)room ? left - 1 : room);
    int32_t toks[1 + KIPP_SPEC_MAX_DRAFT];
    uint32_t n = 0;
    float *rows = c->logits; /* [1 + KIPP_SPEC_MAX_DRAFT][VOCAB] with --spec */
    if (kipp_spec_draft(c->sp, prev, max, toks, &n, &c->err)) return 1;
    kipp_eval_item it = {c->session, toks, n, n, rows};
    if (kipp_eval(c->model, &it, 1, &c->err) ||
        kipp_spec_verify(c->sp, sampler, c->session, rows, rs->queue, &rs->n, &c->err))
        return 1;
    /* Kept: prev and every accepted draft (all but the last output). */
    c->held[c->n_held++] = prev;
    for (uint32_t i = 0; i + 1 < rs->n; i++) c->held[c->n_held++] = rs->queue[i];
    rs->at = 0;
    *id = rs->queue[rs->at++];
    return 0;
}

/* Streams one reply; appends it to the conversation. */
static int reply(chat *c) {
    int32_t *ids = NULL;
    size_t n_ids = 0;
    kipp_sampler *sampler = NULL;
    kipp_detok_stream *ds = NULL;
    int rc = 1;
    char *out = NULL;
    size_t out_len = 0, out_cap = 0;
    if (prepare(c, &ids, &n_ids)) goto done;
    if (kipp_sampler_create(&c->sampling, &sampler, &c->err) ||
        kipp_detok_stream_create(c->model, &ds, &c->err)) {
        fprintf(stderr, "kipp chat: %s\n", c->err.message);
        goto done;
    }
    for (size_t i = 0; i < n_ids; i++) kipp_sampler_accept(sampler, ids[i]);
    if (c->sp && kipp_spec_set_context(c->sp, c->held, c->n_held, &c->err)) {
        fprintf(stderr, "kipp chat: %s\n", c->err.message);
        goto done;
    }
    const kipp_checkpoint *ck = kipp_model_checkpoint(c->model);
    reply_state rs = {.n = 0};
    int32_t id = -1;
    for (long g = 0; g < c->max_tokens; g++) {
        if (g > 0 && c->sp) {
            if (next_spec(c, sampler, &rs, id, c->max_tokens - g, &id)) {
                fprintf(stderr, "\nkipp chat: %s\n", c->err.message);
                goto done;
            }
        } else {
            id = kipp_sampler_sample(sampler, c->logits);
            if (id < 0) break;
            kipp_sampler_accept(sampler, id);
        }
        bool stop = false;
        for (uint32_t s = 0; s < ck->n_stops; s++) stop |= id == ck->stops[s];
        if (stop) break;
        char buf[512];
        size_t n = 0;
        if (kipp_detok_stream_push(ds, id, buf, sizeof buf, &n, &c->err)) n = 0;
        if (out_len + n + 1 > out_cap) {
            size_t cap = out_cap ? out_cap * 2 : 1024;
            while (cap < out_len + n + 1) cap *= 2;
            char *p = realloc(out, cap);
            if (!p) goto done;
            out = p;
            out_cap = cap;
        }
        memcpy(out + out_len, buf, n);
        out_len += n;
        fwrite(buf, 1, n, stdout);
        fflush(stdout);
        /* With --spec, held can run ahead of g (queued tokens are already
         * in the session); the limit is on positions, n_ids + g when plain,
         * so both stop at the same token. */
        size_t at = c->sp ? n_ids + (size_t)g : c->n_held;
        if (g + 1 == c->max_tokens || at + 1 >= kipp_session_capacity(c->session)) break;
        if (c->sp) continue;
        kipp_eval_item it = {c->session, &id, 1, 1, c->logits};
        if (kipp_eval(c->model, &it, 1, &c->err)) {
            fprintf(stderr, "\nkipp chat: %s\n", c->err.message);
            goto done;
        }
        c->held[c->n_held++] = id;
    }
    char tail[64];
    size_t tn = 0;
    kipp_detok_stream_flush(ds, tail, sizeof tail, &tn);
    fwrite(tail, 1, tn, stdout);
    putchar('\n');
    fflush(stdout);
    if (tn && out_len + tn + 1 > out_cap) {
        char *p = realloc(out, out_len + tn + 1);
        if (!p) goto done;
        out = p;
    }
    if (tn) memcpy(out + out_len, tail, tn), out_len += tn;
    rc = add_msg(c, "assistant", out ? out : "", out_len);
    if (c->sp) {
        kipp_spec_stats st;
        kipp_spec_get_stats(c->sp, &st);
        cli_spec_print_stats(stderr, "chat", c->spec.mode, &st);
    }
done:
    free(out);
    free(ids);
    kipp_sampler_destroy(sampler);
    kipp_detok_stream_destroy(ds);
    return rc;
}

static int parse_f(const char *opt, const char *s, float *out) {
    char *end;
    errno = 0;
    *out = strtof(s, &end);
    if (errno || end == s || *end || isnan(*out)) {
        fprintf(stderr, "kipp chat: %s expects a number, got '%s'\n", opt, s);
        return 1;
    }
    return 0;
}

static int parse_l(const char *opt, const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    *out = strtol(s, &end, 10);
    if (errno || end == s || *end || *out < lo || *out > hi) {
        fprintf(stderr, "kipp chat: %s expects an integer in [%ld, %ld], got '%s'\n", opt, lo, hi,
                s);
        return 1;
    }
    return 0;
}

int cmd_chat(int argc, char **argv) {
    chat c = {.max_tokens = 512, .think = true};
    c.sampling = kipp_sampling_default();
    c.sampling.temperature = 0.7f;
    const char *path = NULL, *system_msg = NULL;
    kipp_model_options mo = {.backend = KIPP_BACKEND_CPU};
    long ctx = 0, v;
    cli_spec_init(&c.spec);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int spec_arg = cli_spec_parse("chat", &c.spec, argc, argv, &i);
        if (spec_arg < 0) return 2;
        if (spec_arg) continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--no-think")) {
            c.think = false;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "kipp chat: %s needs a value (or unknown option; see --help)\n", a);
            return 2;
        }
        const char *val = argv[++i];
        int rc = 0;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) path = val;
        else if (!strcmp(a, "--system")) system_msg = val;
        else if (!strcmp(a, "--backend")) {
            if (!cli_parse_backend("chat", val, &mo.backend)) return 2;
        } else if (cli_is_threads_flag(a)) {
            if (!cli_parse_threads("chat", val, &mo.threads)) return 2;
        } else if (!strcmp(a, "--head")) {
            if (!cli_parse_head("chat", val, &mo.head_quant)) return 2;
        } else if (!strcmp(a, "--ctx")) rc = parse_l(a, val, 16, 1L << 24, &ctx);
        else if (!strcmp(a, "-n") || !strcmp(a, "--max-tokens"))
            rc = parse_l(a, val, 1, 1L << 24, &c.max_tokens);
        else if (!strcmp(a, "--temperature")) rc = parse_f(a, val, &c.sampling.temperature);
        else if (!strcmp(a, "--top-p")) rc = parse_f(a, val, &c.sampling.top_p);
        else if (!strcmp(a, "--min-p")) rc = parse_f(a, val, &c.sampling.min_p);
        else if (!strcmp(a, "--top-k")) {
            rc = parse_l(a, val, 0, KIPP_VOCAB_SIZE, &v);
            c.sampling.top_k = (int32_t)v;
        } else if (!strcmp(a, "--seed")) {
            rc = parse_l(a, val, 0, 0x7fffffffL, &v);
            c.sampling.seed = (uint64_t)v;
        } else {
            fprintf(stderr, "kipp chat: unknown option '%s' (see --help)\n", a);
            return 2;
        }
        if (rc) return 2;
    }
    if (!path) {
        fprintf(stderr, "kipp chat: -m FILE is required (see --help)\n");
        return 2;
    }
    kipp_sampler *probe = NULL;
    if (kipp_sampler_create(&c.sampling, &probe, &c.err)) {
        fprintf(stderr, "kipp chat: %s\n", c.err.message);
        return 2;
    }
    kipp_sampler_destroy(probe);
    if (!cli_cpu_isa_from_env("chat", &mo)) return 2;
    if (kipp_model_open(path, &mo, &c.model, &c.err)) {
        fprintf(stderr, "kipp chat: cannot open %s with the %s backend: %s\n", path,
                kipp_backend_name(mo.backend), c.err.message);
        return 1;
    }
    int rc = 1;
    char *line = NULL;
    if (cli_spec_open("chat", &c.spec, c.model, &mo)) {
        kipp_model_close(c.model);
        return 1;
    }
    size_t line_cap = 0;
    const kipp_checkpoint *ck = kipp_model_checkpoint(c.model);
    /* thinking-2507 replies (reasoning, "</think>", answer) are kept whole as
     * the assistant turn; its template splits them again on re-render */
    if (ck->variant != KIPP_VARIANT_INSTRUCT && ck->variant != KIPP_VARIANT_THINKING_2507) {
        fprintf(stderr, "kipp chat: %s is a %s checkpoint; chat needs an instruct or "
                "thinking-2507 entry\n", ck->id, kipp_variant_name(ck->variant));
        goto done;
    }
    uint32_t cap = ctx ? (uint32_t)ctx : (ck->context < 4096 ? ck->context : 4096);
    if (cap > ck->context) {
        fprintf(stderr, "kipp chat: --ctx %u exceeds %s's context %u\n", cap, ck->id, ck->context);
        goto done;
    }
    kipp_session_options so = {.capacity = cap};
    c.held = malloc(cap * sizeof *c.held);
    c.logits = malloc(sizeof(float) * KIPP_VOCAB_SIZE *
                      (c.spec.mode ? 1 + KIPP_SPEC_MAX_DRAFT : 1));
    if (!c.held || !c.logits || kipp_session_create(c.model, &so, &c.session, &c.err)) {
        fprintf(stderr, "kipp chat: %s\n", c.held && c.logits ? c.err.message : "out of memory");
        goto done;
    }
    kipp_spec_options spo = cli_spec_options(&c.spec, cap);
    if (c.spec.mode && kipp_spec_create(c.model, &spo, &c.sampling, &c.sp, &c.err)) {
        fprintf(stderr, "kipp chat: %s\n", c.err.message);
        goto done;
    }
    if (system_msg && add_msg(&c, "system", system_msg, strlen(system_msg))) goto done;
    size_t base_msgs = c.n_msgs;
    bool tty = isatty(STDIN_FILENO);
    fprintf(stderr, "kipp chat: %s, backend %s, context %u; /exit quits, /reset starts over\n",
            ck->id, kipp_backend_name(mo.backend), cap);
    if (ck->synthetic)
        fprintf(stderr, "kipp chat: NOTE: %s is a synthetic checkpoint; its weights are random, "
                "so the replies are meaningless\n", ck->id);
    for (;;) {
        if (tty) fprintf(stderr, "> ");
        ssize_t n = getline(&line, &line_cap, stdin);
        if (n < 0) break;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
        if (n == 0) continue;
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) break;
        if (!strcmp(line, "/reset")) {
            clear(&c, base_msgs);
            continue;
        }
        if (add_msg(&c, "user", line, (size_t)n)) goto done;
        if (reply(&c)) {
            clear(&c, c.n_msgs - 1); /* drop the unanswered message; keep going */
            if (!tty) goto done;     /* scripted input: report the failure */
        }
    }
    rc = 0;
done:
    free(line);
    clear(&c, 0);
    free(c.msgs);
    free(c.held);
    free(c.logits);
    kipp_spec_destroy(c.sp);
    kipp_session_destroy(c.session);
    cli_spec_close(&c.spec);
    kipp_model_close(c.model);
    return rc;
}
