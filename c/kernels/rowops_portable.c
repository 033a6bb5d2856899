/* rowops_portable.c: the plain C inner loops, the reference every ISA level must equal. */
#include "core/dtype.h"
#include "kernels/fexp.h"
#include "kernels/rowops.h"

static void add_f32(const float *a, int sa, const float *b, int sb, float *out, size_t n) {
  for (size_t i = 0; i < n; i++) out[i] = a[i * (size_t)sa] + b[i * (size_t)sb];
}

static void add_f16(const uint16_t *a, int sa, const uint16_t *b, int sb, uint16_t *out, size_t n) {
  for (size_t i = 0; i < n; i++)
    out[i] = feri_f32_to_f16(feri_f16_to_f32(a[i * (size_t)sa]) + feri_f16_to_f32(b[i * (size_t)sb]));
}

static void add_bf16(const uint16_t *a, int sa, const uint16_t *b, int sb, uint16_t *out, size_t n) {
  for (size_t i = 0; i < n; i++)
    out[i] =
        feri_f32_to_bf16(feri_bf16_to_f32(a[i * (size_t)sa]) + feri_bf16_to_f32(b[i * (size_t)sb]));
}

static void sum_f32(const float *x, size_t n, float partial[FERI_SUM_LANES]) {
  for (size_t j = 0; j < n; j++) partial[j % FERI_SUM_LANES] += x[j];
}

static void sum_f16(const uint16_t *x, size_t n, float partial[FERI_SUM_LANES]) {
  for (size_t j = 0; j < n; j++) partial[j % FERI_SUM_LANES] += feri_f16_to_f32(x[j]);
}

static void sum_bf16(const uint16_t *x, size_t n, float partial[FERI_SUM_LANES]) {
  for (size_t j = 0; j < n; j++) partial[j % FERI_SUM_LANES] += feri_bf16_to_f32(x[j]);
}

static void silu_f32(const float *x, const float *up, float *out, size_t n) {
  for (size_t i = 0; i < n; i++) out[i] = up ? feri_silu(x[i]) * up[i] : feri_silu(x[i]);
}

static void geglu_lut_f32(const float *lut, const float *x, const float *up, float *out, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const float v = x[i];
    out[i] = v <= -10.0f ? 0.0f : v >= 10.0f ? v * up[i] : lut[feri_f32_to_f16(v)] * up[i];
  }
}

float feri_sum_partials(const float partial[FERI_SUM_LANES]) {
  float lane[8];
  for (int l = 0; l < 8; l++)
    lane[l] = (partial[l] + partial[8 + l]) + (partial[16 + l] + partial[24 + l]);
  float q[4];
  for (int l = 0; l < 4; l++) q[l] = lane[l] + lane[l + 4];
  return (q[0] + q[2]) + (q[1] + q[3]);
}

const feri_rowops feri_rowops_portable = {
    .add_f32 = add_f32,
    .add_f16 = add_f16,
    .add_bf16 = add_bf16,
    .sum_f32 = sum_f32,
    .sum_f16 = sum_f16,
    .sum_bf16 = sum_bf16,
    .silu_f32 = silu_f32,
    .geglu_lut_f32 = geglu_lut_f32,
};

const feri_rowops *feri_rowops_for(fer_isa isa) {
#if defined(__x86_64__)
  if (isa == FER_ISA_AVX2 || isa == FER_ISA_AVX512) return &feri_rowops_avx2;
#else
  (void)isa;
#endif
  return &feri_rowops_portable;
}
