/* comm.c: feri_comm over MPI point-to-point (the ring collectives are ours, so their order and
 * their byte counts are known), or over nothing for one process. */
#include "comm/comm.h"

#include <limits.h>
#include <mpi/mpi.h> /* Debian's alternatives link to Open MPI's headers */
#include <stdlib.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/status.h"
#include "kernels/quant.h"

struct feri_comm {
  int rank, size;
  int mpi;         /* 1: over MPI */
  MPI_Comm mc;     /* MPI_COMM_WORLD, or a part of it (feri_comm_split) */
  int finalize;    /* 1: this communicator initialized MPI, so it finalizes it */
  float *scratch;  /* a chunk's worth, for the reduce-scatter */
  size_t scratch_n;
  uint8_t *wire;   /* the 8-bit all-reduce's blocks: every chunk, then one chunk received */
  size_t wire_n;
  feri_comm_stats stats;
  double timeout_s; /* 0: wait forever */
  char broken[200]; /* not empty: an exchange timed out; every later call fails with this */
};

enum { TAG_RING = 17, TAG_P2P = 18, TAG_BCAST = 19 };

fer_status feri_comm_self(feri_comm **out) {
  *out = calloc(1, sizeof **out);
  if (*out == NULL) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "comm: out of memory");
  (*out)->size = 1;
  return FER_STATUS_OK;
}

static fer_status mpi_fail(int rc, const char *what) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) len = 0;
  msg[len] = '\0';
  return feri_fail(FER_STATUS_DEVICE_ERROR, "comm: %s failed: %s", what, len ? msg : "an MPI error");
}

fer_status feri_comm_mpi(feri_comm **out) {
  *out = NULL;
  int inited = 0, finalized = 0, provided = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  if (finalized) return feri_fail(FER_STATUS_UNSUPPORTED, "comm: MPI was finalized in this process");
  int mine = 0;
  if (!inited) {
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
      return feri_fail(FER_STATUS_UNSUPPORTED, "comm: MPI_Init_thread failed (is this process started by mpirun?)");
    mine = 1;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  feri_comm *c = calloc(1, sizeof *c);
  if (c == NULL) {
    if (mine) MPI_Finalize();
    return feri_fail(FER_STATUS_OUT_OF_MEMORY, "comm: out of memory");
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &c->size);
  c->mpi = 1, c->finalize = mine, c->mc = MPI_COMM_WORLD;
  *out = c;
  return FER_STATUS_OK;
}

void feri_comm_set_timeout(feri_comm *c, double seconds) { c->timeout_s = seconds > 0 ? seconds : 0; }

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static fer_status broken(const feri_comm *c) { return feri_fail(FER_STATUS_DEVICE_ERROR, "%s", c->broken); }

/* Waits for n requests to a peer: spins for 2 ms, then polls every 50 us, then every 1 ms past
 * 200 ms, until they complete or the timeout passes. */
static fer_status wait_for(feri_comm *c, int n, MPI_Request *req, int peer, const char *what) {
  const double t0 = now_s();
  for (unsigned spin = 0;; spin++) {
    int done = 0;
    const int rc = MPI_Testall(n, req, &done, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, what);
    if (done) return FER_STATUS_OK;
    if ((spin & 63) != 0) continue;
    const double waited = now_s() - t0;
    if (c->timeout_s > 0 && waited > c->timeout_s) {
      snprintf(c->broken, sizeof c->broken,
               "comm: rank %d: rank %d did not answer within %.1f s (%s): a rank died or stopped; the ranks cannot go on",
               c->rank, peer, c->timeout_s, what);
      return broken(c);
    }
    if (waited > 0.002) {
      const struct timespec nap = {0, waited > 0.2 ? 1000000 : 50000};
      nanosleep(&nap, NULL);
    }
  }
}

fer_status feri_comm_split(feri_comm *c, int color, int key, feri_comm **out) {
  *out = NULL;
  if (color < 0) return feri_fail(FER_STATUS_INVALID_ARG, "comm: split color %d < 0", color);
  if (c->broken[0]) return broken(c);
  feri_comm *p = calloc(1, sizeof *p);
  if (p == NULL) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "comm: out of memory");
  p->timeout_s = c->timeout_s;
  if (!c->mpi) { /* one process: a part of one */
    p->size = 1;
    *out = p;
    return FER_STATUS_OK;
  }
  /* a collective of the parent: every rank of it calls, or none goes on */
  const int rc = MPI_Comm_split(c->mc, color, key, &p->mc);
  if (rc != MPI_SUCCESS) {
    free(p);
    return mpi_fail(rc, "MPI_Comm_split");
  }
  MPI_Comm_set_errhandler(p->mc, MPI_ERRORS_RETURN);
  MPI_Comm_rank(p->mc, &p->rank);
  MPI_Comm_size(p->mc, &p->size);
  p->mpi = 1;
  *out = p;
  return FER_STATUS_OK;
}

