/* HTTP/1.1 request parsing (RFC 9112 subset) and response heads. See http.h
 * for what is accepted and refused. Every failure maps to a 4xx/5xx status
 * and a short reason; nothing here allocates. */
#include "server/http.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static bool is_tchar(unsigned char c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool eq_nocase(const char *a, size_t an, const char *b) {
    size_t bn = strlen(b);
    return an == bn && strncasecmp(a, b, an) == 0;
}

/* Finds the next line in [at, end): sets *line_end to the '\r' of its CRLF and
 * returns the offset after the CRLF; 0 when incomplete; SIZE_MAX on bare LF. */
static size_t next_line(const char *buf, size_t at, size_t end, size_t *line_end) {
    const char *nl = memchr(buf + at, '\n', end - at);
    if (!nl) return 0;
    size_t i = (size_t)(nl - buf);
    if (i == at || buf[i - 1] != '\r') return SIZE_MAX;
    *line_end = i - 1;
    return i + 1;
}

static http_parse_result fail(int *status, const char **reason, int s, const char *r) {
    *status = s;
    *reason = r;
    return HTTP_PARSE_ERROR;
}

/* Comma-separated tokens of a Connection header. */
static void connection_tokens(const http_header *h, bool *close, bool *keep) {
    const char *p = h->value, *end = h->value + h->value_length;
    while (p < end) {
        while (p < end && (*p == ' ' || *p == '\t' || *p == ',')) p++;
        const char *t = p;
        while (p < end && *p != ',' && *p != ' ' && *p != '\t') p++;
        if (eq_nocase(t, (size_t)(p - t), "close")) *close = true;
        if (eq_nocase(t, (size_t)(p - t), "keep-alive")) *keep = true;
    }
}

static http_parse_result parse_request_line(const char *line, size_t n, http_request *req,
                                            int *status, const char **reason) {
    size_t i = 0;
    while (i < n && is_tchar((unsigned char)line[i])) i++;
    if (i == 0 || i >= n || line[i] != ' ' || i > 16)
        return fail(status, reason, 400, "malformed request line (method)");
    req->method = line;
    req->method_length = i;
    size_t t0 = ++i;
    while (i < n && line[i] != ' ') {
        unsigned char c = (unsigned char)line[i];
        if (c <= 0x20 || c == 0x7f) return fail(status, reason, 400, "malformed request target");
        i++;
    }
    if (i == t0 || i >= n) return fail(status, reason, 400, "malformed request line (target)");
    if (line[t0] != '/')
        return fail(status, reason, 400, "only origin-form request targets (\"/path\") are accepted");
    req->target = line + t0;
    req->target_length = i - t0;
    i++;
    const char *v = line + i;
    size_t vn = n - i;
    /* HTTP-version = "HTTP/" DIGIT "." DIGIT; well-formed but not 1.x: 505 */
    if (vn != 8 || memcmp(v, "HTTP/", 5) || v[6] != '.' || v[5] < '0' || v[5] > '9' ||
        v[7] < '0' || v[7] > '9')
        return fail(status, reason, 400, "malformed request line (version)");
    if (v[5] != '1' || (v[7] != '0' && v[7] != '1'))
        return fail(status, reason, 505, "only HTTP/1.0 and HTTP/1.1 are supported");
    req->minor_version = v[7] - '0';
    return HTTP_PARSE_OK;
}

static http_parse_result parse_header(const char *line, size_t n, http_header *h, int *status,
                                      const char **reason) {
    if (n && (line[0] == ' ' || line[0] == '\t'))
        return fail(status, reason, 400, "obsolete header line folding is not accepted");
    size_t i = 0;
    while (i < n && is_tchar((unsigned char)line[i])) i++;
    if (i == 0 || i >= n || line[i] != ':')
        return fail(status, reason, 400, "malformed header line");
    h->name = line;
    h->name_length = i;
    size_t a = i + 1, b = n;
    while (a < b && (line[a] == ' ' || line[a] == '\t')) a++;
    while (b > a && (line[b - 1] == ' ' || line[b - 1] == '\t')) b--;
    for (size_t k = a; k < b; k++) {
        unsigned char c = (unsigned char)line[k];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return fail(status, reason, 400, "control character in a header value");
    }
    h->value = line + a;
    h->value_length = b - a;
    return HTTP_PARSE_OK;
}

#define MAX_CHUNK_LINE 1024 /* chunk-size + extensions; far more than any client sends */

/* Walks a chunked body starting at buf[at] (RFC 9112 7.1): chunk-size
 * [extensions] CRLF data CRLF ..., a zero-size last chunk, trailer lines,
 * CRLF. Extensions and trailers are skipped. When out is not NULL the data
 * is copied there as it is walked (out may alias buf: it never runs ahead
 * of the input). Sets *decoded (data bytes) and *end (offset after the
 * final CRLF) on OK. The data is bounded by max_body_bytes (413), the
 * framing overhead by max_head_bytes (413), so a stream of tiny chunks
 * cannot grow the buffer without bound. */
