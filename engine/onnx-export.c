/* engine/onnx-export.c - trained models as ONNX files (onnx-export.h).
 *
 * A built-in model's graph is built here as protobuf-c messages, every
 * allocation kept in an arena freed once the ModelProto is packed, since
 * these messages are made by hand and not by protobuf-c's unpack (whose
 * free function would not know them).  A file-trained model's file is
 * unpacked, its initializers' data replaced, and packed again. */
#include "engine/onnx-export.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <protobuf-c/protobuf-c.h>

#include "src/base/errors.h"
#include "engine/model-graph.h"
#include "engine/model.h"
#include "onnx/onnx.pb-c.h"

/* ONNX raw_data is little-endian; floats are copied as they are in memory. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "onnx-export.c writes float32 raw_data in memory order, which ONNX defines as little-endian"
#endif

/* Opset 13 has every op written here with the inputs used here (Slice's
 * steps and Pad's pads as inputs); IR version 7 is the one ONNX pairs with
 * opset 13 (onnx/helper.py's VERSION_TABLE, release 1.8). */
#define EXPORT_OPSET 13
#define EXPORT_IR_VERSION 7

void sd_export_free(struct sd_export *e)
{
	if (!e)
		return;
	free(e->onnx);
	for (int i = 0; i < e->ntensors; i++) {
		free(e->tensors[i].name);
		free(e->tensors[i].data);
	}
	free(e->tensors);
	memset(e, 0, sizeof *e);
}

static char *dup_str(const char *s)
{
	char *d = strdup(s);
	if (!d)
		sd_oom();
	return d;
}

static void add_tensor(struct sd_export *out, const char *name, int ndim, const int64_t *dims,
                       const float *data, size_t count)
{
	out->tensors = realloc(out->tensors, ((size_t)out->ntensors + 1) * sizeof *out->tensors);
	if (!out->tensors)
		sd_oom();
	struct sd_export_tensor *t = &out->tensors[out->ntensors++];
	memset(t, 0, sizeof *t);
	t->name = dup_str(name);
	t->ndim = ndim;
	for (int i = 0; i < ndim; i++)
		t->dims[i] = dims[i];
	t->count = count;
	t->data = sd_malloc((count ? count : 1) * sizeof(float));
	memcpy(t->data, data, count * sizeof(float));
}

/* ------------------------------------------------------------ the arena */

struct arena {
	void **p;
	size_t n, cap;
};

static void *a_keep(struct arena *a, void *p)
{
	if (a->n == a->cap) {
		a->cap = a->cap ? 2 * a->cap : 256;
		a->p = realloc(a->p, a->cap * sizeof *a->p);
		if (!a->p)
			sd_oom();
	}
	a->p[a->n++] = p;
	return p;
}

static void *a_alloc(struct arena *a, size_t bytes)
{
	return a_keep(a, sd_calloc(1, bytes ? bytes : 1));
}

static char *a_printf(struct arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *a_printf(struct arena *a, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = NULL;
	if (vasprintf(&s, fmt, ap) < 0)
		sd_oom();
	va_end(ap);
	return a_keep(a, s);
}

static void a_free(struct arena *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->p[i]);
	free(a->p);
}

/* ------------------------------------------------------------ the graph */

struct gen {
	struct arena a;
	const struct sd_model *m;
	Onnx__GraphProto *g;
	size_t cap_node, cap_init;
	char **cur;          /* per activation: the ONNX value holding it now */
	int *rank;           /* per activation: 4 (N, C, H, W) or 2 (N, F) */
	struct sd_export *out;
	char **why;
};

static Onnx__NodeProto *g_node(struct gen *G, const char *op, const char *name, int nin,
                               const char *const *in, const char *out)
{
	Onnx__GraphProto *g = G->g;
	if (g->n_node == G->cap_node) {
		G->cap_node = G->cap_node ? 2 * G->cap_node : 64;
		g->node = realloc(g->node, G->cap_node * sizeof *g->node);
		if (!g->node)
			sd_oom();
	}
	Onnx__NodeProto *n = a_alloc(&G->a, sizeof *n);
	onnx__node_proto__init(n);
	n->op_type = a_printf(&G->a, "%s", op);
	n->name = a_printf(&G->a, "%s", name);
	n->n_input = (size_t)nin;
	n->input = a_alloc(&G->a, (size_t)nin * sizeof *n->input);
	for (int i = 0; i < nin; i++)
		n->input[i] = a_printf(&G->a, "%s", in[i]);
	n->n_output = 1;
	n->output = a_alloc(&G->a, sizeof *n->output);
	n->output[0] = a_printf(&G->a, "%s", out);
	g->node[g->n_node++] = n;
	return n;
}

