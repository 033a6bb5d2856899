/* scheduler_test.c: the scheduler on the seeded tiny models (no downloads). Every request's tokens
 * equal what the same request gives alone through fer_engine_seq (prefill, then one-token steps,
 * the same sampler), whatever the step budget, the mix of prompts and decodes, and prefix-cache
 * hits; admission waits in arrival order and never loses a request; cancel from another thread;
 * stops; grammars; logprobs; the cache's memory returns; bad input; 8-bit (Q8_0) KV through
 * batching, forks and the prefix cache.
 * EVIDENCE: C-KV-202 C-SCHED-001 C-SCHED-002 C-SCHED-003 C-SCHED-004 C-SCHED-005 C-SCHED-006 C-SCHED-007 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferrite.h"
#include "model/tiny.h"
#include "testing/check.h"

enum { MAX_REQ = 64, MAX_GEN = 64 };

typedef struct tiny {
  void *img;
  size_t bytes;
} tiny;

static fer_engine *engine_on(const tiny *t, uint64_t kv_budget, uint32_t max_seqs) {
  fer_engine_config c;
  fer_engine_config_init(&c);
  c.model_image = t->img;
  c.model_image_bytes = t->bytes;
  c.n_threads = 2;
  c.max_tokens = 512;
  c.max_seqs = max_seqs;
  if (kv_budget) c.kv_budget_bytes = kv_budget;
  fer_engine *e = NULL;
  CHECK_STATUS(fer_engine_create(&c, &e), FER_STATUS_OK);
  return e;
}

static int last_error_has(const char *needle) {
  char msg[512];
  size_t len;
  fer_last_error_message(msg, sizeof msg, &len);
  if (!strstr(msg, needle)) fprintf(stderr, "  message '%s' lacks '%s'\n", msg, needle);
  return strstr(msg, needle) != NULL;
}

/* One request of a test: its settings, and what it produced. */
typedef struct job {
  int32_t prompt[400];
  uint32_t n_prompt, max_new;
  float temperature;
  uint64_t seed;
  int32_t stop_id; /* -1: none */
  uint64_t id;
  int32_t got[MAX_GEN];
  uint32_t n_got, n_finished;
  fer_scheduler_event fin;
  float logprob[MAX_GEN];
} job;

/* A deterministic prompt: `shared` tokens common to every job of a group, then its own. */
static void make_prompt(job *j, uint32_t n, uint32_t shared, uint32_t group, uint32_t k) {
  j->n_prompt = n;
  for (uint32_t i = 0; i < n; i++)
    j->prompt[i] = (int32_t)(i < shared ? (group * 37 + i * 11) % 255 : (k * 53 + i * 7 + group) % 255);
}

static void params_of(const job *j, fer_request_params *p) {
  fer_request_params_init(p);
  p->prompt = j->prompt, p->n_prompt = j->n_prompt, p->max_new_tokens = j->max_new;
  p->sampling.temperature = j->temperature, p->sampling.seed = j->seed;
  if (j->temperature != 0.0f) p->sampling.top_k = 40;
  p->stop_ids = j->stop_id >= 0 ? &j->stop_id : NULL, p->n_stop_ids = j->stop_id >= 0 ? 1 : 0;
  p->user_data = (uint64_t)(uintptr_t)j;
}

/* What the job gives alone: fer_engine_seq prefill and one-token steps, the same sampler and stop
 * rules (the model's end tokens, the job's stop id, max_new). */
static void reference(fer_engine *e, const job *j, int32_t *out, uint32_t *n_out, int32_t *reason) {
  fer_model_info info;
  fer_engine_model_info(e, &info);
  float *lg = malloc(info.n_vocab * sizeof(float));
  fer_request_params p;
  params_of(j, &p);
  fer_sampler *smp = NULL;
  CHECK_STATUS(fer_sampler_create(&p.sampling, &smp), FER_STATUS_OK);
  fer_engine_seq *s = NULL;
  CHECK_STATUS(fer_engine_seq_create(e, j->n_prompt + j->max_new, &s), FER_STATUS_OK);
  CHECK_STATUS(fer_engine_prefill(s, j->prompt, j->n_prompt, lg, info.n_vocab), FER_STATUS_OK);
  *n_out = 0;
  *reason = FER_FINISH_LENGTH;
  for (;;) {
    fer_sampling_context ctx = {j->prompt, j->n_prompt, out, *n_out};
    int32_t t = -1;
    CHECK_STATUS(fer_sampler_sample(smp, lg, info.n_vocab, &ctx, &t, NULL), FER_STATUS_OK);
    if (t == info.eos_id || t == info.eot_id || t == j->stop_id) {
      *reason = FER_FINISH_STOP;
      break;
    }
    out[(*n_out)++] = t;
    if (*n_out == j->max_new) break;
    CHECK_STATUS(fer_engine_decode(e, &s, &t, 1, lg, info.n_vocab), FER_STATUS_OK);
  }
  fer_engine_seq_free(s);
  fer_sampler_free(smp);
  free(lg);
}

/* Steps until every job finished, recording events (each TOKEN before the one FINISHED). Returns
 * the steps taken; info_out (may be NULL) gets every step's info. */
static uint32_t drive(fer_scheduler *s, uint32_t n, fer_scheduler_step_info *info_out, uint32_t info_cap) {
  uint32_t steps = 0, done = 0;
  fer_scheduler_event ev[16];
  while (done < n && steps < 100000) {
    fer_scheduler_step_info info;
    CHECK_STATUS(fer_scheduler_step(s, &info), FER_STATUS_OK);
    if (info_out && steps < info_cap) info_out[steps] = info;
    steps++;
    size_t got;
    do {
      CHECK_STATUS(fer_scheduler_poll_events(s, ev, 16, &got), FER_STATUS_OK);
      for (size_t i = 0; i < got; i++) {
        job *j = (job *)(uintptr_t)ev[i].user_data;
        CHECK(j->id == ev[i].request_id);
        CHECK(j->n_finished == 0); /* nothing after FINISHED */
        if (ev[i].kind == FER_EVENT_TOKEN && j->n_got < MAX_GEN) {
          j->logprob[j->n_got] = ev[i].logprob;
          j->got[j->n_got++] = ev[i].token;
        } else if (ev[i].kind == FER_EVENT_FINISHED) {
          j->fin = ev[i], j->n_finished++, done++;
        }
      }
    } while (got == 16);
  }
  CHECK(done == n);
  return steps;
}

static void submit_all(fer_scheduler *s, job *jobs, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    fer_request_params p;
    params_of(&jobs[i], &p);
    CHECK_STATUS(fer_scheduler_submit(s, &p, &jobs[i].id), FER_STATUS_OK);
    jobs[i].n_got = jobs[i].n_finished = 0;
  }
}

