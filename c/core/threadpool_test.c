/* threadpool_test.c: every task runs exactly once for any thread count; re-entry is BUSY; the
 * default pool runs at the best ISA level the CPU has, and a level it lacks is UNSUPPORTED.
 * EVIDENCE: C-POOL-001, C-MM-101 */
#include <stdatomic.h>
#include <stdlib.h>

#include "core/threadpool.h"
#include "testing/check.h"

enum { N_TASKS = 5000 };

typedef struct counts {
  _Atomic int ran[N_TASKS];
  fer_threadpool *pool;
  _Atomic int busy_seen;
} counts;

static void count_task(void *ctx, int64_t task) {
  counts *c = ctx;
  atomic_fetch_add(&c->ran[task], 1);
}

static void reenter_task(void *ctx, int64_t task) {
  counts *c = ctx;
  (void)task;
  if (feri_threadpool_run(c->pool, 1, count_task, c) == FER_STATUS_BUSY) atomic_fetch_add(&c->busy_seen, 1);
}

int main(void) {
  const uint32_t thread_counts[] = {1, 2, 3, 8, 64};
  for (size_t k = 0; k < sizeof thread_counts / sizeof thread_counts[0]; k++) {
    fer_threadpool_options o;
    CHECK_STATUS(fer_threadpool_options_init(&o), FER_STATUS_OK);
    o.n_threads = thread_counts[k];
    o.isa = FER_ISA_PORTABLE;
    fer_threadpool *p = NULL;
    CHECK_STATUS(fer_threadpool_create(&o, &p), FER_STATUS_OK);
    uint32_t n = 0;
    CHECK_STATUS(fer_threadpool_n_threads(p, &n), FER_STATUS_OK);
    CHECK(n == thread_counts[k]);
    counts *c = calloc(1, sizeof *c);
    for (int round = 0; round < 20; round++) {
      CHECK_STATUS(feri_threadpool_run(p, N_TASKS, count_task, c), FER_STATUS_OK);
    }
    int wrong = 0;
    for (int t = 0; t < N_TASKS; t++) wrong += atomic_load(&c->ran[t]) != 20;
    CHECK(wrong == 0);
    c->pool = p;
    CHECK_STATUS(feri_threadpool_run(p, 4, reenter_task, c), FER_STATUS_OK);
    CHECK(atomic_load(&c->busy_seen) == 4);
    free(c);
    fer_threadpool_free(p);
  }
  fer_threadpool_options o;
  fer_threadpool_options_init(&o);
  o.n_threads = 5000;
  fer_threadpool *p = (fer_threadpool *)&o; /* must be reset to NULL on failure */
  CHECK_STATUS(fer_threadpool_create(&o, &p), FER_STATUS_INVALID_ARG);
  CHECK(p == NULL);
  o.n_threads = 1;
  o.struct_size = 4;
  CHECK_STATUS(fer_threadpool_create(&o, &p), FER_STATUS_INVALID_ARG);
  o.struct_size = sizeof o;
  o.isa = 42;
  CHECK_STATUS(fer_threadpool_create(&o, &p), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(fer_threadpool_create(NULL, NULL), FER_STATUS_NULL_ARG);
  CHECK_STATUS(fer_threadpool_create(NULL, &p), FER_STATUS_OK); /* defaults */
  fer_isa isa = -1;
  CHECK_STATUS(fer_threadpool_isa(p, &isa), FER_STATUS_OK);
  const uint64_t f = fer_cpu_features();
  const uint64_t avx2 = FER_CPU_FEATURE_AVX2 | FER_CPU_FEATURE_FMA | FER_CPU_FEATURE_F16C;
  const uint64_t avx512 = avx2 | FER_CPU_FEATURE_AVX512F | FER_CPU_FEATURE_AVX512BW |
                          FER_CPU_FEATURE_AVX512VL | FER_CPU_FEATURE_AVX512DQ;
  const int has_avx2 = (f & avx2) == avx2, has_avx512 = (f & avx512) == avx512;
  CHECK(isa == (has_avx512 ? FER_ISA_AVX512 : has_avx2 ? FER_ISA_AVX2 : FER_ISA_PORTABLE));
  fer_threadpool_free(p);
  /* each explicit level: created and reported where the CPU has it, else UNSUPPORTED and NULL */
  const fer_isa levels[3] = {FER_ISA_PORTABLE, FER_ISA_AVX2, FER_ISA_AVX512};
  const int have[3] = {1, has_avx2, has_avx512};
  for (int l = 0; l < 3; l++) {
    o.isa = levels[l];
    p = (fer_threadpool *)&o;
    CHECK_STATUS(fer_threadpool_create(&o, &p), have[l] ? FER_STATUS_OK : FER_STATUS_UNSUPPORTED);
    if (!have[l]) {
      CHECK(p == NULL);
      printf("SKIPPED: a pool at ISA level %d (not on this CPU; UNSUPPORTED checked)\n", (int)levels[l]);
      continue;
    }
    isa = -1;
    CHECK_STATUS(fer_threadpool_isa(p, &isa), FER_STATUS_OK);
    CHECK(isa == levels[l]);
    fer_threadpool_free(p);
  }
  fer_threadpool_free(NULL);
  return feri_test_finish("threadpool_test");
}
