/* grammar_test.c: regular expressions, the token trie and the regex matcher (issue 20, first part).
 *
 * - The parser refuses malformed and unsupported syntax with the right status and the byte offset.
 * - Language: random expressions over a small alphabet (ASCII, a two-byte and a three-byte
 *   character) against PCRE2 (anchored at both ends, UTF): every random string is a word of ours
 *   exactly when PCRE2 matches it whole, and a prefix of a word exactly when PCRE2 reports a
 *   partial match (PCRE2_PARTIAL_HARD against the expression followed by \z).
 * - \d, \w, \s follow Rust's Unicode classes (Arabic-Indic digits, accented letters, combining
 *   marks, no-break space).
 * - The trie holds every included token once, in preorder with correct subtree sizes.
 * - The mask equals a brute-force check of every token (its bytes run through the DFA from the
 *   current state) at every step of random walks that accept allowed tokens, with end of sequence
 *   exactly where the expression accepts (and alone after it); accept, rollback and refusals behave
 *   as matcher.h says.
 * - JSON Schema: refusals with status and place; words and non-words of compiled schemas.
 * EVIDENCE: C-GRM-001 C-GRM-002 C-GRM-003 C-GRM-005 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/cfg.h"
#include "grammar/json_schema.h"
#include "grammar/lexer.h"
#include "grammar/matcher.h"
#include "grammar/regex.h"
#include "grammar/toktrie.h"
#include "testing/check.h"

static unsigned next(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return (*s >> 16) & 0x7FFF;
}

/* ---- parse errors ---------------------------------------------------------------------------- */

static void test_parse_errors(void) {
  static const struct {
    const char *src;
    fer_status want;
  } cases[] = {
      {"(ab", FER_STATUS_BAD_FORMAT},       {"ab)", FER_STATUS_BAD_FORMAT},
      {"[ab", FER_STATUS_BAD_FORMAT},       {"*a", FER_STATUS_BAD_FORMAT},
      {"a{2", FER_STATUS_BAD_FORMAT},       {"a{3,2}", FER_STATUS_BAD_FORMAT},
      {"[z-a]", FER_STATUS_BAD_FORMAT},     {"\\x{110000}", FER_STATUS_BAD_FORMAT},
      {"\\xZZ", FER_STATUS_BAD_FORMAT},     {"a\\", FER_STATUS_BAD_FORMAT},
      {"(?=a)", FER_STATUS_UNSUPPORTED},    {"(?i)a", FER_STATUS_UNSUPPORTED},
      {"\\bfoo", FER_STATUS_UNSUPPORTED},   {"\\p{L}", FER_STATUS_UNSUPPORTED},
      {"\\1", FER_STATUS_UNSUPPORTED},      {"[a&&b]", FER_STATUS_UNSUPPORTED},
      {"a^b", FER_STATUS_UNSUPPORTED},      {"a{100001}", FER_STATUS_INVALID_ARG},
      {"\xff", FER_STATUS_BAD_FORMAT},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    feri_rx rx;
    const fer_status st = feri_rx_parse(cases[i].src, strlen(cases[i].src), &rx);
    if (st != cases[i].want) printf("  parse %s: status %d, want %d\n", cases[i].src, (int)st, (int)cases[i].want);
    CHECK(st == cases[i].want);
    char msg[256] = "";
    size_t ml = 0;
    (void)fer_last_error_message(msg, sizeof msg, &ml);
    CHECK(strstr(msg, "at byte") != NULL || st == FER_STATUS_INVALID_ARG);
    CHECK(rx.nodes == NULL && rx.n_nodes == 0);
  }
  feri_grammar *g = NULL; /* an expression with no word at all */
  CHECK_STATUS(feri_grammar_from_regex("[^\\x{0}-\\x{10FFFF}]", 19, &g), FER_STATUS_INVALID_ARG);
  CHECK(g == NULL);
  /* nested counted repetition past the automaton bound is refused, not run out of memory */
  CHECK_STATUS(feri_grammar_from_regex("((a{1000}){1000}){100}", 22, &g), FER_STATUS_INVALID_ARG);
  CHECK(g == NULL);
}

/* ---- whole words and prefixes against PCRE2 ------------------------------------------------- */

/* 1 when bytes s[0 .. n) are a word (full = 1) or a prefix of one (full = 0) of the DFA. */
static int dfa_accepts(feri_dfa *d, const uint8_t *s, size_t n, int full) {
  const uint32_t lex = 0;
  uint32_t st = feri_dfa_start(d, &lex, 1);
  for (size_t i = 0; i < n && st != 0; i++) st = feri_dfa_step(d, st, s[i]);
  if (st == 0) return 0;
  if (!full) return 1;
  uint32_t na;
  (void)feri_dfa_accepts(d, st, &na);
  return na > 0;
}

static const char *ATOMS[] = {"a", "b", "c", "\xc3\xa9", "\xe4\xb8\xad", "[ab]", "[^a]", ".", "[a-c\xc3\xa9]", "\\x{4e2d}",
                              "(?:ab|c)", "x"};

static void gen(unsigned *s, char *out, size_t cap, int depth) {
  const unsigned r = next(s) % (depth > 3 ? 3 : 9);
  char a[256] = "", b[256] = "";
  if (r < 3) {
    snprintf(out, cap, "%s", ATOMS[next(s) % (sizeof ATOMS / sizeof ATOMS[0])]);
    return;
  }
  gen(s, a, sizeof a, depth + 1);
  switch (r) {
    case 3: gen(s, b, sizeof b, depth + 1), snprintf(out, cap, "%s%s", a, b); break;
    case 4: gen(s, b, sizeof b, depth + 1), snprintf(out, cap, "(?:%s|%s)", a, b); break;
    case 5: snprintf(out, cap, "(?:%s)*", a); break;
    case 6: snprintf(out, cap, "(?:%s)+", a); break;
    case 7: snprintf(out, cap, "(?:%s)?", a); break;
    default: snprintf(out, cap, "(?:%s){%u,%u}", a, next(s) % 3, 2 + next(s) % 2); break;
  }
}

