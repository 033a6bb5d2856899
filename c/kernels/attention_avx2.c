/* attention_avx2.c: AVX2/FMA/F16C inner loops of fer_attention, the same operations in the same
 * order as attention_portable.c (see attention.h), eight lanes at a time. Decode spends its time
 * here: q.k for the group's rows with each K row converted once (scores8), p.v likewise
 * (accumulate_pass), and the prefetch of the next tile's rows spread through both. */
#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>
#include <math.h>

#include "kernels/avx2_util.h"
#include "kernels/attention.h"
#include "kernels/attention_x86.h"
#include "kernels/fexp.h"
#include "kernels/fexp_avx2.h"


/* ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)), as feri_att_dot combines its lanes. */
FERI_AVX2 static FERI_INLINE float lanes_sum(__m256 v) {
  const __m128 t = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 u = _mm_add_ps(t, _mm_movehl_ps(t, t)); /* (t0+t2, t1+t3) */
  return _mm_cvtss_f32(_mm_add_ss(u, _mm_shuffle_ps(u, u, 1)));
}

/* Elements [e, e + 8) of a K or V row as f32 (e a multiple of 8): feri_load8 at row + e * the
 * dtype's size, or for Q8_0 eight codes of block e / 32 times its scale (exact, attention.h). */
FERI_AVX2 static FERI_INLINE __m256 kv_load8(const char *row, int64_t e, fer_dtype t) {
  if (t != FER_DTYPE_Q8_0) return feri_load8(row + e * feri_kv_step_bytes(t), t);
  const char *b = row + (e >> 5) * feri_kv_step_bytes(t);
  short h;
  memcpy(&h, b, 2);
  const __m256 scale = _mm256_cvtph_ps(_mm_set1_epi16(h));
  const __m128i codes = _mm_loadl_epi64((const __m128i *)(const void *)(b + 2 + (e & 31)));
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(codes)), scale);
}

/* Scores of keys 0..7 of k0 (rows rs bytes apart) for nr query rows. Each (row, key) pair is one
 * fma chain over its lanes (the order of attention.h). An e-loop runs nkb keys (pairs j, j + 4)
 * against the nr rows: nr x nkb independent chains hide the fma latency, each K vector is
 * converted once for all the rows. qreg holds each q vector in a register for its nkb uses
 * instead of letting the compiler fold nkb loads of it into the fmas (the loads, not the fmas,
 * were the limit). Shapes measured on Zen 4 (f16 K, d 128): 4 rows x 2 keys and 2 x 4 with qreg,
 * 3 x 4 without, 77-78% of the fma peak; one row is bound by the K conversions (47%). After
 * each e-loop, the rows of pf (when not NULL) for that share of the eight keys are prefetched. */
