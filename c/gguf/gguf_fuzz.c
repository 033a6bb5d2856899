/* gguf_fuzz.c: libFuzzer harness of the GGUF parser. Opens the input as an image and, when it
 * parses, walks every accessor over every pair, array element and tensor, aborting when one hands
 * out memory outside the image or contradicts another. Built and run by scripts/fuzz-gguf.sh
 * (clang -fsanitize=fuzzer,address,undefined).
 *
 * Built with -DFERI_GGUF_SEED_MAIN instead, it is a program writing a few valid images (the
 * fuzzer's seeds) into the directory named by its argument. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"

static const uint8_t *img_lo, *img_hi;

static void inside(const void *p, uint64_t n) {
  const uint8_t *b = p;
  if (n == 0) return;
  if (b < img_lo || b > img_hi || n > (uint64_t)(img_hi - b)) abort();
  volatile uint8_t first = b[0], last = b[n - 1]; /* ASan checks both */
  (void)first, (void)last;
}

static void walk_kv(const feri_gguf *g, int64_t i) {
  const char *key;
  size_t key_len;
  uint32_t type;
  if (feri_gguf_kv_key(g, i, &key, &key_len) != FER_STATUS_OK) abort();
  if (feri_gguf_kv_type(g, i, &type) != FER_STATUS_OK) abort();
  inside(key, key_len);
  if (key_len == 0 || memchr(key, 0, key_len) != NULL) abort();
  if (feri_gguf_find_kv_n(g, key, key_len) != i) abort();
  char *k = malloc(key_len + 1);
  if (k == NULL) return;
  memcpy(k, key, key_len);
  k[key_len] = '\0';
  if (feri_gguf_find_kv(g, k) != i) abort();

  uint32_t u32;
  int32_t i32;
  uint64_t u64;
  float f;
  bool b;
  const char *s;
  size_t n;
  (void)feri_gguf_get_u32(g, k, &u32);
  (void)feri_gguf_get_i32(g, k, &i32);
  (void)feri_gguf_get_u64(g, k, &u64);
  (void)feri_gguf_get_f32(g, k, &f);
  (void)feri_gguf_get_bool(g, k, &b);
  if (feri_gguf_get_str(g, k, &s, &n) == FER_STATUS_OK) {
    if (type != FERI_GGUF_STRING) abort();
    inside(s, n);
  }
  uint32_t et;
  uint64_t count;
  if (feri_gguf_get_arr(g, k, &et, &count) == FER_STATUS_OK) {
    if (type != FERI_GGUF_ARRAY) abort();
    if (et == FERI_GGUF_STRING) {
      for (uint64_t e = 0; e < count; e++) {
        if (feri_gguf_arr_str(g, i, e, &s, &n) != FER_STATUS_OK) abort();
        inside(s, n);
      }
      if (feri_gguf_arr_str(g, i, count, &s, &n) != FER_STATUS_INVALID_ARG) abort();
    } else {
      const void *raw;
      uint64_t c2;
      uint32_t et2;
      if (feri_gguf_arr_data(g, i, &et2, &raw, &c2) != FER_STATUS_OK || et2 != et || c2 != count)
        abort();
      inside(raw, count * feri_gguf_type_size(et));
      /* count elements fit in the image, so this buffer is at most 4x its size */
      void *out = malloc(count ? count * sizeof(int32_t) : 1);
      if (out != NULL) {
        (void)feri_gguf_arr_copy_i32(g, i, out, count);
        (void)feri_gguf_arr_copy_f32(g, i, out, count);
        free(out);
      }
    }
  }
  free(k);
  char line[96];
  size_t len;
  fer_status st = feri_gguf_kv_describe(g, i, line, sizeof line, &len);
  if ((st != FER_STATUS_OK && st != FER_STATUS_BUFFER_TOO_SMALL) || strlen(line) >= sizeof line)
    abort();
}

