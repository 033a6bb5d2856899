/* llama.h: a decoder model of the Llama family (architectures llama, qwen2, qwen3, gemma3) read from a
 * GGUF file, and its forward pass over sequences, built from ferrite's kernels: one sequence at a
 * time (prefill in chunks, decode with a captured plan) or one token of many sequences in one
 * batched step. Each sequence keeps K and V in a fer_kv_cache of its own (any layout). Internal:
 * the public ABI over it is the engine (c/engine). */
#ifndef FERI_MODEL_LLAMA_H
#define FERI_MODEL_LLAMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferrite.h"
#include "kernels/qpanel.h"

struct feri_gguf;

/* Architectures: llama pairs RoPE dimensions as GPT-J (adjacent), qwen2, qwen3 and gemma3 as NeoX
 * (halves); qwen2 adds biases to q, k and v, qwen3 normalises each head of q and k (QK-norm).
 * gemma3 (as llama.cpp reads its GGUF): the embedding scaled by sqrtf(n_embd) in f32, QK-norm,
 * RMSNorm after attention and after the FFN as well as before (the file stores the norm weights
 * with Gemma's +1 already added: used as they are), GeGLU with the tanh GELU, sliding-window
 * attention on the layers the pattern names (default five of every six) with their own RoPE base
 * (rope.freq_base_swa, default 10000), q.k scaled by 1/sqrt(key_length) (1/sqrt(n_embd/n_head)
 * for the 62-layer 27B), tied embeddings, and final_logit_softcapping when the file sets it. */
enum { FERI_ARCH_LLAMA = 0, FERI_ARCH_QWEN2 = 1, FERI_ARCH_QWEN3 = 2, FERI_ARCH_GEMMA3 = 3 };

/* The FFN's gate activation: silu (SwiGLU) or the tanh approximation of GELU (GeGLU). */
enum { FERI_ACT_SILU = 0, FERI_ACT_GELU_TANH = 1 };

typedef struct feri_llama_config {
  int32_t arch; /* FERI_ARCH_* */
  uint32_t n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, n_vocab, n_ctx_train;
  float rms_eps, rope_theta;
  uint32_t rope_dims;
  fer_rope_pairing rope_pairing;
  int32_t ffn_act;       /* FERI_ACT_* */
  float embd_scale;      /* 0: none; gemma3 sqrtf(n_embd) */
  float attn_scale;      /* multiplier of q.k; 0: 1 / sqrt(head_dim) */
  float logit_softcap;   /* 0: none; else logits = cap * tanh(logits / cap) */
  uint32_t swa_window;   /* 0: every layer global; else the sliding window of the local layers */
  uint32_t n_swa_layers; /* how many layers are local */
  float rope_theta_swa;  /* local layers' RoPE base */
  bool post_norms;       /* RMSNorm of the attention and FFN outputs before each residual add */
  uint32_t pooling;      /* the file's <arch>.pooling_type (fer_pooling); 0 when it names none */
} feri_llama_config;

/* A weight used by a projection: block-quantized (fer_matmul_quant) or dense (fer_matmul); off and
 * bytes locate it in the file's data section (what a weight store makes resident). */
typedef struct feri_linear {
  bool quant;
  fer_qmatrix q;
  fer_tensor dense; /* [out, in] */
  uint64_t off, bytes;
  /* q repacked for the 8-bit route's panel kernels (data NULL: none), made at load when the
   * weights are used from the mapped file and the CPU has those kernels; q stays valid beside it */
  feri_qpanel panel;
} feri_linear;

typedef struct feri_vector {
  fer_tensor t;
  uint64_t off, bytes;
} feri_vector;

