/* The AMX tier's matmuls (kipp_cpu_matmul_fn, kipp_cpu_matmul_q_fn) on
 * TDPBF16PS tiles, written once over amx_tiles.h's operations. Included by kernels_amx.c
 * (the instructions) and by tests/unit/amx_emulated.c (KIPP_AMX_EMULATE);
 * both compile it with AVX-512 F/BW/VL/DQ and BF16, which the repacking
 * below uses.
 *
 * NUMERICS. Activations arrive packed by the avx512bf16 tier's pack_act
 * (K BF16 values in order, RNE-rounded), so the amx tier's numbers differ
 * from avx512bf16's only in how the BF16 products accumulate. Quantized
 * weights are avx512bf16's too: each block decoded to the oracle's FP32
 * weights and rounded to BF16 (kipp_cpu_bf16_qdecode), into the same
 * tiles BF16 rows go into, so every scheme runs one sequence. Per output
 * (activation row m, weight row n): acc = 0; for each BF16 pair p of K in
 * order, acc += x[2p] w[2p], then acc += x[2p+1] w[2p+1], each addition
 * rounded (TDPBF16PS, amx_tiles.h). No lane fold: a tile element is one
 * output's whole chain.
 *
 * BATCH INVARIANCE. That chain does not depend on which tile, tile row or
 * column an output lands in, nor on m: prefill (m > 1) puts activations
 * in A (16 rows x 32 K values, loaded straight from the packed rows) and
 * weights in B (16 weight rows x 32 K values, repacked into pairs per
 * column); decode (m = 1) swaps them -- weights in A, loaded straight from
 * the mapped rows, the one activation row in B with a 4-byte stride (its
 * pairs down the rows) -- which changes only which operand of each exact
 * product is which. K runs in one chain per output: prefill cuts it into
 * spans of AMX_K_SPAN, storing the accumulators into y between spans and
 * loading them back (exact). Threads split weight rows (n0, n1), never K.
 * The emulated build checks all of this bit for bit on every AVX-512
 * machine (tests/unit/test_cpu_amx.c). */
#ifndef KIPP_CPU_AMX_MATMUL_H
#define KIPP_CPU_AMX_MATMUL_H

#include <immintrin.h>
#include <string.h>

#include "cpu/amx_tiles.h"
#include "cpu/kernels.h"

/* K values per prefill span: the two repacked B columns of a span are
 * 2 x 32 chunks x 1 KiB = 64 KiB, L2-resident while every activation tile
 * of the call passes them. */
#define AMX_K_SPAN 1024
#define AMX_PAIRS 16 /* BF16 pairs per tile row: 64 bytes, 32 K values */
_Static_assert(AMX_K_SPAN % (2 * AMX_PAIRS) == 0, "spans are whole tile chunks");
_Static_assert(KIPP_CPU_K_ALIGN % (2 * AMX_PAIRS) == 0, "K is whole tile chunks");

/* Prefill tiles: C[i][j] accumulates activation group i (16 rows) against
 * weight group j (16 rows); A[i] the activations, B[j] the weights. */
#define AMX_C00 0
#define AMX_C01 1
#define AMX_C10 2
#define AMX_C11 3
#define AMX_A0 4
#define AMX_A1 5
#define AMX_B0 6
#define AMX_B1 7
/* Decode tiles: DC[j] (16 weight rows x 1 output), DA[j] the weights,
 * DB the activation row. */
#define AMX_DC0 0
#define AMX_DC1 1
#define AMX_DA0 2
#define AMX_DA1 3
#define AMX_DB 4

/* Where a matmul's BF16 weight rows come from: the mapped BF16 matrix
 * (q < 0), or quantized rows (q a kipp_cpu_qtype, rows row_bytes apart)
 * decoded a span or a chunk at a time by kipp_cpu_bf16_qdecode -- the
 * avx512bf16 tier's weights, each the oracle's rounded to BF16. */
