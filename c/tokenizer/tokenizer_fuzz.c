/* tokenizer_fuzz.c: libFuzzer harnesses of the tokenizer, one per build mode
 * (scripts/fuzz-tokenizer.sh builds each):
 *   FERI_FUZZ_ENCODE  arbitrary bytes as text, with flags from the first byte, through encode,
 *                     decode and the streaming detokenizer of a fixed tokenizer (the file named by
 *                     FERRITE_FUZZ_TOKENIZER, else a small built-in one). Checks, aborting on a
 *                     violation: a status only for ill-formed UTF-8 without the replace flag;
 *                     decode(encode(x)) == x where the tokenizer keeps text as is; streamed == decoded.
 *   FERI_FUZZ_JSON    arbitrary bytes as a tokenizer.json; a tokenizer that loads encodes a few texts.
 *   FERI_FUZZ_GGUF    arbitrary bytes as a GGUF image whose metadata is turned into a tokenizer.
 * With FERI_FUZZ_SEED_MAIN it is instead a program that writes seed files into a directory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferrite.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

/* A small byte-level tokenizer with a normalizer-free pipeline, a regex split, added tokens with
 * lstrip/rstrip, and merges. */
static const char BUILTIN_JSON[] =
    "{\"added_tokens\": ["
    "{\"id\": 300, \"content\": \"<|s|>\", \"special\": true, \"normalized\": false},"
    "{\"id\": 301, \"content\": \"<m>\", \"special\": false, \"lstrip\": true, \"rstrip\": true, \"normalized\": false}],"
    "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": ["
    "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"\\\\p{N}{1,3}| ?\\\\p{L}+|\\\\s+(?!\\\\S)|\\\\s+| ?[^\\\\s\\\\p{L}\\\\p{N}]+\"},"
    " \"behavior\": \"Isolated\", \"invert\": false},"
    "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": false}]},"
    "\"decoder\": {\"type\": \"ByteLevel\"},"
    "\"model\": {\"type\": \"BPE\", \"vocab\": VOCAB, \"merges\": [\"h e\", \"l l\", \"he ll\", \"Ġ t\", \"Ġt h\"]}}";

#if defined(FERI_FUZZ_ENCODE) || defined(FERI_FUZZ_SEED_MAIN)
/* BUILTIN_JSON with VOCAB replaced by the 256 byte tokens and the merge results. */
static char *builtin_json(void) {
  size_t cap = 64 * 1024, n = 0;
  char *v = malloc(cap);
  if (!v) abort();
  n += (size_t)snprintf(v + n, cap - n, "{");
  for (int b = 0; b < 256; b++) {
    uint8_t c[4];
    uint32_t cp = feri_byte_to_char((uint8_t)b);
    size_t k = cp < 0x80 ? (c[0] = (uint8_t)cp, 1) : (c[0] = (uint8_t)(0xC0 | cp >> 6), c[1] = (uint8_t)(0x80 | (cp & 0x3F)), 2);
    n += (size_t)snprintf(v + n, cap - n, "\"");
    for (size_t i = 0; i < k; i++) {
      if (c[i] == '"' || c[i] == '\\') v[n++] = '\\';
      v[n++] = (char)c[i];
    }
    n += (size_t)snprintf(v + n, cap - n, "\": %d, ", b);
  }
  n += (size_t)snprintf(v + n, cap - n, "\"he\": 256, \"ll\": 257, \"hell\": 258, \"Ġt\": 259, \"Ġth\": 260}");
  const char *at = strstr(BUILTIN_JSON, "VOCAB");
  char *out = malloc(sizeof(BUILTIN_JSON) + n);
  if (!out) abort();
  size_t head = (size_t)(at - BUILTIN_JSON);
  memcpy(out, BUILTIN_JSON, head);
  memcpy(out + head, v, n);
  strcpy(out + head + n, at + 5);
  free(v);
  return out;
}
#endif

