/* A small DOM JSON parser (RFC 8259) for config.json, tokenizer.json,
 * safetensors headers and (later) HTTP request bodies. It knows nothing of
 * models. All nodes live in one arena owned by json_doc; strings are decoded
 * (escapes resolved, \u surrogate pairs joined) to UTF-8 and NUL-terminated,
 * with an explicit length because they may contain NUL.
 * Limits (depth, size) make hostile input fail cleanly. */
#ifndef KIPP_JSON_H
#define KIPP_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kipp.h"

typedef enum json_type {
    JSON_NULL,
    JSON_FALSE,
    JSON_TRUE,
    JSON_NUMBER,
    JSON_STRING,
    JSON_ARRAY,
    JSON_OBJECT,
} json_type;

typedef struct json_value json_value;

struct json_value {
    json_type type;
    union {
        struct {
            double value;      /* parsed as double */
            bool is_integer;   /* lexically an integer without fraction/exp */
            int64_t integer;   /* valid when is_integer and it fits */
            bool fits_int64;
            uint64_t uinteger; /* valid when fits_uint64 (a non-negative integer) */
            bool fits_uint64;
        } number;
        struct {
            const char *chars; /* UTF-8, NUL-terminated */
            size_t length;
        } string;
        struct {
            json_value **items;
            size_t count;
        } array;
        struct {
            const char **keys;     /* NUL-terminated, decoded */
            size_t *key_lengths;
            json_value **values;
            size_t count;
        } object;
    } as;
};

typedef struct json_doc json_doc;

#define JSON_MAX_DEPTH 128

/* Parses exactly one value (surrounding whitespace allowed). On failure,
 * err says what and at which byte offset. */
int kipp_json_parse(const char *text, size_t length, json_doc **out,
               kipp_error *err);
const json_value *kipp_json_root(const json_doc *doc);
void kipp_json_free(json_doc *doc);

/* Lookups: NULL when absent or of another type. Duplicate keys: last wins. */
const json_value *kipp_json_get(const json_value *object, const char *key);
const json_value *kipp_json_get_type(const json_value *object, const char *key,
                                json_type type);
/* Typed getters return false when absent or mistyped. */
bool kipp_json_get_int64(const json_value *object, const char *key, int64_t *out);
bool kipp_json_get_double(const json_value *object, const char *key, double *out);
bool kipp_json_get_bool(const json_value *object, const char *key, bool *out);
const char *kipp_json_get_string(const json_value *object, const char *key);

/* Appends s as a JSON string literal (quotes, escapes) to a growable buffer. */
typedef struct json_buf {
    char *data;
    size_t length;
    size_t capacity;
    bool failed; /* allocation failed; data is unusable */
} json_buf;
void kipp_json_buf_append(json_buf *b, const char *s, size_t n);
void kipp_json_buf_appendf(json_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void kipp_json_buf_append_string(json_buf *b, const char *s, size_t n);
/* Compact JSON text of v appended to b (no whitespace, keys in document
 * order; numbers round-trip). */
void kipp_json_serialize(json_buf *b, const json_value *v);
void kipp_json_buf_free(json_buf *b);

#endif
