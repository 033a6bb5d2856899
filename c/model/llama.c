/* llama.c: a Llama-family model (llama, qwen2, qwen3) read from GGUF, and its sequences.
 *
 * The file's hyper-parameters are read under the architecture's own key prefix and every tensor is
 * checked against them before use; weights are used in place from the mapped file or placed in a
 * fer_weight_store. A sequence owns a granule pool, a fer_kv_cache on it and scratch for one
 * prefill chunk. The forward pass is in forward.c. */
#include "model/llama.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/dtype.h"
#include "kernels/quant.h"
#include "core/file.h"
#include "core/status.h"
#include "core/tensor.h"
#include "gguf/gguf.h"
#include "kernels/gelu.h"
#include "model/model_internal.h"
#include "model/tp_run.h"

const feri_llama_config *feri_llama_config_of(const feri_llama *m) { return &m->cfg; }

const char *feri_llama_arch_name(int32_t arch) {
  static const char *const names[] = {"llama", "qwen2", "qwen3", "gemma3"};
  return arch >= 0 && arch < (int32_t)(sizeof names / sizeof names[0]) ? names[arch] : "unknown";
}
uint32_t feri_llama_seq_len(const feri_llama_seq *s) { return s->len; }
uint32_t feri_llama_seq_max_tokens(const feri_llama_seq *s) { return s->max_tokens; }
const fer_kv_seq *feri_llama_seq_kv(const feri_llama_seq *s) { return s->kv; }
void feri_llama_seq_plan_stats(const feri_llama_seq *s, feri_plan_stats *out) { *out = s->plan_stats; }
void feri_llama_seq_cancel(feri_llama_seq *s) { atomic_store(&s->cancel, 1); }
const struct feri_gguf *feri_llama_gguf(const feri_llama *m) { return m->g; }
bool feri_llama_has_store(const feri_llama *m) { return m->store != NULL; }

