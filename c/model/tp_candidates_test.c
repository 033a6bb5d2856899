/* tp_candidates_test.c: drawing from the ranks' best candidates equals drawing from the whole row
 * (tp_candidates.h). Rows of 5,000 logits with many exact ties (values on a grid of 1/8), cut into
 * 2, 3 and 4 vocabulary slices as tensor parallelism cuts them; each slice's best and the ties they
 * cut go into a row that is -inf elsewhere; fer_sampler's draw from both, with the same seed: the
 * same token, over 200 rows, for greedy decoding and for top-k sampling (k 1, 7, 40, 256, with
 * top-p and min-p after it). Without the cut ties top-k's draws differ (measured, and checked to
 * differ, so the rows do exercise the ties). Every other sampling, and anything that reads other
 * tokens, needs the whole row (0 candidates). A selection that broke ties by the higher id fails.
 * EVIDENCE: C-TP-010 */
#include <math.h>
#include <stdbool.h>
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

/* How many of 600 draws (200 rows, 2 to 4 slices) from the slices' candidates differ from the
 * whole row's. */
static uint32_t draws_differing(const fer_sampling_params *p, const char *what, bool with_ties) {
  const uint32_t k = feri_tp_candidates_needed(p, false, false);
  CHECK(k > 0);
  static feri_tp_candidate ties[V];
  uint32_t n_ties = 0;
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
        if (with_ties) {
          const uint32_t t = feri_tp_cut_ties(full + sl.begin, sl.end - sl.begin, sl.begin, cand[k - 1], ties);
          CHECK(t == feri_tp_cut_ties(full + sl.begin, sl.end - sl.begin, sl.begin, cand[k - 1], NULL));
          feri_tp_place_candidates(ties, t, sparse, V);
          n_ties += t;
        }
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
  printf("tp_candidates_test: %s%s: %u of %u draws differ from the whole row's (%u cut ties sent)\n", what,
         with_ties ? "" : " without the cut ties", differ, draws, n_ties);
  fer_sampler_free(s);
  free(full), free(work), free(sparse);
  return differ;
}

int main(void) {
  /* the selection itself: best first, ties to the lower id, short slices padded */
  const float row[6] = {1, 3, 3, 2, 3, NAN};
  feri_tp_candidate c[8];
  feri_tp_top_candidates(row, 6, 100, 3, c);
  CHECK(c[0].id == 101 && c[1].id == 102 && c[2].id == 104 && c[0].logit == 3);
  /* the cut ties: {3, 3, 3} cut after two leaves the third; none after the third, none of no candidate */
  feri_tp_candidate t[4];
  CHECK(feri_tp_cut_ties(row, 6, 100, c[1], t) == 1 && t[0].id == 104 && t[0].logit == 3);
  CHECK(feri_tp_cut_ties(row, 6, 100, c[2], t) == 0);
  CHECK(feri_tp_cut_ties(row, 6, 100, (feri_tp_candidate){-1, -INFINITY}, t) == 0);
  feri_tp_top_candidates(row, 2, 0, 4, c);
  CHECK(c[0].id == 1 && c[1].id == 0 && c[2].id == -1 && c[3].id == -1);

  fer_sampling_params p;
  fer_sampling_params_init(&p);
  p.temperature = 0;
  CHECK(draws_differing(&p, "greedy", true) == 0);

  /* top-k sampling, with what may follow it */
  const struct {
    int32_t top_k;
    float temperature, top_p, min_p;
    const char *what;
  } cases[] = {{1, 1.0f, 1.0f, 0.0f, "top-k 1"},
               {7, 0.8f, 1.0f, 0.0f, "top-k 7"},
               {40, 0.8f, 0.9f, 0.0f, "top-k 40, top-p 0.9"},
               {40, 1.3f, 1.0f, 0.05f, "top-k 40, min-p 0.05"},
               {256, 0.7f, 0.95f, 0.0f, "top-k 256, top-p 0.95"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    fer_sampling_params_init(&p);
    p.top_k = cases[i].top_k, p.temperature = cases[i].temperature;
    p.top_p = cases[i].top_p, p.min_p = cases[i].min_p;
    CHECK(feri_tp_candidates_needed(&p, false, false) == (uint32_t)p.top_k);
    CHECK(draws_differing(&p, cases[i].what, true) == 0);
  }
  /* without the ties a rank's k miss what top-k keeps: the refutation, measured again */
  fer_sampling_params_init(&p);
  p.top_k = 7, p.temperature = 0.8f;
  CHECK(draws_differing(&p, "top-k 7", false) > 0);

  /* what needs the whole row */
  CHECK(feri_tp_candidates_needed(&p, true, false) == 0 && feri_tp_candidates_needed(&p, false, true) == 0);
  p.repetition_penalty = 1.1f;
  CHECK(feri_tp_candidates_needed(&p, false, false) == 0);
  fer_sampling_params_init(&p);
  CHECK(feri_tp_candidates_needed(&p, false, false) == 0); /* temperature 1: every token */
  p.top_p = 0.9f;
  CHECK(feri_tp_candidates_needed(&p, false, false) == 0); /* top-p without top-k: the whole mass */
  p.top_k = FERI_TP_MAX_CANDIDATES + 1;
  CHECK(feri_tp_candidates_needed(&p, false, false) == 0);
  p.top_k = 40, p.typical_p = 0.9f;
  CHECK(feri_tp_candidates_needed(&p, false, false) == 0);
  return feri_test_finish("tp_candidates_test");
}