static Onnx__AttributeProto *g_attr(struct gen *G, Onnx__NodeProto *n, const char *name)
{
	Onnx__AttributeProto **old = n->attribute;
	n->attribute = a_alloc(&G->a, (n->n_attribute + 1) * sizeof *n->attribute);
	if (n->n_attribute)
		memcpy(n->attribute, old, n->n_attribute * sizeof *old);
	Onnx__AttributeProto *at = a_alloc(&G->a, sizeof *at);
	onnx__attribute_proto__init(at);
	at->name = a_printf(&G->a, "%s", name);
	n->attribute[n->n_attribute++] = at;
	return at;
}

static void attr_int(struct gen *G, Onnx__NodeProto *n, const char *name, int64_t v)
{
	Onnx__AttributeProto *at = g_attr(G, n, name);
	at->has_type = 1;
	at->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
	at->has_i = 1;
	at->i = v;
}

static void attr_float(struct gen *G, Onnx__NodeProto *n, const char *name, float v)
{
	Onnx__AttributeProto *at = g_attr(G, n, name);
	at->has_type = 1;
	at->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
	at->has_f = 1;
	at->f = v;
}

static void attr_ints(struct gen *G, Onnx__NodeProto *n, const char *name, int count, int64_t v0,
                      int64_t v1, int64_t v2, int64_t v3)
{
	Onnx__AttributeProto *at = g_attr(G, n, name);
	at->has_type = 1;
	at->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
	at->n_ints = (size_t)count;
	at->ints = a_alloc(&G->a, 4 * sizeof *at->ints);
	int64_t v[4] = { v0, v1, v2, v3 };
	memcpy(at->ints, v, (size_t)count * sizeof *at->ints);
}

/* A float32 initializer named name with the given dims and data, also
 * recorded among the exported tensors. */
static void g_init(struct gen *G, const char *name, int ndim, const int64_t *dims,
                   const float *data, size_t count)
{
	Onnx__GraphProto *g = G->g;
	if (g->n_initializer == G->cap_init) {
		G->cap_init = G->cap_init ? 2 * G->cap_init : 64;
		g->initializer = realloc(g->initializer, G->cap_init * sizeof *g->initializer);
		if (!g->initializer)
			sd_oom();
	}
	Onnx__TensorProto *t = a_alloc(&G->a, sizeof *t);
	onnx__tensor_proto__init(t);
	t->name = a_printf(&G->a, "%s", name);
	t->n_dims = (size_t)ndim;
	t->dims = a_alloc(&G->a, (size_t)ndim * sizeof *t->dims);
	memcpy(t->dims, dims, (size_t)ndim * sizeof *dims);
	t->has_data_type = 1;
	t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
	t->has_raw_data = 1;
	t->raw_data.len = count * sizeof(float);
	t->raw_data.data = a_alloc(&G->a, t->raw_data.len);
	memcpy(t->raw_data.data, data, t->raw_data.len);
	g->initializer[g->n_initializer++] = t;
	add_tensor(G->out, name, ndim, dims, data, count);
}

/* The parameter tensor at offset off, named and shaped as in the model's
 * table, as an initializer; its name. */
static const char *g_param(struct gen *G, size_t off)
{
	int nt;
	const struct sd_tensor_info *ti = sd_model_tensors(G->m, &nt);
	for (int i = 0; i < nt; i++) {
		if (ti[i].offset != off)
			continue;
		int64_t dims[4];
		for (int d = 0; d < ti[i].ndim; d++)
			dims[d] = ti[i].shape[d];
		g_init(G, ti[i].name, ti[i].ndim, dims, G->m->params + off, ti[i].count);
		return ti[i].name;
	}
	return NULL;
}

