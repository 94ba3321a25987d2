/* tests/engine/test-optim.c - the optimizer and the learning-rate schedules against
 * double-precision references written from their definitions, not from the
 * code under test:
 *
 *  - sd_sgd_step: PyTorch's torch.optim.SGD with dampening 0 and no
 *    Nesterov (pytorch.org/docs/stable/generated/torch.optim.SGD.html):
 *      g = grad + weight_decay * param;  v = momentum * v + g;  param -= lr * v
 *    over several steps with changing gradients, so the velocity carried
 *    between calls matters; with momentum or weight decay zero, too.
 *  - sd_lr_at: linear warm-up to base_lr over warmup_steps ((step + 1) /
 *    warmup_steps of it, Goyal et al. 2017), then constant, step decay
 *    (base_lr * gamma^floor((step - warmup) / step_size)) or cosine
 *    (min_lr + (base_lr - min_lr) (1 + cos(pi t / T)) / 2, t the steps after
 *    warm-up, T = total_steps - warmup_steps, and min_lr from T on;
 *    Loshchilov & Hutter 2017 without restarts).
 *
 *  - sd_adamw_step: AdamW as Loshchilov & Hutter 2019 define it and
 *    PyTorch's torch.optim.AdamW documents it (pytorch.org/docs/1.13/
 *    generated/torch.optim.AdamW.html), t = 1, 2, ...:
 *      param -= lr * weight_decay * param
 *      m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
 *      param -= lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
 *    over several steps, with and without weight decay, and a step worked
 *    by hand (the first step moves each parameter by about lr * sign(g)).
 *  - sd_sumsq: the sum of squares against a plain double sum, and bit for
 *    bit against the order optim.h promises (written here from its text),
 *    whatever the number of threads; sd_clip_coef and sd_grad_scale:
 *    clip_grad_norm_'s factor min(1, max_norm / (norm + 1e-6)).
 *
 * fp32 against double: each value within 1e-6 of the reference, relative to
 * the larger of the value and its scale (1 for parameters and velocities,
 * base_lr for rates): a few float ulps over six steps, which a flipped sign,
 * a dropped term or an off-by-one step exceeds by orders of magnitude. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "engine/optim.h"
#include "src/base/rng.h"
#include "tests/check.h"

#define N 257          /* not a multiple of any vector width */
#define STEPS 6

/* The larger error, a NaN counting as infinitely large (fmax and > would
 * let it through). */
static double worse(double worst, double e)
{
	return isnan(e) ? INFINITY : e > worst ? e : worst;
}

static int close_to(double got, double want, double rel)
{
	return fabs(got - want) <= rel * fmax(fabs(want), 1e-6);
}

/* STEPS updates of N parameters with the given settings, the engine's fp32
 * against the definition in double; returns the largest relative error. */
static double sgd_case(float lr, float momentum, float wd, uint64_t seed)
{
	float p[N], v[N], gr[N];
	double pd[N], vd[N];
	struct sd_rng r;
	sd_rng_seed(&r, seed, 0);
	for (int i = 0; i < N; i++) {
		p[i] = (float)(sd_rng_uniform(&r) * 2 - 1);
		v[i] = 0;
		pd[i] = p[i];
		vd[i] = 0;
	}
	double worst = 0;
	for (int s = 0; s < STEPS; s++) {
		for (int i = 0; i < N; i++)
			gr[i] = (float)(sd_rng_uniform(&r) - 0.5);
		sd_sgd_step(p, v, gr, N, lr, momentum, wd);
		for (int i = 0; i < N; i++) {
			double g = (double)gr[i] + (double)wd * pd[i];
			vd[i] = (double)momentum * vd[i] + g;
			pd[i] -= (double)lr * vd[i];
			/* Relative to the values' scale (about 1): a parameter
			 * that crosses zero has no relative error to speak of. */
			double e = fabs(p[i] - pd[i]) / fmax(fabs(pd[i]), 1);
			double ev = fabs(v[i] - vd[i]) / fmax(fabs(vd[i]), 1);
			worst = worse(worse(worst, e), ev);
		}
	}
	return worst;
}

