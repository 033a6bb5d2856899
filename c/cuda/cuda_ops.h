/* cuda_ops.h: ferrite's CUDA kernels as C calls on device pointers (internal; the engine's CUDA
 * backend and the GPU tests call them). One .cu per op family, each with its launcher, as
 * ggml-cuda lays them out, and each the mirror of the CPU kernel of the same name:
 *
 *   norm.cu        feri_cuda_rms_norm      = fer_rms_norm, bit for bit
 *   activation.cu  feri_cuda_swiglu        = fer_swiglu, bit for bit (fexp.h on the device)
 *   rope.cu        feri_cuda_rope          = fer_rope within 1 ulp (angles in double: the device's
 *                                            pow/sincos are not correctly rounded; nearly always equal)
 *   argmax.cu      feri_cuda_argmax        = fer_argmax, exactly (ties low, NaN first)
 *   quant.cu       feri_cuda_quantize_q8   = the 8-bit rounding of activations of quant_i8.h
 *                  feri_cuda_matmul_quant_i8 = fer_matmul_quant_i8, bit for bit (blocks of 32)
 *                  feri_cuda_matmul_quant  = fer_matmul_quant (the exact route), bit for bit
 *
 * "Bit for bit" holds because every .cu is compiled with -fmad=false (no silent a*b+c fusion, as
 * -ffp-contract=off on the CPU), IEEE division and square root, and each kernel performs the CPU
 * definition's operations in its order: the integer parts of a block dot, which are exact, in any
 * order; every floating-point chain the CPU defines in order, in that order.
 *
 * Launches are asynchronous on the default stream: a launcher returns once the kernel is queued
 * (DEVICE_ERROR naming the launch when the launch itself fails); feri_cuda_sync waits and reports
 * what the kernels hit. Arguments are checked as the CPU entries check them (NULL, sizes,
 * overflow); device pointers cannot be checked beyond NULL. Without a GPU every call answers
 * NO_DEVICE. */
#ifndef FERI_CUDA_CUDA_OPS_H
#define FERI_CUDA_CUDA_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "ferrite.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- device memory (memory.cu) ---- */
fer_status feri_cuda_malloc(size_t bytes, void **out_dev);
void feri_cuda_free(void *dev);
fer_status feri_cuda_upload(void *dst_dev, const void *src_host, size_t bytes);
fer_status feri_cuda_download(void *dst_host, const void *src_dev, size_t bytes);
/* Waits for every queued kernel; the first error any of them hit. */
fer_status feri_cuda_sync(void);

/* y[r, :] = (x[r, :] * s) * w with s = 1 / sqrtf(sum(x^2) / dim + eps), the sum in fer_rms_norm's
 * 32-partial order (one warp per row, lane l holding partial l). x, y: [rows, dim] contiguous f32
 * (y may be x); w: [dim] f32 or NULL. */
fer_status feri_cuda_rms_norm(const float *x, const float *w, float eps, float *y, int64_t rows, int64_t dim);

/* out[i] = silu(gate[i]) * up[i] over n f32 values (out may be gate or up). */
fer_status feri_cuda_swiglu(const float *gate, const float *up, float *out, int64_t n);

/* x: [tokens, heads, dim] contiguous f32, rotated in place; pos: [tokens] int32. pairing:
 * FER_ROPE_NEOX or FER_ROPE_GPTJ; rot_dims even, 2 <= rot_dims <= dim; theta > 0. */
fer_status feri_cuda_rope(float *x, const int32_t *pos, int64_t tokens, int64_t heads, int64_t dim, uint32_t rot_dims,
                          float theta, fer_rope_pairing pairing);

/* out[r] = the index of the largest of x[r, 0 .. n) (contiguous f32); ties low, a NaN at its first
 * position wins. */
fer_status feri_cuda_argmax(const float *x, int64_t rows, int64_t n, int32_t *out);

/* The block-of-32 formats these kernels take: MXFP4, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL. */
int feri_cuda_quant_supported(fer_dtype dtype);

/* Device bytes feri_cuda_matmul_quant_i8 needs for A's 8-bit rows: m * (k + 8 k / 32). */
size_t feri_cuda_q8_bytes(int64_t m, int64_t k);

/* out[m, n] = a[m, k] x w^T, w [n, k] of a block-of-32 dtype with row_stride bytes between rows,
 * with 8-bit activations: a's rows rounded into q8 (feri_cuda_q8_bytes of device scratch), then
 * per output the chain of quant_i8.h. a, out: contiguous f32. */
fer_status feri_cuda_matmul_quant_i8(const float *a, int64_t m, const void *w, fer_dtype dtype, int64_t n, int64_t k,
                                     int64_t row_stride, void *q8, float *out);

/* The same product, exact: per output acc = fmaf(a[k], w[k], acc) over k in order from 0, w[k] the
 * dequantized value of fer_dequantize. The reference route (one thread per output). */
fer_status feri_cuda_matmul_quant(const float *a, int64_t m, const void *w, fer_dtype dtype, int64_t n, int64_t k,
                                  int64_t row_stride, float *out);

#ifdef __cplusplus
}
#endif

#endif
