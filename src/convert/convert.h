/* `kipp convert`: a Hugging Face Qwen3 checkpoint directory -> one GGUF
 * artifact laid out exactly as docs/CONTRACT-ARTIFACT.md says. Everything is
 * validated before the output is created (config, generation config and
 * chat template against the registry, the revision the directory reveals,
 * every tensor's presence, dtype, shape and byte range, the tokenizer
 * files); tensors are then streamed in fixed-size chunks, so memory does not
 * grow with the model. The output is written to FILE.tmp and renamed; every
 * error removes FILE.tmp. */
#ifndef KIPP_CONVERT_CONVERT_H
#define KIPP_CONVERT_CONVERT_H

#include <stdbool.h>

#include "convert/synth.h" /* kipp_progress_fn */
#include "kipp.h"

typedef struct kipp_convert_options {
    const char *checkpoint_id; /* --checkpoint, or NULL to match config.json */
    const char *quant;         /* scheme name; NULL = "bf16" */
    kipp_progress_fn progress; /* optional: bytes hashed + converted */
    void *progress_ctx;
    /* Convert even when the directory reveals a revision other than the
     * entry's pin (--allow-unpinned); the artifact then records it. */
    bool allow_unpinned;
    /* For a command-line process: while FILE.tmp is written, SIGHUP, SIGINT
     * and SIGTERM remove it before the process dies (the previous
     * dispositions are restored afterwards; ignored signals stay ignored),
     * and SIGXFSZ is ignored so that a file-size limit becomes a write error
     * instead of killing the process. Not for programs that run several
     * conversions at once: the handler knows one path. */
    bool remove_tmp_on_signal;
} kipp_convert_options;

int kipp_convert(const char *dir, const char *out_path, const kipp_convert_options *opt,
                 kipp_error *err);

#endif
