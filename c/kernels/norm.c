/* norm.c: fer_rms_norm (contract in ffi/ferrite.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "core/tensor.h"
#include "kernels/kernel_util.h"
#include "kernels/rows.h"

static const char *const FN = "fer_rms_norm";

typedef struct norm_ctx {
  const float *weight; /* NULL: scale 1 */
  float eps;
} norm_ctx;

static void norm_row(const void *vctx, int64_t row, float *const *bufs, int64_t len) {
  const norm_ctx *c = vctx;
  (void)row;
  const float *x = bufs[1];
  float *y = bufs[0];
  const float r = 1.0f / sqrtf(feri_row_sum(x, len, 1) / (float)len + c->eps);
  for (int64_t i = 0; i < len; i++) y[i] = c->weight ? (x[i] * r) * c->weight[i] : x[i] * r;
}

fer_status fer_rms_norm(fer_threadpool *pool, const fer_tensor *x, const fer_tensor *weight,
                        float eps, const fer_tensor *out) {
  feri_error_clear();
  if (x == NULL || out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: x and out must not be NULL", FN);
  feri_tensor_info info[2], wi;
  fer_status st;
  if ((st = feri_tensor_validate(out, FN, "out", &info[0])) != FER_STATUS_OK) return st;
  if ((st = feri_tensor_validate(x, FN, "x", &info[1])) != FER_STATUS_OK) return st;
  if ((st = feri_require_float_dtype(x->dtype, FN)) != FER_STATUS_OK) return st;
  if ((st = feri_require_same_dtype(FN, x->dtype, "x", x->dtype, "out", out->dtype)) != FER_STATUS_OK) return st;
  if (!(eps >= 0.0f) || isinf(eps))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: eps %g is not a finite value >= 0", FN, (double)eps);
  const fer_tensor *ts[2] = {out, x};
  const char *names[2] = {"out", "x"};
  feri_rows r;
  if ((st = feri_rows_init(&r, FN, names, ts, info, 2)) != FER_STATUS_OK) return st;
  float *w = NULL;
  if (weight != NULL) {
    if ((st = feri_tensor_validate(weight, FN, "weight", &wi)) != FER_STATUS_OK) return st;
    if ((st = feri_require_float_dtype(weight->dtype, FN)) != FER_STATUS_OK) return st;
    if (weight->rank != 1 || weight->shape[0] != r.len)
      return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: weight must be [%lld] (x's last axis)", FN,
                       (long long)r.len);
    if (feri_tensors_overlap(out, &info[0], weight, &wi))
      return feri_fail(FER_STATUS_INVALID_ARG, "%s: out overlaps weight", FN);
    w = malloc((size_t)(r.len > 0 ? r.len : 1) * sizeof(float));
    if (w == NULL) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: out of memory", FN);
    feri_row_load(weight->data, weight->strides[0], weight->dtype, r.len, w);
  }
  norm_ctx c = {w, eps};
  st = feri_rows_run(pool, &r, ts, 2, norm_row, &c, FN);
  free(w);
  return st;
}
