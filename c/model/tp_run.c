/* tp_run.c: announcing rank 0's calls and replaying them on the other ranks (tp_run.h). */
#include "model/tp_run.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/status.h"
#include "model/model_internal.h"
#include "model/shared_kv.h"
#include "model/tp_draw.h"

/* One announcement. Up to eight token ids travel inside it (a decode step); more in a second
 * broadcast. */
typedef struct tp_msg {
  uint32_t kind, id, a, b;
  uint32_t payload_bytes;
  uint32_t pad;
  feri_llama_seq_options opts;
  int32_t inline_payload[8];
} tp_msg;

typedef struct tp_obj {
  void *obj; /* NULL: a free slot */
  void *aux; /* a KV cache's pool */
  int kind;  /* FERI_TP_OBJ_* */
  bool announced;
} tp_obj;

typedef struct feri_tp_link {
  pthread_mutex_t lock; /* rank 0: one announced call at a time, its collectives with it */
  bool leading;
  tp_obj *objs;
  uint32_t n_objs;
  feri_tp_traffic traffic;
  double last_call_s; /* rank 0: when it last announced a call (feri_llama_tp_keepalive) */
  bool kept_alive;    /* the other ranks: rank 0 sends keepalives, so an idle wait has a limit */
  char broken[512];   /* not empty: the ranks are out of step; every later call fails with this */
} feri_tp_link;

static double seconds_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

uint64_t feri_tp_fnv(uint64_t h, const void *data, size_t bytes) {
  const unsigned char *p = data;
  for (size_t i = 0; i < bytes; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

static void host_name(char *buf, size_t n) {
  if (gethostname(buf, n) != 0) snprintf(buf, n, "?");
  buf[n - 1] = '\0';
}

fer_status feri_tp_agree(feri_comm *c, fer_status mine, uint64_t checksum, const char *why) {
  /* what each rank tells the others: its status, checksum, host and reason */
  struct report {
    int32_t status;
    uint32_t pad;
    uint64_t checksum;
    char host[64];
    char why[184];
  } me, *all;
  memset(&me, 0, sizeof me);
  me.status = mine, me.checksum = checksum;
  host_name(me.host, sizeof me.host);
  snprintf(me.why, sizeof me.why, "%s", mine == FER_STATUS_OK ? "" : why ? why : "failed");
  const int p = feri_comm_size(c);
  all = calloc((size_t)p, sizeof *all);
  if (!all) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "tensor parallel: the start's reports");
  fer_status st = feri_comm_allgather(c, &me, sizeof me, all);
  if (st == FER_STATUS_OK) {
    for (int k = 0; k < p && st == FER_STATUS_OK; k++) {
      if (all[k].status != FER_STATUS_OK)
        st = feri_fail((fer_status)all[k].status, "tensor parallel: rank %d of %d on host %s could not open its share: %s", k,
                       p, all[k].host, all[k].why);
      else if (all[k].checksum != all[0].checksum)
        st = feri_fail(FER_STATUS_INVALID_ARG,
                       "tensor parallel: rank %d of %d on host %s opened a different model or options than rank 0 on %s "
                       "(checksum of the file's header and the options %016llx, rank 0's %016llx)",
                       k, p, all[k].host, all[0].host, (unsigned long long)all[k].checksum,
                       (unsigned long long)all[0].checksum);
    }
  }
  free(all);
  return st;
}

fer_status feri_tp_link_create(feri_llama *m) {
  m->link = calloc(1, sizeof *m->link);
  if (!m->link) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "tensor parallel: link");
  pthread_mutex_init(&m->link->lock, NULL);
  return FER_STATUS_OK;
}

void feri_tp_link_free(feri_llama *m) {
  if (!m->link) return;
  pthread_mutex_destroy(&m->link->lock);
  free(m->link->objs);
  free(m->link);
  m->link = NULL;
}

bool feri_tp_leading(const feri_llama *m) { return m->link && m->link->leading; }

void feri_llama_tp_ranks(const feri_llama *m, uint32_t *rank, uint32_t *size) {
  /* the job's ranks, tensor-parallel shares or pipeline stages alike */
  *rank = m->comm ? (uint32_t)feri_comm_rank(m->comm) : 0, *size = m->comm ? (uint32_t)feri_comm_size(m->comm) : 1;
}

