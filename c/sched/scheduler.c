/* scheduler.c: continuous batching over an engine, with chunked prefill mixed into decode steps
 * and the automatic prefix cache (contract in ffi/ferrite.h).
 *
 * A request moves queue -> running -> finished. Submit and cancel come from any thread: the lists,
 * the ids and the counters sit behind `lock`, and a cancel only raises the request's flag, which
 * the step thread honours at the next step boundary. Everything else (the forward pass, sampling,
 * the prefix cache, the events) belongs to the one thread inside fer_scheduler_step.
 *
 * Every request runs on the scheduler's own KV: one granule pool and one fer_kv_cache (the engine's
 * layout and dtype, the fixed policy, capacity the engine's max_tokens) for all of them and for the
 * cache's entries, which is what lets a new request fork a cached prefix. Its admission charge is
 * its projected commit at prompt + max_new_tokens; a cached entry charges every window it maps
 * (prefix_cache.h); both against the engine's governor, so the pool's physical bytes stay under the
 * budget. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "engine/engine_internal.h"
#include "grammar/grammar_api.h"
#include "model/llama.h"
#include "model/shared_kv.h"
#include "model/tp_candidates.h"
#include "model/tp_draw.h"
#include "model/tp_run.h"
#include "sample/rng.h"
#include "sched/prefix_cache.h"

typedef struct request {
  uint64_t id, user_data;
  uint32_t flags, top_logprobs;
  uint32_t tp_candidates; /* tensor parallelism: the logits candidates a rank sends for its draw (0: the whole row) */
  bool tp_drawable;       /* ... or the ranks draw its token together (model/tp_draw.h) */
  float temperature;      /* its sampling's, and the seed of its uniforms, for such draws */
  uint64_t seed;
  int32_t *tokens;      /* the prompt, then the generated tokens */
  uint32_t n_prompt, n_gen, max_new;
  uint32_t n_fed;       /* tokens whose K and V the sequence holds */
  uint32_t n_cached;    /* of them taken from the prefix cache */
  uint64_t cache_inserts_seen; /* the prefix cache's insert count at its last lookup */
  int32_t *stop_ids;
  uint32_t n_stop;
  int32_t grammar_end;  /* the grammar's end token, or -1 without a grammar */
  fer_sampler *sampler;
  fer_matcher *matcher;
  bool grammar_on;      /* the matcher constrains the sampler (a lazy one waits for a trigger) */
  uint32_t n_triggers;
  int32_t triggers[FER_MAX_GRAMMAR_TRIGGERS];
  uint64_t projected;   /* the admission charge to take (projected commit at prompt + max_new) */
  uint64_t admitted;    /* the charge held while running */
  feri_llama_seq *seq;
  _Atomic int cancel;
  struct request *next;
} request;

struct fer_scheduler {
  fer_engine *e;
  fer_scheduler_options o;
  fer_vmm *vmm;
  fer_kv_cache *kv_cache;
  fer_kv_geometry geometry; /* of a request's KV on this rank (capacity: the engine's max_tokens) */
  fer_kv_geometry charged;  /* what admission charges: the rank holding the most KV's (feri_llama_kv_charge_geometry) */
  uint64_t granule, budget;
  feri_llama_batch *batch;
  float *logits;            /* one row per running request */
  float *raw;               /* a logits row before sampling, for its logprobs */
  float *draw_t;            /* tensor parallelism: a step's draws (feri_llama_batch_set_draws) */
  double *draw_u;
  feri_llama_segment *segs;
  request **seg_req;
  feri_prefix_cache *prefix; /* NULL: no prefix cache */

  pthread_mutex_t lock;     /* the lists, the ids and the counters */
  request *queue_head, *queue_tail;
  uint32_t n_queued;
  request **running;        /* admission order */
  uint32_t n_running;
  uint64_t next_id;
  fer_scheduler_stats stats;

  _Atomic int in_use;       /* step, poll, clear: one thread at a time */
  fer_scheduler_event *ev;  /* queued events: [ev_head, n_ev) */
  size_t n_ev, ev_head, ev_cap;
};

