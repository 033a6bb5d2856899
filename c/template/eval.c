/* eval.c: walks the syntax tree as Jinja2's generated Python would run: Jinja2's scoping (a for
 * loop's body gets a fresh scope each iteration, if blocks none, macros their own), Python's
 * operators and truthiness, and jinja2.sandbox's refusals. */
#include "template/eval.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void feri_tmpl_error(feri_tmpl_eval *ev, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ev->rt->message, sizeof ev->rt->message, fmt, ap);
  va_end(ap);
  ev->rt->status = FER_STATUS_BAD_FORMAT;
  longjmp(*ev->rt->fail, 1);
}

void feri_tmpl_use_undef(feri_tmpl_eval *ev, feri_tmpl_value v) { feri_tmpl_error(ev, "%s", v.u.undef); }

size_t feri_tmpl_utf8_len(const char *s, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
  return k;
}

size_t feri_tmpl_utf8_offset(const char *s, size_t n, size_t k) {
  size_t i = 0;
  for (; i < n; i++)
    if (((unsigned char)s[i] & 0xC0) != 0x80 && k-- == 0) return i;
  return n;
}

static void step(feri_tmpl_eval *ev) {
  if (++ev->steps > ev->max_steps)
    feri_tmpl_throw(ev->rt, FER_STATUS_BUDGET_EXCEEDED, "the template ran more than %llu steps", (unsigned long long)ev->max_steps);
}

static void write_out(feri_tmpl_eval *ev, const char *s, size_t n) {
  if (ev->out->n + n > ev->max_output)
    feri_tmpl_throw(ev->rt, FER_STATUS_BUDGET_EXCEEDED, "the output exceeds %zu bytes", ev->max_output);
  feri_tmpl_buf_put(ev->rt, ev->out, s, n);
}

/* The "object type" Jinja2 names in an undefined's message ("dict object", "None"). */
static const char *type_repr(feri_tmpl_value v) {
  switch (v.kind) {
  case FERI_TMPL_NONE: return "None";
  case FERI_TMPL_NS: return "jinja2.utils.Namespace object";
  case FERI_TMPL_FUNC: return v.u.fn->kind == FERI_FUNC_MACRO ? "jinja2.runtime.Macro object" : "builtin_function_or_method object";
  default: {
    static const char *const NAMES[] = {"Undefined object", "None", "bool object", "int object", "float object",
                                        "str object", "list object", "dict object"};
    if (v.kind == FERI_TMPL_LIST && v.u.list->tuple) return "tuple object";
    return NAMES[v.kind];
  }
  }
}

static feri_tmpl_value no_attribute(feri_tmpl_eval *ev, feri_tmpl_value obj, const char *name) {
  const size_t n = strlen(name) + 64;
  char *msg = feri_tmpl_alloc(ev->rt, n);
  snprintf(msg, n, "'%s' has no attribute '%s'", type_repr(obj), name);
  return feri_tmpl_undef(msg);
}

static feri_tmpl_value no_element(feri_tmpl_eval *ev, feri_tmpl_value obj, feri_tmpl_value key) {
  feri_tmpl_buf b = {0};
  feri_tmpl_buf_printf(ev->rt, &b, "%s has no element ", type_repr(obj));
  feri_tmpl_write_repr(ev->rt, &b, key);
  return feri_tmpl_undef(b.p);
}

feri_tmpl_value feri_tmpl_getattr(feri_tmpl_eval *ev, feri_tmpl_value obj, const char *name) {
  if (obj.kind == FERI_TMPL_UNDEF) feri_tmpl_use_undef(ev, obj);
  feri_tmpl_value m;
  if (feri_tmpl_method(ev, obj, name, &m)) return m;
  if (obj.kind == FERI_TMPL_DICT || obj.kind == FERI_TMPL_NS) {
    const feri_tmpl_value *v = feri_tmpl_dict_find_str(obj.u.dict, name);
    if (v) return *v;
  }
  return no_attribute(ev, obj, name);
}

static int64_t list_index(int64_t i, size_t n) { return i < 0 ? i + (int64_t)n : i; }

feri_tmpl_value feri_tmpl_getitem(feri_tmpl_eval *ev, feri_tmpl_value obj, feri_tmpl_value key) {
  if (obj.kind == FERI_TMPL_UNDEF) feri_tmpl_use_undef(ev, obj);
  const bool int_key = key.kind == FERI_TMPL_INT || key.kind == FERI_TMPL_BOOL;
  const int64_t k = !int_key ? 0 : key.kind == FERI_TMPL_INT ? key.u.i : key.u.b;
  if (obj.kind == FERI_TMPL_DICT) {
    const feri_tmpl_value *v = feri_tmpl_dict_find(obj.u.dict, key);
    if (v) return *v;
  } else if (obj.kind == FERI_TMPL_LIST && obj.u.list->view) {
    return no_element(ev, obj, key);
  } else if (obj.kind == FERI_TMPL_LIST && int_key) {
    const int64_t i = list_index(k, obj.u.list->n);
    if (i >= 0 && (size_t)i < obj.u.list->n) return obj.u.list->items[i];
    return no_element(ev, obj, key);
  } else if (obj.kind == FERI_TMPL_STR && int_key) {
    const size_t len = feri_tmpl_utf8_len(obj.u.s.p, obj.u.s.n);
    const int64_t i = list_index(k, len);
    if (i < 0 || (size_t)i >= len) return no_element(ev, obj, key);
    const size_t a = feri_tmpl_utf8_offset(obj.u.s.p, obj.u.s.n, (size_t)i), b = feri_tmpl_utf8_offset(obj.u.s.p, obj.u.s.n, (size_t)i + 1);
    return feri_tmpl_str(obj.u.s.p + a, b - a);
  }
  if (key.kind == FERI_TMPL_STR) {
    char *name = feri_tmpl_alloc(ev->rt, key.u.s.n + 1);
    memcpy(name, key.u.s.p, key.u.s.n);
    if (strlen(name) == key.u.s.n) return feri_tmpl_getattr(ev, obj, name);
  }
  return no_element(ev, obj, key);
}

