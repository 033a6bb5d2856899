/* attention.c: fer_attention (contract in ffi/ferrite.h).
 *
 * The order of operations, which decides every output bit, so that every path below shares it:
 * - Keys are cut into chunks of ATT_CHUNK (256) keys at multiples of 256, chunks into tiles of
 *   ATT_BK (64). For each query row and each chunk holding a key the row sees, a partial softmax
 *   state (m, l, o) is built from nothing by the online softmax over the chunk's visible keys,
 *   tile by tile: scores, new maximum, o and l rescaled by exp(m_old - m_new), probabilities,
 *   o += p v (the per-ISA loops of attention.h).
 * - The row's result is the left fold of its chunk states in chunk order: chunk 0's state as it
 *   is, then S = merge(S, chunk c) for c = 1, 2, ...: M = max(m_S, m_c), a = exp(m_S - M),
 *   b = exp(m_c - M), l = fma(l_S, a, l_c * b), o = fma(o_S, a, o_c * b) (att_merge_row).
 *   out = o * (1 / l).
 * The chunks exist so that one query's keys can be split across threads: decode has one query
 * row per q head and few kv heads (SmolLM2: 3), so heads alone cannot feed the threads. Which
 * task computes a chunk, and whether the fold runs inside a task or after all of them, changes no
 * operation, so results do not depend on the thread count, the task split, or on how many query
 * rows share the call (decode equals prefill bit for bit).
 *
 * Two ways to cut the work into tasks, chosen by shape only for speed:
 * - rows path (more than ATT_SPLIT_Q queries, prefill): a task is one kv head and a tile of
 *   ATT_BQ queries times the head's group (K and V of a tile are read once for the group); it
 *   walks its chunks in order and folds each into the running state as it ends.
 * - split path (decode, up to ATT_SPLIT_Q queries): a task is a run of chunks times a block of
 *   kv heads (one head where a head's rows are contiguous, every head where a position holds its
 *   heads' rows together); it leaves each chunk state in its own workspace slot, and a second
 *   pass folds the slots per kv head. Within a task the tiles are visited tile step by tile step
 *   (one tile of every head of the block, att_step), and the K and V rows of the next step are
 *   prefetched while this one is computed (inside the per-ISA loops, a few lines per key).
 * Decode reads every K and V byte once and does little arithmetic per byte, so what decides its
 * speed is keeping the memory system busy: prefetching a step ahead (tens of microseconds),
 * spreading the prefetches through the arithmetic, in address order (att_pf_of), with the pages'
 * translations walked a call before their prefetches (att_touch). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"
#include "core/threadpool.h"
#include "core/work_claims.h"
#include "kernels/attention.h"
#include "kernels/fexp.h"
#include "kernels/kernel_util.h"

static const char *const FN = "fer_attention";

enum {
  ATT_BQ = 16,
  ATT_BK = 64,
  ATT_CHUNK = 4 * ATT_BK,
  /* up to this many queries take the split path */
  ATT_SPLIT_Q = 4,
  /* split path: aim for this many tasks per pool slot (dynamic scheduling evens them out); one
   * where a task takes every head of its positions (seq-major, token-major) and the chunks divide
   * evenly among the slots: each task starts by prefetching its first tile of all heads in one
   * burst, and one long run of positions per thread measured 7-13% faster in seq-major at 4k
   * context than four shorter ones */
  ATT_TASKS_PER_SLOT = 4,
  ATT_TASKS_PER_SLOT_BY_POS = 1,
  /* split path: at most this many kv heads per block (the per-task array of their rows) */
  ATT_MAX_HBLOCK = 16,
  /* split path with every head in one block: up to this many tasks share out their chunks
   * (split_task); more tasks keep a fixed run of chunks each */
  ATT_MAX_RANGES = 64,
  WS_ALIGN = 64,
};

typedef struct att_plan {
  const fer_tensor *q, *k, *v, *out;
  int64_t hq, hkv, group, nq, nk, d, dv;
  float scale;
  int causal;
  int64_t q_pos0;
  int64_t window;           /* 0: none; else query position P sees keys P - window + 1 .. P */
  int64_t c_first;          /* the first chunk any query sees (window: the first query's) */
  int split;
  int64_t rows;             /* query rows of one kv head in a task: group x min(nq, ATT_BQ) */
  int64_t q_tiles;          /* rows path */
  int64_t n_chunks;         /* split path: chunks from c_first holding a key the last query sees */
  int64_t hblock, n_hblocks, chunks_per_task, n_ctasks; /* split path */
  /* split path, set once per call (att_call_pf): each position's K and V halves prefetched one
   * call apart (token-major with 16-bit K and V) */
  int pf_kv_pairs;
  int64_t n_tasks;
  size_t state_floats;      /* one state of `rows` rows: o (rows x dv), m, l */
  size_t slots_bytes, worker_bytes, total_bytes;
  uint32_t workers;
} att_plan;

static size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

/* Workspace size arithmetic. Shapes pass validation with element counts below 2^63, but zero
 * strides (broadcast K and V) and empty q rows let the products of extents below exceed size_t;
 * such a product sets *ovf and the plan answers SIZE_OVERFLOW instead of a wrapped size. */
static size_t ws_mul(size_t a, size_t b, int *ovf) {
  size_t r;
  if (__builtin_mul_overflow(a, b, &r)) *ovf = 1;
  return *ovf ? 0 : r;
}
static size_t ws_add(size_t a, size_t b, int *ovf) {
  size_t r;
  if (__builtin_add_overflow(a, b, &r)) *ovf = 1;
  return *ovf ? 0 : r;
}
/* rounded up to WS_ALIGN; sizes this close to SIZE_MAX count as overflow */
static size_t ws_align(size_t v, int *ovf) {
  if (v > SIZE_MAX - WS_ALIGN) *ovf = 1;
  return *ovf ? 0 : round_up(v, WS_ALIGN);
}
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Keys query position i (0-based in the call) sees: keys 0 .. att_visible - 1. The causal limit
 * q_pos0 + i + 1 is compared with the context before it is formed: q_pos0 may be any value >= 0
 * (up to INT64_MAX), and the sum would overflow where the answer is simply all nk keys. */
