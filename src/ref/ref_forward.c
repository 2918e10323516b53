/* The `ref` backend: the scalar oracle (DESIGN §5, §7).
 *
 * One readable forward pass, forward_token(), serves prefill and decode:
 * prefill is that function called once per prompt position. Each call
 * appends one position's K/V to the paged cache (BF16, or Q8_0 when the
 * session asked for it) and attends over the cache, reading even the
 * current position back from it, so cached decode
 * and from-scratch recomputation run exactly the same arithmetic and agree
 * bitwise. Single-threaded, FP32 activations and accumulation.
 *
 * Shapes (per checkpoint): hidden = residual width, heads = query heads,
 * attention width = heads * 128 (NOT hidden), 8 KV heads of 128, ffn. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "core/common.h"
#include "core/gguf.h"
#include "ref/ref_ops.h"

#define HALF_DIM (KIPP_HEAD_DIM / 2)

typedef struct ref_model {
    const kipp_checkpoint *ckpt;
    const kipp_weights *w;
    /* The K/V bytes of the model's pool, one store per format (kv_create);
     * sessions reach them only through their block tables. */
    kipp_kv_store kv[2];
    /* theta^(-2i/128) for the 64 rotate-half pairs, in double so that the
     * angle pos * freq stays accurate at long positions. */
    double rope_freq[HALF_DIM];
} ref_model;

/* Per-session scratch, made once at session creation (no allocation per
 * token). Sizes in floats. */
typedef struct ref_scratch {
    float *x;      /* (hidden,)  residual stream */
    float *xn;     /* (hidden,)  normed input of a sub-block / its output */
    float *q;      /* (heads*128,) queries, one 128-slice per head */
    float *k;      /* (8*128,)   this position's keys */
    float *v;      /* (8*128,)   this position's values */
    float *attn;   /* (heads*128,) attention output, heads concatenated */
    float *scores; /* (capacity,) one head's scores over positions 0..pos */
    float *gate;   /* (ffn,) */
    float *up;     /* (ffn,) */
    float rope_cos[HALF_DIM];
    float rope_sin[HALF_DIM];
} ref_scratch;

/* ---- creation: check that every tensor is something we can read -------- */

static bool ref_type_ok(uint32_t type, bool vector) {
    return vector ? type == GGML_TYPE_F32 : kipp_ref_type_supported(type);
}

static int ref_model_create(const kipp_artifact *a, const kipp_model_options *options,
                            void **out, kipp_error *err) {
    const kipp_checkpoint *c = a->checkpoint;
    const kipp_weights *w = &a->weights;
    int rc = kipp_weights_check(c, w, "ref", ref_type_ok, 1, err);
    if (rc) return rc;

    ref_model *m = kipp_calloc(1, sizeof *m, err);
    if (!m) return KIPP_E_MEMORY;
    m->ckpt = c;
    m->w = w;
    for (int i = 0; i < HALF_DIM; i++)
        m->rope_freq[i] = pow(c->rope_theta, -2.0 * i / (double)KIPP_HEAD_DIM);
    *out = m;
    return KIPP_OK;
}

static void ref_model_destroy(void *state) {
    ref_model *m = state;
    if (!m) return;
    kipp_kv_store_destroy(&m->kv[0]);
    kipp_kv_store_destroy(&m->kv[1]);
    free(m);
}

static int ref_kv_create(void *state, kipp_kv_quant quant, uint32_t n_blocks, kipp_error *err) {
    ref_model *m = state;
    return kipp_kv_store_create(&m->kv[quant], m->ckpt->layers, n_blocks, quant, err);
}

static void ref_kv_copy(void *state, kipp_kv_quant quant, uint32_t dst, uint32_t src,
                        uint32_t n_positions) {
    ref_model *m = state;
    kipp_kv_store_copy(&m->kv[quant], dst, src, n_positions);
}

static void scratch_free(ref_scratch *s) {
    if (!s) return;
    free(s->x);
    free(s->xn);
    free(s->q);
    free(s->k);
    free(s->v);
    free(s->attn);
    free(s->scores);
    free(s->gate);
    free(s->up);
    free(s);
}

