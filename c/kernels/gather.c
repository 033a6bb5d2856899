/* gather.c: fer_gather along axis 0 with ONNX index semantics (contract in ffi/ferrite.h). */
#include <string.h>

#include "core/status.h"
#include "core/tensor.h"
#include "core/threadpool.h"
#include "kernels/kernel_util.h"

static const char *const FN = "fer_gather";

typedef struct gather_job {
  feri_nd_loop positions; /* indices' axes; operands: 0 indices, 1 out */
  feri_nd_loop row;       /* data's axes after 0; operands: 0 out, 1 data */
  int64_t n_positions;
  int64_t positions_per_task;
  int64_t n_rows; /* data's extent along axis 0 */
  int64_t data_stride0;
  fer_dtype index_dtype;
  int64_t es;
  const char *data;
  const char *indices;
  char *out;
} gather_job;

static int64_t read_index(fer_dtype dtype, const char *p) {
  if (dtype == FER_DTYPE_I64) {
    int64_t v;
    memcpy(&v, p, sizeof v);
    return v;
  }
  int32_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

/* Copies one slice data[row, ...] to its place in out. */
static void copy_row(const gather_job *j, char *dst, const char *src) {
  const feri_nd_loop *l = &j->row;
  const int r = l->rank;
  const int64_t inner = l->shape[r - 1];
  const int64_t so = l->strides[0][r - 1], sd = l->strides[1][r - 1];
  const int64_t outer = feri_nd_loop_count(l, r - 1);
  for (int64_t k = 0; k < outer; k++) {
    int64_t off[FERI_MAX_OPERANDS];
    feri_nd_loop_offsets(l, r - 1, k, off);
    char *o = dst + off[0];
    const char *d = src + off[1];
    if (so == j->es && sd == j->es) {
      memcpy(o, d, (size_t)(inner * j->es));
    } else {
      for (int64_t i = 0; i < inner; i++) memcpy(o + i * so, d + i * sd, (size_t)j->es);
    }
  }
}

static void gather_task(void *ctx, int64_t task) {
  const gather_job *j = ctx;
  int64_t p0 = task * j->positions_per_task;
  int64_t p1 = p0 + j->positions_per_task < j->n_positions ? p0 + j->positions_per_task : j->n_positions;
  for (int64_t p = p0; p < p1; p++) {
    int64_t off[FERI_MAX_OPERANDS];
    feri_nd_loop_offsets(&j->positions, j->positions.rank, p, off);
    int64_t idx = read_index(j->index_dtype, j->indices + off[0]);
    if (idx < 0) idx += j->n_rows; /* validated before any task ran */
    copy_row(j, j->out + off[1], j->data + idx * j->data_stride0);
  }
}

/* Every index is checked before anything is written, so a refused call leaves out untouched. */
static fer_status check_indices(const gather_job *j) {
  for (int64_t p = 0; p < j->n_positions; p++) {
    int64_t off[FERI_MAX_OPERANDS];
    feri_nd_loop_offsets(&j->positions, j->positions.rank, p, off);
    int64_t idx = read_index(j->index_dtype, j->indices + off[0]);
    if (idx < -j->n_rows || idx >= j->n_rows)
      return feri_fail(FER_STATUS_INVALID_ARG,
                       "%s: index %lld at flat position %lld is outside [-%lld, %lld)", FN,
                       (long long)idx, (long long)p, (long long)j->n_rows, (long long)j->n_rows);
  }
  return FER_STATUS_OK;
}

fer_status fer_gather(fer_threadpool *pool, const fer_tensor *data, const fer_tensor *indices,
                      const fer_tensor *out) {
  feri_error_clear();
  feri_tensor_info di, ii, oi;
  fer_status st;
  if ((st = feri_tensor_validate(data, FN, "data", &di)) != FER_STATUS_OK) return st;
  if ((st = feri_tensor_validate(indices, FN, "indices", &ii)) != FER_STATUS_OK) return st;
  if ((st = feri_tensor_validate(out, FN, "out", &oi)) != FER_STATUS_OK) return st;
  if (indices->dtype != FER_DTYPE_I64 && indices->dtype != FER_DTYPE_I32)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: indices must be i64 or i32", FN);
  if (out->dtype != data->dtype)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: out's dtype differs from data's", FN);
  if (data->rank < 1)
    return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: data has rank 0; it needs an axis 0", FN);
  const int ir = indices->rank, tail = data->rank - 1;
  if (out->rank != ir + tail)
    return feri_fail(FER_STATUS_SHAPE_MISMATCH,
                     "%s: out has rank %d, expected indices' rank %d + data's rank %d - 1", FN,
                     (int)out->rank, ir, (int)data->rank);
  for (int i = 0; i < out->rank; i++) {
    int64_t want = i < ir ? indices->shape[i] : data->shape[i - ir + 1];
    if (out->shape[i] != want)
      return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: out axis %d has extent %lld, expected %lld",
                       FN, i, (long long)out->shape[i], (long long)want);
  }
  if ((st = feri_tensor_check_writable(out, &oi, FN, "out")) != FER_STATUS_OK) return st;
  if (feri_tensors_overlap(out, &oi, data, &di))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: out overlaps data", FN);
  if (feri_tensors_overlap(out, &oi, indices, &ii))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: out overlaps indices", FN);

  gather_job j;
  memset(&j, 0, sizeof j);
  j.positions.rank = ir;
  j.positions.n_operands = 2;
  for (int i = 0; i < ir; i++) {
    j.positions.shape[i] = indices->shape[i];
    j.positions.strides[0][i] = indices->strides[i];
    j.positions.strides[1][i] = out->strides[i];
  }
  feri_nd_loop_coalesce(&j.positions);
  j.n_positions = ii.numel;
  j.n_rows = data->shape[0];
  j.data_stride0 = data->strides[0];
  j.index_dtype = indices->dtype;
  j.indices = indices->data;
  if ((st = check_indices(&j)) != FER_STATUS_OK) return st;
  if (oi.numel == 0) return FER_STATUS_OK;

  j.row.rank = tail;
  j.row.n_operands = 2;
  for (int i = 0; i < tail; i++) {
    j.row.shape[i] = data->shape[i + 1];
    j.row.strides[0][i] = out->strides[ir + i];
    j.row.strides[1][i] = data->strides[i + 1];
  }
  feri_nd_loop_coalesce(&j.row);
  int64_t row_elems = oi.numel / j.n_positions;
  j.positions_per_task = row_elems >= FERI_TASK_ELEMS ? 1 : FERI_TASK_ELEMS / row_elems;
  j.es = (int64_t)di.elem_size;
  j.data = data->data;
  j.out = out->data;
  int64_t n_tasks = (j.n_positions + j.positions_per_task - 1) / j.positions_per_task;
  return feri_threadpool_run(pool, n_tasks, gather_task, &j);
}
