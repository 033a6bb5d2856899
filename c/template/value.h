/* value.h: the values a template computes with (Python's, as Jinja2 sees them), the per-render
 * arena they live in, and the runtime's error exit. Every allocation of a render comes from one
 * arena freed at its end, so an error raised anywhere (a longjmp to the render's entry) leaks
 * nothing. */
#ifndef FERI_TEMPLATE_VALUE_H
#define FERI_TEMPLATE_VALUE_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferrite.h"

typedef struct feri_tmpl_chunk feri_tmpl_chunk;

/* The arena and the error exit of one parse or one render. */
typedef struct feri_tmpl_rt {
  feri_tmpl_chunk *chunks;
  size_t used, limit; /* bytes handed out; the render fails past limit */
  jmp_buf *fail;      /* where feri_tmpl_throw jumps */
  fer_status status;
  bool raised;        /* the template called raise_exception */
  char message[1024];
} feri_tmpl_rt;

void *feri_tmpl_alloc(feri_tmpl_rt *rt, size_t n);
void feri_tmpl_rt_free(feri_tmpl_rt *rt);
/* Records the message and jumps to rt->fail; never returns. */
_Noreturn void feri_tmpl_throw(feri_tmpl_rt *rt, fer_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

enum feri_tmpl_kind {
  FERI_TMPL_UNDEF,
  FERI_TMPL_NONE,
  FERI_TMPL_BOOL,
  FERI_TMPL_INT,
  FERI_TMPL_FLOAT,
  FERI_TMPL_STR,
  FERI_TMPL_LIST, /* also tuples (list->tuple) */
  FERI_TMPL_DICT,
  FERI_TMPL_NS, /* namespace(): a dict whose attributes may be assigned */
  FERI_TMPL_FUNC,
};

typedef struct feri_tmpl_list feri_tmpl_list;
typedef struct feri_tmpl_dict feri_tmpl_dict;
typedef struct feri_tmpl_func feri_tmpl_func;

typedef struct feri_tmpl_value {
  int kind;
  bool markup; /* a str marked safe (markupsafe.Markup): what is added to it gets HTML-escaped */
  bool growable; /* a str that + made: its bytes follow a feri_tmpl_growth header */
  union {
    bool b;
    int64_t i;
    double f;
    struct {
      const char *p;
      size_t n;
    } s;
    feri_tmpl_list *list;
    feri_tmpl_dict *dict;
    feri_tmpl_func *fn;
    const char *undef; /* why it is undefined: the error message raised when it is used */
  } u;
} feri_tmpl_value;

struct feri_tmpl_list {
  feri_tmpl_value *items;
  size_t n, cap;
  bool tuple;
  /* Not a list but what Python has there: a lazy iterator ("generator" from map and select,
   * "list_reverseiterator") or a dict view ("dict_items"). They iterate like the list, but have
   * no len() (iterators) and are not JSON serializable, and an iterator is always true. */
  const char *view;
  const char *fail; /* a generator whose first step raises this message (Jinja2's are lazy) */
};

struct feri_tmpl_dict {
  feri_tmpl_value *keys, *vals;
  size_t n, cap;
};

/* Growable text in the arena. */
typedef struct feri_tmpl_buf {
  char *p;
  size_t n, cap;
} feri_tmpl_buf;

void feri_tmpl_buf_put(feri_tmpl_rt *rt, feri_tmpl_buf *b, const char *s, size_t n);
void feri_tmpl_buf_puts(feri_tmpl_rt *rt, feri_tmpl_buf *b, const char *s);
void feri_tmpl_buf_printf(feri_tmpl_rt *rt, feri_tmpl_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

feri_tmpl_value feri_tmpl_undef(const char *why);
feri_tmpl_value feri_tmpl_none(void);
feri_tmpl_value feri_tmpl_bool(bool b);
feri_tmpl_value feri_tmpl_int(int64_t i);
feri_tmpl_value feri_tmpl_float(double f);
feri_tmpl_value feri_tmpl_str(const char *p, size_t n); /* borrows p */
feri_tmpl_value feri_tmpl_cstr(const char *p);
feri_tmpl_value feri_tmpl_str_copy(feri_tmpl_rt *rt, const char *p, size_t n);
feri_tmpl_value feri_tmpl_buf_value(const feri_tmpl_buf *b);
feri_tmpl_value feri_tmpl_list_new(feri_tmpl_rt *rt, size_t cap);
feri_tmpl_value feri_tmpl_dict_new(feri_tmpl_rt *rt, int kind);

void feri_tmpl_list_push(feri_tmpl_rt *rt, feri_tmpl_list *l, feri_tmpl_value v);
/* The value under key, NULL when absent. */
feri_tmpl_value *feri_tmpl_dict_find(const feri_tmpl_dict *d, feri_tmpl_value key);
feri_tmpl_value *feri_tmpl_dict_find_str(const feri_tmpl_dict *d, const char *key);
/* Sets key (replacing its value in place, keeping the order of insertion). */
void feri_tmpl_dict_set(feri_tmpl_rt *rt, feri_tmpl_dict *d, feri_tmpl_value key, feri_tmpl_value v);

bool feri_tmpl_truthy(feri_tmpl_value v);
/* A lazy iterator (feri_tmpl_list.view other than a dict view). */
bool feri_tmpl_is_iterator(feri_tmpl_value v);
bool feri_tmpl_is_number(feri_tmpl_value v); /* int, float or bool, as Python's numbers */
bool feri_tmpl_equal(feri_tmpl_value a, feri_tmpl_value b);
/* <0, 0, >0 as Python orders the two; throws TypeError's message when Python cannot. */
int feri_tmpl_compare(feri_tmpl_rt *rt, feri_tmpl_value a, feri_tmpl_value b, const char *op);
/* Python's type name ("str", "int", "dict", "NoneType"...). */
const char *feri_tmpl_type_name(feri_tmpl_value v);

/* Python's str(v) (an undefined prints empty) and repr(v), appended to b. */
void feri_tmpl_write_str(feri_tmpl_rt *rt, feri_tmpl_buf *b, feri_tmpl_value v);
void feri_tmpl_write_repr(feri_tmpl_rt *rt, feri_tmpl_buf *b, feri_tmpl_value v);
feri_tmpl_value feri_tmpl_to_str(feri_tmpl_rt *rt, feri_tmpl_value v);
/* Python's repr of a float ("1.0", "0.1", "1e+16", "inf"), NUL-terminated into out[32]. */
void feri_tmpl_float_repr(double f, char out[32]);

#endif
