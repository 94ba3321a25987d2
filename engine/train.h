/* engine/train.h - a training run's state: job settings, data, model,
 * optimizer, position.  The standalone worker drives it alone; the elastic
 * worker computes its slice of each global batch with it, all-reduces the
 * gradient buffer and then applies the step.
 *
 * Data order: optimizer step s (0-based) of a run with global batch B and
 * S = floor(train_samples / B) steps per epoch reads the samples at global
 * positions [(s mod S) * B, (s mod S) * B + B) of epoch floor(s / S)'s
 * permutation (sd_epoch_permutation), so which samples a step uses never
 * depends on how many workers share it.  The remainder of each epoch
 * (train_samples mod B samples) is dropped, as PyTorch's drop_last=True.
 *
 * Language models (dataset "tokens", a model whose sd_model_seq_len is T >
 * 0): a sample is a window of T + 1 tokens of train.bin (engine/tokens.h).
 * Sample i of step s's global batch is window sd_tokens_train_start(train,
 * T, seed, floor(s / S), (s mod S) * B + i) with S = floor(windows per
 * epoch / B) (sd_train_lm_window_start): a function of the step and the
 * sample's position in the global batch only, so the workers' slices
 * [offset, offset + count) of it lose and repeat nothing, whatever the
 * split.  Losses of a language model are per token: a step's loss_sum is
 * the sum over its windows of each window's mean cross-entropy per token,
 * so loss_sum / samples is the mean nats per token (what the image path's
 * loss_sum / samples is per image), and evaluation scores the first
 * SD_TRAIN_LM_EVAL_WINDOWS fixed windows of val.bin
 * (sd_tokens_eval_windows), reporting val_loss = mean nats per token and
 * perplexity = exp(val_loss) instead of an accuracy.
 */
#ifndef SD_ENGINE_TRAIN_H
#define SD_ENGINE_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "engine/backend.h"
#include "engine/checkpoint-data.h"
#include "engine/data.h"
#include "engine/layers.h"
#include "engine/model.h"
#include "engine/optim.h"
#include "engine/tokens.h"

#define SD_PATH_MAX 4096
/* A language model's evaluation: at most this many fixed windows of
 * val.bin, 256 * T tokens (nanoGPT's estimate_loss takes eval_iters = 200
 * batches of random windows; a fixed set makes every evaluation of a run,
 * and of every worker count, score the same tokens). */
#define SD_TRAIN_LM_EVAL_WINDOWS 256

