/* activation.c: fer_silu, fer_swiglu and fer_softmax (contracts in ffi/ferrite.h). */
#include <math.h>

#include "core/status.h"
#include "core/tensor.h"
#include "core/threadpool.h"
#include "kernels/kernel_util.h"
#include "kernels/rowops.h"
#include "kernels/rows.h"

/* SiLU and SwiGLU rows through the pool's table (ctx): feri_silu, vectorised where the ISA allows,
 * the same bits at every level. */
static void silu_row(const void *ctx, int64_t row, float *const *bufs, int64_t len) {
  (void)row;
  ((const feri_rowops *)ctx)->silu_f32(bufs[1], NULL, bufs[0], (size_t)len);
}

static void swiglu_row(const void *ctx, int64_t row, float *const *bufs, int64_t len) {
  (void)row;
  ((const feri_rowops *)ctx)->silu_f32(bufs[1], bufs[2], bufs[0], (size_t)len);
}

static void softmax_row(const void *ctx, int64_t row, float *const *bufs, int64_t len) {
  (void)ctx;
  (void)row;
  const float *x = bufs[1];
  float *y = bufs[0];
  float m = -INFINITY;
  int nan = 0;
  for (int64_t i = 0; i < len; i++) {
    nan |= isnan(x[i]);
    m = x[i] > m ? x[i] : m;
  }
  if (nan || m == -INFINITY) { /* no finite maximum: nothing to normalise against */
    for (int64_t i = 0; i < len; i++) y[i] = NAN;
    return;
  }
  for (int64_t i = 0; i < len; i++) y[i] = expf(x[i] - m);
  const float sum = feri_row_sum(y, len, 0);
  for (int64_t i = 0; i < len; i++) y[i] = y[i] / sum;
}

/* Shared entry: validates out and the inputs (same shape and float dtype), then runs fn. */
static fer_status run_rowwise(fer_threadpool *pool, const char *fn_name, const fer_tensor *out,
                              const fer_tensor *in0, const char *name0, const fer_tensor *in1,
                              const char *name1, feri_row_fn fn, const void *ctx) {
  feri_error_clear();
  const int n = in1 ? 3 : 2;
  if (out == NULL || in0 == NULL || (n == 3 && in1 == NULL))
    return feri_fail(FER_STATUS_NULL_ARG, "%s: a tensor argument is NULL", fn_name);
  const fer_tensor *ts[3] = {out, in0, in1};
  const char *names[3] = {"out", name0, name1};
  feri_tensor_info info[3];
  fer_status st;
  for (int t = 0; t < n; t++)
    if ((st = feri_tensor_validate(ts[t], fn_name, names[t], &info[t])) != FER_STATUS_OK) return st;
  if ((st = feri_require_float_dtype(out->dtype, fn_name)) != FER_STATUS_OK) return st;
  for (int t = 1; t < n; t++)
    if ((st = feri_require_same_dtype(fn_name, out->dtype, names[t], ts[t]->dtype, "out", out->dtype)) != FER_STATUS_OK)
      return st;
  feri_rows r;
  if ((st = feri_rows_init(&r, fn_name, names, ts, info, n)) != FER_STATUS_OK) return st;
  return feri_rows_run(pool, &r, ts, n, fn, ctx, fn_name);
}

fer_status fer_silu(fer_threadpool *pool, const fer_tensor *x, const fer_tensor *out) {
  return run_rowwise(pool, "fer_silu", out, x, "x", NULL, NULL, silu_row,
                     feri_rowops_for(feri_threadpool_effective_isa(pool)));
}

fer_status fer_swiglu(fer_threadpool *pool, const fer_tensor *gate, const fer_tensor *up,
                      const fer_tensor *out) {
  if (up == NULL) {
    feri_error_clear();
    return feri_fail(FER_STATUS_NULL_ARG, "fer_swiglu: up is NULL");
  }
  return run_rowwise(pool, "fer_swiglu", out, gate, "gate", up, "up", swiglu_row,
                     feri_rowops_for(feri_threadpool_effective_isa(pool)));
}

fer_status fer_softmax(fer_threadpool *pool, const fer_tensor *x, const fer_tensor *out) {
  return run_rowwise(pool, "fer_softmax", out, x, "x", NULL, NULL, softmax_row, NULL);
}
