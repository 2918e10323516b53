/* AVX-512 BF16 tier (F, BW, VL, DQ + AVX512_BF16): matmuls on vdpbf16ps.
 * The Makefile compiles this file, and only this file, with -mavx512bf16;
 * dispatch.c calls into it only after CPUID reports AVX512_BF16. Opt-in
 * only (cpu_isa avx512bf16): auto picks `avx512`, which keeps FP32
 * activations (kernels_avx512.c), because the rounding below can flip an
 * oracle near-tie (docs/ARCHITECTURE.md, "Two AVX-512 tiers").
 * Attention, norms and elementwise ops are kernels_avx512.h's, the same
 * code and numbers as the avx512 tier.
 *
 * NUMERICS. pack_act rounds each activation to BF16 (round to nearest
 * even, vcvtne2ps2bf16; the instruction treats FP32 denormals as zero).
 * That is the one approximation this tier adds: a relative 2^-9 per
 * activation, about the size of the BF16 weights' own rounding, and what
 * llama.cpp does for BF16 weights. Every product after that is exact in
 * FP32 (8-bit x 8-bit significands) and accumulates in FP32.
 *  - BF16 weights, per output (row n, activation m): acc = 0; for each
 *    32-value chunk of K in order: acc = vdpbf16ps(acc, w chunk, x chunk)
 *    (lane i adds w[2i] x[2i] + w[2i+1] x[2i+1]); then
 *    the fold tree of kernels_avx512.h (store_tile). One instruction per
 *    32 MACs, against two FMAs and two widening ops on the FP32 tier.
 *  - Quantized weights (Q8_0, Q4_0, Q4_1): a block's small integers q are
 *    exact in BF16 (-128..127 and 0..15 need at most 8 significant bits),
 *    so per 32-value block b: t = vdpbf16ps(0, q_b, x_b), a dot product
 *    in a fresh register, then acc = FMA(d_b, t, acc); Q4_1 adds
 *    acc = FMA(m_b, s_b, acc) where s_b = vdpbf16ps(0, ones, x_b) is the
 *    block's activation sum (lane-wise; the final fold adds the lanes). The
 *    value is sum_b d_b q_b . x_b (+ m_b sum x_b), i.e. the oracle's
 *    (d q + m) . x regrouped, with x in BF16.
 * The matrix-vector path (decode: 8 weight rows in flight, prefetch one
 * tile ahead) and the matrix-matrix path (prefill: weight rows reused
 * across activation rows) run that sequence per output element, so
 * batch invariance (kernels.h) is bitwise here as on every tier. */
#if defined(__x86_64__)
#include "cpu/kernels_avx512.h"

static inline __m512bh as_bh(__m512i v) { return (__m512bh)v; }
static inline __m512bh load_bh(const void *p) { return as_bh(_mm512_loadu_si512(p)); }

/* Packed activation row: K BF16 values in order, RNE-rounded. A chunk of
 * 32 packs on its own, so a 32-aligned slice lands at act_bytes(offset). */
static size_t act_bytes(uint32_t k) { return (size_t)k * sizeof(uint16_t); }

static void pack_act(const float *x, uint32_t k, void *dst) {
    uint16_t *out = dst;
    for (uint32_t i = 0; i < k; i += 32) {
        /* The first argument fills the high 16 values. */
        __m512bh p = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(x + i));
        _mm512_storeu_si512(out + i, (__m512i)p);
    }
}

#define MC 6        /* activation rows per matrix-matrix tile (4 x MC accumulators) */

/* tile_span for BF16 weights (kernels_blocked.h drives it: 4 x MC tiles,
 * K spans of 1,024 -- a 6-row activation tile of the down projection's
 * K = 3,072 is 36 KiB of BF16 and crowded the 48 KiB L1 out; with spans,
 * that matmul measured ~425-490 -> ~490-565 GFLOPS on 2 Zen 5 cores --
 * decode in MV_ROWS_BF16-row tiles). Chunks [k0, k1) of an R x C tile;
 * R, C, PF compile-time constants at every call site, so acc[][] lives in
 * registers. A span with k0 > 0 picks the accumulators up from carry and
 * one with k1 < k leaves them there (storing and reloading a register is
 * exact). Per output: acc = 0; one vdpbf16ps per 32-value chunk in K
 * order; the fold tree -- whatever R, C, the span cut and the neighbours.
 * PF (decode): each row's line is prefetched R rows ahead, the next
 * tile's, as the FP32 tiers do. Only src SRC_BF16 reaches it: the
 * quantized matmuls have their own driver below. */
