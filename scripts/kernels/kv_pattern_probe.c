/* kv_pattern_probe.c: is a slow KV layout the kernel's doing or the memory's? For several fresh
 * allocations of a 512 MiB KV cache (32 layers of f16, or 16 of f32 with F32=1; 2 MiB-aligned,
 * MADV_HUGEPAGE unless SMALL=1), each round measures per layout (head-, seq-, token-major) two
 * things over all layers:
 *   read: the bytes decode attention reads (one layer's K and V of 8 kv heads x CTX positions),
 *         in the layout's address order, by two threads (heads split for head-major, positions
 *         for the others), loads only, each thread prefetching PF bytes ahead: what the memory
 *         gives that access pattern in this allocation;
 *   att:  fer_attention decode over the same bytes (32 q heads, head_dim 128) on two threads.
 * It prints, per allocation, each layout's median GB/s of both, the token-/head-major ratio of
 * both (if the kernel's layout gap follows the read's, the memory sets it) and the latency of a
 * dependent load to a random line of the allocation.
 * Used for docs/BENCHMARKS.md (attention, fifth and sixth runs). EVIDENCE: C-ATT-006 C-ATT-014
 * C-ATT-015
 *
 * build: scripts/kernels/attention_ab_lib.sh . /tmp/a.so &&
 *        cc -O2 -o /tmp/kv_pattern_probe scripts/kernels/kv_pattern_probe.c -Iffi /tmp/a.so \
 *           -Wl,-rpath,/tmp -lpthread -lm
 * usage: kv_pattern_probe ALLOCS ROUNDS   (e.g. 8 5). Environment:
 *   VERBOSE=1   every round's att rate;   PERLAYER=1   each layer's mean read and att time;
 *   PF=n        the read's prefetch distance in bytes (default 65536);
 *   HINT=2      the read's prefetches into L2 (prefetcht2, as the kernel's), else into L1;
 *   GROUP=n     the read takes n runs side by side, line by line (default 1);
 *   PFLINES=n   only the first n lines of each run prefetched (the rest left to the hardware);
 *   TOUCH=n     a one-byte load of the run n bytes ahead as each run starts (default none);
 *   COLD=1      before every measurement, a 256 MiB read of other memory as the benchmark's probe;
 *   F32=1, SMALL=1 as above. */
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

enum { HQ = 32, HKV = 8, D = 128, CTX = 4096, NT = 2, CACHE_BYTES = 512 << 20 };
/* f16 K and V of 32 layers, or with F32=1 f32 of 16 (as the benchmark): the same 512 MiB */
static int64_t ES = 2, LAYERS = 32, LAYER_BYTES = 2 * HKV * CTX * D * 2;
static fer_dtype DTYPE = FER_DTYPE_F16;
static const char *const NAMES[3] = {"head", "seq", "token"};
static int64_t PF_AHEAD = 65536; /* bytes; PF=n in the environment */
static int64_t TOUCH_AHEAD = 0; /* bytes; TOUCH=n in the environment */
static int HINT_L2 = 0; /* HINT=2: the read's prefetches into L2 (prefetcht2, as the kernel's), else L1 */
static int SMALL_PAGES = 0; /* SMALL=1: no madvise(MADV_HUGEPAGE), 4 KiB pages */
static int64_t GROUP = 1;
static int64_t PF_LINES = INT64_MAX; /* PFLINES=n: only the first n lines of each run prefetched */ /* runs read side by side, line by line; GROUP=n in the environment */

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
  double done[32]; /* when each layer ended (now()) */
} reader;

/* A position in the read order: group start i0, run r within the group, line c. */
typedef struct {
  int64_t i0, r, c;
} cursor;

static inline void advance(cursor *u, int64_t g, int64_t lines) {
  if (++u->r < g) return;
  u->r = 0;
  if (++u->c < lines) return;
  u->c = 0, u->i0 += g;
}

/* Reads n runs of `bytes` bytes, run i at base + i * stride, prefetching PF_AHEAD bytes ahead in
 * the same order and, with TOUCH_AHEAD, loading one byte of the run TOUCH_AHEAD bytes ahead when
 * a run starts (its page's translation walked early, as fer_attention's touch). */
