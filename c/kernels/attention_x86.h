/* attention_x86.h: what the AVX2 and AVX-512 levels of fer_attention's inner loops share (see
 * attention.h): the second and third levels of the fixed lane tree for eight keys at once, the
 * end of exp_shift, and the prefetch of a later tile's rows. Include only from attention_avx2.c /
 * attention_avx512.c. */
#ifndef FERI_KERNELS_ATTENTION_X86_H
#define FERI_KERNELS_ATTENTION_X86_H

#include <immintrin.h>
#include <stdint.h>

#include "kernels/attention.h"
#include "kernels/avx2_util.h"
#include "kernels/fexp.h"

/* The lanes of a (key j) and b (key j + 4) added across the halves: [a0+a4, a1+a5, a2+a6, a3+a7,
 * b0+b4, b1+b5, b2+b6, b3+b7], the first level of the fixed tree for two keys at once. */
FERI_AVX2 static FERI_INLINE __m256 halves_sum(__m256 a, __m256 b) {
  return _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
}

/* The rest of the tree for eight keys: x[i] = halves_sum(key i, key i + 4), i < 4, gives
 * [dot(key 0), ..., dot(key 7)] with each dot = ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)), bit for bit
 * lanes_sum's value, for 2.6 instructions per score instead of 5 and one store for eight. */
FERI_AVX2 static FERI_INLINE __m256 tree8(const __m256 x[4]) {
  /* per key: (l0+l4)+(l2+l6) and (l1+l5)+(l3+l7) */
  const __m256 y01 = _mm256_add_ps(_mm256_shuffle_ps(x[0], x[1], 0x44), _mm256_shuffle_ps(x[0], x[1], 0xee));
  const __m256 y23 = _mm256_add_ps(_mm256_shuffle_ps(x[2], x[3], 0x44), _mm256_shuffle_ps(x[2], x[3], 0xee));
  /* and their sum, keys in order */
  return _mm256_add_ps(_mm256_shuffle_ps(y01, y23, 0x88), _mm256_shuffle_ps(y01, y23, 0xdd));
}

/* The end of exp_shift at both levels: keys [j, n) one at a time (s[j] = fexp(s[j] - m) into lane
 * j mod 8 of the eight-lane sums), then the lanes combined; returns the sum. */
FERI_AVX2 static FERI_INLINE float exp_shift_finish(float *s, int64_t j, int64_t n, float m, __m256 lanes) {
  float l[8];
  _mm256_storeu_ps(l, lanes);
  for (; j < n; j++) {
    s[j] = feri_fexp(s[j] - m);
    l[j % 8] += s[j];
  }
  return feri_att_lanes8(l);
}

/* Prefetch hint for the later tile's rows: prefetcht2 (into L2 on Zen 4). They are needed one
 * tile step later (tens of microseconds), too early for L1: prefetcht0 and prefetchnta measured
 * 1.3-1.5x slower at 4k context, no prefetch 1.7x. */
enum { ATT_PF_HINT = 1 };

/* Lines [l0, l1) of the 64-byte lines from row; `last` adds the row's last byte (a row that is
 * not 64-byte aligned ends in one more line). */
FERI_AVX2 static FERI_INLINE void prefetch_span(const char *row, int64_t l0, int64_t l1, int last, int64_t bytes) {
  for (int64_t l = l0; l < l1; l++) __builtin_prefetch(row + 64 * l, 0, ATT_PF_HINT);
  if (last) __builtin_prefetch(row + bytes - 1, 0, ATT_PF_HINT);
}

/* Keys per block whose prefetch rows are listed at once (a longer call takes several blocks; the
 * accumulators' fma chains still run over the keys in order). */
enum { ATT_PF_ROWS = 32 };

/* Keys [j0, j0 + nb) (nb <= ATT_PF_ROWS) of an accumulate call as a call of their own: their V
 * rows in *vb, probabilities at *pb, the rescale factors in *cb (the first block only), and the
 * next nb rows of pf listed in pfr (the cursor moves on). Returns pfr, or NULL without pf. */
FERI_AVX2 static FERI_INLINE const char *const *key_block(const feri_kv_rows *v, const float *p, const float *corr,
                                                          const feri_att_pf *pf, feri_att_pf_cursor *cur, int64_t j0,
                                                          int64_t nb, feri_kv_rows *vb, const float **pb,
                                                          const float **cb, const char **pfr) {
  *vb = *v;
  vb->base += j0 * v->row_stride;
  *pb = p + j0;
  *cb = j0 == 0 ? corr : NULL;
  if (pf == NULL) return NULL;
  for (int64_t u = 0; u < nb; u++) pfr[u] = feri_att_pf_next(pf, cur);
  return pfr;
}

#endif