static inline __attribute__((always_inline)) void
tile_span(const void *w, int src, size_t row_bytes, uint32_t row0, uint32_t k, const char *x,
          size_t x_stride, int R, int C, int PF, uint32_t n, uint32_t m, float *const *y,
          uint32_t k0, uint32_t k1, __m512 (*carry)[MC]) {
    (void)src, (void)row_bytes, (void)row0;
    const uint16_t *wb = w;
    __m512 acc[8][MC];
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 8
        for (int c = 0; c < C; c++) acc[r][c] = k0 == 0 ? _mm512_setzero_ps() : carry[r][c];
    for (uint32_t i = k0; i < k1; i += 32) {
        __m512bh wv[8];
        #pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            wv[r] = load_bh(wb + (size_t)(n + r) * k + i);
            if (PF) _mm_prefetch((const char *)(wb + (size_t)(n + r + R) * k + i), _MM_HINT_T0);
        }
        #pragma GCC unroll 8
        for (int c = 0; c < C; c++) {
            __m512bh xv = load_bh((const uint16_t *)(x + (size_t)(m + c) * x_stride) + i);
            #pragma GCC unroll 8
            for (int r = 0; r < R; r++) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], wv[r], xv);
        }
    }
    if (k1 < k) { /* a later span continues these chains */
        TILE_PARK(acc, carry, R, C);
        return;
    }
    store_tile(&acc[0][0], MC, R, C, n, m, y);
}

#define MV_ROWS_BF16 8 /* decode: 8 weight rows in flight */
#define BLOCKED_BF16_ONLY
#include "cpu/kernels_blocked.h"

/* ---- quantized weights: Q8_0, Q4_0 (scale4_gs32), Q4_1 (affine4_gs32) ---- */

/* 32 BF16 bit patterns, entry i = the BF16 of Q4_0's (i mod 16) - 8 or
 * Q4_1's i mod 16 (unused for Q8_0): vpermw indexes with the low 5 bits of
 * each word, so a word holding a whole byte (low nibble + junk above bit 3)
 * finds its low nibble's value without masking. Built from the integers
 * with the same conversion pack_act uses, not written out as bit
 * patterns. */
static inline __m512i q4_table(int t) {
    __m512i i = _mm512_and_si512(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        _mm512_set1_epi32(15));
    if (t == QT_Q4_0) i = _mm512_sub_epi32(i, _mm512_set1_epi32(8));
    __m512 f = _mm512_cvtepi32_ps(i);
    return (__m512i)_mm512_cvtne2ps_pbh(f, f);
}

/* Block b of a weight row as 32 BF16 small integers in value order, with
 * its scale d and (Q4_1) minimum m. Exact: every q fits BF16's 8-bit
 * significand. Q4: the 16 nibble bytes twice over (value j < 16 is byte j's
 * low nibble, value j + 16 its high one), zero-extended to words, the upper
 * 16 words shifted right by 4, then one table lookup. Q8_0: sign-extend,
 * convert to FP32, then to BF16 (exact). */
static inline __attribute__((always_inline)) __m512bh qdecode_bf16(int t, const uint8_t *row,
                                                                   uint32_t b, __m512i table,
                                                                   float *d, float *m) {
    if (t == QT_Q8_0) {
        const kipp_block_q8_0 *blk = (const kipp_block_q8_0 *)row + b;
        *d = _cvtsh_ss(blk->d);
        __m512 f0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)blk->qs)));
        __m512 f1 = _mm512_cvtepi32_ps(
            _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk->qs + 16))));
        return _mm512_cvtne2ps_pbh(f1, f0);
    }
    const uint8_t *qs = q4_block(t, row, b, d, m);
    const __m512i shifts = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
    __m512i words = _mm512_cvtepu8_epi16(
        _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs)));
    return as_bh(_mm512_permutexvar_epi16(_mm512_srlv_epi16(words, shifts), table));
}

