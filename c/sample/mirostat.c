/* mirostat.c: mirostat v1 and v2 (Basu et al. 2020; semantics in ferrite.h). The truncation reads
 * mu; the sampler moves mu after each draw with feri_mirostat_update. */
#include <math.h>
#include <stdlib.h>

#include "sample/chain.h"

/* Descending weight, then ascending id. */
static int cmp_weight_desc(const void *a, const void *b) {
  const feri_scored *x = a, *y = b;
  if (x->score != y->score) return x->score > y->score ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}

/* v2: keep the tokens whose surprise -log2 p is at most mu; at least the first maximum. */
static void truncate_v2(feri_chain *c, double mu, const double *w, double total) {
  size_t n_kept = 0, first_max = 0;
  for (size_t j = 0; j < c->n_cand; j++) {
    if (w[j] > w[first_max]) first_max = j;
    if (-log2(w[j] / total) <= mu) c->marks[j] = 1, n_kept++;
  }
  if (n_kept == 0) c->marks[first_max] = 1;
}

/* v1: estimate the Zipf exponent s from the most likely m tokens, derive k from mu, keep the
 * tokens at or above the k-th largest weight (ties kept, as top-k does). */
static void truncate_v1(feri_chain *c, double mu, const double *w, size_t vocab) {
  const size_t n = c->n_cand, m = 100;
  feri_scored *s = c->scored;
  for (size_t j = 0; j < n; j++) s[j].score = w[j], s[j].pos = (uint32_t)j, s[j].id = c->cand[j];
  qsort(s, n, sizeof *s, cmp_weight_desc);
  double k = 1.0;
  if (n >= 2) {
    double sum_tb = 0, sum_tt = 0;
    for (size_t i = 0; i + 1 < m && i + 1 < n; i++) {
      const double t = log((double)(i + 2) / (double)(i + 1));
      const double b = log(s[i].score / s[i + 1].score);
      sum_tb += t * b;
      sum_tt += t * t;
    }
    const double s_hat = sum_tb / sum_tt, eps = s_hat - 1.0;
    k = pow(eps * pow(2.0, mu) / (1.0 - pow((double)vocab, -eps)), 1.0 / s_hat);
  }
  if (!(k >= 1.0)) k = 1.0; /* NaN too */
  if (k > (double)n) k = (double)n;
  const double threshold = s[(size_t)k - 1].score;
  for (size_t j = 0; j < n; j++) c->marks[j] = w[j] >= threshold;
}

void feri_mirostat(feri_chain *c, int version, double mu) {
  feri_chain_candidates(c);
  if (c->n_cand == 0) return;
  float mx;
  const double total = feri_chain_weights(c, &mx);
  if (version == 2) truncate_v2(c, mu, c->weights, total);
  else truncate_v1(c, mu, c->weights, c->vocab);
  feri_chain_keep(c);
}

double feri_mirostat_update(double mu, float tau, float eta, double logprob) {
  const double surprise = -logprob / log(2.0);
  return mu - (double)eta * (surprise - (double)tau);
}
