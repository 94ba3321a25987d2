/* engine/optim.h - the optimizers (SGD with momentum, AdamW), gradient-norm
 * clipping and learning-rate schedules.
 *
 * SGD (PyTorch's torch.optim.SGD convention, dampening 0, no Nesterov):
 *   g = grad + weight_decay * param
 *   v = momentum * v + g
 *   param -= lr * v
 *
 * AdamW (Loshchilov & Hutter 2019, "Decoupled Weight Decay
 * Regularization"), in the order and precision of PyTorch 1.13's
 * torch.optim.AdamW (torch/optim/adamw.py, _single_tensor_adamw, the
 * default foreach=False path), step t = 1, 2, ... (the step count AFTER
 * this update):
 *   param = param * (1 - lr * weight_decay)          decay first, decoupled
 *   m = m * beta1 + (1 - beta1) * grad
 *   v = v * beta2 + (1 - beta2) * grad * grad
 *   denom = sqrt(v) / sqrt(1 - beta2^t) + eps
 *   param = param + (-(lr / (1 - beta1^t)) * m) / denom
 * The scalars (1 - lr wd, lr / (1 - beta1^t), sqrt(1 - beta2^t)) are computed
 * in double and rounded to float once, as PyTorch computes them in Python
 * floats and hands them to float kernels; every per-element operation is one
 * rounded float operation in the order written, so the CUDA kernel
 * (engine/cuda/kernels.cu, which rounds each with __fmul_rn and the like)
 * gives the same bits.  That holds while the C compiler fuses no multiply
 * and add: true of x86-64's baseline, which has no FMA instruction, as for
 * SGD; a build for a target with FMA would need -ffp-contract=off.
 *
 * Gradient clipping (torch.nn.utils.clip_grad_norm_ with norm_type 2): the
 * L2 norm of all the model's gradients together, and when it exceeds
 * max_norm every gradient is multiplied by max_norm / (norm + 1e-6)
 * (PyTorch's constant, which keeps a zero norm from dividing by zero).
 *
 * All buffers are the model's contiguous ones (params, grads, and the
 * optimizer's state of the same length), so one call updates the whole
 * model.
 */
#ifndef SD_ENGINE_OPTIM_H
#define SD_ENGINE_OPTIM_H

#include <stddef.h>

void sd_sgd_step(float *params, float *velocity, const float *grads, size_t count,
                 float lr, float momentum, float weight_decay);

/* The float scalars of one AdamW step (see above), computed once per step
 * on the host and shared by the CPU loop and the CUDA kernel. */
struct sd_adamw_scalars {
	float decay;         /* 1 - lr * weight_decay */
	float beta1, one_minus_beta1;
	float beta2, one_minus_beta2;
	float neg_step_size; /* -lr / (1 - beta1^t) */
	float bc2_sqrt;      /* sqrt(1 - beta2^t) */
	float eps;
};

/* The scalars of AdamW step t (1-based: the first update is t = 1) with
 * learning rate lr.  betas in [0, 1), eps >= 0, t >= 1. */
void sd_adamw_scalars(struct sd_adamw_scalars *s, float lr, float beta1, float beta2,
                      float eps, float weight_decay, long t);

/* One AdamW update of count parameters: m (first moment) and v (second
 * moment) are the optimizer's state, count floats each, zero before the
 * first step. */
void sd_adamw_step(float *params, float *m, float *v, const float *grads, size_t count,
                   const struct sd_adamw_scalars *s);

/* The sum of the squares of x[0..count) in double, in a fixed order that
 * depends on count only (not on the number of threads): blocks of
 * SD_SUMSQ_BLOCK elements, each summed as 256 strided partial sums (element
 * i into partial i mod 256) folded pairwise (partial j += partial j + 128,
 * then + 64, ... + 1), and the blocks' sums folded the same way.  The CUDA
 * plugin's reduction follows the same order, so every worker of an elastic
 * group, on a CPU or a GPU, gets the same bits from the same gradients. */
#define SD_SUMSQ_BLOCK 4096
double sd_sumsq(const float *x, size_t count);

/* The factor clip_grad_norm_ multiplies the gradients by, given their sum
 * of squares: min(1, max_norm / (sqrt(sumsq) + 1e-6)) with the norm rounded
 * to float and the quotient formed as PyTorch's float tensors do (a
 * reciprocal, then the product: Tensor.__rtruediv__).  max_norm <= 0: 1
 * (no clipping). */
float sd_clip_coef(double sumsq, float max_norm);

/* grads[0..count) *= coef (in place; a no-op for coef 1). */
void sd_grad_scale(float *grads, size_t count, float coef);

enum sd_optim_kind { SD_OPTIM_SGD, SD_OPTIM_ADAMW };

/* Parses "sgd" or "adamw"; returns 0 or -1. */
int sd_optim_kind_parse(const char *name, enum sd_optim_kind *out);

/* A run's optimizer. */
struct sd_optim_settings {
	enum sd_optim_kind kind;
	float momentum;          /* SGD */
	float weight_decay;      /* SGD: L2 in the gradient; AdamW: decoupled */
	float beta1, beta2, eps; /* AdamW */
	float clip_grad_norm;    /* > 0: clip to this global L2 norm; 0: off */
};

/* One whole optimizer step on the CPU: with clip_grad_norm > 0 the
 * gradients are clipped first (scaled in place, as clip_grad_norm_ does),
 * then SGD (state1: the velocity; state2 unused) or AdamW (state1: m,
 * state2: v) with learning rate lr.  done: the updates before this one, so
 * AdamW's t is done + 1.  Returns the gradients' global L2 norm before
 * clipping, or 0 when clipping is off (then it is not computed). */
double sd_optim_step(const struct sd_optim_settings *o, float *params, float *state1,
                     float *state2, float *grads, size_t count, float lr, long done);

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
 * decay, or cosine (Loshchilov & Hutter 2017, SGDR) without restarts.  The
 * same rate drives SGD and AdamW. */
float sd_lr_at(const struct sd_lr_schedule *s, long step);

/* Parses "constant", "step" or "cosine"; returns 0 or -1. */
int sd_lr_kind_parse(const char *name, enum sd_lr_kind *out);

#endif
