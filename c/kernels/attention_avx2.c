/* attention_avx2.c: AVX2/FMA/F16C inner loops of fer_attention, the same operations in the same
 * order as attention_portable.c (see attention.h), eight lanes at a time. */
#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>

#include "kernels/avx2_util.h"
#include "kernels/attention.h"
#include "kernels/fexp.h"


/* ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)), as feri_att_dot combines its lanes. */
FERI_AVX2 static FERI_INLINE float lanes_sum(__m256 v) {
  const __m128 t = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 u = _mm_add_ps(t, _mm_movehl_ps(t, t)); /* (t0+t2, t1+t3) */
  return _mm_cvtss_f32(_mm_add_ss(u, _mm_shuffle_ps(u, u, 1)));
}

/* Up to four query rows against two keys at a time: each (row, key) pair is one fma chain over
 * its lanes (the order of attention.h); eight chains hide the latency and each K vector is
 * converted once for all the rows. One instance per K dtype and row count. */
FERI_AVX2 static FERI_INLINE void scores_rows(const fer_dtype t, const int nr, const float *q,
                                              int64_t q_stride, int64_t d, const feri_kv_rows *k,
                                              int64_t n, float scale, float *s, int64_t s_stride) {
  const int64_t es = k->es;
  int64_t j = 0;
  for (; j + 2 <= n; j += 2) {
    const char *r0 = k->base + j * k->row_stride, *r1 = r0 + k->row_stride;
    __m256 a[4][2];
    for (int r = 0; r < nr; r++) a[r][0] = a[r][1] = _mm256_setzero_ps();
    for (int64_t e = 0; e < d; e += 8) {
      const __m256 k0 = feri_load8(r0 + e * es, t), k1 = feri_load8(r1 + e * es, t);
#pragma GCC unroll 4
      for (int r = 0; r < nr; r++) {
        const __m256 qv = _mm256_loadu_ps(q + r * q_stride + e);
        a[r][0] = _mm256_fmadd_ps(qv, k0, a[r][0]);
        a[r][1] = _mm256_fmadd_ps(qv, k1, a[r][1]);
      }
    }
    for (int r = 0; r < nr; r++) {
      s[r * s_stride + j] = lanes_sum(a[r][0]) * scale;
      s[r * s_stride + j + 1] = lanes_sum(a[r][1]) * scale;
    }
  }
  for (; j < n; j++) {
    const char *row = k->base + j * k->row_stride;
    for (int r = 0; r < nr; r++) {
      __m256 acc = _mm256_setzero_ps();
      for (int64_t e = 0; e < d; e += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + r * q_stride + e), feri_load8(row + e * es, t), acc);
      s[r * s_stride + j] = lanes_sum(acc) * scale;
    }
  }
}

FERI_AVX2 static FERI_INLINE void scores_dt(const fer_dtype t, const float *q, int64_t q_stride,
                                            int64_t rows, int64_t d, const feri_kv_rows *k, int64_t n,
                                            float scale, float *s, int64_t s_stride) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) scores_rows(t, 4, q + r * q_stride, q_stride, d, k, n, scale, s + r * s_stride, s_stride);
  switch (rows - r) {
    case 3: scores_rows(t, 3, q + r * q_stride, q_stride, d, k, n, scale, s + r * s_stride, s_stride); break;
    case 2: scores_rows(t, 2, q + r * q_stride, q_stride, d, k, n, scale, s + r * s_stride, s_stride); break;
    case 1: scores_rows(t, 1, q + r * q_stride, q_stride, d, k, n, scale, s + r * s_stride, s_stride); break;
    default: break;
  }
}

FERI_AVX2 static void scores_avx2(const float *q, int64_t q_stride, int64_t rows, int64_t d,
                                  const feri_kv_rows *k, int64_t n, float scale, float *s,
                                  int64_t s_stride) {
  if (k->dim_stride != k->es || d % 8 != 0) {
    feri_att_scores_ref(q, q_stride, rows, d, k, n, scale, s, s_stride);
    return;
  }
  switch (k->dtype) {
    case FER_DTYPE_F32: scores_dt(FER_DTYPE_F32, q, q_stride, rows, d, k, n, scale, s, s_stride); break;
    case FER_DTYPE_F16: scores_dt(FER_DTYPE_F16, q, q_stride, rows, d, k, n, scale, s, s_stride); break;
    default: scores_dt(FER_DTYPE_BF16, q, q_stride, rows, d, k, n, scale, s, s_stride); break;
  }
}

/* feri_fexp on eight lanes: the same operations; the special cases are blended at the end. */
FERI_AVX2 static FERI_INLINE __m256 fexp8(__m256 x) {
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
  y = _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(x, _mm256_set1_ps(FERI_EXP_HI), _CMP_GT_OQ));
  y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, _mm256_set1_ps(FERI_EXP_LO), _CMP_LT_OQ));
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

