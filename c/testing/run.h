/* run.h: runs a built program as a user runs it (fork and exec), for the tests of command lines. */
#ifndef FERI_TESTING_RUN_H
#define FERI_TESTING_RUN_H

#include <stddef.h>

/* Runs bin with args (NULL-terminated, without argv[0]; at most 62) and stdin from /dev/null; its
 * stdout and stderr go through files in dir and come back NUL-terminated in out[0..out_cap) and
 * err[0..err_cap) (cut there). The child gets alarm(timeout_s), so a program that waits for ever
 * fails its case instead of hanging the test. Returns the exit status, 128 + N when killed by
 * signal N, -1 when it could not be run. */
int feri_run_binary(const char *bin, const char *const *args, const char *dir, unsigned timeout_s, char *out,
                    size_t out_cap, char *err, size_t err_cap);

#endif
