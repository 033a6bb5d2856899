/* fast.c: the fast front of the sampling chain (see fast.h), its portable loops and the choice of
 * loops by CPU. */
#include "sample/fast.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "sample/select.h"

/* ---- portable loops (the definition the vector loops must equal) ---- */

static int chunk_max_portable(const float *x, size_t n, float *cmax) {
  int bad = 0;
  size_t i = 0, c = 0;
  /* Whole chunks with eight running maxima: one maximum would make every element wait for the
   * previous compare (and mispredict on rising runs). */
  for (; n - i >= FERI_FAST_CHUNK; i += FERI_FAST_CHUNK, c++) {
    float m[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    int b = 0;
    for (size_t j = 0; j < FERI_FAST_CHUNK; j += 8)
      for (int q = 0; q < 8; q++) {
        const float v = x[i + j + (size_t)q];
        b |= !(v < INFINITY); /* NaN or +inf */
        m[q] = v > m[q] ? v : m[q];
      }
    for (int q = 1; q < 8; q++) m[0] = m[q] > m[0] ? m[q] : m[0];
    cmax[c] = m[0];
    bad |= b;
  }
  if (i < n) {
    float m = -INFINITY;
    for (; i < n; i++) {
      const float v = x[i];
      bad |= !(v < INFINITY);
      m = v > m ? v : m;
    }
    cmax[c] = m;
  }
  return bad;
}

static size_t mask_scale_portable(float *x, size_t n, const float *cmax, float lo, float t, uint32_t *ids) {
  size_t m = 0;
  for (size_t i = 0, c = 0; i < n; c++) {
    const size_t len = n - i > FERI_FAST_CHUNK ? FERI_FAST_CHUNK : n - i;
    float *p = x + i;
    if (!(cmax[c] >= lo)) {
      if (len == FERI_FAST_CHUNK) /* a fixed count, which the compiler turns into wide stores */
        for (size_t j = 0; j < FERI_FAST_CHUNK; j++) p[j] = -INFINITY;
      else
        for (size_t j = 0; j < len; j++) p[j] = -INFINITY;
    } else {
      for (size_t j = 0; j < len; j++) {
        const float v = p[j];
        const float y = v >= lo ? (t == 1.0f ? v : v / t) : -INFINITY;
        p[j] = y;
        ids[m] = (uint32_t)(i + j);
        m += y != -INFINITY;
      }
    }
    i += len;
  }
  return m;
}

static size_t count_ge_portable(const int32_t *keys, size_t n, int32_t t) {
  size_t count = 0;
  for (size_t i = 0; i < n; i++) count += keys[i] >= t;
  return count;
}

const feri_fast_ops feri_fast_portable = {
    .chunk_max = chunk_max_portable,
    .mask_scale = mask_scale_portable,
    .count_ge = count_ge_portable,
};

const feri_fast_ops *feri_fast_ops_for(feri_sample_impl impl) {
#if defined(__x86_64__)
  const uint64_t f = fer_cpu_features();
  const int avx2 = (f & FER_CPU_FEATURE_AVX2) != 0, avx512 = (f & FER_CPU_FEATURE_AVX512F) != 0;
#else
  const int avx2 = 0, avx512 = 0;
#endif
  switch (impl) {
    case FERI_SAMPLE_IMPL_FAST_PORTABLE: return &feri_fast_portable;
#if defined(__x86_64__)
    case FERI_SAMPLE_IMPL_AUTO: return avx512 ? &feri_fast_avx512 : avx2 ? &feri_fast_avx2 : &feri_fast_portable;
    case FERI_SAMPLE_IMPL_FAST_AVX2: return avx2 ? &feri_fast_avx2 : NULL;
    case FERI_SAMPLE_IMPL_FAST_AVX512: return avx512 ? &feri_fast_avx512 : NULL;
#else
    case FERI_SAMPLE_IMPL_AUTO: return &feri_fast_portable;
#endif
    default: return NULL;
  }
}

/* ---- the front ---- */

/* The signed key of the k-th largest (k >= 1) of keys[0..n) among those above `floor`, or floor
 * when fewer than k are. Bisection on the key: the answer is the largest T with at least k keys
 * >= T, found in 32 counting passes whatever the order or ties of the keys. */
static int32_t kth_largest_skey(const feri_fast_ops *ops, const int32_t *keys, size_t n, size_t k, int32_t floor) {
  /* The bisection starts from the smallest and largest key above floor: logits cluster, so this
   * range is far narrower than 32 bits. */
  int32_t kmin = INT32_MAX, kmax = floor;
  size_t above = 0;
  for (size_t i = 0; i < n; i++) {
    const int32_t v = keys[i];
    if (v > floor) {
      above++;
      kmin = v < kmin ? v : kmin;
      kmax = v > kmax ? v : kmax;
    }
  }
  if (above < k) return floor;
  int64_t lo = kmin, hi = kmax; /* count(>= lo) >= k; count(> hi) = 0 < k */
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (ops->count_ge(keys, n, (int32_t)mid) >= k) lo = mid;
    else hi = mid - 1;
  }
  return (int32_t)lo;
}

