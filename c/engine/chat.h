/* chat.h: chat templates without a template interpreter. A model's tokenizer.chat_template is
 * recognised as ChatML by its markers (<|im_start|>ROLE\n CONTENT <|im_end|>\n), together with a
 * default system message the template writes literally when a conversation has none (SmolLM2's
 * and Qwen's do); anything else is refused by name. */
#ifndef FERI_ENGINE_CHAT_H
#define FERI_ENGINE_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include "ferrite.h"

typedef struct feri_chat_format {
  bool chatml;
  char default_system[512]; /* empty: none */
} feri_chat_format;

/* OK with the format, or UNSUPPORTED naming the start of the template (tmpl NULL: the model has
 * none). */
fer_status feri_chat_format_parse(const char *tmpl, size_t len, feri_chat_format *out);

/* Renders messages as fer_engine_chat_render describes, into out[0..cap) (NUL-terminated). */
fer_status feri_chat_render(const feri_chat_format *f, const fer_chat_message *messages, size_t n, uint32_t flags,
                            char *out, size_t cap, size_t *out_len);

#endif
