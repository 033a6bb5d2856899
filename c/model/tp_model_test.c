/* tp_model_test.c: a real model split over 2 or 4 tensor-parallel ranks (mpirun; tp_model_mpi_test.sh)
 * against the same model in one process, on SmolLM2-135M (Q4_1: 9 query heads over 3 KV heads,
 * so the ranks' heads cut KV groups unevenly) and Gemma 3 270M (Q4_K_M: one KV head, held by every
 * rank). Rank 0 leads and checks; the other ranks serve its calls (tp_run.h). Each file SKIPPED
 * when missing.
 * - three prompts, then 64 greedy steps, both sides on the exact f32 route (FERI_MATMUL_EXACT):
 *   the same token at every step, every logit within the bound C-TP-003 states of the single
 *   process's (the all-reduces reorder the final sums of the split projections and nothing else;
 *   the 8-bit route rounds activations, which turns one reordered ulp into a full rounding step:
 *   docs/CLAIMS.md C-TP-003 records what that gives);
 * - a batched step of the three sequences gives each one's logits as its own step would, within
 *   the same bound; again with one candidate a rank instead of the logits (C-TP-010): the same
 *   greedy tokens, and rank 0 takes 16 bytes a row from each other rank; again with top-k 40
 *   (forty candidates a rank and the ties they cut): the sampler draws from those rows what it
 *   draws from the gathered ones, for 16 uniforms a row, and rank 0 takes a fraction of the rows;
 * - a rewind and the same step again: the same bits (the ranks' sums are deterministic);
 * - the bytes each all-reduce sends per token, counted by the layer, equal the formula
 *   4 L d s (p - 1) / p for every rank (C-TP-004).
 * Alone (no mpirun) it checks the one-rank path: a model opened with a one-rank communicator is the
 * whole model, bit for bit.
 * With --mpi-pp the ranks are pipeline stages instead, on the 8-bit route: the same checks with
 * the logits equal bit for bit, rank 0 sending one row of d floats per token and taking V floats
 * of logits back, and the batched step run as micro-batches (one a sequence, up to the stage
 * count) giving the same bits as the step run whole (C-TP-009).
 * With --mpi-grid the 4 ranks are 2 pipeline stages of 2 tensor-parallel ranks each: the tensor-
 * parallel checks, on rank 0's half of the layers (C-TP-011).
 * Tensor-parallel runs also check: per-rank KV against admission's charge (C-TP-012); a batched
 * step drawn by the ranks together (C-TP-013); SmolLM2 again over the 8-bit wire (C-COMM-005).
 * EVIDENCE: C-TP-003 C-TP-004 C-TP-009 C-TP-010 C-TP-011 C-TP-012 C-TP-013 C-COMM-005 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "model/llama.h"
#include "model/model_internal.h"
#include "model/tp_candidates.h"
#include "model/shared_kv.h"
#include "model/tp_run.h"
#include "testing/check.h"
#include "tokenizer/tokenizer.h"

enum { MAX_TOKENS = 160 };

/* Under the sanitizers (make test-sanitize) the 8-bit wire's second model is left out: the
 * optimized build checks it, and the sanitizer build's time goes to every access of the rest. */
#if defined(__SANITIZE_ADDRESS__)
static const bool under_asan = true;
#else
static const bool under_asan = false;
#endif

/* --mpi-pp: the ranks are pipeline stages (the same arithmetic as one process: the same bits,
 * on the default 8-bit route), not tensor-parallel shares */
static bool pipeline_mode;
/* --mpi-grid: pipeline stages of 2 tensor-parallel ranks each (4 ranks: 2 x 2) */
static bool grid_mode;

static const char *const PROMPTS[3] = {"The capital of France is", "def fibonacci(n):\n    ",
                                       "Once upon a time, in a small village,"};

static float max_abs(const float *v, uint32_t n) {
  float m = 0;
  for (uint32_t i = 0; i < n; i++) m = fabsf(v[i]) > m ? fabsf(v[i]) : m;
  return m;
}

/* The largest |a - b| relative to the largest |b| (the bound's scale, C-TP-003). */
static double rel_diff(const float *a, const float *b, uint32_t n) {
  double d = 0;
  for (uint32_t i = 0; i < n; i++) d = fabs((double)a[i] - b[i]) > d ? fabs((double)a[i] - b[i]) : d;
  return d / (max_abs(b, n) > 0 ? max_abs(b, n) : 1);
}

/* steps greedy steps after each prompt; the logits' largest difference relative to the largest
 * logit within `bound` (C-TP-003). */
/* Per-rank KV against admission's charge (C-TP-012): a sequence of 150 tokens on a shared KV
 * cache, as the scheduler makes one, commits on each rank at most what feri_llama_kv_charge_geometry
 * projects, and exactly that on the rank holding the most KV; where rank 0 holds less (SmolLM2 at
 * 4 ranks), its own geometry's charge falls short of that rank's memory, and a prefix cache entry
 * of those tokens is charged the difference (feri_llama_kv_extra_bytes). */
