/* Paged KV cache storage (DESIGN §6).
 *
 * A session's K and V have logical layout [layer][position][kv_head][head_dim].
 * Positions are grouped in 32-position blocks; a per-session block table maps
 * logical block -> physical block, so
 *   physical position = table[pos >> 5] * 32 + (pos & 31).
 * A scrambled table must give bitwise the same logits as the identity table,
 * which the tests check. Storage is allocated once, at session creation.
 *
 * Two element formats, chosen at creation:
 *   BF16  (default): k/v hold uint16 bf16 values, 1024 per position,
 *         2 * 8 * 128 * 2 = 4096 bytes per layer-position.
 *   Q8_0  (opt-in):  kq/vq hold ggml Q8_0 blocks along head_dim, 4 blocks per
 *         head, 32 per position: 2 * 32 * 34 = 2176 bytes per layer-position
 *         (1.88x less). Same block table, same physical position mapping; the
 *         row offset in blocks is the BF16 element offset / 32.
 * Exactly one pair of pointers is non-NULL. */
#ifndef KIPP_KV_H
#define KIPP_KV_H

#include <stddef.h>
#include <stdint.h>

#include "core/quant.h"
#include "kipp.h"

#define KIPP_KV_BLOCK 32
#define KIPP_KV_ROW (KIPP_KV_HEADS * KIPP_HEAD_DIM)      /* values per position */
#define KIPP_KV_ROW_QBLOCKS (KIPP_KV_ROW / KIPP_QBLOCK)  /* Q8_0 blocks per position: 32 */
#define KIPP_KV_HEAD_QBLOCKS (KIPP_HEAD_DIM / KIPP_QBLOCK) /* Q8_0 blocks per head: 4 */

typedef struct kipp_kv_cache {
    uint32_t layers;
    uint32_t capacity;     /* logical positions the session may hold */
    uint32_t n_blocks;     /* ceil(capacity / 32) physical blocks */
    uint32_t *block_table; /* [n_blocks]: logical block -> physical block */
    kipp_kv_quant quant;   /* element format of the stores below */
    uint16_t *k;           /* BF16: [layers][n_blocks * 32][8][128] bf16; else NULL */
    uint16_t *v;           /* same shape as k */
    kipp_block_q8_0 *kq;   /* Q8_0: [layers][n_blocks * 32][8][4] blocks; else NULL */
    kipp_block_q8_0 *vq;   /* same shape as kq */
    size_t store_bytes;    /* bytes allocated for K and V together */
    uint32_t length;       /* positions currently filled */
} kipp_kv_cache;

/* BF16 cache (kipp_kv_create_quant with KIPP_KV_BF16). */
int kipp_kv_create(kipp_kv_cache *kv, uint32_t layers, uint32_t capacity,
                   kipp_error *err);
int kipp_kv_create_quant(kipp_kv_cache *kv, uint32_t layers, uint32_t capacity,
                         kipp_kv_quant quant, kipp_error *err);
void kipp_kv_destroy(kipp_kv_cache *kv);
/* Bytes of K+V storage per cached position (all layers). */
size_t kipp_kv_bytes_per_position(const kipp_kv_cache *kv);

/* Offset (in uint16 elements) of the [8][128] row for (layer, pos). */
static inline size_t kipp_kv_row_offset(const kipp_kv_cache *kv, uint32_t layer,
                                        uint32_t pos) {
    size_t physical = (size_t)kv->block_table[pos / KIPP_KV_BLOCK] * KIPP_KV_BLOCK +
                      pos % KIPP_KV_BLOCK;
    size_t positions_per_layer = (size_t)kv->n_blocks * KIPP_KV_BLOCK;
    return ((size_t)layer * positions_per_layer + physical) * KIPP_KV_ROW;
}

/* Offset (in Q8_0 blocks) of the [8][4] block row for (layer, pos). */
static inline size_t kipp_kv_qrow_offset(const kipp_kv_cache *kv, uint32_t layer,
                                         uint32_t pos) {
    return kipp_kv_row_offset(kv, layer, pos) / KIPP_QBLOCK;
}

/* Store one position's K and V rows (1024 FP32 values each, [8][128]) in the
 * cache's format: BF16 round-to-nearest-even, or Q8_0 against the
 * fp16-rounded scale. */
void kipp_kv_store(kipp_kv_cache *kv, uint32_t layer, uint32_t pos, const float *k,
                   const float *v);
/* Decode one head (128 values) of K (which = 0) or V (which = 1) at
 * (layer, pos) to FP32. Exact for BF16; d * q for Q8_0. */
void kipp_kv_load_head(const kipp_kv_cache *kv, int which, uint32_t layer, uint32_t pos,
                       uint32_t kv_head, float *out);

#endif
