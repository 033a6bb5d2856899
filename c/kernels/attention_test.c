/* attention_test.c: the shared exponential (claim C-ATT-004) against exp() in double over a
 * sweep of every 97th f32 bit pattern in [-110, 95] plus the special values, and the AVX2 and
 * AVX-512 tables of fer_attention's exp_shift (values and their sum) and row_max against the
 * portable level bit for bit. Then fer_attention over contexts of several 256-key chunks (the Rust
 * property tests stay under one chunk): an f64 reference within a stated bound (C-ATT-001), the
 * same bits in head-major, seq-major and token-major layouts (C-ATT-002), at both ISA levels, on
 * 1 to 3 threads, and for each query alone, in pairs and in the batch (C-ATT-003), so the split
 * decode path and the prefill path fold the same chunk states in the same order. 8-bit K and V
 * (Q8_0, C-KV-201): feri_quantize_q8_0's rounding, and fer_attention over Q8_0 K and V equal to
 * fer_attention over f32 K and V holding the dequantized values, bit for bit, in every layout, at
 * every ISA level, for decode and prefill; malformed Q8_0 tensors refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/dtype.h"
#include "kernels/attention.h"
#include "kernels/fexp.h"
#include "kernels/quant.h"
#include "testing/check.h"

static float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Distance in f32 ulps between got and the double want (at want's binade; subnormals use the
 * subnormal spacing). */
static double ulps(float got, double want) {
  if (isinf(want) || want > 3.4028234663852886e38) return isinf(got) ? 0.0 : 1e9;
  double spacing = want < 1.1754943508222875e-38 ? ldexp(1.0, -149) : ldexp(1.0, ilogb(want) - 23);
  return fabs((double)got - want) / spacing;
}

static void test_fexp_accuracy(void) {
  double worst = 0.0;
  float worst_x = 0.0f;
  long n = 0;
  for (uint64_t u = 0; u <= 0xffffffffu; u += 97) {
    const float x = bits_f32((uint32_t)u);
    if (!(x >= -110.0f && x <= 95.0f)) continue;
    const double e = ulps(feri_fexp(x), exp((double)x));
    if (e > worst) {
      worst = e;
      worst_x = x;
    }
    n++;
  }
  printf("fexp: %ld arguments, worst %.3f ulp at %a\n", n, worst, (double)worst_x);
  CHECK(n > 1000000);
  CHECK(worst <= 2.0);
  CHECK(isnan(feri_fexp(NAN)));
  CHECK(feri_fexp(INFINITY) == INFINITY && feri_fexp(-INFINITY) == 0.0f);
  CHECK(feri_fexp(0.0f) == 1.0f && feri_fexp(-0.0f) == 1.0f);
  CHECK(feri_fexp(89.0f) == INFINITY && feri_fexp(-105.0f) == 0.0f);
}

static void test_levels_agree(void) {
  fer_isa isa;
  if (feri_isa_resolve(FER_ISA_AVX2, &isa) != FER_STATUS_OK) {
    printf("SKIPPED: attention_test AVX2 exp_shift (not on this CPU)\n");
    return;
  }
  const feri_attention_ops *tables[2] = {&feri_attention_ops_avx2, &feri_attention_ops_avx512};
  const int n_tables = (fer_cpu_features() & FER_CPU_FEATURE_AVX512F) ? 2 : 1;
  if (n_tables < 2) printf("SKIPPED: attention_test AVX-512 exp_shift (not on this CPU)\n");
  /* 4099 = 256 x 16 + 3 and 4095 = 255 x 16 + 8 + 7: the 16-key loop, the 8-key step, the scalar tail */
  enum { N = 4099 };
  static const int lengths[2] = {N, N - 4};
  static float a[N], b[N];
  long mismatches = 0, calls = 0;
  for (uint64_t base = 0; base <= 0xffffffffu; base += (uint64_t)N * 211)
    for (int t = 0; t < n_tables; t++) {
      const int n = lengths[(base / ((uint64_t)N * 211) + (uint64_t)t) % 2];
      for (int i = 0; i < n; i++) a[i] = b[i] = bits_f32((uint32_t)(base + (uint64_t)i * 211));
      const float ma = feri_attention_ops_portable.row_max(a, n, -INFINITY);
      const float mb = tables[t]->row_max(b, n, -INFINITY);
      if (!(ma == mb || (isnan(ma) && isnan(mb)))) mismatches++;
      const float sa = feri_attention_ops_portable.exp_shift(a, n, 0.5f);
      const float sb = tables[t]->exp_shift(b, n, 0.5f);
      if (memcmp(&sa, &sb, 4) != 0 && !(isnan(sa) && isnan(sb))) mismatches++;
      for (int i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], 4) != 0 && !(isnan(a[i]) && isnan(b[i]))) mismatches++;
      calls++;
    }
  printf("exp_shift / row_max: %ld calls, portable and the x86 tables differ in %ld values\n", calls, mismatches);
  CHECK(calls > 1000);
  CHECK(mismatches == 0);
}

