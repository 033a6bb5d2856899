/* chat_gguf.c: see chat_gguf.h. */
#include "chat/chat_gguf.h"

#include <stdio.h>

#include "core/status.h"

void feri_chat_special_text(const feri_gguf *g, const char *key, char *out, size_t cap) {
  out[0] = '\0';
  uint32_t id;
  const char *s;
  size_t n;
  const int64_t kv = feri_gguf_find_kv(g, "tokenizer.ggml.tokens");
  if (kv < 0 || feri_gguf_get_u32(g, key, &id) != FER_STATUS_OK || feri_gguf_arr_str(g, kv, id, &s, &n) != FER_STATUS_OK) return;
  snprintf(out, cap, "%.*s", n < cap ? (int)n : (int)cap - 1, s);
}

fer_status feri_chat_template_from_gguf(const feri_gguf *g, const char *source, size_t source_len, int64_t now_unix,
                                        fer_chat_template **out) {
  *out = NULL;
  char bos[256], eos[256];
  feri_chat_special_text(g, "tokenizer.ggml.bos_token_id", bos, sizeof bos);
  feri_chat_special_text(g, "tokenizer.ggml.eos_token_id", eos, sizeof eos);
  fer_chat_template_options o;
  fer_chat_template_options_init(&o);
  o.bos_token = bos, o.eos_token = eos, o.now_unix = now_unix;
  if (!source) {
    if (feri_gguf_get_str(g, "tokenizer.chat_template", &source, &source_len) != FER_STATUS_OK)
      return feri_fail(FER_STATUS_UNSUPPORTED, "the model file has no chat template (no tokenizer.chat_template: a base "
                       "model?); give one with --chat-template FILE.jinja (fer_engine_config.chat_template_path)");
    const char *tool;
    size_t tool_n;
    if (feri_gguf_get_str(g, "tokenizer.chat_template.tool_use", &tool, &tool_n) == FER_STATUS_OK)
      o.tool_use_source = tool, o.tool_use_source_bytes = tool_n;
  }
  feri_error_clear();
  return fer_chat_template_create(source, source_len, &o, out);
}
