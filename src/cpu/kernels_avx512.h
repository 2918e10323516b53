/* The AVX-512 bodies both AVX-512 tiers share (kernels_avx512.c, FP32
 * matmuls; kernels_avx512bf16.c, vdpbf16ps matmuls): the vector names
 * kernels_simd.h's bodies use, hence rmsnorm / rope / silu_mul and the
 * block decoders, and the attention steps with kernels_att.h's loop nest.
 * Included once by each tier file, so every body is compiled with that
 * file's flags (F, BW, VL, DQ, FMA, F16C; nothing here needs AVX512_BF16)
 * and the two tiers' attention and elementwise numbers are identical. */
#ifndef KIPP_CPU_KERNELS_AVX512_H
#define KIPP_CPU_KERNELS_AVX512_H

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu/kernels.h"

/* The sum of a vector's 16 lanes in the one AVX-512 tree (see fold16
 * below): every whole-vector sum a result depends on -- matmul outputs,
 * attention scores and softmax sums, RMSNorm's sum of squares -- goes
 * through it, so the order is ours rather than the compiler's. */
static inline float fold1(__m512 a) {
    __m256 s = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
    __m128 u = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    __m128 t = _mm_add_ps(u, _mm_movehl_ps(u, u));
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

/* An FP16 scale on all 16 lanes: one broadcast load from the conversion
 * table (kernels.h). vpbroadcastw + vcvtph2ps, two instructions on the
 * shuffle ports Q4 decode is bound by, measured 5-17 % slower on Q4_0 and
 * ~30 % slower on Q4_1 matrix-vector products (Zen 5). */
static inline __m512 half16(uint16_t h) { return _mm512_set1_ps(kipp_cpu_f16_table[h]); }

/* The names kernels_simd.h's shared bodies use (see there). */
typedef __m512 vf;
#define VL 16
#define vf_load _mm512_loadu_ps
#define vf_store _mm512_storeu_ps
#define vf_set1 _mm512_set1_ps
#define vf_zero _mm512_setzero_ps
#define vf_add _mm512_add_ps
#define vf_sub _mm512_sub_ps
#define vf_mul _mm512_mul_ps
#define vf_div _mm512_div_ps
#define vf_max _mm512_max_ps
#define vf_min _mm512_min_ps
#define vf_fmadd _mm512_fmadd_ps
#define vf_fmsub _mm512_fmsub_ps
#define vf_fnmadd _mm512_fnmadd_ps
#define vf_round(x) _mm512_roundscale_ps((x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define vf_scale2n _mm512_scalef_ps /* exact 2^n */
#define vf_hsum fold1
#define vf_keep_ge(v, x, lim) _mm512_maskz_mov_ps(_mm512_cmp_ps_mask((x), (lim), _CMP_GE_OQ), (v))
#include "cpu/kernels_simd.h"

/* One 64-byte line of a BF16 weight row, read as four 16-byte loads put
 * together -- the same 512 bits as one _mm512_loadu_si512, used by the
 * decode tiles (row_pf: PF_ROWS, PF_STREAM) only. On Zen 5 the matrix-vector stream ran
 * faster this way, in the engine, interleaved, synthetic-0.6b BF16 decode
 * at 0 context, tok/s: one 64-byte load 40.1, two 32-byte loads 43.7,
 * four 16-byte loads 45.2 (the avx2 tier, 16-byte loads: 47.2); four
 * 16-byte loads without the software prefetch 34.6, with it into L2 38.2,
 * as four merge-masked loads (no inserts) 34.9. Fewer lines in flight
 * per instruction window seem to leave the miss buffers to the prefetches
 * one tile ahead; docs/CPU-JOURNAL.md, "Stop 36". Prefill keeps the plain
 * load: there the extra shuffles would compete with the FMAs. */
static inline __attribute__((always_inline)) __m512i load_line_quarters(const uint16_t *p) {
    const __m128i *q = (const __m128i *)p;
    __m256i lo = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(q)),
                                         _mm_loadu_si128(q + 1), 1);
    __m256i hi = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(q + 2)),
                                         _mm_loadu_si128(q + 3), 1);
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* 32 BF16 values (value 2j in the low, 2j+1 in the high half of dword j)
 * as two exact FP32 vectors, evens and odds: one shift, one AND. Every
 * avx512 path that widens BF16 weights or K/V rows does it here. */