typedef struct amx_wsrc {
    const void *w;
    int q;
    size_t row_bytes;
} amx_wsrc;

static inline uint32_t amx_min(uint32_t a, uint32_t b) { return a < b ? a : b; }

static inline void amx_tile_shape(amx_tilecfg *cfg, int t, unsigned rows, unsigned colsb) {
    cfg->rows[t] = (uint8_t)(colsb ? rows : 0);
    cfg->colsb[t] = (uint16_t)(rows ? colsb : 0);
}

/* Load a configuration: tile t gets rows[t] rows of colsb[t] bytes (0: unused). */
static inline void amx_configure(const unsigned rows[AMX_TILES], const unsigned colsb[AMX_TILES]) {
    amx_tilecfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < AMX_TILES; t++) amx_tile_shape(&cfg, t, rows[t], colsb[t]);
    AMX_CONFIG(&cfg);
}

/* Prefill: r0 and r1 activation rows in groups 0 and 1 (r1 may be 0). */
static inline void amx_config_prefill(unsigned r0, unsigned r1) {
    unsigned rows[AMX_TILES], colsb[AMX_TILES];
    rows[AMX_C00] = rows[AMX_C01] = rows[AMX_A0] = r0;
    rows[AMX_C10] = rows[AMX_C11] = rows[AMX_A1] = r1;
    rows[AMX_B0] = rows[AMX_B1] = AMX_PAIRS;
    for (int t = 0; t < AMX_TILES; t++) colsb[t] = AMX_ROW_BYTES;
    amx_configure(rows, colsb);
}

/* Decode: r0 and r1 weight rows in groups 0 and 1 (r1 may be 0); the
 * accumulators and the activation tile one 4-byte column wide. */
static inline void amx_config_decode(unsigned r0, unsigned r1) {
    unsigned rows[AMX_TILES] = {0}, colsb[AMX_TILES] = {0};
    rows[AMX_DC0] = rows[AMX_DA0] = r0;
    rows[AMX_DC1] = rows[AMX_DA1] = r1;
    rows[AMX_DB] = AMX_PAIRS;
    colsb[AMX_DA0] = colsb[AMX_DA1] = AMX_ROW_BYTES;
    colsb[AMX_DC0] = colsb[AMX_DC1] = colsb[AMX_DB] = 4;
    amx_configure(rows, colsb);
}

/* 16 rows of 16 dwords (rows[n], 64 bytes each) transposed into dst[p][n]
 * (1 KiB): a B tile whose row p holds every weight row's pair p. Three
 * rounds of shuffles (dword, qword, then 128-bit lanes twice). */
static inline void amx_transpose16(const void *const rows[16], uint32_t *dst) {
    __m512i r[16], t[16], u[16];
    for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_si512(rows[i]);
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);     /* per lane: a0 b0 a1 b1 */
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]); /* a2 b2 a3 b3 */
    }
    for (int i = 0; i < 16; i += 4) { /* u[i + j]: rows i..i+3 at column j of each lane */
        u[i + 0] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int j = 0; j < 4; j++) { /* lane L of u[4 i + j] is column 4 L + j of rows 4i..4i+3 */
        __m512i w0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x44);
        __m512i w1 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xee);
        __m512i w2 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x44);
        __m512i w3 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xee);
        _mm512_storeu_si512(dst + 16 * (0 + j), _mm512_shuffle_i32x4(w0, w2, 0x88));
        _mm512_storeu_si512(dst + 16 * (4 + j), _mm512_shuffle_i32x4(w0, w2, 0xdd));
        _mm512_storeu_si512(dst + 16 * (8 + j), _mm512_shuffle_i32x4(w1, w3, 0x88));
        _mm512_storeu_si512(dst + 16 * (12 + j), _mm512_shuffle_i32x4(w1, w3, 0xdd));
    }
}