void feri_llama_tp_traffic(const feri_llama *m, feri_tp_traffic *out) {
  memset(out, 0, sizeof *out);
  if (m->link) *out = m->link->traffic;
}

void feri_tp_count_pass(const feri_llama *m) {
  if (m->link && m->stages > 1) m->link->traffic.stage_passes++;
}

void feri_tp_count(const feri_llama *m, int purpose, const feri_comm_stats *before) {
  feri_tp_count_on(m, m->comm, purpose, before);
}

void feri_tp_count_on(const feri_llama *m, const feri_comm *c, int purpose, const feri_comm_stats *before) {
  if (!m->link) return;
  feri_comm_stats now;
  feri_comm_get_stats(c, &now);
  const uint64_t sent = now.bytes_sent - before->bytes_sent, received = now.bytes_received - before->bytes_received;
  feri_tp_traffic *t = &m->link->traffic;
  if (purpose == FERI_TP_COUNT_ALLREDUCE) t->allreduce_sent += sent, t->allreduce_received += received;
  else if (purpose == FERI_TP_COUNT_LOGITS) t->logits_bytes += sent + received;
  else if (purpose == FERI_TP_COUNT_STAGES) t->stage_bytes += sent + received;
  else t->call_bytes += sent + received;
}

fer_status feri_llama_tp_lead(feri_llama *m) {
  uint32_t rank, size;
  feri_llama_tp_ranks(m, &rank, &size);
  if (!m->link || rank != 0)
    return feri_fail(FER_STATUS_INVALID_ARG, "tensor parallel: only rank 0 of several leads (this is rank %u of %u)", rank,
                     size);
  m->link->leading = true;
  return FER_STATUS_OK;
}

fer_status feri_tp_register(const feri_llama *m, void *obj, int kind, void *aux, bool announced, uint32_t *id) {
  feri_tp_link *k = m->link;
  *id = 0;
  if (!k) return FER_STATUS_OK;
  uint32_t i = 0;
  while (i < k->n_objs && k->objs[i].obj) i++;
  if (i == k->n_objs) {
    tp_obj *o = realloc(k->objs, (k->n_objs + 1) * sizeof *o);
    if (!o) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "tensor parallel: object table");
    k->objs = o;
    k->n_objs++;
  }
  k->objs[i] = (tp_obj){obj, aux, kind, announced};
  *id = i;
  return FER_STATUS_OK;
}

void feri_tp_unregister(const feri_llama *m, uint32_t id) {
  if (m->link && id < m->link->n_objs) m->link->objs[id].obj = NULL;
}

uint32_t feri_tp_next_id(const feri_llama *m) {
  uint32_t i = 0;
  while (m->link && i < m->link->n_objs && m->link->objs[i].obj) i++;
  return i;
}

bool feri_tp_find(const feri_llama *m, const void *obj, int kind, uint32_t *id) {
  for (uint32_t i = 0; m->link && i < m->link->n_objs; i++)
    if (m->link->objs[i].obj == obj && m->link->objs[i].kind == kind) {
      *id = i;
      return true;
    }
  return false;
}

bool feri_tp_announced(const feri_llama *m, uint32_t id) {
  return m->link && id < m->link->n_objs && m->link->objs[id].obj && m->link->objs[id].announced;
}

void feri_tp_forget(const feri_llama *m, uint32_t id, uint32_t free_kind) {
  if (!m->link) return;
  if (feri_tp_leading(m) && feri_tp_announced(m, id) && feri_tp_announce(m, free_kind, id, 0, 0, NULL, NULL, 0) == FER_STATUS_OK)
    feri_tp_done(m);
  feri_tp_unregister(m, id);
}

void feri_tp_fatal(const feri_llama *m, const char *what, fer_status st) {
  char host[64], msg[512];
  size_t len = 0;
  host_name(host, sizeof host);
  if (fer_last_error_message(msg, sizeof msg, &len) != FER_STATUS_OK) msg[0] = '\0';
  const int rank = m->comm ? feri_comm_rank(m->comm) : 0, size = m->comm ? feri_comm_size(m->comm) : 1;
  fprintf(stderr, "ferrite: rank %d of %d on host %s cannot go on: %s: %s (%s)\n", rank, size, host, what,
          fer_status_str(st), msg);
  fflush(stderr);
  if (m->link && !m->link->broken[0])
    snprintf(m->link->broken, sizeof m->link->broken, "rank %d on host %.63s: %.100s: %.300s", rank, host, what, msg);
}

