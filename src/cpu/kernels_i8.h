/* The integer-dot quantized matmuls of the opt-in avx2i8 and avx512i8
 * tiers: Q8_0, Q4_0 and Q4_1 weights against the 8-bit activations of
 * kernels_i8_act.h (its header comment says exactly what they compute).
 * 256-bit AVX2 code, with each integer dot one vpdpbusd where the includer
 * defines KIPP_I8_VNNI (AVX512_VNNI + AVX512VL: the same sums, the same
 * bits), and prefill's transposed tiles 512 bits wide where it also
 * defines KIPP_I8_ZMM (avx512i8; the same bits again). Included once by
 * each tier file, after the tier's own kernels (kernels_avx2.c or
 * kernels_avx512.c, built with KIPP_BLOCKED_BF16_ONLY),
 * whose kernels_simd.h and kernels_blocked.h supply the quantized-row
 * walkers (qtile_*, seq_pf_*, q4_block), W_BLOCK and the table's entry
 * points (KIPP_CPU_MATMUL_Q_ENTRIES). */
#ifndef KIPP_CPU_KERNELS_I8_H
#define KIPP_CPU_KERNELS_I8_H

#include "cpu/kernels_i8_act.h"

/* ---- the integer-dot quantized matmuls ----
 * An output's block sum p = sum wq * xq is an exact integer in whatever
 * order it is summed, so the kernels form it in two layouts, same bits:
 *  - row-major (i8_tile: decode, a few activation rows, the blocked
 *    path's last rows): a weight row's block is one vector of its 32
 *    values, an integer dot leaves 8 lane sums, and i8_hsum4 folds the
 *    lane sums of 4 weight rows into their 4 block sums;
 *  - transposed (i8_ttile: prefill): I8_GROUP weight rows (8, or 16 in
 *    512-bit vectors) are repacked once per block of rows (i8_repack)
 *    into 8 vectors per block, vector g holding values 4g .. 4g+3 of each
 *    row in that row's lane, so one integer dot against a broadcast
 *    activation dword adds to I8_GROUP outputs' block sums, and the FP32
 *    work (convert, scale, FMA) is per I8_GROUP outputs rather than per
 *    output, as it is in the row-major layout.
 * The unsigned operand of a dot (i8_wload, the repacked form too): Q4_0
 * and Q4_1 the nibbles, Q4_0's -8 added back as -8 x sum xq (I8_C4, per
 * activation block); Q8_0 on the vpdpbusd table q + 128 (q XOR 0x80),
 * with -128 x sum xq (I8_C8); on the plain table |q|, with q's signs put
 * onto the activations (vpsignb), because vpmaddubsw's pair sums of q +
 * 128 could saturate and of |q| never do (at most 2 x 128 x 127). The
 * nibbles' pair sums (at most 2 x 15 x 127 = 3,810) add 8 at a time in
 * 16 bits without saturating, so the plain table's transposed Q4 dot
 * takes one vpmaddwd per block rather than per dword. */

/* Block blk of a weight row in the stored form above. */
static inline __attribute__((always_inline)) __m256i i8_wload(int t, const uint8_t *blk) {
    if (t == QT_Q8_0) {
        __m256i q = _mm256_loadu_si256((const __m256i *)((const kipp_block_q8_0 *)blk)->qs);
#ifdef KIPP_I8_VNNI
        q = _mm256_xor_si256(q, _mm256_set1_epi8((char)0x80));
#endif
        return q;
    }
    uint16_t dh, mh;
    const uint8_t *qs = q4_block(t, blk, 0, &dh, &mh);
    /* values 0..15 low nibbles of bytes 0..15, values 16..31 high ones */
    __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    return _mm256_and_si256(_mm256_srlv_epi64(v, _mm256_setr_epi64x(0, 0, 4, 4)),
                            _mm256_set1_epi8(15));
}

/* A block's FP16 scale (offset 0 in all three formats) and Q4_1's minimum
 * (offset 2), as bits: the tiles convert 4 or 8 at once with vcvtph2ps,
 * exact as the conversion table is. */
static inline __attribute__((always_inline)) uint64_t i8_half_bits(const uint8_t *blk, int off) {
    uint16_t h;
    memcpy(&h, blk + off, sizeof h);
    return h;
}

/* Whether a block sum needs its activation block's correction, and where
 * the record keeps it. */
