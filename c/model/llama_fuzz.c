/* llama_fuzz.c: libFuzzer harness of the model loader (scripts/fuzz-model.sh): arbitrary bytes as a
 * GGUF model (architectures llama, qwen2, qwen3, gemma3); a model that loads and is small runs a
 * two-token prefill and a one-token step through the forward pass. With FERI_FUZZ_SEED_MAIN it
 * writes seeds (the tiny models of each architecture, and tiny gemma3 models with windows of 1,
 * 2 and none, so the sliding window bites within the three tokens) into a directory instead. */
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
  const uint64_t qd = (uint64_t)c->n_head * c->head_dim;
  uint64_t work = (uint64_t)c->n_layer * (c->n_embd * (c->n_ff + qd) + qd * c->n_head) + (uint64_t)c->n_vocab * c->n_embd;
  if (work < (1u << 22)) {
    feri_llama_seq *s = NULL;
    float *logits = malloc((size_t)c->n_vocab * sizeof(float));
    if (logits && feri_llama_seq_create(m, 4, NULL, &s) == FER_STATUS_OK) {
      const int32_t ids[2] = {0, (int32_t)(c->n_vocab - 1)};
      if (feri_llama_forward(s, NULL, ids, 2, logits) == FER_STATUS_OK) feri_llama_forward(s, NULL, ids, 1, logits);
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
  static const char *const archs[3] = {"llama", "qwen2", "qwen3"};
  for (uint64_t seed = 1; seed <= 6; seed++) {
    void *img;
    size_t n;
    const char *arch = archs[(seed - 1) % 3];
    if (feri_tiny_model_image(arch, seed, &img, &n) != FER_STATUS_OK) return 1;
    char path[4096];
    snprintf(path, sizeof path, "%s/tiny-%s-%llu.gguf", argv[1], arch, (unsigned long long)seed);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(img, 1, n, f) != n || fclose(f) != 0) return 1;
    free(img);
  }
  /* under the fuzzer's 128 KiB inputs (the 6-layer tiny gemma3 is 340 KB): two local layers with
   * windows 1, 2 and 16, and two global ones (window 0) */
  static const struct { uint32_t layers, head_dim, window; } gemma[4] = {{2, 16, 16}, {2, 16, 1}, {2, 8, 2}, {2, 16, 0}};
  for (int i = 0; i < 4; i++) {
    void *img;
    size_t n;
    if (feri_tiny_gemma3_image((uint64_t)i + 1, gemma[i].layers, gemma[i].head_dim, gemma[i].window, &img, &n) !=
        FER_STATUS_OK)
      return 1;
    char path[4096];
    snprintf(path, sizeof path, "%s/tiny-gemma3-%d.gguf", argv[1], i);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(img, 1, n, f) != n || fclose(f) != 0) return 1;
    free(img);
  }
  return 0;
}
#endif