feri_tmpl_list *feri_tmpl_iterate(feri_tmpl_eval *ev, feri_tmpl_value v) {
  feri_tmpl_value out;
  switch (v.kind) {
  case FERI_TMPL_UNDEF: return feri_tmpl_list_new(ev->rt, 0).u.list;
  case FERI_TMPL_LIST:
    if (v.u.list->fail) feri_tmpl_error(ev, "%s", v.u.list->fail);
    if (feri_tmpl_is_iterator(v)) { /* an iterator runs once: the next loop over it sees nothing */
      feri_tmpl_list *items = feri_tmpl_alloc(ev->rt, sizeof *items);
      *items = *v.u.list;
      items->view = NULL;
      v.u.list->n = 0;
      v.u.list->cap = 0;
      v.u.list->items = NULL;
      return items;
    }
    return v.u.list;
  case FERI_TMPL_DICT:
    out = feri_tmpl_list_new(ev->rt, v.u.dict->n);
    for (size_t i = 0; i < v.u.dict->n; i++) feri_tmpl_list_push(ev->rt, out.u.list, v.u.dict->keys[i]);
    return out.u.list;
  case FERI_TMPL_STR:
    out = feri_tmpl_list_new(ev->rt, 0);
    for (size_t i = 0; i < v.u.s.n;) {
      size_t j = i + 1;
      while (j < v.u.s.n && ((unsigned char)v.u.s.p[j] & 0xC0) == 0x80) j++;
      feri_tmpl_list_push(ev->rt, out.u.list, feri_tmpl_str(v.u.s.p + i, j - i));
      i = j;
    }
    return out.u.list;
  default: feri_tmpl_error(ev, "'%s' object is not iterable", feri_tmpl_type_name(v));
  }
}

/* ---- operators ------------------------------------------------------------------------------ */

static bool is_intlike(feri_tmpl_value v) { return v.kind == FERI_TMPL_INT || v.kind == FERI_TMPL_BOOL; }
static int64_t int_of(feri_tmpl_value v) { return v.kind == FERI_TMPL_INT ? v.u.i : v.u.b; }
static double num_of(feri_tmpl_value v) { return v.kind == FERI_TMPL_FLOAT ? v.u.f : (double)int_of(v); }

static _Noreturn void unsupported(feri_tmpl_eval *ev, const char *op, feri_tmpl_value a, feri_tmpl_value b) {
  if (a.kind == FERI_TMPL_UNDEF) feri_tmpl_use_undef(ev, a);
  if (b.kind == FERI_TMPL_UNDEF) feri_tmpl_use_undef(ev, b);
  if (!strcmp(op, "+") && a.kind == FERI_TMPL_STR)
    feri_tmpl_error(ev, "can only concatenate str (not \"%s\") to str", feri_tmpl_type_name(b));
  if (!strcmp(op, "+") && a.kind == FERI_TMPL_LIST)
    feri_tmpl_error(ev, "can only concatenate %s (not \"%s\") to %s", feri_tmpl_type_name(a), feri_tmpl_type_name(b), feri_tmpl_type_name(a));
  feri_tmpl_error(ev, "unsupported operand type(s) for %s: '%s' and '%s'", op, feri_tmpl_type_name(a), feri_tmpl_type_name(b));
}

static feri_tmpl_value repeat(feri_tmpl_eval *ev, feri_tmpl_value seq, int64_t times) {
  if (times < 0) times = 0;
  if (seq.kind == FERI_TMPL_STR) {
    if (seq.u.s.n && (uint64_t)times > ev->max_output / seq.u.s.n)
      feri_tmpl_throw(ev->rt, FER_STATUS_BUDGET_EXCEEDED, "a repeated string exceeds %zu bytes", ev->max_output);
    feri_tmpl_buf b = {0};
    feri_tmpl_buf_put(ev->rt, &b, "", 0);
    for (int64_t k = 0; k < times; k++) feri_tmpl_buf_put(ev->rt, &b, seq.u.s.p, seq.u.s.n);
    return feri_tmpl_buf_value(&b);
  }
  if (seq.u.list->n && (uint64_t)times > ev->max_steps / seq.u.list->n)
    feri_tmpl_throw(ev->rt, FER_STATUS_BUDGET_EXCEEDED, "a repeated list is too long");
  feri_tmpl_value l = feri_tmpl_list_new(ev->rt, 0);
  l.u.list->tuple = seq.u.list->tuple;
  for (int64_t k = 0; k < times; k++)
    for (size_t i = 0; i < seq.u.list->n; i++) feri_tmpl_list_push(ev->rt, l.u.list, seq.u.list->items[i]);
  return l;
}

/* Python's ints are unbounded; past 64 bits the render fails rather than wraps. */
static feri_tmpl_value int_result(feri_tmpl_eval *ev, bool overflow, int64_t r) {
  if (overflow) feri_tmpl_throw(ev->rt, FER_STATUS_UNSUPPORTED, "integer result beyond 64 bits");
  return feri_tmpl_int(r);
}

static feri_tmpl_value int_arith(feri_tmpl_eval *ev, char op, int64_t x, int64_t y) {
  int64_t r = 0;
  const bool overflow = op == '+' ? __builtin_add_overflow(x, y, &r) : op == '-' ? __builtin_sub_overflow(x, y, &r)
                                                                                  : __builtin_mul_overflow(x, y, &r);
  return int_result(ev, overflow, r);
}

