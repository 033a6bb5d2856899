/* tiny.c: see tiny.h. Layout: GGUF v3, metadata, tensor infos, then the F32 data, each tensor at a
 * 32-byte aligned offset. Weights are uniform in [-0.5, 0.5) from a xorshift generator, RMSNorm
 * weights 1, qwen3's QK-norm weights uniform in [0.5, 1.5). */
#include "model/tiny.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "tokenizer/tokenizer.h"

enum { BYTES = 256, MERGES = 4, VOCAB = BYTES + MERGES + 1 };

/* The shape of one tiny model. */
typedef struct tiny_shape {
  uint32_t layers, embd, heads, heads_kv, ff, hd; /* hd 0: embd / heads */
  uint32_t window;                                /* gemma3: attention.sliding_window */
  uint32_t pooling;                               /* pooling_type; 0: no key */
} tiny_shape;

typedef struct wbuf {
  uint8_t *p;
  size_t n, cap;
  int failed;
} wbuf;

static void put(wbuf *b, const void *p, size_t n) {
  if (b->failed) return;
  if (b->n + n > b->cap) {
    size_t cap = (b->n + n) * 2 + 4096;
    uint8_t *q = realloc(b->p, cap);
    if (!q) {
      b->failed = 1;
      return;
    }
    b->p = q;
    b->cap = cap;
  }
  memcpy(b->p + b->n, p, n);
  b->n += n;
}
static void u32(wbuf *b, uint32_t v) { put(b, &v, 4); }
static void u64(wbuf *b, uint64_t v) { put(b, &v, 8); }
static void str(wbuf *b, const char *s) {
  u64(b, strlen(s));
  put(b, s, strlen(s));
}
static void kv_u32(wbuf *b, const char *k, uint32_t v) {
  str(b, k);
  u32(b, 4);
  u32(b, v);
}
static void kv_f32(wbuf *b, const char *k, float v) {
  str(b, k);
  u32(b, 6);
  put(b, &v, 4);
}
static void kv_str(wbuf *b, const char *k, const char *v) {
  str(b, k);
  u32(b, 8);
  str(b, v);
}

/* The byte-level text of byte x (GPT-2's alphabet). */
static void byte_text(int x, char out[3]) {
  uint32_t cp = feri_byte_to_char((uint8_t)x);
  if (cp < 0x80) {
    out[0] = (char)cp, out[1] = 0;
  } else {
    out[0] = (char)(0xC0 | cp >> 6), out[1] = (char)(0x80 | (cp & 0x3F)), out[2] = 0;
  }
}

typedef struct tensor_def {
  char name[48];
  uint32_t n_dims;
  uint64_t dims[2];
  int init; /* 0: uniform in [-0.5, 0.5); 1: all 1 (RMSNorm weights); 2: uniform in [0.5, 1.5) */
} tensor_def;

static void add_tensor(tensor_def *t, uint32_t *nt, const char *name, uint64_t d0, uint64_t d1, int init) {
  tensor_def *d = &t[(*nt)++];
  snprintf(d->name, sizeof d->name, "%s", name);
  d->n_dims = d1 == 1 ? 1 : 2;
  d->dims[0] = d0, d->dims[1] = d1;
  d->init = init;
}

