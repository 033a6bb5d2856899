/* matmul.c: fer_matmul and fer_matmul_workspace_bytes (contract in ffi/ferrite.h).
 *
 * Two routes, chosen by shape only. M = 1 is a GEMV that streams B once (decode). M >= 2 is a
 * packed GEMM: A is read in place when it is f32 with unit stride along K, else widened once into
 * an f32 copy (activations: small next to B); each task owns a block of C, walks K in KC steps,
 * packs its B panel into its worker's scratch as f32 (f16/bf16 widened there, panel by panel,
 * never the whole of B), and runs the MR x NR micro-kernel into an f32 tile that is rounded into
 * `out` once at the end. Tasks are blocks of C, so the split depends on the shape alone. */
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"
#include "core/threadpool.h"
#include "kernels/kernel_util.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"

static const char *const FN = "fer_matmul";

enum { WS_ALIGN = 64, GEMM_MIN_TASKS = 8, GEMM_MIN_NC = 64 };

/* Everything a call needs, worked out once from the arguments; the workspace query and the
 * kernel read the same plan, so the bytes reported are the bytes used. */
typedef struct mm_plan {
  int64_t M, N, K;
  const char *a;
  fer_dtype a_dtype;
  int64_t a_sm, a_sk, a_es;
  feri_mm_b b;
  char *out;
  fer_dtype out_dtype;
  int64_t o_sm, o_sn;
  enum { ROUTE_EMPTY, ROUTE_ZERO, ROUTE_GEMV, ROUTE_GEMM } route;
  const feri_matmul_ops *ops; /* the pool's ISA level: its tile and blocks shape the plan */
  /* GEMV */
  int gemv_nk;         /* B has unit stride along K */
  int64_t gemv_chunk;  /* outputs per task */
  size_t x_bytes;      /* widened copy of A's one row; 0 when A is already contiguous f32 */
  /* GEMM: per-worker scratch, each part a multiple of WS_ALIGN bytes */
  int64_t nct;          /* columns per task: NC, narrowed so that small shapes still make tasks */
  int64_t mc, kc, ncp;  /* largest block sizes this shape uses; ncp rounded up to NR */
  int a_in_place;       /* A is f32 with unit stride along K: the micro-kernel reads it directly */
  size_t a_copy_bytes;  /* otherwise A is widened once into a contiguous f32 [M, K] copy */
  size_t bpack_bytes, tile_bytes, worker_bytes;
  uint32_t workers;
  int64_t m_blocks, n_blocks;
  size_t total_bytes;
} mm_plan;

static size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

static fer_status require_rank2(const fer_tensor *t, const char *name) {
  if (t->rank != 2)
    return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: %s has rank %d, expected 2", FN, name,
                     (int)t->rank);
  return FER_STATUS_OK;
}

/* The fields of the plan that come from a and out (both validated, rank 2). */
static void plan_a_out(mm_plan *p, const fer_tensor *a, const feri_tensor_info *ai,
                       const fer_tensor *out) {
  p->a = a->data;
  p->a_dtype = a->dtype;
  p->a_es = (int64_t)ai->elem_size;
  p->a_sm = a->strides[0];
  p->a_sk = a->strides[1];
  p->out = out->data;
  p->out_dtype = out->dtype;
  p->o_sm = out->strides[0];
  p->o_sn = out->strides[1];
}

/* Columns per task of a GEMV over B [K, N]: one band per thread, in multiples of 64 columns,
 * within [KN_COLS, KN_COLS_MAX]. Wide bands make each row of B one long contiguous read; 512
 * columns per task (1-2 KiB runs a whole row apart) left the prefetchers idle. The band width
 * changes which thread computes a column, never its value. */
static int64_t gemv_kn_cols(int64_t N, uint32_t slots) {
  const int64_t per = (N + (int64_t)slots - 1) / (int64_t)slots;
  const int64_t cols = (per + 63) / 64 * 64;
  return cols < FERI_GEMV_KN_COLS ? FERI_GEMV_KN_COLS : cols > FERI_GEMV_KN_COLS_MAX ? FERI_GEMV_KN_COLS_MAX : cols;
}

