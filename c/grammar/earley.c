/* earley.c: the Earley rows of earley.h. A row is closed by walking its own items in order while
 * appending predictions and completions; a hash table tagged by generation dedups them without
 * clearing between rows. */
#include "grammar/earley.h"

#include <stdlib.h>
#include <string.h>

#include "core/status.h"

static uint32_t hash_item(feri_earley_item it) {
  uint64_t h = ((uint64_t)it.rule * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)it.dot << 32 | it.origin) * 0xC2B2AE3D27D4EB4Full;
  return (uint32_t)(h ^ (h >> 29));
}

static int ensure_table(feri_earley *p, uint32_t row_items) {
  if ((size_t)row_items * 2 <= (size_t)p->table_mask + 1) return 1;
  uint32_t size = p->table_mask + 1;
  while ((size_t)row_items * 2 > size) size *= 2;
  uint32_t *t = calloc(size, sizeof *t), *g = calloc(size, sizeof *g);
  if (!t || !g) {
    free(t), free(g);
    return 0;
  }
  free(p->table), free(p->table_gen);
  p->table = t;
  p->table_gen = g;
  p->table_mask = size - 1;
  /* re-enter the row being built */
  const uint32_t start = p->row_start[p->n_rows - 1];
  for (uint32_t i = start; i < p->n_items; i++) {
    uint32_t s = hash_item(p->items[i]) & p->table_mask;
    while (p->table_gen[s] == p->gen) s = (s + 1) & p->table_mask;
    p->table_gen[s] = p->gen;
    p->table[s] = i + 1;
  }
  return 1;
}

/* Adds an item to the row being built (the top row) unless it is there. */
static void add(feri_earley *p, feri_earley_item it) {
  if (p->err) return;
  const uint32_t start = p->row_start[p->n_rows - 1];
  if (!ensure_table(p, p->n_items - start + 1)) {
    p->err = feri_fail(FER_STATUS_OUT_OF_MEMORY, "earley: item table");
    return;
  }
  uint32_t s = hash_item(it) & p->table_mask;
  while (p->table_gen[s] == p->gen) {
    const feri_earley_item *o = &p->items[p->table[s] - 1];
    if (o->rule == it.rule && o->dot == it.dot && o->origin == it.origin) return;
    s = (s + 1) & p->table_mask;
  }
  if (p->n_items >= FERI_EARLEY_MAX_ITEMS) {
    p->err = feri_fail(FER_STATUS_INVALID_ARG, "earley: more than %d items", FERI_EARLEY_MAX_ITEMS);
    return;
  }
  if (p->n_items == p->cap_items) {
    const uint32_t cap = p->cap_items ? 2 * p->cap_items : 256;
    feri_earley_item *q = realloc(p->items, sizeof *q * cap);
    if (!q) {
      p->err = feri_fail(FER_STATUS_OUT_OF_MEMORY, "earley: %u items", cap);
      return;
    }
    p->items = q;
    p->cap_items = cap;
  }
  p->table_gen[s] = p->gen;
  p->table[s] = p->n_items + 1;
  p->items[p->n_items++] = it;
}

/* Closes the top row (row k) over predictions and completions. */
static void close_row(feri_earley *p) {
  const feri_cfg *g = p->g;
  const uint32_t k = p->n_rows - 1;
  for (uint32_t i = p->row_start[k]; i < p->n_items && !p->err; i++) {
    const feri_earley_item it = p->items[i];
    if (it.dot < g->rule_len[it.rule]) {
      const int32_t sym = g->syms[g->rule_off[it.rule] + it.dot];
      if (sym < 0) continue; /* a lexeme: scanned by the next push */
      for (uint32_t r = g->nt_rule_off[sym]; r < g->nt_rule_off[sym + 1]; r++) add(p, (feri_earley_item){g->nt_rules[r], 0, k});
      if (g->nullable[sym]) add(p, (feri_earley_item){it.rule, it.dot + 1, it.origin});
    } else { /* complete: advance the items of its origin row that expect its left-hand side */
      const uint32_t lhs = g->rule_lhs[it.rule];
      const uint32_t o0 = p->row_start[it.origin], o1 = it.origin == k ? p->n_items : p->row_start[it.origin + 1];
      for (uint32_t j = o0; j < o1 && !p->err; j++) {
        const feri_earley_item w = p->items[j];
        if (w.dot < g->rule_len[w.rule] && g->syms[g->rule_off[w.rule] + w.dot] == (int32_t)lhs)
          add(p, (feri_earley_item){w.rule, w.dot + 1, w.origin});
      }
    }
  }
}

static int new_row(feri_earley *p) {
  if (p->n_rows == p->cap_rows) {
    const uint32_t cap = p->cap_rows ? 2 * p->cap_rows : 64;
    uint32_t *q = realloc(p->row_start, sizeof *q * cap);
    uint8_t *f = q ? realloc(p->row_skip, cap) : NULL;
    if (q) p->row_start = q;
    if (f) p->row_skip = f;
    if (!q || !f) {
      p->err = feri_fail(FER_STATUS_OUT_OF_MEMORY, "earley: %u rows", cap);
      return 0;
    }
    p->cap_rows = cap;
  }
  p->row_skip[p->n_rows] = 0;
  p->row_start[p->n_rows++] = p->n_items;
  p->gen++;
  if (p->gen == 0) { /* the tags wrapped: clear them once */
    memset(p->table_gen, 0, sizeof *p->table_gen * ((size_t)p->table_mask + 1));
    p->gen = 1;
  }
  return 1;
}

void feri_earley_free(feri_earley *p) {
  if (!p) return;
  free(p->items), free(p->row_start), free(p->row_skip), free(p->table), free(p->table_gen), free(p->lex), free(p->lex_mark);
  memset(p, 0, sizeof *p);
}

