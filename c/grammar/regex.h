/* regex.h: regular expressions over Unicode code points, parsed into a small syntax tree that the
 * lexer (lexer.h) compiles into a byte automaton (code points as their UTF-8 bytes).
 *
 * Syntax (the common subset of Rust's regex crate, which llguidance reads): literals (UTF-8),
 * `.` (any code point but \n), classes `[...]` and `[^...]` with ranges and escapes, `\d \D \w \W
 * \s \S` (Unicode, as Rust defines them: regex_unicode.h), escapes `\n \t \r \f \v \0 \a \e`,
 * `\xHH`, `\x{H...}`, `\u{H...}`, `\uHHHH` and a backslash before any punctuation; groups `(...)`,
 * `(?:...)`, `(?P<name>...)`, `(?<name>...)`; alternation `|`; repetition `*`, `+`, `?`, `{n}`,
 * `{n,}`, `{n,m}`, each optionally lazy (`?` after it: the same language). The expression matches
 * whole strings: `^` at its start and `$` at its end are allowed and mean nothing more. Anything
 * else (look-around, backreferences, `\b`, `\p{...}`, flags) is refused with UNSUPPORTED naming
 * it and its byte offset; malformed text with BAD_FORMAT naming the offset and what was expected. */
#ifndef FERI_GRAMMAR_REGEX_H
#define FERI_GRAMMAR_REGEX_H

#include <stddef.h>
#include <stdint.h>

#include "ferrite.h"

typedef enum feri_rx_kind {
  FERI_RX_EMPTY, /* the empty string */
  FERI_RX_NONE,  /* no string at all (an empty class) */
  FERI_RX_SET,   /* one code point of a set of ranges */
  FERI_RX_CAT,   /* a then b */
  FERI_RX_ALT,   /* a or b */
  FERI_RX_REPEAT /* a, min .. max times (max FERI_RX_INF: unbounded) */
} feri_rx_kind;

enum { FERI_RX_INF = UINT32_MAX };

typedef struct feri_rx_node {
  feri_rx_kind kind;
  uint32_t a, b;     /* children (CAT, ALT: a, b; REPEAT: a) */
  uint32_t min, max; /* REPEAT */
  uint32_t set, set_len; /* SET: ranges lo = ranges[2 (set + i)], hi = ranges[2 (set + i) + 1] */
} feri_rx_node;

/* A syntax tree: nodes and the code-point ranges of its sets (sorted, disjoint, not adjacent). */
typedef struct feri_rx {
  feri_rx_node *nodes;
  uint32_t n_nodes, cap_nodes;
  uint32_t *ranges;
  uint32_t n_ranges, cap_ranges; /* in pairs */
  uint32_t root;
  fer_status err; /* the first builder failure (OUT_OF_MEMORY, INVALID_ARG past the node bound) */
} feri_rx;

/* Most nodes one expression may have once its counted repetitions are written out (bigger ones are
 * refused with INVALID_ARG: a bound, not an out-of-memory). */
enum { FERI_RX_MAX_NODES = 1 << 20 };

/* Parses src[0 .. len) into a new tree in *out (freed with feri_rx_free; zeroed on failure). */
fer_status feri_rx_parse(const char *src, size_t len, feri_rx *out);

/* Parses src into more nodes of an existing tree, the expression's node in *root; on failure the
 * tree is as it was (and *root UINT32_MAX). */
fer_status feri_rx_parse_into(feri_rx *rx, const char *src, size_t len, uint32_t *root);

void feri_rx_free(feri_rx *rx);

/* Building trees by hand (the JSON-schema and GBNF compilers do): each returns the new node's
 * index, or UINT32_MAX after OUT_OF_MEMORY or past FERI_RX_MAX_NODES (the error is set). */
uint32_t feri_rx_empty(feri_rx *rx);
uint32_t feri_rx_set(feri_rx *rx, const uint32_t *ranges, uint32_t n_pairs); /* any order; normalised */
uint32_t feri_rx_literal(feri_rx *rx, const uint8_t *utf8, size_t len);      /* bytes as code points */
uint32_t feri_rx_cat(feri_rx *rx, uint32_t a, uint32_t b);
uint32_t feri_rx_alt(feri_rx *rx, uint32_t a, uint32_t b);
uint32_t feri_rx_repeat(feri_rx *rx, uint32_t a, uint32_t min, uint32_t max);

/* 1 when code point c matches the set of node `set` (a FERI_RX_SET node). */
int feri_rx_set_has(const feri_rx *rx, uint32_t set_node, uint32_t c);

#endif
