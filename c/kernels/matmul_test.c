/* matmul_test.c: fer_matmul against a direct fmaf chain in C, both layouts, f32, f16 and bf16 B,
 * every ISA level (portable, AVX2, AVX512) and a few thread counts (so the sanitizer build walks the
 * packed, in-place and GEMV paths, including the GEMV's paired row groups and their lag), the
 * AVX-512 tile's edges and views, block-quantized B at every level, plus a hand-computed product.
 * The property tests in rust_tests/tests/matmul.rs cover the rest. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/tensor.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/quant_i8.h"
#include "kernels/rowops.h"
#include "ferrite.h"
#include "testing/check.h"

static fer_tensor mat(void *data, fer_dtype dtype, int64_t rows, int64_t cols) {
  return feri_tensor_2d(data, dtype, rows, cols);
}

static void test_known_product(void) {
  float a[6] = {1, 2, 3, 4, 5, 6};       /* [2, 3] */
  float b_kn[6] = {7, 8, 9, 10, 11, 12}; /* [3, 2] */
  float b_nk[6] = {7, 9, 11, 8, 10, 12}; /* the same B as [2, 3] */
  float out[4];
  fer_tensor ta = mat(a, FER_DTYPE_F32, 2, 3), to = mat(out, FER_DTYPE_F32, 2, 2);
  fer_tensor tb = mat(b_kn, FER_DTYPE_F32, 3, 2);
  CHECK_STATUS(fer_matmul(NULL, &ta, &tb, FER_MATMUL_B_KN, &to, NULL, 0), FER_STATUS_OK);
  CHECK(out[0] == 58 && out[1] == 64 && out[2] == 139 && out[3] == 154);
  memset(out, 0, sizeof out);
  tb = mat(b_nk, FER_DTYPE_F32, 2, 3);
  CHECK_STATUS(fer_matmul(NULL, &ta, &tb, FER_MATMUL_B_NK, &to, NULL, 0), FER_STATUS_OK);
  CHECK(out[0] == 58 && out[1] == 64 && out[2] == 139 && out[3] == 154);
  CHECK_STATUS(fer_matmul(NULL, &ta, &tb, 7, &to, NULL, 0), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(fer_matmul(NULL, &ta, &tb, FER_MATMUL_B_KN, &to, NULL, 0), FER_STATUS_SHAPE_MISMATCH);
}

/* Values that make every rounding visible: x / 64 for x in [-200, 200]. */
static float value(unsigned *state) {
  *state = *state * 1664525u + 1013904223u;
  return (float)((int)(*state >> 16) % 401 - 200) / 64.0f * (1.0f + (float)(*state & 0xff) / 257.0f);
}

/* A pool at an ISA level, or NULL with a SKIPPED line when the CPU lacks it; a level the CPU lacks
 * must be refused with UNSUPPORTED (never run slower or portable in its place). */
static fer_threadpool *pool_at(fer_isa isa, uint32_t threads) {
  fer_threadpool_options o;
  fer_threadpool_options_init(&o);
  o.n_threads = threads;
  o.isa = isa;
  fer_threadpool *pool = NULL;
  const fer_status st = fer_threadpool_create(&o, &pool);
  if (st != FER_STATUS_OK) {
    CHECK(st == FER_STATUS_UNSUPPORTED && isa != FER_ISA_PORTABLE);
    static int said[4];
    if (isa >= 0 && isa < 4 && !said[isa]++)
      printf("SKIPPED: matmul_test at ISA level %d (not on this CPU: UNSUPPORTED)\n", (int)isa);
    return NULL;
  }
  return pool;
}

static const fer_isa LEVELS[3] = {FER_ISA_PORTABLE, FER_ISA_AVX2, FER_ISA_AVX512};

/* One product with every operand a view: A [m, k] of adtype with rows a_pad elements apart
 * beyond k, B of bdtype ([k, n] or [n, k]) with rows b_pad elements apart beyond their length
 * and, for [k, n], columns b_col elements apart, out of odtype with rows o_pad beyond n. The
 * expected value of each element is the direct chain over the stored values, rounded once. */
typedef struct mm_case {
  int64_t m, k, n;
  int nk;
  fer_dtype adtype, bdtype, odtype;
  int64_t a_pad, b_pad, b_col, o_pad;
} mm_case;

