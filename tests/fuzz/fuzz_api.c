/* libFuzzer target for the OpenAI-compatible request-body parser
 * (src/server/api_openai.c, api_tools.c): every HTTP client's body reaches
 * it, before any other check than the HTTP framing.
 *   make fuzz-api [FUZZ_SECONDS=60]
 * Loads the artifact named by $KIPP_FUZZ_MODEL once (an instruct model, so
 * chat requests render through its template). The input is MODE BODY:
 *   MODE bit 0 picks the endpoint (0 /v1/completions, 1 /v1/chat/completions),
 *   bits 1-3 the server's context limit (the model's own, or a small one, so
 *   the prompt / max_tokens bounds are reached by short bodies);
 *   BODY goes to api_parse_request as loop.c passes a request body.
 * Checked, as the server relies on them:
 *   - a refusal carries a 4xx/5xx status, a type and a non-empty message,
 *     leaves nothing in the request to free (loop.c frees it anyway), and formats to
 *     valid JSON (api_format_error);
 *   - an accepted request is within the limits the scheduler assumes
 *     (n, stops, top_logprobs, prompt + max_tokens within the context, token
 *     ids in the vocabulary, logit_bias entries), its sampling parameters
 *     are accepted by the sampler, completions never split output, and a
 *     grammar yields a state;
 *   - then what loop.c does next with it: api_response_ctx_init/configure,
 *     and the non-streamed response and the stream's chunks for empty
 *     output, which must be valid JSON; api_response_ctx_free and
 *     api_request_free must release everything (LeakSanitizer). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "kipp.h"
#include "server/api_openai.h"
#define FUZZ_NAME "fuzz_api"
#include "fuzz_util.h"


static kipp_model *model;
static bool verbose; /* FUZZ_API_VERBOSE=1: say what each input got (checking seeds) */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    model = fuzz_open_model();
    verbose = getenv("FUZZ_API_VERBOSE") != NULL;
    return 0;
}

static void check_json(const json_buf *b) {
    CHECK(!b->failed);
    json_doc *doc = NULL;
    kipp_error err = {0};
    if (kipp_json_parse(b->data, b->length, &doc, &err)) {
        fprintf(stderr, "fuzz_api: invalid JSON out (%s): %.*s\n", err.message, (int)b->length,
                b->data);
        CHECK(!"formatted output is valid JSON");
    }
    kipp_json_free(doc);
}

static bool all_zero(const void *p, size_t n) {
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        if (c[i]) return false;
    return true;
}

static void check_refusal(const api_request *r, const api_error *e) {
    CHECK(e->status >= 400 && e->status < 600);
    CHECK(e->type != NULL);
    CHECK(memchr(e->message, 0, sizeof e->message) && e->message[0]);
    CHECK(memchr(e->param, 0, sizeof e->param));
    /* loop.c frees a refused request too: nothing may be left to free (or
     * freed and left dangling, which would be freed twice) */
    CHECK(!r->prompt && !r->n_prompt && !r->bias && !r->grammar && !r->n_stops);
    CHECK(all_zero(r->stops, sizeof r->stops));
    json_buf b = {0};
    api_format_error(&b, e);
    check_json(&b);
    kipp_json_buf_free(&b);
}

