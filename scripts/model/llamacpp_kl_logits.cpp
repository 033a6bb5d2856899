// llama.cpp's logits over the faithfulness corpus (scripts/model/faithfulness.sh): every sequence
// of IDS (the lines `faithfulness --write-corpus` writes: "prose|chat N id...") evaluated from an
// empty cache with llama.cpp's default context parameters (its default K/V type and flash-attention
// choice, which it reports on stderr; n_ubatch as default), every position's logits written to OUT
// as "FERLOGIT", u32 rows, u32 n_vocab, then the rows (f32), in corpus order.
// usage: llamacpp-kl-logits MODEL THREADS IDS OUT
#include "llama.h"
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
int main(int argc, char **argv) {
  if (argc != 5) { fprintf(stderr, "usage: llamacpp-kl-logits MODEL THREADS IDS OUT\n"); return 2; }
  std::vector<std::vector<llama_token>> seqs;
  std::ifstream in(argv[3]);
  std::string line;
  size_t rows = 0, longest = 0;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string kind;
    size_t n = 0;
    if (!(ls >> kind >> n) || n == 0) { fprintf(stderr, "bad line in %s\n", argv[3]); return 1; }
    std::vector<llama_token> ids(n);
    for (size_t i = 0; i < n; i++)
      if (!(ls >> ids[i])) { fprintf(stderr, "short line in %s\n", argv[3]); return 1; }
    rows += n;
    longest = n > longest ? n : longest;
    seqs.push_back(ids);
  }
  llama_backend_init();
  llama_model *model = llama_model_load_from_file(argv[1], llama_model_default_params());
  if (!model) { fprintf(stderr, "cannot load %s\n", argv[1]); return 1; }
  auto cp = llama_context_default_params(); // its defaults: K/V type, flash attention, n_ubatch
  cp.n_ctx = (uint32_t)(longest < 64 ? 64 : longest);
  cp.n_batch = cp.n_ctx;
  cp.n_threads = cp.n_threads_batch = atoi(argv[2]);
  llama_context *ctx = llama_init_from_model(model, cp);
  if (!ctx) { fprintf(stderr, "cannot make a context\n"); return 1; }
  const uint32_t nv = (uint32_t)llama_vocab_n_tokens(llama_model_get_vocab(model));
  FILE *out = fopen(argv[4], "wb");
  if (!out) { fprintf(stderr, "cannot write %s\n", argv[4]); return 1; }
  const uint32_t hdr[2] = {(uint32_t)rows, nv};
  fwrite("FERLOGIT", 1, 8, out);
  fwrite(hdr, 4, 2, out);
  for (const auto &ids : seqs) {
    llama_memory_clear(llama_get_memory(ctx), true);
    const int n = (int)ids.size();
    llama_batch b = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) { b.token[i] = ids[i]; b.pos[i] = i; b.n_seq_id[i] = 1; b.seq_id[i][0] = 0; b.logits[i] = 1; }
    b.n_tokens = n;
    if (llama_decode(ctx, b)) { fprintf(stderr, "decode failed\n"); return 1; }
    for (int i = 0; i < n; i++) fwrite(llama_get_logits_ith(ctx, i), 4, nv, out);
    llama_batch_free(b);
  }
  if (fclose(out) != 0) { fprintf(stderr, "cannot write %s\n", argv[4]); return 1; }
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