fer_status feri_earley_init(feri_earley *p, const feri_cfg *g) {
  memset(p, 0, sizeof *p);
  p->g = g;
  p->table = calloc(256, sizeof *p->table);
  p->table_gen = calloc(256, sizeof *p->table_gen);
  p->table_mask = 255;
  p->lex = malloc(sizeof *p->lex * ((size_t)g->n_lexemes + 1));
  p->lex_mark = calloc((size_t)g->n_lexemes + 1, sizeof *p->lex_mark);
  if (!p->table || !p->table_gen || !p->lex || !p->lex_mark || !new_row(p)) {
    feri_earley_free(p);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "earley: parser");
  }
  add(p, (feri_earley_item){0, 0, 0});
  close_row(p);
  if (p->err) {
    const fer_status st = p->err;
    feri_earley_free(p);
    return st;
  }
  return FER_STATUS_OK;
}

static int in_sorted(const uint32_t *a, uint32_t n, uint32_t x) {
  uint32_t lo = 0, hi = n;
  while (lo < hi) {
    const uint32_t mid = (lo + hi) / 2;
    if (a[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return lo < n && a[lo] == x;
}

/* The skip lexeme alone: a row with the top row's items again, marked. */
static int push_skip(feri_earley *p) {
  const uint32_t t0 = p->row_start[p->n_rows - 1], t1 = p->n_items, n = t1 - t0;
  if (p->n_items + n > FERI_EARLEY_MAX_ITEMS) {
    p->err = feri_fail(FER_STATUS_INVALID_ARG, "earley: more than %d items", FERI_EARLEY_MAX_ITEMS);
    return 0;
  }
  if (p->n_items + n > p->cap_items) {
    uint32_t cap = p->cap_items ? p->cap_items : 256;
    while (cap < p->n_items + n) cap *= 2;
    feri_earley_item *q = realloc(p->items, sizeof *q * cap);
    if (!q) {
      p->err = feri_fail(FER_STATUS_OUT_OF_MEMORY, "earley: %u items", cap);
      return 0;
    }
    p->items = q;
    p->cap_items = cap;
  }
  if (!new_row(p)) return 0;
  memcpy(p->items + p->n_items, p->items + t0, sizeof *p->items * n);
  p->n_items += n;
  p->row_skip[p->n_rows - 1] = 1;
  return 1;
}

int feri_earley_push(feri_earley *p, const uint32_t *lex, uint32_t n) {
  if (p->err) return 0;
  const feri_cfg *g = p->g;
  if (g->skip >= 0 && in_sorted(lex, n, (uint32_t)g->skip)) {
    if (n == 1) return push_skip(p);
    /* the skip and other lexemes ended together: the others are what was read */
  }
  const uint32_t top = p->n_rows - 1, t0 = p->row_start[top], t1 = p->n_items;
  const uint32_t saved_items = p->n_items, saved_rows = p->n_rows;
  if (!new_row(p)) return 0;
  for (uint32_t i = t0; i < t1 && !p->err; i++) {
    const feri_earley_item it = p->items[i];
    if (it.dot >= g->rule_len[it.rule]) continue;
    const int32_t sym = g->syms[g->rule_off[it.rule] + it.dot];
    if (sym < 0 && (int32_t)feri_cfg_lexeme_of(sym) != g->skip && in_sorted(lex, n, feri_cfg_lexeme_of(sym)))
      add(p, (feri_earley_item){it.rule, it.dot + 1, it.origin});
  }
  close_row(p);
  if (p->err || p->n_items == p->row_start[p->n_rows - 1]) { /* nothing expected these lexemes */
    p->n_items = saved_items;
    p->n_rows = saved_rows;
    return 0;
  }
  return 1;
}

static int cmp_u32(const void *a, const void *b) {
  const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

uint32_t feri_earley_allowed(feri_earley *p) {
  const feri_cfg *g = p->g;
  uint32_t m = 0;
  if (++p->lex_gen == 0) { /* the tags wrapped: clear them once */
    memset(p->lex_mark, 0, sizeof *p->lex_mark * ((size_t)g->n_lexemes + 1));
    p->lex_gen = 1;
  }
  for (uint32_t i = p->row_start[p->n_rows - 1]; i < p->n_items; i++) { /* each lexeme once */
    const feri_earley_item it = p->items[i];
    if (it.dot >= g->rule_len[it.rule]) continue;
    const int32_t sym = g->syms[g->rule_off[it.rule] + it.dot];
    if (sym < 0 && p->lex_mark[feri_cfg_lexeme_of(sym)] != p->lex_gen) {
      p->lex_mark[feri_cfg_lexeme_of(sym)] = p->lex_gen;
      p->lex[m++] = feri_cfg_lexeme_of(sym);
    }
  }
  qsort(p->lex, m, sizeof *p->lex, cmp_u32);
  /* the skip lexeme: between two lexemes, so not in the first row nor where nothing can follow,
   * and once */
  if (g->skip >= 0 && m > 0 && p->n_rows > 1 && !p->row_skip[p->n_rows - 1] && !in_sorted(p->lex, m, (uint32_t)g->skip)) {
    uint32_t at = m;
    while (at > 0 && p->lex[at - 1] > (uint32_t)g->skip) p->lex[at] = p->lex[at - 1], at--;
    p->lex[at] = (uint32_t)g->skip;
    m++;
  }
  return m;
}

int feri_earley_accepting(const feri_earley *p) {
  const feri_cfg *g = p->g;
  for (uint32_t i = p->row_start[p->n_rows - 1]; i < p->n_items; i++) {
    const feri_earley_item it = p->items[i];
    if (it.rule == 0 && it.origin == 0 && it.dot == g->rule_len[0]) return 1;
  }
  return 0;
}
