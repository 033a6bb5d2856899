/* encode.c: text -> ids. Added tokens are split off first (leftmost, then longest), each text
 * segment between them is normalized, pre-tokenized by the regex steps, and each piece goes through
 * the model: BPE merges by rank with a binary heap (no rescans), a per-tokenizer word cache in
 * front of it, or WordLevel lookup. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/status.h"
#include "tokenizer/encode_ctx.h"
#include "tokenizer/normalize.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

/* Upper bound of regex work per match: input that would backtrack catastrophically is refused
 * (UNSUPPORTED) rather than taking unbounded time. */
#define MATCH_LIMIT 10000000u

bool feri_buf_reserve(feri_buf *b, size_t need) {
  if (need <= b->cap) return true;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < need) {
    if (cap > SIZE_MAX / 2) return false;
    cap *= 2;
  }
  uint8_t *p = realloc(b->p, cap);
  if (!p) return false;
  b->p = p;
  b->cap = cap;
  return true;
}

bool feri_buf_append_replaced(feri_buf *b, const uint8_t *s, size_t n, const uint8_t *a, size_t a_len,
                              const uint8_t *b_text, size_t b_len) {
  for (size_t i = 0; i < n;) {
    bool hit = a_len > 0 && i + a_len <= n && memcmp(s + i, a, a_len) == 0;
    const uint8_t *piece = hit ? b_text : s + i;
    size_t k = hit ? b_len : 1;
    if (!feri_buf_reserve(b, b->len + k)) return false;
    if (k) memcpy(b->p + b->len, piece, k);
    b->len += k;
    i += hit ? a_len : 1;
  }
  return true;
}

feri_encode_ctx *feri_encode_ctx_new(void) {
  feri_encode_ctx *c = calloc(1, sizeof(*c));
  if (!c) return NULL;
  c->match = pcre2_match_data_create(1, NULL);
  c->match_ctx = pcre2_match_context_create(NULL);
  c->jit_stack = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, NULL);
  c->cache = calloc(FERI_CACHE_SLOTS, sizeof(feri_cache_slot));
  if (!c->match || !c->match_ctx || !c->cache) {
    feri_encode_ctx_free(c);
    return NULL;
  }
  pcre2_set_match_limit(c->match_ctx, MATCH_LIMIT);
  if (c->jit_stack) pcre2_jit_stack_assign(c->match_ctx, NULL, c->jit_stack);
  return c;
}

void feri_encode_ctx_free(feri_encode_ctx *c) {
  if (!c) return;
  pcre2_match_data_free(c->match);
  pcre2_match_context_free(c->match_ctx);
  if (c->jit_stack) pcre2_jit_stack_free(c->jit_stack);
  free(c->cache);
  free(c->syms);
  free(c->heap);
  free(c->spm_syms);
  free(c->spm_heap);
  for (int i = 0; i < 2; i++) free(c->norm[i].p);
  for (int i = 0; i < FERI_PRETOK_MAX_STEPS; i++) free(c->prefixed[i].p);
  free(c);
}

static inline void emit(feri_encode_ctx *c, int32_t id) {
  if (c->n < c->cap) c->ids[c->n] = id;
  c->n++;
}

static fer_status ctx_fail_oom(feri_encode_ctx *c, const char *what) {
  if (c->status == FER_STATUS_OK) c->status = feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s", what);
  return c->status;
}

/* ---- BPE ---------------------------------------------------------------------------------- */

static void heap_push(uint64_t *h, size_t *n, uint64_t v) {
  size_t i = (*n)++;
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (h[p] <= v) break;
    h[i] = h[p];
    i = p;
  }
  h[i] = v;
}

static uint64_t heap_pop(uint64_t *h, size_t *n) {
  uint64_t top = h[0];
  uint64_t v = h[--(*n)];
  size_t i = 0;
  for (;;) {
    size_t l = 2 * i + 1;
    if (l >= *n) break;
    size_t m = (l + 1 < *n && h[l + 1] < h[l]) ? l + 1 : l;
    if (h[m] >= v) break;
    h[i] = h[m];
    i = m;
  }
  h[i] = v;
  return top;
}

