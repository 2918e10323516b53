/* libFuzzer target for the JSON parser (src/core/json.c).
 *
 * Besides "no crash, no sanitizer report", each accepted input is checked
 * for a round trip: serialize the tree with json_buf (strings through
 * kipp_json_buf_append_string, numbers as exact integers or %.17g), parse that
 * again and require the same tree. Rejected inputs must carry a message.
 * Build and run: make fuzz-json [FUZZ_SECONDS=60] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"


static int same(const json_value *a, const json_value *b) {
    if (a->type != b->type) return 0;
    switch (a->type) {
    case JSON_NUMBER:
        /* integers keep their int64 value; others their double */
        if (a->as.number.fits_int64 && a->as.number.is_integer)
            return b->as.number.value == a->as.number.value;
        return a->as.number.value == b->as.number.value;
    case JSON_STRING:
        return a->as.string.length == b->as.string.length &&
               memcmp(a->as.string.chars, b->as.string.chars, a->as.string.length) == 0;
    case JSON_ARRAY:
        if (a->as.array.count != b->as.array.count) return 0;
        for (size_t i = 0; i < a->as.array.count; i++)
            if (!same(a->as.array.items[i], b->as.array.items[i])) return 0;
        return 1;
    case JSON_OBJECT:
        if (a->as.object.count != b->as.object.count) return 0;
        for (size_t i = 0; i < a->as.object.count; i++) {
            if (a->as.object.key_lengths[i] != b->as.object.key_lengths[i] ||
                memcmp(a->as.object.keys[i], b->as.object.keys[i], a->as.object.key_lengths[i]) != 0 ||
                !same(a->as.object.values[i], b->as.object.values[i]))
                return 0;
        }
        return 1;
    default:
        return 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_doc *doc = NULL;
    kipp_error err = { 0 };
    if (kipp_json_parse((const char *)data, size, &doc, &err) != KIPP_OK) {
        if (doc || strncmp(err.message, "JSON: ", 6) != 0) abort();
        return 0;
    }
    json_buf b = { 0 };
    kipp_json_serialize(&b, kipp_json_root(doc));
    if (b.failed) abort();
    json_doc *again = NULL;
    kipp_error err2 = { 0 };
    if (kipp_json_parse(b.data ? b.data : "", b.length, &again, &err2) != KIPP_OK) {
        fprintf(stderr, "re-parse failed: %s\n%.*s\n", err2.message, (int)b.length, b.data);
        abort();
    }
    if (!same(kipp_json_root(doc), kipp_json_root(again))) {
        fprintf(stderr, "round trip changed the tree:\n%.*s\n", (int)b.length, b.data);
        abort();
    }
    kipp_json_free(again);
    kipp_json_buf_free(&b);
    kipp_json_free(doc);
    return 0;
}
