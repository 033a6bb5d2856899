/* tensor.h: validation of fer_tensor descriptors and the shape helpers kernels share. */
#ifndef FERI_CORE_TENSOR_H
#define FERI_CORE_TENSOR_H

#include <stdbool.h>
#include <stdint.h>

#include "ferrite.h"

/* What validation learned about a tensor: its element size, element count and the byte span
 * [lo, hi) it touches relative to `data` (lo <= 0 when strides are negative). */
typedef struct feri_tensor_info {
  size_t elem_size;
  int64_t numel;
  int64_t lo;
  int64_t hi;
} feri_tensor_info;

/* Validates `t` as described in ferrite.h; `fn` and `name` only flavour the error message. */
fer_status feri_tensor_validate(const fer_tensor *t, const char *fn, const char *name,
                                feri_tensor_info *info);

/* Refuses an output whose elements could share an address: sorted by |stride|, every axis of
 * extent > 1 must step over the whole span of the axes below it. This is sufficient for
 * non-overlap and refuses only exotic interleaved layouts. */
fer_status feri_tensor_check_writable(const fer_tensor *t, const feri_tensor_info *info,
                                      const char *fn, const char *name);

/* true when the byte spans of two tensors with elements intersect. */
bool feri_tensors_overlap(const fer_tensor *a, const feri_tensor_info *ai, const fer_tensor *b,
                          const feri_tensor_info *bi);

/* true when a and b describe exactly the same elements (data, dtype, rank, shape, strides). */
bool feri_tensors_identical(const fer_tensor *a, const fer_tensor *b);

/* A contiguous row-major [rows, cols] descriptor of `dtype` over data (internal callers that hand
 * their own scratch to kernels). */
fer_tensor feri_tensor_2d(void *data, fer_dtype dtype, int64_t rows, int64_t cols);

/* Up to FERI_MAX_OPERANDS strided operands walked together over one shape. */
enum { FERI_MAX_OPERANDS = 3 };

typedef struct feri_nd_loop {
  int rank;
  int n_operands;
  int64_t shape[FER_TENSOR_MAX_RANK];
  int64_t strides[FERI_MAX_OPERANDS][FER_TENSOR_MAX_RANK]; /* bytes */
} feri_nd_loop;

/* Drops extent-1 axes and merges neighbouring axes that are contiguous for every operand, so the
 * innermost axis is as long as the layouts allow. A rank-0 loop stays one element. */
void feri_nd_loop_coalesce(feri_nd_loop *loop);

/* Byte offsets of each operand for the multi-index with linear number `index` (row-major) over
 * axes 0 .. n_axes-1. Kernels pass rank-1 to walk rows, or rank to walk every element. */
void feri_nd_loop_offsets(const feri_nd_loop *loop, int n_axes, int64_t index, int64_t *offsets);

/* Product of the extents of axes 0 .. n_axes-1. */
int64_t feri_nd_loop_count(const feri_nd_loop *loop, int n_axes);

#endif
