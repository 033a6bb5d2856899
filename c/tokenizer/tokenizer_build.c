/* tokenizer_build.c: the parts of loading that tokenizer.json and GGUF share: the byte-level
 * alphabet, regex compilation, added-token sets, and freeing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "tokenizer/encode_ctx.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_classes.h"
#include "tokenizer/utf8.h"

/* GPT-2's pre-tokenizer (ByteLevel use_regex = true). */
const char feri_gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* bytes_to_unicode: printable Latin-1 bytes stand for themselves; the other 68 bytes take the
 * characters from U+0100 upward in byte order, so every byte has a visible character. */
static int byte_is_self(uint8_t b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
}

uint32_t feri_byte_to_char(uint8_t b) {
  if (byte_is_self(b)) return b;
  uint32_t k = 0;
  for (uint32_t x = 0; x < b; x++) k += !byte_is_self((uint8_t)x);
  return 0x100 + k;
}

int feri_char_to_byte(uint32_t cp) {
  if (cp < 0x100) return byte_is_self((uint8_t)cp) ? (int)cp : -1;
  if (cp >= 0x100 + 68) return -1;
  uint32_t k = cp - 0x100;
  for (int x = 0; x < 256; x++) {
    if (!byte_is_self((uint8_t)x)) {
      if (k == 0) return x;
      k--;
    }
  }
  return -1;
}

size_t feri_byte_level_unmap(const uint8_t *text, size_t len, uint8_t *out) {
  size_t n = 0;
  for (size_t i = 0; i < len;) {
    uint32_t cp;
    size_t k = feri_utf8_decode(text + i, len - i, &cp);
    if (k == 0) return SIZE_MAX;
    int b = feri_char_to_byte(cp);
    if (b < 0) return SIZE_MAX;
    out[n++] = (uint8_t)b;
    i += k;
  }
  return n;
}

fer_status feri_tokenizer_alloc(fer_tokenizer **out) {
  fer_tokenizer *t = calloc(1, sizeof(*t));
  if (!t) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "tokenizer");
  t->unk_id = t->model_unk_id = t->bos_id = t->eos_id = t->pad_id = -1;
  atomic_init(&t->spare_ctx, NULL);
  atomic_init(&t->live_dependents, 0);
  *out = t;
  return FER_STATUS_OK;
}

/* The split patterns are written for another regex engine than PCRE2, whose Unicode tables are
 * newer than Debian 12's PCRE2 10.42 (Unicode 14.0), and whose \s and \w differ from PCRE2's. So the
 * classes the patterns use are spelled out, per profile:
 * - \s and \S: Unicode White_Space exactly (Oniguruma's \s; PCRE2's lacks U+0085);
 * - \p{L}, \p{N}, \d: PCRE2's sets plus the code points the profile's Unicode version adds;
 * - \w and \W: Oniguruma's word characters (Alphabetic, marks, decimal digits, connector
 *   punctuation, Join_Control; PCRE2's \w is letters, numbers and '_'), plus the same additions.
 * Profiles: Oniguruma (Hugging Face tokenizers, tokenizer.json) has Unicode 16.0 tables: the
 * additions come from unicode_classes.h (scripts/tokenizer/gen_unicode_classes.py). llama.cpp
 * (GGUF) has its own Unicode 15.1 tables: the Unicode 15.0 additions below were measured against
 * ICU 72's data, and 15.1 adds CJK Extension I (U+2EBF0-U+2EE5D). */
static const char WHITE_SPACE[] =
    "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";
#define WORD_BASE "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}"
#define CJK_EXT_I "\\x{2EBF0}-\\x{2EE5D}"

typedef struct unicode_classes {
  const char *letters, *numbers, *digits, *word;
} unicode_classes;

static const unicode_classes ONIGURUMA_16 = {
    "\\p{L}" FERI_U16_ADDED_L,
    "\\p{N}" FERI_U16_ADDED_N,
    "\\p{Nd}" FERI_U16_ADDED_ND,
    WORD_BASE FERI_U16_ADDED_WORD,
};

