/* FIFO scheduler; see scheduler.h for the contract.
 *
 * Choice life cycle. A choice's tokens are toks[0..n_toks): the prompt, then
 * every sampled token; `done` of them are in its session. It is
 *   WAIT     admitted but without a session: choices 1..n-1 until choice 0
 *            has published the prompt, or a choice preempted for KV
 *   RUN      with a session that first adopted the longest published prefix
 *            of toks; each step evaluates a chunk of toks[done..n_toks)
 *            (a prefill chunk, or the 1 token sampled last) and the chunk
 *            that reaches n_toks asks for 1 logits row, which is sampled
 *   DONE     blocks published, session destroyed
 * A preempted choice keeps toks and its sampler, so recomputing it and
 * sampling on is exactly what it would have done without the preemption.
 * A step samples from every row it produced, so a choice yields one token
 * per step once its prompt is in. Like `kipp generate`, the prompt tokens
 * are fed to the sampler's penalty window, and the final sampled token is
 * never evaluated - so greedy output equals `kipp generate --temperature 0`.
 *
 * Penalties: unlike `kipp generate`/`kipp chat` (llama.cpp-style, prompt in
 * the window), only generated tokens enter a choice's penalty window, as
 * OpenAI defines frequency_penalty/presence_penalty ("how often a token has
 * appeared in the text so far" of the completion). repetition_penalty
 * shares the window, so it also counts generated tokens only here. The
 * window stays the sampler's last 64 tokens.
 *
 * Constrained decoding: a job's grammar is shared by its choices (one
 * state each, one mask cache); the row is masked after the raw log-prob
 * statistics are taken and before the sampler sees it.
 *
 * Stop strings: generated text is kept per choice; bytes that could still
 * be the start of a stop string are held back until they cannot, so a
 * streamed client never sees any part of a stop string. */
#include "server/scheduler.h"
#include "core/common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum seq_state { SEQ_WAIT, SEQ_RUN, SEQ_DONE } seq_state;

typedef struct seq {
    seq_state state;
    uint32_t index; /* choice index */
    kipp_session *session;
    kipp_sampler *sampler;
    kipp_detok_stream *detok;
    int32_t *toks;     /* [n_prompt + max_tokens + 1]: prompt, then sampled ids */
    uint32_t n_toks;
    uint32_t done;     /* toks in the session */
    uint64_t serial;   /* when it last got a session: the newest is preempted first */
    kipp_grammar_state *grammar; /* NULL = unconstrained */
    kipp_spec *spec;   /* NULL unless the server speculates (remade at each start) */
    int32_t draft[1 + KIPP_SPEC_MAX_DRAFT]; /* pending + drafts of this step */
    uint32_t n_draft;  /* 0 = not drafted this step */
    uint32_t generated;
    char *text; /* generated text so far (stop-string search), [text_len] */
    size_t text_len, text_cap, emitted;
} seq;

struct sched_job {
    sched_job *next; /* queue or active list */
    int32_t *prompt;
    size_t n_prompt;
    uint32_t n_choices, n_done, max_tokens, capacity;
    kipp_sampling sampling;
    kipp_logit_bias *bias;
    char *stops[SCHED_MAX_STOPS];
    size_t n_stops, max_stop_len;
    int32_t top_logprobs;
    kipp_grammar *grammar;
    sched_events events;
    void *owner;
    double t_submit, t_admit, t_first, t_last;
    uint32_t completion_tokens;
    bool prompt_published; /* choice 0 has its prompt in and published it */
    bool failed;
    char failure[600];
    seq seqs[SCHED_MAX_CHOICES];
};

struct sched {
    kipp_model *model;
    const kipp_checkpoint *ck;
    sched_config cfg;
    sched_job *queue_head, *queue_tail;
    sched_job *active_head; /* in admission order */
    uint32_t active_sequences;  /* choices of admitted jobs not yet done */
    uint32_t running_sequences; /* of those, with a session */
    uint64_t serial;
    float *logits;          /* [max_sequences][rows_per_item][KIPP_VOCAB_SIZE] */
    uint32_t rows_per_item; /* 1, or 1 + K when speculating */
    float *raw;             /* [KIPP_VOCAB_SIZE]: a row before the sampler edits it */
    kipp_eval_item *items;  /* [max_sequences] */
    seq **item_seq;         /* [max_sequences] */
    sched_job **item_job;
    /* [max_sequences] each: one step's drafting, all sequences at once */
    kipp_spec **d_sps;
    int32_t *d_pending, **d_toks;
    uint32_t *d_max, *d_n;
    sched_metrics m;
};

