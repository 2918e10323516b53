/* Native ChatML rendering for the Qwen3 chat template (no Jinja engine).
 * The renderer knows nothing of models: kipp_chat_render (chat.c) checks the
 * model's variant and calls kipp_chat_render_qwen3. */
#ifndef KIPP_CHAT_H
#define KIPP_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include "kipp.h"

#include "core/json.h"

/* The Qwen3 chat templates rendered natively. They share every rule but the
 * generation prompt: the hybrid template (Qwen3-0.6B ... 32B) appends
 * "<|im_start|>assistant\n" and, with enable_thinking=false, an empty think
 * block; Qwen3-*-Thinking-2507's appends "<|im_start|>assistant\n<think>\n"
 * always (it reads no enable_thinking), so that model's output carries only
 * the closing "</think>". */
typedef enum kipp_chat_template {
    KIPP_CHAT_QWEN3_HYBRID,
    KIPP_CHAT_QWEN3_THINKING_2507,
} kipp_chat_template;

int kipp_chat_render_qwen3_template(kipp_chat_template tpl, const kipp_chat_message *messages,
                                    size_t n_messages, const kipp_chat_tool *tools,
                                    size_t n_tools, bool add_generation_prompt,
                                    bool enable_thinking, char **text, size_t *length,
                                    kipp_error *err);

/* True when a rendered prompt ends inside an open think block (its last
 * "<think>" comes after its last "</think>"): the model's output then
 * starts as reasoning, with no opening tag of its own. */
bool kipp_chat_prompt_in_think(const char *text, size_t length);

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
