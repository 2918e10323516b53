/* GGUF v3 reader and writer. Format facts (header, value types, tensor
 * directory, alignment) from the published GGUF specification; the code is
 * our own. All multi-byte values are little-endian and are encoded/decoded
 * byte by byte, so neither half depends on host byte order or alignment.
 *
 * Layout of a file:
 *   u32 magic "GGUF", u32 version, u64 n_tensors, u64 n_kv,
 *   n_kv x { string key, u32 type, value },
 *   n_tensors x { string name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset },
 *   padding to alignment, data section (tensor offsets relative to its start).
 * A string is u64 length + bytes (no NUL). An array value is u32 element
 * type, u64 count, elements. */
#include "core/gguf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"

/* ---- types ------------------------------------------------------------ */

const char *kipp_ggml_type_name(uint32_t type) {
    switch (type) {
    case GGML_TYPE_F32: return "F32";
    case GGML_TYPE_F16: return "F16";
    case GGML_TYPE_Q4_0: return "Q4_0";
    case GGML_TYPE_Q4_1: return "Q4_1";
    case GGML_TYPE_Q8_0: return "Q8_0";
    case GGML_TYPE_BF16: return "BF16";
    }
    return NULL;
}

/* Elements per block and bytes per block of each known type. */
static bool type_block(uint32_t type, uint64_t *elems, uint64_t *bytes) {
    switch (type) {
    case GGML_TYPE_F32: *elems = 1; *bytes = 4; return true;
    case GGML_TYPE_F16: *elems = 1; *bytes = 2; return true;
    case GGML_TYPE_BF16: *elems = 1; *bytes = 2; return true;
    case GGML_TYPE_Q8_0: *elems = 32; *bytes = 34; return true;  /* fp16 d, i8 q[32] */
    case GGML_TYPE_Q4_0: *elems = 32; *bytes = 18; return true;  /* fp16 d, 16 B nibbles */
    case GGML_TYPE_Q4_1: *elems = 32; *bytes = 20; return true;  /* fp16 d, fp16 m, 16 B */
    }
    return false;
}

bool kipp_ggml_row_bytes(uint32_t type, uint64_t n, uint64_t *bytes) {
    uint64_t be, bb;
    if (!type_block(type, &be, &bb)) return false;
    if (n % be != 0) return false;
    return kipp_mul_u64(n / be, bb, bytes);
}

bool kipp_gguf_str_eq(gguf_str s, const char *cstr) {
    size_t n = strlen(cstr);
    return s.len == n && (n == 0 || memcmp(s.ptr, cstr, n) == 0);
}

/* Size in bytes of one scalar element of a value type; 0 for STRING/ARRAY
 * (variable) and for unknown types. */
static uint64_t scalar_size(uint32_t type) {
    switch (type) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: return 1;
    case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
    case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
    case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: case GGUF_TYPE_FLOAT64: return 8;
    }
    return 0;
}

static uint64_t rd_le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* ---- reader ------------------------------------------------------------- */

/* A cursor over [base+pos, base+size). Every take checks the remaining
 * length first, so nothing outside the image is ever read. */
typedef struct cursor {
    const uint8_t *base;
    uint64_t size;
    uint64_t pos;
} cursor;

static uint64_t remaining(const cursor *c) { return c->size - c->pos; }

static bool take(cursor *c, uint64_t n, const uint8_t **p) {
    if (n > remaining(c)) return false;
    *p = c->base + c->pos;
    c->pos += n;
    return true;
}

static bool take_uint(cursor *c, int n, uint64_t *v) {
    const uint8_t *p;
    if (!take(c, (uint64_t)n, &p)) return false;
    *v = rd_le(p, n);
    return true;
}

static bool take_str(cursor *c, gguf_str *s) {
    uint64_t len;
    const uint8_t *p;
    if (!take_uint(c, 8, &len)) return false;
    if (!take(c, len, &p)) return false;
    s->ptr = (const char *)p;
    s->len = len;
    return true;
}

/* Print at most 64 bytes of a file string in a message, with non-printable
 * bytes as '?', so a hostile name cannot flood or corrupt the message. */
static const char *show(gguf_str s, char buf[80]) {
    size_t n = s.len < 64 ? (size_t)s.len : 64;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s.ptr[i];
        buf[i] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
    }
    if (s.len > 64) { memcpy(buf + n, "...", 3); n += 3; }
    buf[n] = '\0';
    return buf;
}

