/* matmul_test.c: fer_matmul against a direct fmaf chain in C, both layouts, f32, f16 and bf16 B,
 * every ISA level and a few thread counts (so the sanitizer build walks the packed, in-place and
 * GEMV paths, including the GEMV's paired row groups and their lag), plus a hand-computed product.
 * The property tests in rust_tests/tests/matmul.rs cover the rest. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/tensor.h"
#include "ferrite.h"
#include "testing/check.h"

static fer_tensor mat(void *data, fer_dtype dtype, int64_t rows, int64_t cols) {
  return feri_tensor_2d(data, dtype, rows, cols);
}

static void test_known_product(void) {
  float a[6] = {1, 2, 3, 4, 5, 6};       /* [2, 3] */
  float b_kn[6] = {7, 8, 9, 10, 11, 12}; /* [3, 2] */
  float b_nk[6] = {7, 9, 11, 8, 10, 12}; /* the same B as [2, 3] */
  float out[4];
  fer_tensor ta = mat(a, FER_DTYPE_F32, 2, 3), to = mat(out, FER_DTYPE_F32, 2, 2);
  fer_tensor tb = mat(b_kn, FER_DTYPE_F32, 3, 2);
  CHECK_STATUS(fer_matmul(NULL, &ta, &tb, FER_MATMUL_B_KN, &to, NULL, 0), FER_STATUS_OK);
  CHECK(out[0] == 58 && out[1] == 64 && out[2] == 139 && out[3] == 154);
  memset(out, 0, sizeof out);
  tb = mat(b_nk, FER_DTYPE_F32, 2, 3);
  CHECK_STATUS(fer_matmul(NULL, &ta, &tb, FER_MATMUL_B_NK, &to, NULL, 0), FER_STATUS_OK);
  CHECK(out[0] == 58 && out[1] == 64 && out[2] == 139 && out[3] == 154);
  CHECK_STATUS(fer_matmul(NULL, &ta, &tb, 7, &to, NULL, 0), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(fer_matmul(NULL, &ta, &tb, FER_MATMUL_B_KN, &to, NULL, 0), FER_STATUS_SHAPE_MISMATCH);
}

/* Values that make every rounding visible: x / 64 for x in [-200, 200]. */
static float value(unsigned *state) {
  *state = *state * 1664525u + 1013904223u;
  return (float)((int)(*state >> 16) % 401 - 200) / 64.0f * (1.0f + (float)(*state & 0xff) / 257.0f);
}

/* B is stored in bdtype (values rounded into it); the chain reads the stored values back. */
static void test_against_chain(int64_t m, int64_t k, int64_t n, int nk, fer_dtype bdtype) {
  const size_t bes = feri_dtype_size(bdtype);
  float *a = malloc(sizeof(float) * (size_t)(m * k));
  char *b = malloc(bes * (size_t)(k * n));
  float *want = malloc(sizeof(float) * (size_t)(m * n)), *got = malloc(sizeof(float) * (size_t)(m * n));
  CHECK(a && b && want && got);
  if (!(a && b && want && got)) return;
  unsigned s = (unsigned)(m * 131 + k * 7 + n);
  for (int64_t i = 0; i < m * k; i++) a[i] = value(&s);
  for (int64_t i = 0; i < k * n; i++) feri_elem_store(b + (size_t)i * bes, bdtype, value(&s));
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      float acc = 0.0f;
      for (int64_t t = 0; t < k; t++) {
        const int64_t at = nk ? j * k + t : t * n + j;
        acc = fmaf(a[i * k + t], feri_elem_load(b + (size_t)at * bes, bdtype), acc);
      }
      want[i * n + j] = acc;
    }
  fer_tensor ta = mat(a, FER_DTYPE_F32, m, k), to = mat(got, FER_DTYPE_F32, m, n);
  fer_tensor tb = nk ? mat(b, bdtype, n, k) : mat(b, bdtype, k, n);
  const fer_isa levels[2] = {FER_ISA_PORTABLE, FER_ISA_AVX2};
  const uint32_t threads[3] = {1, 2, 3};
  for (int l = 0; l < 2; l++)
    for (int t = 0; t < 3; t++) {
      fer_threadpool_options o;
      fer_threadpool_options_init(&o);
      o.n_threads = threads[t];
      o.isa = levels[l];
      fer_threadpool *pool = NULL;
      if (fer_threadpool_create(&o, &pool) != FER_STATUS_OK) {
        printf("SKIPPED: matmul_test at ISA level %d (not on this CPU)\n", (int)levels[l]);
        continue;
      }
      memset(got, 0xff, sizeof(float) * (size_t)(m * n));
      CHECK_STATUS(fer_matmul(pool, &ta, &tb, nk ? FER_MATMUL_B_NK : FER_MATMUL_B_KN, &to, NULL, 0),
                   FER_STATUS_OK);
      if (memcmp(got, want, sizeof(float) * (size_t)(m * n)) != 0)
        fprintf(stderr, "  %lldx%lldx%lld %s B %s, ISA %d, %u threads\n", (long long)m, (long long)k,
                (long long)n, nk ? "[N, K]" : "[K, N]", feri_dtype_name(bdtype), (int)levels[l],
                threads[t]);
      CHECK(memcmp(got, want, sizeof(float) * (size_t)(m * n)) == 0);
      fer_threadpool_free(pool);
    }
  free(a);
  free(b);
  free(want);
  free(got);
}

int main(void) {
  test_known_product();
  const fer_dtype dtypes[3] = {FER_DTYPE_F32, FER_DTYPE_F16, FER_DTYPE_BF16};
  for (int d = 0; d < 3; d++)
    for (int nk = 0; nk < 2; nk++) {
      const fer_dtype bt = dtypes[d];
      test_against_chain(1, 300, 77, nk, bt);   /* GEMV: row pairs, a lone group, vector tails */
      test_against_chain(1, 4100, 40, nk, bt);  /* GEMV: the full lag between paired groups */
      test_against_chain(1, 5, 33, nk, bt);     /* GEMV: K shorter than a tile */
      test_against_chain(1, 12, 9003, nk, bt);  /* GEMV: [K, N] bands wider than 512 columns */
      test_against_chain(32, 130, 70, nk, bt);  /* in-place A, even row panels */
      test_against_chain(100, 270, 300, nk, bt); /* two row blocks, two K blocks, several column tasks */
    }
  return feri_test_finish("matmul_test");
}
