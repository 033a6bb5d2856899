/* qi8_step.c: fer_matmul_quant_i8 over one decode (or prefill) step of a 3B-shaped Llama (28
 * layers of q 3072x3072, k and v 1024x3072, o 3072x3072, gate and up 8192x3072, down 3072x8192;
 * 1.6 GB in Q4_0), every matrix a distinct buffer of seeded valid blocks so that the step streams
 * from memory as a model's does (the L3 holds a few matrices, not the model). Prints the step's
 * best time over 8 repetitions and the weight bytes read per second, to put beside
 * scripts/model/read_rate.c on the same machine. Used for issue 19's kernel work (BENCHMARKS.md).
 *
 * build: cc -O2 -Iffi scripts/kernels/qi8_step.c bazel-bin/libferrite.a \
 *          -lpcre2-8 -lcjson -lutf8proc -lm -lpthread -ldl -o qi8_step
 * usage: qi8_step DTYPE THREADS [M]   (DTYPE: a fer_dtype code, 17 = Q4_0, 19 = Q8_0; M rows of A) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ferrite.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  const int dt = argc > 2 ? atoi(argv[1]) : 0, threads = argc > 2 ? atoi(argv[2]) : 0;
  const int64_t M = argc > 3 ? atoi(argv[3]) : 1;
  int64_t be = 0, bsz = 0;
  if (argc < 3 || threads < 1 || M < 1 || M > 4096 || dt < 16 || dt > 28 ||
      fer_qblock_size((fer_dtype)dt, &be, &bsz) != FER_STATUS_OK) {
    fprintf(stderr, "usage: qi8_step DTYPE (16..28, a block-quantized fer_dtype) THREADS [M (1..4096)]\n");
    return 2;
  }
  enum { LAYERS = 28 };
  const int64_t shapes[7][2] = {{3072, 3072}, {1024, 3072}, {1024, 3072}, {3072, 3072},
                                {8192, 3072}, {8192, 3072}, {3072, 8192}};
  if (3072 % be != 0) {
    fprintf(stderr, "qi8_step: K = 3072 is not a multiple of the dtype's block of %lld\n", (long long)be);
    return 2;
  }
  fer_qmatrix *q = calloc(LAYERS * 7, sizeof *q);
  size_t total = 0;
  unsigned s = 1;
  for (int l = 0; l < LAYERS; l++)
    for (int j = 0; j < 7; j++) {
      const int64_t N = shapes[j][0], K = shapes[j][1];
      const size_t stride = (size_t)(K / be) * (size_t)bsz, bytes = stride * (size_t)N;
      unsigned char *w = malloc(bytes);
      if (!w) return 1;
      for (size_t i = 0; i < bytes; i++) w[i] = (unsigned char)((s = s * 1664525u + 1013904223u) >> 24);
      /* a small finite f16 scale (and minimum) at the start of every block; MXFP4 an E8M0 scale */
      for (int64_t r = 0; r < N; r++)
        for (int64_t b = 0; b < K / be; b++) {
          unsigned char *blk = w + (size_t)r * stride + (size_t)b * (size_t)bsz;
          const size_t off = dt == FER_DTYPE_Q2_K ? 80 : dt == FER_DTYPE_Q3_K ? 108 : dt == FER_DTYPE_Q6_K ? 208 : 0;
          const uint16_t d = 0x2000, mn = 0x1800; /* f16 2^-7 and 2^-9 */
          if (dt == FER_DTYPE_MXFP4) {
            blk[0] = 120;
          } else {
            memcpy(blk + off, &d, 2);
            if (dt == FER_DTYPE_Q4_1 || dt == FER_DTYPE_Q5_1 || dt == FER_DTYPE_Q2_K || dt == FER_DTYPE_Q4_K ||
                dt == FER_DTYPE_Q5_K)
              memcpy(blk + off + 2, &mn, 2); /* the formats with a minimum */
          }
        }
      q[l * 7 + j] = (fer_qmatrix){w, bytes, (fer_dtype)dt, 0, N, K, (int64_t)stride};
      total += bytes;
    }
  float *a = malloc(sizeof(float) * 8192 * (size_t)M), *o = malloc(sizeof(float) * 8192 * (size_t)M);
  for (int64_t i = 0; i < 8192 * M; i++) a[i] = (float)(i % 13 - 6) * 0.1f;
  fer_threadpool_options op;
  fer_threadpool_options_init(&op);
  op.n_threads = (uint32_t)threads;
  fer_threadpool *pool = NULL;
  if (fer_threadpool_create(&op, &pool) != FER_STATUS_OK) return 1;
  double best = 1e30;
  for (int rep = 0; rep < 8; rep++) {
    const double t0 = now();
    for (int i = 0; i < LAYERS * 7; i++) {
      fer_tensor ta = {a, FER_DTYPE_F32, 2, {M, q[i].cols}, {q[i].cols * 4, 4}};
      fer_tensor to = {o, FER_DTYPE_F32, 2, {M, q[i].rows}, {q[i].rows * 4, 4}};
      if (fer_matmul_quant_i8(pool, &ta, &q[i], &to, NULL, 0) != FER_STATUS_OK) {
        char msg[256];
        fer_last_error_message(msg, sizeof msg, NULL);
        fprintf(stderr, "qi8_step: %s\n", msg);
        return 1;
      }
    }
    const double t = now() - t0;
    if (t < best) best = t;
  }
  printf("qi8_step dtype %d, M %lld, %d threads: %.2f GB in %.1f ms: %.1f GB/s\n", dt, (long long)M, threads,
         (double)total / 1e9, best * 1e3, (double)total / best / 1e9);
  fer_threadpool_free(pool);
  return 0;
}
