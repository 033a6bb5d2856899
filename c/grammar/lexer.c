/* lexer.c: the NFA construction (each node built in front of its continuation, so no patch lists;
 * concatenation and alternation spines walked without recursion), UTF-8 byte sequences of
 * code-point ranges, and the lazily built DFA of lexer.h. */
#include "grammar/lexer.h"

#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "grammar/grow.h"

/* ---- NFA ------------------------------------------------------------------------------------- */

typedef struct builder {
  feri_nfa *nfa;
  const feri_rx *rx;
  fer_status err;
} builder;

static uint32_t new_state(builder *b, feri_nfa_kind kind, uint8_t lo, uint8_t hi, uint32_t next, uint32_t alt) {
  feri_nfa *n = b->nfa;
  if (b->err) return 0;
  if (n->n_states >= FERI_NFA_MAX_STATES) {
    b->err = feri_fail(FER_STATUS_INVALID_ARG, "lexer: more than %d automaton states (a repetition count too large?)",
                       FERI_NFA_MAX_STATES);
    return 0;
  }
  if (n->n_states == n->cap_states) {
    const uint32_t cap = n->cap_states ? 2 * n->cap_states : 256;
    feri_nfa_state *p = realloc(n->states, sizeof *p * cap);
    if (!p) {
      b->err = feri_fail(FER_STATUS_OUT_OF_MEMORY, "lexer: %u automaton states", cap);
      return 0;
    }
    n->states = p;
    n->cap_states = cap;
  }
  n->states[n->n_states] = (feri_nfa_state){(uint8_t)kind, lo, hi, next, alt};
  return n->n_states++;
}

/* The states for the UTF-8 encodings of code points lo .. hi (one encoded length, and every
 * continuation byte but the ranges' own a full or matching range: see utf8_ranges), leading to next;
 * several sequences are joined by SPLIT states. */
static int enc(uint32_t c, uint8_t out[4]) {
  if (c < 0x80) return out[0] = (uint8_t)c, 1;
  if (c < 0x800) return out[0] = (uint8_t)(0xC0 | c >> 6), out[1] = (uint8_t)(0x80 | (c & 63)), 2;
  if (c < 0x10000)
    return out[0] = (uint8_t)(0xE0 | c >> 12), out[1] = (uint8_t)(0x80 | ((c >> 6) & 63)), out[2] = (uint8_t)(0x80 | (c & 63)), 3;
  out[0] = (uint8_t)(0xF0 | c >> 18), out[1] = (uint8_t)(0x80 | ((c >> 12) & 63));
  out[2] = (uint8_t)(0x80 | ((c >> 6) & 63)), out[3] = (uint8_t)(0x80 | (c & 63));
  return 4;
}

/* One UTF-8 byte sequence: per byte a range, len bytes. */
typedef struct utf8_seq {
  uint8_t lo[4], hi[4];
  uint8_t len;
} utf8_seq;

typedef struct seq_list {
  utf8_seq *s;
  uint32_t n, cap;
} seq_list;

/* Appends to l the byte sequences that encode [lo, hi], in byte order (UTF-8 keeps code point
 * order). */
static void utf8_ranges(builder *b, uint32_t lo, uint32_t hi, seq_list *l, int depth) {
  if (lo > hi || b->err || depth > 64) return;
  static const uint32_t limits[3] = {0x7F, 0x7FF, 0xFFFF};
  for (int k = 0; k < 3; k++)
    if (lo <= limits[k] && hi > limits[k]) {
      utf8_ranges(b, lo, limits[k], l, depth + 1);
      utf8_ranges(b, limits[k] + 1, hi, l, depth + 1);
      return;
    }
  uint8_t a[4], z[4];
  const int len = enc(lo, a);
  (void)enc(hi, z);
  for (int i = 1; i < len; i++) { /* split until trailing continuation bytes span full ranges */
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        utf8_ranges(b, lo, lo | m, l, depth + 1);
        utf8_ranges(b, (lo | m) + 1, hi, l, depth + 1);
        return;
      }
      if ((hi & m) != m) {
        utf8_ranges(b, lo, (hi & ~m) - 1, l, depth + 1);
        utf8_ranges(b, hi & ~m, hi, l, depth + 1);
        return;
      }
    }
  }
  if (!feri_grow((void **)&l->s, &l->cap, l->n + 1, sizeof *l->s)) {
    if (!b->err) b->err = feri_fail(FER_STATUS_OUT_OF_MEMORY, "lexer: a class's byte sequences");
    return;
  }
  utf8_seq *q = &l->s[l->n++];
  memcpy(q->lo, a, 4), memcpy(q->hi, z, 4);
  q->len = (uint8_t)len;
}

