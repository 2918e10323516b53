/* The strict loader (DESIGN §3, docs/CONTRACT-ARTIFACT.md). gguf.c has
 * already checked the file's structure; here we check that it is exactly
 * the artifact `kipp convert` writes for one registry entry: every metadata
 * key with its type and value, the tensor count, and each tensor's name,
 * position, shape, type, offset and byte length in the canonical layout.
 * Any difference is a rejection with its own message; nothing is guessed. */
#include "core/artifact.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/common.h"
#include "core/quant.h"

/* ---- quantization schemes ------------------------------------------------ */

static const struct {
    const char *name;
    uint32_t ggml_type;  /* type of the seven per-layer projections */
    uint32_t file_type;  /* general.file_type (llama.cpp's numbering) */
} schemes[] = {
    [KIPP_QUANT_BF16] = {"bf16", GGML_TYPE_BF16, 32},
    [KIPP_QUANT_Q8_0] = {"q8_0", GGML_TYPE_Q8_0, 7},
    [KIPP_QUANT_AFFINE4_GS32] = {"affine4_gs32", GGML_TYPE_Q4_1, 3},
    [KIPP_QUANT_SCALE4_GS32] = {"scale4_gs32", GGML_TYPE_Q4_0, 2},
};
#define N_SCHEMES (sizeof schemes / sizeof schemes[0])

const char *kipp_quant_scheme_name(kipp_quant_scheme s) {
    return (unsigned)s < N_SCHEMES ? schemes[s].name : NULL;
}

bool kipp_quant_scheme_parse(const char *name, kipp_quant_scheme *out) {
    for (unsigned i = 0; name && i < N_SCHEMES; i++)
        if (strcmp(schemes[i].name, name) == 0) {
            *out = (kipp_quant_scheme)i;
            return true;
        }
    return false;
}

uint32_t kipp_quant_scheme_ggml_type(kipp_quant_scheme s) {
    return (unsigned)s < N_SCHEMES ? schemes[s].ggml_type : UINT32_MAX;
}

/* ---- metadata ------------------------------------------------------------ */

/* Every key the contract allows, with its type (array element type for
 * arrays). `when`: 0 always required, 1 instruct entries only, 2 optional. */
typedef struct key_spec {
    const char *key;
    uint32_t type;
    uint32_t array_type;
    int when;
} key_spec;

static const key_spec key_specs[] = {
    {"general.architecture", GGUF_TYPE_STRING, 0, 0},
    {"general.name", GGUF_TYPE_STRING, 0, 0},
    {"general.file_type", GGUF_TYPE_UINT32, 0, 0},
    {"general.alignment", GGUF_TYPE_UINT32, 0, 2},
    {"qwen3.context_length", GGUF_TYPE_UINT32, 0, 0},
    {"qwen3.embedding_length", GGUF_TYPE_UINT32, 0, 0},
    {"qwen3.block_count", GGUF_TYPE_UINT32, 0, 0},
    {"qwen3.feed_forward_length", GGUF_TYPE_UINT32, 0, 0},
    {"qwen3.attention.head_count", GGUF_TYPE_UINT32, 0, 0},
    {"qwen3.attention.head_count_kv", GGUF_TYPE_UINT32, 0, 0},
    {"qwen3.attention.key_length", GGUF_TYPE_UINT32, 0, 0},
    {"qwen3.attention.value_length", GGUF_TYPE_UINT32, 0, 0},
    {"qwen3.rope.freq_base", GGUF_TYPE_FLOAT32, 0, 0},
    {"qwen3.attention.layer_norm_rms_epsilon", GGUF_TYPE_FLOAT32, 0, 0},
    {"tokenizer.ggml.model", GGUF_TYPE_STRING, 0, 0},
    {"tokenizer.ggml.pre", GGUF_TYPE_STRING, 0, 0},
    {"tokenizer.ggml.tokens", GGUF_TYPE_ARRAY, GGUF_TYPE_STRING, 0},
    {"tokenizer.ggml.token_type", GGUF_TYPE_ARRAY, GGUF_TYPE_INT32, 0},
    {"tokenizer.ggml.merges", GGUF_TYPE_ARRAY, GGUF_TYPE_STRING, 0},
    {"tokenizer.ggml.eos_token_id", GGUF_TYPE_UINT32, 0, 0},
    {"tokenizer.ggml.padding_token_id", GGUF_TYPE_UINT32, 0, 0},
    {"tokenizer.ggml.bos_token_id", GGUF_TYPE_UINT32, 0, 0},
    {"tokenizer.ggml.add_bos_token", GGUF_TYPE_BOOL, 0, 0},
    {"tokenizer.chat_template", GGUF_TYPE_STRING, 0, 1},
    {"kipp.checkpoint", GGUF_TYPE_STRING, 0, 0},
    {"kipp.source.repository", GGUF_TYPE_STRING, 0, 0},
    {"kipp.source.revision", GGUF_TYPE_STRING, 0, 0},
    /* only from `kipp convert --allow-unpinned`: the REPOSITORY@REVISION the
     * files really came from; provenance, never used to find the entry */
    {"kipp.source.unpinned", GGUF_TYPE_STRING, 0, 2},
    {"kipp.source.files", GGUF_TYPE_ARRAY, GGUF_TYPE_STRING, 0},
    {"kipp.source.sha256", GGUF_TYPE_ARRAY, GGUF_TYPE_STRING, 0},
    {"kipp.quant.scheme", GGUF_TYPE_STRING, 0, 0},
    {"kipp.converter.version", GGUF_TYPE_STRING, 0, 0},
};
#define N_KEYS (sizeof key_specs / sizeof key_specs[0])

