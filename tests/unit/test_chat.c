/* ChatML rendering against goldens from an independent engine:
 * tests/vectors/chat/qwen3_chatml_golden.json holds conversations rendered by
 * @huggingface/jinja from the Qwen3 template (generator command inside the
 * file). Every case must match byte for byte. The same conversations under
 * Qwen3-4B-Thinking-2507's template (qwen3_thinking_2507_*_golden.json) must
 * match the thinking-2507 renderer; that template is the one in the pinned
 * copy of the checkpoint's tokenizer_config.json (SHA-256 below, the file at
 * the registry's revision). Then the public entry point:
 * the instruct fixture's own template must be the one the goldens came from
 * (SHA-256), and a base checkpoint must refuse to render. */
#include <math.h>
#include <stdint.h>

#include "core/chat.h"
#include "core/common.h"
#include "core/json.h"
#include "core/sha256.h"
#include "kipp.h"
#include "test_util.h"

#define GOLDEN "tests/vectors/chat/qwen3_chatml_golden.json"
#define TOOLS_GOLDEN "tests/vectors/chat/qwen3_tools_golden.json"
#define GOLDEN_2507 "tests/vectors/chat/qwen3_thinking_2507_chatml_golden.json"
#define TOOLS_GOLDEN_2507 "tests/vectors/chat/qwen3_thinking_2507_tools_golden.json"
#define CONFIG_2507 "tests/vectors/chat/qwen3-4b-thinking-2507.tokenizer_config.json"
/* Qwen/Qwen3-4B-Thinking-2507 tokenizer_config.json at revision
 * 768f209d9ea81521153ed38c47d515654e938aea */
#define CONFIG_2507_SHA "60adcfc35f5f251e19a196ec977b4ca0fcfb534852911b3196d68d5e3b146aa0"
#define MAX_CALLS 64 /* tool calls over one conversation */

static void show_diff(const char *want, size_t wn, const char *got, size_t gn) {
    size_t i = 0;
    while (i < wn && i < gn && want[i] == got[i]) i++;
    fprintf(stderr, "  first difference at byte %zu (want %zu bytes, got %zu)\n", i, wn, gn);
    fprintf(stderr, "  want: %.*s\n  got:  %.*s\n", (int)(wn - i < 60 ? wn - i : 60), want + i,
            (int)(gn - i < 60 ? gn - i : 60), got + i);
}

/* Tool calls of the conversation being loaded: names point into the
 * golden document; arguments are the string as given, or an object printed
 * by kipp_chat_tojson (as the template's tojson does). */
static kipp_chat_tool_call calls[MAX_CALLS];
static json_buf call_args[MAX_CALLS];
static size_t n_calls;

static void free_calls(void) {
    for (size_t i = 0; i < n_calls; i++) kipp_json_buf_free(&call_args[i]);
    memset(call_args, 0, sizeof call_args);
    n_calls = 0;
}

static bool load_calls(const json_value *tc, kipp_chat_message *msg) {
    if (!tc) return true;
    if (tc->type != JSON_ARRAY) return false;
    msg->tool_calls = calls + n_calls;
    msg->n_tool_calls = tc->as.array.count;
    for (size_t k = 0; k < tc->as.array.count; k++) {
        if (n_calls == MAX_CALLS) return false;
        const json_value *f = kipp_json_get_type(tc->as.array.items[k], "function", JSON_OBJECT);
        const json_value *name = kipp_json_get_type(f, "name", JSON_STRING);
        const json_value *args = kipp_json_get(f, "arguments");
        if (!name || !args) return false;
        json_buf *b = &call_args[n_calls];
        if (args->type == JSON_STRING) kipp_json_buf_append(b, args->as.string.chars, args->as.string.length);
        else kipp_chat_tojson(b, args);
        calls[n_calls++] = (kipp_chat_tool_call){name->as.string.chars, name->as.string.length,
                                                 b->data ? b->data : "", b->length};
    }
    return true;
}

/* Fills msgs from a JSON messages array; returns the count or -1. */
static long load_messages(const json_value *arr, kipp_chat_message *msgs, size_t cap) {
    if (!arr || arr->type != JSON_ARRAY || arr->as.array.count > cap) return -1;
    for (size_t i = 0; i < arr->as.array.count; i++) {
        const json_value *m = arr->as.array.items[i];
        const json_value *c = kipp_json_get_type(m, "content", JSON_STRING);
        const json_value *r = kipp_json_get_type(m, "reasoning_content", JSON_STRING);
        msgs[i] = (kipp_chat_message){
            .role = kipp_json_get_string(m, "role"),
            .content = c ? c->as.string.chars : NULL,
            .content_length = c ? c->as.string.length : 0,
            .reasoning_content = r ? r->as.string.chars : NULL,
            .reasoning_length = r ? r->as.string.length : 0,
        };
        if (!msgs[i].role || !c || !load_calls(kipp_json_get(m, "tool_calls"), &msgs[i])) return -1;
    }
    return (long)arr->as.array.count;
}

