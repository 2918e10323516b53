/* The internal backend contract (DESIGN §7). core/model.c owns sessions and
 * their KV caches, checks capacities and arguments, and calls a backend
 * through this table. Backends include nothing from cli/ or server/.
 *
 * eval: each item appends n_tokens at kv->length (positions
 * [kv->length, kv->length + n_tokens)), writes their K/V into the cache and
 * writes logits for the last n_logits positions. The backend does NOT advance
 * kv->length; the caller does after every item succeeded. Items name
 * distinct sessions and have already been checked against capacity. */
#ifndef KIPP_BACKEND_H
#define KIPP_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/artifact.h"
#include "core/kv.h"
#include "kipp.h"

typedef struct kipp_backend_item {
    kipp_kv_cache *kv;
    void *session_state; /* from session_create */
    const int32_t *tokens;
    uint32_t n_tokens;
    uint32_t n_logits;
    float *logits;       /* [n_logits][KIPP_VOCAB_SIZE] */
} kipp_backend_item;

typedef struct kipp_backend_ops {
    const char *name;
    int (*model_create)(const kipp_artifact *artifact,
                        const kipp_model_options *options, void **model_state,
                        kipp_error *err);
    void (*model_destroy)(void *model_state);
    /* Per-session backend state (may be NULL). */
    int (*session_create)(void *model_state, kipp_kv_cache *kv,
                          void **session_state, kipp_error *err);
    void (*session_destroy)(void *model_state, void *session_state);
    int (*eval)(void *model_state, kipp_backend_item *items, size_t n_items,
                kipp_error *err);
    /* The backend reads and writes a Q8_0 KV cache (kv->quant ==
     * KIPP_KV_Q8_0); sessions asking for one are refused otherwise. */
    bool kv_q8_0;
} kipp_backend_ops;

/* Each backend's table, defined in its own directory; only src/backends.c
 * (and tests that drive one backend directly) name them. */
extern const kipp_backend_ops kipp_backend_ref;
extern const kipp_backend_ops kipp_backend_cpu;

/* The compiled-in backend of that kind, or NULL (src/backends.c). */
const kipp_backend_ops *kipp_backend_find(kipp_backend_kind kind);

#endif
