/* kv_pattern_probe.c: is a slow KV layout the kernel's doing or the memory's? For several fresh
 * allocations of a 32-layer f16 KV cache (2 MiB-aligned, MADV_HUGEPAGE, as the benchmark's 2 MiB
 * check), each round measures per layout (head-, seq-, token-major) two things over all layers:
 *   read: the bytes decode attention reads (one layer's K and V of 8 kv heads x CTX positions),
 *         in the layout's address order, by two threads (heads split for head-major, positions
 *         for the others), loads only, each thread prefetching 16 KiB ahead: what the memory
 *         gives that access pattern in this allocation;
 *   att:  fer_attention decode over the same bytes (32 q heads, head_dim 128) on two threads.
 * It prints, per allocation, each layout's median GB/s of both and the token-/head-major ratio of
 * both: if the kernel's layout gap follows the read's, the memory sets it.
 * Used for docs/BENCHMARKS.md (attention, fifth run). EVIDENCE: C-ATT-006
 *
 * build: scripts/kernels/attention_ab_lib.sh . /tmp/a.so &&
 *        cc -O2 -o /tmp/kv_pattern_probe scripts/kernels/kv_pattern_probe.c -Iffi /tmp/a.so \
 *           -Wl,-rpath,/tmp -lpthread -lm
 * usage: kv_pattern_probe ALLOCS ROUNDS   (e.g. 8 5); VERBOSE=1 prints every round's att rate, PF=n
 *        the read's prefetch distance in bytes (default 65536), TOUCH=n a one-byte load of the run n bytes
 *        ahead as each run starts (default none) */
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "ferrite.h"

enum { HQ = 32, HKV = 8, D = 128, LAYERS = 32, CTX = 4096, ES = 2, NT = 2 };
enum { LAYER_BYTES = 2 * HKV * CTX * D * ES, CACHE_BYTES = LAYERS * LAYER_BYTES };
static const char *const NAMES[3] = {"head", "seq", "token"};
static int64_t PF_AHEAD = 65536; /* bytes; PF=n in the environment */
static int64_t TOUCH_AHEAD = 0; /* bytes; TOUCH=n in the environment */

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Layer l of layout lay: K starts at *k, V at *v, strides (head, position) in bytes. */
static void view(int lay, int64_t l, int64_t *k, int64_t *v, int64_t *hs, int64_t *ps) {
  const int64_t row = D * ES, kv = (int64_t)HKV * CTX * row;
  if (lay == 0) { /* head-major: [layer][K|V][head][pos][d] */
    *k = l * 2 * kv, *v = *k + kv, *hs = CTX * row, *ps = row;
  } else if (lay == 1) { /* seq-major: [layer][K|V][pos][head][d] */
    *k = l * 2 * kv, *v = *k + kv, *hs = row, *ps = HKV * row;
  } else { /* token-major: [pos][layer][K|V][head][d] */
    *k = l * 2 * HKV * row, *v = *k + HKV * row, *hs = row, *ps = (int64_t)LAYERS * 2 * HKV * row;
  }
}

typedef struct {
  const char *cache;
  int lay, t;
  float sink;
} reader;

/* Reads n runs of `bytes` bytes, run i at base + i * stride, prefetching PF_AHEAD bytes ahead in
 * the same order and, with TOUCH_AHEAD, loading one byte of the run TOUCH_AHEAD bytes ahead when
 * a run starts (its page's translation walked early, as fer_attention's touch). */
__attribute__((target("avx2"))) static __m256 read_runs(const char *base, int64_t n, int64_t stride, int64_t bytes,
                                                      __m256 acc) {
  const int64_t lines = bytes / 64, ahead = PF_AHEAD / 64, touch = TOUCH_AHEAD / bytes;
  unsigned sum = 0;
  for (int64_t i = 0; i < n; i++)
    for (int64_t c = 0; c < lines; c++) {
      if (c == 0 && touch > 0 && i + touch < n) sum += *(const volatile unsigned char *)(base + (i + touch) * stride);
      const int64_t f = i * lines + c + ahead; /* the line PF_AHEAD bytes later in read order */
      if (f / lines < n) __builtin_prefetch(base + f / lines * stride + f % lines * 64, 0, 3);
      const float *p = (const float *)(base + i * stride + c * 64);
      acc = _mm256_add_ps(acc, _mm256_add_ps(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)));
    }
  __asm__ volatile("" : : "r"(sum));
  return acc;
}

