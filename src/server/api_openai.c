/* OpenAI-compatible request translation and response JSON; see
 * api_openai.h. Shapes follow the OpenAI API reference for
 * /v1/completions and /v1/chat/completions (objects "text_completion",
 * "chat.completion", "chat.completion.chunk"), plus a llama.cpp-style
 * `timings` object and, for synthetic checkpoints, a `kipp_note` field and
 * a system_fingerprint that say the weights are random. */
#include "server/api_openai.h"

#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SYNTHETIC_NOTE                                                                           \
    "synthetic checkpoint: the weights are random, so the generated text is meaningless"
#define MAX_LOGIT_BIAS 1024

static int bad(api_error *e, int status, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int bad(api_error *e, int status, const char *param, const char *fmt, ...) {
    e->status = status;
    e->type = status == 404 ? "not_found_error" : "invalid_request_error";
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return 1;
}

/* ---- field readers: absent or null leave *out untouched ------------------ */

static bool present(const json_value *v) { return v && v->type != JSON_NULL; }

/* JSON strings may carry "\u0000"; the C string then ends early, so
 * strcmp would see "max_tokens" in "max_tokens\u0000x". Names and ids are
 * compared as C strings, so a NUL in one is refused, never truncated. */
static bool has_nul(const char *chars, size_t length) { return strlen(chars) != length; }
static bool string_has_nul(const json_value *v) {
    return v && v->type == JSON_STRING && has_nul(v->as.string.chars, v->as.string.length);
}

/* Any object key with a NUL, at any depth, names no field we know: it is an
 * unknown field (400), wherever it is. */
static int check_nul_keys(const json_value *v, api_error *e) {
    if (v->type == JSON_ARRAY) {
        for (size_t i = 0; i < v->as.array.count; i++)
            if (check_nul_keys(v->as.array.items[i], e)) return 1;
    } else if (v->type == JSON_OBJECT) {
        for (size_t i = 0; i < v->as.object.count; i++) {
            if (has_nul(v->as.object.keys[i], v->as.object.key_lengths[i]))
                return bad(e, 400, v->as.object.keys[i], "unsupported field '%s\\u0000...': field "
                           "names must not contain NUL", v->as.object.keys[i]);
            if (check_nul_keys(v->as.object.values[i], e)) return 1;
        }
    }
    return 0;
}

static int get_int(const json_value *o, const char *key, int64_t lo, int64_t hi, int64_t *out,
                   api_error *e) {
    const json_value *v = kipp_json_get(o, key);
    if (!present(v)) return 0;
    if (v->type != JSON_NUMBER || !v->as.number.is_integer || !v->as.number.fits_int64)
        return bad(e, 400, key, "'%s' must be an integer", key);
    if (v->as.number.integer < lo || v->as.number.integer > hi)
        return bad(e, 400, key, "'%s' must be in [%lld, %lld]", key, (long long)lo,
                   (long long)hi);
    *out = v->as.number.integer;
    return 0;
}

static int get_float(const json_value *o, const char *key, double lo, double hi, float *out,
                     api_error *e) {
    const json_value *v = kipp_json_get(o, key);
    if (!present(v)) return 0;
    if (v->type != JSON_NUMBER || !isfinite(v->as.number.value))
        return bad(e, 400, key, "'%s' must be a number", key);
    if (v->as.number.value < lo || v->as.number.value > hi)
        return bad(e, 400, key, "'%s' must be in [%g, %g]", key, lo, hi);
    *out = (float)v->as.number.value;
    return 0;
}

static int get_bool(const json_value *o, const char *key, bool *out, api_error *e) {
    const json_value *v = kipp_json_get(o, key);
    if (!present(v)) return 0;
    if (v->type != JSON_TRUE && v->type != JSON_FALSE)
        return bad(e, 400, key, "'%s' must be a boolean", key);
    *out = v->type == JSON_TRUE;
    return 0;
}

/* ---- the field list ------------------------------------------------------- */

typedef enum field_rule {
    F_USED,        /* understood */
    F_NOOP,        /* metadata we may ignore (user) */
    F_NULL_ONLY,   /* accepted only when null/absent/false/0; else 400 unsupported */
} field_rule;

typedef struct field {
    const char *name;
    unsigned kinds; /* 1 = completions, 2 = chat */
    field_rule rule;
} field;

static const field FIELDS[] = {
    {"model", 3, F_USED},           {"prompt", 1, F_USED},
    {"messages", 2, F_USED},        {"max_tokens", 3, F_USED},
    {"max_completion_tokens", 2, F_USED},
    {"temperature", 3, F_USED},     {"top_p", 3, F_USED},
    {"top_k", 3, F_USED},           {"min_p", 3, F_USED},
    {"presence_penalty", 3, F_USED}, {"frequency_penalty", 3, F_USED},
    {"repetition_penalty", 3, F_USED}, {"repeat_penalty", 3, F_USED},
    {"logit_bias", 3, F_USED},      {"seed", 3, F_USED},
    {"stop", 3, F_USED},            {"n", 3, F_USED},
    {"stream", 3, F_USED},          {"stream_options", 3, F_USED},
    {"chat_template_kwargs", 2, F_USED},
    {"user", 3, F_NOOP},
    {"logprobs", 3, F_USED},        {"top_logprobs", 2, F_USED},
    {"response_format", 3, F_USED}, {"tools", 2, F_USED},
    {"tool_choice", 2, F_USED},     {"parallel_tool_calls", 2, F_USED},
    {"echo", 1, F_NULL_ONLY},       {"suffix", 1, F_NULL_ONLY},
    {"best_of", 1, F_NULL_ONLY},
};

/* false / 0 / null / absent: the value that asks for nothing. best_of 1
 * also asks for nothing beyond n=1. */
static bool asks_nothing(const char *name, const json_value *v) {
    if (!v || v->type == JSON_NULL || v->type == JSON_FALSE) return true;
    if (v->type == JSON_NUMBER && v->as.number.is_integer)
        return v->as.number.integer == 0 || (!strcmp(name, "best_of") && v->as.number.integer == 1);
    return false;
}

static int check_fields(const json_value *root, api_kind kind, api_error *e) {
    unsigned bit = kind == API_CHAT ? 2u : 1u;
    for (size_t i = 0; i < root->as.object.count; i++) {
        const char *key = root->as.object.keys[i];
        const json_value *v = root->as.object.values[i];
        const field *f = NULL;
        for (size_t k = 0; k < sizeof FIELDS / sizeof FIELDS[0]; k++)
            if (!strcmp(FIELDS[k].name, key) && (FIELDS[k].kinds & bit)) f = &FIELDS[k];
        if (!f)
            return bad(e, 400, key, "unsupported field '%s': this server does not implement it "
                       "for %s", key, kind == API_CHAT ? "/v1/chat/completions" : "/v1/completions");
        if (f->rule == F_NULL_ONLY && !asks_nothing(key, v))
            return bad(e, 400, key, "'%s' is not supported by this server yet (send null or "
                       "omit it)", key);
        if (f->rule == F_NOOP && present(v) && (v->type != JSON_STRING || string_has_nul(v)))
            return bad(e, 400, key, "'%s' must be a string without NUL", key);
    }
    return 0;
}

/* ---- prompt --------------------------------------------------------------- */

static int tokenize(kipp_model *m, const char *text, size_t n, api_request *r, api_error *e,
                    const char *param) {
    kipp_error kerr = {0};
    if (kipp_tokenize(m, text, n, &r->prompt, &r->n_prompt, &kerr))
        return bad(e, 400, param, "cannot tokenize '%s': %s", param, kerr.message);
    return 0;
}

static int parse_prompt(kipp_model *m, const json_value *root, api_request *r, api_error *e) {
    const json_value *p = kipp_json_get(root, "prompt");
    if (!present(p)) return bad(e, 400, "prompt", "'prompt' is required");
    if (p->type == JSON_ARRAY && p->as.array.count == 1 &&
        p->as.array.items[0]->type == JSON_STRING)
        p = p->as.array.items[0]; /* ["text"]: one prompt */
    if (p->type == JSON_STRING) return tokenize(m, p->as.string.chars, p->as.string.length, r, e, "prompt");
    if (p->type != JSON_ARRAY)
        return bad(e, 400, "prompt", "'prompt' must be a string or an array of token ids");
    size_t n = p->as.array.count;
    if (n == 0) return bad(e, 400, "prompt", "'prompt' is empty");
    r->prompt = malloc(n * sizeof *r->prompt);
    if (!r->prompt) return bad(e, 500, "prompt", "out of memory");
    for (size_t i = 0; i < n; i++) {
        const json_value *t = p->as.array.items[i];
        if (t->type == JSON_STRING || t->type == JSON_ARRAY)
            return bad(e, 400, "prompt", "batched prompts (arrays of several prompts) are not "
                       "supported; send one prompt per request");
        if (t->type != JSON_NUMBER || !t->as.number.is_integer || !t->as.number.fits_int64 ||
            t->as.number.integer < 0 || t->as.number.integer >= KIPP_VOCAB_SIZE)
            return bad(e, 400, "prompt", "'prompt' token %zu is not a token id in [0, %d)", i,
                       KIPP_VOCAB_SIZE);
        r->prompt[i] = (int32_t)t->as.number.integer;
    }
    r->n_prompt = n;
    return 0;
}

/* A message's role and optional name: strings without NUL (a NUL would
 * let "user\u0000x" pass the renderer's role check as "user"). The name
 * (a participant label) is accepted and not rendered: Qwen3's template has
 * no place for it. */
static int check_message_identity(const json_value *msg, size_t i, api_error *e) {
    const json_value *role = kipp_json_get(msg, "role");
    const json_value *name = kipp_json_get(msg, "name");
    if (string_has_nul(role))
        return bad(e, 400, "messages", "messages[%zu].role must not contain NUL", i);
    if (present(name) && (name->type != JSON_STRING || string_has_nul(name)))
        return bad(e, 400, "messages", "messages[%zu].name must be a string without NUL", i);
    return 0;
}

/* An assistant message's tool_calls -> calls[] (names and argument strings
 * point into the request document). */
static int parse_tool_calls(const json_value *tc, size_t i, kipp_chat_tool_call **out, size_t *n,
                            api_error *e) {
    *out = NULL;
    *n = 0;
    if (!present(tc)) return 0;
    if (tc->type != JSON_ARRAY)
        return bad(e, 400, "messages", "messages[%zu].tool_calls must be an array", i);
    if (tc->as.array.count == 0) return 0;
    kipp_chat_tool_call *calls = calloc(tc->as.array.count, sizeof *calls);
    if (!calls) return bad(e, 500, "messages", "out of memory");
    for (size_t k = 0; k < tc->as.array.count; k++) {
        const json_value *c = tc->as.array.items[k];
        const json_value *fn = kipp_json_get_type(c, "function", JSON_OBJECT);
        const json_value *name = kipp_json_get_type(fn, "name", JSON_STRING);
        const json_value *args = kipp_json_get_type(fn, "arguments", JSON_STRING);
        const char *type = kipp_json_get_string(c, "type");
        if (c->type != JSON_OBJECT || !name || !args || (type && strcmp(type, "function"))) {
            free(calls);
            return bad(e, 400, "messages", "messages[%zu].tool_calls[%zu] must be {\"id\", "
                       "\"type\": \"function\", \"function\": {\"name\": string, "
                       "\"arguments\": string}}", i, k);
        }
        calls[k] = (kipp_chat_tool_call){name->as.string.chars, name->as.string.length,
                                         args->as.string.chars, args->as.string.length};
    }
    *out = calls;
    *n = tc->as.array.count;
    return 0;
}

static int parse_messages(kipp_model *m, const json_value *root, const api_features *f,
                          api_request *r, api_error *e) {
    const json_value *msgs = kipp_json_get(root, "messages");
    if (!msgs || msgs->type != JSON_ARRAY || msgs->as.array.count == 0)
        return bad(e, 400, "messages", "'messages' must be a non-empty array");
    bool thinking = true;
    const json_value *kw = kipp_json_get(root, "chat_template_kwargs");
    if (present(kw)) {
        if (kw->type != JSON_OBJECT)
            return bad(e, 400, "chat_template_kwargs", "'chat_template_kwargs' must be an object");
        /* Other keys are template variables this checkpoint's template does
         * not read (clients send one set of kwargs to many servers); like the
         * Jinja template itself, we ignore them. */
        if (get_bool(kw, "enable_thinking", &thinking, e)) return 1;
    }
    size_t n = msgs->as.array.count;
    kipp_chat_message *cm = calloc(n, sizeof *cm);
    if (!cm) return bad(e, 500, "messages", "out of memory");
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        const json_value *msg = msgs->as.array.items[i];
        if (msg->type != JSON_OBJECT) {
            rc = bad(e, 400, "messages", "messages[%zu] must be an object", i);
            break;
        }
        for (size_t k = 0; k < msg->as.object.count && !rc; k++) {
            const char *key = msg->as.object.keys[k];
            if (strcmp(key, "role") && strcmp(key, "content") && strcmp(key, "reasoning_content") &&
                strcmp(key, "name") && strcmp(key, "tool_calls") && strcmp(key, "tool_call_id"))
                rc = bad(e, 400, "messages", "messages[%zu].%s is not supported (supported: role, "
                         "content, name, reasoning_content, tool_calls, tool_call_id)", i, key);
        }
        if (rc) break;
        if (check_message_identity(msg, i, e)) {
            rc = 1;
            break;
        }
        const char *role = kipp_json_get_string(msg, "role");
        /* OpenAI's newer name for the system role (o1 and later); the Qwen3
         * template has one instruction role, so it renders as system. */
        if (role && !strcmp(role, "developer")) role = "system";
        const json_value *c = kipp_json_get(msg, "content");
        const json_value *rs = kipp_json_get(msg, "reasoning_content");
        const json_value *tc = kipp_json_get(msg, "tool_calls");
        bool assistant = role && !strcmp(role, "assistant");
        if (!role) rc = bad(e, 400, "messages", "messages[%zu].role must be a string", i);
        else if (present(tc) && !assistant)
            rc = bad(e, 400, "messages", "messages[%zu].tool_calls is for assistant messages", i);
        else if (!(c && c->type == JSON_STRING) &&
                 !(assistant && present(tc) && (!c || c->type == JSON_NULL)))
            rc = bad(e, 400, "messages", "messages[%zu].content must be a string (content parts "
                     "are not supported; null only with tool_calls)", i);
        else if (present(rs) && rs->type != JSON_STRING)
            rc = bad(e, 400, "messages", "messages[%zu].reasoning_content must be a string", i);
        if (rc) break;
        bool text = c && c->type == JSON_STRING;
        cm[i] = (kipp_chat_message){role, text ? c->as.string.chars : "",
                                    text ? c->as.string.length : 0,
                                    present(rs) ? rs->as.string.chars : NULL,
                                    present(rs) ? rs->as.string.length : 0, NULL, 0};
        kipp_chat_tool_call *calls = NULL;
        rc = parse_tool_calls(tc, i, &calls, &cm[i].n_tool_calls, e);
        cm[i].tool_calls = calls;
    }
    char *text = NULL;
    size_t len = 0;
    kipp_error kerr = {0};
    if (!rc && kipp_chat_render_tools(m, cm, n, f->tools, f->n_tools, true, thinking, &text, &len,
                                      &kerr)) {
        rc = bad(e, 400, kerr.code == KIPP_E_UNSUPPORTED && strstr(kerr.message, "checkpoint")
                 ? "model" : "messages", "%s", kerr.message);
    }
    /* Where the reasoning will be (chat_reasoning_for): for thinking-2507
     * the output is reasoning until "</think>", unless a grammar constrains
     * it; then the open block is closed empty in the prompt first. */
    bool close_think = false;
    if (!rc)
        r->reasoning = chat_reasoning_for(kipp_model_checkpoint(m)->variant, text, len,
                                          f->grammar != NULL, &close_think);
    if (!rc && close_think) {
        char *t = realloc(text, len + sizeof CHAT_CLOSE_THINK);
        if (!t) rc = bad(e, 500, "messages", "out of memory");
        else {
            memcpy(t + len, CHAT_CLOSE_THINK, sizeof CHAT_CLOSE_THINK);
            text = t;
            len += sizeof CHAT_CLOSE_THINK - 1;
        }
    }
    if (!rc) rc = tokenize(m, text, len, r, e, "messages");
    free(text);
    for (size_t i = 0; i < n; i++) free((void *)cm[i].tool_calls);
    free(cm);
    return rc;
}

