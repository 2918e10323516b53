/* AVX-512 tier (F, BW, VL, DQ; FP32-exact activations): the Makefile
 * compiles this file, and only this file, with those flags; dispatch.c
 * calls into it only after CPUID says the processor has them. It uses no
 * AVX512_BF16 instruction, so it runs on every AVX-512 processor (Skylake-X
 * on), and auto picks it on every one, AVX512_BF16 or not: its matmuls
 * keep activations in FP32, so its argmax is the oracle's (DESIGN section
 * 7). kernels_avx512bf16.c is the opt-in alternative (cpu_isa avx512bf16).
 *
 * Matmul: BF16 weights widened to FP32 (exact) in registers, FP32
 * activations, FP32 FMA. Per 32-value chunk of K, two FMAs into ONE
 * accumulator per output (even values, then odd); lane i sums k = 2i, 2i+1
 * of every chunk; kernels_avx512.h's fold tree sums the 16 lanes in its
 * fixed order. The matrix-vector tile (8 weight rows x 1) and the matrix-matrix
 * tile (4 weight rows x up to 4 activation rows) both run this per output.
 * This replaced vdpbf16ps on activations carried as a BF16 hi/lo pair
 * (needed for the oracle gate): that did 2 dot-product instructions per 32
 * MACs and measured ~15 GMAC/s/core against ~24+ for FP32 FMA, and it
 * rounded activations to ~16 bits, which this does not. Attention, norms
 * and elementwise ops: kernels_avx512.h, shared with the avx512bf16 tier.
 * kernels_avx512i8.c compiles this file a second time for the opt-in
 * avx512i8 tier, with its own activation records (KIPP_AVX512_I8,
 * ACT_F32, ACT_CHUNK_BYTES) and its own quantized matmuls
 * (KIPP_BLOCKED_BF16_ONLY);
 * kernels_avx512_vbmi.c compiles it again with AVX512_VBMI, whose Q8_0
 * block decoder (kernels_avx512.h q8_evens_odds) takes fewer operations
 * for the same values. */
#if defined(__x86_64__)
#include "cpu/kernels_avx512.h"

/* Packed activation row: FP32, each 32-value chunk de-interleaved as
 * x[0], x[2], ..., x[30] then x[1], x[3], ..., x[31]. A 32-value BF16
 * weight load holds value 2j in the low and 2j+1 in the high half of dword
 * j, so one shift (even values) and one AND (odd values) widen it to two
 * FP32 vectors that line up with these two halves -- one ALU op per 16
 * weights instead of the zero-extend + shift pair. A chunk packs on its
 * own, so a 32-aligned slice lands at byte offset act_bytes(offset). */
#ifndef KIPP_AVX512_I8 /* kernels_avx512i8.c brings its own activation records */
static size_t act_bytes(uint32_t k) { return (size_t)k * sizeof(float); }

static void pack_act(const float *x, uint32_t k, void *dst) {
    float *out = dst;
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    for (uint32_t i = 0; i < k; i += 32) {
        __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
        _mm512_storeu_ps(out + i, _mm512_permutex2var_ps(a, even, b));
        _mm512_storeu_ps(out + i + 16, _mm512_permutex2var_ps(a, odd, b));
    }
}
/* FP32 value i (a multiple of 32) of packed activation row xr. */
#define ACT_F32(xr, i) ((const float *)(xr) + (i))
/* Bytes from one 32-value chunk's FP32 values to the next's. */
#define ACT_CHUNK_BYTES (32 * sizeof(float))
#endif

