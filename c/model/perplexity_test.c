/* perplexity_test.c: the real model's perplexity on 2,000 tokens of English prose against
 * llama.cpp's (testdata/model/smollm2-perplexity.txt, made by scripts/model/
 * make_perplexity_golden.sh) with exact f32 activations and f32 KV: within 1% (claim C-ENG-009;
 * the default route, 8-bit activations and f16 KV, over the same ids, chunks and golden is
 * //c/model:real_file_smollm2_q4_1_test's, not repeated here). Also: ferrite's tokenizer gives
 * llama.cpp's 2,000 ids for the text, and feri_llama_forward_all's rows equal one-token steps bit
 * for bit. The 2,000-token pass is skipped in sanitizer builds (minutes there).
 * EVIDENCE: C-ENG-009 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferrite.h"
#include "model/llama.h"
#include "testing/check.h"

enum { N_TOKENS = 2000, CHUNK = 250 };

typedef struct ppl_golden {
  int32_t ids[N_TOKENS];
  double nll[N_TOKENS - 1];
  double perplexity;
} ppl_golden;

static int read_golden(ppl_golden *g) {
  FILE *f = fopen("testdata/model/smollm2-perplexity.txt", "r");
  if (!f) return 0;
  static char line[1 << 16];
  int n_ids = 0, n_nll = 0, ok = 0;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "ids ", 4) == 0) {
      char *p = line + 3, *e;
      for (long v; n_ids < N_TOKENS && (v = strtol(p, &e, 10), e != p); p = e) g->ids[n_ids++] = (int32_t)v;
    } else if (strncmp(line, "nll ", 4) == 0) {
      int i;
      double v;
      if (sscanf(line + 4, "%d %lf", &i, &v) == 2 && i == n_nll && n_nll < N_TOKENS - 1) g->nll[n_nll++] = v;
    } else if (sscanf(line, "perplexity %lf", &g->perplexity) == 1) {
      ok = 1;
    }
  }
  fclose(f);
  return ok && n_ids == N_TOKENS && n_nll == N_TOKENS - 1;
}

#if !defined(__SANITIZE_ADDRESS__) /* the 2,000-token passes: the normal build only */
/* -log softmax(logits)[target], in double */
static double nll_of(const float *logits, uint32_t n_vocab, int32_t target) {
  double mx = logits[0], z = 0;
  for (uint32_t v = 1; v < n_vocab; v++) mx = logits[v] > mx ? logits[v] : mx;
  for (uint32_t v = 0; v < n_vocab; v++) z += exp((double)logits[v] - mx);
  return -((double)logits[target] - mx - log(z));
}

#endif

static void test_tokenizer_agrees(const char *path, const ppl_golden *g) {
  FILE *f = fopen("testdata/model/perplexity-text.txt", "rb");
  CHECK(f != NULL);
  if (!f) return;
  static char text[1 << 16];
  size_t len = fread(text, 1, sizeof text, f);
  fclose(f);
  fer_tokenizer *tok = NULL;
  CHECK_STATUS(fer_tokenizer_from_gguf_file(path, &tok), FER_STATUS_OK);
  size_t n = 0;
  static int32_t ids[1 << 15];
  CHECK_STATUS(fer_tokenizer_encode(tok, text, len, 0, ids, sizeof ids / sizeof ids[0], &n), FER_STATUS_OK);
  CHECK(n >= N_TOKENS && memcmp(ids, g->ids, sizeof g->ids) == 0);
  fer_tokenizer_free(tok);
}

/* forward_all's row i equals the logits of one-token steps over the same ids. */
static void test_all_rows_equal_steps(feri_llama *m, const ppl_golden *g) {
  enum { N = 24 };
  const uint32_t V = feri_llama_config_of(m)->n_vocab;
  float *all = malloc((size_t)N * V * sizeof(float)), *one = malloc(V * sizeof(float));
  feri_llama_seq *a = NULL, *b = NULL;
  CHECK_STATUS(feri_llama_seq_create(m, N, NULL, &a), FER_STATUS_OK);
  CHECK_STATUS(feri_llama_seq_create(m, N, NULL, &b), FER_STATUS_OK);
  if (all && one && a && b) {
    CHECK_STATUS(feri_llama_forward_all(a, NULL, g->ids, N, all), FER_STATUS_OK);
    int differ = 0;
    for (uint32_t i = 0; i < N; i++) {
      CHECK_STATUS(feri_llama_forward(b, NULL, &g->ids[i], 1, one), FER_STATUS_OK);
      differ += memcmp(one, all + (size_t)i * V, V * sizeof(float)) != 0;
    }
    CHECK(differ == 0);
  }
  feri_llama_seq_free(a);
  feri_llama_seq_free(b);
  free(all);
  free(one);
}

