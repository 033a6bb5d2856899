/* file.h: opening the files a loader reads by path (GGUF models, tokenizer.json).
 *
 * Every loader that takes a path goes through here, so that none of them can block or read for
 * ever on something that is not a regular file: a FIFO without a writer blocks open() and read(),
 * /dev/zero never ends, a directory cannot be read at all. */
#ifndef FERI_CORE_FILE_H
#define FERI_CORE_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "ferrite.h"

/* Opens path read-only (close-on-exec) when it names a regular file (symbolic links followed),
 * and reports its size. Anything else (missing, a directory, a FIFO, a socket, a device) is
 * INVALID_ARG with a message "<fn>: '<path>' ..." saying why, and nothing is left open. The type
 * is checked with stat() before the open, so a FIFO or device is never opened; the open itself
 * uses O_NONBLOCK and the opened file is checked again with fstat() (same file, still regular), so
 * a path swapped for a FIFO in between cannot block either. O_NONBLOCK is cleared before return.
 * On failure *out_fd is -1 and *out_size 0. */
fer_status feri_file_open_regular(const char *path, const char *fn, int *out_fd,
                                  uint64_t *out_size);

/* Reads the whole regular file at path (feri_file_open_regular) into a malloc'd buffer: at most the
 * size fstat reported at open, whatever the file does while it is read (a file that grows is read
 * to that size; one that shrinks gives what is there). *out_buf is NULL and *out_len 0 on failure
 * (INVALID_ARG as above or for a read error, OUT_OF_MEMORY). An empty file gives a non-NULL buffer
 * of length 0. The caller frees *out_buf. */
fer_status feri_file_read_all(const char *path, const char *fn, char **out_buf, size_t *out_len);

#endif
