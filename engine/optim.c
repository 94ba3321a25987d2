/* engine/optim.c - SGD and learning-rate schedules, see optim.h. */
#include "engine/optim.h"

#include <math.h>
#include <string.h>

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
