// norm.cu: RMSNorm, the mirror of fer_rms_norm (c/kernels/norm.c) bit for bit. One warp per row:
// lane l accumulates the squares of elements l, l + 32, ... in order, which is partial l of the
// CPU's 32-partial sum; the shuffles below combine the partials in feri_sum_partials' tree.
#include "common.cuh"
#include "cuda_ops.h"

enum { NORM_WARPS = 4 };

__device__ static float sum_partials_tree(float p) {
  const unsigned all = 0xffffffffu;
  float s = __fadd_rn(p, __shfl_down_sync(all, p, 8));   // lanes 0-7, 16-23: p[l] + p[l + 8]
  s = __fadd_rn(s, __shfl_down_sync(all, s, 16));        // lanes 0-7: (p[l] + p[l+8]) + (p[l+16] + p[l+24])
  s = __fadd_rn(s, __shfl_down_sync(all, s, 4));         // lanes 0-3: lane[l] + lane[l + 4]
  s = __fadd_rn(s, __shfl_down_sync(all, s, 2));         // lanes 0-1: q0 + q2, q1 + q3
  s = __fadd_rn(s, __shfl_down_sync(all, s, 1));         // lane 0: (q0 + q2) + (q1 + q3)
  return __shfl_sync(all, s, 0);
}

__global__ static void rms_norm_kernel(const float *x, const float *w, float eps, float *y, int64_t rows,
                                       int64_t dim) {
  const int lane = threadIdx.x % 32;
  for (int64_t r = blockIdx.x * (int64_t)NORM_WARPS + threadIdx.x / 32; r < rows; r += (int64_t)gridDim.x * NORM_WARPS) {
    const float *xr = x + r * dim;
    float p = 0.0f;
    for (int64_t i = lane; i < dim; i += 32) p = __fadd_rn(p, __fmul_rn(xr[i], xr[i]));
    const float sum = sum_partials_tree(p);
    const float s = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(sum, (float)dim), eps)));
    float *yr = y + r * dim;
    for (int64_t i = lane; i < dim; i += 32) {
      const float v = __fmul_rn(xr[i], s);
      yr[i] = w != NULL ? __fmul_rn(v, w[i]) : v;
    }
  }
}

extern "C" fer_status feri_cuda_rms_norm(const float *x, const float *w, float eps, float *y, int64_t rows, int64_t dim) {
  static const char *const fn = "feri_cuda_rms_norm";
  feri_error_clear();
  if (x == NULL || y == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: x and y must not be NULL", fn);
  if (rows < 0 || dim < 1) return feri_fail(FER_STATUS_INVALID_ARG, "%s: rows %lld, dim %lld", fn, (long long)rows, (long long)dim);
  if (!(eps >= 0.0f) || isinf(eps)) return feri_fail(FER_STATUS_INVALID_ARG, "%s: eps %g is not a finite value >= 0", fn, (double)eps);
  if (rows == 0) return FER_STATUS_OK;
  rms_norm_kernel<<<feri_cuda_blocks(rows, NORM_WARPS), NORM_WARPS * 32>>>(x, w, eps, y, rows, dim);
  return feri_cuda_launched(fn);
}
