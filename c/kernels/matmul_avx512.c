/* matmul_avx512.c: the AVX-512 level of fer_matmul (FER_ISA_AVX512: F, BW, VL, DQ). The same
 * chains as matmul_portable.c (one fma per k, k ascending from 0, per output element), only
 * wider: vectors run across output columns, never across k, so no partial sum is re-associated.
 *
 * Why a level of its own: the AVX2 micro-kernel (6 x 16 in ymm) issues half the arithmetic per
 * instruction a 512-bit FMA unit can do, and OpenBLAS's AVX-512 sgemm beat it by 7-14% on Intel
 * Xeon (C-MM-009). Here the register tile is MR x 32 (two zmm per row, 2 MR accumulators of the
 * 32 registers), so each k step loads two B vectors and MR broadcasts of A for 2 MR FMAs: the
 * FMA units, not the loads, set the pace on both CPU kinds (2 loads a cycle on Intel's older
 * cores). The packed B panels are 32 columns wide (the table carries its tile, matmul.h); the
 * block-quantized packer writes 16-column panels, so this level interleaves two of them.
 *
 * The GEMV over [K, N] runs 16 columns per vector with masked tails; the GEMV over [N, K] (rows
 * of a weight, dense or block-quantized) is the AVX2 level's, which already streams at the read
 * bandwidth (C-MM-008). */
#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/avx2_util.h"
#include "kernels/matmul.h"

#define FERI_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq")))

/* The tile and blocks of this level. MR 12: 24 accumulators, two B vectors and a broadcast in
 * the 32 registers. MC 528: every row block packs its own B panels, and next to this micro-kernel
 * packing is dear: at 512x576x1536 with B [N, K] (SmolLM2's prefill) 96-row blocks packed B six
 * times and spent 38% of the time packing; one block of all 512 rows spends 7% (perf, 1 thread).
 * A tall block costs L2 room only (its A rows and its tile stream past one L1-resident B
 * micro-panel). KC stays 256 (a multiple of every block size of the quantized packer; 512 was no
 * faster). */
enum { MR = 12, NR = 32, MC = 528, KC = 256, NC = 256 };

