/* Constrained decoding: the byte automaton and the token mask.
 *
 * The automaton. A thread is a stack of frames, one per open construct
 * (object, array, string, number, literal set, sequence) above a ROOT frame.
 * Feeding a byte either advances the top frame, completes it (popping and
 * telling the parent), or - for constructs that end without a byte of their
 * own, numbers and literal sets like enum [1, 12] - pops it and feeds the
 * same byte to the parent. anyOf forks one thread per alternative; a state
 * is a set of up to GRAM_MAX_THREADS threads, and dead threads just vanish.
 * Frames are small and fully zeroed when pushed, so two states are equal
 * exactly when their bytes are (the cache key below relies on it).
 *
 * The mask. A token is allowed when every byte of it feeds through. Normal
 * tokens are walked in byte-sorted order, so a token shares the states of
 * its common prefix with the previous one (the sorted list is the trie,
 * flattened), and a rejected prefix skips every later token that starts
 * with it. The result is cached per state: the key is the state with
 * counters clamped to the values that matter for the next token (a string
 * 200 characters below its maxLength behaves like one 300 below, since no
 * token is that long), so the inside of a long string costs one walk.
 * Added tokens (<|im_end|>, <think>, ...) are never part of a document,
 * except the few a grammar names (the tool-call tags); the checkpoint's stop
 * tokens are allowed exactly in accepting states. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/grammar_internal.h"
#include "core/model_internal.h"
#include "core/tokenizer_internal.h"

/* ---- vocabulary index (one per model, built on first use) ---------------- */

struct kipp_vocab_index {
    int32_t *ids;      /* normal tokens with bytes, sorted by bytes */
    uint16_t *lcp;     /* [i] common prefix of ids[i-1] and ids[i] (capped) */
    size_t n;
    uint32_t max_len;  /* longest token, bytes */
    /* Inside a JSON string most tokens are plain text: no quote, backslash
     * or control byte, whole UTF-8 sequences. plain[id] is such a token's
     * character count (UINT16_MAX otherwise); the others are listed in
     * special[] and simulated byte by byte. */
    uint16_t *plain;   /* [n_tokens] */
    int32_t *special;  /* normal tokens that are not plain */
    size_t n_special;
};

static const kipp_tokenizer *sort_tok;
static int cmp_tokens(const void *a, const void *b) {
    size_t la, lb;
    const uint8_t *pa = kipp_tokenizer_token_bytes(sort_tok, *(const int32_t *)a, &la);
    const uint8_t *pb = kipp_tokenizer_token_bytes(sort_tok, *(const int32_t *)b, &lb);
    int c = memcmp(pa, pb, la < lb ? la : lb);
    return c ? c : (la > lb) - (la < lb);
}

static pthread_mutex_t index_lock = PTHREAD_MUTEX_INITIALIZER;

void kipp_vocab_index_free(kipp_vocab_index *v) {
    if (!v) return;
    free(v->ids);
    free(v->lcp);
    free(v->plain);
    free(v->special);
    free(v);
}

/* Characters of b if it is plain string content, else UINT16_MAX. */
static uint16_t plain_chars(const uint8_t *b, size_t n) {
    size_t chars = 0;
    for (size_t i = 0; i < n; chars++) {
        uint8_t c = b[i];
        if (c < 0x20 || c == '"' || c == '\\') return UINT16_MAX;
        size_t k = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
                 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (k == 0 || i + k > n) return UINT16_MAX;
        uint8_t lo = 0x80, hi = 0xBF;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
        for (size_t j = 1; j < k; j++, lo = 0x80, hi = 0xBF)
            if (b[i + j] < lo || b[i + j] > hi) return UINT16_MAX;
        i += k;
    }
    return chars > UINT16_MAX - 1 ? UINT16_MAX : (uint16_t)chars;
}

static const kipp_vocab_index *vocab_index(const kipp_model *cm, kipp_error *err) {
    kipp_model *m = (kipp_model *)cm; /* the index is a cache; the model stays logically const */
    pthread_mutex_lock(&index_lock);
    if (m->vocab_index) {
        pthread_mutex_unlock(&index_lock);
        return m->vocab_index;
    }
    const kipp_tokenizer *t = m->tokenizer;
    kipp_vocab_index *v = calloc(1, sizeof *v);
    if (v) v->ids = malloc(t->n_tokens * sizeof *v->ids);
    if (v) v->lcp = malloc(t->n_tokens * sizeof *v->lcp);
    if (v) v->plain = malloc(t->n_tokens * sizeof *v->plain);
    if (v) v->special = malloc(t->n_tokens * sizeof *v->special);
    if (!v || !v->ids || !v->lcp || !v->plain || !v->special) {
        kipp_vocab_index_free(v);
        pthread_mutex_unlock(&index_lock);
        kipp_fail(err, KIPP_E_MEMORY, "grammar: out of memory for the vocabulary index");
        return NULL;
    }
    for (size_t i = 0; i < t->n_tokens; i++) {
        size_t len;
        kipp_tokenizer_token_bytes(t, (int32_t)i, &len);
        v->plain[i] = UINT16_MAX;
        if (t->types[i] != KIPP_TOKEN_NORMAL || len == 0) continue;
        v->ids[v->n++] = (int32_t)i;
        const uint8_t *b = kipp_tokenizer_token_bytes(t, (int32_t)i, &len);
        v->plain[i] = plain_chars(b, len);
        if (v->plain[i] == UINT16_MAX) v->special[v->n_special++] = (int32_t)i;
        if (len > v->max_len) v->max_len = (uint32_t)len;
    }
    sort_tok = t; /* qsort has no context argument in C11; the lock serialises */
    qsort(v->ids, v->n, sizeof *v->ids, cmp_tokens);
    for (size_t i = 0; i < v->n; i++) {
        size_t la = 0, lb;
        const uint8_t *pa = i ? kipp_tokenizer_token_bytes(t, v->ids[i - 1], &la) : NULL;
        const uint8_t *pb = kipp_tokenizer_token_bytes(t, v->ids[i], &lb);
        size_t k = 0;
        while (k < la && k < lb && pa[k] == pb[k]) k++;
        v->lcp[i] = (uint16_t)(k > UINT16_MAX ? UINT16_MAX : k);
    }
    m->vocab_index = v;
    pthread_mutex_unlock(&index_lock);
    return v;
}

