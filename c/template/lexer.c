/* lexer.c: Jinja2's lexer (jinja2/lexer.py) for the subset chat templates use. */
#include "template/lexer.h"

#include <stdlib.h>
#include <string.h>

typedef struct lexer {
  feri_tmpl_rt *rt;
  const char *s;
  size_t n, pos;
  size_t seen, seen_line_start; /* where(): counted up to seen, so tokens in order cost O(n) in all */
  int seen_line;
  feri_tmpl_tok *toks;
  size_t ntok, cap;
} lexer;

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

static void where(lexer *lx, size_t pos, int *line, int *col) {
  if (pos < lx->seen) lx->seen = 0, lx->seen_line = 1, lx->seen_line_start = 0;
  for (; lx->seen < pos && lx->seen < lx->n; lx->seen++)
    if (lx->s[lx->seen] == '\n') lx->seen_line++, lx->seen_line_start = lx->seen + 1;
  *line = lx->seen_line;
  *col = (int)(pos - lx->seen_line_start) + 1;
}

static _Noreturn void fail_at(lexer *lx, size_t pos, const char *what) {
  int line, col;
  where(lx, pos, &line, &col);
  feri_tmpl_throw(lx->rt, FER_STATUS_INVALID_ARG, "line %d, column %d: %s", line, col, what);
}

static feri_tmpl_tok *emit(lexer *lx, int kind, size_t pos, const char *text, size_t len) {
  if (lx->ntok == lx->cap) {
    const size_t cap = lx->cap ? lx->cap * 2 : 256;
    feri_tmpl_tok *t = feri_tmpl_alloc(lx->rt, cap * sizeof *t);
    if (lx->ntok) memcpy(t, lx->toks, lx->ntok * sizeof *t);
    lx->toks = t;
    lx->cap = cap;
  }
  feri_tmpl_tok *t = &lx->toks[lx->ntok++];
  memset(t, 0, sizeof *t);
  t->kind = kind;
  where(lx, pos, &t->line, &t->col);
  t->text = text;
  t->len = len;
  return t;
}

/* A string literal's value as Python's "unicode-escape" codec reads it (what Jinja2 applies). */
static void string_literal(lexer *lx) {
  const size_t start = lx->pos;
  const char q = lx->s[lx->pos++];
  feri_tmpl_buf b = {0};
  feri_tmpl_buf_put(lx->rt, &b, "", 0);
  for (;;) {
    if (lx->pos >= lx->n) fail_at(lx, start, "unexpected end of string");
    const char c = lx->s[lx->pos];
    if (c == q) break;
    if (c != '\\') {
      feri_tmpl_buf_put(lx->rt, &b, &c, 1);
      lx->pos++;
      continue;
    }
    if (lx->pos + 1 >= lx->n) fail_at(lx, start, "unexpected end of string");
    const char e = lx->s[lx->pos + 1];
    lx->pos += 2;
    static const char ESCAPES[] = "\\'\"abfnrtv\n", VALUES[] = "\\'\"\a\b\f\n\r\t\v";
    const char *simple = e ? strchr(ESCAPES, e) : NULL;
    if (simple) {
      if (e != '\n') { /* a backslash before a newline joins the lines */
        const char out = VALUES[simple - ESCAPES];
        feri_tmpl_buf_put(lx->rt, &b, &out, 1);
      }
    } else if (e == 'N') {
      fail_at(lx, start, "malformed \\N character escape");
    } else if (e >= '0' && e <= '7') {
      unsigned v = (unsigned)(e - '0');
      for (int k = 0; k < 2 && lx->pos < lx->n && lx->s[lx->pos] >= '0' && lx->s[lx->pos] <= '7'; k++) v = v * 8 + (unsigned)(lx->s[lx->pos++] - '0');
      char u[4];
      const size_t nu = v < 0x80 ? (u[0] = (char)v, 1) : (u[0] = (char)(0xC0 | v >> 6), u[1] = (char)(0x80 | (v & 63)), 2);
      feri_tmpl_buf_put(lx->rt, &b, u, nu);
    } else if (e == 'x' || e == 'u' || e == 'U') {
      const int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
      uint32_t cp = 0;
      for (int k = 0; k < digits; k++) {
        const char h = lx->pos < lx->n ? lx->s[lx->pos] : 0;
        const int d = is_digit(h) ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
        if (d < 0) fail_at(lx, start, "truncated \\x, \\u or \\U escape in a string");
        cp = cp * 16 + (uint32_t)d;
        lx->pos++;
      }
      if (cp > 0x10FFFF) fail_at(lx, start, "illegal Unicode character in a string");
      char u[4];
      size_t nu;
      if (cp < 0x80) u[0] = (char)cp, nu = 1;
      else if (cp < 0x800) u[0] = (char)(0xC0 | cp >> 6), u[1] = (char)(0x80 | (cp & 63)), nu = 2;
      else if (cp < 0x10000)
        u[0] = (char)(0xE0 | cp >> 12), u[1] = (char)(0x80 | ((cp >> 6) & 63)), u[2] = (char)(0x80 | (cp & 63)), nu = 3;
      else
        u[0] = (char)(0xF0 | cp >> 18), u[1] = (char)(0x80 | ((cp >> 12) & 63)), u[2] = (char)(0x80 | ((cp >> 6) & 63)),
        u[3] = (char)(0x80 | (cp & 63)), nu = 4;
      feri_tmpl_buf_put(lx->rt, &b, u, nu);
    } else { /* Python keeps an unknown escape as it is */
      feri_tmpl_buf_put(lx->rt, &b, lx->s + lx->pos - 2, 2);
    }
  }
  lx->pos++;
  emit(lx, FERI_TOK_STRING, start, b.p, b.n);
}