static const unicode_classes LLAMA_CPP_15_1 = {
    "\\p{L}\\x{1123F}-\\x{11240}\\x{11F02}\\x{11F04}-\\x{11F10}\\x{11F12}-\\x{11F33}\\x{1342F}\\x{13441}-\\x{13446}"
    "\\x{1B132}\\x{1B155}\\x{1DF25}-\\x{1DF2A}\\x{1E030}-\\x{1E06D}\\x{1E4D0}-\\x{1E4EB}\\x{2B739}\\x{31350}-\\x{323AF}" CJK_EXT_I,
    "\\p{N}\\x{11F50}-\\x{11F59}\\x{1D2C0}-\\x{1D2D3}\\x{1E4F0}-\\x{1E4F9}",
    "\\p{Nd}\\x{11F50}-\\x{11F59}\\x{1E4F0}-\\x{1E4F9}",
    WORD_BASE "\\x{0CF3}\\x{0ECE}\\x{10EFD}-\\x{10EFF}\\x{1123F}-\\x{11241}"
    "\\x{11F00}-\\x{11F10}\\x{11F12}-\\x{11F3A}\\x{11F3E}-\\x{11F42}\\x{11F50}-\\x{11F59}\\x{1342F}\\x{13440}-\\x{13455}"
    "\\x{1B132}\\x{1B155}\\x{1DF25}-\\x{1DF2A}\\x{1E030}-\\x{1E06D}\\x{1E08F}\\x{1E4D0}-\\x{1E4F9}\\x{2B739}\\x{31350}-\\x{323AF}" CJK_EXT_I,
};

/* Appends a class body: bare inside a class, wrapped ([...] or [^...]) outside. */
static size_t put_class(char *out, const char *body, int in_class, int negate) {
  size_t n = 0, len = strlen(body);
  if (!in_class) {
    out[n++] = '[';
    if (negate) out[n++] = '^';
  }
  memcpy(out + n, body, len);
  n += len;
  if (!in_class) out[n++] = ']';
  return n;
}

static char *adapt_pattern(const char *pattern, size_t len, const unicode_classes *uc, size_t *out_len) {
  /* each escape grows to at most one class body plus three bytes */
  size_t longest = strlen(uc->word) > strlen(uc->letters) ? strlen(uc->word) : strlen(uc->letters);
  char *out = malloc((len / 2 + 1) * (longest + sizeof(WHITE_SPACE) + 4) + len + 1);
  if (!out) return NULL;
  size_t n = 0;
  int in_class = 0;
  for (size_t i = 0; i < len; i++) {
    char c = pattern[i];
    if (c == '\\' && i + 1 < len) {
      char e = pattern[i + 1];
      bool prop = (e == 'p' || e == 'P') && i + 4 < len && pattern[i + 2] == '{' && pattern[i + 4] == '}' &&
                  (pattern[i + 3] == 'L' || pattern[i + 3] == 'N') && !(e == 'P' && in_class);
      if (e == 's' || (e == 'S' && !in_class)) {
        n += put_class(out + n, WHITE_SPACE, in_class, e == 'S');
        i++;
      } else if (e == 'w' || (e == 'W' && !in_class)) {
        n += put_class(out + n, uc->word, in_class, e == 'W');
        i++;
      } else if (e == 'd') {
        n += put_class(out + n, uc->digits, in_class, false);
        i++;
      } else if (prop) {
        n += put_class(out + n, pattern[i + 3] == 'L' ? uc->letters : uc->numbers, in_class, e == 'P');
        i += 4;
      } else {
        out[n++] = c;
        out[n++] = e;
        i++;
      }
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = 1;
      out[n++] = c;
      /* a ']' or '^]' right after the opening bracket is a literal */
      if (i + 1 < len && pattern[i + 1] == '^') out[n++] = pattern[++i];
      if (i + 1 < len && pattern[i + 1] == ']') out[n++] = pattern[++i];
      continue;
    }
    if (c == ']' && in_class) in_class = 0;
    out[n++] = c;
  }
  out[n] = 0;
  *out_len = n;
  return out;
}