/* A reproducible value in [-1, 1). */
static float unit_value(uint64_t *state) {
  *state = *state * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((double)(*state >> 11) / (double)(1ull << 52) - 1.0);
}

enum { LAYOUT_HEAD, LAYOUT_SEQ, LAYOUT_TOKEN, N_LAYOUTS };

typedef struct att_case {
  int64_t hkv, group, nq, nk, d, q_pos0;
  int causal;
  fer_dtype dtype;
  int64_t window; /* 0: none (sliding window, C-GEM-010) */
  int poison;     /* K and V before the first query's window chunk are NaN: never read */
} att_case;

/* K and V [hkv, nk, d] of logical values kl / vl (already representable in the dtype) placed in
 * one buffer in a layout; token-major keeps 3 layers' K and V per token and uses layer 1. */
static char *place_kv(const att_case *c, int layout, const float *kl, const float *vl, fer_tensor *k,
                      fer_tensor *v) {
  const int64_t es = (int64_t)feri_dtype_size(c->dtype), h = c->hkv, n = c->nk, d = c->d;
  const int64_t layers = 3, total = layout == LAYOUT_TOKEN ? n * layers * 2 * h * d : 2 * h * n * d;
  char *buf = malloc((size_t)(total * es) + 64);
  if (buf == NULL) return NULL;
  memset(buf, 0x7f, (size_t)(total * es) + 64); /* junk (NaN patterns) between the rows */
  int64_t st[3], off_k, off_v;
  if (layout == LAYOUT_HEAD) {
    st[0] = n * d, st[1] = d, off_k = 0, off_v = h * n * d;
  } else if (layout == LAYOUT_SEQ) {
    st[0] = d, st[1] = h * d, off_k = 0, off_v = h * n * d;
  } else {
    st[0] = d, st[1] = layers * 2 * h * d, off_k = 2 * h * d, off_v = 3 * h * d;
  }
  fer_tensor *ts[2] = {k, v};
  const float *src[2] = {kl, vl};
  const int64_t offs[2] = {off_k, off_v};
  for (int t = 0; t < 2; t++) {
    memset(ts[t], 0, sizeof *ts[t]);
    ts[t]->data = buf + offs[t] * es;
    ts[t]->dtype = c->dtype;
    ts[t]->rank = 3;
    ts[t]->shape[0] = h, ts[t]->shape[1] = n, ts[t]->shape[2] = d;
    for (int i = 0; i < 3; i++) ts[t]->strides[i] = (i < 2 ? st[i] : 1) * es;
    for (int64_t a = 0; a < h; a++)
      for (int64_t j = 0; j < n; j++)
        for (int64_t e = 0; e < d; e++)
          feri_elem_store(buf + (offs[t] + a * st[0] + j * st[1] + e) * es, c->dtype, src[t][(a * n + j) * d + e]);
  }
  return buf;
}

static fer_tensor f32_tensor(float *data, int64_t a, int64_t b, int64_t c) {
  fer_tensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.dtype = FER_DTYPE_F32;
  t.rank = 3;
  t.shape[0] = a, t.shape[1] = b, t.shape[2] = c;
  t.strides[0] = b * c * 4, t.strides[1] = c * 4, t.strides[2] = 4;
  return t;
}

/* fer_attention of queries [i0, i0 + nq) of q [hq, c->nq, d] into rows [i0, i0 + nq) of out. */
static fer_status run_queries(const att_case *c, fer_threadpool *pool, const float *q, const fer_tensor *k,
                              const fer_tensor *v, int64_t i0, int64_t nq, float *out) {
  const int64_t hq = c->hkv * c->group, d = c->d;
  float *qs = malloc((size_t)(hq * nq * d) * sizeof(float)), *os = malloc((size_t)(hq * nq * d) * sizeof(float));
  fer_status st = FER_STATUS_OUT_OF_MEMORY;
  if (qs != NULL && os != NULL) {
    for (int64_t h = 0; h < hq; h++) memcpy(qs + h * nq * d, q + (h * c->nq + i0) * d, (size_t)(nq * d) * sizeof(float));
    fer_tensor qt = f32_tensor(qs, hq, nq, d), ot = f32_tensor(os, hq, nq, d);
    fer_attention_params params;
    fer_attention_params_init(&params);
    params.causal = c->causal;
    params.q_pos0 = c->q_pos0 + i0;
    params.window = (int32_t)c->window;
    st = fer_attention(pool, &qt, k, v, &params, &ot, NULL, 0);
    for (int64_t h = 0; h < hq; h++) memcpy(out + (h * c->nq + i0) * d, os + h * nq * d, (size_t)(nq * d) * sizeof(float));
  }
  free(qs);
  free(os);
  return st;
}

