/* Decoding: ids -> bytes.
 *
 * kipp_detokenize is byte-exact: the concatenation of every token's raw
 * bytes (GPT-2 byte mapping undone; added tokens, special ones included, as
 * their literal text; unused [PAD] ids as nothing). A token may end inside a
 * UTF-8 sequence, so the result can be ill-formed UTF-8 if the ids are.
 *
 * The streaming decoder always emits well-formed UTF-8: it holds back a
 * trailing incomplete sequence (at most 3 bytes) until the next token
 * completes it, and replaces anything that can never become valid (a broken
 * sequence, a stray continuation byte) by U+FFFD, one per maximal ill-formed
 * subpart, as TextDecoder does. For ids whose bytes are well-formed UTF-8
 * overall, the pushed pieces plus the flush equal kipp_detokenize exactly. */
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/model_internal.h"
#include "core/tokenizer_internal.h"
#include "core/unicode.h"

int kipp_detokenize(const kipp_model *m, const int32_t *ids, size_t n_ids, char **text,
                    size_t *length, kipp_error *err) {
    if (!m || !m->tokenizer || (!ids && n_ids) || !text)
        return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_detokenize: NULL argument");
    *text = NULL;
    const kipp_tokenizer *t = m->tokenizer;
    size_t total = 0;
    for (size_t i = 0; i < n_ids; i++) {
        size_t len;
        if (!kipp_tokenizer_token_bytes(t, ids[i], &len))
            return kipp_fail(err, KIPP_E_ARGUMENT, "token id %d at position %zu is out of range",
                             (int)ids[i], i);
        if (!kipp_add_size(total, len, &total))
            return kipp_fail(err, KIPP_E_MEMORY, "detokenize: size overflow");
    }
    char *out = kipp_malloc(total + 1, err);
    if (!out) return KIPP_E_MEMORY;
    size_t w = 0;
    for (size_t i = 0; i < n_ids; i++) {
        size_t len;
        const uint8_t *b = kipp_tokenizer_token_bytes(t, ids[i], &len);
        memcpy(out + w, b, len);
        w += len;
    }
    out[w] = '\0';
    *text = out;
    if (length) *length = w;
    return KIPP_OK;
}

struct kipp_detok_stream {
    const kipp_tokenizer *t;
    uint8_t held[4];
    size_t n_held;
    uint8_t *buf; /* held + one token: [max_token_bytes + 4] */
};

int kipp_detok_stream_create(const kipp_model *m, kipp_detok_stream **out, kipp_error *err) {
    if (!m || !m->tokenizer || !out)
        return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_detok_stream_create: NULL argument");
    *out = NULL;
    kipp_detok_stream *s = kipp_calloc(1, sizeof *s, err);
    if (!s) return KIPP_E_MEMORY;
    s->t = m->tokenizer;
    s->buf = kipp_malloc((size_t)s->t->max_token_bytes + 4, err);
    if (!s->buf) {
        free(s);
        return KIPP_E_MEMORY;
    }
    *out = s;
    return KIPP_OK;
}

/* Writes s[0..n) as well-formed UTF-8 (ill-formed subparts -> U+FFFD) to
 * out, or just counts when out is NULL. Returns the output length. */
static size_t emit_lossy(const uint8_t *s, size_t n, char *out) {
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        bool ok;
        size_t l = kipp_utf8_decode(s + i, n - i, &cp, &ok);
        if (ok) {
            if (out) memcpy(out + w, s + i, l);
            w += l;
        } else {
            uint8_t rep[4];
            size_t r = kipp_utf8_encode(KIPP_REPLACEMENT_CHAR, rep);
            if (out) memcpy(out + w, rep, r);
            w += r;
        }
        i += l;
    }
    return w;
}

int kipp_detok_stream_push(kipp_detok_stream *s, int32_t id, char *out, size_t out_cap,
                           size_t *out_len, kipp_error *err) {
    if (!s || (!out && out_cap) || !out_len)
        return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_detok_stream_push: NULL argument");
    *out_len = 0;
    size_t len;
    const uint8_t *b = kipp_tokenizer_token_bytes(s->t, id, &len);
    if (!b) return kipp_fail(err, KIPP_E_ARGUMENT, "token id %d is out of range", (int)id);
    memcpy(s->buf, s->held, s->n_held);
    memcpy(s->buf + s->n_held, b, len);
    size_t n = s->n_held + len;
    size_t tail = kipp_utf8_incomplete_tail(s->buf, n);
    size_t need = emit_lossy(s->buf, n - tail, NULL);
    if (need > out_cap)
        return kipp_fail(err, KIPP_E_CAPACITY,
                         "detok stream: %zu bytes of output do not fit in %zu (nothing consumed)",
                         need, out_cap);
    *out_len = emit_lossy(s->buf, n - tail, out);
    memcpy(s->held, s->buf + n - tail, tail);
    s->n_held = tail;
    return KIPP_OK;
}

int kipp_detok_stream_flush(kipp_detok_stream *s, char *out, size_t out_cap, size_t *out_len) {
    if (!s || !out_len) return KIPP_E_ARGUMENT;
    *out_len = 0;
    size_t need = emit_lossy(s->held, s->n_held, NULL);
    if (need > out_cap) return KIPP_E_CAPACITY;
    *out_len = emit_lossy(s->held, s->n_held, out);
    s->n_held = 0;
    return KIPP_OK;
}

void kipp_detok_stream_destroy(kipp_detok_stream *s) {
    if (!s) return;
    free(s->buf);
    free(s);
}