typedef struct feri_llama_layer {
  feri_vector attn_norm, ffn_norm; /* [n_embd] */
  feri_linear wq, wk, wv, wo, w_gate, w_up, w_down;
  bool has_qkv_bias, has_qk_norm;
  feri_vector bq, bk, bv;          /* [q or kv width] when has_qkv_bias */
  feri_vector q_norm, k_norm;      /* [head_dim] when has_qk_norm */
  feri_vector post_attn_norm, post_ffw_norm; /* [n_embd] when the config's post_norms */
  uint32_t window;                 /* sliding window (0: global) */
  float rope_theta;                /* this layer's RoPE base */
} feri_llama_layer;

/* Where the weights live: used in place from the read-only mapping of the file, or in a
 * fer_weight_store on a granule pool of the model's own (fully resident when the budget holds them
 * all, streamed from the file otherwise; the store's addresses never change). */
enum { FERI_WEIGHTS_MAPPED = 0, FERI_WEIGHTS_STORE = 1 };

/* How block-quantized projections multiply: activations rounded to 8 bits per block of 32 and
 * integer block dot products (fer_matmul_quant_i8, llama.cpp's arithmetic: the default), or the
 * exact f32 product of the dequantized weights (fer_matmul_quant, about 3x slower). */
enum { FERI_MATMUL_I8 = 0, FERI_MATMUL_EXACT = 1 };

struct feri_comm;

typedef struct feri_llama_options {
  int32_t weights;        /* FERI_WEIGHTS_* */
  int32_t matmul;         /* FERI_MATMUL_* */
  int32_t eviction;       /* fer_weight_eviction_code (store) */
  uint64_t budget_bytes;  /* store: most bytes resident at once */
  uint64_t granule_bytes; /* store: 0 = 2 MiB */
  /* Tensor parallelism (tp_plan.h, tp_run.h): the ranks that share the model (borrowed: it
   * outlives the model; NULL or one rank: the whole model here). This rank then holds its slice of
   * every projection, its heads' KV and its vocabulary rows; each step all-reduces after the
   * attention output and the FFN and gathers the logits on rank 0. Every rank opens the same file
   * with the same options: the ranks compare a checksum of the file's header and the options, and
   * all fail together, naming the rank and its reason, when one cannot open or differs. Mapped
   * weights only. */
  struct feri_comm *comm;
  /* Several ranks: how long a rank waits for another inside a step before the model fails for
   * good (tp_run.h); 0: 30 s. */
  double tp_timeout_s;
  /* Several ranks: split by layers (pipeline parallelism: rank r runs the r-th run of layers,
   * rank 0 embeds and samples, the last applies the head) instead of by heads. Each rank then
   * touches only its layers' weights and holds only their KV; the arithmetic is the one process's,
   * so the logits are the same bits. */
  bool pipeline;
  /* With pipeline: the tensor-parallel ranks of each stage (0 or 1: one). The ranks form stages of
   * this many consecutive ranks (rank r is share r % tensor_parallel of stage r / tensor_parallel),
   * so the communicator's size must be a multiple of it. */
  uint32_t tensor_parallel;
  /* Tensor parallelism: how the all-reduces' activations travel: FERI_TP_WIRE_F32 (0, exact up to
   * the order of the sums, C-TP-003) or FERI_TP_WIRE_Q8 (Q8_0 blocks, 3.76x fewer bytes, each sum
   * off by up to half a step of each block rounded on its way: comm.h). */
  int32_t tp_wire;
} feri_llama_options;

enum { FERI_TP_WIRE_F32 = 0, FERI_TP_WIRE_Q8 = 1 };

typedef struct feri_llama feri_llama;

/* Opens the model at path (architecture llama, qwen2, qwen3 or gemma3; every tensor checked against the
 * hyper-parameters; block-quantized weights checked with fer_qmatrix_check). CORRUPT or
 * UNSUPPORTED naming what is wrong. */
