/* json_schema.c: JSON Schema into a grammar over lexemes (json_schema.h). Each schema becomes a
 * nonterminal; the lexemes of JSON's tokens are made once and shared; object members and array
 * items become sequences in which each present element after the first follows a separator. */
#include "grammar/json_schema.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "grammar/cfg.h"
#include "grammar/grow.h"
#include "grammar/lexer.h"

/* One character of a JSON string as llguidance writes it: printable ASCII but '"' and '\', any
 * non-ASCII scalar, the short escapes but \/, and \u escapes of C0 controls and DEL only. */
#define JSON_CHAR "(?:[ !#-\\[\\]-~\\x{80}-\\x{10FFFF}]|\\\\[\"\\\\bfnrt]|\\\\u00[01][0-9A-Fa-f]|\\\\u007[Ff])"
/* A free key's character: any \u escape but lone surrogates (llguidance's general string). */
#define JSON_GENERAL_CHAR                                                                                      \
  "(?:[ !#-\\[\\]-~\\x{80}-\\x{10FFFF}]|\\\\[\"\\\\bfnrt]|\\\\u(?:[0-9a-ce-fA-CE-F][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2}|" \
  "[dD][89aAbB][0-9a-fA-F]{2}\\\\u[dD][c-fC-F][0-9a-fA-F]{2}))"
#define JSON_INTEGER "-?(?:0|[1-9][0-9]*)"
#define JSON_NUMBER "-?(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"

enum { MAX_DEPTH = 128, MAX_SEQ = 100000 };

typedef struct ref_entry {
  const cJSON *node;
  uint32_t nt;
} ref_entry;

typedef struct jc {
  feri_cfg *g;
  const cJSON *root;
  fer_status err;
  int bad_regex; /* err came from an expression that did not parse */
  char path[512]; /* where in the schema (a JSON pointer), for messages */
  size_t path_len;
  int depth;
  int32_t lx_lbrace, lx_rbrace, lx_lbrack, lx_rbrack, lx_comma, lx_colon, lx_string, lx_general, lx_number,
      lx_integer, lx_bool, lx_true, lx_false, lx_null;
  uint32_t nt_any;
  ref_entry *refs;
  uint32_t n_refs, cap_refs;
  cJSON **owned; /* schemas made here (allOf merges, patternProperties intersections): freed at the end */
  uint32_t n_owned, cap_owned;
} jc;

static uint32_t fail(jc *c, fer_status st, const char *fmt, const char *what) {
  if (!c->err) {
    c->err = feri_fail(st, "json schema: at %s: %s%s", c->path_len ? c->path : "(root)", fmt, what ? what : "");
  }
  return UINT32_MAX;
}

static uint32_t cfg_fail(jc *c) {
  if (!c->err) c->err = c->g->err ? c->g->err : feri_fail(FER_STATUS_OUT_OF_MEMORY, "json schema: out of memory");
  return UINT32_MAX;
}

/* A lexeme of a regular expression given as text (built here, so it parses). */
static int32_t lexeme(jc *c, const char *re) {
  uint32_t root;
  const fer_status st = feri_rx_parse_into(&c->g->rx, re, strlen(re), &root);
  if (st != FER_STATUS_OK) {
    if (!c->err) c->err = st;
    c->bad_regex = 1;
    return 0;
  }
  return feri_cfg_lexeme(c->g, root);
}

static int32_t literal(jc *c, const char *s) {
  return feri_cfg_lexeme(c->g, feri_rx_literal(&c->g->rx, (const uint8_t *)s, strlen(s)));
}

static uint32_t nonterm(jc *c) {
  const uint32_t n = feri_cfg_nonterm(c->g);
  if (n == UINT32_MAX) cfg_fail(c);
  return n;
}

static void rule(jc *c, uint32_t lhs, const int32_t *syms, uint32_t n) {
  if (!c->err) feri_cfg_rule(c->g, lhs, syms, n);
  if (c->g->err) cfg_fail(c);
}

static void rule1(jc *c, uint32_t lhs, int32_t a) { rule(c, lhs, &a, 1); }

/* ---- paths for messages -------------------------------------------------------------------- */

static size_t path_push(jc *c, const char *seg) {
  const size_t at = c->path_len;
  const int n = snprintf(c->path + at, sizeof c->path - at, "/%s", seg);
  if (n > 0) c->path_len = at + (size_t)n < sizeof c->path ? at + (size_t)n : sizeof c->path - 1;
  return at;
}

static void path_pop(jc *c, size_t at) {
  c->path_len = at;
  c->path[at] = 0;
}

/* ---- string quoting -------------------------------------------------------------------------- */

/* The rx of one character c of a string value, as JSON may write it (llguidance's JsonQuote: the
 * alternative escapes of control characters too). */
static uint32_t quoted_char(feri_rx *rx, uint32_t cp) {
  char buf[64];
  switch (cp) {
    case '"': return feri_rx_literal(rx, (const uint8_t *)"\\\"", 2);
    case '\\': return feri_rx_literal(rx, (const uint8_t *)"\\\\", 2);
    case 8: snprintf(buf, sizeof buf, "\\\\b|\\\\u0008"); break;
    case 12: snprintf(buf, sizeof buf, "\\\\f|\\\\u000[cC]"); break;
    case '\n': snprintf(buf, sizeof buf, "\\\\n|\\\\u000[aA]"); break;
    case '\r': snprintf(buf, sizeof buf, "\\\\r|\\\\u000[dD]"); break;
    case '\t': snprintf(buf, sizeof buf, "\\\\t|\\\\u0009"); break;
    case 0x7F: snprintf(buf, sizeof buf, "\\\\u007[fF]"); break;
    default:
      if (cp < 0x20) {
        const char hex[] = "0123456789abcdef";
        const char h = hex[cp & 15];
        if ((cp & 15) < 10) snprintf(buf, sizeof buf, "\\\\u00%c%c", cp < 16 ? '0' : '1', h);
        else snprintf(buf, sizeof buf, "\\\\u00%c[%c%c]", cp < 16 ? '0' : '1', h, h - 'a' + 'A');
        break;
      }
      {
        const uint32_t r[2] = {cp, cp};
        return feri_rx_set(rx, r, 1);
      }
  }
  uint32_t root;
  return feri_rx_parse_into(rx, buf, strlen(buf), &root) == FER_STATUS_OK ? root : UINT32_MAX;
}

/* The rx of a JSON string whose value is s (UTF-8, len bytes), with every escape form allowed. */
static uint32_t quoted_string(feri_rx *rx, const char *s, size_t len) {
  uint32_t node = feri_rx_literal(rx, (const uint8_t *)"\"", 1);
  for (size_t i = 0; i < len && node != UINT32_MAX;) {
    uint32_t cp = (uint8_t)s[i];
    size_t k = 1;
    if (cp >= 0x80) { /* cJSON gives UTF-8; decode one scalar */
      const int extra = cp >= 0xF0 ? 3 : cp >= 0xE0 ? 2 : 1;
      cp &= extra == 3 ? 0x07 : extra == 2 ? 0x0F : 0x1F;
      for (int e = 0; e < extra && i + k < len; e++, k++) cp = cp << 6 | ((uint8_t)s[i + k] & 0x3F);
    }
    node = feri_rx_cat(rx, node, quoted_char(rx, cp));
    i += k;
  }
  return feri_rx_cat(rx, node, feri_rx_literal(rx, (const uint8_t *)"\"", 1));
}

/* A key as serde_json writes it (one spelling only): the bytes into out, their count. */
static size_t serde_key(const char *s, char *out, size_t cap) {
  size_t n = 0;
  out[n++] = '"';
  for (; *s && n + 8 < cap; s++) {
    const unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') out[n++] = '\\', out[n++] = (char)ch;
    else if (ch == '\n') out[n++] = '\\', out[n++] = 'n';
    else if (ch == '\r') out[n++] = '\\', out[n++] = 'r';
    else if (ch == '\t') out[n++] = '\\', out[n++] = 't';
    else if (ch == 8) out[n++] = '\\', out[n++] = 'b';
    else if (ch == 12) out[n++] = '\\', out[n++] = 'f';
    else if (ch < 0x20) n += (size_t)snprintf(out + n, cap - n, "\\u%04x", ch);
    else out[n++] = (char)ch;
  }
  out[n++] = '"';
  return n;
}

/* ---- shared lexemes --------------------------------------------------------------------------- */

static int32_t lx(jc *c, int32_t *slot, const char *re, int is_literal) {
  if (*slot == 0) *slot = is_literal ? literal(c, re) : lexeme(c, re);
  if (*slot == 0) cfg_fail(c);
  return *slot;
}

#define LX_LBRACE(c) lx(c, &(c)->lx_lbrace, "{", 1)
#define LX_RBRACE(c) lx(c, &(c)->lx_rbrace, "}", 1)
#define LX_LBRACK(c) lx(c, &(c)->lx_lbrack, "[", 1)
#define LX_RBRACK(c) lx(c, &(c)->lx_rbrack, "]", 1)

/* ---- numbers as Rust writes an f64 (shortest round trip, never an exponent) -------------------- */

static void rust_float(double v, char *out, size_t cap) {
  char buf[64];
  int prec = 1;
  for (; prec <= 17; prec++) {
    snprintf(buf, sizeof buf, "%.*e", prec - 1, v);
    if (strtod(buf, NULL) == v) break;
  }
  /* buf: [-]d.ddde[+-]xx: write it out without the exponent */
  const int neg = buf[0] == '-';
  char digits[32];
  size_t nd = 0;
  const char *p = buf + neg;
  for (; *p && *p != 'e'; p++)
    if (*p >= '0' && *p <= '9') digits[nd++] = *p;
  const int exp = atoi(p + 1);
  while (nd > 1 && digits[nd - 1] == '0') nd--;
  size_t n = 0;
  if (neg) out[n++] = '-';
  const int point = exp + 1; /* digits before the point */
  if (point <= 0) {
    out[n++] = '0', out[n++] = '.';
    for (int z = 0; z < -point && n + 2 < cap; z++) out[n++] = '0';
    for (size_t k = 0; k < nd && n + 1 < cap; k++) out[n++] = digits[k];
  } else {
    for (int k = 0; k < point && n + 2 < cap; k++) out[n++] = (size_t)k < nd ? digits[k] : '0';
    if ((size_t)point < nd) {
      out[n++] = '.';
      for (size_t k = (size_t)point; k < nd && n + 1 < cap; k++) out[n++] = digits[k];
    }
  }
  out[n] = 0;
}

/* ---- schemas ---------------------------------------------------------------------------------- */

static uint32_t compile(jc *c, const cJSON *s);
static uint32_t union_of(jc *c, const uint32_t *alts, uint32_t n);

/* The nonterminal of any JSON value. */
static uint32_t any_value(jc *c) {
  if (c->nt_any) return c->nt_any;
  const uint32_t v = nonterm(c), members = nonterm(c), items = nonterm(c);
  c->nt_any = v;
  const int32_t lb = LX_LBRACE(c), rb = LX_RBRACE(c), lk = LX_LBRACK(c), rk = LX_RBRACK(c);
  const int32_t str = lx(c, &c->lx_string, "\"" JSON_CHAR "*\"", 0), num = lx(c, &c->lx_number, JSON_NUMBER, 0);
  const int32_t tf = lx(c, &c->lx_bool, "true|false", 0), nul = lx(c, &c->lx_null, "null", 1);
  if (c->err) return UINT32_MAX;
  rule1(c, v, str), rule1(c, v, num), rule1(c, v, tf), rule1(c, v, nul);
  const int32_t obj0[] = {lb, rb}, obj1[] = {lb, (int32_t)members, rb}, arr0[] = {lk, rk}, arr1[] = {lk, (int32_t)items, rk};
  rule(c, v, obj0, 2), rule(c, v, obj1, 3), rule(c, v, arr0, 2), rule(c, v, arr1, 3);
  const int32_t mem[] = {str, c->lx_colon, (int32_t)v}, mems[] = {(int32_t)members, c->lx_comma, str, c->lx_colon, (int32_t)v};
  rule(c, members, mem, 3), rule(c, members, mems, 5);
  const int32_t it[] = {(int32_t)v}, its[] = {(int32_t)items, c->lx_comma, (int32_t)v};
  rule(c, items, it, 1), rule(c, items, its, 3);
  return c->err ? UINT32_MAX : v;
}

