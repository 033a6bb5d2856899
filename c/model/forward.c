/* forward.c: the forward pass of a Llama-family model on ferrite's kernels.
 *
 * Per layer: h = rms_norm(x); q, k, v = h W^T (+ the qwen2 biases); qwen3 and gemma3 normalise
 * each head of q and k; RoPE on q and k (llama pairs dimensions GPT-J style, qwen and gemma NeoX
 * style; gemma3's local layers with their own base); k, v appended to the cache; attention
 * (causal, grouped-query, gemma3's local layers over a sliding window) over the cache;
 * x += o W^T; h = rms_norm(x); x += (act(h Wg^T) * h Wu^T) Wd^T with act silu or (gemma3) the tanh
 * GELU. gemma3 also scales the embedding by sqrt(n_embd) and normalises the attention and FFN
 * outputs (post norms) before each add. Then the final norm and the output projection (the
 * token embedding when the file has no output.weight), soft-capped when the file says so.
 *
 * A step is built as an ordered list of kernel calls with their operands bound (scratch buffers,
 * weights, the KV views' addresses and strides), then run. A one-token step's list is the decode
 * plan: kept and replayed for later tokens with only the scalar inputs changed (the token id and
 * position in seq-owned slots, the KV length and the logits pointer), as a CUDA graph is replayed
 * on the GPU. Prompts run in chunks of FERI_PREFILL_CHUNK tokens; a batched step runs one token of
 * many sequences with every projection at M = the number of sequences. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"
#include "kernels/gelu.h"
#include "kernels/quant.h"
#include "model/llama.h"
#include "model/model_internal.h"
#include "model/tp_candidates.h"
#include "model/tp_draw.h"
#include "model/tp_run.h"

#define TRY(call)                          \
  do {                                     \
    fer_status st_ = (call);               \
    if (st_ != FER_STATUS_OK) return st_;  \
  } while (0)

/* Writes rows [n, heads, dim] of f32 into positions p0.. of a cache view [heads, tokens, dim]
 * (for Q8_0 [heads, tokens, dim / 32 blocks]: each row rounded by feri_quantize_q8_0). */
