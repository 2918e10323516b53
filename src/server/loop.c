/* The event loop: one thread, poll() over the listening socket, the parse
 * worker's pipe and every connection. Each turn: accept, read and parse
 * what arrived, hand complete requests to the API layer and the scheduler,
 * run ONE scheduler step if any work is pending (poll then does not block),
 * flush output, and enforce deadlines.
 *
 * Connection states:
 *   READING  waiting for (the rest of) a request
 *   PARSING  the parse worker turns its body into tokens (large bodies only)
 *   WAITING  a job runs for it; output (SSE chunks) may flow meanwhile
 *   CLOSING  flush what is buffered, then linger
 *   LINGER   our side is shut down; read and discard what the client still
 *            sends (bounded) so that it sees our last response rather than
 *            a reset, then close
 *
 * No client can take the server away from the others:
 *   - deadlines per connection: the head within header_timeout of its first
 *     byte (or of connect), the body within body_timeout of the head, queued
 *     output must progress within send_timeout (a client that stops reading
 *     loses its slot even after its job is done), idle keep-alive within
 *     idle_timeout; 408 for a late request, a silent close otherwise;
 *   - when the MAX_CONNECTIONS request slots are full, the connection idle
 *     longest is evicted for the newcomer; if none is idle, the newcomer gets
 *     one of RESERVE_CONNECTIONS control slots, which serve only health and
 *     metrics (others: 503) under a short head deadline; beyond that, 503 at
 *     accept. Every such 503 counts in kipp_http_rejected_total;
 *   - work per turn is bounded: pipelined requests are served per
 *     connection for at most TURN_BUDGET_S (or MAX_REQUESTS_PER_TURN), none
 *     while its unsent output exceeds OUT_HIGH_WATER, and bodies over
 *     INLINE_PARSE_BYTES are parsed and tokenized by the parse worker
 *     thread, not here;
 *   - a client more than MAX_PENDING_OUT bytes behind is dropped.
 * A dropped client's job is cancelled and frees its sessions; other jobs
 * never notice. A client that half-closes (shutdown(SHUT_WR)) after its
 * request still gets its responses; the cost is that a non-streamed job of a
 * client that vanished entirely runs to its end (a stream notices at its
 * next chunk).
 *
 * Loading: the listener opens before the model is loaded, so that a router
 * or an orchestrator sees a live process that is not ready yet rather than
 * a refused connection. cfg->load runs on a loader thread, which wakes the
 * loop through a pipe when it returns; until then the loop answers
 * /healthz (liveness) 200, /health (readiness) 503 + Retry-After, /metrics
 * (kipp_model_loaded 0, every other series at zero) and each /v1 endpoint
 * 503 "the model is loading". The scheduler and the parse worker exist
 * only after the load: nothing that needs the model can run before. A
 * failed load ends the loop with an error; a signal during the load ends it
 * at once (nothing is in flight), after the loader thread is joined.
 *
 * Drain (SIGTERM/SIGINT): the listener closes, idle connections close, and
 * requests in flight (running, queued or parsing) may finish within
 * shutdown_timeout; then each is cancelled with a final event - a stream
 * gets an error event and `data: [DONE]`, a non-streamed request a 503 -
 * and the loop ends once that is flushed (at most SHUTDOWN_GRACE_S more).
 * A second signal stops at once. */
#include "server/loop.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/json.h"
#include "server/api_openai.h"
#include "server/http.h"
#include "server/parse_worker.h"
#include "server/scheduler.h"
#include "core/common.h"

#define MAX_CONNECTIONS 64           /* request slots */
#define RESERVE_CONNECTIONS 8        /* health/metrics slots, used when the others are full */
#define MAX_HEAD_BYTES (16 * 1024)
#define MAX_PENDING_OUT (8u << 20)   /* a client this far behind is cancelled */
#define OUT_HIGH_WATER (256u << 10)  /* no new pipelined request while this much is unsent */
#define MAX_REQUESTS_PER_TURN 512    /* pipelined requests served per connection per turn... */
#define TURN_BUDGET_S 0.002          /* ...or for this long, whichever ends first */
#define INLINE_PARSE_BYTES (4 * 1024) /* larger bodies go to the parse worker (~1 ms and up) */
#define RESERVE_HEAD_TIMEOUT_S 2.0   /* a control slot is for a quick GET */
#define LINGER_S 2.0                 /* read-and-discard after our last response */
#define LINGER_BYTES (4u << 20)
#define SHUTDOWN_GRACE_S 1.0         /* after the drain deadline: flush the final events */
#define IDLE_POLL_MS 100             /* deadline granularity when nothing else wakes us */

typedef enum conn_state { C_READING, C_PARSING, C_WAITING, C_CLOSING, C_LINGER } conn_state;

typedef enum endpoint { EP_HEALTH, EP_METRICS, EP_MODELS, EP_COMPLETIONS, EP_CHAT, EP_OTHER, EP_N }
    endpoint;
static const char *const ENDPOINT_NAMES[EP_N] = {"/healthz", "/metrics", "/v1/models",
                                                 "/v1/completions", "/v1/chat/completions",
                                                 "other"};

typedef enum timeout_kind { T_HEAD, T_BODY, T_SEND, T_IDLE, T_N } timeout_kind;
static const char *const TIMEOUT_NAMES[T_N] = {"head", "body", "send", "idle"};

typedef struct server server;

typedef struct conn {
    bool used;
    bool reserve; /* a control slot: health and metrics only */
    int fd;
    server *srv;
    conn_state state;
    char *in;
    size_t in_len, in_cap;
    size_t parsed_len; /* in_len when the parser last said INCOMPLETE: nothing new to parse */
    json_buf out;
    size_t out_off;
    bool keep_alive, sent_continue, peer_eof;
    uint32_t served; /* requests routed on this connection */
    double last_activity, request_started, body_started;
    double send_since;   /* output has waited for the client since (0: none waiting) */
    double linger_until; /* C_LINGER: close by then */
    size_t lingered;     /* C_LINGER: bytes discarded */
    uint64_t parse_tag;  /* C_PARSING: the parse job's tag */
    api_kind parse_kind;
    /* the running job */
    sched_job *job;
    api_response_ctx ctx;
    bool stream, include_usage;
    uint32_t n_choices;
    json_buf texts[SCHED_MAX_CHOICES];
    size_t text_sent[SCHED_MAX_CHOICES]; /* bytes of text delivered (streamed or kept) */
    const char *finish[SCHED_MAX_CHOICES];
    /* log-probs (top_logprobs >= 0): entries per choice, with the byte
     * offset at which each token's text starts; [lp_sent, lp_n) still waits
     * for the text it belongs to */
    bool logprobs;
    sched_token_info *lp[SCHED_MAX_CHOICES];
    size_t *lp_start[SCHED_MAX_CHOICES];
    size_t lp_n[SCHED_MAX_CHOICES], lp_cap[SCHED_MAX_CHOICES], lp_sent[SCHED_MAX_CHOICES];
    size_t lp_bytes[SCHED_MAX_CHOICES]; /* where the next token's text starts */
    size_t lp_offset[SCHED_MAX_CHOICES];
} conn;