__attribute__((target("avx2"))) static __m256 read_runs(const char *base, int64_t n, int64_t stride, int64_t bytes,
                                                      __m256 acc) {
  const int64_t lines = bytes / 64, ahead = PF_AHEAD / 64, touch = TOUCH_AHEAD / bytes;
  const int64_t g = n % GROUP == 0 ? GROUP : 1;
  unsigned sum = 0;
  /* Read order: groups of g runs, line c of each run of the group before line c + 1; the
   * prefetch cursor walks the same order PF_AHEAD bytes ahead. */
  cursor rd = {0, 0, 0}, pf = {0, 0, 0};
  for (int64_t k = 0; k < ahead; k++) advance(&pf, g, lines);
  while (rd.i0 < n) {
    const int64_t i = rd.i0 + rd.r;
    if (rd.c == 0 && touch > 0 && i + touch < n) sum += *(const volatile unsigned char *)(base + (i + touch) * stride);
    if (pf.i0 < n && pf.c < PF_LINES) {
      const char *a = base + (pf.i0 + pf.r) * stride + pf.c * 64;
      if (HINT_L2)
        __builtin_prefetch(a, 0, 1);
      else
        __builtin_prefetch(a, 0, 3);
    }
    const float *p = (const float *)(base + i * stride + rd.c * 64);
    acc = _mm256_add_ps(acc, _mm256_add_ps(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)));
    advance(&rd, g, lines), advance(&pf, g, lines);
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
    r->done[l] = now();
  }
  float s[8];
  _mm256_storeu_ps(s, acc);
  r->sink = s[0];
  return NULL;
}

/* COLD=1: before every measurement, two threads stream a separate 256 MiB buffer (4 KiB pages),
 * as the benchmark's read probe does before each round: the caches and TLBs hold that buffer
 * when the measured pass starts. */
static const float *STREAM_BUF;
enum { STREAM_FLOATS = (256 << 20) / 4 };

/* One thread's half, read as the benchmark's probe reads (benches/src/lib.rs read_sum): eight
 * segments side by side. */
__attribute__((target("avx2"))) static void *stream_half(void *arg) {
  const float *p = STREAM_BUF + (intptr_t)arg * (STREAM_FLOATS / NT);
  enum { SEGS = 8, SEG = STREAM_FLOATS / NT / SEGS };
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < SEG; i += 16)
    for (int g = 0; g < SEGS; g++) {
      const float *q = p + g * SEG + i;
      acc = _mm256_add_ps(acc, _mm256_add_ps(_mm256_loadu_ps(q), _mm256_loadu_ps(q + 8)));
    }
  float s[8];
  _mm256_storeu_ps(s, acc);
  __asm__ volatile("" : : "r"(s[0]));
  return NULL;
}

/* Three passes over the buffer, as the probe's best of three. */
static void stream_other(void) {
  if (STREAM_BUF == NULL) return;
  for (int pass = 0; pass < 3; pass++) {
    pthread_t th[NT];
    for (intptr_t t = 0; t < NT; t++) pthread_create(&th[t], NULL, stream_half, (void *)t);
    for (int t = 0; t < NT; t++) pthread_join(th[t], NULL);
  }
}

/* PERLAYER=1: per layout, the mean time of each layer's read and decode over the rounds (ms), to
 * see whether a slow pass is slow throughout or in its first layers only. */
enum { MAX_LAYERS = 32 };
static double LAYER_SUM[2][3][MAX_LAYERS];

static double read_time(const char *cache, int lay) {
  pthread_t th[NT];
  reader r[NT];
  const double t0 = now();
  for (int t = 0; t < NT; t++) {
    r[t] = (reader){cache, lay, t, 0, {0}};
    pthread_create(&th[t], NULL, read_layers, &r[t]);
  }
  for (int t = 0; t < NT; t++) pthread_join(th[t], NULL);
  double prev = t0;
  for (int64_t l = 0; l < LAYERS; l++) { /* a layer ends when its last thread ends it */
    double end = r[0].done[l];
    for (int t = 1; t < NT; t++) end = end > r[t].done[l] ? end : r[t].done[l];
    LAYER_SUM[0][lay][l] += (end - prev) * 1e3;
    prev = end;
  }
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
    const fer_tensor kt = tensor(cache + k, DTYPE, HKV, CTX, D, hs, ps, ES);
    const fer_tensor vt = tensor(cache + v, DTYPE, HKV, CTX, D, hs, ps, ES);
    const double c0 = now();
    const fer_status st = fer_attention(pool, q, &kt, &vt, pr, o, NULL, 0);
    LAYER_SUM[1][lay][l] += (now() - c0) * 1e3;
    if (st != FER_STATUS_OK) {
      char msg[256] = "";
      fer_last_error_message(msg, sizeof msg, NULL);
      fprintf(stderr, "kv_pattern_probe: fer_attention: %s\n", msg);
      exit(1);
    }
  }
  return (now() - t0) / LAYERS;
}

/* Mean latency in ns of a dependent load to a random line of the cache (a pointer chase over
 * 2^20 distinct lines (64 MiB, twice the L3) in scattered order, each holding the offset of the next), the cache's bytes restored
 * afterwards: a memory whose latency is higher slows a layout that cannot keep enough lines in
 * flight more than one the hardware streams. */
