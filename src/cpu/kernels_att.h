/* The attention loop nest, written once for every tier: each tier's file
 * defines the per-(row, head) steps below as static inline functions
 * (compiled with that file's ISA flags) and then includes this file, which
 * defines `attention` (kipp_cpu_attention_fn, over the BF16 cache) and
 * `attention_q8_0` (kipp_cpu_attention_q8_fn, over the Q8_0 cache: the same
 * nest and steps on rows widened by att_widen_q8).
 *
 *   att_krow                    a K row widened for this tier (registers)
 *   att_load_q(q, qd)           one head's 128 query values -> tier layout
 *   att_widen_k(k, &kw)         one K (or V) row (128 BF16) -> att_krow
 *   att_widen_q8(k, &kw)        one Q8_0-cache row (4 blocks) -> att_krow,
 *                               its exact values in att_widen_k's layout
 *   att_dots(qd, kw, n, p)      raw q . k (unscaled) against kw[0..n) into
 *                               p[0..n); may write p up to 16 past n and
 *                               read kw rows up to there (zero-filled)
 *   att_block(p, nb, scale, &max, &sum, od, vw)
 *                               one block of the online softmax for one
 *                               (row, head): p[0..nb) holds raw scores; scale
 *                               them, update max and sum, rescale od and add
 *                               p_j * v_j for j < nb in position order (V
 *                               rows widened by att_widen_k, like K)
 *   att_store(od, sum, out)     out = od / sum, back in value order
 *   att_block_pair(...)         optional (ATT_HAS_PAIR): att_block for two
 *                               query heads of one row, each running
 *                               att_block's steps unchanged (same bits)
 *   att_dots_multi(qd, kw, n, p, ps)
 *                               optional (ATT_MULTI): att_dots for
 *                               ATT_MULTI consecutive (row, head) units at
 *                               once (queries D apart, scores ps apart),
 *                               each score's steps unchanged (same bits);
 *                               may write p up to 4 past n
 *
 * Why this shape. In a prefill chunk, every query row of a session reads
 * the same earlier K/V. Row by row, each would re-read (and re-widen) every
 * block; here a block is loaded once and used by all rows of the call while
 * it sits in L1 (32 K rows widened, 16 KiB at FP32; then the 32 V rows).
 * A (row, head) then takes its scores for the whole block with its query
 * loaded once (an earlier version went position by position over every
 * row, re-reading each query from L2 for every position). Blocks go in position
 * order, and within a block each (row, head) runs exactly the steps a
 * single-row call runs (its dots, then the softmax block), in the same order, so a row's bits do not depend
 * on n_q, pos0 or its neighbours -- decode (n_q = 1) and prefill share the
 * numerics. Causality: row i sees positions up to pos0 + i, so in the last
 * blocks fewer rows take part and each row's final block is partial. */
#ifndef KIPP_CPU_KERNELS_ATT_H
#define KIPP_CPU_KERNELS_ATT_H

#include <math.h>

#include "cpu/kernels.h"

/* Rows [0, n) of the K (v = 0) or V (v = 1) block holding position b0,
 * widened into kw, from the BF16 cache (bf) or the Q8_0 cache (q8; the
 * other is NULL); the same rows of the block ATT_PF_BLOCKS on (if any
 * before n_last) requested as they go. A Q8_0 row widens to its exact
 * values d * q (an FP16 scale's 11 significant bits times an 8-bit q fit
 * FP32's 24), in the layout a BF16 row widens to, so both caches run the
 * same steps on what they hold. */
