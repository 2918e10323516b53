#include "convert/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/common.h"
#include "core/json.h"

unsigned kipp_st_dtype_size(const char *dtype) {
    static const struct { const char *name; unsigned size; } sizes[] = {
        {"BF16", 2}, {"F16", 2}, {"F32", 4}, {"F64", 8}, {"I8", 1}, {"U8", 1},
        {"I16", 2}, {"U16", 2}, {"I32", 4}, {"U32", 4}, {"I64", 8}, {"U64", 8},
        {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (strcmp(dtype, sizes[i].name) == 0) return sizes[i].size;
    return 0;
}

static bool json_u64(const json_value *v, uint64_t *out) {
    if (!v || v->type != JSON_NUMBER || !v->as.number.is_integer ||
        !v->as.number.fits_int64 || v->as.number.integer < 0)
        return false;
    *out = (uint64_t)v->as.number.integer;
    return true;
}

static int parse_entry(const st_file *f, const char *name, const json_value *v,
                       st_tensor *t, kipp_error *err) {
    uint64_t data_size = f->file_size - f->data_offset;
    if (!v || v->type != JSON_OBJECT)
        return kipp_fail(err, KIPP_E_FORMAT, "%s: header entry '%s' is not an object",
                         f->path, name);
    const char *dtype = kipp_json_get_string(v, "dtype");
    if (!dtype || strlen(dtype) >= sizeof t->dtype)
        return kipp_fail(err, KIPP_E_FORMAT, "%s: tensor '%s' has no valid \"dtype\"",
                         f->path, name);
    snprintf(t->dtype, sizeof t->dtype, "%s", dtype);
    const json_value *shape = kipp_json_get_type(v, "shape", JSON_ARRAY);
    if (!shape || shape->as.array.count > ST_MAX_DIMS)
        return kipp_fail(err, KIPP_E_FORMAT, "%s: tensor '%s' has no valid \"shape\"",
                         f->path, name);
    t->n_dims = (uint32_t)shape->as.array.count;
    uint64_t elements = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        if (!json_u64(shape->as.array.items[d], &t->shape[d]))
            return kipp_fail(err, KIPP_E_FORMAT,
                             "%s: tensor '%s' shape has a non-integer or negative dimension",
                             f->path, name);
        if (!kipp_mul_u64(elements, t->shape[d], &elements))
            return kipp_fail(err, KIPP_E_FORMAT, "%s: tensor '%s' shape overflows",
                             f->path, name);
    }
    const json_value *offs = kipp_json_get_type(v, "data_offsets", JSON_ARRAY);
    if (!offs || offs->as.array.count != 2 || !json_u64(offs->as.array.items[0], &t->begin) ||
        !json_u64(offs->as.array.items[1], &t->end) || t->begin > t->end)
        return kipp_fail(err, KIPP_E_FORMAT, "%s: tensor '%s' has invalid \"data_offsets\"",
                         f->path, name);
    if (t->end > data_size)
        return kipp_fail(err, KIPP_E_FORMAT,
                         "%s: tensor '%s' data [%" PRIu64 ", %" PRIu64
                         ") extends past the end of the file (%" PRIu64
                         " data bytes): the file is truncated",
                         f->path, name, t->begin, t->end, data_size);
    unsigned size = kipp_st_dtype_size(t->dtype);
    uint64_t bytes;
    if (size && (!kipp_mul_u64(elements, size, &bytes) || bytes != t->end - t->begin))
        return kipp_fail(err, KIPP_E_FORMAT,
                         "%s: tensor '%s' (%s, %" PRIu64 " elements) spans %" PRIu64
                         " bytes, expected %" PRIu64,
                         f->path, name, t->dtype, elements, t->end - t->begin,
                         elements * size);
    return KIPP_OK;
}

static int cmp_begin(const void *a, const void *b) {
    const st_tensor *x = *(const st_tensor *const *)a, *y = *(const st_tensor *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* Zero-length tensors may share an offset; others must not overlap. */
static int check_overlap(st_file *f, kipp_error *err) {
    if (f->n_tensors < 2) return KIPP_OK;
    st_tensor **order = kipp_calloc(f->n_tensors, sizeof *order, err);
    if (!order) return KIPP_E_MEMORY;
    for (size_t i = 0; i < f->n_tensors; i++) order[i] = &f->tensors[i];
    qsort(order, f->n_tensors, sizeof *order, cmp_begin);
    int rc = KIPP_OK;
    for (size_t i = 1; i < f->n_tensors && rc == KIPP_OK; i++)
        if (order[i]->begin < order[i - 1]->end)
            rc = kipp_fail(err, KIPP_E_FORMAT, "%s: tensors '%s' and '%s' overlap", f->path,
                           order[i - 1]->name, order[i]->name);
    free(order);
    return rc;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp((*(const st_tensor *const *)a)->name, (*(const st_tensor *const *)b)->name);
}

/* Sorts the names (f->by_name) and refuses a duplicate: sorting rather than
 * a lookup per entry, because the header is the file's to choose -- 100,000
 * entries took 12.7 s with a linear lookup each (quadratic), and the 100 MB
 * header the format allows holds ~1.7 million: about an hour (now 9.8 s). */
static int index_names(st_file *f, kipp_error *err) {
    f->by_name = kipp_calloc(f->n_tensors ? f->n_tensors : 1, sizeof *f->by_name, err);
    if (!f->by_name) return KIPP_E_MEMORY;
    for (size_t i = 0; i < f->n_tensors; i++) f->by_name[i] = &f->tensors[i];
    qsort(f->by_name, f->n_tensors, sizeof *f->by_name, cmp_name);
    for (size_t i = 1; i < f->n_tensors; i++)
        if (strcmp(f->by_name[i - 1]->name, f->by_name[i]->name) == 0)
            return kipp_fail(err, KIPP_E_FORMAT, "%s: duplicate tensor name '%s'", f->path,
                             f->by_name[i]->name);
    return KIPP_OK;
}

static int read_exact(int fd, uint64_t offset, void *buf, size_t n, const char *path,
                      kipp_error *err) {
    uint8_t *p = buf;
    while (n) {
        ssize_t got = pread(fd, p, n, (off_t)offset);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0)
            return kipp_fail(err, KIPP_E_IO, "%s: read failed: %s", path, strerror(errno));
        if (got == 0)
            return kipp_fail(err, KIPP_E_FORMAT, "%s: unexpected end of file (truncated)", path);
        p += got;
        n -= (size_t)got;
        offset += (uint64_t)got;
    }
    return KIPP_OK;
}

int kipp_st_open(const char *path, st_file *out, kipp_error *err) {
    memset(out, 0, sizeof *out);
    out->fd = -1;
    out->path = strdup(path);
    if (!out->path) return kipp_fail(err, KIPP_E_MEMORY, "out of memory");
    int rc = KIPP_OK;
    char *header = NULL;
    json_doc *doc = NULL;
    out->fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (out->fd < 0 || fstat(out->fd, &sb) != 0) {
        rc = kipp_fail(err, KIPP_E_IO, "cannot open %s: %s", path, strerror(errno));
        goto done;
    }
    out->file_size = (uint64_t)sb.st_size;
    uint8_t prefix[8];
    if (out->file_size < 8) {
        rc = kipp_fail(err, KIPP_E_FORMAT,
                       "%s: %" PRIu64 " bytes is too short for a safetensors file (truncated?)",
                       path, out->file_size);
        goto done;
    }
    if ((rc = read_exact(out->fd, 0, prefix, 8, path, err))) goto done;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | prefix[i];
    if (hlen < 2 || hlen > ST_MAX_HEADER) {
        rc = kipp_fail(err, KIPP_E_FORMAT, "%s: invalid safetensors header length %" PRIu64,
                       path, hlen);
        goto done;
    }
    if (hlen > out->file_size - 8) {
        rc = kipp_fail(err, KIPP_E_FORMAT,
                       "%s: safetensors header length %" PRIu64
                       " exceeds the file (%" PRIu64 " bytes): the file is truncated",
                       path, hlen, out->file_size);
        goto done;
    }
    out->data_offset = 8 + hlen;
    header = kipp_malloc((size_t)hlen + 1, err);
    if (!header) { rc = KIPP_E_MEMORY; goto done; }
    if ((rc = read_exact(out->fd, 8, header, (size_t)hlen, path, err))) goto done;
    header[hlen] = '\0';
    if ((rc = kipp_json_parse(header, (size_t)hlen, &doc, err))) {
        kipp_fail_prefix(err, "%s: bad safetensors header JSON", path);
        goto done;
    }
    const json_value *root = kipp_json_root(doc);
    if (root->type != JSON_OBJECT) {
        rc = kipp_fail(err, KIPP_E_FORMAT, "%s: safetensors header is not a JSON object", path);
        goto done;
    }
    out->tensors = kipp_calloc(root->as.object.count, sizeof *out->tensors, err);
    if (!out->tensors) { rc = KIPP_E_MEMORY; goto done; }
    for (size_t i = 0; i < root->as.object.count; i++) {
        const char *name = root->as.object.keys[i];
        if (strcmp(name, "__metadata__") == 0) continue;
        if (strlen(name) != root->as.object.key_lengths[i]) {
            rc = kipp_fail(err, KIPP_E_FORMAT, "%s: tensor name '%s' holds a NUL byte", path,
                           name);
            goto done;
        }
        st_tensor *t = &out->tensors[out->n_tensors];
        if ((rc = parse_entry(out, name, root->as.object.values[i], t, err))) goto done;
        if (!(t->name = strdup(name))) {
            rc = kipp_fail(err, KIPP_E_MEMORY, "out of memory");
            goto done;
        }
        out->n_tensors++;
    }
    if (!(rc = index_names(out, err))) rc = check_overlap(out, err);
done:
    kipp_json_free(doc);
    free(header);
    if (rc) kipp_st_close(out);
    return rc;
}

void kipp_st_close(st_file *f) {
    if (f->fd >= 0) close(f->fd);
    for (size_t i = 0; i < f->n_tensors; i++) free(f->tensors[i].name);
    free(f->tensors);
    free(f->by_name);
    free(f->path);
    memset(f, 0, sizeof *f);
    f->fd = -1;
}

const st_tensor *kipp_st_find(const st_file *f, const char *name) {
    size_t lo = 0, hi = f->by_name ? f->n_tensors : 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(f->by_name[mid]->name, name);
        if (c == 0) return f->by_name[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

int kipp_st_read(const st_file *f, const st_tensor *t, uint64_t offset, void *buf, size_t n,
            kipp_error *err) {
    uint64_t end;
    if (!kipp_add_u64(offset, n, &end) || end > t->end - t->begin)
        return kipp_fail(err, KIPP_E_ARGUMENT, "%s: read past the end of tensor '%s'", f->path,
                         t->name);
    return read_exact(f->fd, f->data_offset + t->begin + offset, buf, n, f->path, err);
}

/* ---- writer ------------------------------------------------------------ */

bool kipp_st_out_bytes(const st_out_tensor *t, uint64_t *bytes) {
    uint64_t n = kipp_st_dtype_size(t->dtype);
    if (!n) return false;
    for (uint32_t d = 0; d < t->n_dims; d++)
        if (!kipp_mul_u64(n, t->shape[d], &n)) return false;
    *bytes = n;
    return true;
}

/* Appends to a growable buffer; returns false on allocation failure. */
typedef struct sbuf { char *p; size_t len, cap; } sbuf;
static bool sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool sb_printf(sbuf *b, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) return false;
        if (b->p && (size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return true;
        }
        size_t cap = (b->cap ? b->cap * 2 : 4096) + (size_t)n;
        char *np = realloc(b->p, cap);
        if (!np) return false;
        b->p = np;
        b->cap = cap;
    }
}

int kipp_st_write_header(FILE *fp, const st_out_tensor *tensors, size_t n, kipp_error *err) {
    sbuf b = {0};
    bool ok = sb_printf(&b, "{\"__metadata__\":{\"format\":\"pt\"}");
    uint64_t offset = 0;
    for (size_t i = 0; ok && i < n; i++) {
        const st_out_tensor *t = &tensors[i];
        uint64_t bytes;
        if (!kipp_st_out_bytes(t, &bytes) || strpbrk(t->name, "\"\\")) {
            free(b.p);
            return kipp_fail(err, KIPP_E_ARGUMENT, "cannot write tensor '%s'", t->name);
        }
        ok = sb_printf(&b, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", t->name, t->dtype);
        for (uint32_t d = 0; ok && d < t->n_dims; d++)
            ok = sb_printf(&b, "%s%" PRIu64, d ? "," : "", t->shape[d]);
        ok = ok && sb_printf(&b, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", offset,
                             offset + bytes);
        offset += bytes;
    }
    ok = ok && sb_printf(&b, "}");
    while (ok && b.len % 8) ok = sb_printf(&b, " ");
    if (!ok) {
        free(b.p);
        return kipp_fail(err, KIPP_E_MEMORY, "out of memory building a safetensors header");
    }
    uint8_t prefix[8];
    for (int i = 0; i < 8; i++) prefix[i] = (uint8_t)((uint64_t)b.len >> (8 * i));
    bool wrote = fwrite(prefix, 1, 8, fp) == 8 && fwrite(b.p, 1, b.len, fp) == b.len;
    free(b.p);
    if (!wrote) return kipp_fail(err, KIPP_E_IO, "write failed: %s", strerror(errno));
    return KIPP_OK;
}