/* Weight rows [nb, nb + nr) (nr <= 32), K values [k0, k0 + 32 chunks), as
 * the B tiles of groups 0 and 1: bpack[j][c] is group j's tile for chunk
 * c. Rows past nr read as zeros (their outputs are never stored).
 * Quantized rows are decoded a group's span at a time into dec first. */
static inline void amx_repack(const amx_wsrc *src, uint32_t k, uint32_t nb, uint32_t nr,
                              uint32_t k0, uint32_t chunks,
                              uint32_t (*bpack)[AMX_K_SPAN / 32][16 * AMX_PAIRS],
                              uint16_t *dec) {
    static const _Alignas(64) uint16_t zeros[32];
    for (uint32_t j = 0; j * 16 < nr; j++) {
        const uint32_t rows = amx_min(16, nr - 16 * j);
        if (src->q >= 0)
            kipp_cpu_bf16_qdecode((kipp_cpu_qtype)src->q, src->w, src->row_bytes, nb + 16 * j,
                                  rows, k0 / 32, chunks, dec, AMX_K_SPAN);
        for (uint32_t c = 0; c < chunks; c++) {
            const void *rp[16];
            for (uint32_t n = 0; n < 16; n++)
                rp[n] = n >= rows    ? (const void *)zeros
                        : src->q < 0 ? (const void *)((const uint16_t *)src->w +
                                                      (size_t)(nb + 16 * j + n) * k + k0 + 32 * c)
                                     : (const void *)(dec + (size_t)n * AMX_K_SPAN + 32 * c);
            amx_transpose16(rp, bpack[j][c]);
        }
    }
}

/* Accumulators of outputs (rows [t, t + rows), columns [n, n + cols)) between
 * y and a 16 x 16 tile image. */
static inline void amx_gather(float *img, float *const *y, uint32_t t, uint32_t rows, uint32_t n,
                              uint32_t cols) {
    memset(img, 0, 16 * 16 * sizeof *img);
    for (uint32_t r = 0; r < rows; r++) memcpy(img + 16 * r, y[t + r] + n, cols * sizeof *img);
}

static inline void amx_scatter(const float *img, float *const *y, uint32_t t, uint32_t rows,
                               uint32_t n, uint32_t cols) {
    for (uint32_t r = 0; r < rows; r++) memcpy(y[t + r] + n, img + 16 * r, cols * sizeof *img);
}

/* m > 1: every activation row against weight rows [n0, n1), 32 x 32 output
 * blocks of four C tiles, K in spans. */
