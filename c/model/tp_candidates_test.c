/* tp_candidates_test.c: drawing from the ranks' best candidates equals drawing from the whole row
 * (tp_candidates.h). Rows of 5,000 logits with many exact ties (values on a grid of 1/8), cut into
 * 2, 3 and 4 vocabulary slices as tensor parallelism cuts them; each slice's best goes into a row
 * that is -inf elsewhere; fer_sampler's greedy draw from both: the same token, over 200 rows. Every
 * other sampling, and anything that reads other tokens, needs the whole row (0 candidates). A
 * selection that broke ties by the higher id fails here.
 * EVIDENCE: C-TP-010 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/tp_candidates.h"
#include "model/tp_plan.h"
#include "testing/check.h"

enum { V = 5000 };

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float next_logit(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (float)((int)(rng % 161) - 80) / 8.0f; /* -10 .. 10 in steps of 1/8: many ties */
}

static void check_params(const fer_sampling_params *p, const char *what) {
  const uint32_t k = feri_tp_candidates_needed(p, false, false);
  CHECK(k > 0);
  fer_sampler *s = NULL;
  CHECK_STATUS(fer_sampler_create(p, &s), FER_STATUS_OK);
  float *full = malloc(V * sizeof *full), *work = malloc(V * sizeof *work), *sparse = malloc(V * sizeof *sparse);
  feri_tp_candidate cand[FERI_TP_MAX_CANDIDATES];
  const fer_sampling_context ctx = {0};
  uint32_t differ = 0, draws = 0;
  for (int seed = 0; seed < 200; seed++) { /* 200 rows */
    for (int i = 0; i < V; i++) full[i] = next_logit();
    for (uint32_t ranks = 2; ranks <= 4; ranks++) {
      for (int i = 0; i < V; i++) sparse[i] = -INFINITY;
      for (uint32_t r = 0; r < ranks; r++) {
        const feri_tp_range sl = feri_tp_part(V, r, ranks);
        feri_tp_top_candidates(full + sl.begin, sl.end - sl.begin, sl.begin, k, cand);
        feri_tp_place_candidates(cand, k, sparse, V);
      }
      fer_sampling_params q = *p;
      q.seed = (uint64_t)seed * 7919u + ranks;
      fer_sampler_free(s);
      CHECK_STATUS(fer_sampler_create(&q, &s), FER_STATUS_OK);
      int32_t a = -1, b = -2;
      memcpy(work, full, V * sizeof *work);
      CHECK_STATUS(fer_sampler_sample(s, work, V, &ctx, &a, NULL), FER_STATUS_OK);
      fer_sampler_free(s);
      CHECK_STATUS(fer_sampler_create(&q, &s), FER_STATUS_OK);
      memcpy(work, sparse, V * sizeof *work);
      CHECK_STATUS(fer_sampler_sample(s, work, V, &ctx, &b, NULL), FER_STATUS_OK);
      differ += a != b;
      draws++;
    }
  }
  printf("tp_candidates_test: %s: %u of %u draws differ from the whole row's\n", what, differ, draws);
  CHECK(differ == 0);
  fer_sampler_free(s);
  free(full), free(work), free(sparse);
}

int main(void) {
  /* the selection itself: best first, ties to the lower id, short slices padded */
  const float row[6] = {1, 3, 3, 2, 3, NAN};
  feri_tp_candidate c[8];
  feri_tp_top_candidates(row, 6, 100, 3, c);
  CHECK(c[0].id == 101 && c[1].id == 102 && c[2].id == 104 && c[0].logit == 3);
  feri_tp_top_candidates(row, 2, 0, 4, c);
  CHECK(c[0].id == 1 && c[1].id == 0 && c[2].id == -1 && c[3].id == -1);

  fer_sampling_params p;
  fer_sampling_params_init(&p);
  p.temperature = 0;
  check_params(&p, "greedy");

  /* what needs the whole row */
  CHECK(feri_tp_candidates_needed(&p, true, false) == 0 && feri_tp_candidates_needed(&p, false, true) == 0);
  p.repetition_penalty = 1.1f;
  CHECK(feri_tp_candidates_needed(&p, false, false) == 0);
  fer_sampling_params_init(&p);
  CHECK(feri_tp_candidates_needed(&p, false, false) == 0); /* temperature 1: every token */
  p.top_k = 40, p.temperature = 0.8f;
  CHECK(feri_tp_candidates_needed(&p, false, false) == 0); /* top-k keeps ties: not exact with k a rank */
  return feri_test_finish("tp_candidates_test");
}
