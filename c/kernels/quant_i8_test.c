/* quant_i8_test.c: fer_matmul_quant_i8 in every format against
 *  - the definition (quant_i8.h) written out here in double-free scalar C: bit for bit;
 *  - the exact product of the dequantized weights and A in double: within the stated tolerance;
 *  - itself: every table (portable, AVX2, AVX512-VNNI where the CPU has it), thread counts 1-3,
 *    M = 1 against M > 1 rows, f16 A and a strided out: bit for bit;
 * plus non-finite and zero activations and bad arguments. EVIDENCE: C-Q-008
 * The formats of issue 19 against ggml's dequantized values written out here (spec_value): within
 * the tolerance, and bit for bit across tables, levels, threads and M. EVIDENCE: C-Q-201
 * The panels of qpanel.h give the same bits as the blocks they were packed from. EVIDENCE: C-Q-203 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/tensor.h"
#include "kernels/quant.h"
#include "kernels/quant_i8.h"
#include "kernels/qpanel.h"
#include "testing/check.h"

static const fer_dtype FORMATS[4] = {FER_DTYPE_Q4_0, FER_DTYPE_Q4_1, FER_DTYPE_Q8_0, FER_DTYPE_MXFP4};

static unsigned next(unsigned *s) {
  *s = *s * 1664525u + 1013904223u;
  return *s >> 8;
}

static float rnd(unsigned *s) { return (float)((int)(next(s) % 20001) - 10000) / 2500.0f; }

static uint16_t f16_of(float f) { return feri_f32_to_f16(f); }

static void put_f16(uint8_t *p, float f) {
  const uint16_t h = f16_of(f);
  memcpy(p, &h, 2);
}

/* A [n, k] matrix of valid blocks with varied scales (including a few tiny and large ones). */
static uint8_t *make_weights(fer_dtype t, int64_t n, int64_t k, unsigned *s, int64_t *stride) {
  const size_t bb = feri_qi8_block_bytes(t);
  const int64_t be = feri_qi8_block_elems(t);
  *stride = (int64_t)((size_t)(k / be) * bb + 3); /* padded rows: row_stride is honoured */
  uint8_t *w = malloc((size_t)(n * *stride) + 1);
  for (int64_t i = 0; i < n * *stride; i++) w[i] = (uint8_t)next(s);
  for (int64_t r = 0; r < n; r++)
    for (int64_t b = 0; b < k / be; b++) {
      uint8_t *blk = w + r * *stride + b * (int64_t)bb;
      if (t == FER_DTYPE_MXFP4) {
        blk[0] = (uint8_t)(120 + next(s) % 12);
      } else if (feri_qi8_is_super(t)) {
        const size_t off = feri_qi8_super_d_offset(t);
        put_f16(blk + off, (float)(next(s) % 1000 + 1) / 40000.0f);
        if (feri_qi8_super_has_min(t)) put_f16(blk + off + 2, (float)(next(s) % 1000) / 40000.0f);
      } else {
        put_f16(blk, (float)(next(s) % 1000 + 1) / 40000.0f);
        if (t == FER_DTYPE_Q4_1 || t == FER_DTYPE_Q5_1) put_f16(blk + 2, -(float)(next(s) % 1000) / 4000.0f);
      }
    }
  return w;
}

/* The definition of one output, written from quant_i8.h without looking at the kernels. */
static float reference_output(fer_dtype t, const uint8_t *row, const float *x, int64_t k) {
  const size_t bb = feri_qblock_bytes(t);
  float acc = 0.0f, mc = 0.0f;
  for (int64_t b = 0; b < k / 32; b++) {
    const float *xb = x + 32 * b;
    float amax = 0.0f;
    int finite = 1;
    for (int i = 0; i < 32; i++) {
      if (!isfinite(xb[i])) finite = 0;
      else amax = fmaxf(amax, fabsf(xb[i]));
    }
    int q[32], qsum = 0;
    float d = amax / 127.0f, id = amax > 0 ? 127.0f / amax : 0.0f;
    if (!finite) d = NAN;
    if (!finite || !isfinite(id)) id = 0.0f, d = finite ? 0.0f : d;
    for (int i = 0; i < 32; i++) qsum += q[i] = (int)nearbyintf(xb[i] * id);
    const uint8_t *blk = row + b * (int64_t)bb;
    int code[32];
    float dw, mw = 0.0f;
    for (int i = 0; i < 32; i++) {
      if (t == FER_DTYPE_Q8_0) code[i] = (int8_t)blk[2 + i];
      else {
        const uint8_t *nib = blk + (t == FER_DTYPE_MXFP4 ? 1 : t == FER_DTYPE_Q4_0 ? 2 : 4);
        const int n = i < 16 ? nib[i] & 15 : nib[i - 16] >> 4;
        code[i] = t == FER_DTYPE_MXFP4 ? (int)(2.0f * feri_e2m1_values[n]) : t == FER_DTYPE_Q4_0 ? n - 8 : n;
      }
    }
    dw = feri_qblock_scale(t, blk) * (t == FER_DTYPE_MXFP4 ? 0.5f : 1.0f);
    if (t == FER_DTYPE_Q4_1) mw = feri_qblock_min(blk);
    int isum = 0;
    for (int i = 0; i < 32; i++) isum += code[i] * q[i];
    acc = fmaf((float)isum, dw * d, acc);
    if (t == FER_DTYPE_Q4_1) mc = fmaf(mw, d * (float)qsum, mc);
  }
  return t == FER_DTYPE_Q4_1 ? acc + mc : acc;
}

