/* probe_position.c: ferrite's logits at one teacher-forced position of an agreement golden
 * (scripts/model/make_agreement_golden.sh's format) on the 8-bit and the exact route, each with f16
 * and f32 KV, beside llama.cpp's top five from the golden: to tell a kernel error from a near-tie
 * that the 8-bit rounding of activations decides either way (docs/CLAIMS.md C-ENG-102).
 *
 * build: cc -O2 -Iffi -Ic scripts/model/probe_position.c bazel-bin/libferrite.a \
 *          -lpcre2-8 -lcjson -lutf8proc -lm -lpthread -ldl -o probe_position
 * usage: probe_position MODEL.gguf AGREEMENT.txt PROMPT(1-based) STEP TOKEN_A TOKEN_B */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ferrite.h"
#include "model/llama.h"
int main(int argc, char **argv) {
  if (argc != 7) {
    fprintf(stderr, "usage: probe_position MODEL.gguf AGREEMENT.txt PROMPT STEP TOKEN_A TOKEN_B\n");
    return 2;
  }
  const char *model = argv[1], *gold = argv[2];
  int P = atoi(argv[3]), S = atoi(argv[4]);
  int ta = atoi(argv[5]), tb = atoi(argv[6]);
  if (P < 1 || S < 0 || S > 63 || ta < 0 || tb < 0) {
    fprintf(stderr, "probe_position: PROMPT from 1, STEP 0 .. 63, tokens >= 0\n");
    return 2;
  }
  FILE *f = fopen(gold, "r");
  if (!f) {
    perror(gold);
    return 2;
  }
  char line[8192];
  int prompts = 0;
  int32_t prompt[256];
  int np = 0;
  int32_t toks[64] = {0};
  while (fgets(line, sizeof line, f)) {
    if (!strncmp(line, "prompt", 6)) {
      prompts++;
      if (prompts == P) {
        np = 0;
        char *p = line + 6;
        char *e;
        while (np < 256) {
          long v = strtol(p, &e, 10);
          if (e == p) break;
          prompt[np++] = (int32_t)v;
          p = e;
        }
      }
      continue;
    }
    int st, tok;
    if (prompts == P && sscanf(line, "step %d token %d", &st, &tok) == 2 && st >= 0 && st < 64) {
      toks[st] = tok;
      if (st == S) {
        printf("golden: %s", strstr(line, "top5"));
      }
    }
  }
  for (int mode = 0; mode < 4; mode++) {
    feri_llama *m;
    if (feri_llama_open(model, &m)) {
      printf("open fail\n");
      return 1;
    }
    feri_llama_set_matmul(m, mode & 1 ? FERI_MATMUL_EXACT : FERI_MATMUL_I8);
    feri_llama_seq_options so = feri_llama_seq_defaults();
    so.dtype = (mode & 2) ? FER_DTYPE_F32 : FER_DTYPE_F16;
    feri_llama_seq *s;
    feri_llama_seq_create(m, np + 70, &so, &s);
    uint32_t V = feri_llama_config_of(m)->n_vocab;
    if ((uint32_t)ta >= V || (uint32_t)tb >= V) {
      fprintf(stderr, "probe_position: tokens must be below the vocabulary's %u\n", V);
      return 2;
    }
    float *lg = malloc(V * 4);
    feri_llama_forward(s, NULL, prompt, np, lg);
    for (int st = 1; st <= S; st++) feri_llama_forward(s, NULL, &toks[st - 1], 1, lg);
    int best = 0;
    for (uint32_t i = 1; i < V; i++)
      if (lg[i] > lg[best]) best = i;
    printf("%s %s: argmax %d; logit[%d] %.4f logit[%d] %.4f (a-b %.4f)\n",
           mode & 1 ? "exact" : "i8   ", mode & 2 ? "f32KV" : "f16KV", best, ta, lg[ta], tb, lg[tb],
           lg[ta] - lg[tb]);
    feri_llama_seq_free(s);
    feri_llama_close(m);
    free(lg);
  }
}