static void test_sgd(void)
{
	static const struct { float lr, momentum, wd; } cases[] = {
		{ 0.1f, 0.9f, 5e-4f },     /* the engine's defaults' shape */
		{ 0.05f, 0.0f, 0.0f },     /* plain SGD */
		{ 0.05f, 0.9f, 0.0f },     /* momentum alone */
		{ 0.2f, 0.0f, 0.01f },     /* weight decay alone */
		{ 0.01f, 0.5f, 0.1f },
	};
	for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
		double worst = sgd_case(cases[k].lr, cases[k].momentum, cases[k].wd, 11 + k);
		check_report(worst <= 1e-6, "sgd lr %g momentum %g weight_decay %g: %d steps, worst error %.2g",
		             cases[k].lr, cases[k].momentum, cases[k].wd, STEPS, worst);
	}
	/* A hand-checked case: constant gradient 1, momentum 0.9, no decay,
	 * lr 0.1: v = 1, 1.9, 2.71, so p = 1 - 0.1, - 0.19, - 0.271. */
	float p = 1, v = 0, g = 1;
	float want[3] = { 0.9f, 0.71f, 0.439f };
	for (int s = 0; s < 3; s++) {
		sd_sgd_step(&p, &v, &g, 1, 0.1f, 0.9f, 0);
		CHECK(close_to(p, want[s], 1e-6), "step %d: param %.9g, expected %.9g", s + 1, p, want[s]);
	}
	CHECK(close_to(v, 2.71, 1e-6), "velocity after 3 steps %.9g, expected 2.71", v);
	/* Weight decay pulls toward zero: grad 0, wd 0.5, lr 0.1, no momentum. */
	p = 2;
	v = 0;
	g = 0;
	sd_sgd_step(&p, &v, &g, 1, 0.1f, 0, 0.5f);
	CHECK(close_to(p, 1.9, 1e-6), "weight decay step: param %.9g, expected 1.9", p);
}

/* STEPS AdamW updates of N parameters, the engine's fp32 against the
 * definition in double; returns the largest error relative to
 * max(|value|, 1) over parameters and both moments (the second moment
 * relative to max(|v|, 1e-3): it is a square, about 0.1^2 here). */
static double adamw_case(float lr, float b1, float b2, float eps, float wd, uint64_t seed)
{
	float p[N], m[N], v[N], gr[N];
	double pd[N], md[N], vd[N];
	struct sd_rng r;
	sd_rng_seed(&r, seed, 0);
	for (int i = 0; i < N; i++) {
		p[i] = (float)(sd_rng_uniform(&r) * 2 - 1);
		m[i] = v[i] = 0;
		pd[i] = p[i];
		md[i] = vd[i] = 0;
	}
	double worst = 0;
	for (int s = 1; s <= STEPS; s++) {
		/* Gradients of several magnitudes, so that the second moment's
		 * normalisation matters. */
		double mag = s % 2 ? 0.5 : 0.05;
		for (int i = 0; i < N; i++)
			gr[i] = (float)((sd_rng_uniform(&r) - 0.5) * mag);
		struct sd_adamw_scalars k;
		sd_adamw_scalars(&k, lr, b1, b2, eps, wd, s);
		sd_adamw_step(p, m, v, gr, N, &k);
		for (int i = 0; i < N; i++) {
			double g = gr[i];
			pd[i] -= (double)lr * (double)wd * pd[i];
			md[i] = (double)b1 * md[i] + (1 - (double)b1) * g;
			vd[i] = (double)b2 * vd[i] + (1 - (double)b2) * g * g;
			double mhat = md[i] / (1 - pow(b1, s));
			double vhat = vd[i] / (1 - pow(b2, s));
			pd[i] -= (double)lr * mhat / (sqrt(vhat) + (double)eps);
			double e[3] = { fabs(p[i] - pd[i]) / fmax(fabs(pd[i]), 1),
			                fabs(m[i] - md[i]) / fmax(fabs(md[i]), 1),
			                fabs(v[i] - vd[i]) / fmax(fabs(vd[i]), 1e-3) };
			for (int j = 0; j < 3; j++)
				worst = worse(worst, e[j]);
		}
	}
	return worst;
}

