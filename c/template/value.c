/* value.c: the arena, Python's truthiness, equality, ordering, str() and repr() of values. */
#include "template/value.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"

struct feri_tmpl_chunk {
  feri_tmpl_chunk *next;
  size_t cap, used;
  max_align_t data[];
};

enum { CHUNK_BYTES = 64 * 1024 };

void *feri_tmpl_alloc(feri_tmpl_rt *rt, size_t n) {
  n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
  if (n == 0) n = sizeof(max_align_t);
  if (rt->limit && (n > rt->limit || rt->used > rt->limit - n))
    feri_tmpl_throw(rt, FER_STATUS_BUDGET_EXCEEDED, "the template needs more than %zu bytes of memory", rt->limit);
  feri_tmpl_chunk *c = rt->chunks;
  if (!c || c->cap - c->used < n) {
    const size_t cap = n > CHUNK_BYTES / 2 ? n : CHUNK_BYTES;
    c = malloc(sizeof *c + cap);
    if (!c) feri_tmpl_throw(rt, FER_STATUS_OUT_OF_MEMORY, "out of memory");
    c->cap = cap;
    c->used = 0;
    if (cap == n && rt->chunks) { /* a large block: keep filling the current chunk after it */
      c->next = rt->chunks->next;
      rt->chunks->next = c;
    } else {
      c->next = rt->chunks;
      rt->chunks = c;
    }
  }
  void *p = (char *)c->data + c->used;
  c->used += n;
  rt->used += n;
  memset(p, 0, n);
  return p;
}

void feri_tmpl_rt_free(feri_tmpl_rt *rt) {
  for (feri_tmpl_chunk *c = rt->chunks, *next; c; c = next) {
    next = c->next;
    free(c);
  }
  rt->chunks = NULL;
  rt->used = 0;
}

void feri_tmpl_throw(feri_tmpl_rt *rt, fer_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(rt->message, sizeof rt->message, fmt, ap);
  va_end(ap);
  rt->status = st;
  longjmp(*rt->fail, 1);
}

void feri_tmpl_buf_put(feri_tmpl_rt *rt, feri_tmpl_buf *b, const char *s, size_t n) {
  if (b->cap - b->n <= n) {
    size_t cap = b->cap ? b->cap * 2 : 64;
    while (cap - b->n <= n) cap *= 2;
    char *p = feri_tmpl_alloc(rt, cap);
    if (b->n) memcpy(p, b->p, b->n);
    b->p = p;
    b->cap = cap;
  }
  if (n) memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = 0;
}

void feri_tmpl_buf_puts(feri_tmpl_rt *rt, feri_tmpl_buf *b, const char *s) { feri_tmpl_buf_put(rt, b, s, strlen(s)); }

void feri_tmpl_buf_printf(feri_tmpl_rt *rt, feri_tmpl_buf *b, const char *fmt, ...) {
  char tmp[256];
  va_list ap, again;
  va_start(ap, fmt);
  va_copy(again, ap);
  const int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n >= (int)sizeof tmp) {
    char *big = feri_tmpl_alloc(rt, (size_t)n + 1);
    vsnprintf(big, (size_t)n + 1, fmt, again);
    feri_tmpl_buf_put(rt, b, big, (size_t)n);
  } else if (n > 0) {
    feri_tmpl_buf_put(rt, b, tmp, (size_t)n);
  }
  va_end(again);
}

