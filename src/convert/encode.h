/* Per-tensor encoders: BF16 source elements in, artifact bytes out. One
 * entry per output format, so a quantization scheme is one more table row
 * (DESIGN §3). Every encoder consumes whole 32-element blocks; chunks are
 * multiples of 32 elements and every family dimension is too, so a block
 * never straddles a row. */
#ifndef KIPP_CONVERT_ENCODE_H
#define KIPP_CONVERT_ENCODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/artifact.h" /* kipp_quant_scheme */

/* src: n BF16 values (n a multiple of 32); dst: bytes_for(n) bytes;
 * scratch: n floats, for encoders that widen first. */
typedef void (*kipp_encode_fn)(const uint16_t *src, size_t n, void *dst, float *scratch);

typedef struct kipp_encoder {
    uint32_t ggml_type;
    kipp_encode_fn encode;
    uint32_t block_elems; /* elements per block */
    uint32_t block_bytes; /* bytes per block */
} kipp_encoder;

/* The encoder for a ggml type: BF16 (copy), F32 (exact widening), Q8_0,
 * Q4_0, Q4_1. NULL for others. */
const kipp_encoder *kipp_encoder_for(uint32_t type);

typedef struct kipp_scheme_info {
    const char *name;        /* kipp.quant.scheme */
    kipp_quant_scheme scheme;
    uint32_t proj_type;      /* ggml type of the seven per-layer projections */
    uint32_t file_type;      /* general.file_type (llama.cpp's LLAMA_FTYPE) */
} kipp_scheme_info;

/* NULL for an unknown name. */
const kipp_scheme_info *kipp_scheme_lookup(const char *name);

#endif
