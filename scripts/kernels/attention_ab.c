/* attention_ab.c: decode attention at 4k context, A/B between builds of ferrite, in one process.
 * Each library (a shared build of c/core and c/kernels, made by attention_ab_lib.sh) runs the
 * three KV layouts (L0 head-major, L1 seq-major, L2 token-major) in every round, interleaved, a
 * two-thread read probe before each round; the best round's time per library and layout is
 * printed with its fraction of the highest probe. Used for the measurements "in the A/B harness"
 * of docs/BENCHMARKS.md (attention); the benchmark of record is benches/benches/attention.rs.
 *
 * build: cc -O2 -o attention_ab scripts/kernels/attention_ab.c -Iffi -ldl -lpthread -lm
 * usage: attention_ab THREADS DTYPE(16|32|bf) ROUNDS HQ HKV D LAYERS CTX lib1.so [lib2.so ...]
 *        e.g. attention_ab 2 16 4 32 8 128 32 4096 /tmp/a.so /tmp/b.so
 * EVIDENCE: C-ATT-009 C-ATT-011 C-ATT-012 C-ATT-013
 * environment: A2M=1 cache 2 MiB-aligned; HUGE=1 also madvise(MADV_HUGEPAGE); OFF=n byte offset
 * of the cache from malloc's pointer (default 16); TOKPAD=n bytes added to the token-major
 * stride; BDATA=1 the benches' values instead of random ones; LAYERS < 16 repeats one layer
 * (the cache in L2/L3); PREFILL=n n queries from position 0; VERBOSE=1 every round; ROTATE=1 the
 * layouts' order turned by one each round (else L0, L1, L2 after every probe). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include "ferrite.h"
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
static int64_t HQ = 32, HKV = 8, D = 128, LAYERS = 32, CTX = 4096;
static void view(int lay, int64_t es, int64_t layer, int64_t *off, int64_t st[3], int64_t *kvo) {
  if (lay == 0) {
    int64_t kv = HKV * CTX * D * es;
    *off = layer * 2 * kv;
    st[0] = CTX * D * es;
    st[1] = D * es;
    st[2] = es;
    *kvo = kv;
  } else if (lay == 1) {
    int64_t kv = CTX * HKV * D * es;
    *off = layer * 2 * kv;
    st[0] = D * es;
    st[1] = HKV * D * es;
    st[2] = es;
    *kvo = kv;
  } else {
    int64_t tok = LAYERS * 2 * HKV * D * es + (getenv("TOKPAD") ? atoll(getenv("TOKPAD")) : 0);
    *off = layer * 2 * HKV * D * es;
    st[0] = D * es;
    st[1] = tok;
    st[2] = es;
    *kvo = HKV * D * es;
  }
}
static fer_tensor tens(void *p, fer_dtype dt, int64_t a, int64_t b, int64_t c,
                       const int64_t st[3]) {
  fer_tensor t;
  memset(&t, 0, sizeof t);
  t.data = p;
  t.dtype = dt;
  t.rank = 3;
  t.shape[0] = a;
  t.shape[1] = b;
  t.shape[2] = c;
  memcpy(t.strides, st, 3 * sizeof(int64_t));
  return t;
}
typedef struct {
  const float *p;
  size_t n;
  float r;
} rd;
__attribute__((target("avx2"))) static void *rdf(void *a) {
  rd *x = a;
  __m256 acc[8];
  for (int i = 0; i < 8; i++) acc[i] = _mm256_setzero_ps();
  size_t seg = x->n / 8 / 16 * 16;
  for (size_t i = 0; i < seg; i += 16)
    for (int s = 0; s < 8; s++) {
      const float *q = x->p + s * seg + i;
      acc[s] = _mm256_add_ps(acc[s], _mm256_add_ps(_mm256_loadu_ps(q), _mm256_loadu_ps(q + 8)));
    }
  __m256 s = acc[0];
  for (int i = 1; i < 8; i++) s = _mm256_add_ps(s, acc[i]);
  float l[8];
  _mm256_storeu_ps(l, s);
  x->r = l[0];
  return NULL;
}
static int NT = 2;
static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}
static double probe(void) {
  size_t n = (256u << 20) / 4;
  static float *d;
  if (!d) {
    d = getenv("HUGEP") ? aligned_alloc(2 << 20, n * 4) : malloc(n * 4);
    if (getenv("HUGEP")) madvise(d, n * 4, MADV_HUGEPAGE);
    for (size_t i = 0; i < n; i++) d[i] = (float)(i & 1023);
  }
  double best = 1e9;
  for (int it = 0; it < 3; it++) {
    pthread_t t[8];
    rd x[8];
    for (int i = 0; i < NT; i++) {
      x[i].p = d + i * (n / NT);
      x[i].n = n / NT;
    }
    double t0 = now();
    for (int i = 0; i < NT; i++) pthread_create(&t[i], NULL, rdf, &x[i]);
    for (int i = 0; i < NT; i++) pthread_join(t[i], NULL);
    double e = now() - t0;
    if (e < best) best = e;
  }
  return (256u << 20) / best / 1e9;
}
typedef fer_status (*att_fn)(fer_threadpool *, const fer_tensor *, const fer_tensor *,
                             const fer_tensor *, const fer_attention_params *, const fer_tensor *,
                             void *, size_t);
typedef fer_status (*pinit_fn)(fer_attention_params *);
typedef fer_status (*oinit_fn)(fer_threadpool_options *);
typedef fer_status (*create_fn)(const fer_threadpool_options *, fer_threadpool **);
int main(int argc, char **argv) {
  /* ab THREADS DTYPE ROUNDS HQ HKV D LAYERS CTX lib1.so lib2.so ... */
  if (argc < 10) {
    fprintf(stderr,
            "usage: %s THREADS DTYPE(16|32|bf) ROUNDS HQ HKV D LAYERS CTX lib1.so [lib2.so ...]\n",
            argv[0]);
    return 2;
  }
  NT = atoi(argv[1]);
  int dtf = atoi(argv[2]);
  int rounds = atoi(argv[3]);
  HQ = atoll(argv[4]);
  HKV = atoll(argv[5]);
  D = atoll(argv[6]);
  LAYERS = atoll(argv[7]);
  CTX = atoll(argv[8]);
  if (NT < 1 || NT > 8 || rounds < 1 || HQ < 1 || HKV < 1 || HQ % HKV != 0 || D < 1 || LAYERS < 1 ||
      CTX < 1) {
    fprintf(stderr,
            "attention_ab: THREADS 1..8, ROUNDS >= 1, HQ a multiple of HKV, D, LAYERS, CTX >= 1\n");
    return 2;
  }
  int nl = argc - 9;
  if (nl > 4) nl = 4;
  att_fn att[4];
  fer_threadpool *pool[4];
  fer_attention_params pr[4];
  for (int i = 0; i < nl; i++) {
    void *h = dlopen(argv[9 + i], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      printf("dlopen %s\n", dlerror());
      return 1;
    }
    att[i] = (att_fn)dlsym(h, "fer_attention");
    fer_threadpool_options o;
    ((oinit_fn)dlsym(h, "fer_threadpool_options_init"))(&o);
    o.n_threads = NT;
    ((create_fn)dlsym(h, "fer_threadpool_create"))(&o, &pool[i]);
    ((pinit_fn)dlsym(h, "fer_attention_params_init"))(&pr[i]);
    pr[i].q_pos0 = CTX - 1;
  }
  int64_t es = dtf == 32 ? 4 : 2;
  fer_dtype dt = dtf == 32 ? FER_DTYPE_F32 : dtf == 16 ? FER_DTYPE_F16 : FER_DTYPE_BF16;
  size_t nel = (size_t)(LAYERS * 2 * HKV * CTX * D) + (size_t)CTX * 1024;
  if (getenv("PREHUGE")) { /* as the benchmark does: a huge-page cache first, freed */
    const size_t hb = (nel * es + (2 << 20)) / (2 << 20) * (2 << 20);
    char *h = aligned_alloc(2 << 20, hb);
    if (h != NULL) {
      madvise(h, hb, MADV_HUGEPAGE);
      memset(h, 1, hb);
      free(h);
    }
  }
  const long off = getenv("OFF") ? atol(getenv("OFF")) : 16;
  if (off < 0 || off > 4096) {
    fprintf(stderr, "attention_ab: OFF must be 0..4096\n");
    return 2;
  }
  char *cache;
  if (getenv("A2M") || getenv("HUGE")) {
    cache = aligned_alloc(2 << 20, (nel * es + (2 << 20)) / (2 << 20) * (2 << 20));
    if (cache != NULL && getenv("HUGE")) madvise(cache, nel * es, MADV_HUGEPAGE);
  } else {
    char *raw = malloc(nel * es + 8192);
    cache = raw != NULL ? raw + off : NULL;
  }
  if (cache == NULL) {
    fprintf(stderr, "attention_ab: cannot allocate %zu bytes of cache\n", (size_t)(nel * es));
    return 1;
  }
  uint32_t s = 1;
  int bd = getenv("BDATA") != NULL;
  for (size_t i = 0; i < nel; i++) {
    s = s * 1664525u + 1013904223u;
    float v = bd ? ((float)(i % 251) - 125.0f) / 64.0f * 0.25f : ((s >> 8) / 16777216.0f - 0.5f);
    if (es == 4)
      ((float *)cache)[i] = v;
    else {
      _Float16 h = (_Float16)v;
      uint16_t u;
      memcpy(&u, &h, 2);
      if (dt == FER_DTYPE_BF16) {
        uint32_t b;
        memcpy(&b, &v, 4);
        u = b >> 16;
      }
      ((uint16_t *)cache)[i] = u;
    }
  }
  int64_t NQ = getenv("PREFILL") ? atoll(getenv("PREFILL")) : 1;
  float *q = malloc(HQ * NQ * D * 4), *out = malloc(HQ * NQ * D * 4);
  for (int64_t i = 0; i < HQ * NQ * D; i++)
    q[i] = getenv("BDATA") ? ((float)(i % 251) - 125.0f) / 64.0f
                           : (float)((i * 37 % 101) - 50) / 50.0f;
  int64_t qs[3] = {NQ * D * 4, D * 4, 4};
  fer_tensor qt = tens(q, FER_DTYPE_F32, HQ, NQ, D, qs),
             ot = tens(out, FER_DTYPE_F32, HQ, NQ, D, qs);
  if (NQ > 1)
    for (int i = 0; i < nl; i++) pr[i].q_pos0 = 0;
  enum { MAX_ROUNDS = 64 };
  if (rounds > MAX_ROUNDS) rounds = MAX_ROUNDS;
  double best[4][3], times[4][3][MAX_ROUNDS];
  for (int i = 0; i < 4; i++)
    for (int l = 0; l < 3; l++) best[i][l] = 1e9;
  uint64_t hash[4][3];
  double pmax = 0;
  int layer = 0;
  const int rotate = getenv("ROTATE") != NULL;
  for (int r = 0; r < rounds; r++) {
    double pb = probe();
    if (pb > pmax) pmax = pb;
    fprintf(stderr, "[probe %.1f] ", pb);
    for (int li = 0; li < 3; li++)
      for (int i = 0; i < nl; i++) {
        const int l = rotate ? (li + r) % 3 : li;
        int reps = LAYERS < 16 ? 16 : LAYERS;
        if (LAYERS < 16) {
          int64_t off, st[3], kvo;
          view(l, es, 0, &off, st, &kvo);
          fer_tensor kt = tens(cache + off, dt, HKV, CTX, D, st),
                     vt = tens(cache + off + kvo, dt, HKV, CTX, D, st);
          att[i](pool[i], &qt, &kt, &vt, &pr[i], &ot, NULL, 0);
        }
        double t0 = now();
        for (int rep = 0; rep < reps; rep++) {
          int64_t off, st[3], kvo;
          view(l, es, getenv("FIXLAYER") ? 0 : layer, &off, st, &kvo);
          layer = (layer + 1) % LAYERS;
          fer_tensor kt = tens(cache + off, dt, HKV, NQ > 1 ? NQ : CTX, D, st),
                     vt = tens(cache + off + kvo, dt, HKV, NQ > 1 ? NQ : CTX, D, st);
          if (att[i](pool[i], &qt, &kt, &vt, &pr[i], &ot, NULL, 0)) {
            puts("err");
            return 1;
          }
        }
        double e = (now() - t0) / reps;
        if (e < best[i][l]) best[i][l] = e;
        times[i][l][r] = e;
        if (getenv("VERBOSE"))
          fprintf(stderr, "  round %d probe %.1f lib %d layout %d: %.3f ms\n", r, pb, i, l,
                  e * 1e3);
        uint64_t h = 1469598103934665603ull;
        for (int64_t k = 0; k < HQ * D * NQ; k++) {
          uint32_t u;
          memcpy(&u, &out[k], 4);
          h = (h ^ u) * 1099511628211ull;
        }
        hash[i][l] = h;
      }
  }
  double bytes = 2.0 * HKV * CTX * D * es;
  printf("threads %d dtype %d hq %lld hkv %lld d %lld ctx %lld: probe(max) %.1f GB/s\n", NT, dtf,
         (long long)HQ, (long long)HKV, (long long)D, (long long)CTX, pmax);
  for (int i = 0; i < nl; i++) {
    printf("  %-22s", argv[9 + i]);
    for (int l = 0; l < 3; l++)
      printf("  L%d %.3f ms %5.1f GB/s %3.0f%%", l, best[i][l] * 1e3, bytes / best[i][l] / 1e9,
             100 * bytes / best[i][l] / 1e9 / pmax);
    printf("\n  %-22s", "  median");
    for (int l = 0; l < 3; l++) {
      qsort(times[i][l], (size_t)rounds, sizeof(double), cmp_double);
      const double med = times[i][l][rounds / 2];
      printf("  L%d %.3f ms %5.1f GB/s %3.0f%%", l, med * 1e3, bytes / med / 1e9,
             100 * bytes / med / 1e9 / pmax);
    }
    printf("\n");
  }
  /* every library must give the same output bits in a layout (the last call of each; the layouts
   * read the one buffer differently, so their outputs differ) */
  int same = 1;
  for (int i = 0; i < nl; i++)
    for (int l = 0; l < 3; l++) same &= hash[i][l] == hash[0][l];
  printf("outputs %s\n", same ? "identical across libraries" : "DIFFER between libraries");
  return same ? 0 : 1;
}
