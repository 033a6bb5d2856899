/* avx2_util.h: what the AVX2 levels of the kernels share: the target attribute every AVX2
 * function carries, forced inlining for the per-dtype templates, and the exact widening of eight
 * f32 / f16 / bf16 elements. Include only from *_avx2.c files (x86-64). */
#ifndef FERI_KERNELS_AVX2_UTIL_H
#define FERI_KERNELS_AVX2_UTIL_H

#include <immintrin.h>

#include "ferrite.h"

#define FERI_AVX2 __attribute__((target("avx2,fma,f16c")))
#define FERI_INLINE inline __attribute__((always_inline))

/* bf16 -> f32 is exact: the bits move to the upper half. */
FERI_AVX2 static FERI_INLINE __m256 feri_bf16x8_to_f32(__m128i h) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* Eight consecutive elements of dtype at p, widened to f32 exactly. */
FERI_AVX2 static FERI_INLINE __m256 feri_load8(const char *p, fer_dtype dtype) {
  if (dtype == FER_DTYPE_F32) return _mm256_loadu_ps((const float *)p);
  const __m128i h = _mm_loadu_si128((const __m128i *)p);
  if (dtype == FER_DTYPE_F16) return _mm256_cvtph_ps(h);
  return feri_bf16x8_to_f32(h);
}

#endif