static double chase_ns(char *cache) {
  enum { HOPS = 1 << 20 };
  static uint64_t line[HOPS], saved[HOPS];
  const uint64_t lines = (uint64_t)CACHE_BYTES / 64; /* a power of two: an odd multiplier permutes */
  for (int i = 0; i < HOPS; i++) {
    line[i] = (uint64_t)i * 2654435761u % lines * 64;
    memcpy(&saved[i], cache + line[i], 8);
  }
  for (int i = 0; i < HOPS; i++) memcpy(cache + line[i], &line[(i + 1) % HOPS], 8);
  uint64_t at = line[0];
  const double t0 = now();
  for (int i = 0; i < HOPS; i++) memcpy(&at, cache + at, 8);
  const double ns = (now() - t0) / HOPS * 1e9;
  __asm__ volatile("" : : "r"(at));
  for (int i = HOPS - 1; i >= 0; i--) memcpy(cache + line[i], &saved[i], 8);
  return ns;
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
  if (getenv("COLD") != NULL && atoi(getenv("COLD")) == 1) {
    float *b = malloc(sizeof(float) * STREAM_FLOATS);
    if (b == NULL) {
      fprintf(stderr, "kv_pattern_probe: no memory for COLD's stream\n");
      return 1;
    }
    for (int64_t i = 0; i < STREAM_FLOATS; i++) b[i] = (float)(i & 1023);
    STREAM_BUF = b;
  }
  if (getenv("F32") != NULL && atoi(getenv("F32")) == 1)
    ES = 4, LAYERS = 16, LAYER_BYTES = 2 * HKV * CTX * D * 4, DTYPE = FER_DTYPE_F32;
  if (getenv("PFLINES") != NULL) PF_LINES = atoll(getenv("PFLINES"));
  HINT_L2 = getenv("HINT") != NULL && atoi(getenv("HINT")) == 2;
  SMALL_PAGES = getenv("SMALL") != NULL && atoi(getenv("SMALL")) == 1;
  if (getenv("GROUP") != NULL && atoll(getenv("GROUP")) > 0) GROUP = atoll(getenv("GROUP"));
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
  printf("alloc  hugeMiB  read GB/s head/seq/token  att GB/s head/seq/token  token/head read  att  chase ns\n");
  for (int a = 0; a < allocs; a++) {
    const size_t map = (size_t)CACHE_BYTES + (2u << 20);
    char *raw = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
      fprintf(stderr, "kv_pattern_probe: mmap of %zu bytes failed\n", map);
      return 1;
    }
    char *cache = (char *)(((uintptr_t)raw + (2u << 20) - 1) & ~(uintptr_t)((2u << 20) - 1));
    if (!SMALL_PAGES) madvise(cache, CACHE_BYTES, MADV_HUGEPAGE);
    uint32_t s = 1u + (uint32_t)a;
    for (size_t i = 0; i < (size_t)CACHE_BYTES / (size_t)ES; i++) { /* values in [-0.5, 0.5) */
      s = s * 1664525u + 1013904223u;
      const float f = (s >> 8) / 16777216.0f - 0.5f;
      const _Float16 x = (_Float16)f;
      if (ES == 4)
        memcpy(cache + i * 4, &f, 4);
      else
        memcpy(cache + i * 2, &x, 2);
    }
    double rd[3][MAX_ROUNDS], at[3][MAX_ROUNDS];
    for (int r = 0; r < rounds; r++)
      for (int lay = 0; lay < 3; lay++) {
        stream_other();
        rd[lay][r] = read_time(cache, lay);
        stream_other();
        at[lay][r] = att_time(pool, &pr, &qt, &ot, cache, lay);
      }
    if (getenv("VERBOSE") != NULL)
      for (int lay = 0; lay < 3; lay++) {
        printf("  alloc %d %-5s att GB/s by round:", a, NAMES[lay]);
        for (int r = 0; r < rounds; r++) printf(" %.1f", gb / at[lay][r]);
        printf("\n");
      }
    if (getenv("PERLAYER") != NULL)
      for (int kind = 0; kind < 2; kind++)
        for (int lay = 0; lay < 3; lay++) {
          printf("  alloc %d %-5s %s ms by layer:", a, NAMES[lay], kind == 0 ? "read" : "att ");
          for (int64_t l = 0; l < LAYERS; l++) {
            printf(" %.2f", LAYER_SUM[kind][lay][l] / rounds);
            LAYER_SUM[kind][lay][l] = 0;
          }
          printf("\n");
        }
    double mr[3], ma[3];
    for (int lay = 0; lay < 3; lay++) {
      qsort(rd[lay], (size_t)rounds, sizeof(double), cmp_double);
      qsort(at[lay], (size_t)rounds, sizeof(double), cmp_double);
      mr[lay] = gb / rd[lay][rounds / 2];
      ma[lay] = gb / at[lay][rounds / 2];
    }
    printf("%5d  %7ld  %6.1f %6.1f %6.1f        %6.1f %6.1f %6.1f        %5.2f  %5.2f  %6.1f\n", a,
           huge_kb() / 1024, mr[0], mr[1], mr[2], ma[0], ma[1], ma[2], mr[2] / mr[0], ma[2] / ma[0], chase_ns(cache));
    fflush(stdout);
    munmap(raw, map);
  }
  fer_threadpool_free(pool);
  free(q), free(out);
  return 0;
}
