/* The opt-in avx2i8 tier: the avx2 tier (kernels_avx2.c, compiled a second
 * time into this file, with the same -mavx2 -mfma -mf16c) but for the
 * quantized-weight matmuls, which multiply 8-bit activations with integer
 * dot products -- the numerics llama.cpp uses for these formats on every
 * x86 build. auto never picks it (cpu_isa avx2i8 / KIPP_CPU_ISA=avx2i8):
 * quantizing activations moves the logits off the oracle's, as rounding
 * them to BF16 does on avx512bf16 (docs/ARCHITECTURE.md, "The avx2i8
 * tier"). BF16 weights (a BF16 model, and every model's output head) and
 * everything else -- norms, RoPE, attention -- are avx2's, bit for bit.
 *
 * Why: a Q4_0 block decoded to exact FP32 weights costs avx2 ~19 vector
 * operations per row and block, and decode is bound by that, not by memory
 * (stop 31: 0.74x llama.cpp's Q4_0 decode on AVX2). The integer dot below
 * takes ~10. Prefill pays instead: per weight row, activation row and
 * block it takes ~6 operations (two integer multiplies, a convert, a
 * multiply, an FMA, a subtract or sign) where the FP32 tiles take 4 FMAs
 * on weights decoded once, so it runs ~10-25 % slower than avx2's.
 *
 * NUMERICS (each quantized matmul output y[m][n]; tests/unit/
 * test_cpu_qkernels.c holds a scalar reference written apart from this):
 *  - activations, per 32-value block of a row (pack_act): amax = max |x_i|,
 *    d_x = amax / 127, xq_i = round-to-nearest-even(x_i * (127 / amax)),
 *    an int8 in [-127, 127]; s_x = d_x * sum_i xq_i. A block with amax
 *    below 2^-120 (0 included; 127 / amax would overflow) is all zeros with
 *    d_x = 0. A block with a non-finite value gets d_x = s_x = NaN (the
 *    outputs it feeds become NaN, as the oracle's would, not garbage);
 *  - weights: Q8_0 wq = q, Q4_0 wq = nibble - 8, Q4_1 wq = nibble (its
 *    minimum m is added below);
 *  - per block b and lane j (values 4j .. 4j+3): p_j = sum wq_i * xq_i, an
 *    exact integer; acc_j = FMA((float)p_j, d_w * d_x, acc_j) in block order
 *    (d_w * d_x one FP32 multiply); Q4_1 also ms = FMA(m, s_x, ms), one
 *    scalar chain in block order;
 *  - y = hsum8(acc) (avx2's fold), Q4_1: hsum8(acc) + ms.
 * The per-output sequence is fixed by the weight shape alone, so decode,
 * prefill and any column split give the same bits (kernels.h).
 *
 * ACTIVATION FORMAT. cpu_forward.c packs 32-aligned slices of a row at
 * byte offset act_bytes(off), so every 32-value block packs to a fixed-size
 * record: its 32 FP32 values (what the BF16 matmul reads: avx2's tile_span
 * through ACT_F32), then its 32 int8 xq, d_x and s_x.
 *
 * kernels_avx2i8_vnni.c compiles this file again with KIPP_AVX2I8_VNNI:
 * each integer dot one vpdpbusd, the same sums, the same bits. */
#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu/kernels.h"

#define KIPP_AVX2_I8 1
#define KIPP_BLOCKED_BF16_ONLY 1

enum {
    I8_REC = 192,    /* bytes per 32-value block: 3 lines */
    I8_Q = 128,      /* int8 xq[32] */
    I8_D = 160,      /* float d_x */
    I8_S = 164,      /* float s_x */
};
_Static_assert(I8_S + 4 <= I8_REC && I8_REC % 64 == 0, "a record is whole lines");

static size_t act_bytes(uint32_t k) { return (size_t)(k + 31) / 32 * I8_REC; }

/* FP32 value i (a multiple of 8) of packed activation row xr. */
#define ACT_F32(xr, i) ((const float *)((const char *)(xr) + (size_t)(i) / 32 * I8_REC) + (i) % 32)

