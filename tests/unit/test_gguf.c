/* GGUF writer/reader round trip and the reader's structural rejections.
 * The expected header bytes are spelled out from the GGUF spec (magic,
 * version 3, u64 counts, little-endian), independently of the writer. */
#include <stdint.h>
#include <string.h>

#include "core/common.h"
#include "core/gguf.h"
#include "test_util.h"

/* Writes a small file to memory through a FILE*, returns the bytes. */
static uint8_t *write_small(size_t *size, int mode) {
    kipp_error err = {0};
    gguf_writer *w;
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    CHECK(fp != NULL);
    CHECK(kipp_gguf_writer_create(&w, &err) == 0);
    CHECK(kipp_gguf_writer_add_string(w, "general.architecture", "qwen3", &err) == 0);
    CHECK(kipp_gguf_writer_add_u32(w, "a.u32", 0xdeadbeefu, &err) == 0);
    CHECK(kipp_gguf_writer_add_i32(w, "a.i32", -7, &err) == 0);
    CHECK(kipp_gguf_writer_add_u64(w, "a.u64", 0x0102030405060708ull, &err) == 0);
    CHECK(kipp_gguf_writer_add_f32(w, "a.f32", 1e-6f, &err) == 0);
    CHECK(kipp_gguf_writer_add_bool(w, "a.bool", true, &err) == 0);
    const char *strs[] = {"hello", "", "w\xc3\xb6rld"};
    size_t lens[] = {5, 0, 6};
    CHECK(kipp_gguf_writer_add_string_array(w, "a.strs", strs, lens, 3, &err) == 0);
    int32_t ints[] = {1, -2, 3, 2147483647};
    CHECK(kipp_gguf_writer_add_i32_array(w, "a.ints", ints, 4, &err) == 0);
    /* a duplicate key is refused and leaves the writer usable */
    CHECK(kipp_gguf_writer_add_u32(w, "a.u32", 1, &err) != 0);
    CHECK(strstr(err.message, "duplicate key") != NULL);

    uint64_t ne_a[2] = {3, 2};   /* F32 [2][3]: 24 bytes */
    uint64_t ne_b[1] = {64};     /* Q8_0: 2 blocks = 68 bytes */
    uint64_t ne_c[2] = {32, 3};  /* Q4_0: 3 blocks = 54 bytes */
    uint64_t ne_d[1] = {5};      /* BF16: 10 bytes */
    CHECK(kipp_gguf_writer_add_tensor(w, "t.a", 2, ne_a, GGML_TYPE_F32, &err) == 0);
    CHECK(kipp_gguf_writer_add_tensor(w, "t.b", 1, ne_b, GGML_TYPE_Q8_0, &err) == 0);
    CHECK(kipp_gguf_writer_add_tensor(w, "t.c", 2, ne_c, GGML_TYPE_Q4_0, &err) == 0);
    CHECK(kipp_gguf_writer_add_tensor(w, "t.d", 1, ne_d, GGML_TYPE_BF16, &err) == 0);
    CHECK(kipp_gguf_writer_add_tensor(w, "t.d", 1, ne_d, GGML_TYPE_BF16, &err) != 0);
    uint64_t ne_bad[1] = {33};
    CHECK(kipp_gguf_writer_add_tensor(w, "t.e", 1, ne_bad, GGML_TYPE_Q4_1, &err) != 0);
    CHECK(kipp_gguf_writer_write_header(w, fp, &err) == 0);

    uint8_t data[128];
    for (int i = 0; i < 128; i++) data[i] = (uint8_t)(i + 1);
    /* tensor 0 in two chunks */
    CHECK(kipp_gguf_writer_write_data(w, fp, 0, data, 10, &err) == 0);
    if (mode == 1) { /* out-of-order / incomplete checks */
        CHECK(kipp_gguf_writer_write_data(w, fp, 1, data, 4, &err) != 0);
        CHECK(strstr(err.message, "out of order") != NULL);
        CHECK(kipp_gguf_writer_finish(w, fp, &err) != 0);
        CHECK(strstr(err.message, "'t.a' not fully written") != NULL);
        kipp_gguf_writer_destroy(w);
        fclose(fp);
        free(buf);
        return NULL;
    }
    CHECK(kipp_gguf_writer_write_data(w, fp, 0, data + 10, 14, &err) == 0);
    CHECK(kipp_gguf_writer_write_data(w, fp, 0, data, 1, &err) != 0); /* too much */
    CHECK(kipp_gguf_writer_write_data(w, fp, 1, data, 68, &err) == 0);
    CHECK(kipp_gguf_writer_write_data(w, fp, 2, data, 54, &err) == 0);
    CHECK(kipp_gguf_writer_write_data(w, fp, 3, data, 10, &err) == 0);
    CHECK(kipp_gguf_writer_finish(w, fp, &err) == 0);
    kipp_gguf_writer_destroy(w);
    fclose(fp);
    *size = len;
    return (uint8_t *)buf;
}