fer_status fer_scheduler_options_init(fer_scheduler_options *o) {
  feri_error_clear();
  if (o == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_scheduler_options_init: options is NULL");
  memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  o->step_tokens = 512;
  o->max_queued = 256;
  o->prefix_block_tokens = 16;
  return FER_STATUS_OK;
}

fer_status fer_request_params_init(fer_request_params *p) {
  feri_error_clear();
  if (p == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_request_params_init: params is NULL");
  memset(p, 0, sizeof *p);
  p->struct_size = sizeof *p;
  p->max_new_tokens = 16;
  return fer_sampling_params_init(&p->sampling);
}

/* ---- guards ----------------------------------------------------------------------------------- */

static fer_status sched_enter(fer_scheduler *s, const char *fn) {
  if (atomic_exchange(&s->in_use, 1)) return feri_fail(FER_STATUS_BUSY, "%s: another thread is inside this scheduler", fn);
  return FER_STATUS_OK;
}
static fer_status sched_leave(fer_scheduler *s, fer_status st) {
  atomic_store(&s->in_use, 0);
  return st;
}

/* ---- creation --------------------------------------------------------------------------------- */

static void sched_release(fer_scheduler *s) {
  feri_prefix_cache_free(s->prefix);
  feri_llama_kv_cache_free(s->e->model, s->kv_cache, s->vmm);
  feri_llama_batch_free(s->batch);
  free(s->logits), free(s->raw), free(s->draw_t), free(s->draw_u), free(s->segs), free(s->seg_req), free(s->running), free(s->ev);
  pthread_mutex_destroy(&s->lock);
  free(s);
}

static fer_status make_kv(fer_scheduler *s) {
  fer_engine *e = s->e;
  feri_llama_seq_options so = e->seq_opts;
  so.policy = FER_KV_POLICY_FIXED_MAX;
  fer_status st = feri_llama_kv_geometry(e->model, e->cfg.max_tokens, &so, &s->geometry, &s->granule);
  if (st == FER_STATUS_OK) st = feri_llama_kv_charge_geometry(e->model, e->cfg.max_tokens, &so, &s->charged, &s->granule);
  if (st != FER_STATUS_OK) return st;
  fer_governor_stats gs;
  fer_governor_get_stats(e->gov, &gs);
  s->budget = gs.budget_bytes;
  /* the pool holds what the budget allows (every charge is an upper bound of what it maps), plus a
   * window per binding for each fork's partly filled one */
  const uint64_t bindings = s->geometry.layout == FER_KV_LAYOUT_TOKEN_MAJOR ? 1 : 2ull * s->geometry.n_layers;
  fer_vmm_options vo;
  fer_vmm_options_init(&vo);
  vo.granule_bytes = s->granule;
  vo.max_granules = s->budget / s->granule + bindings * (2ull * s->o.max_running + 8) + 64;
  fer_kv_cache_options ko;
  fer_kv_cache_options_init(&ko);
  ko.policy = FER_KV_POLICY_FIXED_MAX;
  ko.dtype = so.dtype;
  ko.min_bucket = 1;
  ko.geometry = s->geometry;
  return feri_llama_kv_cache_create(e->model, &vo, &ko, &s->vmm, &s->kv_cache);
}

/* The engine's reclaim hook: the least recently used cached prefix goes. */
static bool reclaim_cache(void *prefix) { return feri_prefix_cache_evict_lru(prefix); }

fer_status fer_scheduler_create(fer_engine *e, const fer_scheduler_options *opts, fer_scheduler **out) {
  static const char *const fn = "fer_scheduler_create";
  feri_error_clear();
  if (out != NULL) *out = NULL;
  if (e == NULL || opts == NULL || out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: NULL argument", fn);
  if (opts->struct_size < sizeof *opts)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: options->struct_size %u < %zu (call fer_scheduler_options_init)", fn,
                     opts->struct_size, sizeof *opts);
  fer_scheduler_options o = *opts;
  o.struct_size = sizeof o;
  if (o.max_running == 0) o.max_running = e->cfg.max_seqs;
  if (o.max_running > e->cfg.max_seqs)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: max_running %u above the engine's max_seqs %u", fn, o.max_running,
                     e->cfg.max_seqs);
  if (o.step_tokens < o.max_running || o.step_tokens > FERI_BATCH_MAX_ROWS)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: step_tokens %u (max_running %u .. %u)", fn, o.step_tokens, o.max_running,
                     FERI_BATCH_MAX_ROWS);
  if (o.max_queued == 0 || o.max_queued > (1u << 20))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: max_queued %u (1 .. %u)", fn, o.max_queued, 1u << 20);
  if (o.prefix_block_tokens > e->cfg.max_tokens)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: prefix_block_tokens %u above the engine's max_tokens %u", fn,
                     o.prefix_block_tokens, e->cfg.max_tokens);
  fer_status st = feri_engine_enter(e, fn);
  if (st != FER_STATUS_OK) return st;
  if (atomic_load(&e->schedulers) > 0) return feri_engine_leave(e, feri_fail(FER_STATUS_BUSY, "%s: the engine has a scheduler", fn));
  fer_scheduler *s = calloc(1, sizeof *s);
  if (!s) return feri_engine_leave(e, feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: scheduler", fn));
  if (pthread_mutex_init(&s->lock, NULL) != 0) {
    free(s);
    return feri_engine_leave(e, feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: mutex", fn));
  }
  s->e = e;
  s->o = o;
  atomic_init(&s->in_use, 0);
  s->logits = malloc((size_t)o.max_running * e->info.n_vocab * sizeof(float));
  s->raw = malloc((size_t)e->info.n_vocab * sizeof(float));
  s->draw_t = malloc(o.max_running * sizeof *s->draw_t);
  s->draw_u = malloc(o.max_running * sizeof *s->draw_u);
  s->segs = malloc(o.max_running * sizeof *s->segs);
  s->seg_req = malloc(o.max_running * sizeof *s->seg_req);
  s->running = malloc(o.max_running * sizeof *s->running);
  if (!s->logits || !s->raw || !s->draw_t || !s->draw_u || !s->segs || !s->seg_req || !s->running) st = feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: buffers", fn);
  if (st == FER_STATUS_OK) st = feri_llama_batch_create(e->model, o.step_tokens, &s->batch);
  if (st == FER_STATUS_OK) st = make_kv(s);
  if (st == FER_STATUS_OK && o.prefix_block_tokens > 0)
    st = feri_prefix_cache_create(e->model, e->gov, s->granule, &s->geometry, o.prefix_block_tokens, o.prefix_cache_bytes, &s->prefix);
  if (st != FER_STATUS_OK) {
    feri_error_stash keep;
    feri_error_save(&keep);
    sched_release(s);
    return feri_engine_leave(e, feri_error_restore(&keep, st));
  }
  atomic_fetch_add(&e->schedulers, 1);
  if (s->prefix != NULL) e->reclaim = reclaim_cache, e->reclaim_ctx = s->prefix;
  *out = s;
  return feri_engine_leave(e, FER_STATUS_OK);
}

/* ---- requests ----------------------------------------------------------------------------------- */

static void request_free(request *r) {
  if (!r) return;
  feri_llama_seq_free(r->seq);
  fer_sampler_free(r->sampler);
  fer_matcher_free(r->matcher);
  free(r->tokens), free(r->stop_ids);
  free(r);
}

/* Builds a request from checked params; nothing is shared with the caller afterwards. */
static fer_status request_make(fer_scheduler *s, const fer_request_params *p, request **out) {
  static const char *const fn = "fer_scheduler_submit";
  const fer_engine *e = s->e;
  *out = NULL;
  if (p->struct_size < sizeof *p)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: params->struct_size %u < %zu (call fer_request_params_init)", fn,
                     p->struct_size, sizeof *p);
  if (p->n_prompt == 0 || p->prompt == NULL) return feri_fail(FER_STATUS_INVALID_ARG, "%s: an empty prompt", fn);
  if ((p->flags & ~(uint32_t)(FER_REQUEST_IGNORE_EOS | FER_REQUEST_LOGPROBS)) != 0)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: unknown flags 0x%x", fn, p->flags);
  if (p->max_new_tokens == 0) return feri_fail(FER_STATUS_INVALID_ARG, "%s: max_new_tokens is 0", fn);
  if (p->n_prompt > e->cfg.max_tokens || p->max_new_tokens > e->cfg.max_tokens - p->n_prompt)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: %zu prompt tokens + %u new tokens exceed the engine's max_tokens %u", fn,
                     p->n_prompt, p->max_new_tokens, e->cfg.max_tokens);
  if (p->top_logprobs > FER_MAX_TOP_LOGPROBS)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: top_logprobs %u (0 .. %d)", fn, p->top_logprobs, FER_MAX_TOP_LOGPROBS);
  if (p->n_stop_ids > 0 && p->stop_ids == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: stop_ids is NULL", fn);
  if (p->n_stop_ids > 1024) return feri_fail(FER_STATUS_INVALID_ARG, "%s: %zu stop ids (at most 1024)", fn, p->n_stop_ids);
  const uint32_t V = e->info.n_vocab;
  for (size_t i = 0; i < p->n_prompt; i++)
    if (p->prompt[i] < 0 || (uint32_t)p->prompt[i] >= V)
      return feri_fail(FER_STATUS_INVALID_ARG, "%s: prompt[%zu] = %d is outside the vocabulary of %u", fn, i, p->prompt[i], V);
  for (size_t i = 0; i < p->n_stop_ids; i++)
    if (p->stop_ids[i] < 0 || (uint32_t)p->stop_ids[i] >= V)
      return feri_fail(FER_STATUS_INVALID_ARG, "%s: stop_ids[%zu] = %d is outside the vocabulary of %u", fn, i,
                       p->stop_ids[i], V);
  if (p->grammar != NULL && p->grammar->vocab->trie.n_vocab != V)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: the grammar's vocabulary has %u tokens, the model %u", fn,
                     p->grammar->vocab->trie.n_vocab, V);
  if (p->n_grammar_triggers > 0 && p->grammar == NULL)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: grammar triggers without a grammar", fn);
  if (p->n_grammar_triggers > FER_MAX_GRAMMAR_TRIGGERS)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: %zu grammar triggers (at most %d)", fn, p->n_grammar_triggers,
                     FER_MAX_GRAMMAR_TRIGGERS);
  if (p->n_grammar_triggers > 0 && p->grammar_triggers == NULL)
    return feri_fail(FER_STATUS_NULL_ARG, "%s: grammar_triggers is NULL", fn);
  for (size_t i = 0; i < p->n_grammar_triggers; i++)
    if (p->grammar_triggers[i] < 0 || (uint32_t)p->grammar_triggers[i] >= V)
      return feri_fail(FER_STATUS_INVALID_ARG, "%s: grammar_triggers[%zu] = %d is outside the vocabulary of %u", fn, i,
                       p->grammar_triggers[i], V);
  const uint32_t need = (uint32_t)p->n_prompt + p->max_new_tokens;
  uint64_t granules = 0;
  fer_status st = fer_kv_committed_granules(&s->charged, need, s->granule, &granules);
  if (st != FER_STATUS_OK) return st;
  if (granules * s->granule > s->budget)
    return feri_fail(FER_STATUS_BUDGET_EXCEEDED,
                     "%s: %u tokens project %llu bytes of KV, above the whole budget of %llu bytes", fn, need,
                     (unsigned long long)(granules * s->granule), (unsigned long long)s->budget);
  request *r = calloc(1, sizeof *r);
  if (!r) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: request", fn);
  atomic_init(&r->cancel, 0);
  r->user_data = p->user_data, r->flags = p->flags, r->top_logprobs = p->top_logprobs;
  r->n_prompt = (uint32_t)p->n_prompt, r->max_new = p->max_new_tokens, r->projected = granules * s->granule;
  r->grammar_end = -1;
  r->tokens = malloc((size_t)need * sizeof(int32_t));
  r->stop_ids = malloc((p->n_stop_ids + 2) * sizeof(int32_t));
  if (!r->tokens || !r->stop_ids) st = feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: request", fn);
  if (st == FER_STATUS_OK) {
    memcpy(r->tokens, p->prompt, p->n_prompt * sizeof(int32_t));
    if (p->n_stop_ids > 0) memcpy(r->stop_ids, p->stop_ids, p->n_stop_ids * sizeof(int32_t));
    r->n_stop = (uint32_t)p->n_stop_ids;
    if (!(p->flags & FER_REQUEST_IGNORE_EOS)) {
      if (e->info.eos_id >= 0) r->stop_ids[r->n_stop++] = e->info.eos_id;
      if (e->info.eot_id >= 0) r->stop_ids[r->n_stop++] = e->info.eot_id;
    }
    st = fer_sampler_create(&p->sampling, &r->sampler);
  }
  if (st == FER_STATUS_OK && p->grammar != NULL) {
    st = fer_matcher_create(p->grammar, &r->matcher);
    r->n_triggers = (uint32_t)p->n_grammar_triggers;
    if (r->n_triggers > 0) memcpy(r->triggers, p->grammar_triggers, r->n_triggers * sizeof(int32_t));
    r->grammar_on = r->n_triggers == 0;
    if (st == FER_STATUS_OK && r->grammar_on) st = fer_sampler_set_matcher(r->sampler, r->matcher);
    r->grammar_end = p->grammar->vocab->eos;
  }
  r->tp_candidates = feri_tp_candidates_needed(&p->sampling, p->grammar != NULL, (p->flags & FER_REQUEST_LOGPROBS) != 0);
  r->tp_drawable = feri_tp_drawable(&p->sampling, p->grammar != NULL, (p->flags & FER_REQUEST_LOGPROBS) != 0);
  r->temperature = p->sampling.temperature, r->seed = p->sampling.seed;
  if (st != FER_STATUS_OK) {
    feri_error_stash keep;
    feri_error_save(&keep);
    request_free(r);
    return feri_error_restore(&keep, st);
  }
  *out = r;
  return FER_STATUS_OK;
}

