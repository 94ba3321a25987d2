/* engine/model-graph.h - the inside of struct sd_model, PRIVATE to the
 * engine's executors: engine/model.c (the CPU one, which builds the graph)
 * and the CUDA backend (engine/cuda/exec.c), which runs the same graph on a
 * device.  Nothing outside engine/ includes this.
 *
 * A model is a list of nodes over activations.  Activation 0 is the input
 * image batch (a language model's: its token ids, as float), the last
 * activation is the logits (a language model's: (T, classes) per sample).
 * Forward runs the nodes in list order, backward in reverse.  An activation
 * read by more than one node (a ResNet block's input: the main branch and
 * the shortcut) gets the sum of their gradients; ReLU works in place (its
 * output is its input activation).
 * Parameter tensors are views into ONE parameter buffer at the offsets of
 * engine/model.h's tensor table, and each parameter tensor belongs to exactly
 * one node, except a language model's tied one (the token embedding and the
 * output projection: SEQ_EMBED and SEQ_LINEAR nodes with the same w_off),
 * whose gradient both nodes add into (the gradient buffer is zeroed before
 * each pass; the tensor is final once the embedding, the first node, has
 * run backward, which the ready points say); batch-norm running statistics
 * are views into the buffers block.
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
             OP_DROPOUT, /* inverted dropout while training, identity in eval;
                          * CPU only */
             OP_SEQ     /* a language-model op (enum sd_seq_op, engine/model-seq.c)
                         * on any-rank activations; CPU only */ };

/* The language-model ops (OP_SEQ nodes), run by engine/model-seq.c.  Their
 * activations are rank >= 1 per sample (struct act's dims); "rows" is the
 * product of every per-sample dimension but the last. */
enum sd_seq_op {
	SEQ_EMBED,     /* out (T, C) = table (V, C) at w_off, rows picked by the token ids
	                * in `in` (seq_idx NULL) or by the constant seq_idx (T) (positions,
	                * the same for every sample); backward adds dy into the picked rows */
	SEQ_LINEAR,    /* out (rows, N) = in (rows, K) W^T + b, W (N, K) at w_off, b at
	                * b_off or none (layers.h sd_linear_*, nb * rows at once) */
	SEQ_BMM,       /* out (G, M, N) = in (G, M, K) @ in2 (G, K, N): G = the
	                * per-sample batch dims (the heads), cblas_sgemm each */
	SEQ_LAYERNORM, /* over the last axis (C), eps, gamma w_off, beta b_off (either may be
	                * absent: gamma then ones in bin_k), saving mean and 1/std per row */
	SEQ_SOFTMAX,   /* over the last axis */
	SEQ_MASKFILL,  /* out = seq_mask ? seq_fill : in (the causal mask, per-sample
	                * bytes); masked positions get no gradient */
	SEQ_TRANSPOSE, /* per-sample dims permuted (seq_perm, over per-sample axes) */
	SEQ_SLICE,     /* out (rows, seq_n) = in (rows, seq_k)[:, seq_off : seq_off + seq_n]
	                * (Split along the last axis) */
	SEQ_ERF,       /* elementwise erf */
	SEQ_BIAS,      /* in op k, k broadcast from bin_kc values (1 or the last axis):
	                * OP_BINARY's constant case with the last axis as channels */
	SEQ_POW,       /* elementwise x^seq_scale (Pow by a scalar constant; Sqrt is
	                * seq_scale 0.5, computed by sqrtf) */
	SEQ_GELU,      /* GELU in one node (Hendrycks & Gimpel 2016): exact, x/2 (1 +
	                * erf(x / sqrt 2)), or with seq_tanh GPT-2's x/2 (1 + tanh(
	                * sqrt(2/pi) (x + 0.044715 x^3))); sd_seq_fuse_gelu makes it
	                * out of the export's chains */
	SEQ_ATTENTION, /* causal self-attention in one node: y (H, T, D) = softmax(q k^T
	                * seq_scale + causal mask) v, q = in, k = in2, v = in3, each
	                * (H, T, D); the softmax probabilities kept in activation
	                * seq_aux[0]'s buffer, backward's scratch in seq_aux[1]'s.
	                * sd_seq_fuse_attention makes it out of the unfused nodes. */
};

