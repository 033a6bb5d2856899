/* tp_plan_test.c: the tensor-parallel split (tp_plan.h) on the shapes of the real models, every
 * rank count: the query heads, the FFN's columns and the vocabulary tiled without gaps or overlap,
 * each rank holding the KV heads its queries read (replicated where ranks outnumber them), column
 * splits on block boundaries or refused naming them; the bytes formula. Then a column-split
 * matmul against the whole one (fer_matmul_quant_i8, five block formats, 2-4 ranks): the sum of the
 * ranks' partials in the all-reduce's order differs from the single process's result by no more
 * than the bound derived in docs/CLAIMS.md (C-TP-002): two summation orders of the same block terms.
 * EVIDENCE: C-TP-001 C-TP-002 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferrite.h"
#include "model/tp_plan.h"
#include "testing/check.h"

static void check_tiling(const feri_tp_shape *s, uint32_t size) {
  uint32_t next_q = 0, next_ff = 0, next_v = 0;
  uint8_t kv_held[64] = {0};
  for (uint32_t r = 0; r < size; r++) {
    feri_tp_plan p;
    CHECK_STATUS(feri_tp_plan_make(s, r, size, &p), FER_STATUS_OK);
    CHECK(p.rank == r && p.size == size);
    CHECK(p.q_heads.begin == next_q && p.q_heads.end > p.q_heads.begin);
    CHECK(p.ff.begin == next_ff && p.ff.end > p.ff.begin && p.ff.begin % s->ffn_down_block == 0);
    CHECK(p.vocab.begin == next_v && p.vocab.end > p.vocab.begin);
    CHECK((p.q_heads.begin * s->head_dim) % s->attn_out_block == 0);
    const uint32_t group = s->n_head / s->n_head_kv;
    for (uint32_t h = p.q_heads.begin; h < p.q_heads.end; h++) /* every query's KV head is held */
      CHECK(h / group >= p.kv_heads.begin && h / group < p.kv_heads.end);
    CHECK(p.kv_heads.end <= s->n_head_kv && p.kv_heads.end - p.kv_heads.begin <= (p.q_heads.end - p.q_heads.begin + group - 1) / group + 1);
    for (uint32_t k = p.kv_heads.begin; k < p.kv_heads.end && k < 64; k++) kv_held[k]++;
    next_q = p.q_heads.end, next_ff = p.ff.end, next_v = p.vocab.end;
  }
  CHECK(next_q == s->n_head && next_ff == s->n_ff && next_v == s->n_vocab);
  uint32_t copies = 0;
  for (uint32_t k = 0; k < s->n_head_kv && k < 64; k++) {
    CHECK(kv_held[k] >= 1);
    copies += kv_held[k];
  }
  if (size <= s->n_head_kv && s->n_head_kv % size == 0) CHECK(copies == s->n_head_kv); /* no replication needed */
}

static void test_plans(void) {
  /* SmolLM2-135M (9 heads over 3 KV heads of 64, Q4_1: blocks of 32), Gemma 3 270M (4 over 1 of
   * 256, K-quants: blocks of 256), an 8B shape (32 over 8 of 128) */
  const feri_tp_shape smollm2 = {9, 3, 64, 576, 1536, 49152, 32, 32};
  const feri_tp_shape gemma3 = {4, 1, 256, 640, 2048, 262144, 256, 256};
  const feri_tp_shape llama8b = {32, 8, 128, 4096, 14336, 128256, 256, 256};
  for (uint32_t size = 1; size <= 9; size++) check_tiling(&smollm2, size);
  for (uint32_t size = 1; size <= 4; size++) check_tiling(&gemma3, size);
  for (uint32_t size = 1; size <= 16; size *= 2) check_tiling(&llama8b, size);
  feri_tp_plan p;
  /* 32 ranks would give each one head of 128 columns: half a block of 256 */
  CHECK_STATUS(feri_tp_plan_make(&llama8b, 0, 32, &p), FER_STATUS_UNSUPPORTED);
  /* SmolLM2 over 2: heads 0..5 and 5..9; KV head 1 on both ranks */
  CHECK_STATUS(feri_tp_plan_make(&smollm2, 1, 2, &p), FER_STATUS_OK);
  CHECK(p.q_heads.begin == 5 && p.q_heads.end == 9 && p.kv_heads.begin == 1 && p.kv_heads.end == 3);
  CHECK(p.ff.begin == 768 && p.ff.end == 1536 && p.vocab.begin == 24576);
  /* Gemma 3 over 4: one query head each, the one KV head on every rank */
  CHECK_STATUS(feri_tp_plan_make(&gemma3, 3, 4, &p), FER_STATUS_OK);
  CHECK(p.q_heads.begin == 3 && p.q_heads.end == 4 && p.kv_heads.begin == 0 && p.kv_heads.end == 1);
  /* refusals, each naming what fails; *out zeroed */
  feri_tp_shape k_quant_smollm2 = smollm2;
  k_quant_smollm2.attn_out_block = 256; /* 5 heads x 64 = 320 columns */
  p.rank = 7;
  CHECK_STATUS(feri_tp_plan_make(&k_quant_smollm2, 0, 2, &p), FER_STATUS_UNSUPPORTED);
  CHECK(p.rank == 0 && p.size == 0);
  CHECK_STATUS(feri_tp_plan_make(&smollm2, 0, 10, &p), FER_STATUS_UNSUPPORTED);
  CHECK_STATUS(feri_tp_plan_make(&smollm2, 2, 2, &p), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(feri_tp_plan_make(&smollm2, 0, 0, &p), FER_STATUS_INVALID_ARG);
  feri_tp_shape odd = smollm2;
  odd.n_ff = 1000;
  CHECK_STATUS(feri_tp_plan_make(&odd, 0, 2, &p), FER_STATUS_UNSUPPORTED);
  odd = smollm2, odd.n_head_kv = 2;
  CHECK_STATUS(feri_tp_plan_make(&odd, 0, 2, &p), FER_STATUS_INVALID_ARG);
  /* the traffic formula: 4 L d s (p - 1) for all ranks together */
  CHECK(feri_tp_bytes_per_token(30, 576, 4, 1) == 0);
  CHECK(feri_tp_bytes_per_token(30, 576, 4, 2) == 4ull * 30 * 576 * 4);
  CHECK(feri_tp_bytes_per_token(32, 4096, 2, 4) == 4ull * 32 * 4096 * 2 * 3);
}

/* ---- a column-split matmul against the whole one ---- */

static unsigned rnd(unsigned *s) {
  *s = *s * 1664525u + 1013904223u;
  return *s >> 8;
}

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); }

