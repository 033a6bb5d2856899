/* dtype.h: element sizes and the f16/bf16 <-> f32 conversions every ISA level must agree with. */
#ifndef FERI_CORE_DTYPE_H
#define FERI_CORE_DTYPE_H

#include <stdint.h>
#include <string.h>

#include "ferrite.h"

/* Element size in bytes, 0 for unknown or block-quantized dtypes. Inline: the attention kernels
 * compute row addresses with it inside their register-blocked loops, where a call (through the
 * PLT in a shared build) spills every vector register: that made prefill attention several
 * times slower (docs/BENCHMARKS.md, issue 30). */
static inline size_t feri_dtype_size(fer_dtype dtype) {
  switch (dtype) {
    case FER_DTYPE_F32: return 4;
    case FER_DTYPE_F16: return 2;
    case FER_DTYPE_BF16: return 2;
    case FER_DTYPE_I32: return 4;
    case FER_DTYPE_I64: return 8;
    case FER_DTYPE_U8: return 1;
    default: return 0;
  }
}

/* Name for messages ("f32", "q4_0", "dtype 99"); static storage. */
const char *feri_dtype_name(fer_dtype dtype);

static inline uint32_t feri_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float feri_bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* bf16 -> f32 is exact: the bf16 bits are the high half of the f32. */
static inline float feri_bf16_to_f32(uint16_t h) { return feri_bits_f32((uint32_t)h << 16); }

/* f32 -> bf16, round to nearest even. A NaN keeps its sign and top payload bits and is made quiet
 * (bit 6 set), so it cannot round into an infinity. The AVX2 path computes the same formula. */
static inline uint16_t feri_f32_to_bf16(float f) {
  uint32_t u = feri_f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

/* f16 -> f32, exact for every input including subnormals; NaN payloads are kept and quieted,
 * as F16C's vcvtph2ps does. */
float feri_f16_to_f32(uint16_t h);

/* f32 -> f16, round to nearest even, with F16C's vcvtps2ph results for NaN (sign, quiet bit, top
 * nine payload bits), overflow (infinity) and subnormals. */
uint16_t feri_f32_to_f16(float f);

/* One F32, F16 or BF16 element at p (any alignment) widened exactly to f32; and v stored at p
 * as dtype, rounded to nearest even. */
float feri_elem_load(const char *p, fer_dtype dtype);
void feri_elem_store(char *p, fer_dtype dtype, float v);

#endif