static http_parse_result walk_chunked(const char *buf, size_t at, size_t length,
                                      const http_limits *limits, char *out, size_t *decoded,
                                      size_t *end, int *status, const char **reason) {
    size_t data = 0;
    size_t limit = at + limits->max_body_bytes + limits->max_head_bytes;
    bool last = false;
    for (;;) {
        if (at > limit) return fail(status, reason, 413, "chunked request body too large");
        size_t line_end = 0;
        size_t scan_end = length < at + MAX_CHUNK_LINE + 2 ? length : at + MAX_CHUNK_LINE + 2;
        size_t next = next_line(buf, at, scan_end, &line_end);
        if (next == SIZE_MAX) return fail(status, reason, 400, "chunked body line not terminated "
                                          "by CRLF");
        if (next == 0) {
            if (scan_end - at >= MAX_CHUNK_LINE + 2)
                return fail(status, reason, 400, "chunk-size or trailer line too long");
            if (length > limit) return fail(status, reason, 413, "chunked request body too large");
            return HTTP_PARSE_INCOMPLETE;
        }
        /* A line that ends past the bound is refused even when it is all
         * here: otherwise the request would be accepted or refused by how
         * its last bytes were split across reads (one byte short, the
         * INCOMPLETE branch above says 413), and it could be longer than
         * http_max_request_bytes. */
        if (next > limit) return fail(status, reason, 413, "chunked request body too large");
        if (last) { /* trailer section: lines until an empty one */
            if (line_end == at) {
                *decoded = data;
                *end = next;
                return HTTP_PARSE_OK;
            }
            for (size_t k = at; k < line_end; k++) {
                unsigned char c = (unsigned char)buf[k];
                if ((c < 0x20 && c != '\t') || c == 0x7f)
                    return fail(status, reason, 400, "control character in a trailer line");
            }
            at = next;
            continue;
        }
        size_t i = at, digits = 0;
        unsigned long long size = 0;
        for (; i < line_end; i++, digits++) {
            char c = buf[i];
            int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
            if (v < 0) break;
            if (size > (limits->max_body_bytes >> 4) + 1)
                return fail(status, reason, 413, "request body too large");
            size = size * 16 + (unsigned)v;
        }
        if (digits == 0 || (i < line_end && buf[i] != ';' && buf[i] != ' ' && buf[i] != '\t'))
            return fail(status, reason, 400, "malformed chunk size");
        for (; i < line_end; i++) {
            unsigned char c = (unsigned char)buf[i];
            if ((c < 0x20 && c != '\t') || c == 0x7f)
                return fail(status, reason, 400, "control character in a chunk extension");
        }
        if (size > limits->max_body_bytes - data)
            return fail(status, reason, 413, "request body too large");
        at = next;
        if (size == 0) {
            last = true;
            continue;
        }
        if (length - at < size + 2) {
            if (length > limit) return fail(status, reason, 413, "chunked request body too large");
            return HTTP_PARSE_INCOMPLETE;
        }
        if (buf[at + size] != '\r' || buf[at + size + 1] != '\n')
            return fail(status, reason, 400, "chunk data not followed by CRLF");
        if (out) memmove(out + data, buf + at, (size_t)size);
        data += (size_t)size;
        at += (size_t)size + 2;
    }
}

