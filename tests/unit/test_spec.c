/* Speculative decoding, greedy (src/core/spec.c), on the synthetic-tiny
 * fixtures with the cpu backend:
 *
 * 1. The speculative token sequence is IDENTICAL to plain greedy decoding,
 *    for both drafters, every weight scheme, several prompts (copy-heavy,
 *    random, one token), K = 1..8, gate on and off, with penalties and a
 *    logit bias (which greedy applies too).
 * 2. Every verification row the target produced for a kept position is
 *    bitwise the plain decode row for that position, including the steps
 *    after a rejected draft was rolled back: the cpu backend is batch
 *    invariant and truncation leaves a session equal to one that never saw
 *    the draft, so any difference is a bug.
 * 3. The gate suspends drafting on a draft model that is never right, and
 *    keeps drafting where drafts are accepted.
 * 4. A draft artifact whose tokenizer (BPE merges) or vocabulary (token
 *    table) differs from the target's is refused with a clear message. */
#include "test_util.h"

#include <math.h>

#include "kipp.h"

#define V KIPP_VOCAB_SIZE
enum { N_GEN = 40, MAXP = 64 };

static const char *schemes[] = {"", ".q8_0", ".affine4_gs32", ".scale4_gs32"};

static kipp_model *open_model(const char *name, kipp_backend_kind backend) {
    char path[512];
    snprintf(path, sizeof path, "%s/models/%s.gguf", test_build_dir(), name);
    kipp_error err = {0};
    kipp_model *m = NULL;
    kipp_model_options mo = {.backend = backend};
    if (kipp_model_open(path, &mo, &m, &err)) {
        fprintf(stderr, "open %s: %s\n", path, err.message);
        return NULL;
    }
    return m;
}

static void eval(kipp_model *m, kipp_session *s, const int32_t *t, uint32_t n, uint32_t nl,
                 float *out) {
    kipp_error err = {0};
    kipp_eval_item it = {s, t, n, nl, out};
    if (kipp_eval(m, &it, 1, &err)) {
        fprintf(stderr, "eval: %s\n", err.message);
        exit(1);
    }
}

/* Plain greedy: tokens[N_GEN] and the row each was picked from. */
static void plain(kipp_model *m, const kipp_sampling *sp, const int32_t *prompt, uint32_t np,
                  int32_t *tokens, float *rows) {
    kipp_error err = {0};
    kipp_session *s = NULL;
    kipp_sampler *smp = NULL;
    kipp_session_options so = {.capacity = np + N_GEN + KIPP_SPEC_MAX_DRAFT};
    if (kipp_session_create(m, &so, &s, &err) || kipp_sampler_create(sp, &smp, &err)) exit(1);
    for (uint32_t i = 0; i < np; i++) kipp_sampler_accept(smp, prompt[i]);
    float *row = malloc(V * sizeof(float));
    eval(m, s, prompt, np, 1, rows);
    for (int g = 0; g < N_GEN; g++) {
        if (g) eval(m, s, &tokens[g - 1], 1, 1, rows + (size_t)g * V);
        memcpy(row, rows + (size_t)g * V, V * sizeof(float));
        tokens[g] = kipp_sampler_sample(smp, row);
        kipp_sampler_accept(smp, tokens[g]);
    }
    free(row);
    kipp_sampler_destroy(smp);
    kipp_session_destroy(s);
}

/* Speculative greedy; returns the number of row mismatches against ref_rows
 * and fills stats. */
