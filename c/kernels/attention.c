/* attention.c: fer_attention (contract in ffi/ferrite.h).
 *
 * A task is one kv head and a tile of queries: every q head of the head's group (grouped-query
 * attention) times ATT_BQ queries, so K and V of a tile are read once for the whole group. For
 * each query row the task keeps the running maximum m, the running sum l and the f32 output o,
 * and walks the visible keys in tiles of ATT_BK: scores, new maximum, o and l rescaled by
 * exp(m_old - m_new), probabilities, o += p v. The order of every operation depends only on the
 * query row, never on the layout, the other rows or the thread count. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"
#include "core/threadpool.h"
#include "kernels/attention.h"
#include "kernels/fexp.h"
#include "kernels/kernel_util.h"

static const char *const FN = "fer_attention";

enum { ATT_BQ = 16, ATT_BK = 64, WS_ALIGN = 64 };

typedef struct att_plan {
  const fer_tensor *q, *k, *v, *out;
  int64_t hq, hkv, group, nq, nk, d, dv;
  float scale;
  int causal;
  int64_t q_pos0;
  int64_t q_tiles;
  int64_t rows;             /* query rows per task: group x min(nq, ATT_BQ) */
  size_t worker_bytes, total_bytes;
  uint32_t workers;
} att_plan;

static size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

fer_status fer_attention_params_init(fer_attention_params *params) {
  feri_error_clear();
  if (params == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_attention_params_init: params is NULL");
  memset(params, 0, sizeof *params);
  params->struct_size = sizeof *params;
  params->causal = 1;
  return FER_STATUS_OK;
}

static fer_status plan_attention(const fer_threadpool *pool, const fer_tensor *q, const fer_tensor *k,
                                 const fer_tensor *v, const fer_attention_params *params,
                                 const fer_tensor *out, att_plan *p) {
  memset(p, 0, sizeof *p);
  if (q == NULL || k == NULL || v == NULL || out == NULL || params == NULL)
    return feri_fail(FER_STATUS_NULL_ARG, "%s: q, k, v, params and out must not be NULL", FN);
  if (params->struct_size < sizeof *params)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: params->struct_size %u < %zu (call "
                     "fer_attention_params_init)", FN, params->struct_size, sizeof *params);
  const fer_tensor *ts[4] = {q, k, v, out};
  const char *names[4] = {"q", "k", "v", "out"};
  feri_tensor_info info[4];
  fer_status st;
  for (int i = 0; i < 4; i++) {
    if ((st = feri_tensor_validate(ts[i], FN, names[i], &info[i])) != FER_STATUS_OK) return st;
    if ((st = feri_require_float_dtype(ts[i]->dtype, FN)) != FER_STATUS_OK) return st;
    if (ts[i]->rank != 3)
      return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: %s has rank %d, expected [heads, positions, dim]",
                       FN, names[i], (int)ts[i]->rank);
  }
  p->hq = q->shape[0];
  p->nq = q->shape[1];
  p->d = q->shape[2];
  p->hkv = k->shape[0];
  p->nk = k->shape[1];
  p->dv = v->shape[2];
  if (k->shape[2] != p->d)
    return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: k's head_dim %lld differs from q's %lld", FN,
                     (long long)k->shape[2], (long long)p->d);
  if (v->shape[0] != p->hkv || v->shape[1] != p->nk)
    return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: v is [%lld, %lld, .], k is [%lld, %lld, .]", FN,
                     (long long)v->shape[0], (long long)v->shape[1], (long long)p->hkv, (long long)p->nk);
  if (out->shape[0] != p->hq || out->shape[1] != p->nq || out->shape[2] != p->dv)
    return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: out must be [%lld, %lld, %lld]", FN,
                     (long long)p->hq, (long long)p->nq, (long long)p->dv);
  if (p->hkv == 0 ? p->hq != 0 : p->hq % p->hkv != 0)
    return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: %lld query heads are not a multiple of %lld kv heads",
                     FN, (long long)p->hq, (long long)p->hkv);
  if (params->q_pos0 < 0)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: q_pos0 %lld is negative", FN, (long long)params->q_pos0);
  if (!isfinite(params->scale))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: scale is not finite", FN);
  if ((st = feri_tensor_check_writable(out, &info[3], FN, "out")) != FER_STATUS_OK) return st;
  for (int i = 0; i < 3; i++)
    if (feri_tensors_overlap(out, &info[3], ts[i], &info[i]))
      return feri_fail(FER_STATUS_INVALID_ARG, "%s: out overlaps %s", FN, names[i]);
  p->q = q;
  p->k = k;
  p->v = v;
  p->out = out;
  p->group = p->hkv > 0 ? p->hq / p->hkv : 0;
  p->scale = params->scale != 0.0f ? params->scale : (p->d > 0 ? 1.0f / sqrtf((float)p->d) : 1.0f);
  p->causal = params->causal != 0;
  p->q_pos0 = params->q_pos0;
  if (info[3].numel == 0) return FER_STATUS_OK;
  p->q_tiles = (p->nq + ATT_BQ - 1) / ATT_BQ;
  p->rows = p->group * (p->nq < ATT_BQ ? p->nq : ATT_BQ);
  /* per worker: q rows (d), outputs (dv), m and l per row, one tile of scores per row. K and V
   * are read in their own dtype by every row: widening a tile to f32 once per task was measured
   * 1.9x slower at decode (the f32 tile no longer fits L1) */
  p->worker_bytes = round_up((size_t)p->rows * (size_t)(p->d + p->dv + 2 + ATT_BK) * sizeof(float), WS_ALIGN);
  const int64_t tasks = p->hkv * p->q_tiles;
  p->workers = tasks == 1 ? 1u : feri_threadpool_slots(pool);
  p->total_bytes = p->worker_bytes * p->workers;
  return FER_STATUS_OK;
}

