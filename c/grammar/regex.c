/* regex.c: the parser and tree builders of regex.h (recursive descent; sets normalised as they are
 * made, so the lexer sees sorted disjoint ranges without surrogates). */
#include "grammar/regex.h"

#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "grammar/regex_unicode.h"
#include "tokenizer/utf8.h"

enum { MAX_CP = 0x10FFFF, SUR_LO = 0xD800, SUR_HI = 0xDFFF, MAX_DEPTH = 200 };

void feri_rx_free(feri_rx *rx) {
  if (!rx) return;
  free(rx->nodes);
  free(rx->ranges);
  memset(rx, 0, sizeof *rx);
}

static uint32_t add_node(feri_rx *rx, feri_rx_node n) {
  if (rx->n_nodes >= FERI_RX_MAX_NODES) {
    if (!rx->err) rx->err = feri_fail(FER_STATUS_INVALID_ARG, "regex: more than %d nodes", FERI_RX_MAX_NODES);
    return UINT32_MAX;
  }
  if (rx->n_nodes == rx->cap_nodes) {
    const uint32_t cap = rx->cap_nodes ? 2 * rx->cap_nodes : 64;
    feri_rx_node *p = realloc(rx->nodes, sizeof *p * cap);
    if (!p) {
      if (!rx->err) rx->err = feri_fail(FER_STATUS_OUT_OF_MEMORY, "regex: %u nodes", cap);
      return UINT32_MAX;
    }
    rx->nodes = p;
    rx->cap_nodes = cap;
  }
  rx->nodes[rx->n_nodes] = n;
  return rx->n_nodes++;
}

uint32_t feri_rx_empty(feri_rx *rx) { return add_node(rx, (feri_rx_node){.kind = FERI_RX_EMPTY}); }

static int cmp_pair(const void *a, const void *b) {
  const uint32_t *x = a, *y = b;
  return x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : (x[1] < y[1] ? -1 : x[1] > y[1]);
}

uint32_t feri_rx_set(feri_rx *rx, const uint32_t *ranges, uint32_t n_pairs) {
  /* sorted, merged, surrogates and values past U+10FFFF cut out; at most n_pairs + 1 pairs result */
  uint32_t *tmp = malloc(sizeof *tmp * 2 * ((size_t)n_pairs + 1));
  if (!tmp) {
    if (!rx->err) rx->err = feri_fail(FER_STATUS_OUT_OF_MEMORY, "regex: a set of %u ranges", n_pairs);
    return UINT32_MAX;
  }
  memcpy(tmp, ranges, sizeof *tmp * 2 * n_pairs);
  qsort(tmp, n_pairs, 2 * sizeof *tmp, cmp_pair);
  uint32_t n = 0;
  for (uint32_t i = 0; i < n_pairs; i++) {
    uint32_t lo = tmp[2 * i], hi = tmp[2 * i + 1] > MAX_CP ? MAX_CP : tmp[2 * i + 1];
    if (lo > hi) continue;
    if (n > 0 && lo <= tmp[2 * n - 1] + 1) {
      if (hi > tmp[2 * n - 1]) tmp[2 * n - 1] = hi;
    } else {
      tmp[2 * n] = lo;
      tmp[2 * n + 1] = hi;
      n++;
    }
  }
  uint32_t m = 0; /* surrogates out: one range may split in two */
  uint32_t *cut = malloc(sizeof *cut * 2 * ((size_t)n + 1));
  if (!cut) {
    free(tmp);
    if (!rx->err) rx->err = feri_fail(FER_STATUS_OUT_OF_MEMORY, "regex: a set of %u ranges", n);
    return UINT32_MAX;
  }
  for (uint32_t i = 0; i < n; i++) {
    const uint32_t lo = tmp[2 * i], hi = tmp[2 * i + 1];
    if (lo < SUR_LO) {
      cut[2 * m] = lo;
      cut[2 * m + 1] = hi < SUR_LO ? hi : SUR_LO - 1;
      m++;
    }
    if (hi > SUR_HI) {
      cut[2 * m] = lo > SUR_HI ? lo : SUR_HI + 1;
      cut[2 * m + 1] = hi;
      m++;
    }
  }
  free(tmp);
  if (m == 0) {
    free(cut);
    return add_node(rx, (feri_rx_node){.kind = FERI_RX_NONE});
  }
  if (rx->n_ranges + m > rx->cap_ranges) {
    uint32_t cap = rx->cap_ranges ? rx->cap_ranges : 64;
    while (cap < rx->n_ranges + m) cap *= 2;
    uint32_t *p = realloc(rx->ranges, sizeof *p * 2 * cap);
    if (!p) {
      free(cut);
      if (!rx->err) rx->err = feri_fail(FER_STATUS_OUT_OF_MEMORY, "regex: %u ranges", cap);
      return UINT32_MAX;
    }
    rx->ranges = p;
    rx->cap_ranges = cap;
  }
  memcpy(rx->ranges + 2 * rx->n_ranges, cut, sizeof *cut * 2 * m);
  free(cut);
  const uint32_t at = rx->n_ranges;
  rx->n_ranges += m;
  return add_node(rx, (feri_rx_node){.kind = FERI_RX_SET, .set = at, .set_len = m});
}

