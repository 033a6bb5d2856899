/* qpanel.c: the repacking of qpanel.h (portable C; the kernels that read panels live in the
 * x86 bodies of quant_i8.h). */
#include "kernels/qpanel.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/dtype.h"
#include "core/status.h"
#include "kernels/quant.h"
#include "kernels/quant_i8.h"

int feri_qpanel_available(void) { return feri_qi8_ops_for(FER_ISA_AVX512)->pdot != NULL; }

int feri_qpanel_supported(fer_dtype t) {
  return t == FER_DTYPE_Q4_0 || t == FER_DTYPE_Q4_1 || t == FER_DTYPE_Q5_0 || t == FER_DTYPE_Q5_1 ||
         t == FER_DTYPE_Q8_0 || t == FER_DTYPE_IQ4_NL || t == FER_DTYPE_Q4_K || t == FER_DTYPE_Q5_K ||
         t == FER_DTYPE_Q6_K;
}

/* Element k's unsigned code (as codes() of quant_i8_body.inc gives it) of a block, and its fifth
 * bit (Q5_0, Q5_1) apart. */
static uint8_t code_of(fer_dtype t, const uint8_t *blk, int k, uint8_t *bit5) {
  *bit5 = 0;
  if (t == FER_DTYPE_Q8_0) return (uint8_t)(blk[2 + k] ^ 0x80);
  const size_t off = t == FER_DTYPE_Q4_1 ? 4 : t == FER_DTYPE_Q5_0 ? 6 : t == FER_DTYPE_Q5_1 ? 8 : 2;
  const uint8_t n = k < 16 ? blk[off + k] & 0xF : blk[off + k - 16] >> 4;
  if (t == FER_DTYPE_Q5_0 || t == FER_DTYPE_Q5_1) {
    const uint8_t *qh = blk + (t == FER_DTYPE_Q5_0 ? 2 : 4);
    *bit5 = (uint8_t)((qh[k / 8] >> (k % 8)) & 1);
  }
  return n;
}

/* One record of super-blocks (qpanel.h), element by element. */
static void pack_super(fer_dtype t, const uint8_t *const blk[16], uint8_t *rec) {
  const int has_min = t != FER_DTYPE_Q6_K;
  const size_t doff = feri_qi8_super_d_offset(t), rec_bytes = 16 * feri_qblock_bytes(t);
  memset(rec, 0, rec_bytes);
  uint8_t *s = rec + (has_min ? 64 : 32), *c = s + (has_min ? 192 : 256), *hi = c + 2048;
  for (int r = 0; r < 16; r++) {
    memcpy(rec + 2 * r, blk[r] + doff, 2);
    if (has_min) memcpy(rec + 32 + 2 * r, blk[r] + doff + 2, 2);
    for (int k = 0; k < (has_min ? 3 : 4); k++) memcpy(s + 64 * k + 4 * r, blk[r] + (has_min ? 4 : 192) + 4 * k, 4);
    int8_t code[256];
    feri_qi8_super_codes(t, blk[r], code);
    for (int e = 0; e < 256; e++) {
      const int tile = e / 4, byte = 4 * r + e % 4;
      const unsigned u = (unsigned)(code[e] + (t == FER_DTYPE_Q6_K ? 32 : 0)); /* Q6_K's offset */
      c[64 * (tile / 2) + byte] |= (uint8_t)((u & 15) << (tile % 2 ? 4 : 0));
      if (t == FER_DTYPE_Q5_K && (u & 16)) hi[8 * tile + byte / 8] |= (uint8_t)(1u << (byte % 8));
      if (t == FER_DTYPE_Q6_K) hi[64 * (tile / 4) + byte] |= (uint8_t)((u >> 4) << (2 * (tile % 4)));
    }
  }
}

enum { HUGE_BYTES = 2 << 20 };

