/* What a kipp_model is inside the library. Only core/ and the backends'
 * glue include this; cli/ and server/ see the opaque handle. */
#ifndef KIPP_MODEL_INTERNAL_H
#define KIPP_MODEL_INTERNAL_H

#include "backend.h"
#include "core/artifact.h"
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
};

void kipp_vocab_index_free(struct kipp_vocab_index *v);

#endif
