/* matcher.h: one sequence's position in a compiled grammar, and the token mask for its next step.
 *
 * A token is allowed when its bytes take the output so far to a prefix of a word of the language
 * (byte-level: a token ending inside a UTF-8 character is allowed when some character completes
 * it), and the end-of-sequence token when the output so far is a whole word. Tokens outside the
 * trie (control tokens) are never allowed; once the sequence has ended the mask holds only the
 * end-of-sequence token (as llguidance writes it).
 *
 * Forced bytes (llguidance's rule, scripts/grammar/LLGUIDANCE.md section 3.2), when the matcher has
 * the tokenizer: where the grammar allows exactly one next byte, and again after it, while the
 * output is not a word, those bytes are forced. The forced bytes (after the last token's) are
 * tokenized canonically (the tokenizer's own encoding); the trailing tokens that a longer token
 * could replace (one whose bytes go on past the forced ones into what the grammar allows) are cut
 * off; if tokens remain, the mask is the first of them alone; otherwise the mask is every token
 * that is a prefix of the cut-off bytes (or of all forced bytes) and every token that starts with
 * them and goes on into what the grammar allows. No end of sequence while bytes are forced.
 *
 * A grammar is a context-free grammar over lexemes (cfg.h). The position is the Earley parser's
 * rows (earley.h) and the lexer's DFA state (lexer.h) for the lexeme in progress, matched greedily:
 * a byte the lexeme cannot take ends it (when it is complete), the parser scans it, and the byte
 * starts the next lexeme. The mask is a walk of the token trie (toktrie.h) that keeps one such
 * position per depth, pushes rows where a token ends a lexeme and drops them on the way back up,
 * and skips every subtree whose prefix is dead. The part of a walk that stays inside the lexeme in
 * progress depends on the lexer state alone: it is kept per state (the tokens it allows, and the
 * trie nodes where the lexeme can end and the parser must be asked), so a state that recurs (a
 * JSON string's interior) costs a copy and the walks below those nodes.
 *
 * A matcher is used by one thread at a time; the grammar and the trie it reads are shared and
 * never changed. */
#ifndef FERI_GRAMMAR_MATCHER_H
#define FERI_GRAMMAR_MATCHER_H

#include <stddef.h>
#include <stdint.h>

#include "ferrite.h"
#include "grammar/lexer.h"
#include "grammar/cfg.h"
#include "grammar/earley.h"
#include "grammar/regex.h"
#include "grammar/slice.h"
#include "grammar/toktrie.h"

/* A compiled grammar: immutable once made, shared by any number of matchers and threads. */
typedef struct feri_grammar {
  feri_cfg cfg;
  feri_nfa nfa; /* the lexemes */
} feri_grammar;

/* Compiles a regular expression (regex.h's syntax and statuses) into a grammar of one lexeme (and
 * an empty rule where the expression matches the empty string). INVALID_ARG when no string matches
 * (a grammar that can never accept). */
fer_status feri_grammar_from_regex(const char *src, size_t len, feri_grammar **out);

/* Makes a grammar of a built cfg (feri_cfg_finish done), which it takes over (even on failure). */
fer_status feri_grammar_from_cfg(feri_cfg *cfg, feri_grammar **out);
void feri_grammar_free(feri_grammar *g);

/* One position: the parser's row count and the lexer's state (fresh: no byte of the lexeme in
 * progress read yet). */
typedef struct feri_match_pos {
  uint32_t rows, lex, fresh;
  int32_t token; /* the token that led here (-1 at the start) */
} feri_match_pos;

typedef struct feri_walk_end feri_walk_end;

typedef struct feri_matcher {
  const feri_grammar *g;
  const feri_toktrie *trie;
  int32_t eos;         /* the end-of-sequence token, or -1 */
  feri_dfa dfa;        /* this matcher's cache of the lexemes' DFA */
  feri_earley parser;
  feri_match_pos *hist; /* the position after each accepted token: hist[0] before any */
  uint32_t n_hist, cap_hist;
  int ended;           /* eos was accepted */
  feri_match_pos *walk; /* a position per trie depth */
  uint32_t *scratch_lex; /* a lexer state per trie depth (building the cache) */
  feri_walk_end *walk_end; /* per trie depth: the parent's lexeme end, taken once (matcher.c) */
  const fer_tokenizer *tok; /* for forced bytes' canonical tokens; NULL: no forcing */
  const feri_slice *slice;  /* the vocabulary's precomputed share of masks, or NULL */
  struct feri_mask_cache *cache; /* per lexer state: the tokens that stay inside the lexeme */
  uint32_t n_cache;
  uint8_t *forced;     /* scratch: forced bytes, their tokens */
  uint32_t cap_forced;
  int32_t *ftoks;
  uint32_t cap_ftoks;
  uint8_t *scratch;    /* forced bytes with the last token's, and the chop's suffix */
  size_t cap_scratch;
} feri_matcher;

/* A matcher at the start of g over the tokens of trie (both must outlive it). */
fer_status feri_matcher_new(const feri_grammar *g, const feri_toktrie *trie, int32_t eos, feri_matcher **out);

/* Gives the matcher the tokenizer its trie was built from (it must outlive the matcher): masks then
 * follow the forced-bytes rule above. */
void feri_matcher_set_tokenizer(feri_matcher *m, const fer_tokenizer *tok);
void feri_matcher_free(feri_matcher *m);

/* Gives the matcher a slice of its trie (slice.h; it must outlive the matcher): lexer states that
 * take any run of JSON string-body characters then allow the slice's tokens without a walk and walk
 * the other tokens' trie only. The masks are the same. */
void feri_matcher_set_slice(feri_matcher *m, const feri_slice *slice);

/* Writes the mask of allowed next tokens: bit t % 32 of mask[t / 32] (words >= feri_mask_words of
 * the trie's vocabulary; the words past it are zeroed). BUFFER_TOO_SMALL when words is short. */
fer_status feri_matcher_fill_mask(feri_matcher *m, uint32_t *mask, size_t words);

/* Advances by one token; INVALID_ARG (nothing changed) when the mask would not allow it. */
fer_status feri_matcher_accept(feri_matcher *m, int32_t token);

/* Takes back the last n accepted tokens (the end of sequence included); INVALID_ARG (nothing
 * changed) when fewer were accepted. */
fer_status feri_matcher_rollback(feri_matcher *m, uint32_t n);

/* 1 when the output so far is a whole word (the end-of-sequence token is allowed). */
int feri_matcher_is_accepting(feri_matcher *m);

/* 1 once the end-of-sequence token was accepted. */
static inline int feri_matcher_is_ended(const feri_matcher *m) { return m->ended; }

/* Tokens accepted so far (the end of sequence included). */
static inline uint32_t feri_matcher_n_tokens(const feri_matcher *m) { return m->n_hist - 1 + (uint32_t)m->ended; }

#endif