static const char *value_type_name(uint32_t t) {
    static const char *const names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                        "bool", "string", "array", "u64", "i64", "f64"};
    return t < sizeof names / sizeof names[0] ? names[t] : "?";
}

/* Copies a file string into a NUL-terminated buffer for messages and
 * registry lookups; false if it does not fit or holds a NUL byte. */
static bool to_cstr(gguf_str s, char *buf, size_t cap) {
    if (s.len >= cap || memchr(s.ptr, '\0', (size_t)s.len)) return false;
    memcpy(buf, s.ptr, (size_t)s.len);
    buf[s.len] = '\0';
    return true;
}

static void printable(gguf_str s, char *buf, size_t cap) {
    size_t n = 0;
    for (uint64_t i = 0; i < s.len && n + 4 < cap; i++) {
        unsigned char ch = (unsigned char)s.ptr[i];
        buf[n++] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
    }
    if (s.len > n) { memcpy(buf + n, "...", 3); n += 3; }
    buf[n] = '\0';
}

/* Checks presence and type of every key, and that there is no other key.
 * Fills found[] (NULL where an optional key is absent). */
static int check_keys(const gguf_file *f, const kipp_checkpoint *c, const gguf_kv **found,
                      kipp_error *err) {
    char buf[96];
    for (uint64_t i = 0; i < f->n_kv; i++) {
        bool known = false;
        for (size_t k = 0; k < N_KEYS && !known; k++) known = kipp_gguf_str_eq(f->kv[i].key, key_specs[k].key);
        if (!known) {
            printable(f->kv[i].key, buf, sizeof buf);
            return kipp_fail(err, KIPP_E_FORMAT, "unexpected metadata key '%s'", buf);
        }
    }
    for (size_t k = 0; k < N_KEYS; k++) {
        const key_spec *s = &key_specs[k];
        const gguf_kv *kv = kipp_gguf_find(f, s->key);
        found[k] = kv;
        bool wanted = s->when == 0 || (s->when == 1 && c && c->variant != KIPP_VARIANT_BASE);
        if (!kv) {
            if (wanted) return kipp_fail(err, KIPP_E_FORMAT, "missing metadata key '%s'", s->key);
            continue;
        }
        if (s->when == 1 && c && !wanted)
            return kipp_fail(err, KIPP_E_REGISTRY, "base checkpoint '%s' must not carry '%s'", c->id,
                             s->key);
        if (kv->type != s->type)
            return kipp_fail(err, KIPP_E_FORMAT, "metadata key '%s' has type %s, expected %s", s->key,
                             value_type_name(kv->type), value_type_name(s->type));
        if (s->type == GGUF_TYPE_ARRAY && kv->array_type != s->array_type)
            return kipp_fail(err, KIPP_E_FORMAT, "metadata key '%s' is an array of %s, expected %s",
                             s->key, value_type_name(kv->array_type), value_type_name(s->array_type));
    }
    return KIPP_OK;
}

static const gguf_kv *key_of(const gguf_kv **found, const char *key) {
    for (size_t k = 0; k < N_KEYS; k++)
        if (strcmp(key_specs[k].key, key) == 0) return found[k];
    return NULL;
}

static int want_string(const gguf_kv *kv, const char *key, const char *value, kipp_error *err) {
    if (kipp_gguf_str_eq(kv->str, value)) return KIPP_OK;
    char buf[96];
    printable(kv->str, buf, sizeof buf);
    return kipp_fail(err, KIPP_E_REGISTRY, "metadata '%s' is '%s', expected '%s'", key, buf, value);
}

static int want_u32(const gguf_kv *kv, const char *key, uint64_t value, kipp_error *err) {
    if (kv->u64 == value) return KIPP_OK;
    return kipp_fail(err, KIPP_E_REGISTRY, "metadata '%s' is %llu, expected %llu", key,
                     (unsigned long long)kv->u64, (unsigned long long)value);
}

static int want_f32(const gguf_kv *kv, const char *key, float value, kipp_error *err) {
    if ((float)kv->f64 == value) return KIPP_OK;
    return kipp_fail(err, KIPP_E_REGISTRY, "metadata '%s' is %g, expected %g", key, kv->f64,
                     (double)value);
}

