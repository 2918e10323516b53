/* The strict loader against a valid artifact built here in memory (with the
 * GGUF writer, independent of `kipp convert`) and against many malformed
 * variants, each of which must be rejected with its own message.
 *
 * The image is header (metadata + directory, written by gguf_writer) plus a
 * data section of zeros; one large zeroed buffer is reused for every case
 * (the loader never looks at weight values, and stale header bytes left in
 * the data section of a later, shorter case are just "weights"). */
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "core/artifact.h"
#include "core/common.h"
#include "core/gguf.h"
#include "test_util.h"

/* ---- a mutable description of an artifact -------------------------------- */

enum kind { K_U32, K_U64, K_F32, K_BOOL, K_STR, K_TOKENS, K_TTYPE, K_STRARR };

typedef struct meta {
    char key[64];
    enum kind kind;
    uint64_t u;      /* U32/U64/BOOL value; TOKENS/TTYPE: count */
    float f;
    char s[160];     /* STR value; STRARR: '|'-separated items */
    int64_t bad_at;  /* TTYPE: index holding value 2, -1 none */
} meta;

typedef struct tens {
    char name[48];
    uint32_t n_dims;
    uint64_t ne[2];
    uint32_t type;
} tens;

typedef struct desc {
    meta m[48];
    size_t n_m;
    tens t[64];
    size_t n_t;
} desc;

static const char **tok_ptrs;
static size_t *tok_lens;
static int32_t *ttypes;

static meta *addm(desc *d, const char *key, enum kind k) {
    meta *m = &d->m[d->n_m++];
    memset(m, 0, sizeof *m);
    snprintf(m->key, sizeof m->key, "%s", key);
    m->kind = k;
    m->bad_at = -1;
    return m;
}
static void add_u32(desc *d, const char *k, uint64_t v) { addm(d, k, K_U32)->u = v; }
static void add_f32(desc *d, const char *k, float v) { addm(d, k, K_F32)->f = v; }
static void add_str(desc *d, const char *k, const char *v) {
    snprintf(addm(d, k, K_STR)->s, sizeof d->m[0].s, "%s", v);
}

