/* libFuzzer target for the GGUF reader and the strict loader:
 *   make fuzz-gguf FUZZ_SECONDS=30
 * Every input goes through kipp_artifact_open_memory (kipp_gguf_parse, then the
 * registry/metadata/tensor checks). Inputs that parse as GGUF also have
 * every string array walked with the accessors, which must stay inside the
 * image. Seeds: tests/fuzz/seeds-gguf (made by tests/fuzz/make_seeds_gguf.py). */
#include <stdint.h>
#include <stdlib.h>

#include "core/artifact.h"
#include "core/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    kipp_error err;
    kipp_artifact a;
    if (kipp_artifact_open_memory(data, size, &a, &err) == 0) kipp_artifact_close(&a);

    gguf_file f;
    if (kipp_gguf_parse(data, size, &f, &err) != 0) return 0;
    for (uint64_t i = 0; i < f.n_kv; i++) {
        const gguf_kv *kv = &f.kv[i];
        if (kv->type != GGUF_TYPE_ARRAY || kv->array_type != GGUF_TYPE_STRING || !kv->array_len)
            continue;
        gguf_str *all = malloc((size_t)kv->array_len * sizeof *all);
        if (all) {
            if (!kipp_gguf_array_strings(kv, all)) abort(); /* validated arrays always walk */
            gguf_str last;
            if (!kipp_gguf_array_string_at(kv, kv->array_len - 1, &last) || last.ptr != all[kv->array_len - 1].ptr)
                abort();
            free(all);
        }
    }
    for (uint64_t i = 0; i < f.n_tensors; i++) {
        const gguf_tensor *t = &f.tensors[i];
        /* touch the first and last byte: ASan catches any bound mistake */
        volatile uint8_t sink = t->data[0] ^ t->data[t->nbytes - 1];
        (void)sink;
    }
    kipp_gguf_free(&f);
    return 0;
}
