/* prefix_cache.h: the scheduler's automatic prefix cache. When a request ends, the KV of its whole
 * blocks (block_tokens tokens each) is kept as an entry: a fork of the request's KV sequence at the
 * last block boundary (fer_kv_seq_fork: the windows the blocks fill map the request's granules, so
 * keeping them copies at most one partly filled window per binding). Entries are keyed by the chain
 * of block hashes (vLLM's scheme: block i's hash covers its tokens and block i - 1's hash), and a
 * lookup takes the entry sharing the most leading blocks with a prompt. Each entry's windows (its
 * own and those it shares) are charged to the governor as FER_MEM_ROLE_CACHE; the least recently used entry goes first
 * when a charge does not fit, when max_bytes would be passed, or when the scheduler needs the
 * memory for a request. An entry whose tokens start another's is dropped in its favour (the longer
 * one maps the same granules). Single-threaded: the scheduler's step thread. */
#ifndef FERI_SCHED_PREFIX_CACHE_H
#define FERI_SCHED_PREFIX_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "ferrite.h"
#include "model/llama.h"

typedef struct feri_prefix_cache feri_prefix_cache;

typedef struct feri_prefix_cache_stats {
  uint64_t entries, blocks, bytes, evictions;
} feri_prefix_cache_stats;

/* granule_bytes: the entries' pool's granule; geometry: its KV cache's on this rank (an entry's
 * charge adds what the rank holding the most KV maps beyond it, feri_llama_kv_extra_bytes);
 * block_tokens >= 1; max_bytes 0 = bounded by the governor only. */
fer_status feri_prefix_cache_create(const feri_llama *model, fer_governor *gov, uint64_t granule_bytes,
                                    const fer_kv_geometry *geometry, uint32_t block_tokens, uint64_t max_bytes,
                                    feri_prefix_cache **out);
/* Frees every entry (their KV and charges) and the cache. NULL is OK. */
void feri_prefix_cache_free(feri_prefix_cache *c);

/* The longest run of whole cached blocks that ids[0..n) starts with, at most max_tokens tokens:
 * its token count (a multiple of block_tokens; 0 when none) and the KV holding it in *out_kv (fork
 * it; valid until the next insert, eviction or clear). A hit makes the entry the most recent. */
uint32_t feri_prefix_cache_lookup(feri_prefix_cache *c, const int32_t *ids, uint32_t n, uint32_t max_tokens,
                                  const fer_kv_seq **out_kv);

/* Keeps the whole blocks of ids[0..n), whose K and V are kv's first n positions. Nothing is kept
 * (OK) when there is no whole block, when an entry already holds them (it becomes the most recent),
 * or when no room can be made; another failure (the fork's) is returned with nothing changed. */
fer_status feri_prefix_cache_insert(feri_prefix_cache *c, const fer_kv_seq *kv, const int32_t *ids, uint32_t n);

/* How many entries have been added since the cache was created: a lookup whose answer was taken
 * at the same count would answer the same or less now (evictions only remove), so a caller that
 * remembers it can skip asking again. */
uint64_t feri_prefix_cache_inserts(const feri_prefix_cache *c);

/* Drops the least recently used entry; false when there is none. */
bool feri_prefix_cache_evict_lru(feri_prefix_cache *c);

/* Drops every entry. */
void feri_prefix_cache_clear(feri_prefix_cache *c);

void feri_prefix_cache_get_stats(const feri_prefix_cache *c, feri_prefix_cache_stats *out);

#endif