const double sched_ttft_bounds[SCHED_TTFT_BUCKETS] = {0.05, 0.1, 0.25, 0.5, 1,
                                                      2.5,  5,   10,   30,  60};
const double sched_tpot_bounds[SCHED_TPOT_BUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1,
                                                      0.25,  0.5,  1,     2.5};

static void observe(sched_histogram *h, const double *bounds, int n_bounds, double v) {
    int b = 0;
    while (b < n_bounds && v > bounds[b]) b++;
    h->bucket[b]++;
    h->sum += v;
    h->count++;
}

static int fail(kipp_error *err, int code, const char *msg) {
    if (err) {
        err->code = code;
        snprintf(err->message, sizeof err->message, "%s", msg);
    }
    return code;
}

int sched_create(kipp_model *model, const sched_config *config, sched **out, kipp_error *err) {
    *out = NULL;
    if (!model || !config || config->max_sequences == 0 ||
        config->prefill_chunk == 0 || config->step_prefill_budget == 0)
        return fail(err, KIPP_E_ARGUMENT, "scheduler: bad configuration");
    sched *s = calloc(1, sizeof *s);
    if (!s) return fail(err, KIPP_E_MEMORY, "scheduler: out of memory");
    s->model = model;
    s->ck = kipp_model_checkpoint(model);
    s->cfg = *config;
    size_t n = config->max_sequences;
    uint32_t k = config->spec.max_draft ? config->spec.max_draft : KIPP_SPEC_MAX_DRAFT;
    s->rows_per_item = config->spec.mode != KIPP_SPEC_OFF ? 1 + k : 1;
    s->logits = malloc(n * s->rows_per_item * KIPP_VOCAB_SIZE * sizeof(float));
    s->raw = malloc(KIPP_VOCAB_SIZE * sizeof(float));
    s->items = calloc(n, sizeof *s->items);
    s->item_seq = calloc(n, sizeof *s->item_seq);
    s->item_job = calloc(n, sizeof *s->item_job);
    s->d_sps = calloc(n, sizeof *s->d_sps);
    s->d_pending = calloc(n, sizeof *s->d_pending);
    s->d_toks = calloc(n, sizeof *s->d_toks);
    s->d_max = calloc(n, sizeof *s->d_max);
    s->d_n = calloc(n, sizeof *s->d_n);
    if (!s->logits || !s->raw || !s->items || !s->item_seq || !s->item_job || !s->d_sps ||
        !s->d_pending || !s->d_toks || !s->d_max || !s->d_n) {
        sched_destroy(s);
        return fail(err, KIPP_E_MEMORY, "scheduler: out of memory for logits");
    }
    *out = s;
    return KIPP_OK;
}

/* Publishes the session's blocks, its partial last one included (for later
 * requests, the next turn, or this choice's own recompute) and gives the
 * session back. */
static void drop_session(sched *s, seq *q) {
    if (!q->session) return;
    kipp_error err;
    kipp_session_publish(q->session, &err);
    kipp_session_destroy(q->session);
    q->session = NULL;
    q->done = 0;
    kipp_spec_destroy(q->spec); /* its context follows the session: remade at restart */
    q->spec = NULL;
    q->n_draft = 0;
    s->running_sequences--;
}

static void release_seq(sched *s, sched_job *j, seq *q) {
    drop_session(s, q);
    if (q->sampler) s->active_sequences--; /* made at admission, once */
    kipp_sampler_destroy(q->sampler);
    q->sampler = NULL;
    kipp_detok_stream_destroy(q->detok);
    q->detok = NULL;
    kipp_grammar_state_destroy(q->grammar);
    q->grammar = NULL;
}

static void free_job(sched *s, sched_job *j) {
    for (uint32_t c = 0; c < j->n_choices; c++) {
        release_seq(s, j, &j->seqs[c]);
        free(j->seqs[c].text);
        free(j->seqs[c].toks);
    }
    for (size_t k = 0; k < j->n_stops; k++) free(j->stops[k]);
    free(j->bias);
    free(j->prompt);
    kipp_grammar_destroy(j->grammar);
    free(j);
}

