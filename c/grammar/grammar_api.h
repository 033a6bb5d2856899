/* grammar_api.h: the public grammar objects of ffi/ferrite.h (fer_grammar_vocab, fer_grammar,
 * fer_matcher) over the internal ones (toktrie.h, matcher.h), for the parts of ferrite that hold
 * them: the sampler reads a matcher's mask, an engine sequence owns a matcher. */
#ifndef FERI_GRAMMAR_API_H
#define FERI_GRAMMAR_API_H

#include <pthread.h>
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

/* Matchers a grammar keeps when they are freed, back at their start with their lazily built DFA and
 * mask cache warm, for the next fer_matcher_create: a schema that serves many requests builds its
 * lexer states once, not once per request. */
enum { FERI_GRAMMAR_POOL = 8 };

struct fer_grammar {
  const fer_grammar_vocab *vocab;
  feri_grammar *g;
  uint32_t flags; /* fer_grammar_flag bits */
  atomic_uint live_matchers;
  pthread_mutex_t pool_lock; /* matchers are made and freed from any thread */
  feri_matcher *pool[FERI_GRAMMAR_POOL];
  uint32_t n_pool;
};

struct fer_matcher {
  const fer_grammar *grammar;
  feri_matcher *m;
};

#endif
