/* tp_draw.h: plain sampling (temperature alone, the OpenAI API's default) and greedy decoding over
 * a tensor-parallel model's logits without gathering them: the ranks draw the token together, as
 * the sampler draws it from the whole row, bit for bit.
 *
 * The sampler (c/sample/sampler.c) divides each logit by the temperature, then draws from the
 * softmax in ascending id order: with mx the largest quotient, the weights exp(y - mx) in double,
 * summed one after another into the total, the token is the first whose running sum passes
 * u x total (u the request's uniform), else the last one with weight. The ranks' slices are runs of
 * ascending ids, rank after rank, so the same sums come out when each rank continues the running
 * sum where the rank before it stopped:
 *   1. each rank's largest quotient and its first id (the heads), gathered by every rank: the
 *      row's mx (and greedy decoding's token, the lowest id of the largest raw logit);
 *   2. the running sum, rank 0's slice first, carried from rank to rank (a scan);
 *   3. the last rank's total to every rank; each rank finds the first id of its slice whose running
 *      sum passes u x total, and the last id with weight;
 *   4. those gathered on rank 0: the first rank's find, else the last rank's last id with weight.
 * A few small messages a row instead of the row's V / p floats from each rank. A row with NaN or
 * +inf anywhere (before or after the division) goes whole instead, so the sampler meets it as in
 * one process. Pure functions here; the exchange is forward.c's. */
#ifndef FERI_MODEL_TP_DRAW_H
#define FERI_MODEL_TP_DRAW_H

#include <stdbool.h>
#include <stdint.h>

#include "ferrite.h"

/* The step's mode (feri_llama_batch.candidates, the announcement's) when its rows are drawn this
 * way: above any count of candidates. */
#define FERI_TP_DRAW 0xffffffffu

/* One rank's summary of a row's slice: its largest value (the quotient by t; the raw logit for
 * greedy, t = 0) and the lowest id holding it (-1 where every value is -inf), and whether it holds
 * NaN or +inf (then the row is gathered whole). */
typedef struct feri_tp_draw_head {
  float max;
  int32_t argmax;
  int32_t nonfinite;
  int32_t pad;
} feri_tp_draw_head;

/* The head of x[0 .. n) (ids v0 + i) at temperature t (0: greedy). */
feri_tp_draw_head feri_tp_draw_head_of(const float *x, uint32_t n, uint32_t v0, float t);

/* The row's head from the ranks' heads in rank order (ascending ids), rank r's at heads[r x
 * stride]: the largest max, its lowest id (the first rank's), nonfinite when any rank's is. */
feri_tp_draw_head feri_tp_draw_merge(const feri_tp_draw_head *heads, uint32_t p, size_t stride);

/* carry plus the weights exp(x[i] / t - mx) of x[0 .. n), added one after another in id order. */
double feri_tp_draw_sum(const float *x, uint32_t n, float t, float mx, double carry);

/* Within x[0 .. n) (ids v0 + i), the running sum starting from carry: `first`, the first id whose
 * running sum passes target with a weight above 0 (-1: none); `last`, the last id with weight
 * (-1: none). */
typedef struct feri_tp_draw_find {
  int32_t first, last;
} feri_tp_draw_find;
feri_tp_draw_find feri_tp_draw_find_in(const float *x, uint32_t n, uint32_t v0, float t, float mx, double carry,
                                       double target);

/* The drawn id from the ranks' finds in rank order (rank r's at finds[r x stride]): the first
 * rank's `first`, else (rounding left the target at the very top) the last `last`; -1 when no rank
 * holds a weight. */
int32_t feri_tp_draw_choose(const feri_tp_draw_find *finds, uint32_t p, size_t stride);

/* Whether a request's draw can be made this way: greedy decoding, or temperature alone (no top-k,
 * top-p, min-p, typical-p, XTC, mirostat, bias, penalties, DRY, grammar or log-probabilities).
 * Greedy rows go this way only in a step that has plain-sampled rows (else candidates serve them:
 * tp_candidates.h). */
bool feri_tp_drawable(const fer_sampling_params *p, bool grammar, bool logprobs);

#endif