static inline __attribute__((always_inline)) int i8_corrected(int t) {
#ifdef KIPP_I8_VNNI
    return t != QT_Q4_1;
#else
    return t == QT_Q4_0;
#endif
}
static inline __attribute__((always_inline)) int32_t i8_corr(int t, const uint8_t *rec) {
    int32_t c;
    memcpy(&c, rec + (t == QT_Q4_0 ? I8_C4 : I8_C8), sizeof c);
    return c;
}
static inline __attribute__((always_inline)) float i8_f32(const uint8_t *rec, int off) {
    float f;
    memcpy(&f, rec + off, sizeof f);
    return f;
}

/* The 8 lane sums of one row-major block dot: stored-form weights u (plain
 * Q8_0: u = |q|, sg = q) against 32 activations xq. */
static inline __attribute__((always_inline)) __m256i i8_dot(int t, __m256i u, __m256i sg,
                                                            __m256i xq) {
#ifdef KIPP_I8_VNNI
    (void)t, (void)sg;
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, xq);
#else
    if (t == QT_Q8_0) xq = _mm256_sign_epi8(xq, sg);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, xq), _mm256_set1_epi16(1));
#endif
}

/* Four rows' lane sums to their four block sums (exact integers): unpacks
 * and adds, which measured faster than three vphaddd (Zen 4, kernel_micro
 * matvec in L2, ns per row and block, Q8_0 / Q4_0 / Q4_1: 0.64 / 0.72 /
 * 0.87 against 0.83 / 0.83 / 1.10; with vphaddd, the 4 rows' scales from
 * the conversion table put together by vinsertps read 0.90 / 0.97 / 1.12,
 * hence one vcvtph2ps of their FP16 bits). The lane-sum tiles of stop 43 read
 * 0.79 / 0.66 / 0.83 there: decode's Q4 tiles pay ~5-9 % in L2 for the
 * whole-block sums (in the engine, out of cache, within the noise for Q4
 * and ~2 % for Q8_0; docs/CPU-JOURNAL.md "Stop 44"). */
static inline __attribute__((always_inline)) __m128i i8_hsum4(__m256i a, __m256i b, __m256i c,
                                                              __m256i d) {
    __m256i ab = _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
    __m256i cd = _mm256_add_epi32(_mm256_unpacklo_epi32(c, d), _mm256_unpackhi_epi32(c, d));
    __m256i s = _mm256_add_epi32(_mm256_unpacklo_epi64(ab, cd), _mm256_unpackhi_epi64(ab, cd));
    return _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
}

/* Q4 rows two to a vector (decode's tiles): rows a and b's 16 bytes of
 * nibbles side by side, so that one mask gives both rows' values 0 .. 15
 * (lo) and one shift and mask their values 16 .. 31 (hi). Against the
 * activations' two 16-value halves, each broadcast to both 128-bit lanes,
 * two integer dots leave row a's lane sums in the low lane and row b's in
 * the high one: the same exact block sums as i8_dot's, with half the lanes
 * to fold (Zen 5, kernel_micro in L2, ns per row and block: matvec Q4_0
 * 0.64-0.67 -> 0.60-0.62, 4 activation rows 2.07-2.09 -> 1.84; out of
 * cache, decode is bound by memory and reads the same). */
static inline __attribute__((always_inline)) void i8_wload2(int t, const uint8_t *blk_a,
                                                           const uint8_t *blk_b, __m256i *lo,
                                                           __m256i *hi) {
    uint16_t dh, mh;
    const uint8_t *qa = q4_block(t, blk_a, 0, &dh, &mh), *qb = q4_block(t, blk_b, 0, &dh, &mh);
    __m256i v = _mm256_loadu2_m128i((const __m128i *)qb, (const __m128i *)qa);
    *lo = _mm256_and_si256(v, _mm256_set1_epi8(15));
    *hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(15));
}
static inline __attribute__((always_inline)) __m256i i8_dot2(__m256i lo, __m256i xlo, __m256i hi,
                                                             __m256i xhi) {
#ifdef KIPP_I8_VNNI
    return _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), lo, xlo), hi, xhi);
#else
    /* pair sums at most 2 x 15 x 127 = 3,810: two add in 16 bits */
    __m256i s = _mm256_add_epi16(_mm256_maddubs_epi16(lo, xlo), _mm256_maddubs_epi16(hi, xhi));
    return _mm256_madd_epi16(s, _mm256_set1_epi16(1));
#endif
}
/* Rows (0, 1)'s lane sums in p01, rows (2, 3)'s in p23 (zero for a tile of
 * 2 rows) to the four block sums. */
