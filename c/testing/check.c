/* check.c: failure counting for the C unit tests. */
#include "testing/check.h"

#include <pwd.h>
#include <stdlib.h>
#include <unistd.h>

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

bool feri_test_data_path(const char *name, char *out, size_t cap) {
  const char *env = getenv("FERRITE_DATA_DIR");
  if (env != NULL && env[0] != '\0') {
    snprintf(out, cap, "%s/%s", env, name);
    return access(out, R_OK) == 0;
  }
  const char *homes[2] = {getenv("HOME"), NULL};
  struct passwd *pw = getpwuid(getuid());
  if (pw != NULL) homes[1] = pw->pw_dir;
  for (int i = 0; i < 2; i++) {
    if (homes[i] == NULL) continue;
    snprintf(out, cap, "%s/.cache/ferrite/%s", homes[i], name);
    if (access(out, R_OK) == 0) return true;
  }
  return false;
}