#define I8_TINY 0x1p-120f

/* k is a multiple of 32 (KIPP_CPU_K_ALIGN), as everywhere in the tiers. */
static void pack_act(const float *x, uint32_t k, void *dst) {
    uint8_t *rec = dst;
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (uint32_t c = 0; c < k; c += 32, rec += I8_REC) {
        __m256 v[4], amax = _mm256_setzero_ps(), nonfinite = _mm256_setzero_ps();
        for (int j = 0; j < 4; j++) {
            v[j] = _mm256_loadu_ps(x + c + 8 * j);
            _mm256_storeu_ps((float *)rec + 8 * j, v[j]);
            __m256 mag = _mm256_and_ps(v[j], abs_mask);
            amax = _mm256_max_ps(mag, amax);
            __m256 z = _mm256_sub_ps(mag, mag); /* NaN exactly for inf and NaN */
            nonfinite = _mm256_or_ps(nonfinite, _mm256_cmp_ps(z, z, _CMP_UNORD_Q));
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        float a = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
        int bad = _mm256_movemask_ps(nonfinite) != 0;
        /* Below I8_TINY, 127 / amax would overflow: the block is zeros. */
        float d = bad ? NAN : a < I8_TINY ? 0.0f : a / 127.0f;
        float id = bad || a < I8_TINY ? 0.0f : 127.0f / a;
        __m256 vid = _mm256_set1_ps(id);
        __m256i q[4];
        for (int j = 0; j < 4; j++) /* cvtps rounds to nearest even (MXCSR default) */
            q[j] = bad ? _mm256_setzero_si256() : _mm256_cvtps_epi32(_mm256_mul_ps(v[j], vid));
        /* 32 dwords to 32 bytes in value order: the packs work per 128-bit
         * half, leaving dword groups of 4 values as q0a q1a q2a q3a q0b
         * q1b q2b q3b (a: a vector's first 4, b: its last 4). */
        __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        b = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)(rec + I8_Q), b);
        int sum = 0;
        for (int i = 0; i < 32; i++) sum += (int8_t)rec[I8_Q + i];
        float s = d * (float)sum;
        memcpy(rec + I8_D, &d, sizeof d);
        memcpy(rec + I8_S, &s, sizeof s);
        memset(rec + I8_S + 4, 0, I8_REC - I8_S - 4); /* every byte defined */
    }
}

#include "cpu/kernels_avx2.c"

/* ---- the integer-dot quantized matmuls ----
 * A weight block as vpmaddubsw's unsigned operand: Q8_0 |q|, with the signs
 * q put onto the activations (vpsignb); Q4_0 and Q4_1 the nibbles
 * themselves, Q4_0's -8 taken off afterwards as 8 x each lane's sum of xq
 * (computed once per activation row and block, shared by the tile's weight
 * rows: cheaper than |nibble - 8| and its signs per weight row). Every pair
 * sum vpmaddubsw forms is at most 2 x 128 x 127 = 32,512 in magnitude: it
 * never saturates. */
typedef struct i8_wblock {
    __m256i mag, sgn; /* sgn: Q8_0's q (the others: unused) */
    __m256 d; /* d_w on all lanes */
    float m;  /* Q4_1's minimum */
} i8_wblock;

static inline __attribute__((always_inline)) i8_wblock i8_weights(int t, const uint8_t *blk) {
    i8_wblock wb;
    if (t == QT_Q8_0) {
        const kipp_block_q8_0 *b = (const kipp_block_q8_0 *)blk;
        wb.sgn = _mm256_loadu_si256((const __m256i *)b->qs);
        wb.mag = _mm256_abs_epi8(wb.sgn);
        wb.d = half8(b->d);
        wb.m = 0;
        return wb;
    }
    uint16_t dh, mh = 0;
    const uint8_t *qs = q4_block(t, blk, 0, &dh, &mh);
    /* values 0..15 low nibbles of bytes 0..15, values 16..31 high ones */
    __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    v = _mm256_and_si256(_mm256_srlv_epi64(v, _mm256_setr_epi64x(0, 0, 4, 4)), _mm256_set1_epi8(15));
    wb.d = half8(dh);
    wb.mag = v;
    wb.sgn = v;
    wb.m = t == QT_Q4_1 ? kipp_cpu_f16_table[mh] : 0.0f;
    return wb;
}

