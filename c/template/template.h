/* template.h: chat templates (GGUF tokenizer.chat_template) rendered as Hugging Face transformers
 * renders them: Jinja2's ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
 * extensions=[loopcontrols]) with transformers' tojson, raise_exception and strftime_now.
 *
 * A feri_tmpl is immutable after feri_tmpl_parse and may be rendered from several threads at
 * once; each render allocates from its own arena, freed before it returns. */
#ifndef FERI_TEMPLATE_TEMPLATE_H
#define FERI_TEMPLATE_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferrite.h"
#include "template/value.h"

typedef struct feri_tmpl feri_tmpl;

/* Limits and the clock of one render. Zeroed fields take the defaults named. */
typedef struct feri_tmpl_options {
  uint32_t struct_size; /* sizeof(feri_tmpl_options) */
  uint32_t max_depth;   /* nested blocks and macro calls; 0: 512 */
  int64_t now_unix;     /* the time strftime_now formats (UTC); with opt NULL, the current time */
  uint64_t max_steps;   /* expressions, statements and loop iterations; 0: 1 << 24 */
  uint64_t max_output;  /* bytes of output (and of any one string); 0: 64 MiB */
  uint64_t max_memory;  /* bytes the render may allocate; 0: 1 GiB */
} feri_tmpl_options;

/* Parses src (len bytes, UTF-8, need not be NUL-terminated) into *out. A syntax error returns
 * FER_STATUS_INVALID_ARG with "line L, column C: ..." as the thread's last-error message; *out is
 * NULL on failure. NULL src with len 0 is the empty template. */
fer_status feri_tmpl_parse(const char *src, size_t len, feri_tmpl **out);

/* Frees t; NULL is a no-op. */
void feri_tmpl_free(feri_tmpl *t);

/* Renders t with the members of the JSON object context_json (len bytes) as its variables
 * (messages, tools, add_generation_prompt, bos_token, ...). *out: malloc'd, NUL-terminated, the
 * caller frees it; *out_len its length without the NUL. On failure *out is NULL, *out_len 0 and
 * the message says why:
 *   FER_STATUS_INVALID_ARG  the template called raise_exception (the message is exactly its
 *                           text, up to the 511 bytes of the last-error message;
 *                           feri_tmpl_last_raised is then true);
 *   FER_STATUS_NULL_ARG     t, out or out_len NULL, or context_json NULL with len > 0;
 *   FER_STATUS_BAD_FORMAT   malformed context JSON, or a runtime error of the template (an
 *                           undefined value used, wrong types) with Python's message;
 *   FER_STATUS_BUDGET_EXCEEDED  a limit of opt was reached;
 *   FER_STATUS_UNSUPPORTED  an integer beyond 64 bits (Python's are unbounded), or a Jinja2
 *                           filter or test this engine lacks (groupby, batch, urlize, ...);
 *   FER_STATUS_OUT_OF_MEMORY.
 * opt may be NULL (defaults, the current time). */
fer_status feri_tmpl_render(const feri_tmpl *t, const char *context_json, size_t len, const feri_tmpl_options *opt, char **out,
                            size_t *out_len);

/* Fills the render's variables (vars, empty on entry) from arg, with values in rt's arena, and
 * returns the template to render: the one given, or another (a named variant the variables call
 * for); may throw (feri_tmpl_throw) to fail the render with that status and message. */
typedef const feri_tmpl *(*feri_tmpl_vars_fn)(feri_tmpl_rt *rt, feri_tmpl_dict *vars, void *arg);

/* feri_tmpl_render, with the variables made by vars(rt, dict, arg) instead of parsed from JSON
 * (c/chat builds them from a request: messages prepared as transformers prepares them), and the
 * template vars returns rendered (t when it returns NULL). */
fer_status feri_tmpl_render_vars(const feri_tmpl *t, feri_tmpl_vars_fn vars, void *arg, const feri_tmpl_options *opt,
                                 char **out, size_t *out_len);

/* Whether the calling thread's last feri_tmpl_render failed because the template called
 * raise_exception (as transformers raises TemplateError). */
bool feri_tmpl_last_raised(void);

#endif
