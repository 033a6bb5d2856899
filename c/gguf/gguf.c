/* gguf.c: the GGUF v2/v3 parser. One pass over the image with a bounds-checked reader; every count
 * is checked against the bytes left before it drives a loop or an allocation, and the arrays that
 * grow with the file (pairs, tensors) grow by doubling as entries are actually read, so a lying
 * header costs nothing. Lookups go through name-sorted pointer arrays built once at open. */
#include "gguf/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/file.h"
#include "core/status.h"

/* Smallest encodings, for bounding counts by the bytes left: a pair is a key length (8), a key of
 * at least one byte, a type (4) and a value of at least one byte; a tensor info is a name length
 * (8), a name of at least one byte, n_dims (4), one dim (8), a type (4) and an offset (8). */
enum {
  MIN_KV_BYTES = 8 + 1 + 4 + 1,
  MIN_TENSOR_BYTES = 8 + 1 + 4 + 8 + 4 + 8,
  MIN_STRING_BYTES = 8
};

typedef struct feri_gguf_kv {
  const char *key;
  size_t key_len;
  size_t key_at; /* image offset of the key's length, for messages */
  uint32_t type;
  uint32_t elem_type;   /* arrays */
  const uint8_t *value; /* scalars: the value; STRING: its bytes; ARRAY: the first element */
  uint64_t len;         /* STRING: bytes; ARRAY: elements */
  size_t *str_at;       /* arrays of strings: image offset of each element's u64 length */
} feri_gguf_kv;

struct feri_gguf {
  const uint8_t *base;
  size_t size;
  void *map; /* open_file's mapping, NULL otherwise */
  size_t map_size;
  uint32_t version;
  uint32_t alignment;
  uint64_t data_offset;
  feri_gguf_kv *kv;
  size_t n_kv, cap_kv;
  const feri_gguf_kv **kv_by_key;
  feri_gguf_tensor_info *t;
  size_t n_t, cap_t;
  const feri_gguf_tensor_info **t_by_name;
};

/* ---- Little-endian loads ------------------------------------------------------------------ */

static uint16_t ld16(const uint8_t *p) { return (uint16_t)(p[0] | (uint16_t)p[1] << 8); }
static uint32_t ld32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t ld64(const uint8_t *p) { return (uint64_t)ld32(p) | (uint64_t)ld32(p + 4) << 32; }

/* ---- Type tables --------------------------------------------------------------------------- */

size_t feri_gguf_type_size(uint32_t type) {
  switch (type) {
    case FERI_GGUF_UINT8:
    case FERI_GGUF_INT8:
    case FERI_GGUF_BOOL: return 1;
    case FERI_GGUF_UINT16:
    case FERI_GGUF_INT16: return 2;
    case FERI_GGUF_UINT32:
    case FERI_GGUF_INT32:
    case FERI_GGUF_FLOAT32: return 4;
    case FERI_GGUF_UINT64:
    case FERI_GGUF_INT64:
    case FERI_GGUF_FLOAT64: return 8;
    default: return 0;
  }
}

const char *feri_gguf_type_name(uint32_t type) {
  static const char *const names[] = {"UINT8",  "INT8",    "UINT16", "INT16",  "UINT32",
                                      "INT32",  "FLOAT32", "BOOL",   "STRING", "ARRAY",
                                      "UINT64", "INT64",   "FLOAT64"};
  return type < sizeof names / sizeof names[0] ? names[type] : "unknown";
}

const char *feri_ggml_type_name(uint32_t t) {
  static const char *const names[] = {
      "F32",   "F16",        "Q4_0",       "Q4_1",       "Q4_2",     "Q4_3",     "Q5_0",
      "Q5_1",  "Q8_0",       "Q8_1",       "Q2_K",       "Q3_K",     "Q4_K",     "Q5_K",
      "Q6_K",  "Q8_K",       "IQ2_XXS",    "IQ2_XS",     "IQ3_XXS",  "IQ1_S",    "IQ4_NL",
      "IQ3_S", "IQ2_S",      "IQ4_XS",     "I8",         "I16",      "I32",      "I64",
      "F64",   "IQ1_M",      "BF16",       "Q4_0_4_4",   "Q4_0_4_8", "Q4_0_8_8", "TQ1_0",
      "TQ2_0", "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4"};
  return t < sizeof names / sizeof names[0] ? names[t] : "unknown";
}

/* Block sizes as ggml lays the blocks out (ggml-common.h): K-quants have 256-element super-blocks.
 * Q8_1 is ggml's current 36-byte block (two f16, 32 int8). */
