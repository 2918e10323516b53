/* Kernel bodies shared by the x86 SIMD tiers (kernels_avx2.c,
 * kernels_avx512.c). Each tier's file defines its vector type and a few
 * operations under common names, then includes this file, so every body
 * here is compiled once per tier with that tier's flags and lane width:
 *
 *   vf, VL                     vector of VL floats (8 or 16)
 *   vf_load, vf_store          unaligned load / store
 *   vf_set1, vf_zero           broadcast / zero
 *   vf_add, vf_sub, vf_mul, vf_div, vf_max, vf_min
 *   vf_fmadd(a,b,c) = a*b+c, vf_fmsub = a*b-c, vf_fnmadd = c-a*b
 *   vf_round                   round to nearest integer (as float)
 *   vf_scale2n(p, n)           p * 2^n for integer-valued n
 *   vf_hsum                    the tier's one fixed lane-to-scalar fold
 *   vf_keep_ge(v, x, lim)      v where x >= lim (ordered), else 0
 *
 * Only what differs between the instruction sets stays in the tier files
 * (lane folds, 2^n, BF16 widening, the matmul tiles, attention steps). The
 * numbers each tier produces are its own: lane width and folds differ. */
#ifndef KIPP_CPU_KERNELS_SIMD_H
#define KIPP_CPU_KERNELS_SIMD_H

#include <immintrin.h>
#include <math.h>

#include "cpu/kernels.h"

_Static_assert(KIPP_HEAD_DIM % (2 * VL) == 0, "RoPE halves are whole vectors");

/* exp for softmax and SiLU: 2^n * p(r), r = x - n ln2 (ln2 split in two
 * for accuracy), |r| <= ln2/2, Taylor to degree 6 (about 1 ulp). An x over
 * 88.7 is clamped there; below KIPP_CPU_EXP_MIN (-87.3), -inf and NaN give
 * exactly 0, never a subnormal (kernels.h says why). */
static inline vf vf_exp(vf x) {
    vf xc = vf_max(x, vf_set1(KIPP_CPU_EXP_MIN)); /* vf_max(NaN, c) is c */
    xc = vf_min(xc, vf_set1(88.7f));
    vf n = vf_round(vf_mul(xc, vf_set1(1.44269504088896341f)));
    vf r = vf_fnmadd(n, vf_set1(0.693145751953125f), xc);
    r = vf_fnmadd(n, vf_set1(1.428606765330187e-06f), r);
    vf p = vf_set1(1.0f / 720);
    p = vf_fmadd(p, r, vf_set1(1.0f / 120));
    p = vf_fmadd(p, r, vf_set1(1.0f / 24));
    p = vf_fmadd(p, r, vf_set1(1.0f / 6));
    p = vf_fmadd(p, r, vf_set1(0.5f));
    p = vf_fmadd(p, r, vf_set1(1.0f));
    p = vf_fmadd(p, r, vf_set1(1.0f));
    return vf_keep_ge(vf_scale2n(p, n), x, vf_set1(KIPP_CPU_EXP_MIN));
}

/* out = x / sqrt(mean(x^2) + eps) * w: one FMA chain per lane, the fold. */
static void rmsnorm(float *out, const float *x, const float *w, uint32_t n, float eps) {
    vf acc = vf_zero();
    for (uint32_t i = 0; i < n; i += VL) {
        vf v = vf_load(x + i);
        acc = vf_fmadd(v, v, acc);
    }
    float inv = 1.0f / sqrtf(vf_hsum(acc) / (float)n + eps);
    vf vi = vf_set1(inv);
    for (uint32_t i = 0; i < n; i += VL)
        vf_store(out + i, vf_mul(vf_mul(vf_load(x + i), vi), vf_load(w + i)));
}

/* NEOX rotate-half on one head: (x[i], x[i + 64]) by the angle of i. */
static void rope(float *x, const float *c, const float *s) {
    enum { HALF = KIPP_HEAD_DIM / 2 };
    for (int i = 0; i < HALF; i += VL) {
        vf a = vf_load(x + i), b = vf_load(x + i + HALF);
        vf cv = vf_load(c + i), sv = vf_load(s + i);
        vf_store(x + i, vf_fmsub(a, cv, vf_mul(b, sv)));
        vf_store(x + i + HALF, vf_fmadd(b, cv, vf_mul(a, sv)));
    }
}

