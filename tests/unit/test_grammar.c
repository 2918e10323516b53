/* Constrained decoding without a model's weights: random walks through the
 * token mask of the real Qwen3 vocabulary (the instruct fixture opened with
 * no backend). At every step the mask must leave at least one token; every
 * token it allows must be accepted; a walk must end in a complete document
 * that our JSON parser accepts, within a bounded number of tokens. Schema
 * validity of generated documents is checked by an independent validator
 * (ajv) in tests/node/structured_output.mjs; here we check the automaton's
 * own invariants and the refusals. The tool-call grammar (1..max calls, as
 * tool_choice required/named with parallel_tool_calls) is checked on exact
 * texts and on random walks whose calls are parsed back. */
#include <math.h>
#include <stdint.h>

#include "core/common.h"
#include "core/grammar_internal.h"
#include "core/json.h"
#include "core/model_internal.h"
#include "core/tokenizer_internal.h"
#include "kipp.h"
#include "test_util.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next_rand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static float logits[KIPP_VOCAB_SIZE];

static const char *const SCHEMAS[] = {
    NULL, /* json_object */
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":12},"
    "\"age\":{\"type\":\"integer\"}},\"required\":[\"name\",\"age\"],\"additionalProperties\":false}",
    "{\"type\":\"array\",\"items\":{\"type\":\"number\"},\"minItems\":2,\"maxItems\":4}",
    "{\"enum\":[\"a\",\"ab\",1,12,null,true,{\"k\":[1,2]}]}",
    "{\"anyOf\":[{\"type\":\"string\",\"minLength\":3,\"maxLength\":5},{\"type\":\"null\"},"
    "{\"type\":\"object\",\"properties\":{\"x\":{\"const\":\"y\"}},\"required\":[\"x\"]}]}",
    "{\"$defs\":{\"pt\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"number\"},"
    "\"y\":{\"type\":\"number\"}},\"required\":[\"x\",\"y\"],\"additionalProperties\":false}},"
    "\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/pt\"},\"maxItems\":3}",
    "{\"type\":[\"integer\",\"boolean\"]}",
    "{\"type\":\"string\",\"minLength\":300,\"maxLength\":301}",
    "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"object\",\"properties\":{\"b\":{"
    "\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":3},\"maxItems\":2}},"
    "\"required\":[\"b\"]}},\"required\":[\"a\"]}",
    "{}",
};

static void walk_schema(const kipp_model *m, const char *schema, int seed) {
    kipp_error err = {0};
    kipp_grammar *g = NULL;
    int rc = kipp_grammar_from_json_schema(m, schema, schema ? strlen(schema) : 0, &g, &err);
    CHECKF(rc == 0, "%s: %s", schema ? schema : "json_object", err.message);
    if (rc) return;
    kipp_grammar_state *st = NULL;
    CHECK(kipp_grammar_state_create(g, &st, &err) == 0);
    const kipp_checkpoint *ck = kipp_model_checkpoint(m);
    int32_t ids[4096];
    size_t n = 0;
    bool ended = false;
    rng = 0x9E3779B97F4A7C15ull + (uint64_t)seed * 7919u;
    while (n < 4096 && !ended) {
        for (size_t i = 0; i < KIPP_VOCAB_SIZE; i++) logits[i] = 0;
        size_t allowed = kipp_grammar_mask(st, logits);
        CHECKF(allowed > 0, "%s: empty mask after %zu tokens", schema ? schema : "-", n);
        if (!allowed) break;
        /* pick the k-th allowed token; every fourth step prefer a stop token
         * or a short token so walks end (uniform walks linger in strings) */
        size_t k = next_rand() % allowed, seen = 0;
        int32_t pick = -1;
        for (size_t i = 0; i < KIPP_VOCAB_SIZE && pick < 0; i++)
            if (logits[i] != -INFINITY && seen++ == k) pick = (int32_t)i;
        if (n % 4 == 3)
            for (uint32_t s = 0; s < ck->n_stops; s++)
                if (logits[ck->stops[s]] != -INFINITY) pick = ck->stops[s];
        CHECK(pick >= 0 && kipp_grammar_allows(st, pick));
        for (uint32_t s = 0; s < ck->n_stops; s++) ended |= pick == ck->stops[s];
        if (ended) {
            CHECK(kipp_grammar_complete(st));
            break;
        }
        rc = kipp_grammar_accept(st, pick, &err);
        CHECKF(rc == 0, "accept of an allowed token failed: %s", err.message);
        if (rc) break;
        ids[n++] = pick;
    }
    CHECKF(ended, "%s: no end after %zu tokens", schema ? schema : "-", n);
    char *text = NULL;
    size_t len = 0;
    CHECK(kipp_detokenize(m, ids, n, &text, &len, &err) == 0);
    json_doc *doc = NULL;
    rc = kipp_json_parse(text, len, &doc, &err);
    CHECKF(rc == 0, "not JSON (%s): %.200s", err.message, text);
    if (!rc && !schema) CHECK(kipp_json_root(doc)->type == JSON_OBJECT);
    kipp_json_free(doc);
    free(text);
    kipp_grammar_state_destroy(st);
    kipp_grammar_destroy(g);
}