static meta *findm(desc *d, const char *key) {
    for (size_t i = 0; i < d->n_m; i++)
        if (strcmp(d->m[i].key, key) == 0) return &d->m[i];
    fprintf(stderr, "test bug: no key %s\n", key);
    abort();
}
static void dropm(desc *d, const char *key) {
    meta *m = findm(d, key);
    size_t i = (size_t)(m - d->m);
    memmove(&d->m[i], &d->m[i + 1], (d->n_m - i - 1) * sizeof *m);
    d->n_m--;
}
static tens *findt(desc *d, const char *name) {
    for (size_t i = 0; i < d->n_t; i++)
        if (strcmp(d->t[i].name, name) == 0) return &d->t[i];
    fprintf(stderr, "test bug: no tensor %s\n", name);
    abort();
}
static void dropt(desc *d, const char *name) {
    tens *t = findt(d, name);
    size_t i = (size_t)(t - d->t);
    memmove(&d->t[i], &d->t[i + 1], (d->n_t - i - 1) * sizeof *t);
    d->n_t--;
}
static tens *addt(desc *d, const char *name, uint32_t nd, uint64_t a, uint64_t b, uint32_t type) {
    tens *t = &d->t[d->n_t++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->n_dims = nd;
    t->ne[0] = a;
    t->ne[1] = b;
    t->type = type;
    return t;
}

/* The contract's artifact for entry c with projection type `proj`, written
 * out from docs/CONTRACT-ARTIFACT.md by hand (not from artifact.c). */
static void valid_desc(desc *d, const char *id, const char *scheme, uint32_t file_type,
                       uint32_t proj) {
    const kipp_checkpoint *c = kipp_registry_find_id(id);
    memset(d, 0, sizeof *d);
    add_str(d, "general.architecture", "qwen3");
    add_str(d, "general.name", c->id);
    add_u32(d, "general.file_type", file_type);
    add_u32(d, "qwen3.context_length", c->context);
    add_u32(d, "qwen3.embedding_length", c->hidden);
    add_u32(d, "qwen3.block_count", c->layers);
    add_u32(d, "qwen3.feed_forward_length", c->ffn);
    add_u32(d, "qwen3.attention.head_count", c->heads);
    add_u32(d, "qwen3.attention.head_count_kv", 8);
    add_u32(d, "qwen3.attention.key_length", 128);
    add_u32(d, "qwen3.attention.value_length", 128);
    add_f32(d, "qwen3.rope.freq_base", (float)c->rope_theta);
    add_f32(d, "qwen3.attention.layer_norm_rms_epsilon", 1e-6f);
    add_str(d, "tokenizer.ggml.model", "gpt2");
    add_str(d, "tokenizer.ggml.pre", "qwen2");
    addm(d, "tokenizer.ggml.tokens", K_TOKENS)->u = 151936;
    addm(d, "tokenizer.ggml.token_type", K_TTYPE)->u = 151936;
    snprintf(addm(d, "tokenizer.ggml.merges", K_STRARR)->s, sizeof d->m[0].s, "a b|c d|ab cd");
    add_u32(d, "tokenizer.ggml.eos_token_id", (uint64_t)c->eos);
    add_u32(d, "tokenizer.ggml.padding_token_id", 151643);
    add_u32(d, "tokenizer.ggml.bos_token_id", 151643);
    addm(d, "tokenizer.ggml.add_bos_token", K_BOOL)->u = 0;
    if (c->variant != KIPP_VARIANT_BASE)
        add_str(d, "tokenizer.chat_template", "{% for m in messages %}{{ m.content }}{% endfor %}");
    add_str(d, "kipp.checkpoint", c->id);
    add_str(d, "kipp.source.repository", c->source_repository);
    add_str(d, "kipp.source.revision", c->revision);
    snprintf(addm(d, "kipp.source.files", K_STRARR)->s, sizeof d->m[0].s, "config.json|model.safetensors");
    snprintf(addm(d, "kipp.source.sha256", K_STRARR)->s, sizeof d->m[0].s, "%064d|%064d", 0, 1);
    add_str(d, "kipp.quant.scheme", scheme);
    add_str(d, "kipp.converter.version", "0.1.0");

    uint64_t h = c->hidden, q = (uint64_t)c->heads * 128, f = c->ffn;
    addt(d, "token_embd.weight", 2, h, 151936, GGML_TYPE_BF16);
    addt(d, "output_norm.weight", 1, h, 1, GGML_TYPE_F32);
    if (!c->tied) addt(d, "output.weight", 2, h, 151936, GGML_TYPE_BF16);
    for (uint32_t l = 0; l < c->layers; l++) {
        char n[48];
#define T(suffix, nd, a, b, ty) \
        snprintf(n, sizeof n, "blk.%u." suffix ".weight", l); addt(d, n, nd, a, b, ty)
        T("attn_norm", 1, h, 1, GGML_TYPE_F32);
        T("attn_q", 2, h, q, proj);
        T("attn_k", 2, h, 1024, proj);
        T("attn_v", 2, h, 1024, proj);
        T("attn_output", 2, q, h, proj);
        T("attn_q_norm", 1, 128, 1, GGML_TYPE_F32);
        T("attn_k_norm", 1, 128, 1, GGML_TYPE_F32);
        T("ffn_norm", 1, h, 1, GGML_TYPE_F32);
        T("ffn_gate", 2, h, f, proj);
        T("ffn_up", 2, h, f, proj);
        T("ffn_down", 2, f, h, proj);
#undef T
    }
}

static void split_list(const char *s, const char *items[8], size_t lens[8], size_t *n) {
    *n = 0;
    while (*s && *n < 8) {
        const char *e = strchr(s, '|');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        items[*n] = s;
        lens[(*n)++] = len;
        s += len + (e ? 1 : 0);
    }
}

/* Header bytes (metadata + directory + padding) and the data size. */
static uint8_t *write_header(const desc *d, size_t *hdr_len, uint64_t *data_size) {
    kipp_error err = {0};
    gguf_writer *w;
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    if (!fp || kipp_gguf_writer_create(&w, &err)) abort();
    for (size_t i = 0; i < d->n_m; i++) {
        const meta *m = &d->m[i];
        int rc = 0;
        const char *items[8];
        size_t lens[8], n;
        switch (m->kind) {
        case K_U32: rc = kipp_gguf_writer_add_u32(w, m->key, (uint32_t)m->u, &err); break;
        case K_U64: rc = kipp_gguf_writer_add_u64(w, m->key, m->u, &err); break;
        case K_F32: rc = kipp_gguf_writer_add_f32(w, m->key, m->f, &err); break;
        case K_BOOL: rc = kipp_gguf_writer_add_bool(w, m->key, m->u != 0, &err); break;
        case K_STR: rc = kipp_gguf_writer_add_string(w, m->key, m->s, &err); break;
        case K_TOKENS: rc = kipp_gguf_writer_add_string_array(w, m->key, tok_ptrs, tok_lens, m->u, &err); break;
        case K_TTYPE:
            if (m->bad_at >= 0) ttypes[m->bad_at] = 2;
            rc = kipp_gguf_writer_add_i32_array(w, m->key, ttypes, m->u, &err);
            if (m->bad_at >= 0) ttypes[m->bad_at] = 1;
            break;
        case K_STRARR:
            split_list(m->s, items, lens, &n);
            rc = kipp_gguf_writer_add_string_array(w, m->key, items, lens, n, &err);
            break;
        }
        if (rc) { fprintf(stderr, "writer: %s\n", err.message); abort(); }
    }
    uint64_t total = 0;
    for (size_t i = 0; i < d->n_t; i++) {
        const tens *t = &d->t[i];
        if (kipp_gguf_writer_add_tensor(w, t->name, t->n_dims, t->ne, t->type, &err)) {
            fprintf(stderr, "writer: %s\n", err.message);
            abort();
        }
        uint64_t row;
        kipp_ggml_row_bytes(t->type, t->ne[0], &row);
        total += (row * (t->n_dims == 2 ? t->ne[1] : 1) + 31) / 32 * 32;
    }
    if (kipp_gguf_writer_write_header(w, fp, &err)) abort();
    kipp_gguf_writer_destroy(w);
    fclose(fp);
    *hdr_len = len;
    *data_size = total;
    return (uint8_t *)buf;
}

/* ---- the image under test ------------------------------------------------ */

static uint8_t *image;      /* big zeroed buffer */
static size_t image_cap;
static size_t hdr_len;      /* of the current image */
static size_t image_len;

static void build(const desc *d) {
    uint64_t data_size;
    uint8_t *hdr = write_header(d, &hdr_len, &data_size);
    image_len = hdr_len + (size_t)data_size;
    if (image_len > image_cap) { fprintf(stderr, "test bug: image too large\n"); abort(); }
    memcpy(image, hdr, hdr_len);
    free(hdr);
}

/* Locates a length-prefixed string in the header; returns the offset just
 * after it (where a kv's type or a tensor's n_dims starts). */
static size_t after_str(const char *s) {
    size_t n = strlen(s);
    uint8_t pat[80];
    for (int i = 0; i < 8; i++) pat[i] = (uint8_t)((uint64_t)n >> 8 * i);
    memcpy(pat + 8, s, n);
    for (size_t i = 24; i + 8 + n <= hdr_len; i++)
        if (memcmp(image + i, pat, 8 + n) == 0) return i + 8 + n;
    fprintf(stderr, "test bug: '%s' not in header\n", s);
    abort();
}
static size_t str_start(const char *s) { return after_str(s) - strlen(s) - 8; }
static void put(size_t at, uint64_t v, int n) {
    for (int i = 0; i < n; i++) image[at + (size_t)i] = (uint8_t)(v >> 8 * i);
}
static uint64_t get(size_t at, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | image[at + (size_t)i];
    return v;
}
/* Offset of a tensor's directory fields: n_dims at +0, ne at +4, then type
 * and offset. */
static size_t tensor_type_at(const char *name) {
    size_t p = after_str(name);
    return p + 4 + 8 * (size_t)get(p, 4);
}

static int n_cases;

/* Opens the current image (first `len` bytes) and requires rejection with
 * `want` in the message. */
static void expect_len(const char *label, size_t len, const char *want) {
    kipp_artifact a;
    kipp_error err = {0};
    int rc = kipp_artifact_open_memory(image, len, &a, &err);
    n_cases++;
    CHECKF(rc != 0 && strstr(err.message, want) != NULL, "%s: want '%s', got rc=%d '%s'", label, want,
           rc, err.message);
    if (rc == 0) kipp_artifact_close(&a);
}
static void expect(const char *label, const char *want) { expect_len(label, image_len, want); }

static void expect_ok(const char *label, kipp_artifact *a) {
    kipp_error err = {0};
    int rc = kipp_artifact_open_memory(image, image_len, a, &err);
    CHECKF(rc == 0, "%s: %s", label, err.message);
}

/* ---- tests ------------------------------------------------------------------ */

static void test_valid(void) {
    desc d;
    kipp_artifact a;
    valid_desc(&d, "synthetic-tiny", "bf16", 32, GGML_TYPE_BF16);
    build(&d);
    expect_ok("synthetic-tiny", &a);
    if (a.checkpoint) {
        CHECK(strcmp(a.checkpoint->id, "synthetic-tiny") == 0);
        CHECK(a.quant == KIPP_QUANT_BF16);
        const kipp_weights *w = &a.weights;
        CHECK(w->token_embd.rows == 151936 && w->token_embd.cols == 256 &&
              w->token_embd.type == GGML_TYPE_BF16 && w->token_embd.nbytes == 151936ull * 256 * 2);
        CHECK(w->output.data == w->token_embd.data && w->output.rows == 151936); /* tied alias */
        CHECK(w->output_norm.rows == 1 && w->output_norm.cols == 256 && w->output_norm.type == GGML_TYPE_F32);
        const kipp_layer_weights *L = &w->layers[1];
        CHECK(L->attn_q.rows == 1024 && L->attn_q.cols == 256); /* 8 heads * 128 */
        CHECK(L->attn_k.rows == 1024 && L->attn_output.rows == 256 && L->attn_output.cols == 1024);
        CHECK(L->ffn_down.rows == 256 && L->ffn_down.cols == 768 && L->ffn_gate.rows == 768);
        CHECK(L->attn_q_norm.cols == 128 && L->attn_k_norm.type == GGML_TYPE_F32);
        /* last tensor ends exactly at the end of the image */
        CHECK((const uint8_t *)L->ffn_down.data + L->ffn_down.nbytes == image + image_len);
        CHECK((const uint8_t *)w->token_embd.data == image + a.gguf.data_offset);
        CHECK(a.tokens && a.tokens->array_len == 151936 && a.token_types && a.merges &&
              a.merges->array_len == 3);
        CHECK(a.chat_template == NULL);
        gguf_str s;
        CHECK(kipp_gguf_array_string_at(a.tokens, 151935, &s) && kipp_gguf_str_eq(s, "[PAD151935]"));
        kipp_artifact_close(&a);
    }

    /* the same bytes through a file: kipp_artifact_open maps it */
    char path[] = "/tmp/kipp-test-artifact-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) {
        FILE *fp = fdopen(fd, "wb");
        CHECK(fwrite(image, 1, image_len, fp) == image_len);
        fclose(fp);
        kipp_error err = {0};
        int rc = kipp_artifact_open(path, &a, &err);
        CHECKF(rc == 0, "open file: %s", err.message);
        if (rc == 0) {
            CHECK(a.owns_map && a.map != image && a.weights.layers[0].ffn_up.rows == 768);
            kipp_artifact_close(&a);
        }
        /* a truncated file: rejected, message names the path */
        CHECK(truncate(path, (off_t)image_len - 1) == 0);
        rc = kipp_artifact_open(path, &a, &err);
        CHECKF(rc != 0 && strstr(err.message, path) && strstr(err.message, "runs past the end"),
               "truncated file: %s", err.message);
        unlink(path);
        rc = kipp_artifact_open(path, &a, &err);
        CHECK(rc == KIPP_E_IO && strstr(err.message, "cannot open"));
    }

    /* untied instruct entry: output.weight is its own tensor, template kept */
    valid_desc(&d, "synthetic-tiny-instruct", "bf16", 32, GGML_TYPE_BF16);
    build(&d);
    expect_ok("synthetic-tiny-instruct", &a);
    if (a.checkpoint) {
        CHECK(a.weights.output.data != a.weights.token_embd.data && a.weights.output.cols == 384);
        CHECK(a.chat_template && strstr(a.chat_template, "messages"));
        CHECK(a.weights.layers[2].attn_q.rows == 2048); /* 16 heads * 128 != hidden 384 */
        kipp_artifact_close(&a);
    }

    /* quantized projections */
    static const struct { const char *s; uint32_t ft, ty; kipp_quant_scheme q; } qs[] = {
        {"q8_0", 7, GGML_TYPE_Q8_0, KIPP_QUANT_Q8_0},
        {"affine4_gs32", 3, GGML_TYPE_Q4_1, KIPP_QUANT_AFFINE4_GS32},
        {"scale4_gs32", 2, GGML_TYPE_Q4_0, KIPP_QUANT_SCALE4_GS32},
    };
    for (size_t i = 0; i < 3; i++) {
        valid_desc(&d, "synthetic-tiny", qs[i].s, qs[i].ft, qs[i].ty);
        build(&d);
        expect_ok(qs[i].s, &a);
        if (a.checkpoint) {
            CHECK(a.quant == qs[i].q && a.weights.layers[0].attn_v.type == qs[i].ty);
            CHECK(a.weights.layers[0].attn_norm.type == GGML_TYPE_F32);
            kipp_artifact_close(&a);
        }
    }
}

