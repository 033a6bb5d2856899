/* json_schema.c: JSON Schema into a grammar over lexemes (json_schema.h). Each schema becomes a
 * nonterminal; the lexemes of JSON's tokens are made once and shared; object members and array
 * items become sequences in which each present element after the first follows a separator. */
#include "grammar/json_schema.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "grammar/cfg.h"

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
                                  "$recursiveRef", "$recursiveAnchor", "pattern", "format", "multipleOf", "oneOf", "allOf",
                                  "patternProperties", "minProperties", "maxProperties", "additionalItems", NULL};
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
  } else {
    return fail(c, FER_STATUS_UNSUPPORTED, "an object or array as const or enum value is not supported yet", NULL);
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

static uint32_t compile_object(jc *c, const cJSON *s) {
  const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
  const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
  const cJSON *addl = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
  if (props && !cJSON_IsObject(props)) return fail(c, FER_STATUS_INVALID_ARG, "\"properties\" must be an object", NULL);
  if (req && !cJSON_IsArray(req)) return fail(c, FER_STATUS_INVALID_ARG, "\"required\" must be an array", NULL);
  const uint32_t np = (uint32_t)cJSON_GetArraySize(props), nr = (uint32_t)cJSON_GetArraySize(req);
  obj_ctx o = {calloc((size_t)np + nr + 1, sizeof(cJSON *)), calloc((size_t)np + nr + 1, sizeof(cJSON *)), 0};
  uint8_t *required = calloc((size_t)np + nr + 1, 1);
  if (!o.keys || !o.schemas || !required) {
    free(o.keys), free(o.schemas), free(required);
    return fail(c, FER_STATUS_OUT_OF_MEMORY, "out of memory", NULL);
  }
  const cJSON *it;
  cJSON_ArrayForEach(it, props) o.keys[o.n] = it, o.schemas[o.n++] = it;
  cJSON_ArrayForEach(it, req) {
    if (!cJSON_IsString(it)) {
      free(o.keys), free(o.schemas), free(required);
      return fail(c, FER_STATUS_INVALID_ARG, "\"required\" must list strings", NULL);
    }
    uint32_t k = 0;
    while (k < o.n && strcmp(o.keys[k]->string ? o.keys[k]->string : o.keys[k]->valuestring, it->valuestring) != 0) k++;
    if (k == o.n) { /* a required key without a property: its value from additionalProperties */
      if (cJSON_IsFalse(addl)) {
        free(o.keys), free(o.schemas), free(required);
        return fail(c, FER_STATUS_INVALID_ARG, "a required property that additionalProperties false forbids: ", it->valuestring);
      }
      o.keys[o.n] = it;
      o.schemas[o.n++] = addl && cJSON_IsObject(addl) ? addl : NULL;
    }
    required[k] = 1;
  }
  /* the required members first in the order of the sequence: a sequence wants required < req,
   * so members are ordered as written and each one's optionality decided inside */
  uint32_t result = UINT32_MAX;
  const int extras = !cJSON_IsFalse(addl);
  uint32_t extra = 0;
  if (extras) { /* a free member: a key other than the named ones, then its value */
    const uint8_t **words = calloc((size_t)o.n + 1, sizeof *words);
    uint32_t *lens = calloc((size_t)o.n + 1, sizeof *lens);
    char *keybuf = malloc((size_t)(o.n + 1) * 1100);
    int32_t k = 0;
    if (words && lens && keybuf) {
      for (uint32_t i = 0; i < o.n; i++) {
        const char *name = o.keys[i]->string ? o.keys[i]->string : o.keys[i]->valuestring;
        lens[i] = (uint32_t)serde_key(name, keybuf + (size_t)i * 1100, 1100);
        words[i] = (const uint8_t *)keybuf + (size_t)i * 1100;
      }
      if (o.n == 0) {
        k = lx(c, &c->lx_string, "\"" JSON_CHAR "*\"", 0);
      } else {
        uint32_t root;
        const char *re = "\"" JSON_GENERAL_CHAR "*\"";
        if (feri_rx_parse_into(&c->g->rx, re, strlen(re), &root) == FER_STATUS_OK)
          k = feri_cfg_lexeme_except(c->g, root, words, lens, o.n);
      }
    }
    free(words), free(lens), free(keybuf);
    if (k == 0) {
      free(o.keys), free(o.schemas), free(required);
      return cfg_fail(c);
    }
    const size_t at = path_push(c, "additionalProperties");
    const uint32_t v = addl && cJSON_IsObject(addl) ? compile(c, addl) : any_value(c);
    path_pop(c, at);
    if (v != UINT32_MAX) {
      extra = nonterm(c);
      const int32_t r[] = {k, c->lx_colon, (int32_t)v};
      rule(c, extra, r, 3);
    }
  }
  if (!c->err) {
    /* sequence() takes the required elements as a prefix count; here any may be optional, so
     * members are built one by one with their own optionality */
    uint32_t next0 = nonterm(c), next1 = nonterm(c);
    if (!c->err) {
      if (extras) {
        const int32_t t0[] = {(int32_t)extra, (int32_t)next1}, t1[] = {c->lx_comma, (int32_t)extra, (int32_t)next1};
        rule(c, next0, NULL, 0), rule(c, next0, t0, 2), rule(c, next1, NULL, 0), rule(c, next1, t1, 3);
      } else {
        rule(c, next0, NULL, 0), rule(c, next1, NULL, 0);
      }
    }
    for (uint32_t i = o.n; i-- > 0 && !c->err;) {
      const uint32_t e = member(c, &o, i);
      if (e == UINT32_MAX) break;
      const uint32_t r0 = nonterm(c), r1 = nonterm(c);
      const int32_t f0[] = {(int32_t)e, (int32_t)next1}, f1[] = {c->lx_comma, (int32_t)e, (int32_t)next1};
      rule(c, r0, f0, 2), rule(c, r1, f1, 3);
      if (!required[i]) rule1(c, r0, (int32_t)next0), rule1(c, r1, (int32_t)next1);
      next0 = r0, next1 = r1;
    }
    if (!c->err) {
      result = nonterm(c);
      const int32_t r[] = {LX_LBRACE(c), (int32_t)next0, LX_RBRACE(c)};
      rule(c, result, r, 3);
    }
  }
  free(o.keys), free(o.schemas), free(required);
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

static uint32_t compile_string(jc *c, const cJSON *s) {
  const int64_t min = count_kw(c, s, "minLength", 0), max = count_kw(c, s, "maxLength", -2);
  if (min < 0 || max == -1) return UINT32_MAX;
  int32_t sym;
  if (min == 0 && max == -2) {
    sym = lx(c, &c->lx_string, "\"" JSON_CHAR "*\"", 0);
  } else {
    if (max != -2 && max < min) return fail(c, FER_STATUS_INVALID_ARG, "maxLength below minLength: no string satisfies it", NULL);
    if (min > 10000 || max > 10000) return fail(c, FER_STATUS_UNSUPPORTED, "a string length bound above 10000", NULL);
    char re[256];
    if (max == -2) snprintf(re, sizeof re, "\"" JSON_CHAR "{%lld,}\"", (long long)min);
    else snprintf(re, sizeof re, "\"" JSON_CHAR "{%lld,%lld}\"", (long long)min, (long long)max);
    sym = lexeme(c, re);
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

/* An integer with "minimum" / "maximum" / "exclusiveMinimum" / "exclusiveMaximum": its lexeme's
 * nonterminal, or 0 (with *bounded 0) when the schema bounds nothing. */
static uint32_t compile_integer_range(jc *c, const cJSON *s, int *bounded) {
  static const char *const K[4] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
  const cJSON *v[4];
  *bounded = 0;
  for (int i = 0; i < 4; i++) {
    v[i] = cJSON_GetObjectItemCaseSensitive(s, K[i]);
    if (v[i] && !cJSON_IsNumber(v[i])) return fail(c, FER_STATUS_UNSUPPORTED, "a non-numeric bound (draft 4's boolean exclusive bounds): ", K[i]);
    if (v[i]) *bounded = 1;
    if (v[i] && fabs(v[i]->valuedouble) >= 1e17) return fail(c, FER_STATUS_UNSUPPORTED, "an integer bound at or above 10^17: ", K[i]);
  }
  if (!*bounded) return 0;
  /* the tighter of the inclusive and exclusive bounds (a tie: exclusive), then integers */
  int hl = 0, hr = 0;
  int64_t L = 0, R = 0;
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
  char *re = int_rx(L, hl, R, hr);
  if (!re) return fail(c, FER_STATUS_OUT_OF_MEMORY, "out of memory", NULL);
  const int32_t sym = lexeme(c, re);
  free(re);
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
        result = fail(c, FER_STATUS_UNSUPPORTED, "anyOf with sibling keywords", NULL);
      else {
        const uint32_t n = (uint32_t)cJSON_GetArraySize(any_of);
        uint32_t *alts = malloc(sizeof *alts * n), i = 0;
        const cJSON *a;
        const size_t at = path_push(c, "anyOf");
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
          int bounded;
          a = compile_integer_range(c, s, &bounded);
          if (!bounded && !c->err) {
            const int32_t sym = lx(c, &c->lx_integer, JSON_INTEGER, 0);
            a = nonterm(c);
            if (!c->err) rule1(c, a, sym);
          }
        } else if (strcmp(t, "number") == 0) {
          if (cJSON_GetObjectItemCaseSensitive(s, "minimum") || cJSON_GetObjectItemCaseSensitive(s, "maximum") ||
              cJSON_GetObjectItemCaseSensitive(s, "exclusiveMinimum") || cJSON_GetObjectItemCaseSensitive(s, "exclusiveMaximum")) {
            a = fail(c, FER_STATUS_UNSUPPORTED, "bounds on a number that may have a fraction are not supported yet", NULL);
            break;
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
  cJSON_Delete((cJSON *)xg);
  cJSON_Delete(doc);
  if (st != FER_STATUS_OK) {
    feri_cfg_free(&g);
    return st;
  }
  return feri_grammar_from_cfg(&g, out);
}