/* One R x C tile over all nblk blocks (R, C, PF compile-time constants):
 * weight rows n .. n+R-1, activation rows m .. m+C-1, the sequence the
 * NUMERICS above define per output. */
static inline __attribute__((always_inline)) void
i8_tile(int t, const uint8_t *w, size_t row_bytes, uint32_t nblk, const uint8_t *x,
        size_t x_stride, int R, int C, int PF, uint32_t n, uint32_t m, float *const *y) {
    __m256 acc[4][4];
    float ms[4][4];
    #pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 4
        for (int c = 0; c < C; c++) acc[r][c] = _mm256_setzero_ps(), ms[r][c] = 0.0f;
#ifndef KIPP_AVX2I8_VNNI
    const __m256i ones = _mm256_set1_epi16(1);
#endif
    qtile_ptrs qt = qtile_at(w, row_bytes, n, 1, 0, t, R, PF);
    seq_pf sp = seq_pf_at(w, t, row_bytes, nblk * 32, n, 0, R, PF);
    for (uint32_t b = 0; b < nblk; b++) {
        qtile_prefetch(&qt, t, R, PF);
        seq_pf_step(&sp, t, R, PF);
        const uint8_t *xb = x + (size_t)b * I8_REC;
        /* Q4_0: the nibbles' dot minus 8 x each lane's sum of xq, once per
         * activation row for all R weight rows (exact integers; VNNI
         * starts each dot from the negated correction). */
        __m256i corr[4];
        #pragma GCC unroll 4
        for (int c = 0; c < C; c++)
            if (t == QT_Q4_0) {
                __m256i xq = _mm256_loadu_si256((const __m256i *)(xb + (size_t)(m + c) * x_stride + I8_Q));
#ifdef KIPP_AVX2I8_VNNI
                corr[c] = _mm256_sub_epi32(_mm256_setzero_si256(),
                                           _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(8), xq));
#else
                corr[c] = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(8), xq), ones);
#endif
            }
        #pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            i8_wblock wb = i8_weights(t, qtile_block(&qt, r));
            #pragma GCC unroll 4
            for (int c = 0; c < C; c++) {
                const uint8_t *rec = xb + (size_t)(m + c) * x_stride;
                __m256i xq = _mm256_loadu_si256((const __m256i *)(rec + I8_Q));
                if (t == QT_Q8_0) xq = _mm256_sign_epi8(xq, wb.sgn);
#ifdef KIPP_AVX2I8_VNNI /* the same sums: no pair sum saturates */
                __m256i p = _mm256_dpbusd_epi32(t == QT_Q4_0 ? corr[c] : _mm256_setzero_si256(),
                                                wb.mag, xq);
#else
                __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(wb.mag, xq), ones);
                if (t == QT_Q4_0) p = _mm256_sub_epi32(p, corr[c]);
#endif
                __m256 dd = _mm256_mul_ps(wb.d, _mm256_broadcast_ss((const float *)(rec + I8_D)));
                acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), dd, acc[r][c]);
                if (t == QT_Q4_1) {
                    float sx;
                    memcpy(&sx, rec + I8_S, sizeof sx);
                    ms[r][c] = fmaf(wb.m, sx, ms[r][c]);
                }
            }
        }
        qtile_step(&qt, t);
    }
    #pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 4
        for (int c = 0; c < C; c++) {
            float s = hsum8(acc[r][c]);
            y[m + c][n + r] = t == QT_Q4_1 ? s + ms[r][c] : s;
        }
}