/* Pushes the merge of the pair starting at symbol i, if there is one. Heap keys order by rank,
 * then by position: the lowest rank merges first, the leftmost among equals. */
static void push_pair(const fer_tokenizer *t, feri_encode_ctx *c, size_t *hn, int32_t i) {
  int32_t j = c->syms[i].next;
  if (j < 0) return;
  uint64_t m = feri_merges_find(&t->merges, c->syms[i].id, c->syms[j].id);
  if (m != UINT64_MAX) heap_push(c->heap, hn, (m & 0xFFFFFFFF00000000ull) | (uint32_t)i);
}

/* A symbol that merges with nothing and is left out of the output. */
#define SYM_DROPPED (UINT32_MAX - 1)

static void add_symbol(feri_encode_ctx *c, size_t *n, uint32_t id) {
  c->syms[*n].id = id;
  c->syms[*n].prev = (int32_t)*n - 1;
  c->syms[*n].next = (int32_t)*n + 1;
  (*n)++;
}

/* Initial symbols of a word: one per byte (byte-level) or per character, with byte fallback or
 * the unknown token for characters outside the vocabulary. Returns the count. */
static size_t initial_symbols(const fer_tokenizer *t, feri_encode_ctx *c, const uint8_t *w, size_t len) {
  size_t n = 0;
  bool last_unk = false;
  for (size_t i = 0; i < len;) {
    int32_t id;
    size_t k = 1;
    if (t->byte_level) {
      id = t->byte_id[w[i]];
    } else {
      uint32_t cp;
      k = feri_utf8_decode(w + i, len - i, &cp);
      if (k == 0) k = 1;
      id = feri_vocab_find(&t->vocab, w + i, k);
      if (id < 0 && t->byte_fallback) {
        bool all = true;
        for (size_t b = 0; b < k; b++) all = all && t->fallback_id[w[i + b]] >= 0;
        if (all) {
          for (size_t b = 0; b < k; b++) add_symbol(c, &n, (uint32_t)t->fallback_id[w[i + b]]);
          i += k;
          last_unk = false;
          continue;
        }
      }
    }
    i += k;
    if (id < 0) {
      if (t->model_unk_id < 0) {
        /* No unknown token: the character is dropped. Hugging Face drops it before merging;
         * llama.cpp after, so there it still keeps its neighbours from merging. */
        if (t->unknown_is_barrier) add_symbol(c, &n, SYM_DROPPED);
        continue;
      }
      if (t->fuse_unk && last_unk) continue;
      id = t->model_unk_id;
      last_unk = true;
    } else {
      last_unk = false;
    }
    add_symbol(c, &n, (uint32_t)id);
  }
  if (n > 0) c->syms[n - 1].next = -1;
  return n;
}

