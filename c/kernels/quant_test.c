/* quant_test.c: the block formats of issue 19 (Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
 * IQ4_XS) on the exact route, in C:
 * - hand-built blocks decoded by fer_dequantize against values computed by hand from ggml's
 *   layouts (claim C-Q-101);
 * - random blocks against a second decoder written here from the layouts, which evaluates each
 *   product and difference in double and rounds it to f32 on its own (that is f32 arithmetic
 *   without fma contraction, exactly: double has more than 2 x 24 + 2 bits) (C-Q-101);
 * - the checks: NaN and infinite f16 scales and minimums CORRUPT naming row and block, columns
 *   not a multiple of the block INVALID_ARG naming it, short buffers CORRUPT (C-Q-102);
 * - fer_matmul_quant bit-identical to fer_matmul over fer_dequantize's output at every ISA level,
 *   thread count and M, with unaligned data and padded strides (C-Q-103);
 * - fer_embedding_quant rows and fer_moe's three strategies over K-quant experts (C-Q-104).
 * EVIDENCE: C-Q-101 C-Q-102 C-Q-103 C-Q-104 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/tensor.h"
#include "ferrite.h"
#include "kernels/quant.h"
#include "testing/check.h"

static const fer_dtype NEW_TYPES[] = {FER_DTYPE_Q5_0, FER_DTYPE_Q5_1, FER_DTYPE_IQ4_NL,
                                      FER_DTYPE_Q2_K, FER_DTYPE_Q3_K, FER_DTYPE_Q4_K,
                                      FER_DTYPE_Q5_K, FER_DTYPE_Q6_K, FER_DTYPE_IQ4_XS};
static const fer_dtype OLD_TYPES[] = {FER_DTYPE_MXFP4, FER_DTYPE_Q4_0, FER_DTYPE_Q4_1, FER_DTYPE_Q8_0};
enum { N_NEW = sizeof NEW_TYPES / sizeof NEW_TYPES[0], N_OLD = sizeof OLD_TYPES / sizeof OLD_TYPES[0] };

static const int KV[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static void putf16(uint8_t *p, float v) { put16(p, feri_f32_to_f16(v)); }
static float getf16(const uint8_t *p) {
  uint16_t h;
  memcpy(&h, p, 2);
  return feri_f16_to_f32(h);
}

/* One f32 operation evaluated in double and rounded once (see the file comment). */
static float mul(double a, double b) { return (float)(a * b); }
static float sub(double a, double b) { return (float)(a - b); }
static float add(double a, double b) { return (float)(a + b); }

static int64_t block_elems(fer_dtype t) {
  int64_t e = 0, b = 0;
  CHECK_STATUS(fer_qblock_size(t, &e, &b), FER_STATUS_OK);
  return e;
}
static int64_t block_bytes(fer_dtype t) {
  int64_t e = 0, b = 0;
  CHECK_STATUS(fer_qblock_size(t, &e, &b), FER_STATUS_OK);
  return b;
}