/* ---- node building ----------------------------------------------------------- */

uint32_t kipp_gram_new(kipp_grammar *g, gram_kind kind, kipp_error *err) {
    if (g->n_nodes == GRAM_MAX_NODES) {
        kipp_fail(err, KIPP_E_UNSUPPORTED, "schema too large (more than %d automaton nodes)",
                  GRAM_MAX_NODES);
        return UINT32_MAX;
    }
    if (g->n_nodes == g->cap_nodes) {
        uint32_t cap = g->cap_nodes ? g->cap_nodes * 2 : 32;
        gram_node *p = realloc(g->nodes, cap * sizeof *p);
        if (!p) {
            kipp_fail(err, KIPP_E_MEMORY, "grammar: out of memory");
            return UINT32_MAX;
        }
        g->nodes = p;
        g->cap_nodes = cap;
    }
    g->nodes[g->n_nodes] = (gram_node){.kind = kind};
    return g->n_nodes++;
}

/* Grows the parallel arrays of node `i` to hold one more entry. */
static int node_grow(kipp_grammar *g, uint32_t i, kipp_error *err) {
    gram_node *n = &g->nodes[i];
    uint32_t k = n->n + 1;
    char **lit = realloc(n->lit, k * sizeof *lit);
    if (lit) n->lit = lit;
    uint32_t *len = realloc(n->lit_len, k * sizeof *len);
    if (len) n->lit_len = len;
    uint32_t *kid = realloc(n->kid, k * sizeof *kid);
    if (kid) n->kid = kid;
    if (!lit || !len || !kid) return kipp_fail(err, KIPP_E_MEMORY, "grammar: out of memory");
    n->lit[n->n] = NULL;
    n->lit_len[n->n] = 0;
    n->kid[n->n] = UINT32_MAX;
    return KIPP_OK;
}

int kipp_gram_add_literal(kipp_grammar *g, uint32_t i, const char *bytes, size_t len,
                          kipp_error *err) {
    gram_node *n = &g->nodes[i];
    if (n->n == GRAM_MAX_CANDIDATES)
        return kipp_fail(err, KIPP_E_UNSUPPORTED, "more than %d enum values or properties",
                         GRAM_MAX_CANDIDATES);
    if (len == 0 || len > UINT16_MAX)
        return kipp_fail(err, KIPP_E_UNSUPPORTED, "literal of %zu bytes", len);
    if (node_grow(g, i, err)) return KIPP_E_MEMORY;
    char *p = malloc(len);
    if (!p) return kipp_fail(err, KIPP_E_MEMORY, "grammar: out of memory");
    memcpy(p, bytes, len);
    n->lit[n->n] = p;
    n->lit_len[n->n] = (uint32_t)len;
    n->n++;
    return KIPP_OK;
}

int kipp_gram_add_kid(kipp_grammar *g, uint32_t i, uint32_t kid, kipp_error *err) {
    if (node_grow(g, i, err)) return KIPP_E_MEMORY;
    g->nodes[i].kid[g->nodes[i].n++] = kid;
    return KIPP_OK;
}

/* ---- threads and states -------------------------------------------------- */

typedef enum frame_type {
    F_ROOT, F_OBJECT, F_KEY, F_ARRAY, F_STRING, F_NUMBER, F_LIT, F_SEQ, F_REPEAT
} frame_type;

/* sub-states */
enum { O_FIRST, O_COLON, O_VALUE, O_AFTER, O_COMMA };
enum { A_FIRST, A_VALUE, A_AFTER };
enum { S_CHAR, S_ESC, S_HEX, S_UTF8 };
enum { N_SIGN, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };

typedef struct frame {
    uint16_t node;
    uint8_t type, sub;
    uint16_t pos;   /* literal bytes matched; object: current property; seq: kid */
    uint16_t count; /* string characters, array items, free object keys, digits */
    uint8_t need, lo, hi, pad; /* UTF-8: continuation bytes left and the next one's range */
    uint32_t pad2;  /* explicit: frames are compared and hashed as bytes */
    uint64_t mask;  /* literal candidates alive; object: properties used */
} frame;

typedef struct thread {
    uint32_t sp, pad; /* explicit padding: threads are compared as bytes */
    frame f[GRAM_MAX_DEPTH];
} thread;

typedef struct tset {
    uint32_t n;
    thread t[GRAM_MAX_THREADS];
} tset;

static size_t thread_bytes(const thread *t) {
    return offsetof(thread, f) + t->sp * sizeof(frame);
}

static void tset_add(tset *s, const thread *t) {
    size_t nb = thread_bytes(t);
    for (uint32_t i = 0; i < s->n; i++)
        if (s->t[i].sp == t->sp && !memcmp(&s->t[i], t, nb)) return;
    /* Full: the extra alternative is dropped. The survivors are still valid
     * continuations, so output stays valid; only the choice narrows. */
    if (s->n < GRAM_MAX_THREADS) memcpy(&s->t[s->n++], t, nb);
}

static void tset_copy(tset *dst, const tset *src) {
    dst->n = src->n;
    for (uint32_t i = 0; i < src->n; i++) memcpy(&dst->t[i], &src->t[i], thread_bytes(&src->t[i]));
}

static bool push(thread *w, uint32_t node, frame_type type) {
    if (w->sp == GRAM_MAX_DEPTH) return false;
    frame *f = &w->f[w->sp++];
    memset(f, 0, sizeof *f);
    f->node = (uint16_t)node;
    f->type = (uint8_t)type;
    return true;
}

static uint64_t all_bits(uint32_t n) { return n >= 64 ? ~0ull : (1ull << n) - 1; }