static void silu_mul(float *g, const float *u, uint32_t n) {
    const vf one = vf_set1(1.0f);
    for (uint32_t i = 0; i < n; i += VL) {
        vf v = vf_load(g + i);
        vf e = vf_exp(vf_sub(vf_zero(), v));
        vf s = vf_div(v, vf_add(one, e));
        vf_store(g + i, vf_mul(s, vf_load(u + i)));
    }
}

/* ---- quantized weight blocks: Q8_0, Q4_0 (scale4_gs32), Q4_1 (affine4_gs32)
 * The SIMD tiers decode a block to its exact FP32 weights (d * q; Q4_0 q
 * is nibble - 8; Q4_1 d * q + m: the values the oracle decodes) each its
 * own way (avx512bf16 then rounds each to BF16). Nibble order is ggml's:
 * byte j holds value j low and value j + 16 high. */
enum { QT_Q8_0, QT_Q4_0, QT_Q4_1 };
/* The matmul tiles' other weight sources (kernels_blocked.h): BF16 rows,
 * or rows the prefill already decoded from a quantized type (QDEC_T: FP32
 * on the FP32 tiers, BF16 on avx512bf16). */
enum { SRC_BF16 = 16, SRC_DEC = 17 };
/* Where SRC_DEC rows are (the w a tile gets for them): values [k0, k0 +
 * stride) of weight rows row0, row0 + 1, ..., row j's value i at element
 * (j - row0) * stride + (i - k0) of base -- a whole row (k0 = 0, stride =
 * K), or a panel of one (kernels_blocked.h matmul_q). */
typedef struct dec_rows {
    const void *base;
    size_t stride;
    uint32_t row0, k0;
} dec_rows;
/* The address of row n's value i among the rows w (a dec_rows) describes,
 * values elem bytes wide (FP32, or BF16 on avx512bf16). */
static inline __attribute__((always_inline)) const void *dec_ptr(const void *w, uint32_t n,
                                                                 uint32_t i, size_t elem) {
    const dec_rows *d = w;
    return (const char *)d->base + ((size_t)(n - d->row0) * d->stride + (i - d->k0)) * elem;
}
/* A tile's decode prefetch (tile_span's PF; docs/CPU-JOURNAL.md, "Stop 26"
 * and "Stop 37"): PF_ROWS: each row's line, into L1, at the current K
 * position R rows on (the following tile); PF_STREAM (the split tiles a
 * PF_ROWS table's BF16 decode runs, decode_rows): each row's line
 * PF_STREAM_AHEAD bytes on in its own stream, into L1; PF_SEQ: the
 * following tiles' rows as the one contiguous region they are, a chunk's
 * share per chunk, in address order, into L2, SEQ_PF_TILES tiles on.
 * Prefetches change no result. */
enum { PF_NONE = 0, PF_ROWS = 1, PF_SEQ = 2, PF_STREAM = 3 };
#define SEQ_PF_TILES 2
/* Split decode tiles (kernels_blocked.h decode_rows): a tile's R rows lie
 * rs = (n1 - n0) / R rows apart, so each of its rows walks its own long
 * run of consecutive rows -- R long sequential streams, the shape the
 * processor's stream prefetchers ramp up on -- where adjacent tiles read
 * R streams of one row (2-6 KiB) each. Each row prefetches its own stream
 * PF_STREAM_AHEAD bytes on. Measured on Zen 5 (BF16 decode, 2 threads):
 * 128 / 256 / 512 / 1024 bytes ahead gave 52.3 / 53.6 / 49.0 / 48.3 tok/s
 * against 46.5 for adjacent tiles; a pure read of that shape streamed
 * 74-79 GB/s against adjacent tiles' 56-60. A split needs SPLIT_MIN_ROWS
 * rows per stream, else the call keeps adjacent tiles. */
#define PF_STREAM_AHEAD 256
#define SPLIT_MIN_ROWS 4

/* Whether a decode tile prefetches each BF16 row's own line into L1
 * (PF_ROWS, PF_STREAM), and how many values on: PF_ROWS, the same line of
 * the following tile's row; PF_STREAM, PF_STREAM_AHEAD bytes on along the
 * row's stream for one activation row (C = 1), FEW_STREAM_AHEAD for a few
 * (C > 1: kernels_blocked.h few_rows' split tiles, which spend C times the
 * compute per line and yet ran faster farther ahead). Measured on Zen 5
 * (stop 45; synthetic-0.6b BF16, 2 threads, P-token prompts, tok/s,
 * interleaved, two rounds), 256 / 512 / 1024 / 2048 / 4096 bytes: avx512
 * P = 4 144-148 / 141 / 170 / 177-179 / 157, P = 8 148-152 / 162 / 183-189
 * / 192-197 / 184-188; avx512bf16 P = 8 213 / 203 / 253-257 / 276-278 /
 * 241-256; avx2 (256 -> 2048) P = 2 85 -> 99, P = 4 134 -> 152, P = 8
 * (blocked there) even. Decode (C = 1) keeps 256. Compile-time, so a
 * measurement build can set it (-DFEW_STREAM_AHEAD=...). */
