/* What a kipp_session is inside the library, plus test-only hooks. Not part
 * of the public API: cli/ and server/ never include this. */
#ifndef KIPP_SESSION_INTERNAL_H
#define KIPP_SESSION_INTERNAL_H

#include "core/kv.h"
#include "kipp.h"

struct kipp_session {
    kipp_model *model;
    kipp_kv_cache kv;    /* paged K/V (BF16 or Q8_0); kv.length is the session length */
    void *backend_state; /* from the backend's session_create */
};

/* TEST HOOK: replace the block table of an EMPTY session (length 0) with
 * `table`, which must be a permutation of 0..n_blocks-1. Lets tests check
 * that a scrambled table gives bitwise the same logits as the identity. */
int kipp_session_set_block_table(kipp_session *s, const uint32_t *table, uint32_t n_blocks,
                                 kipp_error *err);
/* Number of blocks in the session's table. */
uint32_t kipp_session_block_count(const kipp_session *s);

#endif