enum { R_REJECT, R_OK, R_DONE, R_POP, R_REFEED, R_CHILD };

static void feed(const kipp_grammar *g, thread *w, uint8_t c, tset *out);

/* Starts a value of `node` whose first byte is c (appends results to out). */
static void start_value(const kipp_grammar *g, thread *w, uint32_t node, uint8_t c, tset *out) {
    const gram_node *n = &g->nodes[node];
    switch (n->kind) {
    case G_ANYOF:
        for (uint32_t k = 0; k < n->n; k++) {
            thread copy;
            memcpy(&copy, w, thread_bytes(w));
            start_value(g, &copy, n->kid[k], c, out);
        }
        return;
    case G_ANY: {
        /* Containers under unconstrained values nest GRAM_FREE_MAX_DEPTH
         * deep at most, and never beyond the stack (a container needs room
         * for its own frame and a child's). */
        uint32_t free_depth = 0;
        for (uint32_t k = 0; k < w->sp; k++)
            free_depth += w->f[k].node == g->free_object || w->f[k].node == g->free_array;
        bool nest = free_depth < GRAM_FREE_MAX_DEPTH && w->sp + 3 < GRAM_MAX_DEPTH;
        if (c == '{' && nest) start_value(g, w, g->free_object, c, out);
        else if (c == '[' && nest) start_value(g, w, g->free_array, c, out);
        else if (c == '"') start_value(g, w, g->free_string, c, out);
        else if (c == '-' || (c >= '0' && c <= '9')) start_value(g, w, g->number, c, out);
        else if (c == 't' || c == 'f' || c == 'n') start_value(g, w, g->literals_tfn, c, out);
        return;
    }
    case G_SEQ:
        if (!push(w, node, F_SEQ)) return;
        start_value(g, w, n->kid[0], c, out);
        return;
    case G_LITERALS:
        if (!push(w, node, F_LIT)) return;
        w->f[w->sp - 1].mask = all_bits(n->n);
        feed(g, w, c, out);
        return;
    case G_STRING:
        if (c == '"' && push(w, node, F_STRING)) tset_add(out, w);
        return;
    case G_NUMBER:
    case G_INTEGER:
        if ((c == '-' || (c >= '0' && c <= '9')) && push(w, node, F_NUMBER)) {
            frame *f = &w->f[w->sp - 1];
            f->sub = c == '-' ? N_SIGN : c == '0' ? N_ZERO : N_INT;
            f->count = c >= '1' && c <= '9';
            tset_add(out, w);
        }
        return;
    case G_OBJECT:
        if (c == '{' && push(w, node, F_OBJECT)) tset_add(out, w);
        return;
    case G_ARRAY:
        if (c == '[' && push(w, node, F_ARRAY)) tset_add(out, w);
        return;
    case G_REPEAT:
        if (!push(w, node, F_REPEAT)) return;
        start_value(g, w, n->kid[0], c, out);
        return;
    }
}

/* A literal frame can end here: some live candidate is complete. */
static bool lit_complete(const char *const *lit, const uint32_t *len, uint64_t mask, uint16_t pos,
                         bool *longer) {
    bool done = false;
    *longer = false;
    (void)lit;
    for (uint64_t m = mask; m; m &= m - 1) {
        int i = __builtin_ctzll(m);
        if (len[i] == pos) done = true;
        else *longer = true;
    }
    return done;
}

static int feed_lit(const gram_node *n, frame *f, uint8_t c) {
    uint64_t next = 0;
    for (uint64_t m = f->mask; m; m &= m - 1) {
        int i = __builtin_ctzll(m);
        if (n->lit_len[i] > f->pos && (uint8_t)n->lit[i][f->pos] == c) next |= 1ull << i;
    }
    bool longer;
    if (!next) return lit_complete((const char *const *)n->lit, n->lit_len, f->mask, f->pos, &longer)
                   ? R_POP : R_REJECT;
    f->mask = next;
    f->pos++;
    bool done = lit_complete((const char *const *)n->lit, n->lit_len, next, f->pos, &longer);
    return done && !longer ? R_DONE : R_OK;
}

static int feed_string(const gram_node *n, frame *f, uint8_t c) {
    switch (f->sub) {
    case S_CHAR:
        if (c == '"') return f->count >= n->min ? R_DONE : R_REJECT;
        if (c < 0x20 || f->count >= n->max) return R_REJECT;
        if (c == '\\') f->sub = S_ESC;
        else if (c >= 0x80) {
            /* well-formed UTF-8 only (RFC 3629 table 3-7) */
            f->lo = 0x80, f->hi = 0xBF;
            if (c >= 0xC2 && c <= 0xDF) f->need = 1;
            else if (c >= 0xE0 && c <= 0xEF) {
                f->need = 2;
                if (c == 0xE0) f->lo = 0xA0;
                if (c == 0xED) f->hi = 0x9F;
            } else if (c >= 0xF0 && c <= 0xF4) {
                f->need = 3;
                if (c == 0xF0) f->lo = 0x90;
                if (c == 0xF4) f->hi = 0x8F;
            } else
                return R_REJECT;
            f->sub = S_UTF8;
        }
        f->count++;
        return R_OK;
    case S_UTF8:
        if (c < f->lo || c > f->hi) return R_REJECT;
        f->lo = 0x80, f->hi = 0xBF;
        if (--f->need == 0) f->sub = S_CHAR, f->lo = f->hi = 0;
        return R_OK;
    case S_ESC:
        if (c == 'u') {
            f->sub = S_HEX;
            f->need = 0;
            return R_OK;
        }
        if (!strchr("\"\\/bfnrt", c) || c == 0) return R_REJECT;
        f->sub = S_CHAR;
        return R_OK;
    default: { /* S_HEX: \uXXXX outside the surrogates (D800-DFFF), so each escape is
                * one whole character; D000-D7FF are refused with them, for simplicity */
        bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
        if (!hex || (f->need == 0 && (c == 'd' || c == 'D'))) return R_REJECT;
        if (++f->need == 4) f->sub = S_CHAR, f->need = 0;
        return R_OK;
    }
    }
}

