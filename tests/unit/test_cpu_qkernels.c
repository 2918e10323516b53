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
 *  - attention over a Q8_0 cache, every tier, with a scrambled block
 *    table: against a double-precision softmax over the decoded K/V;
 *    multi-row calls bitwise one-row calls; bitwise the tier's BF16-cache
 *    attention where the cached values are BF16-exact;
 *  - the tiers with two tables (avx2i8: vpdpbusd or not; avx512: AVX512_VBMI
 *    or not): both, where the processor runs both, and avx512's two
 *    bitwise against each other. */
#include <assert.h>
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
 * remainder. MMAX = 35 runs both sides of each tier's switch from the
 * few-rows streaming path to the blocked one (the FP32 tiers: FEW_ROWS,
 * 4 or 8; avx2i8: I8_FEW_ROWS = 4; until stop 44 32, so 33-35 reached its
 * blocked path) and whole 4- and 6-row activation tiles plus every
 * remainder. N = 45 weight rows: avx2i8's blocked path repacks 5 groups
 * of 8 (K_LONG: 3 per round, the most 256 KiB holds, then 2) and takes the
 * last 5 rows in row-major tiles; the column ranges [3, 19) and [19, 45)
 * give 2 groups and 3 groups + 2 rows. avx512i8's groups are 16 rows:
 * 2 groups + 13 rows (K_LONG: 1 per round), and [3, 19) and [19, 45) 1
 * group, and 1 group + 10 rows. */
/* K_MID: past one K span but short enough that the decode buffer holds
 * more than a panel's rows (47 of them), the shape of Qwen3-0.6B's
 * attn_output and ffn_down: avx512 takes 9-16 such rows decoded once
 * (kernels_blocked.h matmul_q), 8 or fewer through its blocked tiles or
 * few-rows tiles, 17 and more decoded once in blocks -- all bitwise the
 * same outputs. */
enum { K_SHORT = 256, K_MID = 2080, K_LONG = 8224, N = 45, MMAX = 35 };
/* The integer tiers' prefill repacks groups of weight rows (avx2i8 8,
 * 320 bytes per block; avx512i8 16, 640 bytes) into stack scratch, as
 * many groups as 256 KiB holds and at least one where a group of up to
 * 819 blocks fits (kernels_i8.h I8_MAX_BLOCKS): K_HUGE's rows fit no
 * group and take the row-major tiles instead; K_ONE_GROUP's 16-row group
 * (600 x 640 bytes) is past the 256 KiB but repacked, one group a round
 * (check_i8_long_k). */
enum { K_HUGE = 832 * 32, K_ONE_GROUP = 600 * 32 };

/* Bounds: ~10x the worst measured on 2026-12-01 (AMD Zen 5, every tier):
 *   matmul, relative to sum |w||x|:  generic q8_0 2.7e-8, q4_0 2.7e-8,
 *     q4_1 4.0e-8; avx2 1.9e-8, 2.4e-8, 3.5e-8; avx512 2.9e-8, 2.6e-8, 3.0e-8;
 *     avx512bf16 (against BF16-rounded activations) 2.5e-8, 2.0e-8, 2.2e-8
 *   attention over a Q8_0 cache (abs; each tier's own kernel since
 *     2026-12-03, AMD Zen 4): generic 4.7e-7, avx2 3.6e-7, avx512 and
 *     avx512bf16 4.1e-7 with the quantizer's scales; 1.4e-8 with the
 *     power-of-two ones */
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

/* The integer-dot tiers' numerics (kernels.h act_i8: avx2i8, avx512i8),
 * written from the definition in kernels_i8_act.h's header comment, not
 * from their code: each
 * 32-value block of activations as int8 xq = RNE(x * 127 / amax) with d_x
 * = amax / 127 and s_x = d_x * sum xq (amax below 2^-120: zeros, d_x = 0;
 * a non-finite value: zeros, d_x = NaN); per weight block, the exact
 * integer sum p of its 32 products wq * xq, accumulated as FMA(p, d_w *
 * d_x, acc) in block order; Q4_1 adds FMA(m, s_x) in a separate chain.
 * Each such tier must match this bit for bit. */
