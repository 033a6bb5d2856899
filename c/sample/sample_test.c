/* sample_test.c: radix selection against a full sort, and known answers for the processors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sample/chain.h"
#include "sample/fast.h"
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

/* ---- the fast front against the reference front ---- */

typedef struct rng32 {
  uint64_t s;
} rng32;

static uint32_t rnd(rng32 *r) {
  r->s = r->s * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(r->s >> 33);
}

static float rnd_unit(rng32 *r) { return (float)rnd(r) / 2147483648.0f; } /* [0, 1) */

/* Logits of one of five shapes (heavy ties around zero, spread, the original bench's rising runs,
 * huge magnitudes, all masked), with specials sprinkled in: -inf, +-0, subnormals, +-FLT_MAX, and
 * when `nonfinite` NaN and +inf. */
static void fill_logits(rng32 *r, float *x, size_t n, int nonfinite) {
  static const float special[] = {-INFINITY, 0.0f, -0.0f, 1e-45f, -1e-45f, 3.4e38f, -3.4e38f, 0.5f};
  const uint32_t shape = rnd(r) % 5, every = 2 + rnd(r) % 30;
  for (size_t i = 0; i < n; i++) {
    float v;
    switch (shape) {
      case 0: v = (float)((int)(rnd(r) % 7) - 3) * 0.5f; break; /* ties, including +0 */
      case 1: v = (rnd_unit(r) - 0.5f) * 40.0f; break;
      case 2: v = ((float)(i * 17 % 997) - 498.0f) / 73.0f; break;
      case 3: v = (rnd_unit(r) - 0.5f) * 3e38f * 2.0f; break;
      default: v = -INFINITY; break;
    }
    if (rnd(r) % every == 0) v = special[rnd(r) % 8];
    if (nonfinite && rnd(r) % 97 == 0) v = rnd(r) % 2 ? NAN : INFINITY;
    x[i] = v;
  }
}

/* A configuration from the bits of `combo` (each processor on or off; two bits pick temperature
 * 1, 0, an ordinary value or an extreme one), with random values. */
static void make_params(rng32 *r, uint32_t combo, size_t vocab, fer_sampling_params *p, int32_t *bias_tok,
                        float *bias_val) {
  fer_sampling_params_init(p);
  p->seed = rnd(r);
  if (combo & 1) {
    p->n_logit_bias = 1 + rnd(r) % 4;
    for (uint32_t i = 0; i < p->n_logit_bias; i++) {
      bias_tok[i] = (int32_t)(rnd(r) % vocab);
      bias_val[i] = i == 0 && rnd(r) % 2 ? -INFINITY : (rnd_unit(r) - 0.5f) * 8.0f;
    }
    p->logit_bias_tokens = bias_tok;
    p->logit_bias_values = bias_val;
  }
  if (combo & 2) {
    p->repetition_penalty = rnd(r) % 8 == 0 ? 1e-30f : 0.5f + rnd_unit(r) * 1.5f;
    p->repetition_window = rnd(r) % 3 == 0 ? (int32_t)(rnd(r) % 20) : 0;
  }
  if (combo & 4) p->frequency_penalty = rnd(r) % 8 == 0 ? -1e30f : (rnd_unit(r) - 0.5f) * 2.0f;
  if (combo & 8) p->presence_penalty = (rnd_unit(r) - 0.5f) * 2.0f;
  if (combo & 16) p->no_repeat_ngram_size = 1 + (int32_t)(rnd(r) % 3);
  if (combo & 32) {
    p->min_new_tokens = 1000;
    p->eos_token_id = (int32_t)(rnd(r) % vocab);
  }
  switch ((combo >> 6) & 3) {
    case 0: break;
    case 1: p->temperature = 0.0f; break;
    case 2: p->temperature = 0.05f + rnd_unit(r) * 3.0f; break;
    default: p->temperature = rnd(r) % 2 ? 1e-3f : 1e6f; break;
  }
  if (combo & 256) {
    const uint32_t pick = rnd(r) % 4;
    p->top_k = pick == 0 ? 1 + (int32_t)(rnd(r) % 8) : pick == 1 ? 50 : pick == 2 ? 200 + (int32_t)(rnd(r) % 100)
                                                                                   : (int32_t)vocab + 1;
  }
  if (combo & 512) p->top_p = 0.05f + rnd_unit(r) * 0.94f;
  if (combo & 1024) p->min_p = rnd(r) % 4 == 0 ? 1.0f : rnd_unit(r) * 0.3f;
  if (combo & 2048) p->typical_p = 0.05f + rnd_unit(r) * 0.94f;
  if (combo & 4096) {
    p->xtc_threshold = rnd_unit(r) * 0.3f;
    p->xtc_probability = 0.5f + rnd_unit(r) * 0.5f;
  }
  if (combo & 8192) p->flags |= FER_SAMPLING_FLAG_ALLOW_NONFINITE;
  if (rnd(r) % 2) p->flags |= FER_SAMPLING_FLAG_FUSE_TOP_K_TOP_P;
}