uint32_t feri_rx_cat(feri_rx *rx, uint32_t a, uint32_t b) {
  if (a == UINT32_MAX || b == UINT32_MAX) return UINT32_MAX;
  if (rx->nodes[a].kind == FERI_RX_EMPTY) return b;
  if (rx->nodes[b].kind == FERI_RX_EMPTY) return a;
  return add_node(rx, (feri_rx_node){.kind = FERI_RX_CAT, .a = a, .b = b});
}

uint32_t feri_rx_alt(feri_rx *rx, uint32_t a, uint32_t b) {
  if (a == UINT32_MAX || b == UINT32_MAX) return UINT32_MAX;
  if (rx->nodes[a].kind == FERI_RX_NONE) return b;
  if (rx->nodes[b].kind == FERI_RX_NONE) return a;
  return add_node(rx, (feri_rx_node){.kind = FERI_RX_ALT, .a = a, .b = b});
}

uint32_t feri_rx_repeat(feri_rx *rx, uint32_t a, uint32_t min, uint32_t max) {
  if (a == UINT32_MAX) return UINT32_MAX;
  return add_node(rx, (feri_rx_node){.kind = FERI_RX_REPEAT, .a = a, .min = min, .max = max});
}

uint32_t feri_rx_and(feri_rx *rx, uint32_t a, uint32_t b) {
  if (a == UINT32_MAX || b == UINT32_MAX) return UINT32_MAX;
  return add_node(rx, (feri_rx_node){.kind = FERI_RX_AND, .a = a, .b = b});
}

uint32_t feri_rx_andnot(feri_rx *rx, uint32_t a, uint32_t b) {
  if (a == UINT32_MAX || b == UINT32_MAX) return UINT32_MAX;
  return add_node(rx, (feri_rx_node){.kind = FERI_RX_ANDNOT, .a = a, .b = b});
}

uint32_t feri_rx_multiple(feri_rx *rx, uint32_t coef, uint32_t exp) {
  if (coef == 0) {
    if (!rx->err) rx->err = feri_fail(FER_STATUS_INVALID_ARG, "regex: a multiple of 0");
    return UINT32_MAX;
  }
  return add_node(rx, (feri_rx_node){.kind = FERI_RX_MULTIPLE, .min = coef, .max = exp});
}

uint32_t feri_rx_literal(feri_rx *rx, const uint8_t *s, size_t len) {
  uint32_t node = feri_rx_empty(rx);
  for (size_t i = 0; i < len && node != UINT32_MAX;) {
    uint32_t cp;
    const size_t n = feri_utf8_decode(s + i, len - i, &cp);
    if (n == 0) {
      if (!rx->err) rx->err = feri_fail(FER_STATUS_INVALID_ARG, "regex: literal is not UTF-8 at byte %zu", i);
      return UINT32_MAX;
    }
    const uint32_t r[2] = {cp, cp};
    node = feri_rx_cat(rx, node, feri_rx_set(rx, r, 1));
    i += n;
  }
  return node;
}

int feri_rx_set_has(const feri_rx *rx, uint32_t set_node, uint32_t c) {
  const feri_rx_node *n = &rx->nodes[set_node];
  if (n->kind != FERI_RX_SET) return 0;
  for (uint32_t i = 0; i < n->set_len; i++)
    if (c >= rx->ranges[2 * (n->set + i)] && c <= rx->ranges[2 * (n->set + i) + 1]) return 1;
  return 0;
}

/* ---- JSON quoting ---------------------------------------------------------------------------- */

/* The characters a JSON string cannot hold raw: C0 controls, '"', '\\' and DEL. */
static int needs_quote(uint32_t c) { return c < 0x20 || c == '"' || c == '\\' || c == 0x7F; }

