/* gelu.h: GeGLU with the tanh GELU at the precision of llama.cpp's CPU path (Gemma 3's FFN).
 *
 * llama.cpp looks GELU up in a table of every f16 input: x is rounded to f16, and the table holds
 * gelu(x) = 0.5 x (1 + tanh(sqrt(2 / pi) x (1 + 0.044715 x^2))) computed in f32 and rounded to
 * f16; x <= -10 gives 0 and x >= 10 gives x. feri_gelu_tanh_lut builds the same table (as f32, so
 * that a lookup needs no conversion back); feri_geglu applies it, times up, on the pool's rows
 * through the rowops table of its ISA level (the same bits at every level). */
#ifndef FERI_KERNELS_GELU_H
#define FERI_KERNELS_GELU_H

#include <stddef.h>
#include <stdint.h>

#include "ferrite.h"

enum { FERI_GELU_LUT_SIZE = 65536 }; /* one f32 per f16 bit pattern */

/* lut[h] = the f16-rounded gelu of the f16 value with bits h (NaN for NaN inputs), as above. */
void feri_gelu_tanh_lut(float *lut);

/* gate[i] = geglu(gate[i], up[i]) for i < rows * cols (rowops.h's geglu_lut_f32), the rows split
 * over the pool. */
fer_status feri_geglu(fer_threadpool *pool, const float *lut, float *gate, const float *up, int64_t rows,
                      int64_t cols);

#endif
