/* matmul_avx2.c: the AVX2/FMA/F16C level of fer_matmul. Same chains as matmul_portable.c (one
 * fma per k, k ascending, per output element), only wider: vectors run across output columns or
 * rows, never across k, so no partial sums are ever re-associated. */
#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/avx2_util.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"


/* In-register transpose: r[i] lane j <-> r[j] lane i. */
FERI_AVX2 static FERI_INLINE void transpose8(__m256 r[8]) {
  __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee);
  __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
  __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee);
  __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
  r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

FERI_AVX2 static void pack_quant_avx2(const feri_mm_b *b, int64_t k0, int64_t kc, int64_t n0, int64_t nc, float *dst);

/* Packing: B with unit stride along N copies rows of NR; B with unit stride along K (a [N, K]
 * weight) transposes 8 x 8 blocks in registers. Partial panels and other strides go through the
 * scalar packer, which produces the same values. */
FERI_AVX2 static void pack_b_avx2(const feri_mm_b *b, int64_t k0, int64_t kc, int64_t n0,
                                  int64_t nc, float *dst) {
  if (b->qbytes != 0) {
    pack_quant_avx2(b, k0, kc, n0, nc, dst);
    return;
  }
  const int64_t full = nc / FERI_MM_NR; /* complete panels */
  if (b->sn == b->es) {
    /* row by row across every panel: each row of B is read as one contiguous run; walking one
     * panel down K instead touches kc lines one row stride apart, which alias in L1 */
    const char *src = b->data + k0 * b->sk + n0 * b->sn;
    for (int64_t k = 0; k < kc; k++, src += b->sk)
      for (int64_t p = 0; p < full; p++) {
        float *row = dst + p * kc * FERI_MM_NR + k * FERI_MM_NR;
        const char *s = src + p * FERI_MM_NR * b->es;
        _mm256_storeu_ps(row, feri_load8(s, b->dtype));
        _mm256_storeu_ps(row + 8, feri_load8(s + 8 * b->es, b->dtype));
      }
  } else if (b->sk == b->es) {
    const int64_t kc8 = kc & ~(int64_t)7;
    for (int64_t p = 0; p < full; p++) {
      float *panel = dst + p * kc * FERI_MM_NR;
      for (int64_t half = 0; half < 2; half++) {
        const char *rows = b->data + k0 * b->sk + (n0 + p * FERI_MM_NR + half * 8) * b->sn;
        for (int64_t k = 0; k < kc8; k += 8) {
          __m256 r[8];
          for (int i = 0; i < 8; i++) r[i] = feri_load8(rows + i * b->sn + k * b->es, b->dtype);
          transpose8(r);
          for (int i = 0; i < 8; i++) _mm256_storeu_ps(panel + (k + i) * FERI_MM_NR + half * 8, r[i]);
        }
        for (int64_t k = kc8; k < kc; k++)
          for (int64_t j = 0; j < 8; j++)
            panel[k * FERI_MM_NR + half * 8 + j] =
                feri_mm_b_at(b, k0 + k, n0 + p * FERI_MM_NR + half * 8 + j);
      }
    }
  } else {
    feri_pack_b_strided(b, k0, kc, n0, nc, dst);
    return;
  }
  if (full * FERI_MM_NR < nc) {
    /* the last, partial panel: pack it as a panel of its own */
    feri_mm_b tail = *b;
    tail.data = b->data + (n0 + full * FERI_MM_NR) * b->sn;
    feri_pack_b_strided(&tail, k0, kc, 0, nc - full * FERI_MM_NR, dst + full * kc * FERI_MM_NR);
  }
}

/* The 6 x 16 register tile; MR rows are written only while r < mr, which the compiler resolves
 * at each call site below, so a short tile costs only its own rows. */
#define ROW_DECL(r) __m256 c##r##a = _mm256_setzero_ps(), c##r##b = _mm256_setzero_ps();
#define ROW_LOAD(r)                                      \
  if (mr > r && !first) {                                \
    c##r##a = _mm256_loadu_ps(c + r * ldc);              \
    c##r##b = _mm256_loadu_ps(c + r * ldc + 8);          \
  }
