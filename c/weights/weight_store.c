/* weight_store.c: fer_weight_store, weights under one stable address (contract in ferrite.h).
 *
 * The store reserves a range of whole granules once; its base never moves. A granule of weights
 * is resident when a physical granule of the vmm is mapped at its window (read-only). Paging in
 * maps a physical granule read-write, copies the bytes from the read-only mapping of the model
 * file, and remaps it read-only; evicting unmaps it (the window goes back to PROT_NONE, the
 * address stays reserved) and keeps the physical granule for the next page-in, so no more than
 * the budget's granules ever exist. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/status.h"

static const char *const FN = "fer_weight_store";

struct fer_weight_store {
  fer_vmm *vmm;
  fer_vmm_range *range;
  char *base;
  const char *file; /* read-only mapping of the file, page-aligned */
  size_t file_map_bytes;
  size_t file_skew; /* file_offset % page size: where the weights start in the mapping */
  uint64_t total, granule, n_granules, budget_granules;
  int32_t eviction;
  int64_t *slot;      /* per window: the physical granule id, or -1 */
  uint64_t *spare;    /* unmapped physical granules kept for the next page-in */
  uint64_t n_spare;
  uint64_t *last_use; /* per window: the clock at its last request */
  uint64_t clock;
  fer_weight_store_stats stats;
};