#define N_SLOTS (MAX_CONNECTIONS + RESERVE_CONNECTIONS)

struct server {
    const server_config *cfg;
    kipp_model *model;    /* NULL until loaded */
    sched *sched;         /* NULL until loaded */
    parse_worker *worker; /* NULL until loaded */
    /* The loader thread: load_rc and load_out are written by it and read
     * here only after pthread_join (which orders them); load_pipe wakes the
     * loop when it is done. */
    bool loaded, loader_running;
    pthread_t loader;
    int load_pipe[2];
    int load_rc;
    server_model load_out;
    double load_started;
    api_limits limits;
    http_limits http;
    int listen_fd;
    conn conns[N_SLOTS]; /* [MAX_CONNECTIONS, N_SLOTS) are the reserve */
    unsigned long long serial;
    uint64_t parse_serial;
    double started;
    bool more_work; /* a connection has parseable input left over this turn */
    bool draining, drain_cancelled;
    uint64_t requests[EP_N];
    uint64_t status_class[6]; /* [2]=2xx ... [5]=5xx */
    uint64_t disconnects;
    uint64_t rejected;  /* 503s for lack of a slot (at accept or in a control slot) */
    uint64_t evictions; /* idle connections closed to make room */
    uint64_t timeouts[T_N];
};

/* ---- output ---------------------------------------------------------------- */

static void out_raw(conn *c, const char *s, size_t n) { kipp_json_buf_append(&c->out, s, n); }

static void respond(conn *c, int status, const char *type, const char *body, size_t n,
                    const char *extra) {
    char head[512];
    size_t h = http_format_head(head, sizeof head, status, type, (long long)n, c->keep_alive,
                                extra);
    out_raw(c, head, h);
    out_raw(c, body, n);
    if (status / 100 < 6) c->srv->status_class[status / 100]++;
    if (!c->keep_alive) c->state = C_CLOSING;
}

static void respond_json(conn *c, int status, json_buf *b) {
    if (b->failed) {
        respond(c, 500, "application/json", "{\"error\":{\"message\":\"out of memory\"}}", 37,
                NULL);
        return;
    }
    respond(c, status, "application/json", b->data ? b->data : "", b->length, NULL);
}

static void respond_error_with(conn *c, int status, const char *param, const char *message,
                              const char *extra) {
    api_error e = {.status = status, .type = status >= 500 ? "server_error" : "invalid_request_error"};
    snprintf(e.param, sizeof e.param, "%s", param ? param : "");
    snprintf(e.message, sizeof e.message, "%s", message);
    json_buf b = {0};
    api_format_error(&b, &e);
    if (b.failed) respond_json(c, status, &b);
    else respond(c, status, "application/json", b.data, b.length, extra);
    kipp_json_buf_free(&b);
}

static void respond_error(conn *c, int status, const char *param, const char *message) {
    respond_error_with(c, status, param, message, NULL);
}

static void sse_send(conn *c, json_buf *payload) {
    out_raw(c, "data: ", 6);
    out_raw(c, payload->data ? payload->data : "", payload->length);
    out_raw(c, "\n\n", 2);
    payload->length = 0;
}

/* ---- scheduler events (owner = conn) --------------------------------------- */

static void ev_token(void *owner, uint32_t choice, const sched_token_info *info) {
    conn *c = owner;
    if (c->lp_n[choice] == c->lp_cap[choice]) {
        size_t cap = c->lp_cap[choice] ? c->lp_cap[choice] * 2 : 16;
        sched_token_info *p = realloc(c->lp[choice], cap * sizeof *p);
        if (p) c->lp[choice] = p;
        size_t *q = p ? realloc(c->lp_start[choice], cap * sizeof *q) : NULL;
        if (q) c->lp_start[choice] = q;
        if (!p || !q) return; /* out of memory: the entry is lost, the text is not */
        c->lp_cap[choice] = cap;
    }
    /* The token's bytes place it in the text (ids without bytes add none). */
    char *t = NULL;
    size_t n = 0;
    kipp_error err;
    if (kipp_detokenize(c->ctx.model, &info->id, 1, &t, &n, &err) != KIPP_OK) n = 0;
    free(t);
    c->lp_start[choice][c->lp_n[choice]] = c->lp_bytes[choice];
    c->lp_bytes[choice] += n;
    c->lp[choice][c->lp_n[choice]++] = *info;
}

/* The log-prob entries not yet sent whose tokens start inside the first
 * text_end bytes of the choice's text (NULL when log-probs are off). A token
 * whose text lies wholly past the returned text - cut by a stop string, or
 * held back while a stop string may still match - is not reported. */
static const api_logprobs *pending_lp(conn *c, uint32_t choice, size_t text_end,
                                      api_logprobs *lp) {
    if (!c->logprobs) return NULL;
    static const sched_token_info none;
    size_t from = c->lp_sent[choice], to = from;
    while (to < c->lp_n[choice] && c->lp_start[choice][to] < text_end) to++;
    *lp = (api_logprobs){c->lp[choice] ? c->lp[choice] + from : &none, to - from,
                         &c->lp_offset[choice]};
    c->lp_sent[choice] = to;
    return lp;
}

static void ev_text(void *owner, uint32_t choice, const char *text, size_t n) {
    conn *c = owner;
    c->text_sent[choice] += n;
    if (!c->stream) {
        kipp_json_buf_append(&c->texts[choice], text, n);
        return;
    }
    json_buf b = {0};
    api_logprobs lp;
    size_t sent = c->lp_sent[choice];
    api_format_chunk_text(&b, &c->ctx, choice, text, n,
                          pending_lp(c, choice, c->text_sent[choice], &lp));
    if (b.length) sse_send(c, &b);
    else c->lp_sent[choice] = sent; /* the splitter held the text back: so do its log-probs */
    kipp_json_buf_free(&b);
}

static void ev_choice_done(void *owner, uint32_t choice, const char *reason) {
    conn *c = owner;
    c->finish[choice] = reason;
    if (!c->stream) return;
    json_buf b = {0};
    api_logprobs lp;
    api_format_chunk_finish(&b, &c->ctx, choice, reason,
                            pending_lp(c, choice, c->text_sent[choice], &lp));
    sse_send(c, &b);
    kipp_json_buf_free(&b);
}

static void free_job_buffers(conn *c) {
    for (uint32_t i = 0; i < SCHED_MAX_CHOICES; i++) {
        kipp_json_buf_free(&c->texts[i]);
        free(c->lp[i]);
        free(c->lp_start[i]);
    }
    memset(c->texts, 0, sizeof c->texts);
    memset(c->text_sent, 0, sizeof c->text_sent);
    memset(c->lp, 0, sizeof c->lp);
    memset(c->lp_start, 0, sizeof c->lp_start);
    memset(c->lp_bytes, 0, sizeof c->lp_bytes);
    memset(c->lp_n, 0, sizeof c->lp_n);
    memset(c->lp_cap, 0, sizeof c->lp_cap);
    memset(c->lp_sent, 0, sizeof c->lp_sent);
    memset(c->lp_offset, 0, sizeof c->lp_offset);
}

