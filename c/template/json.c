/* json.c: the JSON reader of the render context and the json.dumps of the tojson filter. */
#include "template/json.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_DEPTH = 512 };

typedef struct reader {
  feri_tmpl_rt *rt;
  const char *p, *start, *end;
} reader;

static _Noreturn void bad(reader *r, const char *what) {
  feri_tmpl_throw(r->rt, FER_STATUS_BAD_FORMAT, "context JSON, byte %zu: %s", (size_t)(r->p - r->start), what);
}

static void skip_ws(reader *r) {
  while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r')) r->p++;
}

static void put_utf8(feri_tmpl_rt *rt, feri_tmpl_buf *b, uint32_t cp) {
  char u[4];
  size_t n;
  if (cp < 0x80) u[0] = (char)cp, n = 1;
  else if (cp < 0x800) u[0] = (char)(0xC0 | cp >> 6), u[1] = (char)(0x80 | (cp & 63)), n = 2;
  else if (cp < 0x10000)
    u[0] = (char)(0xE0 | cp >> 12), u[1] = (char)(0x80 | ((cp >> 6) & 63)), u[2] = (char)(0x80 | (cp & 63)), n = 3;
  else
    u[0] = (char)(0xF0 | cp >> 18), u[1] = (char)(0x80 | ((cp >> 12) & 63)), u[2] = (char)(0x80 | ((cp >> 6) & 63)),
    u[3] = (char)(0x80 | (cp & 63)), n = 4;
  feri_tmpl_buf_put(rt, b, u, n);
}

static uint32_t hex4(reader *r) {
  if (r->end - r->p < 4) bad(r, "a truncated \\u escape");
  uint32_t v = 0;
  for (int k = 0; k < 4; k++) {
    const char c = *r->p++;
    v = v * 16 + (uint32_t)(c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : 99);
    if (v > 0xFFFF) bad(r, "a bad \\u escape");
  }
  return v;
}

static feri_tmpl_value read_string(reader *r) {
  feri_tmpl_buf b = {0};
  feri_tmpl_buf_put(r->rt, &b, "", 0);
  r->p++;
  for (;;) {
    if (r->p >= r->end) bad(r, "an unterminated string");
    const unsigned char c = (unsigned char)*r->p;
    if (c == '"') break;
    if (c < 0x20) bad(r, "a control character in a string");
    if (c != '\\') {
      const char *s = r->p;
      while (r->p < r->end && *r->p != '"' && *r->p != '\\' && (unsigned char)*r->p >= 0x20) r->p++;
      feri_tmpl_buf_put(r->rt, &b, s, (size_t)(r->p - s));
      continue;
    }
    if (++r->p >= r->end) bad(r, "an unterminated string");
    const char e = *r->p++;
    static const char ESCAPES[] = "\"\\/bfnrt", VALUES[] = "\"\\/\b\f\n\r\t";
    const char *simple = e ? strchr(ESCAPES, e) : NULL;
    if (simple) {
      const char out = VALUES[simple - ESCAPES];
      feri_tmpl_buf_put(r->rt, &b, &out, 1);
    } else if (e == 'u') {
      uint32_t cp = hex4(r);
      if (cp >= 0xD800 && cp < 0xDC00 && r->end - r->p >= 6 && r->p[0] == '\\' && r->p[1] == 'u') {
        const char *save = r->p;
        r->p += 2;
        const uint32_t lo = hex4(r);
        if (lo >= 0xDC00 && lo < 0xE000) cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        else r->p = save;
      }
      put_utf8(r->rt, &b, cp);
    } else {
      bad(r, "a bad escape");
    }
  }
  r->p++;
  return feri_tmpl_buf_value(&b);
}