static void run_case(const mm_case *c) {
  const int64_t m = c->m, k = c->k, n = c->n, b_col = c->b_col ? c->b_col : 1;
  const size_t aes = feri_dtype_size(c->adtype), bes = feri_dtype_size(c->bdtype), oes = feri_dtype_size(c->odtype);
  const int64_t a_ld = k + c->a_pad, o_ld = n + c->o_pad;
  const int64_t b_rows = c->nk ? n : k, b_len = c->nk ? k : (n - 1) * b_col + 1, b_ld = b_len + c->b_pad;
  char *a = malloc(aes * (size_t)(m * a_ld));
  char *b = malloc(bes * (size_t)(b_rows * b_ld));
  char *want = malloc(oes * (size_t)(m * o_ld)), *got = malloc(oes * (size_t)(m * o_ld));
  CHECK(a && b && want && got);
  if (!(a && b && want && got)) return;
  unsigned s = (unsigned)(m * 131 + k * 7 + n + c->nk * 3 + (int)c->bdtype * 17);
  for (int64_t i = 0; i < m * a_ld; i++) feri_elem_store(a + (size_t)i * aes, c->adtype, value(&s));
  for (int64_t i = 0; i < b_rows * b_ld; i++) feri_elem_store(b + (size_t)i * bes, c->bdtype, value(&s));
  memset(want, 0x5a, oes * (size_t)(m * o_ld));
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      float acc = 0.0f;
      for (int64_t t = 0; t < k; t++) {
        const int64_t at = c->nk ? j * b_ld + t : t * b_ld + j * b_col;
        acc = fmaf(feri_elem_load(a + (size_t)(i * a_ld + t) * aes, c->adtype),
                   feri_elem_load(b + (size_t)at * bes, c->bdtype), acc);
      }
      feri_elem_store(want + (size_t)(i * o_ld + j) * oes, c->odtype, acc);
    }
  fer_tensor ta = mat(a, c->adtype, m, k), to = mat(got, c->odtype, m, n);
  ta.strides[0] = a_ld * (int64_t)aes;
  to.strides[0] = o_ld * (int64_t)oes;
  fer_tensor tb = c->nk ? mat(b, c->bdtype, n, k) : mat(b, c->bdtype, k, n);
  tb.strides[0] = b_ld * (int64_t)bes;
  if (!c->nk) tb.strides[1] = b_col * (int64_t)bes;
  const uint32_t threads[3] = {1, 2, 3};
  for (int l = 0; l < 3; l++)
    for (int t = 0; t < 3; t++) {
      fer_threadpool *pool = pool_at(LEVELS[l], threads[t]);
      if (pool == NULL) continue;
      memset(got, 0x5a, oes * (size_t)(m * o_ld)); /* the padding must stay as it was */
      CHECK_STATUS(fer_matmul(pool, &ta, &tb, c->nk ? FER_MATMUL_B_NK : FER_MATMUL_B_KN, &to, NULL, 0),
                   FER_STATUS_OK);
      const int same = memcmp(got, want, oes * (size_t)(m * o_ld)) == 0;
      if (!same)
        fprintf(stderr, "  %lldx%lldx%lld %s a %s b %s out %s pads %lld/%lld/%lld/%lld, ISA %d, %u threads\n",
                (long long)m, (long long)k, (long long)n, c->nk ? "[N, K]" : "[K, N]",
                feri_dtype_name(c->adtype), feri_dtype_name(c->bdtype), feri_dtype_name(c->odtype),
                (long long)c->a_pad, (long long)c->b_pad, (long long)c->b_col, (long long)c->o_pad,
                (int)LEVELS[l], threads[t]);
      CHECK(same);
      fer_threadpool_free(pool);
    }
  free(a);
  free(b);
  free(want);
  free(got);
}

/* B is stored in bdtype (values rounded into it); the chain reads the stored values back. */
static void test_against_chain(int64_t m, int64_t k, int64_t n, int nk, fer_dtype bdtype) {
  const mm_case c = {m, k, n, nk, FER_DTYPE_F32, bdtype, FER_DTYPE_F32, 0, 0, 0, 0};
  run_case(&c);
}

/* Block-quantized B (Q8_0 and Q4_1 rows, fer_matmul_quant) through every level's packer (the
 * AVX-512 level interleaves the shared 16-column packer's panels into its 32-column ones) and
 * GEMV, against the chain over fer_dequantize's values. C-MM-102 */