struct sd_train_config {
	char model[SD_PATH_MAX]; /* "cnn": a built-in model (sd_model_names), or
	                          * the path of an ONNX file, a name ending in
	                          * ".onnx" (engine/onnx.h): its input shape and
	                          * classes must be the dataset's, and its
	                          * initializers are the start (no seed) */
	char dataset[32];        /* "fashion-mnist" */
	char data_dir[SD_PATH_MAX];   /* "" = the dataset's default; dataset
	                               * "tokens": the directory of train.bin
	                               * and val.bin (engine/tokens.h) */
	int block_size;          /* dataset "tokens" only (required there): the
	                          * sequence length T, tokens a model reads per
	                          * sample; must be the model's sd_model_seq_len */
	int epochs;              /* 3 */
	int global_batch;        /* 64 (samples per optimizer step, all workers) */
	float lr;                /* 0.05, peak learning rate */
	char optimizer[8];       /* "sgd" (default) or "adamw" (engine/optim.h) */
	float momentum;          /* 0.9, SGD only */
	float weight_decay;      /* 5e-4: SGD's L2 term, AdamW's decoupled decay */
	float betas[2];          /* AdamW's beta1, beta2: 0.9, 0.999 */
	float eps;               /* AdamW's epsilon: 1e-8 */
	float clip_grad_norm;    /* 0 = off; else the gradients' largest global
	                          * L2 norm (torch.nn.utils.clip_grad_norm_) */
	enum sd_lr_kind schedule;     /* cosine */
	long warmup_steps;       /* 100 */
	uint64_t seed;           /* 1 */
	int eval_batch;          /* 1000: test-set batch size */
	int synthetic_samples;   /* dataset "synthetic": training samples (10000) */
	int synthetic_c, synthetic_h, synthetic_w;   /* its image shape (3x32x32) */
	char backend[8];         /* "auto", "cpu" or "cuda" (engine/backend.h) */
	char precision[8];       /* "fp32" (default; "" means it too), "bf16" or
	                          * "auto": bf16 makes the CPU's oneDNN
	                          * convolutions, and the linear layers whose
	                          * shape engine/matmul-dnnl.h's rule takes (a
	                          * language model's too), read bf16 inputs
	                          * (engine/layers.h enum sd_conv_precision;
	                          * softmax, the loss, weights, gradients,
	                          * optimizer state, batch-norm statistics and
	                          * checkpoints stay fp32; the mlp and language
	                          * models train in bf16 only when asked, and an
	                          * explicit bf16 with neither such convolutions
	                          * nor such linear layers runs fp32).
	                          * Process-wide: set by
	                          * sd_trainer_create.  bf16 is refused where
	                          * oneDNN has no bf16 kernels (no AVX512-BF16 or
	                          * AMX) and with backend "cuda"; on a CUDA device
	                          * that backend "auto" picked it does nothing.
	                          * auto (the job file's default, spotdeck-job(5))
	                          * is bf16 where oneDNN has bf16 kernels, the
	                          * model computes on the CPU and at least one of
	                          * its convolutions is on the oneDNN path, else
	                          * fp32; the trainer's precision and
	                          * precision_reason say which and why. */
	int tf32;                /* 1: on a CUDA device let cuDNN and cuBLAS
	                          * use TF32 tensor cores for float32 (off by
	                          * default, as PyTorch's
	                          * torch.backends.cuda.matmul.allow_tf32);
	                          * the environment's SPOTDECK_CUDA_TF32, when
	                          * set, overrides it.  No effect on the CPU. */
	int device;              /* CUDA device index, -1 = SPOTDECK_CUDA_DEVICE or 0 */
	/* Dataset "npy" (engine/data.h): how to read the user's arrays. */
	char layout[8];          /* "NCHW" (default) or "NHWC": x's axis order */
	int norm_channels;       /* 0 = no normalisation; else mean/std per channel */
	float norm_mean[SD_DATA_MAX_CHANNELS];
	float norm_std[SD_DATA_MAX_CHANNELS];
	int classes;             /* 0 = the labels' largest + 1 */
	/* Any dataset: training-set augmentation, "none" (default) or
	 * "crop4+flip" (engine/data.h enum sd_augment). */
	char augment[16];
	/* An ONNX model's file already in memory (borrowed: read only by
	 * sd_trainer_create, which copies nothing of it, and cleared in the
	 * trainer's copy of the config): when model_bytes is set, the model is
	 * built from these model_len bytes and cfg.model only names it in the
	 * errors.  A worker on another host gets the controller's file this way
	 * (the path in the job is the controller's); NULL = read cfg.model. */
	const uint8_t *model_bytes;
	size_t model_len;
};

/* Fills c with the defaults above. */
void sd_train_config_defaults(struct sd_train_config *c);

/* Checks cfg's data settings and, for dataset npy, opens its four files and
 * checks them (headers, sizes, shapes, labels; sd_dataset_load_npy) without
 * keeping anything: what a controller runs before it rents a server.
 * Settings that only npy reads (layout, normalize, classes) given with
 * another dataset are refused.  Returns 0, or -1 with *why naming the file
 * or setting and the problem. */
int sd_train_check_data(const struct sd_train_config *cfg, char **why);

/* The first token of sample `index` of step `step`'s global batch of a
 * language model's run (see the top of this file): train the token file,
 * block T, steps_per_epoch S >= 1, global batch B, index in [0, B). */
