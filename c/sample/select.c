/* select.c: argmax and radix select. */
#include "sample/select.h"

#include <math.h>

#include "ferrite.h"

#if defined(__x86_64__)
#include <immintrin.h>

/* Pass 1 finds the maximum eight lanes at a time; pass 2 finds its first position. Two cheap
 * passes over data already in cache beat one pass that tracks indices per lane. */
__attribute__((target("avx2"))) static size_t argmax_avx2(const float *x, size_t n, int *has_nan) {
  size_t i = 0;
  float best = x[0];
  int nan = x[0] != x[0];
  if (n >= 32) {
    __m256 m0 = _mm256_loadu_ps(x), m1 = m0, m2 = m0, m3 = m0, un = _mm256_setzero_ps();
    for (; i + 32 <= n; i += 32) {
      const __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
      const __m256 v2 = _mm256_loadu_ps(x + i + 16), v3 = _mm256_loadu_ps(x + i + 24);
      m0 = _mm256_max_ps(m0, v0);
      m1 = _mm256_max_ps(m1, v1);
      m2 = _mm256_max_ps(m2, v2);
      m3 = _mm256_max_ps(m3, v3);
      /* NaN never wins max_ps, so it is caught separately: v != v only for NaN. */
      un = _mm256_or_ps(un, _mm256_or_ps(_mm256_cmp_ps(v0, v1, _CMP_UNORD_Q), _mm256_cmp_ps(v2, v3, _CMP_UNORD_Q)));
    }
    nan |= !_mm256_testz_ps(un, un);
    __m256 m = _mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3));
    float lanes[8];
    _mm256_storeu_ps(lanes, m);
    for (int l = 0; l < 8; l++) best = lanes[l] > best ? lanes[l] : best;
  }
  for (; i < n; i++) {
    nan |= x[i] != x[i];
    best = x[i] > best ? x[i] : best;
  }
  *has_nan = nan;
  if (nan) return 0;
  const __m256 vb = _mm256_set1_ps(best);
  size_t j = 0;
  for (; j + 8 <= n; j += 8) {
    int mask = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + j), vb, _CMP_EQ_OQ));
    if (mask) return j + (size_t)__builtin_ctz((unsigned)mask);
  }
  for (; j < n; j++)
    if (x[j] == best) return j;
  return 0; /* unreachable for non-NaN input */
}
#endif

static size_t argmax_portable(const float *x, size_t n, int *has_nan) {
  size_t best = 0;
  int nan = 0;
  for (size_t i = 0; i < n; i++) {
    nan |= x[i] != x[i];
    if (x[i] > x[best]) best = i;
  }
  *has_nan = nan;
  return nan ? 0 : best;
}

size_t feri_argmax(const float *x, size_t n, int *has_nan) {
  *has_nan = 0;
  if (n == 0) return 0;
  return feri_select_ops_auto()->argmax(x, n, has_nan);
}

/* Radix select, most significant digit first: 11, 11 and 10 bits. Each level histograms the
 * surviving keys, walks the bins from the top to the one holding the k-th largest, and keeps only
 * that bin's keys for the next level. Level 0 reads the floats (or the key list); later levels read
 * the (usually few) survivors in scratch. -inf has key 0x007fffff, alone in level-0 bin 3 (the rest
 * of that bin are negative NaNs, which callers exclude), so that bin counts the masked entries. */
static uint32_t kth_select(const float *x, const uint32_t *keys, size_t n, size_t k,
                           uint32_t *scratch) {
  static const int shifts[3] = {21, 10, 0};
  static const uint32_t masks[3] = {0x7ffu, 0x7ffu, 0x3ffu};
  enum { NEG_INF_BIN = 3 };
  uint32_t hist[2048];
  /* Level 0 counts into four interleaved histograms: logits are full of ties, and back-to-back
   * increments of one counter would serialise on store-to-load forwarding. */
  uint32_t h4[4][2048];
  memset(h4, 0, sizeof h4);
  size_t i = 0;
  if (x != NULL) {
    for (; i + 4 <= n; i += 4)
      for (int q = 0; q < 4; q++) h4[q][feri_float_key(x[i + q]) >> 21]++;
    for (; i < n; i++) h4[0][feri_float_key(x[i]) >> 21]++;
  } else {
    for (; i + 4 <= n; i += 4)
      for (int q = 0; q < 4; q++) h4[q][keys[i + q] >> 21]++;
    for (; i < n; i++) h4[0][keys[i] >> 21]++;
  }
  for (int b = 0; b < 2048; b++) hist[b] = h4[0][b] + h4[1][b] + h4[2][b] + h4[3][b];
  if (n - hist[NEG_INF_BIN] < k) return 0;
  const uint32_t *src = NULL;
  size_t count = n;
  uint32_t prefix = 0, prefix_mask = 0;
  for (int level = 0; level < 3; level++) {
    const int sh = shifts[level];
    const uint32_t m = masks[level];
    if (level > 0) {
      memset(hist, 0, sizeof hist);
      for (size_t i = 0; i < count; i++) hist[(src[i] >> sh) & m]++;
    }
    uint32_t bin = m;
    size_t above = 0;
    for (;; bin--) {
      if (above + hist[bin] >= k) break;
      above += hist[bin];
    }
    k -= above;
    prefix |= bin << sh;
    prefix_mask |= m << sh;
    if (level == 2) break;
    size_t w = 0;
    if (level == 0 && x != NULL) {
      for (size_t i = 0; i < count; i++) {
        uint32_t key = feri_float_key(x[i]);
        if ((key & prefix_mask) == prefix) scratch[w++] = key;
      }
    } else {
      /* In place from level 1 on: the write position never passes the read position. */
      const uint32_t *in = level == 0 ? keys : src;
      for (size_t i = 0; i < count; i++)
        if ((in[i] & prefix_mask) == prefix) scratch[w++] = in[i];
    }
    src = scratch;
    count = w;
    if (count == k) { /* all survivors are needed: the answer is their minimum */
      uint32_t lo = src[0];
      for (size_t i = 1; i < count; i++) lo = src[i] < lo ? src[i] : lo;
      return lo;
    }
  }
  return prefix;
}

