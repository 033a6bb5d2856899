/* load_gguf.c: a tokenizer from GGUF metadata (tokenizer.ggml.*), with the pre-tokenizer rules
 * llama.cpp applies for the declared tokenizer.ggml.pre type. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

/* llama.cpp's token types. */
enum { TOKEN_NORMAL = 1, TOKEN_UNKNOWN = 2, TOKEN_CONTROL = 3, TOKEN_USER_DEFINED = 4, TOKEN_UNUSED = 5, TOKEN_BYTE = 6 };

#define GPT2_RE "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"

/* The regex lists, applied one after another with every match and gap kept as its own piece. */
typedef struct pre_rule {
  const char *names[8];
  const char *regexes[4];
  bool ignore_merges;
} pre_rule;

static const pre_rule PRE_RULES[] = {
    {{"default"}, {"[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2_RE, "\\p{N}+", "[0-9][0-9][0-9]"}, false},
    {{"gpt-2", "phi-2", "mpt", "olmo"}, {GPT2_RE}, false},
    {{"llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral"},
     {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
      "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     true},
    {{"qwen2", "deepseek-r1-qwen", "stablelm2"},
     {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
      "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     false},
    {{"smollm", "starcoder", "refact", "command-r", "codeshell"}, {"\\p{N}", GPT2_RE}, false},
    {{"falcon"}, {"[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2_RE, "[0-9][0-9][0-9]"}, false},
};

static const pre_rule *find_rule(const char *name, size_t len) {
  if (len == 0) name = "default", len = 7;
  for (size_t r = 0; r < sizeof(PRE_RULES) / sizeof(PRE_RULES[0]); r++) {
    for (int i = 0; i < 8 && PRE_RULES[r].names[i]; i++) {
      if (strlen(PRE_RULES[r].names[i]) == len && memcmp(PRE_RULES[r].names[i], name, len) == 0) return &PRE_RULES[r];
    }
  }
  return NULL;
}

static fer_status optional_id(const feri_gguf *g, const char *key, uint32_t n, int32_t *out) {
  *out = -1;
  if (feri_gguf_find_kv(g, key) < 0) return FER_STATUS_OK;
  uint32_t v;
  fer_status st = feri_gguf_get_u32(g, key, &v);
  if (st != FER_STATUS_OK) return feri_fail(FER_STATUS_CORRUPT, "%s is not an unsigned integer", key);
  /* Some converters write -1 (as 0xFFFFFFFF) for "none". */
  if (v == UINT32_MAX) return FER_STATUS_OK;
  if (v >= n) return feri_fail(FER_STATUS_CORRUPT, "%s = %u is outside the vocabulary of %u", key, v, n);
  *out = (int32_t)v;
  return FER_STATUS_OK;
}

static bool optional_bool(const feri_gguf *g, const char *key, bool dflt) {
  bool v;
  if (feri_gguf_find_kv(g, key) < 0 || feri_gguf_get_bool(g, key, &v) != FER_STATUS_OK) return dflt;
  return v;
}

/* Control, user-defined and unknown tokens are matched on the raw text before the model runs,
 * as llama.cpp partitions its input (control and unknown ones only when special tokens are
 * parsed). Other tokens keep their text for the model: byte-level texts unmapped to bytes, a text
 * outside the byte alphabet kept as is (the BPE can never produce it, llama.cpp cannot either);
 * when two tokens share a text, lookups find the later one, as llama.cpp's token map does. */
static fer_status load_vocab(fer_tokenizer *t, const feri_gguf *g, int64_t tokens_kv, uint32_t n, const int32_t *types) {
  fer_status st = feri_vocab_init(&t->vocab, n);
  if (st != FER_STATUS_OK) return st;
  uint32_t n_added = 0;
  for (uint32_t i = 0; i < n; i++) {
    n_added += types && (types[i] == TOKEN_CONTROL || types[i] == TOKEN_USER_DEFINED || types[i] == TOKEN_UNKNOWN);
  }
  t->added = calloc(n_added ? n_added : 1, sizeof(*t->added));
  uint8_t *raw = malloc(1 << 16);
  if (!t->added || !raw) {
    free(raw);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "vocabulary");
  }
  for (uint32_t i = 0; i < n && st == FER_STATUS_OK; i++) {
    const char *s;
    size_t len;
    st = feri_gguf_arr_str(g, tokens_kv, i, &s, &len);
    if (st != FER_STATUS_OK) break;
    if (len == 0 || len >= (1 << 16)) {
      st = feri_fail(FER_STATUS_CORRUPT, "token %u has length %zu", i, len);
      break;
    }
    int type = types ? types[i] : TOKEN_NORMAL;
    if (type == TOKEN_CONTROL || type == TOKEN_USER_DEFINED || type == TOKEN_UNKNOWN) {
      feri_added_token *a = &t->added[t->n_added];
      a->content = malloc(len);
      if (!a->content) {
        st = feri_fail(FER_STATUS_OUT_OF_MEMORY, "vocabulary");
        break;
      }
      t->n_added++;
      memcpy(a->content, s, len);
      a->id = i;
      a->len = (uint32_t)len;
      a->special = type != TOKEN_USER_DEFINED;
      st = feri_vocab_set_last_wins(&t->vocab, i, (const uint8_t *)s, len);
      continue;
    }
    size_t rn = t->byte_level ? feri_byte_level_unmap((const uint8_t *)s, len, raw) : SIZE_MAX;
    if (rn != SIZE_MAX) st = feri_vocab_set_last_wins(&t->vocab, i, raw, rn);
    else st = feri_vocab_set_last_wins(&t->vocab, i, (const uint8_t *)s, len);
  }
  free(raw);
  return st;
}

static fer_status load_merges(fer_tokenizer *t, const feri_gguf *g, int64_t merges_kv, uint64_t n) {
  fer_status st = feri_merges_init(&t->merges, (uint32_t)n);
  uint8_t *buf = malloc(1 << 17);
  if (st == FER_STATUS_OK && !buf) st = feri_fail(FER_STATUS_OUT_OF_MEMORY, "merges");
  for (uint64_t r = 0; r < n && st == FER_STATUS_OK; r++) {
    const char *s;
    size_t len;
    st = feri_gguf_arr_str(g, merges_kv, r, &s, &len);
    if (st != FER_STATUS_OK) break;
    const char *sp = len < (1 << 16) ? memchr(s, ' ', len) : NULL;
    if (!sp || sp == s || sp + 1 == s + len || memchr(sp + 1, ' ', (size_t)(s + len - sp - 1))) {
      st = feri_fail(FER_STATUS_CORRUPT, "merge %" PRIu64 " '%.*s' is not two parts", r, (int)(len > 60 ? 60 : len), s);
      break;
    }
    size_t la = (size_t)(sp - s), lb = len - la - 1;
    size_t ra = feri_byte_level_unmap((const uint8_t *)s, la, buf);
    size_t rb = ra == SIZE_MAX ? SIZE_MAX : feri_byte_level_unmap((const uint8_t *)sp + 1, lb, buf + ra);
    int32_t ia = ra == SIZE_MAX ? -1 : feri_vocab_find(&t->vocab, buf, ra);
    int32_t ib = rb == SIZE_MAX ? -1 : feri_vocab_find(&t->vocab, buf + ra, rb);
    int32_t ir = (ia < 0 || ib < 0) ? -1 : feri_vocab_find(&t->vocab, buf, ra + rb);
    if (ir < 0) {
      st = feri_fail(FER_STATUS_CORRUPT, "merge %" PRIu64 " '%.*s': %s is not in the vocabulary", r, (int)(len > 60 ? 60 : len), s,
                     ia < 0 ? "the first part" : ib < 0 ? "the second part" : "the result");
      break;
    }
    st = feri_merges_add(&t->merges, (uint32_t)ia, (uint32_t)ib, (uint32_t)r, (uint32_t)ir);
  }
  free(buf);
  t->n_merges = (uint32_t)n;
  return st;
}

/* gpt2: byte-level BPE over merges, split by the pre-tokenizer type's regex list. */
static fer_status gpt2_model(fer_tokenizer *t, const feri_gguf *g, const pre_rule *rule) {
  int64_t merges_kv = feri_gguf_find_kv(g, "tokenizer.ggml.merges");
  uint32_t et;
  uint64_t n_merges = 0;
  if (merges_kv < 0 || feri_gguf_get_arr(g, "tokenizer.ggml.merges", &et, &n_merges) != FER_STATUS_OK || et != 8 ||
      n_merges > (1u << 27)) {
    return feri_fail(FER_STATUS_CORRUPT, "tokenizer.ggml.merges is missing or not a list of strings");
  }
  fer_status st = load_merges(t, g, merges_kv, n_merges);
  for (int i = 0; i < 4 && rule->regexes[i] && st == FER_STATUS_OK; i++) {
    st = feri_tokenizer_add_split(t, rule->regexes[i], strlen(rule->regexes[i]), FERI_SPLIT_ISOLATED, false);
  }
  return st;
}

static fer_status add_step(void **arr, uint32_t *n, size_t size, const void *step) {
  uint8_t *p = realloc(*arr, (*n + 1) * size);
  if (!p) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "tokenizer");
  memcpy(p + *n * size, step, size);
  *arr = p;
  (*n)++;
  return FER_STATUS_OK;
}

static uint8_t *dup_str(const char *s) {
  size_t n = strlen(s);
  uint8_t *p = malloc(n + 1);
  if (p) memcpy(p, s, n + 1);
  return p;
}

/* llama (SentencePiece BPE): each text segment gets a leading space (add_space_prefix) and its
 * spaces become U+2581, then the whole segment merges by token score; characters outside the
 * vocabulary become <0xAB> byte tokens. Decoding reverses it: U+2581 to spaces, byte tokens to
 * bytes, and the first leading space dropped. */
static fer_status spm_model(fer_tokenizer *t, const feri_gguf *g, uint32_t n) {
  int64_t scores_kv = feri_gguf_find_kv(g, "tokenizer.ggml.scores");
  uint32_t et;
  uint64_t sn;
  if (scores_kv < 0 || feri_gguf_get_arr(g, "tokenizer.ggml.scores", &et, &sn) != FER_STATUS_OK || sn != n) {
    return feri_fail(FER_STATUS_CORRUPT, "tokenizer.ggml.scores is missing or does not have one score per token");
  }
  t->scores = malloc(n * sizeof(float));
  if (!t->scores) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "scores");
  if (feri_gguf_arr_copy_f32(g, scores_kv, t->scores, n) != FER_STATUS_OK) {
    return feri_fail(FER_STATUS_CORRUPT, "tokenizer.ggml.scores is not a list of floats");
  }
  for (uint32_t i = 0; i < n; i++) {
    if (t->scores[i] != t->scores[i]) return feri_fail(FER_STATUS_CORRUPT, "token %u has a NaN score", i);
  }
  bool prefix = optional_bool(g, "tokenizer.ggml.add_space_prefix", true);
  feri_normalizer nm = {0};
  fer_status st = FER_STATUS_OK;
  if (prefix) {
    nm = (feri_normalizer){.kind = FERI_NORM_PREPEND, .a = dup_str(" "), .a_len = 1};
    if (!nm.a) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "tokenizer");
    st = add_step((void **)&t->norms, &t->n_norms, sizeof(nm), &nm);
    if (st != FER_STATUS_OK) free(nm.a);
  }
  nm = (feri_normalizer){.kind = FERI_NORM_REPLACE, .a = dup_str(" "), .a_len = 1, .b = dup_str("\xE2\x96\x81"), .b_len = 3};
  if (st == FER_STATUS_OK && (!nm.a || !nm.b)) st = feri_fail(FER_STATUS_OUT_OF_MEMORY, "tokenizer");
  if (st == FER_STATUS_OK) st = add_step((void **)&t->norms, &t->n_norms, sizeof(nm), &nm);
  if (st != FER_STATUS_OK) {
    free(nm.a);
    free(nm.b);
    return st;
  }
  feri_decoder_step d = {.kind = FERI_DEC_REPLACE, .a = dup_str("\xE2\x96\x81"), .a_len = 3, .b = dup_str(" "), .b_len = 1};
  if (!d.a || !d.b || add_step((void **)&t->decoders, &t->n_decoders, sizeof(d), &d) != FER_STATUS_OK) {
    free(d.a);
    free(d.b);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "tokenizer");
  }
  feri_decoder_step plain[2] = {{.kind = FERI_DEC_BYTE_FALLBACK}, {.kind = FERI_DEC_FUSE}};
  for (int i = 0; i < 2; i++) {
    if (add_step((void **)&t->decoders, &t->n_decoders, sizeof(plain[i]), &plain[i]) != FER_STATUS_OK) {
      return feri_fail(FER_STATUS_OUT_OF_MEMORY, "tokenizer");
    }
  }
  if (prefix) {
    d = (feri_decoder_step){.kind = FERI_DEC_STRIP, .a = dup_str(" "), .a_len = 1, .start = 1};
    if (!d.a || add_step((void **)&t->decoders, &t->n_decoders, sizeof(d), &d) != FER_STATUS_OK) {
      free(d.a);
      return feri_fail(FER_STATUS_OUT_OF_MEMORY, "tokenizer");
    }
  }
  return FER_STATUS_OK;
}

static fer_status from_gguf(fer_tokenizer *t, const feri_gguf *g) {
  const char *model;
  size_t model_len;
  if (feri_gguf_get_str(g, "tokenizer.ggml.model", &model, &model_len) != FER_STATUS_OK) {
    return feri_fail(FER_STATUS_BAD_FORMAT, "the file has no tokenizer (tokenizer.ggml.model)");
  }
  bool gpt2 = model_len == 4 && memcmp(model, "gpt2", 4) == 0;
  bool spm = model_len == 5 && memcmp(model, "llama", 5) == 0;
  if (!gpt2 && !spm) {
    return feri_fail(FER_STATUS_UNSUPPORTED, "tokenizer model '%.*s' (gpt2 and llama are supported)", (int)(model_len > 40 ? 40 : model_len), model);
  }
  const pre_rule *rule = NULL;
  if (gpt2) {
    const char *pre = "";
    size_t pre_len = 0;
    if (feri_gguf_find_kv(g, "tokenizer.ggml.pre") >= 0 &&
        feri_gguf_get_str(g, "tokenizer.ggml.pre", &pre, &pre_len) != FER_STATUS_OK) {
      return feri_fail(FER_STATUS_CORRUPT, "tokenizer.ggml.pre is not a string");
    }
    rule = find_rule(pre, pre_len);
    if (!rule) return feri_fail(FER_STATUS_UNSUPPORTED, "pre-tokenizer type '%.*s'", (int)(pre_len > 40 ? 40 : pre_len), pre);
  }

  int64_t tokens_kv = feri_gguf_find_kv(g, "tokenizer.ggml.tokens");
  uint32_t et;
  uint64_t n;
  if (tokens_kv < 0 || feri_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n) != FER_STATUS_OK || et != 8) {
    return feri_fail(FER_STATUS_CORRUPT, "tokenizer.ggml.tokens is missing or not a list of strings");
  }
  if (n == 0 || n > (1u << 28)) return feri_fail(FER_STATUS_CORRUPT, "tokenizer.ggml.tokens has %" PRIu64 " entries", n);
  int32_t *types = NULL;
  int64_t types_kv = feri_gguf_find_kv(g, "tokenizer.ggml.token_type");
  if (types_kv >= 0) {
    uint64_t tn;
    if (feri_gguf_get_arr(g, "tokenizer.ggml.token_type", &et, &tn) != FER_STATUS_OK || tn != n) {
      return feri_fail(FER_STATUS_CORRUPT, "tokenizer.ggml.token_type does not have one entry per token");
    }
    types = malloc(n * sizeof(int32_t));
    if (!types) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "token types");
    fer_status st = feri_gguf_arr_copy_i32(g, types_kv, types, n);
    if (st != FER_STATUS_OK) {
      free(types);
      return feri_fail(FER_STATUS_CORRUPT, "tokenizer.ggml.token_type is not a list of integers");
    }
  }
  t->byte_level = gpt2;
  t->model = gpt2 ? FERI_MODEL_BPE : FERI_MODEL_SPM;
  t->byte_fallback = spm;
  t->ignore_merges = gpt2 && rule->ignore_merges;
  t->unknown_is_barrier = true;
  t->llama_cpp_unicode = true;
  fer_status st = load_vocab(t, g, tokens_kv, (uint32_t)n, types);
  free(types);
  if (st != FER_STATUS_OK) return st;
  st = gpt2 ? gpt2_model(t, g, rule) : spm_model(t, g, (uint32_t)n);
  if (st == FER_STATUS_OK) st = optional_id(g, "tokenizer.ggml.bos_token_id", (uint32_t)n, &t->bos_id);
  if (st == FER_STATUS_OK) st = optional_id(g, "tokenizer.ggml.eos_token_id", (uint32_t)n, &t->eos_id);
  if (st == FER_STATUS_OK) st = optional_id(g, "tokenizer.ggml.padding_token_id", (uint32_t)n, &t->pad_id);
  /* Reported, but llama.cpp's BPE drops bytes the vocabulary cannot spell instead of emitting it. */
  if (st == FER_STATUS_OK) st = optional_id(g, "tokenizer.ggml.unknown_token_id", (uint32_t)n, &t->unk_id);
  if (st != FER_STATUS_OK) return st;
  /* llama.cpp adds BOS by default for SPM and the llama3 family; the file's flags override. */
  bool add_bos = optional_bool(g, "tokenizer.ggml.add_bos_token", spm || rule->ignore_merges);
  bool add_eos = optional_bool(g, "tokenizer.ggml.add_eos_token", false);
  if (add_bos && t->bos_id >= 0) {
    t->prefix_ids = malloc(sizeof(int32_t));
    if (!t->prefix_ids) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "tokenizer");
    t->prefix_ids[0] = t->bos_id;
    t->n_prefix = 1;
  }
  if (add_eos && t->eos_id >= 0) {
    t->suffix_ids = malloc(sizeof(int32_t));
    if (!t->suffix_ids) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "tokenizer");
    t->suffix_ids[0] = t->eos_id;
    t->n_suffix = 1;
  }
  return feri_tokenizer_finish(t);
}

fer_status feri_tokenizer_from_gguf(const feri_gguf *g, fer_tokenizer **out) {
  *out = NULL;
  fer_tokenizer *t = NULL;
  fer_status st = feri_tokenizer_alloc(&t);
  if (st == FER_STATUS_OK) st = from_gguf(t, g);
  if (st != FER_STATUS_OK) {
    feri_tokenizer_destroy(t);
    return st;
  }
  *out = t;
  return FER_STATUS_OK;
}

fer_status fer_tokenizer_from_gguf_file(const char *path, fer_tokenizer **out) {
  feri_error_clear();
  if (out) *out = NULL;
  if (!path || !out) return feri_fail(FER_STATUS_NULL_ARG, "fer_tokenizer_from_gguf_file: NULL path or out");
  feri_gguf *g = NULL;
  fer_status st = feri_gguf_open_file(path, &g);
  if (st != FER_STATUS_OK) return st;
  st = feri_tokenizer_from_gguf(g, out);
  feri_gguf_close(g);
  return st;
}