fer_status feri_llama_set_matmul(feri_llama *m, int32_t matmul) {
  if (matmul != FERI_MATMUL_I8 && matmul != FERI_MATMUL_EXACT)
    return feri_fail(FER_STATUS_INVALID_ARG, "model: matmul option %d is neither I8 (0) nor EXACT (1)", (int)matmul);
  m->matmul_exact = matmul == FERI_MATMUL_EXACT;
  return FER_STATUS_OK;
}

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
fer_dtype feri_llama_weight_dtype(uint32_t ggml_type) {
  switch (ggml_type) {
    case FERI_GGML_F32: return FER_DTYPE_F32;
    case FERI_GGML_F16: return FER_DTYPE_F16;
    case FERI_GGML_BF16: return FER_DTYPE_BF16;
    case FERI_GGML_Q4_0: return FER_DTYPE_Q4_0;
    case FERI_GGML_Q4_1: return FER_DTYPE_Q4_1;
    case FERI_GGML_Q8_0: return FER_DTYPE_Q8_0;
    case FERI_GGML_MXFP4: return FER_DTYPE_MXFP4;
    case FERI_GGML_Q5_0: return FER_DTYPE_Q5_0;
    case FERI_GGML_Q5_1: return FER_DTYPE_Q5_1;
    case FERI_GGML_Q2_K: return FER_DTYPE_Q2_K;
    case FERI_GGML_Q3_K: return FER_DTYPE_Q3_K;
    case FERI_GGML_Q4_K: return FER_DTYPE_Q4_K;
    case FERI_GGML_Q5_K: return FER_DTYPE_Q5_K;
    case FERI_GGML_Q6_K: return FER_DTYPE_Q6_K;
    case FERI_GGML_IQ4_NL: return FER_DTYPE_IQ4_NL;
    case FERI_GGML_IQ4_XS: return FER_DTYPE_IQ4_XS;
    default: return FER_DTYPE_INVALID;
  }
}

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
  const fer_dtype qd = feri_llama_weight_dtype(t->ggml_type);
  if (qd == FER_DTYPE_INVALID)
    return feri_fail(FER_STATUS_UNSUPPORTED, "model: %s has type %s", name, feri_ggml_type_name(t->ggml_type));
  if (qd == FER_DTYPE_F32 || qd == FER_DTYPE_F16 || qd == FER_DTYPE_BF16) {
    out->quant = false;
    out->dense = feri_tensor_2d((void *)t->data, qd, (int64_t)rows, (int64_t)cols);
    return FER_STATUS_OK;
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

/* "<arch>.<key>" of the file's architecture. */
#define ARCH_KEY(key) (snprintf(kbuf, sizeof kbuf, "%s.%s", prefix, key), kbuf)

/* gemma3's keys beyond the common ones, read as llama.cpp reads them (llama.h). The layers'
 * windows come from the pattern in open_gguf. */
static fer_status read_gemma3(const feri_gguf *g, const char *prefix, feri_llama_config *c) {
  char kbuf[96];
  c->ffn_act = FERI_ACT_GELU_TANH;
  c->post_norms = true;
  c->embd_scale = sqrtf((float)c->n_embd);
  /* gemma_pytorch's query_pre_attn_scalar: the head size, except the 27B's n_embd / n_head (the
   * GGUF has no key for it; llama.cpp tells the 27B by its 62 layers) */
  c->attn_scale = c->n_layer == 62 ? 1.0f / sqrtf((float)(c->n_embd / c->n_head)) : 1.0f / sqrtf((float)c->head_dim);
  c->rope_theta_swa = 10000.0f;
  if (feri_gguf_find_kv(g, ARCH_KEY("rope.freq_base_swa")) >= 0 &&
      (feri_gguf_get_f32(g, kbuf, &c->rope_theta_swa) != FER_STATUS_OK || !(c->rope_theta_swa > 0) ||
       !isfinite(c->rope_theta_swa)))
    return feri_fail(FER_STATUS_CORRUPT, "model: %s is not a positive float", kbuf);
  if (feri_gguf_find_kv(g, ARCH_KEY("attention.sliding_window")) >= 0) {
    if (get_u32(g, kbuf, &c->swa_window) != FER_STATUS_OK) return FER_STATUS_CORRUPT;
  }
  if (feri_gguf_find_kv(g, ARCH_KEY("final_logit_softcapping")) >= 0 &&
      (feri_gguf_get_f32(g, kbuf, &c->logit_softcap) != FER_STATUS_OK || !(c->logit_softcap >= 0) ||
       !isfinite(c->logit_softcap)))
    return feri_fail(FER_STATUS_CORRUPT, "model: %s is not a float >= 0", kbuf);
  /* RoPE scaling (the 4B and larger scale the global layers' positions): not implemented */
  const char *rs;
  size_t rl;
  float factor = 1.0f;
  if ((feri_gguf_get_str(g, ARCH_KEY("rope.scaling.type"), &rs, &rl) == FER_STATUS_OK && !(rl == 4 && memcmp(rs, "none", 4) == 0)) ||
      (feri_gguf_get_f32(g, ARCH_KEY("rope.scaling.factor"), &factor) == FER_STATUS_OK && factor != 1.0f))
    return feri_fail(FER_STATUS_UNSUPPORTED, "model: gemma3 with RoPE scaling (%s) is not supported", kbuf);
  if (c->rope_dims != c->head_dim)
    return feri_fail(FER_STATUS_UNSUPPORTED, "model: gemma3 rotates every dimension of a head (rope.dimension_count %u, head %u)",
                     c->rope_dims, c->head_dim);
  return FER_STATUS_OK;
}

/* Which layers are local: the file's attention.sliding_window_pattern, an array of one bool per
 * layer or a period n (layer l is local when l % n < n - 1; 0: every layer), else the period 6
 * (llama.cpp's default for gemma3). Sets each layer's window and RoPE base. */
static fer_status assign_windows(const feri_gguf *g, feri_llama *m) {
  feri_llama_config *c = &m->cfg;
  const char *key = "gemma3.attention.sliding_window_pattern";
  uint32_t period = 6;
  const uint8_t *flags = NULL;
  int64_t kv = c->arch == FERI_ARCH_GEMMA3 && c->swa_window > 0 ? feri_gguf_find_kv(g, key) : -1;
  if (kv >= 0) {
    uint32_t type;
    uint64_t count;
    const void *data;
    if (feri_gguf_kv_type(g, kv, &type) == FER_STATUS_OK && type == FERI_GGUF_ARRAY) {
      if (feri_gguf_arr_data(g, kv, &type, &data, &count) != FER_STATUS_OK || type != FERI_GGUF_BOOL ||
          count != c->n_layer)
        return feri_fail(FER_STATUS_CORRUPT, "model: %s is not an array of %u bools", key, c->n_layer);
      flags = data;
    } else if (get_u32(g, key, &period) != FER_STATUS_OK) {
      return FER_STATUS_CORRUPT;
    }
  }
  c->n_swa_layers = 0;
  for (uint32_t l = 0; l < c->n_layer; l++) {
    bool local = c->swa_window > 0 && (flags ? flags[l] != 0 : period == 0 || l % period < period - 1);
    m->layers[l].window = local ? c->swa_window : 0;
    m->layers[l].rope_theta = local ? c->rope_theta_swa : c->rope_theta;
    c->n_swa_layers += local;
  }
  return FER_STATUS_OK;
}

static fer_status read_config(const feri_gguf *g, feri_llama_config *c) {
  const char *arch;
  size_t len;
  if (feri_gguf_get_str(g, "general.architecture", &arch, &len) != FER_STATUS_OK) {
    return feri_fail(FER_STATUS_CORRUPT, "model: general.architecture is missing");
  }
  static const struct { const char *name; int32_t arch; fer_rope_pairing rope; } known[] = {
      {"llama", FERI_ARCH_LLAMA, FER_ROPE_GPTJ}, {"qwen2", FERI_ARCH_QWEN2, FER_ROPE_NEOX},
      {"qwen3", FERI_ARCH_QWEN3, FER_ROPE_NEOX}, {"gemma3", FERI_ARCH_GEMMA3, FER_ROPE_NEOX}};
  const char *prefix = NULL;
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
    if (len == strlen(known[i].name) && memcmp(arch, known[i].name, len) == 0) {
      prefix = known[i].name;
      c->arch = known[i].arch;
      c->rope_pairing = known[i].rope;
    }
  }
  if (!prefix) {
    return feri_fail(FER_STATUS_UNSUPPORTED, "model: architecture '%.*s' (llama, qwen2, qwen3 and gemma3 are supported)",
                     (int)(len > 40 ? 40 : len), arch);
  }
  char kbuf[96];
  fer_status st = get_u32(g, ARCH_KEY("block_count"), &c->n_layer);
  if (st == FER_STATUS_OK) st = get_u32(g, ARCH_KEY("embedding_length"), &c->n_embd);
  if (st == FER_STATUS_OK) st = get_u32(g, ARCH_KEY("feed_forward_length"), &c->n_ff);
  if (st == FER_STATUS_OK) st = get_u32(g, ARCH_KEY("attention.head_count"), &c->n_head);
  if (st != FER_STATUS_OK) return st;
  c->n_head_kv = c->n_head;
  if (feri_gguf_find_kv(g, ARCH_KEY("attention.head_count_kv")) >= 0) {
    st = get_u32(g, kbuf, &c->n_head_kv);
    if (st != FER_STATUS_OK) return st;
  }
  c->n_ctx_train = 2048;
  if (feri_gguf_find_kv(g, ARCH_KEY("context_length")) >= 0) get_u32(g, kbuf, &c->n_ctx_train);
  /* how an embedding pools the tokens' states, where the file says (embedding models do) */
  c->pooling = 0;
  if (feri_gguf_find_kv(g, ARCH_KEY("pooling_type")) >= 0) {
    fer_status pst = get_u32(g, kbuf, &c->pooling);
    if (pst != FER_STATUS_OK) return pst;
    if (c->pooling > FER_POOLING_LAST)
      return feri_fail(FER_STATUS_UNSUPPORTED, "%s = %u: ferrite pools by mean (1), first token (2) or last token (3)", kbuf,
                       c->pooling);
  }
  if (feri_gguf_get_f32(g, ARCH_KEY("attention.layer_norm_rms_epsilon"), &c->rms_eps) != FER_STATUS_OK) {
    return feri_fail(FER_STATUS_CORRUPT, "model: %s is missing", kbuf);
  }
  c->rope_theta = 10000.0f;
  if (feri_gguf_find_kv(g, ARCH_KEY("rope.freq_base")) >= 0 && feri_gguf_get_f32(g, kbuf, &c->rope_theta) != FER_STATUS_OK) {
    return feri_fail(FER_STATUS_CORRUPT, "model: %s is not a float", kbuf);
  }
  if (c->n_layer == 0 || c->n_layer > 1024 || c->n_embd == 0 || c->n_head == 0 || c->n_head_kv == 0 ||
      c->n_head > 4096 || c->n_head % c->n_head_kv != 0 || c->n_ff == 0 || !(c->rms_eps >= 0) || !(c->rope_theta > 0)) {
    return feri_fail(FER_STATUS_CORRUPT, "model: inconsistent hyper-parameters (layers %u, embd %u, heads %u/%u, ff %u)",
                     c->n_layer, c->n_embd, c->n_head, c->n_head_kv, c->n_ff);
  }
  /* the head size: key_length when given (qwen3 decouples it from the embedding), else embd / heads */
  if (feri_gguf_find_kv(g, ARCH_KEY("attention.key_length")) >= 0) {
    st = get_u32(g, kbuf, &c->head_dim);
    if (st != FER_STATUS_OK || c->head_dim == 0 || c->head_dim > 4096 || c->head_dim % 2) {
      return feri_fail(FER_STATUS_CORRUPT, "model: %s is not an even head size up to 4096", kbuf);
    }
    uint32_t v_len = c->head_dim;
    if (feri_gguf_find_kv(g, ARCH_KEY("attention.value_length")) >= 0 && (get_u32(g, kbuf, &v_len) != FER_STATUS_OK || v_len != c->head_dim)) {
      return feri_fail(FER_STATUS_UNSUPPORTED, "model: %s differs from the key length %u (one head size for K and V only)", kbuf, c->head_dim);
    }
  } else if (c->n_embd % c->n_head != 0) {
    return feri_fail(FER_STATUS_CORRUPT, "model: embedding %u is not a multiple of %u heads", c->n_embd, c->n_head);
  } else {
    c->head_dim = c->n_embd / c->n_head;
  }
  c->rope_dims = c->head_dim;
  if (feri_gguf_find_kv(g, ARCH_KEY("rope.dimension_count")) >= 0) {
    st = get_u32(g, kbuf, &c->rope_dims);
    if (st != FER_STATUS_OK || c->rope_dims == 0 || c->rope_dims > c->head_dim || c->rope_dims % 2) {
      return feri_fail(FER_STATUS_CORRUPT, "model: %s is not an even number up to the head size", kbuf);
    }
  }
  uint32_t et;
  uint64_t nv;
  if (feri_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &nv) != FER_STATUS_OK || nv == 0 || nv > (1u << 24)) {
    return feri_fail(FER_STATUS_CORRUPT, "model: tokenizer.ggml.tokens gives no vocabulary size");
  }
  c->n_vocab = (uint32_t)nv;
  c->ffn_act = FERI_ACT_SILU;
  c->rope_theta_swa = c->rope_theta;
  return c->arch == FERI_ARCH_GEMMA3 ? read_gemma3(g, prefix, c) : FER_STATUS_OK;
}
#undef ARCH_KEY

