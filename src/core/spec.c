/* Speculative decoding (DESIGN §7): drafters, verification, the gate.
 *
 * A step starts from the context (tokens the target session holds) and the
 * pending token (sampled, not yet evaluated). The drafter proposes up to K
 * tokens d1..dk to follow it; the caller evaluates [pending, d1..dk] in one
 * kipp_eval with k+1 logit rows (in the server, inside the batched step);
 * row i is the target's distribution for the token after d_i (row 0: after
 * pending). kipp_spec_verify walks the rows in order:
 *
 *   greedy    the plain sampler picks y from row i (the exact plain-greedy
 *             code on bitwise the same row, the cpu backend being batch
 *             invariant); d_{i+1} is kept iff y == d_{i+1}, else y ends it.
 *   sampled   p = the sampler's processed distribution for row i (penalties
 *             over a window that already holds every kept token, bias,
 *             temperature, filters: kipp_sampler_probs), q = the drafter's
 *             (one-hot for lookup). Keep d with probability min(1, p/q);
 *             on rejection draw from the normalised max(0, p - q). This is
 *             the standard speculative-sampling rule: every produced token
 *             has exactly the target's distribution.
 *
 * If every draft is kept, row k gives one more token by plain sampling, so
 * a step yields 1..k+1 tokens for one target eval. The target session is
 * then truncated to drop the rejected drafts (the kept ones are already in
 * it), which leaves it equal to a session that never saw them: truncation
 * only moves the length, and the next append overwrites the positions.
 *
 * Drafters:
 *   lookup    the longest suffix (4 down to 2 tokens) of context + pending
 *             that occurred before; its most recent occurrence's continuation
 *             is the draft, copied with overlap (past the sequence's end it
 *             repeats the draft's own tokens), so a cycle drafts K tokens.
 *             Costs nothing when there is no match.
 *   draft     a second model with the same tokenizer keeps its own session,
 *             a prefix of context + pending + drafts: after verify it is
 *             truncated to what the target kept, and it catches up (one eval
 *             of the missing tokens) at the next draft.
 *
 * Gate: drafting is judged every GATE_WINDOW drafting steps on estimated
 * cost (one target eval, plus ROW_COST per extra verified row, plus
 * DRAFT_COST per draft-model eval) against the tokens produced. When that
 * rate falls below plain decoding's one token per eval, drafting stops for
 * a back-off of steps that doubles while probes keep failing. The estimate
 * uses fixed costs rather than clocks, so which steps draft - and with it a
 * sampled run's random stream - is reproducible for a given seed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/gguf.h"
#include "core/model_internal.h"
#include "core/spec_internal.h"

#define V KIPP_VOCAB_SIZE

enum {
    LOOKUP_NGRAM_MAX = 4,  /* longest suffix matched */
    LOOKUP_NGRAM_MIN = 2,  /* a single token predicts its successor too rarely */
    DEFAULT_K_LOOKUP = 8,
    DEFAULT_K_DRAFT = 4,
    DRAFT_CHUNK = 64,      /* catch-up positions per draft eval */
    GATE_WINDOW = 8,       /* drafting steps per judgement */
    GATE_BACKOFF_MIN = 16, /* plain steps after a failed judgement */
    GATE_BACKOFF_MAX = 512,
};

/* Cost of one extra verified row, relative to a one-token target eval:
 * decode is bound by reading the weights, which k+1 rows read once; the
 * extra rows add compute (most of it the 151,936-row output head). */
#define GATE_ROW_COST 0.10
/* Cost of one draft-model eval relative to a target eval (a 4-bit self
 * draft reads about a third of the BF16 bytes). */
#define GATE_DRAFT_COST 0.35

struct kipp_spec {
    kipp_model *target;
    kipp_spec_options o;
    bool greedy;
    kipp_spec_rule rule;

    int32_t *ctx; /* tokens the target session holds, [cap_ctx] */
    size_t n_ctx, cap_ctx;

