/* grammar_fuzz.c: libFuzzer harnesses of the grammar parsers and the matcher, one per build mode
 * (scripts/fuzz-grammar.sh builds each):
 *   FERI_FUZZ_REGEX  arbitrary bytes as a regular expression;
 *   FERI_FUZZ_JSON   arbitrary bytes as a JSON schema;
 *   FERI_FUZZ_GBNF   arbitrary bytes as a GBNF grammar.
 * What compiles then drives a matcher over a small vocabulary (the 256 bytes, a few longer tokens,
 * an end token) for a few steps chosen by the input's last bytes, aborting on a violation: every
 * token of a mask is accepted and every other token refused (with nothing changed), rollback gives
 * the earlier mask back, the end token is allowed exactly where the matcher accepts, and a second
 * matcher with the vocabulary's JSON string slice (slice.h) writes the same masks. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/slice.h"
#include "grammar/toktrie.h"

enum { N_TOK = 256 + 8 + 1, EOS = N_TOK - 1 };

static feri_toktrie *vocab(void) {
  static feri_toktrie t;
  static int made = 0;
  if (made) return &t;
  static const char *LONG[8] = {"\"a", "\":", "{\"", "\"}", "12", "\xc3\xa9", "ab", ", "};
  static uint8_t one[256];
  const uint8_t *bytes[N_TOK];
  uint32_t lens[N_TOK];
  for (int b = 0; b < 256; b++) one[b] = (uint8_t)b, bytes[b] = one + b, lens[b] = 1;
  for (int k = 0; k < 8; k++) bytes[256 + k] = (const uint8_t *)LONG[k], lens[256 + k] = (uint32_t)strlen(LONG[k]);
  bytes[EOS] = one, lens[EOS] = 0;
  if (feri_toktrie_build(bytes, lens, N_TOK, NULL, &t) != FER_STATUS_OK) abort();
  made = 1;
  return &t;
}

static const feri_slice *slice(void) {
  static feri_slice s;
  static int made = 0;
  if (!made && feri_slice_build(vocab(), &s) != FER_STATUS_OK) abort();
  made = 1;
  return &s;
}

static void drive(const feri_grammar *g, const uint8_t *data, size_t size) {
  feri_matcher *m = NULL, *ms = NULL;
  if (feri_matcher_new(g, vocab(), EOS, &m) != FER_STATUS_OK) return;
  if (feri_matcher_new(g, vocab(), EOS, &ms) != FER_STATUS_OK) {
    feri_matcher_free(m);
    return;
  }
  feri_matcher_set_slice(ms, slice());
  uint32_t mask[9], again[9], sliced[9];
  for (int step = 0; step < 6; step++) {
    if (feri_matcher_fill_mask(m, mask, 9) != FER_STATUS_OK) break;
    if (feri_matcher_fill_mask(ms, sliced, 9) != FER_STATUS_OK || memcmp(mask, sliced, sizeof mask) != 0) abort();
    uint32_t allowed[N_TOK], n = 0;
    for (uint32_t t = 0; t < N_TOK; t++) {
      const uint32_t before = feri_matcher_n_tokens(m);
      const int in = feri_mask_get(mask, t);
      const fer_status st = feri_matcher_accept(m, (int32_t)t);
      if (in != (st == FER_STATUS_OK) && !(feri_matcher_is_ended(m) && t == EOS)) abort();
      if (st == FER_STATUS_OK) {
        allowed[n++] = t;
        if (feri_matcher_rollback(m, 1) != FER_STATUS_OK) abort();
      }
      if (feri_matcher_n_tokens(m) != before) abort();
    }
    if ((uint32_t)feri_mask_get(mask, EOS) != (uint32_t)(feri_matcher_is_accepting(m) || feri_matcher_is_ended(m))) abort();
    if (n == 0) break;
    const uint32_t pick = allowed[(size > (size_t)step ? data[size - 1 - (size_t)step] : 0) % n];
    if (feri_matcher_accept(m, (int32_t)pick) != FER_STATUS_OK) abort();
    if (feri_matcher_rollback(m, 1) != FER_STATUS_OK) abort(); /* the mask comes back */
    if (feri_matcher_fill_mask(m, again, 9) != FER_STATUS_OK || memcmp(mask, again, sizeof mask) != 0) abort();
    if (feri_matcher_accept(m, (int32_t)pick) != FER_STATUS_OK || feri_matcher_accept(ms, (int32_t)pick) != FER_STATUS_OK) abort();
  }
  feri_matcher_free(m);
  feri_matcher_free(ms);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  feri_grammar *g = NULL;
#if defined(FERI_FUZZ_REGEX)
  if (feri_grammar_from_regex((const char *)data, size, &g) != FER_STATUS_OK) return 0;
#elif defined(FERI_FUZZ_GBNF)
  if (feri_grammar_from_gbnf((const char *)data, size, &g) != FER_STATUS_OK) return 0;
#else
  if (feri_grammar_from_json_schema((const char *)data, size, NULL, &g) != FER_STATUS_OK) return 0;
#endif
  drive(g, data, size);
  feri_grammar_free(g);
  return 0;
}
