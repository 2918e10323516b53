/* Host K/V storage for a pool (see kv.h). The ref and cpu backends own one
 * per KV format; it is allocated once, when the pool is created. calloc
 * leaves untouched pages uncommitted, so a large pool costs memory only as
 * its blocks are first written. */
#include "core/kv.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/common.h"

size_t kipp_kv_bytes_per_position(uint32_t layers, kipp_kv_quant quant) {
    /* K and V per layer: one [8][128] BF16 row each (4096 B together), or
     * 32 Q8_0 blocks each (2176 B together). */
    size_t row = quant == KIPP_KV_Q8_0 ? KIPP_KV_ROW_QBLOCKS * sizeof(kipp_block_q8_0)
                                       : KIPP_KV_ROW * sizeof(uint16_t);
    return (size_t)layers * 2 * row;
}

int kipp_kv_store_create(kipp_kv_store *st, uint32_t layers, uint32_t n_blocks,
                         kipp_kv_quant quant, kipp_error *err) {
    if (!st) return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_kv_store_create: NULL store");
    memset(st, 0, sizeof *st);
    if (layers == 0 || n_blocks == 0)
        return kipp_fail(err, KIPP_E_ARGUMENT,
                         "KV store needs at least one layer and one block "
                         "(layers %u, blocks %u)", layers, n_blocks);
    if (quant != KIPP_KV_BF16 && quant != KIPP_KV_Q8_0)
        return kipp_fail(err, KIPP_E_ARGUMENT, "unknown KV cache format %d", (int)quant);
    /* Positions per store: layers * n_blocks * 32; each holds one row of
     * 1024 bf16 values or 32 Q8_0 blocks. */
    size_t positions, row_bytes, bytes;
    row_bytes = quant == KIPP_KV_BF16 ? KIPP_KV_ROW * sizeof(uint16_t)
                                      : KIPP_KV_ROW_QBLOCKS * sizeof(kipp_block_q8_0);
    if (!kipp_mul_size(layers, (size_t)n_blocks * KIPP_KV_BLOCK, &positions) ||
        !kipp_mul_size(positions, row_bytes, &bytes) || bytes > SIZE_MAX / 2)
        return kipp_fail(err, KIPP_E_MEMORY, "KV store size overflows (layers %u, blocks %u)",
                         layers, n_blocks);
    void *k = kipp_calloc(bytes, 1, err);
    void *v = k ? kipp_calloc(bytes, 1, err) : NULL;
    uint8_t *resident = v ? kipp_calloc(n_blocks, 1, err) : NULL;
    if (!resident) {
        free(k);
        free(v);
        return kipp_fail_prefix(err, "KV pool of %u blocks x %u layers", n_blocks, layers);
    }
    st->resident = resident;
    if (quant == KIPP_KV_BF16) {
        st->k = k;
        st->v = v;
    } else {
        st->kq = k;
        st->vq = v;
    }
    st->layers = layers;
    st->n_blocks = n_blocks;
    st->quant = quant;
    st->store_bytes = 2 * bytes;
    return KIPP_OK;
}

void kipp_kv_store_destroy(kipp_kv_store *st) {
    if (!st) return;
    free(st->k);
    free(st->v);
    free(st->kq);
    free(st->vq);
    free(st->resident);
    memset(st, 0, sizeof *st);
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older kernels answer EINVAL */
#endif

/* Populates the pages under [p, p + n), widened to whole pages: calloc's
 * large blocks are page-aligned mappings of their own, and a widened edge
 * stays inside the same allocation's pages or is refused harmlessly. */
static void populate(const void *p, size_t n) {
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0) page = 4096;
    uintptr_t b = (uintptr_t)p & ~(uintptr_t)(page - 1);
    uintptr_t e = ((uintptr_t)p + n + (uintptr_t)page - 1) & ~(uintptr_t)(page - 1);
    (void)madvise((void *)b, e - b, MADV_POPULATE_WRITE); /* a hint: failure changes nothing */
}

