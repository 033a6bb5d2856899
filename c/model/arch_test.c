/* arch_test.c: the forward pass of each architecture (llama; qwen2 with q, k, v biases; qwen3 with
 * QK-norm and its own head size; gemma3 with post norms, GeGLU, the embedding scale and a sliding
 * window of 16 that bites from position 16 of the 24) on the seeded tiny models against llama.cpp running the same
 * files (testdata/model/tiny-ARCH-logits.txt, scripts/model/make_tiny_goldens.sh): every logit of
 * 24 teacher-forced positions within 0.03 + 1% of llama.cpp's. Both run F32 weights and f32 K and
 * V, but llama.cpp rounds somewhere below f32 (its logits differ from an f64 evaluation by up to
 * about 3e-4 relative where ferrite's agree to 1e-6; the f64 oracle is rust_tests/tests/engine.rs),
 * so the bound is set by llama.cpp's error; a wrong RoPE pairing, a missing bias or norm moves
 * logits by whole units. Also: a file whose architecture lacks what it requires is CORRUPT,
 * naming the tensor. EVIDENCE: C-ENG-011, C-GEM-013 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferrite.h"
#include "model/llama.h"
#include "model/tiny.h"
#include "testing/check.h"

enum { MAX_IDS = 64, MAX_VOCAB = 512 };

typedef struct tiny_golden {
  int32_t ids[MAX_IDS];
  uint32_t n, vocab;
  float logits[MAX_IDS][MAX_VOCAB];
} tiny_golden;

static int read_golden(const char *arch, tiny_golden *g) {
  char path[256];
  snprintf(path, sizeof path, "testdata/model/tiny-%s-logits.txt", arch);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  static char line[1 << 16];
  uint32_t rows = 0;
  g->n = g->vocab = 0;
  while (fgets(line, sizeof line, f)) {
    char *p, *e;
    if (strncmp(line, "ids ", 4) == 0) {
      p = line + 3;
      for (long v; g->n < MAX_IDS && (v = strtol(p, &e, 10), e != p); p = e) g->ids[g->n++] = (int32_t)v;
    } else if (sscanf(line, "vocab %u", &g->vocab) == 1) {
      continue;
    } else if (strncmp(line, "logits ", 7) == 0 && rows < MAX_IDS) {
      p = line + 7;
      strtol(p, &e, 10); /* the row index */
      p = e;
      uint32_t v = 0;
      for (float x; v < MAX_VOCAB && (x = strtof(p, &e), e != p); p = e) g->logits[rows][v++] = x;
      if (v == g->vocab) rows++;
    }
  }
  fclose(f);
  return g->n > 0 && rows == g->n && g->vocab > 0 && g->vocab <= MAX_VOCAB;
}

static void test_against_llama_cpp(const char *arch) {
  static tiny_golden g;
  CHECK(read_golden(arch, &g));
  void *img = NULL;
  size_t size = 0;
  feri_llama *m = NULL;
  feri_llama_seq *s = NULL;
  CHECK_STATUS(feri_tiny_model_image(arch, 1, &img, &size), FER_STATUS_OK);
  CHECK_STATUS(feri_llama_open_image(img, size, &m), FER_STATUS_OK);
  if (m) CHECK(feri_llama_config_of(m)->n_vocab == g.vocab);
  float *logits = malloc(sizeof(float) * MAX_IDS * MAX_VOCAB);
  if (m && logits && feri_llama_config_of(m)->n_vocab == g.vocab) {
    CHECK_STATUS(feri_llama_seq_create(m, MAX_IDS, NULL, &s), FER_STATUS_OK);
    CHECK_STATUS(feri_llama_forward_all(s, NULL, g.ids, g.n, logits), FER_STATUS_OK);
    double worst = 0;
    int bad = 0;
    for (uint32_t i = 0; i < g.n; i++)
      for (uint32_t v = 0; v < g.vocab; v++) {
        const double want = g.logits[i][v], got = logits[(size_t)i * g.vocab + v];
        const double err = fabs(got - want);
        worst = err > worst ? err : worst;
        bad += !(err <= 0.03 + 0.01 * fabs(want));
      }
    printf("%s: %u positions x %u logits against llama.cpp: largest difference %.3g\n", arch, g.n, g.vocab, worst);
    CHECK(bad == 0);
  }
  feri_llama_seq_free(s);
  feri_llama_close(m);
  free(logits);
  free(img);
}

/* A qwen2 file without its biases, or a qwen3 file without its QK-norm, is refused by name. */
static void test_required_tensors(void) {
  static const struct { const char *arch, *tensor; } cases[] = {{"qwen2", "attn_q.bias"},
                                                                 {"qwen3", "attn_q_norm.weight"},
                                                                 {"gemma3", "attn_q_norm.weight"},
                                                                 {"gemma3", "post_attention_norm.weight"},
                                                                 {"gemma3", "post_ffw_norm.weight"}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    void *img = NULL;
    size_t size = 0;
    CHECK_STATUS(feri_tiny_model_image(cases[c].arch, 3, &img, &size), FER_STATUS_OK);
    /* rename the first layer's tensor in place (same length): "blk.0.attn_q" -> "blk.0.attn_X" */
    char *hit = img ? memmem(img, size, "blk.0.", 6) : NULL;
    while (hit && strncmp(hit + 6, cases[c].tensor, strlen(cases[c].tensor)) != 0)
      hit = memmem(hit + 1, size - (size_t)(hit + 1 - (char *)img), "blk.0.", 6);
    CHECK(hit != NULL);
    if (hit) hit[6 + 5] = 'X';
    feri_llama *m = NULL;
    CHECK_STATUS(feri_llama_open_image(img, size, &m), FER_STATUS_CORRUPT);
    char msg[256];
    size_t len;
    fer_last_error_message(msg, sizeof msg, &len);
    if (!strstr(msg, cases[c].tensor)) fprintf(stderr, "  message: %s\n", msg);
    CHECK(strstr(msg, cases[c].tensor) != NULL);
    feri_llama_close(m);
    free(img);
  }
  void *img = NULL;
  size_t size = 0;
  CHECK_STATUS(feri_tiny_model_image("gpt-neox", 1, &img, &size), FER_STATUS_INVALID_ARG);
  CHECK(img == NULL);
}

int main(void) {
  test_against_llama_cpp("llama");
  test_against_llama_cpp("qwen2");
  test_against_llama_cpp("qwen3");
  test_against_llama_cpp("gemma3");
  test_required_tensors();
  return feri_test_finish("arch_test");
}