feri_tmpl_value feri_tmpl_undef(const char *why) { return (feri_tmpl_value){.kind = FERI_TMPL_UNDEF, .u.undef = why}; }
feri_tmpl_value feri_tmpl_none(void) { return (feri_tmpl_value){.kind = FERI_TMPL_NONE}; }
feri_tmpl_value feri_tmpl_bool(bool b) { return (feri_tmpl_value){.kind = FERI_TMPL_BOOL, .u.b = b}; }
feri_tmpl_value feri_tmpl_int(int64_t i) { return (feri_tmpl_value){.kind = FERI_TMPL_INT, .u.i = i}; }
feri_tmpl_value feri_tmpl_float(double f) { return (feri_tmpl_value){.kind = FERI_TMPL_FLOAT, .u.f = f}; }
feri_tmpl_value feri_tmpl_str(const char *p, size_t n) {
  return (feri_tmpl_value){.kind = FERI_TMPL_STR, .u.s = {p ? p : "", n}};
}
feri_tmpl_value feri_tmpl_cstr(const char *p) { return feri_tmpl_str(p, strlen(p)); }
feri_tmpl_value feri_tmpl_str_copy(feri_tmpl_rt *rt, const char *p, size_t n) {
  char *q = feri_tmpl_alloc(rt, n + 1);
  if (n) memcpy(q, p, n);
  return feri_tmpl_str(q, n);
}
feri_tmpl_value feri_tmpl_buf_value(const feri_tmpl_buf *b) { return feri_tmpl_str(b->p, b->n); }

feri_tmpl_value feri_tmpl_list_new(feri_tmpl_rt *rt, size_t cap) {
  feri_tmpl_list *l = feri_tmpl_alloc(rt, sizeof *l);
  if (cap) {
    l->items = feri_tmpl_alloc(rt, cap * sizeof *l->items);
    l->cap = cap;
  }
  return (feri_tmpl_value){.kind = FERI_TMPL_LIST, .u.list = l};
}

feri_tmpl_value feri_tmpl_dict_new(feri_tmpl_rt *rt, int kind) {
  feri_tmpl_dict *d = feri_tmpl_alloc(rt, sizeof *d);
  return (feri_tmpl_value){.kind = kind, .u.dict = d};
}

void feri_tmpl_list_push(feri_tmpl_rt *rt, feri_tmpl_list *l, feri_tmpl_value v) {
  if (l->n == l->cap) {
    const size_t cap = l->cap ? l->cap * 2 : 4;
    feri_tmpl_value *items = feri_tmpl_alloc(rt, cap * sizeof *items);
    if (l->n) memcpy(items, l->items, l->n * sizeof *items);
    l->items = items;
    l->cap = cap;
  }
  l->items[l->n++] = v;
}

static bool str_eq(feri_tmpl_value a, const char *p, size_t n) { return a.u.s.n == n && memcmp(a.u.s.p, p, n) == 0; }

feri_tmpl_value *feri_tmpl_dict_find(const feri_tmpl_dict *d, feri_tmpl_value key) {
  for (size_t i = 0; i < d->n; i++)
    if (feri_tmpl_equal(d->keys[i], key)) return &d->vals[i];
  return NULL;
}

feri_tmpl_value *feri_tmpl_dict_find_str(const feri_tmpl_dict *d, const char *key) {
  const size_t n = strlen(key);
  for (size_t i = 0; i < d->n; i++)
    if (d->keys[i].kind == FERI_TMPL_STR && str_eq(d->keys[i], key, n)) return &d->vals[i];
  return NULL;
}

void feri_tmpl_dict_set(feri_tmpl_rt *rt, feri_tmpl_dict *d, feri_tmpl_value key, feri_tmpl_value v) {
  feri_tmpl_value *old = feri_tmpl_dict_find(d, key);
  if (old) {
    *old = v;
    return;
  }
  if (d->n == d->cap) {
    const size_t cap = d->cap ? d->cap * 2 : 4;
    feri_tmpl_value *k = feri_tmpl_alloc(rt, cap * sizeof *k), *w = feri_tmpl_alloc(rt, cap * sizeof *w);
    if (d->n) memcpy(k, d->keys, d->n * sizeof *k), memcpy(w, d->vals, d->n * sizeof *w);
    d->keys = k;
    d->vals = w;
    d->cap = cap;
  }
  d->keys[d->n] = key;
  d->vals[d->n++] = v;
}

bool feri_tmpl_truthy(feri_tmpl_value v) {
  switch (v.kind) {
  case FERI_TMPL_BOOL: return v.u.b;
  case FERI_TMPL_INT: return v.u.i != 0;
  case FERI_TMPL_FLOAT: return v.u.f != 0;
  case FERI_TMPL_STR: return v.u.s.n != 0;
  case FERI_TMPL_LIST: return v.u.list->n != 0 || feri_tmpl_is_iterator(v);
  case FERI_TMPL_DICT: return v.u.dict->n != 0;
  case FERI_TMPL_NS:
  case FERI_TMPL_FUNC: return true;
  default: return false;
  }
}

