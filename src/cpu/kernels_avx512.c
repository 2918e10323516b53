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
 * of every chunk; _mm512_reduce_add_ps folds the 16 lanes in its fixed
 * order. The matrix-vector tile (8 weight rows x 1) and the matrix-matrix
 * tile (4 weight rows x up to 4 activation rows) both run this per output.
 * This replaced vdpbf16ps on activations carried as a BF16 hi/lo pair
 * (needed for the oracle gate): that did 2 dot-product instructions per 32
 * MACs and measured ~15 GMAC/s/core against ~24+ for FP32 FMA, and it
 * rounded activations to ~16 bits, which this does not. Attention, norms
 * and elementwise ops: kernels_avx512.h, shared with the avx512bf16 tier. */
#if defined(__x86_64__)
#include "cpu/kernels_avx512.h"

/* Packed activation row: FP32, each 32-value chunk de-interleaved as
 * x[0], x[2], ..., x[30] then x[1], x[3], ..., x[31]. A 32-value BF16
 * weight load holds value 2j in the low and 2j+1 in the high half of dword
 * j, so one shift (even values) and one AND (odd values) widen it to two
 * FP32 vectors that line up with these two halves -- one ALU op per 16
 * weights instead of the zero-extend + shift pair. A chunk packs on its
 * own, so a 32-aligned slice lands at byte offset act_bytes(offset). */
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

/* R weight rows x C activation rows; R and C are compile-time constants at
 * every call site, so acc[][] lives in registers. Per output the sequence
 * is: acc = 0; for each 32-value chunk in K order:
 *   acc = fma(w_even, x_even, acc); acc = fma(w_odd, x_odd, acc);
 * then _mm512_reduce_add_ps(acc) -- independent of R, C and the
 * neighbours, so matrix-vector and matrix-matrix give the same bits. The
 * weight vectors are widened once per chunk and reused by all C rows.
 * PF (decode): each row's line is prefetched R rows ahead -- the next
 * tile's -- so the next rows stream in while this tile computes (rows are
 * only a few KiB, too short for the hardware prefetcher to ramp up on). A
 * prefetch past the tensor's end never faults. */
static inline __attribute__((always_inline)) void tile(const uint16_t *w, uint32_t k,
                                                       const char *x, size_t x_stride,
                                                       int R, int C, int PF, uint32_t n,
                                                       uint32_t m, float *const *y) {
    __m512 acc[8][4];
    const __m512i hi_mask = _mm512_set1_epi32((int)0xffff0000u);
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 8
        for (int c = 0; c < C; c++) acc[r][c] = _mm512_setzero_ps();
    for (uint32_t i = 0; i < k; i += 32) {
        __m512 we[8], wo[8];
        #pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            __m512i wv = _mm512_loadu_si512(w + (size_t)(n + r) * k + i);
            if (PF) _mm_prefetch((const char *)(w + (size_t)(n + r + R) * k + i), _MM_HINT_T0);
            we[r] = _mm512_castsi512_ps(_mm512_slli_epi32(wv, 16));
            wo[r] = _mm512_castsi512_ps(_mm512_and_si512(wv, hi_mask));
        }
        #pragma GCC unroll 8
        for (int c = 0; c < C; c++) {
            const float *xc = (const float *)(x + (size_t)(m + c) * x_stride) + i;
            __m512 xe = _mm512_loadu_ps(xc), xo = _mm512_loadu_ps(xc + 16);
            #pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                acc[r][c] = _mm512_fmadd_ps(we[r], xe, acc[r][c]);
                acc[r][c] = _mm512_fmadd_ps(wo[r], xo, acc[r][c]);
            }
        }
    }
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 8
        for (int c = 0; c < C; c++) y[m + c][n + r] = _mm512_reduce_add_ps(acc[r][c]);
}

#define W_BLOCK 64 /* weight rows kept hot in L2 while activation rows stream */

/* Activation rows r..r+C of weight rows [nb, ne): 4-row weight tiles. */
#define ROW_TILES(C)                                                              \
    do {                                                                          \
        uint32_t n = nb;                                                          \
        for (; n + 4 <= ne; n += 4) tile(w, k, xb, x_stride, 4, C, 0, n, r, y);      \
        for (; n < ne; n++) tile(w, k, xb, x_stride, 1, C, 0, n, r, y);              \
    } while (0)

