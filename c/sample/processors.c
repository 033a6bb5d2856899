/* processors.c: the logits processors of the sampling chain (semantics in ferrite.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sample/chain.h"
#include "sample/select.h"

void feri_chain_candidates(feri_chain *c) {
  if (c->cand_valid) return;
  c->n_cand = feri_collect_finite(c->logits, c->vocab, c->cand);
  c->cand_valid = 1;
}

double feri_chain_weights(feri_chain *c, float *max_logit) {
  float mx = -INFINITY;
  for (size_t j = 0; j < c->n_cand; j++) mx = c->logits[c->cand[j]] > mx ? c->logits[c->cand[j]] : mx;
  double total = 0;
  for (size_t j = 0; j < c->n_cand; j++) {
    float l = c->logits[c->cand[j]];
    double w = mx == INFINITY ? (l == INFINITY ? 1.0 : 0.0) : exp((double)l - (double)mx);
    c->weights[j] = w;
    total += w;
  }
  *max_logit = mx;
  return total;
}

void feri_chain_keep(feri_chain *c) {
  size_t w = 0;
  for (size_t j = 0; j < c->n_cand; j++) {
    if (c->marks[j]) {
      c->cand[w++] = c->cand[j];
    } else {
      c->logits[c->cand[j]] = -INFINITY;
    }
    c->marks[j] = 0;
  }
  c->n_cand = w;
}

/* Token i of prompt ++ generated. */
static int32_t history_at(const fer_sampling_context *ctx, size_t i) {
  return i < ctx->n_prompt ? ctx->prompt_tokens[i] : ctx->generated_tokens[i - ctx->n_prompt];
}

void feri_logit_bias(feri_chain *c, const int32_t *tokens, const float *values, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    float *l = &c->logits[tokens[i]];
    /* -inf bans the token even when its logit is +inf (which would otherwise give NaN). */
    *l = values[i] == -INFINITY ? -INFINITY : *l + values[i];
  }
  c->cand_valid = 0;
}

void feri_repetition_penalty(feri_chain *c, float penalty, int32_t window) {
  const fer_sampling_context *ctx = c->ctx;
  size_t len = ctx->n_prompt + ctx->n_generated;
  size_t start = window > 0 && (size_t)window < len ? len - (size_t)window : 0;
  /* The window's part of the prompt, then of the generated tokens (the same order as walking
   * prompt ++ generated, without a branch per token to pick the array). */
  const int32_t *parts[2] = {ctx->prompt_tokens, ctx->generated_tokens};
  const size_t from[2] = {start < ctx->n_prompt ? start : ctx->n_prompt,
                          start > ctx->n_prompt ? start - ctx->n_prompt : 0};
  const size_t to[2] = {ctx->n_prompt, ctx->n_generated};
  for (int q = 0; q < 2; q++)
    for (size_t i = from[q]; i < to[q]; i++) {
      int32_t t = parts[q][i];
      if (c->marks[t]) continue; /* once per distinct token */
      c->marks[t] = 1;
      float l = c->logits[t];
      c->logits[t] = l > 0 ? l / penalty : l * penalty; /* HF: shrink toward "less likely" */
    }
  for (int q = 0; q < 2; q++)
    for (size_t i = from[q]; i < to[q]; i++) c->marks[parts[q][i]] = 0;
}

void feri_frequency_presence(feri_chain *c, float frequency, float presence) {
  const fer_sampling_context *ctx = c->ctx;
  for (size_t i = 0; i < ctx->n_generated; i++) c->counts[ctx->generated_tokens[i]]++;
  for (size_t i = 0; i < ctx->n_generated; i++) {
    int32_t t = ctx->generated_tokens[i];
    uint32_t n = c->counts[t];
    if (n == 0) continue; /* already applied for this token */
    c->logits[t] -= frequency * (float)n + presence;
    c->counts[t] = 0;
  }
}

void feri_no_repeat_ngram(feri_chain *c, int32_t n) {
  const fer_sampling_context *ctx = c->ctx;
  size_t len = ctx->n_prompt + ctx->n_generated, k = (size_t)n - 1; /* prefix length */
  if (len < k || len == 0) return;
  /* Every earlier occurrence of the last k tokens bans the token that followed it. */
  for (size_t i = 0; i + k < len; i++) {
    size_t m = 0;
    while (m < k && history_at(ctx, i + m) == history_at(ctx, len - k + m)) m++;
    if (m == k) c->logits[history_at(ctx, i + k)] = -INFINITY;
  }
  c->cand_valid = 0;
}

void feri_min_new_tokens(feri_chain *c, int32_t min_new, int32_t eos) {
  if (eos >= 0 && c->ctx->n_generated < (size_t)min_new) {
    c->logits[eos] = -INFINITY;
    c->cand_valid = 0;
  }
}

