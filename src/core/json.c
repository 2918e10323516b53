/* JSON (RFC 8259) DOM parser and a small string builder.
 *
 * Design: one recursive-descent pass over the input. Every node, string and
 * child array lives in a chunked bump arena owned by the json_doc, so freeing
 * a document is a walk over a few large blocks, and parsing an 11 MB
 * tokenizer.json (about 300k values) costs a handful of mallocs.
 *
 * Children of the container being parsed are collected on one scratch stack
 * shared by all nesting levels (a container's children are always the top of
 * the stack when it closes); they are then copied into exact-size arena
 * arrays. Recursion depth is bounded by JSON_MAX_DEPTH, so hostile nesting
 * fails with a message instead of exhausting the C stack.
 *
 * Strictness: exactly RFC 8259. No comments, no trailing commas, no NaN or
 * Infinity, no leading zeros, no control characters (< 0x20) inside
 * strings, input strings must be valid UTF-8 (no overlong forms, no encoded
 * surrogates, nothing above U+10FFFF), and \u escapes must not leave a lone
 * surrogate. Numbers that overflow a double are rejected (they could not be
 * represented or written back). Errors name the problem and its byte offset
 * (plus line and column, for humans). */
#include "core/json.h"

#include <locale.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"

/* ---- arena ------------------------------------------------------------ */

typedef struct arena_block {
    struct arena_block *next;
    size_t capacity;
    size_t used;
    /* data follows, aligned to 16 (header is padded to 32 bytes) */
} arena_block;

#define ARENA_HEADER 32
/* Blocks start small (sized from the input: a 200-byte HTTP body should not
 * cost a megabyte) and double up to ARENA_MAX_BLOCK. */
#define ARENA_MIN_BLOCK ((size_t)4 << 10)
#define ARENA_MAX_BLOCK ((size_t)4 << 20)

_Static_assert(sizeof(arena_block) <= ARENA_HEADER, "arena header too large");

struct json_doc {
    arena_block *blocks; /* newest first */
    size_t next_block;   /* capacity of the next ordinary block */
    json_value *root;
};

/* Bump allocation of `size` bytes aligned to `align` (1, 8 or 16). */
static void *arena_alloc(json_doc *doc, size_t size, size_t align) {
    arena_block *b = doc->blocks;
    if (b) {
        size_t start = (b->used + align - 1) & ~(align - 1);
        if (start <= b->capacity && size <= b->capacity - start) {
            b->used = start + size;
            return (char *)b + ARENA_HEADER + start;
        }
    }
    size_t capacity = size > doc->next_block ? size : doc->next_block;
    size_t total;
    if (!kipp_add_size(capacity, ARENA_HEADER, &total)) return NULL;
    arena_block *nb = malloc(total);
    if (!nb) return NULL;
    nb->capacity = capacity;
    nb->used = size;
    /* A big one-off allocation goes behind the current block so the
     * current block's free space stays usable. */
    if (b && size >= doc->next_block / 2) {
        nb->next = b->next;
        b->next = nb;
    } else {
        nb->next = b;
        doc->blocks = nb;
        if (doc->next_block < ARENA_MAX_BLOCK) doc->next_block *= 2;
    }
    return (char *)nb + ARENA_HEADER;
}

/* ---- parser state -------------------------------------------------------- */

typedef struct pending_item {
    const char *key; /* NULL inside arrays */
    size_t key_length;
    json_value *value;
} pending_item;

typedef struct parser {
    const unsigned char *text;
    const unsigned char *end;
    const unsigned char *p;
    json_doc *doc;
    kipp_error *err;
    int failed;
    pending_item *stack; /* children of open containers */
    size_t stack_count;
    size_t stack_capacity;
} parser;