static void end_job(conn *c) {
    c->job = NULL;
    api_response_ctx_free(&c->ctx);
    free_job_buffers(c);
    if (c->state == C_WAITING) c->state = c->keep_alive ? C_READING : C_CLOSING;
    c->last_activity = kipp_now_seconds();
}

static void ev_job_done(void *owner, const sched_job_stats *st) {
    conn *c = owner;
    json_buf b = {0};
    if (c->stream) {
        if (c->include_usage) {
            api_format_chunk_usage(&b, &c->ctx, st);
            sse_send(c, &b);
        }
        out_raw(c, "data: [DONE]\n\n", 14);
        c->state = C_CLOSING; /* the stream had no Content-Length */
    } else {
        char *texts[SCHED_MAX_CHOICES];
        size_t lens[SCHED_MAX_CHOICES];
        api_logprobs lp[SCHED_MAX_CHOICES];
        for (uint32_t i = 0; i < c->n_choices; i++) {
            texts[i] = c->texts[i].data;
            lens[i] = c->texts[i].length;
            pending_lp(c, i, lens[i], &lp[i]);
        }
        api_format_response(&b, &c->ctx, texts, lens, c->finish, c->logprobs ? lp : NULL,
                            c->n_choices, st);
        respond_json(c, 200, &b);
    }
    kipp_json_buf_free(&b);
    end_job(c);
}

/* Ends the job's response with an error: a stream gets an error event and
 * `data: [DONE]` (the head said 200 long ago), a non-streamed request the
 * status itself. */
static void end_with_error(conn *c, int status, const char *message) {
    if (c->stream) {
        api_error e = {.status = status, .type = "server_error"};
        snprintf(e.message, sizeof e.message, "%s", message);
        json_buf b = {0};
        api_format_error(&b, &e);
        sse_send(c, &b);
        kipp_json_buf_free(&b);
        out_raw(c, "data: [DONE]\n\n", 14);
        c->state = C_CLOSING;
    } else {
        respond_error_with(c, status, NULL, message, status == 503 ? "Retry-After: 1\r\n" : NULL);
    }
    end_job(c);
}

static void ev_job_failed(void *owner, const char *message) { end_with_error(owner, 500, message); }

static const sched_events EVENTS = {ev_token, ev_text, ev_choice_done, ev_job_done,
                                    ev_job_failed};

/* ---- endpoints ---------------------------------------------------------------- */

/* Connection-level counters (this file's own; the scheduler's are below). */
static void put_http_metrics(json_buf *b, const server *s) {
    uint32_t open = 0;
    for (int i = 0; i < N_SLOTS; i++) open += s->conns[i].used;
    kipp_json_buf_appendf(b, "# HELP kipp_http_rejected_total Connections or requests refused "
                          "with 503 for lack of a connection slot.\n"
                          "# TYPE kipp_http_rejected_total counter\n"
                          "kipp_http_rejected_total %llu\n", (unsigned long long)s->rejected);
    kipp_json_buf_appendf(b, "# HELP kipp_http_evictions_total Idle connections closed to make "
                          "room for a new one.\n# TYPE kipp_http_evictions_total counter\n"
                          "kipp_http_evictions_total %llu\n", (unsigned long long)s->evictions);
    kipp_json_buf_appendf(b, "# HELP kipp_http_timeouts_total Connections closed by a deadline.\n"
                          "# TYPE kipp_http_timeouts_total counter\n");
    for (int k = 0; k < T_N; k++)
        kipp_json_buf_appendf(b, "kipp_http_timeouts_total{phase=\"%s\"} %llu\n",
                              TIMEOUT_NAMES[k], (unsigned long long)s->timeouts[k]);
    kipp_json_buf_appendf(b, "# HELP kipp_http_connections Open connections.\n"
                          "# TYPE kipp_http_connections gauge\nkipp_http_connections %u\n", open);
}

static void append_histogram(json_buf *b, const char *name, const char *help,
                             const sched_histogram *h, const double *bounds, int n) {
    kipp_json_buf_appendf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    unsigned long long cum = 0;
    for (int i = 0; i < n; i++) {
        cum += h->bucket[i];
        kipp_json_buf_appendf(b, "%s_bucket{le=\"%g\"} %llu\n", name, bounds[i], cum);
    }
    cum += h->bucket[n];
    kipp_json_buf_appendf(b, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name,
                          cum, name, h->sum, name, (unsigned long long)h->count);
}

