/* gbnf.h: llama.cpp's GBNF grammars compiled into a grammar (matcher.h), as llguidance compiles
 * them after its own conversion to Lark (scripts/grammar/LLGUIDANCE.md section 7), so that masks
 * can be compared with it bit for bit.
 *
 * Syntax (llama.cpp's grammars/README.md): rules `name ::= alternatives`, one per line, names of
 * [A-Za-z0-9_-]; alternatives separated by `|`; a sequence of items, each a literal "..." , a
 * character class [...] or [^...] (single characters and ranges a-z), `.`, a rule name or a group
 * ( ... ), each followed by any number of `*`, `+`, `?`, `{m}`, `{m,}`, `{m,n}`. Escapes in
 * literals and classes: \" \\ \[ \] \n \r \t \xHH \uHHHH \UHHHHHHHH (code points, not bytes). `#`
 * starts a comment to the end of the line. A rule ends at a newline unless the newline is inside
 * parentheses or follows a `|`. The rule `root` is the start. A rule defined twice keeps its last
 * definition (as llama.cpp and llguidance do). Any recursion is allowed, left recursion included.
 *
 * Meaning (llguidance's, not llama.cpp's character-level one): a rule other than root whose body is
 * made only of literals, classes, `.` and such rules (no recursion) is a terminal: its whole body
 * is one lexeme, matched greedily (cfg.h). Elsewhere each literal, class, `.` and terminal is a
 * lexeme of its own, and groups and repetition are rules of the context-free grammar. A terminal
 * that matches the empty string stands for "the lexeme or nothing" (a lexeme itself never matches
 * the empty string), as llguidance compiles it. `.` is any character but \n. Classes and `.` are
 * sets of Unicode scalar values, matched as their UTF-8 bytes.
 *
 * Where ferrite and llguidance 1.9.1 differ (each a bug or a limit of llguidance's converter, for
 * text llama.cpp accepts): llguidance refuses \u and \U escapes with leading zeros (it strips the
 * zeros: \u00e9 becomes \ue9), \[ and \] in literals, counts {0} and {m,0}, stacked repetition
 * (`"a"*?`), rule names that collide once it renames them (`foo-bar` and `foo_bar`, `fooBar` and
 * `foo_bar`) or that are `start`, and reads `&&`, `--` and `~~` inside a class as Rust's set
 * operations; ferrite accepts all of these with llama.cpp's meaning. llguidance takes non-ASCII
 * letters in rule names (llama.cpp and ferrite do not). Both refuse the empty classes [] and [^]
 * and a range out of order; llama.cpp's left-recursion check is not ferrite's (Earley parses any
 * context-free grammar). */
#ifndef FERI_GRAMMAR_GBNF_H
#define FERI_GRAMMAR_GBNF_H

#include <stddef.h>

#include "ferrite.h"
#include "grammar/matcher.h"

/* Most nested parentheses, and most levels of nesting of any kind (parentheses and stacked
 * repetition together), a counted repetition's largest count, and the most expression nodes the
 * lexemes may have once their terminals are written out (INVALID_ARG beyond each: bounds, not
 * out-of-memory). */
enum {
  FERI_GBNF_MAX_PARENS = 100,
  FERI_GBNF_MAX_DEPTH = 400,
  FERI_GBNF_MAX_COUNT = 100000,
  FERI_GBNF_MAX_LEXEME_NODES = 1 << 22
};

/* Compiles the GBNF text src[0 .. len) into *out (NULL on failure). BAD_FORMAT for malformed text
 * (invalid UTF-8 included), with a message naming the line and column (in bytes, from 1) and what
 * was expected there; INVALID_ARG for a rule name that no rule defines (at its use), no `root`
 * rule, a grammar that can never accept (an empty language), and the bounds above and cfg.h's;
 * NULL_ARG for a NULL src or out. */
fer_status feri_grammar_from_gbnf(const char *src, size_t len, feri_grammar **out);

#endif
