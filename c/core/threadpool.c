/* threadpool.c: a fixed set of workers that run numbered tasks handed out by an atomic counter. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "core/threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/cpu.h"
#include "core/status.h"

enum { FERI_MAX_THREADS = 1024 };

typedef struct feri_worker_arg {
  fer_threadpool *pool;
  uint32_t index; /* 1 .. n_threads-1; the caller is worker 0 */
} feri_worker_arg;

struct fer_threadpool {
  uint32_t n_threads; /* including the caller */
  fer_isa isa;
  pthread_t *workers; /* n_threads - 1 */
  feri_worker_arg *worker_args; /* one per worker thread */
  uint32_t n_started;
  pthread_mutex_t mu;
  pthread_cond_t wake;
  pthread_cond_t done;
  _Atomic uint64_t generation; /* bumped (under mu) for each run; workers wait for a new one */
  _Atomic int shutdown;
  _Atomic uint32_t busy_workers; /* workers still inside the current run */
  int spin;                      /* spin before sleeping: only when threads <= online CPUs */
  feri_worker_task_fn fn;
  void *ctx;
  int64_t n_tasks;
  _Atomic int64_t next_task;
  _Atomic int in_use; /* the BUSY guard: one caller at a time */
};

static void feri_drain(fer_threadpool *p, feri_worker_task_fn fn, void *ctx, int64_t n,
                       uint32_t worker) {
  for (;;) {
    int64_t t = atomic_fetch_add_explicit(&p->next_task, 1, memory_order_relaxed);
    if (t >= n) return;
    fn(ctx, t, worker);
  }
}

/* How long a worker (or the caller, waiting for the last worker) polls before it sleeps on a
 * condition variable. Waking a sleeping thread costs tens of microseconds on a VM (measured: a
 * 4-task GEMV of 3 us took 35 us), while a decode step issues its kernels back to back. */
enum { FERI_SPIN_NS = 100000 };

static uint64_t feri_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void feri_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* Polls `*word` until it differs from `old` (or shutdown), for at most FERI_SPIN_NS. */
static int feri_spin_until_changed(fer_threadpool *p, _Atomic uint64_t *word, uint64_t old) {
  if (!p->spin) return 0;
  const uint64_t start = feri_now_ns();
  for (unsigned i = 1;; i++) {
    if (atomic_load_explicit(word, memory_order_acquire) != old ||
        atomic_load_explicit(&p->shutdown, memory_order_relaxed))
      return 1;
    feri_cpu_relax();
    if ((i & 63u) == 0 && feri_now_ns() - start > FERI_SPIN_NS) return 0;
  }
}

static void *feri_worker(void *arg) {
  const feri_worker_arg *wa = arg;
  fer_threadpool *p = wa->pool;
  const uint32_t index = wa->index;
  uint64_t seen = 0;
  for (;;) {
    if (!feri_spin_until_changed(p, &p->generation, seen)) {
      pthread_mutex_lock(&p->mu);
      while (atomic_load(&p->generation) == seen && !atomic_load(&p->shutdown))
        pthread_cond_wait(&p->wake, &p->mu);
      pthread_mutex_unlock(&p->mu);
    }
    if (atomic_load(&p->shutdown)) break;
    /* the run's fields were written before the generation was bumped (release, under mu) */
    seen = atomic_load_explicit(&p->generation, memory_order_acquire);
    pthread_mutex_lock(&p->mu);
    feri_worker_task_fn fn = p->fn;
    void *ctx = p->ctx;
    int64_t n = p->n_tasks;
    pthread_mutex_unlock(&p->mu);
    feri_drain(p, fn, ctx, n, index);
    if (atomic_fetch_sub(&p->busy_workers, 1) == 1) {
      pthread_mutex_lock(&p->mu); /* the caller checks busy_workers under mu before it sleeps */
      pthread_cond_signal(&p->done);
      pthread_mutex_unlock(&p->mu);
    }
  }
  return NULL;
}

