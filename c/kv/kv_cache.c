/* kv_cache.c: per-sequence K, V and mask reservations on a fer_vmm, committed granule by granule
 * as tokens become live. Residency follows layout: only windows holding a live byte are mapped
 * (the geometry of mem/commit.c applied for real), and growth either commits at a stable address
 * (nothing moves) or, for a head-major binding laid out at its capacity, relocates it and counts
 * every byte it copies. */
#include "kv/kv_cache.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "kernels/quant.h"
#include "core/status.h"
#include "mem/commit.h"
#include "mem/vmm.h"

struct fer_kv_cache {
  fer_vmm *vmm;
  fer_kv_cache_options o;
  uint64_t granule;
  uint64_t row;      /* one token, one binding: heads x head_dim x elem */
  uint64_t head_row; /* head_dim x elem */
  /* One token's bytes in a seq- or token-major reservation: row, or row x 2 x layers. Never the
   * reservation divided by max_tokens: the vmm rounds a reservation up to whole granules, and a
   * share of the slack per token would put token t past its real bytes (over-commit, forks
   * sharing windows that hold the parent's later tokens, truncate zeroing the wrong bytes). */
  uint64_t token_bytes;
  uint32_t n_bindings;
  uint64_t n_seqs;
  struct fer_kv_seq *seqs; /* every live sequence, to tell which windows another one maps */
};

/* One reservation and the granule behind each of its windows. */
typedef struct kv_buffer {
  fer_vmm_range *range;
  char *base;
  uint64_t bytes;
  uint64_t *slot;  /* per window: granule + 1, or 0 */
  uint8_t *shared; /* per window: 1 when mapped read-only from another sequence's granule */
} kv_buffer;

struct fer_kv_seq {
  fer_kv_cache *cache;
  uint64_t live;
  uint64_t cap;     /* capacity_tokens of the stats */
  uint64_t stride;  /* tokens per head stripe (head-major) / per reservation: cap or max */
  kv_buffer *bind;  /* n_bindings */
  kv_buffer mask;   /* bytes == 0 when the cache keeps no mask */
  uint64_t growth_events, bytes_moved, address_changes, committed_windows;
  uint64_t *released;  /* per layer: tokens before it released (fer_kv_seq_release_before) */
  bool any_released;
  fer_kv_seq_sharing sharing;
  struct fer_kv_seq *prev, *next; /* in cache->seqs */
};

static int relocates(const fer_kv_cache *c) {
  return c->o.policy == FER_KV_POLICY_BUCKETED && c->o.geometry.layout == FER_KV_LAYOUT_HEAD_MAJOR;
}