fer_status feri_tp_announce(const feri_llama *m, uint32_t kind, uint32_t id, uint32_t a, uint32_t b,
                            const feri_llama_seq_options *opts, const void *payload, size_t bytes) {
  if (bytes > UINT32_MAX) return feri_fail(FER_STATUS_INVALID_ARG, "tensor parallel: a call of %zu bytes", bytes);
  if (m->link->broken[0]) return feri_fail(FER_STATUS_DEVICE_ERROR, "%s", m->link->broken);
  tp_msg msg;
  memset(&msg, 0, sizeof msg);
  msg.kind = kind, msg.id = id, msg.a = a, msg.b = b, msg.payload_bytes = (uint32_t)bytes;
  if (opts) msg.opts = *opts;
  if (bytes <= sizeof msg.inline_payload && bytes) memcpy(msg.inline_payload, payload, bytes);
  pthread_mutex_lock(&m->link->lock);
  feri_comm_stats before;
  feri_comm_get_stats(m->comm, &before);
  m->link->last_call_s = seconds_now();
  fer_status st = feri_comm_broadcast(m->comm, &msg, sizeof msg, 0);
  if (st == FER_STATUS_OK && bytes > sizeof msg.inline_payload) st = feri_comm_broadcast(m->comm, (void *)payload, bytes, 0);
  feri_tp_count(m, FERI_TP_COUNT_CALLS, &before);
  if (st != FER_STATUS_OK) {
    /* a half-sent call leaves the ranks out of step: nothing can go on */
    feri_tp_fatal(m, "announcing a call to the other ranks", st);
    pthread_mutex_unlock(&m->link->lock);
  }
  return st;
}

void feri_tp_done(const feri_llama *m) { pthread_mutex_unlock(&m->link->lock); }

void feri_llama_tp_keepalive(const feri_llama *m) {
  if (!feri_tp_leading(m) || m->link->broken[0] || seconds_now() - m->link->last_call_s < FERI_TP_KEEPALIVE_S) return;
  if (feri_tp_announce(m, FERI_TP_KEEPALIVE, 0, 0, 0, NULL, NULL, 0) == FER_STATUS_OK) feri_tp_done(m);
}

/* This rank's KV ledger: the granule pools its live objects own. */
static uint64_t kv_bytes_here(const feri_llama *m) {
  uint64_t bytes = 0;
  for (uint32_t i = 0; m->link && i < m->link->n_objs; i++) {
    const tp_obj *o = &m->link->objs[i];
    const fer_vmm *vmm = !o->obj                         ? NULL
                         : o->kind == FERI_TP_OBJ_SEQ      ? ((const feri_llama_seq *)o->obj)->vmm /* NULL: on a shared cache */
                         : o->kind == FERI_TP_OBJ_KV_CACHE ? o->aux
                                                           : NULL;
    fer_vmm_stats vs;
    if (vmm && fer_vmm_get_stats(vmm, &vs) == FER_STATUS_OK) bytes += vs.ledger_bytes;
  }
  return bytes;
}

fer_status feri_llama_tp_kv_bytes(const feri_llama *m, uint64_t *per_rank, uint32_t n) {
  uint32_t rank, size;
  feri_llama_tp_ranks(m, &rank, &size);
  for (uint32_t r = 0; per_rank && r < n; r++) per_rank[r] = 0;
  if (!per_rank || n < size || rank != 0)
    return feri_fail(FER_STATUS_INVALID_ARG, "tensor parallel: KV bytes of %u ranks into %u entries, asked on rank %u", size,
                     per_rank ? n : 0, rank);
  const uint64_t mine = kv_bytes_here(m);
  if (!feri_tp_leading(m)) {
    per_rank[0] = mine;
    return FER_STATUS_OK;
  }
  uint64_t *all = calloc(size, sizeof *all); /* before the call: the ranks then answer into it */
  if (!all) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "tensor parallel: KV bytes of %u ranks", size);
  fer_status st = feri_tp_announce(m, FERI_TP_KV_BYTES, 0, 0, 0, NULL, NULL, 0);
  if (st == FER_STATUS_OK) {
    st = feri_comm_gather(m->comm, &mine, sizeof mine, all, 0);
    if (st == FER_STATUS_OK) memcpy(per_rank, all, size * sizeof *all);
    else feri_tp_fatal(m, "gathering the ranks' KV bytes", st); /* a rank went missing mid-call */
    feri_tp_done(m);
  }
  free(all);
  return st;
}

