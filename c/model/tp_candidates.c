/* tp_candidates.c: the k best of a slice, the ties they cut, and where a request needs no more (tp_candidates.h). */
#include "model/tp_candidates.h"

#include <math.h>

void feri_tp_top_candidates(const float *row, uint32_t n, uint32_t v0, uint32_t k, feri_tp_candidate *out) {
  for (uint32_t i = 0; i < k; i++) out[i] = (feri_tp_candidate){-1, -INFINITY};
  uint32_t have = 0;
  /* ids ascend, so an equal value later has the higher id and never displaces one held: strict > */
  for (uint32_t i = 0; i < n; i++) {
    const float v = row[i];
    if (v != v) continue; /* NaN: never a candidate (the sampler refuses such rows anyway) */
    if (have == k && !(v > out[k - 1].logit)) continue;
    uint32_t j = have < k ? have++ : k - 1;
    while (j > 0 && v > out[j - 1].logit) {
      out[j] = out[j - 1];
      j--;
    }
    out[j] = (feri_tp_candidate){(int32_t)(v0 + i), v};
  }
}

uint32_t feri_tp_cut_ties(const float *row, uint32_t n, uint32_t v0, feri_tp_candidate kth, feri_tp_candidate *out) {
  if (kth.id < 0 || kth.logit == -INFINITY) return 0;
  uint32_t ties = 0;
  for (uint32_t i = 0; i < n; i++)
    if (row[i] == kth.logit && v0 + i > (uint32_t)kth.id) {
      if (out) out[ties] = (feri_tp_candidate){(int32_t)(v0 + i), row[i]};
      ties++;
    }
  return ties;
}

void feri_tp_place_candidates(const feri_tp_candidate *c, uint32_t k, float *row, uint32_t vocab) {
  for (uint32_t i = 0; i < k; i++)
    if (c[i].id >= 0 && (uint32_t)c[i].id < vocab) row[c[i].id] = c[i].logit;
}

bool feri_tp_reads_every_token(const fer_sampling_params *p, bool grammar, bool logprobs) {
  return grammar || logprobs || p->n_logit_bias > 0 || p->repetition_penalty != 1.0f || p->frequency_penalty != 0.0f ||
         p->presence_penalty != 0.0f || p->no_repeat_ngram_size > 0 || p->min_new_tokens > 0 ||
         p->dry_multiplier > 0.0f || p->typical_p < 1.0f || p->xtc_probability > 0.0f || p->mirostat > 0;
}

uint32_t feri_tp_candidates_needed(const fer_sampling_params *p, bool grammar, bool logprobs) {
  /* anything that reads or changes tokens outside the best k needs the whole row */
  if (feri_tp_reads_every_token(p, grammar, logprobs)) return 0;
  if (p->temperature == 0.0f) return 1;
  /* without top-k, top-p and min-p read the whole row's mass */
  return p->top_k > 0 && p->top_k <= FERI_TP_MAX_CANDIDATES ? (uint32_t)p->top_k : 0;
}