static int is_annotation(const char *k) {
  static const char *const A[] = {"$anchor", "$defs", "definitions", "$schema", "$id", "id", "$comment", "title",
                                  "description", "default", "readOnly", "writeOnly", "examples", "contentMediaType",
                                  "contentEncoding", "deprecated", "$vocabulary", NULL};
  for (int i = 0; A[i]; i++)
    if (strcmp(k, A[i]) == 0) return 1;
  return 0;
}

/* Keywords JSON Schema defines that this compiler does not build (yet): refused by name. */
static int is_unbuilt(const char *k) {
  static const char *const U[] = {"not", "uniqueItems", "contains", "minContains", "maxContains", "propertyNames",
                                  "if", "then", "else", "dependencies", "dependentRequired", "dependentSchemas",
                                  "unevaluatedItems", "unevaluatedProperties", "$dynamicRef", "$dynamicAnchor",
                                  "$recursiveRef", "$recursiveAnchor", "additionalItems", NULL};
  for (int i = 0; U[i]; i++)
    if (strcmp(k, U[i]) == 0) return 1;
  return 0;
}

/* A non-negative integer keyword (or dflt when absent); -1 after an error. */
static int64_t count_kw(jc *c, const cJSON *s, const char *k, int64_t dflt) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, k);
  if (!v) return dflt;
  if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != floor(v->valuedouble) || v->valuedouble > 1e9) {
    fail(c, FER_STATUS_INVALID_ARG, "expected a non-negative integer for ", k);
    return -1;
  }
  return (int64_t)v->valuedouble;
}

/* The nonterminal of one constant (string, number, boolean or null). */
static uint32_t compile_const(jc *c, const cJSON *v) {
  const uint32_t nt = nonterm(c);
  if (c->err) return UINT32_MAX;
  int32_t sym = 0;
  if (cJSON_IsString(v)) {
    sym = feri_cfg_lexeme(c->g, quoted_string(&c->g->rx, v->valuestring, strlen(v->valuestring)));
  } else if (cJSON_IsNumber(v)) {
    char buf[400];
    const double d = v->valuedouble;
    if (d == floor(d) && fabs(d) < 9.2e18) snprintf(buf, sizeof buf, "%lld", (long long)d);
    else rust_float(d, buf, sizeof buf);
    if (strchr(buf, '.') == NULL && d == 0 && signbit(d)) snprintf(buf, sizeof buf, "-0");
    sym = literal(c, buf);
  } else if (cJSON_IsBool(v)) {
    sym = cJSON_IsTrue(v) ? lx(c, &c->lx_true, "true", 1) : lx(c, &c->lx_false, "false", 1);
  } else if (cJSON_IsNull(v)) {
    sym = lx(c, &c->lx_null, "null", 1);
  } else { /* an object (its members in order, each required, nothing else) or an array: one rule */
    const int is_obj = cJSON_IsObject(v);
    const uint32_t n = (uint32_t)cJSON_GetArraySize(v);
    int32_t *r = malloc(sizeof *r * (4 * (size_t)n + 2));
    if (!r) return fail(c, FER_STATUS_OUT_OF_MEMORY, "out of memory", NULL);
    uint32_t k = 0;
    r[k++] = is_obj ? LX_LBRACE(c) : LX_LBRACK(c);
    const cJSON *e;
    cJSON_ArrayForEach(e, v) {
      if (k > 1) r[k++] = c->lx_comma;
      if (is_obj) {
        char key[1100];
        if (strlen(e->string) > 256) {
          free(r);
          return fail(c, FER_STATUS_UNSUPPORTED, "a property name longer than 256 bytes", NULL);
        }
        const size_t kl = serde_key(e->string, key, sizeof key);
        r[k++] = feri_cfg_lexeme(c->g, feri_rx_literal(&c->g->rx, (const uint8_t *)key, kl));
        r[k++] = c->lx_colon;
      }
      const uint32_t x = compile_const(c, e);
      if (x == UINT32_MAX || c->err) break;
      r[k++] = (int32_t)x;
    }
    r[k++] = is_obj ? LX_RBRACE(c) : LX_RBRACK(c);
    for (uint32_t i = 0; i < k; i++)
      if (r[i] == 0) cfg_fail(c);
    rule(c, nt, r, k);
    free(r);
    return c->err ? UINT32_MAX : nt;
  }
  if (sym == 0) return cfg_fail(c);
  rule1(c, nt, sym);
  return c->err ? UINT32_MAX : nt;
}

/* Element i of a sequence: its nonterminal. */
typedef uint32_t (*elem_fn)(jc *c, const void *ctx, uint32_t i);

/* An array's elements: 0 .. n - 1 by position (elements < req required; the array may end after
 * any later one), each after the first preceded by sep; then, when all n are there and tail_max >
 * 0, up to tail_max (FERI_RX_INF: any number) elements of nonterminal tail. The start nonterminal
 * (nothing emitted yet). */
static uint32_t sequence(jc *c, uint32_t n, uint32_t req, elem_fn elem, const void *ctx, int32_t sep, uint32_t tail,
                         uint32_t tail_max) {
  /* R[i][e]: the rest from element i, e = 1 when something was emitted */
  uint32_t next0 = nonterm(c), next1 = nonterm(c);
  if (c->err) return UINT32_MAX;
  if (tail_max == 0) {
    rule(c, next0, NULL, 0), rule(c, next1, NULL, 0);
  } else if (tail_max == FERI_RX_INF) { /* X ("," X)* or nothing */
    const int32_t t0[] = {(int32_t)tail, (int32_t)next1}, t1[] = {sep, (int32_t)tail, (int32_t)next1};
    rule(c, next0, NULL, 0), rule(c, next0, t0, 2), rule(c, next1, NULL, 0), rule(c, next1, t1, 3);
  } else { /* at most tail_max more */
    if (tail_max > MAX_SEQ) return fail(c, FER_STATUS_INVALID_ARG, "a bound on items above 100000", NULL);
    uint32_t a0 = nonterm(c), a1 = nonterm(c);
    rule(c, a0, NULL, 0), rule(c, a1, NULL, 0);
    for (uint32_t k = 1; k <= tail_max && !c->err; k++) {
      const uint32_t b0 = nonterm(c), b1 = nonterm(c);
      const int32_t t0[] = {(int32_t)tail, (int32_t)a1}, t1[] = {sep, (int32_t)tail, (int32_t)a1};
      rule(c, b0, NULL, 0), rule(c, b0, t0, 2), rule(c, b1, NULL, 0), rule(c, b1, t1, 3);
      a0 = b0, a1 = b1;
    }
    next0 = a0, next1 = a1;
  }
  for (uint32_t i = n; i-- > 0 && !c->err;) {
    const uint32_t e = elem(c, ctx, i);
    if (e == UINT32_MAX) return UINT32_MAX;
    const uint32_t r0 = nonterm(c), r1 = nonterm(c);
    const int32_t f0[] = {(int32_t)e, (int32_t)next1}, f1[] = {sep, (int32_t)e, (int32_t)next1};
    rule(c, r0, f0, 2), rule(c, r1, f1, 3);
    if (i >= req) rule(c, r0, NULL, 0), rule(c, r1, NULL, 0); /* positions: an absent element ends the array */
    next0 = r0, next1 = r1;
  }
  return c->err ? UINT32_MAX : next0;
}

/* ---- objects ---- */

typedef struct obj_ctx {
  const cJSON **keys; /* the member names in order */
  const cJSON **schemas;
  uint32_t n;
} obj_ctx;

static uint32_t member(jc *c, const void *vctx, uint32_t i) {
  const obj_ctx *o = vctx;
  char key[1100];
  const char *name = o->keys[i]->string ? o->keys[i]->string : o->keys[i]->valuestring;
  if (strlen(name) > 256) return fail(c, FER_STATUS_UNSUPPORTED, "a property name longer than 256 bytes", NULL);
  const size_t kl = serde_key(name, key, sizeof key);
  const int32_t k = feri_cfg_lexeme(c->g, feri_rx_literal(&c->g->rx, (const uint8_t *)key, kl));
  if (k == 0) return cfg_fail(c);
  const size_t at = path_push(c, "properties");
  const size_t at2 = path_push(c, name);
  const uint32_t v = o->schemas[i] ? compile(c, o->schemas[i]) : any_value(c); /* NULL: any JSON */
  path_pop(c, at2), path_pop(c, at);
  if (v == UINT32_MAX) return UINT32_MAX;
  const uint32_t m = nonterm(c);
  const int32_t r[] = {k, c->lx_colon, (int32_t)v};
  rule(c, m, r, 3);
  return c->err ? UINT32_MAX : m;
}

/* A schema made here, kept until the end (NULL after out of memory). */
static cJSON *own(jc *c, cJSON *x) {
  if (x && !feri_grow((void **)&c->owned, &c->cap_owned, c->n_owned + 1, sizeof *c->owned)) {
    cJSON_Delete(x);
    x = NULL;
  }
  if (!x) {
    fail(c, FER_STATUS_OUT_OF_MEMORY, "out of memory", NULL);
    return NULL;
  }
  c->owned[c->n_owned++] = x;
  return x;
}

/* {"allOf": [a, b]} (copies), kept until the end. */
static const cJSON *all_of2(jc *c, const cJSON *a, const cJSON *b) {
  cJSON *x = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(x, "allOf");
  if (arr) cJSON_AddItemToArray(arr, cJSON_Duplicate(a, 1)), cJSON_AddItemToArray(arr, cJSON_Duplicate(b, 1));
  return own(c, x);
}

/* 1 when rx node x matches no string (its automaton has no path to a match); -1 on failure. */
static int rx_empty(jc *c, uint32_t x) {
  feri_nfa nfa;
  const feri_lexeme_spec spec = {x, 0, NULL, NULL};
  const fer_status st = feri_nfa_build(&c->g->rx, &spec, 1, &nfa);
  if (st != FER_STATUS_OK) return fail(c, st, "an expression too large to check", NULL), -1;
  const int empty = !nfa.live[nfa.start[0]];
  feri_nfa_free(&nfa);
  return empty;
}

/* 1 when rx node x matches the bytes s (a lexeme's whole text); -1 on failure. */
static int rx_matches(jc *c, uint32_t x, const char *s) {
  feri_nfa nfa;
  feri_dfa d;
  const feri_lexeme_spec spec = {x, 0, NULL, NULL};
  fer_status st = feri_nfa_build(&c->g->rx, &spec, 1, &nfa);
  if (st == FER_STATUS_OK && (st = feri_dfa_init(&d, &nfa)) != FER_STATUS_OK) feri_nfa_free(&nfa);
  if (st != FER_STATUS_OK) return fail(c, st, "an expression too large to check", NULL), -1;
  const uint32_t zero = 0;
  uint32_t q = feri_dfa_start(&d, &zero, 1), n = 0;
  for (; *s && q; s++) q = feri_dfa_step(&d, q, (uint8_t)*s);
  if (q) (void)feri_dfa_accepts(&d, q, &n);
  feri_dfa_free(&d), feri_nfa_free(&nfa);
  return n > 0;
}

/* The rest of an object after its named members: between min and max (-2: any number) members
 * of nonterminal item, each after the first preceded by a separator; *t0 when nothing came
 * before it, *t1 after a member. */
