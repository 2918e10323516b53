/* The event loop: one thread, poll() over the listening socket and every
 * connection. Each turn: accept, read and parse what arrived, hand complete
 * requests to the API layer and the scheduler, run ONE scheduler step if
 * any work is pending (poll then does not block), and flush output.
 *
 * Connection states:
 *   READING  waiting for (the rest of) a request
 *   WAITING  a job runs for it; output (SSE chunks) may flow meanwhile
 *   CLOSING  flush what is buffered, then close
 * A client that disconnects, stops reading (more than MAX_PENDING_OUT bytes
 * queued) or idles too long is dropped; its job is cancelled and frees its
 * sessions; other jobs never notice. */
#include "server/loop.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
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
#include "server/scheduler.h"

#define MAX_CONNECTIONS 64
#define MAX_HEAD_BYTES (16 * 1024)
#define MAX_PENDING_OUT (8u << 20)  /* a client this far behind is cancelled */
#define IDLE_TIMEOUT_S 60.0         /* keep-alive connection without a request */
#define REQUEST_TIMEOUT_S 30.0      /* a started request must arrive within this */

typedef enum conn_state { C_READING, C_WAITING, C_CLOSING } conn_state;

typedef enum endpoint { EP_HEALTH, EP_METRICS, EP_MODELS, EP_COMPLETIONS, EP_CHAT, EP_OTHER, EP_N }
    endpoint;
static const char *const ENDPOINT_NAMES[EP_N] = {"/healthz", "/metrics", "/v1/models",
                                                 "/v1/completions", "/v1/chat/completions",
                                                 "other"};

typedef struct server server;

typedef struct conn {
    bool used;
    int fd;
    server *srv;
    conn_state state;
    char *in;
    size_t in_len, in_cap;
    json_buf out;
    size_t out_off;
    bool keep_alive, sent_continue;
    double last_activity, request_started;
    /* the running job */
    sched_job *job;
    api_response_ctx ctx;
    bool stream, include_usage;
    uint32_t n_choices;
    json_buf texts[SCHED_MAX_CHOICES];
    const char *finish[SCHED_MAX_CHOICES];
    /* log-probs (top_logprobs >= 0): entries per choice; [lp_sent, lp_n)
     * still waits for a stream chunk to ride in */
    bool logprobs;
    sched_token_info *lp[SCHED_MAX_CHOICES];
    size_t lp_n[SCHED_MAX_CHOICES], lp_cap[SCHED_MAX_CHOICES], lp_sent[SCHED_MAX_CHOICES];
    size_t lp_offset[SCHED_MAX_CHOICES];
} conn;

struct server {
    const server_config *cfg;
    kipp_model *model;
    sched *sched;
    api_limits limits;
    http_limits http;
    int listen_fd;
    conn conns[MAX_CONNECTIONS];
    unsigned long long serial;
    double started;
    uint64_t requests[EP_N];
    uint64_t status_class[6]; /* [2]=2xx ... [5]=5xx */
    uint64_t disconnects;
};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

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

static void respond_error(conn *c, int status, const char *param, const char *message) {
    api_error e = {.status = status, .type = status >= 500 ? "server_error" : "invalid_request_error"};
    snprintf(e.param, sizeof e.param, "%s", param ? param : "");
    snprintf(e.message, sizeof e.message, "%s", message);
    json_buf b = {0};
    api_format_error(&b, &e);
    respond_json(c, status, &b);
    kipp_json_buf_free(&b);
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
        if (!p) return; /* out of memory: the entry is lost, the text is not */
        c->lp[choice] = p;
        c->lp_cap[choice] = cap;
    }
    c->lp[choice][c->lp_n[choice]++] = *info;
}

/* The log-prob entries not yet streamed (NULL when log-probs are off). */
static const api_logprobs *pending_lp(conn *c, uint32_t choice, api_logprobs *lp) {
    if (!c->logprobs) return NULL;
    static const sched_token_info none;
    *lp = (api_logprobs){c->lp[choice] ? c->lp[choice] + c->lp_sent[choice] : &none,
                         c->lp_n[choice] - c->lp_sent[choice], &c->lp_offset[choice]};
    c->lp_sent[choice] = c->lp_n[choice];
    return lp;
}