static void test_round_trip(void) {
    size_t size = 0;
    uint8_t *img = write_small(&size, 0);
    CHECK(img != NULL);
    if (!img) return;
    /* header bytes from the spec */
    static const uint8_t head[24] = {'G', 'G', 'U', 'F', 3, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0,
                                     8, 0, 0, 0, 0, 0, 0, 0};
    CHECK(size > 24 && memcmp(img, head, 24) == 0);
    /* first key: u64 len 20, "general.architecture", u32 type 8, u64 5, "qwen3" */
    CHECK(img[24] == 20 && memcmp(img + 32, "general.architecture", 20) == 0);
    CHECK(img[52] == 8 && img[56] == 5 && memcmp(img + 64, "qwen3", 5) == 0);
    CHECK(size % 32 == 0);

    gguf_file f;
    kipp_error err = {0};
    int rc = kipp_gguf_parse(img, size, &f, &err);
    CHECKF(rc == 0, "%s", err.message);
    if (rc == 0) {
        CHECK(f.n_kv == 8 && f.n_tensors == 4 && f.alignment == 32);
        CHECK(f.data_offset % 32 == 0);
        const gguf_kv *kv = kipp_gguf_find(&f, "general.architecture");
        CHECK(kv && kv->type == GGUF_TYPE_STRING && kipp_gguf_str_eq(kv->str, "qwen3"));
        kv = kipp_gguf_find(&f, "a.u32");
        CHECK(kv && kv->type == GGUF_TYPE_UINT32 && kv->u64 == 0xdeadbeefu);
        kv = kipp_gguf_find(&f, "a.i32");
        CHECK(kv && kv->type == GGUF_TYPE_INT32 && kv->i64 == -7);
        kv = kipp_gguf_find(&f, "a.u64");
        CHECK(kv && kv->u64 == 0x0102030405060708ull);
        kv = kipp_gguf_find(&f, "a.f32");
        CHECK(kv && kv->type == GGUF_TYPE_FLOAT32 && (float)kv->f64 == 1e-6f);
        kv = kipp_gguf_find(&f, "a.bool");
        CHECK(kv && kv->type == GGUF_TYPE_BOOL && kv->u64 == 1);
        kv = kipp_gguf_find(&f, "a.strs");
        CHECK(kv && kv->type == GGUF_TYPE_ARRAY && kv->array_type == GGUF_TYPE_STRING &&
              kv->array_len == 3);
        gguf_str s[3];
        CHECK(kv && kipp_gguf_array_strings(kv, s));
        CHECK(kipp_gguf_str_eq(s[0], "hello") && kipp_gguf_str_eq(s[1], "") && kipp_gguf_str_eq(s[2], "w\xc3\xb6rld"));
        gguf_str one;
        CHECK(kv && kipp_gguf_array_string_at(kv, 2, &one) && kipp_gguf_str_eq(one, "w\xc3\xb6rld"));
        CHECK(kv && !kipp_gguf_array_string_at(kv, 3, &one));
        kv = kipp_gguf_find(&f, "a.ints");
        CHECK(kv && kv->array_type == GGUF_TYPE_INT32 && kv->array_len == 4 && kv->array_bytes == 16);
        CHECK(kv && kv->array_data[4] == 0xfe && kv->array_data[15] == 0x7f);
        CHECK(kipp_gguf_find(&f, "nope") == NULL);

        const gguf_tensor *t = kipp_gguf_find_tensor(&f, "t.a");
        CHECK(t && t->n_dims == 2 && t->ne[0] == 3 && t->ne[1] == 2 && t->ne[2] == 1 &&
              t->type == GGML_TYPE_F32 && t->offset == 0 && t->nbytes == 24);
        CHECK(t && t->data[0] == 1 && t->data[23] == 24);
        t = kipp_gguf_find_tensor(&f, "t.b");
        CHECK(t && t->offset == 32 && t->nbytes == 68 && t->data[67] == 68);
        t = kipp_gguf_find_tensor(&f, "t.c");
        CHECK(t && t->offset == 128 && t->nbytes == 54 && t->type == GGML_TYPE_Q4_0);
        t = kipp_gguf_find_tensor(&f, "t.d");
        CHECK(t && t->offset == 192 && t->nbytes == 10);
        CHECK(size == f.data_offset + 224);
        /* padding between tensors is zero */
        CHECK(img[f.data_offset + 24] == 0 && img[f.data_offset + 31] == 0);
        kipp_gguf_free(&f);
    }

    /* every prefix that cuts into real content is rejected (and never read
     * past); the final tensor's trailing padding is optional to the reader
     * (t.d ends at data + 202). */
    int prefix_ok = 1;
    for (size_t n = 0; n < size - 22; n++) {
        uint8_t *cut = malloc(n ? n : 1);
        memcpy(cut, img, n);
        if (kipp_gguf_parse(cut, n, &f, &err) == 0) {
            prefix_ok = 0;
            kipp_gguf_free(&f);
            fprintf(stderr, "prefix %zu accepted\n", n);
        }
        free(cut);
    }
    CHECK(prefix_ok);
    free(img);
}