static void bounded_tail(jc *c, uint32_t item, int64_t min, int64_t max, uint32_t *t0, uint32_t *t1) {
  if (max > MAX_SEQ || min > MAX_SEQ) {
    fail(c, FER_STATUS_INVALID_ARG, "a bound on properties above 100000", NULL);
    return;
  }
  const int64_t top = max == -2 ? min : max; /* T[top]: unbounded loops, bounded ends */
  uint32_t next = nonterm(c);
  if (c->err) return;
  if (max == -2) {
    const int32_t r[] = {c->lx_comma, (int32_t)item, (int32_t)next};
    rule(c, next, NULL, 0), rule(c, next, r, 3);
  } else {
    rule(c, next, NULL, 0);
  }
  for (int64_t i = top - 1; i >= 0 && !c->err; i--) { /* T[i]: i members so far */
    const uint32_t t = nonterm(c);
    const int32_t r[] = {c->lx_comma, (int32_t)item, (int32_t)next};
    rule(c, t, r, 3);
    if (i >= min) rule(c, t, NULL, 0);
    if (i == 0) { /* nothing before: the first member has no separator */
      *t0 = nonterm(c);
      const int32_t r0[] = {(int32_t)item, (int32_t)next};
      if (max != 0) rule(c, *t0, r0, 2);
      if (min == 0) rule(c, *t0, NULL, 0);
    }
    next = t;
  }
  if (top == 0) { /* no member needed: T[0] is the loop (or the end) */
    *t0 = nonterm(c);
    const int32_t r0[] = {(int32_t)item, (int32_t)next};
    rule(c, *t0, NULL, 0);
    if (max != 0) rule(c, *t0, r0, 2);
  }
  *t1 = next;
}

/* "{" the members e[i] with flags[i] (0 absent, 1 optional, 2 required) in order, then the tail
 * (t0 / t1 as bounded_tail gives them), "}". */
static uint32_t object_fields(jc *c, const uint32_t *e, const uint8_t *flags, uint32_t n, uint32_t t0, uint32_t t1) {
  uint32_t next0 = t0, next1 = t1;
  for (uint32_t i = n; i-- > 0 && !c->err;) {
    if (flags[i] == 0) continue;
    const uint32_t r0 = nonterm(c), r1 = nonterm(c);
    const int32_t f0[] = {(int32_t)e[i], (int32_t)next1}, f1[] = {c->lx_comma, (int32_t)e[i], (int32_t)next1};
    rule(c, r0, f0, 2), rule(c, r1, f1, 3);
    if (flags[i] == 1) rule1(c, r0, (int32_t)next0), rule1(c, r1, (int32_t)next1);
    next0 = r0, next1 = r1;
  }
  const uint32_t nt = nonterm(c);
  const int32_t r[] = {LX_LBRACE(c), (int32_t)next0, LX_RBRACE(c)};
  rule(c, nt, r, 3);
  return c->err ? UINT32_MAX : nt;
}

enum { MAX_PATTERNS = 32 };

static uint32_t compile_object(jc *c, const cJSON *s) {
  const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
  const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
  const cJSON *addl = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
  const cJSON *pp = cJSON_GetObjectItemCaseSensitive(s, "patternProperties");
  if (props && !cJSON_IsObject(props)) return fail(c, FER_STATUS_INVALID_ARG, "\"properties\" must be an object", NULL);
  if (req && !cJSON_IsArray(req)) return fail(c, FER_STATUS_INVALID_ARG, "\"required\" must be an array", NULL);
  if (pp && !cJSON_IsObject(pp))
    return fail(c, FER_STATUS_INVALID_ARG, "\"patternProperties\" must be an object", NULL);
  const int64_t min_p = count_kw(c, s, "minProperties", 0), max_p = count_kw(c, s, "maxProperties", -2);
  if (min_p < 0 || max_p == -1) return UINT32_MAX;
  const uint32_t np = (uint32_t)cJSON_GetArraySize(props), nr = (uint32_t)cJSON_GetArraySize(req);
  const uint32_t n_pat = (uint32_t)cJSON_GetArraySize(pp);
  if (n_pat > MAX_PATTERNS) return fail(c, FER_STATUS_UNSUPPORTED, "more than 32 patternProperties", NULL);
  obj_ctx o = {calloc((size_t)np + nr + 1, sizeof(cJSON *)), calloc((size_t)np + nr + 1, sizeof(cJSON *)), 0};
  uint8_t *flags = calloc((size_t)np + nr + 1, 1);
  uint32_t *e = calloc((size_t)np + nr + 1, sizeof *e);
  const uint8_t **words = calloc((size_t)np + nr + 1, sizeof *words);
  uint32_t *lens = calloc((size_t)np + nr + 1, sizeof *lens);
  char *keybuf = malloc((size_t)(np + nr + 1) * 1100);
  uint32_t result = UINT32_MAX, pat_rx[MAX_PATTERNS];
  const cJSON *pat_schema[MAX_PATTERNS];
  if (!o.keys || !o.schemas || !flags || !e || !words || !lens || !keybuf) {
    fail(c, FER_STATUS_OUT_OF_MEMORY, "out of memory", NULL);
    goto done;
  }
  const cJSON *it;
  cJSON_ArrayForEach(it, props) o.keys[o.n] = it, o.schemas[o.n] = it, flags[o.n++] = 1;
  cJSON_ArrayForEach(it, req) {
    if (!cJSON_IsString(it)) {
      fail(c, FER_STATUS_INVALID_ARG, "\"required\" must list strings", NULL);
      goto done;
    }
    uint32_t k = 0;
    while (k < o.n && strcmp(o.keys[k]->string ? o.keys[k]->string : o.keys[k]->valuestring, it->valuestring) != 0) k++;
    if (k == o.n) { /* a required key without a property: its value from patternProperties or additionalProperties */
      o.keys[o.n] = it;
      o.schemas[o.n++] = addl && cJSON_IsObject(addl) ? addl : cJSON_IsFalse(addl) ? addl : NULL;
    }
    flags[k] = 2;
  }
  /* the patterns: search expressions over the key's characters, which must be disjoint */
  {
    uint32_t i = 0;
    cJSON_ArrayForEach(it, pp) {
      const size_t at = path_push(c, "patternProperties");
      const fer_status st = feri_rx_parse_search(&c->g->rx, it->string, strlen(it->string), &pat_rx[i]);
      path_pop(c, at);
      if (st != FER_STATUS_OK) {
        fail(c, st, "a pattern that is not a supported expression: ", it->string);
        goto done;
      }
      pat_schema[i++] = it;
    }
    for (uint32_t a = 0; a < n_pat; a++)
      for (uint32_t b = a + 1; b < n_pat; b++) {
        const int empty = rx_empty(c, feri_rx_and(&c->g->rx, pat_rx[a], pat_rx[b]));
        if (empty < 0) goto done;
        if (!empty) {
          fail(c, FER_STATUS_UNSUPPORTED, "patternProperties whose patterns may both match a key (llguidance refuses them): ",
               pat_schema[b]->string);
          goto done;
        }
      }
  }
  /* the named members; a name that a pattern matches takes that pattern's schema too */
  uint32_t n_req = 0, n_opt = 0;
  for (uint32_t i = 0; i < o.n; i++) {
    const char *name = o.keys[i]->string ? o.keys[i]->string : o.keys[i]->valuestring;
    if (strlen(name) > 256) {
      fail(c, FER_STATUS_UNSUPPORTED, "a property name longer than 256 bytes", NULL);
      goto done;
    }
    lens[i] = (uint32_t)serde_key(name, keybuf + (size_t)i * 1100, 1100);
    words[i] = (const uint8_t *)keybuf + (size_t)i * 1100;
    for (uint32_t p = 0; p < n_pat; p++) {
      const int m = rx_matches(c, pat_rx[p], name);
      if (m < 0) goto done;
      if (m) {
        o.schemas[i] = o.schemas[i] && o.schemas[i] != addl ? all_of2(c, o.schemas[i], pat_schema[p]) : pat_schema[p];
        break;
      }
    }
    if (c->err) goto done;
    if (o.schemas[i] && cJSON_IsFalse(o.schemas[i])) {
      if (flags[i] == 2) {
        fail(c, FER_STATUS_INVALID_ARG, "a required property that no value satisfies: ", name);
        goto done;
      }
      flags[i] = 0; /* an optional property no value satisfies: left out (its name stays taken) */
      continue;
    }
    e[i] = member(c, &o, i);
    if (e[i] == UINT32_MAX) goto done;
    n_req += flags[i] == 2, n_opt += flags[i] == 1;
  }
  /* the tail's members: keys of each pattern, then other keys (unless additionalProperties is false) */
  uint32_t tail = nonterm(c), n_tail = 0;
  for (uint32_t p = 0; p < n_pat && !c->err; p++) {
    const uint8_t **pw = calloc((size_t)o.n + 1, sizeof *pw);
    uint32_t *pl = calloc((size_t)o.n + 1, sizeof *pl), k = 0; /* the taken names it matches are not its keys */
    if (!pw || !pl) {
      free(pw), free(pl);
      fail(c, FER_STATUS_OUT_OF_MEMORY, "out of memory", NULL);
      goto done;
    }
    for (uint32_t i = 0; i < o.n; i++) {
      const int m = rx_matches(c, pat_rx[p], o.keys[i]->string ? o.keys[i]->string : o.keys[i]->valuestring);
      if (m > 0) pw[k] = words[i], pl[k++] = lens[i];
    }
    const int32_t key = feri_cfg_lexeme_except(c->g, feri_rx_json_quote(&c->g->rx, pat_rx[p]), pw, pl, k);
    free(pw), free(pl);
    if (key == 0) {
      cfg_fail(c);
      goto done;
    }
    const size_t at = path_push(c, "patternProperties");
    const size_t at2 = path_push(c, pat_schema[p]->string);
    const uint32_t v = compile(c, pat_schema[p]);
    path_pop(c, at2), path_pop(c, at);
    if (v == UINT32_MAX) goto done;
    const uint32_t m = nonterm(c);
    const int32_t r[] = {key, c->lx_colon, (int32_t)v};
    rule(c, m, r, 3), rule1(c, tail, (int32_t)m);
    n_tail++;
  }
  if (!cJSON_IsFalse(addl) && !c->err) {
    int32_t k;
    if (o.n == 0 && n_pat == 0) {
      k = lx(c, &c->lx_string, "\"" JSON_CHAR "*\"", 0);
    } else {
      uint32_t root;
      const char *re = "\"" JSON_GENERAL_CHAR "*\"";
      k = 0;
      if (feri_rx_parse_into(&c->g->rx, re, strlen(re), &root) == FER_STATUS_OK) {
        if (n_pat) { /* not a key of any pattern */
          uint32_t any = UINT32_MAX;
          for (uint32_t p = 0; p < n_pat; p++) {
            const uint32_t q = feri_rx_json_quote(&c->g->rx, pat_rx[p]);
            any = any == UINT32_MAX ? q : feri_rx_alt(&c->g->rx, any, q);
          }
          root = feri_rx_andnot(&c->g->rx, root, any);
        }
        k = feri_cfg_lexeme_except(c->g, root, words, lens, o.n);
      }
    }
    if (k == 0) {
      cfg_fail(c);
      goto done;
    }
    const size_t at = path_push(c, "additionalProperties");
    const uint32_t v = addl && cJSON_IsObject(addl) ? compile(c, addl) : any_value(c);
    path_pop(c, at);
    if (v == UINT32_MAX) goto done;
    const uint32_t m = nonterm(c);
    const int32_t r[] = {k, c->lx_colon, (int32_t)v};
    rule(c, m, r, 3), rule1(c, tail, (int32_t)m);
    n_tail++;
  }
  if (c->err) goto done;
  /* minProperties / maxProperties: on the tail when every named property is required (llguidance's
   * rule), or "at least one" / "at most one" / "exactly one" of optional named ones without a tail */
  const int64_t min_t = min_p > n_req ? min_p - n_req : 0, max_t = max_p == -2 ? -2 : max_p > n_req ? max_p - n_req : 0;
  if (n_opt > 0 && (min_t > 0 || max_t != -2)) {
    if (!(min_t <= 1 && (max_t == -2 || max_t == 1) && n_pat == 0 && cJSON_IsFalse(addl))) {
      fail(c, FER_STATUS_UNSUPPORTED,
           "minProperties/maxProperties unless every key in \"properties\" is required (as llguidance)", NULL);
      goto done;
    }
    uint32_t alts[4096], na = 0;
    uint8_t *f2 = malloc((size_t)o.n + 1);
    const uint32_t none0 = nonterm(c), none1 = nonterm(c);
    rule(c, none0, NULL, 0), rule(c, none1, NULL, 0);
    for (uint32_t idx = 0; f2 && idx < o.n && na < 4095 && !c->err; idx++) {
      if (flags[idx] != 1) continue;
      for (uint32_t i = 0; i < o.n; i++) /* at most one: the others out; at least one: the others optional */
        f2[i] = flags[i] == 2 || i == idx ? 2 : max_t == 1 ? 0 : flags[i];
      alts[na++] = object_fields(c, e, f2, o.n, none0, none1);
    }
    if (f2 && max_t == 1 && min_t == 0) { /* or none of them */
      for (uint32_t i = 0; i < o.n; i++) f2[i] = flags[i] == 2 ? 2 : 0;
      alts[na++] = object_fields(c, e, f2, o.n, none0, none1);
    }
    free(f2);
    if (!c->err) result = union_of(c, alts, na);
    goto done;
  }
  uint32_t t0 = nonterm(c), t1 = nonterm(c);
  if (n_tail > 0 && max_t != 0) {
    bounded_tail(c, tail, min_t, max_t, &t0, &t1);
  } else if (min_t > 0) {
    fail(c, FER_STATUS_INVALID_ARG, "minProperties above the properties that may be there", NULL);
    goto done;
  } else {
    rule(c, t0, NULL, 0), rule(c, t1, NULL, 0);
  }
  result = object_fields(c, e, flags, o.n, t0, t1);
done:
  free(o.keys), free(o.schemas), free(flags), free(e), free(words), free(lens), free(keybuf);
  return c->err ? UINT32_MAX : result;
}

