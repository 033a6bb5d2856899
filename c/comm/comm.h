/* comm.h: the collectives a model spread over several processes needs (tensor parallelism's
 * all-reduce, broadcasting a step's batch, pipeline stages' sends, gathering for sampling), over
 * MPI, or over nothing when one process is all there is.
 *
 * Every collective is deterministic: the all-reduce sums each element in an order fixed by the
 * rank count alone (ring reduce-scatter, then all-gather: chunk k is summed as
 * ((x_k + x_k+1) + x_k+2) + ... around the ring starting at rank k), so every rank ends with the
 * same bits, run after run. The layer counts what it sends and receives, the bytes every formula
 * about traffic is checked against.
 *
 * Thread-safety: a communicator is used by one thread at a time (MPI's FUNNELED level). */
#ifndef FERI_COMM_H
#define FERI_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "ferrite.h"

typedef struct feri_comm feri_comm;

/* One process alone: rank 0 of 1; collectives copy or do nothing. */
fer_status feri_comm_self(feri_comm **out);

/* MPI_COMM_WORLD of the job this process was started in (mpirun), initializing MPI (thread level
 * FUNNELED) unless the program already did; errors come back as statuses, never as an abort
 * (MPI_ERRORS_RETURN). UNSUPPORTED when MPI cannot start. */
fer_status feri_comm_mpi(feri_comm **out);

/* How long a rank waits for a peer inside one exchange before it gives up: 0 (the default) waits
 * forever. Past it the call fails with DEVICE_ERROR naming the peer ("a rank died or stopped"),
 * and so does every later call on this communicator: the ranks are out of step for good. Waits
 * spin for 2 ms, then poll every 50 us, then every millisecond past 200 ms (an idle rank does not
 * hold a CPU). */
void feri_comm_set_timeout(feri_comm *c, double seconds);

/* The ranks of c with the same color (>= 0) as a communicator of their own, ranked by key (then
 * by their rank in c): a tensor-parallel group within a pipeline stage, say. Every rank of c must
 * call it (a collective of c, not timed). It inherits c's timeout; free it before c. In one
 * process: a communicator of one. */
fer_status feri_comm_split(feri_comm *c, int color, int key, feri_comm **out);

/* Frees; finalizes MPI when feri_comm_mpi initialized it. NULL is a no-op. */
void feri_comm_free(feri_comm *c);

int feri_comm_rank(const feri_comm *c);
int feri_comm_size(const feri_comm *c);

/* x[0..n) becomes the element-wise sum of every rank's x, the same bits on every rank (ring
 * reduce-scatter then all-gather, the order above). Each rank sends and receives
 * 2 (p - 1) / p x n floats (chunks of n / p, the first n % p one float longer). */
fer_status feri_comm_allreduce_sum_f32(feri_comm *c, float *x, size_t n);

/* The same sum with 8-bit traffic (distributed-llama's Q80 buffers): each chunk travels as Q8_0
 * blocks (34 bytes a block of 32 floats) in the same ring, so each rank sends and receives
 * 2 (p - 1) / p x n / 32 blocks (chunks of whole blocks), 3.76x fewer bytes than the f32 ring. A
 * partial chunk is rounded to blocks at each reduce-scatter step, and the summed chunk once more
 * before the all-gather, by its owner, which keeps the rounded values: so every rank ends with the
 * same bits, and each sum is off the f32 ring's by at most half a step (amax / 254) of each block
 * rounded on its way (p of them). n a multiple of 32 (INVALID_ARG otherwise, x untouched). */
enum { FERI_COMM_Q8_BLOCK_BYTES = 34 };
fer_status feri_comm_allreduce_sum_q8(feri_comm *c, float *x, size_t n);

/* buf[0..bytes) of rank `root` into every rank's buf. */
fer_status feri_comm_broadcast(feri_comm *c, void *buf, size_t bytes, int root);

/* Every rank's mine[0..bytes) into all[r * bytes ..] on every rank (ring all-gather). */
fer_status feri_comm_allgather(feri_comm *c, const void *mine, size_t bytes, void *all);

/* Every rank's mine[0..bytes) into all[r * bytes ..] on rank `root` only (all is not touched
 * elsewhere and may be NULL there): p - 1 messages into the root, no traffic between the others. */
fer_status feri_comm_gather(feri_comm *c, const void *mine, size_t bytes, void *all, int root);

/* Point to point, for pipeline stages: blocks until the bytes went out or came in. */
fer_status feri_comm_send(feri_comm *c, const void *buf, size_t bytes, int to);
fer_status feri_comm_recv(feri_comm *c, void *buf, size_t bytes, int from);

/* A receive left running, so that a send after it cannot wait on a send of the peer's: a pipeline's
 * rank 0 starts the receives of every micro-batch's logits before it sends the first one's rows on
 * (messages past MPI's eager limit wait for their receive: the two sends would wait on each other).
 * Receives from one rank take its sends in the order they were started. Every started receive is
 * finished (it waits, under the communicator's timeout) or cancelled (its buffer is free again).
 * At most INT_MAX bytes. */
typedef struct feri_comm_pending {
  unsigned char req[16]; /* the transport's handle */
  size_t bytes;
  int from;
  int live;
} feri_comm_pending;
fer_status feri_comm_recv_start(feri_comm *c, void *buf, size_t bytes, int from, feri_comm_pending *out);
fer_status feri_comm_recv_finish(feri_comm *c, feri_comm_pending *p);
void feri_comm_recv_cancel(feri_comm *c, feri_comm_pending *p);

/* The rank's traffic since creation: payload bytes handed to and taken from the transport. */
typedef struct feri_comm_stats {
  uint64_t bytes_sent, bytes_received, messages_sent;
} feri_comm_stats;
void feri_comm_get_stats(const feri_comm *c, feri_comm_stats *out);

/* Where chunk k of an n-float ring all-reduce over p ranks starts and how long it is (chunk sizes
 * n / p, the first n % p one longer). */
void feri_comm_chunk(size_t n, int p, int k, size_t *start, size_t *len);

#endif
