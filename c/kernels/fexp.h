/* fexp.h: the exponential every ISA level of ferrite computes identically: Cody-Waite reduction
 * x = n ln2 + r (n rounded to nearest even through the 1.5 * 2^23 trick), Cephes' degree-6
 * polynomial for e^r, and 2^n applied in two halves so that subnormal results round once, as a
 * correctly rounded product would. Within 2 ulp of exp over the f32 range (claim C-ATT-004);
 * below -104 the result is +0, above 88.73 +inf, NaN stays NaN. The AVX2 version in
 * attention_avx2.c performs the same operations in the same order. The CUDA kernels include this
 * file too (FERI_HD makes each function a device function there; c/cuda compiles with -fmad=false,
 * so the device performs the same operations, fmaf for fmaf). */
#ifndef FERI_KERNELS_FEXP_H
#define FERI_KERNELS_FEXP_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifndef FERI_HD /* as in quant.h */
#ifdef __CUDACC__
#define FERI_HD __host__ __device__
#else
#define FERI_HD
#endif
#endif

#define FERI_EXP_HI 88.72283935546875f
#define FERI_EXP_LO -104.0f
#define FERI_EXP_LOG2E 1.44269502162933349609375f
#define FERI_EXP_MAGIC 12582912.0f /* 1.5 * 2^23 */
#define FERI_EXP_LN2_HI 0.693359375f
#define FERI_EXP_LN2_LO -2.12194440e-4f
#define FERI_EXP_C0 1.9875691500e-4f
#define FERI_EXP_C1 1.3981999507e-3f
#define FERI_EXP_C2 8.3334519073e-3f
#define FERI_EXP_C3 4.1665795894e-2f
#define FERI_EXP_C4 1.6666665459e-1f
#define FERI_EXP_C5 5.0000001201e-1f

FERI_HD static inline float feri_pow2i(int32_t n) { /* 2^n for -126 <= n <= 127 */
  const uint32_t bits = (uint32_t)(n + 127) << 23;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

FERI_HD static inline float feri_fexp(float x) {
  if (x != x) return x;
  if (x > FERI_EXP_HI) return INFINITY;
  if (x < FERI_EXP_LO) return 0.0f;
  const float t = fmaf(x, FERI_EXP_LOG2E, FERI_EXP_MAGIC);
  const float n = t - FERI_EXP_MAGIC;
  float r = fmaf(n, -FERI_EXP_LN2_HI, x);
  r = fmaf(n, -FERI_EXP_LN2_LO, r);
  const float z = r * r;
  float p = FERI_EXP_C0;
  p = fmaf(p, r, FERI_EXP_C1);
  p = fmaf(p, r, FERI_EXP_C2);
  p = fmaf(p, r, FERI_EXP_C3);
  p = fmaf(p, r, FERI_EXP_C4);
  p = fmaf(p, r, FERI_EXP_C5);
  const float e = fmaf(p, z, r) + 1.0f;
  const int32_t ni = (int32_t)n; /* exact: |n| <= 151 */
  const int32_t n1 = ni >> 1, n2 = ni - n1;
  return (e * feri_pow2i(n1)) * feri_pow2i(n2);
}

/* SiLU x * sigmoid(x) with the sigmoid from t = feri_fexp(-|x|) (one exponential, never
 * overflowing): 1 / (1 + t) for x >= 0, t / (1 + t) below (NaN too); where the sigmoid is 0 the
 * result is -0. The AVX2 table performs the same operations (fer_silu, fer_swiglu). */
FERI_HD static inline float feri_silu(float x) {
  const float t = feri_fexp(-fabsf(x));
  const float s = x >= 0.0f ? 1.0f / (1.0f + t) : t / (1.0f + t);
  return s == 0.0f ? -0.0f : x * s;
}

#endif
