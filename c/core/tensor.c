/* tensor.c: fer_tensor validation, overlap tests and the nd-loop helper. */
#include "core/tensor.h"

#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/status.h"

static bool feri_mul_ok(int64_t a, int64_t b, int64_t *out) {
  return !__builtin_mul_overflow(a, b, out);
}

static bool feri_add_ok(int64_t a, int64_t b, int64_t *out) {
  return !__builtin_add_overflow(a, b, out);
}

fer_status feri_tensor_validate(const fer_tensor *t, const char *fn, const char *name,
                                feri_tensor_info *info) {
  memset(info, 0, sizeof *info);
  if (t == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: tensor %s is NULL", fn, name);
  size_t es = feri_dtype_size(t->dtype);
  if (es == 0) {
    bool reserved = t->dtype >= 16 && t->dtype <= 31; /* block formats, see fer_dtype_code */
    return feri_fail(reserved ? FER_STATUS_UNSUPPORTED : FER_STATUS_INVALID_ARG,
                     "%s: tensor %s has %s %d (%s)", fn, name,
                     reserved ? "block dtype not supported by this kernel," : "unknown dtype",
                     (int)t->dtype, feri_dtype_name(t->dtype));
  }
  if (t->rank < 0 || t->rank > FER_TENSOR_MAX_RANK)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: tensor %s has rank %d, outside 0..%d", fn, name,
                     (int)t->rank, (int)FER_TENSOR_MAX_RANK);
  int64_t nonzero = 1, lo = 0, hi = 0;
  bool empty = false; /* an extent of 0 anywhere: no elements, nothing to overflow */
  for (int i = 0; i < t->rank && t->rank <= FER_TENSOR_MAX_RANK; i++) empty |= t->shape[i] == 0;
  for (int i = 0; i < t->rank; i++) {
    int64_t n = t->shape[i];
    if (n < 0)
      return feri_fail(FER_STATUS_INVALID_ARG, "%s: tensor %s has shape[%d] = %lld < 0", fn, name,
                       i, (long long)n);
    if (t->strides[i] % (int64_t)es != 0)
      return feri_fail(FER_STATUS_INVALID_ARG,
                       "%s: tensor %s has strides[%d] = %lld bytes, not a multiple of the %zu-byte "
                       "element",
                       fn, name, i, (long long)t->strides[i], es);
    if (n > 0 && !empty && !feri_mul_ok(nonzero, n, &nonzero))
      return feri_fail(FER_STATUS_SIZE_OVERFLOW, "%s: tensor %s: element count overflows", fn,
                       name);
  }
  const int64_t numel = empty ? 0 : nonzero;
  if (numel > 0) {
    for (int i = 0; i < t->rank; i++) {
      int64_t step;
      if (t->strides[i] == INT64_MIN || !feri_mul_ok(t->shape[i] - 1, t->strides[i], &step) ||
          !feri_add_ok(step < 0 ? lo : hi, step, step < 0 ? &lo : &hi))
        return feri_fail(FER_STATUS_SIZE_OVERFLOW, "%s: tensor %s: byte extent overflows", fn,
                         name);
    }
    if (!feri_add_ok(hi, (int64_t)es, &hi) || __builtin_sub_overflow(hi, lo, &(int64_t){0}))
      return feri_fail(FER_STATUS_SIZE_OVERFLOW, "%s: tensor %s: byte extent overflows", fn, name);
    if (t->data == NULL)
      return feri_fail(FER_STATUS_NULL_ARG, "%s: tensor %s has %lld elements but data is NULL", fn,
                       name, (long long)numel);
    uintptr_t p = (uintptr_t)t->data;
    if (p % es != 0)
      return feri_fail(FER_STATUS_INVALID_ARG,
                       "%s: tensor %s data %p is not aligned to its %zu-byte element", fn, name,
                       t->data, es);
    /* The span must not wrap the address space. */
    if ((lo < 0 && p < (uintptr_t)(-lo)) || p > UINTPTR_MAX - (uintptr_t)hi)
      return feri_fail(FER_STATUS_SIZE_OVERFLOW, "%s: tensor %s: byte span wraps the address space",
                       fn, name);
  }
  info->elem_size = es;
  info->numel = numel;
  info->lo = lo;
  info->hi = hi;
  return FER_STATUS_OK;
}

fer_status feri_tensor_check_writable(const fer_tensor *t, const feri_tensor_info *info,
                                      const char *fn, const char *name) {
  if (info->numel <= 1) return FER_STATUS_OK;
  int idx[FER_TENSOR_MAX_RANK];
  int n = 0;
  for (int i = 0; i < t->rank; i++)
    if (t->shape[i] > 1) idx[n++] = i;
  /* Insertion sort of the axes by |stride|: rank is at most 8. */
  for (int i = 1; i < n; i++) {
    int k = idx[i], j = i;
    while (j > 0 && llabs(t->strides[idx[j - 1]]) > llabs(t->strides[k])) {
      idx[j] = idx[j - 1];
      j--;
    }
    idx[j] = k;
  }
  int64_t span = (int64_t)info->elem_size; /* bytes covered by the axes below */
  for (int i = 0; i < n; i++) {
    int64_t s = llabs(t->strides[idx[i]]);
    if (s < span)
      return feri_fail(FER_STATUS_INVALID_ARG,
                       "%s: output %s interleaves or overlaps itself (axis %d has stride %lld "
                       "bytes, the axes below span %lld); outputs need non-interleaved strides",
                       fn, name, idx[i], (long long)t->strides[idx[i]], (long long)span);
    span = s * (t->shape[idx[i]] - 1) + span; /* validated: fits */
  }
  return FER_STATUS_OK;
}

