/* llama_fuzz.c: libFuzzer harness of the model loader (scripts/fuzz-model.sh): arbitrary bytes as a
 * GGUF model; a model that loads and is small runs one token through the forward pass. With
 * FERI_FUZZ_SEED_MAIN it writes seeds (tiny models) into a directory instead. */
#include <stdio.h>
#include <stdlib.h>

#include "model/llama.h"
#include "model/tiny.h"

#ifndef FERI_FUZZ_SEED_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  feri_llama *m = NULL;
  if (feri_llama_open_image(data, size, &m) != FER_STATUS_OK) {
    if (m) abort();
    return 0;
  }
  const feri_llama_config *c = feri_llama_config_of(m);
  uint64_t work = (uint64_t)c->n_layer * c->n_embd * (c->n_ff + c->n_embd) + (uint64_t)c->n_vocab * c->n_embd;
  if (work < (1u << 22)) {
    feri_llama_seq *s = NULL;
    float *logits = malloc((size_t)c->n_vocab * sizeof(float));
    if (logits && feri_llama_seq_create(m, 4, NULL, &s) == FER_STATUS_OK) {
      int32_t id = 0;
      feri_llama_forward(s, NULL, &id, 1, logits);
    }
    feri_llama_seq_free(s);
    free(logits);
  }
  feri_llama_close(m);
  return 0;
}
#else
int main(int argc, char **argv) {
  if (argc != 2) return 2;
  for (uint64_t seed = 1; seed <= 3; seed++) {
    void *img;
    size_t n;
    if (feri_tiny_llama_image(seed, &img, &n) != FER_STATUS_OK) return 1;
    char path[4096];
    snprintf(path, sizeof path, "%s/tiny-%llu.gguf", argv[1], (unsigned long long)seed);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(img, 1, n, f) != n || fclose(f) != 0) return 1;
    free(img);
  }
  return 0;
}
#endif