#ifdef FERI_FUZZ_ENCODE
static fer_tokenizer *tok;
static bool keeps_text; /* decode(encode(x)) == x for every well-formed x */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  const char *path = getenv("FERRITE_FUZZ_TOKENIZER");
  fer_status st;
  if (path && *path) {
    size_t n = strlen(path);
    st = (n > 5 && strcmp(path + n - 5, ".gguf") == 0) ? fer_tokenizer_from_gguf_file(path, &tok)
                                                       : fer_tokenizer_from_json_file(path, &tok);
  } else {
    char *json = builtin_json();
    st = fer_tokenizer_from_json(json, strlen(json), &tok);
    free(json);
  }
  if (st != FER_STATUS_OK) abort();
  /* text comes back unchanged unless something is meant to change it: normalizers, decoders that
   * strip, bytes the vocabulary cannot spell, added tokens that absorb whitespace */
  keeps_text = tok->n_norms == 0 && tok->n_decoders == 0 && !tok->unknown_is_barrier;
  for (uint32_t i = 0; i < tok->n_added; i++) keeps_text = keeps_text && !tok->added[i].lstrip && !tok->added[i].rstrip;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  uint32_t flags = data[0] & 7;
  const char *text = (const char *)data + 1;
  size_t len = size - 1;
  size_t n = 0;
  fer_status st = fer_tokenizer_encode(tok, text, len, flags, NULL, 0, &n);
  if (st == FER_STATUS_INVALID_UTF8) {
    if (flags & FER_ENCODE_REPLACE_INVALID_UTF8) abort();
    return 0;
  }
  if (st != FER_STATUS_OK && st != FER_STATUS_BUFFER_TOO_SMALL) abort();
  int32_t *ids = malloc((n ? n : 1) * sizeof(int32_t));
  size_t n2 = 0;
  if (!ids || fer_tokenizer_encode(tok, text, len, flags, ids, n, &n2) != FER_STATUS_OK || n2 != n) abort();
  size_t out_len = 0;
  st = fer_tokenizer_decode(tok, ids, n, 0, NULL, 0, &out_len);
  if (st != FER_STATUS_OK && st != FER_STATUS_BUFFER_TOO_SMALL) abort();
  char *out = malloc(out_len + 1);
  if (!out || fer_tokenizer_decode(tok, ids, n, 0, out, out_len, &out_len) != FER_STATUS_OK) abort();
  bool plain = (flags & (FER_ENCODE_ADD_SPECIAL | FER_ENCODE_REPLACE_INVALID_UTF8)) == 0;
  if (keeps_text && plain && (out_len != len || memcmp(out, text, len) != 0)) abort();
  /* streaming, one id at a time, equals the full decode */
  fer_detokenizer *d = NULL;
  if (fer_detokenizer_create(tok, 0, &d) != FER_STATUS_OK) abort();
  char *streamed = malloc(out_len + 64);
  size_t w = 0;
  for (size_t i = 0; i < n; i++) {
    size_t k = 0;
    if (fer_detokenizer_push(d, ids[i], streamed + w, out_len + 64 - w, &k) != FER_STATUS_OK) abort();
    w += k;
  }
  size_t k = 0;
  if (fer_detokenizer_flush(d, streamed + w, out_len + 64 - w, &k) != FER_STATUS_OK) abort();
  w += k;
  if (w != out_len || memcmp(streamed, out, out_len) != 0) abort();
  fer_detokenizer_free(d);
  free(streamed);
  free(out);
  free(ids);
  return 0;
}
#endif

#if defined(FERI_FUZZ_JSON) || defined(FERI_FUZZ_GGUF)
static void exercise(fer_tokenizer *t) {
  static const char *texts[] = {"Hello world! 123", "<|s|> <m> x", "\xe6\x97\xa5\xe6\x9c\xac  \t\n", ""};
  for (int i = 0; i < 4; i++) {
    int32_t ids[256];
    size_t n = 0;
    fer_status st = fer_tokenizer_encode(t, texts[i], strlen(texts[i]), FER_ENCODE_ADD_SPECIAL, ids, 256, &n);
    if (st == FER_STATUS_OK) {
      char out[4096];
      size_t len;
      fer_tokenizer_decode(t, ids, n, FER_DECODE_REPLACE_INVALID_UTF8, out, sizeof(out), &len);
    }
  }
}
#endif

#ifdef FERI_FUZZ_JSON
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fer_tokenizer *t = NULL;
  if (fer_tokenizer_from_json((const char *)data, size, &t) != FER_STATUS_OK) {
    if (t) abort();
    return 0;
  }
  exercise(t);
  if (fer_tokenizer_free(t) != FER_STATUS_OK) abort();
  return 0;
}
#endif

#ifdef FERI_FUZZ_GGUF
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  feri_gguf *g = NULL;
  if (feri_gguf_open(data, size, &g) != FER_STATUS_OK) return 0;
  fer_tokenizer *t = NULL;
  if (feri_tokenizer_from_gguf(g, &t) == FER_STATUS_OK) {
    exercise(t);
    fer_tokenizer_free(t);
  } else if (t) {
    abort();
  }
  feri_gguf_close(g);
  return 0;
}
#endif

#ifdef FERI_FUZZ_SEED_MAIN
/* ---- seeds: the built-in tokenizer.json, and a GGUF image with a gpt2 tokenizer ------------- */
typedef struct wbuf {
  uint8_t *p;
  size_t n, cap;
} wbuf;