static void test_quant_levels(int64_t m, int64_t k, int64_t n, fer_dtype qt) {
  const int64_t bb = qt == FER_DTYPE_Q8_0 ? 34 : 20, nb = k / 32, stride = nb * bb + 3;
  uint8_t *w = malloc((size_t)(n * stride));
  float *a = malloc(sizeof(float) * (size_t)(m * k)), *deq = malloc(sizeof(float) * (size_t)(n * k));
  float *want = malloc(sizeof(float) * (size_t)(m * n)), *got = malloc(sizeof(float) * (size_t)(m * n));
  CHECK(w && a && deq && want && got);
  if (!(w && a && deq && want && got)) return;
  unsigned s = (unsigned)(k * 3 + n);
  for (int64_t i = 0; i < n * stride; i++) {
    s = s * 1664525u + 1013904223u;
    w[i] = (uint8_t)(s >> 24);
  }
  for (int64_t r = 0; r < n; r++)
    for (int64_t blk = 0; blk < nb; blk++) { /* finite scales: f16 0.01-ish (and a minimum) */
      uint8_t *p = w + r * stride + blk * bb;
      p[0] = (uint8_t)(s >> 8), p[1] = 0x20 + (uint8_t)(r % 7);
      if (qt == FER_DTYPE_Q4_1) p[2] = (uint8_t)blk, p[3] = 0xa1;
    }
  for (int64_t i = 0; i < m * k; i++) a[i] = value(&s);
  const fer_qmatrix q = {w, (uint64_t)(n * stride), qt, 0, n, k, stride};
  fer_tensor td = mat(deq, FER_DTYPE_F32, n, k);
  CHECK_STATUS(fer_dequantize(NULL, &q, &td), FER_STATUS_OK);
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      float acc = 0.0f;
      for (int64_t t = 0; t < k; t++) acc = fmaf(a[i * k + t], deq[j * k + t], acc);
      want[i * n + j] = acc;
    }
  fer_tensor ta = mat(a, FER_DTYPE_F32, m, k), to = mat(got, FER_DTYPE_F32, m, n);
  for (int l = 0; l < 3; l++)
    for (uint32_t t = 1; t <= 2; t++) {
      fer_threadpool *pool = pool_at(LEVELS[l], t);
      if (pool == NULL) continue;
      memset(got, 0xff, sizeof(float) * (size_t)(m * n));
      CHECK_STATUS(fer_matmul_quant(pool, &ta, &q, &to, NULL, 0), FER_STATUS_OK);
      const int same = memcmp(got, want, sizeof(float) * (size_t)(m * n)) == 0;
      if (!same)
        fprintf(stderr, "  quant %s %lldx%lldx%lld, ISA %d, %u threads\n", feri_dtype_name(qt), (long long)m,
                (long long)k, (long long)n, (int)LEVELS[l], t);
      CHECK(same);
      fer_threadpool_free(pool);
    }
  free(w);
  free(a);
  free(deq);
  free(want);
  free(got);
}

/* The AVX-512 level's tile (12 x 32, panels of 32 columns, MC 96, KC 256) at its edges: odd M
 * (row panels of 1-12 rows, two row blocks), N tails of 1-31 columns past a panel, K of 1, of a
 * few steps and across KC blocks, every B dtype and layout, threads 1-3, and views (padded rows,
 * strided B columns, f16 A widened, bf16 out), all against the chain, so all three levels give
 * the same bits. EVIDENCE: C-MM-101, C-MM-102 */