/* A Constant node making a 1-D int64 tensor of count values; its output. */
static const char *g_const_ints(struct gen *G, const char *name, int count, const int64_t *v)
{
	Onnx__NodeProto *n = g_node(G, "Constant", name, 0, NULL, name);
	Onnx__AttributeProto *at = g_attr(G, n, "value");
	at->has_type = 1;
	at->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
	Onnx__TensorProto *t = a_alloc(&G->a, sizeof *t);
	onnx__tensor_proto__init(t);
	t->n_dims = 1;
	t->dims = a_alloc(&G->a, sizeof *t->dims);
	t->dims[0] = count;
	t->has_data_type = 1;
	t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
	t->n_int64_data = (size_t)count;
	t->int64_data = a_alloc(&G->a, (size_t)count * sizeof *t->int64_data);
	memcpy(t->int64_data, v, (size_t)count * sizeof *v);
	at->t = t;
	return n->output[0];
}

/* value_info of a float32 tensor: (N, d1[, d2, d3]) with N symbolic. */
static Onnx__ValueInfoProto *g_value_info(struct gen *G, const char *name, int ndim, int d1,
                                          int d2, int d3)
{
	Onnx__ValueInfoProto *v = a_alloc(&G->a, sizeof *v);
	onnx__value_info_proto__init(v);
	v->name = a_printf(&G->a, "%s", name);
	Onnx__TypeProto *tp = a_alloc(&G->a, sizeof *tp);
	onnx__type_proto__init(tp);
	Onnx__TypeProto__Tensor *tt = a_alloc(&G->a, sizeof *tt);
	onnx__type_proto__tensor__init(tt);
	tt->has_elem_type = 1;
	tt->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
	Onnx__TensorShapeProto *sh = a_alloc(&G->a, sizeof *sh);
	onnx__tensor_shape_proto__init(sh);
	sh->n_dim = (size_t)ndim;
	sh->dim = a_alloc(&G->a, (size_t)ndim * sizeof *sh->dim);
	int dims[4] = { 0, d1, d2, d3 };
	for (int i = 0; i < ndim; i++) {
		Onnx__TensorShapeProto__Dimension *d = a_alloc(&G->a, sizeof *d);
		onnx__tensor_shape_proto__dimension__init(d);
		if (i == 0) {
			d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
			d->dim_param = a_printf(&G->a, "N");
		} else {
			d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
			d->dim_value = dims[i];
		}
		sh->dim[i] = d;
	}
	tt->shape = sh;
	tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
	tp->tensor_type = tt;
	v->type = tp;
	return v;
}

/* The ResNets' option-A shortcut of node n: activation in2 subsampled by
 * n->s and zero-padded to the channels of n->in; the value holding it. */
static const char *g_shortcut(struct gen *G, const struct node *n)
{
	const struct act *a = &G->m->acts[n->in], *b = &G->m->acts[n->in2];
	const char *x = G->cur[n->in2];
	if (n->s > 1) {
		/* Rows 0, s, ..., (h - 1) s: exactly h of them, as the engine
		 * reads b[y s][x s] for y < h. */
		int64_t starts[2] = { 0, 0 }, ends[2] = { (int64_t)a->h * n->s, (int64_t)a->w * n->s };
		int64_t axes[2] = { 2, 3 }, steps[2] = { n->s, n->s };
		const char *in[5] = {
			x,
			g_const_ints(G, a_printf(&G->a, "%s.slice_starts", n->name), 2, starts),
			g_const_ints(G, a_printf(&G->a, "%s.slice_ends", n->name), 2, ends),
			g_const_ints(G, a_printf(&G->a, "%s.slice_axes", n->name), 2, axes),
			g_const_ints(G, a_printf(&G->a, "%s.slice_steps", n->name), 2, steps),
		};
		char *out = a_printf(&G->a, "%s.subsample", n->name);
		g_node(G, "Slice", out, 5, in, out);
		x = out;
	}
	if (a->c > b->c) {
		int64_t before = (a->c - b->c) / 2, after = a->c - b->c - before;
		int64_t pads[8] = { 0, before, 0, 0, 0, after, 0, 0 };
		const char *in[2] = {
			x, g_const_ints(G, a_printf(&G->a, "%s.pads", n->name), 8, pads),
		};
		char *out = a_printf(&G->a, "%s.pad", n->name);
		Onnx__NodeProto *p = g_node(G, "Pad", out, 2, in, out);
		Onnx__AttributeProto *at = g_attr(G, p, "mode");
		at->has_type = 1;
		at->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
		at->has_s = 1;
		at->s.data = (uint8_t *)a_printf(&G->a, "constant");
		at->s.len = strlen("constant");
		x = out;
	}
	return x;
}

