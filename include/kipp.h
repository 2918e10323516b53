/* Kipp public API (libkipp; docs/API.md has the lifecycle, threading and
 * ABI rules, and an example).
 *
 * Opaque model and session handles. Every call that can fail returns an int
 * status (KIPP_OK == 0) and fills a caller-provided kipp_error; the library
 * never exits the process and reads no environment variable: every knob is
 * an argument or an options field. A model owns the read-only mapping of
 * one GGUF artifact and exactly one backend, chosen explicitly. Sessions are
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

/* The library is compiled with -fvisibility=hidden: only declarations
 * marked KIPP_API are exported from libkipp.so. A host may predefine
 * KIPP_API (e.g. empty) before including this header. */
#ifndef KIPP_API
#if defined(__GNUC__) || defined(__clang__)
#define KIPP_API __attribute__((visibility("default")))
#else
#define KIPP_API
#endif
#endif

/* ---- version ----------------------------------------------------------- */

/* The soname carries the major version (libkipp.so.0). Within one major
 * version a minor release only adds (functions, enum values at the end,
 * macros); see docs/API.md for the full rule. */
#define KIPP_VERSION_MAJOR 0
#define KIPP_VERSION_MINOR 1
#define KIPP_VERSION_PATCH 0
#define KIPP_VERSION_STRING "0.1.0"
/* One comparable number: 10000 * major + 100 * minor + patch. */
#define KIPP_VERSION                                                         \
    (KIPP_VERSION_MAJOR * 10000 + KIPP_VERSION_MINOR * 100 + KIPP_VERSION_PATCH)

/* The version of the library actually linked ("0.1.0"), which may differ
 * from KIPP_VERSION_STRING of the header a program was compiled against. */
KIPP_API const char *kipp_version(void);

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
/* Ids below this are the byte-level BPE vocabulary (normal tokens, or unused
 * in a cut-down one); added tokens -- control and user-defined, the chat
 * markers -- have ids from here to the end. */
#define KIPP_FIRST_ADDED_TOKEN 151643
#define KIPP_RMS_EPS 1e-6f
#define KIPP_MAX_STOPS 4

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

KIPP_API size_t kipp_registry_count(void);
KIPP_API const kipp_checkpoint *kipp_registry_at(size_t index);
KIPP_API const kipp_checkpoint *kipp_registry_find_id(const char *id);
KIPP_API const kipp_checkpoint *kipp_registry_find_source(const char *repository,
                                                          const char *revision);
KIPP_API const char *kipp_variant_name(kipp_variant v);

/* ---- models ----------------------------------------------------------- */

typedef struct kipp_model kipp_model;
typedef struct kipp_session kipp_session;

typedef enum kipp_backend_kind {
    KIPP_BACKEND_NONE = 0, /* validate + tokenizer only: info, tokenize */
    KIPP_BACKEND_REF,      /* scalar oracle */
    KIPP_BACKEND_CPU,      /* SIMD + threads */
    KIPP_BACKEND_CUDA,
} kipp_backend_kind;

/* Kernel tier of the cpu backend. AUTO (the default) picks the best exact
 * tier the processor and OS support: avx512 (AVX-512 F/BW/VL/DQ: FP32
 * activations, FMA), else avx2 (with FMA and F16C), else generic. These
 * keep DESIGN section 7's contract: the oracle's argmax at every position.
 * AVX512BF16 is opt-in only, never picked by AUTO: it rounds matmul
 * activations and decoded quantized weights to BF16 (vdpbf16ps; needs
 * AVX512_BF16 too) for 1.1-2x faster prefill, at logits further from the
 * oracle (NMSE 2-6e-5, up to 1.4e-4 with a Q8_0 KV cache; the exact
 * tiers: under 5e-7), which can flip the argmax where the top two logits
 * nearly tie
 * (docs/ARCHITECTURE.md, "Two AVX-512 tiers"). AMX is opt-in on the same
 * terms: avx512bf16's numerics but for the BF16 matmul's accumulation, which
 * runs on AMX tiles (TDPBF16PS; needs AMX-TILE and AMX-BF16, the OS's tile
 * state and its per-process permission; docs/ARCHITECTURE.md, "The AMX
 * tier"). AVX2I8 is opt-in too, for quantized models on AVX2 processors:
 * avx2 but for the quantized-weight matmuls, which quantize activations
 * to 8 bits per 32 values and use integer dot products as llama.cpp does
 * (decode of 4-bit weights no longer bound by decoding them to FP32; logits
 * off the oracle's by the activations' quantization; docs/ARCHITECTURE.md,
 * "The avx2i8 tier"). AVX512I8 is the same for AVX-512 processors with
 * AVX512_VNNI: avx512 but for the quantized-weight matmuls, which are
 * avx2i8's (docs/ARCHITECTURE.md, "The avx512i8 tier"). New tiers come
 * last in the enum so the older values
 * keep their numbers. Asking for a tier this processor
 * cannot run fails kipp_model_open with KIPP_E_BACKEND, never falls back
 * silently. Off x86-64 only AUTO and GENERIC exist. */
