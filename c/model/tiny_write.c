/* tiny_write.c: writes a seeded tiny model's GGUF file (c/model/tiny.h) for the golden scripts,
 * for the architectures `ferrite tiny-model` does not offer (gemma3).
 * usage: tiny_write ARCH SEED OUT.gguf */
#include <stdio.h>
#include <stdlib.h>

#include "model/tiny.h"

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: tiny_write ARCH SEED OUT.gguf\n");
    return 2;
  }
  void *img = NULL;
  size_t n = 0;
  if (feri_tiny_model_image(argv[1], strtoull(argv[2], NULL, 10), &img, &n) != FER_STATUS_OK) {
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
