/* engine/model-graph.h - the inside of struct sd_model, PRIVATE to the
 * engine's executors: engine/model.c (the CPU one, which builds the graph)
 * and the CUDA backend (engine/cuda/exec.c), which runs the same graph on a
 * device.  Nothing outside engine/ includes this.
 *
 * A model is a list of nodes over activations.  Activation 0 is the input
 * image batch, the last activation is the logits.  Forward runs the nodes in
 * list order, backward in reverse.  An activation read by more than one node
 * (a ResNet block's input: the main branch and the shortcut) gets the sum of
 * their gradients; ReLU works in place (its output is its input activation).
 * Parameter tensors are views into ONE parameter buffer at the offsets of
 * engine/model.h's tensor table, and each parameter tensor belongs to exactly
 * one node; batch-norm running statistics are views into the buffers block.
 *
 * Whoever adds an operation here must teach both executors about it: the
 * CUDA one refuses a graph with an op it does not know (the trainer then
 * stays on the CPU and says why), so forgetting it is never silent.
 */
#ifndef SD_ENGINE_MODEL_GRAPH_H
#define SD_ENGINE_MODEL_GRAPH_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "engine/layers.h"
#include "engine/model.h"

/* Offset of an absent parameter tensor (a conv without bias). */
#define SD_NO_TENSOR ((size_t)-1)

enum sd_op { OP_CONV, OP_BN, OP_RELU, OP_MAXPOOL, OP_AVGPOOL, OP_LINEAR, OP_ADD,
             OP_ACT,    /* layers.h's sd_act_*, out of place; CPU only so far */
             OP_CONCAT, /* channels of in, then of in2 (same h, w); CPU only */
             OP_GCONV,  /* convolution with groups, dilation, rectangular kernel or
                         * strides, asymmetric pads (layers.h sd_gconv_*); CPU only */
             OP_BINARY, /* elementwise in op in2, or in op a broadcast constant;
                         * CPU only */
             OP_DROPOUT /* inverted dropout while training, identity in eval;
                         * CPU only */ };

/* Nodes the CPU executor runs a batch-norm together with (model.c, "node
 * execution").  Fusion only marks nodes: the ReLU and add nodes stay in the
 * list with their own activations, so an executor that ignores these marks
 * (the CUDA one) runs every node as before. */
enum sd_fuse { FUSE_NONE, FUSE_RELU, FUSE_ADD_RELU };

/* One activation: a (max_batch, c, h, w) buffer and its gradient. */
struct act {
	int c, h, w;
	int blk;            /* CPU layout of val/grad: 1 NCHW, 8 or 16 channel-blocked
	                     * (layers.h); other executors keep their own buffers */
	float *val;
	float *grad;
	int consumers;      /* nodes reading it; >1 means gradients add up */
	int grad_set;       /* during backward: grad already holds a contribution */
};

struct node {
	enum sd_op op;
	int in, in2, out;   /* activation ids; in2 only for OP_ADD (shortcut) and
	                     * OP_CONCAT (the second part) */
	char name[32];
	/* parameters: offsets into params/grads, SD_NO_TENSOR when absent */
	size_t w_off, b_off;            /* OP_LINEAR and OP_CONV may lack b_off */
	size_t rm_off, rv_off;          /* batch-norm running stats, in buffers */
	struct sd_conv2d_shape conv;    /* OP_CONV; n is set per call */
	int pad;                        /* OP_MAXPOOL, OP_AVGPOOL: padding (ONNX models
	                                 * only) */
	int count_pad;                  /* OP_AVGPOOL: padding counts in the divisor */
	int k, s;                       /* pooling window and stride; OP_ADD: the
	                                 * shortcut's subsampling stride */
	int fc_in, fc_out;              /* OP_LINEAR */
	enum sd_act_kind act;           /* OP_ACT: which, with its constants */
	float act_a, act_b;
	float *bn_mean, *bn_invstd;     /* OP_BN saved statistics, (c) */
	float bn_momentum, bn_eps;      /* OP_BN: running = (1 - momentum) running
	                                 * + momentum batch (layers.h's convention),
	                                 * and the variance's epsilon */
	int32_t *argmax;                /* OP_MAXPOOL */
	enum sd_fuse fuse;              /* OP_BN: what the CPU runs with it */
	int fused_from;                 /* tail of a fused group: head index + 1, else 0 */
	struct sd_gconv_shape gconv;    /* OP_GCONV; n is set per call */
	/* OP_BINARY: out = in op in2 (in2 >= 0: same shape), or with in2 -1
	 * out = in op k (k_first: k op in), k broadcast from bin_kc values (1
	 * or the channels): the trained tensor at w_off, or the node's own
	 * fixed copy bin_k when w_off is SD_NO_TENSOR. */
	enum sd_binop binop;
	int bin_kc, bin_k_first;
	float *bin_k;
	/* OP_DROPOUT: the probability of dropping, and the last training
	 * forward's mask (max_batch samples). */
	float drop_p;
	uint8_t *drop_mask;
};

