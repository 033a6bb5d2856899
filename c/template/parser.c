/* parser.c: Jinja2's recursive-descent grammar (jinja2/parser.py), same precedence and the same
 * quirks: filters bind to the unary operand (-x|abs is (-x)|abs), tests take one bare argument
 * (x is divisibleby 3), "x if c" without else yields undefined. */
#include "template/parser.h"

#include <stdio.h>
#include <string.h>

enum { MAX_NESTING = 500 }; /* nested blocks and expressions, chains (a + b + ...) counted: the tree's depth */

typedef struct parser {
  feri_tmpl_rt *rt;
  feri_tmpl_tok *t;
  size_t n, i;
  int depth;
  int loops; /* for bodies around the statement: break and continue need one in the same function */
} parser;

static feri_tmpl_tok *cur(parser *p) { return &p->t[p->i]; }
static feri_tmpl_tok *peek(parser *p) { return &p->t[p->i + 1 < p->n ? p->i + 1 : p->i]; }
static void advance(parser *p) {
  if (p->i + 1 < p->n) p->i++;
}

static _Noreturn void fail(parser *p, const feri_tmpl_tok *t, const char *fmt, const char *arg) {
  char what[300];
  snprintf(what, sizeof what, fmt, arg);
  feri_tmpl_throw(p->rt, FER_STATUS_INVALID_ARG, "line %d, column %d: %s", t->line, t->col, what);
}

static const char *tok_text(parser *p, const feri_tmpl_tok *t) {
  switch (t->kind) {
  case FERI_TOK_EOF: return "end of template";
  case FERI_TOK_VAR_END: return "end of print statement";
  case FERI_TOK_BLOCK_END: return "end of statement block";
  case FERI_TOK_STRING: return "string";
  default: {
    const size_t n = t->len < 60 ? t->len : 60;
    char *s = feri_tmpl_alloc(p->rt, n + 1);
    memcpy(s, t->text, n);
    return s;
  }
  }
}

static _Noreturn void unexpected(parser *p) { fail(p, cur(p), "unexpected '%s'", tok_text(p, cur(p))); }

static bool is_op(const feri_tmpl_tok *t, const char *op) {
  return t->kind == FERI_TOK_OP && t->len == strlen(op) && memcmp(t->text, op, t->len) == 0;
}
static bool is_name(const feri_tmpl_tok *t, const char *name) {
  return t->kind == FERI_TOK_NAME && t->len == strlen(name) && memcmp(t->text, name, t->len) == 0;
}
static bool skip_op(parser *p, const char *op) {
  if (!is_op(cur(p), op)) return false;
  advance(p);
  return true;
}
static bool skip_name(parser *p, const char *name) {
  if (!is_name(cur(p), name)) return false;
  advance(p);
  return true;
}
static void expect_op(parser *p, const char *op) {
  if (!skip_op(p, op)) fail(p, cur(p), "expected '%s'", op);
}

static const char *name_of(parser *p) {
  const feri_tmpl_tok *t = cur(p);
  if (t->kind != FERI_TOK_NAME) fail(p, t, "expected a name, got '%s'", tok_text(p, t));
  char *s = feri_tmpl_alloc(p->rt, t->len + 1);
  memcpy(s, t->text, t->len);
  advance(p);
  return s;
}

static feri_tmpl_node *node(parser *p, int kind, const feri_tmpl_tok *at) {
  feri_tmpl_node *n = feri_tmpl_alloc(p->rt, sizeof *n);
  n->kind = kind;
  n->line = at->line;
  n->col = at->col;
  return n;
}

static void push(parser *p, feri_tmpl_nodes *l, feri_tmpl_node *n) {
  if (l->n == l->cap) {
    const size_t cap = l->cap ? l->cap * 2 : 4;
    feri_tmpl_node **v = feri_tmpl_alloc(p->rt, cap * sizeof *v);
    if (l->n) memcpy(v, l->v, l->n * sizeof *v);
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n++] = n;
}

static void enter(parser *p) {
  if (++p->depth > MAX_NESTING) fail(p, cur(p), "%s", "the template nests too deeply");
}

