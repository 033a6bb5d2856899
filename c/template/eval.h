/* eval.h: the evaluator's state, shared by eval.c (statements, expressions, attribute access,
 * operators) and builtins.c (filters, tests, methods and global functions). */
#ifndef FERI_TEMPLATE_EVAL_H
#define FERI_TEMPLATE_EVAL_H

#include "template/parser.h"
#include "template/value.h"

typedef struct feri_tmpl_frame feri_tmpl_frame;
struct feri_tmpl_frame {
  feri_tmpl_frame *parent;
  feri_tmpl_dict vars;
};

enum feri_tmpl_func_kind {
  FERI_FUNC_GLOBAL, /* range, dict, namespace, raise_exception, strftime_now */
  FERI_FUNC_METHOD, /* a str, dict or list method bound to self */
  FERI_FUNC_MACRO,  /* a {% macro %} or the caller of a {% call %} block */
  FERI_FUNC_CYCLE,  /* loop.cycle, bound to the iteration's index */
};

struct feri_tmpl_func {
  int kind;
  const char *name;
  feri_tmpl_value self;
  const feri_tmpl_node *node; /* the macro or the call block */
  feri_tmpl_frame *closure;
  feri_tmpl_value caller; /* what "caller" names in a macro invoked by a call block */
};

/* Arguments of a call: positional then keyword. */
typedef struct feri_tmpl_args {
  feri_tmpl_value *pos;
  size_t n;
  const char **names;
  feri_tmpl_value *kw;
  size_t nkw;
} feri_tmpl_args;

typedef struct feri_tmpl_eval {
  feri_tmpl_rt *rt;
  feri_tmpl_frame *frame;
  feri_tmpl_buf *out;
  size_t max_output;
  uint64_t steps, max_steps;
  int depth, max_depth;
  int64_t now_unix;
  int loop_control; /* a pending break (1) or continue (2) */
} feri_tmpl_eval;

/* Renders body into ev->out. */
void feri_tmpl_exec(feri_tmpl_eval *ev, const feri_tmpl_nodes *body);

feri_tmpl_value feri_tmpl_getattr(feri_tmpl_eval *ev, feri_tmpl_value obj, const char *name);
feri_tmpl_value feri_tmpl_getitem(feri_tmpl_eval *ev, feri_tmpl_value obj, feri_tmpl_value key);
feri_tmpl_value feri_tmpl_call(feri_tmpl_eval *ev, feri_tmpl_value fn, const feri_tmpl_args *args);
/* Iterating v as Python does (a str by code points, a dict by keys, undefined as empty). */
feri_tmpl_list *feri_tmpl_iterate(feri_tmpl_eval *ev, feri_tmpl_value v);

/* builtins.c */
bool feri_tmpl_is_filter(const char *name); /* one of Jinja2's builtin filters */
bool feri_tmpl_is_test(const char *name);
feri_tmpl_value feri_tmpl_filter(feri_tmpl_eval *ev, const char *name, feri_tmpl_value v, const feri_tmpl_args *args);
bool feri_tmpl_test(feri_tmpl_eval *ev, const char *name, feri_tmpl_value v, const feri_tmpl_args *args);
/* A method of a builtin type (str.strip, dict.get, ...), or false when obj's type has none. */
bool feri_tmpl_method(feri_tmpl_eval *ev, feri_tmpl_value obj, const char *name, feri_tmpl_value *out);
feri_tmpl_value feri_tmpl_call_builtin(feri_tmpl_eval *ev, const feri_tmpl_func *fn, const feri_tmpl_args *args);
/* A global function (range, dict, namespace, raise_exception, strftime_now), or false. */
bool feri_tmpl_global(feri_tmpl_eval *ev, const char *name, feri_tmpl_value *out);

/* markupsafe.escape: & < > " ' as entities, a Markup value as it is; the result is Markup. */
feri_tmpl_value feri_tmpl_escape(feri_tmpl_eval *ev, feri_tmpl_value s);

/* Errors: FER_STATUS_BAD_FORMAT with Python's message. */
_Noreturn void feri_tmpl_error(feri_tmpl_eval *ev, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Throws the message of an undefined value being used. */
_Noreturn void feri_tmpl_use_undef(feri_tmpl_eval *ev, feri_tmpl_value v);
feri_tmpl_value feri_tmpl_binary(feri_tmpl_eval *ev, const char *op, feri_tmpl_value a, feri_tmpl_value b);

/* UTF-8: code points of s (n bytes), and the byte offset of code point k. */
size_t feri_tmpl_utf8_len(const char *s, size_t n);
size_t feri_tmpl_utf8_offset(const char *s, size_t n, size_t k);

#endif
