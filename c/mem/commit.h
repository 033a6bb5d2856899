/* commit.h: the commit geometry of granule-mapped memory, as pure functions (no memory touched).
 * committed bytes = granule x (granule windows holding at least one live byte). */
#ifndef FERI_MEM_COMMIT_H
#define FERI_MEM_COMMIT_H

#include "ferrite.h"

/* Validates a geometry; fills the bytes of one token in one binding and the binding count. */
fer_status feri_kv_geometry_check(const fer_kv_geometry *g, const char *fn, uint64_t *row_bytes,
                                  uint32_t *n_bindings);

#endif