fer_status fer_weight_store_options_init(fer_weight_store_options *opts) {
  feri_error_clear();
  if (opts == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s_options_init: opts is NULL", FN);
  memset(opts, 0, sizeof *opts);
  opts->struct_size = sizeof *opts;
  opts->eviction = FER_WEIGHTS_EVICT_STABLE_SUBSET;
  return FER_STATUS_OK;
}

static fer_status page_in(fer_weight_store *s, uint64_t w) {
  uint64_t g;
  fer_status st = FER_STATUS_OK;
  /* reuse an evicted granule: creating one zero-fills it (fallocate), which cost 4x the copy */
  if (s->n_spare > 0)
    g = s->spare[--s->n_spare];
  else if ((st = fer_vmm_granule_create(s->vmm, &g)) != FER_STATUS_OK)
    return st;
  const uint64_t off = w * s->granule;
  if ((st = fer_vmm_map(s->range, off, g, FER_VMM_ACCESS_READ_WRITE)) != FER_STATUS_OK) {
    (void)fer_vmm_granule_release(s->vmm, g);
    return st;
  }
  const uint64_t n = s->total - off < s->granule ? s->total - off : s->granule;
  memcpy(s->base + off, s->file + s->file_skew + off, (size_t)n);
  /* read-only from here on: remap the same granule with the MMU refusing writes */
  if ((st = fer_vmm_unmap(s->range, off)) != FER_STATUS_OK ||
      (st = fer_vmm_map(s->range, off, g, FER_VMM_ACCESS_READ_ONLY)) != FER_STATUS_OK) {
    (void)fer_vmm_unmap(s->range, off);
    (void)fer_vmm_granule_release(s->vmm, g);
    return st;
  }
  s->slot[w] = (int64_t)g;
  s->stats.resident_granules++;
  s->stats.bytes_read += n;
  return FER_STATUS_OK;
}

static void evict(fer_weight_store *s, uint64_t w) {
  (void)fer_vmm_unmap(s->range, w * s->granule);
  s->spare[s->n_spare++] = (uint64_t)s->slot[w]; /* at most budget granules exist at once */
  s->slot[w] = -1;
  s->stats.resident_granules--;
  s->stats.evictions++;
}

fer_status fer_weight_store_free(fer_weight_store *store) {
  feri_error_clear();
  if (store == NULL) return FER_STATUS_OK;
  for (uint64_t w = 0; store->slot != NULL && w < store->n_granules; w++)
    if (store->slot[w] >= 0) {
      (void)fer_vmm_unmap(store->range, w * store->granule);
      (void)fer_vmm_granule_release(store->vmm, (uint64_t)store->slot[w]);
    }
  for (uint64_t i = 0; store->spare != NULL && i < store->n_spare; i++)
    (void)fer_vmm_granule_release(store->vmm, store->spare[i]);
  (void)fer_vmm_range_free(store->range);
  if (store->file != NULL) munmap((void *)store->file, store->file_map_bytes);
  free(store->slot);
  free(store->last_use);
  free(store->spare);
  free(store);
  return FER_STATUS_OK;
}

fer_status fer_weight_store_open(fer_vmm *vmm, int fd, uint64_t file_offset, uint64_t bytes,
                                 const fer_weight_store_options *opts, fer_weight_store **out_store) {
  feri_error_clear();
  if (out_store == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s_open: out_store is NULL", FN);
  *out_store = NULL;
  if (vmm == NULL || opts == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s_open: vmm and opts must not be NULL", FN);
  if (opts->struct_size < sizeof *opts)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s_open: opts->struct_size %u < %zu", FN, opts->struct_size, sizeof *opts);
  if (opts->eviction != FER_WEIGHTS_EVICT_STABLE_SUBSET && opts->eviction != FER_WEIGHTS_EVICT_LRU)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s_open: unknown eviction %d", FN, (int)opts->eviction);
  if (fd < 0 || bytes == 0) return feri_fail(FER_STATUS_INVALID_ARG, "%s_open: need a file and bytes > 0", FN);
  /* a mapping past the end of the file would map, then fault (SIGBUS) on the first page-in */
  struct stat fs;
  if (fstat(fd, &fs) != 0)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s_open: fd %d is not an open file", FN, fd);
  /* a pipe or device reports no size to check the range against, and may not map at all */
  if (!S_ISREG(fs.st_mode))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s_open: fd %d is not a regular file", FN, fd);
  if ((uint64_t)fs.st_size < file_offset || (uint64_t)fs.st_size - file_offset < bytes)
    return feri_fail(FER_STATUS_CORRUPT, "%s_open: the file has %llu bytes; %llu bytes at offset %llu do not fit",
                     FN, (unsigned long long)fs.st_size, (unsigned long long)bytes, (unsigned long long)file_offset);
  fer_vmm_stats vs;
  fer_status st = fer_vmm_get_stats(vmm, &vs);
  if (st != FER_STATUS_OK) return st;
  const uint64_t g = vs.granule_bytes;
  if (opts->budget_bytes < g)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s_open: a budget of %llu bytes holds no %llu-byte granule", FN,
                     (unsigned long long)opts->budget_bytes, (unsigned long long)g);
  if (bytes > UINT64_MAX - g || file_offset > UINT64_MAX - bytes)
    return feri_fail(FER_STATUS_SIZE_OVERFLOW, "%s_open: %llu bytes at %llu overflow", FN,
                     (unsigned long long)bytes, (unsigned long long)file_offset);
  fer_weight_store *s = calloc(1, sizeof *s);
  if (s == NULL) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s_open: out of memory", FN);
  s->vmm = vmm;
  s->total = bytes;
  s->granule = g;
  s->n_granules = (bytes + g - 1) / g;
  s->budget_granules = opts->budget_bytes / g;
  s->eviction = opts->eviction;
  s->slot = malloc(s->n_granules * sizeof *s->slot);
  s->last_use = calloc(s->n_granules, sizeof *s->last_use);
  s->spare = malloc((s->budget_granules < s->n_granules ? s->budget_granules : s->n_granules) * sizeof *s->spare + 1);
  for (uint64_t w = 0; s->slot != NULL && w < s->n_granules; w++) s->slot[w] = -1;
  const long page = sysconf(_SC_PAGESIZE);
  s->file_skew = (size_t)(file_offset % (uint64_t)page);
  s->file_map_bytes = s->file_skew + (size_t)bytes;
  void *fm = mmap(NULL, s->file_map_bytes, PROT_READ, MAP_SHARED, fd, (off_t)(file_offset - s->file_skew));
  if (s->slot == NULL || s->last_use == NULL || s->spare == NULL || fm == MAP_FAILED) {
    s->file = NULL;
    fer_weight_store_free(s);
    return feri_fail(fm == MAP_FAILED ? FER_STATUS_INVALID_ARG : FER_STATUS_OUT_OF_MEMORY,
                     "%s_open: %s", FN, fm == MAP_FAILED ? "the file cannot be mapped" : "out of memory");
  }
  s->file = fm;
  void *base = NULL;
  uint64_t rbytes = 0;
  if ((st = fer_vmm_range_reserve(vmm, bytes, &s->range)) != FER_STATUS_OK ||
      (st = fer_vmm_range_base(s->range, &base, &rbytes)) != FER_STATUS_OK) {
    fer_weight_store_free(s);
    return st;
  }
  s->base = base;
  s->stats.total_bytes = bytes;
  s->stats.granule_bytes = g;
  s->stats.strategy = s->n_granules <= s->budget_granules ? FER_WEIGHTS_FULL_RESIDENT : FER_WEIGHTS_STREAMING;
  if (s->stats.strategy == FER_WEIGHTS_FULL_RESIDENT) {
    for (uint64_t w = 0; w < s->n_granules; w++)
      if ((st = page_in(s, w)) != FER_STATUS_OK) {
        fer_weight_store_free(s);
        return st;
      }
    s->stats.loaded_granules = s->n_granules;
  }
  *out_store = s;
  return FER_STATUS_OK;
}

fer_status fer_weight_store_base(const fer_weight_store *store, const void **out_base) {
  feri_error_clear();
  if (out_base != NULL) *out_base = NULL; /* set before any check that can fail */
  if (store == NULL || out_base == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s_base: NULL argument", FN);
  *out_base = store->base;
  return FER_STATUS_OK;
}

fer_status fer_weight_store_get_stats(const fer_weight_store *store, fer_weight_store_stats *out_stats) {
  feri_error_clear();
  if (out_stats != NULL) memset(out_stats, 0, sizeof *out_stats);
  if (store == NULL || out_stats == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s_get_stats: NULL argument", FN);
  *out_stats = store->stats;
  return FER_STATUS_OK;
}

/* The resident window to give up, outside [w0, w1]: MRU (stable subset) or LRU. */
static uint64_t victim(const fer_weight_store *s, uint64_t w0, uint64_t w1) {
  uint64_t best = UINT64_MAX;
  for (uint64_t w = 0; w < s->n_granules; w++) {
    if (s->slot[w] < 0 || (w >= w0 && w <= w1)) continue;
    if (best == UINT64_MAX) {
      best = w;
    } else if (s->eviction == FER_WEIGHTS_EVICT_LRU ? s->last_use[w] < s->last_use[best]
                                                     : s->last_use[w] > s->last_use[best]) {
      best = w;
    }
  }
  return best;
}

fer_status fer_weight_store_acquire(fer_weight_store *store, uint64_t offset, uint64_t bytes,
                                    const void **out_ptr) {
  feri_error_clear();
  if (out_ptr == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s_acquire: out_ptr is NULL", FN);
  *out_ptr = NULL;
  if (store == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s_acquire: store is NULL", FN);
  fer_weight_store *s = store;
  if (bytes == 0 || offset >= s->total || bytes > s->total - offset)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s_acquire: [%llu, +%llu) is outside the %llu bytes of weights",
                     FN, (unsigned long long)offset, (unsigned long long)bytes, (unsigned long long)s->total);
  const uint64_t w0 = offset / s->granule, w1 = (offset + bytes - 1) / s->granule;
  if (w1 - w0 + 1 > s->budget_granules)
    return feri_fail(FER_STATUS_BUDGET_EXCEEDED, "%s_acquire: the request spans %llu granules, the budget "
                     "holds %llu", FN, (unsigned long long)(w1 - w0 + 1), (unsigned long long)s->budget_granules);
  const uint64_t now = ++s->clock;
  for (uint64_t w = w0; w <= w1; w++) {
    if (s->slot[w] >= 0) {
      s->stats.hits++;
    } else {
      while (s->stats.resident_granules >= s->budget_granules) evict(s, victim(s, w0, w1));
      fer_status st = page_in(s, w);
      if (st != FER_STATUS_OK) return st;
      s->stats.page_ins++;
    }
    s->last_use[w] = now;
  }
  *out_ptr = s->base + offset;
  return FER_STATUS_OK;
}