/* Each link of a left-deep chain is one more level of the tree the evaluator recurses into. */
static void leave(parser *p, int levels) { p->depth -= levels; }

static feri_tmpl_node *expression(parser *p, bool with_condexpr);

static void call_args(parser *p, feri_tmpl_nodes *args) {
  expect_op(p, "(");
  while (!is_op(cur(p), ")")) {
    if (args->n) expect_op(p, ",");
    if (is_op(cur(p), ")")) break;
    if (is_op(cur(p), "*") || is_op(cur(p), "**")) fail(p, cur(p), "%s", "*args and **kwargs are not supported");
    const feri_tmpl_tok *at = cur(p);
    if (at->kind == FERI_TOK_NAME && is_op(peek(p), "=")) {
      feri_tmpl_node *kw = node(p, FERI_N_KWARG, at);
      kw->name = name_of(p);
      advance(p);
      kw->a = expression(p, true);
      push(p, args, kw);
    } else {
      for (size_t k = 0; k < args->n; k++)
        if (args->v[k]->kind == FERI_N_KWARG) fail(p, at, "%s", "positional argument follows keyword argument");
      push(p, args, expression(p, true));
    }
  }
  advance(p);
}

static const char *dotted_name(parser *p) {
  const char *name = name_of(p);
  while (is_op(cur(p), ".") && peek(p)->kind == FERI_TOK_NAME) {
    advance(p);
    const char *more = name_of(p);
    char *s = feri_tmpl_alloc(p->rt, strlen(name) + strlen(more) + 2);
    sprintf(s, "%s.%s", name, more);
    name = s;
  }
  return name;
}

/* One or more "| name(args)" on operand (NULL in a block that filters its body). */
static feri_tmpl_node *filters(parser *p, feri_tmpl_node *operand, bool start_inline) {
  int links = 0;
  while (start_inline || is_op(cur(p), "|")) {
    enter(p);
    links++;
    if (!start_inline) advance(p);
    start_inline = false;
    feri_tmpl_node *f = node(p, FERI_N_FILTER, cur(p));
    f->name = dotted_name(p);
    f->a = operand;
    if (is_op(cur(p), "(")) call_args(p, &f->args);
    operand = f;
  }
  leave(p, links);
  return operand;
}

static feri_tmpl_node *primary(parser *p);
static feri_tmpl_node *postfix(parser *p, feri_tmpl_node *n);

static feri_tmpl_node *test(parser *p, feri_tmpl_node *operand) {
  feri_tmpl_node *t = node(p, FERI_N_TEST, cur(p));
  advance(p); /* is */
  t->negated = skip_name(p, "not");
  t->name = dotted_name(p);
  t->a = operand;
  const feri_tmpl_tok *c = cur(p);
  if (is_op(c, "(")) {
    call_args(p, &t->args);
  } else if ((c->kind == FERI_TOK_NAME || c->kind == FERI_TOK_STRING || c->kind == FERI_TOK_INT || c->kind == FERI_TOK_FLOAT ||
              is_op(c, "[") || is_op(c, "{")) &&
             !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
    if (is_name(c, "is")) fail(p, c, "%s", "You cannot chain multiple tests with is");
    push(p, &t->args, postfix(p, primary(p)));
  }
  return t;
}

static feri_tmpl_node *filter_expr(parser *p, feri_tmpl_node *n) {
  for (int links = 0;; links++) {
    enter(p);
    if (is_op(cur(p), "|")) {
      n = filters(p, n, false);
    } else if (is_name(cur(p), "is")) {
      n = test(p, n);
    } else if (is_op(cur(p), "(")) {
      feri_tmpl_node *c = node(p, FERI_N_CALL, cur(p));
      c->a = n;
      call_args(p, &c->args);
      n = c;
    } else {
      leave(p, links + 1);
      return n;
    }
  }
}