    int32_t toks[1 + KIPP_SPEC_MAX_DRAFT]; /* last draft: pending, d1..dk */
    uint32_t n_toks;                       /* 0 = no draft outstanding */

    /* draft model */
    kipp_session *dsession; /* holds ctx[0..d_held), then draft-step tokens */
    kipp_sampler *dsampler; /* q: the target's filters and bias, no penalties */
    size_t d_held;
    int32_t dbuf[DRAFT_CHUNK + 1]; /* catch-up tail + pending, one eval */
    float *q;    /* [K][V] q of each draft */
    float *drow; /* [DRAFT_CHUNK or 1][V] draft logits */

    float *row, *p, *res; /* [V] scratch */

    /* gate */
    uint32_t g_steps, suspend, backoff;
    double g_tokens, g_cost;

    kipp_spec_stats stats;
};

const char *kipp_spec_mode_name(kipp_spec_mode m) {
    switch (m) {
    case KIPP_SPEC_OFF: return "off";
    case KIPP_SPEC_LOOKUP: return "lookup";
    case KIPP_SPEC_DRAFT: return "draft";
    }
    return "?";
}

/* ---- draft compatibility ------------------------------------------------ */

static int same_array(const gguf_kv *a, const gguf_kv *b) {
    return a->array_len == b->array_len && a->array_bytes == b->array_bytes &&
           memcmp(a->array_data, b->array_data, a->array_bytes) == 0;
}

/* Index of the first differing string of two STRING arrays (their lengths
 * if one is a prefix of the other); only called once they differ. */
static uint64_t first_difference(const gguf_kv *a, const gguf_kv *b) {
    uint64_t n = a->array_len < b->array_len ? a->array_len : b->array_len;
    gguf_str *sa = malloc(n * sizeof *sa), *sb = malloc(n * sizeof *sb);
    uint64_t i = 0;
    if (sa && sb && kipp_gguf_array_strings(a, sa) && kipp_gguf_array_strings(b, sb))
        while (i < n && sa[i].len == sb[i].len && !memcmp(sa[i].ptr, sb[i].ptr, sa[i].len)) i++;
    free(sa);
    free(sb);
    return i;
}

int kipp_spec_check_draft(const kipp_model *target, const kipp_model *draft, kipp_error *err) {
    if (!target || !draft)
        return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_spec_check_draft: NULL model");
    const kipp_artifact *a = &target->artifact, *b = &draft->artifact;
    const char *ta = a->checkpoint->id, *tb = b->checkpoint->id;
    /* The raw GGUF arrays are byte-identical iff every string is. */
    if (!same_array(a->tokens, b->tokens))
        return kipp_fail(err, KIPP_E_REGISTRY,
                         "draft model %s has a different vocabulary from target %s (token "
                         "table differs at id %llu); a draft must share the target's tokenizer",
                         tb, ta, (unsigned long long)first_difference(a->tokens, b->tokens));
    if (!same_array(a->token_types, b->token_types))
        return kipp_fail(err, KIPP_E_REGISTRY,
                         "draft model %s has different token types from target %s; a draft "
                         "must share the target's tokenizer", tb, ta);
    if (!same_array(a->merges, b->merges))
        return kipp_fail(err, KIPP_E_REGISTRY,
                         "draft model %s has a different tokenizer from target %s (BPE merges "
                         "differ at rank %llu); a draft must share the target's tokenizer", tb,
                         ta, (unsigned long long)first_difference(a->merges, b->merges));
    return KIPP_OK;
}

/* ---- life cycle --------------------------------------------------------- */

