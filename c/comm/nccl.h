/* nccl.h: the GPU transport of tensor parallelism: NCCL's all-reduce on device buffers, its
 * communicator made from a unique id that rank 0 draws and sends to the others over a feri_comm
 * (MPI), as TensorRT-LLM and vLLM bootstrap it. NCCL comes with the CUDA toolkit and is loaded
 * when a communicator is made (dlopen of libnccl.so.2): the library links everywhere, and a
 * machine without NCCL or without a GPU gets UNSUPPORTED or NO_DEVICE, never a missing symbol.
 * Each rank uses its current CUDA device (one GPU per rank: CUDA_VISIBLE_DEVICES per rank).
 * Thread-safety: as feri_comm, one thread at a time. */
#ifndef FERI_COMM_NCCL_H
#define FERI_COMM_NCCL_H

#include <stddef.h>

#include "comm/comm.h"
#include "ferrite.h"

typedef struct feri_nccl feri_nccl;

/* Every rank of c together (a collective: each rank calls it): NO_DEVICE without a GPU,
 * UNSUPPORTED without NCCL, DEVICE_ERROR naming NCCL's reason. The decision is agreed: when one
 * rank cannot, every rank fails, naming the first that could not. */
fer_status feri_nccl_create(feri_comm *c, feri_nccl **out);
void feri_nccl_free(feri_nccl *n);

/* dev[0..count) (device memory) summed over the ranks in place, then waited for. */
fer_status feri_nccl_allreduce_sum_f32(feri_nccl *n, float *dev, size_t count);

#endif
