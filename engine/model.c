/* engine/model.c - model graphs: a list of nodes over activation buffers,
 * run forward in order and backward in reverse.  See model.h for the models. */
#include "engine/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "src/base/errors.h"
#include "engine/layers.h"
#include "engine/matmul-dnnl.h"
#include "engine/model-graph.h"
#include "src/base/rng.h"

const char *const sd_model_names[] = { "mlp", "cnn", "resnet20", "resnet32", NULL };

#define NONE SD_NO_TENSOR

static size_t act_floats(const struct act *a) { return (size_t)a->c * a->h * a->w; }

int sd_graph_act(struct sd_model *m, int c, int h, int w)
{
	if (m->nacts == m->cap_acts) {
		m->cap_acts = m->cap_acts ? 2 * m->cap_acts : 32;
		m->acts = realloc(m->acts, m->cap_acts * sizeof *m->acts);
		if (!m->acts)
			sd_oom();
	}
	struct act *a = &m->acts[m->nacts];
	memset(a, 0, sizeof *a);
	a->c = c; a->h = h; a->w = w;
	a->blk = 1;
	return m->nacts++;
}

int sd_graph_seq_act(struct sd_model *m, int rank, const int *dims)
{
	int c = 1;
	for (int k = 0; k < rank; k++)
		c *= dims[k];
	int id = sd_graph_act(m, c, 1, 1);
	struct act *a = &m->acts[id];
	a->rank = rank;
	for (int k = 0; k < rank; k++)
		a->dims[k] = dims[k];
	return id;
}

struct node *sd_graph_node(struct sd_model *m, enum sd_op op, int in, const char *name)
{
	if (m->nnodes == m->cap_nodes) {
		m->cap_nodes = m->cap_nodes ? 2 * m->cap_nodes : 32;
		m->nodes = realloc(m->nodes, m->cap_nodes * sizeof *m->nodes);
		if (!m->nodes)
			sd_oom();
	}
	struct node *n = &m->nodes[m->nnodes++];
	memset(n, 0, sizeof *n);
	n->op = op;
	n->in = in;
	n->in2 = -1;
	n->w_off = n->b_off = n->rm_off = n->rv_off = NONE;
	snprintf(n->name, sizeof n->name, "%s", name);
	m->acts[in].consumers++;
	return n;
}

/* Reserves a parameter tensor and records it in the tensor table. */
size_t sd_graph_tensor(struct sd_model *m, const char *node, const char *what,
                       int ndim, int d0, int d1, int d2, int d3)
{
	if (m->ntensors == m->cap_tensors) {
		m->cap_tensors = m->cap_tensors ? 2 * m->cap_tensors : 32;
		m->tensors = realloc(m->tensors, m->cap_tensors * sizeof *m->tensors);
		if (!m->tensors)
			sd_oom();
	}
	struct sd_tensor_info *t = &m->tensors[m->ntensors++];
	memset(t, 0, sizeof *t);
	snprintf(t->name, sizeof t->name, "%s.%s", node, what);
	int dims[4] = { d0, d1, d2, d3 };
	t->ndim = ndim;
	t->count = 1;
	for (int i = 0; i < ndim; i++) {
		t->shape[i] = dims[i];
		t->count *= (size_t)dims[i];
	}
	t->offset = m->nparams;
	m->nparams += t->count;
	return t->offset;
}

static int conv(struct sd_model *m, int in, int k, int r, int stride, int pad, const char *name)
{
	struct act *a = &m->acts[in];
	struct sd_conv2d_shape s;
	if (sd_conv2d_shape_init(&s, 1, a->c, a->h, a->w, k, r, stride, pad) < 0)
		return -1;
	int c = a->c, oh = s.oh, ow = s.ow;
	int out = sd_graph_act(m, k, oh, ow);
	struct node *n = sd_graph_node(m, OP_CONV, in, name);
	n->out = out;
	n->conv = s;
	n->w_off = sd_graph_tensor(m, name, "weight", 4, k, c, r, r);
	m->flops += (double)k * c * r * r * oh * ow;
	return out;
}

/* Convolutions followed by batch-norm carry no bias (it would be cancelled). */
static int conv_bias(struct sd_model *m, int in, int k, int r, int stride, int pad, const char *name)
{
	int out = conv(m, in, k, r, stride, pad, name);
	if (out >= 0)
		m->nodes[m->nnodes - 1].b_off = sd_graph_tensor(m, name, "bias", 1, k, 0, 0, 0);
	return out;
}

static int bn(struct sd_model *m, int in, const char *name)
{
	return sd_graph_bn(m, in, name, SD_BN_MOMENTUM, SD_BN_EPS);
}

int sd_graph_bn(struct sd_model *m, int in, const char *name, float momentum, float eps)
{
	struct act *a = &m->acts[in];
	int c = a->c, h = a->h, w = a->w;
	int out = sd_graph_act(m, c, h, w);
	struct node *n = sd_graph_node(m, OP_BN, in, name);
	n->out = out;
	n->w_off = sd_graph_tensor(m, name, "gamma", 1, c, 0, 0, 0);
	n->b_off = sd_graph_tensor(m, name, "beta", 1, c, 0, 0, 0);
	n->rm_off = m->nbuffers;
	n->rv_off = m->nbuffers + c;
	m->nbuffers += 2 * (size_t)c;
	n->bn_mean = sd_calloc(c, sizeof(float));
	n->bn_invstd = sd_calloc(c, sizeof(float));
	n->bn_momentum = momentum;
	n->bn_eps = eps;
	return out;
}

/* ReLU works in place: its backward needs only its output. */
static int relu(struct sd_model *m, int in, const char *name)
{
	struct node *n = sd_graph_node(m, OP_RELU, in, name);
	m->acts[in].consumers--;   /* in place: same buffer, not a second reader */
	n->out = in;
	return in;
}

static int pool(struct sd_model *m, enum sd_op op, int in, int k, int s, const char *name)
{
	struct act *a = &m->acts[in];
	int c = a->c, oh = (a->h - k) / s + 1, ow = (a->w - k) / s + 1;
	int out = sd_graph_act(m, c, oh, ow);
	struct node *n = sd_graph_node(m, op, in, name);
	n->out = out;
	n->k = k;
	n->s = s;
	return out;
}

static int linear(struct sd_model *m, int in, int out_features, const char *name)
{
	struct act *a = &m->acts[in];
	int fan_in = (int)act_floats(a);
	int out = sd_graph_act(m, out_features, 1, 1);
	struct node *n = sd_graph_node(m, OP_LINEAR, in, name);
	n->out = out;
	n->fc_in = fan_in;
	n->fc_out = out_features;
	n->w_off = sd_graph_tensor(m, name, "weight", 2, out_features, fan_in, 0, 0);
	n->b_off = sd_graph_tensor(m, name, "bias", 1, out_features, 0, 0, 0);
	m->flops += (double)fan_in * out_features;
	return out;
}

/* out = a + shortcut(b), where the shortcut is the identity or He et al.'s
 * option A: stride-2 subsampling with the new channels zero-padded equally on
 * both sides. */
static int add_shortcut(struct sd_model *m, int a, int b, const char *name)
{
	/* add_act may move m->acts: no pointer into it across the call. */
	int c = m->acts[a].c, h = m->acts[a].h, w = m->acts[a].w;
	int out = sd_graph_act(m, c, h, w);
	struct node *n = sd_graph_node(m, OP_ADD, a, name);
	n->in2 = b;
	m->acts[b].consumers++;
	n->out = out;
	n->s = m->acts[b].h / h;
	return out;
}

static void build_mlp(struct sd_model *m, int x)
{
	x = linear(m, x, 256, "fc1");
	x = relu(m, x, "relu1");
	linear(m, x, m->classes, "fc2");
}

static int build_cnn(struct sd_model *m, int x)
{
	if ((x = conv_bias(m, x, 32, 5, 1, 2, "conv1")) < 0)
		return -1;
	x = relu(m, x, "relu1");
	x = pool(m, OP_MAXPOOL, x, 2, 2, "pool1");
	if ((x = conv_bias(m, x, 64, 5, 1, 2, "conv2")) < 0)
		return -1;
	x = relu(m, x, "relu2");
	x = pool(m, OP_MAXPOOL, x, 2, 2, "pool2");
	x = linear(m, x, 128, "fc1");
	x = relu(m, x, "relu3");
	linear(m, x, m->classes, "fc2");
	return 0;
}

