/* engine/model.h - the models the engine trains.
 *
 *   mlp       flatten -> fc 256 -> ReLU -> fc 10
 *   cnn       conv 5x5x32 pad 2 -> ReLU -> maxpool 2 -> conv 5x5x64 pad 2 -> ReLU
 *             -> maxpool 2 -> fc 128 -> ReLU -> fc classes
 *   resnet20, resnet32
 *             the CIFAR ResNets of He et al. 2016 ("Deep Residual Learning for
 *             Image Recognition", section 4.2): conv 3x3x16, then 3 stages of
 *             n = 3 (resnet20) or 5 (resnet32) basic blocks with 16, 32, 64
 *             channels, batch-norm after every conv, parameter-free "option A"
 *             shortcuts (stride-2 subsampling, zero-padded channels), global
 *             average pooling, fc classes.  ResNet-32 is the seeds' workload.
 *
 * All parameters live in ONE contiguous float32 buffer and all gradients in
 * another of the same length, with per-tensor views (sd_model_tensors), so an
 * all-reduce or a checkpoint is one call.  Batch-norm running statistics live
 * in a third buffer ("buffers"); they are state, not trained parameters.
 * Initialisation: He-normal for conv and fc weights (He et al. 2015), zero
 * biases, gamma 1, beta 0; deterministic given the seed.
 */
#ifndef SD_ENGINE_MODEL_H
#define SD_ENGINE_MODEL_H

#include <stddef.h>
#include <stdint.h>

struct sd_model;

struct sd_tensor_info {
	char name[40];      /* e.g. "conv1.weight", "stage2.block1.bn2.gamma" */
	int ndim;
	int shape[4];
	size_t offset;      /* floats from the start of the parameter buffer */
	size_t count;
};

/* Names accepted by sd_model_create, NULL-terminated. */
extern const char *const sd_model_names[];

/* Builds model name for images of shape (c, h, w) and classes classes, with
 * activation memory for batches of up to max_batch samples.  Returns 0, or -1
 * with *why (caller frees) for an unknown name, a shape the model cannot
 * take (e.g. a ResNet on 1x28x28 is fine, an mlp is anything), or a
 * SPOTDECK_CONV that is not auto, im2col or onednn (layers.h). */
int sd_model_create(struct sd_model **out, const char *name, int c, int h, int w,
                    int classes, int max_batch, char **why);
void sd_model_destroy(struct sd_model *m);

const char *sd_model_name(const struct sd_model *m);
/* Layout of the model's activations, fixed when it was built: 1 for NCHW
 * (every convolution through sd_conv2d_forward/backward, each on the path
 * layers.h chooses per shape), or 8 / 16 for oneDNN's channel-blocked
 * layout (the ResNets when oneDNN runs all their convolutions: no
 * activation is ever reordered, and each batch-norm runs fused with the
 * ReLU and residual add after it).  The parameters are the same in both, so
 * checkpoints do not depend on it. */
int sd_model_channel_block(const struct sd_model *m);
/* Deterministic initialisation of parameters and buffers from seed. */
void sd_model_init(struct sd_model *m, uint64_t seed);

size_t sd_model_param_count(const struct sd_model *m);
float *sd_model_params(struct sd_model *m);          /* param_count floats */
float *sd_model_grads(struct sd_model *m);           /* param_count floats, then
                                                       * SD_MODEL_GRAD_TAIL spare ones */
/* The gradient buffer ends with SD_MODEL_GRAD_TAIL floats that the model
 * never reads or writes: room for a caller's few values to travel in the
 * same collective as the gradients (the elastic worker's step metrics, see
 * src/worker/worker-agent.c), so a step needs one round trip, not two. */
#define SD_MODEL_GRAD_TAIL 4
size_t sd_model_buffer_count(const struct sd_model *m);
float *sd_model_buffers(struct sd_model *m);         /* BN running stats */
const struct sd_tensor_info *sd_model_tensors(const struct sd_model *m, int *count);
/* Forward + backward multiply-adds x 2 per sample (forward and backward), for
 * GFLOP/s figures: 2 FLOP per MAC, backward counted as 2x forward. */
double sd_model_flops_per_sample(const struct sd_model *m);
/* Convolutions of the model that run on the oneDNN path (engine/layers.h
 * sd_conv2d_path at the model's largest batch; all of them in a blocked
 * model), the ones a bf16 precision changes; 0 for a model without any. */
int sd_model_onednn_convs(const struct sd_model *m);
/* Linear layers (image models' and language models' alike) whose GEMMs a
 * bf16 precision runs through oneDNN (engine/matmul-dnnl.h's rule at the
 * model's largest batch: rows = batch, or batch x positions); 0 without
 * oneDNN bf16 kernels or when no shape is large enough. */
int sd_model_bf16_linears(const struct sd_model *m);