uint64_t sd_train_lm_window_start(const struct sd_tokens *train, int block, uint64_t seed,
                                  long steps_per_epoch, int global_batch, long step, int index);
/* The slice [offset, offset + count) of that global batch, as one worker
 * trains it: each window's first token into starts[0 .. count), its tokens
 * into x and y ((count, block) int32 each, sd_tokens_window). */
void sd_train_lm_batch(const struct sd_tokens *train, int block, uint64_t seed,
                       long steps_per_epoch, int global_batch, long step, int offset, int count,
                       uint64_t *starts, int32_t *x, int32_t *y);

/* Checks cfg's optimizer settings: the optimizer's name (its kind into
 * *kind unless NULL), AdamW's betas in [0, 1) and eps >= 0, clip_grad_norm
 * >= 0 (0: off).  Returns 0, or -1 with *why naming the setting. */
int sd_train_check_optimizer(const struct sd_train_config *cfg, enum sd_optim_kind *kind,
                             char **why);

/* Checks the ONNX model of cfg (cfg->model ending in ".onnx"; bytes[0..len)
 * its file's contents, or NULL to read cfg->model) against the job's data
 * without loading the data: the whole graph (sd_onnx_check), then its input
 * (C, H, W) and classes against the dataset's: the known constants of the
 * built-in datasets (fashion-mnist and mnist 1x28x28, cifar10 3x32x32, 10
 * classes each; synthetic its synthetic_c/h/w and 10 classes), the headers
 * and labels of npy's arrays.  A built-in model name passes.  info (NULL:
 * not wanted) gets what sd_onnx_check says of the graph (zeroed for a
 * built-in model).  Returns 0, or -1 with *why naming the ONNX file, the
 * node when there is one, and what is wrong. */
struct sd_onnx_info;
int sd_train_check_model(const struct sd_train_config *cfg, const uint8_t *bytes, size_t len,
                         struct sd_onnx_info *info, char **why);

/* The SHA-256 of bytes[0..len) in lower-case hex into hex (65 bytes with
 * its NUL): how a model file is named in checkpoints and on the wire.
 * Returns 0, or -1 (OpenSSL failed) with *why. */
int sd_sha256_hex(const void *bytes, size_t len, char hex[65], char **why);

struct sd_trainer {
	struct sd_train_config cfg;
	struct sd_dataset train, test;
	struct sd_model *model;
	struct sd_optim_settings opt; /* cfg's optimizer settings */
	float *velocity;          /* SGD's momentum buffer or AdamW's first
	                           * moment, param_count floats */
	float *second;            /* AdamW's second moment, param_count floats;
	                           * NULL for SGD.  AdamW's step count is
	                           * `step`: every step of a run is one of its
	                           * optimizer's (a checkpoint of the other
	                           * optimizer is refused) */
	double last_grad_norm;    /* clip_grad_norm set: the global gradient
	                           * norm of the last step, before clipping */
	int32_t *perm;            /* permutation of perm_epoch */
	int perm_epoch;
	long step;                /* optimizer steps completed */
	long steps_per_epoch;
	long total_steps;         /* epochs * steps_per_epoch */
	struct sd_lr_schedule lr;
	float *xbuf;              /* staging batch (max(global, eval) samples);
	                           * page-locked when the model is on a device */
	uint8_t *ybuf;
	int pinned;               /* xbuf, ybuf came from the backend's host_alloc */
	/* Where the model computes (engine/backend.h).  With a device model
	 * (dev != NULL) the device holds the authoritative parameters, momentum,
	 * gradients and batch-norm buffers; the host ones are a mirror that the
	 * functions below bring up to date when they need it. */
	struct sd_backend_choice backend;
	/* The precision the convolutions run in (cfg.precision resolved: never
	 * auto) and one line saying why, e.g. "asked for" or "auto: oneDNN
	 * 2.6.3 has bf16 kernels here (AMX)". */
	enum sd_conv_precision precision;
	char precision_reason[160];
	struct sd_dev_model *dev;
	char *dev_error;          /* a queued device operation failed: reported by
	                           * the next call that can return an error */
	char model_sha256[65];    /* an ONNX model: the file's SHA-256 in hex,
	                           * recorded in checkpoints ("model_sha256" in
	                           * their meta) and checked on resume; else "" */
	char model_warning[512];  /* an ONNX model that looks exported in eval
	                           * mode: one line saying so
	                           * (sd_onnx_eval_export_warning); else "" */
	struct sd_ckpt_data_id *data_id;   /* the data files' sizes and SHA-256s
	                           * (engine/checkpoint-data.h), owned; hashed
	                           * on the first save or load (n < 0 until
	                           * then), recorded in checkpoints ("data" in
	                           * their meta) and checked on resume */
	int dev_data;             /* the training set is on the device: steps
	                           * send sample indices, not images */
	/* The training samples of the last sd_trainer_local_grad call: indices
	 * into the training set (last_count of them, last_samples pointing
	 * into perm), for step last_step; valid until the next local_grad.
	 * Lets a caller record what it trained (the elastic worker's
	 * SD_TEST_SAMPLE_LOG), taken from the very indices the data came from. */
	const int32_t *last_samples;
	int last_count;
	long last_step;
	enum sd_augment augment;  /* cfg.augment */
	/* A language model (lm = 1; cfg.dataset "tokens"): its token files and
	 * one batch of windows (maxb * T ids each for x and y); train and test
	 * above are then empty and perm is NULL. */
	int lm;
	struct sd_tokens tok_train, tok_val;
	int32_t *tok_x, *tok_y;
	uint64_t *last_starts;    /* the windows of the last local_grad (first
	                           * tokens, last_count of them) */
};