/* Every job's tokens and finish reason equal its reference. */
static void check_against_reference(fer_engine *e, job *jobs, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    int32_t want[MAX_GEN];
    uint32_t n_want;
    int32_t reason;
    reference(e, &jobs[i], want, &n_want, &reason);
    CHECK(jobs[i].n_got == n_want && memcmp(jobs[i].got, want, n_want * sizeof(int32_t)) == 0);
    CHECK(jobs[i].fin.finish_reason == reason && jobs[i].fin.n_generated == n_want);
    CHECK(jobs[i].fin.n_prompt_tokens == jobs[i].n_prompt);
    if (jobs[i].n_got != n_want || memcmp(jobs[i].got, want, n_want * sizeof(int32_t)) != 0)
      fprintf(stderr, "  job %u: %u tokens, reference %u (reason %d vs %d)\n", i, jobs[i].n_got, n_want,
              jobs[i].fin.finish_reason, reason);
  }
}

static fer_scheduler *scheduler_on(fer_engine *e, uint32_t max_running, uint32_t step_tokens, uint32_t block) {
  fer_scheduler_options o;
  fer_scheduler_options_init(&o);
  o.max_running = max_running, o.step_tokens = step_tokens, o.prefix_block_tokens = block;
  fer_scheduler *s = NULL;
  CHECK_STATUS(fer_scheduler_create(e, &o, &s), FER_STATUS_OK);
  return s;
}

/* C-SCHED-001: continuous batching with chunked prefill gives every request exactly the tokens it
 * gets alone (greedy and seeded sampling, prompts longer than a step's budget, more requests than
 * run at once), and a long prompt never stalls the decoding requests: every step that has a
 * decoding request runs its row. */
static void test_equivalence(const char *arch) {
  tiny t;
  CHECK_STATUS(fer_tiny_model_image(arch, 3, &t.img, &t.bytes), FER_STATUS_OK);
  fer_engine *e = engine_on(&t, 0, 8);
  static job jobs[12];
  memset(jobs, 0, sizeof jobs);
  for (uint32_t i = 0; i < 12; i++) {
    make_prompt(&jobs[i], 5 + (i * 41) % 150, 0, 0, i);
    jobs[i].max_new = 4 + (i * 7) % 20;
    jobs[i].temperature = i % 3 == 0 ? 0.0f : 0.9f;
    jobs[i].seed = 100 + i;
    jobs[i].stop_id = i % 4 == 1 ? 101 : -1;
  }
  fer_scheduler *s = scheduler_on(e, 4, 24, 0);
  submit_all(s, jobs, 12);
  static fer_scheduler_step_info info[4096];
  const uint32_t steps = drive(s, 12, info, 4096);
  uint32_t mixed = 0;
  for (uint32_t k = 0; k < steps && k < 4096; k++) {
    CHECK(info[k].decode_tokens + info[k].prefill_tokens <= 24);
    if (info[k].decode_tokens > 0 && info[k].prefill_tokens > 0) mixed++;
  }
  CHECK(mixed > 0); /* prompts were chunked beside decodes */
  fer_scheduler_stats st;
  CHECK_STATUS(fer_scheduler_get_stats(s, &st), FER_STATUS_OK);
  CHECK(st.submitted == 12 && st.running == 0 && st.queued == 0 && st.kv_live_bytes == 0);
  CHECK(st.finished[FER_FINISH_STOP] + st.finished[FER_FINISH_LENGTH] == 12);
  check_against_reference(e, jobs, 12);
  CHECK_STATUS(fer_engine_free(e), FER_STATUS_BUSY); /* the scheduler lives */
  CHECK_STATUS(fer_scheduler_free(s), FER_STATUS_OK);
  CHECK_STATUS(fer_engine_free(e), FER_STATUS_OK);
  fer_buffer_free(t.img);
}

/* A step with a decoding request next to a prompt longer than the budget: the decode row is in
 * every step until it finishes (the prompt is chunked around it). */
static void test_no_stall(void) {
  tiny t;
  CHECK_STATUS(fer_tiny_model_image("llama", 4, &t.img, &t.bytes), FER_STATUS_OK);
  fer_engine *e = engine_on(&t, 0, 4);
  fer_scheduler *s = scheduler_on(e, 4, 16, 0);
  static job jobs[2];
  memset(jobs, 0, sizeof jobs);
  make_prompt(&jobs[0], 4, 0, 0, 0);
  jobs[0].max_new = 30, jobs[0].stop_id = -1;
  make_prompt(&jobs[1], 300, 0, 0, 1);
  jobs[1].max_new = 2, jobs[1].stop_id = -1;
  fer_request_params p;
  params_of(&jobs[0], &p);
  p.flags = FER_REQUEST_IGNORE_EOS;
  CHECK_STATUS(fer_scheduler_submit(s, &p, &jobs[0].id), FER_STATUS_OK);
  fer_scheduler_step_info i0;
  CHECK_STATUS(fer_scheduler_step(s, &i0), FER_STATUS_OK); /* job 0's prompt */
  CHECK(i0.prefill_tokens == 4 && i0.decode_tokens == 0);
  params_of(&jobs[1], &p);
  CHECK_STATUS(fer_scheduler_submit(s, &p, &jobs[1].id), FER_STATUS_OK);
  uint32_t with_both = 0;
  for (int k = 0; k < 19; k++) {
    fer_scheduler_step_info info;
    CHECK_STATUS(fer_scheduler_step(s, &info), FER_STATUS_OK);
    CHECK(info.decode_tokens == 1 && info.prefill_tokens == 15);
    with_both += info.decode_tokens == 1 && info.prefill_tokens == 15;
  }
  CHECK(with_both == 19);
  CHECK_STATUS(fer_scheduler_free(s), FER_STATUS_OK); /* two requests unfinished: dropped */
  fer_engine_stats es;
  CHECK_STATUS(fer_engine_get_stats(e, &es), FER_STATUS_OK);
  CHECK(es.kv_charged_bytes == 0);
  CHECK_STATUS(fer_engine_free(e), FER_STATUS_OK);
  fer_buffer_free(t.img);
}

/* C-SCHED-002: prefix caching. Groups of requests share a long prefix; a second round hits the
 * cache (hit tokens a multiple of the block, reported per request) and every token equals the
 * reference; the cache's KV is the pool's only residue after the requests end, and clearing it
 * returns the pool to zero. */