/* Finds the registry entry from the recorded source. */
static int find_entry(const gguf_file *f, const kipp_checkpoint **out, kipp_error *err) {
    const gguf_kv *repo = kipp_gguf_find(f, "kipp.source.repository");
    const gguf_kv *rev = kipp_gguf_find(f, "kipp.source.revision");
    if (!repo || repo->type != GGUF_TYPE_STRING)
        return kipp_fail(err, KIPP_E_FORMAT, "missing string metadata 'kipp.source.repository': "
                         "not a Kipp artifact");
    if (!rev || rev->type != GGUF_TYPE_STRING)
        return kipp_fail(err, KIPP_E_FORMAT, "missing string metadata 'kipp.source.revision'");
    char r[256], v[256];
    const kipp_checkpoint *c = NULL;
    if (to_cstr(repo->str, r, sizeof r) && to_cstr(rev->str, v, sizeof v))
        c = kipp_registry_find_source(r, v);
    if (!c) {
        printable(repo->str, r, sizeof r);
        printable(rev->str, v, sizeof v);
        return kipp_fail(err, KIPP_E_REGISTRY,
                         "source %s at revision %s is not in the registry", r, v);
    }
    *out = c;
    return KIPP_OK;
}

static bool is_lower_hex64(gguf_str s) {
    if (s.len != 64) return false;
    for (int i = 0; i < 64; i++) {
        char ch = s.ptr[i];
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return false;
    }
    return true;
}

