/* cfg.c: building, checking and indexing the grammars of cfg.h. */
#include "grammar/cfg.h"

#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "grammar/grow.h"


static void fail(feri_cfg *g, fer_status st, const char *what) {
  if (!g->err) g->err = feri_fail(st, "grammar: %s", what);
}

void feri_cfg_free(feri_cfg *g) {
  if (!g) return;
  feri_rx_free(&g->rx);
  free(g->lexeme_root), free(g->ex_first), free(g->ex_count), free(g->ex_blob), free(g->ex_off), free(g->ex_len);
  free(g->rule_lhs), free(g->rule_off), free(g->rule_len), free(g->syms);
  free(g->nt_rule_off), free(g->nt_rules), free(g->nullable);
  memset(g, 0, sizeof *g);
}

fer_status feri_cfg_init(feri_cfg *g) {
  memset(g, 0, sizeof *g);
  g->skip = -1;
  g->n_nonterms = 1; /* 0: the augmented start */
  const int32_t placeholder = 0;
  feri_cfg_rule(g, 0, &placeholder, 1); /* rule 0: start -> S, S set by feri_cfg_finish */
  if (g->err) {
    const fer_status st = g->err;
    feri_cfg_free(g);
    return st;
  }
  return FER_STATUS_OK;
}

uint32_t feri_cfg_nonterm(feri_cfg *g) {
  if (g->err) return UINT32_MAX;
  if (g->n_nonterms >= FERI_CFG_MAX_RULES) {
    fail(g, FER_STATUS_INVALID_ARG, "too many nonterminals");
    return UINT32_MAX;
  }
  return g->n_nonterms++;
}

int32_t feri_cfg_lexeme_except(feri_cfg *g, uint32_t root, const uint8_t *const *words, const uint32_t *lens,
                               uint32_t n) {
  if (g->err || root == UINT32_MAX) {
    if (!g->err) g->err = g->rx.err ? g->rx.err : feri_fail(FER_STATUS_OUT_OF_MEMORY, "grammar: a lexeme");
    return 0;
  }
  const uint32_t cap0 = g->cap_lexemes;
  if (!feri_grow((void **)&g->lexeme_root, &g->cap_lexemes, g->n_lexemes + 1, sizeof *g->lexeme_root)) {
    fail(g, FER_STATUS_OUT_OF_MEMORY, "lexemes");
    return 0;
  }
  if (g->cap_lexemes != cap0 || !g->ex_first) { /* the exclusion index follows the lexemes' capacity */
    uint32_t *f = realloc(g->ex_first, sizeof *f * g->cap_lexemes), *c = f ? realloc(g->ex_count, sizeof *c * g->cap_lexemes) : NULL;
    if (f) g->ex_first = f;
    if (c) g->ex_count = c;
    if (!f || !c) {
      fail(g, FER_STATUS_OUT_OF_MEMORY, "lexemes");
      return 0;
    }
  }
  size_t bytes = 0;
  for (uint32_t i = 0; i < n; i++) bytes += lens[i];
  if ((size_t)g->n_ex_blob + bytes > UINT32_MAX / 2 ||
      !feri_grow((void **)&g->ex_blob, &g->cap_ex_blob, g->n_ex_blob + (uint32_t)bytes, 1) ||
      !feri_grow((void **)&g->ex_off, &g->cap_ex_words, g->n_ex_words + n, sizeof *g->ex_off)) {
    fail(g, FER_STATUS_OUT_OF_MEMORY, "excluded words");
    return 0;
  }
  uint32_t *len = realloc(g->ex_len, sizeof *len * (g->cap_ex_words ? g->cap_ex_words : 1));
  if (!len) {
    fail(g, FER_STATUS_OUT_OF_MEMORY, "excluded words");
    return 0;
  }
  g->ex_len = len;
  g->ex_first[g->n_lexemes] = g->n_ex_words;
  g->ex_count[g->n_lexemes] = n;
  for (uint32_t i = 0; i < n; i++) {
    g->ex_off[g->n_ex_words] = g->n_ex_blob;
    g->ex_len[g->n_ex_words++] = lens[i];
    if (lens[i]) memcpy(g->ex_blob + g->n_ex_blob, words[i], lens[i]);
    g->n_ex_blob += lens[i];
  }
  g->lexeme_root[g->n_lexemes] = root;
  return feri_cfg_lexeme_sym(g->n_lexemes++);
}

int32_t feri_cfg_lexeme(feri_cfg *g, uint32_t root) { return feri_cfg_lexeme_except(g, root, NULL, NULL, 0); }

void feri_cfg_set_skip(feri_cfg *g, int32_t sym) {
  if (sym < 0 && feri_cfg_lexeme_of(sym) < g->n_lexemes) g->skip = (int32_t)feri_cfg_lexeme_of(sym);
}

