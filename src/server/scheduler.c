/* FIFO scheduler; see scheduler.h for the contract.
 *
 * Choice life cycle (one kipp session each):
 *   PREFILL  prompt chunks are evaluated; the last chunk asks for 1 logits row
 *   DECODE   the token sampled from the previous row is evaluated (1 row)
 *   DONE     session destroyed, KV budget released
 * A step samples from every row it produced, so a choice yields one token
 * per step once its prompt is in. The final sampled token is never
 * evaluated - so greedy output equals `kipp generate --temperature 0`.
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

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef enum seq_state { SEQ_PREFILL, SEQ_DECODE, SEQ_DONE } seq_state;

typedef struct seq {
    seq_state state;
    uint32_t index; /* choice index */
    kipp_session *session;
    kipp_sampler *sampler;
    kipp_detok_stream *detok;
    kipp_grammar_state *grammar; /* NULL = unconstrained */
    uint32_t prompt_done; /* prompt tokens evaluated */
    int32_t pending;      /* sampled, to be evaluated next step */
    kipp_spec *spec;      /* NULL unless the server speculates */
    int32_t toks[1 + KIPP_SPEC_MAX_DRAFT]; /* pending + drafts of this step */
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
    uint32_t active_sequences;
    uint64_t kv_reserved;
    float *logits;          /* [max_sequences][rows_per_item][KIPP_VOCAB_SIZE] */
    uint32_t rows_per_item; /* 1, or 1 + K when speculating */
    float *raw;             /* [KIPP_VOCAB_SIZE]: a row before the sampler edits it */
    kipp_eval_item *items;  /* [max_sequences] */
    seq **item_seq;         /* [max_sequences] */
    sched_job **item_job;
    sched_metrics m;
};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
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
    if (!model || !config || config->max_sequences == 0 || config->kv_budget == 0 ||
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
    if (!s->logits || !s->raw || !s->items || !s->item_seq || !s->item_job) {
        sched_destroy(s);
        return fail(err, KIPP_E_MEMORY, "scheduler: out of memory for logits");
    }
    s->m.kv_budget = config->kv_budget;
    *out = s;
    return KIPP_OK;
}

static void release_seq(sched *s, sched_job *j, seq *q) {
    if (q->session) {
        kipp_session_destroy(q->session);
        q->session = NULL;
        s->kv_reserved -= j->capacity;
        s->active_sequences--;
    }
    kipp_sampler_destroy(q->sampler);
    q->sampler = NULL;
    kipp_spec_destroy(q->spec);
    q->spec = NULL;
    kipp_detok_stream_destroy(q->detok);
    q->detok = NULL;
    kipp_grammar_state_destroy(q->grammar);
    q->grammar = NULL;
}