static int check_metadata(kipp_artifact *a, const gguf_kv **found, kipp_error *err) {
    const kipp_checkpoint *c = a->checkpoint;
    int rc;
#define KV(k) key_of(found, k)
    if ((rc = want_string(KV("general.architecture"), "general.architecture", "qwen3", err))) return rc;
    if ((rc = want_string(KV("kipp.checkpoint"), "kipp.checkpoint", c->id, err))) return rc;
    if ((rc = want_string(KV("general.name"), "general.name", c->id, err))) return rc;
    const gguf_kv *align = KV("general.alignment");
    if (align && align->u64 != GGUF_DEFAULT_ALIGNMENT)
        return kipp_fail(err, KIPP_E_FORMAT, "general.alignment is %llu, Kipp artifacts use 32",
                         (unsigned long long)align->u64);

    char scheme[32];
    const gguf_kv *q = KV("kipp.quant.scheme");
    if (!to_cstr(q->str, scheme, sizeof scheme) || !kipp_quant_scheme_parse(scheme, &a->quant)) {
        char buf[96];
        printable(q->str, buf, sizeof buf);
        return kipp_fail(err, KIPP_E_FORMAT, "unknown kipp.quant.scheme '%s'", buf);
    }
    if ((rc = want_u32(KV("general.file_type"), "general.file_type", schemes[a->quant].file_type, err)))
        return rc;

    static const struct { const char *key; size_t off; } dims[] = {
        {"qwen3.context_length", offsetof(kipp_checkpoint, context)},
        {"qwen3.embedding_length", offsetof(kipp_checkpoint, hidden)},
        {"qwen3.block_count", offsetof(kipp_checkpoint, layers)},
        {"qwen3.feed_forward_length", offsetof(kipp_checkpoint, ffn)},
        {"qwen3.attention.head_count", offsetof(kipp_checkpoint, heads)},
    };
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        uint32_t v;
        memcpy(&v, (const char *)c + dims[i].off, sizeof v);
        if ((rc = want_u32(KV(dims[i].key), dims[i].key, v, err))) return rc;
    }
    if ((rc = want_u32(KV("qwen3.attention.head_count_kv"), "qwen3.attention.head_count_kv",
                       KIPP_KV_HEADS, err)) ||
        (rc = want_u32(KV("qwen3.attention.key_length"), "qwen3.attention.key_length",
                       KIPP_HEAD_DIM, err)) ||
        (rc = want_u32(KV("qwen3.attention.value_length"), "qwen3.attention.value_length",
                       KIPP_HEAD_DIM, err)) ||
        (rc = want_f32(KV("qwen3.rope.freq_base"), "qwen3.rope.freq_base", (float)c->rope_theta,
                       err)) ||
        (rc = want_f32(KV("qwen3.attention.layer_norm_rms_epsilon"),
                       "qwen3.attention.layer_norm_rms_epsilon", KIPP_RMS_EPS, err)))
        return rc;

    /* tokenizer */
    if ((rc = want_string(KV("tokenizer.ggml.model"), "tokenizer.ggml.model", "gpt2", err)) ||
        (rc = want_string(KV("tokenizer.ggml.pre"), "tokenizer.ggml.pre", "qwen2", err)) ||
        (rc = want_u32(KV("tokenizer.ggml.eos_token_id"), "tokenizer.ggml.eos_token_id",
                       (uint32_t)c->eos, err)) ||
        (rc = want_u32(KV("tokenizer.ggml.padding_token_id"), "tokenizer.ggml.padding_token_id",
                       151643, err)) ||
        (rc = want_u32(KV("tokenizer.ggml.bos_token_id"), "tokenizer.ggml.bos_token_id", 151643,
                       err)))
        return rc;
    if (KV("tokenizer.ggml.add_bos_token")->u64 != 0)
        return kipp_fail(err, KIPP_E_FORMAT, "tokenizer.ggml.add_bos_token must be false");
    a->tokens = KV("tokenizer.ggml.tokens");
    a->token_types = KV("tokenizer.ggml.token_type");
    a->merges = KV("tokenizer.ggml.merges");
    if (a->tokens->array_len != KIPP_VOCAB_SIZE)
        return kipp_fail(err, KIPP_E_FORMAT, "tokenizer.ggml.tokens has %llu entries, expected %d",
                         (unsigned long long)a->tokens->array_len, KIPP_VOCAB_SIZE);
    if (a->token_types->array_len != KIPP_VOCAB_SIZE)
        return kipp_fail(err, KIPP_E_FORMAT,
                         "tokenizer.ggml.token_type has %llu entries, expected %d",
                         (unsigned long long)a->token_types->array_len, KIPP_VOCAB_SIZE);
    for (uint64_t i = 0; i < a->token_types->array_len; i++) {
        const uint8_t *p = a->token_types->array_data + 4 * i;
        uint32_t t = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        if (t != 1 && t != 3 && t != 4 && t != 5)
            return kipp_fail(err, KIPP_E_FORMAT,
                             "tokenizer.ggml.token_type[%llu] = %d (allowed: 1, 3, 4, 5)",
                             (unsigned long long)i, (int32_t)t);
        /* The family's layout, and what bounds the tokenizer's added-token
         * match (at most 293 candidates a byte): an artifact declaring
         * thousands of added tokens with one first byte made every prompt
         * byte compare against all of them. */
        if ((t == 3 || t == 4) && i < KIPP_FIRST_ADDED_TOKEN)
            return kipp_fail(err, KIPP_E_FORMAT,
                             "tokenizer.ggml.token_type[%llu] = %d: ids below %d are the BPE "
                             "vocabulary; control and user-defined tokens come after it",
                             (unsigned long long)i, (int32_t)t, KIPP_FIRST_ADDED_TOKEN);
    }
    if (a->merges->array_len == 0)
        return kipp_fail(err, KIPP_E_FORMAT, "tokenizer.ggml.merges is empty");
    const gguf_kv *tmpl = KV("tokenizer.chat_template");
    if (tmpl) {
        if (tmpl->str.len == 0 || memchr(tmpl->str.ptr, '\0', (size_t)tmpl->str.len))
            return kipp_fail(err, KIPP_E_FORMAT, "tokenizer.chat_template is empty or holds a NUL byte");
        char *copy = kipp_malloc((size_t)tmpl->str.len + 1, err);
        if (!copy) return KIPP_E_MEMORY;
        memcpy(copy, tmpl->str.ptr, (size_t)tmpl->str.len);
        copy[tmpl->str.len] = '\0';
        a->chat_template = copy;
    }

    /* provenance */
    const gguf_kv *files = KV("kipp.source.files"), *sums = KV("kipp.source.sha256");
    if (files->array_len == 0)
        return kipp_fail(err, KIPP_E_FORMAT, "kipp.source.files is empty");
    if (sums->array_len != files->array_len)
        return kipp_fail(err, KIPP_E_FORMAT, "kipp.source.sha256 has %llu entries but kipp.source.files has %llu",
                         (unsigned long long)sums->array_len, (unsigned long long)files->array_len);
    {
        /* walk the hashes in place (array spans were validated by kipp_gguf_parse) */
        const uint8_t *p = sums->array_data;
        for (uint64_t i = 0; i < sums->array_len; i++) {
            uint64_t len = 0;
            for (int b = 7; b >= 0; b--) len = len << 8 | p[b];
            gguf_str s = {(const char *)p + 8, len};
            if (!is_lower_hex64(s))
                return kipp_fail(err, KIPP_E_FORMAT,
                                 "kipp.source.sha256[%llu] is not 64 lowercase hex digits",
                                 (unsigned long long)i);
            p += 8 + len;
        }
    }
    if (KV("kipp.converter.version")->str.len == 0)
        return kipp_fail(err, KIPP_E_FORMAT, "kipp.converter.version is empty");
#undef KV
    return KIPP_OK;
}

/* ---- tensors ------------------------------------------------------------- */

/* One expected tensor of the canonical layout. */
typedef struct expect {
    char name[48];
    uint32_t n_dims;
    uint64_t ne[2]; /* innermost first */
    uint32_t type;
    kipp_tensor *bind;
} expect;