typedef enum kipp_cpu_isa {
    KIPP_CPU_ISA_AUTO = 0,
    KIPP_CPU_ISA_GENERIC, /* portable scalar C: the kernels' reference */
    KIPP_CPU_ISA_AVX2,
    KIPP_CPU_ISA_AVX512,
    KIPP_CPU_ISA_AVX512BF16, /* opt-in: BF16 activations (see above) */
    KIPP_CPU_ISA_AMX,        /* opt-in: BF16 activations, AMX tile matmuls */
    KIPP_CPU_ISA_AVX2I8,     /* opt-in: 8-bit activations in quantized matmuls */
    KIPP_CPU_ISA_AVX512I8,   /* opt-in: the same on AVX-512 (+ AVX512_VNNI) */
} kipp_cpu_isa;

/* "auto", "generic", "avx2", "avx512", "avx512bf16", "amx", "avx2i8",
 * "avx512i8" (NULL for values out of range). */
KIPP_API const char *kipp_cpu_isa_name(kipp_cpu_isa isa);
/* The inverse of kipp_cpu_isa_name; KIPP_E_ARGUMENT for any other name.
 * For hosts that take the tier as text (the CLI's KIPP_CPU_ISA). */
KIPP_API int kipp_cpu_isa_parse(const char *name, kipp_cpu_isa *out, kipp_error *err);

/* How the cpu backend's SIMD tiers prefetch weight rows in decode (one
 * token per session, where weights stream from memory once per step). The
 * results are the same bits either way; only the speed differs, and which
 * is faster depends on the processor's prefetchers (docs/CPU-JOURNAL.md,
 * "Stop 26"). AUTO: ROWS on AMD family 26 and later (Zen 5, where it
 * measured best), SEQ everywhere else (measured best on Zen 4).
 *   ROWS: each of 8 rows' next-tile line, into L1, as the rows are read.
 *   SEQ:  the next tiles' rows as one contiguous region, into L2, in
 *         address order, and fewer BF16 rows in flight. */
typedef enum kipp_cpu_decode_prefetch {
    KIPP_CPU_DECODE_PREFETCH_AUTO = 0,
    KIPP_CPU_DECODE_PREFETCH_ROWS,
    KIPP_CPU_DECODE_PREFETCH_SEQ,
} kipp_cpu_decode_prefetch;

/* "auto", "rows", "seq" (NULL for values out of range). */
KIPP_API const char *kipp_cpu_decode_prefetch_name(kipp_cpu_decode_prefetch pf);
/* What AUTO means on this processor (ROWS or SEQ); other values unchanged. */
KIPP_API kipp_cpu_decode_prefetch kipp_cpu_decode_prefetch_resolve(kipp_cpu_decode_prefetch pf);

/* The output head's weights at run time (kipp_model_options.head_quant). */
typedef enum kipp_head_quant {
    KIPP_HEAD_AS_STORED = 0, /* the file's BF16 head */
    KIPP_HEAD_Q8_0,          /* a Q8_0 copy made at open (the converter's encoder) */
} kipp_head_quant;