static void test_refusals(const kipp_model *m) {
    static const struct { const char *schema, *word; } CASES[] = {
        {"{\"type\":\"string\",\"pattern\":\"^a\"}", "'pattern'"},
        {"{\"type\":\"string\",\"format\":\"date\"}", "'format'"},
        {"{\"type\":\"integer\",\"minimum\":3}", "'minimum'"},
        {"{\"oneOf\":[{\"type\":\"string\"}]}", "'oneOf'"},
        {"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}}", "additionalProperties"},
        {"{\"$defs\":{\"n\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/n\"}}},"
         "\"$ref\":\"#/$defs/n\"}", "recursive"},
        {"{\"type\":\"array\",\"items\":[{\"type\":\"string\"}]}", "tuple"},
        {"{\"type\":\"string\",\"minLength\":5,\"maxLength\":2}", "minLength"},
        {"{\"enum\":[]}", "enum"},
        {"{\"type\":\"object\",\"properties\":{},\"required\":[\"a\"],"
         "\"additionalProperties\":false}", "required"},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
        kipp_error err = {0};
        kipp_grammar *g = NULL;
        int rc = kipp_grammar_from_json_schema(m, CASES[i].schema, strlen(CASES[i].schema), &g, &err);
        CHECKF(rc == KIPP_E_UNSUPPORTED && strstr(err.message, CASES[i].word),
               "%s -> %d %s", CASES[i].schema, rc, err.message);
        kipp_grammar_destroy(g);
    }
}

/* The grammar of {"enum":["on","off"]}, a fresh state of it, and the
 * tokens of the document "off": what test_exact and
 * test_refused_token_keeps_state start from. */
typedef struct on_off {
    kipp_grammar *g;
    kipp_grammar_state *st;
    int32_t *ids;
    size_t n;
} on_off;

static void on_off_close(on_off *d) {
    kipp_grammar_state_destroy(d->st);
    kipp_grammar_destroy(d->g);
    free(d->ids);
    memset(d, 0, sizeof *d);
}

/* False, with nothing left to close, after a failed check. */
static bool on_off_open(const kipp_model *m, on_off *d) {
    kipp_error err = {0};
    const char *s = "{\"enum\":[\"on\",\"off\"]}";
    memset(d, 0, sizeof *d);
    CHECK(kipp_grammar_from_json_schema(m, s, strlen(s), &d->g, &err) == 0);
    CHECK(d->g && kipp_grammar_state_create(d->g, &d->st, &err) == 0);
    CHECK(kipp_tokenize(m, "\"off\"", 5, &d->ids, &d->n, &err) == 0);
    if (d->st && d->ids) return true;
    on_off_close(d);
    return false;
}

/* Compact output: a space never continues a document; a stop token is
 * refused before the document is complete and allowed after. */
