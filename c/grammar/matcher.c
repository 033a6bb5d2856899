/* matcher.c: the matcher of matcher.h: greedy lexing in front of the Earley rows, a position per
 * trie depth for the mask, a position per accepted token for rollback. */
#include "grammar/matcher.h"

#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "tokenizer/utf8.h"

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
  const feri_cfg *c = &g->cfg;
  feri_lexeme_spec *spec = calloc(c->n_lexemes ? c->n_lexemes : 1, sizeof *spec);
  const uint8_t **words = calloc(c->n_ex_words ? c->n_ex_words : 1, sizeof *words);
  if (!spec || !words) {
    free(spec), free(words);
    feri_grammar_free(g);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "grammar: %u lexemes", c->n_lexemes);
  }
  for (uint32_t w = 0; w < c->n_ex_words; w++) words[w] = c->ex_blob + c->ex_off[w];
  for (uint32_t k = 0; k < c->n_lexemes; k++)
    spec[k] = c->ex_count[k] ? (feri_lexeme_spec){c->lexeme_root[k], c->ex_count[k], words + c->ex_first[k], c->ex_len + c->ex_first[k]}
                             : (feri_lexeme_spec){c->lexeme_root[k], 0, NULL, NULL};
  const fer_status st = feri_nfa_build(&g->cfg.rx, spec, g->cfg.n_lexemes, &g->nfa);
  free(spec), free(words);
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

/* Per trie depth during a walk: whether the parent's lexeme end was already taken for a sibling
 * (the parser's push and the next lexeme's start state are the same for every byte the lexeme
 * cannot take), so that a node with many children ending a lexeme pushes once. */
enum { END_UNKNOWN = 0, END_PUSHED = 1, END_DEAD = 2 };
struct feri_walk_end {
  uint32_t state, rows, start;
};

/* One lexer state's share of a mask (matcher.h): built by a walk of the DFA alone. */
typedef struct feri_mask_cache {
  uint32_t lex, fresh;
  const feri_toktrie *trie;    /* the trie front indexes: the matcher's, or its slice's rest */
  uint32_t *inside;            /* the tokens whose bytes all stay inside the lexeme */
  uint32_t *front, *front_lex; /* nodes where the lexeme would end (its state before them) */
  uint32_t n_front;
} feri_mask_cache;

enum { MAX_CACHE = 64 }; /* lexer states kept per matcher (beyond: walked each time) */

static void free_cache(feri_matcher *m) {
  for (uint32_t i = 0; i < m->n_cache; i++) free(m->cache[i].inside), free(m->cache[i].front), free(m->cache[i].front_lex);
  free(m->cache);
  m->cache = NULL;
  m->n_cache = 0;
}

void feri_matcher_free(feri_matcher *m) {
  if (!m) return;
  free_cache(m);
  feri_dfa_free(&m->dfa);
  feri_earley_free(&m->parser);
  free(m->hist);
  free(m->walk);
  free(m->forced);
  free(m->ftoks);
  free(m->scratch_lex);
  free(m->walk_end);
  free(m->scratch);
  free(m);
}

void feri_matcher_set_tokenizer(feri_matcher *m, const fer_tokenizer *tok) { m->tok = tok; }