/* "bf16" (as stored), "q8_0"; NULL for values out of range. */
KIPP_API const char *kipp_head_quant_name(kipp_head_quant h);
KIPP_API int kipp_head_quant_parse(const char *name, kipp_head_quant *out, kipp_error *err);

/* Zero-initialise and set what you need: every field's zero is its
 * documented default (a NULL options pointer means all defaults). */
typedef struct kipp_model_options {
    kipp_backend_kind backend; /* default KIPP_BACKEND_NONE: no eval */
    int threads;               /* cpu backend; 0 = online cores */
    kipp_cpu_isa cpu_isa;      /* cpu backend kernel tier; 0 = AUTO */
    /* Size of the model's shared KV pool (per KV format in use), MiB.
     * 0 = room for one full context of the checkpoint, so any single session
     * fits alone. Sessions take 32-position blocks from it as they grow. */
    uint32_t kv_pool_mib;
    kipp_cpu_decode_prefetch cpu_decode_prefetch; /* cpu backend; 0 = AUTO */
    /* The output head's weights. 0 = as stored (BF16; the embedding when
     * tied). KIPP_HEAD_Q8_0 quantizes a copy to Q8_0 at open, opt-in: the
     * head is ~40 % of a Q8_0 model's bytes per token and more of a Q4
     * one's; docs/ARCHITECTURE.md "Quantized output head" gives its cost. */
    kipp_head_quant head_quant;
    /* Nonzero: the cpu backend times each step of the forward pass
     * (kipp_model_profile below); 0 = off (no clock reads). */
    int profile;
} kipp_model_options;

KIPP_API int kipp_model_open(const char *path, const kipp_model_options *options,
                             kipp_model **out, kipp_error *err);
KIPP_API void kipp_model_close(kipp_model *model);
KIPP_API const kipp_checkpoint *kipp_model_checkpoint(const kipp_model *model);
KIPP_API const char *kipp_model_quant_scheme(const kipp_model *model);
/* The head the backend reads: "bf16" (as stored) or "q8_0" (head_quant). */
KIPP_API const char *kipp_model_head_quant(const kipp_model *model);
KIPP_API const char *kipp_backend_name(kipp_backend_kind kind);
/* NULL for base entries. */
KIPP_API const char *kipp_model_chat_template(const kipp_model *model);

/* Where the evaluations' time went, per step of the forward pass, summed
 * since the model was opened with options.profile set (the cpu backend;
 * others keep none). seconds is wall time: the pool's threads work on a
 * step together, so a step's share of the time is seconds / total. flops
 * counts 2 per multiply-add of the step's matmuls or attention (0 for
 * steps that have none), so flops / seconds is its rate on all threads. */
typedef struct kipp_profile_step {
    const char *name; /* static: "embed", "norm", "qkv", "qk_rope_store",
                         "attention", "attn_output", "gate_up", "down", "head" */
    uint64_t calls;
    double seconds;
    double flops;
} kipp_profile_step;
#define KIPP_PROFILE_STEPS 9
/* Copies up to cap steps (in forward-pass order) into out (none when out
 * is NULL) and returns how many the model has: KIPP_PROFILE_STEPS when
 * profiling, else 0. Safe
 * beside a running kipp_eval (it waits for the evaluation to finish). */
KIPP_API size_t kipp_model_profile(const kipp_model *model, kipp_profile_step *out, size_t cap);

/* ---- tokenizer -------------------------------------------------------- */

/* Encode UTF-8 text to token ids (no BOS, added tokens recognised).
 * *ids is malloc'd; free() it. Invalid UTF-8: see docs/ARCHITECTURE.md. */
KIPP_API int kipp_tokenize(const kipp_model *model, const char *text, size_t length,
                           int32_t **ids, size_t *n_ids, kipp_error *err);
/* Decode ids to bytes (byte-exact; may be invalid UTF-8 mid-sequence).
 * *text is malloc'd and NUL-terminated; free() it. */
KIPP_API int kipp_detokenize(const kipp_model *model, const int32_t *ids, size_t n_ids,
                             char **text, size_t *length, kipp_error *err);