int kipp_spec_create(kipp_model *target, const kipp_spec_options *o,
                     const kipp_sampling *sampling, kipp_spec **out, kipp_error *err) {
    if (!target || !o || !sampling || !out)
        return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_spec_create: NULL argument");
    *out = NULL;
    if (o->mode != KIPP_SPEC_OFF && o->mode != KIPP_SPEC_LOOKUP && o->mode != KIPP_SPEC_DRAFT)
        return kipp_fail(err, KIPP_E_ARGUMENT, "unknown speculation mode %d", (int)o->mode);
    if (o->max_draft > KIPP_SPEC_MAX_DRAFT)
        return kipp_fail(err, KIPP_E_ARGUMENT, "--spec-max %u: at most %d drafted tokens",
                         o->max_draft, KIPP_SPEC_MAX_DRAFT);
    if (o->mode == KIPP_SPEC_DRAFT && !o->draft_model)
        return kipp_fail(err, KIPP_E_ARGUMENT, "draft speculation needs a draft model");
    if (!(o->draft_temperature >= 0.0f) || isinf(o->draft_temperature))
        return kipp_fail(err, KIPP_E_ARGUMENT, "draft temperature must be finite and >= 0");
    if (o->mode == KIPP_SPEC_DRAFT) {
        int rc = kipp_spec_check_draft(target, o->draft_model, err);
        if (rc) return rc;
    }
    kipp_spec *sp = kipp_calloc(1, sizeof *sp, err);
    if (!sp) return KIPP_E_MEMORY;
    sp->target = target;
    sp->o = *o;
    if (sp->o.max_draft == 0)
        sp->o.max_draft = o->mode == KIPP_SPEC_DRAFT ? DEFAULT_K_DRAFT : DEFAULT_K_LOOKUP;
    sp->greedy = sampling->temperature == 0.0f;
    sp->backoff = GATE_BACKOFF_MIN;
    sp->cap_ctx = 256;
    sp->ctx = kipp_calloc(sp->cap_ctx, sizeof *sp->ctx, err);
    sp->row = kipp_calloc(V, sizeof(float), err);
    sp->p = kipp_calloc(V, sizeof(float), err);
    sp->res = kipp_calloc(V, sizeof(float), err);
    int rc = sp->ctx && sp->row && sp->p && sp->res ? KIPP_OK : KIPP_E_MEMORY;
    if (!rc && o->mode == KIPP_SPEC_DRAFT) {
        kipp_model *dm = o->draft_model;
        uint32_t dctx = kipp_model_checkpoint(dm)->context;
        kipp_session_options so = {.capacity = o->capacity && o->capacity < dctx ? o->capacity
                                                                                  : dctx};
        /* q keeps the target's filters and bias (bans stay banned) but not
         * its penalties: any q is exact under the acceptance rule, and this
         * one needs no penalty window to roll back. */
        kipp_sampling qs = *sampling;
        qs.repetition_penalty = 1.0f;
        qs.frequency_penalty = qs.presence_penalty = 0.0f;
        if (o->draft_temperature > 0.0f && !sp->greedy) qs.temperature = o->draft_temperature;
        qs.seed = sampling->seed ^ 0xD1B54A32D192ED03ull; /* its own stream */
        sp->q = kipp_calloc((size_t)sp->o.max_draft * V, sizeof(float), err);
        sp->drow = kipp_calloc(V, sizeof(float), err);
        if (!sp->q || !sp->drow) rc = KIPP_E_MEMORY;
        if (!rc) rc = kipp_session_create(dm, &so, &sp->dsession, err);
        if (!rc) rc = kipp_sampler_create(&qs, &sp->dsampler, err);
        if (rc) kipp_fail_prefix(err, "draft model");
    }
    if (rc) {
        kipp_spec_destroy(sp);
        return rc;
    }
    *out = sp;
    return KIPP_OK;
}

void kipp_spec_destroy(kipp_spec *sp) {
    if (!sp) return;
    kipp_session_destroy(sp->dsession);
    kipp_sampler_destroy(sp->dsampler);
    free(sp->ctx);
    free(sp->q);
    free(sp->drow);
    free(sp->row);
    free(sp->p);
    free(sp->res);
    free(sp);
}

void kipp_spec_test_set_rule(kipp_spec *sp, kipp_spec_rule rule) { sp->rule = rule; }