static void bpe_word(const fer_tokenizer *t, feri_encode_ctx *c, const uint8_t *w, size_t len) {
  uint32_t tag = 0;
  feri_cache_slot *slot = NULL;
  if (len <= FERI_CACHE_WORD) {
    uint64_t h = feri_hash_bytes(w, len);
    slot = &c->cache[h & (FERI_CACHE_SLOTS - 1)];
    tag = (uint32_t)(h >> 32) | 1;
    if (slot->tag == tag && slot->word_len == len && memcmp(slot->word, w, len) == 0) {
      for (uint32_t i = 0; i < slot->n_ids; i++) emit(c, slot->ids[i]);
      return;
    }
  }
  /* after the cache: a cached word skips this second hash of its bytes */
  if (t->ignore_merges || len == 1) {
    int32_t whole = feri_vocab_find(&t->vocab, w, len);
    if (whole >= 0 && !t->is_added[whole]) {
      emit(c, whole);
      return;
    }
  }
  if (len > c->syms_cap) {
    size_t cap = len + 64;
    feri_bpe_sym *s = realloc(c->syms, cap * sizeof(*s));
    uint64_t *h = s ? realloc(c->heap, cap * 3 * sizeof(*h)) : NULL;
    if (s) c->syms = s;
    if (h) c->heap = h;
    if (!s || !h) {
      ctx_fail_oom(c, "BPE word");
      return;
    }
    c->syms_cap = cap;
  }
  size_t n = initial_symbols(t, c, w, len);
  if (n == 0) return;
  size_t hn = 0;
  for (size_t i = 0; i + 1 < n; i++) push_pair(t, c, &hn, (int32_t)i);
  while (hn > 0) {
    uint64_t top = heap_pop(c->heap, &hn);
    int32_t i = (int32_t)(uint32_t)top;
    feri_bpe_sym *a = &c->syms[i];
    if (a->id == UINT32_MAX || a->next < 0) continue;
    feri_bpe_sym *b = &c->syms[a->next];
    uint64_t m = feri_merges_find(&t->merges, a->id, b->id);
    if (m == UINT64_MAX || (m >> 32) != (top >> 32)) continue; /* stale: the pair changed */
    a->id = (uint32_t)m;
    b->id = UINT32_MAX;
    a->next = b->next;
    if (b->next >= 0) c->syms[b->next].prev = i;
    if (a->prev >= 0) push_pair(t, c, &hn, a->prev);
    push_pair(t, c, &hn, i);
  }
  uint32_t count = 0;
  size_t first_out = c->n;
  for (int32_t i = 0; i >= 0; i = c->syms[i].next) {
    if (c->syms[i].id == SYM_DROPPED) continue;
    emit(c, (int32_t)c->syms[i].id);
    count++;
  }
  if (slot && count <= FERI_CACHE_IDS && c->n <= c->cap) {
    slot->tag = tag;
    slot->word_len = (uint8_t)len;
    slot->n_ids = (uint8_t)count;
    memcpy(slot->word, w, len);
    memcpy(slot->ids, c->ids + first_out, count * sizeof(int32_t));
  }
}

/* ---- SPM (llama.cpp's SentencePiece BPE) --------------------------------------------------- */

/* Heap order: the highest score first, the leftmost among equal scores. */
static bool spm_before(const feri_spm_bigram *a, const feri_spm_bigram *b) {
  return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void spm_push(feri_spm_bigram *h, size_t *n, feri_spm_bigram v) {
  size_t i = (*n)++;
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (!spm_before(&v, &h[p])) break;
    h[i] = h[p];
    i = p;
  }
  h[i] = v;
}

static feri_spm_bigram spm_pop(feri_spm_bigram *h, size_t *n) {
  feri_spm_bigram top = h[0], v = h[--(*n)];
  size_t i = 0;
  for (;;) {
    size_t l = 2 * i + 1;
    if (l >= *n) break;
    size_t m = (l + 1 < *n && spm_before(&h[l + 1], &h[l])) ? l + 1 : l;
    if (!spm_before(&h[m], &v)) break;
    h[i] = h[m];
    i = m;
  }
  h[i] = v;
  return top;
}

/* The merge of symbols left and left.next, when their text is a token. */
static void spm_try_pair(const fer_tokenizer *t, feri_encode_ctx *c, const uint8_t *s, size_t *hn, int32_t left) {
  if (left < 0 || c->spm_syms[left].next < 0) return;
  const feri_spm_sym *a = &c->spm_syms[left], *b = &c->spm_syms[a->next];
  int32_t id = feri_vocab_find(&t->vocab, s + a->start, (size_t)(a->len + b->len));
  if (id < 0) return;
  feri_spm_bigram g = {t->scores[id], left, a->len + b->len};
  spm_push(c->spm_heap, hn, g);
}

/* One symbol's ids: its token, or its bytes as <0xAB> tokens (or single-byte tokens). */
static void spm_emit(const fer_tokenizer *t, feri_encode_ctx *c, const uint8_t *s, size_t len) {
  int32_t id = feri_vocab_find(&t->vocab, s, len);
  if (id >= 0) {
    emit(c, id);
    return;
  }
  for (size_t i = 0; i < len; i++) {
    int32_t b = t->fallback_id[s[i]] >= 0 ? t->fallback_id[s[i]] : t->byte_id[s[i]];
    if (b >= 0) emit(c, b);
  }
}

