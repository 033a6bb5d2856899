/* status.h: status texts and the per-thread last-error message behind fer_last_error_message. */
#ifndef FERI_CORE_STATUS_H
#define FERI_CORE_STATUS_H

#include "ferrite.h"

/* Records a formatted message for the calling thread and returns `status`, so entry points can
 * write `return feri_fail(FER_STATUS_INVALID_ARG, "rank %d > %d", r, max);`. */
fer_status feri_fail(fer_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Clears the calling thread's message; every entry point calls it before doing any work. */
void feri_error_clear(void);

#endif
