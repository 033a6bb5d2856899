/* load_json.c: a Hugging Face tokenizer.json through cJSON. Components ferrite does not implement
 * are refused by name (UNSUPPORTED) instead of being ignored, so a tokenizer never silently
 * encodes differently from its reference. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/file.h"
#include "core/status.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

static const char *type_of(const cJSON *o) {
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");
  return cJSON_IsString(t) ? t->valuestring : NULL;
}

static bool flag(const cJSON *o, const char *key, bool dflt) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (cJSON_IsBool(v)) return cJSON_IsTrue(v);
  return dflt;
}

static bool is_null_or_absent(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return v == NULL || cJSON_IsNull(v);
}

/* A JSON number that is an integer in [0, max]; -1 otherwise. */
static int64_t int_value(const cJSON *v, int64_t max) {
  if (!cJSON_IsNumber(v)) return -1;
  double d = v->valuedouble;
  if (!(d >= 0 && d <= (double)max) || d != (double)(int64_t)d) return -1;
  return (int64_t)d;
}

static uint8_t *dup_bytes(const char *s, size_t *len) {
  *len = strlen(s);
  uint8_t *p = malloc(*len + 1);
  if (p) memcpy(p, s, *len + 1);
  return p;
}

/* {"String": "x"} or {"Regex": "x"}: returns the text and whether it is a regex. */
static const char *pattern_of(const cJSON *o, bool *is_regex) {
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "pattern");
  const cJSON *s = cJSON_GetObjectItemCaseSensitive(p, "String");
  const cJSON *r = cJSON_GetObjectItemCaseSensitive(p, "Regex");
  *is_regex = cJSON_IsString(r);
  if (cJSON_IsString(s)) return s->valuestring;
  if (cJSON_IsString(r)) return r->valuestring;
  return NULL;
}

/* Escapes a literal for PCRE2 (\Q...\E cannot hold \E). */
static char *quote_literal(const char *s) {
  size_t n = strlen(s);
  char *q = malloc(n * 2 + 1);
  if (!q) return NULL;
  size_t w = 0;
  for (size_t i = 0; i < n; i++) {
    if (strchr("\\^$.|?*+()[]{}", s[i])) q[w++] = '\\';
    q[w++] = s[i];
  }
  q[w] = 0;
  return q;
}

/* ---- normalizers -------------------------------------------------------------------------- */

static fer_status add_norm(fer_tokenizer *t, feri_normalizer nm) {
  feri_normalizer *p = realloc(t->norms, (t->n_norms + 1) * sizeof(*p));
  if (!p) {
    free(nm.a);
    free(nm.b);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "normalizers");
  }
  t->norms = p;
  p[t->n_norms++] = nm;
  return FER_STATUS_OK;
}