static void test_block_sizes(void) {
    uint64_t b;
    CHECK(kipp_ggml_row_bytes(GGML_TYPE_F32, 10, &b) && b == 40);
    CHECK(kipp_ggml_row_bytes(GGML_TYPE_F16, 10, &b) && b == 20);
    CHECK(kipp_ggml_row_bytes(GGML_TYPE_BF16, 10, &b) && b == 20);
    CHECK(kipp_ggml_row_bytes(GGML_TYPE_Q8_0, 64, &b) && b == 68);
    CHECK(kipp_ggml_row_bytes(GGML_TYPE_Q4_0, 64, &b) && b == 36);
    CHECK(kipp_ggml_row_bytes(GGML_TYPE_Q4_1, 64, &b) && b == 40);
    CHECK(!kipp_ggml_row_bytes(GGML_TYPE_Q4_1, 48, &b));
    CHECK(!kipp_ggml_row_bytes(99, 32, &b));
    CHECK(!kipp_ggml_row_bytes(GGML_TYPE_F32, UINT64_MAX / 2, &b));
    CHECK(strcmp(kipp_ggml_type_name(GGML_TYPE_BF16), "BF16") == 0);
    CHECK(strcmp(kipp_ggml_type_name(GGML_TYPE_Q4_1), "Q4_1") == 0);
    CHECK(kipp_ggml_type_name(7) == NULL);
}

static void test_writer_misuse(void) {
    size_t size;
    CHECK(write_small(&size, 1) == NULL);
}

/* Hand-built images for reader rejections that the loader tests cannot
 * reach through a valid base (nested arrays, unknown types, ...). */
typedef struct img {
    uint8_t b[512];
    size_t n;
} img;
static void u32(img *m, uint32_t v) { for (int i = 0; i < 4; i++) m->b[m->n++] = (uint8_t)(v >> 8 * i); }
static void u64(img *m, uint64_t v) { for (int i = 0; i < 8; i++) m->b[m->n++] = (uint8_t)(v >> 8 * i); }
static void str(img *m, const char *s) {
    u64(m, strlen(s));
    memcpy(m->b + m->n, s, strlen(s));
    m->n += strlen(s);
}
static img header(uint64_t nt, uint64_t nkv) {
    img m = {{0}, 0};
    u32(&m, GGUF_MAGIC);
    u32(&m, 3);
    u64(&m, nt);
    u64(&m, nkv);
    return m;
}
static void expect_reject(img *m, const char *msg) {
    gguf_file f;
    kipp_error err = {0};
    int rc = kipp_gguf_parse(m->b, m->n, &f, &err);
    CHECKF(rc != 0 && strstr(err.message, msg), "want '%s', got rc=%d '%s'", msg, rc, err.message);
    if (rc == 0) kipp_gguf_free(&f);
}

