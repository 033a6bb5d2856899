/* sampler.c: fer_sampler, the configured chain of logits processors and the draw. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "grammar/grammar_api.h"
#include "sample/chain.h"
#include "sample/fast.h"
#include "sample/rng.h"
#include "sample/select.h"

struct fer_sampler {
  fer_sampling_params params; /* bias pointers point at the sampler's own copies */
  int32_t *bias_tokens;
  float *bias_values;
  size_t capacity; /* vocab the scratch is sized for */
  uint32_t *cand, *keys, *ids, *counts;
  double *weights;
  uint8_t *marks;
  float *cmax;
  feri_scored *scored;
  feri_sample_impl impl; /* AUTO unless a test pinned it */
  fer_matcher *matcher;  /* borrowed (fer_sampler_set_matcher), or NULL */
  uint32_t *mask;        /* its mask, one step's */
  size_t mask_words;
  feri_dry_breakers dry;  /* the params' breakers, sorted by head */
  int32_t *dry_window;    /* DRY's scratch, dry_cap long */
  uint32_t *dry_repeat;
  size_t dry_cap;
  double mirostat_mu; /* mirostat's state: 2 tau at creation, moved by each draw */
  _Atomic int in_use;
};

enum { FERI_MAX_VOCAB = 1 << 28 }; /* ids are int32; keep scratch sizes sane */

fer_status fer_sampling_params_init(fer_sampling_params *p) {
  feri_error_clear();
  if (p == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_sampling_params_init: params is NULL");
  memset(p, 0, sizeof *p);
  p->struct_size = sizeof *p;
  p->temperature = 1.0f;
  p->top_p = 1.0f;
  p->typical_p = 1.0f;
  p->repetition_penalty = 1.0f;
  p->eos_token_id = -1;
  p->dry_base = 1.75f;
  p->dry_allowed_length = 2;
  p->mirostat_tau = 5.0f;
  p->mirostat_eta = 0.1f;
  return FER_STATUS_OK;
}

static int finite_in(float v, float lo, float hi) { return v == v && v >= lo && v <= hi; }

enum { FERI_DRY_MAX_BREAKERS = 1 << 20, FERI_DRY_MAX_BREAKER_LEN = 64 };

static fer_status check_dry(const fer_sampling_params *p) {
  static const char *const fn = "fer_sampler_create";
  if (!finite_in(p->dry_multiplier, 0.0f, 1e30f))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: dry_multiplier %g must be finite and >= 0 (0 is off)", fn,
                     (double)p->dry_multiplier);
  if (p->dry_multiplier > 0.0f && !finite_in(p->dry_base, 1.0f, 1e30f))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: dry_base %g must be finite and >= 1", fn, (double)p->dry_base);
  if (p->dry_allowed_length < 0 || p->dry_penalty_last_n < 0)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: dry_allowed_length %d and dry_penalty_last_n %d must be >= 0", fn,
                     p->dry_allowed_length, p->dry_penalty_last_n);
  if (p->n_dry_breakers > FERI_DRY_MAX_BREAKERS)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: n_dry_breakers %u > %d", fn, p->n_dry_breakers,
                     FERI_DRY_MAX_BREAKERS);
  if (p->n_dry_breakers > 0 && (p->dry_breaker_lengths == NULL || p->dry_breaker_tokens == NULL))
    return feri_fail(FER_STATUS_NULL_ARG, "%s: n_dry_breakers %u but a breaker array is NULL", fn, p->n_dry_breakers);
  uint64_t sum = 0;
  for (uint32_t i = 0; i < p->n_dry_breakers; i++) {
    uint32_t len = p->dry_breaker_lengths[i];
    if (len < 1 || len > FERI_DRY_MAX_BREAKER_LEN)
      return feri_fail(FER_STATUS_INVALID_ARG, "%s: dry_breaker_lengths[%u] = %u outside 1..%d", fn, i, len,
                       FERI_DRY_MAX_BREAKER_LEN);
    sum += len;
  }
  if (sum != p->n_dry_breaker_tokens)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: dry_breaker_lengths sum to %llu, n_dry_breaker_tokens is %u", fn,
                     (unsigned long long)sum, p->n_dry_breaker_tokens);
  for (uint32_t i = 0; i < p->n_dry_breaker_tokens; i++)
    if (p->dry_breaker_tokens[i] < 0)
      return feri_fail(FER_STATUS_INVALID_ARG, "%s: dry_breaker_tokens[%u] = %d < 0", fn, i, p->dry_breaker_tokens[i]);
  return FER_STATUS_OK;
}

