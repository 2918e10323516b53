/* The server's single-threaded poll() event loop: sockets, HTTP framing,
 * routing, and the glue that turns scheduler events into response bytes.
 * The listener opens first; the model is then loaded on a thread of its
 * own (config->load) while the loop already answers: /healthz 200, /health
 * and every /v1 endpoint 503 + Retry-After, /metrics with
 * kipp_model_loaded 0. The scheduler and the parse worker start once the
 * load returns; a failed load ends the server with an error.
 * Runs until *stop becomes non-zero (a signal handler sets it), then
 * drains: no new connections, active requests finish or are cancelled
 * with a proper final event within shutdown_timeout_s. */
#ifndef KIPP_SERVER_LOOP_H
#define KIPP_SERVER_LOOP_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kipp.h"

/* What a model load hands the loop. */
typedef struct server_model {
    kipp_model *model;
    uint32_t context;       /* positions per session (prompt + max_tokens) */
    kipp_spec_options spec; /* server-wide speculation (mode OFF = none) */
} server_model;

typedef struct server_config {
    /* Loads the model: runs on a thread of its own (SIGINT and SIGTERM
     * blocked there, so they reach the loop), once, after the listener
     * opens. Returns 0 with *out filled, or non-zero after printing why.
     * It may return early (non-zero) once *stop is set. What it opened
     * stays the caller's: server_run joins the thread before it returns,
     * and never closes the model. */
    int (*load)(void *arg, server_model *out);
    void *load_arg;
    /* From the artifact's header, for the listening line and /healthz
     * before the load is done. */
    const char *model_id;
    const char *variant;
    bool synthetic;
    const char *host;        /* numeric or name; loopback by default */
    int port;                /* 0 = any free port (announced on stderr) */
    uint32_t max_sequences;  /* active choices at once */
    kipp_kv_quant kv_quant;
    size_t max_body_bytes;
    /* Per-connection deadlines, in seconds (see loop.c for what each bounds). */
    double header_timeout_s;   /* request head complete, from its first byte (or connect) */
    double body_timeout_s;     /* request body complete, from the end of the head */
    double send_timeout_s;     /* queued output must make progress at least this often */
    double idle_timeout_s;     /* keep-alive connection between requests */
    double shutdown_timeout_s; /* drain: active requests may finish within this */
    /* Set by a signal handler: 1 starts a drain, 2 or more stops at once. */
    volatile sig_atomic_t *stop;
} server_config;

/* Returns 0 after a clean shutdown (a signal during the load included),
 * non-zero if the server cannot start or the load fails (the reason is
 * printed on stderr). */
int server_run(const server_config *config);

#endif