static int speculative(kipp_model *m, const kipp_spec_options *o, const kipp_sampling *sp,
                       const int32_t *prompt, uint32_t np, int32_t *tokens,
                       const float *ref_rows, kipp_spec_stats *st) {
    kipp_error err = {0};
    kipp_session *s = NULL;
    kipp_sampler *smp = NULL;
    kipp_spec *spec = NULL;
    kipp_session_options so = {.capacity = np + N_GEN + KIPP_SPEC_MAX_DRAFT};
    kipp_spec_options opt = *o;
    opt.capacity = so.capacity;
    if (kipp_session_create(m, &so, &s, &err) || kipp_sampler_create(sp, &smp, &err) ||
        kipp_spec_create(m, &opt, sp, &spec, &err) ||
        kipp_spec_set_context(spec, prompt, np, &err)) {
        fprintf(stderr, "setup: %s\n", err.message);
        exit(1);
    }
    for (uint32_t i = 0; i < np; i++) kipp_sampler_accept(smp, prompt[i]);
    float *rows = malloc((size_t)(1 + KIPP_SPEC_MAX_DRAFT) * V * sizeof(float));
    int bad_rows = 0;
    eval(m, s, prompt, np, 1, rows);
    bad_rows += memcmp(rows, ref_rows, V * sizeof(float)) != 0;
    tokens[0] = kipp_sampler_sample(smp, rows);
    kipp_sampler_accept(smp, tokens[0]);
    int g = 1;
    while (g < N_GEN) {
        int32_t toks[1 + KIPP_SPEC_MAX_DRAFT], out[1 + KIPP_SPEC_MAX_DRAFT];
        uint32_t n = 0, n_out = 0;
        if (kipp_spec_draft(spec, tokens[g - 1], KIPP_SPEC_MAX_DRAFT, toks, &n, &err)) exit(1);
        eval(m, s, toks, n, n, rows);
        if (kipp_spec_verify(spec, smp, s, rows, out, &n_out, &err)) {
            fprintf(stderr, "verify: %s\n", err.message);
            exit(1);
        }
        for (uint32_t j = 0; j < n_out && g < N_GEN; j++, g++) {
            tokens[g] = out[j];
            bad_rows += memcmp(rows + (size_t)j * V, ref_rows + (size_t)g * V,
                               V * sizeof(float)) != 0;
        }
    }
    kipp_spec_get_stats(spec, st);
    free(rows);
    kipp_spec_destroy(spec);
    kipp_sampler_destroy(smp);
    kipp_session_destroy(s);
    return bad_rows;
}

typedef struct prompt_case {
    const char *label;
    int32_t tokens[MAXP];
    uint32_t n;
} prompt_case;

static void make_prompts(prompt_case *p) {
    /* copy-heavy: a 12-token phrase three times */
    p[0].label = "copy-heavy";
    for (uint32_t i = 0; i < 36; i++) p[0].tokens[i] = (int32_t)(1000 + (i % 12) * 577);
    p[0].n = 36;
    p[1].label = "random 20";
    for (uint32_t i = 0; i < 20; i++) p[1].tokens[i] = (int32_t)((i * 104729u + 77u) % 150000);
    p[1].n = 20;
    p[2].label = "one token";
    p[2].tokens[0] = 9707;
    p[2].n = 1;
    p[3].label = "random 50";
    for (uint32_t i = 0; i < 50; i++) p[3].tokens[i] = (int32_t)((i * 7919u + 13u) % 151000);
    p[3].n = 50;
}

