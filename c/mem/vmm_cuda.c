/* vmm_cuda.c: the CUDA backend of fer_vmm, on the driver's virtual memory API (cuMemCreate,
 * cuMemAddressReserve, cuMemMap, cuMemSetAccess, cuMemUnmap, cuMemRelease), loaded from
 * libcuda.so.1 with dlopen so nothing links against the driver. Types come from cuda.h alone.
 * Where no driver or no GPU answers, open() says FER_STATUS_NO_DEVICE; without cuda.h at build
 * time the backend says UNSUPPORTED. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "mem/vmm_backend.h"

#if defined(__has_include)
#if __has_include(<cuda.h>)
#define FERI_HAVE_CUDA_H 1
#endif
#endif

#ifdef FERI_HAVE_CUDA_H
#include <cuda.h>

typedef struct cuda_api {
  CUresult (*Init)(unsigned int);
  CUresult (*DeviceGet)(CUdevice *, int);
  CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*DevicePrimaryCtxRelease)(CUdevice);
  CUresult (*CtxSetCurrent)(CUcontext);
  CUresult (*MemGetAllocationGranularity)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
  CUresult (*MemCreate)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
  CUresult (*MemRelease)(CUmemGenericAllocationHandle);
  CUresult (*MemAddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
  CUresult (*MemAddressFree)(CUdeviceptr, size_t);
  CUresult (*MemMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
  CUresult (*MemUnmap)(CUdeviceptr, size_t);
  CUresult (*MemSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
} cuda_api;

typedef struct cuda_state {
  void *lib;
  cuda_api api;
  CUdevice dev;
  CUcontext ctx;
  CUmemAllocationProp prop;
  CUmemGenericAllocationHandle *handles; /* per slot */
} cuda_state;

static fer_status cuda_status(CUresult r, const char *fn, const char *what) {
  if (r == CUDA_SUCCESS) return FER_STATUS_OK;
  fer_status st = (r == CUDA_ERROR_NO_DEVICE || r == CUDA_ERROR_STUB_LIBRARY || r == CUDA_ERROR_NOT_INITIALIZED || r == CUDA_ERROR_SYSTEM_DRIVER_MISMATCH)
                      ? FER_STATUS_NO_DEVICE
                      : r == CUDA_ERROR_OUT_OF_MEMORY ? FER_STATUS_OUT_OF_MEMORY : FER_STATUS_DEVICE_ERROR;
  return feri_fail(st, "%s: %s failed (CUresult %d)", fn, what, (int)r);
}

/* dlsym into a function pointer without the object/function pointer cast warning. */
static int load(void *lib, const char *name, const char *alt, void *slot) {
  void *p = dlsym(lib, name);
  if (p == NULL && alt != NULL) p = dlsym(lib, alt);
  memcpy(slot, &p, sizeof p);
  return p != NULL;
}

static fer_status cuda_open(uint64_t *granule, uint64_t max_granules, void **state, const char *fn) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) return feri_fail(FER_STATUS_NO_DEVICE, "%s: no CUDA driver (dlopen libcuda.so.1: %s)", fn, dlerror());
  cuda_state *s = calloc(1, sizeof *s);
  if (s == NULL) {
    dlclose(lib);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
  }
  s->lib = lib;
  cuda_api *a = &s->api;
  int ok = load(lib, "cuInit", NULL, &a->Init) && load(lib, "cuDeviceGet", NULL, &a->DeviceGet) &&
           load(lib, "cuDevicePrimaryCtxRetain", NULL, &a->DevicePrimaryCtxRetain) &&
           load(lib, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease", &a->DevicePrimaryCtxRelease) &&
           load(lib, "cuCtxSetCurrent", NULL, &a->CtxSetCurrent) &&
           load(lib, "cuMemGetAllocationGranularity", NULL, &a->MemGetAllocationGranularity) &&
           load(lib, "cuMemCreate", NULL, &a->MemCreate) && load(lib, "cuMemRelease", NULL, &a->MemRelease) &&
           load(lib, "cuMemAddressReserve", NULL, &a->MemAddressReserve) &&
           load(lib, "cuMemAddressFree", NULL, &a->MemAddressFree) && load(lib, "cuMemMap", NULL, &a->MemMap) &&
           load(lib, "cuMemUnmap", NULL, &a->MemUnmap) && load(lib, "cuMemSetAccess", NULL, &a->MemSetAccess);
  fer_status st = FER_STATUS_OK;
  if (!ok) st = feri_fail(FER_STATUS_UNSUPPORTED, "%s: the CUDA driver lacks the virtual memory API", fn);
  if (st == FER_STATUS_OK) st = cuda_status(a->Init(0), fn, "cuInit");
  if (st == FER_STATUS_OK) st = cuda_status(a->DeviceGet(&s->dev, 0), fn, "cuDeviceGet");
  if (st == FER_STATUS_OK) st = cuda_status(a->DevicePrimaryCtxRetain(&s->ctx, s->dev), fn, "cuDevicePrimaryCtxRetain");
  if (st != FER_STATUS_OK) {
    dlclose(lib);
    free(s);
    return st;
  }
  a->CtxSetCurrent(s->ctx);
  s->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  s->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  s->prop.location.id = s->dev;
  size_t min = 0;
  st = cuda_status(a->MemGetAllocationGranularity(&min, &s->prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), fn,
                   "cuMemGetAllocationGranularity");
  /* The granule is a queried property: the default is the device's minimum. */
  if (st == FER_STATUS_OK && *granule == 0) *granule = min;
  if (st == FER_STATUS_OK && (min == 0 || *granule % min != 0))
    st = feri_fail(FER_STATUS_INVALID_ARG, "%s: granule_bytes %llu is not a multiple of the device granularity %zu", fn,
                   (unsigned long long)*granule, min);
  if (st == FER_STATUS_OK && (s->handles = calloc(max_granules, sizeof *s->handles)) == NULL)
    st = feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
  if (st != FER_STATUS_OK) {
    a->DevicePrimaryCtxRelease(s->dev);
    dlclose(lib);
    free(s);
    return st;
  }
  *state = s;
  return FER_STATUS_OK;
}

