/* Tokenizer tests from tokenizer.json directly (no artifact needed):
 *   - the golden corpus (tests/vectors/tokenizer, made by transformers.js):
 *     exact ids on every case, decode(encode(x)) == NFC(x) byte for byte;
 *   - the invalid-UTF-8 policy against TextDecoder's replacement
 *     (invalid_utf8.jsonl);
 *   - the streaming decoder: holds incomplete UTF-8, equals the one-shot
 *     decode, replaces what can never be valid;
 *   - pathological inputs (a megabyte of one letter, of one space, of
 *     punctuation without spaces) encode and round-trip;
 *   - UTF-8 helpers on hand-made byte strings.
 * The end-to-end path through the artifact and the CLI is
 * tests/scripts/test_tokenizer_golden.sh. */
#include <stdint.h>

#include "core/model_internal.h"
#include "core/tokenizer_internal.h"
#include "core/unicode.h"
#include "test_tokenizer_fixture.h"
#include "test_util.h"

#define VEC "tests/vectors/tokenizer/"

static kipp_tokenizer *tk;
static kipp_model fake_model; /* only .tokenizer is used by the decode API */

/* Lines of a file (the buffer is modified: '\n' -> '\0'). */
typedef struct lines {
    char *data;
    char **line;
    size_t *len;
    size_t n;
} lines;

static bool read_lines(const char *path, lines *out) {
    kipp_error err = {0};
    size_t size;
    memset(out, 0, sizeof *out);
    if (kipp_read_file(path, &out->data, &size, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return false;
    }
    size_t cap = 1024;
    out->line = malloc(cap * sizeof *out->line);
    out->len = malloc(cap * sizeof *out->len);
    char *p = out->data, *end = out->data + size;
    while (p < end) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) nl = end;
        if (out->n == cap) {
            cap *= 2;
            out->line = realloc(out->line, cap * sizeof *out->line);
            out->len = realloc(out->len, cap * sizeof *out->len);
        }
        *nl = '\0';
        out->line[out->n] = p;
        out->len[out->n++] = (size_t)(nl - p);
        p = nl + 1;
    }
    return true;
}

static void free_lines(lines *l) {
    free(l->data);
    free(l->line);
    free(l->len);
}

/* Parses a JSON array of integers. */
static bool parse_ids(const char *s, size_t n, int32_t **ids, size_t *n_ids) {
    json_doc *doc;
    kipp_error err;
    if (kipp_json_parse(s, n, &doc, &err)) return false;
    const json_value *v = kipp_json_root(doc);
    bool ok = v->type == JSON_ARRAY;
    *n_ids = ok ? v->as.array.count : 0;
    *ids = malloc((*n_ids + 1) * sizeof **ids);
    for (size_t i = 0; ok && i < *n_ids; i++) {
        const json_value *x = v->as.array.items[i];
        ok = x->type == JSON_NUMBER && x->as.number.is_integer;
        if (ok) (*ids)[i] = (int32_t)x->as.number.integer;
    }
    kipp_json_free(doc);
    return ok;
}

static void print_ids(const char *label, const int32_t *ids, size_t n) {
    fprintf(stderr, "  %s:", label);
    for (size_t i = 0; i < n && i < 40; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, n > 40 ? " ...\n" : "\n");
}

