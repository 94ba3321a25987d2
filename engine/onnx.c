/* engine/onnx.c - ONNX files lowered onto the engine's node list (onnx.h).
 *
 * The file is decoded by the protobuf-c code protoc-c generates from
 * Debian's onnx.proto; this file then walks the graph once, in node order
 * (ONNX requires topological order), keeping for every named value either
 * an activation of the model being built or a constant (an initializer, a
 * Constant node, or a folded shape computation).  Every node is checked
 * before anything is built from it, so a file the loader accepts is one the
 * executor can run. */
#include "engine/onnx.h"
#include "engine/onnx-export.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <protobuf-c/protobuf-c.h>

#include "src/base/errors.h"
#include "engine/layers.h"
#include "engine/model-graph.h"
#include "engine/model.h"
#include "onnx/onnx.pb-c.h"

/* The default-domain opsets accepted: what torch.onnx.export writes for
 * opset_version 13 to 17 (Debian 12's torch 1.13 goes up to 17). */
#define OPSET_MIN 13
#define OPSET_MAX 17

/* A value of a shape computation that stands for the batch size: Shape of
 * an activation gives it as dimension 0, and Reshape takes it back. */
#define BATCH_DIM (INT64_MIN + 7)

/* Largest per-sample activation (floats) and input dimension accepted. */
#define MAX_ACT_FLOATS ((size_t)1 << 26)
/* ... and all activations of a model together (16 GiB at batch 1 with
 * their gradients): GPT-2 small at block 1024 (12 layers of (12, 1024,
 * 1024) attention scores, the (1024, 50257) logits) needs about 1.2e9
 * floats per sample as the graph lists them; host buffers are allocated
 * untouched until a pass writes them. */
#define MAX_MODEL_ACT_FLOATS ((size_t)1 << 31)
#define MAX_DIM 65536

struct lower;
typedef int (*lower_fn)(struct lower *L, const Onnx__NodeProto *nd);

static int lower_conv(struct lower *L, const Onnx__NodeProto *nd);
static int lower_bn(struct lower *L, const Onnx__NodeProto *nd);
static int lower_relu(struct lower *L, const Onnx__NodeProto *nd);
static int lower_act(struct lower *L, const Onnx__NodeProto *nd);
static int lower_pool(struct lower *L, const Onnx__NodeProto *nd);
static int lower_gap(struct lower *L, const Onnx__NodeProto *nd);
static int lower_flatten(struct lower *L, const Onnx__NodeProto *nd);
static int lower_reshape(struct lower *L, const Onnx__NodeProto *nd);
static int lower_gemm(struct lower *L, const Onnx__NodeProto *nd);
static int lower_matmul(struct lower *L, const Onnx__NodeProto *nd);
static int lower_add(struct lower *L, const Onnx__NodeProto *nd);
static int lower_identity(struct lower *L, const Onnx__NodeProto *nd);
static int lower_constant(struct lower *L, const Onnx__NodeProto *nd);
static int lower_shape(struct lower *L, const Onnx__NodeProto *nd);
static int lower_gather(struct lower *L, const Onnx__NodeProto *nd);
static int lower_unsqueeze(struct lower *L, const Onnx__NodeProto *nd);
static int lower_concat(struct lower *L, const Onnx__NodeProto *nd);
static int lower_cast(struct lower *L, const Onnx__NodeProto *nd);
static int lower_softmax(struct lower *L, const Onnx__NodeProto *nd);
static int lower_slice(struct lower *L, const Onnx__NodeProto *nd);
static int lower_pad(struct lower *L, const Onnx__NodeProto *nd);
static int lower_transpose(struct lower *L, const Onnx__NodeProto *nd);
static int lower_mul(struct lower *L, const Onnx__NodeProto *nd);
static int lower_sub(struct lower *L, const Onnx__NodeProto *nd);
static int lower_div(struct lower *L, const Onnx__NodeProto *nd);
static int lower_reciprocal(struct lower *L, const Onnx__NodeProto *nd);
static int lower_dropout(struct lower *L, const Onnx__NodeProto *nd);
static int lower_arith(struct lower *L, const Onnx__NodeProto *nd, enum sd_binop op);
static int lower_squeeze(struct lower *L, const Onnx__NodeProto *nd);
static int lower_constant_of_shape(struct lower *L, const Onnx__NodeProto *nd);
static int add_view(struct lower *L, const Onnx__NodeProto *nd, int a, int b);
static int arith_consts(struct lower *L, const Onnx__NodeProto *nd, char op);
static int reshape_const(struct lower *L, const Onnx__NodeProto *nd, int x);
static int op_index(const char *op);
static int lower_erf(struct lower *L, const Onnx__NodeProto *nd);
static int lower_where(struct lower *L, const Onnx__NodeProto *nd);
static int lower_equal(struct lower *L, const Onnx__NodeProto *nd);
static int lower_range(struct lower *L, const Onnx__NodeProto *nd);
static int lower_split(struct lower *L, const Onnx__NodeProto *nd);
static int lower_layernorm(struct lower *L, const Onnx__NodeProto *nd);
static int lower_reduce_mean(struct lower *L, const Onnx__NodeProto *nd);
static int lower_ln_part(struct lower *L, const Onnx__NodeProto *nd);
static int seq_gather(struct lower *L, const Onnx__NodeProto *nd);
static int seq_matmul(struct lower *L, const Onnx__NodeProto *nd, int a, int b);
static int seq_arith(struct lower *L, const Onnx__NodeProto *nd, int a, int b, enum sd_binop op);
static int seq_transpose(struct lower *L, const Onnx__NodeProto *nd, int x);
static int seq_reshape(struct lower *L, const Onnx__NodeProto *nd, int x);
static int seq_softmax(struct lower *L, const Onnx__NodeProto *nd, int x);
static int seq_dropout(struct lower *L, const Onnx__NodeProto *nd, int x, float p);
static int transpose_weight(struct lower *L, const Onnx__NodeProto *nd, int x);
static int is_seq(const struct lower *L, int v);
static struct node *seq_node(struct lower *L, const Onnx__NodeProto *nd, enum sd_seq_op op,
                             int in, int ndim, const int64_t *dims);

/* THE supported-op table: the loader dispatches on it, the errors list it,
 * and spotdeck-job(5) prints it. */
static const struct {
	struct sd_onnx_op pub;
	lower_fn fn;
} ops[] = {
	{ { "Conv", "convolution: any kernel, strides, pads, dilations and groups (depthwise "
	    "included); square kernels with one stride and pad, no groups or dilation run the "
	    "fast path" }, lower_conv },
	{ { "BatchNormalization", "batch-norm with the node's momentum and epsilon" }, lower_bn },
	{ { "Relu", "ReLU (in place)" }, lower_relu },
	{ { "LeakyRelu", "leaky ReLU with the node's alpha" }, lower_act },
	{ { "Sigmoid", "sigmoid" }, lower_act },
	{ { "Tanh", "tanh" }, lower_act },
	{ { "Clip", "clip to constant bounds (ReLU6 exports as Clip 0, 6)" }, lower_act },
	{ { "MaxPool", "max pooling, square window, equal pads less than the window" },
	  lower_pool },
	{ { "AveragePool", "average pooling, square window, equal pads up to half the window, "
	    "count_include_pad 0 or 1" }, lower_pool },
	{ { "GlobalAveragePool", "global average pooling of a square map" }, lower_gap },
	{ { "Flatten", "axis 1: nothing (same buffer)" }, lower_flatten },
	{ { "Reshape", "to (N, -1) or the same shape: nothing; shape folded at load; of int64 "
	    "constants: folded at load" }, lower_reshape },
	{ { "Gemm", "linear (alpha = beta = 1, transA = 0)" }, lower_gemm },
	{ { "MatMul", "linear by a constant weight, with the bias of a following Add" },
	  lower_matmul },
	{ { "Add", "of two same-shape activations, of an activation and a ResNet option-A "
	    "shortcut (Slice/Pad below), of an activation and a constant (as Mul), MatMul's bias; "
	    "of int64 constants: folded at load" }, lower_add },
	{ { "Slice", "of an activation: only x[:, :, ::s, ::s] as a ResNet option-A shortcut "
	    "read by an Add (lowered into that add); of int64 constants (any steps): folded at "
	    "load" }, lower_slice },
	{ { "Pad", "of an activation: only zero channels equally on both sides as a ResNet "
	    "option-A shortcut read by an Add (lowered into that add), or zero rows and columns "
	    "read by a Conv (any amounts: added to its pads) or an AveragePool (equal amounts, "
	    "as AvgPool2d(count_include_pad=True) exports; lowered into it)" }, lower_pad },
	{ { "Identity", "nothing" }, lower_identity },
	{ { "Dropout", "inverted dropout with the node's ratio while training, nothing in "
	    "inference" }, lower_dropout },
	{ { "Constant", "a constant, folded at load" }, lower_constant },
	{ { "Shape", "folded at load" }, lower_shape },
	{ { "Gather", "of int64 constants, folded at load" }, lower_gather },
	{ { "Unsqueeze", "of int64 constants, folded at load" }, lower_unsqueeze },
	{ { "Squeeze", "of int64 constants, folded at load" }, lower_squeeze },
	{ { "ConstantOfShape", "folded at load" }, lower_constant_of_shape },
	{ { "Transpose", "of int64 constants, folded at load" }, lower_transpose },
	{ { "Mul", "of two same-shape activations, or of an activation and a float constant "
	    "(either side) that is a scalar or one value per channel, (1, C, 1, 1); an "
	    "initializer constant is trained, a Constant node's is not; of int64 constants: folded "
	    "at load" }, lower_mul },
	{ { "Sub", "as Mul" }, lower_sub },
	{ { "Div", "as Mul" }, lower_div },
	{ { "Reciprocal", "1 / x of an activation" }, lower_reciprocal },
	{ { "Concat", "of activations along the channels, or of constants (folded at load)" },
	  lower_concat },
	{ { "Cast", "of constants to float32 or int64, folded at load" }, lower_cast },
	{ { "Softmax", "as the last node only: dropped (the loss is softmax cross-entropy)" },
	  lower_softmax },
	{ { "LogSoftmax", "as the last node only: dropped (the loss is softmax cross-entropy)" },
	  lower_softmax },
	/* Language models (an int64 (N, T) token input; examples/char-gpt).
	 * The ops above also take their (N, T, ...) activations: Gather of a
	 * float initializer by the token ids or by constant positions ->
	 * embedding; MatMul by a weight -> linear over every position, of two
	 * activations -> batched matrix product; Add/Sub/Mul/Div of two
	 * same-shape activations, or with a scalar or one value per last-axis
	 * entry; Transpose keeping the batch first; Reshape keeping the batch
	 * (nothing: same buffer); Softmax on the last axis; Dropout. */
	{ { "Erf", "elementwise erf of an activation (the exact GELU's chain, run as one "
	    "GELU node, as is the tanh GELU's Mul / Tanh chain)" }, lower_erf },
	{ { "Where", "of a constant condition, a constant scalar and an activation: a masked "
	    "fill (the causal mask)" }, lower_where },
	{ { "Equal", "of constants, folded at load" }, lower_equal },
	{ { "Range", "of constants, folded at load" }, lower_range },
	{ { "Split", "of an activation along its last axis" }, lower_split },
	{ { "LayerNormalization", "layer norm over the last axis" }, lower_layernorm },
	{ { "ReduceMean", "only as the head of the LayerNorm chain of opsets before 17 "
	    "(ReduceMean, Sub, Pow 2, ReduceMean, Add eps, Sqrt, Div, Mul, Add): one layer norm" },
	  lower_reduce_mean },
	{ { "Pow", "of an activation by a float scalar; inside that LayerNorm chain: part of "
	    "its node" }, lower_ln_part },
	{ { "Sqrt", "of an activation; inside that LayerNorm chain: part of its node" },
	  lower_ln_part },
};
#define NOPS ((int)(sizeof ops / sizeof ops[0]))
_Static_assert(NOPS <= SD_ONNX_OPS_MAX, "SD_ONNX_OPS_MAX too small");

const struct sd_onnx_op *sd_onnx_ops(int *count)
{
	static struct sd_onnx_op pub[NOPS];
	for (int i = 0; i < NOPS; i++)
		pub[i] = ops[i].pub;
	*count = NOPS;
	return pub;
}

void sd_onnx_op_list(char *buf, size_t len)
{
	size_t used = 0;
	if (len)
		buf[0] = 0;
	for (int i = 0; i < NOPS && used + 1 < len; i++) {
		int w = snprintf(buf + used, len - used, "%s%s", i ? ", " : "", ops[i].pub.op);
		if (w < 0)
			break;
		used += (size_t)w;
	}
}

int sd_onnx_is_path(const char *name)
{
	size_t n = strlen(name);
	return n > 5 && !strcmp(name + n - 5, ".onnx");
}

int sd_onnx_read_file(const char *path, uint8_t **bytes, size_t *len, char **why)
{
	*bytes = NULL;
	*len = 0;
	FILE *f = fopen(path, "rb");
	if (!f)
		return sd_why(why, "%s: %s", path, strerror(errno));
	struct stat st;
	if (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode)) {
		fclose(f);
		return sd_why(why, "%s: not a regular file", path);
	}
	if ((uint64_t)st.st_size > SD_ONNX_MAX_BYTES) {
		fclose(f);
		return sd_why(why, "%s: %lld bytes, more than the %zu an ONNX model may have here",
		              path, (long long)st.st_size, SD_ONNX_MAX_BYTES);
	}
	if (st.st_size == 0) {
		fclose(f);
		return sd_why(why, "%s: empty file, not an ONNX model", path);
	}
	size_t n = (size_t)st.st_size;
	uint8_t *b = sd_malloc(n);
	size_t got = fread(b, 1, n, f);
	int err = ferror(f);
	fclose(f);
	if (got != n || err) {
		free(b);
		return sd_why(why, "%s: read %zu of %zu bytes", path, got, n);
	}
	*bytes = b;
	*len = n;
	return 0;
}

/* ------------------------------------------------------------ values */

/* V_VIEW: a Slice or Pad of an activation, which only the Add of a ResNet
 * option-A shortcut may read (see "the option-A shortcut" below). */
enum vkind { V_ACT, V_CONST, V_VIEW };

struct val {
	const char *name;       /* points into the decoded file */
	enum vkind kind;
	int act, rank;          /* V_ACT: activation, rank 4 (N,C,H,W) or 2 (N,F) */
	int linear_node;        /* V_ACT made by MatMul: its engine node, else -1 */
	int dtype;              /* V_CONST: ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT or INT64 */
	int ndim;
	int64_t dims[8];
	size_t count;
	float *f;               /* owned; count floats */
	int64_t *i;             /* owned; count int64s */
	const char *init;       /* initializer it came from, for tensor names */
	int consumers;          /* node inputs and graph outputs reading it */
	/* V_VIEW of activation act: subsampled by vs_h, vs_w, vpad zero
	 * channels on each side, or (never both) zero rows and columns, vsp[]
	 * = top, left, bottom, right (read only by a Conv, which takes them
	 * into its pads, or by an AveragePool when all four are equal); vsp[0]
	 * + vsp[1] + vsp[2] + vsp[3] > 0 marks the latter kind; its shape vc x
	 * vh x vw. */
	int vs_h, vs_w, vpad, vsp[4], vc, vh, vw;
	/* V_ACT of a language model: ndim and dims are its whole shape, dims[0]
	 * BATCH_DIM (rank = ndim).  V_CONST wt: a Transpose of a 2-D float
	 * initializer, dims the transposed ones, f still in the initializer's
	 * layout (a weight for a MatMul). */
	int seq, wt;
};

/* A parameter or buffer copy to make once the model's buffers exist. */
struct copy {
	int to_buffers;
	size_t off;
	const float *src;       /* into a value's f */
	size_t count;
	int rows, cols;         /* > 0: src is (rows, cols) and goes in transposed */
	const char *init;       /* the initializer src came from, else NULL */
};

struct lower {
	const char *file;
	const Onnx__GraphProto *g;
	struct sd_model *m;
	struct val *vals;
	int nvals, cap_vals;
	struct copy *copies;
	int ncopies, cap_copies;
	int64_t decl_batch;     /* the input's dimension 0 when a number, else -1 */
	int node_idx;
	const Onnx__NodeProto *node;
	int *skip;              /* per ONNX node: folded into an earlier one */
	int op_count[SD_ONNX_OPS_MAX];
	int softmax_out;        /* value a final Softmax made, else -1 */
	size_t act_floats;      /* per sample, over the activations made so far */
	int seq_T;              /* a language model's sequence length, else 0 */
	int unfused;            /* SPOTDECK_FUSE=off */
	/* Initializers made parameters by language-model ops: one parameter
	 * per initializer, so a tied one (the embedding and the output
	 * projection) is one tensor whose gradient sums both uses. */
	const char **tie_init;
	size_t *tie_off;
	int ntie, cap_tie;
	char **why;
};

/* The error line: the file, the node, the message; names from the file
 * may hold anything, so control characters become '?' (one line). */
static int failv(struct lower *L, const char *fmt, va_list ap)
{
	char msg[512], line[1024];
	vsnprintf(msg, sizeof msg, fmt, ap);
	if (L->node) {
		const char *nm = L->node->name && *L->node->name ? L->node->name : NULL;
		if (nm)
			snprintf(line, sizeof line, "%s: node %.100s (%.60s): %s", L->file, nm,
			         L->node->op_type, msg);
		else
			snprintf(line, sizeof line, "%s: node #%d (%.60s): %s", L->file, L->node_idx,
			         L->node->op_type, msg);
	} else {
		snprintf(line, sizeof line, "%s: %s", L->file, msg);
	}
	for (char *c = line; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	return sd_why(L->why, "%s", line);
}

static int fail(struct lower *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct lower *L, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = failv(L, fmt, ap);
	va_end(ap);
	return rc;
}

static int find_val(const struct lower *L, const char *name)
{
	for (int i = L->nvals - 1; i >= 0; i--)
		if (!strcmp(L->vals[i].name, name))
			return i;
	return -1;
}

static struct val *new_val(struct lower *L, const char *name)
{
	if (L->nvals == L->cap_vals) {
		L->cap_vals = L->cap_vals ? 2 * L->cap_vals : 64;
		L->vals = realloc(L->vals, (size_t)L->cap_vals * sizeof *L->vals);
		if (!L->vals)
			sd_oom();
	}
	struct val *v = &L->vals[L->nvals++];
	memset(v, 0, sizeof *v);
	v->name = name;
	v->linear_node = -1;
	return v;
}

static void add_copy(struct lower *L, int to_buffers, size_t off, const struct val *v, int rows,
                     int cols)
{
	if (L->ncopies == L->cap_copies) {
		L->cap_copies = L->cap_copies ? 2 * L->cap_copies : 32;
		L->copies = realloc(L->copies, (size_t)L->cap_copies * sizeof *L->copies);
		if (!L->copies)
			sd_oom();
	}
	L->copies[L->ncopies++] = (struct copy){ to_buffers, off, v->f, v->count, rows, cols,
	                                         v->init };
}

static const char *dtype_name(int t)
{
	static const char *const names[] = {
		"undefined", "float32", "uint8", "int8", "uint16", "int16", "int32", "int64",
		"string", "bool", "float16", "float64", "uint32", "uint64", "complex64",
		"complex128", "bfloat16",
	};
	return t >= 0 && t < (int)(sizeof names / sizeof names[0]) ? names[t] : "unknown";
}

/* A constant from a TensorProto (an initializer or a Constant's value):
 * dims bounded before any data is touched, data length checked. */
static int tensor_val(struct lower *L, const Onnx__TensorProto *t, const char *name,
                      const char *what)
{
	if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
		return fail(L, "%s %s: data stored outside the file (external data), which is not "
		            "supported", what, name);
	int dt = t->has_data_type ? t->data_type : 0;
	const int is_bool = dt == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
	/* Bools are flags (Dropout's training_mode), kept as int64 0 / 1. */
	if (dt != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT && dt != ONNX__TENSOR_PROTO__DATA_TYPE__INT64 &&
	    !is_bool)
		return fail(L, "%s %s: data type %s; the engine trains float32 only (int64 and bool "
		            "only for shapes and flags)", what, name, dtype_name(dt));
	if (t->n_dims > 8)
		return fail(L, "%s %s: %zu dimensions, at most 8 supported", what, name, t->n_dims);
	int64_t count = 1;
	for (size_t d = 0; d < t->n_dims; d++) {
		if (t->dims[d] < 0 || t->dims[d] > SD_ONNX_MAX_ELEMS)
			return fail(L, "%s %s: dimension %zu is %lld", what, name, d,
			            (long long)t->dims[d]);
		count *= t->dims[d];
		if (count > SD_ONNX_MAX_ELEMS)
			return fail(L, "%s %s: its dimensions claim more than %lld elements", what,
			            name, (long long)SD_ONNX_MAX_ELEMS);
	}
	size_t esz = dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT ? 4 : is_bool ? 1 : 8;
	size_t have;
	if (t->has_raw_data)
		have = t->raw_data.len / esz;
	else
		have = dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT ? t->n_float_data
		       : is_bool ? t->n_int32_data : t->n_int64_data;
	if ((t->has_raw_data && t->raw_data.len != (size_t)count * esz) ||
	    (!t->has_raw_data && have != (size_t)count))
		return fail(L, "%s %s: %lld elements by its dimensions, but %s holds %zu bytes",
		            what, name, (long long)count, t->has_raw_data ? "raw_data" : "its data",
		            t->has_raw_data ? t->raw_data.len : have * esz);
	struct val *v = new_val(L, name);
	v->kind = V_CONST;
	v->dtype = is_bool ? ONNX__TENSOR_PROTO__DATA_TYPE__INT64 : dt;
	v->ndim = (int)t->n_dims;
	for (size_t d = 0; d < t->n_dims; d++)
		v->dims[d] = t->dims[d];
	v->count = (size_t)count;
	const void *src = t->has_raw_data ? (const void *)t->raw_data.data
	                  : dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT ? (const void *)t->float_data
	                  : (const void *)t->int64_data;
	/* raw_data is little-endian, as the machines spotdeck runs on. */
	if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) {
		v->f = sd_malloc((v->count ? v->count : 1) * sizeof(float));
		if (v->count)
			memcpy(v->f, src, v->count * sizeof(float));
	} else if (is_bool) {
		v->i = sd_malloc((v->count ? v->count : 1) * sizeof(int64_t));
		for (size_t k = 0; k < v->count; k++)
			v->i[k] = t->has_raw_data ? t->raw_data.data[k] != 0 : t->int32_data[k] != 0;
	} else {
		v->i = sd_malloc((v->count ? v->count : 1) * sizeof(int64_t));
		if (v->count)
			memcpy(v->i, src, v->count * sizeof(int64_t));
	}
	return 0;
}

