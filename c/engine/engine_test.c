/* engine_test.c: the public engine on the seeded tiny models (no downloads): configuration and the
 * environment read at creation only (two engines, two settings, one process), admission by the
 * governor, the batched step against one-sequence steps, rewind, cancel, bad input, and the file's
 * pooling type.
 * EVIDENCE: C-ENG-013 C-ENG-014 C-ENG-015 C-ENG-016 C-ENG-017 C-ENG-021 C-CUDA-005 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferrite.h"
#include "model/tiny.h"
#include "testing/check.h"

typedef struct tiny {
  void *img;
  size_t bytes;
} tiny;

static tiny make_tiny(const char *arch) {
  tiny t = {NULL, 0};
  CHECK_STATUS(fer_tiny_model_image(arch, 1, &t.img, &t.bytes), FER_STATUS_OK);
  return t;
}

static fer_engine *engine_on(const tiny *t, const fer_engine_config *base) {
  fer_engine_config c;
  if (base) c = *base;
  else fer_engine_config_init(&c);
  c.model_image = t->img;
  c.model_image_bytes = t->bytes;
  c.n_threads = c.n_threads ? c.n_threads : 2;
  fer_engine *e = NULL;
  CHECK_STATUS(fer_engine_create(&c, &e), FER_STATUS_OK);
  return e;
}

static const int32_t PROMPT[12] = {116, 104, 101, 32, 113, 117, 105, 99, 107, 256, 258, 32};

static int last_error_has(const char *needle) {
  char msg[512];
  size_t len;
  fer_last_error_message(msg, sizeof msg, &len);
  if (!strstr(msg, needle)) fprintf(stderr, "  message '%s' lacks '%s'\n", msg, needle);
  return strstr(msg, needle) != NULL;
}

/* Greedy tokens of a prefill of PROMPT then n one-token steps; logits of the last step kept. */
static void greedy(fer_engine *e, int n, int32_t *tokens, float *last_logits, fer_engine_seq_stats *stats) {
  fer_model_info info;
  fer_engine_model_info(e, &info);
  float *lg = malloc(info.n_vocab * sizeof(float));
  fer_engine_seq *s = NULL;
  CHECK_STATUS(fer_engine_seq_create(e, 64, &s), FER_STATUS_OK);
  if (!s || !lg) return;
  CHECK_STATUS(fer_engine_prefill(s, PROMPT, 12, lg, info.n_vocab), FER_STATUS_OK);
  for (int i = 0; i < n; i++) {
    int32_t best = 0;
    for (uint32_t v = 1; v < info.n_vocab; v++) best = lg[v] > lg[best] ? (int32_t)v : best;
    tokens[i] = best;
    CHECK_STATUS(fer_engine_decode(e, &s, &best, 1, lg, info.n_vocab), FER_STATUS_OK);
  }
  memcpy(last_logits, lg, info.n_vocab * sizeof(float));
  if (stats) fer_engine_seq_get_stats(s, stats);
  fer_engine_seq_free(s);
  free(lg);
}

/* C-ENG-013: two engines in one process with different settings each honour their own; the
 * environment is read at creation from the array given, and the effective config reads back. */
