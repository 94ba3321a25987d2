/* src/base/rng.h - deterministic random numbers for initialisation, shuffling
 * and synthetic data.  PCG32 (O'Neill 2014, "PCG: a family of simple fast
 * space-efficient statistically good algorithms", pcg-random.org, the
 * XSH-RR 64/32 variant).  The whole state is two uint64 values, so a
 * checkpoint stores it and a resumed run draws the same numbers. */
#ifndef SD_BASE_RNG_H
#define SD_BASE_RNG_H

#include <stdint.h>

struct sd_rng {
	uint64_t state;
	uint64_t inc;   /* stream selector, always odd */
};

/* Seeds the generator; different (seed, stream) pairs give independent streams. */
void sd_rng_seed(struct sd_rng *r, uint64_t seed, uint64_t stream);
/* Uniform 32-bit value. */
uint32_t sd_rng_u32(struct sd_rng *r);
/* Uniform integer in [0, bound) without modulo bias; bound > 0. */
uint32_t sd_rng_below(struct sd_rng *r, uint32_t bound);
/* Uniform float in [0, 1) with 24 random bits. */
float sd_rng_uniform(struct sd_rng *r);
/* Standard normal (Box-Muller; uses two uniforms per call, no caching, so the
 * state fully describes the stream). */
float sd_rng_normal(struct sd_rng *r);

#endif