static fer_status load_normalizer(fer_tokenizer *t, const cJSON *o, int depth) {
  if (o == NULL || cJSON_IsNull(o)) return FER_STATUS_OK;
  const char *type = type_of(o);
  if (!type) return feri_fail(FER_STATUS_BAD_FORMAT, "normalizer without a type");
  if (depth > 8) return feri_fail(FER_STATUS_UNSUPPORTED, "normalizers nested deeper than 8");
  feri_normalizer nm = {0};
  if (strcmp(type, "Sequence") == 0) {
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(o, "normalizers");
    if (!cJSON_IsArray(list)) return feri_fail(FER_STATUS_BAD_FORMAT, "normalizer Sequence without a list");
    const cJSON *e;
    cJSON_ArrayForEach(e, list) {
      fer_status st = load_normalizer(t, e, depth + 1);
      if (st != FER_STATUS_OK) return st;
    }
    return FER_STATUS_OK;
  }
  if (strcmp(type, "NFC") == 0) nm.kind = FERI_NORM_NFC;
  else if (strcmp(type, "NFD") == 0) nm.kind = FERI_NORM_NFD;
  else if (strcmp(type, "NFKC") == 0) nm.kind = FERI_NORM_NFKC;
  else if (strcmp(type, "NFKD") == 0) nm.kind = FERI_NORM_NFKD;
  else if (strcmp(type, "Lowercase") == 0) nm.kind = FERI_NORM_LOWERCASE;
  else if (strcmp(type, "Prepend") == 0) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "prepend");
    if (!cJSON_IsString(p)) return feri_fail(FER_STATUS_BAD_FORMAT, "Prepend normalizer without text");
    nm.kind = FERI_NORM_PREPEND;
    nm.a = dup_bytes(p->valuestring, &nm.a_len);
    if (!nm.a) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "normalizer");
  } else if (strcmp(type, "Replace") == 0) {
    bool is_regex;
    const char *pat = pattern_of(o, &is_regex);
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(o, "content");
    if (!pat || !cJSON_IsString(content)) return feri_fail(FER_STATUS_BAD_FORMAT, "Replace normalizer without pattern or content");
    if (is_regex) return feri_fail(FER_STATUS_UNSUPPORTED, "Replace normalizer with a regex pattern");
    nm.kind = FERI_NORM_REPLACE;
    nm.a = dup_bytes(pat, &nm.a_len);
    nm.b = dup_bytes(content->valuestring, &nm.b_len);
    if (!nm.a || !nm.b) {
      free(nm.a);
      free(nm.b);
      return feri_fail(FER_STATUS_OUT_OF_MEMORY, "normalizer");
    }
  } else {
    return feri_fail(FER_STATUS_UNSUPPORTED, "normalizer '%s'", type);
  }
  return add_norm(t, nm);
}

/* ---- pre-tokenizers ----------------------------------------------------------------------- */

static int behavior_of(const cJSON *o, int *out) {
  const cJSON *b = cJSON_GetObjectItemCaseSensitive(o, "behavior");
  static const char *names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
  if (!cJSON_IsString(b)) return 0;
  for (int i = 0; i < 5; i++) {
    if (strcmp(b->valuestring, names[i]) == 0) {
      *out = i;
      return 1;
    }
  }
  return 0;
}

static fer_status load_pretok(fer_tokenizer *t, const cJSON *o, int depth) {
  if (o == NULL || cJSON_IsNull(o)) return FER_STATUS_OK;
  const char *type = type_of(o);
  if (!type) return feri_fail(FER_STATUS_BAD_FORMAT, "pre-tokenizer without a type");
  if (depth > 8) return feri_fail(FER_STATUS_UNSUPPORTED, "pre-tokenizers nested deeper than 8");
  if (t->n_pretok >= 12) return feri_fail(FER_STATUS_UNSUPPORTED, "more than 12 pre-tokenizer steps");
  if (strcmp(type, "Sequence") == 0) {
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(o, "pretokenizers");
    if (!cJSON_IsArray(list)) return feri_fail(FER_STATUS_BAD_FORMAT, "pre-tokenizer Sequence without a list");
    const cJSON *e;
    cJSON_ArrayForEach(e, list) {
      fer_status st = load_pretok(t, e, depth + 1);
      if (st != FER_STATUS_OK) return st;
    }
    return FER_STATUS_OK;
  }
  if (strcmp(type, "ByteLevel") == 0) {
    t->byte_level = true;
    fer_status st = FER_STATUS_OK;
    if (flag(o, "add_prefix_space", true)) st = feri_tokenizer_add_prefix_space(t);
    if (st == FER_STATUS_OK && flag(o, "use_regex", true)) {
      st = feri_tokenizer_add_split(t, feri_gpt2_pattern, strlen(feri_gpt2_pattern), FERI_SPLIT_ISOLATED, false);
    }
    return st;
  }
  if (strcmp(type, "Split") == 0) {
    bool is_regex;
    const char *pat = pattern_of(o, &is_regex);
    int behavior;
    if (!pat) return feri_fail(FER_STATUS_BAD_FORMAT, "Split pre-tokenizer without a pattern");
    if (!behavior_of(o, &behavior)) return feri_fail(FER_STATUS_BAD_FORMAT, "Split pre-tokenizer with an unknown behavior");
    bool invert = flag(o, "invert", false);
    if (is_regex) return feri_tokenizer_add_split(t, pat, strlen(pat), behavior, invert);
    char *q = quote_literal(pat);
    if (!q) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "pre-tokenizer");
    fer_status st = feri_tokenizer_add_split(t, q, strlen(q), behavior, invert);
    free(q);
    return st;
  }
  if (strcmp(type, "Whitespace") == 0) {
    static const char re[] = "\\w+|[^\\w\\s]+";
    return feri_tokenizer_add_split(t, re, strlen(re), FERI_SPLIT_REMOVED, true);
  }
  if (strcmp(type, "WhitespaceSplit") == 0) {
    static const char re[] = "\\s+";
    return feri_tokenizer_add_split(t, re, strlen(re), FERI_SPLIT_REMOVED, false);
  }
  if (strcmp(type, "Digits") == 0) {
    static const char re[] = "\\p{N}";
    bool individual = flag(o, "individual_digits", false);
    return feri_tokenizer_add_split(t, re, strlen(re), individual ? FERI_SPLIT_ISOLATED : FERI_SPLIT_CONTIGUOUS, false);
  }
  return feri_fail(FER_STATUS_UNSUPPORTED, "pre-tokenizer '%s'", type);
}