static void test_language_against_pcre2(void) {
  unsigned s = 7;
  static const char *LETTERS[] = {"a", "b", "c", "x", "\xc3\xa9", "\xe4\xb8\xad", "\n"};
  int bad = 0, words = 0, prefixes = 0, checks = 0;
  for (int e = 0; e < 300; e++) {
    char src[256];
    gen(&s, src, sizeof src, 0);
    feri_grammar *g = NULL;
    if (feri_grammar_from_regex(src, strlen(src), &g) != FER_STATUS_OK) continue; /* an empty language */
    char anchored[300];
    snprintf(anchored, sizeof anchored, "(?:%s)\\z", src); /* PCRE2's end anchor allows partial matching */
    int err;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)anchored, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_ANCHORED, &err, &off, NULL);
    CHECK(re != NULL);
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    feri_dfa d;
    CHECK_STATUS(feri_dfa_init(&d, &g->nfa), FER_STATUS_OK);
    for (int k = 0; k < 60; k++) {
      uint8_t str[64];
      size_t n = 0;
      const int len = (int)(next(&s) % 7);
      for (int i = 0; i < len; i++) {
        const char *l = LETTERS[next(&s) % 7];
        memcpy(str + n, l, strlen(l));
        n += strlen(l);
      }
      const int full = pcre2_match(re, str, n, 0, 0, md, NULL) >= 0;
      const int part = pcre2_match(re, str, n, 0, PCRE2_PARTIAL_HARD, md, NULL);
      /* PCRE2 reports no partial match of the empty string: every language here has a word */
      const int prefix = n == 0 || full || part == PCRE2_ERROR_PARTIAL || part >= 0;
      /* byte-level: cut the string inside its last character too, when it has more than one byte */
      const int got_full = dfa_accepts(&d, str, n, 1), got_prefix = dfa_accepts(&d, str, n, 0);
      if (got_full != full || got_prefix != prefix) {
        if (bad < 5) printf("  /%s/ on \"%.*s\": word %d/%d prefix %d/%d\n", src, (int)n, str, got_full, full, got_prefix, prefix);
        bad++;
      }
      words += full;
      prefixes += prefix;
      checks++;
      if (n > 1 && (str[n - 1] & 0xC0) == 0x80) { /* a cut character is a prefix when the whole one is */
        size_t cut = n - 1;
        while (cut > 0 && (str[cut] & 0xC0) == 0x80) cut--;
        if (dfa_accepts(&d, str, cut + 1, 0) != prefix && prefix) bad++;
      }
    }
    feri_dfa_free(&d);
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    feri_grammar_free(g);
  }
  printf("  language: %d strings, %d words, %d prefixes, %d disagreements with PCRE2\n", checks, words, prefixes, bad);
  CHECK(bad == 0 && checks > 10000 && words > 500 && prefixes > words);
}

