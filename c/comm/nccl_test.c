/* nccl_test.c: NCCL's all-reduce (nccl.h). Alone: a one-rank communicator (the GPU smoke test the
 * lent card runs); with --mpi under mpirun: the ranks' sum, each rank on its own GPU. Without a
 * GPU the creation answers NO_DEVICE on every rank, which prints SKIPPED (and checks that
 * answer: a build without GPUs must still refuse cleanly).
 * EVIDENCE: C-COMM-003 */
#include <stdlib.h>
#include <string.h>

#include "comm/nccl.h"
#include "cuda/cuda_ops.h"
#include "testing/check.h"

int main(int argc, char **argv) {
  feri_comm *c = NULL;
  const int mpi = argc > 1 && strcmp(argv[1], "--mpi") == 0;
  CHECK_STATUS(mpi ? feri_comm_mpi(&c) : feri_comm_self(&c), FER_STATUS_OK);
  if (!c) return feri_test_finish("nccl_test");
  feri_nccl *n = NULL;
  const fer_status st = feri_nccl_create(c, &n);
  int32_t devices = 0;
  if (fer_cuda_device_count(&devices) != FER_STATUS_OK || devices == 0) {
    CHECK(st == FER_STATUS_NO_DEVICE && n == NULL);
    printf("SKIPPED: nccl_test (no GPU; creation answered NO_DEVICE as it must)\n");
  } else if (st == FER_STATUS_UNSUPPORTED) {
    printf("SKIPPED: nccl_test (a GPU but no NCCL library)\n");
  } else {
    CHECK_STATUS(st, FER_STATUS_OK);
    enum { N = 1 << 20 };
    const int r = feri_comm_rank(c), p = feri_comm_size(c);
    float *h = malloc(N * sizeof *h);
    for (int i = 0; i < N; i++) h[i] = (float)(r + 1) * (float)(i % 97);
    float *d = NULL;
    CHECK_STATUS(feri_cuda_malloc(N * sizeof *h, (void **)&d), FER_STATUS_OK);
    CHECK_STATUS(feri_cuda_upload(d, h, N * sizeof *h), FER_STATUS_OK);
    CHECK_STATUS(feri_nccl_allreduce_sum_f32(n, d, N), FER_STATUS_OK);
    CHECK_STATUS(feri_cuda_download(h, d, N * sizeof *h), FER_STATUS_OK);
    size_t wrong = 0; /* small integers: every order of the sum is exact */
    for (int i = 0; i < N; i++) wrong += h[i] != (float)(p * (p + 1) / 2) * (float)(i % 97);
    CHECK(wrong == 0);
    printf("nccl_test: rank %d of %d: all-reduce of %d floats on the GPU, %zu wrong\n", r, p, N, wrong);
    feri_cuda_free(d);
    free(h);
  }
  feri_nccl_free(n);
  feri_comm_free(c);
  return feri_test_finish("nccl_test");
}