static int ref_session_create(void *state, kipp_kv_cache *kv, void **out, kipp_error *err) {
    const ref_model *m = state;
    const kipp_checkpoint *c = m->ckpt;
    size_t A = (size_t)c->heads * KIPP_HEAD_DIM;
    ref_scratch *s = kipp_calloc(1, sizeof *s, err);
    if (!s) return KIPP_E_MEMORY;
    s->x = kipp_calloc(c->hidden, sizeof(float), err);
    s->xn = kipp_calloc(c->hidden, sizeof(float), err);
    s->q = kipp_calloc(A, sizeof(float), err);
    s->k = kipp_calloc(KIPP_KV_ROW, sizeof(float), err);
    s->v = kipp_calloc(KIPP_KV_ROW, sizeof(float), err);
    s->attn = kipp_calloc(A, sizeof(float), err);
    s->scores = kipp_calloc(kv->capacity, sizeof(float), err);
    s->gate = kipp_calloc(c->ffn, sizeof(float), err);
    s->up = kipp_calloc(c->ffn, sizeof(float), err);
    if (!s->x || !s->xn || !s->q || !s->k || !s->v || !s->attn || !s->scores || !s->gate ||
        !s->up) {
        scratch_free(s);
        return kipp_fail(err, KIPP_E_MEMORY, "ref backend: out of memory for session scratch");
    }
    *out = s;
    return KIPP_OK;
}

static void ref_session_destroy(void *state, void *session_state) { scratch_free(session_state); }

/* ---- the forward pass ------------------------------------------------- */

/* Rotate-half (NEOX) RoPE on one 128-wide head: pairs (i, i + 64). */
static void rope_head(float *h, const float *cos_t, const float *sin_t) {
    for (int i = 0; i < HALF_DIM; i++) {
        float a = h[i], b = h[i + HALF_DIM];
        h[i] = a * cos_t[i] - b * sin_t[i];
        h[i + HALF_DIM] = b * cos_t[i] + a * sin_t[i];
    }
}

/* One token at position pos: writes its K/V into the cache and, if logits
 * is not NULL, the 151,936 next-token logits. Positions 0..pos-1 must
 * already be in the cache. */
