/* llama.c: the Llama forward pass on ferrite's kernels.
 *
 * Per layer: h = rms_norm(x); q, k, v = h W^T; RoPE on q and k (GGUF's llama weights are in the
 * interleaved GPT-J pairing); k, v appended to the cache; attention (causal, grouped-query) over
 * the cache; x += o W^T; h = rms_norm(x); x += (silu(h Wg^T) * h Wu^T) Wd^T. Then the final norm
 * and the output projection (the token embedding when the file has no output.weight). */
#include "model/llama.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"
#include "gguf/gguf.h"

struct feri_llama {
  feri_gguf *g;
  feri_llama_config cfg;
  feri_linear tok_embd, output;
  feri_vector output_norm;
  feri_llama_layer *layers;
  fer_vmm *weight_vmm;
  fer_weight_store *store; /* NULL: weights used from the mapping */
  bool streaming;          /* the store holds less than all: acquire before each use */
  bool matmul_exact;       /* FERI_MATMUL_EXACT: quantized projections in exact f32 */
};

enum { OP_USE, OP_EMBED, OP_NORM, OP_LINEAR, OP_ROPE, OP_STORE_KV, OP_ATTN, OP_ADD, OP_SWIGLU };

struct feri_op {
  int kind;
  uint32_t layer;
  const feri_linear *w;   /* LINEAR, EMBED */
  const feri_vector *vec; /* NORM */
  fer_tensor a, b, c, d;  /* operands; ATTN: q, K view, out, V view; STORE_KV: K and V views in b, c */
  const float *src;       /* LINEAR input; STORE_KV k rows; ADD addend */
  float *dst;             /* LINEAR output (NULL: the call's logits); STORE_KV v rows; ADD target */
  uint32_t n, in, out;
  uint64_t off, bytes;    /* USE */
};

typedef struct op_list {
  struct feri_op *ops;
  size_t n, cap;
} op_list;

struct feri_llama_seq {
  const feri_llama *m;
  uint32_t max_tokens, len;
  fer_vmm *vmm;
  fer_kv_cache *cache;
  fer_kv_seq *kv;
  int32_t plan_policy;
  bool plan_held;          /* the plan is captured (and the granule pool frozen) */
  op_list plan;            /* the captured one-token step */
  op_list once;            /* a step run without a plan */
  feri_plan_stats plan_stats;
  int32_t *ids;            /* the step's token ids (a plan's scalar input) */
  /* scratch sized for max_tokens rows */
  float *x, *h, *q, *k, *v, *att, *o, *gate, *up, *last;
  int32_t *pos;
  void *qws;               /* fer_matmul_quant_i8's workspace for max_tokens rows */
  size_t qws_bytes;
};

const feri_llama_config *feri_llama_config_of(const feri_llama *m) { return &m->cfg; }
uint32_t feri_llama_seq_len(const feri_llama_seq *s) { return s->len; }
const fer_kv_seq *feri_llama_seq_kv(const feri_llama_seq *s) { return s->kv; }
void feri_llama_seq_plan_stats(const feri_llama_seq *s, feri_plan_stats *out) { *out = s->plan_stats; }

feri_llama_seq_options feri_llama_seq_defaults(void) {
  return (feri_llama_seq_options){.layout = FER_KV_LAYOUT_SEQ_MAJOR, .policy = FER_KV_POLICY_FIXED_MAX,
                                  .dtype = FER_DTYPE_F32, .min_bucket = 8, .granule_bytes = 64 * 1024,
                                  .plan = FERI_PLAN_ADDRESS_STABLE};
}

static fer_status get_u32(const feri_gguf *g, const char *key, uint32_t *out) {
  fer_status st = feri_gguf_get_u32(g, key, out);
  return st == FER_STATUS_OK ? st : feri_fail(FER_STATUS_CORRUPT, "model: %s is missing or not an unsigned integer", key);
}

/* A weight [rows, cols] (GGUF dims [cols, rows]) as a projection operand. */
static fer_status bind_linear(const feri_gguf *g, const char *name, uint64_t rows, uint64_t cols, feri_linear *out) {
  int64_t i = feri_gguf_find_tensor(g, name);
  if (i < 0) return feri_fail(FER_STATUS_CORRUPT, "model: tensor %s is missing", name);
  const feri_gguf_tensor_info *t = feri_gguf_tensor(g, i);
  if (t->n_dims != 2 || t->dims[0] != cols || t->dims[1] != rows) {
    return feri_fail(FER_STATUS_CORRUPT, "model: %s is [%llu, %llu], expected [%llu, %llu]", name,
                     (unsigned long long)t->dims[0], (unsigned long long)t->dims[1], (unsigned long long)cols,
                     (unsigned long long)rows);
  }
  memset(out, 0, sizeof(*out));
  out->off = t->offset;
  out->bytes = t->n_bytes;
  fer_dtype qd;
  switch (t->ggml_type) {
    case FERI_GGML_Q4_0: qd = FER_DTYPE_Q4_0; break;
    case FERI_GGML_Q4_1: qd = FER_DTYPE_Q4_1; break;
    case FERI_GGML_Q8_0: qd = FER_DTYPE_Q8_0; break;
    case FERI_GGML_MXFP4: qd = FER_DTYPE_MXFP4; break;
    case FERI_GGML_F32:
    case FERI_GGML_F16:
    case FERI_GGML_BF16: {
      fer_dtype dd = t->ggml_type == FERI_GGML_F32 ? FER_DTYPE_F32 : t->ggml_type == FERI_GGML_F16 ? FER_DTYPE_F16 : FER_DTYPE_BF16;
      out->quant = false;
      out->dense = feri_tensor_2d((void *)t->data, dd, (int64_t)rows, (int64_t)cols);
      return FER_STATUS_OK;
    }
    default: return feri_fail(FER_STATUS_UNSUPPORTED, "model: %s has type %s", name, feri_ggml_type_name(t->ggml_type));
  }
  int64_t be, bb;
  fer_qblock_size(qd, &be, &bb);
  out->quant = true;
  out->q = (fer_qmatrix){.data = t->data, .bytes = t->n_bytes, .dtype = qd, .rows = (int64_t)rows,
                         .cols = (int64_t)cols, .row_stride = (int64_t)cols / be * bb};
  return fer_qmatrix_check(&out->q);
}

