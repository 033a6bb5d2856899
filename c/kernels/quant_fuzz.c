/* quant_fuzz.c: libFuzzer harness of the block-quantized entry points over arbitrary bytes.
 * The input's first four bytes choose the format (any of the thirteen block dtypes), the rows,
 * the blocks per row and a row padding; the rest is the matrix. fer_qmatrix_check must accept or
 * refuse without reading outside the buffer; fer_dequantize, fer_embedding_quant and
 * fer_matmul_quant run whatever it says; when the check accepts, no dequantized value may be NaN
 * (nor infinite, except MXFP4's largest scales times 6), the portable and AVX2 fused GEMV must
 * agree bit for bit with each other and with fer_matmul over the dequantized matrix, and the
 * embedding rows must be the dequantized rows, else the harness aborts. (The descriptor's bytes field is the input's true size: a caller that
 * overstates it is outside the contract.)
 * Built and run by scripts/fuzz-quant.sh (clang -fsanitize=fuzzer,address,undefined).
 * EVIDENCE: C-Q-105 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/tensor.h"
#include "ferrite.h"
#include "kernels/quant.h"

static const fer_dtype TYPES[] = {FER_DTYPE_MXFP4, FER_DTYPE_Q4_0, FER_DTYPE_Q4_1, FER_DTYPE_Q8_0,
                                  FER_DTYPE_Q5_0,  FER_DTYPE_Q5_1, FER_DTYPE_Q2_K, FER_DTYPE_Q3_K,
                                  FER_DTYPE_Q4_K,  FER_DTYPE_Q5_K, FER_DTYPE_Q6_K, FER_DTYPE_IQ4_NL,
                                  FER_DTYPE_IQ4_XS};

#ifndef FERI_QUANT_SEED_MAIN
static fer_threadpool *pools[2];

static void make_pools(void) {
  if (pools[0] != NULL) return;
  const fer_isa isa[2] = {FER_ISA_PORTABLE, FER_ISA_AVX2};
  for (int i = 0; i < 2; i++) {
    fer_threadpool_options o;
    fer_threadpool_options_init(&o);
    o.n_threads = 1;
    o.isa = isa[i];
    if (fer_threadpool_create(&o, &pools[i]) != FER_STATUS_OK) pools[i] = NULL;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 4) return 0;
  make_pools();
  const fer_dtype t = TYPES[data[0] % (sizeof TYPES / sizeof TYPES[0])];
  const int64_t rows = data[1] % 19, blocks = data[2] % 4, pad = data[3] % 8;
  const int64_t be = feri_qblock_elems(t), bb = (int64_t)feri_qblock_bytes(t);
  /* the matrix in a buffer of exactly its bytes, so ASan sees any read past the end */
  const size_t n = size - 4;
  uint8_t *buf = malloc(n > 0 ? n : 1);
  if (buf == NULL) return 0;
  memcpy(buf, data + 4, n);
  fer_qmatrix w = {buf, (uint64_t)n, t, 0, rows, blocks * be, blocks * bb + pad};
  /* odd shapes too: a column count off the block, a stride below a row */
  if (data[3] & 0x80) w.cols += 16;
  if (data[3] & 0x40) w.row_stride -= 1;
  const fer_status chk = fer_qmatrix_check(&w);
  const int64_t K = w.cols > 0 ? w.cols : 1, N = rows > 0 ? rows : 1;
  float *dense = malloc(sizeof(float) * (size_t)(N * K));
  float *x = malloc(sizeof(float) * (size_t)K), *y[3] = {malloc(sizeof(float) * (size_t)N),
                                                         malloc(sizeof(float) * (size_t)N),
                                                         malloc(sizeof(float) * (size_t)N)};
  if (dense == NULL || x == NULL || y[0] == NULL || y[1] == NULL || y[2] == NULL) abort();
  for (int64_t k = 0; k < K; k++) x[k] = (float)((k * 37) % 11) - 5.0f;
  fer_tensor td = feri_tensor_2d(dense, FER_DTYPE_F32, rows, w.cols);
  const fer_status deq = fer_dequantize(NULL, &w, &td);
  /* the structure is checked alike; only a bad scale passes fer_dequantize (it reads none) */
  if (chk == FER_STATUS_OK && deq != FER_STATUS_OK) abort();
  if (chk != FER_STATUS_OK && chk != FER_STATUS_CORRUPT && deq == FER_STATUS_OK) abort();
  if (chk == FER_STATUS_OK) {
    /* f16 scales times codes cannot overflow; MXFP4's E8M0 254 times 6 does (to infinity) */
    for (int64_t i = 0; i < rows * w.cols; i++)
      if (isnan(dense[i]) || (t != FER_DTYPE_MXFP4 && !isfinite(dense[i]))) abort();
    fer_tensor tx = feri_tensor_2d(x, FER_DTYPE_F32, 1, w.cols);
    for (int p = 0; p < 2; p++) {
      fer_tensor ty = feri_tensor_2d(y[p], FER_DTYPE_F32, 1, rows);
      if (pools[p] != NULL && fer_matmul_quant(pools[p], &tx, &w, &ty, NULL, 0) != FER_STATUS_OK) abort();
    }
    fer_tensor ty = feri_tensor_2d(y[2], FER_DTYPE_F32, 1, rows);
    if (fer_matmul(pools[0], &tx, &td, FER_MATMUL_B_NK, &ty, NULL, 0) != FER_STATUS_OK) abort();
    /* bit for bit, except that a NaN (infinities of both signs in one chain) may differ in sign
     * or payload between libm's fmaf and the vector unit */
    for (int p = 0; p < 2; p++)
      for (int64_t i = 0; pools[p] != NULL && i < rows; i++)
        if (memcmp(&y[p][i], &y[2][i], sizeof(float)) != 0 && !(isnan(y[p][i]) && isnan(y[2][i]))) abort();
    if (rows > 0) {
      const int64_t ids[2] = {rows - 1, 0};
      fer_tensor ti = {0};
      ti.data = (void *)ids;
      ti.dtype = FER_DTYPE_I64;
      ti.rank = 1;
      ti.shape[0] = 2;
      ti.strides[0] = 8;
      float *e = malloc(sizeof(float) * (size_t)(2 * K));
      fer_tensor te = feri_tensor_2d(e, FER_DTYPE_F32, 2, w.cols);
      if (e == NULL || fer_embedding_quant(NULL, &w, &ti, &te) != FER_STATUS_OK) abort();
      if (memcmp(e, dense + (rows - 1) * w.cols, sizeof(float) * (size_t)w.cols) != 0 ||
          memcmp(e + w.cols, dense, sizeof(float) * (size_t)w.cols) != 0)
        abort();
      free(e);
    }
  }
  free(buf);
  free(dense);
  free(x);
  for (int i = 0; i < 3; i++) free(y[i]);
  return 0;
}

