/* dense_cache.c: fer_dense_cache, the bounded LRU of dense f32 expansions of block-quantized
 * weights (contract in ffi/ferrite.h). A handful of entries per model layer at most, so entries
 * sit in a plain array searched linearly; recency is a counter stamped on each use. */
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "core/tensor.h"

typedef struct dense_entry {
  uint64_t key;
  fer_qmatrix shape; /* identity: data address, format, rows, cols, stride, bytes */
  uint64_t hash;     /* FNV-1a of the rows' bytes, taken on insertion */
  uint64_t last_use;
  uint64_t bytes;
  float *dense;
} dense_entry;

struct fer_dense_cache {
  uint64_t capacity;
  fer_governor *governor;
  dense_entry *entries;
  size_t n, cap;
  uint64_t clock;
  fer_dense_cache_stats stats;
};

static const char *const FN = "fer_dense_cache_get";

fer_status fer_dense_cache_create(uint64_t capacity_bytes, fer_governor *governor,
                                  fer_dense_cache **out_cache) {
  feri_error_clear();
  if (out_cache == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_dense_cache_create: out_cache is NULL");
  *out_cache = calloc(1, sizeof **out_cache);
  if (*out_cache == NULL) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "fer_dense_cache_create: out of memory");
  (*out_cache)->capacity = capacity_bytes;
  (*out_cache)->governor = governor;
  (*out_cache)->stats.capacity_bytes = capacity_bytes;
  return FER_STATUS_OK;
}

static void drop_entry(fer_dense_cache *c, size_t i) {
  if (c->governor != NULL) (void)fer_governor_release(c->governor, FER_MEM_ROLE_CACHE, c->entries[i].bytes);
  c->stats.bytes -= c->entries[i].bytes;
  free(c->entries[i].dense);
  c->entries[i] = c->entries[--c->n];
  c->stats.entries = c->n;
}

fer_status fer_dense_cache_free(fer_dense_cache *cache) {
  feri_error_clear();
  if (cache == NULL) return FER_STATUS_OK;
  while (cache->n > 0) drop_entry(cache, cache->n - 1);
  free(cache->entries);
  free(cache);
  return FER_STATUS_OK;
}

fer_status fer_dense_cache_get_stats(const fer_dense_cache *cache, fer_dense_cache_stats *out_stats) {
  feri_error_clear();
  if (out_stats != NULL) memset(out_stats, 0, sizeof *out_stats); /* zeroed before any check that can fail */
  if (cache == NULL || out_stats == NULL)
    return feri_fail(FER_STATUS_NULL_ARG, "fer_dense_cache_get_stats: cache and out_stats must not be NULL");
  *out_stats = cache->stats;
  return FER_STATUS_OK;
}

static uint64_t content_hash(const fer_qmatrix *w, size_t row_bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int64_t r = 0; r < w->rows; r++) {
    const unsigned char *p = (const unsigned char *)w->data + r * w->row_stride;
    for (size_t i = 0; i < row_bytes; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  }
  return h;
}

static int same_identity(const dense_entry *e, uint64_t key, const fer_qmatrix *w) {
  return e->key == key && e->shape.data == w->data && e->shape.dtype == w->dtype &&
         e->shape.rows == w->rows && e->shape.cols == w->cols &&
         e->shape.row_stride == w->row_stride && e->shape.bytes == w->bytes;
}

fer_status fer_dense_cache_get(fer_dense_cache *cache, fer_threadpool *pool, uint64_t key,
                               const fer_qmatrix *w, uint32_t flags, const float **out_dense) {
  feri_error_clear();
  if (out_dense == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: out_dense is NULL", FN);
  *out_dense = NULL;
  if (cache == NULL || w == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: cache and w must not be NULL", FN);
  if ((flags & ~(uint32_t)FER_DENSE_CACHE_VERIFY) != 0)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: unknown flags 0x%x", FN, flags);
  int64_t block_elems = 0, block_bytes = 0;
  fer_status st = fer_qblock_size(w->dtype, &block_elems, &block_bytes);
  if (st != FER_STATUS_OK) return st;
  const size_t row_bytes = (size_t)(w->cols / block_elems) * (size_t)block_bytes;
  uint64_t hash = 0;
  int hashed = 0;
  for (size_t i = 0; i < cache->n; i++) {
    dense_entry *e = &cache->entries[i];
    if (!same_identity(e, key, w)) continue;
    if (flags & FER_DENSE_CACHE_VERIFY) {
      hash = content_hash(w, row_bytes);
      hashed = 1;
      if (hash != e->hash) { /* same identity, new bytes: the entry is stale */
        drop_entry(cache, i);
        break;
      }
    }
    e->last_use = ++cache->clock;
    cache->stats.hits++;
    *out_dense = e->dense;
    return FER_STATUS_OK;
  }

  /* a miss: check structure and scales before anything is evicted or charged */
  if ((st = fer_qmatrix_check(w)) != FER_STATUS_OK) return st;
  if (w->rows > 0 && (uint64_t)w->cols > UINT64_MAX / 4 / (uint64_t)w->rows)
    return feri_fail(FER_STATUS_SIZE_OVERFLOW, "%s: [%lld, %lld] f32 overflows", FN, (long long)w->rows,
                     (long long)w->cols);
  const uint64_t bytes = (uint64_t)w->rows * (uint64_t)w->cols * 4;
  if (bytes > cache->capacity)
    return feri_fail(FER_STATUS_BUDGET_EXCEEDED, "%s: the expansion needs %llu bytes, the cache holds "
                     "at most %llu", FN, (unsigned long long)bytes, (unsigned long long)cache->capacity);
  if (cache->governor != NULL &&
      (st = fer_governor_charge(cache->governor, FER_MEM_ROLE_CACHE, bytes)) != FER_STATUS_OK)
    return st;
  float *dense = malloc(bytes > 0 ? (size_t)bytes : 1);
  dense_entry *grown = cache->n == cache->cap
                           ? realloc(cache->entries, (cache->cap ? 2 * cache->cap : 4) * sizeof *grown)
                           : cache->entries;
  if (grown != NULL && cache->n == cache->cap) {
    cache->entries = grown;
    cache->cap = cache->cap ? 2 * cache->cap : 4;
  }
  fer_tensor out = feri_tensor_2d(dense, FER_DTYPE_F32, w->rows, w->cols);
  if (dense == NULL || grown == NULL || (st = fer_dequantize(pool, w, &out)) != FER_STATUS_OK) {
    free(dense);
    if (cache->governor != NULL) (void)fer_governor_release(cache->governor, FER_MEM_ROLE_CACHE, bytes);
    return st != FER_STATUS_OK ? st : feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: out of memory", FN);
  }
  /* make room: least recently used first */
  while (cache->stats.bytes + bytes > cache->capacity && cache->n > 0) {
    size_t lru = 0;
    for (size_t i = 1; i < cache->n; i++)
      if (cache->entries[i].last_use < cache->entries[lru].last_use) lru = i;
    drop_entry(cache, lru);
    cache->stats.evictions++;
  }
  dense_entry *e = &cache->entries[cache->n++];
  e->key = key;
  e->shape = *w;
  e->hash = hashed ? hash : content_hash(w, row_bytes);
  e->last_use = ++cache->clock;
  e->bytes = bytes;
  e->dense = dense;
  cache->stats.bytes += bytes;
  cache->stats.entries = cache->n;
  cache->stats.misses++;
  *out_dense = dense;
  return FER_STATUS_OK;
}
