/* model_info.c: `ferrite info MODEL.gguf`: what a model file holds. Every metadata pair (long
 * arrays cut), the tensors counted by type with their bytes, the tokenizer ferrite builds from it,
 * and the model ferrite would run, or the reason it would refuse. */
#include <stdio.h>
#include <string.h>

#include "ferrite.h"
#include "gguf/gguf.h"
#include "kernels/quant.h"
#include "model/llama.h"
#include "tools/commands.h"

static void last_error(char *buf, size_t cap) {
  size_t len;
  fer_last_error_message(buf, cap, &len);
}

/* How a weight of dtype d multiplies: the default 8-bit route and the exact one (--matmul exact). */
static const char *weight_route(fer_dtype d) {
  switch (d) {
    case FER_DTYPE_F32: return "dense f32 GEMM/GEMV (vectors: as stored)";
    case FER_DTYPE_F16:
    case FER_DTYPE_BF16: return "dense GEMM/GEMV, widened exactly to f32";
    case FER_DTYPE_INVALID: return "unsupported";
    default:
      return feri_qblock_elems(d) == 256
                 ? "8-bit route: Q8_K-style activations (blocks of 256); exact: fused dequantizing GEMV/GEMM"
                 : "8-bit route: Q8_0/Q8_1-style activations (blocks of 32); exact: fused dequantizing GEMV/GEMM";
  }
}

int feri_cmd_model_info(const char *path) {
  feri_gguf *g = NULL;
  char line[512];
  if (feri_gguf_open_file(path, &g) != FER_STATUS_OK) {
    last_error(line, sizeof line);
    fprintf(stderr, "ferrite info: %s: %s\n", path, line);
    return 1;
  }
  printf("file         : %s (GGUF v%u, alignment %u, data at %llu)\n", path, feri_gguf_version(g), feri_gguf_alignment(g),
         (unsigned long long)feri_gguf_data_offset(g));
  printf("metadata     : %lld pairs\n", (long long)feri_gguf_kv_count(g));
  for (int64_t i = 0; i < feri_gguf_kv_count(g); i++) {
    size_t len;
    feri_gguf_kv_describe(g, i, line, sizeof line, &len);
    printf("  %s\n", line);
  }
  uint64_t count[64] = {0}, bytes[64] = {0}, total = 0;
  for (int64_t i = 0; i < feri_gguf_tensor_count(g); i++) {
    const feri_gguf_tensor_info *t = feri_gguf_tensor(g, i);
    uint32_t k = t->ggml_type < 64 ? t->ggml_type : 63;
    count[k]++;
    bytes[k] += t->n_bytes;
    total += t->n_bytes;
  }
  printf("tensors      : %lld, %llu bytes\n", (long long)feri_gguf_tensor_count(g), (unsigned long long)total);
  for (uint32_t k = 0; k < 64; k++) {
    if (!count[k]) continue;
    const fer_dtype d = feri_llama_weight_dtype(k);
    printf("  %-7s %4llu tensors %12llu bytes (%5.1f%%): %s\n", feri_ggml_type_name(k), (unsigned long long)count[k],
           (unsigned long long)bytes[k], total ? 100.0 * (double)bytes[k] / (double)total : 0.0, weight_route(d));
  }
  for (int64_t i = 0; i < feri_gguf_tensor_count(g); i++) {
    const feri_gguf_tensor_info *t = feri_gguf_tensor(g, i);
    if (feri_llama_weight_dtype(t->ggml_type) == FER_DTYPE_INVALID) {
      printf("  unsupported: tensor %.*s has type %s\n", (int)t->name_len, t->name, feri_ggml_type_name(t->ggml_type));
      break;
    }
  }
  feri_gguf_close(g);
  fer_tokenizer *tok = NULL;
  if (fer_tokenizer_from_gguf_file(path, &tok) == FER_STATUS_OK) {
    fer_tokenizer_info ti;
    fer_tokenizer_get_info(tok, &ti);
    printf("tokenizer    : %u ids, %u merges, %u added tokens, %s, bos %d, eos %d\n", ti.vocab_size, ti.n_merges, ti.n_added,
           ti.byte_level ? "byte-level BPE" : "SentencePiece BPE", ti.bos_id, ti.eos_id);
    fer_tokenizer_free(tok);
  } else {
    last_error(line, sizeof line);
    printf("tokenizer    : not usable: %s\n", line);
  }
  feri_llama *m = NULL;
  if (feri_llama_open(path, &m) == FER_STATUS_OK) {
    const feri_llama_config *c = feri_llama_config_of(m);
    static const char *const detail[] = {"", " (q, k, v biases)", " (QK-norm)",
                                         " (sliding-window attention, QK-norm, GeGLU)"};
    printf("model        : %s%s, %u layers, embedding %u, %u heads (%u kv) of %u, feed-forward %u, vocab %u, "
           "rope theta %g (%s pairs) on %u dims, rms eps %g, trained context %u\n",
           feri_llama_arch_name(c->arch), c->arch >= 0 && c->arch < 4 ? detail[c->arch] : "", c->n_layer, c->n_embd, c->n_head, c->n_head_kv, c->head_dim, c->n_ff, c->n_vocab, c->rope_theta,
           c->rope_pairing == FER_ROPE_NEOX ? "NeoX" : "GPT-J", c->rope_dims,
           c->rms_eps, c->n_ctx_train);
    feri_llama_close(m);
  } else {
    last_error(line, sizeof line);
    printf("model        : not runnable: %s\n", line);
  }
  return 0;
}