static void cuda_close(void *state) {
  cuda_state *s = state;
  s->api.DevicePrimaryCtxRelease(s->dev);
  dlclose(s->lib);
  free(s->handles);
  free(s);
}

static fer_status cuda_granule_alloc(void *state, uint64_t slot, uint64_t granule, const char *fn) {
  cuda_state *s = state;
  s->api.CtxSetCurrent(s->ctx);
  return cuda_status(s->api.MemCreate(&s->handles[slot], granule, &s->prop, 0), fn, "cuMemCreate");
}

static fer_status cuda_granule_free(void *state, uint64_t slot, uint64_t granule, const char *fn) {
  (void)granule;
  cuda_state *s = state;
  return cuda_status(s->api.MemRelease(s->handles[slot]), fn, "cuMemRelease");
}

static fer_status cuda_reserve(void *state, uint64_t bytes, uint64_t granule, uintptr_t *base, const char *fn) {
  cuda_state *s = state;
  CUdeviceptr p = 0;
  fer_status st = cuda_status(s->api.MemAddressReserve(&p, bytes, granule, 0, 0), fn, "cuMemAddressReserve");
  *base = (uintptr_t)p;
  return st;
}

static void cuda_release(void *state, uintptr_t base, uint64_t bytes) {
  cuda_state *s = state;
  s->api.MemAddressFree((CUdeviceptr)base, bytes);
}

static fer_status cuda_map(void *state, uintptr_t addr, uint64_t granule, uint64_t slot, int32_t access, const char *fn) {
  cuda_state *s = state;
  fer_status st = cuda_status(s->api.MemMap((CUdeviceptr)addr, granule, 0, s->handles[slot], 0), fn, "cuMemMap");
  if (st != FER_STATUS_OK) return st;
  CUmemAccessDesc d;
  memset(&d, 0, sizeof d);
  d.location = s->prop.location;
  d.flags = access == FER_VMM_ACCESS_READ_ONLY ? CU_MEM_ACCESS_FLAGS_PROT_READ : CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  st = cuda_status(s->api.MemSetAccess((CUdeviceptr)addr, granule, &d, 1), fn, "cuMemSetAccess");
  if (st != FER_STATUS_OK) s->api.MemUnmap((CUdeviceptr)addr, granule);
  return st;
}

static fer_status cuda_unmap(void *state, uintptr_t addr, uint64_t granule, const char *fn) {
  cuda_state *s = state;
  return cuda_status(s->api.MemUnmap((CUdeviceptr)addr, granule), fn, "cuMemUnmap");
}

/* The driver exposes no per-allocation residency: the ledger is the account (created handles are
 * fully backed on the device). */
static fer_status cuda_physical_bytes(void *state, uint64_t live, uint64_t granule, uint64_t *out, const char *fn) {
  (void)state, (void)fn;
  *out = live * granule;
  return FER_STATUS_OK;
}

const feri_vmm_backend feri_vmm_backend_cuda = {
    .name = "cuda",
    .open = cuda_open,
    .close = cuda_close,
    .granule_alloc = cuda_granule_alloc,
    .granule_free = cuda_granule_free,
    .reserve = cuda_reserve,
    .release = cuda_release,
    .map = cuda_map,
    .unmap = cuda_unmap,
    .physical_bytes = cuda_physical_bytes,
};

#else /* no cuda.h at build time */

static fer_status cuda_open(uint64_t *granule, uint64_t max_granules, void **state, const char *fn) {
  (void)granule, (void)max_granules, (void)state;
  return feri_fail(FER_STATUS_UNSUPPORTED, "%s: built without cuda.h: no CUDA backend", fn);
}

const feri_vmm_backend feri_vmm_backend_cuda = {.name = "cuda (not built)", .open = cuda_open};

#endif
