/* Constrained decoding without a model's weights: random walks through the
 * token mask of the real Qwen3 vocabulary (the instruct fixture opened with
 * no backend). At every step the mask must leave at least one token; every
 * token it allows must be accepted; a walk must end in a complete document
 * that our JSON parser accepts, within a bounded number of tokens. Schema
 * validity of generated documents is checked by an independent validator
 * (ajv) in tests/node/structured_output.mjs; here we check the automaton's
 * own invariants and the refusals. */
#include <math.h>
#include <stdint.h>

#include "core/common.h"
#include "core/json.h"
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

/* Compact output: a space never continues a document; a stop token is
 * refused before the document is complete and allowed after. */
static void test_exact(const kipp_model *m) {
    kipp_error err = {0};
    kipp_grammar *g = NULL;
    const char *s = "{\"enum\":[\"on\",\"off\"]}";
    CHECK(kipp_grammar_from_json_schema(m, s, strlen(s), &g, &err) == 0);
    kipp_grammar_state *st = NULL;
    CHECK(g && kipp_grammar_state_create(g, &st, &err) == 0);
    if (!st) return;
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK(kipp_tokenize(m, "\"off\"", 5, &ids, &n, &err) == 0);
    const kipp_checkpoint *ck = kipp_model_checkpoint(m);
    int32_t space = -1;
    int32_t *sp = NULL;
    size_t sn = 0;
    CHECK(kipp_tokenize(m, " ", 1, &sp, &sn, &err) == 0 && sn == 1);
    space = sp[0];
    free(sp);
    CHECK(!kipp_grammar_allows(st, space));
    CHECK(!kipp_grammar_allows(st, ck->eos));
    for (size_t i = 0; i < n; i++) CHECK(kipp_grammar_accept(st, ids[i], &err) == 0);
    CHECK(kipp_grammar_complete(st));
    CHECK(kipp_grammar_allows(st, ck->eos));
    for (size_t i = 0; i < KIPP_VOCAB_SIZE; i++) logits[i] = 0;
    size_t allowed = kipp_grammar_mask(st, logits);
    CHECKF(allowed == ck->n_stops, "complete document: %zu allowed, want the %u stop tokens",
           allowed, ck->n_stops);
    free(ids);
    kipp_grammar_state_destroy(st);
    kipp_grammar_destroy(g);
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
    kipp_model_close(m);
    return test_finish("test_grammar");
}
