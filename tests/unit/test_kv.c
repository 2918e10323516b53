/* Host KV storage of a pool: sizes, the block-table mapping and the
 * argument checks of kipp_kv_store_create; the pool itself is
 * tests/unit/test_kv_pool.c. */
#include "test_util.h"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/kv.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* Pages of [p, p + n) resident in memory (mincore), and how many pages. */
static size_t resident_pages(const void *p, size_t n, size_t *pages) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t b = (uintptr_t)p & ~(uintptr_t)(page - 1);
    size_t len = (uintptr_t)p + n - b;
    size_t np = (len + page - 1) / page, got = 0;
    unsigned char *vec = calloc(np, 1);
    if (vec && mincore((void *)b, len, vec) == 0)
        for (size_t i = 0; i < np; i++) got += vec[i] & 1;
    free(vec);
    *pages = np;
    return got;
}

/* ThreadSanitizer's allocator hands out calloc memory already resident,
 * so under it no page of the store is "unused": residency cannot show what
 * a prefault adds. Elsewhere (plain, ASan, UBSan builds) the store must
 * stay lazily committed, and the check that says so keeps running. */
#if defined(__SANITIZE_THREAD__)
#define KV_ALLOCATOR_COMMITS 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KV_ALLOCATOR_COMMITS 1
#endif
#endif
#ifndef KV_ALLOCATOR_COMMITS
#define KV_ALLOCATOR_COMMITS 0
#endif

/* Does this kernel populate on request (Linux 5.14+)? */
static int populate_supported(void) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    void *p = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 0;
    int ok = madvise(p, page, MADV_POPULATE_WRITE) == 0;
    munmap(p, page);
    return ok;
}

/* kipp_kv_store_prefault makes exactly the block's pages resident, in every
 * (layer, head) plane, for K and V, and keeps what the block already holds.
 * A block's piece of plane (l, h) is at ((l * 8 + h) * BLOCKS + block) *
 * piece bytes (kv.h). */
