/* tokenizer.h: the tokenizer object shared by the loaders (tokenizer.json, GGUF) and the encoder,
 * the decoder and the streaming detokenizer. Everything here is read-only after loading. */
#ifndef FERI_TOKENIZER_TOKENIZER_H
#define FERI_TOKENIZER_TOKENIZER_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "ferrite.h"
#include "tokenizer/vocab.h"

/* BPE merges by rank (byte-level or on characters); WordLevel looks words up; SPM is llama.cpp's
 * SentencePiece-BPE, merging the pair whose merged token has the highest score. */
enum { FERI_MODEL_BPE = 0, FERI_MODEL_WORDLEVEL = 1, FERI_MODEL_SPM = 2 };

/* Normalizers, applied in order to each text segment between added tokens. */
enum {
  FERI_NORM_NFC,
  FERI_NORM_NFD,
  FERI_NORM_NFKC,
  FERI_NORM_NFKD,
  FERI_NORM_LOWERCASE,
  FERI_NORM_REPLACE, /* every occurrence of `a` by `b` (literal strings) */
  FERI_NORM_PREPEND, /* `a` before non-empty text */
};

typedef struct feri_normalizer {
  int kind;
  uint8_t *a, *b;
  size_t a_len, b_len;
} feri_normalizer;

/* How a split keeps the delimiters (Hugging Face's SplitDelimiterBehavior). */
enum {
  FERI_SPLIT_REMOVED,
  FERI_SPLIT_ISOLATED,
  FERI_SPLIT_MERGED_WITH_PREVIOUS,
  FERI_SPLIT_MERGED_WITH_NEXT,
  FERI_SPLIT_CONTIGUOUS,
};

/* Pre-tokenizer steps, applied in order; each splits every piece the previous step produced. */
enum {
  FERI_PRE_SPLIT,        /* regex split with a delimiter behaviour (Split, ByteLevel, Whitespace, Digits) */
  FERI_PRE_PREFIX_SPACE, /* ByteLevel's add_prefix_space: a space before a piece not starting with one */
};

typedef struct feri_pretok_step {
  int kind;
  int behavior;
  bool invert;       /* the regex matches the pieces to keep, not the delimiters */
  pcre2_code *regex; /* JIT-compiled when the platform allows */
} feri_pretok_step;

/* Decoder steps of a character-level (not byte-level) model, applied to the list of token texts. */
enum {
  FERI_DEC_REPLACE,      /* literal `a` -> `b` in each token */
  FERI_DEC_BYTE_FALLBACK, /* <0xAB> tokens -> bytes; an invalid byte group -> one U+FFFD per byte */
  FERI_DEC_FUSE,         /* join all tokens into one */
  FERI_DEC_STRIP,        /* drop up to `start` leading and `stop` trailing `a` characters per token */
};

typedef struct feri_decoder_step {
  int kind;
  uint8_t *a, *b;
  size_t a_len, b_len;
  uint32_t start, stop;
} feri_decoder_step;

typedef struct feri_added_token {
  uint32_t id;
  uint32_t len;
  uint8_t *content;
  bool special, lstrip, rstrip, single_word, normalized;
} feri_added_token;

/* Added tokens matched on one form of the text (raw or normalized): leftmost, then longest. */
typedef struct feri_added_set {
  feri_added_token **tokens; /* sorted by first byte, then by length descending */
  uint32_t n;
  uint32_t first[257]; /* tokens[first[b] .. first[b + 1]) start with byte b */
} feri_added_set;

typedef struct feri_encode_ctx feri_encode_ctx;

struct fer_tokenizer {
  int model;
  bool byte_level;     /* the model's alphabet is bytes (ByteLevel pre-tokenizer or decoder) */
  bool byte_fallback;  /* unknown characters become <0xAB> tokens */
  bool ignore_merges;  /* a word that is a token is that token, merges or not */
  bool fuse_unk;
  bool unknown_is_barrier; /* a byte with no token still separates its neighbours (llama.cpp) */
  bool llama_cpp_unicode;  /* split classes as llama.cpp's Unicode 15.1 tables, not Oniguruma's 16.0 */
  int32_t unk_id;       /* the vocabulary's unknown token (reported by get_info) */
  int32_t model_unk_id; /* what the model emits for what it cannot spell; -1 = drop it (llama.cpp) */
  int32_t bos_id, eos_id, pad_id;

  feri_vocab vocab;      /* every id: model tokens as raw bytes, added tokens as their content */
  feri_merges merges;
  uint32_t n_merges;
  int32_t byte_id[256];      /* byte-level: the token of each single byte, or -1 */
  int32_t fallback_id[256];  /* byte fallback: the <0xAB> token of each byte, or -1 */
  uint8_t *is_added;         /* per id: 1 added token, 2 added special token */
  float *scores;             /* SPM: per id */
  /* The SentencePiece decoder chain (Replace(a -> b), ByteFallback, Fuse, optional Strip of one
   * leading character) in one pass: per id, its byte (<0xAB> tokens) or -1, and its text with the
   * replacement applied (sp_text holds id -> text; lookups unused). */
  bool sp_decode;
  bool sp_strip;
  int16_t *sp_byte;
  feri_vocab sp_text;

  feri_normalizer *norms;
  uint32_t n_norms;
  feri_pretok_step *pretok;
  uint32_t n_pretok;
  feri_decoder_step *decoders;
  uint32_t n_decoders;

  feri_added_token *added;
  uint32_t n_added;
  feri_added_set added_raw, added_normalized;

  int32_t *prefix_ids, *suffix_ids; /* the post-processor's single-sequence template */
  uint32_t n_prefix, n_suffix;

  _Atomic(feri_encode_ctx *) spare_ctx; /* one warm context (word cache, regex scratch) */
  atomic_uint live_dependents; /* detokenizers and grammar vocabularies made from it */
};

/* Loader helpers shared by tokenizer.json and GGUF loading (tokenizer_build.c). */
fer_status feri_tokenizer_alloc(fer_tokenizer **out);
/* Compiles a pre-tokenizer regex written for Oniguruma (\s, \p{L}, \p{N} adapted to match it). */
fer_status feri_tokenizer_add_split(fer_tokenizer *t, const char *pattern, size_t len, int behavior, bool invert);
fer_status feri_tokenizer_add_prefix_space(fer_tokenizer *t);
/* The GPT-2 pre-tokenizer regex (ByteLevel's use_regex). */
extern const char feri_gpt2_pattern[];
/* Byte-level alphabet: the character of each byte, as GPT-2's bytes_to_unicode defines it. */
uint32_t feri_byte_to_char(uint8_t b);
/* Inverse: the byte of a character, or -1. */
int feri_char_to_byte(uint32_t cp);
/* Converts a byte-level token text (UTF-8 of mapped characters) to raw bytes in out (cap >= len);
 * returns the byte count, or SIZE_MAX when a character is outside the alphabet. */
size_t feri_byte_level_unmap(const uint8_t *text, size_t len, uint8_t *out);
/* The byte of a byte-fallback token's text "<0xAB>" (uppercase hex), or -1. */
int feri_fallback_byte(const uint8_t *text, size_t len);
/* After the vocabulary, added tokens and model flags are set: byte tables, added-token sets. */
fer_status feri_tokenizer_finish(fer_tokenizer *t);
void feri_tokenizer_destroy(fer_tokenizer *t);

/* A tokenizer from an open GGUF file's metadata (the decode engine loads model and tokenizer from
 * one parse). */
struct feri_gguf;
fer_status feri_tokenizer_from_gguf(const struct feri_gguf *g, fer_tokenizer **out);

#endif