/* ---- tensor parallelism: this rank's share ----------------------------------------------- */

/* Columns per block of a weight's format (1 for dense weights). */
static uint32_t block_of(const feri_linear *w) {
  int64_t be = 1, bb;
  if (w->quant) fer_qblock_size(w->q.dtype, &be, &bb);
  return (uint32_t)be;
}

/* Rows [r0, r1) of a weight: the same bytes from r0 on, fewer rows. */
static void slice_rows(feri_linear *w, uint64_t r0, uint64_t r1) {
  if (w->quant) {
    const uint64_t stride = (uint64_t)w->q.row_stride;
    w->q.data = (const char *)w->q.data + r0 * stride;
    w->q.rows = (int64_t)(r1 - r0);
    w->q.bytes = w->bytes = (r1 - r0) * stride;
    w->off += r0 * stride;
    return;
  }
  const uint64_t stride = (uint64_t)w->dense.strides[0];
  w->dense.data = (char *)w->dense.data + r0 * stride;
  w->dense.shape[0] = (int64_t)(r1 - r0);
  w->bytes = (r1 - r0) * stride;
  w->off += r0 * stride;
}

/* Columns [c0, c1) of a weight (on its block boundaries): every row from its c0-th column on,
 * the row stride kept. off and bytes span the rows' slices with what lies between them. */
static void slice_cols(feri_linear *w, uint64_t c0, uint64_t c1) {
  if (w->quant) {
    int64_t be, bb;
    fer_qblock_size(w->q.dtype, &be, &bb);
    const uint64_t skip = c0 / (uint64_t)be * (uint64_t)bb, width = (c1 - c0) / (uint64_t)be * (uint64_t)bb;
    w->q.data = (const char *)w->q.data + skip;
    w->q.cols = (int64_t)(c1 - c0);
    w->q.bytes = w->bytes = (uint64_t)(w->q.rows - 1) * (uint64_t)w->q.row_stride + width;
    w->off += skip;
    return;
  }
  const uint64_t esz = (uint64_t)w->dense.strides[1];
  w->dense.data = (char *)w->dense.data + c0 * esz;
  w->dense.shape[1] = (int64_t)(c1 - c0);
  w->bytes = (uint64_t)(w->dense.shape[0] - 1) * (uint64_t)w->dense.strides[0] + (c1 - c0) * esz;
  w->off += c0 * esz;
}

static void slice_vector(feri_vector *v, uint64_t e0, uint64_t e1) {
  v->t.data = (char *)v->t.data + e0 * 4;
  v->t.shape[0] = (int64_t)(e1 - e0);
  v->off += e0 * 4;
  v->bytes = (e1 - e0) * 4;
}