static void test_schemes(void) {
    kipp_quant_scheme q;
    CHECK(kipp_quant_scheme_parse("affine4_gs32", &q) && q == KIPP_QUANT_AFFINE4_GS32);
    CHECK(!kipp_quant_scheme_parse("q4_0", &q));
    CHECK(strcmp(kipp_quant_scheme_name(KIPP_QUANT_SCALE4_GS32), "scale4_gs32") == 0);
    CHECK(kipp_quant_scheme_ggml_type(KIPP_QUANT_Q8_0) == GGML_TYPE_Q8_0);
    CHECK(kipp_quant_scheme_ggml_type(KIPP_QUANT_SCALE4_GS32) == GGML_TYPE_Q4_0);
    CHECK(kipp_quant_scheme_ggml_type(KIPP_QUANT_AFFINE4_GS32) == GGML_TYPE_Q4_1);
    CHECK(kipp_quant_scheme_ggml_type(KIPP_QUANT_BF16) == GGML_TYPE_BF16);
}

/* Cuts at every structural boundary of the valid tiny image. The boundaries
 * are found by walking the header with the spec's layout, here in the test. */
static void test_cuts(void) {
    desc d;
    valid_desc(&d, "synthetic-tiny", "bf16", 32, GGML_TYPE_BF16);
    build(&d);
    expect_len("cut: empty", 0, "too short for the magic");
    expect_len("cut: in magic", 3, "too short for the magic");
    expect_len("cut: in version", 6, "truncated in the version field");
    expect_len("cut: in counts", 20, "truncated in the header counts");
    expect_len("cut: after header", 24, "metadata entries, more than the file can hold");

    /* end of each kv: the next entry's key is what is missing */
    uint64_t n_kv = get(16, 8), n_t = get(8, 8);
    size_t p = 24;
    char want[128], label[64];
    for (uint64_t i = 0; i < n_kv; i++) {
        p += 8 + (size_t)get(p, 8); /* key */
        uint32_t type = (uint32_t)get(p, 4);
        p += 4;
        if (type == GGUF_TYPE_STRING) p += 8 + (size_t)get(p, 8);
        else if (type == GGUF_TYPE_ARRAY) {
            uint32_t at = (uint32_t)get(p, 4);
            uint64_t n = get(p + 4, 8);
            p += 12;
            if (at == GGUF_TYPE_STRING) for (uint64_t k = 0; k < n; k++) p += 8 + (size_t)get(p, 8);
            else p += 4 * (size_t)n; /* only INT32 arrays here */
        } else p += type == GGUF_TYPE_BOOL ? 1 : 4;
        size_t remaining = p - 24;
        if (remaining < n_kv * 13) snprintf(want, sizeof want, "metadata entries, more than the file can hold");
        else if (remaining < n_t * 32) snprintf(want, sizeof want, "tensors, more than the file can hold");
        else if (i + 1 < n_kv) snprintf(want, sizeof want, "truncated in the key of metadata entry %llu",
                                        (unsigned long long)i + 1);
        else snprintf(want, sizeof want, "truncated in the name of tensor 0");
        snprintf(label, sizeof label, "cut: after kv %llu", (unsigned long long)i);
        expect_len(label, p, want);
    }
    /* middle of the token strings */
    expect_len("cut: in tokens", after_str("tokenizer.ggml.tokens") + 12 + 8 * 1000,
               "GGUF string array of key 'tokenizer.ggml.tokens' claims 151936 elements");
    expect_len("cut: in token_type", after_str("tokenizer.ggml.token_type") + 12 + 4 * 1000,
               "GGUF array of key 'tokenizer.ggml.token_type' (151936 elements) runs past the end");

    /* end of each directory entry */
    for (uint64_t i = 0; i < n_t; i++) {
        p += 8 + (size_t)get(p, 8);
        p += 4 + 8 * (size_t)get(p, 4) + 4 + 8;
        if (i + 1 < n_t) snprintf(want, sizeof want, "truncated in the name of tensor %llu", (unsigned long long)i + 1);
        else snprintf(want, sizeof want, "%s", p % 32 ? "truncated before the tensor data section"
                                                      : "'token_embd.weight' data [0, +77791232) runs past the end");
        snprintf(label, sizeof label, "cut: after tensor entry %llu", (unsigned long long)i);
        expect_len(label, p, want);
    }
    expect_len("cut: in ne of tensor 0", after_str("token_embd.weight") + 8, "truncated in the shape of tensor 'token_embd.weight'");
    expect_len("cut: in type of tensor 0", after_str("token_embd.weight") + 4 + 16 + 2,
               "truncated in the type/offset of tensor 'token_embd.weight'");

    /* data section: after each tensor the next one is past the end */
    for (size_t i = 0; i + 1 < d.n_t; i++) {
        kipp_artifact a;
        kipp_error err = {0};
        /* learn tensor i+1's offset from a full parse */
        gguf_file f;
        if (kipp_gguf_parse(image, image_len, &f, &err)) abort();
        size_t cut = (size_t)(f.data_offset + f.tensors[i + 1].offset);
        kipp_gguf_free(&f);
        snprintf(want, sizeof want, "GGUF tensor '%s' data", d.t[i + 1].name);
        snprintf(label, sizeof label, "cut: before data of %s", d.t[i + 1].name);
        expect_len(label, cut, want);
        (void)a;
    }
    expect_len("cut: last byte", image_len - 1, "'blk.1.ffn_down.weight' data [");
}