fer_status feri_llama_open(const char *path, feri_llama **out);
/* The same over a GGUF image in memory (borrowed: it must outlive the model), for fuzzing. */
fer_status feri_llama_open_image(const void *data, size_t size, feri_llama **out);
/* feri_llama_open with weight options (NULL: mapped). */
fer_status feri_llama_open_with(const char *path, const feri_llama_options *opts, feri_llama **out);
/* The weight store's counters; UNSUPPORTED when the weights are mapped (feri_llama_has_store). */
bool feri_llama_has_store(const feri_llama *m);
fer_status feri_llama_weight_stats(const feri_llama *m, fer_weight_store_stats *out);
void feri_llama_close(feri_llama *m);
/* The model's GGUF (metadata: the tokenizer, the chat template); owned by the model. */
const struct feri_gguf *feri_llama_gguf(const feri_llama *m);
/* Chooses FERI_MATMUL_I8 or FERI_MATMUL_EXACT after opening (for models opened from an image). */
fer_status feri_llama_set_matmul(feri_llama *m, int32_t matmul);
const feri_llama_config *feri_llama_config_of(const feri_llama *m);

/* The dtype a weight matrix of this ggml type runs as (F32, F16, BF16 dense; the block formats),
 * FER_DTYPE_INVALID for a type ferrite cannot multiply. */
fer_dtype feri_llama_weight_dtype(uint32_t ggml_type);

/* The GGUF name of a FERI_ARCH_* value ("llama", "qwen2", "qwen3", "gemma3"); "unknown" otherwise. */
const char *feri_llama_arch_name(int32_t arch);

/* Decode plans: a one-token step's kernel list captured once and replayed for later tokens. On KV
 * growth the plan is dropped (UNCONDITIONAL, as the original engine did) or kept when every
 * binding it holds has the same address and strides after the growth (ADDRESS_STABLE). */
enum { FERI_PLAN_OFF = 0, FERI_PLAN_UNCONDITIONAL = 1, FERI_PLAN_ADDRESS_STABLE = 2 };

typedef struct feri_plan_stats {
  uint64_t captures, replays, invalidations, growth_keeps, declines;
  char last_reason[160]; /* why the last plan was dropped or a step ran without one */
} feri_plan_stats;

/* A sequence's K and V live in a fer_kv_cache of its own (on a granule pool of its own) in any of
 * the three layouts, with the memory issue's growth policies; plan says how decode steps run. */
typedef struct feri_llama_seq_options {
  fer_kv_layout layout;   /* FER_KV_LAYOUT_* */
  int32_t policy;         /* FER_KV_POLICY_* */
  fer_dtype dtype;        /* F32, F16, BF16 or Q8_0 (head_dim a multiple of 32) */
  uint64_t min_bucket;    /* bucketed policy's smallest capacity */
  uint64_t granule_bytes; /* 0 = 64 KiB */
  int32_t plan;           /* FERI_PLAN_* */
  int32_t window_kv;      /* FERI_WINDOW_KV_* */
} feri_llama_seq_options;

/* A sliding-window layer's KV (gemma3's local layers): by default, at the start of each forward
 * call the granules holding only positions that no query of this call or a later one sees are
 * released (fer_kv_seq_release_before: positions before the 256-key attention chunk holding
 * len - window + 1), so such a layer keeps about window + 256 positions committed however long the
 * sequence; seq- and head-major layouts (token-major and relocating caches keep everything). A
 * rewind must then stay at or past released + window - 1 (INVALID_ARG otherwise). KEEP_ALL
 * commits every position, as a global layer does. The logits are the same bits either way. */
enum { FERI_WINDOW_KV_RELEASE = 0, FERI_WINDOW_KV_KEEP_ALL = 1 };

/* Seq-major, fixed at max_tokens, f32, 64 KiB granules, address-stable plans. */
feri_llama_seq_options feri_llama_seq_defaults(void);

/* A sequence's state: the KV cache for up to max_tokens positions and scratch. kv NULL = defaults. */
typedef struct feri_llama_seq feri_llama_seq;
fer_status feri_llama_seq_create(const feri_llama *m, uint32_t max_tokens, const feri_llama_seq_options *kv,
                                 feri_llama_seq **out);