static void amx_prefill(const amx_wsrc *src, uint32_t k, uint32_t n0, uint32_t n1, const char *x,
                        size_t x_stride, uint32_t m, float *const *y) {
    _Alignas(64) uint32_t bpack[2][AMX_K_SPAN / 32][16 * AMX_PAIRS];
    _Alignas(64) uint16_t dec[16 * AMX_K_SPAN]; /* quantized rows, one group's span */
    _Alignas(64) float img[16 * 16];
    unsigned cfg_r0 = 0, cfg_r1 = 0;
    for (uint32_t nb = n0; nb < n1; nb += 32) {
        const uint32_t nr = amx_min(32, n1 - nb), c0 = amx_min(16, nr), c1 = nr - c0;
        for (uint32_t k0 = 0; k0 < k; k0 += AMX_K_SPAN) {
            const uint32_t chunks = amx_min(AMX_K_SPAN, k - k0) / 32;
            const int first = k0 == 0; /* later spans pick up the sums left in y */
            amx_repack(src, k, nb, nr, k0, chunks, bpack, dec);
            for (uint32_t t0 = 0; t0 < m; t0 += 32) {
                const unsigned r0 = amx_min(16, m - t0), r1 = amx_min(16, m - t0 - r0);
                if (r0 != cfg_r0 || r1 != cfg_r1) {
                    amx_config_prefill(r0, r1);
                    cfg_r0 = r0, cfg_r1 = r1;
                }
#define AMX_C_IN(T, i, rows, j, cols)                                           \
    do {                                                                        \
        if (first) {                                                            \
            AMX_ZERO(T);                                                        \
        } else {                                                                \
            amx_gather(img, y, t0 + 16 * (i), rows, nb + 16 * (j), cols);       \
            AMX_LOAD(T, img, 64);                                               \
        }                                                                       \
    } while (0)
#define AMX_C_OUT(T, i, rows, j, cols)                                          \
    do {                                                                        \
        AMX_STORE(T, img, 64);                                                  \
        amx_scatter(img, y, t0 + 16 * (i), rows, nb + 16 * (j), cols);          \
    } while (0)
                AMX_C_IN(AMX_C00, 0, r0, 0, c0);
                if (c1) AMX_C_IN(AMX_C01, 0, r0, 1, c1);
                if (r1) AMX_C_IN(AMX_C10, 1, r1, 0, c0);
                if (r1 && c1) AMX_C_IN(AMX_C11, 1, r1, 1, c1);
                const char *xa = x + (size_t)t0 * x_stride + (size_t)k0 * sizeof(uint16_t);
                for (uint32_t c = 0; c < chunks; c++, xa += 64) {
                    AMX_LOAD(AMX_A0, xa, x_stride);
                    AMX_LOAD(AMX_B0, bpack[0][c], 64);
                    AMX_DP(AMX_C00, AMX_A0, AMX_B0);
                    if (c1) {
                        AMX_LOAD(AMX_B1, bpack[1][c], 64);
                        AMX_DP(AMX_C01, AMX_A0, AMX_B1);
                    }
                    if (r1) {
                        AMX_LOAD(AMX_A1, xa + 16 * x_stride, x_stride);
                        AMX_DP(AMX_C10, AMX_A1, AMX_B0);
                        if (c1) AMX_DP(AMX_C11, AMX_A1, AMX_B1);
                    }
                }
                AMX_C_OUT(AMX_C00, 0, r0, 0, c0);
                if (c1) AMX_C_OUT(AMX_C01, 0, r0, 1, c1);
                if (r1) AMX_C_OUT(AMX_C10, 1, r1, 0, c0);
                if (r1 && c1) AMX_C_OUT(AMX_C11, 1, r1, 1, c1);
#undef AMX_C_IN
#undef AMX_C_OUT
            }
        }
    }
}

/* m = 1: weight rows [n0, n1), 32 per pass, against the activation row x
 * (packed BF16) into out[n0..n1): BF16 rows straight from the mapped
 * matrix, quantized rows decoded a chunk (16 rows x 32 values) at a time. */
static void amx_decode(const amx_wsrc *src, uint32_t k, uint32_t n0, uint32_t n1,
                       const uint16_t *x, float *out) {
    const uint16_t *w = src->w;
    const size_t w_stride = (size_t)k * sizeof(uint16_t);
    _Alignas(64) uint16_t dec[2][16 * 32];
    unsigned cfg_r0 = 0, cfg_r1 = 0;
    for (uint32_t nb = n0; nb < n1; nb += 32) {
        const unsigned r0 = amx_min(16, n1 - nb), r1 = amx_min(16, n1 - nb - r0);
        if (r0 != cfg_r0 || r1 != cfg_r1) {
            amx_config_decode(r0, r1);
            cfg_r0 = r0, cfg_r1 = r1;
        }
        AMX_ZERO(AMX_DC0);
        if (r1) AMX_ZERO(AMX_DC1);
        for (uint32_t i = 0; i < k; i += 32) {
            AMX_LOAD(AMX_DB, x + i, 4); /* pair p of the chunk on row p */
            if (src->q < 0) {
                const uint16_t *w0 = w + (size_t)nb * k + i;
                AMX_LOAD(AMX_DA0, w0, w_stride);
                AMX_DP(AMX_DC0, AMX_DA0, AMX_DB);
                if (r1) {
                    AMX_LOAD(AMX_DA1, w0 + (size_t)16 * k, w_stride);
                    AMX_DP(AMX_DC1, AMX_DA1, AMX_DB);
                }
            } else {
                kipp_cpu_bf16_qdecode((kipp_cpu_qtype)src->q, src->w, src->row_bytes, nb, r0,
                                      i / 32, 1, dec[0], 32);
                AMX_LOAD(AMX_DA0, dec[0], 64);
                AMX_DP(AMX_DC0, AMX_DA0, AMX_DB);
                if (r1) {
                    kipp_cpu_bf16_qdecode((kipp_cpu_qtype)src->q, src->w, src->row_bytes,
                                          nb + 16, r1, i / 32, 1, dec[1], 32);
                    AMX_LOAD(AMX_DA1, dec[1], 64);
                    AMX_DP(AMX_DC1, AMX_DA1, AMX_DB);
                }
            }
        }
        AMX_STORE(AMX_DC0, out + nb, 4);
        if (r1) AMX_STORE(AMX_DC1, out + nb + 16, 4);
    }
}

