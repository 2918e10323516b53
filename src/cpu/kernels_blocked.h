/* The matmul drivers of the SIMD tiers (kernels_avx2.c, kernels_avx512.c,
 * kernels_avx512bf16.c): how a call's weight rows and activation rows are
 * cut into tiles, spans and decoded blocks. The tiles themselves differ by
 * instruction set and stay in the tier files. Included once by each, after
 * it defines:
 *
 *   vf, MC                   the tier's vector; activation rows per
 *                            matrix-matrix tile, 3 to 6
 *   MR                       optional: weight rows per matrix-matrix tile
 *                            (4 unless defined; avx2: 3)
 *   tile_span(...)           chunks [k0, k1) of an R x C tile from one
 *                            weight source (SRC_BF16, SRC_DEC, QT_*),
 *                            accumulators parked in carry[r][c] between
 *                            spans, next_pf_step(np) once per 32-value
 *                            chunk; the per-output operation sequence must
 *                            not depend on the source, R, C, the rows'
 *                            spacing rs or the span cut
 *   MV_ROWS_BF16, MV_ROWS_Q  weight rows per matrix-vector tile (decode),
 *   MV_SEQ_ROWS_BF16, MV_SEQ_ROWS_Q  the same for the PF_SEQ table
 *   MV_SEQ_ROWS_Q8           optional: Q8_0's own (MV_SEQ_ROWS_Q unless
 *                            defined)
 *   qdecode_block(t, row, b, dst)  block b of a quantized row as the 32
 *                            weights tile_span multiplies, in the order it
 *                            reads decoded (SRC_DEC) rows
 *   QDEC_T                   optional: the decoded weights' type (float
 *                            unless defined; avx512bf16: uint16_t, BF16)
 *   FEW_ROWS, FEW_PASSES, FEW_SPAN_MIN_ROWS  optional: how many activation
 *                            rows take the few-rows tiles (below)
 *   BF16_DECODE_ONCE, bf16_decode_block(row, b, dst)
 *                            optional: BF16 calls of BF16_DECODE_MIN_ROWS
 *                            (below) rows or more decode their rows once
 *                            into FP32 (the packed order) where
 *                            kipp_cpu_bf16_decode_once is set, as the
 *                            quantized schemes do (decoded_rows; avx2,
 *                            avx512, and their i8 builds)
 *
 * Because tile_span runs the same sequence per output whatever the tile
 * and the weight source, every path below gives the same bits: decode and
 * prefill, in-tile decode and decode-once, any thread split (kernels.h). */
#ifndef KIPP_CPU_KERNELS_BLOCKED_H
#define KIPP_CPU_KERNELS_BLOCKED_H

#define W_BLOCK 64 /* weight rows kept hot in L2 while activation rows stream */
#ifndef MR
#define MR 4
#endif
/* Chunks of K per pass over a block's weight tiles: an activation tile of
 * a 1024-value span (AVX-512: 4 rows, 16 KiB FP32) stays in L1 while the
 * block's weight tiles stream past it from L2. Whole rows of the down
 * projection (K = 3072: 48 KiB per tile) do not fit, and the avx512
 * matmul ran at ~157 GFLOPS per core against ~190 for K = 1024 on Zen 5. */
#define K_SPAN 1024
_Static_assert(K_SPAN % 32 == 0, "spans are whole quantized blocks");

/* A whole tile (decode). */
static inline __attribute__((always_inline)) void tile_any(const void *w, int src,
                                                           size_t row_bytes, uint32_t k,
                                                           const char *x, size_t x_stride, int R,
                                                           int C, int PF, uint32_t n,
                                                           uint32_t rs, float *const *y) {
    tile_span(w, src, row_bytes, k, x, x_stride, R, C, PF, n, rs, 0, y, 0, k, NULL, NULL);
}

/* Decode (C activation rows, usually one; C <= FEW_ROWS): weight rows
 * [n0, n1) streamed once, R at a time with prefetch PF, the last few one
 * by one. With PF_ROWS, BF16 rows
 * go in split tiles (kernels_simd.h): tile j holds rows n0 + j + r * L,
 * L = (n1 - n0) / R, so tile row r streams through rows [n0 + r * L,
 * n0 + (r + 1) * L) in order. A row's sum does not depend on its tile, so
 * the bits are the adjacent tiles'. Quantized rows keep adjacent tiles:
 * split, Q8_0 decode measured no faster (docs/CPU-JOURNAL.md "Stop 37"). */
