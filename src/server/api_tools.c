/* The request fields behind tool calling and structured output:
 * response_format, tools, tool_choice, parallel_tool_calls (see
 * api_openai.h, api_features). Kept apart from api_openai.c, which owns the
 * rest of request validation.
 *
 * Decisions:
 *  - response_format json_object / json_schema compile to a grammar that
 *    constrains the whole completion (no think block is generated).
 *  - tool_choice "none" renders no tools and parses no calls; "auto" renders
 *    them and parses <tool_call> blocks; "required" and a named function
 *    also constrain decoding to well-formed calls whose arguments satisfy
 *    the function's parameter schema: one or more (at most
 *    GRAM_MAX_TOOL_CALLS, "\n" between them) when parallel_tool_calls is
 *    true or absent, exactly one when it is false.
 *  - a function's parameters must fit the JSON Schema subset only when a
 *    grammar is built from them; with "auto" they are just shown to the
 *    model. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/chat.h"
#include "core/grammar_internal.h"
#include "server/api_openai.h"

#define MAX_TOOLS 64

static int fail(api_error *e, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(api_error *e, const char *param, const char *fmt, ...) {
    e->status = 400;
    e->type = "invalid_request_error";
    snprintf(e->param, sizeof e->param, "%s", param);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return 1;
}

static bool present(const json_value *v) { return v && v->type != JSON_NULL; }

/* A string value that is compared with strcmp must not hold a NUL, or
 * "none\u0000x" would pass as "none" (as api_openai.c refuses NUL in
 * names and ids). True for anything that is not a string. */
static bool nul_free(const json_value *v) {
    return !v || v->type != JSON_STRING || strlen(v->as.string.chars) == v->as.string.length;
}