FERI_AVX2 static float exp_shift_avx2(float *s, int64_t n, float m) {
  const __m256 mv = _mm256_set1_ps(m);
  __m256 lanes = _mm256_setzero_ps(); /* lane l holds the sum of s[j], j mod 8 == l, in order */
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 e = fexp8(_mm256_sub_ps(_mm256_loadu_ps(s + j), mv));
    _mm256_storeu_ps(s + j, e);
    lanes = _mm256_add_ps(lanes, e);
  }
  float l[8];
  _mm256_storeu_ps(l, lanes);
  for (; j < n; j++) {
    s[j] = feri_fexp(s[j] - m);
    l[j % 8] += s[j];
  }
  return feri_att_lanes8(l);
}

FERI_AVX2 static float row_max_avx2(const float *s, int64_t n, float init) {
  __m256 mx = _mm256_set1_ps(init), nan = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 v = _mm256_loadu_ps(s + j);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    mx = _mm256_max_ps(mx, v);
  }
  float m8[8];
  _mm256_storeu_ps(m8, mx);
  if (_mm256_movemask_ps(nan)) return NAN;
  float r = init;
  for (int i = 0; i < 8; i++) r = m8[i] > r ? m8[i] : r;
  for (; j < n; j++) {
    if (isnan(s[j])) return s[j];
    r = s[j] > r ? s[j] : r;
  }
  return r;
}

/* Sixteen output dims of up to four rows in eight registers, every key of the tile in order;
 * each V vector is converted once for all the rows. One instance per V dtype and row count. */
FERI_AVX2 static FERI_INLINE void accumulate_rows(const fer_dtype t, const int nr, float *o,
                                                  int64_t o_stride, int64_t dv, const float *p,
                                                  int64_t p_stride, const feri_kv_rows *v, int64_t n) {
  const int64_t es = v->es;
  for (int64_t e0 = 0; e0 < dv; e0 += 16) {
    const int two = dv - e0 >= 16;
    __m256 c[4][2];
    for (int r = 0; r < nr; r++) {
      c[r][0] = _mm256_loadu_ps(o + r * o_stride + e0);
      c[r][1] = two ? _mm256_loadu_ps(o + r * o_stride + e0 + 8) : _mm256_setzero_ps();
    }
    const char *row = v->base + e0 * es;
    for (int64_t j = 0; j < n; j++, row += v->row_stride) {
      const __m256 v0 = feri_load8(row, t), v1 = two ? feri_load8(row + 8 * es, t) : v0;
#pragma GCC unroll 4
      for (int r = 0; r < nr; r++) {
        const __m256 pj = _mm256_set1_ps(p[r * p_stride + j]);
        c[r][0] = _mm256_fmadd_ps(pj, v0, c[r][0]);
        if (two) c[r][1] = _mm256_fmadd_ps(pj, v1, c[r][1]);
      }
    }
    for (int r = 0; r < nr; r++) {
      _mm256_storeu_ps(o + r * o_stride + e0, c[r][0]);
      if (two) _mm256_storeu_ps(o + r * o_stride + e0 + 8, c[r][1]);
    }
  }
}

FERI_AVX2 static FERI_INLINE void accumulate_dt(const fer_dtype t, float *o, int64_t o_stride,
                                                int64_t rows, int64_t dv, const float *p,
                                                int64_t p_stride, const feri_kv_rows *v, int64_t n) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4)
    accumulate_rows(t, 4, o + r * o_stride, o_stride, dv, p + r * p_stride, p_stride, v, n);
  switch (rows - r) {
    case 3: accumulate_rows(t, 3, o + r * o_stride, o_stride, dv, p + r * p_stride, p_stride, v, n); break;
    case 2: accumulate_rows(t, 2, o + r * o_stride, o_stride, dv, p + r * p_stride, p_stride, v, n); break;
    case 1: accumulate_rows(t, 1, o + r * o_stride, o_stride, dv, p + r * p_stride, p_stride, v, n); break;
    default: break;
  }
}

FERI_AVX2 static void accumulate_avx2(float *o, int64_t o_stride, int64_t rows, int64_t dv,
                                      const float *p, int64_t p_stride, const feri_kv_rows *v,
                                      int64_t n) {
  if (v->dim_stride != v->es || dv % 8 != 0) {
    feri_att_accumulate_ref(o, o_stride, rows, dv, p, p_stride, v, n);
    return;
  }
  switch (v->dtype) {
    case FER_DTYPE_F32: accumulate_dt(FER_DTYPE_F32, o, o_stride, rows, dv, p, p_stride, v, n); break;
    case FER_DTYPE_F16: accumulate_dt(FER_DTYPE_F16, o, o_stride, rows, dv, p, p_stride, v, n); break;
    default: accumulate_dt(FER_DTYPE_BF16, o, o_stride, rows, dv, p, p_stride, v, n); break;
  }
}

const feri_attention_ops feri_attention_ops_avx2 = {
    .scores = scores_avx2,
    .exp_shift = exp_shift_avx2,
    .row_max = row_max_avx2,
    .accumulate = accumulate_avx2,
};

#endif