static void test_prefix_cache(void) {
  tiny t;
  CHECK_STATUS(fer_tiny_model_image("qwen2", 5, &t.img, &t.bytes), FER_STATUS_OK);
  fer_engine *e = engine_on(&t, 0, 8);
  fer_scheduler *s = scheduler_on(e, 4, 64, 16);
  static job jobs[8];
  memset(jobs, 0, sizeof jobs);
  for (uint32_t i = 0; i < 8; i++) {
    make_prompt(&jobs[i], 150 + i * 3, 130, i % 2, i);
    jobs[i].max_new = 6 + i, jobs[i].temperature = i % 2 ? 0.8f : 0.0f, jobs[i].seed = 7 + i, jobs[i].stop_id = -1;
  }
  submit_all(s, jobs, 8);
  drive(s, 8, NULL, 0);
  check_against_reference(e, jobs, 8);
  fer_scheduler_stats a;
  CHECK_STATUS(fer_scheduler_get_stats(s, &a), FER_STATUS_OK);
  CHECK(a.cache_entries > 0 && a.cache_bytes > 0 && a.kv_live_bytes == 0);
  CHECK(a.kv_physical_bytes > 0 && a.kv_physical_bytes <= a.cache_bytes);
  submit_all(s, jobs, 8); /* the same requests again: each starts from its cached prompt */
  drive(s, 8, NULL, 0);
  check_against_reference(e, jobs, 8);
  fer_scheduler_stats b;
  CHECK_STATUS(fer_scheduler_get_stats(s, &b), FER_STATUS_OK);
  CHECK(b.cache_hits - a.cache_hits == 8);
  uint64_t hit_tokens = 0;
  for (uint32_t i = 0; i < 8; i++) {
    CHECK(jobs[i].fin.n_cached_tokens % 16 == 0 && jobs[i].fin.n_cached_tokens >= 128 &&
          jobs[i].fin.n_cached_tokens < jobs[i].n_prompt);
    hit_tokens += jobs[i].fin.n_cached_tokens;
  }
  CHECK(b.cache_hit_tokens - a.cache_hit_tokens == hit_tokens);
  CHECK(b.prefill_tokens - a.prefill_tokens < a.prefill_tokens / 4); /* most of the prompts came from the cache */
  CHECK_STATUS(fer_scheduler_clear_cache(s), FER_STATUS_OK);
  fer_scheduler_stats c;
  CHECK_STATUS(fer_scheduler_get_stats(s, &c), FER_STATUS_OK);
  CHECK(c.cache_entries == 0 && c.cache_bytes == 0 && c.kv_physical_bytes == 0);
  fer_engine_stats es;
  CHECK_STATUS(fer_engine_get_stats(e, &es), FER_STATUS_OK);
  CHECK(es.kv_charged_bytes == 0);
  CHECK_STATUS(fer_scheduler_free(s), FER_STATUS_OK);
  CHECK_STATUS(fer_engine_free(e), FER_STATUS_OK);
  fer_buffer_free(t.img);
}

/* C-SCHED-002, continued: a prompt's blocks are cached as soon as it has run. A request sharing
 * the prefix of one still generating maps its blocks; two submitted together compute the shared
 * blocks once (the second waits for the first's prompt); all give the reference tokens. */
static void test_prefix_of_a_running_request(void) {
  tiny t;
  CHECK_STATUS(fer_tiny_model_image("llama", 12, &t.img, &t.bytes), FER_STATUS_OK);
  fer_engine *e = engine_on(&t, 0, 4);
  fer_scheduler *s = scheduler_on(e, 4, 64, 16);
  static job jobs[2];
  memset(jobs, 0, sizeof jobs);
  make_prompt(&jobs[0], 100, 90, 0, 0);
  make_prompt(&jobs[1], 97, 90, 0, 1);
  jobs[0].max_new = 40, jobs[1].max_new = 5, jobs[0].stop_id = jobs[1].stop_id = -1;
  fer_request_params p;
  params_of(&jobs[0], &p);
  p.flags = FER_REQUEST_IGNORE_EOS;
  CHECK_STATUS(fer_scheduler_submit(s, &p, &jobs[0].id), FER_STATUS_OK);
  for (int k = 0; k < 3; k++) CHECK_STATUS(fer_scheduler_step(s, NULL), FER_STATUS_OK); /* 64 + 36 prompt, 1 decode */
  fer_scheduler_stats st;
  CHECK_STATUS(fer_scheduler_get_stats(s, &st), FER_STATUS_OK);
  CHECK(st.running == 1 && st.cache_entries == 1 && st.cache_blocks == 6);
  params_of(&jobs[1], &p);
  p.flags = FER_REQUEST_IGNORE_EOS;
  CHECK_STATUS(fer_scheduler_submit(s, &p, &jobs[1].id), FER_STATUS_OK);
  drive(s, 2, NULL, 0);
  CHECK(jobs[1].fin.n_cached_tokens == 80); /* the 5 whole blocks of the 90 shared tokens */
  CHECK(jobs[0].n_got == 40 && jobs[1].n_got == 5);
  /* both at once, on an empty cache: the second waits for the first's prompt instead of computing
   * the shared blocks again, then maps them */
  CHECK_STATUS(fer_scheduler_clear_cache(s), FER_STATUS_OK);
  static job again[2];
  memcpy(again, jobs, sizeof again);
  fer_scheduler_stats before;
  CHECK_STATUS(fer_scheduler_get_stats(s, &before), FER_STATUS_OK);
  for (uint32_t i = 0; i < 2; i++) {
    params_of(&again[i], &p);
    p.flags = FER_REQUEST_IGNORE_EOS;
    CHECK_STATUS(fer_scheduler_submit(s, &p, &again[i].id), FER_STATUS_OK);
    again[i].n_got = again[i].n_finished = 0;
  }
  drive(s, 2, NULL, 0);
  fer_scheduler_stats after;
  CHECK_STATUS(fer_scheduler_get_stats(s, &after), FER_STATUS_OK);
  CHECK(again[1].fin.n_cached_tokens == 80 && again[0].fin.n_cached_tokens == 0);
  CHECK(after.prefill_tokens - before.prefill_tokens == 100 + 17); /* the shared blocks ran once */
  for (uint32_t i = 0; i < 2; i++)
    CHECK(again[i].n_got == jobs[i].n_got && memcmp(again[i].got, jobs[i].got, jobs[i].n_got * sizeof(int32_t)) == 0);
  CHECK_STATUS(fer_scheduler_free(s), FER_STATUS_OK);
  /* the references, with the end tokens ignored as the requests did */
  for (uint32_t i = 0; i < 2; i++) {
    fer_model_info info;
    fer_engine_model_info(e, &info);
    float *lg = malloc(info.n_vocab * sizeof(float));
    fer_engine_seq *q = NULL;
    CHECK_STATUS(fer_engine_seq_create(e, jobs[i].n_prompt + jobs[i].max_new, &q), FER_STATUS_OK);
    CHECK_STATUS(fer_engine_prefill(q, jobs[i].prompt, jobs[i].n_prompt, lg, info.n_vocab), FER_STATUS_OK);
    for (uint32_t k = 0; k < jobs[i].n_got; k++) {
      const int32_t tk = feri_test_argmax(lg, info.n_vocab);
      CHECK(tk == jobs[i].got[k]);
      if (k + 1 < jobs[i].n_got) CHECK_STATUS(fer_engine_decode(e, &q, &tk, 1, lg, info.n_vocab), FER_STATUS_OK);
    }
    fer_engine_seq_free(q);
    free(lg);
  }
  CHECK_STATUS(fer_engine_free(e), FER_STATUS_OK);
  fer_buffer_free(t.img);
}

/* C-SCHED-003: admission by the governor. With room for about two requests, 10 requests all
 * finish with their reference tokens, never more than fit run at once, they start in arrival
 * order, and cached prefixes are evicted to make room. A full queue is refused at submit (and a
 * request above the whole budget: test_bad_input), naming the numbers. */