static feri_tmpl_value int_pow(feri_tmpl_eval *ev, int64_t base, int64_t e) {
  int64_t acc = 1;
  bool overflow = false;
  while (e > 0 && !overflow) { /* squaring only while more bits remain, so base overflows only if the result does */
    if (e & 1) overflow = __builtin_mul_overflow(acc, base, &acc);
    e >>= 1;
    if (e && !overflow) overflow = __builtin_mul_overflow(base, base, &base);
  }
  return int_result(ev, overflow, acc);
}

/* What precedes the bytes of a string that + made: how far they are used and how far they may
 * grow. "ns.s = ns.s + x" in a loop then appends in place (amortised linear, as CPython manages
 * it for a string nobody else holds) instead of copying the whole text each time; a second
 * string made from the same prefix finds used beyond its end and copies. */
typedef struct growth {
  size_t used, cap;
} growth;

static feri_tmpl_value concat(feri_tmpl_eval *ev, feri_tmpl_value a, feri_tmpl_value b) {
  const size_t n = a.u.s.n + b.u.s.n;
  growth *g = a.growable ? (growth *)(void *)(a.u.s.p - sizeof(growth)) : NULL;
  if (g && g->used == a.u.s.n && n < g->cap) {
    memcpy((char *)a.u.s.p + a.u.s.n, b.u.s.p, b.u.s.n);
    ((char *)a.u.s.p)[n] = 0;
    g->used = n;
    a.u.s.n = n;
    return a;
  }
  const size_t cap = n < 32 ? 64 : 2 * n;
  g = feri_tmpl_alloc(ev->rt, sizeof(growth) + cap);
  char *s = (char *)(g + 1);
  memcpy(s, a.u.s.p, a.u.s.n);
  memcpy(s + a.u.s.n, b.u.s.p, b.u.s.n);
  g->used = n;
  g->cap = cap;
  feri_tmpl_value sum = feri_tmpl_str(s, n);
  sum.markup = a.markup;
  sum.growable = true;
  return sum;
}

/* Python's printf-style str % args: %s %r %d %i %f %x %% with flags, width and precision; a
 * tuple gives the arguments, a dict the %(name)s ones, anything else is the one argument. */
static feri_tmpl_value percent_format(feri_tmpl_eval *ev, feri_tmpl_value fmt, feri_tmpl_value args) {
  const bool many = args.kind == FERI_TMPL_LIST && args.u.list->tuple;
  const size_t nargs = many ? args.u.list->n : 1;
  size_t next = 0;
  feri_tmpl_buf b = {0};
  feri_tmpl_buf_put(ev->rt, &b, "", 0);
  const char *p = fmt.u.s.p, *end = p + fmt.u.s.n;
  while (p < end) {
    if (*p != '%') {
      feri_tmpl_buf_put(ev->rt, &b, p++, 1);
      continue;
    }
    if (++p >= end) feri_tmpl_error(ev, "incomplete format");
    feri_tmpl_value v = {0};
    bool have = false;
    if (*p == '(') {
      const char *close = memchr(p, ')', (size_t)(end - p));
      if (!close) feri_tmpl_error(ev, "incomplete format key");
      if (args.kind != FERI_TMPL_DICT) feri_tmpl_error(ev, "format requires a mapping");
      const feri_tmpl_value *hit = feri_tmpl_dict_find(args.u.dict, feri_tmpl_str(p + 1, (size_t)(close - p - 1)));
      if (!hit) feri_tmpl_error(ev, "'%.*s'", (int)(close - p - 1 < 100 ? close - p - 1 : 100), p + 1);
      v = *hit;
      have = true;
      p = close + 1;
    }
    char spec[32] = "%";
    size_t k = 1;
    while (p < end && strchr("-+ #0123456789.", *p) && k < sizeof spec - 8) spec[k++] = *p++;
    if (p >= end) feri_tmpl_error(ev, "incomplete format");
    const char conv = *p++;
    if (conv == '%') {
      feri_tmpl_buf_put(ev->rt, &b, "%", 1);
      continue;
    }
    if (!have) {
      if (next >= nargs) feri_tmpl_error(ev, "not enough arguments for format string");
      v = many ? args.u.list->items[next] : args;
      next++;
    }
    if (conv == 's' || conv == 'r') {
      feri_tmpl_buf t = {0};
      feri_tmpl_buf_put(ev->rt, &t, "", 0);
      if (conv == 's') feri_tmpl_write_str(ev->rt, &t, v);
      else feri_tmpl_write_repr(ev->rt, &t, v);
      if (strchr(spec, '.')) feri_tmpl_error(ev, "a precision in %%%c is not supported", conv);
      spec[k++] = '.', spec[k++] = '*', spec[k++] = 's', spec[k] = 0; /* the width applies, the whole text is kept */
      feri_tmpl_buf_printf(ev->rt, &b, spec, (int)t.n, t.p);
    } else if (strchr("dixXfFeEgG", conv)) {
      if (!feri_tmpl_is_number(v)) feri_tmpl_error(ev, "%%%c format: a real number is required, not %s", conv, feri_tmpl_type_name(v));
      if (strchr("dixX", conv)) {
        spec[k++] = 'l', spec[k++] = 'l', spec[k++] = conv == 'i' ? 'd' : conv, spec[k] = 0;
        const long long i = v.kind == FERI_TMPL_FLOAT ? (long long)v.u.f : v.kind == FERI_TMPL_INT ? v.u.i : v.u.b;
        feri_tmpl_buf_printf(ev->rt, &b, spec, i);
      } else {
        spec[k++] = conv, spec[k] = 0;
        feri_tmpl_buf_printf(ev->rt, &b, spec, num_of(v));
      }
    } else {
      feri_tmpl_error(ev, "unsupported format character '%c'", conv);
    }
  }
  if ((many && next < nargs) || (!many && next == 0 && args.kind != FERI_TMPL_DICT))
    feri_tmpl_error(ev, "not all arguments converted during string formatting");
  return feri_tmpl_buf_value(&b);
}