static inline __attribute__((always_inline)) __m128i i8_hsum2x2(__m256i p01, __m256i p23) {
    /* [r0 r2 r0 r2 | r1 r3 r1 r3], partial, then whole in lanes 0 and 1 */
    __m256i w = _mm256_add_epi32(_mm256_unpacklo_epi32(p01, p23), _mm256_unpackhi_epi32(p01, p23));
    w = _mm256_add_epi32(w, _mm256_shuffle_epi32(w, _MM_SHUFFLE(1, 0, 3, 2)));
    return _mm_unpacklo_epi32(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
}

#ifndef I8_NO_PAIRS /* -DI8_NO_PAIRS=1: every row through i8_wload (measurement) */
#define I8_NO_PAIRS 0
#endif

/* One R x C row-major tile over all nblk blocks (R <= 4, C <= 4, PF
 * compile-time constants): weight rows n .. n+R-1, activation rows m ..
 * m+C-1, lane r of acc[c] the output (m + c, n + r). */
static inline __attribute__((always_inline)) void
i8_tile(int t, const uint8_t *w, size_t row_bytes, uint32_t nblk, const uint8_t *x,
        size_t x_stride, int R, int C, int PF, uint32_t n, uint32_t m, float *const *y) {
    /* Q4 tiles of 2 or 4 rows take their rows two to a vector (i8_wload2) */
    const int paired = t != QT_Q8_0 && (R == 2 || R == 4) && !I8_NO_PAIRS;
    __m128 acc[4], ms[4];
    #pragma GCC unroll 4
    for (int c = 0; c < C; c++) acc[c] = _mm_setzero_ps(), ms[c] = _mm_setzero_ps();
    qtile_ptrs qt = qtile_at(w, row_bytes, n, 1, 0, t, R, PF);
    seq_pf sp = seq_pf_at(w, t, row_bytes, nblk * 32, n, 0, R, PF);
    for (uint32_t b = 0; b < nblk; b++) {
        qtile_prefetch(&qt, t, R, PF);
        seq_pf_step(&sp, t, R, PF);
        __m256i u[4], sg[4], lo[2], hi[2];
        uint64_t dbits = 0, mbits = 0;
        #pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            u[r] = sg[r] = _mm256_setzero_si256();
            if (r < R) {
                const uint8_t *blk = qtile_block(&qt, r);
                if (!paired) u[r] = sg[r] = i8_wload(t, blk);
                dbits |= i8_half_bits(blk, 0) << (16 * r);
                if (t == QT_Q4_1) mbits |= i8_half_bits(blk, 2) << (16 * r);
            }
#ifndef KIPP_I8_VNNI
            if (t == QT_Q8_0) u[r] = _mm256_abs_epi8(sg[r]);
#endif
        }
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            lo[h] = hi[h] = _mm256_setzero_si256();
            if (paired && 2 * h < R)
                i8_wload2(t, qtile_block(&qt, 2 * h), qtile_block(&qt, 2 * h + 1), &lo[h], &hi[h]);
        }
        const __m128 dwv = _mm_cvtph_ps(_mm_cvtsi64_si128((long long)dbits));
        const __m128 mwv = _mm_cvtph_ps(_mm_cvtsi64_si128((long long)mbits));
        const uint8_t *xb = x + (size_t)b * I8_REC;
        #pragma GCC unroll 4
        for (int c = 0; c < C; c++) {
            const uint8_t *rec = xb + (size_t)(m + c) * x_stride;
            __m128i s;
            if (paired) {
                __m256i xlo = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(rec + I8_Q)));
                __m256i xhi = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(rec + I8_Q + 16)));
                __m256i p01 = i8_dot2(lo[0], xlo, hi[0], xhi);
                __m256i p23 = R == 4 ? i8_dot2(lo[1], xlo, hi[1], xhi) : _mm256_setzero_si256();
                s = i8_hsum2x2(p01, p23);
            } else {
                __m256i xq = _mm256_loadu_si256((const __m256i *)(rec + I8_Q)), p[4];
                #pragma GCC unroll 4
                for (int r = 0; r < 4; r++)
                    p[r] = r < R ? i8_dot(t, u[r], sg[r], xq) : _mm256_setzero_si256();
                s = i8_hsum4(p[0], p[1], p[2], p[3]);
            }
            if (i8_corrected(t)) s = _mm_add_epi32(s, _mm_set1_epi32(i8_corr(t, rec)));
            __m128 dd = _mm_mul_ps(dwv, _mm_set1_ps(i8_f32(rec, I8_D)));
            acc[c] = _mm_fmadd_ps(_mm_cvtepi32_ps(s), dd, acc[c]);
            if (t == QT_Q4_1) ms[c] = _mm_fmadd_ps(mwv, _mm_set1_ps(i8_f32(rec, I8_S)), ms[c]);
        }
        qtile_step(&qt, t);
    }
    #pragma GCC unroll 4
    for (int c = 0; c < C; c++) {
        __m128 v = t == QT_Q4_1 ? _mm_add_ps(acc[c], ms[c]) : acc[c];
        if (R == 4) {
            _mm_storeu_ps(&y[m + c][n], v);
        } else {
            float o[4];
            _mm_storeu_ps(o, v);
            for (int r = 0; r < R; r++) y[m + c][n + r] = o[r];
        }
    }
}