uint32_t feri_kth_largest_key(const float *x, size_t n, size_t k, uint32_t *scratch) {
  return kth_select(x, NULL, n, k, scratch);
}

uint32_t feri_kth_largest_of_keys(const uint32_t *keys, size_t n, size_t k, uint32_t *scratch) {
  return kth_select(NULL, keys, n, k, scratch);
}

/* Sift-down for a min-heap of floats. */
static void heap_sift_down(float *h, size_t k, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < k && h[l] < h[m]) m = l;
    if (r < k && h[r] < h[m]) m = r;
    if (m == i) return;
    float t = h[i];
    h[i] = h[m];
    h[m] = t;
    i = m;
  }
}

static void heap_sift_up(float *h, size_t i) {
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (h[p] <= h[i]) return;
    float t = h[i];
    h[i] = h[p];
    h[p] = t;
    i = p;
  }
}

/* Offers x to a full heap: replaces the minimum when x is larger (an equal value cannot change the
 * k-th largest). */
static inline void heap_offer(float *h, size_t k, float x) {
  if (x > h[0]) {
    h[0] = x;
    heap_sift_down(h, k, 0);
  }
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) static void heap_scan_avx2(const float *x, size_t i, size_t n, float *h, size_t k) {
  __m256 thr = _mm256_set1_ps(h[0]);
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    int m = _mm256_movemask_ps(_mm256_cmp_ps(v, thr, _CMP_GT_OQ));
    if (m == 0) continue;
    while (m) {
      heap_offer(h, k, x[i + (size_t)__builtin_ctz((unsigned)m)]);
      m &= m - 1;
    }
    thr = _mm256_set1_ps(h[0]);
  }
  for (; i < n; i++) heap_offer(h, k, x[i]);
}
#endif

uint32_t feri_kth_largest_key_small(const float *x, size_t n, size_t k, float *h) {
  size_t filled = 0, i = 0;
  for (; i < n && filled < k; i++) /* the first k finite values fill the heap */
    if (x[i] != -INFINITY) {
      h[filled] = x[i];
      heap_sift_up(h, filled++);
    }
  if (filled < k) return 0; /* fewer than k finite values: keep them all */
  feri_select_ops_auto()->heap_scan(x, i, n, h, k);
  return feri_float_key(h[0]);
}

static void heap_scan_portable(const float *x, size_t i, size_t n, float *h, size_t k) {
  for (; i < n; i++) heap_offer(h, k, x[i]);
}

#if defined(__x86_64__)
static size_t mask_below_portable(float *x, size_t n, uint32_t lo_key, uint32_t *ids);

/* The key order is the float order for non-NaN values except that -0 < +0 as keys while -0 == +0 as
 * floats, so one float compare decides unless the threshold is a zero; then the key loop runs. */
__attribute__((target("avx2"))) static size_t mask_below_avx2_f(float *x, size_t n, float lo, uint32_t *ids);

static size_t mask_below_avx2(float *x, size_t n, uint32_t lo_key, uint32_t *ids) {
  const float lo = feri_key_float(lo_key);
  return lo == 0.0f ? mask_below_portable(x, n, lo_key, ids) : mask_below_avx2_f(x, n, lo, ids);
}