static void plan_route(const fer_threadpool *pool, mm_plan *p) {
  const feri_matmul_ops *ops = feri_matmul_ops_for(feri_threadpool_effective_isa(pool));
  p->ops = ops;
  if (p->M == 0 || p->N == 0) {
    p->route = ROUTE_EMPTY;
  } else if (p->K == 0) {
    p->route = ROUTE_ZERO;
  } else if (p->M == 1) {
    p->route = ROUTE_GEMV;
    p->gemv_nk = p->b.qbytes != 0 || (p->b.sn != p->b.es && p->b.sk == p->b.es);
    p->gemv_chunk = p->gemv_nk ? FERI_GEMV_NK_ROWS : gemv_kn_cols(p->N, feri_threadpool_slots(pool));
    const int x_ready = p->a_dtype == FER_DTYPE_F32 && (p->a_sk == 4 || p->K == 1);
    p->x_bytes = x_ready ? 0 : round_up((size_t)p->K * sizeof(float), WS_ALIGN);
    p->total_bytes = p->x_bytes;
  } else {
    p->route = ROUTE_GEMM;
    p->kc = min64(p->K, ops->kc);
    /* at least GEMM_MIN_TASKS tasks where the shape allows (a pool's late-waking workers then
     * still find work): column blocks never narrower than GEMM_MIN_NC, and where those are too
     * few, more row blocks than MC asks for, each at least two register tiles high. Row blocks
     * are of near-equal height (as the panels below). A function of the shape and the level's
     * blocks alone; each block packs its own B panel, so a level with a cheap micro-kernel
     * wants a tall MC (B packed fewer times). */
    int64_t m_blocks = (p->M + ops->mc - 1) / ops->mc;
    const int64_t n_most = (p->N + GEMM_MIN_NC - 1) / GEMM_MIN_NC;
    if (m_blocks * n_most < GEMM_MIN_TASKS) {
      const int64_t want = (GEMM_MIN_TASKS + n_most - 1) / n_most, most = (p->M + 2 * ops->mr - 1) / (2 * ops->mr);
      const int64_t more = want < most ? want : most;
      if (more > m_blocks) m_blocks = more;
    }
    p->mc = (p->M + m_blocks - 1) / m_blocks;
    const int64_t want_n_blocks = (GEMM_MIN_TASKS + m_blocks - 1) / m_blocks;
    p->nct = (int64_t)round_up((size_t)((p->N + want_n_blocks - 1) / want_n_blocks), (size_t)ops->nr);
    p->nct = p->nct < GEMM_MIN_NC ? GEMM_MIN_NC : p->nct > ops->nc ? ops->nc : p->nct;
    p->ncp = (int64_t)round_up((size_t)min64(p->N, p->nct), (size_t)ops->nr);
    p->a_in_place = p->a_dtype == FER_DTYPE_F32 && p->a_sk == 4 && p->a_sm % 4 == 0;
    p->a_copy_bytes = p->a_in_place ? 0 : round_up((size_t)p->M * (size_t)p->K * 4, WS_ALIGN);
    p->bpack_bytes = round_up((size_t)p->kc * (size_t)p->ncp * 4, WS_ALIGN);
    p->tile_bytes = round_up((size_t)p->mc * (size_t)p->ncp * 4, WS_ALIGN);
    p->worker_bytes = p->bpack_bytes + p->tile_bytes;
    p->m_blocks = m_blocks;
    p->n_blocks = (p->N + p->nct - 1) / p->nct;
    const int64_t tasks = p->m_blocks * p->n_blocks;
    const uint32_t slots = feri_threadpool_slots(pool);
    /* a pool's worker indices run to slots - 1 even with fewer tasks, and any worker may take
     * any task, so each slot has its own scratch unless everything runs on the caller */
    p->workers = tasks == 1 ? 1u : slots;
    p->total_bytes = p->a_copy_bytes + p->worker_bytes * p->workers;
  }
}

