// Teacher-forced log-likelihood with llama.cpp (scripts/model/make_perplexity_golden.sh): tokenizes
// a text file, keeps its first N_TOKENS tokens, evaluates them as one sequence with the logits of
// every position, and prints the ids, each position's negative log-likelihood of the next token,
// and the perplexity exp(mean NLL). usage: llamacpp-perplexity MODEL TEXT_FILE N_TOKENS THREADS
#include "llama.h"
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
int main(int argc, char **argv) {
  if (argc != 5) { fprintf(stderr, "usage: llamacpp-perplexity MODEL TEXT_FILE N_TOKENS THREADS\n"); return 2; }
  std::ifstream in(argv[2], std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const int n_want = atoi(argv[3]), threads = atoi(argv[4]);
  llama_backend_init();
  llama_model *model = llama_model_load_from_file(argv[1], llama_model_default_params());
  const llama_vocab *vocab = llama_model_get_vocab(model);
  std::vector<llama_token> ids(text.size() + 16);
  int n = llama_tokenize(vocab, text.data(), (int32_t)text.size(), ids.data(), (int32_t)ids.size(), false, false);
  if (n < n_want) { fprintf(stderr, "the text has %d tokens, fewer than %d\n", n, n_want); return 1; }
  ids.resize(n_want);
  auto cp = llama_context_default_params();
  cp.n_ctx = n_want; cp.n_batch = n_want; cp.n_ubatch = 512; cp.n_threads = threads; cp.n_threads_batch = threads;
  llama_context *ctx = llama_init_from_model(model, cp);
  llama_batch b = llama_batch_init(n_want, 0, 1);
  for (int i = 0; i < n_want; i++) {
    b.token[i] = ids[i]; b.pos[i] = i; b.n_seq_id[i] = 1; b.seq_id[i][0] = 0; b.logits[i] = 1;
  }
  b.n_tokens = n_want;
  if (llama_decode(ctx, b)) { fprintf(stderr, "decode failed\n"); return 1; }
  const int nv = llama_vocab_n_tokens(vocab);
  printf("ids");
  for (int i = 0; i < n_want; i++) printf(" %d", ids[i]);
  printf("\n");
  double sum = 0;
  for (int i = 0; i + 1 < n_want; i++) {
    const float *lg = llama_get_logits_ith(ctx, i);
    double mx = lg[0];
    for (int v = 1; v < nv; v++) mx = lg[v] > mx ? lg[v] : mx;
    double z = 0;
    for (int v = 0; v < nv; v++) z += std::exp((double)lg[v] - mx);
    const double nll = -((double)lg[ids[i + 1]] - mx - std::log(z));
    sum += nll;
    printf("nll %d %.6f\n", i, nll);
  }
  printf("perplexity %.6f over %d predictions\n", std::exp(sum / (n_want - 1)), n_want - 1);
  llama_batch_free(b);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
