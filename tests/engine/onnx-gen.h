/* tests/engine/onnx-gen.h - a tiny ONNX model written with protobuf-c, whole or
 * broken in one chosen way, for tests/engine/test-onnx-bad.c and the seed of
 * tests/fuzz/fuzz-onnx.c, and tests/engine/onnx-gen.c's file for the worker's test
 * (header only; no Python or PyTorch needed).
 *
 * The model (opset 13, float32): x (N, 1, 4, 4) -> Conv conv1 (w1: 2x1x3x3,
 * b1: 2, pads 1) -> Relu relu1 -> GlobalAveragePool gap -> Flatten flat ->
 * Gemm fc (w2: 3x2, transB 1, b2: 3) -> y (N, 3).  Weights: w1 = 0.1 (i+1),
 * w2 = 0.2 (i+1) - 0.5, biases 0.01 i. */
#ifndef SD_TESTS_ONNX_GEN_H
#define SD_TESTS_ONNX_GEN_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <protobuf-c/protobuf-c.h>

#include "onnx/onnx.pb-c.h"

enum gen_break {
	GEN_OK,
	GEN_UNSUPPORTED_OP,     /* relu1 is a Softplus */
	GEN_DANGLING,           /* gap reads "nowhere" */
	GEN_CYCLE,              /* relu1 reads gap's output, which reads relu1's */
	GEN_HUGE_INIT,          /* w2 claims 2^20 x 2^20 elements */
	GEN_RAW_MISMATCH,       /* w2's raw_data is 4 bytes short */
	GEN_OPSET7,             /* opset 7 */
	GEN_OPSET18,            /* opset 18, one past what the loader reads */
	GEN_DOUBLE_INIT,        /* w1 is float64 */
	GEN_TWO_OUTPUTS,        /* the graph also outputs relu1's r */
	GEN_TWO_INPUTS,         /* a second data input x2 */
	GEN_DYNAMIC_H,          /* the input's H is symbolic */
	GEN_GROUPS,             /* conv1 has group 2 */
	GEN_COUNT
};

#define GEN_NODES 5
#define GEN_INITS 4

struct gen_model {
	Onnx__ModelProto model;
	Onnx__OperatorSetIdProto opset, *opsets[1];
	Onnx__GraphProto graph;
	Onnx__NodeProto nodes[GEN_NODES], *node_ptrs[GEN_NODES];
	char *ins[GEN_NODES][3], *outs[GEN_NODES][1];
	Onnx__AttributeProto attrs[4], *conv_attrs[3], *gemm_attrs[1];
	int64_t pads[4];
	Onnx__TensorProto inits[GEN_INITS], *init_ptrs[GEN_INITS];
	int64_t dims[GEN_INITS][4];
	float data[GEN_INITS][32];
	double ddata[18];
	Onnx__ValueInfoProto in, in2, out, out2, *in_ptrs[2], *out_ptrs[2];
	Onnx__TypeProto in_type, out_type;
	Onnx__TypeProto__Tensor in_tt, out_tt;
	Onnx__TensorShapeProto in_shape, out_shape;
	Onnx__TensorShapeProto__Dimension in_dims[4], out_dims[2], *in_dim_ptrs[4],
		*out_dim_ptrs[2];
};

static inline void gen_dim(Onnx__TensorShapeProto__Dimension *d, int64_t v)
{
	Onnx__TensorShapeProto__Dimension z = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
	*d = z;
	if (v < 0) {
		d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
		d->dim_param = (char *)"N";
	} else {
		d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
		d->dim_value = v;
	}
}

static inline void gen_value(Onnx__ValueInfoProto *vi, Onnx__TypeProto *t,
                             Onnx__TypeProto__Tensor *tt, Onnx__TensorShapeProto *sh,
                             Onnx__TensorShapeProto__Dimension **dp, size_t nd, const char *name)
{
	Onnx__ValueInfoProto v0 = ONNX__VALUE_INFO_PROTO__INIT;
	Onnx__TypeProto t0 = ONNX__TYPE_PROTO__INIT;
	Onnx__TypeProto__Tensor tt0 = ONNX__TYPE_PROTO__TENSOR__INIT;
	Onnx__TensorShapeProto s0 = ONNX__TENSOR_SHAPE_PROTO__INIT;
	*vi = v0;
	*t = t0;
	*tt = tt0;
	*sh = s0;
	sh->n_dim = nd;
	sh->dim = dp;
	tt->has_elem_type = 1;
	tt->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
	tt->shape = sh;
	t->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
	t->tensor_type = tt;
	vi->name = (char *)name;
	vi->type = t;
}