static bool ggml_block(uint32_t t, uint64_t *elems, uint64_t *bytes) {
  static const struct {
    uint32_t type, elems, bytes;
  } table[] = {
      {FERI_GGML_F32, 1, 4},      {FERI_GGML_F16, 1, 2},      {FERI_GGML_Q4_0, 32, 18},
      {FERI_GGML_Q4_1, 32, 20},   {FERI_GGML_Q5_0, 32, 22},   {FERI_GGML_Q5_1, 32, 24},
      {FERI_GGML_Q8_0, 32, 34},   {FERI_GGML_Q8_1, 32, 36},   {FERI_GGML_Q2_K, 256, 84},
      {FERI_GGML_Q3_K, 256, 110}, {FERI_GGML_Q4_K, 256, 144}, {FERI_GGML_Q5_K, 256, 176},
      {FERI_GGML_Q6_K, 256, 210}, {FERI_GGML_Q8_K, 256, 292}, {FERI_GGML_BF16, 1, 2},
      {FERI_GGML_MXFP4, 32, 17},  {FERI_GGML_IQ4_NL, 32, 18}, {FERI_GGML_IQ4_XS, 256, 136},
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (table[i].type == t) {
      *elems = table[i].elems;
      *bytes = table[i].bytes;
      return true;
    }
  *elems = *bytes = 0;
  return false;
}

fer_status feri_ggml_type_block(uint32_t t, uint64_t *out_block_elems, uint64_t *out_block_bytes) {
  feri_error_clear();
  if (out_block_elems == NULL || out_block_bytes == NULL)
    return feri_fail(FER_STATUS_NULL_ARG, "feri_ggml_type_block: NULL output");
  if (!ggml_block(t, out_block_elems, out_block_bytes))
    return feri_fail(FER_STATUS_UNSUPPORTED, "gguf: ggml type %" PRIu32 " (%s) is not supported", t,
                     feri_ggml_type_name(t));
  return FER_STATUS_OK;
}

/* ---- The reader ---------------------------------------------------------------------------- */

typedef struct parser {
  const uint8_t *p;
  size_t size;
  size_t pos;
  char ctx[160]; /* what is being read, for messages: "header", "key 'a.b' (byte 24)" */
} parser;

/* Up to 64 bytes of a name with anything unprintable as '?', for messages. */
static const char *show(char buf[80], const char *s, size_t n) {
  size_t k = n < 64 ? n : 64, j = 0;
  for (size_t i = 0; i < k; i++) buf[j++] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
  if (n > k) buf[j++] = '.', buf[j++] = '.', buf[j++] = '.';
  buf[j] = '\0';
  return buf;
}

static size_t left(const parser *ps) { return ps->size - ps->pos; }

static fer_status need(const parser *ps, size_t n, const char *what) {
  if (n <= left(ps)) return FER_STATUS_OK;
  return feri_fail(FER_STATUS_CORRUPT,
                   "gguf: truncated: %s: %s at byte %zu needs %zu bytes, %zu remain", ps->ctx, what,
                   ps->pos, n, left(ps));
}

static fer_status rd_u32(parser *ps, const char *what, uint32_t *out) {
  fer_status st = need(ps, 4, what);
  if (st != FER_STATUS_OK) return st;
  *out = ld32(ps->p + ps->pos);
  ps->pos += 4;
  return FER_STATUS_OK;
}

static fer_status rd_u64(parser *ps, const char *what, uint64_t *out) {
  fer_status st = need(ps, 8, what);
  if (st != FER_STATUS_OK) return st;
  *out = ld64(ps->p + ps->pos);
  ps->pos += 8;
  return FER_STATUS_OK;
}

/* A gguf string: u64 length, then the bytes. */
static fer_status rd_str(parser *ps, const char *what, const uint8_t **out, uint64_t *out_len) {
  size_t at = ps->pos;
  uint64_t n;
  fer_status st = rd_u64(ps, what, &n);
  if (st != FER_STATUS_OK) return st;
  if (n > left(ps))
    return feri_fail(FER_STATUS_CORRUPT,
                     "gguf: %s: %s length %" PRIu64
                     " at byte %zu runs past the end of the image (%zu bytes remain)",
                     ps->ctx, what, n, at, left(ps));
  *out = ps->p + ps->pos;
  *out_len = n;
  ps->pos += (size_t)n;
  return FER_STATUS_OK;
}

/* Grows *arr (of `elem`-byte entries) to hold at least `want`, doubling. */
static fer_status grow(void **arr, size_t *cap, size_t want, size_t elem) {
  if (want <= *cap) return FER_STATUS_OK;
  size_t nc = *cap ? *cap : 16;
  while (nc < want) {
    if (nc > SIZE_MAX / 2 / elem) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "gguf: out of memory");
    nc *= 2;
  }
  void *p = realloc(*arr, nc * elem);
  if (p == NULL)
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "gguf: out of memory for %zu entries", nc);
  *arr = p;
  *cap = nc;
  return FER_STATUS_OK;
}

/* ---- Metadata ------------------------------------------------------------------------------ */

static fer_status check_bools(const parser *ps, const uint8_t *v, uint64_t n, size_t at) {
  for (uint64_t i = 0; i < n; i++)
    if (v[i] > 1)
      return feri_fail(FER_STATUS_CORRUPT, "gguf: %s: BOOL value %u at byte %zu is neither 0 nor 1",
                       ps->ctx, (unsigned)v[i], at + (size_t)i);
  return FER_STATUS_OK;
}

static fer_status parse_array(parser *ps, feri_gguf_kv *kv) {
  size_t at = ps->pos;
  uint32_t et;
  uint64_t count;
  fer_status st = rd_u32(ps, "array element type", &et);
  if (st != FER_STATUS_OK) return st;
  if (et == FERI_GGUF_ARRAY)
    return feri_fail(FER_STATUS_UNSUPPORTED,
                     "gguf: %s: nested array (array of arrays) at byte %zu is not supported",
                     ps->ctx, at);
  if (et != FERI_GGUF_STRING && feri_gguf_type_size(et) == 0)
    return feri_fail(FER_STATUS_CORRUPT,
                     "gguf: %s: unknown array element type %" PRIu32 " at byte %zu", ps->ctx, et,
                     at);
  size_t count_at = ps->pos;
  if ((st = rd_u64(ps, "array count", &count)) != FER_STATUS_OK) return st;
  kv->elem_type = et;
  kv->len = count;
  kv->value = ps->p + ps->pos;
  const size_t esize = et == FERI_GGUF_STRING ? MIN_STRING_BYTES : feri_gguf_type_size(et);
  if (count > left(ps) / esize)
    return feri_fail(FER_STATUS_CORRUPT,
                     "gguf: %s: array count %" PRIu64
                     " of %s at byte %zu exceeds what the %zu remaining bytes hold",
                     ps->ctx, count, feri_gguf_type_name(et), count_at, left(ps));
  if (et != FERI_GGUF_STRING) {
    if (et == FERI_GGUF_BOOL && (st = check_bools(ps, kv->value, count, ps->pos)) != FER_STATUS_OK)
      return st;
    ps->pos += (size_t)count * esize;
    return FER_STATUS_OK;
  }
  /* count <= bytes left / 8, so this allocation is bounded by the image's size. */
  kv->str_at = malloc(count ? (size_t)count * sizeof *kv->str_at : 1);
  if (kv->str_at == NULL)
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "gguf: %s: out of memory for %" PRIu64 " strings",
                     ps->ctx, count);
  for (uint64_t i = 0; i < count; i++) {
    const uint8_t *s;
    uint64_t n;
    kv->str_at[i] = ps->pos;
    if ((st = rd_str(ps, "string element", &s, &n)) != FER_STATUS_OK) return st;
  }
  return FER_STATUS_OK;
}

static fer_status parse_kv(parser *ps, feri_gguf_kv *kv) {
  size_t at = ps->pos;
  snprintf(ps->ctx, sizeof ps->ctx, "key at byte %zu", at);
  const uint8_t *k;
  uint64_t klen;
  fer_status st = rd_str(ps, "key", &k, &klen);
  if (st != FER_STATUS_OK) return st;
  if (klen == 0) return feri_fail(FER_STATUS_CORRUPT, "gguf: %s: empty key", ps->ctx);
  if (klen > FERI_GGUF_MAX_KEY_LEN)
    return feri_fail(FER_STATUS_CORRUPT, "gguf: %s: key length %" PRIu64 " exceeds %d", ps->ctx,
                     klen, FERI_GGUF_MAX_KEY_LEN);
  if (memchr(k, 0, (size_t)klen) != NULL)
    return feri_fail(FER_STATUS_CORRUPT, "gguf: %s: key contains a NUL byte", ps->ctx);
  kv->key = (const char *)k;
  kv->key_len = (size_t)klen;
  kv->key_at = at;
  char name[80];
  snprintf(ps->ctx, sizeof ps->ctx, "key '%s' (byte %zu)", show(name, kv->key, kv->key_len), at);
  size_t type_at = ps->pos;
  if ((st = rd_u32(ps, "value type", &kv->type)) != FER_STATUS_OK) return st;
  if (kv->type == FERI_GGUF_STRING) {
    if ((st = rd_str(ps, "string value", &kv->value, &kv->len)) != FER_STATUS_OK) return st;
    return FER_STATUS_OK;
  }
  if (kv->type == FERI_GGUF_ARRAY) return parse_array(ps, kv);
  size_t n = feri_gguf_type_size(kv->type);
  if (n == 0)
    return feri_fail(FER_STATUS_CORRUPT, "gguf: %s: unknown value type %" PRIu32 " at byte %zu",
                     ps->ctx, kv->type, type_at);
  if ((st = need(ps, n, "value")) != FER_STATUS_OK) return st;
  kv->value = ps->p + ps->pos;
  kv->len = 1;
  if (kv->type == FERI_GGUF_BOOL && (st = check_bools(ps, kv->value, 1, ps->pos)) != FER_STATUS_OK)
    return st;
  ps->pos += n;
  return FER_STATUS_OK;
}

