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

int32_t feri_test_argmax(const float *v, uint32_t n) {
  int32_t best = 0;
  for (uint32_t i = 1; i < n; i++)
    if (v[i] > v[best]) best = (int32_t)i;
  return best;
}

uint32_t feri_test_parse_ids(const char *p, int32_t *ids, uint32_t cap) {
  uint32_t n = 0;
  char *e;
  for (long v; n < cap && (v = strtol(p, &e, 10), e != p); p = e) ids[n++] = (int32_t)v;
  return n;
}

char *feri_test_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *s = NULL;
  if (fseek(f, 0, SEEK_END) == 0) {
    const long n = ftell(f);
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (s = malloc((size_t)n + 1)) != NULL) {
      *len = fread(s, 1, (size_t)n, f);
      s[*len] = 0;
    }
  }
  fclose(f);
  return s;
}