static void test_config_and_environment(const tiny *t) {
  fer_engine_config c;
  CHECK_STATUS(fer_engine_config_init(&c), FER_STATUS_OK);
  CHECK(c.matmul == FER_MATMUL_I8 && c.kv_layout == FER_KV_LAYOUT_SEQ_MAJOR && c.plan == FER_PLAN_ADDRESS_STABLE &&
        c.environment == NULL && c.max_seqs == 16);
  const char *env_a[] = {"PATH=/usr/bin", "FERRITE_PLAN=off", "FERRITE_KV_LAYOUT=head-major", "FERRITE_KV_POLICY=bucketed",
                         "FERRITE_DATA_DIR=/elsewhere", "FERRITE_KV_BUDGET=64M", "FERRITE_THREADS=1",
                         "FERRITE_TP_WIRE=q8_0", NULL};
  c.environment = env_a;
  fer_engine *a = engine_on(t, &c);
  fer_engine_config b_cfg;
  fer_engine_config_init(&b_cfg);
  b_cfg.kv_layout = FER_KV_LAYOUT_TOKEN_MAJOR; /* no environment: the struct as given */
  fer_engine *b = engine_on(t, &b_cfg);
  if (!a || !b) return;
  fer_engine_config ra, rb;
  CHECK_STATUS(fer_engine_get_config(a, &ra), FER_STATUS_OK);
  CHECK_STATUS(fer_engine_get_config(b, &rb), FER_STATUS_OK);
  CHECK(ra.plan == FER_PLAN_OFF && ra.kv_layout == FER_KV_LAYOUT_HEAD_MAJOR && ra.kv_policy == FER_KV_POLICY_BUCKETED &&
        ra.kv_budget_bytes == 64ull << 20 && ra.n_threads == 1 && ra.environment == NULL &&
        ra.tensor_parallel_wire == FER_TP_WIRE_Q8_0);
  CHECK(rb.plan == FER_PLAN_ADDRESS_STABLE && rb.kv_layout == FER_KV_LAYOUT_TOKEN_MAJOR && rb.kv_budget_bytes == 1ull << 30);
  CHECK(ra.max_tokens == 2048 && rb.max_tokens == 2048); /* 0: the model's trained context */
  int32_t ta[8], tb[8];
  float la[512], lb[512];
  fer_engine_seq_stats sa, sb;
  greedy(a, 8, ta, la, &sa);
  greedy(b, 8, tb, lb, &sb);
  /* each honours its own plan setting; the layouts give the same bits */
  CHECK(sa.plan_captures == 0 && sa.plan_replays == 0);
  CHECK(sb.plan_captures == 1 && sb.plan_replays == 7);
  CHECK(sa.kv_growth_events > 0 && sb.kv_growth_events == 0); /* bucketed vs fixed */
  CHECK(memcmp(ta, tb, sizeof ta) == 0 && memcmp(la, lb, 261 * sizeof(float)) == 0);
  fer_engine_free(a);
  fer_engine_free(b);
  /* a recognised variable with a bad value is refused by name; nothing is created */
  const char *bad[] = {"FERRITE_KV_LAYOUT=diagonal", NULL};
  fer_engine_config_init(&c);
  c.environment = bad;
  c.model_image = t->img, c.model_image_bytes = t->bytes;
  fer_engine *e = (fer_engine *)1;
  CHECK_STATUS(fer_engine_create(&c, &e), FER_STATUS_INVALID_ARG);
  CHECK(e == NULL && last_error_has("FERRITE_KV_LAYOUT"));
  const char *bad_size[] = {"FERRITE_WEIGHT_BUDGET=12Q", NULL};
  c.environment = bad_size;
  CHECK_STATUS(fer_engine_create(&c, &e), FER_STATUS_INVALID_ARG);
  CHECK(last_error_has("FERRITE_WEIGHT_BUDGET"));
  const char *bad_wire[] = {"FERRITE_TP_WIRE=bf16", NULL};
  c.environment = bad_wire;
  CHECK_STATUS(fer_engine_create(&c, &e), FER_STATUS_INVALID_ARG);
  CHECK(e == NULL && last_error_has("FERRITE_TP_WIRE"));
  c.environment = NULL;
  c.tensor_parallel_wire = 7; /* not a fer_tp_wire_code */
  CHECK_STATUS(fer_engine_create(&c, &e), FER_STATUS_INVALID_ARG);
  CHECK(e == NULL && last_error_has("tensor_parallel_wire"));
  c.tensor_parallel_wire = FER_TP_WIRE_F32;
  /* a CUDA device: UNSUPPORTED with the reason, before the model is opened (C-CUDA-005); here no
   * GPU answers, and where one does the backend says it runs no forward pass yet */
  c.device = FER_DEVICE_CUDA;
  CHECK_STATUS(fer_engine_create(&c, &e), FER_STATUS_UNSUPPORTED);
  CHECK(e == NULL && last_error_has("cuda:0"));
  int32_t gpus = 0;
  const bool no_gpu = fer_cuda_device_count(&gpus) != FER_STATUS_OK || gpus == 0;
  c.device_index = 9;
  CHECK_STATUS(fer_engine_create(&c, &e), no_gpu ? FER_STATUS_UNSUPPORTED : FER_STATUS_INVALID_ARG);
  CHECK(e == NULL && last_error_has("cuda:9"));
  c.device = 5; /* not a fer_device_code */
  CHECK_STATUS(fer_engine_create(&c, &e), FER_STATUS_INVALID_ARG);
  CHECK(e == NULL && last_error_has("device 5"));
  c.device = FER_DEVICE_CPU, c.device_index = 0;
  const char *envs[][2] = {{"FERRITE_DEVICE=cuda:2", "cuda:2"}, {"FERRITE_DEVICE=cuda", "cuda:0"}};
  const int index[2] = {2, 0};
  for (int k = 0; k < 2; k++) {
    const char *env[] = {envs[k][0], NULL};
    c.environment = env;
    CHECK_STATUS(fer_engine_create(&c, &e), no_gpu || index[k] < gpus ? FER_STATUS_UNSUPPORTED : FER_STATUS_INVALID_ARG);
    CHECK(e == NULL && last_error_has(envs[k][1]));
  }
  const char *bad_device[] = {"FERRITE_DEVICE=gpu", NULL};
  c.environment = bad_device;
  CHECK_STATUS(fer_engine_create(&c, &e), FER_STATUS_INVALID_ARG);
  CHECK(e == NULL && last_error_has("FERRITE_DEVICE"));
  const char *cpu[] = {"FERRITE_DEVICE=cpu", NULL};
  c.environment = cpu;
  e = engine_on(t, &c); /* the CPU, named: as before */
  CHECK(e != NULL);
  fer_engine_free(e);
}

