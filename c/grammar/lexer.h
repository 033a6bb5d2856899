/* lexer.h: a set of lexemes (regular expressions, regex.h) as one byte automaton: a Thompson NFA
 * over bytes (code-point sets as their UTF-8 byte sequences), and a DFA built from it lazily, one
 * state per set of NFA states reached, one transition per byte class at first use.
 *
 * A DFA state stands for the input read so far against the lexemes it started with. State 0 is
 * dead (no lexeme can still match). Every other state can still reach a match or is one: NFA states
 * that cannot reach a match (or an excluded word) are never kept, and a set left with nothing that
 * can still match is dead. A state's accepting lexemes are those the input so far matches
 * completely (and that is not one of their excluded words).
 *
 * Intersections (FERI_RX_AND) are built as the product of their two sides' automata, so liveness
 * stays exact; FERI_RX_ANDNOT (only as a lexeme's root) puts its right side behind an ANTI mark, as
 * an excluded word; FERI_RX_MULTIPLE becomes derivre's remainder automaton (coef * (exp + 2) at
 * most 200000 states, else UNSUPPORTED).
 *
 * The DFA mutates its cache as it is used: one per thread (each matcher has its own); the NFA is
 * immutable once built and may be shared. */
#ifndef FERI_GRAMMAR_LEXER_H
#define FERI_GRAMMAR_LEXER_H

#include <stddef.h>
#include <stdint.h>

#include "ferrite.h"
#include "grammar/regex.h"

/* NFA state kinds: a byte in [lo, hi] moves to next; SPLIT moves to next and alt without input;
 * MATCH ends lexeme `alt`; ANTI marks one of lexeme `alt`'s excluded words (a string that reaches
 * both its MATCH and an ANTI is not the lexeme). */
typedef enum feri_nfa_kind { FERI_NFA_BYTES, FERI_NFA_SPLIT, FERI_NFA_MATCH, FERI_NFA_ANTI } feri_nfa_kind;

/* A lexeme: rx node `root`, less the n_except words except[i][0 .. except_len[i]) (exact byte
 * strings: a JSON object's free keys are strings other than its named ones). */
typedef struct feri_lexeme_spec {
  uint32_t root;
  uint32_t n_except;
  const uint8_t *const *except;
  const uint32_t *except_len;
} feri_lexeme_spec;

typedef struct feri_nfa_state {
  uint8_t kind, lo, hi;
  uint32_t next, alt; /* alt: SPLIT's second edge; MATCH: the lexeme */
} feri_nfa_state;

typedef struct feri_nfa {
  feri_nfa_state *states;
  uint32_t n_states, cap_states;
  uint32_t n_lexemes;
  uint32_t *start;      /* lexeme i's start state */
  uint8_t *live;        /* 1 where a state can reach a MATCH */
  uint8_t *keep;        /* 1 where a state can reach a MATCH or an ANTI (the closure keeps these) */
  uint8_t byte_class[256];
  uint32_t n_classes;
  uint32_t *class_byte; /* a representative byte of each class */
  uint16_t class_size[256]; /* bytes in class c */
} feri_nfa;

/* Most NFA states one lexer may have (counted repetitions written out); INVALID_ARG beyond. */
enum { FERI_NFA_MAX_STATES = 1 << 22 };

/* Builds the NFA of lexemes lex[0 .. n) (nodes of rx). INVALID_ARG past FERI_NFA_MAX_STATES,
 * OUT_OF_MEMORY. */
fer_status feri_nfa_build(const feri_rx *rx, const feri_lexeme_spec *lex, uint32_t n, feri_nfa *out);
void feri_nfa_free(feri_nfa *nfa);

typedef struct feri_dfa_state {
  uint32_t set_off, set_len;     /* its NFA states: sets[set_off .. + set_len), sorted */
  uint32_t acc_off, acc_len;     /* its accepting lexemes: accs[acc_off .. + acc_len), sorted */
} feri_dfa_state;

typedef struct feri_dfa_start_slot {
  uint64_t hash; /* 0: empty */
  uint32_t off, len, state;
} feri_dfa_start_slot;

typedef struct feri_dfa {
  const feri_nfa *nfa;
  feri_dfa_state *states;
  uint32_t n_states, cap_states;
  int32_t *trans; /* n_states x n_classes; -1 not yet computed */
  uint32_t cap_trans; /* states trans has room for */
  uint32_t *sets, n_sets, cap_sets;
  uint32_t *accs, n_accs, cap_accs;
  uint32_t *table; /* open addressing: DFA state + 1, keyed by the NFA set */
  uint32_t table_mask;
  /* the start states of recent lexeme lists (a lexeme's end asks for one at every step):
   * direct-mapped by the list's hash; the lists in start_blob */
  feri_dfa_start_slot *start_slots;
  uint32_t *start_blob, n_start_blob, cap_start_blob;
  /* scratch for a step */
  uint32_t *work, *stack, *visited;
  uint8_t *mark;
  fer_status err; /* OUT_OF_MEMORY or INVALID_ARG (past FERI_DFA_MAX_STATES) once a step failed */
} feri_dfa;

/* Most DFA states one cache holds; a step that would need more fails (dead state, err set). */
enum { FERI_DFA_MAX_STATES = 1 << 20 };

fer_status feri_dfa_init(feri_dfa *d, const feri_nfa *nfa);
void feri_dfa_free(feri_dfa *d);

/* The state before any input for lexemes lex[0 .. n) (0 when none can match anything, not even
 * the empty string). */
uint32_t feri_dfa_start(feri_dfa *d, const uint32_t *lex, uint32_t n);

/* The transition of a state on a byte, computed on first use. */
uint32_t feri_dfa_step_slow(feri_dfa *d, uint32_t s, uint8_t b);

static inline uint32_t feri_dfa_step(feri_dfa *d, uint32_t s, uint8_t b) {
  const int32_t t = d->trans[(size_t)s * d->nfa->n_classes + d->nfa->byte_class[b]];
  return t >= 0 ? (uint32_t)t : feri_dfa_step_slow(d, s, b);
}

/* The lexemes state s accepts (sorted), their count in *n. */
static inline const uint32_t *feri_dfa_accepts(const feri_dfa *d, uint32_t s, uint32_t *n) {
  *n = d->states[s].acc_len;
  return d->accs + d->states[s].acc_off;
}

#endif