static inline __attribute__((always_inline)) void bf16_widen_pair(__m512i wv, __m512 *even,
                                                                  __m512 *odd) {
    *even = _mm512_castsi512_ps(_mm512_slli_epi32(wv, 16));
    *odd = _mm512_castsi512_ps(_mm512_and_si512(wv, _mm512_set1_epi32((int)0xffff0000u)));
}

/* A Q4 block's 16 possible weights, entry i for nibble i: Q4_0 d (i - 8),
 * Q4_1 FMA(d, i, m) -- bitwise the oracle's values (d i is exact: an FP16
 * significand of 11 bits times 4 bits, so the FMA rounds d i + m once, as
 * the oracle's add does). Both AVX-512 tiers look their weights up here. */
static inline __m512 q4_table16(int t, uint16_t dh, uint16_t mh) {
    if (t == QT_Q4_0) {
        const __m512 q = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
        return _mm512_mul_ps(half16(dh), q);
    }
    const __m512 q = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    return _mm512_fmadd_ps(half16(dh), q, half16(mh));
}

/* A Q8_0 block's 32 exact FP32 values d * q as evens w[0] (values 0, 2,
 * .., 30) and odds w[1] (1, 3, .., 31). The avx512 tier's Q8_0 weights and
 * both AVX-512 tiers' Q8_0 KV rows. Two forms, the same values (bitwise,
 * for every finite scale; tests/unit/test_cpu_qkernels.c holds them to
 * each other):
 *
 * With AVX512_VBMI (kernels_avx512_vbmi.c; dispatch.c hands that table out
 * as "avx512" where the processor has it): the magic-number form. Each
 * byte, its sign bit flipped (u = q + 128, 0..255), is placed by one
 * vpermb into bits 8-15 of a dword whose other bits are 0x47000000's --
 * the FP32 number 2^15 + u, exactly -- and one FMA with the scale gives
 *   d * (2^15 + u) + (-(2^15 + 128) * d) = d * q,
 * rounded once from the exact value, which FP32 holds (an FP16
 * significand of 11 bits times 8 bits): the exact weight. The constant
 * -(2^15 + 128) * d = -32,896 d is exact too (11 + 9 significant bits;
 * kipp_cpu_f16_table_q8_pair). 7 vector ops a block -- an XOR, two
 * vpermb, two FMA, the weight FMAs' two -- against 9 below; no
 * conversion, whose port the FMAs share. Measured (stop 64, Intel Xeon
 * family 6 model 207, one thread, kernel_micro matvec avx512 q8_0 256, in
 * L2): 17.6 -> 22.1 GB/s (PF_SEQ), 20.4 -> 23.3 (PF_ROWS). (A scale
 * that is not finite gives NaN weights here, d * q -- +-inf or NaN --
 * in the other form: either way the outputs are not finite.)
 *
 * Without it: the int8 q sign-extended to 16-bit pairs, so one dword
 * holds values 2j (low half) and 2j+1 (high half). Both values are taken
 * as q * 2^16 in the top half (exact in FP32) -- the even one by a left
 * shift, the odd one by masking the low half off -- and multiplied by
 * d * 2^-16 (kipp_cpu_f16_table_m16): the exact product d * q, one ALU op
 * and one scale per value. (Zen 4, one thread, L2: ~4.8 -> ~4.1 TSC ticks
 * per row and block against shifting both values down. Stop 38: the mask
 * in place of a right shift on the odd value makes one table load per
 * block, not two, and one register less for the decode tile.) */