typedef struct att_job {
  const att_plan *p;
  const feri_attention_ops *ops;
  char *ws;
} att_job;

static void attention_task(void *ctx, int64_t task, uint32_t worker) {
  const att_job *j = ctx;
  const att_plan *p = j->p;
  const int64_t h = task / p->q_tiles, i0 = task % p->q_tiles * ATT_BQ;
  const int64_t nqt = p->nq - i0 < ATT_BQ ? p->nq - i0 : ATT_BQ;
  const int64_t rows = p->group * nqt;
  float *qf = (float *)(j->ws + (p->workers == 1 ? 0 : (size_t)worker * p->worker_bytes));
  float *o = qf + p->rows * p->d, *m = o + p->rows * p->dv, *l = m + p->rows, *s = l + p->rows;
  const fer_tensor *q = p->q, *out = p->out;
  /* row r = (g, i): q head h * group + g, query i0 + i */
  for (int64_t r = 0; r < rows; r++) {
    const int64_t hq = h * p->group + r / nqt, i = i0 + r % nqt;
    const char *qrow = (const char *)q->data + hq * q->strides[0] + i * q->strides[1];
    for (int64_t e = 0; e < p->d; e++) qf[r * p->d + e] = feri_elem_load(qrow + e * q->strides[2], q->dtype);
    for (int64_t e = 0; e < p->dv; e++) o[r * p->dv + e] = 0.0f;
    m[r] = -INFINITY;
    l[r] = 0.0f;
  }
  const int64_t es_k = (int64_t)feri_dtype_size(p->k->dtype), es_v = (int64_t)feri_dtype_size(p->v->dtype);
  /* keys this tile can need: up to the last query's position */
  const int64_t last_pos = p->q_pos0 + i0 + nqt - 1;
  const int64_t kmax = p->causal ? (last_pos + 1 < p->nk ? last_pos + 1 : p->nk) : p->nk;
  for (int64_t k0 = 0; k0 < kmax; k0 += ATT_BK) {
    const int64_t kn = kmax - k0 < ATT_BK ? kmax - k0 : ATT_BK;
    const feri_kv_rows kr = {(const char *)p->k->data + h * p->k->strides[0] + k0 * p->k->strides[1],
                             p->k->dtype, p->k->strides[1], p->k->strides[2], es_k};
    const feri_kv_rows vr = {(const char *)p->v->data + h * p->v->strides[0] + k0 * p->v->strides[1],
                             p->v->dtype, p->v->strides[1], p->v->strides[2], es_v};
    /* fetch the next tile while this one is computed: K and V tiles alternate, two short streams
     * per task that the hardware prefetchers pick up late */
    if (k0 + ATT_BK < kmax) {
      const int64_t nn = kmax - k0 - ATT_BK < ATT_BK ? kmax - k0 - ATT_BK : ATT_BK;
      for (int64_t t = 0; t < nn; t++) {
        const char *kp = kr.base + (ATT_BK + t) * kr.row_stride, *vp = vr.base + (ATT_BK + t) * vr.row_stride;
        for (int64_t b = 0; b < p->d * es_k; b += 64) __builtin_prefetch(kp + b * (kr.dim_stride / es_k));
        for (int64_t b = 0; b < p->dv * es_v; b += 64) __builtin_prefetch(vp + b * (vr.dim_stride / es_v));
      }
    }
    /* the group's q heads at one query position see the same keys: one batched call each */
    for (int64_t i = 0; i < nqt; i++) {
      int64_t n = kn;
      if (p->causal) {
        const int64_t lim = p->q_pos0 + i0 + i + 1 - k0;
        n = lim < n ? lim : n;
      }
      if (n <= 0) continue;
      /* rows of this query: r = g * nqt + i */
      j->ops->scores(qf + i * p->d, nqt * p->d, p->group, p->d, &kr, n, p->scale, s + i * ATT_BK,
                     nqt * ATT_BK);
      for (int64_t g = 0; g < p->group; g++) {
        const int64_t r = g * nqt + i;
        float *sr = s + r * ATT_BK;
        const float mx = j->ops->row_max(sr, n, m[r]);
        const float corr = m[r] == -INFINITY ? 0.0f : feri_fexp(m[r] - mx);
        const float sum = j->ops->exp_shift(sr, n, mx);
        l[r] = fmaf(l[r], corr, sum);
        float *orow = o + r * p->dv;
        for (int64_t e = 0; e < p->dv; e++) orow[e] *= corr;
        m[r] = mx;
      }
      j->ops->accumulate(o + i * p->dv, nqt * p->dv, p->group, p->dv, s + i * ATT_BK, nqt * ATT_BK,
                         &vr, n);
    }
  }
  for (int64_t r = 0; r < rows; r++) {
    const int64_t hq = h * p->group + r / nqt, i = i0 + r % nqt;
    char *orow = (char *)out->data + hq * out->strides[0] + i * out->strides[1];
    const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
    for (int64_t e = 0; e < p->dv; e++)
      feri_elem_store(orow + e * out->strides[2], out->dtype, l[r] > 0.0f ? o[r * p->dv + e] * inv : 0.0f);
  }
}

