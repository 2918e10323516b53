/* The cpu backend's kernel table: one per instruction-set tier (generic C,
 * AVX2+FMA, AVX-512 with FP32 activations, AVX-512 with vdpbf16ps on BF16
 * activations, and that with AMX tile matmuls), chosen once at model
 * creation from CPUID, or forced through kipp_model_options.cpu_isa (the
 * CLI: KIPP_CPU_ISA).
 *
 * BATCH INVARIANCE. Every kernel computes each output element with an
 * instruction sequence fixed by the weight shape alone:
 *  - matmul: output (m, n) = one accumulator chain over K in fixed chunks
 *    (tier's lane width), then one fixed lane-to-scalar tree (amx: one
 *    tile element's chain over K, no tree; amx_matmul.h). The
 *    matrix-vector path (M = 1) and the blocked matrix-matrix path (M > 1)
 *    run exactly this sequence per (row, column) pair; the blocked path only
 *    reuses loaded weights across activation rows. Callers split output
 *    columns (weight rows) between threads, never K.
 *  - attention: each query row against its positions [0, pos] in
 *    32-position KV blocks, in position order, with an online softmax per
 *    block; rows of one session share each loaded block, but a row's
 *    operations and their order are those of the row alone.
 *  - norms and elementwise ops work on one row at a time.
 * Tiers differ from each other (lane width, lane order, fold, on
 * avx512bf16 and amx activations rounded to BF16, on avx2i8 and avx512i8 quantized
 * matmuls on 8-bit activations); each is invariant in itself. */
#ifndef KIPP_CPU_KERNELS_H
#define KIPP_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "core/kv.h"
#include "core/quant.h"
#include "kipp.h"

/* Every matmul K is a multiple of this (all family dimensions are). */
#define KIPP_CPU_K_ALIGN 32
/* Rows per chunk of the cpu backend's forward pass (cpu_forward.c): an
 * eval's rows go through the layers this many at a time, so a 512-token
 * prompt reads every weight twice. 256 against the earlier 128: prefill
 * 512 and 2,048 on Zen 5, 2 threads, interleaved pairs, +2.8 % on average
 * (BF16, Q8_0, Q4_0; docs/CPU-JOURNAL.md "Stop 48"): half the weight
 * streams from memory and half the fork/joins per token. Visible
 * here so that the tests can cross a chunk's end on purpose. */
#define KIPP_CPU_CHUNK_ROWS 256

/* Positions per KV block: the attention's online-softmax granule. It is
 * the cache's block size, so a block's positions are contiguous. */
#define KIPP_CPU_ATT_BLOCK 32
_Static_assert(KIPP_CPU_ATT_BLOCK == KIPP_KV_BLOCK, "attention blocks are cache blocks");
_Static_assert(KIPP_CPU_K_ALIGN == KIPP_QBLOCK, "quantized rows are whole 32-value blocks");

/* Every tier's exp (softmax weights, its rescale factor, SiLU) gives
 * exactly 0 for an argument below KIPP_CPU_EXP_MIN -- just above ln FLT_MIN
 * = -87.34, so nothing it returns is subnormal -- and for -inf and NaN, as
 * a flush-to-zero mode would. On x86 a subnormal costs a microcode assist
 * in each operation that produces or reads it: an attention row whose
 * scores reach more than 87 below its maximum made one per far position
 * and per output rescale (docs/CPU-JOURNAL.md "Stop 70": Q8_0 KV
 * attention at such scores 7.5 GB/s, 11.5-11.8 with the flush). What is
 * lost is below 1.2e-38 of the row's largest weight, 1. The oracle keeps
 * expf's gradual underflow. */
#define KIPP_CPU_EXP_MIN (-87.3f)

/* K/V prefetch: a block's 32 rows of one head are 8 KiB in one piece, but
 * the next block of that head is elsewhere (64 KiB on in a fresh session:
 * the other heads' rows lie between; any block after a table scramble), a
 * pattern the hardware prefetchers do not follow. So the kernels request
 * the block ATT_PF_BLOCKS on, a row per row they read (att_prefetch_row), into L2 (T1: L1's
 * few miss buffers held decode attention at ~7 GB/s per thread out of
 * cache on Zen 4, one block ahead into L1; two ahead into L2 streamed
 * ~20-30 GB/s for two threads, docs/CPU-JOURNAL.md "Stop 27"). */
#define ATT_PF_BLOCKS 2
/* One K or V row of one head (128 BF16 values, 4 lines) into L2. */
static inline __attribute__((always_inline)) void att_prefetch_row(const uint16_t *row) {
    for (size_t l = 0; l < KIPP_HEAD_DIM * sizeof(uint16_t); l += 64)
        __builtin_prefetch((const char *)row + l, 0, 2);
}
/* One Q8_0 cache row of one head (4 blocks, 136 bytes, at any offset in
 * its line: at most 4 lines) into L2. */
