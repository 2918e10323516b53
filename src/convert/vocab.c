#include "convert/vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/tokenizer.h"

/* "[PAD<id>]" for ids up to 6 digits: at most 12 bytes with the NUL */
#define PAD_NAME_MAX 16

static bool json_id(const json_value *v, int64_t *out) {
    if (!v || v->type != JSON_NUMBER || !v->as.number.is_integer || !v->as.number.fits_int64)
        return false;
    *out = v->as.number.integer;
    return true;
}

/* Records added token `id` (content, special) over whatever was there. */
static int set_added(kipp_vocab *v, int64_t id, const json_value *content, bool special,
                     const char *where, kipp_error *err) {
    /* the loader's rule (artifact.c): added tokens live above the BPE ids */
    if (id < KIPP_FIRST_ADDED_TOKEN || id >= KIPP_VOCAB_SIZE)
        return kipp_fail(err, KIPP_E_FORMAT, "%s: added token id %lld is outside [%d, %d)",
                         where, (long long)id, KIPP_FIRST_ADDED_TOKEN, KIPP_VOCAB_SIZE);
    if (!content || content->type != JSON_STRING || content->as.string.length == 0)
        return kipp_fail(err, KIPP_E_FORMAT, "%s: added token %lld has no \"content\" string",
                         where, (long long)id);
    v->tokens[id] = content->as.string.chars;
    v->token_lens[id] = content->as.string.length;
    v->types[id] = special ? KIPP_TOKEN_CONTROL : KIPP_TOKEN_USER_DEFINED;
    return KIPP_OK;
}

static int read_vocab(kipp_vocab *v, const json_value *model, kipp_error *err) {
    const char *type = kipp_json_get_string(model, "type");
    if (type && strcmp(type, "BPE") != 0)
        return kipp_fail(err, KIPP_E_FORMAT, "tokenizer.json: model type is \"%s\", not BPE", type);
    const json_value *vocab = kipp_json_get_type(model, "vocab", JSON_OBJECT);
    if (!vocab) return kipp_fail(err, KIPP_E_FORMAT, "tokenizer.json: model.vocab missing");
    for (size_t i = 0; i < vocab->as.object.count; i++) {
        int64_t id;
        if (!json_id(vocab->as.object.values[i], &id) || id < 0 || id >= KIPP_VOCAB_SIZE)
            return kipp_fail(err, KIPP_E_FORMAT,
                             "tokenizer.json: vocab entry %zu has an id outside [0, %d)", i,
                             KIPP_VOCAB_SIZE);
        if (v->tokens[id])
            return kipp_fail(err, KIPP_E_FORMAT, "tokenizer.json: vocab id %lld appears twice",
                             (long long)id);
        v->tokens[id] = vocab->as.object.keys[i];
        v->token_lens[id] = vocab->as.object.key_lengths[i];
        v->types[id] = KIPP_TOKEN_NORMAL;
    }
    return KIPP_OK;
}

static int read_merges(kipp_vocab *v, const json_value *model, kipp_error *err) {
    const json_value *merges = kipp_json_get_type(model, "merges", JSON_ARRAY);
    if (!merges) return kipp_fail(err, KIPP_E_FORMAT, "tokenizer.json: model.merges missing");
    size_t n = merges->as.array.count, arena = 0;
    /* pairs need "a b" built; strings are used in place */
    for (size_t i = 0; i < n; i++) {
        const json_value *m = merges->as.array.items[i];
        if (m->type == JSON_STRING) continue;
        if (m->type != JSON_ARRAY || m->as.array.count != 2 ||
            m->as.array.items[0]->type != JSON_STRING || m->as.array.items[1]->type != JSON_STRING)
            return kipp_fail(err, KIPP_E_FORMAT,
                             "tokenizer.json: merge %zu is neither \"a b\" nor [\"a\", \"b\"]", i);
        size_t len = m->as.array.items[0]->as.string.length + m->as.array.items[1]->as.string.length;
        if (!kipp_add_size(arena, len + 2, &arena))
            return kipp_fail(err, KIPP_E_MEMORY, "tokenizer.json: merges too large");
    }
    v->merges = kipp_calloc(n, sizeof *v->merges, err);
    v->merge_lens = kipp_calloc(n, sizeof *v->merge_lens, err);
    v->arena = kipp_malloc(arena, err);
    if (!v->merges || !v->merge_lens || !v->arena) return KIPP_E_MEMORY;
    char *p = v->arena;
    for (size_t i = 0; i < n; i++) {
        const json_value *m = merges->as.array.items[i];
        if (m->type == JSON_STRING) {
            v->merges[i] = m->as.string.chars;
            v->merge_lens[i] = m->as.string.length;
            continue;
        }
        const json_value *a = m->as.array.items[0], *b = m->as.array.items[1];
        v->merges[i] = p;
        memcpy(p, a->as.string.chars, a->as.string.length);
        p += a->as.string.length;
        *p++ = ' ';
        memcpy(p, b->as.string.chars, b->as.string.length);
        p += b->as.string.length;
        *p++ = '\0';
        v->merge_lens[i] = a->as.string.length + 1 + b->as.string.length;
    }
    v->n_merges = n;
    return KIPP_OK;
}

