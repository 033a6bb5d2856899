/* version.c: ABI version, library version and the one-line build description. */
#include "ferrite.h"

#define FERI_STR2(x) #x
#define FERI_STR(x) FERI_STR2(x)

#if defined(__clang__)
#define FERI_COMPILER "clang " __clang_version__
#elif defined(__GNUC__)
#define FERI_COMPILER "gcc " __VERSION__
#else
#define FERI_COMPILER "unknown compiler"
#endif

#if defined(__OPTIMIZE__)
#define FERI_OPT "optimized"
#else
#define FERI_OPT "not optimized"
#endif

/* gcc defines __SANITIZE_ADDRESS__; clang answers __has_feature. */
#if defined(__SANITIZE_ADDRESS__)
#define FERI_ASAN " asan"
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FERI_ASAN " asan"
#endif
#endif
#ifndef FERI_ASAN
#define FERI_ASAN ""
#endif

#ifdef FERI_BUILD_SYSTEM
#define FERI_BUILT_BY FERI_STR(FERI_BUILD_SYSTEM)
#else
#define FERI_BUILT_BY "unknown"
#endif

uint32_t fer_abi_version(void) { return FER_ABI_VERSION; }

const char *fer_version_string(void) { return "0.1.0"; }

const char *fer_build_info(void) {
  /* CUDA presence is a link-time fact (real or stub object), so it is reported by
   * fer_cuda_is_built() rather than baked into this string. */
  return "ferrite 0.1.0; " FERI_COMPILER "; " FERI_OPT FERI_ASAN "; C std " FERI_STR(
      __STDC_VERSION__) "; built by " FERI_BUILT_BY;
}
