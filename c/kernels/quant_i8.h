/* quant_i8.h: the per-ISA parts of fer_matmul_quant_i8, block-quantized matmul with activations
 * rounded to 8 bits (the arithmetic llama.cpp uses on CPUs: integer dot products per block).
 *
 * Activations: each row of A is cut into blocks of 32; a block with largest magnitude amax gets
 * the scale d = amax / 127 and the codes q = round_half_even(x * (127 / amax)) in [-127, 127]; also
 * s = d * sum(q). A block holding a non-finite value gets d = s = NaN (every output it touches is
 * NaN); a block whose amax is so small that 127 / amax overflows (below about 2^-121) is zero.
 *
 * Weights: every format is an integer code per element, a scale dw per block and, for Q4_0 and
 * Q4_1, a per-block offset mw: Q4_1 codes are the nibbles n (w = n dw + mw); Q4_0 also (mw = -8 dw,
 * exact); Q8_0 the int8 values; MXFP4 twice the E2M1 value (integers -12 .. 12) with dw half the
 * E8M0 scale, exactly.
 *
 * One output (a row of A against a row of W) is defined as: eight f32 lanes, lane L holding
 * fma((float)isum, dw * dx, lane) over the blocks in order, where isum is the exact integer sum of
 * code * q over elements 4L .. 4L+3 of the block; then ((l0 + l4) + (l2 + l6)) + ((l1 + l5) +
 * (l3 + l7)); plus, for Q4_0 and Q4_1, the chain fma(mw, sx, acc) over the blocks, added last.
 * Every table below computes exactly this, so the ISA level, the VNNI instructions, the row count
 * M and the thread count never change a bit (claim C-Q-008). */
#ifndef FERI_KERNELS_QUANT_I8_H
#define FERI_KERNELS_QUANT_I8_H

#include <stdint.h>

#include "ferrite.h"

/* Rows of A rounded to 8 bits: row m's codes at q + m * q_stride, its block b's scale at
 * d[m * nb + b] and d * sum(q) at s[m * nb + b]. */
typedef struct feri_q8_rows {
  int8_t *q;
  float *d;
  float *s;
  int64_t q_stride;
  int64_t nb;
} feri_q8_rows;

/* Most rows of W and of A one dot call covers. */
enum { FERI_QI8_RW = 4, FERI_QI8_RA = 2 };

typedef struct feri_qi8_ops {
  /* Rounds x[0 .. 32 nb) into q, d[0 .. nb), s[0 .. nb) as described above. */
  void (*quantize)(const float *x, int64_t nb, int8_t *q, float *d, float *s);
  /* y[i * ldy + r] = output (A row m + i, W row r) for r < rw <= RW, i < ra <= RA, where W row r
   * is the nb blocks at w + r * w_stride. */
  void (*dot)(fer_dtype t, const uint8_t *w, int64_t w_stride, int rw, const feri_q8_rows *a,
              int64_t m, int ra, float *y, int64_t ldy);
} feri_qi8_ops;

/* The table for an ISA level; on AVX2 the VNNI form is used when the CPU has AVX512-VNNI/VL. */
const feri_qi8_ops *feri_qi8_ops_for(fer_isa isa);

extern const feri_qi8_ops feri_qi8_ops_portable;
#if defined(__x86_64__)
extern const feri_qi8_ops feri_qi8_ops_avx2;
extern const feri_qi8_ops feri_qi8_ops_avx512vnni;
#endif

#endif