static fer_status plan_matmul(const fer_threadpool *pool, const fer_tensor *a, const fer_tensor *b,
                              fer_matmul_b_layout b_layout, const fer_tensor *out, mm_plan *p) {
  memset(p, 0, sizeof *p);
  feri_tensor_info ai, bi, oi;
  fer_status st;
  if ((st = feri_tensor_validate(a, FN, "a", &ai)) != FER_STATUS_OK) return st;
  if ((st = feri_tensor_validate(b, FN, "b", &bi)) != FER_STATUS_OK) return st;
  if ((st = feri_tensor_validate(out, FN, "out", &oi)) != FER_STATUS_OK) return st;
  if ((st = feri_require_float_dtype(a->dtype, FN)) != FER_STATUS_OK) return st;
  if ((st = feri_require_float_dtype(b->dtype, FN)) != FER_STATUS_OK) return st;
  if ((st = feri_require_float_dtype(out->dtype, FN)) != FER_STATUS_OK) return st;
  if (b_layout != FER_MATMUL_B_KN && b_layout != FER_MATMUL_B_NK)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: b_layout %d is neither FER_MATMUL_B_KN (0) nor "
                     "FER_MATMUL_B_NK (1)", FN, (int)b_layout);
  if ((st = require_rank2(a, "a")) != FER_STATUS_OK) return st;
  if ((st = require_rank2(b, "b")) != FER_STATUS_OK) return st;
  if ((st = require_rank2(out, "out")) != FER_STATUS_OK) return st;
  const int nk = b_layout == FER_MATMUL_B_NK;
  p->M = a->shape[0];
  p->K = a->shape[1];
  const int64_t bk = b->shape[nk ? 1 : 0];
  p->N = b->shape[nk ? 0 : 1];
  if (bk != p->K)
    return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: a is [%lld, %lld] but b has K = %lld (%s)", FN,
                     (long long)p->M, (long long)p->K, (long long)bk, nk ? "[N, K]" : "[K, N]");
  if (out->shape[0] != p->M || out->shape[1] != p->N)
    return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: out is [%lld, %lld], expected [%lld, %lld]",
                     FN, (long long)out->shape[0], (long long)out->shape[1], (long long)p->M,
                     (long long)p->N);
  if ((st = feri_tensor_check_writable(out, &oi, FN, "out")) != FER_STATUS_OK) return st;
  if (feri_tensors_overlap(out, &oi, a, &ai))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: out overlaps a", FN);
  if (feri_tensors_overlap(out, &oi, b, &bi))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: out overlaps b", FN);

  plan_a_out(p, a, &ai, out);
  p->b.data = b->data;
  p->b.dtype = b->dtype;
  p->b.es = (int64_t)bi.elem_size;
  p->b.sk = b->strides[nk ? 1 : 0];
  p->b.sn = b->strides[nk ? 0 : 1];

  plan_route(pool, p);
  return FER_STATUS_OK;
}

typedef struct mm_job {
  const mm_plan *p;
  const feri_matmul_ops *ops;
  const float *x;    /* GEMV: A's row as contiguous f32 */
  const float *a32;  /* GEMM: A as f32 with unit stride along K */
  int64_t lda;       /* its row stride in floats */
  char *ws;          /* per-worker scratch */
} mm_job;

/* Row panels of an mc-row block: ceil(mc / MR) panels of near-equal height (32 rows give
 * 6,6,5,5,5,5, not 6,6,6,6,6,2), so no panel runs the latency-bound short micro-kernel. */
static int64_t panel_count(int64_t mc, int64_t mr) { return (mc + mr - 1) / mr; }
static int64_t panel_start(int64_t mc, int64_t mr, int64_t panel) { return panel * mc / panel_count(mc, mr); }

