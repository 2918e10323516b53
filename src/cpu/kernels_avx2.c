/* AVX2 + FMA tier: the Makefile compiles this file with -mavx2 -mfma
 * -mf16c (kernels_avx2i8.c includes it once more, for the opt-in avx2i8
 * tier, with its own activation format: KIPP_AVX2_I8, ACT_F32); dispatch.c
 * calls into it only after CPUID says so.
 *
 * Matmul: weights widened (BF16) or decoded (Q8_0, Q4_0, Q4_1: the exact
 * FP32 values the oracle decodes) to FP32 in value order, activations stay
 * FP32 in value order. One 8-lane accumulator per output, lane j summing
 * k = j, j+8, ... by FMA; the lanes fold in one fixed tree (hsum8). Every
 * tile -- matrix-vector (8 BF16 or 4 quantized weight rows x 1) and
 * matrix-matrix (3 weight rows x 4 activation rows), whatever the weight
 * source -- runs exactly this per output (tile_span; the prefill's
 * out-of-line mm_tile, kernels_mm_tile.h, is the same sequence with
 * leaner addressing). */
#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu/kernels.h"

#ifndef KIPP_AVX2_I8 /* kernels_avx2i8.c brings its own activation format */
static size_t act_bytes(uint32_t k) {
    size_t b = (size_t)k * sizeof(float);
    return (b + 63) & ~(size_t)63;
}

static void pack_act(const float *x, uint32_t k, void *dst) {
    memcpy(dst, x, (size_t)k * sizeof(float));
}
/* FP32 value i (a multiple of 8) of packed activation row xr. */
#define ACT_F32(xr, i) ((const float *)(xr) + (i))
/* Bytes from one 32-value chunk's FP32 values to the next's. */
#define ACT_CHUNK_BYTES (32 * sizeof(float))
#endif

/* ((0+4)+(2+6)) + ((1+5)+(3+7)) -- the one lane-to-scalar fold. */
static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 2^n for integer-valued n in [-126, 128], built in the exponent field in
 * two halves so that 128 does not overflow it (vf_exp clamps x to
 * [-87.3, 88.7] and gives 0 below: kernels_simd.h). */
static inline __m256 scale2n256(__m256 p, __m256 n) {
    __m256i ni = _mm256_cvtps_epi32(n);
    __m256i h1 = _mm256_srai_epi32(ni, 1);
    __m256i h2 = _mm256_sub_epi32(ni, h1);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(h1, _mm256_set1_epi32(127)), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(h2, _mm256_set1_epi32(127)), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

/* The names kernels_simd.h's shared bodies use (see there). */
typedef __m256 vf;
#define VL 8
#define vf_load _mm256_loadu_ps
#define vf_store _mm256_storeu_ps
#define vf_set1 _mm256_set1_ps
#define vf_zero _mm256_setzero_ps
#define vf_add _mm256_add_ps
#define vf_sub _mm256_sub_ps
#define vf_mul _mm256_mul_ps
#define vf_div _mm256_div_ps
#define vf_max _mm256_max_ps
#define vf_min _mm256_min_ps
#define vf_fmadd _mm256_fmadd_ps
#define vf_fmsub _mm256_fmsub_ps
#define vf_fnmadd _mm256_fnmadd_ps
#define vf_round(x) _mm256_round_ps((x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define vf_scale2n scale2n256
#define vf_hsum hsum8
#define vf_keep_ge(v, x, lim) _mm256_and_ps((v), _mm256_cmp_ps((x), (lim), _CMP_GE_OQ))
#include "cpu/kernels_simd.h"

/* Eight BF16 values widened to FP32 (the 16 bits above 16 zero bits):
 * the 16 bytes loaded into both halves of a YMM register (a pure load)
 * and placed by one byte shuffle, which runs beside the FMAs on Intel's
 * port 5, where zero-extending (a port-5 shuffle) and shifting (ports 0
 * and 1, the FMAs') took two operations, one of them an FMA slot. Intel
 * Xeon family 6 model 207 held to avx2, kernel_micro, one thread: the
 * BF16 matmul tile 65.2-65.8 -> 68.3-68.7 GFLOPS, BF16 decode's rows
 * 31.8 -> 33.3-33.7 GB/s (docs/BENCHMARKS.md "Stop 68"). */
static inline __m256 bf16x8_to_f32(const uint16_t *p) {
    const __m256i place = _mm256_setr_epi8(-1, -1, 0, 1, -1, -1, 2, 3, -1, -1, 4, 5, -1, -1, 6, 7,
                                           -1, -1, 8, 9, -1, -1, 10, 11, -1, -1, 12, 13, -1, -1,
                                           14, 15);
    __m256i h = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_shuffle_epi8(h, place));
}

