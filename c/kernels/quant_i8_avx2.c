/* quant_i8_avx2.c: the AVX2 table of quant_i8.h, from one body (quant_i8_body.inc with
 * quant_i8_super_body.inc) that quant_i8_vnni.c compiles again for AVX512-VNNI: the forms differ
 * only in the instructions for the exact integer block sums. Two files, not one, so that the two
 * instantiations (each a minute of compile at -O2) build in parallel. */
#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/avx2_util.h"
#include "kernels/quant.h"
#include "kernels/quant_i8.h"

#define QI8_TARGET FERI_AVX2
#define QI8_NAME(x) x##_avx2
#define QI8_VNNI 0
#include "kernels/quant_i8_body.inc"
#include "kernels/quant_i8_super_body.inc"

const feri_qi8_ops feri_qi8_ops_avx2 = {
    .quantize = quantize_avx2, .quantize_k = quantize_k_avx2, .dot = dot_avx2};

#endif
