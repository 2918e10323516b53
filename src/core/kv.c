/* Paged KV cache storage (see kv.h for the layout). Everything is allocated
 * here, once, at session creation; appending a token never allocates. */
#include "core/kv.h"

#include <stdlib.h>
#include <string.h>

#include "core/common.h"

int kipp_kv_create(kipp_kv_cache *kv, uint32_t layers, uint32_t capacity,
                   kipp_error *err) {
    if (!kv) return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_kv_create: NULL cache");
    memset(kv, 0, sizeof *kv);
    if (layers == 0 || capacity == 0)
        return kipp_fail(err, KIPP_E_ARGUMENT,
                         "KV cache needs at least one layer and one position "
                         "(layers %u, capacity %u)", layers, capacity);
    uint32_t n_blocks = capacity / KIPP_KV_BLOCK + (capacity % KIPP_KV_BLOCK != 0);

    /* Elements per store: layers * n_blocks * 32 positions * 1024 values. */
    size_t elems;
    if (!kipp_mul_size(layers, (size_t)n_blocks * KIPP_KV_BLOCK, &elems) ||
        !kipp_mul_size(elems, KIPP_KV_ROW, &elems))
        return kipp_fail(err, KIPP_E_MEMORY, "KV cache size overflows (layers %u, capacity %u)",
                         layers, capacity);

    kv->block_table = kipp_calloc(n_blocks, sizeof *kv->block_table, err);
    kv->k = kv->block_table ? kipp_calloc(elems, sizeof *kv->k, err) : NULL;
    kv->v = kv->k ? kipp_calloc(elems, sizeof *kv->v, err) : NULL;
    if (!kv->v) {
        kipp_kv_destroy(kv);
        return kipp_fail_prefix(err, "KV cache for %u positions x %u layers", capacity, layers);
    }
    for (uint32_t b = 0; b < n_blocks; b++) kv->block_table[b] = b; /* identity */
    kv->layers = layers;
    kv->capacity = capacity;
    kv->n_blocks = n_blocks;
    kv->length = 0;
    return KIPP_OK;
}

void kipp_kv_destroy(kipp_kv_cache *kv) {
    if (!kv) return;
    free(kv->block_table);
    free(kv->k);
    free(kv->v);
    memset(kv, 0, sizeof *kv);
}

size_t kipp_kv_bytes_per_position(const kipp_kv_cache *kv) {
    /* K and V, one [8][128] BF16 row each, per layer. */
    return (size_t)kv->layers * 2 * KIPP_KV_ROW * sizeof(uint16_t);
}