/* ---- quantized weights: Q8_0, Q4_0 (scale4_gs32), Q4_1 (affine4_gs32) ----
 * Block b of a row as its 32 exact FP32 weights in value order, w[v] =
 * values 8v .. 8v+7: Q8_0 d * q; Q4_0 d * (q - 8) as FMA(d, q, -8d);
 * Q4_1 d * q + m as FMA(d, q, m). Bitwise the oracle's values: an FP16
 * scale (11 significant bits) times a 4-bit q is exact in FP32, and so is
 * -8d, so each FMA rounds once where the oracle rounds once. A Q4
 * byte j holds value j in its low nibble and j + 16 in its high one, so
 * eight bytes zero-extended to dwords give values j.. (AND 15) and j+16..
 * (shift right 4). */
/* An FP16 scale in all 8 lanes: one broadcast load from the conversion
 * table (kernels.h), where vpbroadcastw + vcvtph2ps took two shuffle-port
 * instructions per block. */
static inline __m256 half8(uint16_t h) { return _mm256_broadcast_ss(&kipp_cpu_f16_table[h]); }

static inline __attribute__((always_inline)) void qweights(int t, const uint8_t *row, uint32_t b,
                                                           __m256 w[4]) {
    if (t == QT_Q8_0) {
        const kipp_block_q8_0 *blk = (const kipp_block_q8_0 *)row + b;
        __m256 d = half8(blk->d);
        #pragma GCC unroll 4
        for (int v = 0; v < 4; v++) {
            __m128i q8 = _mm_loadl_epi64((const __m128i *)(blk->qs + 8 * v));
            w[v] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8)));
        }
        return;
    }
    uint16_t dh, mh = 0;
    const uint8_t *qs = q4_block(t, row, b, &dh, &mh);
    const __m256i nibble = _mm256_set1_epi32(15);
    __m256 d = half8(dh);
    __m256i q[4];
    __m256i b0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)qs));
    __m256i b1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(qs + 8)));
    q[0] = _mm256_and_si256(b0, nibble);
    q[1] = _mm256_and_si256(b1, nibble);
    q[2] = _mm256_srli_epi32(b0, 4);
    q[3] = _mm256_srli_epi32(b1, 4);
    if (t == QT_Q4_0) {
        __m256 base = _mm256_mul_ps(d, _mm256_set1_ps(-8.0f));
        #pragma GCC unroll 4
        for (int v = 0; v < 4; v++) w[v] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(q[v]), base);
    } else {
        __m256 mn = half8(mh);
        #pragma GCC unroll 4
        for (int v = 0; v < 4; v++) w[v] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(q[v]), mn);
    }
}

/* Block b of a quantized row as 32 FP32 weights in value order (prefill's
 * decode-once, kernels_blocked.h). */
static inline __attribute__((always_inline)) void qdecode_block(int t, const uint8_t *row,
                                                                uint32_t b, float *dst) {
    __m256 wv[4];
    qweights(t, row, b, wv);
    #pragma GCC unroll 4
    for (int v = 0; v < 4; v++) _mm256_store_ps(dst + 8 * v, wv[v]);
}

/* BF16 prefill of BF16_DECODE_MIN_ROWS or more activation rows decodes
 * its weight rows once into FP32 (kernels_blocked.h decoded_rows), as
 * kernels_avx512.c does and where kipp_cpu_bf16_decode_once says (not on
 * AMD): the tile then loads FP32 rows instead of widening each 8 values
 * for every activation tile. Same values in the same order, so the same
 * bits. Measured: docs/BENCHMARKS.md "Stop 68". */