static feri_tmpl_value read_number(reader *r) {
  const char *s = r->p;
  bool is_float = false;
  if (r->p < r->end && *r->p == '-') r->p++;
  if (r->p >= r->end || *r->p < '0' || *r->p > '9') bad(r, "a malformed number");
  if (*r->p == '0') r->p++;
  else
    while (r->p < r->end && *r->p >= '0' && *r->p <= '9') r->p++;
  if (r->p < r->end && *r->p == '.') {
    is_float = true;
    r->p++;
    if (r->p >= r->end || *r->p < '0' || *r->p > '9') bad(r, "a malformed number");
    while (r->p < r->end && *r->p >= '0' && *r->p <= '9') r->p++;
  }
  if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
    is_float = true;
    r->p++;
    if (r->p < r->end && (*r->p == '+' || *r->p == '-')) r->p++;
    if (r->p >= r->end || *r->p < '0' || *r->p > '9') bad(r, "a malformed number");
    while (r->p < r->end && *r->p >= '0' && *r->p <= '9') r->p++;
  }
  char tmp[64];
  const size_t n = (size_t)(r->p - s);
  if (n >= sizeof tmp) bad(r, "a number too long");
  memcpy(tmp, s, n);
  tmp[n] = 0;
  if (!is_float) {
    errno = 0;
    const long long v = strtoll(tmp, NULL, 10);
    if (errno == 0) return feri_tmpl_int(v); /* beyond 64 bits: a float, where Python keeps an int */
  }
  return feri_tmpl_float(strtod(tmp, NULL));
}

static bool word(reader *r, const char *w) {
  const size_t n = strlen(w);
  if ((size_t)(r->end - r->p) < n || memcmp(r->p, w, n) != 0) return false;
  r->p += n;
  return true;
}

static feri_tmpl_value read_value(reader *r, int depth) {
  if (depth > MAX_DEPTH) bad(r, "nested too deeply");
  skip_ws(r);
  if (r->p >= r->end) bad(r, "a value expected");
  const char c = *r->p;
  if (c == '"') return read_string(r);
  if (c == '{') {
    feri_tmpl_value d = feri_tmpl_dict_new(r->rt, FERI_TMPL_DICT);
    r->p++;
    skip_ws(r);
    if (r->p < r->end && *r->p == '}') {
      r->p++;
      return d;
    }
    for (;;) {
      skip_ws(r);
      if (r->p >= r->end || *r->p != '"') bad(r, "a key string expected");
      const feri_tmpl_value k = read_string(r);
      skip_ws(r);
      if (r->p >= r->end || *r->p != ':') bad(r, "':' expected");
      r->p++;
      const feri_tmpl_value v = read_value(r, depth + 1);
      feri_tmpl_dict_set(r->rt, d.u.dict, k, v);
      skip_ws(r);
      if (r->p < r->end && *r->p == ',') {
        r->p++;
        continue;
      }
      if (r->p < r->end && *r->p == '}') {
        r->p++;
        return d;
      }
      bad(r, "',' or '}' expected");
    }
  }
  if (c == '[') {
    feri_tmpl_value l = feri_tmpl_list_new(r->rt, 0);
    r->p++;
    skip_ws(r);
    if (r->p < r->end && *r->p == ']') {
      r->p++;
      return l;
    }
    for (;;) {
      feri_tmpl_list_push(r->rt, l.u.list, read_value(r, depth + 1));
      skip_ws(r);
      if (r->p < r->end && *r->p == ',') {
        r->p++;
        continue;
      }
      if (r->p < r->end && *r->p == ']') {
        r->p++;
        return l;
      }
      bad(r, "',' or ']' expected");
    }
  }
  if (word(r, "true")) return feri_tmpl_bool(true);
  if (word(r, "false")) return feri_tmpl_bool(false);
  if (word(r, "null")) return feri_tmpl_none();
  return read_number(r);
}

feri_tmpl_value feri_tmpl_json_parse(feri_tmpl_rt *rt, const char *text, size_t len) {
  reader r = {rt, text, text, text + len};
  const feri_tmpl_value v = read_value(&r, 0);
  skip_ws(&r);
  if (r.p != r.end) bad(&r, "extra data after the value");
  return v;
}

