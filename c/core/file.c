/* file.c: feri_file_open_regular and feri_file_read_all (see file.h). */
#include "core/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/status.h"

static const char *kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

fer_status feri_file_open_regular(const char *path, const char *fn, int *out_fd,
                                  uint64_t *out_size) {
  *out_fd = -1;
  *out_size = 0;
  if (path == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: path is NULL", fn);
  char ebuf[128];
  struct stat before, sb;
  if (stat(path, &before) != 0)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: cannot open '%s': %s", fn, path,
                     strerror_r(errno, ebuf, sizeof ebuf));
  if (!S_ISREG(before.st_mode))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: '%s' is %s, not a regular file", fn, path,
                     kind_of(before.st_mode));
  /* O_NONBLOCK: should the path have become a FIFO since the stat, the open returns at once
   * instead of waiting for a writer; O_NOCTTY: nor does a terminal become ours */
  const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: cannot open '%s': %s", fn, path,
                     strerror_r(errno, ebuf, sizeof ebuf));
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_dev != before.st_dev ||
      sb.st_ino != before.st_ino) {
    close(fd);
    return feri_fail(FER_STATUS_INVALID_ARG,
                     "%s: '%s' changed while it was opened (no longer the regular file "
                     "it was)",
                     fn, path);
  }
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    const int e = errno;
    close(fd);
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: cannot read '%s': %s", fn, path,
                     strerror_r(e, ebuf, sizeof ebuf));
  }
  if (sb.st_size < 0) {
    close(fd);
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: '%s' reports a negative size", fn, path);
  }
  *out_fd = fd;
  *out_size = (uint64_t)sb.st_size;
  return FER_STATUS_OK;
}

fer_status feri_file_read_all(const char *path, const char *fn, char **out_buf, size_t *out_len) {
  *out_buf = NULL;
  *out_len = 0;
  int fd;
  uint64_t size;
  fer_status st = feri_file_open_regular(path, fn, &fd, &size);
  if (st != FER_STATUS_OK) return st;
  if (size >= SIZE_MAX) {
    close(fd);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: '%s' has %llu bytes, more than memory holds",
                     fn, path, (unsigned long long)size);
  }
  char *buf = malloc((size_t)size + 1); /* + 1: never malloc(0) */
  if (buf == NULL) {
    close(fd);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: %llu bytes for '%s'", fn,
                     (unsigned long long)size, path);
  }
  size_t len = 0;
  while (len < (size_t)size) {
    const ssize_t r = read(fd, buf + len, (size_t)size - len);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      char ebuf[128];
      const int e = errno;
      close(fd);
      free(buf);
      return feri_fail(FER_STATUS_INVALID_ARG, "%s: cannot read '%s': %s", fn, path,
                       strerror_r(e, ebuf, sizeof ebuf));
    }
    if (r == 0) break; /* the file shrank: what is there */
    len += (size_t)r;
  }
  close(fd);
  *out_buf = buf;
  *out_len = len;
  return FER_STATUS_OK;
}