static void test_reader_rejects(void) {
    img m = header(0, 1);
    str(&m, "k"); u32(&m, GGUF_TYPE_ARRAY); u32(&m, GGUF_TYPE_ARRAY); u64(&m, 1);
    for (int i = 0; i < 16; i++) m.b[m.n++] = 0;
    expect_reject(&m, "nested array");

    m = header(0, 1);
    str(&m, "k"); u32(&m, 13); u64(&m, 0); u64(&m, 0);
    expect_reject(&m, "unknown value type 13");

    m = header(0, 1);
    str(&m, "k"); u32(&m, GGUF_TYPE_ARRAY); u32(&m, 77); u64(&m, 1); u64(&m, 0);
    expect_reject(&m, "unknown element type 77");

    m = header(0, 2);
    str(&m, "k"); u32(&m, GGUF_TYPE_UINT8); m.b[m.n++] = 1;
    str(&m, "k"); u32(&m, GGUF_TYPE_UINT8); m.b[m.n++] = 2;
    expect_reject(&m, "duplicate metadata key 'k'");

    m = header(0, 1);
    str(&m, "b"); u32(&m, GGUF_TYPE_BOOL); m.b[m.n++] = 2;
    u64(&m, 0); u64(&m, 0);
    expect_reject(&m, "is not 0 or 1");

    m = header(0, 1);
    str(&m, "general.alignment"); u32(&m, GGUF_TYPE_UINT32); u32(&m, 24);
    u64(&m, 0); u64(&m, 0);
    expect_reject(&m, "power-of-two");

    m = header(0, 1);
    str(&m, "s"); u32(&m, GGUF_TYPE_ARRAY); u32(&m, GGUF_TYPE_STRING); u64(&m, 1000);
    u64(&m, 0); u64(&m, 0);
    expect_reject(&m, "claims 1000 elements");

    m = header(0, 1);
    str(&m, "s"); u32(&m, GGUF_TYPE_ARRAY); u32(&m, GGUF_TYPE_UINT32); u64(&m, UINT64_MAX / 2);
    u64(&m, 0); u64(&m, 0);
    expect_reject(&m, "runs past the end");

    m = header(0, 1);
    u64(&m, UINT64_MAX); u64(&m, 0);
    expect_reject(&m, "truncated in the key of metadata entry 0");

    m = header(0, UINT64_MAX);
    expect_reject(&m, "metadata entries, more than the file can hold");
    m = header(UINT64_MAX / 4, 0);
    expect_reject(&m, "tensors, more than the file can hold");

    /* tensor: 5 dims; zero dim; unknown type; misaligned; overflow; overlap */
    {
        /* counts the bytes could hold, but beyond Kipp's cap */
        uint8_t *big = calloc(1, 4 << 20);
        img h = header(0, 100000);
        memcpy(big, h.b, h.n);
        gguf_file f;
        kipp_error err = {0};
        CHECK(kipp_gguf_parse(big, 4 << 20, &f, &err) != 0 &&
              strstr(err.message, "claims 100000 metadata entries, more than Kipp accepts"));
        h = header(70000, 1);
        memcpy(big, h.b, h.n);
        CHECK(kipp_gguf_parse(big, 4 << 20, &f, &err) != 0 &&
              strstr(err.message, "claims 70000 tensors, more than Kipp accepts"));
        free(big);
    }

    m = header(1, 0);
    str(&m, "t"); u32(&m, 5);
    for (int i = 0; i < 8; i++) u64(&m, 1);
    expect_reject(&m, "has 5 dims");

    m = header(1, 0);
    str(&m, "t"); u32(&m, 2); u64(&m, 4); u64(&m, 0); u32(&m, 0); u64(&m, 0);
    expect_reject(&m, "zero dimension (ne1)");

    m = header(1, 0);
    str(&m, "t"); u32(&m, 1); u64(&m, 4); u32(&m, 12); u64(&m, 0);
    expect_reject(&m, "unknown type 12");

    m = header(1, 0);
    str(&m, "t"); u32(&m, 1); u64(&m, 4); u32(&m, 0); u64(&m, 8);
    expect_reject(&m, "offset 8 is not 32-aligned");

    m = header(1, 0);
    str(&m, "t"); u32(&m, 2); u64(&m, 1ull << 40); u64(&m, 1ull << 40); u32(&m, 0); u64(&m, 0);
    expect_reject(&m, "element count overflows");

    m = header(1, 0);
    str(&m, "t"); u32(&m, 1); u64(&m, 40); u32(&m, GGML_TYPE_Q8_0); u64(&m, 0);
    expect_reject(&m, "not whole Q8_0 blocks");

    m = header(2, 0);
    str(&m, "t"); u32(&m, 1); u64(&m, 16); u32(&m, 0); u64(&m, 0);
    str(&m, "t"); u32(&m, 1); u64(&m, 16); u32(&m, 0); u64(&m, 64);
    while (m.n % 32) m.b[m.n++] = 0;
    m.n += 128;
    expect_reject(&m, "duplicate tensor name 't'");

    m = header(2, 0);
    str(&m, "a"); u32(&m, 1); u64(&m, 16); u32(&m, 0); u64(&m, 32);
    str(&m, "b"); u32(&m, 1); u64(&m, 16); u32(&m, 0); u64(&m, 64);
    while (m.n % 32) m.b[m.n++] = 0;
    m.n += 128;
    expect_reject(&m, "tensors 'a' and 'b' overlap");

    m = header(1, 0);
    str(&m, "a"); u32(&m, 1); u64(&m, 16); u32(&m, 0); u64(&m, 32);
    while (m.n % 32) m.b[m.n++] = 0;
    m.n += 64;
    expect_reject(&m, "runs past the end of the file");

    m = header(0, 0);
    m.b[0] = 'X';
    expect_reject(&m, "bad magic");
    m = header(0, 0);
    m.b[4] = 2;
    expect_reject(&m, "unsupported GGUF version 2");
}


