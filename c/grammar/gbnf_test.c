/* gbnf_test.c: GBNF grammars (gbnf.h).
 *
 * - Each construct (literals and their escapes, classes, `.`, groups, alternatives, the repetition
 *   operators, comments, line rules, recursion of every kind, terminals lexed greedily, terminals
 *   that match the empty string) has words, prefixes and non-words, fed one byte per token.
 * - Malformed text is refused with BAD_FORMAT and the line and column of the fault and what was
 *   expected; undefined names, a missing root, an empty language and the bounds with INVALID_ARG;
 *   deep nesting is refused, not overflowed.
 * - A terminal is the expression of its body: random bodies (literals with escapes, classes,
 *   `.`, groups, alternatives, every repetition operator) give the masks, along random paths, of
 *   the same expression written as a regular expression (regex.h's own parser).
 * - Masks along random paths of a few grammars equal a brute-force check of every token by
 *   accept-and-rollback.
 * EVIDENCE: C-GRM-010 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gbnf.h"
#include "grammar/matcher.h"
#include "grammar/toktrie.h"
#include "testing/check.h"

/* A vocabulary of the 256 bytes, one token each, and 256 = end of sequence (no bytes). */
static feri_toktrie byte_trie(void) {
  feri_toktrie t;
  CHECK_STATUS(feri_toktrie_build_bytes(&t), FER_STATUS_OK);
  return t;
}

typedef struct lang_case {
  const char *gbnf, *text;
  int word, prefix; /* text is a word of the grammar; a prefix of one */
} lang_case;

