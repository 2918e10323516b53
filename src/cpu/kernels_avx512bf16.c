/* AVX-512 BF16 tier (F, BW, VL, DQ + AVX512_BF16): matmuls on vdpbf16ps.
 * The Makefile compiles this file, and only this file, with -mavx512bf16;
 * dispatch.c calls into it only after CPUID reports AVX512_BF16. Opt-in
 * only (cpu_isa avx512bf16): auto picks `avx512`, which keeps FP32
 * activations (kernels_avx512.c), because the rounding below can flip an
 * oracle near-tie (docs/ARCHITECTURE.md, "Two AVX-512 tiers").
 * Attention, norms and elementwise ops are kernels_avx512.h's, the same
 * code and numbers as the avx512 tier.
 *
 * NUMERICS. pack_act rounds each activation to BF16 (round to nearest
 * even, vcvtne2ps2bf16; the instruction treats FP32 denormals as zero): a
 * relative 2^-9 per activation, about the size of the BF16 weights' own
 * rounding, and what llama.cpp does for BF16 weights. Quantized weights
 * are rounded the same way: each block decodes to the oracle's FP32
 * weights (Q8_0 d q; Q4_0 d (q - 8); Q4_1 FMA(d, q, m)), each rounded to
 * BF16 (RNE) -- a relative 2^-9 per weight, small beside the quantization
 * step itself (Q8_0: up to half of d in 127 d; Q4: half of d in 8 d).
 * Every product is then exact in FP32 (8-bit x 8-bit significands) and
 * accumulates in FP32. Per output (row n, activation m), for every weight
 * scheme: acc = 0; for each 32-value chunk of K in order: acc =
 * vdpbf16ps(acc, w chunk, x chunk) (lane i adds w[2i] x[2i] + w[2i+1]
 * x[2i+1]); then the fold tree of kernels_avx512.h (store_tile). One
 * instruction per 32 MACs, against two FMAs and two widening ops on the
 * FP32 tier. Until stop 20 the quantized schemes kept exact weights as
 * "BF16 small integers, one vdpbf16ps into a fresh register, then an FMA
 * with the block's scale" (Q4_1: another FMA with the minimum): two or
 * three instructions per 32 MACs, no faster than the FP32 tier; rounding
 * the weights makes quantized prefill run at the BF16 rate (Zen 5, prefill
 * 512, interleaved pairs: Q4_0 250 -> 384-401, Q8_0 248 -> 377-397, Q4_1
 * 185-188 -> 390-408 tok/s), while decode, bound by the block decode,
 * measured 2-8 % slower.
 * The matrix-vector path (decode: 8 weight rows in flight, prefetch one
 * tile ahead) and the matrix-matrix path (prefill: weight rows reused
 * across activation rows, quantized rows decoded once into BF16) run that
 * sequence per output element, so batch invariance (kernels.h) is bitwise
 * here as on every tier. */
#if defined(__x86_64__)
#include "cpu/kernels_avx512.h"

static inline __m512bh as_bh(__m512i v) { return (__m512bh)v; }
static inline __m512bh load_bh(const void *p) { return as_bh(_mm512_loadu_si512(p)); }

/* Packed activation row: K BF16 values in order, RNE-rounded. A chunk of
 * 32 packs on its own, so a 32-aligned slice lands at act_bytes(offset). */
static size_t act_bytes(uint32_t k) { return (size_t)k * sizeof(uint16_t); }

static void pack_act(const float *x, uint32_t k, void *dst) {
    uint16_t *out = dst;
    for (uint32_t i = 0; i < k; i += 32) {
        /* The first argument fills the high 16 values. */
        __m512bh p = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(x + i));
        _mm512_storeu_si512(out + i, (__m512i)p);
    }
}

#define MC 6        /* activation rows per matrix-matrix tile (4 x MC accumulators) */
#define TILE_C 8 /* activation rows a tile holds: MC, or FEW_ROWS (kernels_blocked.h) */
#define FEW_ROWS 8

/* ---- quantized weights: Q8_0, Q4_0 (scale4_gs32), Q4_1 (affine4_gs32) ----
 * A block is decoded to the oracle's 32 FP32 weights (Q8_0 d q; Q4_0
 * d (q - 8); Q4_1 FMA(d, q, m): the same IEEE operations as the avx512
 * tier's, so the same values) and each is rounded to BF16 (RNE), in value
 * order; the matmul is then the BF16 weights' vdpbf16ps sequence. */