static fer_status bind_vector(const feri_gguf *g, const char *name, uint64_t n, feri_vector *vec) {
  fer_tensor *out = &vec->t;
  int64_t i = feri_gguf_find_tensor(g, name);
  if (i < 0) return feri_fail(FER_STATUS_CORRUPT, "model: tensor %s is missing", name);
  const feri_gguf_tensor_info *t = feri_gguf_tensor(g, i);
  if (t->n_dims != 1 || t->dims[0] != n || t->ggml_type != FERI_GGML_F32) {
    return feri_fail(FER_STATUS_CORRUPT, "model: %s is not an F32 vector of %llu", name, (unsigned long long)n);
  }
  memset(vec, 0, sizeof(*vec));
  vec->off = t->offset;
  vec->bytes = t->n_bytes;
  out->data = (void *)t->data;
  out->dtype = FER_DTYPE_F32;
  out->rank = 1;
  out->shape[0] = (int64_t)n;
  out->strides[0] = 4;
  return FER_STATUS_OK;
}

static fer_status read_config(const feri_gguf *g, feri_llama_config *c) {
  const char *arch;
  size_t len;
  if (feri_gguf_get_str(g, "general.architecture", &arch, &len) != FER_STATUS_OK) {
    return feri_fail(FER_STATUS_CORRUPT, "model: general.architecture is missing");
  }
  if (len != 5 || memcmp(arch, "llama", 5) != 0) {
    return feri_fail(FER_STATUS_UNSUPPORTED, "model: architecture '%.*s' (llama only, for now)", (int)(len > 40 ? 40 : len), arch);
  }
  fer_status st = get_u32(g, "llama.block_count", &c->n_layer);
  if (st == FER_STATUS_OK) st = get_u32(g, "llama.embedding_length", &c->n_embd);
  if (st == FER_STATUS_OK) st = get_u32(g, "llama.feed_forward_length", &c->n_ff);
  if (st == FER_STATUS_OK) st = get_u32(g, "llama.attention.head_count", &c->n_head);
  if (st != FER_STATUS_OK) return st;
  c->n_head_kv = c->n_head;
  if (feri_gguf_find_kv(g, "llama.attention.head_count_kv") >= 0) {
    st = get_u32(g, "llama.attention.head_count_kv", &c->n_head_kv);
    if (st != FER_STATUS_OK) return st;
  }
  c->n_ctx_train = 2048;
  if (feri_gguf_find_kv(g, "llama.context_length") >= 0) get_u32(g, "llama.context_length", &c->n_ctx_train);
  if (feri_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &c->rms_eps) != FER_STATUS_OK) {
    return feri_fail(FER_STATUS_CORRUPT, "model: llama.attention.layer_norm_rms_epsilon is missing");
  }
  c->rope_theta = 10000.0f;
  if (feri_gguf_find_kv(g, "llama.rope.freq_base") >= 0 && feri_gguf_get_f32(g, "llama.rope.freq_base", &c->rope_theta) != FER_STATUS_OK) {
    return feri_fail(FER_STATUS_CORRUPT, "model: llama.rope.freq_base is not a float");
  }
  if (c->n_layer == 0 || c->n_layer > 1024 || c->n_embd == 0 || c->n_head == 0 || c->n_head_kv == 0 ||
      c->n_embd % c->n_head != 0 || c->n_head % c->n_head_kv != 0 || c->n_ff == 0 || !(c->rms_eps >= 0) ||
      !(c->rope_theta > 0)) {
    return feri_fail(FER_STATUS_CORRUPT, "model: inconsistent hyper-parameters (layers %u, embd %u, heads %u/%u, ff %u)",
                     c->n_layer, c->n_embd, c->n_head, c->n_head_kv, c->n_ff);
  }
  c->head_dim = c->n_embd / c->n_head;
  c->rope_dims = c->head_dim;
  if (feri_gguf_find_kv(g, "llama.rope.dimension_count") >= 0) {
    st = get_u32(g, "llama.rope.dimension_count", &c->rope_dims);
    if (st != FER_STATUS_OK || c->rope_dims == 0 || c->rope_dims > c->head_dim || c->rope_dims % 2) {
      return feri_fail(FER_STATUS_CORRUPT, "model: llama.rope.dimension_count is not an even number up to the head size");
    }
  }
  uint32_t et;
  uint64_t nv;
  if (feri_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &nv) != FER_STATUS_OK || nv == 0 || nv > (1u << 24)) {
    return feri_fail(FER_STATUS_CORRUPT, "model: tokenizer.ggml.tokens gives no vocabulary size");
  }
  c->n_vocab = (uint32_t)nv;
  return FER_STATUS_OK;
}

