// add.cu: the placeholder CUDA kernel, a mirror of fer_add's f32 row broadcast, plus the device
// queries. Layers as ggml-cuda: kernel -> launcher -> exported entry.
#include <stdint.h>

#include "common.cuh"

__global__ void feri_add_rows_f32_kernel(const float *a, const float *b, float *out, int64_t rows,
                                         int64_t width) {
  int64_t n = rows * width;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    out[i] = a[i] + b[i % width];  // one IEEE add, as the CPU kernel does: bit-identical
}

static cudaError_t feri_add_rows_f32_launch(const float *a, const float *b, float *out,
                                            int64_t rows, int64_t width) {
  int64_t n = rows * width;
  int64_t blocks = (n + 255) / 256;
  if (blocks > 65535) blocks = 65535;
  feri_add_rows_f32_kernel<<<(unsigned)blocks, 256>>>(a, b, out, rows, width);
  cudaError_t e = cudaGetLastError();
  return e != cudaSuccess ? e : cudaDeviceSynchronize();
}

extern "C" bool fer_cuda_is_built(void) { return true; }

extern "C" fer_status fer_cuda_device_count(int32_t *out_count) {
  feri_error_clear();
  if (out_count == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_cuda_device_count: out_count is NULL");
  *out_count = 0;
  int n = 0;
  fer_status st = feri_cuda_status(cudaGetDeviceCount(&n), "fer_cuda_device_count", "cudaGetDeviceCount");
  if (st != FER_STATUS_OK) return st;
  if (n == 0) return feri_fail(FER_STATUS_NO_DEVICE, "fer_cuda_device_count: no CUDA device");
  *out_count = n;
  return FER_STATUS_OK;
}

extern "C" fer_status fer_cuda_add_f32_rows(const float *a, const float *b, float *out,
                                            int64_t rows, int64_t width) {
  static const char *const fn = "fer_cuda_add_f32_rows";
  feri_error_clear();
  if (a == NULL || b == NULL || out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: NULL pointer", fn);
  int64_t n = 0;
  if (rows < 0 || width < 0 || __builtin_mul_overflow(rows, width, &n) ||
      n > INT64_MAX / (int64_t)sizeof(float))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: bad sizes rows=%lld width=%lld", fn,
                     (long long)rows, (long long)width);
  int32_t count = 0;
  fer_status st = fer_cuda_device_count(&count);
  if (st != FER_STATUS_OK || n == 0) return st;
  float *da = NULL, *db = NULL, *dout = NULL;
  size_t bytes = (size_t)n * sizeof(float), bbytes = (size_t)width * sizeof(float);
  FERI_CUDA_TRY(cudaMalloc((void **)&da, bytes), fn, done);
  FERI_CUDA_TRY(cudaMalloc((void **)&db, bbytes), fn, done);
  FERI_CUDA_TRY(cudaMalloc((void **)&dout, bytes), fn, done);
  FERI_CUDA_TRY(cudaMemcpy(da, a, bytes, cudaMemcpyHostToDevice), fn, done);
  FERI_CUDA_TRY(cudaMemcpy(db, b, bbytes, cudaMemcpyHostToDevice), fn, done);
  FERI_CUDA_TRY(feri_add_rows_f32_launch(da, db, dout, rows, width), fn, done);
  FERI_CUDA_TRY(cudaMemcpy(out, dout, bytes, cudaMemcpyDeviceToHost), fn, done);
  st = FER_STATUS_OK;
done:
  cudaFree(dout);
  cudaFree(db);
  cudaFree(da);
  return st;
}
