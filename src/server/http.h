/* HTTP/1.1 request parsing and response heads, with hard limits. Knows
 * nothing of the engine or of JSON. The parser is incremental in the
 * simplest way: the connection keeps appending bytes to one buffer and calls
 * http_parse_request on the whole buffer until it stops saying INCOMPLETE;
 * the head is bounded (max_head_bytes) so re-scanning is cheap.
 *
 * Supported: request line "METHOD SP origin-form SP HTTP/1.0|1.1" and header
 * lines ending in CRLF, Content-Length bodies, chunked bodies (HTTP/1.1
 * requires servers to accept them; extensions and trailers are read and
 * ignored; the decoded body is bounded by max_body_bytes and the framing
 * overhead by max_head_bytes), Connection keep-alive/close, Expect:
 * 100-continue. Refused with a status: other transfer codings (501),
 * Transfer-Encoding with Content-Length or on HTTP/1.0 (400: ambiguous
 * framing is how requests get smuggled), obsolete line folding, bare LF,
 * control bytes, conflicting Content-Length (400), oversized heads (431)
 * and bodies (413). */
#ifndef KIPP_SERVER_HTTP_H
#define KIPP_SERVER_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#define HTTP_MAX_HEADERS 64

typedef struct http_limits {
    size_t max_head_bytes; /* request line + headers + blank line */
    size_t max_body_bytes;
} http_limits;

typedef struct http_header {
    const char *name; /* points into the caller's buffer; not NUL-terminated */
    size_t name_length;
    const char *value; /* surrounding whitespace trimmed */
    size_t value_length;
} http_header;

typedef struct http_request {
    const char *method; /* pointers into the buffer, with lengths */
    size_t method_length;
    const char *target;
    size_t target_length;
    int minor_version; /* HTTP/1.<minor> */
    http_header headers[HTTP_MAX_HEADERS];
    size_t n_headers;
    const char *body;
    size_t body_length;
    size_t head_length;  /* bytes of request line + headers + CRLF */
    size_t total_length; /* head + body: bytes this request consumed */
    bool keep_alive;
    bool expect_continue;
    /* Transfer-Encoding: chunked. After HTTP_PARSE_OK, body is NULL and
     * body_length is the decoded length until http_decode_chunked runs. */
    bool chunked;
} http_request;

typedef enum http_parse_result {
    HTTP_PARSE_OK,
    HTTP_PARSE_INCOMPLETE, /* need more bytes (head_length set once the head is complete) */
    HTTP_PARSE_ERROR,      /* *status and *reason say why; close after replying */
} http_parse_result;

http_parse_result http_parse_request(const char *buf, size_t length, const http_limits *limits,
                                     http_request *req, int *status, const char **reason);

/* The most bytes one request can occupy in the caller's buffer (head,
 * body, chunked framing); a buffer this large always parses to OK or an
 * error, never INCOMPLETE. */
size_t http_max_request_bytes(const http_limits *limits);

/* For a chunked request that parsed OK: decodes its body in place (the data
 * moves left, to buf + head_length; buf is the request's first byte) and
 * sets req->body. total_length is unchanged: the caller still consumes the
 * encoded bytes. */
void http_decode_chunked(char *buf, http_request *req);

/* Case-insensitive header lookup; NULL when absent. */
const http_header *http_find_header(const http_request *req, const char *name);
/* Does the target's path (before any '?') equal path? */
bool http_path_is(const http_request *req, const char *path);
bool http_method_is(const http_request *req, const char *method);

const char *http_status_text(int status);
/* Formats a response head into out (NUL-terminated); content_length < 0
 * means "no Content-Length, the connection closes after the body" (used for
 * SSE streams). extra_headers (may be NULL) is inserted verbatim and must
 * end in CRLF. Returns the length, or 0 if out is too small. */
size_t http_format_head(char *out, size_t cap, int status, const char *content_type,
                        long long content_length, bool keep_alive, const char *extra_headers);

#endif
