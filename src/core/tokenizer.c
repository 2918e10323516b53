/* Native Qwen2 byte-level BPE (DESIGN §4): building the tables from the
 * artifact's token/merge arrays, and encoding.
 *
 * Encoding, in the order upstream (Hugging Face tokenizers, transformers.js)
 * applies it:
 *   0. invalid UTF-8 is replaced by U+FFFD (WHATWG decoder, as TextDecoder
 *      does) -- upstream tokenizers only ever see valid strings;
 *   1. the 26 added tokens (special and not) are matched on the raw text,
 *      leftmost-longest, and split the text into sections;
 *   2. each section is NFC-normalized;
 *   3. split into pieces by the pre-tokenizer pattern (tokenizer_split.c);
 *   4. each piece's bytes go through BPE by merge rank, starting from one
 *      symbol per byte (the GPT-2 byte-to-unicode mapping is undone once at
 *      load time, so everything here works on raw bytes and ids).
 * No BOS is ever added.
 *
 * Speed (all state is per call, so one tokenizer serves many threads):
 * a piece that is itself a vocabulary token which BPE reproduces from its
 * own bytes (checked for every token at load: `self_merging`) costs one hash
 * lookup; other pieces of up to 64 bytes are cached per call after their
 * first BPE; BPE itself is a heap of candidate merges over a linked list of
 * symbols, O(n log n) in the piece length, with a small direct-mapped cache
 * in front of the multi-megabyte pair table. */
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/tokenizer_internal.h"
#include "core/unicode.h"

/* ---- hashing ------------------------------------------------------------ */

static inline uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

static uint64_t hash_bytes(const uint8_t *s, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    uint64_t tail = 0;
    for (size_t k = 0; i < n; i++, k++) tail |= (uint64_t)s[i] << (8 * k);
    return mix64(h ^ tail);
}

static uint32_t table_size_for(size_t n) {
    uint32_t cap = 1024;
    while (cap < n + n / 2 + 1) cap *= 2; /* load factor <= 2/3 */
    return cap;
}

static inline const uint8_t *tok_bytes(const kipp_tokenizer *t, int32_t id, size_t *len) {
    *len = t->bytes_off[id + 1] - t->bytes_off[id];
    return t->bytes_pool + t->bytes_off[id];
}

static inline uint64_t prefix8(const uint8_t *s, size_t n) {
    uint64_t p = 0;
    memcpy(&p, s, n < 8 ? n : 8);
    return p;
}

/* Normal token whose raw bytes are s[0..n), or -1. */
static int32_t vocab_find(const kipp_tokenizer *t, const uint8_t *s, size_t n) {
    uint64_t h = hash_bytes(s, n), p = prefix8(s, n);
    for (uint32_t i = (uint32_t)h & t->vocab_mask;; i = (i + 1) & t->vocab_mask) {
        const kipp_vocab_slot *slot = &t->vocab[i];
        if (slot->id < 0) return -1;
        if (slot->prefix != p || slot->length != n) continue;
        if (n <= 8) return slot->id;
        size_t len;
        const uint8_t *b = tok_bytes(t, slot->id, &len);
        if (memcmp(b + 8, s + 8, n - 8) == 0) return slot->id;
    }
}

static void vocab_insert(kipp_tokenizer *t, int32_t id) {
    size_t n;
    const uint8_t *s = tok_bytes(t, id, &n);
    if (vocab_find(t, s, n) >= 0) return; /* duplicate bytes: lowest id wins */
    uint32_t i = (uint32_t)hash_bytes(s, n) & t->vocab_mask;
    while (t->vocab[i].id >= 0) i = (i + 1) & t->vocab_mask;
    t->vocab[i].prefix = prefix8(s, n);
    t->vocab[i].length = (uint32_t)n;
    t->vocab[i].id = id;
}

static inline const kipp_pair_slot *pair_find(const kipp_tokenizer *t, int32_t a, int32_t b) {
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    for (uint32_t i = (uint32_t)mix64(key) & t->pair_mask;; i = (i + 1) & t->pair_mask) {
        const kipp_pair_slot *slot = &t->pairs[i];
        if (slot->key == key) return slot;
        if (slot->key == UINT64_MAX) return NULL;
    }
}