#ifndef FEW_STREAM_AHEAD
#define FEW_STREAM_AHEAD 2048
#endif
static inline __attribute__((always_inline)) int row_pf(int PF) {
    return PF == PF_ROWS || PF == PF_STREAM;
}
static inline __attribute__((always_inline)) size_t row_pf_ahead(int R, int C, uint32_t k,
                                                                  int PF) {
    if (PF == PF_STREAM) return (C > 1 ? FEW_STREAM_AHEAD : PF_STREAM_AHEAD) / sizeof(uint16_t);
    return (size_t)R * k;
}

static inline size_t qblock_bytes(int t) {
    return t == QT_Q8_0 ? sizeof(kipp_block_q8_0)
           : t == QT_Q4_0 ? sizeof(kipp_block_q4_0) : sizeof(kipp_block_q4_1);
}

/* Start of a tile's K span: the R x C accumulators from zero at the
 * start of K (k0 == 0), else where the span before parked them. */
#define TILE_START(acc, carry, R, C, k0)                                 \
    do {                                                                 \
        _Pragma("GCC unroll 8")                                          \
        for (int start_r = 0; start_r < (R); start_r++)                  \
            _Pragma("GCC unroll 8")                                      \
            for (int start_c = 0; start_c < (C); start_c++)              \
                (acc)[start_r][start_c] =                                \
                    (k0) == 0 ? vf_zero() : (carry)[start_r][start_c];   \
    } while (0)

/* End of a tile's K span that a later span continues (kernels_blocked.h):
 * park the R x C accumulators in carry[r][c] (storing and reloading a
 * register is exact). Fully unrolled, like every loop over a tile's
 * accumulators: one indexed by a run-time counter would move acc[][] out
 * of registers for the whole tile (measured: -7 % avx512 BF16 prefill). */
#define TILE_PARK(acc, carry, R, C)                                      \
    do {                                                                 \
        _Pragma("GCC unroll 8")                                          \
        for (int park_r = 0; park_r < (R); park_r++)                     \
            _Pragma("GCC unroll 8")                                      \
            for (int park_c = 0; park_c < (C); park_c++)                 \
                (carry)[park_r][park_c] = (acc)[park_r][park_c];         \
    } while (0)

/* Where a quantized tile's R <= 8 rows are at one K position: row n's
 * current block p0, row n + 3's p3, and the row stride rs, 3 rs, so that
 * every row's block is a base plus a scaled index (p0 + 4 rs, p3 + 2 rs,
 * p0 + 2 (3 rs), ...) and a step advances two pointers. f0 and f3 are the
 * same rows of the following tile (R rows on), which decode prefetches.
 * Written out because gcc otherwise kept a tile's row offsets on the stack
 * and rebuilt each block's address from them, three scalar instructions
 * per row and block beside a Q4 block's ~10 (avx512): this way Q4 decode
 * runs ~19 % faster in cache. */
typedef struct qtile_ptrs {
    const uint8_t *p0, *p3, *f0, *f3;
    size_t rs, rs3;
} qtile_ptrs;

/* Row i of a prefill tile (kernels_mm_tile.h and the tiers' mm_chunk):
 * base0 + stride * i, where rows 0-2 and 4 are base0 + stride * {0, 1,
 * 2, 4} and row 3 is base3 = base0 + 3 stride -- every address a base
 * plus a scaled index, six general registers for a tile's rows (with one
 * per row, gcc spilled vectors to the stack). */
static inline __attribute__((always_inline)) const char *tile_row(const char *base0,
                                                                  const char *base3,
                                                                  size_t stride, int i) {
    return i == 3 ? base3 : i < 5 ? base0 + stride * (size_t)i : base3 + stride * (size_t)(i - 3);
}

/* Every qtile_ function is a no-op for the non-quantized sources (SRC_BF16,
 * SRC_DEC), so a tile that reads several sources calls them unguarded. */
