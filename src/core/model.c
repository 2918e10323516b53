/* Model lifecycle: open = strict artifact load + tokenizer + the one backend
 * the caller asked for. No silent fallback: an unavailable backend fails.
 *
 * Core knows no backend by name: src/backends.c (above core) owns the table
 * of compiled-in backends and passes the chosen ops table down through
 * kipp_model_open_with. */
#include <pthread.h>
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
    case KIPP_CPU_ISA_AVX512BF16: return "avx512bf16";
    case KIPP_CPU_ISA_AMX: return "amx";
    case KIPP_CPU_ISA_AVX2I8: return "avx2i8";
    case KIPP_CPU_ISA_AVX512I8: return "avx512i8";
    }
    return NULL;
}

const char *kipp_cpu_decode_prefetch_name(kipp_cpu_decode_prefetch pf) {
    switch (pf) {
    case KIPP_CPU_DECODE_PREFETCH_AUTO: return "auto";
    case KIPP_CPU_DECODE_PREFETCH_ROWS: return "rows";
    case KIPP_CPU_DECODE_PREFETCH_SEQ: return "seq";
    }
    return NULL;
}

int kipp_cpu_isa_parse(const char *name, kipp_cpu_isa *out, kipp_error *err) {
    if (!name || !out) return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_cpu_isa_parse: NULL argument");
    static const kipp_cpu_isa all[] = {KIPP_CPU_ISA_AUTO, KIPP_CPU_ISA_GENERIC, KIPP_CPU_ISA_AVX2,
                                       KIPP_CPU_ISA_AVX512, KIPP_CPU_ISA_AVX512BF16,
                                       KIPP_CPU_ISA_AMX, KIPP_CPU_ISA_AVX2I8,
                                       KIPP_CPU_ISA_AVX512I8};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (strcmp(name, kipp_cpu_isa_name(all[i])) == 0) {
            *out = all[i];
            return KIPP_OK;
        }
    }
    return kipp_fail(err, KIPP_E_ARGUMENT,
                     "unknown cpu kernel tier '%s' (auto, avx512, avx2, generic, avx512bf16, amx, "
                     "avx2i8, avx512i8)",
                     name);
}

const char *kipp_head_quant_name(kipp_head_quant h) {
    switch (h) {
    case KIPP_HEAD_AS_STORED: return "bf16";
    case KIPP_HEAD_Q8_0: return "q8_0";
    }
    return NULL;
}