/* Binds the model to an opened GGUF (which it then owns). */
static fer_status open_gguf(feri_gguf *g, feri_llama **out) {
  *out = NULL;
  feri_llama *m = calloc(1, sizeof(*m));
  if (!m) {
    feri_gguf_close(g);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "model");
  }
  m->g = g;
  fer_status st = read_config(m->g, &m->cfg);
  const feri_llama_config *c = &m->cfg;
  if (st == FER_STATUS_OK) {
    m->layers = calloc(c->n_layer, sizeof(*m->layers));
    if (!m->layers) st = feri_fail(FER_STATUS_OUT_OF_MEMORY, "model");
  }
  uint32_t qd = c->n_head * c->head_dim, kvd = c->n_head_kv * c->head_dim;
  if (st == FER_STATUS_OK) st = bind_linear(m->g, "token_embd.weight", c->n_vocab, c->n_embd, &m->tok_embd);
  if (st == FER_STATUS_OK) st = bind_vector(m->g, "output_norm.weight", c->n_embd, &m->output_norm);
  if (st == FER_STATUS_OK) {
    m->output = m->tok_embd; /* tied embeddings unless the file has its own output */
    if (feri_gguf_find_tensor(m->g, "output.weight") >= 0) st = bind_linear(m->g, "output.weight", c->n_vocab, c->n_embd, &m->output);
  }
  for (uint32_t l = 0; l < c->n_layer && st == FER_STATUS_OK; l++) {
    feri_llama_layer *L = &m->layers[l];
    char n[96];
#define NAME(s) (snprintf(n, sizeof(n), "blk.%u.%s", l, s), n)
    st = bind_vector(m->g, NAME("attn_norm.weight"), c->n_embd, &L->attn_norm);
    if (st == FER_STATUS_OK) st = bind_vector(m->g, NAME("ffn_norm.weight"), c->n_embd, &L->ffn_norm);
    if (st == FER_STATUS_OK) st = bind_linear(m->g, NAME("attn_q.weight"), qd, c->n_embd, &L->wq);
    if (st == FER_STATUS_OK) st = bind_linear(m->g, NAME("attn_k.weight"), kvd, c->n_embd, &L->wk);
    if (st == FER_STATUS_OK) st = bind_linear(m->g, NAME("attn_v.weight"), kvd, c->n_embd, &L->wv);
    if (st == FER_STATUS_OK) st = bind_linear(m->g, NAME("attn_output.weight"), c->n_embd, qd, &L->wo);
    if (st == FER_STATUS_OK) st = bind_linear(m->g, NAME("ffn_gate.weight"), c->n_ff, c->n_embd, &L->w_gate);
    if (st == FER_STATUS_OK) st = bind_linear(m->g, NAME("ffn_up.weight"), c->n_ff, c->n_embd, &L->w_up);
    if (st == FER_STATUS_OK) st = bind_linear(m->g, NAME("ffn_down.weight"), c->n_embd, c->n_ff, &L->w_down);
#undef NAME
  }
  if (st != FER_STATUS_OK) {
    feri_llama_close(m);
    return st;
  }
  *out = m;
  return FER_STATUS_OK;
}

static void rebase_linear(feri_linear *w, const char *base) {
  if (w->quant) w->q.data = base + w->off;
  else w->dense.data = (void *)(base + w->off);
}

/* Moves every weight into a fer_weight_store over the file's data section and points the weights
 * at the store's stable addresses. */