static inline __attribute__((always_inline)) void att_prefetch_qrow(const kipp_block_q8_0 *row) {
    const char *p = (const char *)row;
    for (size_t l = 0; l < 4 * sizeof *row; l += 64) __builtin_prefetch(p + l, 0, 2);
    __builtin_prefetch(p + 4 * sizeof *row - 1, 0, 2);
}
/* The K (or V) block of `blocks` the prefetch runs on while block b0 / B is
 * read, or NULL where that is past the last position n_last. */
static inline const uint16_t *att_prefetch_block(const uint16_t *const *blocks, uint32_t b0,
                                                 uint32_t n_last) {
    return b0 + ATT_PF_BLOCKS * KIPP_CPU_ATT_BLOCK < n_last
               ? blocks[b0 / KIPP_CPU_ATT_BLOCK + ATT_PF_BLOCKS]
               : NULL;
}

/* y[m][n] for m in [0, M), n in [n0, n1):
 *   dot(W row n, activation row m).
 * w: BF16 [N][K] (row stride K). x: M packed activation rows (tier format,
 * see pack_act), x_stride bytes apart. y[m] points at output row m (index
 * n is written at y[m][n]). */
typedef void (*kipp_cpu_matmul_fn)(const uint16_t *w, uint32_t k, uint32_t n0,
                                   uint32_t n1, const void *x, size_t x_stride,
                                   uint32_t m, float *const *y);

/* One KV head of one session's BF16 cache, as the attention kernels see
 * it: k_blocks[b] / v_blocks[b] point at logical block b's first position
 * (this head's 128 values); positions within a block are pos_stride
 * elements apart. The kernels never see the cache's layout or block table,
 * so the storage behind these pointers can change freely. */
typedef struct kipp_cpu_kv_head {
    const uint16_t *const *k_blocks;
    const uint16_t *const *v_blocks;
    size_t pos_stride;
} kipp_cpu_kv_head;

/* Query heads per KV head the attention kernels accept (their per-row state
 * is sized by it); the cpu backend refuses checkpoints above it. */
#define KIPP_CPU_MAX_GROUP 16
/* Floats of scratch an attention call needs for n_q rows of g heads:
 * per (row, head) the query and output in the tier's layout (128 each),
 * one block of scores (32), running max and sum. */
#define KIPP_CPU_ATT_SCRATCH(n_q, g) \
    ((size_t)(n_q) * (g) * (2 * KIPP_HEAD_DIM + KIPP_CPU_ATT_BLOCK + 2) + 16)

/* n_q query rows of one session against one KV head. Row i is the query at
 * position pos0 + i and attends positions [0, pos0 + i]. q row i is
 * q + i * q_stride: [g][128] FP32 (normed, rotated; not yet scaled); out
 * row i likewise. scratch: KIPP_CPU_ATT_SCRATCH(n_q, g) floats.
 * Every row's numbers are those of a call with n_q = 1 for that row alone:
 * the loop nest shares each K/V block between rows, the per-row operation
 * order does not change (kernels_att.h). */
typedef void (*kipp_cpu_attention_fn)(const float *q, size_t q_stride, uint32_t n_q,
                                      uint32_t g, uint32_t pos0, const kipp_cpu_kv_head *kv,
                                      float scale, float *out, size_t out_stride,
                                      float *scratch);

/* The same contract for quantized weights: w is [N] rows of K / 32 ggml
 * blocks (Q8_0, Q4_0 or Q4_1, core/quant.h), x the same packed activations
 * the BF16 matmul reads. */
typedef void (*kipp_cpu_matmul_q_fn)(const void *w, uint32_t k, uint32_t n0,
                                     uint32_t n1, const void *x, size_t x_stride,
                                     uint32_t m, float *const *y);

/* One KV head of one session's Q8_0 cache: k_blocks[b] / v_blocks[b]
 * point at logical block b's first position (this head's 4 Q8_0 blocks,
 * 128 values); positions within a block are pos_stride Q8_0 blocks apart. */
typedef struct kipp_cpu_kv_head_q8 {
    const kipp_block_q8_0 *const *k_blocks;
    const kipp_block_q8_0 *const *v_blocks;
    size_t pos_stride;
} kipp_cpu_kv_head_q8;

/* kipp_cpu_attention_fn over a Q8_0 cache: the same loop nest and steps,
 * on K/V rows widened to their exact values d * q (kernels_att.h). */
typedef void (*kipp_cpu_attention_q8_fn)(const float *q, size_t q_stride, uint32_t n_q,
                                         uint32_t g, uint32_t pos0,
                                         const kipp_cpu_kv_head_q8 *kv, float scale, float *out,
                                         size_t out_stride, float *scratch);

