/* grammar_golden_test.c: ferrite's masks against llguidance's on a real vocabulary (issue 20).
 *
 * testdata/grammar/regex-qwen2.5.txt, json-qwen2.5.txt and gbnf-qwen2.5.txt (scripts/grammar/
 * make_regex_goldens.py, make_json_goldens.py and make_gbnf_goldens.py, llguidance 1.9.1) hold, for
 * regular expressions, JSON schemas and GBNF grammars (records "rx", "schema" and "gbnf"), token
 * paths and llguidance's mask at every step (popcount and an FNV-1a 64 hash of the mask's words).
 * This test compiles each expression, schema or grammar, walks the same path on
 * the file's vocabulary (Qwen2.5: 151,665 tokens, end 151643; Llama-3: 128,256, end 128001) with the
 * tokenizer (so that
 * forced bytes follow llguidance's forced-token rule, scripts/grammar/LLGUIDANCE.md section 3.2)
 * and compares the masks bit for bit at every step, forced or not, twice: a matcher without the
 * vocabulary's slice (slice.h) and one with it; every token of the path must be accepted.
 * Each file's header names its tokenizer (Qwen2.5's and Llama-3's here), its vocabulary size and
 * end token.
 * usage: grammar_golden_test GOLDEN... (the tokenizers from the data directory; SKIPPED without)
 * EVIDENCE: C-GRM-004 C-GRM-010 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/slice.h"
#include "grammar/toktrie.h"
#include "testing/check.h"

static uint64_t fnv_words(const uint32_t *w, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++)
    for (int k = 0; k < 4; k++) h = (h ^ ((w[i] >> (8 * k)) & 0xFF)) * 0x100000001b3ull;
  return h;
}

/* The JSON string of a line "rx \"...\"" decoded (the escapes json.dumps writes, surrogate pairs
 * included; other bytes as they are). */
static size_t json_string(const char *p, char *out, size_t cap) {
  size_t n = 0;
  if (*p != '"') return 0;
  for (p++; *p && *p != '"' && n + 4 < cap; p++) {
    if (*p != '\\') {
      out[n++] = *p;
      continue;
    }
    p++;
    if (*p == 'u') {
      unsigned cp = 0, lo = 0;
      sscanf(p + 1, "%4x", &cp);
      p += 4;
      if (cp >= 0xD800 && cp < 0xDC00 && p[1] == '\\' && p[2] == 'u' && sscanf(p + 3, "%4x", &lo) == 1) {
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        p += 6;
      }
      if (cp < 0x80) out[n++] = (char)cp;
      else if (cp < 0x800) out[n++] = (char)(0xC0 | cp >> 6), out[n++] = (char)(0x80 | (cp & 63));
      else if (cp < 0x10000) out[n++] = (char)(0xE0 | cp >> 12), out[n++] = (char)(0x80 | ((cp >> 6) & 63)), out[n++] = (char)(0x80 | (cp & 63));
      else out[n++] = (char)(0xF0 | cp >> 18), out[n++] = (char)(0x80 | ((cp >> 12) & 63)), out[n++] = (char)(0x80 | ((cp >> 6) & 63)),
           out[n++] = (char)(0x80 | (cp & 63));
    } else {
      out[n++] = *p == 'n' ? '\n' : *p == 't' ? '\t' : *p == 'r' ? '\r' : *p == 'b' ? '\b' : *p == 'f' ? '\f' : *p;
    }
  }
  out[n] = 0;
  return n;
}

/* The tokenizer of a golden file (its header: "# ...; vocab N; eos E; tokenizer NAME") loaded
 * from the data directory, with its trie for N logits; 0 when the file is not there (SKIPPED). */
