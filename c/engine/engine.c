/* engine.c: the public engine over c/model (contract in ffi/ferrite.h). An engine owns its model,
 * tokenizer, thread pool, KV governor and a batch scratch; a sequence owns a model sequence and the
 * governor charge it was admitted with. */
#include <stdatomic.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "chat/chat_gguf.h"
#include "core/file.h"
#include "engine/config.h"
#include "engine/engine_internal.h"
#include "gguf/gguf.h"
#include "grammar/grammar_api.h"
#include "model/llama.h"
#include "model/tp_run.h"
#include "model/tiny.h"
#include "tokenizer/tokenizer.h"

struct fer_engine_seq {
  fer_engine *e;
  feri_llama_seq *s;
  uint64_t admitted_bytes;
  fer_matcher *matcher;  /* the grammar's matcher (fer_engine_seq_set_grammar), or NULL */
  uint32_t grammar_from; /* the position of the matcher's first token */
};

fer_status feri_engine_enter(fer_engine *e, const char *fn) {
  if (atomic_exchange(&e->in_use, 1)) return feri_fail(FER_STATUS_BUSY, "%s: another thread is inside this engine", fn);
  return FER_STATUS_OK;
}
fer_status feri_engine_leave(fer_engine *e, fer_status st) {
  atomic_store(&e->in_use, 0);
  return st;
}

static void engine_release(fer_engine *e) {
  feri_llama_batch_free(e->batch);
  fer_tokenizer_free(e->tok);
  feri_llama_close(e->model); /* rank 0: tells the other ranks to stop */
  feri_comm_free(e->comm);    /* after the model, which uses it */
  fer_threadpool_free(e->pool);
  fer_governor_free(e->gov);
  free(e->scratch_logits);
  free(e->path_copy);
  fer_chat_template_free(e->chat);
  free(e->chat_path_copy);
  free(e);
}

static void fill_info(fer_engine *e) {
  const feri_llama_config *c = feri_llama_config_of(e->model);
  fer_model_info *i = &e->info;
  snprintf(i->architecture, sizeof i->architecture, "%s", feri_llama_arch_name(c->arch));
  i->n_layer = c->n_layer, i->n_embd = c->n_embd, i->n_head = c->n_head, i->n_head_kv = c->n_head_kv;
  i->head_dim = c->head_dim, i->n_ff = c->n_ff, i->n_vocab = c->n_vocab, i->n_ctx_train = c->n_ctx_train;
  i->pooling = c->pooling;
  fer_tokenizer_info ti;
  fer_tokenizer_get_info(e->tok, &ti);
  i->bos_id = ti.bos_id, i->eos_id = ti.eos_id, i->eot_id = -1;
  /* the end of a chat turn, by the texts the common templates close a turn with: ChatML's,
   * Gemma's, Llama 3's, Phi's */
  static const char *const eot[] = {"<|im_end|>", "<end_of_turn>", "<|eot_id|>", "<|end|>"};
  int32_t id;
  for (size_t k = 0; k < sizeof eot / sizeof eot[0] && i->eot_id < 0; k++)
    if (fer_tokenizer_token_to_id(e->tok, eot[k], strlen(eot[k]), &id) == FER_STATUS_OK) i->eot_id = id;
}

/* The chat template: the override file's (its failures fail the creation: the caller asked for
 * it), else the model's. A model without one, or with one that does not compile, still runs
 * plain prompts; chat calls then fail with chat_error. */
/* The special texts the tokenizer adds around an encoding (chat_added_bos/eos): found by encoding
 * nothing with FER_ENCODE_ADD_SPECIAL. */
static void find_added_specials(fer_engine *e, const feri_gguf *g) {
  int32_t ids[4];
  size_t n = 0;
  fer_tokenizer_info ti;
  fer_tokenizer_get_info(e->tok, &ti);
  if (fer_tokenizer_encode(e->tok, "", 0, FER_ENCODE_ADD_SPECIAL, ids, 4, &n) != FER_STATUS_OK) n = 0;
  if (n > 0 && ti.bos_id >= 0 && ids[0] == ti.bos_id)
    feri_chat_special_text(g, "tokenizer.ggml.bos_token_id", e->chat_added_bos, sizeof e->chat_added_bos);
  if (n > 0 && ti.eos_id >= 0 && ids[n - 1] == ti.eos_id && (n > 1 || ti.bos_id != ti.eos_id))
    feri_chat_special_text(g, "tokenizer.ggml.eos_token_id", e->chat_added_eos, sizeof e->chat_added_eos);
}

