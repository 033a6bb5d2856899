/* matcher.c: the matcher of matcher.h: greedy lexing in front of the Earley rows, a position per
 * trie depth for the mask, a position per accepted token for rollback. */
#include "grammar/matcher.h"

#include <stdlib.h>
#include <string.h>

#include "core/status.h"

void feri_grammar_free(feri_grammar *g) {
  if (!g) return;
  feri_nfa_free(&g->nfa);
  feri_cfg_free(&g->cfg);
  free(g);
}

fer_status feri_grammar_from_cfg(feri_cfg *cfg, feri_grammar **out) {
  if (out == NULL) {
    feri_cfg_free(cfg);
    return feri_fail(FER_STATUS_NULL_ARG, "grammar: out is NULL");
  }
  *out = NULL;
  feri_grammar *g = calloc(1, sizeof *g);
  if (!g) {
    feri_cfg_free(cfg);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "grammar: %zu bytes", sizeof *g);
  }
  g->cfg = *cfg;
  memset(cfg, 0, sizeof *cfg);
  const fer_status st = feri_nfa_build(&g->cfg.rx, g->cfg.lexeme_root, g->cfg.n_lexemes, &g->nfa);
  if (st != FER_STATUS_OK) {
    feri_grammar_free(g);
    return st;
  }
  *out = g;
  return FER_STATUS_OK;
}

fer_status feri_grammar_from_regex(const char *src, size_t len, feri_grammar **out) {
  if (out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "grammar: out is NULL");
  *out = NULL;
  feri_cfg cfg;
  fer_status st = feri_cfg_init(&cfg);
  if (st != FER_STATUS_OK) return st;
  uint32_t root;
  st = feri_rx_parse_into(&cfg.rx, src, len, &root);
  if (st == FER_STATUS_OK) {
    const uint32_t s = feri_cfg_nonterm(&cfg);
    const int32_t lex = feri_cfg_lexeme(&cfg, root);
    feri_cfg_rule(&cfg, s, &lex, 1);
    if (feri_rx_nullable(&cfg.rx, root)) feri_cfg_rule(&cfg, s, NULL, 0); /* the empty word: a rule, not a lexeme */
    st = feri_cfg_finish(&cfg, s);
  }
  if (st != FER_STATUS_OK) {
    feri_cfg_free(&cfg);
    return st;
  }
  return feri_grammar_from_cfg(&cfg, out);
}

void feri_matcher_free(feri_matcher *m) {
  if (!m) return;
  feri_dfa_free(&m->dfa);
  feri_earley_free(&m->parser);
  free(m->hist);
  free(m->walk);
  free(m);
}

/* The DFA state that starts the top row's allowed lexemes. */
static uint32_t start_top(feri_matcher *m) {
  const uint32_t n = feri_earley_allowed(&m->parser);
  return feri_dfa_start(&m->dfa, m->parser.lex, n);
}

/* One byte from position *pos (whose rows are the parser's top): the lexeme in progress takes it,
 * or ends (when complete) and the next one starts with it. 0 when the byte is refused (the parser
 * may then hold a pushed row: the caller restores its rows). */
static int step(feri_matcher *m, feri_match_pos *pos, uint8_t b) {
  const uint32_t t = feri_dfa_step(&m->dfa, pos->lex, b);
  if (t != 0) {
    pos->lex = t;
    pos->fresh = 0;
    return 1;
  }
  if (pos->fresh) return 0; /* nothing to end */
  uint32_t na;
  const uint32_t *acc = feri_dfa_accepts(&m->dfa, pos->lex, &na);
  if (na == 0 || !feri_earley_push(&m->parser, acc, na)) return 0;
  const uint32_t s0 = start_top(m);
  pos->rows = m->parser.n_rows;
  pos->lex = s0 ? feri_dfa_step(&m->dfa, s0, b) : 0;
  pos->fresh = 0;
  return pos->lex != 0;
}

/* 1 when the input up to pos is a word: the lexeme in progress complete and the parser then
 * accepting (rows restored). */