/* One case through the reference and through `impl`: the same status, applied bits and logits,
 * bit for bit (NaN included), and the same token and log-probability from the draw. */
static int same_as_reference(feri_sample_impl impl, const fer_sampling_params *p, const float *logits, size_t n,
                             const fer_sampling_context *ctx, double u) {
  fer_sampler *ref = NULL, *fast = NULL;
  CHECK_STATUS(fer_sampler_create(p, &ref), FER_STATUS_OK);
  CHECK_STATUS(fer_sampler_create(p, &fast), FER_STATUS_OK);
  CHECK_STATUS(feri_sampler_set_impl(ref, FERI_SAMPLE_IMPL_REFERENCE), FER_STATUS_OK);
  CHECK_STATUS(feri_sampler_set_impl(fast, impl), FER_STATUS_OK);
  float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
  int ok = 1;
  for (int round = 0; round < 2 && ok; round++) { /* twice: the second call reuses the scratch */
    memcpy(a, logits, n * sizeof *a), memcpy(b, logits, n * sizeof *b);
    uint32_t applied_a = 1, applied_b = 2;
    fer_status sa = fer_sampler_process(ref, a, n, ctx, &applied_a);
    fer_status sb = fer_sampler_process(fast, b, n, ctx, &applied_b);
    ok = sa == sb && applied_a == applied_b && memcmp(a, b, n * sizeof *a) == 0;
    if (!ok) {
      size_t i = 0;
      while (i < n && memcmp(&a[i], &b[i], sizeof *a) == 0) i++;
      printf("  process: status %d vs %d, applied 0x%x vs 0x%x, first difference at %zu of %zu", (int)sa, (int)sb,
             applied_a, applied_b, i, n);
      if (i < n) printf(" (%a from %a vs %a)", (double)logits[i], (double)a[i], (double)b[i]);
      printf("\n");
    }
  }
  if (ok) {
    memcpy(a, logits, n * sizeof *a), memcpy(b, logits, n * sizeof *b);
    int32_t ta = -2, tb = -3;
    float la = 1, lb = 2;
    fer_status sa = fer_sampler_sample_uniform(ref, a, n, ctx, u, &ta, &la);
    fer_status sb = fer_sampler_sample_uniform(fast, b, n, ctx, u, &tb, &lb);
    ok = sa == sb && ta == tb && memcmp(&la, &lb, sizeof la) == 0 && memcmp(a, b, n * sizeof *a) == 0;
    if (!ok)
      printf("  draw at u = %g: status %d vs %d, token %d vs %d, logprob %a vs %a\n", u, (int)sa, (int)sb, ta, tb,
             (double)la, (double)lb);
  }
  free(a), free(b);
  fer_sampler_free(ref), fer_sampler_free(fast);
  return ok;
}

/* Every processor combination (and NaN/+inf allowed or not), each on random logits of a random
 * size crossing the chunk and vector boundaries, for every fast level the CPU has.
 * EVIDENCE: C-SAMP-013 */