static uint32_t lit(feri_rx *rx, const char *s) { return feri_rx_literal(rx, (const uint8_t *)s, strlen(s)); }

static uint32_t one(feri_rx *rx, uint32_t c) {
  const uint32_t r[2] = {c, c};
  return feri_rx_set(rx, r, 1);
}

/* A set's quoted forms: its raw characters, then after one backslash the short escapes and the
 * \u00XX forms of the characters that need them (sharing the backslash, as derivre does). */
static uint32_t quote_set(feri_rx *rx, const feri_rx_node *n) {
  const uint32_t set = n->set, len = n->set_len;
  uint32_t *raw = malloc(sizeof *raw * 2 * ((size_t)len + 40)); /* 35 characters to cut out */
  if (!raw) {
    if (!rx->err) rx->err = feri_fail(FER_STATUS_OUT_OF_MEMORY, "regex: quoting a set");
    return UINT32_MAX;
  }
  uint32_t n_raw = 0, has[128] = {0}, any = 0;
  for (uint32_t i = 0; i < len; i++) {
    const uint32_t lo = rx->ranges[2 * (set + i)], hi = rx->ranges[2 * (set + i) + 1];
    uint32_t from = lo;
    for (uint32_t c = lo; c <= hi && c < 0x80; c++) {
      if (!needs_quote(c)) continue;
      has[c] = 1, any = 1;
      if (c > from) raw[2 * n_raw] = from, raw[2 * n_raw + 1] = c - 1, n_raw++;
      from = c + 1;
    }
    if (from <= hi) raw[2 * n_raw] = from, raw[2 * n_raw + 1] = hi, n_raw++;
  }
  uint32_t node = n_raw ? feri_rx_set(rx, raw, n_raw) : add_node(rx, (feri_rx_node){.kind = FERI_RX_NONE});
  free(raw);
  if (!any) return node;
  static const char SHORT[][2] = {{'"', '"'}, {'\\', '\\'}, {8, 'b'}, {12, 'f'}, {10, 'n'}, {13, 'r'}, {9, 't'}};
  uint32_t letters[16], n_letters = 0;
  for (size_t k = 0; k < sizeof SHORT / sizeof SHORT[0]; k++)
    if (has[(uint8_t)SHORT[k][0]])
      letters[2 * n_letters] = letters[2 * n_letters + 1] = (uint8_t)SHORT[k][1], n_letters++;
  uint32_t esc = n_letters ? feri_rx_set(rx, letters, n_letters) : add_node(rx, (feri_rx_node){.kind = FERI_RX_NONE});
  uint32_t u = add_node(rx, (feri_rx_node){.kind = FERI_RX_NONE});
  for (uint32_t hi = 0; hi < 2; hi++) { /* \u000X and \u001X: the low digit in either case */
    uint32_t digits[64], nd = 0;
    for (uint32_t lo = 0; lo < 16; lo++) {
      if (!has[16 * hi + lo]) continue;
      const uint32_t d = lo < 10 ? '0' + lo : 'a' + lo - 10;
      digits[2 * nd] = digits[2 * nd + 1] = d, nd++;
      if (lo >= 10) digits[2 * nd] = digits[2 * nd + 1] = d - 'a' + 'A', nd++;
    }
    if (nd) u = feri_rx_alt(rx, u, feri_rx_cat(rx, one(rx, '0' + hi), feri_rx_set(rx, digits, nd)));
  }
  if (has[0x7F]) {
    const uint32_t f[4] = {'F', 'F', 'f', 'f'};
    u = feri_rx_alt(rx, u, feri_rx_cat(rx, one(rx, '7'), feri_rx_set(rx, f, 2)));
  }
  if (u != UINT32_MAX && rx->nodes[u].kind != FERI_RX_NONE)
    esc = feri_rx_alt(rx, esc, feri_rx_cat(rx, lit(rx, "u00"), u));
  return feri_rx_alt(rx, node, feri_rx_cat(rx, one(rx, '\\'), esc));
}