bool feri_tmpl_is_iterator(feri_tmpl_value v) {
  return v.kind == FERI_TMPL_LIST && v.u.list->view && strncmp(v.u.list->view, "dict_", 5) != 0;
}

bool feri_tmpl_is_number(feri_tmpl_value v) {
  return v.kind == FERI_TMPL_INT || v.kind == FERI_TMPL_FLOAT || v.kind == FERI_TMPL_BOOL;
}

static double as_double(feri_tmpl_value v) {
  return v.kind == FERI_TMPL_FLOAT ? v.u.f : v.kind == FERI_TMPL_INT ? (double)v.u.i : (double)v.u.b;
}

static int64_t as_int(feri_tmpl_value v) { return v.kind == FERI_TMPL_INT ? v.u.i : (int64_t)v.u.b; }

bool feri_tmpl_equal(feri_tmpl_value a, feri_tmpl_value b) {
  if (feri_tmpl_is_number(a) && feri_tmpl_is_number(b)) {
    if (a.kind != FERI_TMPL_FLOAT && b.kind != FERI_TMPL_FLOAT) return as_int(a) == as_int(b);
    return as_double(a) == as_double(b);
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
  case FERI_TMPL_UNDEF:
  case FERI_TMPL_NONE: return true;
  case FERI_TMPL_STR: return str_eq(a, b.u.s.p, b.u.s.n);
  case FERI_TMPL_LIST:
    if (feri_tmpl_is_iterator(a) || feri_tmpl_is_iterator(b)) return a.u.list == b.u.list;
    if (a.u.list->n != b.u.list->n || a.u.list->tuple != b.u.list->tuple || a.u.list->view != b.u.list->view) return false;
    for (size_t i = 0; i < a.u.list->n; i++)
      if (!feri_tmpl_equal(a.u.list->items[i], b.u.list->items[i])) return false;
    return true;
  case FERI_TMPL_DICT:
    if (a.u.dict->n != b.u.dict->n) return false;
    for (size_t i = 0; i < a.u.dict->n; i++) {
      const feri_tmpl_value *w = feri_tmpl_dict_find(b.u.dict, a.u.dict->keys[i]);
      if (!w || !feri_tmpl_equal(a.u.dict->vals[i], *w)) return false;
    }
    return true;
  case FERI_TMPL_NS: return a.u.dict == b.u.dict;
  case FERI_TMPL_FUNC: return a.u.fn == b.u.fn;
  default: return false;
  }
}

const char *feri_tmpl_type_name(feri_tmpl_value v) {
  switch (v.kind) {
  case FERI_TMPL_UNDEF: return "Undefined";
  case FERI_TMPL_NONE: return "NoneType";
  case FERI_TMPL_BOOL: return "bool";
  case FERI_TMPL_INT: return "int";
  case FERI_TMPL_FLOAT: return "float";
  case FERI_TMPL_STR: return v.markup ? "Markup" : "str";
  case FERI_TMPL_LIST: return v.u.list->view ? v.u.list->view : v.u.list->tuple ? "tuple" : "list";
  case FERI_TMPL_DICT: return "dict";
  case FERI_TMPL_NS: return "Namespace";
  default: return "function";
  }
}

