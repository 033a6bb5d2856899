/* quant_i8_test.c: fer_matmul_quant_i8 in every format against
 *  - the definition (quant_i8.h) written out here in double-free scalar C: bit for bit;
 *  - the exact product of the dequantized weights and A in double: within the stated tolerance;
 *  - itself: every table (portable, AVX2, AVX512-VNNI where the CPU has it), thread counts 1-3,
 *    M = 1 against M > 1 rows, f16 A and a strided out: bit for bit;
 * plus non-finite and zero activations and bad arguments. EVIDENCE: C-Q-008 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/tensor.h"
#include "kernels/quant.h"
#include "kernels/quant_i8.h"
#include "testing/check.h"

static const fer_dtype FORMATS[4] = {FER_DTYPE_Q4_0, FER_DTYPE_Q4_1, FER_DTYPE_Q8_0, FER_DTYPE_MXFP4};

static unsigned next(unsigned *s) {
  *s = *s * 1664525u + 1013904223u;
  return *s >> 8;
}

static float rnd(unsigned *s) { return (float)((int)(next(s) % 20001) - 10000) / 2500.0f; }

/* A [n, k] matrix of valid blocks with varied scales (including a few tiny and large ones). */
static uint8_t *make_weights(fer_dtype t, int64_t n, int64_t k, unsigned *s, int64_t *stride) {
  const size_t bb = feri_qblock_bytes(t);
  *stride = (int64_t)((size_t)(k / 32) * bb + 3); /* padded rows: row_stride is honoured */
  uint8_t *w = malloc((size_t)(n * *stride) + 1);
  for (int64_t i = 0; i < n * *stride; i++) w[i] = (uint8_t)next(s);
  for (int64_t r = 0; r < n; r++)
    for (int64_t b = 0; b < k / 32; b++) {
      uint8_t *blk = w + r * *stride + b * (int64_t)bb;
      if (t == FER_DTYPE_MXFP4) {
        blk[0] = (uint8_t)(120 + next(s) % 12);
      } else {
        const uint16_t d = feri_f32_to_f16((float)(next(s) % 1000 + 1) / 40000.0f);
        memcpy(blk, &d, 2);
        if (t == FER_DTYPE_Q4_1) {
          const uint16_t m = feri_f32_to_f16(-(float)(next(s) % 1000) / 4000.0f);
          memcpy(blk + 2, &m, 2);
        }
      }
    }
  return w;
}

/* The definition of one output, written from quant_i8.h without looking at the kernels. */
static float reference_output(fer_dtype t, const uint8_t *row, const float *x, int64_t k) {
  const size_t bb = feri_qblock_bytes(t);
  float lanes[8] = {0}, summ = 0.0f;
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
    const float s = d * (float)qsum;
    const uint8_t *blk = row + b * (int64_t)bb;
    int code[32];
    float dw, mw = 0.0f;
    for (int i = 0; i < 32; i++) {
      if (t == FER_DTYPE_Q8_0) code[i] = (int8_t)blk[2 + i];
      else {
        const uint8_t *nib = blk + (t == FER_DTYPE_MXFP4 ? 1 : t == FER_DTYPE_Q4_0 ? 2 : 4);
        const int n = i < 16 ? nib[i] & 15 : nib[i - 16] >> 4;
        code[i] = t == FER_DTYPE_MXFP4 ? (int)(2.0f * feri_e2m1_values[n]) : n;
      }
    }
    dw = feri_qblock_scale(t, blk) * (t == FER_DTYPE_MXFP4 ? 0.5f : 1.0f);
    if (t == FER_DTYPE_Q4_1) mw = feri_qblock_min(blk);
    if (t == FER_DTYPE_Q4_0) mw = -8.0f * dw;
    for (int l = 0; l < 8; l++) {
      int isum = 0;
      for (int i = 4 * l; i < 4 * l + 4; i++) isum += code[i] * q[i];
      lanes[l] = fmaf((float)isum, dw * d, lanes[l]);
    }
    summ = fmaf(mw, s, summ);
  }
  const float v = ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) + ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
  return t == FER_DTYPE_Q4_0 || t == FER_DTYPE_Q4_1 ? v + summ : v;
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
      float d[2][NB], sm[2][NB];
      for (int i = 0; i < 2; i++) tables[ti]->quantize(x[i], NB, qbuf[i], d[i], sm[i]);
      int8_t qflat[2 * K];
      float dflat[2 * NB], sflat[2 * NB];
      for (int i = 0; i < 2; i++) {
        memcpy(qflat + i * K, qbuf[i], K);
        memcpy(dflat + i * NB, d[i], sizeof d[i]);
        memcpy(sflat + i * NB, sm[i], sizeof sm[i]);
      }
      const feri_q8_rows rows = {qflat, dflat, sflat, K, NB};
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

int main(void) {
  const int64_t shapes[][3] = {{1, 1, 32}, {1, 7, 64}, {1, 70, 576}, {2, 4, 32}, {3, 9, 96},
                               {5, 13, 128}, {17, 33, 64}, {33, 5, 32}};
  for (int fi = 0; fi < 4; fi++)
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
      test_shape(FORMATS[fi], shapes[si][0], shapes[si][1], shapes[si][2], (unsigned)(fi * 100 + si));
  test_tables();
  test_special_values();
  test_bad_arguments();
  return feri_test_finish("quant_i8_test");
}