static void ev_text(void *owner, uint32_t choice, const char *text, size_t n) {
    conn *c = owner;
    if (!c->stream) {
        kipp_json_buf_append(&c->texts[choice], text, n);
        return;
    }
    json_buf b = {0};
    api_logprobs lp;
    api_format_chunk_text(&b, &c->ctx, choice, text, n, pending_lp(c, choice, &lp));
    sse_send(c, &b);
    kipp_json_buf_free(&b);
}

static void ev_choice_done(void *owner, uint32_t choice, const char *reason) {
    conn *c = owner;
    c->finish[choice] = reason;
    if (!c->stream) return;
    json_buf b = {0};
    api_logprobs lp;
    api_format_chunk_finish(&b, &c->ctx, choice, reason, pending_lp(c, choice, &lp));
    sse_send(c, &b);
    kipp_json_buf_free(&b);
}

static void free_job_buffers(conn *c) {
    for (uint32_t i = 0; i < SCHED_MAX_CHOICES; i++) {
        kipp_json_buf_free(&c->texts[i]);
        free(c->lp[i]);
    }
    memset(c->texts, 0, sizeof c->texts);
    memset(c->lp, 0, sizeof c->lp);
    memset(c->lp_n, 0, sizeof c->lp_n);
    memset(c->lp_cap, 0, sizeof c->lp_cap);
    memset(c->lp_sent, 0, sizeof c->lp_sent);
    memset(c->lp_offset, 0, sizeof c->lp_offset);
}

static void end_job(conn *c) {
    c->job = NULL;
    free_job_buffers(c);
    if (c->state == C_WAITING) c->state = c->keep_alive ? C_READING : C_CLOSING;
    c->last_activity = now();
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
            pending_lp(c, i, &lp[i]);
        }
        api_format_response(&b, &c->ctx, texts, lens, c->finish, c->logprobs ? lp : NULL,
                            c->n_choices, st);
        respond_json(c, 200, &b);
    }
    kipp_json_buf_free(&b);
    end_job(c);
}

static void ev_job_failed(void *owner, const char *message) {
    conn *c = owner;
    if (c->stream) {
        api_error e = {.status = 500, .type = "server_error"};
        snprintf(e.message, sizeof e.message, "%s", message);
        json_buf b = {0};
        api_format_error(&b, &e);
        sse_send(c, &b);
        kipp_json_buf_free(&b);
        out_raw(c, "data: [DONE]\n\n", 14);
        c->state = C_CLOSING;
    } else {
        respond_error(c, 500, NULL, message);
    }
    end_job(c);
}

static const sched_events EVENTS = {ev_token, ev_text, ev_choice_done, ev_job_done,
                                    ev_job_failed};

/* ---- endpoints ---------------------------------------------------------------- */

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
    sched_get_metrics(s->sched, &m);
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
    respond(c, 200, "text/plain; version=0.0.4", b.data, b.length, NULL);
    kipp_json_buf_free(&b);
}

