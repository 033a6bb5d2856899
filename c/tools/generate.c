/* generate.c: `ferrite generate`, on the public engine ABI (fer_engine_*). Creates an engine from
 * the options (and the FERRITE_* environment, read by the engine at creation), encodes the prompt
 * (rendered with the model's chat template under --chat), prefills it, then decodes token by token,
 * sampling with fer_sampler (greedy unless a temperature is given) and streaming whole characters
 * through the detokenizer. With --json-schema, --regex or --grammar the output is constrained: the
 * grammar is compiled against the model's vocabulary, the sequence holds its matcher from the first
 * generated token on, and the sampler masks every token the matcher does not allow. Ends with a
 * summary line: speeds, KV, weights, plan, peak RSS. */
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "core/file.h"
#include "engine/config.h"
#include "ferrite.h"
#include "tools/args.h"
#include "tools/commands.h"

extern char **environ;

typedef struct gen_args {
  const char *model, *prompt, *arch, *system, *chat_template;
  const char *json_schema, *regex, *gbnf; /* at most one: the grammar of the output */
  int chat, tiny, ignore_eos, arch_set, threads_set, budget_set, json_compact;
  uint64_t max_tokens, threads, top_k, seed, tp, pp;
  uint64_t budget; /* 0: weights used from the mapped file */
  float temperature, top_p, min_p;
  float repeat_penalty, presence_penalty, frequency_penalty; /* 1, 0, 0: off */
  float dry_multiplier, dry_base, mirostat_tau, mirostat_eta;
  uint64_t dry_allowed_length, dry_last_n, mirostat; /* dry_last_n 0: the whole context */
  int32_t kv_layout, kv_dtype, plan, matmul, tp_wire; /* -1: the engine's default (or the environment's) */
  int32_t device;       /* -1: the engine's default (or FERRITE_DEVICE); else a fer_device_code */
  uint64_t device_index;
} gen_args;

const char feri_generate_usage[] =
    "ferrite generate (--model PATH | --tiny [--arch llama|qwen2|qwen3]) --prompt TEXT\n"
    "                 [--chat [--system TEXT] [--chat-template FILE.jinja]] [--max-tokens N] [--ignore-eos]\n"
    "                 [--temperature T] [--top-k K] [--top-p P] [--min-p P] [--seed S]\n"
    "                 [--repeat-penalty R] [--presence-penalty P] [--frequency-penalty F]\n"
    "                 [--dry-multiplier M [--dry-base B] [--dry-allowed-length N] [--dry-penalty-last-n N]]\n"
    "                 [--mirostat 1|2 [--mirostat-ent TAU] [--mirostat-lr ETA]]\n"
    "                 [--threads N] [--tp N] [--pp N] [--tp-wire f32|q8_0] [--budget BYTES[K|M|G]] [--matmul i8|exact]\n"
    "                 [--kv-layout head-major|seq-major|token-major] [--kv-dtype f32|f16|bf16|q8_0]\n"
    "                 [--plan off|unconditional|address-stable]\n"
    "                 [--json-schema FILE [--json-compact] | --regex RE | --grammar FILE.gbnf]\n"
    "  (FERRITE_* variables configure the engine too, flags win: see fer_engine_config)\n";