static int accepting_at(feri_matcher *m, const feri_match_pos *pos) {
  feri_earley_pop_to(&m->parser, pos->rows);
  if (pos->fresh) return feri_earley_accepting(&m->parser);
  uint32_t na;
  const uint32_t *acc = feri_dfa_accepts(&m->dfa, pos->lex, &na);
  if (na == 0 || !feri_earley_push(&m->parser, acc, na)) return 0;
  const int ok = feri_earley_accepting(&m->parser);
  feri_earley_pop_to(&m->parser, pos->rows);
  return ok;
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
  if (st == FER_STATUS_OK) st = feri_earley_init(&m->parser, &g->cfg);
  if (st == FER_STATUS_OK) {
    const uint32_t s0 = start_top(m);
    m->hist[0] = (feri_match_pos){m->parser.n_rows, s0, 1};
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
  return accepting_at(m, &m->hist[m->n_hist - 1]);
}

fer_status feri_matcher_fill_mask(feri_matcher *m, uint32_t *mask, size_t words) {
  const feri_toktrie *t = m->trie;
  const size_t need = feri_mask_words(t->n_vocab);
  if (mask == NULL) return feri_fail(FER_STATUS_NULL_ARG, "matcher: mask is NULL");
  if (words < need) return feri_fail(FER_STATUS_BUFFER_TOO_SMALL, "matcher: mask of %zu words, %zu needed", words, need);
  memset(mask, 0, words * sizeof *mask);
  if (m->ended) return FER_STATUS_OK;
  feri_match_pos *walk = m->walk;
  walk[0] = m->hist[m->n_hist - 1];
  feri_earley *p = &m->parser;
  const uint8_t *byte = t->byte;
  const uint16_t *depth = t->depth;
  const uint32_t *subtree = t->subtree;
  const int32_t *token = t->token;
  for (uint32_t i = 1; i < t->n_nodes;) {
    const uint32_t dpt = depth[i];
    feri_match_pos pos = walk[dpt - 1];
    feri_earley_pop_to(p, pos.rows);
    if (!step(m, &pos, byte[i])) { /* no word continues this prefix: skip every token under it */
      i += subtree[i];
      continue;
    }
    walk[dpt] = pos;
    if (token[i] >= 0) feri_mask_set(mask, (uint32_t)token[i]);
    i++;
  }
  feri_earley_pop_to(p, walk[0].rows);
  if (m->dfa.err) return m->dfa.err;
  if (p->err) return p->err;
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
  if (m->n_hist == m->cap_hist) {
    feri_match_pos *h = realloc(m->hist, sizeof *h * 2 * m->cap_hist);
    if (!h) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "matcher: history of %u tokens", m->n_hist);
    m->hist = h;
    m->cap_hist *= 2;
  }
  feri_match_pos pos = m->hist[m->n_hist - 1];
  feri_earley_pop_to(&m->parser, pos.rows);
  const uint8_t *b = t->blob + t->off[token];
  int ok = 1;
  for (uint32_t k = 0; k < t->len[token] && ok; k++) ok = step(m, &pos, b[k]);
  const fer_status err = m->dfa.err ? m->dfa.err : m->parser.err;
  if (!ok || err) {
    feri_earley_pop_to(&m->parser, m->hist[m->n_hist - 1].rows);
    if (err) return err;
    return feri_fail(FER_STATUS_INVALID_ARG, "matcher: token %d does not continue the grammar", token);
  }
  m->hist[m->n_hist++] = pos;
  return FER_STATUS_OK;
}

fer_status feri_matcher_rollback(feri_matcher *m, uint32_t n) {
  if (n > feri_matcher_n_tokens(m))
    return feri_fail(FER_STATUS_INVALID_ARG, "matcher: rollback of %u tokens, %u accepted", n, feri_matcher_n_tokens(m));
  if (n > 0 && m->ended) m->ended = 0, n--;
  m->n_hist -= n;
  feri_earley_pop_to(&m->parser, m->hist[m->n_hist - 1].rows);
  return FER_STATUS_OK;
}