/* The f64 softmax(q k^T / sqrt(d)) v of one output element's row, and the bound of
 * rust_tests/tests/attention.rs: scores err by 2 scale (d/8 + 4) u sum|q||k|, the output by
 * twice (2 ds + (2n + 18) u) times sum_j p_j |v_j|. */
static void reference_row(const att_case *c, const float *q, const float *kl, const float *vl, int64_t hqi,
                          int64_t i, double *want, double *tol) {
  const int64_t d = c->d, kh = hqi / c->group;
  const int64_t n = c->causal ? (c->q_pos0 + i + 1 < c->nk ? c->q_pos0 + i + 1 : c->nk) : c->nk;
  const int64_t lo = c->window > 0 && c->q_pos0 + i - c->window + 1 > 0 ? c->q_pos0 + i - c->window + 1 : 0;
  const float *qr = q + (hqi * c->nq + i) * d;
  const double scale = 1.0 / sqrt((double)d), u = ldexp(1.0, -24);
  double mx = -INFINITY, qk = 0.0, sum = 0.0;
  double *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
  for (int64_t j = lo; j < n; j++) {
    double s = 0.0, a = 0.0;
    for (int64_t e = 0; e < d; e++) {
      s += (double)qr[e] * kl[(kh * c->nk + j) * d + e];
      a += fabs((double)qr[e] * kl[(kh * c->nk + j) * d + e]);
    }
    p[j] = s * scale;
    mx = p[j] > mx ? p[j] : mx;
    qk = a > qk ? a : qk;
  }
  for (int64_t j = lo; j < n; j++) sum += (p[j] = exp(p[j] - mx));
  const double rel = 2.0 * (2.0 * scale * ((double)d / 8.0 + 4.0) * u * qk) + (2.0 * (double)n + 18.0) * u;
  for (int64_t e = 0; e < d; e++) {
    double w = 0.0, mag = 0.0;
    for (int64_t j = lo; j < n; j++) {
      w += p[j] / sum * vl[(kh * c->nk + j) * d + e];
      mag += p[j] / sum * fabs((double)vl[(kh * c->nk + j) * d + e]);
    }
    want[e] = n > 0 ? w : 0.0;
    tol[e] = 2.0 * rel * mag + ldexp(1.0, -140);
  }
  free(p);
}

static int same_bits(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof(float)) == 0; }

