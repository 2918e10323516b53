/* AVX-512 tier (F, BW, VL, DQ, BF16): the Makefile compiles this file, and
 * only this file, with those flags; dispatch.c calls into it only after
 * CPUID says the processor has them.
 *
 * Matmul: BF16 dot products (vdpbf16ps). Activations are packed as a BF16
 * pair per value, hi = bf16(x) and lo = bf16(x - hi), so x is carried to
 * about 16 significant bits and the products stay close to the FP32
 * oracle; each 32-value chunk of K is two vdpbf16ps into ONE accumulator
 * per output (hi first, then lo). Lane i of the accumulator sums k = 2i,
 * 2i+1 of every chunk; _mm512_reduce_add_ps folds the 16 lanes in its fixed
 * order. The matrix-vector tile (8 weight rows x 1) and the matrix-matrix
 * tile (4 weight rows x 4 activation rows) both run this per output. */
#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu/kernels.h"

/* 1: activations as a BF16 hi/lo pair (default). 0: one BF16 per value,
 * ~1.8x faster prefill, but measured NMSE vs the oracle ~3e-5 with argmax
 * flips on the synthetic models, which fails the argmax gate. */
#ifndef KIPP_AVX512_ACT_SPLIT
#define KIPP_AVX512_ACT_SPLIT 1
#endif
/* Packed activation row: per 32-value chunk, 32 hi BF16 then (split mode)
 * 32 lo BF16. */
#define ACT_PARTS (KIPP_AVX512_ACT_SPLIT ? 2 : 1)
static size_t act_bytes(uint32_t k) { return (size_t)k * 2 * ACT_PARTS; }

static void pack_act(const float *x, uint32_t k, void *dst) {
    __m512i *out = dst;
    for (uint32_t i = 0; i < k; i += 32) {
        __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
        __m512bh hi = _mm512_cvtne2ps_pbh(b, a);
        _mm512_storeu_si512(out + ACT_PARTS * (i / 32), (__m512i)hi);
        if (!KIPP_AVX512_ACT_SPLIT) continue;
        /* hi back to FP32 (exact) to form the remainders. */
        __m512i hw = (__m512i)hi;
        __m512 ha = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(hw)), 16));
        __m512 hb = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(hw, 1)), 16));
        __m512bh lo = _mm512_cvtne2ps_pbh(_mm512_sub_ps(b, hb), _mm512_sub_ps(a, ha));
        _mm512_storeu_si512(out + ACT_PARTS * (i / 32) + 1, (__m512i)lo);
    }
}

/* R weight rows x C activation rows; R and C are compile-time constants at
 * every call site, so acc[][] lives in registers. Per output the sequence
 * is: acc = 0; for each chunk: acc = dp(acc, hi, w); acc = dp(acc, lo, w);
 * reduce_add(acc) -- independent of R, C and the neighbours. */
static inline __attribute__((always_inline)) void tile(const uint16_t *w, uint32_t k,
                                                       const char *x, size_t x_stride,
                                                       int R, int C, uint32_t n,
                                                       uint32_t m, float *const *y) {
    __m512 acc[8][4];
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 8
        for (int c = 0; c < C; c++) acc[r][c] = _mm512_setzero_ps();
    for (uint32_t i = 0; i < k; i += 32) {
        __m512bh wv[8];
        #pragma GCC unroll 8
        for (int r = 0; r < R; r++)
            wv[r] = (__m512bh)_mm512_loadu_si512(w + (size_t)(n + r) * k + i);
        #pragma GCC unroll 8
        for (int c = 0; c < C; c++) {
            const __m512i *xc = (const __m512i *)(x + (size_t)(m + c) * x_stride) + ACT_PARTS * (i / 32);
            __m512bh hi = (__m512bh)_mm512_loadu_si512(xc);
            #pragma GCC unroll 8
            for (int r = 0; r < R; r++) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], hi, wv[r]);
            if (KIPP_AVX512_ACT_SPLIT) {
                __m512bh lo = (__m512bh)_mm512_loadu_si512(xc + 1);
                #pragma GCC unroll 8
                for (int r = 0; r < R; r++) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], lo, wv[r]);
            }
        }
    }
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 8
        for (int c = 0; c < C; c++) y[m + c][n + r] = _mm512_reduce_add_ps(acc[r][c]);
}

#define W_BLOCK 64 /* weight rows kept hot in L2 while activation rows stream */