static bool str_same(gguf_str a, gguf_str b) {
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

/* Hash of a file string, for the duplicate-key/name sets (FNV-1a 64). */
static uint64_t str_hash(gguf_str s) {
    uint64_t h = 1469598103934665603ull;
    for (uint64_t i = 0; i < s.len; i++) h = (h ^ (uint8_t)s.ptr[i]) * 1099511628211ull;
    return h;
}

/* Open-addressing set of indices into an array of names; detects duplicates
 * in O(n) so a file with many tensors cannot make the check quadratic. */
typedef struct name_set {
    uint64_t *slots; /* index + 1, 0 = empty */
    uint64_t mask;
} name_set;

static int name_set_init(name_set *s, uint64_t n, kipp_error *err) {
    uint64_t cap = 16;
    while (cap < n * 2) cap <<= 1; /* n is bounded by the file size */
    s->slots = kipp_calloc((size_t)cap, sizeof *s->slots, err);
    s->mask = cap - 1;
    return s->slots ? KIPP_OK : KIPP_E_MEMORY;
}

/* Inserts names[i]; returns the index of an earlier equal name, or -1. */
static int64_t name_set_insert(name_set *s, const gguf_str *names, size_t stride,
                               uint64_t i) {
    const gguf_str *mine = (const gguf_str *)((const char *)names + stride * i);
    uint64_t h = str_hash(*mine) & s->mask;
    while (s->slots[h]) {
        uint64_t j = s->slots[h] - 1;
        const gguf_str *other = (const gguf_str *)((const char *)names + stride * j);
        if (str_same(*mine, *other)) return (int64_t)j;
        h = (h + 1) & s->mask;
    }
    s->slots[h] = i + 1;
    return -1;
}

/* Parses one value of `type` at the cursor into kv (arrays: element type,
 * count, span). `what` names the key for messages. */
static int parse_value(cursor *c, uint32_t type, gguf_kv *kv, const char *what,
                       kipp_error *err) {
    uint64_t sz = scalar_size(type);
    if (sz) {
        uint64_t v;
        if (!take_uint(c, (int)sz, &v))
            return kipp_fail(err, KIPP_E_FORMAT, "GGUF truncated in value of key '%s'", what);
        kv->u64 = v;
        switch (type) {
        case GGUF_TYPE_INT8: kv->i64 = (int8_t)v; break;
        case GGUF_TYPE_INT16: kv->i64 = (int16_t)v; break;
        case GGUF_TYPE_INT32: kv->i64 = (int32_t)v; break;
        case GGUF_TYPE_INT64: kv->i64 = (int64_t)v; break;
        case GGUF_TYPE_FLOAT32: {
            uint32_t b = (uint32_t)v;
            float f;
            memcpy(&f, &b, 4);
            kv->f64 = f;
            break;
        }
        case GGUF_TYPE_FLOAT64: memcpy(&kv->f64, &v, 8); break;
        case GGUF_TYPE_BOOL:
            if (v > 1)
                return kipp_fail(err, KIPP_E_FORMAT, "GGUF bool value %u of key '%s' is not 0 or 1",
                                 (unsigned)v, what);
            break;
        default: break;
        }
        return KIPP_OK;
    }
    if (type == GGUF_TYPE_STRING) {
        if (!take_str(c, &kv->str))
            return kipp_fail(err, KIPP_E_FORMAT,
                             "GGUF string value of key '%s' runs past the end of the file", what);
        return KIPP_OK;
    }
    if (type != GGUF_TYPE_ARRAY)
        return kipp_fail(err, KIPP_E_FORMAT, "GGUF key '%s' has unknown value type %u", what, type);

    uint64_t at, n;
    if (!take_uint(c, 4, &at) || !take_uint(c, 8, &n))
        return kipp_fail(err, KIPP_E_FORMAT, "GGUF truncated in array header of key '%s'", what);
    kv->array_type = (uint32_t)at;
    kv->array_len = n;
    kv->array_data = c->base + c->pos;
    if (at == GGUF_TYPE_ARRAY)
        return kipp_fail(err, KIPP_E_FORMAT, "GGUF key '%s' is a nested array (not allowed)", what);
    uint64_t esz = scalar_size((uint32_t)at);
    if (esz) {
        uint64_t bytes;
        const uint8_t *p;
        if (!kipp_mul_u64(n, esz, &bytes) || !take(c, bytes, &p))
            return kipp_fail(err, KIPP_E_FORMAT,
                             "GGUF array of key '%s' (%llu elements) runs past the end of the file",
                             what, (unsigned long long)n);
        kv->array_bytes = bytes;
        return KIPP_OK;
    }
    if (at != GGUF_TYPE_STRING)
        return kipp_fail(err, KIPP_E_FORMAT, "GGUF array of key '%s' has unknown element type %u",
                         what, (unsigned)at);
    /* Each string takes at least its 8-byte length, so a count larger than
     * remaining/8 is impossible; refuse it before walking. */
    if (n > remaining(c) / 8)
        return kipp_fail(err, KIPP_E_FORMAT,
                         "GGUF string array of key '%s' claims %llu elements, more than the file can hold",
                         what, (unsigned long long)n);
    uint64_t start = c->pos;
    for (uint64_t i = 0; i < n; i++) {
        gguf_str s;
        if (!take_str(c, &s))
            return kipp_fail(err, KIPP_E_FORMAT,
                             "GGUF string %llu of array '%s' runs past the end of the file",
                             (unsigned long long)i, what);
    }
    kv->array_bytes = c->pos - start;
    return KIPP_OK;
}

/* Memory needed for arrays of parsed records is bounded by the file: each kv
 * takes >= 8+0+4+1 bytes and each tensor >= 8+4+8+4+8 bytes. */
#define MIN_KV_BYTES 13u
#define MIN_TENSOR_BYTES 32u
#define GGUF_MAX_COUNT 65536u

int kipp_gguf_parse(const uint8_t *base, size_t size, gguf_file *out, kipp_error *err) {
    memset(out, 0, sizeof *out);
    if (!base && size) return kipp_fail(err, KIPP_E_ARGUMENT, "kipp_gguf_parse: NULL image");
    out->base = base;
    out->size = size;
    cursor c = {base, size, 0};
    uint64_t magic, version, n_tensors, n_kv;
    if (!take_uint(&c, 4, &magic))
        return kipp_fail(err, KIPP_E_FORMAT, "GGUF truncated: %zu bytes, too short for the magic", size);
    if (magic != GGUF_MAGIC)
        return kipp_fail(err, KIPP_E_FORMAT, "not a GGUF file: bad magic 0x%08x", (unsigned)magic);
    if (!take_uint(&c, 4, &version))
        return kipp_fail(err, KIPP_E_FORMAT, "GGUF truncated in the version field");
    if (version != GGUF_VERSION)
        return kipp_fail(err, KIPP_E_FORMAT, "unsupported GGUF version %u (need 3)", (unsigned)version);
    out->version = (uint32_t)version;
    if (!take_uint(&c, 8, &n_tensors) || !take_uint(&c, 8, &n_kv))
        return kipp_fail(err, KIPP_E_FORMAT, "GGUF truncated in the header counts");
    if (n_kv > remaining(&c) / MIN_KV_BYTES)
        return kipp_fail(err, KIPP_E_FORMAT,
                         "GGUF header claims %llu metadata entries, more than the file can hold",
                         (unsigned long long)n_kv);
    if (n_tensors > remaining(&c) / MIN_TENSOR_BYTES)
        return kipp_fail(err, KIPP_E_FORMAT,
                         "GGUF header claims %llu tensors, more than the file can hold",
                         (unsigned long long)n_tensors);
    /* Kipp artifacts hold ~30 keys and at most a few hundred tensors; a
     * generous cap keeps a hostile but large file from making us allocate
     * in proportion to its size. */
    if (n_kv > GGUF_MAX_COUNT)
        return kipp_fail(err, KIPP_E_FORMAT,
                         "GGUF header claims %llu metadata entries, more than Kipp accepts (%u)",
                         (unsigned long long)n_kv, GGUF_MAX_COUNT);
    if (n_tensors > GGUF_MAX_COUNT)
        return kipp_fail(err, KIPP_E_FORMAT, "GGUF header claims %llu tensors, more than Kipp accepts (%u)",
                         (unsigned long long)n_tensors, GGUF_MAX_COUNT);
    out->n_kv = n_kv;
    out->n_tensors = n_tensors;
    out->alignment = GGUF_DEFAULT_ALIGNMENT;
    out->kv = kipp_calloc((size_t)n_kv, sizeof *out->kv, err);
    out->tensors = kipp_calloc((size_t)n_tensors, sizeof *out->tensors, err);
    if (!out->kv || !out->tensors) {
        kipp_gguf_free(out);
        return KIPP_E_MEMORY;
    }
    int rc = KIPP_OK;
    name_set set = {0};
    char buf[80];

    /* metadata */
    if ((rc = name_set_init(&set, n_kv, err))) goto fail;
    for (uint64_t i = 0; i < n_kv; i++) {
        gguf_kv *kv = &out->kv[i];
        uint64_t type;
        if (!take_str(&c, &kv->key)) {
            rc = kipp_fail(err, KIPP_E_FORMAT, "GGUF truncated in the key of metadata entry %llu",
                           (unsigned long long)i);
            goto fail;
        }
        const char *what = show(kv->key, buf);
        if (!take_uint(&c, 4, &type)) {
            rc = kipp_fail(err, KIPP_E_FORMAT, "GGUF truncated in the type of key '%s'", what);
            goto fail;
        }
        kv->type = (uint32_t)type;
        if ((rc = parse_value(&c, kv->type, kv, what, err))) goto fail;
        int64_t dup = name_set_insert(&set, &out->kv[0].key, sizeof(gguf_kv), i);
        if (dup >= 0) {
            rc = kipp_fail(err, KIPP_E_FORMAT, "GGUF duplicate metadata key '%s' (entries %lld and %llu)",
                           what, (long long)dup, (unsigned long long)i);
            goto fail;
        }
        if (kipp_gguf_str_eq(kv->key, "general.alignment")) {
            uint64_t a = kv->u64;
            if (kv->type != GGUF_TYPE_UINT32 || a == 0 || (a & (a - 1)) != 0) {
                rc = kipp_fail(err, KIPP_E_FORMAT,
                               "GGUF general.alignment must be a power-of-two u32");
                goto fail;
            }
            out->alignment = a;
        }
    }
    free(set.slots);
    set.slots = NULL;

    /* tensor directory */
    for (uint64_t i = 0; i < n_tensors; i++) {
        gguf_tensor *t = &out->tensors[i];
        uint64_t nd, type;
        if (!take_str(&c, &t->name)) {
            rc = kipp_fail(err, KIPP_E_FORMAT, "GGUF truncated in the name of tensor %llu",
                           (unsigned long long)i);
            goto fail;
        }
        const char *what = show(t->name, buf);
        if (!take_uint(&c, 4, &nd)) {
            rc = kipp_fail(err, KIPP_E_FORMAT, "GGUF truncated in the dims of tensor '%s'", what);
            goto fail;
        }
        if (nd < 1 || nd > 4) {
            rc = kipp_fail(err, KIPP_E_FORMAT, "GGUF tensor '%s' has %llu dims (need 1..4)", what,
                           (unsigned long long)nd);
            goto fail;
        }
        t->n_dims = (uint32_t)nd;
        uint64_t count = 1;
        for (uint32_t d = 0; d < 4; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            if (!take_uint(&c, 8, &t->ne[d])) {
                rc = kipp_fail(err, KIPP_E_FORMAT, "GGUF truncated in the shape of tensor '%s'", what);
                goto fail;
            }
            if (t->ne[d] == 0) {
                rc = kipp_fail(err, KIPP_E_FORMAT, "GGUF tensor '%s' has a zero dimension (ne%u)",
                               what, d);
                goto fail;
            }
            if (!kipp_mul_u64(count, t->ne[d], &count)) {
                rc = kipp_fail(err, KIPP_E_FORMAT, "GGUF tensor '%s' element count overflows", what);
                goto fail;
            }
        }
        if (!take_uint(&c, 4, &type) || !take_uint(&c, 8, &t->offset)) {
            rc = kipp_fail(err, KIPP_E_FORMAT, "GGUF truncated in the type/offset of tensor '%s'",
                           what);
            goto fail;
        }
        t->type = (uint32_t)type;
        if (!kipp_ggml_type_name(t->type)) {
            rc = kipp_fail(err, KIPP_E_FORMAT, "GGUF tensor '%s' has unknown type %u", what, t->type);
            goto fail;
        }
        /* Blocks run along ne0, so each row must hold whole blocks. */
        uint64_t row;
        if (!kipp_ggml_row_bytes(t->type, t->ne[0], &row) ||
            !kipp_mul_u64(row, count / t->ne[0], &t->nbytes)) {
            rc = kipp_fail(err, KIPP_E_FORMAT,
                           "GGUF tensor '%s': row of %llu elements is not whole %s blocks or overflows",
                           what, (unsigned long long)t->ne[0], kipp_ggml_type_name(t->type));
            goto fail;
        }
        if (t->offset % out->alignment != 0) {
            rc = kipp_fail(err, KIPP_E_FORMAT, "GGUF tensor '%s' offset %llu is not %llu-aligned",
                           what, (unsigned long long)t->offset, (unsigned long long)out->alignment);
            goto fail;
        }
    }
    if ((rc = name_set_init(&set, n_tensors, err))) goto fail;
    for (uint64_t i = 0; i < n_tensors; i++) {
        int64_t dup = name_set_insert(&set, &out->tensors[0].name, sizeof(gguf_tensor), i);
        if (dup >= 0) {
            rc = kipp_fail(err, KIPP_E_FORMAT, "GGUF duplicate tensor name '%s' (tensors %lld and %llu)",
                           show(out->tensors[i].name, buf), (long long)dup, (unsigned long long)i);
            goto fail;
        }
    }
    free(set.slots);
    set.slots = NULL;

    /* data section: starts at the next alignment boundary */
    uint64_t pad = (out->alignment - c.pos % out->alignment) % out->alignment;
    if (!kipp_add_u64(c.pos, pad, &out->data_offset) || out->data_offset > size) {
        if (n_tensors == 0 && c.pos == size) {
            out->data_offset = size; /* metadata-only file without padding */
            return KIPP_OK;
        }
        rc = kipp_fail(err, KIPP_E_FORMAT, "GGUF truncated before the tensor data section");
        goto fail;
    }
    uint64_t data_size = size - out->data_offset;
    for (uint64_t i = 0; i < n_tensors; i++) {
        gguf_tensor *t = &out->tensors[i];
        uint64_t end;
        if (!kipp_add_u64(t->offset, t->nbytes, &end) || end > data_size) {
            rc = kipp_fail(err, KIPP_E_FORMAT,
                           "GGUF tensor '%s' data [%llu, +%llu) runs past the end of the file "
                           "(data section is %llu bytes)",
                           show(t->name, buf), (unsigned long long)t->offset,
                           (unsigned long long)t->nbytes, (unsigned long long)data_size);
            goto fail;
        }
        t->data = base + out->data_offset + t->offset;
    }
    /* Overlap: sort indices by offset and compare neighbours. */
    if (n_tensors > 1) {
        uint64_t *order = kipp_malloc((size_t)n_tensors * sizeof *order, err);
        if (!order) { rc = KIPP_E_MEMORY; goto fail; }
        for (uint64_t i = 0; i < n_tensors; i++) order[i] = i;
        /* Shell sort on offsets: no comparator context needed, O(n^1.3). */
        for (uint64_t gap = n_tensors / 2; gap > 0; gap /= 2)
            for (uint64_t i = gap; i < n_tensors; i++)
                for (uint64_t j = i; j >= gap &&
                     out->tensors[order[j - gap]].offset > out->tensors[order[j]].offset; j -= gap) {
                    uint64_t tmp = order[j];
                    order[j] = order[j - gap];
                    order[j - gap] = tmp;
                }
        for (uint64_t k = 1; k < n_tensors; k++) {
            const gguf_tensor *a = &out->tensors[order[k - 1]];
            const gguf_tensor *b = &out->tensors[order[k]];
            if (a->offset + a->nbytes > b->offset) { /* in bounds above: no overflow */
                char buf2[80];
                rc = kipp_fail(err, KIPP_E_FORMAT, "GGUF tensors '%s' and '%s' overlap in the data section",
                               show(a->name, buf), show(b->name, buf2));
                free(order);
                goto fail;
            }
        }
        free(order);
    }
    return KIPP_OK;
fail:
    free(set.slots);
    kipp_gguf_free(out);
    return rc;
}

void kipp_gguf_free(gguf_file *f) {
    if (!f) return;
    free(f->kv);
    free(f->tensors);
    f->kv = NULL;
    f->tensors = NULL;
    f->n_kv = f->n_tensors = 0;
}

const gguf_kv *kipp_gguf_find(const gguf_file *f, const char *key) {
    for (uint64_t i = 0; i < f->n_kv; i++)
        if (kipp_gguf_str_eq(f->kv[i].key, key)) return &f->kv[i];
    return NULL;
}

const gguf_tensor *kipp_gguf_find_tensor(const gguf_file *f, const char *name) {
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if (kipp_gguf_str_eq(f->tensors[i].name, name)) return &f->tensors[i];
    return NULL;
}

/* Strings in a validated array: each is u64 length + bytes, all inside
 * [array_data, array_data + array_bytes). Re-checked anyway so a caller
 * passing a hand-made kv cannot read past the span. */
bool kipp_gguf_array_string_at(const gguf_kv *kv, uint64_t i, gguf_str *out) {
    if (kv->type != GGUF_TYPE_ARRAY || kv->array_type != GGUF_TYPE_STRING || i >= kv->array_len)
        return false;
    cursor c = {kv->array_data, kv->array_bytes, 0};
    gguf_str s;
    for (uint64_t k = 0; k <= i; k++)
        if (!take_str(&c, &s)) return false;
    *out = s;
    return true;
}

bool kipp_gguf_array_strings(const gguf_kv *kv, gguf_str *out) {
    if (kv->type != GGUF_TYPE_ARRAY || kv->array_type != GGUF_TYPE_STRING) return false;
    cursor c = {kv->array_data, kv->array_bytes, 0};
    for (uint64_t k = 0; k < kv->array_len; k++)
        if (!take_str(&c, &out[k])) return false;
    return true;
}

/* ---- writer ------------------------------------------------------------- */

/* A growable byte buffer holding the serialized metadata. */
typedef struct bytebuf {
    uint8_t *data;
    size_t len, cap;
} bytebuf;

static int buf_reserve(bytebuf *b, size_t extra, kipp_error *err) {
    size_t need;
    if (!kipp_add_size(b->len, extra, &need))
        return kipp_fail(err, KIPP_E_MEMORY, "GGUF writer: metadata size overflow");
    if (need <= b->cap) return KIPP_OK;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < need) {
        if (!kipp_mul_size(cap, 2, &cap))
            return kipp_fail(err, KIPP_E_MEMORY, "GGUF writer: metadata size overflow");
    }
    uint8_t *p = realloc(b->data, cap);
    if (!p) return kipp_fail(err, KIPP_E_MEMORY, "GGUF writer: out of memory (%zu bytes)", cap);
    b->data = p;
    b->cap = cap;
    return KIPP_OK;
}

