/* kernel_util.c: checks shared by the kernel entry points. */
#include "kernels/kernel_util.h"

#include "core/dtype.h"
#include "core/status.h"

#include <stdint.h>
#include <stdlib.h>

fer_status feri_require_float_dtype(fer_dtype dtype, const char *fn) {
  if (dtype == FER_DTYPE_F32 || dtype == FER_DTYPE_F16 || dtype == FER_DTYPE_BF16)
    return FER_STATUS_OK;
  return feri_fail(FER_STATUS_UNSUPPORTED, "%s: dtype %s is not supported (f32, f16, bf16 are)",
                   fn, feri_dtype_name(dtype));
}

fer_status feri_require_same_dtype(const char *fn, fer_dtype want, const char *name_a,
                                   fer_dtype a, const char *name_b, fer_dtype b) {
  if (a != want)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: %s has dtype %s, expected %s", fn, name_a,
                     feri_dtype_name(a), feri_dtype_name(want));
  if (b != want)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: %s has dtype %s, expected %s", fn, name_b,
                     feri_dtype_name(b), feri_dtype_name(want));
  return FER_STATUS_OK;
}

fer_status feri_workspace_acquire(void *workspace, size_t workspace_bytes, size_t need,
                                  const char *fn, char **out_ws, void **owned) {
  *out_ws = workspace;
  *owned = NULL;
  if (workspace != NULL) {
    if (((uintptr_t)workspace & 63u) != 0)
      return feri_fail(FER_STATUS_INVALID_ARG, "%s: workspace is not 64-byte aligned", fn);
    if (workspace_bytes < need)
      return feri_fail(FER_STATUS_BUFFER_TOO_SMALL, "%s: workspace has %zu bytes, this call needs %zu",
                       fn, workspace_bytes, need);
    return FER_STATUS_OK;
  }
  if (need == 0) return FER_STATUS_OK;
  *owned = aligned_alloc(64, (need + 63) / 64 * 64);
  if (*owned == NULL)
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: could not allocate %zu bytes of workspace", fn, need);
  *out_ws = *owned;
  return FER_STATUS_OK;
}