static fer_status place_in_store(feri_llama *m, const char *path, const feri_llama_options *o) {
  fer_vmm_options vo;
  fer_vmm_options_init(&vo);
  vo.granule_bytes = o->granule_bytes;
  size_t image_size;
  feri_gguf_image(m->g, &image_size);
  uint64_t data_off = feri_gguf_data_offset(m->g), data_bytes = image_size - data_off;
  vo.max_granules = data_bytes / (o->granule_bytes ? o->granule_bytes : (2u << 20)) + 16;
  fer_status st = fer_vmm_create(&vo, &m->weight_vmm);
  if (st != FER_STATUS_OK) return st;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return feri_fail(FER_STATUS_INVALID_ARG, "model: cannot open '%s' for the weight store", path);
  fer_weight_store_options so;
  fer_weight_store_options_init(&so);
  so.eviction = o->eviction;
  so.budget_bytes = o->budget_bytes;
  st = fer_weight_store_open(m->weight_vmm, fd, data_off, data_bytes, &so, &m->store);
  close(fd);
  if (st != FER_STATUS_OK) return st;
  const void *base;
  fer_weight_store_base(m->store, &base);
  fer_weight_store_stats ws;
  fer_weight_store_get_stats(m->store, &ws);
  m->streaming = ws.strategy != FER_WEIGHTS_FULL_RESIDENT;
  const char *b = base;
  rebase_linear(&m->tok_embd, b);
  rebase_linear(&m->output, b);
  m->output_norm.t.data = (void *)(b + m->output_norm.off);
  for (uint32_t l = 0; l < m->cfg.n_layer; l++) {
    feri_llama_layer *L = &m->layers[l];
    L->attn_norm.t.data = (void *)(b + L->attn_norm.off);
    L->ffn_norm.t.data = (void *)(b + L->ffn_norm.off);
    feri_linear *ws_[7] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
    for (int i = 0; i < 7; i++) rebase_linear(ws_[i], b);
  }
  return FER_STATUS_OK;
}

fer_status feri_llama_open_with(const char *path, const feri_llama_options *o, feri_llama **out) {
  *out = NULL;
  feri_gguf *g = NULL;
  fer_status st = feri_gguf_open_file(path, &g);
  if (st == FER_STATUS_OK) st = open_gguf(g, out);
  if (st == FER_STATUS_OK && o && o->matmul != FERI_MATMUL_I8 && o->matmul != FERI_MATMUL_EXACT) {
    feri_llama_close(*out);
    *out = NULL;
    return feri_fail(FER_STATUS_INVALID_ARG, "model: matmul option %d is neither I8 (0) nor EXACT (1)", (int)o->matmul);
  }
  if (st == FER_STATUS_OK && o) (*out)->matmul_exact = o->matmul == FERI_MATMUL_EXACT;
  if (st != FER_STATUS_OK || !o || o->weights == FERI_WEIGHTS_MAPPED) return st;
  st = place_in_store(*out, path, o);
  if (st != FER_STATUS_OK) {
    feri_llama_close(*out);
    *out = NULL;
  }
  return st;
}

fer_status feri_llama_open(const char *path, feri_llama **out) { return feri_llama_open_with(path, NULL, out); }

fer_status feri_llama_weight_stats(const feri_llama *m, fer_weight_store_stats *out) {
  if (!m->store) return feri_fail(FER_STATUS_UNSUPPORTED, "model: weights are used from the mapped file, not a store");
  return fer_weight_store_get_stats(m->store, out);
}

fer_status feri_llama_open_image(const void *data, size_t size, feri_llama **out) {
  *out = NULL;
  feri_gguf *g = NULL;
  fer_status st = feri_gguf_open(data, size, &g);
  return st == FER_STATUS_OK ? open_gguf(g, out) : st;
}

void feri_llama_close(feri_llama *m) {
  if (!m) return;
  fer_weight_store_free(m->store);
  fer_vmm_free(m->weight_vmm);
  feri_gguf_close(m->g);
  free(m->layers);
  free(m);
}

/* The granule pool and KV cache of one sequence. */
static fer_status make_kv(feri_llama_seq *s, const feri_llama_config *c, const feri_llama_seq_options *o) {
  uint32_t eb = o->dtype == FER_DTYPE_F32 ? 4 : 2;
  if (o->dtype != FER_DTYPE_F32 && o->dtype != FER_DTYPE_F16 && o->dtype != FER_DTYPE_BF16) {
    return feri_fail(FER_STATUS_INVALID_ARG, "KV dtype must be F32, F16 or BF16");
  }
  fer_vmm_options vo;
  fer_vmm_options_init(&vo);
  vo.granule_bytes = o->granule_bytes ? o->granule_bytes : 64 * 1024;
  /* enough granules for every binding at full length, twice over (a bucketed relocation holds
   * the old and the new reservation at once) */
  uint64_t row = (uint64_t)c->n_head_kv * c->head_dim * eb;
  uint64_t per_binding = ((uint64_t)s->max_tokens * row + vo.granule_bytes - 1) / vo.granule_bytes + 1;
  vo.max_granules = 2 * (2ull * c->n_layer * per_binding + 8);
  fer_status st = fer_vmm_create(&vo, &s->vmm);
  if (st != FER_STATUS_OK) return st;
  fer_kv_cache_options ko;
  fer_kv_cache_options_init(&ko);
  ko.policy = o->policy;
  ko.dtype = o->dtype;
  ko.min_bucket = o->min_bucket;
  ko.geometry.layout = o->layout;
  ko.geometry.n_layers = c->n_layer;
  ko.geometry.n_kv_heads = c->n_head_kv;
  ko.geometry.head_dim = c->head_dim;
  ko.geometry.elem_bytes = eb;
  ko.geometry.capacity_tokens = s->max_tokens;
  st = fer_kv_cache_create(s->vmm, &ko, &s->cache);
  if (st == FER_STATUS_OK) st = fer_kv_seq_create(s->cache, &s->kv);
  return st;
}