/* ---- arrays ---- */

typedef struct arr_ctx {
  const cJSON *prefix; /* prefixItems */
  uint32_t tail;       /* the nonterminal of the other items */
} arr_ctx;

static uint32_t array_elem(jc *c, const void *vctx, uint32_t i) {
  const arr_ctx *a = vctx;
  const cJSON *p = cJSON_GetArrayItem(a->prefix, (int)i);
  if (!p) return a->tail;
  char seg[32];
  snprintf(seg, sizeof seg, "%u", i);
  const size_t at = path_push(c, "prefixItems");
  const size_t at2 = path_push(c, seg);
  const uint32_t e = compile(c, p);
  path_pop(c, at2), path_pop(c, at);
  return e;
}

static uint32_t compile_array(jc *c, const cJSON *s) {
  const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
  const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
  if (prefix && !cJSON_IsArray(prefix)) return fail(c, FER_STATUS_INVALID_ARG, "\"prefixItems\" must be an array", NULL);
  if (items && cJSON_IsArray(items)) return fail(c, FER_STATUS_UNSUPPORTED, "\"items\" as an array (draft 2019 tuples) is not supported yet", NULL);
  const int64_t min = count_kw(c, s, "minItems", 0), max = count_kw(c, s, "maxItems", -2);
  if (min < 0 || max == -1) return UINT32_MAX;
  const uint32_t np = (uint32_t)cJSON_GetArraySize(prefix);
  uint32_t tail = UINT32_MAX;
  const int tail_ok = !cJSON_IsFalse(items);
  if (tail_ok) {
    const size_t at = path_push(c, "items");
    tail = items ? compile(c, items) : any_value(c);
    path_pop(c, at);
    if (tail == UINT32_MAX) return UINT32_MAX;
  }
  const uint64_t cap = max == -2 ? UINT64_MAX : (uint64_t)max;
  if ((uint64_t)min > cap) return fail(c, FER_STATUS_INVALID_ARG, "minItems above maxItems: no array satisfies it", NULL);
  if (!tail_ok && (uint64_t)min > np) return fail(c, FER_STATUS_INVALID_ARG, "minItems above the prefixItems that items false allows", NULL);
  /* explicit elements: the prefix and the required ones (up to the cap) */
  uint64_t n_explicit = np > (uint64_t)min ? np : (uint64_t)min;
  if (n_explicit > cap) n_explicit = cap;
  if (n_explicit > MAX_SEQ) return fail(c, FER_STATUS_INVALID_ARG, "minItems above 100000", NULL);
  uint32_t tail_max = 0;
  if (tail_ok) tail_max = cap == UINT64_MAX ? FERI_RX_INF : (uint32_t)(cap - n_explicit > MAX_SEQ + 1 ? MAX_SEQ + 1 : cap - n_explicit);
  const arr_ctx a = {prefix, tail};
  const uint32_t body = sequence(c, (uint32_t)n_explicit, (uint32_t)(min < (int64_t)n_explicit ? min : (int64_t)n_explicit),
                                 array_elem, &a, c->lx_comma, tail, tail_max);
  if (body == UINT32_MAX) return UINT32_MAX;
  const uint32_t nt = nonterm(c);
  const int32_t r[] = {LX_LBRACK(c), (int32_t)body, LX_RBRACK(c)};
  rule(c, nt, r, 3);
  return c->err ? UINT32_MAX : nt;
}

/* ---- strings ---- */

/* llguidance's format expressions (parser/src/json/formats.rs), matched against the whole decoded
 * string. */
static const char *format_rx(const char *name) {
  static const char *const F[][2] = {
      {"date-time", "(?P<date>[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|"
                    "(?:02)-(?:0[1-9]|1[0-9]|2[0-9])))[tT](?P<time>(?:[01][0-9]|2[0-3]):[0-5][0-9]:(?:[0-5][0-9]|60)"
                    "(?P<time_fraction>\\.[0-9]+)?(?P<time_zone>[zZ]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9]))"},
      {"time", "(?:[01][0-9]|2[0-3]):[0-5][0-9]:(?:[0-5][0-9]|60)(?P<time_fraction>\\.[0-9]+)?(?P<time_zone>[zZ]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"},
      {"date", "(?:[0-9]{4}-(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01]))|(?:[0-9]{4}-(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30))|"
               "(?:[0-9]{4}-02-(?:0[1-9]|1[0-9]|2[0-9]))"},
      {"email", "(?P<local_part>(?P<dot_string>[a-zA-Z0-9!#$%&'*+\\-/=?\\^_`{|}~]+(\\.[a-zA-Z0-9!#$%&'*+\\-/=?\\^_`{|}~]+)*))@("
                "(?P<domain>(?P<sub_domain>[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)(\\.(?P<sub_domain2>[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?))*)"
                "|\\[(?P<ipv4>((([0-9])|(([1-9])[0-9]|(25[0-5]|(2[0-4]|(1)[0-9])[0-9])))\\.){3}(([0-9])|(([1-9])[0-9]|(25[0-5]|(2[0-4]|(1)[0-9])[0-9]))))\\])"},
      {"hostname", "[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(\\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*"},
      {"ipv4", "((([0-9])|(([1-9])[0-9]|(25[0-5]|(2[0-4]|(1)[0-9])[0-9])))\\.){3}(([0-9])|(([1-9])[0-9]|(25[0-5]|(2[0-4]|(1)[0-9])[0-9])))"},
      {"uuid", "(?P<time_low>[0-9a-fA-F]{8})-(?P<time_mid>[0-9a-fA-F]{4})-(?P<time_high_and_version>[0-9a-fA-F]{4})-"
               "(?P<clock_seq_and_reserved>[0-9a-fA-F]{2})(?P<clock_seq_low>[0-9a-fA-F]{2})-(?P<node>[0-9a-fA-F]{12})"},
      {"unknown", "(?s:.*)"},
  };
  for (size_t i = 0; i < sizeof F / sizeof F[0]; i++)
    if (strcmp(name, F[i][0]) == 0) return F[i][1];
  return NULL;
}

/* a & b, where UINT32_MAX stands for "no constraint" on a. */
static uint32_t and_opt(feri_rx *rx, uint32_t a, uint32_t b) { return a == UINT32_MAX ? b : feri_rx_and(rx, a, b); }

/* One "pattern" (a search, \d and \w ASCII) or "format" (the whole string) into *acc. */
static int string_constraint(jc *c, const cJSON *v, int is_format, uint32_t *acc) {
  const char *kw = is_format ? "format" : "pattern";
  if (!cJSON_IsString(v)) return fail(c, FER_STATUS_INVALID_ARG, "expected a string for ", kw), 0;
  uint32_t x;
  fer_status st;
  if (is_format) {
    const char *re = format_rx(v->valuestring);
    if (!re) return fail(c, FER_STATUS_UNSUPPORTED, "unknown format: ", v->valuestring), 0;
    st = feri_rx_parse_into(&c->g->rx, re, strlen(re), &x);
  } else {
    st = feri_rx_parse_search(&c->g->rx, v->valuestring, strlen(v->valuestring), &x);
  }
  if (st != FER_STATUS_OK) return fail(c, st, "a pattern that is not a supported expression: ", v->valuestring), 0;
  *acc = and_opt(&c->g->rx, *acc, x);
  return 1;
}

/* A string's expression over its characters: pattern(s) & format(s) & its length; UINT32_MAX with
 * nothing to constrain (and no error). The patterns of an allOf come as "x-ferrite-patterns". */
static uint32_t string_rx(jc *c, const cJSON *s, int64_t min, int64_t max) {
  uint32_t acc = UINT32_MAX;
  static const char *const K[4] = {"pattern", "format", "x-ferrite-patterns", "x-ferrite-formats"};
  for (int k = 0; k < 4 && !c->err; k++) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, K[k]), *e;
    if (!v) continue;
    const size_t at = path_push(c, k % 2 ? "format" : "pattern");
    if (k < 2) string_constraint(c, v, k == 1, &acc);
    else cJSON_ArrayForEach(e, v) if (!string_constraint(c, e, k == 3, &acc)) break;
    path_pop(c, at);
  }
  if (c->err || (acc == UINT32_MAX && min == 0 && max == -2)) return UINT32_MAX;
  if (min != 0 || max != -2) { /* (?s:.{min,max}): any scalars, counted */
    const uint32_t all[2] = {0, 0x10FFFF};
    const uint32_t hi = max == -2 ? FERI_RX_INF : (uint32_t)max;
    const uint32_t len = feri_rx_repeat(&c->g->rx, feri_rx_set(&c->g->rx, all, 1), (uint32_t)min, hi);
    if (len == UINT32_MAX) return cfg_fail(c);
    acc = and_opt(&c->g->rx, acc, len);
  }
  return acc;
}

static uint32_t compile_string(jc *c, const cJSON *s) {
  const int64_t min = count_kw(c, s, "minLength", 0), max = count_kw(c, s, "maxLength", -2);
  if (min < 0 || max == -1) return UINT32_MAX;
  if (max != -2 && max < min)
    return fail(c, FER_STATUS_INVALID_ARG, "maxLength below minLength: no string satisfies it", NULL);
  if (min > 10000 || max > 10000) return fail(c, FER_STATUS_UNSUPPORTED, "a string length bound above 10000", NULL);
  int32_t sym;
  const uint32_t x = string_rx(c, s, min, max);
  if (c->err) return UINT32_MAX;
  if (x == UINT32_MAX) {
    sym = lx(c, &c->lx_string, "\"" JSON_CHAR "*\"", 0);
  } else {
    const int empty = rx_empty(c, x); /* llguidance refuses a string schema no string satisfies */
    if (empty < 0) return UINT32_MAX;
    if (empty) return fail(c, FER_STATUS_INVALID_ARG, "a string schema that no string satisfies", NULL);
    sym = feri_cfg_lexeme(c->g, feri_rx_json_quote(&c->g->rx, x));
  }
  if (sym == 0) return cfg_fail(c);
  const uint32_t nt = nonterm(c);
  rule1(c, nt, sym);
  return c->err ? UINT32_MAX : nt;
}

/* ---- integer ranges (llguidance's numeric.rs rx_int_range, ported for its language) ---------- */

/* A growing string; NULL after a failure (every function below passes NULL on). */
static char *cat3(char *a, const char *b, const char *c) {
  if (!a) return NULL;
  const size_t la = strlen(a), lb = b ? strlen(b) : 0, lc = c ? strlen(c) : 0;
  char *r = realloc(a, la + lb + lc + 1);
  if (!r) {
    free(a);
    return NULL;
  }
  if (lb) memcpy(r + la, b, lb);
  if (lc) memcpy(r + la + lb, c, lc);
  r[la + lb + lc] = 0;
  return r;
}