fer_status fer_kv_cache_options_init(fer_kv_cache_options *o) {
  feri_error_clear();
  if (o == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_kv_cache_options_init: opts is NULL");
  memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  o->geometry.struct_size = sizeof o->geometry;
  o->policy = FER_KV_POLICY_BUCKETED;
  o->min_bucket = 8;
  return FER_STATUS_OK;
}

fer_status fer_kv_cache_create(fer_vmm *vmm, const fer_kv_cache_options *opts, fer_kv_cache **out) {
  static const char *const fn = "fer_kv_cache_create";
  feri_error_clear();
  if (out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: out_cache is NULL", fn);
  *out = NULL;
  if (vmm == NULL || opts == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: vmm or opts is NULL", fn);
  if (opts->struct_size < sizeof *opts)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: struct_size %u < %zu", fn, opts->struct_size, sizeof *opts);
  uint64_t row;
  uint32_t nb;
  fer_status st = feri_kv_geometry_check(&opts->geometry, fn, &row, &nb);
  if (st != FER_STATUS_OK) return st;
  if (opts->policy != FER_KV_POLICY_BUCKETED && opts->policy != FER_KV_POLICY_FIXED_MAX)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: unknown policy %d", fn, (int)opts->policy);
  if (opts->dtype != FER_DTYPE_F32 && opts->dtype != FER_DTYPE_F16 && opts->dtype != FER_DTYPE_BF16 &&
      opts->dtype != FER_DTYPE_Q8_0)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: dtype %s is not f32, f16, bf16 or q8_0", fn, feri_dtype_name(opts->dtype));
  /* Q8_0's unit is a block of 32 elements (34 bytes): geometry.head_dim counts blocks then */
  const size_t unit = opts->dtype == FER_DTYPE_Q8_0 ? feri_qblock_bytes(opts->dtype) : feri_dtype_size(opts->dtype);
  if (unit != opts->geometry.elem_bytes)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: dtype %s is %zu bytes a %s, geometry.elem_bytes says %u", fn,
                     feri_dtype_name(opts->dtype), unit, opts->dtype == FER_DTYPE_Q8_0 ? "block" : "element",
                     opts->geometry.elem_bytes);
  if (opts->policy == FER_KV_POLICY_BUCKETED && (opts->min_bucket == 0 || opts->min_bucket > opts->geometry.capacity_tokens))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: min_bucket %llu outside 1..max_tokens", fn,
                     (unsigned long long)opts->min_bucket);
  uint64_t mask_total;
  if (__builtin_mul_overflow((uint64_t)opts->mask_bytes_per_token, opts->geometry.capacity_tokens, &mask_total))
    return feri_fail(FER_STATUS_SIZE_OVERFLOW, "%s: mask bytes overflow", fn);
  fer_vmm_stats vs;
  if ((st = fer_vmm_get_stats(vmm, &vs)) != FER_STATUS_OK) return st;
  fer_kv_cache *c = calloc(1, sizeof *c);
  if (c == NULL) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
  c->vmm = vmm;
  c->o = *opts;
  c->granule = vs.granule_bytes;
  c->row = row;
  c->head_row = (uint64_t)opts->geometry.head_dim * opts->geometry.elem_bytes;
  /* no overflow: feri_kv_geometry_check bounded row x 2 x layers x max_tokens */
  c->token_bytes = opts->geometry.layout == FER_KV_LAYOUT_TOKEN_MAJOR ? row * 2 * opts->geometry.n_layers : row;
  c->n_bindings = nb;
  *out = c;
  return FER_STATUS_OK;
}

fer_status fer_kv_cache_free(fer_kv_cache *c) {
  feri_error_clear();
  if (c == NULL) return FER_STATUS_OK;
  if (c->n_seqs > 0)
    return feri_fail(FER_STATUS_BUSY, "fer_kv_cache_free: %llu sequences are alive", (unsigned long long)c->n_seqs);
  free(c);
  return FER_STATUS_OK;
}

/* Bytes of one binding's reservation when its stripes are `stride` tokens long. */
static uint64_t binding_bytes(const fer_kv_cache *c, uint64_t stride) {
  const fer_kv_geometry *g = &c->o.geometry;
  return g->layout == FER_KV_LAYOUT_HEAD_MAJOR ? stride * c->row : stride * c->token_bytes;
}

/* Unmaps and releases a buffer. Fails (BUSY: the pool is frozen) only before changing anything. */
static fer_status buffer_free(fer_kv_cache *c, kv_buffer *b) {
  if (b->range == NULL) return FER_STATUS_OK;
  uint64_t windows = b->bytes / c->granule;
  fer_status st = fer_vmm_range_free(b->range); /* unmaps every window */
  if (st != FER_STATUS_OK) return st;
  /* a granule another sharer still maps stays: the last sharer releases it */
  for (uint64_t k = 0; k < windows; k++)
    if (b->slot[k]) feri_vmm_granule_release_if_unmapped(c->vmm, b->slot[k] - 1);
  free(b->slot);
  free(b->shared);
  memset(b, 0, sizeof *b);
  return FER_STATUS_OK;
}

/* Clean-up after a failure calls entry points, which clear the thread's message: these keep the
 * failure's message (the header promises one) across it. */
static void buffers_free_keep_message(fer_kv_cache *c, kv_buffer *bind, kv_buffer *mask) {
  feri_error_stash e;
  feri_error_save(&e);
  for (uint32_t b = 0; bind != NULL && b < c->n_bindings; b++) buffer_free(c, &bind[b]);
  if (mask != NULL) buffer_free(c, mask);
  feri_error_restore(&e, FER_STATUS_OK);
}

static fer_status buffer_reserve(fer_kv_cache *c, kv_buffer *b, uint64_t bytes) {
  memset(b, 0, sizeof *b);
  if (bytes == 0) return FER_STATUS_OK;
  fer_status st = fer_vmm_range_reserve(c->vmm, bytes, &b->range);
  if (st != FER_STATUS_OK) return st;
  void *base;
  fer_vmm_range_base(b->range, &base, &b->bytes);
  b->base = base;
  b->slot = calloc(b->bytes / c->granule, sizeof *b->slot);
  b->shared = calloc(b->bytes / c->granule, 1);
  if (b->slot == NULL || b->shared == NULL) {
    free(b->slot);
    free(b->shared);
    fer_vmm_range_free(b->range);
    memset(b, 0, sizeof *b);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "fer_kv_seq: out of memory"); /* after the free: kept */
  }
  return FER_STATUS_OK;
}

/* Maps a fresh granule over every window of [off, off + len) not mapped yet. Windows mapped by
 * this call are listed in undo[] (window indices) so a failure can be rolled back. */
static fer_status buffer_commit(fer_kv_cache *c, kv_buffer *b, uint64_t off, uint64_t len, uint64_t *undo,
                                size_t *n_undo) {
  if (len == 0) return FER_STATUS_OK;
  for (uint64_t k = off / c->granule; k <= (off + len - 1) / c->granule; k++) {
    if (b->slot[k]) continue;
    uint64_t g;
    fer_status st = fer_vmm_granule_create(c->vmm, &g);
    if (st != FER_STATUS_OK) return st;
    if ((st = fer_vmm_map(b->range, k * c->granule, g, FER_VMM_ACCESS_READ_WRITE)) != FER_STATUS_OK) {
      feri_error_stash e;
      feri_error_save(&e);
      fer_vmm_granule_release(c->vmm, g);
      return feri_error_restore(&e, st);
    }
    b->slot[k] = g + 1;
    if (undo != NULL) undo[(*n_undo)++] = k;
  }
  return FER_STATUS_OK;
}