static inline __attribute__((always_inline)) void q8_evens_odds(const kipp_block_q8_0 *blk,
                                                                __m512 w[2]) {
#ifdef __AVX512VBMI__
    enum { MAGIC_2_15 = 0x47000000 }; /* the FP32 bits of 2^15; u in bits 8-15 adds u */
    const __mmask64 byte1 = 0x2222222222222222ull; /* byte 1 of each dword */
    const __m512i pick_even = _mm512_setr_epi32(0 << 8, 2 << 8, 4 << 8, 6 << 8, 8 << 8, 10 << 8,
                                                12 << 8, 14 << 8, 16 << 8, 18 << 8, 20 << 8,
                                                22 << 8, 24 << 8, 26 << 8, 28 << 8, 30 << 8);
    const __m512i pick_odd = _mm512_setr_epi32(1 << 8, 3 << 8, 5 << 8, 7 << 8, 9 << 8, 11 << 8,
                                               13 << 8, 15 << 8, 17 << 8, 19 << 8, 21 << 8,
                                               23 << 8, 25 << 8, 27 << 8, 29 << 8, 31 << 8);
    const float *d_bias = kipp_cpu_f16_table_q8_pair[blk->d]; /* one line, both values */
    __m512 d = _mm512_set1_ps(d_bias[0]);
    __m512 bias = _mm512_set1_ps(d_bias[1]);
    __m256i u = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)blk->qs),
                                 _mm256_set1_epi8((char)0x80));
    __m512i ub = _mm512_castsi256_si512(u); /* vpermb reads bytes 0-31 only */
    __m512i magic = _mm512_set1_epi32(MAGIC_2_15);
    __m512i even = _mm512_mask_permutexvar_epi8(magic, byte1, pick_even, ub);
    __m512i odd = _mm512_mask_permutexvar_epi8(magic, byte1, pick_odd, ub);
    w[0] = _mm512_fmadd_ps(d, _mm512_castsi512_ps(even), bias);
    w[1] = _mm512_fmadd_ps(d, _mm512_castsi512_ps(odd), bias);
#else
    __m512 d_m16 = _mm512_set1_ps(kipp_cpu_f16_table_m16[blk->d]);
    __m512i q16 = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)blk->qs));
    __m512i even_hi = _mm512_slli_epi32(q16, 16); /* q_even * 2^16 */
    __m512i odd_hi = _mm512_and_si512(q16, _mm512_set1_epi32((int)0xffff0000u)); /* q_odd * 2^16 */
    w[0] = _mm512_mul_ps(d_m16, _mm512_cvtepi32_ps(even_hi));
    w[1] = _mm512_mul_ps(d_m16, _mm512_cvtepi32_ps(odd_hi));
#endif
}

/* ---- summing the 16 lanes of an accumulator ----
 * Every AVX-512 sum of a vector's lanes l[0..15] that a result depends on
 * (a matmul output, an attention score) uses one tree:
 *   s_i = l_i + l_{i+8} (i < 8), u_i = s_i + s_{i+4} (i < 4),
 *   t_i = u_i + u_{i+2} (i < 2), sum = t_0 + t_1.
 * fold16 runs it on 16 accumulators at once: four levels of
 * shuffle-and-add halve the lanes each holds (8, 4, 2, 1) and a last
 * permute puts sum j in lane j -- 46 ops for 16 sums, where a separate
 * reduction takes ~8 per sum. fold1 runs it on one. A lane's tree involves
 * its own accumulator only, so a sum depends neither on its neighbours nor
 * on which fold computed it: a matrix-vector tile and a matrix-matrix tile
 * give the same bits. (Written out rather than _mm512_reduce_add_ps, whose
 * order is the compiler's: gcc and clang builds agree.) */
static inline __attribute__((always_inline)) __m512 fold16(__m512 a[16]) {
    #pragma GCC unroll 8
    for (int i = 0; i < 8; i++) /* quarters: [i, i, i+8, i+8] */
        a[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[i], a[i + 8], 0x44),
                             _mm512_shuffle_f32x4(a[i], a[i + 8], 0xee));
    #pragma GCC unroll 4
    for (int i = 0; i < 4; i++) /* quarters: [i, i+8, i+4, i+12] */
        a[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[i], a[i + 4], 0x88),
                             _mm512_shuffle_f32x4(a[i], a[i + 4], 0xdd));
    #pragma GCC unroll 2
    for (int i = 0; i < 2; i++) /* each quarter: two lanes of two sums */
        a[i] = _mm512_add_ps(_mm512_shuffle_ps(a[i], a[i + 2], 0x44),
                             _mm512_shuffle_ps(a[i], a[i + 2], 0xee));
    __m512 s = _mm512_add_ps(_mm512_shuffle_ps(a[0], a[1], 0x88), _mm512_shuffle_ps(a[0], a[1], 0xdd));
    const __m512i order = _mm512_setr_epi32(0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7, 12, 14, 13, 15);
    return _mm512_permutexvar_ps(order, s);
}


