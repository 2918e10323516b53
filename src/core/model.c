/* Model lifecycle: open = strict artifact load + tokenizer + the one backend
 * the caller asked for. No silent fallback: an unavailable backend fails.
 *
 * Core knows no backend by name: src/backends.c (above core) owns the table
 * of compiled-in backends and passes the chosen ops table down through
 * kipp_model_open_with. */
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/model_internal.h"

const char *kipp_backend_name(kipp_backend_kind kind) {
    switch (kind) {
    case KIPP_BACKEND_NONE: return "none";
    case KIPP_BACKEND_REF: return "ref";
    case KIPP_BACKEND_CPU: return "cpu";
    case KIPP_BACKEND_CUDA: return "cuda";
    }
    return "unknown";
}

const char *kipp_cpu_isa_name(kipp_cpu_isa isa) {
    switch (isa) {
    case KIPP_CPU_ISA_AUTO: return "auto";
    case KIPP_CPU_ISA_GENERIC: return "generic";
    case KIPP_CPU_ISA_AVX2: return "avx2";
    case KIPP_CPU_ISA_AVX512: return "avx512";
    }
    return NULL;
}

int kipp_cpu_isa_parse(const char *name, kipp_cpu_isa *out, kipp_error *err) {
    if (!name || !out) return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_cpu_isa_parse: NULL argument");
    static const kipp_cpu_isa all[] = {KIPP_CPU_ISA_AUTO, KIPP_CPU_ISA_GENERIC, KIPP_CPU_ISA_AVX2,
                                       KIPP_CPU_ISA_AVX512};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (strcmp(name, kipp_cpu_isa_name(all[i])) == 0) {
            *out = all[i];
            return KIPP_OK;
        }
    }
    return kipp_fail(err, KIPP_E_ARGUMENT,
                     "unknown cpu kernel tier '%s' (auto, avx512, avx2, generic)", name);
}

int kipp_model_open_with(const char *path, const kipp_model_options *options,
                         const kipp_backend_ops *ops, kipp_model **out, kipp_error *err) {
    if (!path || !out) return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_model_open: NULL argument");
    *out = NULL;
    kipp_model_options defaults = {0};
    if (!options) options = &defaults;
    kipp_model *m = kipp_calloc(1, sizeof *m, err);
    if (!m) return KIPP_E_MEMORY;
    m->backend_kind = options->backend;
    int rc = kipp_artifact_open(path, &m->artifact, err);
    if (rc) {
        free(m);
        return rc;
    }
    rc = kipp_tokenizer_create(&m->artifact, &m->tokenizer, err);
    if (rc) goto fail;
    if (options->backend != KIPP_BACKEND_NONE) {
        if (!ops) {
            rc = kipp_fail(err, KIPP_E_BACKEND, "backend '%s' is not available in this build",
                           kipp_backend_name(options->backend));
            goto fail;
        }
        rc = ops->model_create(&m->artifact, options, &m->backend_state, err);
        if (rc) {
            kipp_fail_prefix(err, "backend '%s' could not start", ops->name);
            goto fail;
        }
        m->backend = ops;
    }
    *out = m;
    return KIPP_OK;
fail:
    kipp_tokenizer_destroy(m->tokenizer);
    kipp_vocab_index_free(m->vocab_index);
    kipp_artifact_close(&m->artifact);
    free(m);
    return rc;
}

void kipp_model_close(kipp_model *m) {
    if (!m) return;
    if (m->backend) m->backend->model_destroy(m->backend_state);
    kipp_tokenizer_destroy(m->tokenizer);
    kipp_vocab_index_free(m->vocab_index);
    kipp_artifact_close(&m->artifact);
    free(m);
}

const kipp_checkpoint *kipp_model_checkpoint(const kipp_model *m) {
    return m ? m->artifact.checkpoint : NULL;
}

const char *kipp_model_quant_scheme(const kipp_model *m) {
    return m ? kipp_quant_scheme_name(m->artifact.quant) : NULL;
}

const char *kipp_model_chat_template(const kipp_model *m) {
    return m ? m->artifact.chat_template : NULL;
}

int kipp_tokenize(const kipp_model *m, const char *text, size_t length,
                  int32_t **ids, size_t *n_ids, kipp_error *err) {
    if (!m || (!text && length) || !ids || !n_ids)
        return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_tokenize: NULL argument");
    return kipp_tokenizer_encode(m->tokenizer, text ? text : "", length, ids, n_ids, err);
}
