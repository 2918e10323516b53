/* kipp generate: prompt (text or token ids) -> streamed continuation.
 *
 * The prompt is evaluated in chunks (so --all-logits never needs more than
 * one chunk of rows in memory), then one token at a time: sample, print,
 * evaluate. Text streams through kipp_detok_stream_* so multi-byte
 * characters split across tokens come out whole. Reaches the engine only
 * through include/kipp.h. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/commands.h"
#include "cli/cli_args.h"
#include "cli/cli_spec.h"
#include "kipp.h"

#define PROMPT_CHUNK 64 /* prompt positions per eval call */

static void usage(FILE *out) {
    fprintf(out,
        "usage: kipp generate -m FILE (-p TEXT | --tokens 1,2,3) [-n N] [options]\n"
        "\n"
        "Generates a continuation of the prompt and streams it to stdout as it is\n"
        "produced. Stops after N tokens or at the checkpoint's stop tokens. Prompt and\n"
        "generation speeds go to stderr. No BOS or chat template is added: the prompt\n"
        "is used as given.\n"
        "\n"
        "  -m, --model FILE          a Kipp GGUF artifact\n"
        "  -p, --prompt TEXT         prompt text (special tokens are recognised)\n"
        "  --tokens LIST             prompt as comma-separated token ids\n"
        "  -n, --max-tokens N        tokens to generate (default 64; 0 = prompt only)\n"
        "  --backend ref|cpu         compute backend (default: cpu; ref is the scalar oracle)\n"
        "  -t, --threads N           cpu backend threads (default 0 = one per online core)\n"
        "  --kv-quant bf16|q8_0      KV cache format (default bf16; q8_0 stores K/V as\n"
        "                            Q8_0 blocks: 1.88x less memory, bounded error)\n"
        "  --head bf16|q8_0          output head: as stored (bf16, default) or a Q8_0\n"
        "                            copy made at load (faster decode; docs/ARCHITECTURE.md)\n"
        "  --capacity C              session capacity in positions (default: prompt + N,\n"
        "                            at most the context length)\n"
        "  --all-logits OUT.f32      write little-endian float32 rows [position][151936]\n"
        "                            for every prompt position and every generated token\n"
        "  --print-ids               print generated token ids (comma-separated, one line)\n"
        "                            instead of text\n"
        "  --json-schema FILE        constrain the output to compact JSON valid under the\n"
        "                            JSON Schema in FILE (subset: docs/ARCHITECTURE.md);\n"
        "                            stderr then also gives the time spent masking\n"
        "  --json-object             constrain the output to any JSON object\n"
        "\n"
        "sampling (order: penalties, logit bias, temperature, top-k, top-p, min-p):\n"
        "  --temperature T           0 = greedy (default 0)\n"
        "  --top-k K                 0 = off (default)\n"
        "  --top-p P                 1 = off (default)\n"
        "  --min-p M                 0 = off (default)\n"
        "  --repeat-penalty R        1 = off (default); over the last 64 tokens\n"
        "  --frequency-penalty F     0 = off (default); over the last 64 tokens\n"
        "  --presence-penalty P      0 = off (default); over the last 64 tokens\n"
        "  --logit-bias ID=BIAS      add BIAS to token ID (repeatable; BIAS -inf bans it)\n"
        "  --seed S                  random seed (default 0)\n"
        "\n" CLI_SPEC_USAGE);
}

/* ---- argument parsing ------------------------------------------------- */

static int parse_long(const char *opt, const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "kipp generate: %s expects an integer in [%ld, %ld], got '%s'\n", opt, lo,
                hi, s);
        return 1;
    }
    *out = v;
    return 0;
}

static int parse_float(const char *opt, const char *s, float *out) {
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end || isnan(v)) {
        fprintf(stderr, "kipp generate: %s expects a number, got '%s'\n", opt, s);
        return 1;
    }
    *out = v;
    return 0;
}

static int parse_u64(const char *opt, const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-') {
        fprintf(stderr, "kipp generate: %s expects a non-negative integer, got '%s'\n", opt, s);
        return 1;
    }
    *out = v;
    return 0;
}

