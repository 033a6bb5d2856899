/* governor.h: the memory authority (fer_governor) and the hooks fer_vmm uses to charge granules. */
#ifndef FERI_MEM_GOVERNOR_H
#define FERI_MEM_GOVERNOR_H

#include "ferrite.h"

/* Charge / release without touching the caller's last-error slot on success; fn names the caller
 * in refusal messages. */
fer_status feri_governor_charge(fer_governor *g, fer_mem_role role, uint64_t bytes, const char *fn);
void feri_governor_release(fer_governor *g, fer_mem_role role, uint64_t bytes);

#endif