feri_tmpl_value feri_tmpl_binary(feri_tmpl_eval *ev, const char *op, feri_tmpl_value a, feri_tmpl_value b) {
  const bool nums = feri_tmpl_is_number(a) && feri_tmpl_is_number(b), ints = is_intlike(a) && is_intlike(b);
  switch (op[0]) {
  case '+':
    if (ints) return int_arith(ev, '+', int_of(a), int_of(b));
    if (nums) return feri_tmpl_float(num_of(a) + num_of(b));
    if (a.kind == FERI_TMPL_STR && b.kind == FERI_TMPL_STR) {
      if (a.markup != b.markup) { /* Markup + str escapes the str */
        feri_tmpl_value sum = feri_tmpl_binary(ev, "+", feri_tmpl_escape(ev, a), feri_tmpl_escape(ev, b));
        sum.markup = true;
        return sum;
      }
      if (a.u.s.n + b.u.s.n > ev->max_output)
        feri_tmpl_throw(ev->rt, FER_STATUS_BUDGET_EXCEEDED, "a string exceeds %zu bytes", ev->max_output);
      return concat(ev, a, b);
    }
    if (a.kind == FERI_TMPL_LIST && b.kind == FERI_TMPL_LIST && a.u.list->tuple == b.u.list->tuple && !a.u.list->view && !b.u.list->view) {
      feri_tmpl_value l = feri_tmpl_list_new(ev->rt, a.u.list->n + b.u.list->n);
      l.u.list->tuple = a.u.list->tuple;
      for (size_t i = 0; i < a.u.list->n; i++) feri_tmpl_list_push(ev->rt, l.u.list, a.u.list->items[i]);
      for (size_t i = 0; i < b.u.list->n; i++) feri_tmpl_list_push(ev->rt, l.u.list, b.u.list->items[i]);
      return l;
    }
    break;
  case '-':
    if (ints) return int_arith(ev, '-', int_of(a), int_of(b));
    if (nums) return feri_tmpl_float(num_of(a) - num_of(b));
    break;
  case '*':
    if (op[1] == '*') {
      if (ints && int_of(b) >= 0) return int_pow(ev, int_of(a), int_of(b));
      if (nums) {
        if (num_of(a) == 0 && num_of(b) < 0) feri_tmpl_error(ev, "0.0 cannot be raised to a negative power");
        return feri_tmpl_float(pow(num_of(a), num_of(b)));
      }
      break;
    }
    if (ints) return int_arith(ev, '*', int_of(a), int_of(b));
    if (nums) return feri_tmpl_float(num_of(a) * num_of(b));
    if ((a.kind == FERI_TMPL_STR || (a.kind == FERI_TMPL_LIST && !a.u.list->view)) && is_intlike(b)) return repeat(ev, a, int_of(b));
    if ((b.kind == FERI_TMPL_STR || (b.kind == FERI_TMPL_LIST && !b.u.list->view)) && is_intlike(a)) return repeat(ev, b, int_of(a));
    break;
  case '/':
    if (!nums) break;
    if (num_of(b) == 0) feri_tmpl_error(ev, op[1] ? "integer division or modulo by zero" : "division by zero");
    if (op[1] == 0) return feri_tmpl_float(num_of(a) / num_of(b));
    if (ints) {
      if (int_of(a) == INT64_MIN && int_of(b) == -1) return int_result(ev, true, 0);
      int64_t q = int_of(a) / int_of(b);
      if ((int_of(a) % int_of(b) != 0) && ((int_of(a) < 0) != (int_of(b) < 0))) q--;
      return feri_tmpl_int(q);
    }
    return feri_tmpl_float(floor(num_of(a) / num_of(b)));
  case '%':
    if (a.kind == FERI_TMPL_STR) return percent_format(ev, a, b);
    if (!nums) break;
    if (num_of(b) == 0) feri_tmpl_error(ev, "integer modulo by zero");
    if (ints) {
      if (int_of(b) == -1) return feri_tmpl_int(0);
      int64_t m = int_of(a) % int_of(b);
      if (m != 0 && ((m < 0) != (int_of(b) < 0))) m += int_of(b);
      return feri_tmpl_int(m);
    } else {
      double m = fmod(num_of(a), num_of(b));
      if (m != 0 && ((m < 0) != (num_of(b) < 0))) m += num_of(b);
      return feri_tmpl_float(m);
    }
  default: break;
  }
  unsupported(ev, op, a, b);
}

static bool contains(feri_tmpl_eval *ev, feri_tmpl_value item, feri_tmpl_value seq) {
  switch (seq.kind) {
  case FERI_TMPL_UNDEF: return false;
  case FERI_TMPL_STR:
    if (item.kind != FERI_TMPL_STR) feri_tmpl_error(ev, "'in <string>' requires string as left operand, not %s", feri_tmpl_type_name(item));
    return item.u.s.n == 0 || memmem(seq.u.s.p, seq.u.s.n, item.u.s.p, item.u.s.n) != NULL;
  case FERI_TMPL_LIST:
    for (size_t i = 0; i < seq.u.list->n; i++)
      if (feri_tmpl_equal(seq.u.list->items[i], item)) return true;
    return false;
  case FERI_TMPL_DICT:
    if ((item.kind == FERI_TMPL_LIST && !item.u.list->tuple) || item.kind == FERI_TMPL_DICT)
      feri_tmpl_error(ev, "unhashable type: '%s'", feri_tmpl_type_name(item));
    return feri_tmpl_dict_find(seq.u.dict, item) != NULL;
  default: feri_tmpl_error(ev, "argument of type '%s' is not iterable", feri_tmpl_type_name(seq));
  }
}