static int cmp_names(const char *a, size_t an, const char *b, size_t bn) {
  int c = memcmp(a, b, an < bn ? an : bn);
  return c != 0 ? c : (an > bn) - (an < bn);
}

static int cmp_kv(const void *a, const void *b) {
  const feri_gguf_kv *x = *(const feri_gguf_kv *const *)a, *y = *(const feri_gguf_kv *const *)b;
  return cmp_names(x->key, x->key_len, y->key, y->key_len);
}

static fer_status index_keys(feri_gguf *g) {
  g->kv_by_key = malloc((g->n_kv ? g->n_kv : 1) * sizeof *g->kv_by_key);
  if (g->kv_by_key == NULL) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "gguf: out of memory");
  for (size_t i = 0; i < g->n_kv; i++) g->kv_by_key[i] = &g->kv[i];
  qsort(g->kv_by_key, g->n_kv, sizeof *g->kv_by_key, cmp_kv);
  for (size_t i = 1; i < g->n_kv; i++)
    if (cmp_kv(&g->kv_by_key[i - 1], &g->kv_by_key[i]) == 0) {
      const feri_gguf_kv *a = g->kv_by_key[i - 1], *b = g->kv_by_key[i];
      char name[80];
      return feri_fail(FER_STATUS_CORRUPT, "gguf: duplicate key '%s' at bytes %zu and %zu",
                       show(name, a->key, a->key_len),
                       a->key_at < b->key_at ? a->key_at : b->key_at,
                       a->key_at < b->key_at ? b->key_at : a->key_at);
    }
  return FER_STATUS_OK;
}

static fer_status read_alignment(feri_gguf *g) {
  g->alignment = FERI_GGUF_DEFAULT_ALIGNMENT;
  int64_t i = feri_gguf_find_kv(g, "general.alignment");
  if (i < 0) return FER_STATUS_OK;
  const feri_gguf_kv *kv = &g->kv[i];
  if (kv->type != FERI_GGUF_UINT32)
    return feri_fail(FER_STATUS_CORRUPT,
                     "gguf: key 'general.alignment' (byte %zu) has type %s, must be UINT32",
                     kv->key_at, feri_gguf_type_name(kv->type));
  uint32_t a = ld32(kv->value);
  if (a == 0 || (a & (a - 1)) != 0)
    return feri_fail(FER_STATUS_CORRUPT,
                     "gguf: key 'general.alignment' (byte %zu) is %" PRIu32 ", not a power of two",
                     kv->key_at, a);
  g->alignment = a;
  return FER_STATUS_OK;
}

/* ---- Tensor infos -------------------------------------------------------------------------- */

static fer_status parse_tensor(parser *ps, uint32_t alignment, feri_gguf_tensor_info *t) {
  size_t at = ps->pos;
  snprintf(ps->ctx, sizeof ps->ctx, "tensor info at byte %zu", at);
  const uint8_t *s;
  uint64_t n;
  fer_status st = rd_str(ps, "name", &s, &n);
  if (st != FER_STATUS_OK) return st;
  if (n == 0) return feri_fail(FER_STATUS_CORRUPT, "gguf: %s: empty tensor name", ps->ctx);
  if (memchr(s, 0, (size_t)n) != NULL)
    return feri_fail(FER_STATUS_CORRUPT, "gguf: %s: tensor name contains a NUL byte", ps->ctx);
  t->name = (const char *)s;
  t->name_len = (size_t)n;
  char name[80];
  snprintf(ps->ctx, sizeof ps->ctx, "tensor '%s' (byte %zu)", show(name, t->name, t->name_len), at);
  if ((st = rd_u32(ps, "n_dims", &t->n_dims)) != FER_STATUS_OK) return st;
  if (t->n_dims == 0 || t->n_dims > FERI_GGUF_MAX_DIMS)
    return feri_fail(FER_STATUS_CORRUPT, "gguf: %s: n_dims %" PRIu32 " is outside 1..%d", ps->ctx,
                     t->n_dims, FERI_GGUF_MAX_DIMS);
  uint64_t ne = 1;
  for (uint32_t d = 0; d < FERI_GGUF_MAX_DIMS; d++) t->dims[d] = 1;
  for (uint32_t d = 0; d < t->n_dims; d++) {
    if ((st = rd_u64(ps, "dim", &t->dims[d])) != FER_STATUS_OK) return st;
    if (t->dims[d] == 0)
      return feri_fail(FER_STATUS_CORRUPT, "gguf: %s: dim %" PRIu32 " is zero", ps->ctx, d);
    if (t->dims[d] > (uint64_t)INT64_MAX / ne)
      return feri_fail(FER_STATUS_CORRUPT,
                       "gguf: %s: element count overflows int64 at dim %" PRIu32 " (%" PRIu64 ")",
                       ps->ctx, d, t->dims[d]);
    ne *= t->dims[d];
  }
  t->n_elements = ne;
  if ((st = rd_u32(ps, "ggml type", &t->ggml_type)) != FER_STATUS_OK) return st;
  uint64_t be, bb;
  if (!ggml_block(t->ggml_type, &be, &bb))
    return feri_fail(FER_STATUS_UNSUPPORTED,
                     "gguf: %s: ggml type %" PRIu32 " (%s) is not supported", ps->ctx, t->ggml_type,
                     feri_ggml_type_name(t->ggml_type));
  if (t->dims[0] % be != 0)
    return feri_fail(FER_STATUS_CORRUPT,
                     "gguf: %s: dim 0 (%" PRIu64 ") is not a multiple of the %s block of %" PRIu64
                     " elements",
                     ps->ctx, t->dims[0], feri_ggml_type_name(t->ggml_type), be);
  if (ne / be > (uint64_t)INT64_MAX / bb)
    return feri_fail(FER_STATUS_CORRUPT,
                     "gguf: %s: byte size overflows int64 (%" PRIu64 " elements of %s)", ps->ctx,
                     ne, feri_ggml_type_name(t->ggml_type));
  t->n_bytes = ne / be * bb;
  size_t off_at = ps->pos;
  if ((st = rd_u64(ps, "offset", &t->offset)) != FER_STATUS_OK) return st;
  if (t->offset % alignment != 0)
    return feri_fail(FER_STATUS_CORRUPT,
                     "gguf: %s: data offset %" PRIu64
                     " (at byte %zu) is not a multiple of the alignment %" PRIu32,
                     ps->ctx, t->offset, off_at, alignment);
  return FER_STATUS_OK;
}

