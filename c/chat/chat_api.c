/* chat_api.c: the public chat template (fer_chat_template_*, contract in ffi/ferrite.h) over
 * chat_template.h: the options checked, the clock chosen per render. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat/chat_template.h"
#include "core/status.h"

struct fer_chat_template {
  feri_chat_template *t;
  int64_t now_unix; /* 0: the clock */
};

fer_status fer_chat_template_options_init(fer_chat_template_options *o) {
  feri_error_clear();
  if (!o) return feri_fail(FER_STATUS_NULL_ARG, "fer_chat_template_options_init: options is NULL");
  memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  return FER_STATUS_OK;
}

fer_status fer_chat_template_create(const char *source, uint64_t source_bytes, const fer_chat_template_options *options,
                                    fer_chat_template **out) {
  static const char *const fn = "fer_chat_template_create";
  feri_error_clear();
  if (!out) return feri_fail(FER_STATUS_NULL_ARG, "%s: out_template is NULL", fn);
  *out = NULL;
  if (!source && source_bytes) return feri_fail(FER_STATUS_NULL_ARG, "%s: source is NULL", fn);
  fer_chat_template_options o;
  fer_chat_template_options_init(&o);
  if (options) {
    if (options->struct_size < sizeof o)
      return feri_fail(FER_STATUS_INVALID_ARG, "%s: options->struct_size %u < %zu (call fer_chat_template_options_init)", fn,
                       options->struct_size, sizeof o);
    o = *options;
  }
  if (!o.tool_use_source && o.tool_use_source_bytes) return feri_fail(FER_STATUS_NULL_ARG, "%s: tool_use_source is NULL", fn);
  if (source_bytes > SIZE_MAX || o.tool_use_source_bytes > SIZE_MAX) return feri_fail(FER_STATUS_SIZE_OVERFLOW, "%s: source too large", fn);
  if (o.now_unix < 0) return feri_fail(FER_STATUS_INVALID_ARG, "%s: now_unix %lld is before 1970", fn, (long long)o.now_unix);
  fer_chat_template *c = calloc(1, sizeof *c);
  if (!c) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
  const fer_status st = feri_chat_template_create(source, (size_t)source_bytes, o.tool_use_source, (size_t)o.tool_use_source_bytes,
                                                  o.bos_token, o.eos_token, &c->t);
  if (st != FER_STATUS_OK) {
    free(c);
    return st;
  }
  c->now_unix = o.now_unix;
  *out = c;
  return FER_STATUS_OK;
}

fer_status fer_chat_template_free(fer_chat_template *c) {
  feri_error_clear();
  if (!c) return FER_STATUS_OK;
  feri_chat_template_free(c->t);
  free(c);
  return FER_STATUS_OK;
}

fer_status fer_chat_template_apply(const fer_chat_template *c, const char *request, uint64_t request_bytes, uint32_t flags,
                                   char **out_text, uint64_t *out_len) {
  static const char *const fn = "fer_chat_template_apply";
  feri_error_clear();
  if (out_text) *out_text = NULL;
  if (out_len) *out_len = 0;
  if (!c || !out_text || !out_len || (!request && request_bytes)) return feri_fail(FER_STATUS_NULL_ARG, "%s: a NULL argument", fn);
  if (request_bytes > SIZE_MAX) return feri_fail(FER_STATUS_SIZE_OVERFLOW, "%s: request too large", fn);
  char *text = NULL;
  size_t n = 0;
  const int64_t now = c->now_unix ? c->now_unix : (int64_t)time(NULL);
  const fer_status st = feri_chat_template_apply(c->t, request, (size_t)request_bytes, flags, now, &text, &n);
  if (st != FER_STATUS_OK) return st;
  *out_text = text;
  *out_len = n;
  return FER_STATUS_OK;
}

fer_status fer_chat_template_get_info(const fer_chat_template *c, fer_chat_template_info *out) {
  static const char *const fn = "fer_chat_template_get_info";
  feri_error_clear();
  if (!out) return feri_fail(FER_STATUS_NULL_ARG, "%s: out_info is NULL", fn);
  const uint32_t given = out->struct_size;
  memset(out, 0, sizeof *out);
  if (!c) return feri_fail(FER_STATUS_NULL_ARG, "%s: chat_template is NULL", fn);
  if (given < sizeof *out)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: struct_size %u < %zu (set it to sizeof(fer_chat_template_info))", fn, given, sizeof *out);
  out->struct_size = sizeof *out;
  feri_chat_template_info(c->t, &out->caps, &out->tool_format);
  return FER_STATUS_OK;
}