/* ---- decoders ----------------------------------------------------------------------------- */

static fer_status add_decoder(fer_tokenizer *t, feri_decoder_step d) {
  feri_decoder_step *p = realloc(t->decoders, (t->n_decoders + 1) * sizeof(*p));
  if (!p) {
    free(d.a);
    free(d.b);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "decoders");
  }
  t->decoders = p;
  p[t->n_decoders++] = d;
  return FER_STATUS_OK;
}

static fer_status load_decoder(fer_tokenizer *t, const cJSON *o, int depth) {
  if (o == NULL || cJSON_IsNull(o)) return FER_STATUS_OK;
  const char *type = type_of(o);
  if (!type) return feri_fail(FER_STATUS_BAD_FORMAT, "decoder without a type");
  if (depth > 8 || t->n_decoders >= 16) return feri_fail(FER_STATUS_UNSUPPORTED, "decoder chain too deep");
  feri_decoder_step d = {0};
  if (strcmp(type, "Sequence") == 0) {
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(o, "decoders");
    if (!cJSON_IsArray(list)) return feri_fail(FER_STATUS_BAD_FORMAT, "decoder Sequence without a list");
    const cJSON *e;
    cJSON_ArrayForEach(e, list) {
      fer_status st = load_decoder(t, e, depth + 1);
      if (st != FER_STATUS_OK) return st;
    }
    return FER_STATUS_OK;
  }
  if (strcmp(type, "ByteLevel") == 0) {
    t->byte_level = true; /* token texts are unmapped to bytes at load; nothing to do per call */
    return FER_STATUS_OK;
  }
  if (strcmp(type, "Fuse") == 0) {
    d.kind = FERI_DEC_FUSE;
  } else if (strcmp(type, "ByteFallback") == 0) {
    d.kind = FERI_DEC_BYTE_FALLBACK;
  } else if (strcmp(type, "Replace") == 0) {
    bool is_regex;
    const char *pat = pattern_of(o, &is_regex);
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(o, "content");
    if (!pat || is_regex || !cJSON_IsString(content)) {
      return feri_fail(is_regex ? FER_STATUS_UNSUPPORTED : FER_STATUS_BAD_FORMAT, "Replace decoder needs a string pattern and content");
    }
    d.kind = FERI_DEC_REPLACE;
    d.a = dup_bytes(pat, &d.a_len);
    d.b = dup_bytes(content->valuestring, &d.b_len);
    if (!d.a || !d.b) {
      free(d.a);
      free(d.b);
      return feri_fail(FER_STATUS_OUT_OF_MEMORY, "decoder");
    }
  } else if (strcmp(type, "Strip") == 0) {
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(o, "content");
    int64_t start = int_value(cJSON_GetObjectItemCaseSensitive(o, "start"), 1 << 20);
    int64_t stop = int_value(cJSON_GetObjectItemCaseSensitive(o, "stop"), 1 << 20);
    if (!cJSON_IsString(content) || start < 0 || stop < 0) return feri_fail(FER_STATUS_BAD_FORMAT, "Strip decoder fields");
    d.kind = FERI_DEC_STRIP;
    d.a = dup_bytes(content->valuestring, &d.a_len);
    if (!d.a) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "decoder");
    if (d.a_len == 0) {
      free(d.a);
      return feri_fail(FER_STATUS_BAD_FORMAT, "Strip decoder with empty content");
    }
    d.start = (uint32_t)start;
    d.stop = (uint32_t)stop;
  } else {
    return feri_fail(FER_STATUS_UNSUPPORTED, "decoder '%s'", type);
  }
  return add_decoder(t, d);
}

