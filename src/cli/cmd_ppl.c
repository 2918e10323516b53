/* kipp ppl: perplexity of a model over a token stream, so that the loss from
 * weight or KV quantization can be measured on the same stream.
 *
 * The stream is cut into non-overlapping windows of --ctx tokens (the last
 * one may be shorter). Each window is evaluated in a fresh (reset) session;
 * inside it, token i (i >= 1) is scored by the log-softmax of the logits at
 * position i - 1, so a window of n tokens scores n - 1 of them and the first
 * token of every window is context only. Log-probs are computed in double:
 *   nll = logsumexp(logits) - logits[target],  ppl = exp(mean nll).
 * Reaches the engine only through include/kipp.h. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/cli_args.h"
#include "kipp.h"

#define CHUNK 64 /* positions per eval call: logits rows held at once */

static void usage(FILE *out) {
    fprintf(out,
        "usage: kipp ppl -m FILE (--tokens-file F | --text-file F) [--ctx N] [options]\n"
        "\n"
        "Perplexity over a token stream. The stream is split into non-overlapping\n"
        "windows of N tokens, each evaluated from an empty session; every token but a\n"
        "window's first is scored by the log-softmax of the previous position's logits.\n"
        "Prints the perplexity and the number of scored tokens.\n"
        "\n"
        "  -m, --model FILE      a Kipp GGUF artifact\n"
        "  --tokens-file F       token ids separated by whitespace and/or commas\n"
        "  --text-file F         text, tokenized with the model's tokenizer (no BOS)\n"
        "  --ctx N               window length in tokens (default 512, at most the\n"
        "                        context length)\n"
        "  --max-tokens N        use only the first N tokens of the stream\n"
        "  --backend ref|cpu     compute backend (default: ref)\n"
        "  -t, --threads N       cpu backend threads (default 0 = one per online core)\n"
        "  --kv-quant bf16|q8_0  KV cache format (default bf16)\n"
        "  --head bf16|q8_0      output head: as stored (default) or a Q8_0 copy made at load\n"
        "  --json                print one JSON object instead of text\n");
}

typedef struct options {
    const char *model, *tokens_file, *text_file;
    long ctx, max_tokens;
    int threads; /* 0 = one per online core */
    kipp_backend_kind backend;
    kipp_kv_quant kv_quant;
    kipp_head_quant head;
    bool json;
} options;

static int parse_long(const char *opt, const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "kipp ppl: %s expects an integer in [%ld, %ld], got '%s'\n", opt, lo, hi,
                s);
        return 1;
    }
    *out = v;
    return 0;
}

static int parse_args(int argc, char **argv, options *o) {
    o->ctx = 512;
    o->backend = KIPP_BACKEND_REF;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--json")) {
            o->json = true;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "kipp ppl: %s needs a value (or unknown option; see --help)\n", a);
            return 1;
        }
        const char *v = argv[++i];
        int rc = 0;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--tokens-file")) o->tokens_file = v;
        else if (!strcmp(a, "--text-file")) o->text_file = v;
        else if (!strcmp(a, "--ctx")) rc = parse_long(a, v, 2, 1L << 30, &o->ctx);
        else if (!strcmp(a, "--max-tokens")) rc = parse_long(a, v, 2, 1L << 40, &o->max_tokens);
        else if (cli_is_threads_flag(a)) {
            if (!cli_parse_threads("ppl", v, &o->threads)) return 1;
        }
        else if (!strcmp(a, "--backend")) {
            if (!cli_parse_backend("ppl", v, &o->backend)) return 1;
        } else if (!strcmp(a, "--kv-quant")) {
            if (!cli_parse_kv_quant("ppl", v, &o->kv_quant)) return 1;
        } else if (!strcmp(a, "--head")) {
            if (!cli_parse_head("ppl", v, &o->head)) return 1;
        } else {
            fprintf(stderr, "kipp ppl: unknown option '%s' (see --help)\n", a);
            return 1;
        }
        if (rc) return 1;
    }
    if (!o->model) {
        fprintf(stderr, "kipp ppl: -m FILE is required (see --help)\n");
        return 1;
    }
    if (!o->tokens_file == !o->text_file) {
        fprintf(stderr, "kipp ppl: give exactly one of --tokens-file and --text-file\n");
        return 1;
    }
    return 0;
}

static int read_whole(const char *path, char **data, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "kipp ppl: cannot open %s: %s\n", path, strerror(errno));
        return 1;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n + 1 >= cap) {
            char *nb = cap > ((size_t)1 << 40) ? NULL : realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - 1 - n, f);
        n += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        free(buf);
        fprintf(stderr, "kipp ppl: cannot read %s%s\n", path, buf ? "" : " (out of memory)");
        return 1;
    }
    buf[n] = '\0';
    *data = buf;
    *size = n;
    return 0;
}

/* Ids separated by whitespace and/or commas -> malloc'd array. */
static int parse_ids(const char *path, const char *s, int32_t **ids, size_t *n) {
    size_t cap = 1;
    for (const char *p = s; *p; p++) cap += strchr(", \t\r\n", *p) != NULL;
    *ids = malloc(cap * sizeof **ids);
    if (!*ids) return 1;
    *n = 0;
    const char *p = s;
    for (;;) {
        while (*p == ',' || *p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || end == p || v < 0 || v >= KIPP_VOCAB_SIZE ||
            (*end && !strchr(", \t\r\n", *end))) {
            fprintf(stderr, "kipp ppl: %s: bad token id near '%.20s' (ids are 0..%d)\n", path, p,
                    KIPP_VOCAB_SIZE - 1);
            return 1;
        }
        if (*n == cap) return 1; /* cannot happen: cap counts separators + 1 */
        (*ids)[(*n)++] = (int32_t)v;
        p = end;
    }
    return 0;
}

