/* quant_i8_super.c: the integer view of the super-block formats that fer_matmul_quant_i8 reads
 * (quant_i8.h): sub-scales, minima and codes of ggml's Q2_K .. Q6_K and IQ4_XS blocks, decoded
 * from their layouts (ggml-common.h). The f32 dequantizers are quant.c's; these give the integers
 * whose products those values are. */
#include <string.h>

#include "kernels/quant_i8.h"

void feri_qi8_super_scales(fer_dtype t, const uint8_t *blk, int8_t sc[16], int8_t mn[16]) {
  memset(mn, 0, 16);
  switch (t) {
    case FER_DTYPE_Q2_K:
      for (int j = 0; j < 16; j++) sc[j] = (int8_t)(blk[j] & 15), mn[j] = (int8_t)(blk[j] >> 4);
      break;
    case FER_DTYPE_Q3_K: {
      uint8_t s6[16]; /* the 6-bit scales, offset by 32 */
      feri_q3k_scales(blk + 96, s6);
      for (int j = 0; j < 16; j++) sc[j] = (int8_t)(s6[j] - 32);
      break;
    }
    case FER_DTYPE_Q4_K:
    case FER_DTYPE_Q5_K:
      for (int j = 0; j < 8; j++) {
        uint8_t s6, m6;
        feri_q4k_scale_min(blk + 4, j, &s6, &m6);
        sc[2 * j] = sc[2 * j + 1] = (int8_t)s6;
        mn[2 * j] = mn[2 * j + 1] = (int8_t)m6;
      }
      break;
    case FER_DTYPE_Q6_K: memcpy(sc, blk + 192, 16); break;
    default: { /* IQ4_XS: low nibbles in scales_l, top two bits in the u16 scales_h */
      const unsigned h = (unsigned)blk[2] | (unsigned)blk[3] << 8;
      for (int j = 0; j < 8; j++) {
        const int ls = ((blk[4 + j / 2] >> (4 * (j % 2))) & 0xF) | (int)((h >> (2 * j)) & 3) << 4;
        sc[2 * j] = sc[2 * j + 1] = (int8_t)(ls - 32);
      }
      break;
    }
  }
}

void feri_qi8_super_codes(fer_dtype t, const uint8_t *blk, int8_t c[256]) {
  switch (t) {
    case FER_DTYPE_Q2_K: /* element 128n + 32j + l: bits 2j of qs[32n + l] */
      for (int n = 0; n < 2; n++)
        for (int j = 0; j < 4; j++)
          for (int l = 0; l < 32; l++) c[128 * n + 32 * j + l] = (int8_t)((blk[16 + 32 * n + l] >> (2 * j)) & 3);
      break;
    case FER_DTYPE_Q3_K: /* the same two bits (qs at 32), plus 4 where hmask[l] bit 4n + j is set, minus 4 */
      for (int n = 0; n < 2; n++)
        for (int j = 0; j < 4; j++)
          for (int l = 0; l < 32; l++) {
            const int lo = (blk[32 + 32 * n + l] >> (2 * j)) & 3, hb = (blk[l] >> (4 * n + j)) & 1;
            c[128 * n + 32 * j + l] = (int8_t)(lo + 4 * hb - 4);
          }
      break;
    case FER_DTYPE_Q4_K:
    case FER_DTYPE_Q5_K: { /* element 64j + l: low nibble of qs[32j + l]; 64j + 32 + l: its high nibble */
      const uint8_t *qs = blk + (t == FER_DTYPE_Q4_K ? 16 : 48), *qh = blk + 16;
      for (int j = 0; j < 4; j++)
        for (int l = 0; l < 32; l++) {
          int lo = qs[32 * j + l] & 0xF, hi = qs[32 * j + l] >> 4;
          if (t == FER_DTYPE_Q5_K) lo |= ((qh[l] >> (2 * j)) & 1) << 4, hi |= ((qh[l] >> (2 * j + 1)) & 1) << 4;
          c[64 * j + l] = (int8_t)lo;
          c[64 * j + 32 + l] = (int8_t)hi;
        }
      break;
    }
    case FER_DTYPE_Q6_K: /* element 128n + 32t + l: a nibble of ql[64n + 32 (t & 1) + l] (high for t >= 2),
                          * two bits 2t of qh[32n + l] on top, minus 32 */
      for (int n = 0; n < 2; n++)
        for (int tt = 0; tt < 4; tt++)
          for (int l = 0; l < 32; l++) {
            const uint8_t ql = blk[64 * n + 32 * (tt & 1) + l];
            const int v = (tt >= 2 ? ql >> 4 : ql & 0xF) | ((blk[128 + 32 * n + l] >> (2 * tt)) & 3) << 4;
            c[128 * n + 32 * tt + l] = (int8_t)(v - 32);
          }
      break;
    default: /* IQ4_XS: 32-block j from qs[16j ..]: low nibbles, then high nibbles */
      for (int j = 0; j < 8; j++)
        for (int l = 0; l < 16; l++) {
          const uint8_t b = blk[8 + 16 * j + l];
          c[32 * j + l] = feri_qi8_iq4nl[b & 0xF];
          c[32 * j + 16 + l] = feri_qi8_iq4nl[b >> 4];
        }
      break;
  }
}
