/* AVX2 + FMA tier: the Makefile compiles this file, and only this file, with
 * -mavx2 -mfma -mf16c; dispatch.c calls into it only after CPUID says so.
 *
 * Matmul: BF16 weights widened to FP32 (exact), activations stay FP32.
 * One 8-lane accumulator per output, lane j summing k = j, j+8, ... by FMA;
 * the lanes fold in one fixed tree (hsum8). The matrix-vector tile (4
 * weight rows x 1) and matrix-matrix tile (4 weight rows x 3 activation
 * rows) run exactly this per output. */
#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu/kernels.h"

static size_t act_bytes(uint32_t k) {
    size_t b = (size_t)k * sizeof(float);
    return (b + 63) & ~(size_t)63;
}

static void pack_act(const float *x, uint32_t k, void *dst) {
    memcpy(dst, x, (size_t)k * sizeof(float));
}

/* ((0+4)+(2+6)) + ((1+5)+(3+7)) -- the one lane-to-scalar fold. */
static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 2^n for integer-valued n in [-126, 128], built in the exponent field in
 * two halves so that 128 does not overflow it (vf_exp clamps x to
 * [-87.3, 88.7]: exp(-87.3) ~ 1e-38 stands in for 0). */
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
#define VF_EXP_MIN (-87.3f)
#include "cpu/kernels_simd.h"

static inline __m256 bf16x8_to_f32(const uint16_t *p) {
    __m128i h = _mm_loadu_si128((const __m128i *)p);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* PF (decode): each weight row's next line is prefetched R rows ahead --
 * the next tile's -- because rows of a few KiB are too short for the
 * hardware prefetcher to ramp up on. Prefetches never fault. */
static inline __attribute__((always_inline)) void tile(const uint16_t *w, uint32_t k,
                                                       const char *x, size_t x_stride,
                                                       int R, int C, int PF, uint32_t n,
                                                       uint32_t m, float *const *y) {
    __m256 acc[8][3];
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 8
        for (int c = 0; c < C; c++) acc[r][c] = _mm256_setzero_ps();
    for (uint32_t i = 0; i < k; i += 8) {
        __m256 xv[3];
        #pragma GCC unroll 8
        for (int c = 0; c < C; c++)
            xv[c] = _mm256_loadu_ps((const float *)(x + (size_t)(m + c) * x_stride) + i);
        #pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            if (PF && i % 32 == 0) /* one 64-byte line per 32 values */
                _mm_prefetch((const char *)(w + (size_t)(n + r + R) * k + i), _MM_HINT_T0);
            __m256 wv = bf16x8_to_f32(w + (size_t)(n + r) * k + i);
            #pragma GCC unroll 8
            for (int c = 0; c < C; c++) acc[r][c] = _mm256_fmadd_ps(wv, xv[c], acc[r][c]);
        }
    }
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 8
        for (int c = 0; c < C; c++) y[m + c][n + r] = hsum8(acc[r][c]);
}

#define W_BLOCK 64

static void matmul_bf16(const uint16_t *w, uint32_t k, uint32_t n0, uint32_t n1,
                        const void *x, size_t x_stride, uint32_t m, float *const *y) {
    const char *xb = x;
    if (m == 1) {
        uint32_t n = n0;
        for (; n + 8 <= n1; n += 8) tile(w, k, xb, x_stride, 8, 1, 1, n, 0, y);
        for (; n < n1; n++) tile(w, k, xb, x_stride, 1, 1, 0, n, 0, y);
        return;
    }
    for (uint32_t nb = n0; nb < n1; nb += W_BLOCK) {
        uint32_t ne = nb + W_BLOCK < n1 ? nb + W_BLOCK : n1;
        uint32_t r = 0;
        for (; r + 3 <= m; r += 3) {
            uint32_t n = nb;
            for (; n + 4 <= ne; n += 4) tile(w, k, xb, x_stride, 4, 3, 0, n, r, y);
            for (; n < ne; n++) tile(w, k, xb, x_stride, 1, 3, 0, n, r, y);
        }
        for (; r < m; r++) {
            uint32_t n = nb;
            for (; n + 4 <= ne; n += 4) tile(w, k, xb, x_stride, 4, 1, 0, n, r, y);
            for (; n < ne; n++) tile(w, k, xb, x_stride, 1, 1, 0, n, r, y);
        }
    }
}

