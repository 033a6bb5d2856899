/* real_files_test.c: one real GGUF file against llama.cpp's references for it, the checks issue 19
 * asks of every file people download. EVIDENCE: C-ENG-009, C-ENG-101, C-ENG-102, C-ENG-103
 * - greedy decoding of the first prompt gives llama.cpp's first five tokens, up to a near-tie: a
 *   step where llama.cpp's top-2 margin is below NEAR_TIE, which the 8-bit rounding of either
 *   engine may decide either way, ends the comparison (both continuations are then correct);
 * - teacher-forced argmax agreement on 10 prompts x 64 tokens: equal wherever llama.cpp's top-2
 *   margin exceeds 0.5, and the share over all positions printed and guarded;
 * - perplexity on 2,000 tokens of the committed prose within 1% of llama.cpp's;
 * - the panels the mapped model reads (where the CPU has their kernels) give the blocks' logits.
 * The references are made by scripts/model/make_{greedy,agreement,perplexity}_golden.sh for the
 * file; ferrite runs as llama.cpp runs by default (8-bit activations, f16 KV cache).
 *
 * Usage (Bazel passes the arguments): real_files_test MODEL.gguf GREEDY AGREEMENT PERPLEXITY
 * [MIN_AGREEMENT_PERMILLE [MAX_CONFIDENT_MISSES]]. MODEL is looked up in the data directory
 * (SKIPPED when absent); the others are paths of reference files in the repository. The issue asks
 * 980 and 0; where a file measures less, its target sets the guard just under the measurement, and
 * docs/CLAIMS.md records the refutation (C-ENG-102). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferrite.h"
#include "model/llama.h"
#include "testing/check.h"

enum { STEPS = 5, MAX_PROMPT = 128, N_PPL = 2000, PPL_CHUNK = 250 };
#define NEAR_TIE 0.1f /* logits: the 8-bit activations alone move them by a few hundredths */

static feri_llama_seq *new_seq(feri_llama *m, uint32_t max_tokens) {
  feri_llama_seq_options so = feri_llama_seq_defaults();
  so.dtype = FER_DTYPE_F16; /* llama.cpp's default KV type */
  feri_llama_seq *s = NULL;
  CHECK_STATUS(feri_llama_seq_create(m, max_tokens, &so, &s), FER_STATUS_OK);
  return s;
}

/* Reference lines "step S token T '...' top5 id:logit id:logit ..." of one prompt block. */
typedef struct ref_step {
  int step, token;
  float l1, l2;
} ref_step;

static int parse_step(const char *line, ref_step *r) {
  const char *top = strstr(line, "top5 ");
  return sscanf(line, "step %d token %d", &r->step, &r->token) == 2 && top &&
         sscanf(top + 5, "%*d:%f %*d:%f", &r->l1, &r->l2) == 2;
}

/* Greedy decoding from the first prompt of the reference: llama.cpp's first STEPS tokens. */
static void test_greedy(feri_llama *m, const char *golden_path) {
  FILE *f = fopen(golden_path, "r");
  CHECK(f != NULL);
  if (!f) return;
  const uint32_t V = feri_llama_config_of(m)->n_vocab;
  char line[4096];
  int32_t prompt[MAX_PROMPT], want[STEPS];
  float margin[STEPS];
  uint32_t n_prompt = 0;
  int steps = 0;
  while (fgets(line, sizeof line, f)) {
    ref_step r;
    if (strncmp(line, "prompt", 6) == 0 && n_prompt == 0) n_prompt = feri_test_parse_ids(line + 6, prompt, MAX_PROMPT);
    else if (parse_step(line, &r) && r.step == steps && steps < STEPS) margin[steps] = r.l1 - r.l2, want[steps++] = r.token;
  }
  fclose(f);
  CHECK(n_prompt > 0 && steps == STEPS);
  if (n_prompt == 0 || steps != STEPS) return;
  float *logits = malloc(V * sizeof(float));
  feri_llama_seq *s = new_seq(m, n_prompt + STEPS);
  int32_t next = 0;
  int equal = 0;
  for (int step = 0; step < STEPS && s && logits; step++, equal++) {
    CHECK_STATUS(step == 0 ? feri_llama_forward(s, NULL, prompt, n_prompt, logits)
                           : feri_llama_forward(s, NULL, &next, 1, logits),
                 FER_STATUS_OK);
    next = feri_test_argmax(logits, V);
    if (next != want[step]) {
      const int tie = margin[step] < NEAR_TIE;
      fprintf(stderr, "  greedy step %d: ferrite %d, llama.cpp %d (margin %.3f%s)\n", step, next, want[step],
              margin[step], tie ? ": a near-tie, the comparison ends here" : "");
      CHECK(tie);
      break;
    }
  }
  if (equal == STEPS) printf("greedy: the first %d tokens equal llama.cpp's\n", STEPS);
  else printf("greedy: the first %d tokens equal llama.cpp's, then a near-tie\n", equal);
  feri_llama_seq_free(s);
  free(logits);
}

