/* engine_grammar_test.c: structured output through the public ABI on the seeded tiny model (no
 * downloads): a sampler applying a sequence's grammar mask generates text in the language for
 * every seed; a token the grammar refuses changes nothing, in prefill and in a batched step; rewind
 * and cancel keep the matcher in step with the sequence; lifetimes are enforced; a pooled matcher
 * starts as a new one.
 * EVIDENCE: C-GRM-007 C-GRM-008 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferrite.h"
#include "testing/check.h"

enum { V = 261 };
static const int32_t PROMPT[12] = {116, 104, 101, 32, 113, 117, 105, 99, 107, 256, 258, 32};
static const char RX[] = "(ab|c)+[0-9]{1,3}";

/* 1 when s is in (ab|c)+[0-9]{1,3}. */
static int in_language(const char *s, size_t n) {
  size_t i = 0, units = 0;
  while (i < n && (s[i] == 'c' || (s[i] == 'a' && i + 1 < n && s[i + 1] == 'b'))) i += s[i] == 'c' ? 1 : 2, units++;
  size_t d = 0;
  while (i + d < n && s[i + d] >= '0' && s[i + d] <= '9') d++;
  return units > 0 && d >= 1 && d <= 3 && i + d == n;
}

typedef struct fixture {
  void *img;
  fer_engine *e;
  const fer_tokenizer *tok;
  fer_grammar_vocab *vocab;
  fer_grammar *g;
} fixture;

static int setup(fixture *f) {
  memset(f, 0, sizeof *f);
  size_t bytes = 0;
  CHECK_STATUS(fer_tiny_model_image("llama", 1, &f->img, &bytes), FER_STATUS_OK);
  fer_engine_config c;
  fer_engine_config_init(&c);
  c.model_image = f->img, c.model_image_bytes = bytes, c.n_threads = 1;
  CHECK_STATUS(fer_engine_create(&c, &f->e), FER_STATUS_OK);
  if (!f->e) return 0;
  CHECK_STATUS(fer_engine_tokenizer(f->e, &f->tok), FER_STATUS_OK);
  CHECK_STATUS(fer_grammar_vocab_create(f->tok, V, -1, &f->vocab), FER_STATUS_OK);
  CHECK_STATUS(fer_grammar_compile(f->vocab, FER_GRAMMAR_REGEX, RX, strlen(RX), 0, &f->g), FER_STATUS_OK);
  return f->g != NULL;
}

static void teardown(fixture *f) {
  CHECK_STATUS(fer_grammar_free(f->g), FER_STATUS_OK);
  CHECK_STATUS(fer_grammar_vocab_free(f->vocab), FER_STATUS_OK);
  CHECK_STATUS(fer_engine_free(f->e), FER_STATUS_OK);
  fer_buffer_free(f->img);
}

static uint32_t matcher_tokens(fer_engine_seq *s) {
  fer_matcher *m = NULL;
  fer_matcher_state st = {0};
  fer_engine_seq_matcher(s, &m);
  if (m) fer_matcher_get_state(m, &st);
  return st.n_tokens;
}

static uint32_t seq_tokens(fer_engine_seq *s) {
  fer_engine_seq_stats st;
  fer_engine_seq_get_stats(s, &st);
  return st.n_tokens;
}

/* C-GRM-007: random sampling through the mask ends in the language, for every seed; every sampled
 * token was allowed by the mask, and the end of sequence came only where the output was a word. */