static void check_kv_charge(feri_llama *tp, fer_threadpool *pool, const char *name) {
  enum { N = 150 };
  uint32_t rank, size;
  feri_llama_tp_ranks(tp, &rank, &size);
  feri_llama_seq_options so = feri_llama_seq_defaults();
  so.policy = FER_KV_POLICY_FIXED_MAX;
  fer_kv_geometry own, charged;
  uint64_t granule = 0, g2 = 0;
  CHECK_STATUS(feri_llama_kv_geometry(tp, MAX_TOKENS, &so, &own, &granule), FER_STATUS_OK);
  CHECK_STATUS(feri_llama_kv_charge_geometry(tp, MAX_TOKENS, &so, &charged, &g2), FER_STATUS_OK);
  uint64_t want = 0, mine = 0;
  CHECK_STATUS(fer_kv_committed_granules(&charged, N, granule, &want), FER_STATUS_OK);
  CHECK_STATUS(fer_kv_committed_granules(&own, N, granule, &mine), FER_STATUS_OK);
  want *= granule, mine *= granule;
  uint64_t before[8] = {0}, after[8] = {0}, extra[8] = {0};
  CHECK(size <= 8);
  CHECK_STATUS(feri_llama_tp_kv_bytes(tp, before, 8), FER_STATUS_OK);
  CHECK_STATUS(feri_llama_tp_kv_bytes(tp, before, size - 1 + (size == 1)), size == 1 ? FER_STATUS_OK : FER_STATUS_INVALID_ARG);
  CHECK_STATUS(feri_llama_tp_kv_bytes(tp, before, 8), FER_STATUS_OK); /* the refused call changed nothing */
  fer_vmm_options vo;
  fer_vmm_options_init(&vo);
  vo.granule_bytes = granule;
  vo.max_granules = 2 * (want / granule) + 64;
  fer_kv_cache_options ko;
  fer_kv_cache_options_init(&ko);
  ko.policy = FER_KV_POLICY_FIXED_MAX, ko.dtype = so.dtype, ko.min_bucket = 1, ko.geometry = own;
  fer_vmm *vmm = NULL;
  fer_kv_cache *cache = NULL;
  fer_kv_seq *kv = NULL;
  feri_llama_seq *s = NULL;
  CHECK_STATUS(feri_llama_kv_cache_create(tp, &vo, &ko, &vmm, &cache), FER_STATUS_OK);
  if (cache) CHECK_STATUS(feri_llama_kv_seq_create(tp, cache, &kv), FER_STATUS_OK);
  if (kv) CHECK_STATUS(feri_llama_seq_create_on(tp, kv, 0, MAX_TOKENS, &s), FER_STATUS_OK);
  if (s) {
    int32_t ids[N];
    for (int i = 0; i < N; i++) ids[i] = 100 + 7 * i;
    float *logits = malloc(feri_llama_config_of(tp)->n_vocab * sizeof *logits);
    CHECK_STATUS(feri_llama_forward(s, pool, ids, N, logits), FER_STATUS_OK);
    free(logits);
    CHECK_STATUS(feri_llama_tp_kv_bytes(tp, after, 8), FER_STATUS_OK);
  }
  uint64_t most = 0;
  bool under = true;
  char list[256] = "";
  for (uint32_t r = 0; r < size; r++) {
    extra[r] = after[r] - before[r];
    most = extra[r] > most ? extra[r] : most;
    under &= extra[r] <= want;
    snprintf(list + strlen(list), sizeof list - strlen(list), "%s%llu", r ? " " : "", (unsigned long long)extra[r]);
  }
  printf("tp_model_test: %s KV of %d tokens per rank: %s bytes; admission charges %llu (rank 0's own geometry: %llu)\n",
         name, N, list, (unsigned long long)want, (unsigned long long)mine);
  CHECK(under && most == want && extra[0] == mine);
  /* SmolLM2 at 4 ranks: rank 2 holds 2 KV heads, the others 1, and 150 tokens span more granules
   * for it: the charge must exceed what rank 0's own geometry would charge */
  if (size == 4 && feri_llama_config_of(tp)->n_head_kv == 3 && tp->stages == 1) CHECK(want > mine);
  /* what a prefix cache entry of these tokens adds to its charge on rank 0 */
  CHECK(feri_llama_kv_extra_bytes(tp, &own, N, granule) == want - mine);
  feri_llama_seq_free(s); /* frees kv with it */
  if (!s) feri_llama_kv_seq_free(tp, kv);
  feri_llama_kv_cache_free(tp, cache, vmm);
}