static void number(lexer *lx) {
  const size_t start = lx->pos;
  char tmp[128];
  size_t k = 0;
  bool is_float = false;
  const char *s = lx->s;
  while (lx->pos < lx->n && (is_digit(s[lx->pos]) || (s[lx->pos] == '_' && lx->pos + 1 < lx->n && is_digit(s[lx->pos + 1])))) {
    if (s[lx->pos] != '_' && k < sizeof tmp - 1) tmp[k++] = s[lx->pos];
    lx->pos++;
  }
  const bool after_dot = start > 0 && s[start - 1] == '.'; /* foo.0.1 is two item accesses */
  if (!after_dot && lx->pos + 1 < lx->n && s[lx->pos] == '.' && is_digit(s[lx->pos + 1])) {
    is_float = true;
    tmp[k++] = s[lx->pos++];
    while (lx->pos < lx->n && (is_digit(s[lx->pos]) || (s[lx->pos] == '_' && lx->pos + 1 < lx->n && is_digit(s[lx->pos + 1])))) {
      if (s[lx->pos] != '_' && k < sizeof tmp - 1) tmp[k++] = s[lx->pos];
      lx->pos++;
    }
  }
  if (!after_dot && lx->pos < lx->n && (s[lx->pos] == 'e' || s[lx->pos] == 'E')) {
    size_t p = lx->pos + 1;
    if (p < lx->n && (s[p] == '+' || s[p] == '-')) p++;
    if (p < lx->n && is_digit(s[p])) {
      is_float = true;
      while (lx->pos < p && k < sizeof tmp - 1) tmp[k++] = s[lx->pos++];
      while (lx->pos < lx->n && (is_digit(s[lx->pos]) || s[lx->pos] == '_')) {
        if (s[lx->pos] != '_' && k < sizeof tmp - 1) tmp[k++] = s[lx->pos];
        lx->pos++;
      }
    }
  }
  tmp[k] = 0;
  feri_tmpl_tok *t = emit(lx, is_float ? FERI_TOK_FLOAT : FERI_TOK_INT, start, s + start, lx->pos - start);
  if (is_float) {
    t->f = strtod(tmp, NULL);
  } else {
    if (k > 18) fail_at(lx, start, "integer literal out of the 64-bit range");
    t->i = strtoll(tmp, NULL, 10);
  }
}

static const char *const OPS[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">",
                                  "=",  ".",  ",",  ":",  "|",  "(",  ")", "[", "]", "{", "}", ";", "!"};

/* The tokens of one {{ }} or {% %} from lx->pos (just after the opener) through its closer, with
 * the whitespace the closer removes after it; *line_starting: whether what follows starts a line
 * (lstrip_blocks then applies to the next tag even without a newline before it in its text). */
