/* rowops_avx2.c: AVX2/F16C inner loops. Same operations, same order as rowops_portable.c; only
 * wider. Compiled for every x86-64 build through target attributes and chosen at run time. */
#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#include "core/dtype.h"
#include "kernels/avx2_util.h"
#include "kernels/fexp_avx2.h"
#include "kernels/rowops.h"


FERI_AVX2 static void add_f32(const float *a, int sa, const float *b, int sb, float *out, size_t n) {
  size_t i = 0;
  if (sa && sb) {
    for (; i + 32 <= n; i += 32)
      for (int k = 0; k < 32; k += 8)
        _mm256_storeu_ps(out + i + k,
                         _mm256_add_ps(_mm256_loadu_ps(a + i + k), _mm256_loadu_ps(b + i + k)));
  } else if (sa) {
    const __m256 vb = _mm256_set1_ps(b[0]);
    for (; i + 32 <= n; i += 32)
      for (int k = 0; k < 32; k += 8)
        _mm256_storeu_ps(out + i + k, _mm256_add_ps(_mm256_loadu_ps(a + i + k), vb));
  } else if (sb) {
    const __m256 va = _mm256_set1_ps(a[0]);
    for (; i + 32 <= n; i += 32)
      for (int k = 0; k < 32; k += 8)
        _mm256_storeu_ps(out + i + k, _mm256_add_ps(va, _mm256_loadu_ps(b + i + k)));
  }
  for (; i < n; i++) out[i] = a[i * (size_t)sa] + b[i * (size_t)sb];
}

/* Eight f16 or bf16 values starting at p, or p[0] eight times when step is 0; fewer than eight
 * valid values (count) are padded with zeros so the tail goes through the same conversion. */
FERI_AVX2 static inline __m128i load8_u16(const uint16_t *p, int step, size_t count) {
  if (step == 0) return _mm_set1_epi16((short)p[0]);
  if (count >= 8) return _mm_loadu_si128((const __m128i *)p);
  uint16_t tmp[8] = {0};
  memcpy(tmp, p, count * sizeof *p);
  return _mm_loadu_si128((const __m128i *)tmp);
}

FERI_AVX2 static inline void store8_u16(uint16_t *p, __m128i v, size_t count) {
  if (count >= 8) {
    _mm_storeu_si128((__m128i *)p, v);
  } else {
    uint16_t tmp[8];
    _mm_storeu_si128((__m128i *)tmp, v);
    memcpy(p, tmp, count * sizeof *p);
  }
}

/* Round to nearest even; NaN keeps sign and top payload and gets the quiet bit, as feri_f32_to_bf16. */
FERI_AVX2 static inline __m128i f32x8_to_bf16(__m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i abs = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
  const __m256i is_nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb);
  r = _mm256_blendv_epi8(r, _mm256_or_si256(u, _mm256_set1_epi32(0x00400000)), is_nan);
  r = _mm256_srli_epi32(r, 16);
  return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

/* bf16 in 32-bit lanes: unpacking against zero puts each bf16 in the high half of a 32-bit lane.
 * unpacklo/hi work within 128-bit lanes, so `lo` holds elements 0-3 and 8-11 and `hi` 4-7 and
 * 12-15; packus_epi32 at the end interleaves them back into 0-15 in order, with no permute. */
FERI_AVX2 static inline void bf16x16_unpack(const uint16_t *p, __m256 *lo, __m256 *hi) {
  const __m256i x = _mm256_loadu_si256((const __m256i *)p), zero = _mm256_setzero_si256();
  *lo = _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, x));
  *hi = _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, x));
}

/* Round to nearest even, without NaN handling: the caller routes NaN lanes elsewhere. */
FERI_AVX2 static inline __m256i bf16_round_finite(__m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  return _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
}

/* Sixteen sums (in the unpacked order) to sixteen bf16 in element order. A block holding a NaN
 * takes the exact per-lane path of f32x8_to_bf16 (rare: the common case pays one compare). */
