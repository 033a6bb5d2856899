/* decode.c: ids -> text through the model's decoders, and the streaming detokenizer. */
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "tokenizer/encode_ctx.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

static bool put(feri_buf *b, const void *p, size_t n) {
  if (!feri_buf_reserve(b, b->len + n)) return false;
  memcpy(b->p + b->len, p, n);
  b->len += n;
  return true;
}

/* Character-level models: the decoder chain over token texts, as Hugging Face applies it (each
 * step maps the list of token strings to a new list; Fuse joins them). Token boundaries live in
 * `ends` (offsets into b after each token). */
/* streaming: a byte group at the very end may still grow, and whether it becomes U+FFFD depends on
 * all of it, so it stays raw and *held gets its length: the detokenizer emits nothing of it yet. */
static fer_status chain(const fer_tokenizer *t, feri_buf *b, size_t *ends, size_t n_tok, size_t base, bool streaming,
                        bool strip_start, size_t *held) {
  feri_buf tmp = {0};
  for (uint32_t d = 0; d < t->n_decoders; d++) {
    const feri_decoder_step *st = &t->decoders[d];
    if (st->kind == FERI_DEC_FUSE) {
      if (n_tok > 1) ends[0] = ends[n_tok - 1];
      n_tok = n_tok ? 1 : 0;
      continue;
    }
    tmp.len = 0;
    size_t start = base;
    size_t pending_bytes = 0; /* byte fallback: bytes of consecutive <0xAB> tokens */
    size_t pending_start = 0;
    size_t out_tok = 0;
    for (size_t k = 0; k < n_tok; k++) {
      const uint8_t *s = b->p + start;
      size_t len = ends[k] - start;
      start = ends[k];
      bool ok = true;
      if (st->kind == FERI_DEC_REPLACE) {
        ok = feri_buf_append_replaced(&tmp, s, len, st->a, st->a_len, st->b, st->b_len);
      } else if (st->kind == FERI_DEC_STRIP) {
        size_t lo = 0, hi = len;
        /* a held run (see above) at the end of the last token is not stripped until it is decided */
        bool held_end = *held > 0 && k + 1 == n_tok, held_all = held_end && len <= *held;
        for (uint32_t i = 0; strip_start && !held_all && i < st->start && hi - lo >= st->a_len && memcmp(s + lo, st->a, st->a_len) == 0; i++) lo += st->a_len;
        for (uint32_t i = 0; !held_end && i < st->stop && hi - lo >= st->a_len && memcmp(s + hi - st->a_len, st->a, st->a_len) == 0; i++) hi -= st->a_len;
        ok = put(&tmp, s + lo, hi - lo);
      } else { /* FERI_DEC_BYTE_FALLBACK */
        int byte = feri_fallback_byte(s, len);
        if (byte >= 0) {
          uint8_t v = (uint8_t)byte;
          if (pending_bytes == 0) pending_start = tmp.len;
          ok = put(&tmp, &v, 1);
          pending_bytes++;
          if (k + 1 < n_tok && feri_fallback_byte(b->p + start, ends[k + 1] - start) >= 0) continue;
          /* the group is complete: keep it if it is UTF-8, else one U+FFFD per byte */
          if (streaming && k + 1 == n_tok) {
            *held = pending_bytes; /* later steps (Fuse, Strip at the start) leave a tail group as is */
          } else if (feri_utf8_first_invalid(tmp.p + pending_start, pending_bytes) != pending_bytes) {
            tmp.len = pending_start;
            for (size_t i = 0; i < pending_bytes && ok; i++) ok = put(&tmp, "\xEF\xBF\xBD", 3);
          }
          pending_bytes = 0;
        } else {
          ok = put(&tmp, s, len);
        }
      }
      if (!ok) {
        free(tmp.p);
        return feri_fail(FER_STATUS_OUT_OF_MEMORY, "decoding");
      }
      ends[out_tok++] = base + tmp.len;
    }
    n_tok = out_tok;
    if (!feri_buf_reserve(b, base + tmp.len)) {
      free(tmp.p);
      return feri_fail(FER_STATUS_OUT_OF_MEMORY, "decoding");
    }
    if (tmp.len) memcpy(b->p + base, tmp.p, tmp.len);
    b->len = base + tmp.len;
  }
  free(tmp.p);
  return FER_STATUS_OK;
}

