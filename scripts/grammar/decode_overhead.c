/* decode_overhead.c: what a JSON schema costs a decode step (issue 20's target: at most 10% more
 * than without). One engine, one prompt; a greedy constrained generation records a token path; then
 * rounds alternate between the same path decoded without a grammar (forward + sampler) and with one
 * (forward + the sequence's matcher accepting the token + the sampler applying its mask), each round
 * from the same prefilled prompt (rewind). Prints the mean step time of each and their ratio.
 *
 * build: cc -O2 -Iffi -Ic scripts/grammar/decode_overhead.c bazel-bin/libferrite.a -lpcre2-8 -lcjson \
 *          -lutf8proc -lm -lpthread -ldl -o decode_overhead
 * usage: decode_overhead MODEL.gguf SCHEMA_FILE [ROUNDS] [THREADS] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ferrite.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#define TRY(call)                                                                                   \
  do {                                                                                              \
    if ((call) != FER_STATUS_OK) {                                                                  \
      char msg_[512];                                                                               \
      size_t len_;                                                                                  \
      fer_last_error_message(msg_, sizeof msg_, &len_);                                             \
      fprintf(stderr, "decode_overhead: %s: %s\n", #call, msg_);                                    \
      return 1;                                                                                     \
    }                                                                                               \
  } while (0)

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: decode_overhead MODEL.gguf SCHEMA_FILE [ROUNDS] [THREADS]\n");
    return 2;
  }
  const int rounds = argc > 3 ? atoi(argv[3]) : 5;
  static char schema[1 << 16];
  FILE *f = fopen(argv[2], "r");
  if (!f) return 1;
  const size_t schema_len = fread(schema, 1, sizeof schema - 1, f);
  fclose(f);
  fer_engine_config cfg;
  fer_engine_config_init(&cfg);
  cfg.model_path = argv[1];
  cfg.n_threads = argc > 4 ? (uint32_t)atoi(argv[4]) : 2;
  cfg.max_seqs = 1;
  fer_engine *e = NULL;
  TRY(fer_engine_create(&cfg, &e));
  fer_model_info info;
  fer_engine_model_info(e, &info);
  const fer_tokenizer *tok = NULL;
  fer_engine_tokenizer(e, &tok);
  const fer_chat_message conv[2] = {{"system", ""}, {"user", "Describe a person as a JSON object."}};
  char text[4096];
  size_t text_len = 0;
  TRY(fer_engine_chat_render(e, conv, 2, 0, text, sizeof text, &text_len));
  int32_t prompt[1024];
  size_t n_prompt = 0;
  TRY(fer_tokenizer_encode(tok, text, text_len, 0, prompt, 1024, &n_prompt));
  fer_grammar_vocab *vocab = NULL;
  fer_grammar *g = NULL;
  TRY(fer_grammar_vocab_create(tok, info.n_vocab, info.eot_id >= 0 ? info.eot_id : info.eos_id, &vocab));
  TRY(fer_grammar_compile(vocab, FER_GRAMMAR_JSON_SCHEMA, schema, schema_len, 0, &g));
  fer_grammar_vocab_info vi;
  fer_grammar_vocab_get_info(vocab, &vi);
  fer_sampling_params sp;
  fer_sampling_params_init(&sp);
  sp.temperature = 0; /* greedy */
  fer_sampler *plain = NULL, *masked = NULL;
  TRY(fer_sampler_create(&sp, &plain));
  TRY(fer_sampler_create(&sp, &masked));
  fer_engine_seq *seq = NULL;
  TRY(fer_engine_seq_create(e, (uint32_t)n_prompt + 512, &seq));
  float *logits = malloc(sizeof *logits * info.n_vocab);
  int32_t path[512];
  size_t n = 0;
  /* the path: greedy under the grammar until its end */
  TRY(fer_engine_prefill(seq, prompt, n_prompt, logits, info.n_vocab));
  TRY(fer_engine_seq_set_grammar(seq, g));
  fer_matcher *m = NULL;
  TRY(fer_engine_seq_matcher(seq, &m));
  TRY(fer_sampler_set_matcher(masked, m));
  for (;;) {
    fer_sampling_context ctx = {prompt, n_prompt, path, n};
    int32_t t = -1;
    TRY(fer_sampler_sample(masked, logits, info.n_vocab, &ctx, &t, NULL));
    if (t == vi.eos_id || n == 511) break;
    path[n++] = t;
    TRY(fer_engine_decode(e, &seq, &t, 1, logits, info.n_vocab));
  }
  double sum_plain = 0, sum_masked = 0;
  for (int r = 0; r < rounds; r++) {
    for (int with = 0; with < 2; with++) {
      /* back to the prompt less its last token, which is run again for the first logits; the
       * grammar from the first generated token on */
      TRY(fer_engine_seq_set_grammar(seq, NULL));
      TRY(fer_engine_seq_rewind(seq, (uint32_t)n_prompt - 1));
      TRY(fer_engine_prefill(seq, prompt + n_prompt - 1, 1, logits, info.n_vocab));
      TRY(fer_engine_seq_set_grammar(seq, with ? g : NULL));
      m = NULL;
      TRY(fer_engine_seq_matcher(seq, &m));
      TRY(fer_sampler_set_matcher(masked, m));
      const double t0 = now_s();
      for (size_t i = 0; i < n; i++) {
        fer_sampling_context ctx = {prompt, n_prompt, path, i};
        int32_t t = -1;
        TRY(fer_sampler_sample(with ? masked : plain, logits, info.n_vocab, &ctx, &t, NULL));
        TRY(fer_engine_decode(e, &seq, &path[i], 1, logits, info.n_vocab));
      }
      const double dt = now_s() - t0;
      if (with) sum_masked += dt;
      else sum_plain += dt;
    }
  }
  printf("decode_overhead: %zu-token path, %d rounds: %.3f ms per step without a grammar, %.3f ms with; ratio %.3f\n", n,
         rounds, 1e3 * sum_plain / ((double)n * rounds), 1e3 * sum_masked / ((double)n * rounds), sum_masked / sum_plain);
  fer_sampler_free(plain), fer_sampler_free(masked);
  fer_engine_seq_free(seq);
  fer_grammar_free(g);
  fer_grammar_vocab_free(vocab);
  fer_engine_free(e);
  free(logits);
  return 0;
}