/* The most per-sample dimensions an activation may have. */
#define SD_ACT_MAX_RANK 6

/* Nodes the CPU executor runs a batch-norm together with (model.c, "node
 * execution").  Fusion only marks nodes: the ReLU and add nodes stay in the
 * list with their own activations, so an executor that ignores these marks
 * (the CUDA one) runs every node as before. */
enum sd_fuse { FUSE_NONE, FUSE_RELU, FUSE_ADD_RELU };

/* One activation: a (max_batch, c, h, w) buffer and its gradient.  An
 * image activation has rank 0 and lives in (c, h, w).  A language model's
 * has rank >= 1 and per-sample dims[0 .. rank) (batch excluded: (T, C) for
 * a (B, T, C) tensor, (H, T, T) for attention scores), row-major, with c =
 * their product and h = w = 1, so code that counts floats per sample
 * (c * h * w) works on both.  A language model's input activation holds
 * the (T) token ids of each sample as float (exact: ids are below 2^24). */
struct act {
	int c, h, w;
	int rank;
	int dims[SD_ACT_MAX_RANK];
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
	struct sd_conv2d_keep conv_keep; /* OP_CONV: bf16 input from forward to backward */
	struct sd_conv2d_keep conv_keep_dy; /* OP_CONV: bf16 output gradient from its consumer */
	int pad;                        /* OP_MAXPOOL, OP_AVGPOOL: padding (ONNX models
	                                 * only) */
	int count_pad;                  /* OP_AVGPOOL: padding counts in the divisor */
	int k, s;                       /* pooling window and stride; OP_ADD: the
	                                 * shortcut's subsampling stride */
	int fc_in, fc_out;              /* OP_LINEAR */
	enum sd_act_kind act;           /* OP_ACT: which, with its constants */
	float act_a, act_b;
	float *bn_mean, *bn_invstd;     /* OP_BN saved statistics, (c) */
	const uint16_t *bn_ybf;         /* OP_BN fused: the group's y in bf16 NHWC as its
	                                 * last training forward wrote it (the next
	                                 * convolution's conv_keep buffer), whose
	                                 * signs the backward reads as its ReLU
	                                 * mask; NULL when not written */
	unsigned long bn_ybf_plan;      /* OP_BN: that convolution's conv_keep.plan then */
	uint16_t *bn_ybits;             /* OP_BN fused with a residual: bn_ybf's ReLU
	                                 * mask in bits (sd_batchnorm_act_forward_
	                                 * train_bits), owned, bn_ybits_cap uint16 */
	size_t bn_ybits_cap;
	int bn_ybits_set;               /* bn_ybits written with bn_ybf by the last
	                                 * training forward */
	int bn_y_res;                   /* OP_BN fused: the group's y has two readers,
	                                 * the next convolution and the identity
	                                 * shortcut of group bn_y_res - 1, which
	                                 * reads the bf16 copy (link_residuals) */
	int bn_r_from;                  /* OP_BN with FUSE_ADD_RELU: the head + 1 of
	                                 * the group whose y is its identity
	                                 * residual and whose bn_y_res names it,
	                                 * else 0 */
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
	/* OP_SEQ (enum sd_seq_op above): rows and the last axis sizes of the
	 * op; SEQ_BMM: seq_g batches of (seq_m, seq_k) @ (seq_k, seq_n). */
	enum sd_seq_op seq;
	int seq_rows, seq_g, seq_m, seq_k, seq_n, seq_off;
	int in3, seq_aux[2];            /* SEQ_ATTENTION; seq_span: the nodes its group
	                                 * covers, itself included */
	int seq_span, seq_tanh;
	float seq_scale;
	int seq_rank, seq_dims[SD_ACT_MAX_RANK], seq_perm[SD_ACT_MAX_RANK];
	int32_t *seq_idx;               /* SEQ_EMBED's constant indices, owned */
	int32_t *seq_ids;               /* SEQ_EMBED of token ids: the last forward's
	                                 * ids as int32, max_batch * rows */
	uint8_t *seq_mask;              /* SEQ_MASKFILL, per sample, owned */
	float seq_fill, seq_eps;
	float *seq_mean, *seq_rstd;     /* SEQ_LAYERNORM, max_batch * rows each */
	uint32_t *seq_src;              /* SEQ_TRANSPOSE: per output element of a
	                                 * sample, its input element */
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
	/* Language models: the sequence length T (the input holds T token ids
	 * per sample, the last activation (T, classes) logits); 0 for images. */
	int seq_len;
};

