/* dtype_test.c: the portable f16/bf16 conversions against hand-checked values and, where the CPU
 * has F16C, against the hardware on every f16 and on a dense sample of f32 bit patterns.
 * EVIDENCE: C-CONV-001 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#include "core/dtype.h"
#include "testing/check.h"

__attribute__((target("f16c,avx"))) static uint16_t hw_f32_to_f16(float f) {
  __m128i h = _mm_cvtps_ph(_mm_set1_ps(f), _MM_FROUND_TO_NEAREST_INT);
  return (uint16_t)_mm_extract_epi16(h, 0);
}

__attribute__((target("f16c,avx"))) static float hw_f16_to_f32(uint16_t h) {
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_set1_epi16((short)h)));
}

static void check_known_values(void) {
  CHECK(feri_f32_to_f16(1.0f) == 0x3c00);
  CHECK(feri_f32_to_f16(-2.0f) == 0xc000);
  CHECK(feri_f32_to_f16(65504.0f) == 0x7bff);
  CHECK(feri_f32_to_f16(65519.99f) == 0x7bff);
  CHECK(feri_f32_to_f16(65520.0f) == 0x7c00); /* the tie rounds to even: infinity */
  CHECK(feri_f32_to_f16(ldexpf(1.0f, -24)) == 0x0001);
  CHECK(feri_f32_to_f16(ldexpf(1.0f, -25)) == 0x0000); /* tie to even: zero */
  CHECK(feri_f32_to_f16(ldexpf(1.5f, -25)) == 0x0001);
  CHECK(feri_f32_to_f16(-0.0f) == 0x8000);
  CHECK(feri_f32_to_f16(INFINITY) == 0x7c00);
  CHECK((feri_f32_to_f16(NAN) & 0x7e00) == 0x7e00);
  CHECK(feri_f16_to_f32(0x0001) == ldexpf(1.0f, -24));
  CHECK(feri_f16_to_f32(0x03ff) == ldexpf(1023.0f, -24));
  CHECK(feri_f16_to_f32(0x7bff) == 65504.0f);
  CHECK(isnan(feri_f16_to_f32(0x7c01)));
  CHECK(feri_f32_to_bf16(1.0f) == 0x3f80);
  CHECK(feri_f32_to_bf16(feri_bits_f32(0x3f808000u)) == 0x3f80); /* tie, even stays */
  CHECK(feri_f32_to_bf16(feri_bits_f32(0x3f818000u)) == 0x3f82); /* tie, odd rounds up */
  CHECK(feri_f32_to_bf16(feri_bits_f32(0x3f808001u)) == 0x3f81);
  CHECK(feri_f32_to_bf16(feri_bits_f32(0x7f7fffffu)) == 0x7f80); /* max f32 rounds to inf */
  CHECK(feri_f32_to_bf16(feri_bits_f32(0x7f800001u)) == 0x7fc0); /* sNaN: quiet, never inf */
  CHECK(feri_f32_to_bf16(feri_bits_f32(0xffffffffu)) == 0xffff);
  CHECK(feri_bf16_to_f32(0x3f80) == 1.0f);
}

static void check_against_hardware(void) {
  const uint64_t need = FER_CPU_FEATURE_F16C | FER_CPU_FEATURE_AVX;
  if ((fer_cpu_features() & need) != need) {
    printf("SKIPPED: hardware comparison, this CPU lacks F16C\n");
    return;
  }
  int bad = 0;
  for (uint32_t h = 0; h <= 0xffff; h++) {
    float want = hw_f16_to_f32((uint16_t)h), got = feri_f16_to_f32((uint16_t)h);
    if (feri_f32_bits(want) != feri_f32_bits(got) && bad++ < 5)
      fprintf(stderr, "f16 %04x: hardware %08x, portable %08x\n", h, feri_f32_bits(want),
              feri_f32_bits(got));
  }
  /* A dense sample of all f32 patterns (stride 97 hits every exponent and many mantissas), plus
   * every pattern around the f16 rounding boundaries. */
  for (uint64_t u = 0; u <= 0xffffffffu; u += 97) {
    float f = feri_bits_f32((uint32_t)u);
    uint16_t want = hw_f32_to_f16(f), got = feri_f32_to_f16(f);
    if (want != got && bad++ < 10)
      fprintf(stderr, "f32 %08x: hardware %04x, portable %04x\n", (uint32_t)u, want, got);
  }
  const uint32_t edges[] = {0x33000000u, 0x38800000u, 0x477fe000u, 0x477ff000u, 0x7f800000u};
  for (size_t e = 0; e < sizeof edges / sizeof edges[0]; e++)
    for (uint32_t d = 0; d < 0x4000; d++)
      for (uint32_t s = 0; s < 2; s++) {
        uint32_t u = (edges[e] - 0x2000 + d) | (s << 31);
        float f = feri_bits_f32(u);
        uint16_t want = hw_f32_to_f16(f), got = feri_f32_to_f16(f);
        if (want != got && bad++ < 10)
          fprintf(stderr, "f32 %08x: hardware %04x, portable %04x\n", u, want, got);
      }
  CHECK(bad == 0);
}

int main(void) {
  check_known_values();
  check_against_hardware();
  return feri_test_finish("dtype_test");
}
