#include "convert/encode.h"

#include <string.h>

#include "core/common.h"
#include "core/gguf.h"
#include "core/quant.h"

static void widen(const uint16_t *src, size_t n, float *dst) {
    for (size_t i = 0; i < n; i++) dst[i] = kipp_bf16_to_f32(src[i]);
}

static void enc_bf16(const uint16_t *src, size_t n, void *dst, float *scratch) {
    memcpy(dst, src, n * sizeof *src);
}

/* F32 output is written little-endian byte by byte, independent of host. */
static void enc_f32(const uint16_t *src, size_t n, void *dst, float *scratch) {
    uint8_t *out = dst;
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)src[i] << 16; /* exact widening */
        out[4 * i] = (uint8_t)u;
        out[4 * i + 1] = (uint8_t)(u >> 8);
        out[4 * i + 2] = (uint8_t)(u >> 16);
        out[4 * i + 3] = (uint8_t)(u >> 24);
    }
}

static void enc_q8_0(const uint16_t *src, size_t n, void *dst, float *scratch) {
    kipp_quantize_q8_0_bf16(src, n, dst, scratch);
}

static void enc_q4_0(const uint16_t *src, size_t n, void *dst, float *scratch) {
    widen(src, n, scratch);
    kipp_quantize_q4_0(scratch, n, dst);
}

static void enc_q4_1(const uint16_t *src, size_t n, void *dst, float *scratch) {
    widen(src, n, scratch);
    kipp_quantize_q4_1(scratch, n, dst);
}

static const kipp_encoder encoders[] = {
    {GGML_TYPE_BF16, enc_bf16, 32, 64},
    {GGML_TYPE_F32, enc_f32, 32, 128},
    {GGML_TYPE_Q8_0, enc_q8_0, 32, sizeof(kipp_block_q8_0)},
    {GGML_TYPE_Q4_0, enc_q4_0, 32, sizeof(kipp_block_q4_0)},
    {GGML_TYPE_Q4_1, enc_q4_1, 32, sizeof(kipp_block_q4_1)},
};

const kipp_encoder *kipp_encoder_for(uint32_t type) {
    for (size_t i = 0; i < sizeof encoders / sizeof encoders[0]; i++)
        if (encoders[i].ggml_type == type) return &encoders[i];
    return NULL;
}

/* file_type values are llama.cpp's LLAMA_FTYPE_MOSTLY_* numbers. */
static const kipp_scheme_info schemes[] = {
    {"bf16", KIPP_QUANT_BF16, GGML_TYPE_BF16, 32},
    {"q8_0", KIPP_QUANT_Q8_0, GGML_TYPE_Q8_0, 7},
    {"affine4_gs32", KIPP_QUANT_AFFINE4_GS32, GGML_TYPE_Q4_1, 3},
    {"scale4_gs32", KIPP_QUANT_SCALE4_GS32, GGML_TYPE_Q4_0, 2},
};

const kipp_scheme_info *kipp_scheme_lookup(const char *name) {
    for (size_t i = 0; name && i < sizeof schemes / sizeof schemes[0]; i++)
        if (strcmp(schemes[i].name, name) == 0) return &schemes[i];
    return NULL;
}