/* engine/model-seq.c: OP_SEQ node i forward (train: 1 while training;
 * returns the nodes it covered: 1, or a fused group's) and
 * backward (need_dx: the input's gradient is wanted); the cross-entropy
 * at every position of a language model's logits (n * T rows of classes),
 * its gradient * scale into the logits' gradient when dlogits is not NULL;
 * returns the summed loss, or -1 with *why for an id out of range. */
int sd_seq_forward(struct sd_model *m, int i, int nb, int train);
void sd_seq_backward(struct sd_model *m, int i, int nb, int need_dx);
void sd_seq_finish(struct sd_model *m);
/* Recognises the attention pattern of a GPT's export in m's node list -
 * SEQ_BMM (q, k^T) -> SEQ_BIAS (* or / by a fixed scalar) -> SEQ_MASKFILL
 * (-inf above the diagonal) -> SEQ_SOFTMAX -> SEQ_BMM (., v), each
 * intermediate read by the next alone, k^T made by a SEQ_TRANSPOSE read by
 * that product alone - and turns each into one SEQ_ATTENTION node: the
 * first node becomes it, the last is marked the tail of its group
 * (fused_from), and the transpose of k is changed to give k (H, T, D).
 * The nodes in between stay in the list, skipped (the executor runs the
 * group as one, as it runs a fused batch-norm group).  Returns how many it
 * fused.  Call before sd_graph_finish. */
int sd_seq_fuse_attention(struct sd_model *m);
/* Likewise the exact GELU's chain - SEQ_BIAS (x / sqrt 2) -> SEQ_ERF ->
 * SEQ_BIAS (+ 1) -> OP_BINARY (x * .) -> SEQ_BIAS (* 0.5) - and the tanh
 * GELU's - x * x, x * ., 0.044715 *, x + ., sqrt(2/pi) *, Tanh, 1 +, x * .,
 * 0.5 * - the intermediates read by the next alone, into one SEQ_GELU
 * node.  Returns how many it fused. */
int sd_seq_fuse_gelu(struct sd_model *m);
/* The group of OP_SEQ nodes whose tail is node i backward; its head. */
int sd_seq_backward_group(struct sd_model *m, int i, int nb);
/* Softmax cross-entropy of rows rows of V logits against ids y, summed
 * in double; dlogits (may be NULL) = (softmax - onehot) * scale. */
double sd_seq_xent(const float *logits, float *dlogits, const int32_t *y, size_t rows, int V,
                   float scale);
/* Gradient protocol of model.c's backward, for model-seq.c: where a
 * node writes its input's gradient (overwriting), then commit it (adds
 * when another reader already wrote one). */
float *sd_graph_grad_target(struct sd_model *m, struct act *a);
void sd_graph_grad_commit(struct sd_model *m, struct act *a, size_t count);

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
/* A language-model activation of rank per-sample dims (c = their product). */
int sd_graph_seq_act(struct sd_model *m, int rank, const int *dims);
struct node *sd_graph_node(struct sd_model *m, enum sd_op op, int in, const char *name);
size_t sd_graph_tensor(struct sd_model *m, const char *node, const char *what, int ndim,
                       int d0, int d1, int d2, int d3);
int sd_graph_bn(struct sd_model *m, int in, const char *name, float momentum, float eps);
int sd_graph_finish(struct sd_model *m, int classes, char **why);

#endif
