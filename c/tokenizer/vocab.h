/* vocab.h: the token table (id <-> bytes) and the merge table ((left, right) -> rank, result). */
#ifndef FERI_TOKENIZER_VOCAB_H
#define FERI_TOKENIZER_VOCAB_H

#include <stddef.h>
#include <stdint.h>

#include "ferrite.h"

/* Token texts in one arena, indexed by id, with an open-addressing hash from text to id. Ids are
 * dense 0..n-1; an id never given text (a hole in a file's numbering) has length 0 and no entry. */
typedef struct feri_vocab {
  uint8_t *bytes;
  size_t bytes_len, bytes_cap;
  uint64_t *off; /* off[id] = start << 24 | length (lengths < 16 MiB) */
  uint32_t n;    /* ids 0..n-1 */
  uint32_t *slots; /* id + 1, 0 = empty */
  uint32_t mask;
} feri_vocab;

fer_status feri_vocab_init(feri_vocab *v, uint32_t n_ids);
void feri_vocab_free(feri_vocab *v);
/* Gives id its text; CORRUPT naming both ids when another id already has the same text, or id has
 * text already. */
fer_status feri_vocab_set(feri_vocab *v, uint32_t id, const uint8_t *text, size_t len);
/* As feri_vocab_set, but when another id already has the text, text lookups move to this id (the
 * later one wins, as in llama.cpp's token map); both ids keep the text for decoding. */
fer_status feri_vocab_set_last_wins(feri_vocab *v, uint32_t id, const uint8_t *text, size_t len);
/* Gives id its text for decoding only: lookups of the text keep finding the id that has it (an
 * added token that repeats a model token's text must not change what the model's merges find). */
fer_status feri_vocab_set_text_only(feri_vocab *v, uint32_t id, const uint8_t *text, size_t len);
/* Id of text, or -1. */
int32_t feri_vocab_find(const feri_vocab *v, const uint8_t *text, size_t len);

static inline const uint8_t *feri_vocab_text(const feri_vocab *v, uint32_t id, size_t *len) {
  *len = (size_t)(v->off[id] & 0xFFFFFF);
  return v->bytes + (v->off[id] >> 24);
}

static inline uint64_t feri_hash_bytes(const uint8_t *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)n;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h ^ (h >> 29);
}

/* Merges: key (left << 32 | right) -> value (rank << 32 | result). */
typedef struct feri_merges {
  uint64_t *keys;
  uint64_t *values;
  uint32_t mask;
  uint32_t n;
} feri_merges;

fer_status feri_merges_init(feri_merges *m, uint32_t n_merges);
void feri_merges_free(feri_merges *m);
/* Adds a merge; CORRUPT when the pair already has one (the first rank wins in the references, but
 * a duplicate means a damaged file). */
fer_status feri_merges_add(feri_merges *m, uint32_t left, uint32_t right, uint32_t rank, uint32_t result);

static inline uint64_t feri_merges_mix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  return k;
}

/* rank << 32 | result of the pair, or UINT64_MAX when the pair does not merge. */
static inline uint64_t feri_merges_find(const feri_merges *m, uint32_t left, uint32_t right) {
  uint64_t key = (uint64_t)left << 32 | right;
  uint32_t i = (uint32_t)feri_merges_mix(key) & m->mask;
  for (;;) {
    uint64_t k = m->keys[i];
    if (k == key) return m->values[i];
    if (k == UINT64_MAX) return UINT64_MAX;
    i = (i + 1) & m->mask;
  }
}

#endif