static void test_adamw(void)
{
	static const struct { float lr, b1, b2, eps, wd; } cases[] = {
		{ 1e-3f, 0.9f, 0.999f, 1e-8f, 1e-2f },    /* torch.optim.AdamW's defaults */
		{ 0.01f, 0.9f, 0.95f, 1e-8f, 0.1f },      /* GPT training's usual */
		{ 0.01f, 0.9f, 0.999f, 1e-8f, 0.0f },     /* no decay: Adam */
		{ 0.05f, 0.0f, 0.5f, 1e-3f, 0.0f },       /* no first moment, large eps */
		{ 0.02f, 0.5f, 0.0f, 0.0f, 0.5f },        /* v = g^2: |update| = lr */
	};
	for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
		double worst = adamw_case(cases[k].lr, cases[k].b1, cases[k].b2, cases[k].eps,
		                          cases[k].wd, 31 + k);
		check_report(worst <= 1e-6,
		             "adamw lr %g betas %g,%g eps %g weight_decay %g: %d steps, worst error %.2g",
		             cases[k].lr, cases[k].b1, cases[k].b2, cases[k].eps, cases[k].wd, STEPS,
		             worst);
	}
	/* By hand: the first step from zero moments has m / (1 - beta1) = g and
	 * v / (1 - beta2) = g^2, so it moves by lr * g / (|g| + eps): lr 0.1,
	 * g 0.5, weight decay 0.01 from param 1: 1 - 0.001 - 0.1 = 0.899. */
	float p = 1, m = 0, v = 0, g = 0.5f;
	struct sd_adamw_scalars k;
	sd_adamw_scalars(&k, 0.1f, 0.9f, 0.999f, 1e-8f, 0.01f, 1);
	sd_adamw_step(&p, &m, &v, &g, 1, &k);
	CHECK(close_to(p, 0.899, 1e-6), "adamw first step: param %.9g, expected 0.899", p);
	/* The moments with the betas as the floats they are. */
	double m1 = (1 - (double)0.9f) * 0.5, v1 = (1 - (double)0.999f) * 0.25;
	CHECK(close_to(m, m1, 1e-6) && close_to(v, v1, 1e-6),
	      "adamw first step: moments %.9g %.9g, expected %.9g %.9g", m, v, m1, v1);
	/* Step 2 with the same gradient: the bias-corrected moments are still
	 * g and g^2, so again 0.1 down, after the decay of 0.899 * 0.001. */
	sd_adamw_scalars(&k, 0.1f, 0.9f, 0.999f, 1e-8f, 0.01f, 2);
	sd_adamw_step(&p, &m, &v, &g, 1, &k);
	CHECK(close_to(p, 0.899 - 0.000899 - 0.1, 1e-6), "adamw second step: param %.9g, expected %.9g",
	      p, 0.899 - 0.000899 - 0.1);

	enum sd_optim_kind o;
	CHECK(sd_optim_kind_parse("adamw", &o) == 0 && o == SD_OPTIM_ADAMW);
	CHECK(sd_optim_kind_parse("sgd", &o) == 0 && o == SD_OPTIM_SGD);
	CHECK(sd_optim_kind_parse("adam", &o) < 0);
}

/* sd_optim_step, the trainer's whole step: clip_grad_norm_ then AdamW,
 * against the definitions in double (the clip factor from the norm of the
 * gradients as given, AdamW's t counted from 1), over STEPS steps whose
 * gradient norms alternate above and below max_norm; SGD with clipping
 * too.  Returns the largest error relative to max(|param|, 1). */
