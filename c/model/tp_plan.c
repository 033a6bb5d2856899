/* tp_plan.c: one rank's share of a tensor-parallel split (tp_plan.h). */
#include "model/tp_plan.h"

#include <string.h>

#include "core/status.h"

feri_tp_range feri_tp_part(uint32_t units, uint32_t r, uint32_t p) {
  const uint32_t base = units / p, extra = units % p;
  const uint32_t begin = r * base + (r < extra ? r : extra);
  return (feri_tp_range){begin, begin + base + (r < extra ? 1 : 0)};
}

fer_status feri_tp_plan_make(const feri_tp_shape *s, uint32_t rank, uint32_t size, feri_tp_plan *out) {
  static const char *const fn = "tensor-parallel plan";
  memset(out, 0, sizeof *out);
  if (size == 0 || rank >= size) return feri_fail(FER_STATUS_INVALID_ARG, "%s: rank %u of %u", fn, rank, size);
  if (!s->n_head || !s->n_head_kv || !s->head_dim || !s->n_embd || !s->n_ff || !s->n_vocab || !s->attn_out_block ||
      !s->ffn_down_block || s->n_head % s->n_head_kv)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: a shape with zeros or %u query heads over %u KV heads", fn, s->n_head,
                     s->n_head_kv);
  if (size > s->n_head)
    return feri_fail(FER_STATUS_UNSUPPORTED, "%s: %u ranks for %u query heads (at most one rank per head)", fn, size,
                     s->n_head);
  feri_tp_plan p = {.rank = rank, .size = size};
  p.q_heads = feri_tp_part(s->n_head, rank, size);
  const uint32_t group = s->n_head / s->n_head_kv; /* query heads per KV head */
  p.kv_heads = (feri_tp_range){p.q_heads.begin / group, (p.q_heads.end - 1) / group + 1};
  /* the attention output projection's columns: this rank's heads, on block boundaries */
  const uint64_t c0 = (uint64_t)p.q_heads.begin * s->head_dim, c1 = (uint64_t)p.q_heads.end * s->head_dim;
  if (c0 % s->attn_out_block || c1 % s->attn_out_block)
    return feri_fail(FER_STATUS_UNSUPPORTED,
                     "%s: rank %u of %u takes attention output columns %llu..%llu, not on its blocks of %u (heads of %u)",
                     fn, rank, size, (unsigned long long)c0, (unsigned long long)c1, s->attn_out_block, s->head_dim);
  /* the FFN in whole blocks of down's format */
  if (s->n_ff % s->ffn_down_block)
    return feri_fail(FER_STATUS_UNSUPPORTED, "%s: %u FFN columns are not whole blocks of %u", fn, s->n_ff, s->ffn_down_block);
  const uint32_t blocks = s->n_ff / s->ffn_down_block;
  if (size > blocks)
    return feri_fail(FER_STATUS_UNSUPPORTED, "%s: %u ranks for %u FFN blocks of %u", fn, size, blocks, s->ffn_down_block);
  const feri_tp_range fb = feri_tp_part(blocks, rank, size);
  p.ff = (feri_tp_range){fb.begin * s->ffn_down_block, fb.end * s->ffn_down_block};
  p.vocab = feri_tp_part(s->n_vocab, rank, size);
  *out = p;
  return FER_STATUS_OK;
}

uint64_t feri_tp_bytes_per_token(uint32_t n_layer, uint32_t n_embd, uint32_t value_bytes, uint32_t size) {
  /* per all-reduce, all ranks together: the reduce-scatter and the all-gather each send every
   * chunk p - 1 times, (p - 1) n values each */
  if (size <= 1) return 0;
  return 2ull * n_layer * 2ull * (uint64_t)(size - 1) * n_embd * value_bytes;
}
