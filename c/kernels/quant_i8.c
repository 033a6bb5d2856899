/* quant_i8.c: fer_matmul_quant_i8 and its workspace query (contract in ffi/ferrite.h), plus the
 * portable table of quant_i8.h, which states the arithmetic every other table must reproduce.
 *
 * The driver rounds A's rows to 8 bits into the workspace once (rows in parallel), then runs
 * tasks that each own a block of out: up to TASK_M rows of A by a chunk of W's rows, handed to the
 * table's dot RW W rows by RA A rows at a time (quant_i8.h). */
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
#include "kernels/qpanel.h"

static const char *const FN = "fer_matmul_quant_i8";

/* ---- the portable table: the definition, written out ---------------------------------------- */

static float f16_at(const uint8_t *p) {
  uint16_t h;
  memcpy(&h, p, sizeof h);
  return feri_f16_to_f32(h);
}

/* Rounds x[0 .. n) (n = 32 or 256) to codes and sets *d; returns 1 when the codes are all zero
 * because the block is not finite (d NaN) or counts as zero (d 0), else 0. */
static int quantize_block(const float *x, int n, int8_t *q, float *d) {
  float amax = 0.0f;
  int finite = 1;
  for (int i = 0; i < n; i++) {
    const float ax = fabsf(x[i]);
    if (!(ax <= 3.40282347e38f)) finite = 0; /* infinite or NaN */
    else if (ax > amax) amax = ax;
  }
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  if (!finite || !isfinite(id)) {
    memset(q, 0, (size_t)n);
    *d = finite ? 0.0f : NAN;
    return 1;
  }
  for (int i = 0; i < n; i++) q[i] = (int8_t)(int)nearbyintf(x[i] * id); /* default rounding: half to even */
  *d = amax / 127.0f;
  return 0;
}

static void quantize_portable(const float *x, int64_t nb, int8_t *q, float *d, int32_t *qs) {
  for (int64_t b = 0; b < nb; b++, x += 32, q += 32) {
    quantize_block(x, 32, q, &d[b]); /* codes 0 where the block counts as zero or is not finite */
    int32_t sum = 0;
    for (int i = 0; i < 32; i++) sum += q[i];
    qs[b] = sum;
  }
}

static void quantize_k_portable(const float *x, int64_t nb, int8_t *q, float *d, int16_t *bs) {
  for (int64_t b = 0; b < nb; b++, x += 256, q += 256, bs += 16) {
    quantize_block(x, 256, q, &d[b]);
    for (int j = 0; j < 16; j++) {
      int sum = 0;
      for (int i = 0; i < 16; i++) sum += q[16 * j + i];
      bs[j] = (int16_t)sum;
    }
  }
}

/* Block b's signed integer codes, scale and minimum (Q4_1, Q5_1; else 0): quant_i8.h. */
static void block_codes(fer_dtype t, const uint8_t *blk, int8_t codes[32], float *dw, float *mw) {
  *mw = 0.0f;
  if (t == FER_DTYPE_Q8_0) {
    memcpy(codes, blk + 2, 32);
    *dw = feri_qblock_scale(t, blk);
    return;
  }
  const int five = t == FER_DTYPE_Q5_0 || t == FER_DTYPE_Q5_1;
  const uint8_t *nib = blk + (t == FER_DTYPE_MXFP4 ? 1 : t == FER_DTYPE_Q4_1 ? 4 : t == FER_DTYPE_Q5_0 ? 6
                              : t == FER_DTYPE_Q5_1 ? 8 : 2);
  for (int i = 0; i < 16; i++) {
    codes[i] = (int8_t)(nib[i] & 0xF);
    codes[16 + i] = (int8_t)(nib[i] >> 4);
  }
  if (five) { /* qh: bit i is element i's fifth bit */
    const uint8_t *qh = blk + (t == FER_DTYPE_Q5_0 ? 2 : 4);
    for (int i = 0; i < 32; i++) codes[i] = (int8_t)(codes[i] | ((qh[i / 8] >> (i % 8)) & 1) << 4);
  }
  if (t == FER_DTYPE_MXFP4) {
    for (int i = 0; i < 32; i++) codes[i] = feri_mxfp4_code2[codes[i]];
    *dw = feri_e8m0_to_f32(blk[0]) * 0.5f;
    return;
  }
  *dw = f16_at(blk);
  if (t == FER_DTYPE_IQ4_NL) {
    for (int i = 0; i < 32; i++) codes[i] = feri_qi8_iq4nl[codes[i]];
  } else if (t == FER_DTYPE_Q4_1 || t == FER_DTYPE_Q5_1) {
    *mw = f16_at(blk + 2);
  } else { /* Q4_0, Q5_0: the offset is part of the code */
    for (int i = 0; i < 32; i++) codes[i] = (int8_t)(codes[i] - (five ? 16 : 8));
  }
}