static void put_le(bytebuf *b, uint64_t v, int n) { /* space reserved by caller */
    for (int i = 0; i < n; i++) b->data[b->len++] = (uint8_t)(v >> (8 * i));
}

static int put_uint(bytebuf *b, uint64_t v, int n, kipp_error *err) {
    int rc = buf_reserve(b, (size_t)n, err);
    if (!rc) put_le(b, v, n);
    return rc;
}

static int put_str(bytebuf *b, const char *s, size_t len, kipp_error *err) {
    size_t total;
    if (!kipp_add_size(len, 8, &total))
        return kipp_fail(err, KIPP_E_MEMORY, "GGUF writer: string too long");
    int rc = buf_reserve(b, total, err);
    if (rc) return rc;
    put_le(b, len, 8);
    if (len) memcpy(b->data + b->len, s, len);
    b->len += len;
    return KIPP_OK;
}

typedef struct wtensor {
    char *name;
    uint32_t n_dims;
    uint64_t ne[4];
    uint32_t type;
    uint64_t nbytes;
    uint64_t offset; /* in the data section, aligned */
} wtensor;

struct gguf_writer {
    bytebuf meta;      /* serialized kv entries */
    uint64_t n_kv;
    char **keys;       /* for duplicate detection */
    size_t keys_cap;
    wtensor *tensors;
    size_t n_tensors, tensors_cap;
    uint64_t data_size; /* aligned end of the last tensor */
    bool header_written;
    size_t cur;         /* tensor being streamed */
    uint64_t cur_done;  /* bytes of it written so far */
    uint64_t data_pos;  /* bytes written into the data section */
};