static const lang_case CASES[] = {
    /* literals and escapes (code points, not bytes) */
    {"root ::= \"abc\"", "abc", 1, 1},
    {"root ::= \"abc\"", "ab", 0, 1},
    {"root ::= \"abc\"", "abd", 0, 0},
    {"root ::= \"abc\"", "abcc", 0, 0},
    {"root ::= \"\\\"\\\\\\n\\r\\t\\x41\\u00e9\\U0001F600\\[\\]\"",
     "\"\\\n\r\tA\xc3\xa9\xf0\x9f\x98\x80[]", 1, 1},
    {"root ::= \"\\x80\"", "\xc2\x80", 1, 1},
    {"root ::= \"\\x80\"", "\x80", 0, 0},
    {"root ::= \"\xe4\xb8\xad\xe6\x96\x87\"", "\xe4\xb8\xad\xe6\x96\x87", 1, 1},
    {"root ::= \"a\" \"\" \"b\"", "ab", 1, 1},
    {"root ::= \"\"", "", 1, 1},
    {"root ::= \"\"", "a", 0, 0},
    /* classes */
    {"root ::= [a-c]", "b", 1, 1},
    {"root ::= [a-c]", "d", 0, 0},
    {"root ::= [^a-c]", "d", 1, 1},
    {"root ::= [^a-c]", "a", 0, 0},
    {"root ::= [^a-c]", "\n", 1, 1},
    {"root ::= [^a-c]", "\xc3\xa9", 1, 1},
    {"root ::= [a-]", "-", 1, 1},
    {"root ::= [-a]", "-", 1, 1},
    {"root ::= [\\]\\[\\\\]+", "][\\", 1, 1},
    {"root ::= [\\x41-\\x43\\u4e00-\\u9fff]+", "B\xe4\xb8\xad", 1, 1},
    {"root ::= [\xc3\xa0-\xc3\xbc]", "\xc3\xa8", 1, 1},
    {"root ::= [\xc3\xa0-\xc3\xbc]", "\xc3\xbd", 0, 0},
    {"root ::= [a&&b]+", "&b", 1, 1}, /* no set operations: & is a character */
    /* . is any character but \n */
    {"root ::= .", "a", 1, 1},
    {"root ::= .", "\xf0\x9f\x98\x80", 1, 1},
    {"root ::= .", "\n", 0, 0},
    /* groups, alternatives, comments, where a rule may go on to the next line */
    {"root ::= (\"a\" | \"b\") \"c\"", "bc", 1, 1},
    {"root ::= (\"a\" | \"b\") \"c\"", "c", 0, 0},
    {"root ::= \"a\" | \"b\" | ", "", 1, 1},
    {"# a comment\nroot ::= \"a\" # the a\n  # more\n", "a", 1, 1},
    {"root ::= (\n  \"a\"\n  | \"b\"\n)", "b", 1, 1},
    {"root ::= \"a\" |\n  \"b\"", "b", 1, 1},
    {"root ::=\n  \"a\"", "a", 1, 1},
    {"root ::= x\r\nx ::= \"a\"\r\n", "a", 1, 1},
    {"root ::= my-rule_2\nmy-rule_2 ::= \"a\"", "a", 1, 1},
    {"root ::= x\nx ::= \"a\"\nx ::= \"b\"", "b", 1, 1}, /* the last definition counts */
    {"root ::= x\nx ::= \"a\"\nx ::= \"b\"", "a", 0, 0},
    /* repetition, in rules and in terminals */
    {"root ::= \"ab\"*", "", 1, 1},
    {"root ::= \"ab\"*", "abab", 1, 1},
    {"root ::= \"ab\"*", "aba", 0, 1},
    {"root ::= \"ab\"+", "", 0, 1},
    {"root ::= \"ab\"+", "ab", 1, 1},
    {"root ::= \"a\"? \"b\"", "b", 1, 1},
    {"root ::= \"a\"? \"b\"", "ab", 1, 1},
    {"root ::= \"a\"? \"b\"", "aab", 0, 0},
    {"root ::= \"a\"{3}", "aaa", 1, 1},
    {"root ::= \"a\"{3}", "aa", 0, 1},
    {"root ::= \"a\"{3}", "aaaa", 0, 0},
    {"root ::= \"a\"{2,}", "a", 0, 1},
    {"root ::= \"a\"{2,}", "aaaaa", 1, 1},
    {"root ::= \"a\"{ 1 , 3 } \"b\"", "aaab", 1, 1},
    {"root ::= \"a\"{1,3} \"b\"", "aaaab", 0, 0},
    {"root ::= \"a\"{1,3} \"b\"", "b", 0, 0},
    {"root ::= \"a\"{0} \"b\"", "b", 1, 1},
    {"root ::= \"a\"{0,0} \"b\"", "ab", 0, 0},
    {"root ::= (\"ab\"{2})*", "abababab", 1, 1},
    {"root ::= (\"ab\"{2})*", "ababab", 0, 1},
    {"root ::= \"a\"{2}*", "aaaa", 1, 1}, /* stacked: (a{2})* */
    {"root ::= \"a\"{2}*", "aaa", 0, 1},
    {"root ::= x\nx ::= [0-9]{2,3} \"-\" [0-9]{4}", "123-4567", 1, 1},
    {"root ::= x\nx ::= [0-9]{2,3} \"-\" [0-9]{4}", "1-4567", 0, 0},
    {"root ::= x\nx ::= (\"ab\" | \"c\")+", "abcab", 1, 1},
    {"root ::= x\nx ::= \"a\"{0}\"b\"", "b", 1, 1},
    /* recursion: left, right, middle, mutual */
    {"root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= [0-9]+", "1+23+4", 1, 1},
    {"root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= [0-9]+", "1+", 0, 1},
    {"root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= [0-9]+", "+1", 0, 0},
    {"root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= [0-9]+", "1++2", 0, 0},
    {"root ::= list\nlist ::= item | item \",\" list\nitem ::= [a-z]", "a,b,c", 1, 1},
    {"root ::= \"(\" root \")\" | \"\"", "((()))", 1, 1},
    {"root ::= \"(\" root \")\" | \"\"", "(()", 0, 1},
    {"root ::= \"(\" root \")\" | \"\"", "())", 0, 0},
    {"root ::= a\na ::= \"x\" b | \"\"\nb ::= \"y\" a", "xyxy", 1, 1},
    {"root ::= a\na ::= \"x\" b | \"\"\nb ::= \"y\" a", "xyx", 0, 1},
    {"root ::= r\nr ::= r r | \"a\"", "aaaa", 1, 1},
    /* terminals are one lexeme, lexed greedily (LLGUIDANCE.md section 4.2) */
    {"root ::= a b\na ::= [a-z]+\nb ::= [a-z0-9]+", "abc1", 1, 1},
    {"root ::= a b\na ::= [a-z]+\nb ::= [a-z0-9]+", "abc", 0, 1},
    {"root ::= [a-z]+ [a-z0-9]+", "ab", 1, 1}, /* in a rule each class is its own lexeme */
    {"root ::= a \"a\"\na ::= \"a\"+", "aa", 0, 1},
    /* a terminal that matches the empty string is "the lexeme or nothing" */
    {"root ::= \"a\" ws \"b\"\nws ::= [ ]*", "ab", 1, 1},
    {"root ::= \"a\" ws \"b\"\nws ::= [ ]*", "a  b", 1, 1},
    {"root ::= \"a\" ws \"b\"\nws ::= [ ]*", "a ", 0, 1},
    {"root ::= ws\nws ::= [ ]*", "", 1, 1},
    {"root ::= ws\nws ::= | \" \" | \"\\n\" [ \\t]{0,3}", "\n\t\t", 1, 1},
    {"root ::= \"a\" e \"b\"\ne ::= \"\"", "ab", 1, 1},
    {"root ::= \"a\" e \"b\"\ne ::= \"\"", "a", 0, 1},
    {"root ::= s\ns ::= \"\\\"\" [^\"\\\\]* \"\\\"\" ws\nws ::= [ ]*", "\"a b\"  ", 1, 1},
};

