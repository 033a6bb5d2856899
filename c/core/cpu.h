/* cpu.h: CPU feature detection and the choice of instruction-set level. */
#ifndef FERI_CORE_CPU_H
#define FERI_CORE_CPU_H

#include "ferrite.h"

/* Resolves FER_ISA_AUTO to the best level this CPU supports; refuses a level it lacks. */
fer_status feri_isa_resolve(fer_isa requested, fer_isa *out_isa);

#endif
