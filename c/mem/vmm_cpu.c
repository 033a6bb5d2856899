/* vmm_cpu.c: the CPU backend of fer_vmm. A physical granule is a slot of one memfd: fallocate
 * makes it resident, punching a hole releases it; ranges are PROT_NONE anonymous reservations into
 * which slots are mapped MAP_FIXED|MAP_SHARED, so one granule can appear at several addresses, the
 * MMU enforces read-only, and the kernel's st_blocks of the memfd is the ground truth. */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/status.h"
#include "mem/vmm_backend.h"

enum { FERI_CPU_DEFAULT_GRANULE = 2 << 20 };

typedef struct cpu_state {
  int fd;
} cpu_state;

static fer_status cpu_open(uint64_t *granule, uint64_t max_granules, void **state, const char *fn) {
  if (*granule == 0) *granule = FERI_CPU_DEFAULT_GRANULE;
  const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
  if (*granule % page != 0)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: granule_bytes %llu is not a multiple of the page size %llu", fn,
                     (unsigned long long)*granule, (unsigned long long)page);
  uint64_t file_bytes;
  if (__builtin_mul_overflow(*granule, max_granules, &file_bytes) || file_bytes > (uint64_t)INT64_MAX)
    return feri_fail(FER_STATUS_SIZE_OVERFLOW, "%s: granule_bytes x max_granules overflows", fn);
  cpu_state *s = malloc(sizeof *s);
  if (s == NULL) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
  s->fd = (int)syscall(SYS_memfd_create, "ferrite-vmm", 1u /* MFD_CLOEXEC */);
  if (s->fd < 0) {
    free(s);
    return feri_fail(FER_STATUS_UNSUPPORTED, "%s: memfd_create failed: %s", fn, strerror(errno));
  }
  if (ftruncate(s->fd, (off_t)file_bytes) != 0) { /* sparse: no block allocated yet */
    fer_status st = feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: ftruncate of the memfd failed: %s", fn, strerror(errno));
    close(s->fd);
    free(s);
    return st;
  }
  *state = s;
  return FER_STATUS_OK;
}

static void cpu_close(void *state) {
  cpu_state *s = state;
  close(s->fd);
  free(s);
}

static fer_status cpu_granule_alloc(void *state, uint64_t slot, uint64_t granule, const char *fn) {
  cpu_state *s = state;
  if (fallocate(s->fd, 0, (off_t)(slot * granule), (off_t)granule) != 0)
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: fallocate of %llu bytes failed: %s", fn,
                     (unsigned long long)granule, strerror(errno));
  return FER_STATUS_OK;
}

static fer_status cpu_granule_free(void *state, uint64_t slot, uint64_t granule, const char *fn) {
  cpu_state *s = state;
  /* Punching the hole frees the pages now and zeroes the slot for its next use. */
  if (fallocate(s->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)(slot * granule), (off_t)granule) != 0)
    return feri_fail(FER_STATUS_DEVICE_ERROR, "%s: punching the hole failed: %s", fn, strerror(errno));
  return FER_STATUS_OK;
}

static fer_status cpu_reserve(void *state, uint64_t bytes, uint64_t granule, uintptr_t *base, const char *fn) {
  (void)state, (void)granule;
  void *p = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: reserving %llu bytes failed: %s", fn, (unsigned long long)bytes,
                     strerror(errno));
  *base = (uintptr_t)p;
  return FER_STATUS_OK;
}

static void cpu_release(void *state, uintptr_t base, uint64_t bytes) {
  (void)state;
  munmap((void *)base, bytes);
}

/* Puts the reservation back over one window: PROT_NONE, no backing. */
static int cpu_unreserve(uintptr_t addr, uint64_t granule) {
  void *p = mmap((void *)addr, granule, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  return p == MAP_FAILED ? -1 : 0;
}

static fer_status cpu_map(void *state, uintptr_t addr, uint64_t granule, uint64_t slot, int32_t access, const char *fn) {
  cpu_state *s = state;
  int prot = access == FER_VMM_ACCESS_READ_ONLY ? PROT_READ : PROT_READ | PROT_WRITE;
  void *p = mmap((void *)addr, granule, prot, MAP_SHARED | MAP_FIXED, s->fd, (off_t)(slot * granule));
  if (p == MAP_FAILED) {
    fer_status st = feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: mmap failed: %s", fn, strerror(errno));
    cpu_unreserve(addr, granule); /* MAP_FIXED may have dropped the reservation: put it back */
    return st;
  }
  return FER_STATUS_OK;
}

static fer_status cpu_unmap(void *state, uintptr_t addr, uint64_t granule, const char *fn) {
  (void)state;
  if (cpu_unreserve(addr, granule) != 0)
    return feri_fail(FER_STATUS_DEVICE_ERROR, "%s: restoring the reservation failed: %s", fn, strerror(errno));
  return FER_STATUS_OK;
}

/* A short-lived private window onto the destination slot; the source is read where it is mapped. */
static fer_status cpu_copy_into(void *state, uint64_t dst, uintptr_t src, uint64_t granule, const char *fn) {
  cpu_state *s = state;
  void *p = mmap(NULL, granule, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, (off_t)(dst * granule));
  if (p == MAP_FAILED) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: mmap of the copy failed: %s", fn, strerror(errno));
  memcpy(p, (const void *)src, granule);
  munmap(p, granule);
  return FER_STATUS_OK;
}

static fer_status cpu_physical_bytes(void *state, uint64_t live, uint64_t granule, uint64_t *out, const char *fn) {
  (void)live, (void)granule;
  cpu_state *s = state;
  struct stat sb;
  if (fstat(s->fd, &sb) != 0) return feri_fail(FER_STATUS_DEVICE_ERROR, "%s: fstat: %s", fn, strerror(errno));
  *out = (uint64_t)sb.st_blocks * 512u;
  return FER_STATUS_OK;
}

const feri_vmm_backend feri_vmm_backend_cpu = {
    .name = "cpu",
    .open = cpu_open,
    .close = cpu_close,
    .granule_alloc = cpu_granule_alloc,
    .granule_free = cpu_granule_free,
    .reserve = cpu_reserve,
    .release = cpu_release,
    .map = cpu_map,
    .unmap = cpu_unmap,
    .copy_into = cpu_copy_into,
    .physical_bytes = cpu_physical_bytes,
};