FERI_AVX2 static inline __m256i bf16x16_pack(__m256 lo, __m256 hi) {
  const __m256 unordered = _mm256_or_ps(_mm256_cmp_ps(lo, lo, _CMP_UNORD_Q), _mm256_cmp_ps(hi, hi, _CMP_UNORD_Q));
  if (!_mm256_testz_ps(unordered, unordered)) {
    const __m256i quiet = _mm256_set1_epi32(0x00400000);
    const __m256i l = _mm256_blendv_epi8(bf16_round_finite(lo), _mm256_srli_epi32(_mm256_or_si256(_mm256_castps_si256(lo), quiet), 16),
                                         _mm256_castps_si256(_mm256_cmp_ps(lo, lo, _CMP_UNORD_Q)));
    const __m256i h = _mm256_blendv_epi8(bf16_round_finite(hi), _mm256_srli_epi32(_mm256_or_si256(_mm256_castps_si256(hi), quiet), 16),
                                         _mm256_castps_si256(_mm256_cmp_ps(hi, hi, _CMP_UNORD_Q)));
    return _mm256_packus_epi32(l, h);
  }
  return _mm256_packus_epi32(bf16_round_finite(lo), bf16_round_finite(hi));
}

FERI_AVX2 static inline __m256 bf16x8_load(const uint16_t *p) {
  return feri_bf16x8_to_f32(_mm_loadu_si128((const __m128i *)p));
}

