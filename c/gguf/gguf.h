/* gguf.h: a validating parser of GGUF v2/v3 images (llama.cpp's model file format).
 *
 * Object: feri_gguf. Constructors feri_gguf_open (an image in memory, borrowed) and
 * feri_gguf_open_file (maps a file read-only and owns the mapping); destructor feri_gguf_close.
 * Everything else reads. Immutable after open, so any number of threads may read one feri_gguf.
 *
 * Open validates the whole image before anything is used: magic, version, every count against the
 * bytes left (no allocation grows from an unchecked count), every length, every size computation
 * for overflow, key and tensor-name uniqueness, value types, the alignment, tensor shapes, types,
 * byte sizes, offsets, bounds and overlaps. After a successful open every accessor below is safe on
 * any index it accepts. Pointers handed out (keys, strings, array elements, tensor data) point into
 * the image: they live as long as the feri_gguf (and, for feri_gguf_open, the caller's buffer).
 * GGUF strings are not NUL-terminated: they come as pointer + length. Numbers in the image are
 * little-endian and possibly unaligned: read them through the copy-out helpers.
 *
 * Statuses: BAD_FORMAT for an image that is not GGUF v2/v3 (magic, version, big-endian), CORRUPT
 * for one that is but is damaged or inconsistent, UNSUPPORTED for a valid file using what ferrite
 * does not handle (a ggml type outside the list below, a nested array). Every failure leaves a
 * message (fer_last_error_message) naming what is wrong and where: byte offset, key or tensor name.
 * The getters answer BAD_FORMAT for a missing key or a value of the wrong type (the file is GGUF
 * but not the model the caller expects), INVALID_ARG for an out-of-range index. */
#ifndef FERI_GGUF_GGUF_H
#define FERI_GGUF_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferrite.h"

/* Metadata value types, as numbered in the file. */
enum feri_gguf_type {
  FERI_GGUF_UINT8 = 0,
  FERI_GGUF_INT8 = 1,
  FERI_GGUF_UINT16 = 2,
  FERI_GGUF_INT16 = 3,
  FERI_GGUF_UINT32 = 4,
  FERI_GGUF_INT32 = 5,
  FERI_GGUF_FLOAT32 = 6,
  FERI_GGUF_BOOL = 7,
  FERI_GGUF_STRING = 8,
  FERI_GGUF_ARRAY = 9,
  FERI_GGUF_UINT64 = 10,
  FERI_GGUF_INT64 = 11,
  FERI_GGUF_FLOAT64 = 12,
};

/* The ggml tensor types open accepts, with ggml's numbers. Any other type is UNSUPPORTED. */
enum feri_ggml_type {
  FERI_GGML_F32 = 0,
  FERI_GGML_F16 = 1,
  FERI_GGML_Q4_0 = 2,
  FERI_GGML_Q4_1 = 3,
  FERI_GGML_Q5_0 = 6,
  FERI_GGML_Q5_1 = 7,
  FERI_GGML_Q8_0 = 8,
  FERI_GGML_Q8_1 = 9,
  FERI_GGML_Q2_K = 10,
  FERI_GGML_Q3_K = 11,
  FERI_GGML_Q4_K = 12,
  FERI_GGML_Q5_K = 13,
  FERI_GGML_Q6_K = 14,
  FERI_GGML_Q8_K = 15,
  FERI_GGML_IQ4_NL = 20,
  FERI_GGML_IQ4_XS = 23,
  FERI_GGML_BF16 = 30,
  FERI_GGML_MXFP4 = 39,
};

enum {
  FERI_GGUF_MAX_DIMS = 4,
  FERI_GGUF_DEFAULT_ALIGNMENT = 32,
  /* The spec's limit on a key's length. */
  FERI_GGUF_MAX_KEY_LEN = 65535,
};

typedef struct feri_gguf feri_gguf;