static void dot_portable_32(fer_dtype t, const uint8_t *w, int64_t w_stride, int rw,
                            const feri_q8_rows *a, int64_t m, int ra, float *y, int64_t ldy) {
  const size_t bb = feri_qi8_block_bytes(t);
  const int has_min = t == FER_DTYPE_Q4_1 || t == FER_DTYPE_Q5_1;
  for (int r = 0; r < rw; r++)
    for (int i = 0; i < ra; i++) {
      const int8_t *xq = a->q + (m + i) * a->q_stride;
      const float *xd = a->d + (m + i) * a->nb;
      const int32_t *xqs = a->qs + (m + i) * a->nb;
      float acc = 0.0f, mc = 0.0f;
      for (int64_t b = 0; b < a->nb; b++) {
        int8_t codes[32];
        float dw, mw;
        block_codes(t, w + r * w_stride + (size_t)b * bb, codes, &dw, &mw);
        int32_t isum = 0;
        for (int k = 0; k < 32; k++) isum += (int32_t)codes[k] * xq[32 * b + k];
        acc = fmaf((float)isum, dw * xd[b], acc);
        if (has_min) mc = fmaf(mw, xd[b] * (float)xqs[b], mc);
      }
      y[i * ldy + r] = has_min ? acc + mc : acc;
    }
}

/* The super-block definition of quant_i8.h, written out. */
static void dot_portable_super(fer_dtype t, const uint8_t *w, int64_t w_stride, int rw,
                               const feri_q8_rows *a, int64_t m, int ra, float *y, int64_t ldy) {
  const size_t bb = feri_qi8_block_bytes(t), doff = feri_qi8_super_d_offset(t);
  const int has_min = feri_qi8_super_has_min(t);
  for (int r = 0; r < rw; r++)
    for (int i = 0; i < ra; i++) {
      const int8_t *xq = a->q + (m + i) * a->q_stride;
      const float *xd = a->d + (m + i) * a->nb;
      const int16_t *bs = a->bs + (m + i) * a->nb * 16;
      float acc = 0.0f, mc = 0.0f;
      for (int64_t b = 0; b < a->nb; b++, xq += 256, bs += 16) {
        const uint8_t *blk = w + r * w_stride + (size_t)b * bb;
        int8_t c[256], sc[16], mn[16];
        feri_qi8_super_codes(t, blk, c);
        feri_qi8_super_scales(t, blk, sc, mn);
        const float dx = xd[b];
        int32_t isum = 0;
        for (int k = 0; k < 256; k++) isum += sc[k / 16] * c[k] * xq[k];
        acc = fmaf((float)isum, f16_at(blk + doff) * dx, acc);
        if (has_min) {
          int32_t msum = 0;
          for (int j = 0; j < 16; j++) msum += mn[j] * bs[j];
          mc = fmaf((float)msum, f16_at(blk + doff + 2) * dx, mc);
        }
      }
      y[i * ldy + r] = has_min ? acc - mc : acc;
    }
}

static void dot_portable(fer_dtype t, const uint8_t *w, int64_t w_stride, int rw,
                         const feri_q8_rows *a, int64_t m, int ra, float *y, int64_t ldy) {
  if (feri_qi8_is_super(t)) dot_portable_super(t, w, w_stride, rw, a, m, ra, y, ldy);
  else dot_portable_32(t, w, w_stride, rw, a, m, ra, y, ldy);
}

const feri_qi8_ops feri_qi8_ops_portable = {
    .quantize = quantize_portable, .quantize_k = quantize_k_portable, .dot = dot_portable};

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

enum { TASK_M = 64, WS_ALIGN = 64 }; /* TASK_M: A rows that share one unpacking of W (kgemm) */

