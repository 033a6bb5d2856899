// quant.cu: block-quantized matmul for the formats with blocks of 32 (MXFP4, Q4_0, Q4_1, Q5_0,
// Q5_1, Q8_0, IQ4_NL), the mirror of the CPU's two routes:
//   - 8-bit activations (fer_matmul_quant_i8, c/kernels/quant_i8.h): A's rows rounded to int8
//     codes per block of 32, then per output the integer block dots (dp4a: exact, so their order
//     is free) folded into the f32 chain acc = fmaf((float)I_b, dw_b * dx_b, acc) over the blocks
//     in order. The warp's lanes form 32 blocks' integers at once; every lane then runs the chain
//     over those 32 in order through shuffles, so the result is the CPU's, bit for bit.
//   - exact (fer_matmul_quant): acc = fmaf(a[k], w[k], acc) over k in order, w[k] as fer_dequantize
//     gives it. One thread per output: the reference route for checking, not a fast one.
// Blocks stay in ggml's layout as uploaded (17 to 34 bytes, so byte loads): repacking for wide
// loads is the speed work that needs a GPU to measure.
#include <cuda_fp16.h>
#include <float.h>

#include "../kernels/quant.h"
#include "common.cuh"
#include "cuda_ops.h"

// Device copies of quant.c's tables (feri_iq4nl_values, feri_mxfp4_code2, feri_e2m1_values):
// host arrays cannot be read from a kernel.
__constant__ int8_t k_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
__constant__ int8_t k_mxfp4_code2[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
__constant__ float k_e2m1[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                 -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

// The formats these kernels take; their block sizes are quant.h's.
static int block_bytes(fer_dtype t) {
  switch (t) {
    case FER_DTYPE_MXFP4:
    case FER_DTYPE_Q4_0:
    case FER_DTYPE_Q4_1:
    case FER_DTYPE_Q5_0:
    case FER_DTYPE_Q5_1:
    case FER_DTYPE_Q8_0:
    case FER_DTYPE_IQ4_NL: return (int)feri_qblock_bytes(t);
    default: return 0;
  }
}

extern "C" int feri_cuda_quant_supported(fer_dtype dtype) { return block_bytes(dtype) != 0; }

extern "C" size_t feri_cuda_q8_bytes(int64_t m, int64_t k) {
  return m <= 0 || k <= 0 ? 0 : (size_t)m * (size_t)(k + 8 * (k / 32));
}

__device__ static float f16_at(const uint8_t *p) {
  return __half2float(__ushort_as_half((unsigned short)(p[0] | p[1] << 8)));
}

// Element i's nibble: the low nibble of byte i for i < 16, the high nibble of byte i - 16 above.
__device__ static int nibble(const uint8_t *qs, int i) { return i < 16 ? qs[i] & 0xF : qs[i - 16] >> 4; }

// Q5_0 / Q5_1: the nibble with bit i of the 32 high bits as bit 4.
__device__ static int q5(const uint8_t *qh, const uint8_t *qs, int i) { return nibble(qs, i) | ((qh[i / 8] >> (i % 8)) & 1) << 4; }

// The block's 32 signed integer codes packed four to an int (element 4j + b in byte b of word j),
// its scale and minimum: quant_i8.h's definitions (block_codes in c/kernels/quant_i8.c).
__device__ static void block_codes(fer_dtype t, const uint8_t *blk, int packed[8], float *dw, float *mw) {
  *mw = 0.0f;
  int c[32];
  switch (t) {
    case FER_DTYPE_Q8_0:
      for (int i = 0; i < 32; i++) c[i] = (int8_t)blk[2 + i];
      *dw = f16_at(blk);
      break;
    case FER_DTYPE_Q4_0:
      for (int i = 0; i < 32; i++) c[i] = nibble(blk + 2, i) - 8;
      *dw = f16_at(blk);
      break;
    case FER_DTYPE_Q4_1:
      for (int i = 0; i < 32; i++) c[i] = nibble(blk + 4, i);
      *dw = f16_at(blk), *mw = f16_at(blk + 2);
      break;
    case FER_DTYPE_Q5_0:
      for (int i = 0; i < 32; i++) c[i] = q5(blk + 2, blk + 6, i) - 16;
      *dw = f16_at(blk);
      break;
    case FER_DTYPE_Q5_1:
      for (int i = 0; i < 32; i++) c[i] = q5(blk + 4, blk + 8, i);
      *dw = f16_at(blk), *mw = f16_at(blk + 2);
      break;
    case FER_DTYPE_IQ4_NL:
      for (int i = 0; i < 32; i++) c[i] = k_iq4nl[nibble(blk + 2, i)];
      *dw = f16_at(blk);
      break;
    default:  // MXFP4: twice the E2M1 values, with half the scale (exact)
      for (int i = 0; i < 32; i++) c[i] = k_mxfp4_code2[nibble(blk + 1, i)];
      *dw = __fmul_rn(feri_e8m0_to_f32(blk[0]), 0.5f);
      break;
  }
  for (int j = 0; j < 8; j++)
    packed[j] = (c[4 * j] & 0xff) | (c[4 * j + 1] & 0xff) << 8 | (c[4 * j + 2] & 0xff) << 16 | (c[4 * j + 3] & 0xff) << 24;
}

// Element i of the block as fer_dequantize gives it (feri_qblock_dequant's arithmetic).
__device__ static float block_value(fer_dtype t, const uint8_t *blk, int i) {
  switch (t) {
    case FER_DTYPE_Q8_0: return __fmul_rn((float)(int8_t)blk[2 + i], f16_at(blk));
    case FER_DTYPE_Q4_0: return __fmul_rn((float)(nibble(blk + 2, i) - 8), f16_at(blk));
    case FER_DTYPE_Q4_1: return __fadd_rn(__fmul_rn((float)nibble(blk + 4, i), f16_at(blk)), f16_at(blk + 2));
    case FER_DTYPE_Q5_0: return __fmul_rn((float)(q5(blk + 2, blk + 6, i) - 16), f16_at(blk));
    case FER_DTYPE_Q5_1: return __fadd_rn(__fmul_rn((float)q5(blk + 4, blk + 8, i), f16_at(blk)), f16_at(blk + 2));
    case FER_DTYPE_IQ4_NL: return __fmul_rn(f16_at(blk), (float)k_iq4nl[nibble(blk + 2, i)]);
    default: return __fmul_rn(k_e2m1[nibble(blk + 1, i)], feri_e8m0_to_f32(blk[0]));
  }
}

// One warp per block of 32 activations: quantize_block of c/kernels/quant_i8.c. amax is a max
// (order-free); the codes round half to even as nearbyintf does.
__global__ static void quantize_q8_kernel(const float *a, int64_t m, int64_t k, int8_t *q, float *d, int32_t *qs) {
  const unsigned all = 0xffffffffu;
  const int lane = threadIdx.x % 32;
  const int64_t nb = k / 32, blocks = m * nb;
  for (int64_t g = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32; g < blocks;
       g += (int64_t)gridDim.x * blockDim.x / 32) {
    const int64_t row = g / nb, b = g % nb;
    const float x = a[row * k + b * 32 + lane];
    const float ax = fabsf(x);
    const bool finite = __all_sync(all, ax <= FLT_MAX);
    float amax = finite ? ax : 0.0f;
    for (int o = 16; o > 0; o /= 2) amax = fmaxf(amax, __shfl_xor_sync(all, amax, o));
    const float id = amax != 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
    int code = 0;
    if (finite && isfinite(id)) code = __float2int_rn(__fmul_rn(x, id));
    int sum = code;
    for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(all, sum, o);
    q[row * k + b * 32 + lane] = (int8_t)code;
    if (lane == 0) {
      d[g] = !finite ? __int_as_float(0x7fc00000) : isfinite(id) ? __fdiv_rn(amax, 127.0f) : 0.0f;
      qs[g] = sum;
    }
  }
}

// One warp per output (row i of A, row r of W).
__global__ static void matmul_q8_kernel(const int8_t *q, const float *d, const int32_t *qs, int64_t m, const uint8_t *w,
                                        fer_dtype t, int bb, int64_t n, int64_t k, int64_t row_stride, float *out) {
  const unsigned all = 0xffffffffu;
  const int lane = threadIdx.x % 32;
  const int64_t nb = k / 32;
  const bool has_min = t == FER_DTYPE_Q4_1 || t == FER_DTYPE_Q5_1;
  for (int64_t o = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32; o < m * n; o += (int64_t)gridDim.x * blockDim.x / 32) {
    const int64_t i = o / n, r = o % n;
    const int *xq = (const int *)(q + i * k);  // 32-byte aligned blocks: k is a multiple of 32
    const float *xd = d + i * nb;
    const int32_t *xqs = qs + i * nb;
    float acc = 0.0f, mc = 0.0f;
    for (int64_t b0 = 0; b0 < nb; b0 += 32) {
      // this lane's block b0 + lane: its exact integer dot, and the chain's two factors
      const int64_t b = b0 + lane;
      float isum_f = 0.0f, scale = 0.0f, mw = 0.0f, min_term = 0.0f;
      if (b < nb) {
        int packed[8];
        float dw;
        block_codes(t, w + r * row_stride + b * bb, packed, &dw, &mw);
        int isum = 0;
        for (int j = 0; j < 8; j++) isum = __dp4a(packed[j], xq[b * 8 + j], isum);
        isum_f = (float)isum;  // |isum| < 2^24: exact
        scale = __fmul_rn(dw, xd[b]);
        if (has_min) min_term = __fmul_rn(xd[b], (float)xqs[b]);
      }
      // the chain over these blocks in order, on every lane alike
      const int count = nb - b0 < 32 ? (int)(nb - b0) : 32;
      for (int j = 0; j < count; j++) {
        acc = fmaf(__shfl_sync(all, isum_f, j), __shfl_sync(all, scale, j), acc);
        if (has_min) mc = fmaf(__shfl_sync(all, mw, j), __shfl_sync(all, min_term, j), mc);
      }
    }
    if (lane == 0) out[i * n + r] = has_min ? __fadd_rn(acc, mc) : acc;
  }
}

__global__ static void matmul_exact_kernel(const float *a, int64_t m, const uint8_t *w, fer_dtype t, int bb, int64_t n,
                                           int64_t k, int64_t row_stride, float *out) {
  for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < m * n; o += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = o / n, r = o % n;
    const uint8_t *row = w + r * row_stride;
    float acc = 0.0f;
    for (int64_t c = 0; c < k; c++) acc = fmaf(a[i * k + c], block_value(t, row + (c / 32) * bb, (int)(c % 32)), acc);
    out[o] = acc;
  }
}

// The checks both routes share; bb the dtype's block bytes.
static fer_status check_args(const char *fn, const float *a, int64_t m, const void *w, fer_dtype dtype, int64_t n, int64_t k,
                             int64_t row_stride, const float *out, int *bb) {
  if (a == NULL || w == NULL || out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: NULL pointer", fn);
  *bb = block_bytes(dtype);
  if (*bb == 0) return feri_fail(FER_STATUS_UNSUPPORTED, "%s: dtype %d is not a block-of-32 format", fn, (int)dtype);
  if (m < 0 || n < 0 || k < 0 || k % 32 != 0)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: m %lld, n %lld, k %lld (a multiple of 32)", fn, (long long)m,
                     (long long)n, (long long)k);
  if (row_stride < k / 32 * *bb)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: row_stride %lld below the %lld bytes of a row", fn,
                     (long long)row_stride, (long long)(k / 32 * *bb));
  int64_t mn, mk;
  if (__builtin_mul_overflow(m, n, &mn) || __builtin_mul_overflow(m, k, &mk) || mn > INT64_MAX / 64 || mk > INT64_MAX / 64)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: m %lld x n %lld x k %lld overflows", fn, (long long)m, (long long)n,
                     (long long)k);
  return FER_STATUS_OK;
}