/* Rolls back buffer_commit's windows; keeps the thread's message (the failure being rolled back). */
static void buffer_uncommit(fer_kv_cache *c, kv_buffer *b, const uint64_t *undo, size_t n) {
  feri_error_stash e;
  feri_error_save(&e);
  for (size_t i = 0; i < n; i++) {
    uint64_t k = undo[i];
    fer_vmm_unmap(b->range, k * c->granule);
    fer_vmm_granule_release(c->vmm, b->slot[k] - 1);
    b->slot[k] = 0;
  }
  feri_error_restore(&e, FER_STATUS_OK);
}

/* Commits the live bytes of `live` tokens into bind[] and mask laid out at `stride`. All or
 * nothing: on failure every window this call mapped, in every buffer, is unmapped again. Adds the
 * windows mapped to *committed. */
static fer_status commit_live(fer_kv_cache *c, kv_buffer *bind, kv_buffer *mask, uint64_t stride, uint64_t live,
                              const uint64_t *released, uint64_t *committed) {
  const fer_kv_geometry *g = &c->o.geometry;
  const uint32_t n_buf = c->n_bindings + 1; /* the bindings, then the mask */
  uint64_t **undo = calloc(n_buf, sizeof *undo);
  size_t *n_undo = calloc(n_buf, sizeof *n_undo);
  fer_status st = undo && n_undo ? FER_STATUS_OK : feri_fail(FER_STATUS_OUT_OF_MEMORY, "fer_kv_seq_extend: out of memory");
  for (uint32_t b = 0; b < n_buf && st == FER_STATUS_OK; b++) {
    kv_buffer *buf = b < c->n_bindings ? &bind[b] : mask;
    if (buf->range == NULL) continue;
    uint64_t windows = buf->bytes / c->granule;
    if ((undo[b] = malloc(windows * sizeof **undo)) == NULL) {
      st = feri_fail(FER_STATUS_OUT_OF_MEMORY, "fer_kv_seq_extend: out of memory");
    } else if (b == c->n_bindings) {
      st = buffer_commit(c, buf, 0, live * c->o.mask_bytes_per_token, undo[b], &n_undo[b]);
    } else {
      /* from the layer's release point on: released windows stay released */
      const uint64_t from = released != NULL && g->layout != FER_KV_LAYOUT_TOKEN_MAJOR ? released[b / 2] : 0;
      const uint64_t n = live > from ? live - from : 0;
      if (g->layout == FER_KV_LAYOUT_HEAD_MAJOR) {
        for (uint32_t h = 0; h < g->n_kv_heads && st == FER_STATUS_OK; h++)
          st = buffer_commit(c, buf, h * stride * c->head_row + from * c->head_row, n * c->head_row, undo[b], &n_undo[b]);
      } else {
        st = buffer_commit(c, buf, from * c->token_bytes, n * c->token_bytes, undo[b], &n_undo[b]);
      }
    }
  }
  uint64_t total = 0;
  for (uint32_t b = 0; undo && n_undo && b < n_buf; b++) {
    kv_buffer *buf = b < c->n_bindings ? &bind[b] : mask;
    if (st != FER_STATUS_OK && undo[b] != NULL) buffer_uncommit(c, buf, undo[b], n_undo[b]);
    total += n_undo[b];
    free(undo[b]);
  }
  free(undo);
  free(n_undo);
  if (st == FER_STATUS_OK) *committed += total;
  return st;
}