static inline __attribute__((always_inline)) qtile_ptrs qtile_at(const void *w, size_t row_bytes,
                                                                 uint32_t n, uint32_t rs,
                                                                 uint32_t b, int t, int R, int PF) {
    if (t >= SRC_BF16) return (qtile_ptrs){0};
    const uint8_t *p0 = (const uint8_t *)w + (size_t)n * row_bytes + (size_t)b * qblock_bytes(t);
    /* only pointers into the tile's rows (and, with PF_ROWS, the next
     * tile's; quantized rows are never split, decode_rows) */
    const uint8_t *f0 = PF == PF_ROWS ? p0 + (size_t)R * row_bytes : p0;
    size_t step = (size_t)rs * row_bytes; /* between the tile's rows */
    size_t rs3 = R > 3 ? 3 * step : 0;
    return (qtile_ptrs){p0, p0 + rs3, f0, f0 + rs3, step, rs3};
}

/* Row r's block from bases p0 (row 0) and p3 (row 3). */
static inline __attribute__((always_inline)) const uint8_t *
qtile_row(const uint8_t *p0, const uint8_t *p3, size_t rs, size_t rs3, int r) {
    switch (r) {
    case 0: return p0;
    case 1: return p0 + rs;
    case 2: return p0 + 2 * rs;
    case 3: return p3;
    case 4: return p0 + 4 * rs;
    case 5: return p3 + 2 * rs;
    case 6: return p0 + 2 * rs3;
    default: return p3 + 4 * rs;
    }
}

static inline __attribute__((always_inline)) const uint8_t *qtile_block(const qtile_ptrs *q, int r) {
    return qtile_row(q->p0, q->p3, q->rs, q->rs3, r);
}

/* Decode (PF): each row's block of the following tile into L1, a step
 * ahead of its use (the rows are a few KiB, too short for the hardware
 * prefetcher to ramp up on; without this Q4_0 decode streams at ~40 %).
 * Measured against the alternatives on Zen 5 (two threads out of cache):
 * prefetching the following tiles as one sequential region, a line at a
 * time, or into L2 four to six tiles ahead, was no better for Q4 and
 * ~20 % slower for Q8_0. */
static inline __attribute__((always_inline)) void qtile_prefetch(const qtile_ptrs *q, int t, int R,
                                                                 int PF) {
    if (PF != PF_ROWS || t >= SRC_BF16) return;
    for (int r = 0; r < R; r++)
        _mm_prefetch((const char *)qtile_row(q->f0, q->f3, q->rs, q->rs3, r), _MM_HINT_T0);
}

/* PF_SEQ: where the region SEQ_PF_TILES tiles on starts (at K block b), and
 * one chunk step of it: the R rows' share of a 32-value chunk (R * 64 bytes
 * of BF16, R quantized blocks), a line at a time. Measured on Zen 4 (AMD
 * EPYC family 25, two threads out of cache, BF16 rows of K = 1,024): PF_ROWS
 * streamed ~21 GB/s, this ~29-31, a plain sequential read ~30-32. */
typedef struct seq_pf {
    const char *p;
} seq_pf;

static inline __attribute__((always_inline)) size_t src_block_bytes(int t) {
    return t == SRC_BF16 ? 64 : qblock_bytes(t);
}

static inline __attribute__((always_inline)) seq_pf seq_pf_at(const void *w, int t,
                                                              size_t row_bytes, uint32_t k,
                                                              uint32_t n, uint32_t b, int R,
                                                              int PF) {
    if (PF != PF_SEQ) return (seq_pf){0};
    size_t rb = t == SRC_BF16 ? (size_t)k * sizeof(uint16_t) : row_bytes;
    return (seq_pf){(const char *)w + (size_t)(n + R * SEQ_PF_TILES) * rb +
                    (size_t)b * R * src_block_bytes(t)};
}

static inline __attribute__((always_inline)) void seq_pf_step(seq_pf *s, int t, int R, int PF) {
    if (PF != PF_SEQ) return;
    size_t step = (size_t)R * src_block_bytes(t);
    for (size_t l = 0; l < step; l += 64) _mm_prefetch(s->p + l, _MM_HINT_T1);
    s->p += step;
}

/* A blocked call's prefetch of the weight bytes it reads after the current
 * block (kernels_blocked.h next_pf_at): lines [p, end), per_step of them at
 * each 32-value chunk of its tiles, so they trickle out while the tiles
 * compute rather than in a burst between tiles. tile_span takes NULL
 * outside the blocked path (decode has its own PF tables). */
typedef struct next_pf {
    const char *p, *end;
    size_t per_step;
} next_pf;

static inline __attribute__((always_inline)) void next_pf_step(next_pf *s) {
    if (!s) return;
    for (size_t i = 0; i < s->per_step && s->p < s->end; i++, s->p += 64)
        _mm_prefetch(s->p, _MM_HINT_T1);
}

