/* fast_x86.c: the AVX2 and AVX-512F loops of the fast sampling front (fast.h), each equal to its
 * portable form in fast.c. feri_fast_ops_for hands a table out only when fer_cpu_features reports
 * its level, so nothing here assumes an instruction set. */
#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>

#include "sample/fast.h"

#define FERI_AVX2 __attribute__((target("avx2")))
#define FERI_AVX512 __attribute__((target("avx2,avx512f")))


/* The scalar forms, for the partial last chunk. */
static int chunk_max_tail(const float *x, size_t n, float *cmax) {
  int bad = 0;
  float m = -INFINITY;
  for (size_t i = 0; i < n; i++) {
    bad |= !(x[i] < INFINITY);
    m = x[i] > m ? x[i] : m;
  }
  *cmax = m;
  return bad;
}

static size_t mask_scale_tail(float *x, size_t base, size_t n, float cmax, float lo, float t, uint32_t *ids) {
  size_t m = 0;
  if (!(cmax >= lo)) {
    for (size_t i = 0; i < n; i++) x[i] = -INFINITY;
    return 0;
  }
  for (size_t i = 0; i < n; i++) {
    const float v = x[i];
    const float y = v >= lo ? (t == 1.0f ? v : v / t) : -INFINITY;
    x[i] = y;
    ids[m] = (uint32_t)(base + i);
    m += y != -INFINITY;
  }
  return m;
}

/* ---- AVX-512F: a chunk is eight vectors of sixteen ---- */