/* What `ferrite generate --help` adds: each value's range (args.c refuses anything outside). */
static const char VALUES[] =
    "values (anything else is refused with exit status 2):\n"
    "  --max-tokens N    1..4096 tokens to generate (default 64)\n"
    "  --temperature T   0 (greedy, the default) or a finite number above it\n"
    "  --top-k K         0 (off, the default) .. 2147483647\n"
    "  --top-p P         (0, 1]; 1 is off (the default)\n"
    "  --min-p P         [0, 1]; 0 is off (the default)\n"
    "  --seed S          0 (the default) .. 18446744073709551615\n"
    "  --repeat-penalty R  a positive number; 1 is off (the default): HF's penalty on tokens of\n"
    "                    the prompt and the output\n"
    "  --presence-penalty P, --frequency-penalty F  -2..2; 0 is off (the default)\n"
    "  --dry-multiplier M  DRY, the repeated-sequence penalty: 0 (off, the default) .. 100, with\n"
    "                    llama.cpp's breakers (newline, colon, quote, star); --dry-base 1..100\n"
    "                    (1.75), --dry-allowed-length 0..65536 (2), --dry-penalty-last-n 0 (the\n"
    "                    whole context, the default) .. 1048576\n"
    "  --mirostat 1|2    mirostat v1 or v2 in place of top-k, top-p and min-p (0: off, the default);\n"
    "                    --mirostat-ent TAU (0, 100] (5), --mirostat-lr ETA (0, 10] (0.1)\n"
    "  --threads N       0 (the engine's default) .. 1024\n"
    "  --tp N            tensor parallelism over the N processes of `mpirun -n N ferrite generate ...`\n"
    "                    (each holds 1/N of the model; rank 0 prints the answer); 1: one process\n"
    "  --pp N            pipeline parallelism over N processes: each runs a run of the layers (the\n"
    "                    same answer as one process, bit for bit); with --tp T: N stages of T\n"
    "                    tensor-parallel processes each, `mpirun -n T*N`\n"
    "  --device D        cpu (the default) or cuda[:N]: where the forward pass runs (the CUDA backend\n"
    "                    is being built: without a GPU, or until it runs, the engine says so and stops)\n"
    "  --tp-wire FORMAT  with --tp: the all-reduces' activations as f32 (the default) or q8_0 blocks\n"
    "                    (3.76x fewer bytes; each sum off by up to half a step of its 8-bit blocks)\n"
    "  --budget BYTES    with --model: a weight store of that many bytes (K, M, G: 2^10, 2^20,\n"
    "                    2^30); 0 or absent uses the weights in place from the mapped file\n"
    "  --chat-template F the Jinja chat template in file F instead of the model file's own (a file\n"
    "                    without one, such as a base model, needs it for --chat)\n"
    "  --json-schema F   the output is one JSON value valid under the JSON Schema in file F\n"
    "                    (whitespace between tokens allowed; --json-compact: none)\n"
    "  --regex RE        the output matches the regular expression RE (Rust syntax) whole\n"
    "  --grammar F       the output is a word of the GBNF grammar in file F (rule root)\n"
    "  (with a grammar, generation ends where the grammar allows it and the model chooses to)\n";

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

static const feri_arg_choice LAYOUTS[] = {{"head-major", FER_KV_LAYOUT_HEAD_MAJOR}, {"seq-major", FER_KV_LAYOUT_SEQ_MAJOR},
                                          {"token-major", FER_KV_LAYOUT_TOKEN_MAJOR}, {NULL, 0}};
static const feri_arg_choice DTYPES[] = {
    {"f32", FER_DTYPE_F32}, {"f16", FER_DTYPE_F16}, {"bf16", FER_DTYPE_BF16}, {"q8_0", FER_DTYPE_Q8_0}, {NULL, 0}};
static const feri_arg_choice PLANS[] = {{"off", FER_PLAN_OFF}, {"unconditional", FER_PLAN_UNCONDITIONAL},
                                        {"address-stable", FER_PLAN_ADDRESS_STABLE}, {NULL, 0}};
static const feri_arg_choice MATMULS[] = {{"i8", FER_MATMUL_I8}, {"exact", FER_MATMUL_EXACT}, {NULL, 0}};
static const feri_arg_choice WIRES[] = {{"f32", FER_TP_WIRE_F32}, {"q8_0", FER_TP_WIRE_Q8_0}, {NULL, 0}};
static const feri_arg_choice ARCHES[] = {{"llama", 0}, {"qwen2", 1}, {"qwen3", 2}, {NULL, 0}};

static const char *name_of(const feri_arg_choice *c, int32_t v) {
  for (; c->name; c++)
    if (c->value == v) return c->name;
  return "?";
}

/* The options that take a value, so an unknown option is told apart from a missing value. */
static const char *const VALUED[] = {"--model", "--prompt", "--arch", "--system", "--chat-template", "--max-tokens", "--threads",
                                     "--top-k", "--seed", "--budget", "--temperature", "--top-p", "--min-p",
                                     "--kv-layout", "--kv-dtype", "--plan", "--matmul", "--json-schema", "--regex",
                                     "--grammar", "--repeat-penalty", "--presence-penalty", "--frequency-penalty",
                                     "--dry-multiplier", "--dry-base", "--dry-allowed-length", "--dry-penalty-last-n",
                                     "--mirostat", "--mirostat-ent", "--mirostat-lr", "--tp", "--pp", "--tp-wire",
                                     "--device", NULL};