#if !defined(__SANITIZE_ADDRESS__)
/* Perplexity over the 2,000 ids, evaluated in chunks of CHUNK positions. */
static double perplexity(feri_llama *m, fer_threadpool *pool, const ppl_golden *g, fer_dtype kv_dtype,
                         double *mean_abs_nll_diff) {
  const uint32_t V = feri_llama_config_of(m)->n_vocab;
  float *logits = malloc((size_t)CHUNK * V * sizeof(float));
  feri_llama_seq_options so = feri_llama_seq_defaults();
  so.dtype = kv_dtype;
  feri_llama_seq *s = NULL;
  CHECK_STATUS(feri_llama_seq_create(m, N_TOKENS, &so, &s), FER_STATUS_OK);
  double sum = 0, diff = 0;
  int ok = logits && s;
  for (uint32_t p = 0; ok && p < N_TOKENS; p += CHUNK) {
    fer_status st = feri_llama_forward_all(s, pool, g->ids + p, CHUNK, logits);
    CHECK_STATUS(st, FER_STATUS_OK);
    ok = st == FER_STATUS_OK;
    for (uint32_t i = 0; ok && i < CHUNK && p + i + 1 < N_TOKENS; i++) {
      const double nll = nll_of(logits + (size_t)i * V, V, g->ids[p + i + 1]);
      sum += nll;
      diff += fabs(nll - g->nll[p + i]);
    }
  }
  feri_llama_seq_free(s);
  free(logits);
  *mean_abs_nll_diff = diff / (N_TOKENS - 1);
  return ok ? exp(sum / (N_TOKENS - 1)) : NAN;
}
#endif

int main(void) {
  char path[4096];
  static ppl_golden g;
  CHECK(read_golden(&g));
  if (!feri_test_data_path("smollm2-135m-instruct-q4_1.gguf", path, sizeof path)) {
    printf("SKIPPED: perplexity_test: smollm2-135m-instruct-q4_1.gguf not found ($FERRITE_DATA_DIR or ~/.cache/ferrite)\n");
    return feri_test_finish("perplexity_test");
  }
  test_tokenizer_agrees(path, &g);
  feri_llama *m = NULL;
  CHECK_STATUS(feri_llama_open(path, &m), FER_STATUS_OK);
  if (m) test_all_rows_equal_steps(m, &g);
#if defined(__SANITIZE_ADDRESS__)
  printf("SKIPPED: perplexity_test: 2,000-token passes in a sanitizer build\n");
#else
  fer_threadpool *pool = NULL;
  CHECK_STATUS(fer_threadpool_create(NULL, &pool), FER_STATUS_OK);
  feri_llama_options exact_opts = {.weights = FERI_WEIGHTS_MAPPED, .matmul = FERI_MATMUL_EXACT};
  feri_llama *exact = NULL;
  CHECK_STATUS(feri_llama_open_with(path, &exact_opts, &exact), FER_STATUS_OK);
  if (exact && pool) {
    double mad = 0;
    const double ppl = perplexity(exact, pool, &g, FER_DTYPE_F32, &mad);
    printf("perplexity over %d predictions, exact f32 activations, f32 KV: ferrite %.4f, llama.cpp %.4f (%+.3f%%); "
           "mean |NLL difference| %.4f\n",
           N_TOKENS - 1, ppl, g.perplexity, 100.0 * (ppl / g.perplexity - 1.0), mad);
    CHECK(fabs(ppl / g.perplexity - 1.0) < 0.01);
  }
  feri_llama_close(exact);
  fer_threadpool_free(pool);
#endif
  feri_llama_close(m);
  return feri_test_finish("perplexity_test");
}