static fer_status push_step(fer_tokenizer *t, feri_pretok_step step) {
  feri_pretok_step *s = realloc(t->pretok, (t->n_pretok + 1) * sizeof(*s));
  if (!s) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "pre-tokenizer");
  t->pretok = s;
  s[t->n_pretok++] = step;
  return FER_STATUS_OK;
}

fer_status feri_tokenizer_add_split(fer_tokenizer *t, const char *pattern, size_t len, int behavior, bool invert) {
  size_t wlen;
  char *wide = adapt_pattern(pattern, len, t->llama_cpp_unicode ? &LLAMA_CPP_15_1 : &ONIGURUMA_16, &wlen);
  if (!wide) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "regex");
  int err;
  PCRE2_SIZE at;
  pcre2_code *re = pcre2_compile((PCRE2_SPTR)wide, wlen, PCRE2_UTF | PCRE2_UCP, &err, &at, NULL);
  free(wide);
  if (!re) {
    PCRE2_UCHAR msg[160];
    pcre2_get_error_message(err, msg, sizeof(msg));
    return feri_fail(FER_STATUS_UNSUPPORTED, "pre-tokenizer regex '%.*s' does not compile at %zu: %s",
                     (int)(len > 120 ? 120 : len), pattern, (size_t)at, (const char *)msg);
  }
  pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* the interpreter remains when JIT is unavailable */
  feri_pretok_step step = {.kind = FERI_PRE_SPLIT, .behavior = behavior, .invert = invert, .regex = re};
  fer_status st = push_step(t, step);
  if (st != FER_STATUS_OK) pcre2_code_free(re);
  return st;
}

fer_status feri_tokenizer_add_prefix_space(fer_tokenizer *t) {
  feri_pretok_step step = {.kind = FERI_PRE_PREFIX_SPACE};
  return push_step(t, step);
}

int feri_fallback_byte(const uint8_t *s, size_t n) {
  if (n != 6 || s[0] != '<' || s[1] != '0' || s[2] != 'x' || s[5] != '>') return -1;
  int v = 0;
  for (int i = 3; i < 5; i++) {
    int c = s[i], d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

/* Recognises the SentencePiece decoder chain and precomputes what its one-pass decode needs. */
static fer_status prepare_sentencepiece_decode(fer_tokenizer *t) {
  const feri_decoder_step *d = t->decoders;
  uint32_t n = t->n_decoders;
  bool chain = (n == 3 || n == 4) && d[0].kind == FERI_DEC_REPLACE && d[0].a_len > 0 && d[1].kind == FERI_DEC_BYTE_FALLBACK &&
               d[2].kind == FERI_DEC_FUSE;
  bool strip = n == 4 && d[3].kind == FERI_DEC_STRIP && d[3].a_len == 1 && d[3].start == 1 && d[3].stop == 0;
  if (!chain || (n == 4 && !strip)) return FER_STATUS_OK;
  t->sp_byte = malloc((t->vocab.n ? t->vocab.n : 1) * sizeof(int16_t));
  fer_status st = t->sp_byte ? feri_vocab_init(&t->sp_text, t->vocab.n) : feri_fail(FER_STATUS_OUT_OF_MEMORY, "decoder");
  feri_buf tmp = {0};
  for (uint32_t id = 0; id < t->vocab.n && st == FER_STATUS_OK; id++) {
    size_t len;
    const uint8_t *s = feri_vocab_text(&t->vocab, id, &len);
    t->sp_byte[id] = (int16_t)feri_fallback_byte(s, len);
    tmp.len = 0;
    if (!feri_buf_append_replaced(&tmp, s, len, d[0].a, d[0].a_len, d[0].b, d[0].b_len)) {
      st = feri_fail(FER_STATUS_OUT_OF_MEMORY, "decoder");
    } else if (tmp.len > 0) {
      st = feri_vocab_set_text_only(&t->sp_text, id, tmp.p, tmp.len);
    }
  }
  free(tmp.p);
  if (st != FER_STATUS_OK) return st;
  t->sp_decode = true;
  t->sp_strip = strip && d[3].a[0] == ' ';
  if (strip && !t->sp_strip) t->sp_decode = false; /* only a space strip is taken on the fast path */
  return FER_STATUS_OK;
}

static int compare_added(const void *a, const void *b) {
  const feri_added_token *x = *(feri_added_token *const *)a, *y = *(feri_added_token *const *)b;
  if (x->content[0] != y->content[0]) return x->content[0] < y->content[0] ? -1 : 1;
  if (x->len != y->len) return x->len > y->len ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}

static fer_status build_set(fer_tokenizer *t, feri_added_set *set, bool normalized) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < t->n_added; i++) n += t->added[i].normalized == normalized;
  set->tokens = calloc(n ? n : 1, sizeof(*set->tokens));
  if (!set->tokens) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "added tokens");
  for (uint32_t i = 0; i < t->n_added; i++) {
    if (t->added[i].normalized == normalized) set->tokens[set->n++] = &t->added[i];
  }
  qsort(set->tokens, set->n, sizeof(*set->tokens), compare_added);
  uint32_t k = 0;
  for (uint32_t b = 0; b <= 256; b++) {
    while (k < set->n && set->tokens[k]->content[0] < b) k++;
    set->first[b] = k;
  }
  return FER_STATUS_OK;
}