FERI_AVX2 static FERI_INLINE void scores8(const fer_dtype t, const int nr, const int nkb, const int qreg,
                                          const float *q, int64_t q_stride, int64_t d, const char *k0,
                                          int64_t rs, float scale, float *s, int64_t s_stride,
                                          const char *const *pfr) {
  const int64_t rb = feri_kv_row_bytes(t, d), lines = (rb + 63) / 64;
  __m256 x[4][4];
  for (int kb = 0; kb < 4; kb += nkb / 2) {
    const char *row[8];
#pragma GCC unroll 4
    for (int u = 0; u < nkb / 2; u++) {
      row[2 * u] = k0 + (kb + u) * rs;
      row[2 * u + 1] = row[2 * u] + 4 * rs;
    }
    __m256 a[4][8];
#pragma GCC unroll 4
    for (int r = 0; r < nr; r++)
#pragma GCC unroll 8
      for (int u = 0; u < nkb; u++) a[r][u] = _mm256_setzero_ps();
    for (int64_t e = 0; e < d; e += 8) {
      if (qreg) {
        __m256 kv[8];
#pragma GCC unroll 8
        for (int u = 0; u < nkb; u++) kv[u] = kv_load8(row[u], e, t);
#pragma GCC unroll 4
        for (int r = 0; r < nr; r++) {
          __m256 qv = _mm256_loadu_ps(q + r * q_stride + e);
          __asm__("" : "+x"(qv)); /* keep it in a register: see above */
#pragma GCC unroll 8
          for (int u = 0; u < nkb; u++) a[r][u] = _mm256_fmadd_ps(qv, kv[u], a[r][u]);
        }
      } else {
#pragma GCC unroll 8
        for (int u = 0; u < nkb; u++) {
          const __m256 kv = kv_load8(row[u], e, t);
#pragma GCC unroll 4
          for (int r = 0; r < nr; r++) a[r][u] = _mm256_fmadd_ps(_mm256_loadu_ps(q + r * q_stride + e), kv, a[r][u]);
        }
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < nr; r++)
#pragma GCC unroll 4
      for (int u = 0; u < nkb / 2; u++) x[r][kb + u] = halves_sum(a[r][2 * u], a[r][2 * u + 1]);
    if (pfr != NULL)
      for (int u = 2 * kb; u < 2 * kb + nkb; u++) prefetch_span(pfr[u], 0, lines, rb % 64 != 0, rb);
  }
  const __m256 sc = _mm256_set1_ps(scale);
#pragma GCC unroll 4
  for (int r = 0; r < nr; r++) _mm256_storeu_ps(s + r * s_stride, _mm256_mul_ps(tree8(x[r]), sc));
}

/* nr rows against n keys: blocks of eight keys, then the last n mod 8 keys one by one. */
FERI_AVX2 static FERI_INLINE void scores_rows(const fer_dtype t, const int nr, const float *q,
                                              int64_t q_stride, int64_t d, const feri_kv_rows *k,
                                              int64_t n, float scale, float *s, int64_t s_stride,
                                              const feri_att_pf *pf) {
  const int nkb = nr == 1 ? 8 : nr == 4 ? 2 : 4, qreg = nr != 3;
  feri_att_pf_cursor cur = {NULL, 0};
  if (pf != NULL) cur = feri_att_pf_at(pf, 0);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const char *pfr[8];
    if (pf != NULL)
      for (int u = 0; u < 8; u++) pfr[u] = feri_att_pf_next(pf, &cur);
    scores8(t, nr, nkb, qreg, q, q_stride, d, k->base + j * k->row_stride, k->row_stride, scale, s + j,
            s_stride, pf != NULL ? pfr : NULL);
  }
  if (pf != NULL)
    for (int64_t u = j; u < n; u++) {
      const int64_t rb = feri_kv_row_bytes(t, d);
      prefetch_span(feri_att_pf_next(pf, &cur), 0, (rb + 63) / 64, 1, rb);
    }
  for (; j < n; j++) {
    const char *row = k->base + j * k->row_stride;
    for (int r = 0; r < nr; r++) {
      __m256 acc = _mm256_setzero_ps();
      for (int64_t e = 0; e < d; e += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + r * q_stride + e), kv_load8(row, e, t), acc);
      s[r * s_stride + j] = lanes_sum(acc) * scale;
    }
  }
}

FERI_AVX2 static FERI_INLINE void scores_dt(const fer_dtype t, const float *q, int64_t q_stride,
                                            int64_t rows, int64_t d, const feri_kv_rows *k, int64_t n,
                                            float scale, float *s, int64_t s_stride, const feri_att_pf *pf) {
  int64_t r = 0;
  /* the first block of rows prefetches */
#define ATT_SC(nr) \
  scores_rows(t, nr, q + r * q_stride, q_stride, d, k, n, scale, s + r * s_stride, s_stride, r == 0 ? pf : NULL)
  for (; r + 4 <= rows; r += 4) ATT_SC(4);
  switch (rows - r) {
    case 3: ATT_SC(3); break;
    case 2: ATT_SC(2); break;
    case 1: ATT_SC(1); break;
    default: break;
  }
#undef ATT_SC
}

FERI_AVX2 static void scores_avx2(const float *q, int64_t q_stride, int64_t rows, int64_t d,
                                  const feri_kv_rows *k, int64_t n, float scale, float *s,
                                  int64_t s_stride, const feri_att_pf *pf) {
  if (k->dim_stride != k->es || d % 8 != 0) {
    feri_att_scores_ref(q, q_stride, rows, d, k, n, scale, s, s_stride, pf);
    return;
  }
  switch (k->dtype) {
    case FER_DTYPE_F32: scores_dt(FER_DTYPE_F32, q, q_stride, rows, d, k, n, scale, s, s_stride, pf); break;
    case FER_DTYPE_F16: scores_dt(FER_DTYPE_F16, q, q_stride, rows, d, k, n, scale, s, s_stride, pf); break;
    case FER_DTYPE_Q8_0: scores_dt(FER_DTYPE_Q8_0, q, q_stride, rows, d, k, n, scale, s, s_stride, pf); break;
    default: scores_dt(FER_DTYPE_BF16, q, q_stride, rows, d, k, n, scale, s, s_stride, pf); break;
  }
}

FERI_AVX2 static float exp_shift_avx2(float *s, int64_t n, float m) {
  const __m256 mv = _mm256_set1_ps(m);
  __m256 lanes = _mm256_setzero_ps(); /* lane l holds the sum of s[j], j mod 8 == l, in order */
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 e = feri_fexp8(_mm256_sub_ps(_mm256_loadu_ps(s + j), mv));
    _mm256_storeu_ps(s + j, e);
    lanes = _mm256_add_ps(lanes, e);
  }
  return exp_shift_finish(s, j, n, m, lanes);
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