/* Random blocks with finite f16 scales of either sign in [2^-7, 1). */
static void fill(fer_dtype t, uint8_t *p, size_t n_blocks, int64_t bb, unsigned *s) {
  for (size_t i = 0; i < n_blocks * (size_t)bb; i++) p[i] = (uint8_t)rnd(s);
  int off[2] = {0, -1};
  if (t == FER_DTYPE_Q4_1 || t == FER_DTYPE_Q4_K) off[1] = 2;
  if (t == FER_DTYPE_Q6_K) off[0] = 208;
  for (size_t b = 0; b < n_blocks; b++)
    for (int i = 0; i < 2; i++)
      if (off[i] >= 0) {
        const unsigned r = rnd(s);
        put16(p + b * (size_t)bb + off[i], (uint16_t)((r & 0x8000) | (0x2000 + (r >> 4) % 0x1c00)));
      }
}

/* out[M, N] = x[M, K] . w^T over columns [c0, c1) (a whole number of blocks). */
static void matmul_cols(fer_threadpool *pool, const float *x, int64_t M, int64_t K, const fer_qmatrix *w, int64_t c0,
                        int64_t c1, float *out) {
  int64_t be, bb;
  fer_qblock_size(w->dtype, &be, &bb);
  const int64_t k = c1 - c0;
  float *xs = malloc((size_t)(M * k) * sizeof *xs);
  for (int64_t m = 0; m < M; m++) memcpy(xs + m * k, x + m * K + c0, (size_t)k * sizeof *xs);
  fer_qmatrix v = *w;
  v.data = (const uint8_t *)w->data + c0 / be * bb;
  v.bytes = w->bytes - (uint64_t)(c0 / be * bb);
  v.cols = k;
  fer_tensor a, o;
  fer_tensor_init_contiguous(&a, xs, FER_DTYPE_F32, 2, (int64_t[]){M, k});
  fer_tensor_init_contiguous(&o, out, FER_DTYPE_F32, 2, (int64_t[]){M, w->rows});
  size_t ws = 0;
  CHECK_STATUS(fer_matmul_quant_i8_workspace_bytes(pool, &a, &v, &o, &ws), FER_STATUS_OK);
  void *work = aligned_alloc(64, (ws + 63) / 64 * 64 + 64); /* the kernels want 64-byte alignment */
  CHECK_STATUS(fer_matmul_quant_i8(pool, &a, &v, &o, work, ws), FER_STATUS_OK);
  free(work), free(xs);
}

static double gamma_n(double n) { return n * 0x1p-24 / (1.0 - n * 0x1p-24); }