static void tag(lexer *lx, bool block, size_t open_pos, bool *line_starting) {
  int depth = 0;
  const char *s = lx->s;
  for (;;) {
    while (lx->pos < lx->n && is_space(s[lx->pos])) lx->pos++;
    if (lx->pos >= lx->n) fail_at(lx, open_pos, block ? "unexpected end of template: '%}' missing" : "unexpected end of template: '}}' missing");
    const char *p = s + lx->pos;
    const size_t left = lx->n - lx->pos;
    const char closer = block ? '%' : '}';
    if (depth == 0) {
      const bool minus = left >= 3 && p[0] == '-' && p[1] == closer && p[2] == '}';
      const bool plus = block && left >= 3 && p[0] == '+' && p[1] == '%' && p[2] == '}';
      const bool plain = left >= 2 && p[0] == closer && p[1] == '}';
      if (minus || plus || plain) {
        emit(lx, block ? FERI_TOK_BLOCK_END : FERI_TOK_VAR_END, lx->pos, p, 2);
        lx->pos += plain ? 2 : 3;
        *line_starting = false;
        if (minus) {
          while (lx->pos < lx->n && is_space(s[lx->pos])) *line_starting = s[lx->pos++] == '\n';
        } else if (plain && block && lx->pos < lx->n && s[lx->pos] == '\n') { /* trim_blocks */
          lx->pos++;
          *line_starting = true;
        }
        return;
      }
    }
    const char c = *p;
    if (c == '\'' || c == '"') {
      string_literal(lx);
    } else if (is_digit(c)) {
      number(lx);
    } else if (is_name_start(c)) {
      const size_t start = lx->pos;
      while (lx->pos < lx->n && (is_name_start(s[lx->pos]) || is_digit(s[lx->pos]))) lx->pos++;
      emit(lx, FERI_TOK_NAME, start, s + start, lx->pos - start);
    } else {
      size_t i = 0;
      for (; i < sizeof OPS / sizeof OPS[0]; i++)
        if (strncmp(p, OPS[i], strlen(OPS[i])) == 0 && strlen(OPS[i]) <= left) break;
      if (i == sizeof OPS / sizeof OPS[0] || (c == '!' && (left < 2 || p[1] != '='))) fail_at(lx, lx->pos, "unexpected character");
      const size_t len = strlen(OPS[i]);
      if (c == '(' || c == '[' || c == '{') depth++;
      if (c == ')' || c == ']' || c == '}') {
        if (depth == 0) fail_at(lx, lx->pos, "unexpected closing bracket");
        depth--;
      }
      emit(lx, FERI_TOK_OP, lx->pos, OPS[i], len);
      lx->pos += len;
    }
  }
}

/* After "{%" (and its modifier) at pos: the length through the closer of "raw %}" or "endraw %}"
 * (name), 0 when the tag is not that; *closer: the closer's modifier ('-', '+' or 0). */
static size_t raw_tag(const lexer *lx, size_t pos, const char *name, char *closer) {
  const char *s = lx->s;
  size_t i = pos;
  const size_t len = strlen(name);
  while (i < lx->n && is_space(s[i])) i++;
  if (lx->n - i < len || memcmp(s + i, name, len) != 0) return 0;
  i += len;
  while (i < lx->n && is_space(s[i])) i++;
  *closer = 0;
  if (i < lx->n && (s[i] == '-' || s[i] == '+')) *closer = s[i++];
  if (lx->n - i < 2 || s[i] != '%' || s[i + 1] != '}') return 0;
  return i + 2 - pos;
}

/* {% raw %}...{% endraw %}: the text between as it is; the tags' whitespace rules still apply. */
static void raw_block(lexer *lx, size_t open_pos, bool *line_starting) {
  const char *s = lx->s;
  for (size_t i = lx->pos; i + 1 < lx->n; i++) {
    if (s[i] != '{' || s[i + 1] != '%') continue;
    const char mod = i + 2 < lx->n ? s[i + 2] : 0;
    char closer;
    const size_t n = raw_tag(lx, i + 2 + (mod == '-' || mod == '+'), "endraw", &closer);
    if (!n) continue;
    size_t text_end = i;
    if (mod == '-') {
      while (text_end > lx->pos && is_space(s[text_end - 1])) text_end--;
    } else if (mod != '+') {
      size_t l = i;
      while (l > lx->pos && (s[l - 1] == ' ' || s[l - 1] == '\t')) l--;
      if (l < i && ((l > lx->pos && s[l - 1] == '\n') || (l == lx->pos && *line_starting))) text_end = l;
    }
    if (text_end > lx->pos) emit(lx, FERI_TOK_TEXT, lx->pos, s + lx->pos, text_end - lx->pos);
    lx->pos = i + 2 + (mod == '-' || mod == '+') + n;
    *line_starting = false;
    if (closer == '-') {
      while (lx->pos < lx->n && is_space(s[lx->pos])) *line_starting = s[lx->pos++] == '\n';
    } else if (closer == 0 && lx->pos < lx->n && s[lx->pos] == '\n') {
      lx->pos++;
      *line_starting = true;
    }
    return;
  }
  fail_at(lx, open_pos, "Missing end of raw directive");
}

