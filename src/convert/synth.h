/* `kipp synth`: a synthetic checkpoint in the Hugging Face layout (config.json,
 * generation_config.json, model.safetensors or shards + index, and the real
 * Qwen3 tokenizer files copied from a directory), with deterministic random
 * BF16 weights. Bit-reproducible on any machine: integer PRNG, and the only
 * float operation per weight is one IEEE multiply (no libm). Streams each
 * tensor in small chunks, so memory stays flat for the 8 GB entries. */
#ifndef KIPP_CONVERT_SYNTH_H
#define KIPP_CONVERT_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#include "convert/layout.h"
#include "kipp.h"

typedef void (*kipp_progress_fn)(void *ctx, uint64_t done, uint64_t total);

typedef struct kipp_synth_options {
    unsigned shards;            /* 1 = model.safetensors; N > 1 = N shards */
    const char *tokenizer_dir;  /* holds tokenizer.json, tokenizer_config.json */
    kipp_progress_fn progress;  /* optional, called with bytes written */
    void *progress_ctx;
} kipp_synth_options;

int kipp_synth(const kipp_checkpoint *c, const char *dir, const kipp_synth_options *opt,
               kipp_error *err);

/* BF16 bits of elements [start, start + n) of a layout tensor. Counter-based
 * (element i depends only on entry, tensor name and i), so any chunking
 * gives the same bytes. */
void kipp_synth_fill(const kipp_checkpoint *c, const kipp_layout_tensor *t, uint64_t start,
                     uint16_t *out, size_t n);

#endif