/* The smallest finite logit x whose quotient x / t reaches lo / t (lo finite, t > 0). Division by
 * t is monotone, so these x form a ray ending at lo; rounding may merge a few neighbours below lo
 * into lo's quotient (many when t is large), which a galloping search over the keys finds. */
static float smallest_reaching(float lo, float t) {
  const float target = lo / t;
  const int64_t floor = feri_fast_skey(-FLT_MAX);
  int64_t hi = feri_fast_skey(lo), below = floor - 1; /* x(hi) reaches; x(below) does not or is out */
  for (int64_t step = 1;; step *= 2) {
    int64_t k = hi - step;
    if (k <= floor) {
      if (feri_fast_skey_float((int32_t)floor) / t >= target) return -FLT_MAX;
      below = floor;
      break;
    }
    if (feri_fast_skey_float((int32_t)k) / t >= target) {
      hi = k;
    } else {
      below = k;
      break;
    }
  }
  while (hi - below > 1) {
    const int64_t mid = below + (hi - below) / 2;
    if (feri_fast_skey_float((int32_t)mid) / t >= target) hi = mid;
    else below = mid;
  }
  return feri_fast_skey_float((int32_t)hi);
}

/* Keeps the bits of every logit the sparse processors may change (bias tokens, history tokens,
 * eos), once each, in pos/bits; returns how many. Sets *bad when one of them is NaN or +inf: a ban
 * would overwrite it before pass 1 could see it, while the reference refuses or masks it first. */
static size_t save_sparse(feri_chain *c, const fer_sampling_params *p, uint32_t *pos, uint32_t *bits, int *bad) {
  size_t n = 0;
  *bad = 0;
#define FERI_SAVE(tok)                                        \
  do {                                                        \
    const uint32_t t_ = (uint32_t)(tok);                      \
    if (!c->marks[t_]) {                                      \
      c->marks[t_] = 1;                                       \
      pos[n] = t_;                                            \
      memcpy(&bits[n], &c->logits[t_], sizeof bits[n]);       \
      *bad |= !(c->logits[t_] < INFINITY);                    \
      n++;                                                    \
    }                                                         \
  } while (0)
  for (uint32_t i = 0; i < p->n_logit_bias; i++) FERI_SAVE(p->logit_bias_tokens[i]);
  if (p->repetition_penalty != 1.0f || p->frequency_penalty != 0.0f || p->presence_penalty != 0.0f ||
      p->no_repeat_ngram_size > 0) {
    for (size_t i = 0; i < c->ctx->n_prompt; i++) FERI_SAVE(c->ctx->prompt_tokens[i]);
    for (size_t i = 0; i < c->ctx->n_generated; i++) FERI_SAVE(c->ctx->generated_tokens[i]);
  }
  if (p->min_new_tokens > 0) FERI_SAVE(p->eos_token_id);
#undef FERI_SAVE
  for (size_t j = 0; j < n; j++) c->marks[pos[j]] = 0;
  return n;
}

static int has_sparse(const fer_sampling_params *p) {
  return p->n_logit_bias > 0 || p->repetition_penalty != 1.0f || p->frequency_penalty != 0.0f ||
         p->presence_penalty != 0.0f || p->no_repeat_ngram_size > 0 || p->min_new_tokens > 0;
}

