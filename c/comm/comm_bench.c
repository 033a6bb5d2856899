/* comm_bench.c: the all-reduce's latency and bandwidth across the ranks mpirun started (a
 * benchmark, not a test: scripts/comm/bench-tp.sh runs it over network namespaces at full rate
 * and under tc caps). For each size: REPS timed all-reduces after a few untimed ones, with a
 * barrier-like all-reduce of one float before each so every rank starts together; rank 0 prints
 * the median and the fastest time and the bus bandwidth, 2 (p - 1) / p x bytes / time (what each
 * rank's link carries each way, NCCL's definition).
 * With --q8 first, the 8-bit all-reduce (feri_comm_allreduce_sum_q8: Q8_0 blocks on the wire); the
 * bandwidth is then the f32 sum's equivalent (what the same floats would need as f32).
 * usage: comm_bench [--q8] [REPS] [FLOATS...]   (defaults: 200; 4096 16384 262144 1048576) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/comm.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int by_value(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  feri_comm *c = NULL;
  if (feri_comm_mpi(&c) != FER_STATUS_OK) {
    fprintf(stderr, "comm_bench: MPI did not start (run under mpirun)\n");
    return 1;
  }
  const int q8 = argc > 1 && strcmp(argv[1], "--q8") == 0;
  if (q8) argc--, argv++;
  const int reps = argc > 1 ? atoi(argv[1]) : 200;
  static const size_t defaults[] = {4096, 16384, 262144, 1048576};
  const int n_sizes = argc > 2 ? argc - 2 : 4;
  const int p = feri_comm_size(c), r = feri_comm_rank(c);
  double *t = malloc((size_t)(reps > 0 ? reps : 1) * sizeof *t);
  int rc = reps > 0 && t ? 0 : 1;
  for (int k = 0; k < n_sizes && rc == 0; k++) {
    const size_t n = argc > 2 ? strtoull(argv[2 + k], NULL, 10) : defaults[k];
    float *x = calloc(n ? n : 1, sizeof *x), one = 1;
    if (!x) {
      rc = 1;
      break;
    }
    for (int i = -5; i < reps && rc == 0; i++) {
      if (feri_comm_allreduce_sum_f32(c, &one, 1) != FER_STATUS_OK) rc = 1;
      const double t0 = now_s();
      if ((q8 ? feri_comm_allreduce_sum_q8(c, x, n) : feri_comm_allreduce_sum_f32(c, x, n)) != FER_STATUS_OK) rc = 1;
      if (i >= 0) t[i] = now_s() - t0;
    }
    if (rc == 0 && r == 0) {
      qsort(t, (size_t)reps, sizeof *t, by_value);
      const double med = t[reps / 2], bytes = 4.0 * (double)n;
      printf("comm_bench: %d ranks, %s all-reduce of %zu floats (%.0f KiB): median %.1f us, fastest %.1f us, "
             "bus bandwidth %.3f GB/s (median%s)\n",
             p, q8 ? "8-bit" : "f32", n, bytes / 1024, 1e6 * med, 1e6 * t[0], 2.0 * (p - 1) / p * bytes / med / 1e9,
             q8 ? ", f32-equivalent" : "");
    }
    free(x);
  }
  free(t);
  feri_comm_free(c);
  return rc;
}
