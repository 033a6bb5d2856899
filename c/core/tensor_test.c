/* tensor_test.c: descriptor validation and the nd-loop helper.
 * EVIDENCE: C-ABI-004 */
#include <stdint.h>
#include <string.h>

#include "core/tensor.h"
#include "testing/check.h"

static fer_tensor make(void *data, fer_dtype dt, int rank, const int64_t *shape) {
  fer_tensor t;
  CHECK_STATUS(fer_tensor_init_contiguous(&t, data, dt, rank, shape), FER_STATUS_OK);
  return t;
}

int main(void) {
  float buf[64];
  const int64_t s23[] = {2, 3};
  fer_tensor t = make(buf, FER_DTYPE_F32, 2, s23);
  CHECK(t.strides[0] == 12 && t.strides[1] == 4);
  CHECK_STATUS(fer_tensor_check(&t), FER_STATUS_OK);

  fer_tensor bad = t;
  bad.rank = 9;
  CHECK_STATUS(fer_tensor_check(&bad), FER_STATUS_INVALID_ARG);
  bad = t;
  bad.rank = -1;
  CHECK_STATUS(fer_tensor_check(&bad), FER_STATUS_INVALID_ARG);
  bad = t;
  bad.shape[0] = -2;
  CHECK_STATUS(fer_tensor_check(&bad), FER_STATUS_INVALID_ARG);
  bad = t;
  bad.strides[1] = 2; /* not a multiple of 4 */
  CHECK_STATUS(fer_tensor_check(&bad), FER_STATUS_INVALID_ARG);
  bad = t;
  bad.data = (char *)buf + 2;
  CHECK_STATUS(fer_tensor_check(&bad), FER_STATUS_INVALID_ARG);
  bad = t;
  bad.data = NULL;
  CHECK_STATUS(fer_tensor_check(&bad), FER_STATUS_NULL_ARG);
  bad.shape[0] = 0; /* no elements: NULL data is fine */
  CHECK_STATUS(fer_tensor_check(&bad), FER_STATUS_OK);
  bad = t;
  bad.dtype = FER_DTYPE_MXFP4;
  CHECK_STATUS(fer_tensor_check(&bad), FER_STATUS_UNSUPPORTED);
  bad.dtype = 99;
  CHECK_STATUS(fer_tensor_check(&bad), FER_STATUS_INVALID_ARG);
  bad = t;
  bad.rank = 3;
  bad.shape[0] = bad.shape[1] = bad.shape[2] = INT64_C(1) << 22; /* 2^66 elements */
  bad.strides[2] = 4;
  CHECK_STATUS(fer_tensor_check(&bad), FER_STATUS_SIZE_OVERFLOW);
  bad = t;
  bad.shape[0] = INT64_C(1) << 40;
  bad.strides[0] = INT64_C(1) << 40; /* extent 2^80 bytes */
  CHECK_STATUS(fer_tensor_check(&bad), FER_STATUS_SIZE_OVERFLOW);
  bad = t;
  bad.strides[0] = INT64_MIN;
  CHECK_STATUS(fer_tensor_check(&bad), FER_STATUS_SIZE_OVERFLOW);
  const int64_t huge[] = {INT64_C(1) << 62, 4};
  fer_tensor tmp;
  CHECK_STATUS(fer_tensor_init_contiguous(&tmp, buf, FER_DTYPE_F32, 2, huge), FER_STATUS_SIZE_OVERFLOW);
  CHECK(tmp.data == NULL && tmp.rank == 0);
  CHECK_STATUS(fer_tensor_init_contiguous(NULL, buf, FER_DTYPE_F32, 2, s23), FER_STATUS_NULL_ARG);
  CHECK_STATUS(fer_tensor_init_contiguous(&tmp, buf, FER_DTYPE_F32, 2, NULL), FER_STATUS_NULL_ARG);

  /* Negative strides: a reversed view is valid. */
  fer_tensor rev = t;
  rev.data = buf + 5;
  rev.strides[0] = -12;
  rev.strides[1] = -4;
  feri_tensor_info ri;
  CHECK_STATUS(feri_tensor_validate(&rev, "test", "rev", &ri), FER_STATUS_OK);
  CHECK(ri.lo == -20 && ri.hi == 4);
  CHECK_STATUS(feri_tensor_check_writable(&rev, &ri, "test", "rev"), FER_STATUS_OK);

  /* An output whose rows overlap is refused; broadcast (stride 0) likewise. */
  fer_tensor ov = t;
  ov.strides[0] = 4;
  feri_tensor_info oi;
  CHECK_STATUS(feri_tensor_validate(&ov, "test", "ov", &oi), FER_STATUS_OK);
  CHECK_STATUS(feri_tensor_check_writable(&ov, &oi, "test", "ov"), FER_STATUS_INVALID_ARG);
  ov.strides[0] = 0;
  CHECK_STATUS(feri_tensor_validate(&ov, "test", "ov", &oi), FER_STATUS_OK);
  CHECK_STATUS(feri_tensor_check_writable(&ov, &oi, "test", "ov"), FER_STATUS_INVALID_ARG);

  /* Coalescing merges contiguous axes and drops extent-1 axes. */
  feri_nd_loop l;
  memset(&l, 0, sizeof l);
  l.rank = 4;
  l.n_operands = 2;
  const int64_t shape[] = {2, 1, 3, 4};
  for (int i = 0; i < 4; i++) l.shape[i] = shape[i];
  const int64_t s0[] = {48, 48, 16, 4}, s1[] = {0, 0, 16, 4};
  memcpy(l.strides[0], s0, sizeof s0);
  memcpy(l.strides[1], s1, sizeof s1);
  feri_nd_loop_coalesce(&l);
  CHECK(l.rank == 2 && l.shape[0] == 2 && l.shape[1] == 12);
  CHECK(l.strides[0][1] == 4 && l.strides[1][0] == 0);
  int64_t off[3];
  feri_nd_loop_offsets(&l, 1, 1, off);
  CHECK(off[0] == 48 && off[1] == 0);
  return feri_test_finish("tensor_test");
}