static bool compare_op(feri_tmpl_eval *ev, const char *op, feri_tmpl_value a, feri_tmpl_value b) {
  if (!strcmp(op, "==")) return feri_tmpl_equal(a, b);
  if (!strcmp(op, "!=")) return !feri_tmpl_equal(a, b);
  if (!strcmp(op, "in")) return contains(ev, a, b);
  if (!strcmp(op, "not in")) return !contains(ev, a, b);
  const int c = feri_tmpl_compare(ev->rt, a, b, op);
  if (!strcmp(op, "<")) return c < 0;
  if (!strcmp(op, "<=")) return c <= 0;
  if (!strcmp(op, ">")) return c > 0;
  return c >= 0;
}

/* ---- expressions ---------------------------------------------------------------------------- */

static feri_tmpl_value eval(feri_tmpl_eval *ev, const feri_tmpl_node *n);

static feri_tmpl_value lookup(feri_tmpl_eval *ev, const char *name) {
  for (feri_tmpl_frame *f = ev->frame; f; f = f->parent) {
    const feri_tmpl_value *v = feri_tmpl_dict_find_str(&f->vars, name);
    if (v) return *v;
  }
  feri_tmpl_value g;
  if (feri_tmpl_global(ev, name, &g)) return g;
  const size_t n = strlen(name) + 20;
  char *msg = feri_tmpl_alloc(ev->rt, n);
  snprintf(msg, n, "'%s' is undefined", name);
  return feri_tmpl_undef(msg);
}

static void assign(feri_tmpl_eval *ev, const char *name, feri_tmpl_value v) {
  feri_tmpl_dict_set(ev->rt, &ev->frame->vars, feri_tmpl_cstr(name), v);
}

static void eval_args(feri_tmpl_eval *ev, const feri_tmpl_nodes *nodes, feri_tmpl_args *args) {
  memset(args, 0, sizeof *args);
  args->pos = feri_tmpl_alloc(ev->rt, (nodes->n + 1) * sizeof *args->pos);
  args->kw = feri_tmpl_alloc(ev->rt, (nodes->n + 1) * sizeof *args->kw);
  args->names = feri_tmpl_alloc(ev->rt, (nodes->n + 1) * sizeof *args->names);
  for (size_t i = 0; i < nodes->n; i++) {
    const feri_tmpl_node *a = nodes->v[i];
    if (a->kind == FERI_N_KWARG) {
      args->names[args->nkw] = a->name;
      args->kw[args->nkw++] = eval(ev, a->a);
    } else {
      args->pos[args->n++] = eval(ev, a);
    }
  }
}

static feri_tmpl_value slice(feri_tmpl_eval *ev, feri_tmpl_value obj, const feri_tmpl_node *n) {
  if (obj.kind == FERI_TMPL_UNDEF) feri_tmpl_use_undef(ev, obj);
  if (obj.kind != FERI_TMPL_STR && (obj.kind != FERI_TMPL_LIST || obj.u.list->view)) /* Jinja2 slices with Python's [] */
    feri_tmpl_error(ev, "'%s' object is not subscriptable", feri_tmpl_type_name(obj));
  const feri_tmpl_node *parts[3] = {n->b, n->c, n->d};
  int64_t v[3] = {0, 0, 1};
  bool given[3] = {false, false, false};
  for (int k = 0; k < 3; k++) {
    if (!parts[k]) continue;
    const feri_tmpl_value x = eval(ev, parts[k]);
    if (x.kind == FERI_TMPL_NONE) continue;
    if (!is_intlike(x)) feri_tmpl_error(ev, "slice indices must be integers or None or have an __index__ method");
    v[k] = int_of(x);
    given[k] = true;
  }
  if (v[2] == 0) feri_tmpl_error(ev, "slice step cannot be zero");
  const int64_t len = (int64_t)(obj.kind == FERI_TMPL_STR ? feri_tmpl_utf8_len(obj.u.s.p, obj.u.s.n) : obj.u.list->n);
  const int64_t stepv = v[2];
  int64_t start, stop;
  if (!given[0]) start = stepv > 0 ? 0 : len - 1;
  else {
    start = v[0] < 0 ? v[0] + len : v[0];
    if (start < 0) start = stepv > 0 ? 0 : -1;
    if (start >= len) start = stepv > 0 ? len : len - 1;
  }
  if (!given[1]) stop = stepv > 0 ? len : -1;
  else {
    stop = v[1] < 0 ? v[1] + len : v[1];
    if (stop < 0) stop = stepv > 0 ? 0 : -1;
    if (stop >= len) stop = stepv > 0 ? len : len - 1;
  }
  feri_tmpl_list *items = feri_tmpl_iterate(ev, obj);
  feri_tmpl_value out = feri_tmpl_list_new(ev->rt, 0);
  out.u.list->tuple = obj.kind == FERI_TMPL_LIST && obj.u.list->tuple;
  for (int64_t i = start; stepv > 0 ? i < stop : i > stop; i += stepv) feri_tmpl_list_push(ev->rt, out.u.list, items->items[i]);
  if (obj.kind == FERI_TMPL_LIST) return out;
  feri_tmpl_buf b = {0};
  feri_tmpl_buf_put(ev->rt, &b, "", 0);
  for (size_t i = 0; i < out.u.list->n; i++) feri_tmpl_buf_put(ev->rt, &b, out.u.list->items[i].u.s.p, out.u.list->items[i].u.s.n);
  return feri_tmpl_buf_value(&b);
}

/* A filter chain over a block's rendered body (the innermost filter's operand is NULL). */
static feri_tmpl_value apply_filters(feri_tmpl_eval *ev, const feri_tmpl_node *f, feri_tmpl_value body) {
  if (!f) return body;
  const feri_tmpl_value v = apply_filters(ev, f->a, body);
  feri_tmpl_args args;
  eval_args(ev, &f->args, &args);
  return feri_tmpl_filter(ev, f->name, v, &args);
}

