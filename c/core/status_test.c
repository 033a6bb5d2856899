/* status_test.c: status texts and the per-thread last-error message.
 * EVIDENCE: C-ABI-006 */
#include <string.h>

#include "ferrite.h"
#include "testing/check.h"

int main(void) {
  const fer_status known[] = {
      FER_STATUS_OK,          FER_STATUS_NULL_ARG,        FER_STATUS_INVALID_ARG,
      FER_STATUS_BUFFER_TOO_SMALL, FER_STATUS_BUSY,       FER_STATUS_MISUSE,
      FER_STATUS_SHAPE_MISMATCH,   FER_STATUS_SIZE_OVERFLOW, FER_STATUS_OUT_OF_MEMORY,
      FER_STATUS_BUDGET_EXCEEDED,  FER_STATUS_NO_DEVICE,  FER_STATUS_DEVICE_ERROR,
      FER_STATUS_UNSUPPORTED,      FER_STATUS_BAD_FORMAT, FER_STATUS_CORRUPT,
      FER_STATUS_INVALID_UTF8, FER_STATUS_NO_CANDIDATES, FER_STATUS_CANCELLED,
      FER_STATUS_TEMPLATE_ERROR};
  const size_t n = sizeof known / sizeof known[0];
  for (size_t i = 0; i < n; i++) {
    CHECK(strcmp(fer_status_str(known[i]), "unknown status") != 0);
    for (size_t k = 0; k < i; k++) CHECK(strcmp(fer_status_str(known[i]), fer_status_str(known[k])) != 0);
  }
  CHECK(strcmp(fer_status_str(12345), "unknown status") == 0);
  CHECK(fer_abi_version() == FER_ABI_VERSION);

  char buf[256];
  size_t len = 99;
  CHECK_STATUS(fer_tensor_check(NULL), FER_STATUS_NULL_ARG);
  CHECK_STATUS(fer_last_error_message(buf, sizeof buf, &len), FER_STATUS_OK);
  CHECK(len > 0 && strlen(buf) == len && strstr(buf, "NULL") != NULL);
  /* Truncation: the needed length is reported, the buffer stays NUL-terminated. */
  char small[4];
  size_t len2 = 0;
  CHECK_STATUS(fer_last_error_message(small, sizeof small, &len2), FER_STATUS_BUFFER_TOO_SMALL);
  CHECK(len2 == len && strlen(small) == 3);
  CHECK_STATUS(fer_last_error_message(NULL, 0, &len2), FER_STATUS_BUFFER_TOO_SMALL);
  CHECK_STATUS(fer_last_error_message(buf, sizeof buf, NULL), FER_STATUS_NULL_ARG);
  /* A successful call clears the message. */
  size_t sz = 0;
  CHECK_STATUS(fer_dtype_size(FER_DTYPE_F32, &sz), FER_STATUS_OK);
  CHECK(sz == 4);
  CHECK_STATUS(fer_last_error_message(buf, sizeof buf, &len), FER_STATUS_OK);
  CHECK(len == 0 && buf[0] == '\0');
  CHECK_STATUS(fer_dtype_size(FER_DTYPE_Q4_0, &sz), FER_STATUS_UNSUPPORTED);
  CHECK_STATUS(fer_dtype_size(77, &sz), FER_STATUS_INVALID_ARG);
  CHECK(strstr(fer_build_info(), "ferrite") != NULL);
  return feri_test_finish("status_test");
}
