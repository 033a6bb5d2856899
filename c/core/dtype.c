/* dtype.c: element sizes and the portable f16 conversions. */
#include "core/dtype.h"

#include <string.h>

#include "core/status.h"

const char *feri_dtype_name(fer_dtype dtype) {
  switch (dtype) {
    case FER_DTYPE_F32: return "f32";
    case FER_DTYPE_F16: return "f16";
    case FER_DTYPE_BF16: return "bf16";
    case FER_DTYPE_I32: return "i32";
    case FER_DTYPE_I64: return "i64";
    case FER_DTYPE_U8: return "u8";
    case FER_DTYPE_MXFP4: return "mxfp4";
    case FER_DTYPE_Q4_0: return "q4_0";
    case FER_DTYPE_Q4_1: return "q4_1";
    case FER_DTYPE_Q8_0: return "q8_0";
    case FER_DTYPE_Q5_0: return "q5_0";
    case FER_DTYPE_Q5_1: return "q5_1";
    case FER_DTYPE_Q2_K: return "q2_k";
    case FER_DTYPE_Q3_K: return "q3_k";
    case FER_DTYPE_Q4_K: return "q4_k";
    case FER_DTYPE_Q5_K: return "q5_k";
    case FER_DTYPE_Q6_K: return "q6_k";
    case FER_DTYPE_IQ4_NL: return "iq4_nl";
    case FER_DTYPE_IQ4_XS: return "iq4_xs";
    default: return "unknown dtype";
  }
}

/* 16-31 are reserved for block formats (ferrite.h, fer_dtype_code). */
static int feri_dtype_is_block(fer_dtype dtype) { return dtype >= 16 && dtype <= 31; }

fer_status fer_dtype_size(fer_dtype dtype, size_t *out_size) {
  feri_error_clear();
  if (out_size == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_dtype_size: out_size is NULL");
  *out_size = feri_dtype_size(dtype);
  if (*out_size != 0) return FER_STATUS_OK;
  if (feri_dtype_is_block(dtype))
    return feri_fail(FER_STATUS_UNSUPPORTED,
                     "fer_dtype_size: %s is a block format, reserved and not built yet",
                     feri_dtype_name(dtype));
  return feri_fail(FER_STATUS_INVALID_ARG, "fer_dtype_size: unknown dtype %d", (int)dtype);
}

float feri_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    /* Infinity, or NaN made quiet with its payload kept. */
    bits = sign | 0x7f800000u | (mant << 13) | (mant ? 0x00400000u : 0);
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {
    /* Subnormal f16: normalise; the value mant * 2^-24 is exact in f32. */
    int shift = 0;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      shift++;
    }
    mant &= 0x3ffu;
    bits = sign | ((uint32_t)(113 - shift) << 23) | (mant << 13);
  }
  return feri_bits_f32(bits);
}

uint16_t feri_f32_to_f16(float f) {
  uint32_t u = feri_f32_bits(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  if (abs >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: infinity */
  if (abs >= 0x38800000u) {
    /* Normal f16 range: rebias the exponent, round the 13 dropped bits to nearest even. */
    uint32_t r = abs - 0x38000000u;
    r += 0x0fffu + ((r >> 13) & 1u);
    return (uint16_t)(sign | (r >> 13));
  }
  if (abs < 0x33000000u) return sign; /* below half the smallest subnormal: +-0 */
  /* Subnormal f16 result: value = m * 2^-24 with m = round(abs_value * 2^24). */
  uint32_t exp = abs >> 23;
  uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
  uint32_t shift = 126u - exp; /* 14 .. 24 for exp in [102, 112] */
  uint32_t m = mant >> shift;
  uint32_t rem = mant & ((1u << shift) - 1u);
  uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (m & 1u))) m++;
  return (uint16_t)(sign | m);
}

float feri_elem_load(const char *p, fer_dtype dtype) {
  uint16_t h;
  switch (dtype) {
    case FER_DTYPE_F32: {
      float f;
      memcpy(&f, p, sizeof f);
      return f;
    }
    case FER_DTYPE_F16: memcpy(&h, p, sizeof h); return feri_f16_to_f32(h);
    default: memcpy(&h, p, sizeof h); return feri_bf16_to_f32(h);
  }
}

void feri_elem_store(char *p, fer_dtype dtype, float v) {
  uint16_t h;
  switch (dtype) {
    case FER_DTYPE_F32: memcpy(p, &v, sizeof v); return;
    case FER_DTYPE_F16: h = feri_f32_to_f16(v); break;
    default: h = feri_f32_to_bf16(v); break;
  }
  memcpy(p, &h, sizeof h);
}
