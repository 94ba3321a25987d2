/* engine/onnx.h - models from ONNX files ("your own model").
 *
 * A user exports a PyTorch model with torch.onnx.export(model, example,
 * "model.onnx") and spotdeck trains it: the file is decoded with protobuf-c
 * (the decoder is generated at build time by protoc-c from Debian's ONNX
 * schema, /usr/include/onnx/onnx.proto), the WHOLE graph is checked, and it
 * is lowered onto the engine's own node list (engine/model-graph.h), so an
 * ONNX model runs through exactly the executor code the built-in models run
 * through.  The file's initializers are the initial parameters and
 * batch-norm running statistics (no random initialisation).
 *
 * What the file must be:
 *   - an ONNX ModelProto whose default-domain opset is 13 to 17 (what
 *     torch.onnx.export writes with opset_version 13..17);
 *   - one graph input that is not an initializer: a float32 (N, C, H, W)
 *     tensor with C, H and W fixed numbers (N may be symbolic or a number:
 *     the batch); the activations are then (C, H, W) per sample; or int64
 *     (N, T) token ids with T fixed (a language model, below);
 *   - one graph output, float32 (N, classes): the logits.  A final Softmax
 *     or LogSoftmax over the classes is accepted and dropped, because the
 *     engine's loss is softmax cross-entropy on the logits;
 *   - float32 initializers in the file itself (no external data), each
 *     with dims describing at most SD_ONNX_MAX_ELEMS elements and data
 *     whose length matches them; int64 and bool tensors only as shape
 *     constants and flags;
 *   - nodes in topological order (as the ONNX specification requires),
 *     each of an op in the supported-op table (sd_onnx_ops, defined once in
 *     engine/onnx.c; the errors and the manual print it), with attributes
 *     the engine implements.  Integer computations on int64 constants
 *     (Constant, ConstantOfShape, Shape, Gather, Unsqueeze, Squeeze, Concat,
 *     Reshape, Slice with any steps, Transpose, Cast, Add, Sub, Mul: what
 *     `x.view(x.size(0), -1)` and F.pad's pads export to) are evaluated
 *     while loading, following the ONNX operator specification, on tensors
 *     of up to 8 dimensions and 4096 elements: every shape is fixed by the
 *     input's (C, H, W).  Arithmetic on the batch size is refused.  A Reshape whose target's first entry is the example's
 *     batch size (what an export without dynamic axes writes) keeps the
 *     batch there.
 *
 * Ops outside the built-in models' (LeakyRelu, Sigmoid, Tanh, Clip, padded
 * pooling, Concat of activations, a linear without bias, the general
 * convolutions, arithmetic, Reciprocal, Dropout) run on the CPU only: the
 * CUDA executor refuses such a graph and the trainer stays on the CPU.
 * (Batch-norm runs on either with the node's own momentum and epsilon.)
 *
 * How ops lower (the table in onnx.c says the same per op):
 *   Conv                -> conv where the kernel is square, the strides
 *                          and the pads equal, group and dilation 1 (the
 *                          engine's fast convolution, oneDNN or im2col);
 *                          any other kernel, strides, pads, dilations or
 *                          groups (depthwise included) -> the general
 *                          convolution (layers.h sd_gconv_*, CPU only)
 *   BatchNormalization  -> batch-norm, always in training mode while
 *                          training.  ONNX's momentum m means running =
 *                          m running + (1 - m) batch, so the node runs with
 *                          the engine's momentum 1 - m and its own epsilon;
 *                          the running variance is updated with the
 *                          unbiased batch variance, as PyTorch does.  The
 *                          extra outputs of a TrainingMode.TRAINING export
 *                          must be unused.
 *   Relu                -> ReLU (in place: its input must have no other
 *                          reader)
 *   LeakyRelu, Sigmoid, Tanh, Clip (constant bounds; ReLU6) -> layers.h's
 *                          sd_act_* (out of place; CPU only)
 *   MaxPool, AveragePool, GlobalAveragePool -> pooling (both may be
 *                          padded, by less than the window and by at most
 *                          half of it; average pooling with either
 *                          count_include_pad; a zero Pad of H and W read by
 *                          an AveragePool, torch's count_include_pad=True
 *                          export, is folded into it; a zero Pad of H and
 *                          W read by a Conv, any amounts, is added to the
 *                          Conv's pads)
 *   Add, Sub, Mul, Div of two same-shape activations, or of an activation
 *                          and a float constant (either side) that is a
 *                          scalar or one value per channel; Reciprocal
 *                          -> arithmetic nodes (layers.h sd_binary_*); a
 *                          constant from an initializer is a trained
 *                          parameter named after it, one from a Constant
 *                          node stays fixed
 *   Dropout             -> dropout with the node's ratio while training
 *                          (layers.h sd_dropout_*, masks from
 *                          sd_model_set_noise), the identity in inference
 *   Gemm, MatMul (+ Add of a bias) -> linear; the weight is stored (out, in);
 *                          tensors are named after their initializers
 *   Add of two activations of the same shape -> the residual add
 *   Slice, Pad of an activation -> only as the CIFAR ResNets' "option A"
 *                          shortcut (He et al. 2016): Add(y, Pad(Slice(x,
 *                          steps s on H and W from 0 over the whole axes),
 *                          zero pads on the channels only, equal on both
 *                          sides)), also without the Pad or the Slice,
 *                          which is `F.pad(x[:, :, ::s, ::s], (0, 0, 0, 0,
 *                          p, p))` exported.  It becomes the engine's
 *                          shortcut add (stride s, p zero channels each
 *                          side) that engine/model.c's ResNets use, so
 *                          tests/bench/torch_resnet.py's network loads as
 *                          exactly resnet20/resnet32, with their fused
 *                          channel-blocked layout.  H and W must be
 *                          multiples of s.  A Slice or Pad read by
 *                          anything but such an Add, a Slice of part of
 *                          the batch or channel axis or starting elsewhere
 *                          than 0, or a Pad of N, H or W is refused.
 *   Concat of activations along the channels -> concat nodes (CPU only)
 *   Flatten, Reshape to (N, -1) or to the same shape, Identity
 *                       -> nothing (the next node reads the same buffer).
 *
 * Language models (examples/char-gpt, a nanoGPT-style GPT): a
 * graph whose one input is int64 (N, T) token ids, T fixed, and whose
 * output is (N, T, vocabulary) logits lowers onto the engine's
 * language-model ops (model-graph.h enum sd_seq_op, engine/model-seq.c),
 * trained through model.h's sd_model_train_tokens (cross-entropy at every
 * position).  Activations there have any rank (batch first, which every op
 * keeps first); per op:
 *   Gather of a 2-D float initializer by the token ids (the input) or by
 *                          constant positions (Range, folded) -> embedding
 *                          (its gradient scatter-added into the table)
 *   MatMul by a float initializer, usually through a Transpose of it (a
 *                          Linear's weight), with the bias of a following
 *                          Add -> linear over every position; MatMul of two
 *                          activations of equal rank >= 3 with the same
 *                          batch dims -> batched products (OpenBLAS sgemm
 *                          per batch and head)
 *   LayerNormalization (opset 17), and the chain opsets 14-16 write for it
 *                          (ReduceMean, Sub, Pow 2, ReduceMean, Add eps,
 *                          Sqrt, Div, Mul weight, Add bias, recognised from
 *                          the ReduceMean by following each value to its
 *                          only reader) -> one layer norm over the last axis
 *   Softmax on the last axis; Erf; Pow by a float scalar; Sqrt; Relu,
 *                          Tanh, Sigmoid, LeakyRelu, Clip; Dropout; Transpose
 *                          keeping the batch first; Split along the last
 *                          axis; Reshape keeping the batch first (the
 *                          same buffer)
 *   Add, Sub, Mul, Div of two same-shape activations, or of an activation
 *                          and a float scalar or one value per last-axis
 *                          entry (an initializer is trained)
 *   Where(constant condition, float scalar, activation) -> a masked fill
 *                          (the causal mask: the condition is Equal of a
 *                          Slice of the registered mask buffer, folded);
 *                          masked positions get no gradient
 *   Equal, Range, Cast to bool, Slice of float constants -> folded at load.
 * The attention pattern (MatMul of q and k^T, Mul or Div by a scalar, the
 * causal masked fill, Softmax, MatMul by v; Dropout p = 0 between is
 * nothing) runs as ONE fused node per block (model-graph.h SEQ_ATTENTION),
 * and so does the exact GELU's chain (Div by sqrt 2, Erf, Add 1, Mul by x,
 * Mul by 0.5: SEQ_GELU) and the tanh GELU's (x * x, x * ., Mul 0.044715,
 * Add x, Mul sqrt(2/pi), Tanh, Add 1, Mul by x, Mul 0.5); the environment
 * variable SPOTDECK_FUSE=off keeps the separate nodes (the reference the
 * tests compare them with; a value other than on or off is refused).
 * Every initializer these ops train is ONE parameter tensor named after
 * it, however many nodes read it: the token embedding and the output
 * projection through its Transpose (weight tying) share one tensor whose
 * gradient is the sum of both uses.  A graph with any of these ops runs on
 * the CPU only (the CUDA executor refuses OP_SEQ nodes).
 *
 * Errors: every function returns 0, or -1 with *why (caller frees) set to
 * one line naming the file, the node (its name and op) when there is one,
 * and what is wrong; for an unsupported op the line lists the supported
 * ones.
 */