/* Records a share: the local sizes, the attention groups, every rank's vocabulary columns. */
static fer_status set_share(feri_llama *m, const feri_tp_plan *p) {
  const feri_llama_config *c = &m->cfg;
  m->tp = *p;
  m->H = p->q_heads.end - p->q_heads.begin, m->Hkv = p->kv_heads.end - p->kv_heads.begin;
  m->F = p->ff.end - p->ff.begin, m->V = p->vocab.end - p->vocab.begin;
  free(m->groups), free(m->vocab_begin);
  m->groups = calloc(m->H, sizeof *m->groups);
  m->vocab_begin = calloc(p->size + 1, sizeof *m->vocab_begin);
  if (!m->groups || !m->vocab_begin) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "model: tensor-parallel share");
  /* one call when fer_attention's own mapping of the local heads is the model's; else one per KV head */
  const uint32_t g = c->n_head / c->n_head_kv;
  bool uniform = m->H % m->Hkv == 0;
  for (uint32_t h = 0; h < m->H && uniform; h++)
    uniform = h / (m->H / m->Hkv) == (p->q_heads.begin + h) / g - p->kv_heads.begin;
  if (uniform) {
    m->groups[0] = (feri_attn_group){0, m->H, 0, m->Hkv};
    m->n_groups = 1;
  } else {
    m->n_groups = 0;
    for (uint32_t h = 0; h < m->H; h++) {
      const uint32_t kv = (p->q_heads.begin + h) / g - p->kv_heads.begin;
      if (m->n_groups && m->groups[m->n_groups - 1].kv0 == kv) m->groups[m->n_groups - 1].qn++;
      else m->groups[m->n_groups++] = (feri_attn_group){h, 1, kv, 1};
    }
  }
  for (uint32_t r = 0; r <= p->size; r++) /* the plan's vocabulary split: as even as can be, the first ranks one more */
    m->vocab_begin[r] = r * (c->n_vocab / p->size) + (r < c->n_vocab % p->size ? r : c->n_vocab % p->size);
  return FER_STATUS_OK;
}

/* Cuts every projection to rank `rank` of `size`'s share (tp_plan.h), before any panel is made. */
static fer_status take_share(feri_llama *m, uint32_t rank, uint32_t size) {
  const feri_llama_config *c = &m->cfg;
  feri_tp_shape shape = {c->n_head, c->n_head_kv, c->head_dim, c->n_embd, c->n_ff, c->n_vocab, 1, 1};
  for (uint32_t l = 0; l < c->n_layer; l++) { /* the coarsest block of any layer bounds every cut */
    if (block_of(&m->layers[l].wo) > shape.attn_out_block) shape.attn_out_block = block_of(&m->layers[l].wo);
    if (block_of(&m->layers[l].w_down) > shape.ffn_down_block) shape.ffn_down_block = block_of(&m->layers[l].w_down);
  }
  feri_tp_plan p;
  fer_status st = feri_tp_plan_make(&shape, rank, size, &p);
  if (st != FER_STATUS_OK) return st;
  m->kv_heads_most = 0; /* every share's KV heads: a rank past the KV heads' count may hold two */
  for (uint32_t r = 0; r < size; r++) {
    feri_tp_plan q;
    if ((st = feri_tp_plan_make(&shape, r, size, &q)) != FER_STATUS_OK) return st;
    const uint32_t h = q.kv_heads.end - q.kv_heads.begin;
    m->kv_heads_most = h > m->kv_heads_most ? h : m->kv_heads_most;
  }
  const uint64_t hd = c->head_dim, q0 = p.q_heads.begin * hd, q1 = p.q_heads.end * hd;
  const uint64_t k0 = p.kv_heads.begin * hd, k1 = p.kv_heads.end * hd;
  for (uint32_t l = 0; l < c->n_layer; l++) {
    feri_llama_layer *L = &m->layers[l];
    slice_rows(&L->wq, q0, q1), slice_rows(&L->wk, k0, k1), slice_rows(&L->wv, k0, k1);
    slice_cols(&L->wo, q0, q1);
    slice_rows(&L->w_gate, p.ff.begin, p.ff.end), slice_rows(&L->w_up, p.ff.begin, p.ff.end);
    slice_cols(&L->w_down, p.ff.begin, p.ff.end);
    if (L->has_qkv_bias) slice_vector(&L->bq, q0, q1), slice_vector(&L->bk, k0, k1), slice_vector(&L->bv, k0, k1);
  }
  slice_rows(&m->output, p.vocab.begin, p.vocab.end);
  return set_share(m, &p);
}

/* Pipeline stage `rank` of `size`: its run of layers (as even as can be, the first stages one more). */
static fer_status take_stage(feri_llama *m, uint32_t rank, uint32_t size) {
  if (size > m->cfg.n_layer)
    return feri_fail(FER_STATUS_UNSUPPORTED, "model: %u pipeline stages for %u layers (at most one stage per layer)", size,
                     m->cfg.n_layer);
  const feri_tp_range r = feri_tp_part(m->cfg.n_layer, rank, size), first = feri_tp_part(m->cfg.n_layer, 0, size);
  m->stage = rank, m->stages = size, m->l0 = r.begin, m->l1 = r.end;
  m->kv_layers_most = first.end - first.begin; /* the first stages run one layer more */
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
  if (st == FER_STATUS_OK && c->ffn_act == FERI_ACT_GELU_TANH) {
    m->gelu_lut = malloc(FERI_GELU_LUT_SIZE * sizeof(float));
    if (m->gelu_lut) feri_gelu_tanh_lut(m->gelu_lut);
    else st = feri_fail(FER_STATUS_OUT_OF_MEMORY, "model: the GELU table");
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
    /* qwen2's q, k and v biases; qwen3's per-head norms of q and k: used when the file has them,
     * required by the architecture that defines them */
    L->has_qkv_bias = feri_gguf_find_tensor(m->g, NAME("attn_q.bias")) >= 0;
    L->has_qk_norm = feri_gguf_find_tensor(m->g, NAME("attn_q_norm.weight")) >= 0;
    if (st == FER_STATUS_OK && c->arch == FERI_ARCH_QWEN2 && !L->has_qkv_bias)
      st = feri_fail(FER_STATUS_CORRUPT, "model: qwen2 layer %u has no attn_q.bias", l);
    if (st == FER_STATUS_OK && (c->arch == FERI_ARCH_QWEN3 || c->arch == FERI_ARCH_GEMMA3) && !L->has_qk_norm)
      st = feri_fail(FER_STATUS_CORRUPT, "model: %s layer %u has no attn_q_norm.weight",
                     c->arch == FERI_ARCH_QWEN3 ? "qwen3" : "gemma3", l);
    if (st == FER_STATUS_OK && c->post_norms) {
      st = bind_vector(m->g, NAME("post_attention_norm.weight"), c->n_embd, &L->post_attn_norm);
      if (st == FER_STATUS_OK) st = bind_vector(m->g, NAME("post_ffw_norm.weight"), c->n_embd, &L->post_ffw_norm);
    }
    if (st == FER_STATUS_OK && L->has_qkv_bias) {
      st = bind_vector(m->g, NAME("attn_q.bias"), qd, &L->bq);
      if (st == FER_STATUS_OK) st = bind_vector(m->g, NAME("attn_k.bias"), kvd, &L->bk);
      if (st == FER_STATUS_OK) st = bind_vector(m->g, NAME("attn_v.bias"), kvd, &L->bv);
    }
    if (st == FER_STATUS_OK && L->has_qk_norm) {
      st = bind_vector(m->g, NAME("attn_q_norm.weight"), c->head_dim, &L->q_norm);
      if (st == FER_STATUS_OK) st = bind_vector(m->g, NAME("attn_k_norm.weight"), c->head_dim, &L->k_norm);
    }
#undef NAME
  }
  if (st == FER_STATUS_OK) st = assign_windows(m->g, m);
  if (st == FER_STATUS_OK) {
    feri_tp_plan whole = {.rank = 0, .size = 1, .q_heads = {0, c->n_head}, .kv_heads = {0, c->n_head_kv},
                          .ff = {0, c->n_ff}, .vocab = {0, c->n_vocab}};
    st = set_share(m, &whole);
    m->stage = 0, m->stages = 1, m->l0 = 0, m->l1 = c->n_layer; /* every layer here */
    m->kv_heads_most = c->n_head_kv, m->kv_layers_most = c->n_layer;
  }
  if (st != FER_STATUS_OK) {
    feri_error_stash e; /* closing calls entry points, which clear the message */
    feri_error_save(&e);
    feri_llama_close(m);
    return feri_error_restore(&e, st);
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
  /* opened again by path: it must still be the regular file that was parsed (core/file.h) */
  int fd;
  uint64_t file_size;
  st = feri_file_open_regular(path, "model (weight store)", &fd, &file_size);
  if (st != FER_STATUS_OK) return st;
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
    feri_vector *vs[8] = {&L->attn_norm, &L->ffn_norm, &L->bq, &L->bk, &L->bv, &L->q_norm, &L->k_norm, &L->post_attn_norm};
    for (int i = 0; i < 8; i++)
      if (vs[i]->t.data) vs[i]->t.data = (void *)(b + vs[i]->off);
    if (L->post_ffw_norm.t.data) L->post_ffw_norm.t.data = (void *)(b + L->post_ffw_norm.off);
    feri_linear *ws_[7] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
    for (int i = 0; i < 7; i++) rebase_linear(ws_[i], b);
  }
  return FER_STATUS_OK;
}

