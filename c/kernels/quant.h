/* quant.h: block-quantized weight formats: the GGUF block types as ggml lays them out (Q4_0,
 * Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL in blocks of 32; Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS in
 * super-blocks of 256) and OCP MX v1.0 MXFP4 in the original system's 17-byte block of 32.
 *
 * Every value of every format is c * s (+ o): an integer code c (|c| <= 127, exact in f32), the
 * f32 scale s of the code's sub-block (16 or 32 elements, or the whole block) and, for the formats
 * with a minimum, the sub-block's f32 offset o. s and o are themselves one f32 product of the
 * block's f16 super-scale and a small integer (Q4_K: s = d * sc, o = -(dmin * m)), so the values
 * are exactly llama.cpp's dequantize_row_* results: it computes d1 * q - m1, which IEEE defines as
 * q * d1 + (-m1), with every product and sum rounded on its own (the build passes
 * -ffp-contract=off, so no step is fused). Every consumer (dequantize, embedding, the fused GEMV,
 * the packed GEMM, the dense cache) sees the same floats. */
#ifndef FERI_KERNELS_QUANT_H
#define FERI_KERNELS_QUANT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ferrite.h"

/* FERI_HD: a host and device function when the CUDA kernels include this file (c/cuda/quant.cu). */
#ifndef FERI_HD
#ifdef __CUDACC__
#define FERI_HD __host__ __device__
#else
#define FERI_HD
#endif
#endif

/* FERI_QBLOCK: the block of the 32-element formats (the 8-bit route's unit for them);
 * FERI_QBLOCK_MAX: the largest block of any format (a K-quant super-block). */
enum { FERI_QBLOCK = 32, FERI_QBLOCK_MAX = 256, FERI_QSUB_MAX = 16 };

/* Bytes of one block of `dtype`, 0 when it is not block-quantized. Inline: the kernels call it
 * with a constant dtype, so it folds. */
static inline size_t feri_qblock_bytes(fer_dtype dtype) {
  switch (dtype) {
    case FER_DTYPE_MXFP4: return 17;  /* scale byte + 16 bytes of codes */
    case FER_DTYPE_Q4_0: return 18;   /* f16 d + 16 bytes of nibbles */
    case FER_DTYPE_Q4_1: return 20;   /* f16 d, f16 m + 16 bytes of nibbles */
    case FER_DTYPE_Q8_0: return 34;   /* f16 d + 32 int8 */
    case FER_DTYPE_Q5_0: return 22;   /* f16 d, 32 high bits, 16 bytes of nibbles */
    case FER_DTYPE_Q5_1: return 24;   /* f16 d, f16 m, 32 high bits, 16 bytes of nibbles */
    case FER_DTYPE_IQ4_NL: return 18; /* f16 d + 16 bytes of table indices */
    case FER_DTYPE_Q2_K: return 84;   /* 16 scale bytes, 64 bytes of 2-bit codes, f16 d, dmin */
    case FER_DTYPE_Q3_K: return 110;  /* 32 bytes of high bits, 64 of 2-bit codes, 12 of scales, d */
    case FER_DTYPE_Q4_K: return 144;  /* f16 d, dmin, 12 bytes of 6-bit scales, 128 of nibbles */
    case FER_DTYPE_Q5_K: return 176;  /* as Q4_K plus 32 bytes of high bits before the nibbles */
    case FER_DTYPE_Q6_K: return 210;  /* 128 bytes of low nibbles, 64 of 2-bit highs, 16 int8 scales, d */
    case FER_DTYPE_IQ4_XS: return 136; /* f16 d, u16 high scale bits, 4 bytes of low ones, 128 of indices */
    default: return 0;
  }
}

/* Elements of one block of `dtype` (32 or 256), 0 when it is not block-quantized. */
static inline int64_t feri_qblock_elems(fer_dtype dtype) {
  switch (dtype) {
    case FER_DTYPE_MXFP4:
    case FER_DTYPE_Q4_0:
    case FER_DTYPE_Q4_1:
    case FER_DTYPE_Q8_0:
    case FER_DTYPE_Q5_0:
    case FER_DTYPE_Q5_1:
    case FER_DTYPE_IQ4_NL: return 32;
    case FER_DTYPE_Q2_K:
    case FER_DTYPE_Q3_K:
    case FER_DTYPE_Q4_K:
    case FER_DTYPE_Q5_K:
    case FER_DTYPE_Q6_K:
    case FER_DTYPE_IQ4_XS: return 256;
    default: return 0;
  }
}

/* Elements per scale: 16 for Q2_K, Q3_K, Q6_K; 32 for Q4_K, Q5_K, IQ4_XS; the whole block (32)
 * for the 32-element formats. */
static inline int feri_qblock_sub(fer_dtype dtype) {
  return dtype == FER_DTYPE_Q2_K || dtype == FER_DTYPE_Q3_K || dtype == FER_DTYPE_Q6_K ? 16 : 32;
}