/* OpenAI's rule for function names: [a-zA-Z0-9_-], at most 64. */
static bool good_name(const json_value *v) {
    if (!v || v->type != JSON_STRING || v->as.string.length == 0 || v->as.string.length > 64)
        return false;
    for (size_t i = 0; i < v->as.string.length; i++) {
        char c = v->as.string.chars[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-'))
            return false;
    }
    return true;
}

static int parse_response_format(const kipp_model *m, const json_value *root, api_features *f,
                                 api_error *e) {
    const json_value *rf = kipp_json_get(root, "response_format");
    if (!present(rf)) return 0;
    const char *type = kipp_json_get_string(rf, "type");
    if (rf->type != JSON_OBJECT || !type)
        return fail(e, "response_format", "'response_format' must be an object with a 'type'");
    if (!nul_free(kipp_json_get(rf, "type")))
        return fail(e, "response_format", "response_format.type must not contain NUL");
    for (size_t i = 0; i < rf->as.object.count; i++)
        if (strcmp(rf->as.object.keys[i], "type") && strcmp(rf->as.object.keys[i], "json_schema"))
            return fail(e, "response_format", "unsupported response_format key '%s'",
                        rf->as.object.keys[i]);
    if (!strcmp(type, "text")) return 0;
    const json_value *schema = NULL;
    if (!strcmp(type, "json_schema")) {
        const json_value *js = kipp_json_get_type(rf, "json_schema", JSON_OBJECT);
        if (!js)
            return fail(e, "response_format", "response_format json_schema needs a 'json_schema' "
                        "object");
        for (size_t i = 0; i < js->as.object.count; i++) {
            const char *k = js->as.object.keys[i];
            if (strcmp(k, "name") && strcmp(k, "schema") && strcmp(k, "strict") &&
                strcmp(k, "description"))
                return fail(e, "response_format", "unsupported json_schema key '%s'", k);
        }
        if (!kipp_json_get_string(js, "name"))
            return fail(e, "response_format", "response_format.json_schema.name is required");
        schema = kipp_json_get(js, "schema");
        if (!present(schema)) schema = NULL; /* no schema: any JSON object, as json_object */
    } else if (strcmp(type, "json_object")) {
        return fail(e, "response_format", "response_format type '%s' is not supported (text, "
                    "json_object, json_schema)", type);
    }
    kipp_error kerr = {0};
    if (kipp_grammar_from_json_value(m, schema, &f->grammar, &kerr))
        return fail(e, "response_format", "response_format: %s", kerr.message);
    return 0;
}

static int parse_tools(const kipp_model *m, const json_value *root, api_features *f,
                       api_error *e) {
    const json_value *tools = kipp_json_get(root, "tools");
    const json_value *choice = kipp_json_get(root, "tool_choice");
    const json_value *parallel = kipp_json_get(root, "parallel_tool_calls");
    if (present(parallel) && parallel->type != JSON_TRUE && parallel->type != JSON_FALSE)
        return fail(e, "parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
    if (!nul_free(choice) || !nul_free(kipp_json_get(kipp_json_get(choice, "function"), "name")))
        return fail(e, "tool_choice", "'tool_choice' must not contain NUL");
    if (!present(tools)) {
        if (present(choice) && !(choice->type == JSON_STRING &&
                                 !strcmp(choice->as.string.chars, "none")))
            return fail(e, "tool_choice", "'tool_choice' needs 'tools'");
        return 0;
    }
    if (tools->type != JSON_ARRAY)
        return fail(e, "tools", "'tools' must be an array");
    size_t n = tools->as.array.count;
    if (n > MAX_TOOLS) return fail(e, "tools", "at most %d tools", MAX_TOOLS);
    const char *names[MAX_TOOLS];
    const json_value *params[MAX_TOOLS];
    for (size_t i = 0; i < n; i++) {
        const json_value *t = tools->as.array.items[i];
        const char *type = kipp_json_get_string(t, "type");
        const json_value *fn = kipp_json_get_type(t, "function", JSON_OBJECT);
        if (t->type != JSON_OBJECT || !type || strcmp(type, "function") || !fn)
            return fail(e, "tools", "tools[%zu] must be {\"type\": \"function\", \"function\": "
                        "{...}}", i);
        const json_value *name = kipp_json_get(fn, "name");
        if (!good_name(name))
            return fail(e, "tools", "tools[%zu].function.name must be 1-64 characters of "
                        "a-z, A-Z, 0-9, _ and -", i);
        for (size_t k = 0; k < i; k++)
            if (!strcmp(names[k], name->as.string.chars))
                return fail(e, "tools", "two tools are named '%s'", names[k]);
        const json_value *p = kipp_json_get(fn, "parameters");
        if (present(p) && p->type != JSON_OBJECT)
            return fail(e, "tools", "tools[%zu].function.parameters must be an object", i);
        names[i] = name->as.string.chars;
        params[i] = present(p) ? p : NULL;
    }
    /* tool_choice */
    const char *only = NULL;
    bool none = false, required = false;
    if (present(choice)) {
        if (choice->type == JSON_STRING) {
            const char *c = choice->as.string.chars;
            if (!strcmp(c, "none")) none = true;
            else if (!strcmp(c, "required")) required = true;
            else if (strcmp(c, "auto"))
                return fail(e, "tool_choice", "tool_choice must be \"none\", \"auto\", "
                            "\"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}");
        } else {
            const json_value *fn = kipp_json_get_type(choice, "function", JSON_OBJECT);
            only = kipp_json_get_string(fn, "name");
            if (!only)
                return fail(e, "tool_choice", "tool_choice must name a function: {\"type\": "
                            "\"function\", \"function\": {\"name\": ...}}");
            size_t k = 0;
            while (k < n && strcmp(names[k], only)) k++;
            if (k == n) return fail(e, "tool_choice", "tool_choice names '%s', which is not in "
                                    "'tools'", only);
        }
    }
    if (none || n == 0) return 0;
    if (f->grammar && (required || only))
        return fail(e, "tool_choice", "tool_choice \"required\" or a named function cannot be "
                    "combined with response_format");
    f->json = calloc(n, sizeof *f->json);
    f->tools = calloc(n, sizeof *f->tools);
    if (!f->json || !f->tools) return fail(e, "tools", "out of memory");
    f->n_tools = n;
    for (size_t i = 0; i < n; i++) {
        kipp_chat_tojson(&f->json[i], tools->as.array.items[i]);
        if (f->json[i].failed) return fail(e, "tools", "out of memory");
        f->tools[i] = (kipp_chat_tool){f->json[i].data, f->json[i].length};
    }
    f->parse_calls = true;
    if (required || only) {
        size_t k = 0, count = n;
        if (only) {
            while (strcmp(names[k], only)) k++;
            count = 1;
        }
        kipp_error kerr = {0};
        /* parallel_tool_calls (OpenAI's default: true) lets the answer be
         * several calls; false: exactly one */
        uint32_t max_calls = parallel && parallel->type == JSON_FALSE ? 1 : GRAM_MAX_TOOL_CALLS;
        if (kipp_grammar_tool_call(m, names + k, params + k, count, max_calls, &f->grammar, &kerr))
            return fail(e, "tools", "cannot constrain the tool call: %s", kerr.message);
    }
    return 0;
}

int api_parse_features(const kipp_model *m, api_kind kind, const json_value *root,
                       api_features *f, api_error *e) {
    memset(f, 0, sizeof *f);
    if (parse_response_format(m, root, f, e) || (kind == API_CHAT && parse_tools(m, root, f, e))) {
        api_features_free(f);
        return 1;
    }
    return 0;
}

void api_features_free(api_features *f) {
    for (size_t i = 0; f->json && i < f->n_tools; i++) kipp_json_buf_free(&f->json[i]);
    free(f->json);
    free(f->tools);
    kipp_grammar_destroy(f->grammar);
    memset(f, 0, sizeof *f);
}