/* ---- model and added tokens --------------------------------------------------------------- */

/* Largest id named by the model vocabulary and the added tokens, or -1 on a bad id. */
static int64_t max_id(const cJSON *vocab, const cJSON *added) {
  int64_t m = -1;
  const cJSON *e;
  cJSON_ArrayForEach(e, vocab) {
    int64_t id = int_value(e, (1 << 28) - 1);
    if (id < 0) return -2;
    if (id > m) m = id;
  }
  cJSON_ArrayForEach(e, added) {
    int64_t id = int_value(cJSON_GetObjectItemCaseSensitive(e, "id"), (1 << 28) - 1);
    if (id < 0) return -2;
    if (id > m) m = id;
  }
  return m;
}

static fer_status set_model_token(fer_tokenizer *t, const char *text, uint32_t id, uint8_t *scratch) {
  size_t len = strlen(text);
  if (len == 0) return feri_fail(FER_STATUS_CORRUPT, "token %u has empty text", id);
  if (t->byte_level) {
    size_t n = feri_byte_level_unmap((const uint8_t *)text, len, scratch);
    /* A token outside the byte alphabet can never come out of byte-level BPE; keep its text for
     * decoding only if it does not clash with a reachable token. */
    if (n != SIZE_MAX) return feri_vocab_set(&t->vocab, id, scratch, n);
    if (feri_vocab_find(&t->vocab, (const uint8_t *)text, len) >= 0) return FER_STATUS_OK;
  }
  return feri_vocab_set(&t->vocab, id, (const uint8_t *)text, len);
}

/* Raw bytes of a merge part (byte-level: unmapped) into out; SIZE_MAX when impossible. */
static size_t part_bytes(const fer_tokenizer *t, const char *s, size_t len, uint8_t *out) {
  if (t->byte_level) return feri_byte_level_unmap((const uint8_t *)s, len, out);
  memcpy(out, s, len);
  return len;
}

