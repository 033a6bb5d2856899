/* tp_plan.h: how a model is split over ranks for tensor parallelism, Megatron's split as vLLM and
 * TensorRT-LLM make it (issue 33):
 * - attention: each rank computes a contiguous run of query heads (as even as the count allows,
 *   the first ranks one more) and holds the KV heads those queries read (grouped-query attention:
 *   a KV head two ranks' queries read is held by both, so KV heads are replicated when ranks
 *   outnumber them); Q, K and V split by rows (output features), the output projection by
 *   columns, one all-reduce after it;
 * - FFN: gate and up split by rows, down by columns, in whole blocks of down's format (32 or 256
 *   columns), one all-reduce after it;
 * - LM head split by rows (vocabulary), the logits never gathered (sampling takes each rank's
 *   candidates).
 * A column split must fall on block boundaries; a plan that cannot is UNSUPPORTED, naming the
 * tensor and the columns. Pure functions: no model is loaded. */
#ifndef FERI_MODEL_TP_PLAN_H
#define FERI_MODEL_TP_PLAN_H

#include <stdint.h>

#include "ferrite.h"

/* [begin, end) */
typedef struct feri_tp_range {
  uint32_t begin, end;
} feri_tp_range;

/* What the plan needs of a model. */
typedef struct feri_tp_shape {
  uint32_t n_head, n_head_kv, head_dim, n_embd, n_ff, n_vocab;
  uint32_t attn_out_block; /* columns per block of the attention output projection's format */
  uint32_t ffn_down_block; /* the same for the FFN down projection */
} feri_tp_shape;

/* One rank's share. */
typedef struct feri_tp_plan {
  uint32_t rank, size;
  feri_tp_range q_heads;  /* query heads (Q rows / head_dim, attention output columns / head_dim) */
  feri_tp_range kv_heads; /* KV heads held (K and V rows / head_dim, its KV cache's heads) */
  feri_tp_range ff;       /* FFN columns: gate and up rows, down columns */
  feri_tp_range vocab;    /* LM head rows */
} feri_tp_plan;

/* Part r of `units` split over p: as even as possible, the first units % p parts one longer
 * (the layers of pipeline stage r of p). */
feri_tp_range feri_tp_part(uint32_t units, uint32_t r, uint32_t p);

/* Rank `rank`'s share of a `size`-rank split. INVALID_ARG for size 0, rank >= size or a shape
 * with zeros or n_head not a multiple of n_head_kv; UNSUPPORTED when ranks outnumber the query
 * heads or a column split misses a block boundary. *out is zeroed on failure. */
fer_status feri_tp_plan_make(const feri_tp_shape *s, uint32_t rank, uint32_t size, feri_tp_plan *out);

/* Bytes all ranks together send per token in the all-reduces of n_layer layers (two each: after
 * the attention and after the FFN) of n_embd activations of `value_bytes` each, ring all-reduce:
 * 4 L d s (p - 1), so 4 L d s (p - 1) / p per rank (exactly that on every rank when p divides d). */
uint64_t feri_tp_bytes_per_token(uint32_t n_layer, uint32_t n_embd, uint32_t value_bytes, uint32_t size);

#endif