uint32_t feri_chain_sparse(feri_chain *c, const fer_sampling_params *p) {
  uint32_t a = 0;
  if (p->n_logit_bias > 0) {
    feri_logit_bias(c, p->logit_bias_tokens, p->logit_bias_values, p->n_logit_bias);
    a |= FER_PROCESSOR_LOGIT_BIAS;
  }
  if (p->repetition_penalty != 1.0f) {
    feri_repetition_penalty(c, p->repetition_penalty, p->repetition_window);
    a |= FER_PROCESSOR_REPETITION_PENALTY;
  }
  if (p->frequency_penalty != 0.0f || p->presence_penalty != 0.0f) {
    feri_frequency_presence(c, p->frequency_penalty, p->presence_penalty);
    a |= (p->frequency_penalty != 0.0f ? FER_PROCESSOR_FREQUENCY_PENALTY : 0) |
         (p->presence_penalty != 0.0f ? FER_PROCESSOR_PRESENCE_PENALTY : 0);
  }
  if (p->no_repeat_ngram_size > 0) {
    feri_no_repeat_ngram(c, p->no_repeat_ngram_size);
    a |= FER_PROCESSOR_NO_REPEAT_NGRAM;
  }
  if (p->min_new_tokens > 0) {
    feri_min_new_tokens(c, p->min_new_tokens, p->eos_token_id);
    a |= FER_PROCESSOR_MIN_NEW_TOKENS;
  }
  return a;
}

void feri_temperature(feri_chain *c, float temperature) {
  feri_divide(c->logits, c->vocab, temperature);
  c->cand_valid = 0; /* a huge logit over a tiny temperature can overflow to -inf */
}

void feri_greedy(feri_chain *c) {
  int nan = 0;
  size_t best = feri_argmax(c->logits, c->vocab, &nan);
  float keep = c->logits[best];
  for (size_t i = 0; i < c->vocab; i++) c->logits[i] = -INFINITY;
  c->logits[best] = keep;
  c->n_cand = keep == -INFINITY ? 0 : 1;
  c->cand[0] = (uint32_t)best;
  c->cand_valid = 1;
}

/* Keys order -0 below +0 while the header's rule compares floats (-0 == +0): a threshold of +0
 * must keep -0 too, so it becomes the key of -0. Without this a -0 logit was kept or masked
 * depending on which zero the selection happened to return. */
static uint32_t zero_as_one(uint32_t key) { return key == feri_float_key(0.0f) ? feri_float_key(-0.0f) : key; }

void feri_top_k(feri_chain *c, int32_t k) {
  uint32_t thr;
  if (c->cand_valid) {
    if ((size_t)k >= c->n_cand) return;
    for (size_t j = 0; j < c->n_cand; j++) c->keys[j] = feri_float_key(c->logits[c->cand[j]]);
    thr = zero_as_one(feri_kth_largest_of_keys(c->keys, c->n_cand, (size_t)k, c->ids));
    for (size_t j = 0; j < c->n_cand; j++) c->marks[j] = feri_float_key(c->logits[c->cand[j]]) >= thr;
    feri_chain_keep(c);
    return;
  }
  /* Small k (the common case): one heap pass; otherwise radix select. */
  thr = zero_as_one((size_t)k <= FERI_HEAP_TOPK_MAX
                        ? feri_kth_largest_key_small(c->logits, c->vocab, (size_t)k, (float *)(void *)c->keys)
                        : feri_kth_largest_key(c->logits, c->vocab, (size_t)k, c->keys));
  /* -inf has the lowest key of any non-NaN value, so keeping key >= max(thr, key(-inf) + 1) keeps
   * the finite values at or above the threshold (ties included) and nothing masked. */
  const uint32_t floor_key = feri_float_key(-INFINITY);
  size_t n = feri_mask_below(c->logits, c->vocab, thr > floor_key ? thr : floor_key + 1, c->cand);
  c->n_cand = n;
  c->cand_valid = 1;
}

/* Ascending insertion sort of at most 64 distinct values: no callback per comparison, and the
 * order is the one qsort gave (the values are distinct, so any correct sort agrees). */
static void sort_u64_small(uint64_t *v, size_t n) {
  for (size_t i = 1; i < n; i++) {
    uint64_t x = v[i];
    size_t j = i;
    for (; j > 0 && v[j - 1] > x; j--) v[j] = v[j - 1];
    v[j] = x;
  }
}

/* The boundary key of top-p: the largest key K such that the candidates with key >= K hold at
 * least `target` of the mass. Radix levels as in select.c, each bin carrying its mass; the final
 * few survivors are sorted. keys[] and weights[] are consumed (compacted in place). */