static inline __attribute__((always_inline)) void decode_rows(const void *w, int src,
                                                              size_t row_bytes, uint32_t k,
                                                              const char *x, size_t x_stride,
                                                              int R, int C, int PF,
                                                              uint32_t n0, uint32_t n1,
                                                              float *const *y) {
    uint32_t n = n0, L = (n1 - n0) / (uint32_t)R;
    if (PF == PF_ROWS && src == SRC_BF16 && L >= SPLIT_MIN_ROWS) {
        for (uint32_t j = 0; j < L; j++)
            tile_any(w, src, row_bytes, k, x, x_stride, R, C, PF_STREAM, n0 + j, L, y);
        n = n0 + (uint32_t)R * L;
    }
    for (; n + (uint32_t)R <= n1; n += (uint32_t)R)
        tile_any(w, src, row_bytes, k, x, x_stride, R, C, PF, n, 1, y);
    for (; n < n1; n++) tile_any(w, src, row_bytes, k, x, x_stride, 1, C, PF_NONE, n, 1, y);
}

/* A few activation rows (2 .. FEW_ROWS: batched decode of a few sessions,
 * speculation's verify step, a short prompt; but see few_spans) read the
 * weights the way decode does -- decode_rows' tiles and prefetch, every activation row in
 * each tile, quantized blocks decoded in the tile -- rather than in
 * W_BLOCK blocks (or decoded once): with so few rows the compute cannot
 * hide the reads, and decode's streaming is what the weights need. Tiles
 * of FEW_R_BF16 BF16 rows (PF_SEQ: MV_SEQ_ROWS_BF16) or FEW_R_Q quantized
 * ones for up to 4 activation rows, FEW_WIDE_R for 5..8 (the AVX-512
 * tiers, whose tiles hold TILE_C = 8), so the accumulators fit the
 * registers. Per output the sequence is tile_span's, so the bits are the
 * blocked path's. Zen 4, synthetic-0.6b, 2 threads, a P-token prompt,
 * tok/s, blocked (with next_pf) -> few: BF16 P = 2 55 -> 69, 4 88 -> 114,
 * 6 113 -> 126; Q8_0 2 55 -> 71, 4 84 -> 125, 6 104 -> 144, 8 126 -> 151;
 * Q4_0 4 89 -> 130, 8 131 -> 159; the avx2 tier BF16 2 36 -> 74
 * (docs/CPU-JOURNAL.md "Stop 41"). */
#ifndef FEW_ROWS
#define FEW_ROWS 4 /* a tier whose tiles hold more (TILE_C) may raise it to 8 */
#endif
#ifndef TILE_C
#define TILE_C MC
#endif
#ifndef FEW_R_BF16
#define FEW_R_BF16 MR
#endif
#ifndef FEW_R_Q
#define FEW_R_Q 4
#endif
/* Weight rows per few-rows tile for 5..8 activation rows: 16 accumulators. */
#define FEW_WIDE_R 2
_Static_assert(FEW_ROWS >= 4 && FEW_ROWS <= TILE_C && FEW_ROWS <= 8,
               "few-rows tiles hold up to TILE_C activation rows");
static inline __attribute__((always_inline)) void few_rows(const void *w, int src,
                                                           size_t row_bytes, uint32_t k,
                                                           const char *x, size_t x_stride,
                                                           int R, int PF, uint32_t m, uint32_t n0,
                                                           uint32_t n1, float *const *y) {
#define FEW(RR, C) decode_rows(w, src, row_bytes, k, x, x_stride, RR, FEW_ROWS >= (C) ? (C) : 1, \
                               PF, n0, n1, y)
    switch (m) { /* (C > FEW_ROWS never runs: m <= FEW_ROWS) */
    case 2: FEW(R, 2); break;
    case 3: FEW(R, 3); break;
    case 4: FEW(R, 4); break;
    case 5: FEW(FEW_WIDE_R, 5); break;
    case 6: FEW(FEW_WIDE_R, 6); break;
    case 7: FEW(FEW_WIDE_R, 7); break;
    default: FEW(FEW_WIDE_R, 8); break;
    }
