/* version.c: ABI version, library version, the one-line build description, and the struct layouts
 * asserted at compile time. EVIDENCE: C-ABI-002 */
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

/* The layout the Rust declarations assert too (claim C-ABI-002): a change here is an ABI change. */
#include <stddef.h>
_Static_assert(sizeof(fer_tensor) == 144, "fer_tensor size is part of ABI version 1");
_Static_assert(_Alignof(fer_tensor) == 8, "fer_tensor alignment");
_Static_assert(offsetof(fer_tensor, data) == 0, "fer_tensor.data offset");
_Static_assert(offsetof(fer_tensor, dtype) == 8, "fer_tensor.dtype offset");
_Static_assert(offsetof(fer_tensor, rank) == 12, "fer_tensor.rank offset");
_Static_assert(offsetof(fer_tensor, shape) == 16, "fer_tensor.shape offset");
_Static_assert(offsetof(fer_tensor, strides) == 80, "fer_tensor.strides offset");
_Static_assert(sizeof(fer_threadpool_options) == 16, "fer_threadpool_options size");
_Static_assert(_Alignof(fer_threadpool_options) == 4, "fer_threadpool_options alignment");
_Static_assert(offsetof(fer_threadpool_options, struct_size) == 0, "struct_size offset");
_Static_assert(offsetof(fer_threadpool_options, n_threads) == 4, "n_threads offset");
_Static_assert(offsetof(fer_threadpool_options, isa) == 8, "isa offset");
_Static_assert(offsetof(fer_threadpool_options, reserved) == 12, "reserved offset");
_Static_assert(sizeof(fer_status) == 4 && sizeof(fer_dtype) == 4 && sizeof(fer_isa) == 4,
               "enum typedefs are int32_t");