void sched_destroy(sched *s) {
    if (!s) return;
    for (sched_job *j = s->queue_head, *n; j; j = n) {
        n = j->next;
        free_job(s, j);
    }
    for (sched_job *j = s->active_head, *n; j; j = n) {
        n = j->next;
        free_job(s, j);
    }
    free(s->logits);
    free(s->raw);
    free(s->items);
    free(s->item_seq);
    free(s->item_job);
    free(s->d_sps);
    free(s->d_pending);
    free(s->d_toks);
    free(s->d_max);
    free(s->d_n);
    free(s);
}

static int submit(sched *s, const sched_request *r, const sched_events *events, void *owner,
                  sched_job **out, kipp_error *err);

int sched_submit(sched *s, const sched_request *r, const sched_events *events, void *owner,
                 sched_job **out, kipp_error *err) {
    *out = NULL;
    kipp_grammar *grammar = r->grammar; /* ours from here on, whatever happens */
    int rc = submit(s, r, events, owner, out, err);
    if (*out) (*out)->grammar = grammar;
    else kipp_grammar_destroy(grammar);
    return rc;
}

static int submit(sched *s, const sched_request *r, const sched_events *events, void *owner,
                  sched_job **out, kipp_error *err) {
    *out = NULL;
    if (!r->prompt || r->n_prompt == 0 || r->n_choices == 0 ||
        r->n_choices > SCHED_MAX_CHOICES || r->max_tokens == 0 || r->n_stops > SCHED_MAX_STOPS ||
        r->top_logprobs < -1 || r->top_logprobs > SCHED_MAX_TOP_LOGPROBS)
        return fail(err, KIPP_E_ARGUMENT, "scheduler: bad request");
    uint64_t cap = (uint64_t)r->n_prompt + r->max_tokens;
    if (cap > s->ck->context)
        return fail(err, KIPP_E_CAPACITY, "prompt + max_tokens exceeds the context length");
    kipp_pool_stats ps;
    kipp_pool_stats_get(s->model, s->cfg.kv_quant, &ps, NULL);
    uint64_t pool_positions = (uint64_t)ps.blocks_total * ps.block_positions;
    if (r->n_choices > s->cfg.max_sequences) {
        s->m.jobs_rejected++;
        if (err) {
            err->code = KIPP_E_CAPACITY;
            snprintf(err->message, sizeof err->message,
                     "n = %u exceeds this server's %u sequences (--max-sessions); lower n",
                     r->n_choices, s->cfg.max_sequences);
        }
        return KIPP_E_CAPACITY;
    }
    /* Each choice must fit the pool alone (prompt + max_tokens, whole
     * blocks); choices together need not: preemption takes turns. */
    if (((cap + ps.block_positions - 1) / ps.block_positions) * ps.block_positions >
        pool_positions) {
        s->m.jobs_rejected++;
        if (err) {
            err->code = KIPP_E_CAPACITY;
            snprintf(err->message, sizeof err->message,
                     "prompt + max_tokens = %llu positions exceeds this server's KV pool of %llu "
                     "positions (--kv-pool-mib); lower max_tokens or shorten the prompt",
                     (unsigned long long)cap, (unsigned long long)pool_positions);
        }
        return KIPP_E_CAPACITY;
    }
    sched_job *j = calloc(1, sizeof *j);
    if (!j) return fail(err, KIPP_E_MEMORY, "out of memory");
    j->prompt = malloc(r->n_prompt * sizeof *j->prompt);
    if (r->sampling.n_logit_bias)
        j->bias = malloc(r->sampling.n_logit_bias * sizeof *j->bias);
    bool ok = j->prompt && (!r->sampling.n_logit_bias || j->bias);
    for (size_t k = 0; ok && k < r->n_stops; k++) {
        size_t len = strlen(r->stops[k]);
        if (len == 0 || len > SCHED_MAX_STOP_BYTES) {
            free_job(s, j);
            return fail(err, KIPP_E_ARGUMENT, "scheduler: bad stop string");
        }
        j->stops[k] = strdup(r->stops[k]);
        ok = j->stops[k] != NULL;
        j->n_stops = k + 1;
        if (len > j->max_stop_len) j->max_stop_len = len;
    }
    if (!ok) {
        free_job(s, j);
        return fail(err, KIPP_E_MEMORY, "out of memory");
    }
    memcpy(j->prompt, r->prompt, r->n_prompt * sizeof *j->prompt);
    j->n_prompt = r->n_prompt;
    j->n_choices = r->n_choices;
    j->top_logprobs = r->top_logprobs;
    j->max_tokens = r->max_tokens;
    j->capacity = (uint32_t)cap;
    j->sampling = r->sampling;
    if (j->bias) memcpy(j->bias, r->sampling.logit_bias, r->sampling.n_logit_bias * sizeof *j->bias);
    j->sampling.logit_bias = j->bias;
    j->events = *events;
    j->owner = owner;
    j->t_submit = kipp_now_seconds();
    if (s->queue_tail) s->queue_tail->next = j;
    else s->queue_head = j;
    s->queue_tail = j;
    s->m.jobs_submitted++;
    *out = j;
    return KIPP_OK;
}