static void test_goldens(const char *path, kipp_chat_template tpl, char template_sha[65]) {
    kipp_error err = {0};
    char *data = NULL;
    size_t size = 0;
    CHECKF(kipp_read_file(path, &data, &size, &err) == 0, "%s", err.message);
    if (!data) return;
    json_doc *doc = NULL;
    CHECKF(kipp_json_parse(data, size, &doc, &err) == 0, "%s", err.message);
    if (!doc) {
        free(data);
        return;
    }
    const json_value *root = kipp_json_root(doc);
    const char *sha = kipp_json_get_string(root, "template_sha256");
    CHECK(sha && strlen(sha) == 64);
    if (sha) snprintf(template_sha, 65, "%s", sha);
    const json_value *cases = kipp_json_get_type(root, "cases", JSON_ARRAY);
    CHECK(cases && cases->as.array.count >= 60);
    size_t matched = 0, total = cases ? cases->as.array.count : 0;
    for (size_t i = 0; i < total; i++) {
        const json_value *c = cases->as.array.items[i];
        kipp_chat_message msgs[16];
        long n = load_messages(kipp_json_get(c, "messages"), msgs, 16);
        bool gen = false, think = true;
        CHECK(kipp_json_get_bool(c, "add_generation_prompt", &gen));
        const json_value *et = kipp_json_get(c, "enable_thinking");
        /* null = not defined in the template context = thinking on */
        if (et && et->type == JSON_FALSE) think = false;
        const json_value *want = kipp_json_get_type(c, "expected", JSON_STRING);
        CHECK(n > 0 && want);
        if (n <= 0 || !want) continue;
        char *got = NULL;
        size_t got_n = 0;
        int rc = kipp_chat_render_qwen3_template(tpl, msgs, (size_t)n, NULL, 0, gen, think, &got,
                                                 &got_n, &err);
        CHECKF(rc == 0, "%s case %zu: %s", path, i, err.message);
        if (rc) continue;
        bool same = got_n == want->as.string.length && !memcmp(got, want->as.string.chars, got_n);
        CHECKF(same, "%s case %zu differs from the Jinja rendering", path, i);
        if (!same) show_diff(want->as.string.chars, want->as.string.length, got, got_n);
        matched += same;
        free(got);
    }
    fprintf(stderr, "test_chat: %zu/%zu golden renderings match (%s)\n", matched, total, path);
    kipp_json_free(doc);
    free(data);
}

/* The tool conversations: tools printed by kipp_chat_tojson, rendered with
 * tool calls and results. */
static void test_tool_goldens(const char *path, kipp_chat_template tpl, const char *template_sha) {
    kipp_error err = {0};
    char *data = NULL;
    size_t size = 0;
    CHECKF(kipp_read_file(path, &data, &size, &err) == 0, "%s", err.message);
    json_doc *doc = NULL;
    if (!data || kipp_json_parse(data, size, &doc, &err)) {
        CHECKF(0, "%s", err.message);
        free(data);
        return;
    }
    const json_value *root = kipp_json_root(doc);
    const char *sha = kipp_json_get_string(root, "template_sha256");
    CHECK(sha && !strcmp(sha, template_sha)); /* both goldens from the same template */
    const json_value *cases = kipp_json_get_type(root, "cases", JSON_ARRAY);
    CHECK(cases && cases->as.array.count >= 40);
    size_t matched = 0, total = cases ? cases->as.array.count : 0;
    for (size_t i = 0; i < total; i++) {
        const json_value *c = cases->as.array.items[i];
        kipp_chat_message msgs[16];
        memset(msgs, 0, sizeof msgs);
        free_calls();
        long n = load_messages(kipp_json_get(c, "messages"), msgs, 16);
        const json_value *tl = kipp_json_get_type(c, "tools", JSON_ARRAY);
        kipp_chat_tool tools[8];
        json_buf tj[8] = {{0}};
        size_t n_tools = tl ? tl->as.array.count : 0;
        CHECK(n > 0 && tl && n_tools <= 8);
        if (n <= 0 || !tl || n_tools > 8) continue;
        for (size_t k = 0; k < n_tools; k++) {
            kipp_chat_tojson(&tj[k], tl->as.array.items[k]);
            tools[k] = (kipp_chat_tool){tj[k].data, tj[k].length};
        }
        bool gen = false, think = true;
        CHECK(kipp_json_get_bool(c, "add_generation_prompt", &gen));
        const json_value *et = kipp_json_get(c, "enable_thinking");
        if (et && et->type == JSON_FALSE) think = false;
        const json_value *want = kipp_json_get_type(c, "expected", JSON_STRING);
        char *got = NULL;
        size_t got_n = 0;
        int rc = kipp_chat_render_qwen3_template(tpl, msgs, (size_t)n, tools, n_tools, gen, think,
                                                 &got, &got_n, &err);
        CHECKF(rc == 0, "%s tool case %zu: %s", path, i, err.message);
        if (!rc && want) {
            bool same = got_n == want->as.string.length && !memcmp(got, want->as.string.chars, got_n);
            CHECKF(same, "%s tool case %zu differs from the Jinja rendering", path, i);
            if (!same) show_diff(want->as.string.chars, want->as.string.length, got, got_n);
            matched += same;
        }
        free(got);
        for (size_t k = 0; k < n_tools; k++) kipp_json_buf_free(&tj[k]);
    }
    free_calls();
    fprintf(stderr, "test_chat: %zu/%zu golden tool renderings match (%s)\n", matched, total, path);
    kipp_json_free(doc);
    free(data);
}

