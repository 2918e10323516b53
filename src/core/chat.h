/* Native ChatML rendering for the Qwen3 chat template (no Jinja engine).
 * The renderer knows nothing of models: kipp_chat_render (chat.c) checks the
 * model's variant and calls kipp_chat_render_qwen3. */
#ifndef KIPP_CHAT_H
#define KIPP_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include "kipp.h"

/* Byte-identical to the Qwen3 hybrid-thinking Jinja template for
 * system/user/assistant messages without tools. */
int kipp_chat_render_qwen3(const kipp_chat_message *messages, size_t n_messages,
                      bool add_generation_prompt, bool enable_thinking, char **text,
                      size_t *length, kipp_error *err);

#endif