static bool unlink_from(sched_job **head, sched_job *j, sched_job **tail) {
    sched_job *prev = NULL;
    for (sched_job *p = *head; p; prev = p, p = p->next) {
        if (p != j) continue;
        if (prev) prev->next = p->next;
        else *head = p->next;
        if (tail && *tail == p) *tail = prev;
        return true;
    }
    return false;
}

void sched_cancel(sched *s, sched_job *j) {
    if (!j) return;
    if (!unlink_from(&s->queue_head, j, &s->queue_tail)) unlink_from(&s->active_head, j, NULL);
    s->m.jobs_cancelled++;
    free_job(s, j);
}

bool sched_busy(const sched *s) { return s->queue_head || s->active_head; }

static uint32_t blocks_for(uint64_t positions) {
    return (uint32_t)((positions + 31) / 32);
}

static uint32_t pool_free(const sched *s) {
    kipp_pool_stats ps;
    kipp_pool_stats_get(s->model, s->cfg.kv_quant, &ps, NULL);
    return ps.blocks_free;
}

/* Free blocks a choice needs to start: its tokens' blocks that are not
 * published, plus one to grow into. Optimistic (adopted blocks may be
 * cached, i.e. counted as free); preemption corrects an overcommit. */
static uint32_t start_need(sched *s, const int32_t *toks, uint32_t n) {
    uint32_t matched = kipp_pool_match_length(s->model, s->cfg.kv_quant, toks, n - 1);
    return blocks_for(n) - matched / 32 + 1;
}

/* Gives a choice a session that adopts the longest published prefix of its
 * tokens (all but the last, whose logits it needs). */
static bool seq_start(sched *s, sched_job *j, seq *q, kipp_error *err) {
    kipp_session_options so = {.capacity = j->capacity, .kv_quant = s->cfg.kv_quant};
    if (kipp_session_create(s->model, &so, &q->session, err)) return false;
    uint32_t got = 0;
    if (kipp_session_match_prefix(q->session, q->toks, q->n_toks - 1, &got, err)) {
        kipp_session_destroy(q->session);
        q->session = NULL;
        return false;
    }
    q->done = got;
    /* A constrained choice decodes plainly: drafts are verified against the
     * unmasked distribution, so the grammar would have to mask every
     * verification row. The drafter's context is every token the target
     * evaluates before the next sampled one: all of toks. */
    if (s->cfg.spec.mode != KIPP_SPEC_OFF && !q->grammar) {
        kipp_spec_options o = s->cfg.spec;
        o.capacity = j->capacity;
        kipp_sampling sp = j->sampling;
        sp.seed += q->index;
        if (kipp_spec_create(s->model, &o, &sp, &q->spec, err) ||
            kipp_spec_set_context(q->spec, q->toks, q->n_toks, err)) {
            kipp_spec_destroy(q->spec);
            q->spec = NULL;
            kipp_session_destroy(q->session);
            q->session = NULL;
            return false;
        }
    }
    q->state = SEQ_RUN;
    q->serial = ++s->serial;
    s->m.prefix_tokens_reused += got;
    s->running_sequences++;
    return true;
}

/* Creates every choice's sampler, decoder and token list, and choice 0's
 * session; the other choices wait for choice 0's published prompt. */
static bool admit(sched *s, sched_job *j, kipp_error *err) {
    for (uint32_t c = 0; c < j->n_choices; c++) {
        seq *q = &j->seqs[c];
        q->index = c;
        q->state = SEQ_WAIT;
        kipp_sampling sp = j->sampling;
        sp.seed += c; /* n > 1: distinct but reproducible choices */
        if (kipp_sampler_create(&sp, &q->sampler, err)) return false;
        s->active_sequences++;
        q->toks = malloc(((size_t)j->n_prompt + j->max_tokens + 1) * sizeof *q->toks);
        if (!q->toks) {
            fail(err, KIPP_E_MEMORY, "out of memory");
            return false;
        }
        memcpy(q->toks, j->prompt, j->n_prompt * sizeof *q->toks);
        q->n_toks = (uint32_t)j->n_prompt;
        if (kipp_detok_stream_create(s->model, &q->detok, err) ||
            (j->grammar && kipp_grammar_state_create(j->grammar, &q->grammar, err)))
            return false;
    }
    return seq_start(s, j, &j->seqs[0], err);
}

