/* attention_ops_bench.c: the per-ISA decode loops of fer_attention (attention.h) alone, on one
 * core, with K and V in L1/L2: what one 64-key tile of one kv head costs in scores, accumulate
 * and softmax (row_max + exp_shift) for the 4 query rows of a GQA group at head_dim 128, against
 * the core's fma ceiling measured in the same run (a loop of independent 512-bit fmas). Each
 * tile does 2 x 64 x 4 x 128 multiply-adds, so at the ceiling scores and accumulate each take
 * 64 x 4 x 128 / 16 = 2048 fma instructions. Used for docs/BENCHMARKS.md (attention, fifth run).
 * EVIDENCE: C-ATT-012
 *
 * build: scripts/kernels/attention_ab_lib.sh . /tmp/a.so &&
 *        cc -O2 -Iffi -Ic -o /tmp/attention_ops_bench scripts/kernels/attention_ops_bench.c /tmp/a.so \
 *           -Wl,-rpath,/tmp
 * usage: attention_ops_bench TABLE(avx2|avx512) DTYPE(16|32|bf) [KEYS_PER_CALL (default 64)] */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ferrite.h"
#include "kernels/attention.h"

enum { D = 128, ROWS = 4, TILE = 64, RESIDENT = 256, ITERS = 100000 };

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

/* 512-bit fma instructions per nanosecond on this core: 12 independent chains. */
__attribute__((target("avx512f"))) static double fma_per_ns(void) {
  const long n = 100000000;
  long i = n;
  const double t0 = now();
  __asm__ volatile(
      "vxorps %%xmm0,%%xmm0,%%xmm0\n\tvxorps %%xmm1,%%xmm1,%%xmm1\n\tvxorps %%xmm2,%%xmm2,%%xmm2\n\t"
      "vxorps %%xmm3,%%xmm3,%%xmm3\n\tvxorps %%xmm4,%%xmm4,%%xmm4\n\tvxorps %%xmm5,%%xmm5,%%xmm5\n\t"
      "vxorps %%xmm6,%%xmm6,%%xmm6\n\tvxorps %%xmm7,%%xmm7,%%xmm7\n\tvxorps %%xmm8,%%xmm8,%%xmm8\n\t"
      "vxorps %%xmm9,%%xmm9,%%xmm9\n\tvxorps %%xmm10,%%xmm10,%%xmm10\n\tvxorps %%xmm11,%%xmm11,%%xmm11\n\t"
      "vxorps %%xmm14,%%xmm14,%%xmm14\n\tvxorps %%xmm15,%%xmm15,%%xmm15\n\t"
      "1:\n\t"
      "vfmadd231ps %%zmm14,%%zmm15,%%zmm0\n\tvfmadd231ps %%zmm14,%%zmm15,%%zmm1\n\t"
      "vfmadd231ps %%zmm14,%%zmm15,%%zmm2\n\tvfmadd231ps %%zmm14,%%zmm15,%%zmm3\n\t"
      "vfmadd231ps %%zmm14,%%zmm15,%%zmm4\n\tvfmadd231ps %%zmm14,%%zmm15,%%zmm5\n\t"
      "vfmadd231ps %%zmm14,%%zmm15,%%zmm6\n\tvfmadd231ps %%zmm14,%%zmm15,%%zmm7\n\t"
      "vfmadd231ps %%zmm14,%%zmm15,%%zmm8\n\tvfmadd231ps %%zmm14,%%zmm15,%%zmm9\n\t"
      "vfmadd231ps %%zmm14,%%zmm15,%%zmm10\n\tvfmadd231ps %%zmm14,%%zmm15,%%zmm11\n\t"
      "dec %0\n\tjnz 1b\n\t"
      : "+r"(i)
      :
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",
        "xmm14", "xmm15", "cc");
  return 12.0 * n / ((now() - t0) * 1e9);
}

