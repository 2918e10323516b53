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

static uint64_t block_key(const kipp_kv_pool *p, uint64_t parent_key, const int32_t *ids) {
    uint64_t h = mix(parent_key ^ 0x9e3779b97f4a7c15ull);
    for (int i = 0; i < KIPP_KV_BLOCK; i++) h = mix(h ^ (uint32_t)ids[i]);
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
    p->bucket = kipp_calloc(n_buckets, sizeof *p->bucket, err);
    p->hnext = kipp_calloc(n_blocks, sizeof *p->hnext, err);
    p->lru_prev = kipp_calloc(n_blocks, sizeof *p->lru_prev, err);
    p->lru_next = kipp_calloc(n_blocks, sizeof *p->lru_next, err);
    p->free_stack = kipp_calloc(n_blocks, sizeof *p->free_stack, err);
    if (!p->refs || !p->published || !p->gen || !p->key || !p->parent || !p->parent_gen ||
        !p->tokens || !p->bucket || !p->hnext || !p->lru_prev || !p->lru_next ||
        !p->free_stack) {
        kipp_kv_pool_destroy(p);
        return kipp_fail(err, KIPP_E_MEMORY, "KV pool: out of memory for %u blocks", n_blocks);
    }
    for (uint32_t i = 0; i < n_buckets; i++) p->bucket[i] = NONE;
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

static void unpublish(kipp_kv_pool *p, uint32_t b) {
    uint32_t *link = &p->bucket[p->key[b] & p->bucket_mask];
    while (*link != b) link = &p->hnext[*link];
    *link = p->hnext[b];
    p->published[b] = 0;
    p->gen[b]++; /* children published under b no longer match */
}

/* A reference to b, which may be cached (then it leaves the LRU list). */
static void ref_block(kipp_kv_pool *p, uint32_t b) {
    if (p->refs[b]++ == 0) lru_unlink(p, b);
}

/* The published child of (parent, parent_gen) with exactly these ids. */
static uint32_t find(const kipp_kv_pool *p, uint64_t key, uint32_t parent, uint32_t parent_gen,
                     const int32_t *ids) {
    for (uint32_t b = p->bucket[key & p->bucket_mask]; b != NONE; b = p->hnext[b])
        if (p->key[b] == key && p->parent[b] == parent && p->parent_gen[b] == parent_gen &&
            memcmp(&p->tokens[(size_t)b * KIPP_KV_BLOCK], ids, KIPP_KV_BLOCK * sizeof *ids) == 0)
            return b;
    return NONE;
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

uint32_t kipp_kv_pool_match(kipp_kv_pool *p, const int32_t *tokens, size_t n,
                            uint32_t max_blocks, bool take, uint32_t *out) {
    pthread_mutex_lock(&p->lock);
    uint32_t parent = NONE, parent_gen = 0, got = 0;
    uint64_t key = 0;
    while (got < max_blocks && (size_t)(got + 1) * KIPP_KV_BLOCK <= n) {
        const int32_t *ids = tokens + (size_t)got * KIPP_KV_BLOCK;
        key = block_key(p, key, ids);
        uint32_t b = find(p, key, parent, parent_gen, ids);
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
        uint64_t key = block_key(p, parent_key, ids);
        uint32_t b = table[i];
        uint32_t same = find(p, key, parent, parent_gen, ids);
        if (same == b) continue;
        if (same != NONE) { /* someone published this prefix first: share theirs */
            ref_block(p, same);
            table[i] = same;
            if (--p->refs[b] == 0) p->free_stack[p->n_free++] = b;
            continue;
        }
        if (p->published[b]) break; /* b is published under another parent: chain ends */
        p->published[b] = 1;
        p->key[b] = key;
        p->parent[b] = parent;
        p->parent_gen[b] = parent_gen;
        memcpy(&p->tokens[(size_t)b * KIPP_KV_BLOCK], ids, KIPP_KV_BLOCK * sizeof *ids);
        uint32_t *head = &p->bucket[key & p->bucket_mask];
        p->hnext[b] = *head;
        *head = b;
        p->published_blocks++;
    }
    pthread_mutex_unlock(&p->lock);
    return i;
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