/* "1,2,3" -> malloc'd ids. */
static int parse_tokens(const char *s, int32_t **ids, size_t *n) {
    size_t cap = 1;
    for (const char *p = s; *p; p++) cap += *p == ',';
    *ids = malloc(cap * sizeof **ids);
    if (!*ids) return 1;
    *n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || end == p || v < 0 || v >= KIPP_VOCAB_SIZE || (*end && *end != ',')) {
            fprintf(stderr, "kipp generate: --tokens: bad token id near '%s' (ids are 0..%d)\n", p,
                    KIPP_VOCAB_SIZE - 1);
            return 1;
        }
        (*ids)[(*n)++] = (int32_t)v;
        p = *end ? end + 1 : end;
    }
    return 0;
}

typedef struct options {
    const char *model, *prompt, *tokens, *all_logits, *json_schema;
    bool json_object;
    long n_gen;
    long capacity;
    kipp_backend_kind backend;
    kipp_kv_quant kv_quant;
    kipp_head_quant head;
    kipp_sampling sampling;
    kipp_logit_bias bias[64];
    size_t n_bias;
    bool print_ids;
    cli_spec spec;
    int threads; /* 0 = one per online core */
} options;

static int parse_args(int argc, char **argv, options *o) {
    o->n_gen = 64;
    o->backend = KIPP_BACKEND_CPU;
    o->sampling = kipp_sampling_default();
    cli_spec_init(&o->spec);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int spec_arg = cli_spec_parse("generate", &o->spec, argc, argv, &i);
        if (spec_arg < 0) return 1;
        if (spec_arg) continue;
        if (!strcmp(a, "--print-ids")) {
            o->print_ids = true;
            continue;
        }
        if (!strcmp(a, "--json-object")) {
            o->json_object = true;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "kipp generate: %s needs a value (or unknown option; see --help)\n", a);
            return 1;
        }
        const char *v = argv[++i];
        long l;
        int rc = 0;
        kipp_sampling *s = &o->sampling;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) o->prompt = v;
        else if (!strcmp(a, "--tokens")) o->tokens = v;
        else if (!strcmp(a, "--all-logits")) o->all_logits = v;
        else if (!strcmp(a, "--json-schema")) o->json_schema = v;
        else if (!strcmp(a, "-n") || !strcmp(a, "--max-tokens"))
            rc = parse_long(a, v, 0, 1L << 30, &o->n_gen);
        else if (!strcmp(a, "--capacity")) rc = parse_long(a, v, 1, 1L << 30, &o->capacity);
        else if (cli_is_threads_flag(a)) {
            if (!cli_parse_threads("generate", v, &o->threads)) return 1;
        } else if (!strcmp(a, "--backend")) {
            if (!cli_parse_backend("generate", v, &o->backend)) return 1;
        } else if (!strcmp(a, "--kv-quant")) {
            if (!cli_parse_kv_quant("generate", v, &o->kv_quant)) return 1;
        } else if (!strcmp(a, "--head")) {
            if (!cli_parse_head("generate", v, &o->head)) return 1;
        } else if (!strcmp(a, "--temperature")) rc = parse_float(a, v, &s->temperature);
        else if (!strcmp(a, "--top-k")) {
            rc = parse_long(a, v, 0, KIPP_VOCAB_SIZE, &l);
            s->top_k = (int32_t)l;
        } else if (!strcmp(a, "--top-p")) rc = parse_float(a, v, &s->top_p);
        else if (!strcmp(a, "--min-p")) rc = parse_float(a, v, &s->min_p);
        else if (!strcmp(a, "--repeat-penalty")) rc = parse_float(a, v, &s->repetition_penalty);
        else if (!strcmp(a, "--frequency-penalty")) rc = parse_float(a, v, &s->frequency_penalty);
        else if (!strcmp(a, "--presence-penalty")) rc = parse_float(a, v, &s->presence_penalty);
        else if (!strcmp(a, "--seed")) rc = parse_u64(a, v, &s->seed);
        else if (!strcmp(a, "--logit-bias")) {
            const char *eq = strchr(v, '=');
            char idbuf[32];
            if (!eq || (size_t)(eq - v) >= sizeof idbuf || o->n_bias == 64) {
                fprintf(stderr, "kipp generate: --logit-bias expects ID=BIAS (at most 64)\n");
                return 1;
            }
            memcpy(idbuf, v, (size_t)(eq - v));
            idbuf[eq - v] = '\0';
            kipp_logit_bias *b = &o->bias[o->n_bias++];
            rc = parse_long(a, idbuf, 0, KIPP_VOCAB_SIZE - 1, &l);
            b->token = (int32_t)l;
            if (!rc) rc = parse_float(a, eq + 1, &b->bias);
        } else {
            fprintf(stderr, "kipp generate: unknown option '%s' (see --help)\n", a);
            return 1;
        }
        if (rc) return 1;
    }
    o->sampling.logit_bias = o->bias;
    o->sampling.n_logit_bias = o->n_bias;
    if (!o->model) {
        fprintf(stderr, "kipp generate: -m FILE is required (see --help)\n");
        return 1;
    }
    if (!o->prompt == !o->tokens) {
        fprintf(stderr, "kipp generate: give exactly one of -p TEXT and --tokens LIST\n");
        return 1;
    }
    return 0;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- generation -------------------------------------------------------- */

