/* config.json of a Hugging Face Qwen3 checkpoint: checks the family
 * invariants (DESIGN §2) and finds the registry entry it belongs to. */
#ifndef KIPP_CONVERT_HF_CONFIG_H
#define KIPP_CONVERT_HF_CONFIG_H

#include <stddef.h>

#include "kipp.h"

/* text: config.json's bytes. checkpoint_id: the registry id named by the
 * user (--checkpoint), or NULL. Matching, in order:
 *   1. checkpoint_id, else 2. the config's "kipp_checkpoint" field (synthetic
 *   entries carry it), else 3. the one non-synthetic entry whose dimensions
 *   match, with "_name_or_path" breaking a tie between same-shape entries.
 * In cases 1 and 2 every dimension must still agree with the entry. */
int kipp_hf_config_match(const char *text, size_t length, const char *checkpoint_id,
                         const kipp_checkpoint **out, kipp_error *err);

#endif