static int g_fail(struct gen *G, const struct node *n, const char *what)
{
	return sd_why(G->why, "model %s: node %s: %s", G->m->name, n->name, what);
}

static int g_node_of(struct gen *G, const struct node *n)
{
	const struct sd_model *m = G->m;
	const char *x = G->cur[n->in];
	switch (n->op) {
	case OP_CONV: {
		const char *in[3] = { x, g_param(G, n->w_off), NULL };
		int nin = 2;
		if (n->b_off != SD_NO_TENSOR)
			in[nin++] = g_param(G, n->b_off);
		if (!in[1] || (nin == 3 && !in[2]))
			return g_fail(G, n, "a parameter is missing from the tensor table");
		Onnx__NodeProto *o = g_node(G, "Conv", n->name, nin, in, n->name);
		attr_ints(G, o, "kernel_shape", 2, n->conv.r, n->conv.r, 0, 0);
		attr_ints(G, o, "strides", 2, n->conv.stride, n->conv.stride, 0, 0);
		attr_ints(G, o, "pads", 4, n->conv.pad, n->conv.pad, n->conv.pad, n->conv.pad);
		break;
	}
	case OP_BN: {
		int c = m->acts[n->in].c;
		int64_t dims[1] = { c };
		char *rm = a_printf(&G->a, "%s.running_mean", n->name);
		char *rv = a_printf(&G->a, "%s.running_var", n->name);
		const char *in[5] = { x, g_param(G, n->w_off), g_param(G, n->b_off), rm, rv };
		if (!in[1] || !in[2])
			return g_fail(G, n, "a parameter is missing from the tensor table");
		g_init(G, rm, 1, dims, m->buffers + n->rm_off, (size_t)c);
		g_init(G, rv, 1, dims, m->buffers + n->rv_off, (size_t)c);
		Onnx__NodeProto *o = g_node(G, "BatchNormalization", n->name, 5, in, n->name);
		attr_float(G, o, "epsilon", n->bn_eps);
		attr_float(G, o, "momentum", 1.0f - n->bn_momentum);
		break;
	}
	case OP_RELU:
		g_node(G, "Relu", n->name, 1, &x, n->name);
		break;
	case OP_MAXPOOL: {
		Onnx__NodeProto *o = g_node(G, "MaxPool", n->name, 1, &x, n->name);
		attr_ints(G, o, "kernel_shape", 2, n->k, n->k, 0, 0);
		attr_ints(G, o, "strides", 2, n->s, n->s, 0, 0);
		if (n->pad)
			attr_ints(G, o, "pads", 4, n->pad, n->pad, n->pad, n->pad);
		break;
	}
	case OP_AVGPOOL: {
		const struct act *a = &m->acts[n->in];
		if (n->k == a->h && n->k == a->w) {
			g_node(G, "GlobalAveragePool", n->name, 1, &x, n->name);
		} else {
			Onnx__NodeProto *o = g_node(G, "AveragePool", n->name, 1, &x, n->name);
			attr_ints(G, o, "kernel_shape", 2, n->k, n->k, 0, 0);
			attr_ints(G, o, "strides", 2, n->s, n->s, 0, 0);
		}
		break;
	}
	case OP_LINEAR: {
		if (G->rank[n->in] == 4) {
			char *f = a_printf(&G->a, "%s.flatten", n->name);
			Onnx__NodeProto *o = g_node(G, "Flatten", f, 1, &x, f);
			attr_int(G, o, "axis", 1);
			x = f;
		}
		const char *in[3] = { x, g_param(G, n->w_off), NULL };
		int nin = 2;
		if (n->b_off != SD_NO_TENSOR)
			in[nin++] = g_param(G, n->b_off);
		if (!in[1] || (nin == 3 && !in[2]))
			return g_fail(G, n, "a parameter is missing from the tensor table");
		Onnx__NodeProto *o = g_node(G, "Gemm", n->name, nin, in, n->name);
		attr_int(G, o, "transB", 1);
		G->cur[n->out] = a_printf(&G->a, "%s", n->name);
		G->rank[n->out] = 2;
		return 0;
	}
	case OP_ADD: {
		const struct act *a = &m->acts[n->in], *b = &m->acts[n->in2];
		if (n->s < 1 || b->c > a->c || b->h <= (a->h - 1) * n->s ||
		    b->w <= (a->w - 1) * n->s)
			return g_fail(G, n, "a shortcut the engine's add cannot have");
		const char *in[2] = { x, g_shortcut(G, n) };
		g_node(G, "Add", n->name, 2, in, n->name);
		break;
	}
	case OP_ACT:
	case OP_CONCAT:
	case OP_GCONV:
	case OP_BINARY:
	case OP_DROPOUT:
	case OP_SEQ:
		return g_fail(G, n, "activations, concatenations, general convolutions, "
		                    "arithmetic, dropout and language-model ops come only from ONNX files; export the "
		                    "model with its file (sd_onnx_export_file)");
	}
	/* Batch-norm and ReLU keep their input's rank; the rest make maps. */
	G->rank[n->out] = n->op == OP_BN || n->op == OP_RELU ? G->rank[n->in] : 4;
	G->cur[n->out] = a_printf(&G->a, "%s", n->name);
	return 0;
}

