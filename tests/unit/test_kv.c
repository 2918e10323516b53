/* Host KV storage of a pool: sizes, the block-table mapping and the
 * argument checks of kipp_kv_store_create; the pool itself is
 * tests/unit/test_kv_pool.c. */
#include "test_util.h"

#include "core/kv.h"

int main(void) {
    kipp_error err = {0};
    kipp_kv_store st;

    CHECK(kipp_kv_store_create(&st, 2, 0, KIPP_KV_BF16, &err) == KIPP_E_ARGUMENT);
    CHECK(kipp_kv_store_create(&st, 0, 10, KIPP_KV_BF16, &err) == KIPP_E_ARGUMENT);

    /* 28 layers: 28 * 2 * 8 * 128 * 2 = 114,688 bytes per position (DESIGN §6). */
    CHECK(kipp_kv_bytes_per_position(28, KIPP_KV_BF16) == 114688);
    CHECK(kipp_kv_store_create(&st, 28, 1, KIPP_KV_BF16, &err) == KIPP_OK);
    CHECK(st.store_bytes == (size_t)114688 * 32);
    kipp_kv_store_destroy(&st);
    CHECK(st.k == NULL && st.v == NULL);

    /* A pool of 3 blocks, 3 layers: 96 physical positions per layer. */
    CHECK(kipp_kv_store_create(&st, 3, 3, KIPP_KV_BF16, &err) == KIPP_OK);
    uint32_t identity[3] = {0, 1, 2};
    /* Identity mapping: (layer, pos) -> ((layer * 96) + pos) * 1024. */
    CHECK(kipp_kv_row_offset(&st, identity, 0, 0) == 0);
    CHECK(kipp_kv_row_offset(&st, identity, 0, 33) == 33 * 1024);
    CHECK(kipp_kv_row_offset(&st, identity, 2, 64) == (2 * 96 + 64) * 1024);

    /* A scrambled table moves whole blocks and keeps the offset inside one. */
    uint32_t table[3] = {2, 0, 1};
    CHECK(kipp_kv_row_offset(&st, table, 0, 5) == (2 * 32 + 5) * 1024);
    CHECK(kipp_kv_row_offset(&st, table, 0, 37) == (0 * 32 + 5) * 1024);
    CHECK(kipp_kv_row_offset(&st, table, 1, 64) == (96 + 32) * 1024);

    /* Every (layer, pos) under the permutation lands inside the store and
     * no two collide. */
    size_t elems = (size_t)3 * 96 * 1024;
    unsigned char *seen = calloc(elems / 1024, 1);
    int collisions = 0, outside = 0;
    for (uint32_t l = 0; l < 3; l++)
        for (uint32_t p = 0; p < 96; p++) {
            size_t off = kipp_kv_row_offset(&st, table, l, p);
            if (off + 1024 > elems) { outside++; continue; }
            if (seen[off / 1024]++) collisions++;
        }
    CHECK(collisions == 0 && outside == 0);
    free(seen);
    st.k[elems - 1] = 1; /* last element is writable (ASan checks the size) */
    st.v[elems - 1] = 1;

    /* kv_copy of a block head: positions [0, 5) of block 2 into block 0, all
     * layers; position 5 and other blocks untouched. */
    for (size_t i = 0; i < elems; i++) st.k[i] = st.v[i] = (uint16_t)(i * 7 + 1);
    kipp_kv_store_copy(&st, 0, 2, 5);
    int bad = 0;
    for (uint32_t l = 0; l < 3; l++)
        for (uint32_t p = 0; p < 32; p++)
            for (size_t e = 0; e < 1024; e += 97) {
                uint32_t b0 = 0, b2 = 2;
                size_t d = kipp_kv_row_offset(&st, &b0, l, p) + e;
                size_t s = kipp_kv_row_offset(&st, &b2, l, p) + e;
                uint16_t want = p < 5 ? (uint16_t)(s * 7 + 1) : (uint16_t)(d * 7 + 1);
                bad += st.k[d] != want || st.v[d] != want;
            }
    CHECKF(bad == 0, "%d elements wrong after kv_copy", bad);
    kipp_kv_store_destroy(&st);

    /* Absurd sizes fail cleanly instead of wrapping. */
    CHECK(kipp_kv_store_create(&st, UINT32_MAX, UINT32_MAX, KIPP_KV_BF16, &err) != KIPP_OK);
    kipp_kv_store_destroy(&st);
    return test_finish("test_kv");
}