/* Inside [ ]: an index or a slice. */
static feri_tmpl_node *subscribed(parser *p) {
  const feri_tmpl_tok *at = cur(p);
  feri_tmpl_node *start = NULL;
  if (!is_op(at, ":")) {
    start = expression(p, true);
    if (!is_op(cur(p), ":")) return start;
  }
  advance(p);
  feri_tmpl_node *s = node(p, FERI_N_SLICE, at);
  s->b = start;
  if (!is_op(cur(p), "]") && !is_op(cur(p), ",") && !is_op(cur(p), ":")) s->c = expression(p, true);
  if (skip_op(p, ":") && !is_op(cur(p), "]") && !is_op(cur(p), ",")) s->d = expression(p, true);
  return s;
}

static feri_tmpl_node *postfix(parser *p, feri_tmpl_node *n) {
  for (int links = 0;; links++) {
    enter(p);
    const feri_tmpl_tok *at = cur(p);
    if (is_op(at, ".")) {
      advance(p);
      const feri_tmpl_tok *t = cur(p);
      if (t->kind == FERI_TOK_NAME) {
        feri_tmpl_node *a = node(p, FERI_N_ATTR, at);
        a->a = n;
        a->name = name_of(p);
        n = a;
      } else if (t->kind == FERI_TOK_INT) {
        feri_tmpl_node *a = node(p, FERI_N_ITEM, at), *k = node(p, FERI_N_CONST, t);
        k->value = feri_tmpl_int(t->i);
        advance(p);
        a->a = n;
        a->b = k;
        n = a;
      } else {
        fail(p, t, "%s", "expected name or number");
      }
    } else if (is_op(at, "[")) {
      advance(p);
      feri_tmpl_node *item = node(p, FERI_N_ITEM, at);
      feri_tmpl_node *index = subscribed(p);
      if (is_op(cur(p), ",")) {
        feri_tmpl_node *tuple = node(p, FERI_N_TUPLE, at);
        push(p, &tuple->args, index);
        while (skip_op(p, ",") && !is_op(cur(p), "]")) push(p, &tuple->args, subscribed(p));
        index = tuple;
      }
      expect_op(p, "]");
      if (index->kind == FERI_N_SLICE) {
        index->a = n;
        n = index;
      } else {
        item->a = n;
        item->b = index;
        n = item;
      }
    } else if (is_op(at, "(")) {
      feri_tmpl_node *c = node(p, FERI_N_CALL, at);
      c->a = n;
      call_args(p, &c->args);
      n = c;
    } else {
      leave(p, links + 1);
      return n;
    }
  }
}

static bool tuple_end(parser *p, const char *extra) {
  const feri_tmpl_tok *t = cur(p);
  return t->kind == FERI_TOK_VAR_END || t->kind == FERI_TOK_BLOCK_END || t->kind == FERI_TOK_EOF || is_op(t, ")") ||
         (extra && is_name(t, extra));
}

/* Comma-separated expressions: one alone is itself, more (or a trailing comma) a tuple. */
static feri_tmpl_node *tuple(parser *p, bool simplified, bool with_condexpr, const char *extra_end, bool parenthesised) {
  const feri_tmpl_tok *at = cur(p);
  feri_tmpl_node *t = node(p, FERI_N_TUPLE, at);
  bool is_tuple = false;
  for (;;) {
    if (t->args.n) expect_op(p, ",");
    if (tuple_end(p, extra_end)) break;
    push(p, &t->args, simplified ? primary(p) : expression(p, with_condexpr));
    if (is_op(cur(p), ",")) is_tuple = true;
    else break;
  }
  if (!is_tuple) {
    if (t->args.n) return t->args.v[0];
    if (!parenthesised) fail(p, cur(p), "Expected an expression, got '%s'", tok_text(p, cur(p)));
  }
  return t;
}

