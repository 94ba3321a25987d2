/* engine/onnx-export.h - trained models written back out as ONNX.
 *
 * Two cases, both encoded with the protobuf-c code generated from Debian's
 * onnx.proto (the same code engine/onnx.c decodes with):
 *
 *   sd_onnx_export_model: a built-in model (engine/model.h) as a new ONNX
 *     graph, default-domain opset 13, IR version 7, written from the
 *     engine's node list:
 *       conv        -> Conv (kernel_shape, strides, pads), bias if it has one
 *       batch-norm  -> BatchNormalization, its epsilon, and ONNX's momentum
 *                      1 - the engine's (onnx.h explains the two conventions)
 *       ReLU        -> Relu
 *       max pooling -> MaxPool; average pooling -> GlobalAveragePool when
 *                      the window is the whole map, else AveragePool
 *       linear      -> Flatten (axis 1) when its input is still (N, C, H, W),
 *                      then Gemm with transB = 1 (weights stay (out, in))
 *       add         -> Add; the ResNets' "option A" shortcut (layers.h) is
 *                      Slice (rows and columns 0, s, 2s, ... of the block's
 *                      input, steps s) then Pad (constant zeros: (c - cb) / 2
 *                      channels before, the rest after) into the Add.  Both
 *                      are exact in ONNX's semantics (a copy and zeros), so
 *                      the graph computes what the engine computes.  Their
 *                      int64 arguments are Constant nodes, so the graph's
 *                      initializers are exactly the trained tensors.
 *     The input is "input", float32 (N, C, H, W) with N symbolic; the output
 *     the last node's value, float32 (N, classes) logits.  Initializers are
 *     named as the engine's tensors (sd_model_tensors: "conv1.weight",
 *     "s1.b1.bn1.gamma", ...) and the batch-norm running statistics
 *     "NODE.running_mean" and "NODE.running_var" ("bn1.running_mean").
 *     Activations and elementwise ops only ONNX files bring (OP_ACT,
 *     OP_CONCAT, OP_GCONV, OP_BINARY, OP_DROPOUT) are refused: no built-in
 *     model has them.
 *
 *   sd_onnx_export_file: a model trained from an ONNX file: the SAME file
 *     (graph, nodes, names, opsets, metadata) with each initializer the
 *     lowering took a parameter or running statistic from replaced by the
 *     trained values (transposed back where a MatMul's (in, out) weight was
 *     stored (out, in)); other initializers (shape constants) unchanged.
 *
 * Both also give the exported tensors, in initializer order, for writers of
 * other formats (the safetensors file of `spotdeck export`).
 * Errors: 0, or -1 with *why (caller frees) naming the file or node.
 */
#ifndef SD_ENGINE_ONNX_EXPORT_H
#define SD_ENGINE_ONNX_EXPORT_H

#include <stddef.h>
#include <stdint.h>

struct sd_model;

#define SD_EXPORT_MAX_DIMS 8

/* One exported float32 tensor: name, dims (row-major), count values. */
struct sd_export_tensor {
	char *name;                         /* owned */
	int ndim;
	int64_t dims[SD_EXPORT_MAX_DIMS];
	float *data;                        /* owned, count floats */
	size_t count;
};

struct sd_export {
	uint8_t *onnx;                      /* owned: the encoded ModelProto */
	size_t onnx_len;
	struct sd_export_tensor *tensors;   /* owned, ntensors */
	int ntensors;
};

/* m: a built-in model holding the parameters and buffers to export.
 * producer_version: written as the ModelProto's producer_version (may be
 * NULL).  *out: free with sd_export_free. */
int sd_onnx_export_model(const struct sd_model *m, const char *producer_version,
                         struct sd_export *out, char **why);

/* bytes[0..len): the ONNX file the model was trained from (file: its
 * name for the errors); params and buffers: the trained values, nparams
 * and nbuffers floats, which must be what the file lowers to (engine/onnx.h).
 * An initializer that two engine tensors were copied from (a shared weight)
 * must have trained to the same values in both, since the graph has one
 * place for it. */
int sd_onnx_export_file(const uint8_t *bytes, size_t len, const char *file, const float *params,
                        size_t nparams, const float *buffers, size_t nbuffers,
                        struct sd_export *out, char **why);

void sd_export_free(struct sd_export *e);

/* For engine/onnx-export.c, from engine/onnx.c's lowering: where a
 * parameter or buffer came from.  to_buffers: in the buffers block, else
 * in the parameters; off, count in floats; rows, cols > 0 when the
 * initializer is (rows, cols) and the engine keeps it transposed. */
struct sd_onnx_binding {
	char *init;                         /* the initializer's name, owned */
	int to_buffers;
	size_t off, count;
	int rows, cols;
};
/* Lowers bytes as sd_model_create_onnx does (batch 1), *out the model
 * (destroy it), and the bindings of every parameter and buffer that came
 * from an initializer (free with sd_onnx_bindings_free). */
int sd_onnx_bindings(struct sd_model **out, const uint8_t *bytes, size_t len, const char *file,
                     struct sd_onnx_binding **bind, int *nbind, char **why);
void sd_onnx_bindings_free(struct sd_onnx_binding *bind, int nbind);

#endif