static void test_constrained_generation(fixture *f) {
  int ok_runs = 0;
  for (uint64_t seed = 1; seed <= 12; seed++) {
    fer_engine_seq *s = NULL;
    CHECK_STATUS(fer_engine_seq_create(f->e, 64, &s), FER_STATUS_OK);
    if (!s) return;
    float lg[V];
    CHECK_STATUS(fer_engine_prefill(s, PROMPT, 12, lg, V), FER_STATUS_OK);
    CHECK_STATUS(fer_engine_seq_set_grammar(s, f->g), FER_STATUS_OK);
    fer_matcher *m = NULL;
    CHECK_STATUS(fer_engine_seq_matcher(s, &m), FER_STATUS_OK);
    fer_sampling_params p;
    fer_sampling_params_init(&p);
    p.seed = seed;
    p.temperature = 1.5f; /* flatter: the walks differ from seed to seed */
    fer_sampler *sm = NULL;
    CHECK_STATUS(fer_sampler_create(&p, &sm), FER_STATUS_OK);
    CHECK_STATUS(fer_sampler_set_matcher(sm, m), FER_STATUS_OK);
    int32_t out[48];
    size_t n = 0;
    int ended = 0;
    while (n < 48) {
      uint32_t mask[(V + 31) / 32];
      CHECK_STATUS(fer_matcher_fill_mask(m, mask, (V + 31) / 32), FER_STATUS_OK);
      int32_t t = -1;
      fer_sampling_context ctx = {PROMPT, 12, out, n};
      uint32_t applied = 0;
      float copy[V];
      memcpy(copy, lg, sizeof copy);
      CHECK_STATUS(fer_sampler_process(sm, copy, V, &ctx, &applied), FER_STATUS_OK);
      CHECK(applied & FER_PROCESSOR_GRAMMAR);
      CHECK_STATUS(fer_sampler_sample(sm, lg, V, &ctx, &t, NULL), FER_STATUS_OK);
      if (t < 0) break;
      CHECK(mask[t / 32] >> (t % 32) & 1u);
      for (int v = 0; v < V; v++) /* masked logits are -inf, allowed ones are not */
        if (!(mask[v / 32] >> (v % 32) & 1u) && copy[v] != -INFINITY) {
          CHECK(0);
          break;
        }
      if (t == V - 1) { /* the end of sequence */
        fer_matcher_state ms;
        fer_matcher_get_state(m, &ms);
        CHECK(ms.accepting == 1);
        ended = 1;
        break;
      }
      out[n++] = t;
      CHECK_STATUS(fer_engine_decode(f->e, &s, &t, 1, lg, V), FER_STATUS_OK);
    }
    char text[256];
    size_t len = 0;
    CHECK_STATUS(fer_tokenizer_decode(f->tok, out, n, 0, text, sizeof text, &len), FER_STATUS_OK);
    if (ended && in_language(text, len)) ok_runs++;
    else fprintf(stderr, "  seed %llu: ended %d, '%.*s'\n", (unsigned long long)seed, ended, (int)len, text);
    CHECK(matcher_tokens(s) == n);
    CHECK(seq_tokens(s) == 12 + n);
    fer_sampler_free(sm);
    CHECK_STATUS(fer_engine_seq_free(s), FER_STATUS_OK);
  }
  CHECK(ok_runs == 12);
}