/* A sequence on a KV cache the caller owns (with its granule pool; both outlive the sequence):
 * `kv`, a sequence of that cache whose first len positions hold this model's K and V (an empty
 * one, or a fork of another sequence's prefix), becomes the sequence's (freed with it). The cache's
 * geometry must be the model's (feri_llama_kv_geometry) at capacity >= max_tokens; plans are off
 * (the pool is shared: a plan would freeze it for every sequence on it). On failure kv is not
 * taken. */
fer_status feri_llama_seq_create_on(const feri_llama *m, fer_kv_seq *kv, uint32_t len, uint32_t max_tokens,
                                    feri_llama_seq **out);
/* The KV sequence (stats: live tokens, capacity, growth events). */
const fer_kv_seq *feri_llama_seq_kv(const feri_llama_seq *s);
/* The decode plan's counters. */
void feri_llama_seq_plan_stats(const feri_llama_seq *s, feri_plan_stats *out);
void feri_llama_seq_free(feri_llama_seq *s);
uint32_t feri_llama_seq_len(const feri_llama_seq *s);
uint32_t feri_llama_seq_max_tokens(const feri_llama_seq *s);

/* Runs ids[0..n) at the next positions of the sequence (prefill when n > 1, decode when 1) and
 * writes the logits of the last one into logits[0..n_vocab). BUFFER_TOO_SMALL past max_tokens. */
fer_status feri_llama_forward(feri_llama_seq *s, fer_threadpool *pool, const int32_t *ids, uint32_t n,
                              float *logits);
/* As feri_llama_forward, writing the logits of every one of the n tokens: row i (the prediction
 * after ids[i]) at logits + i * n_vocab. The rows equal what one-token steps give, bit for bit. */
fer_status feri_llama_forward_all(feri_llama_seq *s, fer_threadpool *pool, const int32_t *ids, uint32_t n,
                                  float *logits);
/* As feri_llama_forward without the output projection: each token's final state after the output
 * norm, row i at hidden + i * n_embd (what an embedding pools). */
fer_status feri_llama_forward_hidden(feri_llama_seq *s, fer_threadpool *pool, const int32_t *ids, uint32_t n,
                                     float *hidden);

/* Prompts longer than this many tokens are prefilled in chunks (a sequence's scratch holds one);
 * every position's result is the same as one-token steps would give. */
enum { FERI_PREFILL_CHUNK = 256 };

/* Rewinds the sequence to its first n_tokens (<= its length): later positions are dropped from
 * the KV cache, and the next forward continues from position n_tokens. */
fer_status feri_llama_seq_rewind(feri_llama_seq *s, uint32_t n_tokens);

/* Asks a forward pass running on s (on another thread) to stop at its next chunk boundary; it then
 * returns FER_STATUS_CANCELLED with the sequence as it was before the call. A request made while
 * nothing runs cancels the next forward. */
void feri_llama_seq_cancel(feri_llama_seq *s);

/* The KV geometry a sequence of max_tokens with these options commits by on this rank (its KV
 * heads and its stage's layers; the whole model's in one process). */
fer_status feri_llama_kv_geometry(const feri_llama *m, uint32_t max_tokens, const feri_llama_seq_options *o,
                                  fer_kv_geometry *out, uint64_t *out_granule_bytes);
/* What admission charges: the geometry of the rank holding the most KV (the most KV heads of any
 * tensor-parallel share, the most layers of any pipeline stage). Every rank has the same budget and
 * commits at most what that rank does, so a sequence admitted on rank 0 fits on every rank
 * (SmolLM2 at 4 ranks: rank 2 holds 2 KV heads, rank 0 one). The same as feri_llama_kv_geometry
 * in one process. */
fer_status feri_llama_kv_charge_geometry(const feri_llama *m, uint32_t max_tokens, const feri_llama_seq_options *o,
                                         fer_kv_geometry *out, uint64_t *out_granule_bytes);
/* The bytes the rank holding the most KV commits beyond this rank's `own` geometry for the windows
 * of n_tokens (0 when this rank holds the most): what a charge of this rank's windows adds. */
