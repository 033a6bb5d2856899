/* cuda_ops_test.c: every kernel of cuda_ops.h against the CPU kernel it mirrors, on random inputs
 * with the edge values each contract names (zeros, infinities, NaN, ties, blocks counting as zero).
 * Bit for bit where the CPU defines the order (NaN matches NaN: payloads are the hardware's); RoPE
 * within 1 ulp of its cosine and sine. The argument checks run everywhere; the kernels need a GPU
 * and print SKIPPED without one.
 * EVIDENCE: C-CUDA-002 C-CUDA-003 C-CUDA-004 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_ops.h"
#include "testing/check.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next_u32(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (uint32_t)(rng >> 11);
}
static float uniform(float lo, float hi) { return lo + (hi - lo) * (float)(next_u32() & 0xffffff) / 16777216.0f; }

/* Equal bits, or both NaN. */
static bool same(float a, float b) {
  uint32_t x, y;
  memcpy(&x, &a, 4), memcpy(&y, &b, 4);
  return x == y || (a != a && b != b);
}

static size_t mismatches(const float *a, const float *b, size_t n, const char *what) {
  size_t bad = 0;
  for (size_t i = 0; i < n; i++)
    if (!same(a[i], b[i]) && bad++ < 3) fprintf(stderr, "  %s[%zu]: gpu %.9g cpu %.9g\n", what, i, (double)a[i], (double)b[i]);
  return bad;
}

/* A device copy of n bytes of host (NULL on failure, counted as a failed check). */
static void *dev_copy(const void *host, size_t n) {
  void *d = NULL;
  CHECK_STATUS(feri_cuda_malloc(n, &d), FER_STATUS_OK);
  if (d != NULL && host != NULL) CHECK_STATUS(feri_cuda_upload(d, host, n), FER_STATUS_OK);
  return d;
}

static void download(void *host, const void *dev, size_t n) {
  CHECK_STATUS(feri_cuda_sync(), FER_STATUS_OK);
  CHECK_STATUS(feri_cuda_download(host, dev, n), FER_STATUS_OK);
}

static fer_tensor t2(void *p, fer_dtype dt, int64_t a, int64_t b) {
  fer_tensor t;
  const int64_t s[2] = {a, b};
  fer_tensor_init_contiguous(&t, p, dt, 2, s);
  return t;
}

