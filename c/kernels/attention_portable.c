/* attention_portable.c: the reference level of fer_attention's inner loops (see attention.h). */
#include <math.h>
#include <string.h>

#include "core/cpu.h"
#include "core/dtype.h"
#include "kernels/attention.h"
#include "kernels/fexp.h"

static float kv_at(const feri_kv_rows *r, int64_t j, int64_t e) {
  if (r->dtype == FER_DTYPE_Q8_0) {
    const char *b = r->base + j * r->row_stride + e / 32 * r->dim_stride;
    uint16_t h;
    memcpy(&h, b, 2);
    return (float)(int8_t)b[2 + e % 32] * feri_f16_to_f32(h);
  }
  return feri_elem_load(r->base + j * r->row_stride + e * r->dim_stride, r->dtype);
}

float feri_att_dot(const float *q, int64_t d, const feri_kv_rows *k, int64_t j) {
  float l[8] = {0};
  for (int64_t e = 0; e < d; e++) l[e % 8] = fmaf(q[e], kv_at(k, j, e), l[e % 8]);
  return feri_att_lanes8(l);
}

void feri_att_scores_ref(const float *q, int64_t q_stride, int64_t rows, int64_t d,
                         const feri_kv_rows *k, int64_t n, float scale, float *s, int64_t s_stride,
                         const feri_att_pf *pf) {
  (void)pf; /* the reference level leaves memory to the hardware */
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 0; j < n; j++) s[r * s_stride + j] = feri_att_dot(q + r * q_stride, d, k, j) * scale;
}

static float exp_shift_portable(float *s, int64_t n, float m) {
  float l[8] = {0};
  for (int64_t j = 0; j < n; j++) {
    s[j] = feri_fexp(s[j] - m);
    l[j % 8] += s[j];
  }
  return feri_att_lanes8(l);
}

static float row_max_portable(const float *s, int64_t n, float init) {
  float mx = init;
  for (int64_t j = 0; j < n; j++) {
    if (isnan(s[j])) return s[j];
    mx = s[j] > mx ? s[j] : mx;
  }
  return mx;
}

void feri_att_accumulate_ref(float *o, int64_t o_stride, int64_t rows, int64_t dv, const float *p,
                             int64_t p_stride, const feri_kv_rows *v, int64_t n, const float *corr,
                             const feri_att_pf *pf) {
  (void)pf;
  for (int64_t r = 0; r < rows; r++) {
    if (corr != NULL)
      for (int64_t e = 0; e < dv; e++) o[r * o_stride + e] *= corr[r];
    for (int64_t j = 0; j < n; j++)
      for (int64_t e = 0; e < dv; e++)
        o[r * o_stride + e] = fmaf(p[r * p_stride + j], kv_at(v, j, e), o[r * o_stride + e]);
  }
}

void feri_att_merge_ref(float *o, const float *ob, int64_t dv, float a, float b) {
  for (int64_t e = 0; e < dv; e++) o[e] = fmaf(o[e], a, ob[e] * b);
}

const feri_attention_ops feri_attention_ops_portable = {
    .scores = feri_att_scores_ref,
    .exp_shift = exp_shift_portable,
    .row_max = row_max_portable,
    .accumulate = feri_att_accumulate_ref,
    .merge = feri_att_merge_ref,
};

const feri_attention_ops *feri_attention_ops_for(fer_isa isa) {
#if defined(__x86_64__)
  if (isa == FER_ISA_AVX512) return &feri_attention_ops_avx512;
  if (isa == FER_ISA_AVX2)
    return fer_cpu_features() & FER_CPU_FEATURE_AVX512F ? &feri_attention_ops_avx512 : &feri_attention_ops_avx2;
#else
  (void)isa;
#endif
  return &feri_attention_ops_portable;
}
