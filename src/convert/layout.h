/* The tensors a registry entry's Hugging Face checkpoint holds, and what each
 * becomes in the artifact: one table shared by `kipp synth` (which writes
 * them) and `kipp convert` (which requires exactly them). The order is the
 * artifact's tensor order (docs/CONTRACT-ARTIFACT.md). */
#ifndef KIPP_CONVERT_LAYOUT_H
#define KIPP_CONVERT_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "kipp.h"

typedef enum kipp_tensor_role {
    KIPP_ROLE_EMBED,      /* model.embed_tokens.weight   [vocab, hidden] */
    KIPP_ROLE_FINAL_NORM, /* model.norm.weight           [hidden] */
    KIPP_ROLE_OUTPUT,     /* lm_head.weight (untied only) [vocab, hidden] */
    KIPP_ROLE_NORM,       /* per-layer input/post-attention RMSNorm [hidden] */
    KIPP_ROLE_QK_NORM,    /* per-head q_norm / k_norm     [128] */
    KIPP_ROLE_PROJ,       /* the seven per-layer projections [out, in] */
} kipp_tensor_role;

typedef struct kipp_layout_tensor {
    char hf_name[80];    /* "model.layers.3.self_attn.q_proj.weight" */
    char gguf_name[64];  /* "blk.3.attn_q.weight" */
    uint32_t n_dims;     /* 1 or 2 */
    uint64_t shape[2];   /* Hugging Face order: [out, in] or [n] */
    kipp_tensor_role role;
    uint32_t layer;      /* for per-layer roles */
} kipp_layout_tensor;

/* 2 or 3 global tensors + 11 per layer. */
size_t kipp_layout_count(const kipp_checkpoint *c);
/* Fills *out for tensor index i (0 <= i < count). */
void kipp_layout_at(const kipp_checkpoint *c, size_t i, kipp_layout_tensor *out);
/* Number of elements of a layout tensor. */
uint64_t kipp_layout_elements(const kipp_layout_tensor *t);

#endif