static fer_status load_merges(fer_tokenizer *t, const cJSON *merges) {
  uint32_t n = (uint32_t)cJSON_GetArraySize(merges);
  fer_status st = feri_merges_init(&t->merges, n);
  if (st != FER_STATUS_OK) return st;
  uint8_t *buf = NULL;
  size_t buf_cap = 0;
  uint32_t rank = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, merges) {
    const char *a, *b;
    size_t la, lb;
    if (cJSON_IsString(e)) {
      const char *sp = strchr(e->valuestring, ' ');
      if (!sp || strchr(sp + 1, ' ')) {
        free(buf);
        return feri_fail(FER_STATUS_CORRUPT, "merge %u '%.60s' is not two parts", rank, e->valuestring);
      }
      a = e->valuestring;
      la = (size_t)(sp - a);
      b = sp + 1;
      lb = strlen(b);
    } else if (cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 && cJSON_IsString(cJSON_GetArrayItem(e, 0)) &&
               cJSON_IsString(cJSON_GetArrayItem(e, 1))) {
      a = cJSON_GetArrayItem(e, 0)->valuestring;
      b = cJSON_GetArrayItem(e, 1)->valuestring;
      la = strlen(a);
      lb = strlen(b);
    } else {
      free(buf);
      return feri_fail(FER_STATUS_CORRUPT, "merge %u is neither \"a b\" nor [a, b]", rank);
    }
    if (la + lb > buf_cap) {
      buf_cap = (la + lb) * 2 + 64;
      uint8_t *p = realloc(buf, buf_cap);
      if (!p) {
        free(buf);
        return feri_fail(FER_STATUS_OUT_OF_MEMORY, "merges");
      }
      buf = p;
    }
    size_t ra = part_bytes(t, a, la, buf);
    size_t rb = ra == SIZE_MAX ? SIZE_MAX : part_bytes(t, b, lb, buf + ra);
    int32_t ia = ra == SIZE_MAX ? -1 : feri_vocab_find(&t->vocab, buf, ra);
    int32_t ib = rb == SIZE_MAX ? -1 : feri_vocab_find(&t->vocab, buf + ra, rb);
    int32_t ir = (ia < 0 || ib < 0) ? -1 : feri_vocab_find(&t->vocab, buf, ra + rb);
    if (ir < 0) {
      free(buf);
      return feri_fail(FER_STATUS_CORRUPT, "merge %u ('%.*s' '%.*s'): %s is not in the vocabulary", rank, (int)(la > 40 ? 40 : la), a,
                       (int)(lb > 40 ? 40 : lb), b, ia < 0 ? "the first part" : ib < 0 ? "the second part" : "the result");
    }
    st = feri_merges_add(&t->merges, (uint32_t)ia, (uint32_t)ib, rank, (uint32_t)ir);
    if (st != FER_STATUS_OK) {
      free(buf);
      return st;
    }
    rank++;
  }
  free(buf);
  t->n_merges = rank;
  return FER_STATUS_OK;
}

static fer_status load_added(fer_tokenizer *t, const cJSON *added) {
  uint32_t n = (uint32_t)cJSON_GetArraySize(added);
  t->added = calloc(n ? n : 1, sizeof(*t->added));
  if (!t->added) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "added tokens");
  const cJSON *e;
  cJSON_ArrayForEach(e, added) {
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(e, "content");
    int64_t id = int_value(cJSON_GetObjectItemCaseSensitive(e, "id"), (int64_t)t->vocab.n - 1);
    if (!cJSON_IsString(content) || content->valuestring[0] == 0 || id < 0) {
      return feri_fail(FER_STATUS_CORRUPT, "added token %u lacks a valid id or content", t->n_added);
    }
    feri_added_token *a = &t->added[t->n_added];
    size_t len;
    a->content = dup_bytes(content->valuestring, &len);
    if (!a->content) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "added tokens");
    t->n_added++;
    a->id = (uint32_t)id;
    a->len = (uint32_t)len;
    a->special = flag(e, "special", false);
    a->lstrip = flag(e, "lstrip", false);
    a->rstrip = flag(e, "rstrip", false);
    a->single_word = flag(e, "single_word", false);
    a->normalized = flag(e, "normalized", !a->special);
    size_t have;
    if (t->vocab.off[id] != 0) {
      const uint8_t *text = feri_vocab_text(&t->vocab, (uint32_t)id, &have);
      if (have != len || memcmp(text, a->content, len) != 0) {
        return feri_fail(FER_STATUS_CORRUPT, "added token '%s' reuses id %" PRId64 " of another token", content->valuestring, id);
      }
    } else {
      int32_t model_id = feri_vocab_find(&t->vocab, a->content, len);
      if (model_id >= 0) {
        /* an added token that repeats a model token's text is that token: the reference splits
         * it off but gives the model's id, and the file's id stays unused */
        a->id = (uint32_t)model_id;
        continue;
      }
      fer_status st = feri_vocab_set(&t->vocab, (uint32_t)id, a->content, len);
      if (st != FER_STATUS_OK) return st;
    }
  }
  return FER_STATUS_OK;
}