static fer_status check_mirostat(const fer_sampling_params *p) {
  static const char *const fn = "fer_sampler_create";
  if (p->mirostat < 0 || p->mirostat > 2)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: mirostat %d must be 0 (off), 1 or 2", fn, p->mirostat);
  if (p->mirostat == 0) return FER_STATUS_OK;
  if (!finite_in(p->mirostat_tau, 1e-30f, 1e30f) || !finite_in(p->mirostat_eta, 1e-30f, 1e30f))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: mirostat_tau %g and mirostat_eta %g must be finite and > 0", fn,
                     (double)p->mirostat_tau, (double)p->mirostat_eta);
  if (p->top_k > 0 || p->top_p < 1.0f || p->min_p > 0.0f || p->typical_p < 1.0f || p->xtc_probability > 0.0f)
    return feri_fail(FER_STATUS_INVALID_ARG,
                     "%s: mirostat replaces top_k, top_p, min_p, typical_p and xtc: turn those off", fn);
  return FER_STATUS_OK;
}


static fer_status check_params(const fer_sampling_params *p) {
  static const char *const fn = "fer_sampler_create";
  if (p->struct_size < sizeof *p)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: struct_size %u < %zu (use fer_sampling_params_init)", fn,
                     p->struct_size, sizeof *p);
  if (p->flags & ~(uint32_t)(FER_SAMPLING_FLAG_ALLOW_NONFINITE | FER_SAMPLING_FLAG_FUSE_TOP_K_TOP_P))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: unknown flags 0x%x", fn, p->flags);
  if (!finite_in(p->temperature, 0.0f, 1e30f))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: temperature %g must be finite and >= 0", fn, (double)p->temperature);
  if (p->top_k < 0) return feri_fail(FER_STATUS_INVALID_ARG, "%s: top_k %d < 0 (0 is off)", fn, p->top_k);
  if (!finite_in(p->top_p, 0.0f, 1.0f) || p->top_p == 0.0f)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: top_p %g must be in (0, 1] (1 is off)", fn, (double)p->top_p);
  if (!finite_in(p->min_p, 0.0f, 1.0f))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: min_p %g must be in [0, 1] (0 is off)", fn, (double)p->min_p);
  if (!finite_in(p->typical_p, 0.0f, 1.0f) || p->typical_p == 0.0f)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: typical_p %g must be in (0, 1] (1 is off)", fn, (double)p->typical_p);
  if (!finite_in(p->repetition_penalty, 1e-30f, 1e30f))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: repetition_penalty %g must be finite and > 0 (1 is off)", fn,
                     (double)p->repetition_penalty);
  if (p->repetition_window < 0)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: repetition_window %d < 0", fn, p->repetition_window);
  if (!finite_in(p->frequency_penalty, -1e30f, 1e30f) || !finite_in(p->presence_penalty, -1e30f, 1e30f))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: frequency/presence penalties must be finite", fn);
  if (p->no_repeat_ngram_size < 0 || p->min_new_tokens < 0)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: no_repeat_ngram_size and min_new_tokens must be >= 0", fn);
  if (p->min_new_tokens > 0 && p->eos_token_id < 0)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: min_new_tokens needs eos_token_id", fn);
  if (!finite_in(p->xtc_threshold, 0.0f, 1.0f) || !finite_in(p->xtc_probability, 0.0f, 1.0f))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: xtc_threshold and xtc_probability must be in [0, 1]", fn);
  if (p->n_logit_bias > 0 && (p->logit_bias_tokens == NULL || p->logit_bias_values == NULL))
    return feri_fail(FER_STATUS_NULL_ARG, "%s: n_logit_bias %u but a bias array is NULL", fn, p->n_logit_bias);
  for (uint32_t i = 0; i < p->n_logit_bias; i++) {
    float v = p->logit_bias_values[i];
    if (p->logit_bias_tokens[i] < 0)
      return feri_fail(FER_STATUS_INVALID_ARG, "%s: logit_bias_tokens[%u] = %d < 0", fn, i, p->logit_bias_tokens[i]);
    if (v != v || v == INFINITY)
      return feri_fail(FER_STATUS_INVALID_ARG, "%s: logit_bias_values[%u] is NaN or +inf (-inf bans)", fn, i);
  }
  fer_status st = check_dry(p);
  return st != FER_STATUS_OK ? st : check_mirostat(p);
}