typedef struct qi8_plan {
  int64_t M, N, K, nb;
  const fer_qmatrix *w;
  int super;                /* blocks of 256: Q8_K-style activation rows */
  const fer_tensor *a, *out;
  int a_f32;                /* A rows are contiguous f32: quantized straight from a */
  int64_t q_stride;         /* bytes per quantized row, a multiple of WS_ALIGN */
  size_t q_bytes, d_bytes, s_bytes, x_bytes, total_bytes; /* workspace: q, d, qs or bs, then widened rows */
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
  p->super = feri_qi8_is_super(w->dtype);
  p->nb = p->K / feri_qi8_block_elems(w->dtype);
  p->w = w;
  p->a = a;
  p->out = out;
  if (p->M == 0 || p->N == 0) return FER_STATUS_OK;
  /* sizes below are bounded by the validated tensors' own byte spans: K int8 codes per row and,
   * per block, a 4-byte scale and a 4-byte qs (32) or sixteen 2-byte sums (256), at most 9 K / 8
   * bytes a row, with A itself at least 2 K bytes a row */
  p->a_f32 = a->dtype == FER_DTYPE_F32 && a->strides[1] == 4;
  p->q_stride = (int64_t)round_up((size_t)p->K, WS_ALIGN);
  p->q_bytes = (size_t)p->M * (size_t)p->q_stride;
  p->d_bytes = round_up((size_t)p->M * (size_t)p->nb * sizeof(float), WS_ALIGN);
  p->s_bytes = p->super ? round_up((size_t)p->M * (size_t)p->nb * 16 * sizeof(int16_t), WS_ALIGN) : p->d_bytes;
  p->x_bytes = p->a_f32 ? 0 : round_up((size_t)p->M * (size_t)p->K * sizeof(float), WS_ALIGN);
  p->total_bytes = p->q_bytes + p->d_bytes + p->s_bytes + p->x_bytes;
  /* about four tasks per worker (the split changes no value: every output is computed whole) */
  const int64_t slots = (int64_t)feri_threadpool_slots(pool);
  int64_t chunk = (p->N + 4 * slots - 1) / (4 * slots);
  chunk = (chunk + FERI_QI8_RW - 1) / FERI_QI8_RW * FERI_QI8_RW;
  if (chunk < 16) chunk = 16;
  if (chunk > 128) chunk = 128; /* TASK_M x 128 f32 of results stay on the stack: 32 KiB */
  p->chunk_n = chunk;
  p->tasks_n = (p->N + chunk - 1) / chunk;
  p->tasks_m = (p->M + TASK_M - 1) / TASK_M;
  return FER_STATUS_OK;
}

typedef struct qi8_job {
  const qi8_plan *p;
  const feri_qpanel *panel; /* w's panels, read instead of w when the table has panel kernels */
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
  int8_t *q = j->rows.q + m * j->rows.q_stride;
  if (p->super) j->ops->quantize_k(x, p->nb, q, j->rows.d + m * p->nb, j->rows.bs + m * p->nb * 16);
  else j->ops->quantize(x, p->nb, q, j->rows.d + m * p->nb, j->rows.qs + m * p->nb);
}

static void dot_task(void *ctx, int64_t task) {
  const qi8_job *j = ctx;
  const qi8_plan *p = j->p;
  const int64_t n0 = task % p->tasks_n * p->chunk_n, m0 = task / p->tasks_n * TASK_M;
  const int64_t nc = p->N - n0 < p->chunk_n ? p->N - n0 : p->chunk_n;
  const int64_t mc = p->M - m0 < TASK_M ? p->M - m0 : TASK_M;
  float y[TASK_M * 128];
  const uint8_t *wbase = (const uint8_t *)p->w->data;
  /* FERI_QI8_RW = 16 rows at a time, a panel's; chunks start at multiples of 16 rows, so the
   * rows from n0 + r are panel (n0 + r) / 16 */
  for (int64_t r = 0; r < nc; r += FERI_QI8_RW) {
    const int rw = nc - r < FERI_QI8_RW ? (int)(nc - r) : FERI_QI8_RW;
    for (int64_t i = 0; i < mc; i += FERI_QI8_RA) {
      const int ra = mc - i < FERI_QI8_RA ? (int)(mc - i) : FERI_QI8_RA;
      if (j->panel)
        j->ops->pdot(p->w->dtype, feri_qpanel_record(j->panel, (n0 + r) / 16, 0), j->panel->record_bytes, rw,
                     &j->rows, m0 + i, ra, y + i * nc + r, nc);
      else
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
  return feri_matmul_quant_i8_panel(pool, a, w, NULL, out, workspace, workspace_bytes);
}

fer_status feri_matmul_quant_i8_panel(fer_threadpool *pool, const fer_tensor *a, const fer_qmatrix *w,
                                      const feri_qpanel *panel, const fer_tensor *out, void *workspace,
                                      size_t workspace_bytes) {
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
  char *sums = ws + p.q_bytes + p.d_bytes;
  const feri_qi8_ops *ops = feri_qi8_ops_for(isa);
  if (panel && (!ops->pdot || panel->dtype != w->dtype || panel->rows != w->rows || panel->cols != w->cols))
    panel = NULL; /* a table without panel kernels (or a panel of another matrix): w's own blocks */
  qi8_job j = {&p, panel, ops, feri_matmul_ops_for(isa),
               {(int8_t *)ws, (float *)(ws + p.q_bytes), p.super ? NULL : (int32_t *)sums,
                p.super ? (int16_t *)sums : NULL, p.q_stride, p.nb},
               p.x_bytes ? (float *)(sums + p.s_bytes) : NULL};
  if (p.M == 1) {
    quantize_task(&j, 0); /* one row: not worth waking the pool */
  } else {
    st = feri_threadpool_run(pool, p.M, quantize_task, &j);
  }
  if (st == FER_STATUS_OK) st = feri_threadpool_run(pool, p.tasks_n * p.tasks_m, dot_task, &j);
  free(owned);
  return st;
}