void kipp_spec_get_stats(const kipp_spec *sp, kipp_spec_stats *out) { *out = sp->stats; }

static int reserve_ctx(kipp_spec *sp, size_t n, kipp_error *err) {
    if (n <= sp->cap_ctx) return KIPP_OK;
    size_t cap = sp->cap_ctx;
    while (cap < n) cap *= 2;
    int32_t *p = realloc(sp->ctx, cap * sizeof *p);
    if (!p) return kipp_fail(err, KIPP_E_MEMORY, "speculation: out of memory for the context");
    sp->ctx = p;
    sp->cap_ctx = cap;
    return KIPP_OK;
}

/* The draft session keeps only positions that are still a prefix of ctx. */
static int draft_keep(kipp_spec *sp, size_t n, kipp_error *err) {
    if (!sp->dsession) return KIPP_OK;
    if (n > kipp_session_length(sp->dsession)) n = kipp_session_length(sp->dsession);
    sp->d_held = n;
    return kipp_session_truncate(sp->dsession, (uint32_t)n, err);
}

int kipp_spec_set_context(kipp_spec *sp, const int32_t *tokens, size_t n, kipp_error *err) {
    if (!sp || (n && !tokens))
        return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_spec_set_context: NULL argument");
    int rc = reserve_ctx(sp, n, err);
    if (rc) return rc;
    size_t common = 0;
    while (common < n && common < sp->n_ctx && sp->ctx[common] == tokens[common]) common++;
    memcpy(sp->ctx, tokens, n * sizeof *tokens);
    sp->n_ctx = n;
    sp->n_toks = 0;
    return draft_keep(sp, common < sp->d_held ? common : sp->d_held, err);
}

/* ---- drafters ----------------------------------------------------------- */

/* Token i of context + pending. */
static inline int32_t seq_at(const kipp_spec *sp, int32_t pending, size_t i) {
    return i < sp->n_ctx ? sp->ctx[i] : pending;
}

static uint32_t draft_lookup(const kipp_spec *sp, int32_t pending, uint32_t k, int32_t *out) {
    size_t n_seq = sp->n_ctx + 1;
    for (size_t n = LOOKUP_NGRAM_MAX; n >= LOOKUP_NGRAM_MIN; n--) {
        if (n_seq < n + 1) continue;
        /* Candidate match at j..j+n; its continuation starts at j+n, before
         * the suffix's end. Most recent first: recent text predicts best. */
        for (size_t j = n_seq - n; j-- > 0;) {
            size_t t = 0;
            while (t < n && seq_at(sp, pending, j + t) == seq_at(sp, pending, n_seq - n + t)) t++;
            if (t < n) continue;
            /* Copy the continuation, LZ77-style: where it runs past the end
             * of the sequence it continues into the draft itself, so a
             * repeating cycle (whose most recent earlier occurrence ends
             * just before the suffix) still drafts k tokens, not one. */
            uint32_t m = 0;
            for (size_t c = j + n; m < k; c++)
                out[m++] = c < n_seq ? seq_at(sp, pending, c) : out[c - n_seq];
            return m;
        }
    }
    return 0;
}

/* One sequence of a drafting call. */
typedef struct draft_job {
    kipp_spec *sp;
    int32_t pending;
    int32_t *out; /* the drafts: toks + 1 */
    uint32_t k;   /* drafts wanted (draft model: cut to the session's room) */
    uint32_t got;
    bool model;   /* drafts with the draft model */
} draft_job;

static int draft_eval(kipp_model *dm, kipp_eval_item *items, size_t n, kipp_error *err) {
    int rc = kipp_eval(dm, items, n, err);
    return rc ? kipp_fail_prefix(err, "draft model") : KIPP_OK;
}

