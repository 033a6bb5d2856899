/* logprobs.c: greedy selection and top-n log-probabilities over raw logits. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "ferrite.h"
#include "sample/select.h"

fer_status fer_sample_greedy(const float *logits, size_t vocab, int32_t *out_token) {
  static const char *const fn = "fer_sample_greedy";
  feri_error_clear();
  if (out_token == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: out_token is NULL", fn);
  *out_token = -1;
  if (logits == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: logits is NULL", fn);
  if (vocab == 0 || vocab > (size_t)INT32_MAX)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: vocab %zu outside 1..2^31-1", fn, vocab);
  int nan = 0;
  size_t best = feri_argmax(logits, vocab, &nan);
  if (nan) return feri_fail(FER_STATUS_INVALID_ARG, "%s: logits hold a NaN", fn);
  if (logits[best] == -INFINITY)
    return feri_fail(FER_STATUS_NO_CANDIDATES, "%s: every logit is -inf", fn);
  *out_token = (int32_t)best;
  return FER_STATUS_OK;
}

static int cmp_desc(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

fer_status fer_logits_top_logprobs(const float *logits, size_t vocab, size_t n, int32_t *out_tokens,
                                   float *out_logprobs, size_t *out_n) {
  static const char *const fn = "fer_logits_top_logprobs";
  feri_error_clear();
  if (out_n == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: out_n is NULL", fn);
  *out_n = 0;
  if (logits == NULL || (n > 0 && (out_tokens == NULL || out_logprobs == NULL)))
    return feri_fail(FER_STATUS_NULL_ARG, "%s: logits or an output array is NULL", fn);
  if (vocab == 0 || vocab > (size_t)INT32_MAX)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: vocab %zu outside 1..2^31-1", fn, vocab);
  float mx = -INFINITY;
  for (size_t i = 0; i < vocab; i++) {
    if (logits[i] != logits[i] || logits[i] == INFINITY)
      return feri_fail(FER_STATUS_INVALID_ARG, "%s: logits[%zu] is NaN or +inf", fn, i);
    mx = logits[i] > mx ? logits[i] : mx;
  }
  if (mx == -INFINITY) return feri_fail(FER_STATUS_NO_CANDIDATES, "%s: every logit is -inf", fn);
  if (n == 0) return FER_STATUS_OK;
  double total = 0;
  for (size_t i = 0; i < vocab; i++) total += exp((double)logits[i] - (double)mx);
  const double log_total = log(total);
  uint32_t *scratch = malloc(vocab * sizeof *scratch);
  if (scratch == NULL) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
  size_t k = n < vocab ? n : vocab;
  uint32_t thr = feri_kth_largest_key(logits, vocab, k, scratch);
  /* Collect everything at or above the n-th value (ties may add more), sort by (value desc, id
   * asc), keep the first n. */
  uint64_t *sel = (uint64_t *)malloc(vocab * sizeof *sel);
  if (sel == NULL) {
    free(scratch);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
  }
  size_t m = 0;
  for (size_t i = 0; i < vocab; i++) {
    uint32_t key = feri_float_key(logits[i]);
    if (key >= thr && logits[i] != -INFINITY) sel[m++] = ((uint64_t)(~key) << 32) | i;
  }
  qsort(sel, m, sizeof *sel, cmp_desc);
  size_t out = m < n ? m : n;
  for (size_t j = 0; j < out; j++) {
    uint32_t id = (uint32_t)(sel[j] & 0xffffffffu);
    out_tokens[j] = (int32_t)id;
    out_logprobs[j] = (float)((double)logits[id] - (double)mx - log_total);
  }
  *out_n = out;
  free(sel);
  free(scratch);
  return FER_STATUS_OK;
}
