/* Paged KV cache storage (DESIGN §6).
 *
 * A session's K and V live in BF16 with logical layout
 * [layer][position][kv_head][head_dim]. Positions are grouped in 32-position
 * blocks; a per-session block table maps logical block -> physical block, so
 *   physical position = table[pos >> 5] * 32 + (pos & 31).
 * A scrambled table must give bitwise the same logits as the identity table,
 * which the tests check. Storage is allocated once, at session creation. */
#ifndef KIPP_KV_H
#define KIPP_KV_H

#include <stddef.h>
#include <stdint.h>

#include "kipp.h"

#define KIPP_KV_BLOCK 32
#define KIPP_KV_ROW (KIPP_KV_HEADS * KIPP_HEAD_DIM) /* values per position */

typedef struct kipp_kv_cache {
    uint32_t layers;
    uint32_t capacity;     /* logical positions the session may hold */
    uint32_t n_blocks;     /* ceil(capacity / 32) physical blocks */
    uint32_t *block_table; /* [n_blocks]: logical block -> physical block */
    uint16_t *k;           /* [layers][n_blocks * 32][8][128] bf16 */
    uint16_t *v;           /* same shape as k */
    uint32_t length;       /* positions currently filled */
} kipp_kv_cache;

int kipp_kv_create(kipp_kv_cache *kv, uint32_t layers, uint32_t capacity,
                   kipp_error *err);
void kipp_kv_destroy(kipp_kv_cache *kv);
/* Bytes of K+V storage per cached position. */
size_t kipp_kv_bytes_per_position(const kipp_kv_cache *kv);

/* Offset (in uint16 elements) of the [8][128] row for (layer, pos). */
static inline size_t kipp_kv_row_offset(const kipp_kv_cache *kv, uint32_t layer,
                                        uint32_t pos) {
    size_t physical = (size_t)kv->block_table[pos / KIPP_KV_BLOCK] * KIPP_KV_BLOCK +
                      pos % KIPP_KV_BLOCK;
    size_t positions_per_layer = (size_t)kv->n_blocks * KIPP_KV_BLOCK;
    return ((size_t)layer * positions_per_layer + physical) * KIPP_KV_ROW;
}

#endif