static void store_rows(const fer_tensor *view, const float *rows, uint32_t p0, uint32_t n, uint32_t heads, uint32_t dim) {
  for (uint32_t t = 0; t < n; t++) {
    for (uint32_t h = 0; h < heads; h++) {
      const float *src = rows + ((size_t)t * heads + h) * dim;
      char *dst = (char *)view->data + (int64_t)h * view->strides[0] + (int64_t)(p0 + t) * view->strides[1];
      if (view->dtype == FER_DTYPE_F32 && view->strides[2] == 4) {
        memcpy(dst, src, dim * sizeof(float));
        continue;
      }
      if (view->dtype == FER_DTYPE_Q8_0) { /* the row's blocks are packed (fer_kv_seq_view) */
        feri_quantize_q8_0(src, dim, (uint8_t *)dst);
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
static fer_status linear(const feri_llama *m, const feri_scratch *sc, fer_threadpool *pool, const feri_linear *w,
                         const float *x, uint32_t n, uint32_t in, float *y, uint32_t out) {
  TRY(use(m, w->off, w->bytes));
  fer_tensor a = feri_tensor_2d((void *)x, FER_DTYPE_F32, n, in);
  fer_tensor c = feri_tensor_2d(y, FER_DTYPE_F32, n, out);
  if (w->quant && !m->matmul_exact)
    return feri_matmul_quant_i8_panel(pool, &a, &w->q, w->panel.data ? &w->panel : NULL, &c, sc->qws, sc->qws_bytes);
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

/* ---- building a step ------------------------------------------------------------------------ */

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

static fer_status add_bias(op_list *l, const feri_llama *m, const feri_vector *b, float *y, uint32_t n, uint32_t out) {
  TRY(add_use(l, m, b->off, b->bytes));
  struct feri_op *o;
  ADD_OP(OP_BIAS);
  o->vec = b, o->dst = y, o->n = n, o->out = out;
  return FER_STATUS_OK;
}

/* RMSNorm of each head of rows [n, heads, dim] in place (qwen3's QK-norm). */
static fer_status add_head_norm(op_list *l, const feri_llama *m, const feri_vector *w, float *p, uint32_t n,
                                uint32_t heads, uint32_t dim) {
  TRY(add_use(l, m, w->off, w->bytes));
  struct feri_op *o;
  ADD_OP(OP_NORM);
  o->vec = w;
  o->a = o->c = feri_tensor_2d(p, FER_DTYPE_F32, (int64_t)n * heads, dim);
  return FER_STATUS_OK;
}

/* Heads [h0, h0 + hn) of a view whose first axis is heads. */
static fer_tensor head_slice(fer_tensor t, uint32_t h0, uint32_t hn) {
  t.data = (char *)t.data + (int64_t)h0 * t.strides[0];
  t.shape[0] = hn;
  return t;
}

/* The KV view of a layer (which 0: K, 1: V) cut to KV heads [kv0, kv0 + kvn). */
static fer_status kv_view(fer_kv_seq *kv, uint32_t layer, uint32_t which, uint32_t kv0, uint32_t kvn, fer_tensor *out) {
  TRY(fer_kv_seq_view(kv, layer, which, out));
  *out = head_slice(*out, kv0, kvn);
  return FER_STATUS_OK;
}

/* Attention ops of the step's rows [row, row + k) of sequence s (one per head group of the
 * model's share, tp_run.h), or of the whole single-sequence step (s NULL: kind OP_ATTN). */
static fer_status add_attention(op_list *l, const feri_llama *m, feri_scratch *sc, fer_kv_seq *kv, feri_llama_seq *s,
                                uint32_t li, uint32_t row, uint32_t k) {
  const uint32_t H = m->H, hd = m->cfg.head_dim;
  struct feri_op *o;
  for (uint32_t g = 0; g < m->n_groups; g++) {
    const feri_attn_group *G = &m->groups[g];
    ADD_OP(s ? OP_ATTN_ROWS : OP_ATTN);
    o->layer = li, o->row = row, o->n = k, o->seq = s, o->kv0 = G->kv0, o->kvn = G->kvn;
    o->a = head_slice(heads_view(sc->q + (size_t)row * H * hd, k, H, hd), G->q0, G->qn);
    o->c = head_slice(heads_view(sc->att + (size_t)row * H * hd, k, H, hd), G->q0, G->qn);
    TRY(kv_view(kv, li - m->l0, 0, G->kv0, G->kvn, &o->b)); /* this stage's KV layers */
    TRY(kv_view(kv, li - m->l0, 1, G->kv0, G->kvn, &o->d));
  }
  return FER_STATUS_OK;
}

/* Tensor parallelism: the sum of every rank's partial x[0 .. n) after a split projection. */
/* The world rank of share t of pipeline stage `stage` (tensor parallelism within stages: stage x
 * tp.size + t; pipeline stages alone: the stage). */
static int rank_of(const feri_llama *m, uint32_t stage, uint32_t t) { return (int)(stage * m->tp.size + t); }

static fer_status add_allreduce(op_list *l, const feri_llama *m, float *x, uint32_t n) {
  if (m->tp.size < 2) return FER_STATUS_OK; /* one process, or pipeline stages: whole projections */
  struct feri_op *o;
  ADD_OP(OP_ALLREDUCE);
  o->dst = x, o->n = n;
  return FER_STATUS_OK;
}

/* The output projection of rows [x, n_out): into the call's logits in one process; into the
 * scratch's slice with several ranks (OP_LINEAR with row 1: the slice is found when the step
 * runs, since the scratch may grow), then gathered onto rank 0 (tensor parallelism) or sent to it
 * whole (the last pipeline stage). */
static fer_status add_logits(op_list *l, const feri_llama *m, const float *x, uint32_t n_out, uint32_t candidates) {
  TRY(add_linear(l, m, &m->output, x, n_out, m->cfg.n_embd, NULL, m->V));
  if (!m->comm) return FER_STATUS_OK;
  l->ops[l->n - 1].row = 1;
  struct feri_op *o;
  const bool whole = m->stages > 1 && m->tp.size < 2; /* a last stage of one rank sends its rows whole */
  ADD_OP(whole ? OP_SEND : OP_GATHER);
  o->n = whole ? n_out * m->cfg.n_vocab : n_out; /* OP_SEND (src NULL): the slice's floats to rank 0 */
  o->out = whole ? 0 : candidates;              /* OP_GATHER: 0 whole rows, k the best k a rank */
  return FER_STATUS_OK;
}

/* The rows of a step: n tokens of one sequence `one` (at positions from its length), or the
 * segments `segs` of a mixed step (segment i's rows follow segment i - 1's; n rows in all). */
typedef struct step_rows {
  feri_llama_seq *one;
  const feri_llama_segment *segs;
  uint32_t n_segs;
  uint32_t n;
  uint32_t candidates; /* a mixed step's logits as each rank's best candidates (feri_llama_batch_set_candidates) */
  bool defer_logits;   /* pipeline stage 0 of a micro-batch: the caller takes the logits (mixed_run) */
} step_rows;

/* A pipeline stage before the last: its rows to the next stage; stage 0 then takes the step's
 * result from the last stage into the call's logits (rows of the vocabulary, or of n_embd for
 * hidden states), soft-capped here as the last stage would in one process. */
static fer_status add_stage_end(op_list *l, const feri_llama *m, float *x, const step_rows *r, int logits) {
  const uint32_t D = m->cfg.n_embd, V = m->cfg.n_vocab;
  struct feri_op *o;
  ADD_OP(OP_SEND);
  o->src = x, o->n = r->n * D, o->row = (uint32_t)rank_of(m, m->stage + 1, m->tp.rank);
  if (m->stage != 0 || m->tp.rank != 0 || logits == LOGITS_NONE || r->defer_logits) return FER_STATUS_OK;
  uint32_t rows = logits == LOGITS_ALL || logits == LOGITS_HIDDEN ? r->n : 1;
  if (logits == LOGITS_SELECTED) {
    rows = 0;
    for (uint32_t i = 0; i < r->n_segs; i++) rows += r->segs[i].logits;
    if (rows == 0) return FER_STATUS_OK;
  }
  if (m->tp.size > 1 && logits != LOGITS_HIDDEN) { /* the last stage's shares: slices or candidates */
    ADD_OP(OP_GATHER);
    o->n = rows, o->out = logits == LOGITS_SELECTED ? r->candidates : 0;
  } else {
    ADD_OP(OP_RECV);
    o->dst = NULL, o->n = rows * (logits == LOGITS_HIDDEN ? D : V), o->row = (uint32_t)rank_of(m, m->stages - 1, 0);
  }
  /* a draw's ranks soft-cap their slices themselves (draw_rows) */
  const bool drawn = logits == LOGITS_SELECTED && r->candidates == FERI_TP_DRAW && m->tp.size > 1;
  if (m->cfg.logit_softcap != 0.0f && logits != LOGITS_HIDDEN && !drawn) {
    ADD_OP(OP_SOFTCAP);
    o->n = rows, o->f = m->cfg.logit_softcap;
  }
  return FER_STATUS_OK;
}

/* Builds the kernel list of a step over scratch sc (the KV views as they are bound now). */
static fer_status build_step(const feri_llama *m, feri_scratch *sc, const step_rows *r, int logits, op_list *l) {
  const feri_llama_config *c = &m->cfg;
  /* this rank's heads and FFN columns (all of them in one process) */
  const uint32_t D = c->n_embd, H = m->H, Hkv = m->Hkv, hd = c->head_dim, F = m->F, n = r->n;
  l->n = 0;
  fer_tensor ids;
  memset(&ids, 0, sizeof ids);
  ids.data = sc->ids, ids.dtype = FER_DTYPE_I32, ids.rank = 1, ids.shape[0] = n, ids.strides[0] = 4;
  fer_tensor pos = ids;
  pos.data = sc->pos;
  fer_tensor x = feri_tensor_2d(sc->x, FER_DTYPE_F32, n, D), h = feri_tensor_2d(sc->h, FER_DTYPE_F32, n, D);
  struct feri_op *o;
  const bool first = m->stage == 0, last = m->stage + 1 == m->stages; /* pipeline stages (both in one process) */
  if (first) {
    TRY(add_use(l, m, m->tok_embd.off, m->tok_embd.bytes));
    ADD_OP(OP_EMBED);
    o->w = &m->tok_embd, o->a = ids, o->c = x;
    if (c->embd_scale != 0.0f) {
      ADD_OP(OP_SCALE);
      o->dst = sc->x, o->n = n * D, o->f = c->embd_scale;
    }
  } else { /* the previous stage's output */
    ADD_OP(OP_RECV);
    o->dst = sc->x, o->n = n * D, o->row = (uint32_t)rank_of(m, m->stage - 1, m->tp.rank);
  }
  for (uint32_t li = m->l0; li < m->l1; li++) {
    const feri_llama_layer *L = &m->layers[li];
    TRY(add_use(l, m, L->attn_norm.off, L->attn_norm.bytes));
    ADD_OP(OP_NORM);
    o->vec = &L->attn_norm, o->a = x, o->c = h;
    TRY(add_linear(l, m, &L->wq, sc->h, n, D, sc->q, H * hd));
    TRY(add_linear(l, m, &L->wk, sc->h, n, D, sc->k, Hkv * hd));
    TRY(add_linear(l, m, &L->wv, sc->h, n, D, sc->v, Hkv * hd));
    if (L->has_qkv_bias) {
      TRY(add_bias(l, m, &L->bq, sc->q, n, H * hd));
      TRY(add_bias(l, m, &L->bk, sc->k, n, Hkv * hd));
      TRY(add_bias(l, m, &L->bv, sc->v, n, Hkv * hd));
    }
    if (L->has_qk_norm) {
      TRY(add_head_norm(l, m, &L->q_norm, sc->q, n, H, hd));
      TRY(add_head_norm(l, m, &L->k_norm, sc->k, n, Hkv, hd));
    }
    ADD_OP(OP_ROPE);
    o->a = rows_view(sc->q, n, H, hd), o->b = pos, o->f = L->rope_theta;
    ADD_OP(OP_ROPE);
    o->a = rows_view(sc->k, n, Hkv, hd), o->b = pos, o->f = L->rope_theta;
    if (r->one) {
      ADD_OP(OP_STORE_KV);
      o->layer = li, o->n = n;
      TRY(fer_kv_seq_view(r->one->kv, li - m->l0, 0, &o->b));
      TRY(fer_kv_seq_view(r->one->kv, li - m->l0, 1, &o->c));
      TRY(add_attention(l, m, sc, r->one->kv, NULL, li, 0, n));
    } else {
      uint32_t row = 0;
      for (uint32_t i = 0; i < r->n_segs; row += r->segs[i].n, i++) {
        feri_llama_seq *s = r->segs[i].seq;
        const uint32_t k = r->segs[i].n;
        ADD_OP(OP_STORE_ROWS);
        o->layer = li, o->row = row, o->n = k, o->seq = s;
        TRY(fer_kv_seq_view(s->kv, li - m->l0, 0, &o->b));
        TRY(fer_kv_seq_view(s->kv, li - m->l0, 1, &o->c));
        TRY(add_attention(l, m, sc, s->kv, s, li, row, k));
      }
    }
    TRY(add_linear(l, m, &L->wo, sc->att, n, H * hd, sc->o, D));
    TRY(add_allreduce(l, m, sc->o, n * D));
    if (c->post_norms) TRY(add_head_norm(l, m, &L->post_attn_norm, sc->o, n, 1, D));
    ADD_OP(OP_ADD);
    o->src = sc->o, o->dst = sc->x, o->n = n * D;
    TRY(add_use(l, m, L->ffn_norm.off, L->ffn_norm.bytes));
    ADD_OP(OP_NORM);
    o->vec = &L->ffn_norm, o->a = x, o->c = h;
    TRY(add_linear(l, m, &L->w_gate, sc->h, n, D, sc->gate, F));
    TRY(add_linear(l, m, &L->w_up, sc->h, n, D, sc->up, F));
    ADD_OP(c->ffn_act == FERI_ACT_GELU_TANH ? OP_GEGLU : OP_SWIGLU);
    o->a = feri_tensor_2d(sc->gate, FER_DTYPE_F32, n, F), o->b = feri_tensor_2d(sc->up, FER_DTYPE_F32, n, F);
    o->n = n, o->out = F;
    TRY(add_linear(l, m, &L->w_down, sc->gate, n, F, sc->o, D));
    TRY(add_allreduce(l, m, sc->o, n * D));
    if (c->post_norms) TRY(add_head_norm(l, m, &L->post_ffw_norm, sc->o, n, 1, D));
    ADD_OP(OP_ADD);
    o->src = sc->o, o->dst = sc->x, o->n = n * D;
  }
  if (!last) return add_stage_end(l, m, sc->x, r, logits);
  if (logits == LOGITS_NONE) return FER_STATUS_OK;
  if (logits == LOGITS_HIDDEN) { /* the output norm of every row into h, then out (to rank 0 from a last stage) */
    TRY(add_use(l, m, m->output_norm.off, m->output_norm.bytes));
    ADD_OP(OP_NORM);
    o->vec = &m->output_norm, o->a = x, o->c = h;
    if (!first && m->tp.rank != 0) return FER_STATUS_OK; /* share 0 of the last stage sends them */
    ADD_OP(first ? OP_COPY_OUT : OP_SEND);
    o->src = sc->h, o->n = n * D;
    return FER_STATUS_OK;
  }
  uint32_t n_out = 1; /* rows of logits */
  if (logits == LOGITS_SELECTED) { /* the last row of each segment that wants logits, gathered into o */
    n_out = 0;
    uint32_t row = 0;
    for (uint32_t i = 0; i < r->n_segs; row += r->segs[i].n, i++) {
      if (!r->segs[i].logits) continue;
      ADD_OP(OP_COPY_ROW);
      o->src = sc->x + (size_t)(row + r->segs[i].n - 1) * D, o->dst = sc->o + (size_t)n_out++ * D, o->n = D;
    }
    if (n_out == 0) return FER_STATUS_OK;
  }
  TRY(add_use(l, m, m->output_norm.off, m->output_norm.bytes));
  ADD_OP(OP_NORM);
  o->vec = &m->output_norm;
  if (logits == LOGITS_SELECTED) {
    o->a = feri_tensor_2d(sc->o, FER_DTYPE_F32, n_out, D), o->c = feri_tensor_2d(sc->h, FER_DTYPE_F32, n_out, D);
    TRY(add_logits(l, m, sc->h, n_out, r->candidates));
  } else if (logits == LOGITS_ALL) { /* every row's logits: the norm of all rows into h (free after the last layer) */
    o->a = x, o->c = h;
    TRY(add_logits(l, m, sc->h, n, 0));
  } else {
    o->a = feri_tensor_2d(sc->x + (size_t)(n - 1) * D, FER_DTYPE_F32, 1, D);
    o->c = feri_tensor_2d(sc->last, FER_DTYPE_F32, 1, D);
    TRY(add_logits(l, m, sc->last, 1, 0));
  }
  /* a draw's ranks soft-cap their slices themselves (draw_rows) */
  const bool drawn = logits == LOGITS_SELECTED && r->candidates == FERI_TP_DRAW && m->tp.size > 1;
  if (c->logit_softcap != 0.0f && !drawn) {
    ADD_OP(OP_SOFTCAP);
    o->n = logits == LOGITS_ALL ? n : n_out, o->f = c->logit_softcap;
  }
  return FER_STATUS_OK;
}

/* The scratch's logits slice for n rows of the widest rank's vocabulary share. */
static fer_status tp_slice(feri_scratch *sc, const feri_llama *m, uint32_t n, float **out) {
  const size_t need = (size_t)n * (m->vocab_begin[1] - m->vocab_begin[0]);
  if (need > sc->tp_logits_floats) {
    float *p = realloc(sc->tp_logits, need * sizeof *p);
    if (!p) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "forward: logits slice of %zu floats", need);
    sc->tp_logits = p, sc->tp_logits_floats = need;
  }
  *out = sc->tp_logits;
  return FER_STATUS_OK;
}

/* Every rank's logits slice of n rows onto rank 0's logits (the other ranks send theirs): rank
 * r's rows are columns [vocab_begin[r], vocab_begin[r + 1]). Rank 0 places its own slice, then
 * receives each rank's into the same scratch and places it. */
static fer_status gather_logits(const feri_llama *m, feri_scratch *sc, uint32_t n, float *logits) {
  const uint32_t V = m->cfg.n_vocab;
  if (feri_comm_rank(m->comm) != 0) return feri_comm_send(m->comm, sc->tp_logits, (size_t)n * m->V * sizeof(float), 0);
  float *slice;
  TRY(tp_slice(sc, m, n, &slice)); /* rank 0 of a first stage has none of its own yet */
  for (uint32_t r = 0; r < m->tp.size; r++) {
    const uint32_t v0 = m->vocab_begin[r], vn = m->vocab_begin[r + 1] - v0;
    const int from = rank_of(m, m->stages - 1, r);
    if (from != 0) TRY(feri_comm_recv(m->comm, slice, (size_t)n * vn * sizeof(float), from));
    for (uint32_t row = 0; row < n; row++) memcpy(logits + (size_t)row * V + v0, slice + (size_t)row * vn, vn * sizeof(float));
  }
  return FER_STATUS_OK;
}

static fer_status grow_candidates(feri_tp_candidate **buf, size_t *have, size_t need) {
  if (need <= *have) return FER_STATUS_OK;
  feri_tp_candidate *p = realloc(*buf, need * sizeof *p);
  if (!p) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "forward: %zu logits candidates", need);
  *buf = p, *have = need;
  return FER_STATUS_OK;
}

/* As gather_logits, each rank sending only the k best of each row's slice and the ties they cut
 * (tp_candidates.h): rank 0's rows are -inf but for every rank's candidates. A rank's first
 * message holds, for each row, its k best and then {number of cut ties, 0}; where a row cut any,
 * a second message holds the ties, row after row (rare: only a tie exactly at the boundary). */
static fer_status gather_candidates(const feri_llama *m, feri_scratch *sc, uint32_t n, uint32_t k, float *logits) {
  const size_t per_row = (size_t)k + 1, fixed = (size_t)n * per_row;
  TRY(grow_candidates(&sc->tp_cand, &sc->tp_cand_n, fixed));
  const uint32_t V = m->cfg.n_vocab, v0 = m->vocab_begin[m->tp.rank];
  const bool sliced = m->stage + 1 == m->stages; /* the last stage's ranks hold the head's slices */
  size_t ties = 0;
  for (uint32_t row = 0; row < n && sliced; row++) {
    feri_tp_candidate *c = sc->tp_cand + row * per_row;
    const float *slice = sc->tp_logits + (size_t)row * m->V;
    feri_tp_top_candidates(slice, m->V, v0, k, c);
    c[k] = (feri_tp_candidate){(int32_t)feri_tp_cut_ties(slice, m->V, v0, c[k - 1], NULL), 0.0f};
    ties += (size_t)c[k].id;
  }
  TRY(grow_candidates(&sc->tp_ties, &sc->tp_ties_n, ties));
  for (uint32_t row = 0, at = 0; row < n && ties > 0; row++) {
    const feri_tp_candidate *c = sc->tp_cand + row * per_row;
    at += feri_tp_cut_ties(sc->tp_logits + (size_t)row * m->V, m->V, v0, c[k - 1], sc->tp_ties + at);
  }
  if (feri_comm_rank(m->comm) != 0) {
    TRY(feri_comm_send(m->comm, sc->tp_cand, fixed * sizeof *sc->tp_cand, 0));
    return ties > 0 ? feri_comm_send(m->comm, sc->tp_ties, ties * sizeof *sc->tp_ties, 0) : FER_STATUS_OK;
  }
  for (size_t i = 0; i < (size_t)n * V; i++) logits[i] = -INFINITY;
  for (uint32_t r = 0; r < m->tp.size; r++) {
    const int from = rank_of(m, m->stages - 1, r);
    if (from != 0) {
      TRY(feri_comm_recv(m->comm, sc->tp_cand, fixed * sizeof *sc->tp_cand, from));
      ties = 0;
      for (uint32_t row = 0; row < n; row++) {
        const int32_t t = sc->tp_cand[row * per_row + k].id;
        if (t < 0 || (uint32_t)t > m->vocab_begin[r + 1] - m->vocab_begin[r])
          return feri_fail(FER_STATUS_DEVICE_ERROR, "forward: rank %u sent %d ties for row %u", r, t, row);
        ties += (size_t)t;
      }
      TRY(grow_candidates(&sc->tp_ties, &sc->tp_ties_n, ties));
      if (ties > 0) TRY(feri_comm_recv(m->comm, sc->tp_ties, ties * sizeof *sc->tp_ties, from));
    }
    for (uint32_t row = 0, at = 0; row < n; row++) {
      const feri_tp_candidate *c = sc->tp_cand + row * per_row;
      feri_tp_place_candidates(c, k, logits + (size_t)row * V, V);
      if (c[k].id > 0) feri_tp_place_candidates(sc->tp_ties + at, (uint32_t)c[k].id, logits + (size_t)row * V, V);
      at += (uint32_t)c[k].id;
    }
  }
  return FER_STATUS_OK;
}

/* As llama.cpp: scale by 1 / cap, tanh, scale by cap. */
static void softcap(float *logits, size_t n, float cap) {
  const float inv = 1.0f / cap;
  for (size_t j = 0; j < n; j++) logits[j] = tanhf(logits[j] * inv) * cap;
}

/* A draw's result for one row, as the last stage's first share hands it to rank 0. */
typedef struct draw_result {
  int32_t id; /* the token; -1: none (every value -inf); -2: the row holds NaN or +inf and comes whole */
  float value; /* a greedy row's value (the sampler sees it); 0 for a drawn one */
} draw_result;

/* A draw the ranks make together (tp_draw.h) for the step's n selected rows, row i at temperature
 * sc->draw_t[i] (0: greedy) with uniform sc->draw_u[i]. The ranks holding the head's slices (the
 * last stage's shares; every rank without stages) soft-cap their slices first (as rank 0 would the
 * gathered rows), then over their own communicator: the heads all-gathered; the running sums carried
 * share to share; the last share's totals broadcast; the finds gathered on the first share, which
 * hands rank 0 each row's token (it is rank 0 without stages). The rows holding NaN or +inf come to
 * rank 0 whole. Rank 0's rows: -inf but the token (a greedy token's value, else 0), or the whole
 * row. A step with no sampled row skips the sums. */
static fer_status draw_rows(const feri_llama *m, feri_scratch *sc, uint32_t n, float *logits) {
  const uint32_t p = m->tp.size, me = m->tp.rank, vn = m->V, v0 = m->vocab_begin[me], V = m->cfg.n_vocab;
  const bool holds = m->stage + 1 == m->stages, leads = feri_comm_rank(m->comm) == 0;
  feri_comm *group = m->tp_comm ? m->tp_comm : m->comm; /* the shares of the last stage, ranked by share */
  const size_t bytes = (size_t)n * (p + 1) * sizeof(feri_tp_draw_head) + (size_t)n * 2 * sizeof(double) +
                       (size_t)n * (p + 1) * sizeof(feri_tp_draw_find) + (size_t)n * sizeof(draw_result);
  if (bytes > sc->tp_draw_bytes) {
    void *q = realloc(sc->tp_draw, bytes);
    if (!q) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "forward: a draw over %u rows", n);
    sc->tp_draw = q, sc->tp_draw_bytes = bytes;
  }
  feri_tp_draw_head *mine = sc->tp_draw, *heads = mine + n; /* heads: share-major, p x n */
  double *carry = (double *)(heads + (size_t)p * n), *total = carry + n;
  feri_tp_draw_find *find = (feri_tp_draw_find *)(total + n), *finds = find + n;
  draw_result *res = (draw_result *)(finds + (size_t)p * n);
  float *x = sc->tp_logits;
  if (holds) {
    if (m->cfg.logit_softcap != 0.0f) softcap(x, (size_t)n * vn, m->cfg.logit_softcap);
    for (uint32_t row = 0; row < n; row++) mine[row] = feri_tp_draw_head_of(x + (size_t)row * vn, vn, v0, sc->draw_t[row]);
    TRY(feri_comm_allgather(group, mine, n * sizeof *mine, heads));
    bool sampled = false;
    for (uint32_t row = 0; row < n; row++) {
      mine[row] = feri_tp_draw_merge(heads + row, p, n); /* now the row's */
      sampled |= !mine[row].nonfinite && sc->draw_t[row] != 0.0f && mine[row].max != -INFINITY;
    }
    /* which rows draw by sums: every share decides alike from the merged heads */
#define SUMMED(row) (!mine[row].nonfinite && sc->draw_t[row] != 0.0f && mine[row].max != -INFINITY)
    if (sampled) {
      for (uint32_t row = 0; row < n; row++) carry[row] = 0.0;
      if (me > 0) TRY(feri_comm_recv(group, carry, n * sizeof *carry, (int)me - 1));
      for (uint32_t row = 0; row < n; row++)
        total[row] = SUMMED(row) ? feri_tp_draw_sum(x + (size_t)row * vn, vn, sc->draw_t[row], mine[row].max, carry[row]) : 0.0;
      if (me + 1 < p) TRY(feri_comm_send(group, total, n * sizeof *total, (int)me + 1));
      TRY(feri_comm_broadcast(group, total, n * sizeof *total, (int)p - 1)); /* the last share's: the totals */
      for (uint32_t row = 0; row < n; row++)
        find[row] = SUMMED(row) ? feri_tp_draw_find_in(x + (size_t)row * vn, vn, v0, sc->draw_t[row], mine[row].max,
                                                      carry[row], sc->draw_u[row] * total[row])
                                : (feri_tp_draw_find){-1, -1};
      TRY(feri_comm_gather(group, find, n * sizeof *find, me == 0 ? finds : NULL, 0));
    }
    if (me == 0) {
      for (uint32_t row = 0; row < n; row++) {
        res[row] = (draw_result){-1, 0.0f};
        if (mine[row].nonfinite) res[row].id = -2;
        else if (sc->draw_t[row] == 0.0f) res[row] = (draw_result){mine[row].argmax, mine[row].max};
        else if (SUMMED(row)) res[row].id = feri_tp_draw_choose(finds + row, p, n);
      }
      if (!leads) TRY(feri_comm_send(m->comm, res, n * sizeof *res, 0));
    }
#undef SUMMED
    for (uint32_t row = 0; row < n && !leads; row++) /* the whole rows' slices, row after row */
      if (mine[row].nonfinite) TRY(feri_comm_send(m->comm, x + (size_t)row * vn, vn * sizeof(float), 0));
  }
  if (!leads) return FER_STATUS_OK;
  if (!holds) TRY(feri_comm_recv(m->comm, res, n * sizeof *res, rank_of(m, m->stages - 1, 0)));
  for (uint32_t row = 0; row < n; row++) {
    float *out = logits + (size_t)row * V;
    for (uint32_t v = 0; v < V; v++) out[v] = -INFINITY;
    if (res[row].id == -2) { /* whole: each share's slice (rank 0's own, without stages) */
      for (uint32_t r = 0; r < p; r++) {
        const int from = rank_of(m, m->stages - 1, r);
        const size_t len = m->vocab_begin[r + 1] - m->vocab_begin[r];
        if (from == 0) memcpy(out + m->vocab_begin[r], x + (size_t)row * vn, len * sizeof(float));
        else TRY(feri_comm_recv(m->comm, out + m->vocab_begin[r], len * sizeof(float), from));
      }
    } else if (res[row].id >= 0 && (uint32_t)res[row].id < V) {
      out[res[row].id] = res[row].value;
    }
  }
  return FER_STATUS_OK;
}

/* Runs a kernel list; a single-sequence step's n tokens sit at positions p0.. (the scalar inputs
 * of a replay), a batched step's row i at the length of its sequence. logits: NULL on the ranks
 * other than 0 of a tensor-parallel model. */
static fer_status run_step(const feri_llama *m, feri_scratch *sc, fer_threadpool *pool, const op_list *l,
                           uint32_t p0, uint32_t n, float *logits) {
  const feri_llama_config *c = &m->cfg;
  fer_attention_params ap;
  fer_attention_params_init(&ap);
  ap.q_pos0 = p0;
  ap.scale = c->attn_scale;
  for (size_t i = 0; i < l->n; i++) {
    const struct feri_op *o = &l->ops[i];
    switch (o->kind) {
      case OP_USE: TRY(use(m, o->off, o->bytes)); break;
      case OP_EMBED:
        if (o->w->quant) TRY(fer_embedding_quant(pool, &o->w->q, &o->a, &o->c));
        else TRY(fer_embedding(pool, &o->w->dense, &o->a, &o->c));
        break;
      case OP_NORM: TRY(fer_rms_norm(pool, &o->a, &o->vec->t, c->rms_eps, &o->c)); break;
      case OP_LINEAR: {
        float *y = o->dst ? o->dst : logits;
        if (o->row == 1) TRY(tp_slice(sc, m, o->n, &y)); /* this rank's logits slice */
        TRY(linear(m, sc, pool, o->w, o->src, o->n, o->in, y, o->out));
        break;
      }
      case OP_SEND:
      case OP_RECV: { /* pipeline stages: a stage's rows, or the last stage's logits for rank 0 */
        feri_comm_stats before;
        feri_comm_get_stats(m->comm, &before);
        if (o->kind == OP_SEND) TRY(feri_comm_send(m->comm, o->src ? o->src : sc->tp_logits, (size_t)o->n * 4, (int)o->row));
        else TRY(feri_comm_recv(m->comm, o->dst ? o->dst : logits, (size_t)o->n * 4, (int)o->row));
        feri_tp_count(m, (o->src || o->dst) ? FERI_TP_COUNT_STAGES : FERI_TP_COUNT_LOGITS, &before);
        break;
      }
      case OP_ALLREDUCE:
      case OP_GATHER: {
        feri_comm *via = o->kind == OP_ALLREDUCE && m->tp_comm ? m->tp_comm : m->comm; /* a stage's ranks, or all */
        feri_comm_stats before;
        feri_comm_get_stats(via, &before);
        if (o->kind == OP_ALLREDUCE && m->tp_wire == FERI_TP_WIRE_Q8 && o->n % 32 == 0)
          TRY(feri_comm_allreduce_sum_q8(via, o->dst, o->n));
        else if (o->kind == OP_ALLREDUCE) TRY(feri_comm_allreduce_sum_f32(via, o->dst, o->n));
        else if (o->out == FERI_TP_DRAW) TRY(draw_rows(m, sc, o->n, logits));
        else if (o->out > 0) TRY(gather_candidates(m, sc, o->n, o->out, logits));
        else TRY(gather_logits(m, sc, o->n, logits));
        feri_tp_count_on(m, via, o->kind == OP_ALLREDUCE ? FERI_TP_COUNT_ALLREDUCE : FERI_TP_COUNT_LOGITS, &before);
        break;
      }
      case OP_BIAS: {
        const float *b = o->vec->t.data;
        for (uint32_t row = 0; row < o->n; row++)
          for (uint32_t j = 0; j < o->out; j++) o->dst[(size_t)row * o->out + j] += b[j];
        break;
      }
      case OP_ROPE: TRY(fer_rope(pool, &o->a, &o->b, c->rope_pairing, c->rope_dims, o->f, &o->a)); break;
      case OP_STORE_KV:
        store_rows(&o->b, sc->k, p0, n, m->Hkv, c->head_dim);
        store_rows(&o->c, sc->v, p0, n, m->Hkv, c->head_dim);
        break;
      case OP_ATTN: {
        fer_tensor k = o->b, v = o->d;
        k.shape[1] = v.shape[1] = p0 + n; /* the KV length: a scalar input */
        ap.window = (int32_t)m->layers[o->layer].window;
        TRY(fer_attention(pool, &o->a, &k, &v, &ap, &o->c, NULL, 0));
        break;
      }
      case OP_STORE_ROWS: {
        const size_t kvd = (size_t)m->Hkv * c->head_dim;
        store_rows(&o->b, sc->k + o->row * kvd, o->seq->len, o->n, m->Hkv, c->head_dim);
        store_rows(&o->c, sc->v + o->row * kvd, o->seq->len, o->n, m->Hkv, c->head_dim);
        break;
      }
      case OP_ATTN_ROWS: {
        fer_attention_params rp = ap;
        rp.q_pos0 = o->seq->len;
        rp.window = (int32_t)m->layers[o->layer].window;
        fer_tensor k = o->b, v = o->d;
        k.shape[1] = v.shape[1] = o->seq->len + o->n;
        TRY(fer_attention(pool, &o->a, &k, &v, &rp, &o->c, NULL, 0));
        break;
      }
      case OP_COPY_ROW: memcpy(o->dst, o->src, (size_t)o->n * sizeof(float)); break;
      case OP_COPY_OUT:
        if (logits) memcpy(logits, o->src, (size_t)o->n * sizeof(float));
        break;
      case OP_ADD:
        for (size_t j = 0; j < o->n; j++) o->dst[j] += o->src[j];
        break;
      case OP_GEGLU: TRY(feri_geglu(pool, m->gelu_lut, o->a.data, o->b.data, o->n, o->out)); break;
      case OP_SCALE:
        for (size_t j = 0; j < o->n; j++) o->dst[j] *= o->f;
        break;
      case OP_SOFTCAP: /* a tensor-parallel rank other than 0 has no logits: rank 0 holds the gathered ones */
        if (logits) softcap(logits, (size_t)o->n * c->n_vocab, o->f);
        break;
      default: /* OP_SWIGLU */
        TRY(fer_swiglu(pool, &o->a, &o->b, &o->a));
        break;
    }
  }
  return FER_STATUS_OK;
}

/* ---- plans and KV growth -------------------------------------------------------------------- */

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
      if (kv_view(s->kv, o->layer - s->m->l0, which, o->kv0, o->kvn, &now) != FER_STATUS_OK || now.data != held->data ||
          memcmp(now.strides, held->strides, sizeof now.strides) != 0) {
        *layer = o->layer, *kv = which;
        return false;
      }
    }
  }
  return true;
}