static void fail_job(sched_job *j, const char *what, const char *message) {
    j->failed = true;
    snprintf(j->failure, sizeof j->failure, "%s: %s", what, message);
}

/* Waiting choices of admitted jobs first (preempted ones and n > 1 choices
 * whose prompt is published), in admission order; then queued jobs, FIFO.
 * Whoever does not fit waits, and nobody behind it overtakes it. */
static void admit_waiting(sched *s) {
    for (sched_job *j = s->active_head; j; j = j->next) {
        for (uint32_t c = 0; c < j->n_choices && !j->failed; c++) {
            seq *q = &j->seqs[c];
            if (q->state != SEQ_WAIT || (c > 0 && !j->prompt_published)) continue;
            if (start_need(s, q->toks, q->n_toks) > pool_free(s)) return;
            kipp_error err = {0};
            if (!seq_start(s, j, q, &err)) fail_job(j, "starting a choice", err.message);
        }
    }
    while (s->queue_head) {
        sched_job *j = s->queue_head;
        if (s->active_sequences + j->n_choices > s->cfg.max_sequences ||
            start_need(s, j->prompt, (uint32_t)j->n_prompt) + j->n_choices - 1 > pool_free(s))
            return; /* strict FIFO: the head waits, nobody overtakes it */
        s->queue_head = j->next;
        if (!s->queue_head) s->queue_tail = NULL;
        j->next = NULL;
        j->t_admit = kipp_now_seconds();
        s->m.queue_wait_sum += j->t_admit - j->t_submit;
        s->m.queue_wait_count++;
        s->m.prompt_tokens += j->n_prompt;
        kipp_error err = {0};
        if (!admit(s, j, &err)) {
            s->m.jobs_failed++;
            j->events.job_failed(j->owner, err.message);
            free_job(s, j);
            continue;
        }
        sched_job **tail = &s->active_head;
        while (*tail) tail = &(*tail)->next;
        *tail = j;
    }
}

static void append_text(seq *q, const char *t, size_t n) {
    if (q->text_len + n + 1 > q->text_cap) {
        size_t cap = q->text_cap ? q->text_cap : 256;
        while (cap < q->text_len + n + 1) cap *= 2;
        char *p = realloc(q->text, cap);
        if (!p) return; /* keep what we have; the stop search sees less */
        q->text = p;
        q->text_cap = cap;
    }
    memcpy(q->text + q->text_len, t, n);
    q->text_len += n;
}

static void emit_until(sched_job *j, seq *q, size_t end) {
    if (end > q->emitted) j->events.text(j->owner, q->index, q->text + q->emitted, end - q->emitted);
    if (end > q->emitted) q->emitted = end;
}

/* Returns true when a stop string now occurs (text truncated before it);
 * otherwise emits everything that cannot be the start of a stop string. */
static bool check_stops(sched_job *j, seq *q, size_t old_len) {
    if (j->n_stops == 0) {
        emit_until(j, q, q->text_len);
        return false;
    }
    size_t from = old_len >= j->max_stop_len ? old_len - j->max_stop_len + 1 : 0;
    size_t best = SIZE_MAX;
    for (size_t k = 0; k < j->n_stops; k++) {
        size_t len = strlen(j->stops[k]);
        for (size_t i = from; i + len <= q->text_len && i < best; i++)
            if (!memcmp(q->text + i, j->stops[k], len)) {
                best = i;
                break;
            }
    }
    if (best != SIZE_MAX) {
        q->text_len = best;
        emit_until(j, q, best);
        return true;
    }
    size_t hold = 0;
    for (size_t k = 0; k < j->n_stops; k++) {
        size_t len = strlen(j->stops[k]);
        for (size_t h = len - 1; h > hold; h--)
            if (h <= q->text_len && !memcmp(q->text + q->text_len - h, j->stops[k], h)) {
                hold = h;
                break;
            }
    }
    emit_until(j, q, q->text_len - hold);
    return false;
}