#ifndef SD_ENGINE_ONNX_H
#define SD_ENGINE_ONNX_H

#include <stddef.h>
#include <stdint.h>

struct sd_model;

/* Largest file the loader reads (bytes), and largest tensor it accepts
 * (elements; 2^28 float32 = 1 GiB).  Bounds, not limits of the format:
 * they keep a damaged or hostile file from making the loader allocate
 * without end. */
#define SD_ONNX_MAX_BYTES ((size_t)1 << 30)
#define SD_ONNX_MAX_ELEMS ((int64_t)1 << 28)

/* One entry of the supported-op table: the ONNX op type and how it lowers
 * (a phrase for the manual and the errors). */
struct sd_onnx_op {
	const char *op;
	const char *lowering;
};
/* The table, *count entries; static storage. */
const struct sd_onnx_op *sd_onnx_ops(int *count);
/* The op types joined with ", " into buf (len bytes, truncated to fit). */
void sd_onnx_op_list(char *buf, size_t len);

/* Whether a model name from a job or the command line names an ONNX file
 * (ends in ".onnx") rather than a built-in model. */
int sd_onnx_is_path(const char *name);

/* Reads path into *bytes (malloc'd, caller frees) and *len; refuses a file
 * larger than SD_ONNX_MAX_BYTES or an empty one. */
