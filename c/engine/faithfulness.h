/* faithfulness.h: how close a route of the forward pass comes to the exact computation on the same
 * quantized weights (issue 30).
 *
 * The reference is the exact route (activations kept in f32, every block product in f32) with f32
 * K and V: the computation the file's weights define, up to f32 rounding (checked against the f64
 * oracle in rust_tests/tests/engine.rs, C-ENG-012). A route under test (8-bit activations, a
 * narrower KV dtype, or llama.cpp's logits read from a file) is teacher-forced over the same
 * tokens, and at every position the next-token distributions are compared: KL(P_ref || P_route)
 * in f64 over the whole vocabulary, and whether the two argmaxes agree.
 *
 * The corpus is the committed prose (testdata/model/perplexity-text.txt, its first n_prose tokens)
 * and committed conversations (testdata/model/faithfulness-chats.txt) rendered with the model's
 * own chat template, answers included: what users feed a model, in the two shapes it meets. */
#ifndef FERI_ENGINE_FAITHFULNESS_H
#define FERI_ENGINE_FAITHFULNESS_H

#include <stdint.h>
#include <stdio.h>

#include "ferrite.h"

/* One teacher-forced sequence: its ids, and whether it is a conversation (else prose). */
typedef struct feri_faith_seq {
  int32_t *ids;
  uint32_t n;
  int chat;
} feri_faith_seq;

typedef struct feri_faith_corpus {
  feri_faith_seq *seqs;
  uint32_t n_seqs;
} feri_faith_corpus;

/* Builds the corpus for the model at model_path: the first n_prose tokens of prose_path's text (as
 * one sequence; none when prose_path is NULL or n_prose is 0) and every conversation of chats_path
 * (NULL: none) rendered by fer_engine_chat_render with the file's chat template or the one at
 * chat_template_path (NULL: the file's; the Gemma 3 270M base file has none), each tokenized with
 * FER_ENCODE_ADD_SPECIAL (the model's BOS where it has one). At most max_conversations conversations (0: all). INVALID_ARG
 * naming the line of a malformed conversation file; *out zeroed on failure. */
fer_status feri_faith_corpus_build(const char *model_path, const char *chat_template_path, const char *prose_path,
                                   uint32_t n_prose, const char *chats_path, uint32_t max_conversations, feri_faith_corpus *out);

/* The corpus as text, one sequence a line: "prose|chat N id id ..." (what the llama.cpp helper
 * scripts/model/llamacpp_kl_logits.cpp reads), and back. */
fer_status feri_faith_corpus_write(const feri_faith_corpus *c, FILE *f);
fer_status feri_faith_corpus_read(const char *path, feri_faith_corpus *out);
void feri_faith_corpus_free(feri_faith_corpus *c);

/* A route under test: ferrite's forward pass with a matmul mode (FERI_MATMUL_*) and a KV dtype,
 * or (peer_logits not NULL) the logits of another engine over the same corpus, read from a file
 * of the llama.cpp helper's format: "FERLOGIT", u32 rows, u32 n_vocab, then rows x n_vocab f32
 * (every position of every sequence, in corpus order). */
typedef struct feri_faith_route {
  const char *name;
  int32_t matmul;
  fer_dtype kv_dtype;
  const char *peer_logits;
} feri_faith_route;

/* Agreement with the reference over a set of positions. */
typedef struct feri_faith_stats {
  uint64_t positions;
  double kl_mean, kl_p99, kl_max; /* nats */
  uint64_t top1_same;             /* positions whose argmax is the reference's */
} feri_faith_stats;

/* A route's result: over all positions, the prose's and the conversations'. */
typedef struct feri_faith_result {
  feri_faith_stats all, prose, chat;
} feri_faith_result;

/* Teacher-forces the corpus through the reference and every route (pool: NULL = the calling
 * thread) and writes out[r] for route r. A peer file whose shape is not the corpus's is
 * INVALID_ARG naming it. Nothing is written to out on failure. */
fer_status feri_faith_measure(const char *model_path, const feri_faith_corpus *c, const feri_faith_route *routes,
                              size_t n_routes, fer_threadpool *pool, feri_faith_result *out);

/* KL(P || Q) in nats and whether the argmaxes agree, for logits rows p and q of n values (f64
 * softmaxes; the first of equal maxima is the argmax). Non-finite logits give NaN. */
double feri_faith_kl(const float *p, const float *q, uint32_t n, int *same_top1);

#endif
