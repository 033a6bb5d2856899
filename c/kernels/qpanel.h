/* qpanel.h: block-quantized weights repacked into panels of sixteen rows for the 8-bit route's
 * AVX512-VNNI kernels (quant_i8.h), so that neither decode nor prefill rearranges codes per call.
 *
 * For the formats with blocks of 32 but MXFP4 (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL), rows
 * 16p .. 16p + 15 form panel p (rows past the matrix are zero); block b of a panel is one record
 * of 16 x the format's block bytes (the same bytes as the sixteen ggml blocks), at
 * data + (p * nb + b) * record_bytes:
 *   - the sixteen rows' f16 scales d (32 bytes), then for Q4_1 and Q5_1 their f16 minima m;
 *   - the codes quad-interleaved: tile q (q < 8) has row r's elements 4q .. 4q+3 in bytes
 *     4r .. 4r+3, as the unsigned codes quant_i8_body.inc's codes() gives (the nibbles or
 *     five-bit values; IQ4_NL's nibbles before its table; Q8_0's bytes xor 0x80). The nibble
 *     formats store tiles 2j and 2j+1 in the low and high nibbles of 64 bytes j (256 bytes);
 *     Q5_0 and Q5_1 follow with eight 64-bit masks of the fifth bits (bit 4r+e of mask q: row r's
 *     element 4q+e); Q8_0 stores the eight tiles (512 bytes).
 * For the super-block formats Q4_K, Q5_K and Q6_K, a record is super-block b of the sixteen rows
 * (16 x 144, 176 or 210 bytes, again the same bytes as the ggml blocks):
 *   - the sixteen f16 d, then (Q4_K, Q5_K) the sixteen f16 dmin;
 *   - the sub-scales as each row's own ggml bytes, four to a 32-bit lane: vector k lane r holds
 *     row r's scale bytes 4k .. 4k+3 (Q4_K, Q5_K: three vectors of the packed 6-bit scales and
 *     minima; Q6_K: four vectors of its sixteen int8 scales), so that one vector unpacks a
 *     sub-scale for all sixteen rows;
 *   - the codes as 64 tiles (tile T: row r's elements 4T .. 4T+3 in bytes 4r .. 4r+3, unsigned:
 *     Q6_K's offset by 32), tiles 2u and 2u+1 in the low and high nibbles of 64 bytes u (2048
 *     bytes); then Q5_K's fifth bits as 64 masks of 64 bits (bit 4r+e of mask T: row r's element
 *     4T+e), or Q6_K's bits 4 and 5 as 16 x 64 bytes (bits 2i, 2i+1 of byte 4r+e of unit u: row
 *     r's element 4(4u+i)+e).
 * The kernels compute quant_i8.h's definition from these records: the same bits as the ggml
 * blocks give. */
#ifndef FERI_KERNELS_QPANEL_H
#define FERI_KERNELS_QPANEL_H

#include <stddef.h>
#include <stdint.h>

#include "ferrite.h"

typedef struct feri_qpanel {
  fer_dtype dtype;
  int64_t rows, cols, nb; /* nb: blocks per row */
  size_t record_bytes;    /* one block of a panel */
  uint8_t *data;          /* (rows + 15) / 16 * nb records; 64-byte aligned */
} feri_qpanel;

/* 1 where this CPU has the kernels that read panels (the AVX512-VNNI table of quant_i8.h). */
int feri_qpanel_available(void);

/* 1 where w's format has a panel form (above). */
int feri_qpanel_supported(fer_dtype dtype);

/* Repacks a checked matrix (fer_qmatrix_check) of a supported format into a new panel; free it
 * with feri_qpanel_free. UNSUPPORTED for another format, OUT_OF_MEMORY. */
fer_status feri_qpanel_pack(const fer_qmatrix *w, feri_qpanel *out);

/* As feri_qpanel_pack, with the VNNI table's packer (simd, where the CPU has it) or the scalar
 * one: the same bytes. */
fer_status feri_qpanel_pack_with(const fer_qmatrix *w, int simd, feri_qpanel *out);

/* feri_qpanel_pack in two parts, so that a caller can release the source rows as it goes: the
 * panel's memory (UNSUPPORTED, OUT_OF_MEMORY), then panels p0 .. p1 - 1 (rows 16 p0 .. 16 p1 - 1). */
fer_status feri_qpanel_alloc(const fer_qmatrix *w, feri_qpanel *out);
void feri_qpanel_pack_range(const fer_qmatrix *w, feri_qpanel *out, int64_t p0, int64_t p1, int simd);

void feri_qpanel_free(feri_qpanel *p);

/* Record b of panel p. */
static inline const uint8_t *feri_qpanel_record(const feri_qpanel *p, int64_t panel, int64_t b) {
  return p->data + ((size_t)panel * (size_t)p->nb + (size_t)b) * p->record_bytes;
}

/* fer_matmul_quant_i8(pool, a, w, out, ...) reading w's blocks from panel (w's panels, from
 * feri_qpanel_pack) where the pool's table has panel kernels, else from w: the same bits either
 * way. A panel of another shape or format than w is ignored. */
fer_status feri_matmul_quant_i8_panel(fer_threadpool *pool, const fer_tensor *a, const fer_qmatrix *w,
                                      const feri_qpanel *panel, const fer_tensor *out, void *workspace,
                                      size_t workspace_bytes);

#endif