static void finish_seq(sched *s, sched_job *j, seq *q, const char *reason, bool flush) {
    if (flush && q->detok) {
        char buf[64];
        size_t n = 0, old = q->text_len;
        kipp_detok_stream_flush(q->detok, buf, sizeof buf, &n);
        append_text(q, buf, n);
        if (check_stops(j, q, old)) reason = "stop";
        else emit_until(j, q, q->text_len); /* nothing more can complete a stop */
    }
    q->state = SEQ_DONE;
    release_seq(s, j, q);
    j->n_done++;
    j->events.choice_done(j->owner, q->index, reason);
}

/* log-sum-exp of raw[] and its top n entries (best first, lowest id on ties). */
static double raw_stats(const float *raw, uint32_t n, sched_token_info *info) {
    float mx = -INFINITY;
    for (size_t i = 0; i < KIPP_VOCAB_SIZE; i++) mx = raw[i] > mx ? raw[i] : mx;
    double sum = 0;
    for (size_t i = 0; i < KIPP_VOCAB_SIZE; i++) sum += exp((double)raw[i] - mx);
    info->n_top = 0;
    for (size_t i = 0; i < KIPP_VOCAB_SIZE && n; i++) {
        float v = raw[i];
        if (info->n_top == n && !(v > raw[info->top_id[n - 1]])) continue;
        uint32_t k = info->n_top < n ? info->n_top++ : n - 1;
        while (k > 0 && v > raw[info->top_id[k - 1]]) {
            info->top_id[k] = info->top_id[k - 1];
            k--;
        }
        info->top_id[k] = (int32_t)i;
    }
    return mx + log(sum);
}

/* Everything that follows the choice of token id for choice q: timing,
 * log-probs (from raw, the row before the grammar mask and the sampler
 * edited it), stop tokens and strings, length, and toks (the token is
 * evaluated next step). */
static void deliver(sched *s, sched_job *j, seq *q, int32_t id, const float *raw) {
    double t = kipp_now_seconds();
    if (j->t_first == 0) {
        j->t_first = t;
        observe(&s->m.ttft, sched_ttft_bounds, SCHED_TTFT_BUCKETS, t - j->t_submit);
    }
    j->t_last = t;
    if (!j->prompt_published) { /* the prompt is in: let the other choices adopt it */
        kipp_error err;
        kipp_session_publish(q->session, &err);
        j->prompt_published = true;
    }
    sched_token_info info;
    double lse = 0;
    if (j->top_logprobs >= 0) {
        lse = raw_stats(raw, (uint32_t)j->top_logprobs, &info);
        for (uint32_t k = 0; k < info.n_top; k++)
            info.top_logprob[k] = (float)(raw[info.top_id[k]] - lse);
    }
    q->generated++;
    j->completion_tokens++;
    s->m.tokens_generated++;
    for (uint32_t k = 0; k < s->ck->n_stops; k++)
        if (id == s->ck->stops[k]) {
            finish_seq(s, j, q, "stop", true);
            return;
        }
    if (j->top_logprobs >= 0 && j->events.token) {
        info.id = id;
        info.logprob = (float)(raw[id] - lse);
        j->events.token(j->owner, q->index, &info);
    }
    char buf[512];
    size_t n = 0;
    kipp_error err;
    /* Ids the tokenizer has no bytes for (padding rows of the output head)
     * decode to nothing; the token still counts. */
    if (kipp_detok_stream_push(q->detok, id, buf, sizeof buf, &n, &err) != KIPP_OK) n = 0;
    size_t old = q->text_len;
    append_text(q, buf, n);
    if (check_stops(j, q, old)) {
        finish_seq(s, j, q, "stop", false);
        return;
    }
    if (q->generated >= j->max_tokens || q->n_toks >= j->capacity) {
        finish_seq(s, j, q, "length", true);
        return;
    }
    q->toks[q->n_toks++] = id; /* evaluated next step */
}

/* One sampled token for choice q from its logits row. */
static void take_token(sched *s, sched_job *j, seq *q, float *row) {
    if (j->top_logprobs >= 0)
        memcpy(s->raw, row, KIPP_VOCAB_SIZE * sizeof(float)); /* the sampler edits row */
    if (q->grammar) kipp_grammar_mask(q->grammar, row);
    int32_t id = kipp_sampler_sample(q->sampler, row);
    if (id < 0) {
        j->failed = true;
        if (kipp_logits_have_nan(row))
            snprintf(j->failure, sizeof j->failure, "%s", KIPP_NAN_LOGITS);
        else
            snprintf(j->failure, sizeof j->failure, "every token is banned (logit_bias%s); "
                     "nothing to sample", q->grammar ? " and the output format" : "");
        return;
    }
    bool is_stop = false;
    for (uint32_t k = 0; k < s->ck->n_stops; k++) is_stop |= id == s->ck->stops[k];
    kipp_error gerr;
    if (q->grammar && !is_stop && kipp_grammar_accept(q->grammar, id, &gerr)) {
        j->failed = true; /* the mask allowed it: an internal error */
        snprintf(j->failure, sizeof j->failure, "constrained decoding: %s", gerr.message);
        return;
    }
    kipp_sampler_accept(q->sampler, id);
    deliver(s, j, q, id, s->raw);
}

