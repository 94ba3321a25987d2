/* src/base/rng.c - PCG32 XSH-RR, see rng.h for the reference. */
#include "src/base/rng.h"

#include <math.h>

void sd_rng_seed(struct sd_rng *r, uint64_t seed, uint64_t stream)
{
	r->state = 0;
	r->inc = (stream << 1u) | 1u;
	(void)sd_rng_u32(r);
	r->state += seed;
	(void)sd_rng_u32(r);
}

uint32_t sd_rng_u32(struct sd_rng *r)
{
	uint64_t old = r->state;
	r->state = old * 6364136223846793005ULL + r->inc;
	uint32_t xorshifted = (uint32_t)(((old >> 18u) ^ old) >> 27u);
	uint32_t rot = (uint32_t)(old >> 59u);
	return (xorshifted >> rot) | (xorshifted << ((-rot) & 31));
}

uint32_t sd_rng_below(struct sd_rng *r, uint32_t bound)
{
	/* Rejection of the low 2^32 mod bound values removes modulo bias. */
	uint32_t threshold = (uint32_t)(-bound) % bound;
	for (;;) {
		uint32_t v = sd_rng_u32(r);
		if (v >= threshold)
			return v % bound;
	}
}

float sd_rng_uniform(struct sd_rng *r)
{
	return (float)(sd_rng_u32(r) >> 8) * (1.0f / 16777216.0f);
}

float sd_rng_normal(struct sd_rng *r)
{
	/* 1 - u keeps the logarithm's argument in (0, 1]. */
	float u1 = 1.0f - sd_rng_uniform(r);
	float u2 = sd_rng_uniform(r);
	return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853071795864f * u2);
}
