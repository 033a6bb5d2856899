/* add.c: fer_add, elementwise addition with numpy broadcasting (contract in ffi/ferrite.h). */
#include <string.h>

#include "core/status.h"
#include "core/tensor.h"
#include "core/threadpool.h"
#include "kernels/kernel_util.h"
#include "kernels/rowops.h"

static const char *const FN = "fer_add";

typedef struct add_job {
  feri_nd_loop loop; /* operands: 0 out, 1 a, 2 b */
  const feri_rowops *ops;
  fer_dtype dtype;
  int64_t total;
  char *out;
  const char *a;
  const char *b;
  int64_t es;
} add_job;

/* Adds n elements; unit-stride rows go through the row loops, anything else one element at a
 * time through the same loops, so every element sees the same arithmetic. */
static void add_run(const add_job *j, char *o, const char *a, const char *b, int64_t so,
                    int64_t sa, int64_t sb, int64_t n) {
  const int64_t es = j->es;
  int fast = so == es && (sa == 0 || sa == es) && (sb == 0 || sb == es);
  int64_t step = fast ? n : 1;
  for (int64_t i = 0; i < n; i += step) {
    char *po = o + i * so;
    const char *pa = a + i * sa, *pb = b + i * sb;
    int ua = sa != 0, ub = sb != 0;
    switch (j->dtype) {
      case FER_DTYPE_F32: j->ops->add_f32((const float *)pa, ua, (const float *)pb, ub, (float *)po, (size_t)step); break;
      case FER_DTYPE_F16: j->ops->add_f16((const uint16_t *)pa, ua, (const uint16_t *)pb, ub, (uint16_t *)po, (size_t)step); break;
      default: j->ops->add_bf16((const uint16_t *)pa, ua, (const uint16_t *)pb, ub, (uint16_t *)po, (size_t)step); break;
    }
  }
}

static void add_task(void *ctx, int64_t task) {
  const add_job *j = ctx;
  const feri_nd_loop *l = &j->loop;
  const int r = l->rank;
  const int64_t inner = l->shape[r - 1];
  int64_t e = task * FERI_TASK_ELEMS;
  int64_t end = e + FERI_TASK_ELEMS < j->total ? e + FERI_TASK_ELEMS : j->total;
  while (e < end) {
    int64_t row = e / inner, col = e % inner;
    int64_t n = inner - col < end - e ? inner - col : end - e;
    int64_t off[FERI_MAX_OPERANDS];
    feri_nd_loop_offsets(l, r - 1, row, off);
    const int64_t so = l->strides[0][r - 1], sa = l->strides[1][r - 1], sb = l->strides[2][r - 1];
    add_run(j, j->out + off[0] + col * so, j->a + off[1] + col * sa, j->b + off[2] + col * sb, so,
            sa, sb, n);
    e += n;
  }
}

/* Strides of input `t` seen through out's shape: missing leading axes and extent-1 axes get 0. */
static fer_status broadcast_strides(const fer_tensor *t, const char *name, const fer_tensor *out,
                                    int64_t *strides) {
  const int lead = out->rank - t->rank;
  if (lead < 0)
    return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: %s has rank %d, above out's rank %d", FN,
                     name, (int)t->rank, (int)out->rank);
  for (int i = 0; i < out->rank; i++) {
    if (i < lead) {
      strides[i] = 0;
      continue;
    }
    int64_t n = t->shape[i - lead];
    if (n == out->shape[i]) {
      strides[i] = t->strides[i - lead];
    } else if (n == 1) {
      strides[i] = 0;
    } else {
      return feri_fail(FER_STATUS_SHAPE_MISMATCH,
                       "%s: %s axis %d has extent %lld, cannot broadcast to out's %lld", FN, name,
                       i - lead, (long long)n, (long long)out->shape[i]);
    }
  }
  return FER_STATUS_OK;
}

/* out's shape must be the broadcast shape itself, not merely something both inputs stretch to. */
static fer_status check_out_is_broadcast(const fer_tensor *a, const fer_tensor *b,
                                         const fer_tensor *out) {
  for (int i = 0; i < out->rank; i++) {
    int ia = i - (out->rank - a->rank), ib = i - (out->rank - b->rank);
    int64_t na = ia >= 0 ? a->shape[ia] : 1, nb = ib >= 0 ? b->shape[ib] : 1;
    int64_t want = na != 1 ? na : nb;
    if (out->shape[i] != want)
      return feri_fail(FER_STATUS_SHAPE_MISMATCH,
                       "%s: out axis %d has extent %lld, the broadcast of a and b gives %lld", FN,
                       i, (long long)out->shape[i], (long long)want);
  }
  if (out->rank > a->rank && out->rank > b->rank)
    return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: out has rank %d, above both inputs' ranks", FN,
                     (int)out->rank);
  return FER_STATUS_OK;
}

fer_status fer_add(fer_threadpool *pool, const fer_tensor *a, const fer_tensor *b,
                   const fer_tensor *out) {
  feri_error_clear();
  feri_tensor_info ai, bi, oi;
  fer_status st;
  if ((st = feri_tensor_validate(a, FN, "a", &ai)) != FER_STATUS_OK) return st;
  if ((st = feri_tensor_validate(b, FN, "b", &bi)) != FER_STATUS_OK) return st;
  if ((st = feri_tensor_validate(out, FN, "out", &oi)) != FER_STATUS_OK) return st;
  if ((st = feri_require_float_dtype(a->dtype, FN)) != FER_STATUS_OK) return st;
  if ((st = feri_require_same_dtype(FN, a->dtype, "b", b->dtype, "out", out->dtype)) != FER_STATUS_OK)
    return st;

  add_job j;
  memset(&j, 0, sizeof j);
  if ((st = broadcast_strides(a, "a", out, j.loop.strides[1])) != FER_STATUS_OK) return st;
  if ((st = broadcast_strides(b, "b", out, j.loop.strides[2])) != FER_STATUS_OK) return st;
  if ((st = check_out_is_broadcast(a, b, out)) != FER_STATUS_OK) return st;
  if ((st = feri_tensor_check_writable(out, &oi, FN, "out")) != FER_STATUS_OK) return st;
  if (feri_tensors_overlap(out, &oi, a, &ai) && !feri_tensors_identical(out, a))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: out overlaps a without being exactly a", FN);
  if (feri_tensors_overlap(out, &oi, b, &bi) && !feri_tensors_identical(out, b))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: out overlaps b without being exactly b", FN);
  if (oi.numel == 0) return FER_STATUS_OK;

  j.loop.rank = out->rank;
  j.loop.n_operands = 3;
  for (int i = 0; i < out->rank; i++) {
    j.loop.shape[i] = out->shape[i];
    j.loop.strides[0][i] = out->strides[i];
  }
  feri_nd_loop_coalesce(&j.loop);
  j.ops = feri_rowops_for(feri_threadpool_effective_isa(pool));
  j.dtype = a->dtype;
  j.total = oi.numel;
  j.out = out->data;
  j.a = a->data;
  j.b = b->data;
  j.es = (int64_t)oi.elem_size;
  int64_t n_tasks = (j.total + FERI_TASK_ELEMS - 1) / FERI_TASK_ELEMS;
  return feri_threadpool_run(pool, n_tasks, add_task, &j);
}
