/* grammar_api.h: the public grammar objects of ffi/ferrite.h (fer_grammar_vocab, fer_grammar,
 * fer_matcher) over the internal ones (toktrie.h, matcher.h), for the parts of ferrite that hold
 * them: the sampler reads a matcher's mask, an engine sequence owns a matcher. */
#ifndef FERI_GRAMMAR_API_H
#define FERI_GRAMMAR_API_H

#include <stdatomic.h>

#include "ferrite.h"
#include "grammar/matcher.h"
#include "grammar/slice.h"
#include "grammar/toktrie.h"

struct fer_grammar_vocab {
  feri_toktrie trie;
  feri_slice slice;         /* the JSON string-body tokens, and the trie of the others */
  const fer_tokenizer *tok; /* for the forced bytes' canonical tokens */
  int32_t eos;
  uint32_t n_text; /* tokens in the trie */
  atomic_uint live_grammars;
};

struct fer_grammar {
  const fer_grammar_vocab *vocab;
  feri_grammar *g;
  uint32_t flags; /* fer_grammar_flag bits */
  atomic_uint live_matchers;
};

struct fer_matcher {
  const fer_grammar *grammar;
  feri_matcher *m;
};

#endif