static void walk_tensor(const feri_gguf *g, int64_t i) {
  const feri_gguf_tensor_info *t = feri_gguf_tensor(g, i);
  if (t == NULL) abort();
  inside(t->name, t->name_len);
  if (feri_gguf_find_tensor_n(g, t->name, t->name_len) != i) abort();
  if (t->n_dims < 1 || t->n_dims > FERI_GGUF_MAX_DIMS || t->n_bytes == 0) abort();
  uint64_t be, bb, ne = 1;
  if (feri_ggml_type_block(t->ggml_type, &be, &bb) != FER_STATUS_OK) abort();
  for (int d = 0; d < FERI_GGUF_MAX_DIMS; d++) ne *= t->dims[d];
  if (ne != t->n_elements || t->n_bytes != ne / be * bb) abort();
  if (t->offset % feri_gguf_alignment(g) != 0) abort();
  inside(t->data, t->n_bytes);
  char line[96];
  size_t len;
  fer_status st = feri_gguf_tensor_describe(g, i, line, sizeof line, &len);
  if ((st != FER_STATUS_OK && st != FER_STATUS_BUFFER_TOO_SMALL) || strlen(line) >= sizeof line)
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  feri_gguf *g = NULL;
  if (feri_gguf_open(data, size, &g) != FER_STATUS_OK) {
    if (g != NULL) abort();
    return 0;
  }
  img_lo = data;
  img_hi = data + size;
  for (int64_t i = 0; i < feri_gguf_kv_count(g); i++) walk_kv(g, i);
  for (int64_t i = 0; i < feri_gguf_tensor_count(g); i++) walk_tensor(g, i);
  if (feri_gguf_tensor(g, feri_gguf_tensor_count(g)) != NULL) abort();
  feri_gguf_close(g);
  return 0;
}

#ifdef FERI_GGUF_SEED_MAIN
/* ---- Seeds: a few valid images ---------------------------------------------------------- */

typedef struct buf {
  uint8_t p[16384];
  size_t n;
} buf;

static void put(buf *b, const void *s, size_t n) {
  if (b->n + n > sizeof b->p) abort();
  memcpy(b->p + b->n, s, n);
  b->n += n;
}
static void le(buf *b, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++) {
    uint8_t x = (uint8_t)(v >> (8 * i));
    put(b, &x, 1);
  }
}
static void str(buf *b, const char *s) {
  le(b, strlen(s), 8);
  put(b, s, strlen(s));
}
static void key(buf *b, const char *k, uint32_t type) {
  str(b, k);
  le(b, type, 4);
}

typedef struct tensor {
  const char *name;
  uint32_t n_dims;
  uint64_t dims[4];
  uint32_t type;
} tensor;

/* An image with `n_kv` pairs written by `kvs` and the tensors laid out at `align` (0: default). */
static void image(buf *b, uint32_t version, uint32_t align, void (*kvs)(buf *, uint64_t *),
                  const tensor *ts, int n_t) {
  const uint32_t A = align ? align : 32;
  b->n = 0;
  put(b, "GGUF", 4);
  le(b, version, 4);
  le(b, (uint64_t)n_t, 8);
  size_t n_kv_at = b->n;
  le(b, 0, 8);
  uint64_t n_kv = 0;
  if (align) key(b, "general.alignment", FERI_GGUF_UINT32), le(b, align, 4), n_kv++;
  if (kvs) kvs(b, &n_kv);
  for (int i = 0; i < 8; i++) b->p[n_kv_at + i] = (uint8_t)(n_kv >> (8 * i));
  uint64_t off[8], end = 0;
  for (int i = 0; i < n_t; i++) {
    uint64_t be, bb, ne = 1;
    feri_ggml_type_block(ts[i].type, &be, &bb);
    for (uint32_t d = 0; d < ts[i].n_dims; d++) ne *= ts[i].dims[d];
    off[i] = (end + A - 1) / A * A;
    end = off[i] + ne / be * bb;
    str(b, ts[i].name);
    le(b, ts[i].n_dims, 4);
    for (uint32_t d = 0; d < ts[i].n_dims; d++) le(b, ts[i].dims[d], 8);
    le(b, ts[i].type, 4);
    le(b, off[i], 8);
  }
  while (b->n % A) le(b, 0, 1);
  size_t data = b->n;
  while (b->n < data + end) le(b, (uint64_t)(b->n * 31u), 1);
}