/* Loads the datasets, builds the model and chooses where it runs (cfg's
 * backend and device, see engine/backend.h; a device model that cannot be
 * built gives the CPU with that reason, unless CUDA was demanded).  Returns 0
 * or -1 with *why (the dataset loader's, model's or backend's message, naming
 * the file or the setting). */
int sd_trainer_create(struct sd_trainer **out, const struct sd_train_config *cfg, char **why);
void sd_trainer_destroy(struct sd_trainer *t);

/* Epoch that optimizer step `step` belongs to. */
int sd_trainer_epoch_of(const struct sd_trainer *t, long step);

/* Forward and backward over samples [offset, offset + count) of step `step`'s
 * global batch; leaves those samples' share of the mean-loss gradient (scale
 * 1 / global_batch) in the model's gradient buffer.  *loss_sum, *correct:
 * summed cross-entropy and correct predictions over the slice.  A language
 * model: the samples are windows, the gradient's scale 1 / (global_batch *
 * T), *loss_sum the windows' per-token mean cross-entropies summed (loss
 * summed over the count * T positions, / T), *correct 0. */
int sd_trainer_local_grad(struct sd_trainer *t, long step, int offset, int count,
                          double *loss_sum, int *correct, char **why);

/* The optimizer's update (SGD or AdamW, cfg.optimizer) with the learning
 * rate of step t->step, then t->step++.  With cfg.clip_grad_norm set the
 * gradients are first clipped to that global L2 norm (engine/optim.h), from
 * the gradient buffer as it is: after the elastic worker's all-reduce,
 * every worker computes the same norm.  On a device the update is queued
 * (the norm waits for the device); a failure is reported by the next
 * call. */
void sd_trainer_apply(struct sd_trainer *t);

/* One whole step on this process alone (local_grad over the full global batch
 * + apply).  *mean_loss: the step's mean cross-entropy. */
int sd_trainer_step(struct sd_trainer *t, double *mean_loss, double *train_accuracy, char **why);

/* Test-set loss (mean) and accuracy (fraction) over all test samples.  A
 * language model: *loss the validation loss (mean nats per token over the
 * evaluation windows), *accuracy -1. */
int sd_trainer_evaluate(struct sd_trainer *t, double *loss, double *accuracy, char **why);