static int64_t att_visible(const att_plan *p, int64_t i) {
  if (!p->causal || p->q_pos0 >= p->nk - 1 - i) return p->nk;
  return p->q_pos0 + i + 1;
}

/* The first key query position i (0-based in the call) sees: 0, or with a sliding window
 * q_pos0 + i - window + 1 (at most nk: a query whose window lies past the keys sees none). */
static int64_t att_lo(const att_plan *p, int64_t i) {
  if (p->window == 0) return 0;
  int64_t pos;
  if (__builtin_add_overflow(p->q_pos0, i, &pos) || pos - p->window + 1 >= p->nk) return p->nk;
  return pos - p->window + 1 > 0 ? pos - p->window + 1 : 0;
}

/* Whether one position's K rows of all heads lie closer together than one head's positions
 * (seq-major, token-major). */
static int att_by_pos(const att_plan *p) { return llabs(p->k->strides[1]) > llabs(p->k->strides[0]); }

fer_status fer_attention_params_init(fer_attention_params *params) {
  feri_error_clear();
  if (params == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_attention_params_init: params is NULL");
  memset(params, 0, sizeof *params);
  params->struct_size = sizeof *params;
  params->causal = 1;
  return FER_STATUS_OK;
}

/* A Q8_0 K or V: rank 3, the last axis counting blocks of 32 elements (34 bytes: an f16 scale and
 * 32 int8 codes) with strides[2] == 34, each row's blocks packed. Validated as the U8 tensor
 * [heads, positions, blocks, 34] it is in memory (extent, overflow, overlap). */
static fer_status validate_q8_0(const fer_tensor *t, const char *name, feri_tensor_info *info) {
  if (t->rank != 3)
    return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: %s has rank %d, expected [heads, positions, blocks]", FN,
                     name, (int)t->rank);
  const int64_t block = feri_kv_step_bytes(FER_DTYPE_Q8_0);
  if (t->strides[2] != block)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: Q8_0 %s has strides[2] = %lld, expected %lld (packed blocks)", FN,
                     name, (long long)t->strides[2], (long long)block);
  if (t->shape[2] > INT64_MAX / 32)
    return feri_fail(FER_STATUS_SIZE_OVERFLOW, "%s: Q8_0 %s has %lld blocks a row", FN, name, (long long)t->shape[2]);
  fer_tensor bytes = *t;
  bytes.dtype = FER_DTYPE_U8;
  bytes.rank = 4;
  bytes.shape[3] = block;
  bytes.strides[3] = 1;
  return feri_tensor_validate(&bytes, FN, name, info);
}

