/* Block quantizers and dequantizers; see quant.h for the formats.
 * Plain scalar C: these run at conversion time and as the oracle's decode
 * step; fast paths live in src/cpu. */
#include "core/quant.h"

#include <math.h>

#include "core/common.h"

#define FP16_MAX 65504.0f

/* fp16-rounded scale for a positive magnitude; saturates instead of becoming
 * infinity, so a block holding a huge outlier still decodes finitely. */
static uint16_t scale_to_fp16(float scale) {
    if (!(scale <= FP16_MAX)) scale = FP16_MAX; /* also catches NaN */
    return kipp_f32_to_fp16(scale);
}

/* Round to nearest (ties away from zero, like ggml's roundf) and clamp to
 * [lo, hi] BEFORE converting, so out-of-range or NaN quotients (a saturated
 * scale) never reach an undefined float->integer conversion. */
static int round_clamp(float v, int lo, int hi) {
    if (v != v) return 0;
    if (v <= (float)lo) return lo;
    if (v >= (float)hi) return hi;
    return (int)lroundf(v);
}

void kipp_quantize_q8_0(const float *x, size_t n, kipp_block_q8_0 *out) {
    for (size_t b = 0; b < n / KIPP_QBLOCK; b++, x += KIPP_QBLOCK) {
        float amax = 0.0f;
        for (int i = 0; i < KIPP_QBLOCK; i++) amax = fmaxf(amax, fabsf(x[i]));
        uint16_t d16 = scale_to_fp16(amax / 127.0f);
        float d = kipp_fp16_to_f32(d16);
        out[b].d = d16;
        for (int i = 0; i < KIPP_QBLOCK; i++)
            out[b].qs[i] = (int8_t)(d > 0.0f ? round_clamp(x[i] / d, -127, 127) : 0);
    }
}

void kipp_quantize_q8_0_bf16(const uint16_t *src, size_t n, kipp_block_q8_0 *out, float *scratch) {
    for (size_t i = 0; i < n; i++) scratch[i] = kipp_bf16_to_f32(src[i]);
    kipp_quantize_q8_0(scratch, n, out);
}

void kipp_quantize_q4_0(const float *x, size_t n, kipp_block_q4_0 *out) {
    for (size_t b = 0; b < n / KIPP_QBLOCK; b++, x += KIPP_QBLOCK) {
        /* ggml's choice: the signed value of largest magnitude maps to q = 0
         * (value -8 d), so d carries the sign and that extreme is exact. */
        float amax = 0.0f, extreme = 0.0f;
        for (int i = 0; i < KIPP_QBLOCK; i++)
            if (fabsf(x[i]) > amax) { amax = fabsf(x[i]); extreme = x[i]; }
        float scale = extreme / -8.0f;
        uint16_t d16 = scale < 0 ? (uint16_t)(scale_to_fp16(-scale) | 0x8000u) : scale_to_fp16(scale);
        float d = kipp_fp16_to_f32(d16);
        out[b].d = d16;
        for (int j = 0; j < KIPP_QBLOCK / 2; j++) {
            int lo = d != 0.0f ? round_clamp(x[j] / d + 8.0f, 0, 15) : 8;
            int hi = d != 0.0f ? round_clamp(x[j + 16] / d + 8.0f, 0, 15) : 8;
            out[b].qs[j] = (uint8_t)(lo | (hi << 4));
        }
    }
}

void kipp_quantize_q4_1(const float *x, size_t n, kipp_block_q4_1 *out) {
    for (size_t b = 0; b < n / KIPP_QBLOCK; b++, x += KIPP_QBLOCK) {
        float lo = x[0], hi = x[0];
        for (int i = 1; i < KIPP_QBLOCK; i++) { lo = fminf(lo, x[i]); hi = fmaxf(hi, x[i]); }
        uint16_t m16 = kipp_f32_to_fp16(fmaxf(fminf(lo, FP16_MAX), -FP16_MAX));
        float m = kipp_fp16_to_f32(m16);
        uint16_t d16 = scale_to_fp16((hi - m) / 15.0f);
        float d = kipp_fp16_to_f32(d16);
        out[b].d = d16;
        out[b].m = m16;
        for (int j = 0; j < KIPP_QBLOCK / 2; j++) {
            int q0 = d > 0.0f ? round_clamp((x[j] - m) / d, 0, 15) : 0;
            int q1 = d > 0.0f ? round_clamp((x[j + 16] - m) / d, 0, 15) : 0;
            out[b].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

void kipp_dequantize_q8_0(const kipp_block_q8_0 *blocks, size_t n, float *out) {
    for (size_t b = 0; b < n / KIPP_QBLOCK; b++) {
        float d = kipp_fp16_to_f32(blocks[b].d);
        for (int i = 0; i < KIPP_QBLOCK; i++) out[b * KIPP_QBLOCK + i] = d * (float)blocks[b].qs[i];
    }
}

void kipp_dequantize_q4_0(const kipp_block_q4_0 *blocks, size_t n, float *out) {
    for (size_t b = 0; b < n / KIPP_QBLOCK; b++) {
        float d = kipp_fp16_to_f32(blocks[b].d);
        float *o = out + b * KIPP_QBLOCK;
        for (int j = 0; j < KIPP_QBLOCK / 2; j++) {
            o[j] = d * (float)((blocks[b].qs[j] & 0x0f) - 8);
            o[j + 16] = d * (float)((blocks[b].qs[j] >> 4) - 8);
        }
    }
}

void kipp_dequantize_q4_1(const kipp_block_q4_1 *blocks, size_t n, float *out) {
    for (size_t b = 0; b < n / KIPP_QBLOCK; b++) {
        float d = kipp_fp16_to_f32(blocks[b].d);
        float m = kipp_fp16_to_f32(blocks[b].m);
        float *o = out + b * KIPP_QBLOCK;
        for (int j = 0; j < KIPP_QBLOCK / 2; j++) {
            o[j] = d * (float)(blocks[b].qs[j] & 0x0f) + m;
            o[j + 16] = d * (float)(blocks[b].qs[j] >> 4) + m;
        }
    }
}