/* ---- writing -------------------------------------------------------------------------------- */

static void write_string(feri_tmpl_rt *rt, feri_tmpl_buf *b, const char *s, size_t n, bool ascii) {
  feri_tmpl_buf_put(rt, b, "\"", 1);
  for (size_t i = 0; i < n;) {
    const unsigned char c = (unsigned char)s[i];
    const char *esc = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t"
                    : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
    if (esc) {
      feri_tmpl_buf_puts(rt, b, esc);
      i++;
    } else if (c < 0x20) {
      feri_tmpl_buf_printf(rt, b, "\\u%04x", c);
      i++;
    } else if (c >= 0x80 && ascii) {
      const int len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
      uint32_t cp = len == 1 ? c : c & (0x3Fu >> (len - 1));
      int k = 1;
      for (; k < len && i + (size_t)k < n && ((unsigned char)s[i + k] & 0xC0) == 0x80; k++) cp = cp << 6 | ((unsigned char)s[i + k] & 63);
      if (k < len) cp = 0xFFFD;
      if (cp >= 0x10000) {
        cp -= 0x10000;
        feri_tmpl_buf_printf(rt, b, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
      } else {
        feri_tmpl_buf_printf(rt, b, "\\u%04x", cp);
      }
      i += (size_t)k;
    } else {
      size_t j = i;
      while (j < n && (unsigned char)s[j] >= 0x20 && s[j] != '"' && s[j] != '\\' && !((unsigned char)s[j] >= 0x80 && ascii)) j++;
      feri_tmpl_buf_put(rt, b, s + i, j - i);
      i = j;
    }
  }
  feri_tmpl_buf_put(rt, b, "\"", 1);
}

static void newline(feri_tmpl_rt *rt, feri_tmpl_buf *b, const feri_tmpl_json_style *st, int level) {
  feri_tmpl_buf_put(rt, b, "\n", 1);
  for (int k = 0; k < level * st->indent; k++) feri_tmpl_buf_put(rt, b, " ", 1);
}

static int key_order(const void *x, const void *y) {
  const feri_tmpl_value *a = *(const feri_tmpl_value *const *)x, *c = *(const feri_tmpl_value *const *)y;
  const size_t n = a->u.s.n < c->u.s.n ? a->u.s.n : c->u.s.n;
  const int r = n ? memcmp(a->u.s.p, c->u.s.p, n) : 0;
  return r ? r : (a->u.s.n > c->u.s.n) - (a->u.s.n < c->u.s.n);
}

static void write_key(feri_tmpl_rt *rt, feri_tmpl_buf *b, feri_tmpl_value k, const feri_tmpl_json_style *st) {
  char num[32];
  switch (k.kind) {
  case FERI_TMPL_STR: write_string(rt, b, k.u.s.p, k.u.s.n, st->ensure_ascii); return;
  case FERI_TMPL_INT: feri_tmpl_buf_printf(rt, b, "\"%lld\"", (long long)k.u.i); return;
  case FERI_TMPL_BOOL: feri_tmpl_buf_puts(rt, b, k.u.b ? "\"true\"" : "\"false\""); return;
  case FERI_TMPL_NONE: feri_tmpl_buf_puts(rt, b, "\"null\""); return;
  case FERI_TMPL_FLOAT:
    feri_tmpl_float_repr(k.u.f, num);
    feri_tmpl_buf_printf(rt, b, "\"%s\"", num);
    return;
  default:
    feri_tmpl_throw(rt, FER_STATUS_BAD_FORMAT, "keys must be str, int, float, bool or None, not %s", feri_tmpl_type_name(k));
  }
}

static void write_json(feri_tmpl_rt *rt, feri_tmpl_buf *b, feri_tmpl_value v, const feri_tmpl_json_style *st, int level) {
  if (level > MAX_DEPTH) feri_tmpl_throw(rt, FER_STATUS_BAD_FORMAT, "maximum recursion depth exceeded while encoding a JSON object");
  const char *item_sep = st->item_sep ? st->item_sep : st->indent >= 0 ? "," : ", ";
  const char *key_sep = st->key_sep ? st->key_sep : ": ";
  char num[32];
  switch (v.kind) {
  case FERI_TMPL_NONE: feri_tmpl_buf_puts(rt, b, "null"); return;
  case FERI_TMPL_BOOL: feri_tmpl_buf_puts(rt, b, v.u.b ? "true" : "false"); return;
  case FERI_TMPL_INT: feri_tmpl_buf_printf(rt, b, "%lld", (long long)v.u.i); return;
  case FERI_TMPL_FLOAT:
    if (isnan(v.u.f)) strcpy(num, "NaN");
    else if (isinf(v.u.f)) strcpy(num, v.u.f < 0 ? "-Infinity" : "Infinity");
    else feri_tmpl_float_repr(v.u.f, num);
    feri_tmpl_buf_puts(rt, b, num);
    return;
  case FERI_TMPL_STR: write_string(rt, b, v.u.s.p, v.u.s.n, st->ensure_ascii); return;
  case FERI_TMPL_LIST: {
    const feri_tmpl_list *l = v.u.list;
    if (l->view) feri_tmpl_throw(rt, FER_STATUS_BAD_FORMAT, "Object of type %s is not JSON serializable", l->view);
    if (l->n == 0) {
      feri_tmpl_buf_puts(rt, b, "[]");
      return;
    }
    feri_tmpl_buf_puts(rt, b, "[");
    for (size_t i = 0; i < l->n; i++) {
      if (i) feri_tmpl_buf_puts(rt, b, item_sep);
      if (st->indent >= 0) newline(rt, b, st, level + 1);
      write_json(rt, b, l->items[i], st, level + 1);
    }
    if (st->indent >= 0) newline(rt, b, st, level);
    feri_tmpl_buf_puts(rt, b, "]");
    return;
  }
  case FERI_TMPL_DICT: {
    const feri_tmpl_dict *d = v.u.dict;
    if (d->n == 0) {
      feri_tmpl_buf_puts(rt, b, "{}");
      return;
    }
    const feri_tmpl_value **order = feri_tmpl_alloc(rt, d->n * sizeof *order);
    for (size_t i = 0; i < d->n; i++) order[i] = &d->keys[i];
    if (st->sort_keys) {
      for (size_t i = 0; i < d->n; i++)
        if (d->keys[i].kind != FERI_TMPL_STR)
          feri_tmpl_throw(rt, FER_STATUS_BAD_FORMAT, "'<' not supported between instances of '%s' and 'str'", feri_tmpl_type_name(d->keys[i]));
      qsort(order, d->n, sizeof *order, key_order);
    }
    feri_tmpl_buf_puts(rt, b, "{");
    for (size_t i = 0; i < d->n; i++) {
      if (i) feri_tmpl_buf_puts(rt, b, item_sep);
      if (st->indent >= 0) newline(rt, b, st, level + 1);
      write_key(rt, b, *order[i], st);
      feri_tmpl_buf_puts(rt, b, key_sep);
      write_json(rt, b, d->vals[order[i] - d->keys], st, level + 1);
    }
    if (st->indent >= 0) newline(rt, b, st, level);
    feri_tmpl_buf_puts(rt, b, "}");
    return;
  }
  default: {
    const char *name = v.kind == FERI_TMPL_UNDEF ? "Undefined" : v.kind == FERI_TMPL_NS ? "Namespace" : "Macro";
    feri_tmpl_throw(rt, FER_STATUS_BAD_FORMAT, "Object of type %s is not JSON serializable", name);
  }
  }
}

void feri_tmpl_json_write(feri_tmpl_rt *rt, feri_tmpl_buf *b, feri_tmpl_value v, const feri_tmpl_json_style *style) {
  write_json(rt, b, v, style, 0);
}
