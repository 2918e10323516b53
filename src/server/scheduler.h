/* FIFO scheduler over one model: requests (jobs) of 1..8 choices wait in a
 * queue, are admitted in order while the sequence limit and the model's
 * shared KV pool allow (the unmatched prompt blocks plus one block of
 * headroom per choice must be free), and are then advanced together: each
 * sched_step makes ONE kipp_eval call with one item per running choice - a
 * prefill chunk or the last sampled token - so the weights are read once
 * per step for all sequences.
 *
 * KV pool (DESIGN §6): every choice adopts the longest published prefix of
 * its tokens, and publishes its blocks when its prompt is in, when it
 * finishes and when it is cancelled or preempted, so requests share
 * system prompts, n > 1 choices share their prompt, and a conversation's
 * next turn reuses the previous one. When the pool runs dry mid-step, the
 * most recently admitted running choice is preempted: its session is
 * dropped (blocks published first) and it waits, ahead of every queued
 * job, to recompute its tokens later; batch invariance makes that bitwise
 * harmless. A request whose choice could never fit alone is refused at
 * submission.
 *
 * Knows the engine (include/kipp.h) but nothing of HTTP or JSON: results
 * leave through the sched_events callbacks, in this order per choice:
 * (token? text?)* then choice_done; after the last choice, job_done; or job_failed
 * once instead. After job_done/job_failed the job is freed. Callbacks must
 * not call back into the scheduler. sched_cancel frees a job silently
 * (a client went away); it must not be called from inside a callback. */
#ifndef KIPP_SERVER_SCHEDULER_H
#define KIPP_SERVER_SCHEDULER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kipp.h"

#define SCHED_MAX_CHOICES 8
#define SCHED_MAX_STOPS 4
#define SCHED_MAX_STOP_BYTES 256
#define SCHED_MAX_TOP_LOGPROBS 20

typedef struct sched sched;
typedef struct sched_job sched_job;

typedef struct sched_config {
    uint32_t max_sequences;   /* active choices at once (each one eval item) */
    uint32_t prefill_chunk;   /* prompt tokens per item per step */
    uint32_t step_prefill_budget; /* prompt tokens per step over all items */
    kipp_kv_quant kv_quant;
    /* Speculative decoding for every sequence (mode OFF = none); capacity
     * is set per sequence. Each DECODE item then carries the pending token
     * and its drafts, verified from the same batched eval. Draft-model
     * sessions are outside the KV budget. */
    kipp_spec_options spec;
} sched_config;

typedef struct sched_request {
    const int32_t *prompt; /* copied */
    size_t n_prompt;       /* >= 1 */
    uint32_t n_choices;    /* 1..SCHED_MAX_CHOICES */
    uint32_t max_tokens;   /* >= 1; n_prompt + max_tokens is each session's capacity */
    kipp_sampling sampling; /* logit_bias copied; seed + choice index per choice */
    const char *stops[SCHED_MAX_STOPS]; /* copied; non-empty */
    size_t n_stops;
    int32_t top_logprobs; /* -1 = no log-probs; else 0..SCHED_MAX_TOP_LOGPROBS alternatives */
    /* Constrained decoding (NULL = none): each choice follows its own state
     * of this grammar; the logits row is masked before sampling. The
     * scheduler takes ownership (destroys it with the job, or at once when
     * sched_submit fails). */
    kipp_grammar *grammar;
} sched_request;

/* One sampled token's log-probabilities under the model's raw distribution
 * (log-softmax of the logits, before penalties, bias, temperature and
 * filters), with the n_top most likely alternatives, best first. */
typedef struct sched_token_info {
    int32_t id;
    float logprob;
    uint32_t n_top;
    int32_t top_id[SCHED_MAX_TOP_LOGPROBS];
    float top_logprob[SCHED_MAX_TOP_LOGPROBS];
} sched_token_info;

typedef struct sched_job_stats {
    uint32_t prompt_tokens;     /* per choice (usage.prompt_tokens) */
    uint32_t completion_tokens; /* over all choices */
    double queue_seconds;       /* submit -> admission */
    double prompt_seconds;      /* admission -> first sampled token */
    double decode_seconds;      /* first sampled token -> last */
} sched_job_stats;

typedef struct sched_events {
    /* only for requests with top_logprobs >= 0; before the token's text;
     * not for the checkpoint's stop tokens */
    void (*token)(void *owner, uint32_t choice, const sched_token_info *info);
    void (*text)(void *owner, uint32_t choice, const char *text, size_t length);
    void (*choice_done)(void *owner, uint32_t choice, const char *finish_reason);
    void (*job_done)(void *owner, const sched_job_stats *stats);
    void (*job_failed)(void *owner, const char *message);
} sched_events;

/* Histogram upper bounds (seconds); a last +Inf bucket is implied. */
#define SCHED_TTFT_BUCKETS 10
#define SCHED_TPOT_BUCKETS 9
extern const double sched_ttft_bounds[SCHED_TTFT_BUCKETS];
extern const double sched_tpot_bounds[SCHED_TPOT_BUCKETS];

typedef struct sched_histogram {
    uint64_t bucket[SCHED_TTFT_BUCKETS + 1]; /* per bucket (not cumulative); last = +Inf */
    double sum;
    uint64_t count;
} sched_histogram;

typedef struct sched_metrics {
    uint64_t jobs_submitted, jobs_completed, jobs_cancelled, jobs_failed, jobs_rejected;
    uint64_t prompt_tokens;           /* prompt tokens of admitted requests */
    uint64_t prompt_tokens_evaluated, tokens_generated, eval_calls, eval_items;
    uint64_t prefix_tokens_reused;    /* positions adopted from the pool */
    uint64_t preemptions;
    uint32_t queued_jobs, active_jobs, active_sequences, running_sequences;
    double queue_wait_sum, decode_sum;
    uint64_t queue_wait_count;
    sched_histogram ttft, tpot;       /* time to first token (from submission); per output token */
    kipp_pool_stats pool;
    uint64_t spec_drafted, spec_accepted; /* drafted tokens verified; of which kept */
} sched_metrics;

int sched_create(kipp_model *model, const sched_config *config, sched **out, kipp_error *err);
void sched_destroy(sched *s);
/* Queues a job; fails (KIPP_E_CAPACITY) when it could never be admitted. */
int sched_submit(sched *s, const sched_request *request, const sched_events *events, void *owner,
                 sched_job **out, kipp_error *err);
void sched_cancel(sched *s, sched_job *job);
bool sched_busy(const sched *s);
/* Admits what fits, then runs one batched eval and delivers events. */
void sched_step(sched *s);
void sched_get_metrics(const sched *s, sched_metrics *out);

#endif