/* The panels (kernels/qpanel.h) a mapped model reads where the CPU has their kernels give the
 * logits the blocks give: the model opened with its weights in a fully resident store (which makes
 * no panels) equals it bit for bit over a 40-token prompt and 3 decode steps. EVIDENCE: C-Q-203 */
static void test_panels_equal_blocks(feri_llama *m, const char *path) {
  const feri_llama_config *c = feri_llama_config_of(m);
  feri_llama_options o = {.weights = FERI_WEIGHTS_STORE, .matmul = FERI_MATMUL_I8, .budget_bytes = UINT64_MAX / 2};
  feri_llama *s = NULL;
  CHECK_STATUS(feri_llama_open_with(path, &o, &s), FER_STATUS_OK);
  if (!s) return;
  const uint32_t V = c->n_vocab;
  float *a = malloc(V * sizeof(float)), *b = malloc(V * sizeof(float));
  feri_llama_seq *qa = new_seq(m, 64), *qb = new_seq(s, 64);
  int32_t ids[40];
  for (int i = 0; i < 40; i++) ids[i] = (int32_t)((i * 7919 + 13) % (V < 1000 ? V : 1000));
  int differ = 0;
  for (int step = 0; step < 4 && a && b && qa && qb; step++) {
    const uint32_t n = step == 0 ? 40 : 1;
    const int32_t *in = step == 0 ? ids : &ids[step];
    CHECK_STATUS(feri_llama_forward(qa, NULL, in, n, a), FER_STATUS_OK);
    CHECK_STATUS(feri_llama_forward(qb, NULL, in, n, b), FER_STATUS_OK);
    differ += memcmp(a, b, V * sizeof(float)) != 0;
  }
  printf("panels: logits %s the blocks' over 4 steps\n", differ ? "DIFFER from" : "equal");
  CHECK(differ == 0);
  feri_llama_seq_free(qa);
  feri_llama_seq_free(qb);
  feri_llama_close(s);
  free(a);
  free(b);
}

/* Teacher-forced agreement: ferrite is fed llama.cpp's greedy tokens; argmax equal wherever
 * llama.cpp's top-2 margin exceeds 0.5, and at least min_permille of all positions. Each prompt's
 * 64 positions come from one feri_llama_forward_all over the prompt and the reference's tokens:
 * the rows one-token steps would give, bit for bit (llama.h; //c/model:perplexity_test checks it on
 * this model), at the batched path's speed (the steps took 30 of this test's 50 s). */
enum { AGREE_STEPS = 64 };
typedef struct agree_prompt {
  int32_t ids[MAX_PROMPT + AGREE_STEPS];
  uint32_t n_prompt;
  ref_step steps[AGREE_STEPS];
  int n_steps;
} agree_prompt;

static void agreement_of(feri_llama *m, const agree_prompt *q, float *logits, uint32_t *total, uint32_t *agree,
                         uint32_t *confident, uint32_t *confident_agree, uint32_t prompt_no) {
  const uint32_t V = feri_llama_config_of(m)->n_vocab, n = q->n_prompt + (uint32_t)q->n_steps - 1;
  feri_llama_seq *s = new_seq(m, n);
  if (!s) return;
  const fer_status st = feri_llama_forward_all(s, NULL, q->ids, n, logits);
  CHECK_STATUS(st, FER_STATUS_OK);
  for (int k = 0; st == FER_STATUS_OK && k < q->n_steps; k++) {
    const ref_step *r = &q->steps[k];
    const int32_t mine = feri_test_argmax(logits + (size_t)(q->n_prompt - 1 + (uint32_t)k) * V, V);
    (*total)++;
    *agree += mine == r->token;
    if (r->l1 - r->l2 > 0.5f) {
      (*confident)++;
      *confident_agree += mine == r->token;
      if (mine != r->token)
        fprintf(stderr, "  prompt %u step %d: ferrite %d, llama.cpp %d (margin %.3f)\n", prompt_no, r->step, mine,
                r->token, r->l1 - r->l2);
    }
  }
  feri_llama_seq_free(s);
}

