/* attention_avx512.c: AVX-512F forms of fer_attention's two decode loops (scores and accumulate)
 * for f16 and bf16 K and V (f32 and Q8_0 take the AVX2 level's), the same operations in the same order as attention_portable.c (see
 * attention.h), so the same bits as the AVX2 level. feri_attention_ops_for gives this table at
 * the AVX2 level on a CPU with AVX-512F.
 *
 * Why: with 16-bit K and V, decode does twice the arithmetic per byte of f32 (every element is
 * widened, then used by every query row of the GQA group), and on Zen 4 the AVX2 loops were bound
 * by their loads and conversions, not by the memory: at 4k context f16 ran at 26-30 GB/s with K
 * and V in the L3 cache, under the 35 GB/s the read probe gets from DRAM, so the memory system's
 * stalls added to the arithmetic instead of hiding under it. 512-bit registers carry twice the
 * lanes per instruction and there are 32 of them: the query rows stay in registers, a value row
 * is read a whole line per pass. f32 K and V (half the arithmetic per byte) stay on the AVX2
 * loops: these forms measured slower there in the seq- and token-major layouts.
 *
 * Lane order: a dot product keeps element d of a row in lane d mod 8 (attention.h), so a 16-lane
 * register holds two keys, key u in lanes 0-7 and key u + 4 in lanes 8-15, the pairs the AVX2
 * tree combines first (halves_sum); accumulate is element by element and needs no care. */
#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>

#include "kernels/attention.h"
#include "kernels/attention_x86.h"
#include "kernels/avx2_util.h"
#include "kernels/fexp.h"

#define FERI_AVX512 __attribute__((target("avx2,fma,f16c,avx512f")))

/* Sixteen consecutive 16-bit elements (f16 or bf16) at p, widened to f32 exactly. */
FERI_AVX512 static FERI_INLINE __m512 load16(__m256i h, fer_dtype t) {
  if (t == FER_DTYPE_F16) return _mm512_cvtph_ps(h);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* Elements [e, e + 8) of rows lo and hi, widened: lo's in lanes 0-7, hi's in lanes 8-15. */
FERI_AVX512 static FERI_INLINE __m512 load_pair(const char *lo, const char *hi, fer_dtype t) {
  const __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)lo)),
                                            _mm_loadu_si128((const __m128i *)hi), 1);
  return load16(h, t);
}

/* tree8 of attention_x86.h for the four registers of scores8 (register u: key u in lanes 0-7, key
 * u + 4 in lanes 8-15), the same additions in 512-bit registers: the quarters of registers u and
 * u + 2 are gathered as [u 0-3, u+4 0-3, u+2 0-3, u+6 0-3] and [the 4-7 quarters], whose sum is
 * [x[u] | x[u + 2]] (x[u] = halves_sum(key u, key u + 4)); tree8's first in-lane level then runs
 * on [x[0] | x[2]] and [x[1] | x[3]] at once, giving [y01 | y23], and its last level on the two
 * halves. 13 instructions where tree8 after four halves_sum takes 21: the scores loop issues the
 * reduction of one block of keys between the fma chains of the next, on the shuffle pipes. */
FERI_AVX512 static FERI_INLINE __m256 tree8_pairs(const __m512 a[4]) {
  const __m512 x02 = _mm512_add_ps(_mm512_shuffle_f32x4(a[0], a[2], 0x88), _mm512_shuffle_f32x4(a[0], a[2], 0xdd));
  const __m512 x13 = _mm512_add_ps(_mm512_shuffle_f32x4(a[1], a[3], 0x88), _mm512_shuffle_f32x4(a[1], a[3], 0xdd));
  const __m512 y = _mm512_add_ps(_mm512_shuffle_ps(x02, x13, 0x44), _mm512_shuffle_ps(x02, x13, 0xee));
  const __m256 y01 = _mm512_castps512_ps256(y), y23 = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(y), 1));
  return _mm256_add_ps(_mm256_shuffle_ps(y01, y23, 0x88), _mm256_shuffle_ps(y01, y23, 0xdd));
}

