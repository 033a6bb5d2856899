/* cfg.h: a context-free grammar over lexemes, the form every input (regular expression, GBNF,
 * JSON Schema) is compiled into before parsing (earley.h).
 *
 * Terminals are lexemes: regular expressions (regex.h) that the lexer (lexer.h) matches greedily,
 * as llguidance's lexer does: a lexeme goes on while the next byte can continue it, and ends at the
 * first byte that cannot. Nonterminals have rules, each a sequence of symbols. Symbol encoding: a
 * value >= 0 is a nonterminal, -1 - k is lexeme k. Rule 0 is the start rule (start -> S). */
#ifndef FERI_GRAMMAR_CFG_H
#define FERI_GRAMMAR_CFG_H

#include <stddef.h>
#include <stdint.h>

#include "ferrite.h"
#include "grammar/regex.h"

static inline int32_t feri_cfg_lexeme_sym(uint32_t k) { return -1 - (int32_t)k; }
static inline int feri_cfg_is_lexeme(int32_t sym) { return sym < 0; }
static inline uint32_t feri_cfg_lexeme_of(int32_t sym) { return (uint32_t)(-1 - sym); }

typedef struct feri_cfg {
  feri_rx rx;            /* every lexeme's expression */
  uint32_t *lexeme_root; /* lexeme k: node lexeme_root[k] of rx */
  uint32_t *ex_first, *ex_count; /* lexeme k's excluded words: words ex_first[k] .. + ex_count[k] */
  uint32_t n_lexemes, cap_lexemes;
  uint8_t *ex_blob;      /* excluded word w: ex_blob[ex_off[w] .. + ex_len[w]) */
  uint32_t n_ex_blob, cap_ex_blob;
  uint32_t *ex_off, *ex_len;
  uint32_t n_ex_words, cap_ex_words;
  int32_t skip;          /* the skip lexeme (JSON's whitespace), or -1: see feri_cfg_set_skip */
  uint32_t n_nonterms;
  uint32_t *rule_lhs, *rule_off, *rule_len;
  uint32_t n_rules, cap_rules;
  int32_t *syms;
  uint32_t n_syms, cap_syms;
  /* filled by feri_cfg_finish */
  uint32_t *nt_rule_off; /* nonterminal A's rules: nt_rules[nt_rule_off[A] .. nt_rule_off[A + 1]) */
  uint32_t *nt_rules;
  uint8_t *nullable;     /* per nonterminal: derives the empty string */
  fer_status err;        /* the first builder failure */
} feri_cfg;

/* Most rules and symbols a grammar may have (INVALID_ARG beyond: a bound, not an out-of-memory). */
enum { FERI_CFG_MAX_RULES = 1 << 20, FERI_CFG_MAX_SYMS = 1 << 22 };

/* An empty grammar whose rule 0 is start -> `start` (nonterminal 0 is the start symbol's own). */
fer_status feri_cfg_init(feri_cfg *g);
void feri_cfg_free(feri_cfg *g);

/* A new nonterminal's id (UINT32_MAX after a failure). */
uint32_t feri_cfg_nonterm(feri_cfg *g);
/* A new lexeme for rx node `root` of g->rx; returns its symbol (0 after a failure: not a lexeme). */
int32_t feri_cfg_lexeme(feri_cfg *g, uint32_t root);
/* As feri_cfg_lexeme, less the exact byte strings words[i][0 .. lens[i]) (each becomes a dead end
 * of the lexeme: a JSON object's free keys are strings other than its named keys). */
int32_t feri_cfg_lexeme_except(feri_cfg *g, uint32_t root, const uint8_t *const *words, const uint32_t *lens,
                               uint32_t n);

/* Makes lexeme symbol `sym` the skip lexeme (llguidance's JSON whitespace, matched once): it may
 * stand between any two lexemes, never before the first one nor after the last, and never twice
 * in a row; it advances no rule. */
void feri_cfg_set_skip(feri_cfg *g, int32_t sym);

/* Adds lhs -> syms[0 .. n). */
void feri_cfg_rule(feri_cfg *g, uint32_t lhs, const int32_t *syms, uint32_t n);

/* Sets the start symbol to `start`, checks and indexes the grammar: INVALID_ARG when the start
 * symbol derives no string (an empty language: a grammar that can never accept) or when a rule
 * names a symbol that does not exist; the first builder failure otherwise. A lexeme always takes at
 * least one byte: an expression that matches the empty string never matches it as a lexeme (a
 * grammar that means "or nothing" says so with a rule). */

/* 1 when rx node x matches the empty string. */
int feri_rx_nullable(const feri_rx *rx, uint32_t x);
fer_status feri_cfg_finish(feri_cfg *g, uint32_t start);

#endif