int main(int argc, char **argv) {
  const feri_attention_ops *ops = argc >= 3 && strcmp(argv[1], "avx2") == 0     ? &feri_attention_ops_avx2
                                  : argc >= 3 && strcmp(argv[1], "avx512") == 0 ? &feri_attention_ops_avx512
                                                                                : NULL;
  const int dtf = argc >= 3 ? atoi(argv[2]) : 0;
  const int bk = argc >= 4 ? atoi(argv[3]) : TILE;
  const int is_bf = argc >= 3 && strcmp(argv[2], "bf") == 0;
  if (ops == NULL || (dtf != 16 && dtf != 32 && !is_bf) || bk < 1 || bk > TILE) {
    fprintf(stderr, "usage: attention_ops_bench TABLE(avx2|avx512) DTYPE(16|32|bf) [KEYS_PER_CALL 1..64]\n");
    return 2;
  }
  const fer_dtype dt = is_bf ? FER_DTYPE_BF16 : dtf == 16 ? FER_DTYPE_F16 : FER_DTYPE_F32;
  const int64_t es = dt == FER_DTYPE_F32 ? 4 : 2, row = D * es;
  char *k = aligned_alloc(64, RESIDENT * row), *v = aligned_alloc(64, RESIDENT * row);
  float *q = aligned_alloc(64, sizeof(float) * ROWS * D), *s = aligned_alloc(64, sizeof(float) * ROWS * TILE);
  float *o = aligned_alloc(64, sizeof(float) * ROWS * D);
  if (k == NULL || v == NULL || q == NULL || s == NULL || o == NULL) return 1;
  for (int64_t i = 0; i < RESIDENT * row / 2; i++) { /* small positive f16/bf16 values, or f32 bit halves */
    ((uint16_t *)k)[i] = (uint16_t)(dt == FER_DTYPE_BF16 ? 0x3c00 + i % 97 : 0x3000 + i % 97);
    ((uint16_t *)v)[i] = (uint16_t)(dt == FER_DTYPE_BF16 ? 0x3b00 + i % 89 : 0x2c00 + i % 89);
  }
  for (int i = 0; i < ROWS * D; i++) q[i] = (float)(i % 13) * 0.01f, o[i] = 0.0f;
  for (int i = 0; i < ROWS * TILE; i++) s[i] = 0.01f * (float)(i % 7);
  const float corr[ROWS] = {1.0f, 1.0f, 1.0f, 1.0f};
  const double peak = fma_per_ns(), ideal = (double)TILE * ROWS * D / 16 / peak;
  double t_sc = 0, t_acc = 0, t_soft = 0;
  float sink = 0;
  for (int rep = 0; rep < 3; rep++) { /* the best of three */
    double t0 = now();
    for (long it = 0; it < ITERS; it++)
      for (int j0 = 0; j0 < TILE; j0 += bk) {
        const int64_t j = (it * TILE + j0) % RESIDENT;
        const feri_kv_rows kr = {k + j * row, dt, row, es, es};
        ops->scores(q, D, ROWS, D, &kr, bk, 0.1f, s + j0, TILE, NULL);
      }
    const double sc = (now() - t0) / ITERS * 1e9;
    t0 = now();
    for (long it = 0; it < ITERS; it++)
      for (int j0 = 0; j0 < TILE; j0 += bk) {
        const int64_t j = (it * TILE + j0) % RESIDENT;
        const feri_kv_rows vr = {v + j * row, dt, row, es, es};
        ops->accumulate(o, D, ROWS, D, s + j0, TILE, &vr, bk, j0 == 0 ? corr : NULL, NULL);
      }
    const double acc = (now() - t0) / ITERS * 1e9;
    t0 = now();
    for (long it = 0; it < ITERS; it++)
      for (int r = 0; r < ROWS; r++) {
        float *sr = s + r * TILE;
        for (int i = 0; i < TILE; i++) sr[i] = 0.01f * (float)((i + it) % 7); /* fresh scores each time */
        sink += ops->exp_shift(sr, TILE, ops->row_max(sr, TILE, -1e30f));
      }
    const double soft = (now() - t0) / ITERS * 1e9;
    if (rep == 0 || sc < t_sc) t_sc = sc;
    if (rep == 0 || acc < t_acc) t_acc = acc;
    if (rep == 0 || soft < t_soft) t_soft = soft;
  }
  printf("%s dtype %s, %d keys per call: fma ceiling %.2f zmm fma/ns; per 64-key tile of one kv head (4 rows, d %d):\n",
         argv[1], argv[2], bk, peak, D);
  printf("  scores     %7.1f ns  %.2f of the ceiling (%.1f ns)\n", t_sc, ideal / t_sc, ideal);
  printf("  accumulate %7.1f ns  %.2f of the ceiling\n", t_acc, ideal / t_acc);
  printf("  softmax    %7.1f ns  (row_max + exp_shift of 4 rows, with refilling the scores) [%g]\n", t_soft,
         (double)sink);
  printf("  together   %7.1f ns  %.2f of the ceiling's %.1f ns\n", t_sc + t_acc + t_soft, 2 * ideal / (t_sc + t_acc + t_soft),
         2 * ideal);
  free(k), free(v), free(q), free(s), free(o);
  return 0;
}