__attribute__((target("avx2"))) static size_t mask_below_avx2_f(float *x, size_t n, float lo, uint32_t *ids) {
  const __m256 vlo = _mm256_set1_ps(lo), ninf = _mm256_set1_ps(-INFINITY);
  size_t m = 0, i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 keep = _mm256_cmp_ps(v, vlo, _CMP_GE_OQ);
    _mm256_storeu_ps(x + i, _mm256_blendv_ps(ninf, v, keep));
    int bits = _mm256_movemask_ps(keep);
    while (bits) {
      ids[m++] = (uint32_t)(i + (size_t)__builtin_ctz((unsigned)bits));
      bits &= bits - 1;
    }
  }
  for (; i < n; i++) {
    if (x[i] >= lo) ids[m++] = (uint32_t)i;
    else x[i] = -INFINITY;
  }
  return m;
}
#endif

static size_t mask_below_portable(float *x, size_t n, uint32_t lo_key, uint32_t *ids) {
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    const uint32_t keep = feri_float_key(x[i]) >= lo_key;
    ids[m] = (uint32_t)i;
    m += keep;
    if (!keep) x[i] = -INFINITY;
  }
  return m;
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) static size_t count_nonfinite_avx2(const float *x, size_t n) {
  const __m256i absmask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  __m256i acc = _mm256_setzero_si256();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i u = _mm256_loadu_si256((const __m256i *)(x + i));
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, absmask), inf);
    const __m256i pinf = _mm256_cmpeq_epi32(u, inf);
    acc = _mm256_sub_epi32(acc, _mm256_or_si256(nan, pinf)); /* -1 per hit */
  }
  uint32_t lanes[8];
  _mm256_storeu_si256((__m256i *)lanes, acc);
  size_t count = 0;
  for (int l = 0; l < 8; l++) count += lanes[l];
  for (; i < n; i++) count += (x[i] != x[i]) | (x[i] == INFINITY);
  return count;
}

__attribute__((target("avx2"))) static void divide_avx2(float *x, size_t n, float d) {
  const __m256 vd = _mm256_set1_ps(d);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_div_ps(_mm256_loadu_ps(x + i), vd));
  for (; i < n; i++) x[i] /= d;
}

__attribute__((target("avx2"))) static size_t collect_finite_avx2(const float *x, size_t n, uint32_t *ids) {
  const __m256 ninf = _mm256_set1_ps(-INFINITY);
  size_t m = 0, i = 0;
  for (; i + 8 <= n; i += 8) {
    int bits = 0xff & ~_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), ninf, _CMP_EQ_OQ));
    while (bits) {
      ids[m++] = (uint32_t)(i + (size_t)__builtin_ctz((unsigned)bits));
      bits &= bits - 1;
    }
  }
  for (; i < n; i++)
    if (x[i] != -INFINITY) ids[m++] = (uint32_t)i;
  return m;
}
#endif

static size_t count_nonfinite_portable(const float *x, size_t n) {
  size_t count = 0;
  for (size_t i = 0; i < n; i++) count += (x[i] != x[i]) | (x[i] == INFINITY);
  return count;
}

static void divide_portable(float *x, size_t n, float d) {
  for (size_t i = 0; i < n; i++) x[i] /= d;
}

static size_t collect_finite_portable(const float *x, size_t n, uint32_t *ids) {
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (x[i] != -INFINITY) ids[m++] = (uint32_t)i;
  return m;
}

static const feri_select_ops feri_select_portable = {
    .argmax = argmax_portable,
    .heap_scan = heap_scan_portable,
    .mask_below = mask_below_portable,
    .count_nonfinite = count_nonfinite_portable,
    .divide = divide_portable,
    .collect_finite = collect_finite_portable,
};

#if defined(__x86_64__)
static const feri_select_ops feri_select_avx2 = {
    .argmax = argmax_avx2,
    .heap_scan = heap_scan_avx2,
    .mask_below = mask_below_avx2,
    .count_nonfinite = count_nonfinite_avx2,
    .divide = divide_avx2,
    .collect_finite = collect_finite_avx2,
};
#endif

const feri_select_ops *feri_select_ops_for(fer_isa isa) {
#if defined(__x86_64__)
  if (isa == FER_ISA_AVX2 || isa == FER_ISA_AVX512) return &feri_select_avx2;
#else
  (void)isa;
#endif
  return &feri_select_portable;
}

const feri_select_ops *feri_select_ops_auto(void) {
#if defined(__x86_64__)
  if (fer_cpu_features() & FER_CPU_FEATURE_AVX2) return &feri_select_avx2;
#endif
  return &feri_select_portable;
}

size_t feri_mask_below(float *x, size_t n, uint32_t lo_key, uint32_t *ids) {
  return feri_select_ops_auto()->mask_below(x, n, lo_key, ids);
}

size_t feri_count_nonfinite(const float *x, size_t n) { return feri_select_ops_auto()->count_nonfinite(x, n); }

void feri_divide(float *x, size_t n, float d) { feri_select_ops_auto()->divide(x, n, d); }

size_t feri_collect_finite(const float *x, size_t n, uint32_t *ids) {
  return feri_select_ops_auto()->collect_finite(x, n, ids);
}
