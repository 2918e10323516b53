/* safetensors reader/writer: round trip through kipp_st_write_header, and
 * hostile headers rejected with their own messages (never read past the
 * file). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "convert/safetensors.h"
#include "test_util.h"

static char dir[1024];

static const char *write_raw(const char *name, const void *data, size_t n) {
    static char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    fwrite(data, 1, n, f);
    fclose(f);
    return path;
}

/* A file whose header is `json` (length-prefixed) followed by `data_len`
 * bytes of data. */
static const char *write_with_header(const char *name, const char *json, size_t data_len) {
    size_t hl = strlen(json);
    size_t n = 8 + hl + data_len;
    unsigned char *buf = calloc(1, n);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(buf + 8, json, hl);
    const char *p = write_raw(name, buf, n);
    free(buf);
    return p;
}

static void expect_reject(const char *name, const char *json, size_t data_len, const char *msg) {
    st_file f;
    kipp_error err = {0};
    int rc = kipp_st_open(write_with_header(name, json, data_len), &f, &err);
    CHECKF(rc != 0, "%s: accepted", name);
    CHECKF(rc == 0 || strstr(err.message, msg) != NULL, "%s: message '%s' lacks '%s'", name,
           err.message, msg);
    if (rc == 0) kipp_st_close(&f);
}

static void round_trip(void) {
    st_out_tensor ts[3] = {
        {"a.weight", "BF16", 2, {3, 32}},
        {"b.weight", "F32", 1, {5}},
        {"c", "BF16", 1, {0}},
    };
    char path[1200];
    snprintf(path, sizeof path, "%s/rt.safetensors", dir);
    FILE *f = fopen(path, "wb");
    kipp_error err = {0};
    CHECK(kipp_st_write_header(f, ts, 3, &err) == 0);
    long header_end = ftell(f);
    CHECK(header_end % 8 == 0);
    uint16_t a[96];
    for (int i = 0; i < 96; i++) a[i] = (uint16_t)(i * 7);
    float b[5] = {1, 2, 3, 4, 5};
    fwrite(a, 2, 96, f);
    fwrite(b, 4, 5, f);
    fclose(f);

    st_file s;
    CHECKF(kipp_st_open(path, &s, &err) == 0, "%s", err.message);
    CHECK(s.n_tensors == 3);
    const st_tensor *ta = kipp_st_find(&s, "a.weight"), *tb = kipp_st_find(&s, "b.weight");
    CHECK(ta && tb && kipp_st_find(&s, "c") && !kipp_st_find(&s, "d"));
    if (ta && tb) {
        CHECK(strcmp(ta->dtype, "BF16") == 0 && ta->n_dims == 2 && ta->shape[0] == 3 &&
              ta->shape[1] == 32);
        CHECK(ta->begin == 0 && ta->end == 192 && tb->begin == 192 && tb->end == 212);
        CHECK(s.data_offset == (uint64_t)header_end);
        uint16_t back[96];
        CHECK(kipp_st_read(&s, ta, 0, back, sizeof back, &err) == 0 && memcmp(back, a, sizeof a) == 0);
        float fb[2];
        CHECK(kipp_st_read(&s, tb, 8, fb, 8, &err) == 0 && fb[0] == 3 && fb[1] == 4);
        CHECK(kipp_st_read(&s, tb, 12, fb, 12, &err) != 0); /* past the tensor */
    }
    kipp_st_close(&s);
}

/* Many tensors in a scrambled order: every name is found (and names not in
 * the file are not), whatever order the header lists them in; a duplicate
 * is found wherever it sits. kipp_st_find is a binary search over the
 * names sorted at open, and open's duplicate check a sort. */
enum { MANY = 5000 };

static char *many_header(size_t n, size_t dup_of, size_t dup_at) {
    size_t cap = n * 96 + 16, len = 0;
    char *h = malloc(cap);
    len += (size_t)snprintf(h + len, cap - len, "{");
    for (size_t k = 0; k < n; k++) {
        size_t i = (k * 2999) % n; /* a permutation of 0..n-1 (2999 is prime to n) */
        if (k == dup_at) i = dup_of;
        len += (size_t)snprintf(h + len, cap - len,
                                "%s\"t.%zu.w\":{\"dtype\":\"U8\",\"shape\":[1],"
                                "\"data_offsets\":[%zu,%zu]}",
                                k ? "," : "", i, k, k + 1);
    }
    snprintf(h + len, cap - len, "}");
    return h;
}

