/* builtins.c: Jinja2's filters and tests, the Python str/dict/list methods a sandboxed template may
 * call, and transformers' globals. Case mapping is ASCII only (Python maps all of Unicode). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "template/eval.h"
#include "template/json.h"

enum { MAX_RANGE = 100000 }; /* jinja2.sandbox.MAX_RANGE */

/* Jinja2's builtin filters and tests: a name outside these is an error (at parse time outside
 * if blocks, see template.c); a name inside them that this file does not implement fails when
 * called. */
static const char *const JINJA_FILTERS[] = {
    "abs", "attr", "batch", "capitalize", "center", "count", "d", "default", "dictsort", "e", "escape", "filesizeformat",
    "first", "float", "forceescape", "format", "groupby", "indent", "int", "items", "join", "last", "length", "list",
    "lower", "map", "max", "min", "pprint", "random", "reject", "rejectattr", "replace", "reverse", "round", "safe",
    "select", "selectattr", "slice", "sort", "string", "striptags", "sum", "title", "tojson", "trim", "truncate",
    "unique", "upper", "urlencode", "urlize", "wordcount", "wordwrap", "xmlattr", NULL};
static const char *const JINJA_TESTS[] = {
    "!=", "<", "<=", "==", ">", ">=", "boolean", "callable", "defined", "divisibleby", "eq", "equalto", "escaped",
    "even", "false", "filter", "float", "ge", "greaterthan", "gt", "in", "integer", "iterable", "le", "lessthan",
    "lower", "lt", "mapping", "ne", "none", "number", "odd", "sameas", "sequence", "string", "test", "true",
    "undefined", "upper", NULL};

static bool listed(const char *const *names, const char *name) {
  for (; *names; names++)
    if (!strcmp(*names, name)) return true;
  return false;
}

bool feri_tmpl_is_filter(const char *name) { return listed(JINJA_FILTERS, name); }
bool feri_tmpl_is_test(const char *name) { return listed(JINJA_TESTS, name); }

/* ---- arguments ------------------------------------------------------------------------------ */

/* The argument at position i or named name; NULL when not given. */
static const feri_tmpl_value *arg(const feri_tmpl_args *a, size_t i, const char *name) {
  if (i < a->n) return &a->pos[i];
  for (size_t k = 0; k < a->nkw; k++)
    if (name && !strcmp(a->names[k], name)) return &a->kw[k];
  return NULL;
}

static bool arg_bool(const feri_tmpl_args *a, size_t i, const char *name, bool dflt) {
  const feri_tmpl_value *v = arg(a, i, name);
  return v ? feri_tmpl_truthy(*v) : dflt;
}

static int64_t arg_int(feri_tmpl_eval *ev, const feri_tmpl_args *a, size_t i, const char *name, int64_t dflt) {
  const feri_tmpl_value *v = arg(a, i, name);
  if (!v || v->kind == FERI_TMPL_NONE) return dflt;
  if (v->kind == FERI_TMPL_INT) return v->u.i;
  if (v->kind == FERI_TMPL_BOOL) return v->u.b;
  feri_tmpl_error(ev, "'%s' object cannot be interpreted as an integer", feri_tmpl_type_name(*v));
}

static feri_tmpl_value arg_str(feri_tmpl_eval *ev, const feri_tmpl_args *a, size_t i, const char *name, const char *what) {
  const feri_tmpl_value *v = arg(a, i, name);
  if (!v) feri_tmpl_error(ev, "%s() missing required argument: '%s'", what, name ? name : "arg");
  if (v->kind == FERI_TMPL_UNDEF) feri_tmpl_use_undef(ev, *v);
  if (v->kind != FERI_TMPL_STR) feri_tmpl_error(ev, "%s() argument must be str, not %s", what, feri_tmpl_type_name(*v));
  return *v;
}

static feri_tmpl_value text_of(feri_tmpl_eval *ev, feri_tmpl_value v) { return feri_tmpl_to_str(ev->rt, v); }

/* Markup's str methods give Markup back. */
static feri_tmpl_value like(feri_tmpl_value model, feri_tmpl_value v) {
  v.markup = model.kind == FERI_TMPL_STR && model.markup;
  return v;
}

static feri_tmpl_value need_str(feri_tmpl_eval *ev, feri_tmpl_value v, const char *what) {
  if (v.kind == FERI_TMPL_UNDEF) feri_tmpl_use_undef(ev, v);
  if (v.kind != FERI_TMPL_STR) feri_tmpl_error(ev, "%s requires a str, not '%s'", what, feri_tmpl_type_name(v));
  return v;
}

/* ---- strings -------------------------------------------------------------------------------- */

