/* parser.h: tokens to the syntax tree the evaluator walks (Jinja2's grammar: jinja2/parser.py). */
#ifndef FERI_TEMPLATE_PARSER_H
#define FERI_TEMPLATE_PARSER_H

#include "template/lexer.h"
#include "template/value.h"

enum feri_tmpl_node_kind {
  /* expressions */
  FERI_N_CONST,   /* value */
  FERI_N_NAME,    /* name */
  FERI_N_ATTR,    /* a.name */
  FERI_N_ITEM,    /* a[b] */
  FERI_N_SLICE,   /* a[b:c:d], each of b, c, d may be NULL */
  FERI_N_CALL,    /* a(args), keyword arguments as FERI_N_KWARG in args */
  FERI_N_FILTER,  /* a | name(args); a NULL in a filter block or a block set */
  FERI_N_TEST,    /* a is [not] name(args) */
  FERI_N_BINARY,  /* a op b: + - * / // % ** */
  FERI_N_NEG,     /* -a */
  FERI_N_POS,     /* +a */
  FERI_N_NOT,     /* not a */
  FERI_N_AND,     /* a and b */
  FERI_N_OR,      /* a or b */
  FERI_N_COMPARE, /* a, then args: FERI_N_OPERAND (op, a) each */
  FERI_N_OPERAND,
  FERI_N_COND,    /* b if a else c (c may be NULL) */
  FERI_N_LIST,    /* [args] */
  FERI_N_TUPLE,   /* (args) */
  FERI_N_DICT,    /* {args}: FERI_N_PAIR (a: b) each */
  FERI_N_PAIR,
  FERI_N_CONCAT,  /* args joined by ~ */
  FERI_N_KWARG,   /* name=a */
  /* statements */
  FERI_S_TEXT,     /* value */
  FERI_S_OUTPUT,   /* {{ a }} */
  FERI_S_IF,       /* if a: body else orelse */
  FERI_S_FOR,      /* for target in a [if b]: body else orelse */
  FERI_S_SET,      /* target = a */
  FERI_S_SETBLOCK, /* target = body, through the filter chain b (may be NULL) */
  FERI_S_MACRO,    /* macro name(args: FERI_N_NAME with default a) body */
  FERI_S_CALLBLOCK, /* call(args) a: body is the caller */
  FERI_S_FILTERBLOCK, /* body through the filter chain b (NULL: as it is, {% generation %}) */
  FERI_S_BREAK,
  FERI_S_CONTINUE,
};

typedef struct feri_tmpl_node feri_tmpl_node;

typedef struct feri_tmpl_nodes {
  feri_tmpl_node **v;
  size_t n, cap;
} feri_tmpl_nodes;

struct feri_tmpl_node {
  int kind;
  int line, col;
  const char *name; /* NUL-terminated: names, attributes, filters, tests, operators */
  bool negated;     /* FERI_N_TEST: "is not" */
  feri_tmpl_value value;
  feri_tmpl_node *a, *b, *c, *d, *target;
  feri_tmpl_nodes args, body, orelse;
};

/* The statements of the template (src, len) into *body; throws FER_STATUS_INVALID_ARG
 * "line L, column C: ..." on a syntax error. The tree lives in rt's arena. */
void feri_tmpl_parse_tree(feri_tmpl_rt *rt, const char *src, size_t len, feri_tmpl_nodes *body);

#endif
