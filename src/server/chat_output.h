/* Splits a chat model's output, as it streams, into what the OpenAI API
 * returns separately: reasoning (the Qwen3 "<think>...</think>" block at the
 * start), content, and tool calls ("<tool_call>\n{json}\n</tool_call>"
 * blocks, Qwen3's format). Knows neither HTTP nor the scheduler; bytes in,
 * pieces out. Markers split across pushes are held back until they can be
 * decided, so a stream never shows part of a tag.
 *
 * Text rules (the inverse of the chat template's rendering): the newline
 * after "<think>" and the newlines before "</think>" are not reasoning;
 * newlines right after "</think>" are not content; whitespace before a
 * tool call, and trailing whitespace once a call was made, is dropped. A
 * block that does not parse as {"name": string, "arguments": ...} stays in
 * the content as text, tags included. */
#ifndef KIPP_SERVER_CHAT_OUTPUT_H
#define KIPP_SERVER_CHAT_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/json.h"
#include "kipp.h"

typedef struct chat_tool_call {
    char *name;      /* NUL-terminated */
    char *arguments; /* JSON text (an object as the template's tojson prints it) */
} chat_tool_call;

/* What one push (or the finish) produced; the caller resets it. */
typedef struct chat_delta {
    json_buf reasoning, content;
    size_t first_call, n_calls; /* calls [first_call, first_call + n_calls) are new */
} chat_delta;

typedef struct chat_output chat_output;

/* Where reasoning can be: nowhere (instruct-2507, base, completions); a
 * leading "<think>...</think>" block the model opens itself (the hybrid
 * Qwen3 template); or from the first byte up to "</think>", when the
 * rendered prompt already opened the block (Qwen3-*-Thinking-2507's
 * template ends with "<think>\n", so the output holds only the close). */
typedef enum chat_reasoning {
    CHAT_REASONING_NONE,
    CHAT_REASONING_LEADING,
    CHAT_REASONING_OPEN,
} chat_reasoning;

/* Where a chat answer's reasoning is, from the checkpoint's variant and the
 * rendered prompt: the hybrid template (instruct) leaves the think block to
 * the model; Qwen3-*-Thinking-2507's prompt opens it; instruct-2507 (and
 * base) never reason. `constrained`: a grammar constrains the output from
 * its first byte, which then cannot be reasoning; if the prompt opened a
 * think block, *close_think is set and the caller appends CHAT_CLOSE_THINK
 * to the prompt (the empty block the hybrid template writes for
 * enable_thinking=false), and the answer has no reasoning. */
#define CHAT_CLOSE_THINK "\n</think>\n\n"
chat_reasoning chat_reasoning_for(kipp_variant variant, const char *prompt, size_t n,
                                  bool constrained, bool *close_think);

/* tools: parse tool calls (outside the reasoning). */
chat_output *chat_output_create(chat_reasoning reasoning, bool tools);
void chat_output_destroy(chat_output *o);
void chat_output_push(chat_output *o, const char *text, size_t n, chat_delta *d);
/* End of generation: everything held back is released. */
void chat_output_finish(chat_output *o, chat_delta *d);
size_t chat_output_n_calls(const chat_output *o);
const chat_tool_call *chat_output_call(const chat_output *o, size_t i);
/* Any reasoning was seen (so the field is present even when empty). */
bool chat_output_had_reasoning(const chat_output *o);

void chat_delta_reset(chat_delta *d);
void chat_delta_free(chat_delta *d);

#endif