int kipp_gguf_writer_create(gguf_writer **out, kipp_error *err) {
    *out = kipp_calloc(1, sizeof **out, err);
    return *out ? KIPP_OK : KIPP_E_MEMORY;
}

void kipp_gguf_writer_destroy(gguf_writer *w) {
    if (!w) return;
    free(w->meta.data);
    for (uint64_t i = 0; i < w->n_kv; i++) free(w->keys[i]);
    free(w->keys);
    for (size_t i = 0; i < w->n_tensors; i++) free(w->tensors[i].name);
    free(w->tensors);
    free(w);
}

static char *dup_cstr(const char *s, kipp_error *err) {
    size_t n = strlen(s) + 1;
    char *p = kipp_malloc(n, err);
    if (p) memcpy(p, s, n);
    return p;
}

/* Registers key (refusing duplicates and use after the header) and writes
 * its key string and type tag. */
static int begin_kv(gguf_writer *w, const char *key, uint32_t type, kipp_error *err) {
    if (!w || !key) return kipp_fail(err, KIPP_E_ARGUMENT, "GGUF writer: NULL argument");
    if (w->header_written)
        return kipp_fail(err, KIPP_E_ARGUMENT, "GGUF writer: key '%s' added after the header", key);
    for (uint64_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->keys[i], key) == 0)
            return kipp_fail(err, KIPP_E_ARGUMENT, "GGUF writer: duplicate key '%s'", key);
    if (w->n_kv == w->keys_cap) {
        size_t cap = w->keys_cap ? w->keys_cap * 2 : 64;
        char **k = realloc(w->keys, cap * sizeof *k);
        if (!k) return kipp_fail(err, KIPP_E_MEMORY, "GGUF writer: out of memory");
        w->keys = k;
        w->keys_cap = cap;
    }
    char *copy = dup_cstr(key, err);
    if (!copy) return KIPP_E_MEMORY;
    size_t mark = w->meta.len;
    int rc = put_str(&w->meta, key, strlen(key), err);
    if (!rc) rc = put_uint(&w->meta, type, 4, err);
    if (rc) {
        w->meta.len = mark;
        free(copy);
        return rc;
    }
    w->keys[w->n_kv++] = copy;
    return KIPP_OK;
}