/* The SentencePiece chain in one pass (see fer_tokenizer.sp_decode): each run of byte tokens is
 * kept when it is UTF-8 and otherwise becomes one U+FFFD per byte; while streaming, a run at the
 * end is held back (*held) since it may still grow. Then one leading space is dropped. */
static fer_status sentencepiece_decode(const fer_tokenizer *t, const int32_t *ids, size_t n, uint32_t flags,
                                       bool streaming, bool strip_start, feri_buf *b, size_t *held) {
  size_t base = b->len, run = 0;
  for (size_t i = 0; i <= n; i++) {
    int32_t id = -1;
    if (i < n) {
      id = ids[i];
      if (id < 0 || (uint32_t)id >= t->vocab.n) {
        return feri_fail(FER_STATUS_INVALID_ARG, "id %d at position %zu is outside the vocabulary of %u", id, i, t->vocab.n);
      }
      if ((flags & FER_DECODE_SKIP_SPECIAL) && t->is_added[id] == 2) continue;
      if (t->sp_byte[id] >= 0) {
        uint8_t v = (uint8_t)t->sp_byte[id];
        if (!put(b, &v, 1)) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "decoding");
        run++;
        continue;
      }
    }
    if (run > 0) { /* a run of byte tokens ends here */
      if (i == n && streaming) {
        *held = run;
      } else if (feri_utf8_first_invalid(b->p + b->len - run, run) != run) {
        b->len -= run;
        for (size_t k = 0; k < run; k++) {
          if (!put(b, "\xEF\xBF\xBD", 3)) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "decoding");
        }
      }
      run = 0;
    }
    if (i < n) {
      size_t len;
      const uint8_t *text = feri_vocab_text(&t->sp_text, (uint32_t)id, &len);
      if (len && !put(b, text, len)) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "decoding");
    }
  }
  /* A held run that starts the text may still turn into U+FFFD: its first byte is not a space yet. */
  bool first_held = *held > 0 && b->len - base == *held;
  if (t->sp_strip && strip_start && !first_held && b->len > base && b->p[base] == ' ') {
    memmove(b->p + base, b->p + base + 1, b->len - base - 1);
    b->len--;
  }
  return FER_STATUS_OK;
}

/* Appends the decoded bytes of ids[0..n) to b (exact bytes; no replacement). strip_start: ids[0]
 * begins the sequence, so decoders that strip its start (Strip) apply. */
static fer_status decode_into(const fer_tokenizer *t, const int32_t *ids, size_t n, uint32_t flags, bool streaming,
                              bool strip_start, feri_buf *b, size_t *held) {
  *held = 0;
  /* b->p is never NULL afterwards (pointer arithmetic on it is then always defined) */
  if (!feri_buf_reserve(b, b->len + 1)) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "decoding");
  if (t->sp_decode) return sentencepiece_decode(t, ids, n, flags, streaming, strip_start, b, held);
  size_t base = b->len;
  size_t *ends = NULL;
  bool use_chain = t->n_decoders > 0;
  if (use_chain) {
    ends = malloc((n ? n : 1) * sizeof(size_t));
    if (!ends) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "decoding");
  }
  size_t n_tok = 0;
  for (size_t i = 0; i < n; i++) {
    int32_t id = ids[i];
    if (id < 0 || (uint32_t)id >= t->vocab.n) {
      free(ends);
      return feri_fail(FER_STATUS_INVALID_ARG, "id %d at position %zu is outside the vocabulary of %u", id, i,
                       t->vocab.n);
    }
    if ((flags & FER_DECODE_SKIP_SPECIAL) && t->is_added[id] == 2) continue;
    size_t len;
    const uint8_t *text = feri_vocab_text(&t->vocab, (uint32_t)id, &len);
    if (!put(b, text, len)) {
      free(ends);
      return feri_fail(FER_STATUS_OUT_OF_MEMORY, "decoding");
    }
    if (use_chain) ends[n_tok++] = b->len;
  }
  fer_status st = use_chain ? chain(t, b, ends, n_tok, base, streaming, strip_start, held) : FER_STATUS_OK;
  free(ends);
  return st;
}

