/* Qwen3 ChatML rendering, written from the template's logic (the Jinja text
 * in tokenizer_config.json), step by step:
 *
 *   1. a leading system message -> "<|im_start|>system\n{content}<|im_end|>\n"
 *   2. last_query_index = index of the last user message that is not a
 *      wrapped "<tool_response>...</tool_response>" (default: last index)
 *   3. per message: user / later system -> "<|im_start|>{role}\n{c}<|im_end|>\n";
 *      assistant -> content with any "<think>...</think>" split off into
 *      reasoning; turns after last_query_index keep their reasoning as
 *      "<think>\n{r}\n</think>\n\n" (always for the final message),
 *      earlier turns drop it; then "<|im_end|>\n"
 *   4. generation prompt "<|im_start|>assistant\n", plus
 *      "<think>\n\n</think>\n\n" when enable_thinking is false.
 *
 * Python string semantics matter for byte equality: strip('\n') removes only
 * newlines; split(s)[0] is the text before the FIRST s, split(s)[-1] the
 * text after the LAST s. tests/unit/test_chat.c checks the output against
 * @huggingface/jinja running the real template. */
#include "core/chat.h"

#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/json.h"

typedef struct span {
    const char *p;
    size_t n;
} span;

static span lstrip_nl(span s) {
    while (s.n && s.p[0] == '\n') s.p++, s.n--;
    return s;
}
static span rstrip_nl(span s) {
    while (s.n && s.p[s.n - 1] == '\n') s.n--;
    return s;
}

/* First / last occurrence of needle in s; NULL when absent. */
static const char *find_first(span s, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = 0; k <= s.n && i <= s.n - k; i++)
        if (!memcmp(s.p + i, needle, k)) return s.p + i;
    return NULL;
}
static const char *find_last(span s, const char *needle) {
    size_t k = strlen(needle);
    if (k > s.n) return NULL;
    for (size_t i = s.n - k + 1; i-- > 0;)
        if (!memcmp(s.p + i, needle, k)) return s.p + i;
    return NULL;
}

static bool starts_with(span s, const char *t) {
    size_t k = strlen(t);
    return s.n >= k && !memcmp(s.p, t, k);
}
static bool ends_with(span s, const char *t) {
    size_t k = strlen(t);
    return s.n >= k && !memcmp(s.p + s.n - k, t, k);
}

static void put(json_buf *b, const char *s) { kipp_json_buf_append(b, s, strlen(s)); }
static void put_span(json_buf *b, span s) { kipp_json_buf_append(b, s.p, s.n); }

int kipp_chat_render_qwen3(const kipp_chat_message *m, size_t n, bool add_generation_prompt,
                      bool enable_thinking, char **text, size_t *length, kipp_error *err) {
    if (!text || !length || (!m && n))
        return kipp_fail(err, KIPP_E_ARGUMENT, "chat render: NULL argument");
    *text = NULL;
    *length = 0;
    if (n == 0) return kipp_fail(err, KIPP_E_ARGUMENT, "chat render: no messages");
    for (size_t i = 0; i < n; i++) {
        if (!m[i].role || (!m[i].content && m[i].content_length) ||
            (!m[i].reasoning_content && m[i].reasoning_length))
            return kipp_fail(err, KIPP_E_ARGUMENT, "chat render: message %zu is incomplete", i);
        if (strcmp(m[i].role, "system") && strcmp(m[i].role, "user") &&
            strcmp(m[i].role, "assistant"))
            return kipp_fail(err, KIPP_E_UNSUPPORTED,
                             "chat render: message %zu has role '%s' (supported: system, user, "
                             "assistant)", i, m[i].role);
        if (m[i].reasoning_content && strcmp(m[i].role, "assistant"))
            return kipp_fail(err, KIPP_E_ARGUMENT,
                             "chat render: reasoning_content is for assistant messages only");
    }

    /* step 2 */
    size_t last_query = n - 1;
    for (size_t k = n; k-- > 0;) {
        span c = {m[k].content ? m[k].content : "", m[k].content_length};
        if (!strcmp(m[k].role, "user") &&
            !(starts_with(c, "<tool_response>") && ends_with(c, "</tool_response>"))) {
            last_query = k;
            break;
        }
    }

    json_buf b = {0};
    kipp_json_buf_append(&b, "", 0); /* an empty conversation still yields "" */
    for (size_t i = 0; i < n; i++) {
        span c = {m[i].content ? m[i].content : "", m[i].content_length};
        bool system = !strcmp(m[i].role, "system");
        if (!strcmp(m[i].role, "user") || system) {
            /* step 1 is the same bytes as step 3 for a leading system turn */
            put(&b, "<|im_start|>");
            put(&b, m[i].role);
            put(&b, "\n");
            put_span(&b, c);
            put(&b, "<|im_end|>\n");
            continue;
        }
        /* assistant */
        span content = c, reasoning = {"", 0};
        if (m[i].reasoning_content) {
            reasoning = (span){m[i].reasoning_content, m[i].reasoning_length};
        } else if (find_first(c, "</think>")) {
            const char *last_close = find_last(c, "</think>");
            content = lstrip_nl((span){last_close + 8, (size_t)(c.p + c.n - (last_close + 8))});
            const char *first_close = find_first(c, "</think>");
            span before = rstrip_nl((span){c.p, (size_t)(first_close - c.p)});
            const char *open = find_last(before, "<think>");
            if (open) before = (span){open + 7, (size_t)(before.p + before.n - (open + 7))};
            reasoning = lstrip_nl(before);
        }
        put(&b, "<|im_start|>assistant\n");
        bool last = i + 1 == n;
        if (i > last_query && (last || reasoning.n)) {
            put(&b, "<think>\n");
            put_span(&b, rstrip_nl(lstrip_nl(reasoning)));
            put(&b, "\n</think>\n\n");
            put_span(&b, lstrip_nl(content));
        } else {
            put_span(&b, content);
        }
        put(&b, "<|im_end|>\n");
    }
    if (add_generation_prompt) {
        put(&b, "<|im_start|>assistant\n");
        if (!enable_thinking) put(&b, "<think>\n\n</think>\n\n");
    }
    if (b.failed) {
        kipp_json_buf_free(&b);
        return kipp_fail(err, KIPP_E_MEMORY, "chat render: out of memory");
    }
    *text = b.data;
    *length = b.length;
    return KIPP_OK;
}

int kipp_chat_render(const kipp_model *model, const kipp_chat_message *messages,
                     size_t n_messages, bool add_generation_prompt, bool enable_thinking,
                     char **text, size_t *length, kipp_error *err) {
    if (!model) return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_chat_render: NULL model");
    const kipp_checkpoint *ck = kipp_model_checkpoint(model);
    if (ck->variant != KIPP_VARIANT_INSTRUCT)
        return kipp_fail(err, KIPP_E_UNSUPPORTED,
                         "%s is a %s checkpoint; chat rendering is implemented for the Qwen3 "
                         "instruct (hybrid thinking) template only",
                         ck->id, kipp_variant_name(ck->variant));
    return kipp_chat_render_qwen3(messages, n_messages, add_generation_prompt, enable_thinking, text,
                             length, err);
}
