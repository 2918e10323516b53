/* The internal backend contract (DESIGN §6, §7). core/ owns sessions, their
 * lengths and block tables and the pool's bookkeeping (core/kv_pool.h),
 * checks capacities and arguments, and calls a backend through this table.
 * The backend owns the K/V bytes: one store of pool blocks per KV format
 * (kv_create), addressed only through a session's block table
 * (physical position = table[pos >> 5] * 32 + (pos & 31)). Backends include
 * nothing from cli/ or server/.
 *
 * eval: each item appends n_tokens at kv->length (positions
 * [kv->length, kv->length + n_tokens)), writes their K/V into the blocks
 * named by kv->block_table (core has already given the item every block it
 * needs, all private to it) and writes logits for the last n_logits
 * positions. The backend does NOT advance kv->length; the caller does after
 * every item succeeded. Items name distinct sessions and have already been
 * checked against capacity. */
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
    /* Allocates the K/V memory of the pool for one format: n_blocks blocks
     * of 32 positions over every layer. Called at most once per format,
     * before the first session of that format; freed by model_destroy. */
    int (*kv_create)(void *model_state, kipp_kv_quant quant, uint32_t n_blocks,
                     kipp_error *err);
    /* Copies positions [0, n_positions) of block src to block dst (every
     * layer, K and V): a private copy of a shared block's head. */
    void (*kv_copy)(void *model_state, kipp_kv_quant quant, uint32_t dst, uint32_t src,
                    uint32_t n_positions);
    /* The backend reads and writes a Q8_0 KV cache (kv->quant ==
     * KIPP_KV_Q8_0); sessions asking for one are refused otherwise. */
    bool kv_q8_0;
    /* kipp_model_profile (may be NULL: the backend keeps no profile). */
    size_t (*profile)(void *model_state, kipp_profile_step *out, size_t cap);
} kipp_backend_ops;

/* Each backend's table, defined in its own directory; only src/backends.c
 * (and tests that drive one backend directly) name them. */
extern const kipp_backend_ops kipp_backend_ref;
extern const kipp_backend_ops kipp_backend_cpu;

/* The compiled-in backend of that kind, or NULL (src/backends.c). */
const kipp_backend_ops *kipp_backend_find(kipp_backend_kind kind);

#endif