/* y[m + c][n + r * rs] = the sum of acc[r * stride + c] for an R x C tile
 * of a matmul (R, C compile-time constants; rs = 1 but in a split decode
 * tile): 16 sums at a time through fold16 (unused slots zero), or fold1
 * for a tile of one. */
static inline __attribute__((always_inline)) void store_tile(const __m512 *acc, int stride, int R,
                                                             int C, uint32_t n, uint32_t rs,
                                                             uint32_t m, float *const *y) {
    if (R * C == 1) {
        y[m][n] = fold1(acc[0]);
        return;
    }
    #pragma GCC unroll 4
    for (int g = 0; g < R * C; g += 16) {
        __m512 a[16];
        #pragma GCC unroll 16
        for (int i = 0; i < 16; i++) { /* slot i: flat index g + i = c * R + r */
            int f = g + i;
            a[i] = f < R * C ? acc[(f % R) * stride + f / R] : _mm512_setzero_ps();
        }
        _Alignas(64) float sum[16];
        _mm512_store_ps(sum, fold16(a));
        const int step = R == 4 || R == 8 ? R : 1; /* a row's R sums at once */
        #pragma GCC unroll 16
        for (int i = 0; i < 16; i += step) {
            int f = g + i;
            if (f >= R * C) break;
            float *dst = y[m + (uint32_t)(f / R)] + n + (uint32_t)(f % R);
            if (rs != 1) /* a split decode tile (C = 1): row r's output is n + r * rs */
                for (int j = 0; j < step && f + j < R * C; j++)
                    y[m + (uint32_t)((f + j) / R)][n + (uint32_t)((f + j) % R) * rs] = sum[i + j];
            else if (R == 4) _mm_storeu_ps(dst, _mm_load_ps(sum + i));
            else if (R == 8) _mm256_storeu_ps(dst, _mm256_load_ps(sum + i));
            else *dst = sum[i];
        }
    }
}

/* Attention steps (kernels_att.h has the loop nest; kernels_generic.c the
 * plain algorithm). K and V rows are widened 32 values at a time like the
 * matmul's weights (shift = even values, AND = odd values), so q and the
 * output accumulators are kept de-interleaved the same way (qd, od: per
 * 32-value chunk, evens then odds) and put back in order by att_store.
 * Scores: q . k as one 8-FMA chain over the 16-wide pieces, 16 positions
 * folded at once (att_dots). PV: a head's 128
 * outputs in registers over the block, out += p_j * v_j in position order
 * (V rows widened like K rows, once per block). */
enum { ATT_VECS = KIPP_HEAD_DIM / 16 };

typedef struct att_krow {
    __m512 v[ATT_VECS];
} att_krow;

static inline void att_load_q(const float *q, float *qd) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    for (int c = 0; c < KIPP_HEAD_DIM; c += 32) {
        __m512 a = _mm512_loadu_ps(q + c), b = _mm512_loadu_ps(q + c + 16);
        _mm512_store_ps(qd + c, _mm512_permutex2var_ps(a, even, b));
        _mm512_store_ps(qd + c + 16, _mm512_permutex2var_ps(a, odd, b));
    }
}

static inline __attribute__((always_inline)) void att_widen_k(const uint16_t *k, att_krow *kw) {
    #pragma GCC unroll 4
    for (int c = 0; c < ATT_VECS / 2; c++)
        bf16_widen_pair(_mm512_loadu_si512(k + 32 * c), &kw->v[2 * c], &kw->v[2 * c + 1]);
}

/* A Q8_0 cache row (4 blocks) widened to its exact values, in att_widen_k's
 * layout (a block is a 32-value chunk, evens then odds). */
static inline __attribute__((always_inline)) void att_widen_q8(const kipp_block_q8_0 *row,
                                                               att_krow *kw) {
    #pragma GCC unroll 4
    for (int c = 0; c < ATT_VECS / 2; c++) q8_evens_odds(row + c, &kw->v[2 * c]);
}

/* Decode (one query row) reads K and V rows straight from the cache,
 * widened in registers where they are used; prefill reads the block
 * widened into L1 once for all its rows (kernels_att.h says why). Both go
 * through the bodies below, which take row j from either source, so the
 * FMA sequence per (row, head) is one piece of code and decode and prefill
 * give the same bits. Cache rows at or past n read as zero rows (a masked
 * load), as the widened block's zero-filled rows do. */
