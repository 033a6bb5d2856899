/* quant_i8_vnni.c: the AVX512-VNNI table of quant_i8.h, the body quant_i8_avx2.c compiles for AVX2
 * (quant_i8_body.inc with quant_i8_super_body.inc) compiled for VNNI: the forms differ only in the
 * instructions for the exact integer block sums. */
#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/avx2_util.h"
#include "kernels/quant.h"
#include "kernels/quant_i8.h"

#define QI8_TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))
#define QI8_NAME(x) x##_vnni
#define QI8_VNNI 1
#include "kernels/quant_i8_body.inc"
#include "kernels/quant_i8_super_body.inc"

const feri_qi8_ops feri_qi8_ops_avx512vnni = {
    .quantize = quantize_vnni, .quantize_k = quantize_k_vnni, .dot = dot_vnni, .pdot = pdot_vnni,
    .ppack = ppack_vnni};

#endif