/* --------------------------------------------------------- node access */

static const Onnx__AttributeProto *attr(const Onnx__NodeProto *nd, const char *name)
{
	for (size_t i = 0; i < nd->n_attribute; i++)
		if (nd->attribute[i]->name && !strcmp(nd->attribute[i]->name, name))
			return nd->attribute[i];
	return NULL;
}

static int attr_int(struct lower *L, const Onnx__NodeProto *nd, const char *name, int64_t def,
                    int64_t *out)
{
	const Onnx__AttributeProto *a = attr(nd, name);
	*out = def;
	if (!a)
		return 0;
	if (!a->has_i)
		return fail(L, "attribute %s is not an integer", name);
	*out = a->i;
	return 0;
}

static int attr_float(struct lower *L, const Onnx__NodeProto *nd, const char *name, float def,
                      float *out)
{
	const Onnx__AttributeProto *a = attr(nd, name);
	*out = def;
	if (!a)
		return 0;
	if (!a->has_f)
		return fail(L, "attribute %s is not a float", name);
	*out = a->f;
	return 0;
}

/* ints attribute name: its n values all equal to each other (when
 * all_equal), copied to *v (the first); absent: def.  n 0: any length. */
static int attr_ints_same(struct lower *L, const Onnx__NodeProto *nd, const char *name,
                          size_t n, int64_t def, int64_t *v)
{
	const Onnx__AttributeProto *a = attr(nd, name);
	*v = def;
	if (!a)
		return 0;
	if (!a->n_ints || (n && a->n_ints != n))
		return fail(L, "attribute %s has %zu values, expected %zu", name, a->n_ints, n);
	for (size_t i = 1; i < a->n_ints; i++)
		if (a->ints[i] != a->ints[0])
			return fail(L, "attribute %s has different values per axis (%lld, %lld); the "
			            "engine implements only equal ones", name, (long long)a->ints[0],
			            (long long)a->ints[i]);
	*v = a->ints[0];
	return 0;
}

static int refuse_auto_pad(struct lower *L, const Onnx__NodeProto *nd)
{
	const Onnx__AttributeProto *a = attr(nd, "auto_pad");
	if (a && a->has_s && a->s.len && !(a->s.len == 6 && !memcmp(a->s.data, "NOTSET", 6)))
		return fail(L, "attribute auto_pad is %.*s; only explicit pads are supported",
		            (int)(a->s.len > 32 ? 32 : a->s.len), (const char *)a->s.data);
	return 0;
}

/* A V_VIEW of zero rows and columns (a spatial Pad). */
static int spatial_pad(const struct val *v)
{
	return v->kind == V_VIEW && v->vsp[0] + v->vsp[1] + v->vsp[2] + v->vsp[3] > 0;
}

/* Input i of the node (absent when missing or ""), or -1 after an error. */
static int input(struct lower *L, const Onnx__NodeProto *nd, size_t i, int optional)
{
	if (i >= nd->n_input || !*nd->input[i]) {
		if (optional)
			return -2;
		return fail(L, "input %zu is missing", i), -1;
	}
	int v = find_val(L, nd->input[i]);
	if (v >= 0 && L->vals[v].kind == V_VIEW && strcmp(nd->op_type, "Slice") &&
	    strcmp(nd->op_type, "Pad") && strcmp(nd->op_type, "Add") &&
	    !(spatial_pad(&L->vals[v]) && (!strcmp(nd->op_type, "AveragePool") ||
	                                   !strcmp(nd->op_type, "Conv"))))
		return fail(L, "input %s is a Slice or Pad of an activation; Slice and Pad of "
		            "activations are supported only as a ResNet option-A shortcut read by an "
		            "Add, or as zero rows and columns read by a Conv or an AveragePool",
		            nd->input[i]), -1;
	if (v >= 0)
		return v;
	for (size_t k = (size_t)L->node_idx; k < L->g->n_node; k++)
		for (size_t o = 0; o < L->g->node[k]->n_output; o++)
			if (!strcmp(L->g->node[k]->output[o], nd->input[i]))
				return fail(L, "input %s is produced by node %s, which comes %s: a cycle, "
				            "or nodes out of topological order", nd->input[i],
				            L->g->node[k]->name, k == (size_t)L->node_idx ? "itself"
				            : "later"), -1;
	return fail(L, "input %s is produced by no node and is no initializer (a dangling "
	            "input)", nd->input[i]), -1;
}

static int act_input(struct lower *L, const Onnx__NodeProto *nd, size_t i)
{
	int v = input(L, nd, i, 0);
	if (v >= 0 && L->vals[v].kind != V_ACT)
		return fail(L, "input %s is a constant; the engine computes this op on "
		            "activations only", nd->input[i]), -1;
	return v;
}

static int const_input(struct lower *L, const Onnx__NodeProto *nd, size_t i, int dtype,
                       int optional)
{
	int v = input(L, nd, i, optional);
	if (v < 0)
		return v;
	if (L->vals[v].kind != V_CONST)
		return fail(L, "input %s is computed from the data; the engine needs a constant "
		            "(an initializer) here", nd->input[i]), -1;
	if (L->vals[v].dtype != dtype)
		return fail(L, "input %s is %s, expected %s", nd->input[i],
		            dtype_name(L->vals[v].dtype), dtype_name(dtype)), -1;
	return v;
}

/* The node's output 0 as a new value; outputs beyond `used` must be
 * unread (the extra outputs of BatchNormalization, Dropout, MaxPool). */
static struct val *output(struct lower *L, const Onnx__NodeProto *nd, size_t used)
{
	if (nd->n_output < 1 || !*nd->output[0])
		return fail(L, "no output"), NULL;
	for (size_t o = used; o < nd->n_output; o++) {
		if (!*nd->output[o])
			continue;
		for (size_t k = 0; k < L->g->n_node; k++)
			for (size_t j = 0; j < L->g->node[k]->n_input; j++)
				if (!strcmp(L->g->node[k]->input[j], nd->output[o]))
					return fail(L, "output %zu (%s) is read by node %s; the engine computes "
					            "only output 0", o, nd->output[o],
					            L->g->node[k]->name), NULL;
		for (size_t k = 0; k < L->g->n_output; k++)
			if (!strcmp(L->g->output[k]->name, nd->output[o]))
				return fail(L, "output %zu (%s) is a graph output", o, nd->output[o]), NULL;
	}
	if (find_val(L, nd->output[0]) >= 0)
		return fail(L, "output %s is produced twice", nd->output[0]), NULL;
	return new_val(L, nd->output[0]);
}

static const char *engine_name(struct lower *L, const Onnx__NodeProto *nd, char *buf, size_t len)
{
	const char *nm = nd->name && *nd->name ? nd->name : NULL;
	/* torch names nodes "/layer1/conv/Conv": drop the leading slash. */
	if (nm && nm[0] == '/' && nm[1])
		nm++;
	if (nm)
		snprintf(buf, len, "%s", nm);
	else
		snprintf(buf, len, "%s_%d", nd->op_type, L->node_idx);
	return buf;
}

/* Names a parameter tensor after the initializer it came from. */
static void name_tensor(struct lower *L, const struct val *v)
{
	struct sd_model *m = L->m;
	if (v->init && m->ntensors)
		snprintf(m->tensors[m->ntensors - 1].name, sizeof m->tensors[0].name, "%s", v->init);
}

static int new_act(struct lower *L, int c, int h, int w)
{
	size_t f = (size_t)c * h * w;
	if (c <= 0 || h <= 0 || w <= 0 || f > MAX_ACT_FLOATS)
		return fail(L, "output of %dx%dx%d per sample is empty or too large", c, h, w), -1;
	L->act_floats += f;
	if (L->act_floats > MAX_MODEL_ACT_FLOATS)
		return fail(L, "the activations so far need more than %zu floats per sample",
		            MAX_MODEL_ACT_FLOATS), -1;
	return sd_graph_act(L->m, c, h, w);
}

/* A node of op reading activation in and making nd's output: a new
 * activation of A's shape, set as nd's output value (of rank rank).  The
 * caller fills the op's own fields.  NULL after an error (L's message). */
static struct node *act_node(struct lower *L, const Onnx__NodeProto *nd, enum sd_op op, int in,
                             const struct act *A, int rank)
{
	if (!output(L, nd, 1))
		return NULL;
	char nm[32];
	engine_name(L, nd, nm, sizeof nm);
	int out = new_act(L, A->c, A->h, A->w);
	if (out < 0)
		return NULL;
	struct node *n = sd_graph_node(L->m, op, in, nm);
	n->out = out;
	struct val *Y = &L->vals[L->nvals - 1];
	Y->kind = V_ACT;
	Y->act = out;
	Y->rank = rank;
	return n;
}

/* ------------------------------------------------------------ lowering */

/* A per-axis integer attribute: n values (def each when absent). */
static int attr_ints(struct lower *L, const Onnx__NodeProto *nd, const char *name, size_t n,
                     int64_t def, int64_t *v)
{
	const Onnx__AttributeProto *a = attr(nd, name);
	for (size_t i = 0; i < n; i++)
		v[i] = def;
	if (!a)
		return 0;
	if (a->n_ints != n)
		return fail(L, "attribute %s has %zu values, expected %zu", name, a->n_ints, n);
	for (size_t i = 0; i < n; i++)
		v[i] = a->ints[i];
	return 0;
}

static int lower_conv(struct lower *L, const Onnx__NodeProto *nd)
{
	/* An explicit zero Pad of the rows and columns before the Conv (what
	 * padding='same' with an even kernel, or code ported from frameworks
	 * with asymmetric 'same' padding, exports) is added to its pads. */
	int x = input(L, nd, 0, 0), w = -1, b = -2;
	if (x >= 0 && L->vals[x].kind != V_ACT && !spatial_pad(&L->vals[x]))
		return fail(L, "input %s is a constant; the engine computes this op on activations "
		            "only", nd->input[0]);
	if (x < 0 || (w = const_input(L, nd, 1, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 0)) < 0 ||
	    (b = const_input(L, nd, 2, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1)) == -1)
		return -1;
	const struct val *X = &L->vals[x], *W = &L->vals[w];
	const struct act a = L->m->acts[X->act];
	if (X->rank != 4)
		return fail(L, "input %s is not 4-D (N, C, H, W)", nd->input[0]);
	int64_t group, dil[2], st[2], pads[4], ks[2];
	if (attr_int(L, nd, "group", 1, &group) < 0 ||
	    attr_ints(L, nd, "dilations", 2, 1, dil) < 0 ||
	    attr_ints(L, nd, "strides", 2, 1, st) < 0 ||
	    attr_ints(L, nd, "pads", 4, 0, pads) < 0 || refuse_auto_pad(L, nd) < 0)
		return -1;
	/* ONNX pads: top, left, bottom, right, as vsp. */
	for (int i = 0; i < 4 && X->kind == V_VIEW; i++)
		pads[i] += X->vsp[i];
	if (group < 1 || group > a.c || a.c % group)
		return fail(L, "group %lld does not divide the input's %d channels", (long long)group,
		            a.c);
	if (W->ndim != 4 || W->dims[1] * group != a.c)
		return fail(L, "weight %s is not (K, %lld, KH, KW) for a %d-channel input in %lld "
		            "groups", W->name, (long long)(a.c / group), a.c, (long long)group);
	if (attr_ints(L, nd, "kernel_shape", 2, 0, ks) < 0)
		return -1;
	if (attr(nd, "kernel_shape") && (ks[0] != W->dims[2] || ks[1] != W->dims[3]))
		return fail(L, "kernel_shape %lldx%lld does not match the weight's %lldx%lld",
		            (long long)ks[0], (long long)ks[1], (long long)W->dims[2],
		            (long long)W->dims[3]);
	for (int i = 0; i < 4; i++)
		if (pads[i] < 0 || pads[i] > MAX_DIM || (i < 2 && (st[i] < 1 || st[i] > MAX_DIM ||
		                                                   dil[i] < 1 || dil[i] > MAX_DIM)))
			return fail(L, "strides %lldx%lld, dilations %lldx%lld, pads %lld %lld %lld "
			            "%lld: out of range", (long long)st[0], (long long)st[1],
			            (long long)dil[0], (long long)dil[1], (long long)pads[0],
			            (long long)pads[1], (long long)pads[2], (long long)pads[3]);
	if (W->dims[0] < 1 || W->dims[0] > MAX_DIM || W->dims[0] % group || W->dims[2] < 1 ||
	    W->dims[3] < 1 || W->dims[2] > MAX_DIM || W->dims[3] > MAX_DIM)
		return fail(L, "weight %s: %lld filters of %lldx%lld in %lld groups: out of range",
		            W->name, (long long)W->dims[0], (long long)W->dims[2],
		            (long long)W->dims[3], (long long)group);
	int k = (int)W->dims[0], kh = (int)W->dims[2], kw = (int)W->dims[3];
	if (b >= 0 && (L->vals[b].ndim != 1 || L->vals[b].dims[0] != k))
		return fail(L, "bias %s is not (%d)", L->vals[b].name, k);
	/* The engine's fast convolution (im2col or oneDNN, blocked layouts, the
	 * CUDA executor) takes square kernels with one stride and one pad; the
	 * rest runs the general one (layers.h sd_gconv_*). */
	const int plain = group == 1 && dil[0] == 1 && dil[1] == 1 && kh == kw && st[0] == st[1] &&
	                  pads[0] == pads[1] && pads[0] == pads[2] && pads[0] == pads[3];
	struct sd_conv2d_shape s;
	struct sd_gconv_shape gs = {
		.n = 1, .c = a.c, .h = a.h, .w = a.w, .k = k, .kh = kh, .kw = kw,
		.sh = (int)st[0], .sw = (int)st[1], .dh = (int)dil[0], .dw = (int)dil[1],
		.pt = (int)pads[0], .pl = (int)pads[1], .pb = (int)pads[2], .pr = (int)pads[3],
		.groups = (int)group,
	};
	if (sd_gconv_shape_init(&gs) < 0)
		return fail(L, "a %dx%d kernel dilated %dx%d does not fit the %dx%d input padded "
		            "%d %d %d %d", kh, kw, gs.dh, gs.dw, a.h, a.w, gs.pt, gs.pl, gs.pb, gs.pr);
	if (plain && sd_conv2d_shape_init(&s, 1, a.c, a.h, a.w, k, kh, (int)st[0],
	                                  (int)pads[0]) < 0)
		return fail(L, "a %dx%d kernel does not fit the %dx%d input with pad %d", kh, kw, a.h,
		            a.w, (int)pads[0]);
	struct val *Y = output(L, nd, 1);
	if (!Y)
		return -1;
	char nm[32];
	engine_name(L, nd, nm, sizeof nm);
	int out = new_act(L, k, gs.oh, gs.ow);
	if (out < 0)
		return -1;
	Y = &L->vals[L->nvals - 1];
	struct sd_model *m = L->m;
	struct node *n = sd_graph_node(m, plain ? OP_CONV : OP_GCONV, L->vals[x].act, nm);
	n->out = out;
	if (plain)
		n->conv = s;
	else
		n->gconv = gs;
	n->w_off = sd_graph_tensor(m, nm, "weight", 4, k, a.c / (int)group, kh, kw);
	name_tensor(L, &L->vals[w]);
	add_copy(L, 0, n->w_off, &L->vals[w], 0, 0);
	if (b >= 0) {
		n->b_off = sd_graph_tensor(m, nm, "bias", 1, k, 0, 0, 0);
		name_tensor(L, &L->vals[b]);
		add_copy(L, 0, n->b_off, &L->vals[b], 0, 0);
	}
	m->flops += (double)k * (a.c / group) * kh * kw * gs.oh * gs.ow;
	Y->kind = V_ACT;
	Y->act = out;
	Y->rank = 4;
	return 0;
}

static int lower_bn(struct lower *L, const Onnx__NodeProto *nd)
{
	int x = act_input(L, nd, 0);
	if (x < 0)
		return -1;
	int p[4];
	const struct act a = L->m->acts[L->vals[x].act];
	for (int i = 0; i < 4; i++) {
		if ((p[i] = const_input(L, nd, (size_t)i + 1, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT,
		                        0)) < 0)
			return -1;
		if (L->vals[p[i]].count != (size_t)a.c)
			return fail(L, "%s has %zu values for %d channels", L->vals[p[i]].name,
			            L->vals[p[i]].count, a.c);
	}
	if (L->vals[x].rank == 2 && (a.h != 1 || a.w != 1))
		return fail(L, "batch-norm of a flattened activation is not supported");
	if (a.c > SD_BN_CHANNELS_MAX)
		return fail(L, "%d channels, at most %d supported", a.c, SD_BN_CHANNELS_MAX);
	float eps, mom;
	if (attr_float(L, nd, "epsilon", 1e-5f, &eps) < 0 ||
	    attr_float(L, nd, "momentum", 0.9f, &mom) < 0)
		return -1;
	if (!(eps > 0 && eps < 1) || !(mom >= 0 && mom <= 1))
		return fail(L, "epsilon %g or momentum %g out of range", (double)eps, (double)mom);
	struct val *Y = output(L, nd, 1);
	if (!Y)
		return -1;
	char nm[32];
	engine_name(L, nd, nm, sizeof nm);
	struct sd_model *m = L->m;
	/* ONNX: running = momentum running + (1 - momentum) batch; the engine's
	 * momentum weighs the batch (layers.h). */
	int out = sd_graph_bn(m, L->vals[x].act, nm, 1.0f - mom, eps);
	struct node *n = &m->nodes[m->nnodes - 1];
	snprintf(m->tensors[m->ntensors - 2].name, sizeof m->tensors[0].name, "%s",
	         L->vals[p[0]].init ? L->vals[p[0]].init : nm);
	snprintf(m->tensors[m->ntensors - 1].name, sizeof m->tensors[0].name, "%s",
	         L->vals[p[1]].init ? L->vals[p[1]].init : nm);
	add_copy(L, 0, n->w_off, &L->vals[p[0]], 0, 0);
	add_copy(L, 0, n->b_off, &L->vals[p[1]], 0, 0);
	add_copy(L, 1, n->rm_off, &L->vals[p[2]], 0, 0);
	add_copy(L, 1, n->rv_off, &L->vals[p[3]], 0, 0);
	Y = &L->vals[L->nvals - 1];
	Y->kind = V_ACT;
	Y->act = out;
	Y->rank = L->vals[x].rank;
	return 0;
}

/* Readers of activation act still to come: the consumers of every value
 * on it, less one per alias made of it (Identity, Flatten, ... each read
 * one value on it to make another). */
static int act_readers(const struct lower *L, int act)
{
	int readers = 0, vals = 0;
	for (int i = 0; i < L->nvals; i++)
		if (L->vals[i].kind == V_ACT && L->vals[i].act == act) {
			readers += L->vals[i].consumers;
			vals++;
		}
	return readers - (vals - 1);
}

static int lower_relu(struct lower *L, const Onnx__NodeProto *nd)
{
	int x = act_input(L, nd, 0);
	if (x < 0)
		return -1;
	int act = L->vals[x].act;
	if (act_readers(L, act) != 1)
		return fail(L, "its input %s is also read by another node; the engine's ReLU works "
		            "in place", nd->input[0]);
	struct val *Y = output(L, nd, 1);
	if (!Y)
		return -1;
	char nm[32];
	engine_name(L, nd, nm, sizeof nm);
	struct node *n = sd_graph_node(L->m, OP_RELU, act, nm);
	L->m->acts[act].consumers--;   /* in place, as model.c's relu() */
	n->out = act;
	Y = &L->vals[L->nvals - 1];
	Y->kind = V_ACT;
	Y->act = act;
	Y->rank = L->vals[x].rank;
	Y->seq = L->vals[x].seq;
	Y->ndim = L->vals[x].ndim;
	memcpy(Y->dims, L->vals[x].dims, sizeof Y->dims);
	return 0;
}

/* A scalar float constant input (Clip's bounds), or def when absent. */
static int scalar_input(struct lower *L, const Onnx__NodeProto *nd, size_t i, float def,
                        float *out)
{
	int v = const_input(L, nd, i, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1);
	*out = def;
	if (v == -1)
		return -1;
	if (v >= 0) {
		if (L->vals[v].count != 1)
			return fail(L, "input %s is not a scalar", nd->input[i]);
		*out = L->vals[v].f[0];
	}
	return 0;
}