FERI_AVX512 static int chunk_max_avx512(const float *x, size_t n, float *cmax) {
  const __m512 inf = _mm512_set1_ps(INFINITY);
  __mmask16 bad = 0;
  size_t i = 0, c = 0;
  for (; i + FERI_FAST_CHUNK <= n; i += FERI_FAST_CHUNK, c++) {
    const float *p = x + i;
    const __m512 v0 = _mm512_loadu_ps(p), v1 = _mm512_loadu_ps(p + 16), v2 = _mm512_loadu_ps(p + 32),
                 v3 = _mm512_loadu_ps(p + 48), v4 = _mm512_loadu_ps(p + 64), v5 = _mm512_loadu_ps(p + 80),
                 v6 = _mm512_loadu_ps(p + 96), v7 = _mm512_loadu_ps(p + 112);
    /* An unordered compare of two vectors finds a NaN in either; max_ps drops NaN, so the
     * maximum then equals +inf exactly when a lane is +inf. */
    bad |= _mm512_cmp_ps_mask(v0, v1, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(v2, v3, _CMP_UNORD_Q) |
           _mm512_cmp_ps_mask(v4, v5, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(v6, v7, _CMP_UNORD_Q);
    const __m512 m = _mm512_max_ps(_mm512_max_ps(_mm512_max_ps(v0, v1), _mm512_max_ps(v2, v3)),
                                   _mm512_max_ps(_mm512_max_ps(v4, v5), _mm512_max_ps(v6, v7)));
    bad |= _mm512_cmp_ps_mask(m, inf, _CMP_EQ_OQ);
    cmax[c] = _mm512_reduce_max_ps(m);
  }
  int tail_bad = i < n ? chunk_max_tail(x + i, n - i, &cmax[c]) : 0;
  return bad != 0 || tail_bad;
}

FERI_AVX512 static size_t mask_scale_avx512(float *x, size_t n, const float *cmax, float lo, float t,
                                            uint32_t *ids) {
  const __m512 vlo = _mm512_set1_ps(lo), ninf = _mm512_set1_ps(-INFINITY), vt = _mm512_set1_ps(t);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const int divide = t != 1.0f;
  size_t m = 0, i = 0, c = 0;
  for (; i + FERI_FAST_CHUNK <= n; i += FERI_FAST_CHUNK, c++) {
    float *p = x + i;
    if (!(cmax[c] >= lo)) {
#pragma GCC unroll 8
      for (int j = 0; j < FERI_FAST_CHUNK; j += 16) _mm512_storeu_ps(p + j, ninf);
      continue;
    }
#pragma GCC unroll 8
    for (int j = 0; j < FERI_FAST_CHUNK; j += 16) {
      const __m512 v = _mm512_loadu_ps(p + j);
      const __mmask16 keep = _mm512_cmp_ps_mask(v, vlo, _CMP_GE_OQ);
      if (keep == 0) {
        _mm512_storeu_ps(p + j, ninf);
        continue;
      }
      const __m512 y = divide ? _mm512_div_ps(v, vt) : v;
      const __mmask16 live = _mm512_mask_cmp_ps_mask(keep, y, ninf, _CMP_NEQ_OQ);
      _mm512_storeu_ps(p + j, _mm512_mask_blend_ps(live, ninf, y));
      /* compress into a register and store it whole (the memory form is slow on Zen 4); ids has
       * FERI_FAST_ID_SLACK entries of room past the end */
      const __m512i id = _mm512_add_epi32(lane, _mm512_set1_epi32((int)(i + (size_t)j)));
      _mm512_storeu_si512((void *)(ids + m), _mm512_maskz_compress_epi32(live, id));
      m += (size_t)__builtin_popcount(live); /* POPCNT: implied by the AVX targets, as on every such CPU */
    }
  }
  if (i < n) m += mask_scale_tail(x + i, i, n - i, cmax[c], lo, t, ids + m);
  return m;
}

FERI_AVX512 static size_t count_ge_avx512(const int32_t *keys, size_t n, int32_t t) {
  const __m512i vt = _mm512_set1_epi32(t), one = _mm512_set1_epi32(1);
  __m512i acc = _mm512_setzero_si512();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __mmask16 ge = _mm512_cmpge_epi32_mask(_mm512_loadu_si512((const void *)(keys + i)), vt);
    acc = _mm512_mask_add_epi32(acc, ge, acc, one);
  }
  size_t count = (size_t)(uint32_t)_mm512_reduce_add_epi32(acc);
  for (; i < n; i++) count += keys[i] >= t;
  return count;
}

const feri_fast_ops feri_fast_avx512 = {
    .chunk_max = chunk_max_avx512,
    .mask_scale = mask_scale_avx512,
    .count_ge = count_ge_avx512,
};

/* ---- AVX2: a chunk is sixteen vectors of eight ---- */

FERI_AVX2 static inline float hmax8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

FERI_AVX2 static int chunk_max_avx2(const float *x, size_t n, float *cmax) {
  const __m256 inf = _mm256_set1_ps(INFINITY);
  __m256 bad = _mm256_setzero_ps();
  size_t i = 0, c = 0;
  for (; i + FERI_FAST_CHUNK <= n; i += FERI_FAST_CHUNK, c++) {
    const float *p = x + i;
    /* four running maxima, so that the max latency does not serialise the chunk */
    __m256 m0 = _mm256_loadu_ps(p), m1 = _mm256_loadu_ps(p + 8), m2 = _mm256_loadu_ps(p + 16),
           m3 = _mm256_loadu_ps(p + 24);
    __m256 un = _mm256_or_ps(_mm256_cmp_ps(m0, m1, _CMP_UNORD_Q), _mm256_cmp_ps(m2, m3, _CMP_UNORD_Q));
#pragma GCC unroll 4
    for (int j = 32; j < FERI_FAST_CHUNK; j += 32) {
      const __m256 a = _mm256_loadu_ps(p + j), b = _mm256_loadu_ps(p + j + 8), c2 = _mm256_loadu_ps(p + j + 16),
                   d = _mm256_loadu_ps(p + j + 24);
      un = _mm256_or_ps(un, _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_UNORD_Q), _mm256_cmp_ps(c2, d, _CMP_UNORD_Q)));
      m0 = _mm256_max_ps(m0, a);
      m1 = _mm256_max_ps(m1, b);
      m2 = _mm256_max_ps(m2, c2);
      m3 = _mm256_max_ps(m3, d);
    }
    const __m256 m = _mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3));
    bad = _mm256_or_ps(bad, _mm256_or_ps(un, _mm256_cmp_ps(m, inf, _CMP_EQ_OQ)));
    cmax[c] = hmax8(m);
  }
  int tail_bad = i < n ? chunk_max_tail(x + i, n - i, &cmax[c]) : 0;
  return !_mm256_testz_ps(bad, bad) || tail_bad;
}

