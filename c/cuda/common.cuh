// common.cuh: status mapping shared by ferrite's CUDA sources.
#ifndef FERI_CUDA_COMMON_CUH
#define FERI_CUDA_COMMON_CUH

#include <cuda_runtime.h>

#include "ferrite.h"

extern "C" {
fer_status feri_fail(fer_status status, const char *fmt, ...);
void feri_error_clear(void);
}

// No driver (35) or no GPU (100) is the normal state of a CPU-only machine: NO_DEVICE, not an error.
static inline fer_status feri_cuda_status(cudaError_t e, const char *fn, const char *what) {
  if (e == cudaSuccess) return FER_STATUS_OK;
  fer_status st = (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice)
                      ? FER_STATUS_NO_DEVICE
                      : (e == cudaErrorMemoryAllocation ? FER_STATUS_OUT_OF_MEMORY
                                                        : FER_STATUS_DEVICE_ERROR);
  return feri_fail(st, "%s: %s: %s (cuda error %d)", fn, what, cudaGetErrorString(e), (int)e);
}

// Evaluates a CUDA runtime call; on failure records the message and jumps to the label.
#define FERI_CUDA_TRY(call, fn, label)                                 \
  do {                                                                 \
    cudaError_t feri_e_ = (call);                                      \
    if (feri_e_ != cudaSuccess) {                                      \
      st = feri_cuda_status(feri_e_, fn, #call);                       \
      goto label;                                                      \
    }                                                                  \
  } while (0)

// A launcher's ending: the launch's own error (bad configuration, no device) as a status; what
// the kernel hits later is feri_cuda_sync's to report.
static inline fer_status feri_cuda_launched(const char *fn) {
  return feri_cuda_status(cudaGetLastError(), fn, "kernel launch");
}

// Blocks of `threads` covering n items, capped (kernels loop with a grid stride beyond the cap).
static inline unsigned feri_cuda_blocks(int64_t n, int threads) {
  int64_t b = (n + threads - 1) / threads;
  return (unsigned)(b < 1 ? 1 : b > 65535 ? 65535 : b);
}

#endif
