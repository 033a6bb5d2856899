/* work_claims.h: a run of work items [begin, end) that its owner takes from the front, in order,
 * while threads that have run out of their own take from the back. Each item is claimed exactly
 * once; front and back share one atomic word, so a claim is one compare-and-swap. Used by
 * fer_attention's decode split, where a thread slowed by another process on its core is relieved
 * an item at a time without cutting every thread's stream into small tasks. */
#ifndef FERI_CORE_WORK_CLAIMS_H
#define FERI_CORE_WORK_CLAIMS_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct feri_work_claims {
  _Atomic uint64_t word; /* front << 32 | back */
} feri_work_claims;

/* The run [begin, end); begin <= end < 2^32. Not thread-safe: before any claim. */
void feri_work_claims_init(feri_work_claims *w, uint32_t begin, uint32_t end);

/* The front item, or -1 when none is left. */
int64_t feri_work_claim_front(feri_work_claims *w);

/* The back item, or -1 when none is left. */
int64_t feri_work_claim_back(feri_work_claims *w);

#endif