enum { PARSE_BAD = 0, PARSE_OK = 1, PARSE_HELP = 2 };

static bool refuse(const char *why) {
  fprintf(stderr, "ferrite generate: %s (see ferrite generate --help)\n", why);
  return false;
}

static bool parse_value(const char *k, const char *v, gen_args *a) {
  static const char C[] = "generate";
  int32_t arch = 0;
  if (strcmp(k, "--model") == 0) a->model = v;
  else if (strcmp(k, "--prompt") == 0) a->prompt = v;
  else if (strcmp(k, "--system") == 0) a->system = v;
  else if (strcmp(k, "--chat-template") == 0) a->chat_template = v;
  else if (strcmp(k, "--json-schema") == 0) a->json_schema = v;
  else if (strcmp(k, "--regex") == 0) a->regex = v;
  else if (strcmp(k, "--grammar") == 0) a->gbnf = v;
  else if (strcmp(k, "--arch") == 0) {
    if (!feri_arg_pick(C, k, v, ARCHES, &arch)) return false;
    a->arch = ARCHES[arch].name;
    a->arch_set = 1;
  }
  else if (strcmp(k, "--max-tokens") == 0) return feri_arg_unsigned(C, k, v, 1, 4096, &a->max_tokens);
  else if (strcmp(k, "--threads") == 0) {
    a->threads_set = 1;
    return feri_arg_unsigned(C, k, v, 0, 1024, &a->threads);
  }
  else if (strcmp(k, "--top-k") == 0) return feri_arg_unsigned(C, k, v, 0, INT32_MAX, &a->top_k);
  else if (strcmp(k, "--tp") == 0) return feri_arg_unsigned(C, k, v, 1, 4096, &a->tp);
  else if (strcmp(k, "--pp") == 0) return feri_arg_unsigned(C, k, v, 1, 4096, &a->pp);
  else if (strcmp(k, "--seed") == 0) return feri_arg_unsigned(C, k, v, 0, UINT64_MAX, &a->seed);
  else if (strcmp(k, "--budget") == 0) {
    a->budget_set = 1;
    return feri_arg_bytes(C, k, v, &a->budget);
  }
  else if (strcmp(k, "--temperature") == 0) return feri_arg_float(C, k, v, 0, FLT_MAX, false, &a->temperature);
  else if (strcmp(k, "--top-p") == 0) return feri_arg_float(C, k, v, 0, 1, true, &a->top_p);
  else if (strcmp(k, "--min-p") == 0) return feri_arg_float(C, k, v, 0, 1, false, &a->min_p);
  else if (strcmp(k, "--repeat-penalty") == 0) return feri_arg_float(C, k, v, 0, FLT_MAX, true, &a->repeat_penalty);
  else if (strcmp(k, "--presence-penalty") == 0) return feri_arg_float(C, k, v, -2, 2, false, &a->presence_penalty);
  else if (strcmp(k, "--frequency-penalty") == 0) return feri_arg_float(C, k, v, -2, 2, false, &a->frequency_penalty);
  else if (strcmp(k, "--dry-multiplier") == 0) return feri_arg_float(C, k, v, 0, 100, false, &a->dry_multiplier);
  else if (strcmp(k, "--dry-base") == 0) return feri_arg_float(C, k, v, 1, 100, false, &a->dry_base);
  else if (strcmp(k, "--dry-allowed-length") == 0) return feri_arg_unsigned(C, k, v, 0, 65536, &a->dry_allowed_length);
  else if (strcmp(k, "--dry-penalty-last-n") == 0) return feri_arg_unsigned(C, k, v, 0, 1 << 20, &a->dry_last_n);
  else if (strcmp(k, "--mirostat") == 0) return feri_arg_unsigned(C, k, v, 0, 2, &a->mirostat);
  else if (strcmp(k, "--mirostat-ent") == 0) return feri_arg_float(C, k, v, 0, 100, true, &a->mirostat_tau);
  else if (strcmp(k, "--mirostat-lr") == 0) return feri_arg_float(C, k, v, 0, 10, true, &a->mirostat_eta);
  else if (strcmp(k, "--kv-layout") == 0) return feri_arg_pick(C, k, v, LAYOUTS, &a->kv_layout);
  else if (strcmp(k, "--kv-dtype") == 0) return feri_arg_pick(C, k, v, DTYPES, &a->kv_dtype);
  else if (strcmp(k, "--plan") == 0) return feri_arg_pick(C, k, v, PLANS, &a->plan);
  else if (strcmp(k, "--matmul") == 0) return feri_arg_pick(C, k, v, MATMULS, &a->matmul);
  else if (strcmp(k, "--tp-wire") == 0) return feri_arg_pick(C, k, v, WIRES, &a->tp_wire);
  else if (strcmp(k, "--device") == 0) { /* the engine's own spelling: cpu, cuda or cuda:N */
    uint32_t index = 0;
    if (!feri_parse_device(v, &a->device, &index)) {
      fprintf(stderr, "ferrite generate: --device \"%s\": not cpu, cuda or cuda:N (N 0 .. 4095)\n", v);
      return false;
    }
    a->device_index = index;
  }
  return true;
}