/* |out - exact| within sum_b amax_b / 254 * sum |w| plus a margin for f32 rounding. */
static int within_tolerance(fer_dtype t, const uint8_t *row, const float *x, int64_t k, float got) {
  const size_t bb = feri_qblock_bytes(t);
  double exact = 0, bound = 0, mag = 0;
  for (int64_t b = 0; b < k / 32; b++) {
    float wv[32];
    feri_qblock_dequant(t, row + b * (int64_t)bb, wv);
    double amax = 0, w1 = 0;
    for (int i = 0; i < 32; i++) {
      exact += (double)wv[i] * x[32 * b + i];
      amax = fmax(amax, fabs(x[32 * b + i]));
      w1 += fabs(wv[i]);
      mag += fabs((double)wv[i] * x[32 * b + i]);
    }
    bound += amax / 254.0 * w1;
    mag += amax * w1; /* the rounded products are at most this large */
  }
  return fabs((double)got - exact) <= bound + 1e-5 * mag;
}

/* ---- the new formats (issue 19): Q5_0, Q5_1, IQ4_NL, Q2_K .. Q6_K, IQ4_XS. EVIDENCE: C-Q-201, C-Q-202 */

static const fer_dtype NEW_FORMATS[9] = {FER_DTYPE_Q5_0, FER_DTYPE_Q5_1, FER_DTYPE_IQ4_NL,
                                         FER_DTYPE_Q2_K, FER_DTYPE_Q3_K, FER_DTYPE_Q4_K,
                                         FER_DTYPE_Q5_K, FER_DTYPE_Q6_K, FER_DTYPE_IQ4_XS};