static fer_status plan_attention(const fer_threadpool *pool, const fer_tensor *q, const fer_tensor *k,
                                 const fer_tensor *v, const fer_attention_params *params,
                                 const fer_tensor *out, att_plan *p) {
  memset(p, 0, sizeof *p);
  if (q == NULL || k == NULL || v == NULL || out == NULL || params == NULL)
    return feri_fail(FER_STATUS_NULL_ARG, "%s: q, k, v, params and out must not be NULL", FN);
  if (params->struct_size < sizeof *params)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: params->struct_size %u < %zu (call "
                     "fer_attention_params_init)", FN, params->struct_size, sizeof *params);
  const fer_tensor *ts[4] = {q, k, v, out};
  const char *names[4] = {"q", "k", "v", "out"};
  feri_tensor_info info[4];
  fer_status st;
  for (int i = 0; i < 4; i++) {
    if (i >= 1 && i <= 2 && ts[i] != NULL && ts[i]->dtype == FER_DTYPE_Q8_0) {
      st = validate_q8_0(ts[i], names[i], &info[i]);
    } else {
      st = feri_tensor_validate(ts[i], FN, names[i], &info[i]);
      if (st == FER_STATUS_OK) st = feri_require_float_dtype(ts[i]->dtype, FN);
    }
    if (st != FER_STATUS_OK) return st;
    if (ts[i]->rank != 3)
      return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: %s has rank %d, expected [heads, positions, dim]",
                       FN, names[i], (int)ts[i]->rank);
  }
  p->hq = q->shape[0];
  p->nq = q->shape[1];
  p->d = q->shape[2];
  p->hkv = k->shape[0];
  p->nk = k->shape[1];
  p->dv = v->dtype == FER_DTYPE_Q8_0 ? v->shape[2] * 32 : v->shape[2]; /* blocks: validate_q8_0 */
  const int64_t kd = k->dtype == FER_DTYPE_Q8_0 ? k->shape[2] * 32 : k->shape[2];
  if (kd != p->d)
    return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: k's head_dim %lld differs from q's %lld", FN,
                     (long long)kd, (long long)p->d);
  if (v->shape[0] != p->hkv || v->shape[1] != p->nk)
    return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: v is [%lld, %lld, .], k is [%lld, %lld, .]", FN,
                     (long long)v->shape[0], (long long)v->shape[1], (long long)p->hkv, (long long)p->nk);
  if (out->shape[0] != p->hq || out->shape[1] != p->nq || out->shape[2] != p->dv)
    return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: out must be [%lld, %lld, %lld]", FN,
                     (long long)p->hq, (long long)p->nq, (long long)p->dv);
  if (p->hkv == 0 ? p->hq != 0 : p->hq % p->hkv != 0)
    return feri_fail(FER_STATUS_SHAPE_MISMATCH, "%s: %lld query heads are not a multiple of %lld kv heads",
                     FN, (long long)p->hq, (long long)p->hkv);
  if (params->q_pos0 < 0)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: q_pos0 %lld is negative", FN, (long long)params->q_pos0);
  if (!isfinite(params->scale))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: scale is not finite", FN);
  if (params->window < 0 || (params->window > 0 && params->causal == 0))
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: window %d (a sliding window is >= 0 and needs causal)", FN,
                     (int)params->window);
  if ((st = feri_tensor_check_writable(out, &info[3], FN, "out")) != FER_STATUS_OK) return st;
  for (int i = 0; i < 3; i++)
    if (feri_tensors_overlap(out, &info[3], ts[i], &info[i]))
      return feri_fail(FER_STATUS_INVALID_ARG, "%s: out overlaps %s", FN, names[i]);
  p->q = q;
  p->k = k;
  p->v = v;
  p->out = out;
  p->group = p->hkv > 0 ? p->hq / p->hkv : 0;
  p->scale = params->scale != 0.0f ? params->scale : (p->d > 0 ? 1.0f / sqrtf((float)p->d) : 1.0f);
  p->causal = params->causal != 0;
  p->q_pos0 = params->q_pos0;
  p->window = params->window;
  p->c_first = att_lo(p, 0) / ATT_CHUNK;
  if (info[3].numel == 0) return FER_STATUS_OK;
  p->q_tiles = (p->nq + ATT_BQ - 1) / ATT_BQ;
  p->rows = p->group * min64(p->nq, ATT_BQ);
  int ovf = 0;
  p->state_floats = ws_mul((size_t)p->rows, ws_add((size_t)p->dv, 2, &ovf), &ovf);
  const uint32_t slots = feri_threadpool_slots(pool);
  /* per worker, both paths: the q rows widened to f32, one tile of scores per row and the group's
   * rescale factors. K and V are read in their own dtype: widening a tile to f32 once per task
   * was measured 1.9x slower at decode (the f32 tile no longer fits L1) */
  const size_t tile_floats = ws_add(ws_mul((size_t)p->rows, ATT_BK, &ovf), (size_t)p->group, &ovf);
  size_t worker_floats = tile_floats;
  p->split = p->nq <= ATT_SPLIT_Q;
  if (p->split) {
    const int64_t kmax = att_visible(p, p->nq - 1);
    p->n_chunks = (kmax + ATT_CHUNK - 1) / ATT_CHUNK - p->c_first;
    if (p->n_chunks < 0) p->n_chunks = 0;
    /* a task's run of chunks is claimed in 32-bit halves of one word (work_claims.h) */
    if (p->n_chunks > (int64_t)UINT32_MAX)
      return feri_fail(FER_STATUS_INVALID_ARG, "%s: %lld visible keys, more than the %lld the decode split takes",
                       FN, (long long)kmax, (long long)UINT32_MAX * ATT_CHUNK);
    /* heads per block: all of them where one position's heads share bytes (and pages: two tasks
     * over halves of the heads each read every page, 1.35x slower in f32 at 4k context), then
     * halved while there are too few tasks for the slots; else one, so that a task streams one
     * head's K and V, each contiguous (head-major f16 at 4k context: 1.2-1.3x faster than eight
     * heads' rows interleaved, which split the prefetches over sixteen streams) */
    int64_t hb = att_by_pos(p) ? min64(p->hkv, ATT_MAX_HBLOCK) : 1;
    const int even = att_by_pos(p) && p->n_chunks % (int64_t)slots == 0;
    const int64_t want = (int64_t)(even ? ATT_TASKS_PER_SLOT_BY_POS : ATT_TASKS_PER_SLOT) * slots;
    /* while n_chunks x blocks < want, tested without a product that could overflow */
    for (int64_t blocks = (p->hkv + hb - 1) / hb;
         hb > 1 && (p->n_chunks == 0 || (blocks < want && p->n_chunks * blocks < want));
         blocks = (p->hkv + hb - 1) / hb)
      hb = (hb + 1) / 2;
    p->hblock = hb;
    p->n_hblocks = (p->hkv + hb - 1) / hb;
    int64_t units;
    if (__builtin_mul_overflow(p->n_chunks, p->n_hblocks, &units)) ovf = 1, units = 0;
    p->chunks_per_task = units >= want ? units / want : 1;
    p->n_ctasks = (p->n_chunks + p->chunks_per_task - 1) / p->chunks_per_task;
    p->n_tasks = p->n_ctasks * p->n_hblocks;
    /* per head of a block: q rows, scores and rescale factors (the common ones above serve one) */
    const size_t q_floats = ws_mul((size_t)p->rows, (size_t)p->d, &ovf);
    worker_floats = ws_add(worker_floats, ws_mul((size_t)p->hblock, q_floats, &ovf), &ovf);
    worker_floats = ws_add(worker_floats, ws_mul((size_t)(p->hblock - 1), tile_floats, &ovf), &ovf);
    const size_t slot_states = ws_mul((size_t)p->hkv, (size_t)p->n_chunks, &ovf);
    p->slots_bytes = ws_align(ws_mul(ws_mul(slot_states, p->state_floats, &ovf), sizeof(float), &ovf), &ovf);
  } else {
    /* the folded state and the state of the chunk being computed */
    p->n_tasks = p->hkv * p->q_tiles;
    worker_floats = ws_add(worker_floats, ws_mul((size_t)p->rows, (size_t)p->d, &ovf), &ovf);
    worker_floats = ws_add(worker_floats, ws_mul(2, p->state_floats, &ovf), &ovf);
  }
  p->worker_bytes = ws_align(ws_mul(worker_floats, sizeof(float), &ovf), &ovf);
  /* the fold of the split path runs as tasks too, one per kv head */
  const int64_t tasks = p->split && p->hkv > p->n_tasks ? p->hkv : p->n_tasks;
  p->workers = tasks <= 1 ? 1u : slots;
  p->total_bytes = ws_add(p->slots_bytes, ws_mul(p->worker_bytes, p->workers, &ovf), &ovf);
  if (ovf)
    return feri_fail(FER_STATUS_SIZE_OVERFLOW, "%s: the workspace for q [%lld, %lld, %lld], k [%lld, %lld, .] "
                     "and v's head_dim %lld does not fit in size_t", FN, (long long)p->hq, (long long)p->nq,
                     (long long)p->d, (long long)p->hkv, (long long)p->nk, (long long)p->dv);
  return FER_STATUS_OK;
}

