/* One background thread that turns request bodies into api_requests
 * (JSON parse, chat rendering, tokenization), so that a large prompt -
 * tokenizing 1 MiB takes seconds - never stalls the event loop and the
 * streams it serves. Jobs run one at a time in submission order; the loop
 * polls parse_worker_fd() and collects finished jobs with parse_worker_take.
 * api_parse_request only reads the model (the tokenizer keeps all state per
 * call), so it may run while the loop evaluates. */
#ifndef KIPP_SERVER_PARSE_WORKER_H
#define KIPP_SERVER_PARSE_WORKER_H

#include <stddef.h>
#include <stdint.h>

#include "server/api_openai.h"

typedef struct parse_worker parse_worker;

typedef struct parse_job {
    /* in: set by the submitter */
    uint64_t tag; /* the submitter's name for whoever waits (a stale tag = nobody) */
    api_kind kind;
    char *body; /* malloc'd; freed with the job */
    size_t length;
    /* out: valid once taken */
    int rc; /* api_parse_request's result */
    api_request request;
    api_error error;
    struct parse_job *next;
} parse_job;

int parse_worker_start(kipp_model *model, const api_limits *limits, parse_worker **out);
/* Joins the thread; jobs not yet taken are freed. */
void parse_worker_stop(parse_worker *w);
/* Readable (POLLIN) when a finished job may be waiting. */
int parse_worker_fd(const parse_worker *w);
/* Takes ownership of job. */
void parse_worker_submit(parse_worker *w, parse_job *job);
/* A finished job (the caller owns it), or NULL. */
parse_job *parse_worker_take(parse_worker *w);
/* Frees a job and what it holds (body, request). */
void parse_job_free(parse_job *job);

#endif
