/* quant_i8.h: the per-ISA parts of fer_matmul_quant_i8, block-quantized matmul with activations
 * rounded to 8 bits (the arithmetic llama.cpp uses on CPUs: integer dot products per block).
 *
 * Activations: each row of A is cut into blocks of 32 for the formats with blocks of 32 (MXFP4,
 * Q4_0, Q4_1, Q8_0, Q5_0, Q5_1, IQ4_NL) and into blocks of 256 for the super-block formats (Q2_K,
 * Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS: llama.cpp's Q8_K). Either way a block with largest magnitude
 * amax gets the scale d = amax / 127 and the codes q = round_half_even(x * (127 / amax)) in
 * [-127, 127]; a block of 32 also gets qs = sum(q) (an exact int32), a block of 256 the sixteen exact sums of
 * q over its elements 16j .. 16j+15 (int16: at most 16 * 127 in magnitude). A block holding a
 * non-finite value gets d = NaN and codes and sums 0 (every output it touches is NaN); a block
 * whose amax is so small that 127 / amax overflows (below about 2^-121) is zero.
 *
 * Weights of blocks of 32: a signed integer code c per element, a scale dw per block and, for
 * Q4_1 and Q5_1, a minimum mw (w = c dw + mw): Q4_0 codes are the nibbles minus 8, Q5_0 the
 * five-bit values minus 16 (both exact: w = c dw), Q4_1 and Q5_1 the nibbles and five-bit values,
 * Q8_0 the int8 values, IQ4_NL the table values kvalues_iq4nl[n] (-127 .. 113), MXFP4 twice the
 * E2M1 value (integers -12 .. 12) with dw half the E8M0 scale, exactly.
 *
 * One output of blocks of 32 (a row of A against a row of W) is one f32 chain over the blocks b
 * in order, acc = fma((float)I, dw * dx, acc), where I is the exact integer sum of c_k q_k over
 * the block's 32 elements (|I| <= 32 * 128 * 127 < 2^24: converted exactly); for Q4_1 and Q5_1 a
 * second chain mc = fma(mw, dx * (float)qs, mc) over the blocks, and the output acc + mc. One
 * integer per block (as for the super-blocks below) lets a kernel keep outputs, not elements, in
 * vector lanes: the prefill kernel holds sixteen W rows in the lanes of one vector.
 *
 * Super-blocks (256 elements, sub-blocks j of 16 elements; formats with sub-blocks of 32 give both
 * halves the same integers): a signed integer code c_k per element, an integer sub-scale S_j,
 * for Q2_K, Q4_K and Q5_K an integer minimum m_j, and the f16 scales d and dmin, with w_k =
 * d S_j c_k - dmin m_j (k in j):
 *   Q2_K  c = 2-bit value 0..3,           S = scales[j] & 15, m = scales[j] >> 4;
 *   Q3_K  c = 2-bit value + 4 hbit - 4 (-4..3), S = 6-bit scale - 32;
 *   Q4_K  c = nibble 0..15, Q5_K c = 0..31, S and m the 6-bit scale and minimum of the 32-block;
 *   Q6_K  c = 6-bit value - 32 (-32..31), S = the int8 scale;
 *   IQ4_XS c = kvalues_iq4nl[nibble], S = 6-bit scale - 32 of the 32-block.
 * One output is two f32 chains, acc and (for the formats with minima) mc, over the super-blocks b
 * in order: acc = fma((float)I, d * dx, acc), where I is the exact int32 sum of S_j c_k q_k over
 * the 256 elements (|I| < 2^28: the conversion rounds to nearest, ties to even, above 2^24), and
 * mc = fma((float)M, dmin * dx, mc), M the exact int32 sum over j of m_j * bsum_j (bsum the per-16
 * sums of q; |M| < 2^22). The output is acc, minus mc for Q2_K, Q4_K and Q5_K. One integer per
 * super-block (rather than lanes) lets a kernel keep outputs, not elements, in vector lanes. Since
 * only the integers are summed in a free order, any instruction sequence that forms them exactly
 * (maddubs / madd, dpbusd / dpwssd, signed codes or unsigned codes with a correction) gives the
 * same bits.
 *
 * Every table below computes exactly this, so the ISA level, the VNNI instructions, the row count
 * M and the thread count never change a bit (claim C-Q-008, C-Q-201). */
#ifndef FERI_KERNELS_QUANT_I8_H
#define FERI_KERNELS_QUANT_I8_H

#include <stddef.h>
#include <stdint.h>

#include "ferrite.h"
#include "kernels/quant.h"

/* Rows of A rounded to 8 bits: row m's codes at q + m * q_stride, its block b's scale at
 * d[m * nb + b]; for blocks of 32 sum(q) at qs[m * nb + b] (bs NULL); for blocks of 256 the
 * per-16 sums at bs[(m * nb + b) * 16 + j] (qs NULL). */
