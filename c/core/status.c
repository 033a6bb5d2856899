/* status.c: status texts and the per-thread last-error message. */
#include "core/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Thread-local rather than per-handle: kernels may be called with no handle at all (NULL pool),
 * and a per-thread slot cannot be disturbed by a test running on another thread. */
static _Thread_local char feri_last_message[512];

fer_status feri_fail(fer_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(feri_last_message, sizeof feri_last_message, fmt, ap);
  va_end(ap);
  if (n < 0) feri_last_message[0] = '\0';
  return status;
}

void feri_error_clear(void) { feri_last_message[0] = '\0'; }

void feri_error_save(feri_error_stash *s) { memcpy(s->text, feri_last_message, sizeof s->text); }

fer_status feri_error_restore(const feri_error_stash *s, fer_status status) {
  memcpy(feri_last_message, s->text, sizeof feri_last_message);
  return status;
}

fer_status fer_last_error_message(char *buf, size_t cap, size_t *out_len) {
  if (out_len == NULL) return FER_STATUS_NULL_ARG;
  size_t len = strlen(feri_last_message);
  *out_len = len;
  if (cap == 0) return len == 0 ? FER_STATUS_OK : FER_STATUS_BUFFER_TOO_SMALL;
  if (buf == NULL) return FER_STATUS_NULL_ARG;
  size_t n = len < cap - 1 ? len : cap - 1;
  memcpy(buf, feri_last_message, n);
  buf[n] = '\0';
  return n == len ? FER_STATUS_OK : FER_STATUS_BUFFER_TOO_SMALL;
}

const char *fer_status_str(fer_status status) {
  switch (status) {
    case FER_STATUS_OK: return "ok";
    case FER_STATUS_NULL_ARG: return "a required pointer argument is NULL";
    case FER_STATUS_INVALID_ARG: return "invalid argument";
    case FER_STATUS_BUFFER_TOO_SMALL: return "buffer too small";
    case FER_STATUS_BUSY: return "object is busy";
    case FER_STATUS_MISUSE: return "call not allowed in the object's current state";
    case FER_STATUS_SHAPE_MISMATCH: return "tensor shapes do not agree";
    case FER_STATUS_SIZE_OVERFLOW: return "size computation overflows";
    case FER_STATUS_CANCELLED: return "cancelled";
    case FER_STATUS_OUT_OF_MEMORY: return "out of memory";
    case FER_STATUS_BUDGET_EXCEEDED: return "memory budget exceeded";
    case FER_STATUS_NO_DEVICE: return "no device answers";
    case FER_STATUS_DEVICE_ERROR: return "device error";
    case FER_STATUS_UNSUPPORTED: return "unsupported in this build or on this CPU";
    case FER_STATUS_BAD_FORMAT: return "bad format";
    case FER_STATUS_CORRUPT: return "corrupt input";
    case FER_STATUS_INVALID_UTF8: return "invalid UTF-8";
    case FER_STATUS_NO_CANDIDATES: return "every logit is masked: nothing to sample";
    case FER_STATUS_TEMPLATE_ERROR: return "the chat template raised an error";
    default: return "unknown status";
  }
}
