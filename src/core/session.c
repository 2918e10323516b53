/* Sessions (DESIGN §6, §8): an independent timeline over one model. Core
 * keeps its length, capacity, token ids and block table; the blocks come
 * from the model's shared pool (core/kv_pool.h) as the session grows, and
 * their K/V bytes belong to the backend. This file checks every argument,
 * capacity and block before the backend runs, and advances lengths only
 * after the whole kipp_eval call succeeded, so on any error no session
 * changes. */
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/model_internal.h"
#include "core/session_internal.h"

static uint32_t blocks_for(uint64_t positions) {
    return (uint32_t)((positions + KIPP_KV_BLOCK - 1) / KIPP_KV_BLOCK);
}

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
    kipp_kv_pool *pool = NULL;
    int rc = kipp_model_pool(model, options->kv_quant, &pool, err);
    if (rc) return rc;

    kipp_session *s = kipp_calloc(1, sizeof *s, err);
    if (!s) return KIPP_E_MEMORY;
    s->model = model;
    s->pool = pool;
    s->kv.capacity = capacity;
    s->kv.max_blocks = blocks_for(capacity);
    s->kv.quant = options->kv_quant;
    /* The table and ids are small (4 bytes per block, per position); the
     * K/V itself is taken from the pool only as the session grows. */
    s->kv.block_table = kipp_calloc(s->kv.max_blocks, sizeof *s->kv.block_table, err);
    s->tokens = s->kv.block_table ? kipp_calloc(capacity, sizeof *s->tokens, err) : NULL;
    rc = s->tokens ? model->backend->session_create(model->backend_state, &s->kv,
                                                    &s->backend_state, err)
                   : KIPP_E_MEMORY;
    if (rc) {
        free(s->tokens);
        free(s->kv.block_table);
        free(s);
        return rc;
    }
    kipp_model_count_session(model, +1);
    *out = s;
    return KIPP_OK;
}

/* Gives every block back to the pool (published ones stay findable). */
static void drop_blocks(kipp_session *s, uint32_t keep) {
    if (s->kv.n_blocks > keep)
        kipp_kv_pool_release(s->pool, s->kv.block_table + keep, s->kv.n_blocks - keep);
    s->kv.n_blocks = keep < s->kv.n_blocks ? keep : s->kv.n_blocks;
    if (s->n_published > s->kv.n_blocks) s->n_published = s->kv.n_blocks;
}

void kipp_session_destroy(kipp_session *s) {
    if (!s) return;
    s->model->backend->session_destroy(s->model->backend_state, s->backend_state);
    drop_blocks(s, 0);
    free(s->kv.block_table);
    free(s->tokens);
    kipp_model_count_session(s->model, -1);
    free(s);
}

uint32_t kipp_session_length(const kipp_session *s) { return s ? s->kv.length : 0; }
uint32_t kipp_session_capacity(const kipp_session *s) { return s ? s->kv.capacity : 0; }

void kipp_session_reset(kipp_session *s) {
    if (!s) return;
    drop_blocks(s, 0);
    s->kv.length = 0;
}

/* Blocks wholly past the new length go back to the pool. If the new last
 * block is partial and shared (adopted or published), its first positions
 * are copied into a private block, which is cheaper than recomputing up to
 * 31 positions and gives the same bytes; shared state is never written. */
int kipp_session_truncate(kipp_session *s, uint32_t length, kipp_error *err) {
    if (!s) return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_session_truncate: NULL session");
    if (length > s->kv.length)
        return kipp_fail(err, KIPP_E_ARGUMENT,
                         "cannot truncate a session of length %u to %u (longer)",
                         s->kv.length, length);
    uint32_t keep = blocks_for(length), tail = length % KIPP_KV_BLOCK;
    if (tail && keep <= s->kv.n_blocks &&
        kipp_kv_pool_is_shared(s->pool, s->kv.block_table[keep - 1])) {
        uint32_t fresh, old = s->kv.block_table[keep - 1];
        int rc = kipp_kv_pool_alloc(s->pool, 1, &fresh, err);
        if (rc) return kipp_fail_prefix(err, "truncating into a shared block");
        s->model->backend->kv_copy(s->model->backend_state, s->kv.quant, fresh, old, tail);
        s->kv.block_table[keep - 1] = fresh;
        kipp_kv_pool_release(s->pool, &old, 1);
    }
    drop_blocks(s, keep);
    if (s->n_published > length / KIPP_KV_BLOCK) s->n_published = length / KIPP_KV_BLOCK;
    s->kv.length = length;
    return KIPP_OK;
}

