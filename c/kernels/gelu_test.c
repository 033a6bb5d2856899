/* gelu_test.c: the GeGLU of gelu.h against the definition written out here (tanhf on the
 * f16-rounded input, the result rounded to f16, times up; 0 at or below -10, x at or above 10):
 * the table at all 65,536 f16 inputs, the portable and AVX2 rows and the pooled call at 1-3
 * threads, bit for bit, on a sweep through both boundaries and on random values. EVIDENCE: C-GEM-014 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "kernels/gelu.h"
#include "kernels/rowops.h"
#include "testing/check.h"

static float reference(float x, float up) {
  const float k0 = 0.79788456080286535587989211986876f, k1 = 0.044715f;
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x * up;
  x = feri_f16_to_f32(feri_f32_to_f16(x));
  return feri_f16_to_f32(feri_f32_to_f16(0.5f * x * (1.0f + tanhf(k0 * x * (1.0f + k1 * x * x))))) * up;
}

static int same(float a, float b) { return (isnan(a) && isnan(b)) || memcmp(&a, &b, 4) == 0; }

static unsigned next(unsigned *s) {
  *s = *s * 1664525u + 1013904223u;
  return *s >> 8;
}

int main(void) {
  float *lut = malloc(FERI_GELU_LUT_SIZE * sizeof(float));
  CHECK(lut != NULL);
  if (!lut) return feri_test_finish("gelu_test");
  feri_gelu_tanh_lut(lut);
  int bad = 0;
  for (uint32_t h = 0; h < FERI_GELU_LUT_SIZE; h++) {
    const float x = feri_f16_to_f32((uint16_t)h);
    if (fabsf(x) < 10.0f || isnan(x)) bad += !same(lut[h], reference(x, 1.0f));
  }
  CHECK(bad == 0);

  enum { N = 3 * 8191 + 5 };
  float *x = malloc(N * sizeof(float)), *up = malloc(N * sizeof(float)), *want = malloc(N * sizeof(float));
  float *got = malloc(N * sizeof(float));
  unsigned s = 11;
  for (int i = 0; i < N; i++) {
    /* a sweep through -10.5 .. 10.5 in steps that hit the boundaries exactly, then random values
     * of every magnitude, some specials */
    x[i] = i < 4200 ? -10.5f + (float)i / 200.0f : (float)((int)(next(&s) % 40001) - 20000) / 1600.0f;
    if (i % 97 == 0) x[i] *= 1e-5f; /* f16 subnormals */
    up[i] = (float)((int)(next(&s) % 2001) - 1000) / 250.0f;
  }
  x[4201] = NAN, x[4202] = INFINITY, x[4203] = -INFINITY, x[4204] = -0.0f, x[4205] = 9.9999995f;
  x[4206] = -9.9999995f, x[4207] = 65504.0f, x[4208] = 1e-30f;
  for (int i = 0; i < N; i++) want[i] = reference(x[i], up[i]);
  const feri_rowops *tables[2] = {&feri_rowops_portable, feri_rowops_for(FER_ISA_AVX2)};
  for (int t = 0; t < 2; t++) {
    for (int len = 0; len <= 19; len++) { /* every tail length */
      memset(got, 0xff, sizeof(float) * 32);
      tables[t]->geglu_lut_f32(lut, x + 4190, up + 4190, got, (size_t)len);
      for (int i = 0; i < len; i++) bad += !same(got[i], want[4190 + i]);
    }
    tables[t]->geglu_lut_f32(lut, x, up, got, N);
    for (int i = 0; i < N; i++) bad += !same(got[i], want[i]);
  }
  CHECK(bad == 0);
  for (uint32_t th = 1; th <= 3; th++) {
    fer_threadpool_options o;
    fer_threadpool_options_init(&o);
    o.n_threads = th;
    fer_threadpool *pool = NULL;
    CHECK_STATUS(fer_threadpool_create(&o, &pool), FER_STATUS_OK);
    memcpy(got, x, N * sizeof(float));
    CHECK_STATUS(feri_geglu(pool, lut, got, up, 3, N / 3), FER_STATUS_OK);
    for (int i = 0; i < N / 3 * 3; i++) bad += !same(got[i], want[i]);
    CHECK_STATUS(feri_geglu(pool, lut, got, up, 0, 5), FER_STATUS_OK); /* nothing to do */
    fer_threadpool_free(pool);
  }
  CHECK(bad == 0);
  free(lut);
  free(x);
  free(up);
  free(want);
  free(got);
  return feri_test_finish("gelu_test");
}