static void matmul_bf16(const uint16_t *w, uint32_t k, uint32_t n0, uint32_t n1,
                        const void *x, size_t x_stride, uint32_t m, float *const *y) {
    const char *xb = x;
    if (m == 1) { /* decode: stream weights once, 8 rows in flight */
        uint32_t n = n0;
        for (; n + 8 <= n1; n += 8) tile(w, k, xb, x_stride, 8, 1, 1, n, 0, y);
        for (; n < n1; n++) tile(w, k, xb, x_stride, 1, 1, 0, n, 0, y);
        return;
    }
    for (uint32_t nb = n0; nb < n1; nb += W_BLOCK) {
        uint32_t ne = nb + W_BLOCK < n1 ? nb + W_BLOCK : n1;
        uint32_t r = 0;
        for (; r + 4 <= m; r += 4) ROW_TILES(4);
        switch (m - r) { /* the last 1-3 rows in one pass over the weights */
        case 3: ROW_TILES(3); break;
        case 2: ROW_TILES(2); break;
        case 1: ROW_TILES(1); break;
        default: break;
        }
    }
}
#undef ROW_TILES

/* ---- quantized weights: Q8_0, Q4_0 (scale4_gs32), Q4_1 (affine4_gs32) ----
 * Blocks are decoded in registers to 2 x 16 FP32 small integers q (Q4_0:
 * nibble - 8), exact; the packed FP32 activation chunk is put back in
 * value order (act_f32), so a quantized matmul is plain FP32 FMA work.
 * Per output, in block order:
 *   w = d * q (Q4_1: FMA(d, q, m));  acc = FMA(w0, x0, acc); acc = FMA(w1, x1, acc)
 * then _mm512_reduce_add_ps. Tiles of up to 4 weight rows x 4 activation
 * rows share decoded blocks and reordered chunks; every output runs the
 * same sequence whatever its tile. */
/* Block b of a row as its 32 FP32 weights w[0] (values 0..15), w[1]
 * (16..31): the values the oracle decodes, d * q (Q4_1: FMA(d, q, m)).
 * Q8_0 converts its int8 q. Q4_0 / Q4_1 look the weights up instead: the
 * 16 possible weights of the block (d * (i - 8), or FMA(d, i, m), i =
 * 0..15: the same IEEE operations on the same operands, so bitwise the
 * same values) fill one register, and _mm512_permutexvar_ps picks each
 * lane's weight by the low 4 bits of its index -- the zero-extended byte
 * gives the low nibble as is, the byte shifted right by 4 the high one.
 * That is 5 vector ops per block instead of 12, which decode (bound by
 * this work on Q4 rows, not by memory) feels directly. */
static inline __attribute__((always_inline)) void qweights(int t, const uint8_t *row, uint32_t b,
                                                           __m512 w[2]) {
    if (t == QT_Q8_0) {
        const kipp_block_q8_0 *blk = (const kipp_block_q8_0 *)row + b;
        __m512 d = _mm512_set1_ps(_cvtsh_ss(blk->d));
        __m128i lo = _mm_loadu_si128((const __m128i *)blk->qs);
        __m128i hi = _mm_loadu_si128((const __m128i *)(blk->qs + 16));
        w[0] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lo)));
        w[1] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(hi)));
        return;
    }
    float d, m = 0.0f;
    const uint8_t *qs = q4_block(t, row, b, &d, &m);
    __m512 table;
    if (t == QT_Q4_0) {
        const __m512 q = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
        table = _mm512_mul_ps(_mm512_set1_ps(d), q);
    } else {
        const __m512 q = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        table = _mm512_fmadd_ps(_mm512_set1_ps(d), q, _mm512_set1_ps(m));
    }
    __m512i idx = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)qs));
    w[0] = _mm512_permutexvar_ps(idx, table);
    w[1] = _mm512_permutexvar_ps(_mm512_srli_epi32(idx, 4), table);
}

/* Activation chunk b of a packed row as FP32: x[0] = values 0..15, x[1] = 16..31.
 * The packed chunk is FP32 de-interleaved (evens, then odds; see pack_act):
 * two permutes put it back in order, exactly. */
