/* amx.h: the gate in front of AMX's int8 tiles (issue 32). A CPU that lists AMX may still not run
 * it: the OS must enable the tile state (XCR0), Linux hands the tile data to a process only on
 * request (arch_prctl), and a hypervisor can hide or break any of it; so the gate checks each in
 * turn and then multiplies a small pair of tiles against the scalar product before any kernel
 * takes the tile route. The decision is a pure function of what was probed, tested on its own. */
#ifndef FERI_CORE_AMX_H
#define FERI_CORE_AMX_H

#include <stdbool.h>
#include <stdint.h>

#include "ferrite.h"

/* What the probe found, in the order the gate checks it. */
typedef struct feri_amx_probe {
  bool disabled;          /* FERRITE_AMX=0 */
  bool x86_64;            /* CPUID exists at all */
  bool cpuid_tile, cpuid_int8;
  uint64_t xcr0;          /* bits 17 (XTILECFG) and 18 (XTILEDATA) needed */
  int permission_errno;   /* 0: granted; else arch_prctl's errno */
  bool canary_ran, canary_ok;
} feri_amx_probe;

/* The first failing check and its reason, as fer_amx_info_get reports it. */
void feri_amx_decide(const feri_amx_probe *p, fer_amx_info *out);

/* The canary: a 16 x 64 int8 tile times a 16 x 64 (as 16 x 16 quads) tile into 16 x 16 int32
 * against the scalar product; call only after the permission was granted. Returns true when
 * every element agrees. */
bool feri_amx_canary(void);

#endif
