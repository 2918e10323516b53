/* libFuzzer target for the JSON Schema -> grammar compiler
 * (src/core/grammar_schema.c) and the grammar automaton (src/core/grammar.c):
 *   make fuzz-schema [FUZZ_SECONDS=60]
 * Loads the artifact named by $KIPP_FUZZ_MODEL once (its tokenizer is the
 * grammar's vocabulary). The input is SCHEMA [NUL STEPS]:
 *   SCHEMA goes where the server puts response_format's json_schema
 *   (api_tools.c: kipp_json_parse, then kipp_grammar_from_json_value) and
 *   also through the public kipp_grammar_from_json_schema: both must agree,
 *   and a refusal must carry a message;
 *   STEPS drive a state of a grammar that compiled, two bytes a step:
 *     (even, b)  the one-byte token for byte b,
 *     (odd, k)   the k-th token the mask allows (as a sampler would pick),
 *   and every 8th step an arbitrary id from the next three bytes. Each
 *   accept must agree with kipp_grammar_allows for that state; a refused
 *   token must leave the state unchanged (kipp.h), which is checked against
 *   a fresh state replayed with the accepted tokens. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/grammar_internal.h"
#include "core/json.h"
#include "core/model_internal.h"
#include "core/tokenizer_internal.h"
#include "kipp.h"
#define FUZZ_NAME "fuzz_schema"
#include "fuzz_util.h"


#define MAX_STEPS 24

static kipp_model *model;
static int32_t byte_token[256]; /* the normal token whose bytes are exactly that byte */
static float *logits;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    model = fuzz_open_model();
    const kipp_tokenizer *tok = model->tokenizer;
    for (int b = 0; b < 256; b++) byte_token[b] = -1;
    for (size_t id = 0; id < tok->n_tokens; id++) {
        size_t len = 0;
        const uint8_t *bytes = kipp_tokenizer_token_bytes(tok, (int32_t)id, &len);
        if (bytes && len == 1 && tok->types[id] == KIPP_TOKEN_NORMAL && byte_token[bytes[0]] < 0)
            byte_token[bytes[0]] = (int32_t)id;
    }
    logits = malloc(KIPP_VOCAB_SIZE * sizeof *logits);
    if (!logits) abort();
    return 0;
}

/* The k-th (mod count) token the state allows, or -1. */
static int32_t kth_allowed(kipp_grammar_state *st, unsigned k) {
    for (size_t i = 0; i < KIPP_VOCAB_SIZE; i++) logits[i] = 0.0f;
    size_t n = kipp_grammar_mask(st, logits);
    CHECK(n > 0); /* kipp.h: never 0 */
    size_t want = k % n, seen = 0;
    for (size_t i = 0; i < KIPP_VOCAB_SIZE; i++)
        if (logits[i] == 0.0f && seen++ == want) return (int32_t)i;
    CHECK(!"mask count and masked logits disagree");
    return -1;
}

static void drive(kipp_grammar *g, const uint8_t *p, size_t n) {
    kipp_grammar_state *st = NULL;
    kipp_error err = {0};
    CHECK(kipp_grammar_state_create(g, &st, &err) == KIPP_OK);
    int32_t accepted[MAX_STEPS];
    size_t n_accepted = 0;
    const kipp_checkpoint *ck = kipp_model_checkpoint(model);
    for (size_t step = 0; step < MAX_STEPS && n >= 2; step++) {
        int32_t id;
        bool arbitrary = step % 8 == 7 && n >= 3;
        if (arbitrary) {
            id = (int32_t)(((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16) %
                           (KIPP_VOCAB_SIZE + 16)) - 8; /* a few ids out of range too */
            p += 3, n -= 3;
        } else {
            id = p[0] & 1 ? kth_allowed(st, p[1]) : byte_token[p[1]];
            p += 2, n -= 2;
        }
        if (id < 0 && !arbitrary) continue; /* no one-byte token for that byte */
        bool stop = false;
        for (uint32_t k = 0; k < ck->n_stops; k++) stop |= id == ck->stops[k];
        bool complete = kipp_grammar_complete(st);
        bool allowed = kipp_grammar_allows(st, id);
        int rc = kipp_grammar_accept(st, id, &err);
        if (stop) {
            /* a stop is allowed exactly when the document is complete */
            CHECK(allowed == complete && (rc == KIPP_OK) == complete);
            if (complete) break;
            continue;
        }
        /* Added tokens the grammar does not emit are refused by accept
         * but never set in the mask either. */
        CHECK((rc == KIPP_OK) == allowed);
        if (rc == KIPP_OK) {
            accepted[n_accepted++] = id;
            continue;
        }
        CHECK(err.message[0] != 0);
        /* state unchanged: same completeness and the same mask as a
         * fresh state that saw only the accepted tokens */
        kipp_grammar_state *ref = NULL;
        CHECK(kipp_grammar_state_create(g, &ref, &err) == KIPP_OK);
        for (size_t i = 0; i < n_accepted; i++)
            CHECK(kipp_grammar_accept(ref, accepted[i], &err) == KIPP_OK);
        CHECK(kipp_grammar_complete(ref) == kipp_grammar_complete(st));
        for (size_t i = 0; i < KIPP_VOCAB_SIZE; i++) logits[i] = 0.0f;
        size_t a = kipp_grammar_mask(ref, logits);
        for (size_t i = 0; i < KIPP_VOCAB_SIZE; i++) logits[i] = 0.0f;
        size_t b = kipp_grammar_mask(st, logits);
        if (a != b)
            fprintf(stderr, "fuzz_schema: refused token %d changed the state (%zu -> %zu allowed)\n",
                    (int)id, a, b);
        CHECK(a == b);
        kipp_grammar_state_destroy(ref);
    }
    kipp_grammar_state_destroy(st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t schema_len = nul ? (size_t)(nul - data) : size;
    /* an exact-size copy so that ASan sees any read past the schema text */
    char *schema = malloc(schema_len ? schema_len : 1);
    if (!schema) return 0;
    memcpy(schema, data, schema_len);

    kipp_error err = {0};
    json_doc *doc = NULL;
    if (kipp_json_parse(schema, schema_len, &doc, &err) != KIPP_OK) {
        free(schema);
        return 0;
    }
    kipp_grammar *g = NULL;
    int rc = kipp_grammar_from_json_value(model, kipp_json_root(doc), &g, &err);
    if (rc != KIPP_OK) {
        CHECK(g == NULL && err.message[0] != 0);
    }
    kipp_grammar *g2 = NULL;
    kipp_error err2 = {0};
    int rc2 = kipp_grammar_from_json_schema(model, schema, schema_len, &g2, &err2);
    CHECK(rc2 == rc);
    kipp_grammar_destroy(g2);
    if (rc == KIPP_OK && nul) drive(g, nul + 1, size - schema_len - 1);
    kipp_grammar_destroy(g);
    kipp_json_free(doc);
    free(schema);
    return 0;
}