static void gemm_task(void *ctx, int64_t task, uint32_t worker) {
  const mm_job *j = ctx;
  const mm_plan *p = j->p;
  char *ws = j->ws + (p->workers == 1 ? 0 : (size_t)worker * p->worker_bytes);
  float *bpack = (float *)ws;
  float *tile = (float *)(ws + p->bpack_bytes);
  const feri_matmul_ops *ops = j->ops;
  const int64_t MR = ops->mr, NR = ops->nr, KC = ops->kc, mb = task / p->n_blocks;
  const int64_t m0 = mb * p->M / p->m_blocks, n0 = task % p->n_blocks * p->nct;
  const int64_t mc = (mb + 1) * p->M / p->m_blocks - m0, nc = min64(p->nct, p->N - n0);
  const int64_t ldc = p->ncp;
  /* An f32 out with unit column stride holds the chains of every full panel itself: the last K
   * block leaves the result there, and no copy of the tile into out follows (4% of the time at
   * 512x576x1536 on the AVX-512 level). The partial last panel (the micro-kernel writes NR
   * columns) stays in the tile. */
  const int direct = p->out_dtype == FER_DTYPE_F32 && p->o_sn == 4;
  const int64_t full_cols = direct ? nc / NR * NR : 0, ldo = p->o_sm / 4;
  float *const out0 = (float *)(p->out + m0 * p->o_sm) + n0;
  for (int64_t k0 = 0; k0 < p->K; k0 += KC) {
    const int64_t kc = min64(KC, p->K - k0);
    /* always packed, even an f32 [K, N] B: read in place, its rows (often 4 KiB apart) alias in
     * one L1 set and the micro-kernel ran 20% slower (measured) */
    ops->pack_b(&p->b, k0, kc, n0, nc, bpack);
    const float *a_block = j->a32 + m0 * j->lda + k0;
    const int64_t lda = j->lda;
    /* one B micro-panel (kc x NR) stays in L1 while every A micro-panel passes over it */
    const int64_t np = panel_count(mc, MR);
    for (int64_t jr = 0; jr < nc; jr += NR)
      for (int64_t q = 0; q < np; q++) {
        const int64_t ir = panel_start(mc, MR, q);
        const int mr = (int)(panel_start(mc, MR, q + 1) - ir);
        if (jr < full_cols)
          ops->micro(kc, a_block + ir * lda, lda, bpack + jr * kc, out0 + ir * ldo + jr, ldo, mr, k0 == 0);
        else
          ops->micro(kc, a_block + ir * lda, lda, bpack + jr * kc, tile + ir * ldc + jr, ldc, mr, k0 == 0);
      }
  }
  if (full_cols == nc) return;
  for (int64_t r = 0; r < mc; r++) {
    char *orow = p->out + (m0 + r) * p->o_sm + n0 * p->o_sn;
    const float *trow = tile + r * ldc;
    if (direct) {
      memcpy(orow + full_cols * 4, trow + full_cols, (size_t)(nc - full_cols) * sizeof(float));
    } else {
      for (int64_t c = 0; c < nc; c++) feri_elem_store(orow + c * p->o_sn, p->out_dtype, trow[c]);
    }
  }
}

static void gemv_task(void *ctx, int64_t task, uint32_t worker) {
  const mm_job *j = ctx;
  const mm_plan *p = j->p;
  (void)worker;
  const int64_t n0 = task * p->gemv_chunk, nc = min64(p->gemv_chunk, p->N - n0);
  float y[FERI_GEMV_KN_COLS_MAX > FERI_GEMV_NK_ROWS ? FERI_GEMV_KN_COLS_MAX : FERI_GEMV_NK_ROWS];
  const int unit_kn = p->b.qbytes == 0 && p->b.sn == p->b.es;
  if (unit_kn) {
    j->ops->gemv_kn(j->x, p->K, &p->b, n0, nc, y);
  } else if (p->gemv_nk) {
    j->ops->gemv_nk(j->x, p->K, &p->b, n0, nc, y);
  } else {
    feri_gemv_strided(j->x, p->K, &p->b, n0, nc, y);
  }
  for (int64_t c = 0; c < nc; c++) feri_elem_store(p->out + (n0 + c) * p->o_sn, p->out_dtype, y[c]);
}

static void widen_a_task(void *ctx, int64_t row) {
  mm_job *j = ctx;
  const mm_plan *p = j->p;
  j->ops->widen(p->a + row * p->a_sm, p->a_sk, p->a_dtype, p->K, (float *)j->a32 + row * p->K);
}