/* If writing the value failed, drop the half-written entry. */
static int end_kv(gguf_writer *w, size_t mark, int rc) {
    if (rc) {
        w->meta.len = mark;
        free(w->keys[--w->n_kv]);
    }
    return rc;
}

static int add_scalar(gguf_writer *w, const char *key, uint32_t type, uint64_t bits, int n,
                      kipp_error *err) {
    size_t mark = w ? w->meta.len : 0;
    int rc = begin_kv(w, key, type, err);
    if (rc) return rc;
    return end_kv(w, mark, put_uint(&w->meta, bits, n, err));
}

int kipp_gguf_writer_add_u32(gguf_writer *w, const char *key, uint32_t v, kipp_error *err) {
    return add_scalar(w, key, GGUF_TYPE_UINT32, v, 4, err);
}
int kipp_gguf_writer_add_i32(gguf_writer *w, const char *key, int32_t v, kipp_error *err) {
    return add_scalar(w, key, GGUF_TYPE_INT32, (uint32_t)v, 4, err);
}
int kipp_gguf_writer_add_u64(gguf_writer *w, const char *key, uint64_t v, kipp_error *err) {
    return add_scalar(w, key, GGUF_TYPE_UINT64, v, 8, err);
}
int kipp_gguf_writer_add_f32(gguf_writer *w, const char *key, float v, kipp_error *err) {
    uint32_t bits;
    memcpy(&bits, &v, 4);
    return add_scalar(w, key, GGUF_TYPE_FLOAT32, bits, 4, err);
}
int kipp_gguf_writer_add_bool(gguf_writer *w, const char *key, bool v, kipp_error *err) {
    return add_scalar(w, key, GGUF_TYPE_BOOL, v ? 1 : 0, 1, err);
}