#define BF16_DECODE_ONCE 1
static inline __attribute__((always_inline)) void bf16_decode_block(const uint16_t *row,
                                                                    uint32_t b, float *dst) {
    #pragma GCC unroll 4
    for (int v = 0; v < 4; v++)
        _mm256_store_ps(dst + 8 * v, bf16x8_to_f32(row + (size_t)32 * b + 8 * v));
}

/* Matrix-matrix tiles: 3 weight rows x 4 activation rows -- 12
 * accumulators, the 3 weight vectors of a step and one activation vector at
 * a time fill the 16 YMM registers. The weight rows stream from L2 past an
 * activation tile held in L1 (kernels_blocked.h), so the shape sets the L2
 * traffic: 3 x 4 reads 3 weight vectors per 12 FMAs (16 bytes a cycle at
 * two FMAs a cycle, the avx512 tile's 4 x 4 ratio), 4 x 3 read 4 (21 bytes
 * a cycle). Zen 4, KIPP_CPU_ISA=avx2 (stop 31): the matmul alone (M = 128,
 * two threads, interleaved) BF16 166-171 -> 178-182 GFLOPS, decoded Q4_0
 * 200-203 -> 204-206; prefill 512 in the engine -6 to +14 %, about +5 % on
 * average. 2 x 6 lost ~20 % (its activation tile, 24 KiB a span, is most
 * of L1: the likely reason), and 4 x 3 with the weight vectors loaded
 * first ~35 % (4 weight vectors, 12 accumulators and an activation vector
 * are one more than the 16 registers). */
#define MR 3
#define MC 4

/* The prefill's out-of-line tile (kernels_mm_tile.h): 3 weight rows x 1
 * .. 4 activation rows, a 32-value chunk as four 8-value steps. */
#define MM_TILE_ROWS MR

/* One 32-value chunk, four 8-value steps: R weight rows (row 0 at w0; R
 * <= 3, so w3 is not read) against C activation rows. */
static inline __attribute__((always_inline)) void mm_chunk(__m256 (*acc)[MC], int src,
                                                           const char *w0, const char *w3,
                                                           size_t ws, const char *x0,
                                                           const char *x3, size_t xs, int R,
                                                           int C) {
    #pragma GCC unroll 4
    for (int v = 0; v < 4; v++) {
        __m256 wv[MR];
        #pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const char *wr = tile_row(w0, w3, ws, r);
            wv[r] = src == SRC_DEC ? _mm256_load_ps((const float *)wr + 8 * v)
                                   : bf16x8_to_f32((const uint16_t *)wr + 8 * v);
        }
        #pragma GCC unroll 4
        for (int c = 0; c < C; c++) {
            __m256 xv = _mm256_loadu_ps((const float *)tile_row(x0, x3, xs, c) + 8 * v);
            #pragma GCC unroll 4
            for (int r = 0; r < R; r++) acc[r][c] = _mm256_fmadd_ps(wv[r], xv, acc[r][c]);
        }
    }
}

static inline __attribute__((always_inline)) void mm_store(__m256 (*acc)[MC], int R, int C,
                                                           uint32_t n, uint32_t m,
                                                           float *const *y) {
    #pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 4
        for (int c = 0; c < C; c++) y[m + c][n + r] = hsum8(acc[r][c]);
}

#include "cpu/kernels_mm_tile.h"

/* tile_span: chunks [k0, k1) of an R x C tile (R weight rows x C
 * activation rows; R, C, PF and src compile-time constants at every call
 * site, so acc[][] lives in registers). A span with k0 > 0 picks the
 * accumulators up from carry[r][c] and one with k1 < k leaves them there:
 * storing and reloading a register is exact, so spans do not change the
 * sequence. Tile row r is weight row n + r * rs (rs = 1 but in a split
 * decode tile), by src: a BF16 row of w; a quantized row (row_bytes
 * apart), decoded block by block by qweights; or FP32 row n + r of the
 * rows w (a dec_rows) says where (decoded once, kernels_blocked.h; never
 * split). Per output:
 * acc = 0; acc = FMA(w_i, x_i, acc) for each 8-value vector i in K order;
 * hsum8 -- whatever the source, R, C and the neighbours: matrix-vector and
 * matrix-matrix, decoded in the tile or once, give the same bits.
 * PF (decode): each weight row's next line is prefetched R rows ahead --
 * the next tile's -- because rows of a few KiB are too short for the
 * hardware prefetcher to ramp up on (split tiles: along the row's own
 * stream, kernels_simd.h). Prefetches never fault. */