static bool is_ws(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

/* Python's str.isspace code points: the byte length of the one starting at s[i], 0 if none. */
static size_t ws_at(const char *s, size_t n, size_t i) {
  const unsigned char c = (unsigned char)s[i];
  if (c < 0x80) return is_ws(c) ? 1 : 0;
  if (c == 0xC2 && i + 1 < n) return ((unsigned char)s[i + 1] == 0x85 || (unsigned char)s[i + 1] == 0xA0) ? 2 : 0;
  if (i + 2 >= n) return 0;
  const unsigned cp = (c & 0x0Fu) << 12 | ((unsigned char)s[i + 1] & 0x3Fu) << 6 | ((unsigned char)s[i + 2] & 0x3Fu);
  if ((c & 0xF0) != 0xE0) return 0;
  return cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000 ? 3 : 0;
}

/* The same, for the code point ending just before s[end]. */
static size_t ws_before(const char *s, size_t start, size_t end) {
  size_t k = 1;
  while (end - k > start && ((unsigned char)s[end - k] & 0xC0) == 0x80 && k < 4) k++;
  return ws_at(s, end, end - k) == k ? k : 0;
}
static bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static size_t cp_len(const char *s, size_t n, size_t i) {
  size_t j = i + 1;
  while (j < n && ((unsigned char)s[j] & 0xC0) == 0x80) j++;
  return j - i;
}

/* Case mapping of Latin-1, Latin Extended-A, Greek and Cyrillic (Python maps all of Unicode). */
static uint32_t to_lower(uint32_t c) {
  if ((c >= 'A' && c <= 'Z') || (c >= 0xC0 && c <= 0xDE && c != 0xD7) || (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) ||
      (c >= 0x410 && c <= 0x42F))
    return c + 0x20;
  if (c >= 0x400 && c <= 0x40F) return c + 0x50;
  if (c == 0x178) return 0xFF;
  if ((c >= 0x100 && c <= 0x12F && c % 2 == 0) || (c >= 0x132 && c <= 0x137 && c % 2 == 0) || (c >= 0x139 && c <= 0x148 && c % 2 == 1) ||
      (c >= 0x14A && c <= 0x177 && c % 2 == 0) || (c >= 0x179 && c <= 0x17E && c % 2 == 1))
    return c + 1;
  return c;
}

static uint32_t to_upper(uint32_t c) {
  if ((c >= 'a' && c <= 'z') || (c >= 0xE0 && c <= 0xFE && c != 0xF7) || (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) ||
      (c >= 0x430 && c <= 0x44F))
    return c - 0x20;
  if (c >= 0x450 && c <= 0x45F) return c - 0x50;
  if (c == 0xFF) return 0x178;
  if (c == 0x3C2) return 0x3A3;
  if ((c >= 0x101 && c <= 0x12F && c % 2 == 1) || (c >= 0x133 && c <= 0x137 && c % 2 == 1) || (c >= 0x13A && c <= 0x148 && c % 2 == 0) ||
      (c >= 0x14B && c <= 0x177 && c % 2 == 1) || (c >= 0x17A && c <= 0x17E && c % 2 == 0))
    return c - 1;
  return c;
}

static bool is_cased(uint32_t c) { return to_lower(c) != c || to_upper(c) != c || c == 0xDF; }

/* The code point at s[*i] (a stray byte stands for itself), *i moved past it. */
static uint32_t next_cp(const char *s, size_t n, size_t *i) {
  const unsigned char c = (unsigned char)s[*i];
  const size_t k = cp_len(s, n, *i);
  uint32_t cp = c;
  if (k == 2 && (c & 0xE0) == 0xC0) cp = (c & 0x1Fu) << 6 | ((unsigned char)s[*i + 1] & 0x3Fu);
  else if (k > 1) {
    *i += k; /* outside the mapped ranges: copied as it is */
    return UINT32_MAX;
  }
  *i += k;
  return cp;
}

static void put_cp(feri_tmpl_rt *rt, feri_tmpl_buf *b, uint32_t cp) {
  char u[2];
  if (cp < 0x80) {
    u[0] = (char)cp;
    feri_tmpl_buf_put(rt, b, u, 1);
  } else {
    u[0] = (char)(0xC0 | cp >> 6), u[1] = (char)(0x80 | (cp & 63));
    feri_tmpl_buf_put(rt, b, u, 2);
  }
}

/* mode: 'u' upper, 'l' lower, 'c' str.capitalize, 't' str.title (words start after uncased
 * characters), 'T' Jinja2's title filter (words start after whitespace, -, (, {, [ or <). */
static feri_tmpl_value map_case(feri_tmpl_eval *ev, feri_tmpl_value s, char mode) {
  feri_tmpl_buf b = {0};
  feri_tmpl_buf_put(ev->rt, &b, "", 0);
  bool word_started = false;
  for (size_t i = 0; i < s.u.s.n;) {
    const size_t at = i;
    const uint32_t c = next_cp(s.u.s.p, s.u.s.n, &i);
    if (c == UINT32_MAX) { /* three- and four-byte code points: no case here */
      feri_tmpl_buf_put(ev->rt, &b, s.u.s.p + at, i - at);
      word_started = mode == 'T' && ws_at(s.u.s.p, s.u.s.n, at) == 0;
      continue;
    }
    uint32_t out = c;
    switch (mode) {
    case 'u': out = to_upper(c); break;
    case 'l': out = to_lower(c); break;
    case 'c': out = at == 0 ? to_upper(c) : to_lower(c); break;
    case 't':
      out = word_started ? to_lower(c) : to_upper(c);
      word_started = is_cased(c);
      break;
    default:
      out = word_started ? to_lower(c) : to_upper(c);
      word_started = !(is_ws((unsigned char)c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || c == 0x85 || c == 0xA0);
      break;
    }
    put_cp(ev->rt, &b, out);
  }
  return feri_tmpl_buf_value(&b);
}

/* Python's str.strip family: chars NULL strips whitespace. */
static feri_tmpl_value strip(feri_tmpl_value s, const feri_tmpl_value *chars, bool left, bool right) {
  const char *p = s.u.s.p;
  size_t a = 0, b = s.u.s.n;
  const bool ws = !chars || chars->kind == FERI_TMPL_NONE;
  if (left)
    while (a < b) {
      const size_t k = cp_len(p, b, a);
      if (ws ? ws_at(p, b, a) != k : !memmem(chars->u.s.p, chars->u.s.n, p + a, k)) break;
      a += k;
    }
  if (right)
    while (b > a) {
      size_t k = 1;
      while (b - k > a && ((unsigned char)p[b - k] & 0xC0) == 0x80) k++;
      if (ws ? ws_before(p, a, b) != k : !memmem(chars->u.s.p, chars->u.s.n, p + b - k, k)) break;
      b -= k;
    }
  return feri_tmpl_str(p + a, b - a);
}

static feri_tmpl_value split(feri_tmpl_eval *ev, feri_tmpl_value s, const feri_tmpl_value *sep, int64_t maxsplit, bool from_right) {
  feri_tmpl_value out = feri_tmpl_list_new(ev->rt, 0);
  const char *p = s.u.s.p;
  const size_t n = s.u.s.n;
  if (!sep || sep->kind == FERI_TMPL_NONE) {
    feri_tmpl_value parts = feri_tmpl_list_new(ev->rt, 0);
    if (!from_right) {
      size_t i = 0, w;
      for (;;) {
        while (i < n && (w = ws_at(p, n, i))) i += w;
        if (i >= n) break;
        if (maxsplit >= 0 && (int64_t)parts.u.list->n == maxsplit) { /* the rest as it is */
          feri_tmpl_list_push(ev->rt, parts.u.list, feri_tmpl_str(p + i, n - i));
          break;
        }
        const size_t st = i;
        while (i < n && !ws_at(p, n, i)) i++;
        feri_tmpl_list_push(ev->rt, parts.u.list, feri_tmpl_str(p + st, i - st));
      }
      return parts;
    }
    size_t i = n, w;
    for (;;) {
      while (i > 0 && (w = ws_before(p, 0, i))) i -= w;
      if (i == 0) break;
      if (maxsplit >= 0 && (int64_t)parts.u.list->n == maxsplit) {
        feri_tmpl_list_push(ev->rt, parts.u.list, feri_tmpl_str(p, i));
        break;
      }
      const size_t e = i;
      while (i > 0 && !ws_before(p, 0, i)) i--;
      feri_tmpl_list_push(ev->rt, parts.u.list, feri_tmpl_str(p + i, e - i));
    }
    for (size_t k = parts.u.list->n; k-- > 0;) feri_tmpl_list_push(ev->rt, out.u.list, parts.u.list->items[k]);
    return out;
  }
  if (sep->kind != FERI_TMPL_STR) feri_tmpl_error(ev, "must be str or None, not %s", feri_tmpl_type_name(*sep));
  const char *q = sep->u.s.p;
  const size_t m = sep->u.s.n;
  if (m == 0) feri_tmpl_error(ev, "empty separator");
  if (!from_right) {
    size_t i = 0;
    int64_t splits = 0;
    for (;;) {
      const char *hit = maxsplit >= 0 && splits >= maxsplit ? NULL : memmem(p + i, n - i, q, m);
      if (!hit) {
        feri_tmpl_list_push(ev->rt, out.u.list, feri_tmpl_str(p + i, n - i));
        return out;
      }
      feri_tmpl_list_push(ev->rt, out.u.list, feri_tmpl_str(p + i, (size_t)(hit - (p + i))));
      i = (size_t)(hit - p) + m;
      splits++;
    }
  }
  feri_tmpl_value parts = feri_tmpl_list_new(ev->rt, 0);
  size_t e = n;
  int64_t splits = 0;
  for (;;) {
    size_t hit = SIZE_MAX;
    if (!(maxsplit >= 0 && splits >= maxsplit))
      for (size_t k = e >= m ? e - m + 1 : 0; k-- > 0;)
        if (memcmp(p + k, q, m) == 0) {
          hit = k;
          break;
        }
    if (hit == SIZE_MAX) {
      feri_tmpl_list_push(ev->rt, parts.u.list, feri_tmpl_str(p, e));
      break;
    }
    feri_tmpl_list_push(ev->rt, parts.u.list, feri_tmpl_str(p + hit + m, e - hit - m));
    e = hit;
    splits++;
  }
  for (size_t k = parts.u.list->n; k-- > 0;) feri_tmpl_list_push(ev->rt, out.u.list, parts.u.list->items[k]);
  return out;
}

static feri_tmpl_value replace(feri_tmpl_eval *ev, feri_tmpl_value s, feri_tmpl_value old, feri_tmpl_value new, int64_t count) {
  feri_tmpl_buf b = {0};
  feri_tmpl_buf_put(ev->rt, &b, "", 0);
  const char *p = s.u.s.p;
  size_t i = 0;
  int64_t done = 0;
  if (old.u.s.n == 0) { /* Python inserts new before every code point and at the end */
    while (i <= s.u.s.n) {
      if (count < 0 || done < count) {
        feri_tmpl_buf_put(ev->rt, &b, new.u.s.p, new.u.s.n);
        done++;
      }
      if (i == s.u.s.n) break;
      const size_t k = cp_len(p, s.u.s.n, i);
      feri_tmpl_buf_put(ev->rt, &b, p + i, k);
      i += k;
      if (b.n > ev->max_output) feri_tmpl_throw(ev->rt, FER_STATUS_BUDGET_EXCEEDED, "a string exceeds %zu bytes", ev->max_output);
    }
    return feri_tmpl_buf_value(&b);
  }
  for (;;) {
    const char *hit = count >= 0 && done >= count ? NULL : memmem(p + i, s.u.s.n - i, old.u.s.p, old.u.s.n);
    if (!hit) break;
    feri_tmpl_buf_put(ev->rt, &b, p + i, (size_t)(hit - (p + i)));
    feri_tmpl_buf_put(ev->rt, &b, new.u.s.p, new.u.s.n);
    if (b.n > ev->max_output) feri_tmpl_throw(ev->rt, FER_STATUS_BUDGET_EXCEEDED, "a string exceeds %zu bytes", ev->max_output);
    i = (size_t)(hit - p) + old.u.s.n;
    done++;
  }
  feri_tmpl_buf_put(ev->rt, &b, p + i, s.u.s.n - i);
  return feri_tmpl_buf_value(&b);
}

static bool affix(feri_tmpl_eval *ev, feri_tmpl_value s, feri_tmpl_value x, bool end) {
  if (x.kind == FERI_TMPL_LIST && x.u.list->tuple) {
    for (size_t i = 0; i < x.u.list->n; i++)
      if (affix(ev, s, x.u.list->items[i], end)) return true;
    return false;
  }
  if (x.kind != FERI_TMPL_STR)
    feri_tmpl_error(ev, "%s first arg must be str or a tuple of str, not %s", end ? "endswith" : "startswith", feri_tmpl_type_name(x));
  if (x.u.s.n > s.u.s.n) return false;
  return memcmp(s.u.s.p + (end ? s.u.s.n - x.u.s.n : 0), x.u.s.p, x.u.s.n) == 0;
}

/* The code point index of the first (or last) occurrence of sub, -1 when absent. */
static int64_t find(feri_tmpl_value s, feri_tmpl_value sub, bool last) {
  const char *hit = NULL;
  if (!last) {
    hit = sub.u.s.n == 0 ? s.u.s.p : memmem(s.u.s.p, s.u.s.n, sub.u.s.p, sub.u.s.n);
  } else {
    for (size_t k = s.u.s.n >= sub.u.s.n ? s.u.s.n - sub.u.s.n + 1 : 0; k-- > 0;)
      if (memcmp(s.u.s.p + k, sub.u.s.p, sub.u.s.n) == 0) {
        hit = s.u.s.p + k;
        break;
      }
  }
  return hit ? (int64_t)feri_tmpl_utf8_len(s.u.s.p, (size_t)(hit - s.u.s.p)) : -1;
}

static int64_t count_of(feri_tmpl_value s, feri_tmpl_value sub) {
  if (sub.u.s.n == 0) return (int64_t)feri_tmpl_utf8_len(s.u.s.p, s.u.s.n) + 1;
  int64_t c = 0;
  for (const char *p = s.u.s.p, *end = s.u.s.p + s.u.s.n; (p = memmem(p, (size_t)(end - p), sub.u.s.p, sub.u.s.n)); p += sub.u.s.n) c++;
  return c;
}

/* str.format with "{}", "{0}" and "{name}" fields (conversions and format specs refused). */
static feri_tmpl_value format(feri_tmpl_eval *ev, feri_tmpl_value s, const feri_tmpl_args *a) {
  feri_tmpl_buf b = {0};
  feri_tmpl_buf_put(ev->rt, &b, "", 0);
  size_t next = 0;
  for (size_t i = 0; i < s.u.s.n; i++) {
    const char c = s.u.s.p[i];
    if ((c == '{' || c == '}') && i + 1 < s.u.s.n && s.u.s.p[i + 1] == c) {
      feri_tmpl_buf_put(ev->rt, &b, &c, 1);
      i++;
      continue;
    }
    if (c == '}') feri_tmpl_error(ev, "Single '}' encountered in format string");
    if (c != '{') {
      feri_tmpl_buf_put(ev->rt, &b, &c, 1);
      continue;
    }
    const char *close = memchr(s.u.s.p + i, '}', s.u.s.n - i);
    if (!close) feri_tmpl_error(ev, "Single '{' encountered in format string");
    const char *field = s.u.s.p + i + 1;
    const size_t len = (size_t)(close - field);
    const feri_tmpl_value *v = NULL;
    if (len == 0) {
      v = arg(a, next++, NULL);
    } else if (field[0] >= '0' && field[0] <= '9') {
      size_t k = 0;
      for (size_t j = 0; j < len; j++) {
        if (field[j] < '0' || field[j] > '9') feri_tmpl_error(ev, "unsupported format field");
        k = k * 10 + (size_t)(field[j] - '0');
        if (k > 1000000) break;
      }
      v = arg(a, k, NULL);
    } else {
      for (size_t k = 0; k < a->nkw; k++)
        if (strlen(a->names[k]) == len && !memcmp(a->names[k], field, len)) v = &a->kw[k];
      if (!v) feri_tmpl_error(ev, "'%.*s'", (int)(len < 100 ? len : 100), field);
    }
    if (!v) feri_tmpl_error(ev, "Replacement index %zu out of range for positional args tuple", next ? next - 1 : 0);
    feri_tmpl_write_str(ev->rt, &b, *v);
    i = (size_t)(close - s.u.s.p);
  }
  return feri_tmpl_buf_value(&b);
}

static feri_tmpl_value join(feri_tmpl_eval *ev, const feri_tmpl_list *items, feri_tmpl_value sep) {
  feri_tmpl_buf b = {0};
  feri_tmpl_buf_put(ev->rt, &b, "", 0);
  for (size_t i = 0; i < items->n; i++) {
    if (i) feri_tmpl_buf_put(ev->rt, &b, sep.u.s.p, sep.u.s.n);
    feri_tmpl_write_str(ev->rt, &b, items->items[i]);
    if (b.n > ev->max_output) feri_tmpl_throw(ev->rt, FER_STATUS_BUDGET_EXCEEDED, "a string exceeds %zu bytes", ev->max_output);
  }
  return feri_tmpl_buf_value(&b);
}

static feri_tmpl_value tuple2(feri_tmpl_eval *ev, feri_tmpl_value a, feri_tmpl_value b) {
  feri_tmpl_value t = feri_tmpl_list_new(ev->rt, 2);
  t.u.list->tuple = true;
  feri_tmpl_list_push(ev->rt, t.u.list, a);
  feri_tmpl_list_push(ev->rt, t.u.list, b);
  return t;
}

static feri_tmpl_value dict_items(feri_tmpl_eval *ev, const feri_tmpl_dict *d, int which) {
  feri_tmpl_value l = feri_tmpl_list_new(ev->rt, d->n);
  l.u.list->view = which == 0 ? "dict_items" : which == 1 ? "dict_keys" : "dict_values";
  for (size_t i = 0; i < d->n; i++)
    feri_tmpl_list_push(ev->rt, l.u.list, which == 0 ? tuple2(ev, d->keys[i], d->vals[i]) : which == 1 ? d->keys[i] : d->vals[i]);
  return l;
}

/* ---- methods -------------------------------------------------------------------------------- */

static const char *const STR_METHODS[] = {"strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith", "replace",
                                          "upper", "lower", "title", "capitalize", "find", "rfind", "index", "rindex", "count",
                                          "join", "format", "isdigit", "isalpha", "isalnum", "isspace", "isupper", "islower",
                                          "splitlines", "removeprefix", "removesuffix", NULL};
static const char *const DICT_METHODS[] = {"items", "keys", "values", "get", "copy", NULL};
static const char *const LIST_METHODS[] = {"index", "count", "copy", NULL};
/* What ImmutableSandboxedEnvironment refuses: the mutating methods of list and dict. */
static const char *const UNSAFE_METHODS[] = {"append", "pop", "insert", "extend", "remove", "sort", "reverse", "clear",
                                             "update", "setdefault", "popitem", NULL};

bool feri_tmpl_method(feri_tmpl_eval *ev, feri_tmpl_value obj, const char *name, feri_tmpl_value *out) {
  const bool known = (obj.kind == FERI_TMPL_STR && listed(STR_METHODS, name)) || (obj.kind == FERI_TMPL_DICT && listed(DICT_METHODS, name)) ||
                     (obj.kind == FERI_TMPL_LIST && !obj.u.list->view && listed(LIST_METHODS, name));
  if (!known) {
    if ((obj.kind == FERI_TMPL_LIST || obj.kind == FERI_TMPL_DICT) && listed(UNSAFE_METHODS, name) &&
        !(obj.kind == FERI_TMPL_DICT && feri_tmpl_dict_find_str(obj.u.dict, name))) {
      const size_t n = strlen(name) + 80;
      char *msg = feri_tmpl_alloc(ev->rt, n);
      snprintf(msg, n, "access to attribute '%s' of '%s' object is unsafe.", name, feri_tmpl_type_name(obj));
      *out = feri_tmpl_undef(msg);
      return true;
    }
    return false;
  }
  feri_tmpl_func *fn = feri_tmpl_alloc(ev->rt, sizeof *fn);
  fn->kind = FERI_FUNC_METHOD;
  fn->name = name;
  fn->self = obj;
  *out = (feri_tmpl_value){.kind = FERI_TMPL_FUNC, .u.fn = fn};
  return true;
}

static feri_tmpl_value call_str_method(feri_tmpl_eval *ev, feri_tmpl_value s, const char *m, const feri_tmpl_args *a) {
  if (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip")) {
    const feri_tmpl_value *chars = arg(a, 0, "chars");
    if (chars && chars->kind != FERI_TMPL_STR && chars->kind != FERI_TMPL_NONE) feri_tmpl_error(ev, "%s arg must be None or str", m);
    return like(s, strip(s, chars, m[0] != 'r', m[0] != 'l'));
  }
  if (!strcmp(m, "split") || !strcmp(m, "rsplit")) return split(ev, s, arg(a, 0, "sep"), arg_int(ev, a, 1, "maxsplit", -1), m[0] == 'r');
  if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) {
    const feri_tmpl_value *x = arg(a, 0, NULL);
    if (!x) feri_tmpl_error(ev, "%s() takes at least 1 argument (0 given)", m);
    return feri_tmpl_bool(affix(ev, s, *x, m[0] == 'e'));
  }
  if (!strcmp(m, "replace")) return replace(ev, s, arg_str(ev, a, 0, NULL, m), arg_str(ev, a, 1, NULL, m), arg_int(ev, a, 2, "count", -1));
  if (!strcmp(m, "upper")) return like(s, map_case(ev, s, 'u'));
  if (!strcmp(m, "lower")) return like(s, map_case(ev, s, 'l'));
  if (!strcmp(m, "title")) return like(s, map_case(ev, s, 't'));
  if (!strcmp(m, "capitalize")) return like(s, map_case(ev, s, 'c'));
  if (!strcmp(m, "find") || !strcmp(m, "rfind") || !strcmp(m, "index") || !strcmp(m, "rindex")) {
    const int64_t at = find(s, arg_str(ev, a, 0, NULL, m), m[0] == 'r');
    if (at < 0 && (!strcmp(m, "index") || !strcmp(m, "rindex"))) feri_tmpl_error(ev, "substring not found");
    return feri_tmpl_int(at);
  }
  if (!strcmp(m, "count")) return feri_tmpl_int(count_of(s, arg_str(ev, a, 0, NULL, m)));
  if (!strcmp(m, "join")) {
    const feri_tmpl_value *items = arg(a, 0, NULL);
    if (!items) feri_tmpl_error(ev, "join() takes exactly one argument (0 given)");
    const feri_tmpl_list *l = feri_tmpl_iterate(ev, *items);
    for (size_t i = 0; i < l->n; i++)
      if (l->items[i].kind != FERI_TMPL_STR)
        feri_tmpl_error(ev, "sequence item %zu: expected str instance, %s found", i, feri_tmpl_type_name(l->items[i]));
    return join(ev, l, s);
  }
  if (!strcmp(m, "format")) return format(ev, s, a);
  if (!strcmp(m, "removeprefix") || !strcmp(m, "removesuffix")) {
    const feri_tmpl_value x = arg_str(ev, a, 0, NULL, m);
    if (!affix(ev, s, x, m[6] == 's')) return s;
    return feri_tmpl_str(s.u.s.p + (m[6] == 'p' ? x.u.s.n : 0), s.u.s.n - x.u.s.n);
  }
  if (!strcmp(m, "splitlines")) {
    feri_tmpl_value out = feri_tmpl_list_new(ev->rt, 0);
    size_t i = 0, st = 0;
    while (i < s.u.s.n) {
      const char c = s.u.s.p[i];
      if (c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e)) {
        feri_tmpl_list_push(ev->rt, out.u.list, feri_tmpl_str(s.u.s.p + st, i - st));
        i += c == '\r' && i + 1 < s.u.s.n && s.u.s.p[i + 1] == '\n' ? 2 : 1;
        st = i;
      } else {
        i++;
      }
    }
    if (st < s.u.s.n) feri_tmpl_list_push(ev->rt, out.u.list, feri_tmpl_str(s.u.s.p + st, s.u.s.n - st));
    return out;
  }
  /* the is* predicates, over ASCII */
  bool all = s.u.s.n > 0, cased = false;
  for (size_t i = 0; i < s.u.s.n; i++) {
    const char c = s.u.s.p[i];
    const bool digit = c >= '0' && c <= '9', lower = c >= 'a' && c <= 'z', upper = c >= 'A' && c <= 'Z';
    cased |= lower || upper;
    if (!strcmp(m, "isdigit")) all &= digit;
    else if (!strcmp(m, "isalpha")) all &= lower || upper;
    else if (!strcmp(m, "isalnum")) all &= digit || lower || upper;
    else if (!strcmp(m, "isspace")) all &= is_ws((unsigned char)c);
    else if (!strcmp(m, "isupper")) all &= !lower;
    else all &= !upper;
  }
  if (!strcmp(m, "isupper") || !strcmp(m, "islower")) all = all && cased;
  return feri_tmpl_bool(all);
}