static const char *const layer_names[11] = {
    "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm",
    "attn_k_norm", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down",
};

/* Builds the canonical tensor list (CONTRACT-ARTIFACT "Tensors") and points
 * each entry at the weights slot it binds. */
static size_t build_layout(const kipp_checkpoint *c, uint32_t proj, kipp_weights *w, expect *e) {
    uint64_t h = c->hidden, attn = (uint64_t)c->heads * KIPP_HEAD_DIM;
    uint64_t kv = (uint64_t)KIPP_KV_HEADS * KIPP_HEAD_DIM, f = c->ffn, v = KIPP_VOCAB_SIZE;
    size_t n = 0;
#define PUT(nm, nd, a, b, ty, slot)                                                \
    do {                                                                           \
        snprintf(e[n].name, sizeof e[n].name, "%s", nm);                          \
        e[n].n_dims = nd; e[n].ne[0] = a; e[n].ne[1] = b; e[n].type = ty;          \
        e[n].bind = slot; n++;                                                     \
    } while (0)
    PUT("token_embd.weight", 2, h, v, GGML_TYPE_BF16, &w->token_embd);
    PUT("output_norm.weight", 1, h, 1, GGML_TYPE_F32, &w->output_norm);
    if (!c->tied) PUT("output.weight", 2, h, v, GGML_TYPE_BF16, &w->output);
    for (uint32_t l = 0; l < c->layers; l++) {
        kipp_layer_weights *L = &w->layers[l];
        kipp_tensor *slots[11] = {&L->attn_norm, &L->attn_q, &L->attn_k, &L->attn_v,
                                  &L->attn_output, &L->attn_q_norm, &L->attn_k_norm,
                                  &L->ffn_norm, &L->ffn_gate, &L->ffn_up, &L->ffn_down};
        /* {ne0, ne1, type} per layer tensor, in layer_names order */
        const uint64_t shape[11][3] = {
            {h, 1, GGML_TYPE_F32}, {h, attn, proj}, {h, kv, proj}, {h, kv, proj},
            {attn, h, proj}, {KIPP_HEAD_DIM, 1, GGML_TYPE_F32}, {KIPP_HEAD_DIM, 1, GGML_TYPE_F32},
            {h, 1, GGML_TYPE_F32}, {h, f, proj}, {h, f, proj}, {f, h, proj},
        };
        for (int k = 0; k < 11; k++) {
            char nm[48];
            snprintf(nm, sizeof nm, "blk.%u.%s.weight", l, layer_names[k]);
            PUT(nm, shape[k][1] == 1 ? 1 : 2, shape[k][0], shape[k][1], (uint32_t)shape[k][2],
                slots[k]);
        }
    }
#undef PUT
    return n;
}

static bool is_projection(const expect *e) {
    return e->n_dims == 2 && strncmp(e->name, "blk.", 4) == 0;
}