static int build_resnet(struct sd_model *m, int x, int blocks)
{
	if ((x = conv(m, x, 16, 3, 1, 1, "conv1")) < 0)
		return -1;
	x = bn(m, x, "bn1");
	x = relu(m, x, "relu1");
	for (int stage = 0; stage < 3; stage++) {
		int ch = 16 << stage;
		for (int b = 0; b < blocks; b++) {
			char nm[32];
			int stride = (stage > 0 && b == 0) ? 2 : 1;
			int in = x;
			snprintf(nm, sizeof nm, "s%d.b%d.conv1", stage + 1, b + 1);
			if ((x = conv(m, x, ch, 3, stride, 1, nm)) < 0)
				return -1;
			snprintf(nm, sizeof nm, "s%d.b%d.bn1", stage + 1, b + 1);
			x = bn(m, x, nm);
			snprintf(nm, sizeof nm, "s%d.b%d.relu1", stage + 1, b + 1);
			x = relu(m, x, nm);
			snprintf(nm, sizeof nm, "s%d.b%d.conv2", stage + 1, b + 1);
			if ((x = conv(m, x, ch, 3, 1, 1, nm)) < 0)
				return -1;
			snprintf(nm, sizeof nm, "s%d.b%d.bn2", stage + 1, b + 1);
			x = bn(m, x, nm);
			snprintf(nm, sizeof nm, "s%d.b%d.add", stage + 1, b + 1);
			x = add_shortcut(m, x, in, nm);
			snprintf(nm, sizeof nm, "s%d.b%d.relu2", stage + 1, b + 1);
			x = relu(m, x, nm);
		}
	}
	struct act *a = &m->acts[x];
	x = pool(m, OP_AVGPOOL, x, a->h, 1, "avgpool");
	linear(m, x, m->classes, "fc");
	return 0;
}

/* Convolution shape of node n at batch nb. */
static struct sd_conv2d_shape conv_shape(const struct node *n, int nb)
{
	struct sd_conv2d_shape s = n->conv;
	sd_conv2d_shape_init(&s, nb, s.c, s.h, s.w, s.k, s.r, s.stride, s.pad);
	return s;
}

/* The nodes the fused group headed by n runs (the batch-norm, add, ReLU). */
static int group_nodes(const struct node *n)
{
	return n->fuse == FUSE_ADD_RELU ? 3 : n->fuse == FUSE_RELU ? 2 : 1;
}

/* The activation a fused group at head i writes. */
static int group_out(const struct sd_model *m, int i)
{
	return m->nodes[i].fuse == FUSE_ADD_RELU ? m->nodes[i + 1].out : m->nodes[i].out;
}

/* Links each residual group (bn -> add -> relu) whose shortcut is the
 * identity of an earlier group's y, read by exactly that add and the
 * convolution right after the earlier group, to that group: in a bf16
 * training forward the earlier group then writes y in bf16 only (the copy
 * the convolution reads) and the residual group reads r there
 * (forward_bn_fused).  The whole residual stream of a ResNet stage but its
 * last block's output (option A's and the pool's input) goes so. */
static void link_residuals(struct sd_model *m)
{
	for (int j = 0; j < m->nnodes; j++) {
		struct node *n = &m->nodes[j];
		n->bn_y_res = n->bn_r_from = 0;
	}
	if (m->blk != 16)
		return;
	for (int j = 0; j < m->nnodes; j++) {
		if (m->nodes[j].op != OP_BN || m->nodes[j].fuse != FUSE_ADD_RELU)
			continue;
		const struct node *add = &m->nodes[j + 1];
		const struct act *a = &m->acts[add->out], *b = &m->acts[add->in2];
		if (a->c != b->c || a->h != b->h || a->w != b->w || b->consumers != 2)
			continue;
		for (int h = 0; h < j; h++) {
			const struct node *w = &m->nodes[h];
			if (w->op != OP_BN || w->fuse == FUSE_NONE || group_out(m, h) != add->in2)
				continue;
			const int c = h + group_nodes(w);
			if (c < j && m->nodes[c].op == OP_CONV && m->nodes[c].in == add->in2) {
				m->nodes[h].bn_y_res = j + 1;
				m->nodes[j].bn_r_from = h + 1;
			}
			break;
		}
	}
}

/* Keeps the activations in oneDNN's channel-blocked layout when that pays:
 * every convolution runs on oneDNN in that layout (then no activation is
 * ever reordered), and every other node has a blocked version (batch-norm,
 * ReLU, shortcut add, global average pooling; not max pooling, so not the
 * cnn).  For the CIFAR ResNets that is every node.  Decided once, when the
 * model is built, from the convolution path then in force (sd_conv2d_path:
 * with im2col forced the model stays plain) and oneDNN's kernels for
 * max_batch; batches of other sizes later run the same layout (a
 * convolution oneDNN could not run then would convert and take im2col).
 * Then marks the batch-norms to fuse with the ReLU and residual add after
 * them. */
static void choose_layout(struct sd_model *m, int max_batch)
{
	m->blk = 1;
	if (sd_conv2d_get_path() == SD_CONV_IM2COL)
		return;
	int blk = 0;
	for (int i = 0; i < m->nnodes; i++) {
		const struct node *n = &m->nodes[i];
		const struct act *in = &m->acts[n->in];
		switch (n->op) {
		case OP_CONV: {
			struct sd_conv2d_shape s = conv_shape(n, max_batch);
			int b = sd_conv2d_block(&s);
			if (!b || (blk && b != blk))
				return;
			blk = b;
			break;
		}
		case OP_MAXPOOL:
			return;
		case OP_AVGPOOL:
			if (n->k != in->h || n->k != in->w || n->s != 1 || n->pad)
				return;
			break;
		case OP_BN:
			if (in->c > SD_BN_CHANNELS_MAX)
				return;
			break;
		case OP_LINEAR:
			/* Only after pooling, where both layouts are (n, c). */
			if (in->h * in->w != 1)
				return;
			break;
		case OP_RELU:
		case OP_ADD:
			break;
		case OP_ACT:
			/* Elementwise, so any layout, but its output would be
			 * blocked while the image (its input here) is not. */
			if (n->in == 0)
				return;
			break;
		case OP_CONCAT:
			/* Copies NCHW planes. */
		case OP_SEQ:
			/* Language models have no convolutions to block. */
		case OP_GCONV:
			/* im2col of NCHW planes only. */
			return;
		case OP_BINARY:
			/* Elementwise in any layout, except a per-channel
			 * constant (it indexes NCHW channels) and the image. */
			if (n->in == 0 || n->in2 == 0 || (n->in2 < 0 && n->bin_kc > 1))
				return;
			break;
		case OP_DROPOUT:
			/* Elementwise; samples stay contiguous in every layout. */
			if (n->in == 0)
				return;
			break;
		}
	}
	if (!blk)
		return;
	/* The image stays NCHW; maps with one pixel are the same in both. */
	for (int i = 1; i < m->nacts; i++)
		if (m->acts[i].h * m->acts[i].w > 1 && m->acts[i].c % blk)
			return;
	for (int i = 0; i < m->nnodes; i++) {
		const struct node *n = &m->nodes[i];
		if (n->op != OP_CONV)
			continue;
		struct sd_conv2d_shape s = conv_shape(n, max_batch);
		if (!sd_conv2d_blocked_on_onednn(&s, n->b_off != NONE, n->in == 0 ? 1 : blk, blk,
		                                 n->in != 0))
			return;
	}
	m->blk = blk;
	for (int i = 1; i < m->nacts; i++)
		if (m->acts[i].h * m->acts[i].w > 1)
			m->acts[i].blk = blk;
	for (int i = 0; i < m->nnodes; i++) {
		struct node *n = &m->nodes[i], *n1 = i + 1 < m->nnodes ? n + 1 : NULL;
		struct node *n2 = i + 2 < m->nnodes ? n + 2 : NULL;
		if (n->op != OP_BN || !n1)
			continue;
		if (n1->op == OP_ADD && n1->in == n->out && n2 && n2->op == OP_RELU &&
		    n2->in == n1->out) {
			n->fuse = FUSE_ADD_RELU;
			n2->fused_from = i + 1;
		} else if (n1->op == OP_RELU && n1->in == n->out) {
			n->fuse = FUSE_RELU;
			n1->fused_from = i + 1;
		}
	}
	link_residuals(m);
}

