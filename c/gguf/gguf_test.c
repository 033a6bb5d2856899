/* gguf_test.c: the GGUF parser on images a tiny writer builds here (every getter on every value
 * type), a table of corruptions each answered with a given status and a message naming it, every
 * truncation and random byte damage of a valid image (no crash, no leak: run under ASan), file
 * opening, and the real SmolLM2 model file when present (SKIPPED otherwise). */
#include "gguf/gguf.h"

#include <math.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ferrite.h"
#include "testing/check.h"

/* ---- A tiny GGUF writer ------------------------------------------------------------------- */

typedef struct buf {
  uint8_t *p;
  size_t n, cap;
} buf;

static void put(buf *b, const void *src, size_t n) {
  if (b->n + n > b->cap) {
    b->cap = (b->n + n) * 2 + 64;
    b->p = realloc(b->p, b->cap);
    if (b->p == NULL) abort();
  }
  if (n) memcpy(b->p + b->n, src, n);
  b->n += n;
}
static void put_u8(buf *b, uint8_t v) { put(b, &v, 1); }
static void put_le(buf *b, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++) put_u8(b, (uint8_t)(v >> (8 * i)));
}
static void put_u16(buf *b, uint16_t v) { put_le(b, v, 2); }
static void put_u32(buf *b, uint32_t v) { put_le(b, v, 4); }
static void put_u64(buf *b, uint64_t v) { put_le(b, v, 8); }
static void put_f32(buf *b, float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  put_u32(b, u);
}
static void put_f64(buf *b, double f) {
  uint64_t u;
  memcpy(&u, &f, 8);
  put_u64(b, u);
}
static void put_str(buf *b, const char *s) {
  put_u64(b, strlen(s));
  put(b, s, strlen(s));
}
static void pad_to(buf *b, size_t align) {
  while (b->n % align) put_u8(b, 0);
}
static void patch_u32(buf *b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; i++) b->p[at + i] = (uint8_t)(v >> (8 * i));
}
static void patch_u64(buf *b, size_t at, uint64_t v) {
  for (int i = 0; i < 8; i++) b->p[at + i] = (uint8_t)(v >> (8 * i));
}

/* Writes a key and its type; returns the offset of the type field. */
static size_t kv_head(buf *b, const char *key, uint32_t type) {
  put_str(b, key);
  size_t at = b->n;
  put_u32(b, type);
  return at;
}

/* Where the main image keeps the fields the corruption table patches. */
typedef struct layout {
  size_t u8_key, u8_type, bool_val, str_len, arr_i32_et, arr_i32_count, align_type, align_val;
  size_t t_name[5], t_ndims[5], t_dims[5], t_type[5], t_off[5];
  uint64_t data_offset;
} layout;

enum { N_TENSORS = 5 };
static const char *const t_names[N_TENSORS] = {"a.f32", "b.f16", "c.q40", "d.q41", "e.q80"};
static const uint32_t t_types[N_TENSORS] = {FERI_GGML_F32, FERI_GGML_F16, FERI_GGML_Q4_0,
                                            FERI_GGML_Q4_1, FERI_GGML_Q8_0};
static const uint32_t t_ndims[N_TENSORS] = {2, 1, 2, 1, 4};
static const uint64_t t_dims[N_TENSORS][4] = {
    {3, 2, 1, 1}, {5, 1, 1, 1}, {64, 2, 1, 1}, {32, 1, 1, 1}, {32, 1, 1, 2}};
static const uint64_t t_bytes[N_TENSORS] = {24, 10, 72, 20, 68};

static const char *const arr_strs[4] = {"a", "", "ccc", "dddd"};

/* The main valid image: v3, a key of every type, arrays, five tensors. `align` 0 leaves
 * general.alignment out (32 applies). The last tensor ends the image exactly, so every shorter
 * prefix is a truncation. */