#undef FEW
}

/* The weight bytes a matrix-matrix call reads next -- its following block
 * of rows -- prefetched into L2 while the current block computes, a line
 * or two at each 32-value chunk of its tiles (next_pf, kernels_simd.h), so
 * that the next block streams in and the first tiles over it do not wait
 * on memory (before stop 41 each block was read on demand). Measured on
 * Zen 4 (synthetic-0.6b BF16, 2 threads, interleaved, docs/CPU-JOURNAL.md
 * "Stop 41"; then a burst of lines after each tile): a 16-token prompt 144
 * -> 167 tok/s, 512 tokens ~+3 %, 2,048 ~+4 %. Spread over the chunks
 * (stop 42): docs/CPU-JOURNAL.md "Stop 42". A prefetch changes no
 * result. */
static inline next_pf next_pf_at(const void *next, size_t bytes, size_t steps) {
    const char *p = next;
    size_t lines = (bytes + 63) / 64;
    return (next_pf){p, p ? p + bytes : p, steps ? (lines + steps - 1) / steps : lines};
}

/* Every activation row [0, m) against weight rows [nb, ne) of source src
 * (BF16 rows of w, quantized rows row_bytes apart, or the decoded rows a
 * dec_rows w says where), at most W_BLOCK of them, over values [kb, ke) of
 * K: MR x MC tiles, the last rows in a 2-row tile and 1-row tiles; K in
 * spans of K_SPAN, each activation tile's accumulators carried between
 * spans in carry[]. A call over all of K (kb = 0, ke = k) lets every
 * activation tile use carry[0 .. ne - nb); over a panel of K, activation
 * tile i's accumulators wait for the next panel in carry[i * tile_rows
 * ...] (tile_rows >= ne - nb; the same m, so the same tiles, every
 * panel). next, next_bytes: what the call reads after this block (NULL:
 * nothing), prefetched as it goes (next_pf). */
static inline __attribute__((always_inline)) void
block_rows(const void *w, int src, size_t row_bytes, uint32_t k, uint32_t kb, uint32_t ke,
           const char *xb, size_t x_stride, uint32_t nb, uint32_t ne, uint32_t m, float *const *y,
           const void *next, size_t next_bytes, vf (*carry)[MC], uint32_t tile_rows) {
    /* ceil(m / MC) activation tiles (cut below); the next block's lines
     * spread over their chunks of about ceil(rows / MR) weight tiles each
     * (a short last block's 2- and 1-row tiles only finish it sooner) */
    uint32_t tiles = (m + MC - 1) / MC;
    next_pf pf =
        next_pf_at(next, next_bytes, (size_t)tiles * ((ke - kb) / 32) * ((ne - nb + MR - 1) / MR));
#define ROW_TILES(C)                                                                        \
    do {                                                                                    \
        vf(*ct)[MC] = carry + (size_t)i * tile_rows;                                        \
        for (uint32_t k0 = kb; k0 < ke; k0 += K_SPAN) {                                     \
            uint32_t k1 = k0 + K_SPAN < ke ? k0 + K_SPAN : ke, n = nb;                      \
            for (; n + MR <= ne; n += MR) {                                                 \
                tile_span(w, src, row_bytes, k, xb, x_stride, MR, C, 0, n, 1, r, y, k0, k1, \
                          ct + (n - nb), &pf);                                              \
            }                                                                               \
            if (MR > 2 && n + 2 <= ne) { /* avx2's 3-row tiles leave 2 of 32 or 64 rows */  \
                tile_span(w, src, row_bytes, k, xb, x_stride, 2, C, 0, n, 1, r, y, k0, k1,  \
                          ct + (n - nb), &pf);                                              \
                n += 2;                                                                     \
            }                                                                               \
            for (; n < ne; n++) {                                                           \
                tile_span(w, src, row_bytes, k, xb, x_stride, 1, C, 0, n, 1, r, y, k0, k1,  \
                          ct + (n - nb), &pf);                                              \
            }                                                                               \
        }                                                                                   \
    } while (0)
    _Static_assert(MC >= 3 && MC <= 6, "the switch covers 1 .. MC rows");
    /* the activation tiles of as even a height as they can be
     * (9 rows: 3 + 3 + 3, not 4 + 4 + 1), the taller ones first: a tile of
     * one or two rows reads the block from L2 for as little compute. */
    uint32_t base = m / tiles, taller = m % tiles;
    for (uint32_t i = 0, r = 0; i < tiles; i++) {
        uint32_t c = base + (i < taller);
        switch (c) { /* (... : 1) keeps cases no tile takes in bounds */
        case 6: ROW_TILES(MC >= 6 ? 6 : 1); break;
        case 5: ROW_TILES(MC >= 5 ? 5 : 1); break;
        case 4: ROW_TILES(MC >= 4 ? 4 : 1); break;
        case 3: ROW_TILES(3); break;
        case 2: ROW_TILES(2); break;
        default: ROW_TILES(1); break;
        }
        r += c;
    }
#undef ROW_TILES
}