void feri_cfg_rule(feri_cfg *g, uint32_t lhs, const int32_t *syms, uint32_t n) {
  if (g->err) return;
  if (g->n_rules >= FERI_CFG_MAX_RULES || (size_t)g->n_syms + n > FERI_CFG_MAX_SYMS) {
    fail(g, FER_STATUS_INVALID_ARG, "more rules or symbols than the grammar bound");
    return;
  }
  const uint32_t had = g->cap_rules;
  if (!feri_grow((void **)&g->rule_lhs, &g->cap_rules, g->n_rules + 1, sizeof *g->rule_lhs) ||
      !feri_grow((void **)&g->syms, &g->cap_syms, g->n_syms + n, sizeof *g->syms)) {
    fail(g, FER_STATUS_OUT_OF_MEMORY, "rules");
    return;
  }
  /* rule_off and rule_len follow rule_lhs's capacity (grown with it only: a realloc per rule is a
   * copy per rule under the sanitizer's allocator) */
  uint32_t *off = g->rule_off, *len = g->rule_len;
  if (g->cap_rules != had || !off) {
    off = realloc(g->rule_off, sizeof *off * g->cap_rules);
    if (off) g->rule_off = off;
    len = off ? realloc(g->rule_len, sizeof *len * g->cap_rules) : NULL;
    if (len) g->rule_len = len;
  }
  if (!off || !len) {
    fail(g, FER_STATUS_OUT_OF_MEMORY, "rules");
    return;
  }
  g->rule_lhs[g->n_rules] = lhs;
  g->rule_off[g->n_rules] = g->n_syms;
  g->rule_len[g->n_rules] = n;
  if (n) memcpy(g->syms + g->n_syms, syms, sizeof *syms * n);
  g->n_syms += n;
  g->n_rules++;
}

/* 1 where rx node x matches the empty string (nullable) or any string at all (productive). */
static int rx_prop(const feri_rx *rx, uint32_t x, int nullable, int depth) {
  if (depth > 10000) return 0;
  const feri_rx_node *n = &rx->nodes[x];
  switch (n->kind) {
    case FERI_RX_EMPTY: return 1;
    case FERI_RX_NONE: return 0;
    case FERI_RX_SET: return !nullable;
    case FERI_RX_CAT: return rx_prop(rx, n->a, nullable, depth + 1) && rx_prop(rx, n->b, nullable, depth + 1);
    case FERI_RX_ALT: return rx_prop(rx, n->a, nullable, depth + 1) || rx_prop(rx, n->b, nullable, depth + 1);
    /* an intersection's emptiness needs its automaton: here both sides (an upper bound) */
    case FERI_RX_AND: return rx_prop(rx, n->a, nullable, depth + 1) && rx_prop(rx, n->b, nullable, depth + 1);
    case FERI_RX_ANDNOT: return rx_prop(rx, n->a, nullable, depth + 1);
    case FERI_RX_MULTIPLE: return !nullable;
    default: return n->min == 0 || rx_prop(rx, n->a, nullable, depth + 1);
  }
}

int feri_rx_nullable(const feri_rx *rx, uint32_t x) { return rx_prop(rx, x, 1, 0); }

fer_status feri_cfg_finish(feri_cfg *g, uint32_t start) {
  if (g->err) return g->err;
  if (start >= g->n_nonterms || start == 0) return feri_fail(FER_STATUS_INVALID_ARG, "grammar: start symbol %u", start);
  g->syms[g->rule_off[0]] = (int32_t)start;
  for (uint32_t s = 0; s < g->n_syms; s++)
    if ((g->syms[s] >= 0 && (uint32_t)g->syms[s] >= g->n_nonterms) ||
        (g->syms[s] < 0 && feri_cfg_lexeme_of(g->syms[s]) >= g->n_lexemes))
      return feri_fail(FER_STATUS_INVALID_ARG, "grammar: a rule names symbol %d, which does not exist", g->syms[s]);
  const uint32_t N = g->n_nonterms;
  g->nt_rule_off = calloc((size_t)N + 1, sizeof *g->nt_rule_off);
  g->nt_rules = malloc(sizeof *g->nt_rules * (g->n_rules ? g->n_rules : 1));
  g->nullable = calloc(N, 1);
  uint8_t *productive = calloc(N, 1), *lex_ok = calloc(g->n_lexemes ? g->n_lexemes : 1, 1);
  uint32_t *fill = malloc(sizeof *fill * ((size_t)N + 1));
  if (!g->nt_rule_off || !g->nt_rules || !g->nullable || !productive || !lex_ok || !fill) {
    free(productive), free(lex_ok), free(fill);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "grammar: index of %u nonterminals", N);
  }
  for (uint32_t r = 0; r < g->n_rules; r++) g->nt_rule_off[g->rule_lhs[r] + 1]++;
  for (uint32_t a = 0; a < N; a++) g->nt_rule_off[a + 1] += g->nt_rule_off[a];
  memcpy(fill, g->nt_rule_off, sizeof *fill * ((size_t)N + 1));
  for (uint32_t r = 0; r < g->n_rules; r++) g->nt_rules[fill[g->rule_lhs[r]]++] = r;
  for (uint32_t k = 0; k < g->n_lexemes; k++) lex_ok[k] = (uint8_t)rx_prop(&g->rx, g->lexeme_root[k], 0, 0);
  /* nullable and productive nonterminals: fixed points over the rules */
  for (int changed = 1; changed;) {
    changed = 0;
    for (uint32_t r = 0; r < g->n_rules; r++) {
      const uint32_t a = g->rule_lhs[r];
      int nul = 1, prod = 1;
      for (uint32_t i = 0; i < g->rule_len[r]; i++) {
        const int32_t s = g->syms[g->rule_off[r] + i];
        if (s < 0) {
          nul = 0;
          prod &= lex_ok[feri_cfg_lexeme_of(s)];
        } else {
          nul &= g->nullable[s];
          prod &= productive[s];
        }
      }
      if (nul && !g->nullable[a]) g->nullable[a] = 1, changed = 1;
      if (prod && !productive[a]) productive[a] = 1, changed = 1;
    }
  }
  const int ok = productive[0];
  free(productive), free(lex_ok), free(fill);
  if (!ok) return feri_fail(FER_STATUS_INVALID_ARG, "grammar: the start symbol derives no string (an empty language)");
  return FER_STATUS_OK;
}