static void build_main(buf *b, uint32_t align, layout *L) {
  const uint32_t A = align ? align : 32;
  memset(L, 0, sizeof *L);
  put(b, "GGUF", 4);
  put_u32(b, 3);
  put_u64(b, N_TENSORS);
  size_t n_kv_at = b->n;
  put_u64(b, 0);
  uint64_t n_kv = 0;

  kv_head(b, "general.architecture", FERI_GGUF_STRING), put_str(b, "llama"), n_kv++;
  if (align) {
    put_str(b, "general.alignment");
    L->align_type = b->n;
    put_u32(b, FERI_GGUF_UINT32);
    L->align_val = b->n;
    put_u32(b, align);
    n_kv++;
  }
  L->u8_key = b->n + 8;
  L->u8_type = kv_head(b, "t.u8", FERI_GGUF_UINT8), put_u8(b, 200), n_kv++;
  kv_head(b, "t.i8", FERI_GGUF_INT8), put_u8(b, (uint8_t)-5), n_kv++;
  kv_head(b, "t.u16", FERI_GGUF_UINT16), put_u16(b, 60000), n_kv++;
  kv_head(b, "t.i16", FERI_GGUF_INT16), put_u16(b, (uint16_t)-300), n_kv++;
  kv_head(b, "t.u32", FERI_GGUF_UINT32), put_u32(b, 4000000000u), n_kv++;
  kv_head(b, "t.i32", FERI_GGUF_INT32), put_u32(b, (uint32_t)-7), n_kv++;
  kv_head(b, "t.i32pos", FERI_GGUF_INT32), put_u32(b, 12345), n_kv++;
  kv_head(b, "t.f32", FERI_GGUF_FLOAT32), put_f32(b, 1.5f), n_kv++;
  kv_head(b, "t.bool", FERI_GGUF_BOOL), L->bool_val = b->n, put_u8(b, 1), n_kv++;
  kv_head(b, "t.false", FERI_GGUF_BOOL), put_u8(b, 0), n_kv++;
  kv_head(b, "t.u64", FERI_GGUF_UINT64), put_u64(b, 1ull << 40), n_kv++;
  kv_head(b, "t.i64", FERI_GGUF_INT64), put_u64(b, (uint64_t)(-(1ll << 40))), n_kv++;
  kv_head(b, "t.f64", FERI_GGUF_FLOAT64), put_f64(b, 0.25), n_kv++;
  kv_head(b, "t.str", FERI_GGUF_STRING), L->str_len = b->n, put_str(b, "h\xc3\xa9llo"), n_kv++;
  kv_head(b, "t.empty", FERI_GGUF_STRING), put_str(b, ""), n_kv++;

  kv_head(b, "t.arr.str", FERI_GGUF_ARRAY), put_u32(b, FERI_GGUF_STRING), put_u64(b, 4), n_kv++;
  for (int i = 0; i < 4; i++) put_str(b, arr_strs[i]);
  kv_head(b, "t.arr.i32", FERI_GGUF_ARRAY);
  L->arr_i32_et = b->n;
  put_u32(b, FERI_GGUF_INT32);
  L->arr_i32_count = b->n;
  put_u64(b, 3), put_u32(b, 1), put_u32(b, (uint32_t)-2), put_u32(b, 3), n_kv++;
  kv_head(b, "t.arr.u8", FERI_GGUF_ARRAY), put_u32(b, FERI_GGUF_UINT8), put_u64(b, 2), put_u8(b, 0),
      put_u8(b, 255), n_kv++;
  kv_head(b, "t.arr.i16", FERI_GGUF_ARRAY), put_u32(b, FERI_GGUF_INT16), put_u64(b, 2),
      put_u16(b, (uint16_t)-9), put_u16(b, 9), n_kv++;
  kv_head(b, "t.arr.f32", FERI_GGUF_ARRAY), put_u32(b, FERI_GGUF_FLOAT32), put_u64(b, 2),
      put_f32(b, 0.5f), put_f32(b, -1.0f), n_kv++;
  kv_head(b, "t.arr.f64", FERI_GGUF_ARRAY), put_u32(b, FERI_GGUF_FLOAT64), put_u64(b, 1),
      put_f64(b, 2.5), n_kv++;
  kv_head(b, "t.arr.u64", FERI_GGUF_ARRAY), put_u32(b, FERI_GGUF_UINT64), put_u64(b, 2),
      put_u64(b, 7), put_u64(b, 1ull << 33), n_kv++;
  kv_head(b, "t.arr.bool", FERI_GGUF_ARRAY), put_u32(b, FERI_GGUF_BOOL), put_u64(b, 3),
      put_u8(b, 1), put_u8(b, 0), put_u8(b, 1), n_kv++;
  kv_head(b, "t.arr.empty", FERI_GGUF_ARRAY), put_u32(b, FERI_GGUF_INT32), put_u64(b, 0), n_kv++;
  patch_u64(b, n_kv_at, n_kv);

  uint64_t offs[N_TENSORS], end = 0;
  for (int i = 0; i < N_TENSORS; i++) {
    offs[i] = (end + A - 1) / A * A;
    end = offs[i] + t_bytes[i];
  }
  for (int i = 0; i < N_TENSORS; i++) {
    L->t_name[i] = b->n + 8;
    put_str(b, t_names[i]);
    L->t_ndims[i] = b->n;
    put_u32(b, t_ndims[i]);
    L->t_dims[i] = b->n;
    for (uint32_t d = 0; d < t_ndims[i]; d++) put_u64(b, t_dims[i][d]);
    L->t_type[i] = b->n;
    put_u32(b, t_types[i]);
    L->t_off[i] = b->n;
    put_u64(b, offs[i]);
  }
  pad_to(b, A);
  L->data_offset = b->n;
  for (int i = 0; i < N_TENSORS; i++) {
    while (b->n < L->data_offset + offs[i]) put_u8(b, 0);
    for (uint64_t k = 0; k < t_bytes[i]; k++) put_u8(b, (uint8_t)(0x10 + i));
  }
}

/* ---- Helpers -------------------------------------------------------------------------------- */

static void last_message(char *msg, size_t cap) {
  size_t len;
  fer_last_error_message(msg, cap, &len);
}

/* Opens a copy of exactly `n` bytes (so ASan sees any overread); status and message checked. */
static void expect(const char *label, const uint8_t *img, size_t n, fer_status want,
                   const char *word) {
  uint8_t *copy = malloc(n ? n : 1);
  if (n) memcpy(copy, img, n);
  feri_gguf *g = (feri_gguf *)1;
  fer_status st = feri_gguf_open(copy, n, &g);
  char msg[512];
  last_message(msg, sizeof msg);
  if (st != want || g != NULL || (word != NULL && strstr(msg, word) == NULL)) {
    fprintf(stderr, "  case '%s': got %d (%s), want %d and a message with '%s'; message: %s\n",
            label, (int)st, fer_status_str(st), (int)want, word ? word : "", msg);
    feri_test_fail(__FILE__, __LINE__, label);
  }
  if (st == FER_STATUS_OK) feri_gguf_close(g);
  free(copy);
}

static bool str_is(const char *s, size_t n, const char *want) {
  return n == strlen(want) && memcmp(s, want, n) == 0;
}

/* ---- The valid image: every getter -------------------------------------------------------- */