static void greedy_suite(void) {
    prompt_case prompts[4];
    make_prompts(prompts);
    kipp_logit_bias ban[2] = {{151643, -INFINITY}, {1000, 2.5f}};
    kipp_sampling plain_greedy = kipp_sampling_default();
    kipp_sampling penalised = plain_greedy;
    penalised.repetition_penalty = 1.3f;
    penalised.presence_penalty = 0.4f;
    penalised.logit_bias = ban;
    penalised.n_logit_bias = 2;
    kipp_model *instruct = open_model("synthetic-tiny-instruct", KIPP_BACKEND_CPU);
    CHECK(instruct != NULL);
    if (!instruct) return;
    int32_t ref[N_GEN], got[N_GEN];
    float *ref_rows = malloc((size_t)N_GEN * V * sizeof(float));
    for (size_t si = 0; si < sizeof schemes / sizeof *schemes; si++) {
        char name[64];
        snprintf(name, sizeof name, "synthetic-tiny%s", schemes[si]);
        kipp_model *m = open_model(name, KIPP_BACKEND_CPU);
        /* A self-draft in another scheme of the same checkpoint. */
        snprintf(name, sizeof name, "synthetic-tiny%s", schemes[(si + 1) % 4]);
        kipp_model *self = open_model(name, KIPP_BACKEND_CPU);
        CHECK(m && self);
        if (!m || !self) continue;
        for (int pi = 0; pi < 4; pi++) {
            const prompt_case *pc = &prompts[pi];
            for (int pen = 0; pen < 2; pen++) {
                const kipp_sampling *sp = pen ? &penalised : &plain_greedy;
                plain(m, sp, pc->tokens, pc->n, ref, ref_rows);
                struct {
                    const char *label;
                    kipp_spec_options o;
                } cases[] = {
                    {"lookup K=8 gate", {KIPP_SPEC_LOOKUP, 8, true, NULL, 0, 0}},
                    {"lookup K=1", {KIPP_SPEC_LOOKUP, 1, false, NULL, 0, 0}},
                    {"self-draft K=4 gate", {KIPP_SPEC_DRAFT, 4, true, self, 0, 0}},
                    {"other-draft K=3", {KIPP_SPEC_DRAFT, 3, false, instruct, 0, 0}},
                };
                for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
                    /* The slow different-model draft on two prompts only. */
                    if (c == 3 && (pi == 3 || pen)) continue;
                    kipp_spec_stats st;
                    int bad = speculative(m, &cases[c].o, sp, pc->tokens, pc->n, got, ref_rows,
                                          &st);
                    int first = -1;
                    for (int g = 0; g < N_GEN && first < 0; g++)
                        if (got[g] != ref[g]) first = g;
                    CHECKF(first < 0, "tiny%s, %s%s, %s: token %d differs (%d vs %d)",
                           schemes[si], pc->label, pen ? " +penalties" : "", cases[c].label,
                           first, first >= 0 ? got[first] : 0, first >= 0 ? ref[first] : 0);
                    CHECKF(bad == 0, "tiny%s, %s, %s: %d verification rows differ bitwise",
                           schemes[si], pc->label, cases[c].label, bad);
                    fprintf(stderr, "tiny%-14s %-11s %-3s %-20s drafted %3llu accepted %3llu "
                            "steps %3llu\n", schemes[si], pc->label, pen ? "pen" : "", 
                            cases[c].label, (unsigned long long)st.drafted,
                            (unsigned long long)st.accepted, (unsigned long long)st.steps);
                    if (c == 3) CHECKF(st.accepted < st.drafted, "no rollback exercised");
                }
            }
        }
        kipp_model_close(self);
        kipp_model_close(m);
    }
    free(ref_rows);
    kipp_model_close(instruct);
}

/* A draft that is never right must be suspended by the gate. */
static void gate_suite(void) {
    kipp_model *m = open_model("synthetic-tiny", KIPP_BACKEND_CPU);
    kipp_model *other = open_model("synthetic-tiny-instruct", KIPP_BACKEND_CPU);
    CHECK(m && other);
    if (!m || !other) return;
    prompt_case prompts[4];
    make_prompts(prompts);
    kipp_sampling sp = kipp_sampling_default();
    int32_t ref[N_GEN], got[N_GEN];
    float *ref_rows = malloc((size_t)N_GEN * V * sizeof(float));
    plain(m, &sp, prompts[1].tokens, prompts[1].n, ref, ref_rows);
    kipp_spec_stats on, off;
    kipp_spec_options o = {KIPP_SPEC_DRAFT, 4, true, other, 0, 0};
    speculative(m, &o, &sp, prompts[1].tokens, prompts[1].n, got, ref_rows, &on);
    o.gate = false;
    speculative(m, &o, &sp, prompts[1].tokens, prompts[1].n, got, ref_rows, &off);
    fprintf(stderr, "gate on: drafted %llu accepted %llu gated %llu; off: drafted %llu "
            "accepted %llu\n", (unsigned long long)on.drafted, (unsigned long long)on.accepted,
            (unsigned long long)on.gated, (unsigned long long)off.drafted,
            (unsigned long long)off.accepted);
    /* The window is judged after 8 drafting steps, so at most 8 steps draft
     * before the first suspension of 16. */
    CHECK(off.gated == 0);
    if (off.accepted * 4 < off.drafted) { /* a losing draft: the gate must act */
        CHECK(on.gated > 0);
        CHECK(on.drafted < off.drafted);
    }
    /* On copy-heavy text lookup drafts are mostly kept: the gate stays open. */
    plain(m, &sp, prompts[0].tokens, prompts[0].n, ref, ref_rows);
    o = (kipp_spec_options){KIPP_SPEC_LOOKUP, 8, true, NULL, 0, 0};
    speculative(m, &o, &sp, prompts[0].tokens, prompts[0].n, got, ref_rows, &on);
    fprintf(stderr, "lookup on copy-heavy: drafted %llu accepted %llu gated %llu\n",
            (unsigned long long)on.drafted, (unsigned long long)on.accepted,
            (unsigned long long)on.gated);
    if (on.accepted * 2 > on.drafted) CHECK(on.gated == 0);
    free(ref_rows);
    kipp_model_close(other);
    kipp_model_close(m);
}