static void matmul_bf16(const uint16_t *w, uint32_t k, uint32_t n0, uint32_t n1,
                        const void *x, size_t x_stride, uint32_t m, float *const *y) {
    const char *xb = x;
    if (m == 1) { /* decode: stream weights once, 8 rows in flight */
        uint32_t n = n0;
        for (; n + 8 <= n1; n += 8) tile(w, k, xb, x_stride, 8, 1, n, 0, y);
        for (; n < n1; n++) tile(w, k, xb, x_stride, 1, 1, n, 0, y);
        return;
    }
    for (uint32_t nb = n0; nb < n1; nb += W_BLOCK) {
        uint32_t ne = nb + W_BLOCK < n1 ? nb + W_BLOCK : n1;
        uint32_t r = 0;
        for (; r + 4 <= m; r += 4) {
            uint32_t n = nb;
            for (; n + 4 <= ne; n += 4) tile(w, k, xb, x_stride, 4, 4, n, r, y);
            for (; n < ne; n++) tile(w, k, xb, x_stride, 1, 4, n, r, y);
        }
        for (; r < m; r++) {
            uint32_t n = nb;
            for (; n + 4 <= ne; n += 4) tile(w, k, xb, x_stride, 4, 1, n, r, y);
            for (; n < ne; n++) tile(w, k, xb, x_stride, 1, 1, n, r, y);
        }
    }
}

/* exp for softmax and SiLU: 2^n * p(r), r = x - n ln2, |r| <= ln2/2, Taylor
 * to degree 6 (about 1 ulp). Inputs clamped so -inf gives 0, not NaN. */
static inline __m512 exp512(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));
    x = _mm512_min_ps(x, _mm512_set1_ps(88.7f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187e-06f), r);
    __m512 p = _mm512_set1_ps(1.0f / 720);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

static inline __m512 bf16x16_to_f32(const uint16_t *p) {
    __m256i h = _mm256_loadu_si256((const __m256i *)p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

static void rmsnorm(float *out, const float *x, const float *w, uint32_t n, float eps) {
    __m512 acc = _mm512_setzero_ps();
    for (uint32_t i = 0; i < n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        acc = _mm512_fmadd_ps(v, v, acc);
    }
    float inv = 1.0f / sqrtf(_mm512_reduce_add_ps(acc) / (float)n + eps);
    __m512 vi = _mm512_set1_ps(inv);
    for (uint32_t i = 0; i < n; i += 16)
        _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), vi),
                                                _mm512_loadu_ps(w + i)));
}

static void rope(float *x, const float *c, const float *s) {
    for (int i = 0; i < 64; i += 16) {
        __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 64);
        __m512 cv = _mm512_loadu_ps(c + i), sv = _mm512_loadu_ps(s + i);
        _mm512_storeu_ps(x + i, _mm512_fmsub_ps(a, cv, _mm512_mul_ps(b, sv)));
        _mm512_storeu_ps(x + i + 64, _mm512_fmadd_ps(b, cv, _mm512_mul_ps(a, sv)));
    }
}

static void silu_mul(float *g, const float *u, uint32_t n) {
    const __m512 one = _mm512_set1_ps(1.0f);
    for (uint32_t i = 0; i < n; i += 16) {
        __m512 v = _mm512_loadu_ps(g + i);
        __m512 e = exp512(_mm512_sub_ps(_mm512_setzero_ps(), v));
        __m512 s = _mm512_div_ps(v, _mm512_add_ps(one, e));
        _mm512_storeu_ps(g + i, _mm512_mul_ps(s, _mm512_loadu_ps(u + i)));
    }
}

/* See kernels_generic.c for the algorithm. Scores: q . k as 8 chained FMAs
 * over 16-wide pieces, then reduce_add; one K row is converted once and
 * used by every query head of the group. */
