/* tests/engine/bf16-test.h - what the bf16 tests share (test-conv-bf16,
 * test-linear-bf16, test-resume-bf16).
 *
 * bf16_band_check, the training check: a few steps of a model in fp32 (f),
 * in fp32 on bf16-rounded input data (p) and in bf16 (h), same seed and
 * samples.  The
 * spread |p - f| / f (relative, worst over the steps) is what rounding the
 * data alone does; bf16 rounds every later operand too, so its losses must
 * stay within factor times that spread of fp32's, and must differ from
 * them (else bf16 did not run).  Prints every step and two check lines
 * (tests/check.h). */
#ifndef SD_TESTS_BF16_TEST_H
#define SD_TESTS_BF16_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine/layers.h"
#include "tests/check.h"

/* Exits 77 (SKIP) with the reason where oneDNN has no bf16 kernels. */
static inline void bf16_require_kernels(void)
{
	if (!sd_conv2d_bf16_available()) {
		fprintf(stderr, "SKIP: oneDNN has no bf16 kernels here (%s)\n",
		        sd_conv2d_onednn_version() ? "CPU without AVX512-BF16 or AMX"
		                                   : "built without oneDNN");
		exit(77);
	}
}

/* n floats, uniform in [-scale/2, scale/2) from a linear congruential
 * sequence started at seed (all 0 for scale 0); exits when out of memory.
 * The caller frees. */
static inline float *fill(size_t n, unsigned seed, float scale)
{
	float *p = calloc(n ? n : 1, sizeof *p);
	if (!p)
		exit(1);
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1664525u + 1013904223u;
		p[i] = scale * ((float)(seed >> 8) / 16777216.0f - 0.5f);
	}
	return p;
}

static inline void bf16_band_check(const char *model, int steps, const double *f,
                                   const double *p, const double *h, double factor)
{
	double band = 0.0, worst_ratio = 0.0, moved = 0.0;
	for (int i = 0; i < steps; i++)
		if (fabs(p[i] - f[i]) / f[i] > band)
			band = fabs(p[i] - f[i]) / f[i];
	band *= factor;
	for (int i = 0; i < steps; i++) {
		double d = fabs(h[i] - f[i]) / f[i];
		if (d > moved)
			moved = d;
		if (d / band > worst_ratio)
			worst_ratio = d / band;
		printf("%-9s step %d loss fp32 %.6f  fp32 on bf16-rounded data %.6f  bf16 %.6f\n",
		       model, i + 1, f[i], p[i], h[i]);
	}
	check_report(worst_ratio <= 1.0,
	             "%-9s %d steps: bf16 loss within %.2e of fp32 (worst %.2e = %.2f x the "
	             "data-rounding spread; band %.0f x)", model, steps, band, moved,
	             moved * factor / band, factor);
	check_report(moved > 0.0, "%-9s bf16 losses differ from fp32's (%.2e)", model, moved);
}

#endif
