/* engine/optim.c - SGD, AdamW, gradient clipping and learning-rate
 * schedules, see optim.h. */
#include "engine/optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/errors.h"

void sd_sgd_step(float *params, float *velocity, const float *grads, size_t count,
                 float lr, float momentum, float weight_decay)
{
	/* One fused pass over the three contiguous buffers; elementwise, so any
	 * static split across threads gives the same bits. */
	#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < count; i++) {
		float g = grads[i] + weight_decay * params[i];
		float v = momentum * velocity[i] + g;
		velocity[i] = v;
		params[i] -= lr * v;
	}
}

void sd_adamw_scalars(struct sd_adamw_scalars *s, float lr, float beta1, float beta2,
                      float eps, float weight_decay, long t)
{
	/* In double, as PyTorch's Python floats: 1 - beta^t, lr / bc1 and
	 * sqrt(bc2), each rounded to float only when it reaches the kernel. */
	double bc1 = 1.0 - pow((double)beta1, (double)t);
	double bc2 = 1.0 - pow((double)beta2, (double)t);
	s->decay = (float)(1.0 - (double)lr * (double)weight_decay);
	s->beta1 = beta1;
	s->one_minus_beta1 = (float)(1.0 - (double)beta1);
	s->beta2 = beta2;
	s->one_minus_beta2 = (float)(1.0 - (double)beta2);
	s->neg_step_size = (float)(-((double)lr / bc1));
	s->bc2_sqrt = (float)sqrt(bc2);
	s->eps = eps;
}

void sd_adamw_step(float *params, float *m, float *v, const float *grads, size_t count,
                   const struct sd_adamw_scalars *s)
{
	const struct sd_adamw_scalars k = *s;
	/* Elementwise, so any static split across threads gives the same
	 * bits; each line is one of PyTorch's in-place tensor operations. */
	#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < count; i++) {
		float g = grads[i];
		float p = params[i] * k.decay;
		float mi = m[i] * k.beta1;
		mi = mi + k.one_minus_beta1 * g;
		float vi = v[i] * k.beta2;
		vi = vi + (k.one_minus_beta2 * g) * g;
		float denom = sqrtf(vi) / k.bc2_sqrt;
		denom = denom + k.eps;
		p = p + (k.neg_step_size * mi) / denom;
		m[i] = mi;
		v[i] = vi;
		params[i] = p;
	}
}

/* 256 partial sums folded pairwise: the order optim.h states. */
static double fold256(double *part)
{
	for (int w = 128; w >= 1; w /= 2)
		for (int j = 0; j < w; j++)
			part[j] += part[j + w];
	return part[0];
}

static double block_sumsq(const float *x, size_t n)
{
	double part[256] = { 0 };
	for (size_t i = 0; i < n; i++) {
		double d = (double)x[i];
		double sq = d * d;   /* exact: a float's square fits a double */
		part[i % 256] += sq;
	}
	return fold256(part);
}

double sd_sumsq(const float *x, size_t count)
{
	size_t nb = (count + SD_SUMSQ_BLOCK - 1) / SD_SUMSQ_BLOCK;
	if (nb == 0)
		return 0.0;
	double *bs = sd_malloc(nb * sizeof(double));
	#pragma omp parallel for schedule(static)
	for (size_t b = 0; b < nb; b++) {
		size_t lo = b * SD_SUMSQ_BLOCK;
		size_t n = count - lo < SD_SUMSQ_BLOCK ? count - lo : SD_SUMSQ_BLOCK;
		bs[b] = block_sumsq(x + lo, n);
	}
	double part[256] = { 0 };
	for (size_t b = 0; b < nb; b++)
		part[b % 256] += bs[b];
	free(bs);
	return fold256(part);
}

float sd_clip_coef(double sumsq, float max_norm)
{
	if (!(max_norm > 0))
		return 1.0f;
	/* PyTorch: total_norm is a float tensor; max_norm / (total_norm +
	 * 1e-6) is max_norm * reciprocal(total_norm + 1e-6) in float; then
	 * clamp(max=1). */
	float norm = (float)sqrt(sumsq);
	float r = 1.0f / (norm + 1e-6f);
	float coef = max_norm * r;
	return coef < 1.0f ? coef : 1.0f;
}

void sd_grad_scale(float *grads, size_t count, float coef)
{
	if (coef == 1.0f)
		return;
	#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < count; i++)
		grads[i] *= coef;
}

int sd_optim_kind_parse(const char *name, enum sd_optim_kind *out)
{
	if (!strcmp(name, "sgd"))
		*out = SD_OPTIM_SGD;
	else if (!strcmp(name, "adamw"))
		*out = SD_OPTIM_ADAMW;
	else
		return -1;
	return 0;
}

double sd_optim_step(const struct sd_optim_settings *o, float *params, float *state1,
                     float *state2, float *grads, size_t count, float lr, long done)
{
	double norm = 0;
	if (o->clip_grad_norm > 0) {
		double sumsq = sd_sumsq(grads, count);
		norm = sqrt(sumsq);
		sd_grad_scale(grads, count, sd_clip_coef(sumsq, o->clip_grad_norm));
	}
	if (o->kind == SD_OPTIM_ADAMW) {
		struct sd_adamw_scalars k;
		sd_adamw_scalars(&k, lr, o->beta1, o->beta2, o->eps, o->weight_decay, done + 1);
		sd_adamw_step(params, state1, state2, grads, count, &k);
	} else {
		sd_sgd_step(params, state1, grads, count, lr, o->momentum, o->weight_decay);
	}
	return norm;
}

float sd_lr_at(const struct sd_lr_schedule *s, long step)
{
	if (s->warmup_steps > 0 && step < s->warmup_steps)
		return s->base_lr * (float)(step + 1) / (float)s->warmup_steps;
	long t = step - (s->warmup_steps > 0 ? s->warmup_steps : 0);
	switch (s->kind) {
	case SD_LR_STEP:
		if (s->step_size > 0)
			return s->base_lr * powf(s->gamma, (float)(t / s->step_size));
		return s->base_lr;
	case SD_LR_COSINE: {
		long span = s->total_steps - (s->warmup_steps > 0 ? s->warmup_steps : 0);
		if (span <= 0)
			return s->base_lr;
		double frac = (double)t / (double)span;
		if (frac > 1.0)
			frac = 1.0;
		return s->min_lr + (s->base_lr - s->min_lr) * 0.5f * (1.0f + (float)cos(M_PI * frac));
	}
	case SD_LR_CONSTANT:
	default:
		return s->base_lr;
	}
}

int sd_lr_kind_parse(const char *name, enum sd_lr_kind *out)
{
	if (!strcmp(name, "constant"))
		*out = SD_LR_CONSTANT;
	else if (!strcmp(name, "step"))
		*out = SD_LR_STEP;
	else if (!strcmp(name, "cosine"))
		*out = SD_LR_COSINE;
	else
		return -1;
	return 0;
}
