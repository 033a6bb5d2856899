/* nccl.c: NCCL loaded at run time (nccl.h). The few declarations used are NCCL 2's stable ABI
 * (nccl.h of the toolkit: ncclUniqueId is 128 bytes, ncclFloat 7, ncclSum 0, ncclSuccess 0),
 * declared here so that the build needs no NCCL header. */
#include "comm/nccl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "cuda/cuda_ops.h"

typedef struct nccl_id {
  char internal[128];
} nccl_id;
typedef void *nccl_comm_t;
enum { NCCL_SUCCESS = 0, NCCL_FLOAT = 7, NCCL_SUM = 0 };

struct feri_nccl {
  void *lib;
  nccl_comm_t comm;
  int (*get_unique_id)(nccl_id *);
  int (*comm_init_rank)(nccl_comm_t *, int, nccl_id, int);
  int (*all_reduce)(const void *, void *, size_t, int, int, nccl_comm_t, void *);
  int (*comm_destroy)(nccl_comm_t);
  const char *(*error_string)(int);
};

static fer_status nccl_fail(const feri_nccl *n, int rc, const char *what) {
  return feri_fail(FER_STATUS_DEVICE_ERROR, "nccl: %s failed: %s (%d)", what,
                   n->error_string ? n->error_string(rc) : "an NCCL error", rc);
}

/* This rank's part: NCCL loaded and a GPU present. */
static fer_status load(feri_nccl *n, char *why, size_t cap) {
  int32_t devices = 0;
  if (fer_cuda_device_count(&devices) != FER_STATUS_OK || devices == 0) {
    snprintf(why, cap, "no CUDA device on this host");
    return FER_STATUS_NO_DEVICE;
  }
  n->lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!n->lib) n->lib = dlopen("/usr/local/cuda/lib64/libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!n->lib) {
    snprintf(why, cap, "libnccl.so.2 cannot be loaded (%s)", dlerror());
    return FER_STATUS_UNSUPPORTED;
  }
  *(void **)&n->get_unique_id = dlsym(n->lib, "ncclGetUniqueId");
  *(void **)&n->comm_init_rank = dlsym(n->lib, "ncclCommInitRank");
  *(void **)&n->all_reduce = dlsym(n->lib, "ncclAllReduce");
  *(void **)&n->comm_destroy = dlsym(n->lib, "ncclCommDestroy");
  *(void **)&n->error_string = dlsym(n->lib, "ncclGetErrorString");
  if (!n->get_unique_id || !n->comm_init_rank || !n->all_reduce || !n->comm_destroy || !n->error_string) {
    snprintf(why, cap, "libnccl.so.2 lacks an NCCL 2 entry point");
    return FER_STATUS_UNSUPPORTED;
  }
  return FER_STATUS_OK;
}

fer_status feri_nccl_create(feri_comm *c, feri_nccl **out) {
  *out = NULL;
  feri_nccl *n = calloc(1, sizeof *n);
  if (!n) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "nccl: out of memory");
  /* every rank's verdict to every rank, so that all go on or none */
  struct verdict {
    int32_t status;
    char why[124];
  } mine = {0}, *all = calloc((size_t)feri_comm_size(c), sizeof *all);
  if (!all) {
    free(n);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "nccl: out of memory");
  }
  mine.status = load(n, mine.why, sizeof mine.why);
  fer_status st = feri_comm_allgather(c, &mine, sizeof mine, all);
  for (int r = 0; r < feri_comm_size(c) && st == FER_STATUS_OK; r++)
    if (all[r].status != FER_STATUS_OK)
      st = feri_fail((fer_status)all[r].status, "nccl: rank %d of %d: %s", r, feri_comm_size(c), all[r].why);
  free(all);
  nccl_id id;
  memset(&id, 0, sizeof id);
  if (st == FER_STATUS_OK && feri_comm_rank(c) == 0) {
    const int rc = n->get_unique_id(&id);
    if (rc != NCCL_SUCCESS) memset(&id, 0, sizeof id); /* an all-zero id tells the others */
  }
  if (st == FER_STATUS_OK) st = feri_comm_broadcast(c, &id, sizeof id, 0);
  if (st == FER_STATUS_OK) {
    static const nccl_id none;
    if (memcmp(&id, &none, sizeof id) == 0) st = feri_fail(FER_STATUS_DEVICE_ERROR, "nccl: rank 0 could not draw a unique id");
  }
  if (st == FER_STATUS_OK) {
    const int rc = n->comm_init_rank(&n->comm, feri_comm_size(c), id, feri_comm_rank(c));
    if (rc != NCCL_SUCCESS) st = nccl_fail(n, rc, "ncclCommInitRank");
  }
  if (st != FER_STATUS_OK) {
    feri_error_stash e;
    feri_error_save(&e);
    feri_nccl_free(n);
    return feri_error_restore(&e, st);
  }
  *out = n;
  return FER_STATUS_OK;
}

void feri_nccl_free(feri_nccl *n) {
  if (!n) return;
  if (n->comm && n->comm_destroy) n->comm_destroy(n->comm);
  if (n->lib) dlclose(n->lib);
  free(n);
}

fer_status feri_nccl_allreduce_sum_f32(feri_nccl *n, float *dev, size_t count) {
  if (count == 0) return FER_STATUS_OK;
  if (!dev) return feri_fail(FER_STATUS_NULL_ARG, "nccl: all-reduce of a NULL buffer");
  const int rc = n->all_reduce(dev, dev, count, NCCL_FLOAT, NCCL_SUM, n->comm, NULL);
  if (rc != NCCL_SUCCESS) return nccl_fail(n, rc, "ncclAllReduce");
  return feri_cuda_sync();
}
