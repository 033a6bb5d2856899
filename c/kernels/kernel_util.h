/* kernel_util.h: checks shared by the kernel entry points. */
#ifndef FERI_KERNELS_KERNEL_UTIL_H
#define FERI_KERNELS_KERNEL_UTIL_H

#include "ferrite.h"

/* OK for F32, F16 and BF16; UNSUPPORTED naming the kernel otherwise. */
fer_status feri_require_float_dtype(fer_dtype dtype, const char *fn);

/* OK when every tensor has dtype `want`; INVALID_ARG naming the first that differs. */
fer_status feri_require_same_dtype(const char *fn, fer_dtype want, const char *name_a,
                                   fer_dtype a, const char *name_b, fer_dtype b);

/* Work per task: kernels split their element space into tasks of about this many elements, a
 * number that depends on shapes only, never on the thread count, so results cannot either. */
enum { FERI_TASK_ELEMS = 16384 };

#endif
