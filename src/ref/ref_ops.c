/* Scalar oracle ops (see ref_ops.h). Every sum runs in index order in FP32,
 * so a result depends only on its inputs, never on batching or threading:
 * that is what makes the oracle's cached, chunked and batched paths bitwise
 * equal. */
#include "ref/ref_ops.h"

#include <math.h>

#include "core/common.h"
#include "core/gguf.h"
#include "core/quant.h"

bool kipp_ref_type_supported(uint32_t t) {
    return t == GGML_TYPE_F32 || t == GGML_TYPE_BF16 || t == GGML_TYPE_Q8_0 ||
           t == GGML_TYPE_Q4_0 || t == GGML_TYPE_Q4_1;
}

size_t kipp_ref_row_bytes(uint32_t t, uint64_t cols) {
    switch (t) {
    case GGML_TYPE_F32: return (size_t)cols * 4;
    case GGML_TYPE_BF16: return (size_t)cols * 2;
    case GGML_TYPE_Q8_0: return (size_t)(cols / KIPP_QBLOCK) * sizeof(kipp_block_q8_0);
    case GGML_TYPE_Q4_0: return (size_t)(cols / KIPP_QBLOCK) * sizeof(kipp_block_q4_0);
    case GGML_TYPE_Q4_1: return (size_t)(cols / KIPP_QBLOCK) * sizeof(kipp_block_q4_1);
    default: return 0;
    }
}

static const void *row_ptr(const kipp_tensor *w, uint64_t r) {
    return (const uint8_t *)w->data + (size_t)r * kipp_ref_row_bytes(w->type, w->cols);
}

/* ---- one decoder per type: weight j of a row as FP32 --------------------
 * Blocks hold 32 weights; Q4 nibbles: byte j = element j (low) and j + 16
 * (high), ggml's order. */

static float q8_0_value(const kipp_block_q8_0 *b, size_t j) {
    return kipp_fp16_to_f32(b->d) * (float)b->qs[j];
}

static float q4_0_value(const kipp_block_q4_0 *b, size_t j) {
    int q = j < 16 ? (b->qs[j] & 0x0F) : (b->qs[j - 16] >> 4);
    return kipp_fp16_to_f32(b->d) * (float)(q - 8);
}

static float q4_1_value(const kipp_block_q4_1 *b, size_t j) {
    int q = j < 16 ? (b->qs[j] & 0x0F) : (b->qs[j - 16] >> 4);
    return kipp_fp16_to_f32(b->d) * (float)q + kipp_fp16_to_f32(b->m);
}

static inline float weight_at(uint32_t type, const void *row, size_t j) {
    switch (type) {
    case GGML_TYPE_F32: return ((const float *)row)[j];
    case GGML_TYPE_BF16: return kipp_bf16_to_f32(((const uint16_t *)row)[j]);
    case GGML_TYPE_Q8_0: return q8_0_value((const kipp_block_q8_0 *)row + j / 32, j % 32);
    case GGML_TYPE_Q4_0: return q4_0_value((const kipp_block_q4_0 *)row + j / 32, j % 32);
    case GGML_TYPE_Q4_1: return q4_1_value((const kipp_block_q4_1 *)row + j / 32, j % 32);
    default: return NAN; /* rejected at model creation; never reached */
    }
}

float kipp_ref_row_dot(const kipp_tensor *w, uint64_t r, const float *x) {
    const void *row = row_ptr(w, r);
    float acc = 0.0f;
    /* The BF16 case is spelled out because it is the common one and the
     * switch per element would dominate the oracle's run time. */
    if (w->type == GGML_TYPE_BF16) {
        const uint16_t *h = row;
        for (uint64_t j = 0; j < w->cols; j++) acc += kipp_bf16_to_f32(h[j]) * x[j];
        return acc;
    }
    /* Block types: decode one 32-weight block (the same values weight_at
     * gives), then accumulate in index order as every other type does. */
    if (w->type == GGML_TYPE_Q8_0 || w->type == GGML_TYPE_Q4_0 || w->type == GGML_TYPE_Q4_1) {
        float blk[KIPP_QBLOCK];
        for (uint64_t b = 0; b < w->cols / KIPP_QBLOCK; b++) {
            if (w->type == GGML_TYPE_Q8_0)
                kipp_dequantize_q8_0((const kipp_block_q8_0 *)row + b, KIPP_QBLOCK, blk);
            else if (w->type == GGML_TYPE_Q4_0)
                kipp_dequantize_q4_0((const kipp_block_q4_0 *)row + b, KIPP_QBLOCK, blk);
            else
                kipp_dequantize_q4_1((const kipp_block_q4_1 *)row + b, KIPP_QBLOCK, blk);
            const float *xb = x + b * KIPP_QBLOCK;
            for (int j = 0; j < KIPP_QBLOCK; j++) acc += blk[j] * xb[j];
        }
        return acc;
    }
    for (uint64_t j = 0; j < w->cols; j++) acc += weight_at(w->type, row, j) * x[j];
    return acc;
}

void kipp_ref_row_f32(const kipp_tensor *w, uint64_t r, float *out) {
    const void *row = row_ptr(w, r);
    for (uint64_t j = 0; j < w->cols; j++) out[j] = weight_at(w->type, row, j);
}

void kipp_ref_matvec(float *out, const kipp_tensor *w, const float *x) {
    for (uint64_t r = 0; r < w->rows; r++) out[r] = kipp_ref_row_dot(w, r, x);
}

void kipp_ref_rmsnorm(float *out, const float *x, const float *weight, size_t n) {
    float ss = 0.0f;
    for (size_t i = 0; i < n; i++) ss += x[i] * x[i];
    float inv = 1.0f / sqrtf(ss / (float)n + KIPP_RMS_EPS);
    for (size_t i = 0; i < n; i++) out[i] = x[i] * inv * weight[i];
}

void kipp_ref_softmax(float *x, size_t n) {
    float max = x[0];
    for (size_t i = 1; i < n; i++)
        if (x[i] > max) max = x[i];
    float sum = 0.0f;
    for (size_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += x[i];
    }
    for (size_t i = 0; i < n; i++) x[i] /= sum;
}