fer_status feri_llama_seq_create(const feri_llama *m, uint32_t max_tokens, const feri_llama_seq_options *kvo,
                                 feri_llama_seq **out) {
  *out = NULL;
  if (max_tokens == 0 || max_tokens > (1u << 20)) return feri_fail(FER_STATUS_INVALID_ARG, "max_tokens %u", max_tokens);
  const feri_llama_config *c = &m->cfg;
  feri_llama_seq_options defaults = feri_llama_seq_defaults();
  feri_llama_seq *s = calloc(1, sizeof(*s));
  if (!s) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "sequence");
  s->m = m;
  s->max_tokens = max_tokens;
  size_t rows = max_tokens;
  s->x = malloc(rows * c->n_embd * sizeof(float));
  s->h = malloc(rows * c->n_embd * sizeof(float));
  s->q = malloc(rows * c->n_head * c->head_dim * sizeof(float));
  s->k = malloc(rows * c->n_head_kv * c->head_dim * sizeof(float));
  s->v = malloc(rows * c->n_head_kv * c->head_dim * sizeof(float));
  s->att = malloc(rows * c->n_head * c->head_dim * sizeof(float));
  s->o = malloc(rows * c->n_embd * sizeof(float));
  s->gate = malloc(rows * c->n_ff * sizeof(float));
  s->up = malloc(rows * c->n_ff * sizeof(float));
  s->last = malloc(c->n_embd * sizeof(float));
  s->pos = malloc(rows * sizeof(int32_t));
  s->ids = malloc(rows * sizeof(int32_t));
  /* fer_matmul_quant_i8's scratch grows with K: sized once for the widest input of any projection */
  size_t kmax = c->n_embd > c->n_ff ? c->n_embd : c->n_ff;
  if ((size_t)c->n_head * c->head_dim > kmax) kmax = (size_t)c->n_head * c->head_dim;
  s->qws_bytes = rows * ((kmax + 63) / 64 * 64) + 2 * ((rows * (kmax / 32) * sizeof(float) + 63) / 64 * 64) + 64;
  s->qws = aligned_alloc(64, (s->qws_bytes + 63) / 64 * 64);
  s->plan_policy = (kvo ? kvo : &defaults)->plan;
  if (!s->x || !s->h || !s->q || !s->k || !s->v || !s->att || !s->o || !s->gate || !s->up || !s->last || !s->pos ||
      !s->ids || !s->qws) {
    feri_llama_seq_free(s);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "sequence of %u tokens", max_tokens);
  }
  fer_status st = make_kv(s, c, kvo ? kvo : &defaults);
  if (st != FER_STATUS_OK) {
    feri_llama_seq_free(s);
    return st;
  }
  *out = s;
  return FER_STATUS_OK;
}

void feri_llama_seq_free(feri_llama_seq *s) {
  if (!s) return;
  if (s->plan_held) fer_vmm_set_frozen(s->vmm, false);
  fer_kv_seq_free(s->kv);
  fer_kv_cache_free(s->cache);
  fer_vmm_free(s->vmm);
  free(s->plan.ops);
  free(s->once.ops);
  free(s->ids);
  free(s->x), free(s->h), free(s->q), free(s->k), free(s->v);
  free(s->att), free(s->o), free(s->gate), free(s->up), free(s->last), free(s->pos);
  free(s->qws);
  free(s);
}

/* Writes rows [n, heads, dim] of f32 into positions p0.. of a cache view [heads, tokens, dim]. */
static void store_rows(const fer_tensor *view, const float *rows, uint32_t p0, uint32_t n, uint32_t heads, uint32_t dim) {
  for (uint32_t t = 0; t < n; t++) {
    for (uint32_t h = 0; h < heads; h++) {
      const float *src = rows + ((size_t)t * heads + h) * dim;
      char *dst = (char *)view->data + (int64_t)h * view->strides[0] + (int64_t)(p0 + t) * view->strides[1];
      if (view->dtype == FER_DTYPE_F32 && view->strides[2] == 4) {
        memcpy(dst, src, dim * sizeof(float));
        continue;
      }
      for (uint32_t d = 0; d < dim; d++) {
        uint16_t v = view->dtype == FER_DTYPE_F16 ? feri_f32_to_f16(src[d]) : feri_f32_to_bf16(src[d]);
        if (view->dtype == FER_DTYPE_F32) memcpy(dst + (int64_t)d * view->strides[2], &src[d], 4);
        else memcpy(dst + (int64_t)d * view->strides[2], &v, 2);
      }
    }
  }
}

/* Streaming weights: makes a weight resident before its use (its address is the store's stable
 * one, already bound). Nothing to do for mapped or fully resident weights. */
static fer_status use(const feri_llama *m, uint64_t off, uint64_t bytes) {
  if (!m->streaming) return FER_STATUS_OK;
  const void *p;
  return fer_weight_store_acquire(m->store, off, bytes, &p);
}