static void kvs_all(buf *b, uint64_t *n) {
  key(b, "general.architecture", FERI_GGUF_STRING), str(b, "llama"), ++*n;
  key(b, "a.u8", FERI_GGUF_UINT8), le(b, 7, 1), ++*n;
  key(b, "a.i8", FERI_GGUF_INT8), le(b, 0xfb, 1), ++*n;
  key(b, "a.u16", FERI_GGUF_UINT16), le(b, 60000, 2), ++*n;
  key(b, "a.i16", FERI_GGUF_INT16), le(b, 0xff00, 2), ++*n;
  key(b, "llama.block_count", FERI_GGUF_UINT32), le(b, 30, 4), ++*n;
  key(b, "a.i32", FERI_GGUF_INT32), le(b, 0xfffffff9u, 4), ++*n;
  key(b, "a.f32", FERI_GGUF_FLOAT32), le(b, 0x3fc00000u, 4), ++*n;
  key(b, "a.bool", FERI_GGUF_BOOL), le(b, 1, 1), ++*n;
  key(b, "a.u64", FERI_GGUF_UINT64), le(b, 1ull << 40, 8), ++*n;
  key(b, "a.i64", FERI_GGUF_INT64), le(b, (uint64_t)-5, 8), ++*n;
  key(b, "a.f64", FERI_GGUF_FLOAT64), le(b, 0x3fd0000000000000ull, 8), ++*n;
  key(b, "tokenizer.ggml.tokens", FERI_GGUF_ARRAY), le(b, FERI_GGUF_STRING, 4), le(b, 5, 8), ++*n;
  str(b, "<s>"), str(b, ""), str(b, "hello"), str(b, "\xc4\xa0world"), str(b, "x");
  key(b, "tokenizer.ggml.token_type", FERI_GGUF_ARRAY), le(b, FERI_GGUF_INT32, 4), le(b, 3, 8),
      ++*n;
  le(b, 1, 4), le(b, 3, 4), le(b, 0xffffffffu, 4);
  key(b, "tokenizer.ggml.scores", FERI_GGUF_ARRAY), le(b, FERI_GGUF_FLOAT32, 4), le(b, 2, 8), ++*n;
  le(b, 0x3f800000u, 4), le(b, 0xbf800000u, 4);
  key(b, "a.arr.u64", FERI_GGUF_ARRAY), le(b, FERI_GGUF_UINT64, 4), le(b, 1, 8),
      le(b, 1ull << 33, 8), ++*n;
  key(b, "a.arr.bool", FERI_GGUF_ARRAY), le(b, FERI_GGUF_BOOL, 4), le(b, 2, 8), le(b, 0x0001, 2),
      ++*n;
  key(b, "a.arr.f64", FERI_GGUF_ARRAY), le(b, FERI_GGUF_FLOAT64, 4), le(b, 0, 8), ++*n;
}

static void kvs_small(buf *b, uint64_t *n) {
  key(b, "general.name", FERI_GGUF_STRING), str(b, "tiny"), ++*n;
}

static int write_seed(const char *dir, const char *name, const buf *b) {
  feri_gguf *g = NULL;
  if (feri_gguf_open(b->p, b->n, &g) != FER_STATUS_OK) {
    fprintf(stderr, "seed %s does not parse\n", name);
    return 1;
  }
  feri_gguf_close(g);
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (f == NULL || fwrite(b->p, 1, b->n, f) != b->n || fclose(f) != 0) {
    fprintf(stderr, "cannot write %s\n", path);
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  static buf b;
  static const tensor five[] = {
      {"token_embd.weight", 2, {32, 3, 1, 1}, FERI_GGML_Q8_0},
      {"a.f32", 2, {3, 2, 1, 1}, FERI_GGML_F32},
      {"b.f16", 1, {5, 1, 1, 1}, FERI_GGML_F16},
      {"c.q4_0", 2, {64, 2, 1, 1}, FERI_GGML_Q4_0},
      {"d.q4_1", 4, {32, 1, 1, 2}, FERI_GGML_Q4_1},
  };
  static const tensor kq[] = {
      {"k.q4_k", 1, {256, 1, 1, 1}, FERI_GGML_Q4_K}, {"k.q6_k", 1, {256, 1, 1, 1}, FERI_GGML_Q6_K},
      {"k.bf16", 3, {2, 2, 2, 1}, FERI_GGML_BF16},   {"k.mxfp4", 1, {32, 1, 1, 1}, FERI_GGML_MXFP4},
      {"k.q5_0", 1, {32, 1, 1, 1}, FERI_GGML_Q5_0},
  };
  int rc = 0;
  image(&b, 3, 64, kvs_all, five, 5), rc |= write_seed(argv[1], "seed-all-v3-align64", &b);
  image(&b, 3, 0, kvs_all, five, 5), rc |= write_seed(argv[1], "seed-all-v3-default", &b);
  image(&b, 2, 0, kvs_small, kq, 5), rc |= write_seed(argv[1], "seed-kquants-v2", &b);
  image(&b, 3, 0, kvs_small, NULL, 0), rc |= write_seed(argv[1], "seed-no-tensors", &b);
  image(&b, 3, 0, NULL, NULL, 0), rc |= write_seed(argv[1], "seed-header-only", &b);
  image(&b, 3, 8, NULL, five + 1, 1), rc |= write_seed(argv[1], "seed-one-tensor-align8", &b);
  return rc;
}
#endif