#define ROW_FMA(r)                                       \
  if (mr > r) {                                          \
    const __m256 av = _mm256_broadcast_ss(a##r + k);        \
    c##r##a = _mm256_fmadd_ps(av, b0, c##r##a);          \
    c##r##b = _mm256_fmadd_ps(av, b1, c##r##b);          \
  }
#define ROW_STORE(r)                                     \
  if (mr > r) {                                          \
    _mm256_storeu_ps(c + r * ldc, c##r##a);              \
    _mm256_storeu_ps(c + r * ldc + 8, c##r##b);          \
  }

FERI_AVX2 static FERI_INLINE void micro_body(int64_t kc, const float *a, int64_t lda, const float *b,
                                             float *c, int64_t ldc, const int mr, int first) {
  /* rows past mr are never read; their pointers stay at row 0 rather than past the matrix */
  const float *a0 = a, *a1 = mr > 1 ? a + lda : a, *a2 = mr > 2 ? a + 2 * lda : a,
              *a3 = mr > 3 ? a + 3 * lda : a, *a4 = mr > 4 ? a + 4 * lda : a,
              *a5 = mr > 5 ? a + 5 * lda : a;
  ROW_DECL(0) ROW_DECL(1) ROW_DECL(2) ROW_DECL(3) ROW_DECL(4) ROW_DECL(5)
  ROW_LOAD(0) ROW_LOAD(1) ROW_LOAD(2) ROW_LOAD(3) ROW_LOAD(4) ROW_LOAD(5)
  for (int64_t k = 0; k < kc; k++) {
    const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
    ROW_FMA(0) ROW_FMA(1) ROW_FMA(2) ROW_FMA(3) ROW_FMA(4) ROW_FMA(5)
    b += FERI_MM_NR;
  }
  ROW_STORE(0) ROW_STORE(1) ROW_STORE(2) ROW_STORE(3) ROW_STORE(4) ROW_STORE(5)
}

FERI_AVX2 static void micro_avx2(int64_t kc, const float *a, int64_t lda, const float *b, float *c,
                                 int64_t ldc, int mr, int first) {
  switch (mr) {
    case 1: micro_body(kc, a, lda, b, c, ldc, 1, first); break;
    case 2: micro_body(kc, a, lda, b, c, ldc, 2, first); break;
    case 3: micro_body(kc, a, lda, b, c, ldc, 3, first); break;
    case 4: micro_body(kc, a, lda, b, c, ldc, 4, first); break;
    case 5: micro_body(kc, a, lda, b, c, ldc, 5, first); break;
    default: micro_body(kc, a, lda, b, c, ldc, 6, first); break;
  }
}

/* GEMV over B [K, N] with unit stride along N: vectors across columns, k sequential. Each step
 * reads GEMV_KN_ROWS rows of the task's columns and keeps the partial sums in y between steps.
 * The driver gives each task a wide band of columns (one per thread, see gemv_kn_cols in
 * matmul.c) so that each row is one long contiguous run the prefetchers follow: runs of 512
 * columns (1-2 KiB, then a jump of a whole row) reached 46-61% of the read bandwidth at
 * 1x4096x14336. A band's sums (28 KiB there) do not stay in L1 beside the streaming rows, so
 * eight rows per step halve their trips to L2 against four: 16-bit bands went from 84-86% to
 * 99-100% of the read probe (12 rows: the same; 16: 82-92%, the broadcasts no longer fit in
 * registers). The dtype is a constant in each instantiation: no per-element branch. */
enum { GEMV_KN_ROWS = 8 };

FERI_AVX2 static FERI_INLINE void gemv_kn_body(const fer_dtype t, const float *x, int64_t K,
                                               const feri_mm_b *b, int64_t n0, int64_t nc, float *y) {
  for (int64_t j = 0; j < nc; j++) y[j] = 0.0f;
  const int64_t nvec = nc & ~(int64_t)7;
  const int64_t es = b->es, sk = b->sk;
  int64_t k = 0;
  for (; k + GEMV_KN_ROWS <= K; k += GEMV_KN_ROWS) {
    const char *r0 = b->data + k * sk + n0 * es;
    __m256 xk[GEMV_KN_ROWS];
#pragma GCC unroll 8
    for (int i = 0; i < GEMV_KN_ROWS; i++) xk[i] = _mm256_broadcast_ss(x + k + i);
    for (int64_t v = 0; v < nvec; v += 8) {
      __m256 acc = _mm256_loadu_ps(y + v);
#pragma GCC unroll 8
      for (int i = 0; i < GEMV_KN_ROWS; i++)
        acc = _mm256_fmadd_ps(xk[i], feri_load8(r0 + i * sk + v * es, t), acc);
      _mm256_storeu_ps(y + v, acc);
    }
  }
  for (; k < K; k++) {
    const char *r0 = b->data + k * sk + n0 * es;
    const __m256 x0 = _mm256_broadcast_ss(x + k);
    for (int64_t v = 0; v < nvec; v += 8)
      _mm256_storeu_ps(y + v, _mm256_fmadd_ps(x0, feri_load8(r0 + v * es, t), _mm256_loadu_ps(y + v)));
  }
  for (int64_t j = nvec; j < nc; j++)
    for (int64_t kk = 0; kk < K; kk++) y[j] = fmaf(x[kk], feri_mm_b_at(b, kk, n0 + j), y[j]);
}

FERI_AVX2 static void gemv_kn_avx2(const float *x, int64_t K, const feri_mm_b *b, int64_t n0,
                                   int64_t nc, float *y) {
  switch (b->dtype) {
    case FER_DTYPE_F32: gemv_kn_body(FER_DTYPE_F32, x, K, b, n0, nc, y); break;
    case FER_DTYPE_F16: gemv_kn_body(FER_DTYPE_F16, x, K, b, n0, nc, y); break;
    default: gemv_kn_body(FER_DTYPE_BF16, x, K, b, n0, nc, y); break;
  }
}

/* GEMV over B with unit stride along K (rows of an [N, K] weight). A lane holds one row, so eight
 * rows form a group whose chain takes eight k steps per 8 x 8 tile: 8 dependent FMAs, 2 elements
 * a cycle, which is below a core's share of DRAM for 2-byte weights. So groups run in pairs (two
 * independent chains, 16 rows streaming), with the second group NK_LAG bytes behind the first:
 * at the same k the two groups' lines all fall in one L1 set whenever the row stride is a
 * multiple of 4 KiB, and 16 rows read in lockstep that way ran at 2/3 of the rate of 8 rows in a
 * plain-load test (0.9 of it with the lag). Three or four groups read at a third to half of that
 * rate, lag or not (more streams than the prefetchers follow), so it stays at two. Each chain
 * still walks its own k from 0 upwards: the lag only changes when, never in what order. */
enum { NK_LAG = 1024 };

/* 16-bit rows: p[j] holds steps 2j and 2j + 1 of the eight rows, per 128-bit lane rows 0-3 (lane
 * 0) or 4-7 (lane 1), step 2j in the low 64 bits and 2j + 1 in the high 64 bits. Rows i and i + 4
 * share a register from the load on, so two rounds of unpacks do it: 12 shuffles for 64 values,
 * where widening first and transposing f32 took 8 conversions and 24 shuffles. */
FERI_AVX2 static FERI_INLINE void nk16_pairs(const char *rows, int64_t sn, int64_t k, __m256i p[4]) {
  __m256i q[4];
#pragma GCC unroll 4
  for (int i = 0; i < 4; i++)
    q[i] = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(rows + i * sn + 2 * k))),
        _mm_loadu_si128((const __m128i *)(rows + (i + 4) * sn + 2 * k)), 1);
  const __m256i a = _mm256_unpacklo_epi16(q[0], q[1]), b = _mm256_unpackhi_epi16(q[0], q[1]);
  const __m256i c = _mm256_unpacklo_epi16(q[2], q[3]), d = _mm256_unpackhi_epi16(q[2], q[3]);
  p[0] = _mm256_unpacklo_epi32(a, c);
  p[1] = _mm256_unpackhi_epi32(a, c);
  p[2] = _mm256_unpacklo_epi32(b, d);
  p[3] = _mm256_unpackhi_epi32(b, d);
}

/* The tile of eight rows (rows + i * sn) at steps k .. k+7: f32 transposed in registers (f[s]
 * lane i = row i at k + s), 16-bit as nk16_pairs leaves it. */
FERI_AVX2 static FERI_INLINE void nk_tile_load(const fer_dtype t, const char *rows, int64_t sn,
                                               int64_t k, __m256 f[8], __m256i p[4]) {
  if (t == FER_DTYPE_F32) {
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) f[i] = _mm256_loadu_ps((const float *)(rows + i * sn) + k);
    transpose8(f);
  } else {
    nk16_pairs(rows, sn, k, p);
  }
}

/* Lane i = row i at step k + s, widened exactly: bf16 by moving each 16 bits up (an unpack with
 * zero picks the step's 64 bits in both lanes and widens them at once), f16 by F16C after one
 * permute brings the step's rows 0-3 and 4-7 into one 128-bit half. */
