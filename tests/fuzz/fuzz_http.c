/* libFuzzer target for the HTTP/1.1 request parser (src/server/http.c):
 *   make fuzz-http [FUZZ_SECONDS=60]
 * The bytes are what a client sends. They are parsed twice, as the server
 * does (loop.c: http_parse_request on the buffer, http_decode_chunked on a
 * chunked request that said OK): once with the server's limits and once
 * with tiny limits taken from the first two bytes, so that the 413/431
 * paths and the limit boundaries are reachable with short inputs. Checked:
 *   - every pointer the parser returns lies inside the buffer, and an
 *     error always carries a 4xx/5xx status and a reason;
 *   - a buffer of http_max_request_bytes or more never parses INCOMPLETE
 *     (the server stops reading there and would wait for nothing);
 *   - a request that parsed OK also parses OK, to the same length, from
 *     exactly its own bytes, and a prefix one byte short is INCOMPLETE
 *     (the result must not depend on how the bytes arrived);
 *   - a chunked body decodes in place to the chunks' data, which an
 *     independent walk of the (already validated) framing recomputes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/http.h"
#define FUZZ_NAME "fuzz_http"
#include "fuzz_util.h"


static bool inside(const char *buf, size_t n, const char *p, size_t len) {
    return p >= buf && len <= n && (size_t)(p - buf) <= n - len;
}

/* The data of a chunked body whose framing http_parse_request accepted:
 * hex size, anything up to CRLF, data, CRLF; a zero size ends it. */
static size_t reference_chunks(const char *buf, size_t at, char *out) {
    size_t n = 0;
    for (;;) {
        size_t size = 0;
        for (;; at++) {
            char c = buf[at];
            int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
            if (v < 0) break;
            size = size * 16 + (size_t)v;
        }
        while (buf[at] != '\n') at++;
        at++;
        if (size == 0) return n;
        memcpy(out + n, buf + at, size);
        n += size;
        at += size + 2;
    }
}

static void check_one(const char *data, size_t size, const http_limits *lim) {
    http_request req;
    int status;
    const char *reason;
    http_parse_result r = http_parse_request(data, size, lim, &req, &status, &reason);
    if (r == HTTP_PARSE_ERROR) {
        CHECK(status >= 400 && status <= 599 && reason && *reason);
        return;
    }
    CHECK(status == 0 && reason == NULL);
    if (r == HTTP_PARSE_INCOMPLETE) {
        CHECK(size < http_max_request_bytes(lim));
        return;
    }
    CHECK(r == HTTP_PARSE_OK);
    CHECK(req.head_length <= req.total_length && req.total_length <= size);
    CHECK(req.head_length <= lim->max_head_bytes);
    CHECK(req.body_length <= lim->max_body_bytes);
    CHECK(inside(data, req.head_length, req.method, req.method_length));
    CHECK(inside(data, req.head_length, req.target, req.target_length));
    CHECK(req.n_headers <= HTTP_MAX_HEADERS);
    for (size_t k = 0; k < req.n_headers; k++) {
        const http_header *h = &req.headers[k];
        CHECK(inside(data, req.head_length, h->name, h->name_length));
        CHECK(inside(data, req.head_length, h->value, h->value_length));
    }
    if (!req.chunked) CHECK(req.body == data + req.head_length &&
                            req.head_length + req.body_length == req.total_length);

    /* The same request alone, and one byte short of it. */
    http_request again;
    CHECK(http_parse_request(data, req.total_length, lim, &again, &status, &reason) ==
          HTTP_PARSE_OK);
    CHECK(again.total_length == req.total_length && again.body_length == req.body_length);
    CHECK(http_parse_request(data, req.total_length - 1, lim, &again, &status, &reason) ==
          HTTP_PARSE_INCOMPLETE);

    if (req.chunked) {
        /* The server decodes in its own (writable) input buffer. */
        char *copy = malloc(req.total_length);
        char *expect = malloc(req.body_length + 1);
        CHECK(copy && expect);
        memcpy(copy, data, req.total_length);
        size_t n = reference_chunks(copy, req.head_length, expect);
        CHECK(n == req.body_length);
        http_decode_chunked(copy, &req);
        CHECK(req.body == copy + req.head_length);
        CHECK(memcmp(req.body, expect, n) == 0);
        free(expect);
        free(copy);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* The parser reads only [data, data + size): a copy of exactly that
     * size lets ASan see a read one byte past the end. */
    char *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    /* loop.c's limits: MAX_HEAD_BYTES and serve's default --max-body */
    const http_limits server = {.max_head_bytes = 16 * 1024, .max_body_bytes = 1 << 20};
    check_one(buf, size, &server);
    if (size >= 2) {
        const http_limits tiny = {.max_head_bytes = 16 + (size_t)data[0] * 2,
                                  .max_body_bytes = (size_t)data[1]};
        check_one(buf + 2, size - 2, &tiny);
    }
    free(buf);
    return 0;
}