static int lower_act(struct lower *L, const Onnx__NodeProto *nd)
{
	int x = act_input(L, nd, 0);
	if (x < 0)
		return -1;
	enum sd_act_kind kind;
	float a = 0, b = 0;
	if (!strcmp(nd->op_type, "LeakyRelu")) {
		kind = SD_ACT_LEAKY_RELU;
		if (attr_float(L, nd, "alpha", 0.01f, &a) < 0)
			return -1;
	} else if (!strcmp(nd->op_type, "Sigmoid")) {
		kind = SD_ACT_SIGMOID;
	} else if (!strcmp(nd->op_type, "Tanh")) {
		kind = SD_ACT_TANH;
	} else {
		kind = SD_ACT_CLIP;
		if (attr(nd, "min") || attr(nd, "max"))
			return fail(L, "min and max as attributes (opset 6 to 10); opsets 13 to 17 "
			            "give them as inputs");
		if (scalar_input(L, nd, 1, -INFINITY, &a) < 0 ||
		    scalar_input(L, nd, 2, INFINITY, &b) < 0)
			return -1;
		if (!(a <= b))
			return fail(L, "bounds %g > %g", (double)a, (double)b);
	}
	if (!isfinite(a) && kind == SD_ACT_LEAKY_RELU)
		return fail(L, "alpha %g", (double)a);
	struct node *n;
	if (is_seq(L, x)) {
		const struct val *X = &L->vals[x];
		int64_t dims[8];
		for (int k = 0; k < X->ndim; k++)
			dims[k] = X->dims[k];
		if ((n = seq_node(L, nd, SEQ_BIAS, X->act, X->ndim, dims)))
			n->op = OP_ACT;
	} else {
		const struct act A = L->m->acts[L->vals[x].act];
		n = act_node(L, nd, OP_ACT, L->vals[x].act, &A, L->vals[x].rank);
	}
	if (!n)
		return -1;
	n->act = kind;
	n->act_a = a;
	n->act_b = b;
	return 0;
}

static int lower_pool(struct lower *L, const Onnx__NodeProto *nd)
{
	const int max = !strcmp(nd->op_type, "MaxPool");
	/* torch exports AvgPool2d(count_include_pad=True) with padding as an
	 * explicit zero Pad of the rows and columns, then an unpadded
	 * AveragePool: the two are one padded pooling whose divisor counts
	 * the padding. */
	int x = max ? act_input(L, nd, 0) : input(L, nd, 0, 0), view_pad = 0;
	if (x < 0)
		return -1;
	if (L->vals[x].kind == V_VIEW) {
		const int *sp = L->vals[x].vsp;
		if (sp[1] != sp[0] || sp[2] != sp[0] || sp[3] != sp[0])
			return fail(L, "input %s is padded by %d, %d, %d, %d rows and columns (top, left, "
			            "bottom, right); average pooling takes equal pads only", nd->input[0],
			            sp[0], sp[1], sp[2], sp[3]);
		view_pad = sp[0];
	} else if (L->vals[x].kind != V_ACT)
		return fail(L, "input %s is a constant; the engine computes this op on activations "
		            "only", nd->input[0]);
	const struct act a = L->m->acts[L->vals[x].act];
	if (L->vals[x].rank != 4)
		return fail(L, "input %s is not 4-D (N, C, H, W)", nd->input[0]);
	int64_t k, s, pad, dil, ceil, order, count_pad = 0;
	if ((!max && attr_int(L, nd, "count_include_pad", 0, &count_pad) < 0) ||
	    attr_ints_same(L, nd, "kernel_shape", 2, 0, &k) < 0 ||
	    attr_ints_same(L, nd, "strides", 2, 1, &s) < 0 ||
	    attr_ints_same(L, nd, "pads", 4, 0, &pad) < 0 ||
	    attr_ints_same(L, nd, "dilations", 2, 1, &dil) < 0 ||
	    attr_int(L, nd, "ceil_mode", 0, &ceil) < 0 ||
	    attr_int(L, nd, "storage_order", 0, &order) < 0 || refuse_auto_pad(L, nd) < 0)
		return -1;
	if (view_pad) {
		if (pad)
			return fail(L, "pads %lld after a Pad of its input: only one of them is "
			            "supported", (long long)pad);
		pad = view_pad;
		count_pad = 1;
	}
	if (pad < 0 || (pad && (max ? pad >= k : 2 * pad > k)))
		return fail(L, "pads %lld: %s", (long long)pad, max ? "padding must be less than "
		            "the window" : "padding must be at most half the window");
	if (k < 1 || k > a.h + 2 * pad || k > a.w + 2 * pad || s < 1 || s > MAX_DIM)
		return fail(L, "window %lld, stride %lld on a %dx%d input", (long long)k,
		            (long long)s, a.h, a.w);
	if (dil != 1 || order != 0)
		return fail(L, "dilations or storage_order other than the defaults are not supported");
	if (ceil && ((a.h + 2 * pad - k) % s || (a.w + 2 * pad - k) % s))
		return fail(L, "ceil_mode 1 with a window that does not tile the input is not "
		            "supported");
	struct val *Y = output(L, nd, 1);
	if (!Y)
		return -1;
	char nm[32];
	engine_name(L, nd, nm, sizeof nm);
	int oh = (a.h + 2 * (int)pad - (int)k) / (int)s + 1;
	int ow = (a.w + 2 * (int)pad - (int)k) / (int)s + 1;
	int out = new_act(L, a.c, oh, ow);
	if (out < 0)
		return -1;
	struct node *n = sd_graph_node(L->m, max ? OP_MAXPOOL : OP_AVGPOOL, L->vals[x].act, nm);
	n->out = out;
	n->k = (int)k;
	n->s = (int)s;
	n->pad = (int)pad;
	n->count_pad = count_pad != 0;
	Y = &L->vals[L->nvals - 1];
	Y->kind = V_ACT;
	Y->act = out;
	Y->rank = 4;
	return 0;
}

static int lower_gap(struct lower *L, const Onnx__NodeProto *nd)
{
	int x = act_input(L, nd, 0);
	if (x < 0)
		return -1;
	const struct act a = L->m->acts[L->vals[x].act];
	if (L->vals[x].rank != 4 || a.h != a.w)
		return fail(L, "input %s is %dx%d; the engine pools square maps only", nd->input[0],
		            a.h, a.w);
	struct val *Y = output(L, nd, 1);
	if (!Y)
		return -1;
	char nm[32];
	engine_name(L, nd, nm, sizeof nm);
	int out = new_act(L, a.c, 1, 1);
	if (out < 0)
		return -1;
	struct node *n = sd_graph_node(L->m, OP_AVGPOOL, L->vals[x].act, nm);
	n->out = out;
	n->k = a.h;
	n->s = 1;
	Y = &L->vals[L->nvals - 1];
	Y->kind = V_ACT;
	Y->act = out;
	Y->rank = 4;
	return 0;
}

/* Output 0 of nd names the same activation (or constant) as value x. */
static int alias(struct lower *L, const Onnx__NodeProto *nd, int x, int rank)
{
	struct val *Y = output(L, nd, 1);
	if (!Y)
		return -1;
	const struct val *X = &L->vals[x];
	const char *name = Y->name;
	*Y = *X;
	Y->name = name;
	Y->consumers = 0;
	if (X->kind == V_CONST) {
		/* Its own copy: a shared initializer becomes two parameters, as
		 * it was in the model before export folded equal constants. */
		size_t bytes = (X->count ? X->count : 1) * (X->f ? sizeof(float) : sizeof(int64_t));
		if (X->f)
			Y->f = memcpy(sd_malloc(bytes), X->f, bytes);
		else
			Y->i = memcpy(sd_malloc(bytes), X->i, bytes);
	} else {
		Y->rank = rank;
		Y->linear_node = -1;
	}
	return 0;
}

static int lower_identity(struct lower *L, const Onnx__NodeProto *nd)
{
	int x = input(L, nd, 0, 0);
	if (x < 0)
		return -1;
	/* Dropout's ratio and training_mode inputs are read by nothing. */
	return alias(L, nd, x, L->vals[x].rank);
}

static int lower_flatten(struct lower *L, const Onnx__NodeProto *nd)
{
	int x = act_input(L, nd, 0);
	int64_t axis;
	if (x < 0 || attr_int(L, nd, "axis", 1, &axis) < 0)
		return -1;
	if (axis != 1)
		return fail(L, "axis %lld; only axis 1 (keep the batch) is supported", (long long)axis);
	return alias(L, nd, x, 2);
}

static int lower_reshape(struct lower *L, const Onnx__NodeProto *nd)
{
	int x0 = input(L, nd, 0, 0);
	if (x0 >= 0 && L->vals[x0].kind == V_CONST)
		return reshape_const(L, nd, x0);
	if (is_seq(L, x0))
		return seq_reshape(L, nd, x0);
	int x = x0 < 0 ? -1 : act_input(L, nd, 0), sh = -1;
	if (x < 0 || (sh = const_input(L, nd, 1, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 0)) < 0)
		return -1;
	const struct act a = L->m->acts[L->vals[x].act];
	const struct val *S = &L->vals[sh];
	const int rank = L->vals[x].rank;
	int64_t cur[4] = { BATCH_DIM, a.c, a.h, a.w };
	if (rank == 2)
		cur[1] = (int64_t)a.c * a.h * a.w;
	if (S->ndim != 1 || (S->count != 2 && S->count != 4))
		return fail(L, "target shape %s has %zu entries; the engine reshapes to (N, -1) or "
		            "to the same shape only", S->name, S->count);
	int64_t want[4];
	int infer = -1;
	int64_t known = 1;
	for (size_t i = 0; i < S->count; i++) {
		int64_t d = S->i[i];
		if (i == 0 && (d == BATCH_DIM || (L->decl_batch > 0 && d == L->decl_batch) || d == 0))
			d = BATCH_DIM;
		else if (d == 0 && (int)i < rank)
			d = cur[i];
		else if (d == -1 && infer < 0)
			infer = (int)i;
		else if (d <= 0 || d == BATCH_DIM || d > ((int64_t)1 << 31))
			return fail(L, "target shape entry %zu is %lld", i, (long long)S->i[i]);
		want[i] = d;
		if (i > 0 && (int)i != infer)
			known *= d;
	}
	if (want[0] != BATCH_DIM)
		return fail(L, "target shape does not keep the batch as dimension 0");
	int64_t total = (int64_t)a.c * a.h * a.w;
	if (infer > 0) {
		if (known <= 0 || total % known)
			return fail(L, "cannot infer -1: %lld values per sample", (long long)total);
		want[infer] = total / known;
	}
	if (S->count == 2) {
		if (want[1] != total)
			return fail(L, "target (N, %lld) does not hold the %lld values per sample",
			            (long long)want[1], (long long)total);
		return alias(L, nd, x, 2);
	}
	if (rank != 4 || want[1] != a.c || want[2] != a.h || want[3] != a.w)
		return fail(L, "reshape to (N, %lld, %lld, %lld) from (N, %d, %d, %d): the engine "
		            "reshapes to (N, -1) or to the same shape only", (long long)want[1],
		            (long long)want[2], (long long)want[3], a.c, a.h, a.w);
	return alias(L, nd, x, 4);
}

/* A linear node reading value x with weight W as (out, in) (or (in, out)
 * when transposed), bias value b (-2 when none). */
static int make_linear(struct lower *L, const Onnx__NodeProto *nd, int x, int w, int transposed,
                       int b)
{
	const struct act a = L->m->acts[L->vals[x].act];
	const struct val *W = &L->vals[w];
	if (L->vals[x].rank != 2 && (a.h != 1 || a.w != 1))
		return fail(L, "input %s is 4-D; flatten it first", nd->input[0]);
	if (W->ndim != 2)
		return fail(L, "weight %s is not 2-D", W->name);
	int64_t in = transposed ? W->dims[0] : W->dims[1], outf = transposed ? W->dims[1] : W->dims[0];
	int64_t fan = (int64_t)a.c * a.h * a.w;
	if (in != fan)
		return fail(L, "weight %s takes %lld inputs, the input has %lld", W->name,
		            (long long)in, (long long)fan);
	if (outf < 1 || outf > MAX_DIM * 16)
		return fail(L, "weight %s has %lld outputs", W->name, (long long)outf);
	if (b >= 0 && L->vals[b].count != (size_t)outf)
		return fail(L, "bias %s has %zu values for %lld outputs", L->vals[b].name,
		            L->vals[b].count, (long long)outf);
	struct val *Y = output(L, nd, 1);
	if (!Y)
		return -1;
	char nm[32];
	engine_name(L, nd, nm, sizeof nm);
	int out = new_act(L, (int)outf, 1, 1);
	if (out < 0)
		return -1;
	struct sd_model *m = L->m;
	struct node *n = sd_graph_node(m, OP_LINEAR, L->vals[x].act, nm);
	n->out = out;
	n->fc_in = (int)fan;
	n->fc_out = (int)outf;
	n->w_off = sd_graph_tensor(m, nm, "weight", 2, (int)outf, (int)fan, 0, 0);
	name_tensor(L, &L->vals[w]);
	/* A Transpose'd initializer (wt) holds its data in the layout before
	 * the Transpose: the other one. */
	const int copy_t = transposed != L->vals[w].wt;
	add_copy(L, 0, n->w_off, &L->vals[w], copy_t ? (int)in : 0, copy_t ? (int)outf : 0);
	if (b >= 0) {
		n->b_off = sd_graph_tensor(m, nm, "bias", 1, (int)outf, 0, 0, 0);
		name_tensor(L, &L->vals[b]);
		add_copy(L, 0, n->b_off, &L->vals[b], 0, 0);
	}
	m->flops += (double)fan * outf;
	Y = &L->vals[L->nvals - 1];
	Y->kind = V_ACT;
	Y->act = out;
	Y->rank = 2;
	Y->linear_node = m->nnodes - 1;
	return 0;
}

static int lower_gemm(struct lower *L, const Onnx__NodeProto *nd)
{
	int x = act_input(L, nd, 0), w = -1, b = -2;
	if (x < 0 || (w = const_input(L, nd, 1, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 0)) < 0 ||
	    (b = const_input(L, nd, 2, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1)) == -1)
		return -1;
	float alpha, beta;
	int64_t ta, tb;
	if (attr_float(L, nd, "alpha", 1, &alpha) < 0 || attr_float(L, nd, "beta", 1, &beta) < 0 ||
	    attr_int(L, nd, "transA", 0, &ta) < 0 || attr_int(L, nd, "transB", 0, &tb) < 0)
		return -1;
	if (alpha != 1 || (b >= 0 && beta != 1) || ta)
		return fail(L, "alpha %g, beta %g, transA %lld: only alpha = beta = 1 and transA = 0 "
		            "are supported", (double)alpha, (double)beta, (long long)ta);
	return make_linear(L, nd, x, w, !tb, b);
}

/* The bias Add that follows MatMul node k, when its output is read by that
 * Add alone and the Add's other input is a float constant: its index, else
 * -1. */
static int bias_add(struct lower *L, size_t k, int *bias)
{
	const Onnx__NodeProto *mm = L->g->node[k];
	int found = -1, reads = 0;
	for (size_t j = k + 1; j < L->g->n_node; j++) {
		const Onnx__NodeProto *nd = L->g->node[j];
		for (size_t i = 0; i < nd->n_input; i++)
			if (!strcmp(nd->input[i], mm->output[0])) {
				reads++;
				if (!strcmp(nd->op_type, "Add") && (!nd->domain || !*nd->domain) &&
				    nd->n_input == 2 && nd->n_output == 1) {
					int other = find_val(L, nd->input[1 - i]);
					if (other >= 0 && L->vals[other].kind == V_CONST &&
					    L->vals[other].dtype == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) {
						found = (int)j;
						*bias = other;
					}
				}
			}
	}
	return reads == 1 ? found : -1;
}

static int lower_matmul(struct lower *L, const Onnx__NodeProto *nd)
{
	int a0 = input(L, nd, 0, 0), b0 = a0 < 0 ? -1 : input(L, nd, 1, 0);
	if (b0 >= 0 && is_seq(L, a0))
		return seq_matmul(L, nd, a0, b0);
	int x = act_input(L, nd, 0), w = -1;
	if (x < 0 || (w = const_input(L, nd, 1, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 0)) < 0)
		return -1;
	int bias = -2;
	int add = bias_add(L, (size_t)L->node_idx, &bias);
	if (add < 0)
		bias = -2;
	if (make_linear(L, nd, x, w, 1, bias) < 0)
		return -1;
	if (add >= 0) {
		/* The Add becomes nothing: its output is the linear's. */
		const Onnx__NodeProto *an = L->g->node[add];
		L->skip[add] = 1;
		L->op_count[op_index("Add")]++;
		struct val *Y = new_val(L, an->output[0]);
		*Y = L->vals[L->nvals - 2];
		Y->name = an->output[0];
		Y->consumers = 0;
		Y->linear_node = -1;
		/* The MatMul's own output is read by the folded Add alone, which
		 * the count of readers skips: count it here. */
		L->vals[L->nvals - 2].consumers = 1;
	}
	return 0;
}

static int lower_add(struct lower *L, const Onnx__NodeProto *nd)
{
	int a = input(L, nd, 0, 0), b = -1;
	if (a < 0 || (b = input(L, nd, 1, 0)) < 0)
		return -1;
	if (L->vals[a].kind == V_CONST && L->vals[b].kind == V_CONST &&
	    L->vals[a].dtype == ONNX__TENSOR_PROTO__DATA_TYPE__INT64)
		return arith_consts(L, nd, '+');
	if (is_seq(L, a) || is_seq(L, b))
		return seq_arith(L, nd, a, b, SD_BIN_ADD);
	if (L->vals[a].kind == V_VIEW && L->vals[b].kind == V_VIEW)
		return fail(L, "adds two shortcuts (Slice/Pad of activations); one side must be the "
		            "block's main branch");
	if (L->vals[a].kind == V_ACT && L->vals[b].kind == V_VIEW)
		return add_view(L, nd, a, b);
	if (L->vals[a].kind == V_VIEW && L->vals[b].kind == V_ACT)
		return add_view(L, nd, b, a);
	if (L->vals[a].kind != V_ACT || L->vals[b].kind != V_ACT)
		return lower_arith(L, nd, SD_BIN_ADD);
	struct sd_model *m = L->m;
	int aa = L->vals[a].act, ba = L->vals[b].act;
	const struct act A = m->acts[aa], B = m->acts[ba];
	if (A.c != B.c || A.h != B.h || A.w != B.w || L->vals[a].rank != L->vals[b].rank)
		return fail(L, "adds a %dx%dx%d and a %dx%dx%d activation; only the same shapes "
		            "(no broadcasting) are supported", A.c, A.h, A.w, B.c, B.h, B.w);
	if (aa == ba)
		return fail(L, "adds an activation to itself");
	int rank = L->vals[a].rank;
	/* The branch the previous node just computed goes first, so that the
	 * CPU executor can fuse batch-norm -> add -> ReLU (model.c). */
	if (m->nnodes && m->nodes[m->nnodes - 1].out == ba) {
		int t = aa;
		aa = ba;
		ba = t;
	}
	struct node *n = act_node(L, nd, OP_ADD, aa, &A, rank);
	if (!n)
		return -1;
	n->in2 = ba;
	m->acts[ba].consumers++;
	n->s = 1;
	return 0;
}

static int lower_constant(struct lower *L, const Onnx__NodeProto *nd)
{
	if (nd->n_attribute != 1)
		return fail(L, "%zu attributes, expected one value", nd->n_attribute);
	const Onnx__AttributeProto *a = nd->attribute[0];
	if (nd->n_output != 1 || !*nd->output[0])
		return fail(L, "expected one output");
	if (find_val(L, nd->output[0]) >= 0)
		return fail(L, "output %s is produced twice", nd->output[0]);
	if (!strcmp(a->name, "value") && a->t)
		return tensor_val(L, a->t, nd->output[0], "constant");
	struct val *v = new_val(L, nd->output[0]);
	v->kind = V_CONST;
	if (!strcmp(a->name, "value_int") && a->has_i) {
		v->dtype = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
		v->count = 1;
		v->i = sd_malloc(sizeof(int64_t));
		v->i[0] = a->i;
	} else if (!strcmp(a->name, "value_float") && a->has_f) {
		v->dtype = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
		v->count = 1;
		v->f = sd_malloc(sizeof(float));
		v->f[0] = a->f;
	} else if (!strcmp(a->name, "value_ints") && a->n_ints <= 8) {
		v->dtype = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
		v->count = a->n_ints;
		v->ndim = 1;
		v->dims[0] = (int64_t)a->n_ints;
		v->i = sd_malloc((a->n_ints ? a->n_ints : 1) * sizeof(int64_t));
		if (a->n_ints)
			memcpy(v->i, a->ints, a->n_ints * sizeof(int64_t));
	} else {
		L->nvals--;
		return fail(L, "attribute %s: only value, value_int, value_ints and value_float "
		            "are supported", a->name);
	}
	return 0;
}

/* ------------------------------------------------- constant folding
 *
 * The int64 computations torch.onnx.export writes around shapes and pads
 * (x.view(x.size(0), -1); F.pad's pads: Constant, Shape, Gather, Mul, Sub,
 * ConstantOfShape, Concat, Reshape, Slice with step -1, Transpose, Cast)
 * are evaluated here while loading, each following the ONNX operator
 * specification, on tensors of any rank up to 8.  They are small (at most
 * FOLD_MAX elements: a shape computation is a handful of numbers, and the
 * bound keeps a hostile ConstantOfShape from allocating without end). */
#define FOLD_MAX 4096

/* A zero-filled constant output of dims[0..ndim) and type dtype (float, or
 * int64) of at most `max` elements, `what` naming it in errors ("a folded
 * shape constant", "a constant"); NULL after an error.  May move L->vals. */