/* Attention steps (kernels_att.h has the loop nest; kernels_generic.c the
 * plain algorithm). K and V rows are widened once per block into an L1
 * buffer (16 YMM registers would be all of them) and read by every row and
 * head. Scores:
 * two 8-lane FMA chains (values d..d+7 and d+8..d+15 of each 16), added,
 * then hsum8. PV: half a head (64 outputs, 8 registers) at a time over the
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

static inline __attribute__((always_inline)) float att_dot(const float *qh, const att_krow *kw) {
    __m256 acc0 = _mm256_mul_ps(_mm256_loadu_ps(qh), _mm256_load_ps(kw->k));
    __m256 acc1 = _mm256_mul_ps(_mm256_loadu_ps(qh + 8), _mm256_load_ps(kw->k + 8));
    for (int d = 16; d < KIPP_HEAD_DIM; d += 16) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(qh + d), _mm256_load_ps(kw->k + d), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(qh + d + 8), _mm256_load_ps(kw->k + d + 8), acc1);
    }
    return hsum8(_mm256_add_ps(acc0, acc1));
}

/* Raw scores of one (row, head) against K rows kw[0..n). */
static inline __attribute__((always_inline)) void att_dots(const float *qd, const att_krow *kw,
                                                           uint32_t n, float *p) {
    for (uint32_t j = 0; j < n; j++) p[j] = att_dot(qd, &kw[j]);
}

static inline void att_block(float *p, uint32_t nb, float scale, float *run_max,
                             float *run_sum, float *oh, const att_krow *vw) {
    float bmax = -INFINITY;
    for (uint32_t j = 0; j < nb; j++) {
        p[j] *= scale;
        bmax = p[j] > bmax ? p[j] : bmax;
    }
    float new_max = bmax > *run_max ? bmax : *run_max;
    float corr = *run_max == -INFINITY
                     ? 0.0f
                     : _mm256_cvtss_f32(vf_exp(_mm256_set1_ps(*run_max - new_max)));
    for (uint32_t j = nb; j < KIPP_CPU_ATT_BLOCK; j++) p[j] = 0.0f; /* masked lanes */
    __m256 nm = _mm256_set1_ps(new_max), sum = _mm256_setzero_ps();
    for (uint32_t j = 0; j < KIPP_CPU_ATT_BLOCK; j += 8) {
        __m256 e = vf_exp(_mm256_sub_ps(_mm256_loadu_ps(p + j), nm));
        /* lanes past nb must contribute exactly 0 */
        __m256 valid = _mm256_cmp_ps(_mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7),
                                     _mm256_set1_ps((float)nb - (float)j), _CMP_LT_OQ);
        e = _mm256_and_ps(e, valid);
        _mm256_storeu_ps(p + j, e);
        sum = _mm256_add_ps(sum, e);
    }
    *run_sum = *run_sum * corr + hsum8(sum);
    *run_max = new_max;
    __m256 vc = _mm256_set1_ps(corr);
    for (int half = 0; half < KIPP_HEAD_DIM; half += 64) {
        __m256 o[8];
        #pragma GCC unroll 8
        for (int d = 0; d < 8; d++) o[d] = _mm256_mul_ps(_mm256_loadu_ps(oh + half + 8 * d), vc);
        for (uint32_t j = 0; j < nb; j++) {
            const float *vr = vw[j].k + half;
            __m256 pj = _mm256_set1_ps(p[j]);
            #pragma GCC unroll 8
            for (int d = 0; d < 8; d++) o[d] = _mm256_fmadd_ps(pj, _mm256_load_ps(vr + 8 * d), o[d]);
        }
        #pragma GCC unroll 8
        for (int d = 0; d < 8; d++) _mm256_storeu_ps(oh + half + 8 * d, o[d]);
    }
}

static inline void att_store(const float *oh, float run_sum, float *out) {
    __m256 inv = _mm256_set1_ps(1.0f / run_sum);
    for (int d = 0; d < KIPP_HEAD_DIM; d += 8)
        _mm256_storeu_ps(out + d, _mm256_mul_ps(_mm256_loadu_ps(oh + d), inv));
}

#include "cpu/kernels_att.h"

/* ---- quantized weights: Q8_0, Q4_0 (scale4_gs32), Q4_1 (affine4_gs32) ----
 * Blocks decoded in registers to 4 x 8 FP32 small integers q (Q4_0: nibble
 * - 8), exact; activations are the FP32 rows the BF16 matmul reads. Per
 * output, in block order:
 *   s = q0*x0 (+FMA q1*x1, q2*x2, q3*x3);  acc = FMA(d, s, acc)
 *   (Q4_1 also acc = FMA(m, (x0 + x1) + (x2 + x3), acc))
 * then hsum8. A weight row's block is decoded once for up to 4 activation
 * rows (qtile C = 4 or 1); decode runs 4 weight rows per tile (R = 4) with
 * the next tile prefetched. Every output runs the same sequence either way. */