static char *dup(const char *s) { return cat3(calloc(1, 1), s, NULL); }

/* (x|y), or x alone when y is NULL-free and empty; takes both. */
static char *or2(char *x, char *y) {
  if (!x || !y) {
    free(x), free(y);
    return NULL;
  }
  char *r = cat3(cat3(cat3(dup("("), x, "|"), y, ")"), NULL, NULL);
  free(x), free(y);
  return r;
}

static int ndigits(int64_t v) {
  int n = 1;
  for (v = v < 0 ? -v : v; v >= 10; v /= 10) n++;
  return n;
}

static int64_t pow10i(int n) {
  int64_t p = 1;
  while (n-- > 0) p *= 10;
  return p;
}

/* The integers in [L, R] as JSON writes them (hl, hr: whether each bound is there); |bounds| <
 * 10^17 (checked by the caller). */
static char *int_rx(int64_t L, int hl, int64_t R, int hr) {
  if (!hl && !hr) return dup("-?(0|[1-9][0-9]*)");
  if (hl && !hr) {
    if (L < 0) return or2(int_rx(L, 1, -1, 1), int_rx(0, 1, 0, 0));
    char rep[48];
    snprintf(rep, sizeof rep, "[1-9][0-9]{%d,}", ndigits(L));
    return or2(int_rx(L, 1, pow10i(ndigits(L)) - 1, 1), dup(rep));
  }
  if (!hl && hr) {
    if (R >= 0) return or2(int_rx(0, 1, R, 1), int_rx(0, 0, -1, 1));
    char *x = int_rx(-R, 1, 0, 0);
    char *r = x ? cat3(dup("-"), x, NULL) : NULL;
    free(x);
    return r;
  }
  if (L < 0) {
    if (R < 0) {
      char *x = int_rx(-R, 1, -L, 1);
      char *r = x ? cat3(dup("(-"), x, ")") : NULL;
      free(x);
      return r;
    }
    char *x = int_rx(0, 1, -L, 1), *y = int_rx(0, 1, R, 1);
    char *r = x && y ? cat3(cat3(cat3(dup("(-"), x, "|"), y, ")"), NULL, NULL) : NULL;
    free(x), free(y);
    return r;
  }
  char ls[32], rs[32];
  snprintf(ls, sizeof ls, "%lld", (long long)L);
  snprintf(rs, sizeof rs, "%lld", (long long)R);
  const size_t n = strlen(ls);
  if (n != strlen(rs)) {
    const int64_t bp = pow10i((int)n) - 1;
    return or2(int_rx(L, 1, bp, 1), int_rx(bp + 1, 1, R, 1));
  }
  if (L == R) return cat3(dup("("), ls, ")");
  const char lx = ls[n - 1], rx = rs[n - 1];
  ls[n - 1] = 0, rs[n - 1] = 0; /* now the prefixes */
  char buf[96];
  if (strcmp(ls, rs) == 0) {
    snprintf(buf, sizeof buf, "(%s[%c-%c])", ls, lx, rx);
    return dup(buf);
  }
  int64_t a = n > 1 ? strtoll(ls, NULL, 10) : 0, b = n > 1 ? strtoll(rs, NULL, 10) : 0;
  char *parts = NULL; /* joined with | inside one group */
  if (lx != '0') {
    a++;
    snprintf(buf, sizeof buf, "%s[%c-9]", ls, lx);
    parts = dup(buf);
  }
  if (rx != '9') {
    b--;
    snprintf(buf, sizeof buf, "%s[0-%c]", rs, rx);
    parts = parts ? cat3(parts, "|", buf) : dup(buf);
  }
  if (a <= b) {
    char *x = int_rx(a, 1, b, 1);
    if (!x) {
      free(parts);
      return NULL;
    }
    x = cat3(x, "[0-9]", NULL);
    parts = parts ? cat3(cat3(parts, "|", x), NULL, NULL) : dup(x);
    free(x);
  }
  if (!parts) return dup("[^\\x{0}-\\x{10FFFF}]"); /* empty: cannot happen for L < R */
  char *r = cat3(dup("("), parts, ")");
  free(parts);
  return r;
}

/* ---- number ranges (numeric.rs rx_float_range, ported for its language) -------------------- */

/* The parts joined as one alternation: "(a|b)", or the one part alone; takes them all. */
static char *or_list(char **parts, int n) {
  int ok = n > 0;
  for (int i = 0; i < n; i++) ok &= parts[i] != NULL;
  char *r = NULL;
  if (ok && n == 1) return parts[0];
  if (ok) {
    r = dup("(");
    for (int i = 0; i < n; i++) r = cat3(r, i ? "|" : NULL, parts[i]);
    r = cat3(r, ")", NULL);
  }
  for (int i = 0; i < n; i++) free(parts[i]);
  return r;
}

static char *fmt1(const char *f, long long a, long long b) {
  char buf[128];
  snprintf(buf, sizeof buf, f, a, b);
  return dup(buf);
}

/* prefix + x (takes x) */
static char *pre(const char *prefix, char *x) {
  if (!x) return NULL;
  char *r = cat3(dup(prefix), x, NULL);
  free(x);
  return r;
}

/* prefix + x + suffix (takes x) */
static char *wrap(const char *prefix, char *x, const char *suffix) {
  if (!x) return NULL;
  char *r = cat3(dup(prefix), x, suffix);
  free(x);
  return r;
}

/* Digit strings (a fraction's digits) at or above x (lexicographically; incl: x itself too). */
static char *lexi_x_to_9(const char *x, int incl) {
  const size_t n = strlen(x);
  if (n == 0) return dup(incl ? "[0-9]*" : "[0-9]*[1-9]");
  if (incl && n == 1) return fmt1("[%lld-9][0-9]*", x[0] - '0', 0);
  char head[2] = {x[0], 0};
  char *parts[2] = {pre(head, lexi_x_to_9(x + 1, incl)), NULL};
  int k = 1;
  if (x[0] < '9') parts[k++] = fmt1("[%lld-9][0-9]*", x[0] - '0' + 1, 0);
  return or_list(parts, k);
}

/* Digit strings at or below x; NULL where llguidance errs. */
static char *lexi_0_to_x(const char *x, int incl) {
  const size_t n = strlen(x);
  if (n == 0) return incl ? dup("") : NULL;
  const int x0 = x[0] - '0';
  if (!incl && n == 1) return x0 == 0 ? NULL : fmt1("[0-%lld][0-9]*", x0 - 1, 0);
  char head[2] = {x[0], 0};
  char *parts[2] = {pre(head, lexi_0_to_x(x + 1, incl)), NULL};
  int k = 1;
  if (x0 > 0) parts[k++] = fmt1("[0-%lld][0-9]*", x0 - 1, 0);
  return or_list(parts, k);
}

static void trim_zeros(char *s) {
  size_t n = strlen(s);
  while (n > 0 && s[n - 1] == '0') s[--n] = 0;
}

static char *lexi_range(const char *ld, const char *rd, int li, int ri) {
  if (strlen(ld) != strlen(rd)) return NULL;
  if (strcmp(ld, rd) == 0) return li && ri ? dup(ld) : NULL;
  char head[2] = {ld[0], 0};
  if (ld[0] == rd[0]) return pre(head, lexi_range(ld + 1, rd + 1, li, ri));
  if (ld[0] > rd[0]) return NULL;
  char lrest[64], rrest[64];
  snprintf(lrest, sizeof lrest, "%s", ld + 1), snprintf(rrest, sizeof rrest, "%s", rd + 1);
  trim_zeros(lrest), trim_zeros(rrest);
  char *parts[3];
  int k = 0;
  parts[k++] = pre(head, lexi_x_to_9(lrest, li));
  if (ld[0] + 1 < rd[0]) parts[k++] = fmt1("[%lld-%lld][0-9]*", ld[0] - '0' + 1, rd[0] - '0' - 1);
  if (rrest[0] || ri) {
    char rh[2] = {rd[0], 0};
    parts[k++] = pre(rh, lexi_0_to_x(rrest, ri));
  }
  return or_list(parts, k);
}

/* Rust's regex::escape of a number's text (its '-' and '.'). */
static char *escape_num(const char *s) {
  char buf[512];
  size_t n = 0;
  for (; *s && n + 3 < sizeof buf; s++) {
    if (*s == '-' || *s == '.') buf[n++] = '\\';
    buf[n++] = *s;
  }
  buf[n] = 0;
  return dup(buf);
}

/* The integer before the point of a number's text; 0 when it does not fit (*ok = 0). */
static int64_t int_part(const char *s, int *ok) {
  char *end;
  errno = 0;
  const long long v = strtoll(s, &end, 10);
  *ok = errno == 0 && (*end == 0 || *end == '.');
  return v;
}

/* The decimals in the range (hl, hr: whether each bound is there; li, ri: inclusive), as JSON
 * writes them without an exponent (bounded) or with one (unbounded); NULL where llguidance errs. */
static char *float_rx(int hl, double L, int hr, double R, int li, int ri) {
  if (!hl && !hr) return dup("-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?");
  if (hl && !hr) {
    if (L < 0) {
      char *p[2] = {float_rx(1, L, 1, 0.0, li, 0), float_rx(1, 0.0, 0, 0, 1, 0)};
      return or_list(p, 2);
    }
    const int nd = ndigits((int64_t)L);
    char rep[64];
    snprintf(rep, sizeof rep, "[1-9][0-9]{%d,}(\\.[0-9]+)?", nd);
    char *p[2] = {float_rx(1, L, 1, (double)pow10i(nd), li, 0), dup(rep)};
    return or_list(p, 2);
  }
  if (!hl && hr) {
    if (R == 0) {
      char *r = pre("-", float_rx(1, 0.0, 0, 0, 0, 0));
      if (!ri) return r;
      char *p[2] = {r, dup("0")};
      return or_list(p, 2);
    }
    if (R > 0) {
      char *p[2] = {pre("-", float_rx(1, 0.0, 0, 0, 0, 0)), float_rx(1, 0.0, 1, R, 1, ri)};
      return or_list(p, 2);
    }
    return pre("-", float_rx(1, -R, 0, 0, ri, 0));
  }
  if (L > R) return NULL;
  char l[400], r[400];
  rust_float(L, l, sizeof l), rust_float(R, r, sizeof r);
  if (L == R) return li && ri ? wrap("(", escape_num(l), ")") : NULL;
  if (L < 0) {
    if (R < 0) return wrap("(-", float_rx(1, -R, 1, -L, ri, li), ")");
    char *p[2] = {wrap("(-", float_rx(1, 0.0, 1, -L, 0, li), ")"), NULL};
    int k = 1;
    if (R > 0 || ri) p[k++] = float_rx(1, 0.0, 1, R, 1, ri);
    return or_list(p, k);
  }
  if (strcmp(l, r) == 0 || !isfinite(L) || !isfinite(R)) return NULL;
  int ok1, ok2;
  int64_t lrec = int_part(l, &ok1);
  const int64_t rrec = int_part(r, &ok2);
  if (!ok1 || !ok2) return NULL;
  char ld[400], rd[400];
  snprintf(ld, sizeof ld, "%s", strchr(l, '.') ? strchr(l, '.') + 1 : "");
  snprintf(rd, sizeof rd, "%s", strchr(r, '.') ? strchr(r, '.') + 1 : "");
  if (lrec == rrec) {
    while (strlen(ld) < strlen(rd)) strcat(ld, "0");
    while (strlen(rd) < strlen(ld)) strcat(rd, "0");
    char *suff = pre("\\.", lexi_range(ld, rd, li, ri));
    if (!suff) return NULL;
    int okd;
    const int64_t v = ld[0] ? int_part(ld, &okd) : 0;
    char head[40];
    snprintf(head, sizeof head, "(%lld", (long long)lrec);
    char *res = ld[0] == 0 || !okd || v == 0 ? wrap(head, wrap("(", suff, ")?"), ")") : wrap(head, suff, ")");
    return res;
  }
  char *p[3];
  int k = 0;
  char head[64];
  if (ld[0] || !li) {
    snprintf(head, sizeof head, "(%lld\\.", (long long)lrec);
    p[k++] = wrap(head, lexi_x_to_9(ld, li), ")");
    lrec++;
  }
  if (rrec > lrec) p[k++] = wrap("(", int_rx(lrec, 1, rrec - 1, 1), "(\\.[0-9]+)?)");
  if (rd[0]) {
    snprintf(head, sizeof head, "(%lld(\\.", (long long)rrec);
    p[k++] = wrap(head, lexi_0_to_x(rd, ri), ")?)");
  } else if (ri) {
    p[k++] = fmt1("%lld(\\.0+)?", rrec, 0);
  }
  return k == 0 ? dup("()") : or_list(p, k);
}