static void check_request(const api_request *r, api_kind kind, const api_limits *lim) {
    CHECK(r->kind == kind);
    CHECK(r->n >= 1 && r->n <= SCHED_MAX_CHOICES);
    CHECK(r->prompt && r->n_prompt >= 1 && r->n_prompt < lim->context);
    CHECK(r->max_tokens >= 1 && r->max_tokens <= lim->context - r->n_prompt);
    for (size_t i = 0; i < r->n_prompt; i++)
        CHECK(r->prompt[i] >= 0 && r->prompt[i] < KIPP_VOCAB_SIZE);
    CHECK(r->n_stops <= SCHED_MAX_STOPS);
    for (size_t i = 0; i < r->n_stops; i++) {
        size_t len = strlen(r->stops[i]);
        CHECK(len >= 1 && len <= SCHED_MAX_STOP_BYTES);
    }
    for (size_t i = r->n_stops; i < SCHED_MAX_STOPS; i++) CHECK(!r->stops[i]);
    CHECK(r->top_logprobs >= -1 &&
          r->top_logprobs <= (kind == API_CHAT ? SCHED_MAX_TOP_LOGPROBS : 5));
    CHECK(!r->include_usage || r->stream);
    if (kind == API_COMPLETIONS) CHECK(!r->parse_calls && r->reasoning == CHAT_REASONING_NONE);
    const kipp_sampling *s = &r->sampling;
    CHECK(s->n_logit_bias == 0 || s->logit_bias == r->bias);
    for (size_t i = 0; i < s->n_logit_bias; i++) {
        CHECK(s->logit_bias[i].token >= 0 && s->logit_bias[i].token < KIPP_VOCAB_SIZE);
        float b = s->logit_bias[i].bias;
        CHECK((b >= -100.0f && b <= 100.0f) || b == -INFINITY);
    }
    kipp_sampler *sampler = NULL;
    kipp_error err = {0};
    CHECK(kipp_sampler_create(s, &sampler, &err) == KIPP_OK);
    kipp_sampler_destroy(sampler);
    if (r->grammar) {
        kipp_grammar_state *st = NULL;
        CHECK(kipp_grammar_state_create(r->grammar, &st, &err) == KIPP_OK);
        kipp_grammar_state_destroy(st);
    }
}

/* loop.c's next steps for an accepted request, with empty output. */
static void respond(const api_request *r, api_kind kind) {
    api_response_ctx ctx = {0};
    api_response_ctx_init(&ctx, kind, model, 1);
    api_response_ctx_configure(&ctx, r);
    char *texts[SCHED_MAX_CHOICES] = {0};
    size_t lengths[SCHED_MAX_CHOICES] = {0};
    const char *finish[SCHED_MAX_CHOICES];
    for (uint32_t i = 0; i < SCHED_MAX_CHOICES; i++) finish[i] = "stop";
    sched_job_stats stats = {0};
    stats.prompt_tokens = (uint32_t)r->n_prompt;
    json_buf b = {0};
    api_format_response(&b, &ctx, texts, lengths, finish, NULL, r->n, &stats);
    check_json(&b);
    kipp_json_buf_free(&b);
    api_response_ctx_free(&ctx);

    /* The stream: a fresh context, as each request has its own. */
    api_response_ctx_init(&ctx, kind, model, 2);
    api_response_ctx_configure(&ctx, r);
    for (uint32_t i = 0; i < r->n; i++) {
        json_buf c = {0};
        if (kind == API_CHAT) {
            api_format_chunk_start(&c, &ctx, i);
            check_json(&c);
            c.length = 0;
        }
        api_format_chunk_finish(&c, &ctx, i, "length", NULL);
        check_json(&c);
        kipp_json_buf_free(&c);
    }
    if (r->include_usage) {
        json_buf c = {0};
        api_format_chunk_usage(&c, &ctx, &stats);
        check_json(&c);
        kipp_json_buf_free(&c);
    }
    api_response_ctx_free(&ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    api_kind kind = data[0] & 1 ? API_CHAT : API_COMPLETIONS;
    /* 0: the model's context, as `kipp serve` defaults to; else small ones
     * (a server may be started with --context as low as these). */
    static const uint32_t small[8] = {0, 1, 2, 3, 8, 17, 64, 512};
    uint32_t pick = small[(data[0] >> 1) & 7];
    api_limits lim = {.context = pick ? pick : kipp_model_checkpoint(model)->context};
    /* The body as loop.c hands it over: not NUL-terminated, so an overread
     * past `length` is caught. */
    size_t length = size - 1;
    char *body = malloc(length ? length : 1);
    if (!body) return 0;
    memcpy(body, data + 1, length);

    api_request r;
    api_error e;
    int rc = api_parse_request(model, kind, &lim, body, length, &r, &e);
    if (verbose && rc) fprintf(stderr, "fuzz_api: %d %s: %s\n", e.status, e.param, e.message);
    if (verbose && !rc)
        fprintf(stderr, "fuzz_api: ok: %zu prompt tokens, max_tokens %u, n %u, grammar %d\n",
                r.n_prompt, r.max_tokens, r.n, r.grammar != NULL);
    if (rc) {
        check_refusal(&r, &e);
    } else {
        check_request(&r, kind, &lim);
        respond(&r, kind);
    }
    api_request_free(&r);
    CHECK(all_zero(&r, sizeof r));
    free(body);
    return 0;
}