/* Weight rows [n0, n1) -- BF16, or quantized and decoded in the tiles --
 * against activation rows [0, m), a block of W_BLOCK rows at a time, each
 * block prefetching the next (next_pf). */
static inline __attribute__((always_inline)) void blocked_rows(const void *w, int src,
                                                               size_t row_bytes, uint32_t k,
                                                               const char *xb, size_t x_stride,
                                                               uint32_t n0, uint32_t n1,
                                                               uint32_t m, float *const *y) {
    /* bytes per weight row (a BF16 row is addressed by k, row_bytes 0) */
    size_t pitch = src == SRC_BF16 ? (size_t)k * sizeof(uint16_t) : row_bytes;
    _Alignas(64) vf carry[W_BLOCK][MC];
    for (uint32_t nb = n0; nb < n1; nb += W_BLOCK) {
        uint32_t ne = nb + W_BLOCK < n1 ? nb + W_BLOCK : n1;
        uint32_t nn = ne + W_BLOCK < n1 ? ne + W_BLOCK : n1; /* the next block: [ne, nn) */
        block_rows(w, src, row_bytes, k, 0, k, xb, x_stride, nb, ne, m, y,
                   ne < n1 ? (const char *)w + ne * pitch : NULL, (nn - ne) * pitch, carry, 0);
    }
}

/* Whether a call of m activation rows against rows of K values takes the
 * blocked path (MR x MC tiles, K in spans) rather than few_rows' tiles.
 * A few-rows tile keeps its C activation rows' whole K in flight: 8 FP32
 * rows of K = 3,072 are 96 KiB, past a 48 KiB L1, and their loads came
 * from L2 on every chunk. A tier whose few-rows tiles are that wide sets
 * FEW_SPAN_MIN_ROWS: from that many rows, rows longer than a span go
 * blocked, where an activation tile's span stays in L1 (BF16 rows, and up
 * to FEW_ROWS quantized ones with the blocks decoded in the tiles; more
 * quantized rows decoded once: matmul_q). Same bits either way
 * (tile_span's sequence). */
#ifndef FEW_SPAN_MIN_ROWS
#define FEW_SPAN_MIN_ROWS 0 /* 0: never */
#endif
static inline __attribute__((always_inline)) int few_spans(uint32_t m, uint32_t k) {
#if FEW_SPAN_MIN_ROWS > 0
    return m >= FEW_SPAN_MIN_ROWS && k > K_SPAN;
#else
    (void)m, (void)k;
    return 0;
#endif
}

/* Decode (one activation row) runs out of line, one function per weight
 * source and prefetch table (here for BF16, row_bytes 0; q_stream's for
 * the quantized schemes). Inlined into matmul_bf16_pf / matmul_q beside
 * the few-rows and prefill paths, gcc ran out of general registers in the
 * tile loop and reloaded the row stride, the loop bound and the chunk
 * counter from the stack or through vector registers every chunk (the
 * avx512 Q8_0 tile of two rows: 49 instructions per two blocks; out of
 * line 37). Same tiles, so the same bits. Measured (stop 65, Intel Xeon
 * family 6 model 207, kernel_micro matvec, one thread, GB/s;
 * docs/BENCHMARKS.md "Stop 65"): avx512 PF_SEQ Q4_1 10.1 -> 11.7-12.2
 * from memory, Q8_0 in L2 21 -> 23, the rest within 3 %; in the engine
 * (synthetic-0.6b, 2 threads) Q4_1 decode +5-9 % on avx512, +12 % on
 * avx512bf16, the other schemes and the avx2 tier even. (The few-rows
 * calls measured no better out of line: avx2 Q4 at two rows lost
 * 11-14 %.) */
