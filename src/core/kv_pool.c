/* The shared-prefix block pool; see kv_pool.h for the states and rules. */
#include "core/kv_pool.h"

#include <stdlib.h>
#include <string.h>

#include "core/common.h"

#define NONE KIPP_KV_NO_BLOCK

/* Chained key of a block: the parent's key mixed with the 32 ids. Not a
 * cryptographic hash - equality is decided by comparing ids (kv_pool.h). */
static uint64_t mix(uint64_t h) {
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

static uint64_t block_key(const kipp_kv_pool *p, uint64_t parent_key, const int32_t *ids,
                          uint32_t n) {
    uint64_t h = mix(parent_key ^ 0x9e3779b97f4a7c15ull);
    for (uint32_t i = 0; i < n; i++) h = mix(h ^ (uint32_t)ids[i]);
    if (n < KIPP_KV_BLOCK) h = mix(h ^ (0xa5a5a5a500000000ull | n)); /* a tail */
    return h & p->hash_mask;
}

int kipp_kv_pool_create(kipp_kv_pool *p, uint32_t n_blocks, kipp_kv_quant quant,
                        uint64_t bytes_per_block, kipp_error *err) {
    memset(p, 0, sizeof *p);
    if (n_blocks == 0 || n_blocks >= NONE / 2)
        return kipp_fail(err, KIPP_E_ARGUMENT, "KV pool: %u blocks is out of range", n_blocks);
    uint32_t n_buckets = 1;
    while (n_buckets < n_blocks) n_buckets <<= 1; /* load factor <= 1 */
    p->refs = kipp_calloc(n_blocks, sizeof *p->refs, err);
    p->published = kipp_calloc(n_blocks, 1, err);
    p->gen = kipp_calloc(n_blocks, sizeof *p->gen, err);
    p->key = kipp_calloc(n_blocks, sizeof *p->key, err);
    p->parent = kipp_calloc(n_blocks, sizeof *p->parent, err);
    p->parent_gen = kipp_calloc(n_blocks, sizeof *p->parent_gen, err);
    p->tokens = kipp_calloc((size_t)n_blocks * KIPP_KV_BLOCK, sizeof *p->tokens, err);
    p->fill = kipp_calloc(n_blocks, 1, err);
    p->child_head = kipp_calloc(n_blocks, sizeof *p->child_head, err);
    p->sib_prev = kipp_calloc(n_blocks, sizeof *p->sib_prev, err);
    p->sib_next = kipp_calloc(n_blocks, sizeof *p->sib_next, err);
    p->bucket = kipp_calloc(n_buckets, sizeof *p->bucket, err);
    p->hnext = kipp_calloc(n_blocks, sizeof *p->hnext, err);
    p->lru_prev = kipp_calloc(n_blocks, sizeof *p->lru_prev, err);
    p->lru_next = kipp_calloc(n_blocks, sizeof *p->lru_next, err);
    p->free_stack = kipp_calloc(n_blocks, sizeof *p->free_stack, err);
    if (!p->refs || !p->published || !p->gen || !p->key || !p->parent || !p->parent_gen ||
        !p->tokens || !p->fill || !p->child_head || !p->sib_prev || !p->sib_next ||
        !p->bucket || !p->hnext || !p->lru_prev || !p->lru_next || !p->free_stack) {
        kipp_kv_pool_destroy(p);
        return kipp_fail(err, KIPP_E_MEMORY, "KV pool: out of memory for %u blocks", n_blocks);
    }
    for (uint32_t i = 0; i < n_buckets; i++) p->bucket[i] = NONE;
    for (uint32_t i = 0; i < n_blocks; i++) p->child_head[i] = NONE;
    p->root_head = NONE;
    /* Stack order: block 0 is handed out first (an identity table for the
     * first session on a fresh pool). */
    for (uint32_t i = 0; i < n_blocks; i++) p->free_stack[i] = n_blocks - 1 - i;
    p->n_free = n_blocks;
    p->n_blocks = n_blocks;
    p->bucket_mask = n_buckets - 1;
    p->lru_head = p->lru_tail = NONE;
    p->quant = quant;
    p->bytes_per_block = bytes_per_block;
    p->hash_mask = ~0ull;
    pthread_mutex_init(&p->lock, NULL);
    return KIPP_OK;
}

void kipp_kv_pool_destroy(kipp_kv_pool *p) {
    if (!p) return;
    if (p->n_blocks) pthread_mutex_destroy(&p->lock);
    free(p->refs);
    free(p->published);
    free(p->gen);
    free(p->key);
    free(p->parent);
    free(p->parent_gen);
    free(p->tokens);
    free(p->fill);
    free(p->child_head);
    free(p->sib_prev);
    free(p->sib_next);
    free(p->bucket);
    free(p->hnext);
    free(p->lru_prev);
    free(p->lru_next);
    free(p->free_stack);
    memset(p, 0, sizeof *p);
}

/* ---- LRU list and hash chains (lock held) ------------------------------ */

static void lru_unlink(kipp_kv_pool *p, uint32_t b) {
    uint32_t pr = p->lru_prev[b], nx = p->lru_next[b];
    if (pr != NONE) p->lru_next[pr] = nx;
    else p->lru_head = nx;
    if (nx != NONE) p->lru_prev[nx] = pr;
    else p->lru_tail = pr;
    p->n_cached--;
}

static void lru_push_newest(kipp_kv_pool *p, uint32_t b) {
    p->lru_prev[b] = p->lru_tail;
    p->lru_next[b] = NONE;
    if (p->lru_tail != NONE) p->lru_next[p->lru_tail] = b;
    else p->lru_head = b;
    p->lru_tail = b;
    p->n_cached++;
}

/* The child list b belongs on: its parent's, or the root list. */
static uint32_t *child_list(kipp_kv_pool *p, uint32_t parent) {
    return parent == NONE ? &p->root_head : &p->child_head[parent];
}

/* A block is on its parent's list only while that parent is the same
 * publication; an orphan's list was dropped when its parent was evicted. */
static bool on_child_list(const kipp_kv_pool *p, uint32_t b) {
    return p->parent[b] == NONE || p->parent_gen[b] == p->gen[p->parent[b]];
}

static void unpublish(kipp_kv_pool *p, uint32_t b) {
    uint32_t *link = &p->bucket[p->key[b] & p->bucket_mask];
    while (*link != b) link = &p->hnext[*link];
    *link = p->hnext[b];
    if (on_child_list(p, b)) {
        uint32_t pr = p->sib_prev[b], nx = p->sib_next[b];
        if (pr != NONE) p->sib_next[pr] = nx;
        else *child_list(p, p->parent[b]) = nx;
        if (nx != NONE) p->sib_prev[nx] = pr;
    }
    p->child_head[b] = NONE; /* its children become orphans */
    p->published[b] = 0;
    p->gen[b]++; /* children published under b no longer match */
}

/* Records b as published under (parent, parent_gen) with `fill` ids. */
static void publish_block(kipp_kv_pool *p, uint32_t b, uint64_t key, uint32_t parent,
                          uint32_t parent_gen, const int32_t *ids, uint32_t fill) {
    p->published[b] = 1;
    p->fill[b] = (uint8_t)fill;
    p->key[b] = key;
    p->parent[b] = parent;
    p->parent_gen[b] = parent_gen;
    int32_t *dst = &p->tokens[(size_t)b * KIPP_KV_BLOCK];
    memset(dst, 0, KIPP_KV_BLOCK * sizeof *dst);
    memcpy(dst, ids, fill * sizeof *ids);
    uint32_t *head = &p->bucket[key & p->bucket_mask];
    p->hnext[b] = *head;
    *head = b;
    uint32_t *first = child_list(p, parent);
    p->sib_prev[b] = NONE;
    p->sib_next[b] = *first;
    if (*first != NONE) p->sib_prev[*first] = b;
    *first = b;
    p->child_head[b] = NONE;
    p->published_blocks++;
}

/* A reference to b, which may be cached (then it leaves the LRU list). */
static void ref_block(kipp_kv_pool *p, uint32_t b) {
    if (p->refs[b]++ == 0) lru_unlink(p, b);
}

/* The published child of (parent, parent_gen) with exactly these n ids. */
static uint32_t find(const kipp_kv_pool *p, uint64_t key, uint32_t parent, uint32_t parent_gen,
                     const int32_t *ids, uint32_t n) {
    for (uint32_t b = p->bucket[key & p->bucket_mask]; b != NONE; b = p->hnext[b])
        if (p->key[b] == key && p->parent[b] == parent && p->parent_gen[b] == parent_gen &&
            p->fill[b] == n &&
            memcmp(&p->tokens[(size_t)b * KIPP_KV_BLOCK], ids, n * sizeof *ids) == 0)
            return b;
    return NONE;
}

/* The child of `parent` (NONE: the root) whose first ids agree longest
 * with ids[0..limit); *len gets the agreement (0 and NONE when none). */
static uint32_t longest_child(kipp_kv_pool *p, uint32_t parent, const int32_t *ids,
                              uint32_t limit, uint32_t *len) {
    uint32_t best = NONE, best_len = 0;
    for (uint32_t c = *child_list(p, parent); c != NONE; c = p->sib_next[c]) {
        const int32_t *have = &p->tokens[(size_t)c * KIPP_KV_BLOCK];
        uint32_t n = p->fill[c] < limit ? p->fill[c] : limit, k = 0;
        while (k < n && have[k] == ids[k]) k++;
        if (k > best_len) best = c, best_len = k;
    }
    *len = best_len;
    return best;
}

/* ---- public (to core) operations --------------------------------------- */

uint32_t kipp_kv_pool_available(kipp_kv_pool *p) {
    pthread_mutex_lock(&p->lock);
    uint32_t n = p->n_free + p->n_cached;
    pthread_mutex_unlock(&p->lock);
    return n;
}

int kipp_kv_pool_alloc(kipp_kv_pool *p, uint32_t n, uint32_t *out, kipp_error *err) {
    pthread_mutex_lock(&p->lock);
    uint32_t avail = p->n_free + p->n_cached;
    if (n > avail) {
        pthread_mutex_unlock(&p->lock);
        return kipp_fail(err, KIPP_E_POOL_EXHAUSTED,
                         "KV pool exhausted: %u blocks of %d positions needed, %u available "
                         "of %u (free sessions, or open the model with a larger kv_pool_mib)",
                         n, KIPP_KV_BLOCK, avail, p->n_blocks);
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t b;
        if (p->n_free) {
            b = p->free_stack[--p->n_free];
        } else { /* evict the least recently used cached block */
            b = p->lru_head;
            lru_unlink(p, b);
            unpublish(p, b);
            p->evicted_blocks++;
        }
        p->refs[b] = 1;
        out[i] = b;
    }
    pthread_mutex_unlock(&p->lock);
    return KIPP_OK;
}

void kipp_kv_pool_release(kipp_kv_pool *p, const uint32_t *blocks, uint32_t n) {
    pthread_mutex_lock(&p->lock);
    for (uint32_t i = n; i-- > 0;) {
        uint32_t b = blocks[i];
        if (--p->refs[b]) continue;
        if (p->published[b]) lru_push_newest(p, b);
        else p->free_stack[p->n_free++] = b;
    }
    pthread_mutex_unlock(&p->lock);
}

uint32_t kipp_kv_pool_match(kipp_kv_pool *p, const int32_t *tokens, size_t n, uint64_t max_len,
                            bool take, uint32_t *out, uint32_t *tail_block, uint32_t *tail_len) {
    if ((uint64_t)n > max_len) n = (size_t)max_len;
    pthread_mutex_lock(&p->lock);
    uint32_t parent = NONE, parent_gen = 0, got = 0;
    uint64_t key = 0;
    while ((size_t)(got + 1) * KIPP_KV_BLOCK <= n) {
        const int32_t *ids = tokens + (size_t)got * KIPP_KV_BLOCK;
        key = block_key(p, key, ids, KIPP_KV_BLOCK);
        uint32_t b = find(p, key, parent, parent_gen, ids, KIPP_KV_BLOCK);
        if (b == NONE) break;
        if (take) {
            ref_block(p, b);
            out[got] = b;
            p->reused_blocks++;
        }
        parent = b;
        parent_gen = p->gen[b];
        got++;
    }
    if (tail_len) {
        size_t rest = n - (size_t)got * KIPP_KV_BLOCK;
        uint32_t limit = rest < KIPP_KV_BLOCK - 1 ? (uint32_t)rest : KIPP_KV_BLOCK - 1;
        *tail_block = longest_child(p, parent, tokens + (size_t)got * KIPP_KV_BLOCK, limit,
                                    tail_len);
        if (take && *tail_len) {
            ref_block(p, *tail_block);
            p->reused_blocks++;
        }
    }
    pthread_mutex_unlock(&p->lock);
    return got;
}

uint32_t kipp_kv_pool_publish(kipp_kv_pool *p, uint32_t *table, uint32_t first,
                              uint32_t n_full, const int32_t *tokens) {
    pthread_mutex_lock(&p->lock);
    uint32_t i = first;
    for (; i < n_full; i++) {
        uint32_t parent = i ? table[i - 1] : NONE;
        uint32_t parent_gen = i ? p->gen[parent] : 0;
        uint64_t parent_key = i ? p->key[parent] : 0;
        const int32_t *ids = tokens + (size_t)i * KIPP_KV_BLOCK;
        uint64_t key = block_key(p, parent_key, ids, KIPP_KV_BLOCK);
        uint32_t b = table[i];
        uint32_t same = find(p, key, parent, parent_gen, ids, KIPP_KV_BLOCK);
        if (same == b) continue;
        if (same != NONE) { /* someone published this prefix first: share theirs */
            ref_block(p, same);
            table[i] = same;
            if (--p->refs[b] == 0) p->free_stack[p->n_free++] = b;
            continue;
        }
        if (p->published[b]) break; /* b is published under another parent: chain ends */
        publish_block(p, b, key, parent, parent_gen, ids, KIPP_KV_BLOCK);
    }
    pthread_mutex_unlock(&p->lock);
    return i;
}

bool kipp_kv_pool_publish_tail(kipp_kv_pool *p, const uint32_t *table, uint32_t n_full,
                               uint32_t n_tail, const int32_t *tail_ids) {
    if (n_tail == 0 || n_tail >= KIPP_KV_BLOCK) return false;
    pthread_mutex_lock(&p->lock);
    uint32_t b = table[n_full], parent = n_full ? table[n_full - 1] : NONE;
    bool published = p->published[b];
    if (!published && (parent == NONE || p->published[parent])) {
        uint32_t have = 0;
        longest_child(p, parent, tail_ids, n_tail, &have);
        if (have < n_tail) { /* new: nobody's child starts with these ids */
            uint64_t key = block_key(p, parent == NONE ? 0 : p->key[parent], tail_ids, n_tail);
            publish_block(p, b, key, parent, parent == NONE ? 0 : p->gen[parent], tail_ids,
                          n_tail);
            published = true;
        }
    }
    pthread_mutex_unlock(&p->lock);
    return published;
}

static uint32_t free_index(const kipp_kv_pool *p, uint32_t b) {
    for (uint32_t f = 0; f < p->n_free; f++)
        if (p->free_stack[f] == b) return f;
    return NONE;
}

int kipp_kv_pool_take(kipp_kv_pool *p, const uint32_t *blocks, uint32_t n, kipp_error *err) {
    pthread_mutex_lock(&p->lock);
    /* Check first (all free, no repeats), then take: all or nothing. */
    for (uint32_t i = 0; i < n; i++) {
        bool ok = free_index(p, blocks[i]) != NONE;
        for (uint32_t j = 0; ok && j < i; j++) ok = blocks[j] != blocks[i];
        if (!ok) {
            pthread_mutex_unlock(&p->lock);
            return kipp_fail(err, KIPP_E_ARGUMENT, "block %u is not free (or repeated)",
                             blocks[i]);
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t f = free_index(p, blocks[i]);
        memmove(&p->free_stack[f], &p->free_stack[f + 1],
                (p->n_free - f - 1) * sizeof *p->free_stack);
        p->n_free--;
        p->refs[blocks[i]] = 1;
    }
    pthread_mutex_unlock(&p->lock);
    return KIPP_OK;
}

bool kipp_kv_pool_is_shared(kipp_kv_pool *p, uint32_t b) {
    pthread_mutex_lock(&p->lock);
    bool shared = p->published[b] || p->refs[b] > 1;
    pthread_mutex_unlock(&p->lock);
    return shared;
}

void kipp_kv_pool_stats(kipp_kv_pool *p, kipp_pool_stats *out) {
    pthread_mutex_lock(&p->lock);
    out->block_positions = KIPP_KV_BLOCK;
    out->bytes_per_block = p->bytes_per_block;
    out->blocks_total = p->n_blocks;
    out->blocks_free = p->n_free + p->n_cached;
    out->blocks_cached = p->n_cached;
    out->blocks_held = p->n_blocks - p->n_free - p->n_cached;
    out->reused_blocks = p->reused_blocks;
    out->evicted_blocks = p->evicted_blocks;
    out->published_blocks = p->published_blocks;
    pthread_mutex_unlock(&p->lock);
}