static void handle_metrics(conn *c) {
    server *s = c->srv;
    sched_metrics m;
    if (s->sched) sched_get_metrics(s->sched, &m);
    else memset(&m, 0, sizeof m); /* still loading: nothing happened yet */
    json_buf b = {0};
    kipp_json_buf_appendf(&b, "# HELP kipp_http_requests_total HTTP requests by endpoint.\n"
                         "# TYPE kipp_http_requests_total counter\n");
    for (int e = 0; e < EP_N; e++)
        kipp_json_buf_appendf(&b, "kipp_http_requests_total{endpoint=\"%s\"} %llu\n",
                         ENDPOINT_NAMES[e], (unsigned long long)s->requests[e]);
    kipp_json_buf_appendf(&b, "# HELP kipp_http_responses_total HTTP responses by status class.\n"
                         "# TYPE kipp_http_responses_total counter\n");
    for (int k = 2; k <= 5; k++)
        kipp_json_buf_appendf(&b, "kipp_http_responses_total{class=\"%dxx\"} %llu\n", k,
                         (unsigned long long)s->status_class[k]);
    const kipp_pool_stats *ps = &m.pool;
    struct { const char *name, *type, *help; unsigned long long v; } rows[] = {
        {"kipp_model_loaded", "gauge",
         "1 once the model is loaded and requests are served; 0 while it loads.", s->loaded},
        /* Request-level names of DESIGN §8 / issue 10 (what a router reads). */
        {"kipp_requests_total", "counter", "Completion requests accepted by the scheduler.",
         m.jobs_submitted},
        {"kipp_requests_failed_total", "counter",
         "Requests refused at submission (never fit) or failed in the engine.",
         m.jobs_failed + m.jobs_rejected},
        {"kipp_prompt_tokens_total", "counter", "Prompt tokens of admitted requests.",
         m.prompt_tokens},
        {"kipp_prompt_tokens_evaluated_total", "counter",
         "Prompt (and recomputed) tokens evaluated, i.e. not adopted from the KV pool.",
         m.prompt_tokens_evaluated},
        {"kipp_generation_tokens_total", "counter", "Tokens sampled.", m.tokens_generated},
        {"kipp_requests_running", "gauge", "Admitted requests not yet finished.", m.active_jobs},
        {"kipp_batch_choices_running", "gauge",
         "Choices with a session (one eval item each per step).", m.running_sequences},
        {"kipp_requests_waiting", "gauge", "Requests queued for admission.", m.queued_jobs},
        /* A constant; typed counter because Prometheus naming reserves the
         * _total suffix for counters (promtool rejects a gauge with it). */
        {"kipp_kv_pool_blocks_total", "counter", "Blocks of 32 positions in the KV pool (fixed).",
         ps->blocks_total},
        {"kipp_kv_pool_blocks_free", "gauge",
         "KV pool blocks held by no session (includes cached reusable ones).", ps->blocks_free},
        {"kipp_kv_pool_blocks_cached", "gauge",
         "Published KV pool blocks held by no session: reusable until evicted.",
         ps->blocks_cached},
        {"kipp_kv_pool_reused_blocks_total", "counter", "KV pool blocks adopted instead of computed.",
         ps->reused_blocks},
        {"kipp_kv_pool_evicted_blocks_total", "counter",
         "Published KV pool blocks evicted (least recently used) to make room.",
         ps->evicted_blocks},
        {"kipp_prefix_tokens_reused_total", "counter",
         "Positions adopted from published prefixes by the scheduler.", m.prefix_tokens_reused},
        {"kipp_preemptions_total", "counter",
         "Choices preempted because the KV pool ran dry (recomputed later).", m.preemptions},
        /* Older names, kept for existing dashboards and tests. */
        {"kipp_jobs_submitted_total", "counter", "Completion jobs queued.", m.jobs_submitted},
        {"kipp_jobs_completed_total", "counter", "Completion jobs finished.", m.jobs_completed},
        {"kipp_jobs_cancelled_total", "counter", "Jobs cancelled (client gone or too slow).",
         m.jobs_cancelled},
        {"kipp_jobs_failed_total", "counter", "Jobs that failed in the engine.", m.jobs_failed},
        {"kipp_generated_tokens_total", "counter", "Tokens sampled.", m.tokens_generated},
        {"kipp_eval_calls_total", "counter", "Batched eval calls (one per scheduler step).",
         m.eval_calls},
        {"kipp_eval_items_total", "counter", "Eval items over all calls.", m.eval_items},
        {"kipp_spec_drafted_tokens_total", "counter", "Drafted tokens verified (speculation).",
         m.spec_drafted},
        {"kipp_spec_accepted_tokens_total", "counter", "Drafted tokens the target kept.",
         m.spec_accepted},
        {"kipp_queued_jobs", "gauge", "Jobs waiting for admission.", m.queued_jobs},
        {"kipp_active_sessions", "gauge", "Admitted choices not yet finished.",
         m.active_sequences},
        {"kipp_kv_positions_reserved", "gauge", "KV positions held by sessions (whole blocks).",
         (unsigned long long)ps->blocks_held * ps->block_positions},
        {"kipp_kv_positions_budget", "gauge", "KV positions in the pool.",
         (unsigned long long)ps->blocks_total * ps->block_positions},
        {"kipp_client_disconnects_total", "counter", "Connections dropped while a job ran.",
         s->disconnects},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        kipp_json_buf_appendf(&b, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", rows[i].name, rows[i].help,
                         rows[i].name, rows[i].type, rows[i].name, rows[i].v);
    double usage = ps->blocks_total ? (double)ps->blocks_held / ps->blocks_total : 0;
    kipp_json_buf_appendf(&b, "# HELP kipp_kv_pool_usage_ratio KV pool blocks held by sessions, 0-1.\n"
                          "# TYPE kipp_kv_pool_usage_ratio gauge\nkipp_kv_pool_usage_ratio %.6f\n",
                          usage);
    struct { const char *name, *help; double sum; unsigned long long count; } sums[] = {
        {"kipp_queue_wait_seconds", "Seconds from submission to admission.", m.queue_wait_sum,
         m.queue_wait_count},
        {"kipp_ttft_seconds", "Seconds from submission to the first sampled token.", m.ttft.sum,
         m.ttft.count},
    };
    for (size_t i = 0; i < 2; i++)
        kipp_json_buf_appendf(&b, "# HELP %s %s\n# TYPE %s summary\n%s_sum %.6f\n%s_count %llu\n",
                              sums[i].name, sums[i].help, sums[i].name, sums[i].name, sums[i].sum,
                              sums[i].name, sums[i].count);
    kipp_json_buf_appendf(&b, "# HELP kipp_decode_seconds Seconds from first to last token of "
                          "finished requests.\n# TYPE kipp_decode_seconds summary\n"
                          "kipp_decode_seconds_sum %.6f\nkipp_decode_seconds_count %llu\n",
                          m.decode_sum, (unsigned long long)m.jobs_completed);
    append_histogram(&b, "kipp_time_to_first_token_seconds",
                     "Time to first token (from submission), seconds.", &m.ttft,
                     sched_ttft_bounds, SCHED_TTFT_BUCKETS);
    append_histogram(&b, "kipp_time_per_output_token_seconds",
                     "Mean seconds per output token after the first, per request.", &m.tpot,
                     sched_tpot_bounds, SCHED_TPOT_BUCKETS);
    put_http_metrics(&b, s);
    respond(c, 200, "text/plain; version=0.0.4", b.data, b.length, NULL);
    kipp_json_buf_free(&b);
}

/* A parsed request (rc == 0) goes to the scheduler; else its error goes
 * back. Runs on the loop, whether the parse ran here or in the worker. */
static void submit_parsed(conn *c, api_kind kind, int rc, api_request *r, const api_error *e) {
    server *s = c->srv;
    c->state = C_READING;
    if (rc) {
        json_buf b = {0};
        api_format_error(&b, e);
        respond_json(c, e->status ? e->status : 400, &b);
        kipp_json_buf_free(&b);
        return;
    }
    sched_request sr = {.prompt = r->prompt, .n_prompt = r->n_prompt, .n_choices = r->n,
                        .max_tokens = r->max_tokens, .sampling = r->sampling,
                        .n_stops = r->n_stops, .top_logprobs = r->top_logprobs,
                        .grammar = r->grammar};
    r->grammar = NULL; /* the scheduler owns it now */
    for (size_t i = 0; i < r->n_stops; i++) sr.stops[i] = r->stops[i];
    kipp_error kerr = {0};
    c->stream = r->stream;
    c->include_usage = r->include_usage;
    c->logprobs = r->top_logprobs >= 0;
    c->n_choices = r->n;
    for (uint32_t i = 0; i < SCHED_MAX_CHOICES; i++) c->finish[i] = "stop";
    api_response_ctx_init(&c->ctx, kind, s->model, ++s->serial);
    api_response_ctx_configure(&c->ctx, r);
    int src = sched_submit(s->sched, &sr, &EVENTS, c, &c->job, &kerr);
    if (src) {
        api_response_ctx_free(&c->ctx);
        respond_error(c, src == KIPP_E_MEMORY ? 500 : 400, NULL, kerr.message);
        return;
    }
    c->state = C_WAITING;
    if (c->stream) {
        char head[512];
        size_t h = http_format_head(head, sizeof head, 200, "text/event-stream", -1, false,
                                    "Cache-Control: no-cache\r\n");
        out_raw(c, head, h);
        s->status_class[2]++;
        if (kind == API_CHAT) {
            json_buf b = {0};
            for (uint32_t i = 0; i < c->n_choices; i++) {
                api_format_chunk_start(&b, &c->ctx, i);
                sse_send(c, &b);
            }
            kipp_json_buf_free(&b);
        }
    }
}

/* Small bodies are parsed here (microseconds); large ones - tokenizing a
 * 1 MiB prompt takes seconds - by the parse worker, while the loop keeps
 * every stream moving. The connection waits in C_PARSING meanwhile. */
static void handle_completion(conn *c, api_kind kind, const http_request *req) {
    server *s = c->srv;
    if (req->body_length > INLINE_PARSE_BYTES && s->worker) {
        parse_job *j = calloc(1, sizeof *j);
        char *body = j ? malloc(req->body_length) : NULL;
        if (!body) {
            free(j);
            respond_error(c, 500, NULL, "out of memory");
            return;
        }
        memcpy(body, req->body, req->body_length);
        *j = (parse_job){.tag = ++s->parse_serial, .kind = kind, .body = body,
                         .length = req->body_length};
        c->parse_tag = j->tag;
        c->parse_kind = kind;
        c->state = C_PARSING;
        parse_worker_submit(s->worker, j);
        return;
    }
    api_request r;
    api_error e;
    int rc = api_parse_request(s->model, kind, &s->limits, req->body, req->body_length, &r, &e);
    submit_parsed(c, kind, rc, &r, &e);
    api_request_free(&r);
}

/* Finished parse jobs back to their connections (a stale tag: the
 * connection closed meanwhile, the result is dropped). */
static void collect_parsed(server *s) {
    parse_job *j;
    while ((j = parse_worker_take(s->worker))) {
        for (int i = 0; i < N_SLOTS; i++) {
            conn *c = &s->conns[i];
            if (c->used && c->state == C_PARSING && c->parse_tag == j->tag) {
                c->parse_tag = 0;
                submit_parsed(c, j->kind, j->rc, &j->request, &j->error);
                break;
            }
        }
        parse_job_free(j);
    }
}

/* Decodes %XX in a path segment into out (NUL-terminated); false when it
 * does not fit or an escape is malformed. */
static bool percent_decode(const char *p, size_t n, char *out, size_t cap) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = p[i];
        if (ch == '%') {
            if (i + 2 >= n) return false;
            char hex[3] = {p[i + 1], p[i + 2], 0};
            char *end;
            long v = strtol(hex, &end, 16);
            if (*end || v <= 0) return false;
            ch = (char)v;
            i += 2;
        }
        if (o + 1 >= cap) return false;
        out[o++] = ch;
    }
    out[o] = 0;
    return true;
}