static void free_scratch(fer_sampler *s) {
  free(s->cand), free(s->keys), free(s->ids), free(s->counts), free(s->weights), free(s->marks);
  free(s->cmax), free(s->scored);
  s->cand = s->keys = s->ids = s->counts = NULL;
  s->weights = NULL;
  s->marks = NULL;
  s->cmax = NULL;
  s->scored = NULL;
  s->capacity = 0;
}

static fer_status ensure_scratch(fer_sampler *s, size_t vocab) {
  if (vocab <= s->capacity) return FER_STATUS_OK;
  free_scratch(s);
  s->cand = malloc((vocab + FERI_FAST_ID_SLACK) * sizeof *s->cand);
  s->keys = malloc(vocab * sizeof *s->keys);
  s->ids = malloc(vocab * sizeof *s->ids);
  s->counts = calloc(vocab, sizeof *s->counts);
  s->weights = malloc(vocab * sizeof *s->weights);
  s->marks = calloc(vocab, sizeof *s->marks);
  s->cmax = malloc((vocab / FERI_FAST_CHUNK + 1) * sizeof *s->cmax);
  int need_scored = s->params.typical_p < 1.0f || s->params.mirostat == 1;
  s->scored = need_scored ? malloc(vocab * sizeof *s->scored) : NULL;
  if (!s->cand || !s->keys || !s->ids || !s->counts || !s->weights || !s->marks || !s->cmax ||
      (need_scored && !s->scored)) {
    free_scratch(s);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "fer_sampler: no memory for scratch of vocab %zu", vocab);
  }
  s->capacity = vocab;
  return FER_STATUS_OK;
}

fer_status feri_sampler_set_impl(fer_sampler *s, feri_sample_impl impl) {
  if (s == NULL) return feri_fail(FER_STATUS_NULL_ARG, "feri_sampler_set_impl: sampler is NULL");
  if (impl < FERI_SAMPLE_IMPL_AUTO || impl > FERI_SAMPLE_IMPL_FAST_AVX512)
    return feri_fail(FER_STATUS_INVALID_ARG, "feri_sampler_set_impl: unknown implementation %d", (int)impl);
  if (impl >= FERI_SAMPLE_IMPL_FAST_PORTABLE && feri_fast_ops_for(impl) == NULL)
    return feri_fail(FER_STATUS_UNSUPPORTED, "feri_sampler_set_impl: this CPU lacks implementation %d", (int)impl);
  s->impl = impl;
  return FER_STATUS_OK;
}

/* One breaker's place in the caller's arrays, for sorting by head. */
typedef struct dry_entry {
  int32_t head;
  uint32_t index, start;
} dry_entry;

static int cmp_dry_entry(const void *a, const void *b) {
  const dry_entry *x = a, *y = b;
  if (x->head != y->head) return x->head < y->head ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

static fer_status copy_dry_breakers(fer_sampler *s, const fer_sampling_params *p) {
  s->params.dry_breaker_lengths = NULL;
  s->params.dry_breaker_tokens = NULL;
  const size_t n = p->n_dry_breakers;
  if (n == 0) return FER_STATUS_OK;
  feri_dry_breakers *b = &s->dry;
  dry_entry *e = malloc(n * sizeof *e);
  b->heads = malloc(n * sizeof *b->heads);
  b->tail_start = malloc(n * sizeof *b->tail_start);
  b->tail_len = malloc(n * sizeof *b->tail_len);
  b->tails = malloc(p->n_dry_breaker_tokens * sizeof *b->tails);
  if (!e || !b->heads || !b->tail_start || !b->tail_len || !b->tails) {
    free(e);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "fer_sampler_create: no memory for %zu DRY breakers", n);
  }
  uint32_t start = 0;
  for (size_t i = 0; i < n; i++) {
    e[i] = (dry_entry){.head = p->dry_breaker_tokens[start], .index = (uint32_t)i, .start = start};
    start += p->dry_breaker_lengths[i];
  }
  qsort(e, n, sizeof *e, cmp_dry_entry);
  uint32_t at = 0;
  for (size_t k = 0; k < n; k++) {
    const uint32_t len = p->dry_breaker_lengths[e[k].index] - 1;
    b->heads[k] = e[k].head;
    b->tail_start[k] = at;
    b->tail_len[k] = len;
    memcpy(b->tails + at, p->dry_breaker_tokens + e[k].start + 1, len * sizeof *b->tails);
    at += len;
  }
  b->n = n;
  free(e);
  return FER_STATUS_OK;
}