/* Samples an evaluation scores: the test set's, or a language model's
 * evaluation windows (at most SD_TRAIN_LM_EVAL_WINDOWS). */
long sd_trainer_eval_count(const struct sd_trainer *t);
/* Evaluation samples [lo, hi) of sd_trainer_eval_count's, in chunks of at
 * most eval_batch (a language model: also at most global_batch, the
 * windows its activations hold): *loss_sum the summed loss (a language
 * model: per-token means of each window, summed), *correct the correct
 * predictions (0 for a language model).  The elastic worker's ranks each
 * score a range and all-reduce the sums. */
int sd_trainer_eval_range(struct sd_trainer *t, long lo, long hi, double *loss_sum,
                          long *correct, char **why);

/* sd_model_eval_batch on whichever backend the trainer uses. */
int sd_trainer_eval_batch(struct sd_trainer *t, const float *x, const uint8_t *labels, int n,
                          double *loss_sum, int *correct, char **why);

/* Collectives (engine/comm.h) work on one copy of the state: the host one
 * (Gloo), or the device one (NCCL) when the trainer runs on a device.
 * sd_trainer_comm_begin brings the copy `on_device` names up to date and
 * points v at its blocks; after a collective wrote into them,
 * sd_trainer_comm_end makes the trainer compute with what it wrote.  part:
 * SD_STATE_GRADS (the gradient block) or SD_STATE_MODEL (parameters,
 * momentum and batch-norm buffers).  on_device = 1 without a device model is
 * an error.  Returns 0 or -1 with *why. */
enum sd_state_part { SD_STATE_GRADS = 1, SD_STATE_MODEL = 2 };
struct sd_state_view {
	float *params, *velocity, *buffers;   /* SD_STATE_MODEL */
	float *second;                        /* AdamW's second moment
	                                       * (param_count), else NULL */
	float *grads;                         /* SD_STATE_GRADS */
	size_t param_count, buffer_count;
	/* SD_STATE_GRADS: floats after the param_count gradients in grads that
	 * a collective may carry along and the trainer ignores
	 * (SD_MODEL_GRAD_TAIL in the host copy; 0 in a device's, whose block
	 * holds the gradients only). */
	size_t grad_tail;
};
int sd_trainer_comm_begin(struct sd_trainer *t, enum sd_state_part part, int on_device,
                          struct sd_state_view *v, char **why);
int sd_trainer_comm_end(struct sd_trainer *t, enum sd_state_part part, int on_device, char **why);

/* The device's UUID when the trainer runs on a device that NCCL can use
 * (engine/comm.h sd_comm_choose_backend), NULL otherwise. */
const char *sd_trainer_nccl_device(const struct sd_trainer *t);

/* Brings the host mirror (parameters, momentum, buffers) up to date with the
 * device; a no-op on the CPU.  sd_trainer_save and sd_trainer_param_checksum
 * call it themselves. */
int sd_trainer_sync_host(const struct sd_trainer *t, char **why);

/* CRC-32 of the parameter buffer's bytes: equal on every worker that holds
 * the same parameters (read from the device when the model is on one; 0 if
 * that read fails, with the error kept for the next call that reports one). */
uint32_t sd_trainer_param_checksum(const struct sd_trainer *t);

/* Writes a checkpoint of parameters, the optimizer's state (SGD: section
 * "momentum"; AdamW: sections "adamw_m" and "adamw_v", and "optimizer":
 * "adamw" and its step count in the meta), batch-norm buffers, step,
 * epoch, data cursor and RNG state to path (atomically; see checkpoint.h). */
int sd_trainer_save(const struct sd_trainer *t, const char *path, char **why);
/* Restores a checkpoint written for the same model, dataset, global batch
 * and optimizer (a checkpoint without "optimizer" in its meta is SGD's);
 * anything else is refused with a message naming the file and the mismatch. */
int sd_trainer_load(struct sd_trainer *t, const char *path, char **why);

#endif