/* GET /v1/models/{id}: the model object, or 404 for any other id. */
static void handle_model(conn *c, const http_request *req) {
    static const char prefix[] = "/v1/models/";
    size_t n = 0;
    while (n < req->target_length && req->target[n] != '?') n++;
    const char *id = req->target + sizeof prefix - 1;
    size_t id_len = n - (sizeof prefix - 1);
    char want[256];
    const char *served = kipp_model_checkpoint(c->srv->model)->id;
    if (!percent_decode(id, id_len, want, sizeof want) || strcmp(want, served)) {
        api_error e = {.status = 404, .type = "invalid_request_error"};
        snprintf(e.param, sizeof e.param, "model");
        snprintf(e.message, sizeof e.message, "The model '%.*s' does not exist (this server "
                 "serves '%s')", (int)(id_len < 200 ? id_len : 200), id, served);
        json_buf b = {0};
        api_format_error(&b, &e);
        respond_json(c, 404, &b);
        kipp_json_buf_free(&b);
        return;
    }
    json_buf b = {0};
    api_format_model(&b, c->srv->model, (long long)time(NULL));
    respond_json(c, 200, &b);
    kipp_json_buf_free(&b);
}

static bool path_has_prefix(const http_request *req, const char *prefix) {
    size_t n = strlen(prefix);
    return req->target_length > n && !memcmp(req->target, prefix, n);
}

/* Control endpoints answer from a reserve slot (so that a full server can
 * still be probed); /health is the model-loaded probe. */
static bool is_control(const http_request *req) {
    return http_path_is(req, "/healthz") || http_path_is(req, "/health") ||
           http_path_is(req, "/metrics");
}

/* Every /v1 endpoint before the model is loaded (a probe can tell this
 * from an overloaded server by /health, and retry). */
static void respond_loading(conn *c) {
    respond_error_with(c, 503, NULL, "the model is loading; retry shortly (GET /health is 200 "
                       "once it is loaded)", "Retry-After: 1\r\n");
}

static void handle_health(conn *c, bool readiness) {
    server *s = c->srv;
    if (readiness && !s->loaded) {
        respond_loading(c);
        return;
    }
    json_buf b = {0};
    kipp_json_buf_appendf(&b, "{\"status\":\"%s\",\"model\":", s->loaded ? "ok" : "loading");
    kipp_json_buf_append_string(&b, s->cfg->model_id, strlen(s->cfg->model_id));
    kipp_json_buf_appendf(&b, ",\"synthetic\":%s,\"loaded\":%s}",
                          s->cfg->synthetic ? "true" : "false", s->loaded ? "true" : "false");
    respond_json(c, 200, &b);
    kipp_json_buf_free(&b);
}

static void route(conn *c, const http_request *req) {
    server *s = c->srv;
    if (c->reserve && !is_control(req)) {
        s->rejected++;
        respond_error_with(c, 503, NULL, "the server is at its connection limit; only /healthz, "
                           "/health and /metrics are answered now", "Retry-After: 1\r\n");
        return;
    }
    if (path_has_prefix(req, "/v1/models/")) {
        s->requests[EP_MODELS]++;
        if (!http_method_is(req, "GET")) respond_error_with(c, 405, NULL, "/v1/models/{id} "
                                                            "accepts GET only", "Allow: GET\r\n");
        else if (!s->loaded) respond_loading(c);
        else handle_model(c, req);
        return;
    }
    static const struct { const char *path, *method; endpoint ep; } ROUTES[] = {
        /* /healthz: liveness, 200 whenever the loop runs. /health:
         * readiness, what routers probe (llm-d, Kubernetes): 503 until the
         * model is loaded. */
        {"/healthz", "GET", EP_HEALTH},
        {"/health", "GET", EP_HEALTH},
        {"/metrics", "GET", EP_METRICS},
        {"/v1/models", "GET", EP_MODELS},
        {"/v1/completions", "POST", EP_COMPLETIONS},
        {"/v1/chat/completions", "POST", EP_CHAT},
    };
    for (size_t i = 0; i < sizeof ROUTES / sizeof ROUTES[0]; i++) {
        if (!http_path_is(req, ROUTES[i].path)) continue;
        s->requests[ROUTES[i].ep]++;
        if (!http_method_is(req, ROUTES[i].method)) {
            char msg[128], allow[64];
            snprintf(msg, sizeof msg, "%s accepts %s only", ROUTES[i].path, ROUTES[i].method);
            snprintf(allow, sizeof allow, "Allow: %s\r\n", ROUTES[i].method); /* RFC 9110 15.5.6 */
            respond_error_with(c, 405, NULL, msg, allow);
            return;
        }
        endpoint ep = ROUTES[i].ep;
        if (!s->loaded && ep != EP_HEALTH && ep != EP_METRICS) {
            respond_loading(c);
            return;
        }
        json_buf b = {0};
        switch (ep) {
        case EP_HEALTH: handle_health(c, !strcmp(ROUTES[i].path, "/health")); break;
        case EP_METRICS: handle_metrics(c); break;
        case EP_MODELS:
            api_format_models(&b, s->model, (long long)time(NULL));
            respond_json(c, 200, &b);
            break;
        case EP_COMPLETIONS: handle_completion(c, API_COMPLETIONS, req); break;
        case EP_CHAT: handle_completion(c, API_CHAT, req); break;
        default: break;
        }
        kipp_json_buf_free(&b);
        return;
    }
    s->requests[EP_OTHER]++;
    respond_error(c, 404, NULL, "no such endpoint (GET /healthz, /metrics, /v1/models, "
                  "/v1/models/{id}; POST /v1/completions, /v1/chat/completions)");
}