static inline __attribute__((always_inline)) void
tile_span(const void *w, int src, size_t row_bytes, uint32_t k, const char *x,
          size_t x_stride, int R, int C, int PF, uint32_t n, uint32_t rs, uint32_t m,
          float *const *y,
          uint32_t k0, uint32_t k1, __m256 (*carry)[MC], next_pf *np) {
    if (mm_tile_takes(src, R, C, PF, rs)) {
        mm_tile(w, src, k, x, x_stride, C, n, m, y, k0, k1, carry, np);
        return;
    }
    __m256 acc[8][MC];
    TILE_START(acc, carry, R, C, k0);
    if (src == SRC_BF16 || src == SRC_DEC) {
        seq_pf sp = seq_pf_at(w, src, row_bytes, k, n, k0 / 32, R, PF);
        for (uint32_t i = k0; i < k1; i += 8) {
            if (i % 32 == 0) {
                seq_pf_step(&sp, src, R, PF);
                next_pf_step(np);
            }
            __m256 wv[8];
            #pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                if (src == SRC_DEC) {
                    wv[r] = _mm256_load_ps(dec_ptr(w, n + r, i, sizeof(float)));
                } else {
                    const uint16_t *wr = (const uint16_t *)w + (size_t)(n + r * rs) * k + i;
                    if (row_pf(PF) && i % 32 == 0) /* one 64-byte line per 32 values */
                        _mm_prefetch((const char *)(wr + row_pf_ahead(R, C, k, PF)), _MM_HINT_T0);
                    wv[r] = bf16x8_to_f32(wr);
                }
            }
            #pragma GCC unroll 8
            for (int c = 0; c < C; c++) {
                __m256 xv = _mm256_loadu_ps(ACT_F32(x + (size_t)(m + c) * x_stride, i));
                #pragma GCC unroll 8
                for (int r = 0; r < R; r++) acc[r][c] = _mm256_fmadd_ps(wv[r], xv, acc[r][c]);
            }
        }
    } else { /* quantized rows, a 32-value block at a time */
        qtile_ptrs qt = qtile_at(w, row_bytes, n, rs, k0 / 32, src, R, PF);
        seq_pf sp = seq_pf_at(w, src, row_bytes, k, n, k0 / 32, R, PF);
        for (uint32_t i = k0; i < k1; i += 32) {
            qtile_prefetch(&qt, src, R, PF);
            seq_pf_step(&sp, src, R, PF);
            next_pf_step(np);
            #pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                __m256 wv[4];
                qweights(src, qtile_block(&qt, r), 0, wv);
                #pragma GCC unroll 8
                for (int c = 0; c < C; c++) {
                    const float *xc = ACT_F32(x + (size_t)(m + c) * x_stride, i);
                    #pragma GCC unroll 4
                    for (int v = 0; v < 4; v++)
                        acc[r][c] = _mm256_fmadd_ps(wv[v], _mm256_loadu_ps(xc + 8 * v), acc[r][c]);
                }
            }
            qtile_step(&qt, src);
        }
    }
    if (k1 < k) { /* a later span continues these chains */
        TILE_PARK(acc, carry, R, C);
        return;
    }
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 8
        for (int c = 0; c < C; c++) y[m + c][n + r * rs] = hsum8(acc[r][c]);
}

/* Decode: weight rows in flight per matrix-vector tile (quantized: 2 rows
 * lost ~8 % of Q4_0 decode, 8 measured the same as 4 on Zen 5). */
#define MV_ROWS_BF16 8
#define MV_ROWS_Q 4
#define MV_SEQ_ROWS_BF16 2 /* PF_SEQ: as kernels_avx512.c */
#define MV_SEQ_ROWS_Q 4
#define FEW_R_Q 2 /* a few activation rows: 2 x 4 accumulators beside a block's 4 vectors */
#include "cpu/kernels_blocked.h"

