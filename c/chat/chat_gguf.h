/* chat_gguf.h: the chat template of a GGUF model file, as the engine and `ferrite chat-template
 * --model` both take it: tokenizer.chat_template with its tool_use variant
 * (tokenizer.chat_template.tool_use), bos_token and eos_token the vocabulary's texts of
 * tokenizer.ggml.bos_token_id and eos_token_id ("" when the file names none). */
#ifndef FERI_CHAT_CHAT_GGUF_H
#define FERI_CHAT_CHAT_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "ferrite.h"
#include "gguf/gguf.h"

/* The file's template, or when source is not NULL that one (source_len bytes: a --chat-template
 * file) with the file's special tokens. A file without a template is UNSUPPORTED with a message
 * that names --chat-template; one that does not compile is INVALID_ARG with the syntax error. */
fer_status feri_chat_template_from_gguf(const feri_gguf *g, const char *source, size_t source_len, int64_t now_unix,
                                        fer_chat_template **out);

/* The vocabulary's text of the token whose id the file gives under key (tokenizer.ggml.bos_token_id,
 * ...) into out[0..cap), NUL-terminated; "" when the key or the token is absent. */
void feri_chat_special_text(const feri_gguf *g, const char *key, char *out, size_t cap);

#endif
