/* model_internal.h: what the model's two halves share. llama.c reads a model from GGUF and owns
 * sequences; forward.c builds a step as a list of kernel calls and runs it. */
#ifndef FERI_MODEL_MODEL_INTERNAL_H
#define FERI_MODEL_MODEL_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "ferrite.h"
#include "gguf/gguf.h"
#include "model/llama.h"

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
};

struct feri_op {
  int kind;
  uint32_t layer, row;
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
};

struct feri_llama_batch {
  const feri_llama *m;
  feri_scratch sc;         /* rows of a step: one per decoding sequence, plus prompt chunks */
  op_list ops;
};

#endif