fer_status feri_qpanel_alloc(const fer_qmatrix *w, feri_qpanel *out) {
  memset(out, 0, sizeof *out);
  const fer_dtype t = w->dtype;
  if (!feri_qpanel_supported(t))
    return feri_fail(FER_STATUS_UNSUPPORTED, "qpanel: %s has no panel form", feri_dtype_name(t));
  const size_t rec = 16 * feri_qblock_bytes(t);
  const int64_t nb = w->cols / feri_qblock_elems(t), panels = (w->rows + 15) / 16;
  const size_t total = (size_t)panels * (size_t)nb * rec;
  uint8_t *data = NULL;
  if (total >= HUGE_BYTES) {
    /* a large panel on 2 MiB pages where the kernel gives them (transparent huge pages, asked
     * for): the kernels stream it, the hardware prefetchers stop at page boundaries and each
     * 4 KiB page costs a TLB entry (3B Q4_0 decode, 2 threads: 18.5 against 21-24 tok/s). Only
     * whole huge pages are asked for, so the tail costs no more than its 4 KiB pages. */
    void *q = NULL; /* posix_memalign: C11's aligned_alloc wants the size a multiple of the alignment */
    data = posix_memalign(&q, HUGE_BYTES, (total + 4095) / 4096 * 4096) == 0 ? q : NULL;
    if (data) (void)madvise(data, total / HUGE_BYTES * HUGE_BYTES, MADV_HUGEPAGE); /* advice only */
  } else if (total) {
    data = aligned_alloc(64, (total + 63) / 64 * 64);
  }
  if (total && !data) return feri_fail(FER_STATUS_OUT_OF_MEMORY, "qpanel: %zu bytes", total);
  *out = (feri_qpanel){t, w->rows, w->cols, nb, rec, data};
  return FER_STATUS_OK;
}

void feri_qpanel_pack_range(const fer_qmatrix *w, feri_qpanel *out, int64_t p0, int64_t p1, int simd) {
  const fer_dtype t = w->dtype;
  const feri_qi8_ops *ops = feri_qi8_ops_for(FER_ISA_AVX512);
  if (!ops->ppack) simd = 0;
  const size_t bb = feri_qblock_bytes(t), rec = out->record_bytes;
  const int64_t nb = out->nb;
  const int has_min = t == FER_DTYPE_Q4_1 || t == FER_DTYPE_Q5_1;
  const int five = t == FER_DTYPE_Q5_0 || t == FER_DTYPE_Q5_1;
  static const uint8_t zero[256]; /* rows past the matrix: zero blocks (the largest is Q6_K's 210 bytes) */
  for (int64_t p = p0; p < p1; p++)
    for (int64_t b = 0; b < nb; b++) {
      uint8_t *r0 = out->data + ((size_t)p * (size_t)nb + (size_t)b) * rec;
      const uint8_t *blks[16];
      for (int r = 0; r < 16; r++)
        blks[r] = 16 * p + r < w->rows ? (const uint8_t *)w->data + (16 * p + r) * w->row_stride + b * (int64_t)bb
                                       : zero;
      if (simd) { /* the VNNI table's packer */
        ops->ppack(t, blks, r0);
        continue;
      }
      if (feri_qi8_is_super(t)) {
        pack_super(t, blks, r0);
        continue;
      }
      memset(r0, 0, rec);
      uint8_t *codes = r0 + (has_min ? 64 : 32);
      uint64_t hb[8] = {0};
      for (int r = 0; r < 16; r++) {
        memcpy(r0 + 2 * r, blks[r], 2);
        if (has_min) memcpy(r0 + 32 + 2 * r, blks[r] + 2, 2);
        for (int k = 0; k < 32; k++) {
          uint8_t bit5;
          const uint8_t c = code_of(t, blks[r], k, &bit5);
          const int q = k / 4, byte = 4 * r + k % 4;
          if (t == FER_DTYPE_Q8_0) codes[64 * q + byte] = c;
          else codes[64 * (q / 2) + byte] |= (uint8_t)(q % 2 ? c << 4 : c);
          if (bit5) hb[q] |= 1ull << byte;
        }
      }
      if (five) memcpy(codes + 256, hb, sizeof hb);
    }
}

fer_status feri_qpanel_pack(const fer_qmatrix *w, feri_qpanel *out) { return feri_qpanel_pack_with(w, 1, out); }

fer_status feri_qpanel_pack_with(const fer_qmatrix *w, int simd, feri_qpanel *out) {
  fer_status st = feri_qpanel_alloc(w, out);
  if (st == FER_STATUS_OK) feri_qpanel_pack_range(w, out, 0, (w->rows + 15) / 16, simd);
  return st;
}

void feri_qpanel_free(feri_qpanel *p) {
  if (!p) return;
  free(p->data);
  memset(p, 0, sizeof *p);
}
