/* The OpenAI-compatible request parser (src/server/api_openai.c and
 * api_tools.c), called as the server calls it, on the instruct fixture.
 * Cases the HTTP conformance test (tests/node/server_conformance.mjs) would
 * need a running server for: values compared as C strings must be refused
 * when they carry a NUL (never read as their prefix), and a logit_bias key
 * must be a plain decimal token id. Each refusal must name its field. */
#include <string.h>

#include "server/api_openai.h"
#include "test_util.h"

static kipp_model *model;

/* Parses body; returns the status (0 = accepted), with param in *param. */
static int parse(api_kind kind, const char *body, size_t length, api_request *r, api_error *e) {
    api_limits lim = {.context = kipp_model_checkpoint(model)->context};
    int rc = api_parse_request(model, kind, &lim, body, length, r, e);
    return rc ? e->status : 0;
}

/* body must be refused with a 400 that names `param` and says why. */
static void expect_refused(api_kind kind, const char *body, const char *param) {
    api_request r;
    api_error e;
    int status = parse(kind, body, strlen(body), &r, &e);
    CHECKF(status == 400 && !strcmp(e.param, param) && e.message[0],
           "%s: status %d param '%s' message '%s'", body, status, e.param, e.message);
    api_request_free(&r);
}

static void expect_accepted(api_kind kind, const char *body, api_request *r) {
    api_error e;
    int status = parse(kind, body, strlen(body), r, &e);
    CHECKF(status == 0, "%s: status %d '%s'", body, status, status ? e.message : "");
}

#define MSGS "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"
#define TOOLS                                                                                      \
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}},"                            \
    "{\"type\":\"function\",\"function\":{\"name\":\"g\"}}]"

static void test_nul_in_compared_values(void) {
    api_request r;
    /* the values themselves are understood */
    expect_accepted(API_CHAT, "{" MSGS "," TOOLS ",\"tool_choice\":\"none\"}", &r);
    CHECK(!r.parse_calls);
    api_request_free(&r);
    expect_accepted(API_CHAT,
                    "{" MSGS "," TOOLS ",\"tool_choice\":{\"type\":\"function\","
                    "\"function\":{\"name\":\"g\"}}}", &r);
    CHECK(r.parse_calls && r.grammar);
    api_request_free(&r);
    expect_accepted(API_CHAT, "{" MSGS ",\"response_format\":{\"type\":\"json_object\"}}", &r);
    CHECK(r.grammar != NULL);
    api_request_free(&r);
    /* ... and with a NUL inside they are not: "none\u0000x" is no "none" */
    expect_refused(API_CHAT, "{" MSGS "," TOOLS ",\"tool_choice\":\"none\\u0000x\"}",
                   "tool_choice");
    expect_refused(API_CHAT, "{" MSGS ",\"tool_choice\":\"none\\u0000x\"}", "tool_choice");
    expect_refused(API_CHAT,
                   "{" MSGS "," TOOLS ",\"tool_choice\":{\"type\":\"function\","
                   "\"function\":{\"name\":\"g\\u0000x\"}}}", "tool_choice");
    expect_refused(API_CHAT, "{" MSGS ",\"response_format\":{\"type\":\"json_object\\u0000x\"}}",
                   "response_format");
    expect_refused(API_COMPLETIONS,
                   "{\"prompt\":\"hi\",\"response_format\":{\"type\":\"text\\u0000x\"}}",
                   "response_format");
}

static void test_logit_bias_keys(void) {
    api_request r;
    expect_accepted(API_COMPLETIONS, "{\"prompt\":\"hi\",\"logit_bias\":{\"5\":1,\"0\":-100}}", &r);
    CHECK(r.sampling.n_logit_bias == 2 && r.bias && r.bias[0].token == 5 && r.bias[1].token == 0);
    api_request_free(&r);
    /* strtol would read each of these as a token id */
    static const char *const bad_keys[] = {"\\t5", "\\n5", " 5", "+5", "-0", "", "5x"};
    for (size_t i = 0; i < sizeof bad_keys / sizeof *bad_keys; i++) {
        char body[128];
        snprintf(body, sizeof body, "{\"prompt\":\"hi\",\"logit_bias\":{\"%s\":1}}", bad_keys[i]);
        expect_refused(API_COMPLETIONS, body, "logit_bias");
    }
}

int main(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/models/synthetic-tiny-instruct.gguf", test_build_dir());
    kipp_model_options mo = {.backend = KIPP_BACKEND_NONE};
    kipp_error err = {0};
    if (kipp_model_open(path, &mo, &model, &err)) {
        fprintf(stderr, "test_api_openai: %s: %s\n", path, err.message);
        return 1;
    }
    test_nul_in_compared_values();
    test_logit_bias_keys();
    kipp_model_close(model);
    return test_finish("test_api_openai");
}