int sd_onnx_export_model(const struct sd_model *m, const char *producer_version,
                         struct sd_export *out, char **why)
{
	memset(out, 0, sizeof *out);
	struct gen G;
	memset(&G, 0, sizeof G);
	G.m = m;
	G.out = out;
	G.why = why;
	G.cur = a_alloc(&G.a, (size_t)m->nacts * sizeof *G.cur);
	G.rank = a_alloc(&G.a, (size_t)m->nacts * sizeof *G.rank);
	G.cur[0] = a_printf(&G.a, "input");
	G.rank[0] = 4;
	Onnx__GraphProto *g = a_alloc(&G.a, sizeof *g);
	onnx__graph_proto__init(g);
	g->name = a_printf(&G.a, "%s", m->name);
	G.g = g;
	int rc = 0;
	for (int i = 0; rc == 0 && i < m->nnodes; i++)
		rc = g_node_of(&G, &m->nodes[i]);
	const int last = m->nacts - 1;
	if (rc == 0 && G.rank[last] == 4) {
		char *f = a_printf(&G.a, "logits");
		Onnx__NodeProto *o = g_node(&G, "Flatten", f, 1, (const char *const *)&G.cur[last], f);
		attr_int(&G, o, "axis", 1);
		G.cur[last] = f;
	}
	uint8_t *buf = NULL;
	size_t len = 0;
	if (rc == 0) {
		g->n_input = 1;
		g->input = a_alloc(&G.a, sizeof *g->input);
		g->input[0] = g_value_info(&G, "input", 4, m->c, m->h, m->w);
		g->n_output = 1;
		g->output = a_alloc(&G.a, sizeof *g->output);
		g->output[0] = g_value_info(&G, G.cur[last], 2, m->classes, 0, 0);
		Onnx__OperatorSetIdProto op = ONNX__OPERATOR_SET_ID_PROTO__INIT;
		op.domain = a_printf(&G.a, "%s", "");
		op.has_version = 1;
		op.version = EXPORT_OPSET;
		Onnx__OperatorSetIdProto *ops[1] = { &op };
		Onnx__ModelProto mp = ONNX__MODEL_PROTO__INIT;
		mp.has_ir_version = 1;
		mp.ir_version = EXPORT_IR_VERSION;
		mp.n_opset_import = 1;
		mp.opset_import = ops;
		mp.producer_name = a_printf(&G.a, "spotdeck");
		if (producer_version)
			mp.producer_version = a_printf(&G.a, "%s", producer_version);
		mp.graph = g;
		len = onnx__model_proto__get_packed_size(&mp);
		buf = sd_malloc(len ? len : 1);
		if (onnx__model_proto__pack(&mp, buf) != len)
			rc = sd_why(why, "model %s: protobuf-c packed a size other than it measured",
			            m->name);
	}
	/* The arrays grown with realloc belong to the graph, not the arena. */
	free(g->node);
	free(g->initializer);
	a_free(&G.a);
	if (rc < 0) {
		free(buf);
		sd_export_free(out);
		return -1;
	}
	out->onnx = buf;
	out->onnx_len = len;
	return 0;
}