typedef struct run {
    const options *o;
    kipp_model *model;
    kipp_session *session;
    FILE *logits_out;
    float *logits; /* [PROMPT_CHUNK][151936] */
    kipp_grammar *grammar; /* --json-schema / --json-object, else NULL */
    kipp_error err;
} run;

/* The whole of a (schema) file; NULL on failure (errno set). */
static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *data = NULL;
    size_t n = 0, cap = 0, got;
    do {
        if (n == cap) {
            char *p = realloc(data, cap = cap ? cap * 2 : 4096);
            if (!p) break;
            data = p;
        }
        got = fread(data + n, 1, cap - n, f);
        n += got;
    } while (got > 0);
    bool bad = ferror(f) || n == 0;
    fclose(f);
    if (bad || !data) {
        free(data);
        if (!errno) errno = EINVAL;
        return NULL;
    }
    *len = n;
    return data;
}

static int write_rows(run *r, const float *rows, size_t n) {
    if (!r->logits_out) return 0;
    /* The format is little-endian float32; this build targets LE hosts. */
    if (fwrite(rows, sizeof(float) * KIPP_VOCAB_SIZE, n, r->logits_out) != n) {
        fprintf(stderr, "kipp generate: writing %s failed: %s\n", r->o->all_logits,
                strerror(errno));
        return 1;
    }
    return 0;
}

static int eval_tokens(run *r, const int32_t *ids, uint32_t n, uint32_t n_logits) {
    kipp_eval_item item = {r->session, ids, n, n_logits, r->logits};
    if (kipp_eval(r->model, &item, 1, &r->err)) {
        fprintf(stderr, "kipp generate: %s\n", r->err.message);
        return 1;
    }
    return 0;
}

/* Prints whatever the stream decoder releases for `id`, or the id itself. */
static void emit(run *r, kipp_detok_stream *ds, int32_t id, bool first) {
    if (r->o->print_ids || !ds) {
        printf("%s%d", first ? "" : ",", (int)id);
    } else {
        char buf[512];
        size_t len = 0;
        if (kipp_detok_stream_push(ds, id, buf, sizeof buf, &len, &r->err) == 0)
            fwrite(buf, 1, len, stdout);
        else
            fprintf(stderr, "\nkipp generate: cannot decode token %d: %s\n", (int)id,
                    r->err.message);
    }
    fflush(stdout);
}

/* Why the sampler picked nothing (-1): NaN logits (a corrupt model) or
 * every token banned. */
static void no_pick(const float *logits) {
    fprintf(stderr, "kipp generate: %s\n",
            kipp_logits_have_nan(logits) ? KIPP_NAN_LOGITS : "every token is banned; nothing to sample");
}

/* Speculative generation (--spec): the plain loop's tokens when greedy, its
 * distribution when sampled (src/core/spec.c). Each step evaluates the last
 * token and the drafts in one multi-row eval; verification returns the
 * tokens that follow, which are emitted one by one with the plain loop's
 * stop and length checks. */