static uint32_t quote_node(feri_rx *rx, uint32_t x, uint32_t *memo, uint32_t n_memo, int depth) {
  if (x == UINT32_MAX) return UINT32_MAX;
  if (x < n_memo && memo[x] != UINT32_MAX) return memo[x];
  if (depth > 20000) {
    if (!rx->err) rx->err = feri_fail(FER_STATUS_INVALID_ARG, "regex: expression nested deeper than 20000 to quote");
    return UINT32_MAX;
  }
  const feri_rx_node n = rx->nodes[x]; /* a copy: the array may move */
  uint32_t r;
  const int two = n.kind == FERI_RX_CAT || n.kind == FERI_RX_ALT || n.kind == FERI_RX_AND;
  const uint32_t qa = two ? quote_node(rx, n.a, memo, n_memo, depth + 1) : UINT32_MAX;
  const uint32_t qb = two ? quote_node(rx, n.b, memo, n_memo, depth + 1) : UINT32_MAX;
  switch (n.kind) {
    case FERI_RX_SET: r = quote_set(rx, &n); break;
    case FERI_RX_CAT: r = feri_rx_cat(rx, qa, qb); break;
    case FERI_RX_ALT: r = feri_rx_alt(rx, qa, qb); break;
    case FERI_RX_AND: r = feri_rx_and(rx, qa, qb); break;
    case FERI_RX_REPEAT: r = feri_rx_repeat(rx, quote_node(rx, n.a, memo, n_memo, depth + 1), n.min, n.max); break;
    case FERI_RX_ANDNOT:
      if (!rx->err) rx->err = feri_fail(FER_STATUS_INVALID_ARG, "regex: a negation inside a quoted expression");
      r = UINT32_MAX;
      break;
    default: r = x; /* EMPTY, NONE, MULTIPLE (digits only): nothing to quote */
  }
  if (x < n_memo) memo[x] = r;
  return r;
}

uint32_t feri_rx_json_quote(feri_rx *rx, uint32_t x) {
  if (x == UINT32_MAX) return UINT32_MAX;
  const uint32_t n = rx->n_nodes;
  uint32_t *memo = malloc(sizeof *memo * n);
  if (!memo) {
    if (!rx->err) rx->err = feri_fail(FER_STATUS_OUT_OF_MEMORY, "regex: quoting %u nodes", n);
    return UINT32_MAX;
  }
  memset(memo, 0xFF, sizeof *memo * n);
  const uint32_t body = quote_node(rx, x, memo, n, 0);
  free(memo);
  return feri_rx_cat(rx, feri_rx_cat(rx, lit(rx, "\""), body), lit(rx, "\""));
}

/* ---- the parser ------------------------------------------------------------------------------ */

typedef struct parser {
  const char *s;
  size_t n, i;
  feri_rx *rx;
  int depth;
  int search; /* a JSON Schema pattern: \d \w ASCII, anchors as a search places them */
  fer_status st; /* the first error */
  /* a growable list of ranges for the class being read */
  uint32_t *cls;
  uint32_t n_cls, cap_cls;
} parser;

static uint32_t bad(parser *p, fer_status st, const char *what) {
  if (p->st == FER_STATUS_OK) {
    p->st = st;
    (void)feri_fail(st, "regex: %s at byte %zu", what, p->i);
  }
  return UINT32_MAX;
}

static int cls_add(parser *p, uint32_t lo, uint32_t hi) {
  if (p->n_cls == p->cap_cls) {
    const uint32_t cap = p->cap_cls ? 2 * p->cap_cls : 32;
    uint32_t *q = realloc(p->cls, sizeof *q * 2 * cap);
    if (!q) {
      bad(p, FER_STATUS_OUT_OF_MEMORY, "out of memory");
      return 0;
    }
    p->cls = q;
    p->cap_cls = cap;
  }
  p->cls[2 * p->n_cls] = lo;
  p->cls[2 * p->n_cls + 1] = hi;
  p->n_cls++;
  return 1;
}

/* Adds a table's ranges, or its complement (over all code points). */
static int cls_add_table(parser *p, const uint32_t *t, size_t pairs, int negate) {
  if (!negate) {
    for (size_t k = 0; k < pairs; k++)
      if (!cls_add(p, t[2 * k], t[2 * k + 1])) return 0;
    return 1;
  }
  uint32_t next = 0;
  for (size_t k = 0; k < pairs; k++) {
    if (t[2 * k] > next && !cls_add(p, next, t[2 * k] - 1)) return 0;
    next = t[2 * k + 1] + 1;
  }
  return next > MAX_CP || cls_add(p, next, MAX_CP);
}