static void lead(feri_llama *tp, feri_llama *one, fer_threadpool *pool, const char *name, double bound, int steps_per) {
  const feri_llama_config *c = feri_llama_config_of(one);
  const uint32_t V = c->n_vocab;
  uint32_t rank, size;
  feri_llama_tp_ranks(tp, &rank, &size);
  /* the ranks holding a share of the head (all of them, or a last stage's) and those rank 0
   * takes logits from (all but itself, or every one of a last stage's) */
  const uint32_t shares = tp->tp.size, remote = tp->stages > 1 ? shares : shares - 1;
  fer_tokenizer *tok = NULL;
  CHECK_STATUS(feri_tokenizer_from_gguf(feri_llama_gguf(one), &tok), FER_STATUS_OK);
  float *a = malloc(V * sizeof *a), *b = malloc(V * sizeof *b), *batch = malloc(3 * (size_t)V * sizeof *batch);
  feri_llama_seq *ts[3] = {0}, *os[3] = {0};
  int32_t last[3] = {0};
  double worst = 0;
  uint32_t same = 0, steps = 0;
  for (int p = 0; p < 3; p++) {
    int32_t ids[64];
    size_t n = 0;
    CHECK_STATUS(fer_tokenizer_encode(tok, PROMPTS[p], strlen(PROMPTS[p]), 0, ids, 64, &n), FER_STATUS_OK);
    CHECK_STATUS(feri_llama_seq_create(tp, MAX_TOKENS, NULL, &ts[p]), FER_STATUS_OK);
    CHECK_STATUS(feri_llama_seq_create(one, MAX_TOKENS, NULL, &os[p]), FER_STATUS_OK);
    if (!ts[p] || !os[p]) break;
    CHECK_STATUS(feri_llama_forward(ts[p], pool, ids, (uint32_t)n, a), FER_STATUS_OK);
    CHECK_STATUS(feri_llama_forward(os[p], pool, ids, (uint32_t)n, b), FER_STATUS_OK);
    for (int s = 0; s < steps_per; s++) {
      const double d = rel_diff(a, b, V);
      worst = d > worst ? d : worst;
      const int32_t t = feri_test_argmax(a, V);
      same += t == feri_test_argmax(b, V);
      steps++;
      last[p] = t;
      if (s == steps_per - 1) break;
      CHECK_STATUS(feri_llama_forward(ts[p], pool, &t, 1, a), FER_STATUS_OK);
      CHECK_STATUS(feri_llama_forward(os[p], pool, &t, 1, b), FER_STATUS_OK);
    }
  }
  printf("tp_model_test: %s at %u %s: %u of %u greedy tokens the same, logits within %.2e of the largest\n", name,
         size, pipeline_mode ? "pipeline stages" : grid_mode ? "ranks (stages of 2 tensor-parallel ranks)" : "tensor-parallel ranks",
         same, steps, worst);
  CHECK(steps == 3u * (uint32_t)steps_per && same == steps);
  CHECK(worst <= bound);
  if (ts[0] && ts[1] && ts[2]) {
    /* a batched step of the three against each one's own single-process step */
    feri_llama_batch *bt = NULL;
    CHECK_STATUS(feri_llama_batch_create(tp, 4, &bt), FER_STATUS_OK);
    const uint32_t len0 = feri_llama_seq_len(ts[0]);
    CHECK_STATUS(feri_llama_forward_batch(bt, pool, ts, last, 3, batch), FER_STATUS_OK);
    double bw = 0;
    for (int p = 0; p < 3; p++) {
      CHECK_STATUS(feri_llama_forward(os[p], pool, &last[p], 1, b), FER_STATUS_OK);
      const double d = rel_diff(batch + (size_t)p * V, b, V);
      bw = d > bw ? d : bw;
      CHECK(feri_test_argmax(batch + (size_t)p * V, V) == feri_test_argmax(b, V));
    }
    printf("tp_model_test: %s batched step within %.2e\n", name, bw);
    CHECK(bw <= bound);
    if (!pipeline_mode) { /* C-TP-010: the same step again with one candidate a rank: the same greedy tokens */
      uint32_t lens[3];
      for (int p = 0; p < 3; p++) lens[p] = feri_llama_seq_len(ts[p]) - 1;
      for (int p = 0; p < 3; p++) CHECK_STATUS(feri_llama_seq_rewind(ts[p], lens[p]), FER_STATUS_OK);
      float *sparse = malloc(3 * (size_t)V * sizeof *sparse);
      feri_tp_traffic c0, c1;
      feri_llama_tp_traffic(tp, &c0);
      feri_llama_batch_set_candidates(bt, 1);
      CHECK_STATUS(feri_llama_forward_batch(bt, pool, ts, last, 3, sparse), FER_STATUS_OK);
      feri_llama_tp_traffic(tp, &c1);
      uint32_t finite = 0;
      for (int p = 0; p < 3; p++) {
        CHECK(feri_test_argmax(sparse + (size_t)p * V, V) == feri_test_argmax(batch + (size_t)p * V, V));
        for (uint32_t v = 0; v < V; v++) finite += isfinite(sparse[(size_t)p * V + v]);
      }
      /* rank 0 took from each other rank a candidate and its count of cut ties, 8 bytes each, a row
       * (more only where a rank's best value is tied), instead of (p - 1) / p of every row */
      const uint64_t took = c1.logits_bytes - c0.logits_bytes, min = 3ull * remote * 2 * 8;
      printf("tp_model_test: %s batched step with one candidate a rank: %llu bytes of logits taken, %u finite\n", name,
             (unsigned long long)took, finite);
      CHECK(took >= min && took <= min + 3ull * remote * 8 && finite <= 3 * shares + 3);
      /* C-TP-010: top-k 40 sampling, forty candidates a rank and their cut ties: the sampler's draw
       * from those rows is its draw from the gathered rows, for 16 uniforms a row */
      for (int p = 0; p < 3; p++) CHECK_STATUS(feri_llama_seq_rewind(ts[p], lens[p]), FER_STATUS_OK);
      fer_sampling_params sp;
      fer_sampling_params_init(&sp);
      sp.top_k = 40, sp.temperature = 1.5f, sp.top_p = 0.95f; /* hot enough that rows draw several tokens */
      const uint32_t k = feri_tp_candidates_needed(&sp, false, false);
      CHECK(k == 40);
      feri_llama_batch_set_candidates(bt, k);
      feri_llama_tp_traffic(tp, &c0);
      CHECK_STATUS(feri_llama_forward_batch(bt, pool, ts, last, 3, sparse), FER_STATUS_OK);
      feri_llama_tp_traffic(tp, &c1);
      fer_sampler *sm = NULL;
      CHECK_STATUS(fer_sampler_create(&sp, &sm), FER_STATUS_OK);
      float *w1 = malloc(V * sizeof *w1), *w2 = malloc(V * sizeof *w2);
      const fer_sampling_context ctx = {0};
      uint32_t draws = 0, same_draws = 0, distinct = 0;
      for (int p = 0; p < 3 && sm; p++) {
        int32_t first = -1;
        bool varied = false;
        for (int u = 0; u < 16; u++) {
          int32_t x = -1, y = -2;
          memcpy(w1, batch + (size_t)p * V, V * sizeof *w1);
          memcpy(w2, sparse + (size_t)p * V, V * sizeof *w2);
          CHECK_STATUS(fer_sampler_sample_uniform(sm, w1, V, &ctx, (u + 0.5) / 16, &x, NULL), FER_STATUS_OK);
          CHECK_STATUS(fer_sampler_sample_uniform(sm, w2, V, &ctx, (u + 0.5) / 16, &y, NULL), FER_STATUS_OK);
          draws++, same_draws += x == y;
          varied |= u > 0 && x != first;
          if (u == 0) first = x;
        }
        distinct += varied;
      }
      const uint64_t took40 = c1.logits_bytes - c0.logits_bytes, min40 = 3ull * remote * (k + 1) * 8;
      printf("tp_model_test: %s batched step with %u candidates a rank: %u of %u top-k draws the same as from the "
             "gathered rows (%u rows drew more than one token), %llu bytes of logits taken\n", name, k, same_draws, draws,
             distinct, (unsigned long long)took40);
      CHECK(draws == 48 && same_draws == draws && distinct >= 1);
      CHECK(took40 >= min40 && took40 < 3ull * remote * (V / shares) * 4 / 10); /* under a tenth of the rows */
      fer_sampler_free(sm);
      /* C-TP-013: plain sampling (temperature 1.3, rows 0 and 2) and greedy decoding (row 1) drawn
       * by the ranks together: the sampler, run on rank 0's rows, returns its draw from the
       * gathered rows, for 4 uniforms a row */
      const float temps[3] = {1.3f, 0.0f, 1.3f};
      fer_sampler *plain = NULL, *greedy = NULL;
      fer_sampling_params_init(&sp);
      sp.temperature = 1.3f;
      CHECK_STATUS(fer_sampler_create(&sp, &plain), FER_STATUS_OK);
      sp.temperature = 0.0f;
      CHECK_STATUS(fer_sampler_create(&sp, &greedy), FER_STATUS_OK);
      uint32_t same_drawn = 0, drawn = 0, finite_drawn = 0;
      int32_t seen[2] = {-1, -1};
      bool varied_drawn = false;
      uint64_t took_drawn = 0;
      for (int u = 0; u < 4 && plain && greedy; u++) {
        double us[3];
        for (int p = 0; p < 3; p++) us[p] = (u + 0.5) / 4 + 0.01 * p;
        for (int p = 0; p < 3; p++) CHECK_STATUS(feri_llama_seq_rewind(ts[p], lens[p]), FER_STATUS_OK);
        feri_llama_batch_set_draws(bt, temps, us, 3);
        feri_llama_tp_traffic(tp, &c0);
        CHECK_STATUS(feri_llama_forward_batch(bt, pool, ts, last, 3, sparse), FER_STATUS_OK);
        feri_llama_tp_traffic(tp, &c1);
        took_drawn += c1.logits_bytes - c0.logits_bytes;
        for (int p = 0; p < 3; p++) {
          fer_sampler *sm_p = temps[p] == 0.0f ? greedy : plain;
          int32_t x = -1, y = -2;
          memcpy(w1, batch + (size_t)p * V, V * sizeof *w1);
          memcpy(w2, sparse + (size_t)p * V, V * sizeof *w2);
          for (uint32_t v = 0; v < V; v++) finite_drawn += isfinite(w2[v]);
          CHECK_STATUS(fer_sampler_sample_uniform(sm_p, w1, V, &ctx, us[p], &x, NULL), FER_STATUS_OK);
          CHECK_STATUS(fer_sampler_sample_uniform(sm_p, w2, V, &ctx, us[p], &y, NULL), FER_STATUS_OK);
          drawn++, same_drawn += x == y;
          if (p == 0) varied_drawn |= seen[0] >= 0 && x != seen[0], seen[0] = x;
        }
      }
      feri_llama_batch_set_draws(bt, NULL, NULL, 0);
      printf("tp_model_test: %s batched step drawn by the ranks together (temperature 1.3 and greedy): %u of %u draws the "
             "same as from the gathered rows, %llu bytes of logits taken in 4 steps\n", name, same_drawn, drawn,
             (unsigned long long)took_drawn);
      CHECK(drawn == 12 && same_drawn == drawn && varied_drawn);
      /* one finite value a row, and a small fraction of the rows' bytes */
      CHECK(finite_drawn == 12);
      CHECK(took_drawn < 4ull * 3 * remote * (V / shares) * 4 / 20);
      fer_sampler_free(plain), fer_sampler_free(greedy);
      free(w1), free(w2);
      free(sparse);
    }
    if (pipeline_mode) { /* C-TP-009: the step ran as one micro-batch a sequence (3 stages: 3 parts); whole, the same bits */
      uint32_t lens[3];
      for (int p = 0; p < 3; p++) lens[p] = feri_llama_seq_len(ts[p]) - 1;
      for (int p = 0; p < 3; p++) CHECK_STATUS(feri_llama_seq_rewind(ts[p], lens[p]), FER_STATUS_OK);
      float *whole = malloc(3 * (size_t)V * sizeof *whole);
      feri_tp_traffic c0, c1, c2;
      feri_llama_tp_traffic(tp, &c0);
      feri_llama_batch_set_micro_batches(bt, 1);
      CHECK_STATUS(feri_llama_forward_batch(bt, pool, ts, last, 3, whole), FER_STATUS_OK);
      feri_llama_tp_traffic(tp, &c1);
      for (int p = 0; p < 3; p++) CHECK_STATUS(feri_llama_seq_rewind(ts[p], lens[p]), FER_STATUS_OK);
      feri_llama_batch_set_micro_batches(bt, size);
      CHECK_STATUS(feri_llama_forward_batch(bt, pool, ts, last, 3, batch), FER_STATUS_OK);
      feri_llama_tp_traffic(tp, &c2);
      const uint64_t split = c2.stage_passes - c1.stage_passes;
      /* left to the model (a new batch): it tries the whole step, then the split one, then runs the cheaper */
      feri_llama_batch *ab = NULL;
      CHECK_STATUS(feri_llama_batch_create(tp, 4, &ab), FER_STATUS_OK);
      uint64_t passes[4] = {0};
      for (int k = 0; k < 4 && ab; k++) {
        feri_tp_traffic ca, cb;
        for (int p = 0; p < 3; p++) CHECK_STATUS(feri_llama_seq_rewind(ts[p], lens[p]), FER_STATUS_OK);
        feri_llama_tp_traffic(tp, &ca);
        CHECK_STATUS(feri_llama_forward_batch(ab, pool, ts, last, 3, whole), FER_STATUS_OK);
        feri_llama_tp_traffic(tp, &cb);
        passes[k] = cb.stage_passes - ca.stage_passes;
        CHECK(memcmp(whole, batch, 3 * (size_t)V * sizeof *whole) == 0);
      }
      printf("tp_model_test: %s micro-batches left to the model: %llu, %llu, then %llu and %llu passes\n", name,
             (unsigned long long)passes[0], (unsigned long long)passes[1], (unsigned long long)passes[2],
             (unsigned long long)passes[3]);
      CHECK(passes[0] == 1 && passes[1] == split && passes[2] == passes[3] && (passes[2] == 1 || passes[2] == split));
      feri_llama_batch_free(ab);
      printf("tp_model_test: %s batched step over %u stages: %llu pass(es) as a whole, %llu as micro-batches, the same "
             "bits: %s\n", name, size, (unsigned long long)(c1.stage_passes - c0.stage_passes), (unsigned long long)split,
             memcmp(whole, batch, 3 * (size_t)V * sizeof *whole) == 0 ? "yes" : "no");
      CHECK(c1.stage_passes - c0.stage_passes == 1 && split == (size < 3 ? size : 3));
      CHECK(memcmp(whole, batch, 3 * (size_t)V * sizeof *whole) == 0);
      CHECK(c2.logits_bytes - c1.logits_bytes == c1.logits_bytes - c0.logits_bytes &&
            c1.logits_bytes - c0.logits_bytes == 3ull * V * 4);
      free(whole);
    }
    feri_llama_batch_free(bt);
    /* rewind one token and step again: the same bits */
    CHECK_STATUS(feri_llama_seq_rewind(ts[0], len0), FER_STATUS_OK);
    float *again = malloc(V * sizeof *again);
    feri_tp_traffic t0, t1;
    feri_llama_tp_traffic(tp, &t0);
    CHECK_STATUS(feri_llama_forward(ts[0], pool, &last[0], 1, again), FER_STATUS_OK);
    feri_llama_tp_traffic(tp, &t1);
    CHECK(memcmp(again, batch, V * sizeof *again) == 0 || rel_diff(again, batch, V) <= bound);
    CHECK_STATUS(feri_llama_seq_rewind(ts[0], len0), FER_STATUS_OK);
    CHECK_STATUS(feri_llama_forward(ts[0], pool, &last[0], 1, a), FER_STATUS_OK);
    CHECK(memcmp(again, a, V * sizeof *a) == 0);
    if (pipeline_mode) { /* C-TP-009: rank 0 sends one row of d floats on, takes V floats of logits back */
      printf("tp_model_test: %s one token through %u stages: rank 0 sent %llu bytes of its stage's rows, took %llu of "
             "logits\n", name, size, (unsigned long long)(t1.stage_bytes - t0.stage_bytes),
             (unsigned long long)(t1.logits_bytes - t0.logits_bytes));
      CHECK(t1.stage_bytes - t0.stage_bytes == 4ull * c->n_embd && t1.logits_bytes - t0.logits_bytes == 4ull * V);
      CHECK(t1.allreduce_sent == t0.allreduce_sent);
    }
    /* C-TP-004: one token, every all-reduce of every layer: 2 L x 2 (p - 1) / p x d x 4 bytes sent */
    const uint64_t want = feri_tp_bytes_per_token(tp->l1 - tp->l0, c->n_embd, 4, shares) / shares; /* rank 0's layers */
    if (!pipeline_mode) printf("tp_model_test: %s one token: all-reduces sent %llu bytes (formula %llu), logits %llu, calls %llu\n", name,
           (unsigned long long)(t1.allreduce_sent - t0.allreduce_sent), (unsigned long long)want,
           (unsigned long long)(t1.logits_bytes - t0.logits_bytes), (unsigned long long)(t1.call_bytes - t0.call_bytes));
    CHECK(pipeline_mode || t1.allreduce_sent - t0.allreduce_sent == want);
    CHECK(pipeline_mode || t1.allreduce_received - t0.allreduce_received == want);
    free(again);
  }
  for (int p = 0; p < 3; p++) feri_llama_seq_free(ts[p]), feri_llama_seq_free(os[p]);
  check_kv_charge(tp, pool, name);
  fer_tokenizer_free(tok);
  free(a), free(b), free(batch);
}