static void test_admission(void) {
  tiny t;
  CHECK_STATUS(fer_tiny_model_image("llama", 6, &t.img, &t.bytes), FER_STATUS_OK);
  /* tiny: 2 layers x K,V x 64 KiB granules; a request of <= 120 tokens projects 4 x 64 KiB */
  fer_engine *e = engine_on(&t, 10 * 64 * 1024, 8);
  fer_scheduler_options o;
  fer_scheduler_options_init(&o);
  o.max_running = 8, o.step_tokens = 64, o.max_queued = 10, o.prefix_block_tokens = 16;
  fer_scheduler *s = NULL;
  CHECK_STATUS(fer_scheduler_create(e, &o, &s), FER_STATUS_OK);
  static job jobs[11];
  memset(jobs, 0, sizeof jobs);
  for (uint32_t i = 0; i < 11; i++) {
    make_prompt(&jobs[i], 40 + i, 0, 0, i);
    jobs[i].max_new = 12, jobs[i].stop_id = -1;
  }
  submit_all(s, jobs, 10);
  fer_request_params p;
  params_of(&jobs[10], &p);
  uint64_t id = 99;
  CHECK_STATUS(fer_scheduler_submit(s, &p, &id), FER_STATUS_BUSY);
  CHECK(id == 0 && last_error_has("10 requests are queued"));
  uint32_t steps = 0, done = 0, max_running = 0;
  uint64_t first_token_order[10], n_order = 0;
  fer_scheduler_event ev[32];
  while (done < 10 && steps++ < 10000) {
    fer_scheduler_step_info info;
    CHECK_STATUS(fer_scheduler_step(s, &info), FER_STATUS_OK);
    max_running = info.running > max_running ? info.running : max_running;
    size_t got;
    CHECK_STATUS(fer_scheduler_poll_events(s, ev, 32, &got), FER_STATUS_OK);
    for (size_t i = 0; i < got; i++) {
      job *j = (job *)(uintptr_t)ev[i].user_data;
      if (ev[i].kind == FER_EVENT_TOKEN) {
        if (j->n_got == 0 && n_order < 10) first_token_order[n_order++] = ev[i].request_id;
        j->got[j->n_got++] = ev[i].token;
      } else {
        j->fin = ev[i], j->n_finished++, done++;
      }
    }
  }
  CHECK(done == 10 && max_running <= 2 && max_running >= 1);
  for (uint64_t k = 1; k < n_order; k++) CHECK(first_token_order[k] > first_token_order[k - 1]);
  check_against_reference(e, jobs, 10);
  fer_scheduler_stats st;
  CHECK_STATUS(fer_scheduler_get_stats(s, &st), FER_STATUS_OK);
  CHECK(st.cache_evictions > 0 && st.refused == 1 && st.submitted == 10);
  CHECK(st.kv_live_bytes == 0 && st.kv_physical_bytes <= st.cache_bytes);
  if (st.kv_physical_bytes > st.cache_bytes)
    fprintf(stderr, "  admission: the pool maps %llu bytes, the cache holds %llu\n", (unsigned long long)st.kv_physical_bytes,
            (unsigned long long)st.cache_bytes);
  if (st.cache_evictions == 0 || st.refused != 1)
    fprintf(stderr, "  evictions %llu refused %llu entries %llu\n", (unsigned long long)st.cache_evictions,
            (unsigned long long)st.refused, (unsigned long long)st.cache_entries);
  CHECK_STATUS(fer_scheduler_free(s), FER_STATUS_OK);
  CHECK_STATUS(fer_engine_free(e), FER_STATUS_OK);
  fer_buffer_free(t.img);
}

typedef struct canceller {
  fer_scheduler *s;
  uint64_t id;
  fer_status st;
} canceller;

static void *cancel_thread(void *arg) {
  canceller *c = arg;
  c->st = fer_scheduler_cancel(c->s, c->id);
  return NULL;
}

/* C-SCHED-004: cancel from another thread, of a running and of a queued request: each ends with
 * CANCELLED at a step boundary, its earlier tokens kept; the others are untouched; an id never
 * issued is INVALID_ARG; a finished one is OK. */
