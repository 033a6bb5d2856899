// argmax.cu: the index of each row's maximum, the mirror of fer_argmax: ties go to the lowest
// index and a NaN wins at its first position (numpy's rule). Only comparisons, so any reduction
// order gives the CPU's answer: each thread scans a strided slice in order, then the block folds
// the candidates with the same rule. One block per row (the vocabulary's logits: tens of thousands).
#include "common.cuh"
#include "cuda_ops.h"

enum { ARGMAX_THREADS = 256 };

// Whether candidate (va, ia) beats (vb, ib): NaN first, then larger, then lower index.
__device__ static bool beats(float va, int64_t ia, float vb, int64_t ib) {
  const bool na = va != va, nb = vb != vb;
  if (na || nb) return na && (!nb || ia < ib);
  return va > vb || (va == vb && ia < ib);
}

__global__ static void argmax_kernel(const float *x, int64_t rows, int64_t n, int32_t *out) {
  __shared__ float sv[ARGMAX_THREADS];
  __shared__ int64_t si[ARGMAX_THREADS];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *xr = x + r * n;
    float bv = 0.0f;
    int64_t bi = -1;  // none yet
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
      if (bi < 0 || beats(xr[i], i, bv, bi)) bv = xr[i], bi = i;
    sv[threadIdx.x] = bv, si[threadIdx.x] = bi;
    __syncthreads();
    for (int s = ARGMAX_THREADS / 2; s > 0; s /= 2) {
      if (threadIdx.x < s) {
        const float ov = sv[threadIdx.x + s];
        const int64_t oi = si[threadIdx.x + s];
        if (oi >= 0 && (si[threadIdx.x] < 0 || beats(ov, oi, sv[threadIdx.x], si[threadIdx.x])))
          sv[threadIdx.x] = ov, si[threadIdx.x] = oi;
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) out[r] = (int32_t)si[0];
    __syncthreads();
  }
}

extern "C" fer_status feri_cuda_argmax(const float *x, int64_t rows, int64_t n, int32_t *out) {
  static const char *const fn = "feri_cuda_argmax";
  feri_error_clear();
  if (x == NULL || out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: x and out must not be NULL", fn);
  if (rows < 0 || n < 1 || n > INT32_MAX)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: rows %lld, n %lld (1 .. INT32_MAX)", fn, (long long)rows, (long long)n);
  if (rows == 0) return FER_STATUS_OK;
  argmax_kernel<<<(unsigned)(rows < 65535 ? rows : 65535), ARGMAX_THREADS>>>(x, rows, n, out);
  return feri_cuda_launched(fn);
}