static void amx_matmul(const amx_wsrc *src, uint32_t k, uint32_t n0, uint32_t n1, const void *x,
                       size_t x_stride, uint32_t m, float *const *y) {
    if (n0 >= n1 || m == 0) return;
    if (m == 1)
        amx_decode(src, k, n0, n1, x, y[0]);
    else
        amx_prefill(src, k, n0, n1, x, x_stride, m, y);
    AMX_RELEASE(); /* the next call configures afresh; no tile state lingers */
}

static inline void amx_matmul_bf16(const uint16_t *w, uint32_t k, uint32_t n0, uint32_t n1,
                                   const void *x, size_t x_stride, uint32_t m, float *const *y) {
    const amx_wsrc src = {w, -1, 0};
    amx_matmul(&src, k, n0, n1, x, x_stride, m, y);
}

/* Quantized rows of K / 32 blocks of format q (kipp_cpu_qtype). */
static inline void amx_matmul_q(int q, const void *w, uint32_t k, uint32_t n0, uint32_t n1,
                                const void *x, size_t x_stride, uint32_t m, float *const *y) {
    static const size_t block_bytes[3] = {sizeof(kipp_block_q8_0), sizeof(kipp_block_q4_0),
                                          sizeof(kipp_block_q4_1)};
    const amx_wsrc src = {w, q, (size_t)(k / 32) * block_bytes[q]};
    amx_matmul(&src, k, n0, n1, x, x_stride, m, y);
}

/* The three quantized entry points (kipp_cpu_matmul_q_fn) PREFIX##q8_0,
 * PREFIX##q4_0, PREFIX##q4_1, with LINKAGE (empty or static): kernels_amx.c
 * defines the tier's, tests/unit/amx_emulated.c the emulated ones. */
#define AMX_MATMUL_Q_ENTRY(LINKAGE, NAME, Q)                                                 \
    LINKAGE void NAME(const void *w, uint32_t k, uint32_t n0, uint32_t n1, const void *x,    \
                      size_t x_stride, uint32_t m, float *const *y) {                        \
        amx_matmul_q(Q, w, k, n0, n1, x, x_stride, m, y);                                    \
    }
#define AMX_MATMUL_Q_ENTRIES(LINKAGE, PREFIX)                                                \
    AMX_MATMUL_Q_ENTRY(LINKAGE, PREFIX##q8_0, KIPP_CPU_Q8_0)                                 \
    AMX_MATMUL_Q_ENTRY(LINKAGE, PREFIX##q4_0, KIPP_CPU_Q4_0)                                 \
    AMX_MATMUL_Q_ENTRY(LINKAGE, PREFIX##q4_1, KIPP_CPU_Q4_1)

#endif
