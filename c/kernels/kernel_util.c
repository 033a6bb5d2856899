/* kernel_util.c: checks shared by the kernel entry points. */
#include "kernels/kernel_util.h"

#include "core/dtype.h"
#include "core/status.h"

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
