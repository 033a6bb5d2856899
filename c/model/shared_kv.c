/* shared_kv.c: a shared KV cache's calls, announced to the other tensor-parallel ranks on rank 0
 * (shared_kv.h, tp_run.h): rank 0 announces the id the new object will get (every rank assigns
 * ids alike), then makes it; the other ranks make the same in tp_run.c's replay. */
#include "model/shared_kv.h"

#include <string.h>

#include "core/status.h"
#include "model/model_internal.h"
#include "model/tp_run.h"

/* Rank 0 of several: a call the others make too; a failure of its own after announcing it ends
 * the job (they have made theirs). */
static fer_status finish(const feri_llama *m, fer_status st, const char *what) {
  if (st != FER_STATUS_OK) feri_tp_fatal(m, what, st);
  feri_tp_done(m);
  return st;
}

/* Registers a new object on every rank of several (rank 0's as announced). */
static fer_status name(const feri_llama *m, void *obj, int kind, void *aux) {
  uint32_t id;
  return feri_tp_register(m, obj, kind, aux, feri_tp_leading(m), &id);
}

static fer_status cache_make(const feri_llama *m, const fer_vmm_options *vo, const fer_kv_cache_options *ko,
                             fer_vmm **vmm, fer_kv_cache **cache) {
  fer_status st = fer_vmm_create(vo, vmm);
  if (st == FER_STATUS_OK) st = fer_kv_cache_create(*vmm, ko, cache);
  if (st == FER_STATUS_OK) st = name(m, *cache, FERI_TP_OBJ_KV_CACHE, *vmm);
  if (st != FER_STATUS_OK) {
    feri_error_stash e;
    feri_error_save(&e);
    (void)fer_kv_cache_free(*cache);
    (void)fer_vmm_free(*vmm);
    *cache = NULL, *vmm = NULL;
    feri_error_restore(&e, st);
  }
  return st;
}

fer_status feri_llama_kv_cache_create(const feri_llama *m, const fer_vmm_options *vo, const fer_kv_cache_options *ko,
                                      fer_vmm **out_vmm, fer_kv_cache **out_cache) {
  *out_vmm = NULL, *out_cache = NULL;
  if (!feri_tp_leading(m)) return cache_make(m, vo, ko, out_vmm, out_cache);
  /* the other ranks' caches hold their own KV heads: they scale the pool from rank 0's */
  char payload[sizeof *vo + sizeof *ko + sizeof(uint32_t)];
  memcpy(payload, vo, sizeof *vo);
  memcpy(payload + sizeof *vo, ko, sizeof *ko);
  memcpy(payload + sizeof *vo + sizeof *ko, &m->Hkv, sizeof m->Hkv);
  fer_status st = feri_tp_announce(m, FERI_TP_KV_CACHE_CREATE, feri_tp_next_id(m), 0, 0, NULL, payload, sizeof payload);
  if (st != FER_STATUS_OK) return st;
  return finish(m, cache_make(m, vo, ko, out_vmm, out_cache), "creating a shared KV cache");
}

void feri_llama_kv_cache_free(const feri_llama *m, fer_kv_cache *cache, fer_vmm *vmm) {
  uint32_t id;
  if (cache && feri_tp_find(m, cache, FERI_TP_OBJ_KV_CACHE, &id)) feri_tp_forget(m, id, FERI_TP_KV_CACHE_FREE);
  (void)fer_kv_cache_free(cache);
  (void)fer_vmm_free(vmm);
}

/* A new KV sequence of cache (src NULL) or a fork of src's first n tokens, named on every rank. */
static fer_status seq_make(const feri_llama *m, fer_kv_cache *cache, const fer_kv_seq *src, uint64_t n, fer_kv_seq **out) {
  fer_status st = src ? fer_kv_seq_fork(src, n, out) : fer_kv_seq_create(cache, out);
  if (st == FER_STATUS_OK && (st = name(m, *out, FERI_TP_OBJ_KV_SEQ, NULL)) != FER_STATUS_OK) {
    (void)fer_kv_seq_free(*out);
    *out = NULL;
  }
  return st;
}

/* Rank 0: announces the creation (from: the cache's or the forked sequence's id), then makes it. */
static fer_status seq_announced(const feri_llama *m, fer_kv_cache *cache, const fer_kv_seq *src, uint64_t n,
                                fer_kv_seq **out) {
  uint32_t from;
  if (!(src ? feri_tp_find(m, src, FERI_TP_OBJ_KV_SEQ, &from) : feri_tp_find(m, cache, FERI_TP_OBJ_KV_CACHE, &from)))
    return feri_fail(FER_STATUS_MISUSE, "tensor parallel: a KV %s made outside the model (shared_kv.h)",
                     src ? "sequence" : "cache");
  if (n > UINT32_MAX) return feri_fail(FER_STATUS_INVALID_ARG, "tensor parallel: a fork of %llu tokens", (unsigned long long)n);
  fer_status st = feri_tp_announce(m, src ? FERI_TP_KV_SEQ_FORK : FERI_TP_KV_SEQ_CREATE, feri_tp_next_id(m), from,
                                   (uint32_t)n, NULL, NULL, 0);
  if (st != FER_STATUS_OK) return st;
  return finish(m, seq_make(m, cache, src, n, out), src ? "forking a KV sequence" : "creating a KV sequence");
}

fer_status feri_llama_kv_seq_create(const feri_llama *m, fer_kv_cache *cache, fer_kv_seq **out) {
  *out = NULL;
  return feri_tp_leading(m) ? seq_announced(m, cache, NULL, 0, out) : seq_make(m, cache, NULL, 0, out);
}

fer_status feri_llama_kv_seq_fork(const feri_llama *m, const fer_kv_seq *src, uint64_t n_tokens, fer_kv_seq **out) {
  *out = NULL;
  return feri_tp_leading(m) ? seq_announced(m, NULL, src, n_tokens, out) : seq_make(m, NULL, src, n_tokens, out);
}

void feri_llama_kv_seq_free(const feri_llama *m, fer_kv_seq *kv) {
  uint32_t id;
  if (kv && feri_tp_find(m, kv, FERI_TP_OBJ_KV_SEQ, &id)) feri_tp_forget(m, id, FERI_TP_KV_SEQ_FREE);
  (void)fer_kv_seq_free(kv);
}
