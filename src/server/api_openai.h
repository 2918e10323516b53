/* OpenAI-compatible request validation/translation and response JSON.
 * Knows JSON and the engine's public API (tokenize, chat rendering), but
 * not HTTP or the scheduler's internals: a request body becomes an
 * api_request (prompt tokens + sampling + limits), and results come back
 * as text pieces that are formatted here.
 *
 * Every field of a request is either understood, accepted as a documented
 * no-op (user; echo=false; suffix/best_of/logprobs null), or refused with
 * a 400 that names it. Nothing is ignored silently. */
#ifndef KIPP_SERVER_API_OPENAI_H
#define KIPP_SERVER_API_OPENAI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/json.h"
#include "kipp.h"
#include "server/chat_output.h"
#include "server/scheduler.h"

typedef enum api_kind { API_COMPLETIONS, API_CHAT } api_kind;

typedef struct api_error {
    int status;       /* 400, 404, ... */
    const char *type; /* "invalid_request_error", ... */
    char param[64];   /* offending field or "" */
    char message[600];
} api_error;

typedef struct api_limits {
    uint32_t context; /* max positions per session (prompt + max_tokens) */
} api_limits;

/* response_format / tools / tool_choice (api_tools.c). */
typedef struct api_features {
    kipp_chat_tool *tools; /* rendered into the prompt; [n_tools] */
    json_buf *json;        /* the tojson text tools[] point into */
    size_t n_tools;
    bool parse_calls;      /* tools offered and tool_choice != none */
    kipp_grammar *grammar; /* constrained decoding, or NULL */
} api_features;

int api_parse_features(const kipp_model *model, api_kind kind, const json_value *root,
                       api_features *f, api_error *e);
void api_features_free(api_features *f);

typedef struct api_request {
    api_kind kind;
    int32_t *prompt; /* malloc'd */
    size_t n_prompt;
    uint32_t n, max_tokens;
    kipp_sampling sampling;
    kipp_logit_bias *bias; /* malloc'd; sampling.logit_bias points here */
    char *stops[SCHED_MAX_STOPS];
    size_t n_stops;
    bool stream, include_usage;
    int32_t top_logprobs; /* -1 = no log-probs */
    kipp_grammar *grammar; /* constrained decoding (NULL = none); hand it to the
                            * scheduler and set this to NULL */
    bool parse_calls;      /* split <tool_call> blocks out of the output */
    chat_reasoning reasoning; /* where the output's reasoning is (chat_output.h) */
} api_request;

int api_parse_request(kipp_model *model, api_kind kind, const api_limits *limits,
                      const char *body, size_t length, api_request *out, api_error *err);
void api_request_free(api_request *r);

/* What every response of one request shares. */
typedef struct api_response_ctx {
    api_kind kind;
    char id[48];
    long long created;
    const char *model_id;
    const kipp_model *model; /* token bytes for log-probs */
    bool synthetic;
    /* chat: reasoning / tool-call splitting per choice (NULL = plain content) */
    chat_output *split[SCHED_MAX_CHOICES];
    chat_delta delta;
} api_response_ctx;

void api_response_ctx_init(api_response_ctx *ctx, api_kind kind, const kipp_model *model,
                           unsigned long long serial);
/* After init: what the request asked for (output splitting). */
void api_response_ctx_configure(api_response_ctx *ctx, const api_request *r);
void api_response_ctx_free(api_response_ctx *ctx);

void api_format_error(json_buf *b, const api_error *e);
void api_format_models(json_buf *b, const kipp_model *model, long long created);
/* One model object (GET /v1/models/{id}; also the list's only entry). */
void api_format_model(json_buf *b, const kipp_model *model, long long created);

/* Per-choice log-prob entries; infos == NULL means log-probs are off. */
typedef struct api_logprobs {
    const sched_token_info *infos;
    size_t n;
    size_t *text_offset; /* legacy text_offset running total (characters) */
} api_logprobs;

/* Non-streamed body: texts[i] / lengths[i] / finish[i] / lp[i] for each choice
 * (lp may be NULL). */
void api_format_response(json_buf *b, const api_response_ctx *ctx, char *const *texts,
                         const size_t *lengths, const char *const *finish,
                         const api_logprobs *lp, uint32_t n, const sched_job_stats *stats);

/* Streamed chunk payloads (the JSON after "data: "). A text chunk may
 * come out empty (b->length unchanged) when output splitting holds the
 * text back; send nothing then. */
void api_format_chunk_start(json_buf *b, const api_response_ctx *ctx, uint32_t choice);
void api_format_chunk_text(json_buf *b, const api_response_ctx *ctx, uint32_t choice,
                           const char *text, size_t length, const api_logprobs *lp);
void api_format_chunk_finish(json_buf *b, const api_response_ctx *ctx, uint32_t choice,
                             const char *finish_reason, const api_logprobs *lp);
void api_format_chunk_usage(json_buf *b, const api_response_ctx *ctx,
                            const sched_job_stats *stats);

#endif