static void free_job(sched *s, sched_job *j) {
    for (uint32_t c = 0; c < j->n_choices; c++) {
        release_seq(s, j, &j->seqs[c]);
        free(j->seqs[c].text);
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
    if (!r->prompt || r->n_prompt == 0 || r->n_choices == 0 ||
        r->n_choices > SCHED_MAX_CHOICES || r->max_tokens == 0 || r->n_stops > SCHED_MAX_STOPS ||
        r->top_logprobs < -1 || r->top_logprobs > SCHED_MAX_TOP_LOGPROBS)
        return fail(err, KIPP_E_ARGUMENT, "scheduler: bad request");
    uint64_t cap = (uint64_t)r->n_prompt + r->max_tokens;
    if (cap > s->ck->context)
        return fail(err, KIPP_E_CAPACITY, "prompt + max_tokens exceeds the context length");
    if (r->n_choices > s->cfg.max_sequences || cap * r->n_choices > s->cfg.kv_budget)
        return fail(err, KIPP_E_CAPACITY,
                    "the request needs more KV positions (n * (prompt + max_tokens)) or "
                    "sequences than this server's budget; lower n or max_tokens");
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
    j->t_submit = now();
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

/* Creates every choice's session, sampler and decoder, or fails the job. */
static bool admit(sched *s, sched_job *j, kipp_error *err) {
    kipp_session_options so = {.capacity = j->capacity, .kv_quant = s->cfg.kv_quant};
    for (uint32_t c = 0; c < j->n_choices; c++) {
        seq *q = &j->seqs[c];
        q->index = c;
        q->state = SEQ_PREFILL;
        kipp_sampling sp = j->sampling;
        sp.seed += c; /* n > 1: distinct but reproducible choices */
        if (kipp_session_create(s->model, &so, &q->session, err)) return false;
        s->kv_reserved += j->capacity;
        s->active_sequences++;
        if (kipp_sampler_create(&sp, &q->sampler, err) ||
            kipp_detok_stream_create(s->model, &q->detok, err) ||
            (j->grammar && kipp_grammar_state_create(j->grammar, &q->grammar, err)))
            return false;
        /* A constrained choice decodes plainly: drafts are verified against
         * the unmasked distribution, so the grammar would have to mask every
         * verification row. */
        if (s->cfg.spec.mode != KIPP_SPEC_OFF && !q->grammar) {
            kipp_spec_options o = s->cfg.spec;
            o.capacity = j->capacity;
            if (kipp_spec_create(s->model, &o, &sp, &q->spec, err) ||
                kipp_spec_set_context(q->spec, j->prompt, j->n_prompt, err))
                return false;
        }
    }
    return true;
}

static void admit_waiting(sched *s) {
    while (s->queue_head) {
        sched_job *j = s->queue_head;
        if (s->active_sequences + j->n_choices > s->cfg.max_sequences ||
            s->kv_reserved + (uint64_t)j->capacity * j->n_choices > s->cfg.kv_budget)
            return; /* strict FIFO: the head waits, nobody overtakes it */
        s->queue_head = j->next;
        if (!s->queue_head) s->queue_tail = NULL;
        j->next = NULL;
        j->t_admit = now();
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

/* Token id for choice q, already accepted by its sampler; raw is the logits
 * row it came from, unedited. */
static void deliver(sched *s, sched_job *j, seq *q, int32_t id, const float *raw) {
    double t = now();
    if (j->t_first == 0) j->t_first = t;
    j->t_last = t;
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
    if (q->generated >= j->max_tokens ||
        kipp_session_length(q->session) >= kipp_session_capacity(q->session)) {
        finish_seq(s, j, q, "length", true);
        return;
    }
    q->pending = id;
    q->state = SEQ_DECODE;
}

static void fail_banned(sched_job *j) {
    j->failed = true;
    snprintf(j->failure, sizeof j->failure, "every token is banned (logit_bias); nothing to "
             "sample");
}

/* One sampled token for choice q from its logits row. Log-probs are those
 * of the raw distribution (copied before the grammar mask and the sampler
 * edit the row). */
static void take_token(sched *s, sched_job *j, seq *q, float *row) {
    if (j->top_logprobs >= 0)
        memcpy(s->raw, row, KIPP_VOCAB_SIZE * sizeof(float)); /* the sampler edits row */
    if (q->grammar) kipp_grammar_mask(q->grammar, row);
    int32_t id = kipp_sampler_sample(q->sampler, row);
    if (id < 0) {
        j->failed = true;
        snprintf(j->failure, sizeof j->failure, "every token is banned (logit_bias%s); nothing "
                 "to sample", q->grammar ? " and the output format" : "");
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
 * target agrees with (rolling the session back over the rest) and yields
 * 1..n tokens, delivered in order until the choice finishes. Row i is the
 * raw distribution of output i, so log-probs are those of plain decoding. */
static void take_spec(sched *s, sched_job *j, seq *q, const kipp_eval_item *it) {
    int32_t out[1 + KIPP_SPEC_MAX_DRAFT];
    uint32_t n_out = 0;
    kipp_error err = {0};
    if (kipp_spec_verify(q->spec, q->sampler, q->session, it->logits, out, &n_out, &err)) {
        if (strstr(err.message, "banned")) {
            fail_banned(j);
        } else {
            j->failed = true;
            snprintf(j->failure, sizeof j->failure, "speculation failed: %s", err.message);
        }
        return;
    }
    s->m.spec_drafted += it->n_tokens - 1;
    s->m.spec_accepted += n_out - 1;
    for (uint32_t i = 0; i < n_out && q->state != SEQ_DONE && !j->failed; i++)
        deliver(s, j, q, out[i], it->logits + (size_t)i * KIPP_VOCAB_SIZE);
}

void sched_step(sched *s) {
    admit_waiting(s);
    size_t n = 0;
    uint32_t budget = s->cfg.step_prefill_budget;
    for (sched_job *j = s->active_head; j; j = j->next) {
        for (uint32_t c = 0; c < j->n_choices; c++) {
            seq *q = &j->seqs[c];
            kipp_eval_item *it = &s->items[n];
            float *row = s->logits + n * (size_t)s->rows_per_item * KIPP_VOCAB_SIZE;
            if (q->state == SEQ_DECODE && q->spec) {
                /* Drafts past max_tokens would be waste and could pass the
                 * session's capacity (prompt + max_tokens). */
                uint32_t k = 0, max = j->max_tokens - q->generated - 1;
                kipp_error err = {0};
                if (kipp_spec_draft(q->spec, q->pending, max, q->toks, &k, &err)) {
                    j->failed = true;
                    snprintf(j->failure, sizeof j->failure, "speculation failed: %s",
                             err.message);
                    continue;
                }
                *it = (kipp_eval_item){q->session, q->toks, k, k, row};
            } else if (q->state == SEQ_DECODE) {
                *it = (kipp_eval_item){q->session, &q->pending, 1, 1, row};
            } else if (q->state == SEQ_PREFILL && budget > 0) {
                uint32_t left = (uint32_t)(j->n_prompt - q->prompt_done);
                uint32_t take = left < s->cfg.prefill_chunk ? left : s->cfg.prefill_chunk;
                if (take > budget) take = budget;
                budget -= take;
                *it = (kipp_eval_item){q->session, j->prompt + q->prompt_done, take,
                                       take == left ? 1u : 0u, row};
            } else {
                continue;
            }
            s->item_seq[n] = q;
            s->item_job[n] = j;
            n++;
        }
    }
    if (n == 0) return;
    kipp_error err = {0};
    s->m.eval_calls++;
    s->m.eval_items += n;
    if (kipp_eval(s->model, s->items, n, &err) != KIPP_OK) {
        for (size_t i = 0; i < n; i++) {
            s->item_job[i]->failed = true;
            snprintf(s->item_job[i]->failure, sizeof s->item_job[i]->failure, "eval failed: %s",
                     err.message);
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            seq *q = s->item_seq[i];
            sched_job *j = s->item_job[i];
            if (q->state == SEQ_PREFILL) {
                q->prompt_done += s->items[i].n_tokens;
                s->m.prompt_tokens_evaluated += s->items[i].n_tokens;
            }
            if (!s->items[i].n_logits || j->failed) continue;
            if (q->state == SEQ_DECODE && q->spec) take_spec(s, j, q, &s->items[i]);
            else take_token(s, j, q, s->items[i].logits);
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
    out->active_sequences = s->active_sequences;
    out->kv_reserved = s->kv_reserved;
}
