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

/* Keeps the calling thread's message across clean-up code that calls entry points (which clear
 * it): stash before, restore after; restore returns `status`. */
typedef struct feri_error_stash {
  char text[512];
} feri_error_stash;
void feri_error_save(feri_error_stash *s);
fer_status feri_error_restore(const feri_error_stash *s, fer_status status);

#endif
