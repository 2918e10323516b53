/* Portable C kernels: the fallback tier on any processor (aarch64 too) and
 * the shape every SIMD tier follows. No ISA flags, no -ffast-math.
 *
 * Reduction order (see kernels.h): a dot product over K keeps 8 partial
 * sums, lane j taking k = j, j+8, j+16, ... in order; the lanes then fold
 * as ((0+1)+(2+3))+((4+5)+(6+7)). The compiler may vectorize across lanes
 * but may not reassociate, so these are the bits on every build. */
#include <math.h>
#include <string.h>

#include "core/common.h"
#include "cpu/kernels.h"

#define LANES 8

static size_t act_bytes(uint32_t k) {
    size_t b = (size_t)k * sizeof(float);
    return (b + 63) & ~(size_t)63;
}

static void pack_act(const float *x, uint32_t k, void *dst) {
    memcpy(dst, x, (size_t)k * sizeof(float));
}

/* GCC/Clang vector extensions: portable (SSE2, NEON or plain scalar code
 * underneath) and exactly the 8-lane arithmetic written above. */
typedef float v8f __attribute__((vector_size(32)));
typedef uint32_t v8u __attribute__((vector_size(32)));
typedef uint16_t v8h __attribute__((vector_size(16)));

/* The one dot product every (row, column) pair uses, matvec or matmat. */
static inline float dot_bf16_f32(const uint16_t *w, const float *x, uint32_t k) {
    v8f s = {0};
    for (uint32_t i = 0; i < k; i += LANES) {
        v8h h;
        v8f xv;
        memcpy(&h, w + i, sizeof h);
        memcpy(&xv, x + i, sizeof xv);
        v8u u = __builtin_convertvector(h, v8u) << 16;
        v8f wf;
        memcpy(&wf, &u, sizeof wf);
        s += wf * xv;
    }
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* Blocked: a tile of weight rows is reused across every activation row
 * while it is hot in cache; each pair still calls dot_bf16_f32. */
#define W_TILE 16
static void matmul_bf16(const uint16_t *w, uint32_t k, uint32_t n0, uint32_t n1,
                        const void *x, size_t x_stride, uint32_t m, float *const *y) {
    const char *xb = x;
    for (uint32_t nb = n0; nb < n1; nb += W_TILE) {
        uint32_t ne = nb + W_TILE < n1 ? nb + W_TILE : n1;
        for (uint32_t r = 0; r < m; r++) {
            const float *xr = (const float *)(xb + r * x_stride);
            for (uint32_t n = nb; n < ne; n++)
                y[r][n] = dot_bf16_f32(w + (size_t)n * k, xr, k);
        }
    }
}

static void rmsnorm(float *out, const float *x, const float *w, uint32_t n, float eps) {
    float s[LANES] = {0};
    for (uint32_t i = 0; i < n; i += LANES)
        for (int j = 0; j < LANES; j++) s[j] += x[i + j] * x[i + j];
    float ss = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    float inv = 1.0f / sqrtf(ss / (float)n + eps);
    for (uint32_t i = 0; i < n; i++) out[i] = x[i] * inv * w[i];
}

static void rope(float *x, const float *c, const float *s) {
    for (int i = 0; i < 64; i++) {
        float a = x[i], b = x[i + 64];
        x[i] = a * c[i] - b * s[i];
        x[i + 64] = b * c[i] + a * s[i];
    }
}

/* expf, but 0 below KIPP_CPU_EXP_MIN and for NaN, as the SIMD tiers'
 * vf_exp: no subnormal results (kernels.h). */
static inline float exp_flushed(float x) {
    return x >= KIPP_CPU_EXP_MIN ? expf(x) : 0.0f;
}

static void silu_mul(float *g, const float *u, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) g[i] = g[i] / (1.0f + exp_flushed(-g[i])) * u[i];
}

/* Attention steps (kernels_att.h has the loop nest). Online softmax over
 * 32-position blocks in position order:
 *   per block: scores, block max, rescale the running sum and output by
 *   exp(old_max - new_max), add exp(score - new_max) * v. */
typedef struct att_krow {
    float k[KIPP_HEAD_DIM];
} att_krow;

static inline void att_load_q(const float *q, float *qd) {
    memcpy(qd, q, KIPP_HEAD_DIM * sizeof(float));
}

static inline void att_widen_k(const uint16_t *k, att_krow *kw) {
    for (int i = 0; i < KIPP_HEAD_DIM; i++) kw->k[i] = kipp_bf16_to_f32(k[i]);
}

/* A Q8_0 cache row (4 blocks) as its exact values d * q. */
static inline void att_widen_q8(const kipp_block_q8_0 *row, att_krow *kw) {
    kipp_dequantize_q8_0(row, KIPP_HEAD_DIM, kw->k);
}

static inline float att_dot(const float *q, const att_krow *kw) {
    float s[LANES] = {0};
    for (int i = 0; i < KIPP_HEAD_DIM; i += LANES)
        for (int j = 0; j < LANES; j++) s[j] += q[i + j] * kw->k[i + j];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
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
        if (p[j] > bmax) bmax = p[j];
    }
    float new_max = bmax > *run_max ? bmax : *run_max;
    float corr = exp_flushed(*run_max - new_max); /* 0 on the first block */
    float bsum = 0.0f;
    for (uint32_t j = 0; j < nb; j++) {
        p[j] = exp_flushed(p[j] - new_max);
        bsum += p[j];
    }
    *run_sum = *run_sum * corr + bsum;
    for (int d = 0; d < KIPP_HEAD_DIM; d++) oh[d] *= corr;
    for (uint32_t j = 0; j < nb; j++)
        for (int d = 0; d < KIPP_HEAD_DIM; d++) oh[d] += p[j] * vw[j].k[d];
    *run_max = new_max;
}