static void handle_completion(conn *c, api_kind kind, const http_request *req) {
    server *s = c->srv;
    api_request r;
    api_error e;
    if (api_parse_request(s->model, kind, &s->limits, req->body, req->body_length, &r, &e)) {
        json_buf b = {0};
        api_format_error(&b, &e);
        respond_json(c, e.status ? e.status : 400, &b);
        kipp_json_buf_free(&b);
        return;
    }
    sched_request sr = {.prompt = r.prompt, .n_prompt = r.n_prompt, .n_choices = r.n,
                        .max_tokens = r.max_tokens, .sampling = r.sampling,
                        .n_stops = r.n_stops, .top_logprobs = r.top_logprobs};
    for (size_t i = 0; i < r.n_stops; i++) sr.stops[i] = r.stops[i];
    kipp_error kerr = {0};
    c->stream = r.stream;
    c->include_usage = r.include_usage;
    c->logprobs = r.top_logprobs >= 0;
    c->n_choices = r.n;
    for (uint32_t i = 0; i < SCHED_MAX_CHOICES; i++) c->finish[i] = "stop";
    api_response_ctx_init(&c->ctx, kind, s->model, ++s->serial);
    int rc = sched_submit(s->sched, &sr, &EVENTS, c, &c->job, &kerr);
    api_request_free(&r);
    if (rc) {
        respond_error(c, rc == KIPP_E_MEMORY ? 500 : 400, NULL, kerr.message);
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

static void route(conn *c, const http_request *req) {
    server *s = c->srv;
    static const struct { const char *path, *method; endpoint ep; } ROUTES[] = {
        {"/healthz", "GET", EP_HEALTH},
        /* /health: what routers probe (llm-d, Kubernetes). The model is loaded
         * before the listener opens, so it is 200 whenever it answers. */
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
            char msg[128];
            snprintf(msg, sizeof msg, "%s accepts %s only", ROUTES[i].path, ROUTES[i].method);
            respond_error(c, 405, NULL, msg);
            return;
        }
        json_buf b = {0};
        switch (ROUTES[i].ep) {
        case EP_HEALTH:
            kipp_json_buf_appendf(&b, "{\"status\":\"ok\",\"model\":");
            kipp_json_buf_append_string(&b, kipp_model_checkpoint(s->model)->id,
                                   strlen(kipp_model_checkpoint(s->model)->id));
            kipp_json_buf_appendf(&b, ",\"synthetic\":%s}",
                             kipp_model_checkpoint(s->model)->synthetic ? "true" : "false");
            respond_json(c, 200, &b);
            break;
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
    respond_error(c, 404, NULL, "no such endpoint (GET /healthz, /metrics, /v1/models; POST "
                  "/v1/completions, /v1/chat/completions)");
}

/* Parses and serves as many complete requests as the buffer holds, one at
 * a time: a new request is only looked at once the previous one is done. */
static void process_input(conn *c) {
    while (c->state == C_READING && c->in_len > 0) {
        http_request req;
        int status;
        const char *reason;
        http_parse_result r = http_parse_request(c->in, c->in_len, &c->srv->http, &req, &status,
                                                 &reason);
        if (r == HTTP_PARSE_INCOMPLETE) {
            if (req.expect_continue && req.head_length && !c->sent_continue) {
                out_raw(c, "HTTP/1.1 100 Continue\r\n\r\n", 25);
                c->sent_continue = true;
            }
            return;
        }
        if (r == HTTP_PARSE_ERROR) {
            c->keep_alive = false;
            respond_error(c, status, NULL, reason);
            c->state = C_CLOSING;
            return;
        }
        c->keep_alive = req.keep_alive;
        c->sent_continue = false;
        route(c, &req);
        memmove(c->in, c->in + req.total_length, c->in_len - req.total_length);
        c->in_len -= req.total_length;
        c->request_started = c->in_len ? now() : 0;
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
    free_job_buffers(c);
    server *s = c->srv;
    memset(c, 0, sizeof *c);
    c->srv = s;
}

/* Returns false when the connection is gone. */
static bool conn_read(conn *c) {
    size_t limit = MAX_HEAD_BYTES + c->srv->cfg->max_body_bytes + 1;
    for (;;) {
        if (c->in_len == c->in_cap) {
            if (c->in_cap >= limit) return c->state == C_READING; /* parser reports 413/431 */
            size_t cap = c->in_cap ? c->in_cap * 2 : 4096;
            if (cap > limit) cap = limit;
            char *p = realloc(c->in, cap);
            if (!p) return false;
            c->in = p;
            c->in_cap = cap;
        }
        ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
        if (n > 0) {
            if (c->in_len == 0) c->request_started = now();
            c->in_len += (size_t)n;
            c->last_activity = now();
            continue;
        }
        if (n == 0) return false;
        if (errno == EINTR) continue;
        return errno == EAGAIN || errno == EWOULDBLOCK;
    }
}

static bool conn_flush(conn *c) {
    while (c->out_off < c->out.length) {
        ssize_t n = send(c->fd, c->out.data + c->out_off, c->out.length - c->out_off,
                         MSG_NOSIGNAL);
        if (n > 0) {
            c->out_off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        return false;
    }
    if (c->out_off == c->out.length) {
        c->out.length = 0;
        c->out_off = 0;
    } else if (c->out_off > (1u << 16)) {
        memmove(c->out.data, c->out.data + c->out_off, c->out.length - c->out_off);
        c->out.length -= c->out_off;
        c->out_off = 0;
    }
    if (c->out.length - c->out_off > MAX_PENDING_OUT) return false; /* not reading: drop */
    return !c->out.failed;
}

static void accept_all(server *s) {
    for (;;) {
        int fd = accept(s->listen_fd, NULL, NULL);
        if (fd < 0) return;
        conn *c = NULL;
        for (int i = 0; i < MAX_CONNECTIONS && !c; i++)
            if (!s->conns[i].used) c = &s->conns[i];
        if (!c) {
            static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                                       "Connection: close\r\n\r\n";
            (void)!send(fd, busy, sizeof busy - 1, MSG_NOSIGNAL);
            close(fd);
            continue;
        }
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c->used = true;
        c->fd = fd;
        c->state = C_READING;
        c->keep_alive = true;
        c->last_activity = now();
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

int server_run(const server_config *cfg) {
    static server s; /* large (connections); one per process */
    memset(&s, 0, sizeof s);
    s.cfg = cfg;
    s.model = cfg->model;
    s.limits.context = cfg->context;
    s.http = (http_limits){.max_head_bytes = MAX_HEAD_BYTES, .max_body_bytes = cfg->max_body_bytes};
    for (int i = 0; i < MAX_CONNECTIONS; i++) s.conns[i].srv = &s;
    sched_config sc = {.max_sequences = cfg->max_sequences,
                       .prefill_chunk = 256, .step_prefill_budget = 512,
                       .kv_quant = cfg->kv_quant};
    kipp_error err = {0};
    if (sched_create(cfg->model, &sc, &s.sched, &err)) {
        fprintf(stderr, "kipp serve: %s\n", err.message);
        return 1;
    }
    s.listen_fd = open_listener(cfg);
    if (s.listen_fd < 0) {
        sched_destroy(s.sched);
        return 1;
    }
    const kipp_checkpoint *ck = kipp_model_checkpoint(cfg->model);
    fprintf(stderr, "kipp serve: %s (%s) listening on http://%s:%d\n", ck->id,
            kipp_variant_name(ck->variant), cfg->host, bound_port(s.listen_fd));
    if (ck->synthetic)
        fprintf(stderr, "kipp serve: NOTE: %s is a synthetic checkpoint; its weights are random, "
                "so the text it serves is meaningless\n", ck->id);
    fflush(stderr);

    struct pollfd fds[MAX_CONNECTIONS + 1];
    int owner[MAX_CONNECTIONS + 1];
    while (!*cfg->stop) {
        int nf = 0;
        fds[nf++] = (struct pollfd){.fd = s.listen_fd, .events = POLLIN};
        for (int i = 0; i < MAX_CONNECTIONS; i++) {
            conn *c = &s.conns[i];
            if (!c->used) continue;
            short ev = c->state == C_CLOSING ? 0 : POLLIN;
            if (c->out_off < c->out.length) ev |= POLLOUT;
            owner[nf] = i;
            fds[nf++] = (struct pollfd){.fd = c->fd, .events = ev};
        }
        int timeout = sched_busy(s.sched) ? 0 : 250;
        int n = poll(fds, (nfds_t)nf, timeout);
        if (n < 0 && errno != EINTR) {
            fprintf(stderr, "kipp serve: poll: %s\n", strerror(errno));
            break;
        }
        if (n > 0 && (fds[0].revents & POLLIN)) accept_all(&s);
        for (int k = 1; n > 0 && k < nf; k++) {
            conn *c = &s.conns[owner[k]];
            short re = fds[k].revents;
            if (!c->used || !re) continue;
            bool alive = true;
            if (re & (POLLIN | POLLHUP | POLLERR)) alive = conn_read(c);
            if (alive && (re & POLLOUT)) alive = conn_flush(c);
            if (!alive) conn_close(c);
            else process_input(c);
        }
        if (sched_busy(s.sched)) sched_step(s.sched);
        /* Flush what the step produced, serve pipelined requests, retire. */
        double t = now();
        for (int i = 0; i < MAX_CONNECTIONS; i++) {
            conn *c = &s.conns[i];
            if (!c->used) continue;
            process_input(c);
            bool alive = conn_flush(c);
            bool drained = c->out_off == c->out.length;
            if (c->state == C_READING &&
                ((c->in_len && t - c->request_started > REQUEST_TIMEOUT_S) ||
                 (!c->in_len && drained && t - c->last_activity > IDLE_TIMEOUT_S)))
                alive = false;
            if (!alive || (c->state == C_CLOSING && drained)) conn_close(c);
        }
    }
    for (int i = 0; i < MAX_CONNECTIONS; i++)
        if (s.conns[i].used) conn_close(&s.conns[i]);
    close(s.listen_fd);
    sched_destroy(s.sched);
    fprintf(stderr, "kipp serve: stopped\n");
    return 0;
}
