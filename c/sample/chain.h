/* chain.h: the working state of one pass of the logits-processor chain, and the processors.
 *
 * The chain works on the caller's logits in place; a masked token is -inf. Once a processor has
 * found the finite tokens (top-k does as a by-product), the candidate list `cand` carries them in
 * ascending id order, so later processors touch only the survivors, not the whole vocabulary. */
#ifndef FERI_SAMPLE_CHAIN_H
#define FERI_SAMPLE_CHAIN_H

#include <stddef.h>
#include <stdint.h>

#include "ferrite.h"

/* One candidate of typical-p's ordering. */
typedef struct feri_scored {
  double score;
  uint32_t pos;
  uint32_t id;
} feri_scored;

typedef struct feri_chain {
  float *logits;
  size_t vocab;
  const fer_sampling_context *ctx;
  /* Candidates: ids of the finite logits, ascending; valid only when cand_valid. */
  uint32_t *cand;
  size_t n_cand;
  int cand_valid;
  /* Scratch, each `vocab` long: keys, a second id list, weights, per-token marks and counts.
   * marks and counts are all-zero between processors. */
  uint32_t *keys;
  uint32_t *ids;
  double *weights;
  uint8_t *marks;
  uint32_t *counts;
  /* The fast front's chunk maxima (vocab / FERI_FAST_CHUNK rounded up), and typical-p's ordering
   * (vocab long; NULL unless the sampler runs typical-p). */
  float *cmax;
  feri_scored *scored;
} feri_chain;

/* The sparse processors, in the chain's order (logit bias, repetition, frequency and presence
 * penalties, no-repeat-n-gram, min-new-tokens): each touches only the bias tokens, the history's
 * tokens and eos. Returns their fer_logit_processor bits. */
uint32_t feri_chain_sparse(feri_chain *c, const fer_sampling_params *p);

/* Fills cand with the finite logits' ids unless it is already valid. */
void feri_chain_candidates(feri_chain *c);

/* weights[j] = exp(logit[cand[j]] - max) for every candidate, in double; returns their sum and
 * the maximum logit through *max_logit. A +inf maximum makes the +inf tokens weight 1, others 0. */
double feri_chain_weights(feri_chain *c, float *max_logit);

/* Masks (sets to -inf) every candidate with keep[j] == 0 and compacts the list. keep is `marks`. */
void feri_chain_keep(feri_chain *c);

void feri_logit_bias(feri_chain *c, const int32_t *tokens, const float *values, uint32_t n);
void feri_repetition_penalty(feri_chain *c, float penalty, int32_t window);
void feri_frequency_presence(feri_chain *c, float frequency, float presence);
void feri_no_repeat_ngram(feri_chain *c, int32_t n);
void feri_min_new_tokens(feri_chain *c, int32_t min_new, int32_t eos);
void feri_temperature(feri_chain *c, float temperature);
void feri_greedy(feri_chain *c);
void feri_top_k(feri_chain *c, int32_t k);
void feri_top_p(feri_chain *c, float p);
void feri_min_p(feri_chain *c, float min_p);
void feri_typical_p(feri_chain *c, float p);
void feri_xtc(feri_chain *c, float threshold, float probability, double uniform);

/* DRY's sequence breakers, sorted by head token (ties in the caller's order); a breaker's tail is
 * tails[tail_start[k] .. + tail_len[k]]. */
typedef struct feri_dry_breakers {
  size_t n;
  int32_t *heads;
  uint32_t *tail_start;
  uint32_t *tail_len;
  int32_t *tails;
} feri_dry_breakers;

/* DRY over the window of prompt ++ generated; window and repeat are scratch of the window's
 * length. */
void feri_dry(feri_chain *c, const fer_sampling_params *p, const feri_dry_breakers *b, int32_t *window,
              uint32_t *repeat);

/* Mirostat's truncation (version 1 or 2) at the current mu; needs `scored` for version 1. */
void feri_mirostat(feri_chain *c, int version, double mu);

/* mu after a draw whose token had natural-log probability logprob among the kept tokens. */
double feri_mirostat_update(double mu, float tau, float eta, double logprob);

#endif