static inline __attribute__((always_inline)) __m512bh qweights(int t, const uint8_t *row,
                                                               uint32_t b) {
    if (t == QT_Q8_0) {
        const kipp_block_q8_0 *blk = (const kipp_block_q8_0 *)row + b;
        __m512 d = half16(blk->d);
        __m512 f0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)blk->qs)));
        __m512 f1 = _mm512_cvtepi32_ps(
            _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk->qs + 16))));
        /* The first argument fills the high 16 values. */
        return _mm512_cvtne2ps_pbh(_mm512_mul_ps(d, f1), _mm512_mul_ps(d, f0));
    }
    uint16_t dh, mh = 0;
    const uint8_t *qs = q4_block(t, row, b, &dh, &mh);
    /* The block's 16 possible weights, as the avx512 tier computes them,
     * rounded to BF16 and held twice over in 32 words: vpermw indexes with
     * the low 5 bits of each word, so a word holding a whole byte (its low
     * nibble + junk from bit 4 on) finds its low nibble's weight unmasked. */
    __m512 table = q4_table16(t, dh, mh);
    __m512i table_bh = (__m512i)_mm512_cvtne2ps_pbh(table, table);
    /* Value j < 16 is byte j's low nibble, value j + 16 its high one: the
     * 16 bytes twice over, zero-extended to words, the upper 16 words
     * shifted right by 4. */
    const __m512i shifts = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
    __m512i words = _mm512_cvtepu8_epi16(
        _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs)));
    return as_bh(_mm512_permutexvar_epi16(_mm512_srlv_epi16(words, shifts), table_bh));
}

_Static_assert((int)KIPP_CPU_Q8_0 == QT_Q8_0 && (int)KIPP_CPU_Q4_0 == QT_Q4_0 &&
                   (int)KIPP_CPU_Q4_1 == QT_Q4_1,
               "kernels.h names the block formats as the tiers do");

/* kernels.h: the amx tier's weights, the same as this tier's. */
static inline __attribute__((always_inline)) void
qdecode_rows(int t, const void *w, size_t row_bytes, uint32_t n, uint32_t rows, uint32_t b0,
             uint32_t nblocks, uint16_t *dst, size_t dst_stride) {
    for (uint32_t r = 0; r < rows; r++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)(n + r) * row_bytes;
        for (uint32_t b = 0; b < nblocks; b++)
            _mm512_storeu_si512(dst + r * dst_stride + 32 * (size_t)b,
                                (__m512i)qweights(t, row, b0 + b));
    }
}

void kipp_cpu_bf16_qdecode(kipp_cpu_qtype t, const void *w, size_t row_bytes, uint32_t n,
                           uint32_t rows, uint32_t b0, uint32_t nblocks, uint16_t *dst,
                           size_t dst_stride) {
    switch (t) { /* each format's decoder compiled on its own */
    case KIPP_CPU_Q8_0: qdecode_rows(QT_Q8_0, w, row_bytes, n, rows, b0, nblocks, dst, dst_stride); break;
    case KIPP_CPU_Q4_0: qdecode_rows(QT_Q4_0, w, row_bytes, n, rows, b0, nblocks, dst, dst_stride); break;
    case KIPP_CPU_Q4_1: qdecode_rows(QT_Q4_1, w, row_bytes, n, rows, b0, nblocks, dst, dst_stride); break;
    }
}

/* Block b of a quantized row as its 32 BF16 weights (prefill's
 * decode-once, kernels_blocked.h). */
static inline __attribute__((always_inline)) void qdecode_block(int t, const uint8_t *row,
                                                                uint32_t b, uint16_t *dst) {
    _mm512_store_si512(dst, (__m512i)qweights(t, row, b));
}

/* tile_span (kernels_blocked.h drives it: 4 x MC tiles, K spans of 1,024,
 * decode in MV_ROWS_* -row tiles). A 6-row activation tile of the down
 * projection (K = 3,072) is 36 KiB of BF16, most of Zen 5's 48 KiB L1;
 * with spans that matmul measured ~425-495 -> ~440-565 GFLOPS on 2 Zen 5
 * cores. Chunks [k0, k1) of an R x C tile; R, C, PF, src compile-time
 * constants at every call site, so acc[][] lives in registers. A span with
 * k0 > 0 picks the accumulators up from carry and one with k1 < k leaves
 * them there (storing and reloading a register is exact). Tile row r is
 * weight row n + r * rs (rs = 1 but in a split decode tile), by src: a
 * BF16 row of w; a quantized row (row_bytes apart), each block decoded by
 * qweights; or BF16 row n + r of the rows w (a dec_rows) says where (rows
 * the prefill decoded once; never split). Per output: acc = 0; one
 * vdpbf16ps per 32-value chunk in K order; the fold tree -- whatever R, C, the source, the span
 * cut and the neighbours. PF (decode): each row's line is prefetched R
 * rows ahead, the next tile's (split tiles: along the row's stream), as
 * the FP32 tiers do. */