static int parse(int argc, char **argv, gen_args *a) {
  *a = (gen_args){.max_tokens = 64, .temperature = 0, .top_p = 1, .min_p = 0, .seed = 0, .arch = "llama",
                  .repeat_penalty = 1, .dry_base = 1.75f, .dry_allowed_length = 2, .mirostat_tau = 5, .mirostat_eta = 0.1f,
                  .kv_layout = -1, .kv_dtype = -1, .plan = -1, .matmul = -1, .tp_wire = -1,
                  .device = -1};
  for (int i = 1; i < argc; i++)
    if (feri_arg_is_help(argv[i])) return PARSE_HELP; /* anywhere an option may stand, not as a value */
    else if (strcmp(argv[i], "--chat") == 0) a->chat = 1;
    else if (strcmp(argv[i], "--tiny") == 0) a->tiny = 1;
    else if (strcmp(argv[i], "--ignore-eos") == 0) a->ignore_eos = 1;
    else if (strcmp(argv[i], "--json-compact") == 0) a->json_compact = 1;
    else {
      const char *k = argv[i];
      size_t known = 0;
      while (VALUED[known] && strcmp(VALUED[known], k) != 0) known++;
      if (!VALUED[known]) {
        fprintf(stderr, "ferrite generate: %s \"%s\" (see ferrite generate --help)\n",
                k[0] == '-' ? "unknown option" : "unexpected argument", k);
        return PARSE_BAD;
      }
      if (i + 1 >= argc) {
        fprintf(stderr, "ferrite generate: %s needs a value (see ferrite generate --help)\n", k);
        return PARSE_BAD;
      }
      if (!parse_value(k, argv[++i], a)) return PARSE_BAD;
    }
  /* options that would be ignored are refused, so nothing given is silently dropped */
  if (a->model && a->tiny) return refuse("--model and --tiny exclude each other"), PARSE_BAD;
  if ((!a->model && !a->tiny) || !a->prompt) return refuse("--model (or --tiny) and --prompt are required"), PARSE_BAD;
  if (a->arch_set && !a->tiny) return refuse("--arch picks the tiny model's architecture: it needs --tiny"), PARSE_BAD;
  if (a->budget_set && a->tiny) return refuse("--budget needs --model (the tiny model is built in memory)"), PARSE_BAD;
  if (a->system && !a->chat) return refuse("--system needs --chat"), PARSE_BAD;
  if (a->mirostat && (a->top_k > 0 || a->top_p < 1 || a->min_p > 0))
    return refuse("--mirostat replaces --top-k, --top-p and --min-p: give one or the other"), PARSE_BAD;
  if (a->chat_template && !a->chat) return refuse("--chat-template needs --chat"), PARSE_BAD;
  if (!!a->json_schema + !!a->regex + !!a->gbnf > 1)
    return refuse("--json-schema, --regex and --grammar exclude each other"), PARSE_BAD;
  if (a->json_compact && !a->json_schema) return refuse("--json-compact needs --json-schema"), PARSE_BAD;
  if (a->ignore_eos && (a->json_schema || a->regex || a->gbnf))
    return refuse("--ignore-eos and a grammar exclude each other (the grammar says where the output ends)"), PARSE_BAD;
  return PARSE_OK;
}

/* The grammar of --json-schema, --regex or --grammar compiled against the model's vocabulary (its
 * end token: the chat turn's end under --chat when the model has one); *vocab and *g stay NULL
 * without one. 0 after a message. */
