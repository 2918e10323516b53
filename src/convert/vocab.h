/* The tokenizer metadata of an artifact, built from tokenizer.json and
 * tokenizer_config.json the way upstream (transformers, then llama.cpp's
 * converter) assembles them:
 *   - model.vocab gives the regular tokens by id (type 1, normal);
 *   - added tokens come from tokenizer.json "added_tokens", then
 *     tokenizer_config.json "added_tokens_decoder" is merged over them by id
 *     (its content/special win); special -> type 3 (control), otherwise
 *     type 4 (user-defined);
 *   - every id below 151936 with no token becomes "[PAD<id>]", type 5;
 *   - model.merges in rank order, as "left right" (tokenizer.json stores
 *     either "a b" strings or ["a", "b"] pairs; both are accepted).
 * Strings point into the parsed documents or into an owned arena. */
#ifndef KIPP_CONVERT_VOCAB_H
#define KIPP_CONVERT_VOCAB_H

#include <stddef.h>
#include <stdint.h>

#include "core/json.h"
#include "kipp.h"

enum { KIPP_TOKEN_NORMAL = 1, KIPP_TOKEN_CONTROL = 3, KIPP_TOKEN_USER_DEFINED = 4,
       KIPP_TOKEN_UNUSED = 5 };

typedef struct kipp_vocab {
    const char **tokens;   /* [KIPP_VOCAB_SIZE] */
    size_t *token_lens;    /* [KIPP_VOCAB_SIZE] */
    int32_t *types;        /* [KIPP_VOCAB_SIZE] */
    const char **merges;   /* [n_merges] */
    size_t *merge_lens;
    size_t n_merges;
    const char *chat_template; /* tokenizer_config.json chat_template, or NULL (the
                                * converter may point it at chat_template.jinja) */
    /* owned */
    json_doc *tokenizer_doc, *config_doc;
    char *arena;           /* joined merge pairs */
    char *pads;            /* "[PAD<id>]" names */
} kipp_vocab;

/* Parses both texts (the documents copy what they keep). */
int kipp_vocab_build(kipp_vocab *v, const char *tokenizer_json, size_t tokenizer_len,
                     const char *tokenizer_config, size_t config_len, kipp_error *err);
void kipp_vocab_free(kipp_vocab *v);

#endif