/* The states for sequences s[0 .. n) (sorted, sharing their first `level` ranges) from byte
 * `level` on, leading to next: one state per distinct range at this level, its sequences' rest
 * behind it (a trie: the alternatives a DFA state holds are the distinct ranges, not every
 * sequence of a class of hundreds of ranges, such as \w). */
static uint32_t seq_trie(builder *b, const utf8_seq *s, uint32_t n, int level, uint32_t next) {
  uint32_t acc = UINT32_MAX;
  for (uint32_t i = 0; i < n && !b->err;) {
    uint32_t j = i + 1;
    while (j < n && s[j].lo[level] == s[i].lo[level] && s[j].hi[level] == s[i].hi[level]) j++;
    const uint32_t rest = s[i].len == level + 1 ? next : seq_trie(b, s + i, j - i, level + 1, next);
    const uint32_t st = new_state(b, FERI_NFA_BYTES, s[i].lo[level], s[i].hi[level], rest, 0);
    acc = acc == UINT32_MAX ? st : new_state(b, FERI_NFA_SPLIT, 0, 0, acc, st);
    i = j;
  }
  return acc;
}

/* A state that never matches (an empty set): one byte range that is empty. */
static uint32_t never(builder *b) { return new_state(b, FERI_NFA_BYTES, 1, 0, 0, 0); }

static uint32_t build(builder *b, uint32_t node, uint32_t next, int depth);

/* ---- intersection: the product of two sub-automata --------------------------------------------- */

/* The byte states reached from x without input (through SPLITs), into out (marks: a stamp per
 * state); *fin = 1 when the end marker `end` is among them. */
static uint32_t closure(builder *b, uint32_t x, uint32_t end, uint32_t *out, uint32_t cap, uint32_t *stack,
                        uint32_t *stamp, uint32_t gen, int *fin) {
  const feri_nfa_state *S = b->nfa->states;
  uint32_t n = 0, top = 0;
  *fin = 0;
  stack[top++] = x;
  stamp[x] = gen;
  while (top > 0) {
    const uint32_t s = stack[--top];
    if (s == end) {
      *fin = 1;
    } else if (S[s].kind == FERI_NFA_SPLIT) {
      if (stamp[S[s].next] != gen) stamp[S[s].next] = gen, stack[top++] = S[s].next;
      if (stamp[S[s].alt] != gen) stamp[S[s].alt] = gen, stack[top++] = S[s].alt;
    } else if (S[s].kind == FERI_NFA_BYTES && S[s].lo <= S[s].hi && n < cap) {
      out[n++] = s;
    }
  }
  return n;
}

typedef struct pair_map {
  uint64_t *keys; /* (x << 32 | y) + 1; 0 empty */
  uint32_t *vals;
  uint32_t mask, n;
} pair_map;

static uint32_t *pair_slot(pair_map *m, uint64_t key, int *found) {
  uint64_t h = key * 0x9E3779B97F4A7C15ull;
  uint32_t i = (uint32_t)(h >> 32) & m->mask;
  while (m->keys[i] && m->keys[i] != key + 1) i = (i + 1) & m->mask;
  *found = m->keys[i] != 0;
  if (!*found) m->keys[i] = key + 1, m->n++;
  return &m->vals[i];
}

/* a & b followed by next: both built to their own end markers, then the pairs of their states
 * reachable together, each pair's byte ranges intersected (a breadth-first walk, no recursion). */
