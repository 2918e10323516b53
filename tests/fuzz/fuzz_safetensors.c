/* libFuzzer target for the safetensors reader (src/convert/safetensors.c),
 * which opens the weight files of a downloaded checkpoint:
 *   make fuzz-safetensors [FUZZ_SECONDS=60]
 * The input is the file's bytes, given to kipp_st_open through a memfd.
 * Seeds: tests/fuzz/seeds-safetensors (tests/fuzz/make_seeds_safetensors.py,
 * an independent little writer).
 *   - a refusal carries a message;
 *   - an acceptance: the data section starts at 8 + the header length; every
 *     tensor's [begin, end) lies inside it, a known dtype's span is its
 *     element count times its size, tensors that hold bytes do not overlap,
 *     names are unique and kipp_st_find returns each one; a tensor's first
 *     and last bytes read back as the input's, and a read one byte past its
 *     end is refused. */
#define _GNU_SOURCE /* memfd_create */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "convert/safetensors.h"
#define FUZZ_NAME "fuzz_safetensors"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_accepted(const st_file *f, const uint8_t *data, size_t size) {
    CHECK(f->file_size == size && f->data_offset >= 10 && f->data_offset <= size);
    uint64_t data_size = size - f->data_offset;
    for (size_t i = 0; i < f->n_tensors; i++) {
        const st_tensor *t = &f->tensors[i];
        CHECK(t->name && t->begin <= t->end && t->end <= data_size && t->n_dims <= ST_MAX_DIMS);
        CHECK(kipp_st_find(f, t->name) == t);
        unsigned es = kipp_st_dtype_size(t->dtype);
        if (es) {
            unsigned __int128 bytes = es;
            for (uint32_t d = 0; d < t->n_dims; d++) bytes *= t->shape[d];
            CHECK(bytes == t->end - t->begin);
        }
        for (size_t j = 0; j < i; j++) {
            const st_tensor *u = &f->tensors[j];
            CHECK(strcmp(t->name, u->name) != 0);
            if (t->begin < t->end && u->begin < u->end)
                CHECK(t->end <= u->begin || u->end <= t->begin);
        }
        kipp_error err = {0};
        uint8_t b = 0;
        if (t->end > t->begin) {
            uint64_t n = t->end - t->begin;
            CHECK(kipp_st_read(f, t, 0, &b, 1, &err) == KIPP_OK && b == data[f->data_offset + t->begin]);
            CHECK(kipp_st_read(f, t, n - 1, &b, 1, &err) == KIPP_OK && b == data[f->data_offset + t->end - 1]);
        }
        CHECK(kipp_st_read(f, t, t->end - t->begin, &b, 1, &err) != KIPP_OK && err.message[0]);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* the pairwise checks above are quadratic: keep the tensor count small */
    if (size > 65536) return 0;
    int fd = memfd_create("fuzz_safetensors", MFD_CLOEXEC);
    if (fd < 0) abort();
    if (size && write(fd, data, size) != (ssize_t)size) abort();
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    st_file f;
    kipp_error err = {0};
    if (kipp_st_open(path, &f, &err) == KIPP_OK) {
        check_accepted(&f, data, size);
        kipp_st_close(&f);
    } else {
        CHECK(err.message[0] != 0);
    }
    close(fd);
    return 0;
}
