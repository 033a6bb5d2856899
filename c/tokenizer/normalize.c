/* normalize.c: normalizers of tokenizer.json. Unicode forms come from utf8proc; the quick test in
 * feri_normal_form_is_stable skips it for text whose code points no normalization changes. */
#include "tokenizer/normalize.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/status.h"
#include "tokenizer/utf8.h"

bool feri_normal_form_is_stable(const uint8_t *s, size_t n, bool nfkc) {
  for (size_t i = 0; i < n;) {
    if (s[i] < 0x80) {
      i++;
      continue;
    }
    uint32_t cp;
    size_t k = feri_utf8_decode(s + i, n - i, &cp);
    if (k == 0) return false;
    i += k;
    if (nfkc) return false; /* NFKC changes much of Latin-1 already (U+00A0, U+00B2, ...) */
    /* Below U+0300 every character is its own NFC and none combines with what precedes it.
     * Kana and CJK ideographs (without the combining voice marks U+3099/309A and the
     * compatibility ideographs from U+F900) and precomposed Hangul syllables are stable too. */
    if (cp < 0x300) continue;
    if (cp >= 0x3040 && cp < 0xA000 && cp != 0x3099 && cp != 0x309A) continue;
    if (cp >= 0xAC00 && cp <= 0xD7A3) continue;
    return false;
  }
  return true;
}

static fer_status unicode_form(const uint8_t *s, size_t n, int kind, feri_buf *out) {
  utf8proc_option_t opt = UTF8PROC_STABLE;
  switch (kind) {
    case FERI_NORM_NFC: opt |= UTF8PROC_COMPOSE; break;
    case FERI_NORM_NFD: opt |= UTF8PROC_DECOMPOSE; break;
    case FERI_NORM_NFKC: opt |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    default: opt |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  if (n > (size_t)PTRDIFF_MAX / 8) return feri_fail(FER_STATUS_SIZE_OVERFLOW, "text of %zu bytes", n);
  utf8proc_uint8_t *dst = NULL;
  utf8proc_ssize_t r = utf8proc_map(s, (utf8proc_ssize_t)n, &dst, opt);
  if (r < 0) {
    free(dst);
    return feri_fail(r == UTF8PROC_ERROR_NOMEM ? FER_STATUS_OUT_OF_MEMORY : FER_STATUS_INVALID_UTF8,
                     "normalization: %s", utf8proc_errmsg(r));
  }
  bool ok = feri_buf_reserve(out, (size_t)r);
  if (ok) memcpy(out->p, dst, (size_t)r);
  out->len = (size_t)r;
  free(dst);
  return ok ? FER_STATUS_OK : feri_fail(FER_STATUS_OUT_OF_MEMORY, "normalized text");
}

/* Per character full lowercase as Rust's char::to_lowercase: the simple mapping, except U+0130
 * which lowercases to two characters. */
static fer_status lowercase(const uint8_t *s, size_t n, feri_buf *out) {
  if (!feri_buf_reserve(out, n * 3 / 2 + 8)) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "lowercase");
  size_t w = 0;
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    size_t k = feri_utf8_decode(s + i, n - i, &cp);
    if (k == 0) return feri_fail(FER_STATUS_INVALID_UTF8, "lowercase at byte %zu", i);
    i += k;
    if (!feri_buf_reserve(out, w + 8)) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "lowercase");
    if (cp == 0x130) {
      w += feri_utf8_encode('i', out->p + w);
      w += feri_utf8_encode(0x307, out->p + w);
      continue;
    }
    w += feri_utf8_encode((uint32_t)utf8proc_tolower((utf8proc_int32_t)cp), out->p + w);
  }
  out->len = w;
  return FER_STATUS_OK;
}

static fer_status replace(const uint8_t *s, size_t n, const feri_normalizer *nm, feri_buf *out) {
  out->len = 0;
  if (!feri_buf_append_replaced(out, s, n, nm->a, nm->a_len, nm->b, nm->b_len)) {
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "replace");
  }
  return FER_STATUS_OK;
}

fer_status feri_normalize(const fer_tokenizer *t, feri_encode_ctx *ctx, const uint8_t *s, size_t n,
                          const uint8_t **out, size_t *out_len) {
  const uint8_t *cur = s;
  size_t len = n;
  int which = 0;
  for (uint32_t i = 0; i < t->n_norms; i++) {
    const feri_normalizer *nm = &t->norms[i];
    feri_buf *dst = &ctx->norm[which];
    fer_status st = FER_STATUS_OK;
    switch (nm->kind) {
      case FERI_NORM_NFC:
      case FERI_NORM_NFKC:
        if (feri_normal_form_is_stable(cur, len, nm->kind == FERI_NORM_NFKC)) continue;
        st = unicode_form(cur, len, nm->kind, dst);
        break;
      case FERI_NORM_NFD:
      case FERI_NORM_NFKD: st = unicode_form(cur, len, nm->kind, dst); break;
      case FERI_NORM_LOWERCASE: st = lowercase(cur, len, dst); break;
      case FERI_NORM_REPLACE: st = replace(cur, len, nm, dst); break;
      case FERI_NORM_PREPEND:
        if (len == 0) continue;
        if (!feri_buf_reserve(dst, len + nm->a_len)) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "prepend");
        memcpy(dst->p, nm->a, nm->a_len);
        memcpy(dst->p + nm->a_len, cur, len);
        dst->len = len + nm->a_len;
        break;
      default: return feri_fail(FER_STATUS_MISUSE, "normalizer kind %d", nm->kind);
    }
    if (st != FER_STATUS_OK) return st;
    cur = dst->p;
    len = dst->len;
    which ^= 1;
  }
  *out = cur;
  *out_len = len;
  return FER_STATUS_OK;
}
