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
 *      tool calls follow the content as "<tool_call>\n{\"name\": \"{name}\",
 *      \"arguments\": {arguments}}\n</tool_call>", each after a "\n" except
 *      the first when the content is empty;
 *      tool results: a run of consecutive "tool" messages is one user turn,
 *      "\n<tool_response>\n{c}\n</tool_response>" each
 *   4. generation prompt "<|im_start|>assistant\n", plus
 *      "<think>\n\n</think>\n\n" when enable_thinking is false.
 *      Qwen3-*-Thinking-2507's template (its tokenizer_config.json; a copy
 *      with its SHA-256 is in tests/vectors/chat/) has the same steps 1-3
 *      (it also maps non-string content to "", which the API never passes)
 *      and ends with "<|im_start|>assistant\n<think>\n" instead, whatever
 *      enable_thinking says.
 * With tools, step 1 becomes one system turn: the leading system message's
 * content + "\n\n" (if any), then the "# Tools" preamble listing each tool
 * as `tojson` prints it; that system message is then not repeated.
 *
 * Python string semantics matter for byte equality: strip('\n') removes only
 * newlines; split(s)[0] is the text before the FIRST s, split(s)[-1] the
 * text after the LAST s. tests/unit/test_chat.c checks the output against
 * @huggingface/jinja running the real template. */
#include "core/chat.h"

#include <stdio.h>
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

static const char TOOLS_HEAD[] =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
static const char TOOLS_TAIL[] =
    "\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
    "<function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n";

int kipp_chat_render_qwen3(const kipp_chat_message *m, size_t n, bool add_generation_prompt,
                      bool enable_thinking, char **text, size_t *length, kipp_error *err) {
    return kipp_chat_render_qwen3_tools(m, n, NULL, 0, add_generation_prompt, enable_thinking,
                                        text, length, err);
}

int kipp_chat_render_qwen3_tools(const kipp_chat_message *m, size_t n, const kipp_chat_tool *tools,
                                 size_t n_tools, bool add_generation_prompt, bool enable_thinking,
                                 char **text, size_t *length, kipp_error *err) {
    return kipp_chat_render_qwen3_template(KIPP_CHAT_QWEN3_HYBRID, m, n, tools, n_tools,
                                           add_generation_prompt, enable_thinking, text, length,
                                           err);
}

bool kipp_chat_prompt_in_think(const char *text, size_t length) {
    span s = {text, text ? length : 0};
    const char *open = find_last(s, "<think>"), *close = find_last(s, "</think>");
    return open && (!close || open > close);
}

int kipp_chat_render_qwen3_template(kipp_chat_template tpl, const kipp_chat_message *m, size_t n,
                                    const kipp_chat_tool *tools, size_t n_tools,
                                    bool add_generation_prompt, bool enable_thinking, char **text,
                                    size_t *length, kipp_error *err) {
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
            strcmp(m[i].role, "assistant") && strcmp(m[i].role, "tool"))
            return kipp_fail(err, KIPP_E_UNSUPPORTED,
                             "chat render: message %zu has role '%s' (supported: system, user, "
                             "assistant, tool)", i, m[i].role);
        if (m[i].n_tool_calls && (strcmp(m[i].role, "assistant") || !m[i].tool_calls))
            return kipp_fail(err, KIPP_E_ARGUMENT,
                             "chat render: tool_calls are for assistant messages only");
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
    size_t first = 0;
    if (n_tools) {
        put(&b, "<|im_start|>system\n");
        if (!strcmp(m[0].role, "system")) {
            put_span(&b, (span){m[0].content ? m[0].content : "", m[0].content_length});
            put(&b, "\n\n");
            first = 1; /* not repeated in the loop */
        }
        put(&b, TOOLS_HEAD);
        for (size_t t = 0; t < n_tools; t++) {
            put(&b, "\n");
            kipp_json_buf_append(&b, tools[t].json, tools[t].length);
        }
        put(&b, TOOLS_TAIL);
    }
    for (size_t i = first; i < n; i++) {
        span c = {m[i].content ? m[i].content : "", m[i].content_length};
        bool system = !strcmp(m[i].role, "system");
        if (!strcmp(m[i].role, "tool")) {
            if (i == 0 || strcmp(m[i - 1].role, "tool")) put(&b, "<|im_start|>user");
            put(&b, "\n<tool_response>\n");
            put_span(&b, c);
            put(&b, "\n</tool_response>");
            if (i + 1 == n || strcmp(m[i + 1].role, "tool")) put(&b, "<|im_end|>\n");
            continue;
        }
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
        for (size_t k = 0; k < m[i].n_tool_calls; k++) {
            const kipp_chat_tool_call *tc = &m[i].tool_calls[k];
            if (k > 0 || content.n) put(&b, "\n");
            put(&b, "<tool_call>\n{\"name\": \"");
            kipp_json_buf_append(&b, tc->name ? tc->name : "", tc->name_length);
            put(&b, "\", \"arguments\": ");
            kipp_json_buf_append(&b, tc->arguments ? tc->arguments : "", tc->arguments_length);
            put(&b, "}\n</tool_call>");
        }
        put(&b, "<|im_end|>\n");
    }
    if (add_generation_prompt) {
        put(&b, "<|im_start|>assistant\n");
        if (tpl == KIPP_CHAT_QWEN3_THINKING_2507) put(&b, "<think>\n");
        else if (!enable_thinking) put(&b, "<think>\n\n</think>\n\n");
    }
    if (b.failed) {
        kipp_json_buf_free(&b);
        return kipp_fail(err, KIPP_E_MEMORY, "chat render: out of memory");
    }
    *text = b.data;
    *length = b.length;
    return KIPP_OK;
}

