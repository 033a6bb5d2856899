/* gbnf.c: GBNF text into a grammar over lexemes (gbnf.h), in three passes: the text is parsed
 * into a syntax tree (one per rule); the rules that are terminals are found (a rule is one when
 * every rule it names is one, root never: a worklist in the order that makes each terminal's
 * expression from those already made); the other rules become the context-free grammar, from root
 * down, each literal, class, `.` and terminal becoming a lexeme. */
#include "grammar/gbnf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "grammar/cfg.h"
#include "grammar/grow.h"
#include "tokenizer/utf8.h"

/* ---- the syntax tree --------------------------------------------------------------------- */

typedef enum node_kind { N_LIT, N_CLASS, N_ANY, N_REF, N_SEQ, N_ALT, N_REP } node_kind;

typedef struct node {
  uint8_t kind, negated;
  uint16_t depth; /* 1 + the deepest child's */
  uint32_t at;    /* its first byte in the text */
  uint32_t span;  /* LIT, CLASS, ANY: its bytes in the text (the key that shares one lexeme) */
  uint32_t a, n;  /* LIT: code points lit[a .. a + n); CLASS: ranges (pairs) [a .. a + n); REF: rule
                     a,  in definition n; SEQ, ALT: children kids[a .. a + n); REP: child a */
  uint32_t min, max; /* REP (max FERI_RX_INF: unbounded) */
} node;

typedef struct rule {
  uint32_t name, name_len; /* in the text */
  uint32_t body;           /* its node, UINT32_MAX while undefined */
  uint32_t def;            /* the definition that counts (the last) */
  uint32_t pending;        /* rules it names that are not terminals yet (one per mention) */
  uint32_t nt;             /* its nonterminal (0: not made yet) */
  int32_t sym;             /* a terminal's symbol in rules (0: not made yet) */
  uint8_t terminal;
} rule;

/* An expression of a terminal being built: its rx node, whether it matches the empty string and
 * whether a non-empty one, how deep its tree is and how many nodes it has written out. */
typedef struct frag {
  uint32_t node;
  uint8_t nul, ne;
  uint32_t depth, size;
} frag;

/* A map from byte strings of the text to entries 0, 1, ... (open addressing). */
typedef struct smap {
  uint32_t *slot; /* entry + 1; 0 free */
  uint32_t mask;
  uint32_t *off, *len, *val;
  uint32_t n, cap;
} smap;

enum { SYM_NOTHING = INT32_MIN }; /* an item that stands for the empty string */

typedef struct gp {
  const char *src;
  size_t len, pos;
  fer_status err;
  int parens;
  node *nodes;
  uint32_t n_nodes, cap_nodes;
  uint32_t *kids, n_kids, cap_kids;
  uint32_t *stack, n_stack, cap_stack;    /* the children of the lists being parsed */
  uint32_t *lit, n_lit, cap_lit;          /* literals' code points */
  uint32_t *ranges, n_ranges, cap_ranges; /* classes' ranges, in pairs */
  rule *rules;
  uint32_t n_rules, cap_rules;
  smap names;
  uint32_t *def_rule, n_defs, cap_defs; /* the rule of each definition */
  uint32_t root;
  /* building */
  feri_cfg *g;
  frag *term;                          /* per rule: a terminal's expression */
  smap lexemes;                        /* literal, class or `.` text -> its lexeme symbol */
  uint32_t *queue, n_queue, cap_queue; /* rules whose nonterminal waits for its rules */
  int32_t *syms;
  uint32_t n_syms, cap_syms; /* a rule's right-hand side being built */
  uint64_t lexeme_nodes;
} gp;

static void line_col(const char *src, size_t at, unsigned *line, unsigned *col) {
  *line = 1, *col = 1;
  for (size_t i = 0; i < at; i++) {
    if (src[i] == '\n')
      ++*line, *col = 1;
    else
      ++*col;
  }
}

