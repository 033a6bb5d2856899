/* quant.c: see quant.h. */
#include "kernels/quant.h"

#include <math.h>
#include <string.h>

#include "core/dtype.h"
#include "core/status.h"

const float feri_e2m1_values[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                    -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

const int8_t feri_mxfp4_code2[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static float f16_at(const uint8_t *p) {
  uint16_t h;
  memcpy(&h, p, sizeof h);
  return feri_f16_to_f32(h);
}

float feri_qblock_scale(fer_dtype dtype, const uint8_t *block) {
  return dtype == FER_DTYPE_MXFP4 ? feri_e8m0_to_f32(block[0]) : f16_at(block);
}

float feri_qblock_min(const uint8_t *block) { return f16_at(block + 2); }

/* Element i < 16 is the low nibble of byte i, element i >= 16 the high nibble of byte i - 16, in
 * both GGUF's Q4 layouts and the original's MXFP4 layout. */
static int nibble(const uint8_t *qs, int i) { return i < 16 ? qs[i] & 0xF : qs[i - 16] >> 4; }

float feri_qblock_value(fer_dtype dtype, const uint8_t *block, int i) {
  const float d = feri_qblock_scale(dtype, block);
  switch (dtype) {
    case FER_DTYPE_MXFP4: return feri_e2m1_values[nibble(block + 1, i)] * d;
    case FER_DTYPE_Q4_0: return (float)(nibble(block + 2, i) - 8) * d;
    case FER_DTYPE_Q4_1: return (float)nibble(block + 4, i) * d + feri_qblock_min(block);
    default: return (float)(int8_t)block[2 + i] * d;
  }
}

void feri_qblock_dequant(fer_dtype dtype, const uint8_t *block, float out[FERI_QBLOCK]) {
  /* feri_qblock_value's formulas with the scale decoded once per block */
  const float d = feri_qblock_scale(dtype, block);
  switch (dtype) {
    case FER_DTYPE_MXFP4:
      for (int i = 0; i < FERI_QBLOCK; i++) out[i] = feri_e2m1_values[nibble(block + 1, i)] * d;
      break;
    case FER_DTYPE_Q4_0:
      for (int i = 0; i < FERI_QBLOCK; i++) out[i] = (float)(nibble(block + 2, i) - 8) * d;
      break;
    case FER_DTYPE_Q4_1: {
      const float m = feri_qblock_min(block);
      for (int i = 0; i < FERI_QBLOCK; i++) out[i] = (float)nibble(block + 4, i) * d + m;
      break;
    }
    default:
      for (int i = 0; i < FERI_QBLOCK; i++) out[i] = (float)(int8_t)block[2 + i] * d;
      break;
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
  const float d = f16_at(block);
  const float m = dtype == FER_DTYPE_Q4_1 ? feri_qblock_min(block) : 0.0f;
  if (!isfinite(d) || !isfinite(m))
    return feri_fail(FER_STATUS_CORRUPT, "%s: row %lld block %lld has a %s scale", fn,
                     (long long)row, (long long)blk, isnan(d) || isnan(m) ? "NaN" : "infinite");
  return FER_STATUS_OK;
}

fer_status feri_qmatrix_validate(const fer_qmatrix *w, const char *fn) {
  if (w == NULL) return feri_fail(FER_STATUS_NULL_ARG, "%s: the quantized matrix is NULL", fn);
  const size_t bb = feri_qblock_bytes(w->dtype);
  if (bb == 0)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: dtype %s is not a block-quantized format "
                     "(MXFP4, Q4_0, Q4_1, Q8_0)", fn, feri_dtype_name(w->dtype));
  if (w->rows < 0 || w->cols < 0)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: negative extent [%lld, %lld]", fn,
                     (long long)w->rows, (long long)w->cols);
  if (w->cols % FERI_QBLOCK != 0)
    return feri_fail(FER_STATUS_INVALID_ARG, "%s: cols %lld is not a multiple of the block of %d",
                     fn, (long long)w->cols, FERI_QBLOCK);
  const uint64_t row_bytes = (uint64_t)(w->cols / FERI_QBLOCK) * bb;
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