typedef struct i8_row {
    int8_t q[K_HUGE];
    float d[K_HUGE / 32], s[K_HUGE / 32];
} i8_row;

static void i8_quantize(const float *x, int K, i8_row *a) {
    for (int b = 0; b < K / 32; b++) {
        float amax = 0.0f;
        int bad = 0;
        for (int i = 0; i < 32; i++) {
            float v = fabsf(x[32 * b + i]);
            bad |= !isfinite(v);
            if (v > amax) amax = v;
        }
        int tiny = amax < 0x1p-120f; /* 127 / amax would overflow: zeros */
        float d = bad ? NAN : tiny ? 0.0f : amax / 127.0f;
        float id = bad || tiny ? 0.0f : 127.0f / amax;
        int sum = 0;
        for (int i = 0; i < 32; i++) {
            int q = bad ? 0 : (int)nearbyintf(x[32 * b + i] * id);
            a->q[32 * b + i] = (int8_t)q;
            sum += q;
        }
        a->d[b] = d;
        a->s[b] = d * (float)sum;
    }
}

/* Output for weight row wrow (t: 0 Q8_0, 1 Q4_0, 2 Q4_1) and activations a. */
static float i8_dot(int t, const uint8_t *wrow, int K, const i8_row *a) {
    float acc = 0.0f, ms = 0.0f;
    for (int b = 0; b < K / 32; b++) {
        int wq[32];
        float dw, m = 0.0f;
        if (t == 0) {
            const kipp_block_q8_0 *blk = (const kipp_block_q8_0 *)wrow + b;
            dw = kipp_fp16_to_f32(blk->d);
            for (int i = 0; i < 32; i++) wq[i] = blk->qs[i];
        } else {
            const uint8_t *qs;
            if (t == 1) {
                const kipp_block_q4_0 *blk = (const kipp_block_q4_0 *)wrow + b;
                dw = kipp_fp16_to_f32(blk->d);
                qs = blk->qs;
            } else {
                const kipp_block_q4_1 *blk = (const kipp_block_q4_1 *)wrow + b;
                dw = kipp_fp16_to_f32(blk->d);
                m = kipp_fp16_to_f32(blk->m);
                qs = blk->qs;
            }
            for (int i = 0; i < 16; i++) {
                wq[i] = (qs[i] & 15) - (t == 1 ? 8 : 0);
                wq[i + 16] = (qs[i] >> 4) - (t == 1 ? 8 : 0);
            }
        }
        int p = 0;
        for (int i = 0; i < 32; i++) p += wq[i] * a->q[32 * b + i];
        acc = fmaf((float)p, dw * a->d[b], acc);
        if (t == 2) ms = fmaf(m, a->s[b], ms);
    }
    return t == 2 ? acc + ms : acc;
}

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
    static i8_row xi8[MMAX], hot8[MMAX];
    for (int r = 0; r < MMAX; r++) {
        for (int i = 0; i < K; i++) x[r * K + i] = uni() * (1.0f + (float)r);
        if (r == 2) /* a block of zeros (d_x = 0), a block with one value, a
                     * block of subnormals and one just above 2^-120 */
            for (int i = 0; i < 128 && i < K; i++)
                x[r * K + i] = i < 32 ? 0.0f : i < 64 ? (i == 40 ? -3.0f : 0.0f)
                             : i < 96 ? uni() * 0x1p-140f : uni() * 0x1p-119f;
        kern->pack_act(x + r * K, K, act + r * stride);
        /* The reference multiplies what the tier multiplies: on a tier that
         * rounds activations to BF16 (RNE), the rounded values; on avx2i8
         * and avx512i8 the int8 values times their block's scale. */
        if (kern->act_bf16)
            for (int i = 0; i < K; i++) x[r * K + i] = kipp_bf16_to_f32(kipp_f32_to_bf16(x[r * K + i]));
        if (kern->act_i8) {
            i8_quantize(x + r * K, K, &xi8[r]);
            for (int i = 0; i < K; i++) x[r * K + i] = xi8[r].d[i / 32] * xi8[r].q[i];
        }
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
        /* avx2i8, avx512i8: bitwise the scalar definition of their numerics. */
        size_t row_bytes = types[t].block * (K / 32);
        if (kern->act_i8) {
            int off = 0;
            for (int r = 0; r < MMAX; r++)
                for (int n = 0; n < N; n++) {
                    float want = i8_dot(t, (const uint8_t *)wq + n * row_bytes, K, &xi8[r]);
                    off += memcmp(&want, &ys[r][n], 4) != 0;
                }
            CHECKF(off == 0, "%s %s: %d outputs differ from the int8 reference's bits",
                   kern->name, types[t].name, off);
        }
        /* Every M, and odd column ranges: bitwise the same outputs -- in
         * the tier's table and in its PF_SEQ twin (another decode prefetch
         * and tile height; kernels_blocked.h few_rows streams 2..8 rows
         * like decode in both, avx2i8's matmul_q 2..32). */
        int diffs[2] = {0, 0};
        for (int tw = 0; tw < 2; tw++) {
            const kipp_cpu_kernels *tk = tw ? kern->seq_twin : kern;
            if (!tk) continue;
            kipp_cpu_matmul_q_fn mt = pick(tk, t);
            for (int m = 1; m <= MMAX; m++) {
                mt(wq, K, 0, N, act, stride, (uint32_t)m, pyb);
                mt(wq, K, 3, 19, act, stride, (uint32_t)m, pyc);
                mt(wq, K, 19, N, act, stride, (uint32_t)m, pyc);
                for (int r = 0; r < m; r++)
                    for (int n = 0; n < N; n++)
                        diffs[tw] += memcmp(&yb[r][n], &ys[r][n], 4) != 0 ||
                                     (n >= 3 && memcmp(&yc[r][n], &ys[r][n], 4) != 0);
            }
        }
        CHECKF(diffs[0] == 0, "%s %s: %d outputs depend on M or the column range", kern->name,
               types[t].name, diffs[0]);
        CHECKF(diffs[1] == 0, "%s %s: %d outputs differ with PF_SEQ", kern->name, types[t].name,
               diffs[1]);
        /* One-hot activations read single weights back: the tiers claim
         * to multiply exactly the oracle's decoded weights (kernels_simd.h),
         * and w * 1 plus zeros is exact, so output (r, n) must equal the
         * oracle's weight (n, j_r) -- for columns spread over a block, in
         * the first, a middle and the last block, through prefill's path
         * (M = MMAX) and decode's (M = 1). */
        static const int offs[MMAX] = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11,
                                       12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23,
                                       24, 25, 26, 27, 28, 29, 30, 31, 3,  16, 29};
        const int block0[3] = {0, 32 * (K / 64), K - 32};
        int wrong = 0;
        for (int p = 0; p < 3; p++) {
            float *onehot = calloc((size_t)K, sizeof(float));
            for (int r = 0; r < MMAX; r++) {
                onehot[block0[p] + offs[r]] = 1.0f;
                kern->pack_act(onehot, K, hot + r * stride);
                if (kern->act_i8) i8_quantize(onehot, K, &hot8[r]);
                onehot[block0[p] + offs[r]] = 0.0f;
            }
            free(onehot);
            mm(wq, K, 0, N, hot, stride, MMAX, pyb);
            for (int r = 0; r < MMAX; r++) {
                mm(wq, K, 0, N, hot + r * stride, stride, 1, pyc);
                for (int n = 0; n < N; n++) {
                    /* avx2i8: 127 times the weight's integer, times d_w and
                     * d_x = 1/127 (rounded): its reference's bits */
                    float want = kern->act_i8
                                     ? i8_dot(t, (const uint8_t *)wq + n * row_bytes, K, &hot8[r])
                                     : wd[n * K + block0[p] + offs[r]];
                    wrong += !(yb[r][n] == want) || !(yc[0][n] == want);
                }
            }
        }
        CHECKF(wrong == 0, "%s %s: %d one-hot outputs differ from the oracle's decoded weight",
               kern->name, types[t].name, wrong);
        fprintf(stderr, "  %-10s %s K=%d: worst relative error %.2e, batch invariant %s\n",
                kern->name, types[t].name, K, worst, diffs[0] || diffs[1] ? "NO" : "yes");
        free(wq);
    }
    free(wf);
    free(wd);
    free(x);
    free(act);
    free(hot);
}

