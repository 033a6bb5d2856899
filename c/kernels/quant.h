/* quant.h: block-quantized weight formats: GGUF Q4_0, Q4_1 and Q8_0 as llama.cpp lays them out,
 * and OCP MX v1.0 MXFP4 in the original system's 17-byte block. Every format has blocks of 32
 * elements along a row. Dequantized values are exact in f32 except Q4_1's q * d + m, which is
 * rounded once after the product (mul, then add: no fma), so every consumer (dequantize, the fused
 * matmul, the packed GEMM) sees the same floats. */
#ifndef FERI_KERNELS_QUANT_H
#define FERI_KERNELS_QUANT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ferrite.h"

enum { FERI_QBLOCK = 32 };

/* Bytes of one block of `dtype`, 0 when it is not one of the four formats. Inline: the kernels
 * call it with a constant dtype, so it folds. */
static inline size_t feri_qblock_bytes(fer_dtype dtype) {
  switch (dtype) {
    case FER_DTYPE_MXFP4: return 17; /* scale byte + 16 bytes of codes */
    case FER_DTYPE_Q4_0: return 18;  /* f16 d + 16 bytes of nibbles */
    case FER_DTYPE_Q4_1: return 20;  /* f16 d, f16 m + 16 bytes of nibbles */
    case FER_DTYPE_Q8_0: return 34;  /* f16 d + 32 int8 */
    default: return 0;
  }
}

/* Where a block's codes start: after the scale (MXFP4: one byte; Q4_0, Q8_0: an f16) and Q4_1's
 * minimum. */
static inline size_t feri_qblock_code_offset(fer_dtype dtype) {
  return dtype == FER_DTYPE_MXFP4 ? 1 : dtype == FER_DTYPE_Q4_1 ? 4 : 2;
}

/* MXFP4 codes as integers: twice the E2M1 value (a kernel halves the scale to match, exactly);
 * the -0 of code 8 is +0 (a product with it is a zero either way). */
extern const int8_t feri_mxfp4_code2[16];

/* The 32 values of one block. */
void feri_qblock_dequant(fer_dtype dtype, const uint8_t *block, float out[FERI_QBLOCK]);

/* Value i (< 32) of one block. */
float feri_qblock_value(fer_dtype dtype, const uint8_t *block, int i);

/* The scale (and Q4_1's minimum) of one block as f32. */
float feri_qblock_scale(fer_dtype dtype, const uint8_t *block);
float feri_qblock_min(const uint8_t *block);

/* OK, or CORRUPT naming row and block when a scale is NaN or infinite (E8M0 code 255; an f16
 * scale or minimum with all exponent bits set). */
fer_status feri_qblock_check(fer_dtype dtype, const uint8_t *block, int64_t row, int64_t blk,
                             const char *fn);

/* 2^(code - 127) for E8M0 codes 0 .. 254 (code 0 is the f32 subnormal 2^-127); NaN for 255.
 * Inline: the fused kernels call it once per block and row. */
static inline float feri_e8m0_to_f32(uint8_t code) {
  const uint32_t bits = code == 255 ? 0x7fc00000u : code == 0 ? 0x00400000u : (uint32_t)code << 23;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

/* E2M1 values by 4-bit code: 0, 0.5, 1, 1.5, 2, 3, 4, 6, then the same negated. */
extern const float feri_e2m1_values[16];

/* Validates a fer_qmatrix's structure (not its scales): known format, rows >= 0, cols a
 * multiple of 32, row_stride covering a row, bytes covering every row, data non-NULL unless
 * empty. Sizes that overflow are SIZE_OVERFLOW, a short buffer CORRUPT. */
fer_status feri_qmatrix_validate(const fer_qmatrix *w, const char *fn);

#endif
