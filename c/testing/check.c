/* check.c: failure counting for the C unit tests. */
#include "testing/check.h"

int feri_test_failures;

void feri_test_fail(const char *file, int line, const char *what) {
  feri_test_failures++;
  fprintf(stderr, "FAIL %s:%d: %s\n", file, line, what);
}

int feri_test_finish(const char *name) {
  if (feri_test_failures) {
    fprintf(stderr, "%s: %d check(s) failed\n", name, feri_test_failures);
    return 1;
  }
  printf("%s: all checks passed\n", name);
  return 0;
}