static void test_unicode_classes(void) {
  static const struct {
    const char *re, *s;
    int want;
  } cases[] = {
      {"\\d", "7", 1},          {"\\d", "\xd9\xa3", 1},  /* U+0663 ARABIC-INDIC DIGIT THREE */
      {"\\d", "a", 0},          {"\\D", "a", 1},         {"\\D", "\xd9\xa3", 0},
      {"\\w", "_", 1},          {"\\w", "\xc3\xa9", 1},  /* é */
      {"\\w", "\xcc\x81", 1},   /* U+0301 combining acute: a mark */
      {"\\w", "-", 0},          {"\\W", "-", 1},
      {"\\s", " ", 1},          {"\\s", "\xc2\xa0", 1},  /* no-break space */
      {"\\s", "\xe2\x80\x83", 1}, {"\\s", "x", 0},      {"\\S", "x", 1},
      {"[\\d\\s]+", "1 \xd9\xa3", 1}, {"[^\\d]", "5", 0}, {".", "\n", 0}, {".", "\xf0\x9f\x98\x80", 1},
      {"\\u00e9|\\u{4e2d}", "\xe4\xb8\xad", 1}, {"^ab$", "ab", 1}, {"a\\.b", "a.b", 1}, {"a\\.b", "axb", 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    feri_grammar *g = NULL;
    CHECK_STATUS(feri_grammar_from_regex(cases[i].re, strlen(cases[i].re), &g), FER_STATUS_OK);
    if (!g) continue;
    feri_dfa d;
    CHECK_STATUS(feri_dfa_init(&d, &g->nfa), FER_STATUS_OK);
    const int got = dfa_accepts(&d, (const uint8_t *)cases[i].s, strlen(cases[i].s), 1);
    if (got != cases[i].want) printf("  /%s/ on \"%s\": %d, want %d\n", cases[i].re, cases[i].s, got, cases[i].want);
    CHECK(got == cases[i].want);
    feri_dfa_free(&d);
    feri_grammar_free(g);
  }
}

/* ---- trie and masks -------------------------------------------------------------------------- */

typedef struct vocab {
  uint32_t n;
  uint8_t **bytes;
  uint32_t *lens;
  uint8_t *include;
} vocab;

/* Random tokens over pieces of ASCII, é, 中 and lone bytes of them (byte-level vocabularies hold
 * halves of characters), some repeated, a few left out (control tokens). */
static vocab make_vocab(unsigned *s, uint32_t n) {
  static const char *PIECES[] = {"a", "b", "c", "x", "1", " ", "\"", "{", "\xc3", "\xa9", "\xc3\xa9", "\xe4", "\xb8\xad",
                                 "\xe4\xb8\xad", "\n"};
  vocab v = {n, calloc(n, sizeof(uint8_t *)), calloc(n, sizeof(uint32_t)), calloc(n, 1)};
  for (uint32_t t = 0; t < n; t++) {
    uint8_t buf[32];
    uint32_t len = 0;
    if (t > 0 && next(s) % 17 == 0) { /* a duplicate of an earlier token */
      const uint32_t o = next(s) % t;
      memcpy(buf, v.bytes[o], v.lens[o]);
      len = v.lens[o];
    } else {
      const int k = 1 + (int)(next(s) % 4);
      for (int i = 0; i < k; i++) {
        const char *p = PIECES[next(s) % (sizeof PIECES / sizeof PIECES[0])];
        memcpy(buf + len, p, strlen(p));
        len += (uint32_t)strlen(p);
      }
    }
    v.bytes[t] = malloc(len ? len : 1);
    memcpy(v.bytes[t], buf, len);
    v.lens[t] = len;
    v.include[t] = next(s) % 29 != 0;
  }
  return v;
}

static void free_vocab(vocab *v) {
  for (uint32_t t = 0; t < v->n; t++) free(v->bytes[t]);
  free(v->bytes), free(v->lens), free(v->include);
}

static void test_trie(void) {
  unsigned s = 11;
  vocab v = make_vocab(&s, 3000);
  feri_toktrie t;
  CHECK_STATUS(feri_toktrie_build((const uint8_t *const *)v.bytes, v.lens, v.n, v.include, &t), FER_STATUS_OK);
  uint8_t *seen = calloc(v.n, 1), path[64];
  int bad = 0;
  CHECK(t.subtree[0] == t.n_nodes && t.depth[0] == 0);
  for (uint32_t i = 1; i < t.n_nodes; i++) {
    path[t.depth[i] - 1] = t.byte[i];
    const uint32_t end = i + t.subtree[i];
    bad += end > t.n_nodes || (end < t.n_nodes && t.depth[end] > t.depth[i]); /* the subtree ends there */
    for (uint32_t k = i + 1; k < end && k < t.n_nodes; k++) bad += t.depth[k] <= t.depth[i];
    if (i + 1 < t.n_nodes && t.depth[i + 1] == t.depth[i] + 0 && t.byte[i + 1] <= t.byte[i]) bad++; /* siblings in order */
    if (t.token[i] >= 0) {
      const uint32_t id = (uint32_t)t.token[i];
      bad += seen[id]++ != 0 || v.lens[id] != t.depth[i] || memcmp(v.bytes[id], path, t.depth[i]) != 0 || !v.include[id];
    }
  }
  for (uint32_t k = 0; k < t.n_dups; k++) {
    const uint32_t id = (uint32_t)t.dup_token[k], node = t.dup_node[k];
    bad += seen[id]++ != 0 || t.token[node] < 0 || v.lens[id] != v.lens[t.token[node]] ||
           memcmp(v.bytes[id], v.bytes[t.token[node]], v.lens[id]) != 0;
  }
  for (uint32_t id = 0; id < v.n; id++) bad += seen[id] != (v.include[id] && v.lens[id] > 0);
  printf("  trie: %u tokens, %u nodes, %u duplicates, %d defects\n", v.n, t.n_nodes, t.n_dups, bad);
  CHECK(bad == 0 && t.n_dups > 0);
  free(seen);
  feri_toktrie_free(&t);
  free_vocab(&v);
}

/* The allowed set by brute force: each token tried with accept and taken back. */
static void brute_mask(feri_matcher *m, const vocab *v, uint32_t *mask) {
  memset(mask, 0, feri_mask_words(v->n) * 4);
  if (feri_matcher_is_ended(m)) {
    feri_mask_set(mask, (uint32_t)m->eos);
    return;
  }
  for (uint32_t t = 0; t < v->n; t++) {
    if ((int32_t)t == m->eos || feri_matcher_accept(m, (int32_t)t) != FER_STATUS_OK) continue;
    feri_mask_set(mask, t);
    CHECK_STATUS(feri_matcher_rollback(m, 1), FER_STATUS_OK);
  }
  if (m->eos >= 0 && feri_matcher_is_accepting(m)) feri_mask_set(mask, (uint32_t)m->eos);
}

static void test_masks(void) {
  static const char *RES[] = {"[a-c]{2}x", "(ab|c\xc3\xa9)*", "\"[^\"\\n]*\"", "\\d+", "\xe4\xb8\xad+ ?[abc]{0,3}",
                              "\\{\"a\": (1|\"[a-z]*\")\\}", ".*x"};
  unsigned s = 21;
  vocab v = make_vocab(&s, 4000);
  const int32_t eos = 3999;
  v.include[eos] = 0; /* a control token */
  feri_toktrie t;
  CHECK_STATUS(feri_toktrie_build((const uint8_t *const *)v.bytes, v.lens, v.n, v.include, &t), FER_STATUS_OK);
  const size_t W = feri_mask_words(v.n);
  uint32_t *got = malloc(W * 4 + 8), *want = malloc(W * 4);
  int bad = 0, steps = 0, ends = 0;
  for (size_t r = 0; r < sizeof RES / sizeof RES[0]; r++) {
    feri_grammar *g = NULL;
    CHECK_STATUS(feri_grammar_from_regex(RES[r], strlen(RES[r]), &g), FER_STATUS_OK);
    for (int walk = 0; walk < 6 && g; walk++) {
      feri_matcher *m = NULL;
      CHECK_STATUS(feri_matcher_new(g, &t, eos, &m), FER_STATUS_OK);
      for (int step = 0; step < 12 && m; step++) {
        got[W] = got[W + 1] = 0xDEADBEEF;
        CHECK_STATUS(feri_matcher_fill_mask(m, got, W + 2), FER_STATUS_OK);
        CHECK(got[W] == 0 && got[W + 1] == 0); /* words past the vocabulary zeroed */
        brute_mask(m, &v, want);
        bad += memcmp(got, want, W * 4) != 0;
        steps++;
        uint32_t allowed[4096], n = 0;
        for (uint32_t k = 0; k < v.n; k++)
          if (feri_mask_get(got, k)) allowed[n++] = k;
        if (n == 0) break;
        /* a token the mask refuses is refused by accept, nothing changed */
        for (uint32_t k = 0; k < v.n; k++)
          if (!feri_mask_get(got, k) && k != (uint32_t)eos) {
            const uint32_t before = feri_matcher_n_tokens(m);
            CHECK_STATUS(feri_matcher_accept(m, (int32_t)k), FER_STATUS_INVALID_ARG);
            CHECK(feri_matcher_n_tokens(m) == before);
            break;
          }
        const uint32_t pick = allowed[next(&s) % n];
        CHECK_STATUS(feri_matcher_accept(m, (int32_t)pick), FER_STATUS_OK);
        if (pick == (uint32_t)eos) {
          ends++;
          CHECK(feri_matcher_is_ended(m) && !feri_matcher_is_accepting(m));
          CHECK_STATUS(feri_matcher_fill_mask(m, got, W), FER_STATUS_OK);
          uint32_t any = 0;
          for (size_t w = 0; w < W; w++) any += (uint32_t)__builtin_popcount(got[w]);
          CHECK(any == 1 && feri_mask_get(got, (uint32_t)eos)); /* only the end after the end */
          CHECK_STATUS(feri_matcher_accept(m, (int32_t)allowed[0]), FER_STATUS_INVALID_ARG);
          break;
        }
      }
      if (m) { /* rollback to the start gives the first mask again */
        const uint32_t n = feri_matcher_n_tokens(m);
        CHECK_STATUS(feri_matcher_rollback(m, n + 1), FER_STATUS_INVALID_ARG);
        CHECK_STATUS(feri_matcher_rollback(m, n), FER_STATUS_OK);
        CHECK(feri_matcher_n_tokens(m) == 0 && !feri_matcher_is_ended(m));
        CHECK_STATUS(feri_matcher_fill_mask(m, got, W), FER_STATUS_OK);
        brute_mask(m, &v, want);
        bad += memcmp(got, want, W * 4) != 0;
      }
      CHECK_STATUS(feri_matcher_fill_mask(m, got, W - 1), FER_STATUS_BUFFER_TOO_SMALL);
      feri_matcher_free(m);
    }
    feri_grammar_free(g);
  }
  printf("  masks: %d steps over %zu expressions, %d ended, %d differ from brute force\n", steps,
         sizeof RES / sizeof RES[0], ends, bad);
  CHECK(bad == 0 && steps > 100 && ends > 0);
  free(got), free(want);
  feri_toktrie_free(&t);
  free_vocab(&v);
}

/* A vocabulary of the 256 bytes, one token each, and 256 = end of sequence (no bytes). */
static feri_toktrie byte_trie(void) {
  feri_toktrie t;
  CHECK_STATUS(feri_toktrie_build_bytes(&t), FER_STATUS_OK);
  return t;
}

/* A grammar built by hand over four lexemes, left recursion included:
 *   S -> "[" L "]" | "[" "]";  L -> V | L "," V;  V -> NUM | STR | S;  NUM = [0-9]+, STR = "[a-z]*"
 * fed one byte per token: words, prefixes and refusals as written out here. */
static int32_t lexeme(feri_cfg *g, const char *re) {
  uint32_t root;
  CHECK_STATUS(feri_rx_parse_into(&g->rx, re, strlen(re), &root), FER_STATUS_OK);
  return feri_cfg_lexeme(g, root);
}

static feri_grammar *list_grammar(void) {
  feri_cfg g;
  CHECK_STATUS(feri_cfg_init(&g), FER_STATUS_OK);
  const uint32_t S = feri_cfg_nonterm(&g), L = feri_cfg_nonterm(&g), V = feri_cfg_nonterm(&g);
  const int32_t open = lexeme(&g, "\\["), close = lexeme(&g, "\\]"), comma = lexeme(&g, ","),
                num = lexeme(&g, "[0-9]+"), str = lexeme(&g, "\"[a-z]*\"");
  const int32_t r1[] = {open, (int32_t)L, close}, r2[] = {open, close}, r3[] = {(int32_t)V},
                r4[] = {(int32_t)L, comma, (int32_t)V}, r5[] = {num}, r6[] = {str}, r7[] = {(int32_t)S};
  feri_cfg_rule(&g, S, r1, 3), feri_cfg_rule(&g, S, r2, 2), feri_cfg_rule(&g, L, r3, 1);
  feri_cfg_rule(&g, L, r4, 3), feri_cfg_rule(&g, V, r5, 1), feri_cfg_rule(&g, V, r6, 1), feri_cfg_rule(&g, V, r7, 1);
  CHECK_STATUS(feri_cfg_finish(&g, S), FER_STATUS_OK);
  feri_grammar *out = NULL;
  CHECK_STATUS(feri_grammar_from_cfg(&g, &out), FER_STATUS_OK);
  return out;
}

static void test_cfg(void) {
  feri_grammar *g = list_grammar();
  if (!g) return;
  feri_toktrie t = byte_trie();
  static const struct {
    const char *s;
    int word, prefix;
  } cases[] = {
      {"[]", 1, 1},          {"[1]", 1, 1},         {"[12,\"ab\",[]]", 1, 1}, {"[[[1],2],[3]]", 1, 1},
      {"[", 0, 1},           {"[12", 0, 1},         {"[\"a", 0, 1},          {"[1,", 0, 1},
      {"[,", 0, 0},          {"[1,]", 0, 0},        {"]", 0, 0},             {"[1][", 0, 0},
      {"[1 ]", 0, 0},        {"[\"A\"]", 0, 0},     {"[]]", 0, 0},           {"[1,2,3,4,5,6,7,8,9,10]", 1, 1},
  };
  int bad = 0;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    feri_matcher *m = NULL;
    CHECK_STATUS(feri_matcher_new(g, &t, 256, &m), FER_STATUS_OK);
    if (!m) continue;
    int prefix = 1;
    for (const char *p = cases[c].s; *p && prefix; p++) prefix = feri_matcher_accept(m, (uint8_t)*p) == FER_STATUS_OK;
    const int word = prefix && feri_matcher_is_accepting(m);
    if (word != cases[c].word || prefix != cases[c].prefix) {
      printf("  cfg \"%s\": word %d prefix %d, want %d %d\n", cases[c].s, word, prefix, cases[c].word, cases[c].prefix);
      bad++;
    }
    if (prefix) { /* the mask agrees: end of sequence exactly at words */
      uint32_t mask[9];
      CHECK_STATUS(feri_matcher_fill_mask(m, mask, 9), FER_STATUS_OK);
      bad += feri_mask_get(mask, 256) != word;
    }
    feri_matcher_free(m);
  }
  CHECK(bad == 0);
  /* masks on a random vocabulary against accept-and-rollback, along random paths */
  unsigned s = 5;
  vocab v = make_vocab(&s, 2000);
  static const char *PIECES[] = {"[", "]", ",", "1", "2", "\"", "a", "[1", "],", "\"]", ",\"", "[[", "]]", "12", "ab"};
  for (uint32_t k = 0; k < v.n; k++) { /* this grammar's alphabet */
    const char *p = PIECES[next(&s) % 15], *q = PIECES[next(&s) % 15];
    free(v.bytes[k]);
    v.lens[k] = (uint32_t)(strlen(p) + (k % 3 ? strlen(q) : 0));
    v.bytes[k] = malloc(v.lens[k]);
    memcpy(v.bytes[k], p, strlen(p));
    if (k % 3) memcpy(v.bytes[k] + strlen(p), q, strlen(q));
  }
  feri_toktrie t2;
  CHECK_STATUS(feri_toktrie_build((const uint8_t *const *)v.bytes, v.lens, v.n, v.include, &t2), FER_STATUS_OK);
  const size_t W = feri_mask_words(v.n);
  uint32_t *got = malloc(W * 4), *want = malloc(W * 4);
  int steps = 0, differ = 0;
  for (int walk = 0; walk < 40; walk++) {
    feri_matcher *m = NULL;
    CHECK_STATUS(feri_matcher_new(g, &t2, 1999, &m), FER_STATUS_OK);
    for (int step = 0; step < 25 && m; step++) {
      CHECK_STATUS(feri_matcher_fill_mask(m, got, W), FER_STATUS_OK);
      brute_mask(m, &v, want);
      differ += memcmp(got, want, W * 4) != 0;
      steps++;
      uint32_t allowed[2000], n = 0;
      for (uint32_t k = 0; k < v.n; k++)
        if (feri_mask_get(got, k) && k != 1999) allowed[n++] = k;
      if (n == 0) break;
      CHECK_STATUS(feri_matcher_accept(m, (int32_t)allowed[next(&s) % n]), FER_STATUS_OK);
    }
    feri_matcher_free(m);
  }
  printf("  cfg: %zu strings as written, %d masks along random paths, %d differ from accept-and-rollback\n",
         sizeof cases / sizeof cases[0], steps, differ);
  CHECK(differ == 0 && steps > 100);
  free(got), free(want);
  feri_toktrie_free(&t2);
  free_vocab(&v);
  feri_toktrie_free(&t);
  feri_grammar_free(g);
}