/* An integer tier at K_HUGE (past what its prefill can repack: row-major
 * tiles for every row; 9 weight rows) and at K_ONE_GROUP (17 rows: a
 * repacked group of 16 or two of 8, one a round, then a row-major row):
 * 6 activation rows (blocked) and 1 (decode), each output bitwise its
 * int8 reference. */
static void check_i8_long_k(const kipp_cpu_kernels *kern, int K, int NH) {
    enum { MH = 6, NH_MAX = 17 };
    assert(K <= K_HUGE && NH <= NH_MAX);
    size_t stride = kern->act_bytes(K);
    float *x = malloc(sizeof(float) * K), *wf = malloc(sizeof(float) * K * NH);
    uint8_t *act = aligned_alloc(64, stride * MH);
    static i8_row xh[MH];
    float yh[MH][NH_MAX], *py[MH];
    for (int r = 0; r < MH; r++) {
        for (int i = 0; i < K; i++) x[i] = uni() * (1.0f + (float)r);
        kern->pack_act(x, K, act + r * stride);
        i8_quantize(x, K, &xh[r]);
        py[r] = yh[r];
    }
    for (int i = 0; i < K * NH; i++) wf[i] = uni() + (i % 3 == 0 ? 0.5f : 0.0f);
    const size_t blocks[3] = {sizeof(kipp_block_q8_0), sizeof(kipp_block_q4_0),
                              sizeof(kipp_block_q4_1)};
    void (*const quant[3])(const float *, size_t, void *) = {q8q, q40q, q41q};
    for (int t = 0; t < 3; t++) {
        size_t row_bytes = blocks[t] * (K / 32);
        uint8_t *wq = malloc(row_bytes * NH);
        quant[t](wf, (size_t)K * NH, wq);
        int off = 0;
        for (int pass = 0; pass < 2; pass++) {
            pick(kern, t)(wq, K, 0, NH, act, stride, pass ? 1 : MH, py);
            for (int r = 0; r < (pass ? 1 : MH); r++)
                for (int n = 0; n < NH; n++) {
                    float want = i8_dot(t, wq + n * row_bytes, K, &xh[r]);
                    off += memcmp(&want, &yh[r][n], 4) != 0;
                }
        }
        CHECKF(off == 0, "%s t=%d K=%d: %d outputs differ from the int8 reference's bits",
               kern->name, t, K, off);
        free(wq);
    }
    free(x);
    free(wf);
    free(act);
}

