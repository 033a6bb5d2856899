/* kernel_util.h: checks shared by the kernel entry points. */
#ifndef FERI_KERNELS_KERNEL_UTIL_H
#define FERI_KERNELS_KERNEL_UTIL_H

#include "ferrite.h"

/* OK for F32, F16 and BF16; UNSUPPORTED naming the kernel otherwise. */
fer_status feri_require_float_dtype(fer_dtype dtype, const char *fn);

/* OK when every tensor has dtype `want`; INVALID_ARG naming the first that differs. */
fer_status feri_require_same_dtype(const char *fn, fer_dtype want, const char *name_a,
                                   fer_dtype a, const char *name_b, fer_dtype b);

/* Scratch of a kernel call: a caller's workspace is checked (64-byte aligned, at least `need`
 * bytes: INVALID_ARG / BUFFER_TOO_SMALL); a NULL workspace is allocated here when need > 0, and
 * *owned (to free) set. *out_ws is where the scratch starts (NULL when need is 0 and none given). */
fer_status feri_workspace_acquire(void *workspace, size_t workspace_bytes, size_t need,
                                  const char *fn, char **out_ws, void **owned);

/* Work per task: kernels split their element space into tasks of about this many elements, a
 * number that depends on shapes only, never on the thread count, so results cannot either. */
enum { FERI_TASK_ELEMS = 16384 };

#endif