static int compile_grammar(const gen_args *a, const fer_tokenizer *tok, const fer_model_info *info,
                           fer_grammar_vocab **vocab, fer_grammar **g) {
  if (!a->json_schema && !a->regex && !a->gbnf) return 1;
  char *text = NULL;
  size_t len = 0;
  const char *file = a->json_schema ? a->json_schema : a->gbnf;
  if (file && feri_file_read_all(file, a->json_schema ? "--json-schema" : "--grammar", &text, &len) != FER_STATUS_OK) {
    print_error("reading the grammar");
    return 0;
  }
  const int32_t end = a->chat && info->eot_id >= 0 ? info->eot_id : info->eos_id;
  const fer_grammar_kind kind = a->json_schema ? FER_GRAMMAR_JSON_SCHEMA : a->regex ? FER_GRAMMAR_REGEX : FER_GRAMMAR_GBNF;
  const uint32_t flags = a->json_compact ? FER_GRAMMAR_JSON_COMPACT : 0;
  int ok = fer_grammar_vocab_create(tok, info->n_vocab, end, vocab) == FER_STATUS_OK;
  if (!ok) print_error("the grammar's vocabulary");
  if (ok && !(ok = fer_grammar_compile(*vocab, kind, file ? text : a->regex, file ? len : strlen(a->regex), flags, g) ==
                   FER_STATUS_OK))
    print_error(a->json_schema ? "--json-schema" : a->regex ? "--regex" : "--grammar");
  free(text);
  return ok;
}

/* The prompt's ids; with chat, the conversation [system: --system, if given; user: prompt] rendered
 * by the model's template (which may add its own default system message when none is given). */
static int32_t *encode_prompt(const fer_engine *e, const fer_tokenizer *tok, const gen_args *a, size_t *n) {
  char *text = NULL;
  size_t len = strlen(a->prompt);
  if (a->chat) {
    const fer_chat_message conv[2] = {{"system", a->system ? a->system : ""}, {"user", a->prompt}};
    const fer_chat_message *m = a->system ? conv : conv + 1;
    const size_t n_m = a->system ? 2 : 1;
    size_t need = 0;
    fer_engine_chat_render(e, m, n_m, FER_CHAT_ADD_GENERATION_PROMPT, NULL, 0, &need);
    text = malloc(need + 1);
    if (!text || fer_engine_chat_render(e, m, n_m, FER_CHAT_ADD_GENERATION_PROMPT, text, need + 1, &len) != FER_STATUS_OK) {
      print_error("rendering the chat template");
      free(text);
      return NULL;
    }
  }
  const char *src = text ? text : a->prompt;
  size_t need = 0;
  fer_tokenizer_encode(tok, src, len, FER_ENCODE_ADD_SPECIAL, NULL, 0, &need);
  int32_t *ids = malloc((need ? need : 1) * sizeof(int32_t));
  if (ids && fer_tokenizer_encode(tok, src, len, FER_ENCODE_ADD_SPECIAL, ids, need, n) != FER_STATUS_OK) {
    print_error("encoding the prompt");
    free(ids);
    ids = NULL;
  }
  free(text);
  return ids;
}

static void print_summary(const fer_engine *e, const fer_engine_seq *seq, size_t n_prompt, double t_prefill, size_t n_gen,
                          double t_decode) {
  fer_engine_config cfg;
  fer_engine_seq_stats ss;
  fer_engine_stats es;
  fer_engine_get_config(e, &cfg);
  fer_engine_seq_get_stats(seq, &ss);
  fer_engine_get_stats(e, &es);
  char weights[160] = "used in place from the read-only mapping of the file";
  if (es.weight_strategy != 0)
    snprintf(weights, sizeof weights, "%s in a weight store (%llu granules loaded at open, %llu page-ins, %llu evictions)",
             es.weight_strategy == FER_WEIGHTS_FULL_RESIDENT ? "fully resident" : "streamed",
             (unsigned long long)es.weight_loaded_granules, (unsigned long long)es.weight_page_ins,
             (unsigned long long)es.weight_evictions);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  fprintf(stderr,
          "prefill %zu tokens at %.1f tok/s; decode %zu tokens at %.1f tok/s; matmul %s; KV (%s, %s): %u tokens, "
          "%llu bytes committed (%llu granules of 64 KiB), %llu growths; weights %s; decode plan (%s): %llu captures, "
          "%llu replays, %llu invalidations, %llu kept through growth; peak RSS %.1f MiB\n",
          n_prompt, (double)n_prompt / (t_prefill > 0 ? t_prefill : 1e-9), n_gen > 0 ? n_gen - 1 : 0,
          n_gen > 1 ? (double)(n_gen - 1) / (t_decode > 0 ? t_decode : 1e-9) : 0.0, name_of(MATMULS, cfg.matmul),
          name_of(DTYPES, cfg.kv_dtype), name_of(LAYOUTS, cfg.kv_layout), ss.n_tokens,
          (unsigned long long)ss.kv_committed_bytes, (unsigned long long)(ss.kv_committed_bytes >> 16),
          (unsigned long long)ss.kv_growth_events, weights, name_of(PLANS, cfg.plan), (unsigned long long)ss.plan_captures,
          (unsigned long long)ss.plan_replays, (unsigned long long)ss.plan_invalidations,
          (unsigned long long)ss.plan_growth_keeps, (double)ru.ru_maxrss / 1024.0);
}