static double optim_case(enum sd_optim_kind kind, float max_norm, uint64_t seed, int *clipped)
{
	struct sd_optim_settings o = { .kind = kind, .momentum = 0.9f, .weight_decay = 0.05f,
	                               .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
	                               .clip_grad_norm = max_norm };
	const float lr = 0.01f;
	float p[N], s1[N], s2[N], gr[N];
	double pd[N], md[N], vd[N];
	struct sd_rng r;
	sd_rng_seed(&r, seed, 0);
	for (int i = 0; i < N; i++) {
		p[i] = (float)(sd_rng_uniform(&r) * 2 - 1);
		s1[i] = s2[i] = 0;
		pd[i] = p[i];
		md[i] = vd[i] = 0;
	}
	double worst = 0;
	*clipped = 0;
	for (int s = 0; s < STEPS; s++) {
		double mag = s % 2 ? 1.0 : 0.01;   /* norms about 4.6 and 0.046 */
		double sq = 0;
		for (int i = 0; i < N; i++) {
			gr[i] = (float)((sd_rng_uniform(&r) - 0.5) * mag);
			sq += (double)gr[i] * gr[i];
		}
		double norm = sqrt(sq);
		double coef = max_norm > 0 ? fmin(1.0, max_norm / (norm + 1e-6)) : 1.0;
		*clipped += coef < 1;
		float g0[N];
		memcpy(g0, gr, sizeof g0);
		double got = sd_optim_step(&o, p, s1, s2, gr, N, lr, s);
		double want = max_norm > 0 ? norm : 0;
		if (fabs(got - want) > 1e-12 * want)
			worst = worse(worst, 1.0);   /* the returned norm is wrong */
		for (int i = 0; i < N; i++) {
			double g = (double)g0[i] * coef;
			/* The gradients are left scaled, as clip_grad_norm_ leaves them. */
			worst = worse(worst, fabs(gr[i] - g) / fmax(fabs(g), 1e-3));
			if (kind == SD_OPTIM_ADAMW) {
				pd[i] -= (double)lr * o.weight_decay * pd[i];
				md[i] = (double)o.beta1 * md[i] + (1 - (double)o.beta1) * g;
				vd[i] = (double)o.beta2 * vd[i] + (1 - (double)o.beta2) * g * g;
				double mhat = md[i] / (1 - pow(o.beta1, s + 1));
				double vhat = vd[i] / (1 - pow(o.beta2, s + 1));
				pd[i] -= (double)lr * mhat / (sqrt(vhat) + (double)o.eps);
			} else {
				g += (double)o.weight_decay * pd[i];
				md[i] = (double)o.momentum * md[i] + g;
				pd[i] -= (double)lr * md[i];
			}
			worst = worse(worst, fabs(p[i] - pd[i]) / fmax(fabs(pd[i]), 1));
		}
	}
	return worst;
}

static void test_optim_step(void)
{
	int clipped;
	double w = optim_case(SD_OPTIM_ADAMW, 1.0f, 41, &clipped);
	check_report(w <= 1e-6 && clipped == STEPS / 2,
	             "adamw + clip_grad_norm 1: %d steps (%d clipped), worst error %.2g", STEPS,
	             clipped, w);
	w = optim_case(SD_OPTIM_SGD, 1.0f, 42, &clipped);
	check_report(w <= 1e-6 && clipped == STEPS / 2,
	             "sgd + clip_grad_norm 1: %d steps (%d clipped), worst error %.2g", STEPS,
	             clipped, w);
	w = optim_case(SD_OPTIM_ADAMW, 0.0f, 43, &clipped);
	check_report(w <= 1e-6 && clipped == 0, "adamw, clipping off: %d steps, worst error %.2g",
	             STEPS, w);
}

/* optim.h's order, written from its text: blocks of SD_SUMSQ_BLOCK, 256
 * strided partial sums each, folded pairwise; the block sums the same. */
static double fold(double *part)
{
	for (int w = 128; w >= 1; w /= 2)
		for (int j = 0; j < w; j++)
			part[j] = part[j] + part[j + w];
	return part[0];
}

static double sumsq_in_order(const float *x, size_t n)
{
	size_t nb = (n + SD_SUMSQ_BLOCK - 1) / SD_SUMSQ_BLOCK;
	double top[256] = { 0 };
	for (size_t b = 0; b < nb; b++) {
		double part[256] = { 0 };
		for (size_t i = b * SD_SUMSQ_BLOCK; i < n && i < (b + 1) * SD_SUMSQ_BLOCK; i++)
			part[(i - b * SD_SUMSQ_BLOCK) % 256] += (double)x[i] * (double)x[i];
		top[b % 256] += fold(part);
	}
	return fold(top);
}