int kipp_session_match_prefix(kipp_session *s, const int32_t *tokens, size_t n,
                              uint32_t *n_adopted, kipp_error *err) {
    if (!s || (n && !tokens) || !n_adopted)
        return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_session_match_prefix: NULL argument");
    *n_adopted = 0;
    if (s->kv.length != 0 || s->kv.n_blocks != 0)
        return kipp_fail(err, KIPP_E_ARGUMENT,
                         "kipp_session_match_prefix: the session is not empty (length %u); "
                         "reset it first", s->kv.length);
    /* Whole published blocks are shared by reference; then the first
     * positions of a published child (a tail, or a full block the ids
     * leave early) are copied into a private block: the copy gives the same
     * bytes as evaluating them and the session can append right away. */
    uint32_t tail_block = KIPP_KV_NO_BLOCK, tail_len = 0;
    uint32_t got = kipp_kv_pool_match(s->pool, tokens, n, s->kv.capacity, true,
                                      s->kv.block_table, &tail_block, &tail_len);
    s->kv.n_blocks = got;
    s->n_published = got;
    s->kv.length = got * KIPP_KV_BLOCK;
    if (tail_len) {
        uint32_t fresh;
        kipp_error ignored;
        if (kipp_kv_pool_alloc(s->pool, 1, &fresh, &ignored) == KIPP_OK) {
            s->model->backend->kv_copy(s->model->backend_state, s->kv.quant, fresh, tail_block,
                                       tail_len);
            s->kv.block_table[s->kv.n_blocks++] = fresh;
            s->kv.length += tail_len;
        } /* else a dry pool: the caller evaluates those positions instead */
        kipp_kv_pool_release(s->pool, &tail_block, 1);
    }
    if (s->kv.length) memcpy(s->tokens, tokens, s->kv.length * sizeof *tokens);
    *n_adopted = s->kv.length;
    return KIPP_OK;
}