static feri_tmpl_node *primary(parser *p) {
  enter(p);
  const feri_tmpl_tok *t = cur(p);
  feri_tmpl_node *n;
  if (t->kind == FERI_TOK_NAME) {
    n = node(p, FERI_N_CONST, t);
    if (is_name(t, "true") || is_name(t, "True")) n->value = feri_tmpl_bool(true);
    else if (is_name(t, "false") || is_name(t, "False")) n->value = feri_tmpl_bool(false);
    else if (is_name(t, "none") || is_name(t, "None")) n->value = feri_tmpl_none();
    else n->kind = FERI_N_NAME;
    n->name = name_of(p);
  } else if (t->kind == FERI_TOK_STRING) {
    feri_tmpl_buf b = {0};
    feri_tmpl_buf_put(p->rt, &b, "", 0);
    while (cur(p)->kind == FERI_TOK_STRING) {
      feri_tmpl_buf_put(p->rt, &b, cur(p)->text, cur(p)->len);
      advance(p);
    }
    n = node(p, FERI_N_CONST, t);
    n->value = feri_tmpl_buf_value(&b);
  } else if (t->kind == FERI_TOK_INT || t->kind == FERI_TOK_FLOAT) {
    n = node(p, FERI_N_CONST, t);
    n->value = t->kind == FERI_TOK_INT ? feri_tmpl_int(t->i) : feri_tmpl_float(t->f);
    advance(p);
  } else if (is_op(t, "(")) {
    advance(p);
    n = tuple(p, false, true, NULL, true);
    expect_op(p, ")");
  } else if (is_op(t, "[")) {
    advance(p);
    n = node(p, FERI_N_LIST, t);
    while (!is_op(cur(p), "]")) {
      if (n->args.n) expect_op(p, ",");
      if (is_op(cur(p), "]")) break;
      push(p, &n->args, expression(p, true));
    }
    advance(p);
  } else if (is_op(t, "{")) {
    advance(p);
    n = node(p, FERI_N_DICT, t);
    while (!is_op(cur(p), "}")) {
      if (n->args.n) expect_op(p, ",");
      if (is_op(cur(p), "}")) break;
      feri_tmpl_node *pair = node(p, FERI_N_PAIR, cur(p));
      pair->a = expression(p, true);
      expect_op(p, ":");
      pair->b = expression(p, true);
      push(p, &n->args, pair);
    }
    advance(p);
  } else {
    unexpected(p);
  }
  p->depth--;
  return n;
}

static feri_tmpl_node *unary(parser *p, bool with_filter) {
  enter(p);
  const feri_tmpl_tok *at = cur(p);
  feri_tmpl_node *n;
  if (is_op(at, "-") || is_op(at, "+")) {
    advance(p);
    n = node(p, is_op(at, "-") ? FERI_N_NEG : FERI_N_POS, at);
    n->a = unary(p, false);
  } else {
    n = primary(p);
  }
  n = postfix(p, n);
  if (with_filter) n = filter_expr(p, n);
  p->depth--;
  return n;
}

static feri_tmpl_node *binary(parser *p, feri_tmpl_node *left, const feri_tmpl_tok *at, feri_tmpl_node *right) {
  feri_tmpl_node *b = node(p, FERI_N_BINARY, at);
  char *op = feri_tmpl_alloc(p->rt, at->len + 1);
  memcpy(op, at->text, at->len);
  b->name = op;
  b->a = left;
  b->b = right;
  return b;
}

static bool is_any_op(const feri_tmpl_tok *t, const char *const *ops) {
  for (; *ops; ops++)
    if (is_op(t, *ops)) return true;
  return false;
}

/* operand (op operand)*, left-associative, op one of ops (NULL-terminated): one precedence level. */
static feri_tmpl_node *operator_chain(parser *p, feri_tmpl_node *(*operand)(parser *), const char *const *ops) {
  feri_tmpl_node *left = operand(p);
  int links = 0;
  for (; is_any_op(cur(p), ops); links++) {
    const feri_tmpl_tok *at = cur(p);
    enter(p);
    advance(p);
    left = binary(p, left, at, operand(p));
  }
  leave(p, links);
  return left;
}

static feri_tmpl_node *power_operand(parser *p) { return unary(p, true); }

static feri_tmpl_node *pow_expr(parser *p) {
  static const char *const OPS[] = {"**", NULL};
  return operator_chain(p, power_operand, OPS);
}

static feri_tmpl_node *math2(parser *p) {
  static const char *const OPS[] = {"*", "/", "//", "%", NULL};
  return operator_chain(p, pow_expr, OPS);
}

static feri_tmpl_node *concat(parser *p) {
  feri_tmpl_node *first = math2(p);
  if (!is_op(cur(p), "~")) return first;
  feri_tmpl_node *c = node(p, FERI_N_CONCAT, cur(p));
  push(p, &c->args, first);
  while (skip_op(p, "~")) push(p, &c->args, math2(p));
  return c;
}