static bool number_can_end(const frame *f) {
    return f->sub == N_ZERO || f->sub == N_INT || f->sub == N_FRAC || f->sub == N_EXP;
}

static int feed_number(const gram_node *n, frame *f, uint8_t c) {
    bool digit = c >= '0' && c <= '9';
    bool integer = n->kind == G_INTEGER;
    switch (f->sub) {
    case N_SIGN:
        if (!digit) return R_REJECT;
        f->sub = c == '0' ? N_ZERO : N_INT;
        f->count = c != '0';
        return R_OK;
    case N_ZERO:
    case N_INT:
        if (digit && f->sub == N_INT && f->count < GRAM_MAX_INT_DIGITS) {
            f->count++;
            return R_OK;
        }
        if (!integer && c == '.') return f->sub = N_DOT, f->count = 0, R_OK;
        if (!integer && (c == 'e' || c == 'E')) return f->sub = N_E, f->count = 0, R_OK;
        break;
    case N_DOT:
    case N_FRAC:
        if (digit && f->count < GRAM_MAX_FRAC_DIGITS) return f->sub = N_FRAC, f->count++, R_OK;
        if (f->sub == N_FRAC && (c == 'e' || c == 'E')) return f->sub = N_E, f->count = 0, R_OK;
        break;
    case N_E:
        if (c == '+' || c == '-') return f->sub = N_ESIGN, R_OK;
        /* fall through */
    case N_ESIGN:
    case N_EXP:
        if (digit && f->count < GRAM_MAX_EXP_DIGITS) return f->sub = N_EXP, f->count++, R_OK;
        break;
    }
    return number_can_end(f) ? R_POP : R_REJECT;
}

static bool keys_left(const gram_node *n, const frame *f) {
    if (n->free_keys) return f->count < GRAM_FREE_MAX_KEYS;
    return (f->mask & all_bits(n->n)) != all_bits(n->n);
}

static int start_key(const kipp_grammar *g, thread *w, uint8_t c) {
    frame *f = &w->f[w->sp - 1];
    const gram_node *n = &g->nodes[f->node];
    if (c != '"' || !keys_left(n, f)) return R_REJECT;
    if (n->free_keys) {
        if (!push(w, g->free_key, F_STRING)) return R_REJECT;
        return R_OK; /* the quote opened the key string */
    }
    uint64_t unused = all_bits(n->n) & ~f->mask;
    if (!push(w, f->node, F_KEY)) return R_REJECT;
    w->f[w->sp - 1].mask = unused;
    return R_REFEED; /* the quote is the key literal's first byte */
}

/* Feeds c to the top frame. */
static void pop_done(const kipp_grammar *g, thread *w);

static int handle(const kipp_grammar *g, thread *w, uint8_t c, tset *out) {
    frame *f = &w->f[w->sp - 1];
    const gram_node *n = &g->nodes[f->node];
    switch ((frame_type)f->type) {
    case F_ROOT:
        if (f->sub) return R_REJECT; /* the document is complete */
        start_value(g, w, f->node, c, out);
        return R_CHILD;
    case F_SEQ:
        start_value(g, w, n->kid[f->pos], c, out);
        return R_CHILD;
    case F_LIT:
        return feed_lit(n, f, c);
    case F_KEY: {
        int r = feed_lit(n, f, c);
        return r == R_POP ? R_REJECT : r;
    }
    case F_STRING:
        return feed_string(n, f, c);
    case F_NUMBER:
        return feed_number(n, f, c);
    case F_REPEAT: {
        /* between repeats (the top frame only after a value completed): c
         * either ends the repetition, going to the parent, or starts the
         * next value; both may hold, so both threads go on */
        if (f->count >= n->min) {
            thread copy;
            memcpy(&copy, w, thread_bytes(w));
            pop_done(g, &copy);
            feed(g, &copy, c, out);
        }
        if (f->count < n->max) start_value(g, w, n->items, c, out);
        return R_CHILD;
    }
    case F_ARRAY:
        if (f->sub == A_AFTER) {
            if (c == ',' && f->count < n->max) return f->sub = A_VALUE, R_OK;
            if (c == ']' && f->count >= n->min) return R_DONE;
            return R_REJECT;
        }
        if (f->sub == A_FIRST && c == ']') return n->min == 0 ? R_DONE : R_REJECT;
        if (n->max == 0) return R_REJECT;
        f->sub = A_VALUE;
        start_value(g, w, n->items, c, out);
        return R_CHILD;
    case F_OBJECT: {
        bool closable = (f->mask & n->required) == n->required;
        switch (f->sub) {
        case O_FIRST:
            if (c == '}') return closable ? R_DONE : R_REJECT;
            return start_key(g, w, c);
        case O_COLON:
            return c == ':' ? (f->sub = O_VALUE, R_OK) : R_REJECT;
        case O_VALUE:
            start_value(g, w, n->free_keys ? g->any : n->kid[f->pos], c, out);
            return R_CHILD;
        case O_AFTER:
            if (c == '}') return closable ? R_DONE : R_REJECT;
            if (c == ',' && keys_left(n, f)) return f->sub = O_COMMA, R_OK;
            return R_REJECT;
        default: /* O_COMMA */
            return start_key(g, w, c);
        }
    }
    }
    return R_REJECT;
}

/* The child on top of w completed; updates the parent. Returns true when
 * the parent completed with it (a sequence's last kid). */