static inline void att_store(const float *oh, float run_sum, float *out) {
    float inv = 1.0f / run_sum;
    for (int d = 0; d < KIPP_HEAD_DIM; d++) out[d] = oh[d] * inv;
}

#include "cpu/kernels_att.h"

/* ---- quantized weights: Q8_0, Q4_0 (scale4_gs32), Q4_1 (affine4_gs32) ----
 * Weights stay in their ggml blocks (core/quant.h); activations are the
 * same FP32 rows the BF16 matmul reads. Per output, in block order:
 *   s  = 8-lane sums of q_j * x_j over the block's 32 values (lane j % 8)
 *   acc += d * s                  (+ m * 8-lane sums of x_j for Q4_1)
 * then the fixed fold. q is the block's small integer (Q4_0: nibble - 8),
 * exact in FP32, so d * q is the value the oracle decodes; only the order
 * of the sums differs from the oracle. */
enum { QT_Q8_0, QT_Q4_0, QT_Q4_1 };

static inline size_t qblock_bytes(int t) {
    return t == QT_Q8_0 ? sizeof(kipp_block_q8_0)
           : t == QT_Q4_0 ? sizeof(kipp_block_q4_0) : sizeof(kipp_block_q4_1);
}

/* Block b of a row: scale d, minimum m (Q4_1 only) and q[32] as floats. */
static inline void qblock_decode(int t, const uint8_t *row, uint32_t b, float *d, float *m,
                                 float *q) {
    if (t == QT_Q8_0) {
        const kipp_block_q8_0 *blk = (const kipp_block_q8_0 *)row + b;
        *d = kipp_fp16_to_f32(blk->d);
        for (int j = 0; j < 32; j++) q[j] = (float)blk->qs[j];
    } else if (t == QT_Q4_0) {
        const kipp_block_q4_0 *blk = (const kipp_block_q4_0 *)row + b;
        *d = kipp_fp16_to_f32(blk->d);
        for (int j = 0; j < 16; j++) {
            q[j] = (float)((blk->qs[j] & 15) - 8);
            q[j + 16] = (float)((blk->qs[j] >> 4) - 8);
        }
    } else {
        const kipp_block_q4_1 *blk = (const kipp_block_q4_1 *)row + b;
        *d = kipp_fp16_to_f32(blk->d);
        *m = kipp_fp16_to_f32(blk->m);
        for (int j = 0; j < 16; j++) {
            q[j] = (float)(blk->qs[j] & 15);
            q[j + 16] = (float)(blk->qs[j] >> 4);
        }
    }
}

static inline __attribute__((always_inline)) float dot_q_f32(int t, const uint8_t *row,
                                                             const float *x, uint32_t k) {
    v8f acc = {0};
    for (uint32_t b = 0; b < k / 32; b++) {
        float d, m = 0.0f, q[32];
        qblock_decode(t, row, b, &d, &m, q);
        v8f s = {0}, xs = {0};
        for (int c = 0; c < 4; c++) {
            v8f qv, xv;
            memcpy(&qv, q + 8 * c, sizeof qv);
            memcpy(&xv, x + 32 * b + 8 * c, sizeof xv);
            s += qv * xv;
            if (t == QT_Q4_1) xs += xv;
        }
        acc += d * s;
        if (t == QT_Q4_1) acc += m * xs;
    }
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

static inline __attribute__((always_inline)) void matmul_q(int t, const void *w, uint32_t k,
                                                           uint32_t n0, uint32_t n1,
                                                           const void *x, size_t x_stride,
                                                           uint32_t m, float *const *y) {
    const char *xb = x;
    size_t row_bytes = (size_t)(k / 32) * qblock_bytes(t);
    for (uint32_t nb = n0; nb < n1; nb += W_TILE) {
        uint32_t ne = nb + W_TILE < n1 ? nb + W_TILE : n1;
        for (uint32_t r = 0; r < m; r++) {
            const float *xr = (const float *)(xb + r * x_stride);
            for (uint32_t n = nb; n < ne; n++)
                y[r][n] = dot_q_f32(t, (const uint8_t *)w + (size_t)n * row_bytes, xr, k);
        }
    }
}

static void matmul_q8_0(const void *w, uint32_t k, uint32_t n0, uint32_t n1, const void *x,
                        size_t x_stride, uint32_t m, float *const *y) {
    matmul_q(QT_Q8_0, w, k, n0, n1, x, x_stride, m, y);
}
static void matmul_q4_0(const void *w, uint32_t k, uint32_t n0, uint32_t n1, const void *x,
                        size_t x_stride, uint32_t m, float *const *y) {
    matmul_q(QT_Q4_0, w, k, n0, n1, x, x_stride, m, y);
}
static void matmul_q4_1(const void *w, uint32_t k, uint32_t n0, uint32_t n1, const void *x,
                        size_t x_stride, uint32_t m, float *const *y) {
    matmul_q(QT_Q4_1, w, k, n0, n1, x, x_stride, m, y);
}

const kipp_cpu_kernels kipp_cpu_kernels_generic = {
    .name = "generic",
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
    .attention_q8_0 = attention_q8_0,
};