static feri_tmpl_node *math1(parser *p) {
  static const char *const OPS[] = {"+", "-", NULL};
  return operator_chain(p, concat, OPS);
}

static feri_tmpl_node *compare(parser *p) {
  const feri_tmpl_tok *at = cur(p);
  feri_tmpl_node *first = math1(p), *c = NULL;
  static const char *const OPS[] = {"==", "!=", "<", "<=", ">", ">="};
  for (;;) {
    const feri_tmpl_tok *t = cur(p);
    const char *op = NULL;
    for (size_t k = 0; k < sizeof OPS / sizeof OPS[0]; k++)
      if (is_op(t, OPS[k])) op = OPS[k];
    if (op) {
      advance(p);
    } else if (is_name(t, "in")) {
      advance(p);
      op = "in";
    } else if (is_name(t, "not") && is_name(peek(p), "in")) {
      advance(p);
      advance(p);
      op = "not in";
    } else {
      break;
    }
    if (!c) {
      c = node(p, FERI_N_COMPARE, at);
      c->a = first;
    }
    feri_tmpl_node *operand = node(p, FERI_N_OPERAND, t);
    operand->name = op;
    operand->a = math1(p);
    push(p, &c->args, operand);
  }
  return c ? c : first;
}

static feri_tmpl_node *not_expr(parser *p) {
  if (is_name(cur(p), "not")) {
    enter(p);
    feri_tmpl_node *n = node(p, FERI_N_NOT, cur(p));
    advance(p);
    n->a = not_expr(p);
    p->depth--;
    return n;
  }
  return compare(p);
}

/* operand (word operand)*, left-associative: `a and b and c`, `a or b`. */
static feri_tmpl_node *keyword_chain(parser *p, feri_tmpl_node *(*operand)(parser *), const char *word, int kind) {
  feri_tmpl_node *left = operand(p);
  int links = 0;
  for (; is_name(cur(p), word); links++) {
    feri_tmpl_node *n = node(p, kind, cur(p));
    enter(p);
    advance(p);
    n->a = left;
    n->b = operand(p);
    left = n;
  }
  leave(p, links);
  return left;
}

static feri_tmpl_node *and_expr(parser *p) { return keyword_chain(p, not_expr, "and", FERI_N_AND); }

static feri_tmpl_node *or_expr(parser *p) { return keyword_chain(p, and_expr, "or", FERI_N_OR); }

static feri_tmpl_node *expression(parser *p, bool with_condexpr) {
  enter(p);
  feri_tmpl_node *e = or_expr(p);
  int links = 0;
  for (; with_condexpr && is_name(cur(p), "if"); links++) {
    enter(p);
    feri_tmpl_node *c = node(p, FERI_N_COND, cur(p));
    advance(p);
    c->b = e;
    c->a = or_expr(p);
    if (skip_name(p, "else")) c->c = expression(p, true);
    e = c;
  }
  leave(p, links + 1);
  return e;
}

/* ---- statements ----------------------------------------------------------------------------- */

static void block_end(parser *p) {
  if (cur(p)->kind != FERI_TOK_BLOCK_END) fail(p, cur(p), "expected end of statement block, got '%s'", tok_text(p, cur(p)));
  advance(p);
}

/* Statements up to a block whose first name is one of ends (NULL-terminated); returns that name's
 * index with the parser on it (after "{%"). block: the name of the block they are in. */
static int statements(parser *p, feri_tmpl_nodes *out, const char *const *ends, const char *block);

static feri_tmpl_node *assign_target(parser *p, bool with_namespace, const char *extra_end) {
  const feri_tmpl_tok *at = cur(p);
  if (with_namespace && at->kind == FERI_TOK_NAME && is_op(peek(p), ".")) {
    feri_tmpl_node *a = node(p, FERI_N_ATTR, at);
    feri_tmpl_node *ns = node(p, FERI_N_NAME, at);
    ns->name = name_of(p);
    advance(p);
    a->a = ns;
    a->name = name_of(p);
    return a;
  }
  feri_tmpl_node *t = tuple(p, true, false, extra_end, false);
  if (t->kind == FERI_N_NAME) return t;
  if (t->kind == FERI_N_TUPLE) {
    for (size_t k = 0; k < t->args.n; k++)
      if (t->args.v[k]->kind != FERI_N_NAME) fail(p, at, "%s", "can't assign to this expression");
    return t;
  }
  fail(p, at, "can't assign to '%s'", "expression");
}

