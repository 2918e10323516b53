/* The server's single-threaded poll() event loop: sockets, HTTP framing,
 * routing, and the glue that turns scheduler events into response bytes.
 * Runs until *stop becomes non-zero (a signal handler sets it). */
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
    volatile sig_atomic_t *stop;
} server_config;

/* Returns 0 after a clean shutdown, non-zero if the server cannot start
 * (the reason is printed on stderr). */
int server_run(const server_config *config);

#endif