FERI_AVX2 static FERI_INLINE __m256 nk_tile_step(const fer_dtype t, const __m256 f[8], const __m256i p[4],
                                                 int s) {
  if (t == FER_DTYPE_F32) return f[s];
  const __m256i v = p[s / 2];
  if (t == FER_DTYPE_BF16) {
    const __m256i z = _mm256_setzero_si256();
    return _mm256_castsi256_ps(s % 2 ? _mm256_unpackhi_epi16(z, v) : _mm256_unpacklo_epi16(z, v));
  }
  const __m256i w = _mm256_permute4x64_epi64(v, 0xd8); /* step 2j in lane 0, 2j + 1 in lane 1 */
  return _mm256_cvtph_ps(s % 2 ? _mm256_extracti128_si256(w, 1) : _mm256_castsi256_si128(w));
}

/* Eight steps of one group. */
FERI_AVX2 static FERI_INLINE __m256 nk_group_steps(const fer_dtype t, const float *x, const char *rows,
                                                   int64_t sn, int64_t k, __m256 acc) {
  __m256 f[8];
  __m256i p[4];
  nk_tile_load(t, rows, sn, k, f, p);
#pragma GCC unroll 8
  for (int s = 0; s < 8; s++) acc = _mm256_fmadd_ps(_mm256_broadcast_ss(x + k + s), nk_tile_step(t, f, p, s), acc);
  return acc;
}

/* Eight steps of each group of a pair, group 0 at k0 and group 1 at k1; the FMAs alternate so
 * that both chains are in flight. */
FERI_AVX2 static FERI_INLINE void nk_pair_steps(const fer_dtype t, const float *x, const char *r0,
                                                const char *r1, int64_t sn, int64_t k0, int64_t k1,
                                                __m256 *a0, __m256 *a1) {
  __m256 f0[8], f1[8];
  __m256i p0[4], p1[4];
  nk_tile_load(t, r0, sn, k0, f0, p0);
  nk_tile_load(t, r1, sn, k1, f1, p1);
#pragma GCC unroll 8
  for (int s = 0; s < 8; s++) {
    *a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(x + k0 + s), nk_tile_step(t, f0, p0, s), *a0);
    *a1 = _mm256_fmadd_ps(_mm256_broadcast_ss(x + k1 + s), nk_tile_step(t, f1, p1, s), *a1);
  }
}

/* The steps past the last full tile, per lane, then the stores. */
FERI_AVX2 static void gemv_nk_finish(const float *x, int64_t K, int64_t K8, const feri_mm_b *b,
                                     int64_t n, __m256 acc, float *y) {
  float lane[8];
  _mm256_storeu_ps(lane, acc);
  for (int i = 0; i < 8; i++) {
    for (int64_t k = K8; k < K; k++) lane[i] = fmaf(x[k], feri_mm_b_at(b, k, n + i), lane[i]);
    y[i] = lane[i];
  }
}

/* Each 64 bytes of progress, the pair prefetches the line NK_PREFETCH bytes ahead in its 16 rows
 * into L2 (while that is still in the row): 16 rows are more than the hardware prefetchers keep
 * far enough ahead of a loop this dense. Measured at 1x4096x14336 against the same rounds' read
 * probe: bf16 76% -> 83%, f32 90% -> 93% (83% -> 95% in rounds where the probe ran at 50 GB/s),
 * f16 +1-2 points; from L2 the prefetches cost f32 a fifth of its rate, which stays above what
 * DRAM delivers. Prefetching into L1 (T0) was slower: a pair's lines at one offset share two L1
 * sets. */
enum { NK_PREFETCH = 2048 };

/* Pairs of groups from n0 on (returns the rows done): the pair's first group ("lead") at step k,
 * its second ("trail") lag steps behind. When the lead has finished its row, the next pair's lead
 * starts at step 0 beside the trail's last lag steps, so only the first and last lag steps of a
 * task run one chain alone; a pair that started and ended on its own ran one chain for 2 x 512 of
 * 16-bit rows of 4096 steps (12% more time where the chains are the limit). */
FERI_AVX2 static FERI_INLINE int64_t gemv_nk_pairs(const fer_dtype t, const float *x, int64_t K,
                                                   const feri_mm_b *b, int64_t n0, int64_t nc,
                                                   float *y) {
  const int64_t sn = b->sn, K8 = K & ~(int64_t)7;
  const int64_t pairs = nc / 16;
  if (pairs == 0) return 0;
  const int64_t es = t == FER_DTYPE_F32 ? 4 : 2, ahead = NK_PREFETCH / es, line = 64 / es;
  /* a short K gets a short lag: solo steps run one chain at a time */
  int64_t lag = NK_LAG / es;
  if (lag > K8 / 4) lag = K8 / 4;
  lag &= ~(int64_t)7;
  const char *lead = b->data + n0 * sn;
  __m256 a_lead = _mm256_setzero_ps(), a_trail = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k < lag; k += 8) a_lead = nk_group_steps(t, x, lead, sn, k, a_lead);
  for (int64_t q = 0; q < pairs; q++) {
    const char *trail = lead + 8 * sn;
    for (k = lag; k < K8; k += 8) {
      if ((k & (line - 1)) == 0 && k + ahead < K8) {
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) {
          _mm_prefetch(lead + i * sn + (k + ahead) * es, _MM_HINT_T1);
          _mm_prefetch(trail + i * sn + (k - lag + ahead) * es, _MM_HINT_T1);
        }
      }
      nk_pair_steps(t, x, lead, trail, sn, k, k - lag, &a_lead, &a_trail);
    }
    gemv_nk_finish(x, K, K8, b, n0 + 16 * q, a_lead, y + 16 * q);
    /* the trail's last lag steps, beside the next pair's first */
    if (q + 1 < pairs) {
      lead = trail + 8 * sn;
      a_lead = _mm256_setzero_ps();
      for (k = 0; k < lag; k += 8)
        nk_pair_steps(t, x, lead, trail, sn, k, K8 - lag + k, &a_lead, &a_trail);
    } else {
      for (k = K8 - lag; k < K8; k += 8) a_trail = nk_group_steps(t, x, trail, sn, k, a_trail);
    }
    gemv_nk_finish(x, K, K8, b, n0 + 16 * q + 8, a_trail, y + 16 * q + 8);
    a_trail = _mm256_setzero_ps();
  }
  return 16 * pairs;
}