/* Weight rows per row-major tile: decode 4 (the avx2 tier's MV_ROWS_Q),
 * the blocked path's last rows 4 weight x 3 activation rows. */
enum { I8_MV_ROWS = 4, I8_MR = 4, I8_MC = 3 };

/* Weight rows [nb, ne) against activation rows [0, m) in row-major I8_MR x
 * C tiles (the blocked path's rows past its last whole group of 8). */
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

/* ---- the transposed layout (prefill) ----
 * A repacked block of a group of I8_GROUP weight rows: 8 vectors of the
 * stored form (vector g: values 4g .. 4g+3 of row l in dword l), the
 * I8_GROUP scales and Q4_1's minima as FP32. A group keeps its nblk blocks
 * contiguous. I8_GROUP is 8 (256-bit vectors); 16 where the includer
 * defines KIPP_I8_ZMM (avx512i8: 512-bit vectors, each integer dot adding
 * to 16 outputs' block sums, and the FP32 work per 16 outputs). A 16-row
 * group's vector g is two 8-row ones side by side (rows 0-7, then 8-15),
 * and so are its scales and minima. The sums, and each output's FP32
 * sequence, do not depend on the width: the same bits. */
#ifdef KIPP_I8_ZMM
#ifndef KIPP_I8_VNNI
#error "the 512-bit transposed tiles are vpdpbusd only"
#endif
#define I8_HALVES 2
#else
#define I8_HALVES 1
#endif
enum {
    I8_GROUP = 8 * I8_HALVES,
    I8_T_D = 256 * I8_HALVES,    /* the scales: after 8 vectors of 32 x I8_HALVES bytes */
    I8_T_M = 288 * I8_HALVES,    /* Q4_1's minima */
    I8_T_BYTES = 320 * I8_HALVES /* one block of a group */
};

/* v[l] dword g -> v[g] dword l (an 8 x 8 transpose of dwords). */
static inline __attribute__((always_inline)) void i8_transpose8(__m256i v[8]) {
    __m256i t[8], s[8];
    #pragma GCC unroll 4
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_epi32(v[i], v[i + 1]);
        t[i + 1] = _mm256_unpackhi_epi32(v[i], v[i + 1]);
    }
    #pragma GCC unroll 2
    for (int i = 0; i < 8; i += 4) { /* rows i .. i+3: dwords 0|4, 1|5, 2|6, 3|7 */
        s[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
        s[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
        s[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
        s[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    #pragma GCC unroll 4
    for (int g = 0; g < 4; g++) {
        v[g] = _mm256_permute2x128_si256(s[g], s[g + 4], 0x20);
        v[g + 4] = _mm256_permute2x128_si256(s[g], s[g + 4], 0x31);
    }
}

/* Weight rows n .. n + I8_GROUP * groups - 1 into dst, group by group.
 * Each block of a group reads its rows' blocks a row apart, a pattern the
 * hardware prefetchers do not follow far enough: the I8_PF_ROWS rows
 * after the group (up to the call's last row, n_end) are prefetched as
 * the one contiguous region they are, a block's share per block. */
#define I8_PF_ROWS 16
static void i8_repack(int t, const uint8_t *w, size_t row_bytes, uint32_t nblk, uint32_t n,
                      uint32_t groups, uint32_t n_end, uint8_t *dst) {
    const size_t bb = qblock_bytes(t);
    const char *pf_end = (const char *)w + (size_t)n_end * row_bytes;
    for (uint32_t gr = 0; gr < groups; gr++) {
        const uint8_t *row0 = w + (size_t)(n + I8_GROUP * gr) * row_bytes;
        const char *pf = (const char *)row0 + (size_t)I8_PF_ROWS * row_bytes;
        for (uint32_t b = 0; b < nblk; b++, dst += I8_T_BYTES) {
            for (size_t l = 0; l < I8_GROUP * bb && pf < pf_end; l += 64, pf += 64)
                _mm_prefetch(pf, _MM_HINT_T0);
            #pragma GCC unroll 2
            for (int h = 0; h < I8_HALVES; h++) { /* rows 8h .. 8h + 7 */
                __m256i v[8];
                uint16_t d[8], mn[8] = {0};
                #pragma GCC unroll 8
                for (int l = 0; l < 8; l++) {
                    const uint8_t *blk = row0 + (size_t)(8 * h + l) * row_bytes + (size_t)b * bb;
                    v[l] = i8_wload(t, blk);
                    d[l] = (uint16_t)i8_half_bits(blk, 0);
                    if (t == QT_Q4_1) mn[l] = (uint16_t)i8_half_bits(blk, 2);
                }
                i8_transpose8(v);
                #pragma GCC unroll 8
                for (int g = 0; g < 8; g++)
                    _mm256_store_si256((__m256i *)(dst + 32 * (I8_HALVES * g + h)), v[g]);
                _mm256_store_ps((float *)(dst + I8_T_D + 32 * h),
                                _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)d)));
                _mm256_store_ps((float *)(dst + I8_T_M + 32 * h),
                                _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)mn)));
            }
        }
    }
}

