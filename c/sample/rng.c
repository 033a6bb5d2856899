/* rng.c: SplitMix64-based counter generator (Steele, Lea, Flood 2014 finalizer). */
#include "sample/rng.h"

#include "core/status.h"

static uint64_t feri_mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double feri_uniform(uint64_t seed, uint64_t counter, uint64_t stream) {
  /* Two rounds so that neighbouring counters and streams are decorrelated. */
  uint64_t z = feri_mix64(seed + 0x9e3779b97f4a7c15ull * (counter + 1));
  z = feri_mix64(z ^ (0xd1b54a32d192ed03ull * (stream + 1)));
  return (double)(z >> 11) * 0x1.0p-53;
}

fer_status fer_sampling_uniform(uint64_t seed, uint64_t counter, double *out_uniform) {
  feri_error_clear();
  if (out_uniform == NULL) return feri_fail(FER_STATUS_NULL_ARG, "fer_sampling_uniform: out_uniform is NULL");
  *out_uniform = feri_uniform(seed, counter, 0);
  return FER_STATUS_OK;
}