/* Weight rows per tile: decode 4 (the avx2 tier's MV_ROWS_Q; 2 measured
 * ~5-40 % slower in cache), prefill 4 weight x 3 activation rows (12
 * accumulators). Measured on Zen 4 (single thread, M = 64, K = 1,024, best
 * of six, Q4_0 / Q8_0 GFLOPS): 4 x 3 85 / 78, 4 x 4 82 / 81, 3 x 4 81 / 82,
 * 2 x 4 80 / 76, 4 x 2 71 / 80; the avx2 tier's FP32 tiles 86 / 96 in the
 * same run. Decode in cache, TSC ticks per row and block: Q4_0 ~2.35
 * (avx2: ~6.3 in the same phase), Q8_0 ~2.35 (avx2 ~4.3). */
enum { I8_MV_ROWS = 4, I8_MR = 4, I8_MC = 3 };

/* Prefill: weight rows [nb, ne) (at most W_BLOCK, hot in L2) against
 * activation rows [0, m) in I8_MR x C tiles. */
static inline __attribute__((always_inline)) void i8_block(int t, const uint8_t *w,
                                                           size_t row_bytes, uint32_t nblk,
                                                           const uint8_t *x, size_t x_stride,
                                                           uint32_t nb, uint32_t ne, uint32_t r0,
                                                           int C, float *const *y) {
    uint32_t n = nb;
    for (; n + I8_MR <= ne; n += I8_MR)
        i8_tile(t, w, row_bytes, nblk, x, x_stride, I8_MR, C, PF_NONE, n, r0, y);
    for (; n < ne; n++) i8_tile(t, w, row_bytes, nblk, x, x_stride, 1, C, PF_NONE, n, r0, y);
}

/* Decode's loop: weight rows [n0, n1) in R-row tiles with prefetch PF (the
 * last few one by one), against activation rows [c0, c0 + C). */
static inline __attribute__((always_inline)) void i8_rows(int t, int PF, const uint8_t *w,
                                                          size_t row_bytes, uint32_t nblk,
                                                          const uint8_t *x, size_t x_stride,
                                                          int R, int C, uint32_t c0, uint32_t n0,
                                                          uint32_t n1, float *const *y) {
    uint32_t n = n0;
    for (; n + (uint32_t)R <= n1; n += (uint32_t)R)
        i8_tile(t, w, row_bytes, nblk, x, x_stride, R, C, PF, n, c0, y);
    for (; n < n1; n++) i8_tile(t, w, row_bytes, nblk, x, x_stride, 1, C, PF_NONE, n, c0, y);
}

/* One activation row (decode: a single pass, tiles of I8_MV_ROWS weight
 * rows) and a few (2 .. I8_FEW_ROWS: batched decode of some sessions,
 * speculation's verify step, a short prompt) stream the weights the same
 * way, in passes of up to I8_FEW_C activation rows, instead of
 * in W_BLOCK blocks read on demand (the FP32 tiers' few_rows,
 * kernels_blocked.h). A tile's per-output sequence does not depend on R,
 * C or the pass, so the bits are the blocked path's. Zen 4, the vpdpbusd
 * table, kernel_micro out of cache (131,072 rows, K = 1,024), ns per row
 * and block, blocked -> passes: Q4_0 M = 2 3.89 -> 1.14, 4 4.39 -> 2.07,
 * 8 6.98 -> 4.09, 16 10.1 -> 8.4 (K = 4,096 over 66 MB, past the L3:
 * 9.7 -> 8.4; 32 rows, two processes sharing the memory: 18.2 -> 16.9,
 * 64 rows equal); Q8_0 M = 2 4.69 -> 1.36, 16 13.3 -> 10.0. Passes of 4
 * weight rows for every C on that table (32 registers: C = 3 1.82 -> 1.58
 * ns against 2 rows); the plain table (16 registers) keeps 2 rows for
 * C > 2, unmeasured here. docs/ARCHITECTURE.md "Stop 43". */
#define I8_FEW_ROWS 32
#define I8_FEW_C 4
#ifdef KIPP_AVX2I8_VNNI
#define I8_FEW_R(C) 4
#else
#define I8_FEW_R(C) ((C) <= 2 ? 4 : 2)
#endif