static void forward_token(ref_model *m, ref_scratch *s, const kipp_kv_cache *kv,
                          int32_t token, uint32_t pos, float *logits) {
    kipp_kv_store *st = &m->kv[kv->quant]; /* the pool's bytes; kv->block_table maps */
    const kipp_checkpoint *c = m->ckpt;
    const kipp_weights *w = m->w;
    const size_t H = c->hidden, F = c->ffn;
    const uint32_t group = c->heads / KIPP_KV_HEADS; /* query heads per KV head */
    const float scale = 1.0f / sqrtf((float)KIPP_HEAD_DIM);

    /* Token embedding: x = token_embd[token] (hidden,) */
    kipp_ref_row_f32(&w->token_embd, (uint64_t)token, s->x);

    /* RoPE angles for this position, shared by every layer and head. */
    for (int i = 0; i < HALF_DIM; i++) {
        double angle = (double)pos * m->rope_freq[i];
        s->rope_cos[i] = (float)cos(angle);
        s->rope_sin[i] = (float)sin(angle);
    }

    for (uint32_t l = 0; l < c->layers; l++) {
        const kipp_layer_weights *L = &w->layers[l];

        /* Attention block: xn = RMSNorm(x); q, k, v projections. */
        kipp_ref_rmsnorm(s->xn, s->x, L->attn_norm.data, H);
        kipp_ref_matvec(s->q, &L->attn_q, s->xn); /* (heads*128,) */
        kipp_ref_matvec(s->k, &L->attn_k, s->xn); /* (8*128,) */
        kipp_ref_matvec(s->v, &L->attn_v, s->xn); /* (8*128,) */

        /* Per-head RMSNorm of Q and K (weights (128,)), then RoPE. */
        for (uint32_t h = 0; h < c->heads; h++) {
            float *qh = s->q + (size_t)h * KIPP_HEAD_DIM;
            kipp_ref_rmsnorm(qh, qh, L->attn_q_norm.data, KIPP_HEAD_DIM);
            rope_head(qh, s->rope_cos, s->rope_sin);
        }
        for (uint32_t g = 0; g < KIPP_KV_HEADS; g++) {
            float *kh = s->k + (size_t)g * KIPP_HEAD_DIM;
            kipp_ref_rmsnorm(kh, kh, L->attn_k_norm.data, KIPP_HEAD_DIM);
            rope_head(kh, s->rope_cos, s->rope_sin);
        }

        /* Store this position's K and V in the paged cache in its format
         * (BF16, or Q8_0 blocks along head_dim). Attention below reads them
         * back from the cache like every earlier position, decoded to FP32
         * one head at a time. */
        kipp_kv_write(st, kv->block_table, l, pos, s->k, s->v);

        /* Causal grouped-query attention: query head h reads KV head
         * h / group over positions 0..pos. */
        float head[KIPP_HEAD_DIM]; /* (128,) one cached K or V head as FP32 */
        for (uint32_t h = 0; h < c->heads; h++) {
            const float *qh = s->q + (size_t)h * KIPP_HEAD_DIM;
            uint32_t g = h / group;
            for (uint32_t t = 0; t <= pos; t++) {
                kipp_kv_load_head(st, kv->block_table, 0, l, t, g, head);
                float dot = 0.0f;
                for (int i = 0; i < KIPP_HEAD_DIM; i++) dot += qh[i] * head[i];
                s->scores[t] = dot * scale;
            }
            kipp_ref_softmax(s->scores, (size_t)pos + 1);
            float *out = s->attn + (size_t)h * KIPP_HEAD_DIM;
            memset(out, 0, KIPP_HEAD_DIM * sizeof(float));
            for (uint32_t t = 0; t <= pos; t++) {
                kipp_kv_load_head(st, kv->block_table, 1, l, t, g, head);
                for (int i = 0; i < KIPP_HEAD_DIM; i++) out[i] += s->scores[t] * head[i];
            }
        }

        /* Output projection (heads*128 -> hidden) plus residual. */
        kipp_ref_matvec(s->xn, &L->attn_output, s->attn);
        for (size_t i = 0; i < H; i++) s->x[i] += s->xn[i];

        /* MLP block: x += down(SiLU(gate(xn)) * up(xn)), xn = RMSNorm(x). */
        kipp_ref_rmsnorm(s->xn, s->x, L->ffn_norm.data, H);
        kipp_ref_matvec(s->gate, &L->ffn_gate, s->xn); /* (ffn,) */
        kipp_ref_matvec(s->up, &L->ffn_up, s->xn);     /* (ffn,) */
        for (size_t i = 0; i < F; i++) s->gate[i] = kipp_ref_silu(s->gate[i]) * s->up[i];
        kipp_ref_matvec(s->xn, &L->ffn_down, s->gate);
        for (size_t i = 0; i < H; i++) s->x[i] += s->xn[i];
    }

    /* Final RMSNorm and output head (an alias of token_embd when tied). */
    if (logits) {
        kipp_ref_rmsnorm(s->xn, s->x, w->output_norm.data, H);
        kipp_ref_matvec(logits, &w->output, s->xn); /* (151936,) */
    }
}

/* Items are independent sessions; the oracle runs them one after another
 * (the fast backends batch them so each weight is read once per step).
 * Only the last n_logits positions of an item pay for the output head. */
static int ref_eval(void *state, kipp_backend_item *items, size_t n_items, kipp_error *err) {
    ref_model *m = state;
    for (size_t it = 0; it < n_items; it++) {
        kipp_backend_item *item = &items[it];
        uint32_t first_logit = item->n_tokens - item->n_logits;
        for (uint32_t i = 0; i < item->n_tokens; i++) {
            float *row = i >= first_logit
                             ? item->logits + (size_t)(i - first_logit) * KIPP_VOCAB_SIZE
                             : NULL;
            forward_token(m, item->session_state, item->kv, item->tokens[i],
                          item->kv->length + i, row);
        }
    }
    return KIPP_OK;
}

const kipp_backend_ops kipp_backend_ref = {
    .name = "ref",
    .model_create = ref_model_create,
    .model_destroy = ref_model_destroy,
    .session_create = ref_session_create,
    .session_destroy = ref_session_destroy,
    .eval = ref_eval,
    .kv_create = ref_kv_create,
    .kv_copy = ref_kv_copy,
    .kv_q8_0 = true,
};
