/* rng.h: the counter-based generator behind seeded sampling. */
#ifndef FERI_SAMPLE_RNG_H
#define FERI_SAMPLE_RNG_H

#include <stdint.h>

/* A uniform double in [0, 1) that is a pure function of (seed, counter, stream): the SplitMix64
 * finalizer applied to a mix of the three, top 53 bits. No state, so the same seed gives the same
 * draws on any thread count and platform, and rewinding a sequence is recomputing. */
double feri_uniform(uint64_t seed, uint64_t counter, uint64_t stream);

#endif