/* ---- sampling and stops --------------------------------------------------- */

static int parse_logit_bias(const json_value *root, api_request *r, api_error *e) {
    const json_value *lb = kipp_json_get(root, "logit_bias");
    if (!present(lb)) return 0;
    if (lb->type != JSON_OBJECT)
        return bad(e, 400, "logit_bias", "'logit_bias' must be an object of token id -> bias");
    size_t n = lb->as.object.count;
    if (n > MAX_LOGIT_BIAS)
        return bad(e, 400, "logit_bias", "'logit_bias' has more than %d entries", MAX_LOGIT_BIAS);
    if (n == 0) return 0;
    r->bias = calloc(n, sizeof *r->bias);
    if (!r->bias) return bad(e, 500, "logit_bias", "out of memory");
    for (size_t i = 0; i < n; i++) {
        const char *key = lb->as.object.keys[i];
        char *end;
        long id = strtol(key, &end, 10);
        const json_value *v = lb->as.object.values[i];
        /* strtol skips leading white space and takes a sign; a token id
         * is digits alone ("\t5" or "-0" is no id). */
        if (key[0] < '0' || key[0] > '9' || *end || id < 0 || id >= KIPP_VOCAB_SIZE)
            return bad(e, 400, "logit_bias", "logit_bias key '%s' is not a token id", key);
        if (v->type != JSON_NUMBER || !(v->as.number.value >= -100 && v->as.number.value <= 100))
            return bad(e, 400, "logit_bias", "logit_bias values must be numbers in [-100, 100]");
        r->bias[i].token = (int32_t)id;
        /* OpenAI: -100 bans the token. */
        r->bias[i].bias = v->as.number.value <= -100 ? -INFINITY : (float)v->as.number.value;
    }
    r->sampling.logit_bias = r->bias;
    r->sampling.n_logit_bias = n;
    return 0;
}