/* ---- the other ranks -------------------------------------------------------------------------- */

static void *lookup(const feri_llama *m, uint32_t id, int kind) {
  const feri_tp_link *k = m->link;
  return id < k->n_objs && k->objs[id].obj && k->objs[id].kind == kind ? k->objs[id].obj : NULL;
}

/* A replayed creation got the id rank 0 announced (the ranks assign ids alike), and is marked as
 * the announcement's (freed by the serve loop's end if rank 0 never frees it). */
static fer_status same_id(const feri_llama *m, uint32_t got, uint32_t want, const char *what) {
  if (got != want) return feri_fail(FER_STATUS_MISUSE, "tensor parallel: %s id %u here, %u on rank 0", what, got, want);
  m->link->objs[got].announced = true;
  return FER_STATUS_OK;
}

/* The KV calls of shared_kv.h on this rank (the payload of a cache's creation: rank 0's pool and
 * cache options and its KV heads). */
static fer_status replay_kv(feri_llama *m, const tp_msg *msg, const void *payload) {
  switch (msg->kind) {
    case FERI_TP_KV_CACHE_CREATE: {
      fer_vmm_options vo;
      fer_kv_cache_options ko;
      uint32_t heads0;
      memcpy(&vo, payload, sizeof vo);
      memcpy(&ko, (const char *)payload + sizeof vo, sizeof ko);
      memcpy(&heads0, (const char *)payload + sizeof vo + sizeof ko, sizeof heads0);
      /* this rank's KV heads and layers, and a pool scaled to the heads */
      ko.geometry.n_kv_heads = m->Hkv;
      ko.geometry.n_layers = m->l1 - m->l0;
      if (m->Hkv > heads0) vo.max_granules = vo.max_granules * ((m->Hkv + heads0 - 1) / heads0);
      fer_vmm *vmm = NULL;
      fer_kv_cache *cache = NULL;
      fer_status st = feri_llama_kv_cache_create(m, &vo, &ko, &vmm, &cache);
      uint32_t id = 0;
      if (st == FER_STATUS_OK) st = feri_tp_find(m, cache, FERI_TP_OBJ_KV_CACHE, &id) ? FER_STATUS_OK : FER_STATUS_MISUSE;
      return st == FER_STATUS_OK ? same_id(m, id, msg->id, "KV cache") : st;
    }
    case FERI_TP_KV_SEQ_CREATE:
    case FERI_TP_KV_SEQ_FORK: {
      fer_kv_seq *kv = NULL;
      const bool fork = msg->kind == FERI_TP_KV_SEQ_FORK;
      void *from = lookup(m, msg->a, fork ? FERI_TP_OBJ_KV_SEQ : FERI_TP_OBJ_KV_CACHE);
      if (!from) return feri_fail(FER_STATUS_MISUSE, "tensor parallel: KV object %u is unknown here", msg->a);
      fer_status st = fork ? feri_llama_kv_seq_fork(m, from, msg->b, &kv) : feri_llama_kv_seq_create(m, from, &kv);
      uint32_t id = 0;
      if (st == FER_STATUS_OK) st = feri_tp_find(m, kv, FERI_TP_OBJ_KV_SEQ, &id) ? FER_STATUS_OK : FER_STATUS_MISUSE;
      return st == FER_STATUS_OK ? same_id(m, id, msg->id, "KV sequence") : st;
    }
    case FERI_TP_SEQ_CREATE_ON: {
      fer_kv_seq *kv = lookup(m, msg->a, FERI_TP_OBJ_KV_SEQ);
      if (!kv) return feri_fail(FER_STATUS_MISUSE, "tensor parallel: KV sequence %u is unknown here", msg->a);
      feri_llama_seq *s = NULL;
      uint32_t len, max_tokens;
      memcpy(&len, payload, 4), memcpy(&max_tokens, (const char *)payload + 4, 4);
      fer_status st = feri_llama_seq_create_on(m, kv, len, max_tokens, &s);
      return st == FER_STATUS_OK ? same_id(m, s->tp_id, msg->id, "sequence") : st;
    }
    case FERI_TP_KV_SEQ_FREE: {
      fer_kv_seq *kv = lookup(m, msg->id, FERI_TP_OBJ_KV_SEQ);
      if (!kv) return feri_fail(FER_STATUS_MISUSE, "tensor parallel: KV sequence %u is unknown here", msg->id);
      feri_llama_kv_seq_free(m, kv);
      return FER_STATUS_OK;
    }
    default: { /* FERI_TP_KV_CACHE_FREE */
      fer_kv_cache *cache = lookup(m, msg->id, FERI_TP_OBJ_KV_CACHE);
      if (!cache) return feri_fail(FER_STATUS_MISUSE, "tensor parallel: KV cache %u is unknown here", msg->id);
      feri_llama_kv_cache_free(m, cache, m->link->objs[msg->id].aux);
      return FER_STATUS_OK;
    }
  }
}