/* The transposed tile's vectors: one dword (int) or float lane per row of
 * a group. */
#ifdef KIPP_I8_ZMM
typedef __m512i i8_vi;
typedef __m512 i8_vf;
#define I8V_ZERO_I _mm512_setzero_si512
#define I8V_ZERO_F _mm512_setzero_ps
#define I8V_SET1_I _mm512_set1_epi32
#define I8V_SET1_F _mm512_set1_ps
#define I8V_LOAD_I(p) _mm512_load_si512(p)
#define I8V_LOAD_F _mm512_load_ps
#define I8V_DPBUSD _mm512_dpbusd_epi32
#define I8V_CVT _mm512_cvtepi32_ps
#define I8V_MUL_F _mm512_mul_ps
#define I8V_ADD_F _mm512_add_ps
#define I8V_FMADD_F _mm512_fmadd_ps
#define I8V_STOREU_F _mm512_storeu_ps
#else
typedef __m256i i8_vi;
typedef __m256 i8_vf;
#define I8V_ZERO_I _mm256_setzero_si256
#define I8V_ZERO_F _mm256_setzero_ps
#define I8V_SET1_I _mm256_set1_epi32
#define I8V_SET1_F _mm256_set1_ps
#define I8V_LOAD_I(p) _mm256_load_si256(p)
#define I8V_LOAD_F _mm256_load_ps
#define I8V_DPBUSD _mm256_dpbusd_epi32
#define I8V_CVT _mm256_cvtepi32_ps
#define I8V_MUL_F _mm256_mul_ps
#define I8V_ADD_F _mm256_add_ps
#define I8V_FMADD_F _mm256_fmadd_ps
#define I8V_STOREU_F _mm256_storeu_ps
#endif

/* Transposed tiles: I8_TG groups x I8_TC activation rows.
 * Measured on Zen 4 (kernel_micro matmul, one thread, 512 rows, M = 64, K
 * = 1,024, GFLOPS Q4_0 / Q8_0 / Q4_1): the vpdpbusd table 2 x 4 316 / 319
 * / 287 (1 x 4 251 / 256 / 250, 2 x 3 300 / 305 / 276, 1 x 6 271 / 273 /
 * 259, 2 x 2 225 / 226 / 214, 3 x 3 279 / 283 / 253, 2 x 6 within 2 %);
 * the plain table (16 registers; kernel_micro's avx2i8-plain) 3 x 3 200 /
 * 117 / 183 (2 x 3 126 / 111 / 114, 1 x 3 108 / 96 / 100, 3 x 2 185 / 114
 * / 170, 4 x 2 53 / 68 / 53). The row-major tiles before stop 44: 96 / 92
 * (vpdpbusd), 85 / 80 (plain). The plain table is the one AVX2-only
 * processors get, and it is unmeasured on one. The 512-bit tiles (avx512i8,
 * groups of 16 rows) keep 2 x 4: on the Intel Xeon of stop 60 (family 6
 * model 207) 425 / 421 / 390 GFLOPS there against the 256-bit tiles' 259
 * / 256 / 234 (the same tier before), 2 x 5 431 / 435 / 399 and 2 x 6
 * 435 / 446 / 398 (within 3 %; a 512-token prefill in the engine read
 * either way in interleaved runs), 2 x 3 393 / 387 / 351, 1 x 8 370 / 363 /
 * 376, 3 x 3 310 / 318 / 297. -DI8_TG=.. -DI8_TC=.. (both) override, for
 * such measurements. */