http_parse_result http_parse_request(const char *buf, size_t length, const http_limits *limits,
                                     http_request *req, int *status, const char **reason) {
    memset(req, 0, sizeof *req);
    *status = 0;
    *reason = NULL;
    /* Only the first max_head_bytes can belong to the head. */
    size_t scan_end = length < limits->max_head_bytes ? length : limits->max_head_bytes;
    size_t line_end = 0;
    size_t at = next_line(buf, 0, scan_end, &line_end);
    if (at == SIZE_MAX) return fail(status, reason, 400, "request line not terminated by CRLF");
    if (at == 0) {
        if (length >= limits->max_head_bytes)
            return fail(status, reason, 431, "request head too large");
        return HTTP_PARSE_INCOMPLETE;
    }
    http_parse_result r = parse_request_line(buf, line_end, req, status, reason);
    if (r != HTTP_PARSE_OK) return r;

    for (;;) {
        size_t next = next_line(buf, at, scan_end, &line_end);
        if (next == SIZE_MAX) return fail(status, reason, 400, "header line not terminated by CRLF");
        if (next == 0) {
            if (length >= limits->max_head_bytes)
                return fail(status, reason, 431, "request head too large");
            return HTTP_PARSE_INCOMPLETE;
        }
        if (line_end == at) { /* empty line: end of head */
            at = next;
            break;
        }
        if (req->n_headers == HTTP_MAX_HEADERS)
            return fail(status, reason, 431, "too many header fields");
        r = parse_header(buf + at, line_end - at, &req->headers[req->n_headers], status, reason);
        if (r != HTTP_PARSE_OK) return r;
        req->n_headers++;
        at = next;
    }
    req->head_length = at;

    /* Framing: Content-Length (all copies identical) or chunked, never both. */
    bool have_length = false, close = false, keep = false;
    unsigned long long body = 0;
    for (size_t k = 0; k < req->n_headers; k++) {
        const http_header *h = &req->headers[k];
        if (eq_nocase(h->name, h->name_length, "transfer-encoding")) {
            /* Only a lone "chunked": a second coding (gzip, ...) would have to
             * be undone before the body is JSON, and repeated headers are how
             * framing disagreements between proxies start. */
            if (req->chunked || !eq_nocase(h->value, h->value_length, "chunked"))
                return fail(status, reason, 501, "only Transfer-Encoding: chunked is supported");
            req->chunked = true;
        }
        if (eq_nocase(h->name, h->name_length, "connection")) connection_tokens(h, &close, &keep);
        if (eq_nocase(h->name, h->name_length, "expect")) {
            if (!eq_nocase(h->value, h->value_length, "100-continue"))
                return fail(status, reason, 417, "unsupported Expect value");
            req->expect_continue = true;
        }
        if (!eq_nocase(h->name, h->name_length, "content-length")) continue;
        if (h->value_length == 0 || h->value_length > 18)
            return fail(status, reason, 400, "invalid Content-Length");
        unsigned long long v = 0;
        for (size_t i = 0; i < h->value_length; i++) {
            char c = h->value[i];
            if (c < '0' || c > '9') return fail(status, reason, 400, "invalid Content-Length");
            v = v * 10 + (unsigned)(c - '0');
        }
        if (have_length && v != body)
            return fail(status, reason, 400, "conflicting Content-Length headers");
        have_length = true;
        body = v;
    }
    if (req->chunked && (have_length || req->minor_version == 0))
        return fail(status, reason, 400, have_length
                    ? "Transfer-Encoding and Content-Length together are ambiguous framing"
                    : "Transfer-Encoding is not allowed in HTTP/1.0 requests");
    req->keep_alive = req->minor_version == 1 ? !close : (keep && !close);
    if (req->chunked) {
        size_t decoded = 0, end = 0;
        r = walk_chunked(buf, at, length, limits, NULL, &decoded, &end, status, reason);
        if (r != HTTP_PARSE_OK) return r;
        req->body = NULL;
        req->body_length = decoded;
        req->total_length = end;
        return HTTP_PARSE_OK;
    }
    if (body > limits->max_body_bytes) return fail(status, reason, 413, "request body too large");
    if (length - at < body) return HTTP_PARSE_INCOMPLETE;
    req->body = buf + at;
    req->body_length = (size_t)body;
    req->total_length = at + (size_t)body;
    return HTTP_PARSE_OK;
}

size_t http_max_request_bytes(const http_limits *l) {
    return 2 * l->max_head_bytes + l->max_body_bytes;
}

void http_decode_chunked(char *buf, http_request *req) {
    if (!req->chunked || req->body) return;
    size_t decoded = 0, end = 0;
    int status;
    const char *reason;
    /* Limits were checked by the parse that said OK; a generous copy here
     * only avoids re-deriving them. */
    http_limits l = {.max_head_bytes = req->total_length, .max_body_bytes = req->body_length};
    walk_chunked(buf, req->head_length, req->total_length, &l, buf + req->head_length, &decoded,
                 &end, &status, &reason);
    req->body = buf + req->head_length;
}

const http_header *http_find_header(const http_request *req, const char *name) {
    for (size_t k = 0; k < req->n_headers; k++)
        if (eq_nocase(req->headers[k].name, req->headers[k].name_length, name))
            return &req->headers[k];
    return NULL;
}

bool http_path_is(const http_request *req, const char *path) {
    size_t n = 0;
    while (n < req->target_length && req->target[n] != '?') n++;
    return n == strlen(path) && !memcmp(req->target, path, n);
}

bool http_method_is(const http_request *req, const char *method) {
    return req->method_length == strlen(method) && !memcmp(req->method, method, req->method_length);
}

const char *http_status_text(int status) {
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 417: return "Expectation Failed";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
    }
}

size_t http_format_head(char *out, size_t cap, int status, const char *content_type,
                        long long content_length, bool keep_alive, const char *extra_headers) {
    char len_line[64] = "";
    if (content_length >= 0)
        snprintf(len_line, sizeof len_line, "Content-Length: %lld\r\n", content_length);
    int n = snprintf(out, cap,
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n%sConnection: %s\r\n"
                     "Server: kipp\r\n%s\r\n",
                     status, http_status_text(status), content_type, len_line,
                     keep_alive && content_length >= 0 ? "keep-alive" : "close",
                     extra_headers ? extra_headers : "");
    if (n < 0 || (size_t)n >= cap) return 0;
    return (size_t)n;
}
