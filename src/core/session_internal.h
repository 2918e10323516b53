/* What a kipp_session is inside the library, plus test-only hooks. Not part
 * of the public API: cli/ and server/ never include this. */
#ifndef KIPP_SESSION_INTERNAL_H
#define KIPP_SESSION_INTERNAL_H

#include "core/kv_pool.h"
#include "kipp.h"

struct kipp_session {
    kipp_model *model;
    kipp_kv_cache kv;    /* length, capacity, block table into the pool */
    kipp_kv_pool *pool;  /* the model's pool for kv.quant */
    int32_t *tokens;     /* [capacity] ids at positions 0..length: publishing keys */
    uint32_t n_published; /* leading blocks of the table that are published */
    uint32_t eval_mark;  /* kv.n_blocks before the current kipp_eval (undo) */
    void *backend_state; /* from the backend's session_create */
};

/* TEST HOOK: give an EMPTY session (length 0, no blocks) the pool blocks
 * `table` (each currently free), as its first n_blocks logical blocks.
 * Lets tests check that a scrambled table gives bitwise the same logits as
 * the identity. n_blocks may not exceed kipp_session_block_count. */
int kipp_session_set_block_table(kipp_session *s, const uint32_t *table, uint32_t n_blocks,
                                 kipp_error *err);
/* Size of the session's block table: ceil(capacity / 32). */
uint32_t kipp_session_block_count(const kipp_session *s);

#endif
