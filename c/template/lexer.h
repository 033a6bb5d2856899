/* lexer.h: template source to tokens, with Jinja2's whitespace rules as transformers configures
 * them (trim_blocks, lstrip_blocks; "-" and "+" modifiers; newlines normalised to "\n" and one
 * trailing newline dropped). */
#ifndef FERI_TEMPLATE_LEXER_H
#define FERI_TEMPLATE_LEXER_H

#include "template/value.h"

enum feri_tmpl_tok_kind {
  FERI_TOK_TEXT,        /* literal output; text/len hold it */
  FERI_TOK_VAR_BEGIN,   /* {{ */
  FERI_TOK_VAR_END,     /* }} */
  FERI_TOK_BLOCK_BEGIN, /* {% */
  FERI_TOK_BLOCK_END,   /* %} */
  FERI_TOK_NAME,
  FERI_TOK_STRING, /* text/len: the unescaped value */
  FERI_TOK_INT,
  FERI_TOK_FLOAT,
  FERI_TOK_OP, /* text/len: the operator ("//", "(", ...) */
  FERI_TOK_EOF,
};

typedef struct feri_tmpl_tok {
  int kind;
  int line, col;
  const char *text;
  size_t len;
  int64_t i;
  double f;
} feri_tmpl_tok;

/* Tokens of src into *toks (n of them, the last FERI_TOK_EOF), allocated in rt; throws
 * FER_STATUS_INVALID_ARG "line L, column C: ..." on malformed input. */
void feri_tmpl_lex(feri_tmpl_rt *rt, const char *src, size_t len, feri_tmpl_tok **toks, size_t *n);

#endif