void feri_comm_free(feri_comm *c) {
  if (c == NULL) return;
  if (c->mpi && c->mc != MPI_COMM_WORLD) MPI_Comm_free(&c->mc);
  if (c->finalize) MPI_Finalize();
  free(c->scratch), free(c->wire);
  free(c);
}

int feri_comm_rank(const feri_comm *c) { return c->rank; }
int feri_comm_size(const feri_comm *c) { return c->size; }

void feri_comm_get_stats(const feri_comm *c, feri_comm_stats *out) { *out = c->stats; }

void feri_comm_chunk(size_t n, int p, int k, size_t *start, size_t *len) {
  const size_t base = n / (size_t)p, extra = n % (size_t)p, kk = (size_t)k;
  *start = kk * base + (kk < extra ? kk : extra);
  *len = base + (kk < extra ? 1 : 0);
}

/* One exchange of a ring step, even when both sides are empty (the neighbours count on it). MPI
 * counts are int: a ring step of 2 GiB or more is refused rather than split, since the two
 * neighbours' chunks could split into different numbers of pieces. */
static fer_status sendrecv(feri_comm *c, const void *sbuf, size_t sbytes, int to, void *rbuf, size_t rbytes, int from,
                           int tag) {
  if (sbytes > INT_MAX || rbytes > INT_MAX)
    return feri_fail(FER_STATUS_INVALID_ARG, "comm: a ring step of %zu bytes (at most %d)", sbytes > rbytes ? sbytes : rbytes,
                     INT_MAX);
  if (c->broken[0]) return broken(c);
  MPI_Request req[2];
  int rc = MPI_Irecv(rbuf, (int)rbytes, MPI_BYTE, from, tag, c->mc, &req[0]);
  if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Irecv");
  rc = MPI_Isend(sbuf, (int)sbytes, MPI_BYTE, to, tag, c->mc, &req[1]);
  if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Isend");
  fer_status st = wait_for(c, 2, req, from, "a ring step");
  if (st != FER_STATUS_OK) return st;
  c->stats.bytes_sent += sbytes, c->stats.bytes_received += rbytes, c->stats.messages_sent++;
  return FER_STATUS_OK;
}