static void put(wbuf *b, const void *p, size_t n) {
  if (b->n + n > b->cap) {
    b->cap = (b->n + n) * 2;
    b->p = realloc(b->p, b->cap);
    if (!b->p) abort();
  }
  memcpy(b->p + b->n, p, n);
  b->n += n;
}
static void u32(wbuf *b, uint32_t v) { put(b, &v, 4); }
static void u64(wbuf *b, uint64_t v) { put(b, &v, 8); }
static void str(wbuf *b, const char *s, size_t n) {
  u64(b, n);
  put(b, s, n);
}
static void key(wbuf *b, const char *k, uint32_t type) {
  str(b, k, strlen(k));
  u32(b, type);
}

static void write_file(const char *dir, const char *name, const void *p, size_t n) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
    perror(path);
    exit(1);
  }
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s json|gguf DIR\n", argv[0]);
    return 2;
  }
  if (strcmp(argv[1], "json") == 0) {
    char *json = builtin_json();
    write_file(argv[2], "builtin.json", json, strlen(json));
    free(json);
    return 0;
  }
  static const char *pres[] = {"smollm", "llama-bpe", "qwen2", "gpt-2", "default"};
  for (int p = 0; p < 5; p++) {
    wbuf b = {0};
    put(&b, "GGUF", 4);
    u32(&b, 3);
    u64(&b, 0); /* tensors */
    u64(&b, 7); /* kv pairs */
    key(&b, "tokenizer.ggml.model", 8);
    str(&b, "gpt2", 4);
    key(&b, "tokenizer.ggml.pre", 8);
    str(&b, pres[p], strlen(pres[p]));
    key(&b, "tokenizer.ggml.tokens", 9);
    u32(&b, 8);
    u64(&b, 256 + 3);
    for (int t = 0; t < 256; t++) {
      uint8_t c[2];
      uint32_t cp = feri_byte_to_char((uint8_t)t);
      size_t k = cp < 0x80 ? (c[0] = (uint8_t)cp, 1) : (c[0] = (uint8_t)(0xC0 | cp >> 6), c[1] = (uint8_t)(0x80 | (cp & 0x3F)), 2);
      str(&b, (const char *)c, k);
    }
    str(&b, "he", 2);
    str(&b, "hel", 3);
    str(&b, "<|s|>", 5);
    key(&b, "tokenizer.ggml.token_type", 9);
    u32(&b, 5);
    u64(&b, 256 + 3);
    for (int t = 0; t < 256 + 3; t++) u32(&b, t == 258 ? 3 : 1);
    key(&b, "tokenizer.ggml.merges", 9);
    u32(&b, 8);
    u64(&b, 2);
    str(&b, "h e", 3);
    str(&b, "he l", 4);
    key(&b, "tokenizer.ggml.bos_token_id", 4);
    u32(&b, 258);
    key(&b, "tokenizer.ggml.add_bos_token", 7);
    uint8_t yes = 1;
    put(&b, &yes, 1);
    char name[64];
    snprintf(name, sizeof(name), "tok-%s.gguf", pres[p]);
    write_file(argv[2], name, b.p, b.n);
    free(b.p);
  }
  /* a SentencePiece vocabulary: <unk>, <s>, </s>, 256 byte tokens, a few pieces with scores */
  static const char *pieces[] = {"\xE2\x96\x81", "h", "e", "l", "o", "he", "ll", "\xE2\x96\x81he", "hell", "hello"};
  uint32_t np = sizeof(pieces) / sizeof(pieces[0]), n = 3 + 256 + np;
  wbuf b = {0};
  put(&b, "GGUF", 4);
  u32(&b, 3);
  u64(&b, 0);
  u64(&b, 5);
  key(&b, "tokenizer.ggml.model", 8);
  str(&b, "llama", 5);
  key(&b, "tokenizer.ggml.tokens", 9);
  u32(&b, 8);
  u64(&b, n);
  str(&b, "<unk>", 5);
  str(&b, "<s>", 3);
  str(&b, "</s>", 4);
  for (int t = 0; t < 256; t++) {
    char nm[8];
    snprintf(nm, sizeof(nm), "<0x%02X>", t);
    str(&b, nm, 6);
  }
  for (uint32_t i = 0; i < np; i++) str(&b, pieces[i], strlen(pieces[i]));
  key(&b, "tokenizer.ggml.scores", 9);
  u32(&b, 6);
  u64(&b, n);
  for (uint32_t i = 0; i < n; i++) {
    float f = i < 259 ? 0.0f : -(float)(i - 259);
    put(&b, &f, 4);
  }
  key(&b, "tokenizer.ggml.token_type", 9);
  u32(&b, 5);
  u64(&b, n);
  for (uint32_t i = 0; i < n; i++) u32(&b, i == 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : 1);
  key(&b, "tokenizer.ggml.bos_token_id", 4);
  u32(&b, 1);
  write_file(argv[2], "tok-spm.gguf", b.p, b.n);
  free(b.p);
  return 0;
}
#endif