static void zero_task(void *ctx, int64_t task) {
  const mm_plan *p = ctx;
  for (int64_t c = 0; c < p->N; c++) feri_elem_store(p->out + task * p->o_sm + c * p->o_sn, p->out_dtype, 0.0f);
}

static fer_status run_plan(fer_threadpool *pool, const mm_plan *p, void *workspace,
                           size_t workspace_bytes, const char *fn) {
  char *ws;
  void *owned;
  fer_status st = feri_workspace_acquire(workspace, workspace_bytes, p->total_bytes, fn, &ws, &owned);
  if (st != FER_STATUS_OK) return st;
  if (p->route == ROUTE_EMPTY) return FER_STATUS_OK;
  if (p->route == ROUTE_ZERO) return feri_threadpool_run(pool, p->M, zero_task, (void *)p);
  mm_job j = {p, p->ops, NULL, NULL, 0, ws};
  if (p->route == ROUTE_GEMV) {
    if (p->x_bytes == 0) {
      j.x = (const float *)p->a;
    } else {
      j.ops->widen(p->a, p->a_sk, p->a_dtype, p->K, (float *)ws);
      j.x = (const float *)ws;
    }
    st = feri_threadpool_run_workers(pool, (p->N + p->gemv_chunk - 1) / p->gemv_chunk, gemv_task, &j);
  } else {
    if (p->a_in_place) {
      j.a32 = (const float *)p->a;
      j.lda = p->a_sm / 4;
    } else {
      j.a32 = (const float *)ws;
      j.lda = p->K;
      st = feri_threadpool_run(pool, p->M, widen_a_task, &j);
    }
    j.ws = ws + p->a_copy_bytes;
    if (st == FER_STATUS_OK)
      st = feri_threadpool_run_workers(pool, p->m_blocks * p->n_blocks, gemm_task, &j);
  }
  free(owned);
  return st;
}

fer_status fer_matmul_workspace_bytes(const fer_threadpool *pool, const fer_tensor *a,
                                      const fer_tensor *b, fer_matmul_b_layout b_layout,
                                      const fer_tensor *out, size_t *out_bytes) {
  feri_error_clear();
  if (out_bytes == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s_workspace_bytes: out_bytes is NULL", FN);
  *out_bytes = 0;
  if (a == NULL || b == NULL || out == NULL)
    return feri_fail(FER_STATUS_NULL_ARG, "%s_workspace_bytes: a, b and out must not be NULL", FN);
  mm_plan p;
  fer_status st = plan_matmul(pool, a, b, b_layout, out, &p);
  if (st != FER_STATUS_OK) return st;
  *out_bytes = p.total_bytes;
  return FER_STATUS_OK;
}

fer_status fer_matmul(fer_threadpool *pool, const fer_tensor *a, const fer_tensor *b,
                      fer_matmul_b_layout b_layout, const fer_tensor *out, void *workspace,
                      size_t workspace_bytes) {
  feri_error_clear();
  if (a == NULL || b == NULL || out == NULL)
    return feri_fail(FER_STATUS_NULL_ARG, "%s: a, b and out must not be NULL", FN);
  mm_plan p;
  fer_status st = plan_matmul(pool, a, b, b_layout, out, &p);
  if (st != FER_STATUS_OK) return st;
  return run_plan(pool, &p, workspace, workspace_bytes, FN);
}

/* ---- block-quantized weights ------------------------------------------------------------- */

static const char *const QFN = "fer_matmul_quant";

fer_status feri_matmul_quant_check(const fer_tensor *a, const fer_qmatrix *w, const fer_tensor *out,
                                   const char *fn, feri_tensor_info *ai, feri_tensor_info *oi) {
  fer_status st;
  if ((st = feri_tensor_validate(a, fn, "a", ai)) != FER_STATUS_OK) return st;
  if ((st = feri_tensor_validate(out, fn, "out", oi)) != FER_STATUS_OK) return st;
  if ((st = feri_qmatrix_validate(w, fn)) != FER_STATUS_OK) return st;
  if ((st = feri_require_float_dtype(a->dtype, fn)) != FER_STATUS_OK) return st;
  if ((st = feri_require_float_dtype(out->dtype, fn)) != FER_STATUS_OK) return st;
  if (a->rank != 2 || out->rank != 2)
    return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: a and out must have rank 2 (have %d and %d)",
                     fn, (int)a->rank, (int)out->rank);
  const int64_t M = a->shape[0], K = a->shape[1], N = w->rows;
  if (w->cols != K)
    return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: a is [%lld, %lld] but w is [%lld, %lld]", fn,
                     (long long)M, (long long)K, (long long)w->rows, (long long)w->cols);
  if (out->shape[0] != M || out->shape[1] != N)
    return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: out is [%lld, %lld], expected [%lld, %lld]",
                     fn, (long long)out->shape[0], (long long)out->shape[1], (long long)M,
                     (long long)N);
  if ((st = feri_tensor_check_writable(out, oi, fn, "out")) != FER_STATUS_OK) return st;
  if (feri_tensors_overlap(out, oi, a, ai)) return feri_fail(FER_STATUS_INVALID_ARG, "%s: out overlaps a", fn);
  const char *wlo = w->data, *whi = wlo + (w->rows > 0 && w->cols > 0 ? w->bytes : 0);
  const char *olo = (const char *)out->data + oi->lo, *ohi = (const char *)out->data + oi->hi;
  if (oi->numel > 0 && olo < whi && wlo < ohi)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: out overlaps w", fn);
  return FER_STATUS_OK;
}