/* The all-reduces as Q8_0 blocks (feri_llama_options.tp_wire, C-COMM-005), exact route otherwise:
 * rank 0's all-reduces send, per token, what the 8-bit ring sends for its chunks of d / 32
 * blocks (34 bytes each), twice a layer; a prompt and greedy steps against one process: the
 * logits within Q8_BOUND of the largest, and the tokens (counted). */
#define Q8_BOUND 2.5e-1
static void run_q8_wire(feri_comm *c, fer_threadpool *pool, const char *path, const char *name) {
  feri_llama_options o = {.weights = FERI_WEIGHTS_MAPPED, .matmul = FERI_MATMUL_EXACT, .comm = c, .tp_wire = FERI_TP_WIRE_Q8};
  feri_llama *tp = NULL, *one = NULL;
  CHECK_STATUS(feri_llama_open_with(path, &o, &tp), FER_STATUS_OK);
  if (!tp) return;
  if (feri_comm_rank(c) != 0) {
    CHECK_STATUS(feri_llama_tp_serve(tp, pool), FER_STATUS_OK);
    feri_llama_close(tp);
    return;
  }
  CHECK_STATUS(feri_llama_tp_lead(tp), FER_STATUS_OK);
  CHECK_STATUS(feri_llama_open(path, &one), FER_STATUS_OK);
  if (one) CHECK_STATUS(feri_llama_set_matmul(one, FERI_MATMUL_EXACT), FER_STATUS_OK);
  const feri_llama_config *cfg = feri_llama_config_of(tp);
  const uint32_t V = cfg->n_vocab, p = (uint32_t)feri_comm_size(c), blocks = cfg->n_embd / 32;
  fer_tokenizer *tok = NULL;
  CHECK_STATUS(feri_tokenizer_from_gguf(feri_llama_gguf(tp), &tok), FER_STATUS_OK);
  float *a = malloc(V * sizeof *a), *b = malloc(V * sizeof *b);
  feri_llama_seq *ts = NULL, *os = NULL;
  int32_t ids[64];
  size_t n = 0;
  CHECK_STATUS(fer_tokenizer_encode(tok, PROMPTS[0], strlen(PROMPTS[0]), 0, ids, 64, &n), FER_STATUS_OK);
  CHECK_STATUS(feri_llama_seq_create(tp, MAX_TOKENS, NULL, &ts), FER_STATUS_OK);
  CHECK_STATUS(feri_llama_seq_create(one, MAX_TOKENS, NULL, &os), FER_STATUS_OK);
  double worst = 0;
  uint32_t same = 0, steps = 0;
  uint64_t sent = 0;
  if (ts && os) {
    CHECK_STATUS(feri_llama_forward(ts, pool, ids, (uint32_t)n, a), FER_STATUS_OK);
    CHECK_STATUS(feri_llama_forward(os, pool, ids, (uint32_t)n, b), FER_STATUS_OK);
    for (int s = 0; s < 8; s++) {
      const double d = rel_diff(a, b, V);
      worst = d > worst ? d : worst;
      const int32_t t = feri_test_argmax(b, V); /* both follow one process's tokens */
      same += feri_test_argmax(a, V) == t, steps++;
      feri_tp_traffic t0, t1;
      feri_llama_tp_traffic(tp, &t0);
      CHECK_STATUS(feri_llama_forward(ts, pool, &t, 1, a), FER_STATUS_OK);
      feri_llama_tp_traffic(tp, &t1);
      sent = t1.allreduce_sent - t0.allreduce_sent;
      CHECK_STATUS(feri_llama_forward(os, pool, &t, 1, b), FER_STATUS_OK);
    }
  }
  /* rank 0's share of the 8-bit ring: reduce-scatter chunks 0, p - 1, .., 2; all-gather 1, 0, .., 3 */
  uint64_t per_allreduce = 0;
  for (uint32_t s = 0; s + 1 < p; s++) {
    size_t st, rs, ag;
    feri_comm_chunk(blocks, (int)p, (int)((p - s) % p), &st, &rs);
    feri_comm_chunk(blocks, (int)p, (int)((1 + p - s) % p), &st, &ag);
    per_allreduce += (rs + ag) * FERI_COMM_Q8_BLOCK_BYTES;
  }
  const uint64_t want = 2ull * cfg->n_layer * per_allreduce;
  printf("tp_model_test: %s with 8-bit all-reduces at %u ranks: %u of %u greedy tokens the same, logits within %.2e of the "
         "largest (bound %.0e); a token's all-reduces sent %llu bytes (formula %llu; f32: %llu)\n", name, p, same, steps, worst,
         Q8_BOUND, (unsigned long long)sent, (unsigned long long)want,
         (unsigned long long)(feri_tp_bytes_per_token(cfg->n_layer, cfg->n_embd, 4, p) / p));
  CHECK(steps == 8 && same >= 6 && worst <= Q8_BOUND && sent == want);
  feri_llama_seq_free(ts), feri_llama_seq_free(os);
  fer_tokenizer_free(tok);
  free(a), free(b);
  feri_llama_close(one);
  feri_llama_close(tp);
}