static uint32_t build_and(builder *b, uint32_t na, uint32_t nb, uint32_t next, int depth) {
  const uint32_t ea = new_state(b, FERI_NFA_BYTES, 1, 0, 0, 0), eb = new_state(b, FERI_NFA_BYTES, 1, 0, 0, 0);
  const uint32_t sa = build(b, na, ea, depth + 1), sb = build(b, nb, eb, depth + 1);
  if (b->err) return 0;
  const uint32_t N = b->nfa->n_states;
  uint32_t *stamp = calloc(N, sizeof *stamp), *stack = malloc(sizeof *stack * N), *ca = malloc(sizeof *ca * N),
           *cb = malloc(sizeof *cb * N);
  uint32_t *todo = NULL, n_todo = 0, cap_todo = 0; /* pairs waiting: x, y, entry state */
  pair_map m = {calloc(1024, sizeof *m.keys), malloc(sizeof *m.vals * 1024), 1023, 0};
  uint32_t gen = 0, result = 0;
  if (!stamp || !stack || !ca || !cb || !m.keys || !m.vals) {
    b->err = feri_fail(FER_STATUS_OUT_OF_MEMORY, "lexer: an intersection of %u states", N);
    goto done;
  }
  for (uint32_t pass = 0;; pass++) {
    uint32_t x, y, entry;
    if (pass == 0) {
      x = sa, y = sb;
      entry = result = new_state(b, FERI_NFA_SPLIT, 0, 0, 0, 0);
    } else {
      if (n_todo == 0 || b->err) break;
      n_todo--;
      x = todo[3 * n_todo], y = todo[3 * n_todo + 1], entry = todo[3 * n_todo + 2];
    }
    if (b->err) break;
    int fa, fb;
    const uint32_t ka = closure(b, x, ea, ca, N, stack, stamp, ++gen, &fa);
    const uint32_t kb = closure(b, y, eb, cb, N, stack, stamp, ++gen, &fb);
    /* the entry's alternatives: next when both may end, each overlapping pair of byte states */
    uint32_t chain = fa && fb ? next : new_state(b, FERI_NFA_BYTES, 1, 0, 0, 0);
    for (uint32_t i = 0; i < ka && !b->err; i++)
      for (uint32_t j = 0; j < kb && !b->err; j++) {
        const feri_nfa_state p = b->nfa->states[ca[i]], q = b->nfa->states[cb[j]];
        const uint8_t lo = p.lo > q.lo ? p.lo : q.lo, hi = p.hi < q.hi ? p.hi : q.hi;
        if (lo > hi) continue;
        if (4 * (m.n + 1) > 3 * (m.mask + 1)) { /* grow the map at three quarters */
          const size_t size = 2 * ((size_t)m.mask + 1);
          pair_map g = {calloc(size, sizeof *g.keys), malloc(sizeof *g.vals * size), 2 * m.mask + 1, 0};
          if (!g.keys || !g.vals) {
            free(g.keys), free(g.vals);
            b->err = feri_fail(FER_STATUS_OUT_OF_MEMORY, "lexer: an intersection");
            break;
          }
          for (uint32_t k = 0; k <= m.mask; k++)
            if (m.keys[k]) {
              int f;
              *pair_slot(&g, m.keys[k] - 1, &f) = m.vals[k];
            }
          free(m.keys), free(m.vals);
          m = g;
        }
        int found;
        uint32_t *slot = pair_slot(&m, (uint64_t)p.next << 32 | q.next, &found);
        if (!found) {
          *slot = new_state(b, FERI_NFA_SPLIT, 0, 0, 0, 0);
          if (!feri_grow((void **)&todo, &cap_todo, 3 * (n_todo + 1), sizeof *todo)) {
            b->err = feri_fail(FER_STATUS_OUT_OF_MEMORY, "lexer: an intersection");
            break;
          }
          todo[3 * n_todo] = p.next, todo[3 * n_todo + 1] = q.next, todo[3 * n_todo + 2] = *slot;
          n_todo++;
        }
        const uint32_t step = new_state(b, FERI_NFA_BYTES, lo, hi, *slot, 0);
        chain = new_state(b, FERI_NFA_SPLIT, 0, 0, step, chain);
      }
    if (b->err) break;
    b->nfa->states[entry].next = chain;
    b->nfa->states[entry].alt = chain;
  }
done:
  free(stamp), free(stack), free(ca), free(cb), free(todo), free(m.keys), free(m.vals);
  return b->err ? 0 : result;
}

/* A SPLIT to `to` after digit d, before the alternatives in chain. */
static uint32_t digit_edge(builder *b, uint32_t d, uint32_t to, uint32_t chain) {
  return new_state(b, FERI_NFA_SPLIT, 0, 0, new_state(b, FERI_NFA_BYTES, (uint8_t)('0' + d), (uint8_t)('0' + d), to, 0), chain);
}

/* ---- JSON Schema's multipleOf: derivre's RemainderIs as a deterministic automaton -------------- */

/* States: the integer part with remainder r (r = coef before the first digit: the empty string is
 * not a number), or the fraction with remainder r and `scale` digits left; digits fold into r modulo
 * coef as the value times 10^exp would. Past the point, once the remaining scale is no more than
 * coef, the digits that complete a multiple are the only ones left. */
