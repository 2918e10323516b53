/* libFuzzer target for the tokenizer (`make fuzz-tokenizer`, bounded by
 * FUZZ_SECONDS). Loads the artifact named by $KIPP_FUZZ_MODEL once.
 *   any bytes:        encode must not crash; every id is in range;
 *   valid UTF-8 x:    decode(encode(x)) == NFC(x), and the streaming decoder
 *                     pushed id by id gives the same bytes;
 *   the input read as little-endian int32 ids: detokenize and the stream
 *                     must not crash, and the stream's output is valid UTF-8. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/unicode.h"
#include "kipp.h"
#define FUZZ_NAME "fuzz_tokenizer"
#include "fuzz_util.h"

static kipp_model *model;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    model = fuzz_open_model();
    return 0;
}

static void stream_decode(const int32_t *ids, size_t n, char **out, size_t *out_len) {
    kipp_detok_stream *s;
    kipp_error err;
    if (kipp_detok_stream_create(model, &s, &err)) abort();
    size_t cap = 64, len = 0;
    char *buf = malloc(cap);
    for (size_t i = 0; i <= n; i++) {
        char piece[1024];
        size_t got = 0;
        if (i < n) {
            int rc = kipp_detok_stream_push(s, ids[i], piece, sizeof piece, &got, &err);
            if (rc == KIPP_E_ARGUMENT) continue; /* out-of-range id */
            if (rc) abort();
        } else if (kipp_detok_stream_flush(s, piece, sizeof piece, &got)) {
            abort();
        }
        if (kipp_utf8_valid_prefix((const uint8_t *)piece, got) != got) abort();
        while (len + got > cap) buf = realloc(buf, cap *= 2);
        memcpy(buf + len, piece, got);
        len += got;
    }
    kipp_detok_stream_destroy(s);
    *out = buf;
    *out_len = len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    kipp_error err;
    int32_t *ids = NULL;
    size_t n = 0;
    if (kipp_tokenize(model, (const char *)data, size, &ids, &n, &err)) abort();
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= KIPP_VOCAB_SIZE) abort();

    if (kipp_utf8_valid_prefix(data, size) == size) {
        char *text;
        size_t len;
        if (kipp_detokenize(model, ids, n, &text, &len, &err)) abort();
        kipp_nfc_scratch sc = {0};
        uint8_t *nfc = NULL;
        size_t nfc_len = 0, nfc_cap = 0;
        if (!kipp_nfc(data, size, &sc, &nfc, &nfc_len, &nfc_cap)) abort();
        if (len != nfc_len || memcmp(text, nfc, len) != 0) abort();
        char *streamed;
        size_t streamed_len;
        stream_decode(ids, n, &streamed, &streamed_len);
        if (streamed_len != len || memcmp(streamed, text, len) != 0) abort();
        free(streamed);
        free(nfc);
        kipp_nfc_scratch_free(&sc);
        free(text);
    }
    free(ids);

    /* arbitrary ids */
    size_t n_raw = size / 4;
    int32_t *raw = malloc((n_raw ? n_raw : 1) * sizeof *raw);
    memcpy(raw, data, n_raw * 4);
    char *text;
    size_t len;
    if (kipp_detokenize(model, raw, n_raw, &text, &len, &err) == KIPP_OK) free(text);
    char *streamed;
    size_t streamed_len;
    stream_decode(raw, n_raw, &streamed, &streamed_len);
    free(streamed);
    free(raw);
    return 0;
}
