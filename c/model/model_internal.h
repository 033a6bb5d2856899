/* model_internal.h: what the model's two halves share. llama.c reads a model from GGUF and owns
 * sequences; forward.c builds a step as a list of kernel calls and runs it. */
#ifndef FERI_MODEL_MODEL_INTERNAL_H
#define FERI_MODEL_MODEL_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "comm/comm.h"
#include "ferrite.h"
#include "gguf/gguf.h"
#include "model/llama.h"
#include "model/tp_plan.h"

/* Query heads [q0, q0 + qn) of this rank's reading its KV heads [kv0, kv0 + kvn) in one attention
 * call (fer_attention maps query head h to KV head h / (qn / kvn)); one group covers every head
 * unless a tensor-parallel split cuts a KV head's queries unevenly. Indices are the rank's own. */
typedef struct feri_attn_group {
  uint32_t q0, qn, kv0, kvn;
} feri_attn_group;

struct feri_tp_link;

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
  /* GELU FFNs (gemma3): gelu at every f16 input, llama.cpp's precision (kernels/gelu.h). Measured
   * on Gemma 3 270M Q4_K_M against llama.cpp (10 prompts x 64 teacher-forced tokens): 633 of 640
   * argmax equal and 564 of 564 confident positions this way, 627 and 563 of 564 with gelu in f32
   * throughout. */
  float *gelu_lut;
  /* tensor parallelism: this rank's share (rank 0 of 1 holding everything in one process) */
  feri_tp_plan tp;
  feri_comm *comm;            /* borrowed; NULL: one process */
  feri_comm *tp_comm;         /* tensor parallelism within a pipeline stage: the stage's ranks (owned); NULL: comm */
  uint32_t H, Hkv, F, V;      /* this rank's query heads, KV heads, FFN columns, vocabulary rows */
  feri_attn_group *groups;
  uint32_t n_groups;
  uint32_t *vocab_begin;      /* size + 1 entries: rank r's logits are columns [vocab_begin[r], vocab_begin[r + 1]) */
  struct feri_tp_link *link;  /* the step mirroring of tp_run.c; NULL in one process */
  /* pipeline parallelism: this rank is stage `stage` of `stages` (0 of 1 otherwise) and runs
   * layers [l0, l1); stage 0 embeds, the last applies the output norm and head and sends the
   * logits back to stage 0 (rank 0), each stage its layers' output to the next. Both at once:
   * world rank stage x tp.size + tp.rank, a stage's ranks all-reducing over tp_comm, each sending
   * its rows to the rank of its share in the next stage, the last stage's ranks their logits slices
   * (or candidates) to rank 0 */
  uint32_t stage, stages, l0, l1;
  /* the most KV heads any tensor-parallel share holds and the most layers any stage runs: the
   * rank holding both exists (every stage has every share), and it holds the most KV of all, so
   * rank 0's admission charges its geometry (feri_llama_kv_charge_geometry) */
  uint32_t kv_heads_most, kv_layers_most;
  int32_t tp_wire;            /* FERI_TP_WIRE_*: the all-reduces' activations as f32 or Q8_0 blocks */
  double tp_timeout_s;        /* how long a rank waits for another inside a step */
};

enum {
  OP_USE,
  OP_EMBED,
  OP_NORM,
  OP_LINEAR,
  OP_BIAS,       /* dst[row, :] += vec for n rows of width out */
  OP_ROPE,
  OP_STORE_KV,   /* the step's k, v rows into its one sequence at positions p0 .. */
  OP_ATTN,       /* the step's queries over its one sequence */
  OP_STORE_ROWS, /* mixed step: k, v rows [row, row + n) into `seq` at its length */
  OP_ATTN_ROWS,  /* mixed step: query rows [row, row + n) over `seq` */
  OP_COPY_ROW,   /* dst[0 .. n) = src[0 .. n) (a segment's last row gathered for its logits) */
  OP_COPY_OUT,   /* the call's output buffer [0 .. n) = src[0 .. n) (hidden states for embeddings) */
  OP_ADD,
  OP_SWIGLU,
  OP_GEGLU,      /* a = gelu_tanh(a) * b, n rows of width out */
  OP_SCALE,      /* dst[0 .. n) *= f */
  OP_SOFTCAP,    /* the call's logits, n rows: f * tanh(x / f) */
  OP_ALLREDUCE,  /* tensor parallelism: dst[0 .. n) summed over the ranks */
  OP_GATHER,     /* tensor parallelism: n rows of the ranks' logits slices (in the scratch) onto rank 0's logits */
  OP_SEND,       /* pipeline: src[0 .. n) to rank `row` (NULL src: the scratch's logits slice) */
  OP_RECV,       /* pipeline: dst[0 .. n) from rank `row` (NULL dst: the call's logits) */
};

