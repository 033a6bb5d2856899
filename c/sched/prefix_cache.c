/* prefix_cache.c: whole-block prefixes of finished requests, kept as KV forks (contract in
 * prefix_cache.h). Entries live in an array scanned linearly: a lookup compares block hashes from
 * the first block on and stops at the first difference, so it costs about (entries x shared
 * blocks) comparisons, microseconds beside the prefill it saves. */
#include "sched/prefix_cache.h"

#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "model/shared_kv.h"

typedef struct entry {
  int32_t *ids;     /* the cached tokens: n_blocks x block_tokens */
  uint64_t *hash;   /* the chain: hash[i] covers blocks 0 .. i */
  uint32_t n_blocks;
  fer_kv_seq *kv;   /* a fork holding exactly those tokens */
  uint64_t bytes;   /* its committed bytes, charged to the governor */
  uint64_t last_use;
} entry;

struct feri_prefix_cache {
  const feri_llama *model; /* forks and frees go through it (model/shared_kv.h) */
  fer_governor *gov;
  uint64_t granule; /* of the entries' pool */
  fer_kv_geometry geometry; /* of the entries' cache on this rank */
  uint32_t block;
  uint64_t max_bytes;
  entry *e;
  size_t n, cap;
  uint64_t tick, bytes, evictions, inserts;
};

fer_status feri_prefix_cache_create(const feri_llama *model, fer_governor *gov, uint64_t granule_bytes,
                                    const fer_kv_geometry *geometry, uint32_t block_tokens, uint64_t max_bytes,
                                    feri_prefix_cache **out) {
  *out = NULL;
  if (block_tokens == 0) return feri_fail(FER_STATUS_INVALID_ARG, "prefix cache: blocks of 0 tokens");
  feri_prefix_cache *c = calloc(1, sizeof *c);
  if (!c) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "prefix cache");
  c->model = model, c->gov = gov, c->granule = granule_bytes, c->block = block_tokens, c->max_bytes = max_bytes;
  c->geometry = *geometry;
  *out = c;
  return FER_STATUS_OK;
}

