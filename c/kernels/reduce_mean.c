/* reduce_mean.c: fer_reduce_mean, mean over the last axis with keepdims (contract in ferrite.h). */
#include <math.h>
#include <string.h>

#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"
#include "core/threadpool.h"
#include "kernels/kernel_util.h"
#include "kernels/rowops.h"

static const char *const FN = "fer_reduce_mean";

typedef struct mean_job {
  feri_nd_loop rows; /* the outer axes; operands: 0 x, 1 out */
  const feri_rowops *ops;
  fer_dtype dtype;
  int64_t n_rows;
  int64_t rows_per_task;
  int64_t len;      /* length of the reduced axis */
  int64_t x_stride; /* bytes between elements of the reduced axis */
  const char *x;
  char *out;
} mean_job;

static float row_sum(const mean_job *j, const char *x) {
  float partial[FERI_SUM_LANES] = {0};
  const size_t n = (size_t)j->len;
  const int64_t s = j->x_stride;
  switch (j->dtype) {
    case FER_DTYPE_F32:
      if (s == 4) {
        j->ops->sum_f32((const float *)x, n, partial);
      } else {
        for (size_t k = 0; k < n; k++) {
          float v;
          memcpy(&v, x + (int64_t)k * s, sizeof v);
          partial[k % FERI_SUM_LANES] += v;
        }
      }
      break;
    case FER_DTYPE_F16:
      if (s == 2) {
        j->ops->sum_f16((const uint16_t *)x, n, partial);
      } else {
        for (size_t k = 0; k < n; k++)
          partial[k % FERI_SUM_LANES] += feri_f16_to_f32(*(const uint16_t *)(x + (int64_t)k * s));
      }
      break;
    default:
      if (s == 2) {
        j->ops->sum_bf16((const uint16_t *)x, n, partial);
      } else {
        for (size_t k = 0; k < n; k++)
          partial[k % FERI_SUM_LANES] += feri_bf16_to_f32(*(const uint16_t *)(x + (int64_t)k * s));
      }
      break;
  }
  return feri_sum_partials(partial);
}

static void mean_task(void *ctx, int64_t task) {
  const mean_job *j = ctx;
  int64_t r0 = task * j->rows_per_task;
  int64_t r1 = r0 + j->rows_per_task < j->n_rows ? r0 + j->rows_per_task : j->n_rows;
  for (int64_t r = r0; r < r1; r++) {
    int64_t off[FERI_MAX_OPERANDS];
    feri_nd_loop_offsets(&j->rows, j->rows.rank, r, off);
    float mean = j->len == 0 ? NAN : row_sum(j, j->x + off[0]) / (float)j->len;
    char *o = j->out + off[1];
    switch (j->dtype) {
      case FER_DTYPE_F32: memcpy(o, &mean, sizeof mean); break;
      case FER_DTYPE_F16: *(uint16_t *)o = feri_f32_to_f16(mean); break;
      default: *(uint16_t *)o = feri_f32_to_bf16(mean); break;
    }
  }
}

fer_status fer_reduce_mean(fer_threadpool *pool, const fer_tensor *x, const fer_tensor *out) {
  feri_error_clear();
  feri_tensor_info xi, oi;
  fer_status st;
  if ((st = feri_tensor_validate(x, FN, "x", &xi)) != FER_STATUS_OK) return st;
  if ((st = feri_tensor_validate(out, FN, "out", &oi)) != FER_STATUS_OK) return st;
  if ((st = feri_require_float_dtype(x->dtype, FN)) != FER_STATUS_OK) return st;
  if ((st = feri_require_same_dtype(FN, x->dtype, "x", x->dtype, "out", out->dtype)) != FER_STATUS_OK)
    return st;
  if (x->rank < 1)
    return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: x has rank 0; it needs an axis to reduce", FN);
  if (out->rank != x->rank)
    return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: out has rank %d, x has rank %d (keepdims)", FN,
                     (int)out->rank, (int)x->rank);
  const int last = x->rank - 1;
  for (int i = 0; i < last; i++)
    if (out->shape[i] != x->shape[i])
      return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: out axis %d has extent %lld, x has %lld", FN,
                       i, (long long)out->shape[i], (long long)x->shape[i]);
  if (out->shape[last] != 1)
    return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: out's last axis has extent %lld, expected 1",
                     FN, (long long)out->shape[last]);
  if ((st = feri_tensor_check_writable(out, &oi, FN, "out")) != FER_STATUS_OK) return st;
  if (feri_tensors_overlap(out, &oi, x, &xi))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: out overlaps x", FN);
  if (oi.numel == 0) return FER_STATUS_OK;

  mean_job j;
  memset(&j, 0, sizeof j);
  j.rows.rank = last;
  j.rows.n_operands = 2;
  for (int i = 0; i < last; i++) {
    j.rows.shape[i] = x->shape[i];
    j.rows.strides[0][i] = x->strides[i];
    j.rows.strides[1][i] = out->strides[i];
  }
  feri_nd_loop_coalesce(&j.rows);
  j.ops = feri_rowops_for(feri_threadpool_effective_isa(pool));
  j.dtype = x->dtype;
  j.n_rows = oi.numel;
  j.len = x->shape[last];
  j.x_stride = x->strides[last];
  j.x = x->data;
  j.out = out->data;
  j.rows_per_task = j.len >= FERI_TASK_ELEMS ? 1 : FERI_TASK_ELEMS / (j.len > 0 ? j.len : 1);
  int64_t n_tasks = (j.n_rows + j.rows_per_task - 1) / j.rows_per_task;
  return feri_threadpool_run(pool, n_tasks, mean_task, &j);
}