static void test_long_context_case(const att_case *c, fer_threadpool *const *pools, int n_pools) {
  const int64_t hq = c->hkv * c->group, d = c->d, n_out = hq * c->nq * d, n_kv = c->hkv * c->nk * d;
  float *q = malloc((size_t)n_out * sizeof(float)), *kl = malloc((size_t)n_kv * sizeof(float));
  float *vl = malloc((size_t)n_kv * sizeof(float)), *ref = malloc((size_t)n_out * sizeof(float));
  float *got = malloc((size_t)n_out * sizeof(float));
  double *want = malloc((size_t)d * sizeof(double)), *tol = malloc((size_t)d * sizeof(double));
  CHECK(q != NULL && kl != NULL && vl != NULL && ref != NULL && got != NULL && want != NULL && tol != NULL);
  if (q == NULL || kl == NULL || vl == NULL || ref == NULL || got == NULL || want == NULL || tol == NULL) goto done;
  uint64_t seed = (uint64_t)(c->nk * 131 + c->d * 7 + c->group);
  for (int64_t i = 0; i < n_out; i++) q[i] = unit_value(&seed);
  /* K and V rounded to the dtype, so the reference sees what the kernel reads */
  for (int64_t i = 0; i < n_kv; i++) {
    char b[4];
    feri_elem_store(b, c->dtype, unit_value(&seed));
    kl[i] = feri_elem_load(b, c->dtype);
    feri_elem_store(b, c->dtype, unit_value(&seed));
    vl[i] = feri_elem_load(b, c->dtype);
  }
  /* a window's promise: keys before the chunk of the first query's window start are not read
   * (a cache may have released them), so NaN there must not reach any output */
  const int64_t lo0 = c->window > 0 && c->q_pos0 - c->window + 1 > 0 ? c->q_pos0 - c->window + 1 : 0;
  for (int64_t hh = 0; c->poison && hh < c->hkv; hh++)
    for (int64_t j = 0; j < lo0 / 256 * 256; j++)
      for (int64_t e = 0; e < c->d; e++) kl[(hh * c->nk + j) * c->d + e] = vl[(hh * c->nk + j) * c->d + e] = NAN;
  fer_tensor k, v;
  char *buf = place_kv(c, LAYOUT_HEAD, kl, vl, &k, &v);
  CHECK(buf != NULL);
  if (buf == NULL) goto done;
  CHECK_STATUS(run_queries(c, NULL, q, &k, &v, 0, c->nq, ref), FER_STATUS_OK);
  long bad = 0;
  for (int64_t h = 0; h < hq; h++)
    for (int64_t i = 0; i < c->nq; i++) {
      reference_row(c, q, kl, vl, h, i, want, tol);
      for (int64_t e = 0; e < d; e++)
        if (!(fabs((double)ref[(h * c->nq + i) * d + e] - want[e]) <= tol[e])) bad++;
    }
  CHECK(bad == 0);
  /* the same bits from every pool (ISA level, thread count) */
  for (int pi = 0; pi < n_pools; pi++) {
    memset(got, 0xff, (size_t)n_out * sizeof(float));
    CHECK_STATUS(run_queries(c, pools[pi], q, &k, &v, 0, c->nq, got), FER_STATUS_OK);
    CHECK(same_bits(got, ref, (size_t)n_out));
  }
  /* each query alone (decode), and in pairs (the split path with two queries) */
  for (int pi = 0; pi < n_pools; pi += n_pools - 1 > 0 ? n_pools - 1 : 1) {
    memset(got, 0xff, (size_t)n_out * sizeof(float));
    for (int64_t i = 0; i < c->nq; i++) CHECK_STATUS(run_queries(c, pools[pi], q, &k, &v, i, 1, got), FER_STATUS_OK);
    CHECK(same_bits(got, ref, (size_t)n_out));
    memset(got, 0xff, (size_t)n_out * sizeof(float));
    for (int64_t i = 0; i < c->nq; i += 2)
      CHECK_STATUS(run_queries(c, pools[pi], q, &k, &v, i, c->nq - i < 2 ? 1 : 2, got), FER_STATUS_OK);
    CHECK(same_bits(got, ref, (size_t)n_out));
  }
  free(buf);
  /* the other layouts */
  for (int layout = LAYOUT_SEQ; layout < N_LAYOUTS; layout++) {
    buf = place_kv(c, layout, kl, vl, &k, &v);
    CHECK(buf != NULL);
    if (buf == NULL) break;
    memset(got, 0xff, (size_t)n_out * sizeof(float));
    CHECK_STATUS(run_queries(c, pools[n_pools - 1], q, &k, &v, 0, c->nq, got), FER_STATUS_OK);
    CHECK(same_bits(got, ref, (size_t)n_out));
    memset(got, 0xff, (size_t)n_out * sizeof(float));
    CHECK_STATUS(run_queries(c, pools[n_pools - 1], q, &k, &v, c->nq - 1, 1, got + 0), FER_STATUS_OK);
    const int64_t last = c->nq - 1;
    int ok = 1;
    for (int64_t h = 0; h < hq; h++)
      ok &= same_bits(got + (h * c->nq + last) * d, ref + (h * c->nq + last) * d, (size_t)d);
    CHECK(ok);
    free(buf);
  }
  printf("attention hkv %lld x group %lld, %lld queries over %lld keys, d %lld, dtype %d, causal %d, window %lld: "
         "%ld outside the bound\n", (long long)c->hkv, (long long)c->group, (long long)c->nq,
         (long long)c->nk, (long long)d, (int)c->dtype, c->causal, (long long)c->window, bad);
done:
  free(q), free(kl), free(vl), free(ref), free(got), free(want), free(tol);
}

static void test_q8_0_kv(fer_threadpool *const *pools, int n_pools);