static const int IQ4NL[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

static float f16_load(const uint8_t *p) {
  uint16_t h;
  memcpy(&h, p, 2);
  return feri_f16_to_f32(h);
}

static uint32_t u32_load(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* get_scale_min_k4 of ggml: the 6-bit scale and minimum of 32-block j of a Q4_K / Q5_K block. */
static void k4(const uint8_t *q, int j, int *sc, int *m) {
  *sc = j < 4 ? q[j] & 63 : (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
  *m = j < 4 ? q[j + 4] & 63 : (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
}

/* Q3_K's sixteen 6-bit scales, unpacked word-wise as ggml's dequantize_row_q3_K does. */
static void q3_scales(const uint8_t *s12, int out[16]) {
  const uint32_t a0 = u32_load(s12), a1 = u32_load(s12 + 4), tmp = u32_load(s12 + 8);
  const uint32_t m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
  const uint32_t aux[4] = {(a0 & m4) | (((tmp >> 0) & m2) << 4), (a1 & m4) | (((tmp >> 2) & m2) << 4),
                           ((a0 >> 4) & m4) | (((tmp >> 4) & m2) << 4),
                           ((a1 >> 4) & m4) | (((tmp >> 6) & m2) << 4)};
  for (int j = 0; j < 16; j++) out[j] = (int)((aux[j / 4] >> (8 * (j % 4))) & 0xFF) - 32;
}

/* Element e of a block as ggml's dequantize_row_* computes it (f32, no fma contraction); *off is
 * the magnitude of the part the i8 route multiplies separately (a minimum or an offset). */
static float spec_value(fer_dtype t, const uint8_t *b, int e, float *off) {
  *off = 0.0f;
  switch (t) {
    case FER_DTYPE_Q5_0:
    case FER_DTYPE_Q5_1: {
      const int base = t == FER_DTYPE_Q5_0 ? 2 : 4;
      const uint32_t qh = u32_load(b + base);
      const uint8_t *qs = b + base + 4;
      const int v = (e < 16 ? qs[e] & 15 : qs[e - 16] >> 4) | (int)((qh >> e) & 1) << 4;
      const float d = f16_load(b);
      if (t == FER_DTYPE_Q5_0) return *off = 16.0f * d, (float)(v - 16) * d;
      const float m = f16_load(b + 2);
      *off = fabsf(m);
      return (float)v * d + m;
    }
    case FER_DTYPE_IQ4_NL: return f16_load(b) * (float)IQ4NL[e < 16 ? b[2 + e] & 15 : b[2 + e - 16] >> 4];
    case FER_DTYPE_Q2_K: {
      const int n = e / 128, j = e % 128 / 32, l = e % 32;
      const int q = (b[16 + 32 * n + l] >> (2 * j)) & 3, sc = b[e / 16];
      const float d = f16_load(b + 80), dmin = f16_load(b + 82);
      const float dl = d * (float)(sc & 0xF), ml = dmin * (float)(sc >> 4);
      *off = ml;
      return dl * (float)q - ml;
    }
    case FER_DTYPE_Q3_K: {
      const int n = e / 128, j = e % 128 / 32, l = e % 32;
      int sc[16];
      q3_scales(b + 96, sc);
      const int q = ((b[32 + 32 * n + l] >> (2 * j)) & 3) - ((b[l] >> (4 * n + j)) & 1 ? 0 : 4);
      return (f16_load(b + 108) * (float)sc[e / 16]) * (float)q;
    }
    case FER_DTYPE_Q4_K:
    case FER_DTYPE_Q5_K: {
      int sc, m;
      k4(b + 4, e / 32, &sc, &m);
      const uint8_t *qs = b + (t == FER_DTYPE_Q4_K ? 16 : 48);
      int q = e % 64 < 32 ? qs[32 * (e / 64) + e % 32] & 15 : qs[32 * (e / 64) + e % 32] >> 4;
      if (t == FER_DTYPE_Q5_K && (b[16 + e % 32] >> (e / 32)) & 1) q += 16;
      const float d1 = f16_load(b) * (float)sc, m1 = f16_load(b + 2) * (float)m;
      *off = m1;
      return d1 * (float)q - m1;
    }
    case FER_DTYPE_Q6_K: {
      const int n = e / 128, tt = e % 128 / 32, l = e % 32;
      const uint8_t ql = b[64 * n + 32 * (tt & 1) + l];
      const int q = ((tt < 2 ? ql & 15 : ql >> 4) | ((b[128 + 32 * n + l] >> (2 * tt)) & 3) << 4) - 32;
      return (f16_load(b + 208) * (float)(int8_t)b[192 + e / 16]) * (float)q;
    }
    default: { /* IQ4_XS */
      const int ib = e / 32, j = e % 32;
      const unsigned sh = (unsigned)b[2] | (unsigned)b[3] << 8;
      const int ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 15) | (int)((sh >> (2 * ib)) & 3) << 4;
      const uint8_t *qs = b + 8 + 16 * ib;
      const float dl = f16_load(b) * (float)(ls - 32);
      return dl * (float)IQ4NL[j < 16 ? qs[j] & 15 : qs[j - 16] >> 4];
    }
  }
}

/* |out - exact| within the stated bound: sum over activation blocks (32 or 256 by format) of
 * amax / 254 times the block's sum |w|, plus 1e-5 of the magnitudes the kernel adds. */
static int new_within_tolerance(fer_dtype t, const uint8_t *row, const float *x, int64_t k, float got,
                                double *ratio) {
  const int be = (int)feri_qi8_block_elems(t);
  const size_t bb = feri_qi8_block_bytes(t);
  double exact = 0, bound = 0, mag = 0;
  for (int64_t b = 0; b < k / be; b++) {
    double amax = 0, w1 = 0, split = 0;
    for (int i = 0; i < be; i++) {
      float off;
      const float w = spec_value(t, row + b * (int64_t)bb, i, &off);
      exact += (double)w * x[be * b + i];
      amax = fmax(amax, fabs(x[be * b + i]));
      w1 += fabs(w);
      split += fabs(w) + 2.0 * off;
    }
    bound += amax / 254.0 * w1;
    mag += amax * split;
  }
  const double err = fabs((double)got - exact);
  if (bound > 0 && err / bound > *ratio) *ratio = err / bound;
  return err <= bound + 1e-5 * mag;
}

static fer_threadpool *pool_at(fer_isa isa, uint32_t threads);

static void run_i8(fer_threadpool *pool, const float *a, int64_t m, int64_t k, const fer_qmatrix *q, float *out) {
  fer_tensor ta = feri_tensor_2d((void *)a, FER_DTYPE_F32, m, k), to = feri_tensor_2d(out, FER_DTYPE_F32, m, q->rows);
  CHECK_STATUS(fer_matmul_quant_i8(pool, &ta, q, &to, NULL, 0), FER_STATUS_OK);
}

static double worst_ratio = 0.0;

/* One shape of a new format: the portable result within the tolerance of the exact product, and
 * every ISA level and thread count, and each row alone (M = 1), bit for bit equal to it. */
static void test_new_shape(fer_dtype t, int64_t m, int64_t n, int64_t k, unsigned seed) {
  unsigned s = seed;
  int64_t stride;
  uint8_t *w = make_weights(t, n, k, &s, &stride);
  float *a = malloc(sizeof(float) * (size_t)(m * k + 1));
  float *want = malloc(sizeof(float) * (size_t)(m * n + 1)), *got = malloc(sizeof(float) * (size_t)(m * n + 1));
  for (int64_t i = 0; i < m * k; i++) a[i] = rnd(&s) * (i % 97 == 0 ? 50.0f : 1.0f);
  if (m > 1) /* an all-zero block and a small one */
    for (int64_t i = 0; i < 32 && i < k; i++) a[k + i] = 0.0f, a[i] *= 1e-30f;
  const fer_qmatrix q = {w, (uint64_t)(n * stride), t, 0, n, k, stride};
  fer_threadpool *p1 = pool_at(FER_ISA_PORTABLE, 1);
  run_i8(p1, a, m, k, &q, want);
  fer_threadpool_free(p1);
  int bad_tol = 0, bad_bits = 0;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++)
      bad_tol += !new_within_tolerance(t, w + j * stride, a + i * k, k, want[i * n + j], &worst_ratio);
  CHECK(bad_tol == 0);
  const fer_isa levels[2] = {FER_ISA_PORTABLE, FER_ISA_AVX2};
  for (int l = 0; l < 2; l++)
    for (uint32_t th = 1; th <= 2; th++) {
      fer_threadpool *pool = pool_at(levels[l], th);
      if (pool == NULL) {
        printf("SKIPPED: quant_i8_test at ISA level %d (not on this CPU)\n", (int)levels[l]);
        continue;
      }
      memset(got, 0xff, sizeof(float) * (size_t)(m * n));
      run_i8(pool, a, m, k, &q, got);
      for (int64_t i = 0; i < m * n; i++) bad_bits += memcmp(&got[i], &want[i], 4) != 0;
      if (th == 1 && m > 1)
        for (int64_t i = 0; i < m; i++) {
          run_i8(pool, a + i * k, 1, k, &q, got);
          bad_bits += memcmp(got, want + i * n, sizeof(float) * (size_t)n) != 0;
        }
      fer_threadpool_free(pool);
    }
  if (bad_tol || bad_bits) printf("  %s %lldx%lldx%lld: %d outside the tolerance, %d bits differ\n",
                                  feri_dtype_name(t), (long long)m, (long long)k, (long long)n, bad_tol, bad_bits);
  CHECK(bad_bits == 0);
  free(w);
  free(a);
  free(want);
  free(got);
}

/* The x86 tables directly on every format: AVX2 and AVX512-VNNI equal the portable one, for
 * 1, 2, 3, 4 and 16 rows of W and 1, 2, 3, 4, 5, 13 and 64 rows of A (every path of the tables:
 * one or two rows, groups of four and of eight, full and partial). */
static void test_new_tables(void) {
#if defined(__x86_64__)
  const uint64_t f = fer_cpu_features();
  const uint64_t avx2 = FER_CPU_FEATURE_AVX2 | FER_CPU_FEATURE_FMA | FER_CPU_FEATURE_F16C;
  const int has_avx2 = (f & avx2) == avx2;
  const int has_vnni = has_avx2 && (f & FER_CPU_FEATURE_AVX512VL) && (f & FER_CPU_FEATURE_AVX512VNNI);
  if (!has_avx2) {
    printf("SKIPPED: quant_i8_test new-format tables (no AVX2)\n");
    return;
  }
  if (!has_vnni) printf("SKIPPED: quant_i8_test new-format VNNI table (not on this CPU)\n");
  const feri_qi8_ops *tables[3] = {&feri_qi8_ops_portable, &feri_qi8_ops_avx2, &feri_qi8_ops_avx512vnni};
  unsigned s = 1234;
  enum { K = 768, RA = FERI_QI8_RA, RW = FERI_QI8_RW };
  static const int ras[7] = {1, 2, 3, 4, 5, 13, RA}, rws[5] = {1, 2, 3, 4, RW};
  for (int fi = 0; fi < 13; fi++) { /* the formats of issue 19, then the first four */
    const fer_dtype t = fi < 9 ? NEW_FORMATS[fi] : FORMATS[fi - 9];
    const int64_t be = feri_qi8_block_elems(t), nb = K / be;
    int64_t stride;
    uint8_t *w = make_weights(t, RW, K, &s, &stride);
    static float x[RA][K];
    for (int i = 0; i < RA * K; i++) x[i / K][i % K] = rnd(&s);
    x[1][5] = -x[1][5] * 7.0f;
    for (int i = 0; i < RA * K; i += 61) x[i / K][i % K] = (float)((int)(next(&s) % 255) - 127) * 0.25f; /* ties */
    static int8_t q[3][RA * K];
    static float d[3][RA * K / 32];
    static int32_t sm[3][RA * K / 32];
    static int16_t bs[3][RA * K / 16];
    static float y[3][5][7][RA * RW];
    memset(y, 0, sizeof y);
    for (int ti = 0; ti < (has_vnni ? 3 : 2); ti++) {
      for (int i = 0; i < RA; i++) {
        if (be == 256) tables[ti]->quantize_k(x[i], nb, q[ti] + i * K, d[ti] + i * nb, bs[ti] + i * nb * 16);
        else tables[ti]->quantize(x[i], nb, q[ti] + i * K, d[ti] + i * nb, sm[ti] + i * nb);
      }
      const feri_q8_rows rows = {q[ti], d[ti], be == 256 ? NULL : sm[ti], be == 256 ? bs[ti] : NULL, K, nb};
      for (int wi = 0; wi < 5; wi++)
        for (int ai = 0; ai < 7; ai++) tables[ti]->dot(t, w, stride, rws[wi], &rows, 0, ras[ai], y[ti][wi][ai], RW);
    }
    for (int ti = 1; ti < (has_vnni ? 3 : 2); ti++) {
      CHECK(memcmp(q[0], q[ti], sizeof q[0]) == 0);
      CHECK(memcmp(d[0], d[ti], sizeof d[0]) == 0);
      CHECK(memcmp(bs[0], bs[ti], sizeof bs[0]) == 0);
      CHECK(memcmp(sm[0], sm[ti], sizeof sm[0]) == 0);
      const int same = memcmp(y[0], y[ti], sizeof y[0]) == 0;
      if (!same) printf("  %s: table %d differs from the portable one\n", feri_dtype_name(t), ti);
      CHECK(same);
    }
    free(w);
  }
#endif
}

/* Non-finite and tiny activation blocks, workspace and descriptor refusals for the new formats. */
static void test_new_special(void) {
  for (int fi = 0; fi < 9; fi++) {
    const fer_dtype t = NEW_FORMATS[fi];
    const int64_t be = feri_qi8_block_elems(t), k = 2 * be;
    unsigned s = 77 + (unsigned)fi;
    int64_t stride;
    uint8_t *w = make_weights(t, 5, k, &s, &stride);
    const fer_qmatrix q = {w, (uint64_t)(5 * stride), t, 0, 5, k, stride};
    static float a[4][512], out[4][5], zeroed[4][5];
    for (int i = 0; i < 4 * k; i++) a[i / k][i % k] = rnd(&s);
    a[0][be + 3] = NAN;      /* row 0: a NaN in the second block */
    a[1][1] = -INFINITY;     /* row 1: an infinity in the first */
    /* row 2: a tiny first block (127 / amax overflows) and a small second one, so that anything
     * the first one added would show */
    for (int i = 0; i < be; i++) a[2][i] = (i % 3 - 1) * 1e-38f, a[2][be + i] *= 1e-30f;
    for (int ti = 0; ti < 2; ti++) {
      fer_threadpool *pool = pool_at(ti ? FER_ISA_AVX2 : FER_ISA_PORTABLE, 2);
      if (pool == NULL) continue;
      for (int i = 0; i < 4; i++) run_i8(pool, a[i], 1, k, &q, out[i]);
      float b2[512];
      memcpy(b2, a[2], sizeof b2);
      for (int i = 0; i < be; i++) b2[i] = 0.0f;
      run_i8(pool, b2, 1, k, &q, zeroed[2]);
      for (int j = 0; j < 5; j++) {
        CHECK(isnan(out[0][j]) && isnan(out[1][j]));
        CHECK(memcmp(&out[2][j], &zeroed[2][j], 4) == 0 && out[2][j] != 0.0f && isfinite(out[3][j]));
      }
      fer_threadpool_free(pool);
    }
    /* workspace: one row of K codes, then the scales and the sums (s or sixteen int16 a block),
     * each part rounded up to 64 bytes */
    fer_tensor ta = feri_tensor_2d(a[3], FER_DTYPE_F32, 1, k), to = feri_tensor_2d(out[3], FER_DTYPE_F32, 1, 5);
    size_t need = 0;
    CHECK_STATUS(fer_matmul_quant_i8_workspace_bytes(NULL, &ta, &q, &to, &need), FER_STATUS_OK);
    CHECK(need == (size_t)k + 64 + 64);
    static _Alignas(64) char ws[1024];
    CHECK_STATUS(fer_matmul_quant_i8(NULL, &ta, &q, &to, ws, need - 1), FER_STATUS_BUFFER_TOO_SMALL);
    CHECK_STATUS(fer_matmul_quant_i8(NULL, &ta, &q, &to, ws, need), FER_STATUS_OK);
    /* descriptors: a truncated buffer, a short stride, cols not a multiple of the block */
    fer_qmatrix bad = q;
    bad.bytes = (uint64_t)(4 * stride + 2 * (int64_t)feri_qi8_block_bytes(t) - 1);
    CHECK_STATUS(fer_matmul_quant_i8(NULL, &ta, &bad, &to, NULL, 0), FER_STATUS_CORRUPT);
    bad = q;
    bad.row_stride = (int64_t)feri_qi8_block_bytes(t);
    CHECK_STATUS(fer_matmul_quant_i8(NULL, &ta, &bad, &to, NULL, 0), FER_STATUS_INVALID_ARG);
    bad = q;
    bad.cols = k - 16;
    fer_tensor ta16 = feri_tensor_2d(a[3], FER_DTYPE_F32, 1, k - 16);
    CHECK_STATUS(fer_matmul_quant_i8(NULL, &ta16, &bad, &to, NULL, 0), FER_STATUS_INVALID_ARG);
    free(w);
  }
}

static fer_threadpool *pool_at(fer_isa isa, uint32_t threads) {
  fer_threadpool_options o;
  fer_threadpool_options_init(&o);
  o.n_threads = threads;
  o.isa = isa;
  fer_threadpool *pool = NULL;
  return fer_threadpool_create(&o, &pool) == FER_STATUS_OK ? pool : NULL;
}

static void test_shape(fer_dtype t, int64_t m, int64_t n, int64_t k, unsigned seed) {
  unsigned s = seed;
  int64_t stride;
  uint8_t *w = make_weights(t, n, k, &s, &stride);
  float *a = malloc(sizeof(float) * (size_t)(m * k + 1));
  float *want = malloc(sizeof(float) * (size_t)(m * n + 1)), *got = malloc(sizeof(float) * (size_t)(m * n + 1));
  for (int64_t i = 0; i < m * k; i++) a[i] = rnd(&s) * (i % 97 == 0 ? 50.0f : 1.0f);
  if (m > 1) /* an all-zero block and a tiny block */
    for (int64_t i = 0; i < 32 && i < k; i++) a[k + i] = 0.0f, a[i] *= 1e-30f;
  const fer_qmatrix q = {w, (uint64_t)(n * stride), t, 0, n, k, stride};
  int bad_ref = 0, bad_tol = 0;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      want[i * n + j] = reference_output(t, w + j * stride, a + i * k, k);
      if (!within_tolerance(t, w + j * stride, a + i * k, k, want[i * n + j])) bad_tol++;
    }
  CHECK(bad_tol == 0);
  fer_tensor ta = feri_tensor_2d(a, FER_DTYPE_F32, m, k), to = feri_tensor_2d(got, FER_DTYPE_F32, m, n);
  const fer_isa levels[2] = {FER_ISA_PORTABLE, FER_ISA_AVX2};
  for (int l = 0; l < 2; l++)
    for (uint32_t th = 1; th <= 3; th++) {
      fer_threadpool *pool = pool_at(levels[l], th);
      if (pool == NULL) {
        printf("SKIPPED: quant_i8_test at ISA level %d (not on this CPU)\n", (int)levels[l]);
        continue;
      }
      memset(got, 0xff, sizeof(float) * (size_t)(m * n));
      CHECK_STATUS(fer_matmul_quant_i8(pool, &ta, &q, &to, NULL, 0), FER_STATUS_OK);
      for (int64_t i = 0; i < m * n; i++) bad_ref += memcmp(&got[i], &want[i], 4) != 0;
      if (th == 1 && m > 1) { /* each row alone (M = 1) gives the same bits */
        for (int64_t i = 0; i < m; i++) {
          float row[512];
          fer_tensor ra = feri_tensor_2d(a + i * k, FER_DTYPE_F32, 1, k), ro = feri_tensor_2d(row, FER_DTYPE_F32, 1, n);
          CHECK_STATUS(fer_matmul_quant_i8(pool, &ra, &q, &ro, NULL, 0), FER_STATUS_OK);
          CHECK(memcmp(row, want + i * n, sizeof(float) * (size_t)n) == 0);
        }
      }
      fer_threadpool_free(pool);
    }
  CHECK(bad_ref == 0);
  free(w);
  free(a);
  free(want);
  free(got);
}

/* The x86 tables directly: AVX2 and, where the CPU has it, AVX512-VNNI equal the portable one. */
static void test_tables(void) {
#if defined(__x86_64__)
  const uint64_t f = fer_cpu_features();
  const int has_avx2 = (f & (FER_CPU_FEATURE_AVX2 | FER_CPU_FEATURE_FMA | FER_CPU_FEATURE_F16C)) ==
                       (FER_CPU_FEATURE_AVX2 | FER_CPU_FEATURE_FMA | FER_CPU_FEATURE_F16C);
  const int has_vnni = has_avx2 && (f & FER_CPU_FEATURE_AVX512VL) && (f & FER_CPU_FEATURE_AVX512VNNI);
  if (!has_avx2) {
    printf("SKIPPED: quant_i8_test tables (no AVX2)\n");
    return;
  }
  if (!has_vnni) printf("SKIPPED: quant_i8_test VNNI table (not on this CPU)\n");
  const feri_qi8_ops *tables[3] = {&feri_qi8_ops_portable, &feri_qi8_ops_avx2, &feri_qi8_ops_avx512vnni};
  unsigned s = 99;
  enum { K = 96, NB = K / 32 };
  for (int fi = 0; fi < 4; fi++) {
    const fer_dtype t = FORMATS[fi];
    int64_t stride;
    uint8_t *w = make_weights(t, 4, K, &s, &stride);
    float x[2][K];
    for (int i = 0; i < 2 * K; i++) x[i / K][i % K] = rnd(&s);
    x[1][5] = -x[1][5] * 7.0f; /* Q8_0 codes of -128 are random bytes above; big activations too */
    float y[3][8];
    for (int ti = 0; ti < (has_vnni ? 3 : 2); ti++) {
      int8_t qbuf[2][K];
      float d[2][NB];
      int32_t sm[2][NB];
      for (int i = 0; i < 2; i++) tables[ti]->quantize(x[i], NB, qbuf[i], d[i], sm[i]);
      int8_t qflat[2 * K];
      float dflat[2 * NB];
      int32_t sflat[2 * NB];
      for (int i = 0; i < 2; i++) {
        memcpy(qflat + i * K, qbuf[i], K);
        memcpy(dflat + i * NB, d[i], sizeof d[i]);
        memcpy(sflat + i * NB, sm[i], sizeof sm[i]);
      }
      const feri_q8_rows rows = {qflat, dflat, sflat, NULL, K, NB};
      tables[ti]->dot(t, w, stride, 4, &rows, 0, 2, y[ti], 4);
    }
    CHECK(memcmp(y[0], y[1], sizeof y[0]) == 0);
    if (has_vnni) CHECK(memcmp(y[0], y[2], sizeof y[0]) == 0);
    free(w);
  }
#endif
}

static void test_special_values(void) {
  unsigned s = 7;
  int64_t stride;
  uint8_t *w = make_weights(FER_DTYPE_Q4_1, 3, 64, &s, &stride);
  const fer_qmatrix q = {w, (uint64_t)(3 * stride), FER_DTYPE_Q4_1, 0, 3, 64, stride};
  float a[3][64], out[3][3];
  for (int i = 0; i < 64; i++) a[0][i] = rnd(&s), a[1][i] = 0.0f, a[2][i] = rnd(&s);
  a[0][40] = INFINITY;
  a[2][3] = NAN;
  fer_tensor ta = feri_tensor_2d(a, FER_DTYPE_F32, 3, 64), to = feri_tensor_2d(out, FER_DTYPE_F32, 3, 3);
  CHECK_STATUS(fer_matmul_quant_i8(NULL, &ta, &q, &to, NULL, 0), FER_STATUS_OK);
  for (int j = 0; j < 3; j++) CHECK(isnan(out[0][j]) && out[1][j] == 0.0f && isnan(out[2][j]));
  /* f16 activations and an f16 output with a column stride: the values of the f32 route */
  uint16_t a16[64], o16[3 * 2];
  float a32[64], o32[3];
  for (int i = 0; i < 64; i++) a16[i] = feri_f32_to_f16(rnd(&s)), a32[i] = feri_f16_to_f32(a16[i]);
  fer_tensor t16 = feri_tensor_2d(a16, FER_DTYPE_F16, 1, 64), t32 = feri_tensor_2d(a32, FER_DTYPE_F32, 1, 64);
  fer_tensor to16 = feri_tensor_2d(o16, FER_DTYPE_F16, 1, 3), to32 = feri_tensor_2d(o32, FER_DTYPE_F32, 1, 3);
  to16.strides[1] = 4;
  CHECK_STATUS(fer_matmul_quant_i8(NULL, &t16, &q, &to16, NULL, 0), FER_STATUS_OK);
  CHECK_STATUS(fer_matmul_quant_i8(NULL, &t32, &q, &to32, NULL, 0), FER_STATUS_OK);
  for (int j = 0; j < 3; j++) CHECK(o16[2 * j] == feri_f32_to_f16(o32[j]));
  free(w);
}

static void test_bad_arguments(void) {
  unsigned s = 3;
  int64_t stride;
  uint8_t *w = make_weights(FER_DTYPE_Q8_0, 4, 64, &s, &stride);
  fer_qmatrix q = {w, (uint64_t)(4 * stride), FER_DTYPE_Q8_0, 0, 4, 64, stride};
  float a[64] = {0}, out[4];
  fer_tensor ta = feri_tensor_2d(a, FER_DTYPE_F32, 1, 64), to = feri_tensor_2d(out, FER_DTYPE_F32, 1, 4);
  CHECK_STATUS(fer_matmul_quant_i8(NULL, NULL, &q, &to, NULL, 0), FER_STATUS_NULL_ARG);
  CHECK_STATUS(fer_matmul_quant_i8(NULL, &ta, NULL, &to, NULL, 0), FER_STATUS_NULL_ARG);
  fer_tensor wrong = feri_tensor_2d(out, FER_DTYPE_F32, 1, 3);
  CHECK_STATUS(fer_matmul_quant_i8(NULL, &ta, &q, &wrong, NULL, 0), FER_STATUS_SHAPE_MISMATCH);
  fer_tensor ta32 = feri_tensor_2d(a, FER_DTYPE_F32, 2, 32);
  CHECK_STATUS(fer_matmul_quant_i8(NULL, &ta32, &q, &to, NULL, 0), FER_STATUS_SHAPE_MISMATCH);
  q.bytes = (uint64_t)(3 * stride + 2 * 34 - 1); /* the last row truncated by one byte */
  CHECK_STATUS(fer_matmul_quant_i8(NULL, &ta, &q, &to, NULL, 0), FER_STATUS_CORRUPT);
  q.bytes = (uint64_t)(4 * stride);
  size_t need = 0;
  CHECK_STATUS(fer_matmul_quant_i8_workspace_bytes(NULL, &ta, &q, &to, &need), FER_STATUS_OK);
  CHECK(need == 64 + 2 * 64); /* one row: 64 codes, two scales each padded to 64 bytes */
  _Alignas(64) char ws[256];
  CHECK_STATUS(fer_matmul_quant_i8(NULL, &ta, &q, &to, ws, need - 1), FER_STATUS_BUFFER_TOO_SMALL);
  CHECK_STATUS(fer_matmul_quant_i8(NULL, &ta, &q, &to, ws, need), FER_STATUS_OK);
  fer_tensor overlap = feri_tensor_2d(a, FER_DTYPE_F32, 1, 4);
  CHECK_STATUS(fer_matmul_quant_i8(NULL, &ta, &q, &overlap, NULL, 0), FER_STATUS_INVALID_ARG);
  free(w);
}

/* Every panel format, rows that do not fill a panel, panels longer than a prefetch's four records,
 * and every row group of the panel kernel (1, 4, 8, partial, more than 64): the panel route equals
 * the blocks' route bit for bit, at the portable level (which ignores the panel) and at AVX2
 * (AVX512-VNNI where the CPU has it), 1 and 3 threads; a panel of another shape is ignored; the
 * vector packer writes the scalar packer's bytes. */
static void test_panels(void) {
  static const fer_dtype types[9] = {FER_DTYPE_Q4_0, FER_DTYPE_Q4_1, FER_DTYPE_Q5_0,
                                     FER_DTYPE_Q5_1, FER_DTYPE_Q8_0, FER_DTYPE_IQ4_NL,
                                     FER_DTYPE_Q4_K, FER_DTYPE_Q5_K, FER_DTYPE_Q6_K};
  static const int64_t ns[4] = {1, 17, 40, 96}, ks[3] = {32, 96, 1088}, ms[8] = {1, 2, 3, 4, 5, 13, 64, 70};
  unsigned s = 4242;
  int bad = 0, runs = 0;
  for (int ti = 0; ti < 9; ti++)
    for (int ni = 0; ni < 4; ni++)
      for (int ki = 0; ki < 3; ki++) {
        const fer_dtype t = types[ti];
        static const int64_t ks_super[3] = {256, 768, 2304}; /* whole super-blocks */
        const int64_t n = ns[ni], k = feri_qi8_is_super(t) ? ks_super[ki] : ks[ki];
        int64_t stride;
        uint8_t *w = make_weights(t, n, k, &s, &stride);
        const fer_qmatrix q = {w, (uint64_t)(n * stride), t, 0, n, k, stride};
        feri_qpanel panel, scalar;
        CHECK_STATUS(feri_qpanel_pack(&q, &panel), FER_STATUS_OK);
        CHECK_STATUS(feri_qpanel_pack_with(&q, 0, &scalar), FER_STATUS_OK); /* the two packers agree */
        bad += memcmp(panel.data, scalar.data, (size_t)((n + 15) / 16 * scalar.nb) * scalar.record_bytes) != 0;
        feri_qpanel_free(&scalar);
        float *a = malloc(sizeof(float) * (size_t)(70 * k)), *want = malloc(sizeof(float) * (size_t)(70 * n)),
              *got = malloc(sizeof(float) * (size_t)(70 * n));
        for (int64_t i = 0; i < 70 * k; i++) a[i] = rnd(&s);
        for (int mi = 0; mi < 8; mi++)
          for (int lv = 0; lv < 2; lv++)
            for (uint32_t th = 1; th <= 3; th += 2) {
              fer_threadpool *pool = pool_at(lv ? FER_ISA_AVX2 : FER_ISA_PORTABLE, th);
              if (!pool) continue;
              const int64_t m = ms[mi];
              fer_tensor ta = feri_tensor_2d(a, FER_DTYPE_F32, m, k), to = feri_tensor_2d(got, FER_DTYPE_F32, m, n);
              run_i8(pool, a, m, k, &q, want);
              memset(got, 0xff, sizeof(float) * (size_t)(m * n));
              CHECK_STATUS(feri_matmul_quant_i8_panel(pool, &ta, &q, &panel, &to, NULL, 0), FER_STATUS_OK);
              bad += memcmp(got, want, sizeof(float) * (size_t)(m * n)) != 0;
              runs++;
              fer_threadpool_free(pool);
            }
        if (ni == 1 && ki == 1) { /* a panel of another matrix (one row more) is ignored */
          fer_qmatrix q2 = q;
          q2.rows = n - 1;
          fer_tensor ta = feri_tensor_2d(a, FER_DTYPE_F32, 3, k), to = feri_tensor_2d(got, FER_DTYPE_F32, 3, n - 1);
          CHECK_STATUS(fer_matmul_quant_i8(NULL, &ta, &q2, &to, NULL, 0), FER_STATUS_OK);
          memcpy(want, got, sizeof(float) * (size_t)(3 * (n - 1)));
          CHECK_STATUS(feri_matmul_quant_i8_panel(NULL, &ta, &q2, &panel, &to, NULL, 0), FER_STATUS_OK);
          bad += memcmp(got, want, sizeof(float) * (size_t)(3 * (n - 1))) != 0;
        }
        feri_qpanel_free(&panel);
        free(w);
        free(a);
        free(want);
        free(got);
      }
  if (bad) printf("  panels: %d of %d runs differ from the blocks' route\n", bad, runs);
  CHECK(bad == 0 && runs > 0);
  feri_qpanel p;
  const fer_qmatrix mx = {NULL, 0, FER_DTYPE_MXFP4, 0, 0, 32, 17};
  CHECK_STATUS(feri_qpanel_pack(&mx, &p), FER_STATUS_UNSUPPORTED);
}

/* kB of AnonHugePages in the mapping of /proc/self/smaps that holds address p (-1: not found). */
static long huge_kb_at(const void *p) {
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f) return -1;
  char line[512];
  int inside = 0;
  long kb = -1;
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) { /* a mapping's first line (no field reads two) */
      inside = (uintptr_t)p >= lo && (uintptr_t)p < hi;
    } else if (inside && sscanf(line, "AnonHugePages: %ld kB", &kb) == 1) {
      break;
    }
  }
  fclose(f);
  return kb;
}

