/* quant.c: see quant.h. The decoders follow ggml's block layouts (ggml-common.h) and llama.cpp's
 * dequantize_row_* arithmetic; byte offsets below are those layouts'. */
#include "kernels/quant.h"

#include <math.h>
#include <string.h>

#include "core/dtype.h"
#include "core/status.h"

const float feri_e2m1_values[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                    -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

const int8_t feri_mxfp4_code2[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

const int8_t feri_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                      1,    13,   25,  38,  53,  69,  89,  113};

static float f16_at(const uint8_t *p) {
  uint16_t h;
  memcpy(&h, p, sizeof h);
  return feri_f16_to_f32(h);
}

static uint32_t u32_at(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

float feri_qblock_scale(fer_dtype dtype, const uint8_t *block) {
  return dtype == FER_DTYPE_MXFP4 ? feri_e8m0_to_f32(block[0]) : f16_at(block);
}

float feri_qblock_min(const uint8_t *block) { return f16_at(block + 2); }

/* Element i < 16 is the low nibble of byte i, element i >= 16 the high nibble of byte i - 16, in
 * GGUF's 32-element layouts and the original's MXFP4 layout. */
static int nibble(const uint8_t *qs, int i) { return i < 16 ? qs[i] & 0xF : qs[i - 16] >> 4; }

/* Q5_0 / Q5_1 element i: its nibble with bit i of the 32 high bits as bit 4. */
static int q5_code(const uint8_t *qh4, const uint8_t *qs, int i) {
  return nibble(qs, i) | (int)((u32_at(qh4) >> i) & 1u) << 4;
}

static void dequant_q2k(const uint8_t *b, float *y) {
  const uint8_t *scales = b, *qs = b + 16;
  const float d = f16_at(b + 80), dmin = f16_at(b + 82);
  int is = 0;
  for (int h = 0; h < 2; h++) {
    const uint8_t *q = qs + 32 * h;
    for (int shift = 0; shift < 8; shift += 2)
      for (int half = 0; half < 2; half++) {
        const uint8_t sc = scales[is++];
        const float dl = d * (float)(sc & 0xF), ml = dmin * (float)(sc >> 4);
        for (int l = 0; l < 16; l++) *y++ = dl * (float)((q[16 * half + l] >> shift) & 3) - ml;
      }
  }
}

static void dequant_q3k(const uint8_t *b, float *y) {
  const uint8_t *hm = b, *qs = b + 32;
  const float d = f16_at(b + 108);
  uint8_t sc[16];
  feri_q3k_scales(b + 96, sc);
  int is = 0;
  uint8_t m = 1;
  for (int h = 0; h < 2; h++) {
    const uint8_t *q = qs + 32 * h;
    for (int shift = 0; shift < 8; shift += 2, m = (uint8_t)(m << 1))
      for (int half = 0; half < 2; half++) {
        const float dl = d * (float)(sc[is++] - 32);
        for (int l = 16 * half; l < 16 * half + 16; l++)
          *y++ = dl * (float)(((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
      }
  }
}

/* Q4_K (qh == NULL) and Q5_K. */
static void dequant_q45k(const uint8_t *b, const uint8_t *qh, const uint8_t *qs, float *y) {
  const float d = f16_at(b), dmin = f16_at(b + 2);
  for (int j = 0; j < 4; j++) {
    const uint8_t *q = qs + 32 * j;
    for (int half = 0; half < 2; half++) {
      uint8_t sc, mn;
      feri_q4k_scale_min(b + 4, 2 * j + half, &sc, &mn);
      const float d1 = d * (float)sc, m1 = dmin * (float)mn;
      const uint8_t hbit = (uint8_t)(1u << (2 * j + half));
      for (int l = 0; l < 32; l++) {
        const int code = (half ? q[l] >> 4 : q[l] & 0xF) + (qh != NULL && (qh[l] & hbit) ? 16 : 0);
        *y++ = d1 * (float)code - m1;
      }
    }
  }
}

/* Q6_K element e of a half: low nibble from ql, two high bits from qh. */
static int q6k_code(const uint8_t *b, int e) {
  const int h = e / 128, r = e % 128, quarter = r / 32, l = r % 32;
  const uint8_t *ql = b + 64 * h, *qh = b + 128 + 32 * h;
  const int lo = quarter & 1 ? ql[l + 32] : ql[l];
  return ((quarter & 2 ? lo >> 4 : lo & 0xF) | ((qh[l] >> (2 * quarter)) & 3) << 4) - 32;
}

static void dequant_q6k(const uint8_t *b, float *y) {
  const float d = f16_at(b + 208);
  const int8_t *sc = (const int8_t *)(b + 192);
  /* (d * sc) * q as llama.cpp's d * sc[is] * q1 */
  for (int e = 0; e < 256; e++) y[e] = d * (float)sc[e / 16] * (float)q6k_code(b, e);
}

static int iq4xs_ls(const uint8_t *b, int ib) {
  uint16_t sh;
  memcpy(&sh, b + 2, sizeof sh);
  return ((b[4 + ib / 2] >> (4 * (ib % 2))) & 0xF) | ((sh >> (2 * ib)) & 3) << 4;
}

void feri_qblock_dequant(fer_dtype dtype, const uint8_t *b, float *out) {
  switch (dtype) {
    case FER_DTYPE_MXFP4: {
      const float d = feri_e8m0_to_f32(b[0]);
      for (int i = 0; i < 32; i++) out[i] = feri_e2m1_values[nibble(b + 1, i)] * d;
      break;
    }
    case FER_DTYPE_Q4_0: {
      const float d = f16_at(b);
      for (int i = 0; i < 32; i++) out[i] = (float)(nibble(b + 2, i) - 8) * d;
      break;
    }
    case FER_DTYPE_Q4_1: {
      const float d = f16_at(b), m = f16_at(b + 2);
      for (int i = 0; i < 32; i++) out[i] = (float)nibble(b + 4, i) * d + m;
      break;
    }
    case FER_DTYPE_Q8_0: {
      const float d = f16_at(b);
      for (int i = 0; i < 32; i++) out[i] = (float)(int8_t)b[2 + i] * d;
      break;
    }
    case FER_DTYPE_Q5_0: {
      const float d = f16_at(b);
      for (int i = 0; i < 32; i++) out[i] = (float)(q5_code(b + 2, b + 6, i) - 16) * d;
      break;
    }
    case FER_DTYPE_Q5_1: {
      const float d = f16_at(b), m = f16_at(b + 2);
      for (int i = 0; i < 32; i++) out[i] = (float)q5_code(b + 4, b + 8, i) * d + m;
      break;
    }
    case FER_DTYPE_IQ4_NL: {
      const float d = f16_at(b);
      for (int i = 0; i < 32; i++) out[i] = d * (float)feri_iq4nl_values[nibble(b + 2, i)];
      break;
    }
    case FER_DTYPE_Q2_K: dequant_q2k(b, out); break;
    case FER_DTYPE_Q3_K: dequant_q3k(b, out); break;
    case FER_DTYPE_Q4_K: dequant_q45k(b, NULL, b + 16, out); break;
    case FER_DTYPE_Q5_K: dequant_q45k(b, b + 16, b + 48, out); break;
    case FER_DTYPE_Q6_K: dequant_q6k(b, out); break;
    case FER_DTYPE_IQ4_XS: {
      const float d = f16_at(b);
      for (int ib = 0; ib < 8; ib++) {
        const float dl = d * (float)(iq4xs_ls(b, ib) - 32);
        for (int i = 0; i < 32; i++) out[32 * ib + i] = dl * (float)feri_iq4nl_values[nibble(b + 8 + 16 * ib, i)];
      }
      break;
    }
    default: break;
  }
}

void feri_qblock_codes(fer_dtype dtype, const uint8_t *b, int8_t *c) {
  switch (dtype) {
    case FER_DTYPE_MXFP4:
      for (int i = 0; i < 32; i++) c[i] = feri_mxfp4_code2[nibble(b + 1, i)];
      break;
    case FER_DTYPE_Q4_0:
      for (int i = 0; i < 32; i++) c[i] = (int8_t)(nibble(b + 2, i) - 8);
      break;
    case FER_DTYPE_Q4_1:
      for (int i = 0; i < 32; i++) c[i] = (int8_t)nibble(b + 4, i);
      break;
    case FER_DTYPE_Q8_0: memcpy(c, b + 2, 32); break;
    case FER_DTYPE_Q5_0:
      for (int i = 0; i < 32; i++) c[i] = (int8_t)(q5_code(b + 2, b + 6, i) - 16);
      break;
    case FER_DTYPE_Q5_1:
      for (int i = 0; i < 32; i++) c[i] = (int8_t)q5_code(b + 4, b + 8, i);
      break;
    case FER_DTYPE_IQ4_NL:
      for (int i = 0; i < 32; i++) c[i] = feri_iq4nl_values[nibble(b + 2, i)];
      break;
    case FER_DTYPE_Q2_K:
      for (int e = 0; e < 256; e++) {
        const int h = e / 128, shift = 2 * ((e % 128) / 32), l = e % 32;
        c[e] = (int8_t)((b[16 + 32 * h + l] >> shift) & 3);
      }
      break;
    case FER_DTYPE_Q3_K:
      for (int e = 0; e < 256; e++) {
        const int h = e / 128, j = (e % 128) / 32, l = e % 32;
        const int q = (b[32 + 32 * h + l] >> (2 * j)) & 3;
        c[e] = (int8_t)(q - ((b[l] >> (4 * h + j)) & 1 ? 0 : 4));
      }
      break;
    case FER_DTYPE_Q4_K:
    case FER_DTYPE_Q5_K: {
      const uint8_t *qs = b + (dtype == FER_DTYPE_Q4_K ? 16 : 48);
      for (int e = 0; e < 256; e++) {
        const int sub = e / 32, l = e % 32;
        const uint8_t q = qs[32 * (sub / 2) + l];
        int code = sub & 1 ? q >> 4 : q & 0xF;
        if (dtype == FER_DTYPE_Q5_K) code += (b[16 + l] >> sub) & 1 ? 16 : 0;
        c[e] = (int8_t)code;
      }
      break;
    }
    case FER_DTYPE_Q6_K:
      for (int e = 0; e < 256; e++) c[e] = (int8_t)q6k_code(b, e);
      break;
    case FER_DTYPE_IQ4_XS:
      for (int e = 0; e < 256; e++) c[e] = feri_iq4nl_values[nibble(b + 8 + 16 * (e / 32), e % 32)];
      break;
    default: break;
  }
}

void feri_qblock_scales(fer_dtype dtype, const uint8_t *b, float *s, float *o) {
  switch (dtype) {
    case FER_DTYPE_MXFP4:
      s[0] = feri_e8m0_to_f32(b[0]) * 0.5f; /* exact: codes are twice the E2M1 values */
      o[0] = 0.0f;
      break;
    case FER_DTYPE_Q4_1:
    case FER_DTYPE_Q5_1:
      s[0] = f16_at(b);
      o[0] = f16_at(b + 2);
      break;
    case FER_DTYPE_Q2_K: {
      const float d = f16_at(b + 80), dmin = f16_at(b + 82);
      for (int i = 0; i < 16; i++) {
        s[i] = d * (float)(b[i] & 0xF);
        o[i] = -(dmin * (float)(b[i] >> 4)); /* dl * q - ml is dl * q + (-ml) exactly */
      }
      break;
    }
    case FER_DTYPE_Q3_K: {
      const float d = f16_at(b + 108);
      uint8_t sc[16];
      feri_q3k_scales(b + 96, sc);
      for (int i = 0; i < 16; i++) {
        s[i] = d * (float)(sc[i] - 32);
        o[i] = 0.0f;
      }
      break;
    }
    case FER_DTYPE_Q4_K:
    case FER_DTYPE_Q5_K: {
      const float d = f16_at(b), dmin = f16_at(b + 2);
      for (int j = 0; j < 8; j++) {
        uint8_t sc, mn;
        feri_q4k_scale_min(b + 4, j, &sc, &mn);
        s[j] = d * (float)sc;
        o[j] = -(dmin * (float)mn);
      }
      break;
    }
    case FER_DTYPE_Q6_K: {
      const float d = f16_at(b + 208);
      for (int i = 0; i < 16; i++) {
        s[i] = d * (float)(int8_t)b[192 + i];
        o[i] = 0.0f;
      }
      break;
    }
    case FER_DTYPE_IQ4_XS: {
      const float d = f16_at(b);
      for (int ib = 0; ib < 8; ib++) {
        s[ib] = d * (float)(iq4xs_ls(b, ib) - 32);
        o[ib] = 0.0f;
      }
      break;
    }
    default: /* Q4_0, Q8_0, Q5_0, IQ4_NL: one f16 scale */
      s[0] = f16_at(b);
      o[0] = 0.0f;
      break;
  }
}

float feri_qblock_value(fer_dtype dtype, const uint8_t *block, int i) {
  float vals[FERI_QBLOCK_MAX];
  feri_qblock_dequant(dtype, block, vals);
  return vals[i];
}

/* Byte offsets of a block's f16 scale and of its minimum / dmin (-1: none). */
static void scale_offsets(fer_dtype dtype, int *d_off, int *m_off) {
  *m_off = -1;
  switch (dtype) {
    case FER_DTYPE_Q2_K: *d_off = 80, *m_off = 82; break;
    case FER_DTYPE_Q3_K: *d_off = 108; break;
    case FER_DTYPE_Q6_K: *d_off = 208; break;
    case FER_DTYPE_Q4_1:
    case FER_DTYPE_Q5_1:
    case FER_DTYPE_Q4_K:
    case FER_DTYPE_Q5_K: *d_off = 0, *m_off = 2; break;
    default: *d_off = 0; break;
  }
}

fer_status feri_qblock_check(fer_dtype dtype, const uint8_t *block, int64_t row, int64_t blk,
                             const char *fn) {
  if (dtype == FER_DTYPE_MXFP4) {
    if (block[0] == 255)
      return feri_fail(FER_STATUS_CORRUPT, "%s: row %lld block %lld has E8M0 scale 255 (NaN)", fn,
                       (long long)row, (long long)blk);
    return FER_STATUS_OK;
  }
  int d_off, m_off;
  scale_offsets(dtype, &d_off, &m_off);
  /* the common case by the bits alone (an f16 is NaN or infinite when its exponent is all ones):
   * a model's load checks every block */
  uint16_t hd, hm = 0;
  memcpy(&hd, block + d_off, 2);
  if (m_off >= 0) memcpy(&hm, block + m_off, 2);
  if ((hd & 0x7C00) != 0x7C00 && (hm & 0x7C00) != 0x7C00) return FER_STATUS_OK;
  const float d = f16_at(block + d_off);
  const float m = m_off >= 0 ? f16_at(block + m_off) : 0.0f;
  if (!isfinite(d) || !isfinite(m))
    return feri_fail(FER_STATUS_CORRUPT, "%s: row %lld block %lld has a %s %s", fn, (long long)row,
                     (long long)blk, isnan(d) || (isnan(m) && isfinite(d)) ? "NaN" : "infinite",
                     isfinite(d) ? "minimum" : "scale");
  return FER_STATUS_OK;
}

fer_status feri_qmatrix_validate(const fer_qmatrix *w, const char *fn) {
  if (w == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: the quantized matrix is NULL", fn);
  const size_t bb = feri_qblock_bytes(w->dtype);
  const int64_t be = feri_qblock_elems(w->dtype);
  if (bb == 0)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: dtype %s is not a block-quantized format "
                     "(MXFP4, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K .. Q6_K, IQ4_NL, IQ4_XS)", fn,
                     feri_dtype_name(w->dtype));
  if (w->rows < 0 || w->cols < 0)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: negative extent [%lld, %lld]", fn,
                     (long long)w->rows, (long long)w->cols);
  if (w->cols % be != 0)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: cols %lld is not a multiple of %s's block of %lld",
                     fn, (long long)w->cols, feri_dtype_name(w->dtype), (long long)be);
  const uint64_t row_bytes = (uint64_t)(w->cols / be) * bb;
  if (w->rows == 0 || w->cols == 0) return FER_STATUS_OK;
  if (w->row_stride < 0 || (uint64_t)w->row_stride < row_bytes)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: row_stride %lld is below a row's %llu bytes", fn,
                     (long long)w->row_stride, (unsigned long long)row_bytes);
  if ((uint64_t)(w->rows - 1) > (UINT64_MAX - row_bytes) / (uint64_t)w->row_stride ||
      (uint64_t)(w->rows - 1) * (uint64_t)w->row_stride + row_bytes > (uint64_t)INT64_MAX)
    return feri_fail(FER_STATUS_SIZE_OVERFLOW, "%s: %lld rows of stride %lld overflow", fn,
                     (long long)w->rows, (long long)w->row_stride);
  const uint64_t need = (uint64_t)(w->rows - 1) * (uint64_t)w->row_stride + row_bytes;
  if (w->bytes < need)
    return feri_fail(FER_STATUS_CORRUPT, "%s: the buffer has %llu bytes, %lld rows of %lld %s "
                     "values need %llu", fn, (unsigned long long)w->bytes, (long long)w->rows,
                     (long long)w->cols, feri_dtype_name(w->dtype), (unsigned long long)need);
  if (w->data == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: the quantized matrix has no data", fn);
  return FER_STATUS_OK;
}

void feri_quantize_q8_0(const float *x, int64_t n, uint8_t *out) {
  for (int64_t b = 0; b < n / 32; b++, x += 32, out += 34) {
    float amax = 0.0f;
    int finite = 1;
    for (int i = 0; i < 32; i++) {
      const float a = fabsf(x[i]);
      if (!(a <= 3.40282347e38f)) finite = 0;
      else if (a > amax) amax = a;
    }
    uint16_t h = finite ? feri_f32_to_f16(amax / 127.0f) : 0x7e00; /* f16 NaN */
    if ((h & 0x7fff) == 0x7c00) h = 0x7bff; /* saturate at 65504 */
    const float d = feri_f16_to_f32(h);
    memcpy(out, &h, 2);
    for (int i = 0; i < 32; i++) {
      float c = finite && d != 0.0f ? nearbyintf(x[i] / d) : 0.0f;
      c = c > 127.0f ? 127.0f : c < -127.0f ? -127.0f : c;
      out[2 + i] = (uint8_t)(int8_t)c;
    }
  }
}