static void spm_piece(const fer_tokenizer *t, feri_encode_ctx *c, const uint8_t *s, size_t len) {
  if (len > INT32_MAX / 2) {
    if (c->status == FER_STATUS_OK) c->status = feri_fail(FER_STATUS_SIZE_OVERFLOW, "a segment of %zu bytes", len);
    return;
  }
  if (len > c->spm_cap) {
    size_t cap = len + 64;
    feri_spm_sym *sy = realloc(c->spm_syms, cap * sizeof(*sy));
    if (sy) c->spm_syms = sy;
    feri_spm_bigram *h = sy ? realloc(c->spm_heap, cap * 3 * sizeof(*h)) : NULL; /* n - 1 pairs, then at most two per merge */
    if (h) c->spm_heap = h;
    if (!sy || !h) {
      ctx_fail_oom(c, "SPM segment");
      return;
    }
    c->spm_cap = cap;
  }
  /* one symbol per character (its lead byte's length, clipped to the text) */
  int32_t n = 0;
  for (size_t i = 0; i < len; n++) {
    size_t k = s[i] < 0x80 ? 1 : s[i] >= 0xF0 ? 4 : s[i] >= 0xE0 ? 3 : s[i] >= 0xC0 ? 2 : 1;
    if (k > len - i) k = len - i;
    c->spm_syms[n] = (feri_spm_sym){(int32_t)i, (int32_t)k, n - 1, -1};
    if (n > 0) c->spm_syms[n - 1].next = n;
    i += k;
  }
  size_t hn = 0;
  for (int32_t i = 0; i + 1 < n; i++) spm_try_pair(t, c, s, &hn, i);
  while (hn > 0) {
    feri_spm_bigram g = spm_pop(c->spm_heap, &hn);
    feri_spm_sym *a = &c->spm_syms[g.left];
    if (a->len == 0 || a->next < 0) continue;
    feri_spm_sym *b = &c->spm_syms[a->next];
    if (a->len + b->len != g.size) continue; /* stale: one side has grown since */
    a->len += b->len;
    b->len = 0;
    a->next = b->next;
    if (b->next >= 0) c->spm_syms[b->next].prev = g.left;
    spm_try_pair(t, c, s, &hn, a->prev);
    spm_try_pair(t, c, s, &hn, g.left);
  }
  for (int32_t i = 0; i >= 0 && n > 0; i = c->spm_syms[i].next) {
    spm_emit(t, c, s + c->spm_syms[i].start, (size_t)c->spm_syms[i].len);
  }
}

static void model_piece(const fer_tokenizer *t, feri_encode_ctx *c, const uint8_t *w, size_t len) {
  if (len == 0) return;
  if (t->model == FERI_MODEL_BPE) {
    bpe_word(t, c, w, len);
    return;
  }
  if (t->model == FERI_MODEL_SPM) {
    spm_piece(t, c, w, len);
    return;
  }
  int32_t id = feri_vocab_find(&t->vocab, w, len);
  if (id < 0) id = t->model_unk_id;
  if (id < 0) {
    if (c->status == FER_STATUS_OK) {
      c->status = feri_fail(FER_STATUS_INVALID_ARG, "word '%.*s' is not in the vocabulary and there is no unknown token",
                            (int)(len > 40 ? 40 : len), (const char *)w);
    }
    return;
  }
  emit(c, id);
}

/* ---- pre-tokenization --------------------------------------------------------------------- */

typedef struct span_state {
  size_t start, end;
  bool delim, have;
} span_state;

static void pretok(const fer_tokenizer *t, feri_encode_ctx *c, uint32_t level, const uint8_t *s, size_t n);