#define DECODE_ONE_FN(NAME, SRC, R, PF)                                                         \
    static __attribute__((noinline)) void NAME(const void *w, size_t row_bytes, uint32_t k,    \
                                               const char *xb, uint32_t n0, uint32_t n1,        \
                                               float *const *y) {                               \
        decode_rows(w, SRC, row_bytes, k, xb, 0, R, 1, PF, n0, n1, y);                         \
    }
DECODE_ONE_FN(bf16_decode_rows, SRC_BF16, MV_ROWS_BF16, PF_ROWS)
DECODE_ONE_FN(bf16_decode_seq, SRC_BF16, MV_SEQ_ROWS_BF16, PF_SEQ)

/* Prefill decodes up to QDEC_ROWS weight rows at a time into this much
 * stack (384 KiB: 32 FP32 rows of Qwen3-0.6B's K = 3072, 64 BF16 ones)
 * and runs every activation row against them (block_rows on SRC_DEC
 * rows), so the decode work is per weight row, not per (weight tile,
 * activation tile). Calls of up to FEW_PASSES * FEW_ROWS activation rows
 * never get here (q_stream, whose tiles decode). Each block of decoded
 * rows reads all the activations once, so fewer rows read them more
 * often per FLOP (rows / 2 FLOPs a byte): where fewer than
 * QDEC_PANEL_ROWS whole rows fit, q_panels decodes QDEC_PANEL_ROWS rows a
 * panel of K at a time instead (below). Measured on Zen 5, synthetic-0.6b,
 * 512-token prefill:
 * avx512 Q4_0 216 -> 232 tok/s decoded once (stop 17); Q8_0, whose in-tile
 * decode is cheaper, lost then (234 -> 219) but wins since the K spans and
 * 4 x 4 tiles of stop 18 (interleaved pairs, stop 20: 247-248 -> 258-267
 * tok/s, 2,048 tokens 200 -> 208); avx2 Q8_0 118 -> 168 (stop 19). An
 * in-tile Q8_0 decode (sign-extend, two shifts, convert, multiply per 16
 * weights) serves only the tile's 4 (avx2: 3) activation rows. */
#ifndef QDEC_T
#define QDEC_T float
#endif
enum { QDEC_BYTES = 384 * 1024, QDEC_ROWS = 64 };
_Static_assert(QDEC_ROWS <= W_BLOCK, "block_rows carries at most W_BLOCK rows");

/* Long rows (Qwen3-4B's down projection, K = 9,728, took 10 whole FP32
 * rows: 5 FLOPs per activation byte, read from L3 at 256 rows) go by
 * panels: QDEC_PANEL_ROWS weight rows, QDEC_PANEL_K values of K at a time
 * (as many whole spans as the buffer holds for them), against QDEC_GROUP
 * activation rows at a time, each activation tile's accumulators waiting
 * in carry between panels -- exact, as between spans, so the same bits.
 * The panels are decoded again for each group of activation rows (m /
 * QDEC_GROUP times; a Q8_0 block's decode is ~7 operations against the
 * group's 2 x 64 FMAs per row), while the activations are read once per
 * QDEC_PANEL_ROWS weight rows, not once per 10 (K = 9,728) or 3 (K =
 * 25,600, Qwen3-32B). A panel's rows are 32 strided runs of bytes, read
 * as they are decoded: no next_pf here (whether one pays is not
 * measured). */
enum {
    QDEC_PANEL_ROWS = 32,
    QDEC_PANEL_K = QDEC_BYTES / (QDEC_PANEL_ROWS * sizeof(QDEC_T)) / K_SPAN * K_SPAN,
    QDEC_GROUP = 64,
    QDEC_GROUP_TILES = (QDEC_GROUP + MC - 1) / MC, /* block_rows' tiles for QDEC_GROUP rows */
};
_Static_assert(QDEC_PANEL_K >= K_SPAN && (int)QDEC_PANEL_ROWS <= (int)QDEC_ROWS,
               "a panel is whole spans of at most QDEC_ROWS rows");

