/* toktrie_tokenizer.c: the token trie of a tokenizer's vocabulary (toktrie.h): each token's output
 * bytes as its decoder writes them mid-sequence (byte-level BPE: the raw bytes; SentencePiece: the
 * <0xAB> byte or the text with U+2581 as a space), control tokens left out. */
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "grammar/toktrie.h"
#include "tokenizer/tokenizer.h"

/* An added token that is special, or whose text looks like <...>, is a control token here: as
 * llguidance decides (scripts/grammar/LLGUIDANCE.md, section 2), so that masks agree. */
static int is_control(const fer_tokenizer *tok, uint32_t id, const uint8_t *text, size_t len) {
  if (!tok->is_added || tok->is_added[id] == 0) return 0;
  if (tok->is_added[id] == 2) return 1;
  return len >= 2 && text[0] == '<' && text[len - 1] == '>';
}

fer_status feri_toktrie_from_tokenizer(const fer_tokenizer *tok, uint32_t n_vocab, feri_toktrie *out) {
  if (out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "toktrie: out is NULL");
  memset(out, 0, sizeof *out);
  if (tok == NULL) return feri_fail(FER_STATUS_NULL_ARG, "toktrie: tokenizer is NULL");
  const uint32_t n_tok = tok->vocab.n;
  if (n_vocab == 0) n_vocab = n_tok;
  if (n_vocab < n_tok)
    return feri_fail(FER_STATUS_INVALID_ARG, "toktrie: %u logits for a vocabulary of %u tokens", n_vocab, n_tok);
  const uint8_t **bytes = calloc(n_vocab, sizeof *bytes);
  uint32_t *lens = calloc(n_vocab, sizeof *lens);
  uint8_t *include = calloc(n_vocab, 1), *bytevals = malloc(256);
  if (!bytes || !lens || !include || !bytevals) {
    free(bytes), free(lens), free(include), free(bytevals);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "toktrie: %u tokens", n_vocab);
  }
  for (int v = 0; v < 256; v++) bytevals[v] = (uint8_t)v;
  for (uint32_t id = 0; id < n_tok; id++) {
    size_t len;
    const uint8_t *text = feri_vocab_text(&tok->vocab, id, &len);
    if (is_control(tok, id, text, len)) continue;
    if (tok->sp_decode) {
      if (tok->sp_byte[id] >= 0) {
        text = bytevals + tok->sp_byte[id];
        len = 1;
      } else {
        text = feri_vocab_text(&tok->sp_text, id, &len);
      }
    }
    bytes[id] = text;
    lens[id] = (uint32_t)len;
    include[id] = len > 0;
  }
  static const uint8_t none = 0; /* ids past the tokenizer (padding of the logits): never allowed */
  for (uint32_t id = n_tok; id < n_vocab; id++) bytes[id] = &none;
  const fer_status st = feri_toktrie_build(bytes, lens, n_vocab, include, out);
  free(bytes), free(lens), free(include), free(bytevals);
  return st;
}