__attribute__((target("avx2"))) static void *read_layers(void *arg) {
  reader *r = arg;
  __m256 acc = _mm256_setzero_ps();
  for (int64_t l = 0; l < LAYERS; l++) {
    int64_t k, v, hs, ps;
    view(r->lay, l, &k, &v, &hs, &ps);
    const int64_t row = D * ES;
    if (r->lay == 0) { /* this thread's heads, each a contiguous run of positions */
      for (int64_t h = r->t * HKV / NT; h < (r->t + 1) * HKV / NT; h++) {
        acc = read_runs(r->cache + k + h * hs, 1, 0, CTX * row, acc);
        acc = read_runs(r->cache + v + h * hs, 1, 0, CTX * row, acc);
      }
    } else { /* this thread's positions, all heads of a position together */
      const int64_t p0 = r->t * CTX / NT, n = CTX / NT;
      if (r->lay == 2) { /* K and V of a position are one run */
        acc = read_runs(r->cache + k + p0 * ps, n, ps, 2 * HKV * row, acc);
      } else {
        acc = read_runs(r->cache + k + p0 * ps, n, ps, HKV * row, acc);
        acc = read_runs(r->cache + v + p0 * ps, n, ps, HKV * row, acc);
      }
    }
  }
  float s[8];
  _mm256_storeu_ps(s, acc);
  r->sink = s[0];
  return NULL;
}

static double read_time(const char *cache, int lay) {
  pthread_t th[NT];
  reader r[NT];
  const double t0 = now();
  for (int t = 0; t < NT; t++) {
    r[t] = (reader){cache, lay, t, 0};
    pthread_create(&th[t], NULL, read_layers, &r[t]);
  }
  for (int t = 0; t < NT; t++) pthread_join(th[t], NULL);
  return (now() - t0) / LAYERS;
}

static fer_tensor tensor(const void *p, fer_dtype dt, int64_t a, int64_t b, int64_t c, int64_t s0, int64_t s1,
                         int64_t s2) {
  fer_tensor t;
  memset(&t, 0, sizeof t);
  t.data = (void *)p;
  t.dtype = dt;
  t.rank = 3;
  t.shape[0] = a, t.shape[1] = b, t.shape[2] = c;
  t.strides[0] = s0, t.strides[1] = s1, t.strides[2] = s2;
  return t;
}

static double att_time(fer_threadpool *pool, const fer_attention_params *pr, const fer_tensor *q,
                       const fer_tensor *o, const char *cache, int lay) {
  const double t0 = now();
  for (int64_t l = 0; l < LAYERS; l++) {
    int64_t k, v, hs, ps;
    view(lay, l, &k, &v, &hs, &ps);
    const fer_tensor kt = tensor(cache + k, FER_DTYPE_F16, HKV, CTX, D, hs, ps, ES);
    const fer_tensor vt = tensor(cache + v, FER_DTYPE_F16, HKV, CTX, D, hs, ps, ES);
    if (fer_attention(pool, q, &kt, &vt, pr, o, NULL, 0) != FER_STATUS_OK) {
      char msg[256] = "";
      fer_last_error_message(msg, sizeof msg, NULL);
      fprintf(stderr, "kv_pattern_probe: fer_attention: %s\n", msg);
      exit(1);
    }
  }
  return (now() - t0) / LAYERS;
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static long huge_kb(void) {
  FILE *f = fopen("/proc/self/smaps_rollup", "r");
  char line[256];
  long kb = -1;
  while (f != NULL && fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "AnonHugePages: %ld kB", &kb) == 1) break;
  if (f != NULL) fclose(f);
  return kb;
}

