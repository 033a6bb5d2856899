/* fexp_avx2.h: feri_fexp (fexp.h) on eight lanes, for the AVX2 tables that need an exponential
 * (attention's softmax, SiLU): the same operations in the same order, so every lane equals the
 * scalar result bit for bit. */
#ifndef FERI_KERNELS_FEXP_AVX2_H
#define FERI_KERNELS_FEXP_AVX2_H
#if defined(__x86_64__)

#include <immintrin.h>
#include <math.h>

#include "kernels/avx2_util.h"
#include "kernels/fexp.h"

/* feri_fexp on eight lanes: the same operations; the special cases are blended at the end. */
FERI_AVX2 static FERI_INLINE __m256 feri_fexp8(__m256 x) {
  const __m256 magic = _mm256_set1_ps(FERI_EXP_MAGIC);
  const __m256 n = _mm256_sub_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(FERI_EXP_LOG2E), magic), magic);
  __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-FERI_EXP_LN2_HI), x);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(-FERI_EXP_LN2_LO), r);
  const __m256 z = _mm256_mul_ps(r, r);
  __m256 p = _mm256_set1_ps(FERI_EXP_C0);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(FERI_EXP_C1));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(FERI_EXP_C2));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(FERI_EXP_C3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(FERI_EXP_C4));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(FERI_EXP_C5));
  const __m256 e = _mm256_add_ps(_mm256_fmadd_ps(p, z, r), _mm256_set1_ps(1.0f));
  /* clamp n into the range the two half-scales cover before converting (out-of-range lanes are
   * replaced below anyway) */
  const __m256 nc = _mm256_min_ps(_mm256_max_ps(n, _mm256_set1_ps(-150.0f)), _mm256_set1_ps(128.0f));
  const __m256i ni = _mm256_cvtps_epi32(nc);
  const __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  __m256 y = _mm256_mul_ps(_mm256_mul_ps(e, s1), s2);
  /* softmax arguments are almost always in range: then the blends below change nothing */
  const __m256 in = _mm256_and_ps(_mm256_cmp_ps(x, _mm256_set1_ps(FERI_EXP_LO), _CMP_GE_OQ),
                                  _mm256_cmp_ps(x, _mm256_set1_ps(FERI_EXP_HI), _CMP_LE_OQ));
  if (_mm256_movemask_ps(in) == 0xff) return y;
  y = _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(x, _mm256_set1_ps(FERI_EXP_HI), _CMP_GT_OQ));
  y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, _mm256_set1_ps(FERI_EXP_LO), _CMP_LT_OQ));
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

#endif
#endif