/* Matrix-matrix tiles: 4 weight rows x MC activation rows. Stop 47: 4 x 5
 * (20 accumulators, 8 weight and 2 activation vectors: 30 of the 32
 * registers) loads 18 vectors per 40 FMAs a 32-value chunk (0.45 a FMA)
 * where 4 x 4 loads 16 per 32 (0.5).
 * That matters for decoded quantized rows (FP32, two loads a chunk where
 * a BF16 row takes one load and two ALU ops): on Zen 5 the decoded tiles
 * were bound by their loads -- a measurement build that loaded half of each
 * decoded chunk ran at BF16's speed, while halving their L2 traffic
 * (several activation tiles per weight tile in L1) gained 1-2 % at
 * K = 1,024. kernel_micro, avx512, one thread, 512 rows, best of 3,
 * GFLOPS 4 x 4 -> 4 x 5: Q8_0 176 -> 190 (K = 1,024), 154 -> 168 (3,072);
 * Q4_0 179 -> 189, 157 -> 167; Q4_1 185 -> 194, 162 -> 171; BF16 208 ->
 * 205, 205 -> 205. Prefill 512 in the engine (synthetic-0.6b, 2 threads,
 * interleaved pairs, --reps 3, tok/s): Q8_0 263-267 -> 288-299, Q4_0
 * 282-305 -> 305-314, BF16 331-348 -> 332-338; Q4_0 2,048 266-268 ->
 * 270-278. Same bits (the per-output sequence does not depend on C).
 * Before: 5 and 6 rows measured the same on Zen 5 (in-tile decode);
 * Q8_0 at 2 x 8 (each in-tile decoded row serving twice the rows) won 5-8 %
 * in a one-matmul microbenchmark but lost 10-15 % of Q8_0 prefill in the
 * engine. Stop 33 (Zen 5, synthetic-0.6b prefill 512, two interleaved
 * rounds): all even FMAs of a chunk before all odd ones (the same chains,
 * so 4 x 6 fits the registers) lost 6-22 % on Q4_0 and Q8_0 at 4 x 4 (BF16
 * within +-3 %), and 13-38 % on all three at 4 x 6. */
#define MC 5
/* Activation rows a tile can hold: MC in the matrix-matrix tiles, up to
 * FEW_ROWS (8) in the few-rows tiles of 2 weight rows (kernels_blocked.h). */
#define TILE_C 8
#define FEW_ROWS 8
#define FEW_PASSES 2 /* quantized 9-16 rows: two few-rows passes (kernels_blocked.h) */
/* From 8 rows, rows longer than a span go blocked (kernels_blocked.h
 * few_spans; since stop 72, 9-16 quantized rows decoded once instead,
 * matmul_q): Zen 5, synthetic-0.6b, 2 threads, interleaved pairs, tok/s,
 * prompts of 8 / 12 / 16 tokens: Q8_0 201 / 222-229 / 233-234 -> 206-208
 * / 234-235 / 248-254, Q4_0 215-216 / 240-244 / 242-243 -> 224 / 250 /
 * 265-267, Q4_1 211-216 / 243 / 239-251 -> 231 / 254-255 / 262-267, BF16
 * 8 tokens 210-217 -> 218-239; at 6 tokens (two 3-row activation tiles,
 * each decoding the weights) Q8_0 and Q4_0 lost 5-9 %, so 5-7 rows stay
 * few-rows tiles. One matmul out of cache (kernel_micro, 8 rows, K =
 * 3,072): Q8_0 4.97 -> 3.43, Q4_0 4.21 -> 2.97 ns per row and block (K =
 * 1,024 ran 3.2). avx512bf16, whose activations are half as wide, lost 2-8 %
 * at 8 rows this way and keeps its few-rows tiles. From 4 rows
 * (-DFEW_SPAN_MIN_ROWS=4, a measurement build), 4 rows of K = 3,072 in
 * kernel_micro: Q8_0 2.10 -> 1.77, Q4_0 1.51 -> 1.58, BF16 2.15 -> 2.93 ns
 * per row and block -- not taken. (A -D on the command line sets it for
 * every tier built on kernels_blocked.h, avx2 and avx512bf16 too, whose
 * default is 0; measure one tier at a time with KIPP_CPU_ISA.) */
#ifndef FEW_SPAN_MIN_ROWS
#define FEW_SPAN_MIN_ROWS 8
#endif

