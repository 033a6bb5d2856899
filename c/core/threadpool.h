/* threadpool.h: running a fixed list of tasks on a fer_threadpool (or on the caller). */
#ifndef FERI_CORE_THREADPOOL_H
#define FERI_CORE_THREADPOOL_H

#include <stdint.h>

#include "ferrite.h"

/* One task of a kernel. Tasks of one run must be independent: any thread may run any task, in any
 * order, so a task's result may depend only on its index. */
typedef void (*feri_task_fn)(void *ctx, int64_t task);

/* Runs tasks 0 .. n_tasks-1 and returns when all have finished. pool may be NULL (run on the
 * caller). Returns FER_STATUS_BUSY, running nothing, when another thread is inside the pool. */
fer_status feri_threadpool_run(fer_threadpool *pool, int64_t n_tasks, feri_task_fn fn, void *ctx);

/* A task that also learns which worker runs it: 0 is the calling thread, 1 .. slots-1 the pool's
 * threads. No two tasks run on one worker at the same time, so a kernel may give each worker its
 * own scratch buffer; results must still depend on the task index only. */
typedef void (*feri_worker_task_fn)(void *ctx, int64_t task, uint32_t worker);

/* As feri_threadpool_run, for tasks that use per-worker scratch. */
fer_status feri_threadpool_run_workers(fer_threadpool *pool, int64_t n_tasks,
                                       feri_worker_task_fn fn, void *ctx);

/* Number of distinct worker indices a run on this pool can use (1 for a NULL pool). */
uint32_t feri_threadpool_slots(const fer_threadpool *pool);

/* The level a kernel called with this pool runs at (FER_ISA_AUTO resolved when pool is NULL). */
fer_isa feri_threadpool_effective_isa(const fer_threadpool *pool);

#endif