/* ---- tokenizer mismatch ---------------------------------------------------- */

static uint8_t *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *d = malloc(*n);
    if (d && fread(d, 1, *n, f) != *n) {
        free(d);
        d = NULL;
    }
    fclose(f);
    return d;
}

static uint64_t rd64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Offset of the first element of STRING array `key` in a GGUF image. */
static size_t array_start(const uint8_t *d, size_t n, const char *key) {
    size_t kl = strlen(key);
    for (size_t i = 8; i + kl + 16 < n; i++)
        if (rd64(d + i - 8) == kl && !memcmp(d + i, key, kl)) return i + kl + 4 + 4 + 8;
    return 0;
}

static void expect_refused(kipp_model *target, const char *path, const char *what) {
    kipp_error err = {0};
    kipp_model *d = NULL;
    kipp_model_options mo = {.backend = KIPP_BACKEND_CPU};
    if (kipp_model_open(path, &mo, &d, &err)) {
        fprintf(stderr, "mutated artifact (%s) does not load: %s\n", what, err.message);
        CHECK(0);
        return;
    }
    int rc = kipp_spec_check_draft(target, d, &err);
    fprintf(stderr, "%s: %s\n", what, err.message);
    CHECK(rc == KIPP_E_REGISTRY);
    CHECK(strstr(err.message, "tokenizer") != NULL && strstr(err.message, "differ") != NULL);
    kipp_spec *sp = NULL;
    kipp_sampling s = kipp_sampling_default();
    kipp_spec_options o = {KIPP_SPEC_DRAFT, 4, true, d, 0, 0};
    CHECK(kipp_spec_create(target, &o, &s, &sp, &err) == KIPP_E_REGISTRY && sp == NULL);
    kipp_model_close(d);
}

/* The lookup drafter on contexts with a known answer: a cycle drafts K
 * tokens continuing it (the copy runs past the context's end into the
 * draft itself), a period-3 cycle keeps its phase, and no match drafts
 * nothing. */
static void lookup_drafts(kipp_model *m, const int32_t *ctx, size_t n, int32_t pending,
                          uint32_t max, int32_t *toks, uint32_t *got) {
    kipp_spec *sp = NULL;
    kipp_error err = {0};
    kipp_sampling s = kipp_sampling_default();
    kipp_spec_options o = {KIPP_SPEC_LOOKUP, 8, false, NULL, 0, 0};
    *got = 0;
    CHECK(kipp_spec_create(m, &o, &s, &sp, &err) == KIPP_OK);
    if (!sp) return;
    CHECK(kipp_spec_set_context(sp, ctx, n, &err) == KIPP_OK);
    CHECK(kipp_spec_draft(sp, pending, max, toks, got, &err) == KIPP_OK);
    kipp_spec_destroy(sp);
}