/* The process environment without the FERRITE_* variables that a given flag sets (the engine
 * reads the rest at creation). NULL-terminated; free() it. */
static const char **environment_without_flags(const gen_args *a) {
  size_t n = 0;
  while (environ[n]) n++;
  const char **env = malloc((n + 1) * sizeof *env);
  if (!env) return NULL;
  const struct { int given; const char *prefix; } covered[] = {
      {a->kv_layout >= 0, "FERRITE_KV_LAYOUT="}, {a->kv_dtype >= 0, "FERRITE_KV_DTYPE="}, {a->plan >= 0, "FERRITE_PLAN="},
      {a->matmul >= 0, "FERRITE_MATMUL="}, {a->threads_set, "FERRITE_THREADS="}, {a->budget_set, "FERRITE_WEIGHT_BUDGET="},
      {a->chat_template != NULL, "FERRITE_CHAT_TEMPLATE="}, {a->tp_wire >= 0, "FERRITE_TP_WIRE="},
      {a->device >= 0, "FERRITE_DEVICE="}};
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    int skip = 0;
    for (size_t c = 0; c < sizeof covered / sizeof covered[0]; c++)
      skip |= covered[c].given && strncmp(environ[i], covered[c].prefix, strlen(covered[c].prefix)) == 0;
    if (!skip) env[k++] = environ[i];
  }
  env[k] = NULL;
  return env;
}

