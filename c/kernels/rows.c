/* rows.c: see rows.h. */
#include "kernels/rows.h"

#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/status.h"
#include "core/threadpool.h"
#include "kernels/kernel_util.h"
#include "kernels/rowops.h"

fer_status feri_rows_init(feri_rows *r, const char *fn, const char *const *names,
                          const fer_tensor *const *ts, const feri_tensor_info *infos, int n) {
  memset(r, 0, sizeof *r);
  const fer_tensor *out = ts[0];
  if (out->rank < 1)
    return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: %s has rank 0; it needs a last axis", fn, names[0]);
  for (int t = 1; t < n; t++) {
    if (ts[t]->rank != out->rank)
      return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: %s has rank %d, %s has %d", fn, names[t],
                       (int)ts[t]->rank, names[0], (int)out->rank);
    for (int i = 0; i < out->rank; i++)
      if (ts[t]->shape[i] != out->shape[i])
        return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: %s axis %d has extent %lld, %s has %lld",
                         fn, names[t], i, (long long)ts[t]->shape[i], names[0],
                         (long long)out->shape[i]);
  }
  fer_status st = feri_tensor_check_writable(out, &infos[0], fn, names[0]);
  if (st != FER_STATUS_OK) return st;
  for (int t = 1; t < n; t++)
    if (feri_tensors_overlap(out, &infos[0], ts[t], &infos[t]) && !feri_tensors_identical(out, ts[t]))
      return feri_fail(FER_STATUS_INVALID_ARG, "%s: %s overlaps %s without being exactly it", fn,
                       names[0], names[t]);
  const int last = out->rank - 1;
  r->outer.rank = last;
  r->outer.n_operands = n;
  for (int i = 0; i < last; i++) {
    r->outer.shape[i] = out->shape[i];
    for (int t = 0; t < n; t++) r->outer.strides[t][i] = ts[t]->strides[i];
  }
  feri_nd_loop_coalesce(&r->outer);
  r->len = out->shape[last];
  r->n_rows = feri_nd_loop_count(&r->outer, r->outer.rank);
  for (int t = 0; t < n; t++) r->inner[t] = ts[t]->strides[last];
  r->rows_per_task = r->len >= FERI_TASK_ELEMS ? 1 : FERI_TASK_ELEMS / (r->len > 0 ? r->len : 1);
  if (infos[0].numel == 0) r->n_rows = 0;
  return FER_STATUS_OK;
}

void feri_rows_offsets(const feri_rows *r, int64_t row, int64_t *off) {
  feri_nd_loop_offsets(&r->outer, r->outer.rank, row, off);
}

void feri_row_load(const char *p, int64_t stride, fer_dtype dtype, int64_t n, float *dst) {
  if (dtype == FER_DTYPE_F32 && stride == 4) {
    memcpy(dst, p, (size_t)n * sizeof(float));
    return;
  }
  for (int64_t i = 0; i < n; i++) dst[i] = feri_elem_load(p + i * stride, dtype);
}

void feri_row_store(char *p, int64_t stride, fer_dtype dtype, int64_t n, const float *src) {
  if (dtype == FER_DTYPE_F32 && stride == 4) {
    memcpy(p, src, (size_t)n * sizeof(float));
    return;
  }
  for (int64_t i = 0; i < n; i++) feri_elem_store(p + i * stride, dtype, src[i]);
}

float feri_row_sum(const float *x, int64_t n, int square) {
  float partial[FERI_SUM_LANES] = {0};
  if (!square) { /* the plain sum is reduce_mean's row loop */
    feri_rowops_portable.sum_f32(x, (size_t)n, partial);
    return feri_sum_partials(partial);
  }
  int64_t i = 0;
  for (; i + FERI_SUM_LANES <= n; i += FERI_SUM_LANES)
    for (int l = 0; l < FERI_SUM_LANES; l++) partial[l] += x[i + l] * x[i + l];
  for (; i < n; i++) partial[i % FERI_SUM_LANES] += x[i] * x[i];
  return feri_sum_partials(partial);
}

typedef struct rows_job {
  const feri_rows *r;
  const fer_tensor *const *ts;
  int n;
  feri_row_fn fn;
  const void *ctx;
  float *scratch; /* slots x n x len */
} rows_job;

static void rows_task(void *vctx, int64_t task, uint32_t worker) {
  const rows_job *j = vctx;
  const feri_rows *r = j->r;
  float *bufs[FERI_MAX_OPERANDS];
  for (int t = 0; t < j->n; t++) bufs[t] = j->scratch + ((size_t)worker * (size_t)j->n + (size_t)t) * (size_t)r->len;
  const int64_t r0 = task * r->rows_per_task;
  const int64_t r1 = r0 + r->rows_per_task < r->n_rows ? r0 + r->rows_per_task : r->n_rows;
  for (int64_t row = r0; row < r1; row++) {
    int64_t off[FERI_MAX_OPERANDS];
    feri_rows_offsets(r, row, off);
    for (int t = 1; t < j->n; t++)
      feri_row_load((const char *)j->ts[t]->data + off[t], r->inner[t], j->ts[t]->dtype, r->len, bufs[t]);
    j->fn(j->ctx, row, bufs, r->len);
    feri_row_store((char *)j->ts[0]->data + off[0], r->inner[0], j->ts[0]->dtype, r->len, bufs[0]);
  }
}

fer_status feri_rows_run(fer_threadpool *pool, const feri_rows *r, const fer_tensor *const *ts,
                         int n, feri_row_fn fn, const void *ctx, const char *fn_name) {
  if (r->n_rows == 0 || r->len == 0) return FER_STATUS_OK;
  const size_t slots = feri_threadpool_slots(pool);
  const size_t floats = slots * (size_t)n * (size_t)r->len;
  float *scratch = malloc(floats * sizeof(float));
  if (scratch == NULL)
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: could not allocate %zu bytes of row scratch",
                     fn_name, floats * sizeof(float));
  rows_job j = {r, ts, n, fn, ctx, scratch};
  fer_status st = feri_threadpool_run_workers(pool, (r->n_rows + r->rows_per_task - 1) / r->rows_per_task,
                                              rows_task, &j);
  free(scratch);
  return st;
}