/* How many whole decoded rows of K values the buffer holds (at most
 * QDEC_ROWS). */
static inline __attribute__((always_inline)) uint32_t qdec_rows(uint32_t k) {
    uint32_t rows = QDEC_BYTES / (k * (uint32_t)sizeof(QDEC_T));
    return rows > QDEC_ROWS ? QDEC_ROWS : rows;
}

/* A BF16_DECODE_ONCE tier's threshold: BF16 calls of this many
 * activation rows or more decode their rows once (shorter prompts lost
 * with 16 or 32: docs/BENCHMARKS.md "Stop 67"); compile-time, so a
 * measurement build can set it (-DBF16_DECODE_MIN_ROWS=...). */
#ifndef BF16_DECODE_MIN_ROWS
#define BF16_DECODE_MIN_ROWS 64
#endif

/* Weight rows [n0, n1) of source t (a quantized scheme, or SRC_BF16 where
 * the tier decodes BF16 once: BF16_DECODE_ONCE), qdec_rows(k) >=
 * QDEC_PANEL_ROWS of them at a time decoded into FP32 and run against
 * every activation row (block_rows on SRC_DEC), each block prefetching
 * the rows decoded next. */
static inline __attribute__((always_inline)) void decoded_rows(int t, const uint8_t *wb,
                                                               size_t row_bytes, uint32_t k,
                                                               const char *xb, size_t x_stride,
                                                               uint32_t m, uint32_t n0,
                                                               uint32_t n1, float *const *y) {
    const uint32_t rows = qdec_rows(k), nblk = k / 32;
    _Alignas(64) QDEC_T dec[QDEC_BYTES / sizeof(QDEC_T)];
    _Alignas(64) vf carry[W_BLOCK][MC];
    for (uint32_t nb = n0; nb < n1; nb += rows) {
        uint32_t ne = nb + rows < n1 ? nb + rows : n1;
        for (uint32_t n = nb; n < ne; n++)
            for (uint32_t b = 0; b < nblk; b++) {
                QDEC_T *dst = dec + (size_t)(n - nb) * k + (size_t)32 * b;
#ifdef BF16_DECODE_ONCE
                if (t == SRC_BF16) {
                    bf16_decode_block((const uint16_t *)(wb + (size_t)n * row_bytes), b, dst);
                    continue;
                }
#endif
                qdecode_block(t, wb + (size_t)n * row_bytes, b, dst);
            }
        uint32_t nn = ne + rows < n1 ? ne + rows : n1; /* the rows decoded next */
        const dec_rows d = {dec, k, nb, 0};
        block_rows(&d, SRC_DEC, 0, k, 0, k, xb, x_stride, nb, ne, m, y,
                   ne < n1 ? wb + (size_t)ne * row_bytes : NULL, (size_t)(nn - ne) * row_bytes,
                   carry, 0);
    }
}

static inline __attribute__((always_inline)) void matmul_bf16_pf(const uint16_t *w, uint32_t k,
                                                                 uint32_t n0, uint32_t n1,
                                                                 const void *x, size_t x_stride,
                                                                 uint32_t m, float *const *y,
                                                                 int PF) {
    const char *xb = x;
    if (m == 1) {
        (PF == PF_SEQ ? bf16_decode_seq : bf16_decode_rows)(w, 0, k, xb, n0, n1, y);
        return;
    }
    if (m <= FEW_ROWS && !few_spans(m, k)) {
        if (PF == PF_SEQ)
            few_rows(w, SRC_BF16, 0, k, xb, x_stride, MV_SEQ_ROWS_BF16, PF_SEQ, m, n0, n1, y);
        else
            few_rows(w, SRC_BF16, 0, k, xb, x_stride, FEW_R_BF16, PF_ROWS, m, n0, n1, y);
        return;
    }
#ifdef BF16_DECODE_ONCE
    if (kipp_cpu_bf16_decode_once && m >= BF16_DECODE_MIN_ROWS &&
        qdec_rows(k) >= QDEC_PANEL_ROWS) {
        decoded_rows(SRC_BF16, (const uint8_t *)w, (size_t)k * sizeof(uint16_t), k, xb, x_stride, m,
                     n0, n1, y);
        return;
    }
#endif
    blocked_rows(w, SRC_BF16, 0, k, xb, x_stride, n0, n1, m, y);
}

