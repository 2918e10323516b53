/* Sessions (DESIGN §6, §8): an independent timeline over one model, owning
 * its paged KV cache. This file checks every argument and capacity before
 * the backend runs, and advances lengths only after the whole kipp_eval call
 * succeeded, so on any error no session changes. */
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/model_internal.h"
#include "core/session_internal.h"

int kipp_session_create(kipp_model *model, const kipp_session_options *options,
                        kipp_session **out, kipp_error *err) {
    if (!model || !out) return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_session_create: NULL argument");
    *out = NULL;
    if (!model->backend)
        return kipp_fail(err, KIPP_E_ARGUMENT,
                         "kipp_session_create: the model was opened without a backend");
    kipp_session_options defaults = {0};
    if (!options) options = &defaults;
    const kipp_checkpoint *c = model->artifact.checkpoint;
    uint32_t capacity = options->capacity ? options->capacity : c->context;
    if (capacity > c->context)
        return kipp_fail(err, KIPP_E_ARGUMENT,
                         "session capacity %u exceeds the context length %u of %s",
                         capacity, c->context, c->id);
    if (options->kv_quant != KIPP_KV_BF16 && options->kv_quant != KIPP_KV_Q8_0)
        return kipp_fail(err, KIPP_E_ARGUMENT, "unknown KV cache format %d",
                         (int)options->kv_quant);
    if (options->kv_quant == KIPP_KV_Q8_0 && !model->backend->kv_q8_0)
        return kipp_fail(err, KIPP_E_UNSUPPORTED,
                         "backend '%s' has no Q8_0 KV cache (use the BF16 cache or the ref "
                         "backend)", model->backend->name);

    kipp_session *s = kipp_calloc(1, sizeof *s, err);
    if (!s) return KIPP_E_MEMORY;
    s->model = model;
    int rc = kipp_kv_create_quant(&s->kv, c->layers, capacity, options->kv_quant, err);
    if (rc) {
        free(s);
        return rc;
    }
    rc = model->backend->session_create(model->backend_state, &s->kv, &s->backend_state, err);
    if (rc) {
        kipp_kv_destroy(&s->kv);
        free(s);
        return rc;
    }
    model->live_sessions++;
    *out = s;
    return KIPP_OK;
}

void kipp_session_destroy(kipp_session *s) {
    if (!s) return;
    s->model->backend->session_destroy(s->model->backend_state, s->backend_state);
    kipp_kv_destroy(&s->kv);
    s->model->live_sessions--;
    free(s);
}

uint32_t kipp_session_length(const kipp_session *s) { return s ? s->kv.length : 0; }
uint32_t kipp_session_capacity(const kipp_session *s) { return s ? s->kv.capacity : 0; }

void kipp_session_reset(kipp_session *s) {
    if (s) s->kv.length = 0;
}

/* Positions >= length become unreachable; the next append overwrites them. */
int kipp_session_truncate(kipp_session *s, uint32_t length, kipp_error *err) {
    if (!s) return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_session_truncate: NULL session");
    if (length > s->kv.length)
        return kipp_fail(err, KIPP_E_ARGUMENT,
                         "cannot truncate a session of length %u to %u (longer)",
                         s->kv.length, length);
    s->kv.length = length;
    return KIPP_OK;
}

