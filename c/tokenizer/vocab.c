/* vocab.c: open-addressing tables sized once at load (load factor <= 1/2), never resized. */
#include "tokenizer/vocab.h"

#include <stdlib.h>
#include <stdbool.h>
#include <string.h>

#include "core/status.h"

static uint32_t table_size(uint64_t n) {
  uint64_t size = 16;
  while (size < 2 * n) size <<= 1;
  return (uint32_t)size;
}

fer_status feri_vocab_init(feri_vocab *v, uint32_t n_ids) {
  memset(v, 0, sizeof(*v));
  if (n_ids > (1u << 28)) return feri_fail(FER_STATUS_CORRUPT, "vocabulary of %u ids is too large", n_ids);
  uint32_t size = table_size(n_ids);
  v->off = calloc(n_ids ? n_ids : 1, sizeof(uint64_t));
  v->slots = calloc(size, sizeof(uint32_t));
  v->bytes_cap = (size_t)n_ids * 8 + 64;
  v->bytes = malloc(v->bytes_cap);
  if (!v->off || !v->slots || !v->bytes) {
    feri_vocab_free(v);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "vocabulary of %u ids", n_ids);
  }
  v->n = n_ids;
  v->mask = size - 1;
  return FER_STATUS_OK;
}

void feri_vocab_free(feri_vocab *v) {
  free(v->bytes);
  free(v->off);
  free(v->slots);
  memset(v, 0, sizeof(*v));
}

static int text_equal(const feri_vocab *v, uint32_t id, const uint8_t *text, size_t len) {
  size_t l;
  const uint8_t *t = feri_vocab_text(v, id, &l);
  return l == len && memcmp(t, text, len) == 0;
}

int32_t feri_vocab_find(const feri_vocab *v, const uint8_t *text, size_t len) {
  if (v->n == 0) return -1;
  uint32_t i = (uint32_t)feri_hash_bytes(text, len) & v->mask;
  for (;;) {
    uint32_t s = v->slots[i];
    if (s == 0) return -1;
    if (text_equal(v, s - 1, text, len)) return (int32_t)(s - 1);
    i = (i + 1) & v->mask;
  }
}

/* mode: 0 refuse a repeated text, 1 the later id wins lookups, 2 text only (no lookup entry) */
static fer_status set_text(feri_vocab *v, uint32_t id, const uint8_t *text, size_t len, int mode) {
  if (id >= v->n) return feri_fail(FER_STATUS_CORRUPT, "token id %u is past the vocabulary size %u", id, v->n);
  if (len == 0 || len >= (1u << 24)) return feri_fail(FER_STATUS_CORRUPT, "token %u has length %zu", id, len);
  if (v->off[id] != 0) return feri_fail(FER_STATUS_CORRUPT, "token id %u is given twice", id);
  int32_t other = feri_vocab_find(v, text, len);
  if (other >= 0 && mode == 0) {
    return feri_fail(FER_STATUS_CORRUPT, "tokens %d and %u have the same text '%.*s'", other, id,
                     (int)(len > 40 ? 40 : len), (const char *)text);
  }
  if (v->bytes_len + len > v->bytes_cap) {
    size_t cap = v->bytes_cap * 2 + len;
    uint8_t *b = realloc(v->bytes, cap);
    if (!b) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "vocabulary text");
    v->bytes = b;
    v->bytes_cap = cap;
  }
  if (v->bytes_len >= ((uint64_t)1 << 40)) return feri_fail(FER_STATUS_CORRUPT, "vocabulary text too large");
  memcpy(v->bytes + v->bytes_len, text, len);
  v->off[id] = (uint64_t)v->bytes_len << 24 | len;
  v->bytes_len += len;
  if (mode == 2 && other >= 0) return FER_STATUS_OK;
  uint32_t i = (uint32_t)feri_hash_bytes(text, len) & v->mask;
  while (v->slots[i] != 0 && v->slots[i] != (uint32_t)other + 1) i = (i + 1) & v->mask;
  v->slots[i] = id + 1; /* a duplicate (last_wins) takes over the earlier id's slot */
  return FER_STATUS_OK;
}

fer_status feri_vocab_set(feri_vocab *v, uint32_t id, const uint8_t *text, size_t len) {
  return set_text(v, id, text, len, 0);
}

fer_status feri_vocab_set_last_wins(feri_vocab *v, uint32_t id, const uint8_t *text, size_t len) {
  return set_text(v, id, text, len, 1);
}

fer_status feri_vocab_set_text_only(feri_vocab *v, uint32_t id, const uint8_t *text, size_t len) {
  return set_text(v, id, text, len, 2);
}

fer_status feri_merges_init(feri_merges *m, uint32_t n_merges) {
  memset(m, 0, sizeof(*m));
  if (n_merges > (1u << 27)) return feri_fail(FER_STATUS_CORRUPT, "%u merges is too many", n_merges);
  uint32_t size = table_size(n_merges);
  m->keys = malloc((size_t)size * sizeof(uint64_t));
  m->values = malloc((size_t)size * sizeof(uint64_t));
  if (!m->keys || !m->values) {
    feri_merges_free(m);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "merge table of %u", n_merges);
  }
  memset(m->keys, 0xFF, (size_t)size * sizeof(uint64_t));
  m->mask = size - 1;
  return FER_STATUS_OK;
}

void feri_merges_free(feri_merges *m) {
  free(m->keys);
  free(m->values);
  memset(m, 0, sizeof(*m));
}

fer_status feri_merges_add(feri_merges *m, uint32_t left, uint32_t right, uint32_t rank, uint32_t result) {
  if (m->n >= m->mask / 2 + 1) return feri_fail(FER_STATUS_CORRUPT, "more merges than declared");
  uint64_t key = (uint64_t)left << 32 | right;
  uint32_t i = (uint32_t)feri_merges_mix(key) & m->mask;
  while (m->keys[i] != UINT64_MAX) {
    if (m->keys[i] == key) {
      return feri_fail(FER_STATUS_CORRUPT, "merge %u repeats the pair of merge %u", rank,
                       (uint32_t)(m->values[i] >> 32));
    }
    i = (i + 1) & m->mask;
  }
  m->keys[i] = key;
  m->values[i] = (uint64_t)rank << 32 | result;
  m->n++;
  return FER_STATUS_OK;
}