static void lookup_suite(void) {
    kipp_model *m = open_model("synthetic-tiny", KIPP_BACKEND_CPU);
    CHECK(m);
    if (!m) return;
    int32_t toks[1 + KIPP_SPEC_MAX_DRAFT];
    uint32_t n = 0;
    const int32_t flat[] = {11, 12, 13, 7, 7, 7};
    lookup_drafts(m, flat, 6, 7, 8, toks, &n);
    CHECKF(n == 9, "period-1 cycle: %u tokens (want pending + 8 drafts)", n);
    for (uint32_t i = 0; i < n; i++) CHECK(toks[i] == 7);
    const int32_t tri[] = {40, 41, 1, 2, 3, 1, 2, 3, 1};
    lookup_drafts(m, tri, 9, 2, 7, toks, &n);
    CHECKF(n == 8, "period-3 cycle: %u tokens (want pending + 7 drafts)", n);
    const int32_t want[] = {2, 3, 1, 2, 3, 1, 2, 3};
    for (uint32_t i = 0; i < n && i < 8; i++) CHECKF(toks[i] == want[i], "period-3 token %u: %d", i, toks[i]);
    const int32_t none[] = {1, 2, 3, 4, 5, 6};
    lookup_drafts(m, none, 6, 9, 8, toks, &n);
    CHECKF(n == 1 && toks[0] == 9, "no match: %u tokens", n);
    kipp_model_close(m);
}

/* Verification with nothing to pick: rows of NaN (what a corrupt model
 * gives) fail with KIPP_NAN_LOGITS (the server passes that message on),
 * rows of -inf with the ban message; either way the drafts are dropped. */
static void no_pick_suite(void) {
    kipp_model *m = open_model("synthetic-tiny", KIPP_BACKEND_CPU);
    CHECK(m);
    if (!m) return;
    const int32_t ctx[] = {11, 12, 13, 7, 7, 7};
    for (int nan_rows = 0; nan_rows < 2; nan_rows++) {
        kipp_error err = {0};
        kipp_session *s = NULL;
        kipp_sampler *smp = NULL;
        kipp_spec *sp = NULL;
        kipp_sampling samp = kipp_sampling_default();
        kipp_session_options so = {.capacity = 64};
        kipp_spec_options o = {.mode = KIPP_SPEC_LOOKUP, .max_draft = 8, .capacity = 64};
        int32_t toks[1 + KIPP_SPEC_MAX_DRAFT], out[1 + KIPP_SPEC_MAX_DRAFT];
        uint32_t n = 0, n_out = 0;
        CHECK(kipp_session_create(m, &so, &s, &err) == KIPP_OK &&
              kipp_sampler_create(&samp, &smp, &err) == KIPP_OK &&
              kipp_spec_create(m, &o, &samp, &sp, &err) == KIPP_OK &&
              kipp_spec_set_context(sp, ctx, 6, &err) == KIPP_OK &&
              kipp_spec_draft(sp, 7, 4, toks, &n, &err) == KIPP_OK);
        float *rows = malloc((size_t)(1 + KIPP_SPEC_MAX_DRAFT) * V * sizeof(float));
        if (sp && rows && n == 5) {
            eval(m, s, ctx, 6, 0, NULL);
            eval(m, s, toks, n, n, rows);
            for (size_t i = 0; i < (size_t)n * V; i++) rows[i] = nan_rows ? NAN : -INFINITY;
            int rc = kipp_spec_verify(sp, smp, s, rows, out, &n_out, &err);
            if (nan_rows)
                CHECKF(rc == KIPP_E_BACKEND && strcmp(err.message, KIPP_NAN_LOGITS) == 0,
                       "NaN rows: rc %d, '%s'", rc, err.message);
            else
                CHECKF(rc == KIPP_E_ARGUMENT && strstr(err.message, "every token is banned"),
                       "-inf rows: rc %d, '%s'", rc, err.message);
        } else {
            CHECKF(0, "setup: %u drafted, %s", n, err.message);
        }
        free(rows);
        kipp_spec_destroy(sp);
        kipp_sampler_destroy(smp);
        kipp_session_destroy(s);
    }
    kipp_model_close(m);
}