static void test_exact(const kipp_model *m) {
    kipp_error err = {0};
    on_off d;
    if (!on_off_open(m, &d)) return;
    kipp_grammar_state *st = d.st;
    const kipp_checkpoint *ck = kipp_model_checkpoint(m);
    int32_t space = -1;
    int32_t *sp = NULL;
    size_t sn = 0;
    CHECK(kipp_tokenize(m, " ", 1, &sp, &sn, &err) == 0 && sn == 1);
    space = sp[0];
    free(sp);
    CHECK(!kipp_grammar_allows(st, space));
    CHECK(!kipp_grammar_allows(st, ck->eos));
    for (size_t i = 0; i < d.n; i++) CHECK(kipp_grammar_accept(st, d.ids[i], &err) == 0);
    CHECK(kipp_grammar_complete(st));
    CHECK(kipp_grammar_allows(st, ck->eos));
    for (size_t i = 0; i < KIPP_VOCAB_SIZE; i++) logits[i] = 0;
    size_t allowed = kipp_grammar_mask(st, logits);
    CHECKF(allowed == ck->n_stops, "complete document: %zu allowed, want the %u stop tokens",
           allowed, ck->n_stops);
    on_off_close(&d);
}

/* A refused token leaves the state unchanged (kipp.h), also when its first
 * bytes fit and a later one does not (found by tests/fuzz/fuzz_schema.c:
 * accept used to keep the bytes that fitted). */
static void test_refused_token_keeps_state(const kipp_model *m) {
    kipp_error err = {0};
    on_off d;
    if (!on_off_open(m, &d)) return;
    kipp_grammar_state *st = d.st;
    /* a token such as "\"," or "\":": its '"' opens either value, its
     * second byte continues neither */
    const kipp_tokenizer *tok = m->tokenizer;
    int32_t bad = -1;
    for (size_t id = 0; id < tok->n_tokens && bad < 0; id++) {
        size_t len = 0;
        const uint8_t *b = kipp_tokenizer_token_bytes(tok, (int32_t)id, &len);
        if (b && len >= 2 && b[0] == '"' && b[1] != 'o' && tok->types[id] == KIPP_TOKEN_NORMAL)
            bad = (int32_t)id;
    }
    CHECK(bad >= 0);
    CHECK(!kipp_grammar_allows(st, bad));
    CHECK(kipp_grammar_accept(st, bad, &err) == KIPP_E_ARGUMENT);
    for (size_t i = 0; i < d.n; i++)
        CHECKF(kipp_grammar_accept(st, d.ids[i], &err) == 0, "after a refused token: %s",
               err.message);
    CHECK(kipp_grammar_complete(st));
    on_off_close(&d);
}

/* ---- tool calls ----------------------------------------------------------- */

static const char WEATHER_PARAMS[] =
    "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"maxLength\":10},"
    "\"unit\":{\"enum\":[\"c\",\"f\"]}},\"required\":[\"city\"],\"additionalProperties\":false}";

/* Builds the grammar for get_weather (schema above) and ping (any object). */
static kipp_grammar *tool_grammar(const kipp_model *m, uint32_t max_calls, json_doc **doc) {
    kipp_error err = {0};
    CHECK(kipp_json_parse(WEATHER_PARAMS, strlen(WEATHER_PARAMS), doc, &err) == 0);
    const char *names[2] = {"get_weather", "ping"};
    const json_value *params[2] = {kipp_json_root(*doc), NULL};
    kipp_grammar *g = NULL;
    int rc = kipp_grammar_tool_call(m, names, params, 2, max_calls, &g, &err);
    CHECKF(rc == 0, "tool grammar (%u calls): %s", max_calls, err.message);
    return g;
}

/* Feeds text token by token: -1 when a token is refused, else 1 when the
 * document may end there, 0 when it may not. */
static int feed_text(const kipp_model *m, kipp_grammar *g, const char *text) {
    kipp_error err = {0};
    kipp_grammar_state *st = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK(kipp_grammar_state_create(g, &st, &err) == 0);
    CHECK(kipp_tokenize(m, text, strlen(text), &ids, &n, &err) == 0);
    int r = 1;
    for (size_t i = 0; i < n && st; i++) {
        if (!kipp_grammar_allows(st, ids[i]) || kipp_grammar_accept(st, ids[i], &err)) {
            r = -1;
            break;
        }
    }
    if (r == 1 && st) r = kipp_grammar_complete(st) && kipp_grammar_allows(st, kipp_model_checkpoint(m)->eos);
    free(ids);
    kipp_grammar_state_destroy(st);
    return r;
}