/* Newlines normalised to "\n" and one trailing newline dropped, as Jinja2 reads a template. */
static void normalise(lexer *lx, const char *src, size_t len) {
  char *s = feri_tmpl_alloc(lx->rt, len + 1);
  size_t n = 0;
  for (size_t i = 0; i < len; i++) {
    if (src[i] == '\r') {
      s[n++] = '\n';
      if (i + 1 < len && src[i + 1] == '\n') i++;
    } else {
      s[n++] = src[i];
    }
  }
  if (n && s[n - 1] == '\n') n--;
  s[n] = 0;
  lx->s = s;
  lx->n = n;
}

void feri_tmpl_lex(feri_tmpl_rt *rt, const char *src, size_t len, feri_tmpl_tok **toks, size_t *ntok) {
  lexer lx = {.rt = rt, .seen_line = 1};
  normalise(&lx, src, len);
  const char *s = lx.s;
  bool line_starting = true;
  while (lx.pos < lx.n) {
    size_t at = lx.pos;
    while (at + 1 < lx.n && !(s[at] == '{' && (s[at + 1] == '{' || s[at + 1] == '%' || s[at + 1] == '#'))) at++;
    if (at + 1 >= lx.n) at = lx.n;
    size_t text_end = at;
    if (at < lx.n) {
      const char kind = s[at + 1], mod = at + 2 < lx.n ? s[at + 2] : 0;
      if (mod == '-') {
        while (text_end > lx.pos && is_space(s[text_end - 1])) text_end--;
      } else if (mod != '+' && kind != '{') { /* lstrip_blocks */
        size_t l = at;
        while (l > lx.pos && (s[l - 1] == ' ' || s[l - 1] == '\t' || s[l - 1] == '\f' || s[l - 1] == '\v' || s[l - 1] == '\r')) l--;
        if (l < at && ((l > lx.pos && s[l - 1] == '\n') || (l == lx.pos && line_starting))) text_end = l;
      }
    }
    if (text_end > lx.pos) emit(&lx, FERI_TOK_TEXT, lx.pos, s + lx.pos, text_end - lx.pos);
    if (at >= lx.n) break;
    const char kind = s[at + 1];
    lx.pos = at + 2;
    if (lx.pos < lx.n && (s[lx.pos] == '-' || s[lx.pos] == '+')) lx.pos++;
    if (kind == '#') {
      const char *end = NULL;
      for (size_t i = lx.pos; i + 1 < lx.n; i++)
        if (s[i] == '#' && s[i + 1] == '}') {
          end = s + i;
          break;
        }
      if (!end) fail_at(&lx, at, "missing end of comment tag");
      const bool minus = end > s + lx.pos && end[-1] == '-';
      lx.pos = (size_t)(end - s) + 2;
      line_starting = false;
      if (minus) {
        while (lx.pos < lx.n && is_space(s[lx.pos])) line_starting = s[lx.pos++] == '\n';
      } else if (lx.pos < lx.n && s[lx.pos] == '\n') {
        lx.pos++;
        line_starting = true;
      }
      continue;
    }
    char closer;
    const size_t raw = kind == '%' ? raw_tag(&lx, lx.pos, "raw", &closer) : 0;
    if (raw) {
      lx.pos += raw;
      if (closer == '-')
        while (lx.pos < lx.n && is_space(s[lx.pos])) lx.pos++;
      line_starting = false;
      raw_block(&lx, at, &line_starting);
      continue;
    }
    emit(&lx, kind == '%' ? FERI_TOK_BLOCK_BEGIN : FERI_TOK_VAR_BEGIN, at, s + at, 2);
    tag(&lx, kind == '%', at, &line_starting);
  }
  emit(&lx, FERI_TOK_EOF, lx.n, s + lx.n, 0);
  *toks = lx.toks;
  *ntok = lx.ntok;
}