static void parse_if(parser *p, feri_tmpl_node *n) {
  static const char *const ENDS[] = {"elif", "else", "endif", NULL};
  n->a = tuple(p, false, false, NULL, false);
  block_end(p);
  const int end = statements(p, &n->body, ENDS, "if");
  if (end == 0) { /* elif: an if inside else, one level deeper */
    feri_tmpl_node *elif = node(p, FERI_S_IF, cur(p));
    advance(p);
    enter(p);
    parse_if(p, elif);
    leave(p, 1);
    push(p, &n->orelse, elif);
    return;
  }
  advance(p);
  block_end(p);
  if (end == 1) {
    static const char *const ENDIF[] = {"endif", NULL};
    statements(p, &n->orelse, ENDIF, "if");
    advance(p);
    block_end(p);
  }
}

static void parse_for(parser *p, feri_tmpl_node *n) {
  static const char *const ENDS[] = {"endfor", "else", NULL}, *const ENDFOR[] = {"endfor", NULL};
  n->target = assign_target(p, false, "in");
  if (!skip_name(p, "in")) fail(p, cur(p), "expected 'in', got '%s'", tok_text(p, cur(p)));
  n->a = tuple(p, false, false, "recursive", false);
  if (skip_name(p, "if")) n->b = expression(p, true);
  if (is_name(cur(p), "recursive")) fail(p, cur(p), "%s", "recursive loops are not supported");
  block_end(p);
  p->loops++;
  const int end = statements(p, &n->body, ENDS, "for");
  p->loops--;
  advance(p);
  block_end(p);
  if (end == 1) {
    statements(p, &n->orelse, ENDFOR, "for");
    advance(p);
    block_end(p);
  }
}

static void parse_params(parser *p, feri_tmpl_nodes *params) {
  expect_op(p, "(");
  while (!is_op(cur(p), ")")) {
    if (params->n) expect_op(p, ",");
    if (is_op(cur(p), ")")) break;
    feri_tmpl_node *param = node(p, FERI_N_NAME, cur(p));
    param->name = name_of(p);
    if (skip_op(p, "=")) param->a = expression(p, true);
    else
      for (size_t k = 0; k < params->n; k++)
        if (params->v[k]->a) fail(p, cur(p), "%s", "non-default argument follows default argument");
    push(p, params, param);
  }
  advance(p);
}

static void body_until(parser *p, feri_tmpl_nodes *body, const char *end) {
  const char *const ends[] = {end, NULL};
  block_end(p);
  statements(p, body, ends, end + 3); /* the block's name: endset closes set */
  advance(p);
  block_end(p);
}

