/* Kipp public API.
 *
 * Opaque model and session handles. Every call that can fail returns an int
 * status (KIPP_OK == 0) and fills a caller-provided kipp_error; the library
 * never exits the process. A model owns the read-only mapping of one GGUF
 * artifact and exactly one backend, chosen explicitly. Sessions are
 * independent timelines (KV cache + length) and must be destroyed before
 * their model. A session is not safe to mutate from two threads at once. */
#ifndef KIPP_H
#define KIPP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- errors --------------------------------------------------------- */

enum kipp_status {
    KIPP_OK = 0,
    KIPP_E_ARGUMENT,    /* bad argument from the caller */
    KIPP_E_IO,          /* open/read/write/mmap failed */
    KIPP_E_FORMAT,      /* malformed file contents (GGUF, JSON, safetensors) */
    KIPP_E_REGISTRY,    /* well-formed, but not a registry checkpoint / mismatch */
    KIPP_E_MEMORY,      /* allocation failed or size overflow */
    KIPP_E_CAPACITY,    /* session capacity exceeded */
    KIPP_E_BACKEND,     /* backend could not start */
    KIPP_E_UNSUPPORTED, /* valid request we do not support */
    KIPP_E_INTERNAL,
    KIPP_E_POOL_EXHAUSTED, /* the model's KV pool has no free block now (retry later) */
};

typedef struct kipp_error {
    int code;
    char message[512];
} kipp_error;

/* ---- registry ------------------------------------------------------- */

/* Family invariants (DESIGN §2). */
#define KIPP_KV_HEADS 8
#define KIPP_HEAD_DIM 128
#define KIPP_VOCAB_SIZE 151936
#define KIPP_RMS_EPS 1e-6f
#define KIPP_MAX_STOPS 4
#define KIPP_VERSION_STRING "0.1.0"

typedef enum kipp_variant {
    KIPP_VARIANT_BASE,
    KIPP_VARIANT_INSTRUCT,
    KIPP_VARIANT_INSTRUCT_2507,
    KIPP_VARIANT_THINKING_2507,
} kipp_variant;

typedef struct kipp_checkpoint {
    const char *id;                /* "qwen3-0.6b" */
    const char *source_repository; /* "Qwen/Qwen3-0.6B" */
    const char *revision;          /* pinned commit (or synthetic tag) */
    kipp_variant variant;
    uint32_t layers;
    uint32_t hidden;     /* residual stream width (embedding_length) */
    uint32_t ffn;        /* feed_forward_length */
    uint32_t heads;      /* query heads; attention width = heads * 128 */
    uint32_t context;    /* context_length */
    double rope_theta;
    bool tied;           /* output head shares token_embd */
    int32_t eos;
    int32_t stops[KIPP_MAX_STOPS];
    uint32_t n_stops;
    bool synthetic;      /* random weights made by `kipp synth` */
} kipp_checkpoint;

size_t kipp_registry_count(void);
const kipp_checkpoint *kipp_registry_at(size_t index);
const kipp_checkpoint *kipp_registry_find_id(const char *id);
const kipp_checkpoint *kipp_registry_find_source(const char *repository,
                                                 const char *revision);
const char *kipp_variant_name(kipp_variant v);

/* ---- models ----------------------------------------------------------- */

typedef struct kipp_model kipp_model;
typedef struct kipp_session kipp_session;

typedef enum kipp_backend_kind {
    KIPP_BACKEND_NONE = 0, /* validate + tokenizer only: info, tokenize */
    KIPP_BACKEND_REF,      /* scalar oracle */
    KIPP_BACKEND_CPU,      /* SIMD + threads */
    KIPP_BACKEND_CUDA,
} kipp_backend_kind;

typedef struct kipp_model_options {
    kipp_backend_kind backend;
    int threads; /* cpu backend; 0 = online cores */
    /* Size of the model's shared KV pool (per KV format in use), MiB.
     * 0 = room for one full context of the checkpoint, so any single session
     * fits alone. Sessions take 32-position blocks from it as they grow. */
    uint32_t kv_pool_mib;
} kipp_model_options;

int kipp_model_open(const char *path, const kipp_model_options *options,
                    kipp_model **out, kipp_error *err);
void kipp_model_close(kipp_model *model);
const kipp_checkpoint *kipp_model_checkpoint(const kipp_model *model);
const char *kipp_model_quant_scheme(const kipp_model *model);
const char *kipp_backend_name(kipp_backend_kind kind);
/* NULL for base entries. */
const char *kipp_model_chat_template(const kipp_model *model);

/* ---- tokenizer -------------------------------------------------------- */

/* Encode UTF-8 text to token ids (no BOS, added tokens recognised).
 * *ids is malloc'd; free() it. Invalid UTF-8: see docs/ARCHITECTURE.md. */