static inline __attribute__((always_inline)) void att_widen_at(const uint16_t *k, uint32_t j,
                                                               uint32_t n, __m512 v[ATT_VECS]) {
    __mmask32 live = j < n ? (__mmask32)0xffffffffu : 0; /* past n: a zero row, no read */
    #pragma GCC unroll 4
    for (int c = 0; c < ATT_VECS / 2; c++)
        bf16_widen_pair(_mm512_maskz_loadu_epi16(live, k + 32 * c), &v[2 * c], &v[2 * c + 1]);
}

/* Row j: kw[j] when the block was widened (kw != NULL), else cache row j
 * of kb widened here, the next block's row nx requested first (spread
 * over the loop: a burst of 128 prefetches at the block's start is
 * dropped, and ran slower than the L1 path out of cache). */
static inline __attribute__((always_inline)) void att_row(const att_krow *kw, const uint16_t *kb,
                                                          size_t stride, uint32_t j, uint32_t n,
                                                          const uint16_t *nx,
                                                          __m512 r[ATT_VECS]) {
    if (kw) {
        #pragma GCC unroll 8
        for (int d = 0; d < ATT_VECS; d++) r[d] = kw[j].v[d];
        return;
    }
    if (nx) att_prefetch_row(nx + (size_t)j * stride);
    att_widen_at(kb + (size_t)j * stride, j, n, r);
}

/* Raw scores of one (row, head) against K rows [0..n), written to
 * p[0..n rounded up to 16) (rows past n are zero). Per position, one
 * 8-FMA chain over the 16-wide pieces (chunk 0 evens, chunk 0 odds, chunk
 * 1 evens, ...); then fold16 sums the 16 chains of a group of 16
 * positions at once. */
static inline __attribute__((always_inline)) void att_dots_from(const float *qd,
                                                                const att_krow *kw,
                                                                const uint16_t *kb, size_t stride,
                                                                uint32_t n, float *p,
                                                                const uint16_t *kn) {
    __m512 q[ATT_VECS];
    #pragma GCC unroll 8
    for (int d = 0; d < ATT_VECS; d++) q[d] = _mm512_load_ps(qd + 16 * d);
    for (uint32_t j0 = 0; j0 < n; j0 += 16) {
        __m512 a[16];
        #pragma GCC unroll 16
        for (int j = 0; j < 16; j++) {
            __m512 k[ATT_VECS];
            att_row(kw, kb, stride, j0 + j, n, kn, k);
            a[j] = _mm512_mul_ps(q[0], k[0]);
            #pragma GCC unroll 8
            for (int d = 1; d < ATT_VECS; d++) a[j] = _mm512_fmadd_ps(q[d], k[d], a[j]);
        }
        _mm512_storeu_ps(p + j0, fold16(a));
    }
}

static inline __attribute__((always_inline)) void att_dots(const float *qd, const att_krow *kw,
                                                           uint32_t n, float *p) {
    att_dots_from(qd, kw, NULL, 0, n, p, NULL);
}

/* Four (row, head) units' raw scores against K rows [0..n) as one 4 x 4
 * tile (4 positions x 4 queries): each widened K vector is loaded once for
 * four queries where att_dots loads it once per query, halving the loads
 * per FMA (prefill attention, one thread, 512 rows, Zen 5: 159 -> 175
 * GFLOPS from position 0, 157 -> 172 from 1,536). Every score runs
 * att_dots's steps -- the same 8-FMA chain, then fold16's tree on its own
 * accumulator -- so its bits are att_dots's. qd: the four queries,
 * KIPP_HEAD_DIM floats apart; p: their score rows, pstride floats apart,
 * each written up to n rounded up to 4 (kw rows up to there are read: zero
 * rows past the block). */