static fer_status load_model(fer_tokenizer *t, const cJSON *model, const cJSON *added) {
  const char *type = type_of(model);
  const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
  const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
  if (!type) type = cJSON_IsArray(merges) ? "BPE" : "";
  if (strcmp(type, "BPE") == 0) {
    t->model = FERI_MODEL_BPE;
    if (!cJSON_IsArray(merges)) return feri_fail(FER_STATUS_BAD_FORMAT, "BPE model without merges");
    if (!is_null_or_absent(model, "dropout")) {
      const cJSON *d = cJSON_GetObjectItemCaseSensitive(model, "dropout");
      if (!(cJSON_IsNumber(d) && d->valuedouble == 0)) return feri_fail(FER_STATUS_UNSUPPORTED, "BPE dropout (random merges)");
    }
    if (!is_null_or_absent(model, "continuing_subword_prefix") || !is_null_or_absent(model, "end_of_word_suffix")) {
      const cJSON *p = cJSON_GetObjectItemCaseSensitive(model, "continuing_subword_prefix");
      const cJSON *s = cJSON_GetObjectItemCaseSensitive(model, "end_of_word_suffix");
      if ((cJSON_IsString(p) && p->valuestring[0]) || (cJSON_IsString(s) && s->valuestring[0])) {
        return feri_fail(FER_STATUS_UNSUPPORTED, "BPE subword prefix/suffix");
      }
    }
    t->byte_fallback = flag(model, "byte_fallback", false);
    t->ignore_merges = flag(model, "ignore_merges", false);
    t->fuse_unk = flag(model, "fuse_unk", false);
  } else if (strcmp(type, "WordLevel") == 0) {
    t->model = FERI_MODEL_WORDLEVEL;
  } else {
    return feri_fail(FER_STATUS_UNSUPPORTED, "model '%s'", type);
  }
  if (!cJSON_IsObject(vocab)) return feri_fail(FER_STATUS_BAD_FORMAT, "model without a vocab object");
  int64_t top = max_id(vocab, added);
  if (top < -1) return feri_fail(FER_STATUS_CORRUPT, "a token id is not an integer in [0, 2^28)");
  /* Ids index tables sized by the largest id: a few holes are fine, but a tiny file must not make
   * the loader allocate gigabytes. */
  int64_t entries = (int64_t)cJSON_GetArraySize(vocab) + (added ? cJSON_GetArraySize(added) : 0);
  if (top >= 2 * entries + 1024) {
    return feri_fail(FER_STATUS_CORRUPT, "token id %" PRId64 " is far past the %" PRId64 " tokens the file defines", top, entries);
  }
  fer_status st = feri_vocab_init(&t->vocab, (uint32_t)(top + 1));
  if (st != FER_STATUS_OK) return st;
  size_t longest = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, vocab) {
    size_t l = strlen(e->string);
    if (l > longest) longest = l;
  }
  uint8_t *scratch = malloc(longest + 1);
  if (!scratch) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "vocabulary");
  cJSON_ArrayForEach(e, vocab) {
    st = set_model_token(t, e->string, (uint32_t)e->valuedouble, scratch);
    if (st != FER_STATUS_OK) break;
  }
  free(scratch);
  if (st != FER_STATUS_OK) return st;
  st = load_added(t, added);
  if (st == FER_STATUS_OK && t->model == FERI_MODEL_BPE) st = load_merges(t, merges);
  if (st != FER_STATUS_OK) return st;
  const cJSON *unk = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
  if (cJSON_IsString(unk)) {
    t->unk_id = feri_vocab_find(&t->vocab, (const uint8_t *)unk->valuestring, strlen(unk->valuestring));
    if (t->unk_id < 0) return feri_fail(FER_STATUS_CORRUPT, "unk_token '%.40s' is not in the vocabulary", unk->valuestring);
    t->model_unk_id = t->unk_id;
  }
  return FER_STATUS_OK;
}

