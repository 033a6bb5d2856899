/* pages.c: fixed-size KV pages with a free list, per-sequence page tables and reference counts.
 * Everything is preallocated at creation except the page tables, which grow by doubling, so the
 * hot path (append a token, free a sequence) is a few array operations. */
#include "kv/pages.h"

#include <stdlib.h>
#include <string.h>

#include "core/status.h"

typedef struct seq_table {
  uint32_t *page;
  uint32_t n_pages;
  uint32_t cap;
  uint64_t tokens;
  int alive;
} seq_table;

struct fer_kv_pages {
  uint32_t n_pages;
  uint32_t page_tokens;
  uint32_t *refcount;
  uint32_t *free_list; /* a stack of free page ids */
  uint32_t n_free;
  seq_table *seq;
  uint32_t n_seq_slots;
  uint32_t live;
  uint64_t copied;
};

fer_status fer_kv_pages_create(uint32_t n_pages, uint32_t page_tokens, fer_kv_pages **out) {
  static const char *const fn = "fer_kv_pages_create";
  feri_error_clear();
  if (out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: out_pages is NULL", fn);
  *out = NULL;
  if (n_pages == 0 || page_tokens == 0)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: n_pages %u and page_tokens %u must be >= 1", fn, n_pages, page_tokens);
  fer_kv_pages *p = calloc(1, sizeof *p);
  if (p == NULL) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
  p->refcount = calloc(n_pages, sizeof *p->refcount);
  p->free_list = malloc(n_pages * sizeof *p->free_list);
  if (p->refcount == NULL || p->free_list == NULL) {
    free(p->refcount), free(p->free_list), free(p);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
  }
  for (uint32_t i = 0; i < n_pages; i++) p->free_list[i] = n_pages - 1 - i; /* page 0 on top */
  p->n_free = n_pages;
  p->n_pages = n_pages;
  p->page_tokens = page_tokens;
  *out = p;
  return FER_STATUS_OK;
}

fer_status fer_kv_pages_free(fer_kv_pages *p) {
  feri_error_clear();
  if (p == NULL) return FER_STATUS_OK;
  if (p->live > 0) return feri_fail(FER_STATUS_BUSY, "fer_kv_pages_free: %u sequences are alive", p->live);
  for (uint32_t i = 0; i < p->n_seq_slots; i++) free(p->seq[i].page);
  free(p->seq), free(p->refcount), free(p->free_list), free(p);
  return FER_STATUS_OK;
}

static seq_table *get_seq(const fer_kv_pages *p, uint32_t id, const char *fn, fer_status *st) {
  if (p == NULL) {
    *st = feri_fail(FER_STATUS_NULL_ARG, "%s: pages is NULL", fn);
    return NULL;
  }
  if (id >= p->n_seq_slots || !p->seq[id].alive) {
    *st = feri_fail(FER_STATUS_INVALID_ARG, "%s: sequence %u is not alive", fn, id);
    return NULL;
  }
  return &p->seq[id];
}

/* A free slot for a new sequence (slots are reused; their page arrays are kept). */
static fer_status new_slot(fer_kv_pages *p, uint32_t *id, const char *fn) {
  for (uint32_t i = 0; i < p->n_seq_slots; i++)
    if (!p->seq[i].alive) {
      *id = i;
      return FER_STATUS_OK;
    }
  /* ids stay below UINT32_MAX, the "no sequence" id of a failed call */
  if (p->n_seq_slots > UINT32_MAX / 2)
    return feri_fail(FER_STATUS_SIZE_OVERFLOW, "%s: %u sequence slots cannot double", fn, p->n_seq_slots);
  uint32_t n = p->n_seq_slots ? 2 * p->n_seq_slots : 4;
  seq_table *s = realloc(p->seq, n * sizeof *s);
  if (s == NULL) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
  memset(s + p->n_seq_slots, 0, (n - p->n_seq_slots) * sizeof *s);
  *id = p->n_seq_slots;
  p->seq = s;
  p->n_seq_slots = n;
  return FER_STATUS_OK;
}

fer_status feri_kv_pages_table_cap(uint32_t cap, uint32_t n, const char *fn, uint32_t *out) {
  *out = cap;
  if (n <= cap) return FER_STATUS_OK;
  /* Doubled in 64 bits: a 32-bit capacity doubled past 2^31 wraps to 0 and never reaches n. A
   * table never needs more than UINT32_MAX entries (page ids and counts are 32-bit), so the
   * doubling stops there. */
  uint64_t c = cap ? cap : 16;
  while (c < n) c *= 2;
  if (c > UINT32_MAX) c = UINT32_MAX;
  if (c > SIZE_MAX / sizeof(uint32_t))
    return feri_fail(FER_STATUS_SIZE_OVERFLOW, "%s: a table of %llu pages overflows size_t", fn, (unsigned long long)c);
  *out = (uint32_t)c;
  return FER_STATUS_OK;
}

static fer_status ensure_table(seq_table *s, uint32_t n, const char *fn) {
  if (n <= s->cap) return FER_STATUS_OK;
  uint32_t cap;
  fer_status st = feri_kv_pages_table_cap(s->cap, n, fn, &cap);
  if (st != FER_STATUS_OK) return st;
  uint32_t *t = realloc(s->page, (size_t)cap * sizeof *t);
  if (t == NULL) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
  s->page = t;
  s->cap = cap;
  return FER_STATUS_OK;
}

fer_status fer_kv_pages_seq_create(fer_kv_pages *p, uint32_t *out) {
  static const char *const fn = "fer_kv_pages_seq_create";
  feri_error_clear();
  if (out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: out_seq is NULL", fn);
  *out = UINT32_MAX;
  if (p == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: pages is NULL", fn);
  uint32_t id;
  fer_status st = new_slot(p, &id, fn);
  if (st != FER_STATUS_OK) return st;
  seq_table *s = &p->seq[id];
  s->alive = 1;
  s->n_pages = 0;
  s->tokens = 0;
  p->live++;
  *out = id;
  return FER_STATUS_OK;
}

fer_status fer_kv_pages_append(fer_kv_pages *p, uint32_t id, uint32_t n_tokens) {
  static const char *const fn = "fer_kv_pages_append";
  feri_error_clear();
  fer_status st = FER_STATUS_OK;
  seq_table *s = get_seq(p, id, fn, &st);
  if (s == NULL) return st;
  const uint64_t T = p->page_tokens, tokens = s->tokens + n_tokens;
  const uint64_t need = (tokens + T - 1) / T;
  if (need > UINT32_MAX) return feri_fail(FER_STATUS_SIZE_OVERFLOW, "%s: %llu pages", fn, (unsigned long long)need);
  /* A partly filled last page that another sequence shares must be copied before writing. */
  const int cow = n_tokens > 0 && s->tokens % T != 0 && p->refcount[s->page[s->n_pages - 1]] > 1;
  const uint64_t take = need - s->n_pages + (cow ? 1 : 0);
  if (take > p->n_free)
    return feri_fail(FER_STATUS_BUDGET_EXCEEDED, "%s: %llu pages needed, %u free of %u", fn, (unsigned long long)take,
                     p->n_free, p->n_pages);
  if ((st = ensure_table(s, (uint32_t)need, fn)) != FER_STATUS_OK) return st;
  if (cow) {
    uint32_t fresh = p->free_list[--p->n_free];
    p->refcount[s->page[s->n_pages - 1]]--;
    p->refcount[fresh] = 1;
    s->page[s->n_pages - 1] = fresh;
    p->copied++;
  }
  while (s->n_pages < need) {
    uint32_t pg = p->free_list[--p->n_free];
    p->refcount[pg] = 1;
    s->page[s->n_pages++] = pg;
  }
  s->tokens = tokens;
  return FER_STATUS_OK;
}

fer_status fer_kv_pages_fork(fer_kv_pages *p, uint32_t id, uint32_t *out) {
  static const char *const fn = "fer_kv_pages_fork";
  feri_error_clear();
  if (out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: out_child is NULL", fn);
  *out = UINT32_MAX;
  fer_status st = FER_STATUS_OK;
  if (get_seq(p, id, fn, &st) == NULL) return st;
  uint32_t child;
  if ((st = new_slot(p, &child, fn)) != FER_STATUS_OK) return st; /* may move p->seq */
  seq_table *parent = &p->seq[id], *c = &p->seq[child];
  if ((st = ensure_table(c, parent->n_pages, fn)) != FER_STATUS_OK) return st;
  if (parent->n_pages > 0) memcpy(c->page, parent->page, parent->n_pages * sizeof *c->page);
  for (uint32_t i = 0; i < parent->n_pages; i++) p->refcount[parent->page[i]]++;
  c->n_pages = parent->n_pages;
  c->tokens = parent->tokens;
  c->alive = 1;
  p->live++;
  *out = child;
  return FER_STATUS_OK;
}

fer_status fer_kv_pages_seq_free(fer_kv_pages *p, uint32_t id) {
  static const char *const fn = "fer_kv_pages_seq_free";
  feri_error_clear();
  fer_status st = FER_STATUS_OK;
  seq_table *s = get_seq(p, id, fn, &st);
  if (s == NULL) return st;
  for (uint32_t i = s->n_pages; i-- > 0;) /* tail first: the next append reuses the hottest page */
    if (--p->refcount[s->page[i]] == 0) p->free_list[p->n_free++] = s->page[i];
  s->alive = 0;
  s->n_pages = 0;
  s->tokens = 0;
  p->live--;
  return FER_STATUS_OK;
}

fer_status fer_kv_pages_table(const fer_kv_pages *p, uint32_t id, uint32_t *out, size_t cap, size_t *out_n,
                              uint64_t *out_tokens) {
  static const char *const fn = "fer_kv_pages_table";
  feri_error_clear();
  if (out_tokens != NULL) *out_tokens = 0;
  if (out_n == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: out_n is NULL", fn);
  *out_n = 0;
  fer_status st = FER_STATUS_OK;
  const seq_table *s = get_seq(p, id, fn, &st);
  if (s == NULL) return st;
  *out_n = s->n_pages;
  if (out_tokens != NULL) *out_tokens = s->tokens;
  if (cap < s->n_pages) return feri_fail(FER_STATUS_BUFFER_TOO_SMALL, "%s: %u entries needed", fn, s->n_pages);
  if (s->n_pages > 0 && out == NULL) {
    *out_n = 0;
    if (out_tokens != NULL) *out_tokens = 0;
    return feri_fail(FER_STATUS_NULL_ARG, "%s: pages_out is NULL", fn);
  }
  if (s->n_pages > 0) memcpy(out, s->page, s->n_pages * sizeof *out);
  return FER_STATUS_OK;
}

fer_status fer_kv_pages_get_stats(const fer_kv_pages *p, fer_kv_pages_stats *out) {
  feri_error_clear();
  if (out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_kv_pages_get_stats: out_stats is NULL");
  memset(out, 0, sizeof *out);
  if (p == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_kv_pages_get_stats: pages is NULL");
  out->n_pages = p->n_pages;
  out->free_pages = p->n_free;
  out->live_sequences = p->live;
  out->pages_copied = p->copied;
  return FER_STATUS_OK;
}
