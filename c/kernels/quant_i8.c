/* quant_i8.c: fer_matmul_quant_i8 and its workspace query (contract in ffi/ferrite.h), plus the
 * portable table of quant_i8.h, which states the arithmetic every other table must reproduce.
 *
 * The driver rounds A's rows to 8 bits into the workspace once (rows in parallel), then runs
 * tasks that each own a block of out: up to TASK_M rows of A by a chunk of W's rows, walked four
 * W rows at a time (their blocks stay in L1) against two A rows at a time. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"
#include "core/threadpool.h"
#include "kernels/kernel_util.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "kernels/quant_i8.h"

static const char *const FN = "fer_matmul_quant_i8";

/* ---- the portable table: the definition, written out ---------------------------------------- */

static void quantize_portable(const float *x, int64_t nb, int8_t *q, float *d, float *s) {
  for (int64_t b = 0; b < nb; b++, x += 32, q += 32) {
    float amax = 0.0f;
    int finite = 1;
    for (int i = 0; i < 32; i++) {
      const float ax = fabsf(x[i]);
      if (!(ax <= 3.40282347e38f)) finite = 0; /* infinite or NaN */
      else if (ax > amax) amax = ax;
    }
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    if (!finite || !isfinite(id)) {
      memset(q, 0, 32);
      d[b] = s[b] = finite ? 0.0f : NAN;
      continue;
    }
    int sum = 0;
    for (int i = 0; i < 32; i++) {
      const int v = (int)nearbyintf(x[i] * id); /* default rounding: half to even */
      q[i] = (int8_t)v;
      sum += v;
    }
    d[b] = amax / 127.0f;
    s[b] = d[b] * (float)sum;
  }
}

/* Block b's integer codes, scale and offset (has_min: Q4_0 and Q4_1). */
static void block_codes(fer_dtype t, const uint8_t *blk, int8_t codes[32], float *dw, float *mw) {
  *mw = 0.0f;
  if (t == FER_DTYPE_Q8_0) {
    memcpy(codes, blk + 2, 32);
    *dw = feri_qblock_scale(t, blk);
    return;
  }
  const uint8_t *nib = blk + feri_qblock_code_offset(t);
  for (int i = 0; i < 16; i++) {
    codes[i] = (int8_t)(nib[i] & 0xF);
    codes[16 + i] = (int8_t)(nib[i] >> 4);
  }
  if (t == FER_DTYPE_MXFP4) {
    for (int i = 0; i < 32; i++) codes[i] = feri_mxfp4_code2[codes[i]];
    *dw = feri_e8m0_to_f32(blk[0]) * 0.5f;
    return;
  }
  *dw = feri_qblock_scale(t, blk);
  *mw = t == FER_DTYPE_Q4_1 ? feri_qblock_min(blk) : -8.0f * *dw;
}