#define W1 "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\"}}\n</tool_call>"
#define W2 "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Rome\",\"unit\":\"c\"}}\n</tool_call>"
#define P1 "<tool_call>\n{\"name\": \"ping\", \"arguments\": {\"x\":[1,true]}}\n</tool_call>"

static void test_tool_exact(const kipp_model *m) {
    static const struct { const char *text; int one, three; } CASES[] = {
        {W1, 1, 1},
        {W1 "\n" P1, -1, 1},             /* parallel: two calls, "\n" between */
        {W1 "\n" P1 "\n" W2, -1, 1},
        {W1 "\n" P1 "\n" W2 "\n" W1, -1, -1}, /* more than max */
        {W1 P1, -1, -1},                  /* no separator */
        {W1 "\n\n" P1, -1, -1},
        {W1 "\n", -1, 0},                 /* a separator promises another call */
        {W1 "\n<tool_call>\n{\"name\": \"", -1, 0},
        {W1 "\n" "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":7}}\n</tool_call>",
         -1, -1},                         /* second call's arguments break its schema */
        {W1 "\n" "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"unit\":\"c\"}}\n</tool_call>",
         -1, -1},                         /* ... a required property missing */
        {W1 "\n" "<tool_call>\n{\"name\": \"other\", \"arguments\": {}}\n</tool_call>", -1, -1},
        {W1 " ", -1, -1},
        {"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\"}}", 0, 0},
    };
    json_doc *d1 = NULL, *d3 = NULL;
    kipp_grammar *one = tool_grammar(m, 1, &d1), *three = tool_grammar(m, 3, &d3);
    for (size_t i = 0; one && three && i < sizeof CASES / sizeof *CASES; i++) {
        int a = feed_text(m, one, CASES[i].text), b = feed_text(m, three, CASES[i].text);
        CHECKF(a == CASES[i].one, "tool case %zu, 1 call: %d, want %d", i, a, CASES[i].one);
        CHECKF(b == CASES[i].three, "tool case %zu, 3 calls: %d, want %d", i, b, CASES[i].three);
    }
    /* bounds */
    kipp_error err = {0};
    kipp_grammar *g = NULL;
    const char *names[1] = {"f"};
    const json_value *params[1] = {NULL};
    CHECK(kipp_grammar_tool_call(m, names, params, 1, 0, &g, &err) == KIPP_E_ARGUMENT);
    CHECK(kipp_grammar_tool_call(m, names, params, 1, GRAM_MAX_TOOL_CALLS + 1, &g, &err) ==
          KIPP_E_ARGUMENT);
    CHECK(g == NULL);
    kipp_grammar_destroy(one);
    kipp_grammar_destroy(three);
    kipp_json_free(d1);
    kipp_json_free(d3);
}

/* Random walks through the parallel grammar: every walk ends, and its text
 * is 1..max calls, each a call of a known function whose arguments parse. */
