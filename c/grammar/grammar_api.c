/* grammar_api.c: the structured-output ABI of ffi/ferrite.h: vocabularies, grammars and matchers,
 * with the argument checks and lifetime counts the header promises. */
#include "grammar/grammar_api.h"

#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "tokenizer/tokenizer.h"

fer_status fer_grammar_vocab_create(const fer_tokenizer *tok, uint32_t n_vocab, int32_t eos_id,
                                    fer_grammar_vocab **out) {
  static const char *const fn = "fer_grammar_vocab_create";
  feri_error_clear();
  if (out != NULL) *out = NULL;
  if (tok == NULL || out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: NULL argument", fn);
  fer_tokenizer_info info;
  fer_status st = fer_tokenizer_get_info(tok, &info);
  if (st != FER_STATUS_OK) return st;
  const uint32_t width = n_vocab ? n_vocab : info.vocab_size;
  if (width < info.vocab_size)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: n_vocab %u is below the tokenizer's %u tokens", fn, n_vocab,
                     info.vocab_size);
  const int32_t eos = eos_id == -1 ? info.eos_id : eos_id;
  if (eos < 0 || (uint32_t)eos >= width)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: end-of-sequence token %d %s", fn, eos,
                     eos_id == -1 ? "(the tokenizer has none: pass one)" : "is not below n_vocab");
  fer_grammar_vocab *v = calloc(1, sizeof *v);
  if (!v) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: %zu bytes", fn, sizeof *v);
  st = feri_toktrie_from_tokenizer(tok, width, &v->trie);
  if (st == FER_STATUS_OK) st = feri_slice_build(&v->trie, &v->slice);
  if (st != FER_STATUS_OK) {
    feri_toktrie_free(&v->trie);
    free(v);
    return st;
  }
  for (uint32_t t = 0; t < width; t++) v->n_text += v->trie.in_trie[t];
  v->tok = tok;
  v->eos = eos;
  atomic_init(&v->live_grammars, 0);
  atomic_fetch_add(&((fer_tokenizer *)tok)->live_dependents, 1);
  *out = v;
  return FER_STATUS_OK;
}

fer_status fer_grammar_vocab_free(fer_grammar_vocab *v) {
  feri_error_clear();
  if (v == NULL) return FER_STATUS_OK;
  const unsigned live = atomic_load(&v->live_grammars);
  if (live) return feri_fail(FER_STATUS_BUSY, "fer_grammar_vocab_free: %u grammars of this vocabulary are alive", live);
  atomic_fetch_sub(&((fer_tokenizer *)v->tok)->live_dependents, 1);
  feri_slice_free(&v->slice);
  feri_toktrie_free(&v->trie);
  free(v);
  return FER_STATUS_OK;
}