/* ---- without a GPU: the checks every call makes first ---- */
static void argument_checks(void) {
  float f = 0;
  int32_t i = 0;
  CHECK_STATUS(feri_cuda_rms_norm(NULL, NULL, 1e-5f, &f, 1, 1), FER_STATUS_NULL_ARG);
  CHECK_STATUS(feri_cuda_rms_norm(&f, NULL, -1.0f, &f, 1, 1), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(feri_cuda_rms_norm(&f, NULL, 1e-5f, &f, 1, 0), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(feri_cuda_swiglu(&f, NULL, &f, 1), FER_STATUS_NULL_ARG);
  CHECK_STATUS(feri_cuda_swiglu(&f, &f, &f, -1), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(feri_cuda_rope(&f, NULL, 1, 1, 2, 2, 1e4f, FER_ROPE_NEOX), FER_STATUS_NULL_ARG);
  CHECK_STATUS(feri_cuda_rope(&f, &i, 1, 1, 2, 3, 1e4f, FER_ROPE_NEOX), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(feri_cuda_rope(&f, &i, 1, 1, 2, 2, 1e4f, 7), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(feri_cuda_rope(&f, &i, 1, 1, 2, 2, 0.0f, FER_ROPE_GPTJ), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(feri_cuda_rope(&f, &i, INT64_MAX, INT64_MAX, 2, 2, 1e4f, FER_ROPE_GPTJ), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(feri_cuda_argmax(NULL, 1, 1, &i), FER_STATUS_NULL_ARG);
  CHECK_STATUS(feri_cuda_argmax(&f, 1, 0, &i), FER_STATUS_INVALID_ARG);
  uint8_t w[34] = {0};
  CHECK_STATUS(feri_cuda_matmul_quant(&f, 1, NULL, FER_DTYPE_Q8_0, 1, 32, 34, &f), FER_STATUS_NULL_ARG);
  CHECK_STATUS(feri_cuda_matmul_quant(&f, 1, w, FER_DTYPE_Q4_K, 1, 256, 144, &f), FER_STATUS_UNSUPPORTED);
  CHECK_STATUS(feri_cuda_matmul_quant(&f, 1, w, FER_DTYPE_F32, 1, 32, 34, &f), FER_STATUS_UNSUPPORTED);
  CHECK_STATUS(feri_cuda_matmul_quant(&f, 1, w, FER_DTYPE_Q8_0, 1, 33, 34, &f), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(feri_cuda_matmul_quant(&f, 1, w, FER_DTYPE_Q8_0, 1, 64, 34, &f), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(feri_cuda_matmul_quant(&f, INT64_MAX, w, FER_DTYPE_Q8_0, INT64_MAX, 32, 34, &f), FER_STATUS_INVALID_ARG);
  CHECK_STATUS(feri_cuda_matmul_quant_i8(&f, 1, w, FER_DTYPE_Q8_0, 1, 32, 34, NULL, &f), FER_STATUS_NULL_ARG);
  CHECK(feri_cuda_quant_supported(FER_DTYPE_Q4_0) && feri_cuda_quant_supported(FER_DTYPE_MXFP4));
  CHECK(!feri_cuda_quant_supported(FER_DTYPE_Q6_K) && !feri_cuda_quant_supported(FER_DTYPE_F16));
  CHECK(feri_cuda_q8_bytes(3, 64) == 3 * (64 + 16) && feri_cuda_q8_bytes(0, 64) == 0);
  CHECK_STATUS(feri_cuda_malloc(16, NULL), FER_STATUS_NULL_ARG);
  CHECK_STATUS(feri_cuda_upload(NULL, &f, 4), FER_STATUS_NULL_ARG);
  CHECK_STATUS(feri_cuda_download(&f, NULL, 4), FER_STATUS_NULL_ARG);
}

/* ---- C-CUDA-002: the row kernels ---- */
static void check_rms_norm(void) {
  const int64_t dims[] = {33, 576, 1000};
  for (size_t di = 0; di < 3; di++) {
    const int64_t R = 7, D = dims[di];
    float *x = malloc(sizeof(float) * R * D), *w = malloc(sizeof(float) * D);
    float *cpu = malloc(sizeof(float) * R * D), *gpu = malloc(sizeof(float) * R * D);
    for (int64_t i = 0; i < R * D; i++) x[i] = uniform(-3, 3) * (i % 97 == 0 ? 1000.0f : 1.0f);
    for (int64_t i = 0; i < D; i++) w[i] = uniform(0.5f, 1.5f);
    for (int64_t i = 0; i < D; i++) x[2 * D + i] = 0.0f; /* a zero row: eps alone */
    float *dx = dev_copy(x, sizeof(float) * R * D), *dw = dev_copy(w, sizeof(float) * D), *dy = dev_copy(NULL, sizeof(float) * R * D);
    for (int with_w = 0; with_w < 2; with_w++) {
      fer_tensor tx = t2(x, FER_DTYPE_F32, R, D), tc = t2(cpu, FER_DTYPE_F32, R, D);
      const int64_t sw[1] = {D};
      fer_tensor tw;
      fer_tensor_init_contiguous(&tw, w, FER_DTYPE_F32, 1, sw);
      CHECK_STATUS(fer_rms_norm(NULL, &tx, with_w ? &tw : NULL, 1e-5f, &tc), FER_STATUS_OK);
      CHECK_STATUS(feri_cuda_rms_norm(dx, with_w ? dw : NULL, 1e-5f, dy, R, D), FER_STATUS_OK);
      download(gpu, dy, sizeof(float) * R * D);
      CHECK(mismatches(gpu, cpu, (size_t)(R * D), "rms_norm") == 0);
    }
    feri_cuda_free(dx), feri_cuda_free(dw), feri_cuda_free(dy);
    free(x), free(w), free(cpu), free(gpu);
  }
}

static void check_swiglu(void) {
  enum { N = 100000 };
  float *g = malloc(sizeof(float) * N), *u = malloc(sizeof(float) * N), *cpu = malloc(sizeof(float) * N),
        *gpu = malloc(sizeof(float) * N);
  const float edge[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -104.5f, -103.9f, 88.8f, 1e-30f, -1e-30f, 20.0f, -20.0f};
  for (int i = 0; i < N; i++) {
    g[i] = i < 12 ? edge[i] : uniform(-30, 30);
    u[i] = uniform(-2, 2);
  }
  const int64_t s[1] = {N};
  fer_tensor tg, tu, to;
  fer_tensor_init_contiguous(&tg, g, FER_DTYPE_F32, 1, s);
  fer_tensor_init_contiguous(&tu, u, FER_DTYPE_F32, 1, s);
  fer_tensor_init_contiguous(&to, cpu, FER_DTYPE_F32, 1, s);
  CHECK_STATUS(fer_swiglu(NULL, &tg, &tu, &to), FER_STATUS_OK);
  float *dg = dev_copy(g, sizeof(float) * N), *du = dev_copy(u, sizeof(float) * N), *dout = dev_copy(NULL, sizeof(float) * N);
  CHECK_STATUS(feri_cuda_swiglu(dg, du, dout, N), FER_STATUS_OK);
  download(gpu, dout, sizeof(float) * N);
  CHECK(mismatches(gpu, cpu, N, "swiglu") == 0);
  feri_cuda_free(dg), feri_cuda_free(du), feri_cuda_free(dout);
  free(g), free(u), free(cpu), free(gpu);
}

static void check_rope(void) {
  enum { T = 5, H = 3, D = 64 };
  const int32_t pos[T] = {0, 1, 17, 4095, 131071};
  size_t exact = 0, total = 0;
  for (int pairing = 0; pairing < 2; pairing++)
    for (uint32_t rot = 32; rot <= D; rot += 32) {
      float x[T * H * D], cpu[T * H * D], gpu[T * H * D];
      for (int i = 0; i < T * H * D; i++) x[i] = uniform(-2, 2);
      const int64_t sx[3] = {T, H, D}, sp[1] = {T};
      fer_tensor tx, tp, to;
      fer_tensor_init_contiguous(&tx, x, FER_DTYPE_F32, 3, sx);
      fer_tensor_init_contiguous(&tp, (void *)pos, FER_DTYPE_I32, 1, sp);
      fer_tensor_init_contiguous(&to, cpu, FER_DTYPE_F32, 3, sx);
      CHECK_STATUS(fer_rope(NULL, &tx, &tp, pairing, rot, 10000.0f, &to), FER_STATUS_OK);
      float *dx = dev_copy(x, sizeof x);
      int32_t *dp = dev_copy(pos, sizeof pos);
      CHECK_STATUS(feri_cuda_rope(dx, dp, T, H, D, rot, 10000.0f, pairing), FER_STATUS_OK);
      download(gpu, dx, sizeof gpu);
      for (int i = 0; i < T * H * D; i++) {
        total++;
        if (same(gpu[i], cpu[i])) {
          exact++;
          continue;
        }
        /* a cosine or sine 1 ulp (2^-24 relative) off moves each product by that much of it */
        const int d = i % D, row = i / D;
        const float *xr = x + (size_t)row * D;
        const int half = (int)rot / 2, p = pairing == FER_ROPE_GPTJ ? d / 2 : d % half;
        const float x0 = xr[pairing == FER_ROPE_GPTJ ? 2 * p : p], x1 = xr[pairing == FER_ROPE_GPTJ ? 2 * p + 1 : p + half];
        const float bound = 2 * 0x1p-24f * (fabsf(x0) + fabsf(x1)) + 2 * 0x1p-24f * fabsf(cpu[i]);
        if (!(fabsf(gpu[i] - cpu[i]) <= bound)) {
          fprintf(stderr, "  rope[%d]: gpu %.9g cpu %.9g\n", i, (double)gpu[i], (double)cpu[i]);
          CHECK(!"rope within a cosine's ulp");
        }
      }
      feri_cuda_free(dx), feri_cuda_free(dp);
    }
  printf("rope: %zu of %zu values bit-identical to fer_rope\n", exact, total);
}

static void check_argmax(void) {
  enum { R = 6, V = 49152 };
  float *x = malloc(sizeof(float) * R * V);
  for (int i = 0; i < R * V; i++) x[i] = uniform(-10, 10);
  x[0 * V + 40000] = 50.0f, x[0 * V + 100] = 50.0f;          /* a tie: the lower index */
  x[1 * V + 30000] = NAN, x[1 * V + 45000] = NAN;           /* the first NaN */
  for (int i = 0; i < V; i++) x[2 * V + i] = -INFINITY;      /* all -inf: index 0 */
  for (int i = 0; i < V; i++) x[3 * V + i] = 1.0f;           /* all equal: index 0 */
  x[4 * V + V - 1] = 99.0f;                                  /* the last */
  x[5 * V + 7] = -0.0f, x[5 * V + 3] = 0.0f;                 /* nothing special: random row */
  int32_t cpu[R], gpu[R];
  fer_tensor tx = t2(x, FER_DTYPE_F32, R, V), to;
  const int64_t so[1] = {R};
  fer_tensor_init_contiguous(&to, cpu, FER_DTYPE_I32, 1, so);
  CHECK_STATUS(fer_argmax(NULL, &tx, &to), FER_STATUS_OK);
  float *dx = dev_copy(x, sizeof(float) * R * V);
  int32_t *dout = dev_copy(NULL, sizeof gpu);
  CHECK_STATUS(feri_cuda_argmax(dx, R, V, dout), FER_STATUS_OK);
  download(gpu, dout, sizeof gpu);
  CHECK(cpu[0] == 100 && cpu[1] == 30000 && cpu[2] == 0 && cpu[3] == 0 && cpu[4] == V - 1);
  for (int r = 0; r < R; r++) {
    if (gpu[r] != cpu[r]) fprintf(stderr, "  argmax row %d: gpu %d cpu %d\n", r, gpu[r], cpu[r]);
    CHECK(gpu[r] == cpu[r]);
  }
  feri_cuda_free(dx), feri_cuda_free(dout);
  free(x);
}

/* ---- C-CUDA-003 / 004: block-quantized matmul, both routes ---- */

/* Random blocks of `dtype` whose scales are finite (f16 scales in [2^-10, 2^-3]; MXFP4 exponents
 * near 127), n rows of k columns. */
static uint8_t *random_blocks(fer_dtype dtype, int64_t n, int64_t k, size_t *bytes, int64_t *row_stride) {
  int64_t bb = 0, elems = 0;
  CHECK_STATUS(fer_qblock_size(dtype, &elems, &bb), FER_STATUS_OK);
  *row_stride = k / 32 * bb;
  *bytes = (size_t)(n * *row_stride);
  uint8_t *w = malloc(*bytes);
  for (size_t i = 0; i < *bytes; i++) w[i] = (uint8_t)next_u32();
  for (int64_t b = 0; b < n * (k / 32); b++) {
    uint8_t *blk = w + b * bb;
    if (dtype == FER_DTYPE_MXFP4) {
      blk[0] = (uint8_t)(120 + next_u32() % 8);
      continue;
    }
    const uint16_t h = (uint16_t)((5 + next_u32() % 7) << 10 | (next_u32() & 0x3ff)); /* 2^-10 .. 2^-3 */
    memcpy(blk, &h, 2);
    if (dtype == FER_DTYPE_Q4_1 || dtype == FER_DTYPE_Q5_1) {
      const uint16_t m = (uint16_t)(h | (next_u32() & 1) << 15);
      memcpy(blk + 2, &m, 2);
    }
  }
  return w;
}

static void check_quant(void) {
  const fer_dtype types[] = {FER_DTYPE_MXFP4, FER_DTYPE_Q4_0, FER_DTYPE_Q4_1, FER_DTYPE_Q5_0,
                             FER_DTYPE_Q5_1,  FER_DTYPE_Q8_0, FER_DTYPE_IQ4_NL};
  const int64_t ks[] = {32 * 13, 32 * 70};
  const int64_t ms[] = {1, 4};
  for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
    for (size_t ki = 0; ki < 2; ki++)
      for (size_t mi = 0; mi < 2; mi++) {
        const fer_dtype dt = types[ti];
        const int64_t N = 37, K = ks[ki], M = ms[mi];
        size_t wbytes;
        int64_t stride;
        uint8_t *w = random_blocks(dt, N, K, &wbytes, &stride);
        float *a = malloc(sizeof(float) * M * K);
        for (int64_t i = 0; i < M * K; i++) a[i] = uniform(-1, 1) * (i % 61 == 0 ? 40.0f : 1.0f);
        for (int i = 0; i < 32; i++) a[32 + i] = 0.0f; /* a block of zeros: codes 0, scale 0 */
        if (M > 1) a[K + 40] = INFINITY;            /* row 1's second block: every output NaN */
        fer_qmatrix qm;
        memset(&qm, 0, sizeof qm);
        qm.data = w, qm.bytes = wbytes, qm.dtype = dt, qm.rows = N, qm.cols = K, qm.row_stride = stride;
        float *cpu = malloc(sizeof(float) * M * N), *gpu = malloc(sizeof(float) * M * N);
        fer_tensor ta = t2(a, FER_DTYPE_F32, M, K), tc = t2(cpu, FER_DTYPE_F32, M, N);
        float *da = dev_copy(a, sizeof(float) * M * K), *dout = dev_copy(NULL, sizeof(float) * M * N);
        void *dw = dev_copy(w, wbytes), *q8 = dev_copy(NULL, feri_cuda_q8_bytes(M, K));
        char what[64];
        /* C-CUDA-003: 8-bit activations */
        CHECK_STATUS(fer_matmul_quant_i8(NULL, &ta, &qm, &tc, NULL, 0), FER_STATUS_OK);
        CHECK_STATUS(feri_cuda_matmul_quant_i8(da, M, dw, dt, N, K, stride, q8, dout), FER_STATUS_OK);
        download(gpu, dout, sizeof(float) * M * N);
        snprintf(what, sizeof what, "i8 dtype %d k %lld m %lld", (int)dt, (long long)K, (long long)M);
        CHECK(mismatches(gpu, cpu, (size_t)(M * N), what) == 0);
        if (M > 1) CHECK(isnan(gpu[N]) && isnan(gpu[2 * N - 1]));
        /* C-CUDA-004: the exact route */
        CHECK_STATUS(fer_matmul_quant(NULL, &ta, &qm, &tc, NULL, 0), FER_STATUS_OK);
        CHECK_STATUS(feri_cuda_matmul_quant(da, M, dw, dt, N, K, stride, dout), FER_STATUS_OK);
        download(gpu, dout, sizeof(float) * M * N);
        snprintf(what, sizeof what, "exact dtype %d k %lld m %lld", (int)dt, (long long)K, (long long)M);
        CHECK(mismatches(gpu, cpu, (size_t)(M * N), what) == 0);
        feri_cuda_free(da), feri_cuda_free(dout), feri_cuda_free(dw), feri_cuda_free(q8);
        free(w), free(a), free(cpu), free(gpu);
      }
}

int main(void) {
  argument_checks();
  int32_t count = 0;
  const fer_status st = fer_cuda_device_count(&count);
  if (st != FER_STATUS_OK) {
    printf("SKIPPED: C-CUDA-002..004 need a GPU; fer_cuda_device_count says: %s\n", fer_status_str(st));
    return feri_test_finish("cuda_ops_test");
  }
  check_rms_norm();
  check_swiglu();
  check_rope();
  check_argmax();
  check_quant();
  return feri_test_finish("cuda_ops_test");
}