static void matmul_bf16(const uint16_t *w, uint32_t k, uint32_t n0, uint32_t n1, const void *x,
                        size_t x_stride, uint32_t m, float *const *y) {
    matmul_bf16_pf(w, k, n0, n1, x, x_stride, m, y, PF_ROWS);
}

static void matmul_bf16_seq(const uint16_t *w, uint32_t k, uint32_t n0, uint32_t n1,
                            const void *x, size_t x_stride, uint32_t m, float *const *y) {
    matmul_bf16_pf(w, k, n0, n1, x, x_stride, m, y, PF_SEQ);
}

#ifndef KIPP_BLOCKED_BF16_ONLY /* avx2i8 has its own quantized matmuls */
static inline __attribute__((always_inline)) void q_panels(int t, const uint8_t *wb,
                                                           size_t row_bytes, uint32_t k,
                                                           const char *xb, size_t x_stride,
                                                           uint32_t m, uint32_t n0, uint32_t n1,
                                                           float *const *y) {
    _Alignas(64) QDEC_T dec[QDEC_PANEL_ROWS * QDEC_PANEL_K];
    _Alignas(64) vf carry[QDEC_GROUP_TILES * QDEC_PANEL_ROWS][MC];
    for (uint32_t nb = n0; nb < n1; nb += QDEC_PANEL_ROWS) {
        uint32_t ne = nb + QDEC_PANEL_ROWS < n1 ? nb + QDEC_PANEL_ROWS : n1;
        for (uint32_t g0 = 0; g0 < m; g0 += QDEC_GROUP) {
            uint32_t mg = m - g0 < QDEC_GROUP ? m - g0 : QDEC_GROUP;
            for (uint32_t p0 = 0; p0 < k; p0 += QDEC_PANEL_K) {
                uint32_t p1 = p0 + QDEC_PANEL_K < k ? p0 + QDEC_PANEL_K : k;
                for (uint32_t n = nb; n < ne; n++)
                    for (uint32_t i = p0; i < p1; i += 32)
                        qdecode_block(t, wb + (size_t)n * row_bytes, i / 32,
                                      dec + (size_t)(n - nb) * QDEC_PANEL_K + (i - p0));
                const dec_rows d = {dec, QDEC_PANEL_K, nb, p0};
                block_rows(&d, SRC_DEC, 0, k, p0, p1, xb + (size_t)g0 * x_stride, x_stride, nb,
                           ne, mg, y + g0, NULL, 0, carry, QDEC_PANEL_ROWS);
            }
        }
    }
}

/* Quantized rows streamed (no decode-once): decode's loop for one
 * activation row, few_rows for 2 .. FEW_ROWS. */
#ifndef MV_SEQ_ROWS_Q8
#define MV_SEQ_ROWS_Q8 MV_SEQ_ROWS_Q
#endif
/* Decode of quantized rows, out of line per (scheme, prefetch table): see
 * DECODE_ONE_FN. */
DECODE_ONE_FN(q8_0_decode_rows, QT_Q8_0, MV_ROWS_Q, PF_ROWS)
DECODE_ONE_FN(q4_0_decode_rows, QT_Q4_0, MV_ROWS_Q, PF_ROWS)
DECODE_ONE_FN(q4_1_decode_rows, QT_Q4_1, MV_ROWS_Q, PF_ROWS)
DECODE_ONE_FN(q8_0_decode_seq, QT_Q8_0, MV_SEQ_ROWS_Q8, PF_SEQ)
DECODE_ONE_FN(q4_0_decode_seq, QT_Q4_0, MV_SEQ_ROWS_Q, PF_SEQ)
DECODE_ONE_FN(q4_1_decode_seq, QT_Q4_1, MV_SEQ_ROWS_Q, PF_SEQ)

static inline __attribute__((always_inline)) void q_stream(int t, int PF, const uint8_t *wb,
                                                           size_t row_bytes, uint32_t k,
                                                           const char *xb, size_t x_stride,
                                                           uint32_t m, uint32_t n0, uint32_t n1,
                                                           float *const *y) {
    if (m > 1)
        few_rows(wb, t, row_bytes, k, xb, x_stride, FEW_R_Q, PF, m, n0, n1, y);
    else if (PF == PF_SEQ)
        (t == QT_Q8_0 ? q8_0_decode_seq : t == QT_Q4_0 ? q4_0_decode_seq : q4_1_decode_seq)(
            wb, row_bytes, k, xb, n0, n1, y);
    else
        (t == QT_Q8_0 ? q8_0_decode_rows : t == QT_Q4_0 ? q4_0_decode_rows : q4_1_decode_rows)(
            wb, row_bytes, k, xb, n0, n1, y);
}