/* Feeds one span (match or gap) of a split into the behaviour's state machine, which passes the
 * finished pieces to the next step. Mirrors SplitDelimiterBehavior of Hugging Face tokenizers. */
static void split_span(const fer_tokenizer *t, feri_encode_ctx *c, uint32_t level, const uint8_t *s, span_state *st,
                       size_t a, size_t b, bool delim) {
  int behavior = t->pretok[level].behavior;
  switch (behavior) {
    case FERI_SPLIT_ISOLATED: pretok(t, c, level + 1, s + a, b - a); return;
    case FERI_SPLIT_REMOVED:
      if (!delim) pretok(t, c, level + 1, s + a, b - a);
      return;
    case FERI_SPLIT_MERGED_WITH_PREVIOUS:
      if (delim && !st->delim && st->have) {
        st->end = b;
      } else {
        if (st->have) pretok(t, c, level + 1, s + st->start, st->end - st->start);
        st->start = a, st->end = b, st->have = true;
      }
      st->delim = delim;
      return;
    case FERI_SPLIT_MERGED_WITH_NEXT:
      /* a delimiter joins the piece right after it, unless that is a delimiter too */
      if (st->have && st->delim && !delim) {
        pretok(t, c, level + 1, s + st->start, b - st->start);
        st->have = false;
        return;
      }
      if (st->have) pretok(t, c, level + 1, s + st->start, st->end - st->start);
      if (delim) {
        st->start = a, st->end = b, st->have = true, st->delim = true;
      } else {
        st->have = false;
        pretok(t, c, level + 1, s + a, b - a);
      }
      return;
    default: /* FERI_SPLIT_CONTIGUOUS */
      if (st->have && delim == st->delim) {
        st->end = b;
      } else {
        if (st->have) pretok(t, c, level + 1, s + st->start, st->end - st->start);
        st->start = a, st->end = b, st->have = true, st->delim = delim;
      }
      return;
  }
}

static void regex_split(const fer_tokenizer *t, feri_encode_ctx *c, uint32_t level, const uint8_t *s, size_t n) {
  const feri_pretok_step *step = &t->pretok[level];
  span_state st = {0, 0, false, false};
  size_t pos = 0, last = 0;
  while (pos < n && c->status == FER_STATUS_OK) {
    int rc = pcre2_match(step->regex, s, n, pos, PCRE2_NO_UTF_CHECK, c->match, c->match_ctx);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[120];
      pcre2_get_error_message(rc, msg, sizeof(msg));
      c->status = feri_fail(FER_STATUS_UNSUPPORTED, "pre-tokenizer regex gave up at byte %zu: %s", pos,
                            (const char *)msg);
      return;
    }
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->match);
    size_t ms = ov[0], me = ov[1];
    if (me <= ms) { /* empty match: move on by one character */
      uint32_t cp;
      size_t k = feri_utf8_decode(s + ms, n - ms, &cp);
      pos = ms + (k ? k : 1);
      continue;
    }
    if (ms > last) split_span(t, c, level, s, &st, last, ms, step->invert);
    split_span(t, c, level, s, &st, ms, me, !step->invert);
    last = pos = me;
  }
  if (last < n) split_span(t, c, level, s, &st, last, n, step->invert);
  if (st.have) pretok(t, c, level + 1, s + st.start, st.end - st.start);
}

static void pretok(const fer_tokenizer *t, feri_encode_ctx *c, uint32_t level, const uint8_t *s, size_t n) {
  if (n == 0 || c->status != FER_STATUS_OK) return;
  if (level == t->n_pretok) {
    model_piece(t, c, s, n);
    return;
  }
  const feri_pretok_step *step = &t->pretok[level];
  if (step->kind == FERI_PRE_PREFIX_SPACE) {
    if (s[0] == ' ') {
      pretok(t, c, level + 1, s, n);
      return;
    }
    feri_buf *b = &c->prefixed[level];
    if (!feri_buf_reserve(b, n + 1)) {
      ctx_fail_oom(c, "prefix space");
      return;
    }
    b->p[0] = ' ';
    memcpy(b->p + 1, s, n);
    pretok(t, c, level + 1, b->p, n + 1);
    return;
  }
  regex_split(t, c, level, s, n);
}