/* A speculative step's rows for choice q: verification keeps the drafts the
 * target agrees with (rolling the session back over the rest, inside its
 * private tail) and yields 1..n tokens, delivered in order until the choice
 * finishes. Row i is the raw distribution of output i, so log-probs are
 * those of plain decoding. */
static void take_spec(sched *s, sched_job *j, seq *q, const kipp_eval_item *it) {
    int32_t out[1 + KIPP_SPEC_MAX_DRAFT];
    uint32_t n_out = 0;
    kipp_error err = {0};
    q->n_draft = 0;
    if (kipp_spec_verify(q->spec, q->sampler, q->session, it->logits, out, &n_out, &err)) {
        j->failed = true;
        if (strstr(err.message, "banned"))
            snprintf(j->failure, sizeof j->failure, "every token is banned (logit_bias); "
                     "nothing to sample");
        else if (strcmp(err.message, KIPP_NAN_LOGITS) == 0)
            snprintf(j->failure, sizeof j->failure, "%s", KIPP_NAN_LOGITS);
        else
            snprintf(j->failure, sizeof j->failure, "speculation failed: %s", err.message);
        return;
    }
    q->done = kipp_session_length(q->session); /* pending + the accepted drafts */
    s->m.spec_drafted += it->n_tokens - 1;
    s->m.spec_accepted += n_out - 1;
    for (uint32_t i = 0; i < n_out && q->state != SEQ_DONE && !j->failed; i++)
        deliver(s, j, q, out[i], it->logits + (size_t)i * KIPP_VOCAB_SIZE);
}

/* The running choice that got its session last, or NULL. */
static seq *newest_running(sched *s, sched_job **job) {
    seq *best = NULL;
    for (sched_job *j = s->active_head; j; j = j->next)
        for (uint32_t c = 0; c < j->n_choices; c++) {
            seq *q = &j->seqs[c];
            if (q->session && (!best || q->serial > best->serial)) {
                best = q;
                *job = j;
            }
        }
    return best;
}

/* Drafts for every speculating choice that decodes this step, in ONE
 * kipp_spec_draft_batch call: a draft model's evals are batched across
 * choices. Drafted once per step: a retry after a preemption reuses the
 * draft (the drafter has advanced over it). Drafts past max_tokens would be
 * waste and could pass the capacity. item_seq / item_job serve as scratch
 * (build_items fills them afterwards). */
static void draft_all(sched *s) {
    size_t n = 0;
    for (sched_job *j = s->active_head; j; j = j->next) {
        if (j->failed) continue;
        for (uint32_t c = 0; c < j->n_choices; c++) {
            seq *q = &j->seqs[c];
            if (q->state != SEQ_RUN || !q->spec || q->n_draft || q->n_toks - q->done != 1)
                continue;
            s->d_sps[n] = q->spec;
            s->d_pending[n] = q->toks[q->n_toks - 1];
            s->d_max[n] = j->max_tokens - q->generated - 1;
            s->d_toks[n] = q->draft;
            s->item_seq[n] = q;
            s->item_job[n] = j;
            n++;
        }
    }
    if (n == 0) return;
    kipp_error err = {0};
    if (kipp_spec_draft_batch(s->d_sps, n, s->d_pending, s->d_max, s->d_toks, s->d_n, &err)) {
        for (size_t i = 0; i < n; i++) fail_job(s->item_job[i], "speculation failed", err.message);
        return;
    }
    for (size_t i = 0; i < n; i++) s->item_seq[i]->n_draft = s->d_n[i];
}

/* One item per running choice: the chunk of toks[done..n_toks) this step
 * evaluates. Returns the number of items. */