static feri_tmpl_value eval(feri_tmpl_eval *ev, const feri_tmpl_node *n) {
  step(ev);
  feri_tmpl_value a, b;
  feri_tmpl_args args;
  switch (n->kind) {
  case FERI_N_CONST: return n->value;
  case FERI_N_NAME: return lookup(ev, n->name);
  case FERI_N_ATTR: return feri_tmpl_getattr(ev, eval(ev, n->a), n->name);
  case FERI_N_ITEM:
    a = eval(ev, n->a);
    return feri_tmpl_getitem(ev, a, eval(ev, n->b));
  case FERI_N_SLICE: return slice(ev, eval(ev, n->a), n);
  case FERI_N_CALL:
    a = eval(ev, n->a);
    eval_args(ev, &n->args, &args);
    return feri_tmpl_call(ev, a, &args);
  case FERI_N_FILTER:
    a = eval(ev, n->a);
    eval_args(ev, &n->args, &args);
    return feri_tmpl_filter(ev, n->name, a, &args);
  case FERI_N_TEST:
    a = eval(ev, n->a);
    eval_args(ev, &n->args, &args);
    return feri_tmpl_bool(feri_tmpl_test(ev, n->name, a, &args) != n->negated);
  case FERI_N_BINARY:
    a = eval(ev, n->a);
    b = eval(ev, n->b);
    return feri_tmpl_binary(ev, n->name, a, b);
  case FERI_N_NEG:
  case FERI_N_POS:
    a = eval(ev, n->a);
    if (a.kind == FERI_TMPL_UNDEF) feri_tmpl_use_undef(ev, a);
    if (!feri_tmpl_is_number(a)) feri_tmpl_error(ev, "bad operand type for unary %s: '%s'", n->kind == FERI_N_NEG ? "-" : "+", feri_tmpl_type_name(a));
    if (n->kind == FERI_N_POS) return a.kind == FERI_TMPL_BOOL ? feri_tmpl_int(a.u.b) : a;
    if (a.kind == FERI_TMPL_FLOAT) return feri_tmpl_float(-a.u.f);
    return int_result(ev, int_of(a) == INT64_MIN, -int_of(a));
  case FERI_N_NOT: return feri_tmpl_bool(!feri_tmpl_truthy(eval(ev, n->a)));
  case FERI_N_AND:
    a = eval(ev, n->a);
    return feri_tmpl_truthy(a) ? eval(ev, n->b) : a;
  case FERI_N_OR:
    a = eval(ev, n->a);
    return feri_tmpl_truthy(a) ? a : eval(ev, n->b);
  case FERI_N_COMPARE:
    a = eval(ev, n->a);
    for (size_t i = 0; i < n->args.n; i++) {
      b = eval(ev, n->args.v[i]->a);
      if (!compare_op(ev, n->args.v[i]->name, a, b)) return feri_tmpl_bool(false);
      a = b;
    }
    return feri_tmpl_bool(true);
  case FERI_N_COND:
    if (feri_tmpl_truthy(eval(ev, n->a))) return eval(ev, n->b);
    if (n->c) return eval(ev, n->c);
    return feri_tmpl_undef("the inline if expression evaluated to false and no else section was defined.");
  case FERI_N_LIST:
  case FERI_N_TUPLE:
    a = feri_tmpl_list_new(ev->rt, n->args.n);
    a.u.list->tuple = n->kind == FERI_N_TUPLE;
    for (size_t i = 0; i < n->args.n; i++) feri_tmpl_list_push(ev->rt, a.u.list, eval(ev, n->args.v[i]));
    return a;
  case FERI_N_DICT:
    a = feri_tmpl_dict_new(ev->rt, FERI_TMPL_DICT);
    for (size_t i = 0; i < n->args.n; i++) {
      const feri_tmpl_value k = eval(ev, n->args.v[i]->a);
      if (k.kind == FERI_TMPL_LIST && !k.u.list->tuple) feri_tmpl_error(ev, "unhashable type: 'list'");
      if (k.kind == FERI_TMPL_DICT) feri_tmpl_error(ev, "unhashable type: 'dict'");
      feri_tmpl_dict_set(ev->rt, a.u.dict, k, eval(ev, n->args.v[i]->b));
    }
    return a;
  case FERI_N_CONCAT: {
    feri_tmpl_buf s = {0};
    feri_tmpl_buf_put(ev->rt, &s, "", 0);
    for (size_t i = 0; i < n->args.n; i++) {
      feri_tmpl_write_str(ev->rt, &s, eval(ev, n->args.v[i]));
      if (s.n > ev->max_output) feri_tmpl_throw(ev->rt, FER_STATUS_BUDGET_EXCEEDED, "a string exceeds %zu bytes", ev->max_output);
    }
    return feri_tmpl_buf_value(&s);
  }
  default: feri_tmpl_error(ev, "line %d: not an expression", n->line);
  }
}

/* ---- calls ---------------------------------------------------------------------------------- */

static void enter(feri_tmpl_eval *ev) {
  if (++ev->depth > ev->max_depth)
    feri_tmpl_throw(ev->rt, FER_STATUS_BUDGET_EXCEEDED, "maximum recursion depth (%d) exceeded", ev->max_depth);
}

/* Runs body in a fresh buffer and gives the text (a macro's value, a block set's). */
static feri_tmpl_value capture(feri_tmpl_eval *ev, const feri_tmpl_nodes *body) {
  feri_tmpl_buf *saved = ev->out, b = {0};
  feri_tmpl_buf_put(ev->rt, &b, "", 0);
  ev->out = &b;
  feri_tmpl_exec(ev, body);
  ev->out = saved;
  return feri_tmpl_buf_value(&b);
}

