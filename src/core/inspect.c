/* Inspection API behind `kipp info`: opens an artifact through the strict
 * loader (nothing else: no tokenizer, no backend) and renders metadata and
 * the tensor directory as text for the CLI, which sees only kipp.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/artifact.h"
#include "core/common.h"

struct kipp_inspect {
    kipp_artifact a;
};

int kipp_inspect_open(const char *path, kipp_inspect **out, kipp_error *err) {
    if (!path || !out) return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_inspect_open: NULL argument");
    *out = NULL;
    kipp_inspect *ins = kipp_calloc(1, sizeof *ins, err);
    if (!ins) return KIPP_E_MEMORY;
    int rc = kipp_artifact_open(path, &ins->a, err);
    if (rc) {
        free(ins);
        return rc;
    }
    *out = ins;
    return KIPP_OK;
}

void kipp_inspect_close(kipp_inspect *ins) {
    if (!ins) return;
    kipp_artifact_close(&ins->a);
    free(ins);
}

const kipp_checkpoint *kipp_inspect_checkpoint(const kipp_inspect *ins) { return ins->a.checkpoint; }
const char *kipp_inspect_quant_scheme(const kipp_inspect *ins) { return kipp_quant_scheme_name(ins->a.quant); }
uint64_t kipp_inspect_file_size(const kipp_inspect *ins) { return ins->a.map_size; }
uint64_t kipp_inspect_data_offset(const kipp_inspect *ins) { return ins->a.gguf.data_offset; }
size_t kipp_inspect_metadata_count(const kipp_inspect *ins) { return (size_t)ins->a.gguf.n_kv; }
size_t kipp_inspect_tensor_count(const kipp_inspect *ins) { return (size_t)ins->a.gguf.n_tensors; }

/* Bounded append into a text buffer; stops silently when full. */
typedef struct text {
    char *p;
    size_t cap, len;
} text;

