/* The server's single-threaded poll() event loop: sockets, HTTP framing,
 * routing, and the glue that turns scheduler events into response bytes.
 * Runs until *stop becomes non-zero (a signal handler sets it), then
 * drains: no new connections, active requests finish or are cancelled
 * with a proper final event within shutdown_timeout_s. */
#ifndef KIPP_SERVER_LOOP_H
#define KIPP_SERVER_LOOP_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "kipp.h"

typedef struct server_config {
    kipp_model *model;
    const char *host;        /* numeric or name; loopback by default */
    int port;                /* 0 = any free port (announced on stderr) */
    uint32_t max_sequences;  /* active choices at once */
    uint32_t context;        /* positions per session (prompt + max_tokens) */
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
    kipp_spec_options spec;  /* server-wide speculation (mode OFF = none) */
} server_config;

/* Returns 0 after a clean shutdown, non-zero if the server cannot start
 * (the reason is printed on stderr). */
int server_run(const server_config *config);

#endif
