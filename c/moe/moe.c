/* moe.c: fer_moe (contract in ffi/ferrite.h). Rows are routed one at a time; each selected
 * expert is two GEMVs around the activation, through the strategy's weight path. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "core/tensor.h"
#include "kernels/quant.h"

static const char *const FN = "fer_moe";

fer_status fer_moe_params_init(fer_moe_params *params) {
  feri_error_clear();
  if (params == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_moe_params_init: params is NULL");
  memset(params, 0, sizeof *params);
  params->struct_size = sizeof *params;
  params->top_k = 1;
  params->activation = FER_MOE_IDENTITY;
  params->strategy = FER_MOE_FUSED;
  return FER_STATUS_OK;
}

static fer_tensor row_view(float *data, int64_t n) { return feri_tensor_2d(data, FER_DTYPE_F32, 1, n); }

/* Rows [first, first + rows) of w as a matrix of their own. */
static fer_qmatrix sub_rows(const fer_qmatrix *w, int64_t first, int64_t rows) {
  fer_qmatrix s = *w;
  const uint64_t off = (uint64_t)first * (uint64_t)w->row_stride;
  s.data = (const char *)w->data + off;
  s.bytes = w->bytes - off;
  s.rows = rows;
  return s;
}

typedef struct moe_ctx {
  fer_threadpool *pool;
  const fer_moe_params *params;
  float *dense; /* DEQUANT_EACH_CALL: room for the larger projection */
} moe_ctx;

/* y[1, w.rows] = x[1, w.cols] x w^T through the strategy's path; `key` names w in the cache. */
static fer_status project(const moe_ctx *c, const fer_qmatrix *w, uint64_t key, float *x, float *y) {
  fer_tensor tx = row_view(x, w->cols), ty = row_view(y, w->rows);
  if (c->params->strategy == FER_MOE_FUSED) return fer_matmul_quant(c->pool, &tx, w, &ty, NULL, 0);
  const float *dense = c->dense;
  fer_status st;
  if (c->params->strategy == FER_MOE_CACHED_DENSE) {
    if ((st = fer_dense_cache_get(c->params->cache, c->pool, key, w, 0, &dense)) != FER_STATUS_OK) return st;
  } else {
    fer_tensor td = feri_tensor_2d(c->dense, FER_DTYPE_F32, w->rows, w->cols);
    if ((st = fer_dequantize(c->pool, w, &td)) != FER_STATUS_OK) return st;
  }
  fer_tensor tw = feri_tensor_2d((void *)dense, FER_DTYPE_F32, w->rows, w->cols);
  return fer_matmul(c->pool, &tx, &tw, FER_MATMUL_B_NK, &ty, NULL, 0);
}

static fer_status check_f32_2d(const fer_tensor *t, const char *name, int64_t rows, int64_t cols) {
  feri_tensor_info info;
  fer_status st = feri_tensor_validate(t, FN, name, &info);
  if (st != FER_STATUS_OK) return st;
  if (t->dtype != FER_DTYPE_F32)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: %s must be F32", FN, name);
  if (t->rank != 2)
    return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: %s has rank %d, must be 2", FN, name, (int)t->rank);
  if ((rows >= 0 && t->shape[0] != rows) || (cols >= 0 && t->shape[1] != cols))
    return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: %s must be [%lld, %lld]", FN, name, (long long)rows,
                     (long long)cols);
  return FER_STATUS_OK;
}

/* The top_k largest logits of one row, ties to the lower id, and their renormalised softmax. */
static void route(const float *logits, int64_t e_count, int32_t k, int64_t *sel, float *w) {
  for (int32_t i = 0; i < k; i++) {
    int64_t best = -1;
    for (int64_t e = 0; e < e_count; e++) {
      int taken = 0;
      for (int32_t t = 0; t < i; t++) taken |= sel[t] == e;
      if (!taken && (best < 0 || logits[e] > logits[best])) best = e;
    }
    sel[i] = best;
  }
  const double m = logits[sel[0]];
  double sum = 0.0, ex[64];
  for (int32_t i = 0; i < k; i++) sum += ex[i] = exp((double)logits[sel[i]] - m);
  for (int32_t i = 0; i < k; i++) w[i] = (float)(ex[i] / sum);
}

enum { MOE_MAX_TOP_K = 64 };

