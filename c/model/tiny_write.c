/* tiny_write.c: writes a seeded tiny model's GGUF file (c/model/tiny.h) for the golden scripts,
 * for the architectures `ferrite tiny-model` does not offer (gemma3).
 * usage: tiny_write ARCH SEED OUT.gguf
 *        tiny_write gemma3 SEED OUT.gguf LAYERS HEAD_DIM WINDOW   (feri_tiny_gemma3_image) */
#include <stdio.h>
#include <stdlib.h>

#include "model/tiny.h"

int main(int argc, char **argv) {
  if (argc != 4 && argc != 7) {
    fprintf(stderr, "usage: tiny_write ARCH SEED OUT.gguf | tiny_write gemma3 SEED OUT.gguf LAYERS HEAD_DIM WINDOW\n");
    return 2;
  }
  void *img = NULL;
  size_t n = 0;
  const uint64_t seed = strtoull(argv[2], NULL, 10);
  const fer_status st = argc == 7 ? feri_tiny_gemma3_image(seed, (uint32_t)strtoul(argv[4], NULL, 10),
                                                           (uint32_t)strtoul(argv[5], NULL, 10),
                                                           (uint32_t)strtoul(argv[6], NULL, 10), &img, &n)
                                  : feri_tiny_model_image(argv[1], seed, &img, &n);
  if (st != FER_STATUS_OK) {
    fprintf(stderr, "tiny_write: no tiny model for architecture '%s'\n", argv[1]);
    return 1;
  }
  FILE *f = fopen(argv[3], "wb");
  int ok = f && fwrite(img, 1, n, f) == n;
  if (f && fclose(f) != 0) ok = 0;
  free(img);
  if (!ok) {
    fprintf(stderr, "tiny_write: cannot write %s\n", argv[3]);
    return 1;
  }
  return 0;
}