/* 1 when the bytes of text are a prefix of a word (*word: a whole word), fed one byte per token. */
static int walk(const feri_grammar *g, const feri_toktrie *t, const char *text, int *word,
                int *mask_agrees) {
  feri_matcher *m = NULL;
  CHECK_STATUS(feri_matcher_new(g, t, 256, &m), FER_STATUS_OK);
  if (!m) return 0;
  int prefix = 1;
  for (const char *p = text; *p && prefix; p++)
    prefix = feri_matcher_accept(m, (uint8_t)*p) == FER_STATUS_OK;
  *word = prefix && feri_matcher_is_accepting(m);
  *mask_agrees = 1;
  if (prefix) { /* end of sequence in the mask exactly at words */
    uint32_t mask[9];
    CHECK_STATUS(feri_matcher_fill_mask(m, mask, 9), FER_STATUS_OK);
    *mask_agrees = feri_mask_get(mask, 256) == *word;
  }
  feri_matcher_free(m);
  return prefix;
}

static void test_constructs(void) {
  feri_toktrie t = byte_trie();
  int bad = 0;
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
    const lang_case *c = &CASES[i];
    feri_grammar *g = NULL;
    CHECK_STATUS(feri_grammar_from_gbnf(c->gbnf, strlen(c->gbnf), &g), FER_STATUS_OK);
    if (!g) {
      printf("  gbnf %s: not compiled\n", c->gbnf);
      bad++;
      continue;
    }
    int word = 0, agrees = 0;
    const int prefix = walk(g, &t, c->text, &word, &agrees);
    if (word != c->word || prefix != c->prefix || !agrees) {
      printf("  gbnf \"%s\" on \"%s\": word %d prefix %d (mask agrees %d), want %d %d\n", c->gbnf,
             c->text, word, prefix, agrees, c->word, c->prefix);
      bad++;
    }
    feri_grammar_free(g);
  }
  printf("  constructs: %zu strings, %d wrong\n", sizeof CASES / sizeof CASES[0], bad);
  CHECK(bad == 0);
  feri_toktrie_free(&t);
}

/* ---- refusals ---------------------------------------------------------------------------- */

typedef struct bad_case {
  const char *gbnf;
  fer_status want;
  const char *in_message[2]; /* both must be in the message (NULL: none) */
} bad_case;