static void test_bytes(void) {
    desc d;
    valid_desc(&d, "synthetic-tiny", "bf16", 32, GGML_TYPE_BF16);
    build(&d);
#define PATCH(label, at, v, n, want)          \
    do {                                      \
        size_t at_ = (at);                    \
        uint64_t old_ = get(at_, n);          \
        put(at_, v, n);                       \
        expect(label, want);                  \
        put(at_, old_, n);                    \
    } while (0)
    PATCH("magic", 0, 0x46554746, 4, "bad magic 0x46554746");
    PATCH("version 2", 4, 2, 4, "unsupported GGUF version 2");
    PATCH("version 4", 4, 4, 4, "unsupported GGUF version 4");
    PATCH("hostile n_kv", 16, UINT64_MAX, 8, "claims 18446744073709551615 metadata entries");
    PATCH("hostile n_tensors", 8, 1ull << 40, 8, "claims 1099511627776 tensors");
    PATCH("hostile key length", 24, UINT64_MAX - 3, 8, "truncated in the key of metadata entry 0");
    PATCH("unknown value type", after_str("general.architecture"), 13, 4,
          "key 'general.architecture' has unknown value type 13");
    PATCH("nested array", after_str("tokenizer.ggml.merges") + 4, GGUF_TYPE_ARRAY, 4,
          "key 'tokenizer.ggml.merges' is a nested array");
    PATCH("unknown array type", after_str("tokenizer.ggml.merges") + 4, 42, 4,
          "array of key 'tokenizer.ggml.merges' has unknown element type 42");
    PATCH("hostile array count", after_str("tokenizer.ggml.tokens") + 8, 1ull << 62, 8,
          "claims 4611686018427387904 elements");
    PATCH("hostile int array count", after_str("tokenizer.ggml.token_type") + 8, 1ull << 62, 8,
          "(4611686018427387904 elements) runs past the end");
    PATCH("hostile token length", after_str("tokenizer.ggml.tokens") + 16, 1ull << 60, 8,
          "string 0 of array 'tokenizer.ggml.tokens' runs past the end");
    PATCH("hostile string value length", after_str("kipp.converter.version") + 4, UINT64_MAX, 8,
          "string value of key 'kipp.converter.version' runs past the end");
    PATCH("bool not 0/1", after_str("tokenizer.ggml.add_bos_token") + 4, 7, 1,
          "bool value 7 of key 'tokenizer.ggml.add_bos_token'");
    PATCH("array of wrong element type", after_str("tokenizer.ggml.token_type") + 4, GGUF_TYPE_UINT32, 4,
          "'tokenizer.ggml.token_type' is an array of u32, expected i32");
    PATCH("hostile tensor name length", str_start("token_embd.weight"), 1ull << 62, 8,
          "truncated in the name of tensor 0");
    PATCH("5 dims", after_str("blk.0.attn_norm.weight"), 5, 4, "'blk.0.attn_norm.weight' has 5 dims");
    PATCH("0 dims", after_str("blk.0.attn_norm.weight"), 0, 4, "'blk.0.attn_norm.weight' has 0 dims");
    PATCH("zero dim", after_str("blk.0.attn_k.weight") + 12, 0, 8, "'blk.0.attn_k.weight' has a zero dimension (ne1)");
    PATCH("overflowing dims", after_str("blk.0.attn_k.weight") + 12, 1ull << 62, 8,
          "'blk.0.attn_k.weight' element count overflows");
    PATCH("unknown tensor type", tensor_type_at("blk.1.ffn_up.weight"), 12, 4,
          "'blk.1.ffn_up.weight' has unknown type 12");
    PATCH("quantized norm", tensor_type_at("blk.0.attn_q_norm.weight"), GGML_TYPE_Q8_0, 4,
          "tensor 'blk.0.attn_q_norm.weight' has type Q8_0, expected F32");
    {
        size_t ne0 = after_str("blk.0.attn_q_norm.weight") + 4;
        put(ne0, 100, 8);
        PATCH("partial block", tensor_type_at("blk.0.attn_q_norm.weight"), GGML_TYPE_Q8_0, 4,
              "'blk.0.attn_q_norm.weight': row of 100 elements is not whole Q8_0 blocks");
        put(ne0, 128, 8);
    }
    PATCH("misaligned offset", tensor_type_at("blk.0.ffn_norm.weight") + 4,
          get(tensor_type_at("blk.0.ffn_norm.weight") + 4, 8) + 8, 8,
          "'blk.0.ffn_norm.weight' offset");
    PATCH("offset past end", tensor_type_at("blk.0.attn_v.weight") + 4, 1ull << 40, 8,
          "'blk.0.attn_v.weight' data [1099511627776, +524288) runs past the end");
    PATCH("offset wraps", tensor_type_at("blk.0.attn_v.weight") + 4, UINT64_MAX - 31, 8,
          "'blk.0.attn_v.weight' data [18446744073709551584");
    PATCH("overlap", tensor_type_at("output_norm.weight") + 4, 32, 8,
          "tensors 'token_embd.weight' and 'output_norm.weight' overlap");
    {
        /* swap two same-size tensors' offsets: no overlap, but not canonical */
        size_t qa = tensor_type_at("blk.0.attn_q_norm.weight") + 4, ka = tensor_type_at("blk.0.attn_k_norm.weight") + 4;
        uint64_t qo = get(qa, 8), ko = get(ka, 8);
        put(qa, ko, 8);
        put(ka, qo, 8);
        expect("swapped offsets", "'blk.0.attn_q_norm.weight' is at data offset");
        put(qa, qo, 8);
        put(ka, ko, 8);
    }
    PATCH("token_type value", after_str("tokenizer.ggml.token_type") + 16 + 4 * 5, 2, 4,
          "tokenizer.ggml.token_type[5] = 2");
    /* added tokens only above the BPE vocabulary (what bounds the encoder's
     * added-token match), user-defined and control alike */
    PATCH("user-defined token in the BPE ids", after_str("tokenizer.ggml.token_type") + 16 + 4 * 5,
          4, 4, "tokenizer.ggml.token_type[5] = 4: ids below 151643 are the BPE vocabulary");
    PATCH("control token in the BPE ids",
          after_str("tokenizer.ggml.token_type") + 16 + 4 * 151642, 3, 4,
          "tokenizer.ggml.token_type[151642] = 3: ids below 151643");
    PATCH("bad sha256 digit", after_str("kipp.source.sha256") + 16 + 8 + 3, 'G', 1,
          "kipp.source.sha256[0] is not 64 lowercase hex digits");
    PATCH("NUL in revision", after_str("kipp.source.revision") + 12 + 1, 0, 1,
          "is not in the registry");
    /* trailing data */
    image[image_len] = 0;
    expect_len("trailing bytes", image_len + 32, "trailing bytes after the tensor data");
#undef PATCH
}