fer_status fer_kv_seq_create(fer_kv_cache *c, fer_kv_seq **out) {
  static const char *const fn = "fer_kv_seq_create";
  feri_error_clear();
  if (out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: out_seq is NULL", fn);
  *out = NULL;
  if (c == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: cache is NULL", fn);
  fer_kv_seq *s = calloc(1, sizeof *s);
  kv_buffer *bind = calloc(c->n_bindings, sizeof *bind);
  uint64_t *released = calloc(c->o.geometry.n_layers, sizeof *released);
  if (s == NULL || bind == NULL || released == NULL) {
    free(s), free(bind), free(released);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
  }
  s->released = released;
  const uint64_t max = c->o.geometry.capacity_tokens;
  s->cache = c;
  s->bind = bind;
  s->cap = c->o.policy == FER_KV_POLICY_BUCKETED ? c->o.min_bucket : max;
  s->stride = relocates(c) ? s->cap : max;
  fer_status st = FER_STATUS_OK;
  for (uint32_t b = 0; b < c->n_bindings && st == FER_STATUS_OK; b++)
    st = buffer_reserve(c, &bind[b], binding_bytes(c, s->stride));
  if (st == FER_STATUS_OK)
    st = buffer_reserve(c, &s->mask, (relocates(c) ? s->cap : max) * c->o.mask_bytes_per_token);
  if (st != FER_STATUS_OK) {
    buffers_free_keep_message(c, bind, &s->mask);
    free(bind), free(s->released), free(s);
    return st;
  }
  c->n_seqs++;
  s->next = c->seqs;
  if (c->seqs != NULL) c->seqs->prev = s;
  c->seqs = s;
  *out = s;
  return FER_STATUS_OK;
}

fer_status fer_kv_seq_free(fer_kv_seq *s) {
  feri_error_clear();
  if (s == NULL) return FER_STATUS_OK;
  fer_kv_cache *c = s->cache;
  /* A frozen pool refuses the first range (BUSY) before anything is unmapped: then the sequence
   * stays whole, rather than half freed behind a leaked range. */
  fer_status st = buffer_free(c, &s->bind[0]);
  if (st != FER_STATUS_OK) return st;
  for (uint32_t b = 1; b < c->n_bindings; b++) buffer_free(c, &s->bind[b]);
  buffer_free(c, &s->mask);
  if (s->prev != NULL) s->prev->next = s->next;
  else c->seqs = s->next;
  if (s->next != NULL) s->next->prev = s->prev;
  free(s->bind);
  free(s->released);
  free(s);
  c->n_seqs--;
  return FER_STATUS_OK;
}

fer_status fer_kv_seq_release_before(fer_kv_seq *s, uint32_t layer, uint64_t first_token) {
  static const char *const fn = "fer_kv_seq_release_before";
  feri_error_clear();
  if (s == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: seq is NULL", fn);
  fer_kv_cache *c = s->cache;
  const fer_kv_geometry *g = &c->o.geometry;
  if (layer >= g->n_layers)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: layer %u of %u", fn, layer, g->n_layers);
  if (first_token > s->live)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: first_token %llu > the %llu live", fn, (unsigned long long)first_token,
                     (unsigned long long)s->live);
  if (g->layout == FER_KV_LAYOUT_TOKEN_MAJOR || relocates(c))
    return feri_fail(FER_STATUS_UNSUPPORTED, "%s: %s", fn,
                     relocates(c) ? "a head-major bucketed cache relocates (copies every live byte) on growth"
                                  : "a token-major window holds every layer's rows");
  if (first_token <= s->released[layer]) return FER_STATUS_OK;
  if (feri_vmm_is_frozen(c->vmm)) return feri_fail(FER_STATUS_BUSY, "%s: the pool is frozen", fn);
  const uint64_t G = c->granule;
  for (uint32_t kv = 0; kv < 2; kv++) {
    kv_buffer *buf = &s->bind[2 * layer + kv];
    if (buf->range == NULL) continue;
    const uint32_t stripes = g->layout == FER_KV_LAYOUT_HEAD_MAJOR ? g->n_kv_heads : 1;
    for (uint32_t h = 0; h < stripes; h++) {
      /* the windows wholly inside this stripe's bytes of tokens [0, first_token) */
      const uint64_t base = g->layout == FER_KV_LAYOUT_HEAD_MAJOR ? h * s->stride * c->head_row : 0;
      const uint64_t per = g->layout == FER_KV_LAYOUT_HEAD_MAJOR ? c->head_row : c->token_bytes;
      const uint64_t k0 = (base + G - 1) / G, k1 = (base + first_token * per) / G;
      for (uint64_t k = k0; k < k1; k++) {
        if (buf->slot[k] == 0) continue;
        const uint64_t gid = buf->slot[k] - 1;
        fer_status st = fer_vmm_unmap(buf->range, k * G);
        if (st != FER_STATUS_OK) return st; /* released so far stays released; the ledger agrees */
        if (buf->shared[k]) s->sharing.shared_windows--;
        else s->committed_windows--;
        feri_vmm_granule_release_if_unmapped(c->vmm, gid);
        buf->slot[k] = 0;
        buf->shared[k] = 0;
      }
    }
  }
  s->released[layer] = first_token;
  s->any_released = true;
  return FER_STATUS_OK;
}

/* Next power of two >= n, clamped to [min_bucket, max]. */
static uint64_t bucket_for(const fer_kv_cache *c, uint64_t n) {
  uint64_t b = c->o.min_bucket;
  while (b < n && b < c->o.geometry.capacity_tokens) b = b > UINT64_MAX / 2 ? UINT64_MAX : b * 2;
  return b < c->o.geometry.capacity_tokens ? b : c->o.geometry.capacity_tokens;
}

/* Head-major bucketed growth to `live` tokens: new reservations laid out at the new capacity with
 * every window of the new live length committed, the current live bytes copied there head by
 * head, the old ones released. All or nothing: on failure the sequence keeps its old reservations
 * and address. */
static fer_status relocate(fer_kv_seq *s, uint64_t new_cap, uint64_t live) {
  fer_kv_cache *c = s->cache;
  const fer_kv_geometry *g = &c->o.geometry;
  kv_buffer *nb = calloc(c->n_bindings, sizeof *nb);
  kv_buffer nmask;
  memset(&nmask, 0, sizeof nmask);
  if (nb == NULL) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "fer_kv_seq_extend: out of memory");
  fer_status st = FER_STATUS_OK;
  for (uint32_t b = 0; b < c->n_bindings && st == FER_STATUS_OK; b++) st = buffer_reserve(c, &nb[b], binding_bytes(c, new_cap));
  if (st == FER_STATUS_OK) st = buffer_reserve(c, &nmask, new_cap * c->o.mask_bytes_per_token);
  uint64_t windows = 0;
  if (st == FER_STATUS_OK) st = commit_live(c, nb, &nmask, new_cap, live, NULL, &windows);
  if (st != FER_STATUS_OK) {
    buffers_free_keep_message(c, nb, &nmask);
    free(nb);
    return st;
  }
  uint64_t moved = 0;
  for (uint32_t b = 0; b < c->n_bindings; b++)
    for (uint32_t h = 0; h < g->n_kv_heads; h++) {
      memcpy(nb[b].base + h * new_cap * c->head_row, s->bind[b].base + h * s->stride * c->head_row, s->live * c->head_row);
      moved += s->live * c->head_row;
    }
  if (nmask.range != NULL) {
    memcpy(nmask.base, s->mask.base, s->live * c->o.mask_bytes_per_token);
    moved += s->live * c->o.mask_bytes_per_token;
  }
  uint64_t old_windows = 0;
  for (uint32_t b = 0; b < c->n_bindings; b++) {
    for (uint64_t k = 0; k < s->bind[b].bytes / c->granule; k++) old_windows += s->bind[b].slot[k] != 0;
    buffer_free(c, &s->bind[b]);
  }
  for (uint64_t k = 0; s->mask.range != NULL && k < s->mask.bytes / c->granule; k++) old_windows += s->mask.slot[k] != 0;
  buffer_free(c, &s->mask);
  free(s->bind);
  s->bind = nb;
  s->mask = nmask;
  s->stride = new_cap;
  s->committed_windows = s->committed_windows - old_windows + windows;
  s->bytes_moved += moved;
  s->address_changes++;
  return FER_STATUS_OK;
}

fer_status fer_kv_seq_extend(fer_kv_seq *s, uint64_t live) {
  static const char *const fn = "fer_kv_seq_extend";
  feri_error_clear();
  if (s == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: seq is NULL", fn);
  fer_kv_cache *c = s->cache;
  if (live < s->live)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: live_tokens %llu < the current %llu (no rewind here)", fn,
                     (unsigned long long)live, (unsigned long long)s->live);
  if (live > c->o.geometry.capacity_tokens)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: live_tokens %llu > max_tokens %llu", fn, (unsigned long long)live,
                     (unsigned long long)c->o.geometry.capacity_tokens);
  fer_status st;
  uint64_t new_cap = live > s->cap ? bucket_for(c, live) : s->cap;
  uint64_t windows = 0;
  if (new_cap != s->cap && relocates(c)) {
    /* the relocation commits the new live length itself, so a refusal leaves the old address */
    if ((st = relocate(s, new_cap, live)) != FER_STATUS_OK) return st;
  } else {
    /* Commit the new live bytes (windows already mapped are skipped); all or nothing. */
    st = commit_live(c, s->bind, &s->mask, s->stride, live, s->released, &windows);
    if (st != FER_STATUS_OK) return st;
  }
  if (new_cap != s->cap) s->growth_events++;
  s->cap = new_cap;
  s->live = live;
  s->committed_windows += windows;
  return FER_STATUS_OK;
}

