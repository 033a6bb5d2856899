/* gelu.c: the GELU table and the pooled GeGLU of gelu.h. */
#include "kernels/gelu.h"

#include <math.h>

#include "core/dtype.h"
#include "core/threadpool.h"
#include "kernels/rowops.h"

void feri_gelu_tanh_lut(float *lut) {
  const float k0 = 0.79788456080286535587989211986876f, k1 = 0.044715f;
  for (uint32_t h = 0; h < FERI_GELU_LUT_SIZE; h++) {
    const float x = feri_f16_to_f32((uint16_t)h);
    lut[h] = feri_f16_to_f32(feri_f32_to_f16(0.5f * x * (1.0f + tanhf(k0 * x * (1.0f + k1 * x * x)))));
  }
}

typedef struct geglu_job {
  const feri_rowops *ops;
  const float *lut, *up;
  float *gate;
  int64_t n, chunk;
} geglu_job;

static void geglu_task(void *ctx, int64_t task) {
  const geglu_job *j = ctx;
  const int64_t i0 = task * j->chunk, len = j->n - i0 < j->chunk ? j->n - i0 : j->chunk;
  j->ops->geglu_lut_f32(j->lut, j->gate + i0, j->up + i0, j->gate + i0, (size_t)len);
}

fer_status feri_geglu(fer_threadpool *pool, const float *lut, float *gate, const float *up, int64_t rows,
                      int64_t cols) {
  const int64_t n = rows * cols;
  if (n <= 0) return FER_STATUS_OK;
  /* about four tasks per worker, of at least 4096 elements (the split changes no value) */
  const int64_t slots = (int64_t)feri_threadpool_slots(pool);
  int64_t chunk = (n + 4 * slots - 1) / (4 * slots);
  chunk = chunk < 4096 ? 4096 : (chunk + 7) / 8 * 8;
  geglu_job j = {feri_rowops_for(feri_threadpool_effective_isa(pool)), lut, up, gate, n, chunk};
  if (n <= chunk) {
    geglu_task(&j, 0); /* a decode step's one row: not worth waking the pool */
    return FER_STATUS_OK;
  }
  return feri_threadpool_run(pool, (n + chunk - 1) / chunk, geglu_task, &j);
}
