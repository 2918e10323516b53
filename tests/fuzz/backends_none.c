/* The fuzz targets link src/core alone (the cpu backend's per-ISA kernel
 * files need their own flags, and the fuzzed parsers live in core). This
 * stands in for src/backends.c with an empty table: models open for
 * tokenizing (KIPP_BACKEND_NONE) and any real backend is "not available in
 * this build", exactly as the library reports a missing one. */
#include "core/model_internal.h"

const kipp_backend_ops *kipp_backend_find(kipp_backend_kind kind) {
    (void)kind;
    return NULL;
}

int kipp_model_open(const char *path, const kipp_model_options *options, kipp_model **out,
                    kipp_error *err) {
    return kipp_model_open_with(path, options, NULL, out, err);
}
