/* tp_draw_test.c: a draw the ranks make together equals the sampler's draw from the whole row
 * (tp_draw.h). Rows of 5,000 logits (random values with runs of -inf and exact ties) cut into 2, 3
 * and 4 vocabulary slices as tensor parallelism cuts them; the steps of the exchange run here one
 * rank after another: the heads merged, the running sum carried from slice to slice, the last
 * slice's total, each slice's find, the choice. Against fer_sampler_sample_uniform on the whole
 * row with the same uniform: the same token for plain sampling at temperatures 0.35, 0.7, 1 and
 * 1.6 and for greedy decoding, 720 draws each, half of them with uniforms placed on (or one
 * double beside) a running sum of the row, where a sum rounded otherwise draws another token:
 * adding up each rank's own sum instead of carrying the running sum does (measured, and checked to
 * differ). Rows holding NaN or +inf are flagged (they go whole). Also which requests can draw
 * this way.
 * EVIDENCE: C-TP-013 */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "model/tp_draw.h"
#include "model/tp_plan.h"
#include "testing/check.h"

enum { V = 5000, ROWS = 120 };

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t next(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}

/* A row: values on a grid of 1/16 between -12 and 12 (ties), runs of -inf. */
static void fill_row(float *x) {
  for (int i = 0; i < V; i++) x[i] = (float)((int)(next() % 385) - 192) / 16.0f;
  const int runs = (int)(next() % 4);
  for (int k = 0; k < runs; k++) {
    const int at = (int)(next() % V), len = (int)(next() % 900);
    for (int i = at; i < at + len && i < V; i++) x[i] = -INFINITY;
  }
}

/* The ranks' draw over `ranks` slices of x with uniform u at temperature t. partial_sums: each
 * rank sums its own slice from 0 and the totals are added up (the "normalizers" way), instead of
 * the running sum carried from slice to slice. */
static int32_t ranks_draw(const float *x, uint32_t ranks, float t, double u, bool *nonfinite, bool partial_sums) {
  feri_tp_draw_head heads[4] = {{0}};
  feri_tp_draw_find finds[4] = {{0}};
  double carry[5] = {0};
  for (uint32_t r = 0; r < ranks; r++) {
    const feri_tp_range sl = feri_tp_part(V, r, ranks);
    heads[r] = feri_tp_draw_head_of(x + sl.begin, sl.end - sl.begin, sl.begin, t);
  }
  const feri_tp_draw_head h = feri_tp_draw_merge(heads, ranks, 1);
  *nonfinite = h.nonfinite != 0;
  if (t == 0.0f || h.max == -INFINITY) return h.argmax;
  for (uint32_t r = 0; r < ranks; r++) { /* the scan */
    const feri_tp_range sl = feri_tp_part(V, r, ranks);
    carry[r + 1] = partial_sums ? carry[r] + feri_tp_draw_sum(x + sl.begin, sl.end - sl.begin, t, h.max, 0.0)
                                : feri_tp_draw_sum(x + sl.begin, sl.end - sl.begin, t, h.max, carry[r]);
  }
  const double target = u * carry[ranks];
  for (uint32_t r = 0; r < ranks; r++) {
    const feri_tp_range sl = feri_tp_part(V, r, ranks);
    finds[r] = feri_tp_draw_find_in(x + sl.begin, sl.end - sl.begin, sl.begin, t, h.max, carry[r], target);
  }
  return feri_tp_draw_choose(finds, ranks, 1);
}

/* A uniform whose target u x total lands on the running sum after a random token of the row, or
 * one double either side: where a sum rounded otherwise than the sampler's would draw another
 * token. The sums are the sampler's (y = x / t, weights exp(y - mx) in double, in id order). */
static double boundary_uniform(const float *x, float t) {
  float mx = -INFINITY;
  for (int i = 0; i < V; i++) mx = x[i] / t > mx ? x[i] / t : mx;
  const int stop = (int)(next() % V);
  double total = 0, at = 0;
  for (int i = 0; i < V; i++) {
    const float y = t == 1.0f ? x[i] : x[i] / t;
    if (y != -INFINITY) total += exp((double)y - (double)mx);
    if (i == stop) at = total;
  }
  const double u = at / total, side = (double)(next() % 3);
  return side == 0 ? nextafter(u, 0.0) : side == 1 ? u : nextafter(u, 1.0);
}

/* How many of 720 draws (120 rows x 2 to 4 slices, a random uniform and a boundary one) differ
 * from the sampler's on the whole row; *partial: how many the partial-sums way gets wrong. */