/* y[n, out] = x[n, in] W^T */
static fer_status linear(const feri_llama_seq *s, fer_threadpool *pool, const feri_linear *w, const float *x,
                         uint32_t n, uint32_t in, float *y, uint32_t out) {
  const feri_llama *m = s->m;
  fer_status st = use(m, w->off, w->bytes);
  if (st != FER_STATUS_OK) return st;
  fer_tensor a = feri_tensor_2d((void *)x, FER_DTYPE_F32, n, in);
  fer_tensor c = feri_tensor_2d(y, FER_DTYPE_F32, n, out);
  if (w->quant && !m->matmul_exact) return fer_matmul_quant_i8(pool, &a, &w->q, &c, s->qws, s->qws_bytes);
  if (w->quant) return fer_matmul_quant(pool, &a, &w->q, &c, NULL, 0);
  return fer_matmul(pool, &a, &w->dense, FER_MATMUL_B_NK, &c, NULL, 0);
}

/* A rank-3 f32 view with byte strides s0, s1 and a contiguous last axis. */
static fer_tensor f32_view3(float *p, int64_t n0, int64_t n1, int64_t n2, int64_t s0, int64_t s1) {
  fer_tensor t;
  memset(&t, 0, sizeof t);
  t.data = p;
  t.dtype = FER_DTYPE_F32;
  t.rank = 3;
  t.shape[0] = n0, t.shape[1] = n1, t.shape[2] = n2;
  t.strides[0] = s0, t.strides[1] = s1, t.strides[2] = 4;
  return t;
}

/* A [rows, heads, dim] buffer as itself, and viewed as [heads, rows, dim] (attention's axis order). */
static fer_tensor rows_view(float *p, uint32_t rows, uint32_t heads, uint32_t dim) {
  return f32_view3(p, rows, heads, dim, (int64_t)heads * dim * 4, (int64_t)dim * 4);
}

static fer_tensor heads_view(float *p, uint32_t rows, uint32_t heads, uint32_t dim) {
  return f32_view3(p, heads, rows, dim, (int64_t)dim * 4, (int64_t)heads * dim * 4);
}

#define TRY(call)                          \
  do {                                     \
    fer_status st_ = (call);               \
    if (st_ != FER_STATUS_OK) return st_;  \
  } while (0)

/* ---- the step as a list of kernel calls ---------------------------------------------------- *
 * A forward pass is built as an ordered list of kernel calls with their operands bound (scratch
 * buffers, weights, the KV views' addresses and strides), then run. A one-token step's list is the
 * decode plan: kept and replayed for later tokens with only the scalar inputs changed (the token
 * id and position in seq-owned slots, the KV length and the logits pointer), as a CUDA graph is
 * replayed on the GPU. */

static struct feri_op *op_add(op_list *l, int kind) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 256;
    struct feri_op *p = realloc(l->ops, cap * sizeof(*p));
    if (!p) return NULL;
    l->ops = p;
    l->cap = cap;
  }
  struct feri_op *o = &l->ops[l->n++];
  memset(o, 0, sizeof(*o));
  o->kind = kind;
  return o;
}

/* o = a new op of the list l in scope (returns OUT_OF_MEMORY from the caller when it cannot grow) */
#define ADD_OP(kind)                                                              \
  do {                                                                            \
    o = op_add(l, kind);                                                          \
    if (!o) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "forward: kernel list");   \
  } while (0)

static fer_status add_use(op_list *l, const feri_llama *m, uint64_t off, uint64_t bytes) {
  if (!m->streaming) return FER_STATUS_OK;
  struct feri_op *o;
  ADD_OP(OP_USE);
  o->off = off, o->bytes = bytes;
  return FER_STATUS_OK;
}

static fer_status add_linear(op_list *l, const feri_llama *m, const feri_linear *w, const float *x, uint32_t n,
                             uint32_t in, float *y, uint32_t out) {
  TRY(add_use(l, m, w->off, w->bytes));
  struct feri_op *o;
  ADD_OP(OP_LINEAR);
  o->w = w, o->src = x, o->dst = y, o->n = n, o->in = in, o->out = out;
  return FER_STATUS_OK;
}

/* Builds the kernel list of n tokens (the KV views as they are bound now); the logits of the last
 * row, or of every row when all_logits. */
