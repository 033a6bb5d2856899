/* template.c: the component's entry points: parse once, render many times from any thread. */
#include "template/template.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/status.h"
#include "template/eval.h"
#include "template/json.h"
#include "template/parser.h"

struct feri_tmpl {
  feri_tmpl_rt rt; /* the arena holding the tree */
  feri_tmpl_nodes body;
};

static _Thread_local bool feri_tmpl_raised;

bool feri_tmpl_last_raised(void) { return feri_tmpl_raised; }

/* Jinja2's compiler refuses an unknown filter or test, except inside an if statement or an
 * inline if (a "soft" frame, where it fails only when run); a for body, a macro or a block
 * starts a frame that is not soft again. */
static void check_names(feri_tmpl_rt *rt, const feri_tmpl_node *n, bool soft);

static void check_all(feri_tmpl_rt *rt, const feri_tmpl_nodes *l, bool soft) {
  for (size_t i = 0; i < l->n; i++) check_names(rt, l->v[i], soft);
}

static void check_names(feri_tmpl_rt *rt, const feri_tmpl_node *n, bool soft) {
  if (!n) return;
  if (!soft && ((n->kind == FERI_N_FILTER && !feri_tmpl_is_filter(n->name)) || (n->kind == FERI_N_TEST && !feri_tmpl_is_test(n->name))))
    feri_tmpl_throw(rt, FER_STATUS_INVALID_ARG, "line %d, column %d: No %s named '%s'.", n->line, n->col,
                    n->kind == FERI_N_FILTER ? "filter" : "test", n->name);
  switch (n->kind) {
  case FERI_S_IF:
  case FERI_N_COND: soft = true; break;
  case FERI_S_FOR:
    check_names(rt, n->a, soft);
    check_all(rt, &n->orelse, soft);
    check_names(rt, n->b, false);
    check_all(rt, &n->body, false);
    return;
  case FERI_S_CALLBLOCK:
    check_names(rt, n->a, soft);
    check_all(rt, &n->args, false);
    check_all(rt, &n->body, false);
    return;
  case FERI_S_MACRO:
  case FERI_S_SETBLOCK:
  case FERI_S_FILTERBLOCK: soft = false; break;
  default: break;
  }
  check_names(rt, n->a, soft);
  check_names(rt, n->b, soft);
  check_names(rt, n->c, soft);
  check_names(rt, n->d, soft);
  check_all(rt, &n->args, soft);
  check_all(rt, &n->body, soft);
  check_all(rt, &n->orelse, soft);
}

fer_status feri_tmpl_parse(const char *src, size_t len, feri_tmpl **out) {
  feri_error_clear();
  if (!out) return feri_fail(FER_STATUS_NULL_ARG, "feri_tmpl_parse: out is NULL");
  *out = NULL;
  if (!src && len) return feri_fail(FER_STATUS_NULL_ARG, "feri_tmpl_parse: src is NULL");
  feri_tmpl *t = calloc(1, sizeof *t);
  if (!t) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "feri_tmpl_parse: out of memory");
  jmp_buf fail;
  t->rt.fail = &fail;
  if (setjmp(fail)) {
    const fer_status st = feri_fail(t->rt.status, "%s", t->rt.message);
    feri_tmpl_rt_free(&t->rt);
    free(t);
    return st;
  }
  feri_tmpl_parse_tree(&t->rt, src ? src : "", len, &t->body);
  check_all(&t->rt, &t->body, false);
  t->rt.fail = NULL;
  *out = t;
  return FER_STATUS_OK;
}

void feri_tmpl_free(feri_tmpl *t) {
  if (!t) return;
  feri_tmpl_rt_free(&t->rt);
  free(t);
}

typedef struct json_context {
  const char *text;
  size_t len;
} json_context;

/* the members of a JSON object as the variables */
static const feri_tmpl *vars_from_json(feri_tmpl_rt *rt, feri_tmpl_dict *vars, void *arg) {
  const json_context *j = arg;
  if (!j->len) return NULL;
  const feri_tmpl_value ctx = feri_tmpl_json_parse(rt, j->text, j->len);
  if (ctx.kind != FERI_TMPL_DICT) feri_tmpl_throw(rt, FER_STATUS_BAD_FORMAT, "the context must be a JSON object");
  *vars = *ctx.u.dict;
  return NULL;
}

fer_status feri_tmpl_render(const feri_tmpl *t, const char *context_json, size_t len, const feri_tmpl_options *opt, char **out,
                            size_t *out_len) {
  if (!context_json && len) {
    feri_error_clear();
    feri_tmpl_raised = false;
    if (out) *out = NULL;
    if (out_len) *out_len = 0;
    return feri_fail(FER_STATUS_NULL_ARG, "feri_tmpl_render: a NULL argument");
  }
  json_context j = {context_json, len};
  return feri_tmpl_render_vars(t, vars_from_json, &j, opt, out, out_len);
}

fer_status feri_tmpl_render_vars(const feri_tmpl *t, feri_tmpl_vars_fn vars, void *arg, const feri_tmpl_options *opt,
                                 char **out, size_t *out_len) {
  feri_error_clear();
  feri_tmpl_raised = false;
  if (out) *out = NULL;
  if (out_len) *out_len = 0;
  if (!t || !vars || !out || !out_len) return feri_fail(FER_STATUS_NULL_ARG, "feri_tmpl_render: a NULL argument");
  feri_tmpl_options o = {0};
  if (opt) memcpy(&o, opt, opt->struct_size && opt->struct_size < sizeof o ? opt->struct_size : sizeof o);
  else o.now_unix = (int64_t)time(NULL);
  /* on the heap: what the render changes in it must survive the longjmp of an error */
  feri_tmpl_rt *rt = calloc(1, sizeof *rt);
  if (!rt) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "feri_tmpl_render: out of memory");
  rt->limit = o.max_memory ? (size_t)o.max_memory : (size_t)1 << 30;
  jmp_buf fail;
  rt->fail = &fail;
  if (setjmp(fail)) {
    feri_tmpl_raised = rt->raised;
    const fer_status st = feri_fail(rt->status, "%s", rt->message);
    feri_tmpl_rt_free(rt);
    free(rt);
    return st;
  }
  feri_tmpl_frame root = {0};
  const feri_tmpl *chosen = vars(rt, &root.vars, arg);
  feri_tmpl_buf text = {0};
  feri_tmpl_buf_put(rt, &text, "", 0);
  feri_tmpl_eval ev = {
      .rt = rt,
      .frame = &root,
      .out = &text,
      .max_output = o.max_output ? (size_t)o.max_output : (size_t)64 << 20,
      .max_steps = o.max_steps ? o.max_steps : (uint64_t)1 << 24,
      .max_depth = o.max_depth ? (int)(o.max_depth < 100000 ? o.max_depth : 100000) : 512,
      .now_unix = o.now_unix,
  };
  feri_tmpl_exec(&ev, chosen ? &chosen->body : &t->body);
  char *s = malloc(text.n + 1);
  if (!s) feri_tmpl_throw(rt, FER_STATUS_OUT_OF_MEMORY, "out of memory");
  memcpy(s, text.p, text.n + 1);
  *out = s;
  *out_len = text.n;
  feri_tmpl_rt_free(rt);
  free(rt);
  return FER_STATUS_OK;
}
