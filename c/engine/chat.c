/* chat.c: see chat.h. */
#include "engine/chat.h"

#include <string.h>

#include "core/status.h"

static const char START[] = "<|im_start|>", END[] = "<|im_end|>";
static const char G_START[] = "<start_of_turn>", G_END[] = "<end_of_turn>";

fer_status feri_chat_format_parse(const char *tmpl, size_t len, feri_chat_format *out) {
  memset(out, 0, sizeof *out);
  if (tmpl == NULL) return feri_fail(FER_STATUS_UNSUPPORTED, "chat: the model has no tokenizer.chat_template");
  const char *end = tmpl + len;
  if (memmem(tmpl, len, G_START, sizeof G_START - 1) && memmem(tmpl, len, G_END, sizeof G_END - 1)) {
    out->kind = FERI_CHAT_GEMMA;
    return FER_STATUS_OK;
  }
  if (!memmem(tmpl, len, START, sizeof START - 1) || !memmem(tmpl, len, END, sizeof END - 1))
    return feri_fail(FER_STATUS_UNSUPPORTED, "chat: the template is neither ChatML nor Gemma's (it starts '%.*s'); "
                     "only those are rendered", (int)(len < 60 ? len : 60), tmpl);
  out->chatml = true;
  out->kind = FERI_CHAT_CHATML;
  /* a default system message: "<|im_start|>system" and a newline (a real one, or the two
   * characters of a "\n" escape inside a template string literal), then literal text (no quote or
   * brace: not an expression) up to "<|im_end|>" */
  static const char ROLE[] = "<|im_start|>system";
  for (const char *p = tmpl; (p = memmem(p, (size_t)(end - p), ROLE, sizeof ROLE - 1)) != NULL; p++) {
    const char *text = p + sizeof ROLE - 1;
    if (text < end && *text == '\n') text += 1;
    else if (end - text >= 2 && text[0] == '\\' && text[1] == 'n') text += 2;
    else continue;
    const char *stop = memmem(text, (size_t)(end - text), END, sizeof END - 1);
    if (!stop) break;
    const size_t n = (size_t)(stop - text);
    if (n == 0 || n >= sizeof out->default_system || memchr(text, '\'', n) || memchr(text, '"', n) ||
        memchr(text, '{', n) || memchr(text, '}', n))
      continue;
    size_t w = 0;
    for (size_t i = 0; i < n; i++) { /* "\n" escapes become newlines */
      if (text[i] == '\\' && i + 1 < n && text[i + 1] == 'n') {
        out->default_system[w++] = '\n';
        i++;
      } else {
        out->default_system[w++] = text[i];
      }
    }
    out->default_system[w] = '\0';
    break;
  }
  return FER_STATUS_OK;
}

fer_status feri_chat_format_for(const char *tmpl, size_t len, const char *arch, size_t arch_len, feri_chat_format *out) {
  if (tmpl == NULL && arch != NULL && arch_len == 6 && memcmp(arch, "gemma3", 6) == 0) {
    memset(out, 0, sizeof *out);
    out->kind = FERI_CHAT_GEMMA;
    return FER_STATUS_OK;
  }
  return feri_chat_format_parse(tmpl, len, out);
}

typedef struct sink {
  char *out;
  size_t cap, len;
} sink;

static void put(sink *s, const char *p, size_t n) {
  if (s->len + n < s->cap) memcpy(s->out + s->len, p, n);
  s->len += n;
}

static void put_turn(sink *s, const char *role, const char *content) {
  put(s, START, sizeof START - 1);
  put(s, role, strlen(role));
  put(s, "\n", 1);
  put(s, content, strlen(content));
  put(s, END, sizeof END - 1);
  put(s, "\n", 1);
}

/* ASCII whitespace (what llama.cpp's trim removes) */
static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

static void put_trimmed(sink *s, const char *p) {
  size_t n = strlen(p);
  while (n > 0 && is_space(*p)) p++, n--;
  while (n > 0 && is_space(p[n - 1])) n--;
  put(s, p, n);
}

/* Whether the system messages in [from, to) are all whitespace (llama.cpp then writes no prefix). */
static int blank_from(const fer_chat_message *m, size_t from, size_t to) {
  for (size_t j = from; j < to; j++)
    for (const char *p = m[j].content; strcmp(m[j].role, "system") == 0 && *p; p++)
      if (!is_space(*p)) return 0;
  return 1;
}

/* Gemma's turns, as llama.cpp renders its "gemma" format. */
static void put_gemma(sink *s, const fer_chat_message *m, size_t n, uint32_t flags) {
  size_t sys_from = n, sys_to = n; /* the system messages waiting for the next non-model turn */
  for (size_t i = 0; i < n; i++) {
    if (strcmp(m[i].role, "system") == 0) {
      if (sys_from == n) sys_from = i;
      sys_to = i + 1;
      continue;
    }
    const char *role = strcmp(m[i].role, "assistant") == 0 ? "model" : m[i].role;
    put(s, G_START, sizeof G_START - 1);
    put(s, role, strlen(role));
    put(s, "\n", 1);
    if (sys_from != n && strcmp(role, "model") != 0 && !blank_from(m, sys_from, sys_to)) {
      for (size_t j = sys_from; j < sys_to; j++)
        if (strcmp(m[j].role, "system") == 0) put_trimmed(s, m[j].content);
      put(s, "\n\n", 2);
      sys_from = sys_to = n;
    }
    put_trimmed(s, m[i].content);
    put(s, G_END, sizeof G_END - 1);
    put(s, "\n", 1);
  }
  if (flags & FER_CHAT_ADD_GENERATION_PROMPT) put(s, "<start_of_turn>model\n", 21);
}

fer_status feri_chat_render(const feri_chat_format *f, const fer_chat_message *m, size_t n, uint32_t flags, char *out,
                            size_t cap, size_t *out_len) {
  static const char *const fn = "fer_engine_chat_render";
  if (flags & ~(uint32_t)FER_CHAT_ADD_GENERATION_PROMPT)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: unknown flags 0x%x", fn, flags);
  for (size_t i = 0; i < n; i++)
    if (m[i].role == NULL || m[i].content == NULL)
      return feri_fail(FER_STATUS_NULL_ARG, "%s: message %zu has a NULL role or content", fn, i);
  /* measured first (nothing written), then written when it fits: a short buffer is left as it was */
  for (int pass = 0; pass < 2; pass++) {
    sink s = {pass ? out : NULL, pass ? cap : 0, 0};
    if (f->kind == FERI_CHAT_GEMMA) {
      put_gemma(&s, m, n, flags);
      goto rendered;
    }
    if (f->default_system[0] && (n == 0 || strcmp(m[0].role, "system") != 0)) put_turn(&s, "system", f->default_system);
    for (size_t i = 0; i < n; i++) put_turn(&s, m[i].role, m[i].content);
    if (flags & FER_CHAT_ADD_GENERATION_PROMPT) {
      put(&s, START, sizeof START - 1);
      put(&s, "assistant\n", 10);
    }
  rendered:
    *out_len = s.len;
    if (s.len >= cap) return feri_fail(FER_STATUS_BUFFER_TOO_SMALL, "%s: %zu bytes needed, %zu given", fn, s.len + 1, cap);
    if (pass) out[s.len] = '\0';
  }
  return FER_STATUS_OK;
}