extern "C" fer_status feri_cuda_matmul_quant_i8(const float *a, int64_t m, const void *w, fer_dtype dtype, int64_t n,
                                                int64_t k, int64_t row_stride, void *q8, float *out) {
  static const char *const fn = "feri_cuda_matmul_quant_i8";
  feri_error_clear();
  int bb = 0;
  fer_status st = check_args(fn, a, m, w, dtype, n, k, row_stride, out, &bb);
  if (st != FER_STATUS_OK) return st;
  if (q8 == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: q8 scratch is NULL", fn);
  if (m == 0 || n == 0) return FER_STATUS_OK;
  int8_t *q = (int8_t *)q8;
  float *d = (float *)(q + m * k);
  int32_t *qs = (int32_t *)(d + m * (k / 32));
  if (k > 0) {
    quantize_q8_kernel<<<feri_cuda_blocks(m * (k / 32) * 32, 256), 256>>>(a, m, k, q, d, qs);
    if ((st = feri_cuda_launched(fn)) != FER_STATUS_OK) return st;
  }
  matmul_q8_kernel<<<feri_cuda_blocks(m * n * 32, 256), 256>>>(q, d, qs, m, (const uint8_t *)w, dtype, bb, n, k,
                                                                row_stride, out);
  return feri_cuda_launched(fn);
}

extern "C" fer_status feri_cuda_matmul_quant(const float *a, int64_t m, const void *w, fer_dtype dtype, int64_t n,
                                             int64_t k, int64_t row_stride, float *out) {
  static const char *const fn = "feri_cuda_matmul_quant";
  feri_error_clear();
  int bb = 0;
  fer_status st = check_args(fn, a, m, w, dtype, n, k, row_stride, out, &bb);
  if (st != FER_STATUS_OK) return st;
  if (m == 0 || n == 0) return FER_STATUS_OK;
  matmul_exact_kernel<<<feri_cuda_blocks(m * n, 128), 128>>>(a, m, (const uint8_t *)w, dtype, bb, n, k, row_stride, out);
  return feri_cuda_launched(fn);
}