#ifndef I8_TG
#ifdef KIPP_I8_VNNI
#define I8_TG 2
#define I8_TC 4
#else
#define I8_TG 3
#define I8_TC 3
#endif
#endif

/* G (<= I8_TG) repacked groups from s (gstride bytes apart) against
 * activation rows m .. m+C-1; lane l of acc[gi][c] is the output (m + c,
 * n + I8_GROUP gi + l). */
static inline __attribute__((always_inline)) void i8_ttile(int t, const uint8_t *s,
                                                           size_t gstride, uint32_t nblk,
                                                           const uint8_t *x, size_t x_stride,
                                                           int G, int C, uint32_t n, uint32_t m,
                                                           float *const *y) {
    i8_vf acc[I8_TG][I8_TC], ms[I8_TG][I8_TC];
    #pragma GCC unroll 2
    for (int gi = 0; gi < G; gi++)
        #pragma GCC unroll 8
        for (int c = 0; c < C; c++) acc[gi][c] = ms[gi][c] = I8V_ZERO_F();
#ifndef KIPP_I8_VNNI
    const __m256i ones = _mm256_set1_epi16(1);
#endif
    for (uint32_t b = 0; b < nblk; b++) {
        const uint8_t *xb = x + (size_t)b * I8_REC + (size_t)m * x_stride;
        const uint8_t *sb = s + (size_t)b * I8_T_BYTES;
        i8_vi ia[I8_TG][I8_TC];
#ifndef KIPP_I8_VNNI
        __m256i iw[I8_TG][I8_TC]; /* Q4: the pair sums, in 16 bits */
#endif
        #pragma GCC unroll 8
        for (int c = 0; c < C; c++) {
            i8_vi c0 = i8_corrected(t) ? I8V_SET1_I(i8_corr(t, xb + (size_t)c * x_stride))
                                       : I8V_ZERO_I();
            #pragma GCC unroll 2
            for (int gi = 0; gi < G; gi++) {
                ia[gi][c] = c0;
#ifndef KIPP_I8_VNNI
                iw[gi][c] = _mm256_setzero_si256();
#endif
            }
        }
        #pragma GCC unroll 8
        for (int g = 0; g < 8; g++) {
            i8_vi wv[I8_TG];
#ifndef KIPP_I8_VNNI
            __m256i wa[I8_TG];
#endif
            #pragma GCC unroll 2
            for (int gi = 0; gi < G; gi++) {
                wv[gi] = I8V_LOAD_I((const i8_vi *)(sb + (size_t)gi * gstride) + g);
#ifndef KIPP_I8_VNNI
                if (t == QT_Q8_0) wa[gi] = _mm256_abs_epi8(wv[gi]);
#endif
            }
            #pragma GCC unroll 8
            for (int c = 0; c < C; c++) {
                int32_t xd;
                memcpy(&xd, xb + (size_t)c * x_stride + I8_Q + 4 * g, sizeof xd);
                const i8_vi xg = I8V_SET1_I(xd);
                #pragma GCC unroll 2
                for (int gi = 0; gi < G; gi++) {
#ifdef KIPP_I8_VNNI
                    ia[gi][c] = I8V_DPBUSD(ia[gi][c], wv[gi], xg);
#else
                    if (t == QT_Q8_0)
                        ia[gi][c] = _mm256_add_epi32(
                            ia[gi][c], _mm256_madd_epi16(_mm256_maddubs_epi16(
                                                             wa[gi], _mm256_sign_epi8(xg, wv[gi])),
                                                         ones));
                    else
                        iw[gi][c] = _mm256_add_epi16(iw[gi][c], _mm256_maddubs_epi16(wv[gi], xg));
#endif
                }
            }
        }
        #pragma GCC unroll 2
        for (int gi = 0; gi < G; gi++) {
            const uint8_t *sg = sb + (size_t)gi * gstride;
            const i8_vf dw = I8V_LOAD_F((const float *)(sg + I8_T_D));
            #pragma GCC unroll 8
            for (int c = 0; c < C; c++) {
                const uint8_t *rec = xb + (size_t)c * x_stride;
#ifndef KIPP_I8_VNNI
                if (t != QT_Q8_0)
                    ia[gi][c] = _mm256_add_epi32(ia[gi][c], _mm256_madd_epi16(iw[gi][c], ones));
#endif
                i8_vf dd = I8V_MUL_F(dw, I8V_SET1_F(i8_f32(rec, I8_D)));
                acc[gi][c] = I8V_FMADD_F(I8V_CVT(ia[gi][c]), dd, acc[gi][c]);
                if (t == QT_Q4_1)
                    ms[gi][c] = I8V_FMADD_F(I8V_LOAD_F((const float *)(sg + I8_T_M)),
                                            I8V_SET1_F(i8_f32(rec, I8_S)), ms[gi][c]);
            }
        }
    }
    #pragma GCC unroll 2
    for (int gi = 0; gi < G; gi++)
        #pragma GCC unroll 8
        for (int c = 0; c < C; c++)
            I8V_STOREU_F(&y[m + c][n + I8_GROUP * gi],
                         t == QT_Q4_1 ? I8V_ADD_F(acc[gi][c], ms[gi][c]) : acc[gi][c]);
}