static void statement(parser *p, feri_tmpl_nodes *out) {
  const feri_tmpl_tok *at = cur(p);
  if (at->kind != FERI_TOK_NAME) fail(p, at, "%s", "tag name expected");
  feri_tmpl_node *n = node(p, FERI_S_IF, at);
  if (skip_name(p, "if")) {
    parse_if(p, n);
  } else if (skip_name(p, "for")) {
    n->kind = FERI_S_FOR;
    parse_for(p, n);
  } else if (skip_name(p, "set")) {
    n->kind = FERI_S_SET;
    n->target = assign_target(p, true, NULL);
    if (skip_op(p, "=")) {
      n->a = tuple(p, false, true, NULL, false);
      block_end(p);
    } else {
      n->kind = FERI_S_SETBLOCK;
      if (n->target->kind != FERI_N_NAME && n->target->kind != FERI_N_ATTR) fail(p, at, "%s", "a block set takes one name");
      if (is_op(cur(p), "|")) n->b = filters(p, NULL, false);
      body_until(p, &n->body, "endset");
    }
  } else if (skip_name(p, "macro")) {
    n->kind = FERI_S_MACRO;
    n->name = name_of(p);
    parse_params(p, &n->args);
    const int loops = p->loops; /* a macro body is a function of its own: no loop around it */
    p->loops = 0;
    body_until(p, &n->body, "endmacro");
    p->loops = loops;
  } else if (skip_name(p, "call")) {
    n->kind = FERI_S_CALLBLOCK;
    if (is_op(cur(p), "(")) parse_params(p, &n->args);
    n->a = expression(p, true);
    if (n->a->kind != FERI_N_CALL) fail(p, at, "%s", "expected a call after {% call %}");
    const int loops = p->loops;
    p->loops = 0;
    body_until(p, &n->body, "endcall");
    p->loops = loops;
  } else if (skip_name(p, "filter")) {
    n->kind = FERI_S_FILTERBLOCK;
    n->b = filters(p, NULL, true);
    body_until(p, &n->body, "endfilter");
  } else if (is_name(at, "break") || is_name(at, "continue")) {
    n->kind = is_name(at, "break") ? FERI_S_BREAK : FERI_S_CONTINUE;
    if (p->loops == 0) fail(p, at, "'%s' outside loop", n->kind == FERI_S_BREAK ? "break" : "continue");
    advance(p);
    block_end(p);
  } else if (skip_name(p, "generation")) {
    /* transformers' AssistantTracker: a call block rendering its body as it is, so a filter block
     * without filters (its own scope, outside any loop) */
    n->kind = FERI_S_FILTERBLOCK;
    const int loops = p->loops;
    p->loops = 0;
    body_until(p, &n->body, "endgeneration");
    p->loops = loops;
  } else {
    fail(p, at, "Encountered unknown tag '%s'.", tok_text(p, at));
  }
  push(p, out, n);
}

static int statements(parser *p, feri_tmpl_nodes *out, const char *const *ends, const char *block) {
  enter(p);
  for (;;) {
    const feri_tmpl_tok *t = cur(p);
    if (t->kind == FERI_TOK_EOF) {
      if (ends) {
        char expected[200] = "";
        for (int k = 0; ends[k]; k++)
          snprintf(expected + strlen(expected), sizeof expected - strlen(expected), "%s'%s'", k ? " or " : "", ends[k]);
        char what[300];
        snprintf(what, sizeof what, "%s. The innermost block that needs to be closed is '%s'.", expected, block);
        fail(p, t, "Unexpected end of template. Jinja was looking for the following tags: %s", what);
      }
      p->depth--;
      return -1;
    }
    if (t->kind == FERI_TOK_TEXT) {
      feri_tmpl_node *n = node(p, FERI_S_TEXT, t);
      n->value = feri_tmpl_str(t->text, t->len);
      push(p, out, n);
      advance(p);
    } else if (t->kind == FERI_TOK_VAR_BEGIN) {
      feri_tmpl_node *n = node(p, FERI_S_OUTPUT, t);
      advance(p);
      n->a = tuple(p, false, true, NULL, false);
      if (cur(p)->kind != FERI_TOK_VAR_END) fail(p, cur(p), "expected end of print statement, got '%s'", tok_text(p, cur(p)));
      advance(p);
      push(p, out, n);
    } else if (t->kind == FERI_TOK_BLOCK_BEGIN) {
      advance(p);
      for (int k = 0; ends && ends[k]; k++)
        if (is_name(cur(p), ends[k])) {
          p->depth--;
          return k;
        }
      if (cur(p)->kind == FERI_TOK_NAME && cur(p)->len > 3 && memcmp(cur(p)->text, "end", 3) == 0)
        fail(p, cur(p), "Encountered unknown tag '%s'.", tok_text(p, cur(p)));
      statement(p, out);
    } else {
      unexpected(p);
    }
  }
}

void feri_tmpl_parse_tree(feri_tmpl_rt *rt, const char *src, size_t len, feri_tmpl_nodes *body) {
  parser p = {.rt = rt};
  feri_tmpl_lex(rt, src, len, &p.t, &p.n);
  memset(body, 0, sizeof *body);
  statements(&p, body, NULL, NULL);
}