static void test_long_contexts(void) {
  /* pools: portable on 1 thread, then AVX2 (where the CPU has it) on 2 and 3 threads */
  fer_threadpool *pools[3] = {NULL, NULL, NULL};
  int n_pools = 0;
  const struct { uint32_t threads; fer_isa isa; } want[3] = {{1, FER_ISA_PORTABLE}, {2, FER_ISA_AVX2}, {3, FER_ISA_AVX2}};
  for (int i = 0; i < 3; i++) {
    fer_isa isa;
    if (feri_isa_resolve(want[i].isa, &isa) != FER_STATUS_OK) continue;
    fer_threadpool_options o;
    fer_threadpool_options_init(&o);
    o.n_threads = want[i].threads;
    o.isa = want[i].isa;
    if (fer_threadpool_create(&o, &pools[n_pools]) == FER_STATUS_OK) n_pools++;
  }
  CHECK(n_pools >= 1);
  if (n_pools < 3) printf("SKIPPED: attention_test AVX2 pools (not on this CPU); portable only\n");
  const att_case cases[] = {
      /* SmolLM2's grouping (9 q heads over 3), five chunks, a partial last tile */
      {3, 3, 6, 1100, 64, 1094, 1, FER_DTYPE_F16, 0, 0},
      {2, 4, 5, 700, 128, 695, 1, FER_DTYPE_BF16, 0, 0},
      /* queries in the middle of the cache, non-causal, odd head_dim (scalar paths) */
      {1, 4, 3, 530, 12, 300, 1, FER_DTYPE_F32, 0, 0},
      {2, 1, 4, 600, 8, 0, 0, FER_DTYPE_F16, 0, 0},
      /* more queries than the split path takes, crossing two query tiles */
      {1, 2, 19, 520, 16, 501, 1, FER_DTYPE_F32, 0, 0},
      /* a group of six (row blocks of four and two); rows 4 KiB apart in seq-major (the blocked
       * value loop) */
      {8, 6, 2, 300, 128, 298, 1, FER_DTYPE_F32, 0, 0},
      /* one kv head, eight chunks: decode's tasks hold runs of several chunks and share them out
       * (work_claims.h), in every layout */
      {1, 4, 2, 2100, 32, 2098, 1, FER_DTYPE_F16, 0, 0},
      /* sliding windows (C-GEM-010): Gemma 3's shape (4 q heads over 1, d 256) with its window of
       * 512 in decode and prefill tiles crossing chunk starts, K and V before the first query's
       * window chunk NaN; a window of 1 (each query sees itself); windows that do not bite */
      {1, 4, 3, 1300, 256, 1297, 1, FER_DTYPE_F32, 512, 1},
      {1, 4, 40, 1300, 32, 1260, 1, FER_DTYPE_F16, 512, 1},
      {2, 2, 20, 700, 16, 680, 1, FER_DTYPE_BF16, 300, 1},
      {1, 2, 5, 300, 8, 295, 1, FER_DTYPE_F32, 1, 1},
      {1, 2, 17, 100, 8, 0, 1, FER_DTYPE_F32, 512, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_long_context_case(&cases[i], pools, n_pools);
  test_q8_0_kv(pools, n_pools);
  for (int i = 0; i < n_pools; i++) fer_threadpool_free(pools[i]);
}


/* The three tables' scores and accumulate, called directly, give the same bits: every dtype, 1 to
 * 9 query rows (blocks of four and the rest), head dims that take the vector loops and those that
 * fall back (not a multiple of 8 for scores, of 16 for the AVX-512 accumulate), key counts around
 * the blocks of eight and of ATT_PF_ROWS, packed, padded, odd and 4 KiB-multiple row strides, a
 * strided head dim (the reference path), with and without the rescale factors and prefetch rows.
 * The AVX2-level pool of fer_attention takes the AVX-512 table where the CPU has it, so this is
 * where the plain AVX2 table keeps its check (C-ATT-003). */
static void test_tables_agree(void) {
  fer_isa isa;
  if (feri_isa_resolve(FER_ISA_AVX2, &isa) != FER_STATUS_OK) {
    printf("SKIPPED: attention_test AVX2 tables (not on this CPU)\n");
    return;
  }
  const feri_attention_ops *tables[3] = {&feri_attention_ops_portable, &feri_attention_ops_avx2, &feri_attention_ops_avx512};
  const int n_tables = (fer_cpu_features() & FER_CPU_FEATURE_AVX512F) ? 3 : 2;
  if (n_tables < 3) printf("SKIPPED: attention_test AVX-512 table (not on this CPU)\n");
  static const fer_dtype dtypes[3] = {FER_DTYPE_F32, FER_DTYPE_F16, FER_DTYPE_BF16};
  static const int64_t dims[] = {8, 12, 16, 40, 64, 128, 136};
  static const int64_t keys[] = {1, 7, 8, 9, 33, 64, 67};
  static const int64_t rows_of[] = {1, 2, 3, 4, 5, 8, 9};
  enum { MAX_ROWS = 9, MAX_D = 136, MAX_N = 67, PAD_4K = 4096 };
  const int64_t n_dims = (int64_t)(sizeof dims / sizeof dims[0]);
  /* K/V rows up to 4 KiB + f32 row apart, and the prefetch rows' buffer */
  const size_t kv_bytes = (size_t)MAX_N * (PAD_4K + MAX_D * 8) + 64;
  char *kv = malloc(kv_bytes), *pfbuf = malloc(kv_bytes);
  float *q = malloc(sizeof(float) * MAX_ROWS * MAX_D), *p = malloc(sizeof(float) * MAX_ROWS * MAX_N);
  float *out[3], *corr = malloc(sizeof(float) * MAX_ROWS);
  const size_t out_floats = (size_t)MAX_ROWS * (MAX_D + MAX_N) + 8;
  for (int t = 0; t < 3; t++) out[t] = malloc(sizeof(float) * out_floats);
  CHECK(kv != NULL && pfbuf != NULL && q != NULL && p != NULL && corr != NULL && out[0] != NULL &&
        out[1] != NULL && out[2] != NULL);
  if (kv == NULL || pfbuf == NULL || q == NULL || p == NULL || corr == NULL || out[0] == NULL || out[1] == NULL ||
      out[2] == NULL) {
    free(kv), free(pfbuf), free(q), free(p), free(corr), free(out[0]), free(out[1]), free(out[2]);
    return;
  }
  memset(pfbuf, 0, kv_bytes);
  uint64_t state = 7;
  long calls = 0, mismatches = 0;
  for (int di = 0; di < 3; di++) {
    const fer_dtype dt = dtypes[di];
    const int64_t es = (int64_t)feri_dtype_size(dt);
    for (size_t i = 0; i < kv_bytes / (size_t)es; i++) feri_elem_store(kv + i * (size_t)es, dt, unit_value(&state));
    for (int64_t dix = 0; dix < n_dims; dix++) {
      const int64_t d = dims[dix];
      for (int ki = 0; ki < 7; ki++) {
        const int64_t n = keys[ki], rows = rows_of[(ki + dix) % 7];
        /* strides: packed, padded by one element, 4 KiB apart, and the head dim strided */
        const int64_t row_strides[4] = {d * es, d * es + es, PAD_4K, 2 * d * es};
        for (int si = 0; si < 4; si++) {
          const feri_kv_rows kr = {kv + 8, dt, row_strides[si], si == 3 ? 2 * es : es, es};
          const feri_att_pf pf = {pfbuf, 0, INT64_MAX, d * es, 0};
          const int with_pf = (si + ki) % 2, with_corr = (si + dix) % 2;
          for (int64_t i = 0; i < rows * d; i++) q[i] = unit_value(&state);
          for (int64_t i = 0; i < rows * n; i++) p[i] = unit_value(&state) + 1.0f;
          for (int64_t i = 0; i < rows; i++) corr[i] = 0.5f * unit_value(&state) + 0.75f;
          float o0[MAX_ROWS * MAX_D];
          for (int64_t i = 0; i < rows * d; i++) o0[i] = unit_value(&state);
          for (int t = 0; t < n_tables; t++) {
            float *s = out[t], *o = out[t] + rows * n;
            memcpy(o, o0, sizeof(float) * (size_t)(rows * d));
            tables[t]->scores(q, d, rows, d, &kr, n, 0.125f, s, n, with_pf ? &pf : NULL);
            tables[t]->accumulate(o, d, rows, d, p, n, &kr, n, with_corr ? corr : NULL, with_pf ? &pf : NULL);
            if (t > 0 && !same_bits(out[0], out[t], (size_t)(rows * (n + d)))) {
              if (mismatches++ < 5)
                printf("table %d differs: dtype %s d %lld n %lld rows %lld stride %lld\n", t, feri_dtype_name(dt),
                       (long long)d, (long long)n, (long long)rows, (long long)row_strides[si]);
            }
            calls++;
          }
        }
      }
    }
  }
  printf("attention tables: %ld calls, %ld differ from the portable level\n", calls, mismatches);
  CHECK(calls > 500);
  CHECK(mismatches == 0);
  free(kv), free(pfbuf), free(q), free(p), free(corr), free(out[0]), free(out[1]), free(out[2]);
}


/* feri_quantize_q8_0: every value within half a step of x (d = f16(amax / 127), the codes in
 * [-127, 127]); zeros, a non-finite block and an out-of-range block as documented. */
static void test_q8_0_rounding(void) {
  enum { N = 32 * 64 };
  static float x[N];
  static uint8_t blk[N / 32 * 34];
  uint64_t state = 11;
  for (int i = 0; i < N; i++) x[i] = unit_value(&state) * (float)(1 << (i / 32 % 12)) * 0.01f;
  for (int i = 0; i < 32; i++) x[i] = 0.0f; /* block 0: all zero */
  feri_quantize_q8_0(x, N, blk);
  long bad = 0;
  for (int b = 0; b < N / 32; b++) {
    uint16_t h;
    memcpy(&h, blk + b * 34, 2);
    const float d = feri_f16_to_f32(h);
    float amax = 0.0f;
    for (int i = 0; i < 32; i++) amax = fabsf(x[b * 32 + i]) > amax ? fabsf(x[b * 32 + i]) : amax;
    if (h != feri_f32_to_f16(amax / 127.0f)) bad++;
    for (int i = 0; i < 32; i++) {
      const int8_t c = (int8_t)blk[b * 34 + 2 + i];
      const double err = fabs((double)c * d - x[b * 32 + i]);
      if (c == -128 || (d > 0 && err > 0.5 * d * (1 + 1e-6) && abs(c) != 127) || (d == 0 && c != 0)) bad++;
    }
  }
  float odd[64];
  uint8_t ob[68];
  for (int i = 0; i < 64; i++) odd[i] = 1.0f;
  odd[5] = NAN;
  odd[32] = 1e9f; /* d = 7.9e6 > 65504: saturates */
  feri_quantize_q8_0(odd, 64, ob);
  uint16_t h0, h1;
  memcpy(&h0, ob, 2);
  memcpy(&h1, ob + 34, 2);
  printf("q8_0 rounding: %d blocks, %ld values off; NaN block d %g, huge block d %g code %d\n", N / 32, bad,
         feri_f16_to_f32(h0), feri_f16_to_f32(h1), (int8_t)ob[36]);
  CHECK(bad == 0);
  CHECK(isnan(feri_f16_to_f32(h0)) && ob[2] == 0);
  CHECK(feri_f16_to_f32(h1) == 65504.0f && (int8_t)ob[36] == 127);
}

/* K and V [hkv, nk, d] rounded to Q8_0 in a layout (as place_kv's), with the f32 tensors of the
 * values the blocks hold, packed head-major; the caller frees *q8 and *f32. */
static void place_q8_0(const att_case *c, int layout, uint64_t *state, fer_tensor *k, fer_tensor *v, char **q8,
                       float **f32, fer_tensor *kf, fer_tensor *vf) {
  const int64_t h = c->hkv, n = c->nk, d = c->d, row = d / 32 * 34, layers = 3;
  const int64_t rows = layout == LAYOUT_TOKEN ? n * layers * 2 * h : 2 * h * n;
  *q8 = malloc((size_t)(rows * row));
  *f32 = malloc((size_t)(2 * h * n * d) * sizeof(float));
  float *x = malloc((size_t)d * sizeof(float));
  if (*q8 == NULL || *f32 == NULL || x == NULL) {
    free(x);
    return;
  }
  memset(*q8, 0x7f, (size_t)(rows * row));
  int64_t st0, st1, off_k, off_v;
  if (layout == LAYOUT_HEAD) {
    st0 = n * row, st1 = row, off_k = 0, off_v = h * n * row;
  } else if (layout == LAYOUT_SEQ) {
    st0 = row, st1 = h * row, off_k = 0, off_v = h * n * row;
  } else {
    st0 = row, st1 = layers * 2 * h * row, off_k = 2 * h * row, off_v = 3 * h * row;
  }
  fer_tensor *ts[2] = {k, v}, *fs[2] = {kf, vf};
  const int64_t offs[2] = {off_k, off_v};
  for (int t = 0; t < 2; t++) {
    memset(ts[t], 0, sizeof *ts[t]);
    ts[t]->data = *q8 + offs[t];
    ts[t]->dtype = FER_DTYPE_Q8_0;
    ts[t]->rank = 3;
    ts[t]->shape[0] = h, ts[t]->shape[1] = n, ts[t]->shape[2] = d / 32;
    ts[t]->strides[0] = st0, ts[t]->strides[1] = st1, ts[t]->strides[2] = 34;
    float *deq = *f32 + t * h * n * d;
    *fs[t] = f32_tensor(deq, h, n, d);
    for (int64_t a = 0; a < h; a++)
      for (int64_t j = 0; j < n; j++) {
        /* rows of mixed magnitude: a few large elements, as real K rows have */
        for (int64_t e = 0; e < d; e++) x[e] = unit_value(state) * (e % 17 == 3 ? 8.0f : 1.0f);
        uint8_t *blocks = (uint8_t *)*q8 + offs[t] + a * st0 + j * st1;
        feri_quantize_q8_0(x, d, blocks);
        for (int64_t b = 0; b < d / 32; b++) {
          uint16_t hh;
          memcpy(&hh, blocks + b * 34, 2);
          for (int i = 0; i < 32; i++)
            deq[(a * n + j) * d + b * 32 + i] = (float)(int8_t)blocks[b * 34 + 2 + i] * feri_f16_to_f32(hh);
        }
      }
  }
  free(x);
}

/* fer_attention over Q8_0 K and V gives the bits of fer_attention over the dequantized f32
 * values: every layout, pools at each ISA level, decode (one query) and prefill (causal, every
 * query), GQA groups, head dims 32 to 256. */
static void test_q8_0_kv(fer_threadpool *const *pools, int n_pools) {
  static const att_case cases[] = {
      {2, 3, 1, 300, 64, 299, 1, FER_DTYPE_Q8_0, 0, 0},  {1, 4, 40, 40, 256, 0, 1, FER_DTYPE_Q8_0, 0, 0},
      {3, 1, 1, 67, 32, 66, 1, FER_DTYPE_Q8_0, 0, 0},    {2, 2, 70, 70, 128, 0, 1, FER_DTYPE_Q8_0, 0, 0},
      {1, 2, 1, 520, 96, 519, 1, FER_DTYPE_Q8_0, 0, 0},
  };
  uint64_t state = 5;
  long runs = 0, differ = 0;
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    const att_case *c = &cases[ci];
    const int64_t hq = c->hkv * c->group, nout = hq * c->nq * c->d;
    float *q = malloc((size_t)nout * sizeof(float)), *want = malloc((size_t)nout * sizeof(float)),
          *got = malloc((size_t)nout * sizeof(float));
    CHECK(q && want && got);
    for (int64_t i = 0; q && i < nout; i++) q[i] = unit_value(&state);
    for (int layout = 0; q && want && got && layout < N_LAYOUTS; layout++) {
      fer_tensor k, v, kf, vf;
      char *q8 = NULL;
      float *f32 = NULL;
      place_q8_0(c, layout, &state, &k, &v, &q8, &f32, &kf, &vf);
      CHECK(q8 != NULL && f32 != NULL);
      for (int pi = 0; q8 && f32 && pi < n_pools; pi++) {
        CHECK_STATUS(run_queries(c, pools[pi], q, &kf, &vf, 0, c->nq, want), FER_STATUS_OK);
        CHECK_STATUS(run_queries(c, pools[pi], q, &k, &v, 0, c->nq, got), FER_STATUS_OK);
        runs++;
        if (!same_bits(want, got, (size_t)nout) && differ++ < 5)
          printf("q8_0 KV differs: case %zu layout %d pool %d\n", ci, layout, pi);
      }
      free(q8);
      free(f32);
    }
    free(q), free(want), free(got);
  }
  printf("q8_0 KV: %ld runs, %ld differ from f32 K and V holding the same values\n", runs, differ);
  CHECK(runs >= 15);
  CHECK(differ == 0);

  /* malformed: strides[2] not a block, head dims that disagree, a Q8_0 query */
  const att_case c = {1, 1, 1, 4, 64, 3, 1, FER_DTYPE_Q8_0, 0, 0};
  fer_tensor k, v, kf, vf;
  char *q8 = NULL;
  float *f32 = NULL, qd[64] = {0}, od[64];
  place_q8_0(&c, LAYOUT_HEAD, &state, &k, &v, &q8, &f32, &kf, &vf);
  fer_tensor qt = f32_tensor(qd, 1, 1, 64), ot = f32_tensor(od, 1, 1, 64);
  fer_attention_params prm;
  fer_attention_params_init(&prm);
  prm.q_pos0 = 3;
  fer_tensor bad = k;
  bad.strides[2] = 32;
  CHECK(fer_attention(NULL, &qt, &bad, &v, &prm, &ot, NULL, 0) == FER_STATUS_INVALID_ARG);
  bad = k;
  bad.shape[2] = 1; /* 32 elements against q's 64 */
  CHECK(fer_attention(NULL, &qt, &bad, &v, &prm, &ot, NULL, 0) == FER_STATUS_SHAPE_MISMATCH);
  fer_tensor qq = k;
  qq.shape[1] = 1;
  CHECK(fer_attention(NULL, &qq, &k, &v, &prm, &ot, NULL, 0) == FER_STATUS_UNSUPPORTED);
  CHECK(fer_attention(NULL, &qt, &k, &v, &prm, &ot, NULL, 0) == FER_STATUS_OK);
  free(q8);
  free(f32);
}

/* A context too long for the decode split's 32-bit chunk runs (2^40 keys and more, here a
 * broadcast K and V of one row) is refused with a status, before any work. */
static void test_context_too_long(void) {
  float kv[8] = {0}, q[8] = {0}, o[8];
  const int64_t nk = ((int64_t)1 << 40) + 1;
  fer_tensor k, v, qt, ot;
  memset(&k, 0, sizeof k);
  k.data = kv, k.dtype = FER_DTYPE_F32, k.rank = 3;
  k.shape[0] = 1, k.shape[1] = nk, k.shape[2] = 8;
  k.strides[0] = 0, k.strides[1] = 0, k.strides[2] = 4;
  v = k;
  memset(&qt, 0, sizeof qt);
  qt.data = q, qt.dtype = FER_DTYPE_F32, qt.rank = 3;
  qt.shape[0] = 1, qt.shape[1] = 1, qt.shape[2] = 8;
  qt.strides[0] = 32, qt.strides[1] = 32, qt.strides[2] = 4;
  ot = qt;
  ot.data = o;
  fer_attention_params prm;
  CHECK(fer_attention_params_init(&prm) == FER_STATUS_OK);
  prm.causal = 0;
  size_t need = 1;
  const fer_status st = fer_attention_workspace_bytes(NULL, &qt, &k, &v, &prm, &ot, &need);
  char msg[256] = "";
  size_t len = 0;
  fer_last_error_message(msg, sizeof msg, &len);
  printf("a context of 2^40 + 1 keys: %s (%s)\n", fer_status_str(st), msg);
  CHECK(st == FER_STATUS_INVALID_ARG && need == 0);
  CHECK(fer_attention(NULL, &qt, &k, &v, &prm, &ot, NULL, 0) == FER_STATUS_INVALID_ARG);
}

int main(void) {
  test_fexp_accuracy();
  test_levels_agree();
  test_tables_agree();
  test_context_too_long();
  test_q8_0_rounding();
  test_long_contexts();
  return feri_test_finish("attention_test");
}