static void test_golden(void) {
    lines in, exp, nfc, names;
    if (!read_lines(VEC "inputs.jsonl", &in) || !read_lines(VEC "expected.jsonl", &exp) ||
        !read_lines(VEC "nfc.jsonl", &nfc) || !read_lines(VEC "cases.jsonl", &names)) {
        CHECKF(0, "golden corpus files missing");
        return;
    }
    CHECK(in.n == exp.n && in.n == nfc.n && in.n == names.n);
    CHECKF(in.n >= 2000, "only %zu golden cases", in.n);
    size_t id_fail = 0, rt_fail = 0;
    for (size_t i = 0; i < in.n && i < exp.n && i < nfc.n; i++) {
        json_doc *d_in, *d_nfc;
        kipp_error err;
        if (kipp_json_parse(in.line[i], in.len[i], &d_in, &err) ||
            kipp_json_parse(nfc.line[i], nfc.len[i], &d_nfc, &err)) {
            CHECKF(0, "line %zu: unparsable", i + 1);
            continue;
        }
        const json_value *text = kipp_json_root(d_in), *want_text = kipp_json_root(d_nfc);
        int32_t *want = NULL, *got = NULL;
        size_t n_want = 0, n_got = 0;
        CHECK(parse_ids(exp.line[i], exp.len[i], &want, &n_want));
        int rc = kipp_tokenizer_encode(tk, text->as.string.chars, text->as.string.length, &got,
                                       &n_got, &err);
        CHECKF(rc == 0, "%s", err.message);
        if (rc == 0 && (n_got != n_want || memcmp(got, want, n_got * sizeof *got) != 0)) {
            if (id_fail++ < 10) {
                fprintf(stderr, "ids differ on %s (line %zu): %.*s\n", names.line[i], i + 1,
                        (int)(in.len[i] < 200 ? in.len[i] : 200), in.line[i]);
                print_ids("want", want, n_want);
                print_ids("got ", got, n_got);
            }
        }
        if (rc == 0) {
            char *back = NULL;
            size_t n_back = 0;
            rc = kipp_detokenize(&fake_model, got, n_got, &back, &n_back, &err);
            CHECKF(rc == 0, "%s", err.message);
            if (rc == 0 && (n_back != want_text->as.string.length ||
                            memcmp(back, want_text->as.string.chars, n_back) != 0)) {
                if (rt_fail++ < 10)
                    fprintf(stderr, "decode(encode(x)) != NFC(x) on %s (line %zu)\n",
                            names.line[i], i + 1);
            }
            free(back);
        }
        free(want);
        free(got);
        kipp_json_free(d_in);
        kipp_json_free(d_nfc);
    }
    CHECKF(id_fail == 0, "%zu of %zu golden cases have different ids", id_fail, in.n);
    CHECKF(rt_fail == 0, "%zu of %zu golden cases do not round-trip to NFC", rt_fail, in.n);
    fprintf(stderr, "golden: %zu cases\n", in.n);
    free_lines(&in);
    free_lines(&exp);
    free_lines(&nfc);
    free_lines(&names);
}

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static void test_invalid_utf8(void) {
    lines l;
    if (!read_lines(VEC "invalid_utf8.jsonl", &l)) {
        CHECKF(0, "invalid_utf8.jsonl missing");
        return;
    }
    size_t fails = 0;
    for (size_t i = 0; i < l.n; i++) {
        json_doc *doc;
        kipp_error err;
        if (kipp_json_parse(l.line[i], l.len[i], &doc, &err)) {
            CHECKF(0, "line %zu unparsable", i + 1);
            continue;
        }
        const char *hex = kipp_json_get_string(kipp_json_root(doc), "hex");
        const json_value *ids = kipp_json_get_type(kipp_json_root(doc), "ids", JSON_ARRAY);
        CHECK(hex && ids);
        if (!hex || !ids) {
            kipp_json_free(doc);
            continue;
        }
        size_t nb = strlen(hex) / 2;
        uint8_t *bytes = malloc(nb + 1);
        for (size_t k = 0; k < nb; k++)
            bytes[k] = (uint8_t)(hexval(hex[2 * k]) * 16 + hexval(hex[2 * k + 1]));
        int32_t *got;
        size_t n_got;
        int rc = kipp_tokenizer_encode(tk, (const char *)bytes, nb, &got, &n_got, &err);
        CHECKF(rc == 0, "%s", err.message);
        bool same = rc == 0 && n_got == ids->as.array.count;
        for (size_t k = 0; same && k < n_got; k++)
            same = got[k] == (int32_t)ids->as.array.items[k]->as.number.integer;
        if (!same && fails++ < 10) fprintf(stderr, "invalid-UTF-8 case %zu (%s) differs\n", i + 1, hex);
        if (rc == 0) free(got);
        free(bytes);
        kipp_json_free(doc);
    }
    CHECKF(fails == 0, "%zu of %zu invalid-UTF-8 cases differ", fails, l.n);
    CHECKF(l.n >= 100, "only %zu invalid-UTF-8 cases", l.n);
    free_lines(&l);
}

static bool valid_utf8(const char *s, size_t n) {
    return kipp_utf8_valid_prefix((const uint8_t *)s, n) == n;
}