typedef struct att_job {
  const att_plan *p;
  const feri_attention_ops *ops;
  char *ws;
  feri_work_claims *board; /* split path, when not NULL: each task's chunks (see split_task) */
} att_job;

/* The rows of one kv head in a task: row r = g * nqt + i is q head h * group + g at query
 * position i0 + i (0-based in the call). */
typedef struct att_rows {
  int64_t h, i0, nqt;
  const float *q;    /* row r at q + r * d */
  float *o, *m, *l;  /* the state being built: o of row r at o + r * dv */
  float *s, *corr;   /* scores (row r at s + r * ATT_BK); the group's rescale factors */
} att_rows;

static float *worker_scratch(const att_job *j, uint32_t worker) {
  return (float *)(j->ws + j->p->slots_bytes + (j->p->workers == 1 ? 0 : (size_t)worker * j->p->worker_bytes));
}

static void load_q(const att_plan *p, int64_t h, int64_t i0, int64_t nqt, float *qf) {
  const fer_tensor *q = p->q;
  for (int64_t r = 0; r < p->group * nqt; r++) {
    const char *qrow = (const char *)q->data + (h * p->group + r / nqt) * q->strides[0] + (i0 + r % nqt) * q->strides[1];
    float *dst = qf + r * p->d;
    if (q->dtype == FER_DTYPE_F32 && q->strides[2] == (int64_t)sizeof(float))
      memcpy(dst, qrow, (size_t)p->d * sizeof(float));
    else
      for (int64_t e = 0; e < p->d; e++) dst[e] = feri_elem_load(qrow + e * q->strides[2], q->dtype);
  }
}

static void state_clear(const att_plan *p, int64_t rows, float *o, float *m, float *l) {
  memset(o, 0, (size_t)(rows * p->dv) * sizeof(float));
  for (int64_t r = 0; r < rows; r++) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
  }
}

static feri_kv_rows kv_rows(const fer_tensor *t, int64_t h, int64_t k0) {
  const feri_kv_rows r = {(const char *)t->data + h * t->strides[0] + k0 * t->strides[1], t->dtype,
                          t->strides[1], t->strides[2], feri_kv_step_bytes(t->dtype)};
  return r;
}

/* Every 64-byte line of bytes [row, row + bytes), into L2 (prefetcht2, as the per-ISA loops). */
static void prefetch_lines(const char *row, int64_t bytes) {
  const char *end = row + bytes;
  for (const char *a = (const char *)((uintptr_t)row & ~(uintptr_t)63); a < end; a += 64)
    __builtin_prefetch(a, 0, 1);
}

/* Prefetch, in one go, the K and V rows of keys [k0, k0 + kn) of heads [h0, h0 + nh) in the
 * order of their addresses (by position when att_by_pos, else by head): what a task needs first,
 * before the loops' own prefetching has run ahead of it. */
static void att_prefetch(const att_plan *p, int64_t h0, int64_t nh, int64_t k0, int64_t kn) {
  const int by_pos = att_by_pos(p);
  /* item t is (position, head) = (o, i) = (t / nh, t % nh) by position, (i, o) = (t % kn, t / kn)
   * by head; rows of consecutive items i that touch (packed heads, or packed positions) are
   * fetched as one run of lines */
  const int64_t inner = by_pos ? nh : kn, t0 = 0, t1 = nh * kn;
  const fer_tensor *kv[2] = {p->k, p->v};
  const int64_t dims[2] = {p->d, p->dv};
  for (int w = 0; w < 2; w++) {
    const fer_tensor *x = kv[w];
    const int64_t es = feri_kv_step_bytes(x->dtype), bytes = feri_kv_row_bytes(x->dtype, dims[w]);
    if (x->strides[2] != es) continue; /* rows whose elements are not packed: left to the hardware */
    const int64_t s_in = by_pos ? x->strides[0] : x->strides[1], s_out = by_pos ? x->strides[1] : x->strides[0];
    const char *base = (const char *)x->data + h0 * x->strides[0] + k0 * x->strides[1];
    for (int64_t t = t0; t < t1;) {
      const int64_t o = t / inner, i = t % inner, run = min64(inner - i, t1 - t);
      const char *row = base + o * s_out + i * s_in;
      if (s_in == bytes) {
        prefetch_lines(row, run * bytes);
      } else {
        for (int64_t r = 0; r < run; r++) prefetch_lines(row + r * s_in, bytes);
      }
      t += run;
    }
  }
}

static const feri_att_pf att_pf_none = {NULL, 0, 1, 0, 0};

/* What a per-ISA call of a tile step prefetches of the next tile, at key `next`, while it
 * computes keys [k1, k1 + ...) of head h0 + u of the block [h0, h0 + nh), n keys per head in this
 * tile (att_step's order: head by head, keys in order). By head (head-major), the same keys'
 * rows of the next tile. By position with each position's rows of the block packed (seq-major,
 * token-major), the next tile's rows of the whole block in address order instead, position by
 * position and head by head within one, the calls taking them in runs in the order the calls
 * come: one head's rows, 2 KiB or more apart, were fetched 1.1-1.2x slower at 4k context (f16,
 * page-aligned seq-major) than the same bytes in address order. */
static feri_att_pf att_pf_of(const att_plan *p, const fer_tensor *x, int64_t dim, int64_t h0, int64_t nh, int64_t u,
                             int64_t next, int64_t n, int64_t k1) {
  const int64_t es = feri_kv_step_bytes(x->dtype), row = feri_kv_row_bytes(x->dtype, dim);
  if (att_by_pos(p) && x->strides[2] == es && x->strides[0] == row) {
    const int64_t packed = x->strides[1] == nh * row;
    const feri_att_pf f = {kv_rows(x, h0, next).base, u * n + k1, packed ? INT64_MAX : nh, row,
                           packed ? 0 : x->strides[1]};
    return f;
  }
  const feri_att_pf f = {kv_rows(x, h0 + u, next + k1).base, 0, INT64_MAX, x->strides[1], 0};
  return f;
}