/* C-ENG-014: admission by projected KV commit; refusal names the numbers; charges come back. */
static void test_admission(const tiny *t) {
  fer_engine_config c;
  fer_engine_config_init(&c);
  c.kv_budget_bytes = 1 << 20; /* 1 MiB: 16 granules of 64 KiB */
  c.max_seqs = 3;
  c.kv_dtype = FER_DTYPE_F32; /* the byte arithmetic below */
  fer_engine *e = engine_on(t, &c);
  if (!e) return;
  fer_engine_seq *s1 = NULL, *s2 = NULL, *s3 = NULL, *s4 = NULL;
  /* tiny geometry: 2 layers x K,V x 2 heads x 8 dims x 4 bytes = 256 bytes a token in 4 bindings of 64 */
  CHECK_STATUS(fer_engine_seq_create(e, 2048, &s1), FER_STATUS_OK); /* 4 bindings x 2 granules = 512 KiB */
  fer_engine_stats st;
  fer_engine_get_stats(e, &st);
  CHECK(st.kv_charged_bytes == 512 * 1024 && st.live_seqs == 1);
  CHECK_STATUS(fer_engine_seq_create(e, 2048, &s2), FER_STATUS_OK);
  CHECK_STATUS(fer_engine_seq_create(e, 2048, &s3), FER_STATUS_BUDGET_EXCEEDED);
  CHECK(s3 == NULL && last_error_has("1048576"));
  fer_engine_get_stats(e, &st);
  CHECK(st.admission_refusals == 1 && st.live_seqs == 2 && st.kv_charged_bytes == 1024 * 1024);
  fer_engine_seq_free(s2);
  CHECK_STATUS(fer_engine_seq_create(e, 16, &s3), FER_STATUS_OK);
  CHECK_STATUS(fer_engine_seq_create(e, 16, &s4), FER_STATUS_OK);
  fer_engine_seq *s5 = NULL;
  CHECK_STATUS(fer_engine_seq_create(e, 16, &s5), FER_STATUS_BUSY); /* max_seqs 3 */
  CHECK_STATUS(fer_engine_seq_create(e, 4096, &s5), FER_STATUS_INVALID_ARG); /* above max_tokens */
  CHECK_STATUS(fer_engine_free(e), FER_STATUS_BUSY);
  fer_engine_seq_free(s1);
  fer_engine_seq_free(s3);
  fer_engine_seq_free(s4);
  fer_engine_get_stats(e, &st);
  CHECK(st.kv_charged_bytes == 0 && st.live_seqs == 0);
  CHECK_STATUS(fer_engine_free(e), FER_STATUS_OK);
}

