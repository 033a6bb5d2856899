/* pp_bench.c: pipeline stages under load, with and without micro-batches (issue 33; a benchmark,
 * not a test). Under mpirun every rank is one stage of one thread; rank 0 prefills ROWS sequences
 * and then runs batched decode steps, in rounds that alternate the whole step (one pass a stage)
 * with the step cut into as many micro-batches as there are stages, so that noise falls on both
 * alike, and then the choice left to the model (feri_llama_batch_set_micro_batches 0: it measures
 * both ways as it goes). Prints tokens per second of each and the ratios; the logits of all three
 * are checked equal.
 * usage: mpirun -n STAGES pp_bench MODEL.gguf [ROWS [STEPS [ROUNDS]]] (8 rows, 16 steps, 3 rounds) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/comm.h"
#include "model/llama.h"
#include "model/tp_run.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int fail(const char *what, fer_status st) {
  char msg[256];
  size_t len;
  fer_last_error_message(msg, sizeof msg, &len);
  fprintf(stderr, "pp_bench: %s: %s (%s)\n", what, fer_status_str(st), msg);
  return 1;
}

#define TRY_MAIN(what, call)                   \
  do {                                         \
    const fer_status st_ = (call);             \
    if (st_ != FER_STATUS_OK) return fail(what, st_); \
  } while (0)

/* STEPS decode steps of the rows, micro-batched or whole; the rows' sequences rewound after. */
static int decode(feri_llama_batch *bt, fer_threadpool *pool, feri_llama_seq **seqs, uint32_t rows, int steps,
                  uint32_t parts, float *logits, double *seconds) {
  int32_t ids[64];
  uint32_t lens[64];
  for (uint32_t r = 0; r < rows; r++) ids[r] = (int32_t)(100 + r), lens[r] = feri_llama_seq_len(seqs[r]);
  feri_llama_batch_set_micro_batches(bt, parts);
  const double t0 = now_s();
  for (int s = 0; s < steps; s++) TRY_MAIN("a decode step", feri_llama_forward_batch(bt, pool, seqs, ids, rows, logits));
  *seconds = now_s() - t0;
  for (uint32_t r = 0; r < rows; r++) TRY_MAIN("rewind", feri_llama_seq_rewind(seqs[r], lens[r]));
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 5) {
    fprintf(stderr, "usage: mpirun -n STAGES pp_bench MODEL.gguf [ROWS [STEPS [ROUNDS]]]\n");
    return 2;
  }
  const uint32_t rows = argc > 2 ? (uint32_t)atoi(argv[2]) : 8;
  const int steps = argc > 3 ? atoi(argv[3]) : 16, rounds = argc > 4 ? atoi(argv[4]) : 3;
  if (rows < 2 || rows > 64 || steps < 1 || rounds < 1) {
    fprintf(stderr, "pp_bench: 2 .. 64 rows, at least one step and one round\n");
    return 2;
  }
  feri_comm *c = NULL;
  TRY_MAIN("MPI", feri_comm_mpi(&c));
  const uint32_t stages = (uint32_t)feri_comm_size(c);
  fer_threadpool_options po;
  fer_threadpool_options_init(&po);
  po.n_threads = 1;
  fer_threadpool *pool = NULL;
  TRY_MAIN("threads", fer_threadpool_create(&po, &pool));
  feri_llama_options o = {.weights = FERI_WEIGHTS_MAPPED, .matmul = FERI_MATMUL_I8, .comm = c, .pipeline = true};
  feri_llama *m = NULL;
  TRY_MAIN("open", feri_llama_open_with(argv[1], &o, &m));
  int rc = 0;
  if (feri_comm_rank(c) != 0) {
    TRY_MAIN("serve", feri_llama_tp_serve(m, pool));
  } else {
    TRY_MAIN("lead", feri_llama_tp_lead(m));
    const uint32_t V = feri_llama_config_of(m)->n_vocab;
    feri_llama_seq *seqs[64] = {0};
    float *a = malloc((size_t)rows * V * sizeof *a), *b = malloc((size_t)rows * V * sizeof *b);
    feri_llama_batch *bt = NULL;
    TRY_MAIN("batch", feri_llama_batch_create(m, rows, &bt));
    int32_t prompt[8]; /* short: the decode steps are what is measured */
    for (int i = 0; i < 8; i++) prompt[i] = 200 + 7 * i;
    for (uint32_t r = 0; r < rows; r++) {
      TRY_MAIN("sequence", feri_llama_seq_create(m, 8 + (uint32_t)steps + 8, NULL, &seqs[r]));
      prompt[0] = 200 + (int32_t)r;
      TRY_MAIN("prefill", feri_llama_forward(seqs[r], pool, prompt, 8, a));
    }
    double whole = 0, micro = 0, automatic = 0, t;
    int same = 1;
    for (int round = 0; round < rounds && rc == 0; round++) {
      rc |= decode(bt, pool, seqs, rows, steps, 1, a, &t);
      whole += t;
      rc |= decode(bt, pool, seqs, rows, steps, stages, b, &t);
      micro += t;
      same &= rc == 0 && memcmp(a, b, (size_t)rows * V * sizeof *a) == 0;
      rc |= decode(bt, pool, seqs, rows, steps, 0, b, &t);
      automatic += t;
      same &= rc == 0 && memcmp(a, b, (size_t)rows * V * sizeof *a) == 0;
    }
    const double tokens = (double)rows * steps * rounds;
    printf("pp_bench: %u stages x 1 thread, %u rows, %d steps x %d rounds: whole steps %.1f tokens/s, %u micro-batches "
           "%.1f tokens/s (%.2fx), left to the model %.1f tokens/s (%.2fx); logits the same bits: %s\n",
           stages, rows, steps, rounds, tokens / whole, stages, tokens / micro, whole / micro, tokens / automatic,
           whole / automatic, same ? "yes" : "no");
    rc |= !same;
    feri_llama_batch_free(bt);
    for (uint32_t r = 0; r < rows; r++) feri_llama_seq_free(seqs[r]);
    free(a), free(b);
  }
  feri_llama_close(m);
  fer_threadpool_free(pool);
  feri_comm_free(c);
  return rc;
}