static fer_status image(const char *arch, const tiny_shape *sh, uint64_t seed, void **out, size_t *out_size) {
  *out = NULL;
  *out_size = 0;
  const int qwen2 = strcmp(arch, "qwen2") == 0, qwen3 = strcmp(arch, "qwen3") == 0, gemma3 = strcmp(arch, "gemma3") == 0;
  const uint32_t LAYERS = sh->layers, EMBD = sh->embd, HEADS = sh->heads, HEADS_KV = sh->heads_kv, FF = sh->ff;
  const uint64_t hd = sh->hd ? sh->hd : (uint64_t)EMBD / HEADS, qd = hd * HEADS, kvd = hd * HEADS_KV;
  tensor_def *t = malloc((3 + 16 * (size_t)LAYERS) * sizeof *t);
  if (!t) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "tiny model");
  uint32_t nt = 0;
  add_tensor(t, &nt, "token_embd.weight", EMBD, VOCAB, 0);
  add_tensor(t, &nt, "output_norm.weight", EMBD, 1, 1);
  for (uint32_t l = 0; l < LAYERS; l++) {
    char n[48];
#define NAME(x) (snprintf(n, sizeof n, "blk.%u.%s", l, x), n)
    add_tensor(t, &nt, NAME("attn_norm.weight"), EMBD, 1, 1);
    add_tensor(t, &nt, NAME("ffn_norm.weight"), EMBD, 1, 1);
    add_tensor(t, &nt, NAME("attn_q.weight"), EMBD, qd, 0);
    add_tensor(t, &nt, NAME("attn_k.weight"), EMBD, kvd, 0);
    add_tensor(t, &nt, NAME("attn_v.weight"), EMBD, kvd, 0);
    add_tensor(t, &nt, NAME("attn_output.weight"), qd, EMBD, 0);
    add_tensor(t, &nt, NAME("ffn_gate.weight"), EMBD, FF, 0);
    add_tensor(t, &nt, NAME("ffn_up.weight"), EMBD, FF, 0);
    add_tensor(t, &nt, NAME("ffn_down.weight"), FF, EMBD, 0);
    if (qwen2) {
      add_tensor(t, &nt, NAME("attn_q.bias"), qd, 1, 0);
      add_tensor(t, &nt, NAME("attn_k.bias"), kvd, 1, 0);
      add_tensor(t, &nt, NAME("attn_v.bias"), kvd, 1, 0);
    }
    if (qwen3 || gemma3) {
      add_tensor(t, &nt, NAME("attn_q_norm.weight"), hd, 1, 2);
      add_tensor(t, &nt, NAME("attn_k_norm.weight"), hd, 1, 2);
    }
    if (gemma3) {
      add_tensor(t, &nt, NAME("post_attention_norm.weight"), EMBD, 1, 2);
      add_tensor(t, &nt, NAME("post_ffw_norm.weight"), EMBD, 1, 2);
    }
#undef NAME
  }
  wbuf b = {0};
  put(&b, "GGUF", 4);
  u32(&b, 3);
  u64(&b, nt);
  u64(&b, (qwen3 || gemma3 ? 16 : 14) + (gemma3 ? 1 : 0) + (sh->pooling ? 1 : 0));
  char k[64];
#define KEY(x) (snprintf(k, sizeof k, "%s.%s", arch, x), k)
  kv_str(&b, "general.architecture", arch);
  kv_u32(&b, KEY("block_count"), LAYERS);
  kv_u32(&b, KEY("context_length"), 2048);
  if (sh->pooling) kv_u32(&b, KEY("pooling_type"), sh->pooling);
  kv_u32(&b, KEY("embedding_length"), EMBD);
  kv_u32(&b, KEY("feed_forward_length"), FF);
  kv_u32(&b, KEY("attention.head_count"), HEADS);
  kv_u32(&b, KEY("attention.head_count_kv"), HEADS_KV);
  kv_f32(&b, KEY("attention.layer_norm_rms_epsilon"), 1e-5f);
  kv_f32(&b, KEY("rope.freq_base"), 10000.0f);
  if (qwen3 || gemma3) {
    kv_u32(&b, KEY("attention.key_length"), (uint32_t)hd);
    kv_u32(&b, KEY("attention.value_length"), (uint32_t)hd);
  }
  if (gemma3) kv_u32(&b, KEY("attention.sliding_window"), sh->window);
