/* cpu_noise.c: another process on a core, for measuring how a kernel copes with a thread slowed
 * by it (docs/BENCHMARKS.md, fourth attention run; claim C-ATT-011): busy for DUTY of every 2 ms,
 * asleep for the rest, for SECONDS.
 * build: cc -O2 -o cpu_noise scripts/kernels/cpu_noise.c
 * usage: taskset -c 1 cpu_noise DUTY SECONDS &   (e.g. 0.3 60), then run attention_ab
 * EVIDENCE: C-ATT-011 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  const double duty = argc > 2 ? atof(argv[1]) : -1, seconds = argc > 2 ? atof(argv[2]) : -1, period = 0.002;
  if (!(duty >= 0 && duty <= 1 && seconds > 0)) {
    fprintf(stderr, "usage: cpu_noise DUTY(0..1) SECONDS\n");
    return 2;
  }
  volatile double x = 1.0;
  for (const double end = now() + seconds; now() < end;) {
    const double t0 = now();
    while (now() - t0 < period * duty) x = x * 1.0000001;
    const struct timespec rest = {0, (long)(period * (1 - duty) * 1e9)};
    nanosleep(&rest, NULL);
  }
  return 0;
}