int kipp_session_publish(kipp_session *s, kipp_error *err) {
    if (!s) return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_session_publish: NULL session");
    uint32_t full = s->kv.length / KIPP_KV_BLOCK, tail = s->kv.length % KIPP_KV_BLOCK;
    if (full > s->n_published)
        s->n_published = kipp_kv_pool_publish(s->pool, s->kv.block_table, s->n_published, full,
                                              s->tokens);
    /* The partial last block too, in place: the next eval that appends to
     * it copies it first (grow_tables), so a repeated prompt evaluates one
     * token instead of up to 31. */
    if (tail && s->n_published == full)
        kipp_kv_pool_publish_tail(s->pool, s->kv.block_table, full, tail,
                                  s->tokens + (size_t)full * KIPP_KV_BLOCK);
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

/* Blocks item i needs beyond those its session holds. */
static uint32_t blocks_needed(const kipp_eval_item *it) {
    uint32_t want = blocks_for((uint64_t)it->session->kv.length + it->n_tokens);
    return want > it->session->kv.n_blocks ? want - it->session->kv.n_blocks : 0;
}

/* True if item i appends into a partial last block that is shared (its
 * published tail): that block must be copied first, shared state is
 * immutable. */
static bool needs_tail_copy(const kipp_eval_item *it) {
    const kipp_kv_cache *kv = &it->session->kv;
    return it->n_tokens && kv->length % KIPP_KV_BLOCK &&
           kipp_kv_pool_is_shared(it->session->pool, kv->block_table[kv->length / KIPP_KV_BLOCK]);
}

/* Hands back the blocks taken since the mark (an eval that failed). A tail
 * copy made for it stays: same bytes, now private. */
static void undo_growth(kipp_eval_item *items, size_t n_items) {
    for (size_t i = 0; i < n_items; i++) {
        kipp_session *s = items[i].session;
        if (s->kv.n_blocks > s->eval_mark)
            kipp_kv_pool_release(s->pool, s->kv.block_table + s->eval_mark,
                                 s->kv.n_blocks - s->eval_mark);
        s->kv.n_blocks = s->eval_mark;
    }
}

/* Gives the items the blocks they are about to fill, all or nothing. The
 * totals are checked first (per pool) so that a call that cannot succeed
 * evicts nothing; a shortfall is KIPP_E_POOL_EXHAUSTED with no change. */
static int grow_tables(kipp_model *model, kipp_eval_item *items, size_t n_items,
                       kipp_error *err) {
    uint64_t need[2] = {0, 0};
    for (size_t i = 0; i < n_items; i++) {
        items[i].session->eval_mark = items[i].session->kv.n_blocks;
        need[items[i].session->kv.quant] += blocks_needed(&items[i]) + needs_tail_copy(&items[i]);
    }
    for (int q = 0; q < 2; q++) {
        if (!need[q]) continue;
        uint32_t avail = kipp_kv_pool_available(model->pools[q]);
        if (need[q] > avail)
            return kipp_fail(err, KIPP_E_POOL_EXHAUSTED,
                             "KV pool exhausted: this eval needs %llu more blocks of %d "
                             "positions, %u of %u are free (finish or destroy sessions, or "
                             "open the model with a larger kv_pool_mib)",
                             (unsigned long long)need[q], KIPP_KV_BLOCK, avail,
                             model->pools[q]->n_blocks);
    }
    for (size_t i = 0; i < n_items; i++) {
        kipp_session *s = items[i].session;
        if (needs_tail_copy(&items[i])) {
            uint32_t fresh, *last = &s->kv.block_table[s->kv.length / KIPP_KV_BLOCK];
            int rc = kipp_kv_pool_alloc(s->pool, 1, &fresh, err);
            if (rc) { /* another thread took blocks since the check */
                undo_growth(items, n_items);
                return rc;
            }
            model->backend->kv_copy(model->backend_state, s->kv.quant, fresh, *last,
                                    s->kv.length % KIPP_KV_BLOCK);
            uint32_t old = *last;
            *last = fresh;
            kipp_kv_pool_release(s->pool, &old, 1);
        }
        uint32_t n = blocks_needed(&items[i]);
        if (!n) continue;
        int rc = kipp_kv_pool_alloc(s->pool, n, s->kv.block_table + s->kv.n_blocks, err);
        if (rc) { /* another thread took blocks since the check */
            undo_growth(items, n_items);
            return rc;
        }
        s->kv.n_blocks += n;
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
    rc = grow_tables(model, items, n_items, err);
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
            if (rc) {
                undo_growth(items, n_items);
                return kipp_fail_prefix(err, "backend '%s' eval failed", model->backend->name);
            }
        }
        start = end;
    }
    /* Every item succeeded: only now do the sessions grow. Their ids are
     * kept for publishing (the key of a block is its tokens). */
    for (size_t i = 0; i < n_items; i++) {
        kipp_session *s = items[i].session;
        if (items[i].n_tokens)
            memcpy(s->tokens + s->kv.length, items[i].tokens,
                   items[i].n_tokens * sizeof *items[i].tokens);
        s->kv.length += items[i].n_tokens;
    }
    return KIPP_OK;
}

/* ---- test hooks ------------------------------------------------------- */

uint32_t kipp_session_block_count(const kipp_session *s) { return s ? s->kv.max_blocks : 0; }

int kipp_session_set_block_table(kipp_session *s, const uint32_t *table, uint32_t n_blocks,
                                 kipp_error *err) {
    if (!s || !table) return kipp_fail(err, KIPP_E_ARGUMENT, "set_block_table: NULL argument");
    if (s->kv.length != 0 || s->kv.n_blocks != 0)
        return kipp_fail(err, KIPP_E_ARGUMENT, "set_block_table: session is not empty");
    if (n_blocks > s->kv.max_blocks)
        return kipp_fail(err, KIPP_E_ARGUMENT, "set_block_table: %u blocks, session has %u",
                         n_blocks, s->kv.max_blocks);
    int rc = kipp_kv_pool_take(s->pool, table, n_blocks, err);
    if (rc) return kipp_fail_prefix(err, "set_block_table");
    memcpy(s->kv.block_table, table, n_blocks * sizeof *table);
    s->kv.n_blocks = n_blocks;
    return KIPP_OK;
}