/* ------------------------------------------------------------ a file's graph */

int sd_onnx_export_file(const uint8_t *bytes, size_t len, const char *file, const float *params,
                        size_t nparams, const float *buffers, size_t nbuffers,
                        struct sd_export *out, char **why)
{
	memset(out, 0, sizeof *out);
	struct sd_model *m = NULL;
	struct sd_onnx_binding *bind = NULL;
	int nbind = 0;
	if (sd_onnx_bindings(&m, bytes, len, file, &bind, &nbind, why) < 0)
		return -1;
	size_t mp_params = sd_model_param_count(m), mp_buffers = sd_model_buffer_count(m);
	sd_model_destroy(m);
	if (mp_params != nparams || mp_buffers != nbuffers) {
		sd_onnx_bindings_free(bind, nbind);
		return sd_why(why, "%s: the model has %zu parameters and %zu buffer values, the "
		              "trained state %zu and %zu (another file?)", file, mp_params,
		              mp_buffers, nparams, nbuffers);
	}
	/* Decoded again: sd_onnx_bindings's copy is gone, and this one is
	 * changed and packed. */
	Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, len, bytes);
	if (!mp || !mp->graph) {
		if (mp)
			onnx__model_proto__free_unpacked(mp, NULL);
		sd_onnx_bindings_free(bind, nbind);
		return sd_why(why, "%s: not an ONNX model", file);
	}
	int rc = 0;
	float *tmp = NULL;
	Onnx__GraphProto *g = mp->graph;
	for (size_t i = 0; rc == 0 && i < g->n_initializer; i++) {
		Onnx__TensorProto *t = g->initializer[i];
		if (!t->name)
			continue;
		const struct sd_onnx_binding *first = NULL;
		for (int k = 0; rc == 0 && k < nbind; k++) {
			const struct sd_onnx_binding *b = &bind[k];
			if (strcmp(b->init, t->name))
				continue;
			const float *src = (b->to_buffers ? buffers : params) + b->off;
			float *v = sd_malloc((b->count ? b->count : 1) * sizeof(float));
			if (b->rows) {
				/* The engine holds the (rows, cols) initializer as
				 * (cols, rows): transpose it back. */
				for (int r = 0; r < b->rows; r++)
					for (int q = 0; q < b->cols; q++)
						v[(size_t)r * b->cols + q] = src[(size_t)q * b->rows + r];
			} else {
				memcpy(v, src, b->count * sizeof(float));
			}
			if (!first) {
				first = b;
				tmp = v;
			} else {
				if (b->count != first->count ||
				    memcmp(v, tmp, b->count * sizeof(float)))
					rc = sd_why(why, "%s: initializer %s feeds two nodes whose copies "
					            "trained to different values; the graph has one place "
					            "for it", file, t->name);
				free(v);
			}
		}
		if (rc < 0 || !first) {
			free(tmp);
			tmp = NULL;
			continue;
		}
		size_t count = 1;
		for (size_t d = 0; d < t->n_dims; d++)
			count *= (size_t)t->dims[d];
		if (t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT || count != first->count ||
		    t->n_dims > SD_EXPORT_MAX_DIMS) {
			rc = sd_why(why, "%s: initializer %s is not the float32 tensor of %zu values "
			            "the model was built from", file, t->name, first->count);
			free(tmp);
			tmp = NULL;
			break;
		}
		free(t->float_data);
		t->float_data = NULL;
		t->n_float_data = 0;
		free(t->raw_data.data);
		t->raw_data.data = (uint8_t *)tmp;
		t->raw_data.len = count * sizeof(float);
		t->has_raw_data = 1;
		tmp = NULL;
		add_tensor(out, t->name, (int)t->n_dims, t->dims, (const float *)t->raw_data.data,
		           count);
	}
	if (rc == 0) {
		size_t n = onnx__model_proto__get_packed_size(mp);
		out->onnx = sd_malloc(n ? n : 1);
		out->onnx_len = n;
		if (onnx__model_proto__pack(mp, out->onnx) != n)
			rc = sd_why(why, "%s: protobuf-c packed a size other than it measured", file);
	}
	onnx__model_proto__free_unpacked(mp, NULL);
	sd_onnx_bindings_free(bind, nbind);
	if (rc < 0)
		sd_export_free(out);
	return rc;
}