static void test_clip(void)
{
	/* Sizes around the block and the 256 lanes, and one with more than
	 * 256 blocks (the second fold's lanes wrap). */
	static const size_t sizes[] = { 0, 1, 255, 257, 4096, 4097, 300001, 1100003 };
	size_t nmax = sizes[sizeof sizes / sizeof sizes[0] - 1];
	float *x = malloc(nmax * sizeof(float));
	struct sd_rng r;
	sd_rng_seed(&r, 5, 0);
	/* Magnitudes over 2^-20 to 2^20: the squares' sums round, so the
	 * order of the additions shows in the bits (values of one magnitude
	 * sum exactly in double, in any order). */
	for (size_t i = 0; i < nmax; i++) {
		double u = sd_rng_uniform(&r) - 0.5;
		x[i] = (float)ldexp(u, (int)(sd_rng_uniform(&r) * 40) - 20);
	}
	int failed_before = check_failures;
	for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
		size_t n = sizes[k];
		double plain = 0;
		for (size_t i = 0; i < n; i++)
			plain += (double)x[i] * x[i];
		double got = sd_sumsq(x, n), order = sumsq_in_order(x, n);
		CHECK(fabs(got - plain) <= 1e-12 * plain, "sumsq of %zu: %.17g, plain sum %.17g", n,
		      got, plain);
		CHECK(memcmp(&got, &order, sizeof got) == 0,
		      "sumsq of %zu: %.17g, not the documented order's %.17g", n, got, order);
#ifdef _OPENMP
		int was = omp_get_max_threads();
		omp_set_num_threads(was > 1 ? 1 : 3);
		double other = sd_sumsq(x, n);
		omp_set_num_threads(was);
		CHECK(memcmp(&got, &other, sizeof got) == 0,
		      "sumsq of %zu: %.17g with %d threads, %.17g with %d", n, got, was, other,
		      was > 1 ? 1 : 3);
#endif
	}
	check_report(check_failures == failed_before,
	             "sumsq: sizes 0 to %zu as a plain double sum and in the stated order", nmax);

	/* clip_grad_norm_'s factor: gradients of norm 4 clipped to 1 become
	 * a quarter (a factor taken from the squared norm would be 1/16). */
	float c = sd_clip_coef(16.0, 1.0f);
	CHECK(close_to(c, 1.0 / (4.0 + 1e-6), 1e-6), "clip norm 4 to 1: factor %.9g, expected 0.25", c);
	CHECK(sd_clip_coef(16.0, 8.0f) == 1.0f, "norm 4 under max 8: factor %.9g, expected 1",
	      sd_clip_coef(16.0, 8.0f));
	CHECK(sd_clip_coef(0.0, 1.0f) == 1.0f, "zero gradients: factor %.9g, expected 1",
	      sd_clip_coef(0.0, 1.0f));
	CHECK(sd_clip_coef(1e6, 0.0f) == 1.0f, "clipping off: factor %.9g", sd_clip_coef(1e6, 0.0f));
	/* After scaling, the norm is max_norm (less the 1e-6). */
	size_t n = 300001;
	double before = sqrt(sd_sumsq(x, n));
	float coef = sd_clip_coef(before * before, 2.5f);
	sd_grad_scale(x, n, coef);
	double after = sqrt(sd_sumsq(x, n));
	check_report(fabs(after - 2.5) <= 2.5e-6,
	             "clip a norm of %.6g to 2.5: factor %.6g, norm after %.9g", before, coef, after);
	free(x);
}

static double lr_ref(const struct sd_lr_schedule *s, long step)
{
	long w = s->warmup_steps > 0 ? s->warmup_steps : 0;
	if (step < w)
		return (double)s->base_lr * (double)(step + 1) / (double)w;
	long t = step - w;
	switch (s->kind) {
	case SD_LR_STEP:
		return s->step_size > 0 ? s->base_lr * pow(s->gamma, (double)(t / s->step_size)) : s->base_lr;
	case SD_LR_COSINE: {
		long T = s->total_steps - w;
		if (T <= 0)
			return s->base_lr;
		if (t >= T)
			return s->min_lr;
		return s->min_lr + ((double)s->base_lr - s->min_lr) * 0.5 * (1 + cos(M_PI * (double)t / (double)T));
	}
	default:
		return s->base_lr;
	}
}

