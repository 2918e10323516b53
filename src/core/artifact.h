/* The strict loader: maps a GGUF artifact read-only, finds its registry entry
 * by (kipp.source.repository, kipp.source.revision), requires every recorded
 * dimension, tensor name, shape, type, offset and length to be exactly what
 * that entry implies, and binds the weights structure the backends read.
 * Every rejection has its own message. */
#ifndef KIPP_ARTIFACT_H
#define KIPP_ARTIFACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"
#include "kipp.h"

/* A 2-D weight matrix [rows][cols] (GGUF ne0 = cols = input dimension) or a
 * 1-D vector (rows = 1). data points into the mapping. */
typedef struct kipp_tensor {
    const void *data;
    uint32_t type;   /* ggml_type */
    uint64_t rows;   /* output dimension (ne1) */
    uint64_t cols;   /* input dimension (ne0) */
    uint64_t nbytes;
} kipp_tensor;

typedef struct kipp_layer_weights {
    kipp_tensor attn_norm;   /* [hidden] F32 */
    kipp_tensor attn_q;      /* [heads*128][hidden] */
    kipp_tensor attn_k;      /* [8*128][hidden] */
    kipp_tensor attn_v;      /* [8*128][hidden] */
    kipp_tensor attn_output; /* [hidden][heads*128] */
    kipp_tensor attn_q_norm; /* [128] F32 */
    kipp_tensor attn_k_norm; /* [128] F32 */
    kipp_tensor ffn_norm;    /* [hidden] F32 */
    kipp_tensor ffn_gate;    /* [ffn][hidden] */
    kipp_tensor ffn_up;      /* [ffn][hidden] */
    kipp_tensor ffn_down;    /* [hidden][ffn] */
} kipp_layer_weights;

typedef struct kipp_weights {
    kipp_tensor token_embd;  /* [vocab][hidden] BF16 */
    kipp_tensor output_norm; /* [hidden] F32 */
    kipp_tensor output;      /* [vocab][hidden] BF16; == token_embd when tied */
    kipp_layer_weights *layers; /* [ckpt->layers] */
} kipp_weights;

/* Quantization schemes (kipp.quant.scheme). */
typedef enum kipp_quant_scheme {
    KIPP_QUANT_BF16,
    KIPP_QUANT_Q8_0,
    KIPP_QUANT_AFFINE4_GS32,
    KIPP_QUANT_SCALE4_GS32,
} kipp_quant_scheme;

const char *kipp_quant_scheme_name(kipp_quant_scheme s);
bool kipp_quant_scheme_parse(const char *name, kipp_quant_scheme *out);
/* GGUF type used for the seven per-layer projections under a scheme. */
uint32_t kipp_quant_scheme_ggml_type(kipp_quant_scheme s);

typedef struct kipp_artifact {
    const uint8_t *map;  /* read-only mapping of the whole file */
    size_t map_size;
    bool owns_map;       /* close() unmaps (kipp_artifact_open, not _memory) */
    gguf_file gguf;
    const kipp_checkpoint *checkpoint;
    kipp_quant_scheme quant;
    kipp_weights weights;
    /* Tokenizer metadata (pointers into the mapping, validated). */
    const gguf_kv *tokens;      /* tokenizer.ggml.tokens, 151936 strings */
    const gguf_kv *token_types; /* tokenizer.ggml.token_type, INT32 */
    const gguf_kv *merges;      /* tokenizer.ggml.merges */
    const char *chat_template;  /* NUL-terminated copy, or NULL (base) */
} kipp_artifact;

int kipp_artifact_open(const char *path, kipp_artifact *out, kipp_error *err);
/* The same validation over an in-memory image (tests, fuzzing). The image
 * must outlive the artifact; close does not unmap it. */
int kipp_artifact_open_memory(const uint8_t *image, size_t size,
                              kipp_artifact *out, kipp_error *err);
void kipp_artifact_close(kipp_artifact *a);

/* A backend's check of the bound weights before it starts: every tensor
 * present with the entry's shape (backends also accept hand-built weights
 * in tests, which never went through the loader), input widths a multiple
 * of k_align, and each tensor's type accepted by the backend's predicate
 * (`vector` is true for the 1-D norm weights). Messages name the backend. */
typedef bool (*kipp_weight_type_ok)(uint32_t ggml_type, bool vector);
int kipp_weights_check(const kipp_checkpoint *c, const kipp_weights *w, const char *backend,
                       kipp_weight_type_ok type_ok, uint64_t k_align, kipp_error *err);

/* Replaces the bound BF16 output head w->output with a Q8_0 copy (the
 * converter's encoder, row by row, rows split over up to `threads`
 * threads; the bytes do not depend on it); *owned is the copy, for free()
 * after the backend is gone. w->token_embd is untouched (a tied head's
 * embedding lookup keeps BF16). */
int kipp_weights_quantize_head(kipp_weights *w, int threads, void **owned, kipp_error *err);

#endif
