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

/* kipp_model_open with the backend's ops table already chosen (NULL when
 * the build has none for options->backend: the open then fails with
 * KIPP_E_BACKEND after the artifact checks, as an unavailable backend must).
 * The public kipp_model_open lives in src/backends.c, which owns the table;
 * core never names a backend. */
int kipp_model_open_with(const char *path, const kipp_model_options *options,
                         const kipp_backend_ops *ops, kipp_model **out, kipp_error *err);

#endif