static float lane_sum(const float l[8]) {
  return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

static void dot_portable(fer_dtype t, const uint8_t *w, int64_t w_stride, int rw,
                         const feri_q8_rows *a, int64_t m, int ra, float *y, int64_t ldy) {
  const size_t bb = feri_qblock_bytes(t);
  const int has_min = t == FER_DTYPE_Q4_0 || t == FER_DTYPE_Q4_1;
  for (int r = 0; r < rw; r++)
    for (int i = 0; i < ra; i++) {
      const int8_t *xq = a->q + (m + i) * a->q_stride;
      const float *xd = a->d + (m + i) * a->nb, *xs = a->s + (m + i) * a->nb;
      float lanes[8] = {0};
      float summ = 0.0f;
      for (int64_t b = 0; b < a->nb; b++) {
        int8_t codes[32];
        float dw, mw;
        block_codes(t, w + r * w_stride + (size_t)b * bb, codes, &dw, &mw);
        const float dd = dw * xd[b];
        for (int l = 0; l < 8; l++) {
          int32_t isum = 0;
          for (int k = 4 * l; k < 4 * l + 4; k++) isum += (int32_t)codes[k] * xq[32 * b + k];
          lanes[l] = fmaf((float)isum, dd, lanes[l]);
        }
        if (has_min) summ = fmaf(mw, xs[b], summ);
      }
      y[i * ldy + r] = has_min ? lane_sum(lanes) + summ : lane_sum(lanes);
    }
}

const feri_qi8_ops feri_qi8_ops_portable = {.quantize = quantize_portable, .dot = dot_portable};

const feri_qi8_ops *feri_qi8_ops_for(fer_isa isa) {
#if defined(__x86_64__)
  if (isa == FER_ISA_AVX2 || isa == FER_ISA_AVX512) {
    const uint64_t vnni = FER_CPU_FEATURE_AVX512VL | FER_CPU_FEATURE_AVX512VNNI;
    return (fer_cpu_features() & vnni) == vnni ? &feri_qi8_ops_avx512vnni : &feri_qi8_ops_avx2;
  }
#else
  (void)isa;
#endif
  return &feri_qi8_ops_portable;
}

/* ---- the driver ------------------------------------------------------------------------------ */

enum { TASK_M = 16, WS_ALIGN = 64 };

typedef struct qi8_plan {
  int64_t M, N, K, nb;
  const fer_qmatrix *w;
  size_t wbb;               /* bytes of one weight block */
  const fer_tensor *a, *out;
  int a_f32;                /* A rows are contiguous f32: quantized straight from a */
  int64_t q_stride;         /* bytes per quantized row, a multiple of WS_ALIGN */
  size_t q_bytes, d_bytes, x_bytes, total_bytes; /* workspace: q, d, s, then widened rows */
  int64_t chunk_n;          /* W rows per task, a multiple of RW except at the end */
  int64_t tasks_n, tasks_m;
} qi8_plan;

static size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

static fer_status plan_quant_i8(const fer_threadpool *pool, const fer_tensor *a, const fer_qmatrix *w,
                                const fer_tensor *out, qi8_plan *p) {
  memset(p, 0, sizeof *p);
  feri_tensor_info ai, oi;
  fer_status st = feri_matmul_quant_check(a, w, out, FN, &ai, &oi);
  if (st != FER_STATUS_OK) return st;
  p->M = a->shape[0];
  p->K = a->shape[1];
  p->N = w->rows;
  p->nb = p->K / FERI_QBLOCK;
  p->w = w;
  p->wbb = feri_qblock_bytes(w->dtype);
  p->a = a;
  p->out = out;
  if (p->M == 0 || p->N == 0) return FER_STATUS_OK;
  /* sizes below are bounded by the validated tensors' own byte spans */
  p->a_f32 = a->dtype == FER_DTYPE_F32 && a->strides[1] == 4;
  p->q_stride = (int64_t)round_up((size_t)p->K, WS_ALIGN);
  p->q_bytes = (size_t)p->M * (size_t)p->q_stride;
  p->d_bytes = round_up((size_t)p->M * (size_t)p->nb * sizeof(float), WS_ALIGN);
  p->x_bytes = p->a_f32 ? 0 : round_up((size_t)p->M * (size_t)p->K * sizeof(float), WS_ALIGN);
  p->total_bytes = p->q_bytes + 2 * p->d_bytes + p->x_bytes;
  /* about four tasks per worker (the split changes no value: every output is computed whole) */
  const int64_t slots = (int64_t)feri_threadpool_slots(pool);
  int64_t chunk = (p->N + 4 * slots - 1) / (4 * slots);
  chunk = (chunk + FERI_QI8_RW - 1) / FERI_QI8_RW * FERI_QI8_RW;
  if (chunk < 16) chunk = 16;
  if (chunk > 256) chunk = 256;
  p->chunk_n = chunk;
  p->tasks_n = (p->N + chunk - 1) / chunk;
  p->tasks_m = (p->M + TASK_M - 1) / TASK_M;
  return FER_STATUS_OK;
}

typedef struct qi8_job {
  const qi8_plan *p;
  const feri_qi8_ops *ops;
  const feri_matmul_ops *mm;
  feri_q8_rows rows;
  float *x; /* widened rows, when A is not contiguous f32 */
} qi8_job;

static void quantize_task(void *ctx, int64_t m) {
  const qi8_job *j = ctx;
  const qi8_plan *p = j->p;
  const char *src = (const char *)p->a->data + m * p->a->strides[0];
  const float *x = (const float *)src;
  if (!p->a_f32) {
    float *dst = j->x + m * p->K;
    j->mm->widen(src, p->a->strides[1], p->a->dtype, p->K, dst);
    x = dst;
  }
  j->ops->quantize(x, p->nb, j->rows.q + m * j->rows.q_stride, j->rows.d + m * p->nb, j->rows.s + m * p->nb);
}

static void dot_task(void *ctx, int64_t task) {
  const qi8_job *j = ctx;
  const qi8_plan *p = j->p;
  const int64_t n0 = task % p->tasks_n * p->chunk_n, m0 = task / p->tasks_n * TASK_M;
  const int64_t nc = p->N - n0 < p->chunk_n ? p->N - n0 : p->chunk_n;
  const int64_t mc = p->M - m0 < TASK_M ? p->M - m0 : TASK_M;
  float y[TASK_M * 256];
  const uint8_t *wbase = (const uint8_t *)p->w->data;
  for (int64_t r = 0; r < nc; r += FERI_QI8_RW) {
    const int rw = nc - r < FERI_QI8_RW ? (int)(nc - r) : FERI_QI8_RW;
    for (int64_t i = 0; i < mc; i += FERI_QI8_RA) {
      const int ra = mc - i < FERI_QI8_RA ? (int)(mc - i) : FERI_QI8_RA;
      j->ops->dot(p->w->dtype, wbase + (n0 + r) * p->w->row_stride, p->w->row_stride, rw, &j->rows,
                  m0 + i, ra, y + i * nc + r, nc);
    }
  }
  const int64_t o_sm = p->out->strides[0], o_sn = p->out->strides[1];
  for (int64_t i = 0; i < mc; i++) {
    char *orow = (char *)p->out->data + (m0 + i) * o_sm + n0 * o_sn;
    if (p->out->dtype == FER_DTYPE_F32 && o_sn == 4) {
      memcpy(orow, y + i * nc, (size_t)nc * sizeof(float));
    } else {
      for (int64_t c = 0; c < nc; c++) feri_elem_store(orow + c * o_sn, p->out->dtype, y[i * nc + c]);
    }
  }
}

static void zero_row_task(void *ctx, int64_t m) {
  const qi8_plan *p = ctx;
  for (int64_t c = 0; c < p->N; c++)
    feri_elem_store((char *)p->out->data + m * p->out->strides[0] + c * p->out->strides[1],
                    p->out->dtype, 0.0f);
}

fer_status fer_matmul_quant_i8_workspace_bytes(const fer_threadpool *pool, const fer_tensor *a,
                                               const fer_qmatrix *w, const fer_tensor *out,
                                               size_t *out_bytes) {
  feri_error_clear();
  if (out_bytes == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s_workspace_bytes: out_bytes is NULL", FN);
  *out_bytes = 0;
  if (a == NULL || w == NULL || out == NULL)
    return feri_fail(FER_STATUS_NULL_ARG, "%s_workspace_bytes: a, w and out must not be NULL", FN);
  qi8_plan p;
  fer_status st = plan_quant_i8(pool, a, w, out, &p);
  if (st == FER_STATUS_OK) *out_bytes = p.total_bytes;
  return st;
}

fer_status fer_matmul_quant_i8(fer_threadpool *pool, const fer_tensor *a, const fer_qmatrix *w,
                               const fer_tensor *out, void *workspace, size_t workspace_bytes) {
  feri_error_clear();
  if (a == NULL || w == NULL || out == NULL)
    return feri_fail(FER_STATUS_NULL_ARG, "%s: a, w and out must not be NULL", FN);
  qi8_plan p;
  fer_status st = plan_quant_i8(pool, a, w, out, &p);
  if (st != FER_STATUS_OK) return st;
  char *ws;
  void *owned;
  if ((st = feri_workspace_acquire(workspace, workspace_bytes, p.total_bytes, FN, &ws, &owned)) != FER_STATUS_OK)
    return st;
  if (p.M == 0 || p.N == 0 || p.K == 0) {
    st = p.M > 0 && p.N > 0 ? feri_threadpool_run(pool, p.M, zero_row_task, &p) : FER_STATUS_OK;
    free(owned);
    return st;
  }
  const fer_isa isa = feri_threadpool_effective_isa(pool);
  qi8_job j = {&p, feri_qi8_ops_for(isa), feri_matmul_ops_for(isa),
               {(int8_t *)ws, (float *)(ws + p.q_bytes), (float *)(ws + p.q_bytes + p.d_bytes),
                p.q_stride, p.nb},
               p.x_bytes ? (float *)(ws + p.q_bytes + 2 * p.d_bytes) : NULL};
  if (p.M == 1) {
    quantize_task(&j, 0); /* one row: not worth waking the pool */
  } else {
    st = feri_threadpool_run(pool, p.M, quantize_task, &j);
  }
  if (st == FER_STATUS_OK) st = feri_threadpool_run(pool, p.tasks_n * p.tasks_m, dot_task, &j);
  free(owned);
  return st;
}