/* Scores of keys 0..7 of k0 (rows rs bytes apart) for nr query rows (nr <= 4): register u of
 * row r runs the fma chains of keys u and u + 4, the row's q vector broadcast to both halves and
 * kept in a register for the four keys. The nr x 4 chains hide the fma latency; each K vector is
 * widened once for all the rows. Then per row the AVX2 tree: the 128-bit quarters [u 0-3, u 4-7,
 * u+4 0-3, u+4 4-7] added as halves_sum(key u, key u + 4) does. The rows of pfr (when not NULL)
 * are prefetched after the arithmetic. */
FERI_AVX512 static FERI_INLINE void scores8(const fer_dtype t, const int nr, const float *q, int64_t q_stride,
                                            int64_t d, const char *k0, int64_t rs, float scale, float *s,
                                            int64_t s_stride, const char *const *pfr) {
  __m512 a[4][4];
#pragma GCC unroll 4
  for (int r = 0; r < nr; r++)
#pragma GCC unroll 4
    for (int u = 0; u < 4; u++) a[r][u] = _mm512_setzero_ps();
  for (int64_t e = 0; e < d; e += 8) {
    __m512 kv[4];
#pragma GCC unroll 4
    for (int u = 0; u < 4; u++) kv[u] = load_pair(k0 + u * rs + 2 * e, k0 + (u + 4) * rs + 2 * e, t);
#pragma GCC unroll 4
    for (int r = 0; r < nr; r++) {
      const __m256d q8 = _mm256_castps_pd(_mm256_loadu_ps(q + r * q_stride + e));
      const __m512 qv = _mm512_castpd_ps(_mm512_broadcast_f64x4(q8)); /* the 8 floats twice */
#pragma GCC unroll 4
      for (int u = 0; u < 4; u++) a[r][u] = _mm512_fmadd_ps(qv, kv[u], a[r][u]);
    }
  }
  if (pfr != NULL) {
    const int64_t bytes = 2 * d;
    for (int u = 0; u < 8; u++) prefetch_span(pfr[u], 0, (bytes + 63) / 64, bytes % 64 != 0, bytes);
  }
  const __m256 sc = _mm256_set1_ps(scale);
#pragma GCC unroll 4
  for (int r = 0; r < nr; r++) _mm256_storeu_ps(s + r * s_stride, _mm256_mul_ps(tree8_pairs(a[r]), sc));
}

/* nr rows against the first n / 8 * 8 keys, eight at a time; returns how many it did. */
FERI_AVX512 static FERI_INLINE int64_t scores_rows(const fer_dtype t, const int nr, const float *q, int64_t q_stride,
                                                   int64_t d, const feri_kv_rows *k, int64_t n, float scale,
                                                   float *s, int64_t s_stride, const feri_att_pf *pf) {
  feri_att_pf_cursor cur = {NULL, 0};
  if (pf != NULL) cur = feri_att_pf_at(pf, 0);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const char *pfr[8];
    if (pf != NULL)
      for (int u = 0; u < 8; u++) pfr[u] = feri_att_pf_next(pf, &cur);
    scores8(t, nr, q, q_stride, d, k->base + j * k->row_stride, k->row_stride, scale, s + j, s_stride,
            pf != NULL ? pfr : NULL);
  }
  return j;
}

FERI_AVX512 static FERI_INLINE int64_t scores_dt(const fer_dtype t, const int nr, const float *q, int64_t q_stride,
                                                 int64_t d, const feri_kv_rows *k, int64_t n, float scale, float *s,
                                                 int64_t s_stride, const feri_att_pf *pf) {
  switch (nr) {
    case 4: return scores_rows(t, 4, q, q_stride, d, k, n, scale, s, s_stride, pf);
    case 3: return scores_rows(t, 3, q, q_stride, d, k, n, scale, s, s_stride, pf);
    case 2: return scores_rows(t, 2, q, q_stride, d, k, n, scale, s, s_stride, pf);
    default: return scores_rows(t, 1, q, q_stride, d, k, n, scale, s, s_stride, pf);
  }
}

/* Row blocks of up to four; the keys past the last multiple of eight go to the AVX2 level, with
 * the prefetch rows that belong to them. */