/* Prefill: up to W_BLOCK weight rows at a time repacked into stack
 * scratch (hot in L2: as many groups as I8_SCRATCH_HOT holds, at least
 * one where it fits I8_SCRATCH at all), every activation row run against
 * them in transposed tiles; rows past the last whole group (a thread's
 * range need not be a multiple), and rows too long for one group to fit,
 * in row-major tiles. I8_SCRATCH holds a group of rows of up to
 * I8_MAX_BLOCKS blocks at either width: the family's longest (Qwen3-32B's
 * down projection, K = 25,600) and a little more. */
enum { I8_SCRATCH_HOT = 256 * 1024, I8_MAX_BLOCKS = 819, I8_SCRATCH = I8_T_BYTES * I8_MAX_BLOCKS };
_Static_assert(W_BLOCK % I8_GROUP == 0, "the blocked path repacks whole groups");
_Static_assert(25600 / 32 <= I8_MAX_BLOCKS, "a group of Qwen3-32B's longest rows fits");
/* cap groups of gstride = nblk x I8_T_BYTES bytes fit I8_SCRATCH_HOT, so
 * cap x nblk <= I8_SCRATCH_HOT / I8_T_BYTES blocks: within the scratch */
_Static_assert(I8_SCRATCH_HOT / I8_T_BYTES <= I8_MAX_BLOCKS, "the hot groups fit the scratch");

static __attribute__((noinline)) void i8_blocked(int t, const uint8_t *w, size_t row_bytes,
                                                 uint32_t nblk, const uint8_t *x, size_t x_stride,
                                                 uint32_t m, uint32_t n0, uint32_t n1,
                                                 float *const *y) {
    _Alignas(64) uint8_t s[I8_SCRATCH];
    const size_t gstride = (size_t)nblk * I8_T_BYTES;
    uint32_t cap = (uint32_t)(I8_SCRATCH_HOT / gstride), n = n0;
    if (cap == 0 && gstride <= I8_SCRATCH) cap = 1;
    if (cap > W_BLOCK / I8_GROUP) cap = W_BLOCK / I8_GROUP;
    while (cap > 0 && n + I8_GROUP <= n1) {
        uint32_t groups = (n1 - n) / I8_GROUP < cap ? (n1 - n) / I8_GROUP : cap;
        i8_repack(t, w, row_bytes, nblk, n, groups, n1, s);
        for (uint32_t r = 0; r < m; r += I8_TC) {
#define TT(C)                                                                                 \
    do {                                                                                      \
        uint32_t gi = 0;                                                                      \
        for (; gi + I8_TG <= groups; gi += I8_TG)                                             \
            i8_ttile(t, s + gi * gstride, gstride, nblk, x, x_stride, I8_TG, C,               \
                     n + I8_GROUP * gi, r, y);                                                \
        for (; gi < groups; gi++)                                                             \
            i8_ttile(t, s + gi * gstride, gstride, nblk, x, x_stride, 1, C, n + I8_GROUP * gi, \
                     r, y);                                                                   \
    } while (0)
            /* a tile of min(rows left, I8_TC) activation rows, each width a
             * compile-time constant */
#define TT_UPTO(C) TT((C) < I8_TC ? (C) : I8_TC)
            switch (m - r) {
            case 1: TT_UPTO(1); break;
            case 2: TT_UPTO(2); break;
            case 3: TT_UPTO(3); break;
            case 4: TT_UPTO(4); break;
            case 5: TT_UPTO(5); break;
            case 6: TT_UPTO(6); break;
            case 7: TT_UPTO(7); break;
            default: TT(I8_TC); break;
            }
#undef TT_UPTO
#undef TT
        }
        n += I8_GROUP * groups;
    }
    if (n < n1) {
        uint32_t r = 0;
        for (; r + I8_MC <= m; r += I8_MC)
            i8_block(t, w, row_bytes, nblk, x, x_stride, n, n1, r, I8_MC, y);
        if (m - r == 2) i8_block(t, w, row_bytes, nblk, x, x_stride, n, n1, r, 2, y);
        else if (m - r == 1) i8_block(t, w, row_bytes, nblk, x, x_stride, n, n1, r, 1, y);
    }
}
_Static_assert(I8_MC == 3, "the remainder cases cover I8_MC - 1 rows");
_Static_assert(I8_TC <= 8, "i8_blocked's switch cuts tiles of 1 .. 8 activation rows");

