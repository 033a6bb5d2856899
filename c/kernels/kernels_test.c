/* kernels_test.c: known answers for add, gather and reduce_mean, and bit-identical results across
 * ISA levels and thread counts on inputs that include NaN, infinities, subnormals and -0; SiLU and
 * SwiGLU equal to the scalar definition (fexp.h's feri_silu) at every level.
 * EVIDENCE: C-ADD-002, C-GATHER-002, C-MEAN-002, C-TK-003 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "kernels/fexp.h"
#include "testing/check.h"

static fer_tensor tensor(void *data, fer_dtype dt, int rank, const int64_t *shape) {
  fer_tensor t;
  CHECK_STATUS(fer_tensor_init_contiguous(&t, data, dt, rank, shape), FER_STATUS_OK);
  return t;
}

static void known_answers(void) {
  float a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {10, 20, 30}, out[6];
  const int64_t s23[] = {2, 3}, s3[] = {3}, s21[] = {2, 1};
  fer_tensor ta = tensor(a, FER_DTYPE_F32, 2, s23), tb = tensor(b, FER_DTYPE_F32, 1, s3),
             to = tensor(out, FER_DTYPE_F32, 2, s23);
  CHECK_STATUS(fer_add(NULL, &ta, &tb, &to), FER_STATUS_OK);
  const float want_add[6] = {11, 22, 33, 14, 25, 36};
  CHECK(memcmp(out, want_add, sizeof out) == 0);
  /* In place: out is exactly a. */
  CHECK_STATUS(fer_add(NULL, &ta, &tb, &ta), FER_STATUS_OK);
  CHECK(memcmp(a, want_add, sizeof a) == 0);
  /* Broadcast mismatch and a wrong out shape are refused and write nothing. */
  float bad_b[2] = {1, 2};
  const int64_t s2[] = {2};
  fer_tensor tbad = tensor(bad_b, FER_DTYPE_F32, 1, s2);
  memset(out, 0x7f, sizeof out);
  CHECK_STATUS(fer_add(NULL, &ta, &tbad, &to), FER_STATUS_SHAPE_MISMATCH);
  CHECK(((unsigned char *)out)[0] == 0x7f);

  float mean_out[2];
  fer_tensor tm = tensor(mean_out, FER_DTYPE_F32, 2, s21);
  float x[6] = {1, 2, 3, 4, 5, 7};
  fer_tensor tx = tensor(x, FER_DTYPE_F32, 2, s23);
  CHECK_STATUS(fer_reduce_mean(NULL, &tx, &tm), FER_STATUS_OK);
  CHECK(mean_out[0] == 2.0f && mean_out[1] == 16.0f / 3.0f);

  float table[4 * 2] = {0, 1, 10, 11, 20, 21, 30, 31}, g[3 * 2];
  int64_t idx[3] = {3, -4, 1};
  const int64_t s42[] = {4, 2}, s_3[] = {3}, s32[] = {3, 2};
  fer_tensor tt = tensor(table, FER_DTYPE_F32, 2, s42), ti = tensor(idx, FER_DTYPE_I64, 1, s_3),
             tg = tensor(g, FER_DTYPE_F32, 2, s32);
  CHECK_STATUS(fer_gather(NULL, &tt, &ti, &tg), FER_STATUS_OK);
  const float want_g[6] = {30, 31, 0, 1, 10, 11};
  CHECK(memcmp(g, want_g, sizeof g) == 0);
  idx[1] = 4; /* out of range: refused, out untouched */
  memset(g, 0x55, sizeof g);
  CHECK_STATUS(fer_gather(NULL, &tt, &ti, &tg), FER_STATUS_INVALID_ARG);
  for (size_t i = 0; i < sizeof g; i++) CHECK(((unsigned char *)g)[i] == 0x55);
  idx[1] = -5;
  CHECK_STATUS(fer_gather(NULL, &tt, &ti, &tg), FER_STATUS_INVALID_ARG);
}