/* ---- post-processor ----------------------------------------------------------------------- */

static fer_status append_ids(int32_t **arr, uint32_t *n, int32_t id) {
  int32_t *p = realloc(*arr, (*n + 1) * sizeof(*p));
  if (!p) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "post-processor");
  *arr = p;
  p[(*n)++] = id;
  return FER_STATUS_OK;
}

static fer_status special_pair(fer_tokenizer *t, const cJSON *pair, int32_t **arr, uint32_t *n) {
  int64_t id = int_value(cJSON_GetArrayItem(pair, 1), (int64_t)t->vocab.n - 1);
  if (!cJSON_IsArray(pair) || id < 0) return feri_fail(FER_STATUS_CORRUPT, "post-processor token is not [text, id] in the vocabulary");
  return append_ids(arr, n, (int32_t)id);
}

static fer_status load_post(fer_tokenizer *t, const cJSON *o, int depth) {
  if (o == NULL || cJSON_IsNull(o)) return FER_STATUS_OK;
  const char *type = type_of(o);
  if (!type || depth > 8) return feri_fail(FER_STATUS_BAD_FORMAT, "post-processor without a type");
  if (strcmp(type, "ByteLevel") == 0) return FER_STATUS_OK; /* offsets only */
  if (strcmp(type, "Sequence") == 0) {
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(o, "processors");
    const cJSON *e;
    cJSON_ArrayForEach(e, list) {
      fer_status st = load_post(t, e, depth + 1);
      if (st != FER_STATUS_OK) return st;
    }
    return FER_STATUS_OK;
  }
  if (strcmp(type, "RobertaProcessing") == 0 || strcmp(type, "BertProcessing") == 0) {
    fer_status st = special_pair(t, cJSON_GetObjectItemCaseSensitive(o, "cls"), &t->prefix_ids, &t->n_prefix);
    if (st == FER_STATUS_OK) st = special_pair(t, cJSON_GetObjectItemCaseSensitive(o, "sep"), &t->suffix_ids, &t->n_suffix);
    return st;
  }
  if (strcmp(type, "TemplateProcessing") == 0) {
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(o, "single");
    const cJSON *specials = cJSON_GetObjectItemCaseSensitive(o, "special_tokens");
    if (!cJSON_IsArray(single)) return feri_fail(FER_STATUS_BAD_FORMAT, "TemplateProcessing without a single template");
    bool seen_a = false;
    const cJSON *item;
    cJSON_ArrayForEach(item, single) {
      const cJSON *sp = cJSON_GetObjectItemCaseSensitive(item, "SpecialToken");
      if (cJSON_GetObjectItemCaseSensitive(item, "Sequence")) {
        seen_a = true;
        continue;
      }
      const cJSON *name = cJSON_GetObjectItemCaseSensitive(sp, "id");
      if (!cJSON_IsString(name)) return feri_fail(FER_STATUS_BAD_FORMAT, "template item is neither a sequence nor a special token");
      const cJSON *def = cJSON_GetObjectItemCaseSensitive(specials, name->valuestring);
      const cJSON *ids = cJSON_GetObjectItemCaseSensitive(def, "ids");
      if (!cJSON_IsArray(ids)) return feri_fail(FER_STATUS_CORRUPT, "template token '%.40s' has no ids", name->valuestring);
      const cJSON *idv;
      cJSON_ArrayForEach(idv, ids) {
        int64_t id = int_value(idv, (int64_t)t->vocab.n - 1);
        if (id < 0) return feri_fail(FER_STATUS_CORRUPT, "template token '%.40s' has an id outside the vocabulary", name->valuestring);
        fer_status st = seen_a ? append_ids(&t->suffix_ids, &t->n_suffix, (int32_t)id)
                               : append_ids(&t->prefix_ids, &t->n_prefix, (int32_t)id);
        if (st != FER_STATUS_OK) return st;
      }
    }
    return FER_STATUS_OK;
  }
  return feri_fail(FER_STATUS_UNSUPPORTED, "post-processor '%s'", type);
}

