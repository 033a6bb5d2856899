/* cuda_test.c: the CUDA add mirrors the CPU add bit for bit; SKIPPED where no GPU answers.
 * EVIDENCE: C-CUDA-001 */
#include <stdlib.h>
#include <string.h>

#include "testing/check.h"

int main(void) {
  CHECK(fer_cuda_is_built());
  int32_t count = -1;
  fer_status st = fer_cuda_device_count(&count);
  CHECK_STATUS(fer_cuda_add_f32_rows(NULL, NULL, NULL, 1, 1), FER_STATUS_NULL_ARG);
  if (st == FER_STATUS_NO_DEVICE) {
    CHECK(count == 0);
    printf("SKIPPED: C-CUDA-001 needs a GPU; fer_cuda_device_count says: %s\n", fer_status_str(st));
    return feri_test_finish("cuda_test");
  }
  CHECK_STATUS(st, FER_STATUS_OK);
  enum { R = 64, W = 1000 };
  float *a = malloc(sizeof(float) * R * W), *b = malloc(sizeof(float) * W);
  float *gpu = malloc(sizeof(float) * R * W), *cpu = malloc(sizeof(float) * R * W);
  for (int i = 0; i < R * W; i++) a[i] = (float)((i % 251) - 125) / 64.0f;
  for (int i = 0; i < W; i++) b[i] = (float)(i % 17) / 3.0f;
  CHECK_STATUS(fer_cuda_add_f32_rows(a, b, gpu, R, W), FER_STATUS_OK);
  const int64_t s[] = {R, W}, sw[] = {W};
  fer_tensor ta, tb, to;
  fer_tensor_init_contiguous(&ta, a, FER_DTYPE_F32, 2, s);
  fer_tensor_init_contiguous(&tb, b, FER_DTYPE_F32, 1, sw);
  fer_tensor_init_contiguous(&to, cpu, FER_DTYPE_F32, 2, s);
  CHECK_STATUS(fer_add(NULL, &ta, &tb, &to), FER_STATUS_OK);
  CHECK(memcmp(gpu, cpu, sizeof(float) * R * W) == 0);
  free(a), free(b), free(gpu), free(cpu);
  return feri_test_finish("cuda_test");
}