/* The reference decoder: element e of a block, straight from the layout. */
static float ref_value(fer_dtype t, const uint8_t *b, int e) {
  switch (t) {
    case FER_DTYPE_Q5_0:
    case FER_DTYPE_Q5_1: {
      const int one = t == FER_DTYPE_Q5_1;
      const uint8_t *qh = b + (one ? 4 : 2), *qs = b + (one ? 8 : 6);
      const int nib = e < 16 ? qs[e] & 15 : qs[e - 16] >> 4;
      const int hb = (qh[e / 8] >> (e % 8)) & 1;
      const int q = nib + 16 * hb;
      return one ? add(mul(q, getf16(b)), getf16(b + 2)) : mul(q - 16, getf16(b));
    }
    case FER_DTYPE_IQ4_NL:
      return mul(getf16(b), KV[e < 16 ? b[2 + e] & 15 : b[2 + e - 16] >> 4]);
    case FER_DTYPE_Q2_K: {
      const uint8_t sc = b[e / 16];
      const int q = (b[16 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
      return sub(mul(mul(getf16(b + 80), sc & 15), q), mul(getf16(b + 82), sc >> 4));
    }
    case FER_DTYPE_Q3_K: {
      const int i = e / 16; /* scale i: low 4 bits from byte i % 8 (high nibble for i >= 8) */
      const int lo = (b[96 + i % 8] >> (i >= 8 ? 4 : 0)) & 15, hi = (b[104 + i % 4] >> (2 * (i / 4))) & 3;
      const int sc = lo + 16 * hi - 32;
      const int q = (b[32 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
      const int h = (b[e % 32] >> (4 * (e / 128) + (e % 128) / 32)) & 1;
      return mul(mul(getf16(b + 108), sc), q - (h ? 0 : 4));
    }
    case FER_DTYPE_Q4_K:
    case FER_DTYPE_Q5_K: {
      const int j = e / 32;
      const uint8_t *s = b + 4;
      const int sc = j < 4 ? s[j] & 63 : (s[j + 4] & 15) + 16 * (s[j - 4] >> 6);
      const int m = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) + 16 * (s[j] >> 6);
      const uint8_t *qs = b + (t == FER_DTYPE_Q4_K ? 16 : 48);
      const uint8_t byte = qs[32 * (j / 2) + e % 32];
      int q = j % 2 ? byte >> 4 : byte & 15;
      if (t == FER_DTYPE_Q5_K) q += 16 * ((b[16 + e % 32] >> j) & 1);
      return sub(mul(mul(getf16(b), sc), q), mul(getf16(b + 2), m));
    }
    case FER_DTYPE_Q6_K: {
      const int half = e / 128, r = e % 128, l = r % 32;
      const uint8_t lo_byte = b[64 * half + 32 * ((r / 32) % 2) + l];
      const int lo = r / 64 ? lo_byte >> 4 : lo_byte & 15;
      const int hi = (b[128 + 32 * half + l] >> (2 * (r / 32))) & 3;
      return mul(mul(getf16(b + 208), (int8_t)b[192 + e / 16]), lo + 16 * hi - 32);
    }
    case FER_DTYPE_IQ4_XS: {
      const int ib = e / 32, w = e % 32;
      uint16_t sh;
      memcpy(&sh, b + 2, 2);
      const int ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 15) + 16 * ((sh >> (2 * ib)) & 3);
      const uint8_t byte = b[8 + 16 * ib + w % 16];
      return mul(mul(getf16(b), ls - 32), KV[w < 16 ? byte & 15 : byte >> 4]);
    }
    default: return NAN;
  }
}

/* Dequantizes n_blocks blocks laid out as one row through the ABI. */
static fer_status dequant_row(fer_dtype t, const uint8_t *blocks, int64_t n_blocks, float *out) {
  const int64_t be = block_elems(t), bb = block_bytes(t);
  fer_qmatrix w = {blocks, (uint64_t)(n_blocks * bb), t, 0, 1, n_blocks * be, n_blocks * bb};
  fer_tensor to = feri_tensor_2d(out, FER_DTYPE_F32, 1, n_blocks * be);
  return fer_dequantize(NULL, &w, &to);
}

static int expect(fer_dtype t, const uint8_t *blk, const int *idx, const float *want, int n) {
  float got[256];
  CHECK_STATUS(dequant_row(t, blk, 1, got), FER_STATUS_OK);
  int bad = 0;
  for (int i = 0; i < n; i++)
    if (got[idx[i]] != want[i]) {
      fprintf(stderr, "  %s element %d: got %.9g, want %.9g\n", feri_dtype_name(t), idx[i], got[idx[i]], want[i]);
      bad = 1;
    }
  CHECK(!bad);
  for (int i = 0; i < n; i++) CHECK(ref_value(t, blk, idx[i]) == want[i]);
  return bad;
}

/* Blocks with known bytes, their values worked out by hand from ggml's layouts (d = 0.5,
 * dmin / m = 0.25 throughout). */
static void test_hand_blocks(void) {
  uint8_t b[256];
  { /* Q5_0: qs[0] = 0x3A, qh bit 0 set: element 0 = (10 + 16 - 16) * 0.5, element 16 = (3 - 16) * 0.5 */
    memset(b, 0, sizeof b);
    putf16(b, 0.5f);
    b[2] = 0x01;
    b[6] = 0x3A;
    const int idx[] = {0, 16, 1};
    const float want[] = {5.0f, -6.5f, -8.0f};
    expect(FER_DTYPE_Q5_0, b, idx, want, 3);
  }
  { /* Q5_1: 26 * 0.5 + 0.25, 3 * 0.5 + 0.25, 0 * 0.5 + 0.25 */
    memset(b, 0, sizeof b);
    putf16(b, 0.5f);
    putf16(b + 2, 0.25f);
    b[4] = 0x01;
    b[8] = 0x3A;
    const int idx[] = {0, 16, 1};
    const float want[] = {13.25f, 1.75f, 0.25f};
    expect(FER_DTYPE_Q5_1, b, idx, want, 3);
  }
  { /* IQ4_NL: qs[0] = 0x0F: 0.5 * 113, 0.5 * -127; qs[1] = 0x80: 0.5 * -127, 0.5 * 1 */
    memset(b, 0, sizeof b);
    putf16(b, 0.5f);
    b[2] = 0x0F;
    b[3] = 0x80;
    const int idx[] = {0, 16, 1, 17};
    const float want[] = {56.5f, -63.5f, -63.5f, 0.5f};
    expect(FER_DTYPE_IQ4_NL, b, idx, want, 4);
  }
  { /* Q2_K: qs[0] = 0xE6 gives codes 2, 1, 2, 3 at elements 0, 32, 64, 96 (shifts 0, 2, 4, 6);
     * scale bytes 0x23 (3, min 2), 0x10 (0, min 1), 0x05 (5, min 0) at sub-blocks 0, 2, 6:
     * 1.5 * 2 - 0.5; 0 * 1 - 0.25; 2.5 * 3 - 0 */
    memset(b, 0, sizeof b);
    b[0] = 0x23;
    b[2] = 0x10;
    b[6] = 0x05;
    b[16] = 0xE6;
    putf16(b + 80, 0.5f);
    putf16(b + 82, 0.25f);
    const int idx[] = {0, 32, 96};
    const float want[] = {2.5f, -0.25f, 7.5f};
    expect(FER_DTYPE_Q2_K, b, idx, want, 3);
  }
  { /* Q3_K: scale 0 = 5 | 2 << 4 = 37 (-32: 5), scale 1 = 0 (-32); element 0: code 2, high bit
     * set: 0.5 * 5 * 2; element 1: code 0, high bit clear: 2.5 * -4; element 16: code 1, high
     * bit set: 0.5 * -32 * 1 */
    memset(b, 0, sizeof b);
    b[0] = 0x01;      /* hmask[0] bit 0 */
    b[16] = 0x01;     /* hmask[16] bit 0 */
    b[32] = 0x02;     /* qs[0] */
    b[32 + 16] = 0x01; /* qs[16] */
    b[96] = 0x05;
    b[104] = 0x02;
    putf16(b + 108, 0.5f);
    const int idx[] = {0, 1, 16};
    const float want[] = {5.0f, -10.0f, -16.0f};
    expect(FER_DTYPE_Q3_K, b, idx, want, 3);
  }
  for (int five = 0; five < 2; five++) {
    /* Q4_K / Q5_K: sub-block 0 scale 3 min 2 (d1 1.5, m1 0.5), sub-block 1 scale 4 min 0,
     * sub-block 7 scale 1 | 1 << 4 = 17 min 2 (d1 8.5, m1 0.5); qs[0] = 0x9A, qs[96] = 0x30;
     * Q5_K's qh[0] = 0x01 adds 16 to element 0's code */
    memset(b, 0, sizeof b);
    putf16(b, 0.5f);
    putf16(b + 2, 0.25f);
    b[4 + 0] = 3;
    b[4 + 4] = 2;
    b[4 + 1] = 4;
    b[4 + 11] = 0x21;
    b[4 + 3] = 0x40;
    const int qs = five ? 48 : 16;
    b[qs] = 0x9A;
    b[qs + 96] = 0x30;
    if (five) b[16] = 0x01;
    const int idx[] = {0, 32, 224, 1};
    const float want[] = {five ? 38.5f : 14.5f, 18.0f, 25.0f, -0.5f};
    expect(five ? FER_DTYPE_Q5_K : FER_DTYPE_Q4_K, b, idx, want, 4);
  }
  { /* Q6_K: ql[0] = 0x21, qh[0] = 0x03: element 0 code 1 | 3 << 4 = 49 - 32 = 17, scale -2:
     * (0.5 * -2) * 17; element 64: code 2 - 32 = -30, scale 3: 1.5 * -30; element 32: ql[32] = 0,
     * qh bits 2-3 = 0: -32 with scale 0 (sub-block 2): -0 */
    memset(b, 0, sizeof b);
    b[0] = 0x21;
    b[128] = 0x03;
    b[192] = 0xFE;
    b[196] = 3;
    putf16(b + 208, 0.5f);
    const int idx[] = {0, 64, 32};
    const float want[] = {-17.0f, -45.0f, -0.0f};
    expect(FER_DTYPE_Q6_K, b, idx, want, 3);
  }
  { /* IQ4_XS: sub-block 0 ls = 4 | 2 << 4 = 36 (dl 0.5 * 4 = 2), sub-block 1 ls = 0 (dl -16);
     * qs[0] = 0xF8: 2 * 1, 2 * 113; qs[16] = 0x01: -16 * -104 */
    memset(b, 0, sizeof b);
    putf16(b, 0.5f);
    put16(b + 2, 0x0002);
    b[4] = 0x04;
    b[8] = 0xF8;
    b[8 + 16] = 0x01;
    const int idx[] = {0, 16, 32};
    const float want[] = {2.0f, 226.0f, 1664.0f};
    expect(FER_DTYPE_IQ4_XS, b, idx, want, 3);
  }
}

static unsigned rnd(unsigned *s) {
  *s = *s * 1664525u + 1013904223u;
  return *s >> 8;
}

/* A finite f16 scale of either sign whose products round (odd mantissas), some subnormal. */
static uint16_t rnd_scale(unsigned *s) {
  const unsigned r = rnd(s);
  if (r % 17 == 0) return (uint16_t)(r & 0x83ff); /* subnormal or zero */
  return (uint16_t)((r & 0x8000) | ((0x2000 + (r >> 4) % 0x1c00) | 1));
}

/* Random bytes with every f16 scale / minimum finite. */
static void fill_blocks(fer_dtype t, uint8_t *p, int64_t n_blocks, unsigned *s) {
  const int64_t bb = block_bytes(t);
  for (int64_t i = 0; i < n_blocks * bb; i++) p[i] = (uint8_t)rnd(s);
  int d_off[2] = {0, -1};
  switch (t) {
    case FER_DTYPE_Q4_1: case FER_DTYPE_Q5_1: case FER_DTYPE_Q4_K: case FER_DTYPE_Q5_K: d_off[1] = 2; break;
    case FER_DTYPE_Q2_K: d_off[0] = 80, d_off[1] = 82; break;
    case FER_DTYPE_Q3_K: d_off[0] = 108; break;
    case FER_DTYPE_Q6_K: d_off[0] = 208; break;
    case FER_DTYPE_MXFP4: d_off[0] = -1; break;
    default: break;
  }
  for (int64_t b = 0; b < n_blocks; b++) {
    uint8_t *blk = p + b * bb;
    if (t == FER_DTYPE_MXFP4 && blk[0] == 255) blk[0] = 254;
    for (int i = 0; i < 2; i++)
      if (d_off[i] >= 0) put16(blk + d_off[i], rnd_scale(s));
  }
}

static void test_random_blocks(void) {
  unsigned s = 12345;
  for (int ti = 0; ti < N_NEW; ti++) {
    const fer_dtype t = NEW_TYPES[ti];
    const int64_t be = block_elems(t), bb = block_bytes(t), nb = 64;
    uint8_t *raw = malloc((size_t)(nb * bb + 1));
    float *got = malloc(sizeof(float) * (size_t)(nb * be));
    uint8_t *blk = raw + 1; /* unaligned */
    fill_blocks(t, blk, nb, &s);
    CHECK_STATUS(dequant_row(t, blk, nb, got), FER_STATUS_OK);
    int64_t bad = 0;
    for (int64_t b = 0; b < nb; b++)
      for (int e = 0; e < be; e++) {
        const float want = ref_value(t, blk + b * bb, e), g = got[b * be + e];
        if (memcmp(&want, &g, 4) != 0 && bad++ < 3)
          fprintf(stderr, "  %s block %lld element %d: got %.9g, want %.9g\n", feri_dtype_name(t),
                  (long long)b, e, g, want);
      }
    CHECK(bad == 0);
    free(raw);
    free(got);
  }
}

static void expect_message(const char *part) {
  char msg[512];
  size_t len;
  fer_last_error_message(msg, sizeof msg, &len);
  if (strstr(msg, part) == NULL) fprintf(stderr, "  message %s lacks %s\n", msg, part);
  CHECK(strstr(msg, part) != NULL);
}

static void test_checks(void) {
  unsigned s = 777;
  static const uint16_t bad_f16[2] = {0x7e00, 0xfc00}; /* NaN, -inf */
  for (int ti = 0; ti < N_NEW; ti++) {
    const fer_dtype t = NEW_TYPES[ti];
    const int64_t be = block_elems(t), bb = block_bytes(t);
    CHECK(feri_qblock_elems(t) == be && (int64_t)feri_qblock_bytes(t) == bb);
    uint8_t *m = malloc((size_t)(3 * 2 * bb));
    fill_blocks(t, m, 6, &s);
    fer_qmatrix w = {m, (uint64_t)(6 * bb), t, 0, 3, 2 * be, 2 * bb};
    CHECK_STATUS(fer_qmatrix_check(&w), FER_STATUS_OK);
    /* every f16 of the block that is a scale or minimum, at row 2 block 1 */
    int offs[2] = {0, -1};
    switch (t) {
      case FER_DTYPE_Q5_1: case FER_DTYPE_Q4_K: case FER_DTYPE_Q5_K: offs[1] = 2; break;
      case FER_DTYPE_Q2_K: offs[0] = 80, offs[1] = 82; break;
      case FER_DTYPE_Q3_K: offs[0] = 108; break;
      case FER_DTYPE_Q6_K: offs[0] = 208; break;
      default: break;
    }
    for (int o = 0; o < 2; o++) {
      if (offs[o] < 0) continue;
      for (int v = 0; v < 2; v++) {
        uint8_t *at = m + 2 * 2 * bb + bb + offs[o], keep[2];
        memcpy(keep, at, 2);
        put16(at, bad_f16[v]);
        CHECK_STATUS(fer_qmatrix_check(&w), FER_STATUS_CORRUPT);
        expect_message("row 2 block 1");
        expect_message(v == 0 ? "NaN" : "infinite");
        memcpy(at, keep, 2);
      }
    }
    CHECK_STATUS(fer_qmatrix_check(&w), FER_STATUS_OK);
    /* short buffer */
    fer_qmatrix sh = w;
    sh.bytes -= 1;
    CHECK_STATUS(fer_qmatrix_check(&sh), FER_STATUS_CORRUPT);
    float out[3 * 512];
    fer_tensor to = feri_tensor_2d(out, FER_DTYPE_F32, 3, 2 * be);
    CHECK_STATUS(fer_dequantize(NULL, &sh, &to), FER_STATUS_CORRUPT);
    /* cols not a multiple of the block */
    if (be == 256) {
      fer_qmatrix odd = w;
      odd.cols = 2 * be - 32;
      CHECK_STATUS(fer_qmatrix_check(&odd), FER_STATUS_INVALID_ARG);
      expect_message("block of 256");
      float x[480], y[3];
      fer_tensor tx = feri_tensor_2d(x, FER_DTYPE_F32, 1, 480), ty = feri_tensor_2d(y, FER_DTYPE_F32, 1, 3);
      CHECK_STATUS(fer_matmul_quant(NULL, &tx, &odd, &ty, NULL, 0), FER_STATUS_INVALID_ARG);
      expect_message("not a multiple");
    }
    int64_t e = -1, b = -1;
    CHECK_STATUS(fer_qblock_size(t, &e, &b), FER_STATUS_OK);
    CHECK(e == (ti < 3 ? 32 : 256));
    static const int64_t bytes[N_NEW] = {22, 24, 18, 84, 110, 144, 176, 210, 136};
    CHECK(b == bytes[ti]);
    free(m);
  }
}

/* fer_matmul_quant == fer_matmul(a, fer_dequantize(w), NK), bit for bit, for every level, thread
 * count and row count, with w unaligned and its rows padded. */
static void test_fused(fer_dtype t, int64_t N, int64_t nblk, unsigned seed) {
  const int64_t be = block_elems(t), bb = block_bytes(t), K = nblk * be, stride = nblk * bb + 3;
  uint8_t *raw = malloc((size_t)(N * stride + 1));
  uint8_t *wd = raw + 1;
  unsigned s = seed;
  for (int64_t r = 0; r < N; r++) fill_blocks(t, wd + r * stride, nblk, &s);
  fer_qmatrix w = {wd, (uint64_t)(N * stride), t, 0, N, K, stride};
  CHECK_STATUS(fer_qmatrix_check(&w), FER_STATUS_OK);
  float *dense = malloc(sizeof(float) * (size_t)(N * K));
  fer_tensor td = feri_tensor_2d(dense, FER_DTYPE_F32, N, K);
  CHECK_STATUS(fer_dequantize(NULL, &w, &td), FER_STATUS_OK);
  const int64_t Ms[3] = {1, 3, 40};
  float *a = malloc(sizeof(float) * (size_t)(40 * K));
  for (int64_t i = 0; i < 40 * K; i++) a[i] = (float)((int)(rnd(&s) % 2001) - 1000) / 997.0f;
  float *want = malloc(sizeof(float) * (size_t)(40 * N)), *got = malloc(sizeof(float) * (size_t)(40 * N));
  const fer_isa levels[2] = {FER_ISA_PORTABLE, FER_ISA_AVX2};
  const uint32_t threads[2] = {1, 3};
  for (int mi = 0; mi < 3; mi++) {
    const int64_t M = Ms[mi];
    fer_tensor ta = feri_tensor_2d(a, FER_DTYPE_F32, M, K), tw = feri_tensor_2d(want, FER_DTYPE_F32, M, N);
    fer_tensor tg = feri_tensor_2d(got, FER_DTYPE_F32, M, N);
    /* the reference: the dense product on the portable level, one thread */
    fer_threadpool_options o;
    fer_threadpool_options_init(&o);
    o.n_threads = 1;
    o.isa = FER_ISA_PORTABLE;
    fer_threadpool *ref = NULL;
    CHECK_STATUS(fer_threadpool_create(&o, &ref), FER_STATUS_OK);
    CHECK_STATUS(fer_matmul(ref, &ta, &td, FER_MATMUL_B_NK, &tw, NULL, 0), FER_STATUS_OK);
    fer_threadpool_free(ref);
    for (int l = 0; l < 2; l++)
      for (int th = 0; th < 2; th++) {
        o.n_threads = threads[th];
        o.isa = levels[l];
        fer_threadpool *pool = NULL;
        if (fer_threadpool_create(&o, &pool) != FER_STATUS_OK) {
          printf("SKIPPED: quant_test at ISA level %d (not on this CPU)\n", (int)levels[l]);
          continue;
        }
        memset(got, 0xff, sizeof(float) * (size_t)(M * N));
        CHECK_STATUS(fer_matmul_quant(pool, &ta, &w, &tg, NULL, 0), FER_STATUS_OK);
        int64_t bad = 0;
        for (int64_t i = 0; i < M * N; i++)
          if (memcmp(&got[i], &want[i], 4) != 0 && bad++ < 3)
            fprintf(stderr, "  %s M %lld N %lld K %lld ISA %d threads %u: [%lld] got %.9g want %.9g\n",
                    feri_dtype_name(t), (long long)M, (long long)N, (long long)K, (int)levels[l],
                    threads[th], (long long)i, got[i], want[i]);
        CHECK(bad == 0);
        fer_threadpool_free(pool);
      }
  }
  free(raw);
  free(dense);
  free(a);
  free(want);
  free(got);
}

static void test_embedding(void) {
  unsigned s = 99;
  for (int ti = 0; ti < N_NEW; ti++) {
    const fer_dtype t = NEW_TYPES[ti];
    const int64_t be = block_elems(t), bb = block_bytes(t), V = 5, D = 2 * be, stride = 2 * bb + 5;
    uint8_t *wd = malloc((size_t)(V * stride));
    for (int64_t r = 0; r < V; r++) fill_blocks(t, wd + r * stride, 2, &s);
    fer_qmatrix w = {wd, (uint64_t)(V * stride), t, 0, V, D, stride};
    float *dense = malloc(sizeof(float) * (size_t)(V * D)), *out = malloc(sizeof(float) * (size_t)(3 * D));
    fer_tensor td = feri_tensor_2d(dense, FER_DTYPE_F32, V, D), to = feri_tensor_2d(out, FER_DTYPE_F32, 3, D);
    CHECK_STATUS(fer_dequantize(NULL, &w, &td), FER_STATUS_OK);
    int32_t ids[3] = {4, 0, 2};
    fer_tensor ti_ = {0};
    ti_.data = ids;
    ti_.dtype = FER_DTYPE_I32;
    ti_.rank = 1;
    ti_.shape[0] = 3;
    ti_.strides[0] = 4;
    CHECK_STATUS(fer_embedding_quant(NULL, &w, &ti_, &to), FER_STATUS_OK);
    for (int i = 0; i < 3; i++) CHECK(memcmp(out + i * D, dense + ids[i] * D, sizeof(float) * (size_t)D) == 0);
    ids[1] = 5;
    CHECK_STATUS(fer_embedding_quant(NULL, &w, &ti_, &to), FER_STATUS_INVALID_ARG);
    free(wd);
    free(dense);
    free(out);
  }
}

/* fer_moe over K-quant experts: the fused, dequantize-each-call and cached-dense strategies give
 * the same bits (each is fer_matmul over the same dequantized values). */
static void test_moe(fer_dtype t) {
  const int64_t be = block_elems(t), bb = block_bytes(t), E = 3, H = be, I = be, rows = 2;
  unsigned s = 4242;
  uint8_t *fc1d = malloc((size_t)(E * I * bb)), *fc2d = malloc((size_t)(E * H * bb));
  fill_blocks(t, fc1d, E * I, &s);
  fill_blocks(t, fc2d, E * H, &s);
  fer_qmatrix fc1 = {fc1d, (uint64_t)(E * I * bb), t, 0, E * I, H, bb};
  fer_qmatrix fc2 = {fc2d, (uint64_t)(E * H * bb), t, 0, E * H, I, bb};
  float x[2 * 256], lg[2 * 3] = {0.5f, -1.0f, 2.0f, 1.0f, 0.25f, -0.5f}, out[3][2 * 256];
  for (int64_t i = 0; i < rows * H; i++) x[i] = (float)((int)(rnd(&s) % 201) - 100) / 64.0f;
  fer_tensor tx = feri_tensor_2d(x, FER_DTYPE_F32, rows, H), tl = feri_tensor_2d(lg, FER_DTYPE_F32, rows, E);
  fer_dense_cache *cache = NULL;
  CHECK_STATUS(fer_dense_cache_create(64u << 20, NULL, &cache), FER_STATUS_OK);
  const int32_t strategies[3] = {FER_MOE_FUSED, FER_MOE_DEQUANT_EACH_CALL, FER_MOE_CACHED_DENSE};
  for (int k = 0; k < 3; k++) {
    fer_moe_params p;
    fer_moe_params_init(&p);
    p.top_k = 2;
    p.activation = FER_MOE_SILU;
    p.strategy = strategies[k];
    p.cache = cache;
    fer_tensor to = feri_tensor_2d(out[k], FER_DTYPE_F32, rows, H);
    CHECK_STATUS(fer_moe(NULL, &tx, &tl, &fc1, &fc2, &p, &to), FER_STATUS_OK);
  }
  CHECK(memcmp(out[0], out[1], sizeof(float) * (size_t)(rows * H)) == 0);
  CHECK(memcmp(out[0], out[2], sizeof(float) * (size_t)(rows * H)) == 0);
  int finite = 1;
  for (int64_t i = 0; i < rows * H; i++) finite &= isfinite(out[0][i]) != 0;
  CHECK(finite);
  fer_dense_cache_free(cache);
  free(fc1d);
  free(fc2d);
}

int main(void) {
  test_hand_blocks();
  test_random_blocks();
  test_checks();
  for (int ti = 0; ti < N_NEW; ti++) {
    const fer_dtype t = NEW_TYPES[ti];
    const int big = block_elems(t) == 256;
    /* 77 rows: two groups of 32, one of 8 and a scalar tail of 5; several blocks per row */
    test_fused(t, 77, big ? 3 : 9, 1000u + (unsigned)ti);
    test_fused(t, 8, 1, 2000u + (unsigned)ti);
  }
  for (int ti = 0; ti < N_OLD; ti++) test_fused(OLD_TYPES[ti], 41, 5, 3000u + (unsigned)ti);
  test_embedding();
  test_moe(FER_DTYPE_Q4_K);
  test_moe(FER_DTYPE_Q6_K);
  return feri_test_finish("quant_test");
}