/* One access to every 4 KiB page that the first cnt rows of f start in, a call ahead of the
 * prefetches of those rows, so that the pages' translations are walked while the arithmetic runs
 * (4 KiB pages at 4k context: a page per 16 of a head's f16 rows, per position in token-major).
 * For 16-bit K and V the access is a load of one byte, for f32 a prefetcht0. A load blocks
 * retirement until its line arrives (a page walk and a DRAM read): in f32, memory-bound, that
 * cost 14% of the samples, and the non-blocking prefetch was 1.08-1.14x faster in head- and
 * seq-major (token-major equal); in f16, twice the arithmetic per byte, the load kept seq- and
 * token-major at 65-73% of the read probe where the prefetch let them fall to 55-71% (head-major
 * gained), so the layouts drifted 1.1-1.3x apart. Why is not settled: a prefetch to a page
 * missing from the TLB is not dropped here (scripts/kernels/prefetch_walk.c, claim C-ATT-010), so
 * the load's value for f16 is likely its pacing of the stream. Without any touch, decode was
 * 1.1-1.3x slower in every layout. */
static void att_touch(const feri_att_pf *f, int64_t cnt, int by_load) {
  feri_att_pf_cursor c = feri_att_pf_at(f, 0);
  uintptr_t last = UINTPTR_MAX;
  unsigned sum = 0;
  for (int64_t t = 0; t < cnt; t++) {
    const char *row = feri_att_pf_next(f, &c);
    if ((uintptr_t)row >> 12 == last) continue;
    last = (uintptr_t)row >> 12;
    if (by_load)
      sum += *(const volatile unsigned char *)row;
    else
      __builtin_prefetch(row, 0, 3);
  }
  __asm__ volatile("" : : "r"(sum));
}

/* The calls of one query position's tile step, numbered g = 0 .. 2 * calls - 1: the K calls
 * (scores), then the V calls (accumulate), `calls` = nh heads x `halves` runs of up to `half`
 * keys. Call g prefetches the (g mod calls)-th run of the next tile's rows in att_pf_of's order,
 * whichever head and half it computes (or one half of run g / 2: att_call_pf). */
typedef struct att_calls {
  int64_t h0, nh, halves, half, calls, next, n;
  int by_pos, kv_one_run;
} att_calls;

/* The head (index into the block) and first key of the tile that call x of either loop
 * computes: head by head, or a half of every head before the next half (by_pos). */
static void att_call_keys(const att_calls *c, int64_t x, int64_t *u, int64_t *k1) {
  *u = c->by_pos ? x % c->nh : x / c->halves;
  *k1 = (c->by_pos ? x / c->nh : x % c->halves) * c->half;
}

/* Whether one position's K rows are followed by its V rows, both within 4 KiB (token-major with
 * 16-bit K and V: a position's K and V of one layer are one 4 KiB run, a page apart from the
 * next position's). */
static int att_kv_one_run(const att_plan *p) {
  const int64_t es = feri_kv_step_bytes(p->k->dtype), row = feri_kv_row_bytes(p->k->dtype, p->d);
  return att_by_pos(p) && p->d == p->dv && p->k->dtype == p->v->dtype && p->k->strides[2] == es &&
         p->k->strides[0] == row && memcmp(p->k->strides, p->v->strides, 3 * sizeof(int64_t)) == 0 &&
         (uintptr_t)p->v->data - (uintptr_t)p->k->data == (uintptr_t)(p->hkv * row) && 2 * p->hkv * row <= 4096;
}

/* Call g's prefetch rows, their pages touched (att_touch) as they are listed: a loop asks for
 * call g + 1's while it makes call g, so each call's rows are listed once and touched a call
 * ahead. Past the last call: none.
 * Where a position's K and V are one run (att_kv_one_run), call g takes the K rows (g even) or
 * the V rows (g odd) of run g / 2 instead, so that both halves of a position's run are asked for
 * one call apart and its page is touched once: token-major f16 decode at 4k context ran 1.05x
 * faster than with the next tile's K fetched during the K calls and its V during the V calls
 * (the harness, rounds turned); touching the V half too (a load of a line just asked for) was
 * 1.1x slower. With f32 a position's K and V are two pages and the pairing measured no gain. */
static feri_att_pf att_call_pf(const att_plan *p, const att_calls *c, int64_t g) {
  if (g >= 2 * c->calls) return att_pf_none;
  if (c->kv_one_run) {
    const int64_t x = g / 2, k1 = x % c->halves * c->half;
    const feri_att_pf f = att_pf_of(p, g % 2 == 0 ? p->k : p->v, p->d, c->h0, c->nh, x / c->halves, c->next, c->n, k1);
    if (g % 2 == 0) att_touch(&f, min64(c->n - k1, c->half), feri_dtype_size(p->k->dtype) < 4);
    return f;
  }
  const int64_t x = g % c->calls, k1 = x % c->halves * c->half;
  const fer_tensor *t = g < c->calls ? p->k : p->v;
  const feri_att_pf f = att_pf_of(p, t, g < c->calls ? p->d : p->dv, c->h0, c->nh, x / c->halves, c->next, c->n, k1);
  att_touch(&f, min64(c->n - k1, c->half), feri_dtype_size(t->dtype) < 4);
  return f;
}

/* Keys [k0, k0 + kn) of one tile (inside one chunk) into the states of nh heads' rows a[0 .. nh).
 * Scores and values go in calls of up to 32 keys (halves of the tile) per head: a score depends
 * only on its key and the values' fma chains run over the keys in order either way (attention.h),
 * so neither the halves nor the order of heads and halves change a bit, as long as each head's
 * halves come in order. Head by head (head-major: one head per task anyway); in seq- and
 * token-major caches a half of every head before the next half, so that a run of positions'
 * pages serves all heads before the next run's (f32 with the prefetch touch: the layouts
 * 1.03-1.07x apart in the bench's checks against 1.02-1.11x head by head; f16 within noise).
 * While the last query position's keys are scored and its values accumulated, the inner loops
 * prefetch the rows of the tile at key `next` (att_pf_of), a few lines per key, spread through
 * the arithmetic: issued as a burst per tile instead, the prefetches filled the miss queues and
 * stalled the loops (35% of the time at 4k context). A next tile shorter than this one is
 * prefetched here in one go. */
