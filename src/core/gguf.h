/* GGUF v3 reader and writer (format facts from the published GGUF spec).
 *
 * The reader parses an in-memory image (normally a read-only mmap) and never
 * reads outside [base, base + size): every count, length and offset from the
 * file is checked before use. It validates structure only; what the tensors
 * must be for a Kipp checkpoint is the strict loader's job (artifact.c).
 *
 * The writer emits header, metadata and tensor directory first (offsets are
 * computed from the declared byte lengths), then tensor data streamed in
 * directory order, each tensor padded to the alignment. */
#ifndef KIPP_GGUF_H
#define KIPP_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kipp.h"

#define GGUF_MAGIC 0x46554747u /* "GGUF" little-endian */
#define GGUF_VERSION 3
#define GGUF_DEFAULT_ALIGNMENT 32

typedef enum gguf_value_type {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
} gguf_value_type;

/* ggml tensor types Kipp reads or writes. */
typedef enum ggml_type {
    GGML_TYPE_F32 = 0,
    GGML_TYPE_F16 = 1,
    GGML_TYPE_Q4_0 = 2,
    GGML_TYPE_Q4_1 = 3,
    GGML_TYPE_Q8_0 = 8,
    GGML_TYPE_BF16 = 30,
} ggml_type;

/* Name of a ggml type ("BF16"), or NULL when Kipp does not know it. */
const char *kipp_ggml_type_name(uint32_t type);
/* Bytes for a row of n elements of type; false if unknown type, n not a
 * multiple of the block size, or overflow. */
bool kipp_ggml_row_bytes(uint32_t type, uint64_t n, uint64_t *bytes);

/* A length-counted string pointing into the file image (not NUL-terminated). */
typedef struct gguf_str {
    const char *ptr;
    uint64_t len;
} gguf_str;

bool kipp_gguf_str_eq(gguf_str s, const char *cstr);

typedef struct gguf_kv {
    gguf_str key;
    uint32_t type;           /* gguf_value_type */
    /* scalars (decoded for convenience; which is valid depends on type) */
    uint64_t u64;            /* any unsigned integer, bool */
    int64_t i64;             /* any signed integer */
    double f64;              /* FLOAT32/FLOAT64 */
    gguf_str str;            /* STRING */
    /* arrays */
    uint32_t array_type;
    uint64_t array_len;
    const uint8_t *array_data; /* first element in the image */
    uint64_t array_bytes;      /* bytes spanned by all elements */
} gguf_kv;

typedef struct gguf_tensor {
    gguf_str name;
    uint32_t n_dims;
    uint64_t ne[4];         /* innermost first; unused dims = 1 */
    uint32_t type;
    uint64_t offset;        /* relative to data section */
    uint64_t nbytes;        /* computed from type and ne */
    const uint8_t *data;    /* base + data_offset + offset (checked in bounds) */
} gguf_tensor;

typedef struct gguf_file {
    const uint8_t *base;
    size_t size;
    uint32_t version;
    uint64_t n_kv;
    uint64_t n_tensors;
    gguf_kv *kv;            /* n_kv entries, malloc'd */
    gguf_tensor *tensors;   /* n_tensors entries, malloc'd */
    uint64_t alignment;
    uint64_t data_offset;   /* start of the tensor data section */
} gguf_file;

/* Parse and structurally validate. Checks: magic, version 3, counts against
 * the remaining bytes, string lengths, value types, array element types,
 * nested arrays refused, duplicate keys, general.alignment (power of two),
 * tensor dims (1..4, nonzero, product overflow), known types, offset
 * alignment, data in bounds, tensors not overlapping, duplicate names. */
int kipp_gguf_parse(const uint8_t *base, size_t size, gguf_file *out,
               kipp_error *err);
void kipp_gguf_free(gguf_file *f);

const gguf_kv *kipp_gguf_find(const gguf_file *f, const char *key);
const gguf_tensor *kipp_gguf_find_tensor(const gguf_file *f, const char *name);
/* Element i of a STRING array (bounds already validated by kipp_gguf_parse;
 * this walks from the start unless an index is built: O(i)). */
bool kipp_gguf_array_string_at(const gguf_kv *kv, uint64_t i, gguf_str *out);
/* Walk all strings of a STRING array in order: fills out[0..array_len). */
bool kipp_gguf_array_strings(const gguf_kv *kv, gguf_str *out);

/* ---- writer ---------------------------------------------------------- */

typedef struct gguf_writer gguf_writer;

int kipp_gguf_writer_create(gguf_writer **out, kipp_error *err);
void kipp_gguf_writer_destroy(gguf_writer *w);

/* Metadata, in the order added. Strings are copied. */
int kipp_gguf_writer_add_u32(gguf_writer *w, const char *key, uint32_t v, kipp_error *err);
int kipp_gguf_writer_add_i32(gguf_writer *w, const char *key, int32_t v, kipp_error *err);
int kipp_gguf_writer_add_u64(gguf_writer *w, const char *key, uint64_t v, kipp_error *err);
int kipp_gguf_writer_add_f32(gguf_writer *w, const char *key, float v, kipp_error *err);
int kipp_gguf_writer_add_bool(gguf_writer *w, const char *key, bool v, kipp_error *err);
int kipp_gguf_writer_add_string(gguf_writer *w, const char *key, const char *v, kipp_error *err);
/* Arrays: strings are (ptr, len) pairs; copied. */
int kipp_gguf_writer_add_string_array(gguf_writer *w, const char *key,
                                 const char *const *strs, const size_t *lens,
                                 size_t n, kipp_error *err);
int kipp_gguf_writer_add_i32_array(gguf_writer *w, const char *key,
                              const int32_t *v, size_t n, kipp_error *err);

/* Tensor directory, in data order. ne innermost first. */
int kipp_gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t n_dims,
                           const uint64_t *ne, uint32_t type, kipp_error *err);

/* Writes header + metadata + directory + padding to fp. */
int kipp_gguf_writer_write_header(gguf_writer *w, FILE *fp, kipp_error *err);
/* Streams the data of tensor `index` (must be the next one, in order); may be
 * called several times per tensor with consecutive chunks. Padding between
 * tensors is written automatically; the total per tensor must equal its
 * byte length. */
int kipp_gguf_writer_write_data(gguf_writer *w, FILE *fp, size_t index,
                           const void *data, size_t n, kipp_error *err);
/* Checks every tensor was fully written. */
int kipp_gguf_writer_finish(gguf_writer *w, FILE *fp, kipp_error *err);

#endif