static fer_status ensure_dry_scratch(fer_sampler *s, size_t n) {
  if (n <= s->dry_cap) return FER_STATUS_OK;
  int32_t *window = malloc(n * sizeof *window);
  uint32_t *repeat = malloc(n * sizeof *repeat);
  if (!window || !repeat) {
    free(window), free(repeat);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "fer_sampler: no memory for a DRY window of %zu tokens", n);
  }
  free(s->dry_window), free(s->dry_repeat);
  s->dry_window = window, s->dry_repeat = repeat, s->dry_cap = n;
  return FER_STATUS_OK;
}

fer_status fer_sampler_create(const fer_sampling_params *params, fer_sampler **out_sampler) {
  feri_error_clear();
  if (out_sampler == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_sampler_create: out_sampler is NULL");
  *out_sampler = NULL;
  if (params == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_sampler_create: params is NULL");
  fer_status st = check_params(params);
  if (st != FER_STATUS_OK) return st;
  fer_sampler *s = calloc(1, sizeof *s);
  if (s == NULL) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "fer_sampler_create: out of memory");
  s->params = *params;
  s->params.struct_size = sizeof s->params;
  uint32_t nb = params->n_logit_bias;
  if (nb > 0) {
    s->bias_tokens = malloc(nb * sizeof *s->bias_tokens);
    s->bias_values = malloc(nb * sizeof *s->bias_values);
    if (!s->bias_tokens || !s->bias_values) {
      fer_sampler_free(s);
      return feri_fail(FER_STATUS_OUT_OF_MEMORY, "fer_sampler_create: out of memory");
    }
    memcpy(s->bias_tokens, params->logit_bias_tokens, nb * sizeof *s->bias_tokens);
    memcpy(s->bias_values, params->logit_bias_values, nb * sizeof *s->bias_values);
  }
  s->params.logit_bias_tokens = s->bias_tokens;
  s->params.logit_bias_values = s->bias_values;
  if ((st = copy_dry_breakers(s, params)) != FER_STATUS_OK) {
    fer_sampler_free(s);
    return st;
  }
  s->mirostat_mu = 2.0 * (double)params->mirostat_tau;
  *out_sampler = s;
  return FER_STATUS_OK;
}

void fer_sampler_free(fer_sampler *s) {
  if (s == NULL) return;
  free_scratch(s);
  free(s->bias_tokens);
  free(s->bias_values);
  free(s->mask);
  free(s->dry.heads), free(s->dry.tail_start), free(s->dry.tail_len), free(s->dry.tails);
  free(s->dry_window), free(s->dry_repeat);
  free(s);
}

static fer_status check_tokens(const char *fn, const char *what, const int32_t *t, size_t n, size_t vocab) {
  if (n > 0 && t == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: %s is NULL with length %zu", fn, what, n);
  for (size_t i = 0; i < n; i++)
    if (t[i] < 0 || (size_t)t[i] >= vocab)
      return feri_fail(FER_STATUS_INVALID_ARG, "%s: %s[%zu] = %d outside the vocabulary [0, %zu)", fn, what, i,
                       t[i], vocab);
  return FER_STATUS_OK;
}

/* NaN and +inf are refused unless the caller allowed them; then NaN becomes -inf (masked). */
static fer_status check_logits(const char *fn, float *logits, size_t vocab, int allow) {
  /* A vector count first; the slow path only when something is there. */
  size_t n_bad = feri_count_nonfinite(logits, vocab);
  size_t bad = vocab;
  for (size_t i = 0; n_bad > 0 && i < vocab; i++) {
    float l = logits[i];
    if (l != l || l == INFINITY) {
      if (!allow) {
        bad = i;
        break;
      }
      if (l != l) logits[i] = -INFINITY;
    }
  }
  if (bad < vocab)
    return feri_fail(FER_STATUS_INVALID_ARG,
                     "%s: logits[%zu] is %s (set FER_SAMPLING_FLAG_ALLOW_NONFINITE to accept NaN/+inf)", fn, bad,
                     logits[bad] != logits[bad] ? "NaN" : "+inf");
  return FER_STATUS_OK;
}

/* The fer_logit_processor bits of the front of the chain (up to top-k), from the parameters alone:
 * a bit is set when the processor is enabled, whether or not it changed anything. */
static uint32_t front_bits(const fer_sampling_params *p, int fuse) {
  uint32_t a = 0;
  if (p->n_logit_bias > 0) a |= FER_PROCESSOR_LOGIT_BIAS;
  if (p->repetition_penalty != 1.0f) a |= FER_PROCESSOR_REPETITION_PENALTY;
  if (p->frequency_penalty != 0.0f) a |= FER_PROCESSOR_FREQUENCY_PENALTY;
  if (p->presence_penalty != 0.0f) a |= FER_PROCESSOR_PRESENCE_PENALTY;
  if (p->no_repeat_ngram_size > 0) a |= FER_PROCESSOR_NO_REPEAT_NGRAM;
  if (p->min_new_tokens > 0) a |= FER_PROCESSOR_MIN_NEW_TOKENS;
  if (p->temperature == 0.0f) a |= FER_PROCESSOR_GREEDY;
  else if (p->temperature != 1.0f) a |= FER_PROCESSOR_TEMPERATURE;
  if (p->top_k > 0) a |= fuse ? FER_PROCESSOR_TOP_K_TOP_P_FUSED : FER_PROCESSOR_TOP_K;
  return a;
}

/* Validates, runs the configured processors in order, and leaves the survivors' ids in s->cand
 * (ascending) with their count in *n_cand. */
static fer_status run_chain(fer_sampler *s, const char *fn, float *logits, size_t vocab,
                            const fer_sampling_context *ctx, uint32_t *applied, size_t *n_cand) {
  *applied = 0;
  *n_cand = 0;
  if (logits == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: logits is NULL", fn);
  if (ctx == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: ctx is NULL", fn);
  if (vocab == 0 || vocab > FERI_MAX_VOCAB)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: vocab %zu outside 1..%d", fn, vocab, FERI_MAX_VOCAB);
  const fer_sampling_params *p = &s->params;
  fer_status st;
  if ((st = check_tokens(fn, "ctx->prompt_tokens", ctx->prompt_tokens, ctx->n_prompt, vocab)) != FER_STATUS_OK ||
      (st = check_tokens(fn, "ctx->generated_tokens", ctx->generated_tokens, ctx->n_generated, vocab)) != FER_STATUS_OK ||
      (st = check_tokens(fn, "logit_bias_tokens", p->logit_bias_tokens, p->n_logit_bias, vocab)) != FER_STATUS_OK)
    return st;
  if (p->min_new_tokens > 0 && (size_t)p->eos_token_id >= vocab)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: eos_token_id %d outside the vocabulary", fn, p->eos_token_id);
  if ((st = ensure_scratch(s, vocab)) != FER_STATUS_OK) return st;
  uint32_t a = 0;
  if (s->matcher != NULL) { /* the grammar first: a token its mask does not allow is -inf */
    const uint32_t n_vocab = s->matcher->m->trie->n_vocab;
    if (vocab != n_vocab)
      return feri_fail(FER_STATUS_INVALID_ARG, "%s: %zu logits, the matcher's vocabulary has %u", fn, vocab, n_vocab);
    if ((st = feri_matcher_fill_mask(s->matcher->m, s->mask, s->mask_words)) != FER_STATUS_OK) return st;
    for (size_t w = 0; w < s->mask_words; w++) {
      if (s->mask[w] == UINT32_MAX) continue;
      const size_t end = w * 32 + 32 < vocab ? w * 32 + 32 : vocab;
      for (size_t t = w * 32; t < end; t++)
        if (!((s->mask[w] >> (t % 32)) & 1u)) logits[t] = -INFINITY;
    }
    a |= FER_PROCESSOR_GRAMMAR;
  }

  feri_chain c = {.logits = logits, .vocab = vocab, .ctx = ctx, .cand = s->cand, .keys = s->keys,
                  .ids = s->ids, .weights = s->weights, .marks = s->marks, .counts = s->counts,
                  .cmax = s->cmax, .scored = s->scored};
  /* The front of the chain (check, sparse processors, temperature or greedy, top-k): the fast
   * front when it can decide (it hands back untouched logits when it meets NaN or +inf), else the
   * reference processors one at a time. Both give the same logits and candidates (fast.h). */
  const feri_fast_ops *ops = feri_fast_ops_for(s->impl);
  const int dry = p->dry_multiplier > 0.0f;
  if (dry) { /* the window's scratch, before anything touches the logits */
    const size_t len = ctx->n_prompt + ctx->n_generated;
    const size_t n = p->dry_penalty_last_n > 0 && (size_t)p->dry_penalty_last_n < len ? (size_t)p->dry_penalty_last_n : len;
    if ((st = ensure_dry_scratch(s, n)) != FER_STATUS_OK) return st;
  }
  /* DRY sits between the sparse processors and temperature, inside what the fast front fuses:
   * with DRY on, the reference processors run. */
  if (ops == NULL || dry || !feri_fast_front(&c, p, ops)) {
    if ((st = check_logits(fn, logits, vocab, p->flags & FER_SAMPLING_FLAG_ALLOW_NONFINITE)) != FER_STATUS_OK)
      return st;
    feri_chain_sparse(&c, p);
    if (dry) feri_dry(&c, p, &s->dry, s->dry_window, s->dry_repeat);
    if (p->temperature == 0.0f) {
      feri_greedy(&c);
    } else if (p->temperature != 1.0f) {
      feri_temperature(&c, p->temperature);
    }
    if (p->top_k > 0) feri_top_k(&c, p->top_k);
  }
  int fuse = (p->flags & FER_SAMPLING_FLAG_FUSE_TOP_K_TOP_P) && p->top_k > 0 && p->top_p < 1.0f;
  a |= front_bits(p, fuse) | (dry ? FER_PROCESSOR_DRY : 0);
  if (p->top_p < 1.0f) {
    feri_top_p(&c, p->top_p);
    a |= fuse ? 0 : FER_PROCESSOR_TOP_P;
  }
  if (p->min_p > 0.0f) {
    feri_min_p(&c, p->min_p);
    a |= FER_PROCESSOR_MIN_P;
  }
  if (p->typical_p < 1.0f) {
    feri_typical_p(&c, p->typical_p);
    a |= FER_PROCESSOR_TYPICAL_P;
  }
  if (p->xtc_probability > 0.0f) {
    feri_xtc(&c, p->xtc_threshold, p->xtc_probability, feri_uniform(p->seed, ctx->n_generated, 1));
    a |= FER_PROCESSOR_XTC;
  }
  if (p->mirostat > 0) {
    feri_mirostat(&c, p->mirostat, s->mirostat_mu);
    a |= FER_PROCESSOR_MIROSTAT;
  }
  *applied = a;
  feri_chain_candidates(&c);
  *n_cand = c.n_cand;
  if (c.n_cand == 0)
    return feri_fail(FER_STATUS_NO_CANDIDATES, "%s: every logit is masked after processing (applied 0x%x)", fn, a);
  return FER_STATUS_OK;
}

static fer_status enter(fer_sampler *s, const char *fn);
static void leave(fer_sampler *s);

fer_status fer_sampler_set_matcher(fer_sampler *s, fer_matcher *m) {
  static const char *const fn = "fer_sampler_set_matcher";
  feri_error_clear();
  fer_status st = enter(s, fn);
  if (st != FER_STATUS_OK) return st;
  const size_t words = m ? feri_mask_words(m->m->trie->n_vocab) : 0;
  if (words > s->mask_words) {
    uint32_t *mask = malloc(words * sizeof *mask);
    if (!mask) {
      leave(s);
      return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: a mask of %zu words", fn, words);
    }
    free(s->mask);
    s->mask = mask;
  }
  if (m) s->mask_words = words;
  s->matcher = m;
  leave(s);
  return FER_STATUS_OK;
}

static fer_status enter(fer_sampler *s, const char *fn) {
  if (s == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: sampler is NULL", fn);
  if (atomic_exchange(&s->in_use, 1))
    return feri_fail(FER_STATUS_BUSY, "%s: another thread is using this sampler", fn);
  return FER_STATUS_OK;
}

static void leave(fer_sampler *s) { atomic_store(&s->in_use, 0); }

fer_status fer_sampler_process(fer_sampler *s, float *logits, size_t vocab, const fer_sampling_context *ctx,
                               uint32_t *out_applied) {
  static const char *const fn = "fer_sampler_process";
  feri_error_clear();
  uint32_t applied = 0;
  fer_status st = enter(s, fn);
  if (st == FER_STATUS_OK) {
    size_t n_cand;
    st = run_chain(s, fn, logits, vocab, ctx, &applied, &n_cand);
    leave(s);
  }
  if (out_applied != NULL) *out_applied = applied;
  return st;
}

/* Draws from the candidates' softmax in ascending id order: the first id whose running weight
 * passes uniform x total. */
static fer_status draw(fer_sampler *s, const float *logits, size_t n, double u, int32_t *out_token,
                       double *out_logprob) {
  float mx = -INFINITY;
  for (size_t j = 0; j < n; j++) mx = logits[s->cand[j]] > mx ? logits[s->cand[j]] : mx;
  double total = 0;
  for (size_t j = 0; j < n; j++) {
    float l = logits[s->cand[j]];
    s->weights[j] = mx == INFINITY ? (l == INFINITY) : exp((double)l - (double)mx);
    total += s->weights[j];
  }
  double target = u * total, cum = 0;
  size_t pick = n;
  for (size_t j = 0; j < n; j++) {
    cum += s->weights[j];
    if (cum > target && s->weights[j] > 0) {
      pick = j;
      break;
    }
  }
  if (pick == n) /* rounding left the target at the very top: the last token with weight */
    for (size_t j = n; j-- > 0;)
      if (s->weights[j] > 0) {
        pick = j;
        break;
      }
  *out_token = (int32_t)s->cand[pick];
  *out_logprob = log(s->weights[pick]) - log(total);
  return FER_STATUS_OK;
}

static fer_status sample_common(fer_sampler *s, const char *fn, float *logits, size_t vocab,
                                const fer_sampling_context *ctx, int have_u, double u, int32_t *out_token,
                                float *out_logprob) {
  feri_error_clear();
  if (out_logprob != NULL) *out_logprob = 0.0f;
  if (out_token == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: out_token is NULL", fn);
  *out_token = -1;
  if (have_u && !(u >= 0.0 && u < 1.0))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: uniform %g outside [0, 1)", fn, u);
  fer_status st = enter(s, fn);
  if (st != FER_STATUS_OK) return st;
  uint32_t applied;
  size_t n_cand;
  st = run_chain(s, fn, logits, vocab, ctx, &applied, &n_cand);
  if (st == FER_STATUS_OK) {
    if (!have_u) u = feri_uniform(s->params.seed, ctx->n_generated, 0);
    double logprob;
    st = draw(s, logits, n_cand, u, out_token, &logprob);
    if (out_logprob != NULL) *out_logprob = (float)logprob;
    if (s->params.mirostat > 0)
      s->mirostat_mu = feri_mirostat_update(s->mirostat_mu, s->params.mirostat_tau, s->params.mirostat_eta, logprob);
  }
  leave(s);
  return st;
}

fer_status fer_sampler_sample(fer_sampler *s, float *logits, size_t vocab, const fer_sampling_context *ctx,
                              int32_t *out_token, float *out_logprob) {
  return sample_common(s, "fer_sampler_sample", logits, vocab, ctx, 0, 0.0, out_token, out_logprob);
}

fer_status fer_sampler_sample_uniform(fer_sampler *s, float *logits, size_t vocab,
                                      const fer_sampling_context *ctx, double uniform, int32_t *out_token,
                                      float *out_logprob) {
  return sample_common(s, "fer_sampler_sample_uniform", logits, vocab, ctx, 1, uniform, out_token, out_logprob);
}