FERI_AVX2 static size_t mask_scale_avx2(float *x, size_t n, const float *cmax, float lo, float t, uint32_t *ids) {
  const __m256 vlo = _mm256_set1_ps(lo), ninf = _mm256_set1_ps(-INFINITY), vt = _mm256_set1_ps(t);
  const int divide = t != 1.0f;
  size_t m = 0, i = 0, c = 0;
  for (; i + FERI_FAST_CHUNK <= n; i += FERI_FAST_CHUNK, c++) {
    float *p = x + i;
    if (!(cmax[c] >= lo)) {
#pragma GCC unroll 16
      for (int j = 0; j < FERI_FAST_CHUNK; j += 8) _mm256_storeu_ps(p + j, ninf);
      continue;
    }
    for (int j = 0; j < FERI_FAST_CHUNK; j += 32) {
      /* most groups of four vectors hold no survivor: one test for the four */
      const __m256 k4 = _mm256_or_ps(
          _mm256_or_ps(_mm256_cmp_ps(_mm256_loadu_ps(p + j), vlo, _CMP_GE_OQ),
                       _mm256_cmp_ps(_mm256_loadu_ps(p + j + 8), vlo, _CMP_GE_OQ)),
          _mm256_or_ps(_mm256_cmp_ps(_mm256_loadu_ps(p + j + 16), vlo, _CMP_GE_OQ),
                       _mm256_cmp_ps(_mm256_loadu_ps(p + j + 24), vlo, _CMP_GE_OQ)));
      if (_mm256_testz_ps(k4, k4)) {
        _mm256_storeu_ps(p + j, ninf), _mm256_storeu_ps(p + j + 8, ninf);
        _mm256_storeu_ps(p + j + 16, ninf), _mm256_storeu_ps(p + j + 24, ninf);
        continue;
      }
      for (int q = j; q < j + 32; q += 8) {
        const __m256 v = _mm256_loadu_ps(p + q);
        const __m256 keep = _mm256_cmp_ps(v, vlo, _CMP_GE_OQ);
        if (_mm256_testz_ps(keep, keep)) {
          _mm256_storeu_ps(p + q, ninf);
          continue;
        }
        const __m256 y = divide ? _mm256_div_ps(v, vt) : v;
        const __m256 live = _mm256_and_ps(keep, _mm256_cmp_ps(y, ninf, _CMP_NEQ_OQ));
        _mm256_storeu_ps(p + q, _mm256_blendv_ps(ninf, y, live));
        for (unsigned bits = (unsigned)_mm256_movemask_ps(live); bits; bits &= bits - 1)
          ids[m++] = (uint32_t)(i + (size_t)q + (size_t)__builtin_ctz(bits));
      }
    }
  }
  if (i < n) m += mask_scale_tail(x + i, i, n - i, cmax[c], lo, t, ids + m);
  return m;
}

FERI_AVX2 static size_t count_ge_avx2(const int32_t *keys, size_t n, int32_t t) {
  size_t i = 0, count = 0;
  if (t == INT32_MIN) return n;
  const __m256i vt = _mm256_set1_epi32(t - 1);
  __m256i acc = _mm256_setzero_si256();
  for (; i + 8 <= n; i += 8) /* a compare gives -1 per lane that passes */
    acc = _mm256_sub_epi32(acc, _mm256_cmpgt_epi32(_mm256_loadu_si256((const __m256i *)(keys + i)), vt));
  int32_t lanes[8];
  _mm256_storeu_si256((__m256i *)lanes, acc);
  for (int l = 0; l < 8; l++) count += (uint32_t)lanes[l];
  for (; i < n; i++) count += keys[i] >= t;
  return count;
}

const feri_fast_ops feri_fast_avx2 = {
    .chunk_max = chunk_max_avx2,
    .mask_scale = mask_scale_avx2,
    .count_ge = count_ge_avx2,
};
#endif

/* ISO C wants a declaration in every translation unit, including this one off x86. */
typedef int feri_fast_x86_unit;