static void attention(const float *q, uint32_t g, const uint16_t *k, const uint16_t *v,
                      const uint32_t *table, uint32_t n_pos, float scale, float *out,
                      float *scratch) {
    const __m512 vscale = _mm512_set1_ps(scale);
    float run_max[16], run_sum[16];
    for (uint32_t h = 0; h < g; h++) {
        run_max[h] = -INFINITY;
        run_sum[h] = 0.0f;
    }
    memset(out, 0, (size_t)g * 128 * sizeof(float));
    for (uint32_t b0 = 0; b0 < n_pos; b0 += KIPP_CPU_ATT_BLOCK) {
        uint32_t nb = n_pos - b0 < KIPP_CPU_ATT_BLOCK ? n_pos - b0 : KIPP_CPU_ATT_BLOCK;
        size_t base = (size_t)table[b0 / KIPP_CPU_ATT_BLOCK] * KIPP_CPU_ATT_BLOCK;
        for (uint32_t j = 0; j < nb; j++) {
            const uint16_t *kr = k + (base + j) * 1024;
            __m512 kv[8];
            for (int d = 0; d < 8; d++) kv[d] = bf16x16_to_f32(kr + 16 * d);
            for (uint32_t h = 0; h < g; h++) {
                const float *qh = q + (size_t)h * 128;
                __m512 acc = _mm512_mul_ps(_mm512_loadu_ps(qh), kv[0]);
                for (int d = 1; d < 8; d++)
                    acc = _mm512_fmadd_ps(_mm512_loadu_ps(qh + 16 * d), kv[d], acc);
                scratch[h * 32 + j] = _mm512_reduce_add_ps(acc);
            }
        }
        __mmask16 m0 = nb >= 16 ? 0xffff : (__mmask16)((1u << nb) - 1);
        __mmask16 m1 = nb <= 16 ? 0 : (__mmask16)((1u << (nb - 16)) - 1);
        if (nb == 32) m1 = 0xffff;
        const __m512 ninf = _mm512_set1_ps(-INFINITY);
        for (uint32_t h = 0; h < g; h++) {
            float *p = scratch + h * 32;
            __m512 s0 = _mm512_mask_loadu_ps(ninf, m0, p);
            __m512 s1 = _mm512_mask_loadu_ps(ninf, m1, p + 16);
            s0 = _mm512_mul_ps(s0, vscale);
            s1 = _mm512_mul_ps(s1, vscale);
            float bmax = _mm512_reduce_max_ps(_mm512_max_ps(s0, s1));
            float new_max = bmax > run_max[h] ? bmax : run_max[h];
            __m512 nm = _mm512_set1_ps(new_max);
            __m512 e0 = _mm512_maskz_mov_ps(m0, exp512(_mm512_sub_ps(s0, nm)));
            __m512 e1 = _mm512_maskz_mov_ps(m1, exp512(_mm512_sub_ps(s1, nm)));
            float corr = _mm512_cvtss_f32(exp512(_mm512_set1_ps(run_max[h] - new_max)));
            run_sum[h] = run_sum[h] * corr + _mm512_reduce_add_ps(_mm512_add_ps(e0, e1));
            run_max[h] = new_max;
            _mm512_storeu_ps(p, e0);
            _mm512_storeu_ps(p + 16, e1);
            __m512 vc = _mm512_set1_ps(corr);
            float *oh = out + (size_t)h * 128;
            for (int d = 0; d < 128; d += 16)
                _mm512_storeu_ps(oh + d, _mm512_mul_ps(_mm512_loadu_ps(oh + d), vc));
        }
        for (uint32_t j = 0; j < nb; j++) {
            const uint16_t *vr = v + (base + j) * 1024;
            __m512 vv[8];
            for (int d = 0; d < 8; d++) vv[d] = bf16x16_to_f32(vr + 16 * d);
            for (uint32_t h = 0; h < g; h++) {
                __m512 pj = _mm512_set1_ps(scratch[h * 32 + j]);
                float *oh = out + (size_t)h * 128;
                for (int d = 0; d < 8; d++)
                    _mm512_storeu_ps(oh + 16 * d,
                                     _mm512_fmadd_ps(pj, vv[d], _mm512_loadu_ps(oh + 16 * d)));
            }
        }
    }
    for (uint32_t h = 0; h < g; h++) {
        __m512 inv = _mm512_set1_ps(1.0f / run_sum[h]);
        float *oh = out + (size_t)h * 128;
        for (int d = 0; d < 128; d += 16)
            _mm512_storeu_ps(oh + d, _mm512_mul_ps(_mm512_loadu_ps(oh + d), inv));
    }
}

const kipp_cpu_kernels kipp_cpu_kernels_avx512 = {
    .name = "avx512",
    .act_bytes = act_bytes,
    .pack_act = pack_act,
    .matmul_bf16 = matmul_bf16,
    .rmsnorm = rmsnorm,
    .rope = rope,
    .silu_mul = silu_mul,
    .attention = attention,
};
#endif