uint64_t feri_llama_kv_extra_bytes(const feri_llama *m, const fer_kv_geometry *own, uint64_t n_tokens, uint64_t granule);

/* Batched steps over many sequences of the same model in one pass (every projection runs with M =
 * all rows). A batch holds scratch for up to `rows` rows (at most FERI_BATCH_MAX_ROWS). */
enum { FERI_BATCH_MAX_ROWS = 4096 };
typedef struct feri_llama_batch feri_llama_batch;
fer_status feri_llama_batch_create(const feri_llama *m, uint32_t rows, feri_llama_batch **out);
void feri_llama_batch_free(feri_llama_batch *b);
uint32_t feri_llama_batch_rows(const feri_llama_batch *b);

/* Tensor parallelism: the next mixed steps' logits rows hold only the k best candidates of every
 * rank's vocabulary slice and the ties they cut, -inf elsewhere (model/tp_candidates.h: what
 * draws that leaves exact); 0 (the default): the whole rows. No effect in one process or with
 * pipeline stages of one rank each. */
void feri_llama_batch_set_candidates(feri_llama_batch *b, uint32_t k);

/* Tensor parallelism: the next mixed steps' selected rows (n of them, in order) are drawn by the
 * ranks together (model/tp_draw.h), row i at temperature t[i] (0: greedy) with uniform u[i] (the
 * sampler's, feri_uniform of the request's seed and step): rank 0's logits rows then hold the
 * drawn token alone (its value, for greedy rows; 0 otherwise) and -inf elsewhere, so the sampler,
 * run on them with the same temperature and no other processor, returns that token; a row with NaN
 * or +inf is the whole row. n 0 (or NULL arrays) turns it off (then set_candidates rules). The
 * arrays are copied; n above the batch's rows is clamped. No effect in one process; with
 * pipeline stages the rows are gathered whole. */
void feri_llama_batch_set_draws(feri_llama_batch *b, const float *t, const double *u, uint32_t n);

/* Pipeline stages: the next mixed steps run as up to `parts` micro-batches of about equal rows
 * (whole segments each), so that the stages overlap: stage 0 runs the second micro-batch while
 * stage 1 runs the first. 1: the whole step at once. 0 (the default): left to the model, which
 * times both ways as steps go and runs the cheaper (a split makes each stage pass over its weights
 * once a micro-batch: it pays on some weights and machines, not on others; forward.c
 * choose_split). The logits are the same bits either way. No effect in one process or with
 * tensor parallelism. At most FERI_MAX_MICRO_BATCHES. */
enum { FERI_MAX_MICRO_BATCHES = 16 };
void feri_llama_batch_set_micro_batches(feri_llama_batch *b, uint32_t parts);

/* One token for each of n sequences (a decode step). logits: n rows of n_vocab, each equal to what
 * feri_llama_forward of that one token would give, bit for bit. All or nothing: on failure no
 * sequence advanced. */
fer_status feri_llama_forward_batch(feri_llama_batch *b, fer_threadpool *pool, feri_llama_seq *const *seqs,
                                    const int32_t *ids, uint32_t n, float *logits);

/* A mixed step's part: n tokens at seq's next positions (one for a decode, a chunk of a prompt),
 * and whether the logits of its last token are wanted. */
typedef struct feri_llama_segment {
  feri_llama_seq *seq;
  const int32_t *ids;
  uint32_t n;
  bool logits;
} feri_llama_segment;

/* A mixed step (continuous batching): the segments' tokens, distinct sequences, all rows in one
 * pass; logits gets one row of n_vocab for each segment that wants them, in segment order, equal
 * bit for bit to what feri_llama_forward of the same tokens gives (the kernels' rows do not depend
 * on the other rows). All or nothing: on failure no sequence advanced. */
fer_status feri_llama_forward_mixed(feri_llama_batch *b, fer_threadpool *pool, const feri_llama_segment *segs,
                                    uint32_t n_segs, float *logits);

#endif