/* a and out as for fer_matmul, w [N, K] blocks; fills the plan with a quantized B. */
static fer_status plan_matmul_quant(const fer_threadpool *pool, const fer_tensor *a,
                                    const fer_qmatrix *w, const fer_tensor *out, mm_plan *p) {
  memset(p, 0, sizeof *p);
  feri_tensor_info ai, oi;
  fer_status st = feri_matmul_quant_check(a, w, out, QFN, &ai, &oi);
  if (st != FER_STATUS_OK) return st;
  p->M = a->shape[0];
  p->K = a->shape[1];
  p->N = w->rows;
  plan_a_out(p, a, &ai, out);
  p->b.data = w->data;
  p->b.dtype = w->dtype;
  p->b.sn = w->row_stride;
  p->b.qbytes = (int64_t)feri_qblock_bytes(w->dtype);
  plan_route(pool, p);
  return FER_STATUS_OK;
}

fer_status fer_matmul_quant_workspace_bytes(const fer_threadpool *pool, const fer_tensor *a,
                                            const fer_qmatrix *w, const fer_tensor *out,
                                            size_t *out_bytes) {
  feri_error_clear();
  if (out_bytes == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s_workspace_bytes: out_bytes is NULL", QFN);
  *out_bytes = 0;
  if (a == NULL || w == NULL || out == NULL)
    return feri_fail(FER_STATUS_NULL_ARG, "%s_workspace_bytes: a, w and out must not be NULL", QFN);
  mm_plan p;
  fer_status st = plan_matmul_quant(pool, a, w, out, &p);
  if (st == FER_STATUS_OK) *out_bytes = p.total_bytes;
  return st;
}

fer_status fer_matmul_quant(fer_threadpool *pool, const fer_tensor *a, const fer_qmatrix *w,
                            const fer_tensor *out, void *workspace, size_t workspace_bytes) {
  feri_error_clear();
  if (a == NULL || w == NULL || out == NULL)
    return feri_fail(FER_STATUS_NULL_ARG, "%s: a, w and out must not be NULL", QFN);
  mm_plan p;
  fer_status st = plan_matmul_quant(pool, a, w, out, &p);
  if (st != FER_STATUS_OK) return st;
  return run_plan(pool, &p, workspace, workspace_bytes, QFN);
}

fer_status fer_qblock_size(fer_dtype dtype, int64_t *out_block_elems, int64_t *out_block_bytes) {
  feri_error_clear();
  if (out_block_elems != NULL) *out_block_elems = 0;
  if (out_block_bytes != NULL) *out_block_bytes = 0;
  if (out_block_elems == NULL || out_block_bytes == NULL)
    return feri_fail(FER_STATUS_NULL_ARG, "fer_qblock_size: an out-pointer is NULL");
  const size_t bb = feri_qblock_bytes(dtype);
  if (bb == 0)
    return feri_fail(FER_STATUS_INVALID_ARG, "fer_qblock_size: %s is not block-quantized", feri_dtype_name(dtype));
  *out_block_elems = feri_qblock_elems(dtype);
  *out_block_bytes = (int64_t)bb;
  return FER_STATUS_OK;
}

fer_status fer_qmatrix_check(const fer_qmatrix *w) {
  feri_error_clear();
  fer_status st = feri_qmatrix_validate(w, "fer_qmatrix_check");
  if (st != FER_STATUS_OK) return st;
  const size_t bb = feri_qblock_bytes(w->dtype);
  const int64_t nb = w->cols / feri_qblock_elems(w->dtype);
  for (int64_t r = 0; r < w->rows; r++)
    for (int64_t b = 0; b < nb; b++) {
      const uint8_t *blk = (const uint8_t *)w->data + r * w->row_stride + (size_t)b * bb;
      if ((st = feri_qblock_check(w->dtype, blk, r, b, "fer_qmatrix_check")) != FER_STATUS_OK) return st;
    }
  return FER_STATUS_OK;
}

typedef struct deq_job {
  const fer_qmatrix *w;
  const fer_tensor *out;
} deq_job;

static void dequant_task(void *ctx, int64_t row) {
  const deq_job *j = ctx;
  const size_t bb = feri_qblock_bytes(j->w->dtype);
  const int64_t be = feri_qblock_elems(j->w->dtype);
  float vals[FERI_QBLOCK_MAX];
  const uint8_t *src = (const uint8_t *)j->w->data + row * j->w->row_stride;
  char *dst = (char *)j->out->data + row * j->out->strides[0];
  const int direct = j->out->dtype == FER_DTYPE_F32 && j->out->strides[1] == 4;
  for (int64_t b = 0; b < j->w->cols / be; b++) {
    if (direct) { /* contiguous f32 rows: decode straight into them */
      feri_qblock_dequant(j->w->dtype, src + (size_t)b * bb, (float *)dst + b * be);
      continue;
    }
    feri_qblock_dequant(j->w->dtype, src + (size_t)b * bb, vals);
    for (int64_t i = 0; i < be; i++)
      feri_elem_store(dst + (b * be + i) * j->out->strides[1], j->out->dtype, vals[i]);
  }
}

fer_status fer_dequantize(fer_threadpool *pool, const fer_qmatrix *w, const fer_tensor *out) {
  feri_error_clear();
  static const char *const DFN = "fer_dequantize";
  if (w == NULL || out == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: w and out must not be NULL", DFN);
  fer_status st;
  feri_tensor_info oi;
  if ((st = feri_qmatrix_validate(w, DFN)) != FER_STATUS_OK) return st;
  if ((st = feri_tensor_validate(out, DFN, "out", &oi)) != FER_STATUS_OK) return st;
  if ((st = feri_require_float_dtype(out->dtype, DFN)) != FER_STATUS_OK) return st;
  if (out->rank != 2 || out->shape[0] != w->rows || out->shape[1] != w->cols)
    return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: out must be [%lld, %lld]", DFN,
                     (long long)w->rows, (long long)w->cols);
  if ((st = feri_tensor_check_writable(out, &oi, DFN, "out")) != FER_STATUS_OK) return st;
  const char *wlo = w->data, *whi = wlo + (w->rows > 0 && w->cols > 0 ? w->bytes : 0);
  if (oi.numel > 0 && (const char *)out->data + oi.lo < whi && wlo < (const char *)out->data + oi.hi)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: out overlaps w", DFN);
  if (oi.numel == 0) return FER_STATUS_OK;
  deq_job j = {w, out};
  return feri_threadpool_run(pool, w->rows, dequant_task, &j);
}
