/* matmul_portable.c: the reference level of fer_matmul, scalar C with fmaf. The AVX2 level
 * performs exactly these operations in this order (see matmul.h). */
#include <math.h>

#include "core/dtype.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"

float feri_mm_b_at(const feri_mm_b *b, int64_t k, int64_t n) {
  if (b->qbytes != 0) {
    const int64_t be = feri_qblock_elems(b->dtype);
    return feri_qblock_value(b->dtype, (const uint8_t *)b->data + n * b->sn + k / be * b->qbytes, (int)(k % be));
  }
  return feri_elem_load(b->data + k * b->sk + n * b->sn, b->dtype);
}

/* Blocks are decoded whole and their overlap with [k0, k0 + kc) copied, so k0 and kc need not be
 * multiples of the block (32 or 256 elements). */
void feri_pack_b_quant(const feri_mm_b *b, int64_t k0, int64_t kc, int64_t n0, int64_t nc,
                       float *dst) {
  const int64_t be = feri_qblock_elems(b->dtype);
  float vals[FERI_QBLOCK_MAX];
  for (int64_t p = 0; p * FERI_MM_NR < nc; p++) {
    float *panel = dst + p * kc * FERI_MM_NR;
    for (int64_t j = 0; j < FERI_MM_NR; j++) {
      const int64_t n = p * FERI_MM_NR + j;
      if (n >= nc) {
        for (int64_t k = 0; k < kc; k++) panel[k * FERI_MM_NR + j] = 0.0f;
        continue;
      }
      const uint8_t *row = (const uint8_t *)b->data + (n0 + n) * b->sn;
      for (int64_t k = 0; k < kc;) {
        const int64_t at = k0 + k, off = at % be;
        const int64_t cnt = be - off < kc - k ? be - off : kc - k;
        feri_qblock_dequant(b->dtype, row + at / be * b->qbytes, vals);
        for (int64_t i = 0; i < cnt; i++) panel[(k + i) * FERI_MM_NR + j] = vals[off + i];
        k += cnt;
      }
    }
  }
}

void feri_gemv_quant(const float *x, int64_t K, const feri_mm_b *b, int64_t n0, int64_t nc, float *y) {
  const int64_t be = feri_qblock_elems(b->dtype);
  float vals[FERI_QBLOCK_MAX];
  for (int64_t j = 0; j < nc; j++) {
    const uint8_t *row = (const uint8_t *)b->data + (n0 + j) * b->sn;
    float acc = 0.0f;
    for (int64_t k = 0; k < K; k += be) {
      feri_qblock_dequant(b->dtype, row + k / be * b->qbytes, vals);
      for (int64_t i = 0; i < be; i++) acc = fmaf(x[k + i], vals[i], acc);
    }
    y[j] = acc;
  }
}

void feri_pack_b_strided(const feri_mm_b *b, int64_t k0, int64_t kc, int64_t n0, int64_t nc,
                         float *dst) {
  if (b->qbytes != 0) {
    feri_pack_b_quant(b, k0, kc, n0, nc, dst);
    return;
  }
  for (int64_t p = 0; p * FERI_MM_NR < nc; p++) {
    float *panel = dst + p * kc * FERI_MM_NR;
    for (int64_t k = 0; k < kc; k++)
      for (int64_t j = 0; j < FERI_MM_NR; j++) {
        int64_t n = p * FERI_MM_NR + j;
        panel[k * FERI_MM_NR + j] = n < nc ? feri_mm_b_at(b, k0 + k, n0 + n) : 0.0f;
      }
  }
}

void feri_widen_strided(const char *src, int64_t stride, fer_dtype dtype, int64_t n, float *dst) {
  feri_mm_b row = {src, dtype, 0, stride, 0, 0};
  for (int64_t i = 0; i < n; i++) dst[i] = feri_mm_b_at(&row, 0, i);
}

static void micro_portable(int64_t kc, const float *a, int64_t lda, const float *b, float *c,
                           int64_t ldc, int mr, int first) {
  for (int r = 0; r < mr; r++)
    for (int j = 0; j < FERI_MM_NR; j++) {
      float acc = first ? 0.0f : c[r * ldc + j];
      for (int64_t k = 0; k < kc; k++)
        acc = fmaf(a[r * lda + k], b[k * FERI_MM_NR + j], acc);
      c[r * ldc + j] = acc;
    }
}

void feri_gemv_strided(const float *x, int64_t K, const feri_mm_b *b, int64_t n0, int64_t nc,
                       float *y) {
  if (b->qbytes != 0) {
    feri_gemv_quant(x, K, b, n0, nc, y);
    return;
  }
  for (int64_t j = 0; j < nc; j++) {
    float acc = 0.0f;
    for (int64_t k = 0; k < K; k++) acc = fmaf(x[k], feri_mm_b_at(b, k, n0 + j), acc);
    y[j] = acc;
  }
}

const feri_matmul_ops feri_matmul_ops_portable = {
    .mr = FERI_MM_MR, .nr = FERI_MM_NR, .mc = FERI_MM_MC, .kc = FERI_MM_KC, .nc = FERI_MM_NC,
    .pack_b = feri_pack_b_strided,
    .micro = micro_portable,
    .gemv_kn = feri_gemv_strided,
    .gemv_nk = feri_gemv_strided,
    .widen = feri_widen_strided,
};

const feri_matmul_ops *feri_matmul_ops_for(fer_isa isa) {
#if defined(__x86_64__)
  if (isa == FER_ISA_AVX512) return &feri_matmul_ops_avx512;
  if (isa == FER_ISA_AVX2) return &feri_matmul_ops_avx2;
#else
  (void)isa;
#endif
  return &feri_matmul_ops_portable;
}