static void put_c(text *t, char c) {
    if (t->len + 1 < t->cap) { t->p[t->len++] = c; t->p[t->len] = '\0'; }
}
static void put_s(text *t, const char *s) { while (*s) put_c(t, *s++); }
static void put_f(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put_f(text *t, const char *fmt, ...) {
    char buf[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    put_s(t, buf);
}

/* A quoted string, control bytes escaped, at most `limit` bytes of it (cut
 * on a UTF-8 boundary) and then its full length. */
static void put_quoted(text *t, gguf_str s, size_t limit) {
    size_t n = s.len < limit ? (size_t)s.len : limit;
    while (n < s.len && n > 0 && ((unsigned char)s.ptr[n] & 0xc0) == 0x80) n--;
    put_c(t, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s.ptr[i];
        if (ch == '"' || ch == '\\') { put_c(t, '\\'); put_c(t, (char)ch); }
        else if (ch == '\n') put_s(t, "\\n");
        else if (ch < 0x20 || ch == 0x7f) put_f(t, "\\x%02x", ch);
        else put_c(t, (char)ch);
    }
    put_c(t, '"');
    if (n < s.len) put_f(t, "... (%llu bytes)", (unsigned long long)s.len);
}

static const char *type_name(uint32_t t) {
    static const char *const names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                        "bool", "string", "array", "u64", "i64", "f64"};
    return t < sizeof names / sizeof names[0] ? names[t] : "?";
}

static uint64_t rd(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* One scalar array element at p as text. */
static void put_elem(text *t, uint32_t type, const uint8_t *p) {
    switch (type) {
    case GGUF_TYPE_UINT8: put_f(t, "%u", (unsigned)p[0]); break;
    case GGUF_TYPE_INT8: put_f(t, "%d", (int8_t)p[0]); break;
    case GGUF_TYPE_BOOL: put_s(t, p[0] ? "true" : "false"); break;
    case GGUF_TYPE_UINT16: put_f(t, "%u", (unsigned)rd(p, 2)); break;
    case GGUF_TYPE_INT16: put_f(t, "%d", (int16_t)rd(p, 2)); break;
    case GGUF_TYPE_UINT32: put_f(t, "%u", (uint32_t)rd(p, 4)); break;
    case GGUF_TYPE_INT32: put_f(t, "%d", (int32_t)rd(p, 4)); break;
    case GGUF_TYPE_FLOAT32: {
        uint32_t b = (uint32_t)rd(p, 4);
        float f;
        memcpy(&f, &b, 4);
        put_f(t, "%g", (double)f);
        break;
    }
    case GGUF_TYPE_UINT64: put_f(t, "%llu", (unsigned long long)rd(p, 8)); break;
    case GGUF_TYPE_INT64: put_f(t, "%lld", (long long)rd(p, 8)); break;
    case GGUF_TYPE_FLOAT64: {
        uint64_t b = rd(p, 8);
        double d;
        memcpy(&d, &b, 8);
        put_f(t, "%g", d);
        break;
    }
    }
}

static size_t elem_size(uint32_t type) {
    switch (type) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: return 1;
    case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
    case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: case GGUF_TYPE_FLOAT64: return 8;
    default: return 4;
    }
}

#define ARRAY_SHOWN 4

int kipp_inspect_metadata(const kipp_inspect *ins, size_t i, char *key, size_t key_cap, char *type,
                          size_t type_cap, char *value, size_t value_cap) {
    if (!ins || i >= ins->a.gguf.n_kv || !key_cap || !type_cap || !value_cap) return KIPP_E_ARGUMENT;
    const gguf_kv *kv = &ins->a.gguf.kv[i];
    text k = {key, key_cap, 0}, ty = {type, type_cap, 0}, v = {value, value_cap, 0};
    key[0] = type[0] = value[0] = '\0';
    for (uint64_t j = 0; j < kv->key.len; j++) put_c(&k, kv->key.ptr[j]);
    if (kv->type != GGUF_TYPE_ARRAY) {
        put_s(&ty, type_name(kv->type));
        if (kv->type == GGUF_TYPE_STRING) {
            put_quoted(&v, kv->str, 72);
        } else {
            uint8_t raw[8];
            for (int b = 0; b < 8; b++) raw[b] = (uint8_t)(kv->u64 >> 8 * b);
            if (kv->type == GGUF_TYPE_FLOAT32 || kv->type == GGUF_TYPE_FLOAT64) put_f(&v, "%g", kv->f64);
            else put_elem(&v, kv->type, raw);
        }
        return KIPP_OK;
    }
    put_f(&ty, "%s[%llu]", type_name(kv->array_type), (unsigned long long)kv->array_len);
    uint64_t shown = kv->array_len < ARRAY_SHOWN ? kv->array_len : ARRAY_SHOWN;
    put_c(&v, '[');
    if (kv->array_type == GGUF_TYPE_STRING) {
        gguf_str s[ARRAY_SHOWN];
        /* walk only the first few strings (the span was validated) */
        const uint8_t *p = kv->array_data;
        for (uint64_t j = 0; j < shown; j++) {
            s[j].len = rd(p, 8);
            s[j].ptr = (const char *)p + 8;
            p += 8 + s[j].len;
            put_s(&v, j ? ", " : "");
            put_quoted(&v, s[j], 64);
        }
    } else {
        size_t es = elem_size(kv->array_type);
        for (uint64_t j = 0; j < shown; j++) {
            put_s(&v, j ? ", " : "");
            put_elem(&v, kv->array_type, kv->array_data + j * es);
        }
    }
    if (kv->array_len > shown) put_f(&v, ", ... %llu more", (unsigned long long)(kv->array_len - shown));
    put_c(&v, ']');
    return KIPP_OK;
}

int kipp_inspect_tensor(const kipp_inspect *ins, size_t i, kipp_tensor_info *out) {
    if (!ins || !out || i >= ins->a.gguf.n_tensors) return KIPP_E_ARGUMENT;
    const gguf_tensor *t = &ins->a.gguf.tensors[i];
    memset(out, 0, sizeof *out);
    size_t n = t->name.len < sizeof out->name - 1 ? (size_t)t->name.len : sizeof out->name - 1;
    memcpy(out->name, t->name.ptr, n);
    out->type = kipp_ggml_type_name(t->type);
    out->n_dims = t->n_dims;
    memcpy(out->ne, t->ne, sizeof out->ne);
    out->offset = ins->a.gguf.data_offset + t->offset;
    out->nbytes = t->nbytes;
    return KIPP_OK;
}