static int add_stop(api_request *r, const json_value *s, api_error *e) {
    if (s->type != JSON_STRING)
        return bad(e, 400, "stop", "'stop' must be a string or an array of strings");
    if (s->as.string.length == 0 || s->as.string.length > SCHED_MAX_STOP_BYTES ||
        strlen(s->as.string.chars) != s->as.string.length)
        return bad(e, 400, "stop", "stop strings must be 1..%d bytes without NUL",
                   SCHED_MAX_STOP_BYTES);
    if (r->n_stops == SCHED_MAX_STOPS)
        return bad(e, 400, "stop", "at most %d stop strings", SCHED_MAX_STOPS);
    r->stops[r->n_stops] = strdup(s->as.string.chars);
    if (!r->stops[r->n_stops]) return bad(e, 500, "stop", "out of memory");
    r->n_stops++;
    return 0;
}

static int parse_stops(const json_value *root, api_request *r, api_error *e) {
    const json_value *st = kipp_json_get(root, "stop");
    if (!present(st)) return 0;
    if (st->type != JSON_ARRAY) return add_stop(r, st, e);
    for (size_t i = 0; i < st->as.array.count; i++)
        if (add_stop(r, st->as.array.items[i], e)) return 1;
    return 0;
}

/* A fresh seed for a request that names none: OpenAI samples differently
 * each time unless a seed is given. getentropy, else the clock and a
 * counter through splitmix64 (distinct per request either way). */