/* Extends the sequence's KV to `total` live tokens. KV growth happens between plan replays: the
 * pool is thawed only for it, and a held plan is dropped or kept by the sequence's policy. On
 * failure nothing changed. */
static fer_status extend_kv(feri_llama_seq *s, uint32_t total) {
  fer_kv_seq_stats before, after;
  fer_kv_seq_get_stats(s->kv, &before);
  if (s->plan_held) fer_vmm_set_frozen(s->vmm, false);
  fer_status st = fer_kv_seq_extend(s->kv, total); /* all or nothing */
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
  if (s->plan_held) fer_vmm_set_frozen(s->vmm, true);
  return st;
}

/* The first position a query at position pos of a window-w layer may make the attention kernel
 * read: the start of the 256-key chunk holding pos - w + 1 (fer_attention_params.window). */
static uint32_t window_keep_from(uint32_t pos, uint32_t w) {
  return pos + 1 > w ? (pos + 1 - w) / 256 * 256 : 0;
}

/* Releases the local layers' KV before what a query at the sequence's length (the first of this
 * call, and the point a failed call rewinds to) can read. Addresses do not change, so a held
 * plan stays; the pool is thawed only for it. */
fer_status feri_forward_release(feri_llama_seq *s) {
  if (!s->window_release || s->len == 0) return FER_STATUS_OK;
  const feri_llama *m = s->m;
  const uint32_t from = window_keep_from(s->len, m->cfg.swa_window);
  if (from <= s->released) return FER_STATUS_OK;
  if (s->plan_held) fer_vmm_set_frozen(s->vmm, false);
  fer_status st = FER_STATUS_OK;
  for (uint32_t l = m->l0; l < m->l1 && st == FER_STATUS_OK; l++) /* this stage's layers */
    if (m->layers[l].window) st = fer_kv_seq_release_before(s->kv, l - m->l0, from);
  if (s->plan_held) fer_vmm_set_frozen(s->vmm, true);
  if (st == FER_STATUS_OK) s->released = from;
  return st;
}

