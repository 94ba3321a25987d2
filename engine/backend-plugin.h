/* engine/backend-plugin.h - what a compute backend plugin provides, PRIVATE
 * to the engine (engine/backend.c loads it, engine/train.c drives it) and to
 * the programs that test it (tests/gpu/gpu-check.c, tests/engine/test-backend.c).
 *
 * The CUDA backend is a shared object, spotdeck-cuda.so (engine/cuda/), that
 * the engine dlopen()s at run time only after it has found an NVIDIA driver
 * with at least one device.  Programs therefore never depend on the CUDA, cuDNN,
 * cuBLAS or NCCL libraries at load time: a CPU-only host (or a CI machine with
 * the CUDA toolkit but no driver) starts the same binaries and never maps those
 * libraries, and an AddressSanitizer build never has them loaded behind its back.
 * The plugin exports one function, SD_BACKEND_ENTRY, returning a const ops
 * table; its abi and struct sizes must match this header, so a plugin from
 * another build is refused with a message instead of misreading the model.
 *
 * Device model: the plugin holds its own copies of the model's parameter,
 * gradient, momentum and buffer blocks, each ONE contiguous device buffer with
 * the same layout (engine/model.h's tensor table offsets) as the host ones.
 * While a trainer runs on a device, the device copies are authoritative; the
 * host blocks are a mirror brought up to date by model_download (checkpoints,
 * checksums) and pushed with model_upload (checkpoint load, state received
 * over Gloo).
 *
 * Errors: functions return 0 or -1 with a one-line malloc'd message in *why
 * (caller frees), as everywhere in the engine; nothing exits or aborts.
 * Threads: a device model is used by one thread at a time, the thread that
 * called device_open (CUDA's current device is per thread).
 */
#ifndef SD_ENGINE_BACKEND_PLUGIN_H
#define SD_ENGINE_BACKEND_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#include "engine/layers.h"
#include "engine/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever this header or engine/model-graph.h changes shape. */
#define SD_BACKEND_ABI 4u
/* The symbol the plugin exports: const struct sd_backend_ops *(void). */
#define SD_BACKEND_ENTRY "sd_backend_plugin_entry"

struct sd_model;
struct sd_comm_backend_ops;

/* One device as its backend sees it. */
struct sd_backend_device {
	int index;               /* among the visible devices (CUDA_VISIBLE_DEVICES) */
	char name[64];           /* "NVIDIA H200" */
	char uuid[48];           /* "GPU-6f0b..." (nvidia-smi's form), unique per board */
	double memory_gib;       /* total device memory, GiB */
	int cc_major, cc_minor;  /* compute capability, 9.0 for Hopper */
	int multiprocessors;
};

/* The state blocks a device model holds (see above).  SD_DEV_VELOCITY is
 * SGD's momentum or AdamW's first moment; SD_DEV_SECOND, AdamW's second
 * moment (param_count floats), is allocated (zeroed) at its first use, so
 * an SGD model never pays for it. */
enum sd_dev_block { SD_DEV_PARAMS, SD_DEV_GRADS, SD_DEV_VELOCITY, SD_DEV_BUFFERS, SD_DEV_SECOND };
#define SD_DEV_NBLOCKS 5

/* Opaque device copy of one model, with everything needed to run it. */
struct sd_dev_model;

/* Single-layer entry points for tests/gpu: each copies its host arrays to the
 * device, runs the SAME code the model executor runs for that layer, and
 * copies the results back.  Shapes and meanings are those of engine/layers.h;
 * differences: parameter gradients (dw, db, dgamma, dbeta) are OVERWRITTEN
 * (the executor writes each parameter's gradient exactly once per step), and
 * acc_dx = 1 makes dx += instead of dx = (how a second consumer's gradient is
 * added).  Max pooling has no argmax array on the device (cuDNN recomputes
 * the window maximum from x and y).  The shortcut is engine/model.c's: out =
 * a + S(b), S = stride-s subsampling of b with its channels zero-padded
 * equally on both sides up to a's. */