/* Many activation rows of long weight rows: the FP32 tiers' prefill takes
 * rows whose whole K does not fit its decode buffer 32 at a time, a panel
 * of K at a time, against 64 activation rows at a time (kernels_blocked.h
 * q_panels; avx512bf16 from K = 6,145). MP = 150 rows are three groups
 * (64, 64, 22) over K_LONG's three FP32 panels (3,072, 3,072, 2,080) and
 * N = 45 weight rows (32 + 13): every output must be bitwise the one
 * decode gives its row alone (M = 1), in the whole column range and in
 * [3, 19) + [19, 45) (check_matmul holds decode to the double-precision
 * sums, the one-hot read-back to the oracle's weights). */
enum { MP = 150 };
static void check_panels(const kipp_cpu_kernels *kern) {
    const int K = K_LONG;
    size_t stride = kern->act_bytes(K);
    float *x = malloc(sizeof(float) * K), *wf = malloc(sizeof(float) * K * N);
    uint8_t *act = aligned_alloc(64, stride * MP);
    static float ym[MP][N], yc[MP][N], y1[N];
    float *pm[MP], *pc[MP], *p1[1] = {y1};
    for (int r = 0; r < MP; r++) {
        for (int i = 0; i < K; i++) x[i] = uni() * (1.0f + (float)(r % 7));
        kern->pack_act(x, K, act + r * stride);
        pm[r] = ym[r], pc[r] = yc[r];
    }
    for (int i = 0; i < K * N; i++) wf[i] = uni() + (i % 3 == 0 ? 0.5f : 0.0f);
    const size_t blocks[3] = {sizeof(kipp_block_q8_0), sizeof(kipp_block_q4_0),
                              sizeof(kipp_block_q4_1)};
    void (*const quant[3])(const float *, size_t, void *) = {q8q, q40q, q41q};
    for (int t = 0; t < 3; t++) {
        uint8_t *wq = malloc(blocks[t] * (K / 32) * N);
        quant[t](wf, (size_t)K * N, wq);
        kipp_cpu_matmul_q_fn mm = pick(kern, t);
        mm(wq, K, 0, N, act, stride, MP, pm);
        mm(wq, K, 3, 19, act, stride, MP, pc);
        mm(wq, K, 19, N, act, stride, MP, pc);
        int off = 0;
        for (int r = 0; r < MP; r++) {
            mm(wq, K, 0, N, act + r * stride, stride, 1, p1);
            for (int n = 0; n < N; n++)
                off += memcmp(&y1[n], &ym[r][n], 4) != 0 ||
                       (n >= 3 && memcmp(&y1[n], &yc[r][n], 4) != 0);
        }
        CHECKF(off == 0, "%s t=%d K=%d M=%d: %d outputs differ from decode's bits", kern->name,
               t, K, MP, off);
        free(wq);
    }
    free(x);
    free(wf);
    free(act);
}

