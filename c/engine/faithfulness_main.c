/* faithfulness: measures routes of the forward pass against the exact one (faithfulness.h) on a
 * model file; scripts/model/faithfulness.sh runs it with llama.cpp's logits beside ferrite's.
 *
 * usage: faithfulness --model M.gguf [--prose FILE --n-prose N] [--chats FILE [--max-chats N]]
 *                     [--chat-template FILE.jinja] [--corpus IDS.txt] [--write-corpus IDS.txt] [--routes R,R,...]
 *                     [--peer NAME=LOGITS.bin]... [--threads N]
 * A route is MATMUL/KV: i8 or exact, and f32, f16, bf16 or q8_0 (default: every pair but
 * exact/f32, the reference). With --write-corpus and neither --routes nor --peer, only the corpus is
 * written. --corpus reads the ids --write-corpus wrote (the llama.cpp helper's input).
 * Prints a line per route: its positions, KL mean, p99, max, top-1 agreement, over all, the
 * prose and the conversations. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/faithfulness.h"
#include "model/llama.h"

enum { MAX_ROUTES = 16 };

static int usage(void) {
  fprintf(stderr,
          "usage: faithfulness --model M.gguf [--prose FILE --n-prose N] [--chats FILE [--max-chats N]]\n"
          "                    [--chat-template FILE.jinja] [--corpus IDS.txt] [--write-corpus IDS.txt] [--routes i8/f32,exact/f16,...]\n"
          "                    [--peer NAME=LOGITS.bin]... [--threads N]\n");
  return 2;
}

static int parse_u32(const char *s, uint32_t *out) {
  char *e;
  const unsigned long v = strtoul(s, &e, 10);
  if (*s == '\0' || *e != '\0' || v > 1000000) return 0;
  *out = (uint32_t)v;
  return 1;
}

/* "i8/f16" -> matmul, KV dtype */
static int parse_route(const char *s, feri_faith_route *r) {
  static const struct { const char *name; int32_t matmul; fer_dtype kv; } known[] = {
      {"i8/f32", FERI_MATMUL_I8, FER_DTYPE_F32},       {"i8/f16", FERI_MATMUL_I8, FER_DTYPE_F16},
      {"i8/bf16", FERI_MATMUL_I8, FER_DTYPE_BF16},     {"exact/f32", FERI_MATMUL_EXACT, FER_DTYPE_F32},
      {"exact/f16", FERI_MATMUL_EXACT, FER_DTYPE_F16}, {"exact/bf16", FERI_MATMUL_EXACT, FER_DTYPE_BF16},
      {"i8/q8_0", FERI_MATMUL_I8, FER_DTYPE_Q8_0},     {"exact/q8_0", FERI_MATMUL_EXACT, FER_DTYPE_Q8_0}};
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
    if (strcmp(s, known[i].name) == 0) {
      *r = (feri_faith_route){known[i].name, known[i].matmul, known[i].kv, NULL};
      return 1;
    }
  return 0;
}

static void print_stats(const char *what, const feri_faith_stats *s) {
  printf(" %s %llu kl_mean %.6g kl_p99 %.6g kl_max %.6g top1 %.4f", what, (unsigned long long)s->positions, s->kl_mean,
         s->kl_p99, s->kl_max, s->positions ? (double)s->top1_same / (double)s->positions : 0.0);
}

