/* work_claims_test.c: claims from the front come in order and from the back in reverse, meet
 * without overlap, and an empty run gives -1; under contention (4 threads, each owning a run of
 * random length and then taking from the others' backs, 300 rounds) every item is claimed
 * exactly once and the owners' front claims stay in increasing order. EVIDENCE: C-ATT-011 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/work_claims.h"
#include "testing/check.h"

static void test_sequential(void) {
  feri_work_claims w;
  feri_work_claims_init(&w, 3, 9);
  CHECK(feri_work_claim_front(&w) == 3);
  CHECK(feri_work_claim_back(&w) == 8);
  CHECK(feri_work_claim_front(&w) == 4);
  CHECK(feri_work_claim_back(&w) == 7);
  CHECK(feri_work_claim_back(&w) == 6);
  CHECK(feri_work_claim_front(&w) == 5);
  CHECK(feri_work_claim_front(&w) == -1);
  CHECK(feri_work_claim_back(&w) == -1);
  feri_work_claims e;
  feri_work_claims_init(&e, 5, 5);
  CHECK(feri_work_claim_front(&e) == -1 && feri_work_claim_back(&e) == -1);
  feri_work_claims r; /* a reversed run is empty */
  feri_work_claims_init(&r, 7, 2);
  CHECK(feri_work_claim_back(&r) == -1);
  feri_work_claims top; /* the largest indices */
  feri_work_claims_init(&top, 0xfffffffeu, 0xffffffffu);
  CHECK(feri_work_claim_back(&top) == 0xfffffffell && feri_work_claim_front(&top) == -1);
}

enum { THREADS = 4, MAX_ITEMS = 4096 };

typedef struct shared {
  feri_work_claims runs[THREADS];
  _Atomic int counts[MAX_ITEMS];
  _Atomic int out_of_order;
} shared;

typedef struct worker {
  shared *s;
  int id;
} worker;

static void *work(void *arg) {
  const worker *w = arg;
  int64_t last = -1, c;
  while ((c = feri_work_claim_front(&w->s->runs[w->id])) >= 0) {
    if (c <= last) atomic_fetch_add(&w->s->out_of_order, 1);
    last = c;
    atomic_fetch_add(&w->s->counts[c], 1);
  }
  for (int r = 1; r < THREADS; r++)
    while ((c = feri_work_claim_back(&w->s->runs[(w->id + r) % THREADS])) >= 0) atomic_fetch_add(&w->s->counts[c], 1);
  return NULL;
}

static void test_concurrent(void) {
  static shared s;
  uint64_t seed = 99;
  long wrong = 0, disorder = 0, items_total = 0;
  for (int round = 0; round < 300; round++) {
    uint32_t begin = 0, ends[THREADS];
    for (int t = 0; t < THREADS; t++) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      ends[t] = begin + (uint32_t)(seed >> 33) % (MAX_ITEMS / THREADS);
      feri_work_claims_init(&s.runs[t], begin, ends[t]);
      begin = ends[t];
    }
    for (int i = 0; i < MAX_ITEMS; i++) atomic_init(&s.counts[i], 0);
    atomic_init(&s.out_of_order, 0);
    pthread_t th[THREADS];
    worker wk[THREADS];
    for (int t = 0; t < THREADS; t++) {
      wk[t] = (worker){&s, t};
      CHECK(pthread_create(&th[t], NULL, work, &wk[t]) == 0);
    }
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    for (uint32_t i = 0; i < begin; i++) wrong += atomic_load(&s.counts[i]) != 1;
    for (uint32_t i = begin; i < MAX_ITEMS; i++) wrong += atomic_load(&s.counts[i]) != 0;
    disorder += atomic_load(&s.out_of_order);
    items_total += begin;
  }
  printf("work_claims: %ld items over 300 rounds of 4 threads, %ld claimed other than once, %ld owner claims out of order\n",
         items_total, wrong, disorder);
  CHECK(items_total > 10000);
  CHECK(wrong == 0);
  CHECK(disorder == 0);
}

int main(void) {
  test_sequential();
  test_concurrent();
  return feri_test_finish("work_claims_test");
}