/* Temperature 0: the first maximum survives (feri_greedy's choice, found from the chunk maxima). */
static void fast_greedy(feri_chain *c, const feri_fast_ops *ops, size_t n_chunks) {
  float *x = c->logits;
  float mx = -INFINITY;
  for (size_t j = 0; j < n_chunks; j++) mx = c->cmax[j] > mx ? c->cmax[j] : mx;
  size_t best = 0;
  if (mx != -INFINITY) {
    size_t j = 0;
    while (!(c->cmax[j] == mx)) j++;
    best = j * FERI_FAST_CHUNK;
    while (!(x[best] == mx)) best++;
  }
  const float keep = x[best];
  ops->mask_scale(x, c->vocab, c->cmax, INFINITY, 1.0f, c->cand); /* nothing reaches +inf: all -inf */
  x[best] = keep;
  c->cand[0] = (uint32_t)best;
  c->n_cand = keep == -INFINITY ? 0 : 1;
  c->cand_valid = 1;
}

int feri_fast_front(feri_chain *c, const fer_sampling_params *p, const feri_fast_ops *ops) {
  float *x = c->logits;
  const size_t n = c->vocab, n_chunks = (n + FERI_FAST_CHUNK - 1) / FERI_FAST_CHUNK;
  /* The sparse processors run first, on the saved logits, so that one read pass checks what
   * temperature and top-k will see; NaN or +inf anywhere sends everything back. */
  size_t n_saved = 0;
  if (has_sparse(p)) {
    int bad;
    n_saved = save_sparse(c, p, c->ids, c->keys, &bad);
    if (bad) return 0; /* nothing changed yet */
    feri_chain_sparse(c, p);
  }
  if (ops->chunk_max(x, n, c->cmax)) {
    for (size_t j = 0; j < n_saved; j++) memcpy(&x[c->ids[j]], &c->keys[j], sizeof c->keys[j]);
    c->cand_valid = 0;
    return 0;
  }
  const float t = p->temperature;
  if (t == 0.0f) {
    fast_greedy(c, ops, n_chunks);
    return 1;
  }
  const size_t k = p->top_k > 0 ? (size_t)p->top_k : 0;
  int32_t *keys = (int32_t *)(void *)c->keys;
  const int32_t no_key = feri_fast_skey(-INFINITY);
  /* lo: a lower bound of the k-th largest logit (-FLT_MAX keeps every finite one); exact when it
   * is the k-th largest itself. */
  float lo = -FLT_MAX;
  int exact = k == 0;
  if (k > 0 && k <= n_chunks) {
    for (size_t j = 0; j < n_chunks; j++) keys[j] = feri_fast_skey(c->cmax[j]);
    const int32_t bound = kth_largest_skey(ops, keys, n_chunks, k, no_key);
    if (bound != no_key) lo = feri_fast_skey_float(bound);
  }
  if (k > 0 && lo == -FLT_MAX) {
    /* Fewer than k chunks hold a finite logit (or k is near the vocabulary): select exactly. */
    const uint32_t key = k <= FERI_HEAP_TOPK_MAX ? feri_kth_largest_key_small(x, n, k, (float *)(void *)c->keys)
                                                 : feri_kth_largest_key(x, n, k, c->keys);
    lo = key == 0 ? -FLT_MAX : feri_key_float(key); /* key 0: fewer than k finite, all stay */
    exact = 1;
  }
  /* Every logit whose quotient reaches lo's survives pass 2 (exactly the top-k when exact). */
  const float lo_x = t == 1.0f || lo == -FLT_MAX ? lo : smallest_reaching(lo, t);
  /* With nothing to divide or mask, pass 2 only lists (no stores). */
  size_t m = t == 1.0f && lo_x == -FLT_MAX ? feri_collect_finite(x, n, c->cand)
                                           : ops->mask_scale(x, n, c->cmax, lo_x, t, c->cand);
  if (!exact && m > k) {
    /* The k-th largest quotient among the listed is the chain's threshold: every token at or
     * above it is listed (lo <= it), and it counts only finite values, as top-k does. */
    for (size_t j = 0; j < m; j++) keys[j] = feri_fast_skey(x[c->cand[j]]);
    const float thr = feri_fast_skey_float(kth_largest_skey(ops, keys, m, k, no_key));
    size_t w = 0;
    for (size_t j = 0; j < m; j++) {
      const uint32_t id = c->cand[j];
      if (x[id] >= thr) c->cand[w++] = id;
      else x[id] = -INFINITY;
    }
    m = w;
  }
  c->n_cand = m;
  c->cand_valid = 1;
  return 1;
}