static void run_file(feri_comm *c, const char *file, const char *name, double bound, int steps) {
  char path[512];
  if (!feri_test_data_path(file, path, sizeof path)) {
    printf("SKIPPED: tp_model_test %s (%s missing: scripts/fetch-test-data.sh)\n", name, file);
    return;
  }
  fer_threadpool_options po;
  fer_threadpool_options_init(&po);
  po.n_threads = 1;
  fer_threadpool *pool = NULL;
  CHECK_STATUS(fer_threadpool_create(&po, &pool), FER_STATUS_OK);
  /* tensor parallelism on the exact route (C-TP-003), pipelines on the default 8-bit one */
  const int32_t route = pipeline_mode ? FERI_MATMUL_I8 : FERI_MATMUL_EXACT;
  feri_llama_options o = {.weights = FERI_WEIGHTS_MAPPED, .matmul = route, .comm = c,
                          .pipeline = pipeline_mode || grid_mode, .tensor_parallel = grid_mode ? 2 : 0};
  feri_llama *tp = NULL;
  CHECK_STATUS(feri_llama_open_with(path, &o, &tp), FER_STATUS_OK);
  if (tp && feri_comm_rank(c) != 0) {
    CHECK_STATUS(feri_llama_tp_serve(tp, pool), FER_STATUS_OK);
  } else if (tp) {
    feri_llama *one = NULL;
    CHECK_STATUS(feri_llama_tp_lead(tp), FER_STATUS_OK);
    CHECK_STATUS(feri_llama_open(path, &one), FER_STATUS_OK);
    if (one) CHECK_STATUS(feri_llama_set_matmul(one, route), FER_STATUS_OK);
    if (one) lead(tp, one, pool, name, pipeline_mode ? 0.0 : bound, steps); /* stages: the same bits */
    feri_llama_close(one);
  }
  feri_llama_close(tp);
  tp = NULL;
  if (!pipeline_mode && !grid_mode && !under_asan && strstr(file, "smollm2")) run_q8_wire(c, pool, path, name);
  feri_comm_stats cs;
  feri_comm_get_stats(c, &cs); /* every byte this rank handed MPI so far (tp_netns_test.sh compares) */
  printf("tp_traffic: rank %d sent %llu in %llu messages\n", feri_comm_rank(c), (unsigned long long)cs.bytes_sent,
         (unsigned long long)cs.messages_sent);
  feri_llama_close(tp);
  fer_threadpool_free(pool);
}

