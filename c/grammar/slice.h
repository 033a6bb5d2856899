/* slice.h: a share of masks computed once per vocabulary (llguidance's slices): the tokens whose
 * bytes are all JSON string-body characters (valid UTF-8 scalars other than `"`, `\`, the C0
 * controls and DEL), and the trie of every other token.
 *
 * Where the lexeme in progress can take any run of such characters (a JSON string's interior: its
 * DFA stays alive along every string of the slice's language, feri_slice_subsumes), every token of
 * the slice is allowed without a walk, and a mask walks only the other tokens' trie: about a tenth
 * of the vocabulary on Qwen2.5's. Pure speed: the masks are the same. */
#ifndef FERI_GRAMMAR_SLICE_H
#define FERI_GRAMMAR_SLICE_H

#include <stdint.h>

#include "ferrite.h"
#include "grammar/lexer.h"
#include "grammar/toktrie.h"

typedef struct feri_slice {
  uint32_t *mask;    /* the slice's tokens (words of the vocabulary's mask) */
  uint32_t n_tokens; /* their count */
  feri_toktrie rest; /* the trie of the trie's other tokens */
} feri_slice;

/* The JSON string-body slice of trie t's tokens. OUT_OF_MEMORY. */
fer_status feri_slice_build(const feri_toktrie *t, feri_slice *out);
void feri_slice_free(feri_slice *s);

/* 1 when every nonempty string of the slice's language keeps DFA state q alive, decided by a
 * walk of the pairs (slice automaton state, DFA state) that gives up (0) past a small budget. */
int feri_slice_subsumes(feri_dfa *d, uint32_t q);

#endif
