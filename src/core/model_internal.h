/* What a kipp_model is inside the library. Only core/ and the backends'
 * glue include this; cli/ and server/ see the opaque handle. */
#ifndef KIPP_MODEL_INTERNAL_H
#define KIPP_MODEL_INTERNAL_H

#include "backend.h"
#include "core/artifact.h"
#include "core/kv_pool.h"
#include "core/tokenizer.h"
#include "kipp.h"

struct kipp_model {
    kipp_artifact artifact;        /* mapping + validated weights */
    kipp_tokenizer *tokenizer;
    kipp_backend_kind backend_kind;
    const kipp_backend_ops *backend; /* NULL for KIPP_BACKEND_NONE */
    void *backend_state;
    int live_sessions;             /* models die after their sessions */
    /* normal tokens sorted by bytes, for grammar masks; built on first use
     * (core/grammar.c) */
    struct kipp_vocab_index *vocab_index;
    uint32_t kv_pool_mib;          /* from kipp_model_options; 0 = one context */
    /* The output head the backend reads: as stored, or a Q8_0 copy made at
     * open (head_copy, owned; artifact.weights.output points at it). */
    kipp_head_quant head_quant;
    void *head_copy;
    /* The shared KV pool, one per format, made at its first session
     * (kipp_model_pool); the backend holds the matching K/V store. */
    kipp_kv_pool *pools[2];
};

void kipp_vocab_index_free(struct kipp_vocab_index *v);

/* kipp_model_open with the backend's ops table already chosen (NULL when
 * the build has none for options->backend: the open then fails with
 * KIPP_E_BACKEND after the artifact checks, as an unavailable backend must).
 * The public kipp_model_open lives in src/backends.c, which owns the table;
 * core never names a backend. */
int kipp_model_open_with(const char *path, const kipp_model_options *options,
                         const kipp_backend_ops *ops, kipp_model **out, kipp_error *err);

/* The model's pool for `quant`, created (with the backend's store) on first
 * use. Thread-safe. */
int kipp_model_pool(kipp_model *m, kipp_kv_quant quant, kipp_kv_pool **out, kipp_error *err);
/* Blocks a pool of this model gets for `quant` (kv_pool_mib or one context). */
uint32_t kipp_model_pool_blocks(const kipp_model *m, kipp_kv_quant quant);
/* live_sessions += delta, under the model lock (sessions of one model may
 * be created and destroyed on different threads). */
void kipp_model_count_session(kipp_model *m, int delta);
/* Frees the pools' bookkeeping (model close; in-memory test models). */
void kipp_model_release_pools(kipp_model *m);

#endif