/* End (one past the last float) of the tensor at offset off, or 0 for an
 * absent one. */
static size_t tensor_end(const struct sd_model *m, size_t off)
{
	if (off == NONE)
		return 0;
	for (int i = 0; i < m->ntensors; i++)
		if (m->tensors[i].offset == off)
			return off + m->tensors[i].count;
	return 0;
}

/* Fills ready_from and points (model-graph.h).  Taking the end of
 * everything before node i, not the start of node i's own tensors, keeps it
 * right whatever order the builders add tensors in. */
static void plan_ready_points(struct sd_model *m)
{
	m->ready_from = sd_malloc(((size_t)m->nnodes + 1) * sizeof *m->ready_from);
	m->points = sd_malloc(((size_t)m->nnodes + 1) * sizeof *m->points);
	size_t end = 0;
	for (int i = 0; i <= m->nnodes; i++) {
		m->ready_from[i] = end;
		if (i == m->nnodes)
			break;
		size_t w = tensor_end(m, m->nodes[i].w_off), b = tensor_end(m, m->nodes[i].b_off);
		end = w > end ? w : end;
		end = b > end ? b : end;
	}
	m->npoints = 0;
	for (int i = m->nnodes; i >= 0; i--) {
		size_t r = m->ready_from[i];
		if (r < m->nparams && (m->npoints == 0 || r < m->points[m->npoints - 1]))
			m->points[m->npoints++] = r;
	}
}

void sd_model_on_grad_ready(struct sd_model *m, sd_grad_ready_fn fn, void *ctx)
{
	m->on_ready = fn;
	m->on_ready_ctx = ctx;
}

const size_t *sd_model_grad_ready_points(const struct sd_model *m, int *count)
{
	*count = m->npoints;
	return m->points;
}

int sd_model_create(struct sd_model **out, const char *name, int c, int h, int w,
                    int classes, int max_batch, char **why)
{
	*out = NULL;
	/* A misspelt path would silently run auto: refuse it here, where
	 * every program that trains passes. */
	if (sd_conv2d_check_env(why) < 0)
		return -1;
	if (c <= 0 || h <= 0 || w <= 0 || classes <= 1 || max_batch <= 0)
		return sd_why(why, "model %s: bad input shape %dx%dx%d, %d classes, batch %d",
		              name, c, h, w, classes, max_batch);
	struct sd_model *m = sd_graph_new(name, c, h, w, max_batch);
	m->classes = classes;
	int x = 0;
	int rc;
	if (!strcmp(name, "mlp")) {
		build_mlp(m, x);
		rc = 0;
	} else if (!strcmp(name, "cnn")) {
		rc = build_cnn(m, x);
		if (rc == 0 && (h % 4 || w % 4))
			rc = -1;
	} else if (!strcmp(name, "resnet20")) {
		rc = build_resnet(m, x, 3);
	} else if (!strcmp(name, "resnet32")) {
		rc = build_resnet(m, x, 5);
	} else {
		sd_model_destroy(m);
		return sd_why(why, "unknown model '%s' (known: mlp, cnn, resnet20, resnet32)", name);
	}
	if (rc < 0) {
		sd_model_destroy(m);
		return sd_why(why, "model %s cannot take %dx%dx%d images", name, c, h, w);
	}
	if (sd_graph_finish(m, classes, why) < 0) {
		sd_model_destroy(m);
		return -1;
	}
	sd_model_init(m, 0);
	*out = m;
	return 0;
}

struct sd_model *sd_graph_new(const char *name, int c, int h, int w, int max_batch)
{
	struct sd_model *m = sd_calloc(1, sizeof *m);
	snprintf(m->name, sizeof m->name, "%s", name);
	m->c = c; m->h = h; m->w = w; m->max_batch = max_batch;
	sd_graph_act(m, c, h, w);
	return m;
}

/* count floats (at least one) on a 64-byte boundary, freed with free().
 * The channel-blocked kernels and oneDNN's move whole 64-byte vectors along
 * these buffers; malloc's 16-byte alignment made every one of those loads
 * and stores straddle two cache lines.  Big ones get huge pages
 * (sd_malloc_big, src/base/errors.h). */
static float *falloc(size_t count)
{
	return sd_malloc_big(count * sizeof(float), 64);
}

int sd_graph_finish(struct sd_model *m, int classes, char **why)
{
	const struct act *last = &m->acts[m->nacts - 1];
	const int per_sample = classes * (m->seq_len ? m->seq_len : 1);
	if (m->nnodes == 0 || last->c != per_sample || last->h != 1 || last->w != 1)
		return sd_why(why, "model %s: its last activation is %dx%dx%d, not %d logits",
		              m->name, last->c, last->h, last->w, classes);
	m->classes = classes;
	const int max_batch = m->max_batch;
	/* Buffers: activations for max_batch, one parameter/gradient block each. */
	size_t maxact = 0;
	for (int i = 0; i < m->nacts; i++) {
		struct act *a = &m->acts[i];
		size_t f = act_floats(a) * (size_t)max_batch;
		a->val = falloc(f);
		a->grad = falloc(f);
		if (f > maxact)
			maxact = f;
	}
	choose_layout(m, max_batch);
	for (int i = 0; i < m->nnodes; i++) {
		struct node *n = &m->nodes[i];
		if (n->op == OP_CONV) {
			struct sd_conv2d_shape s = conv_shape(n, max_batch);
			size_t f = m->blk > 1
				? sd_conv2d_workspace_floats_blocked(&s, m->acts[n->in].blk,
				                                     m->acts[n->out].blk)
				: sd_conv2d_workspace_floats(&s);
			if (f > m->ws_floats)
				m->ws_floats = f;
		} else if (n->op == OP_GCONV) {
			size_t f = sd_gconv_workspace_floats(&n->gconv);
			if (f > m->ws_floats)
				m->ws_floats = f;
		} else if (n->op == OP_DROPOUT) {
			n->drop_mask = sd_malloc(act_floats(&m->acts[n->in]) * (size_t)max_batch);
		} else if (n->op == OP_MAXPOOL) {
			n->argmax = sd_malloc(act_floats(&m->acts[n->out]) * max_batch * sizeof(int32_t));
		}
	}
	m->ws = falloc(m->ws_floats);
	m->scratch_floats = maxact;
	m->scratch = falloc(maxact);
	if (m->blk > 1)
		m->res = falloc(maxact);
	m->params = sd_calloc_big(m->nparams, sizeof(float), 64);
	m->grads = sd_calloc_big(m->nparams + SD_MODEL_GRAD_TAIL, sizeof(float), 64);
	m->buffers = sd_calloc_big(m->nbuffers ? m->nbuffers : 1, sizeof(float), 64);
	m->probs = sd_malloc((size_t)max_batch * classes * sizeof(float));
	sd_seq_finish(m);
	plan_ready_points(m);
	return 0;
}

void sd_model_destroy(struct sd_model *m)
{
	if (!m)
		return;
	for (int i = 0; i < m->nacts; i++) {
		free(m->acts[i].val);
		free(m->acts[i].grad);
	}
	for (int i = 0; i < m->nnodes; i++) {
		free(m->nodes[i].bn_mean);
		free(m->nodes[i].bn_invstd);
		free(m->nodes[i].bn_ybits);
		free(m->nodes[i].argmax);
		sd_conv2d_keep_free(&m->nodes[i].conv_keep);
		sd_conv2d_keep_free(&m->nodes[i].conv_keep_dy);
		free(m->nodes[i].bin_k);
		free(m->nodes[i].drop_mask);
		free(m->nodes[i].seq_idx);
		free(m->nodes[i].seq_mask);
		free(m->nodes[i].seq_mean);
		free(m->nodes[i].seq_rstd);
		free(m->nodes[i].seq_src);
		free(m->nodes[i].seq_ids);
	}
	free(m->acts);
	free(m->nodes);
	free(m->tensors);
	free(m->params);
	free(m->grads);
	free(m->buffers);
	free(m->probs);
	free(m->ws);
	free(m->scratch);
	free(m->res);
	free(m->prof);
	free(m->ready_from);
	free(m->points);
	free(m);
}