static fer_status build_step(feri_llama_seq *s, uint32_t n, bool all_logits, op_list *l) {
  const feri_llama *m = s->m;
  const feri_llama_config *c = &m->cfg;
  const uint32_t D = c->n_embd, H = c->n_head, Hkv = c->n_head_kv, hd = c->head_dim, F = c->n_ff;
  l->n = 0;
  fer_tensor ids;
  memset(&ids, 0, sizeof ids);
  ids.data = s->ids, ids.dtype = FER_DTYPE_I32, ids.rank = 1, ids.shape[0] = n, ids.strides[0] = 4;
  fer_tensor pos = ids;
  pos.data = s->pos;
  fer_tensor x = feri_tensor_2d(s->x, FER_DTYPE_F32, n, D), h = feri_tensor_2d(s->h, FER_DTYPE_F32, n, D);
  TRY(add_use(l, m, m->tok_embd.off, m->tok_embd.bytes));
  struct feri_op *o;
  ADD_OP(OP_EMBED);
  o->w = &m->tok_embd, o->a = ids, o->c = x;
  for (uint32_t li = 0; li < c->n_layer; li++) {
    const feri_llama_layer *L = &m->layers[li];
    TRY(add_use(l, m, L->attn_norm.off, L->attn_norm.bytes));
    ADD_OP(OP_NORM);
    o->vec = &L->attn_norm, o->a = x, o->c = h;
    TRY(add_linear(l, m, &L->wq, s->h, n, D, s->q, H * hd));
    TRY(add_linear(l, m, &L->wk, s->h, n, D, s->k, Hkv * hd));
    TRY(add_linear(l, m, &L->wv, s->h, n, D, s->v, Hkv * hd));
    ADD_OP(OP_ROPE);
    o->a = rows_view(s->q, n, H, hd), o->b = pos;
    ADD_OP(OP_ROPE);
    o->a = rows_view(s->k, n, Hkv, hd), o->b = pos;
    ADD_OP(OP_STORE_KV);
    o->layer = li, o->n = n;
    TRY(fer_kv_seq_view(s->kv, li, 0, &o->b));
    TRY(fer_kv_seq_view(s->kv, li, 1, &o->c));
    ADD_OP(OP_ATTN);
    o->layer = li, o->n = n;
    o->a = heads_view(s->q, n, H, hd), o->c = heads_view(s->att, n, H, hd);
    TRY(fer_kv_seq_view(s->kv, li, 0, &o->b));
    TRY(fer_kv_seq_view(s->kv, li, 1, &o->d));
    TRY(add_linear(l, m, &L->wo, s->att, n, H * hd, s->o, D));
    ADD_OP(OP_ADD);
    o->src = s->o, o->dst = s->x, o->n = n * D;
    TRY(add_use(l, m, L->ffn_norm.off, L->ffn_norm.bytes));
    ADD_OP(OP_NORM);
    o->vec = &L->ffn_norm, o->a = x, o->c = h;
    TRY(add_linear(l, m, &L->w_gate, s->h, n, D, s->gate, F));
    TRY(add_linear(l, m, &L->w_up, s->h, n, D, s->up, F));
    ADD_OP(OP_SWIGLU);
    o->a = feri_tensor_2d(s->gate, FER_DTYPE_F32, n, F), o->b = feri_tensor_2d(s->up, FER_DTYPE_F32, n, F);
    TRY(add_linear(l, m, &L->w_down, s->gate, n, F, s->o, D));
    ADD_OP(OP_ADD);
    o->src = s->o, o->dst = s->x, o->n = n * D;
  }
  TRY(add_use(l, m, m->output_norm.off, m->output_norm.bytes));
  ADD_OP(OP_NORM);
  o->vec = &m->output_norm;
  if (all_logits) { /* every row's logits: the norm of all rows into h (free after the last layer) */
    o->a = x, o->c = h;
    return add_linear(l, m, &m->output, s->h, n, D, NULL, c->n_vocab);
  }
  o->a = feri_tensor_2d(s->x + (size_t)(n - 1) * D, FER_DTYPE_F32, 1, D);
  o->c = feri_tensor_2d(s->last, FER_DTYPE_F32, 1, D);
  return add_linear(l, m, &m->output, s->last, 1, D, NULL, c->n_vocab);
}

/* Runs a kernel list for n tokens at positions p0.. (the scalar inputs of a replay). */
static fer_status run_step(feri_llama_seq *s, fer_threadpool *pool, const op_list *l, uint32_t p0, uint32_t n, float *logits) {
  const feri_llama *m = s->m;
  const feri_llama_config *c = &m->cfg;
  fer_attention_params ap;
  fer_attention_params_init(&ap);
  ap.q_pos0 = p0;
  for (size_t i = 0; i < l->n; i++) {
    const struct feri_op *o = &l->ops[i];
    switch (o->kind) {
      case OP_USE: TRY(use(m, o->off, o->bytes)); break;
      case OP_EMBED:
        if (o->w->quant) TRY(fer_embedding_quant(pool, &o->w->q, &o->a, &o->c));
        else TRY(fer_embedding(pool, &o->w->dense, &o->a, &o->c));
        break;
      case OP_NORM: TRY(fer_rms_norm(pool, &o->a, &o->vec->t, c->rms_eps, &o->c)); break;
      case OP_LINEAR: TRY(linear(s, pool, o->w, o->src, o->n, o->in, o->dst ? o->dst : logits, o->out)); break;
      case OP_ROPE: TRY(fer_rope(pool, &o->a, &o->b, FER_ROPE_GPTJ, c->rope_dims, c->rope_theta, &o->a)); break;
      case OP_STORE_KV:
        store_rows(&o->b, s->k, p0, n, c->n_head_kv, c->head_dim);
        store_rows(&o->c, s->v, p0, n, c->n_head_kv, c->head_dim);
        break;
      case OP_ATTN: {
        fer_tensor k = o->b, v = o->d;
        k.shape[1] = v.shape[1] = p0 + n; /* the KV length: a scalar input */
        TRY(fer_attention(pool, &o->a, &k, &v, &ap, &o->c, NULL, 0));
        break;
      }
      case OP_ADD:
        for (size_t j = 0; j < o->n; j++) o->dst[j] += o->src[j];
        break;
      default: /* OP_SWIGLU */
        TRY(fer_swiglu(pool, &o->a, &o->b, &o->a));
        break;
    }
  }
  return FER_STATUS_OK;
}