static feri_tmpl_value call_method(feri_tmpl_eval *ev, const feri_tmpl_func *fn, const feri_tmpl_args *a) {
  const feri_tmpl_value self = fn->self;
  const char *m = fn->name;
  if (self.kind == FERI_TMPL_STR) return call_str_method(ev, self, m, a);
  if (self.kind == FERI_TMPL_DICT) {
    if (!strcmp(m, "items")) return dict_items(ev, self.u.dict, 0);
    if (!strcmp(m, "keys")) return dict_items(ev, self.u.dict, 1);
    if (!strcmp(m, "values")) return dict_items(ev, self.u.dict, 2);
    if (!strcmp(m, "copy")) {
      feri_tmpl_value d = feri_tmpl_dict_new(ev->rt, FERI_TMPL_DICT);
      for (size_t i = 0; i < self.u.dict->n; i++) feri_tmpl_dict_set(ev->rt, d.u.dict, self.u.dict->keys[i], self.u.dict->vals[i]);
      return d;
    }
    const feri_tmpl_value *key = arg(a, 0, NULL), *dflt = arg(a, 1, NULL);
    if (!key) feri_tmpl_error(ev, "get expected at least 1 argument, got 0");
    const feri_tmpl_value *v = feri_tmpl_dict_find(self.u.dict, *key);
    return v ? *v : dflt ? *dflt : feri_tmpl_none();
  }
  if (!strcmp(m, "copy")) {
    feri_tmpl_value l = feri_tmpl_list_new(ev->rt, self.u.list->n);
    for (size_t i = 0; i < self.u.list->n; i++) feri_tmpl_list_push(ev->rt, l.u.list, self.u.list->items[i]);
    return l;
  }
  const feri_tmpl_value *x = arg(a, 0, NULL);
  if (!x) feri_tmpl_error(ev, "%s() takes exactly one argument (0 given)", m);
  int64_t c = 0;
  for (size_t i = 0; i < self.u.list->n; i++)
    if (feri_tmpl_equal(self.u.list->items[i], *x)) {
      if (m[0] == 'i') return feri_tmpl_int((int64_t)i);
      c++;
    }
  if (m[0] == 'i') feri_tmpl_error(ev, "list.index(x): x not in list");
  return feri_tmpl_int(c);
}

