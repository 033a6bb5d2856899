/* vmm_backend.h: what a fer_vmm backend provides. vmm.c keeps the bookkeeping (slots, windows,
 * mapping counts, freeze, governor charges); a backend only moves physical memory and addresses. */
#ifndef FERI_MEM_VMM_BACKEND_H
#define FERI_MEM_VMM_BACKEND_H

#include <stdint.h>

#include "ferrite.h"

typedef struct feri_vmm_backend {
  const char *name;
  /* Opens the backend for `max_granules` granules of *granule bytes (0: its default); may refuse a
   * granule that is not a multiple of what the device supports. */
  fer_status (*open)(uint64_t *granule, uint64_t max_granules, void **state, const char *fn);
  void (*close)(void *state);
  fer_status (*granule_alloc)(void *state, uint64_t slot, uint64_t granule, const char *fn);
  fer_status (*granule_free)(void *state, uint64_t slot, uint64_t granule, const char *fn);
  fer_status (*reserve)(void *state, uint64_t bytes, uint64_t granule, uintptr_t *base, const char *fn);
  void (*release)(void *state, uintptr_t base, uint64_t bytes);
  fer_status (*map)(void *state, uintptr_t addr, uint64_t granule, uint64_t slot, int32_t access, const char *fn);
  fer_status (*unmap)(void *state, uintptr_t addr, uint64_t granule, const char *fn);
  /* Copies granule bytes from the mapped address src into slot dst (not mapped anywhere yet);
   * NULL when the backend cannot. */
  fer_status (*copy_into)(void *state, uint64_t dst_slot, uintptr_t src, uint64_t granule, const char *fn);
  /* Physical bytes as the system accounts them (the memfd's st_blocks on the CPU). */
  fer_status (*physical_bytes)(void *state, uint64_t live_granules, uint64_t granule, uint64_t *out, const char *fn);
} feri_vmm_backend;

extern const feri_vmm_backend feri_vmm_backend_cpu;
extern const feri_vmm_backend feri_vmm_backend_cuda;

#endif