int main(int argc, char **argv) {
  const char *model = NULL, *chat_template = NULL, *prose = NULL, *chats = NULL, *corpus_in = NULL, *corpus_out = NULL;
  uint32_t n_prose = 0, max_chats = 0, threads = 0;
  feri_faith_route routes[MAX_ROUTES];
  size_t n_routes = 0;
  int routes_given = 0, peers_given = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (v == NULL) return usage();
    i++;
    if (strcmp(a, "--model") == 0) model = v;
    else if (strcmp(a, "--prose") == 0) prose = v;
    else if (strcmp(a, "--chats") == 0) chats = v;
    else if (strcmp(a, "--chat-template") == 0) chat_template = v;
    else if (strcmp(a, "--corpus") == 0) corpus_in = v;
    else if (strcmp(a, "--write-corpus") == 0) corpus_out = v;
    else if (strcmp(a, "--n-prose") == 0) { if (!parse_u32(v, &n_prose)) return usage(); }
    else if (strcmp(a, "--max-chats") == 0) { if (!parse_u32(v, &max_chats)) return usage(); }
    else if (strcmp(a, "--threads") == 0) { if (!parse_u32(v, &threads) || threads > 256) return usage(); }
    else if (strcmp(a, "--routes") == 0) {
      routes_given = 1;
      char *list = strdup(v);
      for (char *t = strtok(list, ","); t; t = strtok(NULL, ",")) {
        if (n_routes == MAX_ROUTES || !parse_route(t, &routes[n_routes])) {
          fprintf(stderr, "faithfulness: unknown route %s (MATMUL/KV: i8|exact / f32|f16|bf16|q8_0)\n", t);
          free(list);
          return 2;
        }
        routes[n_routes].name = strdup(t);
        n_routes++;
      }
      free(list);
    } else if (strcmp(a, "--peer") == 0) {
      const char *eq = strchr(v, '=');
      if (eq == NULL || eq == v || n_routes == MAX_ROUTES) return usage();
      peers_given = 1;
      routes[n_routes++] = (feri_faith_route){strndup(v, (size_t)(eq - v)), 0, FER_DTYPE_F32, eq + 1};
    } else {
      return usage();
    }
  }
  if (model == NULL || (corpus_in == NULL && prose == NULL && chats == NULL)) return usage();
  if (!routes_given) {
    static const char *const defaults[] = {"i8/f32",    "i8/f16",     "i8/bf16",   "i8/q8_0",
                                           "exact/f16", "exact/bf16", "exact/q8_0"};
    enum { N_DEFAULTS = sizeof defaults / sizeof defaults[0] };
    for (size_t d = 0; d < N_DEFAULTS && n_routes < MAX_ROUTES; d++) {
      memmove(routes + 1, routes, n_routes * sizeof routes[0]); /* ferrite's first, peers after */
      parse_route(defaults[N_DEFAULTS - 1 - d], &routes[0]);
      n_routes++;
    }
  }
  char msg[512];
  size_t len;
  feri_faith_corpus c;
  fer_status st = corpus_in ? feri_faith_corpus_read(corpus_in, &c)
                            : feri_faith_corpus_build(model, chat_template, prose, n_prose, chats, max_chats, &c);
  if (st != FER_STATUS_OK) {
    fer_last_error_message(msg, sizeof msg, &len);
    fprintf(stderr, "faithfulness: %s\n", msg);
    return 1;
  }
  uint64_t positions = 0;
  for (uint32_t s = 0; s < c.n_seqs; s++) positions += c.seqs[s].n;
  fprintf(stderr, "faithfulness: %u sequences, %llu positions\n", c.n_seqs, (unsigned long long)positions);
  if (corpus_out) {
    FILE *f = fopen(corpus_out, "w");
    if (f == NULL || feri_faith_corpus_write(&c, f) != FER_STATUS_OK || fclose(f) != 0) {
      fprintf(stderr, "faithfulness: cannot write %s\n", corpus_out);
      return 1;
    }
    if (!routes_given && !peers_given) { /* only the corpus was asked for */
      feri_faith_corpus_free(&c);
      return 0;
    }
  }
  fer_threadpool_options pc;
  fer_threadpool_options_init(&pc);
  pc.n_threads = threads;
  fer_threadpool *pool = NULL;
  if (fer_threadpool_create(threads ? &pc : NULL, &pool) != FER_STATUS_OK) return 1;
  feri_faith_result res[MAX_ROUTES];
  st = feri_faith_measure(model, &c, routes, n_routes, pool, res);
  fer_threadpool_free(pool);
  feri_faith_corpus_free(&c);
  if (st != FER_STATUS_OK) {
    fer_last_error_message(msg, sizeof msg, &len);
    fprintf(stderr, "faithfulness: %s\n", msg);
    return 1;
  }
  for (size_t r = 0; r < n_routes; r++) {
    printf("route %s", routes[r].name);
    print_stats("all", &res[r].all);
    print_stats("prose", &res[r].prose);
    print_stats("chat", &res[r].chat);
    printf("\n");
  }
  return 0;
}