fer_status feri_comm_allreduce_sum_f32(feri_comm *c, float *x, size_t n) {
  const int p = c->size;
  if (p == 1 || n == 0) return FER_STATUS_OK;
  size_t first, max_len; /* chunk 0 is the longest */
  feri_comm_chunk(n, p, 0, &first, &max_len);
  if (max_len > c->scratch_n) {
    float *s = realloc(c->scratch, max_len * sizeof *s);
    if (s == NULL) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "comm: all-reduce scratch of %zu floats", max_len);
    c->scratch = s, c->scratch_n = max_len;
  }
  const int r = c->rank, right = (r + 1) % p, left = (r + p - 1) % p;
  /* reduce-scatter: at step s rank r passes chunk (r - s) on and adds chunk (r - s - 1) into its
   * own; after p - 1 steps rank r holds chunk (r + 1) % p summed over every rank */
  for (int s = 0; s < p - 1; s++) {
    size_t ss, sl, rs, rl;
    feri_comm_chunk(n, p, ((r - s) % p + p) % p, &ss, &sl);
    feri_comm_chunk(n, p, ((r - s - 1) % p + p) % p, &rs, &rl);
    fer_status st = sendrecv(c, x + ss, sl * sizeof(float), right, c->scratch, rl * sizeof(float), left, TAG_RING);
    if (st != FER_STATUS_OK) return st;
    for (size_t i = 0; i < rl; i++) x[rs + i] = c->scratch[i] + x[rs + i];
  }
  /* all-gather of the summed chunks: copies only */
  for (int s = 0; s < p - 1; s++) {
    size_t ss, sl, rs, rl;
    feri_comm_chunk(n, p, ((r + 1 - s) % p + p) % p, &ss, &sl);
    feri_comm_chunk(n, p, ((r - s) % p + p) % p, &rs, &rl);
    fer_status st = sendrecv(c, x + ss, sl * sizeof(float), right, x + rs, rl * sizeof(float), left, TAG_RING);
    if (st != FER_STATUS_OK) return st;
  }
  return FER_STATUS_OK;
}

/* Q8_0 blocks of x[0 .. 32 nb) into q, then x takes back what the blocks hold (so the rank that
 * rounds a chunk holds the same bits as the ranks that receive it). */
static void round_q8(float *x, size_t nb, uint8_t *q) {
  feri_quantize_q8_0(x, (int64_t)nb * 32, q);
  for (size_t b = 0; b < nb; b++) feri_qblock_dequant(FER_DTYPE_Q8_0, q + b * FERI_COMM_Q8_BLOCK_BYTES, x + b * 32);
}

fer_status feri_comm_allreduce_sum_q8(feri_comm *c, float *x, size_t n) {
  const int p = c->size;
  if (n % 32 != 0) return feri_fail(FER_STATUS_INVALID_ARG, "comm: an 8-bit all-reduce of %zu floats (a multiple of 32)", n);
  if (p == 1 || n == 0) return FER_STATUS_OK;
  const size_t nb = n / 32, Q = FERI_COMM_Q8_BLOCK_BYTES;
  size_t first, max_b; /* chunks of whole blocks; chunk 0 is the longest */
  feri_comm_chunk(nb, p, 0, &first, &max_b);
  const size_t need = (nb + max_b) * Q;
  if (need > c->wire_n || max_b * 32 > c->scratch_n) {
    uint8_t *w = need > c->wire_n ? realloc(c->wire, need) : c->wire;
    if (w) c->wire = w, c->wire_n = need > c->wire_n ? need : c->wire_n;
    float *s = max_b * 32 > c->scratch_n ? realloc(c->scratch, max_b * 32 * sizeof *s) : c->scratch;
    if (s) c->scratch = s, c->scratch_n = max_b * 32 > c->scratch_n ? max_b * 32 : c->scratch_n;
    if (!w || !s) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "comm: 8-bit all-reduce scratch of %zu blocks", nb);
  }
  uint8_t *q = c->wire, *in = c->wire + nb * Q; /* q: every chunk's blocks at its block offset */
  const int r = c->rank, right = (r + 1) % p, left = (r + p - 1) % p;
  /* reduce-scatter as the f32 ring's, each partial chunk sent as Q8_0 blocks and added as their
   * values: after p - 1 steps rank r holds chunk (r + 1) % p summed */
  for (int s = 0; s < p - 1; s++) {
    size_t ss, sl, rs, rl;
    feri_comm_chunk(nb, p, ((r - s) % p + p) % p, &ss, &sl);
    feri_comm_chunk(nb, p, ((r - s - 1) % p + p) % p, &rs, &rl);
    feri_quantize_q8_0(x + ss * 32, (int64_t)sl * 32, q + ss * Q);
    fer_status st = sendrecv(c, q + ss * Q, sl * Q, right, in, rl * Q, left, TAG_RING);
    if (st != FER_STATUS_OK) return st;
    for (size_t b = 0; b < rl; b++) {
      feri_qblock_dequant(FER_DTYPE_Q8_0, in + b * Q, c->scratch);
      float *y = x + (rs + b) * 32;
      for (int i = 0; i < 32; i++) y[i] = c->scratch[i] + y[i];
    }
  }
  /* all-gather: the owner rounds its summed chunk to blocks (keeping their values itself), the
   * blocks go round the ring unchanged, and every rank takes their values: the same bits on all */
  size_t os, ol;
  feri_comm_chunk(nb, p, (r + 1) % p, &os, &ol);
  round_q8(x + os * 32, ol, q + os * Q);
  for (int s = 0; s < p - 1; s++) {
    size_t ss, sl, rs, rl;
    feri_comm_chunk(nb, p, ((r + 1 - s) % p + p) % p, &ss, &sl);
    feri_comm_chunk(nb, p, ((r - s) % p + p) % p, &rs, &rl);
    fer_status st = sendrecv(c, q + ss * Q, sl * Q, right, q + rs * Q, rl * Q, left, TAG_RING);
    if (st != FER_STATUS_OK) return st;
    for (size_t b = 0; b < rl; b++) feri_qblock_dequant(FER_DTYPE_Q8_0, q + (rs + b) * Q, x + (rs + b) * 32);
  }
  return FER_STATUS_OK;
}