static void test_agreement(feri_llama *m, const char *golden_path, int min_permille, uint32_t max_confident_misses) {
  FILE *f = fopen(golden_path, "r");
  CHECK(f != NULL);
  if (!f) return;
  const uint32_t V = feri_llama_config_of(m)->n_vocab;
  float *logits = malloc((size_t)(MAX_PROMPT + AGREE_STEPS) * V * sizeof(float));
  agree_prompt *q = calloc(1, sizeof *q);
  char line[4096];
  uint32_t total = 0, agree = 0, confident = 0, confident_agree = 0, prompts = 0;
  int have = 0;
  for (int more = 1; logits && q && more;) {
    more = fgets(line, sizeof line, f) != NULL;
    ref_step r;
    if (!more || strncmp(line, "prompt", 6) == 0) {
      if (have && q->n_steps > 0) agreement_of(m, q, logits, &total, &agree, &confident, &confident_agree, prompts);
      if (!more) break;
      memset(q, 0, sizeof *q);
      q->n_prompt = feri_test_parse_ids(line + 6, q->ids, MAX_PROMPT);
      have = q->n_prompt > 0;
      prompts++;
    } else if (have && parse_step(line, &r)) {
      CHECK(r.step == q->n_steps && q->n_steps < AGREE_STEPS);
      if (r.step != q->n_steps || q->n_steps >= AGREE_STEPS) break;
      q->steps[q->n_steps++] = r;
      q->ids[q->n_prompt + (uint32_t)r.step] = r.token; /* the next position's input */
    }
  }
  fclose(f);
  free(q);
  free(logits);
  printf("agreement: %u prompts, %u positions, argmax equal at %u (%.2f%%); at %u of the %u positions with "
         "a top-2 margin above 0.5\n",
         prompts, total, agree, total ? 100.0 * agree / total : 0.0, confident_agree, confident);
  CHECK(prompts == 10 && total == 640);
  CHECK(confident - confident_agree <= max_confident_misses);
  CHECK(agree * 1000 >= total * (uint32_t)min_permille);
}

/* Perplexity over the reference's 2,000 ids against llama.cpp's, within 1%. */
static void test_perplexity(feri_llama *m, const char *golden_path) {
  FILE *f = fopen(golden_path, "r");
  CHECK(f != NULL);
  if (!f) return;
  static char line[1 << 16];
  static int32_t ids[N_PPL];
  uint32_t n_ids = 0;
  double ref = 0;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "ids ", 4) == 0) n_ids += feri_test_parse_ids(line + 3, ids + n_ids, N_PPL - n_ids);
    else sscanf(line, "perplexity %lf", &ref);
  }
  fclose(f);
  CHECK(n_ids == N_PPL && ref > 0);
  if (n_ids != N_PPL || !(ref > 0)) return;
  const uint32_t V = feri_llama_config_of(m)->n_vocab;
  float *logits = malloc((size_t)PPL_CHUNK * V * sizeof(float));
  feri_llama_seq *s = new_seq(m, N_PPL);
  double sum = 0;
  int ok = logits && s;
  for (uint32_t p = 0; ok && p < N_PPL; p += PPL_CHUNK) {
    fer_status st = feri_llama_forward_all(s, NULL, ids + p, PPL_CHUNK, logits);
    CHECK_STATUS(st, FER_STATUS_OK);
    ok = st == FER_STATUS_OK;
    for (uint32_t i = 0; ok && i < PPL_CHUNK && p + i + 1 < N_PPL; i++) {
      const float *l = logits + (size_t)i * V;
      double mx = l[0], z = 0;
      for (uint32_t v = 1; v < V; v++) mx = l[v] > mx ? l[v] : mx;
      for (uint32_t v = 0; v < V; v++) z += exp((double)l[v] - mx);
      sum += -((double)l[ids[p + i + 1]] - mx - log(z));
    }
  }
  feri_llama_seq_free(s);
  free(logits);
  const double ppl = ok ? exp(sum / (N_PPL - 1)) : NAN;
  printf("perplexity over %d predictions: ferrite %.4f, llama.cpp %.4f (%+.3f%%)\n", N_PPL - 1, ppl, ref,
         100.0 * (ppl / ref - 1.0));
  CHECK(fabs(ppl / ref - 1.0) < 0.01);
}

int main(int argc, char **argv) {
  if (argc < 5 || argc > 7) {
    fprintf(stderr, "usage: real_files_test MODEL.gguf GREEDY AGREEMENT PERPLEXITY [MIN_AGREEMENT_PERMILLE "
                    "[MAX_CONFIDENT_MISSES]]\n");
    return 2;
  }
  const int min_permille = argc >= 6 ? atoi(argv[5]) : 980;
  const uint32_t max_misses = argc == 7 ? (uint32_t)atoi(argv[6]) : 0;
  char path[4096];
  if (!feri_test_data_path(argv[1], path, sizeof path)) {
    printf("SKIPPED: real_files_test: %s not found ($FERRITE_DATA_DIR or ~/.cache/ferrite)\n", argv[1]);
    return feri_test_finish("real_files_test");
  }
  feri_llama *m = NULL;
  CHECK_STATUS(feri_llama_open(path, &m), FER_STATUS_OK);
  if (m) {
    printf("%s\n", argv[1]);
    test_greedy(m, argv[2]);
    test_panels_equal_blocks(m, path);
#if defined(__SANITIZE_ADDRESS__)
    /* 640 + 2,000 forward positions take minutes under ASan; the normal build runs them */
    (void)test_agreement, (void)test_perplexity, (void)min_permille, (void)max_misses;
    printf("SKIPPED: real_files_test: agreement and perplexity in a sanitizer build\n");
#else
    test_agreement(m, argv[3], min_permille, max_misses);
    test_perplexity(m, argv[4]);
#endif
  }
  feri_llama_close(m);
  return feri_test_finish("real_files_test");
}