static const bad_case BAD[] = {
    {"root ::= \"abc", FER_STATUS_BAD_FORMAT, {"line 1, column 10", "no closing '\"'"}},
    {"root := \"a\"", FER_STATUS_BAD_FORMAT, {"line 1, column 6", "expected '::='"}},
    {"root\n::= \"a\"", FER_STATUS_BAD_FORMAT, {"line 1, column 5", "expected '::='"}},
    {"root ::= [z-a]", FER_STATUS_BAD_FORMAT, {"line 1, column 11", "range"}},
    {"root ::= [abc", FER_STATUS_BAD_FORMAT, {"line 1, column 10", "no closing ']'"}},
    {"root ::= []", FER_STATUS_BAD_FORMAT, {"line 1, column 10", "empty character class"}},
    {"root ::= [^]", FER_STATUS_BAD_FORMAT, {"line 1, column 10", "empty character class"}},
    {"root ::= \"\\q\"", FER_STATUS_BAD_FORMAT, {"line 1, column 11", "unknown escape"}},
    {"root ::= \"\\x4\"", FER_STATUS_BAD_FORMAT, {"line 1, column 11", "2 hex digits"}},
    {"root ::= \"\\uD800\"",
     FER_STATUS_BAD_FORMAT,
     {"line 1, column 11", "not a Unicode scalar value"}},
    {"root ::= \"\\U00110000\"",
     FER_STATUS_BAD_FORMAT,
     {"line 1, column 11", "not a Unicode scalar value"}},
    {"root ::= \"a\\", FER_STATUS_BAD_FORMAT, {"line 1, column 12", "after '\\'"}},
    {"root ::= \"\xff\"", FER_STATUS_BAD_FORMAT, {"line 1, column 11", "invalid UTF-8"}},
    {"root ::= (\"a\"",
     FER_STATUS_BAD_FORMAT,
     {"line 1, column 14", "expected ')', found the end of the text"}},
    {"root ::= \"a\")",
     FER_STATUS_BAD_FORMAT,
     {"line 1, column 13", "expected the end of the line after the rule, found ')'"}},
    {"root ::= * \"a\"",
     FER_STATUS_BAD_FORMAT,
     {"line 1, column 10", "expected an item before '*'"}},
    {"root ::= \"a\" | +",
     FER_STATUS_BAD_FORMAT,
     {"line 1, column 16", "expected an item before '+'"}},
    {"root ::= \"a\"{2,1}", FER_STATUS_BAD_FORMAT, {"line 1, column 13", "m > n"}},
    {"root ::= \"a\"{x}",
     FER_STATUS_BAD_FORMAT,
     {"line 1, column 14", "expected a count, found 'x'"}},
    {"root ::= \"a\"{2;}", FER_STATUS_BAD_FORMAT, {"line 1, column 15", "expected ',' or '}'"}},
    {"root ::= \"a\"{2,3", FER_STATUS_BAD_FORMAT, {"line 1, column 17", "expected '}'"}},
    {"root ::= \"a\"\n  | \"b\"",
     FER_STATUS_BAD_FORMAT,
     {"line 2, column 3", "expected a rule name, found '|'"}},
    {"root ::= x\nx ::= \"a\" (\"b\"\n",
     FER_STATUS_BAD_FORMAT,
     {"line 3, column 1", "expected ')'"}},
    {"root ::= \"a\"{1000001}", FER_STATUS_INVALID_ARG, {"line 1, column 14", "bound 100000"}},
    {"root ::= x y\nx ::= \"a\"",
     FER_STATUS_INVALID_ARG,
     {"line 1, column 12", "no rule defines 'y'"}},
    {"main ::= \"a\"", FER_STATUS_INVALID_ARG, {"no rule named root", NULL}},
    {"", FER_STATUS_INVALID_ARG, {"no rule named root", NULL}},
    {"# only a comment\n", FER_STATUS_INVALID_ARG, {"no rule named root", NULL}},
    {"root ::= root \"a\"", FER_STATUS_INVALID_ARG, {"can never accept", NULL}},
    {"root ::= x\nx ::= \"a\" x", FER_STATUS_INVALID_ARG, {"can never accept", NULL}},
    {"root ::= x\nx ::= [^\\x00-\\U0010FFFF]", FER_STATUS_INVALID_ARG, {"can never accept", NULL}},
};