/* Records the first error with its byte offset, line and column. */
static int parse_error_at(parser *ps, const unsigned char *at, const char *what) {
    if (ps->failed) return ps->failed;
    size_t offset = (size_t)(at - ps->text);
    size_t line = 1, col = 1;
    for (const unsigned char *q = ps->text; q < at; q++) {
        if (*q == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    ps->failed = KIPP_E_FORMAT;
    kipp_fail(ps->err, KIPP_E_FORMAT, "JSON: %s at byte %zu (line %zu, column %zu)",
              what, offset, line, col);
    return ps->failed;
}

static int out_of_memory(parser *ps) {
    if (ps->failed) return ps->failed;
    ps->failed = KIPP_E_MEMORY;
    kipp_fail(ps->err, KIPP_E_MEMORY, "JSON: out of memory at byte %zu",
              (size_t)(ps->p - ps->text));
    return ps->failed;
}

static void skip_whitespace(parser *ps) {
    const unsigned char *p = ps->p, *end = ps->end;
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    ps->p = p;
}

static json_value *new_value(parser *ps, json_type type) {
    json_value *v = arena_alloc(ps->doc, sizeof *v, 16);
    if (!v) {
        out_of_memory(ps);
        return NULL;
    }
    memset(v, 0, sizeof *v);
    v->type = type;
    return v;
}

static int push_item(parser *ps, const char *key, size_t key_length, json_value *value) {
    if (ps->stack_count == ps->stack_capacity) {
        size_t ncap = ps->stack_capacity ? ps->stack_capacity * 2 : 256;
        size_t bytes;
        if (!kipp_mul_size(ncap, sizeof *ps->stack, &bytes)) return out_of_memory(ps);
        pending_item *ns = realloc(ps->stack, bytes);
        if (!ns) return out_of_memory(ps);
        ps->stack = ns;
        ps->stack_capacity = ncap;
    }
    ps->stack[ps->stack_count++] = (pending_item){ key, key_length, value };
    return KIPP_OK;
}

/* ---- strings -------------------------------------------------------------- */

static int hex_value(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Reads 4 hex digits at p (p + 4 <= end checked by caller); -1 if invalid. */
static long read_hex4(const unsigned char *p) {
    long v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hex_value(p[i]);
        if (h < 0) return -1;
        v = (v << 4) | h;
    }
    return v;
}

static size_t put_utf8(unsigned char *out, unsigned long cp) {
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xc0 | (cp >> 6));
        out[1] = (unsigned char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xe0 | (cp >> 12));
        out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (unsigned char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (unsigned char)(0xf0 | (cp >> 18));
    out[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (unsigned char)(0x80 | (cp & 0x3f));
    return 4;
}

/* Length of the well-formed UTF-8 sequence starting at p (first byte >=
 * 0x80), or 0 if it is malformed (Unicode Table 3-7). */
static size_t utf8_sequence_length(const unsigned char *p, const unsigned char *end) {
    unsigned char c = p[0];
    size_t avail = (size_t)(end - p);
    unsigned char lo = 0x80, hi = 0xbf;
    size_t n;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        if (c == 0xe0) lo = 0xa0;      /* no overlong */
        if (c == 0xed) hi = 0x9f;      /* no UTF-16 surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        if (c == 0xf0) lo = 0x90;      /* no overlong */
        if (c == 0xf4) hi = 0x8f;      /* nothing above U+10FFFF */
    } else {
        return 0;
    }
    if (avail < n) return 0;
    if (p[1] < lo || p[1] > hi) return 0;
    for (size_t i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xbf) return 0;
    return n;
}

/* Parses a string literal at ps->p (which is at the opening quote) into a
 * NUL-terminated arena copy. Pass 1 finds the closing quote and whether the
 * body is plain printable ASCII (the common case: memcpy). Pass 2 decodes
 * and validates. The decoded form is never longer than the raw body. */
static int parse_string(parser *ps, const char **out, size_t *out_length) {
    const unsigned char *start = ps->p + 1, *end = ps->end, *q = start;
    int plain = 1;
    while (q < end) {
        unsigned char c = *q;
        if (c == '"') break;
        if (c == '\\') {
            plain = 0;
            q += 2;
            continue;
        }
        if (c < 0x20 || c >= 0x80) plain = 0;
        q++;
    }
    if (q >= end) return parse_error_at(ps, ps->p, "unterminated string");
    size_t raw = (size_t)(q - start);
    unsigned char *dst = arena_alloc(ps->doc, raw + 1, 1);
    if (!dst) return out_of_memory(ps);
    if (plain) {
        memcpy(dst, start, raw);
        dst[raw] = '\0';
        *out = (const char *)dst;
        *out_length = raw;
        ps->p = q + 1;
        return KIPP_OK;
    }
    size_t n = 0;
    const unsigned char *s = start;
    while (s < q) {
        unsigned char c = *s;
        if (c < 0x20) return parse_error_at(ps, s, "control character in string (must be escaped)");
        if (c >= 0x80) {
            size_t len = utf8_sequence_length(s, q);
            if (!len) return parse_error_at(ps, s, "invalid UTF-8 in string");
            memcpy(dst + n, s, len);
            n += len;
            s += len;
            continue;
        }
        if (c != '\\') {
            dst[n++] = c;
            s++;
            continue;
        }
        /* escape: s[1] exists because pass 1 stopped at an unescaped quote */
        unsigned char e = s[1];
        switch (e) {
        case '"': dst[n++] = '"'; s += 2; continue;
        case '\\': dst[n++] = '\\'; s += 2; continue;
        case '/': dst[n++] = '/'; s += 2; continue;
        case 'b': dst[n++] = '\b'; s += 2; continue;
        case 'f': dst[n++] = '\f'; s += 2; continue;
        case 'n': dst[n++] = '\n'; s += 2; continue;
        case 'r': dst[n++] = '\r'; s += 2; continue;
        case 't': dst[n++] = '\t'; s += 2; continue;
        case 'u': break;
        default: return parse_error_at(ps, s, "invalid escape in string");
        }
        if ((size_t)(q - s) < 6) return parse_error_at(ps, s, "truncated \\u escape");
        long cp = read_hex4(s + 2);
        if (cp < 0) return parse_error_at(ps, s, "invalid hex digits in \\u escape");
        if (cp >= 0xdc00 && cp <= 0xdfff)
            return parse_error_at(ps, s, "lone low surrogate in \\u escape");
        if (cp >= 0xd800 && cp <= 0xdbff) {
            if ((size_t)(q - s) < 12 || s[6] != '\\' || s[7] != 'u')
                return parse_error_at(ps, s, "lone high surrogate in \\u escape");
            long lo = read_hex4(s + 8);
            if (lo < 0) return parse_error_at(ps, s + 6, "invalid hex digits in \\u escape");
            if (lo < 0xdc00 || lo > 0xdfff)
                return parse_error_at(ps, s, "high surrogate not followed by a low surrogate");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            s += 12;
        } else {
            s += 6;
        }
        n += put_utf8(dst + n, (unsigned long)cp);
    }
    dst[n] = '\0';
    *out = (const char *)dst;
    *out_length = n;
    ps->p = q + 1;
    return KIPP_OK;
}

/* ---- numbers -------------------------------------------------------------- */

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

/* strtod on a NUL-terminated copy (the input need not be terminated), with
 * the '.' translated to the locale's radix character so a host program's
 * setlocale() cannot change what a JSON number means. */
static int number_to_double(parser *ps, const unsigned char *start, size_t len, double *out) {
    char small[128];
    const char *radix = localeconv()->decimal_point;
    size_t radix_len = radix && *radix ? strlen(radix) : 1;
    size_t need;
    if (!kipp_mul_size(len, radix_len, &need) || !kipp_add_size(need, 1, &need))
        return out_of_memory(ps);
    char *buf = need <= sizeof small ? small : malloc(need);
    if (!buf) return out_of_memory(ps);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (start[i] == '.' && radix && *radix) {
            memcpy(buf + n, radix, radix_len);
            n += radix_len;
        } else {
            buf[n++] = (char)start[i];
        }
    }
    buf[n] = '\0';
    char *endp = NULL;
    double d = strtod(buf, &endp);
    int consumed_all = endp == buf + n;
    if (buf != small) free(buf);
    if (!consumed_all) return parse_error_at(ps, start, "unparseable number");
    /* overflow to infinity: not representable; underflow to 0 is fine */
    if (d > 1.7976931348623157e308 || d < -1.7976931348623157e308)
        return parse_error_at(ps, start, "number out of range for a double");
    *out = d;
    return KIPP_OK;
}

static int parse_number(parser *ps, json_value **out) {
    const unsigned char *start = ps->p, *p = ps->p, *end = ps->end;
    int negative = 0;
    if (p < end && *p == '-') {
        negative = 1;
        p++;
    }
    if (p >= end || !is_digit(*p)) return parse_error_at(ps, p, "invalid number (expected a digit)");
    /* integer part with int64 accumulation (magnitude as uint64) */
    uint64_t mag = 0;
    int mag_overflow = 0;
    if (*p == '0') {
        p++;
        if (p < end && is_digit(*p)) return parse_error_at(ps, start, "leading zero in number");
    } else {
        while (p < end && is_digit(*p)) {
            unsigned d = (unsigned)(*p - '0');
            if (mag > (UINT64_MAX - d) / 10) mag_overflow = 1;
            else mag = mag * 10 + d;
            p++;
        }
    }
    int is_integer = 1;
    if (p < end && *p == '.') {
        is_integer = 0;
        p++;
        if (p >= end || !is_digit(*p)) return parse_error_at(ps, p, "invalid number (digit expected after '.')");
        while (p < end && is_digit(*p)) p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        is_integer = 0;
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || !is_digit(*p)) return parse_error_at(ps, p, "invalid number (digit expected in exponent)");
        while (p < end && is_digit(*p)) p++;
    }
    json_value *v = new_value(ps, JSON_NUMBER);
    if (!v) return ps->failed;
    v->as.number.is_integer = is_integer != 0;
    int fits = 0;
    int64_t iv = 0;
    if (is_integer && !mag_overflow) {
        if (!negative && mag <= (uint64_t)INT64_MAX) {
            fits = 1;
            iv = (int64_t)mag;
        } else if (negative && mag <= (uint64_t)INT64_MAX + 1u) {
            fits = 1;
            iv = mag == (uint64_t)INT64_MAX + 1u ? INT64_MIN : -(int64_t)mag;
        }
    }
    v->as.number.fits_int64 = fits != 0;
    v->as.number.integer = iv;
    /* seeds are uint64 (OpenAI: any integer the client's 64-bit type holds) */
    v->as.number.fits_uint64 = is_integer && !mag_overflow && (!negative || mag == 0);
    v->as.number.uinteger = v->as.number.fits_uint64 ? mag : 0;
    if (fits) {
        /* int64 -> double conversion rounds to nearest, same as strtod */
        v->as.number.value = (double)iv;
        if (negative && iv == 0) v->as.number.value = -0.0; /* keep "-0" negative */
    } else {
        int rc = number_to_double(ps, start, (size_t)(p - start), &v->as.number.value);
        if (rc) return rc;
    }
    ps->p = p;
    *out = v;
    return KIPP_OK;
}