/* One rank: the communicator changes nothing. */
static void test_alone(void) {
  char path[512];
  if (!feri_test_data_path("smollm2-135m-instruct-q4_1.gguf", path, sizeof path)) {
    printf("SKIPPED: tp_model_test alone (smollm2-135m-instruct-q4_1.gguf missing)\n");
    return;
  }
  feri_comm *c = NULL;
  CHECK_STATUS(feri_comm_self(&c), FER_STATUS_OK);
  feri_llama_options o = {.weights = FERI_WEIGHTS_MAPPED, .matmul = FERI_MATMUL_I8, .comm = c};
  feri_llama *m = NULL, *one = NULL;
  CHECK_STATUS(feri_llama_open_with(path, &o, &m), FER_STATUS_OK);
  CHECK_STATUS(feri_llama_open(path, &one), FER_STATUS_OK);
  CHECK_STATUS(feri_llama_tp_lead(m), FER_STATUS_INVALID_ARG); /* nothing to lead */
  fer_threadpool *pool = NULL;
  fer_threadpool_options po;
  fer_threadpool_options_init(&po);
  po.n_threads = 1;
  CHECK_STATUS(fer_threadpool_create(&po, &pool), FER_STATUS_OK);
  CHECK_STATUS(feri_llama_tp_serve(m, pool), FER_STATUS_INVALID_ARG);
  const uint32_t V = feri_llama_config_of(one)->n_vocab;
  float *a = malloc(V * sizeof *a), *b = malloc(V * sizeof *b);
  feri_llama_seq *s = NULL, *t = NULL;
  CHECK_STATUS(feri_llama_seq_create(m, 32, NULL, &s), FER_STATUS_OK);
  CHECK_STATUS(feri_llama_seq_create(one, 32, NULL, &t), FER_STATUS_OK);
  const int32_t ids[4] = {1, 504, 3458, 282};
  CHECK_STATUS(feri_llama_forward(s, pool, ids, 4, a), FER_STATUS_OK);
  CHECK_STATUS(feri_llama_forward(t, pool, ids, 4, b), FER_STATUS_OK);
  CHECK(memcmp(a, b, V * sizeof *a) == 0);
  feri_llama_seq_free(s), feri_llama_seq_free(t);
  free(a), free(b);
  feri_llama_close(m), feri_llama_close(one);
  fer_threadpool_free(pool);
  feri_comm_free(c);
}