/* Copies src to out with each maximal ill-formed subsequence replaced (replace = true) or as is;
 * returns the length the result needs (writes only what fits in cap). */
static size_t emit_text(const uint8_t *src, size_t n, bool replace, char *out, size_t cap) {
  size_t w = 0;
  for (size_t i = 0; i < n;) {
    size_t ok = replace ? feri_utf8_first_invalid(src + i, n - i) : n - i;
    if (w < cap) memcpy(out + w, src + i, ok <= cap - w ? ok : cap - w);
    w += ok;
    i += ok;
    if (i >= n) break;
    i += feri_utf8_maximal_subpart(src + i, n - i);
    if (w + 3 <= cap) memcpy(out + w, "\xEF\xBF\xBD", 3);
    w += 3;
  }
  return w;
}

fer_status fer_tokenizer_decode(const fer_tokenizer *tok, const int32_t *ids, size_t n, uint32_t flags, char *out,
                                size_t cap, size_t *out_len) {
  feri_error_clear();
  if (out_len) *out_len = 0;
  if (!tok || !out_len || (!ids && n > 0) || (!out && cap > 0)) {
    return feri_fail(FER_STATUS_NULL_ARG, "fer_tokenizer_decode: NULL tokenizer, ids, out or out_len");
  }
  if (flags & ~(uint32_t)(FER_DECODE_SKIP_SPECIAL | FER_DECODE_REPLACE_INVALID_UTF8)) {
    return feri_fail(FER_STATUS_INVALID_ARG, "fer_tokenizer_decode: unknown flags 0x%x", flags);
  }
  /* The common case (byte-level, exact bytes) writes straight into out. */
  if (tok->n_decoders == 0 && !(flags & FER_DECODE_REPLACE_INVALID_UTF8)) {
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
      int32_t id = ids[i];
      if (id < 0 || (uint32_t)id >= tok->vocab.n) {
        return feri_fail(FER_STATUS_INVALID_ARG, "id %d at position %zu is outside the vocabulary of %u", id, i,
                         tok->vocab.n);
      }
      if ((flags & FER_DECODE_SKIP_SPECIAL) && tok->is_added[id] == 2) continue;
      size_t len;
      const uint8_t *text = feri_vocab_text(&tok->vocab, (uint32_t)id, &len);
      if (w < cap) memcpy(out + w, text, len < cap - w ? len : cap - w);
      w += len;
    }
    *out_len = w;
    return w > cap ? feri_fail(FER_STATUS_BUFFER_TOO_SMALL, "%zu bytes do not fit in %zu", w, cap) : FER_STATUS_OK;
  }
  feri_buf b = {0};
  size_t held;
  fer_status st = decode_into(tok, ids, n, flags, false, true, &b, &held);
  if (st != FER_STATUS_OK) {
    free(b.p);
    return st;
  }
  size_t need = emit_text(b.p, b.len, flags & FER_DECODE_REPLACE_INVALID_UTF8, out, cap);
  free(b.p);
  *out_len = need;
  return need > cap ? feri_fail(FER_STATUS_BUFFER_TOO_SMALL, "%zu bytes do not fit in %zu", need, cap) : FER_STATUS_OK;
}