static int cmp_tensor_name(const void *a, const void *b) {
  const feri_gguf_tensor_info *x = *(const feri_gguf_tensor_info *const *)a;
  const feri_gguf_tensor_info *y = *(const feri_gguf_tensor_info *const *)b;
  return cmp_names(x->name, x->name_len, y->name, y->name_len);
}

static int cmp_tensor_offset(const void *a, const void *b) {
  const feri_gguf_tensor_info *x = *(const feri_gguf_tensor_info *const *)a;
  const feri_gguf_tensor_info *y = *(const feri_gguf_tensor_info *const *)b;
  return (x->offset > y->offset) - (x->offset < y->offset);
}

/* Names unique, data inside the image, no two tensors sharing a byte. */
static fer_status check_tensors(feri_gguf *g) {
  char n1[80], n2[80];
  const size_t n = g->n_t;
  g->t_by_name = malloc((n ? n : 1) * sizeof *g->t_by_name);
  if (g->t_by_name == NULL) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "gguf: out of memory");
  for (size_t i = 0; i < n; i++) g->t_by_name[i] = &g->t[i];
  qsort(g->t_by_name, n, sizeof *g->t_by_name, cmp_tensor_name);
  for (size_t i = 1; i < n; i++)
    if (cmp_tensor_name(&g->t_by_name[i - 1], &g->t_by_name[i]) == 0)
      return feri_fail(FER_STATUS_CORRUPT, "gguf: duplicate tensor name '%s'",
                       show(n1, g->t_by_name[i]->name, g->t_by_name[i]->name_len));
  if (n == 0) return FER_STATUS_OK;
  if (g->data_offset > g->size)
    return feri_fail(FER_STATUS_CORRUPT,
                     "gguf: truncated: the data section would start at byte %" PRIu64
                     ", past the end of the %zu-byte "
                     "image",
                     g->data_offset, g->size);
  const uint64_t avail = g->size - g->data_offset;
  for (size_t i = 0; i < n; i++) {
    feri_gguf_tensor_info *t = &g->t[i];
    if (t->offset > avail || t->n_bytes > avail - t->offset)
      return feri_fail(
          FER_STATUS_CORRUPT,
          "gguf: tensor '%s': data [%" PRIu64 ", +%" PRIu64
          ") runs past the end of the data section (%" PRIu64 " bytes from byte %" PRIu64 ")",
          show(n1, t->name, t->name_len), t->offset, t->n_bytes, avail, g->data_offset);
    t->file_offset = g->data_offset + t->offset;
    t->data = g->base + t->file_offset;
  }
  const feri_gguf_tensor_info **by_off = malloc(n * sizeof *by_off);
  if (by_off == NULL) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "gguf: out of memory");
  for (size_t i = 0; i < n; i++) by_off[i] = &g->t[i];
  qsort(by_off, n, sizeof *by_off, cmp_tensor_offset);
  fer_status st = FER_STATUS_OK;
  for (size_t i = 1; i < n && st == FER_STATUS_OK; i++) {
    const feri_gguf_tensor_info *a = by_off[i - 1], *b = by_off[i];
    if (a->offset + a->n_bytes > b->offset)
      st = feri_fail(FER_STATUS_CORRUPT,
                     "gguf: tensors '%s' [%" PRIu64 ", +%" PRIu64 ") and '%s' [%" PRIu64
                     ", +%" PRIu64 ") overlap",
                     show(n1, a->name, a->name_len), a->offset, a->n_bytes,
                     show(n2, b->name, b->name_len), b->offset, b->n_bytes);
  }
  free(by_off);
  return st;
}

/* ---- Open / close -------------------------------------------------------------------------- */

void feri_gguf_close(feri_gguf *g) {
  if (g == NULL) return;
  for (size_t i = 0; i < g->n_kv; i++) free(g->kv[i].str_at);
  free(g->kv);
  free(g->kv_by_key);
  free(g->t);
  free(g->t_by_name);
  if (g->map != NULL) munmap(g->map, g->map_size);
  free(g);
}

static fer_status parse_header(parser *ps, feri_gguf *g, uint64_t *n_t, uint64_t *n_kv) {
  static const uint8_t magic[4] = {'G', 'G', 'U', 'F'};
  snprintf(ps->ctx, sizeof ps->ctx, "header");
  if (ps->size < 4) {
    if (ps->size > 0 && memcmp(ps->p, magic, ps->size) == 0)
      return feri_fail(FER_STATUS_CORRUPT, "gguf: truncated: %zu bytes, too short for the magic",
                       ps->size);
    return feri_fail(FER_STATUS_BAD_FORMAT, "gguf: not a GGUF image: %zu bytes, no magic",
                     ps->size);
  }
  if (memcmp(ps->p, magic, 4) != 0)
    return feri_fail(FER_STATUS_BAD_FORMAT,
                     "gguf: bad magic %02x %02x %02x %02x at byte 0 (want \"GGUF\")", ps->p[0],
                     ps->p[1], ps->p[2], ps->p[3]);
  ps->pos = 4;
  fer_status st = rd_u32(ps, "version", &g->version);
  if (st != FER_STATUS_OK) return st;
  if (g->version == 0x02000000u || g->version == 0x03000000u)
    return feri_fail(FER_STATUS_BAD_FORMAT,
                     "gguf: version at byte 4 reads big-endian; big-endian GGUF is not supported");
  if (g->version != 2 && g->version != 3)
    return feri_fail(FER_STATUS_BAD_FORMAT,
                     "gguf: version %" PRIu32 " at byte 4 is not supported (2 and 3 are)",
                     g->version);
  if ((st = rd_u64(ps, "tensor_count", n_t)) != FER_STATUS_OK) return st;
  if ((st = rd_u64(ps, "kv_count", n_kv)) != FER_STATUS_OK) return st;
  size_t rem = left(ps);
  if (*n_kv > rem / MIN_KV_BYTES)
    return feri_fail(FER_STATUS_CORRUPT,
                     "gguf: kv_count %" PRIu64
                     " at byte 16 exceeds what the %zu remaining bytes hold",
                     *n_kv, rem);
  rem -= (size_t)*n_kv * MIN_KV_BYTES;
  if (*n_t > rem / MIN_TENSOR_BYTES)
    return feri_fail(FER_STATUS_CORRUPT,
                     "gguf: tensor_count %" PRIu64
                     " at byte 8 exceeds what the %zu remaining bytes hold (after %" PRIu64
                     " pairs)",
                     *n_t, rem, *n_kv);
  return FER_STATUS_OK;
}

