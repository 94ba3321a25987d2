/* engine/optim.h - SGD with momentum and weight decay, learning-rate schedules.
 *
 * Update (PyTorch's torch.optim.SGD convention, dampening 0):
 *   g = grad + weight_decay * param
 *   v = momentum * v + g
 *   param -= lr * v
 * All three buffers are the model's contiguous ones, so one call updates the
 * whole model.
 */
#ifndef SD_ENGINE_OPTIM_H
#define SD_ENGINE_OPTIM_H

#include <stddef.h>

void sd_sgd_step(float *params, float *velocity, const float *grads, size_t count,
                 float lr, float momentum, float weight_decay);

enum sd_lr_kind { SD_LR_CONSTANT, SD_LR_STEP, SD_LR_COSINE };

struct sd_lr_schedule {
	enum sd_lr_kind kind;
	float base_lr;
	long warmup_steps;   /* linear ramp from base_lr / warmup_steps to base_lr */
	long total_steps;    /* cosine: decays to min_lr at total_steps */
	long step_size;      /* step: multiply by gamma every step_size steps */
	float gamma;
	float min_lr;
};

/* Learning rate for optimizer step `step` (0-based).  Warm-up (Goyal et al.
 * 2017, "Accurate, Large Minibatch SGD") then the schedule: constant, step
 * decay, or cosine (Loshchilov & Hutter 2017, SGDR) without restarts. */
float sd_lr_at(const struct sd_lr_schedule *s, long step);

/* Parses "constant", "step" or "cosine"; returns 0 or -1. */
int sd_lr_kind_parse(const char *name, enum sd_lr_kind *out);

#endif