static inline void gen_node(struct gen_model *g, int i, const char *op, const char *name,
                            const char *in0, const char *in1, const char *in2, const char *out)
{
	Onnx__NodeProto n0 = ONNX__NODE_PROTO__INIT;
	Onnx__NodeProto *n = &g->nodes[i];
	*n = n0;
	n->op_type = (char *)op;
	n->name = (char *)name;
	g->ins[i][0] = (char *)in0;
	g->ins[i][1] = (char *)in1;
	g->ins[i][2] = (char *)in2;
	n->n_input = in2 ? 3 : in1 ? 2 : 1;
	n->input = g->ins[i];
	g->outs[i][0] = (char *)out;
	n->n_output = 1;
	n->output = g->outs[i];
	g->node_ptrs[i] = n;
}

static inline void gen_init(struct gen_model *g, int i, const char *name, int ndim, int64_t d0,
                            int64_t d1, int64_t d2, int64_t d3, float scale, float shift)
{
	Onnx__TensorProto t0 = ONNX__TENSOR_PROTO__INIT;
	Onnx__TensorProto *t = &g->inits[i];
	*t = t0;
	t->name = (char *)name;
	int64_t d[4] = { d0, d1, d2, d3 };
	size_t count = 1;
	for (int k = 0; k < ndim; k++) {
		g->dims[i][k] = d[k];
		count *= (size_t)d[k];
	}
	for (size_t k = 0; k < count; k++)
		g->data[i][k] = scale * (float)(k + 1) + shift;
	t->n_dims = (size_t)ndim;
	t->dims = g->dims[i];
	t->has_data_type = 1;
	t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
	t->has_raw_data = 1;
	t->raw_data.data = (uint8_t *)g->data[i];
	t->raw_data.len = count * sizeof(float);
	g->init_ptrs[i] = t;
}

/* The model broken by brk, for (1, h, w) inputs and `classes` classes
 * (at most 16), with producer_name producer (NULL: this file), packed into a new buffer (caller frees); *len its size. */
