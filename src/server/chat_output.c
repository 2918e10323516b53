/* Reasoning / content / tool-call splitting; see chat_output.h.
 *
 * A small state machine over a buffer of bytes not yet decided (pend):
 *   START    (leading reasoning) is the output a think block? wait while pend
 *            is a proper prefix of "<think>"; open reasoning starts in REASON
 *   REASON   up to "</think>"; holds back a possible partial tag and the
 *            newlines that may turn out to precede it
 *   CONTENT  up to "<tool_call>" (tools on); holds back a partial tag and
 *            trailing whitespace
 *   CALL     everything up to "</tool_call>" is buffered, then parsed */
#include "server/chat_output.h"

#include <stdlib.h>
#include <string.h>

#include "core/chat.h"

typedef enum mode { M_START, M_REASON, M_CONTENT, M_CALL } mode;

static const char THINK_OPEN[] = "<think>", THINK_CLOSE[] = "</think>";
static const char CALL_OPEN[] = "<tool_call>", CALL_CLOSE[] = "</tool_call>";

struct chat_output {
    bool tools;
    mode mode;
    bool skip_nl;    /* drop leading newlines of what comes next */
    bool reasoned;
    char *pend;
    size_t n, cap;
    chat_tool_call *calls;
    size_t n_calls, cap_calls;
};

chat_reasoning chat_reasoning_for(kipp_variant variant, const char *prompt, size_t n,
                                  bool constrained, bool *close_think) {
    *close_think = false;
    if (variant == KIPP_VARIANT_INSTRUCT) return CHAT_REASONING_LEADING;
    if (variant != KIPP_VARIANT_THINKING_2507 || !kipp_chat_prompt_in_think(prompt, n))
        return CHAT_REASONING_NONE;
    if (!constrained) return CHAT_REASONING_OPEN;
    *close_think = true;
    return CHAT_REASONING_NONE;
}

chat_output *chat_output_create(chat_reasoning reasoning, bool tools) {
    chat_output *o = calloc(1, sizeof *o);
    if (!o) return NULL;
    /* pend is never NULL: the steps compare, move and append its first
     * o->n bytes even when o->n is 0 (an empty output: end of text first),
     * and those library calls take no NULL pointer, whatever the length. */
    o->cap = 256;
    o->pend = malloc(o->cap);
    if (!o->pend) {
        free(o);
        return NULL;
    }
    o->tools = tools;
    o->mode = reasoning == CHAT_REASONING_LEADING ? M_START
              : reasoning == CHAT_REASONING_OPEN  ? M_REASON
                                                  : M_CONTENT;
    if (reasoning == CHAT_REASONING_OPEN) {
        /* as after a "<think>" the model wrote: the field is present even
         * when the block turns out empty; leading newlines are layout */
        o->reasoned = true;
        o->skip_nl = true;
    }
    return o;
}

void chat_output_destroy(chat_output *o) {
    if (!o) return;
    for (size_t i = 0; i < o->n_calls; i++) {
        free(o->calls[i].name);
        free(o->calls[i].arguments);
    }
    free(o->calls);
    free(o->pend);
    free(o);
}

size_t chat_output_n_calls(const chat_output *o) { return o->n_calls; }
const chat_tool_call *chat_output_call(const chat_output *o, size_t i) { return &o->calls[i]; }
bool chat_output_had_reasoning(const chat_output *o) { return o->reasoned; }

void chat_delta_reset(chat_delta *d) {
    d->reasoning.length = 0;
    d->content.length = 0;
    d->n_calls = 0;
}

void chat_delta_free(chat_delta *d) {
    kipp_json_buf_free(&d->reasoning);
    kipp_json_buf_free(&d->content);
    memset(d, 0, sizeof *d);
}

static void consume(chat_output *o, size_t k) {
    memmove(o->pend, o->pend + k, o->n - k);
    o->n -= k;
}

static const char *find(const char *p, size_t n, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = 0; k <= n && i <= n - k; i++)
        if (!memcmp(p + i, needle, k)) return p + i;
    return NULL;
}

/* Length of the longest suffix of p[0..n) that is a proper prefix of tag. */
static size_t partial_tag(const char *p, size_t n, const char *tag) {
    size_t k = strlen(tag);
    for (size_t h = k - 1 < n ? k - 1 : n; h > 0; h--)
        if (!memcmp(p + n - h, tag, h)) return h;
    return 0;
}

static bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

