/* earley.h: an Earley parser over lexemes (cfg.h), its rows kept as a stack so that a token-trie
 * walk or a rollback can push rows and drop them again.
 *
 * Row k holds the items (rule, dot, origin) after k lexemes: predictions (with Aycock and
 * Horspool's step over nullable nonterminals) and completions closed over. A row's allowed lexemes
 * are those after a dot; pushing a row scans a set of lexemes that ended together (one lexeme
 * string may match several lexemes: each advances its items). The grammar's skip lexeme (cfg.h)
 * is allowed in every row that allows another lexeme, but the first and one made by a skip; a
 * skip advances nothing: its row is the row before it again. */
#ifndef FERI_GRAMMAR_EARLEY_H
#define FERI_GRAMMAR_EARLEY_H

#include <stddef.h>
#include <stdint.h>

#include "ferrite.h"
#include "grammar/cfg.h"

typedef struct feri_earley_item {
  uint32_t rule, dot, origin;
} feri_earley_item;

typedef struct feri_earley {
  const feri_cfg *g;
  feri_earley_item *items;
  uint32_t n_items, cap_items;
  uint32_t *row_start; /* row k: items row_start[k] .. row_start[k + 1] (the top row: .. n_items) */
  uint8_t *row_skip;   /* 1 where row k came from the skip lexeme (no second skip follows) */
  uint32_t n_rows, cap_rows;
  /* the dedup table of the row being built: item index + 1, tagged with a generation */
  uint32_t *table, *table_gen;
  uint32_t table_mask, gen;
  uint32_t *lex;  /* scratch: a row's allowed lexemes (n_lexemes + 1: the skip added) */
  uint32_t *lex_mark, lex_gen; /* per lexeme: the generation that listed it */
  fer_status err; /* OUT_OF_MEMORY or INVALID_ARG (past FERI_EARLEY_MAX_ITEMS) once a push failed */
} feri_earley;

/* Most items all rows together may hold (a push past it fails with INVALID_ARG). */
enum { FERI_EARLEY_MAX_ITEMS = 1 << 24 };

/* A parser with row 0 (the start) built. */
fer_status feri_earley_init(feri_earley *p, const feri_cfg *g);
void feri_earley_free(feri_earley *p);

/* Pushes the row after the top row's items that expect one of lexemes lex[0 .. n) (sorted); 1 when
 * the new row has items, else 0 (nothing pushed; err set if it failed for memory or size). */
int feri_earley_push(feri_earley *p, const uint32_t *lex, uint32_t n);

/* Drops rows down to n_rows rows. */
static inline void feri_earley_pop_to(feri_earley *p, uint32_t n_rows) {
  if (n_rows < p->n_rows) {
    p->n_items = p->row_start[n_rows];
    p->n_rows = n_rows;
  }
}

/* The top row's allowed lexemes (sorted, no repeats) into p->lex; their count. */
uint32_t feri_earley_allowed(feri_earley *p);

/* 1 when the top row completes the start rule from row 0 (the input so far is a word). */
int feri_earley_accepting(const feri_earley *p);

#endif