FERI_AVX512 static void scores_avx512(const float *q, int64_t q_stride, int64_t rows, int64_t d,
                                      const feri_kv_rows *k, int64_t n, float scale, float *s,
                                      int64_t s_stride, const feri_att_pf *pf) {
  if (k->dtype == FER_DTYPE_F32 || k->dtype == FER_DTYPE_Q8_0 || k->dim_stride != k->es || d % 8 != 0) {
    feri_attention_ops_avx2.scores(q, q_stride, rows, d, k, n, scale, s, s_stride, pf);
    return;
  }
  for (int64_t r = 0; r < rows; r += 4) {
    const int nr = rows - r < 4 ? (int)(rows - r) : 4;
    const feri_att_pf *f = r == 0 ? pf : NULL; /* the first block of rows prefetches */
    const float *qr = q + r * q_stride;
    float *sr = s + r * s_stride;
    const int64_t j = k->dtype == FER_DTYPE_F16 ? scores_dt(FER_DTYPE_F16, nr, qr, q_stride, d, k, n, scale, sr, s_stride, f)
                                                : scores_dt(FER_DTYPE_BF16, nr, qr, q_stride, d, k, n, scale, sr, s_stride, f);
    if (j < n) {
      feri_kv_rows rest = *k;
      rest.base += j * k->row_stride;
      feri_att_pf frest = f != NULL ? *f : (feri_att_pf){0};
      frest.first += j;
      feri_attention_ops_avx2.scores(qr, q_stride, nr, d, &rest, n - j, scale, sr + j, s_stride,
                                     f != NULL ? &frest : NULL);
    }
  }
}

/* Output dims [e0, e0 + 16w) of nr rows in nr x w registers, every key in order (each o element
 * is one fma chain over the keys); each V vector is widened once for all the rows. A pass reads
 * whole 64-byte lines of every row (w = 4: two lines), so a row's line is never needed again by a
 * later pass: no blocking of the keys for rows whose strides collide in the L1 sets (the AVX2
 * level's ATT_ACC_KB). Pass i of `passes` prefetches its share of the lines of each pf row. */
