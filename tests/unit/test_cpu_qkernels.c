/* The cpu backend's quantized-weight matmuls (Q8_0, Q4_0, Q4_1) and the
 * Q8_0-KV attention, kernel by kernel, for every tier this processor runs:
 *  - against a double-precision dot of the exactly decoded weights
 *    (kipp_dequantize_*) and the activations the tier multiplies (FP32, or
 *    rounded to BF16 on avx512bf16): error per output within MATMUL_Q_TOL
 *    of the row's sum |w||x|; at two K, one past the avx512bf16 prefill
 *    decode buffer;
 *  - the decoded weights themselves, bitwise the oracle's (on avx512bf16
 *    the oracle's rounded to BF16): one-hot activations read weights back
 *    through the prefill and decode paths;
 *  - batch invariance, bitwise: output (m, n) is the same for every M (1..7,
 *    so every tile shape and remainder), and for any [n0, n1) column range
 *    (odd bounds, so weight-row tile remainders run too);
 *  - attention over a Q8_0 cache against a double-precision softmax over
 *    the decoded K/V, with a scrambled block table. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/quant.h"
#include "cpu/kernels.h"
#include "test_tiers.h"
#include "test_util.h"

/* K_LONG: longer than Qwen3-4B's down projection (K = 9728), past two K
 * spans; the FP32 tiers' decode buffer (384 KiB) holds 11 such rows and
 * the avx512bf16 tier's 23 (BF16), so a decoded block ends in a
 * remainder. MMAX = 11 runs both sides of the prefill switch (M >= 4
 * decodes once, M < 4 decodes in the tiles) and whole 4- and 6-row
 * activation tiles plus every remainder. */
enum { K_SHORT = 256, K_LONG = 8224, N = 45, MMAX = 11 };

/* Bounds: ~10x the worst measured on 2026-12-01 (AMD Zen 5, every tier):
 *   matmul, relative to sum |w||x|:  generic q8_0 2.7e-8, q4_0 2.7e-8,
 *     q4_1 4.0e-8; avx2 1.9e-8, 2.4e-8, 3.5e-8; avx512 2.9e-8, 2.6e-8, 3.0e-8;
 *     avx512bf16 (against BF16-rounded activations) 2.5e-8, 2.0e-8, 2.2e-8
 *   attention over a Q8_0 cache (one kernel for every tier): 1.3e-7 abs on
 *     this seed, 1.7e-7 and 2.2e-7 on two others */
#define MATMUL_Q_TOL 4e-7
#define ATTENTION_Q8_TOL 2e-6

static uint64_t rng = 0x243f6a8885a308d3ull;
static float uni(void) { /* [-1, 1) */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) * 0x1.0p-52 - 1.0);
}

typedef struct qtype {
    const char *name;
    size_t block;
    void (*quantize)(const float *, size_t, void *);
    void (*dequantize)(const void *, size_t, float *);
} qtype;

static void q8q(const float *x, size_t n, void *o) { kipp_quantize_q8_0(x, n, o); }
static void q40q(const float *x, size_t n, void *o) { kipp_quantize_q4_0(x, n, o); }
static void q41q(const float *x, size_t n, void *o) { kipp_quantize_q4_1(x, n, o); }
static void q8d(const void *b, size_t n, float *o) { kipp_dequantize_q8_0(b, n, o); }
static void q40d(const void *b, size_t n, float *o) { kipp_dequantize_q4_0(b, n, o); }
static void q41d(const void *b, size_t n, float *o) { kipp_dequantize_q4_1(b, n, o); }

static kipp_cpu_matmul_q_fn pick(const kipp_cpu_kernels *k, int t) {
    return t == 0 ? k->matmul_q8_0 : t == 1 ? k->matmul_q4_0 : k->matmul_q4_1;
}