/* Mutations of the description (then rebuilt by the writer). */
typedef void (*mutator)(desc *d);

static void case_desc(const char *id, const char *label, mutator fn, const char *want) {
    desc d;
    valid_desc(&d, id, "bf16", 32, GGML_TYPE_BF16);
    fn(&d);
    build(&d);
    expect(label, want);
}

static void m_revision(desc *d) { snprintf(findm(d, "kipp.source.revision")->s, sizeof d->m[0].s, "v0-unknown"); }
static void m_repo_missing(desc *d) { dropm(d, "kipp.source.repository"); }
static void m_repo_type(desc *d) {
    meta *m = findm(d, "kipp.source.repository");
    m->kind = K_U32;
    m->u = 1;
}
static void m_arch(desc *d) { snprintf(findm(d, "general.architecture")->s, sizeof d->m[0].s, "llama"); }
static void m_ckpt(desc *d) { snprintf(findm(d, "kipp.checkpoint")->s, sizeof d->m[0].s, "synthetic-0.6b"); }
static void m_name(desc *d) { snprintf(findm(d, "general.name")->s, sizeof d->m[0].s, "tiny"); }
static void m_hidden(desc *d) { findm(d, "qwen3.embedding_length")->u = 512; }
static void m_layers(desc *d) { findm(d, "qwen3.block_count")->u = 3; }
static void m_ffn(desc *d) { findm(d, "qwen3.feed_forward_length")->u = 1024; }
static void m_heads(desc *d) { findm(d, "qwen3.attention.head_count")->u = 2; }
static void m_context(desc *d) { findm(d, "qwen3.context_length")->u = 8192; }
static void m_kv_heads(desc *d) { findm(d, "qwen3.attention.head_count_kv")->u = 4; }
static void m_key_len(desc *d) { findm(d, "qwen3.attention.key_length")->u = 64; }
static void m_rope(desc *d) { findm(d, "qwen3.rope.freq_base")->f = 10000.0f; }
static void m_eps(desc *d) { findm(d, "qwen3.attention.layer_norm_rms_epsilon")->f = 1e-5f; }
static void m_ctx_type(desc *d) { findm(d, "qwen3.context_length")->kind = K_U64; }
static void m_missing_merges(desc *d) { dropm(d, "tokenizer.ggml.merges"); }
static void m_extra_key(desc *d) { add_u32(d, "qwen3.expert_count", 8); }
static void m_dup_key(desc *d) { add_str(d, "general.namX", "x"); }
static void m_align64(desc *d) { add_u32(d, "general.alignment", 64); }
static void m_align_bad(desc *d) { add_u32(d, "general.alignment", 48); }
static void m_tok_model(desc *d) { snprintf(findm(d, "tokenizer.ggml.model")->s, sizeof d->m[0].s, "llama"); }
static void m_tok_pre(desc *d) { snprintf(findm(d, "tokenizer.ggml.pre")->s, sizeof d->m[0].s, "qwen35"); }
static void m_tokens_short(desc *d) { findm(d, "tokenizer.ggml.tokens")->u = 1000; }
static void m_ttype_short(desc *d) { findm(d, "tokenizer.ggml.token_type")->u = 151935; }
static void m_ttype_bad(desc *d) { findm(d, "tokenizer.ggml.token_type")->bad_at = 151935; }
static void m_merges_empty(desc *d) { findm(d, "tokenizer.ggml.merges")->s[0] = 0; }
static void m_eos(desc *d) { findm(d, "tokenizer.ggml.eos_token_id")->u = 151645; }
static void m_pad(desc *d) { findm(d, "tokenizer.ggml.padding_token_id")->u = 0; }
static void m_bos(desc *d) { findm(d, "tokenizer.ggml.bos_token_id")->u = 1; }
static void m_add_bos(desc *d) { findm(d, "tokenizer.ggml.add_bos_token")->u = 1; }
static void m_template_on_base(desc *d) { add_str(d, "tokenizer.chat_template", "{{ x }}"); }
static void m_no_template(desc *d) { dropm(d, "tokenizer.chat_template"); }
static void m_empty_template(desc *d) { findm(d, "tokenizer.chat_template")->s[0] = 0; }
static void m_files_empty(desc *d) { findm(d, "kipp.source.files")->s[0] = 0; }
static void m_sha_count(desc *d) { snprintf(findm(d, "kipp.source.sha256")->s, sizeof d->m[0].s, "%064d", 0); }
static void m_sha_len(desc *d) { snprintf(findm(d, "kipp.source.sha256")->s, sizeof d->m[0].s, "%064d|abc", 0); }
static void m_scheme(desc *d) { snprintf(findm(d, "kipp.quant.scheme")->s, sizeof d->m[0].s, "int3"); }
static void m_file_type(desc *d) { findm(d, "general.file_type")->u = 1; }
static void m_scheme_vs_type(desc *d) {
    snprintf(findm(d, "kipp.quant.scheme")->s, sizeof d->m[0].s, "q8_0");
    findm(d, "general.file_type")->u = 7;
}
static void m_version_empty(desc *d) { findm(d, "kipp.converter.version")->s[0] = 0; }
static void m_tied_output(desc *d) { addt(d, "output.weight", 2, 256, 151936, GGML_TYPE_BF16); }
static void m_untied_no_output(desc *d) { dropt(d, "output.weight"); }
static void m_missing_tensor(desc *d) { dropt(d, "blk.1.ffn_up.weight"); }
static void m_extra_tensor(desc *d) { addt(d, "blk.2.attn_norm.weight", 1, 256, 1, GGML_TYPE_F32); }
static void m_renamed(desc *d) { snprintf(findt(d, "blk.0.attn_k.weight")->name, 48, "blk.0.attn_key.weight"); }
static void m_order(desc *d) {
    tens tmp = d->t[3];
    d->t[3] = d->t[4];
    d->t[4] = tmp;
}
static void m_shape(desc *d) { findt(d, "blk.1.attn_q.weight")->ne[1] = 512; }
static void m_shape_transposed(desc *d) {
    tens *t = findt(d, "blk.0.ffn_down.weight");
    t->ne[0] = 256;
    t->ne[1] = 768;
}
static void m_norm_2d(desc *d) { findt(d, "blk.0.ffn_norm.weight")->n_dims = 2; }
static void m_vocab(desc *d) { findt(d, "token_embd.weight")->ne[1] = 151680; }
static void m_norm_type(desc *d) { findt(d, "output_norm.weight")->type = GGML_TYPE_BF16; }
static void m_embd_type(desc *d) { findt(d, "token_embd.weight")->type = GGML_TYPE_F16; }
static void m_proj_type(desc *d) { findt(d, "blk.1.attn_v.weight")->type = GGML_TYPE_Q8_0; }