int kipp_gguf_writer_add_string(gguf_writer *w, const char *key, const char *v, kipp_error *err) {
    if (!v) return kipp_fail(err, KIPP_E_ARGUMENT, "GGUF writer: NULL string for '%s'", key);
    size_t mark = w ? w->meta.len : 0;
    int rc = begin_kv(w, key, GGUF_TYPE_STRING, err);
    if (rc) return rc;
    return end_kv(w, mark, put_str(&w->meta, v, strlen(v), err));
}

int kipp_gguf_writer_add_string_array(gguf_writer *w, const char *key, const char *const *strs,
                                 const size_t *lens, size_t n, kipp_error *err) {
    if (n && (!strs || !lens))
        return kipp_fail(err, KIPP_E_ARGUMENT, "GGUF writer: NULL array for '%s'", key);
    size_t mark = w ? w->meta.len : 0;
    int rc = begin_kv(w, key, GGUF_TYPE_ARRAY, err);
    if (rc) return rc;
    rc = put_uint(&w->meta, GGUF_TYPE_STRING, 4, err);
    if (!rc) rc = put_uint(&w->meta, n, 8, err);
    for (size_t i = 0; !rc && i < n; i++) rc = put_str(&w->meta, strs[i], lens[i], err);
    return end_kv(w, mark, rc);
}

