/* Sessions, paged KV and kipp_eval through the public API (plus the
 * block-table test hook). Every property is checked bitwise: the oracle's
 * per-position arithmetic does not depend on how positions are grouped into
 * calls, sessions or blocks, so any difference is a bug.
 *
 * Runs on build/models/synthetic-tiny.gguf and synthetic-tiny-instruct.gguf
 * (`make fixtures`); without them, on an in-memory model with the
 * synthetic-tiny shapes, so the engine can be tested before the loader. */
#include "test_util.h"

#include "ref_test_model.h"

#include "core/session_internal.h"

#define V KIPP_VOCAB_SIZE

static float *rows(size_t n) { return malloc(n * V * sizeof(float)); }

static void make_tokens(int32_t *t, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; i++) t[i] = (int32_t)((i * 104729u + seed * 7919u + 11u) % V);
}

static kipp_session *new_session(kipp_model *m, uint32_t capacity) {
    kipp_error err = {0};
    kipp_session *s = NULL;
    kipp_session_options o = {.capacity = capacity};
    int rc = kipp_session_create(m, &o, &s, &err);
    CHECKF(rc == 0, "session_create(%u): %s", capacity, err.message);
    return s;
}

static int eval1(kipp_model *m, kipp_session *s, const int32_t *t, uint32_t n, uint32_t n_logits,
                 float *out, kipp_error *err) {
    kipp_eval_item it = {s, t, n, n_logits, out};
    return kipp_eval(m, &it, 1, err);
}

static bool same(const float *a, const float *b, size_t n_rows) {
    return memcmp(a, b, n_rows * V * sizeof(float)) == 0;
}

enum { T = 40 }; /* crosses one block boundary */