FERI_AVX2 static FERI_INLINE void gemv_nk_body(const fer_dtype t, const float *x, int64_t K,
                                               const feri_mm_b *b, int64_t n0, int64_t nc, float *y) {
  const int64_t K8 = K & ~(int64_t)7;
  int64_t j = gemv_nk_pairs(t, x, K, b, n0, nc, y);
  for (; j + 8 <= nc; j += 8) {
    const char *rows = b->data + (n0 + j) * b->sn;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t k = 0; k < K8; k += 8) acc = nk_group_steps(t, x, rows, b->sn, k, acc);
    gemv_nk_finish(x, K, K8, b, n0 + j, acc, y + j);
  }
  if (j < nc) feri_gemv_strided(x, K, b, n0 + j, nc - j, y + j);
}

/* Scale of a block, as feri_qblock_scale (F16C's conversion equals feri_f16_to_f32). */
FERI_AVX2 static FERI_INLINE float qscale(const fer_dtype t, const uint8_t *blk) {
  if (t == FER_DTYPE_MXFP4) return feri_e8m0_to_f32(blk[0]);
  uint16_t h;
  memcpy(&h, blk, sizeof h);
  return _cvtsh_ss(h);
}

/* Bytes 0..15 of eight rows (r[i] row i) transposed so that byte position p of all eight rows
 * lands at out + 8 p (row i at out[8 p + i]). */
FERI_AVX2 static FERI_INLINE void transpose_bytes_8x16(const __m128i r[8], uint8_t out[128]) {
  __m128i t[8], u[8];
  for (int i = 0; i < 4; i++) {
    t[2 * i] = _mm_unpacklo_epi8(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm_unpackhi_epi8(r[2 * i], r[2 * i + 1]);
  }
  for (int h = 0; h < 2; h++) { /* rows 0-3 from t[0..3], rows 4-7 from t[4..7] */
    u[4 * h + 0] = _mm_unpacklo_epi16(t[4 * h + 0], t[4 * h + 2]);
    u[4 * h + 1] = _mm_unpackhi_epi16(t[4 * h + 0], t[4 * h + 2]);
    u[4 * h + 2] = _mm_unpacklo_epi16(t[4 * h + 1], t[4 * h + 3]);
    u[4 * h + 3] = _mm_unpackhi_epi16(t[4 * h + 1], t[4 * h + 3]);
  }
  for (int q = 0; q < 4; q++) {
    _mm_storeu_si128((__m128i *)(out + 32 * q), _mm_unpacklo_epi32(u[q], u[4 + q]));
    _mm_storeu_si128((__m128i *)(out + 32 * q + 16), _mm_unpackhi_epi32(u[q], u[4 + q]));
  }
}

/* Integer code values by nibble for the 4-bit formats: MXFP4 stores 2 x E2M1 (feri_mxfp4_code2;
 * the scale is halved to match, exactly), Q4_0 the nibble minus 8, Q4_1 the nibble. The -0 of
 * E2M1 code 8 is +0 there: the chain starts at +0 and can never hold -0, so fma(x, -0, acc) and
 * fma(x, +0, acc) give the same bits (and the same NaN for infinite x). */
static const int8_t LUT_Q4_0[16] = {-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7};
static const int8_t LUT_Q4_1[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

enum { QG = 4 };          /* groups of eight rows in flight: four independent fma chains */
enum { QPREFETCH = 512 }; /* bytes ahead in each row */

/* Eight rows' scale (halved for MXFP4) and Q4_1 minimum of one block. */
FERI_AVX2 static FERI_INLINE void group_scales(const fer_dtype t, const uint8_t *blk, int64_t sn,
                                               __m256 *scale, __m256 *minv) {
  float sc[8], mn[8];
  for (int i = 0; i < 8; i++) {
    const uint8_t *b = blk + i * sn;
    sc[i] = t == FER_DTYPE_MXFP4 ? feri_e8m0_to_f32(b[0]) * 0.5f : qscale(t, b);
    if (t == FER_DTYPE_Q4_1) {
      uint16_t h;
      memcpy(&h, b + 2, sizeof h);
      mn[i] = _cvtsh_ss(h);
    }
  }
  *scale = _mm256_loadu_ps(sc);
  *minv = t == FER_DTYPE_Q4_1 ? _mm256_loadu_ps(mn) : _mm256_setzero_ps();
}

/* One k step for one group: eight rows' int8 codes (8 bytes at p) widened, scaled, chained. */
FERI_AVX2 static FERI_INLINE __m256 qstep(const fer_dtype t, __m128i codes, __m256 scale, __m256 minv,
                                          __m256 xk, __m256 acc) {
  __m256 w = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(codes)), scale);
  if (t == FER_DTYPE_Q4_1) w = _mm256_add_ps(w, minv);
  return _mm256_fmadd_ps(xk, w, acc);
}

/* gemv_nk for a block-quantized B, eight rows per vector lane set and QG groups at once. Per
 * block, each group's code bytes are transposed once at byte level (so position p of eight rows
 * is one 8-byte load), nibbles become integers through one vpshufb, and each k step is a widen,
 * a convert, a scale and the fma: the same values and the same chain as the dense path. */