/* Block b of a row as 4 x 8 FP32 small integers, d and m broadcast. */
static inline __attribute__((always_inline)) void qdecode(int t, const uint8_t *row, uint32_t b,
                                                          __m256 q[4], __m256 *d, __m256 *mn) {
    __m128i lo, hi;
    float ds, ms = 0.0f;
    qblock_ints(t, row, b, &lo, &hi, &ds, &ms);
    *d = _mm256_set1_ps(ds);
    if (t == QT_Q4_1) *mn = _mm256_set1_ps(ms);
    q[0] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo));
    q[1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)));
    q[2] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi));
    q[3] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)));
}

static inline __attribute__((always_inline)) void qtile(int t, const uint8_t *w, size_t row_bytes,
                                                        uint32_t k, const char *x,
                                                        size_t x_stride, int R, int C, int PF,
                                                        uint32_t n, uint32_t m0,
                                                        float *const *y) {
    __m256 acc[4][4];
    #pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 4
        for (int c = 0; c < C; c++) acc[r][c] = _mm256_setzero_ps();
    for (uint32_t b = 0; b < k / 32; b++) {
        #pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const uint8_t *row = w + (size_t)(n + r) * row_bytes;
            if (PF) _mm_prefetch((const char *)(row + R * row_bytes + b * qblock_bytes(t)), _MM_HINT_T0);
            __m256 q[4], d, mn = _mm256_setzero_ps();
            qdecode(t, row, b, q, &d, &mn);
            #pragma GCC unroll 4
            for (int c = 0; c < C; c++) {
                const float *xc = (const float *)(x + (size_t)(m0 + c) * x_stride) + 32 * b;
                __m256 x0 = _mm256_loadu_ps(xc), x1 = _mm256_loadu_ps(xc + 8);
                __m256 x2 = _mm256_loadu_ps(xc + 16), x3 = _mm256_loadu_ps(xc + 24);
                __m256 s = _mm256_mul_ps(q[0], x0);
                s = _mm256_fmadd_ps(q[1], x1, s);
                s = _mm256_fmadd_ps(q[2], x2, s);
                s = _mm256_fmadd_ps(q[3], x3, s);
                acc[r][c] = _mm256_fmadd_ps(d, s, acc[r][c]);
                if (t == QT_Q4_1)
                    acc[r][c] = _mm256_fmadd_ps(
                        mn, _mm256_add_ps(_mm256_add_ps(x0, x1), _mm256_add_ps(x2, x3)), acc[r][c]);
            }
        }
    }
    #pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 4
        for (int c = 0; c < C; c++) y[m0 + c][n + r] = hsum8(acc[r][c]);
}

static inline __attribute__((always_inline)) void matmul_q(int t, const void *w, uint32_t k,
                                                           uint32_t n0, uint32_t n1,
                                                           const void *x, size_t x_stride,
                                                           uint32_t m, float *const *y) {
    const char *xb = x;
    const uint8_t *wb = w;
    size_t row_bytes = (size_t)(k / 32) * qblock_bytes(t);
    if (m == 1) { /* decode: stream weights once, 4 rows in flight */
        uint32_t n = n0;
        for (; n + 4 <= n1; n += 4) qtile(t, wb, row_bytes, k, xb, x_stride, 4, 1, 1, n, 0, y);
        for (; n < n1; n++) qtile(t, wb, row_bytes, k, xb, x_stride, 1, 1, 0, n, 0, y);
        return;
    }
    for (uint32_t nb = n0; nb < n1; nb += W_BLOCK) {
        uint32_t ne = nb + W_BLOCK < n1 ? nb + W_BLOCK : n1;
        uint32_t r = 0;
        for (; r + 4 <= m; r += 4)
            for (uint32_t n = nb; n < ne; n++)
                qtile(t, wb, row_bytes, k, xb, x_stride, 1, 4, 0, n, r, y);
        for (; r < m; r++)
            for (uint32_t n = nb; n < ne; n++)
                qtile(t, wb, row_bytes, k, xb, x_stride, 1, 1, 0, n, r, y);
    }
}

KIPP_CPU_MATMUL_Q_ENTRIES

const kipp_cpu_kernels kipp_cpu_kernels_avx2 = {
    .name = "avx2",
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