static size_t unsent(const conn *c) { return c->out.length - c->out_off; }

/* Serves the complete requests the buffer holds, one at a time (a new one
 * is only looked at once the previous one is answered), for at most
 * TURN_BUDGET_S or MAX_REQUESTS_PER_TURN per call and none while the client
 * is OUT_HIGH_WATER behind: 30,000 pipelined requests are served across
 * many turns, interleaved with every other connection and scheduler step. */
static void process_input(conn *c) {
    server *s = c->srv;
    size_t off = 0;
    int served = 0;
    double start = kipp_now_seconds();
    while (c->state == C_READING && off < c->in_len) {
        if (off == 0 && c->in_len == c->parsed_len) break; /* nothing new since INCOMPLETE */
        if (unsent(c) > OUT_HIGH_WATER) break; /* POLLOUT brings us back */
        if (served == MAX_REQUESTS_PER_TURN || (served && kipp_now_seconds() - start > TURN_BUDGET_S)) {
            s->more_work = true;
            break;
        }
        http_request req;
        int status;
        const char *reason;
        http_parse_result r = http_parse_request(c->in + off, c->in_len - off, &s->http, &req,
                                                 &status, &reason);
        if (r == HTTP_PARSE_INCOMPLETE) {
            if (req.head_length && c->body_started == 0) c->body_started = kipp_now_seconds();
            if (req.expect_continue && req.head_length && !c->sent_continue) {
                out_raw(c, "HTTP/1.1 100 Continue\r\n\r\n", 25);
                c->sent_continue = true;
            }
            break;
        }
        if (r == HTTP_PARSE_ERROR) {
            c->keep_alive = false;
            respond_error(c, status, NULL, reason);
            c->state = C_CLOSING; /* lingers: the client may still be sending (413) */
            off = c->in_len;
            break;
        }
        c->keep_alive = req.keep_alive && !s->draining && !c->reserve;
        c->sent_continue = false;
        c->body_started = 0;
        if (req.chunked) http_decode_chunked(c->in + off, &req);
        route(c, &req);
        c->served++;
        served++;
        off += req.total_length;
        c->request_started = kipp_now_seconds(); /* for what follows it in the buffer */
    }
    if (off) {
        memmove(c->in, c->in + off, c->in_len - off);
        c->in_len -= off;
        c->parsed_len = 0;
    } else if (c->state == C_READING && c->in_len && served == 0 && unsent(c) <= OUT_HIGH_WATER) {
        c->parsed_len = c->in_len; /* INCOMPLETE: wait for more bytes */
    }
}

/* ---- connections ------------------------------------------------------------- */

static void conn_close(conn *c) {
    if (c->job) {
        sched_cancel(c->srv->sched, c->job);
        c->srv->disconnects++;
        c->job = NULL;
    }
    close(c->fd);
    free(c->in);
    kipp_json_buf_free(&c->out);
    api_response_ctx_free(&c->ctx); /* a job cut short never reached end_job */
    free_job_buffers(c);
    server *s = c->srv;
    memset(c, 0, sizeof *c);
    c->srv = s;
}

/* Our last response is flushed: stop sending, and read-and-discard what the
 * client still sends for a while, so that closing with unread input does
 * not reset the connection before the client has read the response. */
static void start_linger(conn *c, double t) {
    shutdown(c->fd, SHUT_WR);
    c->state = C_LINGER;
    c->linger_until = t + LINGER_S;
    c->lingered = 0;
}