/* Streaming decoder: holds back incomplete UTF-8 sequences. */
typedef struct kipp_detok_stream kipp_detok_stream;
KIPP_API int kipp_detok_stream_create(const kipp_model *model, kipp_detok_stream **out,
                                      kipp_error *err);
/* Appends complete UTF-8 produced by `id` to out (up to out_cap bytes,
 * returns bytes written in *out_len). */
KIPP_API int kipp_detok_stream_push(kipp_detok_stream *s, int32_t id, char *out,
                                    size_t out_cap, size_t *out_len, kipp_error *err);
/* Flush whatever is held (incomplete bytes are emitted as U+FFFD). */
KIPP_API int kipp_detok_stream_flush(kipp_detok_stream *s, char *out, size_t out_cap,
                                     size_t *out_len);
KIPP_API void kipp_detok_stream_destroy(kipp_detok_stream *s);

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

KIPP_API int kipp_session_create(kipp_model *model, const kipp_session_options *options,
                                 kipp_session **out, kipp_error *err);
KIPP_API void kipp_session_destroy(kipp_session *session);
KIPP_API uint32_t kipp_session_length(const kipp_session *session);
KIPP_API uint32_t kipp_session_capacity(const kipp_session *session);
KIPP_API void kipp_session_reset(kipp_session *session);
/* Truncation into a block shared with other sessions (an adopted or
 * published block) continues in a private copy of its first positions, so
 * shared state is never written; that copy needs one free block
 * (KIPP_E_POOL_EXHAUSTED otherwise, session unchanged). */
KIPP_API int kipp_session_truncate(kipp_session *session, uint32_t length,
                                   kipp_error *err);

/* ---- shared prefixes (the KV pool) ------------------------------------- */

/* Adopts into an EMPTY session the longest published prefix of
 * tokens[0..n) instead of evaluating it: whole published blocks are shared,
 * and up to 31 further positions (a published partial block, or the first
 * positions of a published block the ids leave early) are copied into a
 * private block when one is available. The session's length becomes
 * *n_adopted (maybe 0). The caller evaluates tokens[*n_adopted..n) next; a
 * caller that needs the logits of the last token passes n - 1 so that one
 * token is left. */
KIPP_API int kipp_session_match_prefix(kipp_session *session, const int32_t *tokens, size_t n,
                                       uint32_t *n_adopted, kipp_error *err);
/* Publishes every full block of the session, and its partial last block,
 * so that later sessions can adopt them (kipp_session_match_prefix).
 * Published blocks are immutable: the session's next eval continues in a
 * private copy of a published partial block (one more block from the
 * pool). Published blocks stay in the pool after the session is gone,
 * until evicted least-recently-used. */