static void check_matmul(const kipp_cpu_kernels *kern, const int K) {
    const qtype types[3] = {{"q8_0", sizeof(kipp_block_q8_0), q8q, q8d},
                            {"q4_0", sizeof(kipp_block_q4_0), q40q, q40d},
                            {"q4_1", sizeof(kipp_block_q4_1), q41q, q41d}};
    float *wf = malloc(sizeof(float) * K * N), *wd = malloc(sizeof(float) * K * N);
    float *x = malloc(sizeof(float) * K * MMAX);
    size_t stride = kern->act_bytes(K);
    uint8_t *act = aligned_alloc(64, stride * MMAX), *hot = aligned_alloc(64, stride * MMAX);
    float ys[MMAX][N], yb[MMAX][N], yc[MMAX][N];
    float *pys[MMAX], *pyb[MMAX], *pyc[MMAX];
    for (int r = 0; r < MMAX; r++) pys[r] = ys[r], pyb[r] = yb[r], pyc[r] = yc[r];
    /* Rows of very different scales, with a positive offset on some (Q4_1's
     * minimum matters), one all-zero row, and one so small (row 5, weights
     * ~2^-20) that its FP16 scales are subnormal: the tiers read scales
     * from a conversion table (kernels.h) that must cover those too. */
    for (int n = 0; n < N; n++)
        for (int i = 0; i < K; i++)
            wf[n * K + i] = n == 7 ? 0.0f
                            : (uni() + (n % 3 == 0 ? 0.6f : 0.0f)) *
                                  powf(2.0f, n == 5 ? -20.0f : (float)(n % 9) - 4);
    for (int r = 0; r < MMAX; r++) {
        for (int i = 0; i < K; i++) x[r * K + i] = uni() * (1.0f + (float)r);
        kern->pack_act(x + r * K, K, act + r * stride);
        /* The reference multiplies what the tier multiplies: on a tier that
         * rounds activations to BF16 (RNE), the rounded values. */
        if (kern->act_bf16)
            for (int i = 0; i < K; i++) x[r * K + i] = kipp_bf16_to_f32(kipp_f32_to_bf16(x[r * K + i]));
    }
    for (int t = 0; t < 3; t++) {
        void *wq = malloc(types[t].block * (K / 32) * N);
        types[t].quantize(wf, (size_t)K * N, wq);
        types[t].dequantize(wq, (size_t)K * N, wd);
        /* A tier that rounds the decoded weights to BF16 (kernels.h
         * qweights_bf16) multiplies those: the reference and the one-hot
         * read-back below use them. */
        if (kern->qweights_bf16)
            for (size_t i = 0; i < (size_t)K * N; i++) wd[i] = kipp_bf16_to_f32(kipp_f32_to_bf16(wd[i]));
        kipp_cpu_matmul_q_fn mm = pick(kern, t);
        mm(wq, K, 0, N, act, stride, MMAX, pys);
        double worst = 0;
        for (int r = 0; r < MMAX; r++)
            for (int n = 0; n < N; n++) {
                double dot = 0, mag = 0;
                for (int i = 0; i < K; i++) {
                    dot += (double)wd[n * K + i] * x[r * K + i];
                    mag += fabs((double)wd[n * K + i] * x[r * K + i]);
                }
                double e = mag > 0 ? fabs(ys[r][n] - dot) / mag : fabs(ys[r][n]);
                worst = e > worst ? e : worst;
            }
        CHECKF(worst <= MATMUL_Q_TOL, "%s %s: worst relative error %g", kern->name,
               types[t].name, worst);
        /* Every M, and odd column ranges: bitwise the same outputs. */
        int diffs = 0;
        for (int m = 1; m <= MMAX; m++) {
            mm(wq, K, 0, N, act, stride, (uint32_t)m, pyb);
            mm(wq, K, 3, 19, act, stride, (uint32_t)m, pyc);
            mm(wq, K, 19, N, act, stride, (uint32_t)m, pyc);
            for (int r = 0; r < m; r++)
                for (int n = 0; n < N; n++)
                    diffs += memcmp(&yb[r][n], &ys[r][n], 4) != 0 ||
                             (n >= 3 && memcmp(&yc[r][n], &ys[r][n], 4) != 0);
        }
        CHECKF(diffs == 0, "%s %s: %d outputs depend on M or the column range", kern->name,
               types[t].name, diffs);
        /* The tier's PF_SEQ twin (another decode prefetch and tile height):
         * the same decode bits, whole and split. */
        if (kern->seq_twin) {
            kipp_cpu_matmul_q_fn ms = pick(kern->seq_twin, t);
            ms(wq, K, 0, N, act, stride, 1, pyb);
            ms(wq, K, 3, 19, act, stride, 1, pyc);
            ms(wq, K, 19, N, act, stride, 1, pyc);
            int seq_diffs = 0;
            for (int n = 0; n < N; n++)
                seq_diffs += memcmp(&yb[0][n], &ys[0][n], 4) != 0 ||
                             (n >= 3 && memcmp(&yc[0][n], &ys[0][n], 4) != 0);
            CHECKF(seq_diffs == 0, "%s %s: %d decode outputs differ with PF_SEQ", kern->name,
                   types[t].name, seq_diffs);
        }
        /* One-hot activations read single weights back: the tiers claim
         * to multiply exactly the oracle's decoded weights (kernels_simd.h),
         * and w * 1 plus zeros is exact, so output (r, n) must equal the
         * oracle's weight (n, j_r) -- for columns spread over a block, in
         * the first, a middle and the last block, through prefill's path
         * (M = MMAX) and decode's (M = 1). */
        static const int offs[MMAX] = {0, 1, 2, 7, 8, 15, 16, 17, 23, 30, 31};
        const int block0[3] = {0, 32 * (K / 64), K - 32};
        int wrong = 0;
        for (int p = 0; p < 3; p++) {
            float *onehot = calloc((size_t)K, sizeof(float));
            for (int r = 0; r < MMAX; r++) {
                onehot[block0[p] + offs[r]] = 1.0f;
                kern->pack_act(onehot, K, hot + r * stride);
                onehot[block0[p] + offs[r]] = 0.0f;
            }
            free(onehot);
            mm(wq, K, 0, N, hot, stride, MMAX, pyb);
            for (int r = 0; r < MMAX; r++) {
                mm(wq, K, 0, N, hot + r * stride, stride, 1, pyc);
                for (int n = 0; n < N; n++) {
                    float want = wd[n * K + block0[p] + offs[r]];
                    wrong += !(yb[r][n] == want) || !(yc[0][n] == want);
                }
            }
        }
        CHECKF(wrong == 0, "%s %s: %d one-hot outputs differ from the oracle's decoded weight",
               kern->name, types[t].name, wrong);
        fprintf(stderr, "  %-10s %s K=%d: worst relative error %.2e, batch invariant %s\n",
                kern->name, types[t].name, K, worst, diffs ? "NO" : "yes");
        free(wq);
    }
    free(wf);
    free(wd);
    free(x);
    free(act);
    free(hot);
}