int kipp_head_quant_parse(const char *name, kipp_head_quant *out, kipp_error *err) {
    if (!name || !out) return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_head_quant_parse: NULL argument");
    if (!strcmp(name, "bf16")) *out = KIPP_HEAD_AS_STORED;
    else if (!strcmp(name, "q8_0")) *out = KIPP_HEAD_Q8_0;
    else return kipp_fail(err, KIPP_E_ARGUMENT, "unknown output head format '%s' (bf16, q8_0)", name);
    return KIPP_OK;
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
    m->kv_pool_mib = options->kv_pool_mib;
    if (!kipp_head_quant_name(options->head_quant)) {
        free(m);
        return kipp_fail(err, KIPP_E_ARGUMENT, "unknown output head format %d (bf16, q8_0)",
                         (int)options->head_quant);
    }
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
        /* Only a backend reads the head, so only then is it requantized. */
        if (options->head_quant == KIPP_HEAD_Q8_0) {
            rc = kipp_weights_quantize_head(&m->artifact.weights,
                                            kipp_resolve_threads(options->threads), &m->head_copy,
                                            err);
            if (rc) goto fail;
            m->head_quant = KIPP_HEAD_Q8_0;
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
    free(m->head_copy);
    kipp_tokenizer_destroy(m->tokenizer);
    kipp_vocab_index_free(m->vocab_index);
    kipp_artifact_close(&m->artifact);
    free(m);
    return rc;
}

void kipp_model_close(kipp_model *m) {
    if (!m) return;
    kipp_model_release_pools(m);
    if (m->backend) m->backend->model_destroy(m->backend_state);
    free(m->head_copy);
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

const char *kipp_model_head_quant(const kipp_model *m) {
    return m ? kipp_head_quant_name(m->head_quant) : NULL;
}

size_t kipp_model_profile(const kipp_model *m, kipp_profile_step *out, size_t cap) {
    if (!m || !m->backend || !m->backend->profile) return 0;
    if (!out) cap = 0; /* the count alone */
    return m->backend->profile(m->backend_state, out, cap);
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

/* ---- the shared KV pool ------------------------------------------------ */

/* Pool creation is rare (once per format per model) and session counting
 * cheap: one process-wide lock keeps kipp_model free of a mutex that
 * in-memory test models would have to initialise. */
static pthread_mutex_t pool_create_lock = PTHREAD_MUTEX_INITIALIZER;

uint32_t kipp_model_pool_blocks(const kipp_model *m, kipp_kv_quant quant) {
    const kipp_checkpoint *c = m->artifact.checkpoint;
    uint64_t per_block = (uint64_t)kipp_kv_bytes_per_position(c->layers, quant) * KIPP_KV_BLOCK;
    uint64_t blocks = m->kv_pool_mib
                          ? ((uint64_t)m->kv_pool_mib << 20) / per_block
                          : ((uint64_t)c->context + KIPP_KV_BLOCK - 1) / KIPP_KV_BLOCK;
    if (blocks == 0) blocks = 1; /* a pool smaller than one block still holds one */
    if (blocks > (1u << 30)) blocks = 1u << 30;
    return (uint32_t)blocks;
}

int kipp_model_pool(kipp_model *m, kipp_kv_quant quant, kipp_kv_pool **out, kipp_error *err) {
    if (quant != KIPP_KV_BF16 && quant != KIPP_KV_Q8_0)
        return kipp_fail(err, KIPP_E_ARGUMENT, "unknown KV cache format %d", (int)quant);
    pthread_mutex_lock(&pool_create_lock);
    int rc = KIPP_OK;
    kipp_kv_pool *p = m->pools[quant];
    if (!p) {
        const kipp_checkpoint *c = m->artifact.checkpoint;
        uint32_t n = kipp_model_pool_blocks(m, quant);
        uint64_t per_block = (uint64_t)kipp_kv_bytes_per_position(c->layers, quant) * KIPP_KV_BLOCK;
        p = kipp_calloc(1, sizeof *p, err);
        rc = p ? kipp_kv_pool_create(p, n, quant, per_block, err) : KIPP_E_MEMORY;
        if (!rc) rc = m->backend->kv_create(m->backend_state, quant, n, err);
        if (rc) {
            if (p) kipp_kv_pool_destroy(p);
            free(p);
            p = NULL;
        }
        m->pools[quant] = p;
    }
    pthread_mutex_unlock(&pool_create_lock);
    *out = p;
    return rc;
}

void kipp_model_count_session(kipp_model *m, int delta) {
    pthread_mutex_lock(&pool_create_lock);
    m->live_sessions += delta;
    pthread_mutex_unlock(&pool_create_lock);
}

void kipp_model_release_pools(kipp_model *m) {
    for (int i = 0; i < 2; i++) {
        kipp_kv_pool_destroy(m->pools[i]);
        free(m->pools[i]);
        m->pools[i] = NULL;
    }
}

int kipp_pool_stats_get(kipp_model *m, kipp_kv_quant quant, kipp_pool_stats *out,
                        kipp_error *err) {
    if (!m || !out) return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_pool_stats_get: NULL argument");
    if (quant != KIPP_KV_BF16 && quant != KIPP_KV_Q8_0)
        return kipp_fail(err, KIPP_E_ARGUMENT, "unknown KV cache format %d", (int)quant);
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&pool_create_lock);
    kipp_kv_pool *p = m->pools[quant];
    pthread_mutex_unlock(&pool_create_lock);
    if (p) {
        kipp_kv_pool_stats(p, out);
        return KIPP_OK;
    }
    const kipp_checkpoint *c = m->artifact.checkpoint;
    out->block_positions = KIPP_KV_BLOCK;
    out->bytes_per_block = (uint64_t)kipp_kv_bytes_per_position(c->layers, quant) * KIPP_KV_BLOCK;
    out->blocks_total = out->blocks_free = kipp_model_pool_blocks(m, quant);
    return KIPP_OK;
}

uint32_t kipp_pool_match_length(kipp_model *m, kipp_kv_quant quant, const int32_t *tokens,
                                size_t n) {
    if (!m || !tokens || (quant != KIPP_KV_BF16 && quant != KIPP_KV_Q8_0)) return 0;
    pthread_mutex_lock(&pool_create_lock);
    kipp_kv_pool *p = m->pools[quant];
    pthread_mutex_unlock(&pool_create_lock);
    if (!p) return 0;
    uint32_t tail_block, tail_len;
    uint32_t full = kipp_kv_pool_match(p, tokens, n, UINT64_MAX, false, NULL, &tail_block,
                                       &tail_len);
    return full * KIPP_KV_BLOCK + tail_len;
}