int kipp_tokenize(const kipp_model *model, const char *text, size_t length,
                  int32_t **ids, size_t *n_ids, kipp_error *err);
/* Decode ids to bytes (byte-exact; may be invalid UTF-8 mid-sequence).
 * *text is malloc'd and NUL-terminated; free() it. */
int kipp_detokenize(const kipp_model *model, const int32_t *ids, size_t n_ids,
                    char **text, size_t *length, kipp_error *err);

/* Streaming decoder: holds back incomplete UTF-8 sequences. */
typedef struct kipp_detok_stream kipp_detok_stream;
int kipp_detok_stream_create(const kipp_model *model, kipp_detok_stream **out,
                             kipp_error *err);
/* Appends complete UTF-8 produced by `id` to out (up to out_cap bytes,
 * returns bytes written in *out_len). */
int kipp_detok_stream_push(kipp_detok_stream *s, int32_t id, char *out,
                           size_t out_cap, size_t *out_len, kipp_error *err);
/* Flush whatever is held (incomplete bytes are emitted as U+FFFD). */
int kipp_detok_stream_flush(kipp_detok_stream *s, char *out, size_t out_cap,
                            size_t *out_len);
void kipp_detok_stream_destroy(kipp_detok_stream *s);

/* ---- sessions and evaluation ----------------------------------------- */

typedef enum kipp_kv_quant {
    KIPP_KV_BF16 = 0,
    KIPP_KV_Q8_0,
} kipp_kv_quant;

/* A session's capacity is a limit, not a reservation: its K/V lives in the
 * model's pool of 32-position blocks (one pool per KV format), taken as it
 * grows. An eval that needs a block when the pool is dry fails with
 * KIPP_E_POOL_EXHAUSTED and changes nothing. */
typedef struct kipp_session_options {
    uint32_t capacity; /* positions; 0 = model context length */
    kipp_kv_quant kv_quant;
} kipp_session_options;

int kipp_session_create(kipp_model *model, const kipp_session_options *options,
                        kipp_session **out, kipp_error *err);
void kipp_session_destroy(kipp_session *session);
uint32_t kipp_session_length(const kipp_session *session);
uint32_t kipp_session_capacity(const kipp_session *session);
void kipp_session_reset(kipp_session *session);
/* Truncation into a block shared with other sessions (an adopted or
 * published block) continues in a private copy of its first positions, so
 * shared state is never written; that copy needs one free block
 * (KIPP_E_POOL_EXHAUSTED otherwise, session unchanged). */
int kipp_session_truncate(kipp_session *session, uint32_t length,
                          kipp_error *err);

/* ---- shared prefixes (the KV pool) ------------------------------------- */

/* Adopts into an EMPTY session the longest published prefix of
 * tokens[0..n) - whole 32-token blocks only - instead of evaluating it; the
 * session's length becomes *n_adopted (a multiple of 32, maybe 0). The
 * caller evaluates tokens[*n_adopted..n) next. A caller that needs the
 * logits of the last token passes n - 1 so that one token is left. */
int kipp_session_match_prefix(kipp_session *session, const int32_t *tokens, size_t n,
                              uint32_t *n_adopted, kipp_error *err);
/* Publishes every full block of the session so that later sessions can
 * adopt it (kipp_session_match_prefix). Published blocks stay in the pool
 * after the session is gone, until evicted least-recently-used. */
int kipp_session_publish(kipp_session *session, kipp_error *err);
/* Positions of tokens[0..n) a new session would adopt now (no side effect). */
uint32_t kipp_pool_match_length(kipp_model *model, kipp_kv_quant kv_quant,
                                const int32_t *tokens, size_t n);

typedef struct kipp_pool_stats {
    uint32_t block_positions;   /* 32 */
    uint64_t bytes_per_block;   /* K+V of one block over all layers */
    uint32_t blocks_total;
    uint32_t blocks_free;       /* not held by any session (includes cached) */
    uint32_t blocks_cached;     /* published, not held: reusable until evicted */
    uint32_t blocks_held;       /* in some session's block table */
    uint64_t reused_blocks;     /* adopted by kipp_session_match_prefix, ever */
    uint64_t evicted_blocks;    /* published blocks evicted to make room, ever */
    uint64_t published_blocks;  /* blocks published, ever */
} kipp_pool_stats;

/* Statistics of the model's pool for one KV format (a pool no session has
 * used yet reports its size and zero use). */
int kipp_pool_stats_get(kipp_model *model, kipp_kv_quant kv_quant, kipp_pool_stats *out,
                        kipp_error *err);

