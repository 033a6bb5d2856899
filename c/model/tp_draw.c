/* tp_draw.c: the per-slice steps of a draw made by the ranks together (tp_draw.h). Each mirrors
 * the sampler's own arithmetic (c/sample/sampler.c draw and processors.c): the quotient x / t in
 * float, the weight exp((double)y - (double)mx), the sums in double in id order. */
#include "model/tp_draw.h"

#include <math.h>

#include "model/tp_candidates.h"

/* The sampler's quotient: the value itself at t 1 or for greedy (t 0), else x / t. */
static float quotient(float x, float t) { return t == 0.0f || t == 1.0f ? x : x / t; }

feri_tp_draw_head feri_tp_draw_head_of(const float *x, uint32_t n, uint32_t v0, float t) {
  feri_tp_draw_head h = {-INFINITY, -1, 0, 0};
  for (uint32_t i = 0; i < n; i++) {
    if (x[i] != x[i] || x[i] == INFINITY) { /* the sampler refuses such rows, or treats them its own way */
      h.nonfinite = 1;
      continue;
    }
    const float y = quotient(x[i], t);
    if (y == INFINITY) h.nonfinite = 1; /* a huge logit over a tiny temperature */
    if (y > h.max) h.max = y, h.argmax = (int32_t)(v0 + i);
  }
  return h;
}

feri_tp_draw_head feri_tp_draw_merge(const feri_tp_draw_head *heads, uint32_t p, size_t stride) {
  feri_tp_draw_head h = {-INFINITY, -1, 0, 0};
  for (uint32_t r = 0; r < p; r++) { /* strict >: an equal value later has the higher id */
    const feri_tp_draw_head *g = &heads[r * stride];
    if (g->max > h.max) h.max = g->max, h.argmax = g->argmax;
    h.nonfinite |= g->nonfinite;
  }
  return h;
}

double feri_tp_draw_sum(const float *x, uint32_t n, float t, float mx, double carry) {
  for (uint32_t i = 0; i < n; i++) {
    const float y = quotient(x[i], t);
    if (y != -INFINITY) carry += exp((double)y - (double)mx); /* the sampler's candidates: every value not -inf */
  }
  return carry;
}

feri_tp_draw_find feri_tp_draw_find_in(const float *x, uint32_t n, uint32_t v0, float t, float mx, double carry,
                                       double target) {
  feri_tp_draw_find f = {-1, -1};
  for (uint32_t i = 0; i < n; i++) {
    const float y = quotient(x[i], t);
    if (y == -INFINITY) continue;
    const double w = exp((double)y - (double)mx);
    carry += w;
    if (w > 0) f.last = (int32_t)(v0 + i);
    if (f.first < 0 && carry > target && w > 0) f.first = (int32_t)(v0 + i);
  }
  return f;
}

int32_t feri_tp_draw_choose(const feri_tp_draw_find *finds, uint32_t p, size_t stride) {
  for (uint32_t r = 0; r < p; r++)
    if (finds[r * stride].first >= 0) return finds[r * stride].first;
  for (uint32_t r = p; r-- > 0;)
    if (finds[r * stride].last >= 0) return finds[r * stride].last;
  return -1;
}

bool feri_tp_drawable(const fer_sampling_params *p, bool grammar, bool logprobs) {
  if (feri_tp_reads_every_token(p, grammar, logprobs)) return false;
  if (p->temperature == 0.0f) return true;
  return p->top_k == 0 && p->top_p >= 1.0f && p->min_p <= 0.0f;
}