static int generate_spec(run *r, kipp_sampler *sampler, kipp_detok_stream *ds,
                         const int32_t *prompt, size_t n_prompt, long *n_done, bool *stopped,
                         bool *full) {
    const options *o = r->o;
    const kipp_checkpoint *ck = kipp_model_checkpoint(r->model);
    int rc = 1;
    kipp_spec *sp = NULL;
    float *rows = malloc(sizeof(float) * KIPP_VOCAB_SIZE * (1 + KIPP_SPEC_MAX_DRAFT));
    int32_t toks[1 + KIPP_SPEC_MAX_DRAFT], queue[1 + KIPP_SPEC_MAX_DRAFT];
    uint32_t q_n = 0, q_at = 0;
    kipp_spec_options so = cli_spec_options(&o->spec, kipp_session_capacity(r->session));
    if (!rows) {
        fprintf(stderr, "kipp generate: out of memory\n");
        return 1;
    }
    if (kipp_spec_create(r->model, &so, &o->sampling, &sp, &r->err) ||
        kipp_spec_set_context(sp, prompt, n_prompt, &r->err))
        goto fail;
    int32_t id = -1;
    for (long g = 0; g < o->n_gen; g++) {
        if (g == 0) {
            id = kipp_sampler_sample(sampler, r->logits);
            if (id < 0) {
                no_pick(r->logits);
                goto done;
            }
            kipp_sampler_accept(sampler, id);
        } else if (q_at < q_n) {
            id = queue[q_at++];
        } else {
            uint32_t len = kipp_session_length(r->session);
            uint32_t cap = kipp_session_capacity(r->session);
            if (len >= cap) {
                *full = true;
                break;
            }
            /* Drafts past the last wanted token, or the capacity, are waste. */
            long want = o->n_gen - g - 1;
            uint32_t max = (uint32_t)(want < (long)(cap - len - 1) ? want : cap - len - 1);
            uint32_t n = 0;
            if (kipp_spec_draft(sp, id, max, toks, &n, &r->err)) goto fail;
            kipp_eval_item it = {r->session, toks, n, n, rows};
            if (kipp_eval(r->model, &it, 1, &r->err) ||
                kipp_spec_verify(sp, sampler, r->session, rows, queue, &q_n, &r->err))
                goto fail;
            q_at = 0;
            id = queue[q_at++];
        }
        (*n_done)++;
        for (uint32_t s = 0; s < ck->n_stops; s++) *stopped |= id == ck->stops[s];
        if (!*stopped || o->print_ids) emit(r, ds, id, g == 0);
        if (*stopped) break;
    }
    kipp_spec_stats st;
    kipp_spec_get_stats(sp, &st);
    cli_spec_print_stats(stderr, "generate", o->spec.mode, &st);
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "kipp generate: %s\n", r->err.message);
done:
    kipp_spec_destroy(sp);
    free(rows);
    return rc;
}