static uint32_t mass_boundary(feri_chain *c, size_t n, double target) {
  static const int shifts[3] = {21, 10, 0};
  static const uint32_t masks[3] = {0x7ffu, 0x7ffu, 0x3ffu};
  double above = 0;
  uint32_t prefix = 0, prefix_mask = 0;
  for (int level = 0; level < 3 && n > 64; level++) {
    double mass[2048];
    memset(mass, 0, sizeof mass);
    const int sh = shifts[level];
    const uint32_t m = masks[level];
    for (size_t j = 0; j < n; j++) {
      uint32_t b = (c->keys[j] >> sh) & m;
      mass[b] += c->weights[j];
    }
    uint32_t bin = m;
    for (;; bin--) {
      if (above + mass[bin] >= target || bin == 0) break;
      above += mass[bin];
    }
    prefix |= bin << sh;
    prefix_mask |= m << sh;
    size_t w = 0;
    for (size_t j = 0; j < n; j++)
      if ((c->keys[j] & prefix_mask) == prefix) {
        c->keys[w] = c->keys[j];
        c->weights[w] = c->weights[j];
        w++;
      }
    n = w;
    if (level == 2) return prefix; /* one key left in the bin */
  }
  /* At most 64 survivors: sort them by key, descending, and walk the mass. */
  uint64_t order[64];
  for (size_t j = 0; j < n; j++) order[j] = ((uint64_t)(~c->keys[j]) << 32) | j;
  sort_u64_small(order, n);
  uint32_t boundary = n ? c->keys[order[n - 1] & 0xffffffffu] : 0;
  for (size_t j = 0; j < n; j++) {
    size_t at = (size_t)(order[j] & 0xffffffffu);
    above += c->weights[at];
    if (above >= target) {
      boundary = c->keys[at];
      break;
    }
  }
  return boundary;
}

void feri_top_p(feri_chain *c, float p) {
  feri_chain_candidates(c);
  if (c->n_cand <= 1) return;
  float mx;
  double total = feri_chain_weights(c, &mx);
  for (size_t j = 0; j < c->n_cand; j++) c->keys[j] = feri_float_key(c->logits[c->cand[j]]);
  uint32_t boundary = zero_as_one(mass_boundary(c, c->n_cand, (double)p * total));
  for (size_t j = 0; j < c->n_cand; j++) c->marks[j] = feri_float_key(c->logits[c->cand[j]]) >= boundary;
  feri_chain_keep(c);
}

void feri_min_p(feri_chain *c, float min_p) {
  feri_chain_candidates(c);
  float mx = -INFINITY;
  for (size_t j = 0; j < c->n_cand; j++) mx = c->logits[c->cand[j]] > mx ? c->logits[c->cand[j]] : mx;
  /* p_i >= min_p * p_max  <=>  l_i - l_max >= ln(min_p), decided in double. */
  double thr = mx == INFINITY ? INFINITY : (double)mx + log((double)min_p);
  for (size_t j = 0; j < c->n_cand; j++) c->marks[j] = (double)c->logits[c->cand[j]] >= thr;
  feri_chain_keep(c);
}

static int cmp_scored(const void *a, const void *b) {
  const feri_scored *x = a, *y = b;
  if (x->score != y->score) return x->score < y->score ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}

void feri_typical_p(feri_chain *c, float p) {
  feri_chain_candidates(c);
  size_t n = c->n_cand;
  if (n <= 1) return;
  float mx;
  double total = feri_chain_weights(c, &mx), entropy = 0;
  for (size_t j = 0; j < n; j++) {
    double q = c->weights[j] / total;
    if (q > 0) entropy -= q * log(q);
  }
  feri_scored *s = c->scored; /* sized at the first call for this vocabulary: no allocation here */
  for (size_t j = 0; j < n; j++) {
    double q = c->weights[j] / total;
    s[j].score = q > 0 ? fabs(-log(q) - entropy) : INFINITY;
    s[j].pos = (uint32_t)j;
    s[j].id = c->cand[j];
  }
  qsort(s, n, sizeof *s, cmp_scored);
  double cum = 0;
  for (size_t j = 0; j < n; j++) {
    c->marks[s[j].pos] = 1;
    cum += c->weights[s[j].pos] / total;
    if (cum >= (double)p) break;
  }
  feri_chain_keep(c);
}

void feri_xtc(feri_chain *c, float threshold, float probability, double uniform) {
  if (uniform >= (double)probability) return;
  feri_chain_candidates(c);
  float mx;
  double total = feri_chain_weights(c, &mx);
  size_t n_above = 0, weakest = 0;
  for (size_t j = 0; j < c->n_cand; j++) {
    if (c->weights[j] / total < (double)threshold) continue;
    /* the least likely of those above the threshold survives; ties: the highest id */
    if (n_above == 0 || c->weights[j] <= c->weights[weakest]) weakest = j;
    n_above++;
  }
  if (n_above < 2) return;
  for (size_t j = 0; j < c->n_cand; j++)
    c->marks[j] = j == weakest || c->weights[j] / total < (double)threshold;
  feri_chain_keep(c);
}