/* Rank 0 of a tensor-parallel model: the other ranks have started the call it announced, so a
 * failure of its own leaves them waiting: the job ends (tp_run.h). */
static fer_status finish_announced(const feri_llama *m, fer_status st, const char *what) {
  if (st != FER_STATUS_OK) feri_tp_fatal(m, what, st);
  feri_tp_done(m);
  return st;
}

/* feri_forward_release, announced first where it releases anything on a leading rank 0. */
static fer_status release_windows(feri_llama_seq *s) {
  const feri_llama *m = s->m;
  if (!feri_tp_leading(m) || !s->window_release || s->len == 0 ||
      window_keep_from(s->len, m->cfg.swa_window) <= s->released)
    return feri_forward_release(s);
  TRY(feri_tp_announce(m, FERI_TP_RELEASE, s->tp_id, 0, 0, NULL, NULL, 0));
  return finish_announced(m, feri_forward_release(s), "releasing a sliding window's KV");
}

/* ---- single-sequence steps ------------------------------------------------------------------ */

/* One step of n <= the scratch's rows tokens at the sequence's next positions. */
fer_status feri_forward_chunk(feri_llama_seq *s, fer_threadpool *pool, const int32_t *ids, uint32_t n, float *logits,
                              int logits_mode) {
  const uint32_t p0 = s->len;
  TRY(extend_kv(s, p0 + n));
  memcpy(s->sc.ids, ids, n * sizeof(int32_t));
  for (uint32_t i = 0; i < n; i++) s->sc.pos[i] = (int32_t)(p0 + i);
  const step_rows rows = {s, NULL, 0, n, 0, false};
  const op_list *run;
  if (n == 1 && (logits_mode == LOGITS_LAST || logits_mode == LOGITS_ALL) && s->plan_policy != FERI_PLAN_OFF) {
    if (s->plan_held) {
      s->plan_stats.replays++;
    } else {
      TRY(build_step(s->m, &s->sc, &rows, LOGITS_LAST, &s->plan)); /* one row: its logits are all the logits */
      s->plan_held = true;
      s->plan_stats.captures++;
      fer_vmm_set_frozen(s->vmm, true);
    }
    run = &s->plan;
  } else {
    if (s->plan_policy != FERI_PLAN_OFF) {
      s->plan_stats.declines++;
      snprintf(s->plan_stats.last_reason, sizeof s->plan_stats.last_reason,
               "a step of %u tokens ran without a plan (plans cover the one-token step)", n);
    }
    TRY(build_step(s->m, &s->sc, &rows, logits_mode, &s->once));
    run = &s->once;
  }
  TRY(run_step(s->m, &s->sc, pool, run, p0, n, logits));
  s->len = p0 + n;
  return FER_STATUS_OK;
}

