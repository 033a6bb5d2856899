/* cpu.h: CPU feature detection and the choice of instruction-set level. */
#ifndef FERI_CORE_CPU_H
#define FERI_CORE_CPU_H

#include "ferrite.h"

/* Resolves FER_ISA_AUTO to the best level this CPU supports (AVX512, AVX2, PORTABLE in that
 * order); refuses a level it lacks with UNSUPPORTED, an unknown one with INVALID_ARG. */
fer_status feri_isa_resolve(fer_isa requested, fer_isa *out_isa);

#endif
