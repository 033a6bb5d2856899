/* run.c: see run.h. */
#include "testing/run.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

static void slurp(const char *path, char *buf, size_t cap) {
  FILE *f = fopen(path, "rb");
  const size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
  buf[n] = '\0';
  if (f) fclose(f);
}

int feri_run_binary(const char *bin, const char *const *args, const char *dir, unsigned timeout_s, char *out,
                    size_t out_cap, char *err, size_t err_cap) {
  char out_path[600], err_path[600];
  snprintf(out_path, sizeof out_path, "%s/stdout", dir);
  snprintf(err_path, sizeof err_path, "%s/stderr", dir);
  const char *argv[64] = {bin};
  size_t n = 1;
  while (args[n - 1] && n < 63) argv[n] = args[n - 1], n++;
  argv[n] = NULL;
  fflush(stdout);
  fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    const int o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600), e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int in = open("/dev/null", O_RDONLY);
    if (o < 0 || e < 0 || in < 0) _exit(126);
    dup2(in, 0), dup2(o, 1), dup2(e, 2);
    alarm(timeout_s);
    execv(bin, (char *const *)argv);
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  slurp(out_path, out, out_cap);
  slurp(err_path, err, err_cap);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