/* Random bit patterns of the dtype, one in eight replaced by a special value. */
static void fill(void *p, fer_dtype dt, size_t n, uint32_t seed) {
  static const uint32_t special32[] = {0x7fc00000u, 0xff800000u, 0x7f800000u, 0x00000001u,
                                       0x80000000u, 0x00000000u, 0x7f800001u, 0x807fffffu};
  static const uint16_t special16[] = {0x7e00, 0xfc00, 0x7c00, 0x0001, 0x8000, 0x0000, 0x7c01, 0x83ff};
  static const uint16_t specialb[] = {0x7fc0, 0xff80, 0x7f80, 0x0001, 0x8000, 0x0000, 0x7f81, 0x807f};
  uint32_t s = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; i++) {
    s ^= s << 13, s ^= s >> 17, s ^= s << 5;
    int special = (s & 7) == 0;
    if (dt == FER_DTYPE_F32) {
      /* Keep most values in a sane range so sums are not all infinities. */
      float v = ((int)(s >> 8) % 2001 - 1000) / 37.0f;
      ((float *)p)[i] = special ? feri_bits_f32(special32[(s >> 3) & 7]) : v;
    } else if (dt == FER_DTYPE_F16) {
      ((uint16_t *)p)[i] = special ? special16[(s >> 3) & 7] : feri_f32_to_f16(((int)(s >> 8) % 2001 - 1000) / 37.0f);
    } else {
      ((uint16_t *)p)[i] = special ? specialb[(s >> 3) & 7] : feri_f32_to_bf16(((int)(s >> 8) % 2001 - 1000) / 37.0f);
    }
  }
}

static fer_threadpool *pool(uint32_t n, fer_isa isa) {
  fer_threadpool_options o;
  fer_threadpool_options_init(&o);
  o.n_threads = n;
  o.isa = isa;
  fer_threadpool *p = NULL;
  CHECK_STATUS(fer_threadpool_create(&o, &p), FER_STATUS_OK);
  return p;
}

/* Runs all three kernels under `p` into fresh buffers; the caller compares the bytes. */
typedef struct results {
  unsigned char *add, *add_row, *mean, *gather;
} results;

enum { ROWS = 67, COLS = 1031 }; /* odd sizes: every tail path runs */

static results run_all(fer_threadpool *p, fer_dtype dt, const void *a, const void *b,
                       const void *b_row) {
  size_t es = dt == FER_DTYPE_F32 ? 4 : 2;
  results r;
  r.add = malloc(ROWS * COLS * es);
  r.add_row = malloc(ROWS * COLS * es);
  r.mean = malloc(ROWS * es);
  r.gather = malloc(5 * COLS * es);
  const int64_t s[] = {ROWS, COLS}, srow[] = {COLS}, s1[] = {ROWS, 1}, sg[] = {5, COLS}, si[] = {5};
  fer_tensor ta = tensor((void *)a, dt, 2, s), tb = tensor((void *)b, dt, 2, s);
  fer_tensor trow = tensor((void *)b_row, dt, 1, srow);
  fer_tensor to = tensor(r.add, dt, 2, s), tor = tensor(r.add_row, dt, 2, s);
  CHECK_STATUS(fer_add(p, &ta, &tb, &to), FER_STATUS_OK);
  CHECK_STATUS(fer_add(p, &trow, &ta, &tor), FER_STATUS_OK); /* broadcast on the left */
  fer_tensor tm = tensor(r.mean, dt, 2, s1);
  CHECK_STATUS(fer_reduce_mean(p, &ta, &tm), FER_STATUS_OK);
  int64_t idx[5] = {0, 66, -1, 3, -67};
  fer_tensor ti = tensor(idx, FER_DTYPE_I64, 1, si), tg = tensor(r.gather, dt, 2, sg);
  CHECK_STATUS(fer_gather(p, &ta, &ti, &tg), FER_STATUS_OK);
  return r;
}

/* Equal bytes, or both NaN: NaN payloads may differ between levels (see fer_isa_code). */
static size_t first_difference(fer_dtype dt, const unsigned char *x, const unsigned char *y, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (dt == FER_DTYPE_F32) {
      float a, b;
      memcpy(&a, x + 4 * i, 4);
      memcpy(&b, y + 4 * i, 4);
      if (memcmp(&a, &b, 4) != 0 && !(isnan(a) && isnan(b))) return i;
    } else {
      uint16_t a, b;
      memcpy(&a, x + 2 * i, 2);
      memcpy(&b, y + 2 * i, 2);
      float fa = dt == FER_DTYPE_F16 ? feri_f16_to_f32(a) : feri_bf16_to_f32(a);
      float fb = dt == FER_DTYPE_F16 ? feri_f16_to_f32(b) : feri_bf16_to_f32(b);
      if (a != b && !(isnan(fa) && isnan(fb))) return i;
    }
  }
  return n;
}

static void free_results(results r) {
  free(r.add);
  free(r.add_row);
  free(r.mean);
  free(r.gather);
}

