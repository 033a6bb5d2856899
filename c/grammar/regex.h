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
  FERI_RX_REPEAT, /* a, min .. max times (max FERI_RX_INF: unbounded) */
  FERI_RX_AND,    /* a and b: the strings both match (the lexer builds the product automaton) */
  FERI_RX_ANDNOT, /* a but not b: only as a lexeme's root (the lexer's excluded words, as an expression) */
  FERI_RX_MULTIPLE /* a decimal without sign or exponent whose value is a multiple of min * 10^-max
                      (min >= 1: JSON Schema's multipleOf; at least one digit, no leading zeros) */
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

/* a & b (FERI_RX_AND), a & ~b (FERI_RX_ANDNOT: only as a lexeme's root), and the digit strings
 * whose value is a multiple of coef * 10^-exp (FERI_RX_MULTIPLE; coef >= 1). */
uint32_t feri_rx_and(feri_rx *rx, uint32_t a, uint32_t b);
uint32_t feri_rx_andnot(feri_rx *rx, uint32_t a, uint32_t b);
uint32_t feri_rx_multiple(feri_rx *rx, uint32_t coef, uint32_t exp);

/* JSON's quoting of expression x over the characters of a string (llguidance's JsonQuote, with the
 * quotes): each character as JSON may write it inside a string: '"' and '\' escaped, \b \f \n
 * \r \t or \u00XX (either case of hex digit) for C0 controls, \u007F/\u007f for DEL, every
 * other scalar raw. Returns the new node (UINT32_MAX after a failure; x must not hold ANDNOT). */
uint32_t feri_rx_json_quote(feri_rx *rx, uint32_t x);

/* Parses a JSON Schema "pattern" (llguidance's regex_to_lark(p, "dw") then a search): \d \D \w
 * \W are ASCII classes, and the expression matches strings that contain a match: unless anchored
 * with ^ (at the start) and $ (at the end), any characters may come before and after it (per
 * alternative too, as Rust's regex-syntax places anchors). Otherwise as feri_rx_parse_into. */
fer_status feri_rx_parse_search(feri_rx *rx, const char *src, size_t len, uint32_t *root);

/* 1 when code point c matches the set of node `set` (a FERI_RX_SET node). */
int feri_rx_set_has(const feri_rx *rx, uint32_t set_node, uint32_t c);

#endif