static void test_tool_walks(const kipp_model *m) {
    json_doc *d = NULL;
    kipp_grammar *g = tool_grammar(m, GRAM_MAX_TOOL_CALLS, &d);
    if (!g) return;
    const kipp_checkpoint *ck = kipp_model_checkpoint(m);
    size_t max_seen = 0;
    for (int seed = 0; seed < 24; seed++) {
        kipp_error err = {0};
        kipp_grammar_state *st = NULL;
        CHECK(kipp_grammar_state_create(g, &st, &err) == 0);
        if (!st) break;
        rng = 0xD1B54A32D192ED03ull + (uint64_t)seed * 104729u;
        int32_t ids[4096];
        size_t n = 0;
        bool ended = false;
        while (n < 4096 && !ended) {
            for (size_t i = 0; i < KIPP_VOCAB_SIZE; i++) logits[i] = 0;
            size_t allowed = kipp_grammar_mask(st, logits);
            CHECKF(allowed > 0, "tool walk %d: empty mask after %zu tokens", seed, n);
            if (!allowed) break;
            size_t k = next_rand() % allowed, seen = 0;
            int32_t pick = -1;
            for (size_t i = 0; i < KIPP_VOCAB_SIZE && pick < 0; i++)
                if (logits[i] != -INFINITY && seen++ == k) pick = (int32_t)i;
            /* a stop is allowed only between calls: take it one time in
             * two or so, else go on to another call, so that walks of
             * several calls happen */
            bool stop_ok = logits[ck->eos] != -INFINITY;
            if (stop_ok && (n % 4 == 3 || next_rand() % 3 == 0)) {
                pick = ck->eos;
            } else if (stop_ok) {
                pick = -1;
                for (size_t i = 0; i < KIPP_VOCAB_SIZE && pick < 0; i++) {
                    bool stop = false;
                    for (uint32_t q = 0; q < ck->n_stops; q++) stop |= (int32_t)i == ck->stops[q];
                    if (logits[i] != -INFINITY && !stop) pick = (int32_t)i;
                }
                if (pick < 0) pick = ck->eos;
            }
            for (uint32_t s = 0; s < ck->n_stops; s++) ended |= pick == ck->stops[s];
            if (ended) {
                CHECK(kipp_grammar_complete(st));
                break;
            }
            CHECK(kipp_grammar_accept(st, pick, &err) == 0);
            ids[n++] = pick;
        }
        CHECKF(ended, "tool walk %d: no end after %zu tokens", seed, n);
        char *text = NULL;
        size_t len = 0;
        CHECK(kipp_detokenize(m, ids, n, &text, &len, &err) == 0);
        /* parse back: calls separated by exactly "\n" */
        size_t calls = 0, at = 0;
        static const char OPEN[] = "<tool_call>\n", CLOSE[] = "\n</tool_call>";
        bool ok = text != NULL;
        while (ok && at < len) {
            if (calls && !(text[at] == '\n' && at++ < len)) ok = false;
            if (!ok || len - at < strlen(OPEN) || memcmp(text + at, OPEN, strlen(OPEN))) {
                ok = false;
                break;
            }
            at += strlen(OPEN);
            const char *end = strstr(text + at, CLOSE);
            if (!end) {
                ok = false;
                break;
            }
            json_doc *doc = NULL;
            if (kipp_json_parse(text + at, (size_t)(end - (text + at)), &doc, &err)) {
                ok = false;
                break;
            }
            const char *name = kipp_json_get_string(kipp_json_root(doc), "name");
            const json_value *args = kipp_json_get_type(kipp_json_root(doc), "arguments",
                                                        JSON_OBJECT);
            ok = name && args && (!strcmp(name, "get_weather") || !strcmp(name, "ping"));
            if (ok && !strcmp(name, "get_weather"))
                ok = kipp_json_get_type(args, "city", JSON_STRING) != NULL;
            kipp_json_free(doc);
            at = (size_t)(end - text) + strlen(CLOSE);
            calls++;
        }
        CHECKF(ok && calls >= 1 && calls <= GRAM_MAX_TOOL_CALLS, "tool walk %d: %zu calls in %.300s",
               seed, calls, text ? text : "");
        if (calls > max_seen) max_seen = calls;
        free(text);
        kipp_grammar_state_destroy(st);
    }
    /* the walks must reach the parallel case, or they prove nothing about it */
    CHECKF(max_seen >= 3, "tool walks made at most %zu calls", max_seen);
    fprintf(stderr, "test_grammar: tool walks made up to %zu calls\n", max_seen);
    kipp_grammar_destroy(g);
    kipp_json_free(d);
}

int main(void) {
    char path[512];
    kipp_error err = {0};
    kipp_model_options mo = {.backend = KIPP_BACKEND_NONE};
    kipp_model *m = NULL;
    snprintf(path, sizeof path, "%s/models/synthetic-tiny-instruct.gguf", test_build_dir());
    CHECKF(kipp_model_open(path, &mo, &m, &err) == 0, "%s", err.message);
    if (!m) return test_finish("test_grammar");
    for (size_t i = 0; i < sizeof SCHEMAS / sizeof *SCHEMAS; i++)
        for (int seed = 0; seed < 3; seed++) walk_schema(m, SCHEMAS[i], seed);
    test_refusals(m);
    test_exact(m);
    test_refused_token_keeps_state(m);
    test_tool_exact(m);
    test_tool_walks(m);
    kipp_model_close(m);
    return test_finish("test_grammar");
}