FERI_AVX2 static FERI_INLINE void gemv_nk_quant_groups(const fer_dtype t, const int ng, const float *x,
                                                       int64_t K, const feri_mm_b *b,
                                                       const uint8_t *rows, float *y) {
  const int nibbles = t != FER_DTYPE_Q8_0;
  const int code_off = (int)feri_qblock_code_offset(t);
  const __m128i lut = _mm_loadu_si128((const __m128i *)(t == FER_DTYPE_MXFP4    ? feri_mxfp4_code2
                                                        : t == FER_DTYPE_Q4_0   ? LUT_Q4_0
                                                        : t == FER_DTYPE_IQ4_NL ? feri_iq4nl_values
                                                                                : LUT_Q4_1));
  const __m128i low4 = _mm_set1_epi8(0x0F);
  __m256 acc[QG];
  for (int g = 0; g < ng; g++) acc[g] = _mm256_setzero_ps();
  uint8_t tb[QG][256]; /* per group: 16 (nibble formats) or 32 (Q8_0) positions x 8 rows */
  __m256 scale[QG], minv[QG];
  for (int64_t k = 0; k < K; k += FERI_QBLOCK) {
    const int64_t boff = k / FERI_QBLOCK * b->qbytes;
    for (int g = 0; g < ng; g++) {
      const uint8_t *blk = rows + 8 * g * b->sn + boff;
      group_scales(t, blk, b->sn, &scale[g], &minv[g]);
      __m128i r[8];
      for (int i = 0; i < 8; i++) {
        /* 32 rows stream at once, more than the hardware prefetchers follow: fetch ahead */
        _mm_prefetch((const char *)(blk + i * b->sn + QPREFETCH), _MM_HINT_T0);
        r[i] = _mm_loadu_si128((const __m128i *)(blk + i * b->sn + code_off));
      }
      transpose_bytes_8x16(r, tb[g]);
      if (!nibbles) {
        for (int i = 0; i < 8; i++) r[i] = _mm_loadu_si128((const __m128i *)(blk + i * b->sn + code_off + 16));
        transpose_bytes_8x16(r, tb[g] + 128);
      }
    }
    if (nibbles) {
      for (int p = 0; p < 16; p++) { /* k + p: low nibbles */
        const __m256 xk = _mm256_broadcast_ss(x + k + p);
        /* unrolled so each group's accumulator stays in a register (a chain through memory
         * adds the store-forwarding latency to every step) */
#pragma GCC unroll 4
        for (int g = 0; g < ng; g++) {
          const __m128i c = _mm_shuffle_epi8(lut, _mm_and_si128(_mm_loadl_epi64((const __m128i *)(tb[g] + 8 * p)), low4));
          acc[g] = qstep(t, c, scale[g], minv[g], xk, acc[g]);
        }
      }
      for (int p = 0; p < 16; p++) { /* k + 16 + p: high nibbles */
        const __m256 xk = _mm256_broadcast_ss(x + k + 16 + p);
#pragma GCC unroll 4
        for (int g = 0; g < ng; g++) {
          const __m128i bytes = _mm_loadl_epi64((const __m128i *)(tb[g] + 8 * p));
          const __m128i c = _mm_shuffle_epi8(lut, _mm_and_si128(_mm_srli_epi16(bytes, 4), low4));
          acc[g] = qstep(t, c, scale[g], minv[g], xk, acc[g]);
        }
      }
    } else {
      for (int p = 0; p < 32; p++) {
        const __m256 xk = _mm256_broadcast_ss(x + k + p);
#pragma GCC unroll 4
        for (int g = 0; g < ng; g++)
          acc[g] = qstep(t, _mm_loadl_epi64((const __m128i *)(tb[g] + 8 * p)), scale[g], minv[g], xk, acc[g]);
      }
    }
  }
  for (int g = 0; g < ng; g++) _mm256_storeu_ps(y + 8 * g, acc[g]);
}

FERI_AVX2 static FERI_INLINE void gemv_nk_quant_body(const fer_dtype t, const float *x, int64_t K,
                                                     const feri_mm_b *b, int64_t n0, int64_t nc,
                                                     float *y) {
  int64_t j = 0;
  for (; j + 8 * QG <= nc; j += 8 * QG)
    gemv_nk_quant_groups(t, QG, x, K, b, (const uint8_t *)b->data + (n0 + j) * b->sn, y + j);
  for (; j + 8 <= nc; j += 8)
    gemv_nk_quant_groups(t, 1, x, K, b, (const uint8_t *)b->data + (n0 + j) * b->sn, y + j);
  if (j < nc) feri_gemv_strided(x, K, b, n0 + j, nc - j, y + j);
}

/* ---- formats with sub-block scales: Q5_0, Q5_1 (32) and the 256-element super-blocks ---------
 *
 * Value i of a block is c_i * s_j (+ o_j), j = i / sub (see quant.h): integer codes times the f32
 * scale of their sub-block, the scales computed once per block and row exactly as the decoder
 * does. Per block and group of eight rows, each row's codes come out of its packed bits 16 at a
 * time in a register (codes16) and are transposed at byte level into tb, so that position p of
 * the eight rows is one 8-byte load; each k step then widens, converts, scales (adds the offset)
 * and chains, the same values and chain as the dense path over fer_dequantize's output. */

/* Eight bytes of a 16-bit mask, spread: lane l of the result is 0xFF where bit l of bits is set. */
FERI_AVX2 static FERI_INLINE __m128i bits16_to_bytes(uint32_t bits) {
  const __m128i v = _mm_shuffle_epi8(_mm_cvtsi32_si128((int)bits),
                                     _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
  const __m128i m = _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
  return _mm_cmpeq_epi8(_mm_and_si128(v, m), m);
}

/* Lane l = 0xFF where bit `bit` of byte l of p (16 bytes) is set. */
FERI_AVX2 static FERI_INLINE __m128i bit_of_bytes(const uint8_t *p, int bit) {
  const __m128i m = _mm_set1_epi8((char)(1 << bit));
  return _mm_cmpeq_epi8(_mm_and_si128(_mm_loadu_si128((const __m128i *)p), m), m);
}

FERI_AVX2 static FERI_INLINE __m128i nibbles16(const uint8_t *p, int high) {
  const __m128i v = _mm_loadu_si128((const __m128i *)p);
  return _mm_and_si128(high ? _mm_srli_epi16(v, 4) : v, _mm_set1_epi8(0x0F));
}

/* The int8 codes of positions 16 c .. 16 c + 15 of one block (feri_qblock_codes' values). */
FERI_AVX2 static FERI_INLINE __m128i codes16(const fer_dtype t, const uint8_t *b, int c) {
  const __m128i three = _mm_set1_epi8(3);
  switch (t) {
    case FER_DTYPE_Q4_0: return _mm_sub_epi8(nibbles16(b + 2, c), _mm_set1_epi8(8));
    case FER_DTYPE_Q4_1: return nibbles16(b + 4, c);
    case FER_DTYPE_Q8_0: return _mm_loadu_si128((const __m128i *)(b + 2 + 16 * c));
    case FER_DTYPE_IQ4_NL:
      return _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)feri_iq4nl_values), nibbles16(b + 2, c));
    case FER_DTYPE_MXFP4:
      return _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)feri_mxfp4_code2), nibbles16(b + 1, c));
    case FER_DTYPE_Q5_0:
    case FER_DTYPE_Q5_1: {
      const int q5_1 = t == FER_DTYPE_Q5_1;
      uint32_t qh;
      memcpy(&qh, b + (q5_1 ? 4 : 2), sizeof qh);
      const __m128i hi = _mm_and_si128(bits16_to_bytes(qh >> (16 * c)), _mm_set1_epi8(16));
      const __m128i v = _mm_or_si128(nibbles16(b + (q5_1 ? 8 : 6), c), hi);
      return q5_1 ? v : _mm_sub_epi8(v, _mm_set1_epi8(16));
    }
    case FER_DTYPE_Q2_K: {
      const int h = c / 8, j = (c % 8) / 2, l0 = 16 * (c % 2);
      const __m128i v = _mm_loadu_si128((const __m128i *)(b + 16 + 32 * h + l0));
      return _mm_and_si128(_mm_srl_epi16(v, _mm_cvtsi32_si128(2 * j)), three);
    }
    case FER_DTYPE_Q3_K: {
      const int h = c / 8, j = (c % 8) / 2, l0 = 16 * (c % 2);
      const __m128i v = _mm_loadu_si128((const __m128i *)(b + 32 + 32 * h + l0));
      const __m128i q = _mm_and_si128(_mm_srl_epi16(v, _mm_cvtsi32_si128(2 * j)), three);
      /* minus 4 where the high bit is clear */
      return _mm_sub_epi8(q, _mm_andnot_si128(bit_of_bytes(b + l0, 4 * h + j), _mm_set1_epi8(4)));
    }
    case FER_DTYPE_Q4_K:
    case FER_DTYPE_Q5_K: {
      const int sub = c / 2, l0 = 16 * (c % 2);
      const uint8_t *qs = b + (t == FER_DTYPE_Q4_K ? 16 : 48);
      const __m128i v = nibbles16(qs + 32 * (sub / 2) + l0, sub & 1);
      if (t == FER_DTYPE_Q4_K) return v;
      return _mm_or_si128(v, _mm_and_si128(bit_of_bytes(b + 16 + l0, sub), _mm_set1_epi8(16)));
    }
    case FER_DTYPE_Q6_K: {
      const int h = c / 8, quarter = (c % 8) / 2, l0 = 16 * (c % 2);
      const __m128i lo = nibbles16(b + 64 * h + (quarter & 1 ? 32 : 0) + l0, quarter & 2);
      const __m128i qh = _mm_loadu_si128((const __m128i *)(b + 128 + 32 * h + l0));
      const __m128i hi = _mm_and_si128(_mm_srl_epi16(qh, _mm_cvtsi32_si128(2 * quarter)), three);
      return _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi8(32));
    }
    default: /* IQ4_XS */
      return _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)feri_iq4nl_values),
                              nibbles16(b + 8 + 16 * (c / 2), c & 1));
  }
}

