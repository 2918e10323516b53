/* Paged KV cache (DESIGN §6): what core keeps per session, and the host
 * storage that the ref and cpu backends own.
 *
 * K/V bytes live in one model-level pool of 32-position blocks (one pool per
 * KV format in use), allocated and owned by the backend (kv_create in
 * backend.h). Core (core/kv_pool.c, core/session.c) hands out block ids and
 * keeps each session's length, capacity and block table; it never touches
 * K/V bytes. A position maps to memory as
 *   physical position = table[pos >> 5] * 32 + (pos & 31)
 * and a scrambled table must give bitwise the same logits as the identity.
 *
 * Host storage layout (kipp_kv_store), logical [layer][position][kv_head]
 * [head_dim] with the pool's physical positions, stored head-plane-major:
 * one plane per (layer, kv head) holding the pool's n_blocks * 32 physical
 * positions of that head in order, [layers][8][n_blocks * 32][128 values].
 *   BF16  (default): k/v hold uint16 bf16 values, 256 bytes per head row.
 *   Q8_0  (opt-in):  kq/vq hold ggml Q8_0 blocks along head_dim, 4 per head
 *         row (136 bytes); offsets count BF16-equivalent elements (divide
 *         by 32 for blocks). 1.88x fewer bytes than BF16.
 * Attention reads one KV head of one layer at a time, position by
 * position. In a session whose blocks are consecutive (a fresh one), that
 * head's whole history is one contiguous stream; across a scrambled table
 * it is a run of 32-row pieces (8 KiB BF16). Until stop 39 a layer's plane
 * was block-major ([n_blocks][8 heads][32][128]): a head's 8 KiB block
 * pieces lay 64 KiB apart, and decode attention out of cache streamed
 * ~20-25 GB/s (two threads, Zen 5) against ~35-40 GB/s over contiguous
 * rows (docs/CPU-JOURNAL.md "Stop 39"). kipp_kv_head_offset is the one
 * address computation; the logical layout, the block table and DESIGN
 * section 6's physical-position formula are unchanged, and so are the
 * bits. */
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

/* One session's view of the pool, kept by core and read by the backend. */
typedef struct kipp_kv_cache {
    uint32_t capacity;     /* positions the session may hold: a limit, not a reservation */
    uint32_t length;       /* positions currently filled */
    uint32_t n_blocks;     /* blocks held: table[0..n_blocks) are valid */
    uint32_t max_blocks;   /* ceil(capacity / 32): size of the table */
    uint32_t *block_table; /* [max_blocks]: logical block -> physical pool block */
    kipp_kv_quant quant;   /* format of the pool the blocks belong to */
} kipp_kv_cache;

/* Host K/V storage for one pool (backend-owned). Exactly one pair of
 * pointers is non-NULL. */
typedef struct kipp_kv_store {
    uint32_t layers;
    uint32_t n_blocks;     /* pool blocks */
    kipp_kv_quant quant;
    uint16_t *k, *v;       /* BF16: [layers][8][n_blocks * 32][128]; else NULL */
    kipp_block_q8_0 *kq, *vq; /* Q8_0: [layers][8][n_blocks * 32][4]; else NULL */
    size_t store_bytes;    /* K and V together */
    uint8_t *resident;     /* [n_blocks]: 1 once kipp_kv_store_prefault ran on the block */
} kipp_kv_store;

/* Bytes of K+V per cached position over all layers. */
size_t kipp_kv_bytes_per_position(uint32_t layers, kipp_kv_quant quant);

int kipp_kv_store_create(kipp_kv_store *st, uint32_t layers, uint32_t n_blocks,
                         kipp_kv_quant quant, kipp_error *err);
void kipp_kv_store_destroy(kipp_kv_store *st);
/* Makes block `block`'s pages resident in every layer (K and V) before its
 * first write, in one madvise(MADV_POPULATE_WRITE) per (layer, head) piece
 * (8 KiB BF16); later calls for the block return at once. A page faulted
 * in by a first store cost ~14 us here (a virtual machine) against ~0.6 us
 * populated 64 KiB at a time, and a prefill writes 4 KiB of new K/V per
 * position and layer.
 * The pool stays lazily committed: only blocks in use become resident.
 * Where the kernel lacks MADV_POPULATE_WRITE (before Linux 5.14) this does
 * nothing and the stores fault the pages in as before. */
void kipp_kv_store_prefault(kipp_kv_store *st, uint32_t block);
/* Copies positions [0, n_positions) of block src to block dst, every layer. */
void kipp_kv_store_copy(kipp_kv_store *st, uint32_t dst, uint32_t src, uint32_t n_positions);

/* Element offset of the first value of (layer, pos, kv head `head`) for a
 * session whose block table is `table`: uint16 elements for BF16, or
 * BF16-equivalent elements for Q8_0 (divide by 32 for blocks). The head's
 * 128 values follow; the same head's next position in the block is
 * kipp_kv_pos_stride further on. */
static inline size_t kipp_kv_head_offset(const kipp_kv_store *st, const uint32_t *table,
                                         uint32_t layer, uint32_t pos, uint32_t head) {
    size_t plane = (size_t)layer * KIPP_KV_HEADS + head; /* (layer, head) */
    size_t phys = (size_t)table[pos / KIPP_KV_BLOCK] * KIPP_KV_BLOCK + pos % KIPP_KV_BLOCK;
    return (plane * st->n_blocks * KIPP_KV_BLOCK + phys) * KIPP_HEAD_DIM;
}

/* Elements from one position of a head to the next (within a block; BF16
 * or BF16-equivalent). */
static inline size_t kipp_kv_pos_stride(const kipp_kv_store *st) {
    (void)st;
    return KIPP_HEAD_DIM;
}

/* Store one position's K and V rows (1024 FP32 values each, [8][128]) in the
 * store's format: BF16 round-to-nearest-even, or Q8_0 against the
 * fp16-rounded scale. */
void kipp_kv_write(kipp_kv_store *st, const uint32_t *table, uint32_t layer, uint32_t pos,
                   const float *k, const float *v);
/* Decode one head (128 values) of K (which = 0) or V (which = 1) at
 * (layer, pos) to FP32. Exact for BF16; d * q for Q8_0. */
void kipp_kv_load_head(const kipp_kv_store *st, const uint32_t *table, int which,
                       uint32_t layer, uint32_t pos, uint32_t kv_head, float *out);

#endif
