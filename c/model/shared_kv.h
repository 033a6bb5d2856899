/* shared_kv.h: a KV cache that many sequences share (the scheduler's, with its prefix cache's
 * forks), made, forked and freed through the model, so that every rank of a tensor-parallel model
 * makes the same ones on its own share of the KV heads (tp_run.h). In one process each call is the
 * fer_kv_* call it names. The objects are fer_kv_* objects: read them (stats, sharing) directly. */
#ifndef FERI_MODEL_SHARED_KV_H
#define FERI_MODEL_SHARED_KV_H

#include <stdint.h>

#include "ferrite.h"
#include "model/llama.h"

/* A granule pool with these options and a KV cache on it (the cache's geometry: this model's, as
 * feri_llama_kv_geometry gives it on rank 0; every other rank uses its own KV heads and scales
 * the pool to them). */
fer_status feri_llama_kv_cache_create(const feri_llama *m, const fer_vmm_options *vo, const fer_kv_cache_options *ko,
                                      fer_vmm **out_vmm, fer_kv_cache **out_cache);
void feri_llama_kv_cache_free(const feri_llama *m, fer_kv_cache *cache, fer_vmm *vmm);

/* fer_kv_seq_create, fer_kv_seq_fork and fer_kv_seq_free through the model. A sequence given to
 * feri_llama_seq_create_on belongs to that sequence from then on (freed with it). */
fer_status feri_llama_kv_seq_create(const feri_llama *m, fer_kv_cache *cache, fer_kv_seq **out);
fer_status feri_llama_kv_seq_fork(const feri_llama *m, const fer_kv_seq *src, uint64_t n_tokens, fer_kv_seq **out);
void feri_llama_kv_seq_free(const feri_llama *m, fer_kv_seq *kv);

#endif