/* ---- values and containers ------------------------------------------------ */

static int parse_value(parser *ps, int depth, json_value **out);

static int expect_literal(parser *ps, const char *word, size_t len) {
    if ((size_t)(ps->end - ps->p) < len || memcmp(ps->p, word, len) != 0)
        return parse_error_at(ps, ps->p, "invalid literal (expected true, false or null)");
    ps->p += len;
    return KIPP_OK;
}

static int parse_array(parser *ps, int depth, json_value **out) {
    const unsigned char *open = ps->p;
    ps->p++; /* '[' */
    size_t base = ps->stack_count;
    skip_whitespace(ps);
    if (ps->p < ps->end && *ps->p == ']') {
        ps->p++;
    } else {
        for (;;) {
            json_value *item;
            int rc = parse_value(ps, depth + 1, &item);
            if (rc) return rc;
            if ((rc = push_item(ps, NULL, 0, item))) return rc;
            skip_whitespace(ps);
            if (ps->p >= ps->end) return parse_error_at(ps, open, "unterminated array");
            if (*ps->p == ',') {
                ps->p++;
                continue;
            }
            if (*ps->p == ']') {
                ps->p++;
                break;
            }
            return parse_error_at(ps, ps->p, "expected ',' or ']' in array");
        }
    }
    json_value *v = new_value(ps, JSON_ARRAY);
    if (!v) return ps->failed;
    size_t count = ps->stack_count - base;
    if (count) {
        json_value **items = arena_alloc(ps->doc, count * sizeof *items, 16);
        if (!items) return out_of_memory(ps);
        for (size_t i = 0; i < count; i++) items[i] = ps->stack[base + i].value;
        v->as.array.items = items;
    }
    v->as.array.count = count;
    ps->stack_count = base;
    *out = v;
    return KIPP_OK;
}