static void test_getters(void) {
  buf b = {0};
  layout L;
  build_main(&b, 64, &L);
  feri_gguf *g = NULL;
  CHECK_STATUS(feri_gguf_open(b.p, b.n, &g), FER_STATUS_OK);
  if (g == NULL) return;
  CHECK(feri_gguf_version(g) == 3);
  CHECK(feri_gguf_alignment(g) == 64);
  CHECK(feri_gguf_data_offset(g) == L.data_offset && L.data_offset % 64 == 0);
  size_t isz = 0;
  CHECK(feri_gguf_image(g, &isz) == b.p && isz == b.n);
  CHECK(feri_gguf_kv_count(g) == 26);

  const char *s;
  size_t n;
  CHECK_STATUS(feri_gguf_get_str(g, "general.architecture", &s, &n), FER_STATUS_OK);
  CHECK(str_is(s, n, "llama"));
  CHECK_STATUS(feri_gguf_get_str(g, "t.str", &s, &n), FER_STATUS_OK);
  CHECK(str_is(s, n, "h\xc3\xa9llo") && s > (const char *)b.p && s < (const char *)b.p + b.n);
  CHECK_STATUS(feri_gguf_get_str(g, "t.empty", &s, &n), FER_STATUS_OK);
  CHECK(n == 0 && s != NULL);

  uint32_t u32;
  int32_t i32;
  uint64_t u64;
  float f;
  bool bo;
  CHECK_STATUS(feri_gguf_get_u32(g, "t.u8", &u32), FER_STATUS_OK);
  CHECK(u32 == 200);
  CHECK_STATUS(feri_gguf_get_i32(g, "t.i8", &i32), FER_STATUS_OK);
  CHECK(i32 == -5);
  CHECK_STATUS(feri_gguf_get_u32(g, "t.u16", &u32), FER_STATUS_OK);
  CHECK(u32 == 60000);
  CHECK_STATUS(feri_gguf_get_i32(g, "t.i16", &i32), FER_STATUS_OK);
  CHECK(i32 == -300);
  CHECK_STATUS(feri_gguf_get_u32(g, "t.u32", &u32), FER_STATUS_OK);
  CHECK(u32 == 4000000000u);
  CHECK_STATUS(feri_gguf_get_u64(g, "t.u32", &u64), FER_STATUS_OK);
  CHECK(u64 == 4000000000u);
  CHECK_STATUS(feri_gguf_get_i32(g, "t.i32", &i32), FER_STATUS_OK);
  CHECK(i32 == -7);
  CHECK_STATUS(feri_gguf_get_u32(g, "t.i32pos", &u32), FER_STATUS_OK); /* INT32 >= 0 as u32 */
  CHECK(u32 == 12345);
  CHECK_STATUS(feri_gguf_get_u64(g, "t.u64", &u64), FER_STATUS_OK);
  CHECK(u64 == 1ull << 40);
  CHECK_STATUS(feri_gguf_get_u64(g, "t.i32pos", &u64), FER_STATUS_OK);
  CHECK(u64 == 12345);
  CHECK_STATUS(feri_gguf_get_i32(g, "t.u8", &i32), FER_STATUS_OK);
  CHECK(i32 == 200);
  CHECK_STATUS(feri_gguf_get_f32(g, "t.f32", &f), FER_STATUS_OK);
  CHECK(f == 1.5f);
  CHECK_STATUS(feri_gguf_get_f32(g, "t.f64", &f), FER_STATUS_OK);
  CHECK(f == 0.25f);
  CHECK_STATUS(feri_gguf_get_bool(g, "t.bool", &bo), FER_STATUS_OK);
  CHECK(bo == true);
  CHECK_STATUS(feri_gguf_get_bool(g, "t.false", &bo), FER_STATUS_OK);
  CHECK(bo == false);

  /* Wrong types, values out of range, missing keys: BAD_FORMAT naming the key, outputs zeroed. */
  char msg[512];
  u32 = 99;
  CHECK_STATUS(feri_gguf_get_u32(g, "t.str", &u32), FER_STATUS_BAD_FORMAT);
  last_message(msg, sizeof msg);
  CHECK(u32 == 0 && strstr(msg, "t.str") && strstr(msg, "STRING") && strstr(msg, "type"));
  CHECK_STATUS(feri_gguf_get_u32(g, "t.i32", &u32), FER_STATUS_BAD_FORMAT); /* -7 */
  last_message(msg, sizeof msg);
  CHECK(strstr(msg, "range") != NULL);
  CHECK_STATUS(feri_gguf_get_u32(g, "t.u64", &u32), FER_STATUS_BAD_FORMAT); /* 2^40 */
  CHECK_STATUS(feri_gguf_get_i32(g, "t.u32", &i32), FER_STATUS_BAD_FORMAT); /* 4e9 */
  CHECK_STATUS(feri_gguf_get_i32(g, "t.i64", &i32), FER_STATUS_BAD_FORMAT); /* -2^40 */
  CHECK_STATUS(feri_gguf_get_u64(g, "t.i8", &u64), FER_STATUS_BAD_FORMAT);  /* -5 */
  CHECK_STATUS(feri_gguf_get_u32(g, "t.f32", &u32), FER_STATUS_BAD_FORMAT);
  CHECK_STATUS(feri_gguf_get_u32(g, "t.bool", &u32), FER_STATUS_BAD_FORMAT);
  CHECK_STATUS(feri_gguf_get_f32(g, "t.i32", &f), FER_STATUS_BAD_FORMAT);
  CHECK_STATUS(feri_gguf_get_bool(g, "t.u8", &bo), FER_STATUS_BAD_FORMAT);
  s = "x";
  n = 9;
  CHECK_STATUS(feri_gguf_get_str(g, "t.u32", &s, &n), FER_STATUS_BAD_FORMAT);
  CHECK(s == NULL && n == 0);
  CHECK_STATUS(feri_gguf_get_str(g, "t.arr.str", &s, &n), FER_STATUS_BAD_FORMAT);
  CHECK_STATUS(feri_gguf_get_u32(g, "no.such.key", &u32), FER_STATUS_BAD_FORMAT);
  last_message(msg, sizeof msg);
  CHECK(strstr(msg, "no.such.key") && strstr(msg, "missing"));
  CHECK_STATUS(feri_gguf_get_u32(g, "t.u8", NULL), FER_STATUS_NULL_ARG);
  CHECK_STATUS(feri_gguf_get_u32(NULL, "t.u8", &u32), FER_STATUS_NULL_ARG);
  CHECK_STATUS(feri_gguf_get_u32(g, NULL, &u32), FER_STATUS_NULL_ARG);

  /* Keys by index, in the file's order. */
  CHECK(feri_gguf_find_kv(g, "general.architecture") == 0);
  CHECK(feri_gguf_find_kv(g, "general.alignment") == 1);
  CHECK(feri_gguf_find_kv(g, "t.arr.empty") == 25);
  CHECK(feri_gguf_find_kv(g, "t") == -1 && feri_gguf_find_kv(g, "t.u8x") == -1 &&
        feri_gguf_find_kv(g, "") == -1);
  CHECK(feri_gguf_find_kv(NULL, "t.u8") == -1 && feri_gguf_find_kv(g, NULL) == -1);
  CHECK(feri_gguf_find_kv_n(g, "t.u8xyz", 4) == 2);
  for (int64_t i = 0; i < feri_gguf_kv_count(g); i++) {
    const char *k;
    size_t kl;
    CHECK_STATUS(feri_gguf_kv_key(g, i, &k, &kl), FER_STATUS_OK);
    CHECK(feri_gguf_find_kv_n(g, k, kl) == i);
  }
  uint32_t ty;
  CHECK_STATUS(feri_gguf_kv_type(g, 2, &ty), FER_STATUS_OK);
  CHECK(ty == FERI_GGUF_UINT8);
  CHECK_STATUS(feri_gguf_kv_type(g, 26, &ty), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(feri_gguf_kv_type(g, -1, &ty), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(feri_gguf_kv_key(g, 26, &s, &n), FER_STATUS_INVALID_ARG);

  /* Arrays. */
  uint32_t et;
  uint64_t cnt;
  CHECK_STATUS(feri_gguf_get_arr(g, "t.arr.str", &et, &cnt), FER_STATUS_OK);
  CHECK(et == FERI_GGUF_STRING && cnt == 4);
  int64_t ks = feri_gguf_find_kv(g, "t.arr.str");
  for (uint64_t i = 0; i < 4; i++) {
    CHECK_STATUS(feri_gguf_arr_str(g, ks, i, &s, &n), FER_STATUS_OK);
    CHECK(str_is(s, n, arr_strs[i]));
  }
  CHECK_STATUS(feri_gguf_arr_str(g, ks, 4, &s, &n), FER_STATUS_INVALID_ARG);
  CHECK(s == NULL && n == 0);
  CHECK_STATUS(feri_gguf_arr_str(g, 99, 0, &s, &n), FER_STATUS_INVALID_ARG);
  const void *raw;
  CHECK_STATUS(feri_gguf_arr_data(g, ks, &et, &raw, &cnt),
               FER_STATUS_BAD_FORMAT); /* strings: no raw view */
  CHECK(raw == NULL && cnt == 0);
  CHECK_STATUS(feri_gguf_get_arr(g, "t.u8", &et, &cnt), FER_STATUS_BAD_FORMAT);

  int64_t ki = feri_gguf_find_kv(g, "t.arr.i32");
  CHECK_STATUS(feri_gguf_arr_str(g, ki, 0, &s, &n), FER_STATUS_BAD_FORMAT);
  last_message(msg, sizeof msg);
  CHECK(strstr(msg, "t.arr.i32") && strstr(msg, "INT32"));
  CHECK_STATUS(feri_gguf_arr_str(g, feri_gguf_find_kv(g, "t.u8"), 0, &s, &n),
               FER_STATUS_BAD_FORMAT);
  CHECK_STATUS(feri_gguf_arr_data(g, ki, &et, &raw, &cnt), FER_STATUS_OK);
  CHECK(et == FERI_GGUF_INT32 && cnt == 3 && feri_gguf_type_size(et) == 4);
  CHECK(((const uint8_t *)raw)[4] == 0xfe && ((const uint8_t *)raw)[8] == 3);
  int32_t iv[4] = {0, 0, 0, 42};
  CHECK_STATUS(feri_gguf_arr_copy_i32(g, ki, iv, 3), FER_STATUS_OK);
  CHECK(iv[0] == 1 && iv[1] == -2 && iv[2] == 3 && iv[3] == 42);
  CHECK_STATUS(feri_gguf_arr_copy_i32(g, ki, iv, 2), FER_STATUS_BUFFER_TOO_SMALL);
  CHECK_STATUS(feri_gguf_arr_copy_i32(g, feri_gguf_find_kv(g, "t.arr.u8"), iv, 4), FER_STATUS_OK);
  CHECK(iv[0] == 0 && iv[1] == 255);
  CHECK_STATUS(feri_gguf_arr_copy_i32(g, feri_gguf_find_kv(g, "t.arr.i16"), iv, 4), FER_STATUS_OK);
  CHECK(iv[0] == -9 && iv[1] == 9);
  CHECK_STATUS(feri_gguf_arr_copy_i32(g, feri_gguf_find_kv(g, "t.arr.u64"), iv, 4),
               FER_STATUS_BAD_FORMAT);
  last_message(msg, sizeof msg);
  CHECK(strstr(msg, "element 1") && strstr(msg, "range"));
  CHECK_STATUS(feri_gguf_arr_copy_i32(g, feri_gguf_find_kv(g, "t.arr.f32"), iv, 4),
               FER_STATUS_BAD_FORMAT);
  CHECK_STATUS(feri_gguf_arr_copy_i32(g, ks, iv, 4), FER_STATUS_BAD_FORMAT);
  CHECK_STATUS(feri_gguf_arr_copy_i32(g, feri_gguf_find_kv(g, "t.arr.empty"), NULL, 0),
               FER_STATUS_OK);
  float fv[3] = {0, 0, 7};
  CHECK_STATUS(feri_gguf_arr_copy_f32(g, feri_gguf_find_kv(g, "t.arr.f32"), fv, 3), FER_STATUS_OK);
  CHECK(fv[0] == 0.5f && fv[1] == -1.0f && fv[2] == 7);
  CHECK_STATUS(feri_gguf_arr_copy_f32(g, feri_gguf_find_kv(g, "t.arr.f64"), fv, 1), FER_STATUS_OK);
  CHECK(fv[0] == 2.5f);
  CHECK_STATUS(feri_gguf_arr_copy_f32(g, feri_gguf_find_kv(g, "t.arr.f32"), fv, 1),
               FER_STATUS_BUFFER_TOO_SMALL);
  CHECK_STATUS(feri_gguf_arr_copy_f32(g, ki, fv, 3), FER_STATUS_BAD_FORMAT);
  CHECK_STATUS(feri_gguf_arr_copy_f32(g, feri_gguf_find_kv(g, "t.u8"), fv, 3),
               FER_STATUS_BAD_FORMAT);
  CHECK_STATUS(feri_gguf_arr_data(g, feri_gguf_find_kv(g, "t.arr.bool"), &et, &raw, &cnt),
               FER_STATUS_OK);
  CHECK(et == FERI_GGUF_BOOL && cnt == 3 && ((const uint8_t *)raw)[1] == 0 &&
        ((const uint8_t *)raw)[2] == 1);
  CHECK_STATUS(feri_gguf_get_arr(g, "t.arr.empty", &et, &cnt), FER_STATUS_OK);
  CHECK(et == FERI_GGUF_INT32 && cnt == 0);

  /* Tensors. */
  CHECK(feri_gguf_tensor_count(g) == N_TENSORS);
  uint64_t prev_end = 0;
  for (int i = 0; i < N_TENSORS; i++) {
    int64_t k = feri_gguf_find_tensor(g, t_names[i]);
    CHECK(k == i);
    const feri_gguf_tensor_info *t = feri_gguf_tensor(g, i);
    if (t == NULL) continue;
    CHECK(str_is(t->name, t->name_len, t_names[i]));
    CHECK(t->n_dims == t_ndims[i] && t->ggml_type == t_types[i] && t->n_bytes == t_bytes[i]);
    uint64_t ne = 1;
    for (int d = 0; d < 4; d++) {
      CHECK(t->dims[d] == t_dims[i][d]);
      ne *= t_dims[i][d];
    }
    CHECK(t->n_elements == ne);
    CHECK(t->offset % 64 == 0 && t->offset >= prev_end);
    CHECK(t->file_offset == L.data_offset + t->offset);
    CHECK(t->data == b.p + t->file_offset);
    const uint8_t *d = t->data;
    CHECK(d[0] == 0x10 + i && d[t->n_bytes - 1] == 0x10 + i);
    prev_end = t->offset + t->n_bytes;
  }
  CHECK(L.data_offset + prev_end == b.n);
  CHECK(feri_gguf_find_tensor(g, "a.f3") == -1 && feri_gguf_find_tensor(g, "zz") == -1);
  CHECK(feri_gguf_find_tensor_n(g, "c.q40!", 5) == 2);
  CHECK(feri_gguf_tensor(g, N_TENSORS) == NULL && feri_gguf_tensor(g, -1) == NULL);
  uint64_t be, bb;
  CHECK_STATUS(feri_ggml_type_block(FERI_GGML_Q4_1, &be, &bb), FER_STATUS_OK);
  CHECK(be == 32 && bb == 20);
  CHECK_STATUS(feri_ggml_type_block(FERI_GGML_MXFP4, &be, &bb), FER_STATUS_OK);
  CHECK(be == 32 && bb == 17);
  CHECK_STATUS(feri_ggml_type_block(FERI_GGML_Q6_K, &be, &bb), FER_STATUS_OK);
  CHECK(be == 256 && bb == 210);
  CHECK_STATUS(feri_ggml_type_block(FERI_GGML_IQ4_NL, &be, &bb), FER_STATUS_OK);
  CHECK(be == 32 && bb == 18);
  CHECK_STATUS(feri_ggml_type_block(FERI_GGML_IQ4_XS, &be, &bb), FER_STATUS_OK);
  CHECK(be == 256 && bb == 136);
  CHECK_STATUS(feri_ggml_type_block(16, &be, &bb), FER_STATUS_UNSUPPORTED); /* IQ2_XXS */
  CHECK(be == 0 && bb == 0);
  CHECK(strcmp(feri_ggml_type_name(FERI_GGML_BF16), "BF16") == 0);
  CHECK(strcmp(feri_ggml_type_name(1000), "unknown") == 0);
  CHECK(strcmp(feri_gguf_type_name(FERI_GGUF_FLOAT64), "FLOAT64") == 0);

  /* One-line descriptions for listings. */
  static const struct {
    const char *key, *line;
  } lines[] = {
      {"general.alignment", "general.alignment: UINT32 = 64"},
      {"t.i8", "t.i8: INT8 = -5"},
      {"t.u64", "t.u64: UINT64 = 1099511627776"},
      {"t.f32", "t.f32: FLOAT32 = 1.5"},
      {"t.f64", "t.f64: FLOAT64 = 0.25"},
      {"t.bool", "t.bool: BOOL = true"},
      {"t.str", "t.str: STRING = \"h\\xc3\\xa9llo\""},
      {"t.arr.str", "t.arr.str: ARRAY[4] of STRING = [\"a\", \"\", \"ccc\", \"dddd\"]"},
      {"t.arr.i32", "t.arr.i32: ARRAY[3] of INT32 = [1, -2, 3]"},
      {"t.arr.bool", "t.arr.bool: ARRAY[3] of BOOL = [true, false, true]"},
      {"t.arr.empty", "t.arr.empty: ARRAY[0] of INT32 = []"},
  };
  char line[256];
  size_t ll;
  for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
    CHECK_STATUS(
        feri_gguf_kv_describe(g, feri_gguf_find_kv(g, lines[i].key), line, sizeof line, &ll),
        FER_STATUS_OK);
    if (strcmp(line, lines[i].line) != 0 || ll != strlen(line)) {
      fprintf(stderr, "  describe %s: got '%s'\n", lines[i].key, line);
      CHECK(!"kv_describe line");
    }
  }
  CHECK_STATUS(feri_gguf_kv_describe(g, 1, line, 8, &ll), FER_STATUS_BUFFER_TOO_SMALL);
  CHECK(strcmp(line, "general") == 0 && ll == strlen("general.alignment: UINT32 = 64"));
  CHECK_STATUS(feri_gguf_kv_describe(g, 1, NULL, 0, &ll), FER_STATUS_BUFFER_TOO_SMALL);
  CHECK(ll == strlen("general.alignment: UINT32 = 64"));
  CHECK_STATUS(feri_gguf_kv_describe(g, 26, line, sizeof line, &ll), FER_STATUS_INVALID_ARG);
  char want_t[128];
  snprintf(want_t, sizeof want_t, "e.q80: Q8_0 [32, 1, 1, 2] 68 bytes at %llu",
           (unsigned long long)(L.data_offset + 320));
  CHECK_STATUS(feri_gguf_tensor_describe(g, 4, line, sizeof line, &ll), FER_STATUS_OK);
  CHECK(strcmp(line, want_t) == 0);
  CHECK_STATUS(feri_gguf_tensor_describe(g, 5, line, sizeof line, &ll), FER_STATUS_INVALID_ARG);
  feri_gguf_close(g);
  feri_gguf_close(NULL);

  /* Version 2 is the same layout; no general.alignment means 32. */
  patch_u32(&b, 4, 2);
  CHECK_STATUS(feri_gguf_open(b.p, b.n, &g), FER_STATUS_OK);
  CHECK(feri_gguf_version(g) == 2);
  feri_gguf_close(g);
  free(b.p);
  b = (buf){0};
  build_main(&b, 0, &L);
  CHECK_STATUS(feri_gguf_open(b.p, b.n, &g), FER_STATUS_OK);
  CHECK(feri_gguf_alignment(g) == 32 && feri_gguf_data_offset(g) % 32 == 0);
  CHECK(feri_gguf_kv_count(g) == 25);
  const feri_gguf_tensor_info *t1 = feri_gguf_tensor(g, 1);
  CHECK(t1 != NULL && t1->offset == 32);
  feri_gguf_close(g);
  free(b.p);

  CHECK_STATUS(feri_gguf_open(NULL, 10, &g), FER_STATUS_NULL_ARG);
  CHECK_STATUS(feri_gguf_open("GGUF", 4, NULL), FER_STATUS_NULL_ARG);
}

/* A string array with many elements of varying length: element access stays exact. */
static void test_big_string_array(void) {
  enum { N = 5000 };
  buf b = {0};
  put(&b, "GGUF", 4), put_u32(&b, 3), put_u64(&b, 0), put_u64(&b, 1);
  kv_head(&b, "tokenizer.ggml.tokens", FERI_GGUF_ARRAY), put_u32(&b, FERI_GGUF_STRING),
      put_u64(&b, N);
  char s[32];
  for (int i = 0; i < N; i++) {
    snprintf(s, sizeof s, "%.*s%d", i % 7, "xxxxxxx", i);
    put_str(&b, s);
  }
  feri_gguf *g = NULL;
  CHECK_STATUS(feri_gguf_open(b.p, b.n, &g), FER_STATUS_OK);
  int64_t k = feri_gguf_find_kv(g, "tokenizer.ggml.tokens");
  CHECK(k == 0);
  int bad = 0;
  for (int i = N - 1; i >= 0; i--) {
    const char *p;
    size_t n;
    snprintf(s, sizeof s, "%.*s%d", i % 7, "xxxxxxx", i);
    if (feri_gguf_arr_str(g, k, (uint64_t)i, &p, &n) != FER_STATUS_OK || !str_is(p, n, s)) bad++;
  }
  CHECK(bad == 0);
  CHECK(feri_gguf_tensor_count(g) == 0 && feri_gguf_find_tensor(g, "x") == -1);
  feri_gguf_close(g);
  free(b.p);
}

/* ---- Corruptions ---------------------------------------------------------------------------- */

typedef void (*mutator)(buf *b, const layout *L);

static void m_magic(buf *b, const layout *L) { (void)L, b->p[0] = 'g'; }
static void m_v1(buf *b, const layout *L) { (void)L, patch_u32(b, 4, 1); }
static void m_v4(buf *b, const layout *L) { (void)L, patch_u32(b, 4, 4); }
static void m_v_be(buf *b, const layout *L) { (void)L, patch_u32(b, 4, 0x03000000u); }
static void m_kv_huge(buf *b, const layout *L) { (void)L, patch_u64(b, 16, 1ull << 62); }
static void m_t_huge(buf *b, const layout *L) { (void)L, patch_u64(b, 8, 1ull << 62); }
static void m_str_len(buf *b, const layout *L) { patch_u64(b, L->str_len, 1ull << 40); }
static void m_str_len_max(buf *b, const layout *L) { patch_u64(b, L->str_len, UINT64_MAX); }
static void m_arr_count(buf *b, const layout *L) { patch_u64(b, L->arr_i32_count, 1ull << 62); }
static void m_arr_count2(buf *b, const layout *L) {
  patch_u64(b, L->arr_i32_count, UINT64_MAX / 2);
}
static void m_nested(buf *b, const layout *L) { patch_u32(b, L->arr_i32_et, FERI_GGUF_ARRAY); }
static void m_arr_et(buf *b, const layout *L) { patch_u32(b, L->arr_i32_et, 13); }
static void m_dup_key(buf *b, const layout *L) { memcpy(b->p + L->u8_key, "t.i8", 4); }
static void m_key_nul(buf *b, const layout *L) { b->p[L->u8_key + 1] = 0; }
static void m_val_type(buf *b, const layout *L) { patch_u32(b, L->u8_type, 13); }
static void m_bool(buf *b, const layout *L) { b->p[L->bool_val] = 2; }
static void m_align3(buf *b, const layout *L) { patch_u32(b, L->align_val, 3); }
static void m_align0(buf *b, const layout *L) { patch_u32(b, L->align_val, 0); }
static void m_align_type(buf *b, const layout *L) { patch_u32(b, L->align_type, FERI_GGUF_INT32); }
static void m_align128(buf *b, const layout *L) {
  patch_u32(b, L->align_val, 128);
} /* offset 64 misaligned */
static void m_dims5(buf *b, const layout *L) { patch_u32(b, L->t_ndims[0], 5); }
static void m_dims0(buf *b, const layout *L) { patch_u32(b, L->t_ndims[0], 0); }
static void m_zero_dim(buf *b, const layout *L) { patch_u64(b, L->t_dims[0] + 8, 0); }
static void m_dim_overflow(buf *b, const layout *L) {
  patch_u64(b, L->t_dims[0], 1ull << 62);
} /* x 2 */
static void m_byte_overflow(buf *b, const layout *L) {
  patch_u64(b, L->t_dims[0], 1ull << 61);
} /* x2 x4 B */
static void m_type16(buf *b, const layout *L) { patch_u32(b, L->t_type[2], 16); }
static void m_type_huge(buf *b, const layout *L) { patch_u32(b, L->t_type[2], 1000); }
static void m_block(buf *b, const layout *L) { patch_u64(b, L->t_dims[2], 48); }
static void m_misaligned(buf *b, const layout *L) { patch_u64(b, L->t_off[1], 64 + 4); }
static void m_past_end(buf *b, const layout *L) { patch_u64(b, L->t_off[4], 64 * 1000); }
static void m_past_end_huge(buf *b, const layout *L) { patch_u64(b, L->t_off[4], UINT64_MAX - 63); }
static void m_overlap(buf *b, const layout *L) {
  patch_u64(b, L->t_off[2], 64);
} /* c on top of b */
static void m_overlap2(buf *b, const layout *L) {
  patch_u64(b, L->t_off[4], 0);
} /* e on top of a */
static void m_dup_name(buf *b, const layout *L) { memcpy(b->p + L->t_name[1], "a.f32", 5); }
static void m_name_nul(buf *b, const layout *L) { b->p[L->t_name[3] + 2] = 0; }

static void test_corruptions(void) {
  static const struct {
    const char *label;
    mutator m;
    fer_status want;
    const char *word;
  } cases[] = {
      {"bad magic", m_magic, FER_STATUS_BAD_FORMAT, "magic"},
      {"version 1", m_v1, FER_STATUS_BAD_FORMAT, "version 1"},
      {"version 4", m_v4, FER_STATUS_BAD_FORMAT, "version 4"},
      {"big-endian", m_v_be, FER_STATUS_BAD_FORMAT, "big-endian"},
      {"kv_count 2^62", m_kv_huge, FER_STATUS_CORRUPT, "kv_count"},
      {"tensor_count 2^62", m_t_huge, FER_STATUS_CORRUPT, "tensor_count"},
      {"string length past the end", m_str_len, FER_STATUS_CORRUPT, "past the end"},
      {"string length 2^64-1", m_str_len_max, FER_STATUS_CORRUPT, "'t.str'"},
      {"array count * 4 overflows", m_arr_count, FER_STATUS_CORRUPT, "array count"},
      {"array count 2^63", m_arr_count2, FER_STATUS_CORRUPT, "t.arr.i32"},
      {"nested array", m_nested, FER_STATUS_UNSUPPORTED, "nested"},
      {"unknown element type", m_arr_et, FER_STATUS_CORRUPT, "element type 13"},
      {"duplicate key", m_dup_key, FER_STATUS_CORRUPT, "duplicate key 't.i8'"},
      {"NUL in key", m_key_nul, FER_STATUS_CORRUPT, "NUL"},
      {"unknown value type", m_val_type, FER_STATUS_CORRUPT, "value type 13"},
      {"bool 2", m_bool, FER_STATUS_CORRUPT, "BOOL"},
      {"alignment 3", m_align3, FER_STATUS_CORRUPT, "power of two"},
      {"alignment 0", m_align0, FER_STATUS_CORRUPT, "general.alignment"},
      {"alignment INT32", m_align_type, FER_STATUS_CORRUPT, "UINT32"},
      {"alignment 128 vs offset 64", m_align128, FER_STATUS_CORRUPT, "alignment 128"},
      {"5 dims", m_dims5, FER_STATUS_CORRUPT, "n_dims 5"},
      {"0 dims", m_dims0, FER_STATUS_CORRUPT, "n_dims 0"},
      {"zero dim", m_zero_dim, FER_STATUS_CORRUPT, "dim 1 is zero"},
      {"dims product overflow", m_dim_overflow, FER_STATUS_CORRUPT, "element count overflows"},
      {"byte size overflow", m_byte_overflow, FER_STATUS_CORRUPT, "byte size overflows"},
      {"ggml type 16", m_type16, FER_STATUS_UNSUPPORTED, "'c.q40'"},
      {"ggml type 1000", m_type_huge, FER_STATUS_UNSUPPORTED, "type 1000"},
      {"dim 0 not a multiple of the block", m_block, FER_STATUS_CORRUPT,
       "multiple of the Q4_0 block"},
      {"offset misaligned", m_misaligned, FER_STATUS_CORRUPT, "offset 68"},
      {"offset + size past the end", m_past_end, FER_STATUS_CORRUPT, "'e.q80'"},
      {"offset near 2^64", m_past_end_huge, FER_STATUS_CORRUPT, "past the end"},
      {"overlapping tensors", m_overlap, FER_STATUS_CORRUPT, "overlap"},
      {"overlapping tensors 2", m_overlap2, FER_STATUS_CORRUPT, "'e.q80'"},
      {"duplicate tensor name", m_dup_name, FER_STATUS_CORRUPT, "duplicate tensor name 'a.f32'"},
      {"NUL in tensor name", m_name_nul, FER_STATUS_CORRUPT, "NUL"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    buf b = {0};
    layout L;
    build_main(&b, 64, &L);
    cases[c].m(&b, &L);
    expect(cases[c].label, b.p, b.n, cases[c].want, cases[c].word);
    free(b.p);
  }
  /* Specific messages name where: the byte offset of the damaged key. */
  buf b = {0};
  layout L;
  build_main(&b, 64, &L);
  m_str_len(&b, &L);
  char want[64];
  snprintf(want, sizeof want, "at byte %zu", L.str_len);
  expect("string length names its byte", b.p, b.n, FER_STATUS_CORRUPT, want);
  free(b.p);

  /* Small hand-made images. */
  expect("empty image", (const uint8_t *)"", 0, FER_STATUS_BAD_FORMAT, "GGUF");
  expect("3 bytes of magic", (const uint8_t *)"GGU", 3, FER_STATUS_CORRUPT, "truncated");
  b = (buf){0};
  put(&b, "GGUF", 4), put_u32(&b, 3), put_u64(&b, 0), put_u64(&b, 1), put_str(&b, ""),
      put_u32(&b, 0), put_u8(&b, 1), put_u8(&b, 0);
  expect("empty key", b.p, b.n, FER_STATUS_CORRUPT, "empty key");
  free(b.p);
  b = (buf){0};
  put(&b, "GGUF", 4), put_u32(&b, 3), put_u64(&b, 0), put_u64(&b, 0);
  feri_gguf *g = NULL;
  CHECK_STATUS(feri_gguf_open(b.p, b.n, &g),
               FER_STATUS_OK); /* header only: an empty but valid file */
  CHECK(feri_gguf_kv_count(g) == 0 && feri_gguf_tensor_count(g) == 0 &&
        feri_gguf_find_kv(g, "x") == -1);
  feri_gguf_close(g);
  free(b.p);
}

/* Every prefix of the valid image fails cleanly (the last tensor ends the image). */
static void test_truncations(void) {
  buf b = {0};
  layout L;
  build_main(&b, 64, &L);
  int ok = 0, empty_msg = 0;
  for (size_t n = 0; n < b.n; n++) {
    uint8_t *copy = malloc(n ? n : 1);
    memcpy(copy, b.p, n);
    feri_gguf *g = NULL;
    fer_status st = feri_gguf_open(copy, n, &g);
    if (st == FER_STATUS_OK) {
      ok++;
      fprintf(stderr, "  truncation to %zu of %zu bytes parsed\n", n, b.n);
      feri_gguf_close(g);
    } else {
      char msg[512];
      last_message(msg, sizeof msg);
      if (msg[0] == '\0' || g != NULL) empty_msg++;
    }
    free(copy);
  }
  CHECK(ok == 0);
  CHECK(empty_msg == 0);
  free(b.p);
}

/* Random damage: flip bytes, overwrite words with extreme values; whatever the result, no crash
 * and, on success, every accessor stays inside the image (ASan watches). */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
  return rng_state;
}

static void walk(const feri_gguf *g) {
  for (int64_t i = 0; i < feri_gguf_kv_count(g); i++) {
    uint32_t et;
    const void *raw;
    uint64_t cnt;
    const char *s;
    size_t n;
    if (feri_gguf_arr_data(g, i, &et, &raw, &cnt) == FER_STATUS_OK && cnt > 0) {
      volatile uint8_t x = ((const uint8_t *)raw)[cnt * feri_gguf_type_size(et) - 1];
      (void)x;
    }
    for (uint64_t k = 0; feri_gguf_arr_str(g, i, k, &s, &n) == FER_STATUS_OK; k++)
      if (n) {
        volatile char x = s[n - 1];
        (void)x;
      }
  }
  for (int64_t i = 0; i < feri_gguf_tensor_count(g); i++) {
    const feri_gguf_tensor_info *t = feri_gguf_tensor(g, i);
    volatile uint8_t x = ((const uint8_t *)t->data)[t->n_bytes - 1];
    (void)x;
  }
}

static void test_random_damage(void) {
  buf b = {0};
  layout L;
  build_main(&b, 64, &L);
  int parsed = 0;
  for (int it = 0; it < 3000; it++) {
    uint8_t *copy = malloc(b.n);
    memcpy(copy, b.p, b.n);
    int edits = 1 + (int)(rnd() % 3);
    for (int e = 0; e < edits; e++) {
      size_t at = (size_t)(rnd() % b.n);
      switch (rnd() % 4) {
        case 0: copy[at] ^= (uint8_t)(1u << (rnd() % 8)); break;
        case 1: copy[at] = (uint8_t)rnd(); break;
        case 2:
          if (at + 8 <= b.n) memset(copy + at, 0xff, 8);
          break;
        default:
          if (at + 8 <= b.n) memset(copy + at, 0, 8);
          break;
      }
    }
    feri_gguf *g = NULL;
    if (feri_gguf_open(copy, b.n, &g) == FER_STATUS_OK) {
      parsed++;
      walk(g);
      feri_gguf_close(g);
    }
    free(copy);
  }
  CHECK(parsed > 0); /* damage inside tensor data is harmless */
  free(b.p);
}

/* ---- Files ---------------------------------------------------------------------------------- */

static void test_files(void) {
  const char *dir = getenv("TEST_TMPDIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/gguf_test_%d.gguf", dir ? dir : "/tmp", (int)getpid());
  buf b = {0};
  layout L;
  build_main(&b, 64, &L);
  FILE *f = fopen(path, "wb");
  CHECK(f != NULL);
  if (f == NULL) return;
  fwrite(b.p, 1, b.n, f);
  fclose(f);
  feri_gguf *g = NULL;
  CHECK_STATUS(feri_gguf_open_file(path, &g), FER_STATUS_OK);
  const feri_gguf_tensor_info *t = feri_gguf_tensor(g, feri_gguf_find_tensor(g, "e.q80"));
  CHECK(t != NULL && ((const uint8_t *)t->data)[0] == 0x14);
  walk(g);
  feri_gguf_close(g);

  f = fopen(path, "wb"); /* damaged: the message names the file */
  b.p[0] = 'X';
  fwrite(b.p, 1, b.n, f);
  fclose(f);
  CHECK_STATUS(feri_gguf_open_file(path, &g), FER_STATUS_BAD_FORMAT);
  char msg[512];
  last_message(msg, sizeof msg);
  CHECK(g == NULL && strstr(msg, "magic") && strstr(msg, path));
  f = fopen(path, "wb");
  fclose(f);
  CHECK_STATUS(feri_gguf_open_file(path, &g), FER_STATUS_CORRUPT);
  last_message(msg, sizeof msg);
  CHECK(strstr(msg, "empty") != NULL);
  unlink(path);
  CHECK_STATUS(feri_gguf_open_file(path, &g), FER_STATUS_INVALID_ARG);
  last_message(msg, sizeof msg);
  CHECK(strstr(msg, path) != NULL);
  CHECK_STATUS(feri_gguf_open_file(dir ? dir : "/tmp", &g), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(feri_gguf_open_file(NULL, &g), FER_STATUS_NULL_ARG);
  free(b.p);
}

/* ---- The real model file -------------------------------------------------------------------- */

static void test_model(void) {
  char path[4096];
  if (!feri_test_data_path("smollm2-135m-instruct-q4_1.gguf", path, sizeof path)) {
    printf(
        "SKIPPED: gguf_test model check: smollm2-135m-instruct-q4_1.gguf not found "
        "($FERRITE_DATA_DIR or ~/.cache/ferrite)\n");
    return;
  }
  feri_gguf *g = NULL;
  CHECK_STATUS(feri_gguf_open_file(path, &g), FER_STATUS_OK);
  if (g == NULL) return;
  const char *s;
  size_t n;
  CHECK_STATUS(feri_gguf_get_str(g, "general.architecture", &s, &n), FER_STATUS_OK);
  CHECK(str_is(s, n, "llama"));
  CHECK(feri_gguf_tensor_count(g) == 272);
  uint32_t u;
  CHECK_STATUS(feri_gguf_get_u32(g, "llama.block_count", &u), FER_STATUS_OK);
  CHECK(u == 30);
  uint32_t et;
  uint64_t cnt;
  CHECK_STATUS(feri_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &cnt), FER_STATUS_OK);
  CHECK(et == FERI_GGUF_STRING && cnt == 49152);
  int64_t k = feri_gguf_find_kv(g, "tokenizer.ggml.tokens");
  CHECK_STATUS(feri_gguf_arr_str(g, k, cnt - 1, &s, &n), FER_STATUS_OK);
  CHECK_STATUS(feri_gguf_get_arr(g, "tokenizer.ggml.merges", &et, &cnt), FER_STATUS_OK);
  CHECK(et == FERI_GGUF_STRING && cnt == 48900);
  CHECK_STATUS(feri_gguf_get_str(g, "tokenizer.ggml.pre", &s, &n), FER_STATUS_OK);
  CHECK(str_is(s, n, "smollm"));
  CHECK_STATUS(feri_gguf_get_u32(g, "tokenizer.ggml.bos_token_id", &u), FER_STATUS_OK);
  CHECK(u == 1);
  CHECK_STATUS(feri_gguf_get_u32(g, "tokenizer.ggml.eos_token_id", &u), FER_STATUS_OK);
  CHECK(u == 2);
  const feri_gguf_tensor_info *t =
      feri_gguf_tensor(g, feri_gguf_find_tensor(g, "token_embd.weight"));
  CHECK(t != NULL && t->ggml_type == FERI_GGML_Q8_0 && t->n_dims == 2 && t->dims[0] == 576 &&
        t->dims[1] == 49152);
  int n_q41 = 0, n_f32 = 0;
  for (int64_t i = 0; i < feri_gguf_tensor_count(g); i++) {
    const feri_gguf_tensor_info *ti = feri_gguf_tensor(g, i);
    n_q41 += ti->ggml_type == FERI_GGML_Q4_1;
    n_f32 += ti->ggml_type == FERI_GGML_F32;
  }
  CHECK(n_q41 == 210 && n_f32 == 61);
  char line[256];
  size_t ll;
  CHECK_STATUS(feri_gguf_kv_describe(g, k, line, sizeof line, &ll), FER_STATUS_OK);
  CHECK(strncmp(line, "tokenizer.ggml.tokens: ARRAY[49152] of STRING = [\"<|endoftext|>\", ", 62) ==
        0);
  walk(g);
  feri_gguf_close(g);
  printf("gguf_test: model file checked: %s\n", path);
}

int main(void) {
  test_getters();
  test_big_string_array();
  test_corruptions();
  test_truncations();
  test_random_damage();
  test_files();
  test_model();
  return feri_test_finish("gguf_test");
}