/* Returns false when the connection is gone. */
static bool conn_linger_read(conn *c) {
    char sink[16384];
    for (;;) {
        ssize_t n = recv(c->fd, sink, sizeof sink, 0);
        if (n > 0) {
            c->lingered += (size_t)n;
            if (c->lingered > LINGER_BYTES) return false;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
}

/* Returns false when the connection is gone. An orderly shutdown of the
 * client's side (EOF) is not the end: what it sent is still answered. */
static bool conn_read(conn *c) {
    if (c->state == C_LINGER) return conn_linger_read(c);
    size_t limit = http_max_request_bytes(&c->srv->http) + 1;
    for (;;) {
        if (c->in_len == c->in_cap) {
            if (c->in_cap >= limit) return true; /* parser reports 413/431, or a job runs */
            size_t cap = c->in_cap ? c->in_cap * 2 : 4096;
            if (cap > limit) cap = limit;
            char *p = realloc(c->in, cap);
            if (!p) return false;
            c->in = p;
            c->in_cap = cap;
        }
        ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
        if (n > 0) {
            if (c->in_len == 0) c->request_started = kipp_now_seconds();
            c->in_len += (size_t)n;
            c->last_activity = kipp_now_seconds();
            continue;
        }
        if (n == 0) {
            c->peer_eof = true;
            return true;
        }
        if (errno == EINTR) continue;
        return errno == EAGAIN || errno == EWOULDBLOCK;
    }
}

static bool conn_flush(conn *c, double t) {
    bool progress = false;
    while (c->out_off < c->out.length) {
        ssize_t n = send(c->fd, c->out.data + c->out_off, c->out.length - c->out_off,
                         MSG_NOSIGNAL);
        if (n > 0) {
            c->out_off += (size_t)n;
            progress = true;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        return false;
    }
    if (c->out_off == c->out.length) {
        c->out.length = 0;
        c->out_off = 0;
        c->send_since = 0;
    } else {
        /* The send deadline runs from the last time the client took bytes
         * (or from when output started to wait). */
        if (progress || c->send_since == 0) c->send_since = t;
        if (c->out_off > (1u << 16)) {
            memmove(c->out.data, c->out.data + c->out_off, c->out.length - c->out_off);
            c->out.length -= c->out_off;
            c->out_off = 0;
        }
    }
    if (unsent(c) > MAX_PENDING_OUT) return false; /* not reading: drop */
    return !c->out.failed;
}

/* The deadline this connection has missed, or -1. Only a connection waiting
 * on the client is timed: a job that runs is the server's business. */
static int missed_deadline(const conn *c, double t) {
    const server_config *cfg = c->srv->cfg;
    if (unsent(c) && c->send_since && t - c->send_since > cfg->send_timeout_s) return T_SEND;
    if (c->state != C_READING || unsent(c)) return -1;
    double head = cfg->header_timeout_s;
    if (c->reserve && head > RESERVE_HEAD_TIMEOUT_S) head = RESERVE_HEAD_TIMEOUT_S;
    if (c->in_len == 0) /* nothing sent yet: a new connection gets the head deadline */
        return t - c->last_activity > (c->served ? cfg->idle_timeout_s : head) ? T_IDLE : -1;
    if (c->body_started == 0) return t - c->request_started > head ? T_HEAD : -1;
    return t - c->body_started > cfg->body_timeout_s ? T_BODY : -1;
}

/* An idle connection (nothing asked, nothing owed) may be closed to make
 * room: HTTP lets either side close an idle keep-alive connection. */
static bool evictable(const conn *c) {
    return c->used && !c->reserve && !unsent(c) &&
           ((c->state == C_READING && c->in_len == 0) || c->state == C_LINGER);
}

/* A slot for a new connection: a free request slot; else the one idle
 * longest, evicted; else a free control slot (*reserve); else NULL. */
static conn *take_slot(server *s) {
    conn *oldest = NULL;
    for (int i = 0; i < MAX_CONNECTIONS; i++) {
        conn *c = &s->conns[i];
        if (!c->used) return c;
        if (evictable(c) && (!oldest || c->last_activity < oldest->last_activity)) oldest = c;
    }
    if (oldest) {
        s->evictions++;
        conn_close(oldest);
        return oldest;
    }
    for (int i = MAX_CONNECTIONS; i < N_SLOTS; i++)
        if (!s->conns[i].used) {
            s->conns[i].reserve = true;
            return &s->conns[i];
        }
    return NULL;
}

static void accept_all(server *s) {
    for (;;) {
        int fd = accept(s->listen_fd, NULL, NULL);
        if (fd < 0) return;
        conn *c = take_slot(s);
        if (!c) {
            static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                                       "Retry-After: 1\r\nConnection: close\r\n\r\n";
            (void)!send(fd, busy, sizeof busy - 1, MSG_NOSIGNAL);
            close(fd);
            s->rejected++;
            s->status_class[5]++;
            continue;
        }
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c->used = true;
        c->fd = fd;
        c->state = C_READING;
        c->keep_alive = !c->reserve;
        c->last_activity = kipp_now_seconds();
    }
}

static int open_listener(const server_config *cfg) {
    char port[16];
    snprintf(port, sizeof port, "%d", cfg->port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE}, *res = NULL;
    int rc = getaddrinfo(cfg->host, port, &hints, &res);
    if (rc) {
        fprintf(stderr, "kipp serve: cannot resolve %s: %s\n", cfg->host, gai_strerror(rc));
        return -1;
    }
    int fd = -1;
    for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd < 0) continue;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) || listen(fd, 128)) {
            fprintf(stderr, "kipp serve: cannot listen on %s:%d: %s\n", cfg->host, cfg->port,
                    strerror(errno));
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd >= 0) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

static int bound_port(int fd) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len)) return -1;
    if (ss.ss_family == AF_INET) return ntohs(((struct sockaddr_in *)&ss)->sin_port);
    if (ss.ss_family == AF_INET6) return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return -1;
}

/* ---- drain ------------------------------------------------------------------- */

/* SIGTERM: stop accepting, close idle connections, let the rest finish
 * (a request still arriving too: it was sent before the signal). */
static void begin_drain(server *s) {
    s->draining = true;
    if (s->listen_fd >= 0) close(s->listen_fd);
    s->listen_fd = -1;
    for (int i = 0; i < N_SLOTS; i++) {
        conn *c = &s->conns[i];
        if (!c->used) continue;
        c->keep_alive = false;
        if (c->state == C_READING && c->in_len == 0) {
            if (unsent(c)) c->state = C_CLOSING;
            else conn_close(c);
        }
    }
}

/* The drain deadline: every request still in flight ends now, with a final
 * event its client can tell from a cut connection. */
static void cancel_in_flight(server *s) {
    static const char msg[] = "the server is shutting down; this request was cancelled";
    s->drain_cancelled = true;
    for (int i = 0; i < N_SLOTS; i++) {
        conn *c = &s->conns[i];
        if (!c->used) continue;
        if (c->job) {
            sched_cancel(s->sched, c->job);
            c->job = NULL;
            end_with_error(c, 503, msg);
            c->state = C_CLOSING;
        } else if (c->state == C_PARSING) {
            c->parse_tag = 0;
            respond_error_with(c, 503, NULL, msg, "Retry-After: 1\r\n");
            c->state = C_CLOSING;
        } else if (c->state == C_READING) { /* a request that never completed */
            c->in_len = 0;
            c->state = C_CLOSING;
        }
    }
}

/* ---- the loop ---------------------------------------------------------------- */

/* Flushes, enforces deadlines, retires finished connections. */
static void tend(conn *c, double t) {
    server *s = c->srv;
    if (c->state == C_READING) process_input(c);
    bool alive = conn_flush(c, t);
    int missed = alive ? missed_deadline(c, t) : -1;
    if (missed >= 0) {
        s->timeouts[missed]++;
        if (missed == T_HEAD || missed == T_BODY) { /* a request was on its way: say why */
            c->keep_alive = false;
            respond_error(c, 408, NULL, missed == T_HEAD ? "request head not received in time"
                                                         : "request body not received in time");
            c->state = C_CLOSING;
            c->in_len = 0;
            alive = conn_flush(c, t);
        } else {
            alive = false;
        }
    }
    bool drained = unsent(c) == 0;
    if (!alive) {
        conn_close(c);
    } else if (c->state == C_CLOSING && drained) {
        start_linger(c, t);
    } else if (c->state == C_LINGER && (t > c->linger_until || c->peer_eof)) {
        conn_close(c);
    } else if (c->state == C_READING && c->peer_eof && drained &&
               (c->in_len == 0 || c->parsed_len == c->in_len)) {
        conn_close(c); /* half-closed, and everything it asked is answered */
    }
}

/* ---- loading ------------------------------------------------------------------ */

static void *loader_main(void *arg) {
    server *s = arg;
    s->load_rc = s->cfg->load(s->cfg->load_arg, &s->load_out);
    char one = 1;
    (void)!write(s->load_pipe[1], &one, 1);
    return NULL;
}

/* Starts the loader thread with SIGINT and SIGTERM blocked in it (and in
 * the threads it starts, e.g. the cpu backend's workers), so that a signal
 * interrupts the loop's poll() rather than a thread that never looks. */
