/* tp_run.h: the ranks of a tensor-parallel model kept in step (issue 33).
 *
 * Rank 0 runs everything a user sees (the engine, `ferrite generate`). Each call on it that
 * changes a sequence or runs a step (a sequence or batch created or freed, a rewind, a sliding
 * window's release, a prefill chunk or decode step, a mixed step) is first announced to the other
 * ranks (a broadcast of the call and its token ids), which make the same call on their share of
 * the model in feri_llama_tp_serve. So every rank's all-reduces meet in the same order, and the
 * other ranks never need their own scheduler or sampler. Objects are named by ids every rank
 * assigns alike (the lowest free slot, in the order of creation).
 *
 * Faults: inside a step every rank waits for another at most the model's timeout
 * (feri_llama_options.tp_timeout_s, FERI_TP_TIMEOUT_S by default; feri_comm_set_timeout). A rank
 * that dies or fails inside a step so ends the step on the others with DEVICE_ERROR naming it,
 * and the model is broken for good: on rank 0 every later call fails at once with that message
 * (its caller answers what it serves with the error and ends); the other ranks return it from
 * feri_llama_tp_serve. Every rank prints its rank, host and the reason when it breaks. Waiting
 * for rank 0's next call has no limit (an idle server is not a fault). */
#ifndef FERI_MODEL_TP_RUN_H
#define FERI_MODEL_TP_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"
#include "ferrite.h"
#include "model/llama.h"

/* At open, on every rank: each rank's status and checksum (of the file's header and the
 * options) to every rank; all fail together, the message naming the first rank that failed (its
 * host and reason) or differs. `why`: this rank's message when `mine` is not OK. */
fer_status feri_tp_agree(feri_comm *c, fer_status mine, uint64_t checksum, const char *why);

/* FNV-1a, 64 bits, continued from h (start with FERI_TP_FNV_START). */
uint64_t feri_tp_fnv(uint64_t h, const void *data, size_t bytes);
#define FERI_TP_FNV_START 0xcbf29ce484222325ull

/* Rank 0 of a model opened with several ranks: from now on its calls are announced (what every
 * rank made alike before, such as an engine's own batch, stays local to each). INVALID_ARG on
 * another rank or in one process. */
fer_status feri_llama_tp_lead(feri_llama *m);

/* Ranks other than 0: makes rank 0's announced calls until it closes its model, then frees what
 * the announcements made and returns OK. INVALID_ARG on rank 0 or in one process. */
fer_status feri_llama_tp_serve(feri_llama *m, fer_threadpool *pool);

/* This rank and the ranks' count (0 and 1 in one process). */
void feri_llama_tp_ranks(const feri_llama *m, uint32_t *rank, uint32_t *size);

/* Rank 0, idle: tells the other ranks it is alive when it has announced nothing for
 * FERI_TP_KEEPALIVE_S (a no-op otherwise, in one process, and on the other ranks). Once rank 0
 * has sent one, a rank waiting for its next call gives up after the step timeout
 * (feri_llama_options.tp_timeout_s) as it does within a step: so a rank 0 that dies while idle
 * ends the others too, where they would otherwise wait forever. The scheduler calls it at every
 * step, and ferrite-serve steps at least once a second while idle. Failures are left for the next
 * call to report. */
enum { FERI_TP_KEEPALIVE_S = 1 };
void feri_llama_tp_keepalive(const feri_llama *m);

/* This rank's traffic since the model opened, by purpose (zeros in one process): the all-reduces'
 * payload sent and received, the logits slices sent or received, the announcements of calls. */
typedef struct feri_tp_traffic {
  uint64_t allreduce_sent, allreduce_received, logits_bytes, call_bytes;
  uint64_t stage_bytes;  /* pipeline: a stage's rows sent and received */
  uint64_t stage_passes; /* pipeline: passes through this rank's layers (each micro-batch one) */
} feri_tp_traffic;
void feri_llama_tp_traffic(const feri_llama *m, feri_tp_traffic *out);

/* Every rank's KV memory, as its granule pools' ledgers count it (live granules x granule bytes,
 * fer_vmm_stats.ledger_bytes): the pools of its sequences and of its shared KV caches. Rank 0
 * leading: an announced call every rank answers, per_rank[r] for rank r < n (the rest zero); in one
 * process or before leading, per_rank[0] alone. INVALID_ARG for n below the ranks' count (per_rank
 * zeroed), or on another rank. What shows that admission's charge (feri_llama_kv_charge_geometry)
 * bounds every rank. */