typedef struct kipp_cpu_kernels {
    const char *name; /* "generic", "avx2", "avx512", "avx512bf16", "amx", "avx2i8", "avx512i8" */
    /* 1 when pack_act rounds activations to BF16 (round to nearest even;
     * the matmuls then multiply BF16 by BF16 exactly): the tests' scalar
     * references round the same way. 0: activations stay FP32. */
    int act_bf16;
    /* 1 when the quantized matmuls round each decoded weight (the oracle's
     * FP32 value) to BF16 (RNE) before multiplying: the tests' references
     * round the same way. 0: they multiply the oracle's FP32 weights. */
    int qweights_bf16;
    /* 1 when the quantized matmuls multiply the activations quantized to
     * 8 bits per 32-value block, with integer dot products (avx2i8,
     * avx512i8; kernels_i8_act.h says exactly how): the tests' references quantize
     * the same way. 0: FP32 (or act_bf16's BF16) activations. */
    int act_i8;
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
    kipp_cpu_attention_q8_fn attention_q8_0; /* the opt-in Q8_0 KV cache */
    /* Decode (one activation row) streams the weights with PF_SEQ
     * prefetch (1) or PF_ROWS (0); kernels_simd.h, docs/CPU-JOURNAL.md
     * "Stop 26". Results are the same bits either way. */
    int decode_seq;
    /* On a PF_ROWS table of a SIMD tier: the same tier's PF_SEQ table
     * (identical but for the matmuls' decode prefetch); else NULL. */
    const struct kipp_cpu_kernels *seq_twin;
} kipp_cpu_kernels;

extern const kipp_cpu_kernels kipp_cpu_kernels_generic;

/* Every FP16 bit pattern's FP32 value, kipp_fp16_to_f32's (the oracle's
 * conversion; exact for every finite half). The SIMD tiers read a block's
 * scale here with one broadcast load instead of a broadcast and a convert
 * on the shuffle ports, which Q4 and Q8_0 decode are bound by. Filled once
 * by dispatch.c before it hands out any tier; 256 KiB, of which a model
 * touches the few pages its scales' exponents fall in. */
extern float kipp_cpu_f16_table[65536];
/* The same values times 2^-16 (exact: an FP16 value is at least 2^-24,
 * so these are normal FP32 numbers). The avx512 Q8_0 decoder multiplies
 * each int8 it left in the top half of a 32-bit lane, q * 2^16, by this
 * scale: d * q, the same exact product, without shifting q down
 * (kernels_avx512.h). */
extern float kipp_cpu_f16_table_m16[65536];
/* Each value d beside -32,896 d (= -(2^15 + 128) d; exact: 11 + 9
 * significant bits): the scale and bias of kernels_avx512.h's
 * magic-number Q8_0 decoder (the AVX512_VBMI form), d * (2^15 + u) +
 * bias = d * q. Side by side, so a block's two lookups touch one cache
 * line: where a matrix's (or a Q8_0 KV cache's) scales spread over many
 * codes, two separate tables missed L1 twice as often (stop 66,
 * docs/BENCHMARKS.md: at 16,384 codes the pairs stream 2-10 % faster;
 * at a few thousand or fewer, even). 512 KiB. */
extern float kipp_cpu_f16_table_q8_pair[65536][2];
/* Whether the BF16 prefill of the avx2 and avx512 tiers (and of their i8
 * builds) decodes its weight rows once into FP32 for calls of
 * BF16_DECODE_MIN_ROWS or more activation rows (BF16_DECODE_ONCE in
 * kernels_avx2.c and kernels_avx512.c) instead of widening them in every
 * tile. Set with the tables above, before any tier is handed out: on
 * every processor but AMD's, whose vector integer pipes are not the FMAs' (the
 * widening's cost there is other, and the change is unmeasured). The same
 * bits either way; tests/unit/test_cpu_kernels.c flips it to hold both
 * paths to them. Nothing else writes it. */
extern int kipp_cpu_bf16_decode_once;
/* Defined only on x86-64 builds (weak references elsewhere). */
extern const kipp_cpu_kernels kipp_cpu_kernels_avx2;
extern const kipp_cpu_kernels kipp_cpu_kernels_avx512;
extern const kipp_cpu_kernels kipp_cpu_kernels_avx512bf16;
extern const kipp_cpu_kernels kipp_cpu_kernels_avx2_seq;
extern const kipp_cpu_kernels kipp_cpu_kernels_avx512_seq;
extern const kipp_cpu_kernels kipp_cpu_kernels_avx512bf16_seq;
/* The avx512 tier with AVX512_VBMI's Q8_0 decoder (kernels_avx512_vbmi.c):
 * the same bits; dispatch hands it out as "avx512" where the processor has
 * AVX512_VBMI. */