/* The f16 at byte `off` of eight rows' blocks (blk + i * sn) as f32 lanes. */
FERI_AVX2 static FERI_INLINE __m256 f16_rows(const uint8_t *blk, int64_t sn, int off) {
  uint16_t h[8];
  for (int i = 0; i < 8; i++) memcpy(&h[i], blk + i * sn + off, sizeof h[0]);
  return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
}

/* Eight small unsigned integers (bytes of v, low 64 bits) as f32 lanes. */
FERI_AVX2 static FERI_INLINE __m256 u8x8_to_f32(__m128i v) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v));
}

/* A sub-block's scale and offset for eight rows: sv[j] lane i = scale j of row i (as
 * feri_qblock_scales computes it: one f32 product of the f16 super-scale and a small integer),
 * ov[j] the offset. Each row's integer scales come out of its packed bytes as one vector (lane =
 * sub-block), eight such vectors are transposed, then multiplied by the rows' f16 scales (lane =
 * row): the same single product per value as the scalar decoder. */
FERI_AVX2 static FERI_INLINE void group_sub_scales(const fer_dtype t, const uint8_t *blk, int64_t sn,
                                                   __m256 sv[FERI_QSUB_MAX], __m256 ov[FERI_QSUB_MAX]) {
  const __m256 neg = _mm256_set1_ps(-0.0f);
  __m256 r[8], q[8];
  switch (t) {
    case FER_DTYPE_MXFP4: {
      float sc[8];
      for (int i = 0; i < 8; i++) sc[i] = feri_e8m0_to_f32(blk[i * sn]) * 0.5f;
      sv[0] = _mm256_loadu_ps(sc);
      return;
    }
    case FER_DTYPE_Q4_0:
    case FER_DTYPE_Q8_0:
    case FER_DTYPE_IQ4_NL:
    case FER_DTYPE_Q4_1:
    case FER_DTYPE_Q5_0:
    case FER_DTYPE_Q5_1:
      sv[0] = f16_rows(blk, sn, 0);
      if (t == FER_DTYPE_Q5_1 || t == FER_DTYPE_Q4_1) ov[0] = f16_rows(blk, sn, 2);
      return;
    case FER_DTYPE_Q4_K:
    case FER_DTYPE_Q5_K: {
      const __m256 d = f16_rows(blk, sn, 0), dmin = f16_rows(blk, sn, 2);
      for (int i = 0; i < 8; i++) {
        /* the 12 bytes as words w0 (bytes 0-3), w1 (4-7), w2 (8-11): scales 0-3 and minimums 0-3
         * are the low six bits of w0 and w1; scales and minimums 4-7 take their low four bits
         * from w2's nibbles and their top two from the top bits of w0 and w1 */
        uint32_t w[3];
        memcpy(w, blk + i * sn + 4, sizeof w);
        const uint32_t sc_hi = (w[2] & 0x0f0f0f0fu) | ((w[0] >> 6) & 0x03030303u) << 4;
        const uint32_t m_hi = ((w[2] >> 4) & 0x0f0f0f0fu) | ((w[1] >> 6) & 0x03030303u) << 4;
        r[i] = u8x8_to_f32(_mm_set_epi32(0, 0, (int)sc_hi, (int)(w[0] & 0x3f3f3f3fu)));
        q[i] = u8x8_to_f32(_mm_set_epi32(0, 0, (int)m_hi, (int)(w[1] & 0x3f3f3f3fu)));
      }
      transpose8(r);
      transpose8(q);
      for (int j = 0; j < 8; j++) {
        sv[j] = _mm256_mul_ps(d, r[j]);
        ov[j] = _mm256_xor_ps(_mm256_mul_ps(dmin, q[j]), neg); /* -(dmin * m), exactly */
      }
      return;
    }
    case FER_DTYPE_IQ4_XS: {
      const __m256 d = f16_rows(blk, sn, 0);
      const __m256i lo_shift = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
      const __m256i hi_shift = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
      for (int i = 0; i < 8; i++) {
        uint32_t lo;
        uint16_t hi;
        memcpy(&lo, blk + i * sn + 4, sizeof lo);
        memcpy(&hi, blk + i * sn + 2, sizeof hi);
        const __m256i l = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)lo), lo_shift), _mm256_set1_epi32(0xF));
        const __m256i h = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(hi), hi_shift), _mm256_set1_epi32(3));
        r[i] = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_or_si256(l, _mm256_slli_epi32(h, 4)), _mm256_set1_epi32(32)));
      }
      transpose8(r);
      for (int j = 0; j < 8; j++) sv[j] = _mm256_mul_ps(d, r[j]);
      return;
    }
    default: { /* Q2_K, Q3_K, Q6_K: sixteen scales, two halves of eight */
      const int d_off = t == FER_DTYPE_Q2_K ? 80 : t == FER_DTYPE_Q3_K ? 108 : 208;
      const __m256 d = f16_rows(blk, sn, d_off);
      const __m256 dmin = t == FER_DTYPE_Q2_K ? f16_rows(blk, sn, 82) : _mm256_setzero_ps();
      __m256 r1[8], q1[8];
      for (int i = 0; i < 8; i++) {
        const uint8_t *b = blk + i * sn;
        if (t == FER_DTYPE_Q6_K) {
          r[i] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b + 192))));
          r1[i] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b + 200))));
        } else if (t == FER_DTYPE_Q2_K) {
          const __m128i v = _mm_loadu_si128((const __m128i *)b);
          const __m128i lo = _mm_and_si128(v, _mm_set1_epi8(0x0F));
          const __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(0x0F));
          r[i] = u8x8_to_f32(lo);
          r1[i] = u8x8_to_f32(_mm_srli_si128(lo, 8));
          q[i] = u8x8_to_f32(hi);
          q1[i] = u8x8_to_f32(_mm_srli_si128(hi, 8));
        } else {
          uint8_t sc[16];
          feri_q3k_scales(b + 96, sc);
          const __m128i v = _mm_sub_epi8(_mm_loadu_si128((const __m128i *)sc), _mm_set1_epi8(32));
          r[i] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v));
          r1[i] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v, 8)));
        }
      }
      transpose8(r);
      transpose8(r1);
      for (int j = 0; j < 8; j++) {
        sv[j] = _mm256_mul_ps(d, r[j]);
        sv[8 + j] = _mm256_mul_ps(d, r1[j]);
      }
      if (t == FER_DTYPE_Q2_K) {
        transpose8(q);
        transpose8(q1);
        for (int j = 0; j < 8; j++) {
          ov[j] = _mm256_xor_ps(_mm256_mul_ps(dmin, q[j]), neg);
          ov[8 + j] = _mm256_xor_ps(_mm256_mul_ps(dmin, q1[j]), neg);
        }
      }
      return;
    }
  }
}