/* multipleOf as llguidance reads it: coef * 10^-exp, the float multiplied by ten until whole. */
static int decimal_of(jc *c, const cJSON *v, uint32_t *coef, uint32_t *exp) {
  if (!cJSON_IsNumber(v) || v->valuedouble <= 0)
    return fail(c, FER_STATUS_INVALID_ARG, "multipleOf must be a positive number", NULL), 0;
  double x = v->valuedouble;
  uint32_t e = 0;
  while (x != trunc(x) && e < 400) x *= 10, e++;
  if (x > 4294967295.0 || e > 9) return fail(c, FER_STATUS_UNSUPPORTED, "multipleOf with too many digits", NULL), 0;
  uint32_t k = (uint32_t)x;
  while (e > 0 && k % 10 == 0) k /= 10, e--;
  *coef = k, *exp = e;
  return 1;
}

/* A number or integer with bounds or multipleOf: its lexeme's nonterminal (0: none of them). */
static uint32_t compile_number(jc *c, const cJSON *s, int integer) {
  static const char *const K[4] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
  const cJSON *v[4], *mo = cJSON_GetObjectItemCaseSensitive(s, "multipleOf");
  const cJSON *merged_mo = cJSON_GetObjectItemCaseSensitive(s, "x-ferrite-multiple"); /* an allOf's lcm: [coef, exp] */
  if (merged_mo) mo = merged_mo;
  int bounded = 0;
  for (int i = 0; i < 4; i++) {
    v[i] = cJSON_GetObjectItemCaseSensitive(s, K[i]);
    if (v[i] && !cJSON_IsNumber(v[i])) return fail(c, FER_STATUS_UNSUPPORTED, "a non-numeric bound (draft 4's boolean exclusive bounds): ", K[i]);
    if (v[i]) bounded = 1;
  }
  if (!bounded && !mo) return 0;
  char *re;
  if (integer) {
    re = NULL;
    if (bounded) { /* the tighter of the inclusive and exclusive bounds (a tie: exclusive), then integers */
      int hl = 0, hr = 0;
      int64_t L = 0, R = 0;
      for (int i = 0; i < 4; i++)
        if (v[i] && fabs(v[i]->valuedouble) >= 1e17)
          return fail(c, FER_STATUS_UNSUPPORTED, "an integer bound at or above 10^17: ", K[i]);
      if (v[0] || v[1]) {
        const int use_ex = v[1] && (!v[0] || v[1]->valuedouble >= v[0]->valuedouble);
        const double m = use_ex ? v[1]->valuedouble : v[0]->valuedouble;
        L = use_ex ? (m == floor(m) ? (int64_t)m + 1 : (int64_t)ceil(m)) : (int64_t)ceil(m);
        hl = 1;
      }
      if (v[2] || v[3]) {
        const int use_ex = v[3] && (!v[2] || v[3]->valuedouble <= v[2]->valuedouble);
        const double m = use_ex ? v[3]->valuedouble : v[2]->valuedouble;
        R = use_ex ? (m == floor(m) ? (int64_t)m - 1 : (int64_t)floor(m)) : (int64_t)floor(m);
        hr = 1;
      }
      if (hl && hr && L > R) return fail(c, FER_STATUS_INVALID_ARG, "integer bounds that no integer satisfies", NULL);
      re = int_rx(L, hl, R, hr);
    } else {
      re = dup(JSON_INTEGER);
    }
  } else {
    int hl = 0, hr = 0, li = 1, ri = 1;
    double L = 0, R = 0;
    if (v[0] || v[1]) {
      const int use_ex = v[1] && (!v[0] || v[1]->valuedouble >= v[0]->valuedouble);
      L = use_ex ? v[1]->valuedouble : v[0]->valuedouble, li = !use_ex, hl = 1;
    }
    if (v[2] || v[3]) {
      const int use_ex = v[3] && (!v[2] || v[3]->valuedouble <= v[2]->valuedouble);
      R = use_ex ? v[3]->valuedouble : v[2]->valuedouble, ri = !use_ex, hr = 1;
    }
    re = float_rx(hl, L, hr, R, li, ri);
    if (!re) return fail(c, FER_STATUS_INVALID_ARG, "number bounds that no number satisfies", NULL);
  }
  if (!re) return fail(c, FER_STATUS_OUT_OF_MEMORY, "out of memory", NULL);
  uint32_t root;
  const fer_status st = feri_rx_parse_into(&c->g->rx, re, strlen(re), &root);
  free(re);
  if (st != FER_STATUS_OK) return fail(c, st, "internal: a number range expression did not parse", NULL);
  if (mo) {
    uint32_t coef, exp;
    if (merged_mo)
      coef = (uint32_t)cJSON_GetArrayItem(mo, 0)->valuedouble, exp = (uint32_t)cJSON_GetArrayItem(mo, 1)->valuedouble;
    else if (!decimal_of(c, mo, &coef, &exp)) return UINT32_MAX;
    uint32_t sign;
    if (feri_rx_parse_into(&c->g->rx, "-?", 2, &sign) != FER_STATUS_OK) return cfg_fail(c);
    root = feri_rx_and(&c->g->rx, root, feri_rx_cat(&c->g->rx, sign, feri_rx_multiple(&c->g->rx, coef, exp)));
  }
  const int32_t sym = feri_cfg_lexeme(c->g, root);
  if (sym == 0) return cfg_fail(c);
  const uint32_t nt = nonterm(c);
  rule1(c, nt, sym);
  return c->err ? UINT32_MAX : nt;
}

/* ---- refs ---- */

/* The node a "$ref" names: "#", "#/$defs/x", "#/definitions/x" and other JSON pointers into the
 * document (with ~0 and ~1 escapes). */
static const cJSON *resolve(jc *c, const char *ref) {
  if (ref[0] != '#') return NULL;
  const cJSON *node = c->root;
  const char *p = ref + 1;
  while (*p == '/' && node) {
    p++;
    char seg[256];
    size_t n = 0;
    while (*p && *p != '/' && n + 1 < sizeof seg) {
      if (p[0] == '~' && p[1] == '1') seg[n++] = '/', p += 2;
      else if (p[0] == '~' && p[1] == '0') seg[n++] = '~', p += 2;
      else seg[n++] = *p++;
    }
    seg[n] = 0;
    if (cJSON_IsArray(node)) {
      char *end;
      const long k = strtol(seg, &end, 10);
      node = *end == 0 ? cJSON_GetArrayItem(node, (int)k) : NULL;
    } else {
      node = cJSON_GetObjectItemCaseSensitive(node, seg);
    }
  }
  return *p == 0 ? node : NULL;
}

static uint32_t compile_ref(jc *c, const char *ref) {
  const cJSON *target = resolve(c, ref);
  if (!target) return fail(c, FER_STATUS_INVALID_ARG, "a $ref that leads nowhere: ", ref);
  for (uint32_t i = 0; i < c->n_refs; i++)
    if (c->refs[i].node == target) return c->refs[i].nt;
  if (c->n_refs == c->cap_refs) {
    const uint32_t cap = c->cap_refs ? 2 * c->cap_refs : 16;
    ref_entry *q = realloc(c->refs, sizeof *q * cap);
    if (!q) return fail(c, FER_STATUS_OUT_OF_MEMORY, "out of memory", NULL);
    c->refs = q;
    c->cap_refs = cap;
  }
  const uint32_t nt = nonterm(c); /* made first: a recursive $ref finds it */
  if (nt == UINT32_MAX) return UINT32_MAX;
  c->refs[c->n_refs++] = (ref_entry){target, nt};
  const uint32_t body = compile(c, target);
  if (body == UINT32_MAX) return UINT32_MAX;
  rule1(c, nt, (int32_t)body);
  return c->err ? UINT32_MAX : nt;
}

/* ---- oneOf: anyOf when its options are provably disjoint (llguidance's rule) ------------------- */

enum { K_ANY, K_NULL, K_BOOL, K_NUM, K_STR, K_ARR, K_OBJ };

typedef struct atom {
  int kind;
  const cJSON *konst; /* the constant, or NULL */
  const cJSON *schema;
} atom;

static int kind_of_value(const cJSON *v) {
  return cJSON_IsNull(v) ? K_NULL : cJSON_IsBool(v) ? K_BOOL : cJSON_IsNumber(v) ? K_NUM : cJSON_IsString(v) ? K_STR
         : cJSON_IsArray(v) ? K_ARR : K_OBJ;
}

static int kind_of_type(const char *t) {
  if (!strcmp(t, "integer") || !strcmp(t, "number")) return K_NUM;
  return !strcmp(t, "null") ? K_NULL : !strcmp(t, "boolean") ? K_BOOL : !strcmp(t, "string") ? K_STR
         : !strcmp(t, "array") ? K_ARR : !strcmp(t, "object") ? K_OBJ : K_ANY;
}

/* A schema as the simple schemas it is a union of (at most cap); anything else: one K_ANY atom. */
static uint32_t atoms_of(const cJSON *s, atom *out, uint32_t cap, int depth) {
  if (cJSON_IsFalse(s)) return 0;
  const cJSON *v, *t = cJSON_GetObjectItemCaseSensitive(s, "type");
  uint32_t n = 0;
  if (!cJSON_IsObject(s) || depth > 8 || cJSON_GetObjectItemCaseSensitive(s, "$ref") ||
      cJSON_GetObjectItemCaseSensitive(s, "allOf"))
    goto any;
  if ((v = cJSON_GetObjectItemCaseSensitive(s, "anyOf")) || (v = cJSON_GetObjectItemCaseSensitive(s, "oneOf"))) {
    const cJSON *o;
    cJSON_ArrayForEach(o, v) {
      atom sub[64];
      const uint32_t k = atoms_of(o, sub, 64, depth + 1);
      for (uint32_t i = 0; i < k; i++)
        if (n < cap) out[n++] = sub[i];
        else goto any;
    }
    return n;
  }
  if ((v = cJSON_GetObjectItemCaseSensitive(s, "const"))) {
    out[0] = (atom){kind_of_value(v), v, s};
    return 1;
  }
  if ((v = cJSON_GetObjectItemCaseSensitive(s, "enum"))) {
    const cJSON *e;
    cJSON_ArrayForEach(e, v) {
      if (n == cap) goto any;
      out[n++] = (atom){kind_of_value(e), e, s};
    }
    return n;
  }
  if (cJSON_IsString(t)) {
    out[0] = (atom){kind_of_type(t->valuestring), NULL, s};
    return 1;
  }
  if (cJSON_IsArray(t)) {
    const cJSON *e;
    cJSON_ArrayForEach(e, t) {
      if (n == cap || !cJSON_IsString(e)) goto any;
      out[n++] = (atom){kind_of_type(e->valuestring), NULL, s};
    }
    return n;
  }
any:
  out[0] = (atom){K_ANY, NULL, s};
  return 1;
}

static int disjoint(const cJSON *a, const cJSON *b, int depth);

/* The schema of key k in object schema s (its property, else additionalProperties), or NULL: any. */
static const cJSON *prop_schema(const cJSON *s, const char *k) {
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(s, "properties"), k);
  if (p) return p;
  if (cJSON_GetObjectItemCaseSensitive(s, "patternProperties")) return NULL;
  p = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
  return p && !cJSON_IsTrue(p) ? p : NULL;
}