static const char *const op_names[] = {
	[OP_CONV] = "conv", [OP_BN] = "batchnorm", [OP_RELU] = "relu", [OP_MAXPOOL] = "maxpool",
	[OP_AVGPOOL] = "avgpool", [OP_LINEAR] = "linear", [OP_ADD] = "add", [OP_ACT] = "activation",
	[OP_CONCAT] = "concat", [OP_GCONV] = "conv", [OP_BINARY] = "arith",
	[OP_DROPOUT] = "dropout", [OP_SEQ] = "seq",
};

void sd_model_profile_start(struct sd_model *m, int cpu_clock)
{
	m->prof_clock = cpu_clock ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC;
	if (!m->prof)
		m->prof = sd_calloc((size_t)m->nnodes, sizeof *m->prof);
	for (int i = 0; i < m->nnodes; i++) {
		const struct node *n = &m->nodes[i];
		/* A fused group's time is its head's forward and its tail's
		 * backward; the nodes in between show none. */
		static const char *const seq_names[] = {
			[SEQ_EMBED] = "embedding", [SEQ_LINEAR] = "linear", [SEQ_BMM] = "matmul",
			[SEQ_LAYERNORM] = "layernorm", [SEQ_SOFTMAX] = "softmax",
			[SEQ_MASKFILL] = "mask", [SEQ_TRANSPOSE] = "transpose", [SEQ_SLICE] = "split",
			[SEQ_ERF] = "erf", [SEQ_BIAS] = "arith", [SEQ_POW] = "pow",
			[SEQ_GELU] = "gelu", [SEQ_ATTENTION] = "attention",
		};
		const char *op = n->fuse == FUSE_RELU ? "bn+relu"
		                 : n->fuse == FUSE_ADD_RELU ? "bn+add+relu"
		                 : n->op == OP_SEQ ? seq_names[n->seq] : op_names[n->op];
		m->prof[i] = (struct sd_node_time){ .name = n->name, .op = op };
	}
}

const struct sd_node_time *sd_model_profile(const struct sd_model *m, int *count)
{
	*count = m->prof ? m->nnodes : 0;
	return m->prof;
}