/* ---- quantized weights: Q8_0, Q4_0 (scale4_gs32), Q4_1 (affine4_gs32) ----
 * Blocks are decoded to 32 exact FP32 weights (the values the oracle
 * decodes: d * q; Q4_1: d * q + m) in the packed
 * activation's order, evens then odds, so a quantized matmul is the BF16
 * tile's FMA sequence with another weight source. Per output, in block
 * order:
 *   acc = FMA(w_even, x_even, acc); acc = FMA(w_odd, x_odd, acc)
 * then the fold tree (store_tile). Decode (one activation row) decodes each
 * block in registers as it streams; prefill decodes a block of weight
 * rows once into FP32 on the stack and runs every activation row against
 * it (kernels_blocked.h), so the decode work is per weight row, not per
 * (weight tile, activation tile). Both run the same sequence per output:
 * same bits.
 * Using the packed activation as is saves the two permutes per activation
 * chunk that putting it back in value order cost (Q8_0 prefill 185-208 ->
 * 234 tok/s on Zen 5); the weights' association changes with it, in
 * decode and prefill alike. */
/* Block b of a row as its 32 FP32 weights w[0] (values 0, 2, .., 30),
 * w[1] (1, 3, .., 31). Q8_0: q8_evens_odds (kernels_avx512.h). Q4_0 / Q4_1 look the weights up: the 16 possible weights of the
 * block (d * (i - 8), or FMA(d, i, m), i = 0..15: bitwise the oracle's
 * values, because d * i is exact -- an FP16 significand of 11 bits times
 * 4 bits -- so the FMA rounds d i + m once, as the oracle's add does) fill
 * one register,
 * and _mm512_permutexvar_ps picks each lane's weight by the low 4 bits of
 * its index (byte j: value j in the low nibble, j + 16 in the high one;
 * per-lane shifts of the zero-extended byte pairs select them, below). */
static inline __attribute__((always_inline)) void qweights(int t, const uint8_t *row, uint32_t b,
                                                           __m512 w[2]) {
    if (t == QT_Q8_0) {
        q8_evens_odds((const kipp_block_q8_0 *)row + b, w);
        return;
    }
    uint16_t dh, mh = 0;
    const uint8_t *qs = q4_block(t, row, b, &dh, &mh);
    __m512 table = q4_table16(t, dh, mh);
    /* Dword lane i holds byte pair (2j, 2j + 1), j = i mod 8: the low
     * nibbles of its two bytes are values 2j and 2j + 1, the high ones
     * 2j + 16 and 2j + 17. A per-lane shift brings each lane's nibble to
     * bits 0-3 (the lookup ignores the bits above): evens shift lanes 0-7
     * by 0 and lanes 8-15 by 4, odds by 8 and 12. */
    const __m512i even_shift = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4);
    const __m512i odd_shift = _mm512_setr_epi32(8, 8, 8, 8, 8, 8, 8, 8, 12, 12, 12, 12, 12, 12, 12, 12);
    __m512i pairs = _mm512_cvtepu16_epi32(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs)));
    w[0] = _mm512_permutexvar_ps(_mm512_srlv_epi32(pairs, even_shift), table);
    w[1] = _mm512_permutexvar_ps(_mm512_srlv_epi32(pairs, odd_shift), table);
}

/* The quantized decode tile: 8 weight rows (adjacent, row_bytes apart) x
 * one activation row, the whole of K, for the PF_ROWS tables (quantized
 * rows are never split, decode_rows). Row r's block b is at
 * qtile_block(&q, r) after b qtile_steps (kernels_simd.h), so the loop
 * steps two row pointers, two prefetch pointers and x, and nothing is
 * indexed by a block counter. Per output it runs tile_span's sequence
 * (below), so the bits are tile_span's. Why a tile of its own:
 * tile_span's general loop (chunk counter, spans, C activation rows) ran
 * out of general registers here and parked pointers and block scales in
 * vector registers and on the stack every block; this loop keeps them in
 * registers. Measured on Zen 5 (stop 38, interleaved, best of 4-5): Q8_0
 * rows, two threads out of cache, 48 -> 55 GB/s; synthetic-0.6b decode at
 * 0 context, Q8_0 61 -> 64 tok/s (every run), Q4_0 73 -> 77, Q4_1 76 ->
 * 78. BF16 rows keep tile_span: their tile had no such spills, and the
 * same loop for them measured no faster (docs/CPU-JOURNAL.md "Stop 38").
 * Each row's block of the following tile is prefetched into L1
 * (qtile_prefetch). */
