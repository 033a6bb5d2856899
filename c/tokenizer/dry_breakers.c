/* dry_breakers.c: DRY's sequence breakers from strings to token sequences, as llama.cpp prepares
 * them (koboldcpp's get_overlapping_token_sequences): a token whose text contains the string is a
 * breaker alone; a token whose text ends with a start of the string is the head of a breaker whose
 * tail is the rest of the string, tokenized (at most 19 tail tokens, strings cut at 40 bytes). */
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "ferrite.h"

enum { MAX_STRING_BYTES = 40, MAX_TAIL_TOKENS = 19, MAX_BREAKERS = 1 << 20 };

typedef struct growable {
  uint32_t *lengths;
  int32_t *tokens;
  size_t n, n_tokens, cap, cap_tokens;
} growable;

static int grow(growable *g, size_t add_tokens) {
  if (g->n == g->cap) {
    size_t cap = g->cap ? 2 * g->cap : 256;
    uint32_t *l = realloc(g->lengths, cap * sizeof *l);
    if (!l) return 0;
    g->lengths = l, g->cap = cap;
  }
  if (g->n_tokens + add_tokens > g->cap_tokens) {
    size_t cap = g->cap_tokens ? 2 * g->cap_tokens : 1024;
    while (cap < g->n_tokens + add_tokens) cap *= 2;
    int32_t *t = realloc(g->tokens, cap * sizeof *t);
    if (!t) return 0;
    g->tokens = t, g->cap_tokens = cap;
  }
  return 1;
}

/* Appends head ++ tail unless the same breaker was appended for this head since `head_from`. */
static int add(growable *g, size_t head_from, size_t head_from_tok, int32_t head, const int32_t *tail,
               size_t n_tail) {
  size_t at = head_from_tok;
  for (size_t k = head_from; k < g->n; k++) {
    if (g->lengths[k] == n_tail + 1 && (n_tail == 0 || !memcmp(g->tokens + at + 1, tail, n_tail * sizeof *tail)))
      return 1;
    at += g->lengths[k];
  }
  if (!grow(g, n_tail + 1)) return 0;
  g->tokens[g->n_tokens] = head;
  if (n_tail > 0) memcpy(g->tokens + g->n_tokens + 1, tail, n_tail * sizeof *tail); /* tail is NULL when empty */
  g->lengths[g->n++] = (uint32_t)(n_tail + 1);
  g->n_tokens += n_tail + 1;
  return 1;
}

static int contains(const char *hay, size_t n, const char *needle, size_t m) {
  for (size_t i = 0; i + m <= n; i++)
    if (!memcmp(hay + i, needle, m)) return 1;
  return 0;
}

/* The breakers of one string for one token's text; the token's breakers so far start at entry
 * head_from (token head_from_tok). */
static fer_status one_token(const fer_tokenizer *tok, growable *g, size_t head_from, size_t head_from_tok, int32_t id,
                            const char *word, size_t wn, const char *str, size_t sn) {
  if (contains(word, wn, str, sn)) return add(g, head_from, head_from_tok, id, NULL, 0) ? FER_STATUS_OK : FER_STATUS_OUT_OF_MEMORY;
  for (size_t pos = 0; pos < wn; pos++) {
    if (word[pos] != str[0]) continue;
    size_t i = 1;
    while (i < sn && pos + i < wn && word[pos + i] == str[i]) i++;
    if (i < sn && pos + i < wn) continue; /* a mismatch inside the word */
    /* the word ends with str[0..i): the tail is the rest of the string */
    int32_t tail[MAX_STRING_BYTES * 4];
    size_t n_tail = 0;
    fer_status st = fer_tokenizer_encode(tok, str + i, sn - i, FER_ENCODE_NO_SPECIAL_SPLIT | FER_ENCODE_REPLACE_INVALID_UTF8,
                                         tail, sizeof tail / sizeof *tail, &n_tail);
    if (st != FER_STATUS_OK) return st;
    if (n_tail > MAX_TAIL_TOKENS) n_tail = MAX_TAIL_TOKENS;
    if (!add(g, head_from, head_from_tok, id, tail, n_tail)) return FER_STATUS_OUT_OF_MEMORY;
  }
  return FER_STATUS_OK;
}

fer_status fer_tokenizer_dry_breakers(const fer_tokenizer *tok, const char *const *strings, size_t n_strings,
                                      uint32_t *out_lengths, size_t lengths_cap, int32_t *out_tokens,
                                      size_t tokens_cap, size_t *out_n_breakers, size_t *out_n_tokens) {
  static const char *const fn = "fer_tokenizer_dry_breakers";
  feri_error_clear();
  if (out_n_breakers) *out_n_breakers = 0;
  if (out_n_tokens) *out_n_tokens = 0;
  if (!tok || !out_n_breakers || !out_n_tokens || (!strings && n_strings > 0) || (!out_lengths && lengths_cap > 0) ||
      (!out_tokens && tokens_cap > 0))
    return feri_fail(FER_STATUS_NULL_ARG, "%s: NULL tokenizer, strings, output array or count", fn);
  for (size_t s = 0; s < n_strings; s++)
    if (!strings[s]) return feri_fail(FER_STATUS_NULL_ARG, "%s: strings[%zu] is NULL", fn, s);
  fer_tokenizer_info info;
  fer_status st = fer_tokenizer_get_info(tok, &info);
  if (st != FER_STATUS_OK) return st;
  growable g = {0};
  char word[1024];
  for (int32_t id = 0; st == FER_STATUS_OK && (uint32_t)id < info.vocab_size; id++) {
    size_t wn = 0;
    const size_t head_from = g.n, head_from_tok = g.n_tokens;
    st = fer_tokenizer_decode(tok, &id, 1, 0, word, sizeof word, &wn);
    if (st == FER_STATUS_BUFFER_TOO_SMALL) { /* no breaker string is that long: the token's end is what counts */
      st = FER_STATUS_OK;
      continue;
    }
    for (size_t s = 0; st == FER_STATUS_OK && s < n_strings; s++) {
      size_t sn = strlen(strings[s]);
      if (sn == 0) continue; /* llama.cpp skips empty breakers */
      if (sn > MAX_STRING_BYTES) sn = MAX_STRING_BYTES;
      st = one_token(tok, &g, head_from, head_from_tok, id, word, wn, strings[s], sn);
    }
    if (g.n > MAX_BREAKERS)
      st = feri_fail(FER_STATUS_INVALID_ARG, "%s: the strings make more than %d breakers", fn, MAX_BREAKERS);
  }
  if (st == FER_STATUS_OUT_OF_MEMORY) st = feri_fail(st, "%s: out of memory", fn);
  if (st == FER_STATUS_OK) {
    *out_n_breakers = g.n;
    *out_n_tokens = g.n_tokens;
    if (g.n > lengths_cap || g.n_tokens > tokens_cap) {
      st = feri_fail(FER_STATUS_BUFFER_TOO_SMALL, "%s: %zu breakers of %zu tokens do not fit %zu and %zu", fn, g.n,
                     g.n_tokens, lengths_cap, tokens_cap);
    } else {
      if (g.n) memcpy(out_lengths, g.lengths, g.n * sizeof *g.lengths);
      if (g.n_tokens) memcpy(out_tokens, g.tokens, g.n_tokens * sizeof *g.tokens);
    }
  }
  free(g.lengths), free(g.tokens);
  return st;
}