fer_status fer_tokenizer_from_json(const char *json, size_t len, fer_tokenizer **out) {
  feri_error_clear();
  if (out) *out = NULL;
  if (!json || !out) return feri_fail(FER_STATUS_NULL_ARG, "fer_tokenizer_from_json: NULL json or out");
  cJSON *root = cJSON_ParseWithLength(json, len);
  if (!root || !cJSON_IsObject(root)) {
    const char *at = cJSON_GetErrorPtr();
    size_t off = (at && at >= json && at <= json + len) ? (size_t)(at - json) : 0;
    cJSON_Delete(root);
    return feri_fail(FER_STATUS_BAD_FORMAT, "tokenizer.json is not a JSON object (parse error near byte %zu)", off);
  }
  fer_tokenizer *t = NULL;
  fer_status st = feri_tokenizer_alloc(&t);
  const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
  const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
  if (st == FER_STATUS_OK && !cJSON_IsObject(model)) st = feri_fail(FER_STATUS_BAD_FORMAT, "tokenizer.json has no model");
  if (st == FER_STATUS_OK && added && !cJSON_IsArray(added) && !cJSON_IsNull(added)) {
    st = feri_fail(FER_STATUS_BAD_FORMAT, "added_tokens is not a list");
  }
  /* The byte-level decision comes first: it decides how the vocabulary's texts are read. */
  if (st == FER_STATUS_OK) st = load_pretok(t, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), 0);
  if (st == FER_STATUS_OK) st = load_decoder(t, cJSON_GetObjectItemCaseSensitive(root, "decoder"), 0);
  if (st == FER_STATUS_OK) st = load_normalizer(t, cJSON_GetObjectItemCaseSensitive(root, "normalizer"), 0);
  if (st == FER_STATUS_OK) st = load_model(t, model, cJSON_IsArray(added) ? added : NULL);
  if (st == FER_STATUS_OK) st = load_post(t, cJSON_GetObjectItemCaseSensitive(root, "post_processor"), 0);
  if (st == FER_STATUS_OK) st = feri_tokenizer_finish(t);
  cJSON_Delete(root);
  if (st != FER_STATUS_OK) {
    feri_tokenizer_destroy(t);
    return st;
  }
  if (t->n_prefix > 0) t->bos_id = t->prefix_ids[0];
  if (t->n_suffix > 0) t->eos_id = t->suffix_ids[t->n_suffix - 1];
  *out = t;
  return FER_STATUS_OK;
}

fer_status fer_tokenizer_from_json_file(const char *path, fer_tokenizer **out) {
  feri_error_clear();
  if (out) *out = NULL;
  if (!path || !out) return feri_fail(FER_STATUS_NULL_ARG, "fer_tokenizer_from_json_file: NULL path or out");
  /* a regular file only (a FIFO would block, /dev/zero never end), read up to its size */
  char *buf;
  size_t len;
  fer_status st = feri_file_read_all(path, "fer_tokenizer_from_json_file", &buf, &len);
  if (st != FER_STATUS_OK) return st;
  st = fer_tokenizer_from_json(buf, len, out);
  free(buf);
  return st;
}