fer_status fer_attention_workspace_bytes(const fer_threadpool *pool, const fer_tensor *q,
                                         const fer_tensor *k, const fer_tensor *v,
                                         const fer_attention_params *params,
                                         const fer_tensor *out, size_t *out_bytes) {
  feri_error_clear();
  if (out_bytes == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s_workspace_bytes: out_bytes is NULL", FN);
  *out_bytes = 0;
  att_plan p;
  fer_status st = plan_attention(pool, q, k, v, params, out, &p);
  if (st == FER_STATUS_OK) *out_bytes = p.total_bytes;
  return st;
}

fer_status fer_attention(fer_threadpool *pool, const fer_tensor *q, const fer_tensor *k,
                         const fer_tensor *v, const fer_attention_params *params,
                         const fer_tensor *out, void *workspace, size_t workspace_bytes) {
  feri_error_clear();
  att_plan p;
  fer_status st = plan_attention(pool, q, k, v, params, out, &p);
  if (st != FER_STATUS_OK) return st;
  char *ws;
  void *owned;
  if ((st = feri_workspace_acquire(workspace, workspace_bytes, p.total_bytes, FN, &ws, &owned)) != FER_STATUS_OK)
    return st;
  if (p.total_bytes == 0) return FER_STATUS_OK;
  att_job j = {&p, feri_attention_ops_for(feri_threadpool_effective_isa(pool)), ws};
  st = feri_threadpool_run_workers(pool, p.hkv * p.q_tiles, attention_task, &j);
  free(owned);
  return st;
}
