// memory.cu: device buffers for the kernels of cuda_ops.h and their tests.
#include "common.cuh"
#include "cuda_ops.h"

extern "C" fer_status feri_cuda_malloc(size_t bytes, void **out_dev) {
  static const char *const fn = "feri_cuda_malloc";
  feri_error_clear();
  if (out_dev == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: out_dev is NULL", fn);
  *out_dev = NULL;
  void *p = NULL;
  fer_status st = feri_cuda_status(cudaMalloc(&p, bytes ? bytes : 1), fn, "cudaMalloc");
  if (st == FER_STATUS_OK) *out_dev = p;
  return st;
}

extern "C" void feri_cuda_free(void *dev) {
  if (dev != NULL) cudaFree(dev);
}

extern "C" fer_status feri_cuda_upload(void *dst_dev, const void *src_host, size_t bytes) {
  feri_error_clear();
  if (dst_dev == NULL || src_host == NULL) return feri_fail(FER_STATUS_NULL_ARG, "feri_cuda_upload: NULL pointer");
  return feri_cuda_status(cudaMemcpy(dst_dev, src_host, bytes, cudaMemcpyHostToDevice), "feri_cuda_upload", "cudaMemcpy");
}

extern "C" fer_status feri_cuda_download(void *dst_host, const void *src_dev, size_t bytes) {
  feri_error_clear();
  if (dst_host == NULL || src_dev == NULL) return feri_fail(FER_STATUS_NULL_ARG, "feri_cuda_download: NULL pointer");
  return feri_cuda_status(cudaMemcpy(dst_host, src_dev, bytes, cudaMemcpyDeviceToHost), "feri_cuda_download",
                          "cudaMemcpy");
}

extern "C" fer_status feri_cuda_sync(void) {
  feri_error_clear();
  return feri_cuda_status(cudaDeviceSynchronize(), "feri_cuda_sync", "a queued kernel");
}
