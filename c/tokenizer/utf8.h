/* utf8.h: UTF-8 validation, decoding and the U+FFFD replacement the reference tokenizers apply. */
#ifndef FERI_TOKENIZER_UTF8_H
#define FERI_TOKENIZER_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Length of the well-formed UTF-8 sequence at s[0..n) (1-4), or 0 when the bytes there are
 * ill-formed; *cp receives the code point when well-formed. Well-formed as Unicode Table 3-7
 * defines it: no overlongs, no surrogates, nothing past U+10FFFF. */
size_t feri_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp);

/* Length of the maximal subpart of an ill-formed sequence at s[0..n) (>= 1): the longest prefix
 * that could still begin a well-formed sequence, or 1. One U+FFFD replaces each maximal subpart
 * (Unicode's "substitution of maximal subparts", the practice Python's "replace" follows). */
size_t feri_utf8_maximal_subpart(const uint8_t *s, size_t n);

/* Offset of the first ill-formed byte of s[0..n), or n when all of it is well-formed. */
size_t feri_utf8_first_invalid(const uint8_t *s, size_t n);

/* Writes the UTF-8 encoding of cp (<= U+10FFFF, not a surrogate) to out and returns its length. */
size_t feri_utf8_encode(uint32_t cp, uint8_t out[4]);

/* Number of bytes at the end of s[0..n) that form the beginning of a well-formed sequence still
 * missing its last bytes (0-3): what a streaming decoder holds back. */
size_t feri_utf8_incomplete_tail(const uint8_t *s, size_t n);

#endif
