/* quant_gemv_ab.c: fer_matmul_quant (exact route) per block format at one shape, formats
 * alternating in rounds within one run, so a loaded machine slows them alike; prints each
 * format's best time, its weight bytes and bytes per ns, and the ratio to Q4_0's best.
 * Usage: quant_gemv_ab M N K ROUNDS [THREADS [FORMAT]]. With ROUNDS 1 and one FORMAT (its name,
 * e.g. q4_k) under callgrind (--toggle-collect=fer_matmul_quant) it gives that format's
 * instruction count instead.
 * EVIDENCE: C-Q-106 C-Q-107 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/dtype.h"
#include "core/tensor.h"
#include "ferrite.h"
#include "kernels/quant.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s M N K ROUNDS [THREADS]\n", argv[0]);
    return 2;
  }
  const int64_t M = atoll(argv[1]), N = atoll(argv[2]), K = atoll(argv[3]);
  const int rounds = atoi(argv[4]);
  const uint32_t threads = argc > 5 ? (uint32_t)atoi(argv[5]) : 1;
  const fer_dtype types[] = {FER_DTYPE_Q4_0, FER_DTYPE_Q8_0, FER_DTYPE_Q5_0, FER_DTYPE_IQ4_NL, FER_DTYPE_Q4_K,
                             FER_DTYPE_Q5_K, FER_DTYPE_Q6_K, FER_DTYPE_IQ4_XS, FER_DTYPE_Q2_K, FER_DTYPE_Q3_K};
  enum { NT = sizeof types / sizeof types[0] };
  fer_qmatrix w[NT];
  fer_threadpool_options o;
  fer_threadpool_options_init(&o);
  o.n_threads = threads;
  fer_threadpool *pool = NULL;
  if (fer_threadpool_create(&o, &pool) != FER_STATUS_OK) {
    fprintf(stderr, "no pool\n");
    return 1;
  }
  unsigned s = 1;
  for (int t = 0; t < NT; t++) {
    const int64_t bb = (int64_t)feri_qblock_bytes(types[t]), be = feri_qblock_elems(types[t]);
    const int64_t stride = K / be * bb;
    uint8_t *d = malloc((size_t)(N * stride));
    for (int64_t i = 0; i < N * stride; i++) d[i] = (uint8_t)((s = s * 1664525u + 1013904223u) >> 24);
    /* finite scales: every f16 at a scale offset set to a small value */
    for (int64_t b = 0; b < N * K / be; b++) {
      uint8_t *blk = d + b * bb;
      const uint16_t h = 0x2c00;
      const int offs[] = {0, 2, 80, 82, 108, 208};
      for (int i = 0; i < 6; i++) {
        const int off = offs[i];
        const int is_scale = (types[t] == FER_DTYPE_Q2_K) ? (off == 80 || off == 82)
                             : types[t] == FER_DTYPE_Q3_K ? off == 108
                             : types[t] == FER_DTYPE_Q6_K ? off == 208
                             : off == 0 || (off == 2 && feri_qblock_has_offset(types[t]));
        if (is_scale) memcpy(blk + off, &h, 2);
      }
    }
    w[t] = (fer_qmatrix){d, (uint64_t)(N * stride), types[t], 0, N, K, stride};
    if (fer_qmatrix_check(&w[t]) != FER_STATUS_OK) {
      fprintf(stderr, "check failed for %s\n", feri_dtype_name(types[t]));
      return 1;
    }
  }
  float *a = malloc(sizeof(float) * (size_t)(M * K)), *c = malloc(sizeof(float) * (size_t)(M * N));
  for (int64_t i = 0; i < M * K; i++) a[i] = (float)(i % 7) - 3.0f;
  fer_tensor ta = feri_tensor_2d(a, FER_DTYPE_F32, M, K), tc = feri_tensor_2d(c, FER_DTYPE_F32, M, N);
  size_t wsb = 0;
  fer_matmul_quant_workspace_bytes(pool, &ta, &w[6], &tc, &wsb);
  void *ws = aligned_alloc(64, (wsb + 64) / 64 * 64);
  double best[NT];
  for (int t = 0; t < NT; t++) best[t] = 1e30;
  const char *only = argc > 6 ? argv[6] : NULL;
  for (int r = 0; r < rounds; r++)
    for (int t = 0; t < NT; t++) {
      if (only != NULL && strcmp(only, feri_dtype_name(types[t])) != 0) continue;
      size_t need = 0;
      fer_matmul_quant_workspace_bytes(pool, &ta, &w[t], &tc, &need);
      const double t0 = now();
      const fer_status st = fer_matmul_quant(pool, &ta, &w[t], &tc, need <= wsb ? ws : NULL, need <= wsb ? wsb : 0);
      if (st != FER_STATUS_OK) {
        char msg[256];
        size_t len;
        fer_last_error_message(msg, sizeof msg, &len);
        fprintf(stderr, "%s: %s\n", feri_dtype_name(types[t]), msg);
        return 1;
      }
      const double dt = now() - t0;
      if (dt < best[t]) best[t] = dt;
    }
  for (int t = 0; t < NT; t++)
    if (only == NULL || strcmp(only, feri_dtype_name(types[t])) == 0)
      printf("%-7s %8.3f ms  %9.0f KiB  %6.2f B/ns  %5.2fx Q4_0's time  %5.2f ns/kelem\n", feri_dtype_name(types[t]),
           best[t] * 1e3, (double)w[t].bytes / 1024, (double)w[t].bytes / best[t] * 1e-9, best[t] / best[0],
           best[t] * 1e9 / ((double)M * (double)N * (double)K / 1e3));
  fer_threadpool_free(pool);
  return 0;
}