static int parse_object(parser *ps, int depth, json_value **out) {
    const unsigned char *open = ps->p;
    ps->p++; /* '{' */
    size_t base = ps->stack_count;
    skip_whitespace(ps);
    if (ps->p < ps->end && *ps->p == '}') {
        ps->p++;
    } else {
        for (;;) {
            skip_whitespace(ps);
            if (ps->p >= ps->end) return parse_error_at(ps, open, "unterminated object");
            if (*ps->p != '"') return parse_error_at(ps, ps->p, "expected a string key in object");
            const char *key;
            size_t key_length;
            int rc = parse_string(ps, &key, &key_length);
            if (rc) return rc;
            skip_whitespace(ps);
            if (ps->p >= ps->end) return parse_error_at(ps, open, "unterminated object");
            if (*ps->p != ':') return parse_error_at(ps, ps->p, "expected ':' after object key");
            ps->p++;
            json_value *value;
            if ((rc = parse_value(ps, depth + 1, &value))) return rc;
            if ((rc = push_item(ps, key, key_length, value))) return rc;
            skip_whitespace(ps);
            if (ps->p >= ps->end) return parse_error_at(ps, open, "unterminated object");
            if (*ps->p == ',') {
                ps->p++;
                continue;
            }
            if (*ps->p == '}') {
                ps->p++;
                break;
            }
            return parse_error_at(ps, ps->p, "expected ',' or '}' in object");
        }
    }
    json_value *v = new_value(ps, JSON_OBJECT);
    if (!v) return ps->failed;
    size_t count = ps->stack_count - base;
    if (count) {
        /* count <= input length, so these products cannot overflow */
        const char **keys = arena_alloc(ps->doc, count * sizeof *keys, 16);
        size_t *lengths = arena_alloc(ps->doc, count * sizeof *lengths, 16);
        json_value **values = arena_alloc(ps->doc, count * sizeof *values, 16);
        if (!keys || !lengths || !values) return out_of_memory(ps);
        for (size_t i = 0; i < count; i++) {
            keys[i] = ps->stack[base + i].key;
            lengths[i] = ps->stack[base + i].key_length;
            values[i] = ps->stack[base + i].value;
        }
        v->as.object.keys = keys;
        v->as.object.key_lengths = lengths;
        v->as.object.values = values;
    }
    v->as.object.count = count;
    ps->stack_count = base;
    *out = v;
    return KIPP_OK;
}