static void test_levels_edges(void) {
  const fer_dtype dts[3] = {FER_DTYPE_F32, FER_DTYPE_F16, FER_DTYPE_BF16};
  const int64_t shapes[][3] = {{2, 1, 1},   {3, 7, 33},   {13, 257, 47}, {25, 64, 95},
                               {12, 9, 32}, {11, 31, 65}, {97, 300, 70}, {2, 513, 129}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    for (int d = 0; d < 3; d++)
      for (int nk = 0; nk < 2; nk++) {
        const mm_case c = {shapes[i][0], shapes[i][1], shapes[i][2], nk, FER_DTYPE_F32, dts[d], FER_DTYPE_F32, 0, 0, 0, 0};
        run_case(&c);
      }
  const mm_case views[] = {
      {29, 70, 77, 0, FER_DTYPE_F32, FER_DTYPE_F32, FER_DTYPE_F32, 3, 5, 0, 2},   /* padded rows, A in place */
      {29, 70, 77, 1, FER_DTYPE_F32, FER_DTYPE_F16, FER_DTYPE_F32, 1, 7, 0, 0},   /* [N, K] rows padded */
      {14, 33, 40, 0, FER_DTYPE_F32, FER_DTYPE_F32, FER_DTYPE_F32, 0, 0, 2, 0},   /* strided B columns */
      {14, 33, 40, 0, FER_DTYPE_BF16, FER_DTYPE_BF16, FER_DTYPE_F32, 0, 3, 3, 0}, /* and a bf16 A */
      {17, 40, 66, 1, FER_DTYPE_F16, FER_DTYPE_F32, FER_DTYPE_BF16, 2, 0, 0, 1},  /* f16 A, bf16 out */
      {1, 77, 45, 0, FER_DTYPE_F16, FER_DTYPE_F16, FER_DTYPE_F16, 0, 1, 0, 0},    /* GEMV: widened x */
      {1, 77, 45, 0, FER_DTYPE_F32, FER_DTYPE_BF16, FER_DTYPE_F32, 0, 0, 2, 0},   /* GEMV: strided */
      {1, 1, 17, 0, FER_DTYPE_F32, FER_DTYPE_F32, FER_DTYPE_F32, 0, 0, 0, 0},     /* GEMV: masked tail */
  };
  for (size_t i = 0; i < sizeof views / sizeof views[0]; i++) run_case(&views[i]);
  test_quant_levels(13, 96, 77, FER_DTYPE_Q8_0);
  test_quant_levels(2, 288, 40, FER_DTYPE_Q4_1);
  test_quant_levels(1, 64, 50, FER_DTYPE_Q8_0);
}

/* At the AVX512 level every kernel family of c/kernels runs its best existing table, never the
 * portable one: matmul its own, attention its AVX-512F forms, rowops the AVX2 table, quant_i8 the
 * VNNI table where the CPU has VNNI (else AVX2). EVIDENCE: C-MM-101 */
static void test_dispatch(void) {
#if defined(__x86_64__)
  CHECK(feri_matmul_ops_for(FER_ISA_AVX512) == &feri_matmul_ops_avx512);
  CHECK(feri_matmul_ops_for(FER_ISA_AVX2) == &feri_matmul_ops_avx2);
  CHECK(feri_attention_ops_for(FER_ISA_AVX512) == &feri_attention_ops_avx512);
  CHECK(feri_rowops_for(FER_ISA_AVX512) == &feri_rowops_avx2);
  const uint64_t vnni = FER_CPU_FEATURE_AVX512VL | FER_CPU_FEATURE_AVX512VNNI;
  CHECK(feri_qi8_ops_for(FER_ISA_AVX512) ==
        ((fer_cpu_features() & vnni) == vnni ? &feri_qi8_ops_avx512vnni : &feri_qi8_ops_avx2));
  const feri_matmul_ops *t = feri_matmul_ops_for(FER_ISA_AVX512);
  CHECK(t->mr == 12 && t->nr == 32 && t->kc % 256 == 0); /* KC a multiple of every block size */
#endif
}

int main(void) {
  test_dispatch();
  test_known_product();
  const fer_dtype dtypes[3] = {FER_DTYPE_F32, FER_DTYPE_F16, FER_DTYPE_BF16};
  for (int d = 0; d < 3; d++)
    for (int nk = 0; nk < 2; nk++) {
      const fer_dtype bt = dtypes[d];
      test_against_chain(1, 300, 77, nk, bt);   /* GEMV: row pairs, a lone group, vector tails */
      test_against_chain(1, 4100, 40, nk, bt);  /* GEMV: the full lag between paired groups */
      test_against_chain(1, 5, 33, nk, bt);     /* GEMV: K shorter than a tile */
      test_against_chain(1, 12, 9003, nk, bt);  /* GEMV: [K, N] bands wider than 512 columns */
      test_against_chain(32, 130, 70, nk, bt);  /* in-place A, even row panels */
      test_against_chain(100, 270, 300, nk, bt); /* two row blocks, two K blocks, several column tasks */
    }
  test_levels_edges();
  return feri_test_finish("matmul_test");
}