#undef KEY
  kv_str(&b, "tokenizer.ggml.model", "gpt2");
  kv_str(&b, "tokenizer.ggml.pre", "smollm");
  str(&b, "tokenizer.ggml.tokens");
  u32(&b, 9);
  u32(&b, 8);
  u64(&b, VOCAB);
  for (int x = 0; x < BYTES; x++) {
    char txt[3];
    byte_text(x, txt);
    str(&b, txt);
  }
  static const char *merged[MERGES] = {"th", "he", "the", "Ġthe"};
  static const char *merges[MERGES] = {"t h", "h e", "th e", "Ġ the"};
  for (int i = 0; i < MERGES; i++) str(&b, merged[i]);
  str(&b, "<|endoftext|>");
  str(&b, "tokenizer.ggml.merges");
  u32(&b, 9);
  u32(&b, 8);
  u64(&b, MERGES);
  for (int i = 0; i < MERGES; i++) str(&b, merges[i]);
  kv_u32(&b, "tokenizer.ggml.eos_token_id", VOCAB - 1);
  /* tensor infos, data offsets aligned to 32 */
  uint64_t off = 0;
  for (uint32_t i = 0; i < nt; i++) {
    str(&b, t[i].name);
    u32(&b, t[i].n_dims);
    for (uint32_t d = 0; d < t[i].n_dims; d++) u64(&b, t[i].dims[d]);
    u32(&b, 0); /* F32 */
    u64(&b, off);
    off += (t[i].dims[0] * (t[i].n_dims == 2 ? t[i].dims[1] : 1) * 4 + 31) / 32 * 32;
  }
  while (b.n % 32) put(&b, "", 1);
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (uint32_t i = 0; i < nt; i++) {
    uint64_t n = t[i].dims[0] * (t[i].n_dims == 2 ? t[i].dims[1] : 1);
    for (uint64_t e = 0; e < n; e++) {
      state ^= state << 13, state ^= state >> 7, state ^= state << 17;
      const float u = (float)((state >> 40) & 0xFFFFFF) / 16777216.0f;
      const float v = t[i].init == 1 ? 1.0f : t[i].init == 2 ? u + 0.5f : u - 0.5f;
      put(&b, &v, 4);
    }
    while (b.n % 32) put(&b, "", 1);
  }
  free(t);
  if (b.failed) {
    free(b.p);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "tiny model");
  }
  *out = b.p;
  *out_size = b.n;
  return FER_STATUS_OK;
}

fer_status feri_tiny_model_image(const char *arch, uint64_t seed, void **out, size_t *out_size) {
  *out = NULL;
  *out_size = 0;
  if (strcmp(arch, "qwen2") != 0 && strcmp(arch, "qwen3") != 0 && strcmp(arch, "llama") != 0 && strcmp(arch, "gemma3") != 0)
    return feri_fail(FER_STATUS_INVALID_ARG, "tiny model: architecture '%s' (llama, qwen2, qwen3 or gemma3)", arch);
  /* qwen3 decouples the head size from the embedding (key_length): twice embd / heads here;
   * gemma3 as well, with 6 layers (five local, one global) and a window of 16 */
  const int decoupled = strcmp(arch, "qwen3") == 0 || strcmp(arch, "gemma3") == 0;
  tiny_shape sh = {2, 32, 4, 2, 64, decoupled ? 16 : 0, 0, 0};
  if (strcmp(arch, "gemma3") == 0) sh.layers = 6, sh.window = 16;
  return image(arch, &sh, seed, out, out_size);
}

fer_status feri_tiny_gemma3_image(uint64_t seed, uint32_t layers, uint32_t head_dim, uint32_t window, void **out,
                                  size_t *out_size) {
  *out = NULL;
  *out_size = 0;
  if (layers == 0 || layers > 64 || head_dim == 0 || head_dim % 2 || head_dim > 512)
    return feri_fail(FER_STATUS_INVALID_ARG, "tiny gemma3: %u layers (1 .. 64), head size %u (even, up to 512)", layers, head_dim);
  const tiny_shape sh = {layers, 32, 2, 1, 64, head_dim, window, 0};
  return image("gemma3", &sh, seed, out, out_size);
}

fer_status feri_tiny_embedding_image(uint64_t seed, uint32_t pooling, void **out, size_t *out_size) {
  *out = NULL;
  *out_size = 0;
  const tiny_shape sh = {2, 32, 4, 2, 64, 0, 0, pooling};
  return image("llama", &sh, seed, out, out_size);
}

fer_status feri_tiny_llama_image(uint64_t seed, void **out, size_t *out_size) {
  return feri_tiny_model_image("llama", seed, out, out_size);
}