/* One linear's panel (kernels/qpanel.h), then its blocks' pages dropped from the process (the
 * mapping is of the file: a later read faults them back from the page cache), so that resident
 * memory holds one copy of the weights, not two. */
static fer_status pack_panel(feri_linear *w) {
  if (!w->quant || !feri_qpanel_supported(w->q.dtype) || w->panel.data || w->q.rows == 0 || w->q.cols == 0)
    return FER_STATUS_OK;
  fer_status st = feri_qpanel_alloc(&w->q, &w->panel);
  if (st != FER_STATUS_OK) return st;
  /* a few MiB of rows at a time, each range's pages dropped once packed: the peak holds the
   * panels and one range, not a large tensor twice (Gemma's tied 160 MiB embedding) */
  const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  const int64_t panels = (w->q.rows + 15) / 16, step = 1 + (4 << 20) / (16 * w->q.row_stride);
  for (int64_t p0 = 0; p0 < panels; p0 += step) {
    const int64_t p1 = p0 + step < panels ? p0 + step : panels;
    feri_qpanel_pack_range(&w->q, &w->panel, p0, p1, 1);
    const uintptr_t from = (uintptr_t)w->q.data + (uintptr_t)(16 * p0 * w->q.row_stride);
    const int64_t end_row = 16 * p1 < w->q.rows ? 16 * p1 : w->q.rows;
    const uintptr_t to = (uintptr_t)w->q.data + (uintptr_t)(end_row * w->q.row_stride);
    const uintptr_t lo = (from + page - 1) / page * page, hi = to / page * page;
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_DONTNEED); /* advice only: a refusal changes nothing */
  }
  return FER_STATUS_OK;
}

/* Panels for every projection of a model whose weights are used from its file's mapping, where
 * the CPU has the panel kernels (the 8-bit route then reads them; the exact route reads q). */
static fer_status pack_panels(feri_llama *m) {
  if (!feri_qpanel_available()) return FER_STATUS_OK;
  /* this stage's layers, and the head on the last stage only */
  fer_status st = m->stage + 1 == m->stages ? pack_panel(&m->output) : FER_STATUS_OK;
  for (uint32_t l = m->l0; l < m->l1 && st == FER_STATUS_OK; l++) {
    feri_llama_layer *L = &m->layers[l];
    feri_linear *ws[7] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
    for (int i = 0; i < 7 && st == FER_STATUS_OK; i++) st = pack_panel(ws[i]);
  }
  return st;
}

static void free_panels(feri_llama *m) {
  feri_qpanel_free(&m->output.panel);
  for (uint32_t l = 0; m->layers && l < m->cfg.n_layer; l++) {
    feri_llama_layer *L = &m->layers[l];
    feri_linear *ws[7] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
    for (int i = 0; i < 7; i++) feri_qpanel_free(&ws[i]->panel);
  }
}

/* A checksum of what every rank must share: the file's header (metadata and tensor table) and the
 * options that change the arithmetic. */
static uint64_t share_checksum(const feri_llama *m, const feri_llama_options *o) {
  size_t size;
  const void *image = feri_gguf_image(m->g, &size);
  uint64_t h = feri_tp_fnv(FERI_TP_FNV_START, image, (size_t)feri_gguf_data_offset(m->g));
  const int32_t opts[6] = {o->weights, o->matmul, feri_comm_size(o->comm), o->pipeline,
                           o->pipeline ? (int32_t)o->tensor_parallel : 0, o->tp_wire};
  return feri_tp_fnv(h, opts, sizeof opts);
}

/* Opening checked every weight (fer_qmatrix_check reads each block), which left the whole file's
 * pages in this process; a rank uses only its share, so they are dropped from it (the mapping is
 * of the file: a page the rank does use faults back from the page cache). Advice only. */