/* ---- GPT-2 byte-to-unicode -------------------------------------------- */

/* The printable bytes '!'..'~', 0xA1..0xAC, 0xAE..0xFF stand for
 * themselves; the other 68 bytes, in increasing order, are mapped to
 * U+0100, U+0101, ... so every byte is a visible character. */
static void byte_level_inverse(int16_t inv[324]) {
    for (int c = 0; c < 324; c++) inv[c] = -1;
    int next = 256;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        inv[printable ? b : next++] = (int16_t)b;
    }
}

/* Raw bytes of a byte-level string into out (capacity >= len); false if a
 * character is not in the mapping. */
static bool byte_level_decode(const int16_t inv[324], const uint8_t *s, size_t n,
                              uint8_t *out, size_t *out_len) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        bool ok;
        i += kipp_utf8_decode(s + i, n - i, &cp, &ok);
        if (!ok || cp >= 324 || inv[cp] < 0) return false;
        out[o++] = (uint8_t)inv[cp];
    }
    *out_len = o;
    return true;
}

/* ---- BPE ------------------------------------------------------------------ */

typedef struct bpe_sym {
    int32_t id;   /* -1 once merged into its left neighbour */
    int32_t prev; /* -1 at the start */
    int32_t next; /* -1 at the end */
} bpe_sym;

/* A candidate merge of symbol `pos` with its right neighbour, recorded
 * with both ids: it is still valid iff pos and its current right neighbour
 * still have exactly those ids (ids only ever grow into longer tokens, so
 * an id never comes back). Ordered by (rank, pos): lowest rank first,
 * leftmost first among equal ranks, as upstream. 16 bytes. */
typedef struct bpe_cand {
    uint64_t key; /* rank << 32 | pos */
    int32_t left_id;
    int32_t right_id;
} bpe_cand;

void kipp_bpe_scratch_free(kipp_bpe_scratch *s) {
    free(s->sym);
    free(s->heap);
    free(s->pair_cache);
    memset(s, 0, sizeof *s);
}

/* pair_find through the scratch's direct-mapped cache. Misses are cached
 * too (rank UINT32_MAX): most pairs in text have no merge. */
static inline const kipp_pair_slot *pair_lookup(const kipp_tokenizer *t, kipp_bpe_scratch *sc,
                                                int32_t a, int32_t b) {
    kipp_pair_slot *cache = sc->pair_cache;
    if (!cache) return pair_find(t, a, b);
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    kipp_pair_slot *e = &cache[(mix64(key) >> 17) & (KIPP_PAIR_CACHE - 1)];
    if (e->key != key) {
        const kipp_pair_slot *slot = pair_find(t, a, b);
        e->key = key;
        e->rank = slot ? slot->rank : UINT32_MAX;
        e->merged = slot ? slot->merged : -1;
    }
    return e->rank == UINT32_MAX ? NULL : e;
}

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        if (!kipp_mul_size(c, 2, &c)) return false;
    size_t bytes;
    if (!kipp_mul_size(c, elem, &bytes)) return false;
    void *q = realloc(*p, bytes);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

static void heap_push(bpe_cand *h, size_t *n, bpe_cand c) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (h[parent].key <= c.key) break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = c;
}

static bpe_cand heap_pop(bpe_cand *h, size_t *n) {
    bpe_cand top = h[0];
    bpe_cand last = h[--(*n)];
    size_t i = 0, m = *n;
    for (;;) {
        size_t l = 2 * i + 1;
        if (l >= m) break;
        size_t c = (l + 1 < m && h[l + 1].key < h[l].key) ? l + 1 : l;
        if (h[c].key >= last.key) break;
        h[i] = h[c];
        i = c;
    }
    if (m) h[i] = last;
    return top;
}

static inline void push_pair(const kipp_tokenizer *t, kipp_bpe_scratch *sc, const bpe_sym *sym,
                             int32_t pos, bpe_cand *heap, size_t *n_heap) {
    int32_t right = sym[pos].next;
    if (right < 0) return;
    const kipp_pair_slot *slot = pair_lookup(t, sc, sym[pos].id, sym[right].id);
    if (!slot) return;
    bpe_cand c = {(uint64_t)slot->rank << 32 | (uint32_t)pos, sym[pos].id, sym[right].id};
    heap_push(heap, n_heap, c);
}