#else
#include <stdio.h>

/* Seeds: a valid matrix of each format (two rows of two blocks, scales 1.0) under DIR. */
int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  for (size_t f = 0; f < sizeof TYPES / sizeof TYPES[0]; f++) {
    const fer_dtype t = TYPES[f];
    const size_t bb = feri_qblock_bytes(t);
    uint8_t img[4 + 4 * 210];
    img[0] = (uint8_t)f, img[1] = 2, img[2] = 2, img[3] = 0;
    for (size_t i = 0; i < 4 * bb; i++) img[4 + i] = (uint8_t)(i * 29 + 7);
    for (size_t b = 0; b < 4; b++) { /* every f16 that can be a scale: 1.0 (0x3c00) */
      uint8_t *blk = img + 4 + b * bb;
      const int offs[6] = {0, 2, 80, 82, 108, 208};
      for (int i = 0; i < 6; i++)
        if ((size_t)offs[i] + 2 <= bb && !(t == FER_DTYPE_MXFP4)) blk[offs[i]] = 0x00, blk[offs[i] + 1] = 0x3c;
      if (t == FER_DTYPE_MXFP4) blk[0] = 127;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/seed-%s", argv[1], feri_dtype_name(t));
    FILE *fp = fopen(path, "wb");
    if (fp == NULL || fwrite(img, 1, 4 + 4 * bb, fp) != 4 + 4 * bb) return 1;
    fclose(fp);
  }
  return 0;
}
#endif