static uint32_t draws_differing(float t, uint32_t *partial) {
  fer_sampling_params p;
  fer_sampling_params_init(&p);
  p.temperature = t;
  CHECK(feri_tp_drawable(&p, false, false));
  fer_sampler *s = NULL;
  CHECK_STATUS(fer_sampler_create(&p, &s), FER_STATUS_OK);
  float *x = malloc(V * sizeof *x), *work = malloc(V * sizeof *work);
  const fer_sampling_context ctx = {0};
  uint32_t differ = 0, distinct = 0, partial_here = 0;
  int32_t prev = -1;
  for (int row = 0; row < ROWS && s; row++) {
    fill_row(x);
    for (uint32_t ranks = 2; ranks <= 4; ranks++) {
      for (int kind = 0; kind < 2; kind++) {
        double u = kind == 0 || t == 0.0f ? (double)(next() >> 11) * 0x1.0p-53 : boundary_uniform(x, t);
        if (u >= 1.0) u = nextafter(1.0, 0.0);
        int32_t want = -1;
        memcpy(work, x, V * sizeof *work);
        CHECK_STATUS(fer_sampler_sample_uniform(s, work, V, &ctx, u, &want, NULL), FER_STATUS_OK);
        bool flagged = true;
        const int32_t got = ranks_draw(x, ranks, t, u, &flagged, false);
        CHECK(!flagged);
        differ += got != want;
        partial_here += ranks_draw(x, ranks, t, u, &flagged, true) != want;
        distinct += want != prev;
        prev = want;
      }
    }
  }
  printf("tp_draw_test: temperature %.2f: %u of %d draws differ from the whole row's (%u changes of token); the "
         "partial sums added up instead: %u differ\n", (double)t, differ, 6 * ROWS, distinct, partial_here);
  *partial += partial_here;
  CHECK(distinct > 100); /* the draws do vary */
  fer_sampler_free(s);
  free(x), free(work);
  return differ;
}

static void test_draws(void) {
  static const float temps[5] = {0.0f, 0.35f, 0.7f, 1.0f, 1.6f};
  uint32_t partial = 0;
  for (int i = 0; i < 5; i++) CHECK(draws_differing(temps[i], &partial) == 0);
  /* the boundary uniforms do tell sums apart: adding the ranks' own sums draws other tokens there */
  CHECK(partial > 0);
}

/* NaN and +inf (also one made by the division) flag the row; -inf everywhere draws nothing. */
static void test_flags(void) {
  float x[64];
  for (int i = 0; i < 64; i++) x[i] = (float)i / 8.0f;
  CHECK(!feri_tp_draw_head_of(x, 64, 0, 0.8f).nonfinite);
  x[17] = NAN;
  CHECK(feri_tp_draw_head_of(x, 64, 0, 0.8f).nonfinite);
  x[17] = INFINITY;
  CHECK(feri_tp_draw_head_of(x, 64, 0, 0.0f).nonfinite);
  x[17] = 3e38f;
  CHECK(!feri_tp_draw_head_of(x, 64, 0, 1.0f).nonfinite);
  CHECK(feri_tp_draw_head_of(x, 64, 0, 0.01f).nonfinite); /* 3e38 / 0.01 overflows */
  for (int i = 0; i < 64; i++) x[i] = -INFINITY;
  const feri_tp_draw_head h = feri_tp_draw_head_of(x, 64, 100, 1.0f);
  CHECK(h.argmax == -1 && h.max == -INFINITY && !h.nonfinite);
  const feri_tp_draw_find none[2] = {{-1, -1}, {-1, -1}};
  CHECK(feri_tp_draw_choose(none, 2, 1) == -1);
  const feri_tp_draw_find top[2] = {{-1, 40}, {-1, 77}}; /* the target at the very top: the last with weight */
  CHECK(feri_tp_draw_choose(top, 2, 1) == 77);
  /* ties across slices: the lower id (the earlier rank) */
  const feri_tp_draw_head heads[3] = {{1.0f, 5, 0, 0}, {2.0f, 70, 0, 0}, {2.0f, 130, 0, 0}};
  CHECK(feri_tp_draw_merge(heads, 3, 1).argmax == 70);
}

static void test_drawable(void) {
  fer_sampling_params p;
  fer_sampling_params_init(&p);
  CHECK(feri_tp_drawable(&p, false, false)); /* temperature 1 alone: the API's default */
  CHECK(!feri_tp_drawable(&p, true, false) && !feri_tp_drawable(&p, false, true));
  p.top_p = 0.9f;
  CHECK(!feri_tp_drawable(&p, false, false));
  p.top_p = 1.0f, p.min_p = 0.05f;
  CHECK(!feri_tp_drawable(&p, false, false));
  p.min_p = 0.0f, p.top_k = 40;
  CHECK(!feri_tp_drawable(&p, false, false));
  p.top_k = 0, p.presence_penalty = 0.5f;
  CHECK(!feri_tp_drawable(&p, false, false));
  p.presence_penalty = 0.0f, p.temperature = 0.0f, p.top_k = 40;
  CHECK(feri_tp_drawable(&p, false, false)); /* greedy, whatever top-k says */
}

int main(void) {
  test_draws();
  test_flags();
  test_drawable();
  return feri_test_finish("tp_draw_test");
}