static inline uint8_t *gen_model_bytes_shape(enum gen_break brk, int h, int w, int classes,
                                             const char *producer, size_t *len)
{
	struct gen_model *g = calloc(1, sizeof *g);
	if (!g)
		abort();
	Onnx__ModelProto m0 = ONNX__MODEL_PROTO__INIT;
	Onnx__OperatorSetIdProto o0 = ONNX__OPERATOR_SET_ID_PROTO__INIT;
	Onnx__GraphProto g0 = ONNX__GRAPH_PROTO__INIT;
	Onnx__AttributeProto a0 = ONNX__ATTRIBUTE_PROTO__INIT;
	g->model = m0;
	g->opset = o0;
	g->graph = g0;
	g->opset.domain = (char *)"";
	g->opset.has_version = 1;
	g->opset.version = brk == GEN_OPSET7 ? 7 : brk == GEN_OPSET18 ? 18 : 13;
	g->opsets[0] = &g->opset;
	g->model.has_ir_version = 1;
	g->model.ir_version = 8;
	g->model.n_opset_import = 1;
	g->model.opset_import = g->opsets;
	g->model.producer_name = (char *)(producer ? producer : "spotdeck tests/engine/onnx-gen.h");
	g->model.graph = &g->graph;
	g->graph.name = (char *)"tiny";

	gen_node(g, 0, "Conv", "conv1", "x", "w1", "b1", "c");
	gen_node(g, 1, brk == GEN_UNSUPPORTED_OP ? "Softplus" : "Relu", "relu1",
	         brk == GEN_CYCLE ? "g" : "c", NULL, NULL, "r");
	gen_node(g, 2, "GlobalAveragePool", "gap", brk == GEN_DANGLING ? "nowhere" : "r", NULL,
	         NULL, "g");
	gen_node(g, 3, "Flatten", "flat", "g", NULL, NULL, "f");
	gen_node(g, 4, "Gemm", "fc", "f", "w2", "b2", "y");
	for (int i = 0; i < 4; i++)
		g->attrs[i] = a0;
	g->attrs[0].name = (char *)"pads";
	g->attrs[0].has_type = 1;
	g->attrs[0].type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
	for (int i = 0; i < 4; i++)
		g->pads[i] = 1;
	g->attrs[0].n_ints = 4;
	g->attrs[0].ints = g->pads;
	g->attrs[1].name = (char *)"group";
	g->attrs[1].has_type = 1;
	g->attrs[1].type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
	g->attrs[1].has_i = 1;
	g->attrs[1].i = brk == GEN_GROUPS ? 2 : 1;
	g->attrs[2].name = (char *)"transB";
	g->attrs[2].has_type = 1;
	g->attrs[2].type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
	g->attrs[2].has_i = 1;
	g->attrs[2].i = 1;
	g->conv_attrs[0] = &g->attrs[0];
	g->conv_attrs[1] = &g->attrs[1];
	g->nodes[0].n_attribute = 2;
	g->nodes[0].attribute = g->conv_attrs;
	g->gemm_attrs[0] = &g->attrs[2];
	g->nodes[4].n_attribute = 1;
	g->nodes[4].attribute = g->gemm_attrs;
	g->graph.n_node = GEN_NODES;
	g->graph.node = g->node_ptrs;

	gen_init(g, 0, "w1", 4, 2, 1, 3, 3, 0.1f, 0);
	gen_init(g, 1, "b1", 1, 2, 0, 0, 0, 0.01f, -0.01f);
	gen_init(g, 2, "w2", 2, classes, 2, 0, 0, 0.2f, -0.5f);
	gen_init(g, 3, "b2", 1, classes, 0, 0, 0, 0.01f, -0.01f);
	if (brk == GEN_HUGE_INIT) {
		g->dims[2][0] = (int64_t)1 << 20;
		g->dims[2][1] = (int64_t)1 << 20;
	}
	if (brk == GEN_RAW_MISMATCH)
		g->inits[2].raw_data.len -= 4;
	if (brk == GEN_DOUBLE_INIT) {
		for (int k = 0; k < 18; k++)
			g->ddata[k] = g->data[0][k];
		g->inits[0].data_type = ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
		g->inits[0].raw_data.data = (uint8_t *)g->ddata;
		g->inits[0].raw_data.len = sizeof g->ddata;
	}
	g->graph.n_initializer = GEN_INITS;
	g->graph.initializer = g->init_ptrs;

	for (int i = 0; i < 4; i++) {
		gen_dim(&g->in_dims[i], i == 0 ? -1 : i == 1 ? 1 : i == 2 ? h : w);
		g->in_dim_ptrs[i] = &g->in_dims[i];
	}
	if (brk == GEN_DYNAMIC_H)
		gen_dim(&g->in_dims[2], -1);
	gen_dim(&g->out_dims[0], -1);
	gen_dim(&g->out_dims[1], classes);
	g->out_dim_ptrs[0] = &g->out_dims[0];
	g->out_dim_ptrs[1] = &g->out_dims[1];
	gen_value(&g->in, &g->in_type, &g->in_tt, &g->in_shape, g->in_dim_ptrs, 4, "x");
	gen_value(&g->out, &g->out_type, &g->out_tt, &g->out_shape, g->out_dim_ptrs, 2, "y");
	/* The extra input and output share the main ones' types. */
	Onnx__ValueInfoProto v0 = ONNX__VALUE_INFO_PROTO__INIT;
	g->in2 = v0;
	g->in2.name = (char *)"x2";
	g->in2.type = &g->in_type;
	g->out2 = v0;
	g->out2.name = (char *)"r";
	g->out2.type = &g->in_type;
	g->in_ptrs[0] = &g->in;
	g->in_ptrs[1] = &g->in2;
	g->out_ptrs[0] = &g->out;
	g->out_ptrs[1] = &g->out2;
	g->graph.n_input = brk == GEN_TWO_INPUTS ? 2 : 1;
	g->graph.input = g->in_ptrs;
	g->graph.n_output = brk == GEN_TWO_OUTPUTS ? 2 : 1;
	g->graph.output = g->out_ptrs;

	*len = onnx__model_proto__get_packed_size(&g->model);
	uint8_t *buf = malloc(*len ? *len : 1);
	if (!buf)
		abort();
	onnx__model_proto__pack(&g->model, buf);
	free(g);
	return buf;
}

/* The model of the comment at the top (4x4 inputs, 3 classes), broken by
 * brk. */
static inline uint8_t *gen_model_bytes(enum gen_break brk, size_t *len)
{
	return gen_model_bytes_shape(brk, 4, 4, 3, NULL, len);
}

#endif
