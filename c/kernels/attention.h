/* attention.h: the per-ISA inner loops of fer_attention. Every level performs the same IEEE
 * operations in the same order (claim C-ATT-003): dot products in eight lanes (element d of a row
 * goes to lane d mod 8 by fma, lanes combine as ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7))), the
 * exponential of fexp.h, value rows accumulated by fma, key by key in order, and the merge of
 * two partial softmax states by the formula of `merge` below. How attention.c strings these
 * together (tiles, chunks, the merge order) is described at the top of attention.c. */
#ifndef FERI_KERNELS_ATTENTION_H
#define FERI_KERNELS_ATTENTION_H

#include <stdint.h>

#include "ferrite.h"
#include "core/dtype.h"
#include "kernels/quant.h"

/* n rows of one kv head: element d of row j at base + j * row_stride + d * dim_stride (bytes); for
 * Q8_0 (blocks of 32 elements, each an f16 scale and 32 int8 codes: 34 bytes) dim_stride is a
 * block's bytes and element d is code d % 32 of the block at base + j * row_stride +
 * (d / 32) * dim_stride, times its scale (exact in f32: an 8-bit code times an 11-bit
 * significand), so every level reads the same f32 values as from an f32 row holding them. es is
 * the dtype's size (34 for Q8_0: a block): rows are packed when dim_stride == es. */
typedef struct feri_kv_rows {
  const char *base;
  fer_dtype dtype;
  int64_t row_stride, dim_stride, es;
} feri_kv_rows;

/* The step along the head dim of a packed K or V row, and a packed row's bytes (dim elements;
 * dim a multiple of 32 for Q8_0). */
static inline int64_t feri_kv_step_bytes(fer_dtype t) {
  return (int64_t)(t == FER_DTYPE_Q8_0 ? feri_qblock_bytes(t) : feri_dtype_size(t));
}
static inline int64_t feri_kv_row_bytes(fer_dtype t, int64_t dim) {
  return t == FER_DTYPE_Q8_0 ? dim / 32 * feri_kv_step_bytes(t) : dim * feri_kv_step_bytes(t);
}

/* The rows a per-ISA call may prefetch (a later tile's): row t = 0, 1, ... at
 * base + (i / inner) * outer + (i % inner) * stride with i = first + t (bytes). One stride covers
 * one head's rows (stride = the position stride, inner = INT64_MAX) and a packed run of rows in
 * address order (stride = the row's bytes); inner and outer add a gap after every `inner` rows
 * (a token-major cache: one position's heads, then the next position). */
typedef struct feri_att_pf {
  const char *base;
  int64_t first, inner, stride, outer;
} feri_att_pf;

/* Walks the rows of a feri_att_pf in order without dividing per row. */
typedef struct feri_att_pf_cursor {
  const char *row;
  int64_t i; /* (first + t) % inner */
} feri_att_pf_cursor;

static inline feri_att_pf_cursor feri_att_pf_at(const feri_att_pf *f, int64_t t) {
  const int64_t i = f->first + t;
  const feri_att_pf_cursor c = {f->base + i / f->inner * f->outer + i % f->inner * f->stride, i % f->inner};
  return c;
}

/* The current row, then moves to the next. */
static inline const char *feri_att_pf_next(const feri_att_pf *f, feri_att_pf_cursor *c) {
  const char *row = c->row;
  c->row += f->stride;
  if (++c->i == f->inner) {
    c->i = 0;
    c->row += f->outer - f->inner * f->stride;
  }
  return row;
}

typedef struct feri_attention_ops {
  /* For each of `rows` query rows r (q + r * q_stride, contiguous f32 of length d):
   * s[r * s_stride + j] = dot(q_r, row j of k) * scale for j < n. Rows of one call share the
   * keys (the q heads of one GQA group), so each K row is loaded once for all of them. A score
   * depends only on its row and key: never on `rows`, n or where the key sits in the call.
   * pf, when not NULL, names n rows of d elements of k's dtype (feri_att_pf): the call may
   * prefetch them, spread through its loops. It changes no result. */
  void (*scores)(const float *q, int64_t q_stride, int64_t rows, int64_t d, const feri_kv_rows *k,
                 int64_t n, float scale, float *s, int64_t s_stride, const feri_att_pf *pf);
  /* s[j] = fexp(s[j] - m) for j < n; returns their sum in eight lanes (s[j] into lane j mod 8,
   * in order of j; lanes combined as the dot products' lanes). */
  float (*exp_shift)(float *s, int64_t n, float m);
  /* max(init, s[0 .. n-1]); NaN if any s[j] is NaN (max is exact in any order). */
  float (*row_max)(const float *s, int64_t n, float init);
  /* For each of `rows` rows r (o_r = o + r * o_stride, p_r = p + r * p_stride): first, when corr
   * is not NULL, o_r[e] = o_r[e] * corr[r]; then o_r[e] = fma(p_r[j], v[j][e], o_r[e]) for
   * j = 0 .. n-1 in order, every e < dv. Each V row is loaded once for all the rows; calling it
   * on keys [0, a) and then [a, n) (corr on the first call only) gives the same bits. pf as for
   * scores, rows of dv elements of v's dtype. */
  void (*accumulate)(float *o, int64_t o_stride, int64_t rows, int64_t dv, const float *p,
                     int64_t p_stride, const feri_kv_rows *v, int64_t n, const float *corr,
                     const feri_att_pf *pf);
  /* o[e] = fma(o[e], a, ob[e] * b) for e < dv: one row's output in the merge of two partial
   * softmax states (attention.c computes a and b). */
  void (*merge)(float *o, const float *ob, int64_t dv, float a, float b);
} feri_attention_ops;

const feri_attention_ops *feri_attention_ops_for(fer_isa isa);

/* The fixed combination of eight lanes: ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)). */
static inline float feri_att_lanes8(const float l[8]) {
  return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

/* The scalar reference versions (any strides), also used for odd shapes by the vector levels. */
float feri_att_dot(const float *q, int64_t d, const feri_kv_rows *k, int64_t j);
void feri_att_scores_ref(const float *q, int64_t q_stride, int64_t rows, int64_t d,
                         const feri_kv_rows *k, int64_t n, float scale, float *s, int64_t s_stride,
                         const feri_att_pf *pf);
void feri_att_accumulate_ref(float *o, int64_t o_stride, int64_t rows, int64_t dv, const float *p,
                             int64_t p_stride, const feri_kv_rows *v, int64_t n, const float *corr,
                             const feri_att_pf *pf);
void feri_att_merge_ref(float *o, const float *ob, int64_t dv, float a, float b);

extern const feri_attention_ops feri_attention_ops_portable;
#if defined(__x86_64__)
extern const feri_attention_ops feri_attention_ops_avx2;
/* the AVX2 level's table with AVX-512F scores and accumulate for 16-bit K and V (the same bits) */
extern const feri_attention_ops feri_attention_ops_avx512;
#endif

#endif
