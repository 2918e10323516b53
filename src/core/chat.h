/* Native ChatML rendering for the Qwen3 chat template (no Jinja engine).
 * The renderer knows nothing of models: kipp_chat_render (chat.c) checks the
 * model's variant and calls kipp_chat_render_qwen3. */
#ifndef KIPP_CHAT_H
#define KIPP_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include "kipp.h"

#include "core/json.h"

/* Byte-identical to the Qwen3 hybrid-thinking Jinja template. */
int kipp_chat_render_qwen3(const kipp_chat_message *messages, size_t n_messages,
                      bool add_generation_prompt, bool enable_thinking, char **text,
                      size_t *length, kipp_error *err);
int kipp_chat_render_qwen3_tools(const kipp_chat_message *messages, size_t n_messages,
                                 const kipp_chat_tool *tools, size_t n_tools,
                                 bool add_generation_prompt, bool enable_thinking, char **text,
                                 size_t *length, kipp_error *err);

/* v as the template's `tojson` filter prints it (@huggingface/jinja, as
 * Python's json.dumps with default separators and ensure_ascii=False):
 * ", " between items, ": " after keys, keys in their given order, numbers
 * as JavaScript prints them. */
void kipp_chat_tojson(json_buf *b, const json_value *v);

#endif