static void fast_front_equals_reference(void) {
  feri_sample_impl impls[3] = {FERI_SAMPLE_IMPL_FAST_PORTABLE, FERI_SAMPLE_IMPL_FAST_AVX2,
                               FERI_SAMPLE_IMPL_FAST_AVX512};
  const char *names[3] = {"portable", "AVX2", "AVX-512"};
  enum { MAX_VOCAB = 1200, MAX_HISTORY = 48 };
  float *x = malloc(MAX_VOCAB * sizeof *x);
  int32_t hist[MAX_HISTORY], bias_tok[4];
  float bias_val[4];
  for (int l = 0; l < 3; l++) {
    if (feri_fast_ops_for(impls[l]) == NULL) {
      printf("SKIPPED: the %s fast front (the CPU lacks it)\n", names[l]);
      continue;
    }
    rng32 r = {.s = 0x5eed + (uint64_t)l};
    int failures = 0;
    for (uint32_t combo = 0; combo < (1u << 14); combo++) {
      const size_t vocab = rnd(&r) % 4 == 0 ? 1 + rnd(&r) % 40 : 100 + rnd(&r) % (MAX_VOCAB - 100);
      fill_logits(&r, x, vocab, combo % 3 == 0);
      const size_t n_hist = rnd(&r) % MAX_HISTORY, n_prompt = n_hist / 2;
      for (size_t i = 0; i < n_hist; i++) hist[i] = (int32_t)(rnd(&r) % (vocab < 20 ? vocab : 20));
      const fer_sampling_context ctx = {.prompt_tokens = hist, .n_prompt = n_prompt,
                                        .generated_tokens = hist + n_prompt, .n_generated = n_hist - n_prompt};
      fer_sampling_params p;
      make_params(&r, combo, vocab, &p, bias_tok, bias_val);
      if (!same_as_reference(impls[l], &p, x, vocab, &ctx, rnd_unit(&r)) && failures++ < 5)
        printf("  %s fast front differs: combo 0x%x vocab %zu top_k %d temperature %g\n", names[l], combo, vocab,
               p.top_k, (double)p.temperature);
    }
    /* the original bench's vocabulary and chain, and a large one around the chunk size */
    const size_t big[2] = {32000, 151936 + 77};
    for (int b = 0; b < 2; b++) {
      float *y = malloc(big[b] * sizeof *y);
      for (int trial = 0; trial < 6; trial++) {
        fill_logits(&r, y, big[b], trial == 5);
        fer_sampling_params p;
        make_params(&r, 0x68e | (uint32_t)(trial % 2) << 8, 97, &p, bias_tok, bias_val);
        const fer_sampling_context ctx = {.prompt_tokens = hist, .n_prompt = 20, .generated_tokens = hist + 20,
                                          .n_generated = 20};
        if (!same_as_reference(impls[l], &p, y, big[b], &ctx, rnd_unit(&r)) && failures++ < 5)
          printf("  %s fast front differs at vocab %zu, trial %d\n", names[l], big[b], trial);
      }
      free(y);
    }
    CHECK(failures == 0);
  }
  free(x);
  /* the level selection: an unknown level is refused, a pinned one is kept */
  fer_sampler *s = make(NULL);
  CHECK_STATUS(feri_sampler_set_impl(s, (feri_sample_impl)99), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(feri_sampler_set_impl(s, FERI_SAMPLE_IMPL_FAST_PORTABLE), FER_STATUS_OK);
  fer_sampler_free(s);
}

/* The header compares floats, so -0 ties with +0 at a top-k or top-p threshold: whichever zero
 * the selection meets first, both stay (the reference front once kept -0 only when it came
 * first). */
static void signed_zero_ties(void) {
  fer_sampling_context ctx = {0};
  const float orders[2][3] = {{0.0f, -0.0f, -1.0f}, {-0.0f, 0.0f, -1.0f}};
  for (int impl = FERI_SAMPLE_IMPL_REFERENCE; impl <= FERI_SAMPLE_IMPL_FAST_PORTABLE; impl++)
    for (int o = 0; o < 2; o++) {
      fer_sampler *s = make(set_topk2);
      CHECK_STATUS(feri_sampler_set_impl(s, (feri_sample_impl)impl), FER_STATUS_OK);
      float l[3];
      memcpy(l, orders[o], sizeof l);
      uint32_t applied;
      CHECK_STATUS(fer_sampler_process(s, l, 3, &ctx, &applied), FER_STATUS_OK);
      CHECK(l[0] == 0.0f && l[1] == 0.0f && l[2] == -INFINITY);
      fer_sampler_free(s);
    }
}

int main(void) {
  select_tables_agree();
  kth_matches_sort();
  known_answers();
  signed_zero_ties();
  fast_front_equals_reference();
  return feri_test_finish("sample_test");
}
