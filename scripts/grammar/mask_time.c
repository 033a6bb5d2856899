/* mask_time.c: ferrite's per-step mask time along a JSON instance's canonical tokens, for a first
 * look beside llguidance's (scripts/grammar/mask_time_llg.py, same schema, text and tokenizer).
 * Not the benchmark (that is a criterion bench with the peer in the same run): a probe.
 *
 * build: cc -O2 -Iffi -Ic scripts/grammar/mask_time.c bazel-bin/libferrite.a -lpcre2-8 -lcjson \
 *          -lutf8proc -lm -lpthread -ldl -o mask_time
 * usage: mask_time TOKENIZER_JSON SCHEMA_JSON_TEXT INSTANCE_TEXT [REPEATS [--no-slice]] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/toktrie.h"

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

static int cmp_d(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: mask_time TOKENIZER_JSON SCHEMA_JSON_TEXT INSTANCE_TEXT [REPEATS [--no-slice]]\n");
    return 2;
  }
  const int reps = argc > 4 ? atoi(argv[4]) : 5;
  fer_tokenizer *tok = NULL;
  if (fer_tokenizer_from_json_file(argv[1], &tok) != FER_STATUS_OK) return 1;
  feri_toktrie trie;
  double t0 = now_us();
  if (feri_toktrie_from_tokenizer(tok, 0, &trie) != FER_STATUS_OK) return 1;
  const double t_trie = now_us() - t0;
  const int use_slice = !(argc > 5 && strcmp(argv[5], "--no-slice") == 0);
  feri_slice slice;
  t0 = now_us();
  if (feri_slice_build(&trie, &slice) != FER_STATUS_OK) return 1;
  const double t_slice = now_us() - t0;
  feri_grammar *g = NULL;
  t0 = now_us();
  if (feri_grammar_from_json_schema(argv[2], strlen(argv[2]), NULL, &g) != FER_STATUS_OK) return 1;
  const double t_compile = now_us() - t0;
  int32_t ids[4096];
  size_t n = 0;
  if (fer_tokenizer_encode(tok, argv[3], strlen(argv[3]), 0, ids, 4096, &n) != FER_STATUS_OK) return 1;
  fer_tokenizer_info info;
  fer_tokenizer_get_info(tok, &info);
  const size_t W = feri_mask_words(trie.n_vocab);
  uint32_t *mask = malloc(W * 4);
  double *times = malloc(sizeof(double) * (n + 1) * (size_t)reps);
  size_t nt = 0;
  double first = 0;
  for (int r = 0; r < reps; r++) {
    feri_matcher *m = NULL;
    if (feri_matcher_new(g, &trie, info.eos_id, &m) != FER_STATUS_OK) return 1;
    feri_matcher_set_tokenizer(m, tok);
    if (use_slice) feri_matcher_set_slice(m, &slice);
    for (size_t i = 0; i <= n; i++) {
      t0 = now_us();
      feri_matcher_fill_mask(m, mask, W);
      const double dt = now_us() - t0;
      if (r == 0 && i == 0) first = dt;
      else times[nt++] = dt;
      if (getenv("MASK_TIME_SLOW") && dt > atof(getenv("MASK_TIME_SLOW"))) fprintf(stderr, "  slow: pass %d step %zu: %.0f us\n", r, i, dt);
      if (i < n && feri_matcher_accept(m, ids[i]) != FER_STATUS_OK) {
        fprintf(stderr, "mask_time: token %zu refused\n", i);
        return 1;
      }
    }
    feri_matcher_free(m);
  }
  qsort(times, nt, sizeof *times, cmp_d);
  double sum = 0;
  for (size_t i = 0; i < nt; i++) sum += times[i];
  printf("ferrite%s: trie %.1f ms, slice %.1f ms (%u tokens), compile %.1f us, %zu tokens x %d: first mask %.1f us, then mean %.1f us, median %.1f us, p99 %.1f us, max %.1f us\n",
         use_slice ? "" : " (no slice)", t_trie / 1e3, t_slice / 1e3, slice.n_tokens, t_compile, n, reps, first, sum / (double)nt,
         times[nt / 2], times[(size_t)((double)nt * 0.99)],
         times[nt - 1]);
  return 0;
}
