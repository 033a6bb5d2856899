/* utf8.c: UTF-8 per Unicode Table 3-7 (well-formed byte sequences). */
#include "tokenizer/utf8.h"

/* Allowed range of the second byte for each lead byte; later bytes are always 80..BF. */
static int second_byte_range(uint8_t lead, uint8_t *lo, uint8_t *hi, size_t *len) {
  *lo = 0x80;
  *hi = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    *len = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    *len = 3;
    if (lead == 0xE0) *lo = 0xA0; /* no overlongs */
    if (lead == 0xED) *hi = 0x9F; /* no surrogates */
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    *len = 4;
    if (lead == 0xF0) *lo = 0x90; /* no overlongs */
    if (lead == 0xF4) *hi = 0x8F; /* nothing past U+10FFFF */
  } else {
    return 0;
  }
  return 1;
}

/* Number of bytes of s[0..n) that match a prefix of a well-formed sequence (0 if the lead is bad). */
static size_t valid_prefix(const uint8_t *s, size_t n, size_t *need) {
  uint8_t lo, hi;
  *need = 1;
  if (n == 0) return 0;
  if (s[0] < 0x80) return 1;
  if (!second_byte_range(s[0], &lo, &hi, need)) return 0;
  size_t k = 1;
  if (k < n && k < *need && s[k] >= lo && s[k] <= hi) {
    k++;
    while (k < n && k < *need && s[k] >= 0x80 && s[k] <= 0xBF) k++;
  }
  return k;
}

size_t feri_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp) {
  if (n == 0) return 0;
  uint8_t b0 = s[0];
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  }
  size_t need;
  size_t k = valid_prefix(s, n, &need);
  if (k != need || need == 1) return 0;
  uint32_t c;
  if (need == 2) {
    c = (uint32_t)(b0 & 0x1F) << 6 | (uint32_t)(s[1] & 0x3F);
  } else if (need == 3) {
    c = (uint32_t)(b0 & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (uint32_t)(s[2] & 0x3F);
  } else {
    c = (uint32_t)(b0 & 0x07) << 18 | (uint32_t)(s[1] & 0x3F) << 12 | (uint32_t)(s[2] & 0x3F) << 6 |
        (uint32_t)(s[3] & 0x3F);
  }
  *cp = c;
  return need;
}

size_t feri_utf8_maximal_subpart(const uint8_t *s, size_t n) {
  size_t need;
  size_t k = valid_prefix(s, n, &need);
  return k == 0 ? 1 : k;
}

size_t feri_utf8_first_invalid(const uint8_t *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    /* ASCII runs eight bytes at a time: most text is mostly ASCII. */
    while (i + 8 <= n) {
      uint64_t w;
      __builtin_memcpy(&w, s + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    if (s[i] < 0x80) {
      i++;
      continue;
    }
    uint32_t cp;
    size_t k = feri_utf8_decode(s + i, n - i, &cp);
    if (k == 0) return i;
    i += k;
  }
  return n;
}

size_t feri_utf8_encode(uint32_t cp, uint8_t out[4]) {
  if (cp < 0x80) {
    out[0] = (uint8_t)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (uint8_t)(0xC0 | cp >> 6);
    out[1] = (uint8_t)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (uint8_t)(0xE0 | cp >> 12);
    out[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
    out[2] = (uint8_t)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (uint8_t)(0xF0 | cp >> 18);
  out[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3F));
  out[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
  out[3] = (uint8_t)(0x80 | (cp & 0x3F));
  return 4;
}

size_t feri_utf8_incomplete_tail(const uint8_t *s, size_t n) {
  /* A sequence is at most 4 bytes: its lead is among the last 3 bytes if it is incomplete. */
  for (size_t back = 1; back <= 3 && back <= n; back++) {
    const uint8_t *p = s + n - back;
    if (*p >= 0x80 && *p <= 0xBF) continue; /* continuation byte: look further back */
    size_t need;
    size_t k = valid_prefix(p, back, &need);
    return (k == back && need > back) ? back : 0;
  }
  return 0;
}
