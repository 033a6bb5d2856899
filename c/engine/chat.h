/* chat.h: chat templates without a template interpreter. A model's tokenizer.chat_template is
 * recognised by its markers: ChatML (<|im_start|>ROLE\n CONTENT <|im_end|>\n), together with a
 * default system message the template writes literally when a conversation has none (SmolLM2's
 * and Qwen's do), or Gemma's turns (<start_of_turn>ROLE\n CONTENT <|end_of_turn|>\n, rendered as
 * llama.cpp's "gemma" format: "assistant" becomes "model", each content is trimmed of whitespace,
 * system messages are joined and put before the next user turn's content with a blank line). A
 * model whose file carries no template gets its architecture's format where it has a known one
 * (gemma3: Gemma's, as the Gemma 3 GGUFs without the key are meant to be used); anything else is
 * refused by name. */
#ifndef FERI_ENGINE_CHAT_H
#define FERI_ENGINE_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include "ferrite.h"

enum { FERI_CHAT_CHATML = 0, FERI_CHAT_GEMMA = 1 };

typedef struct feri_chat_format {
  bool chatml;
  int32_t kind;             /* FERI_CHAT_* */
  char default_system[512]; /* ChatML; empty: none */
} feri_chat_format;

/* OK with the format, or UNSUPPORTED naming the start of the template (tmpl NULL: the model has
 * none). */
fer_status feri_chat_format_parse(const char *tmpl, size_t len, feri_chat_format *out);

/* feri_chat_format_parse, but a model without a template (tmpl NULL) whose architecture
 * (general.architecture, arch_len bytes) has a known format gets that one: gemma3 -> Gemma's. */
fer_status feri_chat_format_for(const char *tmpl, size_t len, const char *arch, size_t arch_len, feri_chat_format *out);

/* Renders messages as fer_engine_chat_render describes, into out[0..cap) (NUL-terminated). */
fer_status feri_chat_render(const feri_chat_format *f, const fer_chat_message *messages, size_t n, uint32_t flags,
                            char *out, size_t cap, size_t *out_len);

#endif