/* kipp_spec_draft_batch == each sequence drafting alone: three sequences
 * (two with the draft model, contexts longer than a catch-up chunk, one
 * with lookup), greedy and sampled q; then the argument checks. */
static void make_ctx(int32_t *ctx, size_t n, uint64_t seed) {
    uint64_t x = seed;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        ctx[i] = (int32_t)(x % 5000) + 200;
    }
}

static void batch_suite(void) {
    kipp_model *m = open_model("synthetic-tiny", KIPP_BACKEND_CPU);
    kipp_model *d = open_model("synthetic-tiny.scale4_gs32", KIPP_BACKEND_CPU);
    CHECK(m && d);
    if (!m || !d) {
        kipp_model_close(m);
        kipp_model_close(d);
        return;
    }
    enum { NS = 3 };
    static int32_t ctx[NS][200];
    const size_t len[NS] = {150, 37, 90};
    for (int i = 0; i < NS; i++) make_ctx(ctx[i], len[i], 1000u + (uint64_t)i);
    for (int sampled = 0; sampled < 2; sampled++) {
        kipp_spec *alone[NS] = {0}, *batch[NS] = {0};
        kipp_error err = {0};
        for (int i = 0; i < NS; i++) {
            kipp_sampling s = kipp_sampling_default();
            s.temperature = sampled ? 1.5f : 0.0f;
            s.seed = 77u + (uint64_t)i;
            kipp_spec_options o = {i == 1 ? KIPP_SPEC_LOOKUP : KIPP_SPEC_DRAFT, i == 1 ? 8u : 4u,
                                   false, i == 1 ? NULL : d, 0, 0};
            CHECK(kipp_spec_create(m, &o, &s, &alone[i], &err) == KIPP_OK);
            CHECK(kipp_spec_create(m, &o, &s, &batch[i], &err) == KIPP_OK);
            if (!alone[i] || !batch[i]) goto done;
            CHECK(kipp_spec_set_context(alone[i], ctx[i], len[i], &err) == KIPP_OK);
            CHECK(kipp_spec_set_context(batch[i], ctx[i], len[i], &err) == KIPP_OK);
        }
        for (int round = 0; round < 2; round++) {
            int32_t ta[NS][1 + KIPP_SPEC_MAX_DRAFT], tb[NS][1 + KIPP_SPEC_MAX_DRAFT];
            int32_t pend[NS];
            uint32_t na[NS], nb[NS], max[NS] = {16, 16, 3};
            int32_t *tbp[NS];
            for (int i = 0; i < NS; i++) {
                /* Round 1 starts from draft sessions that hold the context
                 * (rolled back over round 0's drafts, as after a verify). */
                CHECK(kipp_spec_set_context(alone[i], ctx[i], len[i], &err) == KIPP_OK);
                CHECK(kipp_spec_set_context(batch[i], ctx[i], len[i], &err) == KIPP_OK);
                pend[i] = ctx[i][(size_t)round * 5 % len[i]];
                tbp[i] = tb[i];
                CHECK(kipp_spec_draft(alone[i], pend[i], max[i], ta[i], &na[i], &err) == KIPP_OK);
            }
            CHECK(kipp_spec_draft_batch(batch, NS, pend, max, tbp, nb, &err) == KIPP_OK);
            for (int i = 0; i < NS; i++) {
                CHECKF(na[i] == nb[i] && !memcmp(ta[i], tb[i], na[i] * sizeof(int32_t)),
                       "%s round %d sequence %d: batched draft (%u tokens) differs from alone (%u)",
                       sampled ? "sampled" : "greedy", round, i, nb[i], na[i]);
                if (i != 1) CHECKF(na[i] == 1 + (i == 2 ? 3u : 4u), "sequence %d drafted %u", i, na[i]);
            }
        }
        /* The same sequence twice is refused. */
        {
            kipp_spec *twice[2] = {batch[0], batch[0]};
            int32_t t0[1 + KIPP_SPEC_MAX_DRAFT], t1[1 + KIPP_SPEC_MAX_DRAFT], *tp[2] = {t0, t1};
            int32_t pend[2] = {5, 6};
            uint32_t max[2] = {4, 4}, nn[2];
            CHECK(kipp_spec_draft_batch(twice, 2, pend, max, tp, nn, &err) == KIPP_E_ARGUMENT);
            CHECK(strstr(err.message, "also sequence") != NULL);
        }
    done:
        for (int i = 0; i < NS; i++) {
            kipp_spec_destroy(alone[i]);
            kipp_spec_destroy(batch[i]);
        }
    }
    kipp_model_close(d);
    kipp_model_close(m);
}