static void test_prefault(kipp_kv_quant quant, int residency) {
    enum { LAYERS = 4, BLOCKS = 600 };
    kipp_error err = {0};
    kipp_kv_store st;
    CHECK(kipp_kv_store_create(&st, LAYERS, BLOCKS, quant, &err) == KIPP_OK);
    int q8 = quant == KIPP_KV_Q8_0;
    const char *name = q8 ? "q8_0" : "bf16";
    size_t piece = q8 ? (size_t)KIPP_KV_BLOCK * KIPP_KV_HEAD_QBLOCKS * sizeof(kipp_block_q8_0)
                      : (size_t)KIPP_KV_BLOCK * KIPP_HEAD_DIM * sizeof(uint16_t);
    const char *kbase = q8 ? (const char *)st.kq : (const char *)st.k;
    const char *vbase = q8 ? (const char *)st.vq : (const char *)st.v;
#define PIECE(base, l, h, b) ((base) + (((size_t)(l) * KIPP_KV_HEADS + (h)) * BLOCKS + (b)) * piece)
    size_t pages, got;
    if (residency) { /* block 500 of plane (0, 0) is over 2 MiB from block 5: not in one huge page */
        got = resident_pages(PIECE(kbase, 0, 0, 500), piece, &pages);
        CHECKF(got == 0, "%s: %zu of %zu pages of an unused block resident before any write",
               name, got, pages);
    }
    kipp_kv_store_prefault(&st, 5);
    CHECK(st.resident[5] == 1 && st.resident[4] == 0);
    if (residency) {
        size_t missing = 0, total = 0;
        for (uint32_t l = 0; l < LAYERS; l++)
            for (uint32_t h = 0; h < KIPP_KV_HEADS; h++) {
                got = resident_pages(PIECE(kbase, l, h, 5), piece, &pages);
                missing += pages - got;
                total += pages;
                got = resident_pages(PIECE(vbase, l, h, 5), piece, &pages);
                missing += pages - got;
                total += pages;
            }
        CHECKF(missing == 0, "%s: %zu of %zu pages of a prefaulted block not resident", name,
               missing, total);
        got = resident_pages(PIECE(kbase, 0, 0, 500), piece, &pages);
        CHECKF(got == 0, "%s: prefaulting block 5 made %zu pages of block 500 resident", name,
               got);
    }
    /* Contents survive: block 9 written, then prefaulted (as a copy does). */
    char *k9 = (char *)PIECE(kbase, 3, 6, 9);
    for (size_t i = 0; i < piece; i++) k9[i] = (char)(i * 13 + 7);
    kipp_kv_store_prefault(&st, 9);
    int bad = 0;
    for (size_t i = 0; i < piece; i++) bad += k9[i] != (char)(i * 13 + 7);
    CHECKF(bad == 0, "%d bytes of a written block changed by prefault", bad);
#undef PIECE
    kipp_kv_store_prefault(&st, BLOCKS); /* out of range: ignored */
    kipp_kv_store_destroy(&st);
}

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

    /* A pool of 3 blocks, 3 layers: 96 physical positions per layer. One
     * plane per (layer, head) of the 96 physical positions in order (kv.h):
     * (layer, head h, physical position q) at ((layer * 8 + h) * 96 + q) *
     * 128, physical position q = table[pos / 32] * 32 + pos % 32. */
    CHECK(kipp_kv_store_create(&st, 3, 3, KIPP_KV_BF16, &err) == KIPP_OK);
    CHECK(kipp_kv_pos_stride(&st) == 128);
    uint32_t identity[3] = {0, 1, 2};
    CHECK(kipp_kv_head_offset(&st, identity, 0, 0, 0) == 0);
    CHECK(kipp_kv_head_offset(&st, identity, 0, 1, 0) == 128);
    CHECK(kipp_kv_head_offset(&st, identity, 0, 0, 1) == 96 * 128);
    CHECK(kipp_kv_head_offset(&st, identity, 0, 33, 2) == (2 * 96 + 33) * 128);
    CHECK(kipp_kv_head_offset(&st, identity, 2, 64, 7) == ((2 * 8 + 7) * 96 + 64) * 128);
    /* A fresh session's positions of one head are one contiguous run. */
    CHECK(kipp_kv_head_offset(&st, identity, 1, 32, 4) ==
          kipp_kv_head_offset(&st, identity, 1, 31, 4) + 128);

    /* A scrambled table moves whole blocks and keeps the offset inside one. */
    uint32_t table[3] = {2, 0, 1};
    CHECK(kipp_kv_head_offset(&st, table, 0, 5, 0) == (2 * 32 + 5) * 128);
    CHECK(kipp_kv_head_offset(&st, table, 0, 37, 3) == (3 * 96 + 0 * 32 + 5) * 128);
    CHECK(kipp_kv_head_offset(&st, table, 1, 64, 1) == ((1 * 8 + 1) * 96 + 1 * 32) * 128);

    /* Every (layer, pos, head) under the permutation lands inside the store
     * and no two collide. */
    size_t elems = (size_t)3 * 96 * 1024;
    unsigned char *seen = calloc(elems / 128, 1);
    int collisions = 0, outside = 0;
    for (uint32_t l = 0; l < 3; l++)
        for (uint32_t p = 0; p < 96; p++)
            for (uint32_t h = 0; h < 8; h++) {
                size_t off = kipp_kv_head_offset(&st, table, l, p, h);
                if (off % 128 != 0 || off + 128 > elems) { outside++; continue; }
                if (seen[off / 128]++) collisions++;
            }
    CHECK(collisions == 0 && outside == 0);
    free(seen);
    st.k[elems - 1] = 1; /* last element is writable (ASan checks the size) */
    st.v[elems - 1] = 1;

    /* kv_copy of a block head: positions [0, 5) of block 2 into block 0, all
     * layers and heads; position 5 and other blocks untouched. */
    for (size_t i = 0; i < elems; i++) st.k[i] = st.v[i] = (uint16_t)(i * 7 + 1);
    kipp_kv_store_copy(&st, 0, 2, 5);
    int bad = 0;
    for (uint32_t l = 0; l < 3; l++)
        for (uint32_t p = 0; p < 32; p++)
            for (uint32_t h = 0; h < 8; h++)
                for (size_t e = 0; e < 128; e += 37) {
                    uint32_t b0 = 0, b2 = 2;
                    size_t d = kipp_kv_head_offset(&st, &b0, l, p, h) + e;
                    size_t s = kipp_kv_head_offset(&st, &b2, l, p, h) + e;
                    uint16_t want = p < 5 ? (uint16_t)(s * 7 + 1) : (uint16_t)(d * 7 + 1);
                    bad += st.k[d] != want || st.v[d] != want;
                }
    CHECKF(bad == 0, "%d elements wrong after kv_copy", bad);
    kipp_kv_store_destroy(&st);

    if (populate_supported()) {
        /* Under ThreadSanitizer the flags and the contents are still checked. */
        test_prefault(KIPP_KV_BF16, !KV_ALLOCATOR_COMMITS);
        test_prefault(KIPP_KV_Q8_0, !KV_ALLOCATOR_COMMITS);
        if (KV_ALLOCATOR_COMMITS)
            test_skip_part(TEST_SKIP_MACHINE, "test_kv prefault residency",
                           "ThreadSanitizer build: its calloc commits every page at once");
    } else {
        test_skip_part(TEST_SKIP_MACHINE, "test_kv prefault residency",
                       "this kernel refuses madvise(MADV_POPULATE_WRITE) (before Linux 5.14)");
    }

    /* Absurd sizes fail cleanly instead of wrapping. */
    CHECK(kipp_kv_store_create(&st, UINT32_MAX, UINT32_MAX, KIPP_KV_BF16, &err) != KIPP_OK);
    kipp_kv_store_destroy(&st);
    return test_finish("test_kv");
}