/* -log softmax(row)[target], in double. */
static double token_nll(const float *row, int32_t target) {
    float max = row[0];
    for (size_t i = 1; i < KIPP_VOCAB_SIZE; i++)
        if (row[i] > max) max = row[i];
    double sum = 0.0;
    for (size_t i = 0; i < KIPP_VOCAB_SIZE; i++) sum += exp((double)row[i] - (double)max);
    return (double)max + log(sum) - (double)row[target];
}

typedef struct result {
    double nll_sum;
    size_t scored, windows;
} result;

/* Scores ids[0..n) window by window. logits holds CHUNK rows. */
static int score(kipp_model *model, kipp_session *s, const int32_t *ids, size_t n, size_t ctx,
                 float *logits, result *res, kipp_error *err) {
    for (size_t w0 = 0; w0 + 1 < n; w0 += ctx) {
        size_t len = n - w0 < ctx ? n - w0 : ctx;
        if (len < 2) break; /* a lone trailing token has nothing to score */
        kipp_session_reset(s);
        /* Position j's row scores token j + 1 of the window, for j < len - 1. */
        for (size_t at = 0; at < len; at += CHUNK) {
            uint32_t m = (uint32_t)(len - at < CHUNK ? len - at : CHUNK);
            kipp_eval_item it = {s, ids + w0 + at, m, m, logits};
            if (kipp_eval(model, &it, 1, err)) return 1;
            for (uint32_t j = 0; j < m; j++) {
                size_t pos = at + j;
                if (pos + 1 >= len) break;
                res->nll_sum += token_nll(logits + (size_t)j * KIPP_VOCAB_SIZE, ids[w0 + pos + 1]);
                res->scored++;
            }
        }
        res->windows++;
    }
    return 0;
}

int cmd_ppl(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
    options o = {0};
    if (parse_args(argc, argv, &o)) return 2;

    int rc = 1;
    kipp_error err = {0};
    kipp_model *model = NULL;
    kipp_session *s = NULL;
    char *text = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0, text_len = 0;
    float *logits = NULL;

    kipp_model_options mo = {.backend = o.backend, .threads = o.threads, .head_quant = o.head};
    if (!cli_cpu_isa_from_env("ppl", &mo)) return 2;
    if (kipp_model_open(o.model, &mo, &model, &err)) {
        fprintf(stderr, "kipp ppl: %s\n", err.message);
        return 1;
    }
    const char *src = o.tokens_file ? o.tokens_file : o.text_file;
    if (read_whole(src, &text, &text_len)) goto done;
    if (o.tokens_file ? parse_ids(src, text, &ids, &n_ids)
                      : kipp_tokenize(model, text, text_len, &ids, &n_ids, &err)) {
        if (o.text_file) fprintf(stderr, "kipp ppl: %s\n", err.message);
        goto done;
    }
    if (o.max_tokens && (size_t)o.max_tokens < n_ids) n_ids = (size_t)o.max_tokens;
    if (n_ids < 2) {
        fprintf(stderr, "kipp ppl: %s holds %zu tokens; at least 2 are needed\n", src, n_ids);
        goto done;
    }
    const kipp_checkpoint *ck = kipp_model_checkpoint(model);
    if ((unsigned long)o.ctx > ck->context) {
        fprintf(stderr, "kipp ppl: --ctx %ld exceeds the context length %u of %s\n", o.ctx,
                ck->context, ck->id);
        goto done;
    }
    size_t ctx = (size_t)o.ctx < n_ids ? (size_t)o.ctx : n_ids;
    kipp_session_options so = {.capacity = (uint32_t)ctx, .kv_quant = o.kv_quant};
    logits = malloc(sizeof(float) * KIPP_VOCAB_SIZE * CHUNK);
    if (!logits) {
        fprintf(stderr, "kipp ppl: out of memory\n");
        goto done;
    }
    if (kipp_session_create(model, &so, &s, &err)) {
        fprintf(stderr, "kipp ppl: %s\n", err.message);
        goto done;
    }
    if (ck->synthetic && !o.json)
        fprintf(stderr, "kipp ppl: NOTE: %s is a synthetic checkpoint with random weights\n",
                ck->id);

    result res = {0};
    if (score(model, s, ids, n_ids, ctx, logits, &res, &err)) {
        fprintf(stderr, "kipp ppl: %s\n", err.message);
        goto done;
    }
    double mean = res.nll_sum / (double)res.scored, ppl = exp(mean);
    const char *kvq = cli_kv_quant_name(o.kv_quant);
    if (o.json)
        printf("{\"ppl\": %.10g, \"nll_mean\": %.12g, \"tokens_scored\": %zu, "
               "\"tokens\": %zu, \"windows\": %zu, \"ctx\": %zu, \"backend\": \"%s\", "
               "\"kv_quant\": \"%s\", \"weights\": \"%s\", \"head\": \"%s\", "
               "\"checkpoint\": \"%s\"}\n",
               ppl, mean, res.scored, n_ids, res.windows, ctx, kipp_backend_name(o.backend), kvq,
               kipp_model_quant_scheme(model), kipp_model_head_quant(model), ck->id);
    else
        printf("ppl %.4f over %zu scored tokens (%zu tokens, %zu windows of ctx %zu; "
               "mean nll %.6f; backend %s, kv %s, weights %s, head %s)\n",
               ppl, res.scored, n_ids, res.windows, ctx, mean, kipp_backend_name(o.backend), kvq,
               kipp_model_quant_scheme(model), kipp_model_head_quant(model));
    rc = 0;
done:
    kipp_session_destroy(s);
    free(logits);
    free(ids);
    free(text);
    kipp_model_close(model);
    return rc;
}
