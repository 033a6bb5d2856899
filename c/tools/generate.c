/* generate.c: `ferrite generate`. Loads the model and its tokenizer from one GGUF file, encodes
 * the prompt (wrapped in the ChatML turn markers with --chat), prefills it in one pass, then
 * decodes token by token, sampling with fer_sampler (greedy unless a temperature is given) and
 * streaming the text through the detokenizer as whole characters. Ends with a summary line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ferrite.h"
#include "gguf/gguf.h"
#include "model/llama.h"
#include "model/tiny.h"
#include "tokenizer/tokenizer.h"
#include "tools/commands.h"

typedef struct gen_args {
  const char *model, *prompt;
  int chat, tiny;
  long max_tokens, threads, top_k, seed;
  unsigned long long budget; /* 0: weights used from the mapped file */
  double temperature, top_p, min_p;
} gen_args;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void print_error(const char *what) {
  char msg[512];
  size_t len;
  fer_last_error_message(msg, sizeof msg, &len);
  fprintf(stderr, "ferrite generate: %s: %s\n", what, msg);
}

static int parse(int argc, char **argv, gen_args *a) {
  *a = (gen_args){.max_tokens = 64, .temperature = 0, .top_p = 1, .min_p = 0, .seed = 0};
  for (int i = 1; i < argc; i++) {
    const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(k, "--chat") == 0) {
      a->chat = 1;
      continue;
    }
    if (strcmp(k, "--tiny") == 0) {
      a->tiny = 1;
      continue;
    }
    if (!v) {
      fprintf(stderr, "ferrite generate: %s needs a value\n", k);
      return 0;
    }
    i++;
    char *end = NULL;
    if (strcmp(k, "--model") == 0) a->model = v;
    else if (strcmp(k, "--prompt") == 0) a->prompt = v;
    else if (strcmp(k, "--max-tokens") == 0) a->max_tokens = strtol(v, &end, 10);
    else if (strcmp(k, "--threads") == 0) a->threads = strtol(v, &end, 10);
    else if (strcmp(k, "--top-k") == 0) a->top_k = strtol(v, &end, 10);
    else if (strcmp(k, "--seed") == 0) a->seed = strtol(v, &end, 10);
    else if (strcmp(k, "--budget") == 0) {
      a->budget = strtoull(v, &end, 10);
      if (end && (*end == 'K' || *end == 'M' || *end == 'G')) {
        a->budget <<= *end == 'K' ? 10 : *end == 'M' ? 20 : 30;
        end++;
      }
    }
    else if (strcmp(k, "--temperature") == 0) a->temperature = strtod(v, &end);
    else if (strcmp(k, "--top-p") == 0) a->top_p = strtod(v, &end);
    else if (strcmp(k, "--min-p") == 0) a->min_p = strtod(v, &end);
    else {
      fprintf(stderr, "ferrite generate: unknown option %s\n", k);
      return 0;
    }
    if (end && *end) {
      fprintf(stderr, "ferrite generate: %s %s is not a number\n", k, v);
      return 0;
    }
  }
  if ((!a->model && !a->tiny) || !a->prompt) {
    fprintf(stderr, "ferrite generate: --model (or --tiny) and --prompt are required\n");
    return 0;
  }
  if (a->max_tokens < 1 || a->max_tokens > 4096 || a->threads < 0 || a->threads > 1024) {
    fprintf(stderr, "ferrite generate: --max-tokens must be 1..4096 and --threads 0..1024\n");
    return 0;
  }
  return 1;
}

/* The prompt's ids; with chat, inside "<|im_start|>user\n ... <|im_end|>\n<|im_start|>assistant\n"
 * (ChatML, SmolLM2's and Qwen's template). */