FERI_AVX2 static FERI_INLINE void gemv_nk_sub_groups(const fer_dtype t, const int ng, const float *x,
                                                     int64_t K, const feri_mm_b *b,
                                                     const uint8_t *rows, float *y) {
  const int E = (int)feri_qblock_elems(t), S = feri_qblock_sub(t), NS = E / S;
  const int has_off = feri_qblock_has_offset(t);
  const int bb = (int)feri_qblock_bytes(t);
  __m256 acc[QG];
  for (int g = 0; g < ng; g++) acc[g] = _mm256_setzero_ps();
  uint8_t tb[QG][FERI_QBLOCK_MAX * 8]; /* per group: E positions x 8 rows of int8 codes */
  __m256 sv[QG][FERI_QSUB_MAX], ov[QG][FERI_QSUB_MAX];
  for (int64_t k = 0; k < K; k += E) {
    const int64_t boff = k / E * b->qbytes;
    for (int g = 0; g < ng; g++) {
      const uint8_t *blk = rows + 8 * g * b->sn + boff;
      for (int i = 0; i < 8; i++)
        for (int q = 0; q < bb; q += 64)
          _mm_prefetch((const char *)(blk + i * b->sn + QPREFETCH + q), _MM_HINT_T0);
      group_sub_scales(t, blk, b->sn, sv[g], ov[g]);
#pragma GCC unroll 16
      for (int c = 0; c < E / 16; c++) {
        __m128i r[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) r[i] = codes16(t, blk + i * b->sn, c);
        transpose_bytes_8x16(r, tb[g] + 128 * c);
      }
    }
    for (int j = 0; j < NS; j++) {
      for (int p = j * S; p < j * S + S; p++) {
        const __m256 xk = _mm256_broadcast_ss(x + k + p);
#pragma GCC unroll 4
        for (int g = 0; g < ng; g++) {
          const __m256i ci = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(tb[g] + 8 * p)));
          __m256 w = _mm256_mul_ps(_mm256_cvtepi32_ps(ci), sv[g][j]);
          if (has_off) w = _mm256_add_ps(w, ov[g][j]);
          acc[g] = _mm256_fmadd_ps(xk, w, acc[g]);
        }
      }
    }
  }
  for (int g = 0; g < ng; g++) _mm256_storeu_ps(y + 8 * g, acc[g]);
}

FERI_AVX2 static FERI_INLINE void gemv_nk_sub_body(const fer_dtype t, const float *x, int64_t K,
                                                   const feri_mm_b *b, int64_t n0, int64_t nc,
                                                   float *y) {
  int64_t j = 0;
  for (; j + 8 * QG <= nc; j += 8 * QG)
    gemv_nk_sub_groups(t, QG, x, K, b, (const uint8_t *)b->data + (n0 + j) * b->sn, y + j);
  for (; j + 8 <= nc; j += 8)
    gemv_nk_sub_groups(t, 1, x, K, b, (const uint8_t *)b->data + (n0 + j) * b->sn, y + j);
  if (j < nc) feri_gemv_quant(x, K, b, n0 + j, nc - j, y + j);
}

FERI_AVX2 static void gemv_nk_quant_avx2(const float *x, int64_t K, const feri_mm_b *b, int64_t n0,
                                         int64_t nc, float *y) {
  switch (b->dtype) {
    case FER_DTYPE_MXFP4: gemv_nk_quant_body(FER_DTYPE_MXFP4, x, K, b, n0, nc, y); break;
    case FER_DTYPE_Q4_0: gemv_nk_quant_body(FER_DTYPE_Q4_0, x, K, b, n0, nc, y); break;
    case FER_DTYPE_Q4_1: gemv_nk_quant_body(FER_DTYPE_Q4_1, x, K, b, n0, nc, y); break;
    case FER_DTYPE_Q8_0: gemv_nk_quant_body(FER_DTYPE_Q8_0, x, K, b, n0, nc, y); break;
    case FER_DTYPE_IQ4_NL: gemv_nk_quant_body(FER_DTYPE_IQ4_NL, x, K, b, n0, nc, y); break;
    case FER_DTYPE_Q5_0: gemv_nk_sub_body(FER_DTYPE_Q5_0, x, K, b, n0, nc, y); break;
    case FER_DTYPE_Q5_1: gemv_nk_sub_body(FER_DTYPE_Q5_1, x, K, b, n0, nc, y); break;
    case FER_DTYPE_Q2_K: gemv_nk_sub_body(FER_DTYPE_Q2_K, x, K, b, n0, nc, y); break;
    case FER_DTYPE_Q3_K: gemv_nk_sub_body(FER_DTYPE_Q3_K, x, K, b, n0, nc, y); break;
    case FER_DTYPE_Q4_K: gemv_nk_sub_body(FER_DTYPE_Q4_K, x, K, b, n0, nc, y); break;
    case FER_DTYPE_Q5_K: gemv_nk_sub_body(FER_DTYPE_Q5_K, x, K, b, n0, nc, y); break;
    case FER_DTYPE_Q6_K: gemv_nk_sub_body(FER_DTYPE_Q6_K, x, K, b, n0, nc, y); break;
    case FER_DTYPE_IQ4_XS: gemv_nk_sub_body(FER_DTYPE_IQ4_XS, x, K, b, n0, nc, y); break;
    default: feri_gemv_quant(x, K, b, n0, nc, y); break;
  }
}