static void check_refusal(const char *gbnf, size_t len, fer_status want, const char *m1,
                          const char *m2, int *bad) {
  feri_grammar *g = (feri_grammar *)&want; /* must come back NULL */
  const fer_status st = feri_grammar_from_gbnf(gbnf, len, &g);
  char msg[512] = "";
  size_t ml = 0;
  (void)fer_last_error_message(msg, sizeof msg, &ml);
  if (st != want || g != NULL || (m1 && !strstr(msg, m1)) || (m2 && !strstr(msg, m2))) {
    printf("  refusal of \"%.60s\": status %d (%s), want %d with \"%s\" \"%s\"\n", gbnf, (int)st,
           msg, (int)want, m1 ? m1 : "", m2 ? m2 : "");
    ++*bad;
  }
  if (st == FER_STATUS_OK) feri_grammar_free(g);
}

/* Text of n copies of piece, between head and tail (malloc'd). */
static char *repeat(const char *head, const char *piece, int n, const char *tail) {
  const size_t hl = strlen(head), pl = strlen(piece), tl = strlen(tail);
  char *s = malloc(hl + pl * (size_t)n + tl + 1), *q = s;
  memcpy(q, head, hl), q += hl;
  for (int i = 0; i < n; i++) memcpy(q, piece, pl), q += pl;
  memcpy(q, tail, tl + 1);
  return s;
}

static void test_refusals(void) {
  int bad = 0;
  for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++)
    check_refusal(BAD[i].gbnf, strlen(BAD[i].gbnf), BAD[i].want, BAD[i].in_message[0],
                  BAD[i].in_message[1], &bad);
  /* NULL arguments */
  feri_grammar *g = NULL;
  CHECK_STATUS(feri_grammar_from_gbnf(NULL, 0, &g), FER_STATUS_NULL_ARG);
  CHECK_STATUS(feri_grammar_from_gbnf("root ::= \"a\"", 12, NULL), FER_STATUS_NULL_ARG);
  /* a NUL byte is a character like any other: refused outside literals, kept inside them */
  check_refusal("root ::= \"a\" \0", 14, FER_STATUS_BAD_FORMAT, "line 1, column 14", "byte 0x00",
                &bad);
  CHECK_STATUS(feri_grammar_from_gbnf("root ::= \"\0\"", 12, &g), FER_STATUS_OK);
  feri_grammar_free(g);
  /* nesting: deep but within the bounds compiles; past them is refused (no stack overflow) */
  char *s = repeat("root ::= ", "(", 90, "\"a\"");
  char *s2 = repeat(s, ")", 90, "");
  g = NULL;
  CHECK_STATUS(feri_grammar_from_gbnf(s2, strlen(s2), &g), FER_STATUS_OK);
  feri_grammar_free(g);
  free(s), free(s2);
  s = repeat("root ::= ", "(", 100000, "\"a\"");
  check_refusal(s, strlen(s), FER_STATUS_INVALID_ARG, "line 1, column 110",
                "parentheses nested deeper than 100", &bad);
  free(s);
  s = repeat("root ::= ", "(\"a\" ", 101, "");
  s2 = repeat(s, ")", 101, "");
  check_refusal(s2, strlen(s2), FER_STATUS_INVALID_ARG, "parentheses nested deeper than 100", NULL,
                &bad);
  free(s), free(s2);
  s = repeat("root ::= \"a\"", "*", 100000, "");
  check_refusal(s, strlen(s), FER_STATUS_INVALID_ARG, "nested deeper than 400 levels", NULL, &bad);
  free(s);
  s = repeat("root ::= x\nx ::= \"a\"", "?", 100000, "");
  check_refusal(s, strlen(s), FER_STATUS_INVALID_ARG, "nested deeper than 400 levels", NULL, &bad);
  free(s);
  /* counted repetition in rules is written out as rules: past cfg.h's bound on rules, refused */
  s = repeat("root ::= \"a\"", "{0,100000}", 6, "");
  check_refusal(s, strlen(s), FER_STATUS_INVALID_ARG,
                "more rules or symbols than the grammar bound", NULL, &bad);
  free(s);
  /* terminals written into terminals: a doubling chain past the lexeme bound; a deep chain */
  char big[4096] = "root ::= t40\nt0 ::= \"ab\"\n";
  for (int k = 1; k <= 40; k++)
    snprintf(big + strlen(big), sizeof big - strlen(big), "t%d ::= t%d t%d\n", k, k - 1, k - 1);
  check_refusal(big, strlen(big), FER_STATUS_INVALID_ARG, "t40: the lexemes grow past the bound",
                "line 1, column 10", &bad);
  char *deep = malloc(1 << 16), *q = deep;
  q += sprintf(q, "root ::= t500\nt0 ::= \"a\"\n");
  for (int k = 1; k <= 500; k++) q += sprintf(q, "t%d ::= \"a\" | \"b\" t%d\n", k, k - 1);
  check_refusal(deep, strlen(deep), FER_STATUS_INVALID_ARG, "t500: a terminal nested deeper", NULL,
                &bad);
  q = deep; /* the same depth made of rules stays a context-free grammar: fine */
  q += sprintf(q, "root ::= t500\nt0 ::= \"a\" | t500\n");
  for (int k = 1; k <= 500; k++) q += sprintf(q, "t%d ::= \"a\" | \"b\" t%d\n", k, k - 1);
  g = NULL;
  CHECK_STATUS(feri_grammar_from_gbnf(deep, strlen(deep), &g), FER_STATUS_OK);
  feri_grammar_free(g);
  free(deep);
  printf("  refusals: %zu texts and the bounds, %d wrong\n", sizeof BAD / sizeof BAD[0], bad);
  CHECK(bad == 0);
}