static void shape_str(uint32_t nd, const uint64_t *ne, char *buf, size_t cap) {
    size_t n = 0;
    buf[n++] = '[';
    for (uint32_t d = 0; d < nd && n < cap; d++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%llu", d ? ", " : "", (unsigned long long)ne[d]);
    if (n + 2 <= cap) { buf[n++] = ']'; buf[n] = '\0'; } else buf[cap - 1] = '\0';
}

static int check_tensors(kipp_artifact *a, kipp_error *err) {
    const kipp_checkpoint *c = a->checkpoint;
    const gguf_file *f = &a->gguf;
    uint32_t proj = kipp_quant_scheme_ggml_type(a->quant);
    size_t n_exp = 2 + (c->tied ? 0 : 1) + 11 * (size_t)c->layers;
    a->weights.layers = kipp_calloc(c->layers, sizeof *a->weights.layers, err);
    expect *e = kipp_calloc(n_exp, sizeof *e, err);
    if (!a->weights.layers || !e) {
        free(e);
        return KIPP_E_MEMORY;
    }
    build_layout(c, proj, &a->weights, e);
    int rc = KIPP_OK;
    char buf[96], s1[64], s2[64];

    /* Set differences first: they say what is wrong more plainly than a
     * position mismatch would. Unexpected before missing, so a renamed
     * tensor is reported by its wrong name. */
    if (c->tied && kipp_gguf_find_tensor(f, "output.weight")) {
        rc = kipp_fail(err, KIPP_E_REGISTRY,
                       "'%s' has a tied output head but the file carries output.weight", c->id);
        goto done;
    }
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        bool known = false;
        for (size_t k = 0; k < n_exp && !known; k++) known = kipp_gguf_str_eq(f->tensors[i].name, e[k].name);
        if (!known) {
            printable(f->tensors[i].name, buf, sizeof buf);
            rc = kipp_fail(err, KIPP_E_FORMAT, "unexpected tensor '%s'", buf);
            goto done;
        }
    }
    for (size_t i = 0; i < n_exp; i++)
        if (!kipp_gguf_find_tensor(f, e[i].name)) {
            rc = kipp_fail(err, KIPP_E_FORMAT, "missing tensor '%s'", e[i].name);
            goto done;
        }
    /* names are unique (kipp_gguf_parse) and all expected are present, so the
     * counts now agree; kept as a guard. */
    if (f->n_tensors != n_exp) {
        rc = kipp_fail(err, KIPP_E_FORMAT, "file has %llu tensors, expected %zu",
                       (unsigned long long)f->n_tensors, n_exp);
        goto done;
    }

    uint64_t offset = 0;
    for (size_t i = 0; i < n_exp; i++) {
        const gguf_tensor *t = &f->tensors[i];
        const expect *x = &e[i];
        if (!kipp_gguf_str_eq(t->name, x->name)) {
            printable(t->name, buf, sizeof buf);
            rc = kipp_fail(err, KIPP_E_FORMAT, "tensor %zu is '%s', expected '%s' (canonical order)",
                           i, buf, x->name);
            goto done;
        }
        if (t->n_dims != x->n_dims || t->ne[0] != x->ne[0] || t->ne[1] != x->ne[1]) {
            shape_str(t->n_dims, t->ne, s1, sizeof s1);
            shape_str(x->n_dims, x->ne, s2, sizeof s2);
            rc = kipp_fail(err, KIPP_E_REGISTRY, "tensor '%s' has shape %s, expected %s for '%s'",
                           x->name, s1, s2, c->id);
            goto done;
        }
        if (t->type != x->type) {
            if (is_projection(x))
                rc = kipp_fail(err, KIPP_E_FORMAT,
                               "tensor '%s' has type %s but kipp.quant.scheme '%s' stores projections as %s",
                               x->name, kipp_ggml_type_name(t->type), kipp_quant_scheme_name(a->quant),
                               kipp_ggml_type_name(x->type));
            else
                rc = kipp_fail(err, KIPP_E_FORMAT, "tensor '%s' has type %s, expected %s", x->name,
                               kipp_ggml_type_name(t->type), kipp_ggml_type_name(x->type));
            goto done;
        }
        if (t->offset != offset) {
            rc = kipp_fail(err, KIPP_E_FORMAT,
                           "tensor '%s' is at data offset %llu, expected %llu (canonical layout)",
                           x->name, (unsigned long long)t->offset, (unsigned long long)offset);
            goto done;
        }
        /* Shape and type match, so kipp_gguf_parse computed the canonical byte
         * length and bounds-checked it. */
        offset = (t->offset + t->nbytes + GGUF_DEFAULT_ALIGNMENT - 1) / GGUF_DEFAULT_ALIGNMENT *
                 GGUF_DEFAULT_ALIGNMENT;
        *x->bind = (kipp_tensor){
            .data = t->data, .type = t->type, .rows = t->ne[1], .cols = t->ne[0], .nbytes = t->nbytes,
        };
    }
    /* The writer pads the last tensor too: the file ends exactly there. */
    uint64_t want_size = f->data_offset + offset;
    if (f->size != want_size) {
        rc = kipp_fail(err, KIPP_E_FORMAT, "file is %zu bytes, the canonical layout needs %llu (%s)",
                       f->size, (unsigned long long)want_size,
                       f->size > want_size ? "trailing bytes after the tensor data"
                                           : "truncated in the last tensor's padding");
        goto done;
    }
    if (c->tied) a->weights.output = a->weights.token_embd;
done:
    free(e);
    return rc;
}

/* ---- open / close ---------------------------------------------------------- */

static int validate(kipp_artifact *a, kipp_error *err) {
    int rc = kipp_gguf_parse(a->map, a->map_size, &a->gguf, err);
    if (rc) return rc;
    if ((rc = find_entry(&a->gguf, &a->checkpoint, err))) return rc;
    const gguf_kv *found[N_KEYS];
    if ((rc = check_keys(&a->gguf, a->checkpoint, found, err))) return rc;
    if ((rc = check_metadata(a, found, err))) return rc;
    return check_tensors(a, err);
}

int kipp_artifact_open_memory(const uint8_t *image, size_t size, kipp_artifact *out,
                              kipp_error *err) {
    if (!out || (!image && size)) return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_artifact_open_memory: NULL argument");
    memset(out, 0, sizeof *out);
    out->map = image;
    out->map_size = size;
    int rc = validate(out, err);
    if (rc) kipp_artifact_close(out);
    return rc;
}