/* The out-of-line prefill tile's share of the next block's prefetch
 * (kernels_mm_tile.h mm_tile_span): next_pf_step's lines, at most two a
 * 32-value chunk, taken from np up front for the first of a span's chunks
 * (the return value; *pf, *pf_step: where they start, bytes per chunk),
 * so the tile's loop issues them without an inner loop -- around
 * next_pf_step's own loop gcc spilled accumulators. */
static inline __attribute__((always_inline)) uint32_t next_pf_take(next_pf *np, uint32_t chunks,
                                                                   const char **pf,
                                                                   size_t *pf_step) {
    *pf = NULL;
    *pf_step = 0;
    if (!np || np->p >= np->end) return 0;
    *pf = np->p;
    *pf_step = (np->per_step < 2 ? np->per_step : 2) * 64;
    size_t left = ((size_t)(np->end - *pf) + *pf_step - 1) / *pf_step;
    uint32_t taken = left < chunks ? (uint32_t)left : chunks;
    np->p = *pf + (size_t)taken * *pf_step;
    return taken;
}

/* One chunk's share of what next_pf_take took: its (at most two) lines. */
static inline __attribute__((always_inline)) void next_pf_chunk(const char **pf, size_t pf_step) {
    _mm_prefetch(*pf, _MM_HINT_T1);
    _mm_prefetch(*pf + pf_step - 64, _MM_HINT_T1);
    *pf += pf_step;
}

/* A prefill tile's first weight row (row n at value k0) and, in *ws, the
 * bytes between its rows: FP32 rows a dec_rows describes (SRC_DEC), or
 * BF16 rows of k values (SRC_BF16). */
static inline __attribute__((always_inline)) const char *
mm_weight_row(const void *w, int src, uint32_t k, uint32_t n, uint32_t k0, size_t *ws) {
    if (src == SRC_DEC) {
        *ws = ((const dec_rows *)w)->stride * sizeof(float);
        return dec_ptr(w, n, k0, sizeof(float));
    }
    *ws = (size_t)k * sizeof(uint16_t);
    return (const char *)w + (size_t)n * *ws + (size_t)k0 * sizeof(uint16_t);
}

static inline __attribute__((always_inline)) void qtile_step(qtile_ptrs *q, int t) {
    if (t >= SRC_BF16) return;
    q->p0 += qblock_bytes(t);
    q->p3 += qblock_bytes(t);
    q->f0 += qblock_bytes(t);
    q->f3 += qblock_bytes(t);
}

/* Block b of a Q4_0 / Q4_1 row: its FP16 scale dh (Q4_1: and minimum mh,
 * else mh is left alone) and its 16 bytes of nibbles (value j < 16 is byte
 * j's low nibble, value j + 16 its high one). */
static inline __attribute__((always_inline)) const uint8_t *
q4_block(int t, const uint8_t *row, uint32_t b, uint16_t *dh, uint16_t *mh) {
    if (t == QT_Q4_0) {
        const kipp_block_q4_0 *blk = (const kipp_block_q4_0 *)row + b;
        *dh = blk->d;
        return blk->qs;
    }
    const kipp_block_q4_1 *blk = (const kipp_block_q4_1 *)row + b;
    *dh = blk->d;
    *mh = blk->m;
    return blk->qs;
}

/* The table's three quantized entries, over the tier's matmul_q(t, pf, ...):
 * SUF empty for the PF_ROWS table, _seq for the PF_SEQ one. */
#define KIPP_CPU_MATMUL_Q_ENTRIES(SUF, PF)                                                     \
    static void matmul_q8_0##SUF(const void *w, uint32_t k, uint32_t n0, uint32_t n1,          \
                                 const void *x, size_t x_stride, uint32_t m, float *const *y) { \
        matmul_q(QT_Q8_0, PF, w, k, n0, n1, x, x_stride, m, y);                                \
    }                                                                                          \
    static void matmul_q4_0##SUF(const void *w, uint32_t k, uint32_t n0, uint32_t n1,          \
                                 const void *x, size_t x_stride, uint32_t m, float *const *y) { \
        matmul_q(QT_Q4_0, PF, w, k, n0, n1, x, x_stride, m, y);                                \
    }                                                                                          \
    static void matmul_q4_1##SUF(const void *w, uint32_t k, uint32_t n0, uint32_t n1,          \
                                 const void *x, size_t x_stride, uint32_t m, float *const *y) { \
        matmul_q(QT_Q4_1, PF, w, k, n0, n1, x, x_stride, m, y);                                \
    }

#endif
