/* read_rate.c: the rate at which THREADS threads read a file through its read-only mapping once
 * it is in the page cache (the memory ceiling of a decode step that reads every weight once):
 * each thread sums its contiguous share with 256-bit loads; best of 5 passes after a warm-up.
 * Prints "read rate: X GB/s (N bytes, T threads)". Used by scripts/model/bench_engine.sh.
 * usage: read_rate FILE THREADS */
#include <fcntl.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct share {
  const uint8_t *p;
  size_t n;
  uint64_t sum;
} share;

__attribute__((target("avx2"))) static void *read_share(void *arg) {
  share *s = arg;
  __m256i acc = _mm256_setzero_si256();
  size_t i = 0;
  for (; i + 128 <= s->n; i += 128) {
    const __m256i a = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(s->p + i)),
                                       _mm256_loadu_si256((const __m256i *)(s->p + i + 32)));
    const __m256i b = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(s->p + i + 64)),
                                       _mm256_loadu_si256((const __m256i *)(s->p + i + 96)));
    acc = _mm256_add_epi64(acc, _mm256_xor_si256(a, b));
  }
  uint64_t v[4];
  _mm256_storeu_si256((__m256i *)v, acc);
  s->sum = v[0] + v[1] + v[2] + v[3];
  for (; i < s->n; i++) s->sum += s->p[i];
  return NULL;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  if (argc != 3 || atoi(argv[2]) < 1 || atoi(argv[2]) > 64) {
    fprintf(stderr, "usage: read_rate FILE THREADS (1..64)\n");
    return 2;
  }
  const int threads = atoi(argv[2]);
  const int fd = open(argv[1], O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
    fprintf(stderr, "read_rate: %s is not a readable, non-empty regular file\n", argv[1]);
    return 2;
  }
  const size_t n = (size_t)st.st_size;
  const uint8_t *p = mmap(NULL, n, PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    perror("read_rate: mmap");
    return 2;
  }
  double best = 1e30;
  uint64_t sink = 0;
  for (int pass = 0; pass < 6; pass++) {
    pthread_t tid[64];
    share sh[64];
    const double t0 = now();
    for (int t = 0; t < threads; t++) {
      const size_t a = n / (size_t)threads * (size_t)t, b = t + 1 == threads ? n : n / (size_t)threads * (size_t)(t + 1);
      sh[t] = (share){p + a, b - a, 0};
      pthread_create(&tid[t], NULL, read_share, &sh[t]);
    }
    for (int t = 0; t < threads; t++) {
      pthread_join(tid[t], NULL);
      sink += sh[t].sum;
    }
    const double dt = now() - t0;
    if (pass > 0 && dt < best) best = dt; /* pass 0 warms the page cache and the page tables */
  }
  printf("read rate: %.2f GB/s (%zu bytes, %d threads; sink %llu)\n", (double)n / best / 1e9, n, threads,
         (unsigned long long)(sink & 1));
  return 0;
}