/* Where a tile's weights come from: quantized rows decoded on the fly
 * (decode, and prefill rows too long for the buffer), or a block of rows
 * decoded once into BF16 + scales (prefill). Both give the same bits. */
typedef struct qsrc {
    const uint8_t *w; /* quantized rows (dec == NULL) */
    size_t row_bytes;
    const uint16_t *dec; /* decoded BF16 rows, k apart, row 0 = weight row n_dec */
    const float *dd, *dm; /* per decoded row, k / 32 scales and minimums */
    uint32_t n_dec;
} qsrc;

/* R weight rows x C activation rows, the per-output sequence in the file
 * comment. PF: prefetch R rows ahead (decode only). */
static inline __attribute__((always_inline)) void qtile(int t, const qsrc *s, uint32_t k,
                                                        const char *x, size_t x_stride, int R,
                                                        int C, int PF, uint32_t n, uint32_t m0,
                                                        float *const *y, __m512i table) {
    __m512 acc[8][MC];
    const __m512 zero = _mm512_setzero_ps();
    const __m512bh ones = as_bh(_mm512_set1_epi16(0x3f80)); /* BF16 1.0 */
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 8
        for (int c = 0; c < C; c++) acc[r][c] = zero;
    const uint32_t nblk = k / 32;
    for (uint32_t b = 0; b < nblk; b++) {
        __m512bh q[8];
        float d[8], mn[8];
        #pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            mn[r] = 0.0f; /* read only for Q4_1 */
            if (s->dec) {
                size_t dr = n + r - s->n_dec;
                q[r] = load_bh(s->dec + dr * k + (size_t)32 * b);
                d[r] = s->dd[dr * nblk + b];
                if (t == QT_Q4_1) mn[r] = s->dm[dr * nblk + b];
            } else {
                if (PF)
                    _mm_prefetch((const char *)(s->w + (size_t)(n + r + R) * s->row_bytes +
                                                b * qblock_bytes(t)),
                                 _MM_HINT_T0);
                q[r] = qdecode_bf16(t, s->w + (size_t)(n + r) * s->row_bytes, b, table, &d[r],
                                    &mn[r]);
            }
        }
        #pragma GCC unroll 8
        for (int c = 0; c < C; c++) {
            __m512bh xv = load_bh((const uint16_t *)(x + (size_t)(m0 + c) * x_stride) + 32 * b);
            __m512 xs = zero;
            if (t == QT_Q4_1) xs = _mm512_dpbf16_ps(zero, ones, xv);
            #pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                __m512 dot = _mm512_dpbf16_ps(zero, q[r], xv);
                acc[r][c] = _mm512_fmadd_ps(_mm512_set1_ps(d[r]), dot, acc[r][c]);
                if (t == QT_Q4_1) acc[r][c] = _mm512_fmadd_ps(_mm512_set1_ps(mn[r]), xs, acc[r][c]);
            }
        }
    }
    store_tile(&acc[0][0], MC, R, C, n, m0, y);
}

/* Prefill decodes a block of weight rows once into this much stack (BF16
 * rows + scales) and runs every activation row against it: the decode
 * work is then per weight row, not per (weight tile, activation tile). */
enum { QDEC_BYTES = 64 * 1024, QDEC_ROWS = 16 };