struct sd_backend_layer_ops {
	int (*linear_forward)(float *y, const float *x, const float *w, const float *b,
	                      int n, int in, int out, char **why);
	int (*linear_backward)(float *dx, float *dw, float *db, const float *dy, const float *x,
	                       const float *w, int n, int in, int out, int acc_dx, char **why);
	int (*conv2d_forward)(float *y, const float *x, const float *w, const float *b,
	                      const struct sd_conv2d_shape *s, char **why);
	int (*conv2d_backward)(float *dx, float *dw, float *db, const float *dy, const float *x,
	                       const float *w, const struct sd_conv2d_shape *s, int acc_dx,
	                       char **why);
	int (*bn_forward_train)(float *y, float *mean, float *invstd, float *running_mean,
	                        float *running_var, const float *x, const float *gamma,
	                        const float *beta, int n, int c, int hw, char **why);
	int (*bn_forward_eval)(float *y, const float *x, const float *gamma, const float *beta,
	                       const float *running_mean, const float *running_var,
	                       int n, int c, int hw, char **why);
	int (*bn_backward)(float *dx, float *dgamma, float *dbeta, const float *dy, const float *x,
	                   const float *mean, const float *invstd, const float *gamma,
	                   int n, int c, int hw, int acc_dx, char **why);
	int (*relu_forward)(float *y, const float *x, size_t count, char **why);
	int (*relu_backward)(float *dx, const float *dy, const float *y, size_t count, char **why);
	int (*maxpool_forward)(float *y, const float *x, int n, int c, int h, int w, int k, int s,
	                       char **why);
	int (*maxpool_backward)(float *dx, const float *dy, const float *x, const float *y,
	                        int n, int c, int h, int w, int k, int s, int acc_dx, char **why);
	int (*avgpool_forward)(float *y, const float *x, int n, int c, int h, int w, int k, int s,
	                       char **why);
	int (*avgpool_backward)(float *dx, const float *dy, const float *x, const float *y,
	                        int n, int c, int h, int w, int k, int s, int acc_dx, char **why);
	/* a, y: (n, c, h, w); b: (n, cb, hb, wb) with hb = h * s, wb = w * s. */
	int (*shortcut_forward)(float *y, const float *a, const float *b, int n, int c, int h,
	                        int w, int cb, int s, char **why);
	int (*shortcut_backward)(float *da, float *db, const float *dy, int n, int c, int h, int w,
	                         int cb, int s, int acc_da, int acc_db, char **why);
	/* Forward and backward in one: *loss_sum, *correct as
	 * sd_softmax_xent_forward; dlogits = (probs - onehot) * scale. */
	int (*softmax_xent)(float *dlogits, double *loss_sum, int *correct, const float *logits,
	                    const uint8_t *labels, int n, int classes, float scale, char **why);
	int (*sgd_step)(float *params, float *velocity, const float *grads, size_t count,
	                float lr, float momentum, float weight_decay, char **why);
	/* sd_adamw_step: the same bits. */
	int (*adamw_step)(float *params, float *m, float *v, const float *grads, size_t count,
	                  const struct sd_adamw_scalars *s, char **why);
	/* sd_sumsq of x[0..count): the same bits (the same order). */
	int (*sumsq)(const float *x, size_t count, double *out, char **why);
};

struct sd_backend_ops {
	unsigned abi;              /* SD_BACKEND_ABI */
	size_t model_size;         /* sizeof(struct sd_model) the plugin was built with */
	size_t node_size;          /* sizeof(struct node) */
	const char *name;          /* "cuda" */
	/* Library versions the plugin was compiled against and runs with,
	 * e.g. "CUDA runtime 13.0, driver 13.0, cuDNN 9.19.0 (built 9.19.0), ...". */
	const char *(*versions)(void);

	/* Devices visible to this process.  Errors: no driver, driver too old. */
	int (*device_count)(int *count, char **why);
	/* Makes device `index` current for the calling thread and describes it. */
	int (*device_open)(int index, struct sd_backend_device *info, char **why);