struct feri_op {
  int kind;
  uint32_t layer, row;
  uint32_t kv0, kvn;      /* ATTN, ATTN_ROWS: the KV heads the views b and d are cut to */
  feri_llama_seq *seq;    /* STORE_ROWS, ATTN_ROWS */
  const feri_linear *w;   /* LINEAR, EMBED */
  const feri_vector *vec; /* NORM, BIAS */
  fer_tensor a, b, c, d;  /* operands; ATTN: q, K view, out, V view; STORE_KV: K and V views in b, c */
  const float *src;       /* LINEAR input; ADD addend */
  float *dst;             /* LINEAR output (NULL: the call's logits); ADD and BIAS target */
  uint32_t n, in, out;
  uint64_t off, bytes;    /* USE */
  float f;                /* ROPE: theta; SCALE, SOFTCAP: the factor */
};

typedef struct op_list {
  struct feri_op *ops;
  size_t n, cap;
} op_list;

/* Activations of up to `rows` tokens at once, and the 8-bit matmul's workspace for them. */
typedef struct feri_scratch {
  uint32_t rows;
  float *x, *h, *q, *k, *v, *att, *o, *gate, *up, *last;
  int32_t *pos, *ids;
  void *qws;
  size_t qws_bytes;
  float *tp_logits;      /* tensor parallelism: this rank's logits slice, then rank 0's gathered rows */
  size_t tp_logits_floats;
  struct feri_tp_candidate *tp_cand; /* the best candidates of each row's slice (tp_candidates.h) */
  size_t tp_cand_n;
  struct feri_tp_candidate *tp_ties; /* the values tied with a row's k-th that its k left out */
  size_t tp_ties_n;
  void *tp_draw;         /* a draw the ranks make together (tp_draw.h): heads, sums and finds of every row */
  size_t tp_draw_bytes;
  const float *draw_t;   /* borrowed from the batch: each selected row's temperature and uniform */
  const double *draw_u;
} feri_scratch;

fer_status feri_scratch_alloc(const feri_llama_config *c, uint32_t rows, feri_scratch *sc);
void feri_scratch_free(feri_scratch *sc);

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
  feri_scratch sc;         /* rows for one prefill chunk */
  bool window_release;     /* FERI_WINDOW_KV_RELEASE and a layout that can */
  uint32_t released;       /* the local layers' positions before this are released */
  _Atomic int cancel;      /* set by feri_llama_seq_cancel, taken by the next chunk boundary */
  uint32_t tp_id;          /* the name every rank knows it by (tp_run.h) */
};

struct feri_llama_batch {
  const feri_llama *m;
  feri_scratch sc;         /* rows of a step: one per decoding sequence, plus prompt chunks */
  op_list ops;
  uint32_t tp_id;
  uint32_t candidates;    /* feri_llama_batch_set_candidates; FERI_TP_DRAW: feri_llama_batch_set_draws */
  float *draw_t;          /* feri_llama_batch_set_draws: n_draw rows' temperatures and uniforms */
  double *draw_u;
  uint32_t n_draw;
  uint32_t micro_batches; /* feri_llama_batch_set_micro_batches */
  struct {                /* micro-batches left to the model (forward.c choose_split) */
    double per_row[2];    /* recent seconds a row of a whole step [0] and a split one [1]; 0: not tried */
    uint32_t steps;
  } auto_split;
};

/* forward.c's primitives, which the tensor-parallel ranks replay (tp_run.c): one chunk of a
 * sequence's tokens (mode LOGITS_*), a sliding window's release, a mixed step after its checks.
 * logits NULL on the ranks other than 0. */
enum {
  LOGITS_NONE,
  LOGITS_LAST,
  LOGITS_ALL,
  LOGITS_SELECTED, /* mixed steps: per segment */
  LOGITS_HIDDEN    /* no logits: every row's final state after the output norm (embeddings) */
};
fer_status feri_forward_chunk(feri_llama_seq *s, fer_threadpool *pool, const int32_t *ids, uint32_t n, float *logits,
                              int mode);
fer_status feri_forward_release(feri_llama_seq *s);
fer_status feri_forward_mixed_run(feri_llama_batch *b, fer_threadpool *pool, const feri_llama_segment *segs,
                                  uint32_t n_segs, float *logits);

#endif
