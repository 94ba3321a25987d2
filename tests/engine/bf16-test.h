/* tests/engine/bf16-test.h - what the bf16 tests share (test-conv-bf16,
 * test-linear-bf16, test-resume-bf16).
 *
 * bf16_trainer and bf16_band_check, the training check: a few steps of a model in fp32 (f),
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
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/layers.h"
#include "engine/train.h"
#include "tests/check.h"

/* x rounded to bf16 (to nearest even), as a float. */
static inline float to_bf16(float x)
{
	uint32_t b;
	memcpy(&b, &x, sizeof b);
	b = (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;
	memcpy(&x, &b, sizeof x);
	return x;
}

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

/* A trainer of model in precision prec on synthetic data (CIFAR's 3x32x32
 * for the ResNets, 1x28x28 else; 8 batches of batch), seed 11, lr 0.01:
 * below the default 0.05, at which the cnn's loss on synthetic data jumps
 * to hundreds in step 3 (a chaotic run makes any band wide).  round_data:
 * the training images rounded to bf16 first (bf16_band_check's p).  Exits
 * on failure. */
static inline struct sd_trainer *bf16_trainer(const char *model, enum sd_conv_precision prec,
                                              int round_data, int batch)
{
	struct sd_train_config cfg;
	sd_train_config_defaults(&cfg);
	snprintf(cfg.precision, sizeof cfg.precision, "%s", sd_conv2d_precision_name(prec));
	snprintf(cfg.model, sizeof cfg.model, "%s", model);
	snprintf(cfg.dataset, sizeof cfg.dataset, "synthetic");
	cfg.global_batch = batch;
	cfg.eval_batch = 64;
	cfg.synthetic_samples = 8 * batch;
	int resnet = !strncmp(model, "resnet", 6);
	cfg.synthetic_c = resnet ? 3 : 1;
	cfg.synthetic_h = cfg.synthetic_w = resnet ? 32 : 28;
	cfg.warmup_steps = 2;
	cfg.lr = 0.01f;
	cfg.seed = 11;
	char *why = NULL;
	struct sd_trainer *t;
	if (sd_trainer_create(&t, &cfg, &why) < 0) {
		fprintf(stderr, "bf16 trainer %s in %s: %s\n", model, sd_conv2d_precision_name(prec),
		        why);
		exit(1);
	}
	if (round_data) {
		const size_t n = (size_t)t->train.n * t->train.c * t->train.h * t->train.w;
		for (size_t i = 0; i < n; i++)
			t->train.images[i] = to_bf16(t->train.images[i]);
	}
	return t;
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
