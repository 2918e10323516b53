/* libFuzzer target for the converter's tokenizer import (src/convert/vocab.c)
 * and the tokenizer the artifact loader builds from its arrays
 * (kipp_tokenizer_create_from_arrays, src/core/tokenizer.c):
 *   make fuzz-vocab [FUZZ_SECONDS=60]
 * The input is TOKENIZER_JSON [NUL TOKENIZER_CONFIG_JSON [NUL TEXT]] (the
 * config is "{}" when absent). Seeds: tests/fuzz/seeds-vocab, cut from the
 * real Qwen3 files by tests/fuzz/make_seeds_vocab.py.
 *   - kipp_vocab_build accepts, or refuses with a message;
 *   - accepted: every one of the 151,936 ids has a string and a type the
 *     loader allows (added tokens only from KIPP_FIRST_ADDED_TOKEN), the merges are "left right", the chat template (if any)
 *     is non-empty without NUL, and the tokenizer builds from the arrays (as
 *     at every model open of the artifact the converter would write);
 *   - TEXT then encodes to ids in range; when no id is an added token, the
 *     ids' bytes put together are NFC(TEXT) for valid UTF-8 TEXT (byte-level
 *     BPE loses nothing, however odd the vocabulary). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "convert/vocab.h"
#include "core/tokenizer.h"
#include "core/unicode.h"
#define FUZZ_NAME "fuzz_vocab"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_encode(const kipp_tokenizer *tok, const kipp_vocab *v, const char *text,
                         size_t len) {
    int32_t *ids = NULL;
    size_t n = 0;
    kipp_error err = {0};
    if (kipp_tokenizer_encode(tok, text, len, &ids, &n, &err) != KIPP_OK) {
        CHECK(err.message[0] != 0);
        return;
    }
    bool added = false;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        CHECK(ids[i] >= 0 && ids[i] < KIPP_VOCAB_SIZE);
        added |= v->types[ids[i]] != KIPP_TOKEN_NORMAL;
        size_t l = 0;
        CHECK(kipp_tokenizer_token_bytes(tok, ids[i], &l) != NULL);
        total += l;
    }
    if (!added && kipp_utf8_valid_prefix((const uint8_t *)text, len) == len) {
        uint8_t *joined = malloc(total ? total : 1), *nfc = NULL;
        if (!joined) abort();
        size_t at = 0, nfc_len = 0, nfc_cap = 0;
        for (size_t i = 0; i < n; i++) {
            size_t l = 0;
            const uint8_t *b = kipp_tokenizer_token_bytes(tok, ids[i], &l);
            memcpy(joined + at, b, l);
            at += l;
        }
        kipp_nfc_scratch sc = {0};
        CHECK(kipp_nfc((const uint8_t *)text, len, &sc, &nfc, &nfc_len, &nfc_cap));
        CHECK(nfc_len == total && memcmp(nfc, joined, total) == 0);
        free(nfc);
        kipp_nfc_scratch_free(&sc);
        free(joined);
    }
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *p = data, *end = data + size;
    size_t tok_len, cfg_len = 0, text_len;
    bool has_cfg = size && memchr(data, 0, size);
    char *tok_json = fuzz_next_part(&p, end, &tok_len, NULL);
    char *cfg_json = has_cfg ? fuzz_next_part(&p, end, &cfg_len, NULL) : NULL;
    char *text = fuzz_next_part(&p, end, &text_len, NULL);
    if (!cfg_json) {
        cfg_json = strdup("{}");
        if (!cfg_json) abort();
        cfg_len = 2;
    }

    kipp_vocab v;
    kipp_error err = {0};
    if (kipp_vocab_build(&v, tok_json, tok_len, cfg_json, cfg_len, &err) != KIPP_OK) {
        CHECK(err.message[0] != 0);
        goto done;
    }
    gguf_str *tokens = malloc(KIPP_VOCAB_SIZE * sizeof *tokens);
    gguf_str *merges = malloc((v.n_merges ? v.n_merges : 1) * sizeof *merges);
    if (!tokens || !merges) abort();
    for (size_t i = 0; i < KIPP_VOCAB_SIZE; i++) {
        int32_t t = v.types[i];
        CHECK(v.tokens[i] != NULL);
        CHECK(t == KIPP_TOKEN_NORMAL || t == KIPP_TOKEN_CONTROL || t == KIPP_TOKEN_USER_DEFINED ||
              t == KIPP_TOKEN_UNUSED);
        /* added tokens only above the BPE ids (the loader's rule) */
        CHECK(i >= KIPP_FIRST_ADDED_TOKEN || t == KIPP_TOKEN_NORMAL || t == KIPP_TOKEN_UNUSED);
        tokens[i] = (gguf_str){.ptr = v.tokens[i], .len = v.token_lens[i]};
    }
    CHECK(v.n_merges > 0);
    for (size_t i = 0; i < v.n_merges; i++) {
        CHECK(memchr(v.merges[i], ' ', v.merge_lens[i]) != NULL);
        merges[i] = (gguf_str){.ptr = v.merges[i], .len = v.merge_lens[i]};
    }
    if (v.chat_template) CHECK(v.chat_template[0] != 0);
    kipp_tokenizer *tok = NULL;
    if (kipp_tokenizer_create_from_arrays(tokens, v.types, KIPP_VOCAB_SIZE, merges, v.n_merges,
                                          &tok, &err) != KIPP_OK) {
        fprintf(stderr, FUZZ_NAME ": vocab_build accepted what the loader refuses: %s\n",
                err.message);
        abort();
    }
    check_encode(tok, &v, text, text_len);
    kipp_tokenizer_destroy(tok);
    free(tokens);
    free(merges);
    kipp_vocab_free(&v);
done:
    free(tok_json);
    free(cfg_json);
    free(text);
    return 0;
}
