/* embedding.c: fer_embedding, rows of a table by token id (contract in ffi/ferrite.h). */
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "core/tensor.h"
#include "core/threadpool.h"
#include "kernels/kernel_util.h"
#include "kernels/rows.h"

static const char *const FN = "fer_embedding";

typedef struct embed_job {
  const fer_tensor *table, *out;
  const int64_t *ids; /* flattened, validated */
  feri_nd_loop ids_loop; /* out's leading axes; operand 0 out */
  int64_t d;
  float *scratch; /* one row of d floats per worker */
} embed_job;

static void embed_task(void *ctx, int64_t t, uint32_t worker) {
  const embed_job *j = ctx;
  float *row = j->scratch + (size_t)worker * (size_t)j->d;
  const int64_t last = j->table->rank - 1;
  feri_row_load((const char *)j->table->data + j->ids[t] * j->table->strides[0], j->table->strides[last],
                j->table->dtype, j->d, row);
  int64_t off[FERI_MAX_OPERANDS];
  feri_nd_loop_offsets(&j->ids_loop, j->ids_loop.rank, t, off);
  feri_row_store((char *)j->out->data + off[0], j->out->strides[j->out->rank - 1], j->out->dtype, j->d, row);
}

fer_status fer_embedding(fer_threadpool *pool, const fer_tensor *table, const fer_tensor *ids,
                         const fer_tensor *out) {
  feri_error_clear();
  if (table == NULL || ids == NULL || out == NULL)
    return feri_fail(FER_STATUS_NULL_ARG, "%s: table, ids and out must not be NULL", FN);
  feri_tensor_info ti, ii, oi;
  fer_status st;
  if ((st = feri_tensor_validate(table, FN, "table", &ti)) != FER_STATUS_OK) return st;
  if ((st = feri_tensor_validate(ids, FN, "ids", &ii)) != FER_STATUS_OK) return st;
  if ((st = feri_tensor_validate(out, FN, "out", &oi)) != FER_STATUS_OK) return st;
  if ((st = feri_require_float_dtype(table->dtype, FN)) != FER_STATUS_OK) return st;
  if ((st = feri_require_float_dtype(out->dtype, FN)) != FER_STATUS_OK) return st;
  if (ids->dtype != FER_DTYPE_I32 && ids->dtype != FER_DTYPE_I64)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: ids must be I32 or I64", FN);
  if (table->rank != 2)
    return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: table has rank %d, expected [V, D]", FN, (int)table->rank);
  if (out->rank != ids->rank + 1)
    return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: out must have ids' shape plus [D]", FN);
  for (int i = 0; i < ids->rank; i++)
    if (out->shape[i] != ids->shape[i])
      return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: out axis %d has extent %lld, ids has %lld", FN,
                       i, (long long)out->shape[i], (long long)ids->shape[i]);
  const int64_t v = table->shape[0], d = table->shape[1];
  if (out->shape[ids->rank] != d)
    return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: out's last axis is %lld, the table's rows have %lld",
                     FN, (long long)out->shape[ids->rank], (long long)d);
  if ((st = feri_tensor_check_writable(out, &oi, FN, "out")) != FER_STATUS_OK) return st;
  if (feri_tensors_overlap(out, &oi, table, &ti) || feri_tensors_overlap(out, &oi, ids, &ii))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: out overlaps table or ids", FN);
  const int64_t n = ii.numel;
  if (n == 0 || d == 0) return FER_STATUS_OK;
  int64_t *flat = malloc((size_t)n * sizeof *flat);
  float *scratch = malloc((size_t)feri_threadpool_slots(pool) * (size_t)d * sizeof(float));
  if (flat == NULL || scratch == NULL) {
    free(flat);
    free(scratch);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: out of memory", FN);
  }
  /* every id is checked before anything is written */
  feri_nd_loop il;
  memset(&il, 0, sizeof il);
  il.rank = ids->rank;
  il.n_operands = 1;
  for (int i = 0; i < ids->rank; i++) {
    il.shape[i] = ids->shape[i];
    il.strides[0][i] = ids->strides[i];
  }
  for (int64_t t = 0; t < n; t++) {
    int64_t off[FERI_MAX_OPERANDS];
    feri_nd_loop_offsets(&il, il.rank, t, off);
    const char *p = (const char *)ids->data + off[0];
    int64_t id;
    if (ids->dtype == FER_DTYPE_I64) {
      memcpy(&id, p, sizeof id);
    } else {
      int32_t v32;
      memcpy(&v32, p, sizeof v32);
      id = v32;
    }
    if (id < 0 || id >= v) {
      free(flat);
      free(scratch);
      return feri_fail(FER_STATUS_INVALID_ARG, "%s: id %lld at position %lld is outside [0, %lld)", FN,
                       (long long)id, (long long)t, (long long)v);
    }
    flat[t] = id;
  }
  embed_job j;
  memset(&j, 0, sizeof j);
  j.table = table;
  j.out = out;
  j.ids = flat;
  j.d = d;
  j.scratch = scratch;
  j.ids_loop.rank = ids->rank;
  j.ids_loop.n_operands = 1;
  for (int i = 0; i < ids->rank; i++) {
    j.ids_loop.shape[i] = out->shape[i];
    j.ids_loop.strides[0][i] = out->strides[i];
  }
  st = feri_threadpool_run_workers(pool, n, embed_task, &j);
  free(flat);
  free(scratch);
  return st;
}