/* JSON Schema: what is refused and how, and a few words and non-words of compiled schemas fed one
 * byte per token (the goldens compare masks with llguidance; this checks the refusals). */
static void test_json_schema(void) {
  static const struct {
    const char *schema;
    fer_status want;
    const char *in_message;
  } bad[] = {
      {"{\"type\": \"string\"", FER_STATUS_BAD_FORMAT, "at byte"},
      {"{\"type\": \"strin\"}", FER_STATUS_INVALID_ARG, "invalid type: strin"},
      {"{\"type\": 3}", FER_STATUS_INVALID_ARG, "type must be"},
      {"{\"type\": \"string\", \"minLength\": -1}", FER_STATUS_INVALID_ARG, "minLength"},
      {"{\"type\": \"string\", \"minLength\": 5, \"maxLength\": 2}", FER_STATUS_INVALID_ARG, "no string"},
      {"{\"type\": \"object\", \"properties\": {\"a\": {\"not\": {}}}}", FER_STATUS_UNSUPPORTED, "/properties/a: unsupported keyword not"},
      {"{\"type\": \"string\", \"pattern\": \"(?=a)\"}", FER_STATUS_UNSUPPORTED, "/pattern: a pattern that is not"},
      {"{\"type\": \"string\", \"format\": \"uri-reference\"}", FER_STATUS_UNSUPPORTED, "unknown format: uri-reference"},
      {"{\"type\": \"array\", \"uniqueItems\": true}", FER_STATUS_UNSUPPORTED, "unsupported keyword uniqueItems"},
      {"{\"properties\": {\"p\": {\"oneOf\": [{\"type\": \"integer\"}, {\"type\": \"number\"}]}}}", FER_STATUS_UNSUPPORTED,
       "/properties/p/oneOf: oneOf whose options are not provably disjoint"},
      {"{\"oneOf\": [{\"const\": 1}, {\"const\": 2}]}", FER_STATUS_UNSUPPORTED, "oneOf"}, /* numbers: as llguidance */
      {"{\"allOf\": [{\"type\": \"string\"}, {\"type\": \"integer\"}]}", FER_STATUS_INVALID_ARG, "/allOf: allOf of types"},
      {"{\"allOf\": [{\"enum\": [1]}, {\"enum\": [2]}]}", FER_STATUS_UNSUPPORTED, "more than one of its schemas: enum"},
      {"{\"allOf\": [{\"$ref\": \"#\"}]}", FER_STATUS_UNSUPPORTED, "recursion"},
      {"{\"patternProperties\": {\"a\": {}, \"b\": {}}}", FER_STATUS_UNSUPPORTED, "patternProperties whose patterns"},
      {"{\"properties\": {\"a\": {}}, \"minProperties\": 2}", FER_STATUS_UNSUPPORTED, "minProperties/maxProperties"},
      {"{\"type\": \"number\", \"multipleOf\": -2}", FER_STATUS_INVALID_ARG, "multipleOf"},
      /* an empty intersection is refused, as llguidance refuses it (once fed to a matcher whose
       * lexer had no accepting state at all: scripts/fuzz-grammar.sh json) */
      {"{\"allOf\": [{\"type\": \"string\"}, {\"maxLength\": 4, \"pattern\": \"^Ka-z]+$\"}]}", FER_STATUS_INVALID_ARG,
       "no string satisfies"},
      {"{\"type\": \"number\", \"minimum\": 2, \"exclusiveMaximum\": 2}", FER_STATUS_INVALID_ARG, "no number"},
      {"{\"$ref\": \"#/$defs/missing\"}", FER_STATUS_INVALID_ARG, "leads nowhere"},
      {"false", FER_STATUS_INVALID_ARG, "no value"},
      {"{\"enum\": []}", FER_STATUS_INVALID_ARG, "enum"},
      {"{\"type\": \"array\", \"minItems\": 3, \"maxItems\": 1}", FER_STATUS_INVALID_ARG, "minItems"},
      {"{\"type\": \"integer\", \"minimum\": 3, \"exclusiveMaximum\": 3}", FER_STATUS_INVALID_ARG, "no integer"},
      {"{\"type\": \"integer\", \"exclusiveMinimum\": true}", FER_STATUS_UNSUPPORTED, "exclusiveMinimum"},
      {"{\"x-guidance\": {\"lenient\": true}}", FER_STATUS_UNSUPPORTED, "lenient"},
      {"{\"x-guidance\": {\"item_separator\": \"(\"}}", FER_STATUS_INVALID_ARG, "separator"},
      {"{\"type\": \"object\", \"required\": [\"a\"], \"additionalProperties\": false}", FER_STATUS_INVALID_ARG, "required"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    feri_grammar *g = (feri_grammar *)&bad; /* must come back NULL */
    const fer_status st = feri_grammar_from_json_schema(bad[i].schema, strlen(bad[i].schema), NULL, &g);
    char msg[512] = "";
    size_t ml = 0;
    (void)fer_last_error_message(msg, sizeof msg, &ml);
    if (st != bad[i].want || !strstr(msg, bad[i].in_message))
      printf("  schema %s: status %d (%s), want %d with \"%s\"\n", bad[i].schema, (int)st, msg, (int)bad[i].want, bad[i].in_message);
    CHECK(st == bad[i].want && strstr(msg, bad[i].in_message) != NULL && g == NULL);
  }
  /* words and non-words, one byte per token */
  feri_toktrie t = byte_trie();
  static const struct {
    const char *schema, *text;
    int word;
  } cases[] = {
      {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}", "{\"a\": 1}", 1},
      {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}", " {\"a\":1}", 0},
      {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}", "{\"a\":1} ", 0},
      {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}", "{\"a\":01}", 0},
      {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}", "{\"a\":1,\"a\":2}", 0},
      {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}", "{\"a\":1,\"b\":[true]}", 1},
      {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{}}}", "{\"b\":1,\"a\":2}", 0},
      {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{}}}", "{}", 1},
      {"{\"type\":\"string\"}", "\"a\\/b\"", 0},
      {"{\"type\":\"string\"}", "\"\\u001f\\n\xc3\xa9\"", 1},
      {"{\"type\":\"number\"}", "-0.5e+10", 1},
      {"{\"type\":\"number\"}", ".5", 0},
      {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"maxItems\":2}", "[1, 2]", 1},
      {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"maxItems\":2}", "[1,2,3]", 0},
      {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"}}", "[1,]", 0},
      {"{\"const\":\"a\\nb\"}", "\"a\\u000Ab\"", 1},
      {"{\"enum\":[2.0, -0.0]}", "2", 1},
      {"{\"enum\":[2.0, -0.0]}", "2.0", 0},
      {"{\"$defs\":{\"l\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/l\"}}},\"$ref\":\"#/$defs/l\"}", "[[],[[]]]", 1},
      {"{\"type\":\"integer\",\"minimum\":-5,\"maximum\":123}", "-0", 1}, /* llguidance's range admits -0 */
      {"{\"type\":\"integer\",\"minimum\":-5,\"maximum\":123}", "124", 0},
      {"{\"type\":\"integer\",\"minimum\":-5,\"maximum\":123}", "-6", 0},
      {"{\"type\":\"integer\",\"minimum\":-5,\"maximum\":123}", "99", 1},
      {"{\"type\":\"integer\",\"exclusiveMinimum\":9}", "10", 1},
      {"{\"type\":\"integer\",\"exclusiveMinimum\":9}", "9", 0},
      {"{\"type\":\"integer\",\"maximum\":-3}", "-3", 1},
      {"{\"type\":\"integer\",\"maximum\":-3}", "-2", 0},
      /* pattern: a search unless anchored; \\d ASCII; with lengths and formats intersected (&) */
      {"{\"type\":\"string\",\"pattern\":\"[0-9]{2}\"}", "\"ab12cd\"", 1},
      {"{\"type\":\"string\",\"pattern\":\"[0-9]{2}\"}", "\"ab1cd\"", 0},
      {"{\"type\":\"string\",\"pattern\":\"^a|b$\"}", "\"axx\"", 1},
      {"{\"type\":\"string\",\"pattern\":\"^a|b$\"}", "\"xxb\"", 1},
      {"{\"type\":\"string\",\"pattern\":\"^a|b$\"}", "\"xax\"", 0},
      {"{\"type\":\"string\",\"pattern\":\"^\\\\d+$\"}", "\"123\"", 1},
      {"{\"type\":\"string\",\"pattern\":\"^\\\\d+$\"}", "\"1\xd9\xa3\"", 0}, /* Arabic-Indic three: not ASCII */
      {"{\"type\":\"string\",\"pattern\":\"^a.b$\"}", "\"a\\nb\"", 0},
      {"{\"type\":\"string\",\"pattern\":\"^a\\\\sb$\"}", "\"a\\u000ab\"", 1},
      {"{\"type\":\"string\",\"pattern\":\"^[a-z]+$\",\"maxLength\":3}", "\"abc\"", 1},
      {"{\"type\":\"string\",\"pattern\":\"^[a-z]+$\",\"maxLength\":3}", "\"abcd\"", 0},
      {"{\"type\":\"string\",\"pattern\":\"^[a-z]+$\",\"minLength\":2}", "\"a\"", 0},
      {"{\"type\":\"string\",\"format\":\"date\"}", "\"2024-02-29\"", 1},
      {"{\"type\":\"string\",\"format\":\"date\"}", "\"2024-02-30\"", 0},
      {"{\"type\":\"string\",\"format\":\"date-time\"}", "\"2024-01-15T08:30:00.5+02:00\"", 1},
      {"{\"type\":\"string\",\"format\":\"date-time\"}", "\"2024-01-15 08:30:00Z\"", 0},
      {"{\"type\":\"string\",\"format\":\"time\"}", "\"23:59:60z\"", 1},
      {"{\"type\":\"string\",\"format\":\"uuid\"}", "\"123e4567-E89B-12d3-a456-426614174000\"", 1},
      {"{\"type\":\"string\",\"format\":\"uuid\"}", "\"123e4567-e89b-12d3-a456-42661417400\"", 0},
      {"{\"type\":\"string\",\"format\":\"email\"}", "\"a.b+c@x-y.org\"", 1},
      {"{\"type\":\"string\",\"format\":\"email\"}", "\"a@b@c\"", 0},
      {"{\"type\":\"string\",\"format\":\"email\",\"maxLength\":5}", "\"a@b.c\"", 1},
      {"{\"type\":\"string\",\"format\":\"email\",\"maxLength\":5}", "\"ab@c.d\"", 0},
      {"{\"type\":\"string\",\"format\":\"ipv4\"}", "\"255.0.10.1\"", 1},
      {"{\"type\":\"string\",\"format\":\"ipv4\"}", "\"256.0.0.1\"", 0},
      {"{\"type\":\"string\",\"pattern\":\"a\\\"b\"}", "\"a\\\"b\"", 1},
      /* number ranges (no exponent once bounded), multipleOf, const numbers */
      {"{\"type\":\"number\",\"minimum\":-1.5,\"maximum\":10.25}", "10.25", 1},
      {"{\"type\":\"number\",\"minimum\":-1.5,\"maximum\":10.25}", "10.250", 0},
      {"{\"type\":\"number\",\"minimum\":-1.5,\"maximum\":10.25}", "-1.51", 0},
      {"{\"type\":\"number\",\"minimum\":-1.5,\"maximum\":10.25}", "-0", 0},
      {"{\"type\":\"number\",\"minimum\":-1.5,\"maximum\":10.25}", "1e1", 0},
      {"{\"type\":\"number\",\"exclusiveMinimum\":0}", "0.001", 1},
      {"{\"type\":\"number\",\"exclusiveMinimum\":0}", "0", 0},
      {"{\"type\":\"number\",\"exclusiveMinimum\":0}", "123456.5", 1},
      {"{\"type\":\"integer\",\"multipleOf\":3}", "-27", 1},
      {"{\"type\":\"integer\",\"multipleOf\":3}", "28", 0},
      {"{\"type\":\"number\",\"multipleOf\":0.25}", "1.75", 1},
      {"{\"type\":\"number\",\"multipleOf\":0.25}", "1.5", 0}, /* derivre forces both digits: 1.50 */
      {"{\"type\":\"number\",\"multipleOf\":0.25}", "1.50", 1},
      {"{\"type\":\"number\",\"multipleOf\":0.25}", "1.3", 0},
      {"{\"type\":\"number\",\"multipleOf\":0.5}", "2.5", 1},
      {"{\"type\":\"number\",\"multipleOf\":0.5}", "2.50", 0},
      {"{\"const\":1.5}", "1.5", 1},
      {"{\"const\":1.5}", "1.50", 0},
      /* oneOf as anyOf, allOf merged, patternProperties, minProperties, compound consts */
      {"{\"oneOf\":[{\"type\":\"string\"},{\"type\":\"null\"}]}", "null", 1},
      {"{\"oneOf\":[{\"properties\":{\"k\":{\"const\":\"a\"}},\"required\":[\"k\"],\"type\":\"object\"},"
       "{\"properties\":{\"k\":{\"const\":\"b\"}},\"required\":[\"k\"],\"type\":\"object\"}]}", "{\"k\":\"b\"}", 1},
      {"{\"allOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]},"
       "{\"properties\":{\"a\":{\"minimum\":5},\"b\":{}},\"required\":[\"b\"]}]}", "{\"a\":5,\"b\":0}", 1},
      {"{\"allOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]},"
       "{\"properties\":{\"a\":{\"minimum\":5},\"b\":{}},\"required\":[\"b\"]}]}", "{\"a\":4,\"b\":0}", 0},
      {"{\"allOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]},"
       "{\"properties\":{\"a\":{\"minimum\":5},\"b\":{}},\"required\":[\"b\"]}]}", "{\"a\":5}", 0}, /* b required too */
      {"{\"allOf\":[{\"type\":\"string\",\"pattern\":\"^a\"},{\"pattern\":\"z$\"}]}", "\"abz\"", 1},
      {"{\"allOf\":[{\"type\":\"string\",\"pattern\":\"^a\"},{\"pattern\":\"z$\"}]}", "\"ab\"", 0},
      {"{\"allOf\":[{\"multipleOf\":2},{\"type\":\"integer\",\"multipleOf\":3}]}", "12", 1},
      {"{\"allOf\":[{\"multipleOf\":2},{\"type\":\"integer\",\"multipleOf\":3}]}", "9", 0},
      {"{\"patternProperties\":{\"^x-\":{\"type\":\"integer\"}},\"type\":\"object\"}", "{\"x-a\":1,\"b\":\"s\"}", 1},
      {"{\"patternProperties\":{\"^x-\":{\"type\":\"integer\"}},\"type\":\"object\"}", "{\"x-a\":\"s\"}", 0},
      {"{\"patternProperties\":{\"^x-\":{\"type\":\"integer\"}},\"additionalProperties\":false}", "{\"b\":1}", 0},
      {"{\"additionalProperties\":{\"type\":\"integer\"},\"minProperties\":1,\"maxProperties\":2,\"type\":\"object\"}", "{}", 0},
      {"{\"additionalProperties\":{\"type\":\"integer\"},\"minProperties\":1,\"maxProperties\":2,\"type\":\"object\"}", "{\"a\":1,\"b\":2}", 1},
      {"{\"additionalProperties\":{\"type\":\"integer\"},\"minProperties\":1,\"maxProperties\":2,\"type\":\"object\"}", "{\"a\":1,\"b\":2,\"c\":3}", 0},
      {"{\"additionalProperties\":{\"type\":\"integer\"},\"minProperties\":2,\"type\":\"object\"}", "{\"a\":1}", 0},
      {"{\"additionalProperties\":{\"type\":\"integer\"},\"minProperties\":2,\"type\":\"object\"}", "{\"a\":1,\"b\":2,\"c\":3}", 1},
      {"{\"properties\":{\"a\":{},\"b\":{}},\"additionalProperties\":false,\"maxProperties\":1,\"type\":\"object\"}", "{\"a\":1,\"b\":2}", 0},
      {"{\"properties\":{\"a\":{},\"b\":{}},\"additionalProperties\":false,\"maxProperties\":1,\"type\":\"object\"}", "{\"b\":2}", 1},
      {"{\"const\":{\"a\":[1,\"x\"]}}", "{ \"a\" : [1 , \"x\"] }", 1},
      {"{\"const\":{\"a\":[1,\"x\"]}}", "{\"a\":[1]}", 0},
      {"{\"enum\":[[true],{}]}", "{}", 1},
      /* a row whose items expect the same lexemes many times over (once a heap overflow, found by
       * scripts/fuzz-grammar.sh json: the allowed list was sized by lexemes, filled per item) */
      {"{\"type\":\"array\",\"items\":{\"anyOf\":[{\"x\":1},{\"y\":2},{\"z\":3},{\"w\":4}]}}", "[1, null, {\"a\": []}]", 1},
  };
  int bad_words = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    feri_grammar *g = NULL;
    CHECK_STATUS(feri_grammar_from_json_schema(cases[i].schema, strlen(cases[i].schema), NULL, &g), FER_STATUS_OK);
    feri_matcher *m = NULL;
    if (g) CHECK_STATUS(feri_matcher_new(g, &t, 256, &m), FER_STATUS_OK);
    if (!m) {
      feri_grammar_free(g);
      continue;
    }
    int ok = 1;
    for (const char *p = cases[i].text; *p && ok; p++) ok = feri_matcher_accept(m, (uint8_t)*p) == FER_STATUS_OK;
    const int word = ok && feri_matcher_is_accepting(m);
    if (word != cases[i].word) {
      printf("  schema %s on %s: word %d, want %d\n", cases[i].schema, cases[i].text, word, cases[i].word);
      bad_words++;
    }
    feri_matcher_free(m);
    feri_grammar_free(g);
  }
  CHECK(bad_words == 0);
  feri_toktrie_free(&t);
}

int main(void) {
  test_parse_errors();
  test_json_schema();
  test_unicode_classes();
  test_language_against_pcre2();
  test_trie();
  test_masks();
  test_cfg();
  return feri_test_finish("grammar_test");
}