/* A tier may stream quantized calls of up to FEW_PASSES * FEW_ROWS rows as
 * passes of FEW_ROWS (and a remainder) over q_stream, each reading the
 * weights again, instead of decoding them once per block of rows (from
 * FEW_SPAN_MIN_ROWS rows, rows longer than a span go another way:
 * few_spans, matmul_q): the
 * avx512 tier, where Q4_0 and Q8_0 at 9-16 rows measured +4-11 % (Zen 4,
 * synthetic-0.6b, interleaved pairs; docs/CPU-JOURNAL.md "Stop 43"). The
 * avx2 tier's 5-8 rows lost 11 % that way and avx512bf16 measured even,
 * so they keep 1. Bits: tile_span's per-output sequence, as everywhere. */
#ifndef FEW_PASSES
#define FEW_PASSES 1
#endif

static inline __attribute__((always_inline)) void matmul_q(int t, int PF, const void *w, uint32_t k,
                                                           uint32_t n0, uint32_t n1,
                                                           const void *x, size_t x_stride,
                                                           uint32_t m, float *const *y) {
    const char *xb = x;
    const uint8_t *wb = w;
    const uint32_t nblk = k / 32;
    size_t row_bytes = (size_t)nblk * qblock_bytes(t);
    if (few_spans(m, k) && m <= FEW_PASSES * FEW_ROWS) {
        /* Rows longer than a span (few_spans). Past one few-rows tile's
         * rows (9-16 on avx512) they are decoded once, where the buffer
         * holds a panel's rows, as longer calls are; in the blocked tiles
         * each of the 3-4 activation tiles decoded every block again.
         * Intel Xeon family 6 model 207, synthetic-0.6b, 2 threads,
         * kipp bench --profile, eight alternated rounds, medians, GFLOPS
         * of attn_output (K = 2,048) / ffn_down (3,072), 16-token prompt:
         * Q4_0 189 / 189 -> 218 / 219 (12 tokens 191 / 195 -> 202 / 201),
         * Q8_0 182 / 187 -> 180 / 186 (even); four rounds, Q4_1 178 / 182
         * -> 211 / 210 (docs/BENCHMARKS.md "Stop 72"). Zen 4 read the
         * same direction at 9-16 rows (docs/CPU-JOURNAL.md "Stop 42":
         * decoded once 1-3 % ahead). 8 rows decoded once lost (Q8_0
         * ffn_down 157 -> 132 GFLOPS), so they keep the blocked tiles.
         * Same bits (tile_span's sequence). */
        if (m > FEW_ROWS && qdec_rows(k) >= QDEC_PANEL_ROWS)
            decoded_rows(t, wb, row_bytes, k, xb, x_stride, m, n0, n1, y);
        else /* decode in the tiles */
            blocked_rows(wb, t, row_bytes, k, xb, x_stride, n0, n1, m, y);
        return;
    }
    if (m <= FEW_PASSES * FEW_ROWS) {
        for (uint32_t c0 = 0; c0 < m; c0 += FEW_ROWS)
            q_stream(t, PF, wb, row_bytes, k, xb + (size_t)c0 * x_stride, x_stride,
                     m - c0 < FEW_ROWS ? m - c0 : FEW_ROWS, n0, n1, y + c0);
        return;
    }
    if (qdec_rows(k) < QDEC_PANEL_ROWS) {
        q_panels(t, wb, row_bytes, k, xb, x_stride, m, n0, n1, y);
        return;
    }
    decoded_rows(t, wb, row_bytes, k, xb, x_stride, m, n0, n1, y);
}

KIPP_CPU_MATMUL_Q_ENTRIES(, PF_ROWS)
KIPP_CPU_MATMUL_Q_ENTRIES(_seq, PF_SEQ)
#endif /* !KIPP_BLOCKED_BF16_ONLY */

#endif