FERI_AVX512 static FERI_INLINE void accumulate_pass(const fer_dtype t, const int nr, const int w, float *o,
                                                    int64_t o_stride, int64_t e0, const float *p, int64_t p_stride,
                                                    const feri_kv_rows *v, int64_t n, const float *corr,
                                                    const char *const *pfr, int64_t l0, int64_t l1, int last,
                                                    int64_t bytes) {
  __m512 c[4][8];
#pragma GCC unroll 4
  for (int r = 0; r < nr; r++) {
    const __m512 cr = _mm512_set1_ps(corr != NULL ? corr[r] : 1.0f);
#pragma GCC unroll 8
    for (int u = 0; u < w; u++) {
      c[r][u] = _mm512_loadu_ps(o + r * o_stride + e0 + 16 * u);
      if (corr != NULL) c[r][u] = _mm512_mul_ps(c[r][u], cr);
    }
  }
  const char *row = v->base + 2 * e0;
  for (int64_t j = 0; j < n; j++, row += v->row_stride) {
    if (pfr != NULL) prefetch_span(pfr[j], l0, l1, last, bytes);
    __m512 vv[8];
#pragma GCC unroll 8
    for (int u = 0; u < w; u++) vv[u] = load16(_mm256_loadu_si256((const __m256i *)(row + 32 * u)), t);
#pragma GCC unroll 4
    for (int r = 0; r < nr; r++) {
      const __m512 pj = _mm512_set1_ps(p[r * p_stride + j]);
#pragma GCC unroll 8
      for (int u = 0; u < w; u++) c[r][u] = _mm512_fmadd_ps(pj, vv[u], c[r][u]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < nr; r++)
#pragma GCC unroll 8
    for (int u = 0; u < w; u++) _mm512_storeu_ps(o + r * o_stride + e0 + 16 * u, c[r][u]);
}

/* All dv dims (a multiple of 16) of nr rows: passes of w registers (8 for up to two rows, 4 for
 * three or four: nr x w accumulators plus w V vectors fit the 32 registers), then what is left in
 * one narrower pass. Keys go in blocks of ATT_PF_ROWS when there are rows to prefetch. */
FERI_AVX512 static FERI_INLINE void accumulate_rows(const fer_dtype t, const int nr, float *o, int64_t o_stride,
                                                    int64_t dv, const float *p, int64_t p_stride,
                                                    const feri_kv_rows *v, int64_t n, const float *corr,
                                                    const feri_att_pf *pf) {
  const int w = nr <= 2 ? 8 : 4;
  const int64_t bytes = 2 * dv, lines = (bytes + 63) / 64, passes = (dv + 16 * w - 1) / (16 * w);
  const int64_t kb = pf != NULL && n > ATT_PF_ROWS ? ATT_PF_ROWS : n;
  feri_att_pf_cursor cur = {NULL, 0};
  if (pf != NULL) cur = feri_att_pf_at(pf, 0);
  for (int64_t j0 = 0; j0 < n; j0 += kb) {
    const int64_t nb = n - j0 < kb ? n - j0 : kb;
    feri_kv_rows vb;
    const float *pb, *cb;
    const char *pfr[ATT_PF_ROWS];
    const char *const *pfb = key_block(v, p, corr, pf, &cur, j0, nb, &vb, &pb, &cb, pfr);
    int64_t e0 = 0, i = 0;
#define ATT_PASS(ww)                                                                                       \
  accumulate_pass(t, nr, ww, o, o_stride, e0, pb, p_stride, &vb, nb, cb, pfb, lines * i / passes,          \
                  lines * (i + 1) / passes, i == passes - 1 && bytes % 64 != 0, bytes)
    for (; e0 + 16 * w <= dv; e0 += 16 * w, i++) ATT_PASS(w);
    switch ((dv - e0) / 16) {
      case 7: ATT_PASS(7); break;
      case 6: ATT_PASS(6); break;
      case 5: ATT_PASS(5); break;
      case 4: ATT_PASS(4); break;
      case 3: ATT_PASS(3); break;
      case 2: ATT_PASS(2); break;
      case 1: ATT_PASS(1); break;
      default: break;
    }
#undef ATT_PASS
  }
}

FERI_AVX512 static FERI_INLINE void accumulate_dt(const fer_dtype t, float *o, int64_t o_stride, int64_t rows,
                                                  int64_t dv, const float *p, int64_t p_stride,
                                                  const feri_kv_rows *v, int64_t n, const float *corr,
                                                  const feri_att_pf *pf) {
  for (int64_t r = 0; r < rows; r += 4) {
    const feri_att_pf *f = r == 0 ? pf : NULL; /* the first block of rows prefetches */
    float *orr = o + r * o_stride;
    const float *pr = p + r * p_stride, *cr = corr != NULL ? corr + r : NULL;
    switch (rows - r < 4 ? rows - r : 4) {
      case 4: accumulate_rows(t, 4, orr, o_stride, dv, pr, p_stride, v, n, cr, f); break;
      case 3: accumulate_rows(t, 3, orr, o_stride, dv, pr, p_stride, v, n, cr, f); break;
      case 2: accumulate_rows(t, 2, orr, o_stride, dv, pr, p_stride, v, n, cr, f); break;
      default: accumulate_rows(t, 1, orr, o_stride, dv, pr, p_stride, v, n, cr, f); break;
    }
  }
}

FERI_AVX512 static void accumulate_avx512(float *o, int64_t o_stride, int64_t rows, int64_t dv, const float *p,
                                          int64_t p_stride, const feri_kv_rows *v, int64_t n, const float *corr,
                                          const feri_att_pf *pf) {
  if (v->dtype == FER_DTYPE_F32 || v->dtype == FER_DTYPE_Q8_0 || v->dim_stride != v->es || dv % 16 != 0) {
    feri_attention_ops_avx2.accumulate(o, o_stride, rows, dv, p, p_stride, v, n, corr, pf);
    return;
  }
  if (v->dtype == FER_DTYPE_F16)
    accumulate_dt(FER_DTYPE_F16, o, o_stride, rows, dv, p, p_stride, v, n, corr, pf);
  else
    accumulate_dt(FER_DTYPE_BF16, o, o_stride, rows, dv, p, p_stride, v, n, corr, pf);
}

/* feri_fexp8 (fexp_avx2.h) on sixteen lanes: the same operations, the special cases blended at
 * the end in the same order, so every lane equals the scalar result bit for bit. */
FERI_AVX512 static FERI_INLINE __m512 fexp16(__m512 x) {
  const __m512 magic = _mm512_set1_ps(FERI_EXP_MAGIC);
  const __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(FERI_EXP_LOG2E), magic), magic);
  __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-FERI_EXP_LN2_HI), x);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(-FERI_EXP_LN2_LO), r);
  const __m512 z = _mm512_mul_ps(r, r);
  __m512 p = _mm512_set1_ps(FERI_EXP_C0);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(FERI_EXP_C1));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(FERI_EXP_C2));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(FERI_EXP_C3));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(FERI_EXP_C4));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(FERI_EXP_C5));
  const __m512 e = _mm512_add_ps(_mm512_fmadd_ps(p, z, r), _mm512_set1_ps(1.0f));
  const __m512 nc = _mm512_min_ps(_mm512_max_ps(n, _mm512_set1_ps(-150.0f)), _mm512_set1_ps(128.0f));
  const __m512i ni = _mm512_cvtps_epi32(nc);
  const __m512i n1 = _mm512_srai_epi32(ni, 1), n2 = _mm512_sub_epi32(ni, n1);
  const __m512i bias = _mm512_set1_epi32(127);
  const __m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, bias), 23));
  const __m512 s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n2, bias), 23));
  __m512 y = _mm512_mul_ps(_mm512_mul_ps(e, s1), s2);
  const __mmask16 in = _mm512_cmp_ps_mask(x, _mm512_set1_ps(FERI_EXP_LO), _CMP_GE_OQ) &
                       _mm512_cmp_ps_mask(x, _mm512_set1_ps(FERI_EXP_HI), _CMP_LE_OQ);
  if (in == 0xffff) return y;
  y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(FERI_EXP_HI), _CMP_GT_OQ), y, _mm512_set1_ps(INFINITY));
  y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(FERI_EXP_LO), _CMP_LT_OQ), y, _mm512_setzero_ps());
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y, x);
}