static inline __attribute__((always_inline)) void
tile_span(const void *w, int src, size_t row_bytes, uint32_t k, const char *x,
          size_t x_stride, int R, int C, int PF, uint32_t n, uint32_t rs, uint32_t m,
          float *const *y,
          uint32_t k0, uint32_t k1, __m512 (*carry)[MC], next_pf *np) {
    __m512 acc[8][TILE_C];
    TILE_START(acc, carry, R, C, k0);
    qtile_ptrs qt = qtile_at(w, row_bytes, n, rs, k0 / 32, src, R, PF);
    seq_pf sp = seq_pf_at(w, src, row_bytes, k, n, k0 / 32, R, PF);
    for (uint32_t i = k0; i < k1; i += 32) {
        __m512bh wv[8];
        qtile_prefetch(&qt, src, R, PF);
        seq_pf_step(&sp, src, R, PF);
        next_pf_step(np);
        #pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            if (src == SRC_BF16) {
                const uint16_t *wr = (const uint16_t *)w + (size_t)(n + r * rs) * k + i;
                wv[r] = row_pf(PF) ? as_bh(load_line_quarters(wr)) : load_bh(wr);
                if (row_pf(PF))
                    _mm_prefetch((const char *)(wr + row_pf_ahead(R, C, k, PF)), _MM_HINT_T0);
            } else if (src == SRC_DEC) { /* decoded rows: BF16 on this tier */
                wv[r] = load_bh(dec_ptr(w, n + r, i, sizeof(uint16_t)));
            } else {
                wv[r] = qweights(src, qtile_block(&qt, r), 0);
            }
        }
        qtile_step(&qt, src);
        #pragma GCC unroll 8
        for (int c = 0; c < C; c++) {
            __m512bh xv = load_bh((const uint16_t *)(x + (size_t)(m + c) * x_stride) + i);
            #pragma GCC unroll 8
            for (int r = 0; r < R; r++) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], wv[r], xv);
        }
    }
    if (k1 < k) { /* a later span continues these chains */
        TILE_PARK(acc, carry, R, C);
        return;
    }
    store_tile(&acc[0][0], TILE_C, R, C, n, rs, m, y);
}

#define MV_ROWS_BF16 8 /* decode: 8 weight rows in flight */
#define MV_ROWS_Q 8
#define MV_SEQ_ROWS_BF16 2 /* as kernels_avx512.c */
#define MV_SEQ_ROWS_Q 8
#define QDEC_T uint16_t /* prefill decodes quantized rows once into BF16 */
#include "cpu/kernels_blocked.h"

/* Two tables, the same but for decode's prefetch (kernels.h seq_twin);
 * and the amx tier's two: these kernels with every matmul on AMX tiles
 * (kernels_amx.c), the same BF16 activations (pack_act) and weights. */
#define TIER_TABLE(NAME, BF16, Q8_0, Q4_0, Q4_1, SEQ, TWIN)                                    \
    {                                                                                          \
        .name = NAME, .act_bf16 = 1, .qweights_bf16 = 1, .act_bytes = act_bytes,               \
        .pack_act = pack_act, .matmul_bf16 = BF16, .matmul_q8_0 = Q8_0, .matmul_q4_0 = Q4_0,   \
        .matmul_q4_1 = Q4_1, .rmsnorm = rmsnorm, .rope = rope, .silu_mul = silu_mul,           \
        .attention = attention, .attention_q8_0 = attention_q8_0, .decode_seq = SEQ,           \
        .seq_twin = TWIN,                                                                      \
    }
const kipp_cpu_kernels kipp_cpu_kernels_avx512bf16 =
    TIER_TABLE("avx512bf16", matmul_bf16, matmul_q8_0, matmul_q4_0, matmul_q4_1, 0,
               &kipp_cpu_kernels_avx512bf16_seq);
const kipp_cpu_kernels kipp_cpu_kernels_avx512bf16_seq =
    TIER_TABLE("avx512bf16", matmul_bf16_seq, matmul_q8_0_seq, matmul_q4_0_seq, matmul_q4_1_seq,
               1, NULL);
/* The tiles need no decode prefetch choice; the twin keeps the contract. */
#define AMX_TABLE(SEQ, TWIN)                                                                   \
    TIER_TABLE("amx", kipp_cpu_amx_matmul_bf16, kipp_cpu_amx_matmul_q8_0,                      \
               kipp_cpu_amx_matmul_q4_0, kipp_cpu_amx_matmul_q4_1, SEQ, TWIN)
const kipp_cpu_kernels kipp_cpu_kernels_amx = AMX_TABLE(0, &kipp_cpu_kernels_amx_seq);
const kipp_cpu_kernels kipp_cpu_kernels_amx_seq = AMX_TABLE(1, NULL);
#endif
