/* The table of compiled-in backends, and the public kipp_model_open.
 *
 * This file sits above core and the backends: it is the one place that
 * names them. Core receives the chosen ops table as an argument
 * (kipp_model_open_with) and never refers upward, and because
 * kipp_model_open lives here, a program linked against libkipp.a pulls in
 * this table and with it every backend it lists (a weak reference would
 * pull in nothing and leave the backend "not available").
 *
 * Adding a backend = one row here + its ops table in its own directory. */
#include <stddef.h>

#include "backend.h"
#include "core/model_internal.h"

static const kipp_backend_ops *const backend_table[] = {
    [KIPP_BACKEND_REF] = &kipp_backend_ref,
    [KIPP_BACKEND_CPU] = &kipp_backend_cpu,
};

const kipp_backend_ops *kipp_backend_find(kipp_backend_kind kind) {
    if ((unsigned)kind >= sizeof backend_table / sizeof backend_table[0]) return NULL;
    return backend_table[kind]; /* NULL for NONE and for kinds not built */
}

int kipp_model_open(const char *path, const kipp_model_options *options, kipp_model **out,
                    kipp_error *err) {
    kipp_backend_kind kind = options ? options->backend : KIPP_BACKEND_NONE;
    return kipp_model_open_with(path, options, kipp_backend_find(kind), out, err);
}