/* feri_forward_chunk, announced first on a leading rank 0. */
static fer_status step(feri_llama_seq *s, fer_threadpool *pool, const int32_t *ids, uint32_t n, float *logits,
                       int logits_mode) {
  if (!feri_tp_leading(s->m)) return feri_forward_chunk(s, pool, ids, n, logits, logits_mode);
  TRY(feri_tp_announce(s->m, FERI_TP_STEP, s->tp_id, n, (uint32_t)logits_mode, NULL, ids, n * sizeof *ids));
  return finish_announced(s->m, feri_forward_chunk(s, pool, ids, n, logits, logits_mode), "a step every rank is in");
}

static fer_status check_ids(const feri_llama *m, const int32_t *ids, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    if (ids[i] < 0 || (uint32_t)ids[i] >= m->cfg.n_vocab)
      return feri_fail(FER_STATUS_INVALID_ARG, "forward: id %d at %u is outside the vocabulary of %u", ids[i], i,
                       m->cfg.n_vocab);
  }
  return FER_STATUS_OK;
}

/* The rewind itself (checked and announced by feri_llama_seq_rewind). */
static fer_status truncate_to(feri_llama_seq *s, uint32_t n_tokens) {
  /* truncation only writes zeros (no map) unless a window is shared: thaw for it all the same */
  if (s->plan_held) fer_vmm_set_frozen(s->vmm, false);
  fer_status st = fer_kv_seq_truncate(s->kv, n_tokens);
  if (s->plan_held) fer_vmm_set_frozen(s->vmm, true);
  if (st == FER_STATUS_OK) s->len = n_tokens; /* a held plan stays valid: addresses did not change */
  return st;
}

