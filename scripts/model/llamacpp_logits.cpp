// Teacher-forced logits with llama.cpp (scripts/model/make_tiny_goldens.sh): evaluates the given
// token ids as one sequence with f32 K and V and prints every position's full logits row.
// usage: llamacpp-logits MODEL THREADS ID...
#include "llama.h"
#include <cstdio>
#include <cstdlib>
#include <vector>
int main(int argc, char **argv) {
  if (argc < 4) { fprintf(stderr, "usage: llamacpp-logits MODEL THREADS ID...\n"); return 2; }
  std::vector<llama_token> ids;
  for (int i = 3; i < argc; i++) ids.push_back(atoi(argv[i]));
  const int n = (int)ids.size();
  llama_backend_init();
  llama_model *model = llama_model_load_from_file(argv[1], llama_model_default_params());
  if (!model) { fprintf(stderr, "cannot load %s\n", argv[1]); return 1; }
  auto cp = llama_context_default_params();
  cp.n_ctx = n < 64 ? 64 : n; cp.n_batch = cp.n_ctx; cp.n_ubatch = cp.n_ctx;
  cp.n_threads = cp.n_threads_batch = atoi(argv[2]);
  cp.type_k = GGML_TYPE_F32; cp.type_v = GGML_TYPE_F32;
  llama_context *ctx = llama_init_from_model(model, cp);
  llama_batch b = llama_batch_init(n, 0, 1);
  for (int i = 0; i < n; i++) { b.token[i] = ids[i]; b.pos[i] = i; b.n_seq_id[i] = 1; b.seq_id[i][0] = 0; b.logits[i] = 1; }
  b.n_tokens = n;
  if (llama_decode(ctx, b)) { fprintf(stderr, "decode failed\n"); return 1; }
  const int nv = llama_vocab_n_tokens(llama_model_get_vocab(model));
  printf("ids");
  for (int i = 0; i < n; i++) printf(" %d", ids[i]);
  printf("\nvocab %d\n", nv);
  for (int i = 0; i < n; i++) {
    const float *lg = llama_get_logits_ith(ctx, i);
    printf("logits %d", i);
    for (int v = 0; v < nv; v++) printf(" %.9g", lg[v]);
    printf("\n");
  }
  llama_batch_free(b);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
