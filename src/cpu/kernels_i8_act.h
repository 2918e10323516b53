/* The 8-bit activations of the opt-in integer-dot tiers, avx2i8
 * (kernels_avx2i8.c) and avx512i8 (kernels_avx512i8.c): their packed
 * activation record and how a 32-value block is quantized. The matmuls
 * that read it are kernels_i8.h's.
 *
 * NUMERICS (each quantized matmul output y[m][n]; tests/unit/
 * test_cpu_qkernels.c holds a scalar reference written apart from this):
 *  - activations, per 32-value block of a row (i8_quantize_block): amax =
 *    max |x_i|, d_x = amax / 127, xq_i = round-to-nearest-even(x_i * (127
 *    / amax)), an int8 in [-127, 127]; s_x = d_x * sum_i xq_i. A block
 *    with amax below 2^-120 (0 included; 127 / amax would overflow) is all
 *    zeros with d_x = 0. A block with a non-finite value gets d_x = s_x =
 *    NaN (the outputs it feeds become NaN, as the oracle's would, not
 *    garbage);
 *  - weights: Q8_0 wq = q, Q4_0 wq = nibble - 8, Q4_1 wq = nibble (its
 *    minimum m is added below);
 *  - per block b: p = sum wq_i * xq_i over its 32 values, an exact
 *    integer (at most 32 x 128 x 127 in magnitude: exact in FP32 too);
 *    acc = FMA((float)p, d_w * d_x, acc) in block order (d_w * d_x one
 *    FP32 multiply); Q4_1 also ms = FMA(m, s_x, ms), a second chain in
 *    block order;
 *  - y = acc, Q4_1: acc + ms.
 *    (Until stop 44 each block kept 8 lane sums p_j of 4 values, each
 *    with its own FMA chain, folded at the end like avx2's FP32 lanes: an
 *    order only the row-major layout makes cheap. The whole-block sum
 *    lets prefill put 8 outputs in one vector; kernels_i8.h.)
 * The per-output sequence is fixed by the weight shape alone, so decode,
 * prefill and any column split give the same bits (kernels.h); and since
 * nothing in it depends on the vector width, avx2i8 and avx512i8 give the
 * same bits for every quantized matmul.
 *
 * ACTIVATION FORMAT. cpu_forward.c packs 32-aligned slices of a row at
 * byte offset act_bytes(off), so every 32-value block packs to a
 * fixed-size record: its 32 FP32 values (what the tier's BF16 matmul
 * reads, through ACT_F32, in the order that matmul wants: avx2 value
 * order, avx512 evens then odds), then its 32 int8 xq in value order,
 * d_x, s_x and the two integer corrections below. */
#ifndef KIPP_CPU_KERNELS_I8_ACT_H
#define KIPP_CPU_KERNELS_I8_ACT_H

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu/kernels.h"

enum {
    I8_REC = 192,    /* bytes per 32-value block: 3 lines */
    I8_Q = 128,      /* int8 xq[32] */
    I8_D = 160,      /* float d_x */
    I8_S = 164,      /* float s_x */
    I8_C4 = 168,     /* int32 -8 x sum xq (Q4_0's correction) */
    I8_C8 = 172,     /* int32 -128 x sum xq (Q8_0's on the vpdpbusd table) */
};
_Static_assert(I8_C8 + 4 <= I8_REC && I8_REC % 64 == 0, "a record is whole lines");

static size_t act_bytes(uint32_t k) { return (size_t)(k + 31) / 32 * I8_REC; }

/* FP32 value i of packed activation row xr: i a multiple of 8 (avx2i8,
 * value order) or of 32 (avx512i8: the block's 32 values, evens then
 * odds). */
#define ACT_F32(xr, i) ((const float *)((const char *)(xr) + (size_t)(i) / 32 * I8_REC) + (i) % 32)
/* Bytes from one 32-value block's FP32 values to the next's (the prefill
 * tiles' step along an activation row, mm_tile_span). */
#define ACT_CHUNK_BYTES I8_REC

#define I8_TINY 0x1p-120f

/* The 32 values x[0 .. 31] into record rec's int8 part (xq, d_x, s_x and
 * the corrections); the tier stores the FP32 part. */
static inline void i8_quantize_block(const float *x, uint8_t *rec) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 v[4], amax = _mm256_setzero_ps(), nonfinite = _mm256_setzero_ps();
    for (int j = 0; j < 4; j++) {
        v[j] = _mm256_loadu_ps(x + 8 * j);
        __m256 mag = _mm256_and_ps(v[j], abs_mask);
        amax = _mm256_max_ps(mag, amax);
        __m256 z = _mm256_sub_ps(mag, mag); /* NaN exactly for inf and NaN */
        nonfinite = _mm256_or_ps(nonfinite, _mm256_cmp_ps(z, z, _CMP_UNORD_Q));
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    float a = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
    int bad = _mm256_movemask_ps(nonfinite) != 0;
    /* Below I8_TINY, 127 / amax would overflow: the block is zeros. */
    float d = bad ? NAN : a < I8_TINY ? 0.0f : a / 127.0f;
    float id = bad || a < I8_TINY ? 0.0f : 127.0f / a;
    __m256 vid = _mm256_set1_ps(id);
    __m256i q[4];
    for (int j = 0; j < 4; j++) /* cvtps rounds to nearest even (MXCSR default) */
        q[j] = bad ? _mm256_setzero_si256() : _mm256_cvtps_epi32(_mm256_mul_ps(v[j], vid));
    /* 32 dwords to 32 bytes in value order: the packs work per 128-bit
     * half, leaving dword groups of 4 values as q0a q1a q2a q3a q0b
     * q1b q2b q3b (a: a vector's first 4, b: its last 4). */
    __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    b = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)(rec + I8_Q), b);
    int sum = 0;
    for (int i = 0; i < 32; i++) sum += (int8_t)rec[I8_Q + i];
    float s = d * (float)sum;
    int32_t c4 = -8 * sum, c8 = -128 * sum;
    memcpy(rec + I8_D, &d, sizeof d);
    memcpy(rec + I8_S, &s, sizeof s);
    memcpy(rec + I8_C4, &c4, sizeof c4);
    memcpy(rec + I8_C8, &c8, sizeof c8);
    memset(rec + I8_C8 + 4, 0, I8_REC - I8_C8 - 4); /* every byte defined */
}

#endif
