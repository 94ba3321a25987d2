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
 * fp32 against double: each value within 1e-6 of the reference, relative to
 * the larger of the value and its scale (1 for parameters and velocities,
 * base_lr for rates): a few float ulps over six steps, which a flipped sign,
 * a dropped term or an off-by-one step exceeds by orders of magnitude. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine/optim.h"
#include "src/base/rng.h"
#include "tests/check.h"

#define N 257          /* not a multiple of any vector width */
#define STEPS 6

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
			if (e > worst)
				worst = e;
			if (ev > worst)
				worst = ev;
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
	test_schedules();
	return check_exit("test-optim");
}