/* depth = number of containers enclosing this value */
static int parse_value(parser *ps, int depth, json_value **out) {
    skip_whitespace(ps);
    if (ps->p >= ps->end) return parse_error_at(ps, ps->p, "unexpected end of input (expected a value)");
    unsigned char c = *ps->p;
    int rc;
    switch (c) {
    case '{':
    case '[':
        if (depth >= JSON_MAX_DEPTH)
            return parse_error_at(ps, ps->p, "nesting deeper than JSON_MAX_DEPTH (128)");
        return c == '{' ? parse_object(ps, depth, out) : parse_array(ps, depth, out);
    case '"': {
        json_value *v = new_value(ps, JSON_STRING);
        if (!v) return ps->failed;
        if ((rc = parse_string(ps, &v->as.string.chars, &v->as.string.length))) return rc;
        *out = v;
        return KIPP_OK;
    }
    case 't':
    case 'f':
    case 'n': {
        json_type t = c == 't' ? JSON_TRUE : c == 'f' ? JSON_FALSE : JSON_NULL;
        rc = c == 't' ? expect_literal(ps, "true", 4)
           : c == 'f' ? expect_literal(ps, "false", 5)
                      : expect_literal(ps, "null", 4);
        if (rc) return rc;
        json_value *v = new_value(ps, t);
        if (!v) return ps->failed;
        *out = v;
        return KIPP_OK;
    }
    default:
        if (c == '-' || is_digit(c)) return parse_number(ps, out);
        return parse_error_at(ps, ps->p, "unexpected character (expected a value)");
    }
}