/* capture in a scope of its own: what a block set's or a filter block's body sets stays in it. */
static feri_tmpl_value capture_scoped(feri_tmpl_eval *ev, const feri_tmpl_nodes *body) {
  feri_tmpl_frame *saved = ev->frame, *f = feri_tmpl_alloc(ev->rt, sizeof *f);
  f->parent = saved;
  ev->frame = f;
  const feri_tmpl_value v = capture(ev, body);
  ev->frame = saved;
  return v;
}

static feri_tmpl_value call_macro(feri_tmpl_eval *ev, const feri_tmpl_func *fn, const feri_tmpl_args *args) {
  const feri_tmpl_node *m = fn->node;
  const char *name = m->kind == FERI_S_MACRO ? m->name : "caller";
  if (args->n > m->args.n) feri_tmpl_error(ev, "macro '%s' takes not more than %zu argument(s)", name, m->args.n);
  enter(ev);
  feri_tmpl_frame *saved = ev->frame, *f = feri_tmpl_alloc(ev->rt, sizeof *f);
  f->parent = fn->closure;
  ev->frame = f;
  for (size_t k = 0; k < args->nkw; k++) {
    bool known = false;
    for (size_t i = 0; i < m->args.n && !known; i++) known = !strcmp(m->args.v[i]->name, args->names[k]);
    if (!known) feri_tmpl_error(ev, "macro '%s' takes no keyword argument '%s'", name, args->names[k]);
  }
  for (size_t i = 0; i < m->args.n; i++) {
    const feri_tmpl_node *p = m->args.v[i];
    feri_tmpl_value v = feri_tmpl_none();
    bool given = false;
    if (i < args->n) {
      v = args->pos[i];
      given = true;
    }
    for (size_t k = 0; k < args->nkw; k++)
      if (!strcmp(p->name, args->names[k])) {
        if (given) feri_tmpl_error(ev, "macro '%s' got multiple values for argument '%s'", name, p->name);
        v = args->kw[k];
        given = true;
      }
    if (!given) {
      if (p->a) {
        v = eval(ev, p->a);
      } else {
        const size_t len = strlen(p->name) + 80;
        char *msg = feri_tmpl_alloc(ev->rt, len);
        snprintf(msg, len, "parameter '%s' was not provided", p->name);
        v = feri_tmpl_undef(msg);
      }
    }
    assign(ev, p->name, v);
  }
  if (fn->caller.kind == FERI_TMPL_FUNC) assign(ev, "caller", fn->caller);
  const int saved_control = ev->loop_control;
  const feri_tmpl_value out = capture(ev, &m->body);
  ev->loop_control = saved_control;
  ev->frame = saved;
  ev->depth--;
  return out;
}

feri_tmpl_value feri_tmpl_call(feri_tmpl_eval *ev, feri_tmpl_value fn, const feri_tmpl_args *args) {
  if (fn.kind == FERI_TMPL_UNDEF) feri_tmpl_use_undef(ev, fn);
  if (fn.kind != FERI_TMPL_FUNC) feri_tmpl_error(ev, "'%s' object is not callable", feri_tmpl_type_name(fn));
  if (fn.u.fn->kind == FERI_FUNC_MACRO) return call_macro(ev, fn.u.fn, args);
  return feri_tmpl_call_builtin(ev, fn.u.fn, args);
}

/* ---- statements ----------------------------------------------------------------------------- */

static void unpack(feri_tmpl_eval *ev, const feri_tmpl_node *target, feri_tmpl_value v) {
  if (target->kind == FERI_N_NAME) {
    assign(ev, target->name, v);
    return;
  }
  const feri_tmpl_list *items = feri_tmpl_iterate(ev, v);
  if (items->n != target->args.n)
    feri_tmpl_error(ev, items->n > target->args.n ? "too many values to unpack (expected %zu)" : "not enough values to unpack (expected %zu, got %zu)",
                    target->args.n, items->n);
  for (size_t i = 0; i < items->n; i++) assign(ev, target->args.v[i]->name, items->items[i]);
}

