/* comm_test.c: the communicator alone (rank 0 of 1) and the ring's chunking; with --mpi, started
 * by mpirun on p ranks, the collectives across them: the all-reduce equals the documented order's
 * sum bit for bit on every rank, twice the same, sending 2 (p - 1) / p x n floats; broadcast from
 * every root; all-gather; sends around the ring; receives left running (finished out of order,
 * cancelled); a split into the ranks of each parity, each all-reducing alone; bad ranks refused;
 * the 8-bit all-reduce (the same bits on every rank, within its bound of the f32 sum, 34 bytes a
 * block of 32 on the wire; n not a multiple of 32 refused).
 * EVIDENCE: C-COMM-001 C-COMM-002 C-COMM-004 C-COMM-005 (with comm_mpi_test.sh and comm_netns_test.sh) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/comm.h"
#include "testing/check.h"

/* A value with varied magnitude and sign, so the order of a sum shows in its bits. */
#define FNV_START 0xcbf29ce484222325ull
static uint64_t fnv(uint64_t h, const void *data, size_t bytes) {
  const unsigned char *q = data;
  for (size_t i = 0; i < bytes; i++) h = (h ^ q[i]) * 0x100000001b3ull;
  return h;
}

static float value(int rank, size_t i) {
  uint64_t z = (uint64_t)rank * 0x9e3779b97f4a7c15ull + i * 0xbf58476d1ce4e5b9ull + 1;
  z ^= z >> 31, z *= 0x94d049bb133111ebull, z ^= z >> 29;
  const float m = (float)(z >> 40) / (float)(1 << 24) - 0.5f;
  static const float scale[4] = {1e-3f, 1.0f, 3e2f, 7e4f};
  return m * scale[(z >> 8) & 3];
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void test_alone(void) {
  feri_comm *c = NULL;
  CHECK_STATUS(feri_comm_self(&c), FER_STATUS_OK);
  CHECK(feri_comm_rank(c) == 0 && feri_comm_size(c) == 1);
  float x[3] = {1, 2, 3};
  CHECK_STATUS(feri_comm_allreduce_sum_f32(c, x, 3), FER_STATUS_OK);
  CHECK(x[0] == 1 && x[1] == 2 && x[2] == 3);
  float blocks[64];
  for (int i = 0; i < 64; i++) blocks[i] = (float)i / 3.0f;
  CHECK_STATUS(feri_comm_allreduce_sum_q8(c, blocks, 64), FER_STATUS_OK); /* one rank: untouched */
  CHECK(blocks[1] == 1.0f / 3.0f && blocks[63] == 21.0f);
  CHECK_STATUS(feri_comm_allreduce_sum_q8(c, blocks, 63), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(feri_comm_broadcast(c, x, sizeof x, 0), FER_STATUS_OK);
  CHECK_STATUS(feri_comm_broadcast(c, x, sizeof x, 1), FER_STATUS_INVALID_ARG);
  int mine = 7, all = 0;
  CHECK_STATUS(feri_comm_allgather(c, &mine, sizeof mine, &all), FER_STATUS_OK);
  CHECK(all == 7);
  feri_comm *part = NULL; /* a part of one process: one process */
  CHECK_STATUS(feri_comm_split(c, 3, 0, &part), FER_STATUS_OK);
  CHECK(part && feri_comm_rank(part) == 0 && feri_comm_size(part) == 1);
  feri_comm_free(part);
  all = 0;
  CHECK_STATUS(feri_comm_gather(c, &mine, sizeof mine, &all, 0), FER_STATUS_OK);
  CHECK(all == 7);
  CHECK_STATUS(feri_comm_gather(c, &mine, sizeof mine, &all, 1), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(feri_comm_send(c, x, 4, 0), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(feri_comm_recv(c, x, 4, 1), FER_STATUS_INVALID_ARG);
  feri_comm_stats st;
  feri_comm_get_stats(c, &st);
  CHECK(st.bytes_sent == 0 && st.bytes_received == 0);
  feri_comm_free(c);
  feri_comm_free(NULL);
  /* the chunks tile [0, n) in order, sizes within one of each other */
  for (size_t n = 0; n < 40; n++)
    for (int p = 1; p <= 5; p++) {
      size_t next = 0;
      for (int k = 0; k < p; k++) {
        size_t s, l;
        feri_comm_chunk(n, p, k, &s, &l);
        CHECK(s == next && (l == n / (size_t)p || l == n / (size_t)p + 1));
        next = s + l;
      }
      CHECK(next == n);
    }
}

/* The all-reduce's documented order: chunk k's elements summed from rank k around the ring. */
static float ring_sum(int p, size_t n, size_t i) {
  int k = 0;
  for (; k < p; k++) {
    size_t s, l;
    feri_comm_chunk(n, p, k, &s, &l);
    if (i >= s && i < s + l) break;
  }
  float acc = value(k, i);
  for (int j = 1; j < p; j++) acc = acc + value((k + j) % p, i);
  return acc;
}

static void test_ranks(void) {
  feri_comm *c = NULL;
  CHECK_STATUS(feri_comm_mpi(&c), FER_STATUS_OK);
  if (c == NULL) return;
  const int r = feri_comm_rank(c), p = feri_comm_size(c);
  const size_t sizes[] = {0, 1, 3, 1000, 12345, (size_t)p * 4096};
  for (size_t t = 0; t < sizeof sizes / sizeof *sizes; t++) {
    const size_t n = sizes[t];
    float *x = malloc((n + 1) * sizeof *x), *y = malloc((n + 1) * sizeof *y);
    for (size_t i = 0; i < n; i++) x[i] = y[i] = value(r, i);
    feri_comm_stats before, after;
    feri_comm_get_stats(c, &before);
    CHECK_STATUS(feri_comm_allreduce_sum_f32(c, x, n), FER_STATUS_OK);
    feri_comm_get_stats(c, &after);
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++) {
      const float want = ring_sum(p, n, i);
      wrong += memcmp(&x[i], &want, sizeof want) != 0;
    }
    CHECK(wrong == 0);
    if (wrong) fprintf(stderr, "  rank %d: %zu of %zu sums differ from the ring order (n %zu)\n", r, wrong, n, n);
    if (n % (size_t)p == 0) { /* the traffic formula: 2 (p - 1) / p x n floats each way */
      const uint64_t want = 2ull * (uint64_t)(p - 1) * (n / (size_t)p) * sizeof(float);
      CHECK(after.bytes_sent - before.bytes_sent == want && after.bytes_received - before.bytes_received == want);
    }
    CHECK_STATUS(feri_comm_allreduce_sum_f32(c, y, n), FER_STATUS_OK); /* the same bits again */
    CHECK(n == 0 || memcmp(x, y, n * sizeof *x) == 0);
    free(x), free(y);
  }
  /* the 8-bit all-reduce: the same bits on every rank, within its bound of the f32 sum, its bytes */
  const size_t q_sizes[] = {0, 32, 576, (size_t)p * 4096};
  for (size_t t = 0; t < sizeof q_sizes / sizeof *q_sizes; t++) {
    const size_t n = q_sizes[t];
    float *x = malloc((n + 1) * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = value(r, i);
    feri_comm_stats before, after;
    feri_comm_get_stats(c, &before);
    CHECK_STATUS(feri_comm_allreduce_sum_q8(c, x, n), FER_STATUS_OK);
    feri_comm_get_stats(c, &after);
    /* each sum is rounded p times on its way, each time by at most half a step (d / 2, d the
     * block's amax / 127 rounded to f16: at most 2^-11 above) of a block whose values are at most
     * B, every rank's magnitudes summed there, plus the roundings before it (at most p B / 254);
     * the float additions add at most 2^-24 of B each */
    size_t over = 0;
    double worst = 0;
    for (size_t b = 0; b < n / 32; b++) {
      double amax = 0;
      for (size_t i = b * 32; i < b * 32 + 32; i++) {
        double m = 0;
        for (int k = 0; k < p; k++) m += fabs((double)value(k, i));
        amax = m > amax ? m : amax;
      }
      for (size_t i = b * 32; i < b * 32 + 32; i++) {
        const double err = fabs((double)x[i] - (double)ring_sum(p, n, i)), bound = p * amax / 254 * (1 + p / 254.0) * (1 + 0x1p-11) + p * amax * 0x1p-24;
        over += err > bound;
        worst = err / bound > worst ? err / bound : worst;
      }
    }
    CHECK(over == 0);
    uint64_t sum = FNV_START, all[16] = {0};
    for (size_t i = 0; i < n; i++) sum = fnv(sum, &x[i], sizeof x[i]);
    CHECK_STATUS(feri_comm_allgather(c, &sum, sizeof sum, all), FER_STATUS_OK);
    for (int k = 0; k < p; k++) CHECK(all[k] == all[0]);
    if (r == 0 && n > 0) printf("comm_test: 8-bit all-reduce of %zu floats over %d ranks: worst error %.2f of its bound\n", n, p, worst);
    if ((n / 32) % (size_t)p == 0) { /* 2 (p - 1) / p x n / 32 blocks of 34 bytes each way */
      const uint64_t want = 2ull * (uint64_t)(p - 1) * (n / 32 / (size_t)p) * FERI_COMM_Q8_BLOCK_BYTES;
      CHECK(after.bytes_sent - before.bytes_sent == want && after.bytes_received - before.bytes_received == want);
    }
    free(x);
  }
  float odd[33] = {0};
  CHECK_STATUS(feri_comm_allreduce_sum_q8(c, odd, 33), FER_STATUS_INVALID_ARG);

  /* broadcast from every root, all-gather, a send around the ring */
  for (int root = 0; root < p; root++) {
    char buf[100];
    memset(buf, r == root ? 'a' + root : '?', sizeof buf);
    CHECK_STATUS(feri_comm_broadcast(c, buf, sizeof buf, root), FER_STATUS_OK);
    CHECK(buf[0] == 'a' + root && buf[99] == 'a' + root);
  }
  int mine = 100 + r, all[16] = {0};
  CHECK_STATUS(feri_comm_allgather(c, &mine, sizeof mine, all), FER_STATUS_OK);
  for (int k = 0; k < p; k++) CHECK(all[k] == 100 + k);
  for (int root = 0; root < p; root++) { /* gather: only the root's buffer changes */
    int got[16];
    for (int k = 0; k < 16; k++) got[k] = -1;
    CHECK_STATUS(feri_comm_gather(c, &mine, sizeof mine, got, root), FER_STATUS_OK);
    for (int k = 0; k < p; k++) CHECK(got[k] == (r == root ? 100 + k : -1));
  }
  double token = r == 0 ? 1.5 : 0;
  if (r == 0) {
    CHECK_STATUS(feri_comm_send(c, &token, sizeof token, 1 % p), FER_STATUS_OK);
    CHECK_STATUS(feri_comm_recv(c, &token, sizeof token, p - 1), FER_STATUS_OK);
    CHECK(token == 1.5 * (double)(1 << (p - 1)));
  } else {
    CHECK_STATUS(feri_comm_recv(c, &token, sizeof token, r - 1), FER_STATUS_OK);
    token *= 2;
    CHECK_STATUS(feri_comm_send(c, &token, sizeof token, (r + 1) % p), FER_STATUS_OK);
  }
  CHECK_STATUS(feri_comm_send(c, &token, 8, p), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(feri_comm_broadcast(c, &token, 8, -1), FER_STATUS_INVALID_ARG);
  /* receives left running: rank 0 starts two, rank 1 sends two; each takes the message of its
   * turn whichever is finished first; a third is cancelled, its buffer free again */
  if (p > 1 && r < 2) {
    int32_t first = 0, second = 0;
    if (r == 0) {
      feri_comm_pending a, b, never;
      CHECK_STATUS(feri_comm_recv_start(c, &first, sizeof first, 1, &a), FER_STATUS_OK);
      CHECK_STATUS(feri_comm_recv_start(c, &second, sizeof second, 1, &b), FER_STATUS_OK);
      CHECK_STATUS(feri_comm_recv_finish(c, &b), FER_STATUS_OK);
      CHECK_STATUS(feri_comm_recv_finish(c, &a), FER_STATUS_OK);
      CHECK(first == 11 && second == 22);
      CHECK_STATUS(feri_comm_recv_finish(c, &a), FER_STATUS_MISUSE); /* finished already */
      int32_t unused = 0;
      CHECK_STATUS(feri_comm_recv_start(c, &unused, sizeof unused, 1, &never), FER_STATUS_OK);
      feri_comm_recv_cancel(c, &never);
      CHECK(!never.live && unused == 0);
      CHECK_STATUS(feri_comm_recv_start(c, &unused, sizeof unused, 0, &never), FER_STATUS_INVALID_ARG);
    } else {
      first = 11, second = 22;
      CHECK_STATUS(feri_comm_send(c, &first, sizeof first, 0), FER_STATUS_OK);
      CHECK_STATUS(feri_comm_send(c, &second, sizeof second, 0), FER_STATUS_OK);
    }
  }
  /* a split: the ranks of each parity, ranked backwards; each part all-reduces alone, and the
   * whole still works after */
  feri_comm *part = NULL;
  CHECK_STATUS(feri_comm_split(c, r % 2, -r, &part), FER_STATUS_OK);
  if (part) {
    const int q = (p - r % 2 + 1) / 2; /* ranks of this parity */
    CHECK(feri_comm_size(part) == q && feri_comm_rank(part) == q - 1 - r / 2);
    float one = (float)(r + 1), want = 0;
    for (int k = r % 2; k < p; k += 2) want += (float)(k + 1);
    CHECK_STATUS(feri_comm_allreduce_sum_f32(part, &one, 1), FER_STATUS_OK);
    CHECK(one == want);
    feri_comm_free(part);
  }
  CHECK_STATUS(feri_comm_split(c, -1, 0, &part), FER_STATUS_INVALID_ARG);
  float all_one = 1;
  CHECK_STATUS(feri_comm_allreduce_sum_f32(c, &all_one, 1), FER_STATUS_OK);
  CHECK(all_one == (float)p);
  /* a peer that never answers: the wait ends at the timeout, and the communicator stays failed
   * (rank 0 never sends this; the others wait for nothing) */
  if (p > 1 && r == p - 1) {
    float y_one[1] = {1};
    feri_comm_set_timeout(c, 0.3);
    double t0 = now_s();
    CHECK_STATUS(feri_comm_recv(c, &token, sizeof token, 0), FER_STATUS_DEVICE_ERROR);
    const double waited = now_s() - t0;
    CHECK(waited >= 0.3 && waited < 5);
    char msg[256];
    size_t len;
    fer_last_error_message(msg, sizeof msg, &len);
    CHECK(strstr(msg, "did not answer within 0.3 s") != NULL);
    t0 = now_s();
    CHECK_STATUS(feri_comm_allreduce_sum_f32(c, y_one, 1), FER_STATUS_DEVICE_ERROR); /* at once */
    CHECK(now_s() - t0 < 0.1);
  }
  printf("comm_test: rank %d of %d\n", r, p);
  feri_comm_free(c);
}

/* --mpi-traffic N REPS: REPS all-reduces of N floats; prints what the layer sent and received, for
 * a comparison with the network's own counters (comm_netns_test.sh). */
static void traffic(size_t n, int reps) {
  feri_comm *c = NULL;
  CHECK_STATUS(feri_comm_mpi(&c), FER_STATUS_OK);
  if (c == NULL) return;
  float *x = malloc(n * sizeof *x);
  for (size_t i = 0; i < n; i++) x[i] = value(feri_comm_rank(c), i);
  for (int k = 0; k < reps; k++) CHECK_STATUS(feri_comm_allreduce_sum_f32(c, x, n), FER_STATUS_OK);
  feri_comm_stats st;
  feri_comm_get_stats(c, &st);
  printf("comm_traffic: rank %d sent %llu received %llu\n", feri_comm_rank(c), (unsigned long long)st.bytes_sent,
         (unsigned long long)st.bytes_received);
  free(x);
  feri_comm_free(c);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--mpi") == 0) test_ranks();
  else if (argc > 3 && strcmp(argv[1], "--mpi-traffic") == 0) traffic(strtoull(argv[2], NULL, 10), atoi(argv[3]));
  else test_alone();
  return feri_test_finish("comm_test");
}
