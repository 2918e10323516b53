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

static void silu_mul(float *g, const float *u, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

static inline float dot128_bf16(const float *q, const uint16_t *k) {
    float s[LANES] = {0};
    for (int i = 0; i < 128; i += LANES)
        for (int j = 0; j < LANES; j++) s[j] += q[i + j] * kipp_bf16_to_f32(k[i + j]);
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* Online softmax over 32-position blocks in position order:
 *   per block: scores, block max, rescale the running sum and output by
 *   exp(old_max - new_max), add exp(score - new_max) * v. */
static void attention(const float *q, uint32_t g, const uint16_t *k, const uint16_t *v,
                      const uint32_t *table, uint32_t n_pos, float scale, float *out,
                      float *scratch) {
    for (uint32_t h = 0; h < g; h++) {
        const float *qh = q + (size_t)h * 128;
        float *oh = out + (size_t)h * 128;
        float *p = scratch;
        float run_max = -INFINITY, run_sum = 0.0f;
        memset(oh, 0, 128 * sizeof(float));
        for (uint32_t b0 = 0; b0 < n_pos; b0 += KIPP_CPU_ATT_BLOCK) {
            uint32_t nb = n_pos - b0 < KIPP_CPU_ATT_BLOCK ? n_pos - b0 : KIPP_CPU_ATT_BLOCK;
            size_t base = (size_t)table[b0 / KIPP_CPU_ATT_BLOCK] * KIPP_CPU_ATT_BLOCK;
            float bmax = -INFINITY;
            for (uint32_t j = 0; j < nb; j++) {
                p[j] = dot128_bf16(qh, k + (base + j) * 1024) * scale;
                if (p[j] > bmax) bmax = p[j];
            }
            float new_max = bmax > run_max ? bmax : run_max;
            float corr = expf(run_max - new_max); /* 0 on the first block */
            float bsum = 0.0f;
            for (uint32_t j = 0; j < nb; j++) {
                p[j] = expf(p[j] - new_max);
                bsum += p[j];
            }
            run_sum = run_sum * corr + bsum;
            for (int d = 0; d < 128; d++) oh[d] *= corr;
            for (uint32_t j = 0; j < nb; j++) {
                const uint16_t *vr = v + (base + j) * 1024;
                for (int d = 0; d < 128; d++) oh[d] += p[j] * kipp_bf16_to_f32(vr[d]);
            }
            run_max = new_max;
        }
        float inv = 1.0f / run_sum;
        for (int d = 0; d < 128; d++) oh[d] *= inv;
    }
}

const kipp_cpu_kernels kipp_cpu_kernels_generic = {
    .name = "generic",
    .act_bytes = act_bytes,
    .pack_act = pack_act,
    .matmul_bf16 = matmul_bf16,
    .rmsnorm = rmsnorm,
    .rope = rope,
    .silu_mul = silu_mul,
    .attention = attention,
};