static int32_t *encode_prompt(const fer_tokenizer *tok, const gen_args *a, size_t *n) {
  const char *head = a->chat ? "<|im_start|>user\n" : "", *tail = a->chat ? "<|im_end|>\n<|im_start|>assistant\n" : "";
  size_t len = strlen(head) + strlen(a->prompt) + strlen(tail);
  char *text = malloc(len + 1);
  if (!text) return NULL;
  snprintf(text, len + 1, "%s%s%s", head, a->prompt, tail);
  size_t need = 0;
  fer_tokenizer_encode(tok, text, len, FER_ENCODE_ADD_SPECIAL, NULL, 0, &need);
  int32_t *ids = malloc((need ? need : 1) * sizeof(int32_t));
  if (ids && fer_tokenizer_encode(tok, text, len, FER_ENCODE_ADD_SPECIAL, ids, need, n) != FER_STATUS_OK) {
    print_error("encoding the prompt");
    free(ids);
    ids = NULL;
  }
  free(text);
  return ids;
}

int feri_cmd_generate(int argc, char **argv) {
  gen_args a;
  if (!parse(argc, argv, &a)) return 2;
  int rc = 1;
  feri_llama *m = NULL;
  feri_llama_seq *seq = NULL;
  fer_tokenizer *tok = NULL;
  fer_detokenizer *detok = NULL;
  fer_threadpool *pool = NULL;
  fer_sampler *sampler = NULL;
  int32_t *prompt = NULL, *generated = NULL;
  float *logits = NULL;
  void *tiny_image = NULL;
  size_t tiny_size = 0;
  double t0 = now_s();
  if (a.tiny) {
    /* the seeded tiny model: random weights, so the text is noise; it shows the pipeline runs */
    fprintf(stderr, "using the seeded tiny model (random weights: the text is noise, not a real model)\n");
    feri_gguf *g = NULL;
    if (feri_tiny_llama_image(1, &tiny_image, &tiny_size) != FER_STATUS_OK ||
        feri_llama_open_image(tiny_image, tiny_size, &m) != FER_STATUS_OK ||
        feri_gguf_open(tiny_image, tiny_size, &g) != FER_STATUS_OK || feri_tokenizer_from_gguf(g, &tok) != FER_STATUS_OK) {
      print_error("building the tiny model");
      feri_gguf_close(g);
      goto out;
    }
    feri_gguf_close(g);
  } else {
    fprintf(stderr, "loading %s ...\n", a.model);
    feri_llama_options mo = {.weights = a.budget ? FERI_WEIGHTS_STORE : FERI_WEIGHTS_MAPPED,
                             .eviction = FER_WEIGHTS_EVICT_STABLE_SUBSET, .budget_bytes = a.budget};
    if (feri_llama_open_with(a.model, &mo, &m) != FER_STATUS_OK) {
      print_error("loading the model");
      goto out;
    }
    if (fer_tokenizer_from_gguf_file(a.model, &tok) != FER_STATUS_OK) {
      print_error("loading the tokenizer");
      goto out;
    }
  }
  fer_threadpool_options po;
  fer_threadpool_options_init(&po);
  po.n_threads = (uint32_t)a.threads;
  if (fer_threadpool_create(&po, &pool) != FER_STATUS_OK) {
    print_error("creating the thread pool");
    goto out;
  }
  fer_sampling_params sp;
  fer_sampling_params_init(&sp);
  sp.temperature = (float)a.temperature; /* 0 = greedy */
  sp.top_k = (int32_t)a.top_k;
  sp.top_p = (float)a.top_p;
  sp.min_p = (float)a.min_p;
  sp.seed = (uint64_t)a.seed;
  if (fer_sampler_create(&sp, &sampler) != FER_STATUS_OK) {
    print_error("sampling options");
    goto out;
  }
  const feri_llama_config *c = feri_llama_config_of(m);
  fer_tokenizer_info ti;
  fer_tokenizer_get_info(tok, &ti);
  int32_t im_end = -1;
  fer_tokenizer_token_to_id(tok, "<|im_end|>", 10, &im_end);
  size_t n_prompt = 0;
  prompt = encode_prompt(tok, &a, &n_prompt);
  if (!prompt) goto out;
  uint32_t max_tokens = (uint32_t)(n_prompt + (size_t)a.max_tokens);
  logits = malloc(c->n_vocab * sizeof(float));
  generated = malloc((size_t)a.max_tokens * sizeof(int32_t));
  if (!logits || !generated || feri_llama_seq_create(m, max_tokens, NULL, &seq) != FER_STATUS_OK ||
      fer_detokenizer_create(tok, FER_DECODE_SKIP_SPECIAL | FER_DECODE_REPLACE_INVALID_UTF8, &detok) != FER_STATUS_OK) {
    print_error("preparing the sequence");
    goto out;
  }
  double t_loaded = now_s();
  fprintf(stderr, "loaded in %.2f s: %u layers, %u heads (%u kv), vocab %u; prompt %zu tokens\n", t_loaded - t0,
          c->n_layer, c->n_head, c->n_head_kv, c->n_vocab, n_prompt);
  if (!a.chat) fputs(a.prompt, stdout);
  double t_prefill = 0, t_decode0 = 0;
  size_t n_gen = 0;
  const int32_t *cur = prompt;
  uint32_t n_cur = (uint32_t)n_prompt;
  while (n_gen < (size_t)a.max_tokens) {
    if (feri_llama_forward(seq, pool, cur, n_cur, logits) != FER_STATUS_OK) {
      print_error("forward pass");
      goto out;
    }
    if (n_gen == 0) {
      t_prefill = now_s() - t_loaded;
      t_decode0 = now_s();
    }
    fer_sampling_context ctx = {prompt, n_prompt, generated, n_gen};
    int32_t next = -1;
    if (fer_sampler_sample(sampler, logits, c->n_vocab, &ctx, &next, NULL) != FER_STATUS_OK) {
      print_error("sampling");
      goto out;
    }
    generated[n_gen++] = next;
    if (next == ti.eos_id || next == im_end) break;
    char piece[256];
    size_t len = 0;
    if (fer_detokenizer_push(detok, next, piece, sizeof piece, &len) == FER_STATUS_OK) fwrite(piece, 1, len, stdout);
    fflush(stdout);
    cur = &generated[n_gen - 1];
    n_cur = 1;
  }
  char rest[64];
  size_t len = 0;
  if (fer_detokenizer_flush(detok, rest, sizeof rest, &len) == FER_STATUS_OK) fwrite(rest, 1, len, stdout);
  double t_decode = now_s() - t_decode0;
  fer_kv_seq_stats kst;
  fer_kv_seq_get_stats(feri_llama_seq_kv(seq), &kst);
  feri_plan_stats ps;
  feri_llama_seq_plan_stats(seq, &ps);
  char weights[160] = "used in place from the read-only mapping of the file";
  fer_weight_store_stats ws;
  if (feri_llama_weight_stats(m, &ws) == FER_STATUS_OK) {
    snprintf(weights, sizeof weights, "%s in a weight store (%llu granules loaded at open, %llu page-ins, %llu evictions)",
             ws.strategy == FER_WEIGHTS_FULL_RESIDENT ? "fully resident" : "streamed", (unsigned long long)ws.loaded_granules,
             (unsigned long long)ws.page_ins, (unsigned long long)ws.evictions);
  }
  printf("\n");
  fflush(stdout);
  fprintf(stderr,
          "prefill %zu tokens at %.1f tok/s; decode %zu tokens at %.1f tok/s; KV (f32, seq-major, fer_kv_cache): %llu "
          "tokens live, %llu bytes committed, %llu growths; weights %s; decode plan (address-stable): %llu captures, "
          "%llu replays, %llu invalidations, %llu kept through growth\n",
          n_prompt, (double)n_prompt / (t_prefill > 0 ? t_prefill : 1e-9), n_gen > 0 ? n_gen - 1 : 0,
          n_gen > 1 ? (double)(n_gen - 1) / (t_decode > 0 ? t_decode : 1e-9) : 0.0, (unsigned long long)kst.live_tokens,
          (unsigned long long)kst.committed_bytes, (unsigned long long)kst.growth_events, weights,
          (unsigned long long)ps.captures, (unsigned long long)ps.replays, (unsigned long long)ps.invalidations,
          (unsigned long long)ps.growth_keeps);
  rc = 0;
out:
  fer_detokenizer_free(detok);
  fer_tokenizer_free(tok);
  feri_llama_seq_free(seq);
  feri_llama_close(m);
  fer_sampler_free(sampler);
  fer_threadpool_free(pool);
  free(prompt), free(generated), free(logits);
  free(tiny_image);
  return rc;
}