fer_status feri_comm_allgather(feri_comm *c, const void *mine, size_t bytes, void *all) {
  const int p = c->size, r = c->rank;
  char *a = all;
  memmove(a + (size_t)r * bytes, mine, bytes);
  if (p == 1) return FER_STATUS_OK;
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  for (int s = 0; s < p - 1; s++) {
    const int send_k = ((r - s) % p + p) % p, recv_k = ((r - s - 1) % p + p) % p;
    fer_status st =
        sendrecv(c, a + (size_t)send_k * bytes, bytes, right, a + (size_t)recv_k * bytes, bytes, left, TAG_RING);
    if (st != FER_STATUS_OK) return st;
  }
  return FER_STATUS_OK;
}

fer_status feri_comm_gather(feri_comm *c, const void *mine, size_t bytes, void *all, int root) {
  if (root < 0 || root >= c->size) return feri_fail(FER_STATUS_INVALID_ARG, "comm: gather root %d of %d ranks", root, c->size);
  if (c->rank != root) return bytes ? feri_comm_send(c, mine, bytes, root) : FER_STATUS_OK;
  char *a = all;
  memmove(a + (size_t)root * bytes, mine, bytes);
  for (int r = 0; r < c->size && bytes; r++) {
    if (r == root) continue;
    fer_status st = feri_comm_recv(c, a + (size_t)r * bytes, bytes, r);
    if (st != FER_STATUS_OK) return st;
  }
  return FER_STATUS_OK;
}

fer_status feri_comm_broadcast(feri_comm *c, void *buf, size_t bytes, int root) {
  if (root < 0 || root >= c->size) return feri_fail(FER_STATUS_INVALID_ARG, "comm: broadcast root %d of %d ranks", root, c->size);
  if (c->size == 1 || bytes == 0) return FER_STATUS_OK;
  /* a chain from the root around the ring: p - 1 sends of the whole buffer, counted */
  const int p = c->size, pos = (c->rank - root + p) % p;
  if (pos > 0) {
    fer_status st = feri_comm_recv(c, buf, bytes, (c->rank + p - 1) % p);
    if (st != FER_STATUS_OK) return st;
  }
  if (pos < p - 1) return feri_comm_send(c, buf, bytes, (c->rank + 1) % p);
  return FER_STATUS_OK;
}