int kipp_artifact_open(const char *path, kipp_artifact *out, kipp_error *err) {
    if (!path || !out) return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_artifact_open: NULL argument");
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return kipp_fail(err, KIPP_E_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return kipp_fail(err, KIPP_E_IO, "cannot stat '%s': %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return kipp_fail(err, KIPP_E_IO, "'%s' is not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return kipp_fail(err, KIPP_E_FORMAT, "'%s' is empty, not a GGUF file", path);
    }
    if ((uint64_t)st.st_size > SIZE_MAX) {
        close(fd);
        return kipp_fail(err, KIPP_E_IO, "'%s' is too large to map", path);
    }
    size_t size = (size_t)st.st_size;
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd); /* the mapping keeps the file alive */
    if (map == MAP_FAILED) return kipp_fail(err, KIPP_E_IO, "cannot map '%s': %s", path, strerror(e));
#ifdef MADV_HUGEPAGE
    /* Ask for 2 MiB pages. Where the page cache reads the file fresh (after
     * a reboot or eviction), the kernel then reads it in 2 MiB folios and
     * maps them with one TLB entry each (seen: ext4 on Linux 6.18; file
     * systems without large folios keep 4 KiB pages). With 4 KiB
     * pages, every 4 KiB of weights costs a page walk the first time a
     * prefill chunk reaches it. Measured on Zen 5 (a VM), synthetic-0.6b BF16,
     * one thread: the matmuls ran at ~65 FP32 FLOP per TSC cycle on 4 KiB
     * pages and ~88 on 2 MiB ones (~94 with the weights already in cache).
     * A file already cached in small folios keeps them; the hint then
     * changes nothing. Failure changes nothing either (a hint). */
    (void)madvise(map, size, MADV_HUGEPAGE);
#endif
    out->map = map;
    out->map_size = size;
    out->owns_map = true;
    int rc = validate(out, err);
    if (rc) {
        kipp_fail_prefix(err, "%s", path);
        kipp_artifact_close(out);
    }
    return rc;
}

void kipp_artifact_close(kipp_artifact *a) {
    if (!a) return;
    kipp_gguf_free(&a->gguf);
    free(a->weights.layers);
    free((char *)a->chat_template);
    if (a->owns_map && a->map) munmap((void *)a->map, a->map_size);
    memset(a, 0, sizeof *a);
}

static int check_one(const kipp_tensor *t, const char *name, int layer, uint64_t rows,
                     uint64_t cols, bool vector, const char *backend,
                     kipp_weight_type_ok type_ok, uint64_t k_align, kipp_error *err) {
    if (!t->data || t->rows != rows || t->cols != cols)
        return kipp_fail(err, KIPP_E_FORMAT,
                         "%s backend: tensor %s (layer %d) has shape [%llu][%llu], expected "
                         "[%llu][%llu]", backend, name, layer, (unsigned long long)t->rows,
                         (unsigned long long)t->cols, (unsigned long long)rows,
                         (unsigned long long)cols);
    if (k_align > 1 && cols % k_align)
        return kipp_fail(err, KIPP_E_FORMAT, "%s backend: tensor %s width %llu is not a "
                         "multiple of %llu", backend, name, (unsigned long long)cols,
                         (unsigned long long)k_align);
    if (!type_ok(t->type, vector))
        return kipp_fail(err, KIPP_E_UNSUPPORTED,
                         "%s backend: tensor %s (layer %d) has ggml type %u, which the %s "
                         "backend does not read", backend, name, layer, t->type, backend);
    return KIPP_OK;
}

int kipp_weights_check(const kipp_checkpoint *c, const kipp_weights *w, const char *backend,
                       kipp_weight_type_ok ok, uint64_t k_align, kipp_error *err) {
    if (!c || !w->layers)
        return kipp_fail(err, KIPP_E_ARGUMENT, "%s backend: no weights bound", backend);
    uint64_t H = c->hidden, A = (uint64_t)c->heads * KIPP_HEAD_DIM, F = c->ffn;
    uint64_t KV = (uint64_t)KIPP_KV_HEADS * KIPP_HEAD_DIM;
#define CHECK_ONE(t, name, layer, rows, cols, vector) \
    check_one(t, name, layer, rows, cols, vector, backend, ok, k_align, err)
    int rc = CHECK_ONE(&w->token_embd, "token_embd", -1, KIPP_VOCAB_SIZE, H, false);
    if (!rc) rc = CHECK_ONE(&w->output_norm, "output_norm", -1, 1, H, true);
    if (!rc) rc = CHECK_ONE(&w->output, "output", -1, KIPP_VOCAB_SIZE, H, false);
    for (uint32_t l = 0; l < c->layers && !rc; l++) {
        const kipp_layer_weights *L = &w->layers[l];
        int i = (int)l;
        rc = CHECK_ONE(&L->attn_norm, "attn_norm", i, 1, H, true);
        if (!rc) rc = CHECK_ONE(&L->attn_q, "attn_q", i, A, H, false);
        if (!rc) rc = CHECK_ONE(&L->attn_k, "attn_k", i, KV, H, false);
        if (!rc) rc = CHECK_ONE(&L->attn_v, "attn_v", i, KV, H, false);
        if (!rc) rc = CHECK_ONE(&L->attn_output, "attn_output", i, H, A, false);
        if (!rc) rc = CHECK_ONE(&L->attn_q_norm, "attn_q_norm", i, 1, KIPP_HEAD_DIM, true);
        if (!rc) rc = CHECK_ONE(&L->attn_k_norm, "attn_k_norm", i, 1, KIPP_HEAD_DIM, true);
        if (!rc) rc = CHECK_ONE(&L->ffn_norm, "ffn_norm", i, 1, H, true);
        if (!rc) rc = CHECK_ONE(&L->ffn_gate, "ffn_gate", i, F, H, false);
        if (!rc) rc = CHECK_ONE(&L->ffn_up, "ffn_up", i, F, H, false);
        if (!rc) rc = CHECK_ONE(&L->ffn_down, "ffn_down", i, H, F, false);
    }
#undef CHECK_ONE
    return rc;
}