/* ---- masks against accept-and-rollback --------------------------------------------------- */

static unsigned next(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return (*s >> 16) & 0x7FFF;
}

/* parts[0 .. n) one after another into out (cut at cap - 1 bytes). */
static void join(char *out, size_t cap, const char *const *parts, int n) {
  size_t len = 0;
  for (int i = 0; i < n; i++)
    for (const char *p = parts[i]; *p && len + 1 < cap; p++) out[len++] = *p;
  out[len] = 0;
}

/* A random expression written twice: as a GBNF rule body and as a regular expression. */
static void gen(unsigned *s, char *gb, char *rx, size_t cap, int depth) {
  static const char *ATOMS[][2] = {
      {"\"a\"", "a"},
      {"\"ab\"", "ab"},
      {"\"\\u00e9\"", "\xc3\xa9"},
      {"\"\\x62a\"", "ba"},
      {"[ab]", "[ab]"},
      {"[^a]", "[^a]"},
      {"[a-c\\u00e9]", "[a-c\xc3\xa9]"},
      {".", "."},
      {"\"\\n\"", "\\n"},
      {"[\\n b]", "[\\n b]"},
      {"[^\\n]", "[^\\n]"},
      {"\"\\\"\\\\\"", "\"\\\\"},
  };
  enum { NA = sizeof ATOMS / sizeof ATOMS[0] };
  const unsigned r = next(s) % (depth > 3 ? 3 : 10);
  if (r < 3) {
    const unsigned k = next(s) % NA;
    snprintf(gb, cap, "%s", ATOMS[k][0]);
    snprintf(rx, cap, "%s", ATOMS[k][1]);
    return;
  }
  char ga[512], ra[512], gb2[512] = "", rb[512] = "", m[32] = "";
  gen(s, ga, ra, sizeof ga, depth + 1);
  if (r < 5) gen(s, gb2, rb, sizeof gb2, depth + 1);
  if (r == 8) {
    const unsigned lo = next(s) % 3;
    snprintf(m, sizeof m, "{%u,%u}", lo, lo + next(s) % 3);
  } else if (r > 8) {
    snprintf(m, sizeof m, "{%u,}", 1 + next(s) % 2);
  }
  const char *post = r == 5 ? "*" : r == 6 ? "+" : r == 7 ? "?" : m;
  if (r == 3)
    join(gb, cap, (const char *[]){ga, " ", gb2}, 3), join(rx, cap, (const char *[]){ra, rb}, 2);
  else if (r == 4)
    join(gb, cap, (const char *[]){"(", ga, " | ", gb2, ")"}, 5),
        join(rx, cap, (const char *[]){"(?:", ra, "|", rb, ")"}, 5);
  else
    join(gb, cap, (const char *[]){"(", ga, ")", post}, 4),
        join(rx, cap, (const char *[]){"(?:", ra, ")", post}, 4);
}