int feri_cmd_generate(int argc, char **argv) {
  gen_args a;
  const int parsed = parse(argc, argv, &a);
  if (parsed == PARSE_HELP) {
    feri_arg_usage(stdout, feri_generate_usage, true);
    fputs(VALUES, stdout);
    return 0;
  }
  if (parsed != PARSE_OK) return 2;
  if (a.model) { /* refused here, before the engine opens it: a FIFO would block that open */
    const int fd = feri_arg_open_regular("generate", "--model", a.model, NULL);
    if (fd < 0) return 1;
    close(fd);
  }
  if (a.chat_template) {
    const int fd = feri_arg_open_regular("generate", "--chat-template", a.chat_template, NULL);
    if (fd < 0) return 1;
    close(fd);
  }
  int rc = 1;
  fer_engine *e = NULL;
  fer_engine_seq *seq = NULL;
  const fer_tokenizer *tok = NULL;
  fer_detokenizer *detok = NULL;
  fer_sampler *sampler = NULL;
  fer_grammar_vocab *gvocab = NULL;
  fer_grammar *grammar = NULL;
  int32_t *prompt = NULL, *generated = NULL, *dry_tokens = NULL;
  uint32_t *dry_lengths = NULL;
  float *logits = NULL;
  void *tiny_image = NULL;
  size_t tiny_size = 0;
  const char **env = NULL;
  double t0 = now_s();
  fer_engine_config cfg;
  fer_engine_config_init(&cfg);
  cfg.n_threads = (uint32_t)a.threads;
  cfg.max_seqs = 1;
  cfg.chat_template_path = a.chat_template;
  if (a.tiny) {
    /* the seeded tiny model: random weights, so the text is noise; it shows the pipeline runs */
    fprintf(stderr, "using the seeded tiny %s model (random weights: the text is noise, not a real model)\n", a.arch);
    if (fer_tiny_model_image(a.arch, 1, &tiny_image, &tiny_size) != FER_STATUS_OK) {
      print_error("building the tiny model");
      goto out;
    }
    cfg.model_image = tiny_image;
    cfg.model_image_bytes = tiny_size;
  } else {
    fprintf(stderr, "loading %s%s ...\n", a.model, a.budget ? " into a weight store" : "");
    cfg.model_path = a.model;
    cfg.weight_budget_bytes = a.budget;
  }
  /* flags given on the command line win over the environment: their variables are left out */
  env = environment_without_flags(&a);
  cfg.environment = env;
  if (a.kv_layout >= 0) cfg.kv_layout = a.kv_layout;
  if (a.kv_dtype >= 0) cfg.kv_dtype = a.kv_dtype;
  if (a.plan >= 0) cfg.plan = a.plan;
  if (a.matmul >= 0) cfg.matmul = a.matmul;
  if (a.tp > 1) cfg.tensor_parallel = (uint32_t)a.tp;
  if (a.pp > 1) cfg.pipeline_parallel = (uint32_t)a.pp;
  if (a.tp_wire >= 0) cfg.tensor_parallel_wire = a.tp_wire;
  if (a.device >= 0) cfg.device = a.device, cfg.device_index = (uint32_t)a.device_index;
  if (fer_engine_create(&cfg, &e) != FER_STATUS_OK) {
    print_error("creating the engine");
    goto out;
  }
  uint32_t rank = 0, ranks = 1;
  fer_engine_parallel_info(e, &rank, &ranks);
  if (rank != 0) { /* a tensor-parallel rank: rank 0's steps on this share, until rank 0 is done */
    if (fer_engine_run_rank(e) != FER_STATUS_OK) print_error("running rank 0's steps");
    else rc = 0;
    goto out;
  }
  fer_model_info info;
  fer_engine_model_info(e, &info);
  fer_engine_tokenizer(e, &tok);
  fer_sampling_params sp;
  fer_sampling_params_init(&sp);
  sp.temperature = (float)a.temperature; /* 0 = greedy */
  sp.top_k = (int32_t)a.top_k;
  sp.top_p = (float)a.top_p;
  sp.min_p = (float)a.min_p;
  sp.seed = (uint64_t)a.seed;
  sp.repetition_penalty = a.repeat_penalty;
  sp.presence_penalty = a.presence_penalty;
  sp.frequency_penalty = a.frequency_penalty;
  sp.mirostat = (int32_t)a.mirostat;
  sp.mirostat_tau = a.mirostat_tau;
  sp.mirostat_eta = a.mirostat_eta;
  if (a.dry_multiplier > 0.0f) { /* llama.cpp's default breakers, made against this vocabulary */
    static const char *const breakers[] = {"\n", ":", "\"", "*"};
    size_t nb = 0, nt = 0;
    fer_status st = fer_tokenizer_dry_breakers(tok, breakers, 4, NULL, 0, NULL, 0, &nb, &nt);
    dry_lengths = malloc((nb ? nb : 1) * sizeof *dry_lengths);
    dry_tokens = malloc((nt ? nt : 1) * sizeof *dry_tokens);
    if ((st != FER_STATUS_OK && st != FER_STATUS_BUFFER_TOO_SMALL) || !dry_lengths || !dry_tokens ||
        fer_tokenizer_dry_breakers(tok, breakers, 4, dry_lengths, nb, dry_tokens, nt, &nb, &nt) != FER_STATUS_OK) {
      print_error("--dry-multiplier (its sequence breakers)");
      goto out;
    }
    sp.dry_multiplier = a.dry_multiplier;
    sp.dry_base = a.dry_base;
    sp.dry_allowed_length = (int32_t)a.dry_allowed_length;
    sp.dry_penalty_last_n = (int32_t)a.dry_last_n;
    sp.n_dry_breakers = (uint32_t)nb, sp.n_dry_breaker_tokens = (uint32_t)nt;
    sp.dry_breaker_lengths = dry_lengths, sp.dry_breaker_tokens = dry_tokens;
  }
  if (fer_sampler_create(&sp, &sampler) != FER_STATUS_OK) {
    print_error("sampling options");
    goto out;
  }
  if (!compile_grammar(&a, tok, &info, &gvocab, &grammar)) goto out;
  int32_t grammar_end = -1; /* the end token the grammar allows where the output may end */
  if (gvocab) {
    fer_grammar_vocab_info gi;
    fer_grammar_vocab_get_info(gvocab, &gi);
    grammar_end = gi.eos_id;
  }
  size_t n_prompt = 0;
  prompt = encode_prompt(e, tok, &a, &n_prompt);
  if (!prompt) goto out;
  if (n_prompt == 0) { /* said here rather than as the prefill's "0 ids" */
    fprintf(stderr, "ferrite generate: --prompt \"%s\" encodes to no tokens: nothing to continue from\n", a.prompt);
    goto out;
  }
  logits = malloc(info.n_vocab * sizeof(float));
  generated = malloc((size_t)a.max_tokens * sizeof(int32_t));
  if (!logits || !generated || fer_engine_seq_create(e, (uint32_t)(n_prompt + (size_t)a.max_tokens), &seq) != FER_STATUS_OK ||
      fer_detokenizer_create(tok, FER_DECODE_SKIP_SPECIAL | FER_DECODE_REPLACE_INVALID_UTF8, &detok) != FER_STATUS_OK) {
    print_error("preparing the sequence");
    goto out;
  }
  double t_loaded = now_s();
  fprintf(stderr, "loaded in %.2f s: %s, %u layers, %u heads (%u kv), vocab %u; prompt %zu tokens\n", t_loaded - t0,
          info.architecture, info.n_layer, info.n_head, info.n_head_kv, info.n_vocab, n_prompt);
  if (!a.chat) fputs(a.prompt, stdout);
  double t_prefill = 0, t_decode0 = 0;
  size_t n_gen = 0;
  while (n_gen < (size_t)a.max_tokens) {
    fer_status st = n_gen == 0 ? fer_engine_prefill(seq, prompt, n_prompt, logits, info.n_vocab)
                               : fer_engine_decode(e, &seq, &generated[n_gen - 1], 1, logits, info.n_vocab);
    if (st != FER_STATUS_OK) {
      print_error("forward pass");
      goto out;
    }
    if (n_gen == 0) {
      t_prefill = now_s() - t_loaded;
      t_decode0 = now_s();
      fer_matcher *m = NULL; /* the grammar from the first generated token on */
      if (grammar && (fer_engine_seq_set_grammar(seq, grammar) != FER_STATUS_OK ||
                      fer_engine_seq_matcher(seq, &m) != FER_STATUS_OK || fer_sampler_set_matcher(sampler, m) != FER_STATUS_OK)) {
        print_error("the grammar");
        goto out;
      }
    }
    fer_sampling_context ctx = {prompt, n_prompt, generated, n_gen};
    int32_t next = -1;
    if (fer_sampler_sample(sampler, logits, info.n_vocab, &ctx, &next, NULL) != FER_STATUS_OK) {
      print_error("sampling");
      goto out;
    }
    generated[n_gen++] = next;
    if (grammar) {
      if (next == grammar_end) break; /* the grammar allowed the end, and the model took it */
    } else if (!a.ignore_eos && (next == info.eos_id || next == info.eot_id)) {
      break;
    }
    char piece[256];
    size_t len = 0;
    if (fer_detokenizer_push(detok, next, piece, sizeof piece, &len) == FER_STATUS_OK) fwrite(piece, 1, len, stdout);
    fflush(stdout);
  }
  char rest[64];
  size_t len = 0;
  if (fer_detokenizer_flush(detok, rest, sizeof rest, &len) == FER_STATUS_OK) fwrite(rest, 1, len, stdout);
  const double t_decode = now_s() - t_decode0;
  printf("\n");
  fflush(stdout);
  if (grammar && (n_gen == 0 || generated[n_gen - 1] != grammar_end))
    fprintf(stderr, "ferrite generate: stopped at --max-tokens %llu before the grammar's end: the output is incomplete\n",
            (unsigned long long)a.max_tokens);
  print_summary(e, seq, n_prompt, t_prefill, n_gen, t_decode);
  rc = 0;
out:
  fer_detokenizer_free(detok);
  fer_engine_seq_free(seq); /* its matcher first, then the grammar, its vocabulary, the engine */
  fer_grammar_free(grammar);
  fer_grammar_vocab_free(gvocab);
  fer_engine_free(e);
  fer_sampler_free(sampler);
  free(prompt), free(generated), free(logits), free(dry_tokens), free(dry_lengths);
  fer_buffer_free(tiny_image);
  free(env);
  return rc;
}