static double prof_now(const struct sd_model *m)
{
	struct timespec t;
	clock_gettime(m->prof_clock, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

const char *sd_model_name(const struct sd_model *m) { return m->name; }
int sd_model_channel_block(const struct sd_model *m) { return m->blk; }
size_t sd_model_param_count(const struct sd_model *m) { return m->nparams; }
float *sd_model_params(struct sd_model *m) { return m->params; }
float *sd_model_grads(struct sd_model *m) { return m->grads; }
size_t sd_model_buffer_count(const struct sd_model *m) { return m->nbuffers; }
float *sd_model_buffers(struct sd_model *m) { return m->buffers; }
double sd_model_flops_per_sample(const struct sd_model *m) { return 6.0 * m->flops; }

int sd_model_onednn_convs(const struct sd_model *m)
{
	int count = 0;
	for (int i = 0; i < m->nnodes; i++) {
		const struct node *n = &m->nodes[i];
		if (n->op != OP_CONV)
			continue;
		struct sd_conv2d_shape s = conv_shape(n, m->max_batch);
		/* A blocked model runs every convolution on oneDNN (choose_layout). */
		if (m->blk > 1 || sd_conv2d_path(&s, n->b_off != NONE) == SD_CONV_ONEDNN)
			count++;
	}
	return count;
}

int sd_model_bf16_linears(const struct sd_model *m)
{
	int count = 0;
	for (int i = 0; i < m->nnodes; i++) {
		const struct node *n = &m->nodes[i];
		if (n->op == OP_LINEAR)
			count += sd_linear_dnnl_bf16_wins(m->max_batch, n->fc_in, n->fc_out);
		else if (n->op == OP_SEQ && n->seq == SEQ_LINEAR)
			count += sd_linear_dnnl_bf16_wins(m->max_batch * n->seq_rows, n->seq_k,
			                                  n->seq_n);
	}
	return count;
}

const struct sd_tensor_info *sd_model_tensors(const struct sd_model *m, int *count)
{
	*count = m->ntensors;
	return m->tensors;
}

void sd_model_init(struct sd_model *m, uint64_t seed)
{
	struct sd_rng rng;
	sd_rng_seed(&rng, seed, 0x1417);
	memset(m->params, 0, m->nparams * sizeof(float));
	for (int i = 0; i < m->nnodes; i++) {
		struct node *n = &m->nodes[i];
		if (n->op == OP_CONV || n->op == OP_LINEAR || n->op == OP_GCONV) {
			/* He-normal: std = sqrt(2 / fan_in) keeps ReLU activations' variance. */
			int fan_in = n->op == OP_CONV ? n->conv.c * n->conv.r * n->conv.r
			             : n->op == OP_GCONV
			             ? n->gconv.c / n->gconv.groups * n->gconv.kh * n->gconv.kw
			             : n->fc_in;
			size_t count = n->op == OP_CONV ? (size_t)n->conv.k * fan_in
			               : n->op == OP_GCONV ? (size_t)n->gconv.k * fan_in
			               : (size_t)n->fc_out * fan_in;
			float std = sqrtf(2.0f / (float)fan_in);
			for (size_t j = 0; j < count; j++)
				m->params[n->w_off + j] = std * sd_rng_normal(&rng);
		} else if (n->op == OP_BINARY && n->w_off != NONE) {
			/* A trained constant starts neutral: 0 to add, 1 to scale. */
			float v = n->binop == SD_BIN_MUL || n->binop == SD_BIN_DIV ? 1.0f : 0.0f;
			for (int j = 0; j < n->bin_kc; j++)
				m->params[n->w_off + j] = v;
		} else if (n->op == OP_BN) {
			int c = m->acts[n->in].c;
			for (int j = 0; j < c; j++) {
				m->params[n->w_off + j] = 1.0f;
				m->buffers[n->rm_off + j] = 0.0f;
				m->buffers[n->rv_off + j] = 1.0f;
			}
		}
	}
}

static void shortcut_forward(float *y, const float *a, const float *b, const struct act *ab,
                             const struct act *bb, int nb, int s)
{
	size_t plane = (size_t)ab->h * ab->w;
	int pad = (ab->c - bb->c) / 2;
	for (int i = 0; i < nb; i++) {
		for (int c = 0; c < ab->c; c++) {
			float *yp = y + ((size_t)i * ab->c + c) * plane;
			const float *ap = a + ((size_t)i * ab->c + c) * plane;
			int bc = c - pad;
			if (bc < 0 || bc >= bb->c) {
				memcpy(yp, ap, plane * sizeof(float));
				continue;
			}
			const float *bp = b + ((size_t)i * bb->c + bc) * bb->h * bb->w;
			for (int hh = 0; hh < ab->h; hh++)
				for (int ww = 0; ww < ab->w; ww++)
					yp[hh * ab->w + ww] = ap[hh * ab->w + ww] + bp[(hh * s) * bb->w + ww * s];
		}
	}
}

/* d b += shortcut^T(dy): scatter back the subsampled positions. */
static void shortcut_backward(float *db, const float *dy, const struct act *ab,
                              const struct act *bb, int nb, int s)
{
	size_t plane = (size_t)ab->h * ab->w;
	int pad = (ab->c - bb->c) / 2;
	for (int i = 0; i < nb; i++)
		for (int bc = 0; bc < bb->c; bc++) {
			const float *dyp = dy + ((size_t)i * ab->c + bc + pad) * plane;
			float *dbp = db + ((size_t)i * bb->c + bc) * bb->h * bb->w;
			for (int hh = 0; hh < ab->h; hh++)
				for (int ww = 0; ww < ab->w; ww++)
					dbp[(hh * s) * bb->w + ww * s] += dyp[hh * ab->w + ww];
		}
}

/* ------------------------------------------------- node execution
 *
 * A model in the plain layout (blk 1) runs every node by itself, exactly as
 * the reference layers define it.  A model whose activations are channel-
 * blocked (blk 8 or 16, chosen in choose_layout) runs its convolutions on
 * oneDNN without reorders and fuses each batch-norm with what follows it:
 *   FUSE_RELU      bn -> relu                  (layers-blocked.c, one pass)
 *   FUSE_ADD_RELU  bn -> add shortcut -> relu  (the residual read in the pass)
 * The head (the batch-norm) runs the group forward and the tail (the relu)
 * runs it backward; the nodes in between are skipped.  A fused group never
 * writes the batch-norm's own output buffer: nothing reads it. */

/* The constant of an OP_BINARY node with one: trained or fixed. */
static const float *bin_k(const struct sd_model *m, const struct node *n)
{
	return n->w_off == NONE ? n->bin_k : m->params + n->w_off;
}

/* The seed of dropout node i's masks in this batch: the batch's seed
 * (sd_model_set_noise) mixed with the node's index (splitmix64's
 * finaliser, Steele et al. 2014), so two dropout nodes draw different
 * masks for the same sample. */
static uint64_t noise_seed(const struct sd_model *m, int i)
{
	uint64_t z = m->noise_seed + 0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

void sd_model_set_noise(struct sd_model *m, uint64_t seed, uint64_t first_sample)
{
	m->noise_seed = seed;
	m->noise_first = first_sample;
}

int sd_model_has_dropout(const struct sd_model *m)
{
	for (int i = 0; i < m->nnodes; i++)
		if (m->nodes[i].op == OP_DROPOUT)
			return 1;
	return 0;
}

/* Residual of an add node: the shortcut input itself when the shapes agree,
 * else its option-A subsampled, channel-padded copy in m->res. */
static const float *residual(struct sd_model *m, const struct node *n, int nb)
{
	const struct act *a = &m->acts[n->out], *b = &m->acts[n->in2];
	if (a->c == b->c && a->h == b->h && a->w == b->w)
		return b->val;
	sd_shortcut_forward(m->res, b->val, nb, a->c, a->h, a->w, b->c, b->h, b->w, n->s, m->blk);
	return m->res;
}

/* The bf16 copy of residual group n's identity shortcut r (link_residuals),
 * while the convolution after the group that wrote it still holds it (its
 * forward read it or converted y into it with the same kernels: the same
 * bits; backward_group's test for that group's mask), else NULL. */
static const uint16_t *residual_bf16(const struct sd_model *m, const struct node *n,
                                     const float *r)
{
	if (!n->bn_r_from)
		return NULL;
	const struct node *w = &m->nodes[n->bn_r_from - 1];
	const struct node *conv = &m->nodes[n->bn_r_from - 1 + group_nodes(w)];
	return w->bn_ybf && conv->conv_keep.buf == w->bn_ybf && conv->conv_keep.x == r &&
	       conv->conv_keep.plan == w->bn_ybf_plan
		? w->bn_ybf : NULL;
}

/* Batch-norm in the blocked layout, with the ReLU or add + ReLU fused
 * after it (see the FUSE_* comment above).  Returns the nodes it ran. */
static int forward_bn_fused(struct sd_model *m, int i, int nb, int train)
{
	struct node *n = &m->nodes[i];
	const struct act *in = &m->acts[n->in];
	const float *p = m->params;
	/* y and r of the group. */
	float *y = m->acts[n->out].val;
	const float *r = NULL;
	if (n->fuse == FUSE_ADD_RELU) {
		const struct node *add = &m->nodes[i + 1];
		y = m->acts[add->out].val;
		r = residual(m, add, nb);
	}
	const int relu = n->fuse != FUSE_NONE;
	const int ran = n->fuse == FUSE_ADD_RELU ? 3 : n->fuse == FUSE_RELU ? 2 : 1;
	if (train) {
		/* When the node after the group is a convolution of y, y is also
		 * written in the bf16 layout that convolution would convert it
		 * to, if it converts (bf16 precision; sd_conv2d_keep_prepare). */
		struct node *next = i + ran < m->nnodes ? &m->nodes[i + ran] : NULL;
		uint16_t *ybf = NULL;
		int bf16_only = 0;
		if (next && next->op == OP_CONV && m->acts[next->in].val == y) {
			struct sd_conv2d_shape s = next->conv;
			s.n = nb;
			ybf = sd_conv2d_keep_prepare(&next->conv_keep, &s, next->b_off != NONE,
			                             m->acts[next->in].blk, m->acts[next->out].blk, y);
			/* A y that only that convolution reads (no residual
			 * after it), or that and a later residual group's
			 * identity shortcut, reading the copy too
			 * (link_residuals), is written in bf16 only: the
			 * convolution reads that, and this group's backward
			 * its mask. */
			bf16_only = ybf && relu && m->blk == 16 &&
			            ((!r && m->acts[next->in].consumers == 1) || n->bn_y_res);
			next->conv_keep.x_bf16_only = bf16_only;
		}
		/* x as its convolution left it (bf16 NHWC, float32 NHWC or
		 * layout blk). */
		const struct node *prev = i > 0 ? &m->nodes[i - 1] : NULL;
		const int x_nhwc = prev && prev->op == OP_CONV && prev->out == n->in &&
		                   prev->conv_keep.y_nhwc;
		const uint16_t *xbf = x_nhwc && prev->conv_keep.y_bf16
			? (const uint16_t *)(const void *)in->val : NULL;
		/* With a residual (whose backward cannot recompute the mask
		 * from x), the copy's ReLU mask in bits too, for the backward
		 * to read instead of the copy. */
		uint16_t *ybits = NULL;
		if (ybf && relu && r && m->blk == 16) {
			const size_t words = (size_t)nb * in->c * in->h * in->w / 16;
			if (n->bn_ybits_cap < words) {
				free(n->bn_ybits);
				n->bn_ybits = sd_malloc_big(words * sizeof(uint16_t), 64);
				n->bn_ybits_cap = words;
			}
			ybits = n->bn_ybits;
		}
		n->bn_ybits_set = ybits != NULL;
		/* The identity residual in bf16 where its writer left it so
		 * (autocast's bf16 residual stream): float32 r is then unset. */
		const uint16_t *rbf = residual_bf16(m, n, r);
		sd_batchnorm_act_forward_train_rbf(bf16_only ? NULL : y, ybf, ybits, n->bn_mean,
		                                   n->bn_invstd, m->buffers + n->rm_off,
		                                   m->buffers + n->rv_off, in->val, xbf, x_nhwc,
		                                   rbf ? NULL : r, rbf, p + n->w_off, p + n->b_off,
		                                   nb, in->c, in->h * in->w, m->blk, relu,
		                                   n->bn_momentum, n->bn_eps);
		if (ybf)
			next->conv_keep.filled = 1;
		n->bn_ybf = relu ? ybf : NULL;
		n->bn_ybf_plan = ybf ? next->conv_keep.plan : 0;
	} else {
		n->bn_ybf = NULL;   /* y is no longer what it was in training */
		n->bn_ybits_set = 0;
		struct node *next = i + ran < m->nnodes ? &m->nodes[i + ran] : NULL;
		if (next && next->op == OP_CONV && m->acts[next->in].val == y)
			next->conv_keep.x_bf16_only = 0;   /* float32 y again */
		sd_batchnorm_act_forward_eval(y, in->val, r, p + n->w_off, p + n->b_off, m->buffers + n->rm_off,
		                              m->buffers + n->rv_off, nb, in->c, in->h * in->w, m->blk, relu,
		                              n->bn_eps);
	}
	return ran;
}

/* Runs node i (and the nodes fused into it) forward; returns how many nodes
 * that covered. */
static int forward_node(struct sd_model *m, int i, int nb, int train)
{
	struct node *n = &m->nodes[i];
	struct act *in = &m->acts[n->in], *out = &m->acts[n->out];
	const float *p = m->params;
	const int blk = m->blk;
	switch (n->op) {
	case OP_CONV: {
		struct sd_conv2d_shape s = n->conv;
		s.n = nb;
		const float *b = n->b_off == NONE ? NULL : p + n->b_off;
		/* y may stay in the bf16 kernels' float32 NHWC when its only
		 * reader is a fused batch-norm group, whose passes take x so
		 * (training only: the evaluation's batch-norm reads layout blk). */
		const struct node *bn = i + 1 < m->nnodes ? &m->nodes[i + 1] : NULL;
		n->conv_keep.y_nhwc_ok = train && blk == 16 && out->consumers == 1 && bn &&
		                         bn->op == OP_BN && bn->in == n->out && bn->fuse != FUSE_NONE;
		/* ... and in bf16 there, which those passes read too (half the
		 * bytes; the batch-norm input rounded to bf16, as autocast's). */
		n->conv_keep.y_bf16_ok = n->conv_keep.y_nhwc_ok;
		if (blk > 1)
			sd_conv2d_forward_blocked_kept(out->val, in->val, p + n->w_off, b, &s, in->blk,
			                               out->blk, m->ws, &n->conv_keep);
		else
			sd_conv2d_forward(out->val, in->val, p + n->w_off, b, &s, m->ws);
		return 1;
	}
	case OP_BN:
		if (blk > 1)
			return forward_bn_fused(m, i, nb, train);
		if (train)
			sd_batchnorm_forward_train(out->val, n->bn_mean, n->bn_invstd,
			                           m->buffers + n->rm_off, m->buffers + n->rv_off,
			                           in->val, p + n->w_off, p + n->b_off,
			                           nb, in->c, in->h * in->w, n->bn_momentum, n->bn_eps);
		else
			sd_batchnorm_forward_eval(out->val, in->val, p + n->w_off, p + n->b_off,
			                          m->buffers + n->rm_off, m->buffers + n->rv_off,
			                          nb, in->c, in->h * in->w, n->bn_eps);
		return 1;
	case OP_RELU:
		sd_relu_forward(out->val, in->val, act_floats(in) * nb);
		return 1;
	case OP_ACT:
		sd_act_forward(out->val, in->val, act_floats(in) * nb, n->act, n->act_a, n->act_b);
		return 1;
	case OP_CONCAT: {
		const struct act *b = &m->acts[n->in2];
		const size_t fa = act_floats(in), fb = act_floats(b);
		for (int e = 0; e < nb; e++) {
			memcpy(out->val + (size_t)e * (fa + fb), in->val + (size_t)e * fa,
			       fa * sizeof(float));
			memcpy(out->val + (size_t)e * (fa + fb) + fa, b->val + (size_t)e * fb,
			       fb * sizeof(float));
		}
		return 1;
	}
	case OP_GCONV: {
		struct sd_gconv_shape s = n->gconv;
		s.n = nb;
		sd_gconv_forward(out->val, in->val, p + n->w_off, n->b_off == NONE ? NULL : p + n->b_off,
		                 &s, m->ws);
		return 1;
	}
	case OP_BINARY:
		if (n->in2 >= 0)
			sd_binary_forward(out->val, in->val, m->acts[n->in2].val, act_floats(in) * nb,
			                  n->binop);
		else
			sd_binary_const_forward(out->val, in->val, bin_k(m, n), n->bin_kc, nb, in->c,
			                        in->h * in->w, n->binop, n->bin_k_first);
		return 1;
	case OP_DROPOUT:
		if (train)
			sd_dropout_forward(out->val, n->drop_mask, in->val, nb, act_floats(in), n->drop_p,
			                   noise_seed(m, i), m->noise_first);
		else
			memcpy(out->val, in->val, act_floats(in) * nb * sizeof(float));
		return 1;
	case OP_MAXPOOL:
		if (n->pad)
			sd_maxpool_pad_forward(out->val, n->argmax, in->val, nb, in->c, in->h, in->w,
			                       n->k, n->s, n->pad);
		else
			sd_maxpool_forward(out->val, n->argmax, in->val, nb, in->c, in->h, in->w, n->k,
			                   n->s);
		return 1;
	case OP_AVGPOOL:
		if (blk > 1)
			sd_global_avgpool_forward(out->val, in->val, nb, in->c, in->h * in->w, in->blk);
		else if (n->pad)
			sd_avgpool_pad_forward(out->val, in->val, nb, in->c, in->h, in->w, n->k, n->s,
			                       n->pad, n->count_pad);
		else
			sd_avgpool_forward(out->val, in->val, nb, in->c, in->h, in->w, n->k, n->s);
		return 1;
	case OP_LINEAR:
		sd_linear_forward(out->val, in->val, p + n->w_off, n->b_off == NONE ? NULL : p + n->b_off,
		                  nb, n->fc_in, n->fc_out);
		return 1;
	case OP_SEQ:
		return sd_seq_forward(m, i, nb, train);
	case OP_ADD:
		if (blk > 1) {
			/* An add no batch-norm was fused with: out = a + residual. */
			const float *r = residual(m, n, nb);
			const size_t cnt = act_floats(out) * nb;
			for (size_t e = 0; e < cnt; e++)
				out->val[e] = in->val[e] + r[e];
			return 1;
		}
		shortcut_forward(out->val, in->val, m->acts[n->in2].val, in, &m->acts[n->in2], nb, n->s);
		return 1;
	}
	return 1;
}

/* The nodes forward, on the input already in activation 0. */
static void run_forward(struct sd_model *m, int nb, int train)
{
	for (int i = 0; i < m->nnodes;) {
		double t0 = m->prof ? prof_now(m) : 0.0;
		int ran = forward_node(m, i, nb, train);
		if (m->prof)
			m->prof[i].forward_s += prof_now(m) - t0;
		i += ran;
	}
}

static void forward(struct sd_model *m, const float *x, int nb, int train)
{
	memcpy(m->acts[0].val, x, act_floats(&m->acts[0]) * nb * sizeof(float));
	run_forward(m, nb, train);
}

/* Where node input act's gradient goes: straight into act->grad the first
 * time, into the scratch buffer (then added) when another consumer already
 * wrote a contribution. */
static float *grad_target(struct sd_model *m, struct act *a)
{
	return a->grad_set ? m->scratch : a->grad;
}

static void grad_commit(struct sd_model *m, struct act *a, size_t count)
{
	if (a->grad_set)
		sd_accumulate(a->grad, m->scratch, count);
	a->grad_set = 1;
}

float *sd_graph_grad_target(struct sd_model *m, struct act *a) { return grad_target(m, a); }
void sd_graph_grad_commit(struct sd_model *m, struct act *a, size_t count)
{
	grad_commit(m, a, count);
}

/* Backward of a fused group whose tail is node i (see forward_node); returns
 * the index of its head. */
static int backward_group(struct sd_model *m, int i, int nb)
{
	const int head = m->nodes[i].fused_from - 1;
	struct node *bn = &m->nodes[head];
	struct act *x = &m->acts[bn->in];
	struct act *y = &m->acts[m->nodes[i].out];   /* the relu's (in-place) buffer */
	const float *p = m->params;
	float *g = m->grads, *dr = NULL;
	struct act *b = NULL;
	const struct node *add = NULL;
	size_t bcnt = 0;
	if (bn->fuse == FUSE_ADD_RELU) {
		add = &m->nodes[head + 1];
		b = &m->acts[add->in2];
		bcnt = act_floats(b) * nb;
		/* The identity shortcut's gradient is dz itself; option A's is
		 * dz subsampled back, from dz kept in m->res. */
		int identity = b->c == y->c && b->h == y->h && b->w == y->w;
		dr = identity ? grad_target(m, b) : m->res;
	}
	float *dx = grad_target(m, x);
	/* x's gradient straight in the bf16 layout of the convolution that
	 * produced x, when that convolution converts it (bf16) and is its only
	 * reader: its float32 copy is then never written. */
	struct node *conv = head > 0 ? &m->nodes[head - 1] : NULL;
	uint16_t *dxbf = NULL;
	if (conv && conv->op == OP_CONV && conv->out == bn->in && x->consumers == 1 &&
	    !x->grad_set) {
		struct sd_conv2d_shape s = conv->conv;
		s.n = nb;
		dxbf = sd_conv2d_keep_prepare_dy(&conv->conv_keep_dy, &s, conv->b_off != NONE,
		                                 m->acts[conv->in].blk, x->blk, dx, conv->in != 0);
	}
	/* The ReLU mask from y's bf16 copy, while the next convolution's kept
	 * input still is that copy: its forward read it, or converted y into
	 * it with the same kernels (same bits), and its backward leaves it. */
	const struct node *next = i + 1 < m->nnodes ? &m->nodes[i + 1] : NULL;
	const uint16_t *ybf = bn->bn_ybf && next && next->op == OP_CONV &&
	                      ((next->conv_keep.buf == bn->bn_ybf && next->conv_keep.x == y->val &&
	                        next->conv_keep.plan == bn->bn_ybf_plan) ||
	                       next->conv_keep.x_bf16_only)
		? bn->bn_ybf : NULL;
	const int x_nhwc = conv && conv->op == OP_CONV && conv->out == bn->in &&
	                   conv->conv_keep.y_nhwc;
	const uint16_t *xbf = x_nhwc && conv->conv_keep.y_bf16
		? (const uint16_t *)(const void *)x->val : NULL;
	/* dy as the next convolution's backward left it (see backward_node). */
	const int dy_nhwc = next && next->op == OP_CONV && next->in == m->nodes[i].out
		? next->conv_keep.dx_nhwc : 0;
	if (dy_nhwc)
		m->nodes[i + 1].conv_keep.dx_nhwc = 0;
	/* Without a residual, the mask recomputed from x instead (no read of
	 * y or its copy; the forward's arithmetic, the same mask). */
	const float *mask_beta = !b ? p + bn->b_off : NULL;
	/* With the copy still valid, its mask in bits (the same mask). */
	const uint16_t *ybits = ybf && bn->bn_ybits_set ? bn->bn_ybits : NULL;
	sd_batchnorm_act_backward_bits(dxbf ? NULL : dx, dxbf, dr, g + bn->w_off, g + bn->b_off,
	                               y->grad, y->val, ybf, ybits, mask_beta, x->val, xbf, x_nhwc,
	                               dy_nhwc,
	                               bn->bn_mean, bn->bn_invstd, p + bn->w_off, nb, x->c,
	                               x->h * x->w, m->blk, 1);
	if (dxbf)
		conv->conv_keep_dy.filled = 1;
	grad_commit(m, x, act_floats(x) * nb);
	if (b) {
		if (dr == m->res) {
			float *db = grad_target(m, b);
			sd_shortcut_backward_set(db, m->res, nb, y->c, y->h, y->w, b->c, b->h, b->w,
			                         add->s, m->blk);
		}
		grad_commit(m, b, bcnt);
	}
	return head;
}

/* Runs node i backward (for the tail of a fused group, the whole group);
 * returns the index of the first node it covered. */
/* Concat's backward: each part's gradient is its slice of the output's. */
static void backward_concat(struct sd_model *m, const struct node *n, int nb, int need_dx)
{
	struct act *in = &m->acts[n->in], *out = &m->acts[n->out], *b = &m->acts[n->in2];
	const size_t fa = act_floats(in), fb = act_floats(b);
	if (need_dx) {
		float *da = grad_target(m, in);
		for (int e = 0; e < nb; e++)
			memcpy(da + (size_t)e * fa, out->grad + (size_t)e * (fa + fb), fa * sizeof(float));
		grad_commit(m, in, fa * nb);
	}
	if (n->in2 != 0) {
		float *db = grad_target(m, b);
		for (int e = 0; e < nb; e++)
			memcpy(db + (size_t)e * fb, out->grad + (size_t)e * (fa + fb) + fa, fb * sizeof(float));
		grad_commit(m, b, fb * nb);
	}
}

/* Elementwise arithmetic's backward, of two activations or of one and a
 * constant (whose gradient is its parameter's when it trains). */
static void backward_binary(struct sd_model *m, const struct node *n, int nb, int need_dx)
{
	struct act *in = &m->acts[n->in], *out = &m->acts[n->out];
	size_t cnt = act_floats(in) * nb;
	if (n->in2 >= 0) {
		/* Two activations (possibly the same one, x * x): each
		 * gradient is committed before the next is written. */
		struct act *b = &m->acts[n->in2];
		if (need_dx) {
			sd_binary_backward(grad_target(m, in), NULL, out->grad, in->val, b->val, cnt, n->binop);
			grad_commit(m, in, cnt);
		}
		if (n->in2 != 0) {
			sd_binary_backward(NULL, grad_target(m, b), out->grad, in->val, b->val, cnt, n->binop);
			grad_commit(m, b, cnt);
		}
		return;
	}
	float *dx = need_dx ? grad_target(m, in) : NULL;
	sd_binary_const_backward(dx, n->w_off == NONE ? NULL : m->grads + n->w_off, out->grad, in->val,
	                         bin_k(m, n), n->bin_kc, nb, in->c, in->h * in->w, n->binop,
	                         n->bin_k_first);
	if (need_dx)
		grad_commit(m, in, cnt);
}

/* The residual add's backward: the main branch's gradient is the output's;
 * the shortcut's is the output's scattered back (a strided or
 * channel-padded shortcut), zeros where nothing was sampled. */
static void backward_add(struct sd_model *m, const struct node *n, int nb)
{
	struct act *in = &m->acts[n->in], *out = &m->acts[n->out], *b = &m->acts[n->in2];
	size_t cnt = act_floats(in) * nb;
	float *dx = grad_target(m, in);
	memcpy(dx, out->grad, cnt * sizeof(float));
	grad_commit(m, in, cnt);
	size_t bcnt = act_floats(b) * nb;
	float *db = grad_target(m, b);
	if (m->blk > 1) {
		sd_shortcut_backward_set(db, out->grad, nb, out->c, out->h, out->w, b->c, b->h, b->w,
		                         n->s, m->blk);
	} else {
		memset(db, 0, bcnt * sizeof(float));
		shortcut_backward(db, out->grad, in, b, nb, n->s);
	}
	grad_commit(m, b, bcnt);
}

/* Backward of convolution node i. */
static void backward_conv(struct sd_model *m, int i, int nb)
{
	struct node *n = &m->nodes[i];
	struct act *in = &m->acts[n->in], *out = &m->acts[n->out];
	float *p = m->params, *g = m->grads;
	const size_t cnt = act_floats(in) * nb;
	const int blk = m->blk, need_dx = n->in != 0;
	struct sd_conv2d_shape s = n->conv;
	s.n = nb;
	float *dx = need_dx ? grad_target(m, in) : NULL;
	float *db = n->b_off == NONE ? NULL : g + n->b_off;
	/* dx may stay in the bf16 kernels' float32 NHWC when it is all of
	 * in's gradient and the fused batch-norm group that produced in
	 * reads it next as its dy (backward_group), or when it is a
	 * further contribution, added from NHWC (sd_accumulate_nhwc). */
	const struct node *grp = i > 0 ? &m->nodes[i - 1] : NULL;
	const int bn_reads = in->consumers == 1 && grp && grp->fused_from &&
	                     grp->op != OP_SEQ && grp->out == n->in &&
	                     m->nodes[grp->fused_from - 1].op == OP_BN;
	n->conv_keep.dx_nhwc_ok = need_dx && blk == 16 && in->blk == 16 &&
	                          (in->grad_set || bn_reads);
	/* ... and in bf16, as autocast keeps it, where it is all of in's
	 * gradient (the batch-norm backward widens it as it reads it) or a
	 * further contribution (widened as added, sd_accumulate_nhwc_bf16;
	 * the sum stays float32). */
	n->conv_keep.dx_bf16_ok = n->conv_keep.dx_nhwc_ok;
	if (blk > 1)
		sd_conv2d_backward_blocked_kept(dx, g + n->w_off, db, out->grad, in->val,
		                                p + n->w_off, &s, in->blk, out->blk, m->ws,
		                                &n->conv_keep, &n->conv_keep_dy);
	else
		sd_conv2d_backward(dx, g + n->w_off, db, out->grad, in->val, p + n->w_off, &s,
		                   m->ws);
	if (need_dx && in->grad_set && blk > 1 && n->conv_keep.dx_nhwc == SD_DX_NHWC_F32) {
		sd_accumulate_nhwc(in->grad, m->scratch, nb, in->c, in->h * in->w);
		n->conv_keep.dx_nhwc = 0;
	} else if (need_dx && in->grad_set && blk > 1 && n->conv_keep.dx_nhwc == SD_DX_NHWC_BF16) {
		sd_accumulate_nhwc_bf16(in->grad, (const uint16_t *)(const void *)m->scratch, nb,
		                        in->c, in->h * in->w);
		n->conv_keep.dx_nhwc = 0;
	} else if (need_dx) {
		grad_commit(m, in, cnt);
	}
}

static int backward_node(struct sd_model *m, int i, int nb)
{
	struct node *n = &m->nodes[i];
	struct act *in = &m->acts[n->in], *out = &m->acts[n->out];
	float *p = m->params, *g = m->grads;
	size_t cnt = act_floats(in) * nb;
	const int blk = m->blk;
	/* The input image needs no gradient. */
	int need_dx = n->in != 0;
	if (n->fused_from)
		return n->op == OP_SEQ ? sd_seq_backward_group(m, i, nb) : backward_group(m, i, nb);
	switch (n->op) {
	case OP_CONV:
		backward_conv(m, i, nb);
		break;
	case OP_BN: {
		float *dx = grad_target(m, in);
		if (blk > 1)
			sd_batchnorm_act_backward(dx, NULL, g + n->w_off, g + n->b_off, out->grad,
			                          out->val, in->val, n->bn_mean, n->bn_invstd,
			                          p + n->w_off, nb, in->c, in->h * in->w, blk, 0);
		else
			sd_batchnorm_backward(dx, g + n->w_off, g + n->b_off, out->grad, in->val,
			                      n->bn_mean, n->bn_invstd, p + n->w_off, nb, in->c,
			                      in->h * in->w);
		grad_commit(m, in, cnt);
		break;
	}
	case OP_RELU:
		/* In place: in == out, so the gradient is already in in->grad. */
		sd_relu_backward(in->grad, in->grad, in->val, cnt);
		break;
	case OP_CONCAT:
		backward_concat(m, n, nb, need_dx);
		break;
	case OP_ACT:
		if (need_dx) {
			sd_act_backward(grad_target(m, in), out->grad, in->val, out->val, cnt, n->act,
			                n->act_a, n->act_b);
			grad_commit(m, in, cnt);
		}
		break;
	case OP_GCONV: {
		struct sd_gconv_shape s = n->gconv;
		s.n = nb;
		float *dx = need_dx ? grad_target(m, in) : NULL;
		sd_gconv_backward(dx, g + n->w_off, n->b_off == NONE ? NULL : g + n->b_off, out->grad,
		                  in->val, p + n->w_off, &s, m->ws);
		if (need_dx)
			grad_commit(m, in, cnt);
		break;
	}
	case OP_BINARY:
		backward_binary(m, n, nb, need_dx);
		break;
	case OP_DROPOUT:
		if (need_dx) {
			sd_dropout_backward(grad_target(m, in), out->grad, n->drop_mask, cnt, n->drop_p);
			grad_commit(m, in, cnt);
		}
		break;
	case OP_MAXPOOL: {
		float *dx = grad_target(m, in);
		if (n->pad)
			sd_maxpool_pad_backward(dx, out->grad, n->argmax, nb, in->c, in->h, in->w, n->k,
			                        n->s, n->pad);
		else
			sd_maxpool_backward(dx, out->grad, n->argmax, nb, in->c, in->h, in->w, n->k,
			                    n->s);
		grad_commit(m, in, cnt);
		break;
	}
	case OP_AVGPOOL: {
		float *dx = grad_target(m, in);
		if (blk > 1)
			sd_global_avgpool_backward(dx, out->grad, nb, in->c, in->h * in->w, in->blk);
		else if (n->pad)
			sd_avgpool_pad_backward(dx, out->grad, nb, in->c, in->h, in->w, n->k, n->s,
			                        n->pad, n->count_pad);
		else
			sd_avgpool_backward(dx, out->grad, nb, in->c, in->h, in->w, n->k, n->s);
		grad_commit(m, in, cnt);
		break;
	}
	case OP_LINEAR: {
		float *dx = need_dx ? grad_target(m, in) : NULL;
		sd_linear_backward(dx, g + n->w_off, n->b_off == NONE ? NULL : g + n->b_off, out->grad,
		                   in->val, p + n->w_off, nb, n->fc_in, n->fc_out);
		if (need_dx)
			grad_commit(m, in, cnt);
		break;
	}
	case OP_ADD:
		backward_add(m, n, nb);
		break;
	case OP_SEQ:
		sd_seq_backward(m, i, nb, need_dx);
		break;
	}
	return i;
}

static void backward(struct sd_model *m, int nb)
{
	for (int i = 0; i < m->nacts; i++)
		m->acts[i].grad_set = 0;
	m->acts[m->nacts - 1].grad_set = 1;   /* logits' gradient set by the loss */
	for (int i = m->nnodes - 1; i >= 0;) {
		double t0 = m->prof ? prof_now(m) : 0.0;
		int first = backward_node(m, i, nb);
		if (m->prof)
			m->prof[i].backward_s += prof_now(m) - t0;
		if (m->on_ready)
			m->on_ready(m->on_ready_ctx, m->ready_from[first]);
		i = first - 1;
	}
}

static int check_batch(const struct sd_model *m, int nb, char **why)
{
	if (m->seq_len)
		return sd_why(why, "model %s is a language model: it trains and evaluates on token "
		              "windows (sd_model_train_tokens), not on images", m->name);
	if (nb < 0 || nb > m->max_batch)
		return sd_why(why, "model %s: batch of %d samples, built for at most %d",
		              m->name, nb, m->max_batch);
	return 0;
}

int sd_model_train_batch(struct sd_model *m, const float *x, const uint8_t *labels,
                         int n, float grad_scale, double *loss_sum, int *correct,
                         char **why)
{
	if (check_batch(m, n, why) < 0)
		return -1;
	memset(m->grads, 0, m->nparams * sizeof(float));
	if (loss_sum)
		*loss_sum = 0;
	if (correct)
		*correct = 0;
	if (n == 0)
		return 0;
	forward(m, x, n, 1);
	struct act *logits = &m->acts[m->nacts - 1];
	double loss = sd_softmax_xent_forward(m->probs, correct, logits->val, labels, n, m->classes);
	if (loss_sum)
		*loss_sum = loss;
	sd_softmax_xent_backward(logits->grad, m->probs, labels, n, m->classes, grad_scale);
	backward(m, n);
	return 0;
}

int sd_model_eval_batch(struct sd_model *m, const float *x, const uint8_t *labels,
                        int n, double *loss_sum, int *correct, char **why)
{
	if (check_batch(m, n, why) < 0)
		return -1;
	if (n == 0) {
		if (loss_sum)
			*loss_sum = 0;
		if (correct)
			*correct = 0;
		return 0;
	}
	forward(m, x, n, 0);
	struct act *logits = &m->acts[m->nacts - 1];
	double loss = sd_softmax_xent_forward(m->probs, correct, logits->val, labels, n, m->classes);
	if (loss_sum)
		*loss_sum = loss;
	return 0;
}

/* ---- language models ---- */

int sd_model_seq_len(const struct sd_model *m)
{
	return m->seq_len;
}

/* Checks a token batch and puts x into the input activation. */
static int tokens_in(struct sd_model *m, const int32_t *x, const int32_t *y, int n, char **why)
{
	if (!m->seq_len)
		return sd_why(why, "%s: not a language model (its input is not token ids)", m->name);
	if (n < 0 || n > m->max_batch)
		return sd_why(why, "model %s: batch of %d samples, built for at most %d",
		              m->name, n, m->max_batch);
	const size_t cnt = (size_t)n * m->seq_len;
	for (size_t k = 0; k < cnt; k++) {
		if (x[k] < 0 || x[k] >= m->classes)
			return sd_why(why, "model %s: input token id %d at position %zu is not below "
			              "its vocabulary of %d", m->name, x[k], k, m->classes);
		if (y[k] < 0 || y[k] >= m->classes)
			return sd_why(why, "model %s: target token id %d at position %zu is not below "
			              "its vocabulary of %d", m->name, y[k], k, m->classes);
	}
	float *in = m->acts[0].val;
	for (size_t k = 0; k < cnt; k++)
		in[k] = (float)x[k];
	return 0;
}

int sd_model_train_tokens(struct sd_model *m, const int32_t *x, const int32_t *y, int n,
                          float grad_scale, double *loss_sum, char **why)
{
	if (tokens_in(m, x, y, n, why) < 0)
		return -1;
	memset(m->grads, 0, m->nparams * sizeof(float));
	if (loss_sum)
		*loss_sum = 0;
	if (n == 0)
		return 0;
	run_forward(m, n, 1);
	struct act *logits = &m->acts[m->nacts - 1];
	double loss = sd_seq_xent(logits->val, logits->grad, y, (size_t)n * m->seq_len,
	                          m->classes, grad_scale);
	if (loss_sum)
		*loss_sum = loss;
	backward(m, n);
	return 0;
}

int sd_model_eval_tokens(struct sd_model *m, const int32_t *x, const int32_t *y, int n,
                         double *loss_sum, char **why)
{
	if (tokens_in(m, x, y, n, why) < 0)
		return -1;
	if (loss_sum)
		*loss_sum = 0;
	if (n == 0)
		return 0;
	run_forward(m, n, 0);
	struct act *logits = &m->acts[m->nacts - 1];
	double loss = sd_seq_xent(logits->val, NULL, y, (size_t)n * m->seq_len, m->classes, 0);
	if (loss_sum)
		*loss_sum = loss;
	return 0;
}