static void att_step(const att_job *j, const att_rows *a, int64_t nh, int64_t k0, int64_t kn, int64_t next,
                     int64_t next_n) {
  const att_plan *p = j->p;
  const feri_attention_ops *ops = j->ops;
  const int64_t nqt = a[0].nqt;
  const int by_pos = att_by_pos(p);
  if (next_n > 0 && next_n < kn) {
    for (int64_t u = 0; u < nh; u++) att_prefetch(p, a[u].h, 1, next, next_n);
    next_n = 0;
  }
  /* the group's q heads at one query position see the same keys: one batched call each */
  for (int64_t i = 0; i < nqt; i++) {
    const int64_t n = min64(kn, att_visible(p, a[0].i0 + i) - k0);
    /* keys [k0, k0 + skip) lie before this query's window: never read, their scores -inf */
    const int64_t skip = min64(n, att_lo(p, a[0].i0 + i) - k0 > 0 ? att_lo(p, a[0].i0 + i) - k0 : 0);
    if (n <= 0 || skip >= n) continue;
    const int pf = i == nqt - 1 && next_n >= n;
    const int64_t half = n > 32 ? 32 : n, halves = (n + half - 1) / half;
    /* by position (seq- and token-major, every head of a position in the block), half a tile
     * ahead: the calls of each head's first half fetch the second half of this tile, the others
     * the first half of the next. A whole tile ahead, a tile step of every head (256 KiB of f16 K
     * and V, 512 KiB of f32) waited in L2 for its turn beside the step being computed: seq-major
     * decode at 4k context ran 1.03-1.04x slower (f16 and f32, the harness's rounds turned), and
     * f32 token-major right after a 256 MiB read of other memory (the bench's probe; a decode
     * step's weight reads) 1.15-1.19x slower, 1.05-1.09x over all rounds (C-ATT-014). Head-major's
     * steps are one head's (64 KiB of f32). */
    const int64_t pf_key = pf && by_pos && nh == p->hkv && halves == 2 && n == kn && next == k0 + kn
                               ? next - half
                               : next;
    const att_calls c = {a[0].h, nh, halves, half, nh * halves, pf_key, n, by_pos, p->pf_kv_pairs};
    /* fn: the next call's prefetch rows (the last K call lists the first V call's) */
    feri_att_pf fn = pf ? att_call_pf(p, &c, 0) : att_pf_none;
    for (int64_t x = 0; x < c.calls; x++) {
      int64_t u, k1;
      att_call_keys(&c, x, &u, &k1);
      const att_rows *r = &a[u];
      const int64_t j0 = k1 > skip ? k1 : skip, j1 = k1 + min64(n - k1, half);
      const feri_att_pf f = fn;
      if (pf) fn = att_call_pf(p, &c, x + 1);
      for (int64_t g = 0; g < p->group; g++)
        for (int64_t jj = k1; jj < j0 && jj < j1; jj++) r->s[(g * nqt + i) * ATT_BK + jj] = -INFINITY;
      if (j0 >= j1) continue;
      const feri_kv_rows kr = kv_rows(p->k, r->h, k0 + j0);
      ops->scores(r->q + i * p->d, nqt * p->d, p->group, p->d, &kr, j1 - j0, p->scale,
                  r->s + i * ATT_BK + j0, nqt * ATT_BK, pf ? &f : NULL);
    }
    for (int64_t u = 0; u < nh; u++) {
      const att_rows *r = &a[u];
      for (int64_t g = 0; g < p->group; g++) {
        const int64_t row = g * nqt + i;
        float *sr = r->s + row * ATT_BK;
        const float mx = ops->row_max(sr, n, r->m[row]);
        r->corr[g] = r->m[row] == -INFINITY ? 0.0f : feri_fexp(r->m[row] - mx);
        const float sum = ops->exp_shift(sr, n, mx);
        r->l[row] = fmaf(r->l[row], r->corr[g], sum);
        r->m[row] = mx;
      }
    }
    /* o *= corr (with each head's first half), then o += p v */
    for (int64_t x = 0; x < c.calls; x++) {
      int64_t u, k1;
      att_call_keys(&c, x, &u, &k1);
      const att_rows *r = &a[u];
      const int64_t j0 = k1 > skip ? k1 : skip, j1 = k1 + min64(n - k1, half);
      const feri_att_pf f = fn;
      if (pf) fn = att_call_pf(p, &c, c.calls + x + 1);
      if (j0 >= j1) { /* a half wholly before the window: only the rescale (accumulate's first step) */
        for (int64_t g = 0; k1 == 0 && g < p->group; g++)
          for (int64_t e = 0; e < p->dv; e++) r->o[(g * nqt + i) * p->dv + e] *= r->corr[g];
        continue;
      }
      const feri_kv_rows vr = kv_rows(p->v, r->h, k0 + j0);
      ops->accumulate(r->o + i * p->dv, nqt * p->dv, p->group, p->dv, r->s + i * ATT_BK + j0, nqt * ATT_BK,
                      &vr, j1 - j0, k1 == 0 ? r->corr : NULL, pf ? &f : NULL);
    }
  }
}

/* S = merge(S, B) for one row (the formula at the top of this file). */
static void att_merge_row(const feri_attention_ops *ops, int64_t dv, float *o, float *m, float *l,
                          const float *ob, float mb, float lb) {
  const float mx = isnan(*m) || isnan(mb) ? NAN : (*m > mb ? *m : mb);
  const float a = feri_fexp(*m - mx), b = feri_fexp(mb - mx);
  *l = fmaf(*l, a, lb * b);
  ops->merge(o, ob, dv, a, b);
  *m = mx;
}

/* out row (q head hq, query i) = o * (1 / l), or zeros when l is not positive (o is then not
 * read: a row that saw no key may pass NULL). */