/* A panel of several MiB sits on transparent huge pages where the kernel offers them (the
 * kernels stream panels; BENCHMARKS.md measures the difference). EVIDENCE: C-Q-204 */
static void test_panel_huge_pages(void) {
  char mode[128] = "";
  FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  if (f) {
    if (!fgets(mode, sizeof mode, f)) mode[0] = 0;
    fclose(f);
  }
  if (!strstr(mode, "[always]") && !strstr(mode, "[madvise]")) {
    printf("  panel huge pages: SKIPPED (transparent huge pages: %s)\n", mode[0] ? mode : "unknown");
    return;
  }
  unsigned s = 99;
  int64_t stride;
  const int64_t n = 1024, k = 8192; /* 4.5 MiB of Q4_0 */
  uint8_t *w = make_weights(FER_DTYPE_Q4_0, n, k, &s, &stride);
  const fer_qmatrix q = {w, (uint64_t)(n * stride), FER_DTYPE_Q4_0, 0, n, k, stride};
  feri_qpanel panel;
  CHECK_STATUS(feri_qpanel_pack_with(&q, 0, &panel), FER_STATUS_OK);
  const long kb = huge_kb_at(panel.data);
  printf("  panel huge pages: %ld kB of the %zu-byte panel on huge pages\n", kb,
         (size_t)(n / 16 * (k / 32)) * panel.record_bytes);
  CHECK(kb >= 2048);
  feri_qpanel_free(&panel);
  free(w);
}

