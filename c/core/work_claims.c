/* work_claims.c: see work_claims.h. Relaxed ordering: a claim hands out an index only; what the
 * claimer writes for it is published by the thread pool's end of run. */
#include "core/work_claims.h"

void feri_work_claims_init(feri_work_claims *w, uint32_t begin, uint32_t end) {
  atomic_init(&w->word, (uint64_t)begin << 32 | (end < begin ? begin : end));
}

static int64_t claim(feri_work_claims *w, int from_back) {
  uint64_t s = atomic_load_explicit(&w->word, memory_order_relaxed);
  for (;;) {
    const uint64_t front = s >> 32, back = s & 0xffffffffu;
    if (front >= back) return -1;
    const uint64_t t = from_back ? (front << 32 | (back - 1)) : ((front + 1) << 32 | back);
    if (atomic_compare_exchange_weak_explicit(&w->word, &s, t, memory_order_relaxed, memory_order_relaxed))
      return (int64_t)(from_back ? back - 1 : front);
  }
}

int64_t feri_work_claim_front(feri_work_claims *w) { return claim(w, 0); }

int64_t feri_work_claim_back(feri_work_claims *w) { return claim(w, 1); }