fer_status fer_moe(fer_threadpool *pool, const fer_tensor *x, const fer_tensor *router_logits,
                   const fer_qmatrix *fc1, const fer_qmatrix *fc2, const fer_moe_params *params,
                   const fer_tensor *out) {
  feri_error_clear();
  if (x == NULL || router_logits == NULL || fc1 == NULL || fc2 == NULL || params == NULL || out == NULL)
    return feri_fail(FER_STATUS_NULL_ARG, "%s: an argument is NULL", FN);
  if (params->struct_size < sizeof *params)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: params->struct_size %u < %zu (call fer_moe_params_init)",
                     FN, params->struct_size, sizeof *params);
  fer_status st;
  if ((st = feri_qmatrix_validate(fc1, FN)) != FER_STATUS_OK) return st;
  if ((st = feri_qmatrix_validate(fc2, FN)) != FER_STATUS_OK) return st;
  /* x is validated as a descriptor before its rank is compared with 2: a rank outside 0 .. 8 is
   * INVALID_ARG, as for every tensor (the header's promise), not SHAPE_MISMATCH */
  if ((st = check_f32_2d(x, "x", -1, -1)) != FER_STATUS_OK) return st;
  const int64_t rows = x->shape[0], h = x->shape[1];
  if ((st = check_f32_2d(router_logits, "router_logits", rows, -1)) != FER_STATUS_OK) return st;
  if ((st = check_f32_2d(out, "out", rows, h)) != FER_STATUS_OK) return st;
  const int64_t e_count = router_logits->shape[1];
  const int64_t inner = fc2->cols;
  const int64_t i1 = params->activation == FER_MOE_SWIGLU ? 2 * inner : inner;
  if (params->activation != FER_MOE_IDENTITY && params->activation != FER_MOE_SILU &&
      params->activation != FER_MOE_SWIGLU)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: unknown activation %d", FN, (int)params->activation);
  if (params->strategy != FER_MOE_FUSED && params->strategy != FER_MOE_DEQUANT_EACH_CALL &&
      params->strategy != FER_MOE_CACHED_DENSE)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: unknown strategy %d", FN, (int)params->strategy);
  if (params->strategy == FER_MOE_CACHED_DENSE && params->cache == NULL)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: the cached-dense strategy needs params->cache", FN);
  if (params->top_k < 1 || params->top_k > e_count || params->top_k > MOE_MAX_TOP_K)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: top_k %d is outside 1 .. %lld", FN, (int)params->top_k,
                     (long long)(e_count < MOE_MAX_TOP_K ? e_count : MOE_MAX_TOP_K));
  if (fc1->cols != h || fc1->rows != e_count * i1 || fc2->rows != e_count * h)
    return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: with E = %lld, H = %lld, I = %lld, fc1 must be "
                     "[%lld, %lld] and fc2 [%lld, %lld]; they are [%lld, %lld] and [%lld, %lld]", FN,
                     (long long)e_count, (long long)h, (long long)inner, (long long)(e_count * i1),
                     (long long)h, (long long)(e_count * h), (long long)inner, (long long)fc1->rows,
                     (long long)fc1->cols, (long long)fc2->rows, (long long)fc2->cols);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t e = 0; e < e_count; e++) {
      const float v = *(const float *)((const char *)router_logits->data + r * router_logits->strides[0] +
                                       e * router_logits->strides[1]);
      if (!isfinite(v))
        return feri_fail(FER_STATUS_INVALID_ARG, "%s: router logit [%lld, %lld] is not finite", FN,
                         (long long)r, (long long)e);
    }
  feri_tensor_info oi, xi, li;
  (void)feri_tensor_validate(out, FN, "out", &oi); /* validated above: fills the spans */
  (void)feri_tensor_validate(x, FN, "x", &xi);
  (void)feri_tensor_validate(router_logits, FN, "router_logits", &li);
  if ((st = feri_tensor_check_writable(out, &oi, FN, "out")) != FER_STATUS_OK) return st;
  if (feri_tensors_overlap(out, &oi, router_logits, &li) ||
      (feri_tensors_overlap(out, &oi, x, &xi) && !feri_tensors_identical(out, x)))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: out overlaps router_logits, or x without being exactly x", FN);
  if (rows == 0 || h == 0) return FER_STATUS_OK;

  const size_t floats = (size_t)(h + i1 + inner + h + h + e_count);
  const size_t dense_floats = params->strategy == FER_MOE_DEQUANT_EACH_CALL
                                  ? (size_t)(i1 * h > h * inner ? i1 * h : h * inner) : 0;
  float *buf = malloc((floats + dense_floats) * sizeof(float));
  if (buf == NULL) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: out of memory", FN);
  float *xr = buf, *hv = xr + h, *av = hv + i1, *yv = av + inner, *acc = yv + h, *lg = acc + h;
  moe_ctx c = {pool, params, dense_floats ? lg + e_count : NULL};
  for (int64_t r = 0; r < rows && st == FER_STATUS_OK; r++) {
    for (int64_t e = 0; e < h; e++) xr[e] = *(const float *)((const char *)x->data + r * x->strides[0] + e * x->strides[1]);
    for (int64_t e = 0; e < e_count; e++)
      lg[e] = *(const float *)((const char *)router_logits->data + r * router_logits->strides[0] +
                               e * router_logits->strides[1]);
    int64_t sel[MOE_MAX_TOP_K];
    float wts[MOE_MAX_TOP_K];
    route(lg, e_count, params->top_k, sel, wts);
    for (int64_t e = 0; e < h; e++) acc[e] = 0.0f;
    for (int32_t i = 0; i < params->top_k && st == FER_STATUS_OK; i++) {
      const fer_qmatrix w1 = sub_rows(fc1, sel[i] * i1, i1), w2 = sub_rows(fc2, sel[i] * h, h);
      if ((st = project(&c, &w1, (uint64_t)sel[i] * 2, xr, hv)) != FER_STATUS_OK) break;
      fer_tensor th = row_view(hv, inner), ta = row_view(av, inner);
      if (params->activation == FER_MOE_IDENTITY) {
        memcpy(av, hv, (size_t)inner * sizeof(float));
      } else if (params->activation == FER_MOE_SILU) {
        st = fer_silu(pool, &th, &ta);
      } else {
        fer_tensor tup = row_view(hv + inner, inner);
        st = fer_swiglu(pool, &th, &tup, &ta);
      }
      if (st != FER_STATUS_OK || (st = project(&c, &w2, (uint64_t)sel[i] * 2 + 1, av, yv)) != FER_STATUS_OK) break;
      for (int64_t e = 0; e < h; e++) acc[e] = fmaf(wts[i], yv[e], acc[e]);
    }
    if (st == FER_STATUS_OK)
      for (int64_t e = 0; e < h; e++)
        *(float *)((char *)out->data + r * out->strides[0] + e * out->strides[1]) = acc[e];
  }
  free(buf);
  return st;
}