/* ---- globals -------------------------------------------------------------------------------- */

static const char *const GLOBALS[] = {"range", "dict", "namespace", "raise_exception", "strftime_now", NULL};

bool feri_tmpl_global(feri_tmpl_eval *ev, const char *name, feri_tmpl_value *out) {
  for (size_t i = 0; GLOBALS[i]; i++)
    if (!strcmp(GLOBALS[i], name)) {
      feri_tmpl_func *fn = feri_tmpl_alloc(ev->rt, sizeof *fn);
      fn->kind = FERI_FUNC_GLOBAL;
      fn->name = GLOBALS[i];
      *out = (feri_tmpl_value){.kind = FERI_TMPL_FUNC, .u.fn = fn};
      return true;
    }
  return false;
}

static feri_tmpl_value range(feri_tmpl_eval *ev, const feri_tmpl_args *a) {
  if (a->n == 0 || a->n > 3) feri_tmpl_error(ev, "range expected at least 1 argument, got %zu", a->n);
  int64_t v[3] = {0, 0, 1};
  for (size_t i = 0; i < a->n; i++) {
    const feri_tmpl_value x = a->pos[i];
    if (x.kind == FERI_TMPL_UNDEF) feri_tmpl_use_undef(ev, x);
    if (x.kind != FERI_TMPL_INT && x.kind != FERI_TMPL_BOOL)
      feri_tmpl_error(ev, "'%s' object cannot be interpreted as an integer", feri_tmpl_type_name(x));
    v[a->n == 1 ? 1 : i] = x.kind == FERI_TMPL_INT ? x.u.i : x.u.b;
  }
  const int64_t start = v[0], stop = v[1], stp = v[2];
  if (stp == 0) feri_tmpl_error(ev, "range() arg 3 must not be zero");
  const double count = stp > 0 ? ((double)stop - (double)start) / (double)stp : ((double)start - (double)stop) / -(double)stp;
  if (count > MAX_RANGE) feri_tmpl_error(ev, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (%d).", MAX_RANGE);
  feri_tmpl_value l = feri_tmpl_list_new(ev->rt, 0);
  for (int64_t i = start; stp > 0 ? i < stop : i > stop; i += stp) feri_tmpl_list_push(ev->rt, l.u.list, feri_tmpl_int(i));
  return l;
}

static feri_tmpl_value call_global(feri_tmpl_eval *ev, const feri_tmpl_func *fn, const feri_tmpl_args *a) {
  const char *g = fn->name;
  if (!strcmp(g, "range")) return range(ev, a);
  if (!strcmp(g, "dict") || !strcmp(g, "namespace")) {
    feri_tmpl_value d = feri_tmpl_dict_new(ev->rt, g[0] == 'd' ? FERI_TMPL_DICT : FERI_TMPL_NS);
    for (size_t i = 0; i < a->n; i++) {
      if (a->pos[i].kind != FERI_TMPL_DICT && a->pos[i].kind != FERI_TMPL_NS)
        feri_tmpl_error(ev, "cannot convert '%s' object to a dictionary", feri_tmpl_type_name(a->pos[i]));
      for (size_t k = 0; k < a->pos[i].u.dict->n; k++) feri_tmpl_dict_set(ev->rt, d.u.dict, a->pos[i].u.dict->keys[k], a->pos[i].u.dict->vals[k]);
    }
    for (size_t k = 0; k < a->nkw; k++) feri_tmpl_dict_set(ev->rt, d.u.dict, feri_tmpl_cstr(a->names[k]), a->kw[k]);
    return d;
  }
  if (!strcmp(g, "raise_exception")) {
    const feri_tmpl_value *msg = arg(a, 0, "message");
    feri_tmpl_buf b = {0};
    feri_tmpl_buf_put(ev->rt, &b, "", 0);
    if (msg) feri_tmpl_write_str(ev->rt, &b, *msg);
    ev->rt->raised = true;
    feri_tmpl_throw(ev->rt, FER_STATUS_INVALID_ARG, "%s", b.p);
  }
  /* strftime_now: the caller's clock (UTC) */
  const feri_tmpl_value f = arg_str(ev, a, 0, "format", "strftime_now");
  char *fmt = feri_tmpl_alloc(ev->rt, f.u.s.n + 1), out[512];
  memcpy(fmt, f.u.s.p, f.u.s.n);
  const time_t t = (time_t)ev->now_unix;
  struct tm tm;
  gmtime_r(&t, &tm);
  const size_t n = strftime(out, sizeof out, fmt, &tm);
  return feri_tmpl_str_copy(ev->rt, out, n);
}

static feri_tmpl_value call_cycle(feri_tmpl_eval *ev, const feri_tmpl_func *fn, const feri_tmpl_args *a) {
  if (a->n == 0) feri_tmpl_error(ev, "no items for cycling given");
  return a->pos[(size_t)fn->self.u.i % a->n];
}

feri_tmpl_value feri_tmpl_call_builtin(feri_tmpl_eval *ev, const feri_tmpl_func *fn, const feri_tmpl_args *args) {
  if (fn->kind == FERI_FUNC_METHOD) return call_method(ev, fn, args);
  if (fn->kind == FERI_FUNC_CYCLE) return call_cycle(ev, fn, args);
  return call_global(ev, fn, args);
}

/* ---- tests ---------------------------------------------------------------------------------- */

static const feri_tmpl_value *test_arg(feri_tmpl_eval *ev, const feri_tmpl_args *a, const char *test) {
  const feri_tmpl_value *x = arg(a, 0, NULL);
  if (!x) feri_tmpl_error(ev, "test '%s' takes an argument", test);
  return x;
}

bool feri_tmpl_test(feri_tmpl_eval *ev, const char *t, feri_tmpl_value v, const feri_tmpl_args *a) {
  const int k = v.kind;
  if (!strcmp(t, "defined")) return k != FERI_TMPL_UNDEF;
  if (!strcmp(t, "undefined")) return k == FERI_TMPL_UNDEF;
  if (!strcmp(t, "none")) return k == FERI_TMPL_NONE;
  if (!strcmp(t, "string")) return k == FERI_TMPL_STR;
  if (!strcmp(t, "number")) return feri_tmpl_is_number(v);
  if (!strcmp(t, "integer")) return k == FERI_TMPL_INT;
  if (!strcmp(t, "float")) return k == FERI_TMPL_FLOAT;
  if (!strcmp(t, "boolean")) return k == FERI_TMPL_BOOL;
  if (!strcmp(t, "true")) return k == FERI_TMPL_BOOL && v.u.b;
  if (!strcmp(t, "false")) return k == FERI_TMPL_BOOL && !v.u.b;
  if (!strcmp(t, "mapping")) return k == FERI_TMPL_DICT;
  if (!strcmp(t, "sequence")) return k == FERI_TMPL_STR || (k == FERI_TMPL_LIST && !v.u.list->view) || k == FERI_TMPL_DICT;
  if (!strcmp(t, "iterable")) return k == FERI_TMPL_STR || k == FERI_TMPL_LIST || k == FERI_TMPL_DICT || k == FERI_TMPL_UNDEF;
  if (!strcmp(t, "callable")) return k == FERI_TMPL_FUNC || k == FERI_TMPL_UNDEF; /* Undefined has a __call__ (that raises) */
  if (!strcmp(t, "odd") || !strcmp(t, "even")) /* value % 2 == 1 (or 0), as Python computes it */
    return feri_tmpl_equal(feri_tmpl_binary(ev, "%", v, feri_tmpl_int(2)), feri_tmpl_int(t[0] == 'o'));
  if (!strcmp(t, "divisibleby")) {
    const feri_tmpl_value d = feri_tmpl_binary(ev, "%", v, *test_arg(ev, a, t));
    return !feri_tmpl_truthy(d);
  }
  if (!strcmp(t, "lower") || !strcmp(t, "upper")) {
    if (k != FERI_TMPL_STR) return false;
    const feri_tmpl_args none = {0};
    return feri_tmpl_truthy(call_str_method(ev, v, t[0] == 'l' ? "islower" : "isupper", &none));
  }
  if (!strcmp(t, "in")) {
    const feri_tmpl_value *seq = test_arg(ev, a, t);
    const feri_tmpl_list *items = seq->kind == FERI_TMPL_STR ? NULL : feri_tmpl_iterate(ev, *seq);
    if (!items) return k == FERI_TMPL_STR && (v.u.s.n == 0 || memmem(seq->u.s.p, seq->u.s.n, v.u.s.p, v.u.s.n));
    for (size_t i = 0; i < items->n; i++)
      if (feri_tmpl_equal(items->items[i], v)) return true;
    return false;
  }
  if (!strcmp(t, "sameas")) {
    const feri_tmpl_value *o = test_arg(ev, a, t);
    if (o->kind != k) return false;
    if (k == FERI_TMPL_NONE || k == FERI_TMPL_UNDEF) return true;
    if (k == FERI_TMPL_BOOL) return o->u.b == v.u.b;
    return k == FERI_TMPL_LIST ? o->u.list == v.u.list : (k == FERI_TMPL_DICT || k == FERI_TMPL_NS) ? o->u.dict == v.u.dict : feri_tmpl_equal(*o, v);
  }
  if (!strcmp(t, "escaped")) return false;
  static const char *const CMP[][2] = {{"equalto", "=="}, {"eq", "=="}, {"==", "=="}, {"ne", "!="}, {"!=", "!="},
                                       {"lt", "<"},       {"<", "<"},   {"le", "<="}, {"<=", "<="}, {"gt", ">"},
                                       {">", ">"},        {"ge", ">="}, {">=", ">="}, {"greaterthan", ">"}, {"lessthan", "<"}};
  for (size_t i = 0; i < sizeof CMP / sizeof CMP[0]; i++)
    if (!strcmp(t, CMP[i][0])) {
      const feri_tmpl_value o = *test_arg(ev, a, t);
      const char *op = CMP[i][1];
      if (op[0] == '=') return feri_tmpl_equal(v, o);
      if (op[0] == '!') return !feri_tmpl_equal(v, o);
      const int c = feri_tmpl_compare(ev->rt, v, o, op);
      return op[0] == '<' ? (op[1] ? c <= 0 : c < 0) : (op[1] ? c >= 0 : c > 0);
    }
  if (feri_tmpl_is_test(t)) feri_tmpl_throw(ev->rt, FER_STATUS_UNSUPPORTED, "the test '%s' is not supported", t);
  feri_tmpl_error(ev, "No test named '%s' found.", t);
}

/* ---- filters -------------------------------------------------------------------------------- */

/* Stable merge sort of items by key (an attribute path or the item), strings folded to lower
 * case unless case_sensitive, as Jinja2's sort, dictsort and unique compare. */
typedef struct sort_ctx {
  feri_tmpl_eval *ev;
  bool case_sensitive;
} sort_ctx;

static feri_tmpl_value fold(sort_ctx *c, feri_tmpl_value v) {
  return c->case_sensitive || v.kind != FERI_TMPL_STR ? v : map_case(c->ev, v, 'l');
}

static void merge_sort(sort_ctx *c, feri_tmpl_value *keys, feri_tmpl_value *items, size_t n, feri_tmpl_value *tk, feri_tmpl_value *ti) {
  if (n < 2) return;
  const size_t h = n / 2;
  merge_sort(c, keys, items, h, tk, ti);
  merge_sort(c, keys + h, items + h, n - h, tk, ti);
  size_t i = 0, j = h, o = 0;
  while (i < h || j < n) {
    const bool left = j >= n || (i < h && feri_tmpl_compare(c->ev->rt, keys[j], keys[i], "<") >= 0);
    const size_t from = left ? i++ : j++;
    tk[o] = keys[from];
    ti[o++] = items[from];
  }
  memcpy(keys, tk, n * sizeof *keys);
  memcpy(items, ti, n * sizeof *items);
}

/* Jinja2's attribute paths: "a.b.0" looks up a, then b, then item 0. */
static feri_tmpl_value attr_path(feri_tmpl_eval *ev, feri_tmpl_value v, feri_tmpl_value path) {
  path = need_str(ev, path, "attribute");
  size_t i = 0;
  while (i <= path.u.s.n) {
    const char *dot = memchr(path.u.s.p + i, '.', path.u.s.n - i);
    const size_t e = dot ? (size_t)(dot - path.u.s.p) : path.u.s.n;
    const feri_tmpl_value part = feri_tmpl_str_copy(ev->rt, path.u.s.p + i, e - i);
    bool digits = part.u.s.n > 0 && part.u.s.n < 18;
    for (size_t k = 0; k < part.u.s.n; k++) digits &= part.u.s.p[k] >= '0' && part.u.s.p[k] <= '9';
    if (v.kind == FERI_TMPL_UNDEF) return v;
    v = feri_tmpl_getitem(ev, v, digits ? feri_tmpl_int(strtoll(part.u.s.p, NULL, 10)) : part);
    i = e + 1;
  }
  return v;
}

static feri_tmpl_value sorted(feri_tmpl_eval *ev, const feri_tmpl_list *l, bool reverse, bool case_sensitive, const feri_tmpl_value *attribute, int by) {
  sort_ctx c = {ev, case_sensitive};
  const size_t n = l->n;
  feri_tmpl_value *keys = feri_tmpl_alloc(ev->rt, (n + 1) * sizeof *keys), *items = feri_tmpl_alloc(ev->rt, (n + 1) * sizeof *items);
  feri_tmpl_value *tk = feri_tmpl_alloc(ev->rt, (n + 1) * sizeof *tk), *ti = feri_tmpl_alloc(ev->rt, (n + 1) * sizeof *ti);
  for (size_t i = 0; i < n; i++) {
    items[i] = l->items[i];
    const feri_tmpl_value k = by >= 0 ? l->items[i].u.list->items[by] : attribute && attribute->kind != FERI_TMPL_NONE ? attr_path(ev, items[i], *attribute) : items[i];
    keys[i] = fold(&c, k);
  }
  if (reverse) { /* Python sorts reversed keeping equal items in order: reverse, sort, reverse */
    for (size_t i = 0; i < n / 2; i++) {
      feri_tmpl_value t = keys[i];
      keys[i] = keys[n - 1 - i], keys[n - 1 - i] = t;
      t = items[i];
      items[i] = items[n - 1 - i], items[n - 1 - i] = t;
    }
  }
  merge_sort(&c, keys, items, n, tk, ti);
  feri_tmpl_value out = feri_tmpl_list_new(ev->rt, n);
  for (size_t i = 0; i < n; i++) feri_tmpl_list_push(ev->rt, out.u.list, items[reverse ? n - 1 - i : i]);
  return out;
}

feri_tmpl_value feri_tmpl_escape(feri_tmpl_eval *ev, feri_tmpl_value s) {
  if (s.kind == FERI_TMPL_STR && s.markup) return s;
  s = text_of(ev, s);
  feri_tmpl_buf b = {0};
  feri_tmpl_buf_put(ev->rt, &b, "", 0);
  for (size_t i = 0; i < s.u.s.n; i++) {
    const char c = s.u.s.p[i];
    const char *e = c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '"' ? "&#34;" : c == '\'' ? "&#39;" : NULL;
    if (e) feri_tmpl_buf_puts(ev->rt, &b, e);
    else feri_tmpl_buf_put(ev->rt, &b, &c, 1);
  }
  feri_tmpl_value v = feri_tmpl_buf_value(&b);
  v.markup = true;
  return v;
}


static feri_tmpl_value indent(feri_tmpl_eval *ev, feri_tmpl_value s, const feri_tmpl_args *a) {
  const feri_tmpl_value *w = arg(a, 0, "width");
  feri_tmpl_value pad = feri_tmpl_cstr("    ");
  if (w && w->kind == FERI_TMPL_STR) {
    pad = *w;
  } else if (w) {
    const int64_t n = arg_int(ev, a, 0, "width", 4);
    char *p = feri_tmpl_alloc(ev->rt, n > 0 ? (size_t)n + 1 : 1);
    if (n > 0 && (uint64_t)n > ev->max_output) feri_tmpl_throw(ev->rt, FER_STATUS_BUDGET_EXCEEDED, "indent too wide");
    for (int64_t k = 0; k < n; k++) p[k] = ' ';
    pad = feri_tmpl_str(p, n > 0 ? (size_t)n : 0);
  }
  const bool first = arg_bool(a, 1, "first", false), blank = arg_bool(a, 2, "blank", false);
  feri_tmpl_value text = feri_tmpl_binary(ev, "+", s, feri_tmpl_cstr("\n")); /* Jinja2 appends a newline before splitting */
  const feri_tmpl_args none = {0};
  const feri_tmpl_list *lines = call_str_method(ev, text, "splitlines", &none).u.list;
  feri_tmpl_buf b = {0};
  feri_tmpl_buf_put(ev->rt, &b, "", 0);
  if (first) feri_tmpl_buf_put(ev->rt, &b, pad.u.s.p, pad.u.s.n);
  for (size_t i = 0; i < lines->n; i++) {
    const feri_tmpl_value line = lines->items[i];
    if (i) {
      feri_tmpl_buf_put(ev->rt, &b, "\n", 1);
      if (blank || line.u.s.n) feri_tmpl_buf_put(ev->rt, &b, pad.u.s.p, pad.u.s.n);
    }
    feri_tmpl_buf_put(ev->rt, &b, line.u.s.p, line.u.s.n);
    if (b.n > ev->max_output) feri_tmpl_throw(ev->rt, FER_STATUS_BUDGET_EXCEEDED, "a string exceeds %zu bytes", ev->max_output);
  }
  return feri_tmpl_buf_value(&b);
}

static feri_tmpl_value to_int(feri_tmpl_eval *ev, feri_tmpl_value v, const feri_tmpl_args *a) {
  const feri_tmpl_value *d = arg(a, 0, "default");
  const feri_tmpl_value dflt = d ? *d : feri_tmpl_int(0);
  const int64_t base = arg_int(ev, a, 1, "base", 10);
  if (v.kind == FERI_TMPL_INT) return v;
  if (v.kind == FERI_TMPL_BOOL) return feri_tmpl_int(v.u.b);
  if (v.kind == FERI_TMPL_FLOAT) return v.u.f > -9.2e18 && v.u.f < 9.2e18 ? feri_tmpl_int((int64_t)v.u.f) : dflt;
  if (v.kind != FERI_TMPL_STR || v.u.s.n == 0 || v.u.s.n > 60 || base < 2 || base > 36) return dflt;
  char tmp[64], *end;
  const feri_tmpl_value t = strip(v, NULL, true, true);
  memcpy(tmp, t.u.s.p, t.u.s.n);
  tmp[t.u.s.n] = 0;
  const long long i = strtoll(tmp, &end, (int)base);
  if (t.u.s.n && *end == 0) return feri_tmpl_int(i);
  const double f = strtod(tmp, &end);
  if (base == 10 && t.u.s.n && *end == 0 && f > -9.2e18 && f < 9.2e18) return feri_tmpl_int((int64_t)f);
  return dflt;
}

static feri_tmpl_value to_float(feri_tmpl_value v, const feri_tmpl_args *a) {
  const feri_tmpl_value *d = arg(a, 0, "default");
  const feri_tmpl_value dflt = d ? *d : feri_tmpl_float(0);
  if (v.kind == FERI_TMPL_FLOAT) return v;
  if (v.kind == FERI_TMPL_INT) return feri_tmpl_float((double)v.u.i);
  if (v.kind == FERI_TMPL_BOOL) return feri_tmpl_float(v.u.b);
  if (v.kind != FERI_TMPL_STR || v.u.s.n == 0 || v.u.s.n > 60) return dflt;
  char tmp[64], *end;
  const feri_tmpl_value t = strip(v, NULL, true, true);
  memcpy(tmp, t.u.s.p, t.u.s.n);
  tmp[t.u.s.n] = 0;
  const double f = strtod(tmp, &end);
  return t.u.s.n && *end == 0 ? feri_tmpl_float(f) : dflt;
}

static feri_tmpl_value round_filter(feri_tmpl_eval *ev, feri_tmpl_value v, const feri_tmpl_args *a) {
  const int64_t precision = arg_int(ev, a, 0, "precision", 0);
  const feri_tmpl_value *method = arg(a, 1, "method");
  if (!feri_tmpl_is_number(v)) feri_tmpl_error(ev, "type %s doesn't define __round__ method", feri_tmpl_type_name(v));
  const double x = v.kind == FERI_TMPL_FLOAT ? v.u.f : v.kind == FERI_TMPL_INT ? (double)v.u.i : v.u.b;
  const bool ceil_it = method && method->kind == FERI_TMPL_STR && method->u.s.n == 4 && !memcmp(method->u.s.p, "ceil", 4);
  const bool floor_it = method && method->kind == FERI_TMPL_STR && method->u.s.n == 5 && !memcmp(method->u.s.p, "floor", 5);
  if (method && !ceil_it && !floor_it && !(method->kind == FERI_TMPL_STR && method->u.s.n == 6 && !memcmp(method->u.s.p, "common", 6)))
    feri_tmpl_error(ev, "method must be common, ceil or floor");
  if (ceil_it || floor_it) {
    double scale = 1;
    for (int64_t k = 0; k < precision && k < 300; k++) scale *= 10;
    return feri_tmpl_float((ceil_it ? __builtin_ceil(x * scale) : __builtin_floor(x * scale)) / scale);
  }
  if (v.kind != FERI_TMPL_FLOAT && precision >= 0) return v.kind == FERI_TMPL_BOOL ? feri_tmpl_int(v.u.b) : v;
  if (precision < 0 || precision > 300) return feri_tmpl_float(x);
  char tmp[400];
  snprintf(tmp, sizeof tmp, "%.*f", (int)precision, x); /* correctly rounded, ties to even: Python's round */
  return feri_tmpl_float(strtod(tmp, NULL));
}

static bool filter_item(feri_tmpl_eval *ev, feri_tmpl_value item, const feri_tmpl_args *a, size_t first_test_arg) {
  if (a->n <= first_test_arg) return feri_tmpl_truthy(item);
  const feri_tmpl_value t = need_str(ev, a->pos[first_test_arg], "a test name");
  char *name = feri_tmpl_alloc(ev->rt, t.u.s.n + 1);
  memcpy(name, t.u.s.p, t.u.s.n);
  const feri_tmpl_args rest = {a->pos + first_test_arg + 1, a->n - first_test_arg - 1, a->names, a->kw, a->nkw};
  return feri_tmpl_test(ev, name, item, &rest);
}

/* A generator, as Jinja2's filters return one. */
static feri_tmpl_value generator(feri_tmpl_eval *ev) {
  feri_tmpl_value g = feri_tmpl_list_new(ev->rt, 0);
  g.u.list->view = "generator";
  return g;
}

/* Whether the filter's input cannot be iterated: the generator then fails when it is. */
static bool lazy_failure(feri_tmpl_eval *ev, feri_tmpl_value v, feri_tmpl_value *g) {
  if (v.kind == FERI_TMPL_STR || v.kind == FERI_TMPL_LIST || v.kind == FERI_TMPL_DICT || v.kind == FERI_TMPL_UNDEF) return false;
  const size_t n = 64;
  char *msg = feri_tmpl_alloc(ev->rt, n);
  snprintf(msg, n, "'%s' object is not iterable", feri_tmpl_type_name(v));
  g->u.list->fail = msg;
  return true;
}

static feri_tmpl_value select_items(feri_tmpl_eval *ev, feri_tmpl_value v, const feri_tmpl_args *a, bool keep, bool by_attr) {
  feri_tmpl_value out = generator(ev);
  if (!feri_tmpl_truthy(v) || lazy_failure(ev, v, &out)) return out; /* Jinja2 tests "if seq" before iterating */
  const feri_tmpl_list *l = feri_tmpl_iterate(ev, v);
  for (size_t i = 0; i < l->n; i++) {
    feri_tmpl_value x = l->items[i];
    if (by_attr) {
      if (a->n == 0) feri_tmpl_error(ev, "Missing parameter for attribute name");
      x = attr_path(ev, x, a->pos[0]);
    }
    if (filter_item(ev, x, a, by_attr ? 1 : 0) == keep) feri_tmpl_list_push(ev->rt, out.u.list, l->items[i]);
  }
  return out;
}

static feri_tmpl_value map_filter(feri_tmpl_eval *ev, feri_tmpl_value v, const feri_tmpl_args *a) {
  feri_tmpl_value out = generator(ev);
  if (!feri_tmpl_truthy(v) || lazy_failure(ev, v, &out)) return out;
  const feri_tmpl_list *l = feri_tmpl_iterate(ev, v);
  const feri_tmpl_value *attribute = arg(a, SIZE_MAX, "attribute");
  for (size_t i = 0; i < l->n; i++) {
    feri_tmpl_value x = l->items[i];
    if (attribute) {
      x = attr_path(ev, x, *attribute);
      const feri_tmpl_value *dflt = arg(a, SIZE_MAX, "default");
      if (x.kind == FERI_TMPL_UNDEF && dflt) x = *dflt;
    } else {
      if (a->n == 0) feri_tmpl_error(ev, "map requires a filter argument");
      const feri_tmpl_value f = need_str(ev, a->pos[0], "a filter name");
      char *name = feri_tmpl_alloc(ev->rt, f.u.s.n + 1);
      memcpy(name, f.u.s.p, f.u.s.n);
      const feri_tmpl_args rest = {a->pos + 1, a->n - 1, a->names, a->kw, a->nkw};
      x = feri_tmpl_filter(ev, name, x, &rest);
    }
    feri_tmpl_list_push(ev->rt, out.u.list, x);
  }
  return out;
}

static feri_tmpl_value tojson(feri_tmpl_eval *ev, feri_tmpl_value v, const feri_tmpl_args *a) {
  feri_tmpl_json_style st = {.ensure_ascii = arg_bool(a, 0, "ensure_ascii", false), .indent = -1, .sort_keys = arg_bool(a, 3, "sort_keys", false)};
  const feri_tmpl_value *indent_v = arg(a, 1, "indent"), *seps = arg(a, 2, "separators");
  if (indent_v && indent_v->kind != FERI_TMPL_NONE) {
    const int64_t n = arg_int(ev, a, 1, "indent", 0);
    st.indent = n < 0 ? 0 : n > 64 ? 64 : (int)n;
  }
  if (seps && seps->kind != FERI_TMPL_NONE) {
    if (seps->kind != FERI_TMPL_LIST || seps->u.list->n != 2 || seps->u.list->items[0].kind != FERI_TMPL_STR ||
        seps->u.list->items[1].kind != FERI_TMPL_STR)
      feri_tmpl_error(ev, "separators must be a pair of strings");
    st.item_sep = feri_tmpl_str_copy(ev->rt, seps->u.list->items[0].u.s.p, seps->u.list->items[0].u.s.n).u.s.p;
    st.key_sep = feri_tmpl_str_copy(ev->rt, seps->u.list->items[1].u.s.p, seps->u.list->items[1].u.s.n).u.s.p;
  }
  feri_tmpl_buf b = {0};
  feri_tmpl_buf_put(ev->rt, &b, "", 0);
  feri_tmpl_json_write(ev->rt, &b, v, &st);
  return feri_tmpl_buf_value(&b);
}

static feri_tmpl_value length(feri_tmpl_eval *ev, feri_tmpl_value v) {
  switch (v.kind) {
  case FERI_TMPL_UNDEF: return feri_tmpl_int(0);
  case FERI_TMPL_STR: return feri_tmpl_int((int64_t)feri_tmpl_utf8_len(v.u.s.p, v.u.s.n));
  case FERI_TMPL_LIST:
    if (feri_tmpl_is_iterator(v)) break;
    return feri_tmpl_int((int64_t)v.u.list->n);
  case FERI_TMPL_DICT: return feri_tmpl_int((int64_t)v.u.dict->n);
  default: break;
  }
  feri_tmpl_error(ev, "object of type '%s' has no len()", feri_tmpl_type_name(v));
}

static feri_tmpl_value min_max(feri_tmpl_eval *ev, feri_tmpl_value v, const feri_tmpl_args *a, bool want_max) {
  const feri_tmpl_list *l = feri_tmpl_iterate(ev, v);
  if (l->n == 0) return feri_tmpl_undef("No aggregated item, sequence was empty.");
  sort_ctx c = {ev, arg_bool(a, 0, "case_sensitive", false)};
  const feri_tmpl_value *attribute = arg(a, 1, "attribute");
  size_t best = 0;
  feri_tmpl_value best_key = fold(&c, attribute ? attr_path(ev, l->items[0], *attribute) : l->items[0]);
  for (size_t i = 1; i < l->n; i++) {
    const feri_tmpl_value k = fold(&c, attribute ? attr_path(ev, l->items[i], *attribute) : l->items[i]);
    const int cmp = feri_tmpl_compare(ev->rt, k, best_key, want_max ? ">" : "<");
    if (want_max ? cmp > 0 : cmp < 0) best = i, best_key = k;
  }
  return l->items[best];
}

feri_tmpl_value feri_tmpl_filter(feri_tmpl_eval *ev, const char *f, feri_tmpl_value v, const feri_tmpl_args *a) {
  if (!strcmp(f, "length") || !strcmp(f, "count")) return length(ev, v);
  if (!strcmp(f, "default") || !strcmp(f, "d")) {
    const feri_tmpl_value *d = arg(a, 0, "default_value");
    const bool boolean = arg_bool(a, 1, "boolean", false);
    if (v.kind == FERI_TMPL_UNDEF || (boolean && !feri_tmpl_truthy(v))) return d ? *d : feri_tmpl_cstr("");
    return v;
  }
  if (!strcmp(f, "tojson")) return tojson(ev, v, a);
  if (!strcmp(f, "safe")) {
    feri_tmpl_value s = text_of(ev, v);
    s.markup = true;
    return s;
  }
  if (!strcmp(f, "string")) return text_of(ev, v);
  if (!strcmp(f, "trim")) return like(v, strip(text_of(ev, v), arg(a, 0, "chars"), true, true));
  if (!strcmp(f, "upper")) return like(v, map_case(ev, text_of(ev, v), 'u'));
  if (!strcmp(f, "lower")) return like(v, map_case(ev, text_of(ev, v), 'l'));
  if (!strcmp(f, "capitalize")) return like(v, map_case(ev, text_of(ev, v), 'c'));
  if (!strcmp(f, "title")) return like(v, map_case(ev, text_of(ev, v), 'T'));
  if (!strcmp(f, "e") || !strcmp(f, "escape")) return feri_tmpl_escape(ev, v);
  if (!strcmp(f, "join")) {
    const feri_tmpl_value *sep = arg(a, 0, "d"), *attribute = arg(a, 1, "attribute");
    const feri_tmpl_list *l = feri_tmpl_iterate(ev, v);
    if (attribute) {
      feri_tmpl_value mapped = feri_tmpl_list_new(ev->rt, l->n);
      for (size_t i = 0; i < l->n; i++) feri_tmpl_list_push(ev->rt, mapped.u.list, attr_path(ev, l->items[i], *attribute));
      l = mapped.u.list;
    }
    return join(ev, l, sep ? text_of(ev, *sep) : feri_tmpl_cstr(""));
  }
  if (!strcmp(f, "map")) return map_filter(ev, v, a);
  if (!strcmp(f, "select")) return select_items(ev, v, a, true, false);
  if (!strcmp(f, "reject")) return select_items(ev, v, a, false, false);
  if (!strcmp(f, "selectattr")) return select_items(ev, v, a, true, true);
  if (!strcmp(f, "rejectattr")) return select_items(ev, v, a, false, true);
  if (!strcmp(f, "first") || !strcmp(f, "last")) {
    const feri_tmpl_list *l = feri_tmpl_iterate(ev, v);
    if (l->n == 0) return feri_tmpl_undef(f[0] == 'f' ? "No first item, sequence was empty." : "No last item, sequence was empty.");
    return l->items[f[0] == 'f' ? 0 : l->n - 1];
  }
  if (!strcmp(f, "list")) {
    const feri_tmpl_list *l = feri_tmpl_iterate(ev, v);
    feri_tmpl_value out = feri_tmpl_list_new(ev->rt, l->n);
    for (size_t i = 0; i < l->n; i++) feri_tmpl_list_push(ev->rt, out.u.list, l->items[i]);
    return out;
  }
  if ((!strcmp(f, "int") || !strcmp(f, "float")) && v.kind == FERI_TMPL_UNDEF) feri_tmpl_use_undef(ev, v);
  if (!strcmp(f, "int")) return to_int(ev, v, a);
  if (!strcmp(f, "float")) return to_float(v, a);
  if (!strcmp(f, "items")) {
    if (v.kind != FERI_TMPL_DICT) {
      feri_tmpl_value g = generator(ev);
      if (v.kind != FERI_TMPL_UNDEF) g.u.list->fail = "Can only get item pairs from a mapping.";
      return g;
    }
    feri_tmpl_value items = dict_items(ev, v.u.dict, 0);
    items.u.list->view = "generator";
    return items;
  }
  if (!strcmp(f, "dictsort")) {
    if (v.kind != FERI_TMPL_DICT) feri_tmpl_error(ev, "You can only sort by either \"key\" or \"value\"");
    const feri_tmpl_value *by = arg(a, 1, "by");
    const bool by_value = by && by->kind == FERI_TMPL_STR && by->u.s.n == 5 && !memcmp(by->u.s.p, "value", 5);
    return sorted(ev, dict_items(ev, v.u.dict, 0).u.list, arg_bool(a, 2, "reverse", false), arg_bool(a, 0, "case_sensitive", false), NULL, by_value);
  }
  if (!strcmp(f, "sort"))
    return sorted(ev, feri_tmpl_iterate(ev, v), arg_bool(a, 0, "reverse", false), arg_bool(a, 1, "case_sensitive", false), arg(a, 2, "attribute"), -1);
  if (!strcmp(f, "unique")) {
    sort_ctx c = {ev, arg_bool(a, 0, "case_sensitive", false)};
    const feri_tmpl_value *attribute = arg(a, 1, "attribute");
    feri_tmpl_value out = generator(ev), seen = feri_tmpl_list_new(ev->rt, 0);
    if (lazy_failure(ev, v, &out)) return out;
    const feri_tmpl_list *l = feri_tmpl_iterate(ev, v);
    for (size_t i = 0; i < l->n; i++) {
      const feri_tmpl_value k = fold(&c, attribute ? attr_path(ev, l->items[i], *attribute) : l->items[i]);
      bool dup = false;
      for (size_t j = 0; j < seen.u.list->n && !dup; j++) dup = feri_tmpl_equal(seen.u.list->items[j], k);
      if (dup) continue;
      feri_tmpl_list_push(ev->rt, seen.u.list, k);
      feri_tmpl_list_push(ev->rt, out.u.list, l->items[i]);
    }
    return out;
  }
  if (!strcmp(f, "reverse")) {
    const feri_tmpl_list *l = feri_tmpl_iterate(ev, v);
    feri_tmpl_value out = feri_tmpl_list_new(ev->rt, l->n);
    for (size_t i = l->n; i-- > 0;) feri_tmpl_list_push(ev->rt, out.u.list, l->items[i]);
    if (v.kind == FERI_TMPL_STR) return join(ev, out.u.list, feri_tmpl_cstr(""));
    out.u.list->view = v.kind == FERI_TMPL_DICT ? "dict_reversekeyiterator" : "list_reverseiterator";
    return out;
  }
  if (!strcmp(f, "replace"))
    return replace(ev, text_of(ev, v), text_of(ev, arg_str(ev, a, 0, "old", "replace")), text_of(ev, arg_str(ev, a, 1, "new", "replace")),
                   arg_int(ev, a, 2, "count", -1));
  if (!strcmp(f, "indent")) {
    if (v.kind == FERI_TMPL_UNDEF) feri_tmpl_use_undef(ev, v);
    if (v.kind == FERI_TMPL_LIST && !v.u.list->view) feri_tmpl_error(ev, "'list' object has no attribute 'splitlines'");
    if (v.kind != FERI_TMPL_STR) feri_tmpl_error(ev, "unsupported operand type(s) for +=: '%s' and 'str'", feri_tmpl_type_name(v));
    return indent(ev, v, a);
  }
  if (!strcmp(f, "abs")) {
    if (v.kind == FERI_TMPL_INT) return v.u.i == INT64_MIN ? feri_tmpl_float(9.223372036854775808e18) : feri_tmpl_int(v.u.i < 0 ? -v.u.i : v.u.i);
    if (v.kind == FERI_TMPL_FLOAT) return feri_tmpl_float(v.u.f < 0 ? -v.u.f : v.u.f);
    if (v.kind == FERI_TMPL_BOOL) return feri_tmpl_int(v.u.b);
    feri_tmpl_error(ev, "bad operand type for abs(): '%s'", feri_tmpl_type_name(v));
  }
  if (!strcmp(f, "round")) return round_filter(ev, v, a);
  if (!strcmp(f, "sum")) {
    const feri_tmpl_value *attribute = arg(a, 0, "attribute"), *start = arg(a, 1, "start");
    feri_tmpl_value total = start ? *start : feri_tmpl_int(0);
    const feri_tmpl_list *l = feri_tmpl_iterate(ev, v);
    for (size_t i = 0; i < l->n; i++)
      total = feri_tmpl_binary(ev, "+", total, attribute && attribute->kind != FERI_TMPL_NONE ? attr_path(ev, l->items[i], *attribute) : l->items[i]);
    return total;
  }
  if (!strcmp(f, "min")) return min_max(ev, v, a, false);
  if (!strcmp(f, "max")) return min_max(ev, v, a, true);
  if (!strcmp(f, "wordcount")) {
    const feri_tmpl_value s = text_of(ev, v);
    int64_t words = 0;
    bool in_word = false;
    for (size_t i = 0; i < s.u.s.n; i++) {
      const char c = s.u.s.p[i];
      const bool w = (c >= '0' && c <= '9') || is_alpha(c) || c == '_' || (unsigned char)c >= 0x80;
      words += w && !in_word;
      in_word = w;
    }
    return feri_tmpl_int(words);
  }
  if (feri_tmpl_is_filter(f)) feri_tmpl_throw(ev->rt, FER_STATUS_UNSUPPORTED, "the filter '%s' is not supported", f);
  feri_tmpl_error(ev, "No filter named '%s' found.", f);
}