/* Gradients as backward completes them, so their all-reduce can overlap
 * the rest of backward (engine/grad-sync.h).  Parameters are laid out in
 * forward order and backward runs in reverse, so the gradient buffer fills
 * from its end: while fn is set, sd_model_train_batch calls fn(ctx,
 * ready_from) on its own thread after each node's backward (for a fused
 * group, after the group), where grads[ready_from, param_count) are final
 * for this batch: nothing later in the pass writes them.  ready_from never
 * grows within a pass and is always one of the model's ready points.  A
 * batch of 0 samples runs no backward and makes no call.  fn NULL removes
 * it.  Like the rest of the model, not thread-safe. */
typedef void (*sd_grad_ready_fn)(void *ctx, size_t ready_from);
void sd_model_on_grad_ready(struct sd_model *m, sd_grad_ready_fn fn, void *ctx);
/* The values ready_from can take: *count distinct offsets below
 * param_count, decreasing, the last 0 (a model without parameters has
 * none).  Fixed when the model is built; the array lives as long as m.
 * Two models of the same name and input shape have the same points, so
 * ranks that cut their gradients at them agree on the pieces. */
const size_t *sd_model_grad_ready_points(const struct sd_model *m, int *count);

/* Time per node, for benchmarks (tests/bench/bench-train --profile).
 * sd_model_profile_start zeroes the times and turns timing on; from then on
 * every forward and backward pass adds each node's seconds (a clock read
 * between nodes, so the layers themselves are unchanged).  cpu_clock: 0 for
 * wall time, 1 for the process's CPU time (with one thread, what the node
 * cost even while other processes take turns on the core).  name and op
 * point into the model (valid while it lives). */
struct sd_node_time {
	const char *name;     /* node name, e.g. "s1.b1.conv1" */
	const char *op;       /* "conv", "batchnorm", "bn+relu", ... */
	double forward_s, backward_s;
};
void sd_model_profile_start(struct sd_model *m, int cpu_clock);
/* The times, one per node in forward order; *count 0 and NULL before
 * sd_model_profile_start.  A fused group's time is its first node's forward
 * and its last node's backward. */
const struct sd_node_time *sd_model_profile(const struct sd_model *m, int *count);

/* Training pass on n samples x: (n, c, h, w), labels: (n).  Zeroes the
 * gradient buffer, runs forward and backward (batch-norm in training mode)
 * and leaves sum over samples of dloss/dparam * grad_scale in the gradients;
 * pass grad_scale = 1 / global_batch.  *loss_sum gets the summed
 * cross-entropy, *correct the number of correct arg-maxes (either may be
 * NULL).  n may be 0 (gradients are then zero).  Returns 0, or -1 with *why
 * when n exceeds max_batch or the model is a language model (see
 * sd_model_train_tokens; sd_model_eval_batch likewise). */
int sd_model_train_batch(struct sd_model *m, const float *x, const uint8_t *labels,
                         int n, float grad_scale, double *loss_sum, int *correct,
                         char **why);
/* The random draws of the following training passes (dropout's masks, the
 * only ones so far): sample i of a batch draws from a stream determined by
 * (seed, first_sample + i) alone, so a step replayed or resumed, or split
 * over other workers, draws the same masks when the trainer passes a seed
 * made of the run's seed and the step, and first_sample = the position of
 * the batch's first sample in the step's global batch (engine/train.c).
 * Inference passes draw nothing. */
void sd_model_set_noise(struct sd_model *m, uint64_t seed, uint64_t first_sample);
/* 1 when the model has a dropout node (its training passes draw). */
int sd_model_has_dropout(const struct sd_model *m);
/* Inference pass (batch-norm with running statistics); no gradients. */
int sd_model_eval_batch(struct sd_model *m, const float *x, const uint8_t *labels,
                        int n, double *loss_sum, int *correct, char **why);

/* Language models: a graph whose input is a batch of token-id sequences
 * (engine/onnx.c lowers one from an ONNX file whose input is an int64
 * (batch, T) tensor, e.g. examples/char-gpt/) and whose output is
 * (batch, T, vocab) logits.  sd_model_seq_len: T, the sequence length
 * (block size) the model was built for; 0 for an image model, which the
 * two calls below refuse.  The vocabulary is the model's classes.
 * x, y: (n, T) int32 token ids, row-major, each below the vocabulary:
 * the model reads x and is scored on y (y = x shifted by one,
 * engine/tokens.h sd_tokens_window).  The loss is next-token cross-entropy
 * at every position.
 * sd_model_train_tokens: zeroes the gradients, runs forward and backward,
 * and leaves sum over the n * T positions of dloss/dparam * grad_scale in
 * the gradients; pass grad_scale = 1 / (global_batch * T) for the mean
 * over positions (nanoGPT's and llm.c's loss).  *loss_sum (may be NULL)
 * gets the cross-entropy summed over the n * T positions.
 * sd_model_eval_tokens: the inference pass (dropout off), *loss_sum alike.
 * Both return 0, or -1 with *why when n exceeds max_batch, the model is
 * not a language model, or an id is out of range. */
int sd_model_seq_len(const struct sd_model *m);
int sd_model_train_tokens(struct sd_model *m, const int32_t *x, const int32_t *y, int n,
                          float grad_scale, double *loss_sum, char **why);
int sd_model_eval_tokens(struct sd_model *m, const int32_t *x, const int32_t *y, int n,
                         double *loss_sum, char **why);

#endif
