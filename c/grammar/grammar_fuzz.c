/* grammar_fuzz.c: libFuzzer harnesses of the grammar parsers and the matcher, one per build mode
 * (scripts/fuzz-grammar.sh builds each):
 *   FERI_FUZZ_REGEX  arbitrary bytes as a regular expression;
 *   FERI_FUZZ_JSON   arbitrary bytes as a JSON schema;
 *   FERI_FUZZ_GBNF   arbitrary bytes as a GBNF grammar;
 *   FERI_FUZZ_MATCHER a fixed grammar (a JSON schema, an expression, a GBNF grammar) and arbitrary
 *                    bytes as operations on its matchers: take a token of the mask, try any token,
 *                    roll back, compare (see run_ops).
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

#if defined(FERI_FUZZ_MATCHER)
/* The fixed grammars of the matcher mode, compiled once. */
static const feri_grammar *fixed_grammar(unsigned k) {
  static const char *const SRC[4] = {
      "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"maxLength\":5},\"b\":{\"type\":\"array\","
      "\"items\":{\"type\":\"integer\",\"minimum\":-5,\"maximum\":300}},\"c\":{\"enum\":[\"x\",\"y\\\"z\",1.5]}},"
      "\"required\":[\"a\"]}",
      "(ab|c)*[0-9]{1,3}\\w?\xc3\xa9",
      "root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= \"(\" expr \")\" | [0-9]+ ws\nws ::= [ ]*\n",
      "{}"};
  static feri_grammar *g[4];
  if (g[k]) return g[k];
  const fer_status st = k == 1 ? feri_grammar_from_regex(SRC[k], strlen(SRC[k]), &g[k])
                        : k == 2 ? feri_grammar_from_gbnf(SRC[k], strlen(SRC[k]), &g[k])
                                 : feri_grammar_from_json_schema(SRC[k], strlen(SRC[k]), NULL, &g[k]);
  if (st != FER_STATUS_OK) abort();
  return g[k];
}

/* Operations from the input's bytes on two matchers in lockstep (one with the slice): take the
 * n-th token of the mask, try an arbitrary token (accepted exactly when the mask has it, nothing
 * changed otherwise), roll back k tokens (the mask of that position comes back), end of sequence
 * allowed exactly where the matcher accepts; the two matchers' masks always equal. */
static void run_ops(const feri_grammar *g, const uint8_t *data, size_t size) {
  enum { DEPTH = 64 };
  static uint32_t masks[DEPTH + 1][9];
  feri_matcher *m = NULL, *ms = NULL;
  if (feri_matcher_new(g, vocab(), EOS, &m) != FER_STATUS_OK || feri_matcher_new(g, vocab(), EOS, &ms) != FER_STATUS_OK) abort();
  feri_matcher_set_slice(ms, slice());
  uint32_t mask[9], sliced[9];
  size_t i = 0;
  for (int ops = 0; ops < 64 && i < size; ops++) {
    const uint32_t pos = feri_matcher_n_tokens(m);
    if (feri_matcher_fill_mask(m, mask, 9) != FER_STATUS_OK) break;
    if (feri_matcher_fill_mask(ms, sliced, 9) != FER_STATUS_OK || memcmp(mask, sliced, sizeof mask) != 0) abort();
    if (!feri_matcher_is_ended(m) &&
        (uint32_t)feri_mask_get(mask, EOS) != (uint32_t)feri_matcher_is_accepting(m))
      abort();
    if (pos <= DEPTH) memcpy(masks[pos], mask, sizeof mask);
    const uint8_t op = data[i++], arg = i < size ? data[i++] : 0;
    if (op % 3 == 0) { /* the arg-th token of the mask */
      uint32_t n = 0, pick = UINT32_MAX;
      for (uint32_t t = 0; t < N_TOK; t++) n += (uint32_t)feri_mask_get(mask, t);
      if (n == 0 || pos >= DEPTH || feri_matcher_is_ended(m)) continue; /* ended: the mask is the end alone, taken */
      for (uint32_t t = 0, k = 0; t < N_TOK && pick == UINT32_MAX; t++)
        if (feri_mask_get(mask, t) && k++ == arg % n) pick = t;
      if (feri_matcher_accept(m, (int32_t)pick) != FER_STATUS_OK || feri_matcher_accept(ms, (int32_t)pick) != FER_STATUS_OK) abort();
    } else if (op % 3 == 1) { /* any token: taken exactly when the mask has it */
      const uint32_t t = (uint32_t)(arg | (op & 0x80u) << 1) % N_TOK;
      const int was_ended = feri_matcher_is_ended(m);
      const fer_status st = feri_matcher_accept(m, (int32_t)t);
      if ((st == FER_STATUS_OK) != (feri_mask_get(mask, t) && !was_ended)) abort();
      if (st == FER_STATUS_OK) {
        if (feri_matcher_accept(ms, (int32_t)t) != FER_STATUS_OK) abort();
        if (pos >= DEPTH && (feri_matcher_rollback(m, 1) != FER_STATUS_OK || feri_matcher_rollback(ms, 1) != FER_STATUS_OK)) abort();
      } else if (feri_matcher_n_tokens(m) != pos) {
        abort();
      }
    } else { /* roll back k: that position's mask again */
      const uint32_t k = arg % 4 < pos ? arg % 4 : pos;
      if (feri_matcher_rollback(m, k) != FER_STATUS_OK || feri_matcher_rollback(ms, k) != FER_STATUS_OK) abort();
      if (pos - k <= DEPTH && (feri_matcher_fill_mask(m, mask, 9) != FER_STATUS_OK || memcmp(mask, masks[pos - k], sizeof mask) != 0))
        abort();
      if (feri_matcher_rollback(m, pos - k + 1) == FER_STATUS_OK) abort(); /* more than were taken: refused */
    }
  }
  feri_matcher_free(m);
  feri_matcher_free(ms);
}
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
#if defined(FERI_FUZZ_MATCHER)
  if (size > 0) run_ops(fixed_grammar(data[0] % 4), data + 1, size - 1);
  return 0;
#endif
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
