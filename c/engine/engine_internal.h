/* engine_internal.h: the engine's state, for the parts built over it (c/sched: the scheduler runs
 * requests on the engine's model, pool and governor). Contract of the public calls in ferrite.h. */
#ifndef FERI_ENGINE_ENGINE_INTERNAL_H
#define FERI_ENGINE_ENGINE_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "ferrite.h"
#include "comm/comm.h"
#include "model/llama.h"

struct fer_engine {
  fer_engine_config cfg; /* effective; model_path points to path_copy */
  char *path_copy;
  feri_llama *model;
  feri_comm *comm;         /* tensor parallelism: the job's ranks (NULL: one process) */
  fer_tokenizer *tok;
  fer_threadpool *pool;
  fer_governor *gov;
  feri_llama_batch *batch;
  feri_llama_seq_options seq_opts;
  fer_chat_template *chat; /* NULL: none (chat_status and chat_error say why) */
  fer_status chat_status;
  char chat_error[640];
  char *chat_path_copy;    /* cfg.chat_template_path's copy */
  /* the BOS and EOS texts encoding with FER_ENCODE_ADD_SPECIAL adds itself, which a render's text
   * loses at its start and end ("": the tokenizer adds none) */
  char chat_added_bos[128], chat_added_eos[128];
  fer_model_info info;
  float *scratch_logits; /* a prefill's logits when the caller wants none */
  uint32_t live_seqs;
  _Atomic int schedulers; /* fer_scheduler_create / _free: the engine cannot be freed under one */
  /* Releases memory charged to the governor that may be dropped (the scheduler's cached prefixes,
   * least recently used first) when an admission is refused; true when something was released.
   * Called under the engine's guard, which is what guards the cache too. NULL: nothing to drop. */
  bool (*reclaim)(void *ctx);
  void *reclaim_ctx;
  _Atomic int in_use;
};

/* One call at a time per engine: the guard of every call that runs or changes state (BUSY naming
 * fn when another thread is inside). */
fer_status feri_engine_enter(fer_engine *e, const char *fn);
/* Leaves the guard; returns st. */
fer_status feri_engine_leave(fer_engine *e, fer_status st);

#endif