static void store_row(const att_plan *p, int64_t hq, int64_t i, const float *o, float l) {
  const fer_tensor *out = p->out;
  char *orow = (char *)out->data + hq * out->strides[0] + i * out->strides[1];
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  for (int64_t e = 0; e < p->dv; e++)
    feri_elem_store(orow + e * out->strides[2], out->dtype, l > 0.0f ? o[e] * inv : 0.0f);
}

/* Rows path: kv head h, queries [i0, i0 + nqt): chunks in order, folded as they end. */
static void rows_task(void *ctx, int64_t task, uint32_t worker) {
  const att_job *j = ctx;
  const att_plan *p = j->p;
  const int64_t h = task / p->q_tiles, i0 = task % p->q_tiles * ATT_BQ;
  const int64_t nqt = min64(p->nq - i0, ATT_BQ), rows = p->group * nqt;
  float *qf = worker_scratch(j, worker);
  float *s = qf + p->rows * p->d, *corr = s + p->rows * ATT_BK;
  float *fo = corr + p->group, *fm = fo + p->rows * p->dv, *fl = fm + p->rows;
  float *co = fl + p->rows, *cm = co + p->rows * p->dv, *cl = cm + p->rows;
  load_q(p, h, i0, nqt, qf);
  state_clear(p, rows, fo, fm, fl);
  /* keys this tile of queries can need: up to the last query's position */
  const int64_t kmax = att_visible(p, i0 + nqt - 1);
  /* with a window, the chunks from the first query's first one (the fold of each row starts at its
   * own first chunk: chunks before it are not folded in, the first one is taken as it is) */
  const int64_t cstart = att_lo(p, i0) / ATT_CHUNK * ATT_CHUNK;
  if (kmax > cstart) att_prefetch(p, h, 1, cstart, min64(kmax - cstart, ATT_BK)); /* later tiles: att_step */
  for (int64_t c0 = cstart; c0 < kmax; c0 += ATT_CHUNK) {
    /* the first chunk is built in the folded state itself: the fold starts with it as it is */
    att_rows a = {h, i0, nqt, qf, fo, fm, fl, s, corr};
    if (c0 > cstart) {
      a.o = co, a.m = cm, a.l = cl;
      state_clear(p, rows, co, cm, cl);
    }
    const int64_t cend = min64(c0 + ATT_CHUNK, kmax);
    for (int64_t k0 = c0; k0 < cend; k0 += ATT_BK)
      att_step(j, &a, 1, k0, min64(cend - k0, ATT_BK), k0 + ATT_BK, min64(kmax - k0 - ATT_BK, ATT_BK));
    if (c0 == cstart) continue;
    for (int64_t r = 0; r < rows; r++) {
      const int64_t first = att_lo(p, i0 + r % nqt) / ATT_CHUNK * ATT_CHUNK;
      if (att_visible(p, i0 + r % nqt) <= c0 || c0 < first) continue;
      if (c0 == first) { /* this row's first chunk (past cstart): its state as it is */
        memcpy(fo + r * p->dv, co + r * p->dv, (size_t)p->dv * sizeof(float));
        fm[r] = cm[r], fl[r] = cl[r];
        continue;
      }
      att_merge_row(j->ops, p->dv, fo + r * p->dv, &fm[r], &fl[r], co + r * p->dv, cm[r], cl[r]);
    }
  }
  for (int64_t r = 0; r < rows; r++) store_row(p, h * p->group + r / nqt, i0 + r % nqt, fo + r * p->dv, fl[r]);
}

/* Split path: the state of (kv head h, chunk c) lives in slot h * n_chunks + c - c_first. */
static float *slot_of(const att_job *j, int64_t h, int64_t c) {
  return (float *)j->ws + (size_t)(h * j->p->n_chunks + c - j->p->c_first) * j->p->state_floats;
}

static att_rows slot_rows(const att_job *j, int64_t h, int64_t c, const float *q, float *s, float *corr) {
  const att_plan *p = j->p;
  float *o = slot_of(j, h, c);
  const att_rows a = {h, 0, p->nq, q, o, o + p->rows * p->dv, o + p->rows * p->dv + p->rows, s, corr};
  return a;
}

/* Task ct's run of chunks: [ct, ct + 1) x chunks_per_task, cut at n_chunks (the plan keeps
 * n_chunks under 2^32 where it uses runs), counted from c_first. */
static void att_run_init(const att_plan *p, int64_t ct, feri_work_claims *run) {
  feri_work_claims_init(run, (uint32_t)(ct * p->chunks_per_task),
                        (uint32_t)min64((ct + 1) * p->chunks_per_task, p->n_chunks));
}

/* Chunk c of kv heads [h0, h0 + nh), tile step by tile step, its first tile already prefetched;
 * the last step prefetches the first tile of chunk `then` (none when negative). */
static void att_chunk(const att_job *j, att_rows *a, int64_t h0, int64_t nh, float *qf, float *s, float *corr,
                      int64_t c, int64_t then) {
  const att_plan *p = j->p;
  const int64_t kmax = att_visible(p, p->nq - 1), cend = min64((c + 1) * ATT_CHUNK, kmax);
  for (int64_t k0 = c * ATT_CHUNK; k0 < cend; k0 += ATT_BK) {
    const int64_t kn = min64(cend - k0, ATT_BK);
    int64_t next = k0 + ATT_BK, next_n = min64(cend - next, ATT_BK);
    if (next >= cend) {
      next = then * ATT_CHUNK;
      next_n = then >= 0 ? min64(kmax - next, ATT_BK) : 0;
    }
    for (int64_t u = 0; u < nh; u++) {
      a[u] = slot_rows(j, h0 + u, c, qf + u * p->rows * p->d, s + u * p->rows * ATT_BK, corr + u * p->group);
      if (k0 == c * ATT_CHUNK) state_clear(p, p->rows, a[u].o, a[u].m, a[u].l);
    }
    att_step(j, a, nh, k0, kn, next, next_n);
  }
}

/* The chunks claimed from one task's run (from its front or its back), each claimed before the
 * one before it ends so that its first tile is prefetched in time. */