#define ATT_MULTI 4
static inline __attribute__((always_inline)) void att_dots_multi(const float *qd,
                                                                 const att_krow *kw, uint32_t n,
                                                                 float *p, size_t pstride) {
    _Static_assert(ATT_MULTI * 4 == 16, "one tile fills the 16 accumulators of one fold16");
    for (uint32_t j0 = 0; j0 < n; j0 += 4) {
        __m512 a[16]; /* a[4 u + c]: query u against position j0 + c */
        #pragma GCC unroll 8
        for (int d = 0; d < ATT_VECS; d++) {
            __m512 k[4], q[4];
            #pragma GCC unroll 4
            for (int c = 0; c < 4; c++) k[c] = kw[j0 + c].v[d];
            #pragma GCC unroll 4
            for (int u = 0; u < 4; u++) q[u] = _mm512_load_ps(qd + (size_t)u * KIPP_HEAD_DIM + 16 * d);
            #pragma GCC unroll 4
            for (int u = 0; u < 4; u++)
                #pragma GCC unroll 4
                for (int c = 0; c < 4; c++)
                    a[4 * u + c] = d == 0 ? _mm512_mul_ps(q[u], k[c])
                                          : _mm512_fmadd_ps(q[u], k[c], a[4 * u + c]);
        }
        __m512 s = fold16(a); /* lanes 4 u .. 4 u + 3: query u */
        _mm_storeu_ps(p + j0, _mm512_castps512_ps128(s));
        _mm_storeu_ps(p + pstride + j0, _mm512_extractf32x4_ps(s, 1));
        _mm_storeu_ps(p + 2 * pstride + j0, _mm512_extractf32x4_ps(s, 2));
        _mm_storeu_ps(p + 3 * pstride + j0, _mm512_extractf32x4_ps(s, 3));
    }
}

/* The online-softmax update of one (row, head) over a block: p[0..nb)
 * holds raw scores and gets their exponentials (scaled, less the new
 * running max); the running max and sum move on. Returns the factor the
 * row's output accumulators are rescaled by. */
static inline __attribute__((always_inline)) float att_softmax(float *p, uint32_t nb, float scale,
                                                               float *run_max, float *run_sum) {
    const __m512 vscale = _mm512_set1_ps(scale), ninf = _mm512_set1_ps(-INFINITY);
    __mmask16 m0 = nb >= 16 ? 0xffff : (__mmask16)((1u << nb) - 1);
    __mmask16 m1 = nb <= 16 ? 0 : nb == 32 ? 0xffff : (__mmask16)((1u << (nb - 16)) - 1);
    __m512 s0 = _mm512_mul_ps(_mm512_mask_loadu_ps(ninf, m0, p), vscale);
    __m512 s1 = _mm512_mul_ps(_mm512_mask_loadu_ps(ninf, m1, p + 16), vscale);
    float bmax = _mm512_reduce_max_ps(_mm512_max_ps(s0, s1));
    float new_max = bmax > *run_max ? bmax : *run_max;
    __m512 nm = _mm512_set1_ps(new_max);
    __m512 e0 = _mm512_maskz_mov_ps(m0, vf_exp(_mm512_sub_ps(s0, nm)));
    __m512 e1 = _mm512_maskz_mov_ps(m1, vf_exp(_mm512_sub_ps(s1, nm)));
    float corr = _mm512_cvtss_f32(vf_exp(_mm512_set1_ps(*run_max - new_max)));
    *run_sum = *run_sum * corr + fold1(_mm512_add_ps(e0, e1));
    *run_max = new_max;
    _mm512_storeu_ps(p, e0);
    _mm512_storeu_ps(p + 16, e1);
    return corr;
}

/* Two query heads of one row (same positions, same V rows): each runs
 * att_block's steps unchanged, but their P.V chains share one loop -- 16
 * independent FMA chains instead of 8, so the FMA latency no longer bounds
 * the loop, and each V vector is loaded once for both. (Left to itself
 * gcc folds the load into both FMAs as memory operands: 18 loads per 16
 * FMAs, more than two 512-bit loads a cycle keep up with; the empty asm
 * keeps v in a register: 0-4 % faster prefill attention on Zen 5.)
 * heads == 1: head a alone (pb, max_b, sum_b, odb unused). V rows from
 * vw or the cache, as att_row. */