static void test_semantic(void) {
    const char *T = "synthetic-tiny", *I = "synthetic-tiny-instruct";
    case_desc(T, "unknown revision", m_revision,
              "source kipp-synthetic/tiny at revision v0-unknown is not in the registry");
    case_desc(T, "no repository", m_repo_missing, "'kipp.source.repository': not a Kipp artifact");
    case_desc(T, "repository not a string", m_repo_type, "'kipp.source.repository': not a Kipp artifact");
    case_desc(T, "architecture", m_arch, "'general.architecture' is 'llama', expected 'qwen3'");
    case_desc(T, "checkpoint id", m_ckpt, "'kipp.checkpoint' is 'synthetic-0.6b', expected 'synthetic-tiny'");
    case_desc(T, "general.name", m_name, "'general.name' is 'tiny', expected 'synthetic-tiny'");
    case_desc(T, "hidden", m_hidden, "'qwen3.embedding_length' is 512, expected 256");
    case_desc(T, "layers", m_layers, "'qwen3.block_count' is 3, expected 2");
    case_desc(T, "ffn", m_ffn, "'qwen3.feed_forward_length' is 1024, expected 768");
    case_desc(T, "heads", m_heads, "'qwen3.attention.head_count' is 2, expected 8");
    case_desc(T, "context", m_context, "'qwen3.context_length' is 8192, expected 4096");
    case_desc(T, "kv heads", m_kv_heads, "'qwen3.attention.head_count_kv' is 4, expected 8");
    case_desc(T, "key length", m_key_len, "'qwen3.attention.key_length' is 64, expected 128");
    case_desc(T, "rope", m_rope, "'qwen3.rope.freq_base' is 10000, expected 1e+06");
    case_desc(T, "eps", m_eps, "'qwen3.attention.layer_norm_rms_epsilon' is");
    case_desc(T, "key type", m_ctx_type, "'qwen3.context_length' has type u64, expected u32");
    case_desc(T, "missing key", m_missing_merges, "missing metadata key 'tokenizer.ggml.merges'");
    case_desc(T, "extra key", m_extra_key, "unexpected metadata key 'qwen3.expert_count'");
    {
        /* the writer refuses duplicates, so write "general.namX" and patch it */
        desc d;
        valid_desc(&d, T, "bf16", 32, GGML_TYPE_BF16);
        m_dup_key(&d);
        build(&d);
        image[after_str("general.namX") - 1] = 'e';
        expect("duplicate key", "duplicate metadata key 'general.name' (entries 1 and 29)");
    }
    case_desc(T, "alignment 64", m_align64, "general.alignment is 64, Kipp artifacts use 32");
    case_desc(T, "alignment 48", m_align_bad, "general.alignment must be a power-of-two u32");
    case_desc(T, "tokenizer model", m_tok_model, "'tokenizer.ggml.model' is 'llama', expected 'gpt2'");
    case_desc(T, "tokenizer pre", m_tok_pre, "'tokenizer.ggml.pre' is 'qwen35', expected 'qwen2'");
    case_desc(T, "vocab count", m_tokens_short, "tokenizer.ggml.tokens has 1000 entries, expected 151936");
    case_desc(T, "token_type count", m_ttype_short, "tokenizer.ggml.token_type has 151935 entries");
    case_desc(T, "token_type value", m_ttype_bad, "tokenizer.ggml.token_type[151935] = 2");
    case_desc(T, "no merges", m_merges_empty, "tokenizer.ggml.merges is empty");
    case_desc(T, "eos", m_eos, "'tokenizer.ggml.eos_token_id' is 151645, expected 151643");
    case_desc(T, "padding id", m_pad, "'tokenizer.ggml.padding_token_id' is 0, expected 151643");
    case_desc(T, "bos id", m_bos, "'tokenizer.ggml.bos_token_id' is 1, expected 151643");
    case_desc(T, "add_bos", m_add_bos, "tokenizer.ggml.add_bos_token must be false");
    case_desc(T, "template on base", m_template_on_base,
              "base checkpoint 'synthetic-tiny' must not carry 'tokenizer.chat_template'");
    case_desc(I, "instruct without template", m_no_template, "missing metadata key 'tokenizer.chat_template'");
    case_desc(I, "empty template", m_empty_template, "tokenizer.chat_template is empty");
    case_desc(T, "no source files", m_files_empty, "kipp.source.files is empty");
    case_desc(T, "sha256 count", m_sha_count, "kipp.source.sha256 has 1 entries but kipp.source.files has 2");
    case_desc(T, "sha256 length", m_sha_len, "kipp.source.sha256[1] is not 64 lowercase hex digits");
    case_desc(T, "unknown scheme", m_scheme, "unknown kipp.quant.scheme 'int3'");
    case_desc(T, "file_type", m_file_type, "'general.file_type' is 1, expected 32");
    case_desc(T, "scheme vs type", m_scheme_vs_type,
              "tensor 'blk.0.attn_q.weight' has type BF16 but kipp.quant.scheme 'q8_0' stores projections as Q8_0");
    case_desc(T, "converter version", m_version_empty, "kipp.converter.version is empty");
    case_desc(T, "tied with output.weight", m_tied_output,
              "'synthetic-tiny' has a tied output head but the file carries output.weight");
    case_desc(I, "untied without output.weight", m_untied_no_output, "missing tensor 'output.weight'");
    case_desc(T, "missing tensor", m_missing_tensor, "missing tensor 'blk.1.ffn_up.weight'");
    case_desc(T, "extra tensor", m_extra_tensor, "unexpected tensor 'blk.2.attn_norm.weight'");
    case_desc(T, "renamed tensor", m_renamed, "unexpected tensor 'blk.0.attn_key.weight'");
    {
        /* the writer refuses duplicate names: patch attn_k_norm -> attn_q_norm */
        desc d;
        valid_desc(&d, T, "bf16", 32, GGML_TYPE_BF16);
        build(&d);
        image[after_str("blk.1.attn_k_norm.weight") - 13] = 'q';
        expect("duplicate tensor", "duplicate tensor name 'blk.1.attn_q_norm.weight' (tensors 18 and 19)");
    }
    case_desc(T, "tensor order", m_order,
              "tensor 3 is 'blk.0.attn_k.weight', expected 'blk.0.attn_q.weight' (canonical order)");
    case_desc(T, "wrong shape", m_shape,
              "tensor 'blk.1.attn_q.weight' has shape [256, 512], expected [256, 1024] for 'synthetic-tiny'");
    case_desc(T, "transposed", m_shape_transposed,
              "tensor 'blk.0.ffn_down.weight' has shape [256, 768], expected [768, 256]");
    case_desc(T, "norm as 2-D", m_norm_2d, "tensor 'blk.0.ffn_norm.weight' has shape [256, 1], expected [256]");
    case_desc(T, "vocab rows", m_vocab, "tensor 'token_embd.weight' has shape [256, 151680], expected [256, 151936]");
    case_desc(T, "norm type", m_norm_type, "tensor 'output_norm.weight' has type BF16, expected F32");
    case_desc(T, "embedding type", m_embd_type, "tensor 'token_embd.weight' has type F16, expected BF16");
    case_desc(T, "projection type", m_proj_type,
              "tensor 'blk.1.attn_v.weight' has type Q8_0 but kipp.quant.scheme 'bf16' stores projections as BF16");
}