fer_status fer_grammar_vocab_get_info(const fer_grammar_vocab *v, fer_grammar_vocab_info *out) {
  feri_error_clear();
  if (out != NULL) memset(out, 0, sizeof *out);
  if (v == NULL || out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_grammar_vocab_get_info: NULL argument");
  out->n_vocab = v->trie.n_vocab;
  out->mask_words = (uint32_t)feri_mask_words(v->trie.n_vocab);
  out->eos_id = v->eos;
  out->n_text_tokens = v->n_text;
  return FER_STATUS_OK;
}

fer_status fer_grammar_compile(const fer_grammar_vocab *v, fer_grammar_kind kind, const char *src, size_t len,
                               uint32_t flags, fer_grammar **out) {
  static const char *const fn = "fer_grammar_compile";
  feri_error_clear();
  if (out != NULL) *out = NULL;
  if (v == NULL || out == NULL || (src == NULL && len > 0)) return feri_fail(FER_STATUS_NULL_ARG, "%s: NULL argument", fn);
  if (flags & ~(uint32_t)(FER_GRAMMAR_JSON_COMPACT | FER_GRAMMAR_NO_FORCING))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: unknown flags 0x%x", fn, flags);
  if ((flags & FER_GRAMMAR_JSON_COMPACT) && kind != FER_GRAMMAR_JSON_SCHEMA)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: FER_GRAMMAR_JSON_COMPACT is for JSON Schema only", fn);
  if (src == NULL) src = "";
  feri_grammar *g = NULL;
  fer_status st;
  switch (kind) {
  case FER_GRAMMAR_JSON_SCHEMA: {
    feri_json_options o = feri_json_defaults();
    if (flags & FER_GRAMMAR_JSON_COMPACT) o.whitespace_flexible = 0;
    st = feri_grammar_from_json_schema(src, len, &o, &g);
    break;
  }
  case FER_GRAMMAR_REGEX: st = feri_grammar_from_regex(src, len, &g); break;
  case FER_GRAMMAR_GBNF: st = feri_grammar_from_gbnf(src, len, &g); break;
  default: return feri_fail(FER_STATUS_INVALID_ARG, "%s: unknown grammar kind %d", fn, kind);
  }
  if (st != FER_STATUS_OK) return st;
  fer_grammar *r = calloc(1, sizeof *r);
  if (!r) {
    feri_grammar_free(g);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: %zu bytes", fn, sizeof *r);
  }
  r->vocab = v;
  r->g = g;
  r->flags = flags;
  atomic_init(&r->live_matchers, 0);
  if (pthread_mutex_init(&r->pool_lock, NULL) != 0) {
    feri_grammar_free(g);
    free(r);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: a lock", fn);
  }
  atomic_fetch_add(&((fer_grammar_vocab *)v)->live_grammars, 1);
  *out = r;
  return FER_STATUS_OK;
}

fer_status fer_grammar_free(fer_grammar *g) {
  feri_error_clear();
  if (g == NULL) return FER_STATUS_OK;
  const unsigned live = atomic_load(&g->live_matchers);
  if (live) return feri_fail(FER_STATUS_BUSY, "fer_grammar_free: %u matchers of this grammar are alive", live);
  atomic_fetch_sub(&((fer_grammar_vocab *)g->vocab)->live_grammars, 1);
  for (uint32_t i = 0; i < g->n_pool; i++) feri_matcher_free(g->pool[i]);
  pthread_mutex_destroy(&g->pool_lock);
  feri_grammar_free(g->g);
  free(g);
  return FER_STATUS_OK;
}

fer_status fer_matcher_create(const fer_grammar *g, fer_matcher **out) {
  static const char *const fn = "fer_matcher_create";
  feri_error_clear();
  if (out != NULL) *out = NULL;
  if (g == NULL || out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: NULL argument", fn);
  fer_matcher *m = calloc(1, sizeof *m);
  if (!m) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: %zu bytes", fn, sizeof *m);
  fer_grammar *gm = (fer_grammar *)g;
  pthread_mutex_lock(&gm->pool_lock); /* a pooled matcher: at its start, its DFA and cache warm */
  m->m = gm->n_pool ? gm->pool[--gm->n_pool] : NULL;
  pthread_mutex_unlock(&gm->pool_lock);
  if (m->m == NULL) {
    const fer_status st = feri_matcher_new(g->g, &g->vocab->trie, g->vocab->eos, &m->m);
    if (st != FER_STATUS_OK) {
      free(m);
      return st;
    }
    if (!(g->flags & FER_GRAMMAR_NO_FORCING)) feri_matcher_set_tokenizer(m->m, g->vocab->tok);
    feri_matcher_set_slice(m->m, &g->vocab->slice);
  }
  m->grammar = g;
  atomic_fetch_add(&((fer_grammar *)g)->live_matchers, 1);
  *out = m;
  return FER_STATUS_OK;
}

void fer_matcher_free(fer_matcher *m) {
  if (m == NULL) return;
  fer_grammar *g = (fer_grammar *)m->grammar;
  feri_matcher *inner = m->m;
  /* back to its start and into the grammar's pool, unless the pool is full or it failed */
  const int keep = !inner->dfa.err && !inner->parser.err &&
                   feri_matcher_rollback(inner, feri_matcher_n_tokens(inner)) == FER_STATUS_OK;
  pthread_mutex_lock(&g->pool_lock);
  if (keep && g->n_pool < FERI_GRAMMAR_POOL) g->pool[g->n_pool++] = inner, inner = NULL;
  pthread_mutex_unlock(&g->pool_lock);
  feri_matcher_free(inner);
  atomic_fetch_sub(&g->live_matchers, 1);
  free(m);
}

fer_status fer_matcher_fill_mask(fer_matcher *m, uint32_t *mask, size_t words) {
  feri_error_clear();
  if (mask != NULL) memset(mask, 0, words * sizeof *mask); /* the failure state, before any check */
  if (m == NULL || mask == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_matcher_fill_mask: NULL argument");
  const size_t need = feri_mask_words(m->m->trie->n_vocab);
  if (words < need)
    return feri_fail(FER_STATUS_BUFFER_TOO_SMALL, "fer_matcher_fill_mask: %zu words, the mask needs %zu", words, need);
  const fer_status st = feri_matcher_fill_mask(m->m, mask, need);
  if (st != FER_STATUS_OK) memset(mask, 0, need * sizeof *mask);
  return st;
}

fer_status fer_matcher_accept(fer_matcher *m, int32_t token) {
  feri_error_clear();
  if (m == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_matcher_accept: matcher is NULL");
  return feri_matcher_accept(m->m, token);
}

fer_status fer_matcher_rollback(fer_matcher *m, uint32_t n) {
  feri_error_clear();
  if (m == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_matcher_rollback: matcher is NULL");
  return feri_matcher_rollback(m->m, n);
}

fer_status fer_matcher_get_state(const fer_matcher *m, fer_matcher_state *out) {
  feri_error_clear();
  if (out != NULL) memset(out, 0, sizeof *out);
  if (m == NULL || out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_matcher_get_state: NULL argument");
  out->n_tokens = feri_matcher_n_tokens(m->m);
  out->accepting = (uint32_t)feri_matcher_is_accepting(m->m);
  out->ended = (uint32_t)feri_matcher_is_ended(m->m);
  return FER_STATUS_OK;
}

/* The one token a mask allows, or -1 (none, or more than one). */
static int32_t single_token(const uint32_t *mask, size_t words) {
  int32_t found = -1;
  for (size_t w = 0; w < words; w++) {
    if (!mask[w]) continue;
    if (found >= 0 || (mask[w] & (mask[w] - 1))) return -1;
    found = (int32_t)(w * 32 + (size_t)__builtin_ctz(mask[w]));
  }
  return found;
}

fer_status fer_matcher_forced_tokens(fer_matcher *m, int32_t *ids, size_t cap, size_t *out_n) {
  static const char *const fn = "fer_matcher_forced_tokens";
  feri_error_clear();
  if (out_n != NULL) *out_n = 0;
  if (m == NULL || out_n == NULL || (cap > 0 && ids == NULL)) return feri_fail(FER_STATUS_NULL_ARG, "%s: NULL argument", fn);
  if (cap == 0) return FER_STATUS_OK;
  const size_t words = feri_mask_words(m->m->trie->n_vocab);
  uint32_t *mask = malloc(words * sizeof *mask);
  if (!mask) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: a mask of %zu words", fn, words);
  size_t n = 0;
  fer_status st = FER_STATUS_OK;
  while (n < cap && !feri_matcher_is_ended(m->m)) {
    if ((st = feri_matcher_fill_mask(m->m, mask, words)) != FER_STATUS_OK) break;
    const int32_t t = single_token(mask, words);
    if (t < 0 || t == m->m->eos) break;
    if ((st = feri_matcher_accept(m->m, t)) != FER_STATUS_OK) break;
    ids[n++] = t;
  }
  free(mask);
  feri_error_stash keep;
  feri_error_save(&keep);
  (void)feri_matcher_rollback(m->m, (uint32_t)n);
  if (st != FER_STATUS_OK) {
    for (size_t i = 0; i < n; i++) ids[i] = 0;
    return feri_error_restore(&keep, st);
  }
  feri_error_clear();
  *out_n = n;
  return FER_STATUS_OK;
}