int sd_onnx_read_file(const char *path, uint8_t **bytes, size_t *len, char **why);

#define SD_ONNX_OPS_MAX 64
struct sd_onnx_info {
	int c, h, w;            /* one sample of the input (a language model:
	                         * c = T token ids, h = w = 1) */
	int classes;            /* logits per sample (a language model: the
	                         * vocabulary, logits per position) */
	double macs;            /* forward multiply-adds per sample (convs, linears) */
	size_t params;          /* trained float32 values */
	size_t buffers;         /* batch-norm running statistics, float32 values */
	int nodes;              /* ONNX nodes in the graph */
	int engine_nodes;       /* engine nodes they lowered to */
	int op_count[SD_ONNX_OPS_MAX];   /* per entry of sd_onnx_ops, same order */
	/* Signs of a torch.onnx.export in eval mode (its default,
	 * TrainingMode.EVAL): BatchNormalization nodes in inference form (one
	 * output; a training-mode export has training_mode=1 and the running
	 * statistics as outputs 2 and 3), and Identity nodes reading an
	 * initializer (eval mode merges equal initializers, e.g. every
	 * LayerNorm's ones, into one plus Identity aliases, which then train
	 * as one tied parameter).  Its Dropout nodes are gone too, which no
	 * count can show. */
	int bn_inference;
	int init_aliases;
};

/* One line (no newline) into buf saying that the file looks exported in
 * eval mode and what that changes, when info has a sign of it (above).
 * Returns 1 with the line written, 0 (buf empty) when it has none. */
int sd_onnx_eval_export_warning(const struct sd_onnx_info *info, const char *file, char *buf,
                                size_t len);

/* Decodes and checks the model in bytes[0..len) (file: its name, for the
 * errors only) and fills *info, without keeping anything. */
int sd_onnx_check(const uint8_t *bytes, size_t len, const char *file,
                  struct sd_onnx_info *info, char **why);

/* Builds the model in bytes[0..len) with activation memory for max_batch
 * samples.  Its parameters and buffers are the file's initializers; do
 * not call sd_model_init on it (that would draw He-normal weights).  Its
 * name (sd_model_name) is the file's base name, cut to 31 bytes.  *out:
 * destroy with sd_model_destroy.  bytes may be freed after the call. */
int sd_model_create_onnx(struct sd_model **out, const uint8_t *bytes, size_t len,
                         const char *file, int max_batch, char **why);

#endif
