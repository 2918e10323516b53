/* Which registry entry a Hugging Face Qwen3 checkpoint directory is: checks
 * config.json's family invariants (DESIGN §2), then compares every
 * identity-bearing value the directory states with the registry. */
#ifndef KIPP_CONVERT_HF_CONFIG_H
#define KIPP_CONVERT_HF_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "kipp.h"

/* What the directory says about its identity. */
typedef struct kipp_hf_sources {
    const char *config;      /* config.json's bytes (required) */
    size_t config_len;
    const char *generation;  /* generation_config.json's bytes, or NULL when absent */
    size_t generation_len;
    bool has_chat_template;  /* tokenizer_config.json chat_template or chat_template.jinja */
} kipp_hf_sources;

/* checkpoint_id: the registry id named by the user (--checkpoint), or NULL.
 * The fields compared with an entry: the dimensions (layers, hidden, ffn,
 * heads, max_position_embeddings, rope_theta, tie_word_embeddings), the
 * eos/bos ids of config.json (eos_token_id is required) and of
 * generation_config.json when present, and the chat template, which every
 * non-base entry needs (a base entry tolerates one and the artifact drops
 * it). Finding the entry, in order:
 *   1. checkpoint_id, else 2. config.json's "kipp_checkpoint" field
 *   (synthetic entries carry it): every field must agree with that entry;
 *   else 3. the one non-synthetic entry with which every field agrees,
 *   "_name_or_path" breaking a tie between entries that agree alike (the
 *   4B 2507 instruct/thinking pair).
 * A failure names the fields that differ; in case 3 it lists the nearest
 * entries with their differing fields. */
int kipp_hf_config_match(const kipp_hf_sources *src, const char *checkpoint_id,
                         const kipp_checkpoint **out, kipp_error *err);

#endif
