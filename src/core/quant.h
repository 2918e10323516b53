/* Weight and KV block formats (DESIGN §3, §6): ggml's published layouts, so
 * llama.cpp reads our files. Every format works on 32-value blocks along the
 * input dimension. Encoders quantize against the fp16-ROUNDED scale (and
 * min), so encode -> decode is exactly what a decoder computes: the decoder
 * sees the same d the encoder divided by.
 *
 * Nibble order (Q4_0, Q4_1) is ggml's: byte j holds element j in its low
 * nibble and element j + 16 in its high nibble. */
#ifndef KIPP_QUANT_H
#define KIPP_QUANT_H

#include <stddef.h>
#include <stdint.h>

#define KIPP_QBLOCK 32

typedef struct kipp_block_q8_0 {
    uint16_t d;        /* fp16 scale */
    int8_t qs[32];     /* value = d * q */
} kipp_block_q8_0;     /* 34 bytes */

typedef struct kipp_block_q4_0 {
    uint16_t d;        /* fp16 scale */
    uint8_t qs[16];    /* value = d * (q - 8), q in [0, 15] */
} kipp_block_q4_0;     /* 18 bytes */

typedef struct kipp_block_q4_1 {
    uint16_t d;        /* fp16 scale */
    uint16_t m;        /* fp16 minimum */
    uint8_t qs[16];    /* value = d * q + m, q in [0, 15] */
} kipp_block_q4_1;     /* 20 bytes */

_Static_assert(sizeof(kipp_block_q8_0) == 34, "Q8_0 block is 34 bytes");
_Static_assert(sizeof(kipp_block_q4_0) == 18, "Q4_0 block is 18 bytes");
_Static_assert(sizeof(kipp_block_q4_1) == 20, "Q4_1 block is 20 bytes");

/* n must be a multiple of 32. out holds n / 32 blocks. */
void kipp_quantize_q8_0(const float *x, size_t n, kipp_block_q8_0 *out);
void kipp_quantize_q4_0(const float *x, size_t n, kipp_block_q4_0 *out);
void kipp_quantize_q4_1(const float *x, size_t n, kipp_block_q4_1 *out);
/* BF16 values widened (exactly) into scratch[n], then kipp_quantize_q8_0:
 * the converter's Q8_0 encoding of BF16 weights, and the load-time Q8_0
 * copy of the output head (kipp_weights_quantize_head). */
void kipp_quantize_q8_0_bf16(const uint16_t *src, size_t n, kipp_block_q8_0 *out, float *scratch);

void kipp_dequantize_q8_0(const kipp_block_q8_0 *b, size_t n, float *out);
void kipp_dequantize_q4_0(const kipp_block_q4_0 *b, size_t n, float *out);
void kipp_dequantize_q4_1(const kipp_block_q4_1 *b, size_t n, float *out);

#endif
