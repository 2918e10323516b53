/* Paged KV cache storage (see kv.h for the layout). Everything is allocated
 * here, once, at session creation; appending a token never allocates. */
#include "core/kv.h"

#include <stdlib.h>
#include <string.h>

#include "core/common.h"

int kipp_kv_create(kipp_kv_cache *kv, uint32_t layers, uint32_t capacity,
                   kipp_error *err) {
    return kipp_kv_create_quant(kv, layers, capacity, KIPP_KV_BF16, err);
}

int kipp_kv_create_quant(kipp_kv_cache *kv, uint32_t layers, uint32_t capacity,
                         kipp_kv_quant quant, kipp_error *err) {
    if (!kv) return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_kv_create: NULL cache");
    memset(kv, 0, sizeof *kv);
    if (layers == 0 || capacity == 0)
        return kipp_fail(err, KIPP_E_ARGUMENT,
                         "KV cache needs at least one layer and one position "
                         "(layers %u, capacity %u)", layers, capacity);
    if (quant != KIPP_KV_BF16 && quant != KIPP_KV_Q8_0)
        return kipp_fail(err, KIPP_E_ARGUMENT, "unknown KV cache format %d", (int)quant);
    uint32_t n_blocks = capacity / KIPP_KV_BLOCK + (capacity % KIPP_KV_BLOCK != 0);

    /* Positions per store: layers * n_blocks * 32; each holds one row of
     * 1024 bf16 values or 32 Q8_0 blocks. */
    size_t positions, row_bytes, bytes;
    row_bytes = quant == KIPP_KV_BF16 ? KIPP_KV_ROW * sizeof(uint16_t)
                                      : KIPP_KV_ROW_QBLOCKS * sizeof(kipp_block_q8_0);
    if (!kipp_mul_size(layers, (size_t)n_blocks * KIPP_KV_BLOCK, &positions) ||
        !kipp_mul_size(positions, row_bytes, &bytes) || bytes > SIZE_MAX / 2)
        return kipp_fail(err, KIPP_E_MEMORY, "KV cache size overflows (layers %u, capacity %u)",
                         layers, capacity);

    kv->block_table = kipp_calloc(n_blocks, sizeof *kv->block_table, err);
    void *k = kv->block_table ? kipp_calloc(bytes, 1, err) : NULL;
    void *v = k ? kipp_calloc(bytes, 1, err) : NULL;
    if (quant == KIPP_KV_BF16) {
        kv->k = k;
        kv->v = v;
    } else {
        kv->kq = k;
        kv->vq = v;
    }
    if (!v) {
        free(k);
        kv->k = kv->v = NULL;
        kv->kq = kv->vq = NULL;
        kipp_kv_destroy(kv);
        return kipp_fail_prefix(err, "KV cache for %u positions x %u layers", capacity, layers);
    }
    for (uint32_t b = 0; b < n_blocks; b++) kv->block_table[b] = b; /* identity */
    kv->layers = layers;
    kv->capacity = capacity;
    kv->n_blocks = n_blocks;
    kv->quant = quant;
    kv->store_bytes = 2 * bytes;
    kv->length = 0;
    return KIPP_OK;
}

void kipp_kv_destroy(kipp_kv_cache *kv) {
    if (!kv) return;
    free(kv->block_table);
    free(kv->k);
    free(kv->v);
    free(kv->kq);
    free(kv->vq);
    memset(kv, 0, sizeof *kv);
}

size_t kipp_kv_bytes_per_position(const kipp_kv_cache *kv) {
    /* K and V per layer: one [8][128] BF16 row each (4096 B together), or
     * 32 Q8_0 blocks each (2176 B together). */
    size_t row = kv->quant == KIPP_KV_Q8_0 ? KIPP_KV_ROW_QBLOCKS * sizeof(kipp_block_q8_0)
                                           : KIPP_KV_ROW * sizeof(uint16_t);
    return (size_t)kv->layers * 2 * row;
}

void kipp_kv_store(kipp_kv_cache *kv, uint32_t layer, uint32_t pos, const float *k,
                   const float *v) {
    if (kv->quant == KIPP_KV_Q8_0) {
        /* 1024 values = 32 blocks; every head (128) is 4 whole blocks. */
        size_t off = kipp_kv_qrow_offset(kv, layer, pos);
        kipp_quantize_q8_0(k, KIPP_KV_ROW, kv->kq + off);
        kipp_quantize_q8_0(v, KIPP_KV_ROW, kv->vq + off);
        return;
    }
    size_t off = kipp_kv_row_offset(kv, layer, pos);
    for (size_t i = 0; i < KIPP_KV_ROW; i++) {
        kv->k[off + i] = kipp_f32_to_bf16(k[i]);
        kv->v[off + i] = kipp_f32_to_bf16(v[i]);
    }
}

void kipp_kv_load_head(const kipp_kv_cache *kv, int which, uint32_t layer, uint32_t pos,
                       uint32_t kv_head, float *out) {
    if (kv->quant == KIPP_KV_Q8_0) {
        const kipp_block_q8_0 *b = (which ? kv->vq : kv->kq) + kipp_kv_qrow_offset(kv, layer, pos) +
                                   (size_t)kv_head * KIPP_KV_HEAD_QBLOCKS;
        kipp_dequantize_q8_0(b, KIPP_HEAD_DIM, out);
        return;
    }
    const uint16_t *h = (which ? kv->v : kv->k) + kipp_kv_row_offset(kv, layer, pos) +
                        (size_t)kv_head * KIPP_HEAD_DIM;
    for (int i = 0; i < KIPP_HEAD_DIM; i++) out[i] = kipp_bf16_to_f32(h[i]);
}