static bool child_done(const kipp_grammar *g, frame *p, const frame *child) {
    const gram_node *n = &g->nodes[p->node];
    switch ((frame_type)p->type) {
    case F_ROOT:
        p->sub = 1;
        return false;
    case F_SEQ:
        return ++p->pos == n->n;
    case F_ARRAY:
    case F_REPEAT:
        p->sub = A_AFTER;
        p->count++;
        return false;
    case F_OBJECT:
        if (p->sub == O_VALUE) {
            p->sub = O_AFTER;
        } else { /* a key */
            p->sub = O_COLON;
            if (child->type == F_KEY) {
                p->pos = (uint16_t)__builtin_ctzll(child->mask);
                p->mask |= 1ull << p->pos;
            } else {
                p->count++;
            }
        }
        return false;
    default:
        return false;
    }
}

static void pop_done(const kipp_grammar *g, thread *w) {
    while (w->sp > 1) {
        frame child = w->f[--w->sp];
        if (!child_done(g, &w->f[w->sp - 1], &child)) return;
    }
}

static void feed(const kipp_grammar *g, thread *w, uint8_t c, tset *out) {
    for (;;) {
        switch (handle(g, w, c, out)) {
        case R_OK:
            tset_add(out, w);
            return;
        case R_DONE:
            pop_done(g, w);
            tset_add(out, w);
            return;
        case R_POP:
            pop_done(g, w);
            continue;
        case R_REFEED:
            continue;
        default: /* R_REJECT, R_CHILD (start_value added its results) */
            return;
        }
    }
}

static bool thread_accepting(const kipp_grammar *g, const thread *t) {
    thread w;
    memcpy(&w, t, thread_bytes(t));
    for (;;) {
        frame *f = &w.f[w.sp - 1];
        if (f->type == F_ROOT) return f->sub == 1;
        bool longer;
        const gram_node *n = &g->nodes[f->node];
        bool can_end = f->type == F_NUMBER   ? number_can_end(f)
                       : f->type == F_REPEAT ? f->count >= n->min
                       : f->type == F_LIT
                           ? lit_complete((const char *const *)n->lit, n->lit_len, f->mask, f->pos,
                                          &longer)
                           : false;
        if (!can_end) return false;
        pop_done(g, &w);
    }
}

static bool tset_accepting(const kipp_grammar *g, const tset *s) {
    for (uint32_t i = 0; i < s->n; i++)
        if (thread_accepting(g, &s->t[i])) return true;
    return false;
}

static void tset_feed(const kipp_grammar *g, const tset *in, uint8_t c, tset *out) {
    out->n = 0;
    for (uint32_t i = 0; i < in->n; i++) {
        thread w;
        memcpy(&w, &in->t[i], thread_bytes(&in->t[i]));
        feed(g, &w, c, out);
    }
}

/* ---- cache: state -> allowed-token bitset ------------------------------- */

#define CACHE_SLOTS 256 /* x 19 KB bitsets, at most */
#define MASK_WORDS ((KIPP_VOCAB_SIZE + 63) / 64)

typedef struct cache_slot {
    uint64_t hash;
    uint8_t *key;
    size_t key_len;
    uint64_t *bits;
} cache_slot;

typedef struct gram_cache {
    cache_slot slot[CACHE_SLOTS];
    uint32_t used;
} gram_cache;

static void cache_clear(gram_cache *c) {
    for (uint32_t i = 0; i < CACHE_SLOTS; i++) {
        free(c->slot[i].key);
        free(c->slot[i].bits);
    }
    memset(c, 0, sizeof *c);
}

/* A count that only matters through "how far to min" and "how far to max":
 * beyond the longest token (L bytes, each at most one character or item)
 * every value behaves the same for the next token. */
static uint16_t canon(uint32_t count, uint32_t min, uint32_t max, uint32_t L) {
    if (count >= min && max - count >= L) return (uint16_t)min;
    if (count < min && min - count >= L) return 0;
    return (uint16_t)count;
}

static size_t state_key(const kipp_grammar *g, const tset *s, uint8_t *key) {
    size_t n = 0;
    uint32_t L = g->vocab->max_len;
    for (uint32_t i = 0; i < s->n; i++) {
        const thread *t = &s->t[i];
        memcpy(key + n, &t->sp, sizeof t->sp);
        n += sizeof t->sp;
        for (uint32_t k = 0; k < t->sp; k++) {
            frame f = t->f[k];
            const gram_node *nd = &g->nodes[f.node];
            if (f.type == F_STRING || f.type == F_ARRAY || f.type == F_REPEAT)
                f.count = canon(f.count, nd->min, nd->max, L);
            else if (f.type == F_OBJECT && nd->free_keys)
                f.count = canon(f.count, 0, GRAM_FREE_MAX_KEYS, L);
            memcpy(key + n, &f, sizeof f);
            n += sizeof f;
        }
    }
    return n;
}