static uint32_t build_multiple(builder *b, uint32_t coef, uint32_t exp, uint32_t next) {
  uint64_t pw[11] = {1};
  for (int k = 1; k < 11; k++) pw[k] = pw[k - 1] * 10;
  if (exp > 9 || (uint64_t)coef * (exp + 2) > 200000) {
    b->err = feri_fail(FER_STATUS_UNSUPPORTED, "lexer: a multipleOf with %u digits over 10^-%u is too fine", coef, exp);
    return 0;
  }
  /* ids: integer part r in [0, coef] at r; fraction (r, scale) at coef + 1 + r * (exp + 1) + scale */
  const uint32_t n_int = coef + 1, total = n_int + coef * (exp + 1);
  uint32_t *id = malloc(sizeof *id * total);
  if (!id) {
    b->err = feri_fail(FER_STATUS_OUT_OF_MEMORY, "lexer: multipleOf automaton");
    return 0;
  }
  for (uint32_t i = 0; i < total && !b->err; i++) id[i] = new_state(b, FERI_NFA_SPLIT, 0, 0, 0, 0);
  for (uint32_t i = 0; i < total && !b->err; i++) {
    uint32_t chain = new_state(b, FERI_NFA_BYTES, 1, 0, 0, 0);
    if (i < n_int) { /* the integer part */
      const uint64_t r = i;
      if (r == 0) chain = new_state(b, FERI_NFA_SPLIT, 0, 0, next, chain);
      for (uint32_t d = 0; d < 10 && !b->err; d++) {
        const uint64_t r2 = (r * 10 + d * pw[exp]) % coef;
        chain = digit_edge(b, d, id[r2], chain);
      }
      if (exp > 0) { /* the point: on to the fraction */
        const uint32_t f = n_int + (uint32_t)r % coef * (exp + 1) + exp;
        chain = new_state(b, FERI_NFA_SPLIT, 0, 0, new_state(b, FERI_NFA_BYTES, '.', '.', id[f], 0), chain);
      }
    } else { /* the fraction: remainder r, scale digits to go */
      const uint32_t r = (i - n_int) / (exp + 1), scale = (i - n_int) % (exp + 1);
      const uint64_t need = (coef - r) % coef;
      if (scale == 0 || need >= pw[scale]) { /* scale 0 and r 0 ends; otherwise no multiple is reachable */
        if (scale == 0 && r == 0) chain = new_state(b, FERI_NFA_SPLIT, 0, 0, next, chain);
      } else if (pw[scale] <= coef) { /* the rest is forced: need, zero-padded to scale digits */
        uint32_t s = next;
        uint64_t v = need;
        for (uint32_t k = 0; k < scale; k++, v /= 10) {
          const uint8_t dg = (uint8_t)('0' + v % 10);
          s = new_state(b, FERI_NFA_BYTES, dg, dg, s, 0);
        }
        chain = new_state(b, FERI_NFA_SPLIT, 0, 0, s, chain);
      } else {
        if (r == 0) chain = new_state(b, FERI_NFA_SPLIT, 0, 0, next, chain);
        for (uint32_t d = 0; d < 10 && !b->err; d++) {
          const uint64_t r2 = (r + d * pw[scale - 1]) % coef;
          const uint32_t to = n_int + (uint32_t)r2 * (exp + 1) + scale - 1;
          chain = digit_edge(b, d, id[to], chain);
        }
      }
    }
    if (b->err) break;
    b->nfa->states[id[i]].next = b->nfa->states[id[i]].alt = chain;
  }
  const uint32_t start = b->err ? 0 : id[coef];
  free(id);
  return start;
}

static uint32_t build(builder *b, uint32_t node, uint32_t next, int depth) {
  if (b->err) return 0;
  if (depth > 400) {
    b->err = feri_fail(FER_STATUS_INVALID_ARG, "lexer: expression nested deeper than 400");
    return 0;
  }
  const feri_rx_node *n = &b->rx->nodes[node];
  switch (n->kind) {
    case FERI_RX_EMPTY: return next;
    case FERI_RX_NONE: return never(b);
    case FERI_RX_SET: {
      seq_list l = {NULL, 0, 0};
      for (uint32_t i = 0; i < n->set_len && !b->err; i++)
        utf8_ranges(b, b->rx->ranges[2 * (n->set + i)], b->rx->ranges[2 * (n->set + i) + 1], &l, 0);
      const uint32_t acc = l.n && !b->err ? seq_trie(b, l.s, l.n, 0, next) : UINT32_MAX;
      free(l.s);
      return acc == UINT32_MAX ? never(b) : acc;
    }
    case FERI_RX_CAT: { /* the left spine, right to left, without recursion along it */
      uint32_t cur = next, x = node;
      while (b->rx->nodes[x].kind == FERI_RX_CAT && !b->err) {
        cur = build(b, b->rx->nodes[x].b, cur, depth + 1);
        x = b->rx->nodes[x].a;
      }
      return build(b, x, cur, depth + 1);
    }
    case FERI_RX_ALT: {
      uint32_t acc = UINT32_MAX, x = node;
      while (b->rx->nodes[x].kind == FERI_RX_ALT && !b->err) {
        const uint32_t s = build(b, b->rx->nodes[x].b, next, depth + 1);
        acc = acc == UINT32_MAX ? s : new_state(b, FERI_NFA_SPLIT, 0, 0, s, acc);
        x = b->rx->nodes[x].a;
      }
      const uint32_t s = build(b, x, next, depth + 1);
      return acc == UINT32_MAX ? s : new_state(b, FERI_NFA_SPLIT, 0, 0, s, acc);
    }
    case FERI_RX_AND: return build_and(b, n->a, n->b, next, depth);
    case FERI_RX_MULTIPLE: return build_multiple(b, n->min, n->max, next);
    case FERI_RX_ANDNOT:
      b->err = feri_fail(FER_STATUS_INVALID_ARG, "lexer: a negation that is not a lexeme's root");
      return 0;
    default: break;
  }
  /* REPEAT: a{min} then a* or (max - min) optional copies */
  const uint32_t child = n->a, min = n->min, max = n->max;
  uint32_t cur;
  if (max == FERI_RX_INF) {
    const uint32_t loop = new_state(b, FERI_NFA_SPLIT, 0, 0, 0, next);
    const uint32_t body = build(b, child, loop, depth + 1);
    if (b->err) return 0;
    b->nfa->states[loop].next = body;
    cur = loop;
  } else {
    cur = next;
    for (uint32_t k = min; k < max && !b->err; k++)
      cur = new_state(b, FERI_NFA_SPLIT, 0, 0, build(b, child, cur, depth + 1), next);
  }
  for (uint32_t k = 0; k < min && !b->err; k++) cur = build(b, child, cur, depth + 1);
  return cur;
}