void kipp_kv_store_prefault(kipp_kv_store *st, uint32_t block) {
    if (!st->resident || block >= st->n_blocks || st->resident[block]) return;
    st->resident[block] = 1;
    /* The block's 32 rows of each (layer, head) plane are one piece: 8 KiB
     * BF16, 4,352 bytes Q8_0 (then widened to whole pages). */
    const uint32_t table = block;
    for (uint32_t l = 0; l < st->layers; l++)
        for (uint32_t h = 0; h < KIPP_KV_HEADS; h++) {
            size_t off = kipp_kv_head_offset(st, &table, l, 0, h);
            if (st->quant == KIPP_KV_Q8_0) {
                size_t n = (size_t)KIPP_KV_BLOCK * KIPP_KV_HEAD_QBLOCKS * sizeof(kipp_block_q8_0);
                populate(st->kq + off / KIPP_QBLOCK, n);
                populate(st->vq + off / KIPP_QBLOCK, n);
            } else {
                size_t n = (size_t)KIPP_KV_BLOCK * KIPP_HEAD_DIM * sizeof(uint16_t);
                populate(st->k + off, n);
                populate(st->v + off, n);
            }
        }
}

void kipp_kv_store_copy(kipp_kv_store *st, uint32_t dst, uint32_t src, uint32_t n_positions) {
    /* Per (layer, head) plane, one contiguous run of n_positions rows. */
    kipp_kv_store_prefault(st, dst);
    for (uint32_t l = 0; l < st->layers; l++)
        for (uint32_t h = 0; h < KIPP_KV_HEADS; h++) {
            size_t d = kipp_kv_head_offset(st, &dst, l, 0, h);
            size_t s = kipp_kv_head_offset(st, &src, l, 0, h);
            if (st->quant == KIPP_KV_Q8_0) {
                size_t n = (size_t)n_positions * KIPP_KV_HEAD_QBLOCKS * sizeof(kipp_block_q8_0);
                memcpy(st->kq + d / KIPP_QBLOCK, st->kq + s / KIPP_QBLOCK, n);
                memcpy(st->vq + d / KIPP_QBLOCK, st->vq + s / KIPP_QBLOCK, n);
            } else {
                size_t n = (size_t)n_positions * KIPP_HEAD_DIM * sizeof(uint16_t);
                memcpy(st->k + d, st->k + s, n);
                memcpy(st->v + d, st->v + s, n);
            }
        }
}

void kipp_kv_write(kipp_kv_store *st, const uint32_t *table, uint32_t layer, uint32_t pos,
                   const float *k, const float *v) {
    for (uint32_t h = 0; h < KIPP_KV_HEADS; h++) {
        size_t off = kipp_kv_head_offset(st, table, layer, pos, h);
        const float *kh = k + (size_t)h * KIPP_HEAD_DIM, *vh = v + (size_t)h * KIPP_HEAD_DIM;
        if (st->quant == KIPP_KV_Q8_0) { /* a head is 4 whole Q8_0 blocks */
            kipp_quantize_q8_0(kh, KIPP_HEAD_DIM, st->kq + off / KIPP_QBLOCK);
            kipp_quantize_q8_0(vh, KIPP_HEAD_DIM, st->vq + off / KIPP_QBLOCK);
            continue;
        }
        for (size_t i = 0; i < KIPP_HEAD_DIM; i++) {
            st->k[off + i] = kipp_f32_to_bf16(kh[i]);
            st->v[off + i] = kipp_f32_to_bf16(vh[i]);
        }
    }
}

void kipp_kv_load_head(const kipp_kv_store *st, const uint32_t *table, int which,
                       uint32_t layer, uint32_t pos, uint32_t kv_head, float *out) {
    size_t off = kipp_kv_head_offset(st, table, layer, pos, kv_head);
    if (st->quant == KIPP_KV_Q8_0) {
        kipp_dequantize_q8_0((which ? st->vq : st->kq) + off / KIPP_QBLOCK, KIPP_HEAD_DIM, out);
        return;
    }
    const uint16_t *h = (which ? st->v : st->k) + off;
    for (int i = 0; i < KIPP_HEAD_DIM; i++) out[i] = kipp_bf16_to_f32(h[i]);
}