/* Every check happens here, before any item runs. */
static int check_items(const kipp_model *model, const kipp_eval_item *items, size_t n_items,
                       kipp_error *err) {
    for (size_t i = 0; i < n_items; i++) {
        const kipp_eval_item *it = &items[i];
        if (!it->session)
            return kipp_fail(err, KIPP_E_ARGUMENT, "eval item %zu: NULL session", i);
        if (it->session->model != model)
            return kipp_fail(err, KIPP_E_ARGUMENT,
                             "eval item %zu: the session belongs to another model", i);
        for (size_t j = 0; j < i; j++)
            if (items[j].session == it->session)
                return kipp_fail(err, KIPP_E_ARGUMENT,
                                 "eval items %zu and %zu name the same session", j, i);
        if (it->n_tokens && !it->tokens)
            return kipp_fail(err, KIPP_E_ARGUMENT, "eval item %zu: NULL tokens", i);
        if (it->n_logits > it->n_tokens)
            return kipp_fail(err, KIPP_E_ARGUMENT,
                             "eval item %zu: %u logit rows requested for %u tokens", i,
                             it->n_logits, it->n_tokens);
        if (it->n_logits && !it->logits)
            return kipp_fail(err, KIPP_E_ARGUMENT, "eval item %zu: NULL logits", i);
        for (uint32_t t = 0; t < it->n_tokens; t++)
            if (it->tokens[t] < 0 || it->tokens[t] >= KIPP_VOCAB_SIZE)
                return kipp_fail(err, KIPP_E_ARGUMENT,
                                 "eval item %zu: token %u is %d, outside 0..%d", i, t,
                                 it->tokens[t], KIPP_VOCAB_SIZE - 1);
        const kipp_kv_cache *kv = &it->session->kv;
        if ((uint64_t)kv->length + it->n_tokens > kv->capacity)
            return kipp_fail(err, KIPP_E_CAPACITY,
                             "session capacity exceeded: %u positions held + %u new = %llu > "
                             "capacity %u (create the session with a larger capacity, or "
                             "truncate it)", kv->length, it->n_tokens,
                             (unsigned long long)kv->length + it->n_tokens, kv->capacity);
    }
    return KIPP_OK;
}

int kipp_eval(kipp_model *model, kipp_eval_item *items, size_t n_items, kipp_error *err) {
    if (!model || (n_items && !items))
        return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_eval: NULL argument");
    if (!model->backend)
        return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_eval: the model was opened without a backend");
    int rc = check_items(model, items, n_items, err);
    if (rc) return rc;

    /* Batches of items go to the backend in fixed-size groups so that no
     * allocation happens here; items with no tokens are skipped. */
    enum { GROUP = 16 };
    kipp_backend_item group[GROUP];
    size_t start = 0;
    while (start < n_items) {
        size_t n = 0, end = start;
        for (; end < n_items && n < GROUP; end++) {
            kipp_eval_item *it = &items[end];
            if (it->n_tokens == 0) continue;
            group[n++] = (kipp_backend_item){
                .kv = &it->session->kv,
                .session_state = it->session->backend_state,
                .tokens = it->tokens,
                .n_tokens = it->n_tokens,
                .n_logits = it->n_logits,
                .logits = it->logits,
            };
        }
        if (n) {
            rc = model->backend->eval(model->backend_state, group, n, err);
            if (rc) return kipp_fail_prefix(err, "backend '%s' eval failed", model->backend->name);
        }
        start = end;
    }
    /* Every item succeeded: only now do the sessions grow. */
    for (size_t i = 0; i < n_items; i++) items[i].session->kv.length += items[i].n_tokens;
    return KIPP_OK;
}

/* ---- test hooks ------------------------------------------------------- */

uint32_t kipp_session_block_count(const kipp_session *s) { return s ? s->kv.n_blocks : 0; }

int kipp_session_set_block_table(kipp_session *s, const uint32_t *table, uint32_t n_blocks,
                                 kipp_error *err) {
    if (!s || !table) return kipp_fail(err, KIPP_E_ARGUMENT, "set_block_table: NULL argument");
    if (s->kv.length != 0)
        return kipp_fail(err, KIPP_E_ARGUMENT, "set_block_table: session is not empty");
    if (n_blocks != s->kv.n_blocks)
        return kipp_fail(err, KIPP_E_ARGUMENT, "set_block_table: %u blocks, session has %u",
                         n_blocks, s->kv.n_blocks);
    /* Check it is a permutation: every physical block used exactly once. */
    uint8_t *seen = kipp_calloc(n_blocks, 1, err);
    if (!seen) return KIPP_E_MEMORY;
    for (uint32_t b = 0; b < n_blocks; b++) {
        if (table[b] >= n_blocks || seen[table[b]]) {
            free(seen);
            return kipp_fail(err, KIPP_E_ARGUMENT, "set_block_table: not a permutation");
        }
        seen[table[b]] = 1;
    }
    free(seen);
    memcpy(s->kv.block_table, table, n_blocks * sizeof *table);
    return KIPP_OK;
}
