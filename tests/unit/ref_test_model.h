/* A kipp_model built in memory for engine tests that must not wait for the
 * GGUF loader: the synthetic-tiny registry entry's exact shapes, weights from
 * a fixed integer PRNG (BF16 projections and embedding, F32 norms), the
 * `ref` backend bound directly. No tokenizer. Also opens the real fixture
 * model when it exists, so each test can run on both. */
#ifndef KIPP_REF_TEST_MODEL_H
#define KIPP_REF_TEST_MODEL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "test_util.h"
#include "core/gguf.h"
#include "core/model_internal.h"

typedef struct test_model {
    kipp_model *model;
    bool in_memory; /* built here (free the weights) vs opened from a file */
    void *blob;     /* all weight storage of an in-memory model */
} test_model;

static uint64_t tm_rng = 0x1234567887654321ull;
static inline float tm_uniform(void) { /* [-1, 1) */
    tm_rng ^= tm_rng << 13;
    tm_rng ^= tm_rng >> 7;
    tm_rng ^= tm_rng << 17;
    return (float)((double)(tm_rng >> 11) * 0x1.0p-52 - 1.0);
}

/* Carves tensors out of one blob: BF16 matrices scaled 1/sqrt(cols) so
 * activations stay O(1), F32 norm vectors near 1. */
static inline kipp_tensor tm_matrix(uint8_t **cursor, uint64_t rows, uint64_t cols, float scale) {
    uint16_t *d = (uint16_t *)*cursor;
    for (uint64_t i = 0; i < rows * cols; i++) d[i] = kipp_f32_to_bf16(tm_uniform() * scale);
    *cursor += rows * cols * 2;
    return (kipp_tensor){d, GGML_TYPE_BF16, rows, cols, rows * cols * 2};
}
static inline kipp_tensor tm_vector(uint8_t **cursor, uint64_t n) {
    float *d = (float *)*cursor;
    for (uint64_t i = 0; i < n; i++) d[i] = 1.0f + 0.25f * tm_uniform();
    *cursor += n * 4;
    return (kipp_tensor){d, GGML_TYPE_F32, 1, n, n * 4};
}

static inline int test_model_memory(const char *registry_id, test_model *out) {
    memset(out, 0, sizeof *out);
    const kipp_checkpoint *c = kipp_registry_find_id(registry_id);
    if (!c) return 1;
    uint64_t H = c->hidden, A = (uint64_t)c->heads * 128, F = c->ffn, V = KIPP_VOCAB_SIZE;
    uint64_t per_layer = 2 * (H * A * 2 + H * 1024 * 2 + F * H * 3) + 4 * (2 * H + 256);
    uint64_t total = 2 * V * H * (c->tied ? 1 : 2) + 4 * H + c->layers * per_layer;
    kipp_model *m = calloc(1, sizeof *m);
    uint8_t *blob = malloc(total);
    kipp_layer_weights *layers = calloc(c->layers, sizeof *layers);
    if (!m || !blob || !layers) return 1;
    uint8_t *cur = blob;
    kipp_weights *w = &m->artifact.weights;
    w->token_embd = tm_matrix(&cur, V, H, 1.0f);
    w->output_norm = tm_vector(&cur, H);
    w->output = c->tied ? w->token_embd : tm_matrix(&cur, V, H, 1.0f);
    for (uint32_t l = 0; l < c->layers; l++) {
        kipp_layer_weights *L = &layers[l];
        float sh = 1.0f / sqrtf((float)H) * 1.7f, sa = 1.0f / sqrtf((float)A) * 1.7f,
              sf = 1.0f / sqrtf((float)F) * 1.7f;
        L->attn_norm = tm_vector(&cur, H);
        L->attn_q = tm_matrix(&cur, A, H, sh);
        L->attn_k = tm_matrix(&cur, 1024, H, sh);
        L->attn_v = tm_matrix(&cur, 1024, H, sh);
        L->attn_output = tm_matrix(&cur, H, A, sa);
        L->attn_q_norm = tm_vector(&cur, 128);
        L->attn_k_norm = tm_vector(&cur, 128);
        L->ffn_norm = tm_vector(&cur, H);
        L->ffn_gate = tm_matrix(&cur, F, H, sh);
        L->ffn_up = tm_matrix(&cur, F, H, sh);
        L->ffn_down = tm_matrix(&cur, H, F, sf);
    }
    w->layers = layers;
    m->artifact.checkpoint = c;
    m->backend_kind = KIPP_BACKEND_REF;
    kipp_error err = {0};
    kipp_model_options opts = test_model_options(KIPP_BACKEND_REF, 0, NULL);
    if (kipp_backend_ref.model_create(&m->artifact, &opts, &m->backend_state, &err)) {
        fprintf(stderr, "in-memory model: %s\n", err.message);
        return 1;
    }
    m->backend = &kipp_backend_ref;
    out->model = m;
    out->in_memory = true;
    out->blob = blob;
    return 0;
}

/* Opens $BUILD/models/NAME.gguf with the ref backend; 1 if absent or it
 * fails (with the reason printed). */
static inline int test_model_file(const char *name, test_model *out) {
    memset(out, 0, sizeof *out);
    char path[512];
    snprintf(path, sizeof path, "%s/models/%s.gguf", test_build_dir(), name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        char why[600];
        snprintf(why, sizeof why, "fixture %s not found (make fixtures)", path);
        test_skip_part(TEST_SKIP_MISSING, name, why);
        return 1;
    }
    fclose(f);
    kipp_error err = {0};
    kipp_model_options opts = test_model_options(KIPP_BACKEND_REF, 0, NULL);
    if (kipp_model_open(path, &opts, &out->model, &err)) {
        fprintf(stderr, "cannot open fixture %s: %s\n", path, err.message);
        return 2;
    }
    return 0;
}

static inline void test_model_close(test_model *t) {
    if (!t->model) return;
    if (t->in_memory) {
        kipp_model_release_pools(t->model);
        kipp_backend_ref.model_destroy(t->model->backend_state);
        free(t->model->artifact.weights.layers);
        free(t->blob);
        free(t->model);
    } else {
        kipp_model_close(t->model);
    }
    memset(t, 0, sizeof *t);
}

static inline size_t test_argmax(const float *x, size_t n) {
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

#endif
