/* matcher.c: the regular-expression matcher of matcher.h: DFA states per trie depth for the mask,
 * a state per accepted token for rollback. */
#include "grammar/matcher.h"

#include <stdlib.h>
#include <string.h>

#include "core/status.h"

void feri_grammar_free(feri_grammar *g) {
  if (!g) return;
  feri_nfa_free(&g->nfa);
  feri_rx_free(&g->rx);
  free(g);
}

fer_status feri_grammar_from_regex(const char *src, size_t len, feri_grammar **out) {
  if (out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "grammar: out is NULL");
  *out = NULL;
  feri_grammar *g = calloc(1, sizeof *g);
  if (!g) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "grammar: %zu bytes", sizeof *g);
  fer_status st = feri_rx_parse(src, len, &g->rx);
  if (st == FER_STATUS_OK) st = feri_nfa_build(&g->rx, &g->rx.root, 1, &g->nfa);
  if (st == FER_STATUS_OK && !g->nfa.live[g->nfa.start[0]])
    st = feri_fail(FER_STATUS_INVALID_ARG, "grammar: the expression matches no string");
  if (st != FER_STATUS_OK) {
    feri_grammar_free(g);
    return st;
  }
  *out = g;
  return FER_STATUS_OK;
}

void feri_matcher_free(feri_matcher *m) {
  if (!m) return;
  feri_dfa_free(&m->dfa);
  free(m->hist);
  free(m->walk);
  free(m);
}

fer_status feri_matcher_new(const feri_grammar *g, const feri_toktrie *trie, int32_t eos, feri_matcher **out) {
  if (out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "matcher: out is NULL");
  *out = NULL;
  if (g == NULL || trie == NULL) return feri_fail(FER_STATUS_NULL_ARG, "matcher: grammar and trie must not be NULL");
  if (eos >= (int64_t)trie->n_vocab) return feri_fail(FER_STATUS_INVALID_ARG, "matcher: eos %d past the vocabulary", eos);
  feri_matcher *m = calloc(1, sizeof *m);
  if (!m) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "matcher: %zu bytes", sizeof *m);
  m->g = g;
  m->trie = trie;
  m->eos = eos < 0 ? -1 : eos;
  m->cap_hist = 64;
  m->hist = malloc(sizeof *m->hist * m->cap_hist);
  m->walk = malloc(sizeof *m->walk * ((size_t)trie->max_depth + 1));
  fer_status st = m->hist && m->walk ? feri_dfa_init(&m->dfa, &g->nfa)
                                     : feri_fail(FER_STATUS_OUT_OF_MEMORY, "matcher: history");
  if (st == FER_STATUS_OK) {
    const uint32_t lex = 0;
    m->hist[0] = feri_dfa_start(&m->dfa, &lex, 1);
    m->n_hist = 1;
    if (m->dfa.err) st = m->dfa.err;
  }
  if (st != FER_STATUS_OK) {
    feri_matcher_free(m);
    return st;
  }
  *out = m;
  return FER_STATUS_OK;
}

int feri_matcher_is_accepting(feri_matcher *m) {
  if (m->ended) return 0;
  uint32_t n;
  (void)feri_dfa_accepts(&m->dfa, m->hist[m->n_hist - 1], &n);
  return n > 0;
}

fer_status feri_matcher_fill_mask(feri_matcher *m, uint32_t *mask, size_t words) {
  const feri_toktrie *t = m->trie;
  const size_t need = feri_mask_words(t->n_vocab);
  if (mask == NULL) return feri_fail(FER_STATUS_NULL_ARG, "matcher: mask is NULL");
  if (words < need) return feri_fail(FER_STATUS_BUFFER_TOO_SMALL, "matcher: mask of %zu words, %zu needed", words, need);
  memset(mask, 0, words * sizeof *mask);
  if (m->ended) return FER_STATUS_OK;
  feri_dfa *d = &m->dfa;
  uint32_t *walk = m->walk;
  walk[0] = m->hist[m->n_hist - 1];
  const uint8_t *byte = t->byte;
  const uint16_t *depth = t->depth;
  const uint32_t *subtree = t->subtree;
  const int32_t *token = t->token;
  for (uint32_t i = 1; i < t->n_nodes;) {
    const uint32_t dpt = depth[i];
    const uint32_t s = feri_dfa_step(d, walk[dpt - 1], byte[i]);
    if (s == 0) { /* no word continues this prefix: skip every token under it */
      i += subtree[i];
      continue;
    }
    walk[dpt] = s;
    if (token[i] >= 0) feri_mask_set(mask, (uint32_t)token[i]);
    i++;
  }
  if (d->err) return d->err;
  for (uint32_t k = 0; k < t->n_dups; k++)
    if (feri_mask_get(mask, (uint32_t)token[t->dup_node[k]])) feri_mask_set(mask, (uint32_t)t->dup_token[k]);
  if (m->eos >= 0 && feri_matcher_is_accepting(m)) feri_mask_set(mask, (uint32_t)m->eos);
  return FER_STATUS_OK;
}

fer_status feri_matcher_accept(feri_matcher *m, int32_t token) {
  const feri_toktrie *t = m->trie;
  if (token < 0 || (uint32_t)token >= t->n_vocab)
    return feri_fail(FER_STATUS_INVALID_ARG, "matcher: token %d outside the vocabulary of %u", token, t->n_vocab);
  if (m->ended) return feri_fail(FER_STATUS_INVALID_ARG, "matcher: token %d after the end of the sequence", token);
  if (token == m->eos) {
    if (!feri_matcher_is_accepting(m))
      return feri_fail(FER_STATUS_INVALID_ARG, "matcher: end of sequence before the grammar accepts");
    m->ended = 1;
    return FER_STATUS_OK;
  }
  if (!t->in_trie[token]) return feri_fail(FER_STATUS_INVALID_ARG, "matcher: token %d is never allowed (a control token)", token);
  uint32_t s = m->hist[m->n_hist - 1];
  const uint8_t *b = t->blob + t->off[token];
  for (uint32_t k = 0; k < t->len[token] && s != 0; k++) s = feri_dfa_step(&m->dfa, s, b[k]);
  if (m->dfa.err) return m->dfa.err;
  if (s == 0) return feri_fail(FER_STATUS_INVALID_ARG, "matcher: token %d does not continue the grammar", token);
  if (m->n_hist == m->cap_hist) {
    uint32_t *h = realloc(m->hist, sizeof *h * 2 * m->cap_hist);
    if (!h) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "matcher: history of %u tokens", m->n_hist);
    m->hist = h;
    m->cap_hist *= 2;
  }
  m->hist[m->n_hist++] = s;
  return FER_STATUS_OK;
}

fer_status feri_matcher_rollback(feri_matcher *m, uint32_t n) {
  if (n > feri_matcher_n_tokens(m))
    return feri_fail(FER_STATUS_INVALID_ARG, "matcher: rollback of %u tokens, %u accepted", n, feri_matcher_n_tokens(m));
  if (n > 0 && m->ended) m->ended = 0, n--;
  m->n_hist -= n;
  return FER_STATUS_OK;
}