/* Rewinds after a failure without losing the failure's message. */
static void rewind_keeping_error(feri_llama_seq *s, uint32_t to, fer_status st) {
  feri_error_stash e;
  feri_error_save(&e);
  feri_llama_seq_rewind(s, to);
  feri_error_restore(&e, st);
}

/* n tokens in chunks of the scratch's rows; all or nothing: a failure or a cancellation rewinds
 * the sequence to where it was. */
static fer_status forward(feri_llama_seq *s, fer_threadpool *pool, const int32_t *ids, uint32_t n, float *logits,
                          int mode) {
  if (n == 0) return feri_fail(FER_STATUS_INVALID_ARG, "forward: no tokens");
  if (n > s->max_tokens - s->len) {
    return feri_fail(FER_STATUS_BUFFER_TOO_SMALL, "forward: %u tokens after %u exceed the sequence's %u", n, s->len, s->max_tokens);
  }
  TRY(check_ids(s->m, ids, n));
  TRY(release_windows(s));
  const uint32_t start = s->len, V = s->m->cfg.n_vocab, D = s->m->cfg.n_embd;
  fer_status st = FER_STATUS_OK;
  for (uint32_t off = 0; off < n && st == FER_STATUS_OK; off += s->sc.rows) {
    if (atomic_exchange(&s->cancel, 0)) {
      st = feri_fail(FER_STATUS_CANCELLED, "forward: cancelled after %u of %u tokens", off, n);
      break;
    }
    const uint32_t k = n - off < s->sc.rows ? n - off : s->sc.rows;
    const bool last = off + k == n;
    if (mode == LOGITS_ALL) st = step(s, pool, ids + off, k, logits + (size_t)off * V, LOGITS_ALL);
    else if (mode == LOGITS_HIDDEN) st = step(s, pool, ids + off, k, logits + (size_t)off * D, LOGITS_HIDDEN);
    else st = step(s, pool, ids + off, k, last ? logits : NULL, last ? LOGITS_LAST : LOGITS_NONE);
  }
  if (st != FER_STATUS_OK && s->len != start) rewind_keeping_error(s, start, st);
  return st;
}

fer_status feri_llama_forward(feri_llama_seq *s, fer_threadpool *pool, const int32_t *ids, uint32_t n, float *logits) {
  return forward(s, pool, ids, n, logits, LOGITS_LAST);
}

fer_status feri_llama_forward_all(feri_llama_seq *s, fer_threadpool *pool, const int32_t *ids, uint32_t n,
                                  float *logits) {
  return forward(s, pool, ids, n, logits, LOGITS_ALL);
}

fer_status feri_llama_forward_hidden(feri_llama_seq *s, fer_threadpool *pool, const int32_t *ids, uint32_t n,
                                     float *hidden) {
  return forward(s, pool, ids, n, hidden, LOGITS_HIDDEN);
}

fer_status feri_llama_seq_rewind(feri_llama_seq *s, uint32_t n_tokens) {
  if (n_tokens > s->len) return feri_fail(FER_STATUS_INVALID_ARG, "rewind: to %u, beyond the %u tokens there are", n_tokens, s->len);
  if (s->released > 0 && window_keep_from(n_tokens, s->m->cfg.swa_window) < s->released)
    return feri_fail(FER_STATUS_INVALID_ARG,
                     "rewind: to %u, but the sliding-window layers released the positions before %u (rewind to at "
                     "least %u, or create the sequence with FERI_WINDOW_KV_KEEP_ALL)",
                     n_tokens, s->released, s->released + s->m->cfg.swa_window - 1);
  if (!feri_tp_leading(s->m)) return truncate_to(s, n_tokens);
  TRY(feri_tp_announce(s->m, FERI_TP_REWIND, s->tp_id, n_tokens, 0, NULL, NULL, 0));
  return finish_announced(s->m, truncate_to(s, n_tokens), "a rewind every rank makes");
}

/* ---- batched steps -------------------------------------------------------------------------- */