/* The AVX2 level's exp_shift sixteen keys at a time: the exponentials in one register, the
 * eight-lane sums (lane l: s[j], j mod 8 == l, in order of j) taking the low half, then the high
 * half. Softmax is a twentieth of decode's time at 4k context and half of it was the AVX2 fexp8. */
FERI_AVX512 static float exp_shift_avx512(float *s, int64_t n, float m) {
  const __m512 mv = _mm512_set1_ps(m);
  __m256 lanes = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m512 e = fexp16(_mm512_sub_ps(_mm512_loadu_ps(s + j), mv));
    _mm512_storeu_ps(s + j, e);
    lanes = _mm256_add_ps(lanes, _mm512_castps512_ps256(e));
    lanes = _mm256_add_ps(lanes, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1)));
  }
  if (j + 8 <= n) { /* the upper lanes are zeros: in range, never used */
    const __m256 x = _mm256_sub_ps(_mm256_loadu_ps(s + j), _mm512_castps512_ps256(mv));
    const __m256 e = _mm512_castps512_ps256(fexp16(_mm512_zextps256_ps512(x)));
    _mm256_storeu_ps(s + j, e);
    lanes = _mm256_add_ps(lanes, e);
    j += 8;
  }
  return exp_shift_finish(s, j, n, m, lanes);
}

/* The loops that are not per key and element (row maximum, merge) are the AVX2 level's. */
static float row_max_avx512(const float *s, int64_t n, float init) { return feri_attention_ops_avx2.row_max(s, n, init); }
static void merge_avx512(float *o, const float *ob, int64_t dv, float a, float b) {
  feri_attention_ops_avx2.merge(o, ob, dv, a, b);
}

const feri_attention_ops feri_attention_ops_avx512 = {
    .scores = scores_avx512,
    .exp_shift = exp_shift_avx512,
    .row_max = row_max_avx512,
    .accumulate = accumulate_avx512,
    .merge = merge_avx512,
};

#endif