static uint64_t fresh_seed(void) {
    uint64_t v;
    if (getentropy(&v, sizeof v) == 0) return v;
    static _Atomic uint64_t counter; /* requests are parsed on two threads */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t z = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) +
                 (atomic_fetch_add(&counter, 1) + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* seed: an integer in [0, 2^64 - 1] (the sampler's seed is uint64); absent
 * or null draws a fresh one. */
static int get_seed(const json_value *root, uint64_t *out, api_error *e) {
    const json_value *v = kipp_json_get(root, "seed");
    if (!present(v)) {
        *out = fresh_seed();
        return 0;
    }
    if (v->type != JSON_NUMBER || !v->as.number.is_integer)
        return bad(e, 400, "seed", "'seed' must be an integer in [0, 18446744073709551615]");
    if (!v->as.number.fits_uint64)
        return bad(e, 400, "seed", "'seed' must be in [0, 18446744073709551615] (got %s)",
                   v->as.number.value < 0 ? "a negative number" : "a number above 2^64 - 1");
    *out = v->as.number.uinteger;
    return 0;
}

static int parse_sampling(const json_value *root, api_request *r, api_error *e) {
    kipp_sampling *s = &r->sampling;
    *s = kipp_sampling_default();
    s->temperature = 1.0f; /* the OpenAI default */
    int64_t top_k = 0;
    if (get_float(root, "temperature", 0, 2, &s->temperature, e) ||
        get_float(root, "top_p", 0, 1, &s->top_p, e) ||
        get_int(root, "top_k", 0, KIPP_VOCAB_SIZE, &top_k, e) ||
        get_float(root, "min_p", 0, 1, &s->min_p, e) ||
        get_float(root, "presence_penalty", -2, 2, &s->presence_penalty, e) ||
        get_float(root, "frequency_penalty", -2, 2, &s->frequency_penalty, e) ||
        get_float(root, "repetition_penalty", 0, 10, &s->repetition_penalty, e) ||
        get_float(root, "repeat_penalty", 0, 10, &s->repetition_penalty, e) ||
        get_seed(root, &s->seed, e))
        return 1;
    s->top_k = (int32_t)top_k;
    if (parse_logit_bias(root, r, e)) return 1;
    /* The sampler is the one validator of parameter combinations. */
    kipp_sampler *probe = NULL;
    kipp_error kerr = {0};
    if (kipp_sampler_create(s, &probe, &kerr)) return bad(e, 400, "", "%s", kerr.message);
    kipp_sampler_destroy(probe);
    return 0;
}

/* max_tokens (or max_completion_tokens): 1 .. context - 1; the message
 * states this server's real bound (prompt + max_tokens must also fit,
 * checked once the prompt is tokenized). */
static int get_max_tokens(const json_value *root, const char *key, const api_limits *limits,
                          int64_t *out, api_error *e) {
    const json_value *v = kipp_json_get(root, key);
    if (!present(v)) return 0;
    int64_t hi = limits->context > 1 ? (int64_t)limits->context - 1 : 1;
    if (v->type != JSON_NUMBER || !v->as.number.is_integer || !v->as.number.fits_int64 ||
        v->as.number.integer < 1 || v->as.number.integer > hi)
        return bad(e, 400, key, "'%s' must be an integer from 1 to %lld (this server's context "
                   "is %u positions, shared by the prompt and the completion)", key,
                   (long long)hi, limits->context);
    *out = v->as.number.integer;
    return 0;
}

int api_parse_request(kipp_model *m, api_kind kind, const api_limits *limits, const char *body,
                      size_t length, api_request *r, api_error *e) {
    memset(r, 0, sizeof *r);
    memset(e, 0, sizeof *e);
    r->kind = kind;
    kipp_error kerr = {0};
    json_doc *doc = NULL;
    if (kipp_json_parse(body, length, &doc, &kerr))
        return bad(e, 400, "", "request body is not valid JSON: %s", kerr.message);
    const json_value *root = kipp_json_root(doc);
    int rc = 1;
    if (root->type != JSON_OBJECT) {
        bad(e, 400, "", "request body must be a JSON object");
        goto done;
    }
    if (check_nul_keys(root, e) || check_fields(root, kind, e)) goto done;
    const json_value *model = kipp_json_get(root, "model");
    const char *id = kipp_model_checkpoint(m)->id;
    if (present(model) && (model->type != JSON_STRING || string_has_nul(model) ||
                           strcmp(model->as.string.chars, id))) {
        bad(e, 404, "model", "model '%s%s' is not served here (this server serves '%s')",
            model->type == JSON_STRING ? model->as.string.chars : "?",
            string_has_nul(model) ? "\\u0000..." : "", id);
        goto done;
    }
    int64_t n = 1, max_tokens = -1;
    if (get_int(root, "n", 1, SCHED_MAX_CHOICES, &n, e) ||
        get_max_tokens(root, "max_tokens", limits, &max_tokens, e) ||
        (kind == API_CHAT &&
         get_max_tokens(root, "max_completion_tokens", limits, &max_tokens, e)) ||
        get_bool(root, "stream", &r->stream, e) || parse_sampling(root, r, e) ||
        parse_stops(root, r, e))
        goto done;
    r->top_logprobs = -1;
    if (kind == API_COMPLETIONS) {
        const json_value *lp = kipp_json_get(root, "logprobs");
        int64_t k = -1;
        if (present(lp) && lp->type != JSON_FALSE && get_int(root, "logprobs", 0, 5, &k, e))
            goto done;
        r->top_logprobs = (int32_t)k;
    } else {
        bool want = false;
        int64_t k = -1;
        if (get_bool(root, "logprobs", &want, e) ||
            get_int(root, "top_logprobs", 0, SCHED_MAX_TOP_LOGPROBS, &k, e))
            goto done;
        if (k >= 0 && !want) {
            bad(e, 400, "top_logprobs", "'top_logprobs' requires 'logprobs': true");
            goto done;
        }
        r->top_logprobs = want ? (int32_t)(k < 0 ? 0 : k) : -1;
    }
    const json_value *so = kipp_json_get(root, "stream_options");
    if (present(so)) {
        if (!r->stream) {
            bad(e, 400, "stream_options", "'stream_options' is only allowed with stream: true");
            goto done;
        }
        if (so->type != JSON_OBJECT) {
            bad(e, 400, "stream_options", "'stream_options' must be an object");
            goto done;
        }
        for (size_t i = 0; i < so->as.object.count; i++)
            if (strcmp(so->as.object.keys[i], "include_usage")) {
                bad(e, 400, "stream_options", "unsupported stream_options key '%s'",
                    so->as.object.keys[i]);
                goto done;
            }
        if (get_bool(so, "include_usage", &r->include_usage, e)) goto done;
    }
    api_features feat;
    if (api_parse_features(m, kind, root, &feat, e)) goto done;
    if (kind == API_CHAT ? parse_messages(m, root, &feat, r, e) : parse_prompt(m, root, r, e)) {
        api_features_free(&feat);
        goto done;
    }
    r->grammar = feat.grammar; /* the request owns it now */
    feat.grammar = NULL;
    r->parse_calls = feat.parse_calls;
    api_features_free(&feat);
    if (r->n_prompt == 0) {
        bad(e, 400, kind == API_CHAT ? "messages" : "prompt",
            "the prompt is empty after tokenization (no BOS is added)");
        goto done;
    }
    if (r->n_prompt >= limits->context) {
        bad(e, 400, kind == API_CHAT ? "messages" : "prompt",
            "the prompt has %zu tokens; this server's context is %u positions", r->n_prompt,
            limits->context);
        goto done;
    }
    uint64_t room = limits->context - r->n_prompt;
    if (max_tokens < 0) /* OpenAI: 16 for completions; chat runs to the context */
        max_tokens = kind == API_CHAT ? (int64_t)room : (room < 16 ? (int64_t)room : 16);
    if ((uint64_t)max_tokens > room) {
        bad(e, 400, "max_tokens", "prompt (%zu tokens) + max_tokens (%lld) exceeds this server's "
            "context of %u positions", r->n_prompt, (long long)max_tokens, limits->context);
        goto done;
    }
    r->n = (uint32_t)n;
    r->max_tokens = (uint32_t)max_tokens;
    rc = 0;
done:
    kipp_json_free(doc);
    if (rc) api_request_free(r);
    return rc;
}

void api_request_free(api_request *r) {
    free(r->prompt);
    free(r->bias);
    for (size_t i = 0; i < r->n_stops; i++) free(r->stops[i]);
    kipp_grammar_destroy(r->grammar);
    memset(r, 0, sizeof *r);
}

/* ---- responses ------------------------------------------------------------ */

void api_response_ctx_init(api_response_ctx *ctx, api_kind kind, const kipp_model *m,
                           unsigned long long serial) {
    ctx->kind = kind;
    ctx->created = (long long)time(NULL);
    ctx->model_id = kipp_model_checkpoint(m)->id;
    ctx->synthetic = kipp_model_checkpoint(m)->synthetic;
    ctx->model = m;
    snprintf(ctx->id, sizeof ctx->id, "%s-%llx%06llx", kind == API_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)ctx->created, serial);
}

void api_response_ctx_configure(api_response_ctx *ctx, const api_request *r) {
    if (ctx->kind != API_CHAT || !(r->parse_calls || r->reasoning != CHAT_REASONING_NONE)) return;
    for (uint32_t i = 0; i < r->n && i < SCHED_MAX_CHOICES; i++)
        ctx->split[i] = chat_output_create(r->reasoning, r->parse_calls);
    /* a failed allocation leaves that choice unsplit: plain content */
}

void api_response_ctx_free(api_response_ctx *ctx) {
    for (uint32_t i = 0; i < SCHED_MAX_CHOICES; i++) {
        chat_output_destroy(ctx->split[i]);
        ctx->split[i] = NULL;
    }
    chat_delta_free(&ctx->delta);
}

/* "tool_calls" entries [from, from + n) of a choice; with `index` for
 * stream deltas (the client's stream helper assembles calls by index). */
static void put_calls(json_buf *b, const api_response_ctx *ctx, uint32_t choice,
                      const chat_output *o, size_t from, size_t n, bool index) {
    kipp_json_buf_appendf(b, "\"tool_calls\":[");
    for (size_t k = from; k < from + n; k++) {
        const chat_tool_call *c = chat_output_call(o, k);
        kipp_json_buf_appendf(b, "%s{", k > from ? "," : "");
        if (index) kipp_json_buf_appendf(b, "\"index\":%zu,", k);
        kipp_json_buf_appendf(b, "\"id\":\"call_%s_%u_%zu\",\"type\":\"function\","
                              "\"function\":{\"name\":", ctx->id, choice, k);
        kipp_json_buf_append_string(b, c->name, strlen(c->name));
        kipp_json_buf_appendf(b, ",\"arguments\":");
        kipp_json_buf_append_string(b, c->arguments, strlen(c->arguments));
        kipp_json_buf_appendf(b, "}}");
    }
    kipp_json_buf_appendf(b, "]");
}

/* A delta's fields (reasoning_content, content, tool_calls), comma-led. */
static bool put_delta_fields(json_buf *b, const api_response_ctx *ctx, uint32_t choice,
                             const chat_delta *d) {
    bool any = false;
    if (d->reasoning.length) {
        kipp_json_buf_appendf(b, ",\"reasoning_content\":");
        kipp_json_buf_append_string(b, d->reasoning.data, d->reasoning.length);
        any = true;
    }
    if (d->content.length) {
        kipp_json_buf_appendf(b, ",\"content\":");
        kipp_json_buf_append_string(b, d->content.data, d->content.length);
        any = true;
    }
    if (d->n_calls) {
        kipp_json_buf_appendf(b, ",");
        put_calls(b, ctx, choice, ctx->split[choice], d->first_call, d->n_calls, true);
        any = true;
    }
    return any;
}

void api_format_error(json_buf *b, const api_error *e) {
    kipp_json_buf_appendf(b, "{\"error\":{\"message\":");
    kipp_json_buf_append_string(b, e->message, strlen(e->message));
    kipp_json_buf_appendf(b, ",\"type\":\"%s\",\"param\":", e->type ? e->type : "invalid_request_error");
    if (e->param[0]) kipp_json_buf_append_string(b, e->param, strlen(e->param));
    else kipp_json_buf_appendf(b, "null");
    kipp_json_buf_appendf(b, ",\"code\":null}}");
}

static void put_note(json_buf *b, bool synthetic) {
    kipp_json_buf_appendf(b, ",\"system_fingerprint\":\"kipp-%s%s\"", KIPP_VERSION_STRING,
                     synthetic ? "-synthetic-random-weights" : "");
    if (synthetic) kipp_json_buf_appendf(b, ",\"kipp_note\":\"%s\"", SYNTHETIC_NOTE);
}

void api_format_model(json_buf *b, const kipp_model *m, long long created) {
    const kipp_checkpoint *ck = kipp_model_checkpoint(m);
    kipp_json_buf_appendf(b, "{\"id\":");
    kipp_json_buf_append_string(b, ck->id, strlen(ck->id));
    kipp_json_buf_appendf(b, ",\"object\":\"model\",\"created\":%lld,\"owned_by\":\"kipp\","
                     "\"variant\":\"%s\",\"context_length\":%u,\"quantization\":\"%s\","
                     "\"output_head\":\"%s\",\"chat\":%s,\"synthetic\":%s",
                     created, kipp_variant_name(ck->variant), ck->context,
                     kipp_model_quant_scheme(m), kipp_model_head_quant(m),
                     ck->variant == KIPP_VARIANT_INSTRUCT || ck->variant == KIPP_VARIANT_THINKING_2507
                         ? "true" : "false",
                     ck->synthetic ? "true" : "false");
    if (ck->synthetic) kipp_json_buf_appendf(b, ",\"note\":\"%s\"", SYNTHETIC_NOTE);
    kipp_json_buf_appendf(b, "}");
}

void api_format_models(json_buf *b, const kipp_model *m, long long created) {
    kipp_json_buf_appendf(b, "{\"object\":\"list\",\"data\":[");
    api_format_model(b, m, created);
    kipp_json_buf_appendf(b, "]}");
}

static void put_head(json_buf *b, const api_response_ctx *ctx, const char *object) {
    kipp_json_buf_appendf(b, "{\"id\":\"%s\",\"object\":\"%s\",\"created\":%lld,\"model\":", ctx->id,
                     object, ctx->created);
    kipp_json_buf_append_string(b, ctx->model_id, strlen(ctx->model_id));
    put_note(b, ctx->synthetic);
}

static void put_usage(json_buf *b, const sched_job_stats *st) {
    kipp_json_buf_appendf(b, "\"usage\":{\"prompt_tokens\":%u,\"completion_tokens\":%u,"
                     "\"total_tokens\":%u}",
                     st->prompt_tokens, st->completion_tokens,
                     st->prompt_tokens + st->completion_tokens);
}

/* llama.cpp's field names; prompt_n counts the prompt once even when n > 1
 * choices each evaluated it. */
static void put_timings(json_buf *b, const sched_job_stats *st) {
    double pms = st->prompt_seconds * 1e3, dms = st->decode_seconds * 1e3;
    uint32_t dn = st->completion_tokens;
    kipp_json_buf_appendf(b, "\"timings\":{\"prompt_n\":%u,\"prompt_ms\":%.3f,"
                     "\"prompt_per_token_ms\":%.3f,\"prompt_per_second\":%.3f,"
                     "\"predicted_n\":%u,\"predicted_ms\":%.3f,\"predicted_per_token_ms\":%.3f,"
                     "\"predicted_per_second\":%.3f,\"queue_ms\":%.3f}",
                     st->prompt_tokens, pms, st->prompt_tokens ? pms / st->prompt_tokens : 0.0,
                     pms > 0 ? st->prompt_tokens / (pms / 1e3) : 0.0, dn, dms,
                     dn ? dms / dn : 0.0, dms > 0 ? dn / (dms / 1e3) : 0.0,
                     st->queue_seconds * 1e3);
}

/* A token's bytes (possibly a partial UTF-8 sequence); "" if it has none. */
static void put_token(json_buf *b, const kipp_model *m, int32_t id, bool with_bytes,
                      size_t *length) {
    char *t = NULL;
    size_t n = 0;
    kipp_error err;
    if (kipp_detokenize(m, &id, 1, &t, &n, &err) != KIPP_OK) n = 0;
    kipp_json_buf_append_string(b, t ? t : "", n);
    if (with_bytes) {
        kipp_json_buf_appendf(b, ",\"bytes\":[");
        for (size_t i = 0; i < n; i++) kipp_json_buf_appendf(b, "%s%u", i ? "," : "", (unsigned char)t[i]);
        kipp_json_buf_appendf(b, "]");
    }
    if (length) *length = n;
    free(t);
}

static void put_lp(json_buf *b, double v) {
    /* %.9g: 9 significant digits reproduce any float exactly (log-probs
     * are floats), so clients can compare them bit for bit. */
    if (isfinite(v)) kipp_json_buf_appendf(b, "%.9g", v);
    else kipp_json_buf_appendf(b, "-9999.0"); /* JSON has no -Infinity; OpenAI uses -9999 */
}

/* The value of a choice's "logprobs" field. */
static void put_logprobs(json_buf *b, const api_response_ctx *ctx, const api_logprobs *lp) {
    if (!lp || !lp->infos) {
        kipp_json_buf_appendf(b, "null");
        return;
    }
    const kipp_model *m = ctx->model;
    if (ctx->kind == API_CHAT) {
        kipp_json_buf_appendf(b, "{\"content\":[");
        for (size_t i = 0; i < lp->n; i++) {
            const sched_token_info *t = &lp->infos[i];
            kipp_json_buf_appendf(b, "%s{\"token\":", i ? "," : "");
            put_token(b, m, t->id, true, NULL);
            kipp_json_buf_appendf(b, ",\"logprob\":");
            put_lp(b, t->logprob);
            kipp_json_buf_appendf(b, ",\"top_logprobs\":[");
            for (uint32_t k = 0; k < t->n_top; k++) {
                kipp_json_buf_appendf(b, "%s{\"token\":", k ? "," : "");
                put_token(b, m, t->top_id[k], true, NULL);
                kipp_json_buf_appendf(b, ",\"logprob\":");
                put_lp(b, t->top_logprob[k]);
                kipp_json_buf_appendf(b, "}");
            }
            kipp_json_buf_appendf(b, "]}");
        }
        kipp_json_buf_appendf(b, "]}");
        return;
    }
    /* legacy: parallel arrays; text_offset counts characters (code points,
     * as OpenAI's offsets into a Python str do) of the generated text: a
     * token adds the UTF-8 lead bytes it carries, so a character split over
     * two tokens is counted once, in the token that starts it. */
    kipp_json_buf_appendf(b, "{\"tokens\":[");
    size_t offsets_start = lp->text_offset ? *lp->text_offset : 0, off = offsets_start;
    for (size_t i = 0; i < lp->n; i++) {
        if (i) kipp_json_buf_appendf(b, ",");
        put_token(b, m, lp->infos[i].id, false, NULL);
    }
    kipp_json_buf_appendf(b, "],\"token_logprobs\":[");
    for (size_t i = 0; i < lp->n; i++) {
        if (i) kipp_json_buf_appendf(b, ",");
        put_lp(b, lp->infos[i].logprob);
    }
    kipp_json_buf_appendf(b, "],\"top_logprobs\":[");
    for (size_t i = 0; i < lp->n; i++) {
        kipp_json_buf_appendf(b, "%s{", i ? "," : "");
        for (uint32_t k = 0; k < lp->infos[i].n_top; k++) {
            if (k) kipp_json_buf_appendf(b, ",");
            put_token(b, m, lp->infos[i].top_id[k], false, NULL);
            kipp_json_buf_appendf(b, ":");
            put_lp(b, lp->infos[i].top_logprob[k]);
        }
        kipp_json_buf_appendf(b, "}");
    }
    kipp_json_buf_appendf(b, "],\"text_offset\":[");
    for (size_t i = 0; i < lp->n; i++) {
        kipp_json_buf_appendf(b, "%s%zu", i ? "," : "", off);
        char *t = NULL;
        size_t n = 0;
        kipp_error err;
        if (kipp_detokenize(m, &lp->infos[i].id, 1, &t, &n, &err) == KIPP_OK)
            for (size_t k = 0; k < n; k++) off += ((unsigned char)t[k] & 0xC0) != 0x80;
        free(t);
    }
    kipp_json_buf_appendf(b, "]}");
    if (lp->text_offset) *lp->text_offset = off;
}

void api_format_response(json_buf *b, const api_response_ctx *ctx, char *const *texts,
                         const size_t *lengths, const char *const *finish,
                         const api_logprobs *lp, uint32_t n, const sched_job_stats *st) {
    bool chat = ctx->kind == API_CHAT;
    put_head(b, ctx, chat ? "chat.completion" : "text_completion");
    kipp_json_buf_appendf(b, ",\"choices\":[");
    for (uint32_t i = 0; i < n; i++) {
        kipp_json_buf_appendf(b, "%s{\"index\":%u,", i ? "," : "", i);
        const char *reason = finish[i];
        if (chat && ctx->split[i]) {
            /* the whole text through the same splitter a stream uses */
            api_response_ctx *mctx = (api_response_ctx *)ctx;
            chat_output *o = ctx->split[i];
            chat_delta *d = &mctx->delta;
            chat_delta_reset(d);
            chat_output_push(o, texts[i] ? texts[i] : "", lengths[i], d);
            chat_output_finish(o, d);
            size_t calls = chat_output_n_calls(o);
            kipp_json_buf_appendf(b, "\"message\":{\"role\":\"assistant\",\"content\":");
            if (calls && d->content.length == 0) kipp_json_buf_appendf(b, "null");
            else kipp_json_buf_append_string(b, d->content.data ? d->content.data : "",
                                             d->content.length);
            if (chat_output_had_reasoning(o)) {
                kipp_json_buf_appendf(b, ",\"reasoning_content\":");
                kipp_json_buf_append_string(b, d->reasoning.data ? d->reasoning.data : "",
                                            d->reasoning.length);
            }
            if (calls) {
                kipp_json_buf_appendf(b, ",");
                put_calls(b, ctx, i, o, 0, calls, false);
                if (!strcmp(reason, "stop")) reason = "tool_calls";
            }
            kipp_json_buf_appendf(b, "},");
        } else if (chat) {
            kipp_json_buf_appendf(b, "\"message\":{\"role\":\"assistant\",\"content\":");
            kipp_json_buf_append_string(b, texts[i] ? texts[i] : "", lengths[i]);
            kipp_json_buf_appendf(b, "},");
        } else {
            kipp_json_buf_appendf(b, "\"text\":");
            kipp_json_buf_append_string(b, texts[i] ? texts[i] : "", lengths[i]);
            kipp_json_buf_appendf(b, ",");
        }
        kipp_json_buf_appendf(b, "\"logprobs\":");
        put_logprobs(b, ctx, lp ? &lp[i] : NULL);
        kipp_json_buf_appendf(b, ",\"finish_reason\":\"%s\"}", reason);
    }
    kipp_json_buf_appendf(b, "],");
    put_usage(b, st);
    kipp_json_buf_appendf(b, ",");
    put_timings(b, st);
    kipp_json_buf_appendf(b, "}");
}

static void chunk_open(json_buf *b, const api_response_ctx *ctx, uint32_t choice) {
    bool chat = ctx->kind == API_CHAT;
    put_head(b, ctx, chat ? "chat.completion.chunk" : "text_completion");
    kipp_json_buf_appendf(b, ",\"choices\":[{\"index\":%u,", choice);
}

void api_format_chunk_start(json_buf *b, const api_response_ctx *ctx, uint32_t choice) {
    chunk_open(b, ctx, choice);
    kipp_json_buf_appendf(b, "\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,"
                     "\"finish_reason\":null}]}");
}

void api_format_chunk_text(json_buf *b, const api_response_ctx *ctx, uint32_t choice,
                           const char *text, size_t length, const api_logprobs *lp) {
    if (ctx->kind == API_CHAT && ctx->split[choice]) {
        api_response_ctx *mctx = (api_response_ctx *)ctx;
        chat_delta *d = &mctx->delta;
        chat_delta_reset(d);
        chat_output_push(ctx->split[choice], text, length, d);
        size_t mark = b->length;
        chunk_open(b, ctx, choice);
        kipp_json_buf_appendf(b, "\"delta\":{");
        size_t fields = b->length;
        if (!put_delta_fields(b, ctx, choice, d)) {
            b->length = mark; /* held back: nothing to send */
            return;
        }
        b->data[fields] = ' '; /* the first field's leading comma */
        kipp_json_buf_appendf(b, "},\"logprobs\":");
        put_logprobs(b, ctx, lp);
        kipp_json_buf_appendf(b, ",\"finish_reason\":null}]}");
        return;
    }
    chunk_open(b, ctx, choice);
    kipp_json_buf_appendf(b, ctx->kind == API_CHAT ? "\"delta\":{\"content\":" : "\"text\":");
    kipp_json_buf_append_string(b, text, length);
    kipp_json_buf_appendf(b, "%s,\"logprobs\":", ctx->kind == API_CHAT ? "}" : "");
    put_logprobs(b, ctx, lp);
    kipp_json_buf_appendf(b, ",\"finish_reason\":null}]}");
}

void api_format_chunk_finish(json_buf *b, const api_response_ctx *ctx, uint32_t choice,
                             const char *finish_reason, const api_logprobs *lp) {
    if (ctx->kind == API_CHAT && ctx->split[choice]) {
        /* what the splitter still held rides in the final chunk's delta */
        api_response_ctx *mctx = (api_response_ctx *)ctx;
        chat_delta *d = &mctx->delta;
        chat_delta_reset(d);
        chat_output_finish(ctx->split[choice], d);
        chunk_open(b, ctx, choice);
        kipp_json_buf_appendf(b, "\"delta\":{");
        size_t fields = b->length;
        if (put_delta_fields(b, ctx, choice, d)) b->data[fields] = ' ';
        kipp_json_buf_appendf(b, "},\"logprobs\":");
        put_logprobs(b, ctx, lp);
        if (chat_output_n_calls(ctx->split[choice]) && !strcmp(finish_reason, "stop"))
            finish_reason = "tool_calls";
        kipp_json_buf_appendf(b, ",\"finish_reason\":\"%s\"}]}", finish_reason);
        return;
    }
    chunk_open(b, ctx, choice);
    kipp_json_buf_appendf(b, "%s,\"logprobs\":",
                     ctx->kind == API_CHAT ? "\"delta\":{}" : "\"text\":\"\"");
    put_logprobs(b, ctx, lp);
    kipp_json_buf_appendf(b, ",\"finish_reason\":\"%s\"}]}", finish_reason);
}

/* The last chunk, sent only for stream_options.include_usage (as OpenAI
 * does: choices is empty); timings (llama.cpp) ride along in it. */
void api_format_chunk_usage(json_buf *b, const api_response_ctx *ctx, const sched_job_stats *st) {
    bool chat = ctx->kind == API_CHAT;
    put_head(b, ctx, chat ? "chat.completion.chunk" : "text_completion");
    kipp_json_buf_appendf(b, ",\"choices\":[],");
    put_usage(b, st);
    kipp_json_buf_appendf(b, ",");
    put_timings(b, st);
    kipp_json_buf_appendf(b, "}");
}