fer_status feri_llama_batch_create(const feri_llama *m, uint32_t rows, feri_llama_batch **out) {
  *out = NULL;
  if (rows == 0 || rows > FERI_BATCH_MAX_ROWS)
    return feri_fail(FER_STATUS_INVALID_ARG, "batch: %u rows (1 .. %u)", rows, FERI_BATCH_MAX_ROWS);
  feri_llama_batch *b = calloc(1, sizeof *b);
  if (!b) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "batch");
  b->m = m;
  fer_status st = feri_scratch_alloc(&m->cfg, rows, &b->sc);
  b->draw_t = malloc(rows * sizeof *b->draw_t), b->draw_u = malloc(rows * sizeof *b->draw_u);
  if (st == FER_STATUS_OK && (!b->draw_t || !b->draw_u)) st = feri_fail(FER_STATUS_OUT_OF_MEMORY, "batch: draws");
  if (st == FER_STATUS_OK) st = feri_tp_register(m, b, FERI_TP_OBJ_BATCH, NULL, feri_tp_leading(m), &b->tp_id);
  if (st != FER_STATUS_OK) {
    feri_scratch_free(&b->sc);
    free(b->draw_t), free(b->draw_u);
    free(b);
    return st;
  }
  if (feri_tp_leading(m)) { /* every rank makes its own */
    st = feri_tp_announce(m, FERI_TP_BATCH_CREATE, b->tp_id, rows, 0, NULL, NULL, 0);
    if (st != FER_STATUS_OK) {
      feri_tp_unregister(m, b->tp_id);
      feri_scratch_free(&b->sc);
      free(b->draw_t), free(b->draw_u);
      free(b);
      return st;
    }
    feri_tp_done(m);
  }
  *out = b;
  return FER_STATUS_OK;
}

void feri_llama_batch_free(feri_llama_batch *b) {
  if (!b) return;
  feri_tp_forget(b->m, b->tp_id, FERI_TP_BATCH_FREE);
  feri_scratch_free(&b->sc);
  free(b->ops.ops);
  free(b->draw_t), free(b->draw_u);
  free(b);
}

uint32_t feri_llama_batch_rows(const feri_llama_batch *b) { return b->sc.rows; }

void feri_llama_batch_set_candidates(feri_llama_batch *b, uint32_t k) {
  b->candidates = k < FERI_TP_MAX_CANDIDATES ? k : FERI_TP_MAX_CANDIDATES;
}

void feri_llama_batch_set_draws(feri_llama_batch *b, const float *t, const double *u, uint32_t n) {
  b->n_draw = t && u ? (n < b->sc.rows ? n : b->sc.rows) : 0;
  if (b->n_draw == 0) return; /* off (memcpy takes no NULL, even for 0 bytes) */
  memcpy(b->draw_t, t, b->n_draw * sizeof *t);
  memcpy(b->draw_u, u, b->n_draw * sizeof *u);
}

/* The step's logits mode: FERI_TP_DRAW while draws are set, else the candidates (0: whole rows). */
static uint32_t logits_mode(const feri_llama_batch *b) { return b->n_draw > 0 ? FERI_TP_DRAW : b->candidates; }

void feri_llama_batch_set_micro_batches(feri_llama_batch *b, uint32_t parts) {
  b->micro_batches = parts < FERI_MAX_MICRO_BATCHES ? parts : FERI_MAX_MICRO_BATCHES;
}

