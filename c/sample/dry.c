/* dry.c: DRY, the "don't repeat yourself" penalty (semantics in ferrite.h; koboldcpp's design, as
 * llama.cpp runs it).
 *
 * Repeats are found with the Z-algorithm run backwards over the window: z[k] is how far the window
 * read backwards from its newest token matches itself read backwards from k tokens earlier, which
 * is the length of the repeat that ends k tokens before the newest. Linear in the window. */
#include <math.h>
#include <stdlib.h>

#include "sample/chain.h"

/* The index of the first breaker whose head is `token` (heads ascending), or b->n. */
static size_t first_with_head(const feri_dry_breakers *b, int32_t token) {
  size_t lo = 0, hi = b->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (b->heads[mid] < token) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* The repeat limit the newest breaker sets: scanning back from the newest token (i = 0), the first
 * i that heads a breaker whose tail follows it in the window limits repeats to i - tail length.
 * h is the window, oldest first; n its length. */
static size_t repeat_limit(const feri_dry_breakers *b, const int32_t *h, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const int32_t token = h[n - 1 - i];
    long longest = -1;
    for (size_t k = first_with_head(b, token); k < b->n && b->heads[k] == token; k++) {
      const size_t len = b->tail_len[k];
      if ((long)len <= longest || len > i) continue;
      const int32_t *tail = b->tails + b->tail_start[k];
      size_t t = 0;
      while (t < len && tail[t] == h[n - 1 - (i - t - 1)]) t++;
      if (t == len) longest = (long)len;
    }
    if (longest >= 0) return i - (size_t)longest;
  }
  return n;
}

static int is_single_token_breaker(const feri_dry_breakers *b, int32_t token) {
  for (size_t k = first_with_head(b, token); k < b->n && b->heads[k] == token; k++)
    if (b->tail_len[k] == 0) return 1;
  return 0;
}

void feri_dry(feri_chain *c, const fer_sampling_params *p, const feri_dry_breakers *b, int32_t *window,
              uint32_t *repeat) {
  const fer_sampling_context *ctx = c->ctx;
  const size_t len = ctx->n_prompt + ctx->n_generated;
  const size_t n = p->dry_penalty_last_n > 0 && (size_t)p->dry_penalty_last_n < len ? (size_t)p->dry_penalty_last_n : len;
  const size_t allowed = (size_t)p->dry_allowed_length;
  if (n <= allowed) return;
  for (size_t i = 0; i < n; i++) {
    size_t at = len - n + i;
    window[i] = at < ctx->n_prompt ? ctx->prompt_tokens[at] : ctx->generated_tokens[at - ctx->n_prompt];
  }
  const size_t limit = repeat_limit(b, window, n);
  if (limit < allowed) return;

  /* repeat[j] for j < n - 1: the repeat that ends at window position j (capped at limit). With
   * r(i) = window[n - 1 - i], z[k] = repeat[n - 1 - k]. */
#define R(i) window[n - 1 - (i)]
  const size_t last = n - 1;
  size_t lt = 0, rt = 0;
  for (size_t k = 1; k < n; k++) {
    if (k > rt) {
      size_t m = 0;
      while (m + k < n && R(m) == R(m + k)) m++;
      repeat[last - k] = (uint32_t)(m < limit ? m : limit);
      if (m > 0) lt = k, rt = k + m - 1;
    } else {
      const size_t pair = k - lt, right = rt - k + 1;
      if (repeat[last - pair] < right) {
        repeat[last - k] = repeat[last - pair] < limit ? repeat[last - pair] : (uint32_t)limit;
      } else {
        size_t i = rt + 1;
        while (i < n && R(i) == R(i - k)) i++;
        repeat[last - k] = (uint32_t)(i - k < limit ? i - k : limit);
        lt = k, rt = i - 1;
      }
    }
  }
#undef R

  /* The largest repeat each next token would extend, kept as count + 1 in the all-zero counts
   * array; the touched tokens listed in ids so they can be reset. */
  size_t n_touched = 0;
  for (size_t j = 0; j + 1 < n; j++) {
    if (repeat[j] < allowed) continue;
    const int32_t next = window[j + 1];
    if (c->counts[next] == 0) c->ids[n_touched++] = (uint32_t)next;
    if (c->counts[next] < repeat[j] + 1) c->counts[next] = repeat[j] + 1;
  }
  int max_exponent = 0;
  if (p->dry_base > 1.000001f) max_exponent = (int)(88.7228391f / logf(p->dry_base));
  for (size_t t = 0; t < n_touched; t++) {
    const uint32_t token = c->ids[t];
    const long exponent_raw = (long)c->counts[token] - 1 - (long)allowed;
    c->counts[token] = 0;
    if (is_single_token_breaker(b, (int32_t)token)) continue;
    const long exponent = max_exponent > 0 && exponent_raw > max_exponent ? max_exponent : exponent_raw;
    /* llama.cpp's arithmetic: pow in double, the penalty rounded to float, subtracted in float */
    const float penalty = (float)((double)p->dry_multiplier * pow((double)p->dry_base, (double)exponent));
    c->logits[token] -= penalty;
  }
  c->cand_valid = 0;
}