/* The chain over ids' first n_blocks blocks: SplitMix64's finalizer folded over each token. */
static void hash_chain(const int32_t *ids, uint32_t n_blocks, uint32_t block, uint64_t *out) {
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (uint32_t b = 0; b < n_blocks; b++) {
    for (uint32_t t = 0; t < block; t++) {
      uint64_t z = h ^ ((uint64_t)(uint32_t)ids[(size_t)b * block + t] + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      h = z ^ (z >> 31);
    }
    out[b] = h;
  }
}

/* Leading blocks that e shares with a prompt of chain `hash` (n_blocks) and tokens ids: equal
 * hashes, confirmed token by token (a hash collision never maps the wrong KV). */
static uint32_t shared_blocks(const feri_prefix_cache *c, const entry *e, const uint64_t *hash, const int32_t *ids,
                              uint32_t n_blocks) {
  const uint32_t lim = e->n_blocks < n_blocks ? e->n_blocks : n_blocks;
  uint32_t k = 0;
  while (k < lim && e->hash[k] == hash[k]) k++;
  while (k > 0 && memcmp(e->ids, ids, (size_t)k * c->block * sizeof(int32_t)) != 0) k--;
  return k;
}

static void entry_drop(feri_prefix_cache *c, size_t i) {
  entry *e = &c->e[i];
  feri_llama_kv_seq_free(c->model, e->kv); /* the pool is never frozen: this cannot be refused */
  fer_governor_release(c->gov, FER_MEM_ROLE_CACHE, e->bytes);
  c->bytes -= e->bytes;
  free(e->ids), free(e->hash);
  c->e[i] = c->e[--c->n];
}

bool feri_prefix_cache_evict_lru(feri_prefix_cache *c) {
  if (c->n == 0) return false;
  size_t lru = 0;
  for (size_t i = 1; i < c->n; i++)
    if (c->e[i].last_use < c->e[lru].last_use) lru = i;
  entry_drop(c, lru);
  c->evictions++;
  return true;
}

uint32_t feri_prefix_cache_lookup(feri_prefix_cache *c, const int32_t *ids, uint32_t n, uint32_t max_tokens,
                                  const fer_kv_seq **out_kv) {
  *out_kv = NULL;
  const uint32_t n_blocks = (n < max_tokens ? n : max_tokens) / c->block;
  if (n_blocks == 0 || c->n == 0) return 0;
  uint64_t *hash = malloc(n_blocks * sizeof *hash);
  if (!hash) return 0; /* no lookup is a miss, never an error */
  hash_chain(ids, n_blocks, c->block, hash);
  uint32_t best = 0;
  entry *hit = NULL;
  for (size_t i = 0; i < c->n; i++) {
    const uint32_t k = shared_blocks(c, &c->e[i], hash, ids, n_blocks);
    if (k > best) best = k, hit = &c->e[i];
  }
  free(hash);
  if (!hit) return 0;
  hit->last_use = ++c->tick;
  *out_kv = hit->kv;
  return best * c->block;
}

/* Charges bytes for a new entry, evicting least recently used entries until the governor and
 * max_bytes allow it; false when no room can be made (the governor's refusal is not an error). */
static bool make_room(feri_prefix_cache *c, uint64_t bytes) {
  for (;;) {
    const bool under_max = c->max_bytes == 0 || c->bytes + bytes <= c->max_bytes;
    if (under_max) {
      feri_error_stash s;
      feri_error_save(&s);
      const fer_status st = fer_governor_charge(c->gov, FER_MEM_ROLE_CACHE, bytes);
      feri_error_restore(&s, FER_STATUS_OK);
      if (st == FER_STATUS_OK) return true;
    }
    if (!feri_prefix_cache_evict_lru(c)) return false;
  }
}

fer_status feri_prefix_cache_insert(feri_prefix_cache *c, const fer_kv_seq *kv, const int32_t *ids, uint32_t n) {
  const uint32_t n_blocks = n / c->block;
  if (n_blocks == 0) return FER_STATUS_OK;
  uint64_t *hash = malloc(n_blocks * sizeof *hash);
  int32_t *copy = malloc((size_t)n_blocks * c->block * sizeof *copy);
  if (!hash || !copy) {
    free(hash), free(copy);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "prefix cache: %u blocks", n_blocks);
  }
  hash_chain(ids, n_blocks, c->block, hash);
  memcpy(copy, ids, (size_t)n_blocks * c->block * sizeof *copy);
  for (size_t i = 0; i < c->n; i++) { /* held already: an entry covering every block */
    if (c->e[i].n_blocks >= n_blocks && shared_blocks(c, &c->e[i], hash, ids, n_blocks) == n_blocks) {
      c->e[i].last_use = ++c->tick;
      free(hash), free(copy);
      return FER_STATUS_OK;
    }
  }
  fer_kv_seq *fork = NULL;
  fer_status st = feri_llama_kv_seq_fork(c->model, kv, (uint64_t)n_blocks * c->block, &fork);
  fer_kv_seq_stats ks;
  fer_kv_seq_sharing sh;
  if (st == FER_STATUS_OK) st = fer_kv_seq_get_stats(fork, &ks);
  if (st == FER_STATUS_OK) st = fer_kv_seq_get_sharing(fork, &sh);
  /* the entry's charge: every window it maps. Its own (the partly filled ones it copied) and the
   * request's, which it shares now and keeps alone once the request is freed. Tensor parallelism:
   * plus what the rank holding the most KV heads maps beyond this one for the same tokens. */
  const uint64_t extra = feri_llama_kv_extra_bytes(c->model, &c->geometry, (uint64_t)n_blocks * c->block, c->granule);
  const uint64_t bytes = st == FER_STATUS_OK ? ks.committed_bytes + sh.shared_windows * c->granule + extra : 0;
  if (st == FER_STATUS_OK && c->n == c->cap) {
    const size_t cap = c->cap ? 2 * c->cap : 16;
    entry *p = realloc(c->e, cap * sizeof *p);
    if (!p) st = feri_fail(FER_STATUS_OUT_OF_MEMORY, "prefix cache: %zu entries", cap);
    else c->e = p, c->cap = cap;
  }
  if (st != FER_STATUS_OK) {
    feri_llama_kv_seq_free(c->model, fork);
    free(hash), free(copy);
    return st;
  }
  /* entries the new one extends: their tokens start it, and it maps their granules */
  for (size_t i = 0; i < c->n;) {
    if (c->e[i].n_blocks < n_blocks && shared_blocks(c, &c->e[i], hash, ids, n_blocks) == c->e[i].n_blocks) entry_drop(c, i);
    else i++;
  }
  if (!make_room(c, bytes)) { /* no room: not cached */
    feri_llama_kv_seq_free(c->model, fork);
    free(hash), free(copy);
    return FER_STATUS_OK;
  }
  c->e[c->n++] = (entry){copy, hash, n_blocks, fork, bytes, ++c->tick};
  c->bytes += bytes;
  c->inserts++;
  return FER_STATUS_OK;
}

uint64_t feri_prefix_cache_inserts(const feri_prefix_cache *c) {
  return c->inserts;
}

void feri_prefix_cache_clear(feri_prefix_cache *c) {
  while (c->n > 0) entry_drop(c, c->n - 1);
}

void feri_prefix_cache_free(feri_prefix_cache *c) {
  if (!c) return;
  feri_prefix_cache_clear(c);
  free(c->e);
  free(c);
}

void feri_prefix_cache_get_stats(const feri_prefix_cache *c, feri_prefix_cache_stats *out) {
  memset(out, 0, sizeof *out);
  out->entries = c->n, out->bytes = c->bytes, out->evictions = c->evictions;
  for (size_t i = 0; i < c->n; i++) out->blocks += c->e[i].n_blocks;
}