void feri_nfa_free(feri_nfa *nfa) {
  if (!nfa) return;
  free(nfa->states);
  free(nfa->start);
  free(nfa->live);
  free(nfa->keep);
  free(nfa->class_byte);
  memset(nfa, 0, sizeof *nfa);
}

/* flag[s] = 1 where a state of the seed kinds is reachable from s: a search backwards. */
static void reach_back(const feri_nfa *n, const uint32_t *deg, const uint32_t *edges, uint32_t *queue, uint8_t *flag,
                       int anti_too) {
  uint32_t head = 0, tail = 0;
  for (uint32_t s = 0; s < n->n_states; s++)
    if (n->states[s].kind == FERI_NFA_MATCH || (anti_too && n->states[s].kind == FERI_NFA_ANTI)) flag[s] = 1, queue[tail++] = s;
  while (head < tail) {
    const uint32_t s = queue[head++];
    for (uint32_t e = deg[s]; e < deg[s + 1]; e++)
      if (!flag[edges[e]]) flag[edges[e]] = 1, queue[tail++] = edges[e];
  }
}

/* live: the states that reach a MATCH; keep: those that reach a MATCH or an ANTI. */
static fer_status mark_live(feri_nfa *n) {
  const uint32_t N = n->n_states;
  uint32_t *deg = calloc((size_t)N + 1, sizeof *deg), *edges = malloc(sizeof *edges * 2 * ((size_t)N + 1)),
           *queue = malloc(sizeof *queue * ((size_t)N + 1)), *fill = malloc(sizeof *fill * ((size_t)N + 1));
  n->live = calloc(N ? N : 1, 1);
  n->keep = calloc(N ? N : 1, 1);
  if (!deg || !edges || !queue || !fill || !n->live || !n->keep) {
    free(deg), free(edges), free(queue), free(fill);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "lexer: liveness of %u states", N);
  }
  for (uint32_t s = 0; s < N; s++) { /* reverse edges, counted then placed */
    const feri_nfa_state *st = &n->states[s];
    if (st->kind == FERI_NFA_BYTES && st->lo <= st->hi) deg[st->next + 1]++;
    if (st->kind == FERI_NFA_SPLIT) deg[st->next + 1]++, deg[st->alt + 1]++;
  }
  for (uint32_t s = 0; s < N; s++) deg[s + 1] += deg[s];
  memcpy(fill, deg, sizeof *fill * ((size_t)N + 1));
  for (uint32_t s = 0; s < N; s++) {
    const feri_nfa_state *st = &n->states[s];
    if (st->kind == FERI_NFA_BYTES && st->lo <= st->hi) edges[fill[st->next]++] = s;
    if (st->kind == FERI_NFA_SPLIT) edges[fill[st->next]++] = s, edges[fill[st->alt]++] = s;
  }
  reach_back(n, deg, edges, queue, n->live, 0);
  reach_back(n, deg, edges, queue, n->keep, 1);
  free(deg), free(edges), free(queue), free(fill);
  return FER_STATUS_OK;
}

