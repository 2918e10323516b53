#include "convert/layout.h"

#include <stdio.h>
#include <string.h>

/* Per-layer tensors in artifact order. Shapes are expressed through the
 * entry: H = hidden, A = attention width (heads * 128, NOT the hidden width),
 * KV = 8 * 128, F = feed-forward width, D = 128. */
enum dim { DIM_H, DIM_A, DIM_KV, DIM_F, DIM_D, DIM_NONE };

static const struct {
    const char *hf;   /* suffix after "model.layers.N." */
    const char *gguf; /* suffix after "blk.N." */
    kipp_tensor_role role;
    enum dim out, in; /* in == DIM_NONE: a vector of `out` elements */
} per_layer[] = {
    {"input_layernorm.weight", "attn_norm.weight", KIPP_ROLE_NORM, DIM_H, DIM_NONE},
    {"self_attn.q_proj.weight", "attn_q.weight", KIPP_ROLE_PROJ, DIM_A, DIM_H},
    {"self_attn.k_proj.weight", "attn_k.weight", KIPP_ROLE_PROJ, DIM_KV, DIM_H},
    {"self_attn.v_proj.weight", "attn_v.weight", KIPP_ROLE_PROJ, DIM_KV, DIM_H},
    {"self_attn.o_proj.weight", "attn_output.weight", KIPP_ROLE_PROJ, DIM_H, DIM_A},
    {"self_attn.q_norm.weight", "attn_q_norm.weight", KIPP_ROLE_QK_NORM, DIM_D, DIM_NONE},
    {"self_attn.k_norm.weight", "attn_k_norm.weight", KIPP_ROLE_QK_NORM, DIM_D, DIM_NONE},
    {"post_attention_layernorm.weight", "ffn_norm.weight", KIPP_ROLE_NORM, DIM_H, DIM_NONE},
    {"mlp.gate_proj.weight", "ffn_gate.weight", KIPP_ROLE_PROJ, DIM_F, DIM_H},
    {"mlp.up_proj.weight", "ffn_up.weight", KIPP_ROLE_PROJ, DIM_F, DIM_H},
    {"mlp.down_proj.weight", "ffn_down.weight", KIPP_ROLE_PROJ, DIM_H, DIM_F},
};
#define PER_LAYER (sizeof per_layer / sizeof per_layer[0])

static uint64_t dim_value(const kipp_checkpoint *c, enum dim d) {
    switch (d) {
    case DIM_H: return c->hidden;
    case DIM_A: return (uint64_t)c->heads * KIPP_HEAD_DIM;
    case DIM_KV: return (uint64_t)KIPP_KV_HEADS * KIPP_HEAD_DIM;
    case DIM_F: return c->ffn;
    case DIM_D: return KIPP_HEAD_DIM;
    case DIM_NONE: break;
    }
    return 0;
}

static size_t n_global(const kipp_checkpoint *c) { return c->tied ? 2 : 3; }

size_t kipp_layout_count(const kipp_checkpoint *c) {
    return n_global(c) + (size_t)c->layers * PER_LAYER;
}

void kipp_layout_at(const kipp_checkpoint *c, size_t i, kipp_layout_tensor *out) {
    memset(out, 0, sizeof *out);
    if (i < n_global(c)) {
        if (i == 0) {
            snprintf(out->hf_name, sizeof out->hf_name, "model.embed_tokens.weight");
            snprintf(out->gguf_name, sizeof out->gguf_name, "token_embd.weight");
            out->role = KIPP_ROLE_EMBED;
        } else if (i == 1) {
            snprintf(out->hf_name, sizeof out->hf_name, "model.norm.weight");
            snprintf(out->gguf_name, sizeof out->gguf_name, "output_norm.weight");
            out->role = KIPP_ROLE_FINAL_NORM;
            out->n_dims = 1;
            out->shape[0] = c->hidden;
            return;
        } else {
            snprintf(out->hf_name, sizeof out->hf_name, "lm_head.weight");
            snprintf(out->gguf_name, sizeof out->gguf_name, "output.weight");
            out->role = KIPP_ROLE_OUTPUT;
        }
        out->n_dims = 2;
        out->shape[0] = KIPP_VOCAB_SIZE;
        out->shape[1] = c->hidden;
        return;
    }
    size_t k = i - n_global(c);
    uint32_t layer = (uint32_t)(k / PER_LAYER);
    size_t j = k % PER_LAYER;
    snprintf(out->hf_name, sizeof out->hf_name, "model.layers.%u.%s", layer, per_layer[j].hf);
    snprintf(out->gguf_name, sizeof out->gguf_name, "blk.%u.%s", layer, per_layer[j].gguf);
    out->role = per_layer[j].role;
    out->layer = layer;
    out->shape[0] = dim_value(c, per_layer[j].out);
    if (per_layer[j].in == DIM_NONE) {
        out->n_dims = 1;
    } else {
        out->n_dims = 2;
        out->shape[1] = dim_value(c, per_layer[j].in);
    }
}

uint64_t kipp_layout_elements(const kipp_layout_tensor *t) {
    return t->n_dims == 1 ? t->shape[0] : t->shape[0] * t->shape[1];
}
