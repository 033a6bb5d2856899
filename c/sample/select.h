/* select.h: selection over logits without full sorts: argmax, the k-th largest value by radix
 * select, and the ordered keys both use. */
#ifndef FERI_SAMPLE_SELECT_H
#define FERI_SAMPLE_SELECT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ferrite.h"

/* Maps a non-NaN float to a uint32 whose unsigned order is the float order (-inf lowest). */
static inline uint32_t feri_float_key(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  /* Branch-free (a branch on the sign mispredicts half the time on real logits): negative values
   * flip every bit, non-negative ones only the sign. */
  const uint32_t flip = (uint32_t)((int32_t)u >> 31) | 0x80000000u;
  return u ^ flip;
}

static inline float feri_key_float(uint32_t k) {
  const uint32_t flip = (uint32_t)(~(int32_t)k >> 31) | 0x80000000u;
  uint32_t u = k ^ flip;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Index of the largest value, the lowest index among equal maxima. Returns 0 for n == 0. Sets
 * *has_nan when x holds a NaN (the index is then meaningless). Chooses the AVX2 loop when the CPU
 * has it (same result). */
size_t feri_argmax(const float *x, size_t n, int *has_nan);

/* The key of the k-th largest finite value among x[0..n) (no NaN; -inf entries do not count).
 * Returns 0 (below every key) when fewer than k values are finite, so "keep key >= result" keeps
 * them all. k >= 1. `scratch` holds n uint32. */
uint32_t feri_kth_largest_key(const float *x, size_t n, size_t k, uint32_t *scratch);

/* The k-th largest finite value for small k (1 <= k <= FERI_HEAP_TOPK_MAX) in one pass: a min-heap
 * of the k largest values seen, fed only by values above its minimum (a vector compare rejects
 * the rest eight at a time). Returns the key as feri_kth_largest_key does (0 when fewer than k
 * values are finite). `heap` holds k floats. */
enum { FERI_HEAP_TOPK_MAX = 256 };
uint32_t feri_kth_largest_key_small(const float *x, size_t n, size_t k, float *heap);

/* Masks (to -inf) every x[i] with key below `lo_key` and appends the ids of the others to `ids`,
 * ascending; returns their count. lo_key must exceed key(-inf), so -inf is never kept. */
size_t feri_mask_below(float *x, size_t n, uint32_t lo_key, uint32_t *ids);

/* Number of NaN or +inf entries. */
size_t feri_count_nonfinite(const float *x, size_t n);

/* x[i] /= d for every i: the IEEE division, eight lanes at a time (same results as scalar). */
void feri_divide(float *x, size_t n, float d);

/* Appends the ids of the entries that are not -inf to `ids`, ascending; returns their count. */
size_t feri_collect_finite(const float *x, size_t n, uint32_t *ids);

/* The vector loops behind the functions above, one table per ISA level (as kernels/rowops.h).
 * Every table gives identical results; tests compare them directly, since the functions above
 * always take the best level the CPU has and would leave the portable loops untested. */
typedef struct feri_select_ops {
  size_t (*argmax)(const float *x, size_t n, int *has_nan); /* n >= 1 */
  void (*heap_scan)(const float *x, size_t start, size_t n, float *heap, size_t k);
  size_t (*mask_below)(float *x, size_t n, uint32_t lo_key, uint32_t *ids);
  size_t (*count_nonfinite)(const float *x, size_t n);
  void (*divide)(float *x, size_t n, float d);
  size_t (*collect_finite)(const float *x, size_t n, uint32_t *ids);
} feri_select_ops;

const feri_select_ops *feri_select_ops_for(fer_isa isa);
const feri_select_ops *feri_select_ops_auto(void);

/* The same over a list of keys instead of floats (used on candidate lists). */
uint32_t feri_kth_largest_of_keys(const uint32_t *keys, size_t n, size_t k, uint32_t *scratch);

#endif