static void add_call(chat_output *o, chat_delta *d, const char *body, size_t n) {
    json_doc *doc = NULL;
    kipp_error err;
    bool ok = false;
    if (!kipp_json_parse(body, n, &doc, &err)) {
        const json_value *root = kipp_json_root(doc);
        const json_value *name = kipp_json_get_type(root, "name", JSON_STRING);
        const json_value *args = kipp_json_get(root, "arguments");
        if (root->type == JSON_OBJECT && name && name->as.string.length &&
            strlen(name->as.string.chars) == name->as.string.length &&
            (!args || args->type == JSON_OBJECT || args->type == JSON_STRING)) {
            json_buf a = {0};
            if (!args) kipp_json_buf_append(&a, "{}", 2);
            else if (args->type == JSON_STRING)
                kipp_json_buf_append(&a, args->as.string.chars, args->as.string.length);
            else kipp_chat_tojson(&a, args);
            kipp_json_buf_append(&a, "", 0);
            if (o->n_calls == o->cap_calls) {
                size_t cap = o->cap_calls ? o->cap_calls * 2 : 4;
                chat_tool_call *p = realloc(o->calls, cap * sizeof *p);
                if (p) o->calls = p, o->cap_calls = cap;
            }
            char *nm = strdup(name->as.string.chars);
            if (o->n_calls < o->cap_calls && nm && !a.failed) {
                o->calls[o->n_calls++] = (chat_tool_call){nm, a.data};
                if (d->n_calls == 0) d->first_call = o->n_calls - 1;
                d->n_calls++;
                ok = true;
            } else {
                free(nm);
                kipp_json_buf_free(&a);
            }
        }
        kipp_json_free(doc);
    }
    if (!ok) { /* not a call: keep the text */
        kipp_json_buf_append(&d->content, CALL_OPEN, strlen(CALL_OPEN));
        kipp_json_buf_append(&d->content, body, n);
        kipp_json_buf_append(&d->content, CALL_CLOSE, strlen(CALL_CLOSE));
    }
}

/* Decides as much of pend as it can; `final`: nothing more will come. */
static void process(chat_output *o, chat_delta *d, bool final) {
    for (;;) {
        if (o->skip_nl) {
            size_t k = 0;
            while (k < o->n && o->pend[k] == '\n') k++;
            consume(o, k);
            if (o->n == 0) return; /* still skipping */
            o->skip_nl = false;
        }
        switch (o->mode) {
        case M_START: {
            size_t k = strlen(THINK_OPEN);
            if (o->n >= k && !memcmp(o->pend, THINK_OPEN, k)) {
                consume(o, k);
                o->mode = M_REASON;
                o->reasoned = true;
                o->skip_nl = true;
                continue;
            }
            if (!final && o->n < k && !memcmp(o->pend, THINK_OPEN, o->n)) return;
            o->mode = M_CONTENT;
            continue;
        }
        case M_REASON: {
            const char *close = find(o->pend, o->n, THINK_CLOSE);
            size_t end = close ? (size_t)(close - o->pend) : o->n;
            size_t hold = close || final ? 0 : partial_tag(o->pend, o->n, THINK_CLOSE);
            size_t emit = end - hold;
            if (close || !final)
                while (emit > 0 && o->pend[emit - 1] == '\n') emit--; /* may precede the tag */
            kipp_json_buf_append(&d->reasoning, o->pend, emit);
            if (!close) {
                /* keep the held newlines + partial tag; drop what was emitted */
                consume(o, emit);
                return;
            }
            consume(o, end + strlen(THINK_CLOSE));
            o->mode = M_CONTENT;
            o->skip_nl = true;
            continue;
        }
        case M_CONTENT: {
            if (!o->tools) {
                kipp_json_buf_append(&d->content, o->pend, o->n);
                consume(o, o->n);
                return;
            }
            const char *open = find(o->pend, o->n, CALL_OPEN);
            size_t end = open ? (size_t)(open - o->pend) : o->n;
            size_t hold = open || final ? 0 : partial_tag(o->pend, o->n, CALL_OPEN);
            size_t emit = end - hold;
            /* whitespace before a call, or at the end once calls were made,
             * is layout, not content */
            if (open || !final || o->n_calls)
                while (emit > 0 && is_ws(o->pend[emit - 1])) emit--;
            kipp_json_buf_append(&d->content, o->pend, emit);
            if (!open) {
                if (final) consume(o, o->n);
                else consume(o, emit);
                return;
            }
            consume(o, end + strlen(CALL_OPEN));
            o->mode = M_CALL;
            continue;
        }
        case M_CALL: {
            const char *close = find(o->pend, o->n, CALL_CLOSE);
            if (!close) {
                if (final) { /* cut off: the text stays content */
                    kipp_json_buf_append(&d->content, CALL_OPEN, strlen(CALL_OPEN));
                    kipp_json_buf_append(&d->content, o->pend, o->n);
                    consume(o, o->n);
                }
                return;
            }
            size_t n = (size_t)(close - o->pend);
            add_call(o, d, o->pend, n);
            consume(o, n + strlen(CALL_CLOSE));
            o->mode = M_CONTENT;
            continue;
        }
        }
    }
}

void chat_output_push(chat_output *o, const char *text, size_t n, chat_delta *d) {
    if (o->n + n > o->cap) {
        size_t cap = o->cap;
        while (cap < o->n + n) cap *= 2;
        char *p = realloc(o->pend, cap);
        if (!p) { /* out of memory: pass the text through undecided */
            kipp_json_buf_append(&d->content, text, n);
            return;
        }
        o->pend = p;
        o->cap = cap;
    }
    if (n) memcpy(o->pend + o->n, text, n);
    o->n += n;
    process(o, d, false);
}

void chat_output_finish(chat_output *o, chat_delta *d) { process(o, d, true); }