static uint32_t fail_at(gp *p, size_t at, fer_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static uint32_t fail_at(gp *p, size_t at, fer_status st, const char *fmt, ...) {
  if (p->err) return UINT32_MAX;
  char msg[320];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  unsigned line, col;
  line_col(p->src, at, &line, &col);
  p->err = feri_fail(st, "gbnf: line %u, column %u: %s", line, col, msg);
  return UINT32_MAX;
}

static uint32_t oom(gp *p) {
  if (!p->err) p->err = feri_fail(FER_STATUS_OUT_OF_MEMORY, "gbnf: out of memory");
  return UINT32_MAX;
}

/* What stands at the position, for messages. */
static const char *found(const gp *p, char *buf, size_t cap) {
  if (p->pos >= p->len) return "the end of the text";
  const unsigned char c = (unsigned char)p->src[p->pos];
  if (c == '\n' || c == '\r') return "the end of the line";
  if (c >= 0x20 && c < 0x7F)
    snprintf(buf, cap, "'%c'", c);
  else
    snprintf(buf, cap, "byte 0x%02X", c);
  return buf;
}

/* ---- the map ----------------------------------------------------------------------------- */

static uint32_t hash(const char *s, uint32_t n) {
  uint32_t h = 2166136261u;
  for (uint32_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
  return h;
}

static void smap_free(smap *m) { free(m->slot), free(m->off), free(m->len), free(m->val); }

/* The entry of key src[off .. off + len): found, or added (with value val) when add is set;
 * UINT32_MAX when absent and not added, or out of memory (err set). */
static uint32_t smap_get(gp *p, smap *m, uint32_t off, uint32_t len, uint32_t val, int add) {
  if (2 * (m->n + 1) > m->mask) { /* grow the table and rehash */
    const uint32_t size = m->mask ? 2 * (m->mask + 1) : 64;
    uint32_t *slot = calloc(size, sizeof *slot);
    if (!slot) return oom(p);
    for (uint32_t e = 0; e < m->n; e++) {
      uint32_t h = hash(p->src + m->off[e], m->len[e]) & (size - 1);
      while (slot[h]) h = (h + 1) & (size - 1);
      slot[h] = e + 1;
    }
    free(m->slot);
    m->slot = slot, m->mask = size - 1;
  }
  uint32_t h = hash(p->src + off, len) & m->mask;
  for (; m->slot[h]; h = (h + 1) & m->mask) {
    const uint32_t e = m->slot[h] - 1;
    if (m->len[e] == len && memcmp(p->src + m->off[e], p->src + off, len) == 0) return e;
  }
  if (!add) return UINT32_MAX;
  uint32_t cap = m->cap;
  if (!feri_grow((void **)&m->off, &cap, m->n + 1, sizeof *m->off)) return oom(p);
  uint32_t *ln = realloc(m->len, sizeof *ln * cap),
           *v = ln ? realloc(m->val, sizeof *v * cap) : NULL;
  if (ln) m->len = ln;
  if (v) m->val = v;
  if (!ln || !v) return oom(p);
  m->cap = cap;
  m->off[m->n] = off, m->len[m->n] = len, m->val[m->n] = val;
  m->slot[h] = m->n + 1;
  return m->n++;
}

/* ---- parsing ----------------------------------------------------------------------------- */

static int is_word(int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

static int is_hex(int c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int at_char(const gp *p, char c) { return p->pos < p->len && p->src[p->pos] == c; }

/* Skips blanks and comments, and line ends when newline_ok. */
static void space(gp *p, int newline_ok) {
  while (p->pos < p->len) {
    const char c = p->src[p->pos];
    if (c == ' ' || c == '\t' || (newline_ok && (c == '\n' || c == '\r'))) {
      p->pos++;
    } else if (c == '#') {
      while (p->pos < p->len && p->src[p->pos] != '\n' && p->src[p->pos] != '\r') p->pos++;
    } else {
      break;
    }
  }
}

static uint32_t add_node(gp *p, node n) {
  if (p->err) return UINT32_MAX;
  if (n.depth > FERI_GBNF_MAX_DEPTH) {
    fail_at(p, n.at, FER_STATUS_INVALID_ARG, "nested deeper than %d levels", FERI_GBNF_MAX_DEPTH);
    return UINT32_MAX;
  }
  if (!feri_grow((void **)&p->nodes, &p->cap_nodes, p->n_nodes + 1, sizeof *p->nodes))
    return oom(p);
  p->nodes[p->n_nodes] = n;
  return p->n_nodes++;
}

static void push(gp *p, uint32_t x) {
  if (!p->err && !feri_grow((void **)&p->stack, &p->cap_stack, p->n_stack + 1, sizeof *p->stack))
    oom(p);
  if (!p->err) p->stack[p->n_stack++] = x;
}

/* The list of the stack's entries from base (popped) as one node of kind SEQ or ALT; a list of one
 * is that one. */
static uint32_t make_list(gp *p, node_kind kind, uint32_t base, size_t at) {
  const uint32_t n = p->n_stack - base;
  if (p->err) return UINT32_MAX;
  if (n == 1) return p->n_stack = base, p->stack[base];
  if (!feri_grow((void **)&p->kids, &p->cap_kids, p->n_kids + n, sizeof *p->kids)) return oom(p);
  uint32_t depth = 0;
  for (uint32_t i = 0; i < n; i++) {
    const uint32_t k = p->stack[base + i];
    p->kids[p->n_kids + i] = k;
    if (p->nodes[k].depth > depth) depth = p->nodes[k].depth;
  }
  p->n_stack = base;
  const uint32_t x = add_node(p, (node){.kind = (uint8_t)kind,
                                        .depth = (uint16_t)(depth + 1),
                                        .at = (uint32_t)at,
                                        .a = p->n_kids,
                                        .n = n});
  p->n_kids += n;
  return x;
}

/* One character of a literal or class (an escape or a UTF-8 sequence) into *cp. */
static int parse_char(gp *p, uint32_t *cp) {
  const size_t at = p->pos;
  const uint8_t *s = (const uint8_t *)p->src;
  if (s[at] != '\\') {
    const size_t n = feri_utf8_decode(s + at, p->len - at, cp);
    if (n == 0) return fail_at(p, at, FER_STATUS_BAD_FORMAT, "invalid UTF-8"), 0;
    p->pos += n;
    return 1;
  }
  if (at + 1 >= p->len)
    return fail_at(p, at, FER_STATUS_BAD_FORMAT,
                   "expected an escaped character after '\\', found the end of the text"),
           0;
  const char e = (char)s[at + 1];
  int digits = 0;
  switch (e) {
    case 'n': *cp = '\n'; break;
    case 'r': *cp = '\r'; break;
    case 't': *cp = '\t'; break;
    case '"':
    case '\\':
    case '[':
    case ']': *cp = (uint32_t)e; break;
    case 'x': digits = 2; break;
    case 'u': digits = 4; break;
    case 'U': digits = 8; break;
    default:
      return fail_at(p, at, FER_STATUS_BAD_FORMAT,
                     "unknown escape (expected \\\" \\\\ \\[ \\] \\n \\r \\t \\xHH \\uHHHH or "
                     "\\UHHHHHHHH)"),
             0;
  }
  p->pos = at + 2;
  if (!digits) return 1;
  uint32_t v = 0;
  for (int i = 0; i < digits; i++, p->pos++) {
    if (p->pos >= p->len || !is_hex(s[p->pos]))
      return fail_at(p, at, FER_STATUS_BAD_FORMAT, "expected %d hex digits after \\%c", digits, e),
             0;
    const int h = s[p->pos];
    v = v << 4 | (uint32_t)(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
  }
  if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
    return fail_at(p, at, FER_STATUS_BAD_FORMAT, "\\%c%.*s is not a Unicode scalar value", e,
                   digits, p->src + at + 2),
           0;
  *cp = v;
  return 1;
}

static uint32_t parse_literal(gp *p) {
  const size_t at = p->pos++;
  const uint32_t base = p->n_lit;
  for (;;) {
    if (p->pos >= p->len) {
      fail_at(p, at, FER_STATUS_BAD_FORMAT, "a literal with no closing '\"'");
      return UINT32_MAX;
    }
    if (p->src[p->pos] == '"') break;
    uint32_t cp;
    if (!parse_char(p, &cp)) return UINT32_MAX;
    if (!feri_grow((void **)&p->lit, &p->cap_lit, p->n_lit + 1, sizeof *p->lit)) return oom(p);
    p->lit[p->n_lit++] = cp;
  }
  p->pos++;
  return add_node(p, (node){.kind = N_LIT,
                            .depth = 1,
                            .at = (uint32_t)at,
                            .span = (uint32_t)(p->pos - at),
                            .a = base,
                            .n = p->n_lit - base});
}

static uint32_t parse_class(gp *p) {
  const size_t at = p->pos++;
  const uint8_t negated = at_char(p, '^');
  p->pos += negated;
  const uint32_t base = p->n_ranges;
  for (;;) {
    if (p->pos >= p->len) {
      fail_at(p, at, FER_STATUS_BAD_FORMAT, "a character class with no closing ']'");
      return UINT32_MAX;
    }
    if (p->src[p->pos] == ']') break;
    const size_t from = p->pos;
    uint32_t lo, hi;
    if (!parse_char(p, &lo)) return UINT32_MAX;
    hi = lo;
    if (p->pos + 1 < p->len && p->src[p->pos] == '-' && p->src[p->pos + 1] != ']') {
      p->pos++;
      if (!parse_char(p, &hi)) return UINT32_MAX;
      if (hi < lo) {
        fail_at(p, from, FER_STATUS_BAD_FORMAT, "a range whose end comes before its start");
        return UINT32_MAX;
      }
    }
    if (!feri_grow((void **)&p->ranges, &p->cap_ranges, p->n_ranges + 1, 2 * sizeof *p->ranges))
      return oom(p);
    p->ranges[2 * p->n_ranges] = lo, p->ranges[2 * p->n_ranges + 1] = hi;
    p->n_ranges++;
  }
  p->pos++;
  if (p->n_ranges == base) {
    fail_at(p, at, FER_STATUS_BAD_FORMAT,
            "an empty character class (expected a character before ']')");
    return UINT32_MAX;
  }
  return add_node(p, (node){.kind = N_CLASS,
                            .negated = negated,
                            .depth = 1,
                            .at = (uint32_t)at,
                            .span = (uint32_t)(p->pos - at),
                            .a = base,
                            .n = p->n_ranges - base});
}

static uint32_t parse_count(gp *p, uint32_t *v) {
  char buf[16];
  if (p->pos >= p->len || p->src[p->pos] < '0' || p->src[p->pos] > '9')
    return fail_at(p, p->pos, FER_STATUS_BAD_FORMAT, "expected a count, found %s",
                   found(p, buf, sizeof buf)),
           0;
  const size_t at = p->pos;
  uint64_t x = 0;
  for (; p->pos < p->len && p->src[p->pos] >= '0' && p->src[p->pos] <= '9'; p->pos++)
    if (x <= FERI_GBNF_MAX_COUNT) x = x * 10 + (uint64_t)(p->src[p->pos] - '0');
  if (x > FERI_GBNF_MAX_COUNT)
    return fail_at(p, at, FER_STATUS_INVALID_ARG, "a count above the bound %d",
                   FERI_GBNF_MAX_COUNT),
           0;
  *v = (uint32_t)x;
  return 1;
}

/* The repetition operator at the position applied to item x. */
static uint32_t parse_postfix(gp *p, uint32_t x, int nested) {
  const size_t at = p->pos;
  const char c = p->src[p->pos++];
  uint32_t min = 0, max = FERI_RX_INF;
  char buf[16];
  if (c == '+')
    min = 1;
  else if (c == '?')
    max = 1;
  else if (c == '{') {
    space(p, nested);
    if (!parse_count(p, &min)) return UINT32_MAX;
    space(p, nested);
    if (at_char(p, '}')) {
      max = min;
    } else if (at_char(p, ',')) {
      p->pos++;
      space(p, nested);
      if (p->pos < p->len && p->src[p->pos] >= '0' && p->src[p->pos] <= '9') {
        if (!parse_count(p, &max)) return UINT32_MAX;
        space(p, nested);
      }
      if (!at_char(p, '}'))
        return fail_at(p, p->pos, FER_STATUS_BAD_FORMAT, "expected '}', found %s",
                       found(p, buf, sizeof buf));
      if (max < min) return fail_at(p, at, FER_STATUS_BAD_FORMAT, "a repetition {m,n} with m > n");
    } else {
      return fail_at(p, p->pos, FER_STATUS_BAD_FORMAT, "expected ',' or '}', found %s",
                     found(p, buf, sizeof buf));
    }
    p->pos++;
  }
  return add_node(p, (node){.kind = N_REP,
                            .depth = (uint16_t)(p->nodes[x].depth + 1),
                            .at = (uint32_t)at,
                            .a = x,
                            .min = min,
                            .max = max});
}

/* The rule named src[at .. at + len), made (undefined) when the name is new. */
static uint32_t rule_named(gp *p, size_t at, size_t len) {
  const uint32_t r = smap_get(p, &p->names, (uint32_t)at, (uint32_t)len, 0, 1);
  if (r == p->n_rules) {
    if (!feri_grow((void **)&p->rules, &p->cap_rules, p->n_rules + 1, sizeof *p->rules))
      return oom(p);
    p->rules[p->n_rules++] =
        (rule){.name = (uint32_t)at, .name_len = (uint32_t)len, .body = UINT32_MAX};
  }
  return r;
}

static uint32_t parse_alternatives(gp *p, int nested);

static uint32_t parse_sequence(gp *p, int nested) {
  const uint32_t base = p->n_stack;
  const size_t at = p->pos;
  char buf[16];
  while (p->pos < p->len && !p->err) {
    const char c = p->src[p->pos];
    uint32_t item;
    if (c == '"') {
      item = parse_literal(p);
    } else if (c == '[') {
      item = parse_class(p);
    } else if (c == '.') {
      item = add_node(p, (node){.kind = N_ANY, .depth = 1, .at = (uint32_t)p->pos, .span = 1});
      p->pos++;
    } else if (is_word((unsigned char)c)) {
      const size_t from = p->pos;
      while (p->pos < p->len && is_word((unsigned char)p->src[p->pos])) p->pos++;
      const uint32_t r = rule_named(p, from, p->pos - from);
      if (r == UINT32_MAX) return UINT32_MAX;
      item = add_node(
          p, (node){.kind = N_REF, .depth = 1, .at = (uint32_t)from, .a = r, .n = p->n_defs - 1});
    } else if (c == '(') {
      const size_t open = p->pos++;
      if (++p->parens > FERI_GBNF_MAX_PARENS) {
        fail_at(p, open, FER_STATUS_INVALID_ARG, "parentheses nested deeper than %d",
                FERI_GBNF_MAX_PARENS);
        return UINT32_MAX;
      }
      space(p, 1);
      item = parse_alternatives(p, 1);
      p->parens--;
      if (p->err) return UINT32_MAX;
      if (!at_char(p, ')'))
        return fail_at(p, p->pos, FER_STATUS_BAD_FORMAT, "expected ')', found %s",
                       found(p, buf, sizeof buf));
      p->pos++;
    } else if (c == '*' || c == '+' || c == '?' || c == '{') {
      if (p->n_stack == base)
        return fail_at(p, p->pos, FER_STATUS_BAD_FORMAT, "expected an item before '%c'", c);
      const uint32_t rep = parse_postfix(p, p->stack[p->n_stack - 1], nested);
      if (rep == UINT32_MAX) return UINT32_MAX;
      p->stack[p->n_stack - 1] = rep;
      space(p, nested);
      continue;
    } else {
      break;
    }
    if (item == UINT32_MAX) return UINT32_MAX;
    push(p, item);
    space(p, nested);
  }
  if (p->err) return UINT32_MAX;
  if (p->n_stack == base)
    return add_node(p, (node){.kind = N_SEQ, .depth = 1, .at = (uint32_t)at}); /* empty */
  return make_list(p, N_SEQ, base, at);
}

static uint32_t parse_alternatives(gp *p, int nested) {
  const uint32_t base = p->n_stack;
  const size_t at = p->pos;
  for (;;) {
    const uint32_t seq = parse_sequence(p, nested);
    if (seq == UINT32_MAX) return UINT32_MAX;
    push(p, seq);
    if (!at_char(p, '|')) break;
    p->pos++;
    space(p, 1);
  }
  return make_list(p, N_ALT, base, at);
}

static void parse_rule(gp *p) {
  char buf[16];
  const size_t at = p->pos;
  while (p->pos < p->len && is_word((unsigned char)p->src[p->pos])) p->pos++;
  if (p->pos == at) {
    fail_at(p, at, FER_STATUS_BAD_FORMAT, "expected a rule name, found %s",
            found(p, buf, sizeof buf));
    return;
  }
  const uint32_t name_len = (uint32_t)(p->pos - at);
  space(p, 0);
  if (p->pos + 3 > p->len || memcmp(p->src + p->pos, "::=", 3) != 0) {
    fail_at(p, p->pos, FER_STATUS_BAD_FORMAT, "expected '::=' after the rule name, found %s",
            found(p, buf, sizeof buf));
    return;
  }
  p->pos += 3;
  space(p, 1);
  const uint32_t r = rule_named(p, at, name_len);
  if (r == UINT32_MAX) return;
  if (!feri_grow((void **)&p->def_rule, &p->cap_defs, p->n_defs + 1, sizeof *p->def_rule)) {
    oom(p);
    return;
  }
  p->def_rule[p->n_defs++] = r;
  const uint32_t body = parse_alternatives(p, 0);
  if (p->err) return;
  if (at_char(p, '\r'))
    p->pos += p->pos + 1 < p->len && p->src[p->pos + 1] == '\n' ? 2 : 1;
  else if (at_char(p, '\n'))
    p->pos++;
  else if (p->pos < p->len) {
    fail_at(p, p->pos, FER_STATUS_BAD_FORMAT,
            "expected the end of the line after the rule, found %s", found(p, buf, sizeof buf));
    return;
  }
  p->rules[r].body = body; /* the last definition counts */
  p->rules[r].def = p->n_defs - 1;
  space(p, 1);
}

/* ---- terminals --------------------------------------------------------------------------- */

/* 1 where REF node x is in a definition that counts. */
static int live_ref(const gp *p, const node *x) { return p->rules[p->def_rule[x->n]].def == x->n; }

/* Finds undefined names, then the terminals: a rule other than root once every rule it names is a
 * terminal (the mentions it waits for counted down as they become terminals). Fills order with the
 * terminals, each after those it names; returns their count. */
static uint32_t find_terminals(gp *p, uint32_t *order) {
  for (uint32_t i = 0; i < p->n_nodes && !p->err; i++) {
    const node *x = &p->nodes[i];
    if (x->kind != N_REF || !live_ref(p, x)) continue;
    if (p->rules[x->a].body == UINT32_MAX) {
      const rule *r = &p->rules[x->a];
      fail_at(p, x->at, FER_STATUS_INVALID_ARG, "no rule defines '%.*s'", (int)r->name_len,
              p->src + r->name);
    }
  }
  if (p->err) return 0;
  /* who mentions whom: CSR of the mentions by the rule mentioned */
  uint32_t *first = calloc((size_t)p->n_rules + 1, sizeof *first), *by = NULL;
  uint32_t n_mentions = 0;
  if (!first) return oom(p), 0;
  for (uint32_t i = 0; i < p->n_nodes; i++)
    if (p->nodes[i].kind == N_REF && live_ref(p, &p->nodes[i]))
      first[p->nodes[i].a + 1]++, n_mentions++;
  for (uint32_t r = 0; r < p->n_rules; r++) first[r + 1] += first[r];
  by = malloc(sizeof *by * (n_mentions ? n_mentions : 1));
  uint32_t *fill = malloc(sizeof *fill * ((size_t)p->n_rules + 1));
  if (!by || !fill) {
    free(first), free(by), free(fill);
    return oom(p), 0;
  }
  memcpy(fill, first, sizeof *fill * ((size_t)p->n_rules + 1));
  for (uint32_t i = 0; i < p->n_nodes; i++) {
    const node *x = &p->nodes[i];
    if (x->kind != N_REF || !live_ref(p, x)) continue;
    const uint32_t owner = p->def_rule[x->n];
    by[fill[x->a]++] = owner;
    p->rules[owner].pending++;
  }
  uint32_t n = 0;
  for (uint32_t r = 0; r < p->n_rules; r++)
    if (r != p->root && p->rules[r].body != UINT32_MAX && p->rules[r].pending == 0) order[n++] = r;
  for (uint32_t k = 0; k < n; k++) { /* order doubles as the worklist */
    const uint32_t t = order[k];
    p->rules[t].terminal = 1;
    for (uint32_t e = first[t]; e < first[t + 1]; e++) {
      const uint32_t r = by[e];
      if (--p->rules[r].pending == 0 && r != p->root) order[n++] = r;
    }
  }
  free(first), free(by), free(fill);
  return n;
}

/* ---- expressions of terminals ------------------------------------------------------------ */

static uint32_t sat_add(uint32_t a, uint32_t b) { return a > UINT32_MAX - b ? UINT32_MAX : a + b; }
static uint32_t sat_mul(uint32_t a, uint32_t b) {
  return b && a > UINT32_MAX / b ? UINT32_MAX : a * b;
}

static frag rx_cat(gp *p, frag a, frag b) {
  const uint32_t x = feri_rx_cat(&p->g->rx, a.node, b.node);
  return (frag){x, (uint8_t)(a.nul && b.nul),
                (uint8_t)((a.ne && (b.nul || b.ne)) || (b.ne && (a.nul || a.ne))),
                1 + (a.depth > b.depth ? a.depth : b.depth), sat_add(sat_add(a.size, b.size), 1)};
}

static frag rx_alt(gp *p, frag a, frag b) {
  const uint32_t x = feri_rx_alt(&p->g->rx, a.node, b.node);
  return (frag){x, (uint8_t)(a.nul || b.nul), (uint8_t)(a.ne || b.ne),
                1 + (a.depth > b.depth ? a.depth : b.depth), sat_add(sat_add(a.size, b.size), 1)};
}

static frag rx_char(gp *p, uint32_t cp) {
  const uint32_t r[2] = {cp, cp};
  return (frag){feri_rx_set(&p->g->rx, r, 1), 0, 1, 0, 1};
}

/* Code points lit[lo .. hi) concatenated as a balanced tree (shallow for long literals). */
static frag rx_string(gp *p, uint32_t lo, uint32_t hi) {
  if (hi - lo == 1) return rx_char(p, p->lit[lo]);
  const uint32_t mid = lo + (hi - lo) / 2;
  return rx_cat(p, rx_string(p, lo, mid), rx_string(p, mid, hi));
}

static frag rx_class(gp *p, const node *x) {
  const uint32_t *r = p->ranges + 2 * x->a;
  uint32_t n = x->n;
  uint32_t *inv = NULL;
  if (x->negated) { /* the complement: the gaps between the sorted, merged ranges */
    uint32_t *s = malloc(sizeof *s * 2 * n), *out = malloc(sizeof *out * 2 * (n + 1));
    if (!s || !out) {
      free(s), free(out), oom(p);
      return (frag){UINT32_MAX, 0, 0, 0, 0};
    }
    memcpy(s, r, sizeof *s * 2 * n);
    for (uint32_t i = 1; i < n; i++) /* insertion sort by low end: classes are short */
      for (uint32_t j = i; j > 0 && s[2 * j] < s[2 * (j - 1)]; j--) {
        const uint32_t lo = s[2 * j], hi = s[2 * j + 1];
        s[2 * j] = s[2 * (j - 1)], s[2 * j + 1] = s[2 * (j - 1) + 1];
        s[2 * (j - 1)] = lo, s[2 * (j - 1) + 1] = hi;
      }
    uint32_t m = 0, next = 0; /* next: the lowest code point not yet covered */
    for (uint32_t i = 0; i < n; i++) {
      if (s[2 * i] > next) out[2 * m] = next, out[2 * m + 1] = s[2 * i] - 1, m++;
      if (s[2 * i + 1] + 1 > next) next = s[2 * i + 1] + 1;
    }
    if (next <= 0x10FFFF) out[2 * m] = next, out[2 * m + 1] = 0x10FFFF, m++;
    free(s);
    inv = out, r = out, n = m;
  }
  const uint32_t set =
      feri_rx_set(&p->g->rx, r, n); /* n == 0: the class had everything: no string */
  free(inv);
  const int none = set != UINT32_MAX && p->g->rx.nodes[set].kind == FERI_RX_NONE;
  return (frag){set, 0, (uint8_t)!none, 0, 1};
}

static frag rx_of(gp *p, uint32_t xi) {
  const node *x = &p->nodes[xi];
  const frag bad = {UINT32_MAX, 0, 0, 0, 0};
  if (p->err) return bad;
  switch ((node_kind)x->kind) {
    case N_LIT:
      if (x->n == 0) return (frag){feri_rx_empty(&p->g->rx), 1, 0, 0, 1};
      return rx_string(p, x->a, x->a + x->n);
    case N_CLASS: return rx_class(p, x);
    case N_ANY: {
      const uint32_t r[4] = {0, '\n' - 1, '\n' + 1, 0x10FFFF};
      return (frag){feri_rx_set(&p->g->rx, r, 2), 0, 1, 0, 1};
    }
    case N_REF: return p->term[x->a];
    case N_SEQ:
    case N_ALT: {
      if (x->n == 0) return (frag){feri_rx_empty(&p->g->rx), 1, 0, 0, 1};
      /* a balanced tree of the children, built bottom up in place */
      frag *f = malloc(sizeof *f * x->n);
      if (!f) return oom(p), bad;
      for (uint32_t i = 0; i < x->n; i++) f[i] = rx_of(p, p->kids[x->a + i]);
      uint32_t n = x->n;
      while (n > 1 && !p->err) {
        uint32_t m = 0;
        for (uint32_t i = 0; i + 1 < n; i += 2)
          f[m++] = x->kind == N_SEQ ? rx_cat(p, f[i], f[i + 1]) : rx_alt(p, f[i], f[i + 1]);
        if (n % 2) f[m++] = f[n - 1];
        n = m;
      }
      const frag out = f[0];
      free(f);
      return out;
    }
    case N_REP: {
      const frag c = rx_of(p, x->a);
      if (x->max == 0) return (frag){feri_rx_empty(&p->g->rx), 1, 0, 0, 1};
      const uint32_t copies = x->max == FERI_RX_INF ? (x->min > 1 ? x->min : 1) : x->max;
      return (frag){feri_rx_repeat(&p->g->rx, c.node, x->min, x->max),
                    (uint8_t)(x->min == 0 || c.nul), c.ne, c.depth + 1,
                    sat_add(sat_mul(c.size, copies), 1)};
    }
  }
  return bad;
}

/* ---- the context-free grammar ------------------------------------------------------------ */

static uint32_t nonterm(gp *p) {
  const uint32_t n = feri_cfg_nonterm(p->g);
  if (n == UINT32_MAX && !p->err)
    p->err = p->g->err ? p->g->err : feri_fail(FER_STATUS_OUT_OF_MEMORY, "gbnf: out of memory");
  return n;
}

static void add_rule(gp *p, uint32_t lhs, const int32_t *syms, uint32_t n) {
  if (p->err) return;
  feri_cfg_rule(p->g, lhs, syms, n);
  if (p->g->err) p->err = p->g->err;
}

/* A lexeme of expression f; `what` names it in messages. */
static int32_t lexeme(gp *p, frag f, size_t at, const char *what, uint32_t what_len) {
  if (p->err || f.node == UINT32_MAX) {
    if (!p->err)
      p->err =
          p->g->rx.err ? p->g->rx.err : feri_fail(FER_STATUS_OUT_OF_MEMORY, "gbnf: out of memory");
    return 0;
  }
  p->lexeme_nodes += f.size;
  if (f.depth > FERI_GBNF_MAX_DEPTH || p->lexeme_nodes > FERI_GBNF_MAX_LEXEME_NODES) {
    fail_at(p, at, FER_STATUS_INVALID_ARG, "%.*s: %s", (int)what_len, what,
            f.depth > FERI_GBNF_MAX_DEPTH
                ? "a terminal nested deeper than the lexer's bound once its rules are written in"
                : "the lexemes grow past the bound once their terminals are written in");
    return 0;
  }
  const int32_t s = feri_cfg_lexeme(p->g, f.node);
  if (!s && !p->err) p->err = p->g->err;
  return s;
}

static uint32_t nt_of_rule(gp *p, uint32_t r) {
  if (!p->rules[r].nt) {
    p->rules[r].nt = nonterm(p);
    if (p->err) return UINT32_MAX;
    if (!feri_grow((void **)&p->queue, &p->cap_queue, p->n_queue + 1, sizeof *p->queue))
      return oom(p);
    p->queue[p->n_queue++] = r;
  }
  return p->rules[r].nt;
}

/* A terminal in a rule: its lexeme, or, where it matches the empty string, a nonterminal of the
 * lexeme or nothing (llguidance's nullable lexeme). */
static int32_t terminal_sym(gp *p, uint32_t r, size_t at) {
  rule *t = &p->rules[r];
  if (t->sym) return t->sym;
  const frag f = p->term[r];
  if (f.nul && !f.ne) return t->sym = SYM_NOTHING;
  const int32_t lx = lexeme(p, f, at, p->src + t->name, t->name_len);
  if (p->err) return 0;
  if (!f.nul) return t->sym = lx;
  const uint32_t w = nonterm(p);
  add_rule(p, w, &lx, 1);
  add_rule(p, w, NULL, 0);
  return t->sym = (int32_t)w;
}

static void push_sym(gp *p, int32_t s) {
  if (p->err || s == SYM_NOTHING) return;
  if (!feri_grow((void **)&p->syms, &p->cap_syms, p->n_syms + 1, sizeof *p->syms)) {
    oom(p);
    return;
  }
  p->syms[p->n_syms++] = s;
}

/* Adds lhs -> the symbols pushed since base, and pops them. */
static void add_pushed(gp *p, uint32_t lhs, uint32_t base) {
  add_rule(p, lhs, p->n_syms > base ? p->syms + base : NULL, p->n_syms - base);
  p->n_syms = base;
}

static void compile_body(gp *p, uint32_t lhs, uint32_t xi);

/* The symbol of item x in a rule (SYM_NOTHING for the empty string). */
static int32_t sym_of(gp *p, uint32_t xi) {
  const node *x = &p->nodes[xi];
  if (p->err) return 0;
  switch ((node_kind)x->kind) {
    case N_LIT:
      if (x->n == 0) return SYM_NOTHING;
      /* fall through */
    case N_CLASS:
    case N_ANY: {
      const uint32_t e = smap_get(p, &p->lexemes, x->at, x->span, 0, 1);
      if (e == UINT32_MAX) return 0;
      if (!p->lexemes.val[e])
        p->lexemes.val[e] = (uint32_t)lexeme(p, rx_of(p, xi), x->at, p->src + x->at, x->span);
      return (int32_t)p->lexemes.val[e];
    }
    case N_REF:
      return p->rules[x->a].terminal ? terminal_sym(p, x->a, x->at) : (int32_t)nt_of_rule(p, x->a);
    case N_SEQ:
    case N_ALT: {
      const uint32_t n = nonterm(p);
      compile_body(p, n, xi);
      return (int32_t)n;
    }
    case N_REP: break;
  }
  const int32_t c = sym_of(p, x->a);
  if (p->err || c == SYM_NOTHING || x->max == 0) return SYM_NOTHING;
  const uint32_t min = x->min, max = x->max;
  uint32_t tail = UINT32_MAX; /* what may follow the min copies: c* or up to max - min more */
  if (max == FERI_RX_INF) {
    const uint32_t star = nonterm(p); /* star -> | star c */
    const int32_t r[2] = {(int32_t)star, c};
    add_rule(p, star, NULL, 0);
    add_rule(p, star, r, 2);
    if (min == 0) return (int32_t)star;
    if (min == 1) { /* plus -> c | plus c */
      const uint32_t plus = nonterm(p);
      const int32_t q[2] = {(int32_t)plus, c};
      add_rule(p, plus, &c, 1);
      add_rule(p, plus, q, 2);
      return (int32_t)plus;
    }
    tail = star;
  } else {
    for (uint32_t k = min; k < max && !p->err; k++) { /* opt_k -> | c opt_(k-1) */
      const uint32_t opt = nonterm(p);
      const int32_t r[2] = {c, (int32_t)tail};
      add_rule(p, opt, NULL, 0);
      add_rule(p, opt, r, tail == UINT32_MAX ? 1 : 2);
      tail = opt;
    }
    if (min == 0) return (int32_t)tail;
  }
  const uint32_t rep = nonterm(p), base = p->n_syms;
  for (uint32_t k = 0; k < min; k++) push_sym(p, c);
  if (tail != UINT32_MAX) push_sym(p, (int32_t)tail);
  add_pushed(p, rep, base);
  return (int32_t)rep;
}

/* The rules lhs -> each alternative of x (x itself when it is no ALT). */
static void compile_body(gp *p, uint32_t lhs, uint32_t xi) {
  const node *x = &p->nodes[xi];
  const uint32_t n_alt = x->kind == N_ALT ? x->n : 1;
  for (uint32_t i = 0; i < n_alt && !p->err; i++) {
    const uint32_t alt = x->kind == N_ALT ? p->kids[p->nodes[xi].a + i] : xi;
    const node *s = &p->nodes[alt];
    const uint32_t base = p->n_syms;
    if (s->kind == N_SEQ)
      for (uint32_t k = 0; k < s->n && !p->err; k++)
        push_sym(p, sym_of(p, p->kids[p->nodes[alt].a + k]));
    else
      push_sym(p, sym_of(p, alt));
    add_pushed(p, lhs, base);
  }
}

/* ---- the entry --------------------------------------------------------------------------- */

static void gp_free(gp *p) {
  free(p->nodes), free(p->kids), free(p->stack), free(p->lit), free(p->ranges), free(p->rules),
      free(p->def_rule);
  free(p->term), free(p->queue), free(p->syms);
  smap_free(&p->names), smap_free(&p->lexemes);
}

fer_status feri_grammar_from_gbnf(const char *src, size_t len, feri_grammar **out) {
  if (out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "gbnf: out is NULL");
  *out = NULL;
  if (src == NULL) return feri_fail(FER_STATUS_NULL_ARG, "gbnf: src is NULL");
  if (len >= (size_t)1 << 30)
    return feri_fail(FER_STATUS_INVALID_ARG, "gbnf: a text of %zu bytes (the bound is 1 GiB)", len);
  gp p = {.src = src, .len = len, .root = UINT32_MAX};
  space(&p, 1);
  while (p.pos < p.len && !p.err) parse_rule(&p);
  if (!p.err) {
    for (uint32_t r = 0; r < p.n_rules; r++)
      if (p.rules[r].name_len == 4 && memcmp(src + p.rules[r].name, "root", 4) == 0 &&
          p.rules[r].body != UINT32_MAX)
        p.root = r;
    if (p.root == UINT32_MAX)
      p.err = feri_fail(FER_STATUS_INVALID_ARG, "gbnf: no rule named root (the start)");
  }
  uint32_t *order = p.err ? NULL : malloc(sizeof *order * (p.n_rules ? p.n_rules : 1));
  if (!p.err && !order) oom(&p);
  const uint32_t n_terms = p.err ? 0 : find_terminals(&p, order);
  feri_cfg g;
  int have_cfg = 0;
  if (!p.err) {
    p.err = feri_cfg_init(&g);
    have_cfg = p.err == FER_STATUS_OK;
    p.g = &g;
  }
  if (!p.err) {
    p.term = calloc(p.n_rules ? p.n_rules : 1, sizeof *p.term);
    if (!p.term) oom(&p);
  }
  for (uint32_t k = 0; k < n_terms && !p.err; k++)
    p.term[order[k]] = rx_of(&p, p.rules[order[k]].body);
  free(order);
  if (!p.err && g.rx.err) p.err = g.rx.err;
  uint32_t start = p.err ? UINT32_MAX : nt_of_rule(&p, p.root);
  for (uint32_t q = 0; q < p.n_queue && !p.err; q++)
    compile_body(&p, p.rules[p.queue[q]].nt, p.rules[p.queue[q]].body);
  if (!p.err && g.rx.err) p.err = g.rx.err;
  fer_status st = p.err;
  if (st == FER_STATUS_OK) {
    st = feri_cfg_finish(&g, start);
    if (st == FER_STATUS_INVALID_ARG)
      st = feri_fail(
          FER_STATUS_INVALID_ARG,
          "gbnf: root derives no string: the grammar can never accept (an empty language)");
  }
  gp_free(&p);
  if (st != FER_STATUS_OK) {
    if (have_cfg) feri_cfg_free(&g);
    return st;
  }
  return feri_grammar_from_cfg(&g, out);
}