typedef struct feri_q8_rows {
  int8_t *q;
  float *d;
  int32_t *qs;
  int16_t *bs;
  int64_t q_stride;
  int64_t nb;
} feri_q8_rows;

/* Most rows of W and of A one dot call covers (one or two A rows take W eight rows at a time;
 * more A rows share one unpacking of eight or, with AVX-512, sixteen W rows). */
enum { FERI_QI8_RW = 16, FERI_QI8_RA = 64 }; /* RW is also a panel's rows (qpanel.h) */

typedef struct feri_qi8_ops {
  /* Rounds x[0 .. 32 nb) into q, d[0 .. nb), qs[0 .. nb) as described above (blocks of 32). */
  void (*quantize)(const float *x, int64_t nb, int8_t *q, float *d, int32_t *qs);
  /* Rounds x[0 .. 256 nb) into q, d[0 .. nb), bs[0 .. 16 nb) (blocks of 256). */
  void (*quantize_k)(const float *x, int64_t nb, int8_t *q, float *d, int16_t *bs);
  /* y[i * ldy + r] = output (A row m + i, W row r) for r < rw <= RW, i < ra <= RA, where W row r
   * is the nb blocks at w + r * w_stride. */
  void (*dot)(fer_dtype t, const uint8_t *w, int64_t w_stride, int rw, const feri_q8_rows *a,
              int64_t m, int ra, float *y, int64_t ldy);
  /* As dot, for the sixteen rows of one panel (qpanel.h) whose first record is at rec0 (nb
   * records of rec_bytes), the first rw <= 16 of them written; NULL in the tables without panel
   * kernels (where no panel should be built). */
  void (*pdot)(fer_dtype t, const uint8_t *rec0, size_t rec_bytes, int rw, const feri_q8_rows *a, int64_t m,
               int ra, float *y, int64_t ldy);
  /* One panel record (qpanel.h) from the sixteen rows' blocks blk[r]; NULL where pdot is. */
  void (*ppack)(fer_dtype t, const uint8_t *const blk[16], uint8_t *rec);
} feri_qi8_ops;

/* The table for an ISA level; on AVX2 the VNNI form is used when the CPU has AVX512-VNNI/VL. */
const feri_qi8_ops *feri_qi8_ops_for(fer_isa isa);

extern const feri_qi8_ops feri_qi8_ops_portable;
#if defined(__x86_64__)
extern const feri_qi8_ops feri_qi8_ops_avx2;
extern const feri_qi8_ops feri_qi8_ops_avx512vnni;
#endif

/* ---- the formats as this route reads them ------------------------------------------------------
 * (kept here so the route does not wait on the generic block tables of quant.h; the values are
 * ggml's block sizes) */

/* 1 for the super-block formats (activation blocks of 256), else 0. */
static inline int feri_qi8_is_super(fer_dtype t) {
  return t == FER_DTYPE_Q2_K || t == FER_DTYPE_Q3_K || t == FER_DTYPE_Q4_K || t == FER_DTYPE_Q5_K ||
         t == FER_DTYPE_Q6_K || t == FER_DTYPE_IQ4_XS;
}

/* Elements and bytes of one block: feri_qblock_elems / feri_qblock_bytes (kernels/quant.h). */
static inline int64_t feri_qi8_block_elems(fer_dtype t) { return feri_qblock_elems(t); }
static inline size_t feri_qi8_block_bytes(fer_dtype t) { return feri_qblock_bytes(t); }

/* Offset of the f16 d of a super-block (dmin, where there is one, follows it). */
static inline size_t feri_qi8_super_d_offset(fer_dtype t) {
  return t == FER_DTYPE_Q2_K ? 80 : t == FER_DTYPE_Q3_K ? 108 : t == FER_DTYPE_Q6_K ? 208 : 0;
}

/* 1 for the super-block formats with minima (Q2_K, Q4_K, Q5_K). */
static inline int feri_qi8_super_has_min(fer_dtype t) {
  return t == FER_DTYPE_Q2_K || t == FER_DTYPE_Q4_K || t == FER_DTYPE_Q5_K;
}

/* kvalues_iq4nl: the IQ4_NL / IQ4_XS code table (kernels/quant.h's). */
#define feri_qi8_iq4nl feri_iq4nl_values

/* The integer sub-scales (S) and minima (m) of a super-block, one per 16 elements, as described
 * above (zero minima for the formats without). */
void feri_qi8_super_scales(fer_dtype t, const uint8_t *blk, int8_t sc[16], int8_t mn[16]);

/* The 256 signed integer codes c of a super-block, in element order. */
void feri_qi8_super_codes(fer_dtype t, const uint8_t *blk, int8_t c[256]);

#endif
