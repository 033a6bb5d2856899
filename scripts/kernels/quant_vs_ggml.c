/* quant_vs_ggml.c: ferrite's block decoders against ggml's own dequantize_row_* (libggml-base of
 * the llama.cpp peer, loaded with dlopen), bit for bit, on random blocks with every finite f16
 * scale pattern (normal, subnormal, zero, both signs). Not a Bazel test (it needs the peer build);
 * run by scripts/kernels/quant-vs-ggml.sh. Prints one line per format and exits 1 on a mismatch. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "kernels/quant.h"

typedef void (*ggml_dequant)(const void *x, float *y, int64_t k);

static unsigned state = 1;
static unsigned rnd(void) {
  state = state * 1664525u + 1013904223u;
  return state >> 8;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s LIBGGML_BASE_SO [BLOCKS]\n", argv[0]);
    return 2;
  }
  void *lib = dlopen(argv[1], RTLD_NOW);
  if (lib == NULL) {
    fprintf(stderr, "quant_vs_ggml: %s\n", dlerror());
    return 2;
  }
  const long n_blocks = argc > 2 ? atol(argv[2]) : 20000;
  static const struct {
    fer_dtype t;
    const char *sym;
    int scale_off[2];
  } formats[] = {
      {FER_DTYPE_Q4_0, "dequantize_row_q4_0", {0, -1}},    {FER_DTYPE_Q4_1, "dequantize_row_q4_1", {0, 2}},
      {FER_DTYPE_Q8_0, "dequantize_row_q8_0", {0, -1}},    {FER_DTYPE_Q5_0, "dequantize_row_q5_0", {0, -1}},
      {FER_DTYPE_Q5_1, "dequantize_row_q5_1", {0, 2}},     {FER_DTYPE_IQ4_NL, "dequantize_row_iq4_nl", {0, -1}},
      {FER_DTYPE_Q2_K, "dequantize_row_q2_K", {80, 82}},   {FER_DTYPE_Q3_K, "dequantize_row_q3_K", {108, -1}},
      {FER_DTYPE_Q4_K, "dequantize_row_q4_K", {0, 2}},     {FER_DTYPE_Q5_K, "dequantize_row_q5_K", {0, 2}},
      {FER_DTYPE_Q6_K, "dequantize_row_q6_K", {208, -1}},  {FER_DTYPE_IQ4_XS, "dequantize_row_iq4_xs", {0, -1}},
  };
  int failed = 0;
  for (size_t f = 0; f < sizeof formats / sizeof formats[0]; f++) {
    ggml_dequant fn = (ggml_dequant)dlsym(lib, formats[f].sym);
    if (fn == NULL) {
      fprintf(stderr, "quant_vs_ggml: %s missing\n", formats[f].sym);
      return 2;
    }
    const fer_dtype t = formats[f].t;
    const size_t bb = feri_qblock_bytes(t);
    const int64_t be = feri_qblock_elems(t);
    uint8_t blk[256];
    float mine[256], theirs[256], from_codes[256];
    long mismatches = 0;
    for (long n = 0; n < n_blocks; n++) {
      for (size_t i = 0; i < bb; i++) blk[i] = (uint8_t)rnd();
      for (int s = 0; s < 2; s++) {
        if (formats[f].scale_off[s] < 0) continue;
        uint16_t h = (uint16_t)rnd();
        if ((h & 0x7c00) == 0x7c00) h &= 0xbfff; /* NaN / inf -> finite: the check refuses those */
        memcpy(blk + formats[f].scale_off[s], &h, 2);
      }
      feri_qblock_dequant(t, blk, mine);
      fn(blk, theirs, be);
      /* and the kernels' codes-times-scales form of the same values */
      int8_t codes[256];
      float sc[16], off[16];
      feri_qblock_codes(t, blk, codes);
      feri_qblock_scales(t, blk, sc, off);
      const int sub = feri_qblock_sub(t);
      for (int64_t i = 0; i < be; i++) {
        const float v = (float)codes[i] * sc[i / sub];
        from_codes[i] = feri_qblock_has_offset(t) ? v + off[i / sub] : v;
      }
      if (memcmp(mine, theirs, (size_t)be * 4) != 0 || memcmp(from_codes, theirs, (size_t)be * 4) != 0) {
        if (mismatches++ < 3)
          for (int64_t i = 0; i < be; i++)
            if (memcmp(&mine[i], &theirs[i], 4) != 0 || memcmp(&from_codes[i], &theirs[i], 4) != 0) {
              fprintf(stderr, "  %s block %ld element %lld: ferrite %.9g (codes %.9g), ggml %.9g\n",
                      feri_dtype_name(t), n, (long long)i, mine[i], from_codes[i], theirs[i]);
              break;
            }
      }
    }
    printf("%-7s %ld blocks, %ld mismatching\n", feri_dtype_name(t), n_blocks, mismatches);
    failed |= mismatches != 0;
  }
  return failed;
}