/* One activation row (decode: a single pass, tiles of I8_MV_ROWS weight
 * rows) and a few (2 .. I8_FEW_ROWS: batched decode of some sessions,
 * speculation's verify step, a short prompt) stream the weights in
 * row-major tiles, in passes of up to I8_FEW_C activation rows; more go
 * to the blocked path's repacked tiles. A tile's per-output sequence does
 * not depend on the layout, R, C or the pass, so the bits are the same.
 * Zen 4, kernel_micro out of cache (131,072 rows, K = 1,024), ns per row
 * and block, passes -> blocked (stop 44): the vpdpbusd table Q4_0 M = 2
 * 1.48 -> 2.02, 3 1.98 -> 2.30, 4 2.51 -> 2.32, 5 3.95 -> 2.76, 8 5.02
 * -> 3.11, 16 10.1 -> 4.76; Q8_0 M = 4 2.83 -> 3.84, 5 5.94 -> 4.13;
 * Q4_1 M = 4 2.88 -> 2.78, 5 4.77 -> 3.11; the plain table Q4_0 M = 4
 * 3.65 -> 2.77, 5 3.10 -> 3.09, Q8_0 M = 3 2.94 -> 4.37, 4 3.74 -> 5.06,
 * 5 5.57 -> 5.63. So one pass, up to 4 rows (stop 43 streamed up to 32,
 * against the row-major blocked tiles of then). Passes of 4 weight rows for every C
 * on the vpdpbusd table (32 registers); the plain table (16 registers)
 * keeps 2 rows for C > 2. docs/CPU-JOURNAL.md "Stop 43", "Stop 44". */
#ifndef I8_FEW_ROWS
#define I8_FEW_ROWS 4
#endif
#define I8_FEW_C 4
#ifdef KIPP_I8_VNNI
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
    i8_blocked(t, wb, row_bytes, nblk, xb, x_stride, m, n0, n1, y);
}
_Static_assert(I8_FEW_C == 4 && I8_FEW_R(1) <= 4 && I8_FEW_R(4) <= 4,
               "a pass's switch covers 1 .. I8_FEW_C rows; i8_tile holds 4 x 4");
_Static_assert(I8_FEW_R(1) == I8_MV_ROWS, "a one-row pass is decode's loop");

/* The table's entries (kernels_simd.h), over matmul_q above. */
KIPP_CPU_MATMUL_Q_ENTRIES(, PF_ROWS)
KIPP_CPU_MATMUL_Q_ENTRIES(_seq, PF_SEQ)

/* A tier table over these matmuls and the including tier's other kernels. */
#define KIPP_I8_TIER_TABLE(NAME, SUF, SEQ, TWIN)                                               \
    {                                                                                          \
        .name = NAME, .act_i8 = 1, .act_bytes = act_bytes, .pack_act = pack_act,              \
        .matmul_bf16 = matmul_bf16##SUF, .matmul_q8_0 = matmul_q8_0##SUF,                      \
        .matmul_q4_0 = matmul_q4_0##SUF, .matmul_q4_1 = matmul_q4_1##SUF, .rmsnorm = rmsnorm,  \
        .rope = rope, .silu_mul = silu_mul, .attention = attention,                            \
        .attention_q8_0 = attention_q8_0, .decode_seq = SEQ, .seq_twin = TWIN,                 \
    }
#endif