/* Attention over a Q8_0 cache: 2 query heads on one KV head, 70 positions
 * in 3 blocks placed by a scrambled table. */
static void check_attention(void) {
    rng = 0x13198a2e03707344ull; /* the same data whichever tiers ran before */
    enum { G = 2, NPOS = 70, NB = 3, ROW = 8 * 4 };
    kipp_block_q8_0 *k = calloc((size_t)NB * 32 * ROW, sizeof *k);
    kipp_block_q8_0 *v = calloc((size_t)NB * 32 * ROW, sizeof *v);
    uint32_t table[NB] = {2, 0, 1};
    float q[G * 128], out[G * 128], scratch[G * 32], head[128];
    double kd[NPOS][128], vd[NPOS][128];
    for (int i = 0; i < G * 128; i++) q[i] = uni() * 2.0f;
    for (int p = 0; p < NPOS; p++) {
        float kh[128], vh[128];
        for (int i = 0; i < 128; i++) kh[i] = uni() * 3.0f, vh[i] = uni();
        size_t phys = (size_t)table[p / 32] * 32 + p % 32;
        /* KV head 5 of the 8 in each position row. */
        kipp_quantize_q8_0(kh, 128, k + phys * ROW + 5 * 4);
        kipp_quantize_q8_0(vh, 128, v + phys * ROW + 5 * 4);
        kipp_dequantize_q8_0(k + phys * ROW + 5 * 4, 128, head);
        for (int i = 0; i < 128; i++) kd[p][i] = head[i];
        kipp_dequantize_q8_0(v + phys * ROW + 5 * 4, 128, head);
        for (int i = 0; i < 128; i++) vd[p][i] = head[i];
    }
    const float scale = 1.0f / sqrtf(128.0f);
    kipp_cpu_attention_q8_0(q, G, k + 5 * 4, v + 5 * 4, table, NPOS, scale, out, scratch);
    double worst = 0;
    for (int h = 0; h < G; h++) {
        double s[NPOS], mx = -INFINITY, sum = 0;
        for (int p = 0; p < NPOS; p++) {
            s[p] = 0;
            for (int i = 0; i < 128; i++) s[p] += (double)q[h * 128 + i] * kd[p][i];
            s[p] *= scale;
            mx = s[p] > mx ? s[p] : mx;
        }
        for (int p = 0; p < NPOS; p++) sum += s[p] = exp(s[p] - mx);
        for (int i = 0; i < 128; i++) {
            double o = 0;
            for (int p = 0; p < NPOS; p++) o += s[p] / sum * vd[p][i];
            double e = fabs(o - out[h * 128 + i]);
            worst = e > worst ? e : worst;
        }
    }
    fprintf(stderr, "  attention over Q8_0 KV: worst |error| %.2e\n", worst);
    CHECKF(worst <= ATTENTION_Q8_TOL, "attention q8_0: worst error %g", worst);
    free(k);
    free(v);
}

int main(void) {
    for (int t = 0; t < TEST_TIER_COUNT; t++) {
        const kipp_cpu_kernels *kern = test_tier_kernels(t);
        if (!kern) continue;
        check_matmul(kern, K_SHORT);
        check_matmul(kern, K_LONG);
    }
    check_attention();
    return test_finish("test_cpu_qkernels");
}