/* Attention over a Q8_0 cache, per tier: 2 query heads on KV head 5 of 8,
 * 70 positions in 3 blocks placed by a scrambled table.
 *  (a) against a double-precision softmax over the decoded K/V;
 *  (b) rows at consecutive positions in one call == one call per row,
 *      bitwise (decode and prefill share the numerics);
 *  (c) bitwise the tier's BF16-cache attention on the same values: with
 *      power-of-two scales every d * q is a BF16 value (7 significant
 *      bits), so the two caches hold the same numbers and the Q8_0 path
 *      must run exactly the BF16 path's steps on them (the direct decode
 *      path included). */
enum { AQ_G = 2, AQ_NPOS = 70, AQ_NB = 3, AQ_ROW = 8 * 4, AQ_KVH = 5 };

/* K/V of one position and head as Q8_0 blocks, their decoded values in
 * kd/vd; pow2: power-of-two scales and random q (BF16-exact values). */
static void fill_q8_row(kipp_block_q8_0 *kb, kipp_block_q8_0 *vb, float *kd, float *vd,
                        int pow2) {
    if (!pow2) {
        float kh[128], vh[128];
        for (int i = 0; i < 128; i++) kh[i] = uni() * 3.0f, vh[i] = uni();
        kipp_quantize_q8_0(kh, 128, kb);
        kipp_quantize_q8_0(vh, 128, vb);
    } else {
        for (int b = 0; b < 4; b++) {
            /* |k| < 2, |v| < 1/8: scores and outputs of the other case's size */
            kb[b].d = kipp_f32_to_fp16(ldexpf(1.0f, -10 + (int)((uni() + 1.0f) * 2.5f)));
            vb[b].d = kipp_f32_to_fp16(ldexpf(1.0f, -12 + (int)((uni() + 1.0f) * 1.5f)));
            for (int i = 0; i < 32; i++) {
                kb[b].qs[i] = (int8_t)(uni() * 127.0f);
                vb[b].qs[i] = (int8_t)(uni() * 127.0f);
            }
        }
    }
    kipp_dequantize_q8_0(kb, 128, kd);
    kipp_dequantize_q8_0(vb, 128, vd);
}

