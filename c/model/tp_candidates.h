/* tp_candidates.h: sampling a tensor-parallel model's logits without gathering them (issue 33, as
 * xFasterTransformer's "reduce top-k"): each rank sends the k best of its vocabulary slice, rank 0
 * writes them into a row that is -inf elsewhere, and the sampler runs on that row. ferrite's top-k
 * keeps every token tied with the k-th value (as transformers does), so a rank also sends the values
 * of its slice tied with its own k-th that its k left out (feri_tp_cut_ties): then the row holds
 * every value at or above the whole row's k-th, and top-k keeps the same tokens, in the same order,
 * with the same values, as it keeps from the whole row. Whatever runs after top-k (temperature,
 * top-p, min-p, the draw) reads only those, so the draw is the whole row's, bit for bit. Without
 * the ties it is not: 7 of 600 draws of top-k 40 and 489 of 600 of top-k 7 differed on rows with
 * many ties (tp_candidates_test measures it again). Greedy decoding needs one candidate a rank.
 * Anything that reads tokens outside the k (bias, penalties, DRY, grammar, log-probabilities,
 * typical-p, XTC, mirostat) or sampling without top-k needs the whole row:
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

/* The values of row[0 .. n) (ids v0 + i) equal to the k-th candidate kth's that the k best left
 * out: those with a higher id (the best k take the lower ids of a tie). Writes them to out, lowest
 * id first, unless out is NULL, and returns how many. None where kth is no candidate or -inf (the
 * row that rank 0 fills is -inf already). */
uint32_t feri_tp_cut_ties(const float *row, uint32_t n, uint32_t v0, feri_tp_candidate kth, feri_tp_candidate *out);

/* Writes k candidates into a row of vocab logits that the caller filled with -inf. */
void feri_tp_place_candidates(const feri_tp_candidate *c, uint32_t k, float *row, uint32_t vocab);

/* How many candidates a request with these parameters needs for its draw to be the whole row's
 * (with the cut ties): 1 for greedy decoding, top_k for top-k sampling with k up to
 * FERI_TP_MAX_CANDIDATES, else 0 (the whole row). */
uint32_t feri_tp_candidates_needed(const fer_sampling_params *p, bool grammar, bool logprobs);

/* Whether a request's sampling reads or changes tokens beyond the ones it may draw (bias,
 * penalties, DRY, grammar, log-probabilities, typical-p, XTC, mirostat): then it needs the whole
 * row, whatever else it asks. */
bool feri_tp_reads_every_token(const fer_sampling_params *p, bool grammar, bool logprobs);

#endif