int main(int argc, char **argv) {
  if (getenv("PF") != NULL) PF_AHEAD = atoll(getenv("PF")) / 64 * 64;
  if (getenv("TOUCH") != NULL) TOUCH_AHEAD = atoll(getenv("TOUCH"));
  const int allocs = argc == 3 ? atoi(argv[1]) : 0, rounds = argc == 3 ? atoi(argv[2]) : 0;
  enum { MAX_ROUNDS = 32 };
  if (allocs < 1 || rounds < 1 || rounds > MAX_ROUNDS) {
    fprintf(stderr, "usage: kv_pattern_probe ALLOCS ROUNDS   (ALLOCS >= 1, ROUNDS 1..%d)\n", MAX_ROUNDS);
    return 2;
  }
  fer_threadpool_options po;
  fer_threadpool_options_init(&po);
  po.n_threads = NT;
  fer_threadpool *pool = NULL;
  fer_attention_params pr;
  fer_attention_params_init(&pr);
  pr.q_pos0 = CTX - 1;
  float *q = malloc(sizeof(float) * HQ * D), *out = malloc(sizeof(float) * HQ * D);
  if (fer_threadpool_create(&po, &pool) != FER_STATUS_OK || q == NULL || out == NULL) {
    fprintf(stderr, "kv_pattern_probe: setup failed\n");
    return 1;
  }
  for (int i = 0; i < HQ * D; i++) q[i] = (float)((i * 37 % 101) - 50) / 50.0f;
  const fer_tensor qt = tensor(q, FER_DTYPE_F32, HQ, 1, D, D * 4, D * 4, 4);
  const fer_tensor ot = tensor(out, FER_DTYPE_F32, HQ, 1, D, D * 4, D * 4, 4);
  const double gb = LAYER_BYTES / 1e9; /* one layer's K and V, in GB */
  printf("alloc  hugeMiB  read GB/s head/seq/token  att GB/s head/seq/token  token/head read  att\n");
  for (int a = 0; a < allocs; a++) {
    const size_t map = (size_t)CACHE_BYTES + (2u << 20);
    char *raw = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
      fprintf(stderr, "kv_pattern_probe: mmap of %zu bytes failed\n", map);
      return 1;
    }
    char *cache = (char *)(((uintptr_t)raw + (2u << 20) - 1) & ~(uintptr_t)((2u << 20) - 1));
    madvise(cache, CACHE_BYTES, MADV_HUGEPAGE);
    uint16_t *h = (uint16_t *)cache;
    uint32_t s = 1u + (uint32_t)a;
    for (size_t i = 0; i < (size_t)CACHE_BYTES / 2; i++) { /* f16 values in [-0.5, 0.5) */
      s = s * 1664525u + 1013904223u;
      const _Float16 x = (_Float16)((s >> 8) / 16777216.0f - 0.5f);
      memcpy(&h[i], &x, 2);
    }
    double rd[3][MAX_ROUNDS], at[3][MAX_ROUNDS];
    for (int r = 0; r < rounds; r++)
      for (int lay = 0; lay < 3; lay++) {
        rd[lay][r] = read_time(cache, lay);
        at[lay][r] = att_time(pool, &pr, &qt, &ot, cache, lay);
      }
    if (getenv("VERBOSE") != NULL)
      for (int lay = 0; lay < 3; lay++) {
        printf("  alloc %d %-5s att GB/s by round:", a, NAMES[lay]);
        for (int r = 0; r < rounds; r++) printf(" %.1f", gb / at[lay][r]);
        printf("\n");
      }
    double mr[3], ma[3];
    for (int lay = 0; lay < 3; lay++) {
      qsort(rd[lay], (size_t)rounds, sizeof(double), cmp_double);
      qsort(at[lay], (size_t)rounds, sizeof(double), cmp_double);
      mr[lay] = gb / rd[lay][rounds / 2];
      ma[lay] = gb / at[lay][rounds / 2];
    }
    printf("%5d  %7ld  %6.1f %6.1f %6.1f        %6.1f %6.1f %6.1f        %5.2f  %5.2f\n", a, huge_kb() / 1024,
           mr[0], mr[1], mr[2], ma[0], ma[1], ma[2], mr[2] / mr[0], ma[2] / ma[0]);
    fflush(stdout);
    munmap(raw, map);
  }
  fer_threadpool_free(pool);
  free(q), free(out);
  return 0;
}