static void run_suite(kipp_model *m, const char *label) {
    fprintf(stderr, "== %s\n", label);
    kipp_error err = {0};
    int32_t tok[T];
    make_tokens(tok, T, 1);
    float *inc = rows(T), *all = rows(T), *tmp = rows(T);

    /* Cached incremental decode: one token per call, one row each. */
    kipp_session *s = new_session(m, 64);
    CHECK(kipp_session_length(s) == 0 && kipp_session_capacity(s) == 64);
    for (int i = 0; i < T; i++)
        CHECK(eval1(m, s, tok + i, 1, 1, inc + (size_t)i * V, &err) == 0);
    CHECK(kipp_session_length(s) == T);

    /* No-cache recomputation: each prefix from scratch in a reset session. */
    int diffs = 0;
    double worst = 0;
    for (int i = 0; i < T; i += 3) { /* every third prefix keeps it quick */
        kipp_session_reset(s);
        CHECK(eval1(m, s, tok, (uint32_t)i + 1, 1, tmp, &err) == 0);
        double e = test_nmse(tmp, inc + (size_t)i * V, V);
        if (e > worst) worst = e;
        diffs += !same(tmp, inc + (size_t)i * V, 1);
    }
    fprintf(stderr, "cached vs no-cache: worst NMSE %g, %d positions not bitwise equal\n", worst,
            diffs);
    CHECK(worst <= 1e-6);
    CHECK(diffs == 0);

    /* Multi-row logits == per-position evaluation. */
    kipp_session_reset(s);
    CHECK(eval1(m, s, tok, T, T, all, &err) == 0);
    CHECK(same(all, inc, T));
    /* ... and the last few rows alone are the same rows. */
    kipp_session_reset(s);
    CHECK(eval1(m, s, tok, T, 3, tmp, &err) == 0);
    CHECK(same(tmp, inc + (size_t)(T - 3) * V, 3));
    /* Prefill in uneven chunks. */
    kipp_session_reset(s);
    CHECK(eval1(m, s, tok, 17, 0, NULL, &err) == 0);
    CHECK(eval1(m, s, tok + 17, 23, 5, tmp, &err) == 0);
    CHECK(same(tmp, inc + (size_t)35 * V, 5));

    /* Scrambled block table == identity, bitwise (64 capacity = 2 blocks;
     * use a longer session for a real shuffle). The pool's low blocks are
     * held by `s`; these are free. */
    kipp_session *big = new_session(m, 130); /* 5 blocks */
    uint32_t perm[5] = {13, 10, 14, 12, 11};
    CHECK(kipp_session_block_count(big) == 5);
    CHECK(kipp_session_set_block_table(big, perm, 5, &err) == 0);
    /* The last 10 rows span two blocks and attend over every stored K/V. */
    CHECK(eval1(m, big, tok, T, 10, tmp, &err) == 0);
    CHECK(same(tmp, inc + (size_t)(T - 10) * V, 10));
    uint32_t bad[5] = {0, 0, 1, 2, 3};
    CHECK(kipp_session_set_block_table(big, bad, 5, &err) != 0); /* not empty, repeats */
    kipp_session_reset(big);
    CHECK(kipp_session_set_block_table(big, bad, 5, &err) == KIPP_E_ARGUMENT);
    kipp_session_destroy(big);

    /* Truncate then resume == fresh evaluation of the same sequence. */
    int32_t alt[T];
    make_tokens(alt, T, 2);
    int32_t seq[T];
    memcpy(seq, tok, 20 * sizeof *seq);
    memcpy(seq + 20, alt, 20 * sizeof *seq);
    kipp_session_reset(s);
    CHECK(eval1(m, s, tok, T, 0, NULL, &err) == 0);
    CHECK(kipp_session_truncate(s, 41, &err) == KIPP_E_ARGUMENT); /* longer */
    CHECK(kipp_session_length(s) == T);
    CHECK(kipp_session_truncate(s, 20, &err) == 0);
    CHECK(kipp_session_length(s) == 20);
    CHECK(eval1(m, s, alt, 20, 6, tmp, &err) == 0);
    kipp_session *fresh = new_session(m, 64);
    CHECK(eval1(m, fresh, seq, T, 6, all, &err) == 0);
    CHECK(same(tmp, all, 6));
    CHECK(!same(tmp + (size_t)5 * V, inc + (size_t)(T - 1) * V, 1)); /* input really changed */
    kipp_session_destroy(fresh);

    /* Two sessions in one call, interleaved with single calls, do not
     * disturb each other: compare against each sequence evaluated alone. */
    kipp_session *a = new_session(m, 64), *b = new_session(m, 64);
    float *ra = rows(2), *rb = rows(2);
    CHECK(eval1(m, a, tok, 10, 0, NULL, &err) == 0);
    kipp_eval_item two[2] = {{a, tok + 10, 10, 2, ra}, {b, alt, 30, 2, rb}};
    CHECK(kipp_eval(m, two, 2, &err) == 0);
    CHECK(kipp_session_length(a) == 20 && kipp_session_length(b) == 30);
    CHECK(same(ra, inc + (size_t)18 * V, 2));
    kipp_session *solo = new_session(m, 64);
    CHECK(eval1(m, solo, alt, 30, 2, tmp, &err) == 0);
    CHECK(same(rb, tmp, 2));
    /* b's work did not touch a: a continues as the incremental run did. */
    CHECK(eval1(m, a, tok + 20, 1, 1, ra, &err) == 0);
    CHECK(same(ra, inc + (size_t)20 * V, 1));
    kipp_session_destroy(solo);

    /* Same session twice in one call: rejected, nothing changes. */
    kipp_eval_item dup[2] = {{a, tok, 1, 0, NULL}, {a, tok, 1, 0, NULL}};
    CHECK(kipp_eval(m, dup, 2, &err) == KIPP_E_ARGUMENT);
    CHECK(kipp_session_length(a) == 21);

    /* Zero tokens: a no-op. One token from empty: position 0's row. */
    kipp_session_reset(b);
    CHECK(eval1(m, b, tok, 0, 0, NULL, &err) == 0);
    CHECK(kipp_session_length(b) == 0);
    CHECK(kipp_eval(m, NULL, 0, &err) == 0);
    CHECK(eval1(m, b, tok, 1, 1, rb, &err) == 0);
    CHECK(same(rb, inc, 1));

    /* Argument errors change nothing. */
    int32_t bad_tok[2] = {5, V};
    CHECK(eval1(m, b, bad_tok, 2, 1, rb, &err) == KIPP_E_ARGUMENT);
    CHECK(eval1(m, b, tok, 1, 2, rb, &err) == KIPP_E_ARGUMENT);
    CHECK(eval1(m, b, tok, 1, 1, NULL, &err) == KIPP_E_ARGUMENT);
    CHECK(kipp_session_length(b) == 1);
    free(ra);
    free(rb);

    /* Exactly full capacity, then one past it. */
    kipp_session *c = new_session(m, 33);
    CHECK(eval1(m, c, tok, 32, 0, NULL, &err) == 0);
    CHECK(eval1(m, c, tok + 32, 1, 1, tmp, &err) == 0);
    CHECK(kipp_session_length(c) == 33);
    CHECK(same(tmp, inc + (size_t)32 * V, 1));
    memset(&err, 0, sizeof err);
    CHECK(eval1(m, c, tok + 33, 1, 1, tmp, &err) == KIPP_E_CAPACITY);
    CHECK(err.code == KIPP_E_CAPACITY && strstr(err.message, "capacity") != NULL);
    fprintf(stderr, "capacity error reads: %s\n", err.message);
    CHECK(kipp_session_length(c) == 33);
    /* A multi-item call where only the second item overflows: the first
     * session is unchanged too, and later work is unaffected. */
    kipp_eval_item mix[2] = {{a, tok + 21, 1, 1, tmp}, {c, tok, 1, 0, NULL}};
    CHECK(kipp_eval(m, mix, 2, &err) == KIPP_E_CAPACITY);
    CHECK(kipp_session_length(a) == 21 && kipp_session_length(c) == 33);
    CHECK(eval1(m, a, tok + 21, 1, 1, tmp, &err) == 0);
    CHECK(same(tmp, inc + (size_t)21 * V, 1));
    /* After truncation there is room again. */
    CHECK(kipp_session_truncate(c, 32, &err) == 0);
    CHECK(eval1(m, c, tok + 32, 1, 1, tmp, &err) == 0);
    CHECK(same(tmp, inc + (size_t)32 * V, 1));
    kipp_session_destroy(c);

    /* Creation limits. */
    const kipp_checkpoint *ck = kipp_model_checkpoint(m);
    kipp_session *z = NULL;
    kipp_session_options o = {.capacity = ck->context + 1};
    CHECK(kipp_session_create(m, &o, &z, &err) == KIPP_E_ARGUMENT && z == NULL);
    o.capacity = 0; /* = context length */
    CHECK(kipp_session_create(m, &o, &z, &err) == 0);
    CHECK(kipp_session_capacity(z) == ck->context);
    CHECK(m->live_sessions == 4);
    kipp_session_destroy(z);
    /* The oracle has the opt-in Q8_0 cache (tests/unit/test_kv_quant.c);
     * an unknown format is an argument error. */
    o.kv_quant = KIPP_KV_Q8_0;
    CHECK(kipp_session_create(m, &o, &z, &err) == 0);
    kipp_session_destroy(z);
    o.kv_quant = (kipp_kv_quant)5;
    CHECK(kipp_session_create(m, &o, &z, &err) == KIPP_E_ARGUMENT);

    kipp_session_destroy(a);
    kipp_session_destroy(b);
    kipp_session_destroy(s);
    CHECK(m->live_sessions == 0);
    free(inc);
    free(all);
    free(tmp);
}

int main(void) {
    test_model tm;
    const char *fixtures[] = {"synthetic-tiny", "synthetic-tiny-instruct"};
    int ran = 0;
    for (int i = 0; i < 2; i++) {
        int rc = test_model_file(fixtures[i], &tm);
        CHECKF(rc != 2, "fixture %s exists but does not open", fixtures[i]);
        if (rc == 0) {
            run_suite(tm.model, fixtures[i]);
            ran++;
        }
        test_model_close(&tm);
    }
    /* Without fixtures, the same suite on an in-memory model, so the
     * engine is tested before the converter and loader exist. */
    if (!ran) {
        CHECK(test_model_memory("synthetic-tiny", &tm) == 0);
        if (tm.model) run_suite(tm.model, "in-memory model, synthetic-tiny shapes");
        test_model_close(&tm);
    }
    return test_finish("test_session");
}
