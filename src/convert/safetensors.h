/* safetensors reader and writer (format facts from the published spec):
 *   u64 little-endian N | N bytes of JSON header | data
 * The header maps tensor name -> {"dtype", "shape", "data_offsets": [begin,
 * end]} with offsets relative to the start of the data, plus an optional
 * "__metadata__" object of strings. The reader never loads tensor data: it
 * validates the directory against the file size and reads ranges with
 * pread, so memory does not grow with the model. */
#ifndef KIPP_CONVERT_SAFETENSORS_H
#define KIPP_CONVERT_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kipp.h"

#define ST_MAX_DIMS 8
/* A header larger than this is refused (the spec's reference limit is
 * 100 MB; real checkpoints stay far below). */
#define ST_MAX_HEADER (100u * 1024u * 1024u)

typedef struct st_tensor {
    char *name;
    char dtype[16];        /* "BF16", "F16", "F32", ... as written */
    uint32_t n_dims;
    uint64_t shape[ST_MAX_DIMS];
    uint64_t begin, end;   /* byte range relative to the data section */
} st_tensor;

typedef struct st_file {
    char *path;
    int fd;
    uint64_t file_size;
    uint64_t data_offset;  /* 8 + header length */
    st_tensor *tensors;    /* in header order */
    size_t n_tensors;
    st_tensor **by_name;   /* the same, sorted by name (kipp_st_find's binary search) */
} st_file;

/* Bytes per element of a dtype name, 0 if unknown. */
unsigned kipp_st_dtype_size(const char *dtype);

/* Opens and validates: header length and JSON, every entry's dtype, shape
 * and offsets (begin <= end, end within the file, length == elements *
 * dtype size for known dtypes), unique names, no overlapping ranges. */
int kipp_st_open(const char *path, st_file *out, kipp_error *err);
void kipp_st_close(st_file *f);
/* The tensor called name, or NULL: O(log n), so a hostile header of a
 * million entries costs seconds to open and look up, not hours. */
const st_tensor *kipp_st_find(const st_file *f, const char *name);
/* Reads n bytes at `offset` within tensor t's data. */
int kipp_st_read(const st_file *f, const st_tensor *t, uint64_t offset, void *buf,
            size_t n, kipp_error *err);

/* ---- writer: header first, then the caller streams data in order ---- */

typedef struct st_out_tensor {
    const char *name;      /* plain ASCII, no quotes or backslashes */
    const char *dtype;
    uint32_t n_dims;
    uint64_t shape[ST_MAX_DIMS];
} st_out_tensor;

/* Writes the length prefix and header (offsets laid out back to back in the
 * given order; header padded with spaces to a multiple of 8 bytes). */
int kipp_st_write_header(FILE *fp, const st_out_tensor *tensors, size_t n,
                    kipp_error *err);
/* Byte length of one tensor (elements * dtype size), false on overflow. */
bool kipp_st_out_bytes(const st_out_tensor *t, uint64_t *bytes);

#endif
