/* tiny_model.c: `ferrite tiny-model --arch ARCH [--seed N] --out PATH` writes the seeded tiny model
 * (c/model/tiny.h) of an architecture to a GGUF file, so other programs (llama.cpp, in
 * scripts/model/make_tiny_goldens.sh) can run exactly the model ferrite's tests run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferrite.h"
#include "model/tiny.h"
#include "tools/commands.h"

int feri_cmd_tiny_model(int argc, char **argv) {
  const char *arch = "llama", *path = NULL;
  unsigned long long seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--arch") == 0) arch = argv[i + 1];
    else if (strcmp(argv[i], "--out") == 0) path = argv[i + 1];
    else if (strcmp(argv[i], "--seed") == 0) seed = strtoull(argv[i + 1], NULL, 10);
    else path = NULL, i = argc; /* unknown option: refuse below */
  }
  if (!path || argc % 2 == 0) {
    fprintf(stderr, "usage: ferrite tiny-model --arch llama|qwen2|qwen3 [--seed N] --out PATH\n");
    return 2;
  }
  void *img = NULL;
  size_t n = 0;
  if (feri_tiny_model_image(arch, seed, &img, &n) != FER_STATUS_OK) {
    char msg[256];
    size_t len;
    fer_last_error_message(msg, sizeof msg, &len);
    fprintf(stderr, "ferrite tiny-model: %s\n", msg);
    return 1;
  }
  FILE *f = fopen(path, "wb");
  const int ok = f && fwrite(img, 1, n, f) == n;
  if (f && fclose(f) != 0) return 1;
  free(img);
  if (!ok) {
    fprintf(stderr, "ferrite tiny-model: cannot write %s\n", path);
    return 1;
  }
  fprintf(stderr, "wrote %s (%zu bytes, %s, seed %llu)\n", path, n, arch, seed);
  return 0;
}