/* The draft-model drafters of one call, in lockstep: each phase is ONE
 * batched eval of the draft model over every sequence still drafting (the
 * server drafts all its sequences at once; the cpu backend is batch
 * invariant, so each sequence drafts exactly what it would alone).
 *   1. catch up on the context, DRAFT_CHUNK positions per eval;
 *   2. the rest of the context + pending: q for d1;
 *   3. d_i drawn from q_i, evaluated for q_{i+1}, until each has its k. */
static int draft_models(draft_job *jobs, size_t n, kipp_model *dm, kipp_eval_item *items,
                        kipp_error *err) {
    for (;;) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            kipp_spec *sp = jobs[i].sp;
            if (jobs[i].model && sp->n_ctx - sp->d_held > DRAFT_CHUNK)
                items[m++] = (kipp_eval_item){sp->dsession, sp->ctx + sp->d_held, DRAFT_CHUNK,
                                              0, NULL};
        }
        if (m == 0) break;
        int rc = draft_eval(dm, items, m, err);
        if (rc) return rc;
        for (size_t i = 0; i < n; i++)
            if (jobs[i].model && jobs[i].sp->n_ctx - jobs[i].sp->d_held > DRAFT_CHUNK)
                jobs[i].sp->d_held += DRAFT_CHUNK;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        kipp_spec *sp = jobs[i].sp;
        if (!jobs[i].model) continue;
        uint32_t nb = (uint32_t)(sp->n_ctx - sp->d_held);
        memcpy(sp->dbuf, sp->ctx + sp->d_held, nb * sizeof *sp->dbuf);
        sp->dbuf[nb++] = jobs[i].pending;
        items[m++] = (kipp_eval_item){sp->dsession, sp->dbuf, nb, 1, sp->drow};
    }
    if (m == 0) return KIPP_OK;
    int rc = draft_eval(dm, items, m, err);
    if (rc) return rc;
    for (size_t i = 0; i < n; i++)
        if (jobs[i].model) jobs[i].sp->d_held = jobs[i].sp->n_ctx;
    for (uint32_t step = 0;; step++) {
        m = 0;
        for (size_t i = 0; i < n; i++) {
            draft_job *jb = &jobs[i];
            kipp_spec *sp = jb->sp;
            if (!jb->model || step >= jb->k) continue;
            float *q = sp->q + (size_t)step * V;
            memcpy(sp->row, sp->drow, V * sizeof(float));
            int32_t top = kipp_sampler_probs(sp->dsampler, sp->row, q);
            int32_t d = sp->greedy ? top : kipp_sampler_draw(sp->dsampler, q);
            if (d < 0) { /* q bans everything: nothing more to draft */
                jb->k = step;
                continue;
            }
            jb->out[jb->got++] = d;
            if (step + 1 < jb->k)
                items[m++] = (kipp_eval_item){sp->dsession, &jb->out[step], 1, 1, sp->drow};
        }
        if (m == 0) return KIPP_OK;
        rc = draft_eval(dm, items, m, err);
        if (rc) return rc;
    }
}