static int read_added(kipp_vocab *v, const json_value *tok_root, const json_value *cfg_root,
                      kipp_error *err) {
    const json_value *added = kipp_json_get(tok_root, "added_tokens");
    if (added && added->type != JSON_ARRAY)
        return kipp_fail(err, KIPP_E_FORMAT, "tokenizer.json: added_tokens is not an array");
    int rc;
    for (size_t i = 0; added && i < added->as.array.count; i++) {
        const json_value *t = added->as.array.items[i];
        int64_t id;
        bool special = false;
        if (t->type != JSON_OBJECT || !json_id(kipp_json_get(t, "id"), &id))
            return kipp_fail(err, KIPP_E_FORMAT, "tokenizer.json: added_tokens[%zu] has no id", i);
        kipp_json_get_bool(t, "special", &special);
        if ((rc = set_added(v, id, kipp_json_get(t, "content"), special, "tokenizer.json", err)))
            return rc;
    }
    const json_value *dec = kipp_json_get(cfg_root, "added_tokens_decoder");
    if (dec && dec->type != JSON_OBJECT)
        return kipp_fail(err, KIPP_E_FORMAT,
                         "tokenizer_config.json: added_tokens_decoder is not an object");
    for (size_t i = 0; dec && i < dec->as.object.count; i++) {
        const char *key = dec->as.object.keys[i];
        char *end;
        long long id = strtoll(key, &end, 10);
        const json_value *t = dec->as.object.values[i];
        bool special = false;
        if (!*key || *end || t->type != JSON_OBJECT)
            return kipp_fail(err, KIPP_E_FORMAT,
                             "tokenizer_config.json: added_tokens_decoder key '%s' is not an id",
                             key);
        kipp_json_get_bool(t, "special", &special);
        if ((rc = set_added(v, id, kipp_json_get(t, "content"), special, "tokenizer_config.json", err)))
            return rc;
    }
    return KIPP_OK;
}

/* tokenizer_config.json's chat_template: absent or null means none; any
 * other value must be a non-empty string without NUL bytes, the rule the
 * artifact loader applies to tokenizer.chat_template (a template cut at a
 * NUL, or an empty one, would otherwise be written and then refused). */
static int read_chat_template(kipp_vocab *v, const json_value *cfg_root, kipp_error *err) {
    const json_value *t = kipp_json_get(cfg_root, "chat_template");
    if (!t || t->type == JSON_NULL) return KIPP_OK;
    if (t->type != JSON_STRING)
        return kipp_fail(err, KIPP_E_FORMAT,
                         "tokenizer_config.json: chat_template is not a string (a list of named "
                         "templates is not supported)");
    if (t->as.string.length == 0)
        return kipp_fail(err, KIPP_E_FORMAT, "tokenizer_config.json: chat_template is empty");
    if (memchr(t->as.string.chars, '\0', t->as.string.length))
        return kipp_fail(err, KIPP_E_FORMAT,
                         "tokenizer_config.json: chat_template holds a NUL byte (\\u0000)");
    v->chat_template = t->as.string.chars;
    return KIPP_OK;
}

/* Builds the tokenizer the artifact's loader will build from these arrays
 * (kipp_tokenizer_create, at every model open) and throws it away: a
 * vocabulary it refuses -- a merge naming a token the vocabulary lacks, a
 * token not in byte-level form -- is refused here, before the converter
 * writes gigabytes of weights into an artifact nothing can open. An empty
 * merge list, which the loader also refuses, is refused first. */
