/* sample_test.c: radix selection against a full sort, and known answers for the processors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sample/chain.h"
#include "sample/select.h"
#include "testing/check.h"

static int cmp_desc_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return x > y ? -1 : x < y;
}

static void kth_matches_sort(void) {
  uint32_t s = 12345;
  for (int trial = 0; trial < 300; trial++) {
    size_t n = 1 + (size_t)(trial * 37 % 3000);
    float *x = malloc(n * sizeof *x), *sorted = malloc(n * sizeof *sorted);
    uint32_t *scratch = malloc(n * sizeof *scratch);
    int distinct = 1 + trial % 50; /* heavy ties on most trials */
    size_t n_finite = 0;
    for (size_t i = 0; i < n; i++) {
      s ^= s << 13, s ^= s >> 17, s ^= s << 5;
      x[i] = trial % 3 == 0 ? (float)((int)(s % 2000001) - 1000000) * 1e-3f : (float)((int)(s % (uint32_t)distinct) - distinct / 2);
      if (s % 11 == 0) x[i] = -INFINITY;
      if (x[i] != -INFINITY) sorted[n_finite++] = x[i];
    }
    qsort(sorted, n_finite, sizeof *sorted, cmp_desc_float);
    for (size_t k = 1; k <= n; k += 1 + n / 7) {
      uint32_t key = feri_kth_largest_key(x, n, k, scratch);
      if (k > n_finite) {
        CHECK(key == 0);
      } else {
        CHECK(feri_key_float(key) == sorted[k - 1]);
      }
    }
    free(x), free(sorted), free(scratch);
  }
  CHECK(feri_float_key(-INFINITY) < feri_float_key(-1e30f));
  CHECK(feri_float_key(-0.0f) < feri_float_key(0.0f));
  CHECK(feri_float_key(1.0f) < feri_float_key(INFINITY));
}

static fer_sampler *make(void (*set)(fer_sampling_params *)) {
  fer_sampling_params p;
  CHECK_STATUS(fer_sampling_params_init(&p), FER_STATUS_OK);
  if (set) set(&p);
  fer_sampler *s = NULL;
  CHECK_STATUS(fer_sampler_create(&p, &s), FER_STATUS_OK);
  return s;
}

static void set_topk2(fer_sampling_params *p) { p->top_k = 2; }
static void set_topp(fer_sampling_params *p) { p->top_p = 0.6f; }
static void set_greedy(fer_sampling_params *p) { p->temperature = 0.0f; }
static void set_rep(fer_sampling_params *p) { p->repetition_penalty = 2.0f; }

static void known_answers(void) {
  fer_sampling_context ctx = {0};
  uint32_t applied = 0;
  /* top-k 2 with a tie at the threshold keeps all three tied-or-above. */
  float l1[6] = {1, 5, 3, 5, 3, 0};
  fer_sampler *s = make(set_topk2);
  CHECK_STATUS(fer_sampler_process(s, l1, 6, &ctx, &applied), FER_STATUS_OK);
  CHECK(applied == FER_PROCESSOR_TOP_K);
  CHECK(l1[0] == -INFINITY && l1[1] == 5 && l1[3] == 5 && l1[2] == -INFINITY && l1[5] == -INFINITY);
  float l1b[6] = {1, 5, 3, 4, 3, 0};
  CHECK_STATUS(fer_sampler_process(s, l1b, 6, &ctx, &applied), FER_STATUS_OK);
  CHECK(l1b[1] == 5 && l1b[3] == 4 && l1b[2] == -INFINITY);
  fer_sampler_free(s);

  /* top-p 0.6 over probabilities ~ {0.665, 0.245, 0.09}: the first token alone reaches 0.6. */
  float l2[3] = {2, 1, 0};
  s = make(set_topp);
  CHECK_STATUS(fer_sampler_process(s, l2, 3, &ctx, &applied), FER_STATUS_OK);
  CHECK(l2[0] == 2 && l2[1] == -INFINITY && l2[2] == -INFINITY);
  fer_sampler_free(s);

  /* greedy: ties go to the lowest id. */
  float l3[5] = {1, 7, 2, 7, 0};
  int32_t tok = -1;
  CHECK_STATUS(fer_sample_greedy(l3, 5, &tok), FER_STATUS_OK);
  CHECK(tok == 1);
  s = make(set_greedy);
  float lp = 1;
  CHECK_STATUS(fer_sampler_sample_uniform(s, l3, 5, &ctx, 0.99, &tok, &lp), FER_STATUS_OK);
  CHECK(tok == 1 && lp == 0.0f);
  fer_sampler_free(s);

  /* repetition penalty 2: positive halves, negative doubles, once per distinct token. */
  float l4[4] = {4, -4, 4, 1};
  int32_t prompt[3] = {0, 1, 0};
  fer_sampling_context c4 = {.prompt_tokens = prompt, .n_prompt = 3};
  s = make(set_rep);
  CHECK_STATUS(fer_sampler_process(s, l4, 4, &c4, &applied), FER_STATUS_OK);
  CHECK(l4[0] == 2 && l4[1] == -8 && l4[2] == 4 && l4[3] == 1);
  /* bad inputs: NaN refused, out-of-vocab history refused, all masked is a status */
  float l5[3] = {0, NAN, 1};
  CHECK_STATUS(fer_sampler_process(s, l5, 3, &ctx, &applied), FER_STATUS_INVALID_ARG);
  int32_t bad[1] = {7};
  fer_sampling_context c5 = {.generated_tokens = bad, .n_generated = 1};
  float l6[3] = {0, 1, 2};
  CHECK_STATUS(fer_sampler_process(s, l6, 3, &c5, &applied), FER_STATUS_INVALID_ARG);
  float l7[2] = {-INFINITY, -INFINITY};
  CHECK_STATUS(fer_sampler_sample(s, l7, 2, &ctx, &tok, NULL), FER_STATUS_NO_CANDIDATES);
  CHECK(tok == -1);
  CHECK_STATUS(fer_sampler_process(NULL, l6, 3, &ctx, &applied), FER_STATUS_NULL_ARG);
  fer_sampler_free(s);
  fer_sampler_free(NULL);

  /* A categorical draw at u = 0.5 over equal weights picks the middle token. */
  float l8[3] = {0, 0, 0};
  s = make(NULL);
  CHECK_STATUS(fer_sampler_sample_uniform(s, l8, 3, &ctx, 0.5, &tok, &lp), FER_STATUS_OK);
  CHECK(tok == 1 && fabsf(lp - logf(1.0f / 3.0f)) < 1e-6f);
  CHECK_STATUS(fer_sampler_sample_uniform(s, l8, 3, &ctx, 1.0, &tok, &lp), FER_STATUS_INVALID_ARG);
  fer_sampler_free(s);
}