int kipp_json_parse(const char *text, size_t length, json_doc **out, kipp_error *err) {
    *out = NULL;
    if (!text && length) return kipp_fail(err, KIPP_E_ARGUMENT, "JSON: NULL text");
    json_doc *doc = calloc(1, sizeof *doc);
    if (!doc) return kipp_fail(err, KIPP_E_MEMORY, "JSON: out of memory");
    /* roughly what the nodes of this input will need, within bounds */
    doc->next_block = length / 2 < ARENA_MIN_BLOCK ? ARENA_MIN_BLOCK
                    : length / 2 > ARENA_MAX_BLOCK ? ARENA_MAX_BLOCK : length / 2;
    static const unsigned char empty[1] = { 0 };
    const unsigned char *t = text ? (const unsigned char *)text : empty;
    parser ps = {
        .text = t, .end = t + length, .p = t, .doc = doc, .err = err,
    };
    json_value *root = NULL;
    int rc = parse_value(&ps, 0, &root);
    if (!rc) {
        skip_whitespace(&ps);
        if (ps.p != ps.end) rc = parse_error_at(&ps, ps.p, "trailing characters after the JSON value");
    }
    free(ps.stack);
    if (rc) {
        kipp_json_free(doc);
        return rc;
    }
    doc->root = root;
    *out = doc;
    return KIPP_OK;
}

const json_value *kipp_json_root(const json_doc *doc) { return doc ? doc->root : NULL; }

void kipp_json_free(json_doc *doc) {
    if (!doc) return;
    arena_block *b = doc->blocks;
    while (b) {
        arena_block *next = b->next;
        free(b);
        b = next;
    }
    free(doc);
}

/* ---- lookups -------------------------------------------------------------- */

const json_value *kipp_json_get(const json_value *object, const char *key) {
    if (!object || object->type != JSON_OBJECT || !key) return NULL;
    size_t len = strlen(key);
    /* from the end: the last duplicate wins */
    for (size_t i = object->as.object.count; i-- > 0;) {
        if (object->as.object.key_lengths[i] == len &&
            memcmp(object->as.object.keys[i], key, len) == 0)
            return object->as.object.values[i];
    }
    return NULL;
}

const json_value *kipp_json_get_type(const json_value *object, const char *key, json_type type) {
    const json_value *v = kipp_json_get(object, key);
    return v && v->type == type ? v : NULL;
}

bool kipp_json_get_int64(const json_value *object, const char *key, int64_t *out) {
    const json_value *v = kipp_json_get_type(object, key, JSON_NUMBER);
    if (!v || !v->as.number.is_integer || !v->as.number.fits_int64) return false;
    *out = v->as.number.integer;
    return true;
}

bool kipp_json_get_double(const json_value *object, const char *key, double *out) {
    const json_value *v = kipp_json_get_type(object, key, JSON_NUMBER);
    if (!v) return false;
    *out = v->as.number.value;
    return true;
}

bool kipp_json_get_bool(const json_value *object, const char *key, bool *out) {
    const json_value *v = kipp_json_get(object, key);
    if (!v || (v->type != JSON_TRUE && v->type != JSON_FALSE)) return false;
    *out = v->type == JSON_TRUE;
    return true;
}

const char *kipp_json_get_string(const json_value *object, const char *key) {
    const json_value *v = kipp_json_get_type(object, key, JSON_STRING);
    return v ? v->as.string.chars : NULL;
}

/* ---- json_buf ---------------------------------------------------------------
 * Invariant while !failed and data != NULL: data[length] == '\0'. */

static bool buf_reserve(json_buf *b, size_t extra) {
    if (b->failed) return false;
    size_t need;
    if (!kipp_add_size(b->length, extra, &need) || !kipp_add_size(need, 1, &need)) {
        b->failed = true;
        return false;
    }
    if (need <= b->capacity) return true;
    size_t cap = b->capacity ? b->capacity : 64;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) {
            cap = need;
            break;
        }
        cap *= 2;
    }
    char *nd = realloc(b->data, cap);
    if (!nd) {
        b->failed = true;
        return false;
    }
    b->data = nd;
    b->capacity = cap;
    return true;
}

