/* The shared-prefix block pool (DESIGN §6): bookkeeping only; the K/V bytes
 * of block b live in the backend (kv_create / kv_copy in backend.h).
 *
 * Every block is in exactly one state:
 *   free       never written or released unpublished: on the free stack
 *   held       refs > 0: in some session's block table
 *   cached     published and refs == 0: on the LRU list, still findable
 * A full block is published under key = hash(parent's key, its 32 token
 * ids). A lookup takes a hash bucket and then compares the stored parent
 * (block id AND its publication generation) and the 32 ids, so equality is
 * exact by induction from the root: a hash collision can never alias two
 * prefixes. Evicting a block bumps its generation, which orphans (makes
 * unreachable) every child published under it; orphans age out of the LRU.
 * A session's partial last block (n < 32 positions) may be published too,
 * as a *tail*: keyed by its parent, n and its n ids, never a parent
 * itself. A new session adopts the tail by copying its n positions into a
 * private block; the session that published it in place copies it before
 * appending (session.c). Published blocks, full or tail, are immutable, so
 * the block a session appends to is always private to it.
 * Every published block is also on its parent's child list, which the
 * tail match scans for the longest common prefix of the next ids (a full
 * child's first positions serve as well as a tail).
 *
 * Thread-safe: every call takes the pool's mutex (sessions of one model may
 * be used from different threads). */
#ifndef KIPP_KV_POOL_H
#define KIPP_KV_POOL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/kv.h"
#include "kipp.h"

#define KIPP_KV_NO_BLOCK UINT32_MAX

typedef struct kipp_kv_pool {
    pthread_mutex_t lock;
    kipp_kv_quant quant;
    uint32_t n_blocks;
    uint64_t bytes_per_block; /* K+V of 32 positions over all layers */
    uint32_t *refs;       /* [n_blocks] sessions holding the block */
    uint8_t *published;   /* [n_blocks] */
    uint32_t *gen;        /* [n_blocks] bumped at eviction: children's parent check */
    uint64_t *key;        /* [n_blocks] chained key of a published block */
    uint32_t *parent;     /* [n_blocks] parent block (KIPP_KV_NO_BLOCK = root) */
    uint32_t *parent_gen; /* [n_blocks] parent's gen when this block was published */
    int32_t *tokens;      /* [n_blocks][32] ids of a published block */
    uint8_t *fill;        /* [n_blocks] positions a published block holds: 32, or 1..31 (tail) */
    uint32_t *child_head; /* [n_blocks] first published child (NONE) */
    uint32_t root_head;   /* first published block without a parent */
    uint32_t *sib_prev, *sib_next; /* [n_blocks] siblings on the parent's child list */
    uint32_t *bucket;     /* [n_buckets] first block of each hash chain */
    uint32_t *hnext;      /* [n_blocks] next block in the same hash chain */
    uint32_t bucket_mask;
    uint32_t *lru_prev, *lru_next; /* [n_blocks] cached blocks, oldest at lru_head */
    uint32_t lru_head, lru_tail;
    uint32_t *free_stack; /* [n_blocks] */
    uint32_t n_free, n_cached;
    uint64_t reused_blocks, evicted_blocks, published_blocks;
    /* TEST HOOK: keys are and-ed with this (all ones normally; 0 makes
     * every key collide). */
    uint64_t hash_mask;
} kipp_kv_pool;

int kipp_kv_pool_create(kipp_kv_pool *p, uint32_t n_blocks, kipp_kv_quant quant,
                        uint64_t bytes_per_block, kipp_error *err);
void kipp_kv_pool_destroy(kipp_kv_pool *p);

/* Blocks an allocation can get now: free + cached (evictable). */
uint32_t kipp_kv_pool_available(kipp_kv_pool *p);
/* n private blocks (refs = 1) into out[], all or none: free ones first, then
 * the least recently used cached ones are evicted. KIPP_E_POOL_EXHAUSTED
 * (nothing changed) when fewer than n are available. */
int kipp_kv_pool_alloc(kipp_kv_pool *p, uint32_t n, uint32_t *out, kipp_error *err);
/* Drops one reference from each of blocks[0..n). Released from the last to
 * the first, so a chain's root ends up most recently used and its leaves are
 * evicted before it (a child without its parent is unreachable). */
void kipp_kv_pool_release(kipp_kv_pool *p, const uint32_t *blocks, uint32_t n);
/* Longest published chain matching the full 32-token blocks of
 * tokens[0..min(n, max_len)); when `take`, a reference to each is taken and
 * its id written to out[]. Returns the number of blocks. When tail_len is
 * not NULL, the published child of the chain's end (full or tail) sharing
 * the longest run of the next ids (at most 31, within max_len) is reported
 * in *tail_block / *tail_len (0: none); with `take` it is referenced too
 * and the caller copies its first *tail_len positions, then releases it. */
uint32_t kipp_kv_pool_match(kipp_kv_pool *p, const int32_t *tokens, size_t n, uint64_t max_len,
                            bool take, uint32_t *out, uint32_t *tail_block, uint32_t *tail_len);
/* Publishes table[first..n_full) (full blocks; table[0..first) already
 * published) with their token ids tokens[0 .. n_full*32). A block whose
 * prefix is already published by someone else is swapped for that one
 * (identical bytes, since the K/V of a position depend only on the tokens
 * up to it) and the private copy released. Returns how many leading
 * blocks of the table are now published. */
uint32_t kipp_kv_pool_publish(kipp_kv_pool *p, uint32_t *table, uint32_t first,
                              uint32_t n_full, const int32_t *tokens);
/* Publishes table[n_full], a session's partial last block holding n_tail
 * (1..31) positions with ids tail_ids, as the tail child of table[n_full-1]
 * (the root when n_full is 0), which must be published. Nothing is
 * published when the block already is, or when a published child already
 * starts with these ids. Returns true if table[n_full] is now published
 * (the session must copy it before appending). */
bool kipp_kv_pool_publish_tail(kipp_kv_pool *p, const uint32_t *table, uint32_t n_full,
                               uint32_t n_tail, const int32_t *tail_ids);
/* TEST HOOK: take the given currently-free blocks, in this order (refs = 1).
 * KIPP_E_ARGUMENT if one is not free or appears twice. */
int kipp_kv_pool_take(kipp_kv_pool *p, const uint32_t *blocks, uint32_t n, kipp_error *err);
/* True if block b is shared state (published or held twice): immutable. */
bool kipp_kv_pool_is_shared(kipp_kv_pool *p, uint32_t b);
void kipp_kv_pool_stats(kipp_kv_pool *p, kipp_pool_stats *out);

#endif