/* One point-to-point transfer to or from peer, in pieces of at most INT_MAX bytes (MPI's counts). */
static fer_status p2p(feri_comm *c, char *buf, size_t bytes, int peer, int send) {
  if (peer < 0 || peer >= c->size || peer == c->rank)
    return feri_fail(FER_STATUS_INVALID_ARG, "comm: %s rank %d (this is %d of %d)", send ? "send to" : "receive from", peer,
                     c->rank, c->size);
  do {
    const int n = bytes > INT_MAX ? INT_MAX : (int)bytes;
    if (c->broken[0]) return broken(c);
    MPI_Request req;
    const int rc = send ? MPI_Isend(buf, n, MPI_BYTE, peer, TAG_P2P, c->mc, &req)
                        : MPI_Irecv(buf, n, MPI_BYTE, peer, TAG_P2P, c->mc, &req);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, send ? "MPI_Isend" : "MPI_Irecv");
    fer_status st = wait_for(c, 1, &req, peer, send ? "a send" : "a receive");
    if (st != FER_STATUS_OK) return st;
    if (send) c->stats.bytes_sent += (uint64_t)n, c->stats.messages_sent++;
    else c->stats.bytes_received += (uint64_t)n;
    buf += n, bytes -= (size_t)n;
  } while (bytes > 0);
  return FER_STATUS_OK;
}

fer_status feri_comm_send(feri_comm *c, const void *buf, size_t bytes, int to) {
  return p2p(c, (char *)(uintptr_t)buf, bytes, to, 1); /* MPI_Isend only reads it */
}

fer_status feri_comm_recv(feri_comm *c, void *buf, size_t bytes, int from) { return p2p(c, buf, bytes, from, 0); }

_Static_assert(sizeof(MPI_Request) <= sizeof(((feri_comm_pending *)0)->req), "an MPI_Request fits feri_comm_pending");

fer_status feri_comm_recv_start(feri_comm *c, void *buf, size_t bytes, int from, feri_comm_pending *out) {
  memset(out, 0, sizeof *out);
  if (from < 0 || from >= c->size || from == c->rank)
    return feri_fail(FER_STATUS_INVALID_ARG, "comm: receive from rank %d (this is %d of %d)", from, c->rank, c->size);
  if (bytes > INT_MAX) return feri_fail(FER_STATUS_INVALID_ARG, "comm: a started receive of %zu bytes", bytes);
  if (c->broken[0]) return broken(c);
  MPI_Request req;
  const int rc = MPI_Irecv(buf, (int)bytes, MPI_BYTE, from, TAG_P2P, c->mc, &req);
  if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Irecv");
  memcpy(out->req, &req, sizeof req);
  out->bytes = bytes, out->from = from, out->live = 1;
  return FER_STATUS_OK;
}

fer_status feri_comm_recv_finish(feri_comm *c, feri_comm_pending *p) {
  if (!p->live) return feri_fail(FER_STATUS_MISUSE, "comm: finishing a receive that is not running");
  MPI_Request req;
  memcpy(&req, p->req, sizeof req);
  const fer_status st = wait_for(c, 1, &req, p->from, "a receive");
  if (st != FER_STATUS_OK) {
    memcpy(p->req, &req, sizeof req);
    feri_comm_recv_cancel(c, p);
    return st;
  }
  c->stats.bytes_received += p->bytes;
  p->live = 0;
  return FER_STATUS_OK;
}

void feri_comm_recv_cancel(feri_comm *c, feri_comm_pending *p) {
  (void)c;
  if (!p->live) return;
  MPI_Request req;
  memcpy(&req, p->req, sizeof req);
  if (req != MPI_REQUEST_NULL) {
    MPI_Cancel(&req);
    MPI_Request_free(&req);
  }
  p->live = 0;
}