fer_status fer_kv_seq_get_stats(const fer_kv_seq *s, fer_kv_seq_stats *out) {
  feri_error_clear();
  if (out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_kv_seq_get_stats: out_stats is NULL");
  memset(out, 0, sizeof *out);
  if (s == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_kv_seq_get_stats: seq is NULL");
  out->live_tokens = s->live;
  out->capacity_tokens = s->cap;
  out->growth_events = s->growth_events;
  out->bytes_moved = s->bytes_moved;
  out->address_changes = s->address_changes;
  out->committed_bytes = s->committed_windows * s->cache->granule;
  return FER_STATUS_OK;
}

fer_status fer_kv_seq_view(const fer_kv_seq *s, uint32_t layer, uint32_t kv, fer_tensor *out) {
  static const char *const fn = "fer_kv_seq_view";
  feri_error_clear();
  if (out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: out_view is NULL", fn);
  memset(out, 0, sizeof *out);
  if (s == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: seq is NULL", fn);
  const fer_kv_cache *c = s->cache;
  const fer_kv_geometry *g = &c->o.geometry;
  if (layer >= g->n_layers || kv > 1)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: layer %u of %u, kv %u of 2", fn, layer, g->n_layers, kv);
  const int64_t e = g->elem_bytes;
  out->dtype = c->o.dtype;
  out->rank = 3;
  out->shape[0] = g->n_kv_heads;
  out->shape[1] = (int64_t)s->live;
  out->shape[2] = g->head_dim;
  out->strides[2] = e;
  switch (g->layout) {
    case FER_KV_LAYOUT_HEAD_MAJOR:
      out->data = s->bind[2 * layer + kv].base;
      out->strides[0] = (int64_t)(s->stride * c->head_row);
      out->strides[1] = (int64_t)c->head_row;
      break;
    case FER_KV_LAYOUT_SEQ_MAJOR:
      out->data = s->bind[2 * layer + kv].base;
      out->strides[0] = (int64_t)c->head_row;
      out->strides[1] = (int64_t)c->row;
      break;
    default:
      out->data = s->bind[0].base + (2 * (uint64_t)layer + kv) * c->row;
      out->strides[0] = (int64_t)c->head_row;
      out->strides[1] = (int64_t)(c->row * 2 * g->n_layers);
      break;
  }
  if (s->live == 0) out->data = NULL;
  return FER_STATUS_OK;
}

/* ---- prefix sharing ------------------------------------------------------------------------ */

/* The byte ranges tokens [t0, t1) occupy in buffer b (b == n_bindings: the mask); at most
 * n_kv_heads ranges (head-major stripes), else one. Returns the count. */
static size_t token_ranges(const fer_kv_seq *s, uint32_t b, uint64_t t0, uint64_t t1, uint64_t *lo,
                           uint64_t *hi) {
  const fer_kv_cache *c = s->cache;
  const fer_kv_geometry *g = &c->o.geometry;
  if (t1 <= t0) return 0;
  if (b == c->n_bindings) {
    lo[0] = t0 * c->o.mask_bytes_per_token;
    hi[0] = t1 * c->o.mask_bytes_per_token;
    return lo[0] < hi[0];
  }
  if (g->layout == FER_KV_LAYOUT_HEAD_MAJOR) {
    for (uint32_t h = 0; h < g->n_kv_heads; h++) {
      lo[h] = h * s->stride * c->head_row + t0 * c->head_row;
      hi[h] = h * s->stride * c->head_row + t1 * c->head_row;
    }
    return g->n_kv_heads;
  }
  lo[0] = t0 * c->token_bytes;
  hi[0] = t1 * c->token_bytes;
  return 1;
}

fer_status fer_kv_seq_fork(const fer_kv_seq *parent, uint64_t prefix_tokens, fer_kv_seq **out_child) {
  static const char *const fn = "fer_kv_seq_fork";
  feri_error_clear();
  if (out_child == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: out_child is NULL", fn);
  *out_child = NULL;
  if (parent == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: parent is NULL", fn);
  fer_kv_cache *c = parent->cache;
  if (relocates(c))
    return feri_fail(FER_STATUS_UNSUPPORTED, "%s: a head-major bucketed cache relocates on growth; "
                     "its windows cannot be shared", fn);
  if (prefix_tokens > parent->live)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: prefix of %llu tokens > the parent's %llu live", fn,
                     (unsigned long long)prefix_tokens, (unsigned long long)parent->live);
  if (parent->any_released)
    return feri_fail(FER_STATUS_UNSUPPORTED, "%s: the parent released tokens of a sliding-window layer", fn);
  /* a frozen pool would refuse the child's maps, and then the ranges of the half-built child too:
   * refuse before building anything */
  if (feri_vmm_is_frozen(c->vmm)) return feri_fail(FER_STATUS_BUSY, "%s: the pool is frozen", fn);
  uint64_t *lo = malloc(c->o.geometry.n_kv_heads * sizeof *lo), *hi = malloc(c->o.geometry.n_kv_heads * sizeof *hi);
  if (lo == NULL || hi == NULL) {
    free(lo), free(hi);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
  }
  fer_kv_seq *s;
  fer_status st = fer_kv_seq_create(c, &s);
  if (st != FER_STATUS_OK) {
    free(lo), free(hi);
    return st;
  }
  const uint64_t G = c->granule;
  for (uint32_t b = 0; b <= c->n_bindings && st == FER_STATUS_OK; b++) {
    kv_buffer *dst = b < c->n_bindings ? &s->bind[b] : &s->mask;
    const kv_buffer *src = b < c->n_bindings ? &parent->bind[b] : &parent->mask;
    if (dst->range == NULL) continue;
    const size_t n = token_ranges(s, b, 0, prefix_tokens, lo, hi);
    for (size_t r = 0; r < n && st == FER_STATUS_OK; r++) {
      for (uint64_t k = lo[r] / G; lo[r] < hi[r] && k <= (hi[r] - 1) / G && st == FER_STATUS_OK; k++) {
        if (dst->slot[k]) continue; /* done for an earlier range */
        const uint64_t w0 = k * G, w1 = w0 + G;
        /* The prefix bytes in this window, over every range (head-major stripes may meet in one
         * window): the window is shared only when they fill it, so no byte the parent writes later
         * (its tokens past the prefix) can show through in the child. */
        uint64_t inside = 0;
        for (size_t q = 0; q < n; q++) {
          const uint64_t a = lo[q] > w0 ? lo[q] : w0, e = hi[q] < w1 ? hi[q] : w1;
          if (a < e) inside += e - a;
        }
        if (inside == G) {
          const uint64_t gid = src->slot[k] - 1;
          if ((st = fer_vmm_map(dst->range, w0, gid, FER_VMM_ACCESS_READ_ONLY)) != FER_STATUS_OK) break;
          dst->slot[k] = gid + 1;
          dst->shared[k] = 1;
          s->sharing.shared_windows++;
        } else { /* a window of its own, with every prefix byte it holds copied */
          if ((st = buffer_commit(c, dst, w0, 1, NULL, NULL)) != FER_STATUS_OK) break;
          s->committed_windows++;
          for (size_t q = 0; q < n; q++) {
            const uint64_t a = lo[q] > w0 ? lo[q] : w0, e = hi[q] < w1 ? hi[q] : w1;
            if (a < e) {
              memcpy(dst->base + a, src->base + a, (size_t)(e - a));
              s->sharing.fork_bytes_copied += e - a;
            }
          }
        }
      }
    }
  }
  free(lo);
  free(hi);
  if (st != FER_STATUS_OK) {
    feri_error_stash e;
    feri_error_save(&e);
    fer_kv_seq_free(s);
    return feri_error_restore(&e, st);
  }
  s->live = prefix_tokens;
  s->cap = c->o.policy == FER_KV_POLICY_BUCKETED ? bucket_for(c, prefix_tokens) : c->o.geometry.capacity_tokens;
  *out_child = s;
  return FER_STATUS_OK;
}

/* Whether window k of buffer b of s maps a granule another sequence also maps. A fork maps the
 * parent's window k of buffer b at its own window k of buffer b, so only that window of the other
 * sequences can hold the same granule. */
static int mapped_elsewhere(const fer_kv_seq *s, uint32_t b, uint64_t k) {
  const fer_kv_cache *c = s->cache;
  const kv_buffer *mine = b < c->n_bindings ? &s->bind[b] : &s->mask;
  if (mine->slot[k] == 0) return 0;
  for (const fer_kv_seq *o = c->seqs; o != NULL; o = o->next) {
    if (o == s) continue;
    const kv_buffer *theirs = b < c->n_bindings ? &o->bind[b] : &o->mask;
    if (theirs->range != NULL && k < theirs->bytes / c->granule && theirs->slot[k] == mine->slot[k]) return 1;
  }
  return 0;
}

/* One window make_writable replaced, so a later refusal can put it back. */
typedef struct cow_undo {
  kv_buffer *buf;
  uint64_t k, old, fresh;
  int ro;
} cow_undo;

/* Puts the windows of undo[0 .. n) back on their old granules, newest first, and releases the
 * copies: the state before make_writable (the old granules are still alive: their release waits
 * for success). Keeps the thread's message (the refusal being rolled back). */
static void cow_rollback(fer_kv_seq *s, const cow_undo *undo, size_t n) {
  fer_kv_cache *c = s->cache;
  feri_error_stash e;
  feri_error_save(&e);
  for (size_t i = n; i-- > 0;) {
    const cow_undo *u = &undo[i];
    fer_vmm_unmap(u->buf->range, u->k * c->granule);
    fer_vmm_granule_release(c->vmm, u->fresh);
    fer_vmm_map(u->buf->range, u->k * c->granule, u->old, u->ro ? FER_VMM_ACCESS_READ_ONLY : FER_VMM_ACCESS_READ_WRITE);
    u->buf->slot[u->k] = u->old + 1;
    u->buf->shared[u->k] = (uint8_t)u->ro;
    if (u->ro) {
      s->sharing.shared_windows++;
      s->committed_windows--;
    }
    s->sharing.cow_copies--;
  }
  feri_error_restore(&e, FER_STATUS_OK);
}

fer_status fer_kv_seq_make_writable(fer_kv_seq *s, uint64_t first_token, uint64_t n_tokens) {
  static const char *const fn = "fer_kv_seq_make_writable";
  feri_error_clear();
  if (s == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: seq is NULL", fn);
  fer_kv_cache *c = s->cache;
  if (first_token > s->live || n_tokens > s->live - first_token)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: tokens [%llu, +%llu) beyond the %llu live", fn,
                     (unsigned long long)first_token, (unsigned long long)n_tokens, (unsigned long long)s->live);
  uint64_t *lo = malloc(c->o.geometry.n_kv_heads * sizeof *lo), *hi = malloc(c->o.geometry.n_kv_heads * sizeof *hi);
  if (lo == NULL || hi == NULL) {
    free(lo), free(hi);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
  }
  /* Two passes: count the windows to copy (an upper bound: stripes meeting in a window count it
   * twice), then copy them, each recorded so that a refusal part way puts every one back. */
  size_t cap = 0, n_undo = 0;
  cow_undo *undo = NULL;
  fer_status st = FER_STATUS_OK;
  for (int pass = 0; pass < 2 && st == FER_STATUS_OK; pass++) {
    if (pass == 1) {
      if (cap == 0) break;
      if ((undo = malloc(cap * sizeof *undo)) == NULL) {
        st = feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
        break;
      }
    }
    for (uint32_t b = 0; b <= c->n_bindings && st == FER_STATUS_OK; b++) {
      kv_buffer *buf = b < c->n_bindings ? &s->bind[b] : &s->mask;
      if (buf->range == NULL) continue;
      const size_t n = token_ranges(s, b, first_token, first_token + n_tokens, lo, hi);
      for (size_t r = 0; r < n && st == FER_STATUS_OK; r++)
        for (uint64_t k = lo[r] / c->granule; lo[r] < hi[r] && k <= (hi[r] - 1) / c->granule; k++) {
          /* Read-only (mapped from another sequence), or this sequence's own granule that a fork
           * maps too: either way a write here must not reach the other sharers. */
          const int ro = buf->shared[k];
          if (!ro && !mapped_elsewhere(s, b, k)) continue;
          if (pass == 0) {
            cap++;
            continue;
          }
          uint64_t fresh, copied;
          const uint64_t old = buf->slot[k] - 1;
          if ((st = fer_vmm_copy_on_write(buf->range, k * c->granule, &fresh, &copied)) != FER_STATUS_OK) break;
          undo[n_undo++] = (cow_undo){.buf = buf, .k = k, .old = old, .fresh = fresh, .ro = ro};
          buf->slot[k] = fresh + 1;
          buf->shared[k] = 0;
          if (ro) {
            s->sharing.shared_windows--;
            s->committed_windows++;
          }
          s->sharing.cow_copies++;
        }
    }
  }
  if (st != FER_STATUS_OK) {
    cow_rollback(s, undo, n_undo);
  } else {
    /* if every other sharer is gone, a replaced mapping was the last: release the old granule */
    for (size_t i = 0; i < n_undo; i++) feri_vmm_granule_release_if_unmapped(c->vmm, undo[i].old);
  }
  free(undo);
  free(lo);
  free(hi);
  return st;
}

fer_status fer_kv_seq_truncate(fer_kv_seq *s, uint64_t live) {
  static const char *const fn = "fer_kv_seq_truncate";
  feri_error_clear();
  if (s == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: seq is NULL", fn);
  if (live > s->live)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: live_tokens %llu > the current %llu (extend grows)", fn,
                     (unsigned long long)live, (unsigned long long)s->live);
  if (live == s->live) return FER_STATUS_OK;
  fer_kv_cache *c = s->cache;
  for (uint32_t l = 0; l < c->o.geometry.n_layers; l++)
    if (live < s->released[l])
      return feri_fail(FER_STATUS_INVALID_ARG, "%s: layer %u released the tokens before %llu; live_tokens %llu is below", fn,
                       l, (unsigned long long)s->released[l], (unsigned long long)live);
  uint64_t *lo = malloc(c->o.geometry.n_kv_heads * sizeof *lo), *hi = malloc(c->o.geometry.n_kv_heads * sizeof *hi);
  if (lo == NULL || hi == NULL) {
    free(lo), free(hi);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
  }
  /* shared windows become private first, so zeroing them cannot touch another sequence */
  fer_status st = fer_kv_seq_make_writable(s, live, s->live - live);
  if (st != FER_STATUS_OK) {
    free(lo), free(hi);
    return st;
  }
  for (uint32_t b = 0; b <= c->n_bindings; b++) {
    kv_buffer *buf = b < c->n_bindings ? &s->bind[b] : &s->mask;
    if (buf->range == NULL) continue;
    const size_t n = token_ranges(s, b, live, s->live, lo, hi);
    for (size_t r = 0; r < n; r++) memset(buf->base + lo[r], 0, hi[r] - lo[r]);
  }
  free(lo);
  free(hi);
  s->live = live;
  return FER_STATUS_OK;
}

fer_status fer_kv_seq_get_sharing(const fer_kv_seq *s, fer_kv_seq_sharing *out) {
  static const char *const fn = "fer_kv_seq_get_sharing";
  feri_error_clear();
  if (out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: out_sharing is NULL", fn);
  memset(out, 0, sizeof *out);
  if (s == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: seq is NULL", fn);
  *out = s->sharing;
  return FER_STATUS_OK;
}
