/* vmm.h: granule-mapped virtual memory (the fer_vmm ABI). The CPU backend maps ranges of one memfd
 * into PROT_NONE reservations; nothing internal is shared with other files yet. */
#ifndef FERI_MEM_VMM_H
#define FERI_MEM_VMM_H

#include "ferrite.h"

#endif