/* One announced call. */
static fer_status replay(feri_llama *m, fer_threadpool *pool, const tp_msg *msg, const void *payload) {
  switch (msg->kind) {
    case FERI_TP_SEQ_CREATE: {
      feri_llama_seq *s = NULL;
      fer_status st = feri_llama_seq_create(m, msg->a, &msg->opts, &s);
      if (st != FER_STATUS_OK) return st;
      return same_id(m, s->tp_id, msg->id, "sequence");
    }
    case FERI_TP_BATCH_CREATE: {
      feri_llama_batch *b = NULL;
      fer_status st = feri_llama_batch_create(m, msg->a, &b);
      if (st != FER_STATUS_OK) return st;
      return same_id(m, b->tp_id, msg->id, "batch");
    }
    case FERI_TP_KV_CACHE_CREATE:
    case FERI_TP_KV_CACHE_FREE:
    case FERI_TP_KV_SEQ_CREATE:
    case FERI_TP_KV_SEQ_FORK:
    case FERI_TP_KV_SEQ_FREE:
    case FERI_TP_SEQ_CREATE_ON: return replay_kv(m, msg, payload);
    case FERI_TP_KV_BYTES: {
      const uint64_t mine = kv_bytes_here(m);
      return feri_comm_gather(m->comm, &mine, sizeof mine, NULL, 0);
    }
    default: break;
  }
  const bool batch = msg->kind == FERI_TP_BATCH_FREE || msg->kind == FERI_TP_MIXED;
  void *obj = lookup(m, msg->id, batch ? FERI_TP_OBJ_BATCH : FERI_TP_OBJ_SEQ);
  if (!obj) return feri_fail(FER_STATUS_MISUSE, "tensor parallel: call %u names %s %u, unknown here", msg->kind,
                             batch ? "batch" : "sequence", msg->id);
  switch (msg->kind) {
    case FERI_TP_SEQ_FREE: feri_llama_seq_free(obj); return FER_STATUS_OK;
    case FERI_TP_BATCH_FREE: feri_llama_batch_free(obj); return FER_STATUS_OK;
    case FERI_TP_REWIND: return feri_llama_seq_rewind(obj, msg->a);
    case FERI_TP_RELEASE: return feri_forward_release(obj);
    case FERI_TP_STEP: return feri_forward_chunk(obj, pool, payload, msg->a, NULL, (int)msg->b);
    case FERI_TP_MIXED: {
      /* the payload: the micro-batches, n_segs x (sequence id, tokens, logits wanted), then the ids */
      const uint32_t n_segs = msg->a, *seg = (const uint32_t *)payload + 1;
      feri_llama_segment *segs = calloc(n_segs, sizeof *segs);
      if (!segs) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "tensor parallel: segments");
      const int32_t *ids = (const int32_t *)(seg + 3 * n_segs);
      fer_status st = FER_STATUS_OK;
      for (uint32_t i = 0; i < n_segs && st == FER_STATUS_OK; i++) {
        segs[i] = (feri_llama_segment){lookup(m, seg[3 * i], FERI_TP_OBJ_SEQ), ids, seg[3 * i + 1], seg[3 * i + 2] != 0};
        if (!segs[i].seq) st = feri_fail(FER_STATUS_MISUSE, "tensor parallel: segment %u's sequence %u is unknown", i, seg[3 * i]);
        ids += segs[i].n;
      }
      /* as rank 0 asked for this step: candidates, or draws (each selected row's temperature and
       * uniform follow the ids) */
      feri_llama_batch *b = obj;
      feri_llama_batch_set_candidates(b, msg->b == FERI_TP_DRAW ? 0 : msg->b);
      b->n_draw = 0;
      if (msg->b == FERI_TP_DRAW && st == FER_STATUS_OK) {
        uint32_t selected = 0;
        for (uint32_t i = 0; i < n_segs; i++) selected += segs[i].logits;
        if (selected == 0 || selected > b->sc.rows)
          st = feri_fail(FER_STATUS_MISUSE, "tensor parallel: a draw of %u rows", selected);
        else {
          memcpy(b->draw_t, ids, selected * sizeof *b->draw_t);
          memcpy(b->draw_u, (const char *)ids + selected * sizeof *b->draw_t, selected * sizeof *b->draw_u);
          b->n_draw = selected;
        }
      }
      feri_llama_batch_set_micro_batches(obj, *(const uint32_t *)payload);
      if (st == FER_STATUS_OK) st = feri_forward_mixed_run(obj, pool, segs, n_segs, NULL);
      free(segs);
      return st;
    }
    default: return feri_fail(FER_STATUS_MISUSE, "tensor parallel: unknown call %u", msg->kind);
  }
}