static inline __attribute__((always_inline)) void widen_block(const kipp_cpu_kv_head *bf,
                                                              const kipp_cpu_kv_head_q8 *q8,
                                                              int v, uint32_t b0, uint32_t n_last,
                                                              uint32_t n, att_krow *kw) {
    const uint32_t b = b0 / KIPP_CPU_ATT_BLOCK;
    if (q8) { /* att_prefetch_block's choice of block, for Q8_0 rows */
        const int more = b0 + ATT_PF_BLOCKS * KIPP_CPU_ATT_BLOCK < n_last;
        const kipp_block_q8_0 *const *blocks = v ? q8->v_blocks : q8->k_blocks;
        const kipp_block_q8_0 *blk = blocks[b], *next = more ? blocks[b + ATT_PF_BLOCKS] : NULL;
        for (uint32_t j = 0; j < n; j++) {
            if (next) att_prefetch_qrow(next + j * q8->pos_stride);
            att_widen_q8(blk + j * q8->pos_stride, &kw[j]);
        }
        return;
    }
    const uint16_t *const *blocks = v ? bf->v_blocks : bf->k_blocks;
    const uint16_t *blk = blocks[b], *next = att_prefetch_block(blocks, b0, n_last);
    for (uint32_t j = 0; j < n; j++) {
        if (next) att_prefetch_row(next + j * bf->pos_stride);
        att_widen_k(blk + j * bf->pos_stride, &kw[j]);
    }
}

/* The loop nest over either cache (one of bf, q8 is NULL; each wrapper
 * below passes a constant, so each gets its own code). */