enum { QDECODE_TILE_ROWS = 8 };
static inline __attribute__((always_inline)) void qdecode_tile(int t, const uint8_t *w,
                                                               size_t row_bytes, uint32_t k,
                                                               const float *x, uint32_t n,
                                                               float *const *y) {
    enum { R = QDECODE_TILE_ROWS };
    qtile_ptrs q = qtile_at(w, row_bytes, n, 1, 0, t, R, PF_ROWS);
    const uint8_t *end = q.p0 + (size_t)(k / 32) * qblock_bytes(t);
    __m512 acc[R];
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
    for (; q.p0 < end; qtile_step(&q, t), x += 32) {
        __m512 xe = _mm512_loadu_ps(x), xo = _mm512_loadu_ps(x + 16);
        qtile_prefetch(&q, t, R, PF_ROWS);
        #pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            __m512 wv[2];
            qweights(t, qtile_block(&q, r), 0, wv);
            acc[r] = _mm512_fmadd_ps(wv[0], xe, acc[r]);
            acc[r] = _mm512_fmadd_ps(wv[1], xo, acc[r]);
        }
    }
    store_tile(acc, 1, R, 1, n, 1, 0, y);
}

/* The prefill's out-of-line tile (kernels_mm_tile.h): 4 weight rows x 1
 * .. 5 activation rows, a 32-value chunk as its even and odd halves (the
 * packed activations' order). */
#define MM_TILE_ROWS 4 /* block_rows' MR */

/* One 32-value chunk: R weight rows against C activation rows. */
static inline __attribute__((always_inline)) void mm_chunk(__m512 (*acc)[MC], int src,
                                                           const char *w0, const char *w3,
                                                           size_t ws, const char *x0,
                                                           const char *x3, size_t xs, int R,
                                                           int C) {
    __m512 we[MM_TILE_ROWS], wo[MM_TILE_ROWS];
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
        const char *wr = tile_row(w0, w3, ws, r);
        if (src == SRC_DEC) {
            we[r] = _mm512_load_ps((const float *)wr);
            wo[r] = _mm512_load_ps((const float *)wr + 16);
        } else { /* SRC_BF16 */
            bf16_widen_pair(_mm512_loadu_si512(wr), &we[r], &wo[r]);
        }
    }
    #pragma GCC unroll 8
    for (int c = 0; c < C; c++) {
        const float *xc = (const float *)tile_row(x0, x3, xs, c);
        __m512 xe = _mm512_loadu_ps(xc), xo = _mm512_loadu_ps(xc + 16);
        #pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            acc[r][c] = _mm512_fmadd_ps(we[r], xe, acc[r][c]);
            acc[r][c] = _mm512_fmadd_ps(wo[r], xo, acc[r][c]);
        }
    }
}

static inline __attribute__((always_inline)) void mm_store(__m512 (*acc)[MC], int R, int C,
                                                           uint32_t n, uint32_t m,
                                                           float *const *y) {
    store_tile(&acc[0][0], MC, R, C, n, 1, m, y);
}

#include "cpu/kernels_mm_tile.h"

/* tile_span: chunks [k0, k1) of an R x C tile. A span with k0 > 0 picks
 * the accumulators up from carry[r][c] and one with k1 < k leaves them
 * there: storing and reloading a register is exact, so a tile cut into
 * spans runs each output's sequence below unchanged (block_rows cuts long
 * rows so an activation tile's span stays in L1).
 * R weight rows x C activation rows; R, C, PF and src are compile-time
 * constants at every call site, so acc[][] lives in registers. Tile row
 * r is weight row n + r * rs (rs = 1 but in a split decode tile), by src:
 * a BF16 row of w; a quantized row (row_bytes apart), each block decoded
 * by qweights; or FP32 row n + r of the rows w (a dec_rows) says where
 * (rows already decoded into the packed order: prefill, kernels_blocked.h;
 * never split).
 * Per output the sequence is: acc = 0; for each 32-value chunk in K order:
 *   acc = fma(w_even, x_even, acc); acc = fma(w_odd, x_odd, acc);
 * then the fold tree (store_tile: fold16, fold1) -- independent of R, C and
 * the neighbours, so matrix-vector and matrix-matrix give the same bits,
 * and a quantized row gives the same bits decoded in the tile or decoded
 * once into FP32. The weight vectors are widened (decoded) once per chunk
 * and reused by all C rows.
 * PF (decode): PF_ROWS prefetches each BF16 row's line R rows ahead --
 * the next tile's -- so the next rows stream in while this tile computes
 * (rows are only a few KiB, too short for the hardware prefetcher to ramp
 * up on), and each quantized row's block of the next tile (qtile_prefetch:
 * the one-row tiles are qdecode_tile's, above; the few-rows tiles, C > 1,
 * come here -- without it they waited on memory: Zen 5, synthetic-0.6b,
 * a 4-token prompt, Q8_0 80 -> 167 tok/s, Q4_0 113 -> 181, stop 45),
 * PF_STREAM (a split tile) row_pf_ahead's distance along the row's
 * stream; PF_SEQ
 * prefetches the following tiles as one region into L2 (kernels_simd.h).
 * A prefetch past the tensor's end never faults. */