static int atoms_disjoint(const atom *x, const atom *y, int depth) {
  if (x->kind == K_ANY || y->kind == K_ANY) return 0;
  if (x->kind != y->kind) return 1;
  if (x->kind == K_BOOL) return x->konst && y->konst && cJSON_IsTrue(x->konst) != cJSON_IsTrue(y->konst);
  if (x->kind == K_STR) return x->konst && y->konst && strcmp(x->konst->valuestring, y->konst->valuestring) != 0;
  if (x->kind != K_OBJ || x->konst || y->konst) return 0;
  /* objects: some key that one of them requires has disjoint schemas in the two */
  for (int side = 0; side < 2; side++) {
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(side ? y->schema : x->schema, "required")) {
      if (!cJSON_IsString(r)) continue;
      const cJSON *p1 = prop_schema(x->schema, r->valuestring), *p2 = prop_schema(y->schema, r->valuestring);
      if (p1 && p2 && disjoint(p1, p2, depth + 1)) return 1;
    }
  }
  return 0;
}

static int disjoint(const cJSON *a, const cJSON *b, int depth) {
  atom x[64], y[64];
  const uint32_t nx = atoms_of(a, x, 64, depth), ny = atoms_of(b, y, 64, depth);
  for (uint32_t i = 0; i < nx; i++)
    for (uint32_t j = 0; j < ny; j++)
      if (!atoms_disjoint(&x[i], &y[j], depth)) return 0;
  return 1;
}

/* ---- allOf: the schemas merged into one (llguidance's Schema::intersect, for the keywords that
 * merge by rule) ------------------------------------------------------------------------------- */

static int merge_into(jc *c, cJSON *m, const cJSON *x, int depth);

static int is_min_kw(const char *k) {
  return !strcmp(k, "minLength") || !strcmp(k, "minItems") || !strcmp(k, "minProperties") || !strcmp(k, "minimum") ||
         !strcmp(k, "exclusiveMinimum");
}

static int is_max_kw(const char *k) {
  return !strcmp(k, "maxLength") || !strcmp(k, "maxItems") || !strcmp(k, "maxProperties") || !strcmp(k, "maximum") ||
         !strcmp(k, "exclusiveMaximum");
}

/* m[k] = allOf(m[k], v) (or v when m has no k); false wins. */
static void merge_schema_kw(jc *c, cJSON *m, const char *k, const cJSON *v) {
  cJSON *old = cJSON_GetObjectItemCaseSensitive(m, k);
  if (!old || cJSON_IsTrue(old)) {
    cJSON_DeleteItemFromObjectCaseSensitive(m, k);
    cJSON_AddItemToObject(m, k, cJSON_Duplicate(v, 1));
  } else if (!cJSON_IsFalse(old) && !cJSON_IsTrue(v)) {
    const cJSON *both = cJSON_IsFalse(v) ? v : all_of2(c, old, v);
    if (both) cJSON_ReplaceItemInObjectCaseSensitive(m, k, cJSON_Duplicate(both, 1));
  }
}

static int merge_types(jc *c, cJSON *m, const cJSON *t) {
  static const char *const ALL[7] = {"null", "boolean", "integer", "number", "string", "array", "object"};
  int have[7], want[7] = {0};
  const cJSON *old = cJSON_GetObjectItemCaseSensitive(m, "type"), *e;
  for (int i = 0; i < 7; i++) have[i] = old == NULL;
  cJSON_ArrayForEach(e, old) for (int i = 0; i < 7; i++) have[i] |= !strcmp(e->valuestring, ALL[i]);
  if (cJSON_IsString(t)) {
    for (int i = 0; i < 7; i++) want[i] = !strcmp(t->valuestring, ALL[i]);
  } else if (cJSON_IsArray(t)) {
    cJSON_ArrayForEach(e, t) {
      if (!cJSON_IsString(e))
        return fail(c, FER_STATUS_INVALID_ARG, "type must be a string or array of strings", NULL), 0;
      for (int i = 0; i < 7; i++) want[i] |= !strcmp(e->valuestring, ALL[i]);
    }
  } else {
    return fail(c, FER_STATUS_INVALID_ARG, "type must be a string or array of strings", NULL), 0;
  }
  want[2] |= want[3]; /* a number admits the integers */
  have[2] |= have[3];
  cJSON *arr = cJSON_CreateArray();
  int n = 0;
  for (int i = 0; i < 7; i++)
    if (have[i] && want[i]) cJSON_AddItemToArray(arr, cJSON_CreateString(ALL[i])), n++;
  cJSON_DeleteItemFromObjectCaseSensitive(m, "type");
  cJSON_AddItemToObject(m, "type", arr);
  if (n == 0) return fail(c, FER_STATUS_INVALID_ARG, "allOf of types no value has", NULL), 0;
  return 1;
}

static int merge_into(jc *c, cJSON *m, const cJSON *x, int depth) {
  if (depth > 32)
    return fail(c, FER_STATUS_UNSUPPORTED, "allOf through more than 32 $refs or allOfs (recursion?)", NULL), 0;
  if (cJSON_IsTrue(x)) return 1;
  if (!cJSON_IsObject(x)) return fail(c, FER_STATUS_INVALID_ARG, "allOf of a schema that no value satisfies", NULL), 0;
  const cJSON *k;
  cJSON_ArrayForEach(k, x) {
    const char *key = k->string;
    if (is_annotation(key)) continue;
    if (is_unbuilt(key)) return fail(c, FER_STATUS_UNSUPPORTED, "unsupported keyword ", key), 0;
    if (!strcmp(key, "$ref")) {
      const cJSON *t = cJSON_IsString(k) ? resolve(c, k->valuestring) : NULL;
      if (!t)
        return fail(c, FER_STATUS_INVALID_ARG, "a $ref that leads nowhere: ", cJSON_IsString(k) ? k->valuestring : "?"), 0;
      if (!merge_into(c, m, t, depth + 1)) return 0;
    } else if (!strcmp(key, "allOf")) {
      const cJSON *e;
      if (!cJSON_IsArray(k)) return fail(c, FER_STATUS_INVALID_ARG, "\"allOf\" must be an array", NULL), 0;
      cJSON_ArrayForEach(e, k) if (!merge_into(c, m, e, depth + 1)) return 0;
    } else if (!strcmp(key, "type")) {
      if (!merge_types(c, m, k)) return 0;
    } else if (!strcmp(key, "properties")) {
      cJSON *mp = cJSON_GetObjectItemCaseSensitive(m, "properties");
      const cJSON *xa = cJSON_GetObjectItemCaseSensitive(x, "additionalProperties");
      const cJSON *ma = cJSON_GetObjectItemCaseSensitive(m, "additionalProperties");
      if (!mp) mp = cJSON_AddObjectToObject(m, "properties");
      cJSON *q;
      cJSON_ArrayForEach(q, mp) /* m's own properties meet x's additionalProperties */
        if (!cJSON_GetObjectItemCaseSensitive(k, q->string) && xa && !cJSON_IsTrue(xa))
          merge_schema_kw(c, mp, q->string, xa);
      const cJSON *p;
      cJSON_ArrayForEach(p, k) {
        if (!cJSON_GetObjectItemCaseSensitive(mp, p->string) && ma && !cJSON_IsTrue(ma))
          cJSON_AddItemToObject(mp, p->string, cJSON_Duplicate(ma, 1));
        merge_schema_kw(c, mp, p->string, p);
      }
    } else if (!strcmp(key, "additionalProperties") || !strcmp(key, "items")) {
      if (!strcmp(key, "additionalProperties") && !cJSON_GetObjectItemCaseSensitive(x, "properties")) {
        cJSON *mp = cJSON_GetObjectItemCaseSensitive(m, "properties"), *q;
        cJSON_ArrayForEach(q, mp) if (!cJSON_IsTrue(k)) merge_schema_kw(c, mp, q->string, k);
      }
      merge_schema_kw(c, m, key, k);
    } else if (!strcmp(key, "required")) {
      cJSON *mr = cJSON_GetObjectItemCaseSensitive(m, "required");
      if (!mr) mr = cJSON_AddArrayToObject(m, "required");
      const cJSON *r, *q;
      cJSON_ArrayForEach(r, k) {
        int have = 0;
        cJSON_ArrayForEach(q, mr) {
          have |= cJSON_IsString(r) && cJSON_IsString(q) && !strcmp(q->valuestring, r->valuestring);
        }
        if (!have) cJSON_AddItemToArray(mr, cJSON_Duplicate(r, 1));
      }
    } else if (is_min_kw(key) || is_max_kw(key)) {
      cJSON *old = cJSON_GetObjectItemCaseSensitive(m, key);
      if (!cJSON_IsNumber(k)) return fail(c, FER_STATUS_UNSUPPORTED, "a non-numeric bound in allOf: ", key), 0;
      if (!old) cJSON_AddNumberToObject(m, key, k->valuedouble);
      else if (is_min_kw(key) ? k->valuedouble > old->valuedouble : k->valuedouble < old->valuedouble)
        cJSON_SetNumberValue(old, k->valuedouble);
    } else if (!strcmp(key, "pattern") || !strcmp(key, "format")) {
      const char *ik = key[0] == 'p' ? "x-ferrite-patterns" : "x-ferrite-formats";
      cJSON *arr = cJSON_GetObjectItemCaseSensitive(m, ik);
      if (!arr) arr = cJSON_AddArrayToObject(m, ik);
      cJSON_AddItemToArray(arr, cJSON_Duplicate(k, 1));
    } else if (!strcmp(key, "multipleOf")) {
      uint32_t coef, exp;
      if (!decimal_of(c, k, &coef, &exp)) return 0;
      cJSON *old = cJSON_GetObjectItemCaseSensitive(m, "x-ferrite-multiple");
      if (old) { /* the lcm, as llguidance's Decimal takes it */
        const uint64_t oc = (uint64_t)cJSON_GetArrayItem(old, 0)->valuedouble;
        const uint64_t oe = (uint64_t)cJSON_GetArrayItem(old, 1)->valuedouble;
        uint64_t a = oc, b = coef;
        for (uint64_t i = oe; i < exp; i++) a *= 10;
        for (uint64_t i = exp; i < oe; i++) b *= 10;
        uint64_t g = a, h = b;
        while (h) { const uint64_t t = g % h; g = h, h = t; }
        uint64_t l = a / g * b, e2 = oe > exp ? oe : exp;
        while (e2 > 0 && l % 10 == 0) l /= 10, e2--;
        if (l > UINT32_MAX)
          return fail(c, FER_STATUS_UNSUPPORTED, "multipleOf in allOf whose lcm has too many digits", NULL), 0;
        coef = (uint32_t)l, exp = (uint32_t)e2;
        cJSON_DeleteItemFromObjectCaseSensitive(m, "x-ferrite-multiple");
      }
      cJSON *arr = cJSON_AddArrayToObject(m, "x-ferrite-multiple");
      cJSON_AddItemToArray(arr, cJSON_CreateNumber(coef)), cJSON_AddItemToArray(arr, cJSON_CreateNumber(exp));
    } else if (cJSON_GetObjectItemCaseSensitive(m, key)) {
      return fail(c, FER_STATUS_UNSUPPORTED, "allOf with this keyword in more than one of its schemas: ", key), 0;
    } else {
      cJSON_AddItemToObject(m, key, cJSON_Duplicate(k, 1));
    }
    if (c->err) return 0;
  }
  return 1;
}

/* ---- one schema ---- */

static uint32_t union_of(jc *c, const uint32_t *alts, uint32_t n) {
  if (n == 1) return alts[0];
  const uint32_t nt = nonterm(c);
  for (uint32_t i = 0; i < n && !c->err; i++) rule1(c, nt, (int32_t)alts[i]);
  return c->err ? UINT32_MAX : nt;
}