static void many_tensors(void) {
    char *h = many_header(MANY, 0, MANY);
    st_file f;
    kipp_error err = {0};
    CHECKF(kipp_st_open(write_with_header("many", h, MANY), &f, &err) == 0, "%s", err.message);
    free(h);
    if (f.n_tensors != MANY) return;
    size_t found = 0, in_place = 0;
    for (size_t i = 0; i < MANY; i++) {
        char name[32];
        snprintf(name, sizeof name, "t.%zu.w", i);
        const st_tensor *t = kipp_st_find(&f, name);
        found += t != NULL;
        in_place += t && (t->begin * 2999) % MANY == i && strcmp(t->name, name) == 0;
    }
    CHECKF(found == MANY && in_place == MANY, "found %zu, at their offsets %zu of %d", found,
           in_place, MANY);
    CHECK(!kipp_st_find(&f, "t.5000.w") && !kipp_st_find(&f, "t.w") && !kipp_st_find(&f, "") &&
          !kipp_st_find(&f, "t.0.w.") && !kipp_st_find(&f, "zzz"));
    kipp_st_close(&f);
    /* the last entry repeats the one listed first (the sort puts them together) */
    h = many_header(MANY, 0, MANY - 1);
    expect_reject("many-dup", h, MANY, "duplicate tensor name 't.0.w'");
    free(h);
}

int main(void) {
    snprintf(dir, sizeof dir, "%s/tmp-test_safetensors", test_build_dir());
    char cmd[2200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    CHECK(system(cmd) == 0);

    round_trip();
    many_tensors();

    kipp_error err = {0};
    st_file f;
    CHECK(kipp_st_open(write_raw("short", "abc", 3), &f, &err) != 0 && strstr(err.message, "too short"));
    unsigned char huge[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, '{', '}'};
    CHECK(kipp_st_open(write_raw("huge", huge, 16), &f, &err) != 0 &&
          strstr(err.message, "invalid safetensors header length"));
    unsigned char over[16] = {200, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
    CHECK(kipp_st_open(write_raw("over", over, 16), &f, &err) != 0 && strstr(err.message, "exceeds the file"));
    CHECK(kipp_st_open("/nonexistent/x.safetensors", &f, &err) != 0 && strstr(err.message, "cannot open"));

    expect_reject("badjson", "{\"a\": ", 0, "bad safetensors header JSON");
    expect_reject("array", "[1, 2]      ", 0, "not a JSON object");
    expect_reject("nodtype", "{\"a\":{\"shape\":[1],\"data_offsets\":[0,2]}}", 2, "no valid \"dtype\"");
    expect_reject("noshape", "{\"a\":{\"dtype\":\"BF16\",\"data_offsets\":[0,2]}}", 2, "no valid \"shape\"");
    expect_reject("negdim", "{\"a\":{\"dtype\":\"BF16\",\"shape\":[-1],\"data_offsets\":[0,2]}}", 2,
                  "negative dimension");
    expect_reject("overflow",
                  "{\"a\":{\"dtype\":\"BF16\",\"shape\":[4294967296,4294967296,4],\"data_offsets\":[0,2]}}",
                  2, "shape overflows");
    expect_reject("offsets", "{\"a\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[4,2]}}", 4,
                  "invalid \"data_offsets\"");
    expect_reject("pastend", "{\"a\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[0,8]}}", 6,
                  "extends past the end of the file");
    expect_reject("length", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,8]}}", 8,
                  "spans 8 bytes, expected 16");
    expect_reject("overlap",
                  "{\"a\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]},"
                  "\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[2,6]}}",
                  6, "overlap");
    expect_reject("nul-name", "{\"a\\u0000b\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[0,2]}}", 2,
                  "tensor name 'a' holds a NUL byte");
    expect_reject("dup",
                  "{\"a\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[0,2]},"
                  "\"a\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[2,4]}}",
                  4, "duplicate tensor name");
    /* metadata entry is skipped; unknown dtypes are read (rejected later by
     * the converter with a dtype message) */
    st_file ok;
    CHECKF(kipp_st_open(write_with_header("meta",
                                     "{\"__metadata__\":{\"format\":\"pt\"},"
                                     "\"a\":{\"dtype\":\"I4\",\"shape\":[2],\"data_offsets\":[0,1]}}",
                                     1),
                   &ok, &err) == 0, "%s", err.message);
    if (ok.n_tensors) kipp_st_close(&ok);

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    return test_finish("test_safetensors");
}
