/* cuda_stub.c: the CUDA entry points of a build without CUDA (the Cargo fallback build). The
 * header is the same either way; every call says UNSUPPORTED. */
#include "core/status.h"

bool fer_cuda_is_built(void) { return false; }

fer_status fer_cuda_device_count(int32_t *out_count) {
  feri_error_clear();
  if (out_count == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_cuda_device_count: out_count is NULL");
  *out_count = 0;
  return feri_fail(FER_STATUS_UNSUPPORTED, "fer_cuda_device_count: built without CUDA");
}

fer_status fer_cuda_add_f32_rows(const float *a, const float *b, float *out, int64_t rows,
                                 int64_t width) {
  (void)rows, (void)width;
  feri_error_clear();
  /* Same precedence as the CUDA build: pointers first. */
  if (a == NULL || b == NULL || out == NULL)
    return feri_fail(FER_STATUS_NULL_ARG, "fer_cuda_add_f32_rows: NULL pointer");
  return feri_fail(FER_STATUS_UNSUPPORTED, "fer_cuda_add_f32_rows: built without CUDA");
}