static void check_attention(const kipp_cpu_kernels *kern, int pow2) {
    rng = pow2 ? 0x452821e638d01377ull : 0x13198a2e03707344ull;
    kipp_block_q8_0 *k = calloc((size_t)AQ_NB * 32 * AQ_ROW, sizeof *k);
    kipp_block_q8_0 *v = calloc((size_t)AQ_NB * 32 * AQ_ROW, sizeof *v);
    /* The BF16 cache's layout: [block][8 heads][32][128]. */
    uint16_t *kh16 = calloc((size_t)AQ_NB * 32 * 1024, sizeof *kh16);
    uint16_t *vh16 = calloc((size_t)AQ_NB * 32 * 1024, sizeof *vh16);
    const uint32_t table[AQ_NB] = {2, 0, 1};
    const kipp_block_q8_0 *kq[AQ_NB], *vq[AQ_NB];
    const uint16_t *kb[AQ_NB], *vb[AQ_NB];
    for (int b = 0; b < AQ_NB; b++) {
        kq[b] = k + (size_t)table[b] * 32 * AQ_ROW + AQ_KVH * 4;
        vq[b] = v + (size_t)table[b] * 32 * AQ_ROW + AQ_KVH * 4;
        kb[b] = kh16 + ((size_t)table[b] * 8 + AQ_KVH) * 32 * 128;
        vb[b] = vh16 + ((size_t)table[b] * 8 + AQ_KVH) * 32 * 128;
    }
    const kipp_cpu_kv_head_q8 hq = {kq, vq, AQ_ROW};
    const kipp_cpu_kv_head h16 = {kb, vb, 128};
    static double kd[AQ_NPOS][128], vd[AQ_NPOS][128];
    int not_bf16 = 0;
    for (int p = 0; p < AQ_NPOS; p++) {
        float kf[128], vf[128];
        fill_q8_row((kipp_block_q8_0 *)kq[p / 32] + (size_t)(p % 32) * AQ_ROW,
                    (kipp_block_q8_0 *)vq[p / 32] + (size_t)(p % 32) * AQ_ROW,
                    kf, vf, pow2);
        for (int i = 0; i < 128; i++) {
            kd[p][i] = kf[i];
            vd[p][i] = vf[i];
            uint16_t kk = kipp_f32_to_bf16(kf[i]), vv = kipp_f32_to_bf16(vf[i]);
            not_bf16 += kipp_bf16_to_f32(kk) != kf[i] || kipp_bf16_to_f32(vv) != vf[i];
            ((uint16_t *)kb[p / 32])[(p % 32) * 128 + i] = kk;
            ((uint16_t *)vb[p / 32])[(p % 32) * 128 + i] = vv;
        }
    }
    if (pow2) CHECKF(not_bf16 == 0, "attention q8_0: %d test values not BF16-exact", not_bf16);
    enum { NQ = AQ_NPOS };
    static float q[NQ * AQ_G * 128], rows[NQ * AQ_G * 128], one[AQ_G * 128], ref16[AQ_G * 128];
    static float scratch[KIPP_CPU_ATT_SCRATCH(NQ, AQ_G)];
    for (int i = 0; i < NQ * AQ_G * 128; i++) q[i] = uni() * 2.0f;
    const float scale = 1.0f / sqrtf(128.0f);
    double worst = 0;
    int bad_rows = 0, bad_bf16 = 0;
    /* Rows at 0..69 in one call (a prefill chunk), then one call each. */
    kern->attention_q8_0(q, AQ_G * 128, NQ, AQ_G, 0, &hq, scale, rows, AQ_G * 128, scratch);
    for (uint32_t r = 0; r < NQ; r++) {
        const float *qr = q + (size_t)r * AQ_G * 128;
        kern->attention_q8_0(qr, AQ_G * 128, 1, AQ_G, r, &hq, scale, one, AQ_G * 128, scratch);
        bad_rows += memcmp(one, rows + (size_t)r * AQ_G * 128, sizeof one) != 0;
        if (pow2) {
            kern->attention(qr, AQ_G * 128, 1, AQ_G, r, &h16, scale, ref16, AQ_G * 128, scratch);
            bad_bf16 += memcmp(one, ref16, sizeof one) != 0;
        }
        for (int h = 0; h < AQ_G; h++) {
            double sc[AQ_NPOS], mx = -INFINITY, sum = 0;
            for (uint32_t p = 0; p <= r; p++) {
                sc[p] = 0;
                for (int i = 0; i < 128; i++) sc[p] += (double)qr[h * 128 + i] * kd[p][i];
                sc[p] *= scale;
                mx = sc[p] > mx ? sc[p] : mx;
            }
            for (uint32_t p = 0; p <= r; p++) sum += sc[p] = exp(sc[p] - mx);
            for (int i = 0; i < 128; i++) {
                double o = 0;
                for (uint32_t p = 0; p <= r; p++) o += sc[p] / sum * vd[p][i];
                double e = fabs(o - one[h * 128 + i]);
                worst = e > worst ? e : worst;
            }
        }
    }
    /* The same rows as a chunk starting mid-cache (positions 40..69). */
    kern->attention_q8_0(q + 40 * AQ_G * 128, AQ_G * 128, NQ - 40, AQ_G, 40, &hq, scale, rows,
                         AQ_G * 128, scratch);
    for (uint32_t r = 40; r < NQ; r++) {
        kern->attention_q8_0(q + (size_t)r * AQ_G * 128, AQ_G * 128, 1, AQ_G, r, &hq, scale, one,
                             AQ_G * 128, scratch);
        bad_rows += memcmp(one, rows + (size_t)(r - 40) * AQ_G * 128, sizeof one) != 0;
    }
    fprintf(stderr, "  %-10s attention over Q8_0 KV (%s scales): worst |error| %.2e%s\n",
            kern->name, pow2 ? "power-of-two" : "quantizer's", worst,
            pow2 ? (bad_bf16 ? ", NOT the BF16 path's bits" : ", the BF16 path's bits") : "");
    CHECKF(worst <= ATTENTION_Q8_TOL, "%s attention q8_0: worst error %g", kern->name, worst);
    CHECKF(bad_rows == 0, "%s attention q8_0: %d rows of a multi-row call differ from one-row "
           "calls", kern->name, bad_rows);
    CHECKF(bad_bf16 == 0, "%s attention q8_0: %d rows differ from the BF16 cache's attention "
           "on the same values", kern->name, bad_bf16);
    free(k);
    free(v);
    free(kh16);
    free(vh16);
}

