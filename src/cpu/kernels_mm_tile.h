/* The prefill's out-of-line matrix-matrix tile, one source for the FP32
 * tiers: kernels_avx2.c and kernels_avx512.c include it (and so do the
 * avx2i8 and avx512i8 builds, which compile those files again with their
 * own activation records). MM_TILE_ROWS weight rows -- BF16 rows, or FP32
 * rows decoded once (src SRC_BF16, SRC_DEC; quantized rows decoded once,
 * or BF16 rows on a BF16_DECODE_ONCE tier) -- against 1 .. MC activation
 * rows, chunks [k0, k1) of K: tile_span's per-output sequence, written
 * with two pointers into the weight rows and two into the activation rows
 * (tile_row, kernels_simd.h) and compiled out of line (mm_tile).
 *
 * Why out of line: tile_span's general loop, inlined into block_rows'
 * loops, kept the rows' offsets on the stack and rebuilt each address from
 * them -- ~120 instructions per 40 FMAs of the avx512 tier's 4 x 5 tile,
 * where a core that renames 6 a cycle and retires 2 FMAs (Intel Golden
 * Cove) has room for 60, and ~38 per 12 FMAs of the avx2 tier's 3 x 4
 * (perf annotate, Intel Xeon family 6 model 207). Inlined where tile_span
 * is, this loop spilled accumulators; out of line a decoded avx512 chunk
 * is its 18 loads, 40 FMAs and 6 scalar steps. Measured: docs/
 * BENCHMARKS.md "Stop 67" (avx512) and "Stop 68" (avx2).
 *
 * The span: acc = 0, or carry[r][c] when k0 > 0 (a panel of K went
 * before); each 32-value chunk, in K order, by the tier's mm_chunk; then
 * the sums by the tier's mm_store, or, when k1 < k, acc parked in carry
 * for the next span (storing and reloading a register is exact, so spans
 * do not change the sequence). The next block's prefetch share
 * (next_pf_take) is taken up front and issued a chunk at a time, in a
 * loop of its own over the chunks that issue it, then one over the rest:
 * as one loop testing its counter, gcc kept the avx2 tile's loop bounds
 * on the stack (docs/CPU-JOURNAL.md "Stop 69").
 *
 * The including tier defines, before this header:
 *   vf, MC, MM_TILE_ROWS     its vector type, activation rows and weight
 *                            rows per tile
 *   ACT_F32, ACT_CHUNK_BYTES its activation records: value i of a row,
 *                            and the bytes from one chunk to the next
 *   mm_chunk(acc, src, w0, w3, ws, x0, x3, xs, R, C)
 *       one 32-value chunk: weight rows tile_row(w0, w3, ws, r) against
 *       activation rows tile_row(x0, x3, xs, c), into acc[r][c], in the
 *       tier's per-output order
 *   mm_store(acc, R, C, n, m, y)
 *       y[m + c][n + r] = the sum of acc[r][c]'s lanes, in the tier's tree
 * and takes mm_tile in tile_span where mm_tile_takes says. Same bits as
 * tile_span: tests/unit/test_cpu_kernels.c and test_cpu_qkernels.c hold
 * every path to the oracle's sequence. */

static inline __attribute__((always_inline)) void
mm_tile_span(const void *w, int src, uint32_t k, const char *x, size_t x_stride, int C,
             uint32_t n, uint32_t m, float *const *y, uint32_t k0, uint32_t k1,
             vf (*carry)[MC], next_pf *np) {
    enum { R = MM_TILE_ROWS, X_STEP = ACT_CHUNK_BYTES };
    vf acc[MM_TILE_ROWS][MC];
    TILE_START(acc, carry, R, C, k0);
    size_t ws;
    const char *w0 = mm_weight_row(w, src, k, n, k0, &ws), *w3 = w0 + 3 * ws;
    const char *x0 = (const char *)ACT_F32(x + (size_t)m * x_stride, k0), *x3 = x0 + 3 * x_stride;
    const size_t w_step = src == SRC_DEC ? 32 * sizeof(float) : 32 * sizeof(uint16_t);
    uint32_t chunks = (k1 - k0) / 32;
    const char *pf;
    size_t pf_step;
    uint32_t pf_chunks = next_pf_take(np, chunks, &pf, &pf_step);
    uint32_t j = 0; /* pf_chunks <= chunks */
    for (; j < pf_chunks; j++) {
        next_pf_chunk(&pf, pf_step);
        mm_chunk(acc, src, w0, w3, ws, x0, x3, x_stride, R, C);
        w0 += w_step, w3 += w_step, x0 += X_STEP, x3 += X_STEP;
    }
    for (; j < chunks; j++) {
        mm_chunk(acc, src, w0, w3, ws, x0, x3, x_stride, R, C);
        w0 += w_step, w3 += w_step, x0 += X_STEP, x3 += X_STEP;
    }
    if (k1 < k) {
        TILE_PARK(acc, carry, R, C);
        return;
    }
    mm_store(acc, R, C, n, m, y);
}

/* Whether tile_span's tile is mm_tile's: the prefill's (no decode
 * prefetch, rows not split), full height, over BF16 or decoded rows. */
static inline __attribute__((always_inline)) int mm_tile_takes(int src, int R, int C, int PF,
                                                               uint32_t rs) {
    return PF == PF_NONE && (src == SRC_DEC || src == SRC_BF16) && R == MM_TILE_ROWS &&
           C <= MC && rs == 1;
}

_Static_assert(MC == 4 || MC == 5, "mm_tile's switch covers 1 .. MC activation rows");
static __attribute__((noinline)) void mm_tile(const void *w, int src, uint32_t k, const char *x,
                                              size_t x_stride, int C, uint32_t n, uint32_t m,
                                              float *const *y, uint32_t k0, uint32_t k1,
                                              vf (*carry)[MC], next_pf *np) {
#define MM_TILE(S, CC) mm_tile_span(w, S, k, x, x_stride, CC, n, m, y, k0, k1, carry, np)
#if MC > 4
#define MM_TILE_4(S) case 4: MM_TILE(S, 4); break;
#else
#define MM_TILE_4(S)
#endif
#define MM_TILE_C(S)                  \
    switch (C) {                      \
    case 1: MM_TILE(S, 1); break;     \
    case 2: MM_TILE(S, 2); break;     \
    case 3: MM_TILE(S, 3); break;     \
    MM_TILE_4(S)                      \
    default: MM_TILE(S, MC); break;   \
    }
    if (src == SRC_DEC)
        MM_TILE_C(SRC_DEC)
    else
        MM_TILE_C(SRC_BF16)
#undef MM_TILE_C
#undef MM_TILE_4
#undef MM_TILE
}
