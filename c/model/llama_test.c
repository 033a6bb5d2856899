/* llama_test.c: the Llama forward pass on the real model (SKIPPED without it). EVIDENCE: C-ENG-001
 * - greedy decoding of "The capital of France is" gives llama.cpp's first five tokens
 *   (testdata/model/smollm2-greedy.txt, scripts/model/make_greedy_golden.sh), and each step's top
 *   logit is within 0.75 of llama.cpp's (llama.cpp rounds activations to 8 bits for its Q4_1
 *   products; ferrite keeps them in f32: measured differences 0.2-0.4);
 * - a token decoded after the cache holds the prompt gets exactly the logits of the same token at
 *   the end of one prefill (the kernels' rows do not depend on M);
 * - one thread and two threads give the same bits;
 * - bad input: ids outside the vocabulary, a sequence past its length, a missing file. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/llama.h"
#include "testing/check.h"

enum { STEPS = 5 };

typedef struct golden {
  int32_t prompt[64];
  uint32_t n_prompt;
  int32_t token[STEPS];
  float logit[STEPS];
} golden;

static bool read_golden(golden *g) {
  FILE *f = fopen("testdata/model/smollm2-greedy.txt", "r");
  if (!f) return false;
  char line[1024];
  int steps = 0;
  memset(g, 0, sizeof(*g));
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "prompt", 6) == 0) {
      char *p = line + 6;
      while (g->n_prompt < 64) {
        char *e;
        long v = strtol(p, &e, 10);
        if (e == p) break;
        g->prompt[g->n_prompt++] = (int32_t)v;
        p = e;
      }
    }
    int s, tok;
    float lg;
    char *top = strstr(line, "top5 ");
    if (sscanf(line, "step %d token %d", &s, &tok) == 2 && s < STEPS && top && sscanf(top + 5, "%*d:%f", &lg) == 1) {
      g->token[s] = tok;
      g->logit[s] = lg;
      steps++;
    }
  }
  fclose(f);
  return g->n_prompt > 0 && steps >= STEPS;
}

static int32_t argmax(const float *v, uint32_t n) {
  int32_t best = 0;
  for (uint32_t i = 1; i < n; i++)
    if (v[i] > v[best]) best = (int32_t)i;
  return best;
}

static void test_greedy_matches_llama_cpp(feri_llama *m, const golden *g, fer_threadpool *pool) {
  const feri_llama_config *c = feri_llama_config_of(m);
  feri_llama_seq *s = NULL;
  CHECK_STATUS(feri_llama_seq_create(m, 64, &s), FER_STATUS_OK);
  float *logits = malloc(c->n_vocab * sizeof(float));
  const int32_t *cur = g->prompt;
  uint32_t n = g->n_prompt;
  int32_t next = 0;
  for (int step = 0; step < STEPS && s && logits; step++) {
    CHECK_STATUS(feri_llama_forward(s, pool, cur, n, logits), FER_STATUS_OK);
    next = argmax(logits, c->n_vocab);
    if (next != g->token[step] || fabsf(logits[next] - g->logit[step]) > 0.75f) {
      fprintf(stderr, "  step %d: token %d logit %.4f, llama.cpp %d %.4f\n", step, next, logits[next], g->token[step],
              g->logit[step]);
      CHECK(!"greedy decoding differs from llama.cpp");
    }
    cur = &next;
    n = 1;
  }
  CHECK(s == NULL || feri_llama_seq_len(s) == g->n_prompt + STEPS - 1);
  free(logits);
  feri_llama_seq_free(s);
}

/* prefill(prompt + t) == prefill(prompt) then decode(t), and 1 thread == 2 threads, bit for bit. */
static void test_decode_equals_prefill_and_threads(feri_llama *m, const golden *g) {
  const feri_llama_config *c = feri_llama_config_of(m);
  int32_t ids[65];
  memcpy(ids, g->prompt, g->n_prompt * sizeof(int32_t));
  ids[g->n_prompt] = g->token[0];
  float *a = malloc(c->n_vocab * sizeof(float)), *b = malloc(c->n_vocab * sizeof(float)),
        *d = malloc(c->n_vocab * sizeof(float));
  feri_llama_seq *s1 = NULL, *s2 = NULL, *s3 = NULL;
  fer_threadpool_options o;
  fer_threadpool_options_init(&o);
  o.n_threads = 2;
  fer_threadpool *pool2 = NULL;
  CHECK_STATUS(fer_threadpool_create(&o, &pool2), FER_STATUS_OK);
  CHECK_STATUS(feri_llama_seq_create(m, 64, &s1), FER_STATUS_OK);
  CHECK_STATUS(feri_llama_seq_create(m, 64, &s2), FER_STATUS_OK);
  CHECK_STATUS(feri_llama_seq_create(m, 64, &s3), FER_STATUS_OK);
  if (a && b && d && s1 && s2 && s3 && pool2) {
    CHECK_STATUS(feri_llama_forward(s1, NULL, ids, g->n_prompt + 1, a), FER_STATUS_OK);
    CHECK_STATUS(feri_llama_forward(s2, NULL, ids, g->n_prompt, b), FER_STATUS_OK);
    CHECK_STATUS(feri_llama_forward(s2, NULL, ids + g->n_prompt, 1, b), FER_STATUS_OK);
    CHECK(memcmp(a, b, c->n_vocab * sizeof(float)) == 0);
    CHECK_STATUS(feri_llama_forward(s3, pool2, ids, g->n_prompt + 1, d), FER_STATUS_OK);
    CHECK(memcmp(a, d, c->n_vocab * sizeof(float)) == 0);
  }
  fer_threadpool_free(pool2);
  feri_llama_seq_free(s1), feri_llama_seq_free(s2), feri_llama_seq_free(s3);
  free(a), free(b), free(d);
}