/* JavaScript's Number.prototype.toString for finite v: the shortest
 * digits that read back as v, fixed notation for exponents -7 < e < 21,
 * else d.ddde+X. */
static void put_js_number(json_buf *b, double v) {
    if (v == 0) {
        put(b, "0"); /* -0 prints as 0 too */
        return;
    }
    char buf[40];
    int p = 1;
    for (; p < 17; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, v);
        if (strtod(buf, NULL) == v) break;
    }
    snprintf(buf, sizeof buf, "%.*e", p - 1, v);
    /* buf = [-]d[.ddd]e[+-]XX */
    char digits[20];
    int nd = 0;
    const char *q = buf;
    bool neg = *q == '-';
    if (neg) q++;
    for (; *q && *q != 'e'; q++)
        if (*q != '.') digits[nd++] = *q;
    int e = atoi(q + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    if (neg) put(b, "-");
    if (e >= -7 + 1 && e < 21) { /* -7 < e < 21: fixed */
        if (e < 0) {
            put(b, "0.");
            for (int k = 0; k < -e - 1; k++) put(b, "0");
            kipp_json_buf_append(b, digits, (size_t)nd);
        } else if (nd <= e + 1) {
            kipp_json_buf_append(b, digits, (size_t)nd);
            for (int k = nd; k < e + 1; k++) put(b, "0");
        } else {
            kipp_json_buf_append(b, digits, (size_t)e + 1);
            put(b, ".");
            kipp_json_buf_append(b, digits + e + 1, (size_t)(nd - e - 1));
        }
        return;
    }
    kipp_json_buf_append(b, digits, 1);
    if (nd > 1) {
        put(b, ".");
        kipp_json_buf_append(b, digits + 1, (size_t)nd - 1);
    }
    kipp_json_buf_appendf(b, "e%c%d", e < 0 ? '-' : '+', e < 0 ? -e : e);
}

void kipp_chat_tojson(json_buf *b, const json_value *v) {
    switch (v->type) {
    case JSON_NULL: put(b, "null"); break;
    case JSON_TRUE: put(b, "true"); break;
    case JSON_FALSE: put(b, "false"); break;
    case JSON_NUMBER: put_js_number(b, v->as.number.value); break;
    /* JSON.stringify escapes exactly what kipp_json_buf_append_string does:
     * quote, backslash, \b\f\n\r\t and other controls as \u00xx */
    case JSON_STRING: kipp_json_buf_append_string(b, v->as.string.chars, v->as.string.length); break;
    case JSON_ARRAY:
        put(b, "[");
        for (size_t i = 0; i < v->as.array.count; i++) {
            if (i) put(b, ", ");
            kipp_chat_tojson(b, v->as.array.items[i]);
        }
        put(b, "]");
        break;
    case JSON_OBJECT:
        put(b, "{");
        for (size_t i = 0; i < v->as.object.count; i++) {
            if (i) put(b, ", ");
            kipp_json_buf_append_string(b, v->as.object.keys[i], v->as.object.key_lengths[i]);
            put(b, ": ");
            kipp_chat_tojson(b, v->as.object.values[i]);
        }
        put(b, "}");
        break;
    }
}

int kipp_chat_render(const kipp_model *model, const kipp_chat_message *messages,
                     size_t n_messages, bool add_generation_prompt, bool enable_thinking,
                     char **text, size_t *length, kipp_error *err) {
    return kipp_chat_render_tools(model, messages, n_messages, NULL, 0, add_generation_prompt,
                                  enable_thinking, text, length, err);
}

int kipp_chat_render_tools(const kipp_model *model, const kipp_chat_message *messages,
                           size_t n_messages, const kipp_chat_tool *tools, size_t n_tools,
                           bool add_generation_prompt, bool enable_thinking, char **text,
                           size_t *length, kipp_error *err) {
    if (!model) return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_chat_render: NULL model");
    const kipp_checkpoint *ck = kipp_model_checkpoint(model);
    kipp_chat_template tpl;
    if (ck->variant == KIPP_VARIANT_INSTRUCT) tpl = KIPP_CHAT_QWEN3_HYBRID;
    else if (ck->variant == KIPP_VARIANT_THINKING_2507) tpl = KIPP_CHAT_QWEN3_THINKING_2507;
    else
        return kipp_fail(err, KIPP_E_UNSUPPORTED,
                         "%s is a %s checkpoint; chat rendering is implemented for the Qwen3 "
                         "instruct (hybrid thinking) and thinking-2507 templates only",
                         ck->id, kipp_variant_name(ck->variant));
    return kipp_chat_render_qwen3_template(tpl, messages, n_messages, tools, n_tools,
                                           add_generation_prompt, enable_thinking, text, length,
                                           err);
}