struct sd_model {
	char name[32];
	int c, h, w, classes, max_batch;
	struct node *nodes;
	int nnodes, cap_nodes;
	struct act *acts;
	int nacts, cap_acts;
	struct sd_tensor_info *tensors;
	int ntensors, cap_tensors;
	size_t nparams, nbuffers;
	float *params, *grads, *buffers;
	float *probs;       /* (max_batch, classes) */
	float *ws;          /* conv workspace, shared by all convs */
	size_t ws_floats;
	float *scratch;     /* gradient scratch for multi-consumer activations */
	size_t scratch_floats;
	double flops;       /* forward multiply-adds per sample */
	struct sd_node_time *prof;   /* per-node times while profiling, else NULL */
	clockid_t prof_clock;
	int blk;            /* CPU activation layout (model.c choose_layout): 1, 8 or 16 */
	float *res;         /* blocked models: a shortcut's residual or its gradient */
	/* Backward's progress (sd_model_on_grad_ready): ready_from[i] is where
	 * the gradients of nodes i.. begin, i.e. the end of the parameters of
	 * nodes 0..i-1 (nnodes + 1 entries); points are its distinct values
	 * below nparams, decreasing (npoints of them). */
	size_t *ready_from, *points;
	int npoints;
	sd_grad_ready_fn on_ready;
	void *on_ready_ctx;
	/* Random draws of the next training batch (sd_model_set_noise). */
	uint64_t noise_seed, noise_first;
};

/* Batch-norm constants of the built-in models (PyTorch's defaults); a
 * model loaded from ONNX takes each node's own (engine/onnx.c). */
#define SD_BN_MOMENTUM 0.1f
#define SD_BN_EPS 1e-5f

/* Graph building, for engine/model.c's built-in models and engine/onnx.c's
 * lowering, so both produce the same kind of graph for the same executor.
 * sd_graph_new: an empty model for (c, h, w) inputs with activation 0 the
 * input; never fails (exits on out of memory like sd_malloc).
 * sd_graph_act: a new activation, its id.  sd_graph_node: a node reading
 * activation in (in2 -1, no tensors, out unset: the caller sets it).
 * sd_graph_tensor: reserves a parameter tensor named "node.what" of ndim
 * dims, its offset into the parameter buffer.  sd_graph_bn: a batch-norm
 * node over activation in with its gamma, beta and running statistics, its
 * output activation.  sd_graph_finish: the buffers for max_batch samples
 * and classes logits, the layout, the ready points; parameters and buffers
 * zero (the caller initialises them).  Returns 0, or -1 with *why when the
 * last activation is not (classes, 1, 1). */
struct sd_model *sd_graph_new(const char *name, int c, int h, int w, int max_batch);
int sd_graph_act(struct sd_model *m, int c, int h, int w);
struct node *sd_graph_node(struct sd_model *m, enum sd_op op, int in, const char *name);
size_t sd_graph_tensor(struct sd_model *m, const char *node, const char *what, int ndim,
                       int d0, int d1, int d2, int d3);
int sd_graph_bn(struct sd_model *m, int in, const char *name, float momentum, float eps);
int sd_graph_finish(struct sd_model *m, int classes, char **why);

#endif
