/* matmul.h: the per-ISA parts of fer_matmul (packing, micro-kernel, GEMV) and the blocking they
 * share. The driver in matmul.c is common to every level.
 *
 * Every output element is one f32 chain acc = fma(a[k], b[k], acc), k ascending from acc = 0, at
 * every level and on every route (packed GEMM for M >= 2, GEMV for M = 1), so the ISA level, the
 * thread count and the row count M change speed only, never a bit (claims C-MM-002, C-MM-003).
 * Packing moves and widens values exactly (f16/bf16 -> f32 is exact), so it cannot change them. */
#ifndef FERI_KERNELS_MATMUL_H
#define FERI_KERNELS_MATMUL_H

#include <stdint.h>

#include "core/tensor.h"
#include "ferrite.h"

/* Register tile of the micro-kernel (MR rows of A by NR columns of B) and the cache blocks of the
 * driver (MC rows of A, KC steps of K, NC columns of B per task) of the portable and AVX2 tables
 * (each table carries its own, below), and the GEMV task widths. The block-quantized packer
 * (feri_pack_b_quant) writes NR = 16 panels; KC stays a multiple of every block size. */
enum {
  FERI_MM_MR = 6,
  FERI_MM_NR = 16,
  FERI_MM_MC = 96,
  FERI_MM_KC = 256,
  FERI_MM_NC = 256,
  /* columns per GEMV task when B is [K, N]: N split evenly over the pool's threads, at least
   * KN_COLS, at most KN_COLS_MAX (the task's f32 partial sums live on its stack: 32 KiB), so
   * that each row of B is read as one long run (see gemv_kn in matmul_avx2.c) */
  FERI_GEMV_KN_COLS = 512,
  FERI_GEMV_KN_COLS_MAX = 8192,
  FERI_GEMV_NK_ROWS = 64, /* rows of B per GEMV task when B is [N, K] */
};

/* B seen as a logical [K, N] matrix: element (k, n) lives at data + k * sk + n * sn (bytes),
 * whatever layout the caller passed. */
typedef struct feri_mm_b {
  const char *data;
  fer_dtype dtype;
  int64_t sk, sn;
  int64_t es;    /* element size; 0 for a block-quantized B */
  int64_t qbytes; /* block bytes of a block-quantized B [N, K]: element (k, n) is value k % E
                   * of block k / E of the row at data + n * sn, E = feri_qblock_elems(dtype)
                   * (32 or 256); 0 for dense B */
} feri_mm_b;

typedef struct feri_matmul_ops {
  /* The table's register tile and cache blocks (FERI_MM_* for the 16-column tables): the packing
   * layout and the driver's blocking follow them; the chains do not (matmul.h's first comment). */
  int64_t mr, nr, mc, kc, nc;
  /* Packs B(k0 .. k0+kc, n0 .. n0+nc) into ceil(nc / NR) panels of kc x NR f32, panel p at
   * dst + p * kc * NR, row k of a panel at + k * NR; columns beyond nc are zero. */
  void (*pack_b)(const feri_mm_b *b, int64_t k0, int64_t kc, int64_t n0, int64_t nc, float *dst);
  /* c[r * ldc + j] (r < mr <= MR, j < NR) = chain over the kc steps of A (row r at a + r * lda,
   * f32, one value per step) and a packed B panel (NR values per step), continuing from c when
   * !first, from 0 when first. */
  void (*micro)(int64_t kc, const float *a, int64_t lda, const float *b, float *c, int64_t ldc,
                int mr, int first);
  /* y[j] (j < nc) = chain over k < K of x[k] * B(k, n0 + j), for B with unit stride along N
   * (sn == es). */
  void (*gemv_kn)(const float *x, int64_t K, const feri_mm_b *b, int64_t n0, int64_t nc, float *y);
  /* As gemv_kn, for B with unit stride along K (sk == es): rows of a [N, K] weight. */
  void (*gemv_nk)(const float *x, int64_t K, const feri_mm_b *b, int64_t n0, int64_t nc, float *y);
  /* dst[i] = element i of a row (src + i * stride bytes) widened to f32, for i < n. */
  void (*widen)(const char *src, int64_t stride, fer_dtype dtype, int64_t n, float *dst);
} feri_matmul_ops;

/* The table for an ISA level (portable, AVX2 or AVX512). */
const feri_matmul_ops *feri_matmul_ops_for(fer_isa isa);

/* Element (k, n) of B as f32, exactly. */
float feri_mm_b_at(const feri_mm_b *b, int64_t k, int64_t n);

/* Scalar GEMV for any strides: the reference order, used by the portable table and for the
 * strided layouts the vector paths do not cover. */
void feri_gemv_strided(const float *x, int64_t K, const feri_mm_b *b, int64_t n0, int64_t nc,
                       float *y);

/* Scalar widening for any stride (portable table, and strided rows). */
void feri_widen_strided(const char *src, int64_t stride, fer_dtype dtype, int64_t n, float *dst);

/* GEMV over a block-quantized B [N, K] (K a multiple of its block): each block decoded once, then
 * the chain over its values; the same chain as feri_gemv_strided, far fewer decodes. */
void feri_gemv_quant(const float *x, int64_t K, const feri_mm_b *b, int64_t n0, int64_t nc, float *y);

/* Packing of a block-quantized B (any k0, kc): blocks dequantized into panels. */
void feri_pack_b_quant(const feri_mm_b *b, int64_t k0, int64_t kc, int64_t n0, int64_t nc,
                       float *dst);

/* Scalar packing for any strides (portable table, and tails of the vector packers). */
void feri_pack_b_strided(const feri_mm_b *b, int64_t k0, int64_t kc, int64_t n0, int64_t nc,
                         float *dst);

/* The argument checks fer_matmul_quant and fer_matmul_quant_i8 share: a [M, K] and out [M, N] valid
 * rank-2 float tensors, w a valid [N, K] block matrix, out writable and overlapping neither. */
fer_status feri_matmul_quant_check(const fer_tensor *a, const fer_qmatrix *w, const fer_tensor *out,
                                   const char *fn, feri_tensor_info *ai, feri_tensor_info *oi);

extern const feri_matmul_ops feri_matmul_ops_portable;
#if defined(__x86_64__)
extern const feri_matmul_ops feri_matmul_ops_avx2;
extern const feri_matmul_ops feri_matmul_ops_avx512;
#endif

#endif
