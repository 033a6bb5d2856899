/* rope.c: fer_rope, rotary position embedding (contract in ffi/ferrite.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "core/tensor.h"
#include "core/threadpool.h"
#include "kernels/kernel_util.h"
#include "kernels/rows.h"

static const char *const FN = "fer_rope";

typedef struct rope_ctx {
  const int64_t *positions;
  const double *freq; /* rot / 2 inverse frequencies theta^(-2i/rot) */
  float *cs, *sn;     /* per token t: cos and sin of positions[t] * freq[i] at t * rot / 2 + i */
  int64_t rows_per_token;
  int64_t rot;
  int gptj;
} rope_ctx;

/* One token's cosines and sines (in double, rounded to f32), shared by all its rows (heads). */
static void angles_task(void *vctx, int64_t t) {
  const rope_ctx *c = vctx;
  const double pos = (double)c->positions[t];
  const int64_t half = c->rot / 2;
  for (int64_t i = 0; i < half; i++) {
    const double angle = pos * c->freq[i];
    c->cs[t * half + i] = (float)cos(angle);
    c->sn[t * half + i] = (float)sin(angle);
  }
}

static void rope_row(const void *vctx, int64_t row, float *const *bufs, int64_t len) {
  const rope_ctx *c = vctx;
  const float *x = bufs[1];
  float *y = bufs[0];
  const int64_t half = c->rot / 2, t = row / c->rows_per_token;
  for (int64_t i = 0; i < half; i++) {
    const float cs = c->cs[t * half + i], sn = c->sn[t * half + i];
    const int64_t i0 = c->gptj ? 2 * i : i, i1 = c->gptj ? 2 * i + 1 : i + half;
    y[i0] = x[i0] * cs - x[i1] * sn;
    y[i1] = x[i0] * sn + x[i1] * cs;
  }
  for (int64_t i = c->rot; i < len; i++) y[i] = x[i];
}

fer_status fer_rope(fer_threadpool *pool, const fer_tensor *x, const fer_tensor *positions,
                    fer_rope_pairing pairing, uint32_t rot_dims, float theta,
                    const fer_tensor *out) {
  feri_error_clear();
  if (x == NULL || positions == NULL || out == NULL)
    return feri_fail(FER_STATUS_NULL_ARG, "%s: x, positions and out must not be NULL", FN);
  feri_tensor_info info[2], pi;
  fer_status st;
  if ((st = feri_tensor_validate(out, FN, "out", &info[0])) != FER_STATUS_OK) return st;
  if ((st = feri_tensor_validate(x, FN, "x", &info[1])) != FER_STATUS_OK) return st;
  if ((st = feri_tensor_validate(positions, FN, "positions", &pi)) != FER_STATUS_OK) return st;
  if ((st = feri_require_float_dtype(x->dtype, FN)) != FER_STATUS_OK) return st;
  if ((st = feri_require_same_dtype(FN, x->dtype, "x", x->dtype, "out", out->dtype)) != FER_STATUS_OK) return st;
  if (pairing != FER_ROPE_NEOX && pairing != FER_ROPE_GPTJ)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: pairing %d is neither NEOX (0) nor GPTJ (1)", FN, (int)pairing);
  if (!(theta > 0.0f) || isinf(theta))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: theta %g is not a finite value > 0", FN, (double)theta);
  if (positions->dtype != FER_DTYPE_I32 && positions->dtype != FER_DTYPE_I64)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: positions must be I32 or I64", FN);
  if (x->rank < 2)
    return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: x has rank %d; it needs [T, ..., D]", FN, (int)x->rank);
  if (positions->rank != 1 || positions->shape[0] != x->shape[0])
    return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: positions must be [%lld] (x's first axis)", FN,
                     (long long)x->shape[0]);
  const int64_t d = x->shape[x->rank - 1];
  if (rot_dims == 0 || rot_dims % 2 != 0 || (int64_t)rot_dims > d)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: rot_dims %u must be even and in 2 .. %lld", FN,
                     rot_dims, (long long)d);
  const fer_tensor *ts[2] = {out, x};
  const char *names[2] = {"out", "x"};
  feri_rows r;
  if ((st = feri_rows_init(&r, FN, names, ts, info, 2)) != FER_STATUS_OK) return st;
  if (feri_tensors_overlap(out, &info[0], positions, &pi))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: out overlaps positions", FN);
  const int64_t t_count = x->shape[0];
  if (r.n_rows == 0) return FER_STATUS_OK;
  int64_t *pos = malloc((size_t)t_count * sizeof *pos);
  double *freq = malloc((size_t)(rot_dims / 2) * sizeof *freq);
  /* t_count * rot_dims floats: bounded by x's own elements, which validation found addressable */
  float *angles = malloc((size_t)t_count * rot_dims * sizeof *angles);
  if (pos == NULL || freq == NULL || angles == NULL) {
    free(pos);
    free(freq);
    free(angles);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: out of memory", FN);
  }
  for (int64_t t = 0; t < t_count; t++) {
    const char *p = (const char *)positions->data + t * positions->strides[0];
    if (positions->dtype == FER_DTYPE_I64) {
      memcpy(&pos[t], p, sizeof pos[t]);
    } else {
      int32_t v;
      memcpy(&v, p, sizeof v);
      pos[t] = v;
    }
  }
  for (uint32_t i = 0; i < rot_dims / 2; i++) freq[i] = pow((double)theta, -2.0 * i / rot_dims);
  rope_ctx c = {pos, freq, angles, angles + (size_t)t_count * (rot_dims / 2), r.n_rows / t_count, rot_dims,
                pairing == FER_ROPE_GPTJ};
  if (t_count == 1) angles_task(&c, 0); /* a decode step: not worth waking the pool */
  else st = feri_threadpool_run(pool, t_count, angles_task, &c);
  if (st == FER_STATUS_OK) st = feri_rows_run(pool, &r, ts, 2, rope_row, &c, FN);
  free(pos);
  free(freq);
  free(angles);
  return st;
}