/* Two tables that claim the same bits (avx512 with and without the
 * AVX512_VBMI Q8_0 decoder): Q8_0 matmuls at M = 1 (decode), 3 (a few
 * rows), MMAX (blocked), in each table and its PF_SEQ twin, on weights
 * with large, ordinary, subnormal and negative scales and an all-zero row,
 * must agree bitwise. */
static void check_same_bits(const kipp_cpu_kernels *a, const kipp_cpu_kernels *b) {
    const int K = K_SHORT;
    size_t stride = a->act_bytes(K);
    float *x = malloc(sizeof(float) * K), *wf = malloc(sizeof(float) * K * N);
    uint8_t *act = aligned_alloc(64, stride * MMAX);
    static float ya[MMAX][N], yb[MMAX][N];
    float *pa[MMAX], *pb[MMAX];
    for (int r = 0; r < MMAX; r++) {
        for (int i = 0; i < K; i++) x[i] = uni() * (1.0f + (float)(r % 5));
        a->pack_act(x, K, act + r * stride);
        pa[r] = ya[r], pb[r] = yb[r];
    }
    for (int n = 0; n < N; n++)
        for (int i = 0; i < K; i++)
            wf[n * K + i] = n == 7 ? 0.0f : uni() * powf(2.0f, n == 5 ? -20.0f : (float)(n % 11) - 5);
    kipp_block_q8_0 *wq = malloc(sizeof(kipp_block_q8_0) * (K / 32) * N);
    kipp_quantize_q8_0(wf, (size_t)K * N, wq);
    for (int i = 0; i < (K / 32) * N; i += 7) /* negative scales: -d and -q, the same weights */
        if (i / (K / 32) != 7) {
            wq[i].d ^= 0x8000;
            for (int j = 0; j < 32; j++) wq[i].qs[j] = (int8_t)-wq[i].qs[j];
        }
    const int ms[3] = {1, 3, MMAX};
    int off = 0;
    for (int tw = 0; tw < 2; tw++) {
        const kipp_cpu_kernels *ta = tw ? a->seq_twin : a, *tb = tw ? b->seq_twin : b;
        for (int i = 0; i < 3; i++) {
            ta->matmul_q8_0(wq, K, 0, N, act, stride, (uint32_t)ms[i], pa);
            tb->matmul_q8_0(wq, K, 0, N, act, stride, (uint32_t)ms[i], pb);
            for (int r = 0; r < ms[i]; r++) off += memcmp(ya[r], yb[r], sizeof(float) * N) != 0;
        }
    }
    CHECKF(off == 0, "%s: %d Q8_0 output rows differ between the plain and the VBMI table",
           a->name, off);
    fprintf(stderr, "  %-10s q8_0: the plain and the VBMI tables agree bitwise%s\n", a->name,
            off ? " -- NOT" : "");
    free(wq);
    free(x);
    free(wf);
    free(act);
}