/* Attention steps (kernels_att.h has the loop nest; kernels_generic.c the
 * plain algorithm). K and V rows are widened once per block into an L1
 * buffer (16 YMM registers would be all of them) and read by every row and
 * head. Scores: per position, one 8-lane FMA chain, eight positions side
 * by side, folded together (fold8).
 * PV: half a head (64 outputs, 8 registers) at a time over the
 * block, out += p_j * v_j in position order. */
typedef struct att_krow {
    float k[KIPP_HEAD_DIM] __attribute__((aligned(32)));
} att_krow;

static inline void att_load_q(const float *q, float *qd) {
    memcpy(qd, q, KIPP_HEAD_DIM * sizeof(float));
}

static inline __attribute__((always_inline)) void att_widen_k(const uint16_t *k, att_krow *kw) {
    for (int d = 0; d < KIPP_HEAD_DIM; d += 8) _mm256_store_ps(kw->k + d, bf16x8_to_f32(k + d));
}

/* A Q8_0 cache row (4 blocks) widened to its exact values d * q, in value
 * order as att_widen_k's (qweights' Q8_0 decode, the matmuls' weights). */
static inline __attribute__((always_inline)) void att_widen_q8(const kipp_block_q8_0 *row,
                                                               att_krow *kw) {
    #pragma GCC unroll 4
    for (uint32_t b = 0; b < 4; b++) {
        __m256 w[4];
        qweights(QT_Q8_0, (const uint8_t *)row, b, w);
        for (int v = 0; v < 4; v++) _mm256_store_ps(kw->k + 32 * b + 8 * v, w[v]);
    }
}

/* The 8 lane sums of a[0..8) in one vector (lane t = sum of a[t]): three
 * levels of horizontal adds and one swap of 128-bit halves, 9 instructions
 * where 8 hsum8 calls take ~48. Per lane the tree is fixed and involves
 * only a[t]: ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)). */
static inline __attribute__((always_inline)) __m256 fold8(const __m256 a[8]) {
    __m256 h01 = _mm256_hadd_ps(a[0], a[1]), h23 = _mm256_hadd_ps(a[2], a[3]);
    __m256 h45 = _mm256_hadd_ps(a[4], a[5]), h67 = _mm256_hadd_ps(a[6], a[7]);
    __m256 g0 = _mm256_hadd_ps(h01, h23), g1 = _mm256_hadd_ps(h45, h67);
    /* g0 = [t0..3 low halves | t0..3 high halves], g1 the same for t4..7 */
    return _mm256_add_ps(_mm256_permute2f128_ps(g0, g1, 0x20), _mm256_permute2f128_ps(g0, g1, 0x31));
}

/* Raw scores of one (row, head) against K rows kw[0..n), eight positions
 * at a time (rounding n up: kernels_att.h allows reading and writing past
 * n within the block). Per score: one 8-lane chain over the head's 16
 * vectors (a multiply, then FMAs), then fold8's tree -- whatever the
 * group. Eight chains side by side keep the FMA units busy (one score at
 * a time left them waiting on latency: attention was ~30 % of a 2,048-token
 * prefill on Zen 5 then), and one fold serves eight scores. */
static inline __attribute__((always_inline)) void att_dots(const float *qd, const att_krow *kw,
                                                           uint32_t n, float *p) {
    enum { G = 8 };
    _Static_assert(KIPP_CPU_ATT_BLOCK % G == 0, "groups of positions tile a block");
    for (uint32_t j = 0; j < n; j += G) {
        __m256 acc[G];
        __m256 q = _mm256_loadu_ps(qd);
        #pragma GCC unroll 8
        for (int t = 0; t < G; t++) acc[t] = _mm256_mul_ps(q, _mm256_load_ps(kw[j + t].k));
        for (int d = 8; d < KIPP_HEAD_DIM; d += 8) {
            q = _mm256_loadu_ps(qd + d);
            #pragma GCC unroll 8
            for (int t = 0; t < G; t++)
                acc[t] = _mm256_fmadd_ps(q, _mm256_load_ps(kw[j + t].k + d), acc[t]);
        }
        _mm256_storeu_ps(p + j, fold8(acc));
    }
}