int main(void) {
  test_panels();
  test_panel_huge_pages();
  const int64_t shapes[][3] = {{1, 1, 32}, {1, 7, 64}, {1, 70, 576}, {2, 4, 32}, {3, 9, 96},
                               {5, 13, 128}, {17, 33, 64}, {33, 5, 32}};
  for (int fi = 0; fi < 4; fi++)
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
      test_shape(FORMATS[fi], shapes[si][0], shapes[si][1], shapes[si][2], (unsigned)(fi * 100 + si));
  const int64_t new_shapes[][3] = {{1, 1, 256}, {1, 7, 512}, {1, 70, 1536}, {2, 4, 256},
                                   {3, 9, 768}, {7, 13, 512}, {17, 33, 256}, {33, 5, 256}};
  for (int fi = 0; fi < 9; fi++)
    for (size_t si = 0; si < sizeof new_shapes / sizeof new_shapes[0]; si++)
      test_new_shape(NEW_FORMATS[fi], new_shapes[si][0], new_shapes[si][1], new_shapes[si][2],
                     (unsigned)(1000 + fi * 100 + si));
  printf("quant_i8_test: worst |error| / bound of the new formats %.3f\n", worst_ratio);
  test_tables();
  test_new_tables();
  test_special_values();
  test_new_special();
  test_bad_arguments();
  return feri_test_finish("quant_i8_test");
}