static inline __attribute__((always_inline)) void
tile_span(const void *w, int src, size_t row_bytes, uint32_t k, const char *x,
          size_t x_stride, int R, int C, int PF, uint32_t n, uint32_t rs, uint32_t m,
          float *const *y,
          uint32_t k0, uint32_t k1, __m512 (*carry)[MC], next_pf *np) {
#ifndef KIPP_AVX512_I8 /* its records are not the contiguous FP32 row qdecode_tile reads */
    if (PF == PF_ROWS && src < SRC_BF16 && R == QDECODE_TILE_ROWS && C == 1) {
        qdecode_tile(src, w, row_bytes, k, (const float *)(x + (size_t)m * x_stride), n, y);
        return;
    }
#endif
    if (mm_tile_takes(src, R, C, PF, rs)) {
        mm_tile(w, src, k, x, x_stride, C, n, m, y, k0, k1, carry, np);
        return;
    }
    __m512 acc[8][TILE_C];
    TILE_START(acc, carry, R, C, k0);
    qtile_ptrs qt = qtile_at(w, row_bytes, n, rs, k0 / 32, src, R, PF);
    seq_pf sp = seq_pf_at(w, src, row_bytes, k, n, k0 / 32, R, PF);
    for (uint32_t i = k0; i < k1; i += 32) {
        __m512 we[8], wo[8];
        qtile_prefetch(&qt, src, R, PF);
        seq_pf_step(&sp, src, R, PF);
        next_pf_step(np);
        #pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            if (src == SRC_DEC) {
                const float *wr = dec_ptr(w, n + r, i, sizeof(float));
                we[r] = _mm512_load_ps(wr);
                wo[r] = _mm512_load_ps(wr + 16);
            } else if (src == SRC_BF16) {
                const uint16_t *wr = (const uint16_t *)w + (size_t)(n + r * rs) * k + i;
                __m512i wv = row_pf(PF) ? load_line_quarters(wr) : _mm512_loadu_si512(wr);
                if (row_pf(PF))
                    _mm_prefetch((const char *)(wr + row_pf_ahead(R, C, k, PF)), _MM_HINT_T0);
                bf16_widen_pair(wv, &we[r], &wo[r]);
            } else { /* a quantized block, decoded here */
                __m512 wv[2];
                qweights(src, qtile_block(&qt, r), 0, wv);
                we[r] = wv[0];
                wo[r] = wv[1];
            }
        }
        qtile_step(&qt, src);
        #pragma GCC unroll 8
        for (int c = 0; c < C; c++) {
            const float *xc = ACT_F32(x + (size_t)(m + c) * x_stride, i);
            __m512 xe = _mm512_loadu_ps(xc), xo = _mm512_loadu_ps(xc + 16);
            #pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                acc[r][c] = _mm512_fmadd_ps(we[r], xe, acc[r][c]);
                acc[r][c] = _mm512_fmadd_ps(wo[r], xo, acc[r][c]);
            }
        }
    }
    if (k1 < k) { /* a later span continues these chains */
        TILE_PARK(acc, carry, R, C);
        return;
    }
    store_tile(&acc[0][0], TILE_C, R, C, n, rs, m, y);
}

/* Block b of a quantized row as 32 FP32 weights in the packed order (the
 * prefill's decode-once, kernels_blocked.h). */