static void exec_for(feri_tmpl_eval *ev, const feri_tmpl_node *n) {
  const feri_tmpl_list *all = feri_tmpl_iterate(ev, eval(ev, n->a));
  feri_tmpl_frame *saved = ev->frame;
  const feri_tmpl_list *items = all;
  if (n->b) { /* the if clause filters before the loop counts */
    feri_tmpl_value kept = feri_tmpl_list_new(ev->rt, 0);
    for (size_t i = 0; i < all->n; i++) {
      feri_tmpl_frame *f = feri_tmpl_alloc(ev->rt, sizeof *f);
      f->parent = saved;
      ev->frame = f;
      unpack(ev, n->target, all->items[i]);
      if (feri_tmpl_truthy(eval(ev, n->b))) feri_tmpl_list_push(ev->rt, kept.u.list, all->items[i]);
      ev->frame = saved;
    }
    items = kept.u.list;
  }
  const size_t len = items->n;
  for (size_t i = 0; i < len; i++) {
    step(ev);
    feri_tmpl_frame *f = feri_tmpl_alloc(ev->rt, sizeof *f);
    f->parent = saved;
    ev->frame = f;
    feri_tmpl_value loop = feri_tmpl_dict_new(ev->rt, FERI_TMPL_DICT);
    feri_tmpl_dict *d = loop.u.dict;
    feri_tmpl_dict_set(ev->rt, d, feri_tmpl_cstr("index"), feri_tmpl_int((int64_t)i + 1));
    feri_tmpl_dict_set(ev->rt, d, feri_tmpl_cstr("index0"), feri_tmpl_int((int64_t)i));
    feri_tmpl_dict_set(ev->rt, d, feri_tmpl_cstr("revindex"), feri_tmpl_int((int64_t)(len - i)));
    feri_tmpl_dict_set(ev->rt, d, feri_tmpl_cstr("revindex0"), feri_tmpl_int((int64_t)(len - i - 1)));
    feri_tmpl_dict_set(ev->rt, d, feri_tmpl_cstr("first"), feri_tmpl_bool(i == 0));
    feri_tmpl_dict_set(ev->rt, d, feri_tmpl_cstr("last"), feri_tmpl_bool(i + 1 == len));
    feri_tmpl_dict_set(ev->rt, d, feri_tmpl_cstr("length"), feri_tmpl_int((int64_t)len));
    feri_tmpl_dict_set(ev->rt, d, feri_tmpl_cstr("depth"), feri_tmpl_int(1));
    feri_tmpl_dict_set(ev->rt, d, feri_tmpl_cstr("depth0"), feri_tmpl_int(0));
    feri_tmpl_dict_set(ev->rt, d, feri_tmpl_cstr("previtem"), i > 0 ? items->items[i - 1] : feri_tmpl_undef("there is no previous item"));
    feri_tmpl_dict_set(ev->rt, d, feri_tmpl_cstr("nextitem"), i + 1 < len ? items->items[i + 1] : feri_tmpl_undef("there is no next item"));
    feri_tmpl_func *cycle = feri_tmpl_alloc(ev->rt, sizeof *cycle);
    cycle->kind = FERI_FUNC_CYCLE;
    cycle->name = "cycle";
    cycle->self = feri_tmpl_int((int64_t)i);
    feri_tmpl_dict_set(ev->rt, d, feri_tmpl_cstr("cycle"), (feri_tmpl_value){.kind = FERI_TMPL_FUNC, .u.fn = cycle});
    assign(ev, "loop", loop);
    unpack(ev, n->target, items->items[i]);
    feri_tmpl_exec(ev, &n->body);
    ev->frame = saved;
    const int control = ev->loop_control;
    ev->loop_control = 0;
    if (control == 1) break;
  }
  if (len == 0) feri_tmpl_exec(ev, &n->orelse);
}

static void exec_set(feri_tmpl_eval *ev, const feri_tmpl_node *target, feri_tmpl_value v) {
  if (target->kind != FERI_N_ATTR) {
    unpack(ev, target, v);
    return;
  }
  const feri_tmpl_value ns = lookup(ev, target->a->name);
  if (ns.kind != FERI_TMPL_NS) feri_tmpl_error(ev, "cannot assign attribute on non-namespace object");
  feri_tmpl_dict_set(ev->rt, ns.u.dict, feri_tmpl_cstr(target->name), v);
}

static feri_tmpl_value make_macro(feri_tmpl_eval *ev, const feri_tmpl_node *n) {
  feri_tmpl_func *fn = feri_tmpl_alloc(ev->rt, sizeof *fn);
  fn->kind = FERI_FUNC_MACRO;
  fn->name = n->kind == FERI_S_MACRO ? n->name : "caller";
  fn->node = n;
  fn->closure = ev->frame;
  return (feri_tmpl_value){.kind = FERI_TMPL_FUNC, .u.fn = fn};
}

static void exec_call_block(feri_tmpl_eval *ev, const feri_tmpl_node *n) {
  const feri_tmpl_value callee = eval(ev, n->a->a);
  feri_tmpl_args args;
  eval_args(ev, &n->a->args, &args);
  if (callee.kind == FERI_TMPL_UNDEF) feri_tmpl_use_undef(ev, callee);
  if (callee.kind != FERI_TMPL_FUNC || callee.u.fn->kind != FERI_FUNC_MACRO)
    feri_tmpl_error(ev, "a call block calls a macro, not '%s'", feri_tmpl_type_name(callee));
  feri_tmpl_func bound = *callee.u.fn;
  bound.caller = make_macro(ev, n);
  const feri_tmpl_value v = call_macro(ev, &bound, &args);
  write_out(ev, v.u.s.p, v.u.s.n);
}

void feri_tmpl_exec(feri_tmpl_eval *ev, const feri_tmpl_nodes *body) {
  enter(ev);
  for (size_t i = 0; i < body->n && !ev->loop_control; i++) {
    const feri_tmpl_node *n = body->v[i];
    step(ev);
    switch (n->kind) {
    case FERI_S_TEXT: write_out(ev, n->value.u.s.p, n->value.u.s.n); break;
    case FERI_S_OUTPUT: {
      const feri_tmpl_value v = eval(ev, n->a);
      if (v.kind == FERI_TMPL_STR) {
        write_out(ev, v.u.s.p, v.u.s.n);
      } else {
        const feri_tmpl_value s = feri_tmpl_to_str(ev->rt, v);
        write_out(ev, s.u.s.p, s.u.s.n);
      }
      break;
    }
    case FERI_S_IF: feri_tmpl_exec(ev, feri_tmpl_truthy(eval(ev, n->a)) ? &n->body : &n->orelse); break;
    case FERI_S_FOR: exec_for(ev, n); break;
    case FERI_S_SET: exec_set(ev, n->target, eval(ev, n->a)); break;
    case FERI_S_SETBLOCK: exec_set(ev, n->target, apply_filters(ev, n->b, capture_scoped(ev, &n->body))); break;
    case FERI_S_MACRO: assign(ev, n->name, make_macro(ev, n)); break;
    case FERI_S_CALLBLOCK: exec_call_block(ev, n); break;
    case FERI_S_FILTERBLOCK: {
      const feri_tmpl_value v = feri_tmpl_to_str(ev->rt, apply_filters(ev, n->b, capture_scoped(ev, &n->body)));
      write_out(ev, v.u.s.p, v.u.s.n);
      break;
    }
    case FERI_S_BREAK: ev->loop_control = 1; break;
    case FERI_S_CONTINUE: ev->loop_control = 2; break;
    default: feri_tmpl_error(ev, "line %d: not a statement", n->line);
    }
  }
  ev->depth--;
}