/* Rows [n0, n1) of every activation row in [0, m), from source s. */
static inline __attribute__((always_inline)) void qrows(int t, const qsrc *s, uint32_t k,
                                                        const char *xb, size_t x_stride,
                                                        uint32_t n0, uint32_t n1, uint32_t m,
                                                        float *const *y, __m512i table) {
    uint32_t r = 0;
    if (t == QT_Q4_1) /* its extra minimum term leaves registers for 4 x 4 */
        for (; r + 4 <= m; r += 4) {
            uint32_t n = n0;
            for (; n + 4 <= n1; n += 4) qtile(t, s, k, xb, x_stride, 4, 4, 0, n, r, y, table);
            for (; n < n1; n++) qtile(t, s, k, xb, x_stride, 1, 4, 0, n, r, y, table);
        }
    else
        for (; r + MC <= m; r += MC) {
            uint32_t n = n0;
            for (; n + 4 <= n1; n += 4) qtile(t, s, k, xb, x_stride, 4, MC, 0, n, r, y, table);
            for (; n < n1; n++) qtile(t, s, k, xb, x_stride, 1, MC, 0, n, r, y, table);
        }
    for (; r < m; r++) {
        uint32_t n = n0;
        for (; n + 4 <= n1; n += 4) qtile(t, s, k, xb, x_stride, 4, 1, 0, n, r, y, table);
        for (; n < n1; n++) qtile(t, s, k, xb, x_stride, 1, 1, 0, n, r, y, table);
    }
}

static inline __attribute__((always_inline)) void matmul_q(int t, const void *w, uint32_t k,
                                                           uint32_t n0, uint32_t n1,
                                                           const void *x, size_t x_stride,
                                                           uint32_t m, float *const *y) {
    const char *xb = x;
    const __m512i table = q4_table(t);
    const uint32_t nblk = k / 32;
    qsrc src = {.w = w, .row_bytes = (size_t)nblk * qblock_bytes(t)};
    if (m == 1) { /* decode: stream weights once, 8 rows in flight */
        uint32_t n = n0;
        for (; n + 8 <= n1; n += 8) qtile(t, &src, k, xb, x_stride, 8, 1, 1, n, 0, y, table);
        for (; n < n1; n++) qtile(t, &src, k, xb, x_stride, 1, 1, 0, n, 0, y, table);
        return;
    }
    uint32_t rows = QDEC_BYTES / (k * (uint32_t)sizeof(uint16_t));
    rows = rows > QDEC_ROWS ? QDEC_ROWS : rows & ~3u;
    if (rows == 0) { /* a row longer than the buffer: decode in the tiles */
        qrows(t, &src, k, xb, x_stride, n0, n1, m, y, table);
        return;
    }
    _Alignas(64) uint16_t dec[QDEC_BYTES / sizeof(uint16_t)];
    float dd[QDEC_BYTES / 32 / sizeof(uint16_t)], dm[QDEC_BYTES / 32 / sizeof(uint16_t)];
    for (uint32_t nb = n0; nb < n1; nb += rows) {
        uint32_t ne = nb + rows < n1 ? nb + rows : n1;
        for (uint32_t n = nb; n < ne; n++) {
            const uint8_t *row = src.w + (size_t)n * src.row_bytes;
            size_t dr = n - nb;
            for (uint32_t b = 0; b < nblk; b++) {
                __m512bh q = qdecode_bf16(t, row, b, table, &dd[dr * nblk + b], &dm[dr * nblk + b]);
                _mm512_store_si512(dec + dr * k + (size_t)32 * b, (__m512i)q);
            }
        }
        qsrc s = {.dec = dec, .dd = dd, .dm = dm, .n_dec = nb};
        qrows(t, &s, k, xb, x_stride, nb, ne, m, y, table);
    }
}

KIPP_CPU_MATMUL_Q_ENTRIES

const kipp_cpu_kernels kipp_cpu_kernels_avx512bf16 = {
    .name = "avx512bf16",
    .act_bf16 = 1,
    .act_bytes = act_bytes,
    .pack_act = pack_act,
    .matmul_bf16 = matmul_bf16,
    .matmul_q8_0 = matmul_q8_0,
    .matmul_q4_0 = matmul_q4_0,
    .matmul_q4_1 = matmul_q4_1,
    .rmsnorm = rmsnorm,
    .rope = rope,
    .silu_mul = silu_mul,
    .attention = attention,
};
#endif
