/* demo_answer_test.c: `make run`'s question as `ferrite generate --chat` asks it (system "You are a
 * helpful assistant.", user "What is the capital of France?", greedy, the engine's defaults) on
 * the demo's file, SmolLM2-135M-Instruct Q8_0: the answer names Paris (claim C-RUN-001). The
 * engine's routes give the same bits on every ISA level (C-Q-008, C-ATT-003), so one
 * CPU's answer is every CPU's. The first token's
 * margin (top-1 minus top-2 logit) is printed for every SmolLM2 file setup makes, as the measure
 * of how robust the answer is (the exact route's beside it on Q8_0 and Q4_1). A sanitizer build asks
 * the demo file only. SKIPPED without the files.
 * EVIDENCE: C-RUN-001 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferrite.h"
#include "testing/check.h"

enum { MAX_NEW = 64 };

static const char *const DEMO_FILE = "smollm2-135m-instruct-q8_0.gguf";

/* Greedy answer to the demo question into text (NUL-terminated); the first step's margin and
 * top token in *margin, *first. 1 on success. */
static int answer(const char *path, fer_matmul_mode matmul, char *text, size_t cap, double *margin, int32_t *first) {
  fer_engine_config cfg;
  fer_engine_config_init(&cfg);
  cfg.model_path = path;
  cfg.n_threads = 1; /* the same bits at any count; Bazel runs two tests at once on two cores */
  cfg.max_seqs = 1;
  cfg.matmul = matmul;
  fer_engine *e = NULL;
  CHECK_STATUS(fer_engine_create(&cfg, &e), FER_STATUS_OK);
  if (e == NULL) return 0;
  fer_model_info info;
  const fer_tokenizer *tok = NULL;
  CHECK_STATUS(fer_engine_model_info(e, &info), FER_STATUS_OK);
  CHECK_STATUS(fer_engine_tokenizer(e, &tok), FER_STATUS_OK);
  const fer_chat_message msgs[2] = {{"system", "You are a helpful assistant."},
                                    {"user", "What is the capital of France?"}};
  char prompt[1024];
  size_t len = 0, n = 0;
  int32_t ids[256], out[MAX_NEW];
  CHECK_STATUS(fer_engine_chat_render(e, msgs, 2, FER_CHAT_ADD_GENERATION_PROMPT, prompt, sizeof prompt, &len),
               FER_STATUS_OK);
  CHECK_STATUS(fer_tokenizer_encode(tok, prompt, len, FER_ENCODE_ADD_SPECIAL, ids, 256, &n), FER_STATUS_OK);
  float *logits = malloc(info.n_vocab * sizeof *logits);
  fer_engine_seq *seq = NULL;
  CHECK_STATUS(fer_engine_seq_create(e, 512, &seq), FER_STATUS_OK);
  int n_out = 0, ok = logits && seq;
  if (ok) ok = fer_engine_prefill(seq, ids, n, logits, info.n_vocab) == FER_STATUS_OK;
  const int32_t end = info.eot_id >= 0 ? info.eot_id : info.eos_id;
  for (int step = 0; ok && step < MAX_NEW; step++) {
    int32_t best = 0, second = -1;
    for (uint32_t v = 1; v < info.n_vocab; v++) {
      if (logits[v] > logits[best]) {
        second = best;
        best = (int32_t)v;
      } else if (second < 0 || logits[v] > logits[second]) {
        second = (int32_t)v;
      }
    }
    if (step == 0) {
      *margin = (double)logits[best] - (double)logits[second];
      *first = best;
    }
    if (best == end || best == info.eos_id) break;
    out[n_out++] = best;
    ok = fer_engine_decode(e, &seq, &best, 1, logits, info.n_vocab) == FER_STATUS_OK;
  }
  CHECK(ok);
  size_t tl = 0;
  if (ok) ok = fer_tokenizer_decode(tok, out, (size_t)n_out, FER_DECODE_SKIP_SPECIAL, text, cap - 1, &tl) == FER_STATUS_OK;
  text[ok ? tl : 0] = '\0';
  fer_engine_seq_free(seq);
  fer_engine_free(e);
  free(logits);
  return ok;
}

int main(void) {
  static const char *const files[] = {"smollm2-135m-instruct-q8_0.gguf",   "smollm2-135m-instruct-q4_1.gguf",
                                      "smollm2-135m-instruct-q4_k_m.gguf", "smollm2-135m-instruct-q5_k_m.gguf",
                                      "smollm2-135m-instruct-q6_k.gguf",   "smollm2-135m-instruct-q2_k.gguf",
                                      "smollm2-135m-instruct-iq4_xs.gguf"};
  char path[4096], text[4096];
  int ran = 0;
  for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
    if (!feri_test_data_path(files[f], path, sizeof path)) {
      printf("SKIPPED: demo_answer_test: %s not found ($FERRITE_DATA_DIR or ~/.cache/ferrite)\n", files[f]);
      continue;
    }
    const int demo = strcmp(files[f], DEMO_FILE) == 0;
    double margin = NAN;
    int32_t first = -1;
    if (!answer(path, FER_MATMUL_I8, text, sizeof text, &margin, &first)) continue;
    ran++;
    printf("%s%s: first token %d, margin %.3f: %s\n", files[f], demo ? " (make run's file)" : "", first, margin, text);
    /* the exact route (3x slower) beside the two files the demo has run on */
    if (f < 2) {
      double exact_margin = NAN;
      int32_t exact_first = -1;
      char exact_text[4096];
      if (answer(path, FER_MATMUL_EXACT, exact_text, sizeof exact_text, &exact_margin, &exact_first))
        printf("  exact route: first token %d, margin %.3f: %.60s\n", exact_first, exact_margin, exact_text);
    }
#if defined(__SANITIZE_ADDRESS__)
    printf("SKIPPED: demo_answer_test: the other files in a sanitizer build (minutes there)\n");
    break;
#endif
    if (demo) {
      CHECK(strstr(text, "Paris") != NULL);
    }
  }
  if (ran == 0) printf("SKIPPED: demo_answer_test: no SmolLM2 file\n");
  return feri_test_finish("demo_answer_test");
}