static void test_stream(void) {
    kipp_error err;
    /* a text whose tokens split UTF-8 sequences: rare CJK, emoji, marks */
    const char *text = "x 𒀀𒀁 👨‍👩‍👧‍👦 ᾯ\u0301 é 𝕳𝖊𝖑𝖑𝖔 <think> 字字 ";
    int32_t *ids;
    size_t n;
    CHECK(kipp_tokenizer_encode(tk, text, strlen(text), &ids, &n, &err) == 0);
    char *whole;
    size_t n_whole;
    CHECK(kipp_detokenize(&fake_model, ids, n, &whole, &n_whole, &err) == 0);
    kipp_detok_stream *s;
    CHECK(kipp_detok_stream_create(&fake_model, &s, &err) == 0);
    char *acc = malloc(n_whole + 64);
    size_t n_acc = 0, held_pushes = 0;
    for (size_t i = 0; i < n; i++) {
        char piece[512];
        size_t len;
        CHECK(kipp_detok_stream_push(s, ids[i], piece, sizeof piece, &len, &err) == 0);
        CHECK(valid_utf8(piece, len));
        size_t tok_len;
        kipp_tokenizer_token_bytes(tk, ids[i], &tok_len);
        if (len < tok_len) held_pushes++;
        memcpy(acc + n_acc, piece, len);
        n_acc += len;
    }
    size_t len;
    CHECK(kipp_detok_stream_flush(s, acc + n_acc, 64, &len) == 0);
    CHECK(len == 0);
    n_acc += len;
    CHECK(n_acc == n_whole && memcmp(acc, whole, n_whole) == 0);
    CHECKF(held_pushes > 0, "no token of the test text split a UTF-8 sequence");

    /* held bytes across pushes: the three bytes of U+4E2D one token each */
    int32_t b0 = tk->byte_id[0xE4], b1 = tk->byte_id[0xB8], b2 = tk->byte_id[0xAD];
    char out[16];
    CHECK(kipp_detok_stream_push(s, b0, out, sizeof out, &len, &err) == 0 && len == 0);
    CHECK(kipp_detok_stream_push(s, b1, out, sizeof out, &len, &err) == 0 && len == 0);
    CHECK(kipp_detok_stream_push(s, b2, out, sizeof out, &len, &err) == 0 && len == 3 &&
          memcmp(out, "\xE4\xB8\xAD", 3) == 0);
    /* an incomplete sequence cut by an ASCII token: U+FFFD, then the ASCII */
    CHECK(kipp_detok_stream_push(s, b0, out, sizeof out, &len, &err) == 0 && len == 0);
    CHECK(kipp_detok_stream_push(s, tk->byte_id['a'], out, sizeof out, &len, &err) == 0 &&
          len == 4 && memcmp(out, "\xEF\xBF\xBD" "a", 4) == 0);
    /* a stray continuation byte is replaced at once */
    CHECK(kipp_detok_stream_push(s, b1, out, sizeof out, &len, &err) == 0 && len == 3 &&
          memcmp(out, "\xEF\xBF\xBD", 3) == 0);
    /* flush of a held prefix gives one U+FFFD */
    CHECK(kipp_detok_stream_push(s, b0, out, sizeof out, &len, &err) == 0 && len == 0);
    CHECK(kipp_detok_stream_flush(s, out, sizeof out, &len) == 0 && len == 3 &&
          memcmp(out, "\xEF\xBF\xBD", 3) == 0);
    /* too small an output buffer: error, nothing consumed */
    CHECK(kipp_detok_stream_push(s, tk->byte_id['a'], out, 0, &len, &err) == KIPP_E_CAPACITY);
    CHECK(kipp_detok_stream_push(s, tk->byte_id['a'], out, 1, &len, &err) == 0 && len == 1);
    /* out-of-range ids */
    CHECK(kipp_detok_stream_push(s, -1, out, sizeof out, &len, &err) == KIPP_E_ARGUMENT);
    CHECK(kipp_detok_stream_push(s, KIPP_VOCAB_SIZE, out, sizeof out, &len, &err) ==
          KIPP_E_ARGUMENT);
    int32_t bad = KIPP_VOCAB_SIZE;
    char *t2;
    CHECK(kipp_detokenize(&fake_model, &bad, 1, &t2, NULL, &err) == KIPP_E_ARGUMENT);
    /* special tokens decode to their text; unused ids to nothing */
    int32_t sp[3] = {151644, 151935, 151668};
    CHECK(kipp_detokenize(&fake_model, sp, 3, &t2, &len, &err) == 0 &&
          strcmp(t2, "<|im_start|></think>") == 0);
    free(t2);
    kipp_detok_stream_destroy(s);
    free(acc);
    free(whole);
    free(ids);
}

/* Encodes text, checks decode(encode(text)) == text (text is NFC). */
static size_t round_trip(const char *text, size_t n) {
    kipp_error err;
    int32_t *ids;
    size_t n_ids;
    if (kipp_tokenizer_encode(tk, text, n, &ids, &n_ids, &err)) {
        CHECKF(0, "%s", err.message);
        return 0;
    }
    char *back;
    size_t n_back;
    CHECK(kipp_detokenize(&fake_model, ids, n_ids, &back, &n_back, &err) == 0);
    CHECK(n_back == n && memcmp(back, text, n) == 0);
    free(back);
    free(ids);
    return n_ids;
}