fer_status feri_nfa_build(const feri_rx *rx, const feri_lexeme_spec *lex, uint32_t n, feri_nfa *out) {
  memset(out, 0, sizeof *out);
  builder b = {out, rx, FER_STATUS_OK};
  out->n_lexemes = n;
  out->start = malloc(sizeof *out->start * (n ? n : 1));
  if (!out->start) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "lexer: %u lexemes", n);
  for (uint32_t i = 0; i < n && !b.err; i++) {
    const uint32_t m = new_state(&b, FERI_NFA_MATCH, 0, 0, 0, i);
    const feri_rx_node *root = &rx->nodes[lex[i].root];
    uint32_t start;
    if (root->kind == FERI_RX_ANDNOT) { /* a but not b: b ends in an excluded word's mark */
      const uint32_t anti_of = root->b;
      start = build(&b, root->a, m, 0);
      const uint32_t anti = new_state(&b, FERI_NFA_ANTI, 0, 0, 0, i);
      start = new_state(&b, FERI_NFA_SPLIT, 0, 0, start, build(&b, anti_of, anti, 0));
    } else {
      start = build(&b, lex[i].root, m, 0);
    }
    for (uint32_t w = 0; w < lex[i].n_except && !b.err; w++) { /* each excluded word: a chain to an ANTI */
      uint32_t s = new_state(&b, FERI_NFA_ANTI, 0, 0, 0, i);
      for (uint32_t k = lex[i].except_len[w]; k-- > 0;) {
        const uint8_t c = lex[i].except[w][k];
        s = new_state(&b, FERI_NFA_BYTES, c, c, s, 0);
      }
      start = new_state(&b, FERI_NFA_SPLIT, 0, 0, start, s);
    }
    out->start[i] = start;
  }
  fer_status st = b.err;
  if (st == FER_STATUS_OK) st = mark_live(out);
  if (st == FER_STATUS_OK) { /* byte classes: bytes no range tells apart share a class */
    uint8_t cut[257] = {0};
    for (uint32_t s = 0; s < out->n_states; s++) {
      const feri_nfa_state *q = &out->states[s];
      if (q->kind == FERI_NFA_BYTES && q->lo <= q->hi) cut[q->lo] = 1, cut[q->hi + 1] = 1;
    }
    uint32_t c = 0;
    for (int v = 0; v < 256; v++) {
      if (v > 0 && cut[v]) c++;
      out->byte_class[v] = (uint8_t)c;
    }
    out->n_classes = c + 1;
    out->class_byte = malloc(sizeof *out->class_byte * out->n_classes);
    if (!out->class_byte) st = feri_fail(FER_STATUS_OUT_OF_MEMORY, "lexer: byte classes");
    else
      for (int v = 255; v >= 0; v--) out->class_byte[out->byte_class[v]] = (uint32_t)v, out->class_size[out->byte_class[v]]++;
  }
  if (st != FER_STATUS_OK) feri_nfa_free(out);
  return st;
}

/* ---- DFA ------------------------------------------------------------------------------------- */

/* The start-state cache of a DFA: slots, and most lexeme ids its lists hold before it starts again. */
enum { START_SLOTS = 256, START_BLOB_MAX = 1 << 20 };