int kipp_gguf_writer_add_i32_array(gguf_writer *w, const char *key, const int32_t *v, size_t n,
                              kipp_error *err) {
    if (n && !v) return kipp_fail(err, KIPP_E_ARGUMENT, "GGUF writer: NULL array for '%s'", key);
    size_t mark = w ? w->meta.len : 0;
    int rc = begin_kv(w, key, GGUF_TYPE_ARRAY, err);
    if (rc) return rc;
    rc = put_uint(&w->meta, GGUF_TYPE_INT32, 4, err);
    if (!rc) rc = put_uint(&w->meta, n, 8, err);
    size_t bytes;
    if (!rc && !kipp_mul_size(n, 4, &bytes))
        rc = kipp_fail(err, KIPP_E_MEMORY, "GGUF writer: array '%s' too large", key);
    if (!rc) rc = buf_reserve(&w->meta, bytes, err);
    for (size_t i = 0; !rc && i < n; i++) put_le(&w->meta, (uint32_t)v[i], 4);
    return end_kv(w, mark, rc);
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

int kipp_gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t n_dims, const uint64_t *ne,
                           uint32_t type, kipp_error *err) {
    if (!w || !name || !ne) return kipp_fail(err, KIPP_E_ARGUMENT, "GGUF writer: NULL argument");
    if (w->header_written)
        return kipp_fail(err, KIPP_E_ARGUMENT, "GGUF writer: tensor '%s' added after the header", name);
    if (n_dims < 1 || n_dims > 4)
        return kipp_fail(err, KIPP_E_ARGUMENT, "GGUF writer: tensor '%s' has %u dims", name, n_dims);
    if (!kipp_ggml_type_name(type))
        return kipp_fail(err, KIPP_E_ARGUMENT, "GGUF writer: tensor '%s' has unknown type %u", name, type);
    uint64_t count = 1;
    for (uint32_t d = 0; d < n_dims; d++)
        if (ne[d] == 0 || !kipp_mul_u64(count, ne[d], &count))
            return kipp_fail(err, KIPP_E_ARGUMENT, "GGUF writer: tensor '%s' has a bad shape", name);
    uint64_t row, nbytes, end;
    if (!kipp_ggml_row_bytes(type, ne[0], &row) || !kipp_mul_u64(row, count / ne[0], &nbytes))
        return kipp_fail(err, KIPP_E_ARGUMENT,
                         "GGUF writer: tensor '%s' row of %llu is not whole %s blocks", name,
                         (unsigned long long)ne[0], kipp_ggml_type_name(type));
    if (!kipp_add_u64(w->data_size, nbytes, &end) || end > UINT64_MAX - GGUF_DEFAULT_ALIGNMENT)
        return kipp_fail(err, KIPP_E_ARGUMENT, "GGUF writer: data section size overflow");
    for (size_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0)
            return kipp_fail(err, KIPP_E_ARGUMENT, "GGUF writer: duplicate tensor '%s'", name);
    if (w->n_tensors == w->tensors_cap) {
        size_t cap = w->tensors_cap ? w->tensors_cap * 2 : 64;
        wtensor *t = realloc(w->tensors, cap * sizeof *t);
        if (!t) return kipp_fail(err, KIPP_E_MEMORY, "GGUF writer: out of memory");
        w->tensors = t;
        w->tensors_cap = cap;
    }
    wtensor *t = &w->tensors[w->n_tensors];
    memset(t, 0, sizeof *t);
    if (!(t->name = dup_cstr(name, err))) return KIPP_E_MEMORY;
    t->n_dims = n_dims;
    for (uint32_t d = 0; d < 4; d++) t->ne[d] = d < n_dims ? ne[d] : 1;
    t->type = type;
    t->nbytes = nbytes;
    t->offset = w->data_size;
    w->data_size = align_up(end, GGUF_DEFAULT_ALIGNMENT);
    w->n_tensors++;
    return KIPP_OK;
}

static int write_all(FILE *fp, const void *p, size_t n, kipp_error *err) {
    if (n && fwrite(p, 1, n, fp) != n)
        return kipp_fail(err, KIPP_E_IO, "GGUF writer: write failed: %s", strerror(errno));
    return KIPP_OK;
}