static inline __attribute__((always_inline)) void act_f32(const char *xrow, uint32_t b,
                                                          __m512 x[2]) {
    const float *xc = (const float *)xrow + (size_t)32 * b;
    __m512 e = _mm512_loadu_ps(xc), o = _mm512_loadu_ps(xc + 16);
    x[0] = _mm512_permutex2var_ps(e, _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23), o);
    x[1] = _mm512_permutex2var_ps(e, _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31), o);
}

/* R weight rows x C activation rows (compile-time constants at every call
 * site). Per block, each weight row is decoded once (qweights: w = d * q,
 * Q4_1: d * q + m, the values the oracle decodes) and each activation chunk
 * reordered once; then every (row, activation) pair is two FMAs, as in the
 * BF16 tile. PF: prefetch R rows ahead, as the BF16 tile. */
static inline __attribute__((always_inline)) void qtile(int t, const uint8_t *w, size_t row_bytes,
                                                        uint32_t k, const char *x,
                                                        size_t x_stride, int R, int C, int PF,
                                                        uint32_t n, uint32_t m0,
                                                        float *const *y) {
    __m512 acc[8][4];
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 4
        for (int c = 0; c < C; c++) acc[r][c] = _mm512_setzero_ps();
    for (uint32_t b = 0; b < k / 32; b++) {
        __m512 wv[8][2];
        #pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            if (PF)
                _mm_prefetch((const char *)(w + (size_t)(n + r + R) * row_bytes + b * qblock_bytes(t)),
                             _MM_HINT_T0);
            qweights(t, w + (size_t)(n + r) * row_bytes, b, wv[r]);
        }
        #pragma GCC unroll 4
        for (int c = 0; c < C; c++) {
            __m512 xv[2];
            act_f32(x + (size_t)(m0 + c) * x_stride, b, xv);
            #pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                acc[r][c] = _mm512_fmadd_ps(wv[r][0], xv[0], acc[r][c]);
                acc[r][c] = _mm512_fmadd_ps(wv[r][1], xv[1], acc[r][c]);
            }
        }
    }
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 4
        for (int c = 0; c < C; c++) y[m0 + c][n + r] = _mm512_reduce_add_ps(acc[r][c]);
}

static inline __attribute__((always_inline)) void matmul_q(int t, const void *w, uint32_t k,
                                                           uint32_t n0, uint32_t n1,
                                                           const void *x, size_t x_stride,
                                                           uint32_t m, float *const *y) {
    enum { NB = 64 }; /* weight rows per cache block */
    const char *xb = x;
    const uint8_t *wb = w;
    size_t row_bytes = (size_t)(k / 32) * qblock_bytes(t);
    if (m == 1) { /* decode: stream weights once, 8 rows in flight */
        uint32_t n = n0;
        for (; n + 8 <= n1; n += 8) qtile(t, wb, row_bytes, k, xb, x_stride, 8, 1, 1, n, 0, y);
        for (; n < n1; n++) qtile(t, wb, row_bytes, k, xb, x_stride, 1, 1, 0, n, 0, y);
        return;
    }
    for (uint32_t nb = n0; nb < n1; nb += NB) {
        uint32_t ne = nb + NB < n1 ? nb + NB : n1;
        uint32_t r = 0;
        for (; r + 4 <= m; r += 4) {
            uint32_t n = nb;
            for (; n + 4 <= ne; n += 4) qtile(t, wb, row_bytes, k, xb, x_stride, 4, 4, 0, n, r, y);
            for (; n < ne; n++) qtile(t, wb, row_bytes, k, xb, x_stride, 1, 4, 0, n, r, y);
        }
        for (; r < m; r++) {
            uint32_t n = nb;
            for (; n + 4 <= ne; n += 4) qtile(t, wb, row_bytes, k, xb, x_stride, 4, 1, 0, n, r, y);
            for (; n < ne; n++) qtile(t, wb, row_bytes, k, xb, x_stride, 1, 1, 0, n, r, y);
        }
    }
}

KIPP_CPU_MATMUL_Q_ENTRIES

const kipp_cpu_kernels kipp_cpu_kernels_avx512 = {
    .name = "avx512",
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
