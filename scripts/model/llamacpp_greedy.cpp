// Greedy generation with llama.cpp (scripts/model/make_greedy_golden.sh): prints the prompt ids, then
// per step the chosen id and the top-5 logits; on stderr the speeds and peak RSS.
// usage: llamacpp-greedy MODEL PROMPT N_STEPS [THREADS (2)]
#include "llama.h"
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>
#include <algorithm>
#include <chrono>
#include <sys/resource.h>
int main(int argc, char **argv) {
  llama_backend_init();
  auto mp = llama_model_default_params();
  llama_model *model = llama_model_load_from_file(argv[1], mp);
  const llama_vocab *vocab = llama_model_get_vocab(model);
  std::vector<llama_token> ids(strlen(argv[2]) + 16);
  int n = llama_tokenize(vocab, argv[2], strlen(argv[2]), ids.data(), (int)ids.size(), false, true);
  ids.resize(n);
  int steps = atoi(argv[3]);
  const int threads = argc > 4 ? atoi(argv[4]) : 2;
  auto cp = llama_context_default_params();
  /* room for the prompt and the steps; 512 at least (what the goldens were made with) */
  cp.n_ctx = n + steps + 8 > 512 ? n + steps + 8 : 512;
  cp.n_batch = cp.n_ctx; cp.n_threads = threads; cp.n_threads_batch = threads;
  llama_context *ctx = llama_init_from_model(model, cp);
  printf("prompt");
  for (auto t : ids) printf(" %d", t);
  printf("\n");
  llama_batch b = llama_batch_get_one(ids.data(), n);
  int nv = llama_vocab_n_tokens(vocab);
  auto t_start = std::chrono::steady_clock::now(), t_first = t_start;
  for (int s = 0; s < steps; s++) {
    if (llama_decode(ctx, b)) { printf("decode failed\n"); return 1; }
    if (s == 0) t_first = std::chrono::steady_clock::now();
    float *lg = llama_get_logits_ith(ctx, -1);
    std::vector<int> idx(nv);
    for (int i = 0; i < nv; i++) idx[i] = i;
    std::partial_sort(idx.begin(), idx.begin() + 5, idx.end(), [&](int a, int c) { return lg[a] > lg[c]; });
    static llama_token tok; tok = idx[0];
    char piece[64]; int pl = llama_token_to_piece(vocab, tok, piece, 64, 0, true);
    std::string shown;
    for (int i = 0; i < pl; i++) shown += piece[i] == '\n' ? std::string("\\n") : std::string(1, piece[i]);
    printf("step %d token %d '%s' top5", s, tok, shown.c_str());
    for (int i = 0; i < 5; i++) printf(" %d:%.4f", idx[i], lg[idx[i]]);
    printf("\n");
    b = llama_batch_get_one(&tok, 1);
  }
  double dec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_first).count();
  double pre = std::chrono::duration<double>(t_first - t_start).count();
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  fprintf(stderr, "llama.cpp: prefill %d tokens at %.1f tok/s; decode %d tokens at %.1f tok/s; peak RSS %.1f MiB\n", n,
          n / pre, steps - 1, (steps - 1) / dec, ru.ru_maxrss / 1024.0);
  return 0;
}
