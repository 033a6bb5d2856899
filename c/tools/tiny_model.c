/* tiny_model.c: `ferrite tiny-model [--arch ARCH] [--seed N] --out PATH` writes the seeded tiny model
 * (c/model/tiny.h) of an architecture to a GGUF file, so other programs (llama.cpp, in
 * scripts/model/make_tiny_goldens.sh) can run exactly the model ferrite's tests run. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferrite.h"
#include "model/tiny.h"
#include "tools/args.h"
#include "tools/commands.h"

const char feri_tiny_model_usage[] =
    "ferrite tiny-model [--arch llama|qwen2|qwen3] [--seed N] --out PATH\n"
    "  (--arch llama and --seed 1 by default; N in 0..18446744073709551615)\n";

static const feri_arg_choice ARCHES[] = {{"llama", 0}, {"qwen2", 1}, {"qwen3", 2}, {NULL, 0}};

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "ferrite tiny-model: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, " (see ferrite tiny-model --help)\n");
  va_end(ap);
  return 2;
}

int feri_cmd_tiny_model(int argc, char **argv) {
  static const char C[] = "tiny-model";
  const char *arch = "llama", *path = NULL;
  uint64_t seed = 1;
  for (int i = 1; i < argc; i++) {
    const char *k = argv[i];
    if (feri_arg_is_help(k)) {
      feri_arg_usage(stdout, feri_tiny_model_usage, true);
      return 0;
    }
    if (strcmp(k, "--arch") != 0 && strcmp(k, "--out") != 0 && strcmp(k, "--seed") != 0)
      return usage_error("%s \"%s\"", k[0] == '-' ? "unknown option" : "unexpected argument", k);
    if (i + 1 >= argc) return usage_error("%s needs a value", k);
    const char *v = argv[++i];
    int32_t a = 0;
    if (strcmp(k, "--arch") == 0) {
      if (!feri_arg_pick(C, k, v, ARCHES, &a)) return 2;
      arch = ARCHES[a].name;
    } else if (strcmp(k, "--seed") == 0) {
      if (!feri_arg_unsigned(C, k, v, 0, UINT64_MAX, &seed)) return 2;
    } else {
      path = v;
    }
  }
  if (!path) return usage_error("--out is required");
  void *img = NULL;
  size_t n = 0;
  if (feri_tiny_model_image(arch, seed, &img, &n) != FER_STATUS_OK) {
    char msg[256];
    size_t len;
    fer_last_error_message(msg, sizeof msg, &len);
    fprintf(stderr, "ferrite tiny-model: %s\n", msg);
    return 1;
  }
  errno = 0;
  FILE *f = fopen(path, "wb");
  int ok = f && fwrite(img, 1, n, f) == n;
  ok = (f && fclose(f) == 0) && ok;
  free(img);
  if (!ok) {
    fprintf(stderr, "ferrite tiny-model: --out \"%s\": cannot write it: %s\n", path, errno ? strerror(errno) : "short write");
    return 1;
  }
  fprintf(stderr, "wrote %s (%zu bytes, %s, seed %llu)\n", path, n, arch, (unsigned long long)seed);
  return 0;
}