static void test_terminals_against_regex(void) {
  static const char *PIECES[] = {"a",  "b", "c", "ab",        "ba", "\xc3\xa9", "\xc3", "\xa9",
                                 "\n", " ", "x", "a\xc3\xa9", "\"", "\\",       "aa"};
  enum { V = sizeof PIECES / sizeof PIECES[0] + 1 };
  const uint8_t *bytes[V];
  uint32_t lens[V];
  for (uint32_t k = 0; k + 1 < V; k++)
    bytes[k] = (const uint8_t *)PIECES[k], lens[k] = (uint32_t)strlen(PIECES[k]);
  bytes[V - 1] = (const uint8_t *)"", lens[V - 1] = 0; /* the end of sequence */
  feri_toktrie t;
  CHECK_STATUS(feri_toktrie_build(bytes, lens, V, NULL, &t), FER_STATUS_OK);
  unsigned s = 3;
  int exprs = 0, steps = 0, differ = 0;
  for (int e = 0; e < 300; e++) {
    char gb[512], rx[512], text[600];
    gen(&s, gb, rx, sizeof gb, 0);
    snprintf(text, sizeof text, "root ::= x\nx ::= %s\n", gb);
    feri_grammar *g1 = NULL, *g2 = NULL;
    const fer_status st1 = feri_grammar_from_gbnf(text, strlen(text), &g1),
                     st2 = feri_grammar_from_regex(rx, strlen(rx), &g2);
    if (st1 != st2)
      printf("  terminal %s: status %d, the expression %s: %d\n", gb, (int)st1, rx, (int)st2);
    CHECK(st1 == st2);
    if (g1 && g2) {
      exprs++;
      for (int w = 0; w < 3; w++) {
        feri_matcher *m1 = NULL, *m2 = NULL;
        CHECK_STATUS(feri_matcher_new(g1, &t, V - 1, &m1), FER_STATUS_OK);
        CHECK_STATUS(feri_matcher_new(g2, &t, V - 1, &m2), FER_STATUS_OK);
        for (int step = 0; step < 10 && m1 && m2; step++) {
          uint32_t k1[1] = {0}, k2[1] = {0}, allowed[V], n = 0;
          CHECK_STATUS(feri_matcher_fill_mask(m1, k1, 1), FER_STATUS_OK);
          CHECK_STATUS(feri_matcher_fill_mask(m2, k2, 1), FER_STATUS_OK);
          steps++;
          if (k1[0] != k2[0]) {
            if (differ < 5)
              printf("  terminal %s vs %s: masks %08x and %08x\n", gb, rx, k1[0], k2[0]);
            differ++;
            break;
          }
          for (uint32_t k = 0; k + 1 < V; k++)
            if (feri_mask_get(k1, k)) allowed[n++] = k;
          if (n == 0) break;
          const int32_t pick = (int32_t)allowed[next(&s) % n];
          CHECK_STATUS(feri_matcher_accept(m1, pick), FER_STATUS_OK);
          CHECK_STATUS(feri_matcher_accept(m2, pick), FER_STATUS_OK);
        }
        feri_matcher_free(m1), feri_matcher_free(m2);
      }
    }
    feri_grammar_free(g1), feri_grammar_free(g2);
  }
  printf("  terminals against expressions: %d expressions, %d masks, %d differ\n", exprs, steps,
         differ);
  CHECK(exprs > 250 && steps > 2000 && differ == 0);
  feri_toktrie_free(&t);
}