/* C-GRM-008: refused tokens change nothing; rewind and cancel keep the matcher in step. */
static void test_refusal_rewind_cancel(fixture *f) {
  fer_engine_seq *s = NULL, *t = NULL;
  CHECK_STATUS(fer_engine_seq_create(f->e, 64, &s), FER_STATUS_OK);
  CHECK_STATUS(fer_engine_seq_create(f->e, 64, &t), FER_STATUS_OK);
  if (!s || !t) return;
  float lg[2 * V];
  CHECK_STATUS(fer_engine_prefill(s, PROMPT, 12, NULL, 0), FER_STATUS_OK);
  CHECK_STATUS(fer_engine_prefill(t, PROMPT, 12, NULL, 0), FER_STATUS_OK);
  CHECK_STATUS(fer_engine_seq_set_grammar(s, f->g), FER_STATUS_OK);
  CHECK_STATUS(fer_engine_seq_set_grammar(t, f->g), FER_STATUS_OK);
  /* prefill: 'a' 'b' 'z': the z is refused, all or nothing */
  const int32_t abz[3] = {'a', 'b', 'z'};
  CHECK_STATUS(fer_engine_prefill(s, abz, 3, NULL, 0), FER_STATUS_INVALID_ARG);
  CHECK(seq_tokens(s) == 12 && matcher_tokens(s) == 0);
  CHECK_STATUS(fer_engine_prefill(s, abz, 2, lg, V), FER_STATUS_OK);
  CHECK(seq_tokens(s) == 14 && matcher_tokens(s) == 2);
  /* a batched step where the second sequence's token is refused: neither moves */
  fer_engine_seq *pair[2] = {s, t};
  const int32_t bad[2] = {'c', 'b'}; /* t has nothing yet: 'b' cannot start (ab|c) */
  CHECK_STATUS(fer_engine_decode(f->e, pair, bad, 2, lg, 2 * V), FER_STATUS_INVALID_ARG);
  CHECK(seq_tokens(s) == 14 && matcher_tokens(s) == 2 && seq_tokens(t) == 12 && matcher_tokens(t) == 0);
  const int32_t good[2] = {'c', 'a'};
  CHECK_STATUS(fer_engine_decode(f->e, pair, good, 2, lg, 2 * V), FER_STATUS_OK);
  CHECK(seq_tokens(s) == 15 && matcher_tokens(s) == 3 && seq_tokens(t) == 13 && matcher_tokens(t) == 1);
  /* cancel: CANCELLED and the matchers as before */
  CHECK_STATUS(fer_engine_seq_cancel(t), FER_STATUS_OK);
  const int32_t next[2] = {'7', 'b'};
  CHECK_STATUS(fer_engine_decode(f->e, pair, next, 2, lg, 2 * V), FER_STATUS_CANCELLED);
  CHECK(matcher_tokens(s) == 3 && matcher_tokens(t) == 1);
  CHECK_STATUS(fer_engine_decode(f->e, pair, next, 2, lg, 2 * V), FER_STATUS_OK);
  CHECK(matcher_tokens(s) == 4 && matcher_tokens(t) == 2);
  /* rewind: by the same tokens, or to the start from before the grammar's first position */
  CHECK_STATUS(fer_engine_seq_rewind(s, 14), FER_STATUS_OK);
  CHECK(matcher_tokens(s) == 2);
  const int32_t c = 'c', z = 'z';
  CHECK_STATUS(fer_engine_decode(f->e, &s, &z, 1, lg, V), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(fer_engine_decode(f->e, &s, &c, 1, lg, V), FER_STATUS_OK);
  CHECK(matcher_tokens(s) == 3);
  CHECK_STATUS(fer_engine_seq_rewind(s, 5), FER_STATUS_OK);
  CHECK(seq_tokens(s) == 5 && matcher_tokens(s) == 0);
  CHECK_STATUS(fer_engine_prefill(s, PROMPT + 5, 3, NULL, 0), FER_STATUS_INVALID_ARG); /* constrained from 5 on */
  CHECK_STATUS(fer_engine_prefill(s, abz, 2, NULL, 0), FER_STATUS_OK);
  /* a grammar of another vocabulary width is refused; NULL takes the grammar off */
  fer_grammar_vocab *wide = NULL;
  fer_grammar *gw = NULL;
  CHECK_STATUS(fer_grammar_vocab_create(f->tok, V + 8, -1, &wide), FER_STATUS_OK);
  CHECK_STATUS(fer_grammar_compile(wide, FER_GRAMMAR_REGEX, "x", 1, 0, &gw), FER_STATUS_OK);
  CHECK_STATUS(fer_engine_seq_set_grammar(s, gw), FER_STATUS_INVALID_ARG);
  CHECK(matcher_tokens(s) == 2);
  /* lifetimes: the grammar outlives the sequences' matchers, the vocabulary its grammars */
  CHECK_STATUS(fer_grammar_free(f->g), FER_STATUS_BUSY);
  CHECK_STATUS(fer_grammar_vocab_free(wide), FER_STATUS_BUSY);
  CHECK_STATUS(fer_grammar_free(gw), FER_STATUS_OK);
  CHECK_STATUS(fer_grammar_vocab_free(wide), FER_STATUS_OK);
  CHECK_STATUS(fer_engine_seq_set_grammar(s, NULL), FER_STATUS_OK);
  fer_matcher *none = (fer_matcher *)1;
  CHECK_STATUS(fer_engine_seq_matcher(s, &none), FER_STATUS_OK);
  CHECK(none == NULL);
  CHECK_STATUS(fer_engine_prefill(s, PROMPT, 3, NULL, 0), FER_STATUS_OK); /* unconstrained again */
  CHECK_STATUS(fer_grammar_free(f->g), FER_STATUS_BUSY);                  /* t still holds one */
  CHECK_STATUS(fer_engine_seq_free(t), FER_STATUS_OK);
  CHECK_STATUS(fer_engine_seq_free(s), FER_STATUS_OK);
  /* the engine's tokenizer outlives the vocabulary made from it */
  CHECK_STATUS(fer_engine_free(f->e), FER_STATUS_BUSY);
}

/* A freed matcher goes back to its grammar's pool: the next one made starts where a new one does,
 * with the same masks. */
static void test_pooled_matcher(fixture *f) {
  enum { W = (V + 31) / 32 };
  uint32_t first[W], again[W];
  fer_matcher *m = NULL;
  CHECK_STATUS(fer_matcher_create(f->g, &m), FER_STATUS_OK);
  if (!m) return;
  CHECK_STATUS(fer_matcher_fill_mask(m, first, W), FER_STATUS_OK);
  CHECK_STATUS(fer_matcher_accept(m, 'a'), FER_STATUS_OK);
  CHECK_STATUS(fer_matcher_accept(m, 'b'), FER_STATUS_OK);
  CHECK_STATUS(fer_matcher_accept(m, '7'), FER_STATUS_OK);
  CHECK_STATUS(fer_matcher_accept(m, V - 1), FER_STATUS_OK); /* ended */
  fer_matcher_free(m);
  m = NULL;
  CHECK_STATUS(fer_matcher_create(f->g, &m), FER_STATUS_OK);
  if (!m) return;
  fer_matcher_state st = {1, 1, 1, 0};
  CHECK_STATUS(fer_matcher_get_state(m, &st), FER_STATUS_OK);
  CHECK(st.n_tokens == 0 && st.ended == 0 && st.accepting == 0);
  CHECK_STATUS(fer_matcher_fill_mask(m, again, W), FER_STATUS_OK);
  CHECK(memcmp(first, again, sizeof first) == 0);
  CHECK_STATUS(fer_matcher_accept(m, 'b'), FER_STATUS_INVALID_ARG); /* as at the start: (ab|c) */
  fer_matcher_free(m);
}

/* The sampler refuses logits of another width while a matcher is attached, and a detached
 * sampler runs as before. */
static void test_sampler_width(fixture *f) {
  fer_matcher *m = NULL;
  CHECK_STATUS(fer_matcher_create(f->g, &m), FER_STATUS_OK);
  fer_sampling_params p;
  fer_sampling_params_init(&p);
  fer_sampler *sm = NULL;
  CHECK_STATUS(fer_sampler_create(&p, &sm), FER_STATUS_OK);
  CHECK_STATUS(fer_sampler_set_matcher(sm, m), FER_STATUS_OK);
  float lg[V + 1];
  for (int i = 0; i <= V; i++) lg[i] = 0.0f;
  fer_sampling_context ctx = {0};
  int32_t tok = 0;
  CHECK_STATUS(fer_sampler_sample(sm, lg, V + 1, &ctx, &tok, NULL), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(fer_sampler_sample(sm, lg, V, &ctx, &tok, NULL), FER_STATUS_OK);
  CHECK(tok == 'a' || tok == 'c'); /* every other token is masked: 'ab' may be a merge, not in the tiny vocab */
  CHECK_STATUS(fer_sampler_set_matcher(sm, NULL), FER_STATUS_OK);
  CHECK_STATUS(fer_sampler_sample(sm, lg, V + 1, &ctx, &tok, NULL), FER_STATUS_OK);
  fer_sampler_free(sm);
  fer_matcher_free(m);
}

int main(void) {
  fixture f;
  if (setup(&f)) {
    test_constrained_generation(&f);
    test_sampler_width(&f);
    test_pooled_matcher(&f);
    test_refusal_rewind_cancel(&f);
    teardown(&f);
  }
  return feri_test_finish("engine_grammar_test");
}