/* Output dims [e0, e0 + 8w) of nr rows in nr x w registers, every key in order (the order of
 * attention.h: each o element is one fma chain over the keys); each V vector is converted once
 * for all the rows. vout converts one V vector at a time and keeps the rows' probabilities in
 * registers, for shapes where nr x w accumulators leave no room for w V vectors. */
FERI_AVX2 static FERI_INLINE void accumulate_pass(const fer_dtype t, const int nr, const int w, const int vout,
                                                  float *o, int64_t o_stride, int64_t e0, const float *p,
                                                  int64_t p_stride, const feri_kv_rows *v, int64_t n,
                                                  const float *corr, const char *const *pfr, int64_t l0,
                                                  int64_t l1, int last, int64_t bytes) {
  __m256 c[4][8];
#pragma GCC unroll 4
  for (int r = 0; r < nr; r++) {
    const __m256 cr = _mm256_set1_ps(corr != NULL ? corr[r] : 1.0f);
#pragma GCC unroll 8
    for (int u = 0; u < w; u++) {
      c[r][u] = _mm256_loadu_ps(o + r * o_stride + e0 + 8 * u);
      if (corr != NULL) c[r][u] = _mm256_mul_ps(c[r][u], cr);
    }
  }
  const char *row = v->base;
  for (int64_t j = 0; j < n; j++, row += v->row_stride) {
    if (pfr != NULL) prefetch_span(pfr[j], l0, l1, last, bytes);
    if (vout) {
      __m256 pj[4];
#pragma GCC unroll 4
      for (int r = 0; r < nr; r++) pj[r] = _mm256_set1_ps(p[r * p_stride + j]);
#pragma GCC unroll 8
      for (int u = 0; u < w; u++) {
        const __m256 vv = kv_load8(row, e0 + 8 * u, t);
#pragma GCC unroll 4
        for (int r = 0; r < nr; r++) c[r][u] = _mm256_fmadd_ps(pj[r], vv, c[r][u]);
      }
    } else {
      __m256 vv[8];
#pragma GCC unroll 8
      for (int u = 0; u < w; u++) vv[u] = kv_load8(row, e0 + 8 * u, t);
#pragma GCC unroll 4
      for (int r = 0; r < nr; r++) {
        const __m256 pj = _mm256_set1_ps(p[r * p_stride + j]);
#pragma GCC unroll 8
        for (int u = 0; u < w; u++) c[r][u] = _mm256_fmadd_ps(pj, vv[u], c[r][u]);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < nr; r++)
#pragma GCC unroll 8
    for (int u = 0; u < w; u++) _mm256_storeu_ps(o + r * o_stride + e0 + 8 * u, c[r][u]);
}

/* All dv dims of nr rows: passes of the widest shape that keeps the fma pipes busy (measured on
 * Zen 4, f16 V, d 128: 4 rows x 2 vectors 90% of the fma peak, 3 x 4 (vout) 96%, 2 x 4 88%,
 * 1 x 8 67%, bound by the conversions), then two and one vector for what dv leaves. Pass i of
 * `passes` prefetches its share of the lines of each row of pf, one row per key.
 * Each pass reads one line of every V row it covers. Rows a multiple of 4 KiB apart all fall in
 * the same L1 sets (the set comes from address bits 6-11; a token-major cache puts a head's rows
 * 128 KiB apart, a seq-major f32 one with eight heads of 128 4 KiB), so a pass over 32 rows of
 * the 8-way L1 missed on every row again. For those the keys go in blocks of ATT_ACC_KB, all
 * passes per block, the accumulators stored between blocks: each o element's fma chain still runs
 * over the keys in order, the same bits. Measured at 4k context, f32: token-major 1.2x faster,
 * seq-major 1.14x; other strides keep whole passes (the blocks' extra loads and stores of the
 * accumulators cost up to 8% where the rows do not collide). */
enum { ATT_ACC_KB = 8 };

FERI_AVX2 static FERI_INLINE void accumulate_rows(const fer_dtype t, const int nr, float *o,
                                                  int64_t o_stride, int64_t dv, const float *p,
                                                  int64_t p_stride, const feri_kv_rows *v, int64_t n,
                                                  const float *corr, const feri_att_pf *pf) {
  const int w = nr == 1 ? 8 : nr == 4 ? 2 : 4, vout = nr == 3;
  const int64_t bytes = feri_kv_row_bytes(t, dv), lines = (bytes + 63) / 64;
  const int64_t wide = dv / (8 * w), two = w > 2 ? dv % (8 * w) / 16 : 0;
  const int64_t passes = wide + two + (dv - wide * 8 * w - two * 16) / 8;
  const int64_t kb0 = v->row_stride % 4096 == 0 ? ATT_ACC_KB : n;
  const int64_t kb = pf != NULL && kb0 > ATT_PF_ROWS ? ATT_PF_ROWS : kb0;
  feri_att_pf_cursor cur = {NULL, 0};
  if (pf != NULL) cur = feri_att_pf_at(pf, 0);
  for (int64_t j0 = 0; j0 < n; j0 += kb) {
    const int64_t nb = n - j0 < kb ? n - j0 : kb;
    feri_kv_rows vb;
    const float *pb, *cb;
    const char *pfr[ATT_PF_ROWS];
    const char *const *pfb = key_block(v, p, corr, pf, &cur, j0, nb, &vb, &pb, &cb, pfr);
    int64_t e0 = 0, i = 0;
#define ATT_PASS(ww, vo) \
  accumulate_pass(t, nr, ww, vo, o, o_stride, e0, pb, p_stride, &vb, nb, cb, pfb, lines * i / passes, \
                  lines * (i + 1) / passes, i == passes - 1 && bytes % 64 != 0, bytes)
    for (; e0 + 8 * w <= dv; e0 += 8 * w, i++) ATT_PASS(w, vout);
    if (w > 2)
      for (; e0 + 16 <= dv; e0 += 16, i++) ATT_PASS(2, 0);
    for (; e0 < dv; e0 += 8, i++) ATT_PASS(1, 0);
#undef ATT_PASS
  }
}

FERI_AVX2 static FERI_INLINE void accumulate_dt(const fer_dtype t, float *o, int64_t o_stride,
                                                int64_t rows, int64_t dv, const float *p,
                                                int64_t p_stride, const feri_kv_rows *v, int64_t n,
                                                const float *corr, const feri_att_pf *pf) {
  int64_t r = 0;
  /* the first block of rows prefetches */
#define ATT_ACC(nr) \
  accumulate_rows(t, nr, o + r * o_stride, o_stride, dv, p + r * p_stride, p_stride, v, n, corr ? corr + r : NULL, \
                  r == 0 ? pf : NULL)
  for (; r + 4 <= rows; r += 4) ATT_ACC(4);
  switch (rows - r) {
    case 3: ATT_ACC(3); break;
    case 2: ATT_ACC(2); break;
    case 1: ATT_ACC(1); break;
    default: break;
  }
#undef ATT_ACC
}

FERI_AVX2 static void accumulate_avx2(float *o, int64_t o_stride, int64_t rows, int64_t dv,
                                      const float *p, int64_t p_stride, const feri_kv_rows *v,
                                      int64_t n, const float *corr, const feri_att_pf *pf) {
  if (v->dim_stride != v->es || dv % 8 != 0) {
    feri_att_accumulate_ref(o, o_stride, rows, dv, p, p_stride, v, n, corr, pf);
    return;
  }
  switch (v->dtype) {
    case FER_DTYPE_F32: accumulate_dt(FER_DTYPE_F32, o, o_stride, rows, dv, p, p_stride, v, n, corr, pf); break;
    case FER_DTYPE_F16: accumulate_dt(FER_DTYPE_F16, o, o_stride, rows, dv, p, p_stride, v, n, corr, pf); break;
    case FER_DTYPE_Q8_0: accumulate_dt(FER_DTYPE_Q8_0, o, o_stride, rows, dv, p, p_stride, v, n, corr, pf); break;
    default: accumulate_dt(FER_DTYPE_BF16, o, o_stride, rows, dv, p, p_stride, v, n, corr, pf); break;
  }
}

/* o[e] = fma(o[e], a, ob[e] * b), eight at a time. */
FERI_AVX2 static void merge_avx2(float *o, const float *ob, int64_t dv, float a, float b) {
  const __m256 av = _mm256_set1_ps(a), bv = _mm256_set1_ps(b);
  int64_t e = 0;
  for (; e + 8 <= dv; e += 8)
    _mm256_storeu_ps(o + e, _mm256_fmadd_ps(_mm256_loadu_ps(o + e), av, _mm256_mul_ps(_mm256_loadu_ps(ob + e), bv)));
  for (; e < dv; e++) o[e] = fmaf(o[e], a, ob[e] * b);
}

const feri_attention_ops feri_attention_ops_avx2 = {
    .scores = scores_avx2,
    .exp_shift = exp_shift_avx2,
    .row_max = row_max_avx2,
    .accumulate = accumulate_avx2,
    .merge = merge_avx2,
};

#endif
