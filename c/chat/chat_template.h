/* chat_template.h: a model's chat template applied to a conversation as an OpenAI client sends it.
 *
 * The request is JSON: {"messages": [...], "tools": [...], "documents": [...],
 * "chat_template_kwargs": {...}} (everything but messages optional). The template sees what
 * transformers' apply_chat_template gives it (transformers 5.25.0, testdata/template/README.md):
 * messages with their None-valued keys dropped and reasoning aliased (the first non-null of
 * reasoning_content, thinking, reasoning becomes both "thinking" and "reasoning_content"); tools
 * and documents, or None; add_generation_prompt; bos_token and eos_token; then the members of
 * chat_template_kwargs, which win. A request with tools renders through the file's tool_use
 * variant when it has one (transformers' choice of a named template).
 *
 * Adjustments unless FER_CHAT_VERBATIM, as llama.cpp makes them for templates that cannot take
 * what OpenAI clients send (the tool ones as ferrite.h's fer_chat_template_apply lists them):
 *  - content given as a list of parts, all of type "text", becomes their texts joined with "\n"
 *    (vLLM's and llama-server's flattening; ferrite takes no images, so another part type is an
 *    INVALID_ARG naming it);
 *  - a template without a system role (one that drops a system message's text or raises on it,
 *    found once by rendering a probe) gets each run of system messages joined with "\n" and put
 *    before the next user message's content, separated by "\n" (llama.cpp's minja polyfill);
 *    system text after the last user message becomes a user message of its own. */
#ifndef FERI_CHAT_CHAT_TEMPLATE_H
#define FERI_CHAT_CHAT_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferrite.h"

typedef struct feri_chat_template feri_chat_template;

/* Compiles the template source (src, len bytes) and, when tool_use is not NULL, the tool_use
 * variant; bos and eos are the special tokens' texts (NULL: ""). Syntax errors are INVALID_ARG
 * with "chat template: line L, column C: ..." (or "chat template (tool_use): ..."). */
fer_status feri_chat_template_create(const char *src, size_t len, const char *tool_use, size_t tool_use_len,
                                     const char *bos, const char *eos, feri_chat_template **out);

void feri_chat_template_free(feri_chat_template *t);

/* Whether the probe found no system role (system messages are merged unless FER_CHAT_VERBATIM). */
bool feri_chat_template_merges_system(const feri_chat_template *t);

/* The capabilities (FER_CHAT_CAP_*: the system role of plain requests, the tool ones of requests
 * with tools) and the tool-call syntax (FER_CHAT_TOOLS_*). */
void feri_chat_template_info(const feri_chat_template *t, uint32_t *caps_bits, uint32_t *tool_format);

/* Renders request (len bytes of JSON, as above) with flags FER_CHAT_*; now_unix is the time
 * strftime_now formats (UTC). *out is malloc'd and NUL-terminated (free it), *out_len its length.
 * INVALID_ARG for a request that is not as described (the message names the member);
 * TEMPLATE_ERROR with the template's message when it raises or fails on this conversation;
 * BUDGET_EXCEEDED past the render's limits. */
fer_status feri_chat_template_apply(const feri_chat_template *t, const char *request, size_t len, uint32_t flags,
                                    int64_t now_unix, char **out, size_t *out_len);

/* "YYYY-MM-DD" (as FERRITE_TEMPLATE_NOW gives it) as midnight UTC in seconds since 1970; false
 * when text is not such a date. */
bool feri_chat_parse_date(const char *text, int64_t *out_unix);

#endif