int feri_tmpl_compare(feri_tmpl_rt *rt, feri_tmpl_value a, feri_tmpl_value b, const char *op) {
  if (feri_tmpl_is_number(a) && feri_tmpl_is_number(b)) {
    if (a.kind != FERI_TMPL_FLOAT && b.kind != FERI_TMPL_FLOAT) return (as_int(a) > as_int(b)) - (as_int(a) < as_int(b));
    const double x = as_double(a), y = as_double(b);
    return (x > y) - (x < y);
  }
  if (a.kind == FERI_TMPL_STR && b.kind == FERI_TMPL_STR) {
    const size_t n = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
    const int c = n ? memcmp(a.u.s.p, b.u.s.p, n) : 0;
    if (c) return c;
    return (a.u.s.n > b.u.s.n) - (a.u.s.n < b.u.s.n);
  }
  if (a.kind == FERI_TMPL_LIST && b.kind == FERI_TMPL_LIST && a.u.list->tuple == b.u.list->tuple) {
    for (size_t i = 0; i < a.u.list->n && i < b.u.list->n; i++) {
      if (feri_tmpl_equal(a.u.list->items[i], b.u.list->items[i])) continue;
      return feri_tmpl_compare(rt, a.u.list->items[i], b.u.list->items[i], op);
    }
    return (a.u.list->n > b.u.list->n) - (a.u.list->n < b.u.list->n);
  }
  if (a.kind == FERI_TMPL_UNDEF) feri_tmpl_throw(rt, FER_STATUS_BAD_FORMAT, "%s", a.u.undef);
  if (b.kind == FERI_TMPL_UNDEF) feri_tmpl_throw(rt, FER_STATUS_BAD_FORMAT, "%s", b.u.undef);
  feri_tmpl_throw(rt, FER_STATUS_BAD_FORMAT, "'%s' not supported between instances of '%s' and '%s'", op,
                  feri_tmpl_type_name(a), feri_tmpl_type_name(b));
}

void feri_tmpl_float_repr(double f, char out[32]) {
  if (isnan(f)) {
    strcpy(out, "nan");
    return;
  }
  if (isinf(f)) {
    strcpy(out, f < 0 ? "-inf" : "inf");
    return;
  }
  char e[40];
  int prec = 1;
  for (; prec < 17; prec++) { /* the shortest digits that read back exactly */
    snprintf(e, sizeof e, "%.*e", prec - 1, f);
    if (strtod(e, NULL) == f) break;
  }
  snprintf(e, sizeof e, "%.*e", prec - 1, f);
  char digits[24];
  size_t nd = 0;
  const char *p = e;
  const bool neg = *p == '-';
  if (neg) p++;
  for (; *p && *p != 'e'; p++)
    if (*p != '.') digits[nd++] = *p;
  const int exp = atoi(p + 1);
  while (nd > 1 && digits[nd - 1] == '0') nd--;
  char *o = out;
  if (neg) *o++ = '-';
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      *o++ = '0', *o++ = '.';
      for (int k = -1; k > exp; k--) *o++ = '0';
      for (size_t k = 0; k < nd; k++) *o++ = digits[k];
    } else {
      for (int k = 0; k <= exp; k++) *o++ = (size_t)k < nd ? digits[k] : '0';
      *o++ = '.';
      if ((size_t)exp + 1 >= nd) *o++ = '0';
      for (size_t k = (size_t)exp + 1; k < nd; k++) *o++ = digits[k];
    }
    *o = 0;
    return;
  }
  *o++ = digits[0];
  if (nd > 1) {
    *o++ = '.';
    for (size_t k = 1; k < nd; k++) *o++ = digits[k];
  }
  sprintf(o, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
}

static void write_str_repr(feri_tmpl_rt *rt, feri_tmpl_buf *b, const char *s, size_t n) {
  const bool has_single = memchr(s, '\'', n) != NULL, has_double = memchr(s, '"', n) != NULL;
  const char q = has_single && !has_double ? '"' : '\'';
  feri_tmpl_buf_put(rt, b, &q, 1);
  for (size_t i = 0; i < n; i++) {
    const unsigned char c = (unsigned char)s[i];
    if (c == (unsigned char)q || c == '\\') {
      feri_tmpl_buf_put(rt, b, "\\", 1);
      feri_tmpl_buf_put(rt, b, s + i, 1);
    } else if (c == '\n') {
      feri_tmpl_buf_puts(rt, b, "\\n");
    } else if (c == '\r') {
      feri_tmpl_buf_puts(rt, b, "\\r");
    } else if (c == '\t') {
      feri_tmpl_buf_puts(rt, b, "\\t");
    } else if (c < 0x20 || c == 0x7f) {
      feri_tmpl_buf_printf(rt, b, "\\x%02x", c);
    } else {
      feri_tmpl_buf_put(rt, b, s + i, 1);
    }
  }
  feri_tmpl_buf_put(rt, b, &q, 1);
}