/* Whether values carry an offset o (a minimum): Q4_1, Q5_1, Q2_K, Q4_K, Q5_K. */
static inline int feri_qblock_has_offset(fer_dtype dtype) {
  return dtype == FER_DTYPE_Q4_1 || dtype == FER_DTYPE_Q5_1 || dtype == FER_DTYPE_Q2_K ||
         dtype == FER_DTYPE_Q4_K || dtype == FER_DTYPE_Q5_K;
}

/* Where the codes of a 32-element Q4_0 / Q4_1 / Q8_0 / MXFP4 / IQ4_NL block start: after the
 * scale (MXFP4: one byte; the others an f16) and Q4_1's minimum. */
static inline size_t feri_qblock_code_offset(fer_dtype dtype) {
  return dtype == FER_DTYPE_MXFP4 ? 1 : dtype == FER_DTYPE_Q4_1 ? 4 : 2;
}

/* MXFP4 codes as integers: twice the E2M1 value (a kernel halves the scale to match, exactly);
 * the -0 of code 8 is +0 (a product with it is a zero either way). */
extern const int8_t feri_mxfp4_code2[16];

/* IQ4_NL's (and IQ4_XS's) non-linear table, ggml's kvalues_iq4nl. */
extern const int8_t feri_iq4nl_values[16];

/* The feri_qblock_elems(dtype) values of one block, llama.cpp's dequantize_row_* arithmetic. */
void feri_qblock_dequant(fer_dtype dtype, const uint8_t *block, float *out);

/* The same block as integer codes: codes[i] (i < elems) such that value i is
 * codes[i] * scale[i / sub] (+ offset[i / sub] where feri_qblock_has_offset) with the scales and
 * offsets of feri_qblock_scales. MXFP4 codes are feri_mxfp4_code2 (its scale is halved there). */
void feri_qblock_codes(fer_dtype dtype, const uint8_t *block, int8_t *codes);

/* The elems / sub scales and offsets of one block (offsets 0 for formats without a minimum). */
void feri_qblock_scales(fer_dtype dtype, const uint8_t *block, float *scale, float *offset);

/* Value i (< elems) of one block (decodes what it needs; for the scalar reference paths). */
float feri_qblock_value(fer_dtype dtype, const uint8_t *block, int i);

/* The f16 scale d (E8M0 for MXFP4) and Q4_1's minimum of one 32-element Q4_0 / Q4_1 / Q8_0 /
 * MXFP4 block as f32 (the 8-bit route's inputs). */
float feri_qblock_scale(fer_dtype dtype, const uint8_t *block);

/* Rounds x[0 .. n) (n a multiple of 32) into n / 32 Q8_0 blocks at out (34 bytes each: the f16
 * scale d, then 32 int8 codes): d = amax / 127 rounded to f16 (to nearest even), codes
 * round_half_even(x / d) clamped to [-127, 127] (d as stored, so a scale rounded down cannot
 * overflow a code). A block of zeros, or one whose d rounds to 0, is all zero; a block holding a
 * non-finite value gets d NaN (every value read from it is NaN); d above f16's range saturates at
 * 65504 (values then saturate at +-127 x 65504). The KV cache's 8-bit dtype (llama.cpp's q8_0). */
void feri_quantize_q8_0(const float *x, int64_t n, uint8_t *out);
float feri_qblock_min(const uint8_t *block);

/* The K-quants' 6-bit scale and minimum j (< 8) of the 12 packed bytes of Q4_K / Q5_K. */
static inline void feri_q4k_scale_min(const uint8_t *q, int j, uint8_t *sc, uint8_t *m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

/* Q3_K's sixteen 6-bit scales (before the - 32) from its 12 packed bytes. */
static inline void feri_q3k_scales(const uint8_t *s, uint8_t out[16]) {
  for (int i = 0; i < 16; i++) {
    const int lo = i < 8 ? s[i] & 0xF : s[i - 8] >> 4;
    const int hi = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
    out[i] = (uint8_t)(lo | hi << 4);
  }
}

/* OK, or CORRUPT naming row and block when a scale is NaN or infinite (E8M0 code 255; an f16
 * scale d or minimum / dmin with all exponent bits set). */
fer_status feri_qblock_check(fer_dtype dtype, const uint8_t *block, int64_t row, int64_t blk,
                             const char *fn);

/* 2^(code - 127) for E8M0 codes 0 .. 254 (code 0 is the f32 subnormal 2^-127); NaN for 255.
 * Inline: the fused kernels call it once per block and row. */
FERI_HD static inline float feri_e8m0_to_f32(uint8_t code) {
  const uint32_t bits = code == 255 ? 0x7fc00000u : code == 0 ? 0x00400000u : (uint32_t)code << 23;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

/* E2M1 values by 4-bit code: 0, 0.5, 1, 1.5, 2, 3, 4, 6, then the same negated. */
extern const float feri_e2m1_values[16];

/* Validates a fer_qmatrix's structure (not its scales): known format, rows >= 0, cols a
 * multiple of the format's block (32 or 256), row_stride covering a row, bytes covering every
 * row, data non-NULL unless empty. Sizes that overflow are SIZE_OVERFLOW, a short buffer CORRUPT. */
fer_status feri_qmatrix_validate(const fer_qmatrix *w, const char *fn);

#endif