static void test_cancel(void) {
  tiny t;
  CHECK_STATUS(fer_tiny_model_image("qwen3", 7, &t.img, &t.bytes), FER_STATUS_OK);
  fer_engine *e = engine_on(&t, 0, 2);
  fer_scheduler *s = scheduler_on(e, 2, 64, 16);
  static job jobs[3];
  memset(jobs, 0, sizeof jobs);
  for (uint32_t i = 0; i < 3; i++) {
    make_prompt(&jobs[i], 20, 0, 0, i);
    jobs[i].max_new = 40, jobs[i].stop_id = -1;
  }
  for (uint32_t i = 0; i < 3; i++) {
    fer_request_params p;
    params_of(&jobs[i], &p);
    p.flags = FER_REQUEST_IGNORE_EOS;
    CHECK_STATUS(fer_scheduler_submit(s, &p, &jobs[i].id), FER_STATUS_OK);
  }
  for (int k = 0; k < 5; k++) CHECK_STATUS(fer_scheduler_step(s, NULL), FER_STATUS_OK);
  canceller c0 = {s, jobs[0].id, FER_STATUS_MISUSE}, c2 = {s, jobs[2].id, FER_STATUS_MISUSE};
  pthread_t a, b;
  pthread_create(&a, NULL, cancel_thread, &c0);
  pthread_create(&b, NULL, cancel_thread, &c2); /* job 2 waits in the queue (2 run at once) */
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  CHECK(c0.st == FER_STATUS_OK && c2.st == FER_STATUS_OK);
  CHECK_STATUS(fer_scheduler_cancel(s, 12345), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(fer_scheduler_cancel(s, 0), FER_STATUS_INVALID_ARG);
  drive(s, 3, NULL, 0);
  CHECK(jobs[0].fin.finish_reason == FER_FINISH_CANCELLED && jobs[0].n_got == 5); /* 1 + 4 steps */
  CHECK(jobs[2].fin.finish_reason == FER_FINISH_CANCELLED && jobs[2].n_got == 0);
  CHECK(jobs[1].fin.finish_reason == FER_FINISH_LENGTH && jobs[1].n_got == 40);
  CHECK_STATUS(fer_scheduler_cancel(s, jobs[1].id), FER_STATUS_OK); /* finished: nothing to do */
  fer_scheduler_stats st;
  CHECK_STATUS(fer_scheduler_get_stats(s, &st), FER_STATUS_OK);
  CHECK(st.finished[FER_FINISH_CANCELLED] == 2 && st.finished[FER_FINISH_LENGTH] == 1 && st.kv_live_bytes == 0);
  CHECK(st.kv_physical_bytes <= st.cache_bytes);
  if (st.kv_physical_bytes > st.cache_bytes)
    fprintf(stderr, "  cancel: the pool maps %llu bytes, the cache holds %llu\n", (unsigned long long)st.kv_physical_bytes,
            (unsigned long long)st.cache_bytes);
  CHECK_STATUS(fer_scheduler_free(s), FER_STATUS_OK);
  CHECK_STATUS(fer_engine_free(e), FER_STATUS_OK);
  fer_buffer_free(t.img);
}

/* The regex [ab]{3,6} over the engine's vocabulary (its end: the model's eos), and *info, *tok. */
static fer_grammar *ab_grammar(fer_engine *e, fer_model_info *info, const fer_tokenizer **tok, fer_grammar_vocab **gv) {
  fer_engine_model_info(e, info);
  CHECK_STATUS(fer_engine_tokenizer(e, tok), FER_STATUS_OK);
  CHECK_STATUS(fer_grammar_vocab_create(*tok, info->n_vocab, info->eos_id, gv), FER_STATUS_OK);
  fer_grammar *g = NULL;
  const char *re = "[ab]{3,6}";
  CHECK_STATUS(fer_grammar_compile(*gv, FER_GRAMMAR_REGEX, re, strlen(re), 0, &g), FER_STATUS_OK);
  return g;
}

/* ids decode to a word of [ab]{3,6} (printed when not). */
static bool is_ab_3_6(const fer_tokenizer *tok, const int32_t *ids, uint32_t n) {
  char text[64];
  size_t len = 0;
  CHECK_STATUS(fer_tokenizer_decode(tok, ids, n, 0, text, sizeof text - 1, &len), FER_STATUS_OK);
  text[len] = 0;
  bool ok = len >= 3 && len <= 6;
  for (size_t c = 0; c < len; c++) ok = ok && (text[c] == 'a' || text[c] == 'b');
  if (!ok) fprintf(stderr, "  not a word of [ab]{3,6}: '%s'\n", text);
  return ok;
}

/* C-SCHED-005: a grammar and logprobs. Under the regex [ab]{3,6} every request's text matches
 * and ends with STOP at the grammar's end; logprobs are <= 0, the alternatives sorted, and with
 * greedy sampling the token is the first alternative. */
static void test_grammar_and_logprobs(void) {
  tiny t;
  CHECK_STATUS(fer_tiny_model_image("llama", 8, &t.img, &t.bytes), FER_STATUS_OK);
  fer_engine *e = engine_on(&t, 0, 4);
  fer_model_info info;
  const fer_tokenizer *tok = NULL;
  fer_grammar_vocab *gv = NULL;
  fer_grammar *g = ab_grammar(e, &info, &tok, &gv);
  fer_scheduler *s = scheduler_on(e, 4, 64, 0);
  static job jobs[4];
  memset(jobs, 0, sizeof jobs);
  for (uint32_t i = 0; i < 4; i++) {
    make_prompt(&jobs[i], 10 + i, 0, 0, i);
    jobs[i].max_new = 20, jobs[i].temperature = i == 0 ? 0.0f : 1.0f, jobs[i].seed = i, jobs[i].stop_id = -1;
    fer_request_params p;
    params_of(&jobs[i], &p);
    p.grammar = g, p.flags = FER_REQUEST_LOGPROBS, p.top_logprobs = 5;
    CHECK_STATUS(fer_scheduler_submit(s, &p, &jobs[i].id), FER_STATUS_OK);
  }
  CHECK_STATUS(fer_grammar_free(g), FER_STATUS_BUSY); /* the requests' matchers hold it */
  fer_scheduler_event ev[64];
  uint32_t done = 0;
  for (int k = 0; k < 200 && done < 4; k++) {
    CHECK_STATUS(fer_scheduler_step(s, NULL), FER_STATUS_OK);
    size_t got;
    CHECK_STATUS(fer_scheduler_poll_events(s, ev, 64, &got), FER_STATUS_OK);
    for (size_t i = 0; i < got; i++) {
      job *j = (job *)(uintptr_t)ev[i].user_data;
      if (ev[i].kind == FER_EVENT_FINISHED) {
        j->fin = ev[i], done++;
        continue;
      }
      j->got[j->n_got++] = ev[i].token;
      CHECK(ev[i].logprob <= 0.0f && ev[i].n_top == 5);
      for (uint32_t a = 1; a < ev[i].n_top; a++) CHECK(ev[i].top_logprobs[a] <= ev[i].top_logprobs[a - 1]);
      if (j == &jobs[0]) CHECK(ev[i].top_tokens[0] == ev[i].token || ev[i].logprob <= ev[i].top_logprobs[0]);
    }
  }
  CHECK(done == 4);
  for (uint32_t i = 0; i < 4; i++)
    CHECK(is_ab_3_6(tok, jobs[i].got, jobs[i].n_got) && jobs[i].fin.finish_reason == FER_FINISH_STOP &&
          jobs[i].fin.stop_token == info.eos_id);
  CHECK_STATUS(fer_scheduler_free(s), FER_STATUS_OK);
  CHECK_STATUS(fer_grammar_free(g), FER_STATUS_OK);
  CHECK_STATUS(fer_grammar_vocab_free(gv), FER_STATUS_OK);
  CHECK_STATUS(fer_engine_free(e), FER_STATUS_OK);
  fer_buffer_free(t.img);
}

/* C-SCHED-006: bad input gets a status and a message, out-parameters zeroed, nothing queued. */
static void test_bad_input(void) {
  tiny t;
  CHECK_STATUS(fer_tiny_model_image("llama", 9, &t.img, &t.bytes), FER_STATUS_OK);
  fer_engine *e = engine_on(&t, 0, 4);
  fer_scheduler_options o;
  CHECK_STATUS(fer_scheduler_options_init(NULL), FER_STATUS_NULL_ARG);
  fer_scheduler_options_init(&o);
  fer_scheduler *s = (fer_scheduler *)&o;
  CHECK_STATUS(fer_scheduler_create(NULL, &o, &s), FER_STATUS_NULL_ARG);
  CHECK(s == NULL);
  o.max_running = 5;
  CHECK_STATUS(fer_scheduler_create(e, &o, &s), FER_STATUS_INVALID_ARG);
  CHECK(last_error_has("max_running 5"));
  o.max_running = 4, o.step_tokens = 3;
  CHECK_STATUS(fer_scheduler_create(e, &o, &s), FER_STATUS_INVALID_ARG);
  o.step_tokens = 64, o.struct_size = 8;
  CHECK_STATUS(fer_scheduler_create(e, &o, &s), FER_STATUS_INVALID_ARG);
  o.struct_size = sizeof o, o.max_queued = 0;
  CHECK_STATUS(fer_scheduler_create(e, &o, &s), FER_STATUS_INVALID_ARG);
  o.max_queued = 4;
  CHECK_STATUS(fer_scheduler_create(e, &o, &s), FER_STATUS_OK);
  fer_scheduler *second = NULL;
  CHECK_STATUS(fer_scheduler_create(e, &o, &second), FER_STATUS_BUSY);
  const int32_t prompt[3] = {1, 2, 3}, bad_ids[2] = {5, 261}, neg = -1;
  fer_request_params p;
  CHECK_STATUS(fer_request_params_init(NULL), FER_STATUS_NULL_ARG);
  fer_request_params_init(&p);
  uint64_t id = 7;
  CHECK_STATUS(fer_scheduler_submit(s, &p, &id), FER_STATUS_INVALID_ARG); /* no prompt */
  CHECK(id == 0 && last_error_has("empty prompt"));
  p.prompt = prompt, p.n_prompt = 3;
  CHECK_STATUS(fer_scheduler_submit(NULL, &p, &id), FER_STATUS_NULL_ARG);
  CHECK_STATUS(fer_scheduler_submit(s, NULL, &id), FER_STATUS_NULL_ARG);
  CHECK_STATUS(fer_scheduler_submit(s, &p, NULL), FER_STATUS_NULL_ARG);
  fer_request_params q = p;
  q.prompt = bad_ids, q.n_prompt = 2;
  CHECK_STATUS(fer_scheduler_submit(s, &q, &id), FER_STATUS_INVALID_ARG);
  CHECK(last_error_has("prompt[1] = 261"));
  q = p, q.max_new_tokens = 0;
  CHECK_STATUS(fer_scheduler_submit(s, &q, &id), FER_STATUS_INVALID_ARG);
  q = p, q.max_new_tokens = 510;
  CHECK_STATUS(fer_scheduler_submit(s, &q, &id), FER_STATUS_INVALID_ARG);
  CHECK(last_error_has("max_tokens 512"));
  q = p, q.top_logprobs = 21;
  CHECK_STATUS(fer_scheduler_submit(s, &q, &id), FER_STATUS_INVALID_ARG);
  q = p, q.flags = 64;
  CHECK_STATUS(fer_scheduler_submit(s, &q, &id), FER_STATUS_INVALID_ARG);
  q = p, q.stop_ids = &neg, q.n_stop_ids = 1;
  CHECK_STATUS(fer_scheduler_submit(s, &q, &id), FER_STATUS_INVALID_ARG);
  q = p, q.stop_ids = NULL, q.n_stop_ids = 1;
  CHECK_STATUS(fer_scheduler_submit(s, &q, &id), FER_STATUS_NULL_ARG);
  q = p, q.sampling.temperature = -1.0f;
  CHECK_STATUS(fer_scheduler_submit(s, &q, &id), FER_STATUS_INVALID_ARG);
  q = p, q.struct_size = 4;
  CHECK_STATUS(fer_scheduler_submit(s, &q, &id), FER_STATUS_INVALID_ARG);
  fer_scheduler_stats st;
  CHECK_STATUS(fer_scheduler_get_stats(s, &st), FER_STATUS_OK);
  CHECK(st.submitted == 0 && st.queued == 0 && st.refused == 10);
  fer_scheduler_event ev;
  size_t n = 9;
  CHECK_STATUS(fer_scheduler_poll_events(s, NULL, 1, &n), FER_STATUS_NULL_ARG);
  CHECK(n == 0);
  CHECK_STATUS(fer_scheduler_poll_events(s, &ev, 1, NULL), FER_STATUS_NULL_ARG);
  CHECK_STATUS(fer_scheduler_step(NULL, NULL), FER_STATUS_NULL_ARG);
  fer_scheduler_step_info info;
  CHECK_STATUS(fer_scheduler_step(s, &info), FER_STATUS_OK); /* nothing to run */
  CHECK(info.decode_tokens == 0 && info.prefill_tokens == 0 && info.running == 0);
  CHECK_STATUS(fer_scheduler_get_stats(NULL, &st), FER_STATUS_NULL_ARG);
  CHECK_STATUS(fer_scheduler_get_stats(s, NULL), FER_STATUS_NULL_ARG);
  CHECK_STATUS(fer_scheduler_clear_cache(NULL), FER_STATUS_NULL_ARG);
  CHECK_STATUS(fer_scheduler_cancel(NULL, 1), FER_STATUS_NULL_ARG);
  CHECK_STATUS(fer_scheduler_free(NULL), FER_STATUS_OK);
  CHECK_STATUS(fer_scheduler_free(s), FER_STATUS_OK);
  CHECK_STATUS(fer_engine_free(e), FER_STATUS_OK);
  /* a budget below one request's projection (4 granules of 64 KiB on the tiny model) */
  e = engine_on(&t, 3 * 64 * 1024, 4);
  CHECK_STATUS(fer_scheduler_create(e, &o, &s), FER_STATUS_OK);
  CHECK_STATUS(fer_scheduler_submit(s, &p, &id), FER_STATUS_BUDGET_EXCEEDED);
  CHECK(id == 0 && last_error_has("above the whole budget of 196608 bytes"));
  CHECK_STATUS(fer_scheduler_free(s), FER_STATUS_OK);
  CHECK_STATUS(fer_engine_free(e), FER_STATUS_OK);
  fer_buffer_free(t.img);
}

/* C-SCHED-007: the real models (SmolLM2-135M Q4_1 through ChatML, Gemma 3 270M with its sliding
 * window): 6 chat requests sharing a system prompt, greedy and sampled, run twice through one
 * scheduler; every token equals the request alone, and the second round takes the shared system
 * prompt and more from the prefix cache. SKIPPED without the files (scripts/fetch-test-data.sh).
 * A sanitizer build (about 30x slower) runs 3 of the requests for 6 tokens on SmolLM2 only: the
 * same paths (ChatML prompts, batching, the cache's forks) over real-sized KV, which is what it
 * checks there; the tokens themselves are the optimised build's check. */
#if defined(__SANITIZE_ADDRESS__)
enum { N_REAL = 3, REAL_NEW = 6 };
#else
enum { N_REAL = 6, REAL_NEW = 24 };
#endif
static void test_real_model(const char *file) {
  char path[4096];
  if (!feri_test_data_path(file, path, sizeof path)) {
    printf("SKIPPED scheduler_test real model: %s not found (scripts/fetch-test-data.sh)\n", file);
    return;
  }
  fer_engine_config c;
  fer_engine_config_init(&c);
  /* one thread (the tiny models' tests above run two): Bazel runs another test on the second core,
   * and this, the test's longest part, spent much of its time in a pool thread waiting */
  c.model_path = path, c.n_threads = 1, c.max_tokens = 1024, c.max_seqs = 6;
  fer_engine *e = NULL;
  CHECK_STATUS(fer_engine_create(&c, &e), FER_STATUS_OK);
  if (!e) return;
  const fer_tokenizer *tok = NULL;
  fer_engine_tokenizer(e, &tok);
  static const char *const questions[6] = {"What is the capital of France?", "Name three colours.",
                                           "Why is the sky blue?", "Count from one to five.",
                                           "What is two plus two?", "Write a haiku about rain."};
  static job jobs[6];
  memset(jobs, 0, sizeof jobs);
  for (uint32_t i = 0; i < N_REAL; i++) {
    char text[2048];
    snprintf(text, sizeof text,
             "<|im_start|>system\nYou are a careful assistant. You answer briefly, in plain words, without lists "
             "unless asked. You never invent facts; when you do not know, you say so. You keep every answer under "
             "fifty words and you end with a full stop.<|im_end|>\n<|im_start|>user\n%s<|im_end|>\n<|im_start|>"
             "assistant\n", questions[i]);
    size_t n = 0;
    CHECK_STATUS(fer_tokenizer_encode(tok, text, strlen(text), 0, jobs[i].prompt, 400, &n), FER_STATUS_OK);
    jobs[i].n_prompt = (uint32_t)n;
    jobs[i].max_new = REAL_NEW, jobs[i].temperature = i % 2 ? 0.7f : 0.0f, jobs[i].seed = 11 + i, jobs[i].stop_id = -1;
  }
  fer_scheduler *s = scheduler_on(e, 6, 128, 16);
  submit_all(s, jobs, N_REAL);
  drive(s, N_REAL, NULL, 0);
  check_against_reference(e, jobs, N_REAL);
  submit_all(s, jobs, N_REAL);
  drive(s, N_REAL, NULL, 0);
  check_against_reference(e, jobs, N_REAL);
  for (uint32_t i = 0; i < N_REAL; i++) CHECK(jobs[i].fin.n_cached_tokens >= 48);
  fer_scheduler_stats st;
  CHECK_STATUS(fer_scheduler_get_stats(s, &st), FER_STATUS_OK);
  CHECK(st.cache_hits >= N_REAL && st.kv_live_bytes == 0);
  /* what the pool still maps is the cache's, and the cache's charge covers it (windows it shares
   * with another entry count in both: the charge may exceed the pool, never fall below it) */
  CHECK(st.kv_physical_bytes > 0 && st.kv_physical_bytes <= st.cache_bytes);
  CHECK(st.kv_os_bytes <= st.kv_physical_bytes); /* the kernel's count: no more than the ledger */
  if (st.kv_physical_bytes > st.cache_bytes)
    fprintf(stderr, "  %s: the pool maps %llu bytes, the cache holds %llu\n", file, (unsigned long long)st.kv_physical_bytes,
            (unsigned long long)st.cache_bytes);
  CHECK_STATUS(fer_scheduler_free(s), FER_STATUS_OK);
  CHECK_STATUS(fer_engine_free(e), FER_STATUS_OK);
}


/* C-KV-202: Q8_0 K and V through the scheduler: continuous batching, prompts cached and mapped
 * again (forks of Q8_0 blocks) give each request's tokens alone on the same engine, seq-, head- and
 * token-major layouts give the same logits, and the
 * cache's KV holds 34 bytes per 32 elements (a long sequence is charged 34/64 of its f16 bytes);
 * a model whose head_dim is not a multiple of 32 is
 * refused at engine creation. */
static void test_q8_0_kv(void) {
  tiny t;
  /* gemma3's shape with head_dim 64 (tiny llama's 8 cannot hold blocks of 32) */
  CHECK_STATUS(feri_tiny_gemma3_image(21, 2, 64, 0, &t.img, &t.bytes), FER_STATUS_OK);
  fer_engine_config c;
  fer_engine_config_init(&c);
  c.model_image = t.img;
  c.model_image_bytes = t.bytes;
  c.n_threads = 2;
  c.max_tokens = 512;
  c.max_seqs = 8;
  c.kv_dtype = FER_DTYPE_Q8_0;
  fer_engine *e = NULL;
  CHECK_STATUS(fer_engine_create(&c, &e), FER_STATUS_OK);
  if (e == NULL) return;
  fer_scheduler *s = scheduler_on(e, 4, 64, 16);
  static job jobs[6];
  memset(jobs, 0, sizeof jobs);
  for (uint32_t i = 0; i < 6; i++) {
    make_prompt(&jobs[i], 90 + i * 5, 70, i % 2, i);
    jobs[i].max_new = 8 + i, jobs[i].temperature = i % 2 ? 0.8f : 0.0f, jobs[i].seed = 3 + i, jobs[i].stop_id = -1;
  }
  for (int round = 0; round < 2; round++) { /* the second from the prefix cache */
    submit_all(s, jobs, 6);
    drive(s, 6, NULL, 0);
    check_against_reference(e, jobs, 6);
  }
  fer_scheduler_stats st;
  CHECK_STATUS(fer_scheduler_get_stats(s, &st), FER_STATUS_OK);
  CHECK(st.cache_hits >= 6 && st.cache_hit_tokens > 0);
  fer_model_info mi;
  CHECK_STATUS(fer_engine_model_info(e, &mi), FER_STATUS_OK);
  printf("q8_0 KV under the scheduler: %llu cache hits (%llu tokens), cache %llu bytes\n",
         (unsigned long long)st.cache_hits, (unsigned long long)st.cache_hit_tokens, (unsigned long long)st.cache_bytes);
  CHECK_STATUS(fer_scheduler_free(s), FER_STATUS_OK);
  CHECK_STATUS(fer_engine_free(e), FER_STATUS_OK);

  /* every layout holds the same blocks: a prompt and decode steps give the same logits bits */
  float *first = NULL;
  const fer_kv_layout layouts[3] = {FER_KV_LAYOUT_SEQ_MAJOR, FER_KV_LAYOUT_HEAD_MAJOR, FER_KV_LAYOUT_TOKEN_MAJOR};
  int layouts_same = 1;
  for (int l = 0; l < 3; l++) {
    fer_engine_config cl = c;
    cl.kv_layout = layouts[l];
    fer_engine *el = NULL;
    fer_engine_seq *q = NULL;
    CHECK_STATUS(fer_engine_create(&cl, &el), FER_STATUS_OK);
    if (el == NULL) continue;
    fer_model_info li;
    fer_engine_model_info(el, &li);
    float *lg = malloc(5 * (size_t)li.n_vocab * sizeof(float));
    int32_t ids[40];
    for (int i = 0; i < 40; i++) ids[i] = (int32_t)((i * 37 + 5) % li.n_vocab);
    CHECK_STATUS(fer_engine_seq_create(el, 64, &q), FER_STATUS_OK);
    if (q && lg) {
      CHECK_STATUS(fer_engine_prefill(q, ids, 40, lg, li.n_vocab), FER_STATUS_OK);
      for (int step = 1; step < 5; step++)
        CHECK_STATUS(fer_engine_decode(el, &q, &ids[step], 1, lg + step * li.n_vocab, li.n_vocab), FER_STATUS_OK);
      if (first == NULL) first = lg, lg = NULL;
      else layouts_same &= memcmp(first, lg, 5 * (size_t)li.n_vocab * sizeof(float)) == 0;
    }
    free(lg);
    fer_engine_seq_free(q);
    fer_engine_free(el);
  }
  CHECK(first != NULL && layouts_same);
  free(first);

  /* bytes: a sequence of 65,536 tokens is charged 34/64 of its f16 bytes (granules aside) */
  uint64_t charged[2] = {0, 0};
  const fer_dtype kinds[2] = {FER_DTYPE_F16, FER_DTYPE_Q8_0};
  for (int k = 0; k < 2; k++) {
    fer_engine_config ck = c;
    ck.kv_dtype = kinds[k];
    ck.max_tokens = 65536;
    fer_engine *ek = NULL;
    fer_engine_seq *q = NULL;
    CHECK_STATUS(fer_engine_create(&ck, &ek), FER_STATUS_OK);
    if (ek) CHECK_STATUS(fer_engine_seq_create(ek, 65536, &q), FER_STATUS_OK);
    fer_engine_stats es;
    if (ek && fer_engine_get_stats(ek, &es) == FER_STATUS_OK) charged[k] = es.kv_charged_bytes;
    fer_engine_seq_free(q);
    fer_engine_free(ek);
  }
  const double ratio = charged[0] ? (double)charged[1] / (double)charged[0] : 0.0;
  printf("a 65,536-token sequence is charged %llu bytes in f16, %llu in q8_0 (%.3f; 34/64 = 0.531)\n",
         (unsigned long long)charged[0], (unsigned long long)charged[1], ratio);
  CHECK(ratio > 0.52 && ratio < 0.55);
  fer_buffer_free(t.img);

  CHECK_STATUS(fer_tiny_model_image("llama", 3, &t.img, &t.bytes), FER_STATUS_OK);
  c.model_image = t.img;
  c.model_image_bytes = t.bytes;
  e = NULL;
  CHECK_STATUS(fer_engine_create(&c, &e), FER_STATUS_UNSUPPORTED);
  CHECK(e == NULL && last_error_has("multiple of 32"));
  fer_buffer_free(t.img);
}

/* C-SCHED-008: a lazy grammar (triggers). Free until the trigger token: the output up to and
 * including it equals the unconstrained run; from the next token on the regex [ab]{3,6} holds and
 * its end stops the request. A trigger never generated leaves the output free. Triggers without a
 * grammar, outside the vocabulary or too many are refused. */
static void test_lazy_grammar(void) {
  tiny t;
  CHECK_STATUS(fer_tiny_model_image("llama", 8, &t.img, &t.bytes), FER_STATUS_OK);
  fer_engine *e = engine_on(&t, 0, 2);
  fer_model_info info;
  const fer_tokenizer *tok = NULL;
  fer_grammar_vocab *gv = NULL;
  fer_grammar *g = ab_grammar(e, &info, &tok, &gv);
  fer_scheduler *s = scheduler_on(e, 2, 64, 0);
  static job free_run, lazy, never;
  memset(&free_run, 0, sizeof free_run);
  make_prompt(&free_run, 12, 0, 0, 5);
  free_run.max_new = 24, free_run.stop_id = -1;
  lazy = free_run, never = free_run;
  fer_request_params p;
  params_of(&free_run, &p);
  p.flags = FER_REQUEST_IGNORE_EOS;
  CHECK_STATUS(fer_scheduler_submit(s, &p, &free_run.id), FER_STATUS_OK);
  drive(s, 1, NULL, 0);
  /* the trigger: the first generated token (past the first) not seen before it */
  uint32_t k = 1;
  for (; k < free_run.n_got; k++) {
    bool seen = false;
    for (uint32_t i = 0; i < k; i++) seen = seen || free_run.got[i] == free_run.got[k];
    if (!seen) break;
  }
  CHECK(k < free_run.n_got);
  int32_t trigger = free_run.got[k];
  /* a token the free run never produced, for the trigger that never comes */
  int32_t absent = 0;
  for (bool clash = true; clash; absent++) {
    clash = false;
    for (uint32_t i = 0; i < free_run.n_got; i++) clash = clash || free_run.got[i] == absent;
    if (!clash) break;
  }
  params_of(&lazy, &p);
  p.flags = FER_REQUEST_IGNORE_EOS, p.grammar = g, p.grammar_triggers = &trigger, p.n_grammar_triggers = 1;
  CHECK_STATUS(fer_scheduler_submit(s, &p, &lazy.id), FER_STATUS_OK);
  params_of(&never, &p);
  p.flags = FER_REQUEST_IGNORE_EOS, p.grammar = g, p.grammar_triggers = &absent, p.n_grammar_triggers = 1;
  CHECK_STATUS(fer_scheduler_submit(s, &p, &never.id), FER_STATUS_OK);
  drive(s, 2, NULL, 0);
  CHECK(lazy.n_got > k + 1 && memcmp(lazy.got, free_run.got, (k + 1) * sizeof(int32_t)) == 0);
  CHECK(is_ab_3_6(tok, lazy.got + k + 1, lazy.n_got - k - 1) && lazy.fin.finish_reason == FER_FINISH_STOP &&
        lazy.fin.stop_token == info.eos_id);
  CHECK(never.n_got == free_run.n_got && memcmp(never.got, free_run.got, never.n_got * sizeof(int32_t)) == 0);
  CHECK(never.fin.finish_reason == FER_FINISH_LENGTH);
  /* refused */
  uint64_t id = 7;
  params_of(&lazy, &p);
  p.grammar_triggers = &trigger, p.n_grammar_triggers = 1;
  CHECK_STATUS(fer_scheduler_submit(s, &p, &id), FER_STATUS_INVALID_ARG);
  CHECK(id == 0 && last_error_has("without a grammar"));
  int32_t outside = (int32_t)info.n_vocab;
  p.grammar = g, p.grammar_triggers = &outside;
  CHECK_STATUS(fer_scheduler_submit(s, &p, &id), FER_STATUS_INVALID_ARG);
  CHECK(last_error_has("grammar_triggers[0]"));
  p.grammar_triggers = NULL;
  CHECK_STATUS(fer_scheduler_submit(s, &p, &id), FER_STATUS_NULL_ARG);
  p.grammar_triggers = &trigger, p.n_grammar_triggers = FER_MAX_GRAMMAR_TRIGGERS + 1;
  CHECK_STATUS(fer_scheduler_submit(s, &p, &id), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(fer_scheduler_free(s), FER_STATUS_OK);
  CHECK_STATUS(fer_grammar_free(g), FER_STATUS_OK);
  CHECK_STATUS(fer_grammar_vocab_free(gv), FER_STATUS_OK);
  CHECK_STATUS(fer_engine_free(e), FER_STATUS_OK);
  fer_buffer_free(t.img);
}

int main(void) {
  test_equivalence("llama");
  test_equivalence("qwen3");
  test_no_stall();
  test_prefix_cache();
  test_prefix_of_a_running_request();
  test_admission();
  test_cancel();
  test_grammar_and_logprobs();
  test_lazy_grammar();
  test_bad_input();
  test_q8_0_kv();
  test_real_model("smollm2-135m-instruct-q4_1.gguf");
#if defined(__SANITIZE_ADDRESS__)
  printf("SKIPPED: scheduler_test Gemma 3 through the scheduler in a sanitizer build (SmolLM2 checks the paths)\n");
#else
  test_real_model("gemma3-270m-q4_k_m.gguf");
#endif
  return feri_test_finish("scheduler_test");
}