static uint64_t fnv(const uint8_t *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* ---- states ------------------------------------------------------------- */

struct kipp_grammar_state {
    kipp_grammar *g;
    tset cur;
    tset *depth;     /* [max_len + 1] scratch for the mask walk */
    uint8_t *key;    /* scratch: a state's cache key */
    uint64_t *bits;  /* [MASK_WORDS] last mask */
};

/* Feeds the bytes of one token to a copy of the current state. */
static bool token_fits(kipp_grammar_state *st, const uint8_t *b, size_t len) {
    tset_copy(&st->depth[0], &st->cur);
    size_t d = 0;
    for (; d < len && st->depth[d & 1].n; d++)
        tset_feed(st->g, &st->depth[d & 1], b[d], &st->depth[(d + 1) & 1]);
    return st->depth[d & 1].n > 0;
}

/* The walk for one thread inside a string (the common case, and the one
 * where nearly every token survives): plain tokens need only their
 * character count; the few others are simulated. */
static bool walk_string(kipp_grammar_state *st, uint64_t *bits) {
    const kipp_grammar *g = st->g;
    if (st->cur.n != 1) return false;
    const thread *t = &st->cur.t[0];
    const frame *f = &t->f[t->sp - 1];
    if (f->type != F_STRING || f->sub != S_CHAR) return false;
    const kipp_vocab_index *v = g->vocab;
    const kipp_tokenizer *tok = g->model->tokenizer;
    uint32_t room = g->nodes[f->node].max - f->count;
    for (size_t i = 0; i < v->n; i++) {
        int32_t id = v->ids[i];
        if (v->plain[id] <= room) bits[id >> 6] |= 1ull << (id & 63);
    }
    for (size_t i = 0; i < v->n_special; i++) {
        size_t len;
        int32_t id = v->special[i];
        const uint8_t *b = kipp_tokenizer_token_bytes(tok, id, &len);
        if (token_fits(st, b, len)) bits[id >> 6] |= 1ull << (id & 63);
    }
    return true;
}

static void walk(kipp_grammar_state *st, uint64_t *bits) {
    const kipp_grammar *g = st->g;
    const kipp_vocab_index *v = g->vocab;
    const kipp_tokenizer *tok = g->model->tokenizer;
    memset(bits, 0, MASK_WORDS * sizeof *bits);
    if (walk_string(st, bits)) goto added;
    tset_copy(&st->depth[0], &st->cur);
    /* ok: bytes of the previous token whose states are in depth[]; failed:
     * whether its byte [ok] was rejected */
    size_t ok = 0;
    bool failed = false;
    for (size_t i = 0; i < v->n; i++) {
        size_t len;
        const uint8_t *b = kipp_tokenizer_token_bytes(tok, v->ids[i], &len);
        size_t common = v->lcp[i];
        if (failed && common > ok) continue; /* starts with a rejected prefix */
        size_t d = common < ok ? common : ok;
        failed = false;
        for (; d < len; d++) {
            tset_feed(g, &st->depth[d], b[d], &st->depth[d + 1]);
            if (st->depth[d + 1].n == 0) {
                failed = true;
                break;
            }
        }
        ok = d;
        if (!failed) bits[v->ids[i] >> 6] |= 1ull << (v->ids[i] & 63);
    }
added:
    for (uint32_t k = 0; k < g->n_allowed_added; k++) {
        size_t len;
        int32_t id = g->allowed_added[k];
        const uint8_t *b = kipp_tokenizer_token_bytes(tok, id, &len);
        if (token_fits(st, b, len)) bits[id >> 6] |= 1ull << (id & 63);
    }
    if (tset_accepting(g, &st->cur)) {
        const kipp_checkpoint *ck = kipp_model_checkpoint(g->model);
        for (uint32_t k = 0; k < ck->n_stops; k++)
            bits[ck->stops[k] >> 6] |= 1ull << (ck->stops[k] & 63);
    }
}

static const uint64_t *allowed_bits(kipp_grammar_state *st) {
    kipp_grammar *g = st->g;
    size_t kn = state_key(g, &st->cur, st->key);
    uint64_t h = fnv(st->key, kn);
    gram_cache *c = g->cache;
    uint32_t i = (uint32_t)h & (CACHE_SLOTS - 1);
    if (c) {
        for (uint32_t probe = 0; probe < CACHE_SLOTS && c->slot[i].key; probe++) {
            cache_slot *s = &c->slot[i];
            if (s->hash == h && s->key_len == kn && !memcmp(s->key, st->key, kn)) return s->bits;
            i = (i + 1) & (CACHE_SLOTS - 1);
        }
        if (c->used >= CACHE_SLOTS * 3 / 4) { /* full: start over (states repeat locally) */
            cache_clear(c);
            i = (uint32_t)h & (CACHE_SLOTS - 1);
        }
    }
    walk(st, st->bits);
    if (!c) return st->bits;
    cache_slot *s = &c->slot[i];
    s->key = malloc(kn);
    s->bits = malloc(MASK_WORDS * sizeof *s->bits);
    if (!s->key || !s->bits) { /* no room to cache: still correct */
        free(s->key);
        free(s->bits);
        s->key = NULL;
        s->bits = NULL;
        return st->bits;
    }
    memcpy(s->key, st->key, kn);
    memcpy(s->bits, st->bits, MASK_WORDS * sizeof *s->bits);
    s->key_len = kn;
    s->hash = h;
    c->used++;
    return s->bits;
}

int kipp_grammar_state_create(kipp_grammar *g, kipp_grammar_state **out, kipp_error *err) {
    if (!g || !out) return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_grammar_state_create: NULL");
    *out = NULL;
    kipp_grammar_state *st = calloc(1, sizeof *st);
    if (!st) return kipp_fail(err, KIPP_E_MEMORY, "grammar: out of memory");
    st->g = g;
    st->depth = malloc((g->vocab->max_len + 2) * sizeof *st->depth);
    st->key = malloc(sizeof(tset));
    st->bits = malloc(MASK_WORDS * sizeof *st->bits);
    if (!st->depth || !st->key || !st->bits) {
        kipp_grammar_state_destroy(st);
        return kipp_fail(err, KIPP_E_MEMORY, "grammar: out of memory for the mask scratch");
    }
    thread root = {0};
    push(&root, g->root, F_ROOT);
    st->cur.n = 0;
    tset_add(&st->cur, &root);
    *out = st;
    return KIPP_OK;
}

void kipp_grammar_state_destroy(kipp_grammar_state *st) {
    if (!st) return;
    free(st->depth);
    free(st->key);
    free(st->bits);
    free(st);
}

size_t kipp_grammar_mask(kipp_grammar_state *st, float *logits) {
    const uint64_t *bits = allowed_bits(st);
    size_t allowed = 0;
    for (size_t w = 0; w < MASK_WORDS; w++) {
        uint64_t b = bits[w];
        size_t base = w * 64;
        if (b == ~0ull) {
            allowed += 64;
            continue;
        }
        allowed += (size_t)__builtin_popcountll(b);
        for (size_t k = 0; k < 64 && base + k < KIPP_VOCAB_SIZE; k++)
            if (!(b >> k & 1)) logits[base + k] = -INFINITY;
    }
    return allowed;
}

bool kipp_grammar_allows(kipp_grammar_state *st, int32_t token) {
    if (token < 0 || token >= KIPP_VOCAB_SIZE) return false;
    const uint64_t *bits = allowed_bits(st);
    return bits[token >> 6] >> (token & 63) & 1;
}

int kipp_grammar_accept(kipp_grammar_state *st, int32_t token, kipp_error *err) {
    const kipp_grammar *g = st->g;
    const kipp_checkpoint *ck = kipp_model_checkpoint(g->model);
    for (uint32_t k = 0; k < ck->n_stops; k++)
        if (token == ck->stops[k]) {
            if (!tset_accepting(g, &st->cur))
                return kipp_fail(err, KIPP_E_ARGUMENT, "grammar: end of text before the document "
                                 "is complete");
            return KIPP_OK;
        }
    bool added = token >= 0 && (size_t)token < g->model->tokenizer->n_tokens &&
                 g->model->tokenizer->types[token] != KIPP_TOKEN_NORMAL;
    for (uint32_t k = 0; k < g->n_allowed_added; k++) added &= token != g->allowed_added[k];
    size_t len = 0;
    const uint8_t *b = kipp_tokenizer_token_bytes(g->model->tokenizer, token, &len);
    if (!b || added || len == 0)
        return kipp_fail(err, KIPP_E_ARGUMENT, "grammar: token %d cannot be part of the document",
                         (int)token);
    /* Fed on scratch copies: a token whose first bytes fit and a later one
     * does not must leave the state as it was (kipp.h). */
    if (!token_fits(st, b, len))
        return kipp_fail(err, KIPP_E_ARGUMENT, "grammar: token %d does not continue the "
                         "document", (int)token);
    tset_copy(&st->cur, &st->depth[len & 1]);
    return KIPP_OK;
}

bool kipp_grammar_complete(const kipp_grammar_state *st) { return tset_accepting(st->g, &st->cur); }

/* ---- grammars ------------------------------------------------------------ */

static int lit_node(kipp_grammar *g, uint32_t *out, kipp_error *err, const char *a, const char *b,
                    const char *c) {
    uint32_t i = kipp_gram_new(g, G_LITERALS, err);
    if (i == UINT32_MAX) return err->code;
    const char *s[3] = {a, b, c};
    for (int k = 0; k < 3; k++)
        if (s[k] && kipp_gram_add_literal(g, i, s[k], strlen(s[k]), err)) return err->code;
    *out = i;
    return KIPP_OK;
}

int kipp_gram_begin(const kipp_model *model, kipp_grammar **out, kipp_error *err) {
    *out = NULL;
    if (!model || !model->tokenizer)
        return kipp_fail(err, KIPP_E_ARGUMENT, "grammar: NULL model");
    kipp_grammar *g = calloc(1, sizeof *g);
    if (!g) return kipp_fail(err, KIPP_E_MEMORY, "grammar: out of memory");
    g->model = model;
    g->vocab = vocab_index(model, err);
    g->cache = calloc(1, sizeof *g->cache); /* NULL: no cache, still correct */
    uint32_t i;
    if (!g->vocab || (g->any = kipp_gram_new(g, G_ANY, err)) == UINT32_MAX ||
        (g->number = kipp_gram_new(g, G_NUMBER, err)) == UINT32_MAX ||
        (g->free_string = kipp_gram_new(g, G_STRING, err)) == UINT32_MAX ||
        (g->free_key = kipp_gram_new(g, G_STRING, err)) == UINT32_MAX ||
        (g->free_object = kipp_gram_new(g, G_OBJECT, err)) == UINT32_MAX ||
        (g->free_array = kipp_gram_new(g, G_ARRAY, err)) == UINT32_MAX ||
        lit_node(g, &i, err, "true", "false", "null")) {
        kipp_grammar_destroy(g);
        return err ? err->code : KIPP_E_MEMORY;
    }
    g->literals_tfn = i;
    g->nodes[g->free_string].max = GRAM_DEFAULT_MAX_STRING;
    g->nodes[g->free_key].max = GRAM_FREE_KEY_LENGTH;
    g->nodes[g->free_object].free_keys = true;
    g->nodes[g->free_array].items = g->any;
    g->nodes[g->free_array].max = GRAM_FREE_MAX_ITEMS;
    g->root = g->free_object;
    *out = g;
    return KIPP_OK;
}

/* Frames a value of node i can stack up (G_ANY counts 1: its nesting is
 * bounded at run time). */
static uint32_t depth_of(const kipp_grammar *g, uint32_t i, uint32_t level) {
    const gram_node *n = &g->nodes[i];
    if (level > GRAM_MAX_DEPTH) return GRAM_MAX_DEPTH + 1; /* deep enough to refuse */
    uint32_t d = 0;
    switch (n->kind) {
    case G_OBJECT:
        d = 1;
        for (uint32_t k = 0; k < n->n; k++) {
            uint32_t x = depth_of(g, n->kid[k], level + 1);
            if (x > d) d = x;
        }
        return 1 + d;
    case G_ARRAY:
        return 1 + depth_of(g, n->items, level + 1);
    case G_REPEAT: {
        uint32_t a = depth_of(g, n->kid[0], level + 1), b = depth_of(g, n->items, level + 1);
        return 1 + (a > b ? a : b);
    }
    case G_SEQ:
    case G_ANYOF:
        for (uint32_t k = 0; k < n->n; k++) {
            uint32_t x = depth_of(g, n->kid[k], level + 1);
            if (x > d) d = x;
        }
        return d + (n->kind == G_SEQ);
    default:
        return 1;
    }
}

int kipp_gram_finish(kipp_grammar *g, kipp_error *err) {
    if (1 + depth_of(g, g->root, 0) + 2 > GRAM_MAX_DEPTH) {
        kipp_grammar_destroy(g);
        return kipp_fail(err, KIPP_E_UNSUPPORTED, "schema nesting is deeper than %d levels",
                         GRAM_MAX_DEPTH / 2);
    }
    return KIPP_OK;
}

void kipp_grammar_destroy(kipp_grammar *g) {
    if (!g) return;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        for (uint32_t k = 0; k < g->nodes[i].n && g->nodes[i].lit; k++) free(g->nodes[i].lit[k]);
        free(g->nodes[i].lit);
        free(g->nodes[i].lit_len);
        free(g->nodes[i].kid);
    }
    free(g->nodes);
    if (g->cache) cache_clear(g->cache);
    free(g->cache);
    free(g);
}