fer_status fer_tokenizer_token_to_id(const fer_tokenizer *tok, const char *text, size_t len, int32_t *out_id) {
  feri_error_clear();
  if (out_id) *out_id = -1;
  if (!tok || !out_id || (!text && len > 0)) return feri_fail(FER_STATUS_NULL_ARG, "fer_tokenizer_token_to_id: NULL argument");
  int32_t id = feri_vocab_find(&tok->vocab, (const uint8_t *)text, len);
  if (id < 0) return feri_fail(FER_STATUS_INVALID_ARG, "no token has the text '%.*s'", (int)(len > 40 ? 40 : len), text);
  *out_id = id;
  return FER_STATUS_OK;
}

fer_status fer_tokenizer_get_info(const fer_tokenizer *tok, fer_tokenizer_info *out_info) {
  feri_error_clear();
  if (out_info) memset(out_info, 0, sizeof(*out_info)); /* zeroed before any check that can fail */
  if (!tok || !out_info) return feri_fail(FER_STATUS_NULL_ARG, "fer_tokenizer_get_info: NULL argument");
  out_info->vocab_size = tok->vocab.n;
  out_info->n_merges = tok->n_merges;
  out_info->n_added = tok->n_added;
  out_info->byte_level = tok->byte_level;
  out_info->bos_id = tok->bos_id;
  out_info->eos_id = tok->eos_id;
  out_info->pad_id = tok->pad_id;
  out_info->unk_id = tok->unk_id;
  return FER_STATUS_OK;
}

fer_status fer_tokenizer_free(fer_tokenizer *tok) {
  feri_error_clear();
  if (!tok) return FER_STATUS_OK;
  unsigned live = atomic_load(&tok->live_dependents);
  if (live)
    return feri_fail(FER_STATUS_BUSY, "%u detokenizers or grammar vocabularies of this tokenizer are still alive", live);
  feri_tokenizer_destroy(tok);
  return FER_STATUS_OK;
}

/* ---- streaming ---------------------------------------------------------------------------- */

/* The detokenizer decodes a short window of ids: the last token already emitted (so decoders that
 * look at neighbours, such as byte fallback groups and Strip on the first token, see the same
 * context as a full decode) plus the tokens after it, and emits the new complete characters. */
struct fer_detokenizer {
  const fer_tokenizer *tok;
  uint32_t flags;
  int32_t *window;
  size_t n, cap;
  size_t emitted; /* bytes of decode(window) already given out */
  size_t held;    /* bytes at the end of decode(window) that a byte group still holds back */
  bool at_start;  /* the window begins the sequence (decoders that strip its start apply) */
  feri_buf text;
};

fer_status fer_detokenizer_create(const fer_tokenizer *tok, uint32_t flags, fer_detokenizer **out) {
  feri_error_clear();
  if (out) *out = NULL;
  if (!tok || !out) return feri_fail(FER_STATUS_NULL_ARG, "fer_detokenizer_create: NULL argument");
  if (flags & ~(uint32_t)(FER_DECODE_SKIP_SPECIAL | FER_DECODE_REPLACE_INVALID_UTF8)) {
    return feri_fail(FER_STATUS_INVALID_ARG, "fer_detokenizer_create: unknown flags 0x%x", flags);
  }
  for (uint32_t i = 0; i < tok->n_decoders; i++) {
    if (tok->decoders[i].kind == FERI_DEC_STRIP && tok->decoders[i].stop > 0) {
      return feri_fail(FER_STATUS_UNSUPPORTED, "streaming a decoder that strips the end of the text (Strip stop %u)",
                       tok->decoders[i].stop);
    }
  }
  fer_detokenizer *d = calloc(1, sizeof(*d));
  if (!d) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "detokenizer");
  d->tok = tok;
  d->flags = flags;
  d->at_start = true;
  atomic_fetch_add(&((fer_tokenizer *)tok)->live_dependents, 1);
  *out = d;
  return FER_STATUS_OK;
}

