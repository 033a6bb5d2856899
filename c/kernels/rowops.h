/* rowops.h: the inner loops of the elementwise and reduction kernels, one table per ISA level.
 *
 * Every table computes bit-identical results: the AVX2 loops perform the same IEEE operations in
 * the same order as the portable ones, so the ISA level changes speed only (claims C-ADD-002,
 * C-MEAN-002). Kernels walk the outer axes themselves and call these on contiguous rows. */
#ifndef FERI_KERNELS_ROWOPS_H
#define FERI_KERNELS_ROWOPS_H

#include <stddef.h>
#include <stdint.h>

#include "ferrite.h"

/* Partial sums of a row: element j is added into partial[j % FERI_SUM_LANES], in order of j. */
enum { FERI_SUM_LANES = 32 };

typedef struct feri_rowops {
  /* out[i] = a[i * sa] + b[i * sb] for i < n, with sa, sb in {0, 1} (0 broadcasts one element)
   * and out contiguous. f16/bf16 convert to f32, add, and round to nearest even. */
  void (*add_f32)(const float *a, int sa, const float *b, int sb, float *out, size_t n);
  void (*add_f16)(const uint16_t *a, int sa, const uint16_t *b, int sb, uint16_t *out, size_t n);
  void (*add_bf16)(const uint16_t *a, int sa, const uint16_t *b, int sb, uint16_t *out, size_t n);
  /* partial[j % 32] += x[j] (x contiguous), for j < n, in order; partial is caller-initialised. */
  void (*sum_f32)(const float *x, size_t n, float partial[FERI_SUM_LANES]);
  void (*sum_f16)(const uint16_t *x, size_t n, float partial[FERI_SUM_LANES]);
  void (*sum_bf16)(const uint16_t *x, size_t n, float partial[FERI_SUM_LANES]);
  /* out[i] = feri_silu(x[i]), times up[i] when up is not NULL (fexp.h), for i < n. */
  void (*silu_f32)(const float *x, const float *up, float *out, size_t n);
  /* GeGLU through lut, a table of gelu at every f16 input (gelu.h): out[i] = +0 where x[i] <= -10,
   * x[i] * up[i] where x[i] >= 10, else lut[bits of x[i] rounded to f16 (nearest even)] * up[i]. */
  void (*geglu_lut_f32)(const float *lut, const float *x, const float *up, float *out, size_t n);
} feri_rowops;

/* The table for an ISA level (FER_ISA_AVX512 runs the AVX2 table). */
const feri_rowops *feri_rowops_for(fer_isa isa);

/* The fixed combination of the 32 partial sums: lane-wise (p0+p1)+(p2+p3) over the four groups of
 * eight, then (l0+l4),(l1+l5),(l2+l6),(l3+l7), then pairs, then the last pair. */
float feri_sum_partials(const float partial[FERI_SUM_LANES]);

extern const feri_rowops feri_rowops_portable;
#if defined(__x86_64__)
extern const feri_rowops feri_rowops_avx2;
#endif

#endif