/* The name kernels_blocked.h's FP32 driver has in the other tiers (this
 * file leaves that one out: KIPP_BLOCKED_BF16_ONLY). */
static inline __attribute__((always_inline)) void matmul_q(int t, int PF, const void *w,
                                                           uint32_t k, uint32_t n0, uint32_t n1,
                                                           const void *x, size_t x_stride,
                                                           uint32_t m, float *const *y) {
    const uint8_t *wb = w, *xb = x;
    const uint32_t nblk = k / 32;
    size_t row_bytes = (size_t)nblk * qblock_bytes(t);
    if (m <= I8_FEW_ROWS) { /* passes of up to I8_FEW_C activation rows; decode is one */
#define PASS(C) i8_rows(t, PF, wb, row_bytes, nblk, xb, x_stride, I8_FEW_R(C), C, c0, n0, n1, y)
        for (uint32_t c0 = 0; c0 < m; c0 += I8_FEW_C) switch (m - c0) {
            case 1: PASS(1); break;
            case 2: PASS(2); break;
            case 3: PASS(3); break;
            default: PASS(4); break;
            }
#undef PASS
        return;
    }
    for (uint32_t nb = n0; nb < n1; nb += W_BLOCK) {
        uint32_t ne = nb + W_BLOCK < n1 ? nb + W_BLOCK : n1, r = 0;
        for (; r + I8_MC <= m; r += I8_MC)
            i8_block(t, wb, row_bytes, nblk, xb, x_stride, nb, ne, r, I8_MC, y);
        if (m - r == 2) i8_block(t, wb, row_bytes, nblk, xb, x_stride, nb, ne, r, 2, y);
        else if (m - r == 1) i8_block(t, wb, row_bytes, nblk, xb, x_stride, nb, ne, r, 1, y);
    }
}
_Static_assert(I8_MC == 3, "the remainder cases cover I8_MC - 1 rows");
_Static_assert(I8_FEW_C == 4 && I8_FEW_R(1) <= 4 && I8_FEW_R(4) <= 4,
               "a pass's switch covers 1 .. I8_FEW_C rows; i8_tile holds 4 x 4");
_Static_assert(I8_FEW_R(1) == I8_MV_ROWS, "a one-row pass is decode's loop");

/* The table's entries (kernels_simd.h), over matmul_q above. */
KIPP_CPU_MATMUL_Q_ENTRIES(, PF_ROWS)
KIPP_CPU_MATMUL_Q_ENTRIES(_seq, PF_SEQ)

#define TIER_TABLE_I8(SUF, SEQ, TWIN)                                                          \
    {                                                                                          \
        .name = "avx2i8", .act_i8 = 1, .act_bytes = act_bytes, .pack_act = pack_act,           \
        .matmul_bf16 = matmul_bf16##SUF, .matmul_q8_0 = matmul_q8_0##SUF,                      \
        .matmul_q4_0 = matmul_q4_0##SUF, .matmul_q4_1 = matmul_q4_1##SUF, .rmsnorm = rmsnorm,  \
        .rope = rope, .silu_mul = silu_mul, .attention = attention,                            \
        .attention_q8_0 = attention_q8_0, .decode_seq = SEQ, .seq_twin = TWIN,                 \
    }
#ifdef KIPP_AVX2I8_VNNI
const kipp_cpu_kernels kipp_cpu_kernels_avx2i8_vnni =
    TIER_TABLE_I8(, 0, &kipp_cpu_kernels_avx2i8_vnni_seq);
const kipp_cpu_kernels kipp_cpu_kernels_avx2i8_vnni_seq = TIER_TABLE_I8(_seq, 1, NULL);
#else
const kipp_cpu_kernels kipp_cpu_kernels_avx2i8 = TIER_TABLE_I8(, 0, &kipp_cpu_kernels_avx2i8_seq);
const kipp_cpu_kernels kipp_cpu_kernels_avx2i8_seq = TIER_TABLE_I8(_seq, 1, NULL);
#endif
#endif