/* One tensor, as validated at open. */
typedef struct feri_gguf_tensor_info {
  const char *name; /* into the image, not NUL-terminated, non-empty, no NUL byte */
  size_t name_len;
  uint32_t n_dims;    /* 1 .. 4 */
  uint32_t ggml_type; /* one of enum feri_ggml_type */
  uint64_t
      dims[FERI_GGUF_MAX_DIMS]; /* ggml order: dims[0] is the contiguous one; unused ones are 1 */
  uint64_t n_elements;          /* product of dims, <= INT64_MAX */
  uint64_t n_bytes;             /* n_elements / block elements * block bytes */
  uint64_t offset;      /* from the start of the data section, a multiple of the alignment */
  uint64_t file_offset; /* from the start of the image */
  const void *data;     /* the image + file_offset; [data, data + n_bytes) lies in the image */
} feri_gguf_tensor_info;

/* Parses the `size` bytes at `data` (borrowed: they must outlive the result and not change).
 * OK with *out set, or an error with *out NULL. NULL_ARG when out is NULL, or data is NULL with
 * size > 0. Reads nothing outside [data, data + size), whatever the bytes. */
fer_status feri_gguf_open(const void *data, size_t size, feri_gguf **out);

/* Maps the file at `path` read-only (MAP_PRIVATE) and parses it; the result owns the mapping.
 * INVALID_ARG naming the path (and errno's text) when it cannot be opened, stat'ed or mapped,
 * CORRUPT for an empty file; otherwise as feri_gguf_open. */
fer_status feri_gguf_open_file(const char *path, feri_gguf **out);

/* Frees the parse and unmaps what open_file mapped. NULL is a no-op. */
void feri_gguf_close(feri_gguf *g);

/* The header's version (2 or 3), the alignment in effect (general.alignment or 32), where the data
 * section starts, and the image. */
uint32_t feri_gguf_version(const feri_gguf *g);
uint32_t feri_gguf_alignment(const feri_gguf *g);
uint64_t feri_gguf_data_offset(const feri_gguf *g);
const void *feri_gguf_image(const feri_gguf *g, size_t *out_size);

/* Names for messages and dumps: "UINT32", "Q4_0"; "unknown" for numbers outside the tables
 * (feri_ggml_type_name also names the ggml types open refuses, e.g. "IQ2_XXS"). */
const char *feri_gguf_type_name(uint32_t type);
const char *feri_ggml_type_name(uint32_t ggml_type);

/* Block geometry of a ggml type (F32: 1 element in 4 bytes; Q4_0: 32 in 18). UNSUPPORTED for a
 * type outside enum feri_ggml_type (outputs 0), NULL_ARG for NULL outputs. */
fer_status feri_ggml_type_block(uint32_t ggml_type, uint64_t *out_block_elems,
                                uint64_t *out_block_bytes);

/* ---- Metadata ---------------------------------------------------------------------------- */

/* Number of key/value pairs; the pairs keep the file's order, indices 0 .. count-1. */
int64_t feri_gguf_kv_count(const feri_gguf *g);

/* Index of `key` (NUL-terminated / `key_len` bytes), or -1 when absent or g/key is NULL.
 * O(log n). */
int64_t feri_gguf_find_kv(const feri_gguf *g, const char *key);
int64_t feri_gguf_find_kv_n(const feri_gguf *g, const char *key, size_t key_len);

/* The key and value type of pair `i`; INVALID_ARG when i is out of range. */
fer_status feri_gguf_kv_key(const feri_gguf *g, int64_t i, const char **out_key, size_t *out_len);
fer_status feri_gguf_kv_type(const feri_gguf *g, int64_t i, uint32_t *out_type);

/* Typed getters by key. The integer getters accept any integer type (UINT8 .. INT64) whose value
 * fits the requested type (a UINT32 key stored as INT32 >= 0 is fine); get_f32 accepts FLOAT32 and
 * FLOAT64 (rounded); get_bool BOOL only; get_str STRING only (pointer + length into the image, not
 * NUL-terminated). BAD_FORMAT naming the key for a missing key, a wrong type or a value out of
 * range; *out is zeroed on failure. */
