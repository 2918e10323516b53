/* Native Qwen2 byte-level BPE (DESIGN §4), loaded from artifact metadata.
 * Contract between core/model.c and the tokenizer implementation. */
#ifndef KIPP_TOKENIZER_H
#define KIPP_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "core/artifact.h"
#include "kipp.h"

typedef struct kipp_tokenizer kipp_tokenizer;

/* Builds the tokenizer from tokenizer.ggml.tokens / token_type / merges. */
int kipp_tokenizer_create(const kipp_artifact *artifact, kipp_tokenizer **out,
                          kipp_error *err);
/* The same from plain arrays (kipp_tokenizer_create is a thin adapter; tests
 * build from tokenizer.json directly): tokens[n_tokens] in GPT-2
 * byte-to-unicode form (added tokens as their literal text), types[n_tokens]
 * (1 normal, 3 control, 4 user-defined, 5 unused), merges[n_merges] as
 * "left right" in rank order. Everything is copied. */
int kipp_tokenizer_create_from_arrays(const gguf_str *tokens, const int32_t *types,
                                      size_t n_tokens, const gguf_str *merges,
                                      size_t n_merges, kipp_tokenizer **out,
                                      kipp_error *err);
void kipp_tokenizer_destroy(kipp_tokenizer *t);

/* ids is malloc'd (caller frees). */
int kipp_tokenizer_encode(const kipp_tokenizer *t, const char *text,
                          size_t length, int32_t **ids, size_t *n_ids,
                          kipp_error *err);
/* The raw bytes a token stands for (GPT-2 byte mapping undone; added tokens
 * are their literal text). NULL for an id out of range. */
const uint8_t *kipp_tokenizer_token_bytes(const kipp_tokenizer *t, int32_t id,
                                          size_t *length);

#endif