static uint64_t hash_set(const uint32_t *s, uint32_t n) {
  uint64_t h = 0xcbf29ce484222325ull ^ n;
  for (uint32_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ull;
  return h ^ (h >> 31);
}

void feri_dfa_free(feri_dfa *d) {
  if (!d) return;
  free(d->states), free(d->trans), free(d->sets), free(d->accs), free(d->table);
  free(d->work), free(d->stack), free(d->mark), free(d->visited);
  free(d->start_slots), free(d->start_blob);
  memset(d, 0, sizeof *d);
}


static int cmp_u32(const void *a, const void *b) {
  const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

/* Sorts NFA state ids a[0 .. n) (each < 2^22), tmp holding n more: insertion for a few, else an
 * LSD radix sort of two 11-bit digits (a DFA state of a Unicode class holds hundreds of ids, and
 * every new DFA state sorts its set: qsort's comparisons were a fifth of a mask's time). */
static void sort_ids(uint32_t *a, uint32_t n, uint32_t *tmp) {
  if (n < 48) {
    for (uint32_t i = 1; i < n; i++) {
      const uint32_t v = a[i];
      uint32_t j = i;
      while (j > 0 && a[j - 1] > v) a[j] = a[j - 1], j--;
      a[j] = v;
    }
    return;
  }
  uint32_t count[2048];
  uint32_t *src = a, *dst = tmp;
  for (int shift = 0; shift < 22; shift += 11) {
    memset(count, 0, sizeof count);
    for (uint32_t i = 0; i < n; i++) count[(src[i] >> shift) & 2047]++;
    for (uint32_t k = 0, sum = 0; k < 2048; k++) {
      const uint32_t c = count[k];
      count[k] = sum;
      sum += c;
    }
    for (uint32_t i = 0; i < n; i++) dst[count[(src[i] >> shift) & 2047]++] = src[i];
    uint32_t *t = src;
    src = dst, dst = t;
  }
  /* two passes: the sorted ids are back in a */
}

/* The DFA state of the closure of work[0 .. n) (NFA states), added when new; 0 for an empty set. */
static uint32_t intern(feri_dfa *d, uint32_t n_seed) {
  const feri_nfa *nfa = d->nfa;
  uint32_t n = 0, top = 0, seen = 0;
  for (uint32_t i = 0; i < n_seed; i++)
    if (!d->mark[d->work[i]]) d->mark[d->work[i]] = 1, d->stack[top++] = d->work[i], d->visited[seen++] = d->work[i];
  while (top > 0) { /* closure over SPLIT edges; kept: the states that can reach a MATCH or an ANTI */
    const uint32_t s = d->stack[--top];
    const feri_nfa_state *q = &nfa->states[s];
    if (q->kind == FERI_NFA_SPLIT) {
      if (!d->mark[q->next]) d->mark[q->next] = 1, d->stack[top++] = q->next, d->visited[seen++] = q->next;
      if (!d->mark[q->alt]) d->mark[q->alt] = 1, d->stack[top++] = q->alt, d->visited[seen++] = q->alt;
    } else if (nfa->keep[s]) {
      d->work[n++] = s;
    }
  }
  for (uint32_t i = 0; i < seen; i++) d->mark[d->visited[i]] = 0;
  /* alive: a state that can still reach a match, or a match not cancelled by an excluded word */
  int alive = 0;
  for (uint32_t i = 0; i < n && !alive; i++) {
    const feri_nfa_state *q = &nfa->states[d->work[i]];
    if (q->kind == FERI_NFA_BYTES) alive = nfa->live[d->work[i]];
    else if (q->kind == FERI_NFA_MATCH) {
      alive = 1;
      for (uint32_t j = 0; j < n; j++)
        if (nfa->states[d->work[j]].kind == FERI_NFA_ANTI && nfa->states[d->work[j]].alt == q->alt) alive = 0;
    }
  }
  if (!alive) return 0;
  sort_ids(d->work, n, d->stack);
  const uint64_t h = hash_set(d->work, n);
  uint32_t slot = (uint32_t)h & d->table_mask;
  for (;;) {
    const uint32_t e = d->table[slot];
    if (e == 0) break;
    const feri_dfa_state *st = &d->states[e - 1];
    if (st->set_len == n && memcmp(d->sets + st->set_off, d->work, sizeof *d->work * n) == 0) return e - 1;
    slot = (slot + 1) & d->table_mask;
  }
  if (d->n_states >= FERI_DFA_MAX_STATES) {
    if (!d->err) d->err = feri_fail(FER_STATUS_INVALID_ARG, "lexer: more than %d DFA states", FERI_DFA_MAX_STATES);
    return 0;
  }
  uint32_t n_acc = 0;
  for (uint32_t i = 0; i < n; i++) n_acc += nfa->states[d->work[i]].kind == FERI_NFA_MATCH;
  const uint32_t id = d->n_states;
  if (!feri_grow((void **)&d->states, &d->cap_states, id + 1, sizeof *d->states) ||
      !feri_grow((void **)&d->sets, &d->cap_sets, d->n_sets + n, sizeof *d->sets) ||
      !feri_grow((void **)&d->accs, &d->cap_accs, d->n_accs + n_acc + 1, sizeof *d->accs)) {
    if (!d->err) d->err = feri_fail(FER_STATUS_OUT_OF_MEMORY, "lexer: DFA state %u", id);
    return 0;
  }
  if (d->cap_states > d->cap_trans) { /* the transitions follow the states' capacity */
    int32_t *t = realloc(d->trans, sizeof *t * (size_t)d->cap_states * nfa->n_classes);
    if (!t) {
      if (!d->err) d->err = feri_fail(FER_STATUS_OUT_OF_MEMORY, "lexer: DFA transitions");
      return 0;
    }
    d->trans = t;
    d->cap_trans = d->cap_states;
  }
  for (uint32_t c = 0; c < nfa->n_classes; c++) d->trans[(size_t)id * nfa->n_classes + c] = -1;
  feri_dfa_state *st = &d->states[id];
  st->set_off = d->n_sets;
  st->set_len = n;
  memcpy(d->sets + d->n_sets, d->work, sizeof *d->work * n);
  d->n_sets += n;
  st->acc_off = d->n_accs;
  st->acc_len = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (nfa->states[d->work[i]].kind != FERI_NFA_MATCH) continue;
    const uint32_t k = nfa->states[d->work[i]].alt;
    int cancelled = 0;
    for (uint32_t j = 0; j < n; j++)
      cancelled |= nfa->states[d->work[j]].kind == FERI_NFA_ANTI && nfa->states[d->work[j]].alt == k;
    if (!cancelled) d->accs[d->n_accs++] = k;
  }
  st->acc_len = d->n_accs - st->acc_off;
  qsort(d->accs + st->acc_off, st->acc_len, sizeof *d->accs, cmp_u32);
  d->n_states++;
  if (2 * d->n_states > d->table_mask + 1) { /* rehash at half full */
    const uint32_t size = 2 * (d->table_mask + 1);
    uint32_t *tab = calloc(size, sizeof *tab);
    if (!tab) {
      if (!d->err) d->err = feri_fail(FER_STATUS_OUT_OF_MEMORY, "lexer: DFA table");
      return 0;
    }
    for (uint32_t k = 1; k < d->n_states; k++) {
      const feri_dfa_state *q = &d->states[k];
      uint32_t sl = (uint32_t)hash_set(d->sets + q->set_off, q->set_len) & (size - 1);
      while (tab[sl]) sl = (sl + 1) & (size - 1);
      tab[sl] = k + 1;
    }
    free(d->table);
    d->table = tab;
    d->table_mask = size - 1;
  } else {
    d->table[slot] = id + 1;
  }
  return id;
}

fer_status feri_dfa_init(feri_dfa *d, const feri_nfa *nfa) {
  memset(d, 0, sizeof *d);
  d->nfa = nfa;
  const size_t N = nfa->n_states ? nfa->n_states : 1;
  d->work = malloc(sizeof *d->work * N);
  d->stack = malloc(sizeof *d->stack * N);
  d->mark = calloc(N, 1);
  d->visited = malloc(sizeof *d->visited * N);
  d->table = calloc(1024, sizeof *d->table);
  d->table_mask = 1023;
  d->start_slots = calloc(START_SLOTS, sizeof *d->start_slots); /* NULL: starts not cached */
  d->states = malloc(sizeof *d->states * 64);
  d->cap_states = 64;
  d->trans = malloc(sizeof *d->trans * 64 * nfa->n_classes);
  d->cap_trans = 64;
  d->accs = malloc(sizeof *d->accs * 64); /* never NULL: the dead state's (empty) list points here */
  d->cap_accs = 64;
  if (!d->work || !d->stack || !d->mark || !d->visited || !d->table || !d->states || !d->trans || !d->accs) {
    feri_dfa_free(d);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "lexer: DFA for %u states", nfa->n_states);
  }
  /* state 0: dead, every transition to itself */
  d->states[0] = (feri_dfa_state){0, 0, 0, 0};
  for (uint32_t c = 0; c < nfa->n_classes; c++) d->trans[c] = 0;
  d->n_states = 1;
  return FER_STATUS_OK;
}

