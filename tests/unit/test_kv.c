/* Paged KV storage: sizes, block rounding, the block-table mapping and the
 * argument checks of kipp_kv_create. */
#include "test_util.h"

#include "core/kv.h"

int main(void) {
    kipp_error err = {0};
    kipp_kv_cache kv;

    CHECK(kipp_kv_create(&kv, 2, 0, &err) == KIPP_E_ARGUMENT);
    CHECK(kipp_kv_create(&kv, 0, 10, &err) == KIPP_E_ARGUMENT);

    /* 28 layers: 28 * 2 * 8 * 128 * 2 = 114,688 bytes per position (DESIGN §6). */
    CHECK(kipp_kv_create(&kv, 28, 1, &err) == KIPP_OK);
    CHECK(kipp_kv_bytes_per_position(&kv) == 114688);
    CHECK(kv.n_blocks == 1 && kv.capacity == 1 && kv.length == 0);
    kipp_kv_destroy(&kv);
    CHECK(kv.k == NULL && kv.v == NULL && kv.block_table == NULL);

    /* Capacity rounds up to whole 32-position blocks; the table starts as
     * the identity. */
    CHECK(kipp_kv_create(&kv, 3, 65, &err) == KIPP_OK);
    CHECK(kv.n_blocks == 3);
    for (uint32_t b = 0; b < kv.n_blocks; b++) CHECK(kv.block_table[b] == b);

    /* Identity mapping: (layer, pos) -> ((layer * 96) + pos) * 1024. */
    CHECK(kipp_kv_row_offset(&kv, 0, 0) == 0);
    CHECK(kipp_kv_row_offset(&kv, 0, 33) == 33 * 1024);
    CHECK(kipp_kv_row_offset(&kv, 2, 64) == (2 * 96 + 64) * 1024);

    /* A scrambled table moves whole blocks and keeps the offset inside one. */
    kv.block_table[0] = 2;
    kv.block_table[1] = 0;
    kv.block_table[2] = 1;
    CHECK(kipp_kv_row_offset(&kv, 0, 5) == (2 * 32 + 5) * 1024);
    CHECK(kipp_kv_row_offset(&kv, 0, 37) == (0 * 32 + 5) * 1024);
    CHECK(kipp_kv_row_offset(&kv, 1, 64) == (96 + 32) * 1024);

    /* Every (layer, pos) under any permutation lands inside the store and
     * no two collide. */
    size_t elems = (size_t)3 * 96 * 1024;
    unsigned char *seen = calloc(elems / 1024, 1);
    int collisions = 0, outside = 0;
    for (uint32_t l = 0; l < 3; l++)
        for (uint32_t p = 0; p < 96; p++) {
            size_t off = kipp_kv_row_offset(&kv, l, p);
            if (off + 1024 > elems) { outside++; continue; }
            if (seen[off / 1024]++) collisions++;
        }
    CHECK(collisions == 0 && outside == 0);
    free(seen);
    kv.k[elems - 1] = 1; /* last element is writable (ASan checks the size) */
    kv.v[elems - 1] = 1;
    kipp_kv_destroy(&kv);

    /* Absurd sizes fail cleanly instead of wrapping. */
    CHECK(kipp_kv_create(&kv, UINT32_MAX, UINT32_MAX, &err) != KIPP_OK);
    kipp_kv_destroy(&kv);
    return test_finish("test_kv");
}