static fer_status parse(parser *ps, feri_gguf *g) {
  uint64_t n_t, n_kv;
  fer_status st = parse_header(ps, g, &n_t, &n_kv);
  if (st != FER_STATUS_OK) return st;
  for (uint64_t i = 0; i < n_kv; i++) {
    if ((st = grow((void **)&g->kv, &g->cap_kv, g->n_kv + 1, sizeof *g->kv)) != FER_STATUS_OK)
      return st;
    feri_gguf_kv *kv = &g->kv[g->n_kv++]; /* counted first, so close frees its strings on failure */
    memset(kv, 0, sizeof *kv);
    if ((st = parse_kv(ps, kv)) != FER_STATUS_OK) return st;
  }
  if ((st = index_keys(g)) != FER_STATUS_OK) return st;
  if ((st = read_alignment(g)) != FER_STATUS_OK) return st;
  for (uint64_t i = 0; i < n_t; i++) {
    if ((st = grow((void **)&g->t, &g->cap_t, g->n_t + 1, sizeof *g->t)) != FER_STATUS_OK)
      return st;
    feri_gguf_tensor_info *t = &g->t[g->n_t++];
    memset(t, 0, sizeof *t);
    if ((st = parse_tensor(ps, g->alignment, t)) != FER_STATUS_OK) return st;
  }
  /* pos <= size <= SIZE_MAX, alignment <= 2^31: no overflow in 64 bits. */
  g->data_offset = ((uint64_t)ps->pos + g->alignment - 1) / g->alignment * g->alignment;
  return check_tensors(g);
}

fer_status feri_gguf_open(const void *data, size_t size, feri_gguf **out) {
  feri_error_clear();
  if (out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "feri_gguf_open: out is NULL");
  *out = NULL;
  if (data == NULL && size > 0)
    return feri_fail(FER_STATUS_NULL_ARG, "feri_gguf_open: data is NULL");
  feri_gguf *g = calloc(1, sizeof *g);
  if (g == NULL) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "gguf: out of memory");
  g->base = data;
  g->size = size;
  parser ps = {.p = data, .size = size, .pos = 0};
  fer_status st = parse(&ps, g);
  if (st != FER_STATUS_OK) {
    feri_gguf_close(g);
    return st;
  }
  *out = g;
  return FER_STATUS_OK;
}

fer_status feri_gguf_open_file(const char *path, feri_gguf **out) {
  feri_error_clear();
  if (out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "feri_gguf_open_file: out is NULL");
  *out = NULL;
  if (path == NULL) return feri_fail(FER_STATUS_NULL_ARG, "feri_gguf_open_file: path is NULL");
  char ebuf[128];
  /* a regular file or nothing: a FIFO or device is refused before it is opened (core/file.h) */
  int fd;
  uint64_t file_size;
  fer_status st = feri_file_open_regular(path, "gguf", &fd, &file_size);
  if (st != FER_STATUS_OK) return st;
  if (file_size == 0) {
    close(fd);
    return feri_fail(FER_STATUS_CORRUPT, "gguf: '%s' is empty", path);
  }
  if (file_size > SIZE_MAX) {
    close(fd);
    return feri_fail(FER_STATUS_INVALID_ARG, "gguf: '%s' is too large to map", path);
  }
  size_t size = (size_t)file_size;
  void *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int map_errno = errno;
  close(fd);
  if (m == MAP_FAILED)
    return feri_fail(FER_STATUS_INVALID_ARG, "gguf: cannot map '%s': %s", path,
                     strerror_r(map_errno, ebuf, sizeof ebuf));
  feri_gguf *g;
  st = feri_gguf_open(m, size, &g);
  if (st != FER_STATUS_OK) {
    char msg[400];
    size_t len;
    fer_last_error_message(msg, sizeof msg, &len);
    munmap(m, size);
    return feri_fail(st, "%s (in '%s')", msg, path);
  }
  g->map = m;
  g->map_size = size;
  *out = g;
  return FER_STATUS_OK;
}

uint32_t feri_gguf_version(const feri_gguf *g) { return g ? g->version : 0; }
uint32_t feri_gguf_alignment(const feri_gguf *g) { return g ? g->alignment : 0; }
uint64_t feri_gguf_data_offset(const feri_gguf *g) { return g ? g->data_offset : 0; }

const void *feri_gguf_image(const feri_gguf *g, size_t *out_size) {
  if (out_size != NULL) *out_size = g ? g->size : 0;
  return g ? g->base : NULL;
}

/* ---- Metadata lookups ---------------------------------------------------------------------- */

int64_t feri_gguf_kv_count(const feri_gguf *g) { return g ? (int64_t)g->n_kv : 0; }

int64_t feri_gguf_find_kv_n(const feri_gguf *g, const char *key, size_t key_len) {
  if (g == NULL || key == NULL || g->kv_by_key == NULL) return -1;
  size_t lo = 0, hi = g->n_kv;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const feri_gguf_kv *kv = g->kv_by_key[mid];
    int c = cmp_names(kv->key, kv->key_len, key, key_len);
    if (c == 0) return kv - g->kv;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return -1;
}

int64_t feri_gguf_find_kv(const feri_gguf *g, const char *key) {
  return key == NULL ? -1 : feri_gguf_find_kv_n(g, key, strlen(key));
}

static fer_status kv_at(const feri_gguf *g, int64_t i, const char *fn, const feri_gguf_kv **out) {
  *out = NULL;
  if (g == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: g is NULL", fn);
  if (i < 0 || (uint64_t)i >= g->n_kv)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: pair index %" PRId64 " is outside 0..%zu", fn, i,
                     g->n_kv);
  *out = &g->kv[i];
  return FER_STATUS_OK;
}

fer_status feri_gguf_kv_key(const feri_gguf *g, int64_t i, const char **out_key, size_t *out_len) {
  feri_error_clear();
  if (out_key == NULL || out_len == NULL)
    return feri_fail(FER_STATUS_NULL_ARG, "feri_gguf_kv_key: NULL output");
  *out_key = NULL;
  *out_len = 0;
  const feri_gguf_kv *kv;
  fer_status st = kv_at(g, i, "feri_gguf_kv_key", &kv);
  if (st != FER_STATUS_OK) return st;
  *out_key = kv->key;
  *out_len = kv->key_len;
  return FER_STATUS_OK;
}