static void tokenizer_suite(void) {
    char path[512], out[512];
    snprintf(path, sizeof path, "%s/models/synthetic-tiny.gguf", test_build_dir());
    size_t n = 0;
    uint8_t *d = read_file(path, &n);
    kipp_model *target = open_model("synthetic-tiny", KIPP_BACKEND_CPU);
    CHECK(d && target);
    if (!d || !target) return;
    kipp_error err = {0};
    kipp_model *same = open_model("synthetic-tiny-instruct", KIPP_BACKEND_CPU);
    CHECK(same && kipp_spec_check_draft(target, same, &err) == KIPP_OK);
    kipp_model_close(same);

    /* Merges: swap the first two adjacent equal-length merges (rank order
     * changes, every string stays valid). */
    size_t at = array_start(d, n, "tokenizer.ggml.merges");
    CHECK(at > 0);
    bool swapped = false;
    for (int i = 0; at && i < 1000 && !swapped; i++) {
        uint64_t la = rd64(d + at), lb = rd64(d + at + 8 + la);
        uint8_t *a = d + at + 8, *b = d + at + 8 + la + 8;
        if (la == lb && la < 64 && memcmp(a, b, la)) {
            uint8_t t[64];
            memcpy(t, a, la);
            memcpy(a, b, la);
            memcpy(b, t, la);
            swapped = true;
        }
        at += 8 + la;
    }
    CHECK(swapped);
    snprintf(out, sizeof out, "%s/tmp-spec-draft.gguf", test_build_dir());
    FILE *f = fopen(out, "wb");
    CHECK(f && fwrite(d, 1, n, f) == n);
    if (f) fclose(f);
    expect_refused(target, out, "merges swapped");
    free(d);

    /* Vocabulary: two tokens of equal length swap ids (the set of strings,
     * hence every merge, stays valid; ids no longer mean the same text). */
    d = read_file(path, &n);
    at = array_start(d, n, "tokenizer.ggml.tokens");
    bool changed = false;
    for (uint64_t i = 0; at && i < 150000 && !changed; i++) {
        uint64_t la = rd64(d + at), lb = rd64(d + at + 8 + la);
        uint8_t *a = d + at + 8, *b = d + at + 8 + la + 8;
        if (i > 100000 && la == lb && la < 64 && memcmp(a, b, la)) {
            uint8_t t[64];
            memcpy(t, a, la);
            memcpy(a, b, la);
            memcpy(b, t, la);
            changed = true;
        }
        at += 8 + la;
    }
    CHECK(changed);
    f = fopen(out, "wb");
    CHECK(f && fwrite(d, 1, n, f) == n);
    if (f) fclose(f);
    expect_refused(target, out, "two token ids swapped");
    remove(out);
    free(d);
    kipp_model_close(target);
}

int main(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/models/synthetic-tiny.scale4_gs32.gguf", test_build_dir());
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("fixtures missing (make fixtures)\n");
        return 77;
    }
    fclose(f);
    lookup_suite();
    no_pick_suite();
    batch_suite();
    tokenizer_suite();
    gate_suite();
    greedy_suite();
    return test_finish("test_spec");
}