static int hexval(char c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Reads exactly `digits` hex digits, or with digits 0 a braced {H...}; -1 on error. */
static int64_t read_hex(parser *p, int digits) {
  int64_t v = 0;
  if (digits == 0) {
    if (p->i >= p->n || p->s[p->i] != '{') return bad(p, FER_STATUS_BAD_FORMAT, "expected '{' of a code point"), -1;
    p->i++;
    int k = 0;
    while (p->i < p->n && p->s[p->i] != '}') {
      const int h = hexval(p->s[p->i]);
      if (h < 0 || ++k > 8) return bad(p, FER_STATUS_BAD_FORMAT, "expected a hex digit or '}'"), -1;
      v = v * 16 + h;
      p->i++;
    }
    if (p->i >= p->n || k == 0) return bad(p, FER_STATUS_BAD_FORMAT, "expected hex digits and '}'"), -1;
    p->i++;
  } else {
    for (int k = 0; k < digits; k++, p->i++) {
      const int h = p->i < p->n ? hexval(p->s[p->i]) : -1;
      if (h < 0) return bad(p, FER_STATUS_BAD_FORMAT, "expected a hex digit"), -1;
      v = v * 16 + h;
    }
  }
  if (v > MAX_CP || (v >= SUR_LO && v <= SUR_HI)) return bad(p, FER_STATUS_BAD_FORMAT, "not a Unicode scalar value"), -1;
  return v;
}

/* After a backslash: a class escape (\d and friends: added to the class list, returns -2) or one
 * code point (returned); -1 on error. */
static int64_t read_escape(parser *p) {
  if (p->i >= p->n) return bad(p, FER_STATUS_BAD_FORMAT, "expected an escape after '\\'"), -1;
  const char c = p->s[p->i++];
  switch (c) {
    case 'd': case 'D':
      if (p->search) return cls_add_table(p, (const uint32_t[]){'0', '9'}, 1, c == 'D') ? -2 : -1;
      return cls_add_table(p, FERI_RX_DIGIT, sizeof FERI_RX_DIGIT / sizeof FERI_RX_DIGIT[0] / 2, c == 'D') ? -2 : -1;
    case 'w': case 'W':
      if (p->search) {
        static const uint32_t W[8] = {'0', '9', 'A', 'Z', '_', '_', 'a', 'z'};
        return cls_add_table(p, W, 4, c == 'W') ? -2 : -1;
      }
      return cls_add_table(p, FERI_RX_WORD, sizeof FERI_RX_WORD / sizeof FERI_RX_WORD[0] / 2, c == 'W') ? -2 : -1;
    case 's': case 'S':
      return cls_add_table(p, FERI_RX_SPACE, sizeof FERI_RX_SPACE / sizeof FERI_RX_SPACE[0] / 2, c == 'S') ? -2 : -1;
    case 'n': return '\n';
    case 't': return '\t';
    case 'r': return '\r';
    case 'f': return '\f';
    case 'v': return '\v';
    case 'a': return 7;
    case 'e': return 27;
    case 'x': return p->i < p->n && p->s[p->i] == '{' ? read_hex(p, 0) : read_hex(p, 2);
    case 'u': return p->i < p->n && p->s[p->i] == '{' ? read_hex(p, 0) : read_hex(p, 4);
    case 'U': return p->i < p->n && p->s[p->i] == '{' ? read_hex(p, 0) : read_hex(p, 8);
    default: break;
  }
  if ((c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') || (c >= '{' && c <= '~') ||
      c == ' ')
    return (unsigned char)c; /* an escaped punctuation mark (or space) stands for itself */
  p->i--;
  return bad(p, FER_STATUS_UNSUPPORTED, "unsupported escape"), -1;
}

/* One code point of the text (UTF-8), advancing; -1 on error. */
static int64_t read_char(parser *p) {
  uint32_t cp;
  const size_t k = feri_utf8_decode((const uint8_t *)p->s + p->i, p->n - p->i, &cp);
  if (k == 0) return bad(p, FER_STATUS_BAD_FORMAT, "the expression is not UTF-8"), -1;
  p->i += k;
  return cp;
}

static uint32_t parse_class(parser *p) {
  /* at the character after '[' */
  int negate = 0;
  if (p->i < p->n && p->s[p->i] == '^') negate = 1, p->i++;
  p->n_cls = 0;
  int first = 1;
  while (p->i < p->n && (p->s[p->i] != ']' || first)) {
    first = 0;
    if (p->s[p->i] == '[') return bad(p, FER_STATUS_UNSUPPORTED, "nested or POSIX classes are not supported");
    if (p->s[p->i] == '&' && p->i + 1 < p->n && p->s[p->i + 1] == '&')
      return bad(p, FER_STATUS_UNSUPPORTED, "class intersection is not supported");
    int64_t lo;
    if (p->s[p->i] == '\\') {
      p->i++;
      lo = read_escape(p);
      if (lo == -2) continue;
    } else {
      lo = read_char(p);
    }
    if (lo < 0) return UINT32_MAX;
    int64_t hi = lo;
    if (p->i + 1 < p->n && p->s[p->i] == '-' && p->s[p->i + 1] != ']') {
      p->i++;
      if (p->s[p->i] == '\\') {
        p->i++;
        hi = read_escape(p);
        if (hi == -2) return bad(p, FER_STATUS_BAD_FORMAT, "a class cannot end a range");
      } else {
        hi = read_char(p);
      }
      if (hi < 0) return UINT32_MAX;
      if (hi < lo) return bad(p, FER_STATUS_BAD_FORMAT, "range out of order");
    }
    if (!cls_add(p, (uint32_t)lo, (uint32_t)hi)) return UINT32_MAX;
  }
  if (p->i >= p->n) return bad(p, FER_STATUS_BAD_FORMAT, "expected ']'");
  p->i++;
  if (negate) { /* the complement of the sorted union */
    const uint32_t n = p->n_cls;
    uint32_t *own = malloc(sizeof *own * 2 * (n ? n : 1));
    if (!own) return bad(p, FER_STATUS_OUT_OF_MEMORY, "out of memory");
    memcpy(own, p->cls, sizeof *own * 2 * n);
    qsort(own, n, 2 * sizeof *own, cmp_pair);
    uint32_t m = 0; /* merged in place */
    for (uint32_t k = 0; k < n; k++) {
      if (m > 0 && own[2 * k] <= own[2 * m - 1] + 1) {
        if (own[2 * k + 1] > own[2 * m - 1]) own[2 * m - 1] = own[2 * k + 1];
      } else {
        own[2 * m] = own[2 * k];
        own[2 * m + 1] = own[2 * k + 1];
        m++;
      }
    }
    p->n_cls = 0;
    const int ok = cls_add_table(p, own, m, 1);
    free(own);
    if (!ok) return UINT32_MAX;
  }
  const uint32_t node = feri_rx_set(p->rx, p->cls, p->n_cls);
  if (node == UINT32_MAX) bad(p, FER_STATUS_OUT_OF_MEMORY, "out of memory");
  return node;
}

/* anch: bit 1 when the expression is anchored at its start (^), bit 2 at its end ($); at_start and
 * at_end: whether it stands at the start (the end) of the whole expression, where anchors may be. */
static uint32_t parse_alt(parser *p, int at_start, int at_end, int *anch);

static uint32_t parse_atom(parser *p, int at_start, int at_end, int *anch) {
  *anch = 0;
  const char c = p->s[p->i];
  if (c == '(') {
    p->i++;
    if (p->i < p->n && p->s[p->i] == '?') {
      p->i++;
      if (p->i < p->n && p->s[p->i] == ':') {
        p->i++;
      } else if (p->i < p->n && (p->s[p->i] == '<' || p->s[p->i] == 'P')) {
        if (p->s[p->i] == 'P') p->i++;
        if (p->i >= p->n || p->s[p->i] != '<') return bad(p, FER_STATUS_BAD_FORMAT, "expected '<' of a group name");
        if (p->i + 1 < p->n && (p->s[p->i + 1] == '=' || p->s[p->i + 1] == '!'))
          return bad(p, FER_STATUS_UNSUPPORTED, "look-behind is not supported");
        while (p->i < p->n && p->s[p->i] != '>') p->i++;
        if (p->i >= p->n) return bad(p, FER_STATUS_BAD_FORMAT, "expected '>' after a group name");
        p->i++;
      } else {
        return bad(p, FER_STATUS_UNSUPPORTED, "group flags and look-around are not supported");
      }
    }
    if (++p->depth > MAX_DEPTH) return bad(p, FER_STATUS_INVALID_ARG, "groups nested too deep");
    const uint32_t inner = parse_alt(p, at_start, at_end, anch);
    p->depth--;
    if (inner == UINT32_MAX) return UINT32_MAX;
    if (p->i >= p->n || p->s[p->i] != ')') return bad(p, FER_STATUS_BAD_FORMAT, "expected ')'");
    p->i++;
    return inner;
  }
  if (c == '[') {
    p->i++;
    return parse_class(p);
  }
  if (c == '.') {
    p->i++;
    const uint32_t r[4] = {0, '\n' - 1, '\n' + 1, MAX_CP};
    return feri_rx_set(p->rx, r, 2);
  }
  if (c == '*' || c == '+' || c == '?' || c == '{') return bad(p, FER_STATUS_BAD_FORMAT, "repetition of nothing");
  if (c == '^' || c == '$') return bad(p, FER_STATUS_UNSUPPORTED, "an anchor inside the expression is not supported");
  int64_t cp;
  p->n_cls = 0;
  if (c == '\\') {
    p->i++;
    if (p->i < p->n && strchr("bBAzZ<>", p->s[p->i]) != NULL)
      return bad(p, FER_STATUS_UNSUPPORTED, "assertions are not supported");
    if (p->i < p->n && (p->s[p->i] == 'p' || p->s[p->i] == 'P'))
      return bad(p, FER_STATUS_UNSUPPORTED, "Unicode property classes are not supported");
    cp = read_escape(p);
    if (cp == -2) return feri_rx_set(p->rx, p->cls, p->n_cls);
  } else {
    cp = read_char(p);
  }
  if (cp < 0) return UINT32_MAX;
  const uint32_t r[2] = {(uint32_t)cp, (uint32_t)cp};
  return feri_rx_set(p->rx, r, 1);
}

/* Reads a decimal count (at most 100000); -1 when there is none. */
static int64_t read_count(parser *p) {
  int64_t v = -1;
  while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') {
    v = (v < 0 ? 0 : v) * 10 + (p->s[p->i++] - '0');
    if (v > 100000) return bad(p, FER_STATUS_INVALID_ARG, "repetition count above 100000"), -2;
  }
  return v;
}

static uint32_t parse_repeat(parser *p, int at_start, int at_end, int *anch) {
  uint32_t node = parse_atom(p, at_start, at_end, anch);
  while (node != UINT32_MAX && p->i < p->n) {
    if (*anch && p->s[p->i] && strchr("*+?{", p->s[p->i]))
      return bad(p, FER_STATUS_UNSUPPORTED, "an anchor inside a repetition is not supported");
    const char c = p->s[p->i];
    uint32_t min, max;
    if (c == '*') min = 0, max = FERI_RX_INF, p->i++;
    else if (c == '+') min = 1, max = FERI_RX_INF, p->i++;
    else if (c == '?') min = 0, max = 1, p->i++;
    else if (c == '{') {
      p->i++;
      const int64_t lo = read_count(p);
      if (lo == -2) return UINT32_MAX;
      if (lo < 0) return bad(p, FER_STATUS_BAD_FORMAT, "expected a count after '{'");
      int64_t hi = lo;
      if (p->i < p->n && p->s[p->i] == ',') {
        p->i++;
        hi = read_count(p);
        if (hi == -2) return UINT32_MAX;
        if (hi < 0) hi = FERI_RX_INF;
      }
      if (p->i >= p->n || p->s[p->i] != '}') return bad(p, FER_STATUS_BAD_FORMAT, "expected '}'");
      p->i++;
      if (hi != FERI_RX_INF && hi < lo) return bad(p, FER_STATUS_BAD_FORMAT, "repetition bounds out of order");
      min = (uint32_t)lo;
      max = hi == FERI_RX_INF ? FERI_RX_INF : (uint32_t)hi;
    } else {
      break;
    }
    if (p->i < p->n && p->s[p->i] == '?') p->i++; /* lazy: the same strings */
    node = feri_rx_repeat(p->rx, node, min, max);
  }
  return node;
}

static int at_cat_end(const parser *p) { return p->i >= p->n || p->s[p->i] == '|' || p->s[p->i] == ')'; }

static uint32_t parse_cat(parser *p, int at_start, int at_end, int *anch) {
  uint32_t node = feri_rx_empty(p->rx);
  *anch = 0;
  for (int k = 0; node != UINT32_MAX && !at_cat_end(p); k++) {
    const char c = p->s[p->i];
    if (p->search && c == '^' && k == 0 && at_start) { /* a start anchor where the search starts */
      p->i++, *anch |= 1;
      continue;
    }
    if (c == '$' && (p->search ? at_end : p->i + 1 == p->n)) { /* an end anchor: only at the end */
      p->i++;
      if (!at_cat_end(p)) return bad(p, FER_STATUS_UNSUPPORTED, "an anchor inside the expression is not supported");
      *anch |= 2;
      break;
    }
    int sub;
    node = feri_rx_cat(p->rx, node, parse_repeat(p, k == 0 && at_start, at_end, &sub));
    if ((sub & 2) && !at_cat_end(p))
      return bad(p, FER_STATUS_UNSUPPORTED, "an anchor inside the expression is not supported");
    *anch |= sub;
  }
  return node;
}

/* Rust's regex anchors per alternative: when some alternatives are anchored at a side and others
 * are not, those that are not may have any characters on that side. */
static uint32_t dot_star(parser *p) {
  const uint32_t all[2] = {0, MAX_CP};
  return feri_rx_repeat(p->rx, feri_rx_set(p->rx, all, 1), 0, FERI_RX_INF);
}

static uint32_t parse_alt(parser *p, int at_start, int at_end, int *anch) {
  uint32_t alts[64], n = 0;
  int an[64], some = 0, all = 3;
  uint32_t node = UINT32_MAX;
  for (;;) {
    int a;
    const uint32_t x = parse_cat(p, at_start, at_end, &a);
    if (x == UINT32_MAX) return UINT32_MAX;
    if (n < 64) alts[n] = x, an[n] = a;
    node = n == 0 ? x : feri_rx_alt(p->rx, node, x);
    n++, some |= a, all &= a;
    if (p->i >= p->n || p->s[p->i] != '|') break;
    p->i++;
  }
  *anch = some;
  if (!p->search || n == 1 || some == 0 || some == all) return node;
  if (n > 64) return bad(p, FER_STATUS_UNSUPPORTED, "more than 64 alternatives with mixed anchors");
  node = UINT32_MAX;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t x = alts[i];
    if ((some & 2) && !(an[i] & 2)) x = feri_rx_cat(p->rx, x, dot_star(p));
    if ((some & 1) && !(an[i] & 1)) x = feri_rx_cat(p->rx, dot_star(p), x);
    node = i == 0 ? x : feri_rx_alt(p->rx, node, x);
  }
  return node;
}

static fer_status parse_with(feri_rx *rx, const char *src, size_t len, int search, uint32_t *root) {
  *root = UINT32_MAX;
  if (src == NULL && len > 0) return feri_fail(FER_STATUS_NULL_ARG, "regex: source is NULL");
  const uint32_t n_nodes = rx->n_nodes, n_ranges = rx->n_ranges;
  parser p = {src, len, 0, rx, 0, search, FER_STATUS_OK, NULL, 0, 0};
  if (!search && p.n > 0 && p.s[0] == '^') p.i = 1; /* the start anchor: implied */
  int anch = 0;
  uint32_t r = parse_alt(&p, 1, 1, &anch);
  if (r != UINT32_MAX && p.i < p.n) r = bad(&p, FER_STATUS_BAD_FORMAT, "unmatched ')'");
  if (r != UINT32_MAX && search) { /* a search: any characters where no anchor holds it */
    if (!(anch & 2)) r = feri_rx_cat(rx, r, dot_star(&p));
    if (!(anch & 1)) r = feri_rx_cat(rx, dot_star(&p), r);
  }
  free(p.cls);
  if (r == UINT32_MAX) {
    const fer_status st = p.st != FER_STATUS_OK ? p.st : rx->err != FER_STATUS_OK ? rx->err : FER_STATUS_OUT_OF_MEMORY;
    rx->n_nodes = n_nodes; /* what this expression added is dropped */
    rx->n_ranges = n_ranges;
    rx->err = FER_STATUS_OK;
    return st;
  }
  *root = r;
  return FER_STATUS_OK;
}

fer_status feri_rx_parse_into(feri_rx *rx, const char *src, size_t len, uint32_t *root) {
  return parse_with(rx, src, len, 0, root);
}

fer_status feri_rx_parse_search(feri_rx *rx, const char *src, size_t len, uint32_t *root) {
  return parse_with(rx, src, len, 1, root);
}

fer_status feri_rx_parse(const char *src, size_t len, feri_rx *out) {
  memset(out, 0, sizeof *out);
  uint32_t root;
  const fer_status st = feri_rx_parse_into(out, src, len, &root);
  if (st != FER_STATUS_OK) {
    feri_rx_free(out);
    return st;
  }
  out->root = root;
  return FER_STATUS_OK;
}