static double seconds_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Pipeline stages, micro-batches left to the model (feri_llama_batch_set_micro_batches 0): whether
 * this step splits (1) or runs whole (0), from what each way cost a row in recent steps. Which is
 * faster depends on the machine and the weights, not only on the rows: a split makes every stage
 * pass over its weights once a micro-batch, which pays where a pass's cost grows with its rows
 * (SmolLM2's 8-bit blocks: 1.24x at 16 rows over 2 stages here) and costs where unpacking the
 * weights dominates a pass (the 8B shape's K-quants: 0.85x at 8 rows). Each way is tried first;
 * then the cheaper one runs, and every 16th step the other, so a change of load is seen. The
 * logits are the same bits either way. */
static int choose_split(feri_llama_batch *b) {
  const double *c = b->auto_split.per_row;
  const uint32_t k = b->auto_split.steps++;
  if (c[0] == 0 || c[1] == 0) return c[0] == 0 ? 0 : 1;
  const int best = c[1] < c[0];
  return k % 16 == 15 ? !best : best;
}

fer_status feri_llama_forward_mixed(feri_llama_batch *b, fer_threadpool *pool, const feri_llama_segment *segs,
                                    uint32_t n_segs, float *logits) {
  if (n_segs == 0 || n_segs > b->sc.rows)
    return feri_fail(FER_STATUS_INVALID_ARG, "batch: %u segments, the batch holds 1 .. %u rows", n_segs, b->sc.rows);
  uint32_t n = 0;
  for (uint32_t i = 0; i < n_segs; i++) {
    const feri_llama_segment *g = &segs[i];
    if (g->seq->m != b->m) return feri_fail(FER_STATUS_INVALID_ARG, "batch: segment %u belongs to another model", i);
    if (g->n == 0 || g->n > b->sc.rows - n)
      return feri_fail(FER_STATUS_INVALID_ARG, "batch: segment %u has %u tokens; the batch holds %u rows, %u taken", i,
                       g->n, b->sc.rows, n);
    if (g->n > g->seq->max_tokens - g->seq->len)
      return feri_fail(FER_STATUS_BUFFER_TOO_SMALL, "batch: segment %u: %u tokens after %u exceed the sequence's %u", i,
                       g->n, g->seq->len, g->seq->max_tokens);
    TRY(check_ids(b->m, g->ids, g->n));
    for (uint32_t j = 0; j < i; j++)
      if (segs[j].seq == g->seq) return feri_fail(FER_STATUS_INVALID_ARG, "batch: segment %u's sequence appears twice", i);
    n += g->n;
  }
  for (uint32_t i = 0; i < n_segs; i++)
    if (atomic_exchange(&segs[i].seq->cancel, 0))
      return feri_fail(FER_STATUS_CANCELLED, "batch: sequence %u was cancelled; no sequence advanced", i);
  for (uint32_t i = 0; i < n_segs; i++) TRY(release_windows(segs[i].seq));
  if (!feri_tp_leading(b->m)) return feri_forward_mixed_run(b, pool, segs, n_segs, logits);
  /* announced as the micro-batches, n_segs x (sequence id, tokens, logits wanted), the ids, then
   * for draws the selected rows' temperatures and uniforms */
  const uint32_t mode = logits_mode(b), n_draw = mode == FERI_TP_DRAW ? b->n_draw : 0;
  uint32_t selected = 0;
  for (uint32_t i = 0; i < n_segs; i++) selected += segs[i].logits;
  if (mode == FERI_TP_DRAW && n_draw != selected)
    return feri_fail(FER_STATUS_INVALID_ARG, "batch: draws set for %u rows, the step selects %u", n_draw, selected);
  const size_t words = 1 + 3 * (size_t)n_segs + n + 3 * (size_t)n_draw;
  uint32_t *msg = malloc(words * sizeof *msg);
  if (!msg) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "batch: the step's announcement");
  int32_t *ids = (int32_t *)(msg + 1 + 3 * n_segs);
  for (uint32_t i = 0; i < n_segs; ids += segs[i].n, i++) {
    uint32_t *seg = msg + 1 + 3 * i;
    seg[0] = segs[i].seq->tp_id, seg[1] = segs[i].n, seg[2] = segs[i].logits;
    memcpy(ids, segs[i].ids, segs[i].n * sizeof *ids);
  }
  memcpy(ids, b->draw_t, n_draw * sizeof *b->draw_t);
  memcpy(ids + n_draw, b->draw_u, n_draw * sizeof *b->draw_u);
  const uint32_t asked = b->micro_batches;
  const int split = b->m->stages > 1 && b->m->tp.size < 2 && asked == 0 && n_segs > 1 ? choose_split(b) : -1;
  if (split >= 0) b->micro_batches = split ? 0 : 1;
  msg[0] = b->micro_batches;
  const double t0 = seconds_now();
  fer_status st = feri_tp_announce(b->m, FERI_TP_MIXED, b->tp_id, n_segs, mode, NULL, msg, words * sizeof *msg);
  free(msg);
  if (st == FER_STATUS_OK)
    st = finish_announced(b->m, feri_forward_mixed_run(b, pool, segs, n_segs, logits), "a batched step every rank is in");
  b->micro_batches = asked;
  if (split >= 0 && st == FER_STATUS_OK) { /* seconds a row, averaged over the last steps of this way */
    const double x = (seconds_now() - t0) / n;
    b->auto_split.per_row[split] = b->auto_split.per_row[split] > 0 ? 0.75 * b->auto_split.per_row[split] + 0.25 * x : x;
  }
  return st;
}

/* Segments [0, n_segs) of a mixed step, run as one pass. defer: pipeline stage 0 leaves the
 * logits to its caller (the last stage sends them all the same). On failure every sequence is
 * back at its length. */
static fer_status mixed_pass(feri_llama_batch *b, fer_threadpool *pool, const feri_llama_segment *segs, uint32_t n_segs,
                             float *logits, bool defer) {
  uint32_t n = 0, grown = 0;
  for (uint32_t i = 0; i < n_segs; i++) n += segs[i].n;
  fer_status st = FER_STATUS_OK;
  for (; grown < n_segs && st == FER_STATUS_OK; grown++) st = extend_kv(segs[grown].seq, segs[grown].seq->len + segs[grown].n);
  if (st == FER_STATUS_OK) {
    for (uint32_t i = 0, row = 0; i < n_segs; row += segs[i].n, i++) {
      memcpy(b->sc.ids + row, segs[i].ids, segs[i].n * sizeof(int32_t));
      for (uint32_t t = 0; t < segs[i].n; t++) b->sc.pos[row + t] = (int32_t)(segs[i].seq->len + t);
    }
    /* draws over pipeline stages of one rank each: the rows whole (the last stage holds them) */
    const uint32_t mode = logits_mode(b) == FERI_TP_DRAW && b->m->tp.size < 2 ? 0 : logits_mode(b);
    b->sc.draw_t = b->draw_t, b->sc.draw_u = b->draw_u;
    const step_rows rows = {NULL, segs, n_segs, n, mode, defer};
    st = build_step(b->m, &b->sc, &rows, LOGITS_SELECTED, &b->ops);
    if (st == FER_STATUS_OK) st = run_step(b->m, &b->sc, pool, &b->ops, 0, n, logits);
    feri_tp_count_pass(b->m);
  }
  if (st != FER_STATUS_OK) { /* all or nothing: every sequence back to its length (here only: announced calls fail together) */
    feri_error_stash e;
    feri_error_save(&e);
    for (uint32_t i = 0; i < grown; i++) truncate_to(segs[i].seq, segs[i].seq->len);
    return feri_error_restore(&e, st);
  }
  for (uint32_t i = 0; i < n_segs; i++) segs[i].seq->len += segs[i].n;
  return FER_STATUS_OK;
}

/* Pipeline stages: a mixed step's segments cut into at most `parts` groups of about equal rows,
 * each group at least one segment, the same cut on every rank. ends[g]: the segment after group g.
 * Returns the number of groups. */
static uint32_t micro_batches(const feri_llama_segment *segs, uint32_t n_segs, uint32_t parts, uint32_t *ends) {
  uint32_t n = 0, rows = 0, g = 0;
  for (uint32_t i = 0; i < n_segs; i++) n += segs[i].n;
  if (parts > n_segs) parts = n_segs;
  for (uint32_t i = 0; i + 1 < n_segs && g + 1 < parts; i++) {
    rows += segs[i].n;
    /* close group g at its share of the rows, while every later group can still have a segment */
    if ((uint64_t)rows * parts >= (uint64_t)(g + 1) * n && n_segs - (i + 1) >= parts - 1 - g) ends[g++] = i + 1;
  }
  ends[g++] = n_segs;
  return g;
}

/* The mixed step after its checks (and its announcement). Over pipeline stages the step runs as
 * micro-batches (feri_llama_batch_set_micro_batches) so the stages overlap: stage 0 runs the
 * second group's layers while the next stage runs the first's, and so on down the pipe. Rank 0
 * starts the receives of every group's logits first (comm.h: otherwise its send of a group's rows
 * and the last stage's send of an earlier group's logits could wait on each other). */
fer_status feri_forward_mixed_run(feri_llama_batch *b, fer_threadpool *pool, const feri_llama_segment *segs,
                                  uint32_t n_segs, float *logits) {
  const feri_llama *m = b->m;
  uint32_t ends[FERI_MAX_MICRO_BATCHES];
  const uint32_t parts = b->micro_batches ? b->micro_batches : m->stages;
  const uint32_t groups = m->stages > 1 && m->tp.size < 2 ? micro_batches(segs, n_segs, parts, ends) : 1;
  if (groups == 1) return mixed_pass(b, pool, segs, n_segs, logits, false);
  const uint32_t V = m->cfg.n_vocab;
  feri_comm_pending pending[FERI_MAX_MICRO_BATCHES];
  uint32_t rows_of[FERI_MAX_MICRO_BATCHES], lens[FERI_BATCH_MAX_ROWS];
  for (uint32_t i = 0; i < n_segs; i++) lens[i] = segs[i].seq->len;
  memset(pending, 0, sizeof pending);
  fer_status st = FER_STATUS_OK;
  for (uint32_t g = 0, s0 = 0, row = 0; g < groups; s0 = ends[g], g++) {
    rows_of[g] = 0;
    for (uint32_t i = s0; i < ends[g]; i++) rows_of[g] += segs[i].logits;
    if (m->stage == 0 && rows_of[g] > 0 && st == FER_STATUS_OK)
      st = feri_comm_recv_start(m->comm, logits + (size_t)row * V, (size_t)rows_of[g] * V * sizeof(float), (int)m->stages - 1,
                                &pending[g]);
    row += rows_of[g];
  }
  for (uint32_t g = 0, s0 = 0; g < groups && st == FER_STATUS_OK; s0 = ends[g], g++)
    st = mixed_pass(b, pool, segs + s0, ends[g] - s0, logits, m->stage == 0);
  feri_comm_stats before; /* the logits' bytes: counted as they are taken */
  feri_comm_get_stats(m->comm, &before);
  for (uint32_t g = 0, row = 0; g < groups; row += rows_of[g], g++) {
    if (!pending[g].live) continue;
    if (st == FER_STATUS_OK) st = feri_comm_recv_finish(m->comm, &pending[g]);
    else feri_comm_recv_cancel(m->comm, &pending[g]);
    if (st == FER_STATUS_OK && m->cfg.logit_softcap != 0.0f)
      softcap(logits + (size_t)row * V, (size_t)rows_of[g] * V, m->cfg.logit_softcap);
  }
  if (m->stage == 0) feri_tp_count(m, FERI_TP_COUNT_LOGITS, &before);
  if (st != FER_STATUS_OK) { /* the groups that ran go back too: all or nothing */
    feri_error_stash e;
    feri_error_save(&e);
    for (uint32_t i = 0; i < n_segs; i++)
      if (segs[i].seq->len != lens[i]) truncate_to(segs[i].seq, lens[i]);
    return feri_error_restore(&e, st);
  }
  return FER_STATUS_OK;
}

fer_status feri_llama_forward_batch(feri_llama_batch *b, fer_threadpool *pool, feri_llama_seq *const *seqs,
                                    const int32_t *ids, uint32_t n, float *logits) {
  if (n == 0 || n > b->sc.rows)
    return feri_fail(FER_STATUS_INVALID_ARG, "batch: %u sequences, the batch holds 1 .. %u", n, b->sc.rows);
  feri_llama_segment segs[FERI_BATCH_MAX_ROWS];
  for (uint32_t i = 0; i < n; i++) {
    if (seqs[i]->len >= seqs[i]->max_tokens)
      return feri_fail(FER_STATUS_BUFFER_TOO_SMALL, "batch: sequence %u is full (%u tokens)", i, seqs[i]->max_tokens);
    segs[i] = (feri_llama_segment){seqs[i], ids + i, 1, true};
  }
  return feri_llama_forward_mixed(b, pool, segs, n, logits);
}