static int load_vocab(const char *header, fer_tokenizer **tok, feri_toktrie *trie, int32_t *eos) {
  unsigned n = 0;
  int e = -1;
  char name[256] = "", path[4096];
  const char *v = strstr(header, "vocab "), *q = strstr(header, "eos "), *k = strstr(header, "tokenizer ");
  if (!v || !q || !k || sscanf(v, "vocab %u", &n) != 1 || sscanf(q, "eos %d", &e) != 1 || sscanf(k, "tokenizer %255s", name) != 1) {
    CHECK(!"a golden file's header names its vocabulary, end token and tokenizer");
    return 0;
  }
  if (!feri_test_data_path(name, path, sizeof path)) {
    printf("SKIPPED: grammar_golden_test on %s (not in $FERRITE_DATA_DIR or ~/.cache/ferrite)\n", name);
    return 0;
  }
  CHECK_STATUS(fer_tokenizer_from_json_file(path, tok), FER_STATUS_OK);
  if (!*tok) return 0;
  CHECK_STATUS(feri_toktrie_from_tokenizer(*tok, n, trie), FER_STATUS_OK);
  *eos = e;
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: grammar_golden_test GOLDEN...\n");
    return 2;
  }
  static char line[65536], src[65536];
  int compared = 0, differ = 0, forced = 0, refused = 0, paths = 0, schemas = 0, grammars = 0, files = 0;
  for (int a = 1; a < argc; a++) {
    FILE *f = fopen(argv[a], "r");
    CHECK(f != NULL);
    if (!f) continue;
    fer_tokenizer *tok = NULL;
    feri_toktrie trie = {0};
    int32_t eos = -1;
    if (!fgets(line, sizeof line, f) || !load_vocab(line, &tok, &trie, &eos)) {
      fclose(f);
      fer_tokenizer_free(tok);
      continue;
    }
    files++;
    const size_t W = feri_mask_words(trie.n_vocab);
    uint32_t *mask = malloc(W * sizeof *mask);
    feri_grammar *g = NULL;
    feri_slice slice;
    CHECK_STATUS(feri_slice_build(&trie, &slice), FER_STATUS_OK);
    feri_matcher *m = NULL, *ms = NULL; /* without and with the vocabulary's slice: the same masks */
    while (mask && fgets(line, sizeof line, f)) {
      const int is_rx = strncmp(line, "rx ", 3) == 0, is_schema = strncmp(line, "schema ", 7) == 0,
                is_gbnf = strncmp(line, "gbnf ", 5) == 0;
      if (is_rx || is_schema || is_gbnf) {
        feri_matcher_free(m), m = NULL;
        feri_matcher_free(ms), ms = NULL;
        feri_grammar_free(g), g = NULL;
        const size_t n = json_string(line + (is_rx ? 3 : is_gbnf ? 5 : 7), src, sizeof src);
        if (is_rx) CHECK_STATUS(feri_grammar_from_regex(src, n, &g), FER_STATUS_OK);
        else if (is_gbnf) CHECK_STATUS(feri_grammar_from_gbnf(src, n, &g), FER_STATUS_OK);
        else CHECK_STATUS(feri_grammar_from_json_schema(src, n, NULL, &g), FER_STATUS_OK);
        if (g) CHECK_STATUS(feri_matcher_new(g, &trie, eos, &m), FER_STATUS_OK);
        if (m) feri_matcher_set_tokenizer(m, tok);
        if (g) CHECK_STATUS(feri_matcher_new(g, &trie, eos, &ms), FER_STATUS_OK);
        if (ms) feri_matcher_set_tokenizer(ms, tok), feri_matcher_set_slice(ms, &slice);
        paths++;
        schemas += is_schema;
        grammars += is_gbnf;
        continue;
      }
      int fo, take;
      unsigned count;
      unsigned long long hash;
      if (!m || !ms || sscanf(line, "step %d %u %llx %d", &fo, &count, &hash, &take) != 4) continue;
      CHECK_STATUS(feri_matcher_fill_mask(ms, mask, W), FER_STATUS_OK);
      const int same_sliced = fnv_words(mask, W) == hash;
      CHECK_STATUS(feri_matcher_fill_mask(m, mask, W), FER_STATUS_OK);
      forced += fo;
      unsigned pop = 0;
      for (size_t w = 0; w < W; w++) pop += (unsigned)__builtin_popcount(mask[w]);
      const int same = pop == count && fnv_words(mask, W) == hash && same_sliced;
      if (!same && differ < 12) {
        printf("  %s: %.60s step %d%s%s: %u tokens allowed, llguidance %u", argv[a], src, feri_matcher_n_tokens(m),
               fo ? " (forced)" : "", same_sliced ? "" : " (with the slice too)", pop, count);
        if (pop < 40) /* small masks: the ids, to compare by hand */
          for (uint32_t t = 0; t < trie.n_vocab; t++)
            if (feri_mask_get(mask, t)) printf(" %u", t);
        printf("\n");
      }
      differ += !same;
      compared++;
      if (take >= 0 && (feri_matcher_accept(m, take) != FER_STATUS_OK || feri_matcher_accept(ms, take) != FER_STATUS_OK)) {
        if (refused < 8) printf("  %s: %.60s: token %d of llguidance's path refused\n", argv[a], src, take);
        refused++;
        feri_matcher_free(m), m = NULL;
      }
    }
    fclose(f);
    feri_matcher_free(m);
    feri_matcher_free(ms);
    feri_grammar_free(g);
    feri_slice_free(&slice);
    free(mask);
    feri_toktrie_free(&trie);
    fer_tokenizer_free(tok);
  }
  if (files == 0) return feri_test_finish("grammar_golden_test"); /* every file SKIPPED */
  printf("grammar_golden_test: %d files, %d paths (%d of JSON schemas, %d of GBNF grammars), %d masks compared (%d of them forced), "
         "%d differ; %d tokens refused\n",
         files, paths, schemas, grammars, compared, forced, differ, refused);
  CHECK(paths >= 40 * files && compared >= 300 * files && forced >= 20 && differ == 0 && refused == 0);
  return feri_test_finish("grammar_golden_test");
}