void kipp_json_buf_append(json_buf *b, const char *s, size_t n) {
    if (!buf_reserve(b, n)) return;
    if (n) memcpy(b->data + b->length, s, n);
    b->length += n;
    b->data[b->length] = '\0';
}

void kipp_json_buf_appendf(json_buf *b, const char *fmt, ...) {
    if (b->failed) return;
    va_list ap;
    va_start(ap, fmt);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = true;
        return;
    }
    if ((size_t)n < sizeof small) {
        kipp_json_buf_append(b, small, (size_t)n);
        return;
    }
    if (!buf_reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->length, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->length += (size_t)n;
}

/* Writes s as a JSON string literal. Output is always valid JSON: control
 * characters become escapes, and bytes that are not well-formed UTF-8 (for
 * example a token that ends mid-character) become U+FFFD, because a JSON
 * text must be UTF-8. */
void kipp_json_buf_append_string(json_buf *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    kipp_json_buf_append(b, "\"", 1);
    while (p < end && !b->failed) {
        /* copy the longest run that needs no escaping in one append */
        const unsigned char *run = p;
        while (p < end && *p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\') p++;
        if (p > run) kipp_json_buf_append(b, (const char *)run, (size_t)(p - run));
        if (p >= end) break;
        unsigned char c = *p;
        if (c >= 0x80) {
            size_t len = utf8_sequence_length(p, end);
            if (len) {
                kipp_json_buf_append(b, (const char *)p, len);
                p += len;
            } else {
                kipp_json_buf_append(b, "\\ufffd", 6);
                p++;
            }
            continue;
        }
        char esc[7];
        size_t elen = 2;
        esc[0] = '\\';
        switch (c) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        default:
            esc[1] = 'u';
            esc[2] = '0';
            esc[3] = '0';
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            elen = 6;
        }
        kipp_json_buf_append(b, esc, elen);
        p++;
    }
    kipp_json_buf_append(b, "\"", 1);
}

void kipp_json_buf_free(json_buf *b) {
    if (!b) return;
    free(b->data);
    b->data = NULL;
    b->length = b->capacity = 0;
    b->failed = false;
}

/* Compact JSON text of v (no whitespace; keys in document order). Numbers:
 * integers as integers, everything else (and -0) as %.17g, which round-trips
 * any double. */
void kipp_json_serialize(json_buf *b, const json_value *v) {
    switch (v->type) {
    case JSON_NULL: kipp_json_buf_append(b, "null", 4); break;
    case JSON_TRUE: kipp_json_buf_append(b, "true", 4); break;
    case JSON_FALSE: kipp_json_buf_append(b, "false", 5); break;
    case JSON_NUMBER:
        if (v->as.number.is_integer && v->as.number.fits_int64 && v->as.number.integer != 0)
            kipp_json_buf_appendf(b, "%lld", (long long)v->as.number.integer);
        else
            kipp_json_buf_appendf(b, "%.17g", v->as.number.value); /* round-trips any double */
        break;
    case JSON_STRING: kipp_json_buf_append_string(b, v->as.string.chars, v->as.string.length); break;
    case JSON_ARRAY:
        kipp_json_buf_append(b, "[", 1);
        for (size_t i = 0; i < v->as.array.count; i++) {
            if (i) kipp_json_buf_append(b, ",", 1);
            kipp_json_serialize(b, v->as.array.items[i]);
        }
        kipp_json_buf_append(b, "]", 1);
        break;
    case JSON_OBJECT:
        kipp_json_buf_append(b, "{", 1);
        for (size_t i = 0; i < v->as.object.count; i++) {
            if (i) kipp_json_buf_append(b, ",", 1);
            kipp_json_buf_append_string(b, v->as.object.keys[i], v->as.object.key_lengths[i]);
            kipp_json_buf_append(b, ":", 1);
            kipp_json_serialize(b, v->as.object.values[i]);
        }
        kipp_json_buf_append(b, "}", 1);
        break;
    }
}