/* Three (row, head) units' raw scores against K rows [0..n) as one 3 x 4
 * tile (3 queries x 4 positions): each K vector is loaded once for the
 * three queries -- 7 loads per 12 FMAs where att_dots takes 9 per 8 --
 * and 12 chains are in flight instead of 8. Every score runs att_dots's
 * steps -- the same chain over the head's 16 vectors, then fold8's tree
 * on its own accumulator (the second fold8 takes the third query's 4 and
 * 4 zero ones: a lane's tree involves only its own accumulator) -- so its
 * bits are att_dots's. Prefill attention alone (kernel_micro att avx2
 * bf16 2048 1 512, one thread, Zen 5, best of 4): 83.4 -> 88.6 GFLOPS,
 * the Q8_0 cache 83.2 -> 88.6; a 2 x 4 tile (8 chains) ran slower than
 * att_dots (79-80 against 81-83). qd: the three queries, KIPP_HEAD_DIM
 * floats apart; p: their score rows, pstride floats apart, each written
 * up to n rounded up to 4 (kw rows up to there are read: zero rows past
 * the block). */
#define ATT_MULTI 3
static inline __attribute__((always_inline)) void att_dots_multi(const float *qd,
                                                                 const att_krow *kw, uint32_t n,
                                                                 float *p, size_t pstride) {
    enum { C = 4, U = ATT_MULTI };
    for (uint32_t j0 = 0; j0 < n; j0 += C) {
        __m256 acc[16]; /* acc[C u + c]: query u against position j0 + c */
        __m256 q[U];
        #pragma GCC unroll 3
        for (int u = 0; u < U; u++) q[u] = _mm256_loadu_ps(qd + u * KIPP_HEAD_DIM);
        #pragma GCC unroll 4
        for (int c = 0; c < C; c++) {
            __m256 k = _mm256_load_ps(kw[j0 + c].k);
            #pragma GCC unroll 3
            for (int u = 0; u < U; u++) acc[C * u + c] = _mm256_mul_ps(q[u], k);
        }
        for (int d = 8; d < KIPP_HEAD_DIM; d += 8) {
            #pragma GCC unroll 3
            for (int u = 0; u < U; u++) q[u] = _mm256_loadu_ps(qd + u * KIPP_HEAD_DIM + d);
            #pragma GCC unroll 4
            for (int c = 0; c < C; c++) {
                __m256 k = _mm256_load_ps(kw[j0 + c].k + d);
                #pragma GCC unroll 3
                for (int u = 0; u < U; u++)
                    acc[C * u + c] = _mm256_fmadd_ps(q[u], k, acc[C * u + c]);
            }
        }
        for (int c = C * U; c < 16; c++) acc[c] = _mm256_setzero_ps();
        __m256 s0 = fold8(acc), s1 = fold8(acc + 8);
        _mm_storeu_ps(p + j0, _mm256_castps256_ps128(s0));
        _mm_storeu_ps(p + pstride + j0, _mm256_extractf128_ps(s0, 1));
        _mm_storeu_ps(p + 2 * pstride + j0, _mm256_castps256_ps128(s1));
    }
}

/* The online-softmax update of one (row, head) over a block: p[0..nb)
 * holds raw scores and gets their exponentials (scaled, less the new
 * running max; 0 past nb); the running max and sum move on. Returns the
 * factor the row's output accumulators are rescaled by. */
