/* argmax.c: fer_argmax over the last axis (contract in ffi/ferrite.h). */
#include <math.h>
#include <string.h>

#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"
#include "core/threadpool.h"
#include "kernels/kernel_util.h"
#include "kernels/rows.h"

static const char *const FN = "fer_argmax";

typedef struct argmax_job {
  feri_nd_loop outer; /* operands: 0 out, 1 x */
  int64_t n_rows, len, x_stride, rows_per_task;
  const fer_tensor *x, *out;
} argmax_job;

static int64_t row_argmax(const char *p, int64_t stride, fer_dtype dtype, int64_t n) {
  int64_t best = 0;
  float m = feri_elem_load(p, dtype);
  if (isnan(m)) return 0;
  for (int64_t i = 1; i < n; i++) {
    const float v = feri_elem_load(p + i * stride, dtype);
    if (isnan(v)) return i; /* numpy: the first NaN wins */
    if (v > m) {
      m = v;
      best = i;
    }
  }
  return best;
}

static void argmax_task(void *ctx, int64_t task) {
  const argmax_job *j = ctx;
  const int64_t r0 = task * j->rows_per_task;
  const int64_t r1 = r0 + j->rows_per_task < j->n_rows ? r0 + j->rows_per_task : j->n_rows;
  for (int64_t row = r0; row < r1; row++) {
    int64_t off[FERI_MAX_OPERANDS];
    feri_nd_loop_offsets(&j->outer, j->outer.rank, row, off);
    const int64_t idx = row_argmax((const char *)j->x->data + off[1], j->x_stride, j->x->dtype, j->len);
    char *o = (char *)j->out->data + off[0];
    if (j->out->dtype == FER_DTYPE_I64) {
      memcpy(o, &idx, sizeof idx);
    } else {
      const int32_t v = (int32_t)idx;
      memcpy(o, &v, sizeof v);
    }
  }
}

fer_status fer_argmax(fer_threadpool *pool, const fer_tensor *x, const fer_tensor *out) {
  feri_error_clear();
  if (x == NULL || out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: x and out must not be NULL", FN);
  feri_tensor_info xi, oi;
  fer_status st;
  if ((st = feri_tensor_validate(x, FN, "x", &xi)) != FER_STATUS_OK) return st;
  if ((st = feri_tensor_validate(out, FN, "out", &oi)) != FER_STATUS_OK) return st;
  if ((st = feri_require_float_dtype(x->dtype, FN)) != FER_STATUS_OK) return st;
  if (out->dtype != FER_DTYPE_I32 && out->dtype != FER_DTYPE_I64)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: out must be I32 or I64", FN);
  if (x->rank < 1 || out->rank != x->rank - 1)
    return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: out must have x's shape without its last axis", FN);
  for (int i = 0; i < out->rank; i++)
    if (out->shape[i] != x->shape[i])
      return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: out axis %d has extent %lld, x has %lld", FN,
                       i, (long long)out->shape[i], (long long)x->shape[i]);
  const int64_t len = x->shape[x->rank - 1];
  if (len == 0 && oi.numel > 0)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: x's last axis is empty; there is no maximum", FN);
  if (out->dtype == FER_DTYPE_I32 && len > INT32_MAX)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: %lld positions do not fit I32", FN, (long long)len);
  if ((st = feri_tensor_check_writable(out, &oi, FN, "out")) != FER_STATUS_OK) return st;
  if (feri_tensors_overlap(out, &oi, x, &xi)) return feri_fail(FER_STATUS_INVALID_ARG, "%s: out overlaps x", FN);
  if (oi.numel == 0) return FER_STATUS_OK;
  argmax_job j;
  memset(&j, 0, sizeof j);
  j.outer.rank = out->rank;
  j.outer.n_operands = 2;
  for (int i = 0; i < out->rank; i++) {
    j.outer.shape[i] = out->shape[i];
    j.outer.strides[0][i] = out->strides[i];
    j.outer.strides[1][i] = x->strides[i];
  }
  feri_nd_loop_coalesce(&j.outer);
  j.n_rows = oi.numel;
  j.len = len;
  j.x_stride = x->strides[x->rank - 1];
  j.rows_per_task = len >= FERI_TASK_ELEMS ? 1 : FERI_TASK_ELEMS / len;
  j.x = x;
  j.out = out;
  return feri_threadpool_run(pool, (j.n_rows + j.rows_per_task - 1) / j.rows_per_task, argmax_task, &j);
}
