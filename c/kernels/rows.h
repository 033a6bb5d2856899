/* rows.h: walking the rows (last axis) of same-shaped tensors, with each row widened into f32
 * scratch and narrowed back. The transformer kernels (norm, rope, activation, softmax) are row
 * functions on top of this; loading a row before writing it makes `out` exactly `x` safe. */
#ifndef FERI_KERNELS_ROWS_H
#define FERI_KERNELS_ROWS_H

#include <stdint.h>

#include "core/tensor.h"
#include "ferrite.h"

typedef struct feri_rows {
  feri_nd_loop outer;               /* every axis but the last; one operand per tensor */
  int64_t n_rows, len;              /* rows and their length */
  int64_t inner[FERI_MAX_OPERANDS]; /* byte stride along the last axis, per operand */
  int64_t rows_per_task;
} feri_rows;

/* Checks that the n (<= FERI_MAX_OPERANDS) tensors, already validated, have one shape of rank
 * >= 1, that ts[0] (the output) is writable and that it overlaps no other operand unless it is
 * exactly that operand; then fills r. */
fer_status feri_rows_init(feri_rows *r, const char *fn, const char *const *names,
                          const fer_tensor *const *ts, const feri_tensor_info *infos, int n);

/* Computes one output row (bufs[0]) from the input rows bufs[1 .. n-1], all widened to f32. */
typedef void (*feri_row_fn)(const void *ctx, int64_t row, float *const *bufs, int64_t len);

/* Runs fn over every row: loads operands 1 .. n-1 of ts, calls fn, stores bufs[0] into ts[0].
 * Scratch (n rows of f32 per worker) is allocated here; OUT_OF_MEMORY if that fails. */
fer_status feri_rows_run(fer_threadpool *pool, const feri_rows *r, const fer_tensor *const *ts,
                         int n, feri_row_fn fn, const void *ctx, const char *fn_name);

/* Byte offsets of row `row` for each operand. */
void feri_rows_offsets(const feri_rows *r, int64_t row, int64_t *off);

/* dst[i] = element i of the row at p (stride bytes apart), widened exactly to f32. */
void feri_row_load(const char *p, int64_t stride, fer_dtype dtype, int64_t n, float *dst);

/* Stores src[i] at p + i * stride, rounded to dtype (nearest even). */
void feri_row_store(char *p, int64_t stride, fer_dtype dtype, int64_t n, const float *src);

/* Sum of squares (or plain sum with square = 0) in the 32-partial order of rowops.h. */
float feri_row_sum(const float *x, int64_t n, int square);

#endif