/* C-ENG-015: a batched step's rows equal one-sequence steps bit for bit; all or nothing. */
static void test_batched_decode(const tiny *t) {
  fer_engine *e = engine_on(t, NULL);
  if (!e) return;
  enum { N = 3, V = 261 };
  fer_engine_seq *batch[N], *alone[N];
  float lg[N * V], one[V];
  const size_t lens[N] = {12, 5, 9};
  for (int i = 0; i < N; i++) {
    CHECK_STATUS(fer_engine_seq_create(e, 16, &batch[i]), FER_STATUS_OK);
    CHECK_STATUS(fer_engine_seq_create(e, 16, &alone[i]), FER_STATUS_OK);
    CHECK_STATUS(fer_engine_prefill(batch[i], PROMPT + i, lens[i], NULL, 0), FER_STATUS_OK);
    CHECK_STATUS(fer_engine_prefill(alone[i], PROMPT + i, lens[i], NULL, 0), FER_STATUS_OK);
  }
  int32_t ids[N] = {101, 257, 32};
  for (int step = 0; step < 3; step++) {
    CHECK_STATUS(fer_engine_decode(e, batch, ids, N, lg, N * V), FER_STATUS_OK);
    for (int i = 0; i < N; i++) {
      CHECK_STATUS(fer_engine_decode(e, &alone[i], &ids[i], 1, one, V), FER_STATUS_OK);
      CHECK(memcmp(one, lg + i * V, sizeof one) == 0);
      ids[i] = (ids[i] * 7 + step) % V;
    }
  }
  /* a full sequence refuses the whole step: nobody advances */
  fer_engine_seq *full = NULL;
  CHECK_STATUS(fer_engine_seq_create(e, 2, &full), FER_STATUS_OK);
  CHECK_STATUS(fer_engine_prefill(full, PROMPT, 2, NULL, 0), FER_STATUS_OK);
  fer_engine_seq *mixed[2] = {batch[0], full};
  fer_engine_seq_stats before, after;
  fer_engine_seq_get_stats(batch[0], &before);
  CHECK_STATUS(fer_engine_decode(e, mixed, ids, 2, lg, 2 * V), FER_STATUS_BUFFER_TOO_SMALL);
  fer_engine_seq_get_stats(batch[0], &after);
  CHECK(after.n_tokens == before.n_tokens);
  fer_engine_seq *twice[2] = {batch[0], batch[0]};
  CHECK_STATUS(fer_engine_decode(e, twice, ids, 2, lg, 2 * V), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(fer_engine_decode(e, batch, ids, N, lg, N * V - 1), FER_STATUS_BUFFER_TOO_SMALL);
  int32_t bad_ids[N] = {0, 261, 0};
  CHECK_STATUS(fer_engine_decode(e, batch, bad_ids, N, lg, N * V), FER_STATUS_INVALID_ARG);
  fer_engine_seq_free(full);
  for (int i = 0; i < N; i++) fer_engine_seq_free(batch[i]), fer_engine_seq_free(alone[i]);
  fer_engine_free(e);
}

/* C-ENG-016: rewind equals recomputation; cancel leaves the sequence as it was. */
static void test_rewind_and_cancel(const tiny *t) {
  fer_engine *e = engine_on(t, NULL);
  if (!e) return;
  enum { V = 261 };
  float a[V], b[V];
  fer_engine_seq *s = NULL, *fresh = NULL;
  CHECK_STATUS(fer_engine_seq_create(e, 32, &s), FER_STATUS_OK);
  CHECK_STATUS(fer_engine_seq_create(e, 32, &fresh), FER_STATUS_OK);
  const int32_t other[4] = {200, 201, 202, 203};
  CHECK_STATUS(fer_engine_prefill(s, PROMPT, 12, NULL, 0), FER_STATUS_OK);
  CHECK_STATUS(fer_engine_decode(e, &s, &other[0], 1, a, V), FER_STATUS_OK);
  CHECK_STATUS(fer_engine_seq_rewind(s, 6), FER_STATUS_OK);
  CHECK_STATUS(fer_engine_prefill(s, other, 4, a, V), FER_STATUS_OK);
  CHECK_STATUS(fer_engine_prefill(fresh, PROMPT, 6, NULL, 0), FER_STATUS_OK);
  CHECK_STATUS(fer_engine_prefill(fresh, other, 4, b, V), FER_STATUS_OK);
  CHECK(memcmp(a, b, sizeof a) == 0);
  CHECK_STATUS(fer_engine_seq_rewind(s, 11), FER_STATUS_INVALID_ARG); /* beyond its 10 */
  CHECK_STATUS(fer_engine_seq_rewind(s, 0), FER_STATUS_OK);
  CHECK_STATUS(fer_engine_prefill(s, PROMPT, 6, NULL, 0), FER_STATUS_OK);
  CHECK_STATUS(fer_engine_prefill(s, other, 4, a, V), FER_STATUS_OK);
  CHECK(memcmp(a, b, sizeof a) == 0);
  /* cancel: the next call returns CANCELLED and changes nothing; the one after runs */
  fer_engine_seq_stats st;
  CHECK_STATUS(fer_engine_seq_cancel(s), FER_STATUS_OK);
  CHECK_STATUS(fer_engine_prefill(s, PROMPT, 3, NULL, 0), FER_STATUS_CANCELLED);
  fer_engine_seq_get_stats(s, &st);
  CHECK(st.n_tokens == 10);
  CHECK_STATUS(fer_engine_seq_cancel(s), FER_STATUS_OK);
  fer_engine_seq *pair[2] = {fresh, s};
  const int32_t two[2] = {5, 6};
  float lg[2 * V];
  CHECK_STATUS(fer_engine_decode(e, pair, two, 2, lg, 2 * V), FER_STATUS_CANCELLED);
  fer_engine_seq_get_stats(s, &st);
  CHECK(st.n_tokens == 10);
  CHECK_STATUS(fer_engine_decode(e, pair, two, 2, lg, 2 * V), FER_STATUS_OK);
  fer_engine_seq_free(s);
  fer_engine_seq_free(fresh);
  fer_engine_free(e);
}

/* C-ENG-017: bad input gets a status, never a crash, and changes nothing. */
static void test_bad_input(const tiny *t) {
  fer_engine_config c;
  fer_engine_config_init(&c);
  fer_engine *e = NULL;
  CHECK_STATUS(fer_engine_create(NULL, &e), FER_STATUS_NULL_ARG);
  CHECK_STATUS(fer_engine_create(&c, NULL), FER_STATUS_NULL_ARG);
  CHECK_STATUS(fer_engine_create(&c, &e), FER_STATUS_INVALID_ARG); /* no model */
  c.model_path = "/nonexistent/model.gguf";
  CHECK(fer_engine_create(&c, &e) != FER_STATUS_OK && e == NULL);
  fer_engine_config small = c;
  small.struct_size = 8;
  CHECK_STATUS(fer_engine_create(&small, &e), FER_STATUS_INVALID_ARG);
  c.model_path = NULL;
  c.model_image = t->img, c.model_image_bytes = t->bytes;
  c.kv_layout = 9;
  CHECK_STATUS(fer_engine_create(&c, &e), FER_STATUS_INVALID_ARG);
  c.kv_layout = FER_KV_LAYOUT_SEQ_MAJOR;
  c.weight_budget_bytes = 1 << 20; /* a store needs a file */
  CHECK_STATUS(fer_engine_create(&c, &e), FER_STATUS_INVALID_ARG);
  c.weight_budget_bytes = 0;
  c.tensor_parallel = 2; /* every rank opens a file: an image is refused before MPI is touched */
  CHECK_STATUS(fer_engine_create(&c, &e), FER_STATUS_INVALID_ARG);
  c.pipeline_parallel = 2; /* both at once (stages of tensor-parallel ranks): a file too */
  CHECK_STATUS(fer_engine_create(&c, &e), FER_STATUS_INVALID_ARG);
  c.tensor_parallel = 5000; /* each at most 4096 */
  CHECK_STATUS(fer_engine_create(&c, &e), FER_STATUS_INVALID_ARG);
  c.tensor_parallel = 0;
  CHECK_STATUS(fer_engine_create(&c, &e), FER_STATUS_INVALID_ARG); /* stages need a file too */
  c.pipeline_parallel = 0;
  c.model_image_bytes = t->bytes / 2; /* truncated image */
  CHECK_STATUS(fer_engine_create(&c, &e), FER_STATUS_CORRUPT);
  e = engine_on(t, NULL);
  if (!e) return;
  fer_engine_seq *s = NULL;
  float lg[261];
  CHECK_STATUS(fer_engine_seq_create(e, 0, &s), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(fer_engine_seq_create(e, 8, &s), FER_STATUS_OK);
  CHECK_STATUS(fer_engine_prefill(NULL, PROMPT, 3, lg, 261), FER_STATUS_NULL_ARG);
  CHECK_STATUS(fer_engine_prefill(s, NULL, 3, lg, 261), FER_STATUS_NULL_ARG);
  CHECK_STATUS(fer_engine_prefill(s, PROMPT, 0, lg, 261), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(fer_engine_prefill(s, PROMPT, 3, lg, 260), FER_STATUS_BUFFER_TOO_SMALL);
  CHECK_STATUS(fer_engine_prefill(s, PROMPT, 9, lg, 261), FER_STATUS_BUFFER_TOO_SMALL); /* past max_tokens */
  const int32_t bad[2] = {5, -1};
  CHECK_STATUS(fer_engine_prefill(s, bad, 2, lg, 261), FER_STATUS_INVALID_ARG);
  fer_engine_seq_stats st;
  fer_engine_seq_get_stats(s, &st);
  CHECK(st.n_tokens == 0);
  CHECK_STATUS(fer_engine_decode(e, NULL, bad, 1, lg, 261), FER_STATUS_NULL_ARG);
  CHECK_STATUS(fer_engine_decode(e, &s, bad, 0, lg, 261), FER_STATUS_INVALID_ARG);
  fer_engine *other = engine_on(t, NULL);
  if (other) CHECK_STATUS(fer_engine_decode(other, &s, PROMPT, 1, lg, 261), FER_STATUS_INVALID_ARG);
  fer_engine_free(other);
  size_t len = 0;
  char text[64];
  fer_chat_message m = {"user", "hi"};
  CHECK_STATUS(fer_engine_chat_render(e, &m, 1, FER_CHAT_ADD_GENERATION_PROMPT, text, sizeof text, &len),
               FER_STATUS_UNSUPPORTED); /* the tiny model has no chat template */
  uint32_t rank = 7, size = 7; /* one process: rank 0 of 1, with no rank's calls to run */
  CHECK_STATUS(fer_engine_parallel_info(e, &rank, &size), FER_STATUS_OK);
  CHECK(rank == 0 && size == 1);
  CHECK_STATUS(fer_engine_run_rank(e), FER_STATUS_MISUSE);
  CHECK_STATUS(fer_engine_parallel_info(e, NULL, &size), FER_STATUS_NULL_ARG);
  CHECK(size == 0);
  fer_model_info info;
  CHECK_STATUS(fer_engine_model_info(e, &info), FER_STATUS_OK);
  CHECK(strcmp(info.architecture, "llama") == 0 && info.n_vocab == 261 && info.eos_id == 260 && info.eot_id == -1);
  void *img = NULL;
  size_t n = 0;
  CHECK_STATUS(fer_tiny_model_image("mamba", 1, &img, &n), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(fer_tiny_model_image(NULL, 1, &img, &n), FER_STATUS_NULL_ARG);
  fer_engine_seq_free(s);
  fer_engine_free(e);
}

/* C-ENG-021: the file's pooling type (<arch>.pooling_type) is read into fer_model_info.pooling
 * (NONE when absent) and values past LAST are refused naming the key; FER_EMBED_POOL_FIRST is the
 * first token's state, which (attention being causal) is the embedding of that token alone, bit
 * for bit; POOL_FIRST with POOL_LAST is refused. */
static void test_pooling(void) {
  for (uint32_t pooling = 0; pooling <= 4; pooling++) {
    tiny t = {NULL, 0};
    CHECK_STATUS(feri_tiny_embedding_image(1, pooling, &t.img, &t.bytes), FER_STATUS_OK);
    fer_engine_config c;
    fer_engine_config_init(&c);
    c.model_image = t.img, c.model_image_bytes = t.bytes, c.n_threads = 2;
    fer_engine *e = NULL;
    const fer_status st = fer_engine_create(&c, &e);
    if (pooling == 4) { /* RANK: not an embedding ferrite makes */
      CHECK(st == FER_STATUS_UNSUPPORTED && e == NULL && last_error_has("llama.pooling_type = 4"));
      fer_buffer_free(t.img);
      continue;
    }
    CHECK_STATUS(st, FER_STATUS_OK);
    fer_model_info info;
    CHECK_STATUS(fer_engine_model_info(e, &info), FER_STATUS_OK);
    CHECK(info.pooling == pooling);
    if (pooling == FER_POOLING_CLS) {
      float first[64], alone[64];
      size_t n1 = 0, n2 = 0;
      CHECK_STATUS(fer_engine_embed(e, PROMPT, 12, FER_EMBED_POOL_FIRST, first, 64, &n1), FER_STATUS_OK);
      CHECK_STATUS(fer_engine_embed(e, PROMPT, 1, FER_EMBED_POOL_LAST, alone, 64, &n2), FER_STATUS_OK);
      CHECK(n1 == info.n_embd && n2 == n1 && memcmp(first, alone, n1 * sizeof(float)) == 0);
      CHECK_STATUS(fer_engine_embed(e, PROMPT, 12, FER_EMBED_POOL_FIRST | FER_EMBED_POOL_LAST, first, 64, &n1),
                   FER_STATUS_INVALID_ARG);
      CHECK(n1 == 0 && last_error_has("exclude each other"));
    }
    fer_engine_free(e);
    fer_buffer_free(t.img);
  }
}

int main(void) {
  test_pooling();
  tiny t = make_tiny("llama");
  if (t.img) {
    test_config_and_environment(&t);
    test_admission(&t);
    test_batched_decode(&t);
    test_rewind_and_cancel(&t);
    test_bad_input(&t);
  }
  fer_buffer_free(t.img);
  /* the other architectures run through the engine too: batched equals alone */
  const char *archs[2] = {"qwen2", "qwen3"};
  for (int i = 0; i < 2; i++) {
    tiny q = make_tiny(archs[i]);
    if (q.img) test_batched_decode(&q);
    fer_buffer_free(q.img);
  }
  return feri_test_finish("engine_test");
}