static uint32_t compile(jc *c, const cJSON *s) {
  if (c->err) return UINT32_MAX;
  if (++c->depth > MAX_DEPTH) return fail(c, FER_STATUS_INVALID_ARG, "schema nested deeper than 128", NULL);
  uint32_t result = UINT32_MAX;
  if (cJSON_IsTrue(s) || (cJSON_IsObject(s) && s->child == NULL)) {
    result = any_value(c);
  } else if (cJSON_IsFalse(s)) {
    result = fail(c, FER_STATUS_INVALID_ARG, "schema false: no value satisfies it", NULL);
  } else if (!cJSON_IsObject(s)) {
    result = fail(c, FER_STATUS_INVALID_ARG, "a schema must be an object or a boolean", NULL);
  } else {
    const cJSON *k;
    int constrained = 0;
    cJSON_ArrayForEach(k, s) {
      if (is_unbuilt(k->string)) {
        result = fail(c, FER_STATUS_UNSUPPORTED, "unsupported keyword ", k->string);
        break;
      }
      if (!is_annotation(k->string)) constrained++;
    }
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    const cJSON *any_of = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
    const cJSON *one_of = cJSON_GetObjectItemCaseSensitive(s, "oneOf");
    const cJSON *all_of = cJSON_GetObjectItemCaseSensitive(s, "allOf");
    const char *of_name = any_of ? "anyOf" : "oneOf";
    if (!c->err && all_of) {
      if (!cJSON_IsArray(all_of) || cJSON_GetArraySize(all_of) == 0) {
        result = fail(c, FER_STATUS_INVALID_ARG, "\"allOf\" must be a non-empty array", NULL);
      } else {
        cJSON *m = own(c, cJSON_CreateObject());
        const size_t at = path_push(c, "allOf");
        const int ok = m && merge_into(c, m, s, 0);
        path_pop(c, at);
        if (ok) result = compile(c, m);
      }
      c->depth--;
      return c->err ? UINT32_MAX : result;
    }
    if (!c->err && one_of && !any_of) {
      const size_t at = path_push(c, "oneOf");
      if (!cJSON_IsArray(one_of) || cJSON_GetArraySize(one_of) == 0) {
        fail(c, FER_STATUS_INVALID_ARG, "\"oneOf\" must be a non-empty array", NULL);
      } else {
        const cJSON *x, *y;
        cJSON_ArrayForEach(x, one_of) for (y = x->next; y && !c->err; y = y->next) if (!disjoint(x, y, 0))
          fail(c, FER_STATUS_UNSUPPORTED, "oneOf whose options are not provably disjoint (llguidance refuses it too)",
               NULL);
      }
      path_pop(c, at);
      any_of = one_of; /* disjoint options: exactly one matches when any does */
    } else if (!c->err && one_of) {
      result = fail(c, FER_STATUS_UNSUPPORTED, "oneOf beside anyOf", NULL);
    }
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
    const cJSON *cn = cJSON_GetObjectItemCaseSensitive(s, "const");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (c->err) {
      /* refused above */
    } else if (ref) {
      if (!cJSON_IsString(ref)) result = fail(c, FER_STATUS_INVALID_ARG, "\"$ref\" must be a string", NULL);
      else if (constrained > 1) result = fail(c, FER_STATUS_UNSUPPORTED, "$ref with sibling keywords", NULL);
      else result = compile_ref(c, ref->valuestring);
    } else if (any_of) {
      if (!cJSON_IsArray(any_of) || cJSON_GetArraySize(any_of) == 0)
        result = fail(c, FER_STATUS_INVALID_ARG, "\"anyOf\" must be a non-empty array", NULL);
      else if (constrained > 1)
        result = fail(c, FER_STATUS_UNSUPPORTED,
                      any_of == one_of ? "oneOf with sibling keywords" : "anyOf with sibling keywords", NULL);
      else {
        const uint32_t n = (uint32_t)cJSON_GetArraySize(any_of);
        uint32_t *alts = malloc(sizeof *alts * n), i = 0;
        const cJSON *a;
        const size_t at = path_push(c, of_name);
        cJSON_ArrayForEach(a, any_of) {
          char seg[32];
          snprintf(seg, sizeof seg, "%u", i);
          const size_t at2 = path_push(c, seg);
          alts[i++] = alts ? compile(c, a) : UINT32_MAX;
          path_pop(c, at2);
          if (c->err) break;
        }
        path_pop(c, at);
        result = c->err || !alts ? UINT32_MAX : union_of(c, alts, n);
        free(alts);
      }
    } else if (en || cn) {
      if (en && (!cJSON_IsArray(en) || cJSON_GetArraySize(en) == 0)) {
        result = fail(c, FER_STATUS_INVALID_ARG, "\"enum\" must be a non-empty array", NULL);
      } else if (constrained > 1 && !(constrained == 2 && type)) {
        result = fail(c, FER_STATUS_UNSUPPORTED, "enum or const with other constraints", NULL);
      } else {
        const uint32_t n = en ? (uint32_t)cJSON_GetArraySize(en) : 1;
        uint32_t *alts = malloc(sizeof *alts * n), i = 0;
        const cJSON *a;
        if (alts && en) {
          cJSON_ArrayForEach(a, en) {
            alts[i++] = compile_const(c, a);
            if (c->err) break;
          }
        } else if (alts) {
          alts[0] = compile_const(c, cn);
        }
        result = c->err || !alts ? UINT32_MAX : union_of(c, alts, n);
        free(alts);
      }
    } else {
      /* the types: those listed, or all six (each with the keywords that apply to it) */
      static const char *const ALL[6] = {"null", "boolean", "integer", "number", "string", "array"};
      const char *types[8];
      uint32_t nt = 0;
      int has_object = 0;
      if (type == NULL) {
        for (int i = 0; i < 6; i++) types[nt++] = ALL[i];
        has_object = 1;
      } else if (cJSON_IsString(type)) {
        types[nt++] = type->valuestring;
      } else if (cJSON_IsArray(type)) {
        const cJSON *t;
        cJSON_ArrayForEach(t, type) {
          if (!cJSON_IsString(t) || nt >= 7) {
            result = fail(c, FER_STATUS_INVALID_ARG, "type must be a string or array of strings", NULL);
            break;
          }
          types[nt++] = t->valuestring;
        }
      } else {
        result = fail(c, FER_STATUS_INVALID_ARG, "type must be a string or array of strings", NULL);
      }
      uint32_t alts[8], na = 0;
      /* integer and number together: number covers integer */
      int has_number = 0;
      for (uint32_t i = 0; i < nt; i++) has_number |= strcmp(types[i], "number") == 0;
      for (uint32_t i = 0; i < nt && !c->err; i++) {
        const char *t = types[i];
        uint32_t a = UINT32_MAX;
        if (strcmp(t, "object") == 0) {
          has_object = 1;
          continue;
        }
        if (strcmp(t, "null") == 0) {
          const int32_t sym = lx(c, &c->lx_null, "null", 1);
          a = nonterm(c);
          if (!c->err) rule1(c, a, sym);
        } else if (strcmp(t, "boolean") == 0) {
          const int32_t sym = lx(c, &c->lx_bool, "true|false", 0);
          a = nonterm(c);
          if (!c->err) rule1(c, a, sym);
        } else if (strcmp(t, "integer") == 0) {
          if (has_number) continue;
          a = compile_number(c, s, 1);
          if (a == 0) {
            const int32_t sym = lx(c, &c->lx_integer, JSON_INTEGER, 0);
            a = nonterm(c);
            if (!c->err) rule1(c, a, sym);
          }
        } else if (strcmp(t, "number") == 0) {
          a = compile_number(c, s, 0);
          if (a != 0) {
            if (a != UINT32_MAX) alts[na++] = a;
            continue;
          }
          const int32_t sym = lx(c, &c->lx_number, JSON_NUMBER, 0);
          a = nonterm(c);
          if (!c->err) rule1(c, a, sym);
        } else if (strcmp(t, "string") == 0) {
          a = compile_string(c, s);
        } else if (strcmp(t, "array") == 0) {
          a = compile_array(c, s);
        } else {
          a = fail(c, FER_STATUS_INVALID_ARG, "invalid type: ", t);
        }
        if (a != UINT32_MAX) alts[na++] = a;
      }
      if (!c->err && has_object) {
        const uint32_t a = compile_object(c, s);
        if (a != UINT32_MAX) alts[na++] = a;
      }
      if (!c->err && na == 0) result = fail(c, FER_STATUS_INVALID_ARG, "an empty type list: no value satisfies it", NULL);
      else if (!c->err) result = union_of(c, alts, na);
    }
  }
  c->depth--;
  return c->err ? UINT32_MAX : result;
}

/* ---- options and the entry ---- */

static fer_status read_options(const cJSON *xg, feri_json_options *o) {
  const cJSON *k;
  cJSON_ArrayForEach(k, xg) {
    if (strcmp(k->string, "whitespace_flexible") == 0 && cJSON_IsBool(k)) o->whitespace_flexible = cJSON_IsTrue(k);
    else if (strcmp(k->string, "whitespace_pattern") == 0 && cJSON_IsString(k)) o->whitespace_pattern = k->valuestring;
    else if (strcmp(k->string, "item_separator") == 0 && cJSON_IsString(k)) o->item_separator = k->valuestring;
    else if (strcmp(k->string, "key_separator") == 0 && cJSON_IsString(k)) o->key_separator = k->valuestring;
    else if (strcmp(k->string, "whitespace_pattern") == 0 && cJSON_IsNull(k)) o->whitespace_pattern = NULL;
    else return feri_fail(FER_STATUS_UNSUPPORTED, "json schema: x-guidance option \"%s\" is not supported", k->string);
  }
  return FER_STATUS_OK;
}

fer_status feri_grammar_from_json_schema(const char *schema, size_t len, const feri_json_options *opt,
                                         feri_grammar **out) {
  if (out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "json schema: out is NULL");
  *out = NULL;
  if (schema == NULL) return feri_fail(FER_STATUS_NULL_ARG, "json schema: schema is NULL");
  const char *end = NULL;
  cJSON *doc = cJSON_ParseWithLengthOpts(schema, len, &end, 0);
  if (!doc) {
    const size_t at = end && end >= schema && end <= schema + len ? (size_t)(end - schema) : 0;
    return feri_fail(FER_STATUS_BAD_FORMAT, "json schema: not JSON (at byte %zu)", at);
  }
  feri_json_options o = opt ? *opt : feri_json_defaults();
  fer_status st = FER_STATUS_OK;
  const cJSON *xg = cJSON_GetObjectItemCaseSensitive(doc, "x-guidance");
  if (xg) {
    st = cJSON_IsObject(xg) ? read_options(xg, &o) : feri_fail(FER_STATUS_INVALID_ARG, "json schema: x-guidance must be an object");
    cJSON_DetachItemViaPointer(doc, (cJSON *)xg);
    if (st == FER_STATUS_OK) {
      /* the options point into xg: keep it alive until the end */
    }
  }
  feri_cfg g;
  if (st == FER_STATUS_OK) st = feri_cfg_init(&g);
  if (st != FER_STATUS_OK) {
    cJSON_Delete((cJSON *)xg);
    cJSON_Delete(doc);
    return st;
  }
  jc c = {0};
  c.g = &g;
  c.root = doc;
  c.lx_comma = lexeme(&c, o.item_separator ? o.item_separator : ",");
  c.lx_colon = lexeme(&c, o.key_separator ? o.key_separator : ":");
  if (!c.err && o.whitespace_flexible) {
    const int32_t ws = lexeme(&c, o.whitespace_pattern ? o.whitespace_pattern : "[\\x20\\x0A\\x0D\\x09]+");
    if (ws) feri_cfg_set_skip(&g, ws);
  }
  if (c.bad_regex) /* an option's expression did not parse */
    c.err = feri_fail(FER_STATUS_INVALID_ARG, "json schema: a separator or whitespace pattern is not a valid expression");
  const uint32_t start = c.err ? UINT32_MAX : compile(&c, doc);
  st = c.err;
  if (st == FER_STATUS_OK && start == UINT32_MAX) st = feri_fail(FER_STATUS_INVALID_ARG, "json schema: no grammar");
  if (st == FER_STATUS_OK) st = feri_cfg_finish(&g, start);
  free(c.refs);
  for (uint32_t i = 0; i < c.n_owned; i++) cJSON_Delete(c.owned[i]);
  free(c.owned);
  cJSON_Delete((cJSON *)xg);
  cJSON_Delete(doc);
  if (st != FER_STATUS_OK) {
    feri_cfg_free(&g);
    return st;
  }
  return feri_grammar_from_cfg(&g, out);
}