/* Sixteen consecutive elements of dtype at p, widened to f32 exactly (bf16: the bits move up). */
FERI_AVX512 static FERI_INLINE __m512 load16(const char *p, fer_dtype t) {
  if (t == FER_DTYPE_F32) return _mm512_loadu_ps((const float *)p);
  const __m256i h = _mm256_loadu_si256((const __m256i *)p);
  if (t == FER_DTYPE_F16) return _mm512_cvtph_ps(h);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* The first n (< 16) of them; the other lanes are 0 and nothing past element n is read. */
FERI_AVX512 static FERI_INLINE __m512 load16_mask(const char *p, fer_dtype t, __mmask16 m) {
  if (t == FER_DTYPE_F32) return _mm512_maskz_loadu_ps(m, p);
  const __m256i h = _mm256_maskz_loadu_epi16(m, p);
  if (t == FER_DTYPE_F16) return _mm512_cvtph_ps(h);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

static __mmask16 mask_first(int64_t n) { return (__mmask16)((1u << n) - 1u); }

/* ---- packing ------------------------------------------------------------------------------ */

/* Scalar packing into 32-column panels, for any strides (and the last, partial panel). */
static void pack_strided32(const feri_mm_b *b, int64_t k0, int64_t kc, int64_t n0, int64_t nc,
                           float *dst) {
  for (int64_t p = 0; p * NR < nc; p++) {
    float *panel = dst + p * kc * NR;
    for (int64_t k = 0; k < kc; k++)
      for (int64_t j = 0; j < NR; j++) {
        const int64_t n = p * NR + j;
        panel[k * NR + j] = n < nc ? feri_mm_b_at(b, k0 + k, n0 + n) : 0.0f;
      }
  }
}

/* A block-quantized B: the shared packer dequantizes 16 columns at a time into a 16-column
 * panel, which lands in one half of a 32-column panel (the same values, moved). */
FERI_AVX512 static void pack_quant32(const feri_mm_b *b, int64_t k0, int64_t kc, int64_t n0,
                                     int64_t nc, float *dst) {
  float half[KC * FERI_MM_NR];
  for (int64_t p = 0; p * NR < nc; p++) {
    float *panel = dst + p * kc * NR;
    for (int64_t h = 0; h < 2; h++) {
      const int64_t c0 = p * NR + h * FERI_MM_NR;
      if (c0 >= nc) {
        for (int64_t k = 0; k < kc; k++) _mm512_storeu_ps(panel + k * NR + h * 16, _mm512_setzero_ps());
        continue;
      }
      const int64_t w = nc - c0 < FERI_MM_NR ? nc - c0 : FERI_MM_NR;
      feri_pack_b_quant(b, k0, kc, n0 + c0, w, half);
      for (int64_t k = 0; k < kc; k++) _mm512_storeu_ps(panel + k * NR + h * 16, _mm512_loadu_ps(half + k * FERI_MM_NR));
    }
  }
}

/* In-register transpose: r[i] lane j <-> r[j] lane i (as matmul_avx2.c's). */
FERI_AVX512 static FERI_INLINE void transpose8(__m256 r[8]) {
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

/* B with unit stride along N copies rows of 32 (row by row across every panel: each row of B is
 * one contiguous run); B with unit stride along K (an [N, K] weight) transposes 8 x 8 blocks in
 * registers, four per panel row of eight steps. Other strides, quantized B and the partial last
 * panel take the scalar packers, which produce the same values. */
FERI_AVX512 static FERI_INLINE void pack_kn_rows(const fer_dtype t, const feri_mm_b *b, int64_t k0,
                                                 int64_t kc, int64_t n0, int64_t full, float *dst) {
  const char *src = b->data + k0 * b->sk + n0 * b->sn;
  const int64_t es = b->es;
  for (int64_t k = 0; k < kc; k++, src += b->sk)
    for (int64_t p = 0; p < full; p++) {
      float *row = dst + p * kc * NR + k * NR;
      const char *s = src + p * NR * es;
      _mm512_storeu_ps(row, load16(s, t));
      _mm512_storeu_ps(row + 16, load16(s + 16 * es, t));
    }
}

FERI_AVX512 static FERI_INLINE void pack_nk_rows(const fer_dtype t, const feri_mm_b *b, int64_t k0,
                                                 int64_t kc, int64_t n0, int64_t full, float *dst) {
  const int64_t kc8 = kc & ~(int64_t)7, sn = b->sn, es = b->es;
  for (int64_t p = 0; p < full; p++) {
    float *panel = dst + p * kc * NR;
    for (int64_t g = 0; g < NR / 8; g++) {
      const char *rows = b->data + k0 * es + (n0 + p * NR + g * 8) * sn;
      for (int64_t k = 0; k < kc8; k += 8) {
        __m256 r[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) r[i] = feri_load8(rows + i * sn + k * es, t);
        transpose8(r);
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) _mm256_storeu_ps(panel + (k + i) * NR + g * 8, r[i]);
      }
      for (int64_t k = kc8; k < kc; k++)
        for (int64_t j = 0; j < 8; j++) panel[k * NR + g * 8 + j] = feri_mm_b_at(b, k0 + k, n0 + p * NR + g * 8 + j);
    }
  }
}

FERI_AVX512 static void pack_b_avx512(const feri_mm_b *b, int64_t k0, int64_t kc, int64_t n0,
                                      int64_t nc, float *dst) {
  if (b->qbytes != 0) {
    pack_quant32(b, k0, kc, n0, nc, dst);
    return;
  }
  const int64_t full = nc / NR; /* complete panels */
  if (b->sn == b->es) {
    switch (b->dtype) {
      case FER_DTYPE_F32: pack_kn_rows(FER_DTYPE_F32, b, k0, kc, n0, full, dst); break;
      case FER_DTYPE_F16: pack_kn_rows(FER_DTYPE_F16, b, k0, kc, n0, full, dst); break;
      default: pack_kn_rows(FER_DTYPE_BF16, b, k0, kc, n0, full, dst); break;
    }
  } else if (b->sk == b->es) {
    switch (b->dtype) {
      case FER_DTYPE_F32: pack_nk_rows(FER_DTYPE_F32, b, k0, kc, n0, full, dst); break;
      case FER_DTYPE_F16: pack_nk_rows(FER_DTYPE_F16, b, k0, kc, n0, full, dst); break;
      default: pack_nk_rows(FER_DTYPE_BF16, b, k0, kc, n0, full, dst); break;
    }
  } else {
    pack_strided32(b, k0, kc, n0, nc, dst);
    return;
  }
  if (full * NR < nc) {
    feri_mm_b tail = *b;
    tail.data = b->data + (n0 + full * NR) * b->sn;
    pack_strided32(&tail, k0, kc, 0, nc - full * NR, dst + full * kc * NR);
  }
}

/* ---- the micro-kernel --------------------------------------------------------------------- */

/* The MR x 32 register tile; row r exists only while r < mr, which the compiler resolves at each
 * call site below, so a short tile costs only its own rows. */
#define ROW_DECL(r) __m512 c##r##a = _mm512_setzero_ps(), c##r##b = _mm512_setzero_ps();
#define ROW_LOAD(r)                                 \
  if (mr > r && !first) {                           \
    c##r##a = _mm512_loadu_ps(c + r * ldc);         \
    c##r##b = _mm512_loadu_ps(c + r * ldc + 16);    \
  }
#define ROW_FMA(r)                                  \
  if (mr > r) {                                     \
    const __m512 av = _mm512_set1_ps(a[r * lda + k]); \
    c##r##a = _mm512_fmadd_ps(av, b0, c##r##a);     \
    c##r##b = _mm512_fmadd_ps(av, b1, c##r##b);     \
  }
#define ROW_STORE(r)                                \
  if (mr > r) {                                     \
    _mm512_storeu_ps(c + r * ldc, c##r##a);         \
    _mm512_storeu_ps(c + r * ldc + 16, c##r##b);    \
  }
#define ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

FERI_AVX512 static FERI_INLINE void micro_body(int64_t kc, const float *a, int64_t lda, const float *b,
                                               float *c, int64_t ldc, const int mr, int first) {
  ROWS(ROW_DECL)
  ROWS(ROW_LOAD)
  for (int64_t k = 0; k < kc; k++) {
    const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
    ROWS(ROW_FMA)
    b += NR;
  }
  ROWS(ROW_STORE)
}

FERI_AVX512 static void micro_avx512(int64_t kc, const float *a, int64_t lda, const float *b,
                                     float *c, int64_t ldc, int mr, int first) {
  switch (mr) {
    case 1: micro_body(kc, a, lda, b, c, ldc, 1, first); break;
    case 2: micro_body(kc, a, lda, b, c, ldc, 2, first); break;
    case 3: micro_body(kc, a, lda, b, c, ldc, 3, first); break;
    case 4: micro_body(kc, a, lda, b, c, ldc, 4, first); break;
    case 5: micro_body(kc, a, lda, b, c, ldc, 5, first); break;
    case 6: micro_body(kc, a, lda, b, c, ldc, 6, first); break;
    case 7: micro_body(kc, a, lda, b, c, ldc, 7, first); break;
    case 8: micro_body(kc, a, lda, b, c, ldc, 8, first); break;
    case 9: micro_body(kc, a, lda, b, c, ldc, 9, first); break;
    case 10: micro_body(kc, a, lda, b, c, ldc, 10, first); break;
    case 11: micro_body(kc, a, lda, b, c, ldc, 11, first); break;
    default: micro_body(kc, a, lda, b, c, ldc, 12, first); break;
  }
}

/* ---- GEMV and widening -------------------------------------------------------------------- */

/* GEMV over B [K, N] with unit stride along N, as matmul_avx2.c's gemv_kn: vectors across
 * columns, eight rows of B per step with the partial sums in y between steps; 16 columns a
 * vector and the last < 16 under a mask (lane j's chain is the same either way). */
enum { GEMV_KN_ROWS = 8 };

FERI_AVX512 static FERI_INLINE void gemv_kn_body(const fer_dtype t, const float *x, int64_t K,
                                                 const feri_mm_b *b, int64_t n0, int64_t nc, float *y) {
  const int64_t nvec = nc & ~(int64_t)15, es = b->es, sk = b->sk;
  const __mmask16 tail = mask_first(nc - nvec);
  for (int64_t j = 0; j < nc; j++) y[j] = 0.0f;
  int64_t k = 0;
  for (; k + GEMV_KN_ROWS <= K; k += GEMV_KN_ROWS) {
    const char *r0 = b->data + k * sk + n0 * es;
    __m512 xk[GEMV_KN_ROWS];
#pragma GCC unroll 8
    for (int i = 0; i < GEMV_KN_ROWS; i++) xk[i] = _mm512_set1_ps(x[k + i]);
    for (int64_t v = 0; v < nvec; v += 16) {
      __m512 acc = _mm512_loadu_ps(y + v);
#pragma GCC unroll 8
      for (int i = 0; i < GEMV_KN_ROWS; i++) acc = _mm512_fmadd_ps(xk[i], load16(r0 + i * sk + v * es, t), acc);
      _mm512_storeu_ps(y + v, acc);
    }
    if (tail) {
      __m512 acc = _mm512_maskz_loadu_ps(tail, y + nvec);
#pragma GCC unroll 8
      for (int i = 0; i < GEMV_KN_ROWS; i++)
        acc = _mm512_fmadd_ps(xk[i], load16_mask(r0 + i * sk + nvec * es, t, tail), acc);
      _mm512_mask_storeu_ps(y + nvec, tail, acc);
    }
  }
  for (; k < K; k++) {
    const char *r0 = b->data + k * sk + n0 * es;
    const __m512 x0 = _mm512_set1_ps(x[k]);
    for (int64_t v = 0; v < nvec; v += 16)
      _mm512_storeu_ps(y + v, _mm512_fmadd_ps(x0, load16(r0 + v * es, t), _mm512_loadu_ps(y + v)));
    if (tail)
      _mm512_mask_storeu_ps(y + nvec, tail,
                            _mm512_fmadd_ps(x0, load16_mask(r0 + nvec * es, t, tail), _mm512_maskz_loadu_ps(tail, y + nvec)));
  }
}

FERI_AVX512 static void gemv_kn_avx512(const float *x, int64_t K, const feri_mm_b *b, int64_t n0,
                                       int64_t nc, float *y) {
  switch (b->dtype) {
    case FER_DTYPE_F32: gemv_kn_body(FER_DTYPE_F32, x, K, b, n0, nc, y); break;
    case FER_DTYPE_F16: gemv_kn_body(FER_DTYPE_F16, x, K, b, n0, nc, y); break;
    default: gemv_kn_body(FER_DTYPE_BF16, x, K, b, n0, nc, y); break;
  }
}

static void gemv_nk_avx512(const float *x, int64_t K, const feri_mm_b *b, int64_t n0, int64_t nc,
                           float *y) {
  feri_matmul_ops_avx2.gemv_nk(x, K, b, n0, nc, y);
}

FERI_AVX512 static void widen_avx512(const char *src, int64_t stride, fer_dtype dtype, int64_t n,
                                     float *dst) {
  const int64_t es = dtype == FER_DTYPE_F32 ? 4 : 2;
  if (stride != es) {
    feri_widen_strided(src, stride, dtype, n, dst);
    return;
  }
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, load16(src + i * es, dtype));
  if (i < n) {
    const __mmask16 m = mask_first(n - i);
    _mm512_mask_storeu_ps(dst + i, m, load16_mask(src + i * es, dtype, m));
  }
}

const feri_matmul_ops feri_matmul_ops_avx512 = {
    .mr = MR, .nr = NR, .mc = MC, .kc = KC, .nc = NC,
    .pack_b = pack_b_avx512,
    .micro = micro_avx512,
    .gemv_kn = gemv_kn_avx512,
    .gemv_nk = gemv_nk_avx512,
    .widen = widen_avx512,
};

#endif