/* ---- added tokens ------------------------------------------------------------------------- */

/* Unicode White_Space, as Rust's char::is_whitespace (lstrip/rstrip of added tokens). */
static bool is_white(uint32_t cp) {
  return (cp >= 9 && cp <= 13) || cp == ' ' || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

/* A word character next to a single_word token keeps it from matching: letters and numbers of any
 * script, and '_' (Rust's char::is_alphanumeric, as the reference checks). */
static bool is_word_char(uint32_t cp) {
  if (cp == '_') return true;
  utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
  return (c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO) || (c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_NO);
}

static bool word_before(const uint8_t *s, size_t i) {
  if (i == 0) return false;
  size_t p = i - 1;
  while (p > 0 && (s[p] & 0xC0) == 0x80 && i - p < 4) p--;
  uint32_t cp;
  return feri_utf8_decode(s + p, i - p, &cp) == i - p && is_word_char(cp);
}

static bool word_after(const uint8_t *s, size_t n, size_t i) {
  uint32_t cp;
  return i < n && feri_utf8_decode(s + i, n - i, &cp) > 0 && is_word_char(cp);
}

/* Finds the leftmost, then longest, added token of set in s[from..n). */
static const feri_added_token *find_added(const feri_added_set *set, const uint8_t *s, size_t n, size_t from,
                                          bool allow_special, size_t *ms, size_t *me) {
  for (size_t i = from; i < n; i++) {
    uint32_t lo = set->first[s[i]], hi = set->first[s[i] + 1];
    for (uint32_t k = lo; k < hi; k++) {
      const feri_added_token *a = set->tokens[k];
      if (a->len > n - i || memcmp(s + i, a->content, a->len) != 0) continue;
      if (a->special && !allow_special) continue;
      if (a->single_word && (word_before(s, i) || word_after(s, n, i + a->len))) continue;
      size_t start = i, end = i + a->len;
      if (a->lstrip) {
        while (start > from) {
          size_t p = start - 1;
          while (p > from && (s[p] & 0xC0) == 0x80) p--;
          uint32_t cp;
          if (feri_utf8_decode(s + p, start - p, &cp) == 0 || !is_white(cp)) break;
          start = p;
        }
      }
      if (a->rstrip) {
        while (end < n) {
          uint32_t cp;
          size_t k2 = feri_utf8_decode(s + end, n - end, &cp);
          if (k2 == 0 || !is_white(cp)) break;
          end += k2;
        }
      }
      *ms = start;
      *me = end;
      return a;
    }
  }
  return NULL;
}

static void normalized_segment(const fer_tokenizer *t, feri_encode_ctx *c, const uint8_t *s, size_t n,
                               bool allow_special) {
  const uint8_t *norm;
  size_t len;
  fer_status st = feri_normalize(t, c, s, n, &norm, &len);
  if (st != FER_STATUS_OK) {
    if (c->status == FER_STATUS_OK) c->status = st;
    return;
  }
  if (t->added_normalized.n == 0) {
    pretok(t, c, 0, norm, len);
    return;
  }
  size_t pos = 0, ms, me;
  const feri_added_token *a;
  while ((a = find_added(&t->added_normalized, norm, len, pos, allow_special, &ms, &me)) != NULL) {
    pretok(t, c, 0, norm + pos, ms - pos);
    emit(c, (int32_t)a->id);
    pos = me;
  }
  pretok(t, c, 0, norm + pos, len - pos);
}

static void encode_text(const fer_tokenizer *t, feri_encode_ctx *c, const uint8_t *s, size_t n, uint32_t flags) {
  bool allow_special = !(flags & FER_ENCODE_NO_SPECIAL_SPLIT);
  size_t pos = 0, ms, me;
  const feri_added_token *a;
  while (c->status == FER_STATUS_OK &&
         (a = find_added(&t->added_raw, s, n, pos, allow_special, &ms, &me)) != NULL) {
    if (ms > pos) normalized_segment(t, c, s + pos, ms - pos, allow_special);
    emit(c, (int32_t)a->id);
    pos = me;
  }
  if (pos < n && c->status == FER_STATUS_OK) normalized_segment(t, c, s + pos, n - pos, allow_special);
}

/* Each maximal ill-formed subsequence becomes U+FFFD. */
static uint8_t *replace_invalid(const uint8_t *s, size_t n, size_t *out_len) {
  if (n > SIZE_MAX / 3) return NULL;
  uint8_t *out = malloc(n * 3 + 1);
  if (!out) return NULL;
  size_t w = 0;
  for (size_t i = 0; i < n;) {
    size_t ok = feri_utf8_first_invalid(s + i, n - i);
    memcpy(out + w, s + i, ok);
    w += ok;
    i += ok;
    if (i >= n) break;
    i += feri_utf8_maximal_subpart(s + i, n - i);
    memcpy(out + w, "\xEF\xBF\xBD", 3);
    w += 3;
  }
  *out_len = w;
  return out;
}

fer_status fer_tokenizer_encode(const fer_tokenizer *tok, const char *text, size_t len, uint32_t flags,
                                int32_t *ids, size_t cap, size_t *out_n) {
  feri_error_clear();
  if (out_n) *out_n = 0;
  if (!tok || !out_n || (!text && len > 0) || (!ids && cap > 0)) {
    return feri_fail(FER_STATUS_NULL_ARG, "fer_tokenizer_encode: NULL tokenizer, text, ids or out_n");
  }
  if (flags & ~(uint32_t)(FER_ENCODE_ADD_SPECIAL | FER_ENCODE_REPLACE_INVALID_UTF8 | FER_ENCODE_NO_SPECIAL_SPLIT)) {
    return feri_fail(FER_STATUS_INVALID_ARG, "fer_tokenizer_encode: unknown flags 0x%x", flags);
  }
  const uint8_t *s = (const uint8_t *)text;
  uint8_t *replaced = NULL;
  size_t bad = feri_utf8_first_invalid(s, len);
  if (bad < len) {
    if (!(flags & FER_ENCODE_REPLACE_INVALID_UTF8)) {
      return feri_fail(FER_STATUS_INVALID_UTF8, "text is not UTF-8 at byte %zu (0x%02X)", bad, s[bad]);
    }
    replaced = replace_invalid(s, len, &len);
    if (!replaced) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "replacing ill-formed UTF-8");
    s = replaced;
  }
  fer_tokenizer *mut = (fer_tokenizer *)tok; /* only the atomic spare-context slot is written */
  feri_encode_ctx *c = atomic_exchange(&mut->spare_ctx, NULL);
  if (!c) c = feri_encode_ctx_new();
  if (!c) {
    free(replaced);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "encoder context");
  }
  c->ids = ids;
  c->cap = cap;
  c->n = 0;
  c->status = FER_STATUS_OK;
  if (flags & FER_ENCODE_ADD_SPECIAL) {
    for (uint32_t i = 0; i < tok->n_prefix; i++) emit(c, tok->prefix_ids[i]);
  }
  encode_text(tok, c, s, len, flags);
  if (flags & FER_ENCODE_ADD_SPECIAL) {
    for (uint32_t i = 0; i < tok->n_suffix; i++) emit(c, tok->suffix_ids[i]);
  }
  fer_status st = c->status;
  size_t n = c->n;
  c->ids = NULL;
  feri_encode_ctx *expected = NULL;
  if (!atomic_compare_exchange_strong(&mut->spare_ctx, &expected, c)) feri_encode_ctx_free(c);
  free(replaced);
  if (st != FER_STATUS_OK) return st;
  *out_n = n;
  if (n > cap) return feri_fail(FER_STATUS_BUFFER_TOO_SMALL, "%zu ids do not fit in %zu", n, cap);
  return FER_STATUS_OK;
}