static struct val *const_out(struct lower *L, const Onnx__NodeProto *nd, int ndim, const int64_t *dims,
                             int dtype, int64_t max, const char *what)
{
	if (ndim < 0 || ndim > 8)
		return fail(L, "%s of %d dimensions, at most 8 supported", what, ndim), NULL;
	int64_t count = 1;
	for (int d = 0; d < ndim; d++) {
		if (dims[d] < 0 || dims[d] > max)
			return fail(L, "%s's dimension %d is %lld", what, d, (long long)dims[d]), NULL;
		count *= dims[d];
		if (count > max)
			return fail(L, "%s of more than %lld values", what, (long long)max), NULL;
	}
	struct val *Y = output(L, nd, 1);
	if (!Y)
		return NULL;
	Y->kind = V_CONST;
	Y->dtype = dtype;
	Y->count = (size_t)count;
	Y->ndim = ndim;
	for (int d = 0; d < ndim; d++)
		Y->dims[d] = dims[d];
	if (dtype == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
		Y->f = sd_calloc(count ? (size_t)count : 1, sizeof(float));
	else
		Y->i = sd_calloc(count ? (size_t)count : 1, sizeof(int64_t));
	return Y;
}

/* An int64 output of dims[0..ndim), zero-filled; NULL after an error.  It
 * may move L->vals: take pointers to inputs after the call. */
static struct val *int_tensor_out(struct lower *L, const Onnx__NodeProto *nd, int ndim,
                                  const int64_t *dims)
{
	return const_out(L, nd, ndim, dims, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, FOLD_MAX,
	                 "a folded shape constant");
}

/* A float (or, int64, an int64 0/1) constant output of at most
 * SD_ONNX_MAX_ELEMS elements (a slice of an initializer, a mask). */
static struct val *big_tensor_out(struct lower *L, const Onnx__NodeProto *nd, int ndim,
                                  const int64_t *dims, int dtype)
{
	return const_out(L, nd, ndim, dims, dtype, SD_ONNX_MAX_ELEMS, "a constant");
}

static struct val *float_tensor_out(struct lower *L, const Onnx__NodeProto *nd, int ndim,
                                    const int64_t *dims)
{
	return big_tensor_out(L, nd, ndim, dims, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
}

static struct val *int_output(struct lower *L, const Onnx__NodeProto *nd, size_t count)
{
	int64_t d = (int64_t)count;
	return int_tensor_out(L, nd, 1, &d);
}

/* An int64 constant input that holds no batch size (arithmetic on the
 * batch cannot be folded: it is not fixed). */
static int fixed_int_input(struct lower *L, const Onnx__NodeProto *nd, size_t i, int optional)
{
	int v = const_input(L, nd, i, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, optional);
	if (v < 0)
		return v;
	for (size_t k = 0; k < L->vals[v].count; k++)
		if (L->vals[v].i[k] == BATCH_DIM)
			return fail(L, "input %s holds the batch size, which this op cannot fold (it "
			            "is not fixed)", nd->input[i]), -1;
	return v;
}

/* axis normalised against rank (ONNX: -rank..rank-1), or -1 after an error. */
static int norm_axis(struct lower *L, int64_t axis, int rank)
{
	if (axis < -rank || axis >= rank)
		return fail(L, "axis %lld out of range for rank %d", (long long)axis, rank), -1;
	return (int)(axis < 0 ? axis + rank : axis);
}

/* Row-major strides of dims. */
static void strides_of(const int64_t *dims, int ndim, int64_t *st)
{
	int64_t s = 1;
	for (int d = ndim - 1; d >= 0; d--) {
		st[d] = s;
		s *= dims[d];
	}
}

static int lower_shape(struct lower *L, const Onnx__NodeProto *nd)
{
	int x = input(L, nd, 0, 0);
	if (x < 0)
		return -1;
	int64_t dims[8];
	int rank;
	const struct val *X = &L->vals[x];
	if (X->kind == V_ACT && X->seq) {
		rank = X->ndim;
		for (int d = 0; d < rank; d++)
			dims[d] = X->dims[d];
	} else if (X->kind == V_ACT) {
		const struct act a = L->m->acts[X->act];
		rank = X->rank;
		dims[0] = BATCH_DIM;
		if (rank == 2) {
			dims[1] = (int64_t)a.c * a.h * a.w;
		} else {
			dims[1] = a.c;
			dims[2] = a.h;
			dims[3] = a.w;
		}
	} else {
		rank = X->ndim;
		for (int d = 0; d < rank; d++)
			dims[d] = X->dims[d];
	}
	/* Opset 15's start and end: a range of the dimensions, clamped. */
	int64_t start, end;
	if (attr_int(L, nd, "start", 0, &start) < 0 || attr_int(L, nd, "end", rank, &end) < 0)
		return -1;
	if (start < 0)
		start += rank;
	if (end < 0)
		end += rank;
	start = start < 0 ? 0 : start > rank ? rank : start;
	end = end < 0 ? 0 : end > rank ? rank : end;
	size_t n = end > start ? (size_t)(end - start) : 0;
	struct val *Y = int_output(L, nd, n);
	if (!Y)
		return -1;
	for (size_t k = 0; k < n; k++)
		Y->i[k] = dims[start + (int64_t)k];
	return 0;
}

static int lower_gather(struct lower *L, const Onnx__NodeProto *nd)
{
	int d0 = input(L, nd, 0, 0);
	if (d0 >= 0 && L->vals[d0].kind == V_CONST &&
	    L->vals[d0].dtype == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
		return seq_gather(L, nd);
	int d = const_input(L, nd, 0, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 0), ix = -1;
	if (d < 0 || (ix = fixed_int_input(L, nd, 1, 0)) < 0)
		return -1;
	int64_t axis64;
	if (attr_int(L, nd, "axis", 0, &axis64) < 0)
		return -1;
	const struct val *D = &L->vals[d], *I = &L->vals[ix];
	if (D->ndim < 1)
		return fail(L, "gathers from a scalar");
	int axis = norm_axis(L, axis64, D->ndim);
	if (axis < 0)
		return -1;
	/* out = data.shape[:axis] + indices.shape + data.shape[axis+1:] */
	int64_t od[16];
	int on = 0;
	for (int k = 0; k < axis; k++)
		od[on++] = D->dims[k];
	for (int k = 0; k < I->ndim; k++)
		od[on++] = I->dims[k];
	for (int k = axis + 1; k < D->ndim; k++)
		od[on++] = D->dims[k];
	int64_t outer = 1, inner = 1, n = D->dims[axis];
	for (int k = 0; k < axis; k++)
		outer *= D->dims[k];
	for (int k = axis + 1; k < D->ndim; k++)
		inner *= D->dims[k];
	for (size_t k = 0; k < I->count; k++)
		if (I->i[k] < -n || I->i[k] >= n)
			return fail(L, "index %lld out of range for a dimension of %lld",
			            (long long)I->i[k], (long long)n);
	struct val *Y = int_tensor_out(L, nd, on, od);
	if (!Y)
		return -1;
	D = &L->vals[d];
	I = &L->vals[ix];
	size_t at = 0;
	for (int64_t o = 0; o < outer; o++)
		for (size_t k = 0; k < I->count; k++) {
			int64_t j = I->i[k] < 0 ? I->i[k] + n : I->i[k];
			for (int64_t q = 0; q < inner; q++)
				Y->i[at++] = D->i[(o * n + j) * inner + q];
		}
	return 0;
}

/* The axes of Unsqueeze or Squeeze: input 1 (opset 13 on) or the attribute
 * (earlier); *n 0 when absent. */
static int axes_of(struct lower *L, const Onnx__NodeProto *nd, int64_t *axes, int *n)
{
	*n = 0;
	int ax = fixed_int_input(L, nd, 1, 1);
	if (ax == -1)
		return -1;
	const Onnx__AttributeProto *aa = attr(nd, "axes");
	const int64_t *src = ax >= 0 ? L->vals[ax].i : aa ? aa->ints : NULL;
	size_t cnt = ax >= 0 ? L->vals[ax].count : aa ? aa->n_ints : 0;
	if (cnt > 8)
		return fail(L, "%zu axes, at most 8 supported", cnt);
	for (size_t k = 0; k < cnt; k++)
		axes[k] = src[k];
	*n = (int)cnt;
	return 0;
}

static int lower_unsqueeze(struct lower *L, const Onnx__NodeProto *nd)
{
	int d = const_input(L, nd, 0, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 0);
	int64_t axes[8];
	int na;
	if (d < 0 || axes_of(L, nd, axes, &na) < 0)
		return -1;
	const int rank = L->vals[d].ndim + na;
	if (!na || rank > 8)
		return fail(L, "%d axes on a rank-%d constant: 1 to %d axes supported", na,
		            L->vals[d].ndim, 8 - L->vals[d].ndim);
	int ins[8] = { 0 };
	for (int k = 0; k < na; k++) {
		int a = norm_axis(L, axes[k], rank);
		if (a < 0)
			return -1;
		if (ins[a])
			return fail(L, "axis %lld repeated", (long long)axes[k]);
		ins[a] = 1;
	}
	int64_t od[8];
	for (int k = 0, j = 0; k < rank; k++)
		od[k] = ins[k] ? 1 : L->vals[d].dims[j++];
	struct val *Y = int_tensor_out(L, nd, rank, od);
	if (!Y)
		return -1;
	if (Y->count)
		memcpy(Y->i, L->vals[d].i, Y->count * sizeof(int64_t));
	return 0;
}

static int lower_squeeze(struct lower *L, const Onnx__NodeProto *nd)
{
	int d = const_input(L, nd, 0, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 0);
	int64_t axes[8];
	int na;
	if (d < 0 || axes_of(L, nd, axes, &na) < 0)
		return -1;
	const struct val *D = &L->vals[d];
	int drop[8] = { 0 };
	for (int k = 0; k < na; k++) {
		int a = norm_axis(L, axes[k], D->ndim);
		if (a < 0)
			return -1;
		if (D->dims[a] != 1)
			return fail(L, "squeezes axis %d of size %lld", a, (long long)D->dims[a]);
		drop[a] = 1;
	}
	int64_t od[8];
	int on = 0;
	for (int k = 0; k < D->ndim; k++)
		if (!(na ? drop[k] : D->dims[k] == 1))
			od[on++] = D->dims[k];
	struct val *Y = int_tensor_out(L, nd, on, od);
	if (!Y)
		return -1;
	if (Y->count)
		memcpy(Y->i, L->vals[d].i, Y->count * sizeof(int64_t));
	return 0;
}

static int concat_consts(struct lower *L, const Onnx__NodeProto *nd)
{
	int64_t axis64;
	if (attr_int(L, nd, "axis", 0, &axis64) < 0)
		return -1;
	if (nd->n_input < 1)
		return fail(L, "no inputs");
	int v0 = const_input(L, nd, 0, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 0);
	if (v0 < 0)
		return -1;
	const int rank = L->vals[v0].ndim;
	if (rank < 1)
		return fail(L, "concatenates scalars");
	int axis = norm_axis(L, axis64, rank);
	if (axis < 0)
		return -1;
	int64_t od[8];
	for (int k = 0; k < rank; k++)
		od[k] = L->vals[v0].dims[k];
	od[axis] = 0;
	for (size_t k = 0; k < nd->n_input; k++) {
		int v = const_input(L, nd, k, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 0);
		if (v < 0)
			return -1;
		const struct val *V = &L->vals[v];
		if (V->ndim != rank)
			return fail(L, "input %s has rank %d, input %s rank %d", nd->input[0], rank,
			            nd->input[k], V->ndim);
		for (int q = 0; q < rank; q++)
			if (q != axis && V->dims[q] != od[q])
				return fail(L, "input %s differs in dimension %d", nd->input[k], q);
		od[axis] += V->dims[axis];
	}
	int64_t outer = 1, inner = 1;
	for (int k = 0; k < axis; k++)
		outer *= od[k];
	for (int k = axis + 1; k < rank; k++)
		inner *= od[k];
	struct val *Y = int_tensor_out(L, nd, rank, od);
	if (!Y)
		return -1;
	size_t at = 0;
	for (int64_t o = 0; o < outer; o++)
		for (size_t k = 0; k < nd->n_input; k++) {
			const struct val *V = &L->vals[find_val(L, nd->input[k])];
			int64_t run = V->dims[axis] * inner;
			memcpy(Y->i + at, V->i + o * run, (size_t)run * sizeof(int64_t));
			at += (size_t)run;
		}
	return 0;
}

/* Reshape of an int64 constant (shape entries 0: copy, unless allowzero;
 * one -1: inferred). */
static int reshape_const(struct lower *L, const Onnx__NodeProto *nd, int x)
{
	int sh = fixed_int_input(L, nd, 1, 0);
	int64_t allowzero;
	if (sh < 0 || attr_int(L, nd, "allowzero", 0, &allowzero) < 0)
		return -1;
	const struct val *X = &L->vals[x], *S = &L->vals[sh];
	if (X->dtype != ONNX__TENSOR_PROTO__DATA_TYPE__INT64)
		return fail(L, "reshapes a %s constant; only int64 constants are folded",
		            dtype_name(X->dtype));
	if (S->ndim != 1 || S->count > 8)
		return fail(L, "target shape %s is not 1-D with at most 8 entries", S->name);
	int64_t od[8], known = 1;
	int infer = -1;
	for (size_t k = 0; k < S->count; k++) {
		int64_t d = S->i[k];
		if (d == 0 && !allowzero) {
			if ((int)k >= X->ndim)
				return fail(L, "target entry %zu is 0 but the input has rank %d", k,
				            X->ndim);
			d = X->dims[k];
		} else if (d == -1 && infer < 0) {
			infer = (int)k;
			d = 1;
		} else if (d < 0 || d > FOLD_MAX) {
			return fail(L, "target shape entry %zu is %lld", k, (long long)S->i[k]);
		}
		od[k] = d;
		known *= d;
		if (known > FOLD_MAX)
			return fail(L, "target shape too large");
	}
	if (infer >= 0) {
		if (known == 0 || X->count % (size_t)known)
			return fail(L, "cannot infer -1 from %zu values", X->count);
		od[infer] = (int64_t)X->count / known;
		known *= od[infer];
	}
	if ((size_t)known != X->count)
		return fail(L, "reshapes %zu values to a shape of %lld", X->count, (long long)known);
	struct val *Y = int_tensor_out(L, nd, (int)S->count, od);
	if (!Y)
		return -1;
	if (Y->count)
		memcpy(Y->i, L->vals[x].i, Y->count * sizeof(int64_t));
	return 0;
}

static int lower_transpose(struct lower *L, const Onnx__NodeProto *nd)
{
	int x = input(L, nd, 0, 0);
	if (x < 0)
		return -1;
	if (is_seq(L, x))
		return seq_transpose(L, nd, x);
	if (L->vals[x].kind == V_CONST && L->vals[x].dtype == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT &&
	    L->vals[x].ndim == 2)
		return transpose_weight(L, nd, x);
	if (L->vals[x].kind != V_CONST || L->vals[x].dtype != ONNX__TENSOR_PROTO__DATA_TYPE__INT64)
		return fail(L, "transposes %s; only int64 constants (shape computations) are "
		            "transposed, at load", L->vals[x].kind != V_CONST ? "an activation"
		            : "a float constant");
	const struct val *X = &L->vals[x];
	const int rank = X->ndim;
	int64_t perm[8];
	const Onnx__AttributeProto *pa = attr(nd, "perm");
	if (pa && pa->n_ints != (size_t)rank)
		return fail(L, "perm has %zu entries for rank %d", pa->n_ints, rank);
	int seen[8] = { 0 };
	for (int k = 0; k < rank; k++) {
		perm[k] = pa ? pa->ints[k] : rank - 1 - k;
		if (perm[k] < 0 || perm[k] >= rank || seen[perm[k]]++)
			return fail(L, "perm is not a permutation of 0..%d", rank - 1);
	}
	int64_t od[8], ist[8], idx[8] = { 0 };
	for (int k = 0; k < rank; k++)
		od[k] = X->dims[perm[k]];
	strides_of(X->dims, rank, ist);
	struct val *Y = int_tensor_out(L, nd, rank, od);
	if (!Y)
		return -1;
	X = &L->vals[x];
	for (size_t o = 0; o < Y->count; o++) {
		int64_t src = 0;
		for (int k = 0; k < rank; k++)
			src += idx[k] * ist[perm[k]];
		Y->i[o] = X->i[src];
		for (int k = rank - 1; k >= 0; k--) {
			if (++idx[k] < od[k])
				break;
			idx[k] = 0;
		}
	}
	return 0;
}

/* Add, Sub, Mul of int64 constants with numpy broadcasting. */
static int arith_consts(struct lower *L, const Onnx__NodeProto *nd, char op)
{
	int a = fixed_int_input(L, nd, 0, 0), b = -1;
	if (a < 0 || (b = fixed_int_input(L, nd, 1, 0)) < 0)
		return -1;
	const struct val *A = &L->vals[a], *B = &L->vals[b];
	const int rank = A->ndim > B->ndim ? A->ndim : B->ndim;
	int64_t od[8], ad[8], bd[8], as[8], bs[8], idx[8] = { 0 };
	for (int k = 0; k < rank; k++) {
		int ka = k - (rank - A->ndim), kb = k - (rank - B->ndim);
		ad[k] = ka >= 0 ? A->dims[ka] : 1;
		bd[k] = kb >= 0 ? B->dims[kb] : 1;
		if (ad[k] != bd[k] && ad[k] != 1 && bd[k] != 1)
			return fail(L, "shapes do not broadcast (dimension %d: %lld and %lld)", k,
			            (long long)ad[k], (long long)bd[k]);
		od[k] = ad[k] == 1 ? bd[k] : ad[k];
	}
	strides_of(ad, rank, as);
	strides_of(bd, rank, bs);
	struct val *Y = int_tensor_out(L, nd, rank, od);
	if (!Y)
		return -1;
	A = &L->vals[a];
	B = &L->vals[b];
	for (size_t o = 0; o < Y->count; o++) {
		int64_t ia = 0, ib = 0, r;
		for (int k = 0; k < rank; k++) {
			ia += ad[k] == 1 ? 0 : idx[k] * as[k];
			ib += bd[k] == 1 ? 0 : idx[k] * bs[k];
		}
		int64_t x = A->i[ia], y = B->i[ib];
		if (op == '/' && (y == 0 || (x == INT64_MIN && y == -1)))
			return fail(L, "int64 division %lld / %lld", (long long)x, (long long)y);
		/* Integer Div truncates toward zero (ONNX), as C's does. */
		int ovf = op == '+' ? __builtin_add_overflow(x, y, &r)
		          : op == '-' ? __builtin_sub_overflow(x, y, &r)
		          : op == '/' ? (r = x / y, 0)
		          : __builtin_mul_overflow(x, y, &r);
		if (ovf)
			return fail(L, "int64 overflow in %lld %c %lld", (long long)x, op, (long long)y);
		Y->i[o] = r;
		for (int k = rank - 1; k >= 0; k--) {
			if (++idx[k] < od[k])
				break;
			idx[k] = 0;
		}
	}
	return 0;
}

/* Activation op activation of the same shape (Sub, Mul, Div; Add is
 * lower_add's residual add): an OP_BINARY node reading both. */
static int arith_acts(struct lower *L, const Onnx__NodeProto *nd, int a, int b, enum sd_binop op)
{
	struct sd_model *m = L->m;
	const int aa = L->vals[a].act, ba = L->vals[b].act;
	const struct act A = m->acts[aa], B = m->acts[ba];
	if (A.c != B.c || A.h != B.h || A.w != B.w || L->vals[a].rank != L->vals[b].rank)
		return fail(L, "combines a %dx%dx%d and a %dx%dx%d activation; two activations must "
		            "have the same shape (a constant may broadcast)", A.c, A.h, A.w, B.c, B.h,
		            B.w);
	const int rank = L->vals[a].rank;
	struct node *n = act_node(L, nd, OP_BINARY, aa, &A, rank);
	if (!n)
		return -1;
	n->in2 = ba;
	m->acts[ba].consumers++;
	n->binop = op;
	m->flops += (double)A.c * A.h * A.w;
	return 0;
}

/* Activation x op float constant k (k op x when k_first), k broadcast
 * (ONNX's numpy rules) from a scalar or one value per channel.  A
 * constant from an initializer is a model parameter (nn.Parameter and
 * registered buffers both export as initializers) and is trained; one
 * from a Constant node (a literal in forward) stays fixed. */
static int arith_const(struct lower *L, const Onnx__NodeProto *nd, int x, int kv,
                       enum sd_binop op, int k_first)
{
	struct sd_model *m = L->m;
	const struct val *X = &L->vals[x], *K = &L->vals[kv];
	if (K->dtype != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
		return fail(L, "input %s is an int64 constant combined with an activation; only "
		            "float32 constants are supported", K->name);
	const struct act A = m->acts[X->act];
	/* Per-channel: K's dimension aligned with C (rank 4: from the right,
	 * (C, 1, 1) or (1, C, 1, 1); rank 2: the features, when they are
	 * the channels of a 1x1 map) is C and every other one is 1. */
	const int rank = X->rank, cdim = K->ndim - (rank == 4 ? 3 : 1);
	int kc = 1;
	if (K->ndim > rank)
		kc = -1;
	for (int d = 0; d < K->ndim && kc > 0; d++) {
		if (K->dims[d] == 1)
			continue;
		if (d == cdim && K->dims[d] == A.c && (rank == 4 || (A.h == 1 && A.w == 1)))
			kc = A.c;
		else
			kc = -1;
	}
	if (kc < 0 || K->count != (size_t)kc) {
		char shape[96] = "";
		size_t used = 0;
		for (int d = 0; d < K->ndim && used < sizeof shape; d++)
			used += (size_t)snprintf(shape + used, sizeof shape - used, "%s%lld",
			                         d ? ", " : "", (long long)K->dims[d]);
		return fail(L, "constant %s of shape (%s) broadcast over a %dx%dx%d activation; "
		            "supported: a scalar or one value per channel ((1, %d, 1, 1))", K->name,
		            shape, A.c, A.h, A.w, A.c);
	}
	struct node *n = act_node(L, nd, OP_BINARY, L->vals[x].act, &A, X->rank);
	if (!n)
		return -1;
	n->binop = op;
	n->bin_kc = kc;
	n->bin_k_first = k_first;
	K = &L->vals[kv];
	if (K->init) {
		n->w_off = sd_graph_tensor(m, n->name, "constant", 1, kc, 0, 0, 0);
		name_tensor(L, K);
		add_copy(L, 0, n->w_off, K, 0, 0);
	} else {
		n->bin_k = memcpy(sd_malloc((size_t)kc * sizeof(float)), K->f,
		                  (size_t)kc * sizeof(float));
	}
	m->flops += (double)A.c * A.h * A.w;
	return 0;
}

/* Add (of a constant), Sub, Mul, Div: folded when both sides are int64
 * constants (shape computations), else computed by an OP_BINARY node. */
static int lower_arith(struct lower *L, const Onnx__NodeProto *nd, enum sd_binop op)
{
	static const char opc[] = { [SD_BIN_ADD] = '+', [SD_BIN_SUB] = '-', [SD_BIN_MUL] = '*',
	                            [SD_BIN_DIV] = '/' };
	int a = input(L, nd, 0, 0), b = -1;
	if (a < 0 || (b = input(L, nd, 1, 0)) < 0)
		return -1;
	const struct val *A = &L->vals[a], *B = &L->vals[b];
	if (A->kind == V_CONST && B->kind == V_CONST) {
		if (A->dtype == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 &&
		    B->dtype == ONNX__TENSOR_PROTO__DATA_TYPE__INT64)
			return arith_consts(L, nd, opc[op]);
		return fail(L, "computes on two float constants, which the loader does not fold "
		            "(export with do_constant_folding=True)");
	}
	if (is_seq(L, a) || is_seq(L, b))
		return seq_arith(L, nd, a, b, op);
	if (A->kind == V_ACT && B->kind == V_ACT)
		return arith_acts(L, nd, a, b, op);
	if (A->kind == V_CONST)
		return arith_const(L, nd, b, a, op, 1);
	return arith_const(L, nd, a, b, op, 0);
}

static int lower_mul(struct lower *L, const Onnx__NodeProto *nd)
{
	return lower_arith(L, nd, SD_BIN_MUL);
}

static int lower_sub(struct lower *L, const Onnx__NodeProto *nd)
{
	return lower_arith(L, nd, SD_BIN_SUB);
}

static int lower_div(struct lower *L, const Onnx__NodeProto *nd)
{
	return lower_arith(L, nd, SD_BIN_DIV);
}

/* Reciprocal (torch exports c / x as Reciprocal(x) * c): 1 / x, an
 * OP_BINARY dividing a fixed 1 by the activation. */
static int lower_reciprocal(struct lower *L, const Onnx__NodeProto *nd)
{
	int x = act_input(L, nd, 0);
	if (x < 0)
		return -1;
	const struct act A = L->m->acts[L->vals[x].act];
	struct node *n = act_node(L, nd, OP_BINARY, L->vals[x].act, &A, L->vals[x].rank);
	if (!n)
		return -1;
	n->binop = SD_BIN_DIV;
	n->bin_kc = 1;
	n->bin_k_first = 1;
	n->bin_k = sd_malloc(sizeof(float));
	n->bin_k[0] = 1.0f;
	L->m->flops += (double)A.c * A.h * A.w;
	return 0;
}

/* Dropout: while training, an OP_DROPOUT node with the node's ratio
 * (input 1, 0.5 when absent); in inference the identity.  The masks come
 * from the engine's generator (sd_model_set_noise), not from the node's
 * seed attribute, so that a replayed step draws the same ones; the
 * training_mode input is ignored: whether the engine trains decides. */
static int lower_dropout(struct lower *L, const Onnx__NodeProto *nd)
{
	int x = act_input(L, nd, 0);
	float p = 0.5f;
	if (x < 0 || scalar_input(L, nd, 1, 0.5f, &p) < 0 ||
	    (nd->n_input > 2 && *nd->input[2] && input(L, nd, 2, 0) < 0))
		return -1;
	if (!(p >= 0.0f && p < 1.0f))
		return fail(L, "ratio %g; dropout needs 0 <= ratio < 1", (double)p);
	if (p == 0.0f)
		return alias(L, nd, x, L->vals[x].rank);
	if (is_seq(L, x))
		return seq_dropout(L, nd, x, p);
	const struct act A = L->m->acts[L->vals[x].act];
	struct node *n = act_node(L, nd, OP_DROPOUT, L->vals[x].act, &A, L->vals[x].rank);
	if (!n)
		return -1;
	n->drop_p = p;
	return 0;
}

static int lower_constant_of_shape(struct lower *L, const Onnx__NodeProto *nd)
{
	int s = fixed_int_input(L, nd, 0, 0);
	if (s < 0)
		return -1;
	const struct val *S = &L->vals[s];
	if (S->ndim != 1 || S->count > 8)
		return fail(L, "shape input %s is not 1-D with at most 8 entries", S->name);
	int64_t od[8];
	for (size_t k = 0; k < S->count; k++)
		od[k] = S->i[k];
	/* The value: a one-element tensor, float32 0 when absent. */
	const Onnx__AttributeProto *va = attr(nd, "value");
	int dt = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
	int64_t iv = 0;
	float fv = 0;
	if (va) {
		if (!va->t)
			return fail(L, "attribute value is not a tensor");
		int before = L->nvals;
		if (tensor_val(L, va->t, "value", "attribute") < 0)
			return -1;
		struct val *V = &L->vals[L->nvals - 1];
		if (V->count != 1) {
			free(V->f);
			free(V->i);
			L->nvals = before;
			return fail(L, "attribute value has %zu elements, expected one", V->count);
		}
		dt = V->dtype;
		if (V->i)
			iv = V->i[0];
		else
			fv = V->f[0];
		free(V->f);
		free(V->i);
		L->nvals = before;
	}
	struct val *Y = int_tensor_out(L, nd, (int)L->vals[s].count, od);
	if (!Y)
		return -1;
	if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__INT64) {
		for (size_t k = 0; k < Y->count; k++)
			Y->i[k] = iv;
	} else {
		free(Y->i);
		Y->i = NULL;
		Y->dtype = dt;
		Y->f = sd_malloc((Y->count ? Y->count : 1) * sizeof(float));
		for (size_t k = 0; k < Y->count; k++)
			Y->f[k] = fv;
	}
	return 0;
}

/* The elements ONNX Slice takes along a dimension of size d for start,
 * end and *step (clamped as the specification says): the first index and
 * the count.  A step longer than the axis takes one element at most, so
 * *step is cut to d + 1, which keeps the arithmetic from overflowing. */
static void slice_range(int64_t d, int64_t start, int64_t end, int64_t *stepp, int64_t *first,
                        int64_t *count)
{
	if (*stepp > d + 1)
		*stepp = d + 1;
	if (*stepp < -(d + 1))
		*stepp = -(d + 1);
	const int64_t step = *stepp;
	if (start < 0)
		start = start < -d ? 0 : start + d;   /* overflow-safe for INT64_MIN */
	if (end < 0)
		end = end < -d ? -1 : end + d;
	if (step > 0) {
		start = start > d ? d : start;
		end = end < 0 ? 0 : end > d ? d : end;
		*count = end > start ? (end - start + step - 1) / step : 0;
	} else {
		start = start > d - 1 ? d - 1 : start;
		end = end > d - 1 ? d - 1 : end;
		*count = start > end ? (start - end + (-step) - 1) / (-step) : 0;
	}
	*first = start;
}

/* Slice's starts, ends, axes, steps (inputs 1 to 4, opset 10 on), n of
 * each. */
static int slice_args(struct lower *L, const Onnx__NodeProto *nd, int rank, int64_t *st,
                      int64_t *en, int *ax, int64_t *sp, int *n)
{
	int s = fixed_int_input(L, nd, 1, 0), e = -1, a = -2, p = -2;
	if (s < 0 || (e = fixed_int_input(L, nd, 2, 0)) < 0 ||
	    (a = fixed_int_input(L, nd, 3, 1)) == -1 || (p = fixed_int_input(L, nd, 4, 1)) == -1)
		return -1;
	size_t cnt = L->vals[s].count;
	if (L->vals[s].ndim != 1 || L->vals[e].count != cnt || cnt > 8 ||
	    (a >= 0 && L->vals[a].count != cnt) || (p >= 0 && L->vals[p].count != cnt))
		return fail(L, "starts, ends, axes and steps are not 1-D of one length");
	int seen[8] = { 0 };
	for (size_t k = 0; k < cnt; k++) {
		st[k] = L->vals[s].i[k];
		en[k] = L->vals[e].i[k];
		sp[k] = p >= 0 ? L->vals[p].i[k] : 1;
		if ((ax[k] = norm_axis(L, a >= 0 ? L->vals[a].i[k] : (int64_t)k, rank)) < 0)
			return -1;
		if (seen[ax[k]]++)
			return fail(L, "axis %d sliced twice", ax[k]);
		if (sp[k] == 0)
			return fail(L, "step 0");
	}
	*n = (int)cnt;
	return 0;
}

static int slice_const(struct lower *L, const Onnx__NodeProto *nd, int x)
{
	const int rank = L->vals[x].ndim;
	const int isf = L->vals[x].dtype == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
	int64_t st[8], en[8], sp[8], first[8], step[8], od[8], ist[8], idx[8] = { 0 };
	int ax[8], n;
	if (rank < 1)
		return fail(L, "slices a scalar");
	if (slice_args(L, nd, rank, st, en, ax, sp, &n) < 0)
		return -1;
	for (int k = 0; k < rank; k++) {
		first[k] = 0;
		step[k] = 1;
		od[k] = L->vals[x].dims[k];
	}
	for (int k = 0; k < n; k++) {
		slice_range(L->vals[x].dims[ax[k]], st[k], en[k], &sp[k], &first[ax[k]], &od[ax[k]]);
		step[ax[k]] = sp[k];
	}
	strides_of(L->vals[x].dims, rank, ist);
	/* A float constant (a registered buffer such as the causal mask) is
	 * sliced as it is: no more elements than it has. */
	struct val *Y = isf ? float_tensor_out(L, nd, rank, od) : int_tensor_out(L, nd, rank, od);
	if (!Y)
		return -1;
	const struct val *X = &L->vals[x];
	for (size_t o = 0; o < Y->count; o++) {
		int64_t src = 0;
		for (int k = 0; k < rank; k++)
			src += (first[k] + idx[k] * step[k]) * ist[k];
		if (isf)
			Y->f[o] = X->f[src];
		else
			Y->i[o] = X->i[src];
		for (int k = rank - 1; k >= 0; k--) {
			if (++idx[k] < od[k])
				break;
			idx[k] = 0;
		}
	}
	return 0;
}

/* ------------------------------------------- the option-A shortcut
 *
 * Slice and Pad of an activation are lowered only as the parameter-free
 * shortcut of the CIFAR ResNets (He et al.'s option A, what
 * tests/bench/torch_resnet.py writes as F.pad(x[:, :, ::s, ::s], (0, 0, 0,
 * 0, p, p))): they make a V_VIEW, no engine node, and the Add that reads it
 * becomes the engine's shortcut add (stride s, p zero channels on each
 * side), exactly the node engine/model.c's ResNets have.  Any other reader
 * of a view is refused (input()). */

static int view_from(struct lower *L, int x, struct val *Y)
{
	const struct val *X = &L->vals[x];
	if (X->kind == V_VIEW) {
		const char *name = Y->name;
		*Y = *X;
		Y->name = name;
		Y->consumers = 0;
		return 0;
	}
	const struct act a = L->m->acts[X->act];
	Y->kind = V_VIEW;
	Y->act = X->act;
	Y->rank = 4;
	Y->linear_node = -1;
	Y->vs_h = Y->vs_w = 1;
	Y->vpad = 0;
	Y->vc = a.c;
	Y->vh = a.h;
	Y->vw = a.w;
	return 0;
}

static int slice_act(struct lower *L, const Onnx__NodeProto *nd, int x)
{
	const struct val *X = &L->vals[x];
	if (X->rank != 4)
		return fail(L, "slices a flattened activation; Slice of activations is supported only "
		            "as a ResNet option-A shortcut (x[:, :, ::s, ::s] feeding an Add)");
	if (X->kind == V_VIEW && (X->vpad || spatial_pad(X)))
		return fail(L, "Slice after Pad; the ResNet option-A shortcut subsamples first, "
		            "then pads the channels");
	int64_t st[8], en[8], sp[8];
	int ax[8], n;
	if (slice_args(L, nd, 4, st, en, ax, sp, &n) < 0)
		return -1;
	const struct act a = L->m->acts[X->act];
	int64_t dims[4] = { 0, X->kind == V_VIEW ? X->vc : a.c, X->kind == V_VIEW ? X->vh : a.h,
		            X->kind == V_VIEW ? X->vw : a.w };
	int64_t newd[4] = { 0, dims[1], dims[2], dims[3] }, mul[4] = { 1, 1, 1, 1 };
	for (int k = 0; k < n; k++) {
		int64_t first, count;
		if (ax[k] == 0) {
			/* The batch: only the whole of it (x[:, ...]). */
			if (st[k] != 0 || sp[k] != 1 || en[k] < INT32_MAX)
				return fail(L, "slices the batch axis; Slice of activations is supported "
				            "only as a ResNet option-A shortcut (x[:, :, ::s, ::s])");
			continue;
		}
		int64_t asked = sp[k];
		slice_range(dims[ax[k]], st[k], en[k], &sp[k], &first, &count);
		int64_t whole = sp[k] > 0 ? (dims[ax[k]] + sp[k] - 1) / sp[k] : -1;
		if (sp[k] < 1 || first != 0 || count != whole || (ax[k] == 1 && sp[k] != 1))
			return fail(L, "slice of axis %d (start %lld, end %lld, step %lld) is not the "
			            "whole axis%s; Slice of activations is supported only as a ResNet "
			            "option-A shortcut (x[:, :, ::s, ::s] feeding an Add)", ax[k],
			            (long long)st[k], (long long)en[k], (long long)asked,
			            ax[k] == 1 ? "" : " subsampled from 0");
		newd[ax[k]] = count;
		mul[ax[k]] = sp[k];
	}
	if ((X->kind == V_VIEW ? X->vs_h : 1) * mul[2] > MAX_DIM ||
	    (X->kind == V_VIEW ? X->vs_w : 1) * mul[3] > MAX_DIM)
		return fail(L, "subsamples by more than %d", MAX_DIM);
	struct val *Y = output(L, nd, 1);
	if (!Y)
		return -1;
	view_from(L, x, Y);
	Y->vh = (int)newd[2];
	Y->vw = (int)newd[3];
	Y->vs_h *= (int)mul[2];
	Y->vs_w *= (int)mul[3];
	return 0;
}

static int lower_slice(struct lower *L, const Onnx__NodeProto *nd)
{
	int x = input(L, nd, 0, 0);
	if (x < 0)
		return -1;
	if (L->vals[x].kind == V_CONST)
		return slice_const(L, nd, x);
	return slice_act(L, nd, x);
}

static int lower_pad(struct lower *L, const Onnx__NodeProto *nd)
{
	int x = input(L, nd, 0, 0);
	if (x < 0)
		return -1;
	const char *only = "Pad of activations is supported only as a ResNet option-A shortcut "
	                   "(zero channels added equally on both sides, feeding an Add)";
	if (spatial_pad(&L->vals[x]))
		return fail(L, "pads rows and columns twice; supported once, read by a Conv or an "
		            "AveragePool");
	if (L->vals[x].kind == V_CONST)
		return fail(L, "pads a constant; %s", only);
	if (L->vals[x].rank != 4)
		return fail(L, "pads a flattened activation; %s", only);
	const Onnx__AttributeProto *ma = attr(nd, "mode");
	if (ma && ma->has_s && !(ma->s.len == 8 && !memcmp(ma->s.data, "constant", 8)))
		return fail(L, "mode %.*s; %s", (int)(ma->s.len > 16 ? 16 : ma->s.len),
		            (const char *)ma->s.data, only);
	int p = fixed_int_input(L, nd, 1, 0);
	if (p < 0)
		return -1;
	float cv;
	if (scalar_input(L, nd, 2, 0.0f, &cv) < 0)
		return -1;
	if (cv != 0)
		return fail(L, "pads with %g; %s", (double)cv, only);
	if (nd->n_input > 3 && *nd->input[3])
		return fail(L, "input axes is not supported; %s", only);
	const struct val *P = &L->vals[p];
	if (P->count != 8)
		return fail(L, "pads has %zu entries, expected 8 for (N, C, H, W)", P->count);
	if (P->i[2] || P->i[3] || P->i[6] || P->i[7]) {
		/* Rows and columns: only for a Conv or an AveragePool, which
		 * take them into their own padding (lower_conv, lower_pool). */
		const int64_t sp[4] = { P->i[2], P->i[3], P->i[6], P->i[7] };
		int bad = P->i[0] || P->i[1] || P->i[4] || P->i[5] || L->vals[x].kind != V_ACT;
		for (int k = 0; k < 4; k++)
			bad |= sp[k] < 0 || sp[k] > MAX_DIM;
		if (bad)
			return fail(L, "pads (%lld %lld %lld %lld %lld %lld %lld %lld); Pad of "
			            "activations is supported only as a ResNet option-A shortcut (zero "
			            "channels added equally on both sides, feeding an Add) or as zero rows "
			            "and columns read by a Conv or an AveragePool",
			            (long long)P->i[0], (long long)P->i[1], (long long)P->i[2],
			            (long long)P->i[3], (long long)P->i[4], (long long)P->i[5],
			            (long long)P->i[6], (long long)P->i[7]);
		struct val *Y = output(L, nd, 1);
		if (!Y)
			return -1;
		view_from(L, x, Y);
		for (int k = 0; k < 4; k++)
			Y->vsp[k] = (int)sp[k];
		Y->vh += (int)(sp[0] + sp[2]);
		Y->vw += (int)(sp[1] + sp[3]);
		return 0;
	}
	for (int k = 0; k < 8; k++)
		if (k % 4 != 1 && P->i[k] != 0)
			return fail(L, "pads axis %d; %s", k % 4, only);
	if (P->i[1] != P->i[5] || P->i[1] < 0 || P->i[1] > MAX_DIM)
		return fail(L, "channel pads %lld before and %lld after; %s", (long long)P->i[1],
		            (long long)P->i[5], only);
	int pad = (int)P->i[1];
	struct val *Y = output(L, nd, 1);
	if (!Y)
		return -1;
	view_from(L, x, Y);
	Y->vpad += pad;
	Y->vc += 2 * pad;
	return 0;
}

/* out = a + the view b: engine/model.c's shortcut add. */
static int add_view(struct lower *L, const Onnx__NodeProto *nd, int a, int b)
{
	const struct val *V = &L->vals[b];
	struct sd_model *m = L->m;
	int aa = L->vals[a].act, src = V->act;
	if (spatial_pad(V))
		return fail(L, "adds zero-padded rows and columns (a Pad of the spatial axes); those "
		            "are supported only as the input of a Conv or an AveragePool");
	const struct act A = m->acts[aa], S = m->acts[src];
	if (L->vals[a].rank != 4 || A.c != V->vc || A.h != V->vh || A.w != V->vw)
		return fail(L, "adds a %dx%dx%d activation and a %dx%dx%d shortcut; only the same "
		            "shapes are supported", A.c, A.h, A.w, V->vc, V->vh, V->vw);
	if (V->vs_h != V->vs_w || S.h != A.h * V->vs_h || S.w != A.w * V->vs_w)
		return fail(L, "shortcut subsamples %dx%d by %d and %d; the engine's shortcut "
		            "takes one stride that divides both sides", S.h, S.w, V->vs_h, V->vs_w);
	if (aa == src)
		return fail(L, "adds an activation to a view of itself");
	struct node *n = act_node(L, nd, OP_ADD, aa, &A, 4);
	if (!n)
		return -1;
	n->in2 = src;
	m->acts[src].consumers++;
	n->s = L->vals[b].vs_h;
	return 0;
}

/* Concat of activations along the channels: a chain of two-part concat
 * nodes. */
static int concat_acts(struct lower *L, const Onnx__NodeProto *nd)
{
	int64_t axis;
	if (attr_int(L, nd, "axis", 1, &axis) < 0)
		return -1;
	int first = act_input(L, nd, 0);
	if (first < 0)
		return -1;
	const int rank = L->vals[first].rank;
	if (axis != 1 && axis != -rank)
		return fail(L, "axis %lld; only the channel axis (1) is supported", (long long)axis);
	if (nd->n_input < 2)
		return alias(L, nd, first, rank);
	struct sd_model *m = L->m;
	const struct act A = m->acts[L->vals[first].act];
	int cur = L->vals[first].act, c = A.c;
	for (size_t k = 1; k < nd->n_input; k++) {
		int v = act_input(L, nd, k);
		if (v < 0)
			return -1;
		const struct act B = m->acts[L->vals[v].act];
		if (L->vals[v].rank != rank || B.h != A.h || B.w != A.w ||
		    (rank == 2 && (A.h != 1 || A.w != 1)))
			return fail(L, "input %s is %dx%dx%d, input %s %dx%dx%d: only the channels may "
			            "differ", nd->input[0], A.c, A.h, A.w, nd->input[k], B.c, B.h, B.w);
		if (L->vals[v].act == cur || (k > 1 && L->vals[v].act == L->vals[first].act))
			return fail(L, "concatenates an activation with itself");
		c += B.c;
		int out = new_act(L, c, A.h, A.w);
		if (out < 0)
			return -1;
		char nm[32], base[32];
		engine_name(L, nd, base, sizeof base);
		snprintf(nm, sizeof nm, k == nd->n_input - 1 ? "%s" : "%.24s.%zu", base, k);
		struct node *n = sd_graph_node(m, OP_CONCAT, cur, nm);
		n->in2 = L->vals[v].act;
		m->acts[n->in2].consumers++;
		n->out = out;
		cur = out;
	}
	struct val *Y = output(L, nd, 1);
	if (!Y)
		return -1;
	Y->kind = V_ACT;
	Y->act = cur;
	Y->rank = rank;
	return 0;
}

static int lower_concat(struct lower *L, const Onnx__NodeProto *nd)
{
	int x = nd->n_input ? input(L, nd, 0, 0) : -2;
	if (x == -1)
		return -1;
	if (x >= 0 && L->vals[x].kind == V_ACT)
		return concat_acts(L, nd);
	return concat_consts(L, nd);
}

static int lower_cast(struct lower *L, const Onnx__NodeProto *nd)
{
	int x = input(L, nd, 0, 0);
	int64_t to;
	if (x < 0 || attr_int(L, nd, "to", 0, &to) < 0)
		return -1;
	const struct val *X = &L->vals[x];
	if (X->kind != V_CONST || (X->dtype != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT &&
	                           X->dtype != ONNX__TENSOR_PROTO__DATA_TYPE__INT64))
		return fail(L, "only casts of constants are supported (the engine computes in float32)");
	if (to == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL &&
	    X->dtype == ONNX__TENSOR_PROTO__DATA_TYPE__INT64) {
		/* Bools are int64 0 / 1 here (tensor_val). */
		if (alias(L, nd, x, 0) < 0)
			return -1;
		struct val *Y = &L->vals[L->nvals - 1];
		for (size_t k = 0; k < Y->count; k++)
			Y->i[k] = Y->i[k] != 0;
		return 0;
	}
	if (to != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT && to != ONNX__TENSOR_PROTO__DATA_TYPE__INT64)
		return fail(L, "cast to %s; only float32, int64 and (of int64) bool are supported",
		            dtype_name((int)to));
	if (alias(L, nd, x, 0) < 0)
		return -1;
	struct val *Y = &L->vals[L->nvals - 1];
	if (Y->dtype == to)
		return 0;
	if (to == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) {
		Y->f = sd_malloc((Y->count ? Y->count : 1) * sizeof(float));
		for (size_t k = 0; k < Y->count; k++)
			Y->f[k] = Y->i[k] == BATCH_DIM ? NAN : (float)Y->i[k];
		free(Y->i);
		Y->i = NULL;
	} else {
		Y->i = sd_malloc((Y->count ? Y->count : 1) * sizeof(int64_t));
		for (size_t k = 0; k < Y->count; k++) {
			if (!(fabsf(Y->f[k]) < 9.2e18f))
				return fail(L, "cast of %g to int64", (double)Y->f[k]);
			Y->i[k] = (int64_t)Y->f[k];
		}
		free(Y->f);
		Y->f = NULL;
	}
	Y->dtype = (int)to;
	return 0;
}

static int lower_softmax(struct lower *L, const Onnx__NodeProto *nd)
{
	int x = act_input(L, nd, 0);
	if (is_seq(L, x) && strcmp(nd->op_type, "LogSoftmax"))
		return seq_softmax(L, nd, x);
	int64_t axis;
	if (x < 0 || attr_int(L, nd, "axis", -1, &axis) < 0)
		return -1;
	if (axis != -1 && axis != 1)
		return fail(L, "axis %lld; only the class axis (1 or -1) is supported",
		            (long long)axis);
	int found = 0;
	for (size_t k = 0; k < L->g->n_output; k++)
		found |= !strcmp(L->g->output[k]->name, nd->output[0]);
	if (!found)
		return fail(L, "only a final %s (whose output is the graph's output) is supported: "
		            "the engine's loss applies it", nd->op_type);
	if (alias(L, nd, x, L->vals[x].rank) < 0)
		return -1;
	L->softmax_out = L->nvals - 1;
	return 0;
}

/* ------------------------------------------------- language models
 *
 * A graph whose input is int64 (N, T) token ids (a GPT: examples/char-gpt)
 * lowers onto OP_SEQ nodes (engine/model-graph.h, run by
 * engine/model-seq.c) over activations of any rank.  Their values carry
 * their whole ONNX shape (seq, ndim, dims with dims[0] the batch); the
 * shape chains around them (Shape, Gather, Unsqueeze, Concat, Range, Slice
 * and Equal of the mask buffer, Cast) fold as constants above.  Every
 * initializer such an op trains becomes ONE parameter tensor (tie_param),
 * however many nodes read it: the tied embedding and output projection
 * share theirs and their gradients add up. */

static int is_seq(const struct lower *L, int v)
{
	return v >= 0 && L->vals[v].kind == V_ACT && L->vals[v].seq;
}

/* Per-sample floats of a language-model value: product of dims[1..). */
static size_t seq_per(const struct val *v)
{
	size_t f = 1;
	for (int d = 1; d < v->ndim; d++)
		f *= (size_t)v->dims[d];
	return f;
}

/* Rows (everything but the batch and the last axis) of a value. */
static int seq_rows(const struct val *v)
{
	size_t f = 1;
	for (int d = 1; d < v->ndim - 1; d++)
		f *= (size_t)v->dims[d];
	return (int)f;
}

/* A node of OP_SEQ kind op reading activation in, making nd's output o (0
 * here: output() checks the others are unread) of shape dims[0..ndim),
 * dims[0] the batch.  NULL after an error. */
static struct node *seq_node_out(struct lower *L, const Onnx__NodeProto *nd, size_t o,
                                 enum sd_seq_op op, int in, int ndim, const int64_t *dims)
{
	if (ndim < 2 || ndim - 1 > SD_ACT_MAX_RANK)
		return fail(L, "an activation of rank %d; 2 to %d (with the batch) supported", ndim,
		            SD_ACT_MAX_RANK + 1), NULL;
	int pd[SD_ACT_MAX_RANK];
	size_t f = 1;
	for (int k = 1; k < ndim; k++) {
		if (dims[k] < 1 || dims[k] > MAX_DIM * 16)
			return fail(L, "output dimension %d is %lld", k, (long long)dims[k]), NULL;
		pd[k - 1] = (int)dims[k];
		f *= (size_t)dims[k];
		if (f > MAX_ACT_FLOATS)
			return fail(L, "output of more than %zu values per sample", MAX_ACT_FLOATS), NULL;
	}
	L->act_floats += f;
	if (L->act_floats > MAX_MODEL_ACT_FLOATS)
		return fail(L, "the activations so far need more than %zu floats per sample",
		            MAX_MODEL_ACT_FLOATS), NULL;
	struct val *Y;
	if (o == 0) {
		/* Split's outputs are all computed; other ops' extra ones must be
		 * unread. */
		Y = output(L, nd, strcmp(nd->op_type, "Split") ? 1 : nd->n_output);
	} else {
		if (find_val(L, nd->output[o]) >= 0)
			return fail(L, "output %s is produced twice", nd->output[o]), NULL;
		Y = new_val(L, nd->output[o]);
	}
	if (!Y)
		return NULL;
	char nm[32];
	engine_name(L, nd, nm, sizeof nm);
	if (o > 0) {
		size_t len = strlen(nm);
		snprintf(nm + (len > 28 ? 28 : len), sizeof nm - (len > 28 ? 28 : len), ".%zu", o);
	}
	int out = sd_graph_seq_act(L->m, ndim - 1, pd);
	struct node *n = sd_graph_node(L->m, OP_SEQ, in, nm);
	n->seq = op;
	n->out = out;
	Y = &L->vals[L->nvals - 1];
	Y->kind = V_ACT;
	Y->act = out;
	Y->seq = 1;
	Y->rank = ndim;
	Y->ndim = ndim;
	for (int k = 0; k < ndim; k++)
		Y->dims[k] = k ? dims[k] : BATCH_DIM;
	return n;
}

static struct node *seq_node(struct lower *L, const Onnx__NodeProto *nd, enum sd_seq_op op,
                             int in, int ndim, const int64_t *dims)
{
	return seq_node_out(L, nd, 0, op, in, ndim, dims);
}

/* The parameter tensor of float initializer value v (rows x cols, or a
 * vector when cols is 0) for node nm: made once per initializer, and
 * found again by its name when another node reads it (weight tying).
 * transposed: v's data is (cols, rows) and goes in transposed.  SD_NO_TENSOR
 * after an error. */
static size_t tie_param(struct lower *L, int v, const char *nm, const char *what, int rows,
                        int cols, int transposed)
{
	const struct val *V = &L->vals[v];
	if (V->dtype != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
		return fail(L, "input %s is not float32", V->name), SD_NO_TENSOR;
	if (V->count != (size_t)rows * (cols ? cols : 1))
		return fail(L, "input %s has %zu values, expected %d x %d", V->name, V->count, rows,
		            cols ? cols : 1), SD_NO_TENSOR;
	if (V->init)
		for (int k = 0; k < L->ntie; k++)
			if (!strcmp(L->tie_init[k], V->init)) {
				const struct sd_tensor_info *t = NULL;
				for (int q = 0; q < L->m->ntensors; q++)
					if (L->m->tensors[q].offset == L->tie_off[k])
						t = &L->m->tensors[q];
				if (!t || t->count != V->count || transposed)
					return fail(L, "initializer %s is read by two nodes in different "
					            "layouts; the engine ties an initializer only when every "
					            "reader takes it as stored (an embedding and a MatMul by its "
					            "Transpose)", V->init), SD_NO_TENSOR;
				return L->tie_off[k];
			}
	struct sd_model *m = L->m;
	size_t off = cols ? sd_graph_tensor(m, nm, what, 2, rows, cols, 0, 0)
	             : sd_graph_tensor(m, nm, what, 1, rows, 0, 0, 0);
	name_tensor(L, V);
	add_copy(L, 0, off, V, transposed ? cols : 0, transposed ? rows : 0);
	if (V->init) {
		if (L->ntie == L->cap_tie) {
			L->cap_tie = L->cap_tie ? 2 * L->cap_tie : 32;
			L->tie_init = realloc(L->tie_init, (size_t)L->cap_tie * sizeof *L->tie_init);
			L->tie_off = realloc(L->tie_off, (size_t)L->cap_tie * sizeof *L->tie_off);
			if (!L->tie_init || !L->tie_off)
				sd_oom();
		}
		L->tie_init[L->ntie] = V->init;
		L->tie_off[L->ntie++] = off;
	}
	return off;
}

/* Gather of a float initializer (V, C): by the token ids (the input) or by
 * constant int64 positions (T) -> an embedding (N, T, C). */
static int seq_gather(struct lower *L, const Onnx__NodeProto *nd)
{
	int w = input(L, nd, 0, 0), ix = w < 0 ? -1 : input(L, nd, 1, 0);
	int64_t axis;
	if (ix < 0 || attr_int(L, nd, "axis", 0, &axis) < 0)
		return -1;
	const struct val *W = &L->vals[w], *I = &L->vals[ix];
	if (axis != 0 || W->ndim != 2 || !W->init)
		return fail(L, "gathers from float constant %s along axis %lld; the engine gathers "
		            "rows of a 2-D initializer (an embedding table) only", W->name,
		            (long long)axis);
	const int64_t V = W->dims[0], C = W->dims[1];
	int64_t dims[3] = { BATCH_DIM, 0, C };
	int32_t *idx = NULL;
	int in = 0;
	if (is_seq(L, ix)) {
		if (I->act != 0 || I->ndim != 2)
			return fail(L, "indices %s are computed; an embedding reads the token ids (the "
			            "graph's input) or constant positions", I->name);
		dims[1] = I->dims[1];
	} else if (I->kind == V_CONST && I->dtype == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 &&
	           I->ndim >= 1 && (size_t)I->dims[I->ndim - 1] == I->count && L->seq_T) {
		/* (T) positions, or (1, T) (arange(T).unsqueeze(0)): the same
		 * for every sample. */
		if ((int64_t)I->count != L->seq_T)
			return fail(L, "indices %s: %zu positions for a sequence of %d", I->name, I->count,
			            L->seq_T);
		idx = sd_malloc(I->count * sizeof *idx);
		for (size_t k = 0; k < I->count; k++) {
			if (I->i[k] < 0 || I->i[k] >= V) {
				free(idx);
				return fail(L, "index %lld out of range for the %lld rows of %s",
				            (long long)I->i[k], (long long)V, W->name);
			}
			idx[k] = (int32_t)I->i[k];
		}
		dims[1] = (int64_t)I->count;
	} else {
		return fail(L, "indices %s: an embedding reads the token ids (the graph's input) or "
		            "int64 constant positions ((T) or (1, T))", I->name);
	}
	char nm[32];
	engine_name(L, nd, nm, sizeof nm);
	size_t off = tie_param(L, w, nm, "weight", (int)V, (int)C, 0);
	struct node *n = off == SD_NO_TENSOR ? NULL : seq_node(L, nd, SEQ_EMBED, in, 3, dims);
	if (!n) {
		free(idx);
		return -1;
	}
	n->w_off = off;
	n->seq_idx = idx;
	n->seq_rows = (int)dims[1];
	n->seq_k = (int)V;
	n->seq_n = (int)C;
	return 0;
}

/* Transpose of a 2-D float initializer: a weight in waiting (val.wt). */
static int transpose_weight(struct lower *L, const Onnx__NodeProto *nd, int x)
{
	const Onnx__AttributeProto *pa = attr(nd, "perm");
	if (pa && (pa->n_ints != 2 || pa->ints[0] != 1 || pa->ints[1] != 0))
		return fail(L, "transposes a 2-D float constant with a perm other than (1, 0)");
	/* Only a MatMul or Gemm may read it (they take wt into account). */
	for (size_t j = (size_t)L->node_idx + 1; j < L->g->n_node; j++)
		for (size_t i = 0; i < L->g->node[j]->n_input; i++)
			if (!strcmp(L->g->node[j]->input[i], nd->output[0]) &&
			    strcmp(L->g->node[j]->op_type, "MatMul") && strcmp(L->g->node[j]->op_type, "Gemm"))
				return fail(L, "the transposed initializer is read by node %s (%s); a "
				            "Transpose of a float initializer is supported as a MatMul's "
				            "weight only", L->g->node[j]->name, L->g->node[j]->op_type);
	if (!L->vals[x].init)
		return fail(L, "transposes float constant %s, which is no initializer; only an "
		            "initializer's Transpose read by a MatMul is supported", L->vals[x].name);
	if (alias(L, nd, x, 0) < 0)
		return -1;
	struct val *Y = &L->vals[L->nvals - 1];
	int64_t d0 = Y->dims[0];
	Y->dims[0] = Y->dims[1];
	Y->dims[1] = d0;
	Y->wt = !Y->wt;
	return 0;
}

/* MatMul of a language-model activation by a weight (with the bias of a
 * following Add) or by another activation (batched). */
static int seq_matmul(struct lower *L, const Onnx__NodeProto *nd, int a, int b)
{
	struct sd_model *m = L->m;
	const struct val *A = &L->vals[a], *B = &L->vals[b];
	int64_t dims[8];
	for (int k = 0; k < A->ndim; k++)
		dims[k] = A->dims[k];
	const int64_t K = A->dims[A->ndim - 1];
	if (is_seq(L, b)) {
		if (B->ndim != A->ndim || A->ndim < 3)
			return fail(L, "multiplies activations of ranks %d and %d; batched products of "
			            "equal ranks >= 3 are supported", A->ndim, B->ndim);
		int64_t G = 1;
		for (int k = 1; k < A->ndim - 2; k++) {
			if (A->dims[k] != B->dims[k])
				return fail(L, "batch dimension %d differs (%lld, %lld); broadcasting is not "
				            "supported", k, (long long)A->dims[k], (long long)B->dims[k]);
			G *= A->dims[k];
		}
		if (B->dims[B->ndim - 2] != K)
			return fail(L, "inner dimensions %lld and %lld differ", (long long)K,
			            (long long)B->dims[B->ndim - 2]);
		const int64_t M = A->dims[A->ndim - 2], N = B->dims[B->ndim - 1];
		const int ba = B->act;
		dims[A->ndim - 1] = N;
		struct node *n = seq_node(L, nd, SEQ_BMM, A->act, A->ndim, dims);
		if (!n)
			return -1;
		n->in2 = ba;
		m->acts[ba].consumers++;
		n->seq_g = (int)G;
		n->seq_m = (int)M;
		n->seq_k = (int)K;
		n->seq_n = (int)N;
		m->flops += (double)G * M * K * N;
		return 0;
	}
	if (B->kind != V_CONST || B->dtype != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT || B->ndim != 2)
		return fail(L, "input %s: a MatMul of an activation multiplies by a 2-D float "
		            "initializer (a Linear's weight) or by another activation", B->name);
	if (B->dims[0] != K)
		return fail(L, "weight %s takes %lld inputs, the activation has %lld", B->name,
		            (long long)B->dims[0], (long long)K);
	const int64_t N = B->dims[1];
	int bias = -2;
	int add = bias_add(L, (size_t)L->node_idx, &bias);
	if (add >= 0 && (L->vals[bias].count != (size_t)N || !L->vals[bias].init))
		add = -1;
	char nm[32];
	engine_name(L, nd, nm, sizeof nm);
	/* Stored (N, K) as layers.h's linear takes it: a Transpose'd initializer
	 * (wt) is (N, K) already, a plain (K, N) one goes in transposed. */
	size_t w_off = tie_param(L, b, nm, "weight", (int)N, (int)K, !B->wt);
	if (w_off == SD_NO_TENSOR)
		return -1;
	size_t b_off = SD_NO_TENSOR;
	if (add >= 0 && (b_off = tie_param(L, bias, nm, "bias", (int)N, 0, 0)) == SD_NO_TENSOR)
		return -1;
	A = &L->vals[a];
	dims[A->ndim - 1] = N;
	struct node *n = seq_node(L, nd, SEQ_LINEAR, A->act, A->ndim, dims);
	if (!n)
		return -1;
	n->w_off = w_off;
	n->b_off = b_off;
	n->seq_rows = seq_rows(&L->vals[L->nvals - 1]);
	n->seq_k = (int)K;
	n->seq_n = (int)N;
	m->flops += (double)n->seq_rows * K * N;
	if (add >= 0) {
		/* The Add becomes nothing: its output is the linear's. */
		const Onnx__NodeProto *an = L->g->node[add];
		L->skip[add] = 1;
		L->op_count[op_index("Add")]++;
		struct val *Y = new_val(L, an->output[0]);
		*Y = L->vals[L->nvals - 2];
		Y->name = an->output[0];
		Y->consumers = 0;
		L->vals[L->nvals - 2].consumers = 1;
	}
	return 0;
}

/* Add, Sub, Mul, Div with a language-model activation: of two of the same
 * shape (OP_BINARY), or of one and a float constant that is a scalar or
 * one value per last-axis entry (SEQ_BIAS; an initializer is trained). */
static int seq_arith(struct lower *L, const Onnx__NodeProto *nd, int a, int b, enum sd_binop op)
{
	struct sd_model *m = L->m;
	if (is_seq(L, a) && is_seq(L, b)) {
		const struct val *A = &L->vals[a], *B = &L->vals[b];
		int same = A->ndim == B->ndim;
		for (int k = 1; same && k < A->ndim; k++)
			same = A->dims[k] == B->dims[k];
		if (!same)
			return fail(L, "combines activations of different shapes; the engine broadcasts "
			            "only constants over an activation");
		int64_t dims[8];
		for (int k = 0; k < A->ndim; k++)
			dims[k] = A->dims[k];
		const int aa = A->act, ba = B->act;
		struct node *n = seq_node(L, nd, SEQ_BIAS, aa, A->ndim, dims);
		if (!n)
			return -1;
		n->op = OP_BINARY;
		n->in2 = ba;
		m->acts[ba].consumers++;
		n->binop = op;
		m->flops += (double)seq_per(&L->vals[L->nvals - 1]);
		return 0;
	}
	const int k_first = !is_seq(L, a);
	const int x = k_first ? b : a, kv = k_first ? a : b;
	const struct val *X = &L->vals[x], *K = &L->vals[kv];
	if (K->kind != V_CONST || K->dtype != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
		return fail(L, "input %s: an activation combines with another activation or a "
		            "float32 constant", K->name);
	const int64_t C = X->dims[X->ndim - 1];
	int kc = K->count == 1 ? 1 : (int64_t)K->count == C ? (int)C : -1;
	for (int d = 0; d < K->ndim && kc > 1; d++)
		if (d != K->ndim - 1 && K->dims[d] != 1)
			kc = -1;
	if (kc < 0 || K->ndim > X->ndim)
		return fail(L, "constant %s of %zu values broadcast over an activation whose last "
		            "axis is %lld; supported: a scalar or one value per last-axis entry",
		            K->name, K->count, (long long)C);
	char nm[32];
	engine_name(L, nd, nm, sizeof nm);
	size_t off = SD_NO_TENSOR;
	if (K->init && (off = tie_param(L, kv, nm, "constant", kc, 0, 0)) == SD_NO_TENSOR)
		return -1;
	X = &L->vals[x];
	int64_t dims[8];
	for (int k = 0; k < X->ndim; k++)
		dims[k] = X->dims[k];
	struct node *n = seq_node(L, nd, SEQ_BIAS, X->act, X->ndim, dims);
	if (!n)
		return -1;
	K = &L->vals[kv];
	n->binop = op;
	n->bin_kc = kc;
	n->bin_k_first = k_first;
	n->w_off = off;
	if (off == SD_NO_TENSOR)
		n->bin_k = memcpy(sd_malloc((size_t)kc * sizeof(float)), K->f,
		                  (size_t)kc * sizeof(float));
	n->seq_rows = seq_rows(&L->vals[L->nvals - 1]);
	n->seq_n = (int)C;
	m->flops += (double)seq_per(&L->vals[L->nvals - 1]);
	return 0;
}

static int seq_transpose(struct lower *L, const Onnx__NodeProto *nd, int x)
{
	const struct val *X = &L->vals[x];
	const int rank = X->ndim;
	const Onnx__AttributeProto *pa = attr(nd, "perm");
	if (!pa || pa->n_ints != (size_t)rank)
		return fail(L, "a Transpose of an activation needs perm with %d entries", rank);
	int seen[8] = { 0 };
	int64_t dims[8];
	for (int k = 0; k < rank; k++) {
		if (pa->ints[k] < 0 || pa->ints[k] >= rank || seen[pa->ints[k]]++)
			return fail(L, "perm is not a permutation of 0..%d", rank - 1);
		dims[k] = X->dims[pa->ints[k]];
	}
	if (pa->ints[0] != 0)
		return fail(L, "perm moves the batch axis; the batch must stay first");
	int pd[SD_ACT_MAX_RANK];
	for (int k = 1; k < rank; k++)
		pd[k - 1] = (int)X->dims[k];
	const int act = X->act;
	struct node *n = seq_node(L, nd, SEQ_TRANSPOSE, act, rank, dims);
	if (!n)
		return -1;
	n->seq_rank = rank - 1;
	for (int k = 1; k < rank; k++) {
		n->seq_dims[k - 1] = pd[k - 1];
		n->seq_perm[k - 1] = (int)pa->ints[k] - 1;
	}
	return 0;
}

/* Reshape keeping the batch first: the same buffer under another shape. */
static int seq_reshape(struct lower *L, const Onnx__NodeProto *nd, int x)
{
	int sh = const_input(L, nd, 1, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 0);
	int64_t allowzero;
	if (sh < 0 || attr_int(L, nd, "allowzero", 0, &allowzero) < 0)
		return -1;
	const struct val *X = &L->vals[x], *S = &L->vals[sh];
	if (S->ndim != 1 || S->count < 2 || S->count > SD_ACT_MAX_RANK + 1)
		return fail(L, "target shape %s has %zu entries; 2 to %d supported", S->name, S->count,
		            SD_ACT_MAX_RANK + 1);
	int64_t want[8], known = 1;
	int infer = -1;
	for (size_t i = 0; i < S->count; i++) {
		int64_t d = S->i[i];
		if (i == 0 && (d == BATCH_DIM || d == 0 || (L->decl_batch > 0 && d == L->decl_batch)))
			d = BATCH_DIM;
		else if (d == 0 && !allowzero && (int)i < X->ndim)
			d = X->dims[i];
		else if (d == -1 && infer < 0)
			infer = (int)i;
		else if (d <= 0 || d == BATCH_DIM || d > MAX_DIM * 16)
			return fail(L, "target shape entry %zu is %lld", i, (long long)S->i[i]);
		want[i] = d;
		if (i > 0 && (int)i != infer)
			known *= d;
	}
	if (want[0] != BATCH_DIM)
		return fail(L, "target shape does not keep the batch as dimension 0");
	const int64_t total = (int64_t)seq_per(X);
	if (infer > 0) {
		if (known <= 0 || total % known)
			return fail(L, "cannot infer -1: %lld values per sample", (long long)total);
		want[infer] = total / known;
		known *= want[infer];
	}
	if (known != total)
		return fail(L, "target shape holds %lld values per sample, the input %lld",
		            (long long)known, (long long)total);
	if (alias(L, nd, x, (int)S->count) < 0)
		return -1;
	struct val *Y = &L->vals[L->nvals - 1];
	Y->ndim = (int)L->vals[sh].count;
	for (int k = 0; k < Y->ndim; k++)
		Y->dims[k] = want[k];
	return 0;
}

static int seq_softmax(struct lower *L, const Onnx__NodeProto *nd, int x)
{
	int64_t axis;
	if (attr_int(L, nd, "axis", -1, &axis) < 0)
		return -1;
	const struct val *X = &L->vals[x];
	if (axis != -1 && axis != X->ndim - 1)
		return fail(L, "axis %lld; a Softmax of an activation is supported on its last axis "
		            "only", (long long)axis);
	int64_t dims[8];
	for (int k = 0; k < X->ndim; k++)
		dims[k] = X->dims[k];
	struct node *n = seq_node(L, nd, SEQ_SOFTMAX, X->act, X->ndim, dims);
	if (!n)
		return -1;
	n->seq_rows = seq_rows(&L->vals[L->nvals - 1]);
	n->seq_n = (int)dims[L->vals[L->nvals - 1].ndim - 1];
	return 0;
}

static int seq_dropout(struct lower *L, const Onnx__NodeProto *nd, int x, float p)
{
	const struct val *X = &L->vals[x];
	int64_t dims[8];
	for (int k = 0; k < X->ndim; k++)
		dims[k] = X->dims[k];
	struct node *n = seq_node(L, nd, SEQ_BIAS, X->act, X->ndim, dims);
	if (!n)
		return -1;
	n->op = OP_DROPOUT;
	n->drop_p = p;
	return 0;
}

static int lower_erf(struct lower *L, const Onnx__NodeProto *nd)
{
	int x = act_input(L, nd, 0);
	if (x < 0)
		return -1;
	if (!is_seq(L, x))
		return fail(L, "Erf is supported on language-model activations only");
	const struct val *X = &L->vals[x];
	int64_t dims[8];
	for (int k = 0; k < X->ndim; k++)
		dims[k] = X->dims[k];
	return seq_node(L, nd, SEQ_ERF, X->act, X->ndim, dims) ? 0 : -1;
}

/* Range of int64 scalar constants (the positions 0..T-1). */
static int lower_range(struct lower *L, const Onnx__NodeProto *nd)
{
	int v[3];
	for (size_t i = 0; i < 3; i++) {
		if ((v[i] = fixed_int_input(L, nd, i, 0)) < 0)
			return -1;
		if (L->vals[v[i]].count != 1)
			return fail(L, "input %s is not a scalar", nd->input[i]);
	}
	const int64_t start = L->vals[v[0]].i[0], limit = L->vals[v[1]].i[0];
	const int64_t delta = L->vals[v[2]].i[0];
	if (delta == 0)
		return fail(L, "delta 0");
	int64_t n = delta > 0 ? (limit - start + delta - 1) / delta : (start - limit - delta - 1) / -delta;
	if (n < 0)
		n = 0;
	if (n > FOLD_MAX)
		return fail(L, "a range of %lld values, at most %d folded", (long long)n, FOLD_MAX);
	struct val *Y = int_output(L, nd, (size_t)n);
	if (!Y)
		return -1;
	for (int64_t k = 0; k < n; k++)
		Y->i[k] = start + k * delta;
	return 0;
}

/* The value of constant v at the index of element o of a broadcast result
 * of dims od[0..rank) (numpy rules: v's dims aligned right). */
static size_t bcast_index(const struct val *v, const int64_t *od, int rank, size_t o)
{
	size_t src = 0, st = 1;
	for (int k = rank - 1; k >= 0; k--) {
		int64_t c = (int64_t)(o % (size_t)od[k]);
		o /= (size_t)od[k];
		int kv = k - (rank - v->ndim);
		if (kv < 0)
			continue;
		if (v->dims[kv] != 1)
			src += (size_t)c * st;
		st *= (size_t)v->dims[kv];
	}
	return src;
}

/* Equal of two constants (the mask buffer against 0): int64 0 / 1. */
static int lower_equal(struct lower *L, const Onnx__NodeProto *nd)
{
	int a = input(L, nd, 0, 0), b = a < 0 ? -1 : input(L, nd, 1, 0);
	if (b < 0)
		return -1;
	const struct val *A = &L->vals[a], *B = &L->vals[b];
	if (A->kind != V_CONST || B->kind != V_CONST)
		return fail(L, "Equal of an activation; only constants (folded at load) are supported");
	if (A->dtype != B->dtype)
		return fail(L, "compares %s with %s", dtype_name(A->dtype), dtype_name(B->dtype));
	const int rank = A->ndim > B->ndim ? A->ndim : B->ndim;
	int64_t od[8];
	for (int k = 0; k < rank; k++) {
		int ka = k - (rank - A->ndim), kb = k - (rank - B->ndim);
		int64_t da = ka >= 0 ? A->dims[ka] : 1, db = kb >= 0 ? B->dims[kb] : 1;
		if (da != db && da != 1 && db != 1)
			return fail(L, "shapes do not broadcast (dimension %d: %lld and %lld)", k,
			            (long long)da, (long long)db);
		od[k] = da == 1 ? db : da;
	}
	struct val *Y = big_tensor_out(L, nd, rank, od, ONNX__TENSOR_PROTO__DATA_TYPE__INT64);
	if (!Y)
		return -1;
	A = &L->vals[a];
	B = &L->vals[b];
	const int isf = A->dtype == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
	for (size_t o = 0; o < Y->count; o++) {
		size_t ia = bcast_index(A, od, rank, o), ib = bcast_index(B, od, rank, o);
		Y->i[o] = isf ? A->f[ia] == B->f[ib] : A->i[ia] == B->i[ib];
	}
	return 0;
}

/* Where(constant condition, constant scalar, activation) or with the last
 * two swapped: the activation with the scalar where the condition holds
 * (does not hold): the causal mask's masked_fill. */
static int lower_where(struct lower *L, const Onnx__NodeProto *nd)
{
	int c = input(L, nd, 0, 0), a = c < 0 ? -1 : input(L, nd, 1, 0);
	int b = a < 0 ? -1 : input(L, nd, 2, 0);
	if (b < 0)
		return -1;
	const int act_second = is_seq(L, b);
	const int x = act_second ? b : a, k = act_second ? a : b;
	const struct val *C = &L->vals[c], *X = &L->vals[x], *K = &L->vals[k];
	if (C->kind != V_CONST || C->dtype != ONNX__TENSOR_PROTO__DATA_TYPE__INT64 || !is_seq(L, x) ||
	    K->kind != V_CONST || K->dtype != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT || K->count != 1)
		return fail(L, "Where is supported as a masked fill only: a constant condition, a "
		            "float scalar constant and an activation");
	if (C->ndim > X->ndim)
		return fail(L, "condition of rank %d over an activation of rank %d", C->ndim, X->ndim);
	for (int d = 0; d < C->ndim; d++) {
		int kx = d + (X->ndim - C->ndim);
		if (C->dims[d] != 1 && (kx == 0 || C->dims[d] != X->dims[kx]))
			return fail(L, "condition dimension %d (%lld) does not broadcast over the "
			            "activation's %lld (per sample)", d, (long long)C->dims[d],
			            kx == 0 ? -1LL : (long long)X->dims[kx]);
	}
	int64_t dims[8];
	for (int d = 0; d < X->ndim; d++)
		dims[d] = X->dims[d];
	const size_t per = seq_per(X);
	uint8_t *mask = sd_malloc(per);
	int64_t pd[8];
	for (int d = 1; d < X->ndim; d++)
		pd[d - 1] = X->dims[d];
	/* The condition against the per-sample dims (its batch axis is 1). */
	struct val Cs = *C;
	if (Cs.ndim == X->ndim) {
		Cs.ndim--;
		memmove(Cs.dims, Cs.dims + 1, (size_t)Cs.ndim * sizeof Cs.dims[0]);
	}
	for (size_t o = 0; o < per; o++) {
		int hold = C->i[bcast_index(&Cs, pd, X->ndim - 1, o)] != 0;
		mask[o] = (uint8_t)(act_second ? hold : !hold);
	}
	const float fill = K->f[0];
	struct node *n = seq_node(L, nd, SEQ_MASKFILL, X->act, X->ndim, dims);
	if (!n) {
		free(mask);
		return -1;
	}
	n->seq_mask = mask;
	n->seq_fill = fill;
	return 0;
}

/* Split of an activation along its last axis: one slice node per output. */
static int lower_split(struct lower *L, const Onnx__NodeProto *nd)
{
	int x = act_input(L, nd, 0);
	int64_t axis;
	if (x < 0 || attr_int(L, nd, "axis", 0, &axis) < 0)
		return -1;
	if (!is_seq(L, x))
		return fail(L, "Split is supported on language-model activations only");
	const int rank = L->vals[x].ndim;
	if (axis != -1 && axis != rank - 1)
		return fail(L, "axis %lld; a Split along the last axis only is supported",
		            (long long)axis);
	const int64_t C = L->vals[x].dims[rank - 1];
	const size_t no = nd->n_output;
	if (no < 1 || no > 64)
		return fail(L, "%zu outputs", no);
	int64_t sizes[64];
	int sp = input(L, nd, 1, 1);
	const Onnx__AttributeProto *sa = attr(nd, "split");
	if (sp == -1)
		return -1;
	if (sp >= 0) {
		const struct val *S = &L->vals[sp];
		if (S->kind != V_CONST || S->dtype != ONNX__TENSOR_PROTO__DATA_TYPE__INT64 ||
		    S->count != no)
			return fail(L, "split sizes %s: not %zu int64 constants", S->name, no);
		for (size_t o = 0; o < no; o++)
			sizes[o] = S->i[o];
	} else if (sa) {
		if (sa->n_ints != no)
			return fail(L, "attribute split has %zu values for %zu outputs", sa->n_ints, no);
		for (size_t o = 0; o < no; o++)
			sizes[o] = sa->ints[o];
	} else {
		if (C % (int64_t)no)
			return fail(L, "%lld values do not split evenly into %zu", (long long)C, no);
		for (size_t o = 0; o < no; o++)
			sizes[o] = C / (int64_t)no;
	}
	int64_t sum = 0;
	for (size_t o = 0; o < no; o++) {
		if (sizes[o] < 1)
			return fail(L, "split size %lld", (long long)sizes[o]);
		sum += sizes[o];
	}
	if (sum != C)
		return fail(L, "split sizes add up to %lld, the axis has %lld", (long long)sum,
		            (long long)C);
	int64_t off = 0;
	for (size_t o = 0; o < no; o++) {
		if (!*nd->output[o])
			return fail(L, "output %zu is unnamed", o);
		const struct val *X = &L->vals[x];
		int64_t dims[8];
		for (int k = 0; k < rank; k++)
			dims[k] = X->dims[k];
		dims[rank - 1] = sizes[o];
		const int act = X->act, rows = seq_rows(X);
		struct node *n = seq_node_out(L, nd, o, SEQ_SLICE, act, rank, dims);
		if (!n)
			return -1;
		n->seq_rows = rows;
		n->seq_k = (int)C;
		n->seq_n = (int)sizes[o];
		n->seq_off = (int)off;
		off += sizes[o];
	}
	return 0;
}

/* A layer-norm node over the last axis of x, eps, scale and bias values
 * (-2 when absent), making nd's output. */
static int make_layernorm(struct lower *L, const Onnx__NodeProto *nd, int x, float eps, int g,
                          int b)
{
	const struct val *X = &L->vals[x];
	const int64_t C = X->dims[X->ndim - 1];
	char nm[32];
	engine_name(L, nd, nm, sizeof nm);
	size_t goff = SD_NO_TENSOR, boff = SD_NO_TENSOR;
	if (g >= 0 && (goff = tie_param(L, g, nm, "weight", (int)C, 0, 0)) == SD_NO_TENSOR)
		return -1;
	if (b >= 0 && (boff = tie_param(L, b, nm, "bias", (int)C, 0, 0)) == SD_NO_TENSOR)
		return -1;
	X = &L->vals[x];
	int64_t dims[8];
	for (int k = 0; k < X->ndim; k++)
		dims[k] = X->dims[k];
	struct node *n = seq_node(L, nd, SEQ_LAYERNORM, X->act, X->ndim, dims);
	if (!n)
		return -1;
	n->w_off = goff;
	n->b_off = boff;
	n->seq_eps = eps;
	n->seq_rows = seq_rows(&L->vals[L->nvals - 1]);
	n->seq_n = (int)C;
	L->m->flops += 5.0 * (double)seq_per(&L->vals[L->nvals - 1]);
	return 0;
}

/* Opset 17's LayerNormalization over the last axis. */
static int lower_layernorm(struct lower *L, const Onnx__NodeProto *nd)
{
	int x = act_input(L, nd, 0), g = -1, b = -2;
	int64_t axis;
	float eps;
	if (x < 0 || (g = const_input(L, nd, 1, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 0)) < 0 ||
	    (b = const_input(L, nd, 2, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1)) == -1 ||
	    attr_int(L, nd, "axis", -1, &axis) < 0 || attr_float(L, nd, "epsilon", 1e-5f, &eps) < 0)
		return -1;
	if (!is_seq(L, x))
		return fail(L, "LayerNormalization is supported on language-model activations only");
	if (axis != -1 && axis != L->vals[x].ndim - 1)
		return fail(L, "axis %lld; the last axis only is supported", (long long)axis);
	return make_layernorm(L, nd, x, eps, g, b);
}

/* The node after the current one reading value name, when exactly one
 * input of exactly one later node reads it and that node is of op type op;
 * else -1. */
static int sole_reader(const struct lower *L, const char *name, const char *op)
{
	int found = -1, reads = 0;
	for (size_t j = (size_t)L->node_idx + 1; j < L->g->n_node; j++) {
		const Onnx__NodeProto *nd = L->g->node[j];
		for (size_t i = 0; i < nd->n_input; i++)
			if (!strcmp(nd->input[i], name)) {
				reads++;
				found = (int)j;
			}
	}
	for (size_t k = 0; k < L->g->n_output; k++)
		reads += !strcmp(L->g->output[k]->name, name);
	if (reads != 1 || strcmp(L->g->node[found]->op_type, op))
		return -1;
	return found;
}

/* The float scalar constant among node j's two inputs other than `other`,
 * its value in *v; 0 when there is one.  It may be a Constant node later
 * in the file than the chain's head (exports put each Constant just before
 * its reader): read from the node itself then. */
static int ln_scalar(struct lower *L, int j, const char *other, float *v)
{
	const Onnx__NodeProto *nd = L->g->node[j];
	if (nd->n_input != 2)
		return -1;
	int which = !strcmp(nd->input[0], other) ? 1 : !strcmp(nd->input[1], other) ? 0 : -1;
	if (which < 0)
		return -1;
	int k = find_val(L, nd->input[which]);
	if (k >= 0) {
		if (L->vals[k].kind != V_CONST || L->vals[k].count != 1 ||
		    L->vals[k].dtype != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
			return -1;
		*v = L->vals[k].f[0];
		return 0;
	}
	for (size_t q = 0; q < L->g->n_node; q++) {
		const Onnx__NodeProto *c = L->g->node[q];
		if (strcmp(c->op_type, "Constant") || c->n_output != 1 ||
		    strcmp(c->output[0], nd->input[which]) || c->n_attribute != 1)
			continue;
		const Onnx__AttributeProto *a = c->attribute[0];
		if (!strcmp(a->name, "value_float") && a->has_f) {
			*v = a->f;
			return 0;
		}
		const Onnx__TensorProto *t = !strcmp(a->name, "value") ? a->t : NULL;
		int64_t cnt = 1;
		for (size_t d = 0; t && d < t->n_dims; d++)
			cnt *= t->dims[d];
		if (!t || cnt != 1 || !t->has_data_type ||
		    t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
			return -1;
		if (t->has_raw_data && t->raw_data.len == sizeof(float))
			memcpy(v, t->raw_data.data, sizeof(float));
		else if (!t->has_raw_data && t->n_float_data == 1)
			*v = t->float_data[0];
		else
			return -1;
		return 0;
	}
	return -1;
}

/* The float initializer among node j's two inputs other than `other`, of
 * C values: its value index, else -1. */
static int ln_param(struct lower *L, int j, const char *other, int64_t C)
{
	const Onnx__NodeProto *nd = L->g->node[j];
	if (nd->n_input != 2)
		return -1;
	int which = !strcmp(nd->input[0], other) ? 1 : !strcmp(nd->input[1], other) ? 0 : -1;
	int k = which < 0 ? -1 : find_val(L, nd->input[which]);
	if (k < 0 || L->vals[k].kind != V_CONST || L->vals[k].count != (size_t)C ||
	    L->vals[k].dtype != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT || !L->vals[k].init)
		return -1;
	return k;
}

/* ReduceMean heading the LayerNorm chain opsets 14 to 16 write for
 * nn.LayerNorm (torch/onnx/symbolic_opset9.py, layer_norm):
 *   mean = ReduceMean(x, -1); d = Sub(x, mean); var = ReduceMean(Pow(d, 2), -1)
 *   y = Div(d, Sqrt(Add(var, eps))); then Mul(y, weight), Add(., bias)
 * recognised by following each value to its only reader, and lowered to
 * one layer-norm node (what opset 17 writes as LayerNormalization); the
 * other nodes of the chain are skipped. */
static int lower_reduce_mean(struct lower *L, const Onnx__NodeProto *nd)
{
	int x = act_input(L, nd, 0);
	if (x < 0)
		return -1;
	const char *const why = "a ReduceMean is supported only as the head of the LayerNorm "
	                        "chain opsets before 17 export (ReduceMean, Sub, Pow 2, "
	                        "ReduceMean, Add eps, Sqrt, Div, Mul weight, Add bias)";
	const struct val *X = &L->vals[x];
	const Onnx__AttributeProto *ax = attr(nd, "axes");
	int64_t keep;
	if (attr_int(L, nd, "keepdims", 1, &keep) < 0)
		return -1;
	if (!is_seq(L, x) || !ax || ax->n_ints != 1 ||
	    (ax->ints[0] != -1 && ax->ints[0] != X->ndim - 1) || !keep || nd->n_input != 1)
		return fail(L, "%s", why);
	const int64_t C = X->dims[X->ndim - 1];
	const Onnx__GraphProto *g = L->g;
	/* Sub(x, mean) */
	int sub = sole_reader(L, nd->output[0], "Sub");
	if (sub < 0 || strcmp(g->node[sub]->input[0], nd->input[0]) ||
	    strcmp(g->node[sub]->input[1], nd->output[0]))
		return fail(L, "%s", why);
	const char *d = g->node[sub]->output[0];
	/* d is read by Pow and Div */
	int pw = -1, dv = -1, reads = 0;
	for (size_t j = (size_t)sub + 1; j < g->n_node; j++)
		for (size_t i = 0; i < g->node[j]->n_input; i++)
			if (!strcmp(g->node[j]->input[i], d)) {
				reads++;
				if (!strcmp(g->node[j]->op_type, "Pow") && i == 0)
					pw = (int)j;
				else if (!strcmp(g->node[j]->op_type, "Div") && i == 0)
					dv = (int)j;
			}
	float two, eps;
	if (reads != 2 || pw < 0 || dv < 0 || ln_scalar(L, pw, d, &two) < 0 || two != 2.0f)
		return fail(L, "%s", why);
	int rm2 = sole_reader(L, g->node[pw]->output[0], "ReduceMean");
	int ad = rm2 < 0 ? -1 : sole_reader(L, g->node[rm2]->output[0], "Add");
	int sq = ad < 0 ? -1 : sole_reader(L, g->node[ad]->output[0], "Sqrt");
	int dv2 = sq < 0 ? -1 : sole_reader(L, g->node[sq]->output[0], "Div");
	if (dv2 != dv || ln_scalar(L, ad, g->node[rm2]->output[0], &eps) < 0 ||
	    strcmp(g->node[dv]->input[1], g->node[sq]->output[0]))
		return fail(L, "%s", why);
	const Onnx__AttributeProto *ax2 = attr(g->node[rm2], "axes");
	if (!ax2 || ax2->n_ints != 1 || (ax2->ints[0] != -1 && ax2->ints[0] != X->ndim - 1))
		return fail(L, "%s", why);
	/* The optional affine part. */
	int last = dv, gam = -2, bet = -2;
	int mul = sole_reader(L, g->node[dv]->output[0], "Mul");
	if (mul >= 0 && (gam = ln_param(L, mul, g->node[dv]->output[0], C)) >= 0) {
		last = mul;
		int ad2 = sole_reader(L, g->node[mul]->output[0], "Add");
		if (ad2 >= 0 && (bet = ln_param(L, ad2, g->node[mul]->output[0], C)) >= 0)
			last = ad2;
		else
			bet = -2;
	} else {
		gam = -2;
	}
	const int chain[] = { sub, pw, rm2, ad, sq, dv, mul, last };
	for (size_t k = 0; k < sizeof chain / sizeof chain[0]; k++) {
		int j = chain[k];
		if (j < 0 || j > last || L->skip[j])
			continue;
		L->skip[j] = 1;
		L->op_count[op_index(g->node[j]->op_type)]++;
	}
	return make_layernorm(L, g->node[last], x, eps, gam, bet);
}

/* Pow of a language-model activation by a float scalar constant, Sqrt of
 * one (elementwise); the LayerNorm chain's are part of its layer-norm
 * node. */
static int lower_ln_part(struct lower *L, const Onnx__NodeProto *nd)
{
	int x = act_input(L, nd, 0);
	if (x < 0)
		return -1;
	float e = 0.5f;
	if (!strcmp(nd->op_type, "Pow")) {
		int k = input(L, nd, 1, 0);
		if (k < 0)
			return -1;
		if (L->vals[k].kind != V_CONST || L->vals[k].count != 1 ||
		    L->vals[k].dtype != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
			return fail(L, "exponent %s: a Pow of an activation is supported by a float "
			            "scalar constant only", nd->input[1]);
		e = L->vals[k].f[0];
	}
	if (!is_seq(L, x))
		return fail(L, "%s is supported on language-model activations only", nd->op_type);
	const struct val *X = &L->vals[x];
	int64_t dims[8];
	for (int k = 0; k < X->ndim; k++)
		dims[k] = X->dims[k];
	struct node *n = seq_node(L, nd, SEQ_POW, X->act, X->ndim, dims);
	if (!n)
		return -1;
	n->seq_scale = e;
	return 0;
}

/* ------------------------------------------------------------ the graph */

static int op_index(const char *op)
{
	for (int i = 0; i < NOPS; i++)
		if (!strcmp(ops[i].pub.op, op))
			return i;
	return -1;
}

static int check_opset(struct lower *L, const Onnx__ModelProto *mp)
{
	int64_t v = -1;
	for (size_t i = 0; i < mp->n_opset_import; i++) {
		const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
		if (!o->domain || !*o->domain || !strcmp(o->domain, "ai.onnx"))
			v = o->has_version ? o->version : 0;
	}
	if (v < 0)
		return fail(L, "no default-domain opset import; not a model torch.onnx.export writes");
	if (v < OPSET_MIN || v > OPSET_MAX)
		return fail(L, "opset %lld; spotdeck reads opsets %d to %d (torch.onnx.export(..., "
		            "opset_version=%d))", (long long)v, OPSET_MIN, OPSET_MAX, OPSET_MIN);
	return 0;
}

static int is_initializer(const Onnx__GraphProto *g, const char *name)
{
	for (size_t i = 0; i < g->n_initializer; i++)
		if (g->initializer[i]->name && !strcmp(g->initializer[i]->name, name))
			return 1;
	return 0;
}

/* The one graph input that is not an initializer: (N, C, H, W) float32. */
static int graph_input(struct lower *L, int *c, int *h, int *w, const char **name)
{
	const Onnx__GraphProto *g = L->g;
	const Onnx__ValueInfoProto *in = NULL;
	for (size_t i = 0; i < g->n_input; i++) {
		if (!g->input[i]->name || is_initializer(g, g->input[i]->name))
			continue;
		if (in)
			return fail(L, "two data inputs (%s and %s); the engine feeds one image batch",
			            in->name, g->input[i]->name);
		in = g->input[i];
	}
	if (!in)
		return fail(L, "no data input");
	const Onnx__TypeProto *t = in->type;
	if (!t || t->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !t->tensor_type)
		return fail(L, "input %s is not a tensor", in->name);
	const Onnx__TypeProto__Tensor *tt = t->tensor_type;
	int et = tt->has_elem_type ? tt->elem_type : 0;
	if (et == ONNX__TENSOR_PROTO__DATA_TYPE__INT64) {
		/* A language model's token ids: (N, T), T fixed. */
		if (!tt->shape || tt->shape->n_dim != 2)
			return fail(L, "input %s is int64 but not 2-D (N, T) token ids", in->name);
		const Onnx__TensorShapeProto__Dimension *d0 = tt->shape->dim[0], *d1 = tt->shape->dim[1];
		L->decl_batch = d0->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE
		                ? d0->dim_value : -1;
		if (d1->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ||
		    d1->dim_value < 1 || d1->dim_value > MAX_DIM)
			return fail(L, "input %s: the sequence length (dimension 1) is not a fixed size; "
			            "export with dynamic_axes on the batch only", in->name);
		L->seq_T = (int)d1->dim_value;
		*c = L->seq_T;
		*h = *w = 1;
		*name = in->name;
		return 0;
	}
	if (et != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
		return fail(L, "input %s is %s; the engine trains float32 only", in->name,
		            dtype_name(et));
	if (!tt->shape || tt->shape->n_dim != 4)
		return fail(L, "input %s is not 4-D (N, C, H, W); export with an image-shaped "
		            "example (flatten inside the model)", in->name);
	int d[3];
	for (int i = 0; i < 4; i++) {
		const Onnx__TensorShapeProto__Dimension *dm = tt->shape->dim[i];
		int fixed = dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
		if (i == 0) {
			L->decl_batch = fixed ? dm->dim_value : -1;
			continue;
		}
		if (!fixed || dm->dim_value < 1 || dm->dim_value > MAX_DIM)
			return fail(L, "input %s: dimension %d is not a fixed size (dynamic shapes "
			            "other than the batch cannot be fixed)", in->name, i);
		d[i - 1] = (int)dm->dim_value;
	}
	if ((size_t)d[0] * d[1] * d[2] > MAX_ACT_FLOATS)
		return fail(L, "input %s: %dx%dx%d per sample is too large", in->name, d[0], d[1], d[2]);
	*c = d[0];
	*h = d[1];
	*w = d[2];
	*name = in->name;
	return 0;
}

static void free_lower(struct lower *L)
{
	for (int i = 0; i < L->nvals; i++) {
		free(L->vals[i].f);
		free(L->vals[i].i);
	}
	free(L->vals);
	free(L->copies);
	free(L->skip);
	free(L->tie_init);
	free(L->tie_off);
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

/* Lowers the graph's nodes in file order, each through its op's entry of
 * the table, counting the readers of the values each makes. */
static int lower_nodes(struct lower *L, const Onnx__GraphProto *g)
{
	for (size_t i = 0; i < g->n_node; i++) {
		const Onnx__NodeProto *nd = g->node[i];
		L->node_idx = (int)i;
		L->node = nd;
		if (!nd->op_type)
			return fail(L, "node has no op type");
		int k = nd->domain && *nd->domain && strcmp(nd->domain, "ai.onnx") ? -1
		        : op_index(nd->op_type);
		if (k < 0) {
			char list[512];
			sd_onnx_op_list(list, sizeof list);
			return fail(L, "op %s%s%s is not supported; supported ops: %s",
			            nd->domain && *nd->domain ? nd->domain : "",
			            nd->domain && *nd->domain ? ":" : "", nd->op_type, list);
		}
		if (L->skip[i])
			continue;
		int before = L->nvals;
		L->op_count[k]++;
		if (ops[k].fn(L, nd) < 0)
			return -1;
		/* Count the readers of the new values now: act_readers needs them. */
		for (int v = before; v < L->nvals; v++) {
			for (size_t j = i + 1; j < g->n_node; j++)
				for (size_t q = 0; q < g->node[j]->n_input; q++)
					if (!strcmp(g->node[j]->input[q], L->vals[v].name) && !L->skip[j])
						L->vals[v].consumers++;
			/* A MatMul's bias Add is skipped: its reads do not count, its
			 * output's do (counted above, as a value of this batch). */
			if (!strcmp(g->output[0]->name, L->vals[v].name))
				L->vals[v].consumers++;
		}
	}
	L->node = NULL;
	return 0;
}

/* The initializers' values into the model's parameters and buffers, a
 * transposed copy where the lowering asked for one (rows set). */
static void copy_initial_values(struct lower *L, struct sd_model *m)
{
	for (int i = 0; i < L->ncopies; i++) {
		const struct copy *cp = &L->copies[i];
		float *dst = (cp->to_buffers ? m->buffers : m->params) + cp->off;
		if (cp->rows) {
			for (int r = 0; r < cp->rows; r++)
				for (int q = 0; q < cp->cols; q++)
					dst[(size_t)q * cp->rows + r] = cp->src[(size_t)r * cp->cols + q];
		} else {
			memcpy(dst, cp->src, cp->count * sizeof(float));
		}
	}
}

static int lower_model(struct lower *L, const Onnx__ModelProto *mp, int max_batch)
{
	if (check_opset(L, mp) < 0)
		return -1;
	const Onnx__GraphProto *g = mp->graph;
	if (!g)
		return fail(L, "no graph");
	L->g = g;
	if (g->n_output != 1)
		return fail(L, "%zu graph outputs; the engine trains a model with one output, the "
		            "logits", g->n_output);
	for (size_t i = 0; i < g->n_node; i++)
		for (size_t j = 0; j < g->node[i]->n_input; j++)
			if (!g->node[i]->input[j])
				return fail(L, "node #%zu has a null input", i);
	int c = 0, h = 0, w = 0;
	const char *in_name = NULL;
	if (graph_input(L, &c, &h, &w, &in_name) < 0)
		return -1;
	L->m = sd_graph_new(base_name(L->file), c, h, w, max_batch);
	struct val *x = new_val(L, in_name);
	x->kind = V_ACT;
	x->act = 0;
	x->rank = 4;
	if (L->seq_T) {
		struct sd_model *m = L->m;
		m->seq_len = L->seq_T;
		m->acts[0].rank = 1;
		m->acts[0].dims[0] = L->seq_T;
		x->seq = 1;
		x->rank = x->ndim = 2;
		x->dims[0] = BATCH_DIM;
		x->dims[1] = L->seq_T;
	}
	for (size_t i = 0; i < g->n_initializer; i++) {
		const Onnx__TensorProto *t = g->initializer[i];
		if (!t->name || !*t->name)
			return fail(L, "initializer #%zu has no name", i);
		if (find_val(L, t->name) >= 0)
			return fail(L, "initializer %s is defined twice", t->name);
		if (tensor_val(L, t, t->name, "initializer") < 0)
			return -1;
		L->vals[L->nvals - 1].init = t->name;
	}
	L->skip = sd_calloc(g->n_node ? g->n_node : 1, sizeof *L->skip);
	/* Readers of the input and the initializers; the values the nodes make
	 * are counted as they are made (below). */
	for (int v = 0; v < L->nvals; v++)
		for (size_t j = 0; j < g->n_node; j++)
			for (size_t q = 0; q < g->node[j]->n_input; q++)
				if (!strcmp(g->node[j]->input[q], L->vals[v].name))
					L->vals[v].consumers++;
	if (lower_nodes(L, g) < 0)
		return -1;
	int out = find_val(L, g->output[0]->name);
	if (out < 0)
		return fail(L, "graph output %s is produced by no node", g->output[0]->name);
	const struct val *O = &L->vals[out];
	if (O->kind != V_ACT || O->act == 0)
		return fail(L, "graph output %s is not computed from the input", O->name);
	struct sd_model *m = L->m;
	const struct act *la = &m->acts[O->act];
	if (O->act != m->nacts - 1)
		return fail(L, "graph output %s is not the last value computed (a branch nothing "
		            "reads, or nodes after the output)", O->name);
	int classes = la->c;
	if (L->seq_T) {
		if (!O->seq || O->ndim != 3 || O->dims[1] != L->seq_T || O->dims[2] < 2)
			return fail(L, "graph output %s is not (N, %d, vocabulary) logits", O->name,
			            L->seq_T);
		classes = (int)O->dims[2];
	} else if (la->h != 1 || la->w != 1 || la->c < 2) {
		return fail(L, "graph output %s is %dx%dx%d per sample, not (classes >= 2) logits",
		            O->name, la->c, la->h, la->w);
	}
	for (int v = 1; v < L->nvals; v++)
		if (L->vals[v].kind == V_VIEW && L->vals[v].consumers == 0)
			return fail(L, "value %s (a Slice or Pad of an activation) is never used",
			            L->vals[v].name);
	for (int v = 1; v < L->nvals; v++)
		if (L->vals[v].kind == V_ACT && L->vals[v].consumers == 0 && v != out &&
		    L->vals[v].act != O->act)
			return fail(L, "value %s is computed and never used", L->vals[v].name);
	if (L->seq_T && !L->unfused) {
		sd_seq_fuse_attention(m);
		sd_seq_fuse_gelu(m);
	}
	if (sd_graph_finish(m, classes, L->why) < 0)
		return -1;
	copy_initial_values(L, m);
	return 0;
}

/* protobuf-c leaves an absent string NULL; the loader reads every name
 * as a string, so absent ones become "" (malloc'd, as protobuf-c frees
 * them with free()). */
static void fix_str(char **s)
{
	if (!*s) {
		*s = malloc(1);
		if (!*s)
			sd_oom();
		**s = 0;
	}
}

static void fix_names(Onnx__ModelProto *mp)
{
	for (size_t i = 0; i < mp->n_opset_import; i++)
		fix_str(&mp->opset_import[i]->domain);
	Onnx__GraphProto *g = mp->graph;
	if (!g)
		return;
	for (size_t i = 0; i < g->n_node; i++) {
		Onnx__NodeProto *nd = g->node[i];
		fix_str(&nd->name);
		fix_str(&nd->op_type);
		fix_str(&nd->domain);
		for (size_t j = 0; j < nd->n_attribute; j++)
			fix_str(&nd->attribute[j]->name);
	}
	for (size_t i = 0; i < g->n_initializer; i++)
		fix_str(&g->initializer[i]->name);
	for (size_t i = 0; i < g->n_input; i++)
		fix_str(&g->input[i]->name);
	for (size_t i = 0; i < g->n_output; i++)
		fix_str(&g->output[i]->name);
}

/* The lowering's copies that came from initializers, as bindings
 * (onnx-export.h), names copied out of the decoded file. */
static void keep_bindings(const struct lower *L, struct sd_onnx_binding **bind, int *nbind)
{
	*bind = sd_calloc(L->ncopies ? (size_t)L->ncopies : 1, sizeof **bind);
	*nbind = 0;
	for (int i = 0; i < L->ncopies; i++) {
		const struct copy *cp = &L->copies[i];
		if (!cp->init)
			continue;
		struct sd_onnx_binding *b = &(*bind)[(*nbind)++];
		b->init = strdup(cp->init);
		if (!b->init)
			sd_oom();
		b->to_buffers = cp->to_buffers;
		b->off = cp->off;
		b->count = cp->count;
		b->rows = cp->rows;
		b->cols = cp->cols;
	}
}

/* The signs of an eval-mode export in graph g (struct sd_onnx_info). */
static void eval_export_signs(const Onnx__GraphProto *g, struct sd_onnx_info *info)
{
	for (size_t i = 0; i < g->n_node; i++) {
		const Onnx__NodeProto *nd = g->node[i];
		if (!nd->op_type)
			continue;
		if (!strcmp(nd->op_type, "BatchNormalization")) {
			size_t outs = 0;
			for (size_t k = 0; k < nd->n_output; k++)
				outs += nd->output[k] && *nd->output[k];
			info->bn_inference += outs <= 1;
		} else if (!strcmp(nd->op_type, "Identity") && nd->n_input >= 1 && nd->input[0]) {
			for (size_t k = 0; k < g->n_initializer; k++)
				if (g->initializer[k]->name && !strcmp(g->initializer[k]->name, nd->input[0])) {
					info->init_aliases++;
					break;
				}
		}
	}
}

int sd_onnx_eval_export_warning(const struct sd_onnx_info *info, const char *file, char *buf,
                                size_t len)
{
	buf[0] = 0;
	if (!info->bn_inference && !info->init_aliases)
		return 0;
	char signs[160];
	if (info->bn_inference && info->init_aliases)
		snprintf(signs, sizeof signs, "%d BatchNormalization node%s in inference form, %d "
		         "initializer%s merged into Identity aliases", info->bn_inference,
		         info->bn_inference == 1 ? "" : "s", info->init_aliases,
		         info->init_aliases == 1 ? "" : "s");
	else if (info->bn_inference)
		snprintf(signs, sizeof signs, "%d BatchNormalization node%s in inference form",
		         info->bn_inference, info->bn_inference == 1 ? "" : "s");
	else
		snprintf(signs, sizeof signs, "%d initializer%s merged into Identity aliases",
		         info->init_aliases, info->init_aliases == 1 ? "" : "s");
	snprintf(buf, len, "%s: looks exported in eval mode (%s): such an export has no Dropout "
	         "and merges equal initializers, which then train as one; for training, export with "
	         "training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False", file, signs);
	return 1;
}

static int build(struct sd_model **out, const uint8_t *bytes, size_t len, const char *file,
                 int max_batch, int *op_count, int *nodes, struct sd_onnx_binding **bind,
                 int *nbind, struct sd_onnx_info *signs, char **why)
{
	*out = NULL;
	if (!file)
		file = "(model)";
	if (sd_conv2d_check_env(why) < 0)
		return -1;
	const char *fuse = getenv("SPOTDECK_FUSE");
	if (fuse && *fuse && strcmp(fuse, "on") && strcmp(fuse, "off"))
		return sd_why(why, "SPOTDECK_FUSE is '%.40s'; expected on or off", fuse);
	if (len > SD_ONNX_MAX_BYTES)
		return sd_why(why, "%s: %zu bytes, more than the %zu an ONNX model may have here",
		              file, len, SD_ONNX_MAX_BYTES);
	if (max_batch < 1)
		return sd_why(why, "%s: batch %d", file, max_batch);
	Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, len, bytes);
	if (!mp)
		return sd_why(why, "%s: not an ONNX model (protobuf decoding failed: truncated or "
		              "not a protobuf ModelProto)", file);
	fix_names(mp);
	struct lower L;
	memset(&L, 0, sizeof L);
	L.file = file;
	L.why = why;
	L.decl_batch = -1;
	L.softmax_out = -1;
	L.unfused = fuse && !strcmp(fuse, "off");
	int rc = lower_model(&L, mp, max_batch);
	if (rc == 0) {
		*out = L.m;
		if (op_count)
			memcpy(op_count, L.op_count, sizeof L.op_count);
		if (nodes)
			*nodes = (int)mp->graph->n_node;
		if (signs)
			eval_export_signs(mp->graph, signs);
		if (bind)
			keep_bindings(&L, bind, nbind);
	} else {
		sd_model_destroy(L.m);
	}
	free_lower(&L);
	onnx__model_proto__free_unpacked(mp, NULL);
	return rc;
}

int sd_model_create_onnx(struct sd_model **out, const uint8_t *bytes, size_t len,
                         const char *file, int max_batch, char **why)
{
	return build(out, bytes, len, file, max_batch, NULL, NULL, NULL, NULL, NULL, why);
}

int sd_onnx_check(const uint8_t *bytes, size_t len, const char *file,
                  struct sd_onnx_info *info, char **why)
{
	struct sd_model *m;
	memset(info, 0, sizeof *info);
	if (build(&m, bytes, len, file, 1, info->op_count, &info->nodes, NULL, NULL, info, why) < 0)
		return -1;
	info->c = m->c;
	info->h = m->h;
	info->w = m->w;
	info->classes = m->classes;
	info->macs = m->flops;
	info->params = m->nparams;
	info->buffers = m->nbuffers;
	info->engine_nodes = m->nnodes;
	sd_model_destroy(m);
	return 0;
}

int sd_onnx_bindings(struct sd_model **out, const uint8_t *bytes, size_t len, const char *file,
                     struct sd_onnx_binding **bind, int *nbind, char **why)
{
	*bind = NULL;
	*nbind = 0;
	return build(out, bytes, len, file, 1, NULL, NULL, bind, nbind, NULL, why);
}

void sd_onnx_bindings_free(struct sd_onnx_binding *bind, int nbind)
{
	for (int i = 0; i < nbind; i++)
		free(bind[i].init);
	free(bind);
}