static fer_status open_chat_template(fer_engine *e, const feri_gguf *g) {
  static const char *const fn = "fer_engine_create";
  fer_status st;
  char why[400];
  size_t wl;
  find_added_specials(e, g);
  if (e->cfg.chat_template_path) {
    if (!(e->chat_path_copy = strdup(e->cfg.chat_template_path))) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: path", fn);
    e->cfg.chat_template_path = e->chat_path_copy;
    char *src = NULL;
    size_t n = 0;
    if ((st = feri_file_read_all(e->chat_path_copy, "fer_engine_create: chat_template_path", &src, &n)) != FER_STATUS_OK) return st;
    if (n > (1u << 20)) {
      free(src);
      return feri_fail(FER_STATUS_INVALID_ARG, "%s: chat_template_path '%s' is %zu bytes (a template is at most 1 MiB)", fn,
                       e->chat_path_copy, n);
    }
    st = feri_chat_template_from_gguf(g, src, n, e->cfg.chat_template_now_unix, &e->chat);
    free(src);
    if (st != FER_STATUS_OK) {
      fer_last_error_message(why, sizeof why, &wl);
      return feri_fail(FER_STATUS_INVALID_ARG, "%s: chat_template_path '%s': %s", fn, e->chat_path_copy, why);
    }
    return FER_STATUS_OK;
  }
  if ((e->chat_status = feri_chat_template_from_gguf(g, NULL, 0, e->cfg.chat_template_now_unix, &e->chat)) != FER_STATUS_OK) {
    fer_last_error_message(why, sizeof why, &wl);
    why[sizeof why - 1] = '\0';
    if (e->chat_status == FER_STATUS_UNSUPPORTED) snprintf(e->chat_error, sizeof e->chat_error, "%s", why);
    else snprintf(e->chat_error, sizeof e->chat_error, "the model file's tokenizer.chat_template does not compile (%s); give "
                  "one with --chat-template FILE.jinja (fer_engine_config.chat_template_path)", why);
  }
  return FER_STATUS_OK;
}

/* A CUDA device as the config names it, before anything is opened: why it cannot run here. */
static fer_status check_device(const fer_engine_config *c) {
  static const char *const fn = "fer_engine_create";
  if (c->device != FER_DEVICE_CUDA) return FER_STATUS_OK;
  int32_t count = 0;
  char why[256] = "";
  size_t len = 0;
  const fer_status st = fer_cuda_device_count(&count);
  if (st != FER_STATUS_OK) {
    fer_last_error_message(why, sizeof why, &len);
    return feri_fail(FER_STATUS_UNSUPPORTED, "%s: device cuda:%u: no CUDA device here (%s)", fn, c->device_index, why);
  }
  if (c->device_index >= (uint32_t)count)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: device cuda:%u, but this machine has %d CUDA device%s", fn,
                     c->device_index, (int)count, count == 1 ? "" : "s");
  return feri_fail(FER_STATUS_UNSUPPORTED,
                   "%s: device cuda:%u: the CUDA backend does not run the forward pass yet (issue 34); use device cpu",
                   fn, c->device_index);
}

static fer_status open_parts(fer_engine *e) {
  const fer_engine_config *c = &e->cfg;
  fer_status st;
  if ((st = check_device(c)) != FER_STATUS_OK) return st;
  const uint32_t tp = c->tensor_parallel > 1 ? c->tensor_parallel : 1, pp = c->pipeline_parallel > 1 ? c->pipeline_parallel : 1;
  const uint32_t ranks = tp * pp;
  if (ranks > 1) { /* the job mpirun started: one rank per share of each stage */
    if ((st = feri_comm_mpi(&e->comm)) != FER_STATUS_OK) return st;
    if ((uint32_t)feri_comm_size(e->comm) != ranks) {
      if (tp > 1 && pp > 1)
        return feri_fail(FER_STATUS_INVALID_ARG, "fer_engine_create: tensor_parallel %u x pipeline_parallel %u is %u processes, "
                         "but mpirun started %d", tp, pp, ranks, feri_comm_size(e->comm));
      return feri_fail(FER_STATUS_INVALID_ARG, "fer_engine_create: %s %u, but mpirun started %d processes",
                       tp > 1 ? "tensor_parallel" : "pipeline_parallel", ranks, feri_comm_size(e->comm));
    }
  }
  if (c->model_path) {
    feri_llama_options mo = {.weights = c->weight_budget_bytes ? FERI_WEIGHTS_STORE : FERI_WEIGHTS_MAPPED,
                             .matmul = c->matmul == FER_MATMUL_EXACT ? FERI_MATMUL_EXACT : FERI_MATMUL_I8,
                             .eviction = FER_WEIGHTS_EVICT_STABLE_SUBSET,
                             .budget_bytes = c->weight_budget_bytes,
                             .comm = e->comm,
                             .tp_timeout_s = c->tensor_parallel_timeout_ms / 1000.0,
                             .pipeline = pp > 1,
                             .tensor_parallel = pp > 1 ? tp : 0,
                             .tp_wire = c->tensor_parallel_wire == FER_TP_WIRE_Q8_0 ? FERI_TP_WIRE_Q8 : FERI_TP_WIRE_F32};
    st = feri_llama_open_with(c->model_path, &mo, &e->model);
  } else {
    st = feri_llama_open_image(c->model_image, (size_t)c->model_image_bytes, &e->model);
    if (st == FER_STATUS_OK) st = feri_llama_set_matmul(e->model, c->matmul == FER_MATMUL_EXACT ? FERI_MATMUL_EXACT : FERI_MATMUL_I8);
  }
  if (st != FER_STATUS_OK) return st;
  const feri_gguf *g = feri_llama_gguf(e->model);
  if ((st = feri_tokenizer_from_gguf(g, &e->tok)) != FER_STATUS_OK) return st;
  const feri_llama_config *mc = feri_llama_config_of(e->model);
  if (e->cfg.max_tokens == 0) e->cfg.max_tokens = mc->n_ctx_train;
  fer_threadpool_options po;
  fer_threadpool_options_init(&po);
  po.n_threads = c->n_threads;
  if ((st = fer_threadpool_create(&po, &e->pool)) != FER_STATUS_OK) return st;
  if ((st = fer_governor_create(c->kv_budget_bytes, &e->gov)) != FER_STATUS_OK) return st;
  if ((st = feri_llama_batch_create(e->model, c->max_seqs, &e->batch)) != FER_STATUS_OK) return st;
  e->scratch_logits = malloc(mc->n_vocab * sizeof(float));
  if (!e->scratch_logits) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "fer_engine_create: logits");
  e->seq_opts = (feri_llama_seq_options){.layout = c->kv_layout, .policy = c->kv_policy, .dtype = c->kv_dtype,
                                         .min_bucket = c->kv_min_bucket, .granule_bytes = 64 * 1024, .plan = c->plan};
  { /* the KV dtype must suit the model (Q8_0: head_dim a multiple of 32): refused here, not at the first sequence */
    fer_kv_geometry g;
    uint64_t granule;
    if ((st = feri_llama_kv_geometry(e->model, 1, &e->seq_opts, &g, &granule)) != FER_STATUS_OK) return st;
  }
  fill_info(e);
  return open_chat_template(e, g);
}