int kipp_spec_draft_batch(kipp_spec *const *sps, size_t n, const int32_t *pending,
                          const uint32_t *max, int32_t *const *toks, uint32_t *n_toks,
                          kipp_error *err) {
    if (n == 0) return KIPP_OK;
    if (!sps || !pending || !max || !toks || !n_toks)
        return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_spec_draft_batch: NULL argument");
    kipp_model *dm = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!sps[i] || !toks[i])
            return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_spec_draft_batch: NULL sequence %zu", i);
        if (pending[i] < 0 || pending[i] >= V)
            return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_spec_draft: pending token %d out of range",
                             pending[i]);
        for (size_t j = 0; j < i; j++)
            if (sps[j] == sps[i])
                return kipp_fail(err, KIPP_E_ARGUMENT,
                                 "kipp_spec_draft_batch: sequence %zu is also sequence %zu", i, j);
        if (sps[i]->o.mode == KIPP_SPEC_DRAFT) {
            if (dm && dm != sps[i]->o.draft_model)
                return kipp_fail(err, KIPP_E_ARGUMENT,
                                 "kipp_spec_draft_batch: the sequences use different draft models");
            dm = sps[i]->o.draft_model;
        }
    }
    enum { STACK_JOBS = 8 };
    draft_job jstack[STACK_JOBS];
    kipp_eval_item istack[STACK_JOBS];
    draft_job *jobs = n <= STACK_JOBS ? jstack : kipp_calloc(n, sizeof *jobs, err);
    kipp_eval_item *items = n <= STACK_JOBS ? istack : kipp_calloc(n, sizeof *items, err);
    int rc = jobs && items ? KIPP_OK : KIPP_E_MEMORY;
    for (size_t i = 0; !rc && i < n; i++) {
        kipp_spec *sp = sps[i];
        draft_job *jb = &jobs[i];
        *jb = (draft_job){sp, pending[i], toks[i] + 1, 0, 0, false};
        toks[i][0] = pending[i];
        jb->k = max[i] < sp->o.max_draft ? max[i] : sp->o.max_draft;
        if (sp->o.gate && sp->suspend > 0) {
            sp->suspend--;
            sp->stats.gated++;
            jb->k = 0;
        }
        if (jb->k && sp->o.mode == KIPP_SPEC_LOOKUP)
            jb->got = draft_lookup(sp, pending[i], jb->k, jb->out);
        if (jb->k && sp->o.mode == KIPP_SPEC_DRAFT) {
            /* The draft session will hold ctx + pending + d1..d(k-1). */
            uint32_t cap = kipp_session_capacity(sp->dsession);
            if (sp->n_ctx + 1 > cap) jb->k = 0;
            else if (sp->n_ctx + jb->k > cap) jb->k = (uint32_t)(cap - sp->n_ctx);
            jb->model = jb->k > 0;
        }
    }
    if (!rc) rc = draft_models(jobs, n, dm, items, err);
    for (size_t i = 0; !rc && i < n; i++) {
        kipp_spec *sp = sps[i];
        memcpy(sp->toks, toks[i], (1 + jobs[i].got) * sizeof *toks[i]);
        sp->n_toks = n_toks[i] = 1 + jobs[i].got;
    }
    if (jobs != jstack) free(jobs);
    if (items != istack) free(items);
    return rc;
}

int kipp_spec_draft(kipp_spec *sp, int32_t pending, uint32_t max, int32_t *toks, uint32_t *n,
                    kipp_error *err) {
    if (!sp || !toks || !n) return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_spec_draft: NULL argument");
    return kipp_spec_draft_batch(&sp, 1, &pending, &max, &toks, n, err);
}

/* ---- verification -------------------------------------------------------- */

static void gate_update(kipp_spec *sp, uint32_t drafted, uint32_t produced) {
    if (!sp->o.gate || drafted == 0) return;
    sp->g_tokens += produced;
    sp->g_cost += 1.0 + GATE_ROW_COST * drafted +
                  (sp->o.mode == KIPP_SPEC_DRAFT ? GATE_DRAFT_COST * drafted : 0.0);
    if (++sp->g_steps < GATE_WINDOW) return;
    if (sp->g_tokens < sp->g_cost) { /* slower than plain decoding: back off */
        sp->suspend = sp->backoff;
        sp->backoff = sp->backoff * 2 > GATE_BACKOFF_MAX ? GATE_BACKOFF_MAX : sp->backoff * 2;
    } else {
        sp->backoff = GATE_BACKOFF_MIN;
    }
    sp->g_steps = 0;
    sp->g_tokens = sp->g_cost = 0.0;
}

/* Rejection of d at row i in sampled mode: a draw from the normalised
 * max(0, p - q). For lookup q is one-hot at d, so that is p without d. */