static void test_pathological(void) {
    size_t n = 1 << 20;
    char *buf = malloc(n + 4);
    const char fills[] = {'a', ' ', '!', '7', '\n'};
    for (size_t f = 0; f < sizeof fills; f++) {
        memset(buf, fills[f], n);
        double t0 = kipp_now_seconds();
        size_t n_ids = round_trip(buf, n);
        fprintf(stderr, "1 MiB of '%c': %zu tokens, %.3f s\n", fills[f] == '\n' ? 'N' : fills[f],
                n_ids, kipp_now_seconds() - t0);
        CHECK(n_ids > 0);
    }
    /* a megabyte without spaces, mixed classes */
    for (size_t i = 0; i < n; i++) buf[i] = "abcXYZ019.,;-_()"[(i * 7 + i / 13) % 16];
    double t0 = kipp_now_seconds();
    size_t n_ids = round_trip(buf, n);
    fprintf(stderr, "1 MiB without spaces: %zu tokens, %.3f s\n", n_ids, kipp_now_seconds() - t0);
    /* a megabyte of one CJK character (3-byte UTF-8) */
    for (size_t i = 0; i + 3 <= n; i += 3) memcpy(buf + i, "\xE5\xAD\x97", 3);
    n_ids = round_trip(buf, n / 3 * 3);
    CHECK(n_ids > 0);
    free(buf);
}

static void test_utf8_helpers(void) {
    uint32_t cp;
    bool ok;
    /* WHATWG maximal subparts */
    CHECK(kipp_utf8_decode((const uint8_t *)"\xE0\x80\x80", 3, &cp, &ok) == 1 && !ok);
    CHECK(kipp_utf8_decode((const uint8_t *)"\xED\xA0\x80", 3, &cp, &ok) == 1 && !ok);
    CHECK(kipp_utf8_decode((const uint8_t *)"\xF0\x9F\x98\x41", 4, &cp, &ok) == 3 && !ok);
    CHECK(kipp_utf8_decode((const uint8_t *)"\xF4\x90\x80\x80", 4, &cp, &ok) == 1 && !ok);
    CHECK(kipp_utf8_decode((const uint8_t *)"\xF0\x9F\x98\x80", 4, &cp, &ok) == 4 && ok &&
          cp == 0x1F600);
    CHECK(kipp_utf8_incomplete_tail((const uint8_t *)"a\xF0\x9F\x98", 4) == 3);
    CHECK(kipp_utf8_incomplete_tail((const uint8_t *)"a\xE4\xB8", 3) == 2);
    CHECK(kipp_utf8_incomplete_tail((const uint8_t *)"a\xED\xA0", 3) == 0);
    CHECK(kipp_utf8_incomplete_tail((const uint8_t *)"a\xE4\xB8\xAD", 4) == 0);
    CHECK(kipp_utf8_incomplete_tail((const uint8_t *)"\x80\x80", 2) == 0);
    /* classes per ECMAScript \s and general categories */
    CHECK(kipp_uclass(0x85) != KIPP_UCLASS_SPACE);  /* NEL is not JS \s */
    CHECK(kipp_uclass(0xFEFF) == KIPP_UCLASS_SPACE);
    CHECK(kipp_uclass(0x3000) == KIPP_UCLASS_SPACE);
    CHECK(kipp_uclass(0x200B) == KIPP_UCLASS_OTHER);
    CHECK(kipp_uclass(0x4E2D) == KIPP_UCLASS_LETTER);
    CHECK(kipp_uclass(0x0301) == KIPP_UCLASS_OTHER); /* Mn is not \p{L} */
    CHECK(kipp_uclass(0x2167) == KIPP_UCLASS_NUMBER); /* Nl */
    CHECK(kipp_ccc(0x0301) == 230 && kipp_ccc(0x0323) == 220 && kipp_ccc('a') == 0);
    CHECK(strcmp(kipp_unicode_version, "15.0.0") == 0);
}

int main(void) {
    const char *path = fixture_tokenizer_json();
    if (!path) {
        return test_skip_all(TEST_SKIP_MISSING,
                             "no tokenizer.json (npm ci, or set KIPP_TOKENIZER_JSON)");
    }
    kipp_error err = {0};
    double t0 = kipp_now_seconds();
    if (fixture_tokenizer_load(path, &tk, &err)) {
        fprintf(stderr, "cannot build tokenizer from %s: %s\n", path, err.message);
        return 1;
    }
    fprintf(stderr, "built from %s in %.3f s\n", path, kipp_now_seconds() - t0);
    fake_model.tokenizer = tk;
    test_utf8_helpers();
    test_golden();
    test_invalid_utf8();
    test_stream();
    test_pathological();
    kipp_tokenizer_destroy(tk);
    return test_finish("test_tokenizer");
}
