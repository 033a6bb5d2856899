/* grow.h: the growable arrays of the grammar code (capacity doubling from 64). */
#ifndef FERI_GRAMMAR_GROW_H
#define FERI_GRAMMAR_GROW_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* Makes *p (elements of elem bytes, capacity *cap) hold at least need elements; 0 when out of
 * memory (then *p and *cap are unchanged). */
static inline int feri_grow(void **p, uint32_t *cap, uint32_t need, size_t elem) {
  if (need <= *cap) return 1;
  uint64_t c = *cap ? *cap : 64;
  while (c < need) c *= 2;
  if (c > UINT32_MAX) return 0;
  void *q = realloc(*p, elem * (size_t)c);
  if (!q) return 0;
  *p = q;
  *cap = (uint32_t)c;
  return 1;
}

#endif
