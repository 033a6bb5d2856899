/* vmm.h: granule-mapped virtual memory (the fer_vmm ABI). The CPU backend maps ranges of one memfd
 * into PROT_NONE reservations. */
#ifndef FERI_MEM_VMM_H
#define FERI_MEM_VMM_H

#include "ferrite.h"

/* For owners that share granules (KV prefix sharing): releases granule g when no window maps it
 * any more and reports whether it did; a granule another sharer still maps stays alive, for that
 * sharer to release. Unlike fer_vmm_granule_release, "still mapped" is an answer here, not an
 * error, so the caller's error state is left alone. */
bool feri_vmm_granule_release_if_unmapped(fer_vmm *vmm, uint64_t g);

/* Whether map, unmap and range_free answer BUSY now: an owner that would build something it
 * could not take apart again (a KV fork maps windows) asks first. */
bool feri_vmm_is_frozen(const fer_vmm *vmm);

#endif