void feri_matcher_set_slice(feri_matcher *m, const feri_slice *slice) {
  if (slice == m->slice) return;
  free_cache(m); /* entries built without the slice index the other trie: built again on use */
  m->slice = slice;
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
  m->scratch_lex = malloc(sizeof *m->scratch_lex * ((size_t)trie->max_depth + 1));
  m->walk_end = calloc((size_t)trie->max_depth + 2, sizeof *m->walk_end);
  fer_status st = m->hist && m->walk && m->scratch_lex && m->walk_end ? feri_dfa_init(&m->dfa, &g->nfa)
                                     : feri_fail(FER_STATUS_OUT_OF_MEMORY, "matcher: history");
  if (st == FER_STATUS_OK) st = feri_earley_init(&m->parser, &g->cfg);
  if (st == FER_STATUS_OK) {
    const uint32_t s0 = start_top(m);
    m->hist[0] = (feri_match_pos){m->parser.n_rows, s0, 1, -1};
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

/* Walks the trie below node r, whose bytes take the parser to pos (the parser's rows are pos's),
 * setting the bit of every token whose further bytes the grammar takes; with stop_at_first, stops at
 * the first such token and returns 1 (else the count of tokens set is not kept: returns 0). */
static int walk_below(feri_matcher *m, const feri_toktrie *t, uint32_t r, feri_match_pos pos, uint32_t *mask,
                      int stop_at_first) {
  feri_match_pos *walk = m->walk;
  feri_walk_end *ends = m->walk_end;
  feri_earley *p = &m->parser;
  const uint8_t *byte = t->byte;
  const uint16_t *depth = t->depth;
  const uint32_t *subtree = t->subtree;
  const int32_t *token = t->token;
  walk[depth[r]] = pos;
  ends[depth[r] + 1].state = END_UNKNOWN;
  const uint32_t end = r + subtree[r];
  int found = 0;
  const uint8_t *cls = m->g->nfa.byte_class;
  const size_t ncls = m->g->nfa.n_classes;
  for (uint32_t i = r + 1; i < end;) {
    const uint32_t dpt = depth[i];
    feri_match_pos q = walk[dpt - 1];
    /* the common case: the lexeme in progress takes the byte (a known transition): no parser */
    const int32_t t = m->dfa.trans[(size_t)q.lex * ncls + cls[byte[i]]];
    feri_walk_end *e = &ends[dpt];
    if (t > 0) {
      q.lex = (uint32_t)t;
      q.fresh = 0;
      e->state = END_UNKNOWN; /* its subtree may pop the row a sibling's lexeme end pushed */
    } else if (e->state != END_UNKNOWN && (t == 0 || feri_dfa_step(&m->dfa, q.lex, byte[i]) == 0)) {
      /* a sibling already ended the parent's lexeme (the same push for every byte the lexeme
       * cannot take): reuse it, and start the next lexeme with this byte */
      const uint32_t lex = e->state == END_PUSHED ? feri_dfa_step(&m->dfa, e->start, byte[i]) : 0;
      if (lex == 0) {
        i += subtree[i];
        continue;
      }
      feri_earley_pop_to(p, e->rows);
      q = (feri_match_pos){e->rows, lex, 0, q.token};
    } else {
      feri_earley_pop_to(p, q.rows);
      const uint32_t was_rows = q.rows;
      const int ok = step(m, &q, byte[i]);
      if (q.rows != was_rows) { /* the lexeme ended and was pushed: kept for the siblings */
        e->state = END_PUSHED, e->rows = q.rows, e->start = start_top(m);
      } else if (!ok) { /* the lexeme could not end (or the parser refused it): nor for them */
        e->state = END_DEAD;
      } else { /* the lexeme took the byte: its subtree may pop a pushed row */
        e->state = END_UNKNOWN;
      }
      if (!ok) { /* no word continues this prefix: skip every token under it */
        i += subtree[i];
        continue;
      }
    }
    walk[dpt] = q;
    ends[dpt + 1].state = END_UNKNOWN; /* a new parent for the next depth */
    if (token[i] >= 0) {
      if (stop_at_first) {
        found = 1;
        break;
      }
      feri_mask_set(mask, (uint32_t)token[i]);
    }
    i++;
  }
  feri_earley_pop_to(p, pos.rows);
  return found;
}

/* Orders an entry's front nodes by (state before them, byte): the parser's step at a lexeme's end
 * depends on those two alone (every front node starts from the same rows), so a mask takes it once
 * per run of equal keys (a JSON string's thousands of tokens ending in `",` share one step). A
 * counting sort over the distinct keys (few: a hash of them), stable, linear in the nodes. */
static void group_fronts(const feri_toktrie *t, feri_mask_cache *e) {
  enum { SLOTS = 4096 };
  const uint32_t n = e->n_front;
  uint64_t *slot_key = malloc(sizeof *slot_key * SLOTS);
  uint32_t *slot_count = calloc(SLOTS, sizeof *slot_count), *at = malloc(sizeof *at * (n ? n : 1));
  uint32_t *front = malloc(sizeof *front * (n ? n : 1)), *front_lex = malloc(sizeof *front_lex * (n ? n : 1));
  int ok = slot_key && slot_count && at && front && front_lex;
  for (uint32_t i = 0; ok && i < SLOTS; i++) slot_key[i] = UINT64_MAX;
  for (uint32_t k = 0; ok && k < n; k++) { /* each node's slot (its key's), counted */
    const uint64_t key = (uint64_t)e->front_lex[k] << 8 | t->byte[e->front[k]];
    uint32_t h = (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 52), probes = 0;
    while (slot_key[h] != UINT64_MAX && slot_key[h] != key && probes++ < SLOTS) h = (h + 1) % SLOTS;
    if (probes >= SLOTS) ok = 0; /* more distinct keys than slots: left ungrouped */
    slot_key[h] = key;
    slot_count[h]++;
    at[k] = h;
  }
  if (ok && n > 0) {
    uint32_t sum = 0;
    for (uint32_t i = 0; i < SLOTS; i++) { /* counts to starting offsets */
      const uint32_t c = slot_count[i];
      slot_count[i] = sum;
      sum += c;
    }
    for (uint32_t k = 0; k < n; k++) {
      const uint32_t to = slot_count[at[k]]++;
      front[to] = e->front[k], front_lex[to] = e->front_lex[k];
    }
    memcpy(e->front, front, sizeof *front * n), memcpy(e->front_lex, front_lex, sizeof *front_lex * n);
  }
  free(slot_key), free(slot_count), free(at), free(front), free(front_lex); /* ungrouped: the same mask, a step per node */
}

/* The entry of lexer state (lex, fresh), built on first use; NULL past MAX_CACHE or out of memory
 * (the caller then walks as before). */
static const feri_mask_cache *cache_for(feri_matcher *m, uint32_t lex, uint32_t fresh) {
  for (uint32_t i = 0; i < m->n_cache; i++)
    if (m->cache[i].lex == lex && m->cache[i].fresh == fresh) return &m->cache[i];
  if (m->n_cache >= MAX_CACHE) return NULL;
  if (!m->cache && !(m->cache = calloc(MAX_CACHE, sizeof *m->cache))) return NULL;
  /* where the lexeme takes every run of string-body characters, the slice's tokens are inside
   * without a walk, and only the other tokens' trie is walked */
  const int sliced = m->slice != NULL && feri_slice_subsumes(&m->dfa, lex);
  const feri_toktrie *t = sliced ? &m->slice->rest : m->trie;
  const size_t words = feri_mask_words(m->trie->n_vocab);
  feri_mask_cache e = {lex, fresh, t, calloc(words, sizeof(uint32_t)), NULL, NULL, 0};
  uint32_t cap = 0;
  if (!e.inside) return NULL;
  if (sliced) memcpy(e.inside, m->slice->mask, words * sizeof *e.inside);
  uint32_t *st = m->scratch_lex;
  st[0] = lex;
  int ok = 1;
  for (uint32_t i = 1; i < t->n_nodes && ok;) {
    const uint32_t d = t->depth[i];
    const uint32_t s = feri_dfa_step(&m->dfa, st[d - 1], t->byte[i]);
    if (s == 0) {
      uint32_t na;
      (void)feri_dfa_accepts(&m->dfa, st[d - 1], &na);
      if (na > 0 && !(fresh && d == 1)) { /* the lexeme could end here: the parser decides */
        if (e.n_front == cap) {
          cap = cap ? 2 * cap : 256;
          uint32_t *f = realloc(e.front, sizeof *f * cap), *fl = f ? realloc(e.front_lex, sizeof *fl * cap) : NULL;
          if (f) e.front = f;
          if (fl) e.front_lex = fl;
          if (!f || !fl) ok = 0;
        }
        if (ok) e.front[e.n_front] = i, e.front_lex[e.n_front++] = st[d - 1];
      }
      i += t->subtree[i];
      continue;
    }
    st[d] = s;
    if (t->token[i] >= 0) feri_mask_set(e.inside, (uint32_t)t->token[i]);
    i++;
  }
  if (!ok || m->dfa.err) {
    free(e.inside), free(e.front), free(e.front_lex);
    return NULL;
  }
  group_fronts(t, &e);
  m->cache[m->n_cache] = e;
  return &m->cache[m->n_cache++];
}

/* The trie node of bytes s[0 .. n) (UINT32_MAX when no token starts with them). */
static uint32_t node_at(const feri_toktrie *t, const uint8_t *s, uint32_t n) {
  uint32_t node = 0;
  for (uint32_t k = 0; k < n; k++) {
    uint32_t c = node + 1;
    const uint32_t end = node + t->subtree[node];
    while (c < end && t->byte[c] != s[k]) c += t->subtree[c];
    if (c >= end) return UINT32_MAX;
    node = c;
  }
  return node;
}

/* Most bytes forced in one step (a grammar that forces forever stops here). */
enum { MAX_FORCED = 4096 };

/* Pushes the bytes the grammar forces from *pos (the parser at pos's rows) into m->forced and the
 * parser: while the output is not a word and exactly one byte can follow. Their count. */
static uint32_t force(feri_matcher *m, feri_match_pos *pos) {
  const feri_nfa *nfa = &m->g->nfa;
  uint32_t n = 0;
  while (n < MAX_FORCED && !accepting_at(m, pos)) {
    /* a step depends only on the byte's class: one try per class, and a class of two bytes or
     * more that works allows more than one byte */
    uint32_t viable = 0, only = 0;
    /* first the bytes the lexeme in progress takes: two of them and nothing is forced */
    for (uint32_t c = 0; c < nfa->n_classes && viable < 2; c++) {
      if (feri_dfa_step(&m->dfa, pos->lex, (uint8_t)nfa->class_byte[c]) != 0) viable += nfa->class_size[c];
    }
    if (viable >= 2) break;
    viable = 0;
    for (uint32_t c = 0; c < nfa->n_classes && viable < 2; c++) {
      feri_match_pos q = *pos;
      const uint8_t b = (uint8_t)nfa->class_byte[c];
      const int ok = step(m, &q, b);
      feri_earley_pop_to(&m->parser, pos->rows);
      if (!ok) continue;
      viable += nfa->class_size[c];
      only = b;
    }
    if (viable != 1) break;
    if (n == m->cap_forced) {
      const uint32_t cap = m->cap_forced ? 2 * m->cap_forced : 64;
      uint8_t *f = realloc(m->forced, cap);
      if (!f) break; /* no more forcing: the mask is then the unforced one, still correct */
      m->forced = f;
      m->cap_forced = cap;
    }
    (void)step(m, pos, (uint8_t)only);
    m->forced[n++] = (uint8_t)only;
  }
  return n;
}

/* The matcher's scratch bytes, at least n of them (grown once, then reused: no allocation per step
 * in the steady state); NULL when out of memory. */
static uint8_t *scratch(feri_matcher *m, size_t n) {
  if (n > m->cap_scratch) {
    size_t cap = m->cap_scratch ? m->cap_scratch : 256;
    while (cap < n) cap *= 2;
    uint8_t *q = realloc(m->scratch, cap);
    if (!q) return NULL;
    m->scratch = q;
    m->cap_scratch = cap;
  }
  return m->scratch;
}

/* Room for `need` tokens in m->ftoks. */
static int room(feri_matcher *m, size_t need) {
  if (need <= m->cap_ftoks) return 1;
  if (need > UINT32_MAX / 2) return 0;
  uint32_t cap = m->cap_ftoks ? m->cap_ftoks : 64;
  while (cap < need) cap *= 2;
  int32_t *q = realloc(m->ftoks, sizeof *q * cap);
  if (!q) return 0;
  m->ftoks = q;
  m->cap_ftoks = cap;
  return 1;
}

static int push_tok(feri_matcher *m, uint32_t *n, int32_t id) {
  if (!room(m, (size_t)*n + 1)) return 0;
  m->ftoks[(*n)++] = id;
  return 1;
}

/* The canonical tokens of s[0 .. len) appended to m->ftoks from *n, as llguidance makes them: the
 * tokenizer's encoding of each well-formed UTF-8 run, the longest trie tokens for the bytes between
 * runs. 0 on failure (memory or the tokenizer). */
static int tokenize(feri_matcher *m, const uint8_t *s, size_t len, uint32_t *n) {
  const feri_toktrie *t = m->trie;
  size_t i = 0;
  while (i < len) {
    const size_t ok = feri_utf8_first_invalid(s + i, len - i);
    if (ok > 0) {
      size_t cnt = 0;
      fer_status st = fer_tokenizer_encode(m->tok, (const char *)s + i, ok, 0, NULL, 0, &cnt);
      if (st != FER_STATUS_OK && st != FER_STATUS_BUFFER_TOO_SMALL) return 0;
      if (!room(m, (size_t)*n + cnt)) return 0;
      st = fer_tokenizer_encode(m->tok, (const char *)s + i, ok, 0, m->ftoks + *n, cnt, &cnt);
      if (st != FER_STATUS_OK) return 0;
      *n += (uint32_t)cnt;
      i += ok;
      continue;
    }
    const size_t bad = feri_utf8_maximal_subpart(s + i, len - i); /* greedy over the ill-formed bytes */
    const size_t stop = i + bad;
    while (i < stop) {
      uint32_t node = 0, best_len = 0;
      int32_t best = -1;
      for (size_t j = i; j < stop; j++) {
        uint32_t c = node + 1;
        const uint32_t end = node + t->subtree[node];
        while (c < end && t->byte[c] != s[j]) c += t->subtree[c];
        if (c >= end) break;
        node = c;
        if (t->token[node] >= 0) best = t->token[node], best_len = (uint32_t)(j - i + 1);
      }
      if (best < 0) { /* a byte no token spells: skipped, as llguidance does */
        i++;
        continue;
      }
      if (!push_tok(m, n, best)) return 0;
      i += best_len;
    }
  }
  return 1;
}

fer_status feri_matcher_fill_mask(feri_matcher *m, uint32_t *mask, size_t words) {
  const feri_toktrie *t = m->trie;
  const size_t need = feri_mask_words(t->n_vocab);
  if (mask == NULL) return feri_fail(FER_STATUS_NULL_ARG, "matcher: mask is NULL");
  if (words < need) return feri_fail(FER_STATUS_BUFFER_TOO_SMALL, "matcher: mask of %zu words, %zu needed", words, need);
  memset(mask, 0, words * sizeof *mask);
  if (m->ended) { /* after the end only the end again, as llguidance writes it */
    if (m->eos >= 0) feri_mask_set(mask, (uint32_t)m->eos);
    return FER_STATUS_OK;
  }
  feri_earley *p = &m->parser;
  const feri_match_pos start = m->hist[m->n_hist - 1];
  feri_earley_pop_to(p, start.rows);
  feri_match_pos pos = start;
  const uint32_t nf = m->tok ? force(m, &pos) : 0;
  if (nf == 0) {
    const feri_mask_cache *e = cache_for(m, pos.lex, pos.fresh);
    if (e) { /* the lexeme's share from the cache, then the parser below each place it can end */
      memcpy(mask, e->inside, feri_mask_words(t->n_vocab) * sizeof *mask);
      const feri_toktrie *ft = e->trie; /* the nodes of front are this trie's */
      feri_match_pos q = pos;
      int stepped = 0;
      for (uint32_t k = 0; k < e->n_front; k++) {
        const uint32_t x = e->front[k];
        if (k == 0 || e->front_lex[k] != e->front_lex[k - 1] || ft->byte[x] != ft->byte[e->front[k - 1]]) {
          /* a new (state, byte): the lexeme ends and the parser steps, once for the whole run */
          q = (feri_match_pos){pos.rows, e->front_lex[k], 0, pos.token};
          feri_earley_pop_to(p, pos.rows);
          stepped = step(m, &q, ft->byte[x]);
        }
        if (!stepped) continue;
        if (ft->token[x] >= 0) feri_mask_set(mask, (uint32_t)ft->token[x]);
        (void)walk_below(m, e->trie, x, q, mask, 0); /* leaves the parser at q's rows */
      }
      feri_earley_pop_to(p, pos.rows);
    } else {
      (void)walk_below(m, m->trie, 0, pos, mask, 0);
    }
    for (uint32_t k = 0; k < t->n_dups; k++)
      if (feri_mask_get(mask, (uint32_t)t->token[t->dup_node[k]])) feri_mask_set(mask, (uint32_t)t->dup_token[k]);
    if (m->eos >= 0 && accepting_at(m, &pos)) feri_mask_set(mask, (uint32_t)m->eos);
  } else {
    /* the forced bytes after the last token's, tokenized canonically with it in front */
    const int32_t last = start.token;
    const uint32_t last_len = last >= 0 ? t->len[last] : 0;
    uint8_t *fb = scratch(m, (size_t)last_len + nf);
    uint32_t n = 0, fixed = 0;
    int ok = fb != NULL;
    if (ok) {
      if (last_len) memcpy(fb, t->blob + t->off[last], last_len);
      memcpy(fb + last_len, m->forced, nf);
      ok = tokenize(m, fb, (size_t)last_len + nf, &n);
      if (ok && last >= 0 && n > 0 && m->ftoks[0] == last) {
        fixed = 1;
      } else if (ok) { /* the last token is not the start of the canonical tokens: the new bytes alone */
        n = 0;
        ok = tokenize(m, m->forced, nf, &n);
      }
    }
    /* chop: the trailing tokens a longer token could replace (llguidance's chop_tokens) */
    uint32_t keep = n, chop_bytes = 0;
    if (ok && n > fixed) {
      const uint32_t from = n - fixed > 4 ? n - 4 : fixed;
      size_t sl = 0;
      for (uint32_t k = from; k < n; k++) sl += t->len[m->ftoks[k]];
      uint8_t *suf = scratch(m, sl);
      if (suf) {
        size_t at = 0;
        for (uint32_t k = from; k < n; k++) memcpy(suf + at, t->blob + t->off[m->ftoks[k]], t->len[m->ftoks[k]]), at += t->len[m->ftoks[k]];
        const size_t s0 = sl > t->max_depth ? sl - t->max_depth : 0;
        for (size_t i = s0; i < sl; i++) {
          const uint32_t node = node_at(t, suf + i, (uint32_t)(sl - i));
          if (node == UINT32_MAX || !walk_below(m, m->trie, node, pos, NULL, 1)) continue;
          while (keep > fixed && chop_bytes < sl - i) chop_bytes += t->len[m->ftoks[--keep]];
          break;
        }
      }
    }
    if (ok && keep > fixed) { /* forced tokens: the first of them alone */
      feri_mask_set(mask, (uint32_t)m->ftoks[fixed]);
    } else { /* every token that is a prefix of the forced bytes, or goes on from them into the grammar */
      const uint32_t plen = ok ? (chop_bytes < nf ? chop_bytes : nf) : nf;
      const uint8_t *pre = m->forced + (nf - plen);
      uint32_t node = 0;
      for (uint32_t k = 0; k < plen && node != UINT32_MAX; k++) {
        uint32_t c = node + 1;
        const uint32_t end = node + t->subtree[node];
        while (c < end && t->byte[c] != pre[k]) c += t->subtree[c];
        node = c < end ? c : UINT32_MAX;
        if (node != UINT32_MAX && t->token[node] >= 0) feri_mask_set(mask, (uint32_t)t->token[node]);
      }
      if (node != UINT32_MAX) (void)walk_below(m, m->trie, node, pos, mask, 0);
      for (uint32_t k = 0; k < t->n_dups; k++)
        if (feri_mask_get(mask, (uint32_t)t->token[t->dup_node[k]])) feri_mask_set(mask, (uint32_t)t->dup_token[k]);
    }
  }
  feri_earley_pop_to(p, start.rows);
  if (m->dfa.err) return m->dfa.err;
  if (p->err) return p->err;
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
  pos.token = token;
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