static void test_errors(void) {
    kipp_error err = {0};
    char *t = NULL;
    size_t n = 0;
    kipp_chat_message tool = {.role = "function", .content = "x", .content_length = 1};
    CHECK(kipp_chat_render_qwen3(&tool, 1, true, true, &t, &n, &err) == KIPP_E_UNSUPPORTED);
    CHECK(strstr(err.message, "function") != NULL);
    CHECK(kipp_chat_render_qwen3(NULL, 0, true, true, &t, &n, &err) == KIPP_E_ARGUMENT);
    kipp_chat_message r = {.role = "user", .content = "x", .content_length = 1,
                           .reasoning_content = "r", .reasoning_length = 1};
    CHECK(kipp_chat_render_qwen3(&r, 1, true, true, &t, &n, &err) == KIPP_E_ARGUMENT);
    /* content with an embedded NUL is rendered by length, not by strlen */
    kipp_chat_message z = {.role = "user", .content = "a\0b", .content_length = 3};
    CHECK(kipp_chat_render_qwen3(&z, 1, false, true, &t, &n, &err) == 0);
    CHECK(t && n == strlen("<|im_start|>user\n") + 3 + strlen("<|im_end|>\n"));
    free(t);
}

static void test_models(const char *golden_sha) {
    char path[512];
    kipp_error err = {0};
    kipp_model_options mo = {.backend = KIPP_BACKEND_NONE};
    kipp_model *m = NULL;
    snprintf(path, sizeof path, "%s/models/synthetic-tiny-instruct.gguf", test_build_dir());
    CHECKF(kipp_model_open(path, &mo, &m, &err) == 0, "%s", err.message);
    if (m) {
        const char *tpl = kipp_model_chat_template(m);
        CHECK(tpl != NULL);
        if (tpl) {
            kipp_sha256 s;
            uint8_t d[32];
            char hex[65];
            kipp_sha256_init(&s);
            kipp_sha256_update(&s, tpl, strlen(tpl));
            kipp_sha256_final(&s, d);
            kipp_sha256_hex(d, hex);
            CHECKF(!strcmp(hex, golden_sha), "fixture template %s, goldens from %s", hex,
                   golden_sha);
        }
        kipp_chat_message u = {.role = "user", .content = "Hi", .content_length = 2};
        char *t = NULL;
        size_t n = 0;
        CHECKF(kipp_chat_render(m, &u, 1, true, false, &t, &n, &err) == 0, "%s", err.message);
        const char *want = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
                           "<think>\n\n</think>\n\n";
        CHECK(t && n == strlen(want) && !strcmp(t, want));
        free(t);
        kipp_model_close(m);
    }
    snprintf(path, sizeof path, "%s/models/synthetic-tiny.gguf", test_build_dir());
    m = NULL;
    CHECKF(kipp_model_open(path, &mo, &m, &err) == 0, "%s", err.message);
    if (m) {
        kipp_chat_message u = {.role = "user", .content = "Hi", .content_length = 2};
        char *t = NULL;
        size_t n = 0;
        CHECK(kipp_chat_render(m, &u, 1, true, true, &t, &n, &err) == KIPP_E_UNSUPPORTED);
        CHECK(t == NULL && strstr(err.message, "base") != NULL);
        kipp_model_close(m);
    }
}

