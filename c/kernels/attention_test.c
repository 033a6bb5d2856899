/* attention_test.c: the shared exponential (claim C-ATT-004) against exp() in double over a
 * sweep of every 97th f32 bit pattern in [-110, 95] plus the special values, and the AVX2 and
 * portable levels of fer_attention's exp_shift (values and their sum) and row_max against each
 * other bit for bit. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/cpu.h"
#include "kernels/attention.h"
#include "kernels/fexp.h"
#include "testing/check.h"

static float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Distance in f32 ulps between got and the double want (at want's binade; subnormals use the
 * subnormal spacing). */
static double ulps(float got, double want) {
  if (isinf(want) || want > 3.4028234663852886e38) return isinf(got) ? 0.0 : 1e9;
  double spacing = want < 1.1754943508222875e-38 ? ldexp(1.0, -149) : ldexp(1.0, ilogb(want) - 23);
  return fabs((double)got - want) / spacing;
}

static void test_fexp_accuracy(void) {
  double worst = 0.0;
  float worst_x = 0.0f;
  long n = 0;
  for (uint64_t u = 0; u <= 0xffffffffu; u += 97) {
    const float x = bits_f32((uint32_t)u);
    if (!(x >= -110.0f && x <= 95.0f)) continue;
    const double e = ulps(feri_fexp(x), exp((double)x));
    if (e > worst) {
      worst = e;
      worst_x = x;
    }
    n++;
  }
  printf("fexp: %ld arguments, worst %.3f ulp at %a\n", n, worst, (double)worst_x);
  CHECK(n > 1000000);
  CHECK(worst <= 2.0);
  CHECK(isnan(feri_fexp(NAN)));
  CHECK(feri_fexp(INFINITY) == INFINITY && feri_fexp(-INFINITY) == 0.0f);
  CHECK(feri_fexp(0.0f) == 1.0f && feri_fexp(-0.0f) == 1.0f);
  CHECK(feri_fexp(89.0f) == INFINITY && feri_fexp(-105.0f) == 0.0f);
}

static void test_levels_agree(void) {
  fer_isa isa;
  if (feri_isa_resolve(FER_ISA_AVX2, &isa) != FER_STATUS_OK) {
    printf("SKIPPED: attention_test AVX2 exp_shift (not on this CPU)\n");
    return;
  }
  enum { N = 4099 };
  static float a[N], b[N];
  long mismatches = 0;
  for (uint64_t base = 0; base <= 0xffffffffu; base += (uint64_t)N * 211) {
    for (int i = 0; i < N; i++) a[i] = b[i] = bits_f32((uint32_t)(base + (uint64_t)i * 211));
    const float ma = feri_attention_ops_for(FER_ISA_PORTABLE)->row_max(a, N, -INFINITY);
    const float mb = feri_attention_ops_for(FER_ISA_AVX2)->row_max(b, N, -INFINITY);
    if (!(ma == mb || (isnan(ma) && isnan(mb)))) mismatches++;
    const float sa = feri_attention_ops_for(FER_ISA_PORTABLE)->exp_shift(a, N, 0.5f);
    const float sb = feri_attention_ops_for(FER_ISA_AVX2)->exp_shift(b, N, 0.5f);
    if (memcmp(&sa, &sb, 4) != 0 && !(isnan(sa) && isnan(sb))) mismatches++;
    for (int i = 0; i < N; i++)
      if (memcmp(&a[i], &b[i], 4) != 0 && !(isnan(a[i]) && isnan(b[i]))) mismatches++;
  }
  printf("exp_shift / row_max: portable and AVX2 differ in %ld values\n", mismatches);
  CHECK(mismatches == 0);
}

int main(void) {
  test_fexp_accuracy();
  test_levels_agree();
  return feri_test_finish("attention_test");
}
