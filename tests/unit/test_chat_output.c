/* The output splitter (src/server/chat_output.c): reasoning, content and
 * tool calls out of a Qwen3 chat model's text. Each case is fed whole, and
 * then split at every byte boundary (two pushes) and byte by byte: a stream
 * must yield exactly what the whole text yields, whatever the chunking. The
 * expected splits follow the chat template's own reading of an assistant
 * turn (content after the last "</think>", newlines stripped at the seams),
 * checked against the Jinja renderings in test_chat for the render side. */
#include <string.h>

#include "server/chat_output.h"
#include "test_util.h"

typedef struct result {
    json_buf reasoning, content, calls; /* calls as "name(args);" */
    bool had_reasoning;
} result;

static void collect(chat_output *o, chat_delta *d, result *r) {
    kipp_json_buf_append(&r->reasoning, d->reasoning.data ? d->reasoning.data : "", d->reasoning.length);
    kipp_json_buf_append(&r->content, d->content.data ? d->content.data : "", d->content.length);
    for (size_t k = d->first_call; k < d->first_call + d->n_calls; k++) {
        const chat_tool_call *c = chat_output_call(o, k);
        kipp_json_buf_appendf(&r->calls, "%s(%s);", c->name, c->arguments);
    }
    chat_delta_reset(d);
}

/* Splits text in pieces at the given cut points (sorted; 0 = none). */
static void run(const char *text, chat_reasoning reasoning, bool tools, const size_t *cuts, size_t n_cuts,
                result *r) {
    memset(r, 0, sizeof *r);
    kipp_json_buf_append(&r->reasoning, "", 0);
    kipp_json_buf_append(&r->content, "", 0);
    kipp_json_buf_append(&r->calls, "", 0);
    chat_output *o = chat_output_create(reasoning, tools);
    chat_delta d = {0};
    size_t at = 0, n = strlen(text);
    for (size_t i = 0; i <= n_cuts; i++) {
        size_t end = i < n_cuts ? cuts[i] : n;
        chat_output_push(o, text + at, end - at, &d);
        collect(o, &d, r);
        at = end;
    }
    chat_output_finish(o, &d);
    collect(o, &d, r);
    r->had_reasoning = chat_output_had_reasoning(o);
    chat_delta_free(&d);
    chat_output_destroy(o);
}

static void free_result(result *r) {
    kipp_json_buf_free(&r->reasoning);
    kipp_json_buf_free(&r->content);
    kipp_json_buf_free(&r->calls);
}

static bool same(const json_buf *b, const char *want) {
    return b->length == strlen(want) && !memcmp(b->data, want, b->length);
}

#define OPEN CHAT_REASONING_OPEN

typedef struct tcase {
    const char *text;
    chat_reasoning reasoning; /* false/true: none/leading */
    bool tools;
    const char *want_reasoning, *want_content, *want_calls;
} tcase;

static const tcase CASES[] = {
    {"plain answer", true, true, "", "plain answer", ""},
    /* nothing at all (end of text first): finish on a splitter that never
     * buffered a byte (it moved 0 bytes from a NULL buffer: UBSan,
     * found by tests/fuzz/fuzz_chat_output.c) */
    {"", false, false, "", "", ""},
    {"", true, true, "", "", ""},
    {"", OPEN, true, "", "", ""},
    {"<think>\nplan\nmore\n</think>\n\nanswer\n", true, false, "plan\nmore", "answer\n", ""},
    {"<think>\n\n</think>\n\nok", true, false, "", "ok", ""},
    {"<think>unterminated\n", true, false, "unterminated\n", "", ""},
    {"<thi", true, false, "", "<thi", ""},
    {"x<think>y</think>z", true, false, "", "x<think>y</think>z", ""},
    {"<think>a</think>b</think>c", true, false, "a", "b</think>c", ""},
    {"<think>r</think>\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>",
     true, true, "r", "", "f({\"a\": 1});"},
    {"Let me check.\n<tool_call>\n{\"name\": \"w\", \"arguments\": {\"city\": \"Paris\"}}\n"
     "</tool_call>\n<tool_call>\n{\"name\": \"w\", \"arguments\": \"{\\\"city\\\":\\\"Rome\\\"}\"}\n"
     "</tool_call>\n",
     false, true, "", "Let me check.", "w({\"city\": \"Paris\"});w({\"city\":\"Rome\"});"},
    {"<tool_call>\nnot json\n</tool_call> tail", false, true, "", "<tool_call>\nnot json\n</tool_call> tail", ""},
    {"<tool_call>\n{\"name\": \"f\"}\n</tool_call>", false, true, "", "", "f({});"},
    {"<tool_call>\n{\"name\": \"f\", \"arguments\": {}", false, true, "",
     "<tool_call>\n{\"name\": \"f\", \"arguments\": {}", ""},
    {"<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", false, false, "",
     "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", ""},
    {"text <tool_ca", false, true, "", "text <tool_ca", ""},
    {"a  \n", false, true, "", "a  \n", ""},
    {"Grüße 🌍 <think>", true, true, "", "Grüße 🌍 <think>", ""},
    /* thinking-2507: the prompt opened the block, the output only closes it */
    {"step\nmore\n</think>\n\nanswer", OPEN, false, "step\nmore", "answer", ""},
    {"\n\nstep</think>answer\n", OPEN, true, "step", "answer\n", ""},
    {"unterminated thought\n", OPEN, true, "unterminated thought\n", "", ""},
    {"</think>\n\nquick", OPEN, false, "", "quick", ""},
    {"<think>x</think>y", OPEN, false, "<think>x", "y", ""},
    {"r\n</think>\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>",
     OPEN, true, "r", "", "f({\"a\": 1});"},
    {"a <tool_call>\n{\"name\": \"f\"}\n</tool_call> b</think>c", OPEN, true,
     "a <tool_call>\n{\"name\": \"f\"}\n</tool_call> b", "c", ""},
    /* instruct-2507 (no reasoning): a stray close tag is content */
    {"a</think>b", false, true, "", "a</think>b", ""},
};