fer_status feri_tokenizer_finish(fer_tokenizer *t) {
  uint32_t n = t->vocab.n;
  t->is_added = calloc(n ? n : 1, 1);
  if (!t->is_added) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "tokenizer");
  for (uint32_t i = 0; i < t->n_added; i++) t->is_added[t->added[i].id] = t->added[i].special ? 2 : 1;
  for (int b = 0; b < 256; b++) {
    uint8_t byte = (uint8_t)b;
    t->byte_id[b] = feri_vocab_find(&t->vocab, &byte, 1);
    char name[8];
    snprintf(name, sizeof(name), "<0x%02X>", b);
    t->fallback_id[b] = t->byte_fallback ? feri_vocab_find(&t->vocab, (const uint8_t *)name, 6) : -1;
  }
  fer_status st = build_set(t, &t->added_raw, false);
  if (st == FER_STATUS_OK) st = build_set(t, &t->added_normalized, true);
  if (st == FER_STATUS_OK) st = prepare_sentencepiece_decode(t);
  return st;
}

void feri_tokenizer_destroy(fer_tokenizer *t) {
  if (!t) return;
  feri_encode_ctx_free(atomic_load(&t->spare_ctx));
  feri_vocab_free(&t->vocab);
  feri_merges_free(&t->merges);
  free(t->is_added);
  free(t->scores);
  free(t->sp_byte);
  feri_vocab_free(&t->sp_text);
  for (uint32_t i = 0; i < t->n_norms; i++) {
    free(t->norms[i].a);
    free(t->norms[i].b);
  }
  free(t->norms);
  for (uint32_t i = 0; i < t->n_pretok; i++) pcre2_code_free(t->pretok[i].regex);
  free(t->pretok);
  for (uint32_t i = 0; i < t->n_decoders; i++) {
    free(t->decoders[i].a);
    free(t->decoders[i].b);
  }
  free(t->decoders);
  for (uint32_t i = 0; i < t->n_added; i++) free(t->added[i].content);
  free(t->added);
  free(t->added_raw.tokens);
  free(t->added_normalized.tokens);
  free(t->prefix_ids);
  free(t->suffix_ids);
  free(t);
}
