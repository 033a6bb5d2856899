/* abi_bounds_test.c: entry points given valid but extreme arguments, in C so that the sanitizer
 * build (bazel test --config=asan, which includes UBSan) sees any signed overflow itself, not only
 * its consequences (the Rust tests in rust_tests/tests/bad_input.rs check those).
 * EVIDENCE: C-ABI-009 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ferrite.h"
#include "testing/check.h"

static fer_tensor t3(float *data, int64_t h, int64_t n, int64_t d) {
  fer_tensor t;
  const int64_t shape[3] = {h, n, d};
  fer_tensor_init_contiguous(&t, data, FER_DTYPE_F32, 3, shape);
  return t;
}

int main(void) {
  enum { NK = 3, D = 4, NQ_MAX = 5 };
  float kb[NK * D], vb[NK * D], qb[NQ_MAX * D], want[NQ_MAX * D], got[NQ_MAX * D];
  for (int i = 0; i < NK * D; i++) kb[i] = sinf(0.37f * (float)i), vb[i] = cosf(0.11f * (float)i);
  for (int i = 0; i < NQ_MAX * D; i++) qb[i] = sinf(0.5f * (float)i);
  const int64_t nqs[2] = {1, NQ_MAX}; /* the decode split and the rows path */
  const int64_t big[4] = {INT64_MAX, INT64_MAX - 1, INT64_MAX - 4, INT64_MAX / 2};
  for (int a = 0; a < 2; a++) {
    const int64_t nq = nqs[a];
    fer_tensor q = t3(qb, 1, nq, D), k = t3(kb, 1, NK, D), v = t3(vb, 1, NK, D);
    fer_tensor ow = t3(want, 1, nq, D), og = t3(got, 1, nq, D);
    fer_attention_params p;
    CHECK_STATUS(fer_attention_params_init(&p), FER_STATUS_OK);
    p.q_pos0 = NK - 1; /* every query sees every key */
    size_t need_all = 0, need = 1;
    CHECK_STATUS(fer_attention_workspace_bytes(NULL, &q, &k, &v, &p, &ow, &need_all),
                 FER_STATUS_OK);
    CHECK_STATUS(fer_attention(NULL, &q, &k, &v, &p, &ow, NULL, 0), FER_STATUS_OK);
    for (int b = 0; b < 4; b++) {
      p.q_pos0 = big[b];
      CHECK_STATUS(fer_attention_workspace_bytes(NULL, &q, &k, &v, &p, &og, &need), FER_STATUS_OK);
      CHECK(need == need_all);
      memset(got, 0xff, sizeof got);
      CHECK_STATUS(fer_attention(NULL, &q, &k, &v, &p, &og, NULL, 0), FER_STATUS_OK);
      CHECK(memcmp(got, want, (size_t)(nq * D) * sizeof(float)) == 0);
    }
  }
  return feri_test_finish("abi_bounds_test");
}