bool kipp_bpe_encode(const kipp_tokenizer *t, const uint8_t *s, size_t n,
                     kipp_bpe_scratch *sc, int32_t *out, size_t *n_out) {
    if (n == 1) {
        out[(*n_out)++] = t->byte_id[s[0]];
        return true;
    }
    if (n > INT32_MAX / 4) return false;
    if (!sc->pair_cache_tried) {
        /* key UINT64_MAX never matches a real pair (ids < INT32_MAX) */
        sc->pair_cache_tried = true;
        sc->pair_cache = malloc(KIPP_PAIR_CACHE * sizeof *sc->pair_cache);
        if (sc->pair_cache)
            for (size_t i = 0; i < KIPP_PAIR_CACHE; i++) sc->pair_cache[i].key = UINT64_MAX;
    }
    /* Each merge pushes at most two candidates: n - 1 + 2 (n - 1). */
    if (!grow(&sc->sym, &sc->sym_cap, n, sizeof(bpe_sym)) ||
        !grow(&sc->heap, &sc->heap_cap, 3 * n, sizeof(bpe_cand)))
        return false;
    bpe_sym *sym = sc->sym;
    bpe_cand *heap = sc->heap;
    size_t n_heap = 0;
    for (size_t i = 0; i < n; i++) {
        sym[i].id = t->byte_id[s[i]];
        sym[i].prev = (int32_t)i - 1;
        sym[i].next = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    for (size_t i = 0; i + 1 < n; i++) push_pair(t, sc, sym, (int32_t)i, heap, &n_heap);
    while (n_heap) {
        bpe_cand c = heap_pop(heap, &n_heap);
        int32_t pos = (int32_t)(uint32_t)c.key;
        int32_t right = sym[pos].next;
        if (sym[pos].id != c.left_id || right < 0 || sym[right].id != c.right_id)
            continue; /* stale */
        sym[pos].id = pair_lookup(t, sc, c.left_id, c.right_id)->merged;
        int32_t after = sym[right].next;
        sym[pos].next = after;
        if (after >= 0) sym[after].prev = pos;
        sym[right].id = -1;
        if (sym[pos].prev >= 0) push_pair(t, sc, sym, sym[pos].prev, heap, &n_heap);
        push_pair(t, sc, sym, pos, heap, &n_heap);
    }
    /* merges keep the left index, so symbol 0 is always the head */
    for (int32_t i = 0; i >= 0; i = sym[i].next) out[(*n_out)++] = sym[i].id;
    return true;
}

/* ---- building ------------------------------------------------------------ */

void kipp_tokenizer_destroy(kipp_tokenizer *t) {
    if (!t) return;
    free(t->types);
    free(t->bytes_pool);
    free(t->bytes_off);
    free(t->self_merging);
    free(t->vocab);
    free(t->pairs);
    free(t->added);
    free(t);
}

static int cmp_added(const void *pa, const void *pb) {
    const kipp_added_token *a = pa, *b = pb;
    if (a->text[0] != b->text[0]) return a->text[0] < b->text[0] ? -1 : 1;
    if (a->length != b->length) return a->length > b->length ? -1 : 1;
    return a->id < b->id ? -1 : (a->id > b->id);
}

/* Splits merge "left right" and finds the ids of left, right and their
 * concatenation. */
static int parse_merge(kipp_tokenizer *t, const int16_t inv[324], gguf_str m, size_t rank,
                       uint8_t *buf, int32_t *ids, kipp_error *err) {
    const char *sp = m.len ? memchr(m.ptr, ' ', m.len) : NULL;
    if (!sp || sp == m.ptr || (uint64_t)(sp - m.ptr) + 1 >= m.len ||
        memchr(sp + 1, ' ', m.len - (uint64_t)(sp - m.ptr) - 1))
        return kipp_fail(err, KIPP_E_FORMAT, "tokenizer merge %zu is not \"left right\"", rank);
    size_t llen = (size_t)(sp - m.ptr), rlen = (size_t)m.len - llen - 1;
    size_t a, b;
    if (!byte_level_decode(inv, (const uint8_t *)m.ptr, llen, buf, &a) ||
        !byte_level_decode(inv, (const uint8_t *)sp + 1, rlen, buf + a, &b))
        return kipp_fail(err, KIPP_E_FORMAT, "tokenizer merge %zu is not in byte-level form",
                         rank);
    ids[0] = vocab_find(t, buf, a);
    ids[1] = vocab_find(t, buf + a, b);
    ids[2] = vocab_find(t, buf, a + b);
    if (ids[0] < 0 || ids[1] < 0 || ids[2] < 0)
        return kipp_fail(err, KIPP_E_FORMAT,
                         "tokenizer merge %zu (\"%.*s\") names a token not in the vocabulary",
                         rank, (int)(m.len < 200 ? m.len : 200), m.ptr);
    return KIPP_OK;
}

int kipp_tokenizer_create_from_arrays(const gguf_str *tokens, const int32_t *types,
                                      size_t n_tokens, const gguf_str *merges,
                                      size_t n_merges, kipp_tokenizer **out,
                                      kipp_error *err) {
    if (!tokens || !types || (!merges && n_merges) || !out)
        return kipp_fail(err, KIPP_E_ARGUMENT, "tokenizer: NULL argument");
    *out = NULL;
    if (n_tokens == 0 || n_tokens > INT32_MAX / 2 || n_merges > UINT32_MAX / 4)
        return kipp_fail(err, KIPP_E_FORMAT, "tokenizer: %zu tokens / %zu merges out of range",
                         n_tokens, n_merges);
    int16_t inv[324];
    byte_level_inverse(inv);
    kipp_tokenizer *t = kipp_calloc(1, sizeof *t, err);
    if (!t) return KIPP_E_MEMORY;
    int rc = KIPP_E_MEMORY;
    t->n_tokens = n_tokens;

    /* raw bytes of every token: byte-level tokens get at most as many bytes
     * as their string has, literal ones exactly as many */
    size_t pool = 0;
    for (size_t i = 0; i < n_tokens; i++) {
        if (tokens[i].len > UINT32_MAX || !kipp_add_size(pool, (size_t)tokens[i].len, &pool) ||
            pool > UINT32_MAX) {
            rc = kipp_fail(err, KIPP_E_FORMAT, "tokenizer: token strings too long");
            goto fail;
        }
    }
    t->types = kipp_malloc(n_tokens, err);
    t->bytes_pool = kipp_malloc(pool, err);
    t->bytes_off = kipp_calloc(n_tokens + 1, sizeof *t->bytes_off, err);
    t->self_merging = kipp_calloc(n_tokens, 1, err);
    if (!t->types || !t->bytes_pool || !t->bytes_off || !t->self_merging) goto fail;
    size_t off = 0, n_added = 0;
    for (size_t i = 0; i < n_tokens; i++) {
        int32_t ty = types[i];
        const uint8_t *s = (const uint8_t *)tokens[i].ptr;
        size_t len = (size_t)tokens[i].len;
        t->bytes_off[i] = (uint32_t)off;
        if (ty == KIPP_TOKEN_NORMAL) {
            size_t raw;
            if (len == 0 || !byte_level_decode(inv, s, len, t->bytes_pool + off, &raw)) {
                rc = kipp_fail(err, KIPP_E_FORMAT,
                               "tokenizer: token %zu is empty or not in byte-level form", i);
                goto fail;
            }
            off += raw;
        } else if (ty == KIPP_TOKEN_CONTROL || ty == KIPP_TOKEN_USER_DEFINED) {
            if (len == 0 || kipp_utf8_valid_prefix(s, len) != len) {
                rc = kipp_fail(err, KIPP_E_FORMAT,
                               "tokenizer: added token %zu is empty or not UTF-8", i);
                goto fail;
            }
            memcpy(t->bytes_pool + off, s, len);
            off += len;
            n_added++;
        } else if (ty != KIPP_TOKEN_UNUSED) {
            rc = kipp_fail(err, KIPP_E_FORMAT, "tokenizer: token %zu has unsupported type %d",
                           i, (int)ty);
            goto fail;
        }
        t->types[i] = (uint8_t)ty;
        size_t raw_len = off - t->bytes_off[i];
        if (raw_len > t->max_token_bytes) t->max_token_bytes = (uint32_t)raw_len;
    }
    t->bytes_off[n_tokens] = (uint32_t)off;

    /* vocabulary map and the single-byte tokens */
    uint32_t vcap = table_size_for(n_tokens);
    t->vocab = kipp_malloc((size_t)vcap * sizeof *t->vocab, err);
    if (!t->vocab) goto fail;
    for (uint32_t i = 0; i < vcap; i++) t->vocab[i].id = -1;
    t->vocab_mask = vcap - 1;
    for (size_t i = 0; i < n_tokens; i++)
        if (t->types[i] == KIPP_TOKEN_NORMAL) vocab_insert(t, (int32_t)i);
    for (int b = 0; b < 256; b++) {
        uint8_t byte = (uint8_t)b;
        t->byte_id[b] = vocab_find(t, &byte, 1);
        if (t->byte_id[b] < 0) {
            rc = kipp_fail(err, KIPP_E_FORMAT, "tokenizer: no token for byte 0x%02X", b);
            goto fail;
        }
    }

    /* merges: (left, right) -> (rank, merged); the first of duplicates wins */
    uint32_t pcap = table_size_for(n_merges);
    t->pairs = kipp_malloc((size_t)pcap * sizeof *t->pairs, err);
    if (!t->pairs) goto fail;
    for (uint32_t i = 0; i < pcap; i++) t->pairs[i].key = UINT64_MAX;
    t->pair_mask = pcap - 1;
    /* a byte-level string spends at most 2 bytes per raw byte, and a valid
     * merge's halves together spell one token */
    uint64_t max_merge = 4 * (uint64_t)t->max_token_bytes + 1;
    uint8_t *mbuf = kipp_malloc((size_t)max_merge + 8, err);
    if (!mbuf) goto fail;
    for (size_t r = 0; r < n_merges; r++) {
        if (merges[r].len > max_merge) {
            free(mbuf);
            rc = kipp_fail(err, KIPP_E_FORMAT, "tokenizer merge %zu is too long", r);
            goto fail;
        }
        int32_t ids[3] = {-1, -1, -1};
        rc = parse_merge(t, inv, merges[r], r, mbuf, ids, err);
        if (rc) {
            free(mbuf);
            goto fail;
        }
        uint64_t key = (uint64_t)(uint32_t)ids[0] << 32 | (uint32_t)ids[1];
        uint32_t i = (uint32_t)mix64(key) & t->pair_mask;
        while (t->pairs[i].key != UINT64_MAX && t->pairs[i].key != key) i = (i + 1) & t->pair_mask;
        if (t->pairs[i].key == key) continue;
        t->pairs[i].key = key;
        t->pairs[i].rank = (uint32_t)r;
        t->pairs[i].merged = ids[2];
    }
    free(mbuf);
    rc = KIPP_E_MEMORY;

    /* added tokens, for leftmost-longest matching */
    t->added = kipp_calloc(n_added ? n_added : 1, sizeof *t->added, err);
    if (!t->added) goto fail;
    for (size_t i = 0; i < n_tokens; i++) {
        if (t->types[i] != KIPP_TOKEN_CONTROL && t->types[i] != KIPP_TOKEN_USER_DEFINED) continue;
        kipp_added_token *a = &t->added[t->n_added++];
        size_t len;
        a->text = tok_bytes(t, (int32_t)i, &len);
        a->length = (uint32_t)len;
        a->id = (int32_t)i;
    }
    qsort(t->added, t->n_added, sizeof *t->added, cmp_added);
    for (int b = 0, k = 0; b <= 256; b++) {
        while ((size_t)k < t->n_added && t->added[k].text[0] < b) k++;
        t->added_start[b] = (uint32_t)k;
    }

    /* tokens that BPE reproduces from their own bytes */
    {
        kipp_bpe_scratch sc = {0};
        int32_t *ids = kipp_malloc(((size_t)t->max_token_bytes + 1) * sizeof *ids, err);
        if (!ids) goto fail;
        for (size_t i = 0; i < n_tokens; i++) {
            if (t->types[i] != KIPP_TOKEN_NORMAL) continue;
            size_t len, n_ids = 0;
            const uint8_t *s = tok_bytes(t, (int32_t)i, &len);
            if (!kipp_bpe_encode(t, s, len, &sc, ids, &n_ids)) {
                free(ids);
                kipp_bpe_scratch_free(&sc);
                goto fail;
            }
            t->self_merging[i] = (n_ids == 1 && ids[0] == (int32_t)i);
        }
        free(ids);
        kipp_bpe_scratch_free(&sc);
    }
    *out = t;
    return KIPP_OK;
fail:
    kipp_tokenizer_destroy(t);
    if (rc == KIPP_E_MEMORY && (!err || err->code != KIPP_E_MEMORY))
        kipp_fail(err, KIPP_E_MEMORY, "tokenizer: out of memory");
    return rc;
}

int kipp_tokenizer_create(const kipp_artifact *a, kipp_tokenizer **out, kipp_error *err) {
    if (!a || !out) return kipp_fail(err, KIPP_E_ARGUMENT, "tokenizer: NULL argument");
    *out = NULL;
    const gguf_kv *tk = a->tokens, *ty = a->token_types, *mg = a->merges;
    if (!tk || !ty || !mg || tk->type != GGUF_TYPE_ARRAY || tk->array_type != GGUF_TYPE_STRING ||
        ty->type != GGUF_TYPE_ARRAY || ty->array_type != GGUF_TYPE_INT32 ||
        mg->type != GGUF_TYPE_ARRAY || mg->array_type != GGUF_TYPE_STRING)
        return kipp_fail(err, KIPP_E_FORMAT, "tokenizer metadata missing or mistyped");
    if (ty->array_len != tk->array_len || tk->array_len == 0 || tk->array_len > INT32_MAX / 2 ||
        mg->array_len > UINT32_MAX / 4 || ty->array_bytes / 4 < ty->array_len)
        return kipp_fail(err, KIPP_E_FORMAT,
                         "tokenizer metadata: %llu tokens, %llu types, %llu merges",
                         (unsigned long long)tk->array_len, (unsigned long long)ty->array_len,
                         (unsigned long long)mg->array_len);
    size_t n = (size_t)tk->array_len, m = (size_t)mg->array_len;
    gguf_str *toks = kipp_calloc(n, sizeof *toks, err);
    gguf_str *merges = kipp_calloc(m ? m : 1, sizeof *merges, err);
    int32_t *types = kipp_calloc(n, sizeof *types, err);
    int rc = KIPP_E_MEMORY;
    if (!toks || !merges || !types) goto done;
    if (!kipp_gguf_array_strings(tk, toks) || (m && !kipp_gguf_array_strings(mg, merges))) {
        rc = kipp_fail(err, KIPP_E_FORMAT, "tokenizer metadata: unreadable string array");
        goto done;
    }
    memcpy(types, ty->array_data, n * sizeof *types); /* little-endian host (x86/arm) */
    rc = kipp_tokenizer_create_from_arrays(toks, types, n, merges, m, out, err);
done:
    free(toks);
    free(merges);
    free(types);
    return rc;
}

const uint8_t *kipp_tokenizer_token_bytes(const kipp_tokenizer *t, int32_t id, size_t *length) {
    if (!t || id < 0 || (size_t)id >= t->n_tokens) return NULL;
    size_t len;
    const uint8_t *b = tok_bytes(t, id, &len);
    if (length) *length = len;
    return b;
}

/* ---- encoding ------------------------------------------------------------- */

/* Per-call cache of pieces that BPE split into several tokens (words
 * repeat; BPE costs a dozen table lookups per piece). Entries point into
 * two arenas: the piece bytes and their ids. */
typedef struct piece_entry {
    uint64_t hash; /* 0 = empty */
    uint32_t bytes_off;
    uint32_t ids_off;
    uint32_t length;
    uint32_t n_ids;
} piece_entry;

#define PIECE_CACHE_MAX_LEN 64
#define PIECE_CACHE_MAX_ENTRIES (1u << 16)

typedef struct piece_cache {
    piece_entry *slots;
    uint32_t cap, count; /* cap: power of two; count <= cap / 2 */
    uint8_t *bytes;
    size_t n_bytes, cap_bytes;
    int32_t *ids;
    size_t n_ids, cap_ids;
} piece_cache;

typedef struct encoder {
    const kipp_tokenizer *t;
    int32_t *ids;
    size_t n_ids, cap_ids;
    kipp_bpe_scratch bpe;
    kipp_nfc_scratch nfc;
    uint8_t *norm; /* NFC output */
    size_t norm_cap;
    piece_cache cache;
} encoder;

static bool reserve_ids(encoder *e, size_t more) {
    size_t need;
    if (!kipp_add_size(e->n_ids, more, &need)) return false;
    return grow((void **)&e->ids, &e->cap_ids, need, sizeof(int32_t));
}

static void piece_cache_free(piece_cache *c) {
    free(c->slots);
    free(c->bytes);
    free(c->ids);
    memset(c, 0, sizeof *c);
}

static inline uint64_t piece_hash(const uint8_t *s, size_t n) {
    uint64_t h = hash_bytes(s, n);
    return h ? h : 1;
}

/* The cached entry for s[0..n), or NULL. */
static const piece_entry *piece_cache_find(const piece_cache *c, const uint8_t *s, size_t n,
                                           uint64_t h) {
    if (!c->slots) return NULL;
    for (uint32_t i = (uint32_t)h & (c->cap - 1);; i = (i + 1) & (c->cap - 1)) {
        const piece_entry *e = &c->slots[i];
        if (!e->hash) return NULL;
        if (e->hash == h && e->length == n && memcmp(c->bytes + e->bytes_off, s, n) == 0)
            return e;
    }
}

static void piece_cache_place(piece_cache *c, piece_entry e) {
    uint32_t i = (uint32_t)e.hash & (c->cap - 1);
    while (c->slots[i].hash) i = (i + 1) & (c->cap - 1);
    c->slots[i] = e;
}

/* Best effort: on allocation failure or when full, nothing is cached. */
static void piece_cache_add(piece_cache *c, const uint8_t *s, size_t n, uint64_t h,
                            const int32_t *ids, size_t n_ids) {
    if (c->count >= PIECE_CACHE_MAX_ENTRIES / 2) return;
    if (c->count + 1 > c->cap / 2) {
        uint32_t cap = c->cap ? c->cap * 2 : 1024;
        piece_entry *slots = calloc(cap, sizeof *slots);
        if (!slots) return;
        piece_entry *old = c->slots;
        uint32_t old_cap = c->cap;
        c->slots = slots;
        c->cap = cap;
        for (uint32_t i = 0; i < old_cap; i++)
            if (old[i].hash) piece_cache_place(c, old[i]);
        free(old);
    }
    if (!grow((void **)&c->bytes, &c->cap_bytes, c->n_bytes + n, 1) ||
        !grow((void **)&c->ids, &c->cap_ids, c->n_ids + n_ids, sizeof(int32_t)))
        return;
    piece_entry e = {h, (uint32_t)c->n_bytes, (uint32_t)c->n_ids, (uint32_t)n, (uint32_t)n_ids};
    memcpy(c->bytes + c->n_bytes, s, n);
    memcpy(c->ids + c->n_ids, ids, n_ids * sizeof *ids);
    c->n_bytes += n;
    c->n_ids += n_ids;
    piece_cache_place(c, e);
    c->count++;
}

/* Pre-tokenize and BPE one NFC section. */
static bool encode_normalized(encoder *e, const uint8_t *s, size_t n) {
    const kipp_tokenizer *t = e->t;
    for (size_t p = 0; p < n;) {
        size_t end = kipp_pretok_next(s, n, p);
        size_t len = end - p;
        if (!reserve_ids(e, len)) return false;
        if (len > 1 && len <= t->max_token_bytes) {
            int32_t id = vocab_find(t, s + p, len);
            if (id >= 0 && t->self_merging[id]) {
                e->ids[e->n_ids++] = id;
                p = end;
                continue;
            }
        }
        if (len > 1 && len <= PIECE_CACHE_MAX_LEN) {
            uint64_t h = piece_hash(s + p, len);
            const piece_entry *c = piece_cache_find(&e->cache, s + p, len, h);
            if (c) {
                memcpy(e->ids + e->n_ids, e->cache.ids + c->ids_off, c->n_ids * sizeof *e->ids);
                e->n_ids += c->n_ids;
            } else {
                size_t first = e->n_ids;
                if (!kipp_bpe_encode(t, s + p, len, &e->bpe, e->ids, &e->n_ids)) return false;
                piece_cache_add(&e->cache, s + p, len, h, e->ids + first, e->n_ids - first);
            }
        } else if (!kipp_bpe_encode(t, s + p, len, &e->bpe, e->ids, &e->n_ids)) {
            return false;
        }
        p = end;
    }
    return true;
}

static bool encode_section(encoder *e, const uint8_t *s, size_t n) {
    if (n == 0) return true;
    if (kipp_nfc_quick_check(s, n)) return encode_normalized(e, s, n);
    size_t len;
    if (!kipp_nfc(s, n, &e->nfc, &e->norm, &len, &e->norm_cap)) return false;
    return encode_normalized(e, e->norm, len);
}

/* Longest added token at s[0..n), or NULL. */
static const kipp_added_token *match_added(const kipp_tokenizer *t, const uint8_t *s, size_t n) {
    for (uint32_t k = t->added_start[s[0]]; k < t->added_start[s[0] + 1]; k++) {
        const kipp_added_token *a = &t->added[k];
        if (a->length <= n && memcmp(a->text, s, a->length) == 0) return a;
    }
    return NULL;
}

/* Copy of s with every ill-formed UTF-8 subpart replaced by U+FFFD. */
static uint8_t *sanitize_utf8(const uint8_t *s, size_t n, size_t valid, size_t *out_len) {
    size_t cap;
    if (!kipp_mul_size(n, 3, &cap)) return NULL;
    uint8_t *o = malloc(cap + 1);
    if (!o) return NULL;
    memcpy(o, s, valid);
    size_t w = valid;
    for (size_t i = valid; i < n;) {
        uint32_t cp;
        bool ok;
        size_t l = kipp_utf8_decode(s + i, n - i, &cp, &ok);
        if (ok) {
            memcpy(o + w, s + i, l);
            w += l;
        } else {
            w += kipp_utf8_encode(KIPP_REPLACEMENT_CHAR, o + w);
        }
        i += l;
    }
    *out_len = w;
    return o;
}

int kipp_tokenizer_encode(const kipp_tokenizer *t, const char *text, size_t length,
                          int32_t **ids, size_t *n_ids, kipp_error *err) {
    if (!t || (!text && length) || !ids || !n_ids)
        return kipp_fail(err, KIPP_E_ARGUMENT, "tokenizer encode: NULL argument");
    *ids = NULL;
    *n_ids = 0;
    const uint8_t *s = (const uint8_t *)(text ? text : "");
    size_t n = length;
    uint8_t *clean = NULL;
    size_t valid = kipp_utf8_valid_prefix(s, n);
    if (valid != n) {
        clean = sanitize_utf8(s, n, valid, &n);
        if (!clean) return kipp_fail(err, KIPP_E_MEMORY, "tokenizer: out of memory");
        s = clean;
    }
    encoder e = {.t = t};
    bool ok = reserve_ids(&e, n / 4 + 16);
    size_t section = 0;
    for (size_t i = 0; ok && i < n;) {
        const kipp_added_token *a =
            t->added_start[s[i]] < t->added_start[s[i] + 1] ? match_added(t, s + i, n - i) : NULL;
        if (!a) {
            i++;
            continue;
        }
        ok = encode_section(&e, s + section, i - section) && reserve_ids(&e, 1);
        if (ok) e.ids[e.n_ids++] = a->id;
        i += a->length;
        section = i;
    }
    if (ok) ok = encode_section(&e, s + section, n - section);
    kipp_bpe_scratch_free(&e.bpe);
    kipp_nfc_scratch_free(&e.nfc);
    piece_cache_free(&e.cache);
    free(e.norm);
    free(clean);
    if (!ok) {
        free(e.ids);
        return kipp_fail(err, KIPP_E_MEMORY, "tokenizer: out of memory encoding %zu bytes",
                         length);
    }
    *ids = e.ids;
    *n_ids = e.n_ids;
    return KIPP_OK;
}