typedef struct feri_plain_task {
  feri_task_fn fn;
  void *ctx;
} feri_plain_task;

static void feri_run_plain(void *ctx, int64_t task, uint32_t worker) {
  const feri_plain_task *pt = ctx;
  (void)worker;
  pt->fn(pt->ctx, task);
}

fer_status feri_threadpool_run(fer_threadpool *pool, int64_t n_tasks, feri_task_fn fn, void *ctx) {
  feri_plain_task pt = {fn, ctx};
  return feri_threadpool_run_workers(pool, n_tasks, feri_run_plain, &pt);
}

uint32_t feri_threadpool_slots(const fer_threadpool *pool) {
  return pool == NULL ? 1u : pool->n_threads;
}

fer_status feri_threadpool_run_workers(fer_threadpool *pool, int64_t n_tasks,
                                       feri_worker_task_fn fn, void *ctx) {
  if (pool == NULL) {
    for (int64_t t = 0; t < n_tasks; t++) fn(ctx, t, 0);
    return FER_STATUS_OK;
  }
  if (atomic_exchange_explicit(&pool->in_use, 1, memory_order_acquire))
    return feri_fail(FER_STATUS_BUSY, "fer_threadpool: another thread is running on this pool");
  if (pool->n_threads == 1 || n_tasks <= 1) {
    for (int64_t t = 0; t < n_tasks; t++) fn(ctx, t, 0);
  } else {
    pthread_mutex_lock(&pool->mu);
    pool->fn = fn;
    pool->ctx = ctx;
    pool->n_tasks = n_tasks;
    atomic_store_explicit(&pool->next_task, 0, memory_order_relaxed);
    atomic_store(&pool->busy_workers, pool->n_started);
    atomic_fetch_add_explicit(&pool->generation, 1, memory_order_release);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->mu);
    feri_drain(pool, fn, ctx, n_tasks, 0);
    /* poll for the last workers first: they usually finish within microseconds */
    if (pool->spin) {
      const uint64_t start = feri_now_ns();
      for (unsigned i = 1; atomic_load(&pool->busy_workers) != 0; i++) {
        feri_cpu_relax();
        if ((i & 63u) == 0 && feri_now_ns() - start > FERI_SPIN_NS) break;
      }
    }
    pthread_mutex_lock(&pool->mu);
    while (atomic_load(&pool->busy_workers) != 0) pthread_cond_wait(&pool->done, &pool->mu);
    pthread_mutex_unlock(&pool->mu);
  }
  atomic_store_explicit(&pool->in_use, 0, memory_order_release);
  return FER_STATUS_OK;
}

fer_isa feri_threadpool_effective_isa(const fer_threadpool *pool) {
  if (pool != NULL) return pool->isa;
  fer_isa isa = FER_ISA_PORTABLE;
  (void)feri_isa_resolve(FER_ISA_AUTO, &isa); /* AUTO cannot fail */
  return isa;
}