bool feri_tensors_overlap(const fer_tensor *a, const feri_tensor_info *ai, const fer_tensor *b,
                          const feri_tensor_info *bi) {
  if (ai->numel == 0 || bi->numel == 0) return false;
  uintptr_t a0 = (uintptr_t)a->data + (uintptr_t)ai->lo, a1 = (uintptr_t)a->data + (uintptr_t)ai->hi;
  uintptr_t b0 = (uintptr_t)b->data + (uintptr_t)bi->lo, b1 = (uintptr_t)b->data + (uintptr_t)bi->hi;
  return a0 < b1 && b0 < a1;
}

bool feri_tensors_identical(const fer_tensor *a, const fer_tensor *b) {
  if (a->data != b->data || a->dtype != b->dtype || a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->shape[i] != b->shape[i] || (a->shape[i] > 1 && a->strides[i] != b->strides[i]))
      return false;
  return true;
}

void feri_nd_loop_coalesce(feri_nd_loop *loop) {
  int r = 0;
  for (int i = 0; i < loop->rank; i++) {
    if (loop->shape[i] == 1) continue;
    if (loop->shape[i] == 0) { /* an empty loop: keep a single 0 extent */
      loop->rank = 1;
      loop->shape[0] = 0;
      for (int k = 0; k < loop->n_operands; k++) loop->strides[k][0] = 0;
      return;
    }
    bool merge = r > 0;
    for (int k = 0; merge && k < loop->n_operands; k++)
      merge = loop->strides[k][r - 1] == loop->strides[k][i] * loop->shape[i];
    if (merge) {
      loop->shape[r - 1] *= loop->shape[i];
      for (int k = 0; k < loop->n_operands; k++) loop->strides[k][r - 1] = loop->strides[k][i];
    } else {
      loop->shape[r] = loop->shape[i];
      for (int k = 0; k < loop->n_operands; k++) loop->strides[k][r] = loop->strides[k][i];
      r++;
    }
  }
  if (r == 0) { /* every axis had extent 1: one element */
    loop->shape[0] = 1;
    for (int k = 0; k < loop->n_operands; k++) loop->strides[k][0] = 0;
    r = 1;
  }
  loop->rank = r;
}

void feri_nd_loop_offsets(const feri_nd_loop *loop, int n_axes, int64_t index, int64_t *offsets) {
  for (int k = 0; k < loop->n_operands; k++) offsets[k] = 0;
  for (int i = n_axes - 1; i >= 0; i--) {
    int64_t n = loop->shape[i];
    int64_t c = index % n;
    index /= n;
    for (int k = 0; k < loop->n_operands; k++) offsets[k] += c * loop->strides[k][i];
  }
}

int64_t feri_nd_loop_count(const feri_nd_loop *loop, int n_axes) {
  int64_t count = 1;
  for (int i = 0; i < n_axes; i++) count *= loop->shape[i];
  return count;
}

fer_status fer_tensor_check(const fer_tensor *tensor) {
  feri_error_clear();
  feri_tensor_info info;
  return feri_tensor_validate(tensor, "fer_tensor_check", "argument", &info);
}

fer_status fer_tensor_init_contiguous(fer_tensor *out, void *data, fer_dtype dtype, int32_t rank,
                                      const int64_t *shape) {
  feri_error_clear();
  if (out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_tensor_init_contiguous: out is NULL");
  memset(out, 0, sizeof *out);
  if (rank > 0 && shape == NULL)
    return feri_fail(FER_STATUS_NULL_ARG, "fer_tensor_init_contiguous: shape is NULL");
  if (rank < 0 || rank > FER_TENSOR_MAX_RANK)
    return feri_fail(FER_STATUS_INVALID_ARG,
                     "fer_tensor_init_contiguous: rank %d outside 0..%d", (int)rank,
                     (int)FER_TENSOR_MAX_RANK);
  size_t es = feri_dtype_size(dtype);
  fer_tensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.dtype = dtype;
  t.rank = rank;
  int64_t stride = (int64_t)(es ? es : 1);
  bool overflow = false;
  for (int i = rank - 1; i >= 0; i--) {
    t.shape[i] = shape[i];
    t.strides[i] = stride;
    int64_t n = shape[i] > 1 ? shape[i] : 1;
    if (!overflow && !feri_mul_ok(stride, n, &stride)) overflow = true;
  }
  feri_tensor_info info;
  fer_status st = feri_tensor_validate(&t, "fer_tensor_init_contiguous", "out", &info);
  if (st == FER_STATUS_OK && overflow)
    st = feri_fail(FER_STATUS_SIZE_OVERFLOW, "fer_tensor_init_contiguous: byte size overflows");
  if (st == FER_STATUS_OK) *out = t;
  return st;
}

fer_tensor feri_tensor_2d(void *data, fer_dtype dtype, int64_t rows, int64_t cols) {
  fer_tensor t;
  memset(&t, 0, sizeof t);
  const int64_t es = (int64_t)feri_dtype_size(dtype);
  t.data = data;
  t.dtype = dtype;
  t.rank = 2;
  t.shape[0] = rows;
  t.shape[1] = cols;
  t.strides[0] = cols * es;
  t.strides[1] = es;
  return t;
}
