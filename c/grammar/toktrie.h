/* toktrie.h: a vocabulary's token byte strings as one flat trie, for computing a grammar's token
 * mask by walking every token at once (llguidance's layout: nodes in depth-first preorder, each with
 * its depth and the size of its subtree, so a walk that rejects a prefix skips all tokens under it
 * with one addition).
 *
 * Node 0 is the root (the empty string). Node i > 0 stands for the bytes on the path to it; its
 * last byte is byte[i]. Children follow their parent in increasing byte order. A node where a
 * token's bytes end holds its id; tokens whose bytes repeat another token's are listed apart
 * (dup_node, dup_token) and take that node's verdict. Tokens left out of the trie (control tokens,
 * empty strings) are never allowed by a walk. */
#ifndef FERI_GRAMMAR_TOKTRIE_H
#define FERI_GRAMMAR_TOKTRIE_H

#include <stddef.h>
#include <stdint.h>

#include "ferrite.h"

typedef struct feri_toktrie {
  uint32_t n_nodes;
  uint8_t *byte;     /* node i's last byte (root: 0) */
  uint16_t *depth;   /* bytes on the path to node i (root: 0) */
  uint32_t *subtree; /* nodes in i's subtree, i included */
  int32_t *token;    /* the token whose bytes end at node i, or -1 */
  uint32_t n_dups;
  uint32_t *dup_node;
  int32_t *dup_token;
  uint32_t n_vocab;   /* the mask's size in tokens (ids are < n_vocab) */
  uint8_t *blob;      /* every token's bytes, in the trie or not: token t's at blob + off[t], len[t] */
  uint64_t *off;
  uint32_t *len;
  uint8_t *in_trie;   /* 1 where token t is in the trie (a walk can allow it) */
  uint32_t max_depth; /* the longest token, in bytes */
} feri_toktrie;

/* Most bytes a token may have here (the depth field's range). */
enum { FERI_TOKTRIE_MAX_BYTES = 65535 };

/* Builds the trie of tokens 0 .. n_vocab - 1: token t's bytes are bytes[t][0 .. lens[t]); a token
 * with include[t] == 0 (or include NULL: every token with bytes) or no bytes is left out.
 * INVALID_ARG for a token longer than FERI_TOKTRIE_MAX_BYTES (naming it), OUT_OF_MEMORY. */
fer_status feri_toktrie_build(const uint8_t *const *bytes, const uint32_t *lens, uint32_t n_vocab,
                              const uint8_t *include, feri_toktrie *out);

void feri_toktrie_free(feri_toktrie *t);

/* The trie of a vocabulary of the 256 bytes, one token each, and token 256 (no bytes, so never in
 * the trie: an end-of-sequence token), for tests and fuzzing. OUT_OF_MEMORY. */
fer_status feri_toktrie_build_bytes(feri_toktrie *out);

/* The trie of a tokenizer's vocabulary for a model with n_vocab logits (0: the tokenizer's size;
 * ids past the tokenizer are never allowed): each token's output bytes in mid-sequence, control
 * tokens (special added tokens, and added tokens written <...>) left out. INVALID_ARG when n_vocab
 * is smaller than the vocabulary. */
fer_status feri_toktrie_from_tokenizer(const fer_tokenizer *tok, uint32_t n_vocab, feri_toktrie *out);

/* 32-bit words of a mask over n tokens (bit t % 32 of word t / 32: llguidance's int32 layout). */
static inline size_t feri_mask_words(uint32_t n) { return ((size_t)n + 31) / 32; }

static inline void feri_mask_set(uint32_t *mask, uint32_t t) { mask[t / 32] |= 1u << (t % 32); }

static inline int feri_mask_get(const uint32_t *mask, uint32_t t) { return (int)((mask[t / 32] >> (t % 32)) & 1u); }

#endif