#define ATT_HAS_PAIR 1
static inline __attribute__((always_inline)) void
att_block_from(int heads, float *pa, float *pb, uint32_t nb, float scale, float *max_a,
               float *sum_a, float *max_b, float *sum_b, float *oda, float *odb,
               const att_krow *vw, const uint16_t *vb, size_t stride, const uint16_t *vn) {
    const int two = heads == 2; /* a compile-time constant at every call */
    __m512 ca = _mm512_set1_ps(att_softmax(pa, nb, scale, max_a, sum_a));
    __m512 cb = two ? _mm512_set1_ps(att_softmax(pb, nb, scale, max_b, sum_b)) : ca;
    __m512 oa[ATT_VECS], ob[ATT_VECS];
    #pragma GCC unroll 8
    for (int d = 0; d < ATT_VECS; d++) {
        oa[d] = _mm512_mul_ps(_mm512_load_ps(oda + 16 * d), ca);
        ob[d] = two ? _mm512_mul_ps(_mm512_load_ps(odb + 16 * d), cb) : ca;
    }
    for (uint32_t j = 0; j < nb; j++) {
        __m512 r[ATT_VECS];
        att_row(vw, vb, stride, j, nb, vn, r);
        __m512 pj = _mm512_set1_ps(pa[j]);
        __m512 qj = two ? _mm512_set1_ps(pb[j]) : pj;
        #pragma GCC unroll 8
        for (int d = 0; d < ATT_VECS; d++) {
            __m512 v = r[d];
            if (two) __asm__("" : "+v"(v)); /* one load for both FMAs (see above) */
            oa[d] = _mm512_fmadd_ps(pj, v, oa[d]);
            if (two) ob[d] = _mm512_fmadd_ps(qj, v, ob[d]);
        }
    }
    #pragma GCC unroll 8
    for (int d = 0; d < ATT_VECS; d++) {
        _mm512_store_ps(oda + 16 * d, oa[d]);
        if (two) _mm512_store_ps(odb + 16 * d, ob[d]);
    }
}

/* One head's block (the loop nest's odd head out): the same body. */
static inline void att_block(float *p, uint32_t nb, float scale, float *run_max,
                             float *run_sum, float *od, const att_krow *vw) {
    att_block_from(1, p, NULL, nb, scale, run_max, run_sum, NULL, NULL, od, NULL, vw, NULL, 0,
                   NULL);
}

static inline void att_block_pair(float *pa, float *pb, uint32_t nb, float scale, float *max_a,
                                  float *sum_a, float *max_b, float *sum_b, float *oda,
                                  float *odb, const att_krow *vw) {
    att_block_from(2, pa, pb, nb, scale, max_a, sum_a, max_b, sum_b, oda, odb, vw, NULL, 0, NULL);
}

/* Decode (one query row, kernels_att.h): K and V straight from the cache
 * blocks. A block widened into L1 serves every (row, head) of a prefill
 * chunk; in decode it served only the g heads of one row, and its stores
 * and reloads (16 of each per position) made decode attention the slower
 * of the two streams it overlaps with (K/V from memory). */
#define ATT_HAS_DIRECT 1
static inline void att_dots_direct(const float *qd, const uint16_t *kb, size_t stride, uint32_t n,
                                   float *p, const uint16_t *kn) {
    att_dots_from(qd, NULL, kb, stride, n, p, kn);
}

static inline void att_block_direct(float *pa, float *pb, uint32_t nb, float scale, float *max_a,
                                    float *sum_a, float *max_b, float *sum_b, float *oda,
                                    float *odb, const uint16_t *vb, size_t stride,
                                    const uint16_t *vn) {
    if (pb)
        att_block_from(2, pa, pb, nb, scale, max_a, sum_a, max_b, sum_b, oda, odb, NULL, vb,
                       stride, vn);
    else
        att_block_from(1, pa, NULL, nb, scale, max_a, sum_a, NULL, NULL, oda, NULL, NULL, vb,
                       stride, vn);
}

static inline void att_store(const float *od, float run_sum, float *out) {
    const __m512i lo_half = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi_half = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    __m512 inv = _mm512_set1_ps(1.0f / run_sum);
    for (int c = 0; c < KIPP_HEAD_DIM; c += 32) {
        __m512 e = _mm512_load_ps(od + c), o = _mm512_load_ps(od + c + 16);
        _mm512_storeu_ps(out + c, _mm512_mul_ps(_mm512_permutex2var_ps(e, lo_half, o), inv));
        _mm512_storeu_ps(out + c + 16, _mm512_mul_ps(_mm512_permutex2var_ps(e, hi_half, o), inv));
    }
}

#include "cpu/kernels_att.h"

#endif