fer_status feri_gguf_kv_type(const feri_gguf *g, int64_t i, uint32_t *out_type) {
  feri_error_clear();
  if (out_type == NULL) return feri_fail(FER_STATUS_NULL_ARG, "feri_gguf_kv_type: NULL output");
  *out_type = 0;
  const feri_gguf_kv *kv;
  fer_status st = kv_at(g, i, "feri_gguf_kv_type", &kv);
  if (st != FER_STATUS_OK) return st;
  *out_type = kv->type;
  return FER_STATUS_OK;
}

static fer_status lookup(const feri_gguf *g, const char *key, const char *fn,
                         const feri_gguf_kv **out) {
  *out = NULL;
  if (g == NULL || key == NULL)
    return feri_fail(FER_STATUS_NULL_ARG, "%s: g and key must not be NULL", fn);
  int64_t i = feri_gguf_find_kv(g, key);
  if (i < 0) return feri_fail(FER_STATUS_BAD_FORMAT, "gguf: key '%s' is missing", key);
  *out = &g->kv[i];
  return FER_STATUS_OK;
}

/* An integer of any width and signedness: *neg set with the value in *s, or the value in *u. */
static bool int_value(uint32_t type, const uint8_t *p, bool *neg, int64_t *s, uint64_t *u) {
  int64_t v;
  switch (type) {
    case FERI_GGUF_UINT8: *neg = false, *u = p[0]; return true;
    case FERI_GGUF_UINT16: *neg = false, *u = ld16(p); return true;
    case FERI_GGUF_UINT32: *neg = false, *u = ld32(p); return true;
    case FERI_GGUF_UINT64: *neg = false, *u = ld64(p); return true;
    case FERI_GGUF_INT8: v = (int8_t)p[0]; break;
    case FERI_GGUF_INT16: v = (int16_t)ld16(p); break;
    case FERI_GGUF_INT32: v = (int32_t)ld32(p); break;
    case FERI_GGUF_INT64: v = (int64_t)ld64(p); break;
    default: return false;
  }
  *neg = v < 0;
  *s = v;
  *u = v < 0 ? 0 : (uint64_t)v;
  return true;
}

static fer_status get_int(const feri_gguf *g, const char *key, const char *want, int64_t lo,
                          uint64_t hi, const char *fn, bool *neg, int64_t *s, uint64_t *u) {
  const feri_gguf_kv *kv;
  fer_status st = lookup(g, key, fn, &kv);
  if (st != FER_STATUS_OK) return st;
  if (!int_value(kv->type, kv->value, neg, s, u))
    return feri_fail(FER_STATUS_BAD_FORMAT,
                     "gguf: key '%s' has type %s, not an integer type (want %s)", key,
                     feri_gguf_type_name(kv->type), want);
  if (*neg ? *s < lo : *u > hi) {
    if (*neg)
      return feri_fail(FER_STATUS_BAD_FORMAT, "gguf: key '%s' = %" PRId64 " is out of range for %s",
                       key, *s, want);
    return feri_fail(FER_STATUS_BAD_FORMAT, "gguf: key '%s' = %" PRIu64 " is out of range for %s",
                     key, *u, want);
  }
  return FER_STATUS_OK;
}

fer_status feri_gguf_get_u32(const feri_gguf *g, const char *key, uint32_t *out) {
  feri_error_clear();
  if (out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "feri_gguf_get_u32: out is NULL");
  *out = 0;
  bool neg;
  int64_t s;
  uint64_t u;
  fer_status st = get_int(g, key, "UINT32", 0, UINT32_MAX, "feri_gguf_get_u32", &neg, &s, &u);
  if (st == FER_STATUS_OK) *out = (uint32_t)u;
  return st;
}

fer_status feri_gguf_get_u64(const feri_gguf *g, const char *key, uint64_t *out) {
  feri_error_clear();
  if (out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "feri_gguf_get_u64: out is NULL");
  *out = 0;
  bool neg;
  int64_t s;
  uint64_t u;
  fer_status st = get_int(g, key, "UINT64", 0, UINT64_MAX, "feri_gguf_get_u64", &neg, &s, &u);
  if (st == FER_STATUS_OK) *out = u;
  return st;
}

fer_status feri_gguf_get_i32(const feri_gguf *g, const char *key, int32_t *out) {
  feri_error_clear();
  if (out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "feri_gguf_get_i32: out is NULL");
  *out = 0;
  bool neg;
  int64_t s;
  uint64_t u;
  fer_status st = get_int(g, key, "INT32", INT32_MIN, INT32_MAX, "feri_gguf_get_i32", &neg, &s, &u);
  if (st == FER_STATUS_OK) *out = neg ? (int32_t)s : (int32_t)u;
  return st;
}

