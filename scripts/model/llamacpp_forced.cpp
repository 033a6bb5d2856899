// Teacher-forced llama.cpp on an agreement golden's tokens (scripts/model/peer_cross_agreement.sh): per
// position the golden's token, this build's argmax and its top-2 margin. Same context parameters and
// batch shapes as llamacpp_greedy.cpp (the prompt in one batch, then one token at a time), so the
// build that made the golden reproduces it exactly.
// usage: llamacpp-forced MODEL GOLDEN
#include "llama.h"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
static void quiet(enum ggml_log_level, const char *, void *) {}
int main(int argc, char **argv) {
  llama_log_set(quiet, nullptr);
  llama_backend_init();
  llama_model *model = argc == 3 ? llama_model_load_from_file(argv[1], llama_model_default_params()) : nullptr;
  if (argc != 3 || !model) { fprintf(stderr, "usage: %s MODEL GOLDEN\n", argv[0]); return 2; }
  const int nv = llama_vocab_n_tokens(llama_model_get_vocab(model));
  FILE *f = fopen(argv[2], "r");
  if (!f) { perror(argv[2]); return 1; }
  char line[8192];
  std::vector<std::vector<int>> prompts, steps;
  while (fgets(line, sizeof line, f)) {
    if (!strncmp(line, "prompt", 6)) {
      prompts.push_back({}); steps.push_back({});
      char *p = line + 6, *e;
      for (long v; (v = strtol(p, &e, 10), e != p); p = e) prompts.back().push_back((int)v);
    } else {
      int s, t;
      if (!steps.empty() && sscanf(line, "step %d token %d", &s, &t) == 2) steps.back().push_back(t);
    }
  }
  for (size_t pi = 0; pi < prompts.size(); pi++) {
    auto ids = prompts[pi];
    int n = ids.size(), nsteps = steps[pi].size();
    auto cp = llama_context_default_params();
    cp.n_ctx = n + nsteps + 8 > 512 ? n + nsteps + 8 : 512;
    cp.n_batch = cp.n_ctx; cp.n_threads = 2; cp.n_threads_batch = 2;
    llama_context *ctx = llama_init_from_model(model, cp);
    llama_batch b = llama_batch_get_one(ids.data(), n);
    for (int s = 0; s < nsteps; s++) {
      if (llama_decode(ctx, b)) { printf("decode failed\n"); return 1; }
      const float *lg = llama_get_logits_ith(ctx, -1);
      int a = 0; for (int i = 1; i < nv; i++) if (lg[i] > lg[a]) a = i;
      float l2 = -1e30f; for (int i = 0; i < nv; i++) if (i != a && lg[i] > l2) l2 = lg[i];
      int tok = steps[pi][s];
      printf("prompt %zu step %d golden %d argmax %d margin %.4f\n", pi, s, tok, a, lg[a] - l2);
      static llama_token next; /* the batch points at it until the next decode */
      next = tok;
      b = llama_batch_get_one(&next, 1);
    }
    llama_free(ctx);
  }
  return 0;
}