uint32_t feri_dfa_start(feri_dfa *d, const uint32_t *lex, uint32_t n) {
  const uint64_t h = hash_set(lex, n) | 1; /* never 0, the empty slot's */
  feri_dfa_start_slot *slot = d->start_slots ? &d->start_slots[h % START_SLOTS] : NULL;
  if (slot && slot->hash == h && slot->len == n && (n == 0 || memcmp(d->start_blob + slot->off, lex, sizeof *lex * n) == 0))
    return slot->state;
  uint32_t k = 0;
  for (uint32_t i = 0; i < n; i++)
    if (lex[i] < d->nfa->n_lexemes) d->work[k++] = d->nfa->start[lex[i]];
  const uint32_t state = intern(d, k);
  if (!slot || d->err) return state;
  if (d->n_start_blob + n > START_BLOB_MAX) { /* bounded: start again */
    memset(d->start_slots, 0, sizeof *d->start_slots * START_SLOTS);
    d->n_start_blob = 0;
  }
  if (!feri_grow((void **)&d->start_blob, &d->cap_start_blob, d->n_start_blob + n + 1, sizeof *d->start_blob)) return state;
  if (n > 0) memcpy(d->start_blob + d->n_start_blob, lex, sizeof *lex * n);
  *slot = (feri_dfa_start_slot){h, d->n_start_blob, n, state};
  d->n_start_blob += n;
  return state;
}

uint32_t feri_dfa_step_slow(feri_dfa *d, uint32_t s, uint8_t byte) {
  const feri_nfa *nfa = d->nfa;
  const feri_dfa_state *st = &d->states[s];
  uint32_t k = 0;
  for (uint32_t i = 0; i < st->set_len; i++) {
    const feri_nfa_state *q = &nfa->states[d->sets[st->set_off + i]];
    if (q->kind == FERI_NFA_BYTES && byte >= q->lo && byte <= q->hi) d->work[k++] = q->next;
  }
  const uint32_t t = intern(d, k);
  if (d->err) return 0; /* a failed step leaves the transition uncomputed */
  d->trans[(size_t)s * nfa->n_classes + nfa->byte_class[byte]] = (int32_t)t;
  return t;
}