int kipp_grammar_from_json_value(const kipp_model *model, const json_value *schema,
                                 kipp_grammar **out, kipp_error *err) {
    kipp_grammar *g;
    if (kipp_gram_begin(model, &g, err)) return err->code;
    if (schema && kipp_gram_compile_schema(g, schema, schema, &g->root, err)) {
        kipp_grammar_destroy(g);
        return err->code;
    }
    if (kipp_gram_finish(g, err)) return err->code;
    *out = g;
    return KIPP_OK;
}

int kipp_grammar_from_json_schema(const kipp_model *model, const char *schema, size_t length,
                                  kipp_grammar **out, kipp_error *err) {
    if (!out) return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_grammar_from_json_schema: NULL out");
    *out = NULL;
    if (!schema) return kipp_grammar_from_json_value(model, NULL, out, err);
    json_doc *doc = NULL;
    if (kipp_json_parse(schema, length, &doc, err))
        return kipp_fail_prefix(err, "JSON schema: ");
    int rc = kipp_grammar_from_json_value(model, kipp_json_root(doc), out, err);
    kipp_json_free(doc);
    return rc;
}

static int find_added(const kipp_model *m, const char *text, int32_t *id) {
    const kipp_tokenizer *t = m->tokenizer;
    for (size_t i = 0; i < t->n_added; i++)
        if (t->added[i].length == strlen(text) && !memcmp(t->added[i].text, text, strlen(text))) {
            *id = t->added[i].id;
            return 0;
        }
    return -1;
}