static int write_zeros(FILE *fp, uint64_t n, kipp_error *err) {
    static const uint8_t zeros[GGUF_DEFAULT_ALIGNMENT];
    while (n) {
        size_t k = n < sizeof zeros ? (size_t)n : sizeof zeros;
        int rc = write_all(fp, zeros, k, err);
        if (rc) return rc;
        n -= k;
    }
    return KIPP_OK;
}

int kipp_gguf_writer_write_header(gguf_writer *w, FILE *fp, kipp_error *err) {
    if (!w || !fp) return kipp_fail(err, KIPP_E_ARGUMENT, "GGUF writer: NULL argument");
    if (w->header_written) return kipp_fail(err, KIPP_E_ARGUMENT, "GGUF writer: header written twice");
    bytebuf b = {0};
    int rc = put_uint(&b, GGUF_MAGIC, 4, err);
    if (!rc) rc = put_uint(&b, GGUF_VERSION, 4, err);
    if (!rc) rc = put_uint(&b, w->n_tensors, 8, err);
    if (!rc) rc = put_uint(&b, w->n_kv, 8, err);
    if (!rc) rc = write_all(fp, b.data, b.len, err);
    if (!rc) rc = write_all(fp, w->meta.data, w->meta.len, err);
    uint64_t total = b.len + w->meta.len;
    b.len = 0;
    for (size_t i = 0; !rc && i < w->n_tensors; i++) {
        const wtensor *t = &w->tensors[i];
        rc = put_str(&b, t->name, strlen(t->name), err);
        if (!rc) rc = put_uint(&b, t->n_dims, 4, err);
        for (uint32_t d = 0; !rc && d < t->n_dims; d++) rc = put_uint(&b, t->ne[d], 8, err);
        if (!rc) rc = put_uint(&b, t->type, 4, err);
        if (!rc) rc = put_uint(&b, t->offset, 8, err);
    }
    if (!rc) rc = write_all(fp, b.data, b.len, err);
    total += b.len;
    free(b.data);
    if (!rc) rc = write_zeros(fp, align_up(total, GGUF_DEFAULT_ALIGNMENT) - total, err);
    if (rc) return rc;
    w->header_written = true;
    w->cur = 0;
    w->cur_done = 0;
    w->data_pos = 0;
    return KIPP_OK;
}

/* Pads the data section up to position `to`. */
static int pad_to(gguf_writer *w, FILE *fp, uint64_t to, kipp_error *err) {
    int rc = write_zeros(fp, to - w->data_pos, err);
    if (!rc) w->data_pos = to;
    return rc;
}

int kipp_gguf_writer_write_data(gguf_writer *w, FILE *fp, size_t index, const void *data, size_t n,
                           kipp_error *err) {
    if (!w || !fp || (n && !data)) return kipp_fail(err, KIPP_E_ARGUMENT, "GGUF writer: NULL argument");
    if (!w->header_written)
        return kipp_fail(err, KIPP_E_ARGUMENT, "GGUF writer: data written before the header");
    /* Moving on to the next tensor once the current one is complete. */
    if (index == w->cur + 1 && w->cur < w->n_tensors && w->cur_done == w->tensors[w->cur].nbytes) {
        w->cur++;
        w->cur_done = 0;
    }
    if (index != w->cur || index >= w->n_tensors)
        return kipp_fail(err, KIPP_E_ARGUMENT,
                         "GGUF writer: data for tensor %zu out of order (expected %zu)", index, w->cur);
    const wtensor *t = &w->tensors[index];
    if (n > t->nbytes - w->cur_done)
        return kipp_fail(err, KIPP_E_ARGUMENT, "GGUF writer: too much data for tensor '%s' (%llu bytes)",
                         t->name, (unsigned long long)t->nbytes);
    int rc = KIPP_OK;
    if (w->cur_done == 0 && w->data_pos < t->offset) rc = pad_to(w, fp, t->offset, err);
    if (!rc) rc = write_all(fp, data, n, err);
    if (rc) return rc;
    w->cur_done += n;
    w->data_pos += n;
    return KIPP_OK;
}

int kipp_gguf_writer_finish(gguf_writer *w, FILE *fp, kipp_error *err) {
    if (!w || !fp) return kipp_fail(err, KIPP_E_ARGUMENT, "GGUF writer: NULL argument");
    if (!w->header_written) return kipp_fail(err, KIPP_E_ARGUMENT, "GGUF writer: header not written");
    if (w->n_tensors) {
        bool done = w->cur == w->n_tensors - 1 && w->cur_done == w->tensors[w->cur].nbytes;
        if (!done) {
            size_t i = w->cur;
            if (i < w->n_tensors && w->cur_done == w->tensors[i].nbytes) i++;
            return kipp_fail(err, KIPP_E_ARGUMENT, "GGUF writer: tensor '%s' not fully written",
                             w->tensors[i].name);
        }
    }
    /* The last tensor is padded too, so the file ends on the alignment. */
    int rc = pad_to(w, fp, w->data_size, err);
    if (!rc && fflush(fp) != 0) rc = kipp_fail(err, KIPP_E_IO, "GGUF writer: flush failed");
    return rc;
}