static int check_tokenizer(const kipp_vocab *v, kipp_error *err) {
    if (v->n_merges == 0) /* the loader refuses tokenizer.ggml.merges empty */
        return kipp_fail(err, KIPP_E_FORMAT, "tokenizer.json: model.merges is empty");
    gguf_str *tokens = kipp_calloc(KIPP_VOCAB_SIZE, sizeof *tokens, err);
    gguf_str *merges = kipp_calloc(v->n_merges, sizeof *merges, err);
    int rc = KIPP_E_MEMORY;
    if (!tokens || !merges) goto done;
    for (size_t i = 0; i < KIPP_VOCAB_SIZE; i++)
        tokens[i] = (gguf_str){.ptr = v->tokens[i], .len = v->token_lens[i]};
    for (size_t i = 0; i < v->n_merges; i++)
        merges[i] = (gguf_str){.ptr = v->merges[i], .len = v->merge_lens[i]};
    kipp_tokenizer *tok = NULL;
    rc = kipp_tokenizer_create_from_arrays(tokens, v->types, KIPP_VOCAB_SIZE, merges,
                                           v->n_merges, &tok, err);
    kipp_tokenizer_destroy(tok);
    if (rc) kipp_fail_prefix(err, "tokenizer.json: the vocabulary and merges do not make a tokenizer");
done:
    free(tokens);
    free(merges);
    return rc;
}

int kipp_vocab_build(kipp_vocab *v, const char *tokenizer_json, size_t tokenizer_len,
                     const char *tokenizer_config, size_t config_len, kipp_error *err) {
    memset(v, 0, sizeof *v);
    int rc;
    if ((rc = kipp_json_parse(tokenizer_json, tokenizer_len, &v->tokenizer_doc, err)))
        return kipp_fail_prefix(err, "tokenizer.json: invalid JSON");
    if ((rc = kipp_json_parse(tokenizer_config, config_len, &v->config_doc, err))) {
        kipp_fail_prefix(err, "tokenizer_config.json: invalid JSON");
        goto fail;
    }
    const json_value *troot = kipp_json_root(v->tokenizer_doc), *croot = kipp_json_root(v->config_doc);
    const json_value *model = kipp_json_get_type(troot, "model", JSON_OBJECT);
    if (troot->type != JSON_OBJECT || !model) {
        rc = kipp_fail(err, KIPP_E_FORMAT, "tokenizer.json: no \"model\" object");
        goto fail;
    }
    if (croot->type != JSON_OBJECT) {
        rc = kipp_fail(err, KIPP_E_FORMAT, "tokenizer_config.json: not a JSON object");
        goto fail;
    }
    v->tokens = kipp_calloc(KIPP_VOCAB_SIZE, sizeof *v->tokens, err);
    v->token_lens = kipp_calloc(KIPP_VOCAB_SIZE, sizeof *v->token_lens, err);
    v->types = kipp_calloc(KIPP_VOCAB_SIZE, sizeof *v->types, err);
    if (!v->tokens || !v->token_lens || !v->types) { rc = KIPP_E_MEMORY; goto fail; }
    if ((rc = read_vocab(v, model, err)) || (rc = read_merges(v, model, err)) ||
        (rc = read_added(v, troot, croot, err)))
        goto fail;
    /* PAD names for the unused ids; counted first so the arena is one block */
    size_t n_pad = 0;
    for (size_t id = 0; id < KIPP_VOCAB_SIZE; id++) n_pad += v->tokens[id] == NULL;
    char *pads = kipp_calloc(n_pad ? n_pad : 1, PAD_NAME_MAX, err);
    if (!pads) { rc = KIPP_E_MEMORY; goto fail; }
    size_t k = 0;
    for (size_t id = 0; id < KIPP_VOCAB_SIZE; id++) {
        if (v->tokens[id]) continue;
        char *s = pads + k++ * PAD_NAME_MAX;
        int len = snprintf(s, PAD_NAME_MAX, "[PAD%zu]", id);
        v->tokens[id] = s;
        v->token_lens[id] = (size_t)len;
        v->types[id] = KIPP_TOKEN_UNUSED;
    }
    v->pads = pads;
    if ((rc = read_chat_template(v, croot, err)) || (rc = check_tokenizer(v, err))) goto fail;
    return KIPP_OK;
fail:
    kipp_vocab_free(v);
    return rc;
}

void kipp_vocab_free(kipp_vocab *v) {
    kipp_json_free(v->tokenizer_doc);
    kipp_json_free(v->config_doc);
    free(v->tokens);
    free(v->token_lens);
    free(v->types);
    free(v->merges);
    free(v->merge_lens);
    free(v->arena);
    free(v->pads);
    memset(v, 0, sizeof *v);
}