/* Random logits with every special value a scan must get right. */
static void fill_specials(float *x, size_t n, uint32_t seed) {
  static const float special[] = {-INFINITY, INFINITY, 0.0f, -0.0f, 1e-45f, -3.0f};
  uint32_t s = seed * 2654435761u + 7;
  for (size_t i = 0; i < n; i++) {
    s ^= s << 13, s ^= s >> 17, s ^= s << 5;
    x[i] = (s & 7) == 0 ? special[(s >> 3) % 6] : (float)((int)(s >> 8) % 4001 - 2000) / 100.0f;
    if ((s & 255) == 1) x[i] = NAN;
  }
}

/* Every ISA table of select.h gives the portable table's results, on lengths around the vector
 * width and on specials (NaN, +-inf, +-0, subnormals). */
static void select_tables_agree(void) {
  const feri_select_ops *ref = feri_select_ops_for(FER_ISA_PORTABLE);
  const feri_select_ops *vec = feri_select_ops_for(FER_ISA_AVX2);
  if (vec == ref || !(fer_cpu_features() & FER_CPU_FEATURE_AVX2)) {
    printf("SKIPPED: AVX2 side of the selection-table comparison (CPU lacks AVX2)\n");
    return;
  }
  for (size_t n = 1; n < 300; n += (n < 40 ? 1 : 37)) {
    for (uint32_t seed = 1; seed < 6; seed++) {
      float *x = malloc(n * sizeof *x), *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
      uint32_t *ia = malloc(n * sizeof *ia), *ib = malloc(n * sizeof *ib);
      fill_specials(x, n, seed + (uint32_t)n);
      CHECK(ref->count_nonfinite(x, n) == vec->count_nonfinite(x, n));
      int nan_a = 0, nan_b = 0;
      size_t am_a = ref->argmax(x, n, &nan_a), am_b = vec->argmax(x, n, &nan_b);
      CHECK(nan_a == nan_b && (nan_a || am_a == am_b));
      /* the rest take NaN-free input, as the chain guarantees */
      for (size_t i = 0; i < n; i++)
        if (x[i] != x[i]) x[i] = -INFINITY;
      nan_a = nan_b = 1;
      CHECK(ref->argmax(x, n, &nan_a) == vec->argmax(x, n, &nan_b) && !nan_a && !nan_b);
      CHECK(ref->collect_finite(x, n, ia) == vec->collect_finite(x, n, ib));
      CHECK(memcmp(ia, ib, ref->collect_finite(x, n, ia) * sizeof *ia) == 0);
      memcpy(a, x, n * sizeof *x), memcpy(b, x, n * sizeof *x);
      ref->divide(a, n, 0.7f), vec->divide(b, n, 0.7f);
      CHECK(memcmp(a, b, n * sizeof *a) == 0);
      const float thresholds[] = {0.0f, -0.0f, 3.5f, -INFINITY, 1e-45f};
      for (int t = 0; t < 5; t++) {
        uint32_t key = feri_float_key(thresholds[t]);
        if (key <= feri_float_key(-INFINITY)) key = feri_float_key(-INFINITY) + 1;
        memcpy(a, x, n * sizeof *x), memcpy(b, x, n * sizeof *x);
        size_t ma = ref->mask_below(a, n, key, ia), mb = vec->mask_below(b, n, key, ib);
        CHECK(ma == mb && memcmp(ia, ib, ma * sizeof *ia) == 0 && memcmp(a, b, n * sizeof *a) == 0);
      }
      for (size_t k = 1; k <= 8 && k <= n; k++) {
        float ha[8], hb[8];
        for (size_t i = 0; i < k; i++) ha[i] = hb[i] = -1e30f; /* a full heap of floor values */
        ref->heap_scan(x, 0, n, ha, k), vec->heap_scan(x, 0, n, hb, k);
        CHECK(ha[0] == hb[0]);
      }
      free(x), free(a), free(b), free(ia), free(ib);
    }
  }
}

int main(void) {
  select_tables_agree();
  kth_matches_sort();
  known_answers();
  return feri_test_finish("sample_test");
}