fer_status fer_scheduler_submit(fer_scheduler *s, const fer_request_params *p, uint64_t *out_id) {
  static const char *const fn = "fer_scheduler_submit";
  feri_error_clear();
  if (out_id != NULL) *out_id = 0;
  if (s == NULL || p == NULL || out_id == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: NULL argument", fn);
  request *r = NULL;
  fer_status st = request_make(s, p, &r);
  pthread_mutex_lock(&s->lock);
  if (st == FER_STATUS_OK && s->n_queued >= s->o.max_queued) {
    st = feri_fail(FER_STATUS_BUSY, "%s: %u requests are queued, the scheduler's max_queued (%u running)", fn, s->n_queued,
                   s->n_running);
  }
  if (st != FER_STATUS_OK) {
    s->stats.refused++;
    pthread_mutex_unlock(&s->lock);
    feri_error_stash keep;
    feri_error_save(&keep);
    request_free(r);
    return feri_error_restore(&keep, st);
  }
  r->id = ++s->next_id;
  if (s->queue_tail) s->queue_tail->next = r;
  else s->queue_head = r;
  s->queue_tail = r;
  s->n_queued++;
  s->stats.submitted++;
  *out_id = r->id;
  pthread_mutex_unlock(&s->lock);
  return FER_STATUS_OK;
}

fer_status fer_scheduler_cancel(fer_scheduler *s, uint64_t id) {
  feri_error_clear();
  if (s == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_scheduler_cancel: scheduler is NULL");
  pthread_mutex_lock(&s->lock);
  const uint64_t issued = s->next_id;
  for (request *r = s->queue_head; r; r = r->next)
    if (r->id == id) atomic_store(&r->cancel, 1);
  for (uint32_t i = 0; i < s->n_running; i++)
    if (s->running[i]->id == id) atomic_store(&s->running[i]->cancel, 1);
  pthread_mutex_unlock(&s->lock);
  if (id == 0 || id > issued)
    return feri_fail(FER_STATUS_INVALID_ARG, "fer_scheduler_cancel: request %llu was never issued", (unsigned long long)id);
  return FER_STATUS_OK;
}

/* ---- events ------------------------------------------------------------------------------------- */

/* A new event of r at the end of the queue (zeroed, ids set); NULL when memory runs out, in which
 * case the scheduler drops the event (only a TOKEN: see finish). */
static fer_scheduler_event *event_push(fer_scheduler *s, const request *r, int32_t kind) {
  if (s->n_ev == s->ev_cap) {
    if (s->ev_head > 0) { /* slide the undrained events down first */
      memmove(s->ev, s->ev + s->ev_head, (s->n_ev - s->ev_head) * sizeof *s->ev);
      s->n_ev -= s->ev_head, s->ev_head = 0;
    }
    if (s->n_ev == s->ev_cap) {
      const size_t cap = s->ev_cap ? 2 * s->ev_cap : 64;
      fer_scheduler_event *p = realloc(s->ev, cap * sizeof *p);
      if (!p) return NULL;
      s->ev = p, s->ev_cap = cap;
    }
  }
  fer_scheduler_event *ev = &s->ev[s->n_ev++];
  memset(ev, 0, sizeof *ev);
  ev->request_id = r->id, ev->user_data = r->user_data, ev->kind = kind;
  ev->stop_token = -1;
  return ev;
}

fer_status fer_scheduler_poll_events(fer_scheduler *s, fer_scheduler_event *events, size_t cap, size_t *out_n) {
  static const char *const fn = "fer_scheduler_poll_events";
  feri_error_clear();
  if (out_n != NULL) *out_n = 0;
  if (s == NULL || out_n == NULL || (cap > 0 && events == NULL)) return feri_fail(FER_STATUS_NULL_ARG, "%s: NULL argument", fn);
  fer_status st = sched_enter(s, fn);
  if (st != FER_STATUS_OK) return st;
  size_t n = s->n_ev - s->ev_head;
  if (n > cap) n = cap;
  if (n > 0) memcpy(events, s->ev + s->ev_head, n * sizeof *events);
  s->ev_head += n;
  if (s->ev_head == s->n_ev) s->ev_head = s->n_ev = 0;
  *out_n = n;
  return sched_leave(s, FER_STATUS_OK);
}

/* ---- finishing ------------------------------------------------------------------------------------ */

/* Keeps the whole blocks of r's first n tokens in the prefix cache: best effort (a failure leaves
 * the cache as it was and the request untouched). */
static void cache_prefix(fer_scheduler *s, request *r, uint32_t n) {
  feri_error_stash keep;
  feri_error_save(&keep);
  (void)feri_prefix_cache_insert(s->prefix, feri_llama_seq_kv(r->seq), r->tokens, n);
  feri_error_restore(&keep, FER_STATUS_OK);
}

/* Ends r (already out of the lists): its FINISHED event, its KV into the prefix cache when it ran,
 * its admission charge back, then it is freed. The event is the one thing a request must get: when
 * the queue cannot grow, the oldest undrained TOKEN event of any request makes room. */
static void finish(fer_scheduler *s, request *r, int32_t reason, int32_t stop_token, fer_status status, const char *message) {
  fer_scheduler_event *ev = event_push(s, r, FER_EVENT_FINISHED);
  if (!ev) {
    for (size_t i = s->ev_head; i < s->n_ev && !ev; i++)
      if (s->ev[i].kind == FER_EVENT_TOKEN) ev = &s->ev[i];
    if (ev) {
      memset(ev, 0, sizeof *ev);
      ev->request_id = r->id, ev->user_data = r->user_data, ev->kind = FER_EVENT_FINISHED;
    }
  }
  if (ev) {
    ev->finish_reason = reason;
    ev->stop_token = stop_token;
    ev->n_prompt_tokens = r->n_prompt, ev->n_cached_tokens = r->n_cached, ev->n_generated = r->n_gen;
    ev->status = status;
    if (message) snprintf(ev->message, sizeof ev->message, "%s", message);
  }
  /* the request's charge first: its prefix may then take that room in the cache */
  if (r->admitted) fer_governor_release(s->e->gov, FER_MEM_ROLE_KV, r->admitted);
  if (r->seq != NULL && s->prefix != NULL && r->n_fed > 0 && reason != FER_FINISH_ERROR) cache_prefix(s, r, r->n_fed);
  pthread_mutex_lock(&s->lock);
  s->stats.finished[reason]++;
  pthread_mutex_unlock(&s->lock);
  request_free(r);
}

/* Ends the running request at index i of the running list. */
static void finish_running(fer_scheduler *s, uint32_t i, int32_t reason, int32_t stop_token, fer_status status,
                           const char *message) {
  pthread_mutex_lock(&s->lock);
  request *r = s->running[i];
  memmove(&s->running[i], &s->running[i + 1], (s->n_running - i - 1) * sizeof *s->running);
  s->n_running--;
  pthread_mutex_unlock(&s->lock);
  finish(s, r, reason, stop_token, status, message);
}

/* ---- admission ------------------------------------------------------------------------------------ */

/* Takes the queue's head out of the queue (the lock held). */
static request *queue_pop(fer_scheduler *s) {
  request *r = s->queue_head;
  s->queue_head = r->next;
  if (!s->queue_head) s->queue_tail = NULL;
  r->next = NULL;
  s->n_queued--;
  return r;
}

/* Gives r its sequence: a fork of the longest cached prefix of its prompt (leaving at least the
 * last prompt token to run, whose logits start the generation), or an empty one. */
static fer_status attach_sequence(fer_scheduler *s, request *r) {
  fer_kv_seq *kv = NULL;
  uint32_t cached = 0;
  if (s->prefix != NULL) {
    const fer_kv_seq *hit = NULL;
    r->cache_inserts_seen = feri_prefix_cache_inserts(s->prefix);
    cached = feri_prefix_cache_lookup(s->prefix, r->tokens, r->n_prompt, r->n_prompt - 1, &hit);
    if (cached > 0 && feri_llama_kv_seq_fork(s->e->model, hit, cached, &kv) != FER_STATUS_OK) cached = 0, kv = NULL; /* a miss, then */
    pthread_mutex_lock(&s->lock);
    if (cached > 0) s->stats.cache_hits++, s->stats.cache_hit_tokens += cached;
    else s->stats.cache_misses++;
    pthread_mutex_unlock(&s->lock);
  }
  fer_status st = FER_STATUS_OK;
  if (kv == NULL) st = feri_llama_kv_seq_create(s->e->model, s->kv_cache, &kv);
  if (st == FER_STATUS_OK) st = feri_llama_seq_create_on(s->e->model, kv, cached, r->n_prompt + r->max_new, &r->seq);
  if (st != FER_STATUS_OK) {
    feri_error_stash keep;
    feri_error_save(&keep);
    feri_llama_kv_seq_free(s->e->model, kv);
    return feri_error_restore(&keep, st);
  }
  r->n_fed = r->n_cached = cached;
  return FER_STATUS_OK;
}

/* Charges r's projected KV, evicting cached prefixes while the governor refuses. BUDGET_EXCEEDED
 * when even an empty cache leaves no room. */
static fer_status charge(fer_scheduler *s, request *r) {
  for (;;) {
    fer_status st = fer_governor_charge(s->e->gov, FER_MEM_ROLE_KV, r->projected);
    if (st == FER_STATUS_OK) {
      r->admitted = r->projected;
      return FER_STATUS_OK;
    }
    if (st != FER_STATUS_BUDGET_EXCEEDED || s->prefix == NULL) return st;
    /* evict only when emptying the cache would make room: a request that waits for running ones
     * to finish should not take the cache down with it */
    fer_governor_stats g;
    fer_governor_get_stats(s->e->gov, &g);
    const uint64_t others = g.charged_bytes + g.reserved_bytes - g.charged_by_role[FER_MEM_ROLE_CACHE];
    if (others + r->projected > g.budget_bytes || !feri_prefix_cache_evict_lru(s->prefix)) return st;
  }
}

/* Ends cancelled queued requests, then admits from the head of the queue in arrival order while
 * there is room: a head that does not fit waits (and so does everything behind it) unless nothing
 * is running, when it never will. */
static void admit(fer_scheduler *s) {
  pthread_mutex_lock(&s->lock);
  request *cancelled = NULL;
  for (request **pp = &s->queue_head, *prev = NULL; *pp;) {
    request *r = *pp;
    if (!atomic_load(&r->cancel)) {
      prev = r, pp = &r->next;
      continue;
    }
    *pp = r->next;
    if (s->queue_tail == r) s->queue_tail = prev;
    s->n_queued--;
    r->next = cancelled, cancelled = r;
  }
  pthread_mutex_unlock(&s->lock);
  while (cancelled) {
    request *r = cancelled;
    cancelled = r->next;
    finish(s, r, FER_FINISH_CANCELLED, -1, FER_STATUS_OK, NULL);
  }
  for (;;) {
    pthread_mutex_lock(&s->lock);
    request *r = s->n_running < s->o.max_running ? s->queue_head : NULL;
    pthread_mutex_unlock(&s->lock);
    if (!r) return;
    fer_status st = charge(s, r);
    if (st == FER_STATUS_BUDGET_EXCEEDED && s->n_running > 0) return; /* it waits for memory */
    if (st == FER_STATUS_OK) st = attach_sequence(s, r);
    pthread_mutex_lock(&s->lock);
    queue_pop(s);
    if (st == FER_STATUS_OK) s->running[s->n_running++] = r;
    pthread_mutex_unlock(&s->lock);
    if (st != FER_STATUS_OK) {
      char msg[192];
      size_t len;
      fer_last_error_message(msg, sizeof msg, &len);
      finish(s, r, FER_FINISH_ERROR, -1, st, msg);
    }
  }
}

/* ---- a step ----------------------------------------------------------------------------------------- */

static bool is_stop(const request *r, int32_t t) {
  for (uint32_t i = 0; i < r->n_stop; i++)
    if (r->stop_ids[i] == t) return true;
  return false;
}

/* Fills the event's logprob and alternatives from the raw logits (before any processor). */
static void report_logprobs(const request *r, const float *logits, uint32_t V, int32_t token, fer_scheduler_event *ev) {
  float mx = -INFINITY;
  for (uint32_t i = 0; i < V; i++) mx = logits[i] > mx ? logits[i] : mx;
  double sum = 0;
  for (uint32_t i = 0; i < V; i++) sum += exp((double)logits[i] - mx);
  ev->logprob = (float)((double)logits[token] - mx - log(sum));
  size_t n = 0;
  if (r->top_logprobs > 0 &&
      fer_logits_top_logprobs(logits, V, r->top_logprobs, ev->top_tokens, ev->top_logprobs, &n) == FER_STATUS_OK)
    ev->n_top = (uint32_t)n;
}

/* Ends running request i with ERROR and the last error's message. */
static void fail_running(fer_scheduler *s, uint32_t i, fer_status st) {
  char msg[192];
  size_t len;
  fer_last_error_message(msg, sizeof msg, &len);
  finish_running(s, i, FER_FINISH_ERROR, -1, st, msg);
}

static bool is_trigger(const request *r, int32_t t) {
  for (uint32_t k = 0; k < r->n_triggers; k++)
    if (r->triggers[k] == t) return true;
  return false;
}

/* Samples running request i from its logits row (overwritten); ends it when it stops. */
static void sample_one(fer_scheduler *s, uint32_t i, float *row) {
  request *r = s->running[i];
  const uint32_t V = s->e->info.n_vocab;
  const bool want_lp = (r->flags & FER_REQUEST_LOGPROBS) != 0;
  if (want_lp) memcpy(s->raw, row, (size_t)V * sizeof(float)); /* the logprobs read the raw row */
  fer_sampling_context ctx = {r->tokens, r->n_prompt, r->tokens + r->n_prompt, r->n_gen};
  int32_t t = -1;
  fer_status st = fer_sampler_sample(r->sampler, row, V, &ctx, &t, NULL);
  if (st == FER_STATUS_OK && r->grammar_on && t != r->grammar_end && !is_stop(r, t))
    st = fer_matcher_accept(r->matcher, t);
  if (st == FER_STATUS_OK && !r->grammar_on && is_trigger(r, t)) { /* a lazy grammar holds from the next token */
    st = fer_sampler_set_matcher(r->sampler, r->matcher);
    r->grammar_on = true;
  }
  if (st != FER_STATUS_OK) {
    fail_running(s, i, st);
    return;
  }
  if ((r->grammar_on && t == r->grammar_end) || is_stop(r, t)) {
    finish_running(s, i, FER_FINISH_STOP, t, FER_STATUS_OK, NULL);
    return;
  }
  r->tokens[r->n_prompt + r->n_gen++] = t;
  pthread_mutex_lock(&s->lock);
  s->stats.generated_tokens++;
  pthread_mutex_unlock(&s->lock);
  fer_scheduler_event *ev = event_push(s, r, FER_EVENT_TOKEN);
  if (ev) {
    ev->token = t;
    if (want_lp) report_logprobs(r, s->raw, V, t, ev);
  }
  if (r->n_gen == r->max_new) finish_running(s, i, FER_FINISH_LENGTH, -1, FER_STATUS_OK, NULL);
}

/* ---- cache-aware scheduling ------------------------------------------------------------------- */

/* Whole blocks of prompt a that prompt b starts with too. */
static uint32_t shared_prompt_blocks(const request *a, const request *b, uint32_t block) {
  const uint32_t n = a->n_prompt < b->n_prompt ? a->n_prompt : b->n_prompt;
  uint32_t t = 0;
  while (t < n && a->tokens[t] == b->tokens[t]) t++;
  return t / block;
}

/* Whether running request i, which has run nothing of its own yet, should wait: an earlier request
 * is still computing blocks of its prompt beyond what it took from the cache. They are cached when
 * that prompt has run (then refresh_prefix takes them), so they are computed once, not once per
 * request (SGLang's cache-aware scheduling, in its simplest form). */
static bool waits_for_prefix(const fer_scheduler *s, uint32_t i) {
  const request *r = s->running[i];
  const uint32_t block = s->o.prefix_block_tokens, takeable = (r->n_prompt - 1) / block;
  for (uint32_t j = 0; j < i; j++) {
    const request *q = s->running[j];
    if (q->n_fed >= q->n_prompt) continue; /* its prompt has run: its blocks are cached (or have no room) */
    uint32_t k = shared_prompt_blocks(r, q, block);
    if (k > takeable) k = takeable;
    if (k * block > r->n_cached) return true;
  }
  return false;
}

/* Gives request r, which has run nothing of its own yet, a longer cached prefix when the cache has
 * one now (another request's prompt has run meanwhile). Asked only when entries were added since r
 * last looked, so a request waiting for a long prefix does not rehash its prompt every step. Best
 * effort: on any failure r keeps its sequence. */
static void refresh_prefix(fer_scheduler *s, request *r) {
  const uint64_t inserts = feri_prefix_cache_inserts(s->prefix);
  if (inserts == r->cache_inserts_seen) return;
  r->cache_inserts_seen = inserts;
  const fer_kv_seq *hit = NULL;
  const uint32_t cached = feri_prefix_cache_lookup(s->prefix, r->tokens, r->n_prompt, r->n_prompt - 1, &hit);
  if (cached <= r->n_cached) return;
  feri_error_stash keep;
  feri_error_save(&keep);
  fer_kv_seq *kv = NULL;
  feri_llama_seq *seq = NULL;
  fer_status st = feri_llama_kv_seq_fork(s->e->model, hit, cached, &kv);
  if (st == FER_STATUS_OK) st = feri_llama_seq_create_on(s->e->model, kv, cached, r->n_prompt + r->max_new, &seq);
  if (st != FER_STATUS_OK) {
    feri_llama_kv_seq_free(s->e->model, kv);
    feri_error_restore(&keep, FER_STATUS_OK);
    return;
  }
  feri_llama_seq_free(r->seq);
  r->seq = seq;
  pthread_mutex_lock(&s->lock);
  if (r->n_cached == 0) s->stats.cache_hits++, s->stats.cache_misses--; /* its miss turned into a hit */
  s->stats.cache_hit_tokens += cached - r->n_cached;
  pthread_mutex_unlock(&s->lock);
  r->n_fed = r->n_cached = cached;
}

/* Copies what only the step thread may read (the cache, the pool, the sequences) into the counters
 * other threads read. */
static void snapshot(fer_scheduler *s) {
  feri_prefix_cache_stats pc = {0};
  if (s->prefix) feri_prefix_cache_get_stats(s->prefix, &pc);
  fer_vmm_stats vs;
  fer_vmm_get_stats(s->vmm, &vs);
  uint64_t live = 0;
  for (uint32_t i = 0; i < s->n_running; i++) {
    const fer_kv_seq *kv = feri_llama_seq_kv(s->running[i]->seq);
    fer_kv_seq_stats k;
    fer_kv_seq_sharing sh;
    if (fer_kv_seq_get_stats(kv, &k) == FER_STATUS_OK && fer_kv_seq_get_sharing(kv, &sh) == FER_STATUS_OK)
      live += k.committed_bytes + sh.shared_windows * s->granule; /* its own windows and the cache's it maps */
  }
  pthread_mutex_lock(&s->lock);
  s->stats.cache_entries = pc.entries, s->stats.cache_blocks = pc.blocks, s->stats.cache_bytes = pc.bytes;
  s->stats.cache_evictions = pc.evictions;
  s->stats.kv_physical_bytes = vs.ledger_bytes, s->stats.kv_live_bytes = live, s->stats.kv_os_bytes = vs.os_bytes;
  pthread_mutex_unlock(&s->lock);
}

fer_status fer_scheduler_step(fer_scheduler *s, fer_scheduler_step_info *out_info) {
  static const char *const fn = "fer_scheduler_step";
  feri_error_clear();
  if (out_info != NULL) memset(out_info, 0, sizeof *out_info);
  if (s == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: scheduler is NULL", fn);
  fer_status st = sched_enter(s, fn);
  if (st != FER_STATUS_OK) return st;
  fer_engine *e = s->e;
  if ((st = feri_engine_enter(e, fn)) != FER_STATUS_OK) return sched_leave(s, st);
  const size_t events_before = s->n_ev - s->ev_head;
  feri_llama_tp_keepalive(e->model); /* tensor or pipeline parallel, idle: rank 0 is alive */
  admit(s);
  /* running requests cancelled since the last step end here, before the pass */
  for (uint32_t i = 0; i < s->n_running;) {
    if (atomic_load(&s->running[i]->cancel)) finish_running(s, i, FER_FINISH_CANCELLED, -1, FER_STATUS_OK, NULL);
    else i++;
  }
  /* the pass: every decoding request's pending token, then prompt chunks in admission order */
  uint32_t n_segs = 0, rows = 0, decode_rows = 0, prefill_rows = 0;
  for (uint32_t i = 0; i < s->n_running; i++) {
    request *r = s->running[i];
    if (r->n_fed < r->n_prompt) continue;
    s->segs[n_segs] = (feri_llama_segment){r->seq, &r->tokens[r->n_fed], 1, true};
    s->seg_req[n_segs++] = r;
    rows++, decode_rows++;
  }
  for (uint32_t i = 0; i < s->n_running && rows < s->o.step_tokens; i++) {
    request *r = s->running[i];
    if (r->n_fed >= r->n_prompt) continue;
    if (s->prefix != NULL && r->n_fed == r->n_cached) {
      refresh_prefix(s, r);
      if (waits_for_prefix(s, i)) continue;
    }
    uint32_t k = r->n_prompt - r->n_fed;
    if (k > s->o.step_tokens - rows) k = s->o.step_tokens - rows;
    s->segs[n_segs] = (feri_llama_segment){r->seq, &r->tokens[r->n_fed], k, r->n_fed + k == r->n_prompt};
    s->seg_req[n_segs++] = r;
    rows += k, prefill_rows += k;
  }
  if (n_segs > 0) {
    /* tensor parallelism: the ranks draw the tokens together when every draw of the step is
     * greedy or plain sampling and one is sampled (model/tp_draw.h); else they send their best
     * candidates instead of their logits when every draw needs no more (model/tp_candidates.h) */
    uint32_t k = 0, n_draw = 0;
    bool whole = false, drawable = true, sampled = false;
    for (uint32_t g = 0; g < n_segs; g++) {
      if (!s->segs[g].logits) continue;
      const request *r = s->seg_req[g];
      whole |= r->tp_candidates == 0;
      k = r->tp_candidates > k ? r->tp_candidates : k;
      drawable &= r->tp_drawable;
      sampled |= r->tp_drawable && r->temperature != 0.0f;
      /* the uniform the sampler takes for this token (sampler.c: feri_uniform of seed and count) */
      s->draw_t[n_draw] = r->temperature, s->draw_u[n_draw++] = feri_uniform(r->seed, r->n_gen, 0);
    }
    feri_llama_batch_set_candidates(s->batch, whole ? 0 : k);
    feri_llama_batch_set_draws(s->batch, s->draw_t, s->draw_u, drawable && sampled ? n_draw : 0);
    st = feri_llama_forward_mixed(s->batch, e->pool, s->segs, n_segs, s->logits);
    if (st != FER_STATUS_OK) { /* the pass failed: its requests end with the reason */
      char msg[192];
      size_t len;
      fer_last_error_message(msg, sizeof msg, &len);
      for (uint32_t g = 0; g < n_segs; g++)
        for (uint32_t i = 0; i < s->n_running; i++)
          if (s->running[i] == s->seg_req[g]) {
            finish_running(s, i, FER_FINISH_ERROR, -1, st, msg);
            break;
          }
    } else {
      uint32_t row = 0;
      for (uint32_t g = 0; g < n_segs; g++) {
        request *r = s->seg_req[g];
        r->n_fed += s->segs[g].n;
        if (!s->segs[g].logits) continue;
        /* a prompt just finished: its whole blocks are cached now, not when the request ends, so a
         * request with the same prefix admitted meanwhile maps them (the entry shares the request's
         * full windows; the request never writes below its prompt's end) */
        if (s->prefix != NULL && r->n_fed == r->n_prompt && r->n_gen == 0) cache_prefix(s, r, r->n_prompt);
        float *lg = s->logits + (size_t)row++ * e->info.n_vocab;
        for (uint32_t i = 0; i < s->n_running; i++)
          if (s->running[i] == r) {
            sample_one(s, i, lg);
            break;
          }
      }
    }
    pthread_mutex_lock(&s->lock);
    s->stats.steps++;
    s->stats.prefill_tokens += prefill_rows;
    s->stats.decode_tokens += decode_rows;
    pthread_mutex_unlock(&s->lock);
  }
  snapshot(s);
  if (out_info != NULL) {
    out_info->decode_tokens = decode_rows, out_info->prefill_tokens = prefill_rows;
    pthread_mutex_lock(&s->lock);
    out_info->running = s->n_running, out_info->queued = s->n_queued;
    pthread_mutex_unlock(&s->lock);
    out_info->events = (uint32_t)(s->n_ev - s->ev_head - events_before);
  }
  feri_error_clear();
  feri_engine_leave(e, FER_STATUS_OK);
  return sched_leave(s, FER_STATUS_OK);
}

/* ---- stats, cache, free -------------------------------------------------------------------------- */

fer_status fer_scheduler_get_stats(const fer_scheduler *cs, fer_scheduler_stats *out) {
  feri_error_clear();
  if (out != NULL) memset(out, 0, sizeof *out);
  if (cs == NULL || out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_scheduler_get_stats: NULL argument");
  fer_scheduler *s = (fer_scheduler *)cs; /* the lock is the only thing written */
  pthread_mutex_lock(&s->lock);
  *out = s->stats;
  out->running = s->n_running, out->queued = s->n_queued;
  pthread_mutex_unlock(&s->lock);
  return FER_STATUS_OK;
}

fer_status fer_scheduler_clear_cache(fer_scheduler *s) {
  static const char *const fn = "fer_scheduler_clear_cache";
  feri_error_clear();
  if (s == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: scheduler is NULL", fn);
  fer_status st = sched_enter(s, fn);
  if (st != FER_STATUS_OK) return st;
  if ((st = feri_engine_enter(s->e, fn)) != FER_STATUS_OK) return sched_leave(s, st);
  if (s->prefix) feri_prefix_cache_clear(s->prefix);
  snapshot(s);
  feri_engine_leave(s->e, FER_STATUS_OK);
  return sched_leave(s, FER_STATUS_OK);
}

fer_status fer_scheduler_free(fer_scheduler *s) {
  static const char *const fn = "fer_scheduler_free";
  feri_error_clear();
  if (s == NULL) return FER_STATUS_OK;
  fer_status st = sched_enter(s, fn);
  if (st != FER_STATUS_OK) return st;
  fer_engine *e = s->e;
  if ((st = feri_engine_enter(e, fn)) != FER_STATUS_OK) return sched_leave(s, st);
  /* unfinished requests are dropped with their events: nobody is left to read them */
  for (request *r = s->queue_head, *next; r; r = next) next = r->next, request_free(r);
  for (uint32_t i = 0; i < s->n_running; i++) {
    fer_governor_release(e->gov, FER_MEM_ROLE_KV, s->running[i]->admitted);
    request_free(s->running[i]);
  }
  s->queue_head = NULL, s->n_running = 0;
  e->reclaim = NULL, e->reclaim_ctx = NULL;
  sched_release(s);
  atomic_fetch_sub(&e->schedulers, 1);
  feri_error_clear();
  return feri_engine_leave(e, FER_STATUS_OK);
}