/* One eval item appends n_tokens at the session's current length and writes
 * logits for its last n_logits positions (0 <= n_logits <= n_tokens) into
 * logits[n_logits][KIPP_VOCAB_SIZE] (caller-owned). Several items in one
 * kipp_eval call are evaluated together; each must name a distinct session.
 * On error no session is changed. */
typedef struct kipp_eval_item {
    kipp_session *session;
    const int32_t *tokens;
    uint32_t n_tokens;
    uint32_t n_logits;
    float *logits;
} kipp_eval_item;

int kipp_eval(kipp_model *model, kipp_eval_item *items, size_t n_items,
              kipp_error *err);

/* ---- sampling ---------------------------------------------------------- */

typedef struct kipp_logit_bias {
    int32_t token;
    float bias; /* -INFINITY bans the token */
} kipp_logit_bias;

#define KIPP_PENALTY_WINDOW 64

typedef struct kipp_sampling {
    float temperature;        /* 0 = greedy */
    int32_t top_k;            /* 0 = off */
    float top_p;              /* 1 = off */
    float min_p;              /* 0 = off */
    float repetition_penalty; /* 1 = off */
    float frequency_penalty;  /* 0 = off */
    float presence_penalty;   /* 0 = off */
    const kipp_logit_bias *logit_bias;
    size_t n_logit_bias;
    uint64_t seed;
} kipp_sampling;

/* Defaults: greedy, every filter off. */
kipp_sampling kipp_sampling_default(void);

typedef struct kipp_sampler kipp_sampler;
int kipp_sampler_create(const kipp_sampling *params, kipp_sampler **out,
                        kipp_error *err);
void kipp_sampler_destroy(kipp_sampler *s);
/* Records an accepted token into the penalty window (prompt tokens too). */
void kipp_sampler_accept(kipp_sampler *s, int32_t token);
/* Picks one token from logits[KIPP_VOCAB_SIZE]; logits are used as scratch
 * and may be modified. */
int32_t kipp_sampler_sample(kipp_sampler *s, float *logits);

/* ---- chat rendering ----------------------------------------------------- */

/* One chat message. role is "system", "user" or "assistant"; content is
 * UTF-8 of content_length bytes. reasoning_content (NULL = absent) is an
 * assistant turn's thinking, as in the Qwen3 template. */
typedef struct kipp_chat_message {
    const char *role;
    const char *content;
    size_t content_length;
    const char *reasoning_content;
    size_t reasoning_length;
} kipp_chat_message;

/* Renders messages as the checkpoint's ChatML prompt, byte-identical to its
 * Jinja chat template (Qwen3 hybrid-thinking template; tools are not
 * supported). add_generation_prompt appends the assistant header;
 * enable_thinking=false then also appends the empty think block.
 * Base entries and variants without a native renderer give
 * KIPP_E_UNSUPPORTED. *text is malloc'd and NUL-terminated; free() it. */
int kipp_chat_render(const kipp_model *model, const kipp_chat_message *messages,
                     size_t n_messages, bool add_generation_prompt, bool enable_thinking,
                     char **text, size_t *length, kipp_error *err);

/* ---- inspection (`kipp info`) ----------------------------------------- */

/* A strictly validated artifact opened only to describe it: the same checks
 * as kipp_model_open, but no tokenizer and no backend. */
typedef struct kipp_inspect kipp_inspect;

typedef struct kipp_tensor_info {
    char name[64];
    const char *type;  /* "BF16", "F32", "Q8_0", ... */
    uint32_t n_dims;
    uint64_t ne[4];    /* GGUF order: innermost first; unused = 1 */
    uint64_t offset;   /* absolute file offset of the data */
    uint64_t nbytes;
} kipp_tensor_info;

int kipp_inspect_open(const char *path, kipp_inspect **out, kipp_error *err);
void kipp_inspect_close(kipp_inspect *ins);
const kipp_checkpoint *kipp_inspect_checkpoint(const kipp_inspect *ins);
const char *kipp_inspect_quant_scheme(const kipp_inspect *ins);
uint64_t kipp_inspect_file_size(const kipp_inspect *ins);
uint64_t kipp_inspect_data_offset(const kipp_inspect *ins);
size_t kipp_inspect_metadata_count(const kipp_inspect *ins);
/* Metadata entry i as text (each NUL-terminated, truncated to its cap):
 * key, type ("u32", "string", "string[151936]") and value; strings are
 * quoted and escaped, arrays summarised as their first few elements. */
int kipp_inspect_metadata(const kipp_inspect *ins, size_t i, char *key, size_t key_cap,
                          char *type, size_t type_cap, char *value, size_t value_cap);
size_t kipp_inspect_tensor_count(const kipp_inspect *ins);
int kipp_inspect_tensor(const kipp_inspect *ins, size_t i, kipp_tensor_info *out);

#ifdef __cplusplus
}
#endif
#endif
