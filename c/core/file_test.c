/* file_test.c: feri_file_open_regular and feri_file_read_all refuse what is not a regular file
 * without blocking, and read no more than the file's size.
 * EVIDENCE: C-ABI-008 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/file.h"
#include "ferrite.h"
#include "testing/check.h"

static int message_names(const char *path) {
  char msg[512];
  size_t len;
  fer_last_error_message(msg, sizeof msg, &len);
  return len > 0 && strstr(msg, path) != NULL;
}

int main(void) {
  /* a call that blocks (a FIFO opened for reading waits for a writer) ends the test here */
  alarm(20);
  const char *tmp = getenv("TEST_TMPDIR");
  char dir[256], fifo[300], reg[300], missing[300];
  snprintf(dir, sizeof dir, "%s/ferrite-file-test-%d", tmp ? tmp : "/tmp", (int)getpid());
  CHECK(mkdir(dir, 0700) == 0);
  snprintf(fifo, sizeof fifo, "%s/fifo", dir);
  snprintf(reg, sizeof reg, "%s/regular", dir);
  snprintf(missing, sizeof missing, "%s/missing", dir);
  CHECK(mkfifo(fifo, 0600) == 0);
  FILE *f = fopen(reg, "wb");
  CHECK(f != NULL);
  fputs("0123456789", f);
  fclose(f);

  const char *bad[] = {fifo, dir, "/dev/zero", "/dev/null", missing};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int fd = 7;
    uint64_t size = 7;
    CHECK_STATUS(feri_file_open_regular(bad[i], "file_test", &fd, &size), FER_STATUS_INVALID_ARG);
    CHECK(fd == -1 && size == 0);
    CHECK(message_names(bad[i]));
    char *buf = (char *)1;
    size_t len = 7;
    CHECK_STATUS(feri_file_read_all(bad[i], "file_test", &buf, &len), FER_STATUS_INVALID_ARG);
    CHECK(buf == NULL && len == 0);
    CHECK(message_names(bad[i]));
  }
  int fd = -1;
  uint64_t size = 0;
  CHECK_STATUS(feri_file_open_regular(NULL, "file_test", &fd, &size), FER_STATUS_NULL_ARG);

  /* a regular file: opened blocking again, its size reported, its bytes read whole */
  CHECK_STATUS(feri_file_open_regular(reg, "file_test", &fd, &size), FER_STATUS_OK);
  CHECK(fd >= 0 && size == 10);
  CHECK((fcntl(fd, F_GETFL) & O_NONBLOCK) == 0);
  close(fd);
  char *buf = NULL;
  size_t len = 0;
  CHECK_STATUS(feri_file_read_all(reg, "file_test", &buf, &len), FER_STATUS_OK);
  CHECK(buf != NULL && len == 10 && memcmp(buf, "0123456789", 10) == 0);
  free(buf);

  unlink(fifo);
  unlink(reg);
  rmdir(dir);
  return feri_test_finish("file_test");
}