static bool start_loader(server *s) {
    if (pipe(s->load_pipe)) {
        fprintf(stderr, "kipp serve: pipe: %s\n", strerror(errno));
        return false;
    }
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    s->load_started = kipp_now_seconds();
    int rc = pthread_create(&s->loader, NULL, loader_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        fprintf(stderr, "kipp serve: cannot start the loader thread: %s\n", strerror(rc));
        close(s->load_pipe[0]);
        close(s->load_pipe[1]);
        return false;
    }
    s->loader_running = true;
    return true;
}

static void join_loader(server *s) {
    if (!s->loader_running) return;
    pthread_join(s->loader, NULL);
    s->loader_running = false;
    close(s->load_pipe[0]);
    close(s->load_pipe[1]);
}

/* The loader is done: start what needs the model. Returns 0 when the
 * server now serves, 1 when the load (or the start after it) failed. */
static int finish_load(server *s) {
    join_loader(s);
    if (s->load_rc) return 1; /* the load said why */
    const server_config *cfg = s->cfg;
    s->model = s->load_out.model;
    s->limits.context = s->load_out.context;
    sched_config sc = {.max_sequences = cfg->max_sequences,
                       .prefill_chunk = 256, .step_prefill_budget = 512,
                       .kv_quant = cfg->kv_quant, .spec = s->load_out.spec};
    kipp_error err = {0};
    if (sched_create(s->model, &sc, &s->sched, &err)) {
        fprintf(stderr, "kipp serve: %s\n", err.message);
        return 1;
    }
    if (parse_worker_start(s->model, &s->limits, &s->worker)) {
        fprintf(stderr, "kipp serve: cannot start the parse worker thread\n");
        return 1;
    }
    s->loaded = true;
    fprintf(stderr, "kipp serve: ready (model loaded in %.2f s)\n", kipp_now_seconds() - s->load_started);
    fflush(stderr);
    return 0;
}

int server_run(const server_config *cfg) {
    static server s; /* large (connections); one per process */
    memset(&s, 0, sizeof s);
    s.cfg = cfg;
    s.http = (http_limits){.max_head_bytes = MAX_HEAD_BYTES, .max_body_bytes = cfg->max_body_bytes};
    for (int i = 0; i < N_SLOTS; i++) s.conns[i].srv = &s;
    s.listen_fd = open_listener(cfg);
    if (s.listen_fd < 0) return 1;
    fprintf(stderr, "kipp serve: %s (%s) listening on http://%s:%d\n", cfg->model_id,
            cfg->variant, cfg->host, bound_port(s.listen_fd));
    if (cfg->synthetic)
        fprintf(stderr, "kipp serve: NOTE: %s is a synthetic checkpoint; its weights are random, "
                "so the text it serves is meaningless\n", cfg->model_id);
    fflush(stderr);
    if (!start_loader(&s)) {
        close(s.listen_fd);
        return 1;
    }

    struct pollfd fds[N_SLOTS + 3];
    int owner[N_SLOTS + 3];
    double drain_deadline = 0;
    size_t in_limit = http_max_request_bytes(&s.http) + 1;
    int rc = 0;
    for (;;) {
        double t = kipp_now_seconds();
        if (*cfg->stop >= 2) break;
        if (*cfg->stop && !s.loaded) break; /* nothing in flight needs a drain */
        if (*cfg->stop && !s.draining) {
            fprintf(stderr, "kipp serve: draining (up to %.1f s)\n", cfg->shutdown_timeout_s);
            fflush(stderr);
            begin_drain(&s);
            drain_deadline = t + cfg->shutdown_timeout_s;
        }
        if (s.draining) {
            if (t >= drain_deadline && !s.drain_cancelled) cancel_in_flight(&s);
            bool any = false;
            for (int i = 0; i < N_SLOTS; i++) any |= s.conns[i].used;
            if (!any || t >= drain_deadline + SHUTDOWN_GRACE_S) break;
        }
        int nf = 0;
        if (s.listen_fd >= 0) {
            owner[nf] = -1;
            fds[nf++] = (struct pollfd){.fd = s.listen_fd, .events = POLLIN};
        }
        if (s.worker) {
            owner[nf] = -2;
            fds[nf++] = (struct pollfd){.fd = parse_worker_fd(s.worker), .events = POLLIN};
        }
        if (s.loader_running) {
            owner[nf] = -3;
            fds[nf++] = (struct pollfd){.fd = s.load_pipe[0], .events = POLLIN};
        }
        for (int i = 0; i < N_SLOTS; i++) {
            conn *c = &s.conns[i];
            if (!c->used) continue;
            short ev = 0;
            /* Reading stops at EOF and while the buffer is full (a job or the
             * parser will make room); CLOSING only sends. */
            if (c->state == C_LINGER ||
                (c->state != C_CLOSING && !c->peer_eof && c->in_len < in_limit))
                ev |= POLLIN;
            if (unsent(c)) ev |= POLLOUT;
            owner[nf] = i;
            fds[nf++] = (struct pollfd){.fd = c->fd, .events = ev};
        }
        bool busy = s.sched && sched_busy(s.sched);
        int timeout = busy || s.more_work ? 0 : IDLE_POLL_MS;
        s.more_work = false;
        int n = poll(fds, (nfds_t)nf, timeout);
        if (n < 0 && errno != EINTR) {
            fprintf(stderr, "kipp serve: poll: %s\n", strerror(errno));
            break;
        }
        bool load_done = false;
        for (int k = 0; n > 0 && k < nf; k++) {
            short re = fds[k].revents;
            if (!re) continue;
            if (owner[k] == -1) {
                accept_all(&s);
                continue;
            }
            if (owner[k] == -2) {
                collect_parsed(&s);
                continue;
            }
            if (owner[k] == -3) {
                load_done = true;
                continue;
            }
            conn *c = &s.conns[owner[k]];
            if (!c->used) continue;
            bool alive = true;
            if (re & (POLLIN | POLLHUP | POLLERR)) alive = conn_read(c);
            if (alive && (re & POLLOUT)) alive = conn_flush(c, kipp_now_seconds());
            if (!alive) conn_close(c);
            else if (c->state == C_READING) process_input(c);
        }
        if (load_done && finish_load(&s)) {
            /* A load abandoned because a signal came is a clean stop. */
            if (!*cfg->stop) rc = 1;
            break;
        }
        if (s.sched && sched_busy(s.sched)) sched_step(s.sched);
        /* Flush what the step produced, serve pipelined requests, retire. */
        t = kipp_now_seconds();
        for (int i = 0; i < N_SLOTS; i++)
            if (s.conns[i].used) tend(&s.conns[i], t);
    }
    for (int i = 0; i < N_SLOTS; i++)
        if (s.conns[i].used) conn_close(&s.conns[i]);
    if (s.listen_fd >= 0) close(s.listen_fd);
    if (s.loader_running) {
        fprintf(stderr, "kipp serve: waiting for the model load to end\n");
        fflush(stderr);
        join_loader(&s);
    }
    if (s.worker) parse_worker_stop(s.worker);
    if (s.sched) sched_destroy(s.sched);
    fprintf(stderr, rc ? "kipp serve: the model could not be loaded; stopped\n"
                       : "kipp serve: stopped\n");
    return rc;
}
