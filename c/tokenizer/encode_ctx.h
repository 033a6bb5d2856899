/* encode_ctx.h: per-call scratch of the encoder (regex match data, BPE arrays, the word cache).
 * A tokenizer keeps one warm context; a call takes it atomically or makes its own, so concurrent
 * calls never share one. */
#ifndef FERI_TOKENIZER_ENCODE_CTX_H
#define FERI_TOKENIZER_ENCODE_CTX_H

#include "tokenizer/tokenizer.h"

#define FERI_PRETOK_MAX_STEPS 16
#define FERI_CACHE_SLOTS 8192
#define FERI_CACHE_WORD 26
#define FERI_CACHE_IDS 8

/* One cached word: its bytes and its ids (words up to 26 bytes that give up to 8 ids). */
typedef struct feri_cache_slot {
  uint32_t tag; /* hash bits, 0 = empty */
  uint8_t word_len, n_ids;
  uint8_t word[FERI_CACHE_WORD];
  int32_t ids[FERI_CACHE_IDS];
} feri_cache_slot;

typedef struct feri_bpe_sym {
  uint32_t id;
  int32_t prev, next;
} feri_bpe_sym;

/* SPM: a symbol is a byte range of the piece; a candidate merge is scored by its token. */
typedef struct feri_spm_sym {
  int32_t start, len, prev, next;
} feri_spm_sym;

typedef struct feri_spm_bigram {
  float score;
  int32_t left;
  int32_t size;
} feri_spm_bigram;

typedef struct feri_buf {
  uint8_t *p;
  size_t len, cap;
} feri_buf;

struct feri_encode_ctx {
  pcre2_match_data *match;
  pcre2_match_context *match_ctx;
  pcre2_jit_stack *jit_stack;
  feri_cache_slot *cache;
  feri_bpe_sym *syms;
  size_t syms_cap;
  uint64_t *heap;
  size_t heap_cap;
  feri_spm_sym *spm_syms;
  feri_spm_bigram *spm_heap;
  size_t spm_cap;
  feri_buf norm[2];                          /* normalizer ping-pong */
  feri_buf prefixed[FERI_PRETOK_MAX_STEPS];  /* pieces given a prefix space, per step */
  /* the output sink: ids[0..cap) written, n counts all */
  int32_t *ids;
  size_t cap, n;
  fer_status status;
};

feri_encode_ctx *feri_encode_ctx_new(void);
void feri_encode_ctx_free(feri_encode_ctx *c);
/* Grows b to hold at least need bytes; false when memory runs out. */
bool feri_buf_reserve(feri_buf *b, size_t need);
/* Appends s[0..n) to b with every occurrence of a (a_len > 0) replaced by b_text; false on OOM. */
bool feri_buf_append_replaced(feri_buf *b, const uint8_t *s, size_t n, const uint8_t *a, size_t a_len,
                              const uint8_t *b_text, size_t b_len);

#endif