fer_status feri_llama_tp_kv_bytes(const feri_llama *m, uint64_t *per_rank, uint32_t n);

/* ---- for llama.c and forward.c ---- */

enum {
  FERI_TP_CLOSE = 1,
  FERI_TP_SEQ_CREATE,
  FERI_TP_SEQ_FREE,
  FERI_TP_REWIND,
  FERI_TP_RELEASE,
  FERI_TP_STEP,
  FERI_TP_BATCH_CREATE,
  FERI_TP_BATCH_FREE,
  FERI_TP_MIXED,
  FERI_TP_KV_CACHE_CREATE, /* shared_kv.h */
  FERI_TP_KV_CACHE_FREE,
  FERI_TP_KV_SEQ_CREATE,
  FERI_TP_KV_SEQ_FORK,
  FERI_TP_KV_SEQ_FREE,
  FERI_TP_SEQ_CREATE_ON,
  FERI_TP_KEEPALIVE,
  FERI_TP_KV_BYTES /* feri_llama_tp_kv_bytes */
};

/* What a registered object is. */
enum { FERI_TP_OBJ_SEQ, FERI_TP_OBJ_BATCH, FERI_TP_OBJ_KV_CACHE, FERI_TP_OBJ_KV_SEQ };

/* The link every rank of a several-rank model holds (created at open). */
fer_status feri_tp_link_create(feri_llama *m);
void feri_tp_link_free(feri_llama *m);

/* True on rank 0 once it leads: its calls must be announced. */
bool feri_tp_leading(const feri_llama *m);

/* Rank 0: takes the link's lock and broadcasts a call (kind, object id, two numbers, sequence
 * options for a creation, a payload of token ids or segments). On OK the caller makes the call
 * and then calls feri_tp_done; on failure nothing was sent and the lock is not held. */
fer_status feri_tp_announce(const feri_llama *m, uint32_t kind, uint32_t id, uint32_t a, uint32_t b,
                            const feri_llama_seq_options *opts, const void *payload, size_t bytes);
void feri_tp_done(const feri_llama *m);

/* Every rank: names an object (FERI_TP_OBJ_*; aux: a KV cache's pool) by the lowest free id;
 * forgets it; finds the id of an object (rank 0: the ids it announces). */
fer_status feri_tp_register(const feri_llama *m, void *obj, int kind, void *aux, bool announced, uint32_t *id);
void feri_tp_unregister(const feri_llama *m, uint32_t id);
bool feri_tp_find(const feri_llama *m, const void *obj, int kind, uint32_t *id);
/* The id the next registration gets (what rank 0 announces before it makes the object). */
uint32_t feri_tp_next_id(const feri_llama *m);
/* Was object id made by an announcement (so that its free is announced too)? */
bool feri_tp_announced(const feri_llama *m, uint32_t id);
/* An object's free on every rank: rank 0 announces it (kind FERI_TP_*_FREE) when the object was
 * announced, then every rank forgets the id. Nothing in one process. */
void feri_tp_forget(const feri_llama *m, uint32_t id, uint32_t free_kind);

/* One pass through a pipeline stage's layers (feri_tp_traffic.stage_passes). */
void feri_tp_count_pass(const feri_llama *m);

/* Adds what the communicator counted since `before` to the traffic of a purpose. */
enum { FERI_TP_COUNT_ALLREDUCE, FERI_TP_COUNT_LOGITS, FERI_TP_COUNT_CALLS, FERI_TP_COUNT_STAGES };
void feri_tp_count(const feri_llama *m, int purpose, const feri_comm_stats *before);
/* The same for a communicator of the model's other than its own (a stage's ranks, tp_comm). */
void feri_tp_count_on(const feri_llama *m, const struct feri_comm *c, int purpose, const feri_comm_stats *before);

/* A rank that cannot go on inside a step: prints its rank, host and the reason, and breaks the
 * model (rank 0: later calls fail at once). */
void feri_tp_fatal(const feri_llama *m, const char *what, fer_status st);

enum { FERI_TP_TIMEOUT_S = 30 };

#endif
