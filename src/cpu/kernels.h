/* The cpu backend's kernel table: one per instruction-set tier (generic C,
 * AVX2+FMA, AVX-512+BF16), chosen once at model creation from CPUID, or
 * forced lower through kipp_model_options.cpu_isa (the CLI: KIPP_CPU_ISA).
 *
 * BATCH INVARIANCE. Every kernel computes each output element with an
 * instruction sequence fixed by the weight shape alone:
 *  - matmul: output (m, n) = one accumulator chain over K in fixed chunks
 *    (tier's lane width), then one fixed lane-to-scalar tree. The
 *    matrix-vector path (M = 1) and the blocked matrix-matrix path (M > 1)
 *    run exactly this sequence per (row, column) pair; the blocked path only
 *    reuses loaded weights across activation rows. Callers split output
 *    columns (weight rows) between threads, never K.
 *  - attention: one query against positions [0, n_pos) in 32-position KV
 *    blocks, in position order, with an online softmax per block; nothing
 *    depends on what else is in the batch.
 *  - norms and elementwise ops work on one row at a time.
 * Tiers differ from each other (lane width, lane order, fold); each is
 * invariant in itself. */
#ifndef KIPP_CPU_KERNELS_H
#define KIPP_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "core/quant.h"
#include "kipp.h"

/* Every matmul K is a multiple of this (all family dimensions are). */
#define KIPP_CPU_K_ALIGN 32
/* Positions per KV block: the attention's online-softmax granule. */
#define KIPP_CPU_ATT_BLOCK 32

/* y[m][n] for m in [0, M), n in [n0, n1):
 *   dot(W row n, activation row m).
 * w: BF16 [N][K] (row stride K). x: M packed activation rows (tier format,
 * see pack_act), x_stride bytes apart. y[m] points at output row m (index
 * n is written at y[m][n]). */
typedef void (*kipp_cpu_matmul_fn)(const uint16_t *w, uint32_t k, uint32_t n0,
                                   uint32_t n1, const void *x, size_t x_stride,
                                   uint32_t m, float *const *y);

/* One query token against one KV head's cached positions [0, n_pos).
 * q: [g][128] FP32 (normed, rotated; not yet scaled). k, v: the layer's
 * BF16 store [physical position][8][128], already offset to this KV head;
 * block_table maps logical 32-position block -> physical block. out:
 * [g][128]. scratch: at least g * 32 floats. */
typedef void (*kipp_cpu_attention_fn)(const float *q, uint32_t g,
                                      const uint16_t *k, const uint16_t *v,
                                      const uint32_t *block_table,
                                      uint32_t n_pos, float scale, float *out,
                                      float *scratch);

/* The same contract for quantized weights: w is [N] rows of K / 32 ggml
 * blocks (Q8_0, Q4_0 or Q4_1, core/quant.h), x the same packed activations
 * the BF16 matmul reads. */
typedef void (*kipp_cpu_matmul_q_fn)(const void *w, uint32_t k, uint32_t n0,
                                     uint32_t n1, const void *x, size_t x_stride,
                                     uint32_t m, float *const *y);

/* attention over a Q8_0 KV cache: k, v are the layer's block store
 * [physical position][8][4] Q8_0 blocks, already offset to this KV head;
 * everything else as kipp_cpu_attention_fn. One portable implementation
 * (kernels_generic.c) serves every tier. */
void kipp_cpu_attention_q8_0(const float *q, uint32_t g, const kipp_block_q8_0 *k,
                             const kipp_block_q8_0 *v, const uint32_t *block_table,
                             uint32_t n_pos, float scale, float *out, float *scratch);

typedef struct kipp_cpu_kernels {
    const char *name; /* "generic", "avx2", "avx512" */
    /* Packed activation bytes for a row of k values (a multiple of 64). */
    size_t (*act_bytes)(uint32_t k);
    /* FP32 row -> the format this tier's BF16 matmul reads. */
    void (*pack_act)(const float *x, uint32_t k, void *dst);
    kipp_cpu_matmul_fn matmul_bf16;
    kipp_cpu_matmul_q_fn matmul_q8_0; /* q8_0 */
    kipp_cpu_matmul_q_fn matmul_q4_0; /* scale4_gs32 */
    kipp_cpu_matmul_q_fn matmul_q4_1; /* affine4_gs32 */
    /* out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i]; out may alias x. */
    void (*rmsnorm)(float *out, const float *x, const float *w, uint32_t n,
                    float eps);
    /* NEOX rotate-half RoPE on one 128-wide head: for i < 64,
     * (x[i], x[i+64]) rotated by angle with cos[i], sin[i]. */
    void (*rope)(float *x, const float *cos, const float *sin);
    /* g[i] = silu(g[i]) * u[i]. */
    void (*silu_mul)(float *g, const float *u, uint32_t n);
    kipp_cpu_attention_fn attention;
} kipp_cpu_kernels;

extern const kipp_cpu_kernels kipp_cpu_kernels_generic;
/* Defined only on x86-64 builds (weak references elsewhere). */
extern const kipp_cpu_kernels kipp_cpu_kernels_avx2;
extern const kipp_cpu_kernels kipp_cpu_kernels_avx512;

/* The tier to use: the best the processor supports (KIPP_CPU_ISA_AUTO), or
 * the one asked for. Returns NULL and writes a reason into why (why_size
 * bytes) when isa is unknown or this processor cannot run it. */
const kipp_cpu_kernels *kipp_cpu_select_kernels(kipp_cpu_isa isa, char *why, size_t why_size);
/* Tier by name if this processor can run it, else NULL (tests). */
const kipp_cpu_kernels *kipp_cpu_kernels_by_name(const char *name);

#endif