static void att_claimed_chunks(const att_job *j, att_rows *a, int64_t h0, int64_t nh, float *qf, float *s,
                               float *corr, feri_work_claims *run, int from_back) {
  const int64_t cf = j->p->c_first; /* claims count from the first chunk seen */
  int64_t c = from_back ? feri_work_claim_back(run) : feri_work_claim_front(run);
  if (c >= 0) c += cf;
  if (c >= 0) att_prefetch(j->p, h0, nh, c * ATT_CHUNK, min64(att_visible(j->p, j->p->nq - 1) - c * ATT_CHUNK, ATT_BK));
  while (c >= 0) {
    int64_t then = from_back ? feri_work_claim_back(run) : feri_work_claim_front(run);
    if (then >= 0) then += cf;
    att_chunk(j, a, h0, nh, qf, s, corr, c, then);
    c = then;
  }
}

/* Split path: chunks [c0, c1) of kv heads [h0, h0 + nh), tile step by tile step, in order. With
 * a board (every head in one block), the task takes its run of chunks from the board's front and
 * then what the other tasks' runs still hold from their backs (work_claims.h), so a thread slowed
 * by another process on its core (common on this shared VM) is relieved a chunk at a time: one
 * task per thread keeps each thread's stream of pages unbroken (seq- and token-major decode
 * 7-13% faster than four tasks per thread), but alone it let the slowest thread set the time
 * (with a process taking 30% of one core, seq- and token-major fell 1.05-1.2x behind head-major,
 * whose one-head tasks balance themselves). Which task computes a chunk changes no bit. */
static void split_task(void *ctx, int64_t task, uint32_t worker) {
  const att_job *j = ctx;
  const att_plan *p = j->p;
  const int64_t hb = task % p->n_hblocks, ct = task / p->n_hblocks;
  const int64_t h0 = hb * p->hblock, nh = min64(p->hblock, p->hkv - h0);
  /* per head of the block: q rows, scores, rescale factors */
  float *qf = worker_scratch(j, worker), *s = qf + p->hblock * p->rows * p->d, *corr = s + p->hblock * p->rows * ATT_BK;
  att_rows a[ATT_MAX_HBLOCK];
  for (int64_t u = 0; u < nh; u++) load_q(p, h0 + u, 0, p->nq, qf + u * p->rows * p->d);
  feri_work_claims own; /* without a board: this task's run, claimed by it alone */
  if (j->board == NULL) att_run_init(p, ct, &own);
  att_claimed_chunks(j, a, h0, nh, qf, s, corr, j->board != NULL ? &j->board[ct] : &own, 0);
  for (int64_t r = 1; j->board != NULL && r < p->n_ctasks; r++)
    att_claimed_chunks(j, a, h0, nh, qf, s, corr, &j->board[(ct + r) % p->n_ctasks], 1);
}

/* Split path, second pass: kv head h's slots folded in chunk order, rows written out. */
static void fold_task(void *ctx, int64_t h, uint32_t worker) {
  const att_job *j = ctx;
  const att_plan *p = j->p;
  (void)worker;
  for (int64_t r = 0; r < p->rows; r++) {
    const int64_t i = r % p->nq, vis = att_visible(p, i), first = att_lo(p, i) / ATT_CHUNK;
    /* a row that sees no key keeps l = 0 and gets zeros */
    float *o = NULL, *m = NULL, l0 = 0.0f, *l = &l0;
    for (int64_t c = first; c < p->c_first + p->n_chunks && c * ATT_CHUNK < vis; c++) {
      float *st = slot_of(j, h, c);
      float *so = st + r * p->dv, *sm = st + p->rows * p->dv + r, *sl = sm + p->rows;
      if (c == first) {
        o = so, m = sm, l = sl;
        continue;
      }
      att_merge_row(j->ops, p->dv, o, m, l, so, *sm, *sl);
    }
    store_row(p, h * p->group + r / p->nq, i, o, *l);
  }
}

fer_status fer_attention_workspace_bytes(const fer_threadpool *pool, const fer_tensor *q,
                                         const fer_tensor *k, const fer_tensor *v,
                                         const fer_attention_params *params,
                                         const fer_tensor *out, size_t *out_bytes) {
  feri_error_clear();
  if (out_bytes == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s_workspace_bytes: out_bytes is NULL", FN);
  *out_bytes = 0;
  att_plan p;
  fer_status st = plan_attention(pool, q, k, v, params, out, &p);
  if (st == FER_STATUS_OK) *out_bytes = p.total_bytes;
  return st;
}

fer_status fer_attention(fer_threadpool *pool, const fer_tensor *q, const fer_tensor *k,
                         const fer_tensor *v, const fer_attention_params *params,
                         const fer_tensor *out, void *workspace, size_t workspace_bytes) {
  feri_error_clear();
  att_plan p;
  fer_status st = plan_attention(pool, q, k, v, params, out, &p);
  if (st != FER_STATUS_OK) return st;
  char *ws;
  void *owned;
  if ((st = feri_workspace_acquire(workspace, workspace_bytes, p.total_bytes, FN, &ws, &owned)) != FER_STATUS_OK)
    return st;
  if (p.total_bytes == 0) return FER_STATUS_OK;
  if (p.split) p.pf_kv_pairs = att_kv_one_run(&p);
  feri_work_claims board[ATT_MAX_RANGES];
  att_job j = {&p, feri_attention_ops_for(feri_threadpool_effective_isa(pool)), ws, NULL};
  if (p.split && p.n_hblocks == 1 && p.n_ctasks > 1 && p.n_ctasks <= ATT_MAX_RANGES) {
    for (int64_t r = 0; r < p.n_ctasks; r++) att_run_init(&p, r, &board[r]);
    j.board = board;
  }
  if (!p.split) {
    st = feri_threadpool_run_workers(pool, p.n_tasks, rows_task, &j);
  } else {
    st = feri_threadpool_run_workers(pool, p.n_tasks, split_task, &j);
    if (st == FER_STATUS_OK) st = feri_threadpool_run_workers(pool, p.hkv, fold_task, &j);
  }
  free(owned);
  return st;
}
