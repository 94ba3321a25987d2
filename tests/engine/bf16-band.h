/* tests/engine/bf16-band.h - the training check test-conv-bf16 and
 * test-linear-bf16 share: a few steps of a model in fp32 (f), in fp32 on
 * bf16-rounded input data (p) and in bf16 (h), same seed and samples.  The
 * spread |p - f| / f (relative, worst over the steps) is what rounding the
 * data alone does; bf16 rounds every later operand too, so its losses must
 * stay within factor times that spread of fp32's, and must differ from
 * them (else bf16 did not run).  Prints every step and two check lines
 * (tests/check.h). */
#ifndef SD_TESTS_BF16_BAND_H
#define SD_TESTS_BF16_BAND_H

#include <math.h>
#include <stdio.h>

#include "tests/check.h"

static void bf16_band_check(const char *model, int steps, const double *f, const double *p,
                            const double *h, double factor)
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