/* The server's choice of splitting, per variant and rendered prompt. */
static void test_reasoning_for(void) {
    static const char HYBRID[] = "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n";
    static const char NOTHINK[] = "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n"
                                  "<think>\n\n</think>\n\n";
    static const char T2507[] = "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\n";
    static const struct {
        kipp_variant v;
        const char *prompt;
        bool constrained;
        chat_reasoning want;
        bool close;
    } C[] = {
        {KIPP_VARIANT_INSTRUCT, HYBRID, false, CHAT_REASONING_LEADING, false},
        {KIPP_VARIANT_INSTRUCT, NOTHINK, false, CHAT_REASONING_LEADING, false},
        {KIPP_VARIANT_INSTRUCT, HYBRID, true, CHAT_REASONING_LEADING, false},
        {KIPP_VARIANT_THINKING_2507, T2507, false, CHAT_REASONING_OPEN, false},
        {KIPP_VARIANT_THINKING_2507, T2507, true, CHAT_REASONING_NONE, true},
        {KIPP_VARIANT_THINKING_2507, NOTHINK, false, CHAT_REASONING_NONE, false},
        {KIPP_VARIANT_INSTRUCT_2507, T2507, false, CHAT_REASONING_NONE, false},
        {KIPP_VARIANT_INSTRUCT_2507, HYBRID, false, CHAT_REASONING_NONE, false},
        {KIPP_VARIANT_BASE, T2507, false, CHAT_REASONING_NONE, false},
    };
    for (size_t i = 0; i < sizeof C / sizeof *C; i++) {
        bool close = !C[i].close;
        chat_reasoning got = chat_reasoning_for(C[i].v, C[i].prompt, strlen(C[i].prompt),
                                                C[i].constrained, &close);
        CHECKF(got == C[i].want && close == C[i].close, "reasoning_for case %zu: %d %d", i,
               (int)got, (int)close);
    }
    /* closing the 2507 prompt gives a prompt no longer inside a think block */
    char closed[sizeof T2507 + sizeof CHAT_CLOSE_THINK];
    snprintf(closed, sizeof closed, "%s%s", T2507, CHAT_CLOSE_THINK);
    bool close = true;
    CHECK(chat_reasoning_for(KIPP_VARIANT_THINKING_2507, closed, strlen(closed), false, &close) ==
              CHAT_REASONING_NONE && !close);
}

int main(void) {
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
        const tcase *c = &CASES[i];
        size_t n = strlen(c->text);
        result whole;
        run(c->text, c->reasoning, c->tools, NULL, 0, &whole);
        CHECKF(same(&whole.reasoning, c->want_reasoning), "case %zu reasoning '%.*s'", i,
               (int)whole.reasoning.length, whole.reasoning.data);
        CHECKF(same(&whole.content, c->want_content), "case %zu content '%.*s'", i,
               (int)whole.content.length, whole.content.data);
        CHECKF(same(&whole.calls, c->want_calls), "case %zu calls '%.*s'", i,
               (int)whole.calls.length, whole.calls.data);
        CHECK(whole.had_reasoning == (c->reasoning == OPEN ||
                                      (c->reasoning && !strncmp(c->text, "<think>", 7))));
        /* every two-piece split, then byte by byte */
        size_t cuts[512];
        for (size_t k = 1; k < n; k++) {
            result r;
            run(c->text, c->reasoning, c->tools, &k, 1, &r);
            CHECKF(same(&r.reasoning, c->want_reasoning) && same(&r.content, c->want_content) &&
                       same(&r.calls, c->want_calls),
                   "case %zu split at %zu", i, k);
            free_result(&r);
        }
        for (size_t k = 1; k < n && k <= 512; k++) cuts[k - 1] = k;
        result r;
        size_t n_cuts = n == 0 ? 0 : n - 1 < 512 ? n - 1 : 512; /* "" has no cut */
        run(c->text, c->reasoning, c->tools, cuts, n_cuts, &r);
        CHECKF(same(&r.reasoning, c->want_reasoning) && same(&r.content, c->want_content) &&
                   same(&r.calls, c->want_calls),
               "case %zu byte by byte", i);
        free_result(&r);
        free_result(&whole);
    }
    test_reasoning_for();
    return test_finish("test_chat_output");
}