static inline __attribute__((always_inline)) float att_softmax(float *p, uint32_t nb, float scale,
                                                               float *run_max, float *run_sum) {
    /* Scale, and the block's max over the positions the row sees (lanes
     * past nb become 0 in p and -inf for the max; max_ps(s, m) returns m
     * when s is NaN, as the scalar "s > m ? s : m" did). */
    const __m256 iota = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7), ninf = _mm256_set1_ps(-INFINITY);
    enum { NV = KIPP_CPU_ATT_BLOCK / 8 };
    __m256 valid[NV]; /* lane j of vector v: position 8 v + j < nb */
    __m256 vs = _mm256_set1_ps(scale), bm = ninf;
    for (uint32_t v = 0; v < NV; v++) {
        valid[v] = _mm256_cmp_ps(iota, _mm256_set1_ps((float)nb - (float)(8 * v)), _CMP_LT_OQ);
        __m256 sv = _mm256_mul_ps(_mm256_loadu_ps(p + 8 * v), vs);
        _mm256_storeu_ps(p + 8 * v, _mm256_and_ps(sv, valid[v]));
        bm = _mm256_max_ps(_mm256_blendv_ps(ninf, sv, valid[v]), bm);
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(bm), _mm256_extractf128_ps(bm, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    float bmax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
    float new_max = bmax > *run_max ? bmax : *run_max;
    float corr = *run_max == -INFINITY
                     ? 0.0f
                     : _mm256_cvtss_f32(vf_exp(_mm256_set1_ps(*run_max - new_max)));
    __m256 nm = _mm256_set1_ps(new_max), sum = _mm256_setzero_ps();
    for (uint32_t v = 0; v < NV; v++) {
        /* lanes past nb must contribute exactly 0 */
        __m256 e = _mm256_and_ps(vf_exp(_mm256_sub_ps(_mm256_loadu_ps(p + 8 * v), nm)), valid[v]);
        _mm256_storeu_ps(p + 8 * v, e);
        sum = _mm256_add_ps(sum, e);
    }
    *run_sum = *run_sum * corr + hsum8(sum);
    *run_max = new_max;
    return corr;
}

/* P.V for one head (heads = 1: pa, oda) or two heads of one row (pb,
 * odb too; same positions, same V rows), outputs rescaled by their
 * softmax factors first: per output the rescale, then FMAs over the
 * positions in order -- the same steps whichever the call or the pass an
 * output falls in. One pass holds QV of a head's 16 vectors (two heads:
 * QV of each, sharing every V vector). The FMA latency (4 cycles at two a
 * cycle on Zen 4/5) bounds a pass of 8 chains: two heads take passes of
 * 6, 6 and 4 vectors (12, 12 and 8 chains; 8 loads per 12 FMAs), one head
 * passes of 8 (9 loads per 8 FMAs). Zen 5: with two heads' passes of 4
 * (8 chains) the P.V loop held ~10 % of a 2,048-token prefill's samples;
 * passes of 6 took kernel_micro att avx2 bf16 2048 1 512 from 76.0 to
 * 83.2 GFLOPS (means of 6 interleaved runs), prefill 2,048 +1-6 %
 * (docs/CPU-JOURNAL.md "Stop 49"). Not measured on a Zen 3, whose L1
 * serves two 256-bit loads a cycle: 8 loads per 12 FMAs stay under that.
 * 12 accumulators, p_j, q_j and the V vector take 15 of the 16 YMM
 * registers (no spill in the loop, gcc -O2). gcc would fold the V load
 * into both FMAs as memory operands; the empty asm keeps it in a
 * register, as kernels_avx512.h's pair does. */
static inline __attribute__((always_inline)) void att_pv_pass(int two, int QV, int part,
                                                              const float *pa, const float *pb,
                                                              uint32_t nb, __m256 va, __m256 vb,
                                                              float *oda, float *odb,
                                                              const att_krow *vw) {
    __m256 oa[8], ob[8];
    #pragma GCC unroll 8
    for (int d = 0; d < QV; d++) {
        oa[d] = _mm256_mul_ps(_mm256_loadu_ps(oda + part + 8 * d), va);
        if (two) ob[d] = _mm256_mul_ps(_mm256_loadu_ps(odb + part + 8 * d), vb);
    }
    for (uint32_t j = 0; j < nb; j++) {
        const float *vr = vw[j].k + part;
        __m256 pj = _mm256_set1_ps(pa[j]), qj = two ? _mm256_set1_ps(pb[j]) : pj;
        #pragma GCC unroll 8
        for (int d = 0; d < QV; d++) {
            __m256 v = _mm256_load_ps(vr + 8 * d);
            if (two) __asm__("" : "+x"(v)); /* one load for both FMAs */
            oa[d] = _mm256_fmadd_ps(pj, v, oa[d]);
            if (two) ob[d] = _mm256_fmadd_ps(qj, v, ob[d]);
        }
    }
    #pragma GCC unroll 8
    for (int d = 0; d < QV; d++) {
        _mm256_storeu_ps(oda + part + 8 * d, oa[d]);
        if (two) _mm256_storeu_ps(odb + part + 8 * d, ob[d]);
    }
}

static inline __attribute__((always_inline)) void att_pv(int heads, const float *pa,
                                                         const float *pb, uint32_t nb, float ca,
                                                         float cb, float *oda, float *odb,
                                                         const att_krow *vw) {
    _Static_assert(KIPP_HEAD_DIM == 128, "the passes below cover 16 vectors");
    const __m256 va = _mm256_set1_ps(ca), vb = _mm256_set1_ps(cb);
    /* each pass starts where the previous one's vectors (8 floats each) end */
    if (heads == 2) {
        att_pv_pass(1, 6, 0, pa, pb, nb, va, vb, oda, odb, vw);
        att_pv_pass(1, 6, 8 * 6, pa, pb, nb, va, vb, oda, odb, vw);
        att_pv_pass(1, 4, 8 * (6 + 6), pa, pb, nb, va, vb, oda, odb, vw);
    } else {
        att_pv_pass(0, 8, 0, pa, pb, nb, va, vb, oda, odb, vw);
        att_pv_pass(0, 8, 8 * 8, pa, pb, nb, va, vb, oda, odb, vw);
    }
}

static inline void att_block(float *p, uint32_t nb, float scale, float *run_max,
                             float *run_sum, float *oh, const att_krow *vw) {
    float corr = att_softmax(p, nb, scale, run_max, run_sum);
    att_pv(1, p, NULL, nb, corr, corr, oh, NULL, vw);
}

/* Two query heads of one row: each runs att_block's steps unchanged (its
 * softmax, then att_pv's per-output sequence), their P.V in shared passes (att_pv). */
#define ATT_HAS_PAIR 1
static inline void att_block_pair(float *pa, float *pb, uint32_t nb, float scale, float *max_a,
                                  float *sum_a, float *max_b, float *sum_b, float *oda,
                                  float *odb, const att_krow *vw) {
    float ca = att_softmax(pa, nb, scale, max_a, sum_a);
    float cb = att_softmax(pb, nb, scale, max_b, sum_b);
    att_pv(2, pa, pb, nb, ca, cb, oda, odb, vw);
}

static inline void att_store(const float *oh, float run_sum, float *out) {
    __m256 inv = _mm256_set1_ps(1.0f / run_sum);
    for (int d = 0; d < KIPP_HEAD_DIM; d += 8)
        _mm256_storeu_ps(out + d, _mm256_mul_ps(_mm256_loadu_ps(oh + d), inv));
}

#include "cpu/kernels_att.h"


#ifndef KIPP_AVX2_I8
/* Two tables, the same but for decode's prefetch (kernels.h seq_twin). */
#define TIER_TABLE(SUF, SEQ, TWIN)                                                             \
    {                                                                                          \
        .name = "avx2", .act_bytes = act_bytes, .pack_act = pack_act,                          \
        .matmul_bf16 = matmul_bf16##SUF, .matmul_q8_0 = matmul_q8_0##SUF,                      \
        .matmul_q4_0 = matmul_q4_0##SUF, .matmul_q4_1 = matmul_q4_1##SUF, .rmsnorm = rmsnorm,  \
        .rope = rope, .silu_mul = silu_mul, .attention = attention,                            \
        .attention_q8_0 = attention_q8_0, .decode_seq = SEQ, .seq_twin = TWIN,                 \
    }
const kipp_cpu_kernels kipp_cpu_kernels_avx2 = TIER_TABLE(, 0, &kipp_cpu_kernels_avx2_seq);
const kipp_cpu_kernels kipp_cpu_kernels_avx2_seq = TIER_TABLE(_seq, 1, NULL);
#endif /* !KIPP_AVX2_I8 */
#endif
