/* `kipp convert`: a Hugging Face Qwen3 checkpoint directory -> one GGUF
 * artifact laid out exactly as docs/CONTRACT-ARTIFACT.md says. Everything is
 * validated before the output is created (config against the registry,
 * every tensor's presence, dtype, shape and byte range, the tokenizer
 * files); tensors are then streamed in fixed-size chunks, so memory does not
 * grow with the model. The output is written to FILE.tmp and renamed. */
#ifndef KIPP_CONVERT_CONVERT_H
#define KIPP_CONVERT_CONVERT_H

#include "convert/synth.h" /* kipp_progress_fn */
#include "kipp.h"

typedef struct kipp_convert_options {
    const char *checkpoint_id; /* --checkpoint, or NULL to match config.json */
    const char *quant;         /* scheme name; NULL = "bf16" */
    kipp_progress_fn progress; /* optional: bytes hashed + converted */
    void *progress_ctx;
} kipp_convert_options;

int kipp_convert(const char *dir, const char *out_path, const kipp_convert_options *opt,
                 kipp_error *err);

#endif