static void identical_everywhere(void) {
  const uint64_t avx2 = FER_CPU_FEATURE_AVX2 | FER_CPU_FEATURE_FMA | FER_CPU_FEATURE_F16C;
  int have_avx2 = (fer_cpu_features() & avx2) == avx2;
  if (!have_avx2) printf("SKIPPED: AVX2 side of the ISA comparison (CPU lacks AVX2+FMA+F16C)\n");
  const fer_dtype dts[] = {FER_DTYPE_F32, FER_DTYPE_F16, FER_DTYPE_BF16};
  for (int d = 0; d < 3; d++) {
    fer_dtype dt = dts[d];
    size_t es = dt == FER_DTYPE_F32 ? 4 : 2;
    void *a = malloc(ROWS * COLS * es), *b = malloc(ROWS * COLS * es), *row = malloc(COLS * es);
    fill(a, dt, ROWS * COLS, 1 + d);
    fill(b, dt, ROWS * COLS, 7 + d);
    fill(row, dt, COLS, 13 + d);
    fer_threadpool *ref_pool = pool(1, FER_ISA_PORTABLE);
    results ref = run_all(ref_pool, dt, a, b, row);
    fer_threadpool_free(ref_pool);
    struct { uint32_t n; fer_isa isa; } cfg[] = {{3, FER_ISA_PORTABLE}, {1, FER_ISA_AVX2}, {2, FER_ISA_AVX2}, {7, FER_ISA_AVX2}};
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
      if (cfg[c].isa == FER_ISA_AVX2 && !have_avx2) continue;
      fer_threadpool *p = pool(cfg[c].n, cfg[c].isa);
      results got = run_all(p, dt, a, b, row);
      CHECK(first_difference(dt, ref.add, got.add, ROWS * COLS) == ROWS * COLS);
      CHECK(first_difference(dt, ref.add_row, got.add_row, ROWS * COLS) == ROWS * COLS);
      CHECK(first_difference(dt, ref.mean, got.mean, ROWS) == ROWS);
      CHECK(memcmp(ref.gather, got.gather, 5 * COLS * es) == 0); /* a copy: exact, NaNs too */
      free_results(got);
      fer_threadpool_free(p);
    }
    free_results(ref);
    free(a);
    free(b);
    free(row);
  }
}

/* fer_silu / fer_swiglu give feri_silu's bits (times up) on every ISA level and thread count,
 * over special values and the edges of the exponential, in rows whose lengths leave vector tails. */
static void silu_everywhere(void) {
  enum { R = 5, C = 203 };
  static float x[R * C], up[R * C], want_s[R * C], want_g[R * C], got[R * C];
  const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 1e-45f, -1e-45f, 88.7f, 88.8f, -103.9f,
                           -104.1f, -87.3f, -87.4f, 3.4e38f, -3.4e38f, 1.0f, -1.0f, 20.0f, -20.0f};
  uint32_t st = 12345;
  for (int i = 0; i < R * C; i++) {
    st = st * 1664525u + 1013904223u;
    x[i] = i < (int)(sizeof special / sizeof special[0]) ? special[i] : ((float)(st >> 8) / 16777216.0f - 0.5f) * 240.0f;
    up[i] = (float)((st >> 4) % 1000) / 250.0f - 2.0f;
    want_s[i] = feri_silu(x[i]);
    want_g[i] = feri_silu(x[i]) * up[i];
  }
  CHECK(feri_silu(-INFINITY) == 0.0f && signbit(feri_silu(-INFINITY)) && isnan(feri_silu(NAN)) &&
        feri_silu(INFINITY) == INFINITY && feri_silu(-0.0f) == 0.0f);
  const int64_t shape[] = {R, C};
  const struct { uint32_t n; fer_isa isa; } cfg[] = {{1, FER_ISA_PORTABLE}, {3, FER_ISA_PORTABLE}, {1, FER_ISA_AVX2}, {2, FER_ISA_AVX2}};
  const uint64_t avx2 = FER_CPU_FEATURE_AVX2 | FER_CPU_FEATURE_FMA | FER_CPU_FEATURE_F16C;
  for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
    if (cfg[c].isa == FER_ISA_AVX2 && (fer_cpu_features() & avx2) != avx2) continue;
    fer_threadpool *p = pool(cfg[c].n, cfg[c].isa);
    fer_tensor tx = tensor(x, FER_DTYPE_F32, 2, shape), tu = tensor(up, FER_DTYPE_F32, 2, shape),
               to = tensor(got, FER_DTYPE_F32, 2, shape);
    CHECK_STATUS(fer_silu(p, &tx, &to), FER_STATUS_OK);
    CHECK(first_difference(FER_DTYPE_F32, (const unsigned char *)want_s, (const unsigned char *)got, R * C) == R * C);
    CHECK_STATUS(fer_swiglu(p, &tx, &tu, &to), FER_STATUS_OK);
    CHECK(first_difference(FER_DTYPE_F32, (const unsigned char *)want_g, (const unsigned char *)got, R * C) == R * C);
    fer_threadpool_free(p);
  }
}

int main(void) {
  known_answers();
  silu_everywhere();
  identical_everywhere();
  return feri_test_finish("kernels_test");
}