KIPP_API int kipp_session_publish(kipp_session *session, kipp_error *err);
/* Positions of tokens[0..n) a new session would adopt now (no side effect). */
KIPP_API uint32_t kipp_pool_match_length(kipp_model *model, kipp_kv_quant kv_quant,
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
KIPP_API int kipp_pool_stats_get(kipp_model *model, kipp_kv_quant kv_quant, kipp_pool_stats *out,
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

KIPP_API int kipp_eval(kipp_model *model, kipp_eval_item *items, size_t n_items,
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
KIPP_API kipp_sampling kipp_sampling_default(void);

typedef struct kipp_sampler kipp_sampler;
KIPP_API int kipp_sampler_create(const kipp_sampling *params, kipp_sampler **out,
                                 kipp_error *err);
KIPP_API void kipp_sampler_destroy(kipp_sampler *s);
/* Records an accepted token into the penalty window. The caller decides
 * whether prompt tokens count: `kipp generate` feeds them (llama.cpp
 * style), the server does not (OpenAI counts the completion only). */
KIPP_API void kipp_sampler_accept(kipp_sampler *s, int32_t token);
/* Picks one token from logits[KIPP_VOCAB_SIZE]; logits are used as scratch
 * and may be modified. -1 when no token can be picked: every logit is -inf
 * (banned by logit_bias or a grammar mask) or NaN. */
KIPP_API int32_t kipp_sampler_sample(kipp_sampler *s, float *logits);
/* Whether logits[KIPP_VOCAB_SIZE] hold a NaN: what tells a -1 from the
 * sampler caused by a model (a NaN weight in a corrupt artifact makes every
 * logit NaN) from one caused by bans. KIPP_NAN_LOGITS is the message the
 * CLI and the server give then. */
KIPP_API bool kipp_logits_have_nan(const float *logits);
#define KIPP_NAN_LOGITS \
    "the model's logits are NaN (not a number), so there is nothing to sample: the artifact's " \
    "weights are likely corrupt"

/* ---- constrained decoding ------------------------------------------------ */

/* A grammar: the set of documents a generation may produce, compiled from a
 * JSON Schema (subset and bounds: docs/ARCHITECTURE.md). A state follows
 * one generation through it: before each sample, kipp_grammar_mask sets the
 * logits of every token that cannot continue a valid document to -INFINITY
 * (the checkpoint's stop tokens stay allowed exactly when the document is
 * complete); after it, kipp_grammar_accept advances by the chosen token.
 * Output is compact JSON (no whitespace). A grammar and its states belong
 * to one thread at a time (they share a mask cache); the model must outlive
 * them. schema NULL: any JSON object (response_format json_object).
 * Unsupported keywords fail with KIPP_E_UNSUPPORTED naming the keyword. */
typedef struct kipp_grammar kipp_grammar;
typedef struct kipp_grammar_state kipp_grammar_state;

KIPP_API int kipp_grammar_from_json_schema(const kipp_model *model, const char *schema, size_t length,
                                           kipp_grammar **out, kipp_error *err);
KIPP_API void kipp_grammar_destroy(kipp_grammar *g);
KIPP_API int kipp_grammar_state_create(kipp_grammar *g, kipp_grammar_state **out, kipp_error *err);
KIPP_API void kipp_grammar_state_destroy(kipp_grammar_state *s);
/* Masks logits[KIPP_VOCAB_SIZE] in place; returns the number of allowed
 * tokens (never 0: a state always has a continuation or is complete). */
KIPP_API size_t kipp_grammar_mask(kipp_grammar_state *s, float *logits);
KIPP_API bool kipp_grammar_allows(kipp_grammar_state *s, int32_t token);
/* Advances by token; KIPP_E_ARGUMENT (state unchanged) when it is not allowed. */
KIPP_API int kipp_grammar_accept(kipp_grammar_state *s, int32_t token, kipp_error *err);
/* The bytes so far form a complete document. */
KIPP_API bool kipp_grammar_complete(const kipp_grammar_state *s);

/* For speculative decoding, which must check drafted tokens against exactly
 * the distribution plain sampling draws from. Writes into
 * probs[KIPP_VOCAB_SIZE] the distribution kipp_sampler_sample would draw
 * from for these logits (penalties, bias, temperature, top-k, top-p, min-p
 * applied, renormalised; 0 elsewhere); temperature 0 gives a one-hot at the
 * greedy pick. Returns the most probable token, -1 when every token is
 * banned. logits are scratch. Consumes no randomness. */
KIPP_API int32_t kipp_sampler_probs(kipp_sampler *s, float *logits, float *probs);
/* The next uniform number in [0, 1) from the sampler's seeded generator. */
KIPP_API double kipp_sampler_uniform(kipp_sampler *s);
/* Draws a token with probability proportional to weights[KIPP_VOCAB_SIZE]
 * (entries <= 0 never win) from the sampler's generator; -1 if all are 0. */
KIPP_API int32_t kipp_sampler_draw(kipp_sampler *s, const float *weights);

/* ---- speculative decoding (src/core/spec.c) ------------------------------
 *
 * A drafter proposes tokens to follow the context; the target evaluates the
 * pending token and the drafts in ONE multi-row kipp_eval; kipp_spec_verify
 * keeps the drafts the target agrees with and rolls the session back over
 * the rest (kipp_session_truncate). Greedy output equals plain greedy
 * decoding token for token; sampled output has exactly the target's
 * distribution (accept a draft x with probability min(1, p(x)/q(x)), else
 * draw from the normalised max(0, p - q)). A step is:
 *
 *   kipp_spec_draft(sp, pending, max, toks, &n)   toks = pending, drafts...
 *   kipp_eval(target, {session, toks, n, n, rows})
 *   kipp_spec_verify(sp, sampler, session, rows, out, &n_out)
 *
 * out[0..n_out) are the next tokens (accepted drafts, then the target's own
 * token); every one was passed to kipp_sampler_accept; the last is the new
 * pending token, not yet in the session. One kipp_spec per sequence. */

#define KIPP_SPEC_MAX_DRAFT 16

typedef enum kipp_spec_mode {
    KIPP_SPEC_OFF = 0,
    KIPP_SPEC_LOOKUP, /* n-gram match over the context (prompt + generated) */
    KIPP_SPEC_DRAFT,  /* a draft model with the target's tokenizer */
} kipp_spec_mode;

typedef struct kipp_spec_options {
    kipp_spec_mode mode;
    uint32_t max_draft;       /* K, 1..KIPP_SPEC_MAX_DRAFT; 0 = 8 (lookup), 4 (draft) */
    bool gate;                /* suspend drafting while it does not pay */
    kipp_model *draft_model;  /* KIPP_SPEC_DRAFT; must outlive the kipp_spec */
    uint32_t capacity;        /* draft session positions (the target's); 0 = draft context */
    float draft_temperature;  /* temperature of q; 0 = the target's */
} kipp_spec_options;

typedef struct kipp_spec_stats {
    uint64_t steps;    /* verifications (target evals) */
    uint64_t tokens;   /* tokens they produced; tokens - steps = target evals saved */
    uint64_t drafted;  /* drafted tokens verified */
    uint64_t accepted; /* of which accepted */
    uint64_t gated;    /* steps the gate kept drafting off */
} kipp_spec_stats;

typedef struct kipp_spec kipp_spec;

/* KIPP_OK when draft can draft for target: identical token table, token
 * types and merges. Otherwise KIPP_E_REGISTRY with a message naming the
 * first difference. */
KIPP_API int kipp_spec_check_draft(const kipp_model *target, const kipp_model *draft, kipp_error *err);
/* sampling: the target's (q uses its filters and bias, not its penalties). */
KIPP_API int kipp_spec_create(kipp_model *target, const kipp_spec_options *options,
                              const kipp_sampling *sampling, kipp_spec **out, kipp_error *err);
KIPP_API void kipp_spec_destroy(kipp_spec *sp);
/* The tokens the target session holds (prompt, or a re-rendered chat). The
 * drafter keeps the longest common prefix of what it had. */
KIPP_API int kipp_spec_set_context(kipp_spec *sp, const int32_t *tokens, size_t n, kipp_error *err);
/* Writes pending then up to max drafts (max <= K) to toks[1 + K]; *n is
 * 1 + drafts (1 = no draft: a plain decode step). */
KIPP_API int kipp_spec_draft(kipp_spec *sp, int32_t pending, uint32_t max, int32_t *toks, uint32_t *n,
                             kipp_error *err);
/* kipp_spec_draft for n sequences at once (a server's batch): sequence i
 * drafts after pending[i], at most max[i], into toks[i] (1 + K entries),
 * n_toks[i] = 1 + its drafts. The draft-model evals of all sequences run as
 * one batched kipp_eval per drafted position, so the draft model's weights
 * are read once per position for the whole batch; each sequence's drafts
 * are the ones it would draft alone. Sequences must be distinct and the
 * ones that draft with a model must share it (KIPP_E_ARGUMENT otherwise). */
KIPP_API int kipp_spec_draft_batch(kipp_spec *const *sps, size_t n, const int32_t *pending,
                                   const uint32_t *max, int32_t *const *toks, uint32_t *n_toks,
                                   kipp_error *err);
/* rows[n][KIPP_VOCAB_SIZE]: the target's logits for the n tokens of the last
 * kipp_spec_draft, just appended to session. rows are not modified. */
KIPP_API int kipp_spec_verify(kipp_spec *sp, kipp_sampler *sampler, kipp_session *session,
                              const float *rows, int32_t *out, uint32_t *n_out, kipp_error *err);
KIPP_API void kipp_spec_get_stats(const kipp_spec *sp, kipp_spec_stats *out);
KIPP_API const char *kipp_spec_mode_name(kipp_spec_mode mode);

/* ---- chat rendering ----------------------------------------------------- */

/* One call of a function by an assistant turn: name and arguments as the
 * JSON text the template prints (OpenAI sends arguments as a string). */
typedef struct kipp_chat_tool_call {
    const char *name;
    size_t name_length;
    const char *arguments;
    size_t arguments_length;
} kipp_chat_tool_call;

/* One chat message. role is "system", "user", "assistant" or "tool";
 * content is UTF-8 of content_length bytes. reasoning_content (NULL =
 * absent) is an assistant turn's thinking, as in the Qwen3 template;
 * tool_calls are the functions an assistant turn called. A "tool" message
 * is a function's result. */
typedef struct kipp_chat_message {
    const char *role;
    const char *content;
    size_t content_length;
    const char *reasoning_content;
    size_t reasoning_length;
    const kipp_chat_tool_call *tool_calls;
    size_t n_tool_calls;
} kipp_chat_message;

/* Renders messages as the checkpoint's ChatML prompt, byte-identical to its
 * Jinja chat template (instruct entries: the Qwen3 hybrid-thinking
 * template; thinking-2507: Qwen3-*-Thinking-2507's).
 * add_generation_prompt appends the assistant header; for the hybrid
 * template enable_thinking=false then also appends the empty think block;
 * thinking-2507 always opens a think block ("<|im_start|>assistant\n<think>\n")
 * and ignores enable_thinking, as its template does. Base entries and
 * variants without a native renderer (instruct-2507) give
 * KIPP_E_UNSUPPORTED. *text is malloc'd and
 * NUL-terminated; free() it. */
KIPP_API int kipp_chat_render(const kipp_model *model, const kipp_chat_message *messages,
                              size_t n_messages, bool add_generation_prompt, bool enable_thinking,
                              char **text, size_t *length, kipp_error *err);

/* The same with function definitions offered to the model: tools[i] is
 * the i-th tool object exactly as the template's `tojson` prints it
 * (kipp_chat_tojson in the server makes it from request JSON). */
typedef struct kipp_chat_tool {
    const char *json;
    size_t length;
} kipp_chat_tool;

KIPP_API int kipp_chat_render_tools(const kipp_model *model, const kipp_chat_message *messages,
                                    size_t n_messages, const kipp_chat_tool *tools, size_t n_tools,
                                    bool add_generation_prompt, bool enable_thinking, char **text,
                                    size_t *length, kipp_error *err);

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

KIPP_API int kipp_inspect_open(const char *path, kipp_inspect **out, kipp_error *err);
KIPP_API void kipp_inspect_close(kipp_inspect *ins);
KIPP_API const kipp_checkpoint *kipp_inspect_checkpoint(const kipp_inspect *ins);
KIPP_API const char *kipp_inspect_quant_scheme(const kipp_inspect *ins);
KIPP_API uint64_t kipp_inspect_file_size(const kipp_inspect *ins);
KIPP_API uint64_t kipp_inspect_data_offset(const kipp_inspect *ins);
KIPP_API size_t kipp_inspect_metadata_count(const kipp_inspect *ins);
/* Metadata entry i as text (each NUL-terminated, truncated to its cap):
 * key, type ("u32", "string", "string[151936]") and value; strings are
 * quoted and escaped, arrays summarised as their first few elements. */
KIPP_API int kipp_inspect_metadata(const kipp_inspect *ins, size_t i, char *key, size_t key_cap,
                                   char *type, size_t type_cap, char *value, size_t value_cap);
KIPP_API size_t kipp_inspect_tensor_count(const kipp_inspect *ins);
KIPP_API int kipp_inspect_tensor(const kipp_inspect *ins, size_t i, kipp_tensor_info *out);

#ifdef __cplusplus
}
#endif
#endif
