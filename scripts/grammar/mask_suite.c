/* mask_suite.c: ferrite's per-step mask time along every token path of a golden file
 * (testdata/grammar/{regex,json,gbnf}-*.txt), through the public ABI as a user runs it (a vocabulary
 * made once, each grammar compiled once, a new matcher per path), beside llguidance's on the same
 * paths (mask_suite_llg.py). Prints the compile time and the per-step mean, median, p99 and max.
 *
 * build: cc -O2 -Iffi -Ic scripts/grammar/mask_suite.c bazel-bin/libferrite.a -lpcre2-8 -lcjson \
 *          -lutf8proc -lm -lpthread -ldl -o mask_suite
 * usage: mask_suite GOLDEN [PASSES]   (the golden's tokenizer from ~/.cache/ferrite or $FERRITE_DATA_DIR) */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ferrite.h"

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

static int cmp_d(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static char LINE[1 << 20];

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: mask_suite GOLDEN [PASSES]\n");
    return 2;
  }
  const int passes = argc > 2 ? atoi(argv[2]) : 1;
  FILE *f = fopen(argv[1], "r");
  if (!f || !fgets(LINE, sizeof LINE, f)) return 1;
  unsigned n_vocab = 0;
  int eos = -1;
  char name[256] = "", path[4096];
  const char *v = strstr(LINE, "vocab "), *q = strstr(LINE, "eos "), *k = strstr(LINE, "tokenizer ");
  if (!v || !q || !k || sscanf(v, "vocab %u", &n_vocab) != 1 || sscanf(q, "eos %d", &eos) != 1 ||
      sscanf(k, "tokenizer %255s", name) != 1)
    return 1;
  const char *dir = getenv("FERRITE_DATA_DIR");
  char home[4000];
  snprintf(home, sizeof home, "%s/.cache/ferrite", getenv("HOME"));
  snprintf(path, sizeof path, "%s/%s", dir && dir[0] ? dir : home, name);
  fer_tokenizer *tok = NULL;
  fer_grammar_vocab *vocab = NULL;
  if (fer_tokenizer_from_json_file(path, &tok) != FER_STATUS_OK) return 1;
  double t0 = now_us();
  if (fer_grammar_vocab_create(tok, n_vocab, eos, &vocab) != FER_STATUS_OK) return 1;
  const double t_vocab = now_us() - t0;
  fer_grammar_vocab_info info;
  fer_grammar_vocab_get_info(vocab, &info);
  uint32_t *mask = malloc(sizeof *mask * info.mask_words);
  size_t cap = 1 << 16, nt = 0, n_compiles = 0;
  double *times = malloc(sizeof *times * cap), compile_sum = 0;
  for (int pass = 0; pass < passes; pass++) {
    rewind(f);
    if (!fgets(LINE, sizeof LINE, f)) return 1;
    fer_grammar *g = NULL;
    fer_matcher *m = NULL;
    char *last_src = NULL;
    while (fgets(LINE, sizeof LINE, f)) {
      const int is_rx = strncmp(LINE, "rx ", 3) == 0, is_schema = strncmp(LINE, "schema ", 7) == 0,
                is_gbnf = strncmp(LINE, "gbnf ", 5) == 0;
      if (is_rx || is_schema || is_gbnf) {
        fer_matcher_free(m), m = NULL;
        cJSON *j = cJSON_Parse(LINE + (is_rx ? 3 : is_gbnf ? 5 : 7));
        if (!cJSON_IsString(j)) return 1;
        if (!last_src || strcmp(last_src, j->valuestring) != 0) { /* a new grammar: compiled once */
          fer_grammar_free(g), g = NULL;
          free(last_src);
          last_src = strdup(j->valuestring);
          t0 = now_us();
          const fer_grammar_kind kind = is_rx ? FER_GRAMMAR_REGEX : is_gbnf ? FER_GRAMMAR_GBNF : FER_GRAMMAR_JSON_SCHEMA;
          if (fer_grammar_compile(vocab, kind, last_src, strlen(last_src), 0, &g) != FER_STATUS_OK) return 1;
          compile_sum += now_us() - t0, n_compiles++;
        }
        cJSON_Delete(j);
        if (fer_matcher_create(g, &m) != FER_STATUS_OK) return 1;
        continue;
      }
      int fo, take;
      unsigned count;
      unsigned long long hash;
      if (!m || sscanf(LINE, "step %d %u %llx %d", &fo, &count, &hash, &take) != 4) continue;
      t0 = now_us();
      fer_matcher_fill_mask(m, mask, info.mask_words);
      const double dt = now_us() - t0;
      if (nt == cap) times = realloc(times, sizeof *times * (cap *= 2));
      times[nt++] = dt;
      if (getenv("MASK_SUITE_SLOW") && dt > atof(getenv("MASK_SUITE_SLOW"))) {
        fer_matcher_state ms;
        fer_matcher_get_state(m, &ms);
        fprintf(stderr, "  slow: %.0f us at token %u of %.80s\n", dt, ms.n_tokens, last_src);
      }
      if (take >= 0 && fer_matcher_accept(m, take) != FER_STATUS_OK) fer_matcher_free(m), m = NULL;
    }
    fer_matcher_free(m);
    fer_grammar_free(g);
    free(last_src);
  }
  qsort(times, nt, sizeof *times, cmp_d);
  double sum = 0;
  for (size_t i = 0; i < nt; i++) sum += times[i];
  printf("ferrite     %-22s vocab %7.1f ms, compile %7.1f us, %5zu masks: mean %6.1f us, median %6.1f us, p99 %7.1f us, max %7.1f us\n",
         strrchr(argv[1], '/') ? strrchr(argv[1], '/') + 1 : argv[1], t_vocab / 1e3, compile_sum / (double)n_compiles, nt,
         sum / (double)nt, times[nt / 2], times[(size_t)((double)nt * 0.99)], times[nt - 1]);
  return 0;
}