static size_t build_items(sched *s) {
    draft_all(s);
    size_t n = 0;
    uint32_t budget = s->cfg.step_prefill_budget;
    for (sched_job *j = s->active_head; j; j = j->next) {
        if (j->failed) continue;
        for (uint32_t c = 0; c < j->n_choices; c++) {
            seq *q = &j->seqs[c];
            if (q->state != SEQ_RUN) continue;
            uint32_t left = q->n_toks - q->done, take = 1;
            float *rows = s->logits + n * (size_t)s->rows_per_item * KIPP_VOCAB_SIZE;
            if (left == 1 && q->spec) { /* drafted by draft_all */
                s->items[n] = (kipp_eval_item){q->session, q->draft, q->n_draft, q->n_draft,
                                               rows};
                s->item_seq[n] = q;
                s->item_job[n] = j;
                n++;
                continue;
            }
            if (left > 1) { /* prefill or recompute: bounded per item and per step */
                if (budget == 0) continue;
                take = left < s->cfg.prefill_chunk ? left : s->cfg.prefill_chunk;
                if (take > budget) take = budget;
                budget -= take;
            }
            s->items[n] = (kipp_eval_item){q->session, q->toks + q->done, take,
                                           take == left ? 1u : 0u, rows};
            s->item_seq[n] = q;
            s->item_job[n] = j;
            n++;
        }
    }
    return n;
}

void sched_step(sched *s) {
    admit_waiting(s);
    kipp_error err = {0};
    size_t n;
    int rc;
    /* The pool may not hold this step's new blocks: preempt the newest
     * running choice and try again without it. */
    for (;;) {
        n = build_items(s);
        if (n == 0) break;
        s->m.eval_calls++;
        s->m.eval_items += n;
        rc = kipp_eval(s->model, s->items, n, &err);
        if (rc != KIPP_E_POOL_EXHAUSTED) break;
        sched_job *vj = NULL;
        seq *victim = newest_running(s, &vj);
        if (!victim || s->running_sequences == 1) { /* it cannot fit even alone */
            fail_job(victim ? vj : s->item_job[0], "KV pool", err.message);
            n = 0;
            break;
        }
        drop_session(s, victim);
        victim->state = SEQ_WAIT;
        s->m.preemptions++;
    }
    if (n > 0 && rc != KIPP_OK) {
        for (size_t i = 0; i < n; i++) fail_job(s->item_job[i], "eval failed", err.message);
    } else {
        for (size_t i = 0; i < n; i++) {
            seq *q = s->item_seq[i];
            sched_job *j = s->item_job[i];
            if (s->items[i].tokens == q->draft) { /* a speculative step */
                if (!j->failed) take_spec(s, j, q, &s->items[i]);
                continue;
            }
            q->done += s->items[i].n_tokens;
            if (s->items[i].n_tokens > 1 || q->generated == 0)
                s->m.prompt_tokens_evaluated += s->items[i].n_tokens;
            if (s->items[i].n_logits && !j->failed) take_token(s, j, q, s->items[i].logits);
        }
    }
    /* Retire finished and failed jobs (after the loop: items point into them). */
    for (sched_job **p = &s->active_head; *p;) {
        sched_job *j = *p;
        if (!j->failed && j->n_done < j->n_choices) {
            p = &j->next;
            continue;
        }
        *p = j->next;
        if (j->failed) {
            s->m.jobs_failed++;
            j->events.job_failed(j->owner, j->failure);
        } else {
            s->m.jobs_completed++;
            s->m.decode_sum += j->t_last - j->t_first;
            uint32_t per_choice = j->completion_tokens / j->n_choices;
            if (per_choice > 1)
                observe(&s->m.tpot, sched_tpot_bounds, SCHED_TPOT_BUCKETS,
                        (j->t_last - j->t_first) / (per_choice - 1));
            sched_job_stats st = {
                .prompt_tokens = (uint32_t)j->n_prompt,
                .completion_tokens = j->completion_tokens,
                .queue_seconds = j->t_admit - j->t_submit,
                .prompt_seconds = j->t_first - j->t_admit,
                .decode_seconds = j->t_last - j->t_first,
            };
            j->events.job_done(j->owner, &st);
        }
        free_job(s, j);
    }
}

void sched_get_metrics(const sched *s, sched_metrics *out) {
    *out = s->m;
    out->queued_jobs = 0;
    for (const sched_job *j = s->queue_head; j; j = j->next) out->queued_jobs++;
    out->active_jobs = 0;
    for (const sched_job *j = s->active_head; j; j = j->next) out->active_jobs++;
    out->active_sequences = s->active_sequences;
    out->running_sequences = s->running_sequences;
    kipp_pool_stats_get(s->model, s->cfg.kv_quant, &out->pool, NULL);
}