fer_status feri_gguf_get_u32(const feri_gguf *g, const char *key, uint32_t *out);
fer_status feri_gguf_get_i32(const feri_gguf *g, const char *key, int32_t *out);
fer_status feri_gguf_get_u64(const feri_gguf *g, const char *key, uint64_t *out);
fer_status feri_gguf_get_f32(const feri_gguf *g, const char *key, float *out);
fer_status feri_gguf_get_bool(const feri_gguf *g, const char *key, bool *out);
fer_status feri_gguf_get_str(const feri_gguf *g, const char *key, const char **out_str,
                             size_t *out_len);

/* An array's element type and count (BAD_FORMAT when the key is missing or not an array). */
fer_status feri_gguf_get_arr(const feri_gguf *g, const char *key, uint32_t *out_elem_type,
                             uint64_t *out_count);

/* Element `i` of the string array at pair `kv_index`, in O(1) (offsets indexed at open).
 * INVALID_ARG for an index out of range, BAD_FORMAT when the pair is not an array of strings. */
fer_status feri_gguf_arr_str(const feri_gguf *g, int64_t kv_index, uint64_t i, const char **out_str,
                             size_t *out_len);

/* The raw little-endian elements of the numeric (or BOOL) array at `kv_index`: possibly unaligned,
 * count elements of feri_gguf_type_size(elem_type) bytes each. BAD_FORMAT for a string array or a
 * non-array. */
fer_status feri_gguf_arr_data(const feri_gguf *g, int64_t kv_index, uint32_t *out_elem_type,
                              const void **out_data, uint64_t *out_count);

/* Converts the whole array at `kv_index` into out[0 .. count-1]: _i32 from any integer type whose
 * values fit int32 (BAD_FORMAT naming the first element that does not), _f32 from FLOAT32 or
 * FLOAT64. BUFFER_TOO_SMALL (nothing written) when cap < count; BAD_FORMAT for another type. */
fer_status feri_gguf_arr_copy_i32(const feri_gguf *g, int64_t kv_index, int32_t *out, uint64_t cap);
fer_status feri_gguf_arr_copy_f32(const feri_gguf *g, int64_t kv_index, float *out, uint64_t cap);

/* Bytes of one scalar of `type` (0 for STRING, ARRAY and unknown types). */
size_t feri_gguf_type_size(uint32_t type);

/* ---- Tensors ----------------------------------------------------------------------------- */

/* Number of tensors; they keep the file's order, indices 0 .. count-1. */
int64_t feri_gguf_tensor_count(const feri_gguf *g);

/* Index of the tensor named `name` (NUL-terminated / `name_len` bytes), or -1. O(log n). */
int64_t feri_gguf_find_tensor(const feri_gguf *g, const char *name);
int64_t feri_gguf_find_tensor_n(const feri_gguf *g, const char *name, size_t name_len);

/* Tensor `i`, or NULL when out of range. Valid as long as g. */
const feri_gguf_tensor_info *feri_gguf_tensor(const feri_gguf *g, int64_t i);

/* ---- Dump (for `ferrite info`) ----------------------------------------------------------- */

/* One line of text (no newline) describing pair `i` or tensor `i`, for listings:
 *   general.alignment: UINT32 = 32
 *   general.name: STRING = "SmolLM2 135M"             (unprintable bytes as \xNN, long ones cut
 * with ...) tokenizer.ggml.tokens: ARRAY[49152] of STRING = ["<|endoftext|>", "<|im_start|>", ...]
 *   token_embd.weight: Q8_0 [576, 49152] 30081024 bytes at 1785664
 * Writes at most cap-1 characters and a NUL into buf; *out_len gets the full length. OK, or
 * BUFFER_TOO_SMALL when the text was cut; INVALID_ARG for an index out of range; NULL_ARG for a
 * NULL g or out_len, or a NULL buf with cap > 0. */
fer_status feri_gguf_kv_describe(const feri_gguf *g, int64_t i, char *buf, size_t cap,
                                 size_t *out_len);
fer_status feri_gguf_tensor_describe(const feri_gguf *g, int64_t i, char *buf, size_t cap,
                                     size_t *out_len);

#endif