static inline __attribute__((always_inline)) void
attention_nest(const float *q, size_t q_stride, uint32_t n_q, uint32_t g, uint32_t pos0,
               const kipp_cpu_kv_head *bf, const kipp_cpu_kv_head_q8 *q8, float scale,
               float *out, size_t out_stride, float *scratch) {
    enum { D = KIPP_HEAD_DIM, B = KIPP_CPU_ATT_BLOCK };
    const size_t units = (size_t)n_q * g; /* (row, head) pairs, row-major */
    /* 64-byte alignment for the tiers' vector loads of qd / od. */
    float *qd = (float *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    float *od = qd + units * D;
    float *p = od + units * D;
    float *run_max = p + units * B, *run_sum = run_max + units;
    for (uint32_t i = 0; i < n_q; i++)
        for (uint32_t h = 0; h < g; h++) {
            size_t u = (size_t)i * g + h;
            att_load_q(q + i * q_stride + (size_t)h * D, qd + u * D);
            memset(od + u * D, 0, D * sizeof(float));
            run_max[u] = -INFINITY;
            run_sum[u] = 0.0f;
        }
    const uint32_t n_last = pos0 + n_q; /* positions the last row sees */
#ifdef ATT_HAS_DIRECT
    if (n_q == 1 && bf) { /* decode: nothing to share a widened block with but g heads */
        const kipp_cpu_kv_head *kv = bf;
        const size_t stride = kv->pos_stride;
        for (uint32_t b0 = 0; b0 < n_last; b0 += B) {
            const uint16_t *kb = kv->k_blocks[b0 / B], *vb = kv->v_blocks[b0 / B];
            uint32_t nb = n_last - b0 < B ? n_last - b0 : B;
            /* The block ATT_PF_BLOCKS on, requested a row at a time as this
             * one is read. */
            const uint16_t *kn = att_prefetch_block(kv->k_blocks, b0, n_last);
            const uint16_t *vn = att_prefetch_block(kv->v_blocks, b0, n_last);
            uint32_t h = 0;
            for (; h + 2 <= g; h += 2) {
                att_dots_direct(qd + h * D, kb, stride, nb, p + h * B, h == 0 ? kn : NULL);
                att_dots_direct(qd + (h + 1) * D, kb, stride, nb, p + (h + 1) * B, NULL);
                att_block_direct(p + h * B, p + (h + 1) * B, nb, scale, &run_max[h], &run_sum[h],
                                 &run_max[h + 1], &run_sum[h + 1], od + h * D, od + (h + 1) * D,
                                 vb, stride, h == 0 ? vn : NULL);
            }
            for (; h < g; h++) {
                att_dots_direct(qd + h * D, kb, stride, nb, p + h * B, h == 0 ? kn : NULL);
                att_block_direct(p + h * B, NULL, nb, scale, &run_max[h], &run_sum[h], NULL, NULL,
                                 od + h * D, NULL, vb, stride, h == 0 ? vn : NULL);
            }
        }
        for (uint32_t h = 0; h < g; h++) att_store(od + h * D, run_sum[h], out + (size_t)h * D);
        return;
    }
#endif
    att_krow kw[B]; /* one block's K rows, then its V rows, widened (16 KiB at FP32) */
    for (uint32_t b0 = 0; b0 < n_last; b0 += B) {
        uint32_t nb_max = n_last - b0 < B ? n_last - b0 : B;
        uint32_t i_first = b0 > pos0 ? b0 - pos0 : 0; /* row i sees b0 + j if pos0 + i >= b0 + j */
        /* Phase 1: the block's K rows, widened once, against every (row,
         * head): each query read once per block, its raw scores into p.
         * Phase 2: the V rows, widened into the same buffer, and each
         * (row, head)'s softmax update and P.V. Per (row, head) the steps
         * and their order are a single-row call's (its dots, then its
         * block; other rows' steps touch none of its state), so the split
         * changes no bits. It keeps one widened block (16 KiB) in L1
         * instead of K and V together (32 KiB, all of Zen 4's L1D) while
         * the rows' queries, outputs and scores stream past: ~10 % faster
         * prefill attention on Zen 4 (128 rows at 896..1023, two threads:
         * ~152 -> ~170 GFLOPS; docs/CPU-JOURNAL.md, "Stop 27"). */
        widen_block(bf, q8, 0, b0, n_last, nb_max, kw);
        /* att_dots may read K rows up to 16 past nb: zero rows. (att_block
         * reads V rows below nb only, so the V phase needs no fill.) */
        if (nb_max < B) memset(&kw[nb_max], 0, (B - nb_max) * sizeof kw[0]);
        size_t uk = (size_t)i_first * g; /* (row, head) units in row-major order */
#ifdef ATT_MULTI
        /* ATT_MULTI units at a time, up to the last one's row's positions
         * (the others' extra scores are never read: att_block reads nb). */
        for (; uk + ATT_MULTI <= units; uk += ATT_MULTI) {
            uint32_t seen = pos0 + (uint32_t)((uk + ATT_MULTI - 1) / g) + 1 - b0;
            uint32_t nb = seen < B ? seen : B;
            att_dots_multi(qd + uk * D, kw, nb, p + uk * B, B);
        }
#endif
        for (; uk < units; uk++) {
            uint32_t seen = pos0 + (uint32_t)(uk / g) + 1 - b0, nb = seen < B ? seen : B;
            att_dots(qd + uk * D, kw, nb, p + uk * B);
        }
        widen_block(bf, q8, 1, b0, n_last, nb_max, kw);
        for (uint32_t i = i_first; i < n_q; i++) {
            uint32_t seen = pos0 + i + 1 - b0, nb = seen < B ? seen : B;
            uint32_t h = 0;
#ifdef ATT_HAS_PAIR
            for (; h + 2 <= g; h += 2) {
                size_t u = (size_t)i * g + h;
                att_block_pair(p + u * B, p + (u + 1) * B, nb, scale, &run_max[u], &run_sum[u],
                               &run_max[u + 1], &run_sum[u + 1], od + u * D, od + (u + 1) * D,
                               kw);
            }
#endif
            for (; h < g; h++) {
                size_t u = (size_t)i * g + h;
                att_block(p + u * B, nb, scale, &run_max[u], &run_sum[u], od + u * D, kw);
            }
        }
    }
    for (uint32_t i = 0; i < n_q; i++)
        for (uint32_t h = 0; h < g; h++) {
            size_t u = (size_t)i * g + h;
            att_store(od + u * D, run_sum[u], out + i * out_stride + (size_t)h * D);
        }
}

static void attention(const float *q, size_t q_stride, uint32_t n_q, uint32_t g,
                      uint32_t pos0, const kipp_cpu_kv_head *kv, float scale, float *out,
                      size_t out_stride, float *scratch) {
    attention_nest(q, q_stride, n_q, g, pos0, kv, NULL, scale, out, out_stride, scratch);
}

static void attention_q8_0(const float *q, size_t q_stride, uint32_t n_q, uint32_t g,
                           uint32_t pos0, const kipp_cpu_kv_head_q8 *kv, float scale, float *out,
                           size_t out_stride, float *scratch) {
    attention_nest(q, q_stride, n_q, g, pos0, NULL, kv, scale, out, out_stride, scratch);
}

#endif
