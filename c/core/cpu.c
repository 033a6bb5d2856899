/* cpu.c: CPUID-based feature detection. */
#include "core/cpu.h"

#include <stdatomic.h>

#include "core/status.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static uint64_t feri_xgetbv0(void) {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((uint64_t)hi << 32) | lo;
}

static uint64_t feri_detect(void) {
  unsigned a, b, c, d;
  uint64_t f = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
  if (c & bit_SSE4_2) f |= FER_CPU_FEATURE_SSE42;
  /* AVX state must be enabled by the OS (OSXSAVE and XCR0 bits 1-2), not only present. */
  int os_avx = (c & bit_OSXSAVE) && (feri_xgetbv0() & 0x6) == 0x6;
  /* AVX-512 also needs the opmask, ZMM0-15 upper halves and ZMM16-31 state (XCR0 bits 5-7): an
   * OS that saves only YMM would lose them at every context switch. */
  int os_avx512 = os_avx && (feri_xgetbv0() & 0xe6) == 0xe6;
  if (os_avx && (c & bit_AVX)) f |= FER_CPU_FEATURE_AVX;
  if (os_avx && (c & bit_FMA)) f |= FER_CPU_FEATURE_FMA;
  if (os_avx && (c & bit_F16C)) f |= FER_CPU_FEATURE_F16C;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    if (os_avx && (b & bit_AVX2)) f |= FER_CPU_FEATURE_AVX2;
    if (os_avx512 && (b & bit_AVX512F)) f |= FER_CPU_FEATURE_AVX512F;
    if (os_avx512 && (b & bit_AVX512BW)) f |= FER_CPU_FEATURE_AVX512BW;
    if (os_avx512 && (b & bit_AVX512DQ)) f |= FER_CPU_FEATURE_AVX512DQ;
    if (os_avx512 && (b & bit_AVX512VL)) f |= FER_CPU_FEATURE_AVX512VL;
    if (os_avx512 && (c & bit_AVX512VNNI)) f |= FER_CPU_FEATURE_AVX512VNNI;
  }
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) {
    if (os_avx && (a & (1u << 4))) f |= FER_CPU_FEATURE_AVXVNNI;
    if (os_avx512 && (a & (1u << 5))) f |= FER_CPU_FEATURE_AVX512BF16;
  }
  return f;
}
#else
static uint64_t feri_detect(void) { return 0; }
#endif

/* Hardware facts cannot change while the process runs, so caching them is safe; CPUID traps to
 * the hypervisor on VMs and would cost microseconds per kernel call otherwise. */
static _Atomic uint64_t feri_features_cache; /* bit 63 marks "detected" */

uint64_t fer_cpu_features(void) {
  uint64_t v = atomic_load_explicit(&feri_features_cache, memory_order_acquire);
  if (v == 0) {
    v = feri_detect() | (1ull << 63);
    atomic_store_explicit(&feri_features_cache, v, memory_order_release);
  }
  return v & ~(1ull << 63);
}

fer_status feri_isa_resolve(fer_isa requested, fer_isa *out_isa) {
  const uint64_t avx2_set = FER_CPU_FEATURE_AVX2 | FER_CPU_FEATURE_FMA | FER_CPU_FEATURE_F16C;
  const uint64_t avx512_set = avx2_set | FER_CPU_FEATURE_AVX512F | FER_CPU_FEATURE_AVX512BW |
                              FER_CPU_FEATURE_AVX512VL | FER_CPU_FEATURE_AVX512DQ;
  const uint64_t f = fer_cpu_features();
  const int has_avx2 = (f & avx2_set) == avx2_set, has_avx512 = (f & avx512_set) == avx512_set;
  switch (requested) {
    case FER_ISA_AUTO:
      *out_isa = has_avx512 ? FER_ISA_AVX512 : has_avx2 ? FER_ISA_AVX2 : FER_ISA_PORTABLE;
      return FER_STATUS_OK;
    case FER_ISA_PORTABLE: *out_isa = FER_ISA_PORTABLE; return FER_STATUS_OK;
    case FER_ISA_AVX2:
      if (!has_avx2)
        return feri_fail(FER_STATUS_UNSUPPORTED, "isa AVX2 asked for, but this CPU lacks "
                                                 "AVX2+FMA+F16C");
      *out_isa = FER_ISA_AVX2;
      return FER_STATUS_OK;
    case FER_ISA_AVX512:
      if (!has_avx512)
        return feri_fail(FER_STATUS_UNSUPPORTED, "isa AVX512 asked for, but this CPU (or its OS) "
                                                 "lacks AVX2+FMA+F16C+AVX512F/BW/VL/DQ");
      *out_isa = FER_ISA_AVX512;
      return FER_STATUS_OK;
    default: return feri_fail(FER_STATUS_INVALID_ARG, "unknown isa %d", (int)requested);
  }
}