static float f32_of(uint32_t bits) {
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static double f64_of(uint64_t bits) {
  double d;
  memcpy(&d, &bits, sizeof d);
  return d;
}

fer_status feri_gguf_get_f32(const feri_gguf *g, const char *key, float *out) {
  feri_error_clear();
  if (out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "feri_gguf_get_f32: out is NULL");
  *out = 0;
  const feri_gguf_kv *kv;
  fer_status st = lookup(g, key, "feri_gguf_get_f32", &kv);
  if (st != FER_STATUS_OK) return st;
  if (kv->type == FERI_GGUF_FLOAT32)
    *out = f32_of(ld32(kv->value));
  else if (kv->type == FERI_GGUF_FLOAT64)
    *out = (float)f64_of(ld64(kv->value));
  else
    return feri_fail(FER_STATUS_BAD_FORMAT, "gguf: key '%s' has type %s, not FLOAT32 or FLOAT64",
                     key, feri_gguf_type_name(kv->type));
  return FER_STATUS_OK;
}

fer_status feri_gguf_get_bool(const feri_gguf *g, const char *key, bool *out) {
  feri_error_clear();
  if (out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "feri_gguf_get_bool: out is NULL");
  *out = false;
  const feri_gguf_kv *kv;
  fer_status st = lookup(g, key, "feri_gguf_get_bool", &kv);
  if (st != FER_STATUS_OK) return st;
  if (kv->type != FERI_GGUF_BOOL)
    return feri_fail(FER_STATUS_BAD_FORMAT, "gguf: key '%s' has type %s, not BOOL", key,
                     feri_gguf_type_name(kv->type));
  *out = kv->value[0] != 0;
  return FER_STATUS_OK;
}

fer_status feri_gguf_get_str(const feri_gguf *g, const char *key, const char **out_str,
                             size_t *out_len) {
  feri_error_clear();
  if (out_str == NULL || out_len == NULL)
    return feri_fail(FER_STATUS_NULL_ARG, "feri_gguf_get_str: NULL output");
  *out_str = NULL;
  *out_len = 0;
  const feri_gguf_kv *kv;
  fer_status st = lookup(g, key, "feri_gguf_get_str", &kv);
  if (st != FER_STATUS_OK) return st;
  if (kv->type != FERI_GGUF_STRING)
    return feri_fail(FER_STATUS_BAD_FORMAT, "gguf: key '%s' has type %s, not STRING", key,
                     feri_gguf_type_name(kv->type));
  *out_str = (const char *)kv->value;
  *out_len = (size_t)kv->len;
  return FER_STATUS_OK;
}

fer_status feri_gguf_get_arr(const feri_gguf *g, const char *key, uint32_t *out_elem_type,
                             uint64_t *out_count) {
  feri_error_clear();
  if (out_elem_type == NULL || out_count == NULL)
    return feri_fail(FER_STATUS_NULL_ARG, "feri_gguf_get_arr: NULL output");
  *out_elem_type = 0;
  *out_count = 0;
  const feri_gguf_kv *kv;
  fer_status st = lookup(g, key, "feri_gguf_get_arr", &kv);
  if (st != FER_STATUS_OK) return st;
  if (kv->type != FERI_GGUF_ARRAY)
    return feri_fail(FER_STATUS_BAD_FORMAT, "gguf: key '%s' has type %s, not ARRAY", key,
                     feri_gguf_type_name(kv->type));
  *out_elem_type = kv->elem_type;
  *out_count = kv->len;
  return FER_STATUS_OK;
}

/* The array at kv_index, checked to be an array and (want_strings) of strings or not. */
static fer_status array_at(const feri_gguf *g, int64_t i, bool want_strings, const char *fn,
                           const feri_gguf_kv **out) {
  fer_status st = kv_at(g, i, fn, out);
  if (st != FER_STATUS_OK) return st;
  const feri_gguf_kv *kv = *out;
  char name[80];
  if (kv->type != FERI_GGUF_ARRAY || (kv->elem_type == FERI_GGUF_STRING) != want_strings) {
    *out = NULL;
    return feri_fail(FER_STATUS_BAD_FORMAT, "%s: key '%s' has type %s%s%s, not an array of %s", fn,
                     show(name, kv->key, kv->key_len), feri_gguf_type_name(kv->type),
                     kv->type == FERI_GGUF_ARRAY ? " of " : "",
                     kv->type == FERI_GGUF_ARRAY ? feri_gguf_type_name(kv->elem_type) : "",
                     want_strings ? "STRING" : "numbers");
  }
  return FER_STATUS_OK;
}

fer_status feri_gguf_arr_str(const feri_gguf *g, int64_t kv_index, uint64_t i, const char **out_str,
                             size_t *out_len) {
  feri_error_clear();
  if (out_str == NULL || out_len == NULL)
    return feri_fail(FER_STATUS_NULL_ARG, "feri_gguf_arr_str: NULL output");
  *out_str = NULL;
  *out_len = 0;
  const feri_gguf_kv *kv;
  fer_status st = array_at(g, kv_index, true, "feri_gguf_arr_str", &kv);
  if (st != FER_STATUS_OK) return st;
  if (i >= kv->len)
    return feri_fail(FER_STATUS_INVALID_ARG,
                     "feri_gguf_arr_str: element %" PRIu64 " of %" PRIu64 " is out of range", i,
                     kv->len);
  const size_t at = kv->str_at[i];
  *out_len = (size_t)ld64(g->base + at);
  *out_str = (const char *)g->base + at + 8;
  return FER_STATUS_OK;
}

fer_status feri_gguf_arr_data(const feri_gguf *g, int64_t kv_index, uint32_t *out_elem_type,
                              const void **out_data, uint64_t *out_count) {
  feri_error_clear();
  if (out_elem_type == NULL || out_data == NULL || out_count == NULL)
    return feri_fail(FER_STATUS_NULL_ARG, "feri_gguf_arr_data: NULL output");
  *out_elem_type = 0;
  *out_data = NULL;
  *out_count = 0;
  const feri_gguf_kv *kv;
  fer_status st = array_at(g, kv_index, false, "feri_gguf_arr_data", &kv);
  if (st != FER_STATUS_OK) return st;
  *out_elem_type = kv->elem_type;
  *out_data = kv->value;
  *out_count = kv->len;
  return FER_STATUS_OK;
}

fer_status feri_gguf_arr_copy_i32(const feri_gguf *g, int64_t kv_index, int32_t *out,
                                  uint64_t cap) {
  static const char fn[] = "feri_gguf_arr_copy_i32";
  feri_error_clear();
  const feri_gguf_kv *kv;
  fer_status st = array_at(g, kv_index, false, fn, &kv);
  if (st != FER_STATUS_OK) return st;
  char name[80];
  if (cap < kv->len)
    return feri_fail(FER_STATUS_BUFFER_TOO_SMALL,
                     "%s: key '%s' has %" PRIu64 " elements, the buffer holds %" PRIu64, fn,
                     show(name, kv->key, kv->key_len), kv->len, cap);
  if (out == NULL && kv->len > 0) return feri_fail(FER_STATUS_NULL_ARG, "%s: out is NULL", fn);
  const size_t es = feri_gguf_type_size(kv->elem_type);
  for (uint64_t i = 0; i < kv->len; i++) {
    bool neg;
    int64_t s;
    uint64_t u;
    if (!int_value(kv->elem_type, kv->value + i * es, &neg, &s, &u))
      return feri_fail(FER_STATUS_BAD_FORMAT, "%s: key '%s' is an array of %s, not of integers", fn,
                       show(name, kv->key, kv->key_len), feri_gguf_type_name(kv->elem_type));
    if (neg ? s < INT32_MIN : u > INT32_MAX)
      return feri_fail(FER_STATUS_BAD_FORMAT,
                       "%s: key '%s' element %" PRIu64 " is out of range for INT32", fn,
                       show(name, kv->key, kv->key_len), i);
    out[i] = neg ? (int32_t)s : (int32_t)u;
  }
  return FER_STATUS_OK;
}

fer_status feri_gguf_arr_copy_f32(const feri_gguf *g, int64_t kv_index, float *out, uint64_t cap) {
  static const char fn[] = "feri_gguf_arr_copy_f32";
  feri_error_clear();
  const feri_gguf_kv *kv;
  fer_status st = array_at(g, kv_index, false, fn, &kv);
  if (st != FER_STATUS_OK) return st;
  char name[80];
  if (kv->elem_type != FERI_GGUF_FLOAT32 && kv->elem_type != FERI_GGUF_FLOAT64)
    return feri_fail(FER_STATUS_BAD_FORMAT,
                     "%s: key '%s' is an array of %s, not FLOAT32 or FLOAT64", fn,
                     show(name, kv->key, kv->key_len), feri_gguf_type_name(kv->elem_type));
  if (cap < kv->len)
    return feri_fail(FER_STATUS_BUFFER_TOO_SMALL,
                     "%s: key '%s' has %" PRIu64 " elements, the buffer holds %" PRIu64, fn,
                     show(name, kv->key, kv->key_len), kv->len, cap);
  if (out == NULL && kv->len > 0) return feri_fail(FER_STATUS_NULL_ARG, "%s: out is NULL", fn);
  for (uint64_t i = 0; i < kv->len; i++)
    out[i] = kv->elem_type == FERI_GGUF_FLOAT32 ? f32_of(ld32(kv->value + i * 4))
                                                : (float)f64_of(ld64(kv->value + i * 8));
  return FER_STATUS_OK;
}

/* ---- Tensor lookups ------------------------------------------------------------------------ */

int64_t feri_gguf_tensor_count(const feri_gguf *g) { return g ? (int64_t)g->n_t : 0; }

int64_t feri_gguf_find_tensor_n(const feri_gguf *g, const char *name, size_t name_len) {
  if (g == NULL || name == NULL || g->t_by_name == NULL) return -1;
  size_t lo = 0, hi = g->n_t;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const feri_gguf_tensor_info *t = g->t_by_name[mid];
    int c = cmp_names(t->name, t->name_len, name, name_len);
    if (c == 0) return t - g->t;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return -1;
}

int64_t feri_gguf_find_tensor(const feri_gguf *g, const char *name) {
  return name == NULL ? -1 : feri_gguf_find_tensor_n(g, name, strlen(name));
}

const feri_gguf_tensor_info *feri_gguf_tensor(const feri_gguf *g, int64_t i) {
  if (g == NULL || i < 0 || (uint64_t)i >= g->n_t) return NULL;
  return &g->t[i];
}

/* ---- Dump ---------------------------------------------------------------------------------- */

/* snprintf into a caller buffer that keeps counting past its end. */
typedef struct text {
  char *buf;
  size_t cap, len;
} text;

static void text_add(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void text_add(text *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *dst = t->len < t->cap ? t->buf + t->len : NULL;
  int n = vsnprintf(dst, dst ? t->cap - t->len : 0, fmt, ap);
  va_end(ap);
  if (n > 0) t->len += (size_t)n;
}

/* A quoted string, unprintable bytes as \xNN, cut after `max` bytes. */
static void text_quoted(text *t, const uint8_t *s, uint64_t n, uint64_t max) {
  text_add(t, "\"");
  for (uint64_t i = 0; i < n && i < max; i++) {
    if (s[i] == '"' || s[i] == '\\')
      text_add(t, "\\%c", s[i]);
    else if (s[i] >= 0x20 && s[i] < 0x7f)
      text_add(t, "%c", s[i]);
    else
      text_add(t, "\\x%02x", s[i]);
  }
  text_add(t, n > max ? "\"..." : "\"");
}

/* One scalar of `type` at p. */
static void text_scalar(text *t, uint32_t type, const uint8_t *p) {
  bool neg;
  int64_t s;
  uint64_t u;
  if (int_value(type, p, &neg, &s, &u)) {
    if (neg)
      text_add(t, "%" PRId64, s);
    else
      text_add(t, "%" PRIu64, u);
  } else if (type == FERI_GGUF_FLOAT32) {
    text_add(t, "%.9g", (double)f32_of(ld32(p)));
  } else if (type == FERI_GGUF_FLOAT64) {
    text_add(t, "%.17g", f64_of(ld64(p)));
  } else if (type == FERI_GGUF_BOOL) {
    text_add(t, "%s", p[0] ? "true" : "false");
  }
}

static fer_status text_end(const text *t, size_t *out_len) {
  if (t->cap > 0) t->buf[t->len < t->cap ? t->len : t->cap - 1] = '\0';
  *out_len = t->len;
  return t->len < t->cap
             ? FER_STATUS_OK
             : feri_fail(FER_STATUS_BUFFER_TOO_SMALL, "gguf: describe needs %zu bytes", t->len + 1);
}

fer_status feri_gguf_kv_describe(const feri_gguf *g, int64_t i, char *buf, size_t cap,
                                 size_t *out_len) {
  static const char fn[] = "feri_gguf_kv_describe";
  feri_error_clear();
  if (out_len == NULL || (buf == NULL && cap > 0))
    return feri_fail(FER_STATUS_NULL_ARG, "%s: NULL buffer", fn);
  *out_len = 0;
  if (cap > 0) buf[0] = '\0';
  const feri_gguf_kv *kv;
  fer_status st = kv_at(g, i, fn, &kv);
  if (st != FER_STATUS_OK) return st;
  text t = {buf, cap, 0};
  char name[80];
  text_add(&t, "%s: ", show(name, kv->key, kv->key_len));
  if (kv->type == FERI_GGUF_STRING) {
    text_add(&t, "STRING = ");
    text_quoted(&t, kv->value, kv->len, 64);
  } else if (kv->type == FERI_GGUF_ARRAY) {
    enum { SHOWN = 4 };
    text_add(&t, "ARRAY[%" PRIu64 "] of %s = [", kv->len, feri_gguf_type_name(kv->elem_type));
    const size_t es = feri_gguf_type_size(kv->elem_type);
    for (uint64_t e = 0; e < kv->len && e < SHOWN; e++) {
      if (e > 0) text_add(&t, ", ");
      if (kv->elem_type == FERI_GGUF_STRING) {
        const uint8_t *p = g->base + kv->str_at[e];
        text_quoted(&t, p + 8, ld64(p), 32);
      } else {
        text_scalar(&t, kv->elem_type, kv->value + e * es);
      }
    }
    text_add(&t, kv->len > SHOWN ? ", ...]" : "]");
  } else {
    text_add(&t, "%s = ", feri_gguf_type_name(kv->type));
    text_scalar(&t, kv->type, kv->value);
  }
  return text_end(&t, out_len);
}

fer_status feri_gguf_tensor_describe(const feri_gguf *g, int64_t i, char *buf, size_t cap,
                                     size_t *out_len) {
  static const char fn[] = "feri_gguf_tensor_describe";
  feri_error_clear();
  if (out_len == NULL || (buf == NULL && cap > 0))
    return feri_fail(FER_STATUS_NULL_ARG, "%s: NULL buffer", fn);
  *out_len = 0;
  if (cap > 0) buf[0] = '\0';
  if (g == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: g is NULL", fn);
  const feri_gguf_tensor_info *ti = feri_gguf_tensor(g, i);
  if (ti == NULL)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: tensor index %" PRId64 " is outside 0..%zu", fn,
                     i, g->n_t);
  text t = {buf, cap, 0};
  char name[80];
  text_add(&t, "%s: %s [", show(name, ti->name, ti->name_len), feri_ggml_type_name(ti->ggml_type));
  for (uint32_t d = 0; d < ti->n_dims; d++)
    text_add(&t, d ? ", %" PRIu64 : "%" PRIu64, ti->dims[d]);
  text_add(&t, "] %" PRIu64 " bytes at %" PRIu64, ti->n_bytes, ti->file_offset);
  return text_end(&t, out_len);
}