static inline __attribute__((always_inline)) void qdecode_block(int t, const uint8_t *row,
                                                                uint32_t b, float *dst) {
    __m512 wv[2];
    qweights(t, row, b, wv);
    _mm512_store_ps(dst, wv[0]);
    _mm512_store_ps(dst + 16, wv[1]);
}

/* BF16 prefill decodes its weight rows once into FP32, as the quantized
 * schemes do (kernels_blocked.h decoded_rows), rather than widening each
 * chunk in every tile: the widening's shift and AND share ports 0 and 5
 * with the FMAs (an avx512 core's only 512-bit ports on Intel), so each
 * chunk of a 4 x 5 tile took 48 operations there for 40 FMAs, and the
 * activation tiles (m / 5 of them) each paid it again. Decoded once, the
 * tile is mm_tile's FP32 loop. Same values (the widening is exact and
 * lands in the same packed order), so the same bits. Measured: docs/
 * BENCHMARKS.md "Stop 67". */
#define BF16_DECODE_ONCE 1
static inline __attribute__((always_inline)) void bf16_decode_block(const uint16_t *row,
                                                                    uint32_t b, float *dst) {
    __m512 even, odd;
    bf16_widen_pair(_mm512_loadu_si512(row + (size_t)32 * b), &even, &odd);
    _mm512_store_ps(dst, even);
    _mm512_store_ps(dst + 16, odd);
}

#define MV_ROWS_BF16 8 /* decode, PF_ROWS: 8 weight rows in flight */
#define MV_ROWS_Q QDECODE_TILE_ROWS
/* PF_SEQ: two BF16 rows (fewer streams for the hardware to track: 8 rows
 * streamed ~24 GB/s on Zen 4 against ~30 for 2, one ~29); quantized 8 (a
 * Q4 block's decode is the bound there: 4 rows measured ~5 % slower),
 * but Q8_0 2, as BF16: on the Intel Xeon of stop 57 (family 6 model 207,
 * synthetic-0.6b, 2 threads, interleaved) Q8_0 decode at 8 / 4 / 2 rows
 * read 25.2-26.7 / 24.2-28.1 / 27.0-28.3 tok/s, its K = 2,048 and 3,072
 * matrices 16.9-18.5 GB/s at 8 rows and 19.7-20.5 at 2, while Q4_0 at
 * 2 rows lost 6-7 % (docs/CPU-JOURNAL.md "Stop 57"). */
#define MV_SEQ_ROWS_BF16 2
#define MV_SEQ_ROWS_Q 8
#define MV_SEQ_ROWS_Q8 2
#include "cpu/kernels_blocked.h"

#ifndef KIPP_AVX512_I8
/* Two tables, the same but for decode's prefetch (kernels.h seq_twin). */
#define TIER_TABLE(SUF, SEQ, TWIN)                                                           \
    {                                                                                          \
        .name = "avx512", .act_bytes = act_bytes, .pack_act = pack_act,                        \
        .matmul_bf16 = matmul_bf16##SUF, .matmul_q8_0 = matmul_q8_0##SUF,                      \
        .matmul_q4_0 = matmul_q4_0##SUF, .matmul_q4_1 = matmul_q4_1##SUF, .rmsnorm = rmsnorm,  \
        .rope = rope, .silu_mul = silu_mul, .attention = attention,                            \
        .attention_q8_0 = attention_q8_0, .decode_seq = SEQ, .seq_twin = TWIN,                 \
    }
#ifdef KIPP_AVX512_VBMI
const kipp_cpu_kernels kipp_cpu_kernels_avx512_vbmi =
    TIER_TABLE(, 0, &kipp_cpu_kernels_avx512_vbmi_seq);
const kipp_cpu_kernels kipp_cpu_kernels_avx512_vbmi_seq = TIER_TABLE(_seq, 1, NULL);
#else
const kipp_cpu_kernels kipp_cpu_kernels_avx512 = TIER_TABLE(, 0, &kipp_cpu_kernels_avx512_seq);
const kipp_cpu_kernels kipp_cpu_kernels_avx512_seq = TIER_TABLE(_seq, 1, NULL);
#endif
#endif /* !KIPP_AVX512_I8 */
#endif