fer_status fer_threadpool_options_init(fer_threadpool_options *opts) {
  feri_error_clear();
  if (opts == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_threadpool_options_init: opts is NULL");
  memset(opts, 0, sizeof *opts);
  opts->struct_size = sizeof *opts;
  opts->n_threads = 0;
  opts->isa = FER_ISA_AUTO;
  return FER_STATUS_OK;
}

static void feri_pool_stop(fer_threadpool *p) {
  pthread_mutex_lock(&p->mu);
  atomic_store(&p->shutdown, 1);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  for (uint32_t i = 0; i < p->n_started; i++) pthread_join(p->workers[i], NULL);
  pthread_cond_destroy(&p->done);
  pthread_cond_destroy(&p->wake);
  pthread_mutex_destroy(&p->mu);
  free(p->worker_args);
  free(p->workers);
  free(p);
}

fer_status fer_threadpool_create(const fer_threadpool_options *opts, fer_threadpool **out_pool) {
  feri_error_clear();
  if (out_pool == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_threadpool_create: out_pool is NULL");
  *out_pool = NULL;
  fer_threadpool_options o;
  fer_threadpool_options_init(&o);
  if (opts != NULL) {
    if (opts->struct_size < sizeof o)
      return feri_fail(FER_STATUS_INVALID_ARG,
                       "fer_threadpool_create: opts->struct_size %u < %zu (call "
                       "fer_threadpool_options_init)",
                       opts->struct_size, sizeof o);
    o = *opts;
  }
  uint32_t n = o.n_threads;
  if (n == 0) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    n = cpus > 0 ? (uint32_t)(cpus < FERI_MAX_THREADS ? cpus : FERI_MAX_THREADS) : 1;
  }
  if (n > FERI_MAX_THREADS)
    return feri_fail(FER_STATUS_INVALID_ARG, "fer_threadpool_create: n_threads %u > %d", n,
                     FERI_MAX_THREADS);
  fer_isa isa;
  fer_status st = feri_isa_resolve(o.isa, &isa);
  if (st != FER_STATUS_OK) return st;

  fer_threadpool *p = calloc(1, sizeof *p);
  if (p == NULL) goto fail_alloc;
  p->workers = calloc(n, sizeof *p->workers);
  if (p->workers == NULL) goto fail_workers;
  p->worker_args = calloc(n, sizeof *p->worker_args);
  if (p->worker_args == NULL) goto fail_worker_args;
  p->n_threads = n;
  p->isa = isa;
  {
    /* spinning threads would steal the cores of an oversubscribed pool's working threads */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    p->spin = cpus > 0 && (long)n <= cpus;
  }
  if (pthread_mutex_init(&p->mu, NULL) != 0) goto fail_mutex;
  if (pthread_cond_init(&p->wake, NULL) != 0) goto fail_wake;
  if (pthread_cond_init(&p->done, NULL) != 0) goto fail_done;
  for (uint32_t i = 0; i + 1 < n; i++) {
    p->worker_args[i].pool = p;
    p->worker_args[i].index = i + 1;
    if (pthread_create(&p->workers[i], NULL, feri_worker, &p->worker_args[i]) != 0) {
      feri_pool_stop(p); /* joins the workers started so far and frees everything */
      return feri_fail(FER_STATUS_OUT_OF_MEMORY, "fer_threadpool_create: could not start thread %u of %u",
                       i + 2, n);
    }
    p->n_started++;
  }
  *out_pool = p;
  return FER_STATUS_OK;

fail_done:
  pthread_cond_destroy(&p->wake);
fail_wake:
  pthread_mutex_destroy(&p->mu);
fail_mutex:
  free(p->worker_args);
fail_worker_args:
  free(p->workers);
fail_workers:
  free(p);
fail_alloc:
  return feri_fail(FER_STATUS_OUT_OF_MEMORY, "fer_threadpool_create: out of memory");
}

void fer_threadpool_free(fer_threadpool *pool) {
  if (pool != NULL) feri_pool_stop(pool);
}

fer_status fer_threadpool_n_threads(const fer_threadpool *pool, uint32_t *out_n_threads) {
  feri_error_clear();
  if (out_n_threads == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_threadpool_n_threads: out is NULL");
  *out_n_threads = 0;
  if (pool == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_threadpool_n_threads: pool is NULL");
  *out_n_threads = pool->n_threads;
  return FER_STATUS_OK;
}

fer_status fer_threadpool_isa(const fer_threadpool *pool, fer_isa *out_isa) {
  feri_error_clear();
  if (out_isa == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_threadpool_isa: out is NULL");
  *out_isa = FER_ISA_AUTO;
  if (pool == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_threadpool_isa: pool is NULL");
  *out_isa = pool->isa;
  return FER_STATUS_OK;
}