/* The opt-in quantized output head (kipp_model_options.head_quant): each
 * BF16 row encoded by the converter's own Q8_0 encoding of BF16 weights
 * (kipp_quantize_q8_0_bf16), so the copy holds exactly what `kipp convert` would write for those rows.
 * The copy lives in huge-page-advised memory (kipp_calloc_huge): decode
 * streams all of it every token. Rows are split over up to `threads`
 * threads (each row's blocks depend on that row alone, so the bytes do not
 * depend on the split): the encoder's division and rounding take ~9 ns a
 * value on one core, 1.4 s for a 0.6B head. */
typedef struct head_job {
    const uint16_t *src;
    kipp_block_q8_0 *dst;
    uint64_t row0, row1, cols;
    int failed;
} head_job;

static void *quantize_head_rows(void *arg) {
    head_job *j = arg;
    float *scratch = malloc((size_t)j->cols * sizeof *scratch);
    if (!scratch) {
        j->failed = 1;
        return NULL;
    }
    size_t per_row = (size_t)(j->cols / KIPP_QBLOCK);
    for (uint64_t r = j->row0; r < j->row1; r++)
        kipp_quantize_q8_0_bf16(j->src + r * j->cols, (size_t)j->cols, j->dst + r * per_row,
                                scratch);
    free(scratch);
    return NULL;
}

#define HEAD_MAX_THREADS 64

int kipp_weights_quantize_head(kipp_weights *w, int threads, void **owned, kipp_error *err) {
    const kipp_tensor *o = &w->output;
    *owned = NULL;
    if (o->type != GGML_TYPE_BF16)
        return kipp_fail(err, KIPP_E_UNSUPPORTED,
                         "output head has ggml type %u; only a BF16 head can be quantized to "
                         "Q8_0 at load", o->type);
    if (!o->data || o->rows == 0 || o->cols == 0 || o->cols % KIPP_QBLOCK)
        return kipp_fail(err, KIPP_E_FORMAT,
                         "output head of %llu rows of width %llu: no rows, or a width that "
                         "is not a positive multiple of %d",
                         (unsigned long long)o->rows, (unsigned long long)o->cols, KIPP_QBLOCK);
    size_t per_row = (size_t)(o->cols / KIPP_QBLOCK);
    kipp_block_q8_0 *q = kipp_calloc_huge((size_t)o->rows * per_row, sizeof *q, err);
    if (!q) return KIPP_E_MEMORY;
    if (threads < 1) threads = 1;
    if (threads > HEAD_MAX_THREADS) threads = HEAD_MAX_THREADS;
    if ((uint64_t)threads > o->rows) threads = (int)o->rows;
    head_job jobs[HEAD_MAX_THREADS];
    pthread_t tids[HEAD_MAX_THREADS];
    int started[HEAD_MAX_THREADS] = {0};
    for (int t = 0; t < threads; t++)
        jobs[t] = (head_job){.src = o->data, .dst = q, .cols = o->cols,
                             .row0 = o->rows * (uint64_t)t / (uint64_t)threads,
                             .row1 = o->rows * (uint64_t)(t + 1) / (uint64_t)threads};
    /* Job 0 runs on this thread; a thread that cannot start leaves its job
     * to this thread too. */
    for (int t = 1; t < threads; t++)
        started[t] = pthread_create(&tids[t], NULL, quantize_head_rows, &jobs[t]) == 0;
    quantize_head_rows(&jobs[0]);
    int failed = jobs[0].failed;
    for (int t = 1; t < threads; t++) {
        if (started[t]) pthread_join(tids[t], NULL);
        else quantize_head_rows(&jobs[t]);
        failed |= jobs[t].failed;
    }
    if (failed) {
        free(q);
        return kipp_fail(err, KIPP_E_MEMORY, "out of memory quantizing the output head");
    }
    w->output = (kipp_tensor){.data = q, .type = GGML_TYPE_Q8_0, .rows = o->rows,
                              .cols = o->cols,
                              .nbytes = (uint64_t)o->rows * per_row * sizeof *q};
    *owned = q;
    return KIPP_OK;
}
