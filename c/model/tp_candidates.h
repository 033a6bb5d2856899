/* tp_candidates.h: sampling a tensor-parallel model's logits without gathering them (issue 33, as
 * xFasterTransformer's "reduce top-k"): each rank sends the k best of its vocabulary slice, rank 0
 * writes them into a row that is -inf elsewhere, and the sampler runs on that row. The draw is the
 * whole row's for greedy decoding with nothing that reads other tokens (no bias, penalties, DRY,
 * grammar or log-probabilities): one candidate a rank, the best by value, then by the lower id, as
 * the sampler breaks ties. Not for top-k sampling: ferrite's top-k keeps every token tied with the
 * k-th value (as transformers does), so k candidates a rank miss the tied ones whenever a tie
 * crosses the boundary (measured: 7 of 600 draws of top-k 40, 489 of 600 of top-k 7 on rows with
 * many ties differed); that needs a second round for the ties, not built yet.
 * feri_tp_candidates_needed says from the parameters. Pure functions. */
#ifndef FERI_MODEL_TP_CANDIDATES_H
#define FERI_MODEL_TP_CANDIDATES_H

#include <stdbool.h>
#include <stdint.h>

#include "ferrite.h"

typedef struct feri_tp_candidate {
  int32_t id; /* -1: none (a slice shorter than k) */
  float logit;
} feri_tp_candidate;

/* The most candidates a step exchanges per row. */
enum { FERI_TP_MAX_CANDIDATES = 256 };

/* The k best of row[0 .. n) (ids v0 + i), best first: larger logit, then lower id. */
void feri_tp_top_candidates(const float *row, uint32_t n, uint32_t v0, uint32_t k, feri_tp_candidate *out);

/* Writes k candidates into a row of vocab logits that the caller filled with -inf. */
void feri_tp_place_candidates(const feri_tp_candidate *c, uint32_t k, float *row, uint32_t vocab);

/* How many candidates a request with these parameters needs for its draw to be the whole row's:
 * 1 for greedy decoding, else 0 (the whole row). */
uint32_t feri_tp_candidates_needed(const fer_sampling_params *p, bool grammar, bool logprobs);

#endif