fer_status fer_engine_create(const fer_engine_config *config, fer_engine **out) {
  static const char *const fn = "fer_engine_create";
  feri_error_clear();
  if (out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: out_engine is NULL", fn);
  *out = NULL;
  if (config == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: config is NULL", fn);
  if (config->struct_size < sizeof *config)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: config->struct_size %u < %zu (call fer_engine_config_init)", fn,
                     config->struct_size, sizeof *config);
  fer_engine *e = calloc(1, sizeof *e);
  if (!e) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: engine", fn);
  atomic_init(&e->in_use, 0);
  atomic_init(&e->schedulers, 0);
  e->cfg = *config;
  e->cfg.struct_size = sizeof e->cfg;
  fer_status st = feri_engine_config_apply_env(&e->cfg, config->environment); /* the one place */
  e->cfg.environment = NULL;
  if (st == FER_STATUS_OK) st = feri_engine_config_check(&e->cfg);
  if (st == FER_STATUS_OK && e->cfg.model_path) {
    e->path_copy = strdup(e->cfg.model_path);
    e->cfg.model_path = e->path_copy;
    if (!e->path_copy) st = feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: path", fn);
  }
  if (st == FER_STATUS_OK) st = open_parts(e);
  if (st != FER_STATUS_OK) {
    feri_error_stash keep;
    feri_error_save(&keep);
    engine_release(e);
    return feri_error_restore(&keep, st);
  }
  if (e->comm && feri_comm_rank(e->comm) == 0 && (st = feri_llama_tp_lead(e->model)) != FER_STATUS_OK) {
    engine_release(e);
    return st;
  }
  feri_error_clear(); /* a model without a chat template is not an error of creation */
  *out = e;
  return FER_STATUS_OK;
}

fer_status fer_engine_parallel_info(const fer_engine *e, uint32_t *out_rank, uint32_t *out_size) {
  feri_error_clear();
  if (out_rank) *out_rank = 0;
  if (out_size) *out_size = 0;
  if (e == NULL || out_rank == NULL || out_size == NULL)
    return feri_fail(FER_STATUS_NULL_ARG, "fer_engine_parallel_info: NULL argument");
  feri_llama_tp_ranks(e->model, out_rank, out_size);
  return FER_STATUS_OK;
}

fer_status fer_engine_run_rank(fer_engine *e) {
  static const char *const fn = "fer_engine_run_rank";
  feri_error_clear();
  if (e == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: engine is NULL", fn);
  if (e->comm == NULL || feri_comm_rank(e->comm) == 0)
    return feri_fail(FER_STATUS_MISUSE, "%s: only a rank other than 0 of a tensor-parallel engine runs rank 0's calls", fn);
  fer_status st = feri_engine_enter(e, fn);
  if (st != FER_STATUS_OK) return st;
  return feri_engine_leave(e, feri_llama_tp_serve(e->model, e->pool));
}

fer_status fer_engine_free(fer_engine *e) {
  feri_error_clear();
  if (e == NULL) return FER_STATUS_OK;
  if (e->live_seqs > 0)
    return feri_fail(FER_STATUS_BUSY, "fer_engine_free: %u sequences are alive (free them first)", e->live_seqs);
  if (atomic_load(&e->schedulers) > 0) return feri_fail(FER_STATUS_BUSY, "fer_engine_free: its scheduler is alive (free it first)");
  const unsigned deps = atomic_load(&e->tok->live_dependents);
  if (deps > 0)
    return feri_fail(FER_STATUS_BUSY, "fer_engine_free: %u detokenizers or grammar vocabularies of its tokenizer are alive",
                     deps);
  engine_release(e);
  return FER_STATUS_OK;
}

fer_status fer_engine_get_config(const fer_engine *e, fer_engine_config *out) {
  feri_error_clear();
  if (out != NULL) memset(out, 0, sizeof *out); /* zeroed before any check that can fail */
  if (e == NULL || out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_engine_get_config: NULL argument");
  *out = e->cfg;
  return FER_STATUS_OK;
}

fer_status fer_engine_model_info(const fer_engine *e, fer_model_info *out) {
  feri_error_clear();
  if (out != NULL) memset(out, 0, sizeof *out);
  if (e == NULL || out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_engine_model_info: NULL argument");
  *out = e->info;
  return FER_STATUS_OK;
}

fer_status fer_engine_tokenizer(const fer_engine *e, const fer_tokenizer **out) {
  feri_error_clear();
  if (out != NULL) *out = NULL;
  if (e == NULL || out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_engine_tokenizer: NULL argument");
  *out = e->tok;
  return FER_STATUS_OK;
}

fer_status fer_engine_chat_template(const fer_engine *e, const fer_chat_template **out) {
  static const char *const fn = "fer_engine_chat_template";
  feri_error_clear();
  if (out) *out = NULL;
  if (!e || !out) return feri_fail(FER_STATUS_NULL_ARG, "%s: NULL argument", fn);
  if (!e->chat) return feri_fail(e->chat_status, "%s", e->chat_error);
  *out = e->chat;
  return FER_STATUS_OK;
}

fer_status fer_engine_chat_apply(const fer_engine *e, const char *request, uint64_t request_bytes, uint32_t flags, char **out_text,
                                 uint64_t *out_len) {
  static const char *const fn = "fer_engine_chat_apply";
  feri_error_clear();
  if (out_text) *out_text = NULL;
  if (out_len) *out_len = 0;
  if (!e || !out_text || !out_len || (!request && request_bytes)) return feri_fail(FER_STATUS_NULL_ARG, "%s: NULL argument", fn);
  if (!e->chat) return feri_fail(e->chat_status, "%s", e->chat_error);
  const fer_status st = fer_chat_template_apply(e->chat, request, request_bytes, flags, out_text, out_len);
  if (st != FER_STATUS_OK) return st;
  /* llama.cpp's rule against a doubled BOS (or EOS): the template may write it, the encoding adds it */
  char *t = *out_text;
  size_t n = (size_t)*out_len;
  const size_t b = strlen(e->chat_added_bos), x = strlen(e->chat_added_eos);
  if (b && n >= b && memcmp(t, e->chat_added_bos, b) == 0) memmove(t, t + b, (n -= b) + 1);
  if (x && n >= x && memcmp(t + n - x, e->chat_added_eos, x) == 0) t[n -= x] = '\0';
  *out_len = n;
  return FER_STATUS_OK;
}

/* JSON string body of s (quotes and backslashes escaped, control characters as \u00XX) */
static size_t json_escape(char *out, const char *s) {
  size_t w = 0;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') {
      if (out) out[w] = '\\', out[w + 1] = (char)*p;
      w += 2;
    } else if (*p < 0x20) {
      if (out) snprintf(out + w, 7, "\\u%04x", *p);
      w += 6;
    } else {
      if (out) out[w] = (char)*p;
      w += 1;
    }
  }
  return w;
}

/* {"messages":[{"role":"..","content":".."},...]} into out (NULL: measure); its length */
static size_t messages_json(char *out, const fer_chat_message *m, size_t n) {
  size_t w = 0;
#define PUT(lit) (out ? memcpy(out + w, lit, sizeof lit - 1) : NULL, w += sizeof lit - 1)
  PUT("{\"messages\":[");
  for (size_t i = 0; i < n; i++) {
    if (i) PUT(",");
    PUT("{\"role\":\"");
    w += json_escape(out ? out + w : NULL, m[i].role);
    PUT("\",\"content\":\"");
    w += json_escape(out ? out + w : NULL, m[i].content);
    PUT("\"}");
  }
  PUT("]}");
#undef PUT
  return w;
}

fer_status fer_engine_chat_render(const fer_engine *e, const fer_chat_message *messages, size_t n, uint32_t flags,
                                  char *out, size_t cap, size_t *out_len) {
  static const char *const fn = "fer_engine_chat_render";
  feri_error_clear();
  if (out_len != NULL) *out_len = 0;
  if (e == NULL || out_len == NULL || (n > 0 && messages == NULL) || (cap > 0 && out == NULL))
    return feri_fail(FER_STATUS_NULL_ARG, "%s: NULL argument", fn);
  for (size_t i = 0; i < n; i++)
    if (messages[i].role == NULL || messages[i].content == NULL)
      return feri_fail(FER_STATUS_NULL_ARG, "%s: message %zu has a NULL role or content", fn, i);
  if (!e->chat) return feri_fail(e->chat_status, "%s", e->chat_error);
  const size_t need = messages_json(NULL, messages, n);
  char *req = malloc(need + 1);
  if (!req) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
  messages_json(req, messages, n);
  char *text = NULL;
  uint64_t len = 0;
  fer_status st = fer_engine_chat_apply(e, req, need, flags, &text, &len);
  free(req);
  if (st != FER_STATUS_OK) return st;
  *out_len = (size_t)len;
  if (len >= cap) st = feri_fail(FER_STATUS_BUFFER_TOO_SMALL, "%s: %llu bytes needed, %zu given", fn, (unsigned long long)len + 1, cap);
  else memcpy(out, text, (size_t)len + 1);
  free(text);
  return st;
}

fer_status fer_engine_seq_create(fer_engine *e, uint32_t max_tokens, fer_engine_seq **out) {
  static const char *const fn = "fer_engine_seq_create";
  feri_error_clear();
  if (out != NULL) *out = NULL;
  if (e == NULL || out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: NULL argument", fn);
  if (max_tokens == 0 || max_tokens > e->cfg.max_tokens)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: max_tokens %u (1 .. the engine's %u)", fn, max_tokens, e->cfg.max_tokens);
  fer_status st = feri_engine_enter(e, fn);
  if (st != FER_STATUS_OK) return st;
  if (e->live_seqs >= e->cfg.max_seqs)
    return feri_engine_leave(e, feri_fail(FER_STATUS_BUSY, "%s: %u sequences are alive, the engine's max_seqs", fn, e->live_seqs));
  fer_engine_seq *q = calloc(1, sizeof *q);
  if (!q) return feri_engine_leave(e, feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: sequence", fn));
  q->e = e;
  fer_kv_geometry g;
  uint64_t granule = 0;
  st = feri_llama_kv_charge_geometry(e->model, max_tokens, &e->seq_opts, &g, &granule); /* the heaviest rank's */
  if (st == FER_STATUS_OK) st = fer_governor_admit_sequence(e->gov, &g, max_tokens, granule, &q->admitted_bytes);
  while (st == FER_STATUS_BUDGET_EXCEEDED && e->reclaim != NULL && e->reclaim(e->reclaim_ctx))
    st = fer_governor_admit_sequence(e->gov, &g, max_tokens, granule, &q->admitted_bytes);
  if (st == FER_STATUS_OK) {
    st = feri_llama_seq_create(e->model, max_tokens, &e->seq_opts, &q->s);
    if (st != FER_STATUS_OK) {
      feri_error_stash keep;
      feri_error_save(&keep);
      fer_governor_release(e->gov, FER_MEM_ROLE_KV, q->admitted_bytes);
      feri_error_restore(&keep, st);
    }
  }
  if (st != FER_STATUS_OK) {
    free(q);
    return feri_engine_leave(e, st);
  }
  e->live_seqs++;
  *out = q;
  return feri_engine_leave(e, FER_STATUS_OK);
}

fer_status fer_engine_seq_free(fer_engine_seq *q) {
  feri_error_clear();
  if (q == NULL) return FER_STATUS_OK;
  fer_engine *e = q->e;
  fer_status st = feri_engine_enter(e, "fer_engine_seq_free");
  if (st != FER_STATUS_OK) return st;
  feri_llama_seq_free(q->s);
  fer_matcher_free(q->matcher);
  fer_governor_release(e->gov, FER_MEM_ROLE_KV, q->admitted_bytes);
  e->live_seqs--;
  free(q);
  feri_error_clear();
  return feri_engine_leave(e, FER_STATUS_OK);
}

fer_status fer_engine_prefill(fer_engine_seq *q, const int32_t *ids, size_t n, float *logits, size_t cap) {
  static const char *const fn = "fer_engine_prefill";
  feri_error_clear();
  if (q == NULL || (n > 0 && ids == NULL)) return feri_fail(FER_STATUS_NULL_ARG, "%s: NULL argument", fn);
  fer_engine *e = q->e;
  if (n == 0 || n > UINT32_MAX) return feri_fail(FER_STATUS_INVALID_ARG, "%s: %zu ids", fn, n);
  if (logits && cap < e->info.n_vocab)
    return feri_fail(FER_STATUS_BUFFER_TOO_SMALL, "%s: logits holds %zu floats, the vocabulary %u", fn, cap, e->info.n_vocab);
  fer_status st = feri_engine_enter(e, fn);
  if (st != FER_STATUS_OK) return st;
  if (q->matcher != NULL) {
    for (size_t i = 0; i < n; i++) {
      if (feri_matcher_accept(q->matcher->m, ids[i]) == FER_STATUS_OK) continue;
      (void)feri_matcher_rollback(q->matcher->m, (uint32_t)i);
      return feri_engine_leave(e, feri_fail(FER_STATUS_INVALID_ARG, "%s: ids[%zu] = %d (position %u) is not allowed by the grammar", fn, i,
                                ids[i], feri_llama_seq_len(q->s) + (uint32_t)i));
    }
  }
  st = feri_llama_forward(q->s, e->pool, ids, (uint32_t)n, logits ? logits : e->scratch_logits);
  if (st != FER_STATUS_OK && q->matcher != NULL) (void)feri_matcher_rollback(q->matcher->m, (uint32_t)n);
  return feri_engine_leave(e, st);
}

fer_status fer_engine_embed(fer_engine *e, const int32_t *ids, size_t n, uint32_t flags, float *out, size_t cap, size_t *out_n) {
  static const char *const fn = "fer_engine_embed";
  feri_error_clear();
  if (out_n) *out_n = 0;
  if (e == NULL || out_n == NULL || (n > 0 && ids == NULL) || (cap > 0 && out == NULL))
    return feri_fail(FER_STATUS_NULL_ARG, "%s: NULL argument", fn);
  if (flags & ~(uint32_t)(FER_EMBED_NORMALIZE | FER_EMBED_POOL_LAST | FER_EMBED_POOL_FIRST))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: unknown flags 0x%x", fn, flags);
  if ((flags & FER_EMBED_POOL_LAST) && (flags & FER_EMBED_POOL_FIRST))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: FER_EMBED_POOL_LAST and FER_EMBED_POOL_FIRST exclude each other", fn);
  const uint32_t D = e->info.n_embd;
  if (n == 0 || n > UINT32_MAX) return feri_fail(FER_STATUS_INVALID_ARG, "%s: %zu ids (at least one)", fn, n);
  if (cap < D) {
    *out_n = D;
    return feri_fail(FER_STATUS_BUFFER_TOO_SMALL, "%s: out holds %zu floats, the embedding %u", fn, cap, D);
  }
  fer_engine_seq *q = NULL;
  fer_status st = fer_engine_seq_create(e, (uint32_t)n, &q);
  if (st != FER_STATUS_OK) return st;
  float *hidden = malloc((size_t)n * D * sizeof(float));
  if (hidden == NULL) {
    fer_engine_seq_free(q);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: %zu x %u floats of hidden states", fn, n, D);
  }
  if ((st = feri_engine_enter(e, fn)) == FER_STATUS_OK)
    st = feri_engine_leave(e, feri_llama_forward_hidden(q->s, e->pool, ids, (uint32_t)n, hidden));
  if (st == FER_STATUS_OK) {
    /* pooled in double, in token order: the same bits for the same ids whatever ran before */
    double norm = 0.0;
    for (uint32_t j = 0; j < D; j++) {
      double v = 0.0;
      if (flags & FER_EMBED_POOL_LAST) v = hidden[(n - 1) * D + j];
      else if (flags & FER_EMBED_POOL_FIRST) v = hidden[j];
      else {
        for (size_t i = 0; i < n; i++) v += hidden[i * D + j];
        v /= (double)n;
      }
      out[j] = (float)v;
      norm += v * v;
    }
    if ((flags & FER_EMBED_NORMALIZE) && norm > 0.0) {
      const double inv = 1.0 / sqrt(norm);
      for (uint32_t j = 0; j < D; j++) out[j] = (float)((double)out[j] * inv);
    }
    *out_n = D;
  }
  free(hidden);
  feri_error_stash keep; /* freeing the sequence clears the message of a failure */
  feri_error_save(&keep);
  fer_engine_seq_free(q);
  return st == FER_STATUS_OK ? st : feri_error_restore(&keep, st);
}

fer_status fer_engine_prompt_logprobs(fer_engine *e, const int32_t *ids, size_t n, uint32_t top_n, float *out_logprobs,
                                      int32_t *out_top_tokens, float *out_top_logprobs) {
  static const char *const fn = "fer_engine_prompt_logprobs";
  feri_error_clear();
  if (e == NULL || (n > 0 && ids == NULL) || out_logprobs == NULL ||
      (top_n > 0 && (out_top_tokens == NULL || out_top_logprobs == NULL)))
    return feri_fail(FER_STATUS_NULL_ARG, "%s: NULL argument", fn);
  if (n == 0 || n > UINT32_MAX) return feri_fail(FER_STATUS_INVALID_ARG, "%s: %zu ids (at least one)", fn, n);
  if (top_n > FER_MAX_TOP_LOGPROBS)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: top_n %u (at most %d)", fn, top_n, FER_MAX_TOP_LOGPROBS);
  const uint32_t V = e->info.n_vocab;
  for (size_t i = 0; i < n; i++)
    if (ids[i] < 0 || (uint32_t)ids[i] >= V)
      return feri_fail(FER_STATUS_INVALID_ARG, "%s: ids[%zu] = %d is outside the vocabulary of %u", fn, i, ids[i], V);
  /* rows of logits in chunks of about 16M floats: a long prompt never holds n x vocab at once */
  const size_t chunk = (size_t)(16u << 20) / V > 0 ? (size_t)(16u << 20) / V : 1;
  float *rows = malloc((chunk < n ? chunk : n) * (size_t)V * sizeof(float));
  float *lp = malloc(n * sizeof(float));
  int32_t *tt = top_n ? malloc(n * top_n * sizeof(int32_t)) : NULL;
  float *tl = top_n ? malloc(n * top_n * sizeof(float)) : NULL;
  fer_engine_seq *q = NULL;
  fer_status st = FER_STATUS_OK;
  if (!rows || !lp || (top_n && (!tt || !tl)))
    st = feri_fail(FER_STATUS_OUT_OF_MEMORY, "%s: rows of %u logits for %zu ids", fn, V, n);
  if (st == FER_STATUS_OK) st = fer_engine_seq_create(e, (uint32_t)n, &q);
  if (st == FER_STATUS_OK) lp[0] = NAN;
  for (uint32_t k = 0; st == FER_STATUS_OK && k < top_n; k++) tt[k] = -1, tl[k] = NAN;
  /* row r of a chunk starting at `at` predicts ids[at + r + 1]; the last id predicts nothing */
  for (size_t at = 0; st == FER_STATUS_OK && at + 1 < n; at += chunk) {
    const size_t m = at + chunk < n - 1 ? chunk : n - 1 - at;
    if ((st = feri_engine_enter(e, fn)) == FER_STATUS_OK)
      st = feri_engine_leave(e, feri_llama_forward_all(q->s, e->pool, ids + at, (uint32_t)m, rows));
    for (size_t r = 0; st == FER_STATUS_OK && r < m; r++) {
      const float *row = rows + r * V;
      float mx = -INFINITY;
      for (uint32_t t = 0; t < V; t++) mx = row[t] > mx ? row[t] : mx;
      double sum = 0.0;
      for (uint32_t t = 0; t < V; t++) sum += exp((double)row[t] - (double)mx);
      const size_t i = at + r + 1;
      lp[i] = (float)((double)row[ids[i]] - (double)mx - log(sum));
      size_t got = 0;
      if (top_n > 0) st = fer_logits_top_logprobs(row, V, top_n, tt + i * top_n, tl + i * top_n, &got);
      for (size_t k = got; st == FER_STATUS_OK && k < top_n; k++) tt[i * top_n + k] = -1, tl[i * top_n + k] = NAN;
    }
  }
  if (st == FER_STATUS_OK) {
    memcpy(out_logprobs, lp, n * sizeof(float));
    if (top_n) {
      memcpy(out_top_tokens, tt, n * top_n * sizeof(int32_t));
      memcpy(out_top_logprobs, tl, n * top_n * sizeof(float));
    }
  }
  free(rows), free(lp), free(tt), free(tl);
  feri_error_stash keep; /* freeing the sequence clears the message of a failure */
  feri_error_save(&keep);
  fer_engine_seq_free(q);
  return st == FER_STATUS_OK ? st : feri_error_restore(&keep, st);
}

fer_status fer_engine_decode(fer_engine *e, fer_engine_seq *const *seqs, const int32_t *ids, size_t n, float *logits,
                             size_t cap) {
  static const char *const fn = "fer_engine_decode";
  feri_error_clear();
  if (e == NULL || seqs == NULL || ids == NULL || logits == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: NULL argument", fn);
  if (n == 0 || n > e->cfg.max_seqs)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: %zu sequences (1 .. max_seqs %u)", fn, n, e->cfg.max_seqs);
  if (cap / e->info.n_vocab < n)
    return feri_fail(FER_STATUS_BUFFER_TOO_SMALL, "%s: logits holds %zu floats, %zu rows of %u are needed", fn, cap, n,
                     e->info.n_vocab);
  feri_llama_seq *ms[4096];
  for (size_t i = 0; i < n; i++) {
    if (seqs[i] == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: sequence %zu is NULL", fn, i);
    if (seqs[i]->e != e) return feri_fail(FER_STATUS_INVALID_ARG, "%s: sequence %zu belongs to another engine", fn, i);
    ms[i] = seqs[i]->s;
  }
  fer_status st = feri_engine_enter(e, fn);
  if (st != FER_STATUS_OK) return st;
  size_t accepted = 0; /* the grammars first: every token allowed, or nothing changes */
  for (; accepted < n; accepted++) {
    fer_matcher *m = seqs[accepted]->matcher;
    if (m != NULL && feri_matcher_accept(m->m, ids[accepted]) != FER_STATUS_OK) {
      st = feri_fail(FER_STATUS_INVALID_ARG, "%s: ids[%zu] = %d (sequence %zu, position %u) is not allowed by its grammar", fn,
                     accepted, ids[accepted], accepted, feri_llama_seq_len(ms[accepted]));
      break;
    }
  }
  /* one sequence: its own step, which replays its decode plan */
  if (st == FER_STATUS_OK && n == 1) st = feri_llama_forward(ms[0], e->pool, ids, 1, logits);
  else if (st == FER_STATUS_OK) st = feri_llama_forward_batch(e->batch, e->pool, ms, ids, (uint32_t)n, logits);
  if (st != FER_STATUS_OK)
    for (size_t i = 0; i < accepted; i++)
      if (seqs[i]->matcher != NULL) (void)feri_matcher_rollback(seqs[i]->matcher->m, 1);
  return feri_engine_leave(e, st);
}

fer_status fer_engine_seq_rewind(fer_engine_seq *q, uint32_t n_tokens) {
  feri_error_clear();
  if (q == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_engine_seq_rewind: seq is NULL");
  fer_status st = feri_engine_enter(q->e, "fer_engine_seq_rewind");
  if (st != FER_STATUS_OK) return st;
  const uint32_t len = feri_llama_seq_len(q->s);
  st = feri_llama_seq_rewind(q->s, n_tokens);
  if (st == FER_STATUS_OK && q->matcher != NULL) {
    /* the matcher by the same tokens, or back to its start from before its first position */
    const uint32_t held = feri_matcher_n_tokens(q->matcher->m);
    const uint32_t back = n_tokens < q->grammar_from ? held : len - n_tokens < held ? len - n_tokens : held;
    (void)feri_matcher_rollback(q->matcher->m, back);
    if (n_tokens < q->grammar_from) q->grammar_from = n_tokens;
  }
  return feri_engine_leave(q->e, st);
}

fer_status fer_engine_seq_set_grammar(fer_engine_seq *q, const fer_grammar *g) {
  static const char *const fn = "fer_engine_seq_set_grammar";
  feri_error_clear();
  if (q == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: seq is NULL", fn);
  fer_engine *e = q->e;
  if (g != NULL && g->vocab->trie.n_vocab != e->info.n_vocab)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: the grammar's vocabulary has %u tokens, the model %u", fn,
                     g->vocab->trie.n_vocab, e->info.n_vocab);
  fer_status st = feri_engine_enter(e, fn);
  if (st != FER_STATUS_OK) return st;
  fer_matcher *m = NULL;
  if (g != NULL && (st = fer_matcher_create(g, &m)) != FER_STATUS_OK) return feri_engine_leave(e, st);
  fer_matcher_free(q->matcher);
  q->matcher = m;
  q->grammar_from = feri_llama_seq_len(q->s);
  return feri_engine_leave(e, FER_STATUS_OK);
}

fer_status fer_engine_seq_matcher(fer_engine_seq *q, fer_matcher **out) {
  feri_error_clear();
  if (out != NULL) *out = NULL;
  if (q == NULL || out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_engine_seq_matcher: NULL argument");
  *out = q->matcher;
  return FER_STATUS_OK;
}

fer_status fer_engine_seq_cancel(fer_engine_seq *q) {
  feri_error_clear();
  if (q == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_engine_seq_cancel: seq is NULL");
  feri_llama_seq_cancel(q->s); /* an atomic flag: no guard, any thread */
  return FER_STATUS_OK;
}

fer_status fer_engine_seq_get_stats(const fer_engine_seq *q, fer_engine_seq_stats *out) {
  feri_error_clear();
  if (out != NULL) memset(out, 0, sizeof *out);
  if (q == NULL || out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_engine_seq_get_stats: NULL argument");
  out->n_tokens = feri_llama_seq_len(q->s);
  out->max_tokens = feri_llama_seq_max_tokens(q->s);
  out->admitted_bytes = q->admitted_bytes;
  fer_kv_seq_stats k;
  fer_kv_seq_get_stats(feri_llama_seq_kv(q->s), &k);
  out->kv_committed_bytes = k.committed_bytes;
  out->kv_capacity_tokens = k.capacity_tokens;
  out->kv_growth_events = k.growth_events;
  out->kv_bytes_moved = k.bytes_moved;
  feri_plan_stats p;
  feri_llama_seq_plan_stats(q->s, &p);
  out->plan_captures = p.captures, out->plan_replays = p.replays, out->plan_invalidations = p.invalidations;
  out->plan_growth_keeps = p.growth_keeps, out->plan_declines = p.declines;
  snprintf(out->plan_last_reason, sizeof out->plan_last_reason, "%s", p.last_reason);
  return FER_STATUS_OK;
}

fer_status fer_engine_get_stats(const fer_engine *e, fer_engine_stats *out) {
  feri_error_clear();
  if (out != NULL) memset(out, 0, sizeof *out);
  if (e == NULL || out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_engine_get_stats: NULL argument");
  out->live_seqs = e->live_seqs;
  fer_governor_stats g;
  fer_governor_get_stats(e->gov, &g);
  out->kv_budget_bytes = g.budget_bytes;
  out->kv_charged_bytes = g.charged_by_role[FER_MEM_ROLE_KV];
  out->admission_refusals = g.refusals;
  fer_weight_store_stats w;
  if (feri_llama_has_store(e->model) && feri_llama_weight_stats(e->model, &w) == FER_STATUS_OK) {
    out->weight_strategy = w.strategy;
    out->weight_page_ins = w.page_ins;
    out->weight_evictions = w.evictions;
    out->weight_loaded_granules = w.loaded_granules;
  }
  return FER_STATUS_OK;
}

fer_status fer_tiny_model_image(const char *arch, uint64_t seed, void **out, size_t *out_bytes) {
  feri_error_clear();
  if (out != NULL) *out = NULL;
  if (out_bytes != NULL) *out_bytes = 0;
  if (arch == NULL || out == NULL || out_bytes == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_tiny_model_image: NULL argument");
  return feri_tiny_model_image(arch, seed, out, out_bytes);
}

void fer_buffer_free(void *buffer) { free(buffer); }