int main(int argc, char **argv) {
  if (argc > 1 && (strcmp(argv[1], "--mpi") == 0 || strcmp(argv[1], "--mpi-pp") == 0 || strcmp(argv[1], "--mpi-grid") == 0)) {
    /* --mpi[-pp|-grid] [STEPS [smollm2]]: greedy steps per prompt (default 64); SmolLM2 alone */
    pipeline_mode = strcmp(argv[1], "--mpi-pp") == 0;
    grid_mode = strcmp(argv[1], "--mpi-grid") == 0;
    const int steps = argc > 2 && atoi(argv[2]) > 0 ? atoi(argv[2]) : 64;
    const bool only_smollm2 = argc > 3 && strcmp(argv[3], "smollm2") == 0;
    (void)steps, (void)only_smollm2;
    feri_comm *c = NULL;
    CHECK_STATUS(feri_comm_mpi(&c), FER_STATUS_OK);
    if (c) {
      /* f32 arithmetic throughout: only the sums' order differs. Gemma rounds every GELU input to
       * f16 (its table, model_internal.h): a reordered sum that crosses an f16 rounding boundary
       * moves that input by 2^-11 of itself, so its bound is wider (C-TP-003). Under ASan, one
       * model and fewer steps. */
#if defined(__SANITIZE_ADDRESS__)
      run_file(c, "smollm2-135m-instruct-q4_1.gguf", "SmolLM2-135M Q4_1", 1e-4, 4);
#else
      run_file(c, "smollm2-135m-instruct-q4_1.gguf", "SmolLM2-135M Q4_1", 1e-4, steps);
      if (!only_smollm2) run_file(c, "gemma3-270m-q4_k_m.gguf", "Gemma 3 270M Q4_K_M", 2e-2, steps);
#endif
      printf("tp_model_test: rank %d of %d\n", feri_comm_rank(c), feri_comm_size(c));
    }
    feri_comm_free(c);
  } else {
    test_alone();
  }
  return feri_test_finish("tp_model_test");
}