static void check_schedule(const char *what, const struct sd_lr_schedule *s, long upto)
{
	double worst = 0;
	long at = -1;
	for (long step = 0; step <= upto; step++) {
		double want = lr_ref(s, step), got = sd_lr_at(s, step);
		double e = fabs(got - want) / fmax(fabs(want), s->base_lr);
		if (e > worst) {
			worst = e;
			at = step;
		}
	}
	check_report(worst <= 1e-6, "lr %s over steps 0..%ld: worst error relative to base_lr %.2g (step %ld)", what, upto,
	             worst, at);
}

static void test_schedules(void)
{
	struct sd_lr_schedule s = { .kind = SD_LR_COSINE, .base_lr = 0.1f, .warmup_steps = 5,
	                            .total_steps = 105, .min_lr = 0.001f };
	check_schedule("cosine, warm-up 5, 105 steps", &s, 150);
	/* Landmarks, spelled out: the first warm-up step, the peak, half way
	 * down the cosine, its end and beyond. */
	CHECK(close_to(sd_lr_at(&s, 0), 0.02, 1e-6), "warm-up step 0: %g, expected 0.1 * 1/5", sd_lr_at(&s, 0));
	CHECK(close_to(sd_lr_at(&s, 4), 0.1, 1e-6), "last warm-up step: %g, expected 0.1", sd_lr_at(&s, 4));
	CHECK(close_to(sd_lr_at(&s, 5), 0.1, 1e-6), "first cosine step: %g, expected 0.1", sd_lr_at(&s, 5));
	CHECK(close_to(sd_lr_at(&s, 55), 0.0505, 1e-6), "half way: %g, expected (0.1 + 0.001) / 2", sd_lr_at(&s, 55));
	CHECK(close_to(sd_lr_at(&s, 105), 0.001, 1e-6), "end: %g, expected min_lr 0.001", sd_lr_at(&s, 105));
	CHECK(close_to(sd_lr_at(&s, 1000), 0.001, 1e-6), "past the end: %g, expected min_lr", sd_lr_at(&s, 1000));
	for (long k = 6; k <= 105; k++)
		CHECK(sd_lr_at(&s, k) <= sd_lr_at(&s, k - 1), "cosine rises from step %ld to %ld", k - 1, k);

	s = (struct sd_lr_schedule){ .kind = SD_LR_COSINE, .base_lr = 0.05f, .total_steps = 40 };
	check_schedule("cosine, no warm-up, min 0", &s, 60);
	s = (struct sd_lr_schedule){ .kind = SD_LR_STEP, .base_lr = 0.1f, .warmup_steps = 3,
	                             .step_size = 10, .gamma = 0.5f };
	check_schedule("step decay 0.5 every 10, warm-up 3", &s, 60);
	CHECK(close_to(sd_lr_at(&s, 12), 0.1, 1e-6), "step decay at 12 (9 after warm-up): %g", sd_lr_at(&s, 12));
	CHECK(close_to(sd_lr_at(&s, 13), 0.05, 1e-6), "step decay at 13 (10 after warm-up): %g", sd_lr_at(&s, 13));
	CHECK(close_to(sd_lr_at(&s, 33), 0.0125, 1e-6), "step decay at 33: %g", sd_lr_at(&s, 33));
	s = (struct sd_lr_schedule){ .kind = SD_LR_CONSTANT, .base_lr = 0.3f, .warmup_steps = 100 };
	check_schedule("constant, warm-up 100", &s, 200);
	CHECK(close_to(sd_lr_at(&s, 49), 0.15, 1e-6), "warm-up half way: %g, expected 0.15", sd_lr_at(&s, 49));

	enum sd_lr_kind k;
	CHECK(sd_lr_kind_parse("cosine", &k) == 0 && k == SD_LR_COSINE);
	CHECK(sd_lr_kind_parse("step", &k) == 0 && k == SD_LR_STEP);
	CHECK(sd_lr_kind_parse("constant", &k) == 0 && k == SD_LR_CONSTANT);
	CHECK(sd_lr_kind_parse("Cosine", &k) < 0);
	CHECK(sd_lr_kind_parse("", &k) < 0);
}

int main(void)
{
	test_sgd();
	test_adamw();
	test_clip();
	test_optim_step();
	test_schedules();
	return check_exit("test-optim");
}