int kipp_grammar_tool_call(const kipp_model *model, const char *const *names,
                           const json_value *const *parameters, size_t n, uint32_t max_calls,
                           kipp_grammar **out, kipp_error *err) {
    *out = NULL;
    if (n == 0) return kipp_fail(err, KIPP_E_ARGUMENT, "tool-call grammar: no functions");
    if (n > GRAM_MAX_THREADS)
        return kipp_fail(err, KIPP_E_UNSUPPORTED, "constrained tool calls support at most %d "
                         "functions", GRAM_MAX_THREADS);
    if (max_calls < 1 || max_calls > GRAM_MAX_TOOL_CALLS)
        return kipp_fail(err, KIPP_E_ARGUMENT, "tool-call grammar: %u calls (1..%d)", max_calls,
                         GRAM_MAX_TOOL_CALLS);
    kipp_grammar *g;
    if (kipp_gram_begin(model, &g, err)) return err->code;
    /* call = head alts tail; later calls start with the "\n" the template
     * puts between calls, and share the alternatives and the tail */
    uint32_t seq = kipp_gram_new(g, G_SEQ, err), head, tail, alts;
    if (seq == UINT32_MAX || lit_node(g, &head, err, "<tool_call>\n{\"name\": \"", NULL, NULL) ||
        lit_node(g, &tail, err, "\n</tool_call>", NULL, NULL) ||
        (alts = kipp_gram_new(g, G_ANYOF, err)) == UINT32_MAX)
        goto fail;
    for (size_t i = 0; i < n; i++) {
        char prefix[160];
        int k = snprintf(prefix, sizeof prefix, "%s\", \"arguments\": ", names[i]);
        if (k < 0 || (size_t)k >= sizeof prefix) {
            kipp_fail(err, KIPP_E_UNSUPPORTED, "function name too long");
            goto fail;
        }
        uint32_t alt = kipp_gram_new(g, G_SEQ, err), name, args, close;
        if (alt == UINT32_MAX || lit_node(g, &name, err, prefix, NULL, NULL) ||
            lit_node(g, &close, err, "}", NULL, NULL))
            goto fail;
        args = g->free_object;
        if (parameters[i] && kipp_gram_compile_schema(g, parameters[i], parameters[i], &args, err))
            goto fail;
        if (kipp_gram_add_kid(g, alt, name, err) || kipp_gram_add_kid(g, alt, args, err) ||
            kipp_gram_add_kid(g, alt, close, err) || kipp_gram_add_kid(g, alts, alt, err))
            goto fail;
    }
    if (kipp_gram_add_kid(g, seq, head, err) || kipp_gram_add_kid(g, seq, alts, err) ||
        kipp_gram_add_kid(g, seq, tail, err))
        goto fail;
    g->root = seq;
    if (max_calls > 1) {
        uint32_t rep = kipp_gram_new(g, G_REPEAT, err), next = UINT32_MAX, head2;
        if (rep == UINT32_MAX || (next = kipp_gram_new(g, G_SEQ, err)) == UINT32_MAX ||
            lit_node(g, &head2, err, "\n<tool_call>\n{\"name\": \"", NULL, NULL) ||
            kipp_gram_add_kid(g, next, head2, err) || kipp_gram_add_kid(g, next, alts, err) ||
            kipp_gram_add_kid(g, next, tail, err) || kipp_gram_add_kid(g, rep, seq, err))
            goto fail;
        g->nodes[rep].min = 1;
        g->nodes[rep].max = max_calls;
        g->nodes[rep].items = next;
        g->root = rep;
    }
    /* The tags are single added tokens in Qwen3; the byte spellings stay
     * allowed too (the parser reads text either way). */
    const char *tags[2] = {"<tool_call>", "</tool_call>"};
    for (int k = 0; k < 2; k++) {
        int32_t id;
        if (!find_added(model, tags[k], &id)) g->allowed_added[g->n_allowed_added++] = id;
    }
    if (kipp_gram_finish(g, err)) return err->code;
    *out = g;
    return KIPP_OK;
fail:
    kipp_grammar_destroy(g);
    return err->code ? err->code : KIPP_E_MEMORY;
}
