/* commit.c: granule windows covered by byte ranges, and the live ranges of each KV layout. */
#include "mem/commit.h"

#include <stdlib.h>

#include "core/status.h"

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Windows as [first, last] pairs sorted by first; the union is counted in one sweep. */
fer_status fer_granules_covering(const fer_byte_range *ranges, size_t n, uint64_t granule,
                                 uint64_t *out) {
  static const char *const fn = "fer_granules_covering";
  feri_error_clear();
  if (out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: out_granules is NULL", fn);
  *out = 0;
  if (n > 0 && ranges == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: ranges is NULL", fn);
  if (granule == 0) return feri_fail(FER_STATUS_INVALID_ARG, "%s: granule_bytes is 0", fn);
  if (n > SIZE_MAX / (2 * sizeof(uint64_t)))
    return feri_fail(FER_STATUS_SIZE_OVERFLOW, "%s: %zu ranges", fn, n);
  uint64_t *w = malloc((n ? n : 1) * 2 * sizeof *w);
  if (w == NULL) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t end;
    if (__builtin_add_overflow(ranges[i].offset, ranges[i].length, &end)) {
      free(w);
      return feri_fail(FER_STATUS_INVALID_ARG, "%s: range %zu overflows 64 bits", fn, i);
    }
    if (ranges[i].length == 0) continue;
    w[2 * m] = ranges[i].offset / granule;
    w[2 * m + 1] = (end - 1) / granule;
    m++;
  }
  /* Sort pairs by first window: qsort on 16-byte records keyed by their first word. */
  qsort(w, m, 2 * sizeof *w, cmp_u64);
  uint64_t total = 0, cur_first = 0, cur_last = 0;
  for (size_t i = 0; i < m; i++) {
    uint64_t f = w[2 * i], l = w[2 * i + 1];
    if (i == 0 || f > cur_last + 1) {
      if (i > 0) total += cur_last - cur_first + 1;
      cur_first = f;
      cur_last = l;
    } else if (l > cur_last) {
      cur_last = l;
    }
  }
  if (m > 0) total += cur_last - cur_first + 1;
  free(w);
  *out = total;
  return FER_STATUS_OK;
}

fer_status feri_kv_geometry_check(const fer_kv_geometry *g, const char *fn, uint64_t *row_bytes,
                                  uint32_t *n_bindings) {
  if (g == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: geometry is NULL", fn);
  if (g->struct_size < sizeof *g)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: geometry struct_size %u < %zu", fn, g->struct_size, sizeof *g);
  if (g->layout < FER_KV_LAYOUT_HEAD_MAJOR || g->layout > FER_KV_LAYOUT_TOKEN_MAJOR)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: unknown layout %d", fn, (int)g->layout);
  if (!g->n_layers || !g->n_kv_heads || !g->head_dim || !g->elem_bytes || !g->capacity_tokens)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: every geometry field must be > 0", fn);
  uint64_t row; /* one token, one binding: heads x head_dim x elem */
  if (__builtin_mul_overflow((uint64_t)g->n_kv_heads * g->head_dim, (uint64_t)g->elem_bytes, &row))
    return feri_fail(FER_STATUS_SIZE_OVERFLOW, "%s: heads x head_dim x elem overflows", fn);
  uint64_t binding_bytes, token_bytes;
  if (__builtin_mul_overflow(row, g->capacity_tokens, &binding_bytes) ||
      __builtin_mul_overflow(row, 2 * (uint64_t)g->n_layers, &token_bytes) ||
      __builtin_mul_overflow(token_bytes, g->capacity_tokens, &token_bytes))
    return feri_fail(FER_STATUS_SIZE_OVERFLOW, "%s: the reservation size overflows 64 bits", fn);
  *row_bytes = row;
  *n_bindings = g->layout == FER_KV_LAYOUT_TOKEN_MAJOR ? 1 : 2 * g->n_layers;
  return FER_STATUS_OK;
}

fer_status fer_kv_live_ranges(const fer_kv_geometry *g, uint64_t live, uint32_t binding,
                              fer_byte_range *ranges, size_t cap, size_t *out_n, uint32_t *out_n_bindings) {
  static const char *const fn = "fer_kv_live_ranges";
  feri_error_clear();
  if (out_n_bindings != NULL) *out_n_bindings = 0;
  if (out_n == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: out_n is NULL", fn);
  *out_n = 0;
  uint64_t row;
  uint32_t nb;
  fer_status st = feri_kv_geometry_check(g, fn, &row, &nb);
  if (st != FER_STATUS_OK) return st;
  if (live > g->capacity_tokens)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: live_tokens %llu > capacity %llu", fn,
                     (unsigned long long)live, (unsigned long long)g->capacity_tokens);
  if (binding >= nb)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: binding %u >= %u bindings", fn, binding, nb);
  /* Head-major: one range per head, head h at h x (capacity x head row); the others: one range. */
  size_t need = g->layout == FER_KV_LAYOUT_HEAD_MAJOR ? g->n_kv_heads : 1;
  /* a size query (cap too small, ranges may be NULL) answers the counts; a NULL array that would
   * be written answers NULL_ARG with the out-parameters still zero */
  if (cap >= need && ranges == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: ranges is NULL", fn);
  *out_n = need;
  if (out_n_bindings != NULL) *out_n_bindings = nb;
  if (cap < need) return feri_fail(FER_STATUS_BUFFER_TOO_SMALL, "%s: %zu ranges needed", fn, need);
  const uint64_t head_row = (uint64_t)g->head_dim * g->elem_bytes; /* no overflow: row fits */
  switch (g->layout) {
    case FER_KV_LAYOUT_HEAD_MAJOR:
      for (uint32_t h = 0; h < g->n_kv_heads; h++) {
        ranges[h].offset = (uint64_t)h * g->capacity_tokens * head_row;
        ranges[h].length = live * head_row;
      }
      break;
    case FER_KV_LAYOUT_SEQ_MAJOR:
      ranges[0].offset = 0;
      ranges[0].length = live * row;
      break;
    default: /* token-major: every layer's K and V of a token together */
      ranges[0].offset = 0;
      ranges[0].length = live * row * 2 * g->n_layers;
      break;
  }
  return FER_STATUS_OK;
}

fer_status fer_kv_committed_granules(const fer_kv_geometry *g, uint64_t live, uint64_t granule,
                                     uint64_t *out) {
  static const char *const fn = "fer_kv_committed_granules";
  feri_error_clear();
  if (out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: out_granules is NULL", fn);
  *out = 0;
  uint64_t row;
  uint32_t nb;
  fer_status st = feri_kv_geometry_check(g, fn, &row, &nb);
  if (st != FER_STATUS_OK) return st;
  if (granule == 0) return feri_fail(FER_STATUS_INVALID_ARG, "%s: granule_bytes is 0", fn);
  size_t cap = g->n_kv_heads;
  fer_byte_range *r = malloc(cap * sizeof *r);
  if (r == NULL) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
  uint64_t total = 0;
  /* Every binding of a layout has the same ranges (each is its own reservation), so one binding's
   * windows times the binding count is the sum. */
  size_t n;
  st = fer_kv_live_ranges(g, live, 0, r, cap, &n, NULL);
  if (st == FER_STATUS_OK) st = fer_granules_covering(r, n, granule, &total);
  free(r);
  if (st != FER_STATUS_OK) return st;
  if (__builtin_mul_overflow(total, (uint64_t)nb, out))
    return feri_fail(FER_STATUS_SIZE_OVERFLOW, "%s: granule count overflows", fn);
  return FER_STATUS_OK;
}