int main(void) {
    /* 151936 placeholder token strings "[PAD<id>]" and all-normal types */
    tok_ptrs = calloc(KIPP_VOCAB_SIZE, sizeof *tok_ptrs);
    tok_lens = calloc(KIPP_VOCAB_SIZE, sizeof *tok_lens);
    ttypes = calloc(KIPP_VOCAB_SIZE, sizeof *ttypes);
    char *pool = malloc((size_t)KIPP_VOCAB_SIZE * 16);
    for (int i = 0; i < KIPP_VOCAB_SIZE; i++) {
        char *s = pool + (size_t)i * 16;
        tok_lens[i] = (size_t)snprintf(s, 16, "[PAD%d]", i);
        tok_ptrs[i] = s;
        ttypes[i] = 1;
    }
    /* room for the largest case: synthetic-tiny-instruct (untied, 384 wide)
     * plus its header; calloc'd pages are only touched where written */
    image_cap = (size_t)256 << 20;
    image = calloc(1, image_cap);
    if (!image) return 1;

    test_schemes();
    test_valid();
    test_cuts();
    test_bytes();
    test_semantic();
    {
        /* the fuzz seed written by the independent Python writer: synthetic-
         * tiny's metadata with an 8-token vocabulary */
        FILE *fp = fopen("tests/fuzz/seeds-gguf/artifact-like.gguf", "rb");
        CHECK(fp != NULL);
        if (fp) {
            image_len = fread(image, 1, 1 << 16, fp);
            fclose(fp);
            expect("artifact-like seed", "tokenizer.ggml.tokens has 8 entries, expected 151936");
        }
    }
    fprintf(stderr, "%d malformed artifacts checked\n", n_cases);
    CHECK(n_cases >= 30);
    free(image);
    free(pool);
    free(tok_ptrs);
    free(tok_lens);
    free(ttypes);
    return test_finish("test_artifact_malformed");
}