static int generate(run *r, const int32_t *prompt, size_t n_prompt) {
    const options *o = r->o;
    const kipp_checkpoint *ck = kipp_model_checkpoint(r->model);
    int rc = 1;
    kipp_sampler *sampler = NULL;
    kipp_detok_stream *ds = NULL;
    kipp_grammar_state *gs = NULL;
    double t_mask = 0, t_sample = 0;

    /* Capacity: the whole run by default (never above the context). */
    uint64_t want = (uint64_t)n_prompt + (uint64_t)o->n_gen;
    uint32_t capacity = o->capacity ? (uint32_t)o->capacity
                                    : (uint32_t)(want < ck->context ? want : ck->context);
    kipp_session_options so = {.capacity = capacity, .kv_quant = o->kv_quant};
    if (kipp_session_create(r->model, &so, &r->session, &r->err) ||
        kipp_sampler_create(&o->sampling, &sampler, &r->err)) {
        fprintf(stderr, "kipp generate: %s\n", r->err.message);
        goto done;
    }
    if (r->grammar && kipp_grammar_state_create(r->grammar, &gs, &r->err)) {
        fprintf(stderr, "kipp generate: %s\n", r->err.message);
        goto done;
    }
    if (!o->print_ids && kipp_detok_stream_create(r->model, &ds, &r->err)) {
        if (!o->tokens) {
            fprintf(stderr, "kipp generate: %s\n", r->err.message);
            goto done;
        }
        fprintf(stderr, "kipp generate: no text output (%s); printing token ids\n",
                r->err.message);
        ds = NULL;
    }
    if (ck->synthetic)
        fprintf(stderr, "kipp generate: NOTE: %s is a synthetic checkpoint; its weights are "
                "random, so the text is meaningless\n", ck->id);

    /* Prompt: chunks of PROMPT_CHUNK; rows for every position with
     * --all-logits, else only the last position's. */
    double t0 = now_seconds();
    for (size_t at = 0; at < n_prompt; at += PROMPT_CHUNK) {
        uint32_t n = (uint32_t)(n_prompt - at < PROMPT_CHUNK ? n_prompt - at : PROMPT_CHUNK);
        bool last = at + n == n_prompt;
        uint32_t n_logits = r->logits_out ? n : last ? 1 : 0;
        if (eval_tokens(r, prompt + at, n, n_logits) || write_rows(r, r->logits, n_logits))
            goto done;
        if (last && n_logits > 1) /* keep the last row first for sampling */
            memmove(r->logits, r->logits + (size_t)(n_logits - 1) * KIPP_VOCAB_SIZE,
                    sizeof(float) * KIPP_VOCAB_SIZE);
    }
    for (size_t i = 0; i < n_prompt; i++) kipp_sampler_accept(sampler, prompt[i]);
    double t1 = now_seconds();

    /* Generation: sample from the last row, print, evaluate the new token
     * (the final token is evaluated only when its logits row is wanted). */
    long n_done = 0;
    bool stopped = false, full = false;
    if (o->spec.mode != KIPP_SPEC_OFF) {
        if (generate_spec(r, sampler, ds, prompt, n_prompt, &n_done, &stopped, &full)) goto done;
    }
    for (long g = 0; o->spec.mode == KIPP_SPEC_OFF && g < o->n_gen; g++) {
        double ts = now_seconds();
        if (gs) kipp_grammar_mask(gs, r->logits);
        double tm = now_seconds();
        int32_t id = kipp_sampler_sample(sampler, r->logits);
        t_mask += tm - ts;
        t_sample += now_seconds() - tm;
        if (gs && id >= 0 && kipp_grammar_accept(gs, id, &r->err)) {
            bool stop = false;
            for (uint32_t s = 0; s < ck->n_stops; s++) stop |= id == ck->stops[s];
            if (!stop) {
                fprintf(stderr, "kipp generate: %s\n", r->err.message);
                goto done;
            }
        }
        if (id < 0) {
            no_pick(r->logits);
            goto done;
        }
        kipp_sampler_accept(sampler, id);
        n_done++;
        for (uint32_t s = 0; s < ck->n_stops; s++) stopped |= id == ck->stops[s];
        if (!stopped || o->print_ids) emit(r, ds, id, g == 0);
        bool need_eval = r->logits_out || (!stopped && g + 1 < o->n_gen);
        if (!need_eval) break;
        if (kipp_session_length(r->session) == kipp_session_capacity(r->session)) {
            full = true;
            break;
        }
        if (eval_tokens(r, &id, 1, 1) || write_rows(r, r->logits, 1)) goto done;
        if (stopped) break;
    }
    if (ds) {
        char buf[64];
        size_t len = 0;
        kipp_detok_stream_flush(ds, buf, sizeof buf, &len);
        fwrite(buf, 1, len, stdout);
    }
    if (o->print_ids || !ds || n_done) putchar('\n');
    fflush(stdout);
    double t2 = now_seconds();

    if (full)
        fprintf(stderr, "kipp generate: stopped: session capacity %u reached\n", capacity);
    else if (stopped)
        fprintf(stderr, "kipp generate: stopped at a stop token\n");
    double tp = t1 - t0, tg = t2 - t1;
    fprintf(stderr, "kipp generate: backend %s; prompt %zu tokens in %.3f s (%.2f tok/s); "
            "generation %ld tokens in %.3f s (%.2f tok/s)\n",
            kipp_backend_name(o->backend), n_prompt, tp, tp > 0 ? n_prompt / tp : 0.0, n_done,
            tg, tg > 0 ? n_done / tg : 0.0);
    if (gs)
        fprintf(stderr, "kipp generate: constrained: mask %.3f ms/token, sample %.3f ms/token, "
                "mask = %.2f%% of generation time; document %s\n",
                n_done ? t_mask * 1e3 / n_done : 0.0, n_done ? t_sample * 1e3 / n_done : 0.0,
                tg > 0 ? 100.0 * t_mask / tg : 0.0,
                kipp_grammar_complete(gs) ? "complete" : "truncated (max tokens reached)");
    rc = 0;
done:
    kipp_grammar_state_destroy(gs);
    kipp_detok_stream_destroy(ds);
    kipp_sampler_destroy(sampler);
    kipp_session_destroy(r->session);
    r->session = NULL;
    return rc;
}