static void write_value(feri_tmpl_rt *rt, feri_tmpl_buf *b, feri_tmpl_value v, bool repr, int depth) {
  if (depth > 256) feri_tmpl_throw(rt, FER_STATUS_BAD_FORMAT, "maximum recursion depth exceeded while getting the repr of an object");
  char num[32];
  switch (v.kind) {
  case FERI_TMPL_UNDEF: break;
  case FERI_TMPL_NONE: feri_tmpl_buf_puts(rt, b, "None"); break;
  case FERI_TMPL_BOOL: feri_tmpl_buf_puts(rt, b, v.u.b ? "True" : "False"); break;
  case FERI_TMPL_INT: feri_tmpl_buf_printf(rt, b, "%lld", (long long)v.u.i); break;
  case FERI_TMPL_FLOAT:
    feri_tmpl_float_repr(v.u.f, num);
    feri_tmpl_buf_puts(rt, b, num);
    break;
  case FERI_TMPL_STR:
    if (repr) write_str_repr(rt, b, v.u.s.p, v.u.s.n);
    else feri_tmpl_buf_put(rt, b, v.u.s.p, v.u.s.n);
    break;
  case FERI_TMPL_LIST: {
    const feri_tmpl_list *l = v.u.list;
    if (feri_tmpl_is_iterator(v)) { /* Python adds the object's address: no output could match it */
      feri_tmpl_buf_printf(rt, b, "<%s object>", l->view);
      break;
    }
    if (l->view) feri_tmpl_buf_printf(rt, b, "%s(", l->view);
    feri_tmpl_buf_puts(rt, b, l->tuple ? "(" : "[");
    for (size_t i = 0; i < l->n; i++) {
      if (i) feri_tmpl_buf_puts(rt, b, ", ");
      write_value(rt, b, l->items[i], true, depth + 1);
    }
    feri_tmpl_buf_puts(rt, b, l->tuple ? (l->n == 1 ? ",)" : ")") : "]");
    if (l->view) feri_tmpl_buf_puts(rt, b, ")");
    break;
  }
  case FERI_TMPL_DICT: {
    const feri_tmpl_dict *d = v.u.dict;
    feri_tmpl_buf_puts(rt, b, "{");
    for (size_t i = 0; i < d->n; i++) {
      if (i) feri_tmpl_buf_puts(rt, b, ", ");
      write_value(rt, b, d->keys[i], true, depth + 1);
      feri_tmpl_buf_puts(rt, b, ": ");
      write_value(rt, b, d->vals[i], true, depth + 1);
    }
    feri_tmpl_buf_puts(rt, b, "}");
    break;
  }
  case FERI_TMPL_NS: {
    const feri_tmpl_dict *d = v.u.dict;
    feri_tmpl_buf_puts(rt, b, "<Namespace {");
    for (size_t i = 0; i < d->n; i++) {
      if (i) feri_tmpl_buf_puts(rt, b, ", ");
      write_value(rt, b, d->keys[i], true, depth + 1);
      feri_tmpl_buf_puts(rt, b, ": ");
      write_value(rt, b, d->vals[i], true, depth + 1);
    }
    feri_tmpl_buf_puts(rt, b, "}>");
    break;
  }
  default: feri_tmpl_buf_puts(rt, b, "<function>"); break;
  }
}

void feri_tmpl_write_str(feri_tmpl_rt *rt, feri_tmpl_buf *b, feri_tmpl_value v) { write_value(rt, b, v, false, 0); }
void feri_tmpl_write_repr(feri_tmpl_rt *rt, feri_tmpl_buf *b, feri_tmpl_value v) { write_value(rt, b, v, true, 0); }

feri_tmpl_value feri_tmpl_to_str(feri_tmpl_rt *rt, feri_tmpl_value v) {
  if (v.kind == FERI_TMPL_STR) return v;
  feri_tmpl_buf b = {0};
  feri_tmpl_write_str(rt, &b, v);
  return feri_tmpl_buf_value(&b);
}