static int32_t draw_residual(kipp_spec *sp, kipp_sampler *sampler, uint32_t i, int32_t d) {
    if (sp->rule == KIPP_SPEC_RULE_WRONG_RESIDUAL) return kipp_sampler_draw(sampler, sp->p);
    if (sp->o.mode == KIPP_SPEC_LOOKUP) {
        sp->p[d] = 0.0f;
        return kipp_sampler_draw(sampler, sp->p);
    }
    const float *q = sp->q + (size_t)i * V;
    for (size_t t = 0; t < V; t++) sp->res[t] = sp->p[t] > q[t] ? sp->p[t] - q[t] : 0.0f;
    int32_t y = kipp_sampler_draw(sampler, sp->res);
    /* Only rounding can leave no mass (a rejection means p < q somewhere,
     * hence p > q elsewhere); p itself is then the closest honest choice. */
    return y >= 0 ? y : kipp_sampler_draw(sampler, sp->p);
}

int kipp_spec_verify(kipp_spec *sp, kipp_sampler *sampler, kipp_session *session,
                     const float *rows, int32_t *out, uint32_t *n_out, kipp_error *err) {
    if (!sp || !sampler || !session || !rows || !out || !n_out)
        return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_spec_verify: NULL argument");
    if (sp->n_toks == 0)
        return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_spec_verify: no draft to verify");
    uint32_t n = sp->n_toks, k = n - 1, kept = 0;
    uint32_t len = kipp_session_length(session);
    if (len < n)
        return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_spec_verify: the session does not hold "
                         "the %u drafted tokens", n);
    int32_t y = -1;
    for (; kept < k; kept++) {
        int32_t d = sp->toks[kept + 1];
        memcpy(sp->row, rows + (size_t)kept * V, V * sizeof(float));
        if (sp->greedy) {
            y = kipp_sampler_sample(sampler, sp->row);
            if (y != d) break;
        } else {
            if (kipp_sampler_probs(sampler, sp->row, sp->p) < 0) {
                y = -1;
                break;
            }
            float qd = sp->o.mode == KIPP_SPEC_LOOKUP ? 1.0f : sp->q[(size_t)kept * V + d];
            /* u < p/q, written without the division (q(d) > 0: d was drawn from q). */
            if (!(kipp_sampler_uniform(sampler) * qd < sp->p[d])) {
                y = draw_residual(sp, sampler, kept, d);
                break;
            }
        }
        kipp_sampler_accept(sampler, d);
        out[kept] = d;
    }
    if (kept == k) { /* every draft kept: the last row gives one more */
        memcpy(sp->row, rows + (size_t)k * V, V * sizeof(float));
        y = kipp_sampler_sample(sampler, sp->row);
    }
    if (y < 0) {
        sp->n_toks = 0;
        if (kipp_logits_have_nan(sp->row)) /* the server matches this message */
            return kipp_fail(err, KIPP_E_BACKEND, "%s", KIPP_NAN_LOGITS);
        return kipp_fail(err, KIPP_E_ARGUMENT, "every token is banned; nothing to sample");
    }
    kipp_sampler_accept(sampler, y);
    out[kept] = y;
    *n_out = kept + 1;

    /* Roll back the rejected drafts; the context gains pending + kept. */
    int rc = kipp_session_truncate(session, len - n + 1 + kept, err);
    if (!rc) rc = reserve_ctx(sp, sp->n_ctx + 1 + kept, err);
    if (rc) {
        sp->n_toks = 0;
        return rc;
    }
    size_t old = sp->n_ctx;
    memcpy(sp->ctx + old, sp->toks, (1 + kept) * sizeof *sp->toks);
    sp->n_ctx += 1 + kept;
    /* The draft session holds old ctx + pending + d1..d(k-1). */
    if (sp->dsession && sp->d_held == old)
        rc = draft_keep(sp, old + 1 + (kept < k ? kept : k - (k > 0)), err);
    sp->n_toks = 0;
    sp->stats.steps++;
    sp->stats.tokens += kept + 1;
    sp->stats.drafted += k;
    sp->stats.accepted += kept;
    gate_update(sp, k, kept + 1);
    return rc;
}
