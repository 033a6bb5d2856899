/* slice.c: the JSON string-body slice of slice.h. */
#include "grammar/slice.h"

#include <stdlib.h>
#include <string.h>

#include "core/status.h"

/* The slice's language as a byte automaton over UTF-8: state 0 is between characters; the others
 * wait for the rest of a multi-byte character (the byte range its next byte must fall in, and what
 * follows). A byte's successor, or -1 when the slice has no string going on with it. */
enum { S_CHAR, S_CONT1, S_CONT2, S_CONT3, S_E0, S_ED, S_F0, S_F4, S_N };

static int next_state(int s, uint8_t b) {
  switch (s) {
  case S_CHAR:
    if (b < 0x80) return b >= 0x20 && b != 0x7F && b != '"' && b != '\\' ? S_CHAR : -1;
    if (b >= 0xC2 && b <= 0xDF) return S_CONT1;
    if (b == 0xE0) return S_E0;
    if (b == 0xED) return S_ED;
    if (b >= 0xE1 && b <= 0xEF) return S_CONT2;
    if (b == 0xF0) return S_F0;
    if (b >= 0xF1 && b <= 0xF3) return S_CONT3;
    if (b == 0xF4) return S_F4;
    return -1;
  case S_CONT1: return b >= 0x80 && b <= 0xBF ? S_CHAR : -1;
  case S_CONT2: return b >= 0x80 && b <= 0xBF ? S_CONT1 : -1;
  case S_CONT3: return b >= 0x80 && b <= 0xBF ? S_CONT2 : -1;
  case S_E0: return b >= 0xA0 && b <= 0xBF ? S_CONT1 : -1;
  case S_ED: return b >= 0x80 && b <= 0x9F ? S_CONT1 : -1;
  case S_F0: return b >= 0x90 && b <= 0xBF ? S_CONT2 : -1;
  case S_F4: return b >= 0x80 && b <= 0x8F ? S_CONT2 : -1;
  default: return -1;
  }
}

/* 1 when bytes[0 .. n) are one or more whole characters of the slice. */
static int in_slice(const uint8_t *bytes, uint32_t n) {
  int s = S_CHAR;
  for (uint32_t i = 0; i < n && s >= 0; i++) s = next_state(s, bytes[i]);
  return n > 0 && s == S_CHAR;
}

fer_status feri_slice_build(const feri_toktrie *t, feri_slice *out) {
  memset(out, 0, sizeof *out);
  const size_t words = feri_mask_words(t->n_vocab);
  out->mask = calloc(words, sizeof *out->mask);
  uint8_t *rest = calloc(t->n_vocab ? t->n_vocab : 1, 1);
  const uint8_t **bytes = calloc(t->n_vocab ? t->n_vocab : 1, sizeof *bytes);
  if (!out->mask || !rest || !bytes) {
    free(rest), free(bytes), feri_slice_free(out);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "slice: %u tokens", t->n_vocab);
  }
  for (uint32_t id = 0; id < t->n_vocab; id++) {
    bytes[id] = t->blob + t->off[id];
    if (!t->in_trie[id]) continue;
    if (in_slice(bytes[id], t->len[id])) feri_mask_set(out->mask, id), out->n_tokens++;
    else rest[id] = 1;
  }
  const fer_status st = feri_toktrie_build(bytes, t->len, t->n_vocab, rest, &out->rest);
  free(rest), free(bytes);
  if (st != FER_STATUS_OK) feri_slice_free(out);
  return st;
}

void feri_slice_free(feri_slice *s) {
  if (!s) return;
  free(s->mask);
  feri_toktrie_free(&s->rest);
  memset(s, 0, sizeof *s);
}

int feri_slice_subsumes(feri_dfa *d, uint32_t q) {
  enum { BUDGET = 256 }; /* pairs: a JSON string's interior needs a handful, a free key beside named ones a few dozen */
  uint32_t pair_dfa[BUDGET];
  uint8_t pair_s[BUDGET];
  uint32_t n = 0, done = 0;
  pair_dfa[n] = q, pair_s[n++] = S_CHAR;
  while (done < n) {
    const uint32_t dq = pair_dfa[done];
    const int s = pair_s[done++];
    for (int b = 0; b < 256; b++) {
      const int s2 = next_state(s, (uint8_t)b);
      if (s2 < 0) continue;
      const uint32_t d2 = feri_dfa_step(d, dq, (uint8_t)b);
      if (d2 == 0 || d->err) return 0; /* a string of the slice the lexeme cannot take */
      uint32_t k = 0;
      while (k < n && !(pair_dfa[k] == d2 && pair_s[k] == s2)) k++;
      if (k < n) continue;
      if (n == BUDGET) return 0;
      pair_dfa[n] = d2, pair_s[n++] = (uint8_t)s2;
    }
  }
  return 1;
}