static void sha_hex(const void *p, size_t n, char hex[65]) {
    kipp_sha256 s;
    uint8_t d[32];
    kipp_sha256_init(&s);
    kipp_sha256_update(&s, p, n);
    kipp_sha256_final(&s, d);
    kipp_sha256_hex(d, hex);
}

/* The thinking-2507 template: the pinned tokenizer_config.json, and the
 * SHA-256 of its chat_template (what the goldens record). */
static void template_2507_sha(char out[65]) {
    kipp_error err = {0};
    char *data = NULL, hex[65];
    size_t size = 0;
    out[0] = 0;
    CHECKF(kipp_read_file(CONFIG_2507, &data, &size, &err) == 0, "%s", err.message);
    if (!data) return;
    sha_hex(data, size, hex);
    CHECKF(!strcmp(hex, CONFIG_2507_SHA), "%s has SHA-256 %s, pinned %s", CONFIG_2507, hex,
           CONFIG_2507_SHA);
    json_doc *doc = NULL;
    CHECKF(kipp_json_parse(data, size, &doc, &err) == 0, "%s", err.message);
    const json_value *t = doc ? kipp_json_get_type(kipp_json_root(doc), "chat_template",
                                                   JSON_STRING) : NULL;
    CHECK(t != NULL);
    if (t) {
        sha_hex(t->as.string.chars, t->as.string.length, out);
        /* what the renderer assumes: it ends by opening a think block and never
         * reads enable_thinking */
        {
            const char *end = "{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n"
                              "<think>\\n' }}\n{%- endif %}";
            size_t k = strlen(end);
            CHECK(t->as.string.length >= k &&
                  !memcmp(t->as.string.chars + t->as.string.length - k, end, k));
            CHECK(strstr(t->as.string.chars, "enable_thinking") == NULL);
        }
    }
    kipp_json_free(doc);
    free(data);
}

/* kipp_chat_prompt_in_think decides whether output starts as reasoning. */
static void test_prompt_in_think(void) {
    kipp_error err = {0};
    kipp_chat_message msgs[3] = {
        {.role = "user", .content = "q", .content_length = 1},
        {.role = "assistant", .content = "r\n</think>\n\na", .content_length = 13},
        {.role = "user", .content = "q2", .content_length = 2},
    };
    struct { kipp_chat_template tpl; bool think; size_t n; bool want; } cases[] = {
        {KIPP_CHAT_QWEN3_THINKING_2507, true, 1, true},
        {KIPP_CHAT_QWEN3_THINKING_2507, false, 1, true}, /* enable_thinking does not apply */
        {KIPP_CHAT_QWEN3_THINKING_2507, true, 3, true},
        {KIPP_CHAT_QWEN3_HYBRID, true, 1, false},  /* the model opens its own block */
        {KIPP_CHAT_QWEN3_HYBRID, false, 1, false}, /* empty block, closed */
        {KIPP_CHAT_QWEN3_HYBRID, true, 3, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *t = NULL;
        size_t n = 0;
        CHECK(kipp_chat_render_qwen3_template(cases[i].tpl, msgs, cases[i].n, NULL, 0, true,
                                              cases[i].think, &t, &n, &err) == 0);
        CHECKF(kipp_chat_prompt_in_think(t, n) == cases[i].want, "prompt case %zu", i);
        free(t);
    }
    CHECK(!kipp_chat_prompt_in_think("", 0));
    CHECK(!kipp_chat_prompt_in_think(NULL, 0));
    CHECK(kipp_chat_prompt_in_think("a</think><think>", 16));
    CHECK(!kipp_chat_prompt_in_think("<think></think>", 15));
}

int main(void) {
    char sha[65] = "", sha_2507[65] = "", golden_2507[65] = "";
    test_goldens(GOLDEN, KIPP_CHAT_QWEN3_HYBRID, sha);
    test_tool_goldens(TOOLS_GOLDEN, KIPP_CHAT_QWEN3_HYBRID, sha);
    template_2507_sha(sha_2507);
    test_goldens(GOLDEN_2507, KIPP_CHAT_QWEN3_THINKING_2507, golden_2507);
    CHECKF(!strcmp(golden_2507, sha_2507), "thinking-2507 goldens from template %s, the pinned "
           "tokenizer_config.json holds %s", golden_2507, sha_2507);
    test_tool_goldens(TOOLS_GOLDEN_2507, KIPP_CHAT_QWEN3_THINKING_2507, sha_2507);
    test_prompt_in_think();
    test_errors();
    test_models(sha);
    return test_finish("test_chat");
}
