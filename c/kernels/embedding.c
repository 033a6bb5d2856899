/* embedding.c: fer_embedding, rows of a table by token id (contract in ffi/ferrite.h). */
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "core/tensor.h"
#include "core/threadpool.h"
#include "kernels/kernel_util.h"
#include "kernels/quant.h"
#include "kernels/rows.h"

static const char *const FN = "fer_embedding";

/* The table: a dense [V, D] tensor, or a block-quantized matrix. */
typedef struct embed_table {
  const fer_tensor *dense;
  const fer_qmatrix *q;
  int64_t v, d;
  const char *lo, *hi; /* the bytes it occupies, for the overlap check */
} embed_table;

typedef struct embed_job {
  const embed_table *table;
  const fer_tensor *out;
  const int64_t *ids;    /* flattened, validated */
  feri_nd_loop ids_loop; /* out's leading axes; operand 0 out */
  float *scratch;        /* one row of d floats per worker */
} embed_job;

static void embed_task(void *ctx, int64_t t, uint32_t worker) {
  const embed_job *j = ctx;
  const embed_table *tb = j->table;
  float *row = j->scratch + (size_t)worker * (size_t)tb->d;
  if (tb->q != NULL) {
    const size_t bb = feri_qblock_bytes(tb->q->dtype);
    const int64_t be = feri_qblock_elems(tb->q->dtype);
    const uint8_t *src = (const uint8_t *)tb->q->data + j->ids[t] * tb->q->row_stride;
    for (int64_t b = 0; b < tb->d / be; b++) feri_qblock_dequant(tb->q->dtype, src + (size_t)b * bb, row + b * be);
  } else {
    const fer_tensor *d = tb->dense;
    feri_row_load((const char *)d->data + j->ids[t] * d->strides[0], d->strides[1], d->dtype, tb->d, row);
  }
  int64_t off[FERI_MAX_OPERANDS];
  feri_nd_loop_offsets(&j->ids_loop, j->ids_loop.rank, t, off);
  feri_row_store((char *)j->out->data + off[0], j->out->strides[j->out->rank - 1], j->out->dtype, tb->d, row);
}

/* Everything but the table's own checks: ids and out against [V, D], every id, then the rows. */
static fer_status embed(fer_threadpool *pool, const char *fn, const embed_table *tb,
                        const fer_tensor *ids, const fer_tensor *out) {
  feri_tensor_info ii, oi;
  fer_status st;
  if ((st = feri_tensor_validate(ids, fn, "ids", &ii)) != FER_STATUS_OK) return st;
  if ((st = feri_tensor_validate(out, fn, "out", &oi)) != FER_STATUS_OK) return st;
  if ((st = feri_require_float_dtype(out->dtype, fn)) != FER_STATUS_OK) return st;
  if (ids->dtype != FER_DTYPE_I32 && ids->dtype != FER_DTYPE_I64)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: ids must be I32 or I64", fn);
  if (out->rank != ids->rank + 1)
    return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: out must have ids' shape plus [D]", fn);
  for (int i = 0; i < ids->rank; i++)
    if (out->shape[i] != ids->shape[i])
      return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: out axis %d has extent %lld, ids has %lld", fn,
                       i, (long long)out->shape[i], (long long)ids->shape[i]);
  if (out->shape[ids->rank] != tb->d)
    return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: out's last axis is %lld, the table's rows have %lld",
                     fn, (long long)out->shape[ids->rank], (long long)tb->d);
  if ((st = feri_tensor_check_writable(out, &oi, fn, "out")) != FER_STATUS_OK) return st;
  const char *olo = (const char *)out->data + oi.lo, *ohi = (const char *)out->data + oi.hi;
  if (oi.numel > 0 && ((olo < tb->hi && tb->lo < ohi) || feri_tensors_overlap(out, &oi, ids, &ii)))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: out overlaps table or ids", fn);
  const int64_t n = ii.numel;
  if (n == 0 || tb->d == 0) return FER_STATUS_OK;
  int64_t *flat = malloc((size_t)n * sizeof *flat);
  float *scratch = malloc((size_t)feri_threadpool_slots(pool) * (size_t)tb->d * sizeof(float));
  if (flat == NULL || scratch == NULL) {
    free(flat);
    free(scratch);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
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
    if (id < 0 || id >= tb->v) {
      free(flat);
      free(scratch);
      return feri_fail(FER_STATUS_INVALID_ARG, "%s: id %lld at position %lld is outside [0, %lld)", fn,
                       (long long)id, (long long)t, (long long)tb->v);
    }
    flat[t] = id;
  }
  embed_job j;
  memset(&j, 0, sizeof j);
  j.table = tb;
  j.out = out;
  j.ids = flat;
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

fer_status fer_embedding(fer_threadpool *pool, const fer_tensor *table, const fer_tensor *ids,
                         const fer_tensor *out) {
  feri_error_clear();
  if (table == NULL || ids == NULL || out == NULL)
    return feri_fail(FER_STATUS_NULL_ARG, "%s: table, ids and out must not be NULL", FN);
  feri_tensor_info ti;
  fer_status st;
  if ((st = feri_tensor_validate(table, FN, "table", &ti)) != FER_STATUS_OK) return st;
  if ((st = feri_require_float_dtype(table->dtype, FN)) != FER_STATUS_OK) return st;
  if (table->rank != 2)
    return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: table has rank %d, expected [V, D]", FN, (int)table->rank);
  embed_table tb = {table, NULL, table->shape[0], table->shape[1], (const char *)table->data + ti.lo,
                    (const char *)table->data + ti.hi};
  if (ti.numel == 0) tb.lo = tb.hi = NULL;
  return embed(pool, FN, &tb, ids, out);
}

fer_status fer_embedding_quant(fer_threadpool *pool, const fer_qmatrix *table, const fer_tensor *ids,
                               const fer_tensor *out) {
  static const char *const QFN = "fer_embedding_quant";
  feri_error_clear();
  if (table == NULL || ids == NULL || out == NULL)
    return feri_fail(FER_STATUS_NULL_ARG, "%s: table, ids and out must not be NULL", QFN);
  fer_status st = feri_qmatrix_validate(table, QFN);
  if (st != FER_STATUS_OK) return st;
  const int empty = table->rows == 0 || table->cols == 0;
  embed_table tb = {NULL, table, table->rows, table->cols, empty ? NULL : (const char *)table->data,
                    empty ? NULL : (const char *)table->data + table->bytes};
  return embed(pool, QFN, &tb, ids, out);
}