int cmd_generate(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
    options o = {0};
    if (parse_args(argc, argv, &o)) return 2;

    run r = {.o = &o};
    int rc = 1;
    int32_t *prompt = NULL;
    size_t n_prompt = 0;
    kipp_model_options mo = {.backend = o.backend, .threads = o.threads, .head_quant = o.head};
    if (!cli_cpu_isa_from_env("generate", &mo)) return 2;
    if (o.spec.mode != KIPP_SPEC_OFF && o.all_logits) {
        fprintf(stderr, "kipp generate: --all-logits needs --spec off\n");
        return 2;
    }
    /* Drafts are verified against the unconstrained argmax/distribution; a
     * grammar would have to mask every verification row too. Not yet. */
    if (o.spec.mode != KIPP_SPEC_OFF && (o.json_schema || o.json_object)) {
        fprintf(stderr, "kipp generate: --json-schema/--json-object need --spec off\n");
        return 2;
    }
    if (kipp_model_open(o.model, &mo, &r.model, &r.err)) {
        fprintf(stderr, "kipp generate: %s\n", r.err.message);
        return 1;
    }
    if (cli_spec_open("generate", &o.spec, r.model, &mo)) {
        kipp_model_close(r.model);
        return 1;
    }
    if (o.tokens ? parse_tokens(o.tokens, &prompt, &n_prompt)
                 : kipp_tokenize(r.model, o.prompt, strlen(o.prompt), &prompt, &n_prompt,
                                 &r.err)) {
        if (!o.tokens) fprintf(stderr, "kipp generate: %s\n", r.err.message);
        goto done;
    }
    if (n_prompt == 0) {
        fprintf(stderr, "kipp generate: the prompt is empty (no BOS is added; give at least "
                "one token)\n");
        goto done;
    }
    if (o.json_schema || o.json_object) {
        char *schema = NULL;
        size_t len = 0;
        if (o.json_schema && !(schema = read_all(o.json_schema, &len))) {
            fprintf(stderr, "kipp generate: cannot read %s: %s\n", o.json_schema,
                    strerror(errno));
            goto done;
        }
        int grc = kipp_grammar_from_json_schema(r.model, schema, len, &r.grammar, &r.err);
        free(schema);
        if (grc) {
            fprintf(stderr, "kipp generate: %s: %s\n", o.json_schema ? o.json_schema : "--json-object",
                    r.err.message);
            goto done;
        }
    }
    r.logits = malloc(sizeof(float) * KIPP_VOCAB_SIZE * PROMPT_CHUNK);
    if (!r.logits) {
        fprintf(stderr, "kipp generate: out of memory\n");
        goto done;
    }
    if (o.all_logits && !(r.logits_out = fopen(o.all_logits, "wb"))) {
        fprintf(stderr, "kipp generate: cannot create %s: %s\n", o.all_logits, strerror(errno));
        goto done;
    }
    rc = generate(&r, prompt, n_prompt);
    if (r.logits_out && fclose(r.logits_out) != 0 && rc == 0) {
        fprintf(stderr, "kipp generate: writing %s failed\n", o.all_logits);
        rc = 1;
    }
    r.logits_out = NULL;
done:
    if (r.logits_out) fclose(r.logits_out);
    free(r.logits);
    free(prompt);
    kipp_grammar_destroy(r.grammar);
    cli_spec_close(&o.spec);
    kipp_model_close(r.model);
    return rc;
}
