/* vmm.c: fer_vmm's bookkeeping over a backend (vmm_backend.h): granule slots, the windows of each
 * range, mapping counts, the frozen state and the governor's charges. Every check happens before
 * the backend is asked to change anything, so a refused call changes nothing. */
#include "mem/vmm.h"

#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "mem/governor.h"
#include "mem/vmm_backend.h"

enum { FERI_DEFAULT_MAX_GRANULES = 4096, FERI_MAX_GRANULES = 1 << 30 };

struct fer_vmm {
  const feri_vmm_backend *be;
  void *state;
  uint64_t granule;
  uint64_t max_granules;
  uint32_t *map_count; /* per slot: how many windows map it */
  uint8_t *live;       /* per slot: created and not released */
  uint64_t n_live;
  uint64_t n_ranges;
  uint64_t mapped_windows;
  int frozen;
  fer_governor *gov; /* charges a granule at its first mapping, releases at its last */
  fer_mem_role role;
};

struct fer_vmm_range {
  fer_vmm *vmm;
  uintptr_t base;
  uint64_t bytes;
  uint64_t *window; /* per window: slot + 1, or 0 when unmapped */
  uint8_t *read_only; /* per window: mapped read-only */
};

fer_status fer_vmm_options_init(fer_vmm_options *o) {
  feri_error_clear();
  if (o == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_vmm_options_init: opts is NULL");
  memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  o->backend = FER_VMM_BACKEND_CPU;
  o->granule_bytes = 2u << 20;
  o->max_granules = FERI_DEFAULT_MAX_GRANULES;
  return FER_STATUS_OK;
}

fer_status fer_vmm_create(const fer_vmm_options *opts, fer_vmm **out) {
  static const char *const fn = "fer_vmm_create";
  feri_error_clear();
  if (out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: out_vmm is NULL", fn);
  *out = NULL;
  fer_vmm_options o;
  fer_vmm_options_init(&o);
  if (opts != NULL) {
    if (opts->struct_size < sizeof o)
      return feri_fail(FER_STATUS_INVALID_ARG, "%s: struct_size %u < %zu", fn, opts->struct_size, sizeof o);
    o = *opts;
  }
  const feri_vmm_backend *be;
  if (o.backend == FER_VMM_BACKEND_CPU) be = &feri_vmm_backend_cpu;
  else if (o.backend == FER_VMM_BACKEND_CUDA) be = &feri_vmm_backend_cuda;
  else return feri_fail(FER_STATUS_INVALID_ARG, "%s: unknown backend %d", fn, o.backend);
  if (o.max_granules == 0) o.max_granules = FERI_DEFAULT_MAX_GRANULES;
  if (o.max_granules > FERI_MAX_GRANULES)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: max_granules %llu > %d", fn, (unsigned long long)o.max_granules,
                     FERI_MAX_GRANULES);
  fer_vmm *v = calloc(1, sizeof *v);
  if (v == NULL) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
  v->map_count = calloc(o.max_granules, sizeof *v->map_count);
  v->live = calloc(o.max_granules, sizeof *v->live);
  if (v->map_count == NULL || v->live == NULL) {
    free(v->map_count), free(v->live), free(v);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
  }
  uint64_t granule = o.granule_bytes;
  fer_status st = be->open(&granule, o.max_granules, &v->state, fn);
  if (st != FER_STATUS_OK) {
    free(v->map_count), free(v->live), free(v);
    return st;
  }
  v->be = be;
  v->granule = granule;
  v->max_granules = o.max_granules;
  *out = v;
  return FER_STATUS_OK;
}

fer_status fer_vmm_free(fer_vmm *v) {
  feri_error_clear();
  if (v == NULL) return FER_STATUS_OK;
  if (v->n_ranges > 0 || v->n_live > 0)
    return feri_fail(FER_STATUS_BUSY, "fer_vmm_free: %llu ranges and %llu granules are still alive",
                     (unsigned long long)v->n_ranges, (unsigned long long)v->n_live);
  v->be->close(v->state);
  free(v->map_count), free(v->live), free(v);
  return FER_STATUS_OK;
}

fer_status fer_vmm_get_stats(const fer_vmm *v, fer_vmm_stats *out) {
  static const char *const fn = "fer_vmm_get_stats";
  feri_error_clear();
  if (out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: out_stats is NULL", fn);
  memset(out, 0, sizeof *out);
  if (v == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: vmm is NULL", fn);
  uint64_t os = 0;
  fer_status st = v->be->physical_bytes(v->state, v->n_live, v->granule, &os, fn);
  if (st != FER_STATUS_OK) return st;
  out->granule_bytes = v->granule;
  out->live_granules = v->n_live;
  out->ledger_bytes = v->n_live * v->granule;
  out->os_bytes = os;
  out->mapped_windows = v->mapped_windows;
  return FER_STATUS_OK;
}

/* The lowest slot with no live granule; BUDGET_EXCEEDED when all max_granules are alive. */
static fer_status free_slot(const fer_vmm *v, const char *fn, uint64_t *slot) {
  uint64_t s = 0;
  while (s < v->max_granules && v->live[s]) s++;
  if (s == v->max_granules)
    return feri_fail(FER_STATUS_BUDGET_EXCEEDED, "%s: all %llu granules are in use", fn, (unsigned long long)v->max_granules);
  *slot = s;
  return FER_STATUS_OK;
}

fer_status fer_vmm_granule_create(fer_vmm *v, uint64_t *out) {
  static const char *const fn = "fer_vmm_granule_create";
  feri_error_clear();
  if (out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: out_granule is NULL", fn);
  *out = UINT64_MAX;
  if (v == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: vmm is NULL", fn);
  uint64_t slot = 0;
  fer_status st = free_slot(v, fn, &slot);
  if (st != FER_STATUS_OK) return st;
  st = v->be->granule_alloc(v->state, slot, v->granule, fn);
  if (st != FER_STATUS_OK) return st;
  v->live[slot] = 1;
  v->n_live++;
  *out = slot;
  return FER_STATUS_OK;
}

fer_status fer_vmm_granule_release(fer_vmm *v, uint64_t g) {
  static const char *const fn = "fer_vmm_granule_release";
  feri_error_clear();
  if (v == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: vmm is NULL", fn);
  if (g >= v->max_granules || !v->live[g])
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: granule %llu is not alive", fn, (unsigned long long)g);
  if (v->map_count[g] > 0)
    return feri_fail(FER_STATUS_BUSY, "%s: granule %llu is still mapped %u times", fn, (unsigned long long)g, v->map_count[g]);
  fer_status st = v->be->granule_free(v->state, g, v->granule, fn);
  if (st != FER_STATUS_OK) return st;
  v->live[g] = 0;
  v->n_live--;
  return FER_STATUS_OK;
}

bool feri_vmm_is_frozen(const fer_vmm *v) { return v != NULL && v->frozen; }

bool feri_vmm_granule_release_if_unmapped(fer_vmm *v, uint64_t g) {
  if (v == NULL || g >= v->max_granules || !v->live[g] || v->map_count[g] > 0) return false;
  if (v->be->granule_free(v->state, g, v->granule, "fer_vmm") != FER_STATUS_OK) return false;
  v->live[g] = 0;
  v->n_live--;
  return true;
}

fer_status fer_vmm_range_reserve(fer_vmm *v, uint64_t bytes, fer_vmm_range **out) {
  static const char *const fn = "fer_vmm_range_reserve";
  feri_error_clear();
  if (out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: out_range is NULL", fn);
  *out = NULL;
  if (v == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: vmm is NULL", fn);
  if (bytes == 0) return feri_fail(FER_STATUS_INVALID_ARG, "%s: bytes is 0", fn);
  uint64_t windows = bytes / v->granule + (bytes % v->granule != 0);
  uint64_t total;
  if (__builtin_mul_overflow(windows, v->granule, &total) || total > ((uint64_t)1 << 46))
    return feri_fail(FER_STATUS_SIZE_OVERFLOW, "%s: %llu bytes is beyond any address space", fn, (unsigned long long)bytes);
  fer_vmm_range *r = calloc(1, sizeof *r);
  uint64_t *w = calloc(windows, sizeof *w);
  uint8_t *ro = calloc(windows, sizeof *ro);
  if (r == NULL || w == NULL || ro == NULL) {
    free(r), free(w), free(ro);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
  }
  fer_status st = v->be->reserve(v->state, total, v->granule, &r->base, fn);
  if (st != FER_STATUS_OK) {
    free(r), free(w), free(ro);
    return st;
  }
  r->read_only = ro;
  r->vmm = v;
  r->bytes = total;
  r->window = w;
  v->n_ranges++;
  *out = r;
  return FER_STATUS_OK;
}

/* Bookkeeping of one window going away; the last mapping of a granule releases its charge. */
static void unmapped(fer_vmm *v, uint64_t g) {
  v->mapped_windows--;
  if (--v->map_count[g] == 0 && v->gov != NULL) feri_governor_release(v->gov, v->role, v->granule);
}

fer_status fer_vmm_range_free(fer_vmm_range *r) {
  feri_error_clear();
  if (r == NULL) return FER_STATUS_OK;
  fer_vmm *v = r->vmm;
  if (v->frozen) return feri_fail(FER_STATUS_BUSY, "fer_vmm_range_free: the pool is frozen");
  uint64_t windows = r->bytes / v->granule;
  for (uint64_t k = 0; k < windows; k++)
    if (r->window[k]) {
      v->be->unmap(v->state, r->base + k * v->granule, v->granule, "fer_vmm_range_free");
      unmapped(v, r->window[k] - 1);
    }
  v->be->release(v->state, r->base, r->bytes);
  free(r->window);
  free(r->read_only);
  free(r);
  v->n_ranges--;
  return FER_STATUS_OK;
}

fer_status fer_vmm_range_base(const fer_vmm_range *r, void **out_base, uint64_t *out_bytes) {
  feri_error_clear();
  if (out_base != NULL) *out_base = NULL;
  if (out_bytes != NULL) *out_bytes = 0;
  if (r == NULL || out_base == NULL || out_bytes == NULL)
    return feri_fail(FER_STATUS_NULL_ARG, "fer_vmm_range_base: NULL argument");
  *out_base = (void *)r->base;
  *out_bytes = r->bytes;
  return FER_STATUS_OK;
}

/* Offset inside the range and on a granule boundary: the window index, or a status. */
static fer_status window_of(const fer_vmm_range *r, uint64_t offset, const char *fn, uint64_t *k) {
  const uint64_t g = r->vmm->granule;
  if (offset % g != 0)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: offset %llu is not a multiple of the granule %llu", fn,
                     (unsigned long long)offset, (unsigned long long)g);
  if (offset >= r->bytes)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: offset %llu is outside the %llu-byte range", fn,
                     (unsigned long long)offset, (unsigned long long)r->bytes);
  *k = offset / g;
  return FER_STATUS_OK;
}

fer_status fer_vmm_map(fer_vmm_range *r, uint64_t offset, uint64_t g, int32_t access) {
  static const char *const fn = "fer_vmm_map";
  feri_error_clear();
  if (r == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: range is NULL", fn);
  fer_vmm *v = r->vmm;
  if (v->frozen) return feri_fail(FER_STATUS_BUSY, "%s: the pool is frozen", fn);
  uint64_t k;
  fer_status st = window_of(r, offset, fn, &k);
  if (st != FER_STATUS_OK) return st;
  if (r->window[k]) return feri_fail(FER_STATUS_INVALID_ARG, "%s: offset %llu is already mapped", fn, (unsigned long long)offset);
  if (g >= v->max_granules || !v->live[g])
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: granule %llu is not alive", fn, (unsigned long long)g);
  if (access != FER_VMM_ACCESS_READ_WRITE && access != FER_VMM_ACCESS_READ_ONLY)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: unknown access %d", fn, (int)access);
  const int first = v->map_count[g] == 0;
  if (first && v->gov != NULL && (st = feri_governor_charge(v->gov, v->role, v->granule, fn)) != FER_STATUS_OK)
    return st; /* refused before anything changed */
  st = v->be->map(v->state, r->base + offset, v->granule, g, access, fn);
  if (st != FER_STATUS_OK) {
    if (first && v->gov != NULL) feri_governor_release(v->gov, v->role, v->granule);
    return st;
  }
  r->window[k] = g + 1;
  r->read_only[k] = access == FER_VMM_ACCESS_READ_ONLY;
  v->map_count[g]++;
  v->mapped_windows++;
  return FER_STATUS_OK;
}

fer_status fer_vmm_unmap(fer_vmm_range *r, uint64_t offset) {
  static const char *const fn = "fer_vmm_unmap";
  feri_error_clear();
  if (r == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: range is NULL", fn);
  fer_vmm *v = r->vmm;
  if (v->frozen) return feri_fail(FER_STATUS_BUSY, "%s: the pool is frozen", fn);
  uint64_t k;
  fer_status st = window_of(r, offset, fn, &k);
  if (st != FER_STATUS_OK) return st;
  if (!r->window[k]) return feri_fail(FER_STATUS_INVALID_ARG, "%s: nothing is mapped at offset %llu", fn, (unsigned long long)offset);
  if ((st = v->be->unmap(v->state, r->base + offset, v->granule, fn)) != FER_STATUS_OK) return st;
  unmapped(v, r->window[k] - 1);
  r->window[k] = 0;
  return FER_STATUS_OK;
}

fer_status fer_vmm_set_frozen(fer_vmm *v, bool frozen) {
  feri_error_clear();
  if (v == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_vmm_set_frozen: vmm is NULL");
  v->frozen = frozen;
  return FER_STATUS_OK;
}

fer_status fer_vmm_set_governor(fer_vmm *v, fer_governor *gov, fer_mem_role role) {
  static const char *const fn = "fer_vmm_set_governor";
  feri_error_clear();
  if (v == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: vmm is NULL", fn);
  if (role < 0 || role >= FER_MEM_ROLE_COUNT) return feri_fail(FER_STATUS_INVALID_ARG, "%s: unknown role %d", fn, (int)role);
  if (v->mapped_windows > 0)
    return feri_fail(FER_STATUS_BUSY, "%s: %llu windows are mapped; attach before mapping", fn,
                     (unsigned long long)v->mapped_windows);
  v->gov = gov;
  v->role = role;
  return FER_STATUS_OK;
}

fer_status fer_vmm_copy_on_write(fer_vmm_range *r, uint64_t offset, uint64_t *out_granule, uint64_t *out_bytes) {
  static const char *const fn = "fer_vmm_copy_on_write";
  feri_error_clear();
  if (out_granule != NULL) *out_granule = UINT64_MAX;
  if (out_bytes != NULL) *out_bytes = 0;
  if (out_granule == NULL || out_bytes == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: an out-parameter is NULL", fn);
  if (r == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: range is NULL", fn);
  fer_vmm *v = r->vmm;
  if (v->frozen) return feri_fail(FER_STATUS_BUSY, "%s: the pool is frozen", fn);
  if (v->be->copy_into == NULL)
    return feri_fail(FER_STATUS_UNSUPPORTED, "%s: the %s backend cannot copy granules yet", fn, v->be->name);
  uint64_t k;
  fer_status st = window_of(r, offset, fn, &k);
  if (st != FER_STATUS_OK) return st;
  if (!r->window[k]) return feri_fail(FER_STATUS_INVALID_ARG, "%s: nothing is mapped at offset %llu", fn, (unsigned long long)offset);
  const uint64_t old = r->window[k] - 1;
  /* Charge, create and fill the copy first; only then swap the window, so a failure on the way
   * leaves the old mapping in place. */
  uint64_t slot = 0;
  if ((st = free_slot(v, fn, &slot)) != FER_STATUS_OK) return st;
  if (v->gov != NULL && (st = feri_governor_charge(v->gov, v->role, v->granule, fn)) != FER_STATUS_OK) return st;
  if ((st = v->be->granule_alloc(v->state, slot, v->granule, fn)) != FER_STATUS_OK) goto fail_charge;
  if ((st = v->be->copy_into(v->state, slot, r->base + offset, v->granule, fn)) != FER_STATUS_OK) goto fail_alloc;
  if ((st = v->be->map(v->state, r->base + offset, v->granule, slot, FER_VMM_ACCESS_READ_WRITE, fn)) != FER_STATUS_OK) {
    /* A failed MAP_FIXED may have dropped the old mapping: put it back as it was. */
    v->be->map(v->state, r->base + offset, v->granule, old,
               r->read_only[k] ? FER_VMM_ACCESS_READ_ONLY : FER_VMM_ACCESS_READ_WRITE, fn);
    goto fail_alloc;
  }
  v->live[slot] = 1;
  v->n_live++;
  v->map_count[slot] = 1;
  r->window[k] = slot + 1;
  r->read_only[k] = 0;
  v->map_count[old]--; /* the new granule took the window over: mapped_windows is unchanged */
  if (v->map_count[old] == 0 && v->gov != NULL) feri_governor_release(v->gov, v->role, v->granule);
  *out_granule = slot;
  *out_bytes = v->granule;
  return FER_STATUS_OK;
fail_alloc:
  v->be->granule_free(v->state, slot, v->granule, fn);
fail_charge:
  if (v->gov != NULL) feri_governor_release(v->gov, v->role, v->granule);
  return st;
}