FERI_AVX2 static inline __m256 f16x8_load(const uint16_t *p) {
  return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

/* Whole blocks of 16 with plain loads (a broadcast operand converted once), then the tail of fewer
 * than 16 through the padded 8-wide path. */
FERI_AVX2 static void add_f16(const uint16_t *a, int sa, const uint16_t *b, int sb, uint16_t *out,
                              size_t n) {
  size_t i = 0;
  const __m256 ca = _mm256_cvtph_ps(load8_u16(a, 0, 8)), cb = _mm256_cvtph_ps(load8_u16(b, 0, 8));
  for (; i + 16 <= n; i += 16) {
    __m256 a0 = sa ? f16x8_load(a + i) : ca, a1 = sa ? f16x8_load(a + i + 8) : ca;
    __m256 b0 = sb ? f16x8_load(b + i) : cb, b1 = sb ? f16x8_load(b + i + 8) : cb;
    _mm_storeu_si128((__m128i *)(out + i), _mm256_cvtps_ph(_mm256_add_ps(a0, b0), _MM_FROUND_TO_NEAREST_INT));
    _mm_storeu_si128((__m128i *)(out + i + 8), _mm256_cvtps_ph(_mm256_add_ps(a1, b1), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; i += 8) {
    size_t c = n - i < 8 ? n - i : 8;
    __m256 va = _mm256_cvtph_ps(load8_u16(a + i * (size_t)sa, sa, c));
    __m256 vb = _mm256_cvtph_ps(load8_u16(b + i * (size_t)sb, sb, c));
    store8_u16(out + i, _mm256_cvtps_ph(_mm256_add_ps(va, vb), _MM_FROUND_TO_NEAREST_INT), c);
  }
}

FERI_AVX2 static void add_bf16(const uint16_t *a, int sa, const uint16_t *b, int sb, uint16_t *out,
                               size_t n) {
  size_t i = 0;
  const __m256 ca = feri_bf16x8_to_f32(load8_u16(a, 0, 8)), cb = feri_bf16x8_to_f32(load8_u16(b, 0, 8));
  for (; i + 16 <= n; i += 16) {
    __m256 alo = ca, ahi = ca, blo = cb, bhi = cb;
    if (sa) bf16x16_unpack(a + i, &alo, &ahi);
    if (sb) bf16x16_unpack(b + i, &blo, &bhi);
    _mm256_storeu_si256((__m256i *)(out + i), bf16x16_pack(_mm256_add_ps(alo, blo), _mm256_add_ps(ahi, bhi)));
  }
  for (; i < n; i += 8) {
    size_t c = n - i < 8 ? n - i : 8;
    __m256 va = feri_bf16x8_to_f32(load8_u16(a + i * (size_t)sa, sa, c));
    __m256 vb = feri_bf16x8_to_f32(load8_u16(b + i * (size_t)sb, sb, c));
    store8_u16(out + i, f32x8_to_bf16(_mm256_add_ps(va, vb)), c);
  }
}

/* The four accumulators hold partial[0..7], [8..15], [16..23], [24..31]: element j of each block
 * of 32 lands in partial[j % 32], exactly as the portable loop adds it. */
#define FERI_SUM_BODY(LOAD8)                                                    \
  __m256 acc0 = _mm256_loadu_ps(partial), acc1 = _mm256_loadu_ps(partial + 8); \
  __m256 acc2 = _mm256_loadu_ps(partial + 16);                                  \
  __m256 acc3 = _mm256_loadu_ps(partial + 24);                                  \
  size_t j = 0;                                                                 \
  for (; j + 32 <= n; j += 32) {                                                \
    acc0 = _mm256_add_ps(acc0, LOAD8(x + j));                                   \
    acc1 = _mm256_add_ps(acc1, LOAD8(x + j + 8));                               \
    acc2 = _mm256_add_ps(acc2, LOAD8(x + j + 16));                              \
    acc3 = _mm256_add_ps(acc3, LOAD8(x + j + 24));                              \
  }                                                                             \
  _mm256_storeu_ps(partial, acc0);                                              \
  _mm256_storeu_ps(partial + 8, acc1);                                          \
  _mm256_storeu_ps(partial + 16, acc2);                                         \
  _mm256_storeu_ps(partial + 24, acc3);

#define FERI_LOAD_F32(p) _mm256_loadu_ps(p)
#define FERI_LOAD_F16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define FERI_LOAD_BF16(p) feri_bf16x8_to_f32(_mm_loadu_si128((const __m128i *)(p)))

FERI_AVX2 static void sum_f32(const float *x, size_t n, float partial[FERI_SUM_LANES]) {
  FERI_SUM_BODY(FERI_LOAD_F32)
  for (; j < n; j++) partial[j % FERI_SUM_LANES] += x[j];
}

FERI_AVX2 static void sum_f16(const uint16_t *x, size_t n, float partial[FERI_SUM_LANES]) {
  FERI_SUM_BODY(FERI_LOAD_F16)
  for (; j < n; j += 8) { /* tail through the same hardware conversion */
    size_t c = n - j < 8 ? n - j : 8;
    float v[8];
    _mm256_storeu_ps(v, _mm256_cvtph_ps(load8_u16(x + j, 1, c)));
    for (size_t k = 0; k < c; k++) partial[(j + k) % FERI_SUM_LANES] += v[k];
  }
}

FERI_AVX2 static void sum_bf16(const uint16_t *x, size_t n, float partial[FERI_SUM_LANES]) {
  FERI_SUM_BODY(FERI_LOAD_BF16)
  for (; j < n; j++) {
    uint32_t u = (uint32_t)x[j] << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    partial[j % FERI_SUM_LANES] += f;
  }
}

/* feri_silu on eight lanes: one exponential of -|x| (the sign bit set), the numerator chosen by
 * the sign of x (NaN compares false: t, as the scalar branch), -0 where the sigmoid is 0. */
FERI_AVX2 static void silu_f32(const float *x, const float *up, float *out, size_t n) {
  const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 t = feri_fexp8(_mm256_or_ps(v, sign));
    const __m256 num = _mm256_blendv_ps(t, one, _mm256_cmp_ps(v, zero, _CMP_GE_OQ));
    const __m256 s = _mm256_div_ps(num, _mm256_add_ps(one, t));
    __m256 y = _mm256_blendv_ps(_mm256_mul_ps(v, s), sign, _mm256_cmp_ps(s, zero, _CMP_EQ_OQ));
    if (up) y = _mm256_mul_ps(y, _mm256_loadu_ps(up + i));
    _mm256_storeu_ps(out + i, y);
  }
  for (; i < n; i++) out[i] = up ? feri_silu(x[i]) * up[i] : feri_silu(x[i]);
}

/* The f16 rounding by vcvtps2ph (nearest even, as feri_f32_to_f16), the table by a gather; the
 * lanes at or beyond +-10 blended in afterwards. */
FERI_AVX2 static void geglu_lut_f32(const float *lut, const float *x, const float *up, float *out, size_t n) {
  const __m256 lo = _mm256_set1_ps(-10.0f), hi = _mm256_set1_ps(10.0f);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i), u = _mm256_loadu_ps(up + i);
    const __m256i h = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    __m256 g = _mm256_mul_ps(_mm256_i32gather_ps(lut, h, 4), u);
    g = _mm256_blendv_ps(g, _mm256_mul_ps(v, u), _mm256_cmp_ps(v, hi, _CMP_GE_OQ));
    g = _mm256_blendv_ps(g, _mm256_setzero_ps(), _mm256_cmp_ps(v, lo, _CMP_LE_OQ));
    _mm256_storeu_ps(out + i, g);
  }
  for (; i < n; i++) {
    const float v = x[i];
    out[i] = v <= -10.0f ? 0.0f : v >= 10.0f ? v * up[i] : lut[feri_f32_to_f16(v)] * up[i];
  }
}

const feri_rowops feri_rowops_avx2 = {
    .add_f32 = add_f32,
    .add_f16 = add_f16,
    .add_bf16 = add_bf16,
    .sum_f32 = sum_f32,
    .sum_f16 = sum_f16,
    .sum_bf16 = sum_bf16,
    .silu_f32 = silu_f32,
    .geglu_lut_f32 = geglu_lut_f32,
};
#endif
