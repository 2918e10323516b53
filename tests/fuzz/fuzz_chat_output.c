/* libFuzzer target for the chat output splitter (src/server/chat_output.c):
 *   make fuzz-chat-output [FUZZ_SECONDS=60]
 * The first byte picks the reasoning mode (bits 0-1, mod 3) and whether tool
 * calls are parsed (bit 2); the rest is the model's output. It is fed the
 * way api_openai.c feeds it, chat_output_push per piece then
 * chat_output_finish, three times: in one push, one byte per push, and in
 * pieces of 1..8 bytes chosen by the second byte. chat_output.h promises
 * that pieces never change the result ("markers split across pushes are
 * held back until they can be decided"), so the concatenated reasoning,
 * content and calls must be identical; every delta's new calls must be the
 * next ones in order, and every call's name and arguments NUL-terminated
 * text. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/chat_output.h"
#define FUZZ_NAME "fuzz_chat_output"
#include "fuzz_util.h"


typedef struct result {
    json_buf reasoning, content, calls; /* calls: name NUL arguments NUL ... */
    bool had_reasoning;
} result;

static void collect(result *r, chat_output *o, chat_delta *d, size_t *next_call) {
    kipp_json_buf_append(&r->reasoning, d->reasoning.data, d->reasoning.length);
    kipp_json_buf_append(&r->content, d->content.data, d->content.length);
    if (d->n_calls) CHECK(d->first_call == *next_call);
    CHECK(*next_call + d->n_calls == chat_output_n_calls(o));
    for (size_t i = d->first_call; i < d->first_call + d->n_calls; i++) {
        const chat_tool_call *c = chat_output_call(o, i);
        CHECK(c->name && c->arguments && c->name[0]);
        kipp_json_buf_append(&r->calls, c->name, strlen(c->name) + 1);
        kipp_json_buf_append(&r->calls, c->arguments, strlen(c->arguments) + 1);
    }
    *next_call += d->n_calls;
    chat_delta_reset(d);
}

/* piece(i) is the size of the i-th push. */
static void run(result *r, chat_reasoning mode, bool tools, const char *text, size_t n,
                size_t (*piece)(size_t i, unsigned seed), unsigned seed) {
    memset(r, 0, sizeof *r);
    chat_output *o = chat_output_create(mode, tools);
    CHECK(o);
    chat_delta d = {0};
    size_t next_call = 0;
    for (size_t at = 0, i = 0; at < n; i++) {
        size_t k = piece(i, seed);
        if (k > n - at) k = n - at;
        chat_output_push(o, text + at, k, &d);
        collect(r, o, &d, &next_call);
        at += k;
    }
    chat_output_finish(o, &d);
    collect(r, o, &d, &next_call);
    r->had_reasoning = chat_output_had_reasoning(o);
    CHECK(!r->reasoning.failed && !r->content.failed && !r->calls.failed);
    chat_delta_free(&d);
    chat_output_destroy(o);
}

static size_t whole(size_t i, unsigned seed) { (void)i, (void)seed; return SIZE_MAX; }
static size_t bytes(size_t i, unsigned seed) { (void)i, (void)seed; return 1; }
static size_t mixed(size_t i, unsigned seed) { return 1 + ((seed >> (i % 8)) + i) % 8; }

static bool same_buf(const json_buf *a, const json_buf *b) {
    return a->length == b->length && (a->length == 0 || !memcmp(a->data, b->data, a->length));
}

static void same(const result *a, const result *b, const char *how) {
    bool ok = same_buf(&a->reasoning, &b->reasoning) && same_buf(&a->content, &b->content) &&
              same_buf(&a->calls, &b->calls) && a->had_reasoning == b->had_reasoning;
    if (!ok) {
        fprintf(stderr,
                "fuzz_chat_output: %s differs from one push:\n"
                "  reasoning %zu vs %zu bytes, content %zu vs %zu bytes (\"%.*s\" vs \"%.*s\"), "
                "calls %zu vs %zu bytes\n",
                how, a->reasoning.length, b->reasoning.length, a->content.length,
                b->content.length, (int)a->content.length, a->content.data ? a->content.data : "",
                (int)b->content.length, b->content.data ? b->content.data : "",
                a->calls.length, b->calls.length);
        abort();
    }
}

static void result_free(result *r) {
    kipp_json_buf_free(&r->reasoning);
    kipp_json_buf_free(&r->content);
    kipp_json_buf_free(&r->calls);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    static const chat_reasoning modes[3] = {CHAT_REASONING_NONE, CHAT_REASONING_LEADING,
                                            CHAT_REASONING_OPEN};
    chat_reasoning mode = modes[(data[0] & 3) % 3];
    bool tools = data[0] & 4;
    unsigned seed = data[1];
    size_t n = size - 2;
    char *text = malloc(n ? n : 1); /* exact size: ASan sees reads past the end */
    if (!text) return 0;
    memcpy(text, data + 2, n);
    result one, each, some;
    run(&one, mode, tools, text, n, whole, seed);
    run(&each, mode, tools, text, n, bytes, seed);
    run(&some, mode, tools, text, n, mixed, seed);
    same(&one, &each, "one byte per push");
    same(&one, &some, "pieces of 1..8 bytes");
    result_free(&one);
    result_free(&each);
    result_free(&some);
    free(text);
    return 0;
}
