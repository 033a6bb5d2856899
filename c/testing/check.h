/* check.h: the assertion helpers of ferrite's C unit tests. A failed check prints where and what,
 * and the test's exit status counts the failures; a test that cannot run reports SKIPPED. */
#ifndef FERI_TESTING_CHECK_H
#define FERI_TESTING_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ferrite.h"

extern int feri_test_failures;

void feri_test_fail(const char *file, int line, const char *what);

#define CHECK(cond) \
  do {              \
    if (!(cond)) feri_test_fail(__FILE__, __LINE__, #cond); \
  } while (0)

/* Checks a fer_status against an expected code, printing both and the last-error message. */
#define CHECK_STATUS(call, want)                                                             \
  do {                                                                                       \
    fer_status feri_got_ = (call);                                                           \
    if (feri_got_ != (want)) {                                                               \
      char feri_msg_[512];                                                                   \
      size_t feri_len_;                                                                      \
      fer_last_error_message(feri_msg_, sizeof feri_msg_, &feri_len_);                       \
      fprintf(stderr, "  got status %d (%s), want %d; message: %s\n", (int)feri_got_,        \
              fer_status_str(feri_got_), (int)(want), feri_msg_);                            \
      feri_test_fail(__FILE__, __LINE__, #call);                                             \
    }                                                                                        \
  } while (0)

/* The path of a file the setup script fetched (scripts/fetch-test-data.sh): in $FERRITE_DATA_DIR,
 * else ~/.cache/ferrite of the user (Bazel points HOME elsewhere, so the account's home is tried
 * too). false when it is not there; the caller then prints a line starting "SKIPPED". */
bool feri_test_data_path(const char *name, char *out, size_t cap);

/* The whole file at path, NUL-terminated (malloc'd: free it), its length in *len; NULL when it
 * cannot be read. */
char *feri_test_read_file(const char *path, size_t *len);

/* Index of the largest of v[0..n) (the first on ties): greedy decoding in the model tests. */
int32_t feri_test_argmax(const float *v, uint32_t n);

/* Parses decimal ids separated by spaces from p ("1 2 3"), at most cap; returns how many (the
 * reference files' "prompt" and "ids" lines). */
uint32_t feri_test_parse_ids(const char *p, int32_t *ids, uint32_t cap);

/* Ends main: prints a summary, returns the exit status. */
int feri_test_finish(const char *name);

#endif
