/* ferrite.c: the `ferrite` program: `ferrite info`, `generate`, `tiny-model` and `tokenize`. */
#include <stdio.h>
#include <string.h>

#include "tools/commands.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: ferrite info [--full]\n"
          "       ferrite info MODEL.gguf\n"
          "       ferrite generate (--model PATH | --tiny [--arch llama|qwen2|qwen3]) --prompt TEXT\n"
          "                        [--chat [--system TEXT]] [--max-tokens N] [--ignore-eos]\n"
          "                        [--temperature T] [--top-k K] [--top-p P] [--min-p P] [--seed S]\n"
          "                        [--threads N] [--budget BYTES[K|M|G]] [--matmul i8|exact]\n"
          "                        [--kv-layout head-major|seq-major|token-major] [--kv-dtype f32|f16|bf16]\n"
          "                        [--plan off|unconditional|address-stable]\n"
          "         (FERRITE_* variables configure the engine too, flags win: see fer_engine_config)\n"
          "       ferrite tiny-model --arch llama|qwen2|qwen3 [--seed N] --out PATH\n"
          "       ferrite tokenize --model PATH (--text TEXT | --file PATH) [--count]\n");
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "info") == 0) return feri_cmd_info(argc - 1, argv + 1);
  if (argc >= 2 && strcmp(argv[1], "generate") == 0) return feri_cmd_generate(argc - 1, argv + 1);
  if (argc >= 2 && strcmp(argv[1], "tiny-model") == 0) return feri_cmd_tiny_model(argc - 1, argv + 1);
  if (argc >= 2 && strcmp(argv[1], "tokenize") == 0) return feri_cmd_tokenize(argc - 1, argv + 1);
  if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    usage(stdout);
    return 0;
  }
  usage(stderr);
  return 2;
}