void fer_detokenizer_free(fer_detokenizer *d) {
  if (!d) return;
  atomic_fetch_sub(&((fer_tokenizer *)d->tok)->live_dependents, 1);
  free(d->window);
  free(d->text.p);
  free(d);
}

/* Decodes the window (exact bytes) into d->text. */
static fer_status decode_window(fer_detokenizer *d, size_t n, bool streaming) {
  d->text.len = 0;
  return decode_into(d->tok, d->window, n, d->flags & FER_DECODE_SKIP_SPECIAL, streaming, d->at_start, &d->text,
                     &d->held);
}

fer_status fer_detokenizer_push(fer_detokenizer *d, int32_t id, char *out, size_t cap, size_t *out_len) {
  feri_error_clear();
  if (out_len) *out_len = 0;
  if (!d || !out_len || (!out && cap > 0)) return feri_fail(FER_STATUS_NULL_ARG, "fer_detokenizer_push: NULL argument");
  if (id < 0 || (uint32_t)id >= d->tok->vocab.n) {
    return feri_fail(FER_STATUS_INVALID_ARG, "id %d is outside the vocabulary of %u", id, d->tok->vocab.n);
  }
  if (d->n == d->cap) {
    size_t cap2 = d->cap ? d->cap * 2 : 8;
    int32_t *w = realloc(d->window, cap2 * sizeof(*w));
    if (!w) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "detokenizer");
    d->window = w;
    d->cap = cap2;
  }
  d->window[d->n] = id; /* not committed until the output fits */
  fer_status st = decode_window(d, d->n + 1, true);
  if (st != FER_STATUS_OK) return st;
  size_t tail = feri_utf8_incomplete_tail(d->text.p, d->text.len);
  bool holding = d->held > 0;
  if (d->held > tail) tail = d->held < d->text.len ? d->held : d->text.len;
  size_t complete = d->text.len - tail;
  size_t fresh = complete > d->emitted ? complete - d->emitted : 0;
  bool replace = d->flags & FER_DECODE_REPLACE_INVALID_UTF8;
  size_t need = emit_text(d->text.p + d->emitted, fresh, replace, out, cap);
  *out_len = need;
  if (need > cap) return feri_fail(FER_STATUS_BUFFER_TOO_SMALL, "%zu bytes do not fit in %zu", need, cap);
  d->n++;
  d->emitted += fresh;
  if (tail == 0 && !holding && d->n > 1) {
    /* Everything is out: keep only the last token as context for the next one. */
    d->window[0] = d->window[d->n - 1];
    d->n = 1;
    d->at_start = false;
    st = decode_window(d, 1, true);
    if (st != FER_STATUS_OK) return st;
    d->emitted = d->text.len;
  }
  return FER_STATUS_OK;
}

fer_status fer_detokenizer_flush(fer_detokenizer *d, char *out, size_t cap, size_t *out_len) {
  feri_error_clear();
  if (out_len) *out_len = 0;
  if (!d || !out_len || (!out && cap > 0)) return feri_fail(FER_STATUS_NULL_ARG, "fer_detokenizer_flush: NULL argument");
  size_t need = 0;
  if (d->n > 0) {
    /* the end of the sequence: decoded as fer_tokenizer_decode would (no more bytes to wait for) */
    fer_status st = decode_window(d, d->n, false);
    if (st != FER_STATUS_OK) return st;
    size_t rest = d->text.len > d->emitted ? d->text.len - d->emitted : 0;
    need = emit_text(d->text.p + d->emitted, rest, d->flags & FER_DECODE_REPLACE_INVALID_UTF8, out, cap);
  }
  *out_len = need;
  if (need > cap) return feri_fail(FER_STATUS_BUFFER_TOO_SMALL, "%zu bytes do not fit in %zu", need, cap);
  d->n = 0;
  d->emitted = 0;
  d->at_start = true;
  return FER_STATUS_OK;
}
