/* fast.h: the fast front of the sampling chain (the input check, temperature or greedy, and top-k
 * over the whole vocabulary) in two streaming passes, and the per-ISA loops behind it.
 *
 * The reference front (sampler.c with processors.c) runs the processors one at a time: a scan for
 * NaN/+inf, a division of every logit, a heap fed by the whole vocabulary, a masking pass. The heap
 * is what cost most: logits arriving in rising runs (the original's bench input, and any logits
 * whose large values cluster) offer it hundreds of values per call, and each offer's sift-down
 * mispredicts a branch per level. The fast front instead:
 *   pass 1 (read only): flags NaN/+inf and records the maximum of every FERI_FAST_CHUNK logits;
 *   L = the k-th largest chunk maximum: k chunks hold a value >= L, so the k-th largest logit is
 *       >= L, and few logits reach L;
 *   pass 2 (read and write): every logit below L (whole chunks at once, from their maxima) becomes
 *       -inf, the rest are divided by the temperature and listed;
 *   the exact k-th largest of the listed values then decides which of them stay.
 * Selections are bisections over order-preserving integer keys (a vector count per step), so no
 * step depends on the order or the ties of the input.
 *
 * Results equal the reference front's bit for bit (sample_test.c compares them on every processor
 * combination). Temperature comes before top-k in the chain; division by a positive temperature is
 * monotone (correctly rounded), so selecting on the undivided logits and dividing only the
 * survivors gives the same survivors and values, with the thresholds carried through the division
 * by a search for the smallest logit whose quotient reaches them (rounding can merge neighbours).
 * The sparse processors (bias, penalties, bans) run before pass 1 on logits whose old bits are
 * kept: when one of those old values, or any value pass 1 reads, is NaN or +inf, the fast front
 * puts the old bits back and the reference front runs instead, so refusals, NaN masking and the
 * +inf rules stay the reference's. */
#ifndef FERI_SAMPLE_FAST_H
#define FERI_SAMPLE_FAST_H

#include <stddef.h>
#include <stdint.h>

#include "ferrite.h"
#include "sample/chain.h"

/* Logits per chunk of pass 1: 8 AVX-512 or 16 AVX2 vectors. */
enum { FERI_FAST_CHUNK = 128 };

/* Slack the candidate list needs past its last entry: the vector loops store whole vectors of ids. */
enum { FERI_FAST_ID_SLACK = 16 };

typedef struct feri_fast_ops {
  /* Pass 1. cmax[c] = the largest of x[c * FERI_FAST_CHUNK ..] within n (-inf for a chunk of -inf;
   * NaN ignored). Returns nonzero when some x is NaN or +inf (cmax is then meaningless). */
  int (*chunk_max)(const float *x, size_t n, float *cmax);
  /* Pass 2. For every i: y = x[i] >= lo ? x[i] / t : -inf (no division when t == 1), stored in
   * x[i]; the ids of the y that are not -inf are written to ids ascending, and their count
   * returned. cmax from chunk_max lets a chunk whose maximum is below lo be filled without
   * reading. ids holds n + FERI_FAST_ID_SLACK entries. No x is NaN or +inf. */
  size_t (*mask_scale)(float *x, size_t n, const float *cmax, float lo, float t, uint32_t *ids);
  /* The number of keys[i] >= t (signed compare). */
  size_t (*count_ge)(const int32_t *keys, size_t n, int32_t t);
} feri_fast_ops;

/* The implementation a sampler runs: AUTO is the fast front at the best level the CPU has. */
typedef enum feri_sample_impl {
  FERI_SAMPLE_IMPL_AUTO = 0,
  FERI_SAMPLE_IMPL_REFERENCE = 1,
  FERI_SAMPLE_IMPL_FAST_PORTABLE = 2,
  FERI_SAMPLE_IMPL_FAST_AVX2 = 3,
  FERI_SAMPLE_IMPL_FAST_AVX512 = 4,
} feri_sample_impl;

/* The loops of an implementation: NULL for REFERENCE, and for a level the CPU lacks. */
const feri_fast_ops *feri_fast_ops_for(feri_sample_impl impl);

/* Pins a sampler to an implementation (tests compare them). UNSUPPORTED when the CPU lacks the
 * level, INVALID_ARG for an unknown value; the sampler is unchanged then. */
fer_status feri_sampler_set_impl(fer_sampler *s, feri_sample_impl impl);

/* Runs the front of the chain (the NaN/+inf check, feri_chain_sparse, greedy or temperature, top-k)
 * with ops over c's logits. Returns 1 when done: the logits and c's candidate list (valid) are the
 * reference front's. Returns 0 when the logits (as given, or after the sparse processors) hold NaN
 * or +inf: every logit is then back to the caller's bits and the reference front must run. */
int feri_fast_front(feri_chain *c, const fer_sampling_params *p, const feri_fast_ops *ops);

/* An order-preserving signed key: a < b as floats (no NaN) implies key(a) < key(b), and
 * -0 < +0 as keys. */
static inline int32_t feri_fast_skey(float f) {
  int32_t u;
  __builtin_memcpy(&u, &f, sizeof u);
  return u ^ ((u >> 31) & 0x7fffffff);
}

static inline float feri_fast_skey_float(int32_t k) {
  int32_t u = k ^ ((k >> 31) & 0x7fffffff);
  float f;
  __builtin_memcpy(&f, &u, sizeof f);
  return f;
}

extern const feri_fast_ops feri_fast_portable;
#if defined(__x86_64__)
extern const feri_fast_ops feri_fast_avx2;
extern const feri_fast_ops feri_fast_avx512;
#endif

#endif
