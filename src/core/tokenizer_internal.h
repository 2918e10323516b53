/* Internals shared by the tokenizer's files: tokenizer.c (building the
 * tables from token/merge arrays, encoding: added tokens, NFC, BPE),
 * tokenizer_split.c (the pre-tokenizer split pattern) and
 * tokenizer_decode.c (detokenize, streaming decoder). */
#ifndef KIPP_TOKENIZER_INTERNAL_H
#define KIPP_TOKENIZER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/tokenizer.h"

/* Token types (tokenizer.ggml.token_type, docs/CONTRACT-ARTIFACT.md). */
enum {
    KIPP_TOKEN_NORMAL = 1,
    KIPP_TOKEN_CONTROL = 3,      /* added + special */
    KIPP_TOKEN_USER_DEFINED = 4, /* added, not special */
    KIPP_TOKEN_UNUSED = 5,       /* [PAD<id>] */
};

/* (left id, right id) -> merge rank and merged id; open addressing. */
typedef struct kipp_pair_slot {
    uint64_t key; /* (uint64)left << 32 | right; UINT64_MAX = empty */
    uint32_t rank;
    int32_t merged;
} kipp_pair_slot;

/* raw token bytes -> id (normal tokens only); open addressing. The first
 * 8 bytes live in the slot, so most lookups (pieces of <= 8 bytes) never
 * touch the bytes pool. */
typedef struct kipp_vocab_slot {
    uint64_t prefix; /* first 8 raw bytes, zero-padded */
    uint32_t length;
    int32_t id;      /* -1 = empty */
} kipp_vocab_slot;

typedef struct kipp_added_token {
    const uint8_t *text; /* literal bytes (into the bytes pool) */
    uint32_t length;
    int32_t id;
} kipp_added_token;

struct kipp_tokenizer {
    size_t n_tokens;
    uint8_t *types;        /* [n_tokens] */
    uint8_t *bytes_pool;   /* raw bytes of every token, concatenated */
    uint32_t *bytes_off;   /* [n_tokens + 1] offsets into bytes_pool */
    uint32_t max_token_bytes;
    /* BPE(raw bytes of token) == [token]: a whole pre-token piece that is
     * such a token needs no merging. [n_tokens] */
    uint8_t *self_merging;
    int32_t byte_id[256];  /* token of each single byte */

    kipp_vocab_slot *vocab;
    uint32_t vocab_mask;
    kipp_pair_slot *pairs;
    uint32_t pair_mask;

    /* added tokens sorted by (first byte, length descending) so the first
     * hit at a position is the longest; added_start[b] indexes the first
     * token starting with byte b (added_start[256] = n_added). */
    kipp_added_token *added;
    size_t n_added;
    uint32_t added_start[257];
};

/* Growable scratch reused across the pieces of one encode call. */
typedef struct kipp_bpe_scratch {
    void *sym;      /* bpe symbols */
    void *heap;     /* merge candidates */
    size_t sym_cap;
    size_t heap_cap;
    /* Direct-mapped cache in front of the pair table (which is megabytes,
     * so every lookup there is a cache miss): [KIPP_PAIR_CACHE] entries,
     * allocated on first use; NULL when allocation failed (no cache). */
    kipp_pair_slot *pair_cache;
    bool pair_cache_tried;
} kipp_bpe_scratch;

#define KIPP_PAIR_CACHE 16384

void kipp_bpe_scratch_free(kipp_bpe_scratch *s);

/* BPE over raw bytes s[0..n) (n >= 1): appends the ids to out[*n_out..].
 * out must have room for n more ids. Returns false on allocation failure. */
bool kipp_bpe_encode(const kipp_tokenizer *t, const uint8_t *s, size_t n,
                     kipp_bpe_scratch *scratch, int32_t *out, size_t *n_out);

/* The pre-tokenizer split pattern (DESIGN §4): end offset of the piece
 * starting at p (p < n) in the well-formed UTF-8 s[0..n). Every position
 * starts a non-empty piece, so the pieces tile the text. */
size_t kipp_pretok_next(const uint8_t *s, size_t n, size_t p);

#endif