static void drop_plan(feri_llama_seq *s, uint32_t from, uint32_t to) {
  s->plan_held = false;
  s->plan_stats.invalidations++;
  snprintf(s->plan_stats.last_reason, sizeof s->plan_stats.last_reason,
           "KV grew from %u to %u tokens of capacity (unconditional policy)", from, to);
}

/* After a KV growth: does every binding the plan holds still have its address and strides? */
static bool bindings_unchanged(const feri_llama_seq *s, uint32_t *layer, uint32_t *kv) {
  for (size_t i = 0; i < s->plan.n; i++) {
    const struct feri_op *o = &s->plan.ops[i];
    if (o->kind != OP_ATTN) continue;
    for (uint32_t which = 0; which < 2; which++) {
      fer_tensor now;
      const fer_tensor *held = which ? &o->d : &o->b;
      if (fer_kv_seq_view(s->kv, o->layer, which, &now) != FER_STATUS_OK || now.data != held->data ||
          memcmp(now.strides, held->strides, sizeof now.strides) != 0) {
        *layer = o->layer, *kv = which;
        return false;
      }
    }
  }
  return true;
}

static fer_status forward(feri_llama_seq *s, fer_threadpool *pool, const int32_t *ids, uint32_t n, float *logits,
                          bool all_logits) {
  const feri_llama_config *c = &s->m->cfg;
  if (n == 0) return feri_fail(FER_STATUS_INVALID_ARG, "forward: no tokens");
  if (n > s->max_tokens - s->len) {
    return feri_fail(FER_STATUS_BUFFER_TOO_SMALL, "forward: %u tokens after %u exceed the sequence's %u", n, s->len, s->max_tokens);
  }
  for (uint32_t i = 0; i < n; i++) {
    if (ids[i] < 0 || (uint32_t)ids[i] >= c->n_vocab) return feri_fail(FER_STATUS_INVALID_ARG, "forward: id %d at %u", ids[i], i);
  }
  const uint32_t p0 = s->len, total = p0 + n;
  /* KV growth happens between plan replays: the pool is thawed only for it */
  fer_kv_seq_stats before, after;
  fer_kv_seq_get_stats(s->kv, &before);
  if (s->plan_held) fer_vmm_set_frozen(s->vmm, false);
  fer_status st = fer_kv_seq_extend(s->kv, total); /* all or nothing: on failure nothing changed */
  fer_kv_seq_get_stats(s->kv, &after);
  if (st == FER_STATUS_OK && s->plan_held && after.growth_events != before.growth_events) {
    uint32_t layer, kv;
    if (s->plan_policy == FERI_PLAN_UNCONDITIONAL) {
      drop_plan(s, (uint32_t)before.capacity_tokens, (uint32_t)after.capacity_tokens);
    } else if (!bindings_unchanged(s, &layer, &kv)) {
      drop_plan(s, 0, 0);
      snprintf(s->plan_stats.last_reason, sizeof s->plan_stats.last_reason,
               "layer %u %s moved when the KV grew (address-stable policy)", layer, kv ? "V" : "K");
    } else {
      s->plan_stats.growth_keeps++;
    }
  }
  if (st != FER_STATUS_OK) {
    if (s->plan_held) fer_vmm_set_frozen(s->vmm, true);
    return st;
  }
  memcpy(s->ids, ids, n * sizeof(int32_t));
  for (uint32_t i = 0; i < n; i++) s->pos[i] = (int32_t)(p0 + i);
  const op_list *run;
  if (n == 1 && s->plan_policy != FERI_PLAN_OFF) { /* one row: its logits are all the logits */
    if (s->plan_held) {
      s->plan_stats.replays++;
    } else {
      st = build_step(s, 1, false, &s->plan);
      if (st != FER_STATUS_OK) return st;
      s->plan_held = true;
      s->plan_stats.captures++;
    }
    run = &s->plan;
  } else {
    if (s->plan_policy != FERI_PLAN_OFF) {
      s->plan_stats.declines++;
      snprintf(s->plan_stats.last_reason, sizeof s->plan_stats.last_reason,
               "a step of %u tokens ran without a plan (plans cover the one-token step)", n);
    }
    st = build_step(s, n, all_logits, &s->once);
    if (st != FER_STATUS_OK) return st;
    run = &s->once;
  }
  if (s->plan_held) fer_vmm_set_frozen(s->vmm, true);
  st = run_step(s, pool, run, p0, n, logits);
  if (st == FER_STATUS_OK) s->len = total;
  return st;
}

fer_status feri_llama_forward(feri_llama_seq *s, fer_threadpool *pool, const int32_t *ids, uint32_t n, float *logits) {
  return forward(s, pool, ids, n, logits, false);
}

fer_status feri_llama_forward_all(feri_llama_seq *s, fer_threadpool *pool, const int32_t *ids, uint32_t n,
                                  float *logits) {
  return forward(s, pool, ids, n, logits, true);
}