/* Cross-checks against files written by an independent writer
 * (tests/fuzz/make_seeds_gguf.py, Python struct from the GGUF spec):
 * our writer reproduces minimal.gguf byte for byte, and our reader decodes
 * mixed-types.gguf (alignment 64, every tensor type). */
static uint8_t *slurp(const char *path, size_t *n) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    uint8_t *b = malloc(1 << 16);
    *n = fread(b, 1, 1 << 16, fp);
    fclose(fp);
    return b;
}

static void test_independent_files(void) {
    size_t n = 0;
    uint8_t *want = slurp("tests/fuzz/seeds-gguf/minimal.gguf", &n);
    CHECKF(want != NULL, "tests/fuzz/seeds-gguf/minimal.gguf missing (run from the repo root)");
    if (want) {
        kipp_error err = {0};
        gguf_writer *w;
        char *buf = NULL;
        size_t len = 0;
        FILE *fp = open_memstream(&buf, &len);
        uint64_t ne[1] = {4};
        uint8_t data[16];
        for (int i = 0; i < 16; i++) data[i] = (uint8_t)((i * 7 + 3) & 0xff);
        CHECK(kipp_gguf_writer_create(&w, &err) == 0);
        CHECK(kipp_gguf_writer_add_string(w, "general.architecture", "qwen3", &err) == 0);
        CHECK(kipp_gguf_writer_add_tensor(w, "t", 1, ne, GGML_TYPE_F32, &err) == 0);
        CHECK(kipp_gguf_writer_write_header(w, fp, &err) == 0);
        CHECK(kipp_gguf_writer_write_data(w, fp, 0, data, 16, &err) == 0);
        CHECK(kipp_gguf_writer_finish(w, fp, &err) == 0);
        kipp_gguf_writer_destroy(w);
        fclose(fp);
        CHECKF(len == n && memcmp(buf, want, n) == 0, "writer output (%zu bytes) differs from minimal.gguf (%zu)", len, n);
        free(buf);
        free(want);
    }
    uint8_t *mixed = slurp("tests/fuzz/seeds-gguf/mixed-types.gguf", &n);
    CHECK(mixed != NULL);
    if (mixed) {
        gguf_file f;
        kipp_error err = {0};
        int rc = kipp_gguf_parse(mixed, n, &f, &err);
        CHECKF(rc == 0, "%s", err.message);
        if (rc == 0) {
            CHECK(f.alignment == 64 && f.data_offset % 64 == 0 && f.n_tensors == 6);
            const gguf_kv *kv = kipp_gguf_find(&f, "a.u64");
            CHECK(kv && kv->type == GGUF_TYPE_UINT64 && kv->u64 == (1ull << 40));
            kv = kipp_gguf_find(&f, "a.strs");
            gguf_str s;
            CHECK(kv && kipp_gguf_array_string_at(kv, 2, &s) && kipp_gguf_str_eq(s, "yz"));
            static const struct { const char *name; uint32_t type; uint64_t nbytes, offset; } want_t[] = {
                /* q8 is [64, 2]: 4 blocks of 34 B; offsets step by 64 */
                {"q8", GGML_TYPE_Q8_0, 136, 0}, {"q40", GGML_TYPE_Q4_0, 54, 192},
                {"q41", GGML_TYPE_Q4_1, 20, 256}, {"f16", GGML_TYPE_F16, 20, 320},
                {"bf16", GGML_TYPE_BF16, 6, 384}, {"f32x4", GGML_TYPE_F32, 64, 448},
            };
            for (int i = 0; i < 6; i++) {
                const gguf_tensor *t = kipp_gguf_find_tensor(&f, want_t[i].name);
                CHECKF(t && t->type == want_t[i].type && t->nbytes == want_t[i].nbytes &&
                       t->offset == want_t[i].offset && t->data[1] == 10,
                       "tensor %s", want_t[i].name);
            }
            const gguf_tensor *t = kipp_gguf_find_tensor(&f, "f32x4");
            CHECK(t && t->n_dims == 4 && t->ne[3] == 2);
            kipp_gguf_free(&f);
        }
        free(mixed);
    }
}

int main(void) {
    test_block_sizes();
    test_round_trip();
    test_writer_misuse();
    test_reader_rejects();
    test_independent_files();
    return test_finish("test_gguf");
}