static void test_split_matmul(void) {
  fer_threadpool *pool = NULL;
  CHECK_STATUS(fer_threadpool_create(NULL, &pool), FER_STATUS_OK);
  const fer_dtype types[] = {FER_DTYPE_Q4_0, FER_DTYPE_Q4_1, FER_DTYPE_Q8_0, FER_DTYPE_Q4_K, FER_DTYPE_Q6_K};
  const int64_t M = 3, N = 48, K = 1536;
  unsigned seed = 12345;
  double worst = 0;
  size_t differ = 0, total = 0;
  for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
    int64_t be, bb;
    CHECK_STATUS(fer_qblock_size(types[t], &be, &bb), FER_STATUS_OK);
    const size_t blocks = (size_t)(K / be);
    uint8_t *wd = malloc((size_t)N * blocks * (size_t)bb);
    fill(types[t], wd, (size_t)N * blocks, bb, &seed);
    fer_qmatrix w = {.data = wd, .bytes = (uint64_t)N * blocks * (uint64_t)bb, .dtype = types[t], .rows = N, .cols = K,
                     .row_stride = (int64_t)blocks * bb};
    CHECK_STATUS(fer_qmatrix_check(&w), FER_STATUS_OK);
    float *x = malloc((size_t)(M * K) * sizeof *x), *deq = malloc((size_t)(N * K) * sizeof *deq);
    for (int64_t i = 0; i < M * K; i++) x[i] = ((float)(rnd(&seed) % 20001) - 10000.0f) * 1e-4f * (i % 7 == 0 ? 30 : 1);
    fer_tensor dt;
    fer_tensor_init_contiguous(&dt, deq, FER_DTYPE_F32, 2, (int64_t[]){N, K});
    CHECK_STATUS(fer_dequantize(pool, &w, &dt), FER_STATUS_OK);
    float *full = malloc((size_t)(M * N) * sizeof *full), *part = malloc((size_t)(M * N) * sizeof *part);
    float *tp = malloc((size_t)(M * N) * sizeof *tp);
    matmul_cols(pool, x, M, K, &w, 0, K, full);
    for (uint32_t p = 2; p <= 4; p++) {
      /* each rank's partial over its blocks; the all-reduce's order over the ranks' partials (ring
       * chunk c of the output summed from rank c): emulated here as the ring does it */
      float *parts = malloc((size_t)p * (size_t)(M * N) * sizeof *parts);
      for (uint32_t r = 0; r < p; r++) {
        const size_t b0 = r * (blocks / p) + (r < blocks % p ? r : blocks % p);
        const size_t b1 = b0 + blocks / p + (r < blocks % p ? 1 : 0);
        matmul_cols(pool, x, M, K, &w, (int64_t)b0 * be, (int64_t)b1 * be, parts + (size_t)r * (size_t)(M * N));
      }
      for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
          const uint32_t c = (uint32_t)(n * (int64_t)p / N); /* the output row's ring chunk, roughly: any fixed start */
          float acc = parts[(size_t)c * (size_t)(M * N) + (size_t)(m * N + n)];
          for (uint32_t j = 1; j < p; j++) acc = acc + parts[(size_t)((c + j) % p) * (size_t)(M * N) + (size_t)(m * N + n)];
          tp[m * N + n] = acc;
          /* the bound: both are sums of the same block terms (each computed the same way, from the
           * same 8-bit activation blocks) in two orders; any order of n terms errs by at most
           * gamma(n - 1) times the sum of their magnitudes, so |tp - full| <= (gamma(T - 1) +
           * gamma(T / p + p - 1)) * S with T the elementary terms of a row (at most 4 per block:
           * scale and offset products, two halves of a super-block's sums) and S the sum of their
           * magnitudes, at most 2 sum_k |w_k| (|x_k| + amax_b / 254) */
          double S = 0;
          for (size_t b = 0; b < blocks; b++) {
            double amax = 0;
            for (int64_t k = 0; k < be; k++) amax = fmax(amax, fabs((double)x[m * K + (int64_t)b * be + k]));
            for (int64_t k = 0; k < be; k++) {
              const int64_t kk = (int64_t)b * be + k;
              S += fabs((double)deq[n * K + kk]) * (fabs((double)x[m * K + kk]) + amax / 254.0);
            }
          }
          const double T = 4.0 * (double)blocks;
          const double bound = (gamma_n(T - 1) + gamma_n(T / p + p - 1)) * 2.0 * S;
          const double diff = fabs((double)acc - (double)full[m * N + n]);
          CHECK(diff <= bound);
          if (diff > bound)
            fprintf(stderr, "  dtype %d, %u ranks, row %lld out %lld: |tp - full| = %g > %g\n", (int)types[t], p,
                    (long long)m, (long long)n, diff, bound);
          worst = fmax(worst, diff / bound);
          differ += acc != full[m * N + n];
          total++;
        }
      free(parts);
    }
    free(wd), free(x), free(deq), free(full), free(part), free(tp);
  }
  printf("tp_plan_test: %zu of %zu split outputs differ from the whole matmul in their bits; the largest "
         "difference is %.3g of the bound\n",
         differ, total, worst);
  CHECK(differ > 0); /* the order does change the bits, so the bound is what holds them */
  fer_threadpool_free(pool);
}

int main(void) {
  test_plans();
  test_split_matmul();
  return feri_test_finish("tp_plan_test");
}