	/* Builds the device copy of model m (its graph, not its values) for
	 * batches of up to max_batch samples; zeroes every block.  Refuses a
	 * graph with an operation it does not implement. */
	int (*model_create)(struct sd_dev_model **out, const struct sd_model *m, int max_batch,
	                    char **why);
	void (*model_destroy)(struct sd_dev_model *d);
	/* Copies a whole block (param_count or buffer_count floats) host <-> device.
	 * Both wait until the copy is complete. */
	int (*model_upload)(struct sd_dev_model *d, enum sd_dev_block b, const float *host, char **why);
	int (*model_download)(struct sd_dev_model *d, enum sd_dev_block b, float *host, char **why);
	/* The device address of a block (for NCCL), after all queued work on it. */
	float *(*model_block)(struct sd_dev_model *d, enum sd_dev_block b);
	/* sd_model_train_batch on the device: x (n, c, h, w) and labels (n) in host
	 * memory (page-locked memory from host_alloc is fastest); gradients stay on
	 * the device.  Waits only for the loss and accuracy it returns. */
	int (*train_batch)(struct sd_dev_model *d, const float *x, const uint8_t *labels, int n,
	                   float grad_scale, double *loss_sum, int *correct, char **why);
	/* Keeps the training set on the device (images: n samples of the
	 * model's input shape, labels: n), so that a step uploads only its
	 * sample indices and a kernel gathers the batch.  Refuses (-1, *why)
	 * a dataset that would take more than a quarter of the free device
	 * memory; the caller then keeps gathering batches on the host. */
	int (*dataset_upload)(struct sd_dev_model *d, const float *images, const uint8_t *labels,
	                      int n, char **why);
	/* train_batch on samples idx[0..n) of the uploaded training set. */
	int (*train_indexed)(struct sd_dev_model *d, const int32_t *idx, int n, float grad_scale,
	                     double *loss_sum, int *correct, char **why);
	/* sd_model_eval_batch on the device; any n (split into max_batch chunks). */
	int (*eval_batch)(struct sd_dev_model *d, const float *x, const uint8_t *labels, int n,
	                  double *loss_sum, int *correct, char **why);
	/* sd_sgd_step over the device blocks; queued, returns without waiting.
	 * A failure shows here or at the next call that waits. */
	int (*sgd_step)(struct sd_dev_model *d, float lr, float momentum, float weight_decay,
	                char **why);
	/* sd_adamw_step over the params, grads, velocity (first moment) and
	 * second-moment blocks; queued like sgd_step. */
	int (*adamw_step)(struct sd_dev_model *d, const struct sd_adamw_scalars *s, char **why);
	/* Gradient clipping: *sumsq = sd_sumsq of the gradient block (waits
	 * for it); grad_scale multiplies the block by coef (queued). */
	int (*grad_sumsq)(struct sd_dev_model *d, double *sumsq, char **why);
	int (*grad_scale)(struct sd_dev_model *d, float coef, char **why);
	/* How the model runs: "cuDNN conv algorithms by heuristics, CUDA graphs on, fp32". */
	const char *(*model_describe)(struct sd_dev_model *d);

	/* Page-locked host memory for staging batches (NULL on failure). */
	void *(*host_alloc)(size_t bytes);
	void (*host_free)(void *p);

	/* NCCL collectives over device memory (engine/comm-backend.h), or NULL
	 * when the plugin was built without NCCL. */
	const struct sd_comm_backend_ops *nccl;
	/* Single-layer entry points (above). */
	const struct sd_backend_layer_ops *layers;
	/* A language model (sd_model_seq_len > 0): sd_model_train_tokens and
	 * sd_model_eval_tokens on the device.  x, y: n * T int32 token ids
	 * (inputs, next-token targets), each checked below the vocabulary;
	 * the loss is the SUM of the next-token cross-entropy over the n * T
	 * positions, the logits' gradient scaled by grad_scale; the gradient
	 * block is zeroed then written each step.  Waits only for the loss.
	 * eval_tokens takes any n (split into max_batch chunks).  The image
	 * entry points refuse a language model and these refuse an image one. */
	int (*train_tokens)(struct sd_dev_model *d, const int32_t *x, const int32_t *y, int n,
	                    float grad_scale, double *loss_sum, char **why);
	int (*eval_tokens)(struct sd_dev_model *d, const int32_t *x, const int32_t *y, int n,
	                   double *loss_sum, char **why);
};

typedef const struct sd_backend_ops *(*sd_backend_entry_fn)(void);

#ifdef __cplusplus
}
#endif

#endif