fer_status feri_llama_tp_serve(feri_llama *m, fer_threadpool *pool) {
  uint32_t rank, size;
  feri_llama_tp_ranks(m, &rank, &size);
  if (!m->link || rank == 0)
    return feri_fail(FER_STATUS_INVALID_ARG, "tensor parallel: rank 0 leads, it does not serve (this is rank %u of %u)", rank,
                     size);
  void *payload = NULL;
  size_t cap = 0;
  fer_status st = FER_STATUS_OK;
  for (;;) {
    tp_msg msg;
    feri_comm_stats before;
    feri_comm_get_stats(m->comm, &before);
    /* rank 0 may idle as long as it likes between calls, unless it promised keepalives */
    feri_comm_set_timeout(m->comm, m->link->kept_alive ? m->tp_timeout_s : 0);
    st = feri_comm_broadcast(m->comm, &msg, sizeof msg, 0);
    feri_comm_set_timeout(m->comm, m->tp_timeout_s);
    if (st != FER_STATUS_OK) {
      feri_tp_fatal(m, "waiting for rank 0's next call", st);
      break;
    }
    if (msg.kind == FERI_TP_CLOSE) break;
    if (msg.kind == FERI_TP_KEEPALIVE) {
      m->link->kept_alive = true;
      feri_tp_count(m, FERI_TP_COUNT_CALLS, &before);
      continue;
    }
    const void *data = msg.inline_payload;
    if (msg.payload_bytes > sizeof msg.inline_payload) {
      if (msg.payload_bytes > cap) {
        void *p = realloc(payload, msg.payload_bytes);
        if (!p) {
          st = feri_fail(FER_STATUS_OUT_OF_MEMORY, "tensor parallel: a call of %u bytes", msg.payload_bytes);
          feri_tp_fatal(m, "receiving rank 0's call", st);
          break;
        }
        payload = p, cap = msg.payload_bytes;
      }
      st = feri_comm_broadcast(m->comm, payload, msg.payload_bytes, 0);
      if (st != FER_STATUS_OK) {
        feri_tp_fatal(m, "receiving rank 0's call", st);
        break;
      }
      data = payload;
    }
    feri_tp_count(m, FERI_TP_COUNT_CALLS, &before);
    st = replay(m, pool, &msg, data);
    if (st != FER_STATUS_OK) {
      feri_tp_fatal(m, "making rank 0's call", st);
      break;
    }
  }
  free(payload);
  /* what the announcements made and rank 0 did not free (it closed with them alive): sequences
   * before the KV caches they live on */
  static const int order[4] = {FERI_TP_OBJ_SEQ, FERI_TP_OBJ_KV_SEQ, FERI_TP_OBJ_BATCH, FERI_TP_OBJ_KV_CACHE};
  for (int k = 0; k < 4; k++) {
    for (uint32_t i = 0; i < m->link->n_objs; i++) {
      tp_obj *o = &m->link->objs[i];
      if (!o->obj || !o->announced || o->kind != order[k]) continue;
      if (o->kind == FERI_TP_OBJ_SEQ) feri_llama_seq_free(o->obj);
      else if (o->kind == FERI_TP_OBJ_KV_SEQ) feri_llama_kv_seq_free(m, o->obj);
      else if (o->kind == FERI_TP_OBJ_BATCH) feri_llama_batch_free(o->obj);
      else feri_llama_kv_cache_free(m, o->obj, o->aux);
    }
  }
  return st;
}
