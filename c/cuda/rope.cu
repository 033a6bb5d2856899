// rope.cu: rotary position embedding, the mirror of fer_rope (c/kernels/rope.c): the angle of pair
// i of a token at position p is p * theta^(-2i / rot_dims) in double, its cosine and sine rounded
// to f32, then y0 = x0 cos - x1 sin and y1 = x0 sin + x1 cos with each operation rounded on its
// own. The device's double pow, cos and sin are within 2 ulp (of double) rather than correctly
// rounded, so a cosine can round to the neighbouring f32 where the host's is within that of a
// rounding boundary: rare, and then 1 ulp of the f32 cosine. One thread per pair.
#include "common.cuh"
#include "cuda_ops.h"

__global__ static void rope_kernel(float *x, const int32_t *pos, int64_t tokens, int64_t heads, int64_t dim, int rot,
                                   double theta, bool gptj) {
  const int half = rot / 2;
  const int64_t pairs = tokens * heads * half;
  for (int64_t g = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; g < pairs; g += (int64_t)gridDim.x * blockDim.x) {
    const int i = (int)(g % half);
    const int64_t row = g / half, t = row / heads;
    const double angle = (double)pos[t] * pow(theta, -2.0 * i / rot);
    const float cs = (float)cos(angle), sn = (float)sin(angle);
    float *xr = x + row * dim;
    const int i0 = gptj ? 2 * i : i, i1 = gptj ? 2 * i + 1 : i + half;
    const float x0 = xr[i0], x1 = xr[i1];
    xr[i0] = __fsub_rn(__fmul_rn(x0, cs), __fmul_rn(x1, sn));
    xr[i1] = __fadd_rn(__fmul_rn(x0, sn), __fmul_rn(x1, cs));
  }
}

extern "C" fer_status feri_cuda_rope(float *x, const int32_t *pos, int64_t tokens, int64_t heads, int64_t dim,
                                     uint32_t rot_dims, float theta, fer_rope_pairing pairing) {
  static const char *const fn = "feri_cuda_rope";
  feri_error_clear();
  if (x == NULL || pos == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: x and pos must not be NULL", fn);
  if (pairing != FER_ROPE_NEOX && pairing != FER_ROPE_GPTJ)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: pairing %d is neither NEOX (0) nor GPTJ (1)", fn, (int)pairing);
  if (!(theta > 0.0f) || isinf(theta)) return feri_fail(FER_STATUS_INVALID_ARG, "%s: theta %g is not a finite value > 0", fn, (double)theta);
  if (tokens < 0 || heads < 0 || dim < 1 || rot_dims == 0 || rot_dims % 2 != 0 || (int64_t)rot_dims > dim)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: tokens %lld, heads %lld, dim %lld, rot_dims %u (even, 2 .. dim)", fn,
                     (long long)tokens, (long long)heads, (long long)dim, rot_dims);
  int64_t th, pairs;
  if (__builtin_mul_overflow(tokens, heads, &th) || __builtin_mul_overflow(th, (int64_t)dim, &pairs))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: tokens x heads x dim overflows", fn);
  if (th == 0) return FER_STATUS_OK;
  rope_kernel<<<feri_cuda_blocks(th * (rot_dims / 2), 256), 256>>>(x, pos, tokens, heads, dim, (int)rot_dims, (double)theta,
                                                                    pairing == FER_ROPE_GPTJ);
  return feri_cuda_launched(fn);
}