extern const kipp_cpu_kernels kipp_cpu_kernels_avx512_vbmi;
extern const kipp_cpu_kernels kipp_cpu_kernels_avx512_vbmi_seq;
/* The opt-in avx2i8 tier: avx2 with integer-dot quantized matmuls on 8-bit
 * activations (kernels_avx2i8.c). */
extern const kipp_cpu_kernels kipp_cpu_kernels_avx2i8;
extern const kipp_cpu_kernels kipp_cpu_kernels_avx2i8_seq;
/* The same tier with vpdpbusd (AVX512_VNNI + AVX512VL): the same bits;
 * dispatch hands it out as "avx2i8" where the processor has those. */
extern const kipp_cpu_kernels kipp_cpu_kernels_avx2i8_vnni;
extern const kipp_cpu_kernels kipp_cpu_kernels_avx2i8_vnni_seq;
/* The opt-in avx512i8 tier: avx512 with avx2i8's quantized matmuls (their
 * vpdpbusd table; kernels_avx512i8.c). */
extern const kipp_cpu_kernels kipp_cpu_kernels_avx512i8;
extern const kipp_cpu_kernels kipp_cpu_kernels_avx512i8_seq;
/* The amx tier: avx512bf16's table with every matmul on AMX tiles
 * (kernels_amx.c, amx_matmul.h). */
extern const kipp_cpu_kernels kipp_cpu_kernels_amx;
extern const kipp_cpu_kernels kipp_cpu_kernels_amx_seq;
void kipp_cpu_amx_matmul_bf16(const uint16_t *w, uint32_t k, uint32_t n0, uint32_t n1,
                              const void *x, size_t x_stride, uint32_t m, float *const *y);
void kipp_cpu_amx_matmul_q8_0(const void *w, uint32_t k, uint32_t n0, uint32_t n1,
                              const void *x, size_t x_stride, uint32_t m, float *const *y);
void kipp_cpu_amx_matmul_q4_0(const void *w, uint32_t k, uint32_t n0, uint32_t n1,
                              const void *x, size_t x_stride, uint32_t m, float *const *y);
void kipp_cpu_amx_matmul_q4_1(const void *w, uint32_t k, uint32_t n0, uint32_t n1,
                              const void *x, size_t x_stride, uint32_t m, float *const *y);

/* Tests only (tests/unit/test_tiers.h): the table kipp_cpu_kernels_by_name
 * ("amx") -- and so cpu_isa amx -- hands out on a processor with
 * AVX512_BF16 but no AMX: the amx tier over emulated tiles
 * (tests/unit/amx_emulated.c), so that the whole cpu backend runs the
 * tier's tiling and wiring wherever the tests run. NULL outside the tests,
 * where such a processor is refused "amx". */
extern const kipp_cpu_kernels *kipp_cpu_amx_stand_in;

/* Quantized block formats, as the cross-file entry points below name them
 * (the tier files' QT_* have the same values). */
typedef enum kipp_cpu_qtype { KIPP_CPU_Q8_0, KIPP_CPU_Q4_0, KIPP_CPU_Q4_1 } kipp_cpu_qtype;
/* Rows [n, n + rows) of a quantized matrix (rows row_bytes apart), blocks
 * [b0, b0 + nblocks), as the BF16 weights the avx512bf16 tier multiplies:
 * each the oracle's FP32 weight rounded to BF16 (RNE). Row r goes to
 * dst + r * dst_stride (BF16 values). Defined in kernels_avx512bf16.c;
 * call only where that tier runs (the amx tier decodes its tiles' weights
 * with it, so both tiers multiply the same weights). */
void kipp_cpu_bf16_qdecode(kipp_cpu_qtype t, const void *w, size_t row_bytes, uint32_t n,
                           uint32_t rows, uint32_t b0, uint32_t nblocks, uint16_t *dst,
                           size_t dst_stride);

/* The tier to use: the best the processor supports (KIPP_CPU_ISA_AUTO), or
 * the one asked for, with the decode prefetch asked for (AUTO: the one
 * kipp_cpu_decode_prefetch_resolve picks). Returns NULL and writes a reason
 * into why (why_size bytes) when isa or pf is unknown or this processor
 * cannot run the tier. */
const kipp_cpu_kernels *kipp_cpu_select_kernels(kipp_cpu_isa isa, kipp_cpu_decode_prefetch pf,
                                                char *why, size_t why_size);
/* Tier by name if this processor can run it, else NULL (tests). */
const kipp_cpu_kernels *kipp_cpu_kernels_by_name(const char *name);

#endif