static void test_bad_input(feri_llama *m) {
  const feri_llama_config *c = feri_llama_config_of(m);
  feri_llama_seq *s = NULL;
  CHECK_STATUS(feri_llama_seq_create(m, 4, &s), FER_STATUS_OK);
  float *logits = malloc(c->n_vocab * sizeof(float));
  int32_t bad[2] = {1, (int32_t)c->n_vocab};
  int32_t five[5] = {1, 2, 3, 4, 5};
  if (s && logits) {
    CHECK_STATUS(feri_llama_forward(s, NULL, bad, 2, logits), FER_STATUS_INVALID_ARG);
    CHECK_STATUS(feri_llama_forward(s, NULL, five, 5, logits), FER_STATUS_BUFFER_TOO_SMALL);
    CHECK(feri_llama_seq_len(s) == 0); /* nothing was run */
  }
  free(logits);
  feri_llama_seq_free(s);
  feri_llama *none = NULL;
  CHECK_STATUS(feri_llama_open("/nonexistent/model.gguf", &none), FER_STATUS_INVALID_ARG);
  CHECK(none == NULL);
}

int main(void) {
  char path[4096];
  golden g;
  CHECK(read_golden(&g));
  if (!feri_test_data_path("smollm2-135m-instruct-q4_1.gguf", path, sizeof path)) {
    printf("SKIPPED: llama_test: smollm2-135m-instruct-q4_1.gguf not found ($FERRITE_DATA_DIR or ~/.cache/ferrite)\n");
    return feri_test_finish("llama_test");
  }
  feri_llama *m = NULL;
  CHECK_STATUS(feri_llama_open(path, &m), FER_STATUS_OK);
  if (m) {
    test_greedy_matches_llama_cpp(m, &g, NULL);
    test_decode_equals_prefill_and_threads(m, &g);
    test_bad_input(m);
  }
  feri_llama_close(m);
  return feri_test_finish("llama_test");
}
