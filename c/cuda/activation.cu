// activation.cu: SwiGLU, the mirror of fer_swiglu bit for bit: feri_silu of fexp.h is the same
// source on both sides (compiled with -fmad=false, fmaf for fmaf), times up rounded once.
#include "../kernels/fexp.h"
#include "common.cuh"
#include "cuda_ops.h"

__global__ static void swiglu_kernel(const float *gate, const float *up, float *out, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    out[i] = __fmul_rn(feri_silu(gate[i]), up[i]);
}

extern "C" fer_status feri_cuda_swiglu(const float *gate, const float *up, float *out, int64_t n) {
  static const char *const fn = "feri_cuda_swiglu";
  feri_error_clear();
  if (gate == NULL || up == NULL || out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: NULL pointer", fn);
  if (n < 0) return feri_fail(FER_STATUS_INVALID_ARG, "%s: n %lld", fn, (long long)n);
  if (n == 0) return FER_STATUS_OK;
  swiglu_kernel<<<feri_cuda_blocks(n, 256), 256>>>(gate, up, out, n);
  return feri_cuda_launched(fn);
}