FERI_AVX2 static void gemv_nk_avx2(const float *x, int64_t K, const feri_mm_b *b, int64_t n0,
                                   int64_t nc, float *y) {
  if (b->qbytes != 0) {
    gemv_nk_quant_avx2(x, K, b, n0, nc, y);
    return;
  }
  switch (b->dtype) {
    case FER_DTYPE_F32: gemv_nk_body(FER_DTYPE_F32, x, K, b, n0, nc, y); break;
    case FER_DTYPE_F16: gemv_nk_body(FER_DTYPE_F16, x, K, b, n0, nc, y); break;
    default: gemv_nk_body(FER_DTYPE_BF16, x, K, b, n0, nc, y); break;
  }
}

FERI_AVX2 static void widen_avx2(const char *src, int64_t stride, fer_dtype dtype, int64_t n,
                                 float *dst) {
  const int64_t es = dtype == FER_DTYPE_F32 ? 4 : 2;
  if (stride != es) {
    feri_widen_strided(src, stride, dtype, n, dst);
    return;
  }
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, feri_load8(src + i * es, dtype));
  feri_widen_strided(src + i * es, stride, dtype, n - i, dst + i);
}

/* Packing a block-quantized B: a panel's column j is row n0 + j of the weight, so a k row of the
 * panel is one value of 16 weight rows: the GEMV's transposed codes (lane = row) times their
 * sub-block scales (plus offsets), stored eight rows at a time: the same values as the scalar
 * decoder, about one instruction per element instead of ten. Blocks must lie whole inside
 * [k0, k0 + kc) (the driver's KC is a multiple of every block); otherwise, and for a last
 * partial panel, the scalar packer runs. */
FERI_AVX2 static FERI_INLINE void pack_quant_body(const fer_dtype t, const feri_mm_b *b, int64_t k0,
                                                  int64_t kc, int64_t n0, int64_t nc, float *dst) {
  const int E = (int)feri_qblock_elems(t), S = feri_qblock_sub(t), NS = E / S;
  const int has_off = feri_qblock_has_offset(t);
  const int64_t full = nc / FERI_MM_NR;
  if (k0 % E != 0 || kc % E != 0) {
    feri_pack_b_quant(b, k0, kc, n0, nc, dst);
    return;
  }
  uint8_t tb[FERI_QBLOCK_MAX * 8];
  __m256 sv[FERI_QSUB_MAX], ov[FERI_QSUB_MAX];
  for (int64_t p = 0; p < full; p++) {
    float *panel = dst + p * kc * FERI_MM_NR;
    for (int half = 0; half < 2; half++) {
      const uint8_t *rows = (const uint8_t *)b->data + (n0 + p * FERI_MM_NR + 8 * half) * b->sn;
      for (int64_t k = 0; k < kc; k += E) {
        const uint8_t *blk = rows + (k0 + k) / E * b->qbytes;
        group_sub_scales(t, blk, b->sn, sv, ov);
#pragma GCC unroll 16
        for (int c = 0; c < E / 16; c++) {
          __m128i r[8];
#pragma GCC unroll 8
          for (int i = 0; i < 8; i++) r[i] = codes16(t, blk + i * b->sn, c);
          transpose_bytes_8x16(r, tb + 128 * c);
        }
        float *out = panel + k * FERI_MM_NR + 8 * half;
        for (int j = 0; j < NS; j++)
          for (int q = j * S; q < j * S + S; q++) {
            const __m256i ci = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(tb + 8 * q)));
            __m256 w = _mm256_mul_ps(_mm256_cvtepi32_ps(ci), sv[j]);
            if (has_off) w = _mm256_add_ps(w, ov[j]);
            _mm256_storeu_ps(out + q * FERI_MM_NR, w);
          }
      }
    }
  }
  if (full * FERI_MM_NR < nc) {
    feri_mm_b tail = *b;
    tail.data = b->data + (n0 + full * FERI_MM_NR) * b->sn;
    feri_pack_b_quant(&tail, k0, kc, 0, nc - full * FERI_MM_NR, dst + full * kc * FERI_MM_NR);
  }
}

FERI_AVX2 static void pack_quant_avx2(const feri_mm_b *b, int64_t k0, int64_t kc, int64_t n0, int64_t nc,
                                      float *dst) {
  switch (b->dtype) {
#define PACK_CASE(T) \
  case T: pack_quant_body(T, b, k0, kc, n0, nc, dst); break;
    PACK_CASE(FER_DTYPE_MXFP4)
    PACK_CASE(FER_DTYPE_Q4_0)
    PACK_CASE(FER_DTYPE_Q4_1)
    PACK_CASE(FER_DTYPE_Q8_0)
    PACK_CASE(FER_DTYPE_Q5_0)
    PACK_CASE(FER_DTYPE_Q5_1)
    PACK_CASE(FER_DTYPE_IQ4_NL)
    PACK_CASE(FER_DTYPE_Q2_K)
    PACK_CASE(FER_DTYPE_Q3_K)
    PACK_CASE(FER_DTYPE_Q4_K)
    PACK_CASE(FER_DTYPE_Q5_K)
    PACK_CASE(FER_DTYPE_Q6_K)
    PACK_CASE(FER_DTYPE_IQ4_XS)
#undef PACK_CASE
    default: feri_pack_b_quant(b, k0, kc, n0, nc, dst); break;
  }
}

const feri_matmul_ops feri_matmul_ops_avx2 = {
    .mr = FERI_MM_MR, .nr = FERI_MM_NR, .mc = FERI_MM_MC, .kc = FERI_MM_KC, .nc = FERI_MM_NC,
    .pack_b = pack_b_avx2,
    .micro = micro_avx2,
    .gemv_kn = gemv_kn_avx2,
    .gemv_nk = gemv_nk_avx2,
    .widen = widen_avx2,
};

#endif