static void drop_unused_pages(const feri_llama *m) {
  size_t size;
  const char *image = feri_gguf_image(m->g, &size);
  const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  const uintptr_t lo = ((uintptr_t)image + (uintptr_t)feri_gguf_data_offset(m->g) + page - 1) / page * page;
  const uintptr_t hi = ((uintptr_t)image + size) / page * page;
  if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

/* Rank `rank` of several: the model cut to this rank's share, or a failure every rank shares
 * (feri_tp_agree: every rank takes part, so that none waits for one that failed). */
static fer_status open_share(const char *path, const feri_llama_options *o, feri_llama **out) {
  feri_comm *c = o->comm;
  feri_gguf *g = NULL;
  fer_status st = feri_gguf_open_file(path, &g);
  if (st == FER_STATUS_OK) st = open_gguf(g, out);
  if (st == FER_STATUS_OK && o->weights != FERI_WEIGHTS_MAPPED)
    st = feri_fail(FER_STATUS_UNSUPPORTED, "model: tensor parallelism uses the weights mapped from the file (no weight store)");
  if (st == FER_STATUS_OK && o->matmul != FERI_MATMUL_I8 && o->matmul != FERI_MATMUL_EXACT)
    st = feri_fail(FER_STATUS_INVALID_ARG, "model: matmul option %d is neither I8 (0) nor EXACT (1)", (int)o->matmul);
  if (st == FER_STATUS_OK && o->tp_wire != FERI_TP_WIRE_F32 && o->tp_wire != FERI_TP_WIRE_Q8)
    st = feri_fail(FER_STATUS_INVALID_ARG, "model: tensor-parallel wire %d is neither F32 (0) nor Q8 (1)", (int)o->tp_wire);
  if (st == FER_STATUS_OK) (*out)->tp_wire = o->tp_wire;
  if (st == FER_STATUS_OK) {
    (*out)->matmul_exact = o->matmul == FERI_MATMUL_EXACT;
    (*out)->comm = c;
    (*out)->tp_timeout_s = o->tp_timeout_s > 0 ? o->tp_timeout_s : FERI_TP_TIMEOUT_S;
    const uint32_t rank = (uint32_t)feri_comm_rank(c), size = (uint32_t)feri_comm_size(c);
    const uint32_t t = o->pipeline && o->tensor_parallel > 1 ? o->tensor_parallel : 1;
    if (size % t != 0 || size / t < 2)
      st = feri_fail(FER_STATUS_INVALID_ARG, "model: %u ranks are not pipeline stages of %u tensor-parallel ranks", size, t);
    else if (!o->pipeline) st = take_share(*out, rank, size);
    else st = take_stage(*out, rank / t, size / t);
    if (st == FER_STATUS_OK && t > 1) st = take_share(*out, rank % t, t);
  }
  if (st == FER_STATUS_OK) st = feri_tp_link_create(*out);
  char why[184] = "";
  size_t wl;
  if (st != FER_STATUS_OK) fer_last_error_message(why, sizeof why, &wl);
  /* opening reads the whole file, which may take long on a cold disk: the ranks wait for each
   * other here without a limit, and with the step timeout from now on */
  feri_comm_set_timeout(c, 0);
  st = feri_tp_agree(c, st, st == FER_STATUS_OK ? share_checksum(*out, o) : 0, why);
  /* a stage's ranks, for its all-reduces: a collective, so only once every rank has opened */
  if (st == FER_STATUS_OK && o->pipeline && (*out)->tp.size > 1)
    st = feri_comm_split(c, (int)(*out)->stage, (int)(*out)->tp.rank, &(*out)->tp_comm);
  if (st == FER_STATUS_OK) feri_comm_set_timeout(c, (*out)->tp_timeout_s);
  if (st == FER_STATUS_OK && (*out)->tp_comm) feri_comm_set_timeout((*out)->tp_comm, (*out)->tp_timeout_s);
  if (st == FER_STATUS_OK) st = pack_panels(*out);
  if (st == FER_STATUS_OK) drop_unused_pages(*out);
  if (st != FER_STATUS_OK) {
    feri_error_stash e;
    feri_error_save(&e);
    if (*out) feri_tp_link_free(*out); /* closing must not announce */
    feri_llama_close(*out);
    *out = NULL;
    feri_error_restore(&e, st);
  }
  return st;
}

fer_status feri_llama_open_with(const char *path, const feri_llama_options *o, feri_llama **out) {
  *out = NULL;
  if (o && o->comm && feri_comm_size(o->comm) > 1) return open_share(path, o, out);
  feri_gguf *g = NULL;
  fer_status st = feri_gguf_open_file(path, &g);
  if (st == FER_STATUS_OK) st = open_gguf(g, out);
  if (st == FER_STATUS_OK && o && o->matmul != FERI_MATMUL_I8 && o->matmul != FERI_MATMUL_EXACT) {
    feri_llama_close(*out);
    *out = NULL;
    return feri_fail(FER_STATUS_INVALID_ARG, "model: matmul option %d is neither I8 (0) nor EXACT (1)", (int)o->matmul);
  }
  if (st == FER_STATUS_OK && o) (*out)->matmul_exact = o->matmul == FERI_MATMUL_EXACT;
  if (st == FER_STATUS_OK && (!o || o->weights == FERI_WEIGHTS_MAPPED)) {
    st = pack_panels(*out);
    if (st != FER_STATUS_OK) {
      feri_llama_close(*out);
      *out = NULL;
    }
  }
  if (st != FER_STATUS_OK || !o || o->weights == FERI_WEIGHTS_MAPPED) return st;
  st = place_in_store(*out, path, o);
  if (st != FER_STATUS_OK) {
    feri_error_stash e;
    feri_error_save(&e);
    feri_llama_close(*out);
    *out = NULL;
    feri_error_restore(&e, st);
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
  if (feri_tp_leading(m) && feri_tp_announce(m, FERI_TP_CLOSE, 0, 0, 0, NULL, NULL, 0) == FER_STATUS_OK) feri_tp_done(m);
  feri_tp_link_free(m);
  feri_comm_free(m->tp_comm);
  fer_weight_store_free(m->store);
  fer_vmm_free(m->weight_vmm);
  free_panels(m);
  feri_gguf_close(m->g);
  free(m->layers);
  free(m->gelu_lut);
  free(m->groups);
  free(m->vocab_begin);
  free(m);
}

/* The KV unit of a dtype: bytes per element, or for Q8_0 per block of 32 (then the geometry's
 * head_dim counts blocks: fer_kv_geometry); *dim the head_dim in those units. */
static fer_status kv_unit(const feri_llama_config *c, fer_dtype t, uint32_t *bytes, uint32_t *dim) {
  if (t != FER_DTYPE_F32 && t != FER_DTYPE_F16 && t != FER_DTYPE_BF16 && t != FER_DTYPE_Q8_0)
    return feri_fail(FER_STATUS_INVALID_ARG, "KV dtype must be F32, F16, BF16 or Q8_0");
  if (t == FER_DTYPE_Q8_0 && c->head_dim % 32 != 0)
    return feri_fail(FER_STATUS_UNSUPPORTED, "Q8_0 KV needs head_dim a multiple of 32 (this model's is %u)", c->head_dim);
  *bytes = (uint32_t)(t == FER_DTYPE_Q8_0 ? feri_qblock_bytes(t) : feri_dtype_size(t));
  *dim = t == FER_DTYPE_Q8_0 ? c->head_dim / 32 : c->head_dim;
  return FER_STATUS_OK;
}

/* The granule pool and KV cache of one sequence. */
static fer_status make_kv(feri_llama_seq *s, const feri_llama *m, const feri_llama_seq_options *o) {
  const feri_llama_config *c = &m->cfg;
  uint32_t eb, dim;
  fer_status st = kv_unit(c, o->dtype, &eb, &dim);
  if (st != FER_STATUS_OK) return st;
  fer_vmm_options vo;
  fer_vmm_options_init(&vo);
  vo.granule_bytes = o->granule_bytes ? o->granule_bytes : 64 * 1024;
  /* enough granules for every binding at full length, twice over (a bucketed relocation holds
   * the old and the new reservation at once) */
  uint64_t row = (uint64_t)m->Hkv * dim * eb; /* this rank's KV heads */
  uint64_t per_binding = ((uint64_t)s->max_tokens * row + vo.granule_bytes - 1) / vo.granule_bytes + 1;
  vo.max_granules = 2 * (2ull * (m->l1 - m->l0) * per_binding + 8); /* this stage's layers */
  st = fer_vmm_create(&vo, &s->vmm);
  if (st != FER_STATUS_OK) return st;
  fer_kv_cache_options ko;
  fer_kv_cache_options_init(&ko);
  ko.policy = o->policy;
  ko.dtype = o->dtype;
  ko.min_bucket = o->min_bucket;
  ko.geometry.layout = o->layout;
  ko.geometry.n_layers = m->l1 - m->l0;
  ko.geometry.n_kv_heads = m->Hkv;
  ko.geometry.head_dim = dim;
  ko.geometry.elem_bytes = eb;
  ko.geometry.capacity_tokens = s->max_tokens;
  st = fer_kv_cache_create(s->vmm, &ko, &s->cache);
  if (st == FER_STATUS_OK) st = fer_kv_seq_create(s->cache, &s->kv);
  return st;
}

fer_status feri_scratch_alloc(const feri_llama_config *c, uint32_t rows, feri_scratch *sc) {
  memset(sc, 0, sizeof *sc);
  sc->rows = rows;
  const size_t r = rows, qd = (size_t)c->n_head * c->head_dim, kvd = (size_t)c->n_head_kv * c->head_dim;
  sc->x = malloc(r * c->n_embd * sizeof(float));
  sc->h = malloc(r * c->n_embd * sizeof(float));
  sc->q = malloc(r * qd * sizeof(float));
  sc->k = malloc(r * kvd * sizeof(float));
  sc->v = malloc(r * kvd * sizeof(float));
  sc->att = malloc(r * qd * sizeof(float));
  sc->o = malloc(r * c->n_embd * sizeof(float));
  sc->gate = malloc(r * c->n_ff * sizeof(float));
  sc->up = malloc(r * c->n_ff * sizeof(float));
  sc->last = malloc(c->n_embd * sizeof(float));
  sc->pos = malloc(r * sizeof(int32_t));
  sc->ids = malloc(r * sizeof(int32_t));
  /* fer_matmul_quant_i8's scratch grows with K: sized once for the widest input of any projection */
  size_t kmax = c->n_embd > c->n_ff ? c->n_embd : c->n_ff;
  if (qd > kmax) kmax = qd;
  sc->qws_bytes = r * ((kmax + 63) / 64 * 64) + 2 * ((r * (kmax / 32) * sizeof(float) + 63) / 64 * 64) + 64;
  sc->qws = aligned_alloc(64, (sc->qws_bytes + 63) / 64 * 64);
  if (!sc->x || !sc->h || !sc->q || !sc->k || !sc->v || !sc->att || !sc->o || !sc->gate || !sc->up || !sc->last ||
      !sc->pos || !sc->ids || !sc->qws) {
    feri_scratch_free(sc);
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "model: scratch for %u rows", rows);
  }
  return FER_STATUS_OK;
}

void feri_scratch_free(feri_scratch *sc) {
  free(sc->x), free(sc->h), free(sc->q), free(sc->k), free(sc->v), free(sc->att), free(sc->o);
  free(sc->gate), free(sc->up), free(sc->last), free(sc->pos), free(sc->ids), free(sc->qws), free(sc->tp_logits);
  free(sc->tp_cand), free(sc->tp_ties), free(sc->tp_draw);
  memset(sc, 0, sizeof *sc);
}

fer_status feri_llama_kv_geometry(const feri_llama *m, uint32_t max_tokens, const feri_llama_seq_options *o,
                                  fer_kv_geometry *out, uint64_t *out_granule_bytes) {
  const feri_llama_seq_options defaults = feri_llama_seq_defaults();
  if (!o) o = &defaults;
  uint32_t eb, dim;
  fer_status st = kv_unit(&m->cfg, o->dtype, &eb, &dim);
  if (st != FER_STATUS_OK) return st;
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  out->layout = o->layout;
  out->n_layers = m->l1 - m->l0; /* this stage's */
  out->n_kv_heads = m->Hkv; /* this rank's */
  out->head_dim = dim;
  out->elem_bytes = eb;
  out->capacity_tokens = max_tokens;
  *out_granule_bytes = o->granule_bytes ? o->granule_bytes : 64 * 1024;
  return FER_STATUS_OK;
}

fer_status feri_llama_kv_charge_geometry(const feri_llama *m, uint32_t max_tokens, const feri_llama_seq_options *o,
                                         fer_kv_geometry *out, uint64_t *out_granule_bytes) {
  fer_status st = feri_llama_kv_geometry(m, max_tokens, o, out, out_granule_bytes);
  if (st == FER_STATUS_OK) out->n_layers = m->kv_layers_most, out->n_kv_heads = m->kv_heads_most;
  return st;
}

uint64_t feri_llama_kv_extra_bytes(const feri_llama *m, const fer_kv_geometry *own, uint64_t n_tokens, uint64_t granule) {
  if (own->n_kv_heads == m->kv_heads_most && own->n_layers == m->kv_layers_most) return 0;
  fer_kv_geometry most = *own;
  most.n_layers = m->kv_layers_most, most.n_kv_heads = m->kv_heads_most;
  uint64_t mine = 0, theirs = 0;
  feri_error_stash keep; /* a geometry the cache was made with passes the check */
  feri_error_save(&keep);
  const bool ok = fer_kv_committed_granules(own, n_tokens, granule, &mine) == FER_STATUS_OK &&
                  fer_kv_committed_granules(&most, n_tokens, granule, &theirs) == FER_STATUS_OK;
  feri_error_restore(&keep, FER_STATUS_OK);
  return ok && theirs > mine ? (theirs - mine) * granule : 0;
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
  atomic_init(&s->cancel, 0);
  s->plan_policy = (kvo ? kvo : &defaults)->plan;
  {
    const feri_llama_seq_options *o = kvo ? kvo : &defaults;
    if (o->window_kv != FERI_WINDOW_KV_RELEASE && o->window_kv != FERI_WINDOW_KV_KEEP_ALL) {
      free(s);
      return feri_fail(FER_STATUS_INVALID_ARG, "sequence: window_kv %d is neither RELEASE (0) nor KEEP_ALL (1)",
                       (int)o->window_kv);
    }
    s->window_release = c->n_swa_layers > 0 && o->window_kv == FERI_WINDOW_KV_RELEASE &&
                        o->layout != FER_KV_LAYOUT_TOKEN_MAJOR &&
                        !(o->layout == FER_KV_LAYOUT_HEAD_MAJOR && o->policy == FER_KV_POLICY_BUCKETED);
  }
  fer_status st = feri_scratch_alloc(c, max_tokens < FERI_PREFILL_CHUNK ? max_tokens : FERI_PREFILL_CHUNK, &s->sc);
  if (st == FER_STATUS_OK) st = make_kv(s, m, kvo ? kvo : &defaults);
  if (st == FER_STATUS_OK) st = feri_tp_register(m, s, FERI_TP_OBJ_SEQ, NULL, feri_tp_leading(m), &s->tp_id);
  if (st == FER_STATUS_OK && feri_tp_leading(m)) { /* every rank makes its own */
    st = feri_tp_announce(m, FERI_TP_SEQ_CREATE, s->tp_id, max_tokens, 0, kvo ? kvo : &defaults, NULL, 0);
    if (st == FER_STATUS_OK) feri_tp_done(m);
    else feri_tp_unregister(m, s->tp_id);
  }
  if (st != FER_STATUS_OK) {
    feri_error_stash e;
    feri_error_save(&e);
    s->tp_id = UINT32_MAX; /* not registered */
    feri_llama_seq_free(s);
    return feri_error_restore(&e, st);
  }
  *out = s;
  return FER_STATUS_OK;
}

fer_status feri_llama_seq_create_on(const feri_llama *m, fer_kv_seq *kv, uint32_t len, uint32_t max_tokens,
                                    feri_llama_seq **out) {
  *out = NULL;
  if (max_tokens == 0 || max_tokens > (1u << 20) || len > max_tokens)
    return feri_fail(FER_STATUS_INVALID_ARG, "sequence: %u tokens of %u", len, max_tokens);
  uint32_t kv_id = 0; /* several ranks: the KV sequence's name (made through shared_kv.h) */
  if (m->link && !feri_tp_find(m, kv, FERI_TP_OBJ_KV_SEQ, &kv_id))
    return feri_fail(FER_STATUS_MISUSE, "sequence: a KV sequence made outside the model (shared_kv.h) on a "
                                        "tensor-parallel model");
  fer_kv_seq_stats ks;
  fer_status st = fer_kv_seq_get_stats(kv, &ks);
  if (st != FER_STATUS_OK) return st;
  if (ks.live_tokens != len)
    return feri_fail(FER_STATUS_INVALID_ARG, "sequence: the KV holds %llu tokens, not %u", (unsigned long long)ks.live_tokens, len);
  feri_llama_seq *s = calloc(1, sizeof(*s));
  if (!s) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "sequence");
  s->m = m;
  s->max_tokens = max_tokens;
  s->len = len;
  s->plan_policy = FERI_PLAN_OFF;
  atomic_init(&s->cancel, 0);
  /* a sliding-window model keeps every position: a cached prefix must stay whole to be forked */
  st = feri_scratch_alloc(&m->cfg, 1, &s->sc);
  if (st == FER_STATUS_OK) st = feri_tp_register(m, s, FERI_TP_OBJ_SEQ, NULL, feri_tp_leading(m), &s->tp_id);
  if (st == FER_STATUS_OK && feri_tp_leading(m)) { /* every rank makes its own on its KV sequence */
    const uint32_t sizes[2] = {len, max_tokens};
    st = feri_tp_announce(m, FERI_TP_SEQ_CREATE_ON, s->tp_id, kv_id, 0, NULL, sizes, sizeof sizes);
    if (st == FER_STATUS_OK) feri_tp_done(m);
    else feri_tp_unregister(m, s->tp_id);
  }
  if (st != FER_STATUS_OK) {
    feri_scratch_free(&s->sc);
    free(s);
    return st;
  }
  s->kv = kv; /* the sequence owns it now; it stays named (a prefix cache forks it) until freed */
  *out = s;
  return FER_STATUS_OK;
}

void feri_llama_seq_free(feri_llama_seq *s) {
  if (!s) return;
  if (s->tp_id != UINT32_MAX) feri_tp_forget(s->m, s->tp_id, FERI_TP_SEQ_FREE);
  uint32_t kv_id;
  if (s->kv && feri_tp_find(s->m, s->kv, FERI_TP_OBJ_KV_SEQ, &kv_id)) feri_tp_unregister(s->m, kv_id);
  if (s->plan_held) fer_vmm_set_frozen(s->vmm, false);
  fer_kv_seq_free(s->kv);
  fer_kv_cache_free(s->cache); /* NULL (a sequence on a caller's cache): nothing */
  fer_vmm_free(s->vmm);
  free(s->plan.ops);
  free(s->once.ops);
  feri_scratch_free(&s->sc);
  free(s);
}