static void test_masks(void) {
  static const char *GRAMMARS[] = {
      "root ::= expr\nexpr ::= expr (\"+\" | \"-\") term | term\nterm ::= term \"*\" atom | atom\n"
      "atom ::= num | \"(\" expr \")\"\nnum ::= [0-9]+",
      "root ::= \"[\" ws (item (\",\" ws item)*)? \"]\"\nitem ::= [a-z]+ | \"\\\"\" [^\"]* "
      "\"\\\"\"\nws ::= [ ]*",
      "root ::= (a b)+\na ::= [ab]+\nb ::= \"a\" | \"ba\"",
  };
  static const char *PIECES[] = {"1", "2",  "+", "-", "*", "(", ")",  "12",  "+(", "a",
                                 "b", "ab", "[", "]", ",", " ", "\"", "\"a", "ba", ", "};
  enum { NP = sizeof PIECES / sizeof PIECES[0], V = 400 };
  unsigned s = 11;
  uint8_t *bytes[V];
  uint32_t lens[V];
  for (uint32_t k = 0; k < V;
       k++) { /* one or two pieces per token; token V - 1 the end of sequence */
    const char *a = PIECES[next(&s) % NP], *b = k % 2 ? PIECES[next(&s) % NP] : "";
    lens[k] = k == V - 1 ? 0 : (uint32_t)(strlen(a) + strlen(b));
    bytes[k] = malloc(strlen(a) + strlen(b) + 1);
    memcpy(bytes[k], a, strlen(a));
    memcpy(bytes[k] + strlen(a), b, strlen(b) + 1);
  }
  feri_toktrie t;
  CHECK_STATUS(feri_toktrie_build((const uint8_t *const *)bytes, lens, V, NULL, &t), FER_STATUS_OK);
  int steps = 0, differ = 0;
  for (size_t gi = 0; gi < sizeof GRAMMARS / sizeof GRAMMARS[0]; gi++) {
    feri_grammar *g = NULL;
    CHECK_STATUS(feri_grammar_from_gbnf(GRAMMARS[gi], strlen(GRAMMARS[gi]), &g), FER_STATUS_OK);
    for (int w = 0; w < 20 && g; w++) {
      feri_matcher *m = NULL;
      CHECK_STATUS(feri_matcher_new(g, &t, V - 1, &m), FER_STATUS_OK);
      for (int step = 0; step < 16 && m; step++) {
        uint32_t mask[(V + 31) / 32], allowed[V], n = 0;
        CHECK_STATUS(feri_matcher_fill_mask(m, mask, (V + 31) / 32), FER_STATUS_OK);
        for (uint32_t k = 0; k < V - 1; k++) {
          const int ok = feri_matcher_accept(m, (int32_t)k) == FER_STATUS_OK;
          if (ok) {
            CHECK_STATUS(feri_matcher_rollback(m, 1), FER_STATUS_OK);
            allowed[n++] = k;
          }
          differ += ok != feri_mask_get(mask, k);
        }
        differ += feri_mask_get(mask, V - 1) != feri_matcher_is_accepting(m);
        steps++;
        if (n == 0) break;
        CHECK_STATUS(feri_matcher_accept(m, (int32_t)allowed[next(&s) % n]), FER_STATUS_OK);
      }
      feri_matcher_free(m);
    }
    feri_grammar_free(g);
  }
  printf("  masks: %d steps, %d differ from accept-and-rollback\n", steps, differ);
  CHECK(steps > 300 && differ == 0);
  feri_toktrie_free(&t);
  for (uint32_t k = 0; k < V; k++) free(bytes[k]);
}

int main(void) {
  test_constructs();
  test_refusals();
  test_terminals_against_regex();
  test_masks();
  return feri_test_finish("gbnf_test");
}