int main(void) {
    for (int t = 0; t < TEST_TIER_COUNT; t++) {
        const kipp_cpu_kernels *kern = test_tier_kernels(t);
        if (!kern) continue;
        check_matmul(kern, K_SHORT);
        check_matmul(kern, K_MID);
        check_matmul(kern, K_LONG);
        check_panels(kern);
        if (kern->act_i8) check_i8_long_k(kern, K_HUGE, 9), check_i8_long_k(kern, K_ONE_GROUP, 17);
        check_attention(kern, 0);
        check_attention(kern, 1);
#if defined(__x86_64__)
        /* avx2i8 has two tables with the same bits: vpdpbusd where the
         * processor has AVX512_VNNI (dispatch hands that one out), and
         * vpmaddubsw + vpmaddwd. Both against the one reference here. */
        if (strcmp(kern->name, "avx2i8") == 0) {
            const kipp_cpu_kernels *other = kern == &kipp_cpu_kernels_avx2i8
                                                ? &kipp_cpu_kernels_avx2i8_vnni
                                                : &kipp_cpu_kernels_avx2i8;
            int vnni_here = !test_tier_lacks("avx512") && test_has_avx512vnni();
            CHECKF((kern == &kipp_cpu_kernels_avx2i8_vnni) == vnni_here,
                   "avx2i8: dispatch hands out the %s table on a processor %s AVX512_VNNI",
                   kern == &kipp_cpu_kernels_avx2i8 ? "plain" : "vpdpbusd",
                   vnni_here ? "with" : "without");
            if (other == &kipp_cpu_kernels_avx2i8 || vnni_here) {
                fprintf(stderr, "tier avx2i8 (%s table):\n",
                        other == &kipp_cpu_kernels_avx2i8 ? "plain" : "vpdpbusd");
                check_matmul(other, K_SHORT);
                check_matmul(other, K_LONG);
                check_i8_long_k(other, K_HUGE, 9);
                check_i8_long_k(other, K_ONE_GROUP, 17);
            } else {
                test_skip_part(TEST_SKIP_MACHINE, "avx2i8 vpdpbusd table", "cpu lacks avx512_vnni");
            }
        }
        /* avx512 likewise: the AVX512_VBMI table (dispatch hands it out
         * where the processor has it) and the plain one. */
        if (strcmp(kern->name, "avx512") == 0) {
            int vbmi_here = test_has_avx512vbmi();
            const kipp_cpu_kernels *other = kern == &kipp_cpu_kernels_avx512
                                                ? &kipp_cpu_kernels_avx512_vbmi
                                                : &kipp_cpu_kernels_avx512;
            CHECKF((kern == &kipp_cpu_kernels_avx512_vbmi) == vbmi_here,
                   "avx512: dispatch hands out the %s table on a processor %s AVX512_VBMI",
                   kern == &kipp_cpu_kernels_avx512 ? "plain" : "VBMI",
                   vbmi_here ? "with" : "without");
            if (vbmi_here) {
                fprintf(stderr, "tier avx512 (%s table):\n",
                        other == &kipp_cpu_kernels_avx512 ? "plain" : "VBMI");
                check_matmul(other, K_SHORT);
                check_matmul(other, K_MID);
                check_matmul(other, K_LONG);
                check_panels(other);
                check_attention(other, 0);
                check_attention(other, 1);
                check_same_bits(&kipp_cpu_kernels_avx512, &kipp_cpu_kernels_avx512_vbmi);
            } else {
                test_skip_part(TEST_SKIP_MACHINE, "avx512 VBMI table", "cpu lacks avx512_vbmi");
            }
        }
#endif
    }
    return test_finish("test_cpu_qkernels");
}
